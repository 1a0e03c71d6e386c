"""The ``thread-level`` rule of the CPU path: a kernel that indexes by thread, run on the CPU

A tile program's operations (``T.copy``, ``T.gemm``, ``T.fill``, ``T.reduce_*``, ``T.Parallel`` over a
tile) are operations of the whole block: the CPU runs each of them once per block. Code that says
which thread does what (``T.get_thread_binding``, ``T.thread_binding``, ``threadIdx``) has another
meaning: every thread of the block runs it. This module gives it that meaning the way CPU runtimes
of CUDA blocks do (work-item loops, with loop fission at barriers):

- a statement that uses a thread index runs in a serial loop over the block's threads (the extents
  of ``T.Kernel(threads=...)``), wrapped at the coarsest statement that holds no barrier; a
  statement holding one is entered (sequences, loops, branches every thread takes alike), so each
  barrier (``T.sync_threads``, ``T.sync_warp``) ends one loop over the threads and starts the next;
- what a thread keeps across such a boundary gets one slot per thread: its ``T.alloc_local`` and
  ``T.alloc_var`` buffers, and the values it binds (``x = ...``) that a later loop reads;
- a branch on the thread index around tile operations (``if T.get_thread_binding() < 32: T.copy``)
  runs those operations once, when some thread of the block takes the branch; the thread-indexed
  code inside it runs, in the loop over the threads, for the threads that take it;
- operations across threads are split in two loops: every thread stores its value into a staging
  array, then each reads its result from it: ``T.tvm_thread_allreduce``, the warp shuffles
  (``T.shfl_xor``/``down``/``up``/``T.shfl_sync``), ``T.warp_reduce_*`` and the votes
  (``T.any_sync``, ``T.all_sync``, ``T.ballot``);
- a warp's matrix instructions, written by hand or by TileLang's intrinsic emitters, are split the
  same way, with the PTX ISA's lane layouts (``cuda_facts``): ``T.ptx_ldmatrix`` (every lane stores
  the row address it gives, then each reads its elements of the 8x8 matrices) and ``T.ptx_mma``
  m16n8k16 (every lane stores its fragments of A, B and C into the warp's matrices, then each
  computes its elements of D); other shapes and forms are refused by name;
- a barrier under a branch on the thread is kept when exactly its threads take the branch (a
  named barrier ``T.sync_threads(id, count)`` of the ``count`` threads that take it, a
  ``T.sync_warp`` or warp operation under a branch that whole warps take alike);
- what still has no meaning on the CPU is refused by name with its line: a barrier or a warp
  operation only some of its threads reach (under a condition on the thread, or in a loop whose
  trip count depends on it), one-sided named barriers outside a block the barrier interleaving
  (``emulate_barriers.py``) can give them (it gives them a meaning where it finds the block),
  grid-wide barriers.

A block whose ``T.Kernel`` gives no ``threads=`` has TileLang's default for CUDA and HIP (128).

The loops are serial and in thread order: one of the interleavings a GPU may run. A kernel whose
result depends on the order of its threads between two barriers (a race) gets one answer here.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass, field
from typing import Any

from .env import tilelang

RULE_ID = "thread-level"
WARP_SIZE = 32
ENUMERATE_LIMIT = 4096  # threads up to which a branch's condition on the thread index is evaluated here

# Barriers: each is a boundary between two loops over the threads.
_BARRIER_OPS = ("tirx.tvm_storage_sync", "tl.sync_warp", "__syncthreads", "__syncwarp")
# Warp shuffles: the op's name -> (kind, argument index of the value, of the lane parameter, of the width).
_SHUFFLES = {
    "tl.shfl_xor_sync": ("xor", 1, 2, 3), "tl.shfl_down_sync": ("down", 1, 2, 3),
    "tl.shfl_up_sync": ("up", 1, 2, 3), "tl.shfl_sync": ("idx", 1, 2, 3),
    "__shfl_xor_sync": ("xor", 1, 2, 3), "__shfl_down_sync": ("down", 1, 2, 3),
    "__shfl_up_sync": ("up", 1, 2, 3), "__shfl_sync": ("idx", 1, 2, 3),
}
# Reductions over the lanes of a warp: the op's name -> (combine, argument index of the value).
_WARP_REDUCTIONS = {
    "tl.warp_reduce_sum": ("sum", 0), "tl.warp_reduce_max": ("max", 0), "tl.warp_reduce_min": ("min", 0),
    "tl.warp_reduce_bitand": ("and", 0), "tl.warp_reduce_bitor": ("or", 0),
    "tl.any_sync": ("any", 1), "tl.all_sync": ("all", 1), "tl.ballot_sync": ("ballot", 1), "tl.ballot": ("ballot", 0),
}
# Thread-index intrinsics: the op's name -> how the index follows from the linear thread id.
_INDEX_OPS = ("tl.get_lane_idx", "tl.get_warp_idx_sync", "tl.get_warp_idx", "tl.get_warp_group_idx")
_ALLREDUCE = "tirx.tvm_thread_allreduce"
# Warp-wide matrix instructions (written by hand or by TileLang's intrinsic emitters): a warp's lanes
# each give a part of the operands and each get a part of the result (cuda_facts has which part).
WARP_MATRIX_OPS = ("tl.ptx_ldmatrix", "tirx.ptx_mma")
_MATRIX_SOURCE = r"^\s*[\w.]*(ldmatrix|mma)\w*\s*\("
# What each thread does for itself wherever it stands (an mbarrier arrival: emulate_barriers.ARRIVE_MARK).
_PER_THREAD_OPS = ("tilelab_emu_arrive",)
# What a group of threads does once, together (an mbarrier wait: emulate_barriers.py): an attribute
# around it; like a barrier it ends one loop over the threads and starts the next.
GROUP_STEP = "tilelab_group_step"
# What stays refused: op name pattern -> (construct, why, the source pattern of its line).
_REFUSED = (
    (r"named_barrier_arrive", "a one-sided named barrier (T.named_barrier_arrive)",
     "it lets one group of threads run ahead of another that waits for it (a producer/consumer protocol); the "
     "CPU runs the threads in loops that meet at every barrier", r"\bT\.named_barrier_arrive\b"),
    (r"sync_grid|grid_sync", "a barrier of the whole grid (T.sync_grid)",
     "it waits for every block of the launch, and the CPU runs the blocks one after another",
     r"\bT\.sync_grid\b"),
    (r"match_any_sync|match_all_sync|activemask", "a warp match or active-mask query (T.match_*_sync / T.activemask)",
     "its answer is which lanes of the warp are running together, which the CPU's loops over the threads do "
     "not model", r"\bT\.(match_\w+|activemask)\b"),
)
_BARRIER_SOURCE = r"\bT\.(sync_threads|sync_warp)\b|__syncthreads|__syncwarp"
_COLLECTIVE_SOURCE = r"\bT\.(shfl\w*|warp_reduce\w*|any_sync|all_sync|ballot\w*|tvm_thread_allreduce)\b|__shfl"
_THREAD_SOURCE = r"\bT\.get_thread_bindings?\b|\bT\.thread_binding\b|threadIdx|\bT\.get_(lane|warp)"


def _op_name(call: Any) -> str:
    name = str(getattr(call.op, "name", ""))
    if name in ("tirx.call_extern", "tirx.call_pure_extern") and call.args:
        return str(getattr(call.args[0], "value", name))
    return name


def _call_args(call: Any) -> list[Any]:
    """A call's own arguments (an extern call's without the function's name)."""
    name = str(getattr(call.op, "name", ""))
    return list(call.args[1:]) if name in ("tirx.call_extern", "tirx.call_pure_extern") else list(call.args)


@dataclass
class ThreadLevel:
    """What the rule did to a kernel: ``func`` (the kernel rewritten, or the same one), ``applied``
    (whether any block had code that indexes by thread)."""

    func: Any
    applied: bool = False
    per_thread: list[str] = field(default_factory=list)  # buffers given one slot per thread


