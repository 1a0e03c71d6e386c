"""Inspection speed per target, and the CPU launch path, for notebook 04's tiled GEMM.

    .venv/bin/python benchmarks/targets.py [--repeat 3]

For each target (sm_90a, gfx942, metal, c): TileLang's own lowering (``tilelang.lower``, no device
compile) against a cold ``tilelab.inspect`` (fresh process, empty report cache; imports and kernel
construction excluded from the timed region), medians of --repeat runs. Target: cold inspect at
most 3x plain lowering on every target. Then the CPU build of the GEMM launched here: tilelab.bench
(wall clock) against torch.matmul on the same CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

SETUP = """
import json, time
import tilelang, tilelab
from tilelang import tvm
from tilelab.kernels.tiled_gemm import tiled_gemm
from tilelab.targets import parse_target
func = tiled_gemm(1024, 1024, 1024, 128, 128, 32, target={target!r})
"""

PLAIN = SETUP + """
t = tvm.target.Target(parse_target({target!r}).tilelang_target())
t0 = time.perf_counter()
with tilelang.transform.PassContext(opt_level=3), t:
    tilelang.lower(func, target=t, enable_device_compile=False)
print(json.dumps(time.perf_counter() - t0))
"""

INSPECT = SETUP + """
t0 = time.perf_counter()
tilelab.inspect(func, {target!r}, force=True)
print(json.dumps(time.perf_counter() - t0))
"""

TARGETS = ("sm_90a", "gfx942", "metal", "c")


def run(code: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cpu_launch(size: int) -> tuple[object, object]:
    import torch

    import tilelab
    from tilelab.kernels.tiled_gemm import tiled_gemm

    kernel = tiled_gemm(size, size, size, 32, 32, 32, target="c")
    checked = tilelab.run(kernel, target="c", ref=torch.matmul)
    assert checked.passed, checked
    a, b = torch.randn(size, size), torch.randn(size, size)
    mine = tilelab.bench(kernel, target="c", flops=2 * size**3, rep_ms=500)
    ref = tilelab.bench(lambda: torch.matmul(a, b), target="c", flops=2 * size**3, rep_ms=500, name="torch.matmul")
    return mine, ref


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=256, help="CPU GEMM size (M = N = K)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated, default: all four")
    args = parser.parse_args()
    print(f"{'target':<8} {'lower s':>9} {'inspect s':>10} {'ratio':>6}  (medians of {args.repeat}; target <= 3x)")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TILELAB_CACHE_DIR": cache, "TILELANG_PRINT_ON_COMPILATION": "0"}
        for target in args.targets.split(","):
            plain = [run(PLAIN.format(target=target), env) for _ in range(args.repeat)]
            cold = [run(INSPECT.format(target=target), env) for _ in range(args.repeat)]
            p, c = statistics.median(plain), statistics.median(cold)
            spread = f"lower {min(plain):.3f}-{max(plain):.3f}, inspect {min(cold):.3f}-{max(cold):.3f}"
            print(f"{target:<8} {p:>9.3f} {c:>10.3f} {c / p:>6.2f}  {'ok' if c <= 3 * p else 'OVER'}  ({spread})")
    mine, ref = cpu_launch(args.size)
    print(f"\nCPU, {args.size}^3 float32 GEMM ({mine.device}; {mine.method})")
    for r in (mine, ref):
        print(f"  {r.kernel:<14} median {r.median_ms:9.3f} ms  spread {100 * r.spread:5.1f}%  "
              f"{(r.tflops or 0) * 1e3:8.2f} GFLOP/s  n={len(r.samples_ms)}")


if __name__ == "__main__":
    sys.exit(main())
