"""mbarriers between groups of threads that take turns, under the ``thread-level`` rule of the CPU path

The ``warp-roles`` rule runs a block's ``T.ws`` regions in the order they are written. A kernel
that splits its threads into groups by its own branches on the thread index (``tx =
T.get_thread_binding()``, ``if tx < 128: ... elif tx < 256: ... else: ...``), with code that indexes
by thread in them and mbarriers between them, needs more: a consumer written first waits for a
producer written after it, and the groups hand tiles back and forth many times. This module gives
such a block the GPU's meaning by interleaving its groups the way the barriers let them run:

- every mbarrier (``T.alloc_barrier`` / ``T.create_list_of_mbarrier``, with their arrive counts) is
  a counter shared by the block's threads: the phases it has completed and the arrivals of the
  current one. Each thread that arrives adds one arrival (``T.barrier_arrive``, ``T.mbarrier_arrive``,
  ``T.cp_async_barrier_noinc``), wherever it stands: in code every thread runs, in a group, under a
  condition on the thread or on data; the ``thread-level`` rule runs it once per thread that
  reaches it. A phase completes when its arrivals reach the count;
- a wait on parity ``P`` is met when the phase of parity ``P`` has completed (PTX's rule: the
  barrier's current phase has the other parity). A wait is one of the group's: every thread of the
  group makes it together (a wait only some threads of a group make is refused);
- the groups of one branch on the thread (``if``/``elif``/``else`` on the thread index, or sibling
  branches whose threads do not overlap) take turns: each runs until a wait it cannot pass, and
  is resumed there (its loop counters kept) when it is its turn again, until every group is done.
  When no group can pass its wait, the block is deadlocked: the run fails with each waiting
  group's barrier, parity and line, and never hangs. A wait outside such branches, which every
  thread makes, is met or deadlocked at once;
- a TMA copy with ``barrier=``, a ``T.ptx_cp_async`` copy (the intrinsics rule's, before this one) and a
  ``T.wgmma_gemm`` are performed at once (their expected byte counts are met when they are written;
  ``T.wait_wgmma`` waits for nothing).

The turns are one interleaving the barriers allow; a kernel whose result depends on which (a race
the barriers do not order) gets one answer here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .emulate_roles import PROTOCOL_BUFFER, _mentions, barrier_setup, thread_derived
from .emulate_threads import ENUMERATE_LIMIT, GROUP_STEP, _declares, _source_line
from .emulate_threads import _call_args as _args
from .emulate_threads import _op_name as _op
from .env import tilelang

DEADLOCK_KIND = 3  # the out-of-bounds record's kind of a group waiting in a deadlock (buffer PROTOCOL_BUFFER)
ARRIVE_MARK = "tilelab_emu_arrive"  # one thread's arrival (barrier number, element) until the counters are placed
_WAIT = r"mbarrier_wait_parity$|(?<!named_)barrier_wait$"
_ARRIVE = r"ptx_arrive_barrier$|mbarrier_arrive$|(?<!named_)barrier_arrive$|arrive_barrier$|" \
          r"arrive_barrier_expect_tx$|mbarrier_arrive_expect_tx$|barrier_arrive_expect_tx$|cp_async_barrier_noinc$"
_AT_ONCE = r"expect_tx$|^tl\.wait_wgmma$|^tl\.ptx_cp_async_barrier$"  # nothing left to wait for: copies are immediate
_THREAD_OPS = ("tl.get_thread_binding", "tl.get_lane_idx", "tl.get_warp_idx_sync", "tl.get_warp_idx",
               "tl.get_warp_group_idx")
_WAIT_SOURCE = r"\bT\.(mbarrier_wait_parity|barrier_wait)\b"
_OPS_SOURCE = r"\bT\.(mbarrier_\w+|barrier_\w+|cp_async\w*)\b"
NAMED_BARRIERS = "named_barriers"  # the block's named barriers (bar.sync / bar.arrive ids), as one array of counters
NAMED_IDS = 16  # the ids a block's named barriers have (PTX: 0 to 15)
_NAMED_SYNC_SOURCE = r"\bT\.sync_threads\s*\(\s*[^)\s]"
RUN, SEEK, STOP = 1, 2, 3  # a group's mode in its turn: running, looking for the wait it stopped at, stopped


@dataclass
class Interleaved:
    """What :func:`interleave` did: ``func`` (rewritten, or the same), ``applied``, ``barriers`` (the
    block's mbarriers, numbered as the records number them), ``counters`` (each one's counter)."""

    func: Any
    applied: bool = False
    barriers: list[str] = field(default_factory=list)
    counters: list[tuple[Any, list[int]]] = field(default_factory=list)

    def place_arrivals(self, func: Any) -> Any:
        """``func`` (after the thread-level rule) with each thread's arrival as its counter's update."""
        tirx = tilelang().tvm.tirx
        if not self.counters:
            return func

        def post(node: Any) -> Any:
            if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) and _op(node.value) == ARRIVE_MARK:
                which, index = _args(node.value)
                counter, counts = self.counters[int(which.value)]
                return _arrival(counter, counts, tirx.Cast("int32", index))
            if isinstance(node, tirx.AttrStmt) and str(node.attr_key) == GROUP_STEP:
                return node.body
            return None

        return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate",
                                                                                     "tirx.AttrStmt"]))


def _arrival(counter: Any, counts: list[int], index: Any) -> Any:
    tirx = tilelang().tvm.tirx
    n = len(counts)
    count: Any = tirx.const(counts[-1], "int32")
    for i in range(n - 2, -1, -1):
        count = tirx.Select(index == tirx.const(i, "int32"), tirx.const(counts[i], "int32"), count)
    held = tirx.Var("tilelab_arrived", "int32")
    phase, pending = [index], [index + tirx.const(n, "int32")]
    return tirx.SeqStmt([
        tirx.Bind(held, tirx.BufferLoad(counter, pending) + tirx.const(1, "int32")),
        tirx.BufferStore(counter, tirx.BufferLoad(counter, phase) + tirx.floordiv(held, count), phase),
        tirx.BufferStore(counter, tirx.floormod(held, count), pending)])


def interleave(func: Any, name: str, *, waits: bool = True) -> Interleaved:
    """``func`` with its mbarriers as shared counters and its groups of threads taking turns (see the
    module's docstring). Raises :class:`~tilelab._tilelang.emulate.EmulationRefused` for what it
    cannot give that meaning."""
    return _Interleave(func, name, waits).run()


class _Interleave:
    # Long but whole: the walk shares the block's counters, its turn state and the waits' numbers.

    def __init__(self, func: Any, name: str, waits: bool) -> None:
        self.tvm = tilelang().tvm
        self.tirx = self.tvm.tirx
        self.func, self.name, self.waits = func, name, waits
        self.result = Interleaved(func)
        self.barriers: dict[Any, tuple[Any, Any, list[int]]] = {}  # barrier data -> (buffer, counter, counts)
        self.number: dict[Any, int] = {}
        self.thread_vars: set[Any] = set()
        self.threads = 1
        self.block_vars: dict[str, Any] = {}
        self.problems: list[Exception] = []
        self.wait_ids = 0
        self.seen: dict[str, int] = {}
        self.turns: list[Any] = []  # each scheduled branch's state buffer
        self.named: Any = None  # (the named barriers' array, each named sync's noted phase) where the kernel has them
        self.named_sites = 0
        self.zero = self.tirx.const(0, "int32")

    # ---- helpers --------------------------------------------------------------------------------

    def refuse(self, construct: str, why: str, source: str = _OPS_SOURCE) -> Exception:
        from .emulate_source import EmulationRefused

        file, line, text = _source_line(self.func, source)
        return EmulationRefused(self.name, construct, why, file, line, text)

    def const(self, v: int) -> Any:
        return self.tirx.const(v, "int32")

    def find(self, node: Any, test: Any) -> bool:
        found: list[Any] = []
        tirx = self.tirx

        def visit(n: Any) -> None:
            if not found and test(n):
                found.append(n)

        tirx.stmt_functor.post_order_visit(node if isinstance(node, tirx.Stmt) else tirx.Evaluate(node), visit)
        return bool(found)

    def is_wait(self, n: Any) -> bool:
        return isinstance(n, self.tirx.Call) and bool(re.search(_WAIT, _op(n)))

    def holds_wait(self, s: Any) -> bool:
        return self.find(s, self.is_wait)

    def varies(self, node: Any) -> bool:
        tirx = self.tirx
        return self.find(node, lambda n: (isinstance(n, tirx.Var) and n in self.thread_vars) or (
            isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _THREAD_OPS))

    def only_thread(self, cond: Any) -> bool:
        """Whether ``cond`` reads nothing but the thread index and constants."""
        tirx = self.tirx
        return self.varies(cond) and not self.find(cond, lambda n: isinstance(n, (tirx.BufferLoad, tirx.Call)) and not (
            isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _THREAD_OPS)
            or isinstance(n, tirx.Var) and n not in self.thread_vars)

    def takers(self, cond: Any) -> set[int] | None:
        """The threads (by linear index along x) that meet ``cond``; None when not known here."""
        tirx = self.tirx
        if not self.only_thread(cond) or self.threads > ENUMERATE_LIMIT:
            return None
        free = [v for v in self.thread_vars if self.find(cond, lambda n, v=v: n.same_as(v))]
        if len(free) > 1:
            return None
        analyzer = self.tvm.arith.Analyzer()
        out = set()
        for t in range(self.threads):
            value = analyzer.simplify(tirx.stmt_functor.substitute(cond, {v: tirx.const(t, v.dtype) for v in free}))
            if not isinstance(value, tirx.IntImm):
                return None
            if int(value):
                out.add(t)
        return out

    # ---- the walk -------------------------------------------------------------------------------

    def run(self) -> Interleaved:
        tirx = self.tirx
        roots: list[Any] = []
        counts: dict[str, list[int]] = {}

        def find(node: Any) -> None:
            if barrier_setup(tirx, node, roots, counts, self.thread_vars):
                pass
            elif isinstance(node, tirx.For) and node.thread_binding is not None:
                tag = str(node.thread_binding.thread_tag)
                if tag.startswith("blockIdx.") and tag[-1] in "xyz":
                    self.block_vars.setdefault(tag[-1], node.loop_var)

        tirx.stmt_functor.post_order_visit(self.func.body, find)
        named = self.named_counts()
        if not roots and named is not None:  # named barriers only: the block that launches the threads
            tirx.stmt_functor.post_order_visit(self.func.body, lambda n: roots.append(n) if isinstance(
                n, tirx.SBlock) and "tl.launch_threads" in n.annotations else None)
        if len(roots) != 1:
            return self.result
        root = roots[0]
        given = root.annotations.get("tl.launch_threads")
        self.threads = 1
        for e in given if given is not None else [128]:
            self.threads *= int(e)
        self.extents = [int(e) for e in given] if given is not None else [128]
        self.derived = thread_derived(tirx, self.func.body, self.thread_vars)
        self.axis: dict[Any, int] = {}  # each thread index variable -> its axis (launch_thread_idx's argument)

        def axis(node: Any) -> None:
            if isinstance(node, tirx.Bind) and node.var in self.thread_vars and isinstance(node.value, tirx.Call) \
                    and node.value.args and isinstance(node.value.args[0], tirx.IntImm):
                self.axis[node.var] = int(node.value.args[0].value)

        tirx.stmt_functor.post_order_visit(self.func.body, axis)
        for buf in root.alloc_buffers:
            if buf.scope() == "shared.barrier":
                arrive = counts.get(str(buf.data.name), counts.get(str(buf.name), []))
                if not arrive:
                    raise self.refuse(f"the mbarrier {buf.name} with no arrive count", "T.alloc_barrier gives every "
                                      "mbarrier its count of arrivals; this one has none the CPU run can read")
                # shared by the block's threads (the thread-level rule gives local buffers a slot per thread)
                counter = tirx.decl_buffer((2 * len(arrive),), "int32", str(buf.name), scope="shared")
                self.number[buf.data] = len(self.barriers)
                self.barriers[buf.data] = (buf, counter, arrive)
                self.result.barriers.append(str(buf.name))
                self.result.counters.append((counter, arrive))
        if named is not None:  # one counter per id, counting the threads bar.sync / bar.arrive name
            barrier = tirx.decl_buffer((NAMED_IDS,), "uint64", NAMED_BARRIERS, scope="shared.barrier")
            counter = tirx.decl_buffer((2 * NAMED_IDS,), "int32", NAMED_BARRIERS, scope="shared")
            self.named = (barrier, tirx.decl_buffer((max(1, named[1]),), "int32", "tilelab_named_phase",
                                                    scope="shared"))
            self.number[barrier.data] = len(self.barriers)
            self.barriers[barrier.data] = (barrier, counter, named[0])
            self.result.barriers.append(NAMED_BARRIERS)
            self.result.counters.append((counter, named[0]))
        from .emulate_source import _source_lines

        self.lines = _source_lines(self.func)
        body = self.immediate(root.body)
        body = self.place(body)
        if self.problems:
            raise self.problems[0]
        clear = []
        for _, counter, _ in self.barriers.values():  # every counter starts at phase 0 with no arrival
            i = tirx.Var("tilelab_i", "int32")
            clear.append(tirx.For(i, self.zero, counter.shape[0], tirx.ForKind.SERIAL,
                                  tirx.BufferStore(counter, self.zero, [i])))
        allocs = [self.barriers[b.data][1] if b.data in self.barriers else b for b in root.alloc_buffers]
        if named is not None:
            allocs += [self.barriers[self.named[0].data][1], self.named[1]]
        allocs += self.turns
        annotations = {k: v for k, v in root.annotations.items() if k != "barrier_init"}
        new_root = tirx.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint,
                               tirx.SeqStmt([*clear, body]) if clear else body, root.init, allocs,
                               root.match_buffers, annotations)
        self.result.func = self.func.with_body(tirx.stmt_functor.ir_transform(
            self.func.body, None, lambda n: new_root if n.same_as(root) else None, ["tirx.SBlock"]))
        self.result.applied = True
        return self.result

    def named_counts(self) -> tuple[list[int], int] | None:
        """Where the kernel has a one-sided named barrier (``T.named_barrier_arrive``): each id's thread
        count (every ``T.named_barrier_arrive(id, n)`` and ``T.sync_threads(id, n)`` of the kernel must
        give one id one constant count) and the number of such syncs; None otherwise."""
        tirx = self.tirx
        calls: list[Any] = []
        one_sided: list[Any] = []

        def visit(n: Any) -> None:
            if isinstance(n, tirx.Call) and _op(n).endswith("named_barrier_arrive"):
                one_sided.append(n)
                calls.append(n)
            elif isinstance(n, tirx.Call) and _is_named_sync(n):
                calls.append(n)

        tirx.stmt_functor.post_order_visit(self.func.body, visit)
        if not one_sided:
            return None
        counts = [1] * NAMED_IDS
        given: dict[int, int] = {}
        for call in calls:
            ident, count = _args(call)[-2:]
            if not isinstance(ident, tirx.IntImm) or not isinstance(count, tirx.IntImm) \
                    or not 0 <= int(ident.value) < NAMED_IDS or int(count.value) <= 0:
                raise self.refuse("a named barrier whose id or thread count is not a constant",
                                  "the CPU run counts each named barrier's arrivals against its constant count",
                                  r"\bT\.(named_barrier_arrive|sync_threads)\b")
            if given.setdefault(int(ident.value), int(count.value)) != int(count.value):
                raise self.refuse(f"the named barrier {int(ident.value)} given two thread counts",
                                  "every bar.sync and bar.arrive on one id names the same count",
                                  r"\bT\.(named_barrier_arrive|sync_threads)\b")
        for ident, count in given.items():
            counts[ident] = count
        return counts, len(calls) - len(one_sided)

    def named_ops(self, call: Any) -> Any:
        """A named barrier's ``bar.arrive`` as the threads' arrivals on its counter; its ``bar.sync`` as
        the arrivals, then the group's wait until the phase they arrived in completes (the phase is
        noted, once for the group, before they arrive); None for another call."""
        tirx = self.tirx
        one_sided = _op(call).endswith("named_barrier_arrive")
        if not one_sided and not _is_named_sync(call):
            return None
        barrier, phases = self.named
        ident = tirx.Cast("int32", _args(call)[-2])
        number = self.const(self.number[barrier.data])
        arrive = tirx.Evaluate(tirx.call_extern("int32", ARRIVE_MARK, number, ident))
        if one_sided:
            return arrive
        counter = self.barriers[barrier.data][1]
        site = self.const(self.named_sites)
        self.named_sites += 1
        wait = tirx.Call("handle", self.tvm.ir.Op.get("tl.mbarrier_wait_parity"),
                         [tirx.BufferLoad(barrier, [ident]), tirx.BufferLoad(phases, [site])])
        return tirx.SeqStmt([self.step(tirx.BufferStore(phases, tirx.BufferLoad(counter, [ident]), [site])), arrive,
                             tirx.Evaluate(wait)])

    def immediate(self, body: Any) -> Any:
        """Operations performed at once on the CPU: a TMA copy with barrier= (a copy), a T.wgmma_gemm (a
        T.gemm), expected byte counts and T.wait_wgmma (nothing); each arrive as one thread's arrival;
        T.ws's attribute dropped (its branch on the thread stays). (A T.ptx_cp_async is the intrinsics
        rule's: its elements are copied before this rule runs.)"""
        tirx, tvm = self.tirx, self.tvm

        def post(node: Any) -> Any:
            if isinstance(node, tirx.AttrStmt) and str(node.attr_key) == "warp_specialize":
                return node.body
            if not (isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call)):
                return None
            call = node.value
            raw = str(getattr(call.op, "name", ""))
            op = _op(call)
            if self.named is not None:
                named = self.named_ops(call)
                if named is not None:
                    return named
            if raw == "tl.tileop.tma_copy":
                return tirx.Evaluate(tirx.Call(call.dtype, tvm.ir.Op.get("tl.tileop.copy"), call.args))
            if raw == "tl.tileop.wgmma_gemm":
                return tirx.Evaluate(tirx.Call(call.dtype, tvm.ir.Op.get("tl.tileop.gemm"), call.args))
            if re.search(_ARRIVE, op):
                target = _args(call)[0]
                if not isinstance(target, tirx.BufferLoad) or target.buffer.data not in self.barriers:
                    self.problems.append(self.refuse("an mbarrier arrive on something other than a T.alloc_barrier "
                                                     "barrier", "the CPU run knows the block's mbarriers by their "
                                                     "T.alloc_barrier"))
                    return None
                index = target.indices[0] if len(target.indices) else self.zero
                return tirx.Evaluate(tirx.call_extern("int32", ARRIVE_MARK, self.const(self.number[target.buffer.data]),
                                                      tirx.Cast("int32", index)))
            if re.search(_AT_ONCE, op) and not re.search(_WAIT, op):
                return tirx.Evaluate(self.zero)
            return None

        return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Evaluate", "tirx.AttrStmt"])

    def place(self, s: Any) -> Any:
        """``s`` with its branches on the thread that hold waits taking turns, and its other waits met or
        deadlocked where they stand."""
        tirx = self.tirx
        if not self.holds_wait(s):
            return s
        if isinstance(s, tirx.SeqStmt):
            out: list[Any] = []
            children = list(s.seq)
            i = 0
            while i < len(children):
                run, taken = [], set[int]()  # consecutive branches on the thread over disjoint threads
                j = i
                while j < len(children):
                    groups = self.groups(children[j])
                    if groups is None:
                        break
                    threads = [t for _, _, t in groups]
                    if any(taken & t for t in threads) or any(a & b for k, a in enumerate(threads)
                                                                for b in threads[k + 1:]):
                        break
                    for t in threads:
                        taken |= t
                    run.extend(groups)
                    j += 1
                if run and any(self.holds_wait(body) for _, body, _ in run):
                    out.append(self.take_turns([(cond, body) for cond, body, _ in run]))
                    i = j
                    continue
                out.append(self.place(children[i]))
                i += 1
            return tirx.SeqStmt(out) if len(out) > 1 else out[0]
        groups = self.groups(s)
        if groups is not None:
            return self.take_turns([(cond, body) for cond, body, _ in groups])
        if self.is_wait_stmt(s):
            return self.wait_now(s.value)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, self.place(s.body), s.thread_binding, s.annotations)
        if isinstance(s, tirx.IfThenElse):
            if self.varies(s.condition):
                raise self.refuse("an mbarrier wait under a condition on the thread that does not split the block "
                                  "into groups", "the CPU run lets groups of threads take turns where a branch on the "
                                  "thread index alone splits them (constant bounds, threads that do not overlap)",
                                  _WAIT_SOURCE)
            return tirx.IfThenElse(s.condition, self.place(s.then_case),
                                   self.place(s.else_case) if s.else_case is not None else None)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, self.place(s.body))
        if isinstance(s, tirx.SBlock):
            return s
        raise self.refuse(f"an mbarrier wait in a {type(s).__name__}", "the CPU run waits in sequences, loops and "
                          "branches", _WAIT_SOURCE)

    def wait_source(self, s: Any) -> str:
        """The source pattern of the first wait in ``s``: on its barrier's name where it has one."""
        tirx = self.tirx
        names: list[str] = []
        tirx.stmt_functor.post_order_visit(s, lambda n: names.append(str(_args(n)[0].buffer.name)) if self.is_wait(n)
                                           and _args(n) and isinstance(_args(n)[0], tirx.BufferLoad) else None)
        return rf"\bT\.(mbarrier_wait_parity|barrier_wait)\(\s*{re.escape(names[0])}\b" if names else _WAIT_SOURCE

    def is_wait_stmt(self, s: Any) -> bool:
        return isinstance(s, self.tirx.Evaluate) and self.is_wait(s.value)

    def groups(self, s: Any) -> list[tuple[Any, Any, set[int]]] | None:
        """A branch on the thread alone (its else-branches too) as its groups: (condition, body, threads);
        None when ``s`` is not one."""
        tirx = self.tirx
        if not isinstance(s, tirx.IfThenElse) or not self.only_thread(s.condition):
            return None
        out = []
        before: Any = None
        node = s
        while True:
            cond = node.condition if before is None else tirx.And(before, node.condition)
            threads = self.takers(cond)
            if threads is None:
                return None
            out.append((cond, node.then_case, threads))
            before = tirx.Not(node.condition) if before is None else tirx.And(before, tirx.Not(node.condition))
            rest = node.else_case
            if rest is None:
                return out
            if isinstance(rest, tirx.IfThenElse) and self.only_thread(rest.condition):
                node = rest
                continue
            threads = self.takers(before)
            if threads is None:
                return None
            out.append((before, rest, threads))
            return out

    # ---- waits ------------------------------------------------------------------------------------

    def wait_parts(self, call: Any) -> tuple[Any, Any, Any, int, int, int]:
        """(counter, element, parity, the barrier's number, its size, the line) of a wait."""
        tirx = self.tirx
        if not self.waits:
            raise self.refuse("an mbarrier wait in a traced kernel",
                              "the trace records accesses, not whether a wait is ever met: tilelab.run(kernel, "
                              "device='cpu') runs the protocol and reports a deadlock", _WAIT_SOURCE)
        args = _args(call)
        target = args[0]
        if not isinstance(target, tirx.BufferLoad) or target.buffer.data not in self.barriers:
            raise self.refuse("an mbarrier wait on something other than a T.alloc_barrier barrier",
                              "the CPU run knows the block's mbarriers by their T.alloc_barrier", _WAIT_SOURCE)
        _, counter, counts = self.barriers[target.buffer.data]
        index = tirx.Cast("int32", target.indices[0]) if len(target.indices) else self.zero
        parity = tirx.Cast("int32", args[1]) if len(args) > 1 else self.zero
        return counter, index, parity, self.number[target.buffer.data], len(counts), self.line_of(target.buffer)

    def line_of(self, buf: Any) -> int:
        """The line of this wait: the nth wait on this barrier in the IR taken as the nth in the source
        that names it (a branch of Python the IR no longer holds can shift it; the barrier's name is exact)."""
        _, start, lines = self.lines
        bname = str(buf.name)
        nth = self.seen.setdefault(bname, 0)
        self.seen[bname] += 1
        code = [text.split("#", 1)[0] for text in lines]
        if self.named is not None and buf.same_as(self.named[0]):  # a named barrier's wait: its T.sync_threads
            hits = [i for i, text in enumerate(code) if re.search(_NAMED_SYNC_SOURCE, text)]
            return start + hits[min(nth, len(hits) - 1)] if hits else 0
        named = rf"\b{re.escape(bname)}\b"
        hits = [i for i, text in enumerate(code) if re.search(_WAIT_SOURCE, text) and re.search(named, text)]
        hits = hits or [i for i, text in enumerate(code) if re.search(_WAIT_SOURCE, text)]
        return start + hits[min(nth, len(hits) - 1)] if hits else 0

    def met(self, counter: Any, index: Any, parity: Any) -> Any:
        tirx = self.tirx
        two = self.const(2)
        return tirx.floormod(tirx.BufferLoad(counter, [index]), two) != tirx.floormod(parity, two)

    def record(self, which: Any, index: Any, parity: Any, line: Any, size: Any, kind: int) -> Any:
        from .emulate_source import oob_call

        tirx = self.tirx
        i64 = "int64"
        bxyz = [tirx.Cast("int32", self.block_vars[a]) if a in self.block_vars else self.zero for a in "xyz"]
        idx = [tirx.Cast(i64, which), tirx.Cast(i64, index), tirx.Cast(i64, parity), tirx.Cast(i64, line),
               tirx.const(0, i64), tirx.const(0, i64)]
        return tirx.Evaluate(oob_call(PROTOCOL_BUFFER, kind, *bxyz, 4, *idx, size, *[0] * 5))

    def by_thread(self, expr: Any) -> bool:
        """Whether ``expr`` reads the thread index, directly or through a variable bound to it."""
        return self.varies(expr) or any(_mentions(expr, v) for v in self.derived)

    def wait_now(self, call: Any) -> Any:
        """A wait every thread makes at once: met, or a deadlock (nothing else runs meanwhile). A wait
        whose mbarrier is the thread's own (``bars[tx // 32]``) is met when every thread's is."""
        tirx = self.tirx
        counter, index, parity, which, size, line = self.wait_parts(call)
        if not (self.by_thread(index) or self.by_thread(parity)):
            return self.step(tirx.IfThenElse(tirx.Not(self.met(counter, index, parity)), self.record(
                self.const(which), index, parity, self.const(line), self.const(size), DEADLOCK_KIND), None))
        # each thread's barrier, with the thread index a loop over the block's threads (x fastest)
        t = tirx.Var("tilelab_t", "int32")
        values: dict[Any, Any] = {}
        stride = 1
        for k, extent in enumerate([*self.extents, 1, 1][:3]):
            for v, a in self.axis.items():
                if a == k:
                    values[v] = tirx.Cast(str(v.dtype), tirx.floormod(tirx.floordiv(t, self.const(stride)),
                                                                      self.const(extent)))
            stride *= extent
        called = self.find(index, lambda n: isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _THREAD_OPS)
        if called or any(v not in values for v in self.thread_vars):
            raise self.refuse("an mbarrier wait on a barrier chosen by the thread index",
                              "the CPU run cannot tell which thread index it reads", _WAIT_SOURCE)

        def each(e: Any) -> Any:
            inlined = tirx.stmt_functor.substitute(e, self.derived) if self.derived else e
            return tirx.stmt_functor.substitute(inlined, values)

        mine, theirs = each(index), each(parity)
        # one record per mbarrier a run of threads waits on (a warp's 32 threads wait on one), not per thread
        before = tirx.stmt_functor.substitute(mine, {t: t - self.const(1)})
        first = tirx.Or(t == self.zero, tirx.Cast("int32", mine) != tirx.Cast("int32", before))
        return self.step(tirx.For(t, self.zero, self.const(self.threads), tirx.ForKind.SERIAL, tirx.IfThenElse(
            tirx.And(tirx.Not(self.met(counter, mine, theirs)), first), self.record(
                self.const(which), mine, theirs, self.const(line), self.const(size), DEADLOCK_KIND), None)))

    def step(self, s: Any) -> Any:
        """``s`` marked as what the group does once, together (the thread-level rule ends its loops over
        the threads there)."""
        return self.tirx.AttrStmt(self.const(0), GROUP_STEP, self.const(1), s)

    # ---- turns ------------------------------------------------------------------------------------

    def take_turns(self, groups: list[tuple[Any, Any]]) -> Any:
        """The groups' branches run in turns until each is done, or a deadlock is recorded."""
        tirx = self.tirx
        n = len(groups)
        # the state: go, progress, mode, then per group: its wait (0: from the start), done, and the
        # barrier, element, parity and line it waits on; then one slot per loop around a wait
        slots = {"go": 0, "progress": 1, "mode": 2}
        base = 3
        per = 6
        loops: list[Any] = []
        bodies = []
        state_ref: list[Any] = [None]

        def st(i: Any) -> Any:
            return tirx.BufferLoad(state_ref[0], [i if not isinstance(i, int) else self.const(i)])

        def put(i: int, v: Any) -> Any:
            return tirx.BufferStore(state_ref[0], v if not isinstance(v, int) else self.const(v), [self.const(i)])

        def g(k: int, field_: str) -> int:
            return base + k * per + ["pc", "done", "bar", "elem", "parity", "line"].index(field_)

        state = tirx.decl_buffer((1,), "int32", f"tilelab_turns{len(self.turns)}", scope="shared")  # resized below
        state_ref[0] = state
        ids: dict[Any, int] = {}

        def waits_in(s: Any) -> list[int]:
            found: list[int] = []

            def visit(n: Any) -> None:
                if isinstance(n, tirx.Evaluate) and n in ids:
                    found.append(ids[n])

            tirx.stmt_functor.post_order_visit(s, visit)
            return found

        def number_waits(s: Any) -> None:
            def visit(n: Any) -> None:
                if self.is_wait_stmt(n) and n not in ids:
                    self.wait_ids += 1
                    ids[n] = self.wait_ids

            tirx.stmt_functor.post_order_visit(s, visit)

        mode = st(slots["mode"])

        def any_of(k: int, found: list[int]) -> Any:
            pc = st(g(k, "pc"))
            out: Any = tirx.const(False, "bool")
            for w in found:
                out = tirx.Or(out, pc == self.const(w)) if w != found[0] else pc == self.const(w)
            return out

        def resumable(s: Any, k: int, around: list[tuple[Any, int]]) -> Any:
            if not self.holds_wait(s):
                if _declares(s):
                    return s
                return tirx.IfThenElse(mode == self.const(RUN), s, None)
            if self.is_wait_stmt(s):
                return wait_point(s, k, around)
            if isinstance(s, tirx.SeqStmt):
                out: list[Any] = []
                group: list[Any] = []
                for c in s.seq:
                    if self.holds_wait(c) or _declares(c):
                        if group:
                            out.append(resumable(tirx.SeqStmt(group) if len(group) > 1 else group[0], k, around))
                            group = []
                        out.append(resumable(c, k, around) if self.holds_wait(c) else c)
                    else:
                        group.append(c)
                if group:
                    out.append(resumable(tirx.SeqStmt(group) if len(group) > 1 else group[0], k, around))
                return tirx.SeqStmt(out) if len(out) > 1 else out[0]
            if isinstance(s, tirx.For):
                if self.varies(s.min) or self.varies(s.extent):
                    raise self.refuse("an mbarrier wait in a loop whose trip count depends on the thread",
                                      "a wait is one of the whole group's", _WAIT_SOURCE)
                slot = len(loops)
                loops.append(s.loop_var)
                start_slot = -(2 * slot + 1)  # resolved once the state's size is known
                saved_slot = -(2 * slot + 2)
                dtype = str(s.loop_var.dtype)
                end = tirx.Cast("int32", s.min + s.extent)
                inside = any_of(k, waits_in(s))
                start = tirx.Select(mode == self.const(SEEK), tirx.Select(inside, st(saved_slot), end),
                                    tirx.Cast("int32", s.min))
                lo = st(start_slot)
                body = resumable(s.body, k, [*around, (s.loop_var, saved_slot)])
                return tirx.SeqStmt([put(start_slot, start),
                                     tirx.For(s.loop_var, tirx.Cast(dtype, lo), tirx.Cast(dtype, end - lo),
                                              tirx.ForKind.SERIAL, body)])
            if isinstance(s, tirx.IfThenElse):
                if self.varies(s.condition):
                    raise self.refuse("an mbarrier wait only some threads of a group make (under a condition on the "
                                      "thread inside the group's branch)", "a wait is one of the whole group's: "
                                      "every thread of it waits together", self.wait_source(s))
                found = waits_in(s.then_case)
                cond = tirx.Select(mode == self.const(SEEK), any_of(k, found) if found else tirx.const(False, "bool"),
                                   s.condition)
                return tirx.IfThenElse(cond, resumable(s.then_case, k, around),
                                       resumable(s.else_case, k, around) if s.else_case is not None else None)
            if isinstance(s, tirx.AttrStmt):
                return tirx.AttrStmt(s.node, s.attr_key, s.value, resumable(s.body, k, around))
            raise self.refuse(f"an mbarrier wait in a {type(s).__name__} of a group", "the CPU run resumes a group in "
                              "sequences, loops and branches", _WAIT_SOURCE)

        def wait_point(s: Any, k: int, around: list[tuple[Any, int]]) -> Any:
            w = ids[s]
            counter, index, parity, which, size, line = self.wait_parts(s.value)
            if self.by_thread(index) or self.by_thread(parity):
                raise self.refuse("an mbarrier wait in a group on a barrier chosen by the thread index",
                                  "a group's wait is one of the whole group's, on one mbarrier",
                                  self.wait_source(s))
            stop = [put(slots["mode"], STOP), put(g(k, "pc"), w), put(g(k, "bar"), which),
                    tirx.BufferStore(state, index, [self.const(g(k, "elem"))]),
                    tirx.BufferStore(state, parity, [self.const(g(k, "parity"))]), put(g(k, "line"), line),
                    *(tirx.BufferStore(state, tirx.Cast("int32", v), [self.const(slot)]) for v, slot in around)]
            return self.step(tirx.SeqStmt([
                tirx.IfThenElse(tirx.And(mode == self.const(SEEK), st(g(k, "pc")) == self.const(w)),
                                put(slots["mode"], RUN), None),
                tirx.IfThenElse(mode == self.const(RUN),
                                tirx.IfThenElse(self.met(counter, index, parity), put(slots["progress"], 1),
                                                tirx.SeqStmt(stop)), None)]))

        for _, body in groups:
            number_waits(body)
        for k, (_, body) in enumerate(groups):
            bodies.append(resumable(body, k, []))
        size = base + n * per + 2 * len(loops)

        def resolve(i: int) -> int:
            return base + n * per + (-i - 1) if i < 0 else i

        final = tirx.decl_buffer((size,), "int32", str(state.name), scope="shared")

        def fix(node: Any) -> Any:  # the loops' slots, numbered before the state's size was known
            if isinstance(node, tirx.BufferLoad) and node.buffer.same_as(state):
                return tirx.BufferLoad(final, [self.const(resolve(int(node.indices[0].value)))])
            if isinstance(node, tirx.BufferStore) and node.buffer.same_as(state):
                return tirx.BufferStore(final, node.value, [self.const(resolve(int(node.indices[0].value)))])
            return None

        turns = []
        for k, ((cond, _), body) in enumerate(zip(groups, bodies)):
            fresh = st(g(k, "pc")) == self.zero
            turns.append(tirx.IfThenElse(st(g(k, "done")) == self.zero, tirx.SeqStmt([
                put(slots["mode"], tirx.Select(fresh, self.const(RUN), self.const(SEEK))),
                tirx.IfThenElse(fresh, put(slots["progress"], 1), None),
                tirx.IfThenElse(cond, body, None),
                tirx.IfThenElse(mode == self.const(RUN), tirx.SeqStmt([put(g(k, "done"), 1),
                                                                      put(slots["progress"], 1)]), None)]), None))
        all_done: Any = None
        for k in range(n):
            d = st(g(k, "done")) != self.zero
            all_done = d if all_done is None else tirx.And(all_done, d)
        deadlock = [tirx.IfThenElse(st(g(k, "done")) == self.zero, self.record(
            st(g(k, "bar")), st(g(k, "elem")), st(g(k, "parity")), st(g(k, "line")),
            self.size_of(st(g(k, "bar"))), DEADLOCK_KIND), None) for k in range(n)]
        ending = tirx.IfThenElse(all_done, put(slots["go"], 0), tirx.IfThenElse(
            st(slots["progress"]) == self.zero, tirx.SeqStmt([*deadlock, put(slots["go"], 0)]), None))
        loop = tirx.While(st(slots["go"]) != self.zero, tirx.SeqStmt([put(slots["progress"], 0), *turns, ending]))
        loop = tirx.stmt_functor.ir_transform(loop, None, fix, ["tirx.BufferLoad", "tirx.BufferStore"])
        i = tirx.Var("tilelab_i", "int32")
        start = [tirx.For(i, self.zero, self.const(size), tirx.ForKind.SERIAL, tirx.BufferStore(final, self.zero, [i])),
                 tirx.BufferStore(final, self.const(1), [self.const(slots["go"])])]
        self.turns.append(final)
        return tirx.SeqStmt([*start, loop])

    def size_of(self, which: Any) -> Any:
        """The number of mbarriers in barrier ``which``'s array."""
        tirx = self.tirx
        sizes = [len(c) for _, _, c in self.barriers.values()]
        value: Any = self.const(sizes[-1] if sizes else 1)
        for i in range(len(sizes) - 2, -1, -1):
            value = tirx.Select(which == self.const(i), self.const(sizes[i]), value)
        return value


def _is_named_sync(call: Any) -> bool:
    """``T.sync_threads(id, count)``: a bar.sync of a named barrier (``tvm_storage_sync`` with an id)."""
    return str(getattr(call.op, "name", "")) == "tirx.tvm_storage_sync" and len(call.args) >= 3
