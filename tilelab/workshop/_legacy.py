"""The checks of the earlier workshop notebooks (old 01.x-04.x), kept as they were and registered
nowhere: lessons 04-10 port the good ones. Not part of the course.

Auto-checked exercises for the workshop notebooks (``notebooks/01_*`` ... ``04_*``).

``check("01.1", answer)`` returns a :class:`Check`: passed, failed (with what was expected and
why), not answered yet (the notebook's ``...`` placeholder), or needs a GPU (a launching exercise
on a machine without one: the notebook still runs top to bottom on Binder). The truth each check
compares against is computed, never stored: the swizzle maths of :mod:`tilelab.swizzle`, the
compiler's own report from :func:`tilelab.inspect`, or a real launch through
:mod:`tilelab.launch`. A wrong answer gets a message that says what was wrong, not only "no".

The model is pure (frozen dataclasses, ``to_dict``); the rich reprs are for the notebook.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Check", "EXERCISES", "Exercise", "check", "exercises", "hint"]

STATUSES = ("passed", "failed", "unanswered", "needs_gpu")
_MARK = {"passed": "\u2713", "failed": "\u2717", "unanswered": "\u2026", "needs_gpu": "\u23f8"}


@dataclass(frozen=True)
class Check:
    """The outcome of one exercise check."""

    exercise: str
    title: str
    status: str  # one of STATUSES
    message: str
    hint: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "title": self.title, "status": self.status,
                "message": self.message, "hint": self.hint}

    def __repr__(self) -> str:
        text = f"{_MARK[self.status]} {self.exercise} {self.title}: {self.message}"
        if self.hint and self.status == "failed":
            text += f"\n  hint: {self.hint}"
        return text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def _repr_html_(self) -> str:
        colour = {"passed": "var(--jp-success-color1, #388e3c)", "failed": "var(--jp-error-color1, #d32f2f)",
                  "unanswered": "var(--jp-ui-font-color2, #757575)",
                  "needs_gpu": "var(--jp-warn-color1, #f57c00)"}[self.status]
        hint = (f'<div style="margin-top:2px"><i>hint:</i> {html.escape(self.hint)}</div>'
                if self.hint and self.status == "failed" else "")
        return (f'<div class="tilelab-check" data-status="{self.status}" style="border-left:4px solid {colour};'
                f'padding:2px 8px;color:var(--jp-ui-font-color1,#222)">'
                f'<b style="color:{colour}">{_MARK[self.status]} {html.escape(self.exercise)}</b> '
                f'{html.escape(self.title)}: {html.escape(self.message)}{hint}</div>')


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    question: str
    hint: str
    checker: Callable[[Any], tuple[bool, str]]  # answer -> (passed, message); raises nothing on bad answers
    needs_gpu: bool = False


class _Wrong(Exception):
    """Raised inside a checker to fail with a message."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise _Wrong(message)


# ------------------------------------------------------------------------------------------
# 01: swizzles, banks and WGMMA descriptors (pure maths: tilelab.swizzle)
# ------------------------------------------------------------------------------------------


def _chunk_128b(fn: Any) -> tuple[bool, str]:
    from .. import swizzle as sw

    _expect(callable(fn), f"answer with a function chunk(row, chunk) -> physical chunk, got {type(fn).__name__}")
    tile = sw.SharedTile(16, 64, "float16", "128B")  # 128-byte rows: one panel, 8 chunks a row
    for row in range(16):
        for logical in range(8):
            truth = int(tile.chunk(row, logical * 8))
            try:
                got = fn(row, logical)
            except Exception as err:  # the learner's code: report, never raise
                raise _Wrong(f"your function raised {type(err).__name__}: {err} for row={row}, chunk={logical}") from None
            _expect(got == truth, f"row {row}, logical chunk {logical}: you said {got!r}, the 128B swizzle "
                                  f"stores it in physical chunk {truth}")
    return True, "all 16 rows x 8 chunks land where the 128B swizzle puts them"


