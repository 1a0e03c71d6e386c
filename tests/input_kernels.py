"""Kernels whose inputs a GPU launch takes as they are: an extent compiled as 0 (an empty tensor)
and tensors with strides of their own (T.StridedTensor). tests/launch/test_launch_cpu.py runs them
on the CPU; tests/launch/test_emulate_agreement_gpu.py on both. (No ``from __future__ import
annotations``: TileLang reads these signatures' sizes and strides from the closure.)"""

import tilelang.language as T


def row_sums_plus_one(rows: int, k: int) -> T.PrimFunc:
    """S[i] = 1 + the sum of A[i, :] (k columns; compiled with k = 0, a GPU launches it on an empty A)."""

    @T.prim_func
    def main(A: T.Tensor((rows, k), "float32"), S: T.Tensor((rows,), "float32")) -> None:
        with T.Kernel(1, threads=32):
            for i in T.Parallel(rows):
                S[i] = 1.0
                for j in T.serial(k):
                    S[i] += A[i, j]

    return main


def copy_columns(rows: int, cols: int, stride_a: int, stride_b: int) -> T.PrimFunc:
    """B = 2 A for column-major, padded tensors (T.StridedTensor with strides (1, stride))."""

    @T.prim_func
    def main(A: T.StridedTensor[(rows, cols), (1, stride_a), T.float32],
             B: T.StridedTensor[(rows, cols), (1, stride_b), T.float32]) -> None:
        with T.Kernel(1, threads=cols):
            col = T.get_thread_binding(0)
            for row in T.vectorized(rows):
                B[row, col] = A[row, col] * 2.0

    return main
