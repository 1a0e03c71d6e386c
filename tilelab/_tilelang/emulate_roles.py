"""The ``warp-roles`` rule of the CPU path: hand-written warp specialisation and mbarriers, in program order

``with T.ws(k):`` gives a warp group of the block its own code; ``T.alloc_barrier`` makes mbarriers
through which the groups hand tiles to each other (``T.barrier_arrive`` / ``T.mbarrier_arrive``,
``T.barrier_wait`` / ``T.mbarrier_wait_parity``, ``T.tma_copy(..., barrier=...)``). On the CPU the
block's code runs in the order it is written:

- each ``T.ws(k)`` region runs once, for its warp group: its tile operations whole (code in it
  that indexes by thread stays under its branch on the thread, for the thread-level rule);
- every mbarrier becomes a small counter in the block: the phases it has completed and the
  arrivals of the current phase (the arrive count is ``T.alloc_barrier``'s); an arrive made by a
  region counts the arrivals of the threads that run it (the group's, or the block's outside any
  region; under a branch on the thread alone, around code that does not index by thread, the
  threads its condition picks), and a phase completes when its arrivals reach the count;
- a TMA copy with ``barrier=`` performs its copy at once (its bytes are never outstanding, so an
  expected transaction count is met when the copy is written);
- a wait for parity ``P`` returns when the phase of parity ``P`` has completed, by the PTX rule:
  when the barrier's current phase has the other parity (a fresh barrier is in phase 0, so a
  wait for parity 1 passes at once).

In program order nothing runs while a wait waits: a wait that finds its phase incomplete can
never be satisfied (a consumer written before its producer, an arrive missing). It is recorded
with the barrier, its parity and the kernel's line, and the run fails with that report; the wait
does not hang.

What stays refused by name: an mbarrier op this rule does not know, an arrive under a condition
whose threads cannot be counted (one that reads data, or around code that indexes by thread), and
an mbarrier op in a region whose code indexes by thread (the thread-level rule would run it once
per thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .emulate_threads import _call_args as _args
from .emulate_threads import _op_name as _op
from .env import tilelang

RULE_ID = "warp-roles"
PROTOCOL_BUFFER = -2  # the out-of-bounds record's buffer id of an unsatisfiable wait
PROTOCOL_KIND = 2  # ... and its kind; its indices: the barrier's number, its element, the parity, the line

_WAIT = r"mbarrier_wait_parity$|(?<!named_)barrier_wait$"
_ARRIVE = r"ptx_arrive_barrier$|mbarrier_arrive$|(?<!named_)barrier_arrive$|arrive_barrier$|" \
          r"arrive_barrier_expect_tx$|mbarrier_arrive_expect_tx$|barrier_arrive_expect_tx$"
_EXPECT = r"expect_tx$"  # an expected byte count alone: met at once, the copies being immediate
_THREAD_OPS = ("tl.get_thread_binding", "tl.get_lane_idx", "tl.get_warp_idx_sync", "tl.get_warp_idx",
               "tl.get_warp_group_idx")
_WAIT_SOURCE = r"\bT\.(mbarrier_wait_parity|barrier_wait)\b"
_BARRIER_SOURCE = r"\bT\.(mbarrier_\w+|barrier_\w+|alloc_barrier)\b"
_ARRIVE_SOURCE = r"\bT\.(mbarrier_arrive|barrier_arrive)\w*"
_OPS_SOURCE = r"\bT\.(mbarrier_\w+|barrier_\w+)\b"


@dataclass
class WarpRoles:
    """What the rule did: ``func`` (rewritten, or the same), ``applied``, ``barriers`` (the names of
    the block's mbarriers, numbered as the protocol records number them)."""

    func: Any
    applied: bool = False
    barriers: list[str] = field(default_factory=list)
    # mbarriers that code by thread arrives on (an arrive under a condition on the thread, an mbarrier op
    # in a T.ws region whose code indexes by thread): the block is the thread-level rule's to interleave
    # (emulate_barriers.py), and ``func`` is the kernel as it came
    handed_over: bool = False


def barrier_setup(tirx: Any, node: Any, roots: list[Any], counts: dict[str, list[int]], thread_vars: set[Any]) -> bool:
    """One node of a walk that finds a block's mbarriers (shared by this rule and the thread-level
    rule's interleaving): a block with ``barrier_init`` joins ``roots`` and gives ``counts`` (each
    mbarrier's arrive counts by name); a thread index bound by ``tl.launch_thread_idx`` joins
    ``thread_vars``. True where the node was one of those."""
    if isinstance(node, tirx.SBlock) and "barrier_init" in node.annotations:
        roots.append(node)
        for data, arrive in node.annotations["barrier_init"].items():
            counts[str(data.name)] = [int(c) for c in arrive]
        return True
    if isinstance(node, tirx.Bind) and isinstance(node.value, tirx.Call) \
            and str(getattr(node.value.op, "name", "")) == "tl.launch_thread_idx":
        thread_vars.add(node.var)
        return True
    return False


def thread_derived(tirx: Any, body: Any, thread_vars: set[Any]) -> dict[Any, Any]:
    """The variables ``body`` binds to values that depend on the thread index (``w = tx // 32``),
    each with its value in terms of the thread index itself (the bindings it reads inlined)."""
    binds: list[Any] = []
    tirx.stmt_functor.post_order_visit(body, lambda n: binds.append(n) if isinstance(n, tirx.Bind) else None)
    derived: dict[Any, Any] = {}
    changed = True
    while changed:
        changed = False
        for b in binds:
            if b.var in derived or b.var in thread_vars:
                continue
            if any(_mentions(b.value, v) for v in [*thread_vars, *derived]):
                derived[b.var] = tirx.stmt_functor.substitute(b.value, derived) if derived else b.value
                changed = True
    return derived


class _HandOver(Exception):
    """Raised inside the walk: the block's mbarriers are the thread-level rule's."""


def warp_roles(func: Any, name: str, *, waits: bool = True) -> WarpRoles:
    """``func`` with its ``T.ws`` regions and mbarriers given their program-order meaning (see the
    module's docstring); ``waits=False``: a build with no record of unsatisfiable waits (the tile
    trace's), where an mbarrier wait is refused. Raises :class:`~tilelab._tilelang.emulate.EmulationRefused` for what it
    cannot give one."""
    from .emulate_source import EmulationRefused, _source_lines
    from .emulate_threads import _source_line

    tvm = tilelang().tvm
    tirx = tvm.tirx
    result = WarpRoles(func)
    barriers: dict[Any, Any] = {}  # the barrier buffer -> its counter buffer
    counts: dict[str, list[int]] = {}
    roots: list[Any] = []
    thread_vars: set[Any] = set()
    uses = {"ws": False, "barrier": False, "named": False}

    def find(node: Any) -> None:
        if barrier_setup(tirx, node, roots, counts, thread_vars):
            pass
        elif isinstance(node, tirx.AttrStmt) and str(node.attr_key) == "warp_specialize":
            uses["ws"] = True
        elif isinstance(node, tirx.Call) and re.search(_WAIT + "|" + _ARRIVE + "|" + _EXPECT, _op(node)):
            uses["barrier"] = True
        elif isinstance(node, tirx.Call) and _op(node).endswith("named_barrier_arrive"):
            uses["named"] = True

    tirx.stmt_functor.post_order_visit(func.body, find)
    if uses["named"]:  # one-sided named barriers: groups that take turns, the thread-level rule's
        return WarpRoles(func, handed_over=True)
    if not uses["ws"] and not uses["barrier"]:
        return result
    _, _, lines = _source_lines(func)

    def refuse(construct: str, why: str, source: str) -> Exception:
        file, line, text = _source_line(func, source)
        return EmulationRefused(name, construct, why, file, line, text)

    # the block's threads (T.Kernel's threads=), and the block-index variables a record names
    threads = 128
    for root in roots or []:
        given = root.annotations.get("tl.launch_threads")
        if given is not None:
            threads = 1
            for e in given:
                threads *= int(e)
    if not roots:
        def launch(node: Any) -> None:
            nonlocal threads
            if isinstance(node, tirx.SBlock) and "tl.launch_threads" in node.annotations:
                threads = 1
                for e in node.annotations["tl.launch_threads"]:
                    threads *= int(e)
        tirx.stmt_functor.post_order_visit(func.body, launch)
    block_vars: dict[str, Any] = {}

    def blocks(node: Any) -> None:
        if isinstance(node, tirx.For) and node.thread_binding is not None:
            tag = str(node.thread_binding.thread_tag)
            if tag.startswith("blockIdx.") and tag[-1] in "xyz":
                block_vars.setdefault(tag[-1], node.loop_var)

    tirx.stmt_functor.post_order_visit(func.body, blocks)

    for root in roots:
        for buf in root.alloc_buffers:
            if buf.scope() == "shared.barrier":
                n = len(counts.get(str(buf.data.name), counts.get(str(buf.name), [])))
                if n == 0:
                    raise refuse(f"the mbarrier {buf.name} with no arrive count", "T.alloc_barrier gives every "
                                 "mbarrier its count of arrivals; this one has none the CPU run can read",
                                 _BARRIER_SOURCE)
                counter = tirx.decl_buffer((2 * n,), "int32", str(buf.name), scope="local")
                barriers[buf.data] = (buf, counter, counts.get(str(buf.data.name), counts.get(str(buf.name))))
                result.barriers.append(str(buf.name))
    number = {data: i for i, data in enumerate(barriers)}

    def varies(stmt: Any) -> bool:
        found: list[Any] = []

        def visit(n: Any) -> None:
            by_var = isinstance(n, tirx.Var) and n in thread_vars
            if by_var or isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _THREAD_OPS:
                found.append(n)

        tirx.stmt_functor.post_order_visit(stmt, visit)
        return bool(found)

    analyzer = tvm.arith.Analyzer()

    def group_size(cond: Any) -> int:
        """How many of the block's threads meet ``cond`` (a T.ws region's condition on the thread)."""
        free = [v for v in thread_vars if _mentions(cond, v)]
        if len(free) != 1:
            return -1
        v = free[0]
        taken = 0
        for t in range(threads):
            value = analyzer.simplify(tirx.stmt_functor.substitute(cond, {v: tirx.const(t, v.dtype)}))
            if not isinstance(value, tirx.IntImm):
                return -1
            taken += int(value) != 0
        return taken

    seen: dict[str, int] = {}
    zero = tirx.const(0, "int32")

    def barrier_of(arg: Any, what: str) -> tuple[Any, Any, list[int]]:
        if not isinstance(arg, tirx.BufferLoad) or arg.buffer.data not in barriers:
            raise refuse(f"an mbarrier {what} on something other than a T.alloc_barrier barrier",
                         "the CPU run knows the block's mbarriers by their T.alloc_barrier", _BARRIER_SOURCE)
        _, counter, arrive = barriers[arg.buffer.data]
        index = arg.indices[0] if len(arg.indices) else zero
        return counter, tirx.Cast("int32", index), arrive

    def arrive_count(arrive: list[int], index: Any) -> Any:
        value: Any = tirx.const(arrive[-1], "int32")
        for i in range(len(arrive) - 2, -1, -1):
            value = tirx.Select(index == tirx.const(i, "int32"), tirx.const(arrive[i], "int32"), value)
        return value

    def arrive(call: Any, arrivals: int) -> Any:
        counter, index, counts_ = barrier_of(_args(call)[0], "arrive")
        n = len(counts_)
        phase, pending = [index], [index + tirx.const(n, "int32")]
        count = arrive_count(counts_, index)
        added = tirx.BufferLoad(counter, pending) + tirx.const(arrivals, "int32")
        held = tirx.Var("tilelab_arrived", "int32")
        return tirx.SeqStmt([
            tirx.Bind(held, added),
            tirx.BufferStore(counter, tirx.BufferLoad(counter, phase) + tirx.floordiv(held, count), phase),
            tirx.BufferStore(counter, tirx.floormod(held, count), pending)])

    def wait(call: Any) -> Any:
        if not waits:
            raise refuse("an mbarrier wait in a traced kernel",
                         "the trace records accesses, not whether a wait is ever met: tilelab.run(kernel, "
                         "device='cpu') runs the protocol and reports a wait program order never meets", _WAIT_SOURCE)
        args = _args(call)
        counter, index, counts_ = barrier_of(args[0], "wait")
        parity = tirx.Cast("int32", args[1]) if len(args) > 1 else zero
        which = number[args[0].buffer.data]
        # the line: the nth wait on this barrier in the IR is taken as the nth in the source that names it
        # (a Python-level branch the IR no longer holds can shift it; the barrier's name is exact)
        bname = str(args[0].buffer.name)
        nth = seen.setdefault(bname, 0)
        seen[bname] += 1
        hits = [i for i, text in enumerate(lines) if re.search(_WAIT_SOURCE, text.split("#", 1)[0])
                and re.search(rf"\b{re.escape(bname)}\b", text)]
        if not hits:
            hits = [i for i, text in enumerate(lines) if re.search(_WAIT_SOURCE, text.split("#", 1)[0])]
        _, start, _ = _source_lines(func)
        line = start + hits[min(nth, len(hits) - 1)] if hits else 0
        # PTX: a wait on parity P completes when the barrier's current phase has the other parity
        done = tirx.floormod(tirx.BufferLoad(counter, [index]), tirx.const(2, "int32")) != tirx.floormod(
            parity, tirx.const(2, "int32"))
        i64 = "int64"
        idx = [tirx.Cast(i64, tirx.const(which, "int32")), tirx.Cast(i64, index), tirx.Cast(i64, parity),
               tirx.const(line, i64), tirx.const(0, i64), tirx.const(0, i64)]
        bxyz = [tirx.Cast("int32", block_vars[a]) if a in block_vars else zero for a in "xyz"]
        from .emulate_source import oob_call
        record = oob_call(PROTOCOL_BUFFER, PROTOCOL_KIND, *bxyz, 4, *idx, len(counts_), *[0] * 5)
        return tirx.IfThenElse(tirx.Not(done), tirx.Evaluate(record), None)

    def rewrite(stmt: Any, arrivals: int, in_threaded: bool, under_thread_if: bool, picked: Any = None) -> Any:
        """``stmt`` with its barrier ops as counter updates and its T.ws regions opened. ``picked``:
        the condition on the thread that the enclosing branches put (None: none, or one whose code
        runs by thread, so that an arrive under it is not one of the threads it picks)."""
        def pre(node: Any) -> Any:
            if problems:
                return node
            try:
                return rewritten(node)
            except (EmulationRefused, _HandOver) as err:  # raised after the walk: TVM's callbacks would wrap it
                problems.append(err)
                return node

        def counted_branches(node: Any) -> Any:
            """A branch on the thread alone around mbarrier ops and code that does not index by
            thread: each side runs once when some thread takes it (as the thread-level rule runs
            such a branch), its arrives counting the threads its condition picks; None when the
            threads cannot be counted or the branch needs the thread-level rule."""
            cases = [(node.then_case, node.condition), (node.else_case, tirx.Not(node.condition))]
            if in_threaded or (under_thread_if and picked is None) or not barrier_ops(node) \
                    or any(case is not None and varies(case) for case, _ in cases):
                return None
            parts = []
            for case, cond in cases:
                if case is None:
                    continue
                full = cond if picked is None else tirx.And(picked, cond)
                count = group_size(full)
                if count < 0:
                    return None
                if count:
                    parts.append(rewrite(case, count, in_threaded, False, full))
            result.applied = True
            return parts[0] if len(parts) == 1 else tirx.SeqStmt(parts) if parts else tirx.Evaluate(zero)

        def barrier_ops(stmt: Any) -> bool:
            found: list[Any] = []
            tirx.stmt_functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, tirx.Call) and (
                re.search(_WAIT, _op(n)) or re.search(_ARRIVE, _op(n))) else None)
            return bool(found)

        def rewritten(node: Any) -> Any:
            if isinstance(node, tirx.IfThenElse) and isinstance(node.then_case, tirx.AttrStmt) \
                    and str(node.then_case.attr_key) == "warp_specialize" and node.else_case is None:
                size = group_size(node.condition)
                if size < 0:
                    raise refuse("a T.ws region whose warp group the CPU run cannot count",
                                 "its condition on the thread is not one of constant bounds", r"\bT\.ws\b")
                if size == 0:
                    return tirx.Evaluate(zero)
                body = node.then_case.body
                if varies(body):  # code by thread: kept under its branch, for the thread-level rule
                    return tirx.IfThenElse(node.condition, rewrite(body, size, True, True), None)
                return rewrite(body, size, False, under_thread_if, node.condition if picked is None else
                               tirx.And(picked, node.condition))
            if isinstance(node, tirx.IfThenElse) and varies(tirx.Evaluate(node.condition)):
                lifted = counted_branches(node)
                if lifted is not None:
                    return lifted
                return tirx.IfThenElse(node.condition, rewrite(node.then_case, arrivals, in_threaded, True),
                                       rewrite(node.else_case, arrivals, in_threaded, True)
                                       if node.else_case is not None else None)
            if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
                call = node.value
                op = _op(call)
                if str(getattr(call.op, "name", "")) == "tl.tileop.tma_copy":
                    result.applied = True
                    return tirx.Evaluate(tirx.Call(call.dtype, tvm.ir.Op.get("tl.tileop.copy"), call.args))
                is_wait, is_arrive = re.search(_WAIT, op), re.search(_ARRIVE, op)
                if not is_wait and not is_arrive and re.search(_EXPECT, op):
                    result.applied = True
                    return tirx.Evaluate(zero)
                if is_wait or is_arrive:
                    target = _args(call)[0] if _args(call) else None
                    by_thread = isinstance(target, tirx.BufferLoad) and any(
                        _mentions(i, v) for i in target.indices for v in [*thread_vars, *derived]) or any(
                        varies(tirx.Evaluate(i)) for i in getattr(target, "indices", []))
                    if in_threaded or (is_arrive and under_thread_if) or by_thread:
                        raise _HandOver()  # arrivals to count thread by thread: the thread-level rule's
                    result.applied = True
                    return wait(call) if is_wait else arrive(call, arrivals)
            return None

        return tirx.stmt_functor.ir_transform(stmt, pre, None, ["tirx.IfThenElse", "tirx.Evaluate"])

    derived = thread_derived(tirx, func.body, thread_vars)  # each thread's own mbarrier (bars[tx // 32]): handed over
    problems: list[Exception] = []
    body = rewrite(func.body, threads, False, False)
    if any(isinstance(p, _HandOver) for p in problems):
        return WarpRoles(func, handed_over=True)
    if problems:
        raise problems[0]
    if uses["ws"]:
        result.applied = True

    def swap(node: Any) -> Any:
        if isinstance(node, tirx.SBlock) and "barrier_init" in node.annotations:
            allocs = [barriers[b.data][1] if b.data in barriers else b for b in node.alloc_buffers]
            annotations = {k: v for k, v in node.annotations.items() if k != "barrier_init"}
            counters = [barriers[b.data][1] for b in node.alloc_buffers if b.data in barriers]
            clear = []
            for c in counters:  # every counter starts at phase 0 with no arrival, in each block
                i = tirx.Var("tilelab_i", "int32")
                clear.append(tirx.For(i, zero, c.shape[0], tirx.ForKind.SERIAL,
                                      tirx.BufferStore(c, zero, [i])))
            new_body = tirx.SeqStmt([*clear, node.body]) if clear else node.body
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, new_body, node.init,
                               allocs, node.match_buffers, annotations)
        if isinstance(node, tirx.BufferLoad) and node.buffer.data in barriers:
            return None
        return None

    body = tirx.stmt_functor.ir_transform(body, None, swap, ["tirx.SBlock"])
    result.func = func.with_body(body)
    return result


def _mentions(expr: Any, var: Any) -> bool:
    tirx = tilelang().tvm.tirx
    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: found.append(n) if n.same_as(var) else None)
    return bool(found)
