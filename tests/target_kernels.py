"""Kernels of our own for the target tests: GPU-style (threads, shared memory, fragments) and
CPU-style (T.alloc_local tiles, no threads), as TileLang 0.1.15 lowers them for each target."""
import tilelang.language as T


def gemm_gpu(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32, threads=256, dtype=T.float16):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def gemm_cpu(M=128, N=128, K=128, block_M=32, block_N=32, block_K=32, dtype=T.float32):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_tile = T.alloc_local((block_M, block_K), dtype)
            B_tile = T.alloc_local((block_K, block_N), dtype)
            C_tile = T.alloc_local((block_M, block_N), T.float32)
            T.clear(C_tile)
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, C_tile)
            T.copy(C_tile, C[by * block_M, bx * block_N])

    return gemm


def scale_add(N=4096, block=256, threads=128):
    """C = 2 * A + B, elementwise."""

    @T.prim_func
    def scale_add(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = 2.0 * A[bx * block + i] + B[bx * block + i]

    return scale_add


def row_sum(M=256, N=128, block_M=16, threads=128):
    """S[i] = sum_j X[i, j], a tile per block reduced in registers."""

    @T.prim_func
    def row_sum(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_fragment((block_M, N), T.float32)
            sums = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, sums, dim=1)
            T.copy(sums, S[bx * block_M])

    return row_sum


def row_sum_cpu(M=256, N=128, block_M=16):
    @T.prim_func
    def row_sum(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            acc = T.alloc_local((block_M,), T.float32)
            T.clear(acc)
            for i, j in T.grid(block_M, N):
                acc[i] += X[bx * block_M + i, j]
            for i in T.serial(block_M):
                S[bx * block_M + i] = acc[i]

    return row_sum


def attention_forward(batch=1, heads=2, seq=256, dim=64, block_M=64, block_N=64, threads=256):
    """Flash-attention forward: S = Q K^T, online softmax, O = P V (non-causal)."""
    shape = (batch, seq, heads, dim)
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax through exp2
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):  # noqa: E741 O: attention's output
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), accum)
            P = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            rescale = T.alloc_fragment((block_M,), accum)
            row = T.alloc_fragment((block_M,), accum)
            total = T.alloc_fragment((block_M,), accum)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.fill(acc, 0)
            T.fill(total, 0)
            T.fill(m, -T.infinity(accum))
            for kb in T.Pipelined(T.ceildiv(seq, block_N), num_stages=1):
                T.copy(K[bz, kb * block_N:(kb + 1) * block_N, by, :], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, row, dim=1)
                for i in T.Parallel(block_M):
                    total[i] = total[i] * rescale[i] + row[i]
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= rescale[i]
                T.copy(S, P)
                T.copy(V[bz, kb * block_N:(kb + 1) * block_N, by, :], V_s)
                T.gemm(P, V_s, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= total[i]
            T.copy(acc, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return attention


def half_copy(N=256):
    """Copies only the first half of A into B: the second half of B is never written."""

    @T.prim_func
    def half_copy(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1) as _:
            for i in T.serial(N // 2):
                B[i] = A[i]

    return half_copy


def even_blocks_only(N=1024, block=128):
    """Eight blocks of 128 elements; only the even-numbered blocks copy A into B."""

    @T.prim_func
    def even_blocks_only(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block) as bx:
            if bx % 2 == 0:
                for i in T.serial(block):
                    B[bx * block + i] = A[bx * block + i]

    return even_blocks_only


def nt_gemm(dtype, accum):
    """C = A B^T on 128x128 tiles, K staged 64 at a time (for the per-dtype MFMA tests)."""

    @T.prim_func
    def nt_gemm(A: T.Tensor((256, 256), dtype), B: T.Tensor((256, 256), dtype), C: T.Tensor((256, 256), accum)):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), dtype)
            B_s = T.alloc_shared((128, 64), dtype)
            C_l = T.alloc_fragment((128, 128), accum)
            T.clear(C_l)
            for k in T.Pipelined(4, num_stages=1):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[bx * 128, k * 64], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 128, bx * 128])

    return nt_gemm


# A notebook cell defining a plain copy kernel (the cell-magic tests run it through %%tilelang).
COPY_CELL = '''import tilelang.language as T


@T.prim_func
def copy_tile(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
    with T.Kernel(1, threads=128) as bx:
        for i, j in T.Parallel(128, 64):
            B[i, j] = A[i, j]
'''


def thread_indexed_copy(N=128):
    """Each thread copies the element of its own index (thread-index arithmetic: on the CPU, a loop
    over the block's threads)."""

    @T.prim_func
    def thread_indexed_copy(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            B[tx] = A[tx]

    return thread_indexed_copy
