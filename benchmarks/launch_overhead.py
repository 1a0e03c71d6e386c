"""Host cost per call of each TileLang execution backend, for the same kernels.

    .venv-gpu/bin/python benchmarks/launch_overhead.py [--out DIR]

Two kernels: a 4096-element vector add (GPU time far below host cost) and the 1024^3 fp16 GEMM
of examples/gemm.py (128x128x32 tiles). Outputs are allocated by each launcher (out_idx=-1),
as in a notebook call. Prints a table last; writes JSON and a PNG to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".", help="folder for the JSON results and the plot")
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    import gemm

    from tilelab.launch import launch_overhead
    from tilelab.render.plots import figure_png, overhead_plot

    results = [launch_overhead(calls=args.calls),
               launch_overhead(gemm.matmul(1024, 1024, 1024, 128, 128, 32), calls=args.calls)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch_overhead.json").write_text(json.dumps([r.to_dict() for r in results], indent=1))
    (out / "launch_overhead.png").write_bytes(figure_png(overhead_plot(results[1])))
    print(f"\nhost us per call of the compiled kernel (median of 20 batches, {args.calls} calls), {results[0].device}")
    for r in results:
        cells = "  ".join(f"{b} {m:6.1f}" for b, m in r.medians.items())
        missing = "  ".join(f"{b}: {e}" for b, e in r.errors)
        print(f"{r.kernel:12s} {cells}   {missing}")


if __name__ == "__main__":
    main()
