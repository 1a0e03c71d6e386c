"""The hang watch: TileLang's generated device source rewritten so that each warp keeps its current
state in a slot of host-mapped memory, which another process reads while the kernel hangs.

Pure text in, text out (no TileLang import), over the same input as the timeline's rewrite
(:mod:`tilelab.instrument.rewrite.timeline`): the device source of a kernel that carries one extra ``uint64``
parameter bound by a ``TLT_BIND(buf);`` statement. :func:`watch` returns the source and the
tables that name what the slots hold.

A slot is two 64-bit words per (block, warp), ``(block * warps + warp) * 2`` words from the start:
the state word, then ``%globaltimer`` (ns) when it was written. The first active lane of the warp
writes it, with volatile stores and a system-scope fence, so a reader on the host sees it even
though the kernel never ends:

* at kernel start: running;
* before every barrier wait (an mbarrier wait on a parity, ``__syncthreads``, a named barrier):
  waiting, with the site, the barrier's index and the parity as the kernel computes them, and the
  enclosing loop's iteration;
* after the wait: running, past that site;
* before the kernel returns: finished.

State word: bits 63..62 the state (0: never written, 1: running, 2: waiting, 3: finished), 61..48
the site id, 47..32 the barrier index, 31 the parity, 30..0 the iteration.

Alongside, the source is read for what a deadlock explanation needs: each barrier's expected
arrival count (its ``init``), and every arrive statement with the threads that execute it, so
that a wait that never completes can be matched to the warps that should have completed it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .timeline import (
    BARRIER_ARRAY,
    BARRIER_ARRIVE,
    BARRIER_INIT,
    BARRIER_MEMORY,
    BARRIER_WAIT,
    FOR_HEAD,
    SYNC_PARTIAL,
    SYNC_THREADS,
    THREAD_COMPARE,
    TMA_LOAD_BARRIER,
    Node,
    RewriteError,
    _Namer,
    _parse,
    cell_line_above,
    kernel_frame,
)

SLOT_WORDS = 2
KERNEL_SITE = 1  # the state word's site while running before any wait, and when finished
FIRST_SITE = 2
MAX_SITES = (1 << 14) - 1
RUNNING, WAITING, FINISHED = 1, 2, 3
STATES = {0: "not started", RUNNING: "running", WAITING: "waiting", FINISHED: "finished"}
DEFAULT_MAX_BLOCKS = 8192  # blocks past this many are not watched (a hung grid has far fewer resident)


@dataclass(frozen=True)
class WatchSite:
    """A wait the watch marks: where it is and what it waits on."""

    id: int
    kind: str  # "mbarrier", "syncthreads", "named_barrier"
    barrier: str | None  # the barrier array's name in the device code (``full``, ``mbarrier``)
    index: str | None  # the index expression, as the device code writes it
    parity: str | None  # the parity expression
    role: str  # "producer", "consumer", "all"
    threads: tuple[int, int] | None  # the thread range [lo, hi) of the branch it is in
    device_line: int  # 1-based, in the plain device source (no #line, no bind)
    cell_line: int | None
    cell_file: str | None
    loop_var: str | None  # the enclosing loop's variable: the iteration the slot records
    loop_line: int | None  # the user's line of that loop, when the device code names it
    stage: str | None  # "full" (TMA or the producer fills it) or "empty" (the consumer frees it)
    label: str
    first_index: int | None = None  # the lowest barrier index the wait reaches: index - first_index is the stage

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WatchSite:
        return cls(**{**d, "threads": tuple(d["threads"]) if d.get("threads") else None})


@dataclass(frozen=True)
class Arrival:
    """An arrive statement (or the TMA loads completing on a barrier): who arrives, how often."""

    barrier: str
    index: str
    indices: tuple[int, ...] | None  # the barrier indices it reaches (None: not computed)
    role: str
    threads: int | None  # threads that execute it once per pass (1 in an elected block; None: unknown)
    thread_range: tuple[int, int] | None
    kind: str  # "arrive", "arrive_and_expect_tx", "tma"
    device_line: int
    cell_line: int | None  # its own line, else its loop's

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Arrival:
        return cls(**{**d, "indices": tuple(d["indices"]) if d.get("indices") is not None else None,
                      "thread_range": tuple(d["thread_range"]) if d.get("thread_range") else None})


@dataclass(frozen=True)
class Watched:
    """The watch rewrite's result: the source, and the tables a slot buffer is read with."""

    source: str
    kernel: str
    threads: int | None
    warps: int  # warps per block (slots per block)
    blocks: int  # watched blocks (slots for blocks 0 .. blocks-1)
    sites: tuple[WatchSite, ...]
    arrivals: tuple[Arrival, ...]
    inits: tuple[tuple[str, int, int], ...]  # (barrier array, index, expected arrivals)
    cell_file: str | None
    notes: tuple[str, ...] = ()

    def words(self) -> int:
        """The slot buffer's size in 64-bit words."""
        return self.blocks * self.warps * SLOT_WORDS

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "threads": self.threads, "warps": self.warps, "blocks": self.blocks,
                "sites": [s.to_dict() for s in self.sites], "arrivals": [a.to_dict() for a in self.arrivals],
                "inits": [list(i) for i in self.inits], "cell_file": self.cell_file, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "") -> Watched:
        return cls(source, d["kernel"], d["threads"], d["warps"], d["blocks"],
                   tuple(WatchSite.from_dict(s) for s in d["sites"]),
                   tuple(Arrival.from_dict(a) for a in d["arrivals"]),
                   tuple((str(a), int(b), int(c)) for a, b, c in d["inits"]), d.get("cell_file"),
                   tuple(d.get("notes") or ()))


