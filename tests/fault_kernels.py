"""Kernels of our own for the GPU fault tests (tests/test_faults_gpu.py), in a file: TileLang reads
a kernel's source from its file."""

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
                C[by * block + i, bx * block + j] = (A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j]) / (
                    A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j])
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
