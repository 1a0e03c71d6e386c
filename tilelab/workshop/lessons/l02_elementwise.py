"""Lesson 02, elementwise and broadcasting: a scaled add with guards, who reads a
broadcast vector, a guarded outer add at a size that is not a multiple of the tile, and a bias add
that indexes its vector by the tile's index instead of the matrix's. On the CPU (target ``c``)."""

from __future__ import annotations

from typing import Any

from .. import Wrong, exercise, expect
from .. import _kernel_checks as kc
from .l01_first_kernel import block_ids

SCALE_ADD_HEAD = '''\
def scale_add(M, N, alpha=0.5, block_M=32, block_N=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row, col = by * block_M + i, bx * block_N + j
'''
SCALE_ADD_BODY = '''\
                if row < M and col < N:
                    C[row, col] = alpha * A[row, col] + B[row, col]
'''
OUTER_HEAD = '''\
def outer_add(M, N, block_M=32, block_N=32):
    @T.prim_func
    def kernel(x: T.Tensor((M,), T.float32), y: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
'''
OUTER_BODY = '''\
                if by * block_M + i < M and bx * block_N + j < N:
                    C[by * block_M + i, bx * block_N + j] = x[by * block_M + i] + y[bx * block_N + j]
'''
BIAS_HEAD = '''\
def add_bias(M, N, block_M=32, block_N=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float32), bias: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
'''
BIAS_BUG = "                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + bias[j]\n"
BIAS_FIXED = BIAS_BUG.replace("bias[j]", "bias[bx * block_N + j]")
RETURN = "\n    return kernel\n"


# the checker's sizes: a ragged non-square one with the default square tile, then one whose tile
# is not square (block_M != block_N: a kernel that mixes the two up is wrong there)
SIZES = ((100, 70, 32, 32), (70, 100, 16, 32))


def _run(factory: Any, M: int, N: int, inputs: dict[str, Any], expected: Any, *, guards: bool,
         block: tuple[int, int] = (32, 32)) -> None:
    import torch

    bm, bn = block
    func = kc.build(factory, M, N, block_M=bm, block_N=bn)
    kernel = kc.compile_c(func, guards=guards)
    launched = kc.launch(kernel, inputs, {"C": ((M, N), torch.float32)})
    found = kc.problems("C", launched, expected, tile=(bm, bn))
    found = kc.explained(found, func, [*inputs.values(), torch.empty(M, N)], "C", guards=guards)
    kc.grade(found, size=f"M={M}, N={N}, block_M={bm}, block_N={bn}" + ("" if guards else " with TileLang's own "
                                                                        "guards off"))


@exercise("02.1", "a scaled add",
          question="Complete scale_add: C = alpha * A + B, element by element, in bounds at any size.",
          kind="writes",
          hints=("Each thread (i, j) handles the element (row, col) the head of the loop names.",
                 "Guard it as in 01.5: only rows below M and columns below N exist.",
                 "C[row, col] = alpha * A[row, col] + B[row, col] under the guard."),
          solution=SCALE_ADD_HEAD + SCALE_ADD_BODY + RETURN, answer_name="scale_add")
def _scale_add(answer: Any) -> str:
    import torch

    gen = torch.Generator().manual_seed(2)
    for M, N, bm, bn in SIZES:
        a, b = torch.randn(M, N, generator=gen), torch.randn(M, N, generator=gen)
        _run(answer, M, N, {"A": a, "B": b}, 0.5 * a + b, guards=False, block=(bm, bn))
    return "right at M=100, N=70 and at M=70, N=100 with 16 x 32 tiles, in bounds without TileLang's own guards"


def _readers_truth() -> int:
    import torch

    kernel = kc.compile_c(block_ids(200, 300, 32, 64))
    bx, by = torch.full((200, 300), -1, dtype=torch.int32), torch.full((200, 300), -1, dtype=torch.int32)
    kernel(bx, by)
    # the blocks that compute column 0 of C are the blocks that read y[0]
    return len({(int(x), int(y)) for x, y in zip(bx[:, 0].tolist(), by[:, 0].tolist())})


def _reveal_readers(answer: Any) -> str:
    n = _readers_truth()
    return (f"y[0] is read by {n} blocks: every block of the first column of blocks (bx = 0), one per tile of "
            f"32 rows (a kernel of this grid that writes its block ids, launched on the CPU, says so). Each "
            "element of x is read by the blocks of one row of blocks instead.")