PREAMBLE = r"""
// ---- tilelab hang watch: slot helpers ----
__device__ __forceinline__ unsigned long long tlw_globaltimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define TLW_SET(state, site, bar, par, iter) do { if (tlw_slot != nullptr && \
    (__activemask() & ((1u << (tlw_thread & 31u)) - 1u)) == 0u) { \
    tlw_slot[1] = tlw_globaltimer(); \
    tlw_slot[0] = ((unsigned long long)(state) << 62) | ((unsigned long long)((site) & 0x3FFFu) << 48) \
      | ((unsigned long long)((unsigned)(bar) & 0xFFFFu) << 32) | ((unsigned long long)((unsigned)(par) & 1u) << 31) \
      | (unsigned long long)((unsigned)(iter) & 0x7FFFFFFFu); \
    __threadfence_system(); } } while (0)
// ---- end of tilelab hang watch helpers ----
"""


# ------------------------------------------------------------------------------------------
# Reading the kernel: thread ranges of warp-split branches, loops, barrier facts
# ------------------------------------------------------------------------------------------


def thread_range(condition: str, parent: tuple[int, int]) -> tuple[int, int] | None:
    """The thread range a branch on ``threadIdx.x`` keeps of ``parent``; None when the condition is
    not only comparisons of ``threadIdx.x`` with constants (joined by ``&&``)."""
    lo, hi = parent
    parts = [p.strip() for p in _strip_parens(condition).split("&&")]
    for part in parts:
        m = THREAD_COMPARE.match(part)
        if not m:
            return None
        op, n, ge = m.groups()
        if ge is not None:
            lo = max(lo, int(ge))
        elif op == "<":
            hi = min(hi, int(n))
        else:
            lo = max(lo, int(n))
    return (lo, hi)


def _strip_parens(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _complement(then: tuple[int, int], parent: tuple[int, int]) -> tuple[int, int] | None:
    if then[0] == parent[0]:
        return (then[1], parent[1])
    if then[1] == parent[1]:
        return (parent[0], then[0])
    return None


_SAFE_EXPR = re.compile(r"^[\w\s+\-*/%&|^<>()]+$")


def eval_index(expr: str, env: dict[str, int]) -> int | None:
    """An index expression of the device code (integers, the given variables, C's arithmetic on
    non-negative values) evaluated; None when it holds anything else."""
    text = expr.replace("(int)", "").replace("(uint)", "")
    if not _SAFE_EXPR.match(text) or "&&" in text or "||" in text:
        return None
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", text))
    if not names <= set(env):
        return None
    text = re.sub(r"(?<![/])/(?![/])", "//", text)
    try:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
                                     ast.operator, ast.unaryop)):
                return None
        value = eval(compile(tree, "<index>", "eval"), {"__builtins__": {}}, dict(env))
    except Exception:
        return None
    return int(value) if isinstance(value, int) else None


