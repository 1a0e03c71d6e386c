"""More faults on a real GPU (marker ``gpu``), each in a fresh notebook-like process, with what the
user sees and what keeps working after it: a kernel that writes into its input, NaN in an output,
a block asking for more shared memory than the GPU has, the worker killed from outside during a
bench and during a sweep, and two processes launching on one GPU at once.
Run on a GPU machine:  python -m pytest -m gpu tests/test_faults_gpu.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpu_only import skip_module_without_cuda

pytestmark = pytest.mark.gpu
skip_module_without_cuda(__name__)

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = f"""
import json, os, signal, sys, threading, time
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]
import torch, tilelab
import tilelang, tilelang.language as T
from tilelab.launch import KernelLaunchError, WorkerError
"""


def _fresh(code: str, timeout: float = 240.0) -> dict:
    """Run the kernels and then ``code`` (indented as a test writes it) in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + KERNELS + textwrap.dedent(code)], capture_output=True,
                          text=True,
                          timeout=timeout, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


KERNELS = "from fault_kernels import big_tiles, clobber, copy, divide\n"


def test_a_kernel_that_writes_into_its_input_is_named_on_the_gpu():
    r = _fresh("""
        a = torch.arange(1, 4097, dtype=torch.float32, device="cuda")
        c = torch.empty(4096, device="cuda")
        res = tilelab.run(clobber(), a, c, ref=lambda x: 2 * x)
        ok = tilelab.run(copy(), ref=lambda x: x)
        print("RESULT " + json.dumps({"passed": res.passed, "written": [(s.name, s.changed, list(s.first_changed))
              for s in res.inputs_written], "text": repr(res), "next": ok.passed}))
    """)
    assert r["passed"] is False and r["written"] == [["A", 256, [768]]], r
    assert "input A was written by the kernel" in r["text"] and r["next"] is True