def _source_line(func: Any, pattern: str, nth: int = 0) -> tuple[str, int, str]:
    """The ``nth`` line (0: the first) of the kernel's source matching ``pattern``."""
    from .emulate_source import _source_lines

    filename, start, lines = _source_lines(func)
    hits = [(start + i, text) for i, text in enumerate(lines) if re.search(pattern, text.split("#", 1)[0])]
    if not hits:
        return filename, 0, ""
    line, text = hits[min(nth, len(hits) - 1)]
    return filename, line, text or linecache.getline(filename, line)


def thread_level(func: Any, name: str) -> ThreadLevel:
    """``func`` with every block's thread-indexed code in loops over its threads (see the module's
    docstring). Raises :class:`~tilelab._tilelang.emulate.EmulationRefused` for what has no meaning
    on the CPU."""
    tirx = tilelang().tvm.tirx
    axes: dict[Any, str] = {}  # the kernel's threadIdx variables -> "x", "y" or "z"
    refused: list[tuple[str, str, str]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Bind) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")) == "tl.launch_thread_idx":
            axes[node.var] = "xyz"[int(node.value.args[0])] if node.value.args else "x"
        elif isinstance(node, tirx.Call):
            op = _op_name(node)
            refused.extend(entry[1:] for entry in _REFUSED if re.search(entry[0], op))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    refused.extend(_mixed_thread_loops(func))
    if refused:
        from .emulate_source import EmulationRefused

        construct, why, source = refused[0]
        file, line, text = _source_line(func, source)
        raise EmulationRefused(name, construct, why, file, line, text)
    func = _with_launch_blocks(func, name)
    result = ThreadLevel(func)
    counter = {"barrier": 0, "collective": 0}

    blocks: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        func.body, lambda n: blocks.append(n) if isinstance(n, tirx.SBlock) and (
            "tl.launch_threads" in n.annotations or str(n.name_hint) == "tilelang_root") else None)
    replaced: list[tuple[Any, Any]] = []
    for node in blocks:  # rewritten outside TVM's callbacks, so that a refusal reaches the caller as it is
        given = node.annotations.get("tl.launch_threads")  # none: T.Kernel without threads=, the GPU's default
        extents = [int(e) for e in given] if given is not None else [_default_threads()]
        extents += [1] * (3 - len(extents))
        rewritten = _Block(func, name, dict(axes), (extents[0], extents[1], extents[2]), node, counter).rewrite()
        if rewritten is None:
            continue
        new_body, allocs, per_thread = rewritten
        result.applied = True
        result.per_thread.extend(per_thread)
        replaced.append((node, tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, new_body,
                                           node.init, allocs, node.match_buffers, node.annotations)))

    def swap(node: Any) -> Any:
        return next((new for old, new in replaced if node.same_as(old)), None)

    if replaced:
        result.func = func.with_body(tirx.stmt_functor.ir_transform(func.body, swap, None, ["tirx.SBlock"]))
    return result


