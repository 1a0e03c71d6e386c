"""A kernel of our own shaped as varlen attention kernels are (written for these tests): each block
finds its sequence's start and length in ``cu`` (values bound in the kernel), and branches on
them around its tile operations. The CPU path's block mask once made TileLang's lowering of such a
kernel take a minute (tests/launch/test_emulate_barriers.py)."""

from __future__ import annotations

import tilelang.language as T

SEQS = 3
MAX_LEN = 96
TOTAL = 160
BLOCK = 32


def varlen_rows():
    """Y = 2 * X over the rows of each sequence (its rows are cu[s]..cu[s + 1]), a block of rows each."""

    @T.prim_func
    def rows(X: T.Tensor((TOTAL, 16), T.float32), cu: T.Tensor((SEQS + 1,), T.int32),
             Y: T.Tensor((TOTAL, 16), T.float32)):
        with T.Kernel(T.ceildiv(MAX_LEN, BLOCK), SEQS, threads=128) as (bx, bz):
            tile = T.alloc_shared((BLOCK, 16), T.float32)
            start = cu[bz]
            length = cu[bz + 1] - start
            full = length // BLOCK
            if bx * BLOCK < length:
                T.copy(X[start + bx * BLOCK, 0], tile)
                if bx < full:
                    for i, j in T.Parallel(BLOCK, 16):
                        tile[i, j] = tile[i, j] * 2.0
                else:
                    for i, j in T.Parallel(BLOCK, 16):
                        tile[i, j] = T.if_then_else(bx * BLOCK + i < length, tile[i, j] * 2.0, 0.0)
                T.copy(tile, Y[start + bx * BLOCK, 0])

    return rows
