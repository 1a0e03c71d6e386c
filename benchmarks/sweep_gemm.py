"""Find the examples/gemm.py configuration for 8192^3 fp16 with tilelab.sweep, against torch.matmul.

    .venv-gpu/bin/python benchmarks/sweep_gemm.py [--out DIR] [--sizes 4096,8192]

Every configuration is checked against a float64 reference (tilelab.run) before it is timed
(sustained mode: back to back, L2 flushed, as do_bench). Prints the table and the best
configuration's ratio to torch.matmul at each size; writes the table (JSON) and plots (PNG).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")

PARAMS = [
    dict(block_M=bm, block_N=bn, block_K=64, num_stages=st, threads=256, raster=r, smem_epilogue=e)
    for bm, bn in ((128, 256), (256, 128))
    for st in (3, 4)
    for r in (10, 16)
    for e in (False, True)
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".", help="folder for the JSON results")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--rep-ms", type=float, default=300.0)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    import gemm
    import torch

    import tilelab
    from tilelab.render import plots

    def torch_matmul(M, N, K):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        return lambda: torch.matmul(a, b)

    sizes = [dict(M=n, N=n, K=n) for n in (int(x) for x in args.sizes.split(","))]
    table = tilelab.sweep(gemm.matmul, PARAMS, sizes, flops=lambda M, N, K: 2.0 * M * N * K,
                          ref=None if args.no_check else torch.matmul,
                          baseline={"torch.matmul": torch_matmul}, bench_kwargs={"rep_ms": args.rep_ms})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep_gemm.json").write_text(table.to_json(indent=1))
    (out / "sweep_throughput.png").write_bytes(plots.figure_png(plots.throughput_vs_size(table)))
    (out / "sweep_configs.png").write_bytes(plots.figure_png(plots.configs_compared(table)))
    print(repr(table))
    for size in table.sizes:
        best = table.best(dict(size))
        base = [r for r in table.baselines if r.size == size and r.ok]
        if best and base:
            print(f"{dict(size)}: best {best.name}: {best.median_ms:.4f} ms {best.tflops:.1f} TFLOP/s; "
                  f"torch.matmul {base[0].median_ms:.4f} ms {base[0].tflops:.1f} TFLOP/s; "
                  f"ratio {base[0].median_ms / best.median_ms:.4f}x torch.matmul")


if __name__ == "__main__":
    main()