class _Block:
    """One block's body (a kernel's ``tilelang_root``), rewritten with loops over its threads."""

    # Long but whole: the analysis and the rewrite share the block's sets of thread-dependent
    # variables and per-thread buffers, and the helpers that read them.

    def __init__(self, func: Any, name: str, axes: dict[Any, str], extents: tuple[int, int, int], node: Any,
                 counter: dict[str, int]) -> None:
        tvm = tilelang().tvm
        self.tvm, self.tirx = tvm, tvm.tirx
        self.func, self.name, self.node, self.counter = func, name, node, counter
        self.extents = dict(zip("xyz", extents))
        self.count = extents[0] * extents[1] * extents[2]
        self.axes = axes  # thread variable -> axis (grows with the block's T.thread_binding loops)
        self.allocs = list(node.alloc_buffers)
        self.eligible = {b for b in self.allocs if b.scope() in ("local", "local.var")}
        # a fragment that no tile operation and no T.Parallel loop touches is a thread's registers
        # (prefetched indices, say): written by thread, it gets one slot per thread too
        self.eligible |= {b for b in self.allocs if b.scope() == "local.fragment"} - self.tile_buffers(node.body)
        self.per_thread: dict[Any, Any] = {}  # a buffer -> its replacement with one slot per thread
        self.varying: set[Any] = set()  # variables whose value depends on the thread
        self.added: list[Any] = []  # staging arrays and flags this rewrite allocates
        self.flag: Any = None
        # A variable per axis that stands for the thread's index inside the loops built here.
        self.axis_var = {a: next((v for v, ax in axes.items() if ax == a), self.tirx.Var(f"t{a}", "int32"))
                         for a in "xyz"}
        for a, v in self.axis_var.items():
            self.axes.setdefault(v, a)
        self.lin_var = self.tirx.Var("tilelab_linear", "int32")
        self._memo: dict[Any, bool] = {}

    # ---- helpers -----------------------------------------------------------------------------

    def tile_buffers(self, body: Any) -> set[Any]:
        """The buffers a tile operation names or a T.Parallel loop accesses in ``body``."""
        tirx = self.tirx
        out: set[Any] = set()

        def accessed(node: Any) -> None:
            if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
                out.add(node.buffer)

        def visit(node: Any) -> None:
            if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
                tirx.stmt_functor.post_order_visit(node, accessed)
            elif isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")).startswith("tl.tileop."):
                tirx.stmt_functor.post_order_visit(tirx.Evaluate(node), accessed)

        tirx.stmt_functor.post_order_visit(body, visit)
        return out

    def refuse(self, construct: str, why: str, source: str, nth: int = 0) -> Exception:
        from .emulate_source import EmulationRefused

        file, line, text = _source_line(self.func, source, nth)
        return EmulationRefused(self.name, construct, why, file, line, text)

    def const(self, value: int, dtype: str = "int32") -> Any:
        return self.tirx.const(value, dtype)

    def linear(self) -> Any:
        """The thread's linear index in the block (x fastest): a variable the loops over the threads
        replace by their own."""
        return self.lin_var

    def new_buffer(self, name: str, shape: list[Any], dtype: str) -> Any:
        buf = self.tirx.decl_buffer(shape, dtype, name, scope="local")
        self.added.append(buf)
        return buf

    def is_barrier(self, stmt: Any) -> bool:
        return isinstance(stmt, self.tirx.Evaluate) and isinstance(stmt.value, self.tirx.Call) \
            and _op_name(stmt.value) in _BARRIER_OPS

    def any_node(self, node: Any, test: Any) -> bool:
        found: list[Any] = []

        def visit(n: Any) -> None:
            if not found and test(n):
                found.append(n)

        tirx = self.tirx
        if isinstance(node, tirx.Stmt):
            tirx.stmt_functor.post_order_visit(node, visit)
        else:
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(node), visit)
        return bool(found)

    def is_collective_call(self, n: Any) -> bool:
        return isinstance(n, self.tirx.Call) and (_op_name(n) in _SHUFFLES or _op_name(n) in _WARP_REDUCTIONS
                                                  or _op_name(n) == _ALLREDUCE or _op_name(n) in WARP_MATRIX_OPS)

    def varies(self, node: Any) -> bool:
        """Whether ``node`` depends on the thread: a thread variable, a value bound from one, a
        per-thread buffer, a thread-index intrinsic or an operation across threads."""
        key = node
        try:
            if key in self._memo:
                return self._memo[key]
        except TypeError:
            key = None
        tirx = self.tirx

        def test(n: Any) -> bool:
            if isinstance(n, tirx.Var):
                return n in self.varying
            if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)):
                return n.buffer in self.per_thread
            if isinstance(n, tirx.Call):
                op = _op_name(n)
                return op in _INDEX_OPS or op in _PER_THREAD_OPS or self.is_collective_call(n)
            return False

        out = self.any_node(node, test)
        if key is not None:
            self._memo[key] = out
        return out

    def holds_barrier(self, stmt: Any) -> bool:
        return self.any_node(stmt, lambda n: isinstance(n, self.tirx.Call) and _op_name(n) in _BARRIER_OPS)

    def holds_collective(self, stmt: Any) -> bool:
        return self.any_node(stmt, self.is_collective_call)

    def holds_sync(self, stmt: Any) -> bool:
        return self.holds_barrier(stmt) or self.holds_collective(stmt) or self.any_node(
            stmt, lambda n: isinstance(n, self.tirx.AttrStmt) and str(n.attr_key) == GROUP_STEP)

    def holds_tile(self, stmt: Any) -> bool:
        """Whether ``stmt`` holds a tile operation of the block (not one that depends on the thread)."""
        tirx = self.tirx
        found: list[Any] = []

        def pre(n: Any) -> Any:
            if found:
                return n
            if isinstance(n, tirx.For) and n.kind == tirx.ForKind.PARALLEL and not self.varies(n):
                found.append(n)
                return n
            if isinstance(n, tirx.Evaluate) and isinstance(n.value, tirx.Call) \
                    and _op_name(n.value).startswith("tl.tileop.") and not self.varies(n):
                found.append(n)
                return n
            return None

        tirx.stmt_functor.ir_transform(stmt, pre, None, ["tirx.For", "tirx.Evaluate"])
        return bool(found)

    # ---- the analysis: which variables and buffers depend on the thread ------------------------

    def written(self, call: Any) -> list[Any]:
        """The buffers a call writes through a region or an access pointer."""
        tirx = self.tirx
        out: list[Any] = []

        def visit(n: Any) -> None:
            if not isinstance(n, tirx.Call) or not n.args:
                return
            op = str(getattr(n.op, "name", ""))
            if op == "tl.region" and isinstance(n.args[0], tirx.BufferLoad) and len(n.args) > 1:
                mask = n.args[1]
            elif op == "tl.access_ptr" and isinstance(n.args[0], tirx.BufferLoad):
                mask = n.args[-1]
            elif op == "tirx.tvm_access_ptr" and len(n.args) >= 5:
                mask = n.args[4]
                if isinstance(mask, tirx.IntImm) and int(mask) & 2:
                    out.extend(b for b in self.eligible if b.data.same_as(n.args[1]))
                return
            elif op == "tirx.ptx_mma" and len(n.args) > 10:  # the accumulator: a buffer's data and an offset
                out.extend(b for b in self.eligible if b.data.same_as(n.args[10]))
                return
            elif op == "tirx.address_of" and isinstance(n.args[0], tirx.BufferLoad):
                # an element's address handed to a function (a thread's generator state, T.rng_*):
                # the function may write through it
                out.extend(b for b in self.eligible if b.same_as(n.args[0].buffer))
                return
            elif op == _ALLREDUCE:
                num = int(n.args[0])
                out.extend(a.buffer for a in n.args[2 + num:2 + 2 * num] if isinstance(a, tirx.BufferLoad))
                return
            else:
                return
            if isinstance(mask, tirx.IntImm) and int(mask) & 2:
                out.append(n.args[0].buffer)

        tirx.stmt_functor.post_order_visit(tirx.Evaluate(call), visit)
        return out

    def analyse(self, body: Any) -> None:
        tirx = self.tirx
        changed = [True]

        def mark_var(v: Any) -> None:
            if v not in self.varying:
                self.varying.add(v)
                changed[0] = True

        def mark_buffer(b: Any) -> None:
            if b in self.eligible and b not in self.per_thread:
                self.per_thread[b] = None
                changed[0] = True

        def walk(s: Any, ctrl: bool) -> None:
            if isinstance(s, tirx.SeqStmt):
                for c in s.seq:
                    walk(c, ctrl)
            elif isinstance(s, tirx.For):
                bounds = self.varies(s.min) or self.varies(s.extent)
                if bounds:
                    mark_var(s.loop_var)
                walk(s.body, ctrl or bounds)
            elif isinstance(s, tirx.While):
                walk(s.body, ctrl or self.varies(s.condition))
            elif isinstance(s, tirx.IfThenElse):
                inner = ctrl or self.varies(s.condition)
                walk(s.then_case, inner)
                if s.else_case is not None:
                    walk(s.else_case, inner)
            elif isinstance(s, tirx.Bind):
                # a value bound from what every thread sees alike is the same on each thread that
                # reaches it, even under a branch on the thread (its scope ends with the branch)
                if self.varies(s.value):
                    mark_var(s.var)
            elif isinstance(s, tirx.BufferStore):
                if ctrl or self.varies(s.value) or any(self.varies(i) for i in s.indices):
                    mark_buffer(s.buffer)
            elif isinstance(s, tirx.Evaluate):
                if ctrl or self.varies(s.value):
                    for b in self.written(s.value):
                        mark_buffer(b)
            elif isinstance(getattr(s, "body", None), tirx.Stmt):  # an attribute, a nested block
                walk(s.body, ctrl)

        while changed[0]:
            changed[0] = False
            self._memo.clear()
            walk(body, False)
        self._memo.clear()

    # ---- normalising the thread bindings -------------------------------------------------------

    def unbind(self, body: Any) -> Any:
        """``T.thread_binding`` loops (and ``thread_extent`` attributes) of threadIdx removed: their
        variable is the thread's index on that axis; a loop shorter than the block's threads keeps
        only the threads it covers."""
        tirx = self.tirx

        def post(n: Any) -> Any:
            if isinstance(n, tirx.For) and n.thread_binding is not None \
                    and str(n.thread_binding.thread_tag).startswith("threadIdx."):
                axis = str(n.thread_binding.thread_tag)[-1]
                self.axes[n.loop_var] = axis
                body = n.body
                full = isinstance(n.extent, tirx.IntImm) and int(n.extent) >= self.extents[axis] \
                    and isinstance(n.min, tirx.IntImm) and int(n.min) == 0
                if not full:
                    body = tirx.IfThenElse(tirx.And(n.loop_var >= n.min, n.loop_var < n.min + n.extent), body, None)
                return body
            if isinstance(n, tirx.AttrStmt) and str(n.attr_key) == "thread_extent" \
                    and str(getattr(n.node, "thread_tag", "")).startswith("threadIdx."):
                self.axes[n.node.var] = str(n.node.thread_tag)[-1]
                return n.body
            return None

        return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.For", "tirx.AttrStmt"])

    # ---- the rewrite ---------------------------------------------------------------------------

    def rewrite(self) -> tuple[Any, list[Any], list[str]] | None:
        tirx = self.tirx
        body = self.unbind(self.node.body)
        self.varying = set(self.axes)
        uses = self.any_node(body, lambda n: (isinstance(n, tirx.Var) and n in self.axes)
                             or (isinstance(n, tirx.Call) and (_op_name(n) in _INDEX_OPS or _op_name(n) in _BARRIER_OPS
                                                               or _op_name(n) in _PER_THREAD_OPS
                                                               or self.is_collective_call(n))))
        if not uses:  # a threadIdx loop whose variable nothing reads: its body runs once, as a tile statement
            return None if body.same_as(self.node.body) else (body, list(self.allocs), [])
        self.analyse(body)
        for old in list(self.per_thread):
            self.per_thread[old] = self.slots(old)
        self._memo.clear()
        new_body = self.transform(body, [])
        self.check(new_body)
        allocs = [self.per_thread.get(b, b) for b in self.allocs] + self.added
        return new_body, allocs, [str(b.name) for b in self.per_thread]

    def check(self, body: Any) -> None:
        """Nothing that depends on the thread is left outside a loop over the threads."""
        tirx = self.tirx
        left: list[str] = []

        def pre(n: Any) -> Any:
            if isinstance(n, tirx.For) and str(n.loop_var.name) == "tilelab_thread":
                return n  # a loop over the threads: what it holds is its own
            if isinstance(n, tirx.Var) and n in self.axes and not left:
                left.append(str(n.name))
            if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) and n.buffer in self.per_thread and not left:
                left.append(str(n.buffer.name))
            return None

        tirx.stmt_functor.ir_transform(body, pre, None, None)
        if left:
            raise self.refuse("thread-index arithmetic (T.get_thread_binding) in a place tilelab cannot give "
                              "each thread",
                              f"{left[0]} is used where no loop over the block's threads can hold it (a loop's "
                              "bounds or a tile operation's region around a barrier)", _THREAD_SOURCE)

    def transform(self, s: Any, guard: list[Any]) -> Any:
        """``s`` with its thread-dependent parts in loops over the threads; ``guard`` the conditions
        on the thread of the branches around it."""
        tirx = self.tirx
        if self.is_barrier(s):
            self.barrier_reached(s, guard)
            return tirx.Evaluate(self.const(0))
        if not self.varies(s):
            if guard and self.holds_barrier(s):
                raise self.divergent("barrier")
            if _declares(s):
                return s
            return self.when_any(guard, self.without_barriers(s))
        if not self.holds_sync(s) and not self.holds_tile(s):
            return self.loop(s, guard)
        if self.is_collective_unit(s):
            self.taken_alike(s, guard)
            first, second = self.phases(s)
            return tirx.SeqStmt([self.loop(first, guard), self.loop(second, guard)])
        if isinstance(s, tirx.SeqStmt):
            return self.sequence(list(s.seq), guard)
        if isinstance(s, tirx.For):
            if self.varies(s.min) or self.varies(s.extent):
                if self.holds_sync(s):
                    raise self.refuse("a barrier or warp operation in a loop whose trip count depends on the thread",
                                      "threads that leave the loop early would not reach it", _BARRIER_SOURCE
                                      if self.holds_barrier(s) else _COLLECTIVE_SOURCE)
                raise self.refuse("a tile operation in a loop whose trip count depends on the thread",
                                  "a tile operation runs once for the block, and this loop runs a different "
                                  "number of times on each thread", _THREAD_SOURCE)
            kind = s.kind if s.kind != tirx.ForKind.PARALLEL else tirx.ForKind.SERIAL
            return tirx.For(s.loop_var, s.min, s.extent, kind, self.transform(s.body, guard), s.thread_binding,
                            s.annotations)
        if isinstance(s, tirx.While):
            if self.varies(s.condition):
                raise self.refuse("a barrier, warp operation or tile operation in a while loop whose condition "
                                  "depends on the thread", "threads that leave the loop early would not reach it",
                                  _BARRIER_SOURCE)
            return tirx.While(s.condition, self.transform(s.body, guard))
        if isinstance(s, tirx.IfThenElse):
            if not self.varies(s.condition):
                else_case = self.transform(s.else_case, guard) if s.else_case is not None else None
                return tirx.IfThenElse(s.condition, self.transform(s.then_case, guard), else_case)
            if self.any_node(s, lambda n: isinstance(n, tirx.Call) and _is_block_barrier(n)):
                raise self.divergent("barrier")
            # a branch on the thread around tile operations or warp operations: the threads that take it
            # share its tile operations; its warp operations need whole warps (checked where they stand)
            parts = []
            cond = s.condition
            if not self.only_thread_index(cond):  # evaluated once per thread, before either side runs
                held = self.new_buffer("tilelab_branch", [1], "int8")
                self.per_thread[held] = self.widen(held)
                parts.append(self.loop(tirx.BufferStore(held, tirx.Cast("int8", cond), [self.const(0)]), guard))
                cond = tirx.BufferLoad(held, [self.const(0)]) != self.const(0, "int8")
            parts.append(self.transform(s.then_case, [*guard, cond]))
            if s.else_case is not None:
                parts.append(self.transform(s.else_case, [*guard, tirx.Not(cond)]))
            return parts[0] if len(parts) == 1 else tirx.SeqStmt(parts)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, self.transform(s.body, guard))
        raise self.refuse(f"thread-index arithmetic (T.get_thread_binding) around a barrier in a {type(s).__name__}",
                          "tilelab cannot split this statement into loops over the threads", _THREAD_SOURCE)

    def without_barriers(self, s: Any) -> Any:
        """``s`` (code of the block) with its barriers removed: between two tile operations the CPU's
        order is already the barrier's."""
        tirx = self.tirx

        def post(n: Any) -> Any:
            if self.is_barrier(n):
                self.counter["barrier"] += 1
                return tirx.Evaluate(self.const(0))
            return None

        return tirx.stmt_functor.ir_transform(s, None, post, ["tirx.Evaluate"])

    def slots(self, buf: Any) -> Any:
        """``buf`` with one slot per thread: the thread's index is its new first dimension (so that an
        access past a thread's own slot is out of bounds, as on the GPU)."""
        return self.tirx.decl_buffer([self.count, *buf.shape], str(buf.dtype), str(buf.name), scope="local")

    def widen(self, held: Any) -> Any:
        """A buffer made here, given one slot per thread."""
        new = self.slots(held)
        self.added[self.added.index(held)] = new
        return new

    def divergent(self, what: str) -> Exception:
        if what == "barrier":
            nth = self.counter["barrier"]
            return self.refuse("a barrier under a condition on the thread (divergent T.sync_threads)",
                               "on a GPU only the threads that take the branch reach it, which is a deadlock or "
                               "undefined; here every thread must reach each barrier. Move the barrier out of the "
                               "branch", _BARRIER_SOURCE, nth)
        return self.refuse("a warp operation under a condition on the thread (divergent shuffle, vote or "
                           "reduction)", "its result depends on which lanes take the branch together; here every "
                           "thread of the block must take part. Move it out of the branch", _COLLECTIVE_SOURCE,
                           self.counter["collective"])

    def barrier_reached(self, s: Any, guard: list[Any]) -> None:
        """Refuses a barrier under ``guard`` (a warp's barrier, T.sync_warp, is kept where whole warps
        meet ``guard`` alike); counts it, for the line of a later refusal."""
        if guard:
            op = _op_name(s.value)
            if op in ("tl.sync_warp", "__syncwarp"):
                self.taken_alike(s, guard)
            elif _is_block_barrier(s.value):
                raise self.divergent("barrier")
            else:  # a named barrier of a number of threads: those that meet the guard, all of them
                count = _call_args(s.value)[2]
                values = self.per_thread_truth(guard)
                if values is None or not isinstance(count, self.tirx.IntImm) or sum(values) != int(count):
                    raise self.divergent("barrier")
        self.counter["barrier"] += 1

    def taken_alike(self, s: Any, guard: list[Any]) -> None:
        """Refuses a warp operation (an all-reduce) under ``guard`` unless every lane of each warp
        (every thread of each group the all-reduce sums over) meets ``guard`` alike."""
        if not guard:
            return
        values = self.per_thread_truth(guard)
        if values is None:
            raise self.divergent("collective")
        over = self.allreduce_axes(s)
        seen: dict[Any, bool] = {}
        for t in range(self.count):
            if over is None:
                key: Any = t // WARP_SIZE
            else:
                coords = self.coordinates_of(t)
                key = tuple(coords[a] for a in "xyz" if a not in over)
            if seen.setdefault(key, values[t]) != values[t]:
                raise self.divergent("collective")

    def per_thread_truth(self, guard: list[Any]) -> list[bool] | None:
        """Whether each thread (by linear index) meets ``guard``; None when it depends on more than
        the thread's index."""
        tirx = self.tirx
        if self.count > ENUMERATE_LIMIT or not all(self.only_thread_index(g) for g in guard):
            return None
        cond = guard[0]
        for g in guard[1:]:
            cond = tirx.And(cond, g)
        analyzer = self.tvm.arith.Analyzer()
        out = []
        for t in range(self.count):
            value = analyzer.simplify(tirx.stmt_functor.substitute(cond, self.coordinates(self.const(t))))
            if not isinstance(value, tirx.IntImm):
                return None
            out.append(bool(int(value)))
        return out

    def coordinates_of(self, t: int) -> dict[str, int]:
        ex, ey = self.extents["x"], self.extents["y"]
        return {"x": t % ex, "y": (t // ex) % ey, "z": t // (ex * ey)}

    def allreduce_axes(self, s: Any) -> list[str] | None:
        """The thread axes an all-reduce statement sums over (None for a warp operation)."""
        tirx = self.tirx
        inner = s
        while isinstance(inner, tirx.AttrStmt):
            inner = inner.body
        if isinstance(inner, tirx.Evaluate) and isinstance(inner.value, tirx.Call) \
                and _op_name(inner.value) == _ALLREDUCE:
            call = inner.value
            num = int(call.args[0])
            return [self.axes[v] for v in call.args[2 + 2 * num:] if isinstance(v, tirx.Var) and v in self.axes]
        return None

    def only_thread_index(self, expr: Any) -> bool:
        """Whether ``expr`` depends on nothing but the thread's index and values fixed for the block."""
        tirx = self.tirx
        return not self.any_node(expr, lambda n: (isinstance(n, tirx.Var) and n in self.varying and n not in self.axes)
                                 or (isinstance(n, (tirx.BufferLoad,)) and n.buffer in self.per_thread)
                                 or (isinstance(n, tirx.Call) and self.is_collective_call(n)))

    def sequence(self, children: list[Any], guard: list[Any]) -> Any:
        tirx = self.tirx
        out: list[Any] = []
        group: list[Any] = []
        rest = list(children)

        def flush(later: list[Any]) -> list[Any]:
            if not group:
                return later
            later = self.keep_bound_values(group, later)
            out.append(self.loop(tirx.SeqStmt(group) if len(group) > 1 else group[0], guard))
            group.clear()
            return later

        while rest:
            c = rest.pop(0)
            if self.is_barrier(c):
                self.barrier_reached(c, guard)
                rest = flush(rest)
            elif self.is_collective_unit(c):
                self.taken_alike(c, guard)
                first, second = self.phases(c)
                group.append(first)
                later = flush([second, *rest])  # the reading loop may use what the staging loop bound
                group.append(later[0])
                rest = later[1:]
            elif self.varies(c) and not self.holds_sync(c) and not self.holds_tile(c):
                group.append(c)
            else:  # a value the group binds may be read in c itself (a loop holding a warp operation)
                later = flush([c, *rest])
                c, rest = later[0], later[1:]
                out.append(self.transform(c, guard))
        flush([])
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    def keep_bound_values(self, group: list[Any], later: list[Any]) -> list[Any]:
        """A value a thread binds in ``group`` and a later statement reads is kept in one slot per
        thread: stored after its binding, read where it is used."""
        tirx = self.tirx
        for s in list(group):
            if not isinstance(s, tirx.Bind) or not self.varies(s.var):
                continue
            if not any(self.any_node(c, lambda n, v=s.var: isinstance(n, tirx.Var) and n.same_as(v)) for c in later):
                continue
            held = self.new_buffer(f"{s.var.name}_held", [1], str(s.var.dtype))
            self.per_thread[held] = self.widen(held)
            pos = group.index(s)
            group.insert(pos + 1, tirx.BufferStore(held, s.var, [self.const(0)]))
            load = tirx.BufferLoad(held, [self.const(0)])
            later = [tirx.stmt_functor.substitute(c, {s.var: load}) for c in later]
            self._memo.clear()
        return later

    def when_any(self, guard: list[Any], s: Any) -> Any:
        """``s`` (an operation of the block) run once if some thread meets ``guard``."""
        tirx = self.tirx
        if not guard:
            return s
        static = self.some_thread(guard)
        if static is True:
            return s
        if static is False:
            return tirx.Evaluate(self.const(0))
        if self.flag is None:
            self.flag = self.new_buffer("tilelab_taken", [1], "int32")
        zero = self.const(0)
        mark = self.loop(tirx.BufferStore(self.flag, self.const(1), [zero]), guard)
        return tirx.SeqStmt([tirx.BufferStore(self.flag, zero, [zero]), mark,
                             tirx.IfThenElse(tirx.BufferLoad(self.flag, [zero]) != zero, s, None)])

    def some_thread(self, guard: list[Any]) -> bool | None:
        """Whether some thread meets every condition of ``guard`` (None when it is not known here)."""
        tirx = self.tirx
        if not all(self.only_thread_index(g) for g in guard):
            return None
        free = set()
        for g in guard:
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(g), lambda n: free.add(n) if isinstance(n, tirx.Var)
                                               else None)
        if any(v not in self.axes for v in free) or self.count > ENUMERATE_LIMIT:
            return None
        cond = guard[0]
        for g in guard[1:]:
            cond = tirx.And(cond, g)
        analyzer = self.tvm.arith.Analyzer()
        for v, a in self.axes.items():
            analyzer.bind(v, self.tvm.ir.Range.from_min_extent(0, self.extents[a]))
        if analyzer.can_prove(cond):
            return True
        if analyzer.can_prove(tirx.Not(cond)):
            return False
        for t in range(self.count):
            value = analyzer.simplify(tirx.stmt_functor.substitute(cond, self.coordinates(self.const(t))))
            if not isinstance(value, tirx.IntImm):
                return None
            if int(value):
                return True
        return False

    def coordinates(self, t: Any) -> dict[Any, Any]:
        """Each thread variable -> its value for the linear thread index ``t``."""
        ex, ey = self.extents["x"], self.extents["y"]
        tirx = self.tirx
        value = {"x": tirx.floormod(t, ex) if self.count != ex else t,
                 "y": (tirx.floormod(tirx.floordiv(t, ex), ey) if self.extents["z"] > 1 else tirx.floordiv(t, ex))
                 if ey > 1 else self.const(0),
                 "z": tirx.floordiv(t, ex * ey) if self.extents["z"] > 1 else self.const(0)}
        return {**{v: value[a] for v, a in self.axes.items()}, self.lin_var: t}

    def loop(self, s: Any, guard: list[Any]) -> Any:
        """``s`` run by every thread of the block that meets ``guard``, one after another."""
        tirx = self.tirx
        t = tirx.Var("tilelab_thread", "int32")
        if guard:
            cond = guard[0]
            for g in guard[1:]:
                cond = tirx.And(cond, g)
            s = tirx.IfThenElse(cond, s, None)
        s = tirx.stmt_functor.substitute(s, self.coordinates(t))
        s = self.per_thread_accesses(s, t)
        return tirx.For(t, self.const(0), self.const(self.count), tirx.ForKind.SERIAL, s)

    def per_thread_accesses(self, s: Any, t: Any) -> Any:
        """Accesses to per-thread buffers in ``s`` as accesses to thread ``t``'s slots; thread-index
        intrinsics as functions of ``t``."""
        tirx = self.tirx
        data = {old.data: new for old, new in self.per_thread.items()}

        def post(n: Any) -> Any:
            if isinstance(n, tirx.BufferLoad) and n.buffer in self.per_thread:
                return tirx.BufferLoad(self.per_thread[n.buffer], [t, *n.indices])
            if isinstance(n, tirx.BufferStore) and n.buffer in self.per_thread:
                return tirx.BufferStore(self.per_thread[n.buffer], n.value, [t, *n.indices])
            if isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) == "tl.region" and n.args \
                    and isinstance(n.args[0], tirx.BufferLoad) and len(n.args[0].indices) == len(n.args) - 1 \
                    and any(n.args[0].buffer.same_as(b) for b in self.per_thread.values()):
                return tirx.Call(n.dtype, n.op, [n.args[0], n.args[1], self.const(1), *n.args[2:]])
            if isinstance(n, tirx.Call):
                op = _op_name(n)
                if op == "tirx.tvm_access_ptr" and len(n.args) >= 5 and n.args[1] in data:
                    new = data[n.args[1]]
                    size = 1
                    for e in list(new.shape)[1:]:
                        size = size * e
                    return tirx.Call(n.dtype, n.op, [n.args[0], new.data, n.args[2] + t * size, *n.args[3:]])
                if op in _INDEX_OPS:
                    args = _call_args(n)
                    size = args[0] if args else self.const(WARP_SIZE)
                    if op == "tl.get_lane_idx":
                        return tirx.floormod(t, size)
                    if op == "tl.get_warp_group_idx":
                        return tirx.floordiv(t, size * 4)
                    return tirx.floordiv(t, size)
            return None

        return tirx.stmt_functor.ir_transform(s, None, post, ["tirx.BufferLoad", "tirx.BufferStore", "tirx.Call"])

    # ---- operations across threads -------------------------------------------------------------

    def is_collective_unit(self, s: Any) -> bool:
        """A statement that is one operation across threads: an all-reduce (with its reducer's
        attribute), or a simple statement (a store, a binding, an evaluation) using shuffles,
        warp reductions or votes."""
        tirx = self.tirx
        if isinstance(s, tirx.AttrStmt) and str(s.attr_key) == "reduce_scope":
            return True
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call) and _op_name(s.value) == _ALLREDUCE:
            return True
        if isinstance(s, (tirx.BufferStore, tirx.Bind, tirx.Evaluate)):
            return self.holds_collective(s)
        return False

    def phases(self, s: Any) -> tuple[Any, Any]:
        """(every thread stores its value, each thread reads its result) for a collective statement."""
        tirx = self.tirx
        self.counter["collective"] += 1
        reducer = None
        inner = s
        while isinstance(inner, tirx.AttrStmt):
            if str(inner.attr_key) == "reduce_scope":
                reducer = inner.node
            inner = inner.body
        if isinstance(inner, tirx.Evaluate) and isinstance(inner.value, tirx.Call) \
                and _op_name(inner.value) == _ALLREDUCE:
            if reducer is None:
                raise self.refuse("a thread all-reduce without its reducer", "the reduction's operation is not "
                                  "known", _COLLECTIVE_SOURCE)
            return self.allreduce(reducer, inner.value)
        return self.warp_phases(s)

    def allreduce(self, reducer: Any, call: Any) -> tuple[Any, Any]:
        tirx = self.tirx
        num = int(call.args[0])
        values = list(call.args[1:1 + num])
        cond = call.args[1 + num]
        results = list(call.args[2 + num:2 + 2 * num])
        over = [self.axes[v] for v in call.args[2 + 2 * num:] if isinstance(v, tirx.Var) and v in self.axes]
        if not over:
            raise self.refuse("a thread all-reduce over something other than the block's thread indices",
                              "the threads it reduces over are not known", _COLLECTIVE_SOURCE)
        identities = list(reducer.identity_element)
        staged = [self.new_buffer(f"tilelab_stage{len(self.added)}", [self.count], str(v.dtype)) for v in values]
        lin = self.linear()
        first = [tirx.BufferStore(b, tirx.Select(cond, v, tirx.Cast(str(v.dtype), e)) if not _is_true(cond) else v,
                                  [lin]) for b, v, e in zip(staged, values, identities)]
        accs = [self.new_buffer(f"tilelab_acc{len(self.added)}", [1], str(v.dtype)) for v in values]
        zero = self.const(0)
        r = tirx.Var("tilelab_lane", "int32")
        coords, stride = {}, 1
        span = 1
        for a in "xyz":
            if a in over:
                coords[a] = tirx.floormod(tirx.floordiv(r, span), self.extents[a]) if span > 1 or \
                    len(over) > 1 else r
                span *= self.extents[a]
            else:
                coords[a] = self.axis_var[a]
        member = None
        for a in "xyz":
            if self.extents[a] > 1:
                term = coords[a] * stride if stride > 1 else coords[a]
                member = term if member is None else member + term
            stride *= self.extents[a]
        member = self.const(0) if member is None else member
        loads = [tirx.BufferLoad(b, [member]) for b in staged]
        current = [tirx.BufferLoad(a, [zero]) for a in accs]
        combined = [tirx.stmt_functor.substitute(res, {**dict(zip(reducer.lhs, current)),
                                                       **dict(zip(reducer.rhs, loads))})
                    for res in reducer.result]
        if len(values) == 1:
            step = [tirx.BufferStore(accs[0], combined[0], [zero])]
        else:  # every new value from the old ones, then all stored
            held = [self.new_buffer(f"tilelab_new{len(self.added)}", [1], str(v.dtype)) for v in values]
            step = [*(tirx.BufferStore(h, c, [zero]) for h, c in zip(held, combined)),
                    *(tirx.BufferStore(a, tirx.BufferLoad(h, [zero]), [zero]) for a, h in zip(accs, held))]
        second = [*(tirx.BufferStore(a, tirx.Cast(str(a.dtype), e), [zero]) for a, e in zip(accs, identities)),
                  tirx.For(r, zero, self.const(span), tirx.ForKind.SERIAL,
                           tirx.SeqStmt(step) if len(step) > 1 else step[0]),
                  *(tirx.BufferStore(res.buffer, tirx.BufferLoad(a, [zero]), res.indices)
                    for res, a in zip(results, accs))]
        return tirx.SeqStmt(first) if len(first) > 1 else first[0], tirx.SeqStmt(second)

    def warp_phases(self, s: Any) -> tuple[Any, Any]:
        tirx = self.tirx
        calls: list[Any] = []

        def collect(n: Any) -> None:
            if isinstance(n, tirx.Call) and self.is_collective_call(n):
                calls.append(n)

        tirx.stmt_functor.post_order_visit(s, collect)
        if any(_op_name(c) in WARP_MATRIX_OPS for c in calls):
            return self.matrix_phases(s, calls)
        for c in calls:
            if any(self.any_node(a, self.is_collective_call) for a in _call_args(c)):
                raise self.refuse("a warp operation whose value is itself a warp operation",
                                  "tilelab runs one warp operation per step", _COLLECTIVE_SOURCE)
        lin = self.linear()
        zero = self.const(0)
        lane = tirx.floormod(lin, WARP_SIZE)
        base = lin - lane
        first, before, replace = [], [], {}
        for c in calls:
            op = _op_name(c)
            args = _call_args(c)
            if op in _SHUFFLES:
                kind, vi, pi, wi = _SHUFFLES[op]
                value, param = args[vi], args[pi]
                width = args[wi] if len(args) > wi else self.const(WARP_SIZE)
                width = tirx.Cast("int32", width)
                param = tirx.Cast("int32", param)
                stage = self.new_buffer(f"tilelab_stage{len(self.added)}", [self.count], str(value.dtype))
                first.append(tirx.BufferStore(stage, value, [lin]))
                segment = tirx.floordiv(lane, width) * width
                if kind == "xor":
                    src, ok = tirx.bitwise_xor(lane, param), None
                    ok = src < segment + width
                elif kind == "down":
                    src = lane + param
                    ok = src < segment + width
                elif kind == "up":
                    src = lane - param
                    ok = src >= segment
                else:
                    src = segment + tirx.floormod(param, width)
                    ok = tirx.const(True, "bool")
                ok = tirx.And(ok, base + src < self.const(self.count))
                index = tirx.Select(ok, base + src, lin)
                replace[c] = tirx.BufferLoad(stage, [index])
            else:
                kind, vi = _WARP_REDUCTIONS[op]
                value = args[vi]
                if kind in ("any", "all", "ballot"):
                    value = tirx.Cast("int32", value != tirx.const(0, str(value.dtype)))
                stage = self.new_buffer(f"tilelab_stage{len(self.added)}", [self.count], str(value.dtype))
                first.append(tirx.BufferStore(stage, value, [lin]))
                dtype = str(c.dtype)
                acc = self.new_buffer(f"tilelab_acc{len(self.added)}", [1], dtype)
                r = tirx.Var("tilelab_lane", "int32")
                now = tirx.BufferLoad(acc, [zero])

                def lane_value(at: Any, kind: str = kind, stage: Any = stage, dtype: str = dtype) -> Any:
                    got = tirx.Cast(dtype, tirx.BufferLoad(stage, [base + at]))
                    return tirx.shift_left(got, tirx.Cast(dtype, at)) if kind == "ballot" else got

                combine = {"sum": lambda a, b: a + b, "max": tirx.max, "min": tirx.min, "and": tirx.bitwise_and,
                           "or": tirx.bitwise_or, "any": tirx.max, "all": tirx.min, "ballot": tirx.bitwise_or}[kind]
                # lane 0 of the warp first (it always exists), then the others in lane order
                before += [tirx.BufferStore(acc, lane_value(zero), [zero]),
                           tirx.For(r, self.const(1), self.const(WARP_SIZE - 1), tirx.ForKind.SERIAL,
                                    tirx.IfThenElse(base + r < self.const(self.count),
                                                    tirx.BufferStore(acc, combine(now, lane_value(r)), [zero]), None))]
                replace[c] = now

        def swap(n: Any) -> Any:
            for c, new in replace.items():
                if n.same_as(c):
                    return new
            return None

        second = tirx.stmt_functor.ir_transform(s, None, swap, ["tirx.Call"])
        first_stmt = tirx.SeqStmt(first) if len(first) > 1 else first[0]
        return first_stmt, tirx.SeqStmt([*before, second]) if before else second


    # ---- warp-wide matrix instructions ----------------------------------------------------------

    def matrix_refusal(self, what: str) -> Exception:
        return self.refuse(what, "the CPU run gives ldmatrix (.x1, .x2, .x4, .trans, 16-bit elements) and "
                           "mma.sync m16n8k16 (row.col, f16 or bf16 A and B, f16 or f32 C) the PTX ISA's meaning, "
                           "lane by lane; this form it does not know", _MATRIX_SOURCE)

    def pointed(self, pointer: Any) -> tuple[Any, Any] | None:
        """The buffer and flat position a pointer of the block points at (emulate_intrinsics' forms)."""
        from .emulate_intrinsics import _pointed

        buffers = {b.data: b for b in [*self.allocs, *self.func.buffer_map.values()]}
        return _pointed(pointer, buffers)

    def matrix_phases(self, s: Any, calls: list[Any]) -> tuple[Any, Any]:
        """A warp-wide matrix instruction as its two loops over the threads: every lane stores its part
        of the operands in the warp's staging arrays, then each lane computes its part of the result."""
        tirx = self.tirx
        if len(calls) != 1 or not (isinstance(s, tirx.Evaluate) and s.value.same_as(calls[0])):
            raise self.matrix_refusal(f"a warp matrix instruction ({_op_name(calls[0])}) inside an expression "
                                      "or beside another warp operation")
        if self.count % WARP_SIZE:
            raise self.matrix_refusal(f"a warp matrix instruction in a block of {self.count} threads (not whole "
                                      "warps)")
        call = calls[0]
        return self.ldmatrix(call) if _op_name(call) == "tl.ptx_ldmatrix" else self.mma(call)

    def ldmatrix(self, call: Any) -> tuple[Any, Any]:
        from ..cuda_facts import LDMATRIX_COUNTS, LDMATRIX_ROWS, ldmatrix_element
        from .emulate_intrinsics import _element

        tirx = self.tirx
        args = _call_args(call)
        trans, num = bool(int(args[0])), int(args[1]) if isinstance(args[1], tirx.IntImm) else 0
        src, dst = self.pointed(args[2]), self.pointed(args[3])
        if num not in LDMATRIX_COUNTS or src is None or dst is None or src[0].dtype.bits != 16 \
                or dst[0].dtype.bits != 16:
            raise self.matrix_refusal("an ldmatrix (T.ptx_ldmatrix) of another form")
        (sbuf, sflat), (dbuf, dflat) = src, dst
        lin = self.linear()
        lane = tirx.floormod(lin, WARP_SIZE)
        base = lin - lane
        rows = self.new_buffer(f"tilelab_rows{len(self.added)}", [self.count], "int32")
        first = tirx.BufferStore(rows, tirx.Cast("int32", sflat), [lin])
        stores = []
        for m in range(num):
            for h in (0, 1):
                row, col = ldmatrix_element(lane, h, trans)
                start = tirx.BufferLoad(rows, [base + m * LDMATRIX_ROWS + row])
                value = _element(sbuf, start + col)
                stores.append(tirx.BufferStore(dbuf, value, _element(dbuf, dflat + 2 * m + h).indices))
        return first, tirx.SeqStmt(stores)

    def mma(self, call: Any) -> tuple[Any, Any]:
        from ..cuda_facts import MMA_M16N8K16, mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c
        from .emulate_intrinsics import _element

        tirx = self.tirx
        args = _call_args(call)
        texts = [str(getattr(a, "value", "")) for a in args[:6]]
        data = {b.data: b for b in self.allocs}
        operands = [(data.get(args[i]), args[i + 1]) for i in (6, 8, 10)]
        if texts[:3] != ["m16n8k16", "row", "col"] or texts[3] not in ("fp16", "bf16") or texts[4] != texts[3] \
                or texts[5] not in ("fp16", "fp32") or any(b is None for b, _ in operands):
            raise self.matrix_refusal(f"an mma.sync (T.ptx_mma) {' '.join(texts[:6])}")
        (a, a_off), (b, b_off), (c, c_off) = operands
        assert a is not None and b is not None and c is not None  # refused above otherwise
        shape = MMA_M16N8K16
        lin = self.linear()
        lane = tirx.floormod(lin, WARP_SIZE)
        warp = tirx.floordiv(lin, WARP_SIZE)
        warps = self.count // WARP_SIZE
        f32 = "float32"
        stage_a = self.new_buffer(f"tilelab_mma_a{len(self.added)}", [warps, shape["m"], shape["k"]], f32)
        stage_b = self.new_buffer(f"tilelab_mma_b{len(self.added)}", [warps, shape["k"], shape["n"]], f32)
        stage_c = self.new_buffer(f"tilelab_mma_c{len(self.added)}", [warps, shape["m"], shape["n"]], f32)
        first = []
        for stage, buf, off, where, count in ((stage_a, a, a_off, mma_m16n8k16_a, shape["a"]),
                                              (stage_b, b, b_off, mma_m16n8k16_b, shape["b"]),
                                              (stage_c, c, c_off, mma_m16n8k16_c, shape["c"])):
            for i in range(count):
                row, col = where(lane, i)
                first.append(tirx.BufferStore(stage, tirx.Cast(f32, _element(buf, off + i)), [warp, row, col]))
        second = []
        for i in range(shape["c"]):
            row, col = mma_m16n8k16_c(lane, i)
            total: Any = tirx.BufferLoad(stage_c, [warp, row, col])
            for k in range(shape["k"]):
                total = total + tirx.BufferLoad(stage_a, [warp, row, k]) * tirx.BufferLoad(stage_b, [warp, k, col])
            second.append(tirx.BufferStore(c, tirx.Cast(str(c.dtype), total), _element(c, c_off + i).indices))
        return tirx.SeqStmt(first), tirx.SeqStmt(second)


