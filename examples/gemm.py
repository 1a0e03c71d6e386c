"""Hopper fp16 GEMM: C = A @ B with TMA loads and WGMMA (sm_90a).

    python -m tilelab inspect "examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)"

The kernel itself ships with tilelab (``tilelab/kernels/gemm.py``), so the workshop, the tests and
this example read one copy; see that module for ``BEST_8192`` and how it was found.
"""

from tilelab.kernels.gemm import BEST_8192, matmul, matmul_best

__all__ = ["BEST_8192", "matmul", "matmul_best"]

if __name__ == "__main__":
    import tilelab

    print(tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32)))
