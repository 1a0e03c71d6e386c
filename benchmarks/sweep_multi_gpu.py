"""A 32-configuration sweep of examples/gemm.py at 8192^3 fp16 on one GPU and on every GPU of the host.

    python benchmarks/sweep_multi_gpu.py [--devices all|0,1] [--rank-by ratio|median] [--rep-ms 300]
                                         [--size 8192] [--out DIR]

1. warm-up: the sweep once on every GPU (without its final round, each configuration timed
   briefly: 10 ms, no steady warm-up), so every configuration is compiled (TileLang's disk cache)
   and every GPU's launch worker is running: both timed sweeps then measure the same work from
   the same state: loading, checking against torch.matmul, timing;
2. the sweep on GPU 0 alone (``devices=[0]``) and on all of them (``devices=...``), each with the
   row cache bypassed (``force=True``), each timed by wall clock: configurations per second. Both
   rank by ``--rank-by``: ``ratio`` (the default) times every configuration side by side with
   torch.matmul (batches alternating in one window) and ranks by that ratio; ``median`` by each
   row's own median. The multi-GPU sweep ends with its final round (its 3 fastest configurations
   timed again on cuda:0, each side by side with torch.matmul, or with the leader under
   ``--rank-by median``, ranked by those ratios), and its wall time includes it;
3. the single-GPU sweep's best configuration timed again on each GPU alone (``devices=[d]``), three
   times, interleaved across the GPUs; median and spread per GPU, with the SM clocks NVML saw.

A GPU's clock wanders by a few percent between calls under a power cap, so an absolute median
timed again later differs from the first by about that much; a ratio to torch.matmul timed in the
same window holds. With ``--rank-by ratio`` the figures compared below are those ratios (absolute
medians printed beside them); with ``--rank-by median`` they are the medians (and may miss by the
clock's wander).

Targets (PASS/FAIL; exits 1 on a miss):
- speed-up >= 0.9 x the number of GPUs (1.8x on 2), final round included;
- the multi-GPU sweep's best configuration, by its final-round figure on cuda:0, within 1% of the
  single-GPU sweep's best (same GPU, so the two sweeps' winners compare);
- repeat: that configuration alone on cuda:0 within 1% of the single-GPU sweep's figure for it.
Printed beside them, not targets: the configuration alone on each other GPU against the single-GPU
sweep, and each board's difference from cuda:0 (cuda:d alone vs cuda:0 alone): two boards of one
model differ by about 1% at the same clock and power cap, which is why the final round exists.
Writes the tables (JSON) under --out.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")

PARAMS = [
    dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=256, raster=r, smem_epilogue=e)
    for bm, bn in ((128, 256), (256, 128))
    for bk in (32, 64)
    for st in (3, 4)
    for r in (8, 16)
    for e in (False, True)
]
assert len(PARAMS) == 32

SCALING_TARGET = 0.9  # speed-up per GPU: 1.8x on 2
SAME_TIME_TARGET = 0.01  # the best configuration's figures vs the single-GPU sweep
ROUNDS = 3  # the best configuration alone on each GPU, this many times


def torch_matmul(M: int, N: int, K: int):
    """The baseline: torch.matmul, called with each configuration's own inputs (a module-level
    function: it travels to tilelab's launch worker, where both are timed side by side)."""
    import torch

    return torch.matmul


def figure(row, by_ratio: bool) -> float | None:
    """What a row is compared by: its ratio to torch.matmul, or its median."""
    return row.ratio if by_ratio else row.median_ms


def _what(by_ratio: bool) -> str:
    return "ratio to torch.matmul" if by_ratio else "median"


def _fig(x: float | None, by_ratio: bool) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if by_ratio else f"{x:.4f} ms"


