"""A row-broadcast add over a dynamic number of rows, with the whole input `X` pinned in L2.

`X` has a `T.dynamic("m")` row count, so the L2 window's size is symbolic (`m * 16384` bytes for
8192 fp16 columns): the report keeps it as an expression, as it does the grid.

    python -m tilelab inspect "examples/l2_persist_dynamic.py:scaled_rows(8192)"
"""

import tilelang.language as T


def scaled_rows(N, block_M=64, block_N=128, threads=256, hit_ratio=0.5, dtype=T.float16):
    M = T.dynamic("m")

    @T.prim_func
    def scaled_rows_kernel(
        X: T.Tensor((M, N), dtype),
        scale: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.annotate_l2_hit_ratio({X: hit_ratio})
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] * scale[bx * block_N + j]

    return scaled_rows_kernel
