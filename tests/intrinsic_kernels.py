"""Small GPU kernels each using one TileLang intrinsic the CPU path gives its meaning
(tests/_tilelang/test_emulate_intrinsics.py runs them on the CPU against numpy)."""

from __future__ import annotations

import tilelang.language as T

N = 256
BLOCK = 128


def elementwise(n: int = N, block: int = BLOCK) -> T.PrimFunc:
    """Per element of A: R = A rounded, halves away from zero; Q = T.fast_rcp(A); L = T.__ldg(A[i]);
    M = T.abs(A)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), R: T.Tensor((n,), "float32"), Q: T.Tensor((n,), "float32"),
             L: T.Tensor((n,), "float32"), M: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(n // block, threads=block) as bx:
            for i in T.Parallel(block):
                R[bx * block + i] = T.round(A[bx * block + i], "ties-away-from-zero")
                Q[bx * block + i] = T.fast_rcp(A[bx * block + i])
                L[bx * block + i] = T.__ldg(A[bx * block + i])
                M[bx * block + i] = T.abs(A[bx * block + i])

    return main


def row_flags(rows: int = 4, cols: int = 8) -> T.PrimFunc:
    """All[r] / Any[r] = 1 when all / any of M[r, :] is nonzero, else 0 (T.all_of on a shared tile,
    T.any_of on a region of the tensor)."""

    @T.prim_func
    def main(M: T.Tensor((rows, cols), "int32"), All: T.Tensor((rows,), "int32"),
             Any: T.Tensor((rows,), "int32")) -> None:
        with T.Kernel(rows, threads=32) as bx:
            tile = T.alloc_shared((cols,), "int32")
            T.copy(M[bx, 0:cols], tile)
            All[bx] = T.if_then_else(T.all_of(tile), 1, 0)
            Any[bx] = T.if_then_else(T.any_of(M[bx, 0:cols]), 1, 0)

    return main


def cumsum(rows: int = 4, cols: int = 16, dim: int = 1, reverse: bool = False) -> T.PrimFunc:
    """B = the cumulative sum of A along ``dim`` (reversed: from the end), in shared memory."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")) -> None:
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((rows, cols), "float32")
            T.copy(A, tile)
            T.cumsum(src=tile, dim=dim, reverse=reverse)
            T.copy(tile, B)

    return main


def words(n: int = 64) -> T.PrimFunc:
    """B[i] = the bits of A[i] by a 32-bit load and store by hand (T.ldg32, T.stg32), the load
    predicated on i being even (a load not made gives 0)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                T.stg32(B[i], T.ldg32(A[i], pred=i % 2 == 0))

    return main


def unknown_intrinsic(n: int = 64) -> T.PrimFunc:
    """A 64-bit global load by hand (T.ldg64): an intrinsic the CPU path has no meaning for."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(n // 2, threads=32) as bx:
            value = T.ldg64(A[bx * 2:bx * 2 + 2])
            T.stg64(B[bx * 2:bx * 2 + 2], value)

    return main


def asserting(n: int = 64) -> T.PrimFunc:
    """B = A, asserting on the device that every A[i] is below 100."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                T.device_assert(A[i] < 100.0, "A too large")
                B[i] = A[i]

    return main
