"""The timeline's CUDA rewrite: marks inserted into TileLang's generated device source.

Pure text in, text out (no TileLang import): :func:`instrument` takes the device source TileLang
generated for a kernel that carries one extra ``uint64`` parameter bound by a ``TLT_BIND(buf);``
statement (the adapter adds both before lowering) and returns the source with *marks* and the
table that names each one.

A mark is one record, written by lane 0 of a traced warp: the mark's site id in bits 63..48 and
the low 48 bits of ``clock64`` below. A mark opens a phase that lasts until the warp's next mark
(site ``END`` closes without opening one), so back-to-back phases cost one record each. Marks
are placed only between statements every thread of a warp executes (never inside an elected
block, a thread-dependent branch or an unrolled inner loop, never between WGMMA instructions).

The record buffer (64-bit words):

* a block table, ``blocks`` entries of 4 words, for every block of the grid:
  start ``%globaltimer`` (ns), end ``%globaltimer`` (the last warp's, by ``atomicMax``), ``%smid``,
  start ``clock64`` (the two clocks read together, by thread 0, to align blocks across SMs);
* then for each traced block (``slot``) and warp: 4 header words (the number of marks the warp
  tried to write, so drops are counted; its warp index + 1; ``%globaltimer`` and ``clock64`` read
  together at its end, which with the block's start pair give the SM clock during this launch)
  and ``capacity`` records.

Phases are recognised from TileLang 0.1.15's code shapes (mbarrier waits, the elected TMA-issue
block, ``warpgroup_arrive`` .. ``warpgroup_wait``, ``cp.async`` issue and wait, ``__syncthreads``,
``mma_sync`` blocks); a kernel with none of them gets kernel start and end marks only, and a note.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records.record import Record
from .walk import SKIP, PhaseWalk, repeats, split_roles

END = 0  # closes the open phase
KERNEL_START = 1
KERNEL_END = 2
FIRST_SITE = 3
HEADER_WORDS = 4
BLOCK_WORDS = 4
CLOCK_BITS = 48
DEFAULT_CAPACITY = 1 << 14  # records per warp where a loop's trip count is not a constant

BIND = re.compile(r"^\s*TLT_BIND\((\w+)\);\s*$")
_KERNEL_DEF = re.compile(r'^extern "C" __global__ void '
                         r'(?:__launch_bounds__\((\d+)(?:,\s*\d+)?\) )?(\w+)\((.*)\) \{\s*$')
_LINE = re.compile(r'^\s*#line (\d+) "(.*)"\s*$')
_FOR = re.compile(r"^\s*for \((?:int|int64_t|long long) (\w+) = (-?\d+); \1 < (-?\d+); \+\+\1\) \{$")
_FOR_ANY = re.compile(r"^\s*for \(")
_IF = re.compile(r"^\s*if \((.*)\) \{$")
_WAIT = re.compile(r"mbarrier\[(.+)\]\.wait\(")
_ARRIVE = re.compile(r"mbarrier\[(.+)\]\.arrive\(\);")
_TMA_LOAD = re.compile(r"tl::tma_load(?:_im2col)?\((\w+)_desc, mbarrier\[(.+?)\],")
_TMA_STORE = re.compile(r"tl::tma_store\w*\((\w+)_desc")
_CP_ASYNC = re.compile(r"tl::cp_async_gs\w*<\d+>\(.*?,\s*\(&\((\w+)\[")
_ELECT = re.compile(r"tl_shuffle_elect<")
_WARP_BRANCH = re.compile(r"^\(\(int\)threadIdx\.x\) (<|>=) (\d+)$")
# Barrier arrays and their use, as TileLang 0.1.15 writes them for auto warp specialisation
# (``mbarrier``) and for barriers a kernel allocates itself (``T.alloc_barrier``: the buffer's name).
BARRIER_ARRAY = re.compile(r"^\s*auto (\w+) = reinterpret_cast<Barrier\*>\((\w+)\);\s*$")
BARRIER_MEMORY = re.compile(r"^\s*__shared__ __align__\(\d+\) uint64_t (\w+)\[(\d+)\];\s*$")
BARRIER_INIT = re.compile(r"^\s*(\w+)\[(\d+)\]\.init\((\d+)\);\s*$")
BARRIER_WAIT = re.compile(r"^\s*(\w+)\[(.+)\]\.wait\((.+)\);\s*$")
BARRIER_ARRIVE = re.compile(r"^\s*(\w+)\[(.+)\]\.(arrive|arrive_and_expect_tx)\((.*)\);\s*$")
TMA_LOAD_BARRIER = re.compile(r"tl::tma_load(?:_im2col)?\((\w+)_desc, (\w+)\[(.+?)\],")
SYNC_THREADS = re.compile(r"^\s*__syncthreads\(\);\s*$")
SYNC_PARTIAL = re.compile(r"^\s*tl::__sync_thread_partial(?:<[^>]*>)?\((.*)\);\s*$")
FOR_HEAD = re.compile(r"^\s*for \((?:int|int64_t|long long|unsigned) (\w+) = ([^;]+); \1 < ([^;]+); \+\+\1\) \{$")
THREAD_COMPARE = re.compile(r"^\(*(?:\(\(int\)threadIdx\.x\) (<|>=) (\d+)|(\d+) <= \(\(int\)threadIdx\.x\))\)*$")


@dataclass(frozen=True)
class Site(Record):
    """What a mark's site id means: the phase it opens."""

    id: int
    kind: str  # barrier_wait, tma_issue, copy_issue, mma, mma_wait, epilogue, store, kernel
    label: str
    role: str  # producer, consumer, all
    device_line: int | None  # 1-based, in the kernel's plain device source (no #line, no bind)
    cell_line: int | None  # the user's line this phase belongs to
    cell_file: str | None
    in_loop: bool  # inside a loop: the n-th mark of this site in a warp is iteration n
    loop_line: int | None = None  # the T.Pipelined line of the enclosing loop
    stage: str | None = None  # "full" / "empty" for barrier waits of a pipeline
    barriers: tuple[str, ...] = ()  # normalised mbarrier expressions it waits on or arrives through
    multiplicity: int | None = 1  # marks per warp (None: a loop without a constant trip count)