def _wavefronts(mode: str) -> Callable[[Any], tuple[bool, str]]:
    def checker(answer: Any) -> tuple[bool, str]:
        from .. import swizzle as sw

        report = sw.bank_conflicts(sw.SharedTile(32, 64, "float16", mode), "column_read")
        _expect(isinstance(answer, int) and not isinstance(answer, bool),
                f"answer with a whole number of wavefronts, got {answer!r}")
        _expect(answer == report.wavefronts,
                f"{answer} is not it: the warp's 32 x 16 B need {report.wavefronts} wavefronts under "
                f"swizzle {mode} ({report.summary()})")
        return True, f"{report.wavefronts} wavefronts ({report.summary()})"

    return checker


def _conflict_free_mode(answer: Any) -> tuple[bool, str]:
    from .. import swizzle as sw

    _expect(isinstance(answer, str), f"answer with a swizzle name such as '32B', got {answer!r}")
    try:
        tile = sw.SharedTile(32, 32, "float16", answer)
    except ValueError as err:
        raise _Wrong(f"{answer!r} does not fit this tile: {err}") from None
    best = min(sw.bank_conflicts(sw.SharedTile(32, 32, "float16", m), "column_read").wavefronts
               for m in ("none", "32B", "64B"))
    report = sw.bank_conflicts(tile, "column_read")
    _expect(report.wavefronts == best,
            f"under {tile.swizzle} a column read takes {report.wavefronts} wavefronts; {best} is possible")
    return True, f"{tile.swizzle}: {report.summary()}"


def _sbo_bytes(answer: Any) -> tuple[bool, str]:
    from .. import swizzle as sw

    desc = sw.wgmma_descriptor(sw.SharedTile(64, 64, "float16", "128B"), "K", operand="A")
    _expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a number of bytes, got {answer!r}")
    if answer == desc.sbo:
        raise _Wrong(f"{answer} is the encoded field (bytes >> 4); the question asks for bytes")
    _expect(answer == desc.sbo_bytes, f"{answer} B is not the distance between 8-row groups of core matrices here")
    return True, f"SBO = {desc.sbo_bytes} B (encoded {desc.sbo}): 8 rows x {desc.tile.panel_bytes} B"


# ------------------------------------------------------------------------------------------
# 02: reading the inspector (the compiler's own report)
# ------------------------------------------------------------------------------------------

GEMM_ARGS = (1024, 1024, 1024, 128, 128, 32)


def workshop_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32):
    """The fp16 Hopper GEMM of notebooks 00 and 02: :func:`tilelab.kernels.gemm.matmul` with 3
    stages, 256 threads and no grid rasterisation."""
    from ..kernels.gemm import matmul

    return matmul(M, N, K, block_M, block_N, block_K, num_stages=3, threads=256, raster=0)


def _gemm_report(*args: int):
    from .._inspect import inspect

    return inspect(workshop_gemm(*args), "sm_90a")


def _box_dims(answer: Any) -> tuple[bool, str]:
    desc = _gemm_report(*GEMM_ARGS).tma("A")
    _expect(isinstance(answer, (tuple, list)), f"answer with a tuple of dims, innermost first, got {answer!r}")
    got = tuple(answer)
    if got == tuple(reversed(desc.box_dim)) and got != tuple(desc.box_dim):
        raise _Wrong(f"{got} is the box in (rows, columns) order; the driver lists dims innermost first")
    _expect(got == tuple(desc.box_dim), f"{got} is not A's box; open the TMA tab and read box_dim")
    return True, f"A's box is {tuple(desc.box_dim)} elements, innermost first"


def _instruction(answer: Any) -> tuple[bool, str]:
    report = _gemm_report(*GEMM_ARGS)
    names = sorted({w.instruction for w in report.wgmma})
    _expect(isinstance(answer, str), f"answer with the instruction's shape as a string, e.g. 'm64n8k16', got {answer!r}")
    _expect(answer.strip().lower() in names, f"{answer!r} is not what this GEMM issues; the WGMMA tab lists it")
    import re

    m, n, k = (int(x) for x in re.fullmatch(r"m(\d+)n(\d+)k(\d+)", names[0]).groups())
    return True, (f"{names[0]}: each instruction multiplies {m} rows of A by {n} columns of B over {k} of K; "
                  f"the warp partition decides N")


