"""Lesson 03, reductions: row sums with ``T.reduce_sum``, which axis ``dim`` removes, a running
maximum started from the wrong value, the online softmax (one pass for the max and the sum), then
a row sum split over blocks that race for each output element (the poisoned launch and the trace).

On the CPU (target ``c``), TileLang 0.1.15 lowers ``T.reduce_sum``/``T.reduce_max`` over tiles in
``T.alloc_local`` (not over ``T.alloc_fragment``, whose layout it cannot infer for ``c``), and local
tiles are indexed in ``T.serial``/``T.grid`` loops (``T.Parallel`` over a local buffer is refused):
a CPU block is one thread that loops over its tile.
"""

from __future__ import annotations

from typing import Any

from .. import Wrong, exercise, expect
from .. import _kernel_checks as kc
from ._common_b import build, run_cpu, where_wrong

ROW_SUM_HEAD = '''\
def row_sum(M, N, block_M=8):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=1) as bx:
            tile = T.alloc_local((block_M, N), T.float32)
            sums = T.alloc_local((block_M,), T.float32)
'''
ROW_SUM_BODY = '''\
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, sums, dim=1)
            T.copy(sums, S[bx * block_M])
'''
ROW_MAX_HEAD = '''\
def row_max(M, N, block_M=8, block_N=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), T.float32), R: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=1) as bx:
            tile = T.alloc_local((block_M, block_N), T.float32)
            best = T.alloc_local((block_M,), T.float32)
'''
ROW_MAX_BUG = "            T.fill(best, 0.0)\n"
ROW_MAX_FIXED = "            T.fill(best, -T.infinity(T.float32))\n"
ROW_MAX_TAIL = '''\
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], tile)
                T.reduce_max(tile, best, dim=1, clear=False)
            T.copy(best, R[bx * block_M])
'''
SOFTMAX_HEAD = '''\
def online_softmax(M, N, block_M=8, block_N=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=1) as bx:
            tile = T.alloc_local((block_M, block_N), T.float32)
            m = T.alloc_local((block_M,), T.float32)       # running max of each row
            l = T.alloc_local((block_M,), T.float32)       # running sum of exp(x - m)
            m_new = T.alloc_local((block_M,), T.float32)
            chunk_max = T.alloc_local((block_M,), T.float32)
            chunk_sum = T.alloc_local((block_M,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0.0)
            for k in T.serial(T.ceildiv(N, block_N)):     # one pass: max and sum together
                T.copy(X[bx * block_M, k * block_N], tile)
                T.reduce_max(tile, chunk_max, dim=1)
                for i in T.serial(block_M):
                    m_new[i] = T.max(m[i], chunk_max[i])
                for i, j in T.grid(block_M, block_N):
                    tile[i, j] = T.exp(tile[i, j] - m_new[i])
                T.reduce_sum(tile, chunk_sum, dim=1)
                for i in T.serial(block_M):
'''
SOFTMAX_BODY = '''\
                    l[i] = l[i] * T.exp(m[i] - m_new[i]) + chunk_sum[i]
                    m[i] = m_new[i]
'''
SOFTMAX_TAIL = '''\
            for k in T.serial(T.ceildiv(N, block_N)):     # the second pass writes exp(x - m) / l
                T.copy(X[bx * block_M, k * block_N], tile)
                for i, j in T.grid(block_M, block_N):
                    tile[i, j] = T.exp(tile[i, j] - m[i]) / l[i]
                T.copy(tile, Y[bx * block_M, k * block_N])
'''
RETURN = "\n    return kernel\n"


def _run(factory: Any, M: int, N: int, x: Any, expected: Any, out: str, shape: tuple[int, ...],
         tile: tuple[int, ...] | None, tolerance: float = 1e-4) -> Any:
    import torch

    func = kc.build(factory, M, N)
    launched = kc.launch(func, {"X": x}, {out: (shape, torch.float32)})
    kc.grade(kc.problems(out, launched, expected, tile=tile, tolerance=tolerance), size=f"M={M}, N={N}")
    return launched.outputs[out]


