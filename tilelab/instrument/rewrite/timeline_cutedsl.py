"""The timeline's CuTe DSL rewrite: marks inserted into the kernel TileLang's CuTeDSL backend generates.

The CuTeDSL backend writes each kernel as CuTe DSL Python (a ``@cute.kernel`` function calling
``tilelang.contrib.cutedsl`` helpers as ``tl.*``), which NVIDIA's nvidia-cutlass-dsl compiles at
first launch. This is the CuTe DSL counterpart of :mod:`tilelab.instrument.rewrite.timeline` (the CUDA
rewrite): pure text in, text out, the same phases found at the same code shapes, the same
:class:`~tilelab.instrument.rewrite.timeline.Site` table and the same record buffer, so the decoder and the
summary do not know which backend wrote it. The kernel's statements are read with :mod:`ast`.

Each mark is one line, ``tlt_n = tlt_mark(tlt_seg, tlt_n, SITE)``, at a statement every thread
of a warp executes. ``tlt_mark`` is one inline PTX block (``llvm.inline_asm``, with side effects
and a memory clobber, as the CUDA helpers' ``asm volatile``): it reads ``%clock64`` and, where
the thread is lane 0 of a recording warp (``tlt_seg`` non-zero) and the warp's records are not
full, stores the record; it returns the count plus one. The count ``tlt_n`` is an ``Int32`` the
DSL carries through its dynamic loops and branches. Kernel start and end are PTX blocks too
(block table, slot, header, ``atom.global.max`` of the end time), so no DSL control flow is added.
The buffer arrives as one more kernel argument (a 1-D ``int64`` tensor: TileLang's CuTeDSL host
code has no unsigned 64-bit torch type).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from .timeline import (
    BLOCK_WORDS,
    CLOCK_BITS,
    END,
    FIRST_SITE,
    HEADER_WORDS,
    KERNEL_END,
    KERNEL_START,
    Instrumented,
    RewriteError,
    Site,
    _line_of,
    _Namer,
    _op_label,
    record_capacity,
)
from .walk import SKIP, PhaseWalk, repeats, split_roles

_BIND = re.compile(r"^\s*TLT_BIND\((\w+)\)\s*$")
_FOR_RANGE = re.compile(r"^(?:range|cutlass\.range_constexpr|cutlass\.range|range_constexpr)$")


def _norm(expr: str) -> str:
    """A barrier expression with its names renamed: the producer's ``(mbarrier + (k % 3))`` and
    the consumer's ``(mbarrier + (k_1 % 3))`` are the same barrier."""
    return re.sub(r"\b[A-Za-z_]\w*\b", "v", expr.replace(" ", ""))