def _block_k_for_128b(answer: Any) -> tuple[bool, str]:
    _expect(isinstance(answer, int) and not isinstance(answer, bool) and answer > 0,
            f"answer with a positive whole block_K, got {answer!r}")
    _expect(1024 % answer == 0, f"block_K={answer} does not divide K=1024; pick a power of two")
    try:
        report = _gemm_report(1024, 1024, 1024, 128, 128, answer)
    except Exception as err:
        raise _Wrong(f"block_K={answer} does not compile: {str(err).splitlines()[0][:200]}") from None
    desc = report.tma("A")
    _expect(desc.swizzle == "128B", f"with block_K={answer}, A's rows are {answer * 2} B and its descriptor "
                                    f"uses swizzle {desc.swizzle}, not 128B")
    _expect(not desc.problems, f"A's descriptor has problems: {'; '.join(desc.problems)}")
    return True, f"block_K={answer}: {answer * 2}-byte rows fill the 128-byte span, swizzle 128B"


# ------------------------------------------------------------------------------------------
# 03: launching (a GPU)
# ------------------------------------------------------------------------------------------


def _identity(x: Any) -> Any:
    return x


def _copy_passes(kernel: Any) -> tuple[bool, str]:
    from .. import launch

    result = launch.run(kernel, ref=_identity, seed=7)
    _expect(result.passed, "tilelab.run says FAIL:\n" + repr(result))
    return True, f"every element written and equal ({result.outputs[0].shape})"


def _copy_bandwidth(kernel: Any) -> tuple[bool, str]:
    from .. import launch

    ok = launch.run(kernel, ref=_identity, seed=8)
    _expect(ok.passed, "the kernel must first be correct:\n" + repr(ok))
    ceilings = launch.measure_ceilings()
    res = launch.bench(kernel, rep_ms=100)
    frac = (res.gbps or 0.0) / ceilings.copy_gbps
    _expect(frac >= 0.75, f"{res.gbps:.0f} GB/s is {100 * frac:.0f}% of this GPU's copy ceiling "
                          f"({ceilings.copy_gbps:.0f} GB/s); 75% is the goal")
    return True, f"{res.gbps:.0f} GB/s, {100 * frac:.0f}% of the copy ceiling ({ceilings.copy_gbps:.0f} GB/s)"


# ------------------------------------------------------------------------------------------
# 04: one kernel, many targets (no GPU needed)
# ------------------------------------------------------------------------------------------

TARGETS_GEMM_ARGS = (1024, 1024, 1024, 128, 128, 32)


def tiled_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32,
               target: str = "sm_90a"):
    """One tiled GEMM for every target of notebook 04: the same tiles, loop and ``T.gemm``.

    GPUs stage the tiles in shared memory (LDS on AMD) and accumulate in a register fragment; the
    CPU has neither, so there the tiles are ``T.alloc_local`` buffers, and the data are float32
    (TileLang 0.1.15's C code cannot convert float32 vectors to fp16 in the epilogue).
    """
    import tilelang.language as T

    from ..targets import parse_target

    cpu = parse_target(target).family == "cpu"
    dtype = T.float32 if cpu else T.float16

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            if cpu:
                A_tile = T.alloc_local((block_M, block_K), dtype)
                B_tile = T.alloc_local((block_K, block_N), dtype)
                C_tile = T.alloc_local((block_M, block_N), T.float32)
            else:
                A_tile = T.alloc_shared((block_M, block_K), dtype)
                B_tile = T.alloc_shared((block_K, block_N), dtype)
                C_tile = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_tile)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0 if cpu else 2):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, C_tile)
            T.copy(C_tile, C[by * block_M, bx * block_N])

    return gemm


