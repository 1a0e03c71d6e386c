"""One tiled GEMM for every target (Hopper, MI300, Apple, the CPU): the same tiles, loop and
``T.gemm``, so that their lowerings can be compared; the CPU build also launches."""

from __future__ import annotations


def tiled_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32,
               target: str = "sm_90a"):
    """One tiled GEMM for every target: the same tiles, loop and ``T.gemm``.

    GPUs stage the tiles in shared memory (LDS on AMD) and accumulate in a register fragment; the
    CPU has neither, so there the tiles are ``T.alloc_local`` buffers, and the data are float32
    (TileLang 0.1.15's C code cannot convert float32 vectors to fp16 in the epilogue).
    """
    import tilelang.language as T

    from ..targets import parse_target

    cpu = parse_target(target).family == "cpu"
    dtype = T.float32 if cpu else T.float16

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            if cpu:
                A_tile = T.alloc_local((block_M, block_K), dtype)
                B_tile = T.alloc_local((block_K, block_N), dtype)
                C_tile = T.alloc_local((block_M, block_N), T.float32)
            else:
                A_tile = T.alloc_shared((block_M, block_K), dtype)
                B_tile = T.alloc_shared((block_K, block_N), dtype)
                C_tile = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_tile)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0 if cpu else 2):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, C_tile)
            T.copy(C_tile, C[by * block_M, bx * block_N])

    return gemm
