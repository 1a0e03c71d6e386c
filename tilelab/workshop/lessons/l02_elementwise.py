"""Lesson 02, elementwise and broadcasting: a scaled add with guards, who reads a
broadcast vector, a guarded outer add at a size that is not a multiple of the tile, and a bias add
that indexes its vector by the tile's index instead of the matrix's. On the CPU (target ``c``).
Then how ``T.Parallel`` deals a tile to a block's threads, and what a fragment layout is: a
prediction graded against the layout TileLang itself infers (``tilelab.inspect(...).layouts``)."""

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
    launched = kc.launch(func, inputs, {"C": ((M, N), torch.float32)}, guards=guards)
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

    import tilelab

    bx, by = torch.full((200, 300), -1, dtype=torch.int32), torch.full((200, 300), -1, dtype=torch.int32)
    # the lesson's own kernel, run here (a worker process is for a student's kernel)
    tilelab.run(block_ids(200, 300, 32, 64), bx, by, target="c", outputs=["BX", "BY"], isolate=False)
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


# ------------------------------------------------------------------------------------------
# 02.5 who holds element (i, j) of a fragment
# ------------------------------------------------------------------------------------------

FRAGMENT_KERNEL = '''\
def double_tile(M, N, block_M=64, block_N=64, threads=128):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_f = T.alloc_fragment((block_M, block_N), T.float32)  # the tile, spread over the block's threads
            T.copy(A[by * block_M, bx * block_N], A_f)
            for i, j in T.Parallel(block_M, block_N):
                A_f[i, j] = A_f[i, j] * 2.0
            T.copy(A_f, B[by * block_M, bx * block_N])

    return kernel
'''
FRAGMENT_ELEMENT = (10, 37)


def double_tile(M: int, N: int, block_M: int = 64, block_N: int = 64, threads: int = 128) -> Any:
    """The lesson's kernel (the notebook shows this text)."""
    import linecache

    import tilelang.language as T

    name = "<tilelab-lesson-02-fragment>"
    linecache.cache[name] = (len(FRAGMENT_KERNEL), None, FRAGMENT_KERNEL.splitlines(keepends=True), name)
    namespace: dict[str, Any] = {"T": T}
    exec(compile(FRAGMENT_KERNEL, "<tilelab-lesson-02-fragment>", "exec"), namespace)
    return namespace["double_tile"](M, N, block_M, block_N, threads)


_FRAGMENT_REPORT: list[Any] = []


def fragment_layout() -> Any:
    """A_f's layout as TileLang infers it for sm_90a (a :class:`tilelab.records.kernel.Layout`)."""
    if not _FRAGMENT_REPORT:
        import tilelab

        _FRAGMENT_REPORT.append(tilelab.inspect(double_tile(256, 256), "sm_90a"))
    return next(lay for lay in _FRAGMENT_REPORT[0].layouts if lay.scope == "fragment" and lay.buffer == "A_f")


def _fragment_truth() -> tuple[int, int]:
    lay = fragment_layout()
    threads = lay.array("threads")
    per_thread = int((threads == 0).sum())
    return per_thread, int(threads[FRAGMENT_ELEMENT])


def _reveal_fragment(answer: Any) -> str:
    lay = fragment_layout()
    threads, regs = lay.array("threads"), lay.array("locals")
    i, j = FRAGMENT_ELEMENT
    t = int(threads[i, j])
    mine = sorted({int(r) for r in (threads == t).nonzero()[0]})
    return (f"TileLang's layout of A_f: {lay.description}\nthread {t} holds element ({i}, {j}) in its register "
            f"{int(regs[i, j])}, and its elements lie in rows {mine} (4 consecutive columns each). Row 0's "
            f"64 columns, 4 at a time, belong to threads {[int(t) for t in threads[0, ::4]]}")


@exercise("02.5", "who holds element (i, j) of a fragment",
          question="double_tile runs T.Parallel(64, 64) over a 64 x 64 float32 fragment with threads=128. Answer "
                   "(elements each thread holds, the thread that holds element (10, 37)), as TileLang lays the "
                   "fragment out for Hopper.",
          kind="predict",
          hints=("A fragment is the tile spread over the block's threads: every element lives in one thread's "
                 "registers. 64 x 64 elements over 128 threads.",
                 "T.Parallel deals the tile out in vectors of 4 consecutive float32 (16 bytes: one load or store "
                 "instruction), in row-major order: vector 0 to thread 0, vector 1 to thread 1, ... and after "
                 "thread 127 back to thread 0.",
                 "Element (i, j) is in vector (i * 64 + j) // 4; which thread gets that vector?"),
          solution="answer_02_5 = (32, 41)", reveal=_reveal_fragment)
def _fragment(answer: Any) -> str:
    expect(isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(a, int) and not isinstance(a, bool)
                                                                  for a in answer),
           f"answer with two whole numbers, (elements per thread, thread), got {answer!r}")
    per_thread, thread = _fragment_truth()
    mine_per, mine_thread = answer
    i, j = FRAGMENT_ELEMENT
    if mine_per == 64 * 64:
        raise Wrong("4096 is the whole tile: a fragment is spread over the block's 128 threads, each holding a part")
    if mine_per == 64 * 64 // 256:
        raise Wrong("threads=128 is the block's thread count (256 would be two warp groups)")
    if mine_per != per_thread:
        raise Wrong("not the elements per thread: the tile's elements shared out evenly over the threads")
    if mine_thread == (i * 64 + j) % 128:
        raise Wrong(f"that deals single elements to threads; T.Parallel gives each thread 4 consecutive float32 "
                    f"(one 16-byte access), so element ({i}, {j}) is in vector (i * 64 + j) // 4")
    if mine_thread == (i * 64 + j) // per_thread:
        raise Wrong("that gives each thread a run of consecutive elements; the threads take turns in vectors of 4, "
                    "so that neighbouring threads touch neighbouring addresses (one coalesced access per warp)")
    expect(mine_thread == thread, f"{mine_per} elements each is right; not the thread: find the vector that holds "
                                  f"({i}, {j}) and deal vectors to threads in turn")
    return (f"{per_thread} elements per thread; element ({i}, {j}) is thread {thread}'s. Each thread holds "
            "4 consecutive columns in every 8th row: the fragment layout maps each element to (thread, "
            "register). The same map decides which thread runs each iteration of T.Parallel.")


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
    "02.5": ("answer_02_5 = (4096, 41)", "answer_02_5 = (32, 37)", "answer_02_5 = (32, 21)"),
}
