"""Warp-specialised kernels of our own for the CPU path's ``warp-roles`` rule: a GEMM whose producer
warp group loads tiles with TMA and a consumer group multiplies them, handing over through two
mbarriers; a two-stage version through arrays of mbarriers and their parities; and wrong variants
(written for these tests, not taken from anywhere)."""

from __future__ import annotations

import tilelang.language as T

M = N = 64
K = 128
BLOCK_M = BLOCK_N = 32
BLOCK_K = 32


def handoff_gemm(bug=None):
    """C = A @ B, block (BLOCK_M, BLOCK_N); group 0 (threads 0-127) loads, group 1 (128-255)
    multiplies. ``bug``: "k_short" (the K loop one tile short), "consumer_first" (the consumer's
    region written before the producer's: its first wait can never be met in program order),
    "no_arrive" (the producer never arrives)."""
    k_tiles = K // BLOCK_K - (1 if bug == "k_short" else 0)

    @T.prim_func
    def handoff(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // BLOCK_N, M // BLOCK_M, threads=256) as (bx, by):
            A_s = T.alloc_shared((BLOCK_M, BLOCK_K), T.float16)
            B_s = T.alloc_shared((BLOCK_K, BLOCK_N), T.float16)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), T.float32)
            loaded = T.alloc_barrier(arrive_count=128)
            consumed = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(acc)
            for ko in T.serial(k_tiles):
                if bug == "consumer_first":
                    with T.ws(1):
                        T.barrier_wait(loaded, ko % 2)
                        T.gemm(A_s, B_s, acc)
                        T.barrier_arrive(consumed)
                with T.ws(0):
                    T.barrier_wait(consumed, (ko + 1) % 2)
                    T.tma_copy(A[by * BLOCK_M, ko * BLOCK_K], A_s, barrier=loaded)
                    T.tma_copy(B[ko * BLOCK_K, bx * BLOCK_N], B_s, barrier=loaded)
                    if bug != "no_arrive":
                        T.barrier_arrive(loaded)
                if bug != "consumer_first":
                    with T.ws(1):
                        T.barrier_wait(loaded, ko % 2)
                        T.gemm(A_s, B_s, acc)
                        T.barrier_arrive(consumed)
            with T.ws(1):
                T.copy(acc, C[by * BLOCK_M, bx * BLOCK_N])

    return handoff


def staged_gemm(stages=2, bug=None):
    """C = A @ B through ``stages`` buffers, each with a "full" and an "empty" mbarrier in one array
    (full: 0..stages-1, empty: stages..2*stages-1), waited on by parity. ``bug``: "parity" (the
    consumer waits on the wrong parity of its full barrier)."""
    flip = 1 if bug == "parity" else 0

    @T.prim_func
    def staged(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // BLOCK_N, M // BLOCK_M, threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, BLOCK_M, BLOCK_K), T.float16)
            B_s = T.alloc_shared((stages, BLOCK_K, BLOCK_N), T.float16)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), T.float32)
            bars = T.alloc_barrier([128] * (2 * stages))
            with T.ws(0):
                T.clear(acc)
            for ko in T.serial(K // BLOCK_K):
                with T.ws(1):
                    T.mbarrier_wait_parity(bars[ko % stages + stages], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * BLOCK_M:(by + 1) * BLOCK_M, ko * BLOCK_K:(ko + 1) * BLOCK_K],
                               A_s[ko % stages, :, :], barrier=bars[ko % stages])
                    T.tma_copy(B[ko * BLOCK_K:(ko + 1) * BLOCK_K, bx * BLOCK_N:(bx + 1) * BLOCK_N],
                               B_s[ko % stages, :, :], barrier=bars[ko % stages])
                    T.mbarrier_arrive(bars[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(bars[ko % stages], ((ko // stages) % 2) ^ flip)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], acc)
                    T.mbarrier_arrive(bars[ko % stages + stages])
            with T.ws(0):
                T.copy(acc, C[by * BLOCK_M, bx * BLOCK_N])

    return staged


def arrive_by_some_threads(arriving=32, by_data=False):
    """An mbarrier of count 32 that the threads below ``arriving`` arrive on (a branch on the
    thread that is no T.ws region), then a wait: its phase completes when 32 threads arrive.
    ``by_data``: the branch reads A instead: each thread whose element is positive arrives."""

    @T.prim_func
    def some(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _bx:
            tx = T.get_thread_binding()
            tile = T.alloc_shared((64,), T.float32)
            ready = T.alloc_barrier(32)
            T.copy(A, tile)
            if by_data:
                if A[tx] > 0:
                    T.barrier_arrive(ready)  # <- arrive-by-data
            elif tx < arriving:
                T.barrier_arrive(ready)
            T.barrier_wait(ready, 0)
            T.copy(tile, B)

    return some


def per_thread_roles():
    """Each warp group writes its own half of B through code indexed by thread: group 0 (threads
    0-127) doubles, group 1 (128-255) adds one."""

    @T.prim_func
    def roles(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256) as _bx:
            tx = T.get_thread_binding()
            with T.ws(0):
                B[tx] = A[tx] * 2.0
            with T.ws(1):
                B[tx] = A[tx] + 1.0

    return roles
