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
    """A 64-bit global load by hand (T.ldg64) whose two words are added as a vector: the CPU path gives
    a wide load its meaning where it is stored, not as a vector of words in arithmetic."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(n // 2, threads=32) as bx:
            value = T.ldg64(A[bx * 2:bx * 2 + 2])
            T.stg64(B[bx * 2:bx * 2 + 2], value + value)

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


def wide_words(n: int = 64) -> T.PrimFunc:
    """Loads and stores by hand of 128 and 256 bits: C = H through a shared tile (T.ldg128 bound to a
    variable, T.sts128, T.lds128, T.stg128); W = H's bits as int32 words (8 halves, 4 words); D = F's
    bits as int64 (8 floats, 4 elements), the 256-bit load predicated on the block being even."""

    @T.prim_func
    def main(H: T.Tensor((n,), "float16"), F: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float16"),
             W: T.Tensor((n // 2,), "int32"), D: T.Tensor((n // 2,), "int64")) -> None:
        with T.Kernel(n // 8, threads=32) as bx:
            S = T.alloc_shared((8,), "float16")
            words = T.ldg128(H[bx * 8:bx * 8 + 8])
            T.sts128(S[0:8], words)
            T.stg128(C[bx * 8:bx * 8 + 8], T.lds128(S[0:8]))
            T.stg128(W[bx * 4:bx * 4 + 4], T.ldg128(H[bx * 8:bx * 8 + 8]))
            T.stg256(D[bx * 4:bx * 4 + 4], T.ldg256(F[bx * 8:bx * 8 + 8], pred=bx % 2 == 0))

    return main


def ieee_rounding(n: int = 64) -> T.PrimFunc:
    """Per element: R[m, i] = A[i] + B[i] rounded in mode m (rn, rz, ru, rd: T.ieee_add), then
    A*B rounded down, fma(A, B, C) rounded up, A/B rounded toward zero, 1/sqrt(|A|) rounded to
    nearest (T.ieee_mul, T.ieee_fmaf, T.ieee_fdiv, T.ieee_frsqrt)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32"),
             R: T.Tensor((8, n), "float32")) -> None:
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                R[0, i] = T.ieee_add(A[i], B[i], "rn")
                R[1, i] = T.ieee_add(A[i], B[i], "rz")
                R[2, i] = T.ieee_add(A[i], B[i], "ru")
                R[3, i] = T.ieee_add(A[i], B[i], "rd")
                R[4, i] = T.ieee_mul(A[i], B[i], "rd")
                R[5, i] = T.ieee_fmaf(A[i], B[i], C[i], "ru")
                R[6, i] = T.ieee_fdiv(A[i], B[i], "rz")
                R[7, i] = T.ieee_frsqrt(T.abs(A[i]))

    return main