def _clocks(rows: list) -> str:
    """The median SM clocks of some rows' measurements, and whether any was throttled."""
    mhz = [r.sm_mhz for r in rows if r.sm_mhz is not None]
    if not mhz:
        return "clock not sampled"
    return f"{statistics.median(mhz):.0f} MHz" + (" THROTTLED" if any(r.throttled for r in rows) else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="all", help='"all" or a comma-separated list of GPU indices')
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--rep-ms", type=float, default=None,
                    help="bench window per configuration (default: bench's own, 1 s after a steady warm-up)")
    ap.add_argument("--rank-by", choices=("ratio", "median"), default="ratio",
                    help="ratio (default): every configuration timed beside torch.matmul, ranked and compared by "
                         "that ratio; median: by each row's own median")
    ap.add_argument("--out", default=".", help="folder for the JSON results")
    args = ap.parse_args()
    by_ratio = args.rank_by == "ratio"
    import gemm
    import torch

    import tilelab

    devices: str | list[int] = "all" if args.devices == "all" else [int(d) for d in args.devices.split(",")]
    many = list(range(torch.cuda.device_count())) if devices == "all" else list(devices)
    n = args.size
    sizes = {"M": [n], "N": [n], "K": [n]}
    common = dict(flops=lambda M, N, K: 2.0 * M * N * K, ref=torch.matmul,
                  bench_kwargs={} if args.rep_ms is None else {"rep_ms": args.rep_ms}, force=True,
                  baseline={"torch.matmul": torch_matmul}, rank_by=args.rank_by)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def timed_sweep(devs: list[int], params: list[dict], label: str, **extra: object) -> tuple[float, object]:
        t0 = time.perf_counter()
        table = tilelab.sweep(gemm.matmul, params, sizes, devices=devs, **{**common, **extra})
        wall = time.perf_counter() - t0
        (out / f"sweep_multi_gpu_{label}.json").write_text(table.to_json(indent=1))
        return wall, table

    # The warm-up compiles every configuration and starts the launch worker of every GPU, as a
    # notebook's earlier sweeps would have: both timed sweeps then start from the same state.
    # Its timings are not used, so each configuration is timed as briefly as bench allows.
    brief = {"rep_ms": 10, "warmup_ms": 2, "steady": False, "ci_target": None, "telemetry": False}
    cold, _ = timed_sweep(many, PARAMS, "warmup", finalists=0, bench_kwargs=brief, rank_by="median")
    one_s, one = timed_sweep(many[:1], PARAMS, "1gpu")
    all_s, spread = timed_sweep(many, PARAMS, f"{len(many)}gpu")
    print(repr(one))
    print(repr(spread))
    best = one.best()
    if best is None:
        print("FAIL: no configuration ran on one GPU")
        return 1
    # The best configuration alone on each GPU, ROUNDS times, interleaved (0, 1, 0, 1, ...) so a slow
    # drift of the room or the power budget falls on every GPU alike: median and spread per GPU.
    per_gpu: dict[int, list] = {d: [] for d in many}
    for _ in range(ROUNDS):
        for d in many:
            _, t = timed_sweep([d], [dict(best.config)], f"best_cuda{d}")
            row = t.best()
            if row is not None:
                per_gpu[d].append(row)

    ok_one = sum(r.ok for r in one.rows if r.label is None)
    ok_all = sum(r.ok for r in spread.rows if r.label is None)
    speedup = one_s / all_s
    target = SCALING_TARGET * len(many)
    print()
    print(f"{len(PARAMS)} configurations of gemm.matmul at {n}^3 fp16, {one.device}, "
          f"rep_ms={args.rep_ms if args.rep_ms is not None else 'default'}, ranked by {_what(by_ratio)}")
    print(f"  warm-up (compiles included), {len(many)} GPUs: {cold:8.1f} s")
    print(f"  1 GPU  : {one_s:8.1f} s  {len(PARAMS) / one_s:6.3f} configurations/s  ({ok_one} ok)")
    print(f"  {len(many)} GPUs : {all_s:8.1f} s  {len(PARAMS) / all_s:6.3f} configurations/s  ({ok_all} ok), "
          f"{_final_round_time(spread)}")
    verdict_speed = speedup >= target
    print(f"  speed-up {speedup:.2f}x, final round included (target >= {target:.2f}x): "
          f"{'PASS' if verdict_speed else 'FAIL'}")
    print(f"  best on 1 GPU: {one.best_call()}  {best.median_ms:.4f} ms"
          + (f", ratio to torch.matmul {best.ratio:.4f}" if best.ratio is not None else "")
          + f" on {best.device or f'cuda:{many[0]}'}, SM {_clocks([best])}")
    verdict_final, lines = compare_final(spread, best, len(many), by_ratio)
    print("\n".join(lines))
    same = [r for r in spread.rows if r.config == best.config and r.ok and r.label is None]
    for r in same:  # the sweep's own figure, before the final round: where it landed decides it
        print(f"    that configuration in the {len(many)}-GPU sweep itself, on {r.device}: {r.median_ms:.4f} ms"
              + (f", ratio {r.ratio:.4f}" if r.ratio is not None else "")
              + f", SM {_clocks([r])} ({_diff(figure(r, by_ratio), figure(best, by_ratio))} vs 1 GPU by "
              f"{_what(by_ratio)}; not a target: the final round ranks)")
    verdict_alone, alone, lines = compare_alone(per_gpu, best, by_ratio)
    print("\n".join(lines))
    for r in same:
        d = int(str(r.device).rsplit(":", 1)[-1]) if r.device and ":" in str(r.device) else None
        if d in alone:  # what running beside the other GPUs costs: the same GPU, busy neighbours vs alone
            print(f"    {r.device} in the {len(many)}-GPU sweep vs alone: {_diff(figure(r, by_ratio), alone[d])} by "
                  f"{_what(by_ratio)} (SM {_clocks([r])} vs {_clocks(per_gpu[d])})")
    return 0 if verdict_speed and verdict_final and verdict_alone else 1


