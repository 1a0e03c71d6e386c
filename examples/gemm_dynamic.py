"""fp16 GEMM whose M is dynamic: one kernel serves every batch size (sm_90a).

M stays symbolic in the report: the grid is ceildiv(m, block_M), A's TMA descriptor has global
dim `m`, and the argument table says `m` binds from `A.shape[0]` at launch.

    python -m tilelab inspect "examples/gemm_dynamic.py:matmul_dynamic_m(1024, 1024, 128, 128, 64)"
"""

import tilelang.language as T


def matmul_dynamic_m(N, K, block_M=128, block_N=128, block_K=64, dtype=T.float16, accum_dtype=T.float32,
                     num_stages=3, threads=256):
    M = T.dynamic("m")

    @T.prim_func
    def gemm_dyn(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_dyn
