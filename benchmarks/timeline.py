"""What the intra-kernel timeline costs: the instrumented kernel's time over the plain one's, on the
8192^3 fp16 GEMM and on flash attention at realistic sizes, and what a capture of every block
(``blocks="all"``) takes in time and memory.

    python benchmarks/timeline.py [--runs 5] [--out DIR] [--before PATH] [--only gemm,fa] [--jobs 12]

Each case runs in a process of its own: the cases compile at once (the instrumented compile is not
cached), then measure one at a time on the GPU (a file lock), so the timings never overlap. A case
is one ``tilelab.timeline(kernel, isolate=False)`` call whose side-by-side timing (alternating
plain / instrumented samples between CUDA events, medians over 15 rounds) is taken ``--runs`` times
on the same compiled pair. ``--before PATH``: also run every span case with the tilelab of another
checkout (its own marks), the "before" column. The table gives, per case, the median overhead and
its spread (min..max) over the runs; the target is <= 5%. Writes JSON to --out.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (kernel factory source, label)
KERNELS = {
    "gemm": ("from tilelab.kernels.gemm import BEST_8192, matmul; kernel = matmul(8192, 8192, 8192, **BEST_8192)",
             "GEMM 8192^3 fp16 (4 stages)"),
    "fa": ("from tilelab.kernels.flash_attention import flash_attention; "
           "kernel = flash_attention(8, 16, 4096, 128, block_M=128, block_N=128, num_stages=2, threads=256)",
           "flash attention b8 h16 s4096 d128"),
    "fa_long": ("from tilelab.kernels.flash_attention import flash_attention; "
                "kernel = flash_attention(2, 16, 8192, 128, block_M=128, block_N=128, num_stages=2, threads=256)",
                "flash attention b2 h16 s8192 d128"),
    "fa_small": ("from tilelab.kernels.flash_attention import flash_attention; "
                 "kernel = flash_attention(1, 8, 1024, 128, block_M=128, block_N=128, num_stages=2, threads=256)",
                 "flash attention b1 h8 s1024 d128 (small: 64 blocks)"),
}


def job(spec: dict) -> dict:
    """One case, in this process: compile, then (holding the GPU lock) capture and measure."""
    sys.path.insert(0, spec["tree"])
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    import tilelab
    from tilelab import _tilelang
    from tilelab.launch import _timeline as launch_timeline

    lock = open(spec["lock"], "w")  # noqa: SIM115  (held for the whole case)
    compile_s: list[float] = []
    original_compile = _tilelang.compile_instrumented

    def compile_then_lock(*args, **kwargs):
        started = time.perf_counter()
        compiled = original_compile(*args, **kwargs)
        compile_s.append(time.perf_counter() - started)
        fcntl.flock(lock, fcntl.LOCK_EX)  # from here on this case has the GPU to itself
        return compiled

    _tilelang.compile_instrumented = compile_then_lock
    runs: list[tuple[float, float]] = []
    original_side_by_side = launch_timeline.side_by_side

    def many(torch, plain, instrumented, *args, **kwargs):
        for _ in range(spec["runs"]):
            runs.append(original_side_by_side(torch, plain, instrumented, *args, **kwargs))
        return statistics.median(a for a, _ in runs), statistics.median(b for _, b in runs)

    launch_timeline.side_by_side = many
    namespace: dict = {}
    exec(KERNELS[spec["kernel"]][0], namespace)
    kwargs = dict(spec.get("kwargs") or {})
    started = time.perf_counter()
    try:
        tl = tilelab.timeline(namespace["kernel"], isolate=False, **kwargs)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
    out = {**spec, "capture_s": time.perf_counter() - started, "compile_s": compile_s[0] if compile_s else None,
           "runs_ms": runs, "overheads": [b / a - 1 for a, b in runs], "device": tl.device,
           "marks": getattr(tl, "marks", "all"), "spans": len(tl.spans), "dropped": tl.dropped,
           "clock_ghz": tl.clock_ghz}
    g = getattr(tl, "grid_summary", None)
    if g is not None:
        out["grid_mb"] = g.words * 8 / 1e6
        out["grid_blocks"] = g.blocks
        out["grid_phases"] = [(p.role, p.kind, p.label, p.count, p.per_warp_min, p.per_warp_max, p.mean_ns,
                               p.p50_ns, p.p95_ns, p.share) for p in g.phases]
        out["first_wave"] = (g.first_wave_blocks, g.first_wave_mean_ns, g.rest_blocks, g.rest_mean_ns)
        out["max_idle_tail_ns"] = max(s.idle_tail_ns for s in g.sms)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=".", help="folder for the JSON results and the cases' logs")
    ap.add_argument("--before", default=None, help="another checkout's root: its tilelab is the 'before' column")
    ap.add_argument("--only", default="gemm,fa,fa_long,fa_small", help="kernels, from " + ", ".join(KERNELS))
    ap.add_argument("--no-grid", action="store_true", help="skip the every-block captures")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="cases compiling at once")
    ap.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.job:
        print(json.dumps(job(json.loads(args.job))))
        return

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lock = Path(tempfile.gettempdir()) / "tilelab-timeline-benchmark.lock"
    cases = []
    for kernel in args.only.split(","):
        attention = kernel.startswith("fa")
        if args.before:
            cases.append({"kernel": kernel, "variant": "before", "tree": str(Path(args.before).resolve()),
                          "kwargs": {}})
        cases.append({"kernel": kernel, "variant": "after", "tree": str(ROOT), "kwargs": {}})
        if attention:
            cases.append({"kernel": kernel, "variant": "after, marks=compact", "tree": str(ROOT),
                          "kwargs": {"marks": "compact"}})
    if not args.no_grid:
        for kernel in ("gemm", "fa"):
            if kernel in args.only.split(","):
                cases.append({"kernel": kernel, "variant": "every block", "tree": str(ROOT),
                              "kwargs": {"blocks": "all"}})
    results = []
    procs = []
    for n, case in enumerate(cases):
        spec = {**case, "runs": args.runs, "lock": str(lock)}
        env = {**os.environ, "TILELANG_CACHE_DIR": str(Path(tempfile.gettempdir()) / f"tilelab-bench-cache-{n}")}
        while sum(p.poll() is None for _, p, _ in procs) >= args.jobs:
            time.sleep(0.5)
        log = open(out / f"case{n}.log", "w")  # noqa: SIM115  (closed when the case ends)
        command = [sys.executable, __file__, "--job", json.dumps(spec)]
        procs.append((spec, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env), log))
    for spec, proc, log in procs:
        stdout, _ = proc.communicate()
        log.close()
        line = (stdout or "").strip().split("\n")[-1]
        try:
            results.append(json.loads(line))
        except ValueError:
            results.append({**spec, "error": f"exit {proc.returncode}; see {log.name}"})
    (out / "timeline_overhead.json").write_text(json.dumps(results, indent=1))

    device = next((r["device"] for r in results if "device" in r), "?")
    print(f"\nInstrumentation overhead on {device}: median (min..max) over {args.runs} side-by-side runs "
          "(15 alternating rounds each), target <= 5%")
    print(f"{'kernel':38} {'variant':24} {'plain ms':>9} {'instr. ms':>9} {'overhead':>9} {'spread':>17} "
          f"{'compile s':>9}")
    for r in results:
        label = KERNELS[r["kernel"]][1]
        if "error" in r:
            print(f"{label:38} {r['variant']:24} {r['error']}")
            continue
        if not r["overheads"]:
            continue
        o = r["overheads"]
        plain = statistics.median(a for a, _ in r["runs_ms"])
        instr = statistics.median(b for _, b in r["runs_ms"])
        print(f"{label:38} {r['variant']:24} {plain:9.4f} {instr:9.4f} {statistics.median(o):+9.2%} "
              f"{min(o):+8.2%}..{max(o):+.2%} {r['compile_s'] or 0:9.1f}")
    grid = [r for r in results if r.get("variant") == "every block" and "error" not in r]
    if grid:
        print("\nEvery block (blocks=\"all\"): capture time (compile included) and record memory")
        for r in grid:
            fw = r["first_wave"]
            print(f"{KERNELS[r['kernel']][1]:38} capture {r['capture_s']:.1f} s, {r['grid_mb']:.2f} MB for "
                  f"{r['grid_blocks']} blocks, overhead {statistics.median(r['overheads']):+.2%}; first wave "
                  f"{fw[0]} blocks {fw[1] / 1e3:.1f} us each, rest {fw[2]} blocks "
                  f"{(fw[3] or 0) / 1e3:.1f} us; largest SM idle tail {r['max_idle_tail_ns'] / 1e3:.1f} us")
            for p in r["grid_phases"][:12]:
                role, kind, label, count, lo, hi, mean, p50, p95, share = p
                print(f"    {role:9} {label[:48]:48} count {count:>8} ({lo}..{hi}/warp) mean {mean:8.0f} ns "
                      f"p50 {p50:8.0f} p95 {p95:8.0f} share {share:6.1%}")


if __name__ == "__main__":
    main()
