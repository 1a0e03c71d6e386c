"""Wrong kernels for the course's kernel exercises, each made from the exercise's own solution by one
small edit of the kinds students make (a sign, swapped bx/by, the K loop one tile short, a clear or
a rescale dropped, a reduction swapped, block_M and block_N swapped): every one must fail its check
with a message that names what is wrong (``says``: a regular expression the message must match).

``EQUIVALENT`` lists edits that do not change what the kernel computes, with why (they are not
mutants: no check could fail them). ``PENDING_RESULTS`` lists exercises graded by how the kernel
lowered for a GPU, whose mutants wait for their results to be checked on the CPU."""

from __future__ import annotations

import os
import re
from typing import NamedTuple


class Mutant(NamedTuple):
    exercise: str
    name: str
    old: str  # replaced everywhere in the solution
    new: str
    says: str  # what the failure's message must say (a regular expression, case-insensitive)


_ROW, _COL = "by * block_M + i", "bx * block_N + j"
_MASK = "kb * block_N + j > bx * block_M + i"
_ACC_RESCALE = "acc[i, j] = acc[i, j] * T.exp2(old_max[i] * scale - row_max[i] * scale)"
_SUM_RESCALE = "row_sum[i] = row_sum[i] * T.exp2(old_max[i] * scale - row_max[i] * scale)"
_OOB = r"out of bounds|below zero|past the end|crashed"
_WHERE = r"rows|tiles|block|never written|wrong values"

