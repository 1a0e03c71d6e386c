"""Inspection speed for the Hopper GEMM: plain lowering vs cold and warm ``tilelab.inspect``.

    .venv/bin/python benchmarks/inspect_speed.py [--repeat 5]

Each figure is measured in a fresh Python process (imports and kernel construction excluded from
the timed region), the median of --repeat runs. Targets on a 2-core machine: cold inspect at most
3x plain lowering; warm inspect (a new process, report cache on disk) under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import json, sys, time
sys.path.insert(0, {examples!r})
import tilelang, tilelab
from tilelang import tvm
from gemm import matmul
func = matmul(1024, 1024, 1024, 128, 128, 32)
"""

PLAIN = SETUP + """
target = tvm.target.Target({{"kind": "cuda", "arch": "sm_90a"}})
t0 = time.perf_counter()
with tilelang.transform.PassContext(opt_level=3), target:
    tilelang.lower(func, target=target, enable_device_compile=False)
print(json.dumps(time.perf_counter() - t0))
"""

INSPECT = SETUP + """
t0 = time.perf_counter()
tilelab.inspect(func, "sm_90a", force={force})
print(json.dumps(time.perf_counter() - t0))
"""


def run(code: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    examples = str(ROOT / "examples")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TILELAB_CACHE_DIR": cache, "TILELANG_PRINT_ON_COMPILATION": "0"}
        plain = [run(PLAIN.format(examples=examples), env) for _ in range(args.repeat)]
        cold = [run(INSPECT.format(examples=examples, force=True), env) for _ in range(args.repeat)]
        warm = [run(INSPECT.format(examples=examples, force=False), env) for _ in range(args.repeat)]
    p, c, w = (statistics.median(x) for x in (plain, cold, warm))
    rows = [
        ("tilelang.lower (plain)", p, "-", "-"),
        ("tilelab.inspect cold", c, f"{c / p:.2f}x plain", "<= 3x plain: " + ("met" if c <= 3 * p else "MISSED")),
        ("tilelab.inspect warm (new process)", w, f"{w / p:.3f}x plain",
         "< 50 ms: " + ("met" if w < 0.05 else "MISSED")),
    ]
    print(f"Hopper fp16 GEMM 1024^3 (128x128x32), sm_90a, median of {args.repeat} fresh processes")
    print(f"{'measurement':38} {'seconds':>10} {'ratio':>16}  target")
    for name, value, ratio, target in rows:
        print(f"{name:38} {value:10.4f} {ratio:>16}  {target}")


if __name__ == "__main__":
    main()
