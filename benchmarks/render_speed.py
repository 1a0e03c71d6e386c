"""How fast and how heavy the swizzle SVGs are: a 256x256 fp16 tile must render in under 100 ms
and weigh under 200 KB. Prints a table and exits with status 1 when any picture misses
a target (timings vary by machine: the figures in the table say by how much).

    .venv/bin/python benchmarks/render_speed.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tilelab import swizzle as sw
from tilelab.render import svg

TARGET_MS = 100.0
TARGET_KB = 200.0


def measure(fn, repeat: int) -> tuple[float, int]:
    fn()  # warm caches (imports, numpy)
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        text = fn()
        times.append((time.perf_counter() - start) * 1000)
        size = len(text.encode())
    return statistics.median(times), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cases = []
    for mode in ("NONE", "32B", "64B", "128B", "INTERLEAVE"):
        for color_by in ("chunk", "bank"):
            tile = sw.SharedTile(256, 256, "float16", mode)
            cases.append((f"tile_svg 256x256 fp16 {mode} by {color_by}",
                          lambda tile=tile, color_by=color_by: svg.tile_svg(tile, color_by=color_by)))
    layout = sw.SharedTile(256, 256, "float16", "128B").to_layout("A_shared")
    cases.append(("layout_svg 256x256 fp16 128B (report Layout)", lambda: svg.layout_svg(layout)))
    tile = sw.SharedTile(64, 64, "float16", "128B")
    report = sw.bank_conflicts(tile, "column_read")
    cases.append(("tile_svg 64x64 + column_read highlight",
                  lambda: svg.tile_svg(tile, report=report, highlight={"thread": 3})))
    explorer_tile = sw.SharedTile(32, 64, "float16", "128B")
    cases.append(("tile_svg 32x64 (explorer default, per-cell hover)", lambda: svg.tile_svg(explorer_tile)))
    desc = sw.wgmma_descriptor(sw.SharedTile(64, 256, "float16", "128B"), "MN", operand="B", mn=128)
    cases.append(("wgmma_operand_svg B 64x256 MN-major", lambda: svg.wgmma_operand_svg(desc)))

    print(f"{'picture':<52} {'ms (median)':>11} {'KB':>8}  vs {TARGET_MS:.0f} ms / {TARGET_KB:.0f} KB")
    missed = []
    for name, fn in cases:
        ms, size = measure(fn, args.repeat)
        kb = size / 1024
        ok = ms < TARGET_MS and kb < TARGET_KB
        if not ok:
            missed.append(name)
        print(f"{name:<52} {ms:>11.1f} {kb:>8.1f}  {'ok' if ok else 'OVER'}")
    if missed:
        print(f"missed the target: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
