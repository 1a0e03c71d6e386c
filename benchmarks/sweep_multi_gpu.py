"""A 32-configuration sweep of examples/gemm.py at 8192^3 fp16 on one GPU and on several GPUs of the host.

    python benchmarks/sweep_multi_gpu.py [--devices all|0,1] [--gpus 1,all|1,2,4] [--runs 1]
                                         [--one-gpu-runs R] [--repeat 3] [--rank-by ratio|median]
                                         [--rep-ms 300] [--size 8192] [--out DIR]

1. warm-up: the sweep once on the largest count of GPUs (without its final round, each
   configuration timed briefly: 10 ms, no steady warm-up), so every configuration is compiled
   (TileLang's disk cache) and every GPU's launch worker is running: the timed sweeps then
   measure the same work from the same state: loading, checking against torch.matmul, timing;
2. the sweep on each count of GPUs of ``--gpus`` (the first k of ``--devices``; one GPU always),
   ``--runs`` times each, interleaved, each run starting with the next count (1, 2, 4, then 2, 4,
   1, then 4, 1, 2: the first sweep after the warm-up meets GPUs not yet at their sustained heat,
   whose rows read slower; ``--one-gpu-runs`` sets the one-GPU count apart), each with the row
   cache bypassed (``force=True``) and timed by wall clock. Both rank by ``--rank-by``: ``ratio``
   (the default) times every configuration side by side with torch.matmul (batches alternating in
   one window) and ranks by that ratio; ``median`` by each row's own median. A sweep on several
   GPUs ends with its final round (its 3 fastest configurations ranked on one GPU: with
   ``ratio``, the one that measured the most of them, the others timed again there beside
   torch.matmul), and its wall time includes it. Each sweep's wall time is split per GPU (when
   each row step ran: rows, busy seconds, seconds a row, idle before the first row and after the
   last, the final round);
3. the single-GPU sweep's best configuration timed again on each GPU alone (``devices=[d]``),
   ``--repeat`` times, interleaved across the GPUs; median and spread per GPU, with the SM
   clocks NVML saw.

A GPU's clock wanders by a few percent between calls under a power cap, so an absolute median
timed again later differs from the first by about that much; a ratio to torch.matmul timed in the
same window holds. With ``--rank-by ratio`` the figures compared below are those ratios (absolute
medians printed beside them); with ``--rank-by median`` they are the medians (and may miss by the
clock's wander).

Targets (PASS/FAIL; exits 1 on a miss):
- speed-up on k GPUs (the median one-GPU wall time over each k-GPU run's, median of those),
  final round included: >= 0.9 x k up to two GPUs (1.8x), >= 0.85 x k beyond (3.4x on four);
- each multi-GPU sweep's best configuration, by its final-round figure, within 1% of the first
  single-GPU sweep's best (the line says whether it is the same configuration);
- repeat: that configuration alone on the first GPU within 1% of the single-GPU sweep's figure.
Printed beside them, not targets: the configuration alone on each other GPU against the single-GPU
sweep, and each board's difference from the first (cuda:d alone vs the first alone): two boards of
one model differ by about 1% at the same clock and power cap, which is why the final round exists.
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


def scaling_target(gpus: int) -> float:
    """The speed-up a sweep on ``gpus`` GPUs must reach, its final round included: 0.9x per GPU up
    to two (1.8x), 0.85x per GPU beyond (3.4x on four: the final round is serial time, and a
    sweep of 32 configurations on four GPUs is only eight configurations long on each)."""
    return 0.9 * gpus if gpus <= 2 else 0.85 * gpus


class Trace:
    """When each row step ran on which GPU: ``_runners.bench_task`` wrapped for the benchmark
    (the sweep itself is unchanged), so the wall time of a sweep splits into each GPU's rows, its
    idle start and tail, and the final round."""

    def __init__(self) -> None:
        import threading

        self.events: list[tuple[str, int, bool, float, float]] = []  # (device, index, baseline, start, end)
        self.lock = threading.Lock()
        self.t0 = 0.0

    def install(self) -> None:
        from tilelab.launch.sweep import _runners

        inner = _runners.bench_task

        def traced(plan, job, compiled, device=None):
            start = time.perf_counter()
            try:
                return inner(plan, job, compiled, device=device)
            finally:
                with self.lock:
                    self.events.append((str(device), job.index, job.label is not None, start - self.t0,
                                        time.perf_counter() - self.t0))

        _runners.bench_task = traced

    def start(self) -> None:
        with self.lock:
            self.events, self.t0 = [], time.perf_counter()


def breakdown(events: list[tuple[str, int, bool, float, float]], configurations: int, wall: float) -> dict:
    """A sweep's wall time split per GPU (a pure function of the trace): for each device its rows,
    busy seconds, mean seconds a row, idle before its first row and after its last (until the last
    row of the sweep ends), and the final round (row steps of index past the configurations, not
    baselines): how many, where, from when to when."""
    rows = [e for e in events if not e[2] and e[1] < configurations]
    final = [e for e in events if not e[2] and e[1] >= configurations]
    end = max((e[4] for e in rows), default=0.0)
    devices: dict[str, dict] = {}
    for device in sorted({e[0] for e in rows}):
        mine = [e for e in rows if e[0] == device]
        busy = sum(e[4] - e[3] for e in mine)
        first, last = min(e[3] for e in mine), max(e[4] for e in mine)
        devices[device] = {"rows": len(mine), "busy_s": busy, "row_s": busy / len(mine), "start_s": first,
                           "gaps_s": last - first - busy, "tail_s": end - last}
    return {"wall_s": wall, "rows_end_s": end, "devices": devices,
            "final": {"timed": len(final), "on": sorted({e[0] for e in final}),
                      "from_s": min((e[3] for e in final), default=None),
                      "to_s": max((e[4] for e in final), default=None),
                      "busy_s": sum(e[4] - e[3] for e in final)}}


def breakdown_lines(parts: dict) -> list[str]:
    lines = []
    for device, d in parts["devices"].items():
        lines.append(f"      {device}: {d['rows']:2d} rows, {d['busy_s']:6.1f} s busy ({d['row_s']:.2f} s a row), "
                     f"first row at {d['start_s']:.2f} s, gaps {d['gaps_s']:.2f} s, idle at the end "
                     f"{d['tail_s']:.2f} s")
    f = parts["final"]
    after = parts["wall_s"] - parts["rows_end_s"]
    lines.append(f"      rows end at {parts['rows_end_s']:.1f} s; after them {after:.1f} s (baselines, final round: "
                 + (f"{f['timed']} timed on {', '.join(f['on'])}, {f['busy_s']:.1f} s of row steps"
                    if f["timed"] else "none timed") + ")")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="all", help='"all" or a comma-separated list of GPU indices')
    ap.add_argument("--gpus", default="1,all",
                    help="GPU counts to sweep on, each the first k of --devices (e.g. 1,2,4); 1 is always swept")
    ap.add_argument("--runs", type=int, default=1,
                    help="timed sweeps per GPU count (interleaved: 1, 2, 4, 1, 2, 4, ...); speed-ups are medians")
    ap.add_argument("--one-gpu-runs", type=int, default=None,
                    help="timed sweeps on one GPU (default --runs); each speed-up divides their median")
    ap.add_argument("--repeat", type=int, default=ROUNDS,
                    help="times the 1-GPU sweep's best is timed again alone on each GPU (0: not)")
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
    counts = sorted({1, *(len(many) if k == "all" else int(k) for k in args.gpus.split(","))})
    if counts[-1] > len(many):
        print(f"FAIL: --gpus {args.gpus} asks for {counts[-1]} GPUs; {len(many)} are listed")
        return 1
    one_runs = args.runs if args.one_gpu_runs is None else args.one_gpu_runs
    n = args.size
    sizes = {"M": [n], "N": [n], "K": [n]}
    common = dict(flops=lambda M, N, K: 2.0 * M * N * K, ref=torch.matmul,
                  bench_kwargs={} if args.rep_ms is None else {"rep_ms": args.rep_ms}, force=True,
                  baseline={"torch.matmul": torch_matmul}, rank_by=args.rank_by)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = Trace()
    trace.install()

    def timed_sweep(devs: list[int], params: list[dict], label: str, **extra: object) -> tuple[float, object, dict]:
        trace.start()
        t0 = time.perf_counter()
        table = tilelab.sweep(gemm.matmul, params, sizes, devices=devs, **{**common, **extra})
        wall = time.perf_counter() - t0
        (out / f"sweep_multi_gpu_{label}.json").write_text(table.to_json(indent=1))
        return wall, table, breakdown(list(trace.events), len(params), wall)

    # The warm-up compiles every configuration and starts the launch worker of every GPU, as a
    # notebook's earlier sweeps would have: the timed sweeps then start from the same state.
    # Its timings are not used, so each configuration is timed as briefly as bench allows.
    brief = {"rep_ms": 10, "warmup_ms": 2, "steady": False, "ci_target": None, "telemetry": False}
    cold, _, _ = timed_sweep(many[:counts[-1]], PARAMS, "warmup", finalists=0, bench_kwargs=brief, rank_by="median")
    print(f"warm-up (compiles included), {counts[-1]} GPUs: {cold:.1f} s", flush=True)
    walls: dict[int, list[float]] = {k: [] for k in counts}
    tables: dict[int, list] = {k: [] for k in counts}
    parts: dict[int, list[dict]] = {k: [] for k in counts}
    for run in range(max(args.runs, one_runs)):
        # each run starts with another count: the first sweep after the warm-up meets GPUs not yet
        # at their sustained heat (its rows read slower), and no count should always be that one
        for k in counts[run % len(counts):] + counts[:run % len(counts)]:
            if run >= (one_runs if k == 1 else args.runs):
                continue
            wall, table, split = timed_sweep(many[:k], PARAMS, f"{k}gpu_run{run + 1}")
            walls[k].append(wall)
            tables[k].append(table)
            parts[k].append(split)
            best_row = table.best()
            print(f"run {run + 1}, {k} GPU{'s' if k > 1 else ''}: {wall:6.1f} s, best {table.best_call()} "
                  f"({_fig(figure(best_row, by_ratio) if best_row else None, by_ratio)})"
                  + (f", {_final_round_time(table)}" if k > 1 else ""), flush=True)
            print("\n".join(breakdown_lines(split)), flush=True)
    one = tables[1][0]
    print(repr(one))
    print(repr(tables[counts[-1]][-1]))
    best = one.best()
    if best is None:
        print("FAIL: no configuration ran on one GPU")
        return 1
    per_gpu: dict[int, list] = {d: [] for d in many[:counts[-1]]}
    # The best configuration alone on each GPU, interleaved (0, 1, 0, 1, ...) so a slow drift of the
    # room or the power budget falls on every GPU alike: median and spread per GPU.
    for _ in range(args.repeat):
        for d in per_gpu:
            _, t, _ = timed_sweep([d], [dict(best.config)], f"best_cuda{d}")
            row = t.best()
            if row is not None:
                per_gpu[d].append(row)

    one_s = statistics.median(walls[1])
    print()
    print(f"{len(PARAMS)} configurations of gemm.matmul at {n}^3 fp16, {one.device}, "
          f"rep_ms={args.rep_ms if args.rep_ms is not None else 'default'}, ranked by {_what(by_ratio)}")
    print(f"  warm-up (compiles included), {counts[-1]} GPUs: {cold:8.1f} s")
    print(f"  1 GPU  : median {one_s:6.1f} s over {len(walls[1])} runs ({', '.join(f'{w:.1f}' for w in walls[1])}), "
          f"{len(PARAMS) / one_s:6.3f} configurations/s, {_row_s(parts[1])} s a row")
    verdicts = []
    for k in counts[1:]:
        speedups = [one_s / w for w in walls[k]]
        median = statistics.median(speedups)
        target = scaling_target(k)
        good = median >= target
        verdicts.append(good)
        print(f"  {k} GPUs : median {statistics.median(walls[k]):6.1f} s over {len(walls[k])} runs "
              f"({', '.join(f'{w:.1f}' for w in walls[k])}), {_row_s(parts[k])} s a row; final rounds "
              f"{', '.join(str(p['final']['timed']) for p in parts[k])} timed")
        print(f"    speed-up median {median:.2f}x (runs {', '.join(f'{x:.2f}' for x in speedups)}; spread "
              f"{min(speedups):.2f}-{max(speedups):.2f}), final round included (target >= {target:.2f}x): "
              f"{'PASS' if good else 'FAIL'}")
        for i, table in enumerate(tables[k]):
            ok_final, lines = compare_final(table, best, k, by_ratio)
            verdicts.append(ok_final)
            print(f"    run {i + 1}: " + "\n".join(lines).strip())
    print(f"  best on 1 GPU: {one.best_call()}  {best.median_ms:.4f} ms"
          + (f", ratio to torch.matmul {best.ratio:.4f}" if best.ratio is not None else "")
          + f" on {best.device or f'cuda:{many[0]}'}, SM {_clocks([best])}")
    if args.repeat:
        verdict_alone, _, lines = compare_alone(per_gpu, best, by_ratio)
        verdicts.append(verdict_alone)
        print("\n".join(lines))
    return 0 if all(verdicts) else 1


def _row_s(splits: list[dict]) -> str:
    """The median over runs of the mean seconds a row took on each GPU (its row steps only)."""
    values = [d["row_s"] for split in splits for d in split["devices"].values()]
    return f"{statistics.median(values):.2f}" if values else "-"


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
