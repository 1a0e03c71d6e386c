"""Isolation on a real GPU (marker ``gpu``): each test runs in a fresh, notebook-like Python process.

A hanging kernel ends in an error within its timeout and a correct kernel then runs in the same
process; an illegal address leaves that process's CUDA context usable; an out-of-bounds store is
reported by memcheck with the buffer it overran; a missing barrier is found by racecheck; device
printf reaches the launching process's stdout; an interrupt during a sweep keeps finished rows.
Run on a GPU machine:  python -m pytest -m gpu tests/launch/test_isolation_gpu.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = f"""
import json, sys, time
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]
import torch, tilelab
import buggy_kernels as bk
from tilelab.launch import KernelLaunchError
"""


def _fresh(code: str, timeout: float = 240.0) -> dict:
    """Run ``code`` in a new Python process; it prints one JSON line starting with RESULT."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    out["stdout"] = proc.stdout
    return out


def test_hang_times_out_then_a_correct_kernel_runs():
    r = _fresh("""
        spin = bk.compile(bk.spin_forever())
        good = bk.compile(bk.copy())
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        t0 = time.monotonic()
        try:
            tilelab.run(spin, flag, torch.zeros(256, device="cuda"), timeout=3.0)
            err = None
        except KernelLaunchError as e:
            err = e
        elapsed = time.monotonic() - t0
        a = torch.randn(1024, device="cuda")
        ok = tilelab.run(good, a, ref=lambda a: a)
        print("RESULT " + json.dumps({"elapsed": elapsed, "kind": err.kind if err else None,
                                      "message": str(err), "passed": ok.passed}))
    """)
    assert r["kind"] == "timeout"
    # the 3 s timeout + 2 s; the first launch also loads the worker (imports, kernel from the cache)
    print("hang -> error after", r["elapsed"], "s")
    assert "spin_forever" in r["message"] and "grid (1, 1, 1)" in r["message"] and "block (256, 1, 1)" in r["message"]
    assert "mbarrier" in r["message"]
    assert r["passed"]


def test_timeout_latency_with_a_warm_worker():
    r = _fresh("""
        spin = bk.compile(bk.spin_forever())
        good = bk.compile(bk.copy())
        tilelab.run(good)  # the worker is warm and has loaded TileLang
        w = tilelab.launch.default_worker()
        from tilelab.launch import _isolated
        from tilelab.launch._run import prepare_kernel
        p = prepare_kernel(spin)
        w.call(_isolated.load_in_worker, _isolated.kernel_ref(p, w)); w.loaded.add(_isolated.kernel_ref(p, w).key)
        t0 = time.monotonic()
        try:
            # the plain timeout's latency: without the watched relaunch that locates the hang
            tilelab.run(spin, torch.zeros(1, dtype=torch.int32, device="cuda"), timeout=2.0, diagnose_hang=False)
        except KernelLaunchError as e:
            kind = e.kind
        print("RESULT " + json.dumps({"elapsed": time.monotonic() - t0, "kind": kind}))
    """)
    print("warm worker: hang -> error after", r["elapsed"], "s (timeout 2 s)")
    assert r["kind"] == "timeout" and r["elapsed"] < 2.0 + 2.0


def test_illegal_address_leaves_the_notebook_context_usable():
    r = _fresh("""
        bad = bk.compile(bk.far_oob_store(), unguarded=True)
        good = bk.compile(bk.copy())
        mine = torch.arange(10, device="cuda", dtype=torch.float32)
        try:
            tilelab.run(bad, torch.randn(1024, device="cuda"))
            err = None
        except KernelLaunchError as e:
            err = e
        after = float((mine * 2).sum().item())  # this process's own context still works
        ok = tilelab.run(good, torch.randn(1024, device="cuda"), ref=lambda a: a)
        print("RESULT " + json.dumps({"kind": err.kind if err else None, "sticky": bool(err and err.sticky),
                                      "message": str(err), "after": after, "passed": ok.passed}))
    """)
    assert r["kind"] in ("illegal_address", "launch_failure"), r["message"]
    assert "far_oob_store" in r["message"] and "worker" in r["message"] and "sanitize" in r["message"]
    assert r["after"] == 90.0 and r["passed"]


