"""Tracing a CPU kernel's global accesses (tilelab.trace_tiles)

Self-contained: everything below serves ``launch/_trace.py`` only. A target-c kernel is
compiled again with one extra TIR pass, run just before TileLang's FlattenBuffer (tile ops are
lowered to loads and stores by then, block loops are plain loops, and every access still has
its per-dimension indices): each load of a kernel parameter becomes
``tilelab_trace_access(...) ? A[i, j] : 0`` and each store ``if (tilelab_trace_access(...))
B[i, j] = ...``. The function (C, in the trace runtime tilelab builds) logs the access with its
block and answers whether the index is inside the tensor, so an out-of-bounds access is logged
and not performed. Vectorisation is off for this compile (one call per element)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .compile import compile_kernel
from .env import tilelang
from .passes import passes_before
from .resolve import kernel_fingerprint, resolve_kernel

TRACE_ACCESS_FUNCTION = "tilelab_trace_access"
TRACE_READ, TRACE_WRITE, TRACE_ATOMIC = 0, 1, 2  # kinds of access: tensor id * 4 + kind goes to the call
TRACE_ATOMIC_ATTR = "tilelab_atomic"  # marks an atomic update from before LowerTileOp to the trace pass
TRACE_MAX_RANK = 6  # indices per call; a tensor of higher rank is traced by its flat index


@dataclass(frozen=True)
class TracedKernel:
    """A kernel compiled for the CPU with every global access traced.

    ``compiled`` is TileLang's JITKernel (launch it as any target-c kernel, with the trace runtime
    loaded); ``tensors`` names the tensor of each id the access function receives (the kernel's
    tensor parameters, in order); ``grid_rank`` is how many grid axes ``T.Kernel`` gave (1-3);
    ``untraced`` says which tensors were also reached in ways the trace cannot see."""

    compiled: Any
    tensors: tuple[str, ...]
    grid_rank: int
    untraced: tuple[str, ...] = ()


def _block_vars(func: Any) -> tuple[dict[str, Any], int]:
    """{"x"|"y"|"z": the Var of that blockIdx binding} of a prim_func, and the grid's rank."""
    tvm = tilelang().tvm
    found: dict[str, Any] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.thread_binding is not None:
            tag = str(node.thread_binding.thread_tag)
            if tag.startswith("blockIdx.") and tag[-1] in "xyz":
                found.setdefault(tag[-1], node.loop_var)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    rank = max(("xyz".index(a) + 1 for a in found), default=1)
    return found, rank