MUTANTS: tuple[Mutant, ...] = (
    # 01.1 a tile copy (checked at 96 x 64 with 32 x 16 tiles, and 32 x 32)
    Mutant("01.1", "swapped bx/by", f"B[{_ROW}, {_COL}] = A[{_ROW}, {_COL}]",
           "B[bx * block_M + i, by * block_N + j] = A[bx * block_M + i, by * block_N + j]", _WHERE),
    Mutant("01.1", "sign of i", _ROW, "by * block_M - i", _OOB + "|" + _WHERE),
    Mutant("01.1", "block_M/block_N swapped", f"{_ROW}, {_COL}", "by * block_N + i, bx * block_M + j", _WHERE),
    Mutant("01.1", "one row down", f"B[{_ROW}, {_COL}]", f"B[{_ROW} + 1, {_COL}]", _OOB + "|" + _WHERE),
    Mutant("01.1", "value changed", f"= A[{_ROW}, {_COL}]", f"= A[{_ROW}, {_COL}] * 2.0", r"wrong values"),
    # 01.4 cover the edge (100 x 70: the grid must round up)
    Mutant("01.4", "rows rounded down", "T.ceildiv(M, block_M)", "M // block_M", r"never written"),
    Mutant("01.4", "swapped bx/by", f"B[{_ROW}, {_COL}] = A[{_ROW}, {_COL}]",
           "B[bx * block_M + i, by * block_N + j] = A[bx * block_M + i, by * block_N + j]", _WHERE),
    Mutant("01.4", "grid axes swapped", "T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)",
           "T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N)", _WHERE),
    Mutant("01.4", "sign of j", _COL, "bx * block_N - j", _OOB + "|" + _WHERE),
    Mutant("01.4", "value changed", f"= A[{_ROW}, {_COL}]", f"= A[{_ROW}, {_COL}] + 1.0", r"wrong values"),
    # 01.5 your own guard (100 x 70, guards off)
    Mutant("01.5", "column guard dropped", f" and {_COL} < N", "", _OOB + "|" + _WHERE),
    Mutant("01.5", "<= for <", f"{_ROW} < M", f"{_ROW} <= M", _OOB + "|" + _WHERE),
    Mutant("01.5", "rows guarded by N", f"{_ROW} < M", f"{_ROW} < N", _WHERE),
    Mutant("01.5", "swapped bx/by", f"B[{_ROW}, {_COL}] = A[{_ROW}, {_COL}]",
           "B[bx * block_M + i, by * block_N + j] = A[bx * block_M + i, by * block_N + j]", _OOB + "|" + _WHERE),
    Mutant("01.5", "sign of j", _COL, "bx * block_N - j", _OOB + "|" + _WHERE),
    # 06.1 the 128B swizzle (a function of row and chunk, checked against TileLang's layout)
    Mutant("06.1", "row mod 4", "chunk ^ (row % 8)", "chunk ^ (row % 4)", r"row|chunk|wrong|differ"),
    Mutant("06.1", "the whole row", "chunk ^ (row % 8)", "chunk ^ row", r"row|chunk|wrong|differ|range"),
    Mutant("06.1", "plus for xor", "chunk ^ (row % 8)", "(chunk + row) % 8", r"row|chunk|wrong|differ"),
    Mutant("06.1", "row of 8 rows", "chunk ^ (row % 8)", "chunk ^ ((row // 8) % 8)", r"row|chunk|wrong|differ"),
    Mutant("06.1", "no swizzle", "chunk ^ (row % 8)", "chunk", r"row|chunk|wrong|differ|swizzl"),
    # 02.1 a scaled add
    Mutant("02.1", "sign of i (the 02.1 slip)", "row, col = by * block_M + i", "row, col = by * block_M - i", _OOB),
    Mutant("02.1", "alpha dropped", "alpha * A[row, col]", "A[row, col]", r"wrong values"),
    Mutant("02.1", "A and B swapped", "alpha * A[row, col] + B[row, col]", "alpha * B[row, col] + A[row, col]",
           r"wrong values"),
    Mutant("02.1", "block_M/block_N swapped", "row, col = by * block_M + i, bx * block_N + j",
           "row, col = by * block_N + i, bx * block_M + j", _WHERE),
    Mutant("02.1", "swapped bx/by", "row, col = by * block_M + i, bx * block_N + j",
           "row, col = bx * block_M + i, by * block_N + j", _WHERE),
    Mutant("02.1", "guard dropped", "                if row < M and col < N:\n                    C",
           "                C", _OOB),
    # 02.3 a guarded outer add
    Mutant("02.3", "x and y swapped", "x[by * block_M + i] + y[bx * block_N + j]",
           "x[bx * block_N + j] + y[by * block_M + i]", _OOB + "|" + _WHERE),
    Mutant("02.3", "tile index for x", "x[by * block_M + i]", "x[i]", _WHERE),
    Mutant("02.3", "block_M/block_N swapped", "by * block_M + i", "by * block_N + i", _WHERE),
    Mutant("02.3", "column guard dropped", " and bx * block_N + j < N", "", _OOB + "|" + _WHERE),
    Mutant("02.3", "minus for plus", "] + y[", "] - y[", r"wrong values"),
    # 02.4 the bias of every block
    Mutant("02.4", "bias by the row tile", "bias[bx * block_N + j]", "bias[by * block_N + j]", _WHERE),
    Mutant("02.4", "bias by block_M", "bias[bx * block_N + j]", "bias[bx * block_M + j]", _WHERE),
    Mutant("02.4", "bias one column over", "bias[bx * block_N + j]", "bias[bx * block_N + j + 1]", _WHERE),
    Mutant("02.4", "bias subtracted", "] + bias[", "] - bias[", r"wrong values"),
    Mutant("02.4", "swapped bx/by in A", "A[by * block_M + i, bx * block_N + j]",
           "A[bx * block_M + i, by * block_N + j]", _WHERE),
    # 03.1 row sums
    Mutant("03.1", "reduced over the wrong axis", "dim=1", "dim=0", r"S|wrong|never"),
    Mutant("03.1", "max for sum", "T.reduce_sum", "T.reduce_max", r"wrong values"),
    Mutant("03.1", "stored at the block's index", "S[bx * block_M]", "S[bx]", r"never written|wrong values"),
    Mutant("03.1", "loaded one row down", "X[bx * block_M, 0]", "X[bx * block_M + 1, 0]", r"wrong values|"
           + _OOB),
    Mutant("03.1", "grid without the ragged block", "T.ceildiv(M, block_M)", "M // block_M", r"never written"),
    # 03.3 a running maximum
    Mutant("03.3", "max starts at -1", "T.fill(best, -T.infinity(T.float32))", "T.fill(best, -1.0)", r"wrong values"),
    Mutant("03.3", "cleared every chunk", "clear=False", "clear=True", r"wrong values|last|chunk"),
    Mutant("03.3", "K loop one short", "for k in T.serial(T.ceildiv(N, block_N))",
           "for k in T.serial(T.ceildiv(N, block_N) - 1)", r"wrong values|last|chunk"),
    Mutant("03.3", "chunk offset k", "X[bx * block_M, k * block_N]", "X[bx * block_M, k]", r"wrong values"),
    Mutant("03.3", "min for max", "T.reduce_max", "T.reduce_min", r"wrong values|infinity that your kernel computed"),
    # 03.4 the online softmax
    Mutant("03.4", "rescale dropped", "l[i] * T.exp(m[i] - m_new[i])", "l[i]", r"wrong values|rescale"),
    Mutant("03.4", "rescale sign flipped", "T.exp(m[i] - m_new[i])", "T.exp(m_new[i] - m[i])",
           r"(?s)^(?!.*never written).*NaN or infinity that your kernel computed"),
    Mutant("03.4", "max not carried", "                    m[i] = m_new[i]\n", "", r"wrong values|NaN"),
    Mutant("03.4", "divided by row 0's sum", "/ l[i]", "/ l[0]", r"wrong values"),
    Mutant("03.4", "not divided by the sum", " / l[i]", "", r"wrong values"),
    Mutant("03.4", "first pass one chunk short", "for k in T.serial(T.ceildiv(N, block_N)):     # one pass",
           "for k in T.serial(T.ceildiv(N, block_N) - 1):     # one pass", r"wrong values|NaN"),
    # 04.1 a GEMM on the CPU
    Mutant("04.1", "T.clear dropped", "            T.clear(C_tile)\n", "",
           r"(?s)^(?!.*never written).*read before initiali"),
    Mutant("04.1", "K loop one short", "T.Pipelined(T.ceildiv(K, block_K)", "T.Pipelined(T.ceildiv(K, block_K) - 1",
           r"(?s)^(?!.*offsets).*one slice short"),
    Mutant("04.1", "swapped bx/by in the loads", "A[by * block_M, k * block_K]", "A[bx * block_M, k * block_K]",
           r"wrong|bounds|never written"),
    Mutant("04.1", "A's copy offsets swapped", "A[by * block_M, k * block_K]", "A[k * block_K, by * block_M]",
           r"wrong|bounds|never written"),
    Mutant("04.1", "stored at swapped bx/by", "C[by * block_M, bx * block_N]", "C[bx * block_M, by * block_N]",
           r"never written|bounds|wrong"),
    Mutant("04.1", "block_M/block_N swapped in the store", "C[by * block_M, bx * block_N]",
           "C[by * block_N, bx * block_M]", r"never written|bounds|wrong"),
    # 04.4 split-K with atomic adds (C starts at zero)
    *(Mutant("04.4", *m) for m in (
        ("stored, not added", "T.atomic_add(C[by * block_M + i, bx * block_N + j], C_f[i, j])",
         "C[by * block_M + i, bx * block_N + j] = C_f[i, j]", r"without an atomic.*race"),
        ("read-add-write, not atomic", "T.atomic_add(C[by * block_M + i, bx * block_N + j], C_f[i, j])",
         "C[by * block_M + i, bx * block_N + j] = C[by * block_M + i, bx * block_N + j] + C_f[i, j]",
         r"more than one block without an atomic"),
        ("every split adds the first slices", "(bz * steps + k)", "k", r"same slices of K"),
        ("a split short", "splits, threads=128", "splits - 1, threads=128", r"misses the last split"),
        ("T.clear dropped", "            T.clear(C_f)\n", "", r"before initiali"),
        ("atomic add at swapped bx/by", "C[by * block_M + i, bx * block_N + j], C_f",
         "C[bx * block_M + i, by * block_N + j], C_f", r"wrong|bounds|past"),
    )),
    # 08.1 the tiled forward pass on the CPU (with and without the causal mask)
    *(Mutant("08.1", *m) for m in (
        ("rescale of acc dropped", _ACC_RESCALE, "acc[i, j] = acc[i, j]", r"acc is not rescaled"),
        ("rescale of row_sum dropped", _SUM_RESCALE, "row_sum[i] = row_sum[i]", r"row_sum is not rescaled"),
        ("K/V loop one short", "else T.ceildiv(seq, block_N)", "else T.ceildiv(seq, block_N) - 1",
         r"one block short"),
        ("causal mask hides the diagonal", _MASK, _MASK.replace(" > ", " >= "), r"hides the diagonal"),
        ("max not carried across key blocks", "clear=False", "clear=True", r"NaN or infinite.*carried"),
        ("final division dropped", "acc[i, j] = acc[i, j] / row_sum[i]", "acc[i, j] = acc[i, j]", r"never divided"),
        ("causal loop past the diagonal", "T.ceildiv((bx + 1) * block_M, block_N) if causal else ", "",
         r"tile map.*past|tile map.*throws away"),
        ("causal mask dropped", "if causal:\n                    for i, j", "if False:\n                    for i, j",
         r"not masked"),
    )),
    # 09.4 unpack int4 weights
    Mutant("09.4", "low nibble read as the high one", "lo = T.Cast(T.int32, Qw[i, j] & T.uint8(15))",
           "lo = T.Cast(T.int32, Qw[i, j] >> T.uint8(4))", r"wrong|nibble|order"),
    Mutant("09.4", "no sign extension", "T.if_then_else(lo >= 8, lo - 16, lo)", "lo", r"wrong|sign|negative"),
    Mutant("09.4", "scale dropped", "hi - 16, hi)) * S[i]", "hi - 16, hi))", r"wrong|scale"),
    Mutant("09.4", "shift by 3", ">> T.uint8(4)", ">> T.uint8(3)", r"wrong"),
    Mutant("09.4", "scale of row 0", "* S[i]", "* S[0]", r"wrong|scale"),
    # 01.6 a transpose that writes out of bounds
    Mutant("01.6", "grid rounded down", "T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M))",
           "T.Kernel(N // block_N, M // block_M)", _OOB + "|" + _WHERE),
    Mutant("01.6", "store not transposed", "B[bx * block_N + j, by * block_M + i]",
           "B[by * block_M + i, bx * block_N + j]", _OOB + "|" + _WHERE),
    Mutant("01.6", "block_M/block_N swapped", "B[bx * block_N + j, by * block_M + i]",
           "B[bx * block_M + j, by * block_N + i]", _OOB + "|" + _WHERE),
    Mutant("01.6", "sign of j", "bx * block_N + j", "bx * block_N - j", _OOB + "|" + _WHERE),
    Mutant("01.6", "swapped bx/by in the load", "A[by * block_M + i, bx * block_N + j]",
           "A[bx * block_M + i, by * block_N + j]", _OOB + "|" + _WHERE),
    # 03.5 blocks that race for one element
    Mutant("03.5", "last column dropped", "for j in T.serial(N)", "for j in T.serial(N - 1)", r"wrong"),
    Mutant("03.5", "sum starts at 1", "total[0] = 0.0", "total[0] = 1.0", r"wrong"),
    Mutant("03.5", "rows of another block", "total[0] += A[i, j]", "total[0] += A[j % M, j]", r"wrong"),
    Mutant("03.5", "stored at row 0", "Out[i] = total[0]", "Out[0] = total[0]", r"never written|wrong|race"),
    Mutant("03.5", "accumulated into Out", "Out[i] = total[0]", "Out[i] = Out[i] + total[0]",
           r"never written|wrong|poison|NaN|race"),
)