def _is_block_barrier(call: Any) -> bool:
    """A barrier of every thread of the block (T.sync_threads() without a thread count)."""
    op = _op_name(call)
    return op == "__syncthreads" or (op == "tirx.tvm_storage_sync" and len(_call_args(call)) < 3)


def _with_launch_blocks(func: Any, name: str = "") -> Any:
    """A kernel written with ``T.thread_binding`` loops and no ``T.Kernel`` (``for tx in
    T.thread_binding(128, thread="threadIdx.x")`` under a blockIdx one) with each block's body in the
    block ``T.Kernel`` makes (``tilelang_root``, its threads the extents of those loops), so that its
    threadIdx loops are loops over the block's threads like any other (TileLang's C code generator
    has no thread index to bind them to). A kernel with a ``T.Kernel`` block is returned as it is; one
    with a threadIdx loop whose extent is not a number (a size known at launch: the block's thread
    count) is refused by name, with its line: the rule's loops over a block's threads, and the slot
    per thread of what each keeps, are sized when the kernel is built."""
    tirx = tilelang().tvm.tirx
    found = {"launch": False}

    def look(n: Any) -> None:
        if isinstance(n, tirx.SBlock) and ("tl.launch_threads" in n.annotations
                                           or str(n.name_hint) == "tilelang_root"):
            found["launch"] = True

    tirx.stmt_functor.post_order_visit(func.body, look)
    if found["launch"]:
        return func

    def tag(n: Any) -> str:
        return str(n.thread_binding.thread_tag) if isinstance(n, tirx.For) and n.thread_binding is not None else ""

    sized = [n for n in _loops(func.body) if tag(n).startswith("threadIdx.")
             and not (isinstance(n.extent, tirx.IntImm) and isinstance(n.min, tirx.IntImm))]
    if sized:  # refused here, outside TVM's callbacks
        from .emulate_source import EmulationRefused

        loop = sized[-1]  # the outermost
        extent = str(loop.extent if isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0 else
                     f"{loop.min} + {loop.extent}")
        file, line, text = _source_line(func, rf"\bT\.thread_binding\b.*{re.escape(tag(loop))}")
        raise EmulationRefused(
            name, f"a T.thread_binding loop over {tag(loop)} of {extent} threads, a number known only at launch",
            "a kernel with no T.Kernel takes its block's threads from its threadIdx loops, and the CPU path runs a "
            "block's threads in loops (a slot per thread for what each keeps) whose sizes are fixed when the kernel "
            "is built; give the block a number of threads (T.Kernel(..., threads=N), or T.thread_binding(N, ...)) "
            "and guard the threads past the size (if tx < n)", file, line, text)

    def extents(stmt: Any) -> list[int] | None:
        sizes = {"x": 1, "y": 1, "z": 1}
        numbers = [True]

        def visit(n: Any) -> None:
            if tag(n).startswith("threadIdx."):
                if not isinstance(n.extent, tirx.IntImm) or not isinstance(n.min, tirx.IntImm):
                    numbers[0] = False
                    return
                axis = tag(n)[-1]
                sizes[axis] = max(sizes[axis], int(n.min) + int(n.extent))

        tirx.stmt_functor.post_order_visit(stmt, visit)
        if not numbers[0] or not _has_thread_loop(stmt):
            return None
        return [sizes["x"], sizes["y"], sizes["z"]]

    def wrapped(stmt: Any) -> Any:
        threads = extents(stmt)
        if threads is None:
            return None
        block = tirx.SBlock([], [], [], "tilelang_root", stmt, annotations={"tl.launch_threads": threads})
        return tirx.SBlockRealize([], tirx.const(True, "bool"), block)

    def inside_blocks(n: Any) -> bool:
        return any(tag(m).startswith("blockIdx.") for m in _loops(n.body))

    def post(n: Any) -> Any:
        if tag(n).startswith("blockIdx.") and not inside_blocks(n):  # the innermost block loop: its body
            body = wrapped(n.body)
            return None if body is None else tirx.For(n.loop_var, n.min, n.extent, n.kind, body, n.thread_binding,
                                                      n.annotations)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.For"])
    if body.same_as(func.body) and not any(tag(m).startswith("blockIdx.") for m in _loops(func.body)):
        def outermost(n: Any) -> Any:  # no block loop at all: the outermost threadIdx loop is the block
            if tag(n).startswith("threadIdx."):
                return wrapped(n) or n
            return None

        body = tirx.stmt_functor.ir_transform(func.body, outermost, None, ["tirx.For"])
    return func if body.same_as(func.body) else func.with_body(body)


