"""Kernels written for a Hopper GPU, and wrong variants of each, for the CPU path
(``tilelab.run(kernel, device="cpu")``). Every factory takes ``bug=`` naming the mistake to plant
(None: the right kernel), so a test runs the right one and each wrong one on the same inputs."""


import tilelang.language as T


def gemm(M=192, N=160, K=96, block_M=64, block_N=32, block_K=32, dtype=T.float16, accum=T.float32,
         out_dtype=None, trans_b=False, threads=256, stages=3, bug=None):
    """C = A @ B (or A @ B.T with ``trans_b``), tiles in shared memory and a fragment accumulator.
    bugs: "no_clear" (T.clear dropped), "k_short" (the K loop one tile short), "swap_blocks"
    (bx and by swapped in the loads)."""
    out_dtype = out_dtype or dtype
    b_shape = (N, K) if trans_b else (K, N)
    b_tile = (block_N, block_K) if trans_b else (block_K, block_N)
    k_tiles = T.ceildiv(K, block_K) - (1 if bug == "k_short" else 0)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            if bug != "no_clear":
                T.clear(C_f)
            for k in T.Pipelined(k_tiles, num_stages=stages):
                if bug == "swap_blocks":
                    T.copy(A[bx * block_M, k * block_K], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=trans_b)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return gemm