EQUIVALENT = {
    ("03.4", "sum starts at 1 (T.fill(l, 1.0))"): "the first rescale multiplies l by exp(-inf - m) = 0: the "
    "starting value of l never reaches the result",
    ("03.4", "max starts at 0 (T.fill(m, 0.0))"): "softmax does not depend on the value subtracted, as long as "
    "both passes subtract the same m (the lessons' inputs are far from overflow)",
    ("08.1", "max starts at 0 (T.fill(row_max, 0))"): "the online softmax is exact for any reference value as "
    "long as acc and row_sum are rescaled with it; a start at 0 only underflows rows whose every score is below "
    "about -87, which the checker's inputs are not",
    ("04.2", "num_stages=3 -> num_stages=2"): "the pipeline's depth is a schedule, not a result (graded by the "
    "lowering where 04.2 asks for one)",
    ("08.4", "T.exp2(x * scale - m * scale) -> T.exp2((x - m) * scale)"): "the same value, one multiplication "
    "fewer",
    ("08.4", "threads=128 -> threads=256"): "a launch shape, not a result: the fragments are spread over more "
    "threads and the tile program computes the same O",
}


_GEMM = r"wrong|short|slice|initiali|never|poison|bounds"


def _gemm_mutants(ex: str, acc: str, a_shared: str, store_from: str, k_loop: str) -> tuple[Mutant, ...]:
    """The five slips of a GEMM written for a GPU (graded by its results on the CPU)."""
    return (
        Mutant(ex, "T.clear dropped", f"T.clear({acc})\n", "\n", r"initiali|poison|wrong"),
        Mutant(ex, "K loop one short", k_loop, k_loop.replace("T.ceildiv(K, block_K)", "T.ceildiv(K, block_K) - 1"),
               r"one slice short"),
        Mutant(ex, "swapped bx/by in A's load", f"A[by * block_M, k * block_K], {a_shared}",
               f"A[bx * block_M, k * block_K], {a_shared}", _GEMM),
        Mutant(ex, "store at swapped bx/by", f"{store_from}, C[by * block_M, bx * block_N]",
               f"{store_from}, C[bx * block_M, by * block_N]", _GEMM),
        Mutant(ex, "block_M/block_N swapped in the store", f"{store_from}, C[by * block_M, bx * block_N]",
               f"{store_from}, C[by * block_N, bx * block_M]", _GEMM),
    )


