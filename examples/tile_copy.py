"""Tiled copy B = A through shared memory (TMA load and store on Hopper).

    python -m tilelab inspect "examples/tile_copy.py:copy(16384, 32768)"

At 16384 x 32768 fp16 (1 GiB each way) this is the copy kernel of
``benchmarks/timing_fidelity.py``; ``tests/test_launch_gpu.py`` checks it with ``tilelab.run``.
"""

import tilelang.language as T


def copy(M, N, block_M=64, block_N=256, dtype=T.float16, threads=256):
    @T.prim_func
    def tile_copy(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], tile)
            T.copy(tile, B[by * block_M, bx * block_N])

    return tile_copy


if __name__ == "__main__":
    import tilelab

    print(tilelab.inspect(copy(1024, 1024)))