def _targets_report(target: str):
    from .._inspect import inspect

    return inspect(tiled_gemm(*TARGETS_GEMM_ARGS, target=target), target)


def _mfma_shape(answer: Any) -> tuple[bool, str]:
    report = _targets_report("gfx942")
    forms = sorted({(m.shape, m.intrinsic) for m in report.mfma})
    _expect(isinstance(answer, str), f"answer with the shape as text, e.g. '32x32x8', got {answer!r}")
    text = answer.strip().lower().replace("×", "x").replace(" ", "")
    shapes = {shape for shape, _ in forms}
    intrinsics = {intrinsic.lower() for _, intrinsic in forms}
    if text in intrinsics:
        return True, f"{answer.strip()}: an M x N x K = {forms[0][0]} matrix-core instruction"
    _expect(re.fullmatch(r"\d+x\d+x\d+", text) is not None,
            f"{answer!r} is not MxNxK (e.g. '32x32x8') or an intrinsic name")
    _expect(text in shapes, f"{text} is not what the MI300 build issues; the MFMA tab's M\u00d7N\u00d7K column says")
    return True, f"{text}: {forms[0][1]} ({'; '.join(f'{m.shape} A: {m.a_lanes}' for m in report.mfma[:1])})"


def _lds_bytes_per_stage(answer: Any) -> tuple[bool, str]:
    report = _targets_report("gfx942")
    from ..swizzle import dtype_bytes

    tiles = [lay for lay in report.layouts if lay.scope == "shared"]
    per_stage = sum(int(dtype_bytes(lay.dtype)) * int(lay.shape[0]) * int(lay.shape[1]) for lay in tiles)
    _expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number of bytes, got {answer!r}")
    one_tile = per_stage // max(1, len(tiles))
    if answer == one_tile and len(tiles) > 1:
        raise _Wrong(f"{answer} B is one tile; a stage holds a tile of A and a tile of B")
    _expect(answer == per_stage, f"{answer} B is not one stage: A's tile is block_M x block_K fp16 values and "
                                 "B's block_K x block_N, 2 bytes each")
    total = report.kernels[0].dynamic_shared_memory_bytes
    return True, (f"{per_stage} B per stage ({', '.join(lay.buffer for lay in tiles)}); the kernel asks for "
                  f"{total} B of LDS in all")


def _tma_counts(answer: Any) -> tuple[bool, str]:
    hopper, mi300 = _targets_report("sm_90a"), _targets_report("gfx942")
    want = (len(hopper.tma_descriptors), len(mi300.tma_descriptors))
    _expect(isinstance(answer, (tuple, list)) and len(answer) == 2,
            f"answer with a pair (Hopper, MI300), got {answer!r}")
    got = tuple(answer)
    _expect(got[1] == want[1], f"MI300 has no Tensor Memory Accelerator: it encodes {want[1]} descriptors, not {got[1]}")
    _expect(got[0] == want[0], f"the Hopper build encodes {want[0]} TMA descriptors (one per T.copy into shared "
                               f"memory), not {got[0]}")
    return True, f"Hopper {want[0]} (A and B), MI300 {want[1]}: on AMD each thread loads its part of the tile"


EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise("01.1", "the 128B swizzle", "Write chunk(row, chunk): the physical 16-byte chunk where the 128B "
             "swizzle stores logical chunk `chunk` of row `row` (128-byte rows).",
             "the 128B swizzle XORs the chunk index with the row number modulo 8", _chunk_128b),
    Exercise("01.2", "a column read, unswizzled", "A warp reads 16-byte vectors down one column of a 32x64 fp16 "
             "tile stored without swizzle: how many wavefronts?",
             "every 128-byte row starts at bank 0, so the 32 rows' chunks all hit the same 4 banks",
             _wavefronts("none")),
    Exercise("01.3", "a column read, 128B swizzle", "The same read with the 128B swizzle: how many wavefronts?",
             "512 bytes can never take fewer than 4 wavefronts of 128 bytes", _wavefronts("128B")),
    Exercise("01.4", "choose a swizzle", "A 32x32 fp16 tile (64-byte rows): which swizzle makes the column read "
             "as fast as it can be?", "a swizzle's span must fit the row: 64-byte rows take at most 64B",
             _conflict_free_mode),
    Exercise("01.5", "WGMMA stride byte offset", "A is a 64x64 fp16 K-major tile with the 128B swizzle: what is "
             "its WGMMA descriptor's SBO in bytes?",
             "SBO is the distance between consecutive groups of 8 rows (core matrices along M)", _sbo_bytes),
    Exercise("02.1", "read a TMA box", "The GEMM's TMA descriptor for A: what is its box, innermost first?",
             "the TMA tab's box_dim column; the inner dim is block_K", _box_dims),
    Exercise("02.2", "read a WGMMA instruction", "Which wgmma instruction (mMnNkK) does the GEMM issue?",
             "the WGMMA tab's first column", _instruction),
    Exercise("02.3", "get the 128B swizzle", "Which block_K makes A's TMA descriptor use the 128B swizzle?",
             "the swizzle span must equal the inner box bytes: 2 bytes per fp16", _block_k_for_128b),
    Exercise("03.1", "fix the copy", "Fix the copy kernel so that tilelab.run passes.",
             "look at which tiles are never written: the FAIL lists the first one", _copy_passes, needs_gpu=True),
    Exercise("03.2", "a fast copy", "Reach 75% of the GPU's copy ceiling with your copy kernel.",
             "bigger tiles per block (block_N=256) and TMA loads and stores", _copy_bandwidth, needs_gpu=True),
    Exercise("04.1", "the MI300 matrix instruction", "Which MFMA shape (MxNxK) does the MI300 build of the GEMM issue?",
             "the MFMA tab of the gfx942 inspector, M\u00d7N\u00d7K column", _mfma_shape),
    Exercise("04.2", "LDS bytes per stage", "How many bytes of LDS does one pipeline stage of the MI300 build take "
             "(a tile of A and a tile of B)?", "block_M x block_K + block_K x block_N values, 2 bytes each (fp16)",
             _lds_bytes_per_stage),
    Exercise("04.3", "TMA on two GPUs", "How many TMA descriptors do the Hopper and the MI300 builds encode? "
             "Answer a pair (Hopper, MI300).", "the TMA tab of each inspector; AMD GPUs have no TMA unit",
             _tma_counts),
]}


def exercises(notebook: str | None = None) -> list[Exercise]:
    """The exercises, or those of one notebook ("01" ... "04")."""
    return [e for e in EXERCISES.values() if notebook is None or e.id.split(".")[0] == notebook]


def hint(exercise_id: str) -> str:
    return _exercise(exercise_id).hint


def _exercise(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"no exercise {exercise_id!r}: the exercises are {', '.join(EXERCISES)}") from None


def _has_gpu() -> bool:
    from .. import _adapter

    return _adapter.has_gpu()


def check(exercise_id: str, answer: Any = ...) -> Check:
    """Check ``answer`` for exercise ``exercise_id``. ``...`` (the placeholder) is "not answered yet"."""
    ex = _exercise(exercise_id)
    if answer is ...:
        return Check(ex.id, ex.title, "unanswered", "not answered yet: replace the ... with your answer", ex.hint)
    if ex.needs_gpu and not _has_gpu():
        return Check(ex.id, ex.title, "needs_gpu", "this exercise launches a kernel and there is no CUDA GPU here; "
                     "everything above it works without one", ex.hint)
    from .._errors import TilelabError

    try:
        passed, message = ex.checker(answer)
    except _Wrong as wrong:
        return Check(ex.id, ex.title, "failed", str(wrong), ex.hint)
    except (TilelabError, ValueError) as err:  # the learner's kernel failed to compile or launch
        return Check(ex.id, ex.title, "failed", f"{type(err).__name__}: {err}", ex.hint)
    return Check(ex.id, ex.title, "passed" if passed else "failed", message, ex.hint)