_PIPE = "T.Pipelined(T.ceildiv(K, block_K)"

MUTANTS += (
    *_gemm_mutants("04.2", "C_local", "A_shared", "C_local", _PIPE),
    *_gemm_mutants("05.3", "C_local", "A_shared", "C_shared", _PIPE),
    *_gemm_mutants("05.5", "C_local", "A_shared", "C_shared", _PIPE),
    *_gemm_mutants("07.4", "C_f", "A_s", "C_f", _PIPE),
    *_gemm_mutants("09.3", "C_f", "A_s", "C_f", _PIPE),
    *_gemm_mutants("11.3", "C_t", "A_t", "C_t", _PIPE),
    Mutant("05.3", "epilogue's copy into C_shared dropped", "            T.copy(C_local, C_shared)\n", "",
           r"initiali|poison|wrong"),
    Mutant("05.5", "only A switched to cp.async", "T.copy(B[k * block_K, bx * block_N], B_shared, disable_tma=True)",
           "T.copy(B[k * block_K, bx * block_N], B_shared)", r"^B's copy is still a TMA"),
    Mutant("07.4", "B's copy not TMA", "T.copy(B[k * block_K, bx * block_N], B_s)",
           "T.copy(B[k * block_K, bx * block_N], B_s, disable_tma=True)", r"not warp-specialised.*B_s is loaded"),
    Mutant("07.4", "one stage", "num_stages=3", "num_stages=1", r"pipeline of one stage"),
    Mutant("07.4", "B filled by threads", "T.copy(B[k * block_K, bx * block_N], B_s)",
           "for i, j in T.Parallel(block_K, block_N):\n                    B_s[i, j] = B[k * block_K + i, "
           "bx * block_N + j]", r"not warp-specialised.*B_s is loaded"),
    Mutant("09.3", "B loaded by the row block", "B[bx * block_N, k * block_K]", "B[by * block_N, k * block_K]", _GEMM),
    # 08.4 the same body for Hopper (its results on the CPU, then how it lowered)
    *(Mutant("08.4", *m) for m in (
        ("rescale of acc dropped", _ACC_RESCALE, "acc[i, j] = acc[i, j]", r"acc is not rescaled"),
        ("rescale of row_sum dropped", _SUM_RESCALE, "row_sum[i] = row_sum[i]", r"row_sum is not rescaled"),
        ("final division dropped", "acc[i, j] = acc[i, j] / row_sum[i]", "acc[i, j] = acc[i, j]", r"never divided"),
        ("key loop one short", "else T.ceildiv(seq, block_N)", "else T.ceildiv(seq, block_N) - 1",
         r"one block short"),
        ("causal mask hides the diagonal", _MASK, _MASK.replace(" > ", " >= "), r"hides the diagonal"),
        ("values of the wrong block", "V[kb * block_N, 0]", "V[kb * block_M, 0]", r"O is wrong"),
        ("max not carried across key blocks", "clear=False", "clear=True", r"NaN or infinite.*carried"),
        ("P staged in shared memory", "P = T.alloc_fragment", "P = T.alloc_shared", r"registers"),
        ("loop not pipelined", "T.Pipelined(steps, num_stages=num_stages)", "T.serial(steps)", r"pipelined|TMA"),
    )),
)