def _mixed_thread_loops(func: Any) -> list[tuple[str, str, str]]:
    """The refusal of a kernel with no ``T.Kernel`` with a ``T.thread_binding`` loop of threadIdx or
    blockIdx that starts past 0 (TileLang's CUDA drops the start: ``for tx in T.thread_binding(32, 64, ...)`` runs
    ``tx = threadIdx.x`` from 0), or whose ``T.thread_binding`` loops of one threadIdx axis have
    different extents (``for tx in T.thread_binding(128, ...)`` then one of 64): TileLang
    gives such loops one thread index and launches the block with one of their extents (the last
    one's: ``__launch_bounds__(64)``), so every loop runs over that many threads, the others' extents
    unguarded. A block of the largest would write what the GPU does not; none when they agree."""
    tirx = tilelang().tvm.tirx
    launch = []
    tirx.stmt_functor.post_order_visit(func.body, lambda n: launch.append(n) if isinstance(n, tirx.SBlock) and (
        "tl.launch_threads" in n.annotations or str(n.name_hint) == "tilelang_root") else None)
    if launch:
        return []
    extents: dict[str, list[str]] = {}
    for loop in _loops(func.body):  # loops one after another: in program order
        tag = str(loop.thread_binding.thread_tag) if loop.thread_binding is not None else ""
        if tag.startswith(("threadIdx.", "blockIdx.")) and not (isinstance(loop.min, tirx.IntImm)
                                                               and int(loop.min) == 0):
            what = "threads" if tag.startswith("threadIdx.") else "blocks"
            return [(f"a T.thread_binding loop over {tag} from {loop.min} (not 0) in a kernel with no T.Kernel",
                     f"TileLang's CUDA binds the loop's variable to {tag} itself and drops its start, so on the GPU it "
                     f"runs from 0 over {loop.extent} {what}, not from {loop.min}; start the loop at 0 and add the "
                     "offset in the body", rf"\bT\.thread_binding\b.*{re.escape(tag)}")]
        if tag.startswith("threadIdx."):
            text = str(loop.extent) if isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0 else \
                f"{loop.min} + {loop.extent}"
            if text not in extents.setdefault(tag, []):
                extents[tag].append(text)
    for tag, found in extents.items():
        if len(found) > 1:
            return [(f"T.thread_binding loops over {tag} of different extents ({', '.join(found)}) in a kernel "
                     "with no T.Kernel",
                     "TileLang gives them one thread index and launches the block with one of these extents (the "
                     "last loop's), so every loop runs over that many threads: a loop of more threads is cut short "
                     "and one of fewer runs unguarded; give every loop the block's extent and guard the threads "
                     "past a loop's size (if tx < n), or use T.Kernel(..., threads=N)",
                     rf"\bT\.thread_binding\b.*{re.escape(tag)}")]
    return []


