"""Kernels that say which thread does what (T.get_thread_binding, T.thread_binding, barriers,
all-reduces, shuffles), for the CPU path's thread-level rule. Each factory takes ``bug=`` to plant
one mistake the CPU run must catch."""

from __future__ import annotations

import tilelang.language as T


def strided_scale(N=1000, block=512, threads=128, bug=None):
    """Y = 3 X - 1, each thread of a block taking every ``threads``-th element of the block's span
    (a T.thread_binding loop variable, a ragged edge). ``wrong_stride``: the stride is half the
    threads, so half of each span is never written; ``past_end``: the edge test lets one element
    past the end through."""
    stride = threads // 2 if bug == "wrong_stride" else threads

    @T.prim_func
    def strided_scale(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            for i in T.serial(block // threads):
                at = bx * block + i * stride + tx
                if at < N or (bug == "past_end" and at == N):
                    Y[at] = X[T.min(at, N - 1)] * 3.0 - 1.0

    return strided_scale


def block_sum_share(rows=4, per=256, threads=64, bug=None):
    """Each block sums its row of X through shared memory (every thread accumulates a strided part
    in a local register, then a tree of halving steps with a barrier after each); S gets the row's
    sum and P[row, tx] the share of thread tx's part in it, read from the register kept across the
    barriers. ``no_barrier``: the tree's steps run without their barrier."""
    steps = threads.bit_length() - 1

    @T.prim_func
    def block_sum_share(X: T.Tensor((rows, per), T.float32), S: T.Tensor((rows,), T.float32),
                        P: T.Tensor((rows, threads), T.float32)):
        with T.Kernel(rows, threads=threads) as bx:
            tx = T.get_thread_binding()
            part = T.alloc_local((1,), T.float32)
            tree = T.alloc_shared((threads,), T.float32)
            part[0] = 0.0
            for i in T.serial(per // threads):
                part[0] += X[bx, i * threads + tx]
            tree[tx] = part[0]
            T.sync_threads()
            for k in T.serial(steps):
                half = threads >> (k + 1)
                if tx < half:
                    tree[tx] = tree[tx] + tree[tx + half]
                if bug != "no_barrier":
                    T.sync_threads()
            if tx == 0:
                S[bx] = tree[0]
            P[bx, tx] = part[0] / tree[0]

    return block_sum_share


def gemv_allreduce(N=64, K=256, rows_per_block=4, lanes=32, acc_dtype=T.float32, bug=None):
    """y = W x, ``rows_per_block`` rows per block (threadIdx.y), each row's dot product split over
    ``lanes`` threads (threadIdx.x) and summed by T.tvm_thread_allreduce. ``wrong_axis``: the
    all-reduce sums over the rows' threads instead of the lanes."""

    @T.prim_func
    def gemv_allreduce(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16), y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // rows_per_block, threads=(lanes, rows_per_block)) as bx:
            lane = T.thread_binding(0, lanes, thread="threadIdx.x")
            row = T.thread_binding(0, rows_per_block, thread="threadIdx.y")
            acc = T.alloc_local((1,), acc_dtype)
            total = T.alloc_local((1,), acc_dtype)
            T.clear(acc)
            for k in T.serial(K // lanes):
                acc[0] += T.Cast(acc_dtype, W[bx * rows_per_block + row, k * lanes + lane]) * \
                    T.Cast(acc_dtype, x[k * lanes + lane])
            with T.attr(T.comm_reducer(lambda a, b: a + b, [T.Cast(acc_dtype, 0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, total[0],
                                                  row if bug == "wrong_axis" else lane, dtype="handle"))
            if lane == 0:
                y[bx * rows_per_block + row] = total[0]

    return gemv_allreduce


def warp_max(N=512, threads=128, bug=None):
    """The maximum of each block's 128 elements: a butterfly of T.shfl_xor in each warp, the warps'
    maxima through shared memory, then T.warp_reduce_max over them. ``short``: the butterfly stops
    one step early (lanes 16 apart are never compared)."""
    steps = 4 if bug == "short" else 5
    warps = threads // 32

    @T.prim_func
    def warp_max(X: T.Tensor((N,), T.float32), M: T.Tensor((N // threads,), T.float32)):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var(T.float32)
            best = T.alloc_shared((32,), T.float32)
            v = X[bx * threads + tx]
            for k in T.serial(steps):
                v = T.max(v, T.shfl_xor(v, 1 << k))
            if tx % 32 == 0:
                best[tx // 32] = v
            T.sync_threads()
            if tx < 32:
                w = T.alloc_var(T.float32)
                w = T.if_then_else(tx < warps, best[tx % warps], -T.infinity(T.float32))
                w = T.warp_reduce_max(w)
                if tx == 0:
                    M[bx] = w

    return warp_max


def branch_by_thread(N=128, threads=96):
    """Tile operations under a branch on the thread index: threads 0-31 copy X into A, the others
    fill B; each tile operation runs once."""

    @T.prim_func
    def branch_by_thread(X: T.Tensor((N,), T.float32), A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            tile = T.alloc_shared((N,), T.float32)
            T.copy(X, tile)
            if T.get_thread_binding() < 32:
                for i in T.Parallel(N):
                    A[i] = tile[i] + 1.0
            else:
                T.fill(B, 2.0)

    return branch_by_thread


def divergent_barrier(N=64):
    """A barrier only threads 0-15 reach."""

    @T.prim_func
    def divergent_barrier(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), T.float32)
            S[tx] = X[tx]
            if tx < 16:
                T.sync_threads()
            Y[tx] = S[N - 1 - tx]

    return divergent_barrier


def divergent_shuffle(N=64):
    """A shuffle only lanes 0-15 of each warp reach."""

    @T.prim_func
    def divergent_shuffle(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            v = T.alloc_var(T.float32)
            v = X[tx]
            if tx % 32 < 16:
                v = v + T.shfl_down(v, 1)
            Y[tx] = v

    return divergent_shuffle


def barrier_in_a_thread_loop(N=64):
    """A barrier in a loop each thread runs its own number of times."""

    @T.prim_func
    def barrier_in_a_thread_loop(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), T.float32)
            S[tx] = X[tx]
            for _i in T.serial(tx % 4):
                T.sync_threads()
                S[tx] = S[tx] + 1.0
            Y[tx] = S[tx]

    return barrier_in_a_thread_loop


def shuffles(N=64):
    """Each kind of warp shuffle and a ballot on two warps: A = shfl_down by 3 within 16 lanes,
    B = shfl_up by 2, C = lane 5 of each group of 8, D = shfl_xor by 4 of a value bound after a
    barrier, E = the low 16 bits of the warp's ballot of X > 0."""

    @T.prim_func
    def shuffles(X: T.Tensor((N,), T.float32), A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32),
                 C: T.Tensor((N,), T.float32), D: T.Tensor((N,), T.float32), E: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            v = X[tx]
            S = T.alloc_shared((N,), T.float32)
            A[tx] = T.shfl_down(v, 3, 16)
            B[tx] = T.shfl_up(v, 2)
            C[tx] = T.shfl_sync(v, 5, 8)
            S[tx] = v * 2.0
            T.sync_threads()
            w = S[N - 1 - tx]
            D[tx] = w + T.shfl_xor(w, 4)
            E[tx] = T.Cast(T.int32, T.ballot(v > 0) & T.uint64(0xFFFF))

    return shuffles


def named_barrier(count=64):
    """Threads 0-63 of 96 meet at a named barrier of ``count`` threads (64: exactly those that reach it)."""

    @T.prim_func
    def named_barrier(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=96) as _:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), T.float32)
            if tx < 64:
                S[tx] = X[tx] * 2.0
                T.sync_threads(1, count)
                Y[tx] = S[63 - tx]

    return named_barrier


def no_threads_given(N=256):
    """A kernel that indexes by thread without saying how many threads (TileLang's default, 128)."""

    @T.prim_func
    def no_threads_given(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128) as bx:
            tn = T.get_thread_binding(0)
            Y[bx * 128 + tn] = X[bx * 128 + tn] + 1.0

    return no_threads_given


def mma_atom(trans_b: bool = False, wrong_lane: bool = False) -> T.PrimFunc:
    """C = A @ B.T (16 x 16 by 8 x 16, float16 in, float32 out) by one warp's hand-written tensor-core
    instructions: two ldmatrix (.x4 for A, .x2 for B; ``trans_b``: B given as (16, 8), loaded with
    .trans) and one mma.sync m16n8k16, each lane storing its fragment of C. ``wrong_lane``: the lanes of
    A's second and third matrices give each other's row addresses (a wrong kernel)."""
    b_shape = (16, 8) if trans_b else (8, 16)

    @T.prim_func
    def main(A: T.Tensor((16, 16), T.float16), B: T.Tensor(b_shape, T.float16), C: T.Tensor((16, 8), T.float32)):
        with T.Kernel(1, threads=32) as _:
            a_tile = T.alloc_shared((16, 16), T.float16)
            b_tile = T.alloc_shared(b_shape, T.float16)
            a = T.alloc_local((8,), T.float16)
            b = T.alloc_local((4,), T.float16)
            c = T.alloc_local((4,), T.float32)
            T.copy(A, a_tile)
            T.copy(B, b_tile)
            tx = T.get_thread_binding()
            for i in T.serial(4):
                c[i] = 0
            # lane t gives the address of row t % 8 of matrix t // 8: A's four 8x8 quarters, rows then K
            quarter = T.if_then_else((tx // 8 == 1) | (tx // 8 == 2), 3 - tx // 8, tx // 8) if wrong_lane else tx // 8
            T.ptx_ldmatrix(False, 4, T.access_ptr(a_tile[tx % 8 + 8 * (quarter % 2), 8 * (quarter // 2)], "r", 8),
                           T.access_ptr(a[0], "w", 8))
            if trans_b:  # B stored K-major: rows of K, transposed as they load
                T.ptx_ldmatrix(True, 2, T.access_ptr(b_tile[tx % 8 + 8 * (tx // 8 % 2), 0], "r", 8),
                               T.access_ptr(b[0], "w", 4))
            else:
                T.ptx_ldmatrix(False, 2, T.access_ptr(b_tile[tx % 8, 8 * (tx // 8 % 2)], "r", 8),
                               T.access_ptr(b[0], "w", 4))
            T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32", a.data, 0, b.data, 0, c.data, 0,
                      False)
            for i in T.serial(4):
                C[tx // 4 + 8 * (i // 2), 2 * (tx % 4) + i % 2] = c[i]

    return main


def weighted_rows_in_a_branch(rows: int = 4, n: int = 64, threads: int = 96, split: int = 32,
                              bind: bool = True) -> T.PrimFunc:
    """Y = sum_k W[k] * X[k, :], worked out by the threads of the ``else`` of ``tx < split``: a tile
    loop accumulating into a fragment, its weight bound first (``w = W_s[k]``, a value every thread
    of the branch holds alike) or read in the loop (``bind=False``)."""

    @T.prim_func
    def main(X: T.Tensor((rows, n), "float32"), W: T.Tensor((rows,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads):
            w_s = T.alloc_shared((rows,), "float32")
            acc = T.alloc_fragment((n,), "float32")
            x_f = T.alloc_fragment((rows, n), "float32")
            if T.get_thread_binding() < split:
                pass
            else:
                for j in T.Parallel(rows):
                    w_s[j] = W[j]
                T.copy(X, x_f)
                T.clear(acc)
                for k in T.serial(rows):
                    if bind:
                        w = w_s[k]
                        for i in T.Parallel(n):
                            acc[i] += w * x_f[k, i]
                    else:
                        for i in T.Parallel(n):
                            acc[i] += w_s[k] * x_f[k, i]
                T.copy(acc, Y)

    return main