@exercise("03.1", "row sums",
          question="Complete row_sum: S[r] = the sum of row r of X. Each block loads block_M whole rows into a "
                   "local tile, reduces it with T.reduce_sum and stores its block_M sums.",
          kind="writes",
          hints=("Three tile operations: a copy in, a reduction, a copy out.",
                 ("T.copy(X[bx * block_M, 0], tile) loads the block's rows; T.reduce_sum(src, dst, dim=...) "
                 "reduces along dim."),
                 "The row sums reduce along the columns: dim=1. Then T.copy(sums, S[bx * block_M])."),
          solution=ROW_SUM_HEAD + ROW_SUM_BODY + RETURN, answer_name="row_sum")
def _row_sum(answer: Any) -> str:
    import torch

    x = torch.randn(50, 48, generator=torch.Generator().manual_seed(5))
    _run(answer, 50, 48, x, x.sum(dim=1), "S", (50,), (8,))
    return "right at M=50, N=48 (the last block holds 2 rows: T.copy guards the edge for you)"


def _accepted(shape: tuple[int, ...]) -> bool:
    """Whether TileLang builds T.reduce_max(tile, out, dim=0) of an (8, 64) tile into ``out`` of ``shape``."""
    import tilelang.language as T

    from ... import _tilelang

    def build() -> Any:
        @T.prim_func
        def kernel(X: T.Tensor((8, 64), T.float32), R: T.Tensor(shape, T.float32)):
            with T.Kernel(1, threads=1) as bx:
                tile = T.alloc_local((8, 64), T.float32)
                out = T.alloc_local(shape, T.float32)
                T.copy(X[bx * 8, 0], tile)
                T.reduce_max(tile, out, dim=0)
                T.copy(out, R)

        return kernel

    try:
        with _tilelang.tilelang_errors("reduce"):
            build()
    except Exception:
        return False
    return True


def _reveal_axis(answer: Any) -> str:
    return ("TileLang builds the reduction into (64,) and also into (1, 64) (the reduced axis kept as 1); it "
            "refuses (8,): that is dim=1's result, one value per row.")


@exercise("03.2", "which axis goes",
          question="tile is an (8, 64) local tile. T.reduce_max(tile, out, dim=0): what shape must out have? "
                   "Answer a tuple.",
          kind="predict",
          hints=("dim names the axis the reduction runs along.",
                 "That axis is gone from the result; the other one stays.",
                 "dim=0 runs down the 8 rows of each column."),
          solution="answer_03_2 = (64,)", reveal=_reveal_axis)
def _axis(answer: Any) -> str:
    if isinstance(answer, int) and not isinstance(answer, bool):
        answer = (answer,)
    expect(isinstance(answer, (tuple, list)) and 0 < len(answer) <= 2
           and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in answer),
           f"answer with a shape, a tuple of one or two positive whole numbers, got {answer!r}")
    got = tuple(answer)
    if _accepted(got):  # TileLang's own check of the shape is the truth
        return f"{got}: one maximum per column, the 8 rows reduced away"
    if got == (8,):
        raise Wrong("that is the result of dim=1 (one value per row): dim names the axis that is reduced away")
    if got == (8, 64):
        raise Wrong("that is the tile itself: a reduction leaves one value along the axis it runs over")
    raise Wrong("TileLang refuses that shape: which of the tile's two axes is left once dim=0 is reduced?")


@exercise("03.3", "a running maximum",
          question="row_max reduces each row chunk by chunk with T.reduce_max(..., clear=False), so each "
                   "chunk's maximum is combined with what best already holds. Some rows come out wrong. Fix it.",
          kind="fixes",
          hints=("Launch it on rows whose values are all negative.",
                 "clear=False keeps best's old value in the maximum. What is best before the first chunk?",
                 "Start best at the identity of max: minus infinity, -T.infinity(T.float32)."),
          solution=ROW_MAX_HEAD + ROW_MAX_FIXED + ROW_MAX_TAIL + RETURN, answer_name="row_max",
          given=ROW_MAX_HEAD + ROW_MAX_BUG + ROW_MAX_TAIL + RETURN)