@dataclass
class _Context:
    threads: tuple[int, int] | None  # thread range of the enclosing warp-split branches
    role: str
    elected: bool  # inside a one-thread branch (tl_shuffle_elect)
    uniform: bool  # every thread of the range executes it (no other thread-dependent branch)
    loops: tuple[tuple[str, str, str], ...]  # (var, start, stop) outermost first
    loop_line: int | None = None  # the user's line of the innermost loop (its T.Pipelined, or its #line)


class _Reader:
    def __init__(self, lines: list[str], plain_line: dict[int, int], ops: Sequence[dict[str, Any]],
                 cell_file: str | None, block_threads: int) -> None:
        self.lines = lines
        self.plain_line = plain_line
        self.namer = _Namer(ops)
        self.cell_file = cell_file
        self.block_threads = block_threads
        self.sites: list[WatchSite] = []
        self.waits: dict[int, int] = {}  # line -> site id
        self.arrivals: list[Arrival] = []
        self.inits: list[tuple[str, int, int]] = []
        self.arrays: dict[str, int] = {}  # barrier array -> number of barriers
        self.full_arrays: set[tuple[str, str]] = set()  # (array, normalised index) TMA loads complete on
        self.has_producer = False

    def cell_line(self, index: int) -> int | None:
        return cell_line_above(self.lines, index, self.cell_file)

    def scan_declarations(self, lo: int, hi: int) -> None:
        memory: dict[str, int] = {}
        body = "\n".join(self.lines[lo:hi])
        self.has_producer = "tma_load" in body or "cp_async_gs" in body
        for i in range(lo, hi):
            text = self.lines[i]
            m = BARRIER_MEMORY.match(text)
            if m:
                memory[m.group(1)] = int(m.group(2))
            m = BARRIER_ARRAY.match(text)
            if m and m.group(2) in memory:
                self.arrays[m.group(1)] = memory[m.group(2)]
            m = BARRIER_INIT.match(text)
            if m and m.group(1) in self.arrays:
                self.inits.append((m.group(1), int(m.group(2)), int(m.group(3))))
            for load in TMA_LOAD_BARRIER.finditer(text):
                self.full_arrays.add((load.group(2), _norm(load.group(3))))

    def walk(self, nodes: list[Node], ctx: _Context) -> None:
        for node in nodes:
            head = self.lines[node.head]
            if not node.is_block:
                self.statement(node, ctx)
                continue
            stripped = head.strip()
            loop = FOR_HEAD.match(head)
            if loop:
                text = "\n".join(self.lines[node.lo:node.hi + 1])
                line = self.namer.pipelined_line(text) or self.cell_line(node.head) or ctx.loop_line
                inner = _Context(ctx.threads, ctx.role, ctx.elected, ctx.uniform,
                                 ctx.loops + ((loop.group(1), loop.group(2).strip(), loop.group(3).strip()),), line)
                self.walk(node.children, inner)
                continue
            cond = re.match(r"^\s*if \((.*)\) \{$", head)
            if cond:
                condition = cond.group(1)
                parent = ctx.threads or (0, self.block_threads)
                rng = thread_range(condition, parent)
                if rng is not None:
                    role_then = self.role_of(node.children)
                    self.walk(node.children, _Context(rng, role_then, ctx.elected, ctx.uniform, ctx.loops,
                                                      ctx.loop_line))
                    other = _complement(rng, parent)
                    if node.orelse:
                        role_else = self.role_of(node.orelse)
                        self.walk(node.orelse, _Context(other, role_else, ctx.elected, ctx.uniform and
                                                        other is not None, ctx.loops, ctx.loop_line))
                    continue
                elected = "tl_shuffle_elect" in condition
                dependent = elected or "threadIdx" in condition or "lane" in condition
                inner = _Context(ctx.threads, ctx.role, ctx.elected or elected, ctx.uniform and not dependent,
                                 ctx.loops, ctx.loop_line)
                self.walk(node.children, inner)
                self.walk(node.orelse, inner)
                continue
            del stripped
            self.walk(node.children, ctx)
            self.walk(node.orelse, ctx)

    def role_of(self, nodes: list[Node]) -> str:
        text = "\n".join("\n".join(self.lines[n.lo:n.hi + 1]) for n in nodes)
        if "tma_load" in text or "cp_async_gs" in text:
            return "producer"
        return "consumer" if self.has_producer else "all"

    def statement(self, node: Node, ctx: _Context) -> None:
        text = self.lines[node.head]
        loop_var = ctx.loops[-1][0] if ctx.loops else None
        line = self.plain_line.get(node.head, 0)
        cell = self.cell_line(node.head)
        m = BARRIER_WAIT.match(text)
        if m and m.group(1) in self.arrays:
            self.add_site(node, ctx, "mbarrier", m.group(1), m.group(2), m.group(3), loop_var, line, cell)
            return
        if SYNC_THREADS.match(text):
            self.add_site(node, ctx, "syncthreads", None, None, None, loop_var, line, cell)
            return
        m = SYNC_PARTIAL.match(text)
        if m:
            first = m.group(1).split(",")[0].strip() or "0"
            self.add_site(node, ctx, "named_barrier", "bar", first, None, loop_var, line, cell)
            return
        m = BARRIER_ARRIVE.match(text)
        if m and m.group(1) in self.arrays:
            self.add_arrival(m.group(1), m.group(2), m.group(3), ctx, line, cell)
        for load in TMA_LOAD_BARRIER.finditer(text):
            if load.group(2) in self.arrays:
                self.add_arrival(load.group(2), load.group(3), "tma", ctx, line, cell)

    def indices(self, array: str, index: str, ctx: _Context) -> tuple[int, ...] | None:
        size = self.arrays.get(array)
        if size is None:
            return None
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", index.replace("(int)", "")))
        if not names:
            value = eval_index(index, {})
            return (value,) if value is not None else None
        loops = {var: (start, stop) for var, start, stop in ctx.loops}
        if len(names) != 1 or next(iter(names)) not in loops:
            return tuple(range(size))
        var = next(iter(names))
        start, stop = (eval_index(x, {}) for x in loops[var])
        if start is None or stop is None:
            return tuple(range(size))
        values = {eval_index(index, {var: k}) for k in range(start, min(stop, start + 4 * size + 64))}
        if None in values:
            return tuple(range(size))
        return tuple(sorted(v for v in values if v is not None))

    def add_arrival(self, array: str, index: str, kind: str, ctx: _Context, line: int, cell: int | None) -> None:
        threads: int | None
        if ctx.elected:
            threads = 1
        elif ctx.uniform and ctx.threads is not None:
            threads = ctx.threads[1] - ctx.threads[0]
        elif ctx.uniform and ctx.threads is None:
            threads = self.block_threads
        else:
            threads = None
        if kind == "tma":
            threads = 0  # TMA completes transaction bytes; it does not count as an arrival
        self.arrivals.append(Arrival(array, index, self.indices(array, index, ctx), ctx.role, threads,
                                     ctx.threads, kind, line, cell or ctx.loop_line))

    def add_site(self, node: Node, ctx: _Context, kind: str, array: str | None, index: str | None,
                 parity: str | None, loop_var: str | None, line: int, cell: int | None) -> None:
        sid = FIRST_SITE + len(self.sites)
        if sid > MAX_SITES:
            return
        stage = None
        if kind == "mbarrier" and array is not None and index is not None \
                and (array, _norm(index)) in self.full_arrays:
            stage = "full"
        pipelined = ctx.loop_line if ctx.loops else None
        if kind == "mbarrier":
            label = f"{array}[{index}].wait({parity})"
        elif kind == "syncthreads":
            label = "__syncthreads()"
        else:
            label = f"named barrier {index}"
        reached = self.indices(array, index, ctx) if kind == "mbarrier" and array and index else None
        self.sites.append(WatchSite(sid, kind, array, index, parity, ctx.role, ctx.threads, line, cell,
                                    self.cell_file if cell else None, loop_var, pipelined, stage, label,
                                    min(reached) if reached else None))
        self.waits[node.head] = sid


