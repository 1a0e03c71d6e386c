"""Lesson 06: shared-memory banks, swizzles and the WGMMA descriptor (``notebooks/06_*``).

Every truth is computed: the bank and swizzle maths of :mod:`tilelab.swizzle`, and for the GEMM
the compiler's own report (:func:`tilelab.inspect` for ``sm_90a``). A wrong answer is answered
with the misconception it shows or with what to look at, never with the value.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from tilelab.workshop import Wrong, exercise, expect

NOTEBOOK = "06"
# The GEMM the notebook inspects (its %%tilelang cell builds the same kernel: a test holds that).
GEMM_ARGS = (1024, 1024, 1024, 128, 128, 32)
GEMM_OPTIONS = {"num_stages": 3, "threads": 256, "raster": 0}
TARGET = "sm_90a"


# The notebook's GEMM cell (06.6 and 06.7 predict what it lowers to; 06.8 edits its block_K).
GEMM_CELL = '''\
%%tilelang --args "1024, 1024, 1024, 128, 128, 32" --show summary
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm
'''


def lesson_gemm(M: int, N: int, K: int, block_M: int, block_N: int, block_K: int):
    """The fp16 Hopper GEMM of the notebook: 3 stages, 256 threads, no grid rasterisation."""
    from tilelab.kernels.gemm import matmul

    return matmul(M, N, K, block_M, block_N, block_K, **GEMM_OPTIONS)


@functools.lru_cache(maxsize=4)
def _report(args: tuple[int, ...] = GEMM_ARGS):
    import tilelab

    return tilelab.inspect(lesson_gemm(*args), TARGET)


@dataclass(frozen=True)
class Figure:
    """What a passed check reveals: a picture in the notebook, its caption as text."""

    svg: str
    caption: str

    def _repr_html_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return self.caption


def _whole(answer: Any, what: str) -> int:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with {what}, got {answer!r}")
    return int(answer)


# ------------------------------------------------------------------------------------------
# Banks and the 128B swizzle (tilelab.swizzle)
# ------------------------------------------------------------------------------------------


def _tile(rows: int, cols: int, mode: str):
    from tilelab import swizzle as sw

    return sw.SharedTile(rows, cols, "float16", mode)


@exercise("06.1", "the 128B swizzle",
          question="Write chunk(row, chunk): the physical 16-byte chunk (0-7) in which the 128B swizzle stores "
                   "logical chunk `chunk` of row `row` of a tile with 128-byte rows.",
          kind="writes",
          hints=("Look at the picture: in row 0 nothing moves; in row 1 chunks swap in pairs.",
                 ("The pattern is a bitwise operation between the chunk index and the row, and it repeats "
                 "every 8 rows."),
                 "XOR (^ in Python) the chunk index with the row number modulo 8."),
          solution="def chunk(row, chunk):\n    return chunk ^ (row % 8)\n\n\nanswer_06_1 = chunk")
def _chunk_128b(fn: Any) -> str:
    expect(callable(fn), f"answer with a function chunk(row, chunk) -> physical chunk, got {type(fn).__name__}")
    tile = _tile(16, 64, "128B")  # 128-byte rows: one panel, 8 chunks a row
    wrong: list[tuple[int, int, Any]] = []
    for row in range(16):
        for logical in range(8):
            truth = int(tile.chunk(row, logical * 8))
            got = fn(row, logical)
            if got != truth:
                wrong.append((row, logical, got))
    if not wrong:
        return "all 16 rows x 8 chunks land where the 128B swizzle puts them: chunk ^ (row % 8)"
    got_of = {(r, c): g for r, c, g in wrong}
    if all(fn(r, c) == c for r in range(16) for c in range(8)):
        raise Wrong("your function leaves every chunk where it was: that is the tile without a swizzle")
    if any(not isinstance(g, int) or isinstance(g, bool) for _, _, g in wrong):
        row, logical, got = next((r, c, g) for r, c, g in wrong if not isinstance(g, int) or isinstance(g, bool))
        raise Wrong(f"row {row}, chunk {logical}: your function returned {got!r}; return a whole chunk index 0-7")
    if any(not 0 <= g < 8 for _, _, g in wrong):
        row, logical, got = next((r, c, g) for r, c, g in wrong if not 0 <= g < 8)
        raise Wrong(f"row {row}, chunk {logical}: {got} is not a chunk of a 128-byte row (there are 8, numbered "
                    "0-7); the pattern repeats every 8 rows")
    if all(fn(r, c) == (c + r) % 8 for r in range(16) for c in range(8)):
        raise Wrong("your function rotates each row by its number (an addition): the swizzle is a bitwise "
                    "operation; compare rows 1 and 3 in the picture")
    if all((r, c) not in got_of for r in range(8) for c in range(8)):
        raise Wrong("rows 0-7 are right, rows 8-15 are not: what does row 8 look like in the picture?")
    row, logical, got = wrong[0]
    raise Wrong(f"row {row}, logical chunk {logical}: you said {got}, and that is not where the 128B swizzle "
                f"stores it; find row {row} in the picture ({len(wrong)} of 128 cells are off)")


def _column_read(mode: str):
    from tilelab import swizzle as sw

    return sw.bank_conflicts(_tile(32, 64, mode), "column_read")


def _reveal_column_read(mode: str):
    def reveal(answer: Any) -> Any:
        from tilelab.render import svg

        report = _column_read(mode)
        # drawn 500 px wide: unscaled, every bank number at 10 px, in a laptop's notebook
        return Figure(svg.tile_svg(report.tile, color_by="bank", report=report, highlight={"chunk": 0}, fit_width=500),
                      report.summary())

    return reveal


def _wavefront_misconceptions(answer: int, truth: int, ideal: int, warp_bytes: int, line_bytes: int) -> None:
    if answer == 1:
        raise Wrong(f"one wavefront serves at most one {line_bytes}-byte line (one word from each bank), and the "
                    f"warp asks for {warp_bytes} bytes")
    if answer == ideal and truth != ideal:
        raise Wrong("that is the conflict-free minimum (the bytes asked for divided by what one wavefront "
                    "serves); without a swizzle, which banks does chunk 0 of every row fall in?")


@exercise("06.2", "a column read, unswizzled",
          question="A warp reads 16-byte vectors down one column of a 32 x 64 fp16 tile stored without a swizzle "
                   "(thread t reads chunk 0 of row t). How many wavefronts does the read take?",
          kind="predict",
          hints=("A row is 64 x 2 = 128 bytes: every row starts at bank 0.",
                 "Chunk 0 of every row lies in banks 0-3. A bank delivers one 4-byte word per wavefront.",
                 "Each of the 4 banks must deliver one word from every row the warp reads."),
          solution="answer_06_2 = 32",
          reveal=_reveal_column_read("none"))
def _wavefronts_none(answer: Any) -> str:
    from tilelab import swizzle as sw

    got = _whole(answer, "a whole number of wavefronts")
    report = _column_read("none")
    warp_bytes = sum(a.nbytes for a in report.accesses)
    _wavefront_misconceptions(got, report.wavefronts, report.ideal_wavefronts, warp_bytes, sw.LINE_BYTES)
    if got == report.wavefronts // len(report.wavefronts_per_phase):
        raise Wrong("that is one phase of the request: a 16-byte-per-thread request is served 8 threads at a "
                    "time; add up every phase")
    expect(got == report.wavefronts, f"{got} is not it: count, for one bank, how many different words the warp "
                                     "needs from it")
    return (f"{report.wavefronts} wavefronts: every row's chunk 0 is in banks 0-3, so each bank serves one word "
            f"per row, one row per wavefront ({report.summary()})")


@exercise("06.3", "a column read, 128B swizzle",
          question="The same column read of the 32 x 64 fp16 tile, stored with the 128B swizzle: how many "
                   "wavefronts?",
          kind="predict",
          hints=("With the swizzle, chunk 0 of rows 0-7 lands in 8 different physical chunks.",
                 "8 rows x 16 bytes then cover all 32 banks once: one wavefront for every 8 rows.",
                 "The warp reads 32 rows x 16 bytes = 512 bytes; a wavefront serves 128 bytes."),
          solution="answer_06_3 = 4",
          reveal=_reveal_column_read("128B"))
def _wavefronts_128b(answer: Any) -> str:
    from tilelab import swizzle as sw

    got = _whole(answer, "a whole number of wavefronts")
    report = _column_read("128B")
    unswizzled = _column_read("none").wavefronts
    warp_bytes = sum(a.nbytes for a in report.accesses)
    if got == unswizzled and unswizzled != report.wavefronts:
        raise Wrong("that is the count without a swizzle: where does the 128B swizzle put chunk 0 of rows 0-7?")
    _wavefront_misconceptions(got, report.wavefronts, report.ideal_wavefronts, warp_bytes, sw.LINE_BYTES)
    if got < report.wavefronts:
        raise Wrong(f"fewer than that is impossible: the warp asks for {warp_bytes} bytes and one wavefront serves "
                    f"{sw.LINE_BYTES}")
    expect(got == report.wavefronts, f"{got} is more than this read needs: draw chunk 0 of rows 0-7 with the "
                                     "swizzle and count the banks they touch")
    return f"{report.wavefronts} wavefronts, the minimum: {report.summary()}"


@exercise("06.4", "choose a swizzle",
          question="A 32 x 32 fp16 tile has 64-byte rows. Name a swizzle (\"none\", \"32B\", \"64B\", \"128B\") "
                   "under which the column read takes as few wavefronts as it can.",
          # found with the explorer, whose table lists every mode by name: an exploration, not a
          # prediction hidden until the check
          kind="explain",
          hints=("Try the modes in the explorer: set cols to 32 and watch the conflict count.",
                 "A swizzle permutes chunks inside its span; the span must fit inside a row.",
                 "Rows of 64 bytes take a swizzle of at most 64 bytes: try 64B (32B works too)."),
          solution='answer_06_4 = "64B"')
def _conflict_free_mode(answer: Any) -> str:
    from tilelab import swizzle as sw

    expect(isinstance(answer, str), f"answer with a swizzle name such as 'none', got {answer!r}")
    try:
        mode = sw.swizzle_mode(answer)
    except (ValueError, KeyError):
        raise Wrong(f"{answer!r} is not a swizzle mode: use one of the names the question lists") from None
    best = min(sw.bank_conflicts(_tile(32, 32, m), "column_read").wavefronts
               for m in ("none", "32B", "64B"))
    try:
        tile = _tile(32, 32, mode.name)
    except ValueError:
        raise Wrong(f"the {mode.name} swizzle permutes 16-byte chunks within a span wider than these 64-byte "
                    "rows, so it would move chunks from one row into the next: TileLang never picks a span "
                    "wider than the row") from None
    report = sw.bank_conflicts(tile, "column_read")
    if not tile.mode.is_swizzled:
        raise Wrong(f"without a swizzle the column read is a {report.conflict_degree:g}-way bank conflict: "
                    "every row starts at bank 0 or bank 16")
    expect(report.wavefronts == best, f"under {tile.swizzle} the column read still conflicts; another span does "
                                      "better")
    return f"{tile.swizzle}: {report.summary()}"


# ------------------------------------------------------------------------------------------
# The WGMMA descriptor
# ------------------------------------------------------------------------------------------


def _descriptor():
    from tilelab import swizzle as sw

    return sw.wgmma_descriptor(_tile(64, 64, "128B"), "K", operand="A")


def _reveal_descriptor(answer: Any) -> Any:
    from tilelab.render import svg

    desc = _descriptor()
    return Figure(svg.wgmma_operand_svg(desc), f"core matrices of A with LBO {desc.lbo_bytes} B and SBO "
                                               f"{desc.sbo_bytes} B")


@exercise("06.5", "WGMMA stride byte offset",
          question="A is a 64 x 64 fp16 K-major tile with the 128B swizzle. What is its WGMMA descriptor's SBO, "
                   "in bytes?",
          kind="predict",
          hints=("WGMMA reads the operand in core matrices of 8 rows x 16 bytes.",
                 "For a K-major swizzled operand, SBO is the distance from one group of 8 rows to the next.",
                 "Each row of a 128B-swizzled panel is 128 bytes; a group is 8 rows."),
          solution="answer_06_5 = 1024",
          reveal=_reveal_descriptor)
def _sbo_bytes(answer: Any) -> str:
    got = _whole(answer, "a number of bytes")
    desc = _descriptor()
    if got == desc.sbo and desc.sbo != desc.sbo_bytes:
        raise Wrong(f"{got} is the encoded field (bytes >> 4), as the descriptor stores it; the question asks for "
                    "bytes")
    if got == desc.lbo_bytes and desc.lbo_bytes != desc.sbo_bytes:
        raise Wrong("that is LBO's 16 bytes (the next core matrix along K, which a swizzled K-major operand does "
                    "not use); SBO steps along M")
    if got == desc.tile.panel_bytes and desc.tile.panel_bytes != desc.sbo_bytes:
        raise Wrong("that is the distance from one row to the next; SBO jumps a whole group of core-matrix rows")
    expect(got == desc.sbo_bytes, f"{got} B is not the distance between consecutive groups of 8 rows here")
    return (f"SBO = {desc.sbo_bytes} B (encoded {desc.sbo}): 8 rows x {desc.tile.panel_bytes} B; "
            f"LBO is {desc.lbo_bytes} B (encoded {desc.lbo}), unused for a swizzled K-major operand")


# ------------------------------------------------------------------------------------------
# The GEMM's TMA descriptors and WGMMA instructions (tilelab.inspect)
# ------------------------------------------------------------------------------------------


def _reveal_descriptors(answer: Any) -> str:
    """06.6's reveal: the TMA descriptors alone (the inspector's other tabs hold 06.7's answer)."""
    rows = [f"{d.buffer}: globalDim {tuple(d.global_dim)}, boxDim {tuple(d.box_dim)}, swizzle {d.swizzle}"
            for d in _report().tma_descriptors]
    return "the kernel's TMA descriptors, innermost dimension first:\n" + "\n".join(rows)