def _row_max(answer: Any) -> str:
    import torch

    x = torch.randn(24, 64, generator=torch.Generator().manual_seed(6))
    x[::3] = -x[::3].abs() - 100.0  # every third row all negative, far below any start but minus infinity
    try:
        _run(answer, 24, 64, x, x.amax(dim=1), "R", (24,), (8,))
    except Wrong as wrong:
        import re

        wrong_rows = {int(r) for r in re.findall(r"\d+", str(wrong).split("R elements", 1)[-1].split(" hold")[0])}
        negative = set(range(0, 24, 3))
        if wrong_rows and wrong_rows <= negative:
            raise Wrong(f"{wrong}. Each of those rows is negative everywhere: what does best hold before the "
                        "first chunk?") from None
        raise
    return "right, all-negative rows included: the running maximum starts from minus infinity"


@exercise("03.4", "the online softmax",
          question="online_softmax finds each row's max and sum of exponentials in one pass over the chunks. "
                   "When a chunk raises the max from m to m_new, the sum l so far was taken against the old "
                   "max. Complete the update of l and m.",
          kind="writes",
          hints=("l holds the sum of exp(x - m) over the chunks seen so far.",
                 "exp(x - m_new) = exp(x - m) * exp(m - m_new): the old sum is rescaled by one factor.",
                 "l[i] = l[i] * T.exp(m[i] - m_new[i]) + chunk_sum[i], then m[i] = m_new[i]."),
          solution=SOFTMAX_HEAD + SOFTMAX_BODY + SOFTMAX_TAIL + RETURN, answer_name="online_softmax")
def _softmax(answer: Any) -> str:
    import torch

    # values up to ~±60: a sum taken against a stale max is off by factors of e^10 and more
    x = 20 * torch.randn(16, 128, generator=torch.Generator().manual_seed(7))
    expected = torch.softmax(x.double(), dim=1).float()
    try:
        y = _run(answer, 16, 128, x, expected, "Y", (16, 128), None)
    except Wrong as wrong:
        raise Wrong(f"{wrong}. Each row of a softmax sums to 1; look at what l holds when the max changes") from None
    sums = y.double().sum(dim=1)
    expect(torch.allclose(sums, torch.ones_like(sums), atol=1e-4), "the rows do not sum to 1")
    return "right at M=16, N=128 in 4 chunks: each row's sum is rescaled whenever its max grows"


# ------------------------------------------------------------------------------------------
# 03.5 a race between blocks: partial sums added into the output
# ------------------------------------------------------------------------------------------

