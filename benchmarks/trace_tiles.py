"""How long ``tilelab.trace_tiles`` takes at workshop sizes, on this machine's CPU.

    .venv/bin/python benchmarks/trace_tiles.py [--repeat 5]

Per kernel: the accesses traced, the first trace (the traced compile included) and the next
traces of the same kernel (compiled once, kept in memory: launch, log and fold into the record),
as median and range over ``--repeat`` rounds; then the record's HTML. Target: about a million
accesses traced (after the compile) within a few seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def copy_kernel(M: int, N: int, block: int):
    import tilelang.language as T

    @T.prim_func
    def tiled_copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)) as (bx, by):
            for i, j in T.grid(block, block):
                if by * block + i < M and bx * block + j < N:
                    B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return tiled_copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import target_kernels as tk

    import tilelab

    cases = [
        ("copy 256x256, 32x32 tiles", copy_kernel(256, 256, 32)),
        ("copy 1024x512, 64x64 tiles", copy_kernel(1024, 512, 64)),
        ("copy 1000x1000, 64x64 tiles", copy_kernel(1000, 1000, 64)),
        ("gemm 128^3 on the CPU, 32^3 tiles", tk.gemm_cpu(128, 128, 128, 32, 32, 32)),
        ("row sum 1024x512", tk.row_sum_cpu(1024, 512, 16)),
    ]
    print(f"{'kernel':36} {'accesses':>10} {'first (s)':>10} {'next: median (s)':>17} {'range (s)':>15} "
          f"{'HTML (s)':>9} {'HTML KB':>8}")
    for name, kernel in cases:
        start = time.perf_counter()
        trace = tilelab.trace_tiles(kernel)
        first = time.perf_counter() - start
        again = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            trace = tilelab.trace_tiles(kernel)
            again.append(time.perf_counter() - start)
        start = time.perf_counter()
        page = trace._repr_html_()
        html_s = time.perf_counter() - start
        print(f"{name:36} {trace.accesses:>10,} {first:>10.2f} {statistics.median(again):>17.3f} "
              f"{min(again):>7.3f}-{max(again):<7.3f} {html_s:>9.2f} {len(page) / 1024:>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