def _reveal_tab(tab: str):
    def reveal(answer: Any) -> Any:
        import tilelab

        return tilelab.Inspector(_report(), show=tab)

    return reveal


@exercise("06.6", "predict a TMA box",
          question="The GEMM above (block_M=128, block_N=128, block_K=32, fp16) loads A's tile with TMA. What is "
                   "the box of A's descriptor, innermost dimension first (as the driver lists it)?",
          kind="predict",
          hints=("A box is what one TMA copy moves: here a tile of A, block_M rows x block_K columns.",
                 "The driver lists dimensions innermost (contiguous) first: columns before rows.",
                 ("A's rows are contiguous along K, so the inner dimension is block_K elements, as long as "
                 "block_K x 2 bytes fits the swizzle span.")),
          solution="answer_06_6 = (32, 128)",
          reveal=_reveal_descriptors)
def _box_dims(answer: Any) -> str:
    expect(isinstance(answer, (tuple, list)) and all(isinstance(v, int) for v in answer),
           f"answer with a tuple of whole numbers, innermost first, got {answer!r}")
    desc = _report().tma("A")
    got, box = tuple(answer), tuple(int(v) for v in desc.box_dim)
    if got == tuple(reversed(box)) and got != box:
        raise Wrong(f"{got} is the tile in (rows, columns) order: the driver lists dimensions innermost first")
    if got == tuple(int(v) for v in desc.global_dim) and got != box:
        raise Wrong("that is the whole tensor (globalDim); the box is what one copy moves")
    expect(len(got) == len(box), f"A is a {len(box)}-dimensional tensor: give one extent per dimension")
    expect(got == box, f"{got} is not A's box: which rows and columns of A does one block load per step of K?")
    return (f"A's box is {box} elements, innermost first: {box[0]} fp16 = {box[0] * 2} bytes of K per row, "
            f"{box[1]} rows; swizzle {desc.swizzle}")


