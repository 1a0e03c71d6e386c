"""Small kernels of our own, each the smallest form of a construct that upstream TileLang kernels
use and that the CPU path (``tilelab.run(kernel, device="cpu")``) once failed on: the regression
cases of ``tests/test_emulate_coverage.py`` (written for these tests, not taken from anywhere)."""

from __future__ import annotations

from typing import Any

import tilelang
import tilelang.language as T


@tilelang.jit
def scaled_copy_empty_output(A, block_M: int = 32, block_N: int = 32, scale: float = 2.0):
    """An eager @tilelang.jit kernel whose output is ``T.empty``: its PrimFunc carries the output's
    position as an attribute (``tilelang_out_idx``) rather than the caller's ``out_idx``."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float16)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        tile = T.alloc_fragment((block_M, block_N), T.float32)
        for i, j in T.Parallel(block_M, block_N):
            tile[i, j] = T.cast(A[by * block_M + i, bx * block_N + j], T.float32) * scale
        T.copy(tile, B[by * block_M, bx * block_N])
    return B


VIEW_M, VIEW_N, VIEW_BLOCK = 64, 128, 32  # (M, N) fp16 tensors seen as (M * N // 64, 64) rows
VIEW_ROWS = VIEW_M * VIEW_N // 64


@T.prim_func
def reshaped_view_copy(X: T.Tensor((VIEW_M, VIEW_N), T.float16), Y: T.Tensor((VIEW_M, VIEW_N), T.float16)):
    """Reads and writes its fp16 tensors through views declared over their data
    (``T.Tensor(shape, dtype, X.data)``): Y = X + 1, row block by row block of the view."""
    with T.Kernel(T.ceildiv(VIEW_ROWS, VIEW_BLOCK), threads=128) as bx:
        X_rows = T.Tensor((VIEW_ROWS, 64), T.float16, X.data)
        Y_rows = T.Tensor((VIEW_ROWS, 64), T.float16, Y.data)
        tile = T.alloc_shared((VIEW_BLOCK, 64), T.float16)
        T.copy(X_rows[bx * VIEW_BLOCK, 0], tile)
        for i, j in T.Parallel(VIEW_BLOCK, 64):
            tile[i, j] = tile[i, j] + T.float16(1)
        T.copy(tile, Y_rows[bx * VIEW_BLOCK, 0])


@T.prim_func
def masked_tiles(X: T.Tensor((64, 64), T.float32), Keep: T.Tensor((2, 2), T.bool),
                 Y: T.Tensor((64, 64), T.float32)):
    """Y's 32 x 32 tile (by, bx) is X's where the bool mask Keep says so, else zero (a block mask,
    as block-sparse kernels take)."""
    with T.Kernel(2, 2, threads=128) as (bx, by):
        tile = T.alloc_fragment((32, 32), T.float32)
        T.clear(tile)
        if Keep[by, bx]:
            T.copy(X[by * 32, bx * 32], tile)
        T.copy(tile, Y[by * 32, bx * 32])


@T.prim_func
def tf32_gemm(A: T.Tensor((128, 64), T.float32), B: T.Tensor((64, 128), T.tfloat32),
              C: T.Tensor((128, 128), T.float32)):
    """C = A B with the operands staged as tfloat32 tiles (what Hopper's tensor cores multiply); B
    is a tfloat32 tensor (float32 storage: tilelab builds it as a torch float32 tensor)."""
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), T.tfloat32)
        B_s = T.alloc_shared((32, 64), T.tfloat32)
        C_l = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_l)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 64, bx * 64])


@T.prim_func
def fp8_quantise(X: T.Tensor((64, 128), T.float32), Y: T.Tensor((64, 128), T.float8_e4m3fn)):
    """Y = X / 4 rounded to float8 e4m3, a 32 x 64 tile per block (an fp8 output)."""
    with T.Kernel(2, 2, threads=128) as (bx, by):
        tile = T.alloc_fragment((32, 64), T.float32)
        T.copy(X[by * 32, bx * 64], tile)
        for i, j in T.Parallel(32, 64):
            Y[by * 32 + i, bx * 64 + j] = T.cast(tile[i, j] * 0.25, T.float8_e4m3fn)


@T.prim_func
def split_then_combine(X: T.Tensor((4, 256), T.float32), Partial: T.Tensor((4, 4), T.float32),
                       Out: T.Tensor((4,), T.float32)):
    """Two kernels in one program: the first sums each quarter of every row of X into Partial
    (a block per quarter), the second adds the quarters (a block per row), as split-K and flash
    decoding's split and combine kernels do."""
    with T.Kernel(4, threads=128) as bs:
        part = T.alloc_fragment((4, 64), T.float32)
        sums = T.alloc_fragment((4,), T.float32)
        T.copy(X[0, bs * 64], part)
        T.reduce_sum(part, sums, dim=1)
        for r in T.Parallel(4):
            Partial[r, bs] = sums[r]
    with T.Kernel(4, threads=128) as br:
        acc = T.alloc_fragment((1,), T.float32)
        T.clear(acc)
        for s in T.serial(4):
            acc[0] = acc[0] + Partial[br, s]
        Out[br] = acc[0]


SCRATCH_ROWS, SCRATCH_SPLIT, SCRATCH_COLS = 128, 4, 4096  # the scratch: 8 MiB in float32, past a C stack


@T.prim_func
def split_through_scratch(X: T.Tensor((SCRATCH_ROWS, SCRATCH_SPLIT * SCRATCH_COLS), T.float16),
                          Out: T.Tensor((SCRATCH_ROWS, SCRATCH_COLS), T.float32)):
    """split_then_combine's two kernels with the partial results in a T.alloc_global scratch buffer
    (as flash decoding keeps them) instead of a tensor the caller passes: the first kernel copies
    each quarter of every row into it (a block per quarter), the second adds the quarters up."""
    Partial = T.alloc_global((SCRATCH_ROWS, SCRATCH_SPLIT, SCRATCH_COLS), T.float16)
    with T.Kernel(SCRATCH_SPLIT, threads=128) as bs:
        for r, j in T.Parallel(SCRATCH_ROWS, SCRATCH_COLS):
            Partial[r, bs, j] = X[r, bs * SCRATCH_COLS + j]
    with T.Kernel(SCRATCH_ROWS, threads=128) as br:
        for j in T.Parallel(SCRATCH_COLS):
            Out[br, j] = Partial[br, 0, j] + Partial[br, 1, j] + Partial[br, 2, j] + Partial[br, 3, j]

@T.prim_func
def pointer_table_copy(Ptrs: T.Tensor((2,), T.int64), Y: T.Tensor((2, 64), T.float16)):
    """Row b of Y copied from the float16 tensor whose address is Ptrs[b] (a table of pointers, as
    grouped GEMMs over separately allocated tensors take)."""
    with T.Kernel(2, threads=64) as b:
        X = T.make_tensor(Ptrs[b], (64,), T.float16)
        for i in T.Parallel(64):
            Y[b, i] = X[i]


@T.prim_func
def mask_in_a_fragment(X: T.Tensor((64, 128), T.float32), Keep: T.Tensor((2, 8), T.bool),
                       Y: T.Tensor((64, 128), T.float32)):
    """Y's row of 16-wide tiles k is X's where Keep[by, k] says so, else zero; the block's row of
    the bool mask is first copied into a bool fragment (a vectorised copy of bools)."""
    with T.Kernel(1, 2, threads=128) as (bx, by):
        keep = T.alloc_fragment((8,), T.bool)
        tile = T.alloc_fragment((32, 16), T.float32)
        T.copy(Keep[by, :], keep)
        for k in T.serial(8):
            T.clear(tile)
            if keep[k]:
                T.copy(X[by * 32, k * 16], tile)
            T.copy(tile, Y[by * 32, k * 16])


def fp4_dequant_gemm(M=64, N=64, K=64, block=32, bug=None):
    """C = A @ W.T where W [N, K] is float4 e2m1 packed two to a byte (W_packed [N, K // 2], the
    element of even k in the low nibble), dequantised by building each float16's bits and
    T.reinterpret-ing them. bug "nibbles": the two halves of a byte swapped."""
    low_first = bug != "nibbles"

    def to_half(code):
        sign = (code >> 3) & 1
        exp = (code >> 1) & 3
        man = code & 1
        normal = (sign << 15) | ((exp + 14) << 10) | (man << 9)
        tiny = (sign << 15) | (man * 0x3800)  # e == 0: 0 or 0.5
        return T.reinterpret(T.if_then_else(exp == 0, tiny, normal).astype(T.uint16), T.float16)

    @T.prim_func
    def fp4_gemm(A: T.Tensor((M, K), T.float16), W_packed: T.Tensor((N, K // 2), T.uint8),
                 C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            A_s = T.alloc_shared((block, K), T.float16)
            W_s = T.alloc_shared((block, K), T.float16)
            C_f = T.alloc_fragment((block, block), T.float32)
            T.copy(A[by * block, 0], A_s)
            for n, k in T.Parallel(block, K):
                byte = W_packed[bx * block + n, k // 2].astype(T.uint32)
                shift = (k % 2) * 4 if low_first else (1 - k % 2) * 4
                W_s[n, k] = to_half((byte >> shift) & 15)
            T.clear(C_f)
            T.gemm(A_s, W_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block, bx * block])

    return fp4_gemm


GATHER_ROWS, GATHER_DIM, GATHER_TABLE = 64, 32, 96


@T.prim_func
def gather_through_an_index_of_an_index(Table: T.Tensor((GATHER_TABLE, GATHER_DIM), T.float32),
                                        Token: T.Tensor((GATHER_TABLE,), T.int32),
                                        Order: T.Tensor((GATHER_ROWS,), T.int32),
                                        Y: T.Tensor((GATHER_ROWS, GATHER_DIM), T.float32)):
    """Y[i] = Table[Token[Order[i]]]: the row is read through two loaded indices, so the checked
    load of Token sits inside Table's index, whose bound needs 64 bits (TileLang widens every
    integer of that index, the check's arguments too)."""
    with T.Kernel(GATHER_ROWS // 16, threads=128) as bx:
        for i, j in T.Parallel(16, GATHER_DIM):
            Y[bx * 16 + i, j] = Table[Token[Order[bx * 16 + i]], j]


SPARSE_M, SPARSE_N, SPARSE_K, SPARSE_BLOCK = 64, 64, 128, 32


@T.prim_func
def sparse_24_gemm(A: T.Tensor((SPARSE_M, SPARSE_K // 2), T.float16),
                   Meta: T.Tensor((SPARSE_M, SPARSE_K // 16), T.int16),
                   B: T.Tensor((SPARSE_K, SPARSE_N), T.float16), C: T.Tensor((SPARSE_M, SPARSE_N), T.float32)):
    """C = dense(A, Meta) @ B with A in 2:4 structured sparsity: two stored values of every four of
    K, their positions in 4-bit groups of Meta (four groups per int16, the first in the low bits)."""
    with T.Kernel(SPARSE_N // SPARSE_BLOCK, SPARSE_M // SPARSE_BLOCK, threads=128) as (bx, by):
        a_tile = T.alloc_shared((SPARSE_BLOCK, SPARSE_BLOCK // 2), T.float16)
        m_tile = T.alloc_shared((SPARSE_BLOCK, SPARSE_BLOCK // 16), T.int16)
        b_tile = T.alloc_shared((SPARSE_BLOCK, SPARSE_BLOCK), T.float16)
        acc = T.alloc_fragment((SPARSE_BLOCK, SPARSE_BLOCK), T.float32)
        T.clear(acc)
        for k in T.Pipelined(SPARSE_K // SPARSE_BLOCK, num_stages=2):
            T.copy(A[by * SPARSE_BLOCK, k * SPARSE_BLOCK // 2], a_tile)
            T.copy(Meta[by * SPARSE_BLOCK, k * SPARSE_BLOCK // 16], m_tile)
            T.copy(B[k * SPARSE_BLOCK, bx * SPARSE_BLOCK], b_tile)
            T.gemm_sp(a_tile, m_tile, b_tile, acc)
        T.copy(acc, C[by * SPARSE_BLOCK, bx * SPARSE_BLOCK])


@T.prim_func
def scale_without_register_hints(X: T.Tensor((128, 64), T.float32), Y: T.Tensor((128, 64), T.float32)):
    """Y = 3 X, a kernel that turns off TileLang's register reallocation between warp groups (a hint
    of how many registers each keeps, with no meaning on the CPU)."""
    with T.Kernel(4, threads=128) as bx:
        tile = T.alloc_shared((32, 64), T.float32)
        T.disable_warp_group_reg_alloc()
        T.copy(X[bx * 32, 0], tile)
        for i, j in T.Parallel(32, 64):
            tile[i, j] = tile[i, j] * 3.0
        T.copy(tile, Y[bx * 32, 0])


@T.prim_func
def zero_over_zero(X: T.Tensor((64,), T.float32), H: T.Tensor((64,), T.float16), G: T.Tensor((64,), T.bfloat16),
                   E: T.Tensor((64,), T.float8_e4m3fn)):
    """Every output element is X / X: NaN where X is 0 (negative on x86), X's sign times one elsewhere."""
    with T.Kernel(2, threads=32) as bx:
        tile = T.alloc_fragment((32,), T.float32)
        T.copy(X[bx * 32], tile)
        for i in T.Parallel(32):
            tile[i] = tile[i] / tile[i]
        T.copy(tile, H[bx * 32])
        T.copy(tile, G[bx * 32])
        T.copy(tile, E[bx * 32])


def row_reducers(m: int = 8, k: int = 64, block_k: int = 16, short: bool = False, no_init: bool = False
                 ) -> T.PrimFunc:
    """S = the row sums of A plus 1.5 (a sum reducer with an init value), M = the row maxima (a max
    reducer from its identity), updated tile by tile inside a T.Parallel loop and finalized into
    fragments. ``short``: the loop over the tiles one short (a wrong kernel); ``no_init``: the sum
    reducer never initialised (a kernel TileLang rejects)."""

    @T.prim_func
    def main(A: T.Tensor((m, k), T.float32), S: T.Tensor((m,), T.float32), M: T.Tensor((m,), T.float32)):
        with T.Kernel(1, threads=64):
            total = T.alloc_reducer((m,), T.float32, op="sum")
            top = T.alloc_reducer((m,), T.float32, op="max")
            if not no_init:
                T.reducer_init(total, 1.5)
            T.reducer_init(top)
            tile = T.alloc_shared((m, block_k), T.float32)
            for kt in T.serial(k // block_k - (1 if short else 0)):
                T.copy(A[0, kt * block_k], tile)
                for i, j in T.Parallel(m, block_k):
                    T.reducer_update(total[i], tile[i, j])
                    T.reducer_update(top[i], tile[i, j])
            sums = T.alloc_fragment((m,), T.float32)
            maxima = T.alloc_fragment((m,), T.float32)
            T.finalize_reducer(total, sums)
            T.finalize_reducer(top, maxima)
            T.copy(sums, S)
            T.copy(maxima, M)

    return main


def clustered_scale(n: int = 256, block: int = 64, cluster_sync: bool = False) -> T.PrimFunc:
    """Y = 3 * X, blocks of ``block`` elements launched in clusters of two that share nothing (a
    tile in each block's own shared memory); ``cluster_sync``: the blocks of a cluster wait for each
    other after their loads (an operation across the cluster)."""

    @T.prim_func
    def plain(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.ClusterKernel(n // block, threads=64, cluster_dims=2) as bx:
            tile = T.alloc_shared((block,), T.float32)
            T.copy(X[bx * block:(bx + 1) * block], tile)
            for i in T.Parallel(block):
                Y[bx * block + i] = tile[i] * 3

    @T.prim_func
    def synced(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.ClusterKernel(n // block, threads=64, cluster_dims=2) as bx:
            tile = T.alloc_shared((block,), T.float32)
            T.copy(X[bx * block:(bx + 1) * block], tile)
            T.cluster_sync()
            for i in T.Parallel(block):
                Y[bx * block + i] = tile[i] * 3

    return synced if cluster_sync else plain


@T.macro
def warpgroup_fence():
    """A helper in the manner of TileLang's intrinsic emitters: the warp group's WGMMA fences by hand."""
    T.warpgroup_arrive()
    T.warpgroup_commit_batch()
    T.warpgroup_wait(0)


def warpgroup_fence_by_helper(n: int = 64) -> T.PrimFunc:
    """Y = 2 X with the warp group's WGMMA fences written by a helper (no T.warpgroup_* in the kernel's
    own lines): instructions of a warp group with no meaning of their own at the level of tiles."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tile = T.alloc_shared((n,), T.float32)
            T.copy(X, tile)
            warpgroup_fence()
            for i in T.Parallel(n):
                Y[i] = tile[i] * 2

    return main


def column_reduce_batched(batch: int = 2, rows: int = 8, cols: int = 16) -> T.PrimFunc:
    """S = the column sums and M = the column maxima of each block's tile of X (two 3-D tiles reduced
    along their middle axis, each reduce from its own fragment), with ``batch`` outputs per AllReduce
    on a GPU (TileLang's batched reduce, which its CPU lowering rejects): the same sums and maxima
    whatever ``batch`` is."""

    @T.prim_func
    def main(X: T.Tensor((4, rows, cols), T.float32), S: T.Tensor((4, cols), T.float32),
             M: T.Tensor((4, cols), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            staged = T.alloc_shared((2, rows, cols), T.float32)
            for_sum = T.alloc_fragment((2, rows, cols), T.float32)
            for_max = T.alloc_fragment((2, rows, cols), T.float32)
            sums = T.alloc_fragment((2, cols), T.float32)
            top = T.alloc_fragment((2, cols), T.float32)
            T.copy(X[bx * 2, 0, 0], staged)
            T.copy(staged, for_sum)
            T.copy(staged, for_max)
            T.reduce_sum(for_sum, sums, dim=1, batch=batch)
            T.reduce_max(for_max, top, dim=1, batch=batch)
            T.copy(sums, S[bx * 2, 0])
            T.copy(top, M[bx * 2, 0])

    return main


def nan_propagating_rows(nan_propagate: bool = True, rows: int = 4, cols: int = 32,
                         dtype: str = T.float16) -> T.PrimFunc:
    """Per row of X (float16 or bfloat16): Hi = its maximum, Lo = its minimum (folded into the -1 Lo
    held: clear=False), Big = its largest magnitude, each reduce with ``nan_propagate`` (the GPU's
    __hmax_nan / __hmin_nan combine: a row holding a NaN gives NaN)."""

    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Hi: T.Tensor((rows,), dtype),
             Lo: T.Tensor((rows,), dtype), Big: T.Tensor((rows,), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((rows, cols), dtype)
            hi = T.alloc_fragment((rows,), dtype)
            lo = T.alloc_fragment((rows,), dtype)
            big = T.alloc_fragment((rows,), dtype)
            T.copy(X, tile)
            for i in T.Parallel(rows):
                lo[i] = -1.0
            T.reduce_max(tile, hi, dim=1, nan_propagate=nan_propagate)
            T.reduce_min(tile, lo, dim=1, clear=False, nan_propagate=nan_propagate)
            T.reduce_absmax(tile, big, dim=1, nan_propagate=nan_propagate)
            T.copy(hi, Hi)
            T.copy(lo, Lo)
            T.copy(big, Big)

    return main


NAN_ROWS, NAN_COLS = 8, 32


def nan_skipping_rows(dtype: str = T.float32) -> T.PrimFunc:
    """Per row of X: Hi = its maximum, Lo = its minimum folded into the -1 Lo held (clear=False),
    Low = its minimum, Big = its largest magnitude, each by TileLang's default reduce (no
    ``nan_propagate``), and M = T.max(x, its mirror in the row) + T.min(its mirror, x): on a GPU
    every one of these maxima and minima is PTX's max / min (fmaxf, __hmax), which skip a NaN."""
    rows, cols = NAN_ROWS, NAN_COLS

    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Hi: T.Tensor((rows,), dtype), Lo: T.Tensor((rows,), dtype),
             Low: T.Tensor((rows,), dtype), Big: T.Tensor((rows,), dtype), M: T.Tensor((rows, cols), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((rows, cols), dtype)
            hi = T.alloc_fragment((rows,), dtype)
            lo = T.alloc_fragment((rows,), dtype)
            low = T.alloc_fragment((rows,), dtype)
            big = T.alloc_fragment((rows,), dtype)
            T.copy(X, tile)
            for i in T.Parallel(rows):
                lo[i] = -1.0
            T.reduce_max(tile, hi, dim=1)
            T.reduce_min(tile, lo, dim=1, clear=False)
            T.reduce_min(tile, low, dim=1)
            T.reduce_absmax(tile, big, dim=1)
            for i, j in T.Parallel(rows, cols):
                M[i, j] = T.max(X[i, j], X[i, cols - 1 - j]) + T.min(X[i, cols - 1 - j], X[i, j])
            T.copy(hi, Hi)
            T.copy(lo, Lo)
            T.copy(low, Low)
            T.copy(big, Big)

    return main


def nan_rows_input(dtype: str = "float32", seed: int = 0) -> Any:
    """X for :func:`nan_skipping_rows`: a NaN in the first column of row 0, the middle of row 1, the
    last column of row 2, all of row 3, the first and last columns of row 4; rows 5-7 have none and
    hold a -0 and a +0 (columns 3 and 20) among negative values (rows 5, 6: the maximum is a zero)
    or positive ones (row 7: the minimum is)."""
    import torch

    x = torch.randn(NAN_ROWS, NAN_COLS, generator=torch.Generator().manual_seed(seed)) * 4
    nan = float("nan")
    x[0, 0], x[1, NAN_COLS // 2 - 1], x[2, NAN_COLS - 1], x[4, 0], x[4, NAN_COLS - 1] = nan, nan, nan, nan, nan
    x[3] = nan
    x[5:7], x[7] = -x[5:7].abs() - 0.5, x[7].abs() + 0.5
    x[5, 3], x[5, 20], x[6, 3], x[6, 20], x[7, 3], x[7, 20] = -0.0, 0.0, 0.0, -0.0, 0.0, -0.0
    return x.to(getattr(torch, dtype))


def nan_skipping_reference(x: Any) -> dict[str, Any]:
    """The outputs of :func:`nan_skipping_rows` by the GPU's rule (the PTX ISA's max and min), in
    numpy: a NaN operand gives the other (``np.fmax``), and of two zeros -0 < +0; a reduce starts
    from TileLang's start value (-inf for reduce_max, +inf for reduce_min, 0 for reduce_absmax) or,
    with clear=False, from what the output held (-1 for Lo); computed in float64 and rounded to X's
    dtype."""
    import numpy as np
    import torch

    v = x.double().numpy()
    rows, cols = v.shape

    def gmax(a: Any, b: Any) -> Any:
        return np.where(a == b, np.where(np.signbit(a), b, a), np.fmax(a, b))

    def gmin(a: Any, b: Any) -> Any:
        return np.where(a == b, np.where(np.signbit(a), a, b), np.fmin(a, b))

    def reduce(combine: Any, start: float, values: Any) -> Any:
        acc = np.full(rows, start)
        for c in range(cols):
            acc = combine(acc, values[:, c])
        return acc

    mirror = v[:, ::-1]
    want = {"Hi": reduce(gmax, -np.inf, v), "Lo": reduce(gmin, -1.0, v), "Low": reduce(gmin, np.inf, v),
            "Big": reduce(gmax, 0.0, gmax(v, -v)), "M": gmax(v, mirror) + gmin(mirror, v)}
    return {k: torch.from_numpy(np.ascontiguousarray(a)).to(x.dtype) for k, a in want.items()}


def tile_atomic_add_by_tma(use_tma: bool = True, n: int = 8, rounds: int = 3) -> T.PrimFunc:
    """Out += (bx + 1) * 0.5 everywhere, from each of 4 blocks, ``rounds`` times: a shared tile added
    to the whole output by ``T.atomic_add(..., use_tma=...)`` (one bulk reduction copy on a GPU)."""

    @T.prim_func
    def main(Out: T.Tensor((n, n), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            tile = T.alloc_shared((n, n), T.float32)
            T.fill(tile, T.Cast(T.float32, bx + 1) * 0.5)
            for _ in T.serial(rounds):
                T.atomic_add(Out, tile, use_tma=use_tma)

    return main


def thread_loops_of_two_extents(threads: int = 128, fewer: int = 64) -> T.PrimFunc:
    """T.thread_binding loops over threadIdx.x of two extents in one block, no T.Kernel: B[t] = 2 A[t]
    over ``threads`` threads, then C[t] = A[t] + 1 over ``fewer``. TileLang's CUDA makes one thread
    index of both and launches the block with the last extent (``__launch_bounds__(64)``), so B's
    elements past ``fewer`` are never written on the GPU."""

    @T.prim_func
    def main(A: T.Tensor((threads,), T.float32), B: T.Tensor((threads,), T.float32),
             C: T.Tensor((threads,), T.float32)):
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(threads, thread="threadIdx.x"):
                B[tx] = A[tx] * 2.0
            for tx in T.thread_binding(fewer, thread="threadIdx.x"):
                C[tx] = A[tx] + 1.0

    return main


def thread_loop_from_an_offset(start: int = 32, threads: int = 32, axis: str = "threadIdx.x") -> T.PrimFunc:
    """B[i] = 2 A[i] by a T.thread_binding loop over ``axis`` from ``start`` (no T.Kernel): TileLang's CUDA
    binds i to threadIdx.x (blockIdx.x) and drops the start (``B[threadIdx.x] = ...`` over ``threads``),
    so the GPU writes B[0:threads], not B[start:start + threads]."""

    @T.prim_func
    def main(A: T.Tensor((start + threads,), T.float32), B: T.Tensor((start + threads,), T.float32)):
        if axis == "threadIdx.x":
            for _bx in T.thread_binding(1, thread="blockIdx.x"):
                for tx in T.thread_binding(start, start + threads, thread="threadIdx.x"):
                    B[tx] = A[tx] * 2.0
        else:
            for bx in T.thread_binding(start, start + threads, thread="blockIdx.x"):
                for _tx in T.thread_binding(1, thread="threadIdx.x"):
                    B[bx] = A[bx] * 2.0

    return main


def thread_loops_without_kernel(blocks: int = 3, threads: int = 32) -> T.PrimFunc:
    """A kernel written with T.thread_binding loops and no T.Kernel: B[b, t] = 2 A[b, t] + 1 by
    thread t of block b, and C[b, j] = b, C[b, j + 1] = j for even j, written by every thread alike (an
    unroll with a step)."""

    @T.prim_func
    def main(A: T.Tensor((blocks, threads), T.float32), B: T.Tensor((blocks, threads), T.float32),
             C: T.Tensor((blocks, 8), T.float32)):
        for b in T.thread_binding(blocks, thread="blockIdx.x"):
            for t in T.thread_binding(threads, thread="threadIdx.x"):
                B[b, t] = A[b, t] * 2.0 + 1.0
                for j in T.unroll(0, 8, step=2):
                    C[b, j] = T.Cast(T.float32, b)
                    C[b, j + 1] = T.Cast(T.float32, j)

    return main


def thread_loops_sized_at_launch() -> T.PrimFunc:
    """T.thread_binding loops and no T.Kernel, the threads' loop of n threads (a size of B): the
    block's thread count known only at launch."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((2, n), T.float32), B: T.Tensor((2, n), T.float32)):
        for b in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(n, thread="threadIdx.x"):
                B[b, t] = A[b, t] * 2.0

    return main