# The GEMMs graded for a GPU whose results are graded by the same function as 04.2's
# (``gemm_on_cpu``): their mutants run where $TILELAB_ALL_MUTANTS is set (``make test-mutants``);
# 04.2's always run. Of split-K's and flash attention's (each a compile and several launches on the
# CPU), the ones in QUICK run in ``make test``, the rest with $TILELAB_ALL_MUTANTS.
SHARED_RESULTS = ("05.3", "05.5", "07.4", "09.3", "11.3")
QUICK = {("08.1", "max not carried across key blocks"), ("08.1", "causal loop past the diagonal"),
         ("08.4", "P staged in shared memory"), ("04.4", "stored, not added"), ("04.4", "read-add-write, not atomic"),
         ("04.4", "every split adds the first slices")}
ALL = bool(os.environ.get("TILELAB_ALL_MUTANTS"))


def first_of(lesson: str) -> Mutant:
    """The one mutant of ``lesson`` (e.g. "04") that ``make test`` runs: the first of its first
    exercise that runs there (its first quick one where it has QUICK ones). A checker of each lesson
    is shown to catch a mutant and name it there (every kernel exercise's solution passes there too:
    test_workshop.py), every mutant of every exercise where $TILELAB_ALL_MUTANTS is set (``make
    test-mutants``)."""
    mine = [m for m in MUTANTS if m.exercise.split(".")[0] == lesson and m.exercise not in SHARED_RESULTS
            and (m.exercise not in ("04.4", "08.1", "08.4") or (m.exercise, m.name) in QUICK)]
    return min(mine, key=lambda m: tuple(int(x) for x in m.exercise.split(".")))


