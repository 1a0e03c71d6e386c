"""The Hopper fp16 GEMM: C = A @ B with TMA loads and WGMMA (sm_90a), in tiles of a configuration.

``matmul(M, N, K, block_M, block_N, block_K, ...)`` returns the ``T.prim_func``;
``examples/gemm.py`` and ``tilelab.workshop`` build from it. ``raster`` rasterises the grid in
panels (0: none); ``smem_epilogue`` stages the output tile through shared memory (TMA stores).

``BEST_8192`` is the configuration ``benchmarks/sweep_gemm.py`` found fastest at 8192^3 fp16 (128x256x64
tiles, 4 stages, 256 threads, the grid rasterised in panels of 16, the epilogue staged through
shared memory); ``matmul_best(M, N, K)`` builds it. Run that script on your GPU for the figures.
"""

import tilelang.language as T


def matmul(M, N, K, block_M=128, block_N=256, block_K=64, dtype=T.float16, accum_dtype=T.float32,
           num_stages=3, threads=256, raster=10, smem_epilogue=False):
    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            if smem_epilogue:
                C_shared = T.alloc_shared((block_M, block_N), dtype)
            if raster:
                T.use_swizzle(raster)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            if smem_epilogue:
                # stage the tile through shared memory: coalesced (TMA) stores instead of 4-byte ones
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


BEST_8192 = dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, raster=16, smem_epilogue=True)


def matmul_best(M, N, K):
    return matmul(M, N, K, **BEST_8192)