def _parse_instruction(text: str) -> tuple[int, int, int] | None:
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", text.strip().lower())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


@exercise("06.7", "predict the WGMMA instruction",
          question="Which wgmma instruction shape (mMnNkK, e.g. 'm64n8k16') does the GEMM above issue? "
                   "It has threads=256: TileLang gives the block two consumer warpgroups.",
          kind="predict",
          hints=("Every wgmma instruction computes 64 rows of M; K is 32 bytes of the input dtype.",
                 "The 128 x 128 tile of C is shared by the two consumer warpgroups: each owns a part of it.",
                 ("TileLang splits this tile between the warpgroups along N: each warpgroup's N is half of "
                 "block_N, and it issues two instructions down M.")),
          solution='answer_06_7 = "m64n64k16"',
          reveal=_reveal_tab("wgmma"))
def _instruction(answer: Any) -> str:
    from tilelab import cuda_facts

    expect(isinstance(answer, str), f"answer with the shape as a string such as 'm64n8k16', got {answer!r}")
    got = _parse_instruction(answer)
    expect(got is not None, f"{answer!r} is not of the form mMnNkK (e.g. 'm64n8k16')")
    names = sorted({w.instruction for w in _report().wgmma})
    truth = _parse_instruction(names[0])
    assert got is not None and truth is not None
    m, n, k = got
    if m != truth[0]:
        raise Wrong(f"M of a wgmma is fixed: a warpgroup's 4 warps x 16 rows; {m} is not it")
    if k != truth[2]:
        raise Wrong(f"K of one wgmma is {cuda_facts.WGMMA_K_BYTES} bytes of the input dtype: how many fp16 values "
                    "is that?")
    block_n = GEMM_ARGS[4]
    if n == block_n and n != truth[1]:
        raise Wrong("that N is the whole block's width, as if one warpgroup computed all of it: the block has "
                    "two consumer warpgroups; how do they share the tile?")
    expect(answer.strip().lower() in names, f"N = {n} is not it: what part of the 128 x 128 tile does one "
                                            "warpgroup own?")
    block_m, groups = GEMM_ARGS[3], GEMM_OPTIONS["threads"] // cuda_facts.WARPGROUP_THREADS
    if truth[1] * groups == block_n:
        split = (f"the {groups} consumer warpgroups split the tile's N, each issuing {block_m // truth[0]} "
                 "instructions down M per K step")
    else:
        split = f"the {groups} consumer warpgroups split the tile's M"
    return (f"{names[0]}: each instruction multiplies {truth[0]} rows of A by {truth[1]} columns of B over "
            f"{truth[2]} of K; {split}")


