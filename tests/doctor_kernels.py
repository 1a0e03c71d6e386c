"""Small kernels of ours that TileLang 0.1.15 cannot lower, one for each known cause in
tilelab's catalogue (``tilelab._tilelang.doctor``). ``KERNELS`` maps a cause id to (factory, target, the pass
that fails). The line each failure belongs to carries the comment ``# <- <cause id>``: the tests
read the expected kernel line from this file's text, not from tilelab."""

import tilelang.language as T


def gemm(M=256, N=256, K=256, bM=128, bN=128, bK=32, threads=128, a_dtype=T.float16, b_dtype=T.float16,
         acc=T.float32):
    @T.prim_func
    def k(A: T.Tensor((M, K), a_dtype), B: T.Tensor((K, N), b_dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), a_dtype)
            B_s = T.alloc_shared((bK, bN), b_dtype)
            C_l = T.alloc_fragment((bM, bN), acc)  # <- gpu-only-on-cpu
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)  # <- mixed-dtype-gemm no-warp-partition feature-newer-arch mma-dtype mma-tile-shape threads-below-wavefront mma-accumulator-dtype
            T.copy(C_l, C[by * bM, bx * bN])

    return k


def accumulator_in_shared(M=256, N=256, K=256):
    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_s = T.alloc_shared((128, 128), T.float32)
            T.clear(C_s)
            for ko in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 128, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_s)  # <- accumulator-not-fragment
            T.copy(C_s, C[by * 128, bx * 128])

    return k


def mixed_dtypes():
    return gemm(b_dtype=T.float32)


def int4_through_tma():
    return gemm(a_dtype=T.int4, b_dtype=T.int4, acc=T.int32)


def three_warps():
    return gemm(threads=96)