def _trace_pass(tensor_ids: dict[str, int], block_vars: dict[str, Any], untraced: set[str]) -> Any:
    """The TIR pass that wraps every load and store of a tensor parameter in an access call."""
    # Long but whole: one TIR pass whose hooks (find, owner, call, rewrite) share the kernel's tensors and
    # its block loops; split, each would take both as arguments.
    tvm = tilelang().tvm
    tirx = tvm.tirx

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        # Long but whole: the pass's body (see above), its hooks closures over one kernel's state.
        by_data: dict[Any, tuple[int, Any]] = {}
        for param in func.params:
            buf = func.buffer_map.get(param)
            if buf is not None and buf.name in tensor_ids:
                by_data[buf.data] = (tensor_ids[buf.name], buf)
        if not by_data:
            return func
        block_loops = {}  # loop var -> axis, for the loops that enumerate the grid's blocks
        block_names = {str(v.name): a for a, v in block_vars.items()}

        def find(node: Any) -> None:
            if isinstance(node, tirx.For):
                for axis, var in block_vars.items():
                    if node.loop_var.same_as(var):
                        block_loops[node.loop_var] = axis
                if node.loop_var not in block_loops and str(node.loop_var.name) in block_names:
                    block_loops[node.loop_var] = block_names[str(node.loop_var.name)]

        tirx.stmt_functor.post_order_visit(func.body, find)

        def owner(buf: Any) -> tuple[int, Any] | None:
            for data, entry in by_data.items():
                if buf.data.same_as(data):
                    return entry
            return None

        def call(buf: Any, indices: Any, kind: int, scope: dict[str, Any]) -> Any | None:
            tid, param = owner(buf)  # type: ignore[misc]
            if any(i.dtype.lanes != 1 for i in indices):
                untraced.add(param.name)
                return None
            i64 = "int64"
            same = len(buf.shape) == len(param.shape) and all(
                tvm.arith.Analyzer().can_prove_equal(a, b) for a, b in zip(buf.shape, param.shape))
            if same and len(indices) <= TRACE_MAX_RANK:
                idx = [tirx.Cast(i64, i) for i in indices]
                shape = [tirx.Cast(i64, s) for s in buf.shape]
            else:  # a view of the tensor (or a rank beyond the call's): its flat element index
                flat = tirx.Cast(i64, buf.elem_offset) if buf.elem_offset is not None else tirx.const(0, i64)
                strides = list(buf.strides) if len(buf.strides) else None
                if strides is None:
                    strides, step = [], tirx.const(1, i64)
                    for extent in reversed(list(buf.shape)):
                        strides.insert(0, step)
                        step = step * tirx.Cast(i64, extent)
                for i, s in zip(indices, strides):
                    flat = flat + tirx.Cast(i64, i) * tirx.Cast(i64, s)
                numel = tirx.const(1, i64)
                for extent in param.shape:
                    numel = numel * tirx.Cast(i64, extent)
                idx, shape = [flat], [numel]
            rank = len(idx)
            idx += [tirx.const(0, i64)] * (TRACE_MAX_RANK - rank)
            shape += [tirx.const(1, i64)] * (TRACE_MAX_RANK - rank)
            blocks = [tirx.Cast("int32", scope[a]) if a in scope else tirx.const(0, "int32") for a in "xyz"]
            return tirx.call_extern("int32", TRACE_ACCESS_FUNCTION, tirx.const(tid * 4 + kind, "int32"), *blocks,
                                    tirx.const(rank, "int32"), *idx, *shape)

        def rewrite(stmt: Any, scope: dict[str, Any], atomic: bool = False) -> Any:
            def pre(node: Any) -> Any:
                if isinstance(node, tirx.AttrStmt) and str(node.attr_key) == TRACE_ATOMIC_ATTR:
                    return rewrite(node.body, scope, True)  # the marker goes; its stores are atomic
                if isinstance(node, tirx.For) and node.loop_var in block_loops \
                        and block_loops[node.loop_var] not in scope:
                    inner = {**scope, block_loops[node.loop_var]: node.loop_var}
                    return tirx.For(node.loop_var, node.min, node.extent, node.kind, rewrite(node.body, inner, atomic),
                                    node.thread_binding, node.annotations)
                return None

            def post(node: Any) -> Any:
                if isinstance(node, tirx.BufferLoad) and owner(node.buffer) is not None:
                    check = call(node.buffer, node.indices, TRACE_READ, scope)
                    if check is None:
                        return None
                    return tirx.if_then_else(check != 0, node, tirx.const(0, node.dtype))
                if isinstance(node, tirx.BufferStore) and owner(node.buffer) is not None:
                    check = call(node.buffer, node.indices, TRACE_ATOMIC if atomic else TRACE_WRITE, scope)
                    if check is None:
                        return None
                    # The value first, as the kernel computes it before storing: a read feeding an
                    # out-of-bounds write is still a read (and is traced).
                    value = tirx.Var("tilelab_stored", node.value.dtype)
                    store = tirx.BufferStore(node.buffer, value, node.indices, node.predicate)
                    return tirx.SeqStmt([tirx.Bind(value, node.value), tirx.IfThenElse(check != 0, store, None)])
                return None

            return tirx.stmt_functor.ir_transform(stmt, pre, post, ["tirx.For", "tirx.AttrStmt", "tirx.BufferLoad",
                                                                    "tirx.BufferStore"])

        body = rewrite(func.body, {})

        def reached_otherwise(node: Any) -> None:  # a tensor's pointer handed to a call
            if isinstance(node, tirx.Call):
                for arg in node.args:
                    if isinstance(arg, tirx.Var):
                        for data, (_, param) in by_data.items():
                            if arg.same_as(data):
                                untraced.add(param.name)

        tirx.stmt_functor.post_order_visit(body, reached_otherwise)
        return func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tilelab.TraceGlobalAccesses")