def _call_name(node: ast.AST) -> str | None:
    """``tl.mbarrier_wait`` for a statement that is one call expression."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return ast.unparse(node.value.func)
    return None


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]


def _trip(loop: ast.For) -> int | None:
    """A ``for`` loop's trip count where its range is constant."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and _FOR_RANGE.match(ast.unparse(it.func)) and not it.keywords):
        return None
    if not 1 <= len(it.args) <= 3 or not all(isinstance(a, ast.Constant) and isinstance(a.value, int)
                                                for a in it.args):
        return None
    values = [int(a.value) for a in it.args]  # type: ignore[attr-defined]
    lo, hi, step = (0, values[0], 1) if len(values) == 1 else (values[0], values[1], (values + [1])[2])
    return max(0, -(-(hi - lo) // step)) if step else None


def _primary(node: ast.AST) -> bool:
    """Whether a compound statement holds statements that get marks of their own."""
    names = {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return bool(names & {"tl.mbarrier_wait", "tl.warpgroup_arrive", "tl.cp_async_wait", "tl.sync_threads"}) or (
        "tl.shuffle_elect" in names and bool(names & {"tl.tma_load", "tl.tma_store", "tl.tma_load_im2col"}))


def _thread_split(test: ast.expr) -> tuple[str, int] | None:
    """``threadIdx.x < 128`` / ``threadIdx.x >= 128`` -> (op, 128)."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and ast.unparse(test.left) == "threadIdx.x"
            and isinstance(test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, int)):
        op = {ast.Lt: "<", ast.GtE: ">="}.get(type(test.ops[0]))
        if op:
            return op, int(test.comparators[0].value)
    return None


def _warp_uniform(test: ast.expr) -> bool:
    """A branch every thread of a warp takes alike: no thread index, or a split at a multiple of 32."""
    split = _thread_split(test)
    if split:
        return split[1] % 32 == 0
    text = ast.unparse(test)
    return "threadIdx" not in text and "lane" not in text and "elect" not in text


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


class _Builder(PhaseWalk[ast.stmt]):
    def __init__(self, plain_line: dict[int, int], ops: Sequence[dict[str, Any]]) -> None:
        self.plain_line = plain_line  # 1-based source line -> line in the plain kernel source
        self.namer = _Namer(ops)
        self.ops = list(ops)
        self.sites: list[Site] = []
        self.before: dict[int, list[int]] = {}  # 1-based line -> site ids marked before it
        self.after: dict[int, list[int]] = {}
        self.indent: dict[int, int] = {}
        self.full: dict[str, dict[str, Any] | None] = {}
        self.empty: set[str] = set()

    def scan_barriers(self, kernel: ast.FunctionDef) -> None:
        for call in _calls(kernel, "tl.tma_load") + _calls(kernel, "tl.tma_load_im2col"):
            if len(call.args) >= 2:
                name = _text(call.args[0]).removesuffix("_desc")
                self.full.setdefault(_norm(_text(call.args[1])), self.namer.copy_reading(name))
        for call in _calls(kernel, "tl.mbarrier_arrive"):
            if call.args:
                self.empty.add(_norm(_text(call.args[0])))

    def site(self, kind: str, label: str, node: ast.stmt, role: str, loops: list[int | None],
             cell_line: int | None, loop_line: int | None = None, stage: str | None = None,
             barriers: tuple[str, ...] = ()) -> int:
        sid = FIRST_SITE + len(self.sites)
        self.sites.append(Site(sid, kind, label, role, self.plain_line.get(node.lineno), cell_line,
                               None, bool(loops), loop_line, stage, barriers, repeats(loops)))
        return sid

    def mark_before(self, node: ast.stmt, sid: int) -> None:
        self.before.setdefault(node.lineno, []).append(sid)
        self.indent[node.lineno] = node.col_offset

    def end_after(self, node: ast.stmt) -> None:
        line = node.end_lineno or node.lineno
        self.after.setdefault(line, []).append(END)
        self.indent.setdefault(-line, node.col_offset)

    def copy_writing_in(self, text: str) -> dict[str, Any] | None:
        """The T.copy whose destination the device code ``text`` writes (``C.iterator``, ``C_desc``)."""
        for o in self.ops:
            bufs = o.get("buffers") or []
            if o["op"] == "copy" and len(bufs) >= 2 \
                    and re.search(rf"\b{re.escape(bufs[-1])}(\.iterator|_desc)\b", text):
                return o
        return None

    def classify(self, node: ast.stmt, role: str, loops: list[int | None], loop_line: int | None
                 ) -> tuple[str, str, int | None, dict[str, Any]] | None:
        name = _call_name(node)
        pipe = f" of T.Pipelined L{loop_line}" if loop_line else ""
        if name == "tl.mbarrier_wait":
            call = node.value  # type: ignore[attr-defined]
            b = _norm(_text(call.args[0])) if call.args else ""
            copy = self.full.get(b)
            if b in self.full:
                what = f"stage full{pipe}: {_op_label(copy)}{_line_of(copy)}" if copy else f"stage full{pipe}"
                return "barrier_wait", what, loop_line or (copy or {}).get("line"), {"stage": "full", "barriers": (b,)}
            if b in self.empty:
                return "barrier_wait", f"stage empty{pipe}", loop_line, {"stage": "empty", "barriers": (b,)}
            return "barrier_wait", f"mbarrier {_text(call.args[0]) if call.args else ''} wait", loop_line, \
                {"barriers": (b,)}
        if name == "tl.warpgroup_arrive":
            return "mma", "", None, {"open": True}
        if name == "tl.warpgroup_wait":
            n = _text(node.value.args[0]) if node.value.args else "0"  # type: ignore[attr-defined]
            return "mma_wait", f"wait for WGMMA (<= {n} groups in flight)", None, {}
        if name == "tl.cp_async_wait":
            n = _text(node.value.args[0]) if node.value.args else "0"  # type: ignore[attr-defined]
            return "barrier_wait", f"stage full{pipe}: cp.async wait (<= {n} groups pending)", loop_line, \
                {"stage": "full"}
        if name == "tl.sync_threads":
            return "barrier_wait", f"__syncthreads{f' (T.Pipelined L{loop_line})' if loop_line else ''}", loop_line, {}
        text = _text(node)
        if isinstance(node, ast.If) and "tl.shuffle_elect" in _text(node.test):
            loads = [c for c in _calls(node, "tl.tma_load") + _calls(node, "tl.tma_load_im2col") if len(c.args) >= 2]
            if loads:
                names = list(dict.fromkeys(_text(c.args[0]).removesuffix("_desc") for c in loads))
                copies = [self.namer.copy_reading(n) for n in names]
                label = "TMA issue: " + ", ".join(
                    (_op_label(c) + _line_of(c)) if c else f"{n}_desc" for n, c in zip(names, copies))
                first = next((c for c in copies if c), None)
                return "tma_issue", label, (first or {}).get("line"), \
                    {"barriers": tuple(dict.fromkeys(_norm(_text(c.args[1])) for c in loads))}
            stores = [c for c in ast.walk(node) if isinstance(c, ast.Call) and _text(c.func).startswith("tl.tma_store")
                      and c.args]
            if stores:
                dest = _text(stores[0].args[0]).removesuffix("_desc")
                copy = self.namer.copy_writing(dest)
                return "store", f"TMA store: {_op_label(copy) + _line_of(copy) if copy else dest}", \
                    (copy or {}).get("line"), {}
            return None
        if isinstance(node, (ast.For, ast.If, ast.While)) and not _primary(node):
            if "tl.ptx_mma" in text or "tl.gemm_" in text or "tl.mma_sync" in text:
                op = self.namer.gemm_in(text)
                return "mma", f"{_op_label(op)}{_line_of(op)}" if op else "MMA", (op or {}).get("line"), {}
            if "tl.cp_async_gs" in text:
                names = []
                for c in _calls(node, "tl.cp_async_gs"):
                    if len(c.args) >= 3:
                        m = re.search(r"\b(\w+)\.iterator\b", _text(c.args[2]))
                        if m:
                            names.append(m.group(1))
                names = list(dict.fromkeys(names))
                copies = [self.namer.copy_reading(n) for n in names]
                label = "cp.async issue: " + ", ".join((_op_label(c) + _line_of(c)) if c else n
                                                       for n, c in zip(names, copies))
                first = next((c for c in copies if c), None)
                return "copy_issue", label, (first or {}).get("line"), {}
        return None

    # -- the shared walk's hooks (``_timeline_walk``), for statements of the Python source
    def is_commit(self, node: ast.stmt) -> bool:
        return _call_name(node) == "tl.cp_async_commit"

    def wgmma_named(self, nodes: list[ast.stmt], index: int, last_phase: ast.stmt | None) -> tuple[str, int | None]:
        # the T.gemm whose descriptors (set up since the last phase) and instructions (up to the
        # commit) follow
        first = nodes.index(last_phase) + 1 if last_phase is not None else 0
        commit = next((j for j in range(index, len(nodes))
                       if _call_name(nodes[j]) == "tl.warpgroup_commit_batch"), len(nodes) - 1)
        op = self.namer.gemm_in("\n".join(_text(n) for n in nodes[first:commit + 1]))
        return (f"WGMMA issue: {_op_label(op)}{_line_of(op)}" if op else "WGMMA issue"), (op or {}).get("line")

    def inner(self, node: ast.stmt, role: str, loops: list[int | None], loop_line: int | None, top: bool
              ) -> list[tuple[list[ast.stmt], str, list[int | None], int | None, bool]] | str | None:
        if not (isinstance(node, (ast.For, ast.If, ast.While)) and _primary(node)):
            return None
        if isinstance(node, ast.If):
            if not _warp_uniform(node.test):
                return SKIP
            if _thread_split(node.test):
                then_role, else_role = self._branch_roles(node)
                return [(node.body, then_role, loops, loop_line, top), (node.orelse, else_role, loops, loop_line, top)]
            return [(node.body, role, loops, loop_line, False), (node.orelse, role, loops, loop_line, False)]
        inner_loops = loops + [_trip(node) if isinstance(node, ast.For) else None]
        return [(node.body, role, inner_loops, self.namer.pipelined_line(_text(node)) or loop_line, False)]

    def epilogue(self, after: list[ast.stmt], role: str, loops: list[int | None]) -> None:
        op = self.copy_writing_in("\n".join(_text(n) for n in after))
        line = (op or {}).get("line")
        label = "epilogue" + (f": {_op_label(op)} L{line}" if op and line else "")
        self.mark_before(after[0], self.site("epilogue", label, after[0], role, loops, line))

    def _branch_roles(self, node: ast.If) -> tuple[str, str]:
        return split_roles("\n".join(_text(n) for n in node.body), "\n".join(_text(n) for n in node.orelse),
                           ("tl.tma_load", "tl.cp_async_gs"))


# ------------------------------------------------------------------------------------------
# The record helpers: inline PTX through the DSL's LLVM dialect (no DSL control flow)
# ------------------------------------------------------------------------------------------

_ASM = ("tl.llvm.inline_asm({result}, [{args}], {ptx!r}, {constraints!r}, has_side_effects=True, "
        "is_align_stack=False, asm_dialect=tl.llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)")

_IDS = """
  mov.u32 %tlt_a, %tid.x; mov.u32 %tlt_b, %tid.y; mov.u32 %tlt_c, %tid.z;
  mov.u32 %tlt_d, %ntid.x; mov.u32 %tlt_e, %ntid.y;
  mad.lo.u32 %tlt_b, %tlt_e, %tlt_c, %tlt_b;
  mad.lo.u32 %tlt_thr, %tlt_d, %tlt_b, %tlt_a;
  shr.u32 %tlt_warp, %tlt_thr, 5;
  and.b32 %tlt_lane, %tlt_thr, 31;
  mov.u32 %tlt_a, %ctaid.x; mov.u32 %tlt_b, %ctaid.y; mov.u32 %tlt_c, %ctaid.z;
  mov.u32 %tlt_d, %nctaid.x; mov.u32 %tlt_e, %nctaid.y;
  mad.lo.u32 %tlt_b, %tlt_e, %tlt_c, %tlt_b;
  mad.lo.u32 %tlt_blk, %tlt_d, %tlt_b, %tlt_a;"""
_IDS_REGS = ".reg .u32 %tlt_a, %tlt_b, %tlt_c, %tlt_d, %tlt_e, %tlt_thr, %tlt_warp, %tlt_lane, %tlt_blk;"


def _start_ptx(blocks: int, traced: Sequence[int], warps: int, warp_step: int, seg0: int, seg_words: int) -> str:
    """Thread 0 of each block writes the block's start (globaltimer, SM, clock64); every thread
    gets the address of its warp's first record slot, or 0 where it does not record."""
    slot_lines = "\n".join(f"  setp.eq.u32 %tlt_p, %tlt_blk, {b}; @%tlt_p mov.u32 %tlt_slot, {i};"
                           for i, b in reversed(list(enumerate(traced))))
    step = "  and.b32 %tlt_a, %tlt_warp, 3; setp.eq.u32 %tlt_q, %tlt_a, 0; and.pred %tlt_r, %tlt_r, %tlt_q;" \
        if warp_step == 4 else ""
    return f"""{{
  {_IDS_REGS}
  .reg .u32 %tlt_slot, %tlt_sm;
  .reg .u64 %tlt_c0, %tlt_g0, %tlt_x, %tlt_y;
  .reg .pred %tlt_p, %tlt_q, %tlt_r;{_IDS}
  mov.u64 %tlt_c0, %clock64;
  mov.u64 %tlt_g0, %globaltimer;
  mov.u32 %tlt_sm, %smid;
  setp.eq.u32 %tlt_p, %tlt_thr, 0;
  setp.lt.u32 %tlt_q, %tlt_blk, {blocks};
  and.pred %tlt_p, %tlt_p, %tlt_q;
  mul.wide.u32 %tlt_x, %tlt_blk, {BLOCK_WORDS * 8};
  add.u64 %tlt_x, %tlt_x, $1;
  @%tlt_p st.global.u64 [%tlt_x], %tlt_g0;
  cvt.u64.u32 %tlt_y, %tlt_sm;
  @%tlt_p st.global.u64 [%tlt_x+16], %tlt_y;
  @%tlt_p st.global.u64 [%tlt_x+24], %tlt_c0;
  mov.u32 %tlt_slot, 4294967295;
{slot_lines}
  setp.ne.u32 %tlt_r, %tlt_slot, 4294967295;
  setp.eq.u32 %tlt_q, %tlt_lane, 0; and.pred %tlt_r, %tlt_r, %tlt_q;
  setp.lt.u32 %tlt_q, %tlt_warp, {warps}; and.pred %tlt_r, %tlt_r, %tlt_q;
{step}
  mad.lo.u32 %tlt_a, %tlt_slot, {warps}, %tlt_warp;
  mul.wide.u32 %tlt_x, %tlt_a, {seg_words * 8};
  add.u64 %tlt_x, %tlt_x, {(seg0 + HEADER_WORDS) * 8};
  add.u64 %tlt_x, %tlt_x, $1;
  selp.u64 $0, %tlt_x, 0, %tlt_r;
}}"""


def _mark_ptx(capacity: int) -> str:
    """Record ``site`` at the current clock64 where this thread records and has room; $0 = $2 + 1."""
    return f"""{{
  .reg .pred %tlt_p, %tlt_q;
  .reg .u64 %tlt_c, %tlt_x;
  mov.u64 %tlt_c, %clock64;
  and.b64 %tlt_c, %tlt_c, {(1 << CLOCK_BITS) - 1};
  or.b64 %tlt_c, %tlt_c, @SITE@;
  setp.ne.u64 %tlt_p, $1, 0;
  setp.lt.u32 %tlt_q, $2, {capacity};
  and.pred %tlt_p, %tlt_p, %tlt_q;
  mul.wide.u32 %tlt_x, $2, 8;
  add.u64 %tlt_x, %tlt_x, $1;
  @%tlt_p st.global.u64 [%tlt_x], %tlt_c;
  add.u32 $0, $2, 1;
}}"""


def _end_ptx(blocks: int) -> str:
    """The warp's header (marks attempted, warp + 1, globaltimer and clock64 at its end) where it
    records; lane 0 of every warp raises the block's end time (atom.global.max)."""
    return f"""{{
  {_IDS_REGS}
  .reg .pred %tlt_p, %tlt_q;
  .reg .u64 %tlt_x, %tlt_y, %tlt_g;{_IDS}
  setp.ne.u64 %tlt_p, $0, 0;
  cvt.u64.u32 %tlt_y, $1;
  @%tlt_p st.global.u64 [$0+-32], %tlt_y;
  add.u32 %tlt_a, %tlt_warp, 1;
  cvt.u64.u32 %tlt_y, %tlt_a;
  @%tlt_p st.global.u64 [$0+-24], %tlt_y;
  mov.u64 %tlt_y, %clock64;
  @%tlt_p st.global.u64 [$0+-8], %tlt_y;
  mov.u64 %tlt_g, %globaltimer;
  @%tlt_p st.global.u64 [$0+-16], %tlt_g;
  setp.eq.u32 %tlt_p, %tlt_lane, 0;
  setp.lt.u32 %tlt_q, %tlt_blk, {blocks};
  and.pred %tlt_p, %tlt_p, %tlt_q;
  mul.wide.u32 %tlt_x, %tlt_blk, {BLOCK_WORDS * 8};
  add.u64 %tlt_x, %tlt_x, $2;
  @%tlt_p atom.global.max.u64 %tlt_y, [%tlt_x+8], %tlt_g;
}}"""


def _helpers(blocks: int, traced: Sequence[int], warps: int, warp_step: int, seg0: int, seg_words: int,
             capacity: int) -> list[str]:
    """The helpers' source, placed before the ``@cute.kernel`` (TileLang's launcher embeds both in
    the function that compiles the kernel, where ``tl``, ``cutlass`` and ``cute`` are imported)."""
    i64 = "tl.mlir_ir.IntegerType.get_signless(64)"
    i32 = "tl.mlir_ir.IntegerType.get_signless(32)"
    start = _ASM.format(result=i64, args="buf.iterator.llvm_ptr", ptx="@PTX@", constraints="=l,l,~{memory}")
    mark = _ASM.format(result=i32, args="cutlass.Int64(seg).ir_value(loc=loc, ip=ip), "
                                        "cutlass.Int32(n).ir_value(loc=loc, ip=ip)",
                       ptx="@PTX@", constraints="=r,l,r,~{memory}")
    end = _ASM.format(result="None", args="cutlass.Int64(seg).ir_value(loc=loc, ip=ip), "
                                          "cutlass.Int32(n).ir_value(loc=loc, ip=ip), buf.iterator.llvm_ptr",
                      ptx="@PTX@", constraints="l,r,l,~{memory}")
    return [
        "# ---- tilelab timeline: record helpers (inline PTX; no DSL control flow) ----",
        f"TLT_START_PTX = {_start_ptx(blocks, traced, warps, warp_step, seg0, seg_words)!r}",
        f"TLT_MARK_PTX = {_mark_ptx(capacity)!r}",
        f"TLT_END_PTX = {_end_ptx(blocks)!r}",
        "",
        "@tl.dsl_user_op",
        "def tlt_start(buf, *, loc=None, ip=None):",
        "  return cutlass.Int64(" + start.replace("'@PTX@'", "TLT_START_PTX") + ")",
        "",
        "@tl.dsl_user_op",
        "def tlt_mark(seg, n, site, *, loc=None, ip=None):",
        f"  ptx = TLT_MARK_PTX.replace('@SITE@', str(site << {CLOCK_BITS}))",
        "  return cutlass.Int32(" + mark.replace("'@PTX@'", "ptx") + ")",
        "",
        "@tl.dsl_user_op",
        "def tlt_end(seg, n, buf, *, loc=None, ip=None):",
        "  " + end.replace("'@PTX@'", "TLT_END_PTX"),
        "",
        "# ---- end of tilelab timeline helpers ----",
    ]


@dataclasses.dataclass(frozen=True)
class _Frame:
    lines: list[str]
    kernel: ast.FunctionDef
    bind_line: int  # 1-based
    buf_name: str
    plain_line: dict[int, int]


def _frame(source: str) -> _Frame:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise RewriteError(f"the CuTe DSL source does not parse: {err}") from err
    lines = source.split("\n")
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Expr) and stmt.lineno and _BIND.match(lines[stmt.lineno - 1]):
                buf = _BIND.match(lines[stmt.lineno - 1]).group(1)  # type: ignore[union-attr]
                plain: dict[int, int] = {}
                n = 0
                for i in range(1, len(lines) + 1):
                    if i == stmt.lineno:
                        continue
                    n += 1
                    plain[i] = n
                return _Frame(lines, node, stmt.lineno, buf, plain)
    raise RewriteError("the source has no TLT_BIND statement: it was not lowered with a record buffer")


def instrument(source: str, *, threads: int, ops: Sequence[dict[str, Any]] = (), cell_file: str | None = None,
               blocks: int = 1, traced_blocks: Sequence[int] = (0,), granularity: str = "warpgroup",
               capacity: int | None = None) -> Instrumented:
    """The instrumented CuTe DSL source and its site table (as :func:`tilelab.instrument.rewrite.timeline.instrument`).

    ``threads``: the kernel's threads per block as TileLang launches it (the CuTe DSL source does
    not say; warp specialisation adds a producer warp group to the ``T.Kernel``'s threads).
    ``cell_file`` is not used: the CuTe DSL source has no ``#line`` directives, the user's lines
    come from ``ops``.
    """
    del cell_file
    if granularity not in ("warpgroup", "warp"):
        raise ValueError(f"granularity must be 'warpgroup' or 'warp', not {granularity!r}")
    frame = _frame(source)
    lines, kernel = frame.lines, frame.kernel
    builder = _Builder(frame.plain_line, ops)
    builder.scan_barriers(kernel)
    notes = builder.walk_kernel(kernel.body)
    capacity, exact = record_capacity(builder.sites, capacity)
    warp_step = 4 if granularity == "warpgroup" else 1
    warps = max(1, threads // 32)
    traced = tuple(int(b) for b in traced_blocks)
    seg_words = HEADER_WORDS + capacity

    body_indent = " " * kernel.body[0].col_offset
    start = [
        f"{body_indent}# ---- tilelab timeline: kernel start ----",
        f"{body_indent}tlt_seg = tlt_start({frame.buf_name})",
        f"{body_indent}tlt_n = tlt_mark(tlt_seg, cutlass.Int32(0), {KERNEL_START})",
    ]
    finish = [
        f"{body_indent}# ---- tilelab timeline: kernel end ----",
        f"{body_indent}tlt_n = tlt_mark(tlt_seg, tlt_n, {KERNEL_END})",
        f"{body_indent}tlt_end(tlt_seg, tlt_n, {frame.buf_name})",
    ]
    first_body = kernel.body[0].lineno
    last = kernel.end_lineno or len(lines)
    out: list[str] = []
    for i, text in enumerate(lines, start=1):
        if i == min([d.lineno for d in kernel.decorator_list] + [kernel.lineno]):
            out.extend(_helpers(blocks, traced, warps, warp_step, blocks * BLOCK_WORDS, seg_words, capacity))
        if i == first_body:
            out.extend(start)
        if i == frame.bind_line:
            out.append(re.sub(r"TLT_BIND\(\w+\)", "pass  # (record buffer: tlt_start above)", text))
            continue
        for sid in builder.before.get(i, []):
            out.append(" " * builder.indent[i] + f"tlt_n = tlt_mark(tlt_seg, tlt_n, {sid})")
        out.append(text)
        for sid in builder.after.get(i, []):
            out.append(" " * builder.indent[-i] + f"tlt_n = tlt_mark(tlt_seg, tlt_n, {sid})")
        if i == last:
            out.extend(finish)
    return Instrumented("\n".join(out), tuple(builder.sites), kernel.name, threads, capacity, exact, blocks, traced,
                        warp_step, tuple(notes))


__all__ = ["instrument"]