def _reveal_own_tma(kernel: Any) -> Any:
    import tilelab

    return tilelab.Inspector(tilelab.inspect(kernel, TARGET), show="tma")


@exercise("06.8", "get the 128B swizzle",
          question="Change block_K of your GEMM cell so that A's TMA descriptor uses the 128B swizzle with no "
                   "problems, and answer with the kernel it builds (answer_06_8 = matmul(1024, 1024, 1024, 128, "
                   "128, block_K)).",
          kind="fixes",
          hints=("The TMA swizzle span must fit inside the box's inner row, in bytes.",
                 "A's inner row is block_K fp16 values, 2 bytes each; the 128B span needs 128 bytes.",
                 ("block_K = 64 fills the 128-byte span exactly; 128 works too (the tile then arrives in two "
                 "boxes).")),
          solution="answer_06_8 = matmul(1024, 1024, 1024, 128, 128, 64)",
          reveal=_reveal_own_tma, setup=GEMM_CELL)
def _block_k_for_128b(kernel: Any) -> str:
    import tilelab
    from tilelab import cuda_facts

    expect(not isinstance(kernel, int), "answer with the kernel your cell's factory builds, "
                                        "matmul(1024, 1024, 1024, 128, 128, block_K), not the number")
    report = tilelab.inspect(kernel, TARGET)
    loads = {d.buffer: d for d in report.tma_descriptors}
    expect("A" in loads, "A is not loaded through a TMA descriptor in this kernel: keep A's tile in shared memory "
                         "(T.alloc_shared) and copy it with T.copy")
    desc = loads["A"]
    a_buffer = report.wgmma[0].a.buffer if report.wgmma and report.wgmma[0].a is not None else None
    a_tile = next((lay for lay in report.layouts if lay.scope == "shared" and lay.buffer == a_buffer), None)
    block_k = int(a_tile.shape[-1]) if a_tile is not None else int(desc.box_dim[0])
    if desc.swizzle != "128B":
        raise Wrong(f"A's descriptor uses the {desc.swizzle} swizzle: a swizzle span must fit inside the box's "
                    "inner row; how many bytes is a row of A's tile?")
    expect(not desc.problems, "A's descriptor breaks a driver rule: " + "; ".join(desc.problems))
    expect(not report.problems, "the report lists problems: " + "; ".join(report.problems))
    limit = cuda_facts.arch_limits(TARGET).max_shared_memory_per_block
    smem = report.kernels[0].dynamic_shared_memory_bytes
    expect(not isinstance(smem, int) or smem <= limit,
           f"the kernel asks for {smem} bytes of dynamic shared memory, more than {TARGET}'s {limit} per block: "
           "it would not launch (fewer stages or a smaller block_K)")
    box = tuple(int(v) for v in desc.box_dim)
    boxes = max(1, block_k // box[0])
    how = (f"the {block_k}-wide tile arrives in {boxes} boxes of {box} per stage: a 128B-swizzled box's inner row "
           f"is at most 128 bytes, so the box stays {box}") if boxes > 1 else \
        f"one box of {box} per stage, its {box[0] * 2}-byte rows exactly the 128-byte span"
    return f"block_K={block_k}: A's descriptor uses the 128B swizzle; {how}"


wrong_answers = {
    "06.1": ("def chunk(row, chunk):\n    return chunk\n\n\nanswer_06_1 = chunk",
             "def chunk(row, chunk):\n    return (chunk + row) % 8\n\n\nanswer_06_1 = chunk",
             "def chunk(row, chunk):\n    return chunk ^ row\n\n\nanswer_06_1 = chunk",
             "def chunk(row, chunk):\n    return chunk ^ (row // 2 % 8)\n\n\nanswer_06_1 = chunk"),
    "06.2": ("answer_06_2 = 4", "answer_06_2 = 1", "answer_06_2 = 8", "answer_06_2 = 16"),
    "06.3": ("answer_06_3 = 32", "answer_06_3 = 1", "answer_06_3 = 2", "answer_06_3 = 8"),
    "06.4": ('answer_06_4 = "128B"', 'answer_06_4 = "none"', 'answer_06_4 = "256B"'),
    "06.5": ("answer_06_5 = 64", "answer_06_5 = 16", "answer_06_5 = 128", "answer_06_5 = 512"),
    "06.6": ("answer_06_6 = (128, 32)", "answer_06_6 = (1024, 1024)", "answer_06_6 = (64, 128)"),
    "06.7": ('answer_06_7 = "m64n128k16"', 'answer_06_7 = "m64n64k8"', 'answer_06_7 = "m128n64k16"',
             'answer_06_7 = "m64n32k16"'),
    "06.8": ("answer_06_8 = matmul(1024, 1024, 1024, 128, 128, 32)",
             "answer_06_8 = matmul(1024, 1024, 1024, 128, 128, 16)",
             "answer_06_8 = matmul(1024, 1024, 1024, 128, 128, 256)",
             "answer_06_8 = 64"),
}