def _diff(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{100 * (a / b - 1.0):+.2f}%"


def _final_round_time(table) -> str:
    """What the table's note says the final round took."""
    for note in table.notes:
        found = re.search(r"timed again on (.+?), each side by side.*\((\d+) timed, ([\d.]+) s[;)]", note)
        if note.startswith("final round:") and found:
            device, count, seconds = found.groups()
            return f"of which the final round: {count} configurations timed on {device} in {seconds} s"
    return "no final round (its leaders had all run on one GPU)"


def compare_final(spread, best, gpus: int, by_ratio: bool) -> tuple[bool, list[str]]:
    """Target: the multi-GPU sweep's best, by its final-round figure, vs the 1-GPU sweep's best;
    by ratio to torch.matmul (both timed beside it on cuda:0), or by median."""
    winner = spread.best()
    if winner is None:
        return False, [f"  best on {gpus} GPUs: none ran: FAIL"]
    if by_ratio:
        final = winner.final_ratio if winner.final_ratio is not None else None
        figure_, where = ((final, f"{winner.final_device}, final round") if final is not None
                          else (winner.ratio, f"{winner.device}, no final round"))
        absolute = winner.final_ms if final is not None else winner.median_ms
    else:
        figure_, where = ((winner.final_ms, f"{winner.final_device}, final round") if winner.final_ms is not None
                          else (winner.median_ms, f"{winner.device}, no final round"))
        absolute = figure_
    ours = figure(best, by_ratio)
    if figure_ is None or not ours:
        return False, [f"  best on {gpus} GPUs: {spread.best_call()}: no {_what(by_ratio)} to compare: FAIL"]
    diff = figure_ / ours - 1.0
    good = abs(diff) <= SAME_TIME_TARGET
    agree = "as on 1 GPU" if winner.config == best.config else "not the 1-GPU sweep's best"
    lines = [f"  best on {gpus} GPUs: {spread.best_call()}  {_what(by_ratio)} {_fig(figure_, by_ratio)} "
             + (f"({absolute:.4f} ms) " if by_ratio and absolute is not None else "")
             + f"({where}; {agree}): {100 * diff:+.2f}% vs the 1-GPU sweep's best ({_fig(ours, by_ratio)}"
             + (f", {best.median_ms:.4f} ms" if by_ratio else "") + f"), target within {100 * SAME_TIME_TARGET:g}%: "
             + ("PASS" if good else "FAIL")]
    if winner.config != best.config:
        for r in spread.rows:
            theirs = r.final_ratio if by_ratio else r.final_ms
            if r.config == best.config and r.label is None and theirs is not None and r.final_ms is not None:
                lines.append(f"    the 1-GPU sweep's best in the final round: {_fig(theirs, by_ratio)}, "
                             f"{r.final_ms:.4f} ms")
    return good, lines


def compare_alone(per_gpu: dict[int, list], best, by_ratio: bool) -> tuple[bool, dict[int, float], list[str]]:
    """Repeat: each GPU alone vs the 1-GPU sweep (a target on the sweep's own GPU, the first), and
    each other board's difference from it; by ratio to torch.matmul (each run timed beside it, so
    the clock's wander between the sweep and these runs cancels), or by median. Absolute medians
    are printed beside the ratios."""
    verdict, alone, lines = True, {}, []
    first = next(iter(per_gpu))  # the first of the devices: the 1-GPU sweep's and the final round's
    ours = figure(best, by_ratio)
    for d, rows in per_gpu.items():
        figures = [figure(r, by_ratio) for r in rows if figure(r, by_ratio) is not None]
        if not figures or not ours:
            verdict &= d != first
            lines.append(f"    cuda:{d} alone: no {_what(by_ratio)}" + (": FAIL" if d == first else ""))
            continue
        alone[d] = statistics.median(figures)
        diff = alone[d] / ours - 1.0
        within = abs(diff) <= SAME_TIME_TARGET
        if d == first:
            verdict &= within
            judged = f"repeat, target within {100 * SAME_TIME_TARGET:g}%: {'PASS' if within else 'FAIL'}"
        else:
            judged = f"within {100 * SAME_TIME_TARGET:g}%: {'yes' if within else 'no'}; another board, not a target"
        medians = [r.median_ms for r in rows if r.median_ms is not None]
        absolute = ""
        if by_ratio and medians:
            absolute = (f"; absolute medians {', '.join(f'{m:.4f}' for m in medians)} ms, "
                        f"{_diff(statistics.median(medians), best.median_ms)} vs the sweep's {best.median_ms:.4f} ms")
        lines.append(f"    cuda:{d} alone, {len(figures)} runs: {_what(by_ratio)} {_fig(alone[d], by_ratio)}, spread "
                     f"{100 * (max(figures) - min(figures)) / alone[d]:.2f}%, SM {_clocks(rows)} "
                     f"({100 * diff:+.2f}% vs the 1-GPU sweep's {_fig(ours, by_ratio)}, {judged}{absolute})")
    for d in alone:
        if d != first and first in alone:
            lines.append(f"    board difference, cuda:{d} alone vs cuda:{first} alone: {_diff(alone[d], alone[first])} "
                         f"by {_what(by_ratio)} (SM {_clocks(per_gpu[d])} vs {_clocks(per_gpu[first])})")
    return verdict, alone, lines


if __name__ == "__main__":
    sys.exit(main())
