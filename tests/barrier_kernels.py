"""Kernels of our own whose groups of threads hand tiles to each other through mbarriers, with code
that indexes by thread and arrives under conditions on the thread: the CPU path runs them by letting
the groups take turns (tilelab/_tilelang/emulate_barriers.py). Written for these tests.

``relay``: 96 threads in three groups of 32 over a two-slot ring. The consumer's branch comes
first in the code and waits for the producer written after it; the producer (threads 64-95) loads
each tile of A thread by thread, and the tile's mbarrier counts its 32 arrivals; the consumer
(threads 0-31) adds the tile into an accumulator, then only its even threads arrive on the slot's
"free" mbarrier (16 arrivals: its count), so the producer may refill it; the scaler (threads
32-63) writes C once the consumer's last tile has arrived. The producer's threads prefetch their
next element into a fragment, their own registers across the waits. Every block sums the four row tiles of
its column of A, doubled: C[i] = 2 * sum_k A[k * 32 + i]."""

from __future__ import annotations

import tilelang.language as T

TILE = 32
TILES = 4
BLOCKS = 2


def relay(bug=None):
    """``bug``: "odd_short" (the consumer's free arrive comes from its even threads below 8 only: 4
    arrivals of 16, so the producer's third wait can never be met: a deadlock), "parity" (the scaler
    waits on parity 1, which a fresh mbarrier passes at once by PTX's rule: it reads the accumulator
    before the consumer is done), "wait_by_some" (only half the consumer's threads wait: refused)."""
    free_threads = 8 if bug == "odd_short" else TILE
    done_parity = 1 if bug == "parity" else 0

    @T.prim_func
    def kernel(A: T.Tensor((TILES * TILE * BLOCKS,), T.float32), C: T.Tensor((TILE * BLOCKS,), T.float32)):
        with T.Kernel(BLOCKS, threads=3 * TILE) as bx:
            ring = T.alloc_shared((2, TILE), T.float32)
            acc = T.alloc_shared((TILE,), T.float32)
            held = T.alloc_fragment((2,), T.float32)  # a thread's registers: no tile operation touches it
            full = T.alloc_barrier([TILE, TILE])
            free = T.alloc_barrier([TILE // 2, TILE // 2])
            done = T.alloc_barrier(TILE)
            tx = T.get_thread_binding()
            if tx < TILE:  # the consumer, written before its producer
                acc[tx] = 0.0
                for k in T.serial(TILES):
                    if bug == "wait_by_some":
                        if tx < TILE // 2:
                            T.barrier_wait(full[k % 2], (k // 2) % 2)
                    else:
                        T.barrier_wait(full[k % 2], (k // 2) % 2)
                    acc[tx] = acc[tx] + ring[k % 2, tx]
                    if tx % 2 == 0 and tx < free_threads:
                        T.barrier_arrive(free[k % 2])
                T.barrier_arrive(done)
            elif tx < 2 * TILE:  # the scaler
                T.barrier_wait(done, done_parity)
                C[bx * TILE + tx - TILE] = acc[tx - TILE] * 2.0
            else:  # the producer: each thread prefetches its next element into its own registers
                held[0] = A[bx * TILES * TILE + tx - 2 * TILE]
                for k in T.serial(TILES):
                    T.barrier_wait(free[k % 2], ((k // 2) % 2) ^ 1)
                    ring[k % 2, tx - 2 * TILE] = held[k % 2]
                    T.barrier_arrive(full[k % 2])
                    if k + 1 < TILES:
                        held[(k + 1) % 2] = A[(bx * TILES + k + 1) * TILE + tx - 2 * TILE]

    return kernel


def reference(a):
    """C of ``relay`` from A (a torch tensor)."""
    return a.reshape(BLOCKS, TILES, TILE).sum(1).reshape(-1) * 2.0


def own_rows(rows=8, width=64, warps=4, bug=None):
    """Each warp of a block copies its own row of A into shared memory with a TMA copy on its own
    mbarrier (``bars[tx // 32]``: the barrier a thread arrives on and waits for depends on its
    index), then the warp's first lane writes the row's first plus last element:
    B[r] = A[r, 0] + A[r, width - 1]. ``bug="count"``: every mbarrier counts 33 arrivals, one more
    than its warp makes, so no warp's wait is ever met (a deadlock)."""
    count = 33 if bug == "count" else 32

    @T.prim_func
    def kernel(A: T.Tensor((rows, width), T.float32), B: T.Tensor((rows,), T.float32)):
        with T.Kernel(rows // warps, threads=warps * 32) as bx:
            tx = T.get_thread_binding()
            w = tx // 32
            tile = T.alloc_shared((warps, width), T.float32)
            bars = T.alloc_barrier([count] * warps)
            T.tma_copy(A[bx * warps + w, 0:width], tile[w, 0:width], barrier=bars[w], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=bars[w])
            T.mbarrier_wait_parity(mbarrier=bars[w], parity=0)
            if tx % 32 == 0:
                B[bx * warps + w] = tile[w, 0] + tile[w, width - 1]

    return kernel


def named_handoff(n=64, bug=None):
    """Two warps hand a tile to each other through one-sided named barriers (bar.arrive / bar.sync):
    the reader, written first, waits at ``T.sync_threads(1, 64)`` for the writer's
    ``T.named_barrier_arrive(1, 64)``, doubles the tile into B, then lets the writer go on through
    barrier 2; the writer, after that, adds one to A in place of the tile it handed over.
    B = 2 * (A + 1). ``bug="no_arrive"``: the writer never arrives on barrier 1 (a deadlock)."""

    @T.prim_func
    def kernel(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            tile = T.alloc_shared((n,), T.float32)
            if tx >= 32:  # the reader, written before the writer it waits for
                T.sync_threads(1, 64)
                for i in T.serial(n // 32):
                    B[i * 32 + tx - 32] = tile[i * 32 + tx - 32] * 2.0
                T.named_barrier_arrive(2, 64)
            else:  # the writer
                for i in T.serial(n // 32):
                    tile[i * 32 + tx] = A[i * 32 + tx] + 1.0
                if bug != "no_arrive":
                    T.named_barrier_arrive(1, 64)
                T.sync_threads(2, 64)
                for i in T.serial(n // 32):
                    tile[i * 32 + tx] = 0.0

    return kernel