def test_memcheck_names_the_overrun_buffer():
    r = _fresh("""
        report = tilelab.sanitize(bk.compile(bk.oob_store(), unguarded=True), tool="memcheck")
        f = [f.to_dict() for f in report.findings]
        print("RESULT " + json.dumps({"findings": f, "raw": report.raw, "text": repr(report)}))
    """, timeout=400)
    print(r["text"])
    writes = [f for f in r["findings"] if f["kind"] == "out-of-bounds write"]
    assert writes, r["raw"]
    assert all(f["buffer"] == "B" for f in writes), r["text"]
    assert any("past the end of B" in (f["where"] or "") for f in writes)
    assert all(f["line"] is not None and f["block"] == [3, 0, 0] for f in writes)


def test_racecheck_finds_the_missing_barrier():
    r = _fresh("""
        report = tilelab.sanitize(bk.compile(bk.shared_race()), tool="racecheck")
        print("RESULT " + json.dumps({"findings": [f.to_dict() for f in report.findings], "raw": report.raw,
                                      "text": repr(report)}))
    """, timeout=400)
    print(r["text"])
    races = [f for f in r["findings"] if f["kind"] == "shared-memory race"]
    assert races and all(f["line"] is not None for f in races), r["raw"]


def test_device_printf_reaches_the_launching_process():
    r = _fresh("""
        k = bk.compile(bk.printing())
        a = torch.full((256,), 7.0, device="cuda")
        tilelab.run(k, a)
        sys.stdout.flush()
        print("RESULT " + json.dumps({}))
    """)
    out = r["stdout"]
    assert "first element" in out and "7" in out.split("first element", 1)[1].splitlines()[0]
    assert out.index("first element") < out.index("RESULT")


def test_tile_map_of_unwritten_tiles():
    r = _fresh("""
        k = bk.compile(bk.half_written())
        res = tilelab.run(k, ref=lambda a: a)
        m = res.outputs[0].tiles
        print("RESULT " + json.dumps({"passed": res.passed, "tile": m.tile, "cells": m.cells, "text": repr(res)}))
    """)
    print(r["text"])
    assert not r["passed"] and r["tile"] == [64, 64]
    assert [row[-1] for row in r["cells"]] == ["unwritten"] * 4
    assert all(c == "right" for row in r["cells"] for c in row[:-1])


def test_interrupt_during_a_sweep_keeps_finished_rows():
    script = PRELUDE + textwrap.dedent("""
        import signal, threading, os
        def factory(n, block):
            return bk.copy(n, block)
        if True:
            # the interrupt arrives while the third configuration is being timed
            calls = []
            from tilelab.launch.sweep import _tasks as _sweep
            real = _sweep.default_bench
            def bench(prepared, size, config, **kw):
                calls.append(config)
                if len(calls) == 3:
                    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
                    kw["rep_ms"] = 60_000.0
                return real(prepared, size, config, **kw)
            t0 = time.monotonic()
            table = tilelab.sweep(factory, {"block": [64, 128, 256, 512]}, {"n": [1 << 20]}, bench_fn=bench,
                                  progress=False)
            print("RESULT " + json.dumps({"elapsed": time.monotonic() - t0,
                                          "rows": [[r.error, r.median_ms] for r in table.rows],
                                          "notes": list(table.notes)}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stderr[-3000:]
    r = json.loads(line[-1][7:])
    rows = r["rows"]
    assert rows[0][1] and rows[1][1], rows  # measured before the interrupt: kept
    # the configuration being timed keeps the launches measured before the stop
    assert rows[2][1] or "interrupted" in rows[2][0], rows
    assert all("interrupted" in (e or "") for e, _ in rows[3:]), rows
    assert any("interrupted" in n for n in r["notes"])
    print("sweep interrupted; rows", rows, "in", r["elapsed"], "s")
    assert r["elapsed"] < 60  # the third configuration asked for 60 s of timing
