"""Our kernels for the GPU fault tests, in a file: TileLang reads a kernel's source from its file."""


import tilelang.language as T


def clobber(N=4096, block=256):
    @T.prim_func
    def scale(A: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = 2.0 * A[bx * block + i]
                if bx == 3:
                    A[bx * block + i] = 0.0
    return scale

def divide(M=256, N=256, block=64):
    @T.prim_func
    def div(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = (
                    (A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j])
                    / (A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j]))
    return div

def big_tiles(M=1024, N=1024, K=1024):
    # 2 x (256 x 128 + 128 x 256) fp16 per stage, 4 stages: 512 KiB of shared memory per block
    from tilelab.kernels.gemm import matmul
    return matmul(M, N, K, 256, 256, 128, num_stages=4)

def copy(N=1 << 20, block=1024):
    @T.prim_func
    def cp(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]
    return cp


def ws_pipeline_func(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64, stages=2, producer_parity=1,
                     empty_arrivals=128):
    """A warp-specialised GEMM with its own barriers: warp group 0 (the producer) fills a ring of
    ``stages`` shared-memory stages by TMA, warp group 1 (the consumer) multiplies them.
    ``full[s]``: the stage is loaded (the producer's 128 threads arrive, TMA's bytes complete it);
    ``empty[s]``: the stage is free again (the consumer's 128 threads arrive).

    Correct as written (``producer_parity=1``, ``empty_arrivals=128``). Two ways to deadlock it:
    ``producer_parity=0`` makes the producer's first wait on ``empty`` block (a fresh barrier's
    phase 0 completes only once the consumer frees the stage, which it cannot before it was
    filled); ``empty_arrivals=256`` makes ``empty`` expect more arrivals than the consumer's 128
    threads, so no stage is ever freed and both sides stop at iteration ``stages``."""

    @T.prim_func
    def ws_gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, block_M, block_K), T.float16)
            B_s = T.alloc_shared((stages, block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([empty_arrivals] * stages)
            with T.ws(1):
                T.clear(C_l)
            with T.ws(0):
                for ko in range(T.ceildiv(K, block_K)):
                    T.mbarrier_wait_parity(empty[ko % stages], ((ko // stages) % 2) ^ producer_parity)
                    T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                               A_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                               B_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.mbarrier_arrive(full[ko % stages])
            with T.ws(1):
                for ko in range(T.ceildiv(K, block_K)):
                    T.mbarrier_wait_parity(full[ko % stages], (ko // stages) % 2)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_l)
                    T.mbarrier_arrive(empty[ko % stages])
                T.copy(C_l, C[by * block_M, bx * block_N])
    return ws_gemm


# The two roles synchronise through their own barriers only: the block-wide __syncthreads TileLang
# would otherwise put between them (its shared-memory sync pass sees both sides touch A_s, B_s)
# would serialise the producer's whole loop before the consumer's, and deadlock any ring shorter
# than the loop.
WS_PASS_CONFIGS = {"tl.disable_thread_storage_sync": True}


def ws_pipeline(**kw):
    """:func:`ws_pipeline_func`, compiled for this GPU."""
    import tilelang

    return tilelang.compile(ws_pipeline_func(**kw), pass_configs=WS_PASS_CONFIGS)


def wrong_parity():
    """The pipeline deadlocked by a wrong parity: the producer's first wait on ``empty`` blocks."""
    return ws_pipeline(producer_parity=0)


def fewer_arrivals():
    """The pipeline deadlocked by fewer arrivals than ``empty`` expects (256; the consumer's 128 come)."""
    return ws_pipeline(empty_arrivals=256)
# --- device-side asserts, a trap, a TMA descriptor the driver refuses at launch -----------------

def asserting(N=4096, block=256):
    # every element of A must be non-negative; the message names this line (T.device_assert's stack)
    @T.prim_func
    def checked(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.device_assert(A[bx * block + i] >= 0.0, "A must be non-negative")
                B[bx * block + i] = A[bx * block + i]
    return checked

def asserting_bare(N=4096, block=256):
    # the same check without a message: CUDA's line then names TileLang's helper, not this file
    @T.prim_func
    def checked_bare(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.device_assert(A[bx * block + i] >= 0.0, no_stack_info=True)
                B[bx * block + i] = A[bx * block + i]
    return checked_bare

def trapping(N=4096, block=256):
    @T.prim_func
    def trap_on_negative(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if A[bx * block + i] < 0.0:
                    T.call_extern("void", "__trap")
                B[bx * block + i] = A[bx * block + i]
    return trap_on_negative

def tma_rows(M=256, block_m=64, block_k=64):
    # B's tiles are stored by TMA; its row stride K * 2 bytes must be a multiple of 16 (K of 8)
    K = T.dynamic("K")
    @T.prim_func
    def tma_rows(A: T.Tensor((M, K), T.float16), B: T.Tensor((M, K), T.float16)):
        with T.Kernel(T.ceildiv(K, block_k), T.ceildiv(M, block_m), threads=128) as (bx, by):
            tile = T.alloc_shared((block_m, block_k), T.float16)
            T.copy(A[by * block_m, bx * block_k], tile)
            T.copy(tile, B[by * block_m, bx * block_k])
    return tma_rows

def rows_copy(N=65536, block=1024):
    # M rows of N float32, M given at launch (M=1 << 20 asks for 256 GiB per tensor)
    M = T.dynamic("M")
    @T.prim_func
    def rows_copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), M, threads=256) as (bx, by):
            for i in T.Parallel(block):
                B[by, bx * block + i] = A[by, bx * block + i]
    return rows_copy