def _norm(expr: str) -> str:
    return re.sub(r"\b[A-Za-z_]\w*\b", "v", expr.replace(" ", ""))


def _finish_stages(sites: list[WatchSite], arrivals: list[Arrival]) -> list[WatchSite]:
    """A barrier a producer's TMA or arrive fills is "full"; one only the other side arrives on,
    waited by the producer, is "empty"."""
    out = []
    for s in sites:
        stage = s.stage
        if s.kind == "mbarrier" and stage is None:
            arrivers = {a.role for a in arrivals if a.barrier == s.barrier and a.kind != "tma"
                        and (a.indices is None or _overlaps(a, s))}
            if s.role == "producer" and arrivers and "producer" not in arrivers:
                stage = "empty"
            elif s.role == "consumer" and arrivers and arrivers <= {"producer"}:
                stage = "full"
        out.append(WatchSite(**{**s.__dict__, "stage": stage}))
    return out


def _overlaps(a: Arrival, s: WatchSite) -> bool:
    if s.barrier != "mbarrier":
        return True  # a kernel's own barrier array: one role per array
    return _norm(a.index) == _norm(s.index or "")


def watch(source: str, *, ops: Sequence[dict[str, Any]] = (), cell_file: str | None = None,
          blocks: int = 1, block_threads: int | None = None, max_blocks: int = DEFAULT_MAX_BLOCKS) -> Watched:
    """The watched source and its tables. ``blocks``: the grid's block count (slots are kept for the
    first ``max_blocks``); ``block_threads``: threads per block (default: the kernel's
    ``__launch_bounds__``); ``ops`` and ``cell_file`` as for the timeline's rewrite."""
    frame = kernel_frame(source)
    lines, bind_at, buf_name, kdef, kend = frame.lines, frame.bind_at, frame.buf_name, frame.kdef, frame.kend
    kernel, plain_line = frame.kernel, frame.plain_line
    threads = block_threads or frame.threads
    if threads is None:
        raise RewriteError("the kernel has no __launch_bounds__ and no block size was given")
    warps = (threads + 31) // 32

    reader = _Reader(lines, plain_line, ops, cell_file, threads)
    reader.scan_declarations(kdef + 1, kend)
    nodes = _parse(lines, kdef + 1, kend)
    reader.walk(nodes, _Context(None, "all", False, True, ()))
    sites = _finish_stages(reader.sites, reader.arrivals)
    by_id = {s.id: s for s in sites}
    notes = []
    if not sites:
        notes.append("no barrier wait was recognised in this kernel: each warp's slot says only whether it started "
                     "and finished")
    watched_blocks = max(1, min(int(blocks), int(max_blocks)))
    if blocks > watched_blocks:
        notes.append(f"only the first {watched_blocks} of {blocks} blocks were watched")

    start = [
        "  // ---- tilelab hang watch: kernel start ----",
        "  const unsigned tlw_block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);",
        "  const unsigned tlw_thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);",
        "  const unsigned tlw_warp = tlw_thread >> 5;",
        f"  volatile unsigned long long* const tlw_slot = (tlw_block < {watched_blocks}u && tlw_warp < {warps}u) ? "
        f"((volatile unsigned long long*)({buf_name})) + {SLOT_WORDS}ull * ((unsigned long long)tlw_block * "
        f"{warps}ull + tlw_warp) : nullptr;",
        f"  TLW_SET({RUNNING}, {KERNEL_SITE}, 0, 0, 0);",
        "  // ---- end of tilelab hang watch start ----",
    ]
    finish = f"  TLW_SET({FINISHED}, {KERNEL_SITE}, 0, 0, 0);  // tilelab hang watch: kernel end"
    out: list[str] = []
    for i, text in enumerate(lines):
        if i == kdef:
            out.extend(PREAMBLE.strip("\n").split("\n"))
            out.append(text)
            out.extend(start)
            continue
        if i == bind_at:
            out.append("  // (slot buffer bound above)")
            continue
        if kdef < i < kend and text.strip() == "return;":
            out.append(finish)
        if i == kend:
            out.append(finish)
            out.append(text)
            out.append("#undef TLW_SET")
            continue
        sid = reader.waits.get(i)
        if sid is not None:
            site = by_id[sid]
            indent = re.match(r"\s*", text).group(0)  # type: ignore[union-attr]
            iteration = site.loop_var or "0"
            bar = f"({site.index})" if site.kind != "syncthreads" and site.index else "0"
            par = f"({site.parity})" if site.parity else "0"
            out.append(f"{indent}TLW_SET({WAITING}, {sid}, {bar}, {par}, {iteration});")
            out.append(text)
            out.append(f"{indent}TLW_SET({RUNNING}, {sid}, {bar}, {par}, {iteration});")
            continue
        out.append(text)
    return Watched("\n".join(out), kernel, threads, warps, watched_blocks, tuple(sites), tuple(reader.arrivals),
                   tuple(reader.inits), cell_file, tuple(notes))


__all__ = ["FINISHED", "KERNEL_SITE", "RUNNING", "SLOT_WORDS", "STATES", "WAITING", "Arrival", "WatchSite",
           "Watched", "eval_index", "thread_range", "watch"]