def _has_thread_loop(stmt: Any) -> bool:
    """Whether ``stmt`` holds a ``T.thread_binding`` loop of threadIdx."""
    tirx = tilelang().tvm.tirx
    return any(isinstance(m, tirx.For) and m.thread_binding is not None
               and str(m.thread_binding.thread_tag).startswith("threadIdx.") for m in _loops(stmt))


def _loops(stmt: Any) -> list[Any]:
    """Every loop of ``stmt``, inner ones first."""
    tirx = tilelang().tvm.tirx
    out: list[Any] = []
    tirx.stmt_functor.post_order_visit(stmt, lambda n: out.append(n) if isinstance(n, tirx.For) else None)
    return out


def _default_threads() -> int:
    """The threads of a block whose T.Kernel gives no ``threads=`` (TileLang's CUDA and HIP default)."""
    return int(getattr(getattr(tilelang(), "transform", None), "DEFAULT_SIMT_THREADS", 128))


def _declares(stmt: Any) -> bool:
    """A statement that only declares (a binding, a buffer): it stays where it is, unguarded."""
    tirx = tilelang().tvm.tirx
    kinds = tuple(getattr(tirx, k) for k in ("Bind", "DeclBuffer", "AllocBuffer") if hasattr(tirx, k))
    return isinstance(stmt, kinds) and not isinstance(getattr(stmt, "body", None), tirx.Stmt)


def _is_true(expr: Any) -> bool:
    tirx = tilelang().tvm.tirx
    return isinstance(expr, tirx.IntImm) and bool(int(expr))
