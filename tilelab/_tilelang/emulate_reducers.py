"""The ``reducers`` rule of the CPU path: TileLang's reducer epochs as the loops of their meaning

A reducer (``acc = T.alloc_reducer(shape, dtype, op=...)``) is a deferred reduction: ``T.reducer_init(acc[,
init])`` opens it, each ``T.reducer_update(acc[i], v)`` contributes ``v`` to the logical output ``i``
(once per logical iteration of its ``T.Parallel`` loop, however the GPU replicates the loop over its
threads), and ``T.finalize_reducer(acc, dst)`` combines the threads' partial results and writes each
logical output into ``dst``. TileLang's own lowering of the epoch plans how the block's threads share the
partials, and it needs each update inside a ``T.Parallel`` loop to know how many times a contribution is
counted; on the CPU the ``parallel`` rule has made those loops serial, so that lowering refuses the
kernel (an update "outside any T.Parallel loop").

One CPU thread runs the block, so the epoch's meaning is plain:

- the reducer is an array of its shape local to the block;
- ``T.reducer_init`` sets every element to ``init`` (the one extra contribution it stands for, taken
  where the init is written), or to the identity of the combine (sum, bitor, bitxor: 0; max: the
  type's lowest value; min: its highest; bitand: all ones);
- ``T.reducer_update(acc[i], v)`` is ``acc[i] = combine(acc[i], v)``: each logical iteration once;
- ``T.finalize_reducer(acc, dst)`` copies the reducer into ``dst``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .emulate_source import EmulationRefused
from .env import tilelang
from .errors import tilelang_errors

RULE_ID = "reducers"
_INIT, _UPDATE, _FINALIZE = "tl.tileop.reducer_init", "tl.reducer_update", "tl.tileop.finalize_reducer_v2"


def _combine(op: str) -> Callable[[Any, Any], Any] | None:
    tirx = tilelang().tvm.tirx
    return {"sum": lambda a, b: a + b, "max": tirx.max, "min": tirx.min, "bitand": tirx.bitwise_and,
            "bitor": tirx.bitwise_or, "bitxor": tirx.bitwise_xor}.get(op)


def _identity(op: str, dtype: str) -> Any:
    tirx = tilelang().tvm.tirx
    if op == "max":
        return tirx.min_value(dtype)
    if op == "min":
        return tirx.max_value(dtype)
    if op == "bitand":
        return tirx.bitwise_not(tirx.const(0, dtype))
    return tirx.const(0, dtype)


def _at(region: Any, loops: list[Any]) -> list[Any]:
    """The indices into a region's buffer (``tl.region(buf[starts], mask, *extents)``) of the element at
    ``loops`` from its start (a region of fewer axes than its buffer fixes the leading ones)."""
    starts = list(region.args[0].indices)
    lead = len(starts) - len(loops)
    return [s if i < lead else s + loops[i - lead] for i, s in enumerate(starts)]


def _region_loops(region: Any, body: Callable[[list[Any]], Any], tag: str) -> Any:
    """Loops over a tile operation's region, ``body`` given the position of each element in it."""
    tirx = tilelang().tvm.tirx
    extents = list(region.args[2:])
    rank = len(extents)
    loops = [tirx.Var(f"tilelab_{tag}{i}", "int32") for i in range(rank)]
    stmt = body(loops)
    for i in reversed(range(rank)):
        stmt = tirx.For(loops[i], 0, extents[i], tirx.ForKind.SERIAL, stmt)
    return stmt


def reducers(func: Any, name: str) -> tuple[Any, bool]:
    """``func`` with each reducer epoch as its loops (see the module's docstring), and whether it had
    any. Raises :class:`EmulationRefused` for a reducer whose combine this rule does not know."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    ops: dict[Any, str] = {}  # a reducer's data -> its combine

    def find(node: Any) -> None:
        if isinstance(node, tirx.SBlock) and "reducer_info_v2" in node.annotations:
            for data, info in node.annotations["reducer_info_v2"].items():
                ops[data] = str(info["op"])

    tirx.stmt_functor.post_order_visit(func.body, find)
    if not ops:
        return func, False
    # TileLang's own check of the epochs (one init, updates after it, a finalize after them), which its
    # GPU lowering runs: a kernel it rejects for the GPU is not run on the CPU either (an update before
    # any init would add to whatever the CPU's array held).
    with tilelang_errors(kernel=name, stage="lowering"):
        tilelang().transform.VerifyReducerEpoch()(tvm.IRModule({"main": func}))
    for op in ops.values():
        if _combine(op) is None:
            raise EmulationRefused(name, f"a reducer combining by {op!r}",
                                   "the CPU run knows the combines sum, max, min, bitand, bitor and bitxor")
    local: dict[Any, Any] = {}  # a reducer's data -> the block's array that holds it on the CPU

    def declare(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            for buf in node.alloc_buffers:
                if buf.data in ops:
                    local[buf.data] = tirx.decl_buffer(buf.shape, buf.dtype, str(buf.name), scope="local")

    tirx.stmt_functor.post_order_visit(func.body, declare)

    def held(load: Any) -> Any:
        return local.get(load.buffer.data) if isinstance(load, tirx.BufferLoad) else None

    def post(node: Any) -> Any:
        if isinstance(node, tirx.SBlock):
            if not any(b.data in local for b in node.alloc_buffers):
                return None
            allocs = [local.get(b.data, b) for b in node.alloc_buffers]
            annotations = {k: v for k, v in node.annotations.items() if k != "reducer_info_v2"}
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               allocs, node.match_buffers, annotations)
        if not (isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call)):
            return None
        call = node.value
        op = str(getattr(call.op, "name", ""))
        if op == _UPDATE and held(call.args[0]) is not None:
            target = call.args[0]
            acc = held(target)
            combine = _combine(ops[target.buffer.data])
            assert combine is not None
            value = call.args[1]
            if str(value.dtype) != str(acc.dtype):
                value = tirx.Cast(str(acc.dtype), value)
            return tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, target.indices), value), target.indices)
        if op == _INIT and held(call.args[0].args[0]) is not None:
            region = call.args[0]
            acc = held(region.args[0])
            kind = ops[region.args[0].buffer.data]
            start = call.args[1] if len(call.args) > 1 else _identity(kind, str(acc.dtype))
            if str(start.dtype) != str(acc.dtype):
                start = tirx.Cast(str(acc.dtype), start)
            if len(call.args) > 1:  # the init's value, taken where it is written
                seed = tirx.Var("tilelab_init", str(acc.dtype))
                return tirx.SeqStmt([tirx.Bind(seed, start), _region_loops(
                    region, lambda at: tirx.BufferStore(acc, seed, _at(region, at)), "init")])
            return _region_loops(region, lambda at: tirx.BufferStore(acc, start, _at(region, at)), "init")
        if op == _FINALIZE and held(call.args[0].args[0]) is not None:
            src, dst = call.args[0], call.args[1]
            acc = held(src.args[0])
            if len(src.args) != len(dst.args):
                problems.append(EmulationRefused(name, "a T.finalize_reducer into a tile of another rank",
                                                 "the CPU run copies the reducer into a destination of its shape"))
                return None
            return _region_loops(src, lambda at: tirx.BufferStore(dst.args[0].buffer, tirx.BufferLoad(
                acc, _at(src, at)), _at(dst, at)), "fin")
        return None

    problems: list[EmulationRefused] = []
    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock", "tirx.Evaluate"])
    if problems:  # raised after the walk: TVM's callbacks would wrap it
        raise problems[0]
    return func.with_body(body, span=func.span), True
