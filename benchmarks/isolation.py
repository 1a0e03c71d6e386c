"""What isolation costs and how fast a hang ends, on this machine's GPU, and the catalogue of GPU
faults; prints two tables.

  python benchmarks/isolation.py [--save-sanitizer DIR] [--quick] [--cases ID,ID]

* per-launch overhead: ``tilelab.run`` of a 1024-element copy in the warm worker against the same
  call in this process (isolate=False), 30 calls each after warm-up, median and spread (host ms);
* hang: a kernel that never exits, ``timeout=2``, seconds until the error (worker warm), without
  the watched relaunch (``diagnose_hang=False``);
* deadlocked pipelines (a wrong parity; fewer arrivals than a barrier expects), ``timeout=2``:
  seconds until the error that says where each warp group hung (the watched relaunch included),
  and its first line;
* ``--save-sanitizer DIR``: compute-sanitizer's raw text for our buggy kernels (the parser's test
  data come from such a run);
* the fault catalogue (tests/fault_catalogue.py, the cases tests/launch/test_fault_catalogue_gpu.py
  asserts): per case, the first line of the error shown, seconds from the call to the error (the
  worker loading the kernel included), whether the next launch in this process passed, and
  whether the outcome is the expected one. ``--quick`` leaves out the compute-sanitizer cases
  (minutes each); ``--cases`` runs only those named.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save-sanitizer", default=None)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="leave out the compute-sanitizer cases of the catalogue")
    ap.add_argument("--cases", default="", help="comma-separated catalogue case ids (default: all)")
    ap.add_argument("--catalogue-only", action="store_true", help="print only the fault catalogue")
    opts = ap.parse_args()
    if opts.catalogue_only:
        return catalogue_table(opts)
    import buggy_kernels as bk
    import torch

    import tilelab
    from tilelab.launch import KernelLaunchError

    good = bk.compile(bk.copy())
    a = torch.randn(1024, device="cuda")
    t0 = time.perf_counter()
    tilelab.run(good, a)
    first = time.perf_counter() - t0
    for _ in range(3):
        tilelab.run(good, a)
        tilelab.run(good, a, isolate=False)
    iso = _timed(lambda: tilelab.run(good, a), opts.calls)
    inproc = _timed(lambda: tilelab.run(good, a, isolate=False), opts.calls)
    rows = [("first isolated run (worker start + kernel load)", f"{first * 1e3:.0f} ms", "")]

    def spread(xs):
        q = statistics.quantiles(xs, n=10)
        return f"p10 {q[0]:.2f} / p90 {q[-1]:.2f} ms"

    rows.append(("run(), isolated (warm worker)", f"{statistics.median(iso):.2f} ms", spread(iso)))
    rows.append(("run(), in-process", f"{statistics.median(inproc):.2f} ms", spread(inproc)))
    rows.append(("overhead per launch", f"{statistics.median(iso) - statistics.median(inproc):.2f} ms", ""))
    spin = bk.compile(bk.spin_forever())
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    lat = []
    for timeout in (2.0, 2.0):
        tilelab.run(good, a)  # a warm worker (after the previous kill, a fresh one)
        t0 = time.perf_counter()
        try:
            tilelab.run(spin, flag, torch.zeros(256, device="cuda"), timeout=timeout, diagnose_hang=False)
        except KernelLaunchError as err:
            assert err.kind == "timeout", err
        lat.append(time.perf_counter() - t0)
    rows.append(("hang -> error, timeout=2 s", " / ".join(f"{x:.2f} s" for x in lat), "(includes loading the kernel)"))
    import fault_kernels as fk

    for name in ("wrong_parity", "fewer_arrivals"):
        kernel = getattr(fk, name)()
        tilelab.run(good, a)
        t0 = time.perf_counter()
        try:
            tilelab.run(kernel, timeout=2.0)
            where = "did not hang"
        except KernelLaunchError as err:
            hang = err.hang
            where = (f"{hang.outcome}: " + "; ".join(
                f"{g.role} {g.barrier} parity {g.parity}" for g in hang.waiting())) if hang else str(err.hang_note)
        rows.append((f"deadlock ({name}) -> located error, timeout=2 s", f"{time.perf_counter() - t0:.2f} s",
                     where[:90]))
    t0 = time.perf_counter()
    ok = tilelab.run(good, a, ref=lambda x: x)
    rows.append(("next run after the hang (fresh worker)", f"{(time.perf_counter() - t0) * 1e3:.0f} ms",
                 "passed" if ok.passed else "FAILED"))
    width = max(len(r[0]) for r in rows)
    print(f"device: {torch.cuda.get_device_name()}")
    for name, value, extra in rows:
        print(f"{name:<{width}}  {value:>14}  {extra}")
    if opts.save_sanitizer:
        out = Path(opts.save_sanitizer)
        out.mkdir(parents=True, exist_ok=True)
        cases = [("memcheck_oob_store", bk.oob_store(), True, "memcheck"),
                 ("racecheck_shared_race", bk.shared_race(), False, "racecheck"),
                 ("initcheck_copy_uninitialised", bk.copy(), False, "initcheck"),
                 ("synccheck_shared_race", bk.shared_race(), False, "synccheck"),
                 ("memcheck_far_oob_store", bk.far_oob_store(), True, "memcheck")]
        for name, func, unguarded, tool in cases:
            t0 = time.perf_counter()
            report = tilelab.sanitize(bk.compile(func, unguarded=unguarded), tool=tool)
            (out / f"{name}.txt").write_text(report.raw)
            print(f"sanitize {name}: {len(report.findings)} findings in {time.perf_counter() - t0:.1f} s")
            print(repr(report))
    print()
    return catalogue_table(opts)


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def catalogue_table(opts: argparse.Namespace) -> int:
    """Run the fault catalogue here and print one row per case."""
    import fault_catalogue as catalogue

    wanted = {c for c in opts.cases.split(",") if c}
    rows = []
    for case in catalogue.CASES:
        if (wanted and case.id not in wanted) or (opts.quick and case.slow and case.id not in wanted):
            continue
        outcome = catalogue.run_case(case)
        if not outcome.available:
            rows.append((case.id, outcome.shown, "", "", "not available"))
        else:
            verdict = "as expected" if outcome.problem is None else f"NOT AS EXPECTED: {outcome.problem}"
            rows.append((case.id, outcome.first_line(), f"{outcome.seconds:.2f}",
                         {True: "yes", False: "NO", None: "-"}[outcome.next_ok], verdict))
        print(f"  ... {case.id}: {rows[-1][4]}", file=sys.stderr, flush=True)
    header = ("case", "error shown (first line)", "s to error", "next launch ok", "verdict")
    widths = (20, 90, 10, 14, 40)
    print("fault catalogue (" + str(len(rows)) + " cases)")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row in rows:
        print("  ".join(_cell(v, w).ljust(w) for v, w in zip(row, widths)).rstrip())
    failed = [r for r in rows if r[4].startswith("NOT")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
