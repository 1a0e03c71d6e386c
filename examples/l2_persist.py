"""A row-broadcast add whose small bias vector is pinned in L2 with `T.annotate_l2_hit_ratio`.

The tvm_ffi launcher sets the access-policy window; TileLang 0.1.15's cython and nvrtc launchers
omit it (the report says so).

    python -m tilelab inspect "examples/l2_persist.py:bias_add(8192, 8192)"
"""

import tilelang.language as T


def bias_add(M, N, block_M=64, block_N=128, threads=256, hit_ratio=0.8, dtype=T.float16):
    @T.prim_func
    def bias_add_kernel(
        X: T.Tensor((M, N), dtype),
        bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.annotate_l2_hit_ratio({bias: hit_ratio})
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] + bias[bx * block_N + j]

    return bias_add_kernel