@dataclass(frozen=True)
class Instrumented:
    source: str
    sites: tuple[Site, ...]
    kernel: str
    threads: int | None
    capacity: int  # records per traced warp
    capacity_exact: bool  # every mark's loop had a constant trip count
    blocks: int
    traced_blocks: tuple[int, ...]
    warp_step: int  # 1: every warp records, 4: the first warp of each warp group
    notes: tuple[str, ...] = ()

    @property
    def warps(self) -> int:
        return max(1, (self.threads or 32) // 32)

    def words(self) -> int:
        """The record buffer's size in 64-bit words."""
        return self.blocks * BLOCK_WORDS + len(self.traced_blocks) * self.warps * (HEADER_WORDS + self.capacity)


class RewriteError(ValueError):
    """The source is not one this rewrite can instrument (no bind statement, no kernel)."""


# ------------------------------------------------------------------------------------------
# Statements: the kernel body as a tree, from TVM's codegen layout (one statement per line,
# every block braced)
# ------------------------------------------------------------------------------------------


@dataclass
class Node:
    lo: int  # first line (its #pragma / #line prefix included)
    head: int  # the statement's own first line
    hi: int  # last line
    children: list[Node] = field(default_factory=list)  # block body (the then-branch of an if)
    orelse: list[Node] = field(default_factory=list)
    else_line: int | None = None

    @property
    def is_block(self) -> bool:
        return self.hi > self.head


def _parse(lines: Sequence[str], start: int, stop: int) -> list[Node]:
    """Statements of lines[start:stop] (a block's body)."""
    out: list[Node] = []
    i = start
    prefix: int | None = None
    while i < stop:
        text = lines[i].strip()
        if not text or text.startswith("#pragma") or text.startswith("#line") or text.startswith("//"):
            if prefix is None and (text.startswith("#pragma") or text.startswith("#line")):
                prefix = i
            i += 1
            continue
        lo = prefix if prefix is not None else i
        prefix = None
        if text.endswith("{"):
            close = _matching(lines, i, stop)
            node = Node(lo, i, close)
            if lines[close].strip() == "} else {":
                node.children = _parse(lines, i + 1, close)
                end = _matching(lines, close, stop)
                node.else_line = close
                node.orelse = _parse(lines, close + 1, end)
                node.hi = end
            else:
                node.children = _parse(lines, i + 1, close)
            out.append(node)
            i = node.hi + 1
        else:
            out.append(Node(lo, i, i))
            i += 1
    return out


def _matching(lines: Sequence[str], open_line: int, stop: int) -> int:
    depth = 0
    for j in range(open_line, stop):
        text = lines[j].strip()
        if text.startswith("#") or text.startswith("//"):
            continue
        if j == open_line:
            depth = 1
            continue
        if text.startswith("}"):
            depth -= 1
            if depth == 0:
                return j
        if text.endswith("{"):
            depth += 1
    raise RewriteError(f"unbalanced braces after line {open_line + 1}")


def _text(lines: Sequence[str], node: Node) -> str:
    return "\n".join(lines[node.lo:node.hi + 1])


def _norm(expr: str) -> str:
    """An mbarrier index with its loop variables renamed: the producer's ``(k % 3)`` and the
    consumer's ``(k_1 % 3)`` are the same barrier."""
    return re.sub(r"\b[A-Za-z_]\w*\b", "v", expr.replace(" ", ""))


# ------------------------------------------------------------------------------------------
# Naming: the user's tile ops (from the prim_func, through the adapter) matched to device code
# ------------------------------------------------------------------------------------------


def _op_label(op: dict[str, Any]) -> str:
    bufs = op.get("buffers") or []
    name = {"copy": "T.copy", "gemm": "T.gemm", "fill": "T.fill", "clear": "T.clear"}.get(op["op"], f"T.{op['op']}")
    if op["op"] == "copy" and len(bufs) >= 2:
        return f"{name} {bufs[0]} -> {bufs[1]}"
    return f"{name}({', '.join(bufs)})" if bufs else name


def _line_of(op: dict[str, Any] | None) -> str:
    return f" L{op['line']}" if op and op.get("line") else ""


class _Namer:
    def __init__(self, ops: Sequence[dict[str, Any]]) -> None:
        self.ops = list(ops)

    def copy_reading(self, buffer: str) -> dict[str, Any] | None:
        return next((o for o in self.ops if o["op"] == "copy" and (o.get("buffers") or [None])[0] == buffer), None)

    def copy_writing(self, buffer: str) -> dict[str, Any] | None:
        return next((o for o in self.ops if o["op"] == "copy" and (o.get("buffers") or [None, None])[-1] == buffer),
                    None)

    def gemm_in(self, text: str) -> dict[str, Any] | None:
        best, score = None, 0
        for o in self.ops:
            if o["op"] != "gemm":
                continue
            hits = sum(1 for b in o.get("buffers") or [] if re.search(rf"\b{re.escape(b)}\b", text))
            if hits > score:
                best, score = o, hits
        return best or next((o for o in self.ops if o["op"] == "gemm"), None)

    def pipelined_line(self, text: str) -> int | None:
        """The T.Pipelined line of the tile ops whose device code appears in ``text``."""
        for o in self.ops:
            if o.get("loop_line") is None:
                continue
            if any(re.search(rf"\b{re.escape(b)}(_desc)?\b", text) for b in (o.get("buffers") or [])[:1]):
                return int(o["loop_line"])
        return None


# ------------------------------------------------------------------------------------------
# The rewrite
# ------------------------------------------------------------------------------------------


class _Builder(PhaseWalk[Node]):
    def __init__(self, lines: list[str], plain_line: dict[int, int], ops: Sequence[dict[str, Any]],
                 cell_file: str | None) -> None:
        self.lines = lines
        self.plain_line = plain_line
        self.namer = _Namer(ops)
        self.cell_file = cell_file
        self.sites: list[Site] = []
        self.before: dict[int, list[str]] = {}
        self.after: dict[int, list[str]] = {}
        self.full: dict[str, dict[str, Any] | None] = {}  # barrier -> the copy whose TMA fills it
        self.empty: set[str] = set()

    # -- the barriers' roles, read from the whole body first
    def scan_barriers(self, body: str) -> None:
        for m in _TMA_LOAD.finditer(body):
            self.full.setdefault(_norm(m.group(2)), self.namer.copy_reading(m.group(1)))
        for m in _ARRIVE.finditer(body):
            self.empty.add(_norm(m.group(1)))

    def cell_line_near(self, index: int) -> int | None:
        """The #line directly above statement ``index`` when it names the user's file."""
        return cell_line_above(self.lines, index, self.cell_file)

    def site(self, kind: str, label: str, node: Node, role: str, loops: list[int | None],
             cell_line: int | None, loop_line: int | None = None, stage: str | None = None,
             barriers: tuple[str, ...] = ()) -> int:
        sid = FIRST_SITE + len(self.sites)
        self.sites.append(Site(sid, kind, label, role, self.plain_line.get(node.head), cell_line,
                               self.cell_file if cell_line else None, bool(loops), loop_line, stage, barriers,
                               repeats(loops)))
        return sid

    def mark_before(self, node: Node, sid: int) -> None:
        self.before.setdefault(node.lo, []).append(f"TLT_MARK({sid});")

    def end_after(self, node: Node) -> None:
        self.after.setdefault(node.hi, []).append(f"TLT_MARK({END});")

    # -- classification of one statement
    def classify(self, node: Node, role: str, loops: list[int | None], loop_line: int | None
                 ) -> tuple[str, str, int | None, dict[str, Any]] | None:
        lines, text = self.lines, _text(self.lines, node)
        head = lines[node.head].strip()
        wait = _WAIT.search(head) if not node.is_block else None
        if wait:
            b = _norm(wait.group(1))
            copy = self.full.get(b)
            pipe = f" of T.Pipelined L{loop_line}" if loop_line else ""
            if b in self.full:
                what = f"stage full{pipe}: {_op_label(copy)}{_line_of(copy)}" if copy else f"stage full{pipe}"
                return "barrier_wait", what, loop_line or (copy or {}).get("line"), {"stage": "full", "barriers": (b,)}
            if b in self.empty:
                return "barrier_wait", f"stage empty{pipe}", loop_line, {"stage": "empty", "barriers": (b,)}
            return "barrier_wait", f"mbarrier[{wait.group(1)}] wait", loop_line, {"barriers": (b,)}
        if head == "tl::warpgroup_arrive();":
            return "mma", "", None, {"open": True}
        m = re.match(r"tl::warpgroup_wait<(\d+)>\(\);", head)
        if m:
            return "mma_wait", f"wait for WGMMA (<= {m.group(1)} groups in flight)", None, {}
        if re.match(r"tl::cp_async_wait<(\d+)>\(\);", head):
            n = re.match(r"tl::cp_async_wait<(\d+)>", head).group(1)  # type: ignore[union-attr]
            pipe = f" of T.Pipelined L{loop_line}" if loop_line else ""
            return "barrier_wait", f"stage full{pipe}: cp.async wait (<= {n} groups pending)", loop_line, \
                {"stage": "full"}
        if head == "__syncthreads();":
            pipe = f" (T.Pipelined L{loop_line})" if loop_line else ""
            return "barrier_wait", f"__syncthreads{pipe}", loop_line, {}
        if node.is_block and _ELECT.search(head):
            loads = _TMA_LOAD.findall(text)
            if loads:
                names = list(dict.fromkeys(name for name, _ in loads))
                copies = [self.namer.copy_reading(n) for n in names]
                label = "TMA issue: " + ", ".join(
                    (_op_label(c) + _line_of(c)) if c else f"{n}_desc" for n, c in zip(names, copies))
                first = next((c for c in copies if c), None)
                return "tma_issue", label, (first or {}).get("line"), \
                    {"barriers": tuple(dict.fromkeys(_norm(b) for _, b in loads))}
            stores = _TMA_STORE.findall(text)
            if stores:
                copy = self.namer.copy_writing(stores[0])
                return "store", f"TMA store: {_op_label(copy) + _line_of(copy) if copy else stores[0]}", \
                    (copy or {}).get("line"), {}
            return None
        if node.is_block and ("mma_sync" in text or "tl::gemm_" in text) and not _primary(text):
            op = self.namer.gemm_in(text)
            return "mma", f"{_op_label(op)}{_line_of(op)}" if op else "MMA", (op or {}).get("line"), {}
        if node.is_block and "cp_async_gs" in text and not _primary(text):
            names = list(dict.fromkeys(_CP_ASYNC.findall(text)))
            copies = [self.namer.copy_reading(n) for n in names]
            label = "cp.async issue: " + ", ".join(
                (_op_label(c) + _line_of(c)) if c else n for n, c in zip(names, copies))
            first = next((c for c in copies if c), None)
            return "copy_issue", label, (first or {}).get("line") or self.cell_line_near(node.head), {}
        return None

    # -- the shared walk's hooks (``_timeline_walk``), for statements of the C++ text
    def is_commit(self, node: Node) -> bool:
        return self.lines[node.head].strip() == "tl::cp_async_commit();"

    def closes_pending(self, node: Node) -> bool:
        return self.lines[node.head].strip() not in ("", "}")

    def wgmma_named(self, nodes: list[Node], index: int, last_phase: Node | None) -> tuple[str, int | None]:
        # the T.gemm whose instructions follow the arrive
        op = self.namer.gemm_in("\n".join(_text(self.lines, n) for n in nodes[index:]))
        return (f"WGMMA issue: {_op_label(op)}{_line_of(op)}" if op else "WGMMA issue"), (op or {}).get("line")

    def inner(self, node: Node, role: str, loops: list[int | None], loop_line: int | None, top: bool
              ) -> list[tuple[list[Node], str, list[int | None], int | None, bool]] | str | None:
        if not (node.is_block and _primary(_text(self.lines, node))):
            return None
        inner_loops, inner_line = loops, loop_line
        m = _FOR.match(self.lines[node.head])
        if m or _FOR_ANY.match(self.lines[node.head]):
            trip = int(m.group(3)) - int(m.group(2)) if m else None
            inner_loops = loops + [max(trip, 0) if trip is not None else None]
            inner_line = self.namer.pipelined_line(_text(self.lines, node)) or loop_line
        branch = _IF.match(self.lines[node.head])
        if branch and not _warp_uniform(branch.group(1)):
            return SKIP
        if branch and _WARP_BRANCH.match(branch.group(1)):
            then_role, else_role = self._branch_roles(node)
            return [(node.children, then_role, inner_loops, inner_line, top),
                    (node.orelse, else_role, inner_loops, inner_line, top)]
        return [(node.children, role, inner_loops, inner_line, False),
                (node.orelse, role, inner_loops, inner_line, False)]

    def epilogue(self, after: list[Node], role: str, loops: list[int | None]) -> None:
        line = next((self.cell_line_near(n.head) for n in after if self.cell_line_near(n.head)), None)
        op = next((o for o in self.namer.ops if o.get("line") == line), None) if line else None
        label = "epilogue" + (f": {_op_label(op)} L{line}" if op else (f" L{line}" if line else ""))
        self.mark_before(after[0], self.site("epilogue", label, after[0], role, loops, line))

    def _branch_roles(self, node: Node) -> tuple[str, str]:
        return split_roles("\n".join(_text(self.lines, n) for n in node.children),
                           "\n".join(_text(self.lines, n) for n in node.orelse), ("tma_load", "cp_async_gs"))


def _primary(text: str) -> bool:
    """Whether a block holds statements that get marks of their own (then it is walked into)."""
    return bool(_WAIT.search(text) or "warpgroup_arrive" in text or "cp_async_wait" in text
                or "__syncthreads" in text or (_ELECT.search(text) and ("tma_load" in text or "tma_store" in text)))


def _warp_uniform(condition: str) -> bool:
    """A branch every thread of a warp takes alike: no thread index, or a split at a multiple of 32."""
    m = _WARP_BRANCH.match(condition)
    if m:
        return int(m.group(2)) % 32 == 0
    return "threadIdx" not in condition and "tl_shuffle_elect" not in condition and "lane" not in condition


def _slot_expression(traced: Sequence[int]) -> str:
    expr = "-1"
    for slot, block in reversed(list(enumerate(traced))):
        expr = f"(tlt_block == {block}u ? {slot} : {expr})"
    return expr


PREAMBLE = r"""
// ---- tilelab timeline: record helpers ----
__device__ __forceinline__ unsigned long long tlt_globaltimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned int tlt_smid() {
  unsigned int s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ unsigned long long tlt_clock() {
  unsigned long long c; asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory"); return c; }
#define TLT_MARK(site) do { if (tlt_seg != nullptr) { \
    if (tlt_n < TLT_CAP) tlt_seg[tlt_n] = ((unsigned long long)(site) << 48) | (tlt_clock() & 0xFFFFFFFFFFFFull); \
    ++tlt_n; } } while (0)
// ---- end of tilelab timeline helpers ----
"""


@dataclass(frozen=True)
class KernelFrame:
    """Where a kernel lowered with a record buffer sits in its device source: the lines, the
    ``TLT_BIND`` statement, the buffer's name, the kernel's definition and closing brace, its
    ``__launch_bounds__`` (None without), and each line's number in the plain kernel's source
    (no ``#line`` directives, no bind statement)."""

    lines: list[str]
    bind_at: int
    buf_name: str
    kdef: int
    kend: int
    kernel: str
    threads: int | None
    plain_line: dict[int, int]


def cell_line_above(lines: list[str], index: int, cell_file: str | None) -> int | None:
    """The cell line of the ``#line`` directive directly above line ``index`` (past ``#pragma``
    lines), when it names the user's file ``cell_file``; else None."""
    j = index - 1
    while j >= 0 and lines[j].strip().startswith("#pragma"):
        j -= 1
    m = _LINE.match(lines[j]) if j >= 0 else None
    if m and cell_file and m.group(2) == cell_file:
        return int(m.group(1))
    return None


def kernel_frame(source: str) -> KernelFrame:
    """The :class:`KernelFrame` of ``source``, read once for both rewriters (timeline, hang watch)."""
    lines = source.split("\n")
    bind_at = next((i for i, t in enumerate(lines) if BIND.match(t)), None)
    if bind_at is None:
        raise RewriteError("the source has no TLT_BIND statement: it was not lowered with a record buffer")
    buf_name = BIND.match(lines[bind_at]).group(1)  # type: ignore[union-attr]
    kdef = max((i for i in range(bind_at) if _KERNEL_DEF.match(lines[i])), default=None)
    if kdef is None:
        raise RewriteError("no kernel definition before the TLT_BIND statement")
    threads_text, kernel, _ = _KERNEL_DEF.match(lines[kdef]).groups()  # type: ignore[union-attr]
    plain_line: dict[int, int] = {}
    n = 0
    for i, t in enumerate(lines):
        if _LINE.match(t) or i == bind_at:
            continue
        n += 1
        plain_line[i] = n
    return KernelFrame(lines, bind_at, buf_name, kdef, _matching(lines, kdef, len(lines)), kernel,
                       int(threads_text) if threads_text else None, plain_line)


def instrument(source: str, *, ops: Sequence[dict[str, Any]] = (), cell_file: str | None = None,
               blocks: int = 1, traced_blocks: Sequence[int] = (0,), granularity: str = "warpgroup",
               capacity: int | None = None) -> Instrumented:
    """The instrumented source and its site table.

    ``ops``: the kernel's tile ops as the adapter reads them from the prim_func (``op``,
    ``buffers``, ``line``, ``loop_line``); ``cell_file``: the file name ``#line`` directives give
    for the user's code. ``blocks``: the grid's block count (the block table's size);
    ``traced_blocks``: linear block indices whose warps record phases.
    """
    if granularity not in ("warpgroup", "warp"):
        raise ValueError(f"granularity must be 'warpgroup' or 'warp', not {granularity!r}")
    frame = kernel_frame(source)
    lines, bind_at, buf_name, kdef, kend = frame.lines, frame.bind_at, frame.buf_name, frame.kdef, frame.kend
    kernel, threads, plain_line = frame.kernel, frame.threads, frame.plain_line

    builder = _Builder(lines, plain_line, ops, cell_file)
    body = "\n".join(lines[kdef + 1:kend])
    builder.scan_barriers(body)
    nodes = _parse(lines, kdef + 1, kend)
    notes = builder.walk_kernel(nodes)
    capacity, exact = record_capacity(builder.sites, capacity)
    warp_step = 4 if granularity == "warpgroup" else 1
    warps = max(1, (threads or 32) // 32)
    seg0 = blocks * BLOCK_WORDS
    traced = tuple(int(b) for b in traced_blocks)
    warp_filter = " && (tlt_warp & 3u) == 0u" if warp_step == 4 else ""

    start = [
        "  // ---- tilelab timeline: kernel start ----",
        f"  unsigned long long* const tlt_base = (unsigned long long*)({buf_name});",
        "  const unsigned tlt_block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);",
        "  const unsigned tlt_thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);",
        "  const unsigned tlt_warp = tlt_thread >> 5;",
        f"  if (tlt_thread == 0u && tlt_block < {blocks}u) {{",
        "    const unsigned long long tlt_c0 = tlt_clock();",
        "    const unsigned long long tlt_g0 = tlt_globaltimer();",
        f"    tlt_base[tlt_block * {BLOCK_WORDS}u] = tlt_g0;",
        f"    tlt_base[tlt_block * {BLOCK_WORDS}u + 2u] = tlt_smid();",
        f"    tlt_base[tlt_block * {BLOCK_WORDS}u + 3u] = tlt_c0;",
        "  }",
        f"  const int tlt_slot = {_slot_expression(traced)};",
        f"  unsigned long long* tlt_seg = (tlt_slot >= 0 && (tlt_thread & 31u) == 0u && tlt_warp < {warps}u"
        f"{warp_filter}) ? tlt_base + {seg0}ull + ((unsigned long long)tlt_slot * {warps}u + tlt_warp) * "
        f"{HEADER_WORDS + capacity}ull + {HEADER_WORDS}ull : nullptr;",
        "  unsigned tlt_n = 0u;",
        f"  TLT_MARK({KERNEL_START});",
        "  // ---- end of tilelab timeline start ----",
    ]
    finish = [
        "  // ---- tilelab timeline: kernel end ----",
        f"  TLT_MARK({KERNEL_END});",
        "  if (tlt_seg != nullptr) { tlt_seg[-4] = tlt_n; tlt_seg[-3] = tlt_warp + 1u; "
        "tlt_seg[-1] = tlt_clock(); tlt_seg[-2] = tlt_globaltimer(); }",
        f"  if ((tlt_thread & 31u) == 0u && tlt_block < {blocks}u) "
        f"atomicMax(&tlt_base[tlt_block * {BLOCK_WORDS}u + 1u], tlt_globaltimer());",
        "  // ---- end of tilelab timeline end ----",
    ]
    out: list[str] = []
    for i, text in enumerate(lines):
        if i == kdef:
            out.append(f"#define TLT_CAP {capacity}u")
            out.extend(PREAMBLE.strip("\n").split("\n"))
            out.append(text)
            out.extend(start)
            continue
        if i == bind_at:
            out.append("  // (record buffer bound above)")
            continue
        if kdef < i < kend and text.strip() == "return;":
            out.extend(x.replace("  ", "", 0) for x in finish)
        if i == kend:
            out.extend(finish)
            out.append(text)
            out.append("#undef TLT_CAP")
            out.append("#undef TLT_MARK")
            continue
        indent = re.match(r"\s*", text).group(0)  # type: ignore[union-attr]
        for mark in builder.before.get(i, []):
            out.append(indent + mark)
        out.append(text)
        for mark in builder.after.get(i, []):
            out.append(indent + mark)
    return Instrumented("\n".join(out), tuple(builder.sites), kernel, threads, capacity, exact, blocks, traced,
                        warp_step, tuple(notes))


def capacity_needed(sites: Sequence[Site]) -> int:
    """Records one warp writes at most: a mark and an END per site visit (an END is left out where
    the next statement opens a phase), plus kernel start and end."""
    return 2 + sum(2 * (s.multiplicity or 0) for s in sites)


def record_capacity(sites: Sequence[Site], capacity: int | None) -> tuple[int, bool]:
    """(records per traced warp, whether every site's visits are counted exactly): the caller's
    ``capacity``, else what the sites need (:func:`capacity_needed`), and at least
    :data:`DEFAULT_CAPACITY` where a loop's trip count is not known."""
    exact = all(s.multiplicity is not None for s in sites)
    if capacity is None:
        need = capacity_needed(sites)
        capacity = need if exact else max(need, DEFAULT_CAPACITY)
    return capacity, exact


__all__ = ["END", "KERNEL_END", "KERNEL_START", "Instrumented", "RewriteError", "Site", "instrument"]