def copy_shapes_differ(M=256, N=256):
    @T.prim_func
    def k(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            tile = T.alloc_shared((64, 32), T.float16)
            frag = T.alloc_fragment((64, 64), T.float16)
            T.copy(A[by * 64, bx * 64], tile)
            T.copy(tile, frag)  # <- copy-shape-mismatch
            T.copy(frag, B[by * 64, bx * 64])

    return k


def float_extent():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            tile = T.alloc_shared((256 / 2,), T.float32)
            T.copy(A, tile)  # <- non-integer-shape
            T.copy(tile, B)

    return k


def fragment_of_runtime_size():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            frag = T.alloc_fragment((n,), T.float32)  # <- symbolic-fragment
            T.copy(A, frag)
            T.copy(frag, B)

    return k


def reduce_keeps_dim():
    @T.prim_func
    def k(A: T.Tensor((128, 128), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            frag = T.alloc_fragment((128, 128), T.float32)
            row = T.alloc_fragment((128, 2), T.float32)
            T.copy(A, frag)
            T.reduce_sum(frag, row, dim=1)  # <- reduce-output-shape
            T.copy(row[:, 0], B)

    return k


def one_index_for_two_dims():
    @T.prim_func
    def k(A: T.Tensor((128, 128), T.float32), B: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            for i, j in T.Parallel(128, 128):
                B[i, j] = A[i]  # <- index-rank

    return k


def halving_layout():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as _bx:
            tile = T.alloc_shared((64, 64), T.float16)
            T.annotate_layout({tile: T.Layout((64, 64), lambda i, j: [i // 2, j])})  # <- layout-not-injective
            T.copy(A, tile)
            T.copy(tile, B)

    return k


def row_max_indexed_by_column():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((128, 64), T.float16)
            b = T.alloc_shared((64, 128), T.float16)
            scores = T.alloc_fragment((128, 128), T.float32)
            row_max = T.alloc_fragment((128,), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(scores)
            T.gemm(a, b, scores)
            T.reduce_max(scores, row_max, dim=1)
            for i, j in T.Parallel(128, 128):  # <- layout-conflict
                scores[i, j] = scores[i, j] - row_max[j]
            T.copy(scores, C)

    return k


def grid_from_unbound_size():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as _bx:  # <- unbound-symbol
            for i in T.Parallel(128):
                B[i] = A[i]

    return k


def loop_outside_kernel():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        for i in T.Parallel(128):
            B[i] = A[i]  # <- outside-kernel

    return k


def fill_with_text():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            frag = T.alloc_fragment((128,), T.float32)
            T.fill(frag, "0")
            T.copy(frag, A)

    return k


def intrinsic_by_name():
    @T.prim_func
    def k(A: T.Tensor((16, 16), T.float16), C: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=64) as _bx:
            T.call_intrin("handle", "tl.tvm_mfma", 0)  # <- string-intrinsic

    return k


def typo_in_body(M=256):
    @T.prim_func
    def k(A: T.Tensor((M,), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * scael  # noqa: F821  # <- python-name

    return k


def copy_with_extra_arguments():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128) as _bx:
            tile = T.alloc_shared((128, 64), T.float16)
            T.copy(A, tile)
            T.copy(tile, B, 1, 2, 3, 4)  # <- wrong-arguments

    return k


def int4_in_the_second_copy(M=256, N=256):
    """Two copies into shared memory, only the second of int4 data: the failure is placed on it,
    not on the first T.copy of the kernel."""

    @T.prim_func
    def k(A: T.Tensor((M, N), T.float16), Q: T.Tensor((M, N), T.int4), B: T.Tensor((M, N), T.float16),
          R: T.Tensor((M, N), T.int4)):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            a = T.alloc_shared((64, 64), T.float16)
            q = T.alloc_shared((64, 64), T.int4)
            T.copy(A[by * 64, bx * 64], a)
            T.copy(Q[by * 64, bx * 64], q)  # <- int4-tma-copy
            T.copy(a, B[by * 64, bx * 64])
            T.copy(q, R[by * 64, bx * 64])

    return k


def schedule_names_a_missing_pipeline():
    """A hand-written warp-specialisation schedule whose consumer waits on "tile", a pipeline the
    schedule never declares (it declares "tiles"). Its signature spans lines, closed at the def's
    indentation: the kernel's source still reaches the schedule."""

    @T.prim_func
    def k(
        X: T.Tensor((512, 64), T.float32),
        Y: T.Tensor((512, 64), T.float32),
    ):
        with T.Kernel(1, threads=128) as _:
            tile = T.alloc_shared((64, 64), T.float32)
            regs = T.alloc_fragment((64, 64), T.float32)
            loader = [T.WSSync.producer_acquire("tiles"), "load", T.WSSync.producer_commit("tiles")]
            math = [
                T.WSSync.consumer_wait("tile"),  # <- ws-schedule
                "to_regs",
                T.WSSync.consumer_release("tiles"),
                "store",
            ]
            T.annotate_ws_schedule(T.WSSchedule(
                num_warps=8,
                roles=[T.WSRole("loader", warps_lo=0, warps_hi=1), T.WSRole("math", warps_lo=4, warps_hi=8)],
                pipelines=[T.WSPipeline("tiles", [tile], depth=2)],
                scopes=[T.WSScope("rows", {"loader": loader, "math": math}),
                        T.WSScope(T.WSScope.ROOT, {"loader": ["rows"], "math": ["rows"]})]))
            for r in T.Pipelined(8, num_stages=2, annotations={T.WSID: "rows"}):
                T.copy(X[r * 64, 0], tile, annotations={T.WSID: "load"})
                T.copy(tile, regs, annotations={T.WSID: "to_regs"})
                T.copy(regs, Y[r * 64, 0], annotations={T.WSID: "store"})

    return k


def parallel_over_runtime_size():
    """Two T.Parallel loops writing a fragment: the first over the constant tile (guarded), the second
    over the runtime size n, which a fragment cannot be indexed by."""
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((64, n), T.float32), B: T.Tensor((64, 128), T.float32)):
        with T.Kernel(64, threads=128) as row:
            acc = T.alloc_fragment((128,), T.float32)
            for j in T.Parallel(128):
                acc[j] = T.if_then_else(j < n, A[row, j], 0.0)
            for j in T.Parallel(n):  # <- symbolic-parallel-fragment
                acc[j] = acc[j] * 2.0
            T.copy(acc, B[row, 0])

    return k


def three_warpgroups_on_104_columns():
    return gemm(M=256, N=208, bM=64, bN=104, threads=384)


def column_max_in_a_serial_loop():
    """The column maxima of a T.gemm result walked row by row in a T.serial loop: the accumulator's
    elements live in other threads' registers."""

    @T.prim_func
    def k(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), M: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            best = T.alloc_fragment((64,), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc)
            T.fill(best, -T.infinity(T.float32))
            for col in T.Parallel(64):
                for row in T.serial(64):
                    best[col] = T.max(best[col], acc[row, col])  # <- serial-index-into-fragment
            T.copy(best, M)

    return k


def tcgen05_gemm_without_its_barrier():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((128, 64), T.float16)
            b = T.alloc_shared((64, 128), T.float16)
            c = T.alloc_tmem((128, 128), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.tcgen05_gemm(a, b, c)  # <- wrong-arguments-keyword
            T.copy(c, C)

    return k


def fp4_weights_unpacked_by_threads():
    """Scales copied first, then fp4 weights (packed in global memory) copied by the threads into an
    unpacked shared tile."""

    @T.prim_func
    def k(W: T.Tensor((128, 128), T.float4_e2m1fn), S: T.Tensor((128,), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            scales = T.alloc_shared((64,), T.float16)
            tile = T.alloc_shared((64, 128), T.float4_e2m1_unpacked)
            T.copy(S[bx * 64], scales)
            T.copy(W[bx * 64, 0], tile)  # <- fp4-unpack-copy

    return k


def column_maxima_over_96_threads():
    """Column maxima of a tile spread over 96 threads: the threads holding a column are 24 apart, and
    a butterfly over lanes needs a power-of-two stride."""

    @T.prim_func
    def k(A: T.Tensor((96, 96), T.float32), B: T.Tensor((96,), T.float32)):
        with T.Kernel(1, threads=96) as _bx:
            tile = T.alloc_fragment((96, 96), T.float32)
            top = T.alloc_fragment((96,), T.float32)
            T.copy(A, tile)
            T.reduce_max(tile, top, dim=0)  # <- reduce-threads-not-power-of-two
            T.copy(top, B)

    return k


def async_copy_between_shared_tiles():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as _bx:
            first = T.alloc_shared((64, 64), T.float16)
            second = T.alloc_shared((64, 64), T.float16)
            T.async_copy(A, first)
            T.async_copy(first, second)  # <- async-copy-scope
            T.copy(second, B)

    return k


def tcgen05_on_a_k_slice_off_its_step():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((128, 64), T.float16)
            b = T.alloc_shared((64, 128), T.float16)
            c = T.alloc_tmem((128, 128), T.float32)
            done = T.alloc_barrier(1)
            T.copy(A, a)
            T.copy(B, b)
            T.tcgen05_gemm(a[:, 8:24], b[8:24, :], c, mbar=done, clear_accum=True)  # <- tcgen05-k-origin
            T.copy(c, C)

    return k


def view_of_more_bits():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128) as _bx:
            _wide = T.view(A, (64, 48), dtype=T.float32)  # <- view-bit-count
            T.copy(A, B)

    return k


def fragments_on_the_cpu():
    return gemm(M=128, N=128, K=64)


def cta_pair_mma(cluster=False):
    """A 256-column tcgen05 GEMM shared by two CTAs (use_2cta=True); with ``cluster`` the pair is
    launched as one cluster of two, as the MMA needs."""

    @T.prim_func
    def k(A: T.Tensor((256, 64), T.bfloat16), B: T.Tensor((256, 64), T.bfloat16)):
        with (T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) if cluster else T.Kernel(2, threads=128)) as bx:
            a = T.alloc_shared((128, 64), T.bfloat16)
            b = T.alloc_shared((128, 64), T.bfloat16)
            acc = T.alloc_tmem((128, 256), T.float32)
            bar = T.alloc_cluster_barrier(1) if cluster else T.alloc_barrier(1)
            T.copy(A[bx * 128, 0], a)
            T.copy(B[bx * 128, 0], b)
            T.tcgen05_gemm(a, b, acc, transpose_B=True, mbar=bar, clear_accum=True, use_2cta=True)  # <- tcgen05-2cta-no-cluster

    return k


def wgmma_on_two_warps():
    """A 64x64 WGMMA product in a block of 64 threads: half a warpgroup."""

    @T.prim_func
    def k(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=64) as _bx:
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.wgmma_gemm(a, b, acc, clear_accum=True)  # <- wgmma-constraints
            T.copy(acc, C)

    return k


def tcgen05_into_registers():
    """A tcgen05 product accumulated into a register fragment instead of tensor memory."""

    @T.prim_func
    def k(A: T.Tensor((128, 32), T.bfloat16), B: T.Tensor((32, 64), T.bfloat16), C: T.Tensor((128, 64), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((128, 32), T.bfloat16)
            b = T.alloc_shared((32, 64), T.bfloat16)
            acc = T.alloc_fragment((128, 64), T.float32)
            done = T.alloc_barrier(1)
            T.copy(A, a)
            T.copy(B, b)
            T.tcgen05_gemm(a, b, acc, mbar=done, clear_accum=True)  # <- tcgen05-constraints
            T.copy(acc, C)

    return k


def double_precision_rsqrt(inverse_root=T.ieee_frsqrt):
    """The intrinsic is passed in (the kernel's text does not name it): placed by the call's store."""

    @T.prim_func
    def k(X: T.Tensor((256,), T.float64), Y: T.Tensor((256,), T.float64)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = inverse_root(X[bx * 128 + i])  # <- ieee-math-dtype

    return k


def half_product_rounded_up():
    @T.prim_func
    def k(X: T.Tensor((128,), T.bfloat16), Y: T.Tensor((128,), T.bfloat16), Z: T.Tensor((128,), T.bfloat16)):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(128):
                Z[i] = T.ieee_mul(X[i], Y[i], rounding_mode="ru")  # <- ieee-half-rounding

    return k


def mbarrier_handshake():
    """Two warps hand a shared tile over through an mbarrier (lowered for sm_80 it fails)."""

    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _bx:
            tile = T.alloc_shared((64,), T.float32)
            filled = T.alloc_barrier(64)  # <- barrier-before-hopper
            T.copy(A, tile)
            T.barrier_arrive(filled)
            T.barrier_wait(filled, 0)
            T.copy(tile, B)

    return k


def fragment_map(rows_apart=64):
    """Each row of a 2x64 fragment spread over 16 threads, 4 values each; the second row's threads
    start ``rows_apart`` threads after the first's (64 leaves threads 16-63 out: a gap)."""

    @T.prim_func
    def k(X: T.Tensor((2, 64), T.float32), Y: T.Tensor((2, 64), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            rows = T.alloc_fragment((2, 64), T.float32)
            T.annotate_layout({rows: T.Fragment(rows.shape, forward_fn=lambda i, j: (i * rows_apart + j // 4, j % 4))})  # <- layout-not-normalisable
            T.copy(X, rows)
            T.copy(rows, Y)

    return k


def row_scale_then_columns():
    """Scales each row, then a second T.Parallel over the columns below that statement."""

    @T.prim_func
    def k(A: T.Tensor((32, 32), T.float32), S: T.Tensor((32,), T.float32), B: T.Tensor((32, 32), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(32):
                s = S[i] * 0.5
                for j in T.Parallel(32):  # <- parallel-in-parallel
                    B[i, j] = A[i, j] * s

    return k


def pipeline_per_row():
    @T.prim_func
    def k(A: T.Tensor((16, 256), T.float32), B: T.Tensor((16, 256), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            for r in T.Parallel(16):
                for c in T.Pipelined(8, num_stages=2):  # <- pipelined-in-parallel
                    B[r, c * 32] = A[r, c * 32]

    return k


def copy_per_row():
    @T.prim_func
    def k(A: T.Tensor((8, 128), T.float16), B: T.Tensor((8, 128), T.float16)):
        with T.Kernel(1, threads=128) as _bx:
            line = T.alloc_shared((128,), T.float16)
            for r in T.Parallel(8):
                T.copy(A[r, :], line)  # <- tile-op-in-parallel
                T.copy(line, B[r, :])

    return k


def private_scratch_spread():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            scratch = T.alloc_local((128,), T.float32)
            for t in T.Parallel(128):
                scratch[t] = A[t] + 1.0  # <- local-indexed-by-parallel
            for t in T.Parallel(128):
                B[t] = scratch[t]

    return k


def wgmma_on_24_columns():
    """Not in the catalogue: a WGMMA product 24 columns wide, whose B tile TileLang 0.1.15 cannot
    lay out for the instruction (tests check what an unknown failure still shows)."""

    @T.prim_func
    def k(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 24), T.float16), C: T.Tensor((64, 24), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((32, 24), T.float16)
            acc = T.alloc_fragment((64, 24), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.wgmma_gemm(a, b, acc, clear_accum=True)  # <- unknown
            T.copy(acc, C)

    return k


# -- causes found by mechanism (tilelab._mechanisms): TileLang's sentence does not name them ----------------
def fp4_product_on_hopper():
    """fp4 tensor-core operands (Blackwell's) in a GEMM lowered for Hopper."""
    return gemm(a_dtype=T.float4_e2m1fn, b_dtype=T.float4_e2m1fn)


def int4_product_on_mi300():
    """A GEMM of int4 operands, which MI300's MFMA does not multiply."""
    return gemm(a_dtype=T.int4, b_dtype=T.int4, acc=T.int32)


def int4_sums_on_mi300():
    """A GEMM of float16 operands summed into an int4 accumulator, which no matrix instruction writes."""
    return gemm(acc=T.int4)


def row_maxima_start_at_fp8_infinity():
    """A running row maximum kept in float8_e4m3fn, which has no infinity, starts at -infinity."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            f = T.alloc_fragment((64, 64), T.float32)
            m = T.alloc_fragment((64,), T.float8_e4m3fn)
            T.copy(A, f)
            T.fill(m, -T.infinity(T.float8_e4m3fn))  # <- no-infinity-dtype
            T.reduce_max(f, m, dim=1, clear=False)
            T.copy(m, B)

    return k


def k_step_of_40():
    """block_K=40: not a whole number of 16-deep fp16 MMA steps."""
    return gemm(bK=40)


def half_a_wavefront():
    """A GEMM in a block of 32 threads on a GPU whose wavefronts have 64 lanes."""
    return gemm(threads=32)


def operand_in_thread_memory():
    """The A tile of a GEMM in T.alloc_local (each thread's private memory)."""
    @T.prim_func
    def k(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16), C: T.Tensor((256, 256), T.float32)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_t = T.alloc_local((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for ko in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 128, ko * 32], A_t)
                T.copy(B[ko * 32, bx * 128], B_s)
                T.gemm(A_t, B_s, C_l)  # <- scope-for-op
            T.copy(C_l, C[by * 128, bx * 128])

    return k


def b_transposed_twice():
    """B is stored K x N and the call says transpose_B=True: the K extents differ."""
    @T.prim_func
    def k(A: T.Tensor((128, 32), T.float16), B: T.Tensor((32, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((128, 32), T.float16)
            b = T.alloc_shared((32, 128), T.float16)
            c = T.alloc_fragment((128, 128), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=True)  # <- gemm-k-mismatch
            T.copy(c, C)

    return k


def row_sums_of_a_private_tile():
    """A reduction whose source is T.alloc_local (a thread's own copy), into a fragment."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            tile = T.alloc_local((64, 64), T.float32)
            sums = T.alloc_fragment((64,), T.float32)
            T.copy(A, tile)
            T.reduce_sum(tile, sums, dim=1)  # <- scope-for-op
            T.copy(sums, B)

    return k


def bulk_copy_without_its_barrier():
    """A T.tma_copy of a tile into shared memory given no mbarrier to complete on."""
    @T.prim_func
    def k(A: T.Tensor((256, 64), T.float16), B: T.Tensor((256, 64), T.float16)):
        with T.Kernel(4, threads=128) as bx:
            tile = T.alloc_shared((64, 64), T.float16)
            T.tma_copy(A[bx * 64, 0], tile)  # <- copy-between-memories
            T.copy(tile, B[bx * 64, 0])

    return k


def assert_on_mi300():
    """T.device_assert, which the HIP code generator of TileLang 0.1.15 cannot translate."""
    @T.prim_func
    def k(A: T.Tensor((1024,), T.float32)):
        with T.Kernel(4, threads=256) as bx:
            for i in T.Parallel(256):
                T.device_assert(A[bx * 256 + i] >= 0, "negative")  # <- codegen-intrinsic

    return k


def pairs_folded_onto_one_column():
    """Each iteration (i, j) writes f[i, j // 2]: iterations j and j + 1 write one element."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            f = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):  # <- parallel-layout-not-injective
                f[i, j // 2] = f[i, j] * 2.0
            T.copy(f, B)

    return k


def tile_plus_its_transpose():
    """One loop reads f[i, j] and f[j, i]: the same fragment in two index patterns."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            f = T.alloc_fragment((64, 64), T.float32)
            g = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):  # <- parallel-layout-conflict
                g[i, j] = f[i, j] + f[j, i]
            T.copy(g, B)

    return k


def scores_handed_to_the_next_gemm():
    """S = Q K^T then S @ V with S copied into a register fragment P: the first GEMM's default
    (Square) policy splits S's columns over warps, and P as the second GEMM's A operand needs
    whole rows in one warp."""
    @T.prim_func
    def k(Q: T.Tensor((64, 32), T.float16), K: T.Tensor((64, 32), T.float16), V: T.Tensor((64, 32), T.float16),
          Out: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128) as _bx:
            Q_s = T.alloc_shared((64, 32), T.float16)
            K_s = T.alloc_shared((64, 32), T.float16)
            V_s = T.alloc_shared((64, 32), T.float16)
            S = T.alloc_fragment((64, 64), T.float32)
            P = T.alloc_fragment((64, 64), T.float16)
            acc = T.alloc_fragment((64, 32), T.float32)
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.copy(V, V_s)
            T.clear(S)
            T.gemm(Q_s, K_s, S, transpose_B=True)
            T.copy(S, P)  # <- gemm-operand-layout
            T.clear(acc)
            T.gemm(P, V_s, acc)
            T.copy(acc, Out)

    return k


# cause id -> (factory, target, the pass that fails; "elaboration" while the prim_func is built).
# copy_with_extra_arguments (wrong-arguments) fails while the cell runs, before there is a kernel to
# inspect: tests build it as the magic runs a cell.
KERNELS = {
    "accumulator-not-fragment": (accumulator_in_shared, "sm_90a", "tl.LayoutInference"),
    "mixed-dtype-gemm": (mixed_dtypes, "sm_90a", "tl.LayoutInference"),
    "int4-tma-copy": (int4_in_the_second_copy, "sm_90a", "tl.LowerTileOp"),
    "async-copy-scope": (async_copy_between_shared_tiles, "sm_90a", "tl.LayoutInference"),
    "tcgen05-k-origin": (tcgen05_on_a_k_slice_off_its_step, "sm_100a", "tl.LowerTileOp"),
    "fp4-unpack-copy": (fp4_weights_unpacked_by_threads, "sm_90a", "tl.LayoutInference"),
    "no-warp-partition": (three_warps, "sm_90a", "tl.LayoutInference"),
    "symbolic-parallel-fragment": (parallel_over_runtime_size, "sm_90a", "tl.FragmentLoopChecker"),
    "copy-shape-mismatch": (copy_shapes_differ, "sm_90a", "elaboration"),
    "non-integer-shape": (float_extent, "sm_90a", "elaboration"),
    "symbolic-fragment": (fragment_of_runtime_size, "sm_90a", "tl.LayoutInference"),
    "reduce-output-shape": (reduce_keeps_dim, "sm_90a", "elaboration"),
    "index-rank": (one_index_for_two_dims, "sm_90a", "elaboration"),
    "serial-index-into-fragment": (column_max_in_a_serial_loop, "sm_90a", "tl.LayoutInference"),
    "reduce-threads-not-power-of-two": (column_maxima_over_96_threads, "sm_90a", "tl.LowerTileOp"),
    "layout-not-injective": (halving_layout, "sm_90a", "tl.LayoutInference"),
    "layout-conflict": (row_max_indexed_by_column, "sm_90a", "tl.LayoutInference"),
    "ws-schedule": (schedule_names_a_missing_pipeline, "sm_90a", "tl.MaterializeWSSchedule"),
    "unbound-symbol": (grid_from_unbound_size, "sm_90a", "tl.MakePackedAPI"),
    "outside-kernel": (loop_outside_kernel, "sm_90a", "tirx.VerifyMemory"),
    "handle-as-value": (fill_with_text, "sm_90a", "tl.Simplify"),
    "string-intrinsic": (intrinsic_by_name, "sm_90a", "elaboration"),
    "python-name": (typo_in_body, "sm_90a", "elaboration"),
    "gpu-only-on-cpu": (fragments_on_the_cpu, "c", "tl.LayoutInference"),
    "tcgen05-2cta-no-cluster": (cta_pair_mma, "sm_100a", "tl.LowerBlackwell2SM"),
    "wgmma-constraints": (wgmma_on_two_warps, "sm_90a", "tl.LayoutInference"),
    "tcgen05-constraints": (tcgen05_into_registers, "sm_100a", "tl.LayoutInference"),
    "ieee-math-dtype": (double_precision_rsqrt, "sm_90a", "codegen"),
    "ieee-half-rounding": (half_product_rounded_up, "sm_90a", "codegen"),
    "barrier-before-hopper": (mbarrier_handshake, "sm_80", "tl.LowerSharedBarrier"),
    "layout-not-normalisable": (fragment_map, "sm_90a", "tl.LayoutInference"),
    "parallel-in-parallel": (row_scale_then_columns, "sm_90a", "tl.NestedLoopChecker"),
    "pipelined-in-parallel": (pipeline_per_row, "sm_90a", "tl.NestedLoopChecker"),
    "tile-op-in-parallel": (copy_per_row, "sm_90a", "tl.NestedLoopChecker"),
    "local-indexed-by-parallel": (private_scratch_spread, "sm_90a", "tl.ParallelLocalIndexChecker"),
    # found by mechanism
    "feature-newer-arch": (fp4_product_on_hopper, "sm_90a", "tl.LowerTileOp"),
    "mma-dtype": (int4_product_on_mi300, "gfx942", "tl.LayoutInference"),
    "mma-tile-shape": (k_step_of_40, "sm_90a", "tl.LowerTileOp"),
    "threads-below-wavefront": (half_a_wavefront, "gfx942", "tl.LayoutInference"),
    "scope-for-op": (operand_in_thread_memory, "sm_90a", "tl.LayoutInference"),
    "gemm-k-mismatch": (b_transposed_twice, "sm_90a", "elaboration"),
    "copy-between-memories": (bulk_copy_without_its_barrier, "sm_90a", "tl.LowerTileOp"),
    "codegen-intrinsic": (assert_on_mi300, "gfx942", "codegen"),
    "parallel-layout-not-injective": (pairs_folded_onto_one_column, "sm_90a", "tl.LayoutInference"),
    "parallel-layout-conflict": (tile_plus_its_transpose, "sm_90a", "tl.LayoutInference"),
    "gemm-operand-layout": (scores_handed_to_the_next_gemm, "sm_80", "tl.LayoutInference"),
    "mma-accumulator-dtype": (int4_sums_on_mi300, "gfx942", "tl.LayoutInference"),
    "no-infinity-dtype": (row_maxima_start_at_fp8_infinity, "sm_90a", "tl.LowerIntrin"),
}
