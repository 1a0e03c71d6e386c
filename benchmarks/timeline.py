"""What the intra-kernel timeline costs: the instrumented kernel's time over the plain one's, and
how long a capture takes, on the 8192^3 fp16 GEMM.

    .venv-gpu/bin/python benchmarks/timeline.py [--runs 5] [--size 8192] [--out DIR]

Each run is one ``tilelab.timeline`` call in this process (``isolate=False``): it compiles the
instrumented kernel, captures one launch, then times plain and instrumented launches side by side
(alternating samples, medians). The table gives each run's medians and overhead, then the median
and spread (min..max) of the overhead over the runs; the target is <= 5%. Writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--config", choices=("best", "default"), default="best",
                    help="best: tilelab.kernels.gemm.BEST_8192 (4 stages, smem epilogue); default: matmul's defaults")
    ap.add_argument("--granularity", choices=("warpgroup", "warp"), default="warpgroup")
    ap.add_argument("--out", default=".", help="folder for the JSON results")
    args = ap.parse_args()

    import tilelab
    from tilelab.kernels.gemm import BEST_8192, matmul

    n = args.size
    kernel = matmul(n, n, n, **BEST_8192) if args.config == "best" else matmul(n, n, n)
    rows = []
    for run in range(args.runs):
        started = time.perf_counter()
        tl = tilelab.timeline(kernel, isolate=False, granularity=args.granularity)
        rows.append({"run": run, "plain_ms": tl.plain_ms, "instrumented_ms": tl.instrumented_ms,
                     "overhead": tl.overhead, "capture_s": time.perf_counter() - started, "spans": len(tl.spans),
                     "dropped": tl.dropped, "device": tl.device})
        print(f"run {run}: plain {tl.plain_ms:.4f} ms, instrumented {tl.instrumented_ms:.4f} ms, "
              f"overhead {tl.overhead:+.2%}, capture {rows[-1]['capture_s']:.1f} s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timeline_overhead.json").write_text(json.dumps(rows, indent=1))
    overheads = [r["overhead"] for r in rows]
    captures = [r["capture_s"] for r in rows]
    print(f"\n{n}^3 fp16 GEMM ({args.config}), granularity {args.granularity}, {rows[0]['device']}")
    print(f"{'run':>4} {'plain ms':>10} {'instr. ms':>10} {'overhead':>9} {'capture s':>10}")
    for r in rows:
        print(f"{r['run']:>4} {r['plain_ms']:>10.4f} {r['instrumented_ms']:>10.4f} {r['overhead']:>+9.2%} "
              f"{r['capture_s']:>10.1f}")
    print(f"overhead: median {statistics.median(overheads):+.2%}, spread {min(overheads):+.2%} .. "
          f"{max(overheads):+.2%} over {len(rows)} runs (target <= 5%)")
    print(f"capture time: median {statistics.median(captures):.1f} s (compile included)")


if __name__ == "__main__":
    main()