def async_copies(rows: int = 4, cols: int = 16, shift: int = 0) -> T.PrimFunc:
    """B = 2 * A, each row through a shared tile that T.ptx_cp_async fills by hand, 8 elements per
    thread (the copy of thread 1 zero-filled in even rows), then T.ptx_commit_group /
    T.ptx_wait_group. ``shift`` > 0 moves each copy's destination that far along the tile: the last
    thread's copy runs past the tile's end."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((rows, cols), "float16")) -> None:
        with T.Kernel(rows, threads=cols // 8) as bx:
            S = T.alloc_shared((cols,), "float16")
            tx = T.get_thread_binding()
            T.ptx_cp_async(T.access_ptr(S[shift + tx * 8], "w", 8), T.access_ptr(A[bx, tx * 8], "r", 8), 8,
                           predicate=(bx % 2 == 1) | (tx == 0))
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for j in T.Parallel(cols):
                B[bx, j] = S[j] * 2

    return main


def philox(threads: int = 8, draws: int = 6, seed: int = 0, offset: int = 0, first_seq: int = 0,
           generator: str = "curandStatePhilox4_32_10_t") -> T.PrimFunc:
    """Thread t of the block: T.rng_init(seed, first_seq + t, offset), then ``draws`` words of its
    stream (T.rng_rand, their bits as int32) into W[t, :], one uniform float into U[t], then three
    normal floats into G[t, :] (Box-Muller: two words for the first two, two more for the third)."""

    @T.prim_func
    def main(W: T.Tensor((threads, draws), "int32"), U: T.Tensor((threads,), "float32"),
             G: T.Tensor((threads, 3), "float32")) -> None:
        with T.Kernel(1, threads=threads):
            t = T.get_thread_binding()
            T.rng_init(seed, first_seq + t, offset, generator=generator)
            for k in T.serial(draws):
                W[t, k] = T.reinterpret("int32", T.rng_rand())
            U[t] = T.rng_rand_float()
            for k in T.serial(3):
                G[t, k] = T.rng_rand_float(32, "normal")

    return main


def math_group(n: int = 64) -> T.PrimFunc:
    """Per element of A (float32) and Bits (int32): the fast-math functions, exp10, fmod, fmul, fma,
    pow by an integer, isfinite, ldexp, and the integer bit counts and searches (clz, popcount, __ffs,
    __fns from bit 3: the second set bit up, the first set bit down)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Bits: T.Tensor((n,), "int32"), F: T.Tensor((9, n), "float32"),
             K: T.Tensor((5, n), "int32")) -> None:
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                F[0, i] = T.__exp(A[i])
                F[1, i] = T.__log(T.abs(A[i]) + 1.0)
                F[2, i] = T.__sin(A[i])
                F[3, i] = T.exp10(A[i])
                F[4, i] = T.fmod(A[i], 0.75)
                F[5, i] = T.fma(A[i], A[i], -1.0) + T.fmul(A[i], 2.0)
                F[6, i] = T.pow(A[i], 3)
                F[7, i] = T.if_then_else(T.isfinite(T.log(A[i])), 1.0, 0.0)
                K[0, i] = T.clz(Bits[i])
                K[1, i] = T.popcount(Bits[i])
                K[2, i] = T.__ffs(Bits[i])
                K[3, i] = T.Cast("int32", T.__fns(T.Cast("uint32", Bits[i]), 3, 2))
                K[4, i] = T.Cast("int32", T.__fns(T.Cast("uint32", Bits[i]), 3, -1))
                F[8, i] = T.ldexp(A[i], 3.0)

    return main