ROW_SUM_BUGGY = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(splits, M) as (s, i):  # block (s, i) sums part s of row i
            part = T.alloc_local((1,), T.float32)
            part[0] = 0.0
            for j in T.serial(N // splits):
                part[0] += A[i, s * (N // splits) + j]
            Out[i] = Out[i] + part[0]

    return rs
'''
ROW_SUM_FIXED = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(M) as i:  # one block per row: no other block touches Out[i]
            total = T.alloc_local((1,), T.float32)
            total[0] = 0.0
            for j in T.serial(N):
                total[0] += A[i, j]
            Out[i] = total[0]

    return rs
'''


ROW_SUM_ACCUMULATES_IN_OUT = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(M) as i:
            for j in T.serial(N):
                Out[i] += A[i, j]

    return rs
'''


def _row_sum_ref(a: Any) -> Any:
    return a.sum(dim=1)


def _race(kernel: Any, a: Any) -> str:
    import tilelab

    try:
        return " ".join(s.rstrip(".") + "." for s in tilelab.trace_tiles(kernel, a).problems("Out")[:2])
    except Exception:
        return ""


@exercise("03.5", "blocks that race for one element",
          question="row_sum splits each row among `splits` blocks, and each adds its part into Out[i]. Fix it so that "
                   "Out[i] is the sum of row i whatever the order the blocks run in and whatever Out held before "
                   "(the check launches it on the CPU with Out poisoned, at 64x128 and 48x96).",
          kind="fixes",
          hints=("On a GPU, two blocks that read Out[i], add and write it back at the same time lose one of the "
                 "two updates: a race. And nothing ever set Out[i] to zero first.",
                 "The poisoned launch shows the second problem on the CPU: what does Out[i] + part start from?",
                 "Give each row to one block that sums the whole row and writes Out[i] once."),
          solution=ROW_SUM_FIXED,
          answer_name="row_sum",
          given=ROW_SUM_BUGGY)
def _split_row_sum(answer: Any) -> str:
    import torch

    for m, n in ((64, 128), (48, 96)):
        kernel = build(answer, m, n, name="row_sum")
        a = torch.randn(m, n, generator=torch.Generator().manual_seed(m * n))
        result = run_cpu(kernel, a, ref=_row_sum_ref)
        if result.passed:
            if (m, n) == (64, 128):  # one trace says whether blocks share elements
                import tilelab

                trace = tilelab.trace_tiles(kernel, a)
                twice = int(trace.written_twice("Out").sum())
                expect(twice == 0, "the sums are right on the CPU, where blocks run one after another, but "
                                   f"{twice} elements of Out are written by more than one block: "
                                   + "; ".join(trace.problems("Out")[:2]))
            continue
        out = result.outputs[0]
        if out.unwritten == m or out.nonfinite == m:
            raise Wrong("every Out[i] still holds the poison: your kernel reads Out[i] before anything wrote it, so "
                        "the sum starts from whatever memory held. " + _race(kernel, a))
        for splits in (2, 3, 4, 8):
            def last_part(x: Any, s: int = splits) -> Any:  # the sum of a row's last 1/s only
                return x[:, -(x.shape[1] // s):].sum(dim=1)

            if n % splits == 0 and run_cpu(kernel, a, ref=last_part).passed:
                raise Wrong("Out holds only the last block's part of each row: every block writes Out[i] and the last "
                            "one wins here; on a GPU any of them may win. " + _race(kernel, a))
        raise Wrong(f"at {m}x{n} Out is not the row sums: {where_wrong(result)}")
    return "each Out[i] written once, by one block, from nothing but A: no race and no dependence on Out's old contents"



wrong_answers = {
    "03.1": (ROW_SUM_HEAD + ROW_SUM_BODY.replace("dim=1", "dim=0") + RETURN,
             ROW_SUM_HEAD + ROW_SUM_BODY.replace("            T.copy(sums, S[bx * block_M])\n", "") + RETURN),
    "03.2": ("answer_03_2 = (8,)", "answer_03_2 = (8, 64)", "answer_03_2 = (8, 1)"),
    "03.3": (ROW_MAX_HEAD + ROW_MAX_BUG + ROW_MAX_TAIL.replace("clear=False", "clear=True") + RETURN,
             ROW_MAX_HEAD + ROW_MAX_FIXED + ROW_MAX_TAIL.replace("clear=False", "clear=True") + RETURN),
    "03.4": (SOFTMAX_HEAD + "                    l[i] = l[i] + chunk_sum[i]\n                    m[i] = m_new[i]\n"
             + SOFTMAX_TAIL + RETURN,
             SOFTMAX_HEAD + "                    l[i] = l[i] * T.exp(m[i] - m_new[i]) + chunk_sum[i]\n" + SOFTMAX_TAIL
             + RETURN),
    "03.5": (ROW_SUM_ACCUMULATES_IN_OUT,
             ROW_SUM_BUGGY.replace("Out[i] = Out[i] + part[0]", "Out[i] = part[0]")),
}
