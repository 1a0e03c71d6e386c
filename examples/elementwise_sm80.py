"""Elementwise add for sm_80 (Ampere): no TMA, no WGMMA, vectorised global loads.

    python -m tilelab inspect "examples/elementwise_sm80.py:elementwise_add(4096, 4096)" --target sm_80
"""

import tilelang.language as T


def elementwise_add(M, N, block_M=64, block_N=128, threads=256, dtype=T.float16):
    @T.prim_func
    def add(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]

    return add