def attention(batch=1, heads=2, seq=128, dim=64, block_M=64, block_N=32, causal=False, threads=256, bug=None):
    """Flash attention forward (online softmax in base 2), Q, K, V [batch, seq, heads, dim] in
    float16. bugs: "no_rescale" (the running output is not rescaled when the maximum grows),
    "no_clear" (the output accumulator starts from whatever it held)."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = [batch, seq, heads, dim]
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):  # noqa: E741 (the output of attention is O)
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), accum)
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            alpha = T.alloc_fragment((block_M,), accum)
            row_sum = T.alloc_fragment((block_M,), accum)
            total = T.alloc_fragment((block_M,), accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            if bug != "no_clear":
                T.fill(acc, 0)
            T.fill(total, 0)
            T.fill(m, -T.infinity(accum))
            steps = T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq, block_N)
            for k in T.Pipelined(steps, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                else:
                    T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    total[i] = total[i] * alpha[i] + row_sum[i]
                if bug != "no_rescale":
                    for i, j in T.Parallel(block_M, dim):
                        acc[i, j] *= alpha[i]
                T.copy(S, P)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
                T.gemm(P, V_s, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= total[i]
            T.copy(acc, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return attention


def row_reduce(M=200, N=96, block_M=32, op="max", threads=128, bug=None):
    """Y[i] = max (or sum) over X[i, :], a block of rows per block, the reduction over a fragment.
    bugs: "swap_reduction" (sum where max is meant, or the reverse)."""
    use = {"max": "sum", "sum": "max"}[op] if bug == "swap_reduction" else op

    @T.prim_func
    def row_reduce(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_f = T.alloc_fragment((block_M, N), T.float32)
            Y_f = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], X_f)
            if use == "max":
                T.reduce_max(X_f, Y_f, dim=1)
            else:
                T.reduce_sum(X_f, Y_f, dim=1)
            T.copy(Y_f, Y[bx * block_M])

    return row_reduce


def scale_shift(N=1000, block=256, threads=128, bug=None):
    """Y = 2 * X + 1 over a vector whose length is not a multiple of the block (a ragged edge),
    through a shared tile. bugs: "swap_sign" (2 * X - 1), "tile_past_end" (each element read one
    further: the tile's last element reads past its end), "tile_below_start" (one back: the first
    reads below its start), "global_below_start" (the block's start computed as -bx * block, with
    TileLang's own guards of global accesses off, as ``pass_configs`` can ask)."""

    @T.prim_func
    def scale_shift(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            S = T.alloc_shared((block,), T.float32)
            T.copy(X[bx * block], S)
            for i in T.Parallel(block):
                if bug == "tile_past_end":
                    if bx * block + i < N:
                        Y[bx * block + i] = 2.0 * S[i + 1] + 1.0
                elif bug == "tile_below_start":
                    if bx * block + i < N:
                        Y[bx * block + i] = 2.0 * S[i - 1] + 1.0
                elif bug == "global_below_start":
                    Y[-bx * block + i] = 2.0 * S[i] + 1.0
                elif bug == "swap_sign":
                    if bx * block + i < N:
                        Y[bx * block + i] = 2.0 * S[i] - 1.0
                else:
                    if bx * block + i < N:
                        Y[bx * block + i] = 2.0 * S[i] + 1.0

    return scale_shift


def dequant_gemm(M=128, N=128, K=128, block_M=64, block_N=64, block_K=32, group=32, threads=128, bug=None):
    """C = A @ dequant(W) with W int8 [N, K] and one float16 scale per group of K ([N, K // group]):
    the weights are dequantised into a float16 shared tile before the GEMM. bugs: "wrong_group"
    (the scale of the first group used for every group), "k_short"."""
    k_tiles = T.ceildiv(K, block_K) - (1 if bug == "k_short" else 0)

    @T.prim_func
    def dequant_gemm(A: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.int8),
                     S: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            W_q = T.alloc_shared((block_N, block_K), T.int8)
            W_s = T.alloc_shared((block_N, block_K), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(k_tiles, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(W[bx * block_N, k * block_K], W_q)
                for n, kk in T.Parallel(block_N, block_K):
                    g = 0 if bug == "wrong_group" else (k * block_K + kk) // group
                    W_s[n, kk] = T.cast(W_q[n, kk], T.float16) * S[bx * block_N + n, g]
                T.gemm(A_s, W_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return dequant_gemm


def endless(N=64):
    """A kernel whose loop never ends (its exit condition reads a value nothing changes)."""

    @T.prim_func
    def endless(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            flag = T.alloc_var(T.int32)
            flag = 1
            while flag > 0:
                Y[0] = X[0]
            for i in T.Parallel(N):
                Y[i] = X[i]

    return endless


def with_barrier(N=128):
    """A hand-placed thread barrier (T.sync_threads)."""

    @T.prim_func
    def with_barrier(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            S = T.alloc_shared((N,), T.float32)
            T.copy(X, S)
            T.sync_threads()
            T.copy(S, Y)

    return with_barrier


def narrow_copy(N=256, dtype=T.float16, block=128, threads=128):
    """Y (float32) = X (float32) through a tile of ``dtype``: on a GPU the tile holds X rounded to
    ``dtype``, so Y is X converted to ``dtype`` and back."""

    @T.prim_func
    def narrow_copy(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            S = T.alloc_shared((block,), dtype)
            T.copy(X[bx * block], S)
            T.copy(S, Y[bx * block])

    return narrow_copy


def clobbers_input(N=256, block=128, threads=128):
    """Y = X + 1, but each block also zeroes the first half of its tile of X (an input)."""

    @T.prim_func
    def clobbers_input(X: T.Tensor((N,), T.float16), Y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + T.float16(1)
            for i in T.Parallel(block // 2):
                X[bx * block + i] = T.float16(0)

    return clobbers_input


DOUBLE_IT = """
__device__ void double_it(float* x) {
  asm volatile("add.rz.f32 %0, %0, %0;" : "+f"(*x));
}
"""


def imported_device_function(N=64):
    """A call of a device function written in CUDA C with inline PTX (T.import_source) whose
    instruction rounds toward zero (.rz), which the CPU's table of PTX instructions does not."""

    @T.prim_func
    def imported_device_function(X: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            T.import_source(DOUBLE_IT)
            v = T.alloc_local((1,), T.float32)
            v[0] = X[0]
            T.call_extern("handle", "double_it", T.access_ptr(v, "rw"))
            X[0] = v[0]

    return imported_device_function


def splitk_gemm(M=64, N=64, K=128, block_M=32, block_N=32, block_K=32, split=2, tile_add=False, threads=128,
                bug=None):
    """C (float32) = A @ B in ``split`` slices of K, each block adding its slice's product into C
    by atomic adds (per element, or the whole tile with ``tile_add``). bugs: "same_slice" (every
    split reads the first slice of K), "half_tile" (only the first half of each tile's rows is added)."""
    part = K // split
    rows = block_M // 2 if bug == "half_tile" else block_M

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            start = 0 if bug == "same_slice" else bz * part
            T.clear(C_f)
            for k in T.Pipelined(part // block_K, num_stages=2):
                T.copy(A[by * block_M, start + k * block_K], A_s)
                T.copy(B[start + k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            if tile_add:
                T.atomic_add(C[by * block_M, bx * block_N], C_f)
            else:
                for i, j in T.Parallel(rows, block_N):
                    T.atomic_add(C[by * block_M + i, bx * block_N + j], C_f[i, j])

    return splitk


def fp4_decode(M=4, N=32):
    """Y (float32) = 2 * X, X a float4_e2m1fn [M, N] tensor given as the bytes that pack it
    ([M, N // 2] uint8, element 2k in the low half of byte k), its last extent symbolic."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((M, n), T.float4_e2m1fn), Y: T.Tensor((M, n), T.float32)):
        with T.Kernel(1, threads=32) as _:
            for i, j in T.Parallel(M, n):
                Y[i, j] = T.Cast(T.float32, X[i, j]) * 2.0

    return main


def pointer_table(N=16):
    """Y = 2 * the float32 tensor whose address is the first entry of a table (T.make_tensor of a
    pointer read from memory)."""

    @T.prim_func
    def main(table: T.Tensor([1], T.ptr), Y: T.Tensor([N], T.float32)):
        with T.Kernel(1, threads=32) as _:
            src = T.make_tensor(table[0], (N,), T.float32)
            for i in T.serial(N):
                Y[i] = src[i] * 2.0

    return main


def cluster_copy(N=64):
    """Block 0 of a cluster of two copies its tile of A into block 1's shared memory (T.copy_cluster),
    block 1 waits on a cluster mbarrier and writes it to B."""

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.ClusterKernel(2, threads=64, cluster_dims=(2, 1, 1)) as pid:
            mine = T.alloc_shared((N,), T.float32)
            theirs = T.alloc_shared((N,), T.float32)
            ready = T.alloc_cluster_barrier([1])
            T.cluster_sync()
            if pid == 0:
                T.copy(A, mine)
                T.copy_cluster(mine, theirs, dst_block=1, remote_barrier=ready[0])
            if pid == 1:
                T.mbarrier_wait_parity(ready[0], 0)
                T.copy(theirs, B)

    return main


def narrow_scalars(n: int = 64, dtype: str = "float16") -> T.PrimFunc:
    """Scalars bound in a narrow type: x: dtype = A[t] * 1.1 (rounded to dtype where it is bound), B[t] =
    x * 1.3; and C's pairs swapped by a tuple assignment, whose temporaries are of A's type."""

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)) -> None:
        with T.Kernel(1, threads=n // 2):
            t = T.get_thread_binding()
            for k in T.serial(2):
                x: dtype = A[t * 2 + k] * T.cast(1.1, dtype)
                B[t * 2 + k] = x * T.cast(1.3, dtype)
            C[t * 2], C[t * 2 + 1] = A[t * 2 + 1], A[t * 2]

    return main