def packed_pairs(n: int = 64) -> T.PrimFunc:
    """P[2j:2j+2] = add2 / sub2 / mul2 of the pairs A[2j:2j+2] and B[2j:2j+2] (float32x2)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), P: T.Tensor((3, n), "float32")) -> None:
        with T.Kernel(1, threads=32):
            for j in T.serial(n // 2):
                a = A[T.Ramp(2 * j, 1, 2)]
                b = B[T.Ramp(2 * j, 1, 2)]
                P[0, T.Ramp(2 * j, 1, 2)] = T.add2(a, b)
                P[1, T.Ramp(2 * j, 1, 2)] = T.sub2(a, b)
                P[2, T.Ramp(2 * j, 1, 2)] = T.mul2(a, b)

    return main


def elect(threads: int = 128) -> T.PrimFunc:
    """E[0, t] = T.shuffle_elect(64) (one thread of each 64), E[1, t] = T.shuffle_elect(0) (one of the
    block), as 0 / 1."""

    @T.prim_func
    def main(E: T.Tensor((2, threads), "int32")) -> None:
        with T.Kernel(1, threads=threads):
            t = T.get_thread_binding()
            E[0, t] = T.if_then_else(T.shuffle_elect(64), 1, 0)
            E[1, t] = T.if_then_else(T.shuffle_elect(0), 1, 0)

    return main


def philox_across_a_barrier(threads: int = 8, seed: int = 99) -> T.PrimFunc:
    """Thread t: T.rng_init(seed, t, 0), a barrier of the block, then two words of its own stream into
    W[t, :] (each thread keeps its own generator state across the barrier, as on a GPU)."""

    @T.prim_func
    def main(W: T.Tensor((threads, 2), "int32")) -> None:
        with T.Kernel(1, threads=threads):
            t = T.get_thread_binding()
            T.rng_init(seed, t, 0)
            T.sync_threads()
            W[t, 0] = T.reinterpret("int32", T.rng_rand())
            W[t, 1] = T.reinterpret("int32", T.rng_rand())

    return main


def draws_in_a_parallel_loop(n: int = 64, threads: int = 32) -> T.PrimFunc:
    """U[i] = a uniform draw inside a T.Parallel loop of a block of ``threads`` threads (which thread
    draws for which element is the loop's layout)."""

    @T.prim_func
    def main(U: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(1, threads=threads):
            T.rng_init(7)
            for i in T.Parallel(n):
                U[i] = T.rng_rand_float()

    return main


def store_of_another_width(scalar: bool = False) -> T.PrimFunc:
    """A store by hand whose value is not of its width (a wrong kernel, which the GPU's compiler
    rejects): 64 loaded bits stored by T.stg128, or (``scalar``) one 64-bit integer by T.stg64."""

    @T.prim_func
    def wide(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")) -> None:
        with T.Kernel(1, threads=32):
            T.stg128(Y[0:4], T.ldg64(X[0:2]))

    @T.prim_func
    def one(X: T.Tensor((8,), "uint32"), Y: T.Tensor((8,), "uint32")) -> None:
        with T.Kernel(1, threads=32):
            T.stg64(Y[0:2], T.Cast("uint64", X[0]))

    return one if scalar else wide


def byte_dots(n: int = 16, words: int = 2) -> T.PrimFunc:
    """C[t] = C0[t] + the dot product of A's and B's rows of 4 * words int8 (thread t's row), four bytes
    at a time by T.dp4a, from per-thread copies of the rows."""

    @T.prim_func
    def main(A: T.Tensor((n, 4 * words), T.int8), B: T.Tensor((n, 4 * words), T.int8),
             C0: T.Tensor((n,), T.int32), C: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            t = T.get_thread_binding()
            a = T.alloc_local((4 * words,), T.int8)
            b = T.alloc_local((4 * words,), T.int8)
            acc = T.alloc_local((1,), T.int32)
            for k in T.serial(4 * words):
                a[k] = A[t, k]
                b[k] = B[t, k]
            acc[0] = C0[t]
            for w in T.serial(words):
                T.dp4a(a[w * 4], b[w * 4], acc[0])
            C[t] = acc[0]

    return main


def explicit_wgmma(m: int = 64, n: int = 64, k: int = 32, k_tiles: int = 2) -> T.PrimFunc:
    """D = A @ B.T by T.wgmma_gemm over ``k_tiles`` slices of K of shared tiles (float16 in, a float32
    fragment accumulating), the wait by hand (T.wait_wgmma) after the last."""

    kt = k // k_tiles

    @T.prim_func
    def main(A: T.Tensor((m, k), "float16"), B: T.Tensor((n, k), "float16"), D: T.Tensor((m, n), "float32")) -> None:
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((m, k), "float16")
            b = T.alloc_shared((n, k), "float16")
            acc = T.alloc_fragment((m, n), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            for j in T.serial(k_tiles):
                T.wgmma_gemm(a[:, j * kt:(j + 1) * kt], b[:, j * kt:(j + 1) * kt], acc, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(acc, D)

    return main


def wgmma_wait_alone(n: int = 64) -> T.PrimFunc:
    """A T.wait_wgmma with no T.wgmma_gemm before it (it would wait for WGMMA instructions written by
    hand): Y = X."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(1, threads=128):
            T.wait_wgmma(0)
            for i in T.Parallel(n):
                Y[i] = X[i]

    return main


def packed_fma_abs(dtype: str = "float32", n: int = 64) -> T.PrimFunc:
    """Per pair of elements (thread t: elements 2t, 2t + 1): D = T.fma2(A, B, C), E = T.abs2(A),
    F = T.add2(A, B) (a pair TileLang's C builds, whose store uses the bound ramp as it is), as stores
    of the pair (a ramp of two indices, bound once)."""

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype),
             D: T.Tensor((n,), dtype), E: T.Tensor((n,), dtype), F: T.Tensor((n,), dtype)) -> None:
        with T.Kernel(1, threads=n // 2):
            t = T.get_thread_binding()
            at = T.Ramp(t * 2, 1, 2)
            D[at] = T.fma2(A[at], B[at], C[at])
            E[at] = T.abs2(T.Cast(dtype + "x2", A[at]))  # the cast (to its own type) names the dtype in the body
            F[at] = T.add2(A[at], B[at])

    return main


def wide_loads_as_floats(n: int = 64) -> T.PrimFunc:
    """Y2 = X by T.reinterpret(T.ldg64(X[2i:2i + 2]), float32x2), Y4 = X by T.ldg128 as float32x4."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y2: T.Tensor((n,), "float32"), Y4: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(n // 4, threads=32) as bx:
            Y2[bx * 4:bx * 4 + 2] = T.reinterpret(T.ldg64(X[bx * 4:bx * 4 + 2]), T.float32x2)
            Y2[bx * 4 + 2:bx * 4 + 4] = T.reinterpret(T.ldg64(X[bx * 4 + 2:bx * 4 + 4]), T.float32x2)
            Y4[bx * 4:bx * 4 + 4] = T.reinterpret(T.ldg128(X[bx * 4:bx * 4 + 4]), T.float32x4)

    return main


def pair_lanes(dtype: str = "bfloat16") -> T.PrimFunc:
    """A pair held in a vector local (T.alloc_var of float16x2 / bfloat16x2) built from A[1] * 3 and
    A[0], its lanes read back by T.extract_lane: B = (A[1] * 3, A[0])."""

    @T.prim_func
    def main(A: T.Tensor((2,), dtype), B: T.Tensor((2,), dtype)) -> None:
        with T.Kernel(1, threads=1):
            pair = T.alloc_var(dtype + "x2")
            pair = T.Shuffle([A[1] * T.cast(3.0, dtype), A[0]], [0, 1])
            B[0] = T.extract_lane(pair, 0)
            B[1] = T.extract_lane(pair, 1)

    return main


def shared_views(new_dtype: str = "int32", rows: int = 4, cols: int = 8) -> T.PrimFunc:
    """A float32 shared tile viewed as ``new_dtype`` (int32: its bits; bfloat16: two halves of each
    word, which the CPU cannot give: it holds bfloat16 in float32): B = the view's elements."""
    per = 32 // {"int32": 32, "bfloat16": 16, "int8": 8}[new_dtype]

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols * per), new_dtype)) -> None:
        with T.Kernel(1, threads=32):
            tile = T.alloc_shared((rows, cols), "float32")
            seen = T.view(tile, (rows, cols * per), dtype=new_dtype)
            T.copy(A, tile)
            T.copy(seen, B)

    return main


def generator_draws(generator: str, threads: int = 4, draws: int = 5, seed: int = 0, offset: int = 0,
                    first_seq: int = 0, double_normals: bool = False) -> T.PrimFunc:
    """Thread t: T.rng_init(seed, first_seq + t, offset, generator=generator), then ``draws`` words of its
    stream (their bits as int32) into W[t, :], a uniform float into U[t], a uniform double into D[t],
    three normal floats into G[t, :] and (``double_normals``) two normal doubles into H[t, :]."""

    @T.prim_func
    def main(W: T.Tensor((threads, draws), "int32"), U: T.Tensor((threads,), "float32"),
             D: T.Tensor((threads,), "float64"), G: T.Tensor((threads, 3), "float32"),
             H: T.Tensor((threads, 2), "float64")) -> None:
        with T.Kernel(1, threads=threads):
            t = T.get_thread_binding()
            T.rng_init(seed, first_seq + t, offset, generator=generator)
            for k in T.serial(draws):
                W[t, k] = T.reinterpret("int32", T.rng_rand())
            U[t] = T.rng_rand_float()
            D[t] = T.rng_rand_float(64)
            for k in T.serial(3):
                G[t, k] = T.rng_rand_float(32, "normal")
            if double_normals:
                for k in T.serial(2):
                    H[t, k] = T.rng_rand_float(64, "normal")

    return main