def assert_caught(mutant: Mutant) -> None:
    """The mutant's check fails, with a message that says what ``mutant.says``."""
    import pytest

    from tilelab import workshop
    from tilelab.workshop import _answers, _core

    if mutant.exercise in SHARED_RESULTS and not ALL:
        pytest.skip("graded by the same results function as 04.2's mutants: TILELAB_ALL_MUTANTS=1 (make "
                    "test-mutants) runs it")
    if mutant.exercise in ("04.4", "08.1", "08.4") and (mutant.exercise, mutant.name) not in QUICK and not ALL:
        pytest.skip("past the exercise's quick mutants: TILELAB_ALL_MUTANTS=1 (make test-mutants) runs it")
    if not ALL and mutant is not first_of(mutant.exercise.split(".")[0]):
        pytest.skip("past the lesson's first mutant: TILELAB_ALL_MUTANTS=1 (make test-mutants) runs it")
    ex = _core.get(mutant.exercise)
    answer = _answers.evaluate(ex, ex.solution.replace(mutant.old, mutant.new))
    result = workshop.check(ex.id, answer)
    assert result.status == "failed", f"{ex.id} {mutant.name} passed: {result.message}"
    assert re.search(mutant.says, result.message, flags=re.IGNORECASE), (
        f"{ex.id} {mutant.name}: the message does not say /{mutant.says}/: {result.message}")