def _mark_atomics_pass() -> Any:
    """Wraps each atomic operation (``T.atomic_add`` and kin, on an element or a tile region) in
    an attribute the trace pass reads: TileLang's CPU lowering turns them into plain
    read-modify-writes, after which an atomic update looks like any other store."""
    tirx = tilelang().tvm.tirx

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        def post(node: Any) -> Any:
            call = node.value if isinstance(node, tirx.Evaluate) else None
            op = getattr(call, "op", None) if isinstance(call, tirx.Call) else None
            if op is not None and "atomic" in str(getattr(op, "name", "")):
                return tirx.AttrStmt(tirx.StringImm("tilelab"), TRACE_ATOMIC_ATTR, tirx.const(1, "int32"), node)
            return None

        return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate"]))

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tilelab.MarkAtomics")


def _flatten_buffer_traced(trace: Any):
    """TileLang's CPU pipeline marks atomics before its LowerTileOp pass and runs ``trace`` before
    its FlattenBuffer pass."""
    return passes_before({"FlattenBuffer": trace, "LowerTileOp": _mark_atomics_pass()})


def compile_traced(obj: Any, *, out_idx: list[int] | None = None, pass_configs: dict[str, Any] | None = None,
                   args: tuple = (), kwargs: dict | None = None) -> TracedKernel:
    """Compile ``obj`` (any kernel-like object; a compiled kernel is compiled again from its
    prim_func) for the CPU with its global accesses traced. TileLang's kernel cache is off for
    this compile, so the traced kernel never answers for the plain one. Raises LoweringError with
    TileLang's reason when the kernel cannot be lowered or built for target c."""
    from .emulate import CPU_PASS_CONFIGS, rewrite_for_cpu

    source = resolve_kernel(obj, args, kwargs)
    # A kernel written for a GPU is traced through its tile program's meaning on the CPU (the rules of
    # tilelab.run(device="cpu")); a CPU kernel goes through the same rewrite unchanged in meaning.
    # (its compile has no late pass: narrow tensors are float32 ones, not their bits)
    func = rewrite_for_cpu(source.prim_func, source.name, mask=False, waits=False, narrow_bits=False).func
    tensors = tuple(str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map)
    block_vars, rank = _block_vars(func)
    untraced: set[str] = set()
    trace = _trace_pass({name: i for i, name in enumerate(tensors)}, block_vars, untraced)
    configs = {**source.pass_configs, **(pass_configs or {}), **CPU_PASS_CONFIGS}
    idx = out_idx if out_idx is not None else source.out_idx
    with _flatten_buffer_traced(trace):
        compiled = compile_kernel(func, target="c", backend="cython", out_idx=idx, pass_configs=configs,
                                  force=True)
    return TracedKernel(compiled, tensors, rank, tuple(sorted(untraced)))


def traced_kernel_key(obj: Any) -> str:
    """What a traced compile of ``obj`` depends on: its fingerprint (TVM's structural hash, which
    ignores names) and its tensor parameters' names (which the trace reports by)."""
    func = getattr(obj, "prim_func", obj)
    names: list[str] = []
    if isinstance(func, tilelang().tvm.tirx.PrimFunc):
        names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    return f"{kernel_fingerprint(obj)}:{','.join(names)}"


def cxx_compiler() -> str:
    """The host C++ compiler TileLang builds target-c kernels with."""
    from tilelang.contrib.cc import get_cplus_compiler

    return get_cplus_compiler() or "c++"