@exercise("02.2", "who reads the broadcast vector",
          question="outer_add(200, 300, block_M=32, block_N=64) computes C[i, j] = x[i] + y[j]. How many "
                   "blocks read y[0]?",
          kind="predict",
          hints=("Which blocks compute an element of column 0 of C?",
                 "Blocks with the same bx cover the same columns, one block per tile of rows.",
                 "Count the tiles of block_M rows in M, rounding up."),
          solution="answer_02_2 = 7", reveal=_reveal_readers)
def _readers(answer: Any) -> str:
    expect(isinstance(answer, int) and not isinstance(answer, bool),
           f"answer with a whole number of blocks, got {answer!r}")
    truth = _readers_truth()
    if answer == 1:
        raise Wrong("one block computes only block_M rows of column 0; the other rows of that column are other blocks'")
    if answer == -(-300 // 64):
        raise Wrong("that counts the blocks along x (the columns); y[0] is read by the blocks that share column 0")
    if answer == 32 or answer == 200:
        raise Wrong("that counts threads or rows, not blocks")
    expect(answer == truth, "not quite: count the blocks whose tile contains column 0")
    return f"{truth} blocks: one per tile of 32 rows in the first column of blocks"


@exercise("02.3", "a guarded outer add",
          question="Complete outer_add: C[i, j] = x[i] + y[j], correct and in bounds at M=100, N=70 (not a "
                   "multiple of the 32 x 32 tile).",
          kind="writes",
          hints=("x is indexed by the row, y by the column.",
                 "The last blocks have threads with no row or no column: guard both.",
                 "C[row, col] = x[row] + y[col] with row = by * block_M + i, col = bx * block_N + j, under the guard."),
          solution=OUTER_HEAD + OUTER_BODY + RETURN, answer_name="outer_add")
def _outer(answer: Any) -> str:
    import torch

    gen = torch.Generator().manual_seed(3)
    for M, N, bm, bn in SIZES:
        x, y = torch.randn(M, generator=gen), torch.randn(N, generator=gen)
        _run(answer, M, N, {"x": x, "y": y}, x[:, None] + y[None, :], guards=False, block=(bm, bn))
    return "right at M=100, N=70 and at M=70, N=100 with 16 x 32 tiles, in bounds without TileLang's own guards"


@exercise("02.4", "the bias of every block",
          question="add_bias should compute C = A + bias[None, :], but only the first column of blocks is right. "
                   "Fix it.",
          kind="fixes",
          hints=("Run it at M=64, N=96 and look at which tiles are wrong.",
                 "Every block reads the same elements of bias. Which ones should block bx read?",
                 "bias is indexed by the matrix's column, not by the column inside the tile."),
          solution=BIAS_HEAD + BIAS_FIXED + RETURN, answer_name="add_bias", given=BIAS_HEAD + BIAS_BUG + RETURN)
def _bias(answer: Any) -> str:
    import torch

    gen = torch.Generator().manual_seed(4)
    for M, N, bm, bn in ((64, 96, 32, 32), (64, 96, 32, 16)):
        a, bias = torch.randn(M, N, generator=gen), torch.randn(N, generator=gen)
        _run(answer, M, N, {"A": a, "bias": bias}, a + bias[None, :], guards=True, block=(bm, bn))
    return "every tile right: block bx adds bias[bx * block_N : (bx + 1) * block_N]"


wrong_answers = {
    "02.1": (SCALE_ADD_HEAD + "                C[row, col] = alpha * A[row, col] + B[row, col]\n" + RETURN,
             SCALE_ADD_HEAD + "                if row < M and col < N:\n"
                              "                    C[row, col] = A[row, col] + B[row, col]\n"
             + RETURN),
    "02.2": ("answer_02_2 = 1", "answer_02_2 = 5", "answer_02_2 = 8"),
    "02.3": (OUTER_HEAD + OUTER_BODY.replace("x[by * block_M + i] + y[bx * block_N + j]", "x[i] + y[j]") + RETURN,
             OUTER_HEAD + "                C[by * block_M + i, bx * block_N + j] = "
                          "x[by * block_M + i] + y[bx * block_N + j]\n"
             + RETURN),
    "02.4": (BIAS_HEAD + BIAS_BUG.replace("bias[j]", "bias[by * block_N + j]") + RETURN,),
}