def test_nan_in_an_output_is_located_on_the_gpu():
    r = _fresh("""
        a = torch.randn(256, 256, device="cuda")
        b = a + 1
        b[200:] = a[200:]
        c = torch.empty(256, 256, device="cuda")
        res = tilelab.run(divide(), a, b, c)
        (o,) = res.outputs
        print("RESULT " + json.dumps({"passed": res.passed, "first": list(o.first_nonfinite), "count": o.nonfinite,
              "tile": list(o.nonfinite_tile or ()), "notes": list(res.notes)}))
    """)
    assert r["passed"] is False and r["first"] == [200, 0] and r["count"] == 56 * 256
    assert r["tile"] == [200 // 64, 0]
    assert any("the inputs held none, so the kernel produced them" in n for n in r["notes"]), r["notes"]


def test_a_block_asking_for_too_much_shared_memory_names_the_limit_and_the_value():
    r = _fresh("""
        report = tilelab.inspect(big_tiles())
        asked = report.kernels[0].dynamic_shared_memory_bytes
        try:
            tilelab.run(big_tiles(), ref=torch.matmul)
            message = None
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
        ok = tilelab.run(copy(), ref=lambda x: x)
        print("RESULT " + json.dumps({"asked": asked, "notes": list(report.notes), "message": message,
                                      "next": ok.passed}))
    """)
    assert r["asked"] > 227 * 1024, r
    assert any(str(r["asked"]) in n and "a launch would fail" in n for n in r["notes"]), r["notes"]
    assert r["message"] is not None and "shared memory" in r["message"] and str(r["asked"]) in r["message"], r
    assert r["next"] is True


def test_the_worker_killed_during_a_bench_leaves_the_next_call_working():
    r = _fresh("""
        kernel = copy()
        tilelab.bench(kernel, rep_ms=50)  # the worker is up and the kernel loaded
        worker = tilelab.launch.default_worker()
        pid = worker.pid
        outcome = {}
        def long_bench():
            try:
                tilelab.bench(kernel, rep_ms=20000, ci_target=None)
                outcome["error"] = None
            except Exception as err:
                outcome["error"] = f"{type(err).__name__}: {err}"
        t = threading.Thread(target=long_bench)
        t.start()
        time.sleep(3.0)  # well inside the 20 s bench
        os.kill(pid, signal.SIGKILL)
        t.join(120)
        after = tilelab.bench(kernel, rep_ms=50)
        ok = tilelab.run(kernel, ref=lambda x: x)
        print("RESULT " + json.dumps({"error": outcome.get("error"), "median": after.median_ms, "next": ok.passed,
                                      "new_pid": tilelab.launch.default_worker().pid, "old_pid": pid}))
    """)
    assert r["error"] is not None and "Worker" in r["error"], r
    assert r["median"] > 0 and r["next"] is True and r["new_pid"] != r["old_pid"]


def test_the_worker_killed_during_a_sweep_keeps_its_rows_and_the_next_call_works(tmp_path):
    r = _fresh(f"""
        os.environ["TILELAB_CACHE_DIR"] = {str(tmp_path)!r}  # a row cache of this test's own
        from tilelab.launch.sweep import _tasks
        killed = []

        def kill_once_busy(worker):
            # a call holds the worker's lock while it runs in the worker: the long bench below
            while worker._lock.acquire(blocking=False):
                worker._lock.release()
                time.sleep(0.01)
            killed.append(worker.pid)
            os.kill(worker.pid, signal.SIGKILL)  # from outside, as the OOM killer or `kill -9` would

        def bench(artifact, size, config, **kw):
            kernel = _tasks.load_artifact(artifact)
            if config["block"] == 512 and not killed:
                tilelab.bench(kernel, rep_ms=50)  # the worker is up and the kernel loaded in it
                threading.Thread(target=kill_once_busy, args=(tilelab.launch.default_worker(),), daemon=True).start()
                kw = {{**kw, "rep_ms": 20000, "ci_target": None}}
            return tilelab.bench(kernel, **kw)

        space, sizes = {{"block": [256, 512, 1024]}}, {{"N": [1 << 20]}}
        first = tilelab.sweep(copy, space, sizes, devices=[0], bench_fn=bench, progress=False, finalists=0)
        again = tilelab.sweep(copy, space, sizes, devices=[0], bench_fn=bench, progress=False, finalists=0)
        ok = tilelab.run(copy(), ref=lambda x: x)

        def rows(table):
            return {{dict(r.config)["block"]: [r.ok, r.stage, r.error, r.cached, r.median_ms] for r in table.rows}}

        print("RESULT " + json.dumps({{"first": rows(first), "again": rows(again), "killed": killed,
                                      "next": ok.passed}}))
    """, timeout=400)
    first, again = r["first"], r["again"]
    assert len(r["killed"]) == 1, r
    # the rows measured before and after the kill are kept; the lost one says what happened
    assert first["256"][0] and first["1024"][0] and first["256"][4] > 0, first
    ok, stage, error, _, _ = first["512"]
    assert not ok and stage == "bench" and "killed by SIGKILL" in error, first
    # the same call again takes the finished rows from the row cache and measures the lost one
    assert again["256"][3] and again["1024"][3] and again["256"][4] == first["256"][4], again
    assert again["512"][0] and not again["512"][3] and again["512"][4] > 0, again
    assert r["next"] is True


def test_two_processes_launching_on_one_gpu_at_once_are_both_correct(tmp_path):
    code = PRELUDE + KERNELS + textwrap.dedent("""
        from tilelab.kernels.gemm import matmul
        gemm = matmul(1024, 1024, 1024, 128, 128, 32)
        barrier = sys.argv[1]
        open(os.path.join(barrier, str(os.getpid())), "w").close()
        while len(os.listdir(barrier)) < 2:
            time.sleep(0.01)
        passed = [tilelab.run(gemm, ref=torch.matmul).passed for _ in range(5)]
        passed += [tilelab.run(copy(), ref=lambda x: x).passed for _ in range(5)]
        print("RESULT " + json.dumps({"passed": passed}))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert lines, err[-3000:]
        assert json.loads(lines[-1][len("RESULT "):])["passed"] == [True] * 10
