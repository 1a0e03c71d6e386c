"""Lesson 01, a first kernel: a tile copy, the launch grid and its blocks, guards at the edge, and a
transpose whose grid sends stores out of bounds (found by the tile map and a trace with the guards off).

Everything runs on the CPU (TileLang's target ``c``): the student's kernel function is called at
sizes of the checker's choosing and launched by ``tilelab.run(kernel, target="c")`` on poisoned
outputs, every access checked against its buffer, so an element never written and a store past the
end (never performed) are both seen.
"""

from __future__ import annotations

from typing import Any

from .. import Wrong, exercise, expect
from .. import _kernel_checks as kc
from ._common_b import build, run_cpu, where_wrong

COPY_HEAD = '''\
def copy_tile(M, N, block_M=32, block_N=32):
    @T.prim_func
    def copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
'''
COPY_BODY = "                B[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j]\n"
COPY_TAIL = "\n    return copy\n"


def copy_tile(M: int, N: int, block_M: int = 32, block_N: int = 32) -> Any:
    """The lesson's copy: block (bx, by) copies the block_M x block_N tile at rows by * block_M,
    columns bx * block_N (what exercise 01.1 asks the student to write)."""
    import tilelang.language as T

    @T.prim_func
    def copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j]

    return copy


def block_ids(M: int, N: int, block_M: int, block_N: int) -> Any:
    """A kernel shaped like the copy that writes, in each element of its tile, which block it is."""
    import tilelang.language as T

    @T.prim_func
    def who(BX: T.Tensor((M, N), T.int32), BY: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                BX[by * block_M + i, bx * block_N + j] = bx
                BY[by * block_M + i, bx * block_N + j] = by

    return who


def _grade_copy(factory: Any, M: int, N: int, *blocks: int, guards: bool) -> str:
    import torch

    func = kc.build(factory, M, N, *blocks)
    a = torch.arange(M * N, dtype=torch.float32).reshape(M, N)
    launched = kc.launch(func, {"A": a}, {"B": ((M, N), torch.float32)}, guards=guards)
    tile = tuple(blocks) if blocks else (32, 32)
    found = kc.problems("B", launched, a, tile=tile)
    found = kc.explained(found, func, [a, torch.empty(M, N)], "B", guards=guards)
    kc.grade(found, size=f"M={M}, N={N}, block_M={tile[0]}, block_N={tile[1]}")
    return f"M={M}, N={N}"


def _pair(answer: Any, what: str) -> tuple[int, int]:
    expect(isinstance(answer, (tuple, list)) and len(answer) == 2
           and all(isinstance(v, int) and not isinstance(v, bool) for v in answer),
           f"answer with a pair of whole numbers {what}, got {answer!r}")
    return int(answer[0]), int(answer[1])


@exercise("01.1", "a tile copy",
          question="Complete copy_tile: block (bx, by) copies its block_M x block_N tile of A into B.",
          kind="writes",
          hints=("Thread (i, j) of the T.Parallel loop handles one element of the block's tile.",
                 "The tile of block (bx, by) starts at row by * block_M and column bx * block_N.",
                 "B[row, col] = A[row, col], with row = by * block_M + i and col = bx * block_N + j."),
          solution=COPY_HEAD + COPY_BODY + COPY_TAIL, answer_name="copy_tile")
def _copy(answer: Any) -> str:
    sizes = _grade_copy(answer, 96, 64, 32, 16, guards=True)
    return f"every element of B is A's ({sizes}, 32 x 16 tiles): each block copied its own tile"


def _grid_truth() -> tuple[int, int]:
    from ...engine.inspect import inspect

    report = inspect(copy_tile(200, 300, 32, 64), "sm_90a")  # the grid as TileLang launches it
    grid = report.kernels[0].grid
    return int(grid[0]), int(grid[1])


def _reveal_grid(answer: Any) -> str:
    x, y = _grid_truth()
    return (f"copy_tile(200, 300, block_M=32, block_N=64) launches a grid of {x} x {y} = {x * y} blocks "
            f"(TileLang's launch of it for a GPU says so). The last column of blocks covers columns "
            f"{(x - 1) * 64}-{x * 64 - 1}: {x * 64 - 300} of them are past the edge.")


@exercise("01.2", "how many blocks",
          question="copy_tile(200, 300, block_M=32, block_N=64): how many blocks does it launch along x and "
                   "along y? Answer (x, y).",
          kind="predict",
          hints=("T.Kernel's first extent is x, the second y.",
                 "x counts tiles along N (the columns), y along M (the rows).",
                 "T.ceildiv(a, b) rounds up: a partial tile still gets a block."),
          solution="answer_01_2 = (5, 7)", reveal=_reveal_grid)
def _grid(answer: Any) -> str:
    got = _pair(answer, "(x, y)")
    x, y = _grid_truth()
    if got == (y, x):
        raise Wrong("that is (rows, columns): T.Kernel's first extent is x, which counts tiles along N")
    if got in ((300 // 64, 200 // 32), (200 // 32, 300 // 64)):
        raise Wrong("that rounds down: the columns and rows past the last whole tile need blocks too")
    expect(got == (x, y), "not quite: divide N by block_N and M by block_M, and look at what T.ceildiv does")
    return f"({x}, {y}): T.ceildiv(300, 64) blocks along x, T.ceildiv(200, 32) along y"


def _owner_truth() -> tuple[int, int]:
    import torch

    import tilelab

    bx, by = torch.full((200, 300), -1, dtype=torch.int32), torch.full((200, 300), -1, dtype=torch.int32)
    # the lesson's own kernel, run here (a worker process is for a student's kernel)
    tilelab.run(block_ids(200, 300, 32, 64), bx, by, target="c", outputs=["BX", "BY"], isolate=False)
    return int(bx[70, 200]), int(by[70, 200])


def _reveal_owner(answer: Any) -> str:
    bx, by = _owner_truth()
    return (f"B[70, 200] lies in the tile of block ({bx}, {by}): rows {by * 32}-{by * 32 + 31}, columns "
            f"{bx * 64}-{bx * 64 + 63} (a kernel of the copy's shape that writes its block's ids, "
            "launched on the CPU, says so)")


@exercise("01.3", "which block",
          question="With block_M=32, block_N=64, which block (bx, by) copies element B[70, 200]?",
          kind="predict",
          hints=("The element is B[row, column]: row 70, column 200.",
                 "bx numbers the tiles along the columns, by along the rows.",
                 "Which tile of 64 columns holds column 200? Which tile of 32 rows holds row 70?"),
          solution="answer_01_3 = (3, 2)", reveal=_reveal_owner)
def _owner(answer: Any) -> str:
    got = _pair(answer, "(bx, by)")
    truth = _owner_truth()
    if got == truth[::-1]:
        raise Wrong("that is (by, bx): bx comes first and numbers the tiles along the columns")
    if got == (200 // 32, 70 // 64):
        raise Wrong("that divides the column by block_M and the row by block_N: columns go in tiles of block_N")
    expect(got == truth, "not quite: divide the column by block_N for bx and the row by block_M for by")
    return f"block {truth}: column 200 // 64 and row 70 // 32"


FLOOR_COPY = COPY_HEAD.replace("T.ceildiv(N, block_N), T.ceildiv(M, block_M)", "N // block_N, M // block_M")


@exercise("01.4", "cover the edge",
          question="copy_floor launches N // block_N by M // block_M blocks. At M=100, N=70 part of B is "
                   "never written. Fix the grid.",
          kind="fixes",
          hints=("Run it: tilelab.run(copy_floor(100, 70), ref=lambda a: a, target=\"c\") shows the tile map.",
                 "100 // 32 is 3: three tiles of 32 rows cover rows 0-95. Who copies rows 96-99?",
                 "The grid must round up: T.ceildiv."),
          solution=(FLOOR_COPY.replace("copy_tile", "copy_floor").replace(
              "N // block_N, M // block_M", "T.ceildiv(N, block_N), T.ceildiv(M, block_M)") + COPY_BODY + COPY_TAIL),
          answer_name="copy_floor", given=FLOOR_COPY.replace("copy_tile", "copy_floor") + COPY_BODY + COPY_TAIL)
def _floor(answer: Any) -> str:
    sizes = _grade_copy(answer, 100, 70, guards=True)
    return (f"every element written ({sizes}). The blocks past the edge also run threads for rows and columns "
            "that do not exist: TileLang guarded those stores for you (the next exercise turns that off)")


@exercise("01.5", "your own guard",
          question="Compiled with TileLang's automatic bounds checks turned off, the rounded-up copy writes past "
                   "the end of B at M=100, N=70. Add the guard that keeps every load and store in bounds.",
          kind="writes",
          hints=("Which threads of the last row of blocks have no row to copy?",
                 "Copy only when the element exists: its row is below M and its column below N.",
                 "if by * block_M + i < M and bx * block_N + j < N: then the copy."),
          solution=COPY_HEAD.replace("copy_tile", "copy_guarded")
          + "                if by * block_M + i < M and bx * block_N + j < N:\n    " + COPY_BODY + COPY_TAIL,
          answer_name="copy_guarded")
def _guarded(answer: Any) -> str:
    _grade_copy(answer, 100, 70, guards=False)
    _grade_copy(answer, 64, 64, guards=False)
    return ("in bounds at M=100, N=70 and 64 x 64 with no help from TileLang: your guard skips the threads "
            "of edge blocks that have no element")


_FLOOR_HALF_FIXED = (FLOOR_COPY.replace("copy_tile", "copy_floor").replace("N // block_N", "T.ceildiv(N, block_N)")
                     + COPY_BODY + COPY_TAIL)

# ------------------------------------------------------------------------------------------
# 01.6 out of bounds: a transpose with its grid the wrong way round
# ------------------------------------------------------------------------------------------

TRANSPOSE = '''\
def transpose(M, N, block_M=32, block_N=32):
    @T.prim_func
    def tr(A: T.Tensor((M, N), T.float32), B: T.Tensor((N, M), T.float32)):
        with T.Kernel({grid}) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[bx * block_N + j, by * block_M + i] = A[by * block_M + i, bx * block_N + j]

    return tr
'''
TRANSPOSE_BUGGY = TRANSPOSE.format(grid="T.ceildiv(M, block_M), T.ceildiv(N, block_N)")
TRANSPOSE_FIXED = TRANSPOSE.format(grid="T.ceildiv(N, block_N), T.ceildiv(M, block_M)")


def _transpose_ref(a: Any) -> Any:
    return a.T.contiguous()


def _out_of_bounds(kernel: Any, *args: Any) -> str:
    """What the trace of a launch with TileLang's bounds checks off says: where the stores went."""
    import tilelab

    try:
        trace = tilelab.trace_tiles(kernel, *args, pass_configs={"tl.disable_safe_memory_legalize": True})
    except Exception:  # the trace is extra feedback; the launch above already graded the kernel
        return ""
    bad = trace.out_of_bounds
    said = " ".join(s.rstrip(".") + "." for s in trace.problems()[:3])
    if not bad:
        return f" {said}" if said else ""
    blocks = sorted({tuple(o.block) for o in bad})
    return (f" {said} With TileLang's bounds checks off, {len(bad)} accesses from {len(blocks)} block(s) land outside "
            "a tensor: on a GPU those are out-of-bounds stores and loads")


@exercise("01.6", "a transpose that writes out of bounds",
          question="transpose(M, N) should write B = A^T. At M=96, N=160 part of B is never written, and on a GPU with "
                   "TileLang's bounds checks off it stores past the end of B. Fix it (the check launches it on the "
                   "CPU at 96x160 and at the ragged 100x72 with 32 x 16 tiles).",
          kind="fixes",
          hints=("The launch's map of B's tiles shows which tiles were never written: which blocks should have "
                 "written them?",
                 "bx indexes A's columns (block_N wide) and by its rows (block_M tall): how many of each are there?",
                 "T.Kernel's first extent is bx's, the second by's."),
          solution=TRANSPOSE_FIXED,
          answer_name="transpose",
          given=TRANSPOSE_BUGGY)
def _transpose(answer: Any) -> str:
    import torch

    # the second size is ragged and its tile not square (block_M=32, block_N=16): rows and columns of
    # the tile cannot be mixed up there
    for m, n, bm, bn in ((96, 160, 32, 32), (100, 72, 32, 16)):
        kernel = build(answer, m, n, bm, bn, name="transpose")
        a = torch.randn(m, n, generator=torch.Generator().manual_seed(m + n))
        result = run_cpu(kernel, a, ref=_transpose_ref, tile=(bn, bm))  # B's tile of one block: block_N x block_M
        if not result.passed:
            raise Wrong(f"at M={m}, N={n} with block_M={bm}, block_N={bn}: {where_wrong(result)}."
                        f"{_out_of_bounds(kernel, a)}")
        if (m, n) == (96, 160):  # whole tiles: with the bounds checks off, nothing may go astray
            import tilelab

            trace = tilelab.trace_tiles(kernel, a, pass_configs={"tl.disable_safe_memory_legalize": True})
            expect(not trace.out_of_bounds and not int(trace.written_twice("B").sum()),
                   "B comes out right, but with TileLang's bounds checks off: " + " ".join(trace.problems()[:3]))
    return ("every element of B written once and right, at 96x160 and 100x72 (with 32x16 tiles too): one block "
            "per tile of A, bx over its columns and by over its rows")



wrong_answers = {
    "01.1": (COPY_HEAD + "                B[i, j] = A[i, j]\n" + COPY_TAIL,
             COPY_HEAD + "                B[by * block_M + i, bx * block_N + j] = "
                         "A[bx * block_M + i, by * block_N + j]\n"
             + COPY_TAIL),
    "01.2": ("answer_01_2 = (7, 5)", "answer_01_2 = (4, 6)", "answer_01_2 = 35"),
    "01.3": ("answer_01_3 = (2, 3)", "answer_01_3 = (6, 1)", "answer_01_3 = (3, 3)"),
    "01.4": (_FLOOR_HALF_FIXED,),
    "01.5": (COPY_HEAD.replace("copy_tile", "copy_guarded") + COPY_BODY + COPY_TAIL,
             COPY_HEAD.replace("copy_tile", "copy_guarded")
             + "                if by * block_M + i <= M and bx * block_N + j <= N:\n    " + COPY_BODY + COPY_TAIL),
    "01.6": (TRANSPOSE.format(grid="N // block_N, M // block_M"),),
}
