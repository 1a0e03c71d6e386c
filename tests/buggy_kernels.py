"""Kernels with the bugs students write, for the isolation and sanitizer tests (our own kernels).

Each factory returns a ``T.prim_func``; ``compile(func)`` compiles it with the pass configs the bug
needs (the out-of-bounds store must not be guarded by TileLang's safe-memory pass)."""

import tilelang
import tilelang.language as T

UNGUARDED = {"tl.disable_safe_memory_legalize": True}


def spin_forever(n: int = 256):
    """Waits for a flag nobody sets: a loop whose exit condition is never met (Flag is all zeros)."""

    @T.prim_func
    def spin_forever(Flag: T.Tensor((1,), T.int32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            while Flag[0] == 0:
                B[tx] = B[tx] + 1.0

    return spin_forever


def copy(n: int = 1024, block: int = 256):
    """A correct copy."""

    @T.prim_func
    def copy(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]

    return copy


def oob_store(n: int = 1024, block: int = 256, short: int = 24):
    """B has ``short`` elements fewer than A, but every thread stores one: the last block writes past
    the end of B (its reads of A stay inside A)."""

    @T.prim_func
    def oob_store(A: T.Tensor((n,), T.float32), B: T.Tensor((n - short,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]

    return oob_store


def far_oob_store(n: int = 1024, block: int = 256):
    """Stores 64 M elements past the end of B: an address no allocation covers (illegal address)."""

    @T.prim_func
    def far_oob_store(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i + (1 << 26) * 16] = A[bx * block + i]

    return far_oob_store


def shared_race(threads: int = 128):
    """Every warp writes the same 32 shared slots (a write-after-write race between warps)."""

    @T.prim_func
    def shared_race(A: T.Tensor((threads,), T.float32), B: T.Tensor((threads,), T.float32)):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((32,), T.float32)
            tx = T.get_thread_binding()
            S[tx % 32] = A[tx]
            B[tx] = S[tx % 32]

    return shared_race


def printing(n: int = 256):
    """A copy whose block 0 prints its first element (device printf)."""

    @T.prim_func
    def printing(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            B[tx] = A[tx]
            if tx == 0:
                T.print(A[0], msg="first element")

    return printing


def half_written(m: int = 256, n: int = 256, block: int = 64):
    """A 2-D copy whose right-most column of tiles is never written."""

    @T.prim_func
    def half_written(A: T.Tensor((m, n), T.float32), B: T.Tensor((m, n), T.float32)):
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            if bx < T.ceildiv(n, block) - 1:
                for i, j in T.Parallel(block, block):
                    B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return half_written


def compile(func, unguarded: bool = False):
    return tilelang.compile(func, target="cuda", execution_backend="tvm_ffi",
                            pass_configs=UNGUARDED if unguarded else None)
