"""bf16 GEMM with B stored (N, K): C = A @ B^T, both operands K-major (sm_90a).

    python -m tilelab inspect "examples/gemm_bf16_nt.py:matmul_nt(1024, 1024, 1024, 128, 128, 64)"
"""

import tilelang.language as T


def matmul_nt(M, N, K, block_M=128, block_N=128, block_K=64, dtype=T.bfloat16, accum_dtype=T.float32,
              num_stages=3, threads=256):
    @T.prim_func
    def gemm_nt(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_nt
