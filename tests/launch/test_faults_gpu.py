"""More faults on a real GPU (marker ``gpu``), each in a fresh notebook-like process, with what the
user sees and what keeps working after it: a kernel that writes into its input, NaN in an output,
a block asking for more shared memory than the GPU has, the worker killed from outside during a
bench and during a sweep, two processes launching on one GPU at once, and warp-specialised pipelines
that deadlock (a wrong parity; fewer arrivals than a barrier expects), whose timeout error says
where each warp group hung.
Run on a GPU machine:  python -m pytest -m gpu tests/launch/test_faults_gpu.py
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

ROOT = Path(__file__).resolve().parents[2]
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
        from timeline_kernels import spin
        kernel = spin(20_000_000)  # 20 ms a launch: a bench of many launches lasts seconds
        spun = torch.zeros(128, device="cuda")
        tilelab.bench(kernel, spun, rep_ms=50)  # the worker is up and the kernel loaded
        worker = tilelab.launch.default_worker()
        pid = worker.pid
        outcome = {}

        def kill_once_busy():
            # a call holds the worker's lock while it runs there: the long bench below
            while worker._lock.acquire(blocking=False):
                worker._lock.release()
                time.sleep(0.01)
            os.kill(pid, signal.SIGKILL)  # from outside, as the OOM killer or `kill -9` would

        def long_bench():
            try:
                tilelab.bench(kernel, spun, rep_ms=20000, ci_target=None)
                outcome["error"] = None
            except Exception as err:
                outcome["error"] = f"{type(err).__name__}: {err}"
        killer = threading.Thread(target=kill_once_busy)
        killer.start()
        t = threading.Thread(target=long_bench)
        t.start()
        t.join(300)
        killer.join(10)
        after = tilelab.bench(kernel, spun, rep_ms=50)
        ok = tilelab.run(copy(), ref=lambda x: x)
        print("RESULT " + json.dumps({"error": outcome.get("error"), "median": after.median_ms, "next": ok.passed,
                                      "new_pid": tilelab.launch.default_worker().pid, "old_pid": pid}))
    """)
    assert r["error"] is not None and "worker process died (killed by SIGKILL)" in r["error"], r
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


# ------------------------------------------------------------------------------------------
# Deadlocked pipelines: the timeout error says where the warps hung (a watched relaunch)
# ------------------------------------------------------------------------------------------

FAULT_KERNELS_PY = ROOT / "tests" / "fault_kernels.py"


def _line_of(needle: str) -> int:
    """The 1-based line of fault_kernels.py holding ``needle`` (ground truth: the file itself)."""
    hits = [i + 1 for i, text in enumerate(FAULT_KERNELS_PY.read_text().split("\n")) if needle in text]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


HANG = """
    from fault_kernels import {bad}, ws_pipeline
    kernel = {bad}()
    t0 = time.monotonic()
    try:
        tilelab.run(kernel, timeout=3.0)
        err = None
    except KernelLaunchError as e:
        err = e
    elapsed = time.monotonic() - t0
    ok = tilelab.run(copy(), ref=lambda a: a)  # the next launch, in a fresh worker
    good = tilelab.run(ws_pipeline(), ref=torch.matmul)  # the same pipeline, correct
    x = torch.arange(4.0, device="cuda")
    print("RESULT " + json.dumps({{"kind": err and err.kind, "message": str(err),
          "note": err and err.hang_note, "cause": err and err.cause,
          "hang": err.hang.to_dict() if err is not None and err.hang is not None else None,
          "elapsed": elapsed, "next": ok.passed, "pipeline": good.passed,
          "torch": float((x * 2).sum().item())}}))
"""


def _waiting(hang: dict, role: str) -> dict:
    groups = [g for g in hang["groups"] if g["state"] == "waiting" and g["role"] == role]
    assert len(groups) == 1, hang["groups"]
    return groups[0]


def test_a_wrong_parity_deadlock_names_the_warp_groups_the_barriers_and_the_lines():
    r = _fresh(HANG.format(bad="wrong_parity"))
    print("wrong parity -> located error after", round(r["elapsed"], 1), "s\n" + r["message"])
    assert r["kind"] == "timeout", r
    assert r["hang"] is not None, r["note"]
    hang = r["hang"]
    assert hang["outcome"] == "hung" and hang["watched_blocks"] == 4, hang
    producer, consumer = _waiting(hang, "producer"), _waiting(hang, "consumer")
    # every block's producer warp group stops at its first wait on empty[0], for parity 0 ...
    assert producer["warps"] == [0, 1, 2, 3] and producer["blocks"] == 4
    assert producer["barrier"] == "empty[0]" and producer["parity"] == 0 and producer["iterations"] == [0]
    assert producer["cell_line"] == _line_of("T.mbarrier_wait_parity(empty[")
    # ... and its consumer warp group waits for full[0], which the producer never fills
    assert consumer["warps"] == [4, 5, 6, 7] and consumer["blocks"] == 4
    assert consumer["barrier"] == "full[0]" and consumer["parity"] == 0 and consumer["iterations"] == [0]
    assert consumer["cell_line"] == _line_of("T.mbarrier_wait_parity(full[")
    assert any(f.startswith("a deadlock") for f in hang["findings"]), hang["findings"]
    assert any("parity that blocks the first pass" in f for f in hang["findings"]), hang["findings"]
    message = r["message"]
    assert "producer warp group (warps 0-3) in 4 of 4 blocks: waiting on empty[0] for parity 0" in message
    assert "consumer warp group (warps 4-7) in 4 of 4 blocks: waiting on full[0] for parity 0" in message
    assert f"line {_line_of('T.mbarrier_wait_parity(empty[')} of fault_kernels.py" in message
    assert "located in" in message
    assert r["next"] is True and r["torch"] == 12.0
    assert r["pipeline"] is True, "the correct pipeline (producer_parity=1, empty_arrivals=128) failed its check"


def test_fewer_arrivals_than_expected_is_named_with_the_counts():
    r = _fresh(HANG.format(bad="fewer_arrivals"))
    print("fewer arrivals -> located error after", round(r["elapsed"], 1), "s\n" + r["message"])
    assert r["kind"] == "timeout", r
    assert r["hang"] is not None, r["note"]
    hang = r["hang"]
    producer, consumer = _waiting(hang, "producer"), _waiting(hang, "consumer")
    # two stages pass (a fresh ring), then the producer waits for a stage the consumer never frees
    assert producer["warps"] == [0, 1, 2, 3] and producer["barrier"] == "empty[0]"
    assert producer["parity"] == 0 and producer["iterations"] == [2]
    assert consumer["warps"] == [4, 5, 6, 7] and consumer["barrier"] == "full[0]"
    assert consumer["parity"] == 1 and consumer["iterations"] == [2]
    shortfall = [f for f in hang["findings"] if f.startswith("fewer arrivals than expected")]
    assert shortfall and "256 arrivals per phase" in shortfall[0] and "only 128 threads" in shortfall[0], \
        hang["findings"]
    assert f"line {_line_of('T.mbarrier_arrive(empty[')}" in shortfall[0]
    assert not any("parity that blocks" in f for f in hang["findings"])
    assert r["cause"] is None  # the findings replace the generic list of likely causes
    assert r["next"] is True and r["torch"] == 12.0 and r["pipeline"] is True


def test_a_spin_without_barriers_is_reported_as_warps_that_never_finished_and_the_watch_is_optional():
    r = _fresh("""
        import buggy_kernels as bk
        spin = bk.compile(bk.spin_forever())
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        out = {}
        for diagnose in (True, False):
            try:
                tilelab.run(spin, flag, torch.zeros(256, device="cuda"), timeout=2.0, diagnose_hang=diagnose)
            except KernelLaunchError as e:
                out[str(diagnose)] = {"kind": e.kind, "message": str(e), "note": e.hang_note,
                                      "hang": e.hang.to_dict() if e.hang is not None else None}
        ok = tilelab.run(copy(), ref=lambda x: x)
        print("RESULT " + json.dumps({**out, "next": ok.passed}))
    """)
    watched, plain = r["True"], r["False"]
    assert watched["hang"] is not None, watched["note"]
    (group,) = [g for g in watched["hang"]["groups"] if g["state"] != "finished"]
    assert group["state"] == "running" and group["kind"] == "kernel" and group["warps"] == list(range(8))
    assert any("no watched warp was waiting on a barrier" in f for f in watched["hang"]["findings"])
    assert "likely cause" in watched["message"]  # no barrier to blame: the general causes stay
    assert plain["kind"] == "timeout" and plain["hang"] is None and plain["note"] is None
    assert "where it hung" not in plain["message"]
    assert r["next"] is True
# --- device-side asserts, a trap, a TMA descriptor refused at launch --------------------------

FAULT_KERNELS = ROOT / "tests" / "fault_kernels.py"


def _kernel_line(text: str) -> int:
    """The line of tests/fault_kernels.py holding ``text``: where the error must point."""
    (line,) = [n for n, x in enumerate(FAULT_KERNELS.read_text().splitlines(), start=1) if text in x]
    return line


_DEVICE_FAULTS = """
    import contextlib, io
    from fault_kernels import asserting, asserting_bare, trapping
    def attempt(factory, poison):
        a = torch.rand(4096, device="cuda")
        poison(a)
        shown = io.StringIO()
        err = None
        with contextlib.redirect_stderr(shown):
            try:
                tilelab.run(factory(), a, torch.empty(4096, device="cuda"))
            except KernelLaunchError as e:
                err = e
        mine = float((torch.arange(10, device="cuda", dtype=torch.float32) * 2).sum().item())
        ok = tilelab.run(copy(), ref=lambda x: x)
        return {"kind": err and err.kind, "message": str(err),
                "fault": err.device_fault.to_dict() if err is not None and err.device_fault else None,
                "stderr": shown.getvalue(), "mine": mine, "next": ok.passed}
    def one(a):
        a[3 * 256 + 17] = -1.0
    def everywhere(a):
        a.neg_()
    def first_block(a):
        a[100] = -1.0
    print("RESULT " + json.dumps({"assert": attempt(asserting, one), "bare": attempt(asserting_bare, everywhere),
                                  "trap": attempt(trapping, first_block)}))
"""


@pytest.fixture(scope="module")
def device_faults():
    """A device assert with a message (one thread fails), one without (every thread fails) and a
    trap, one after the other in one fresh process: each fault, then the next launch there."""
    return _fresh(_DEVICE_FAULTS)


def test_a_device_assert_names_the_kernel_line_the_thread_and_the_message(device_faults):
    r = device_faults["assert"]
    fault = r["fault"]
    assert r["kind"] == "device_assert" and fault is not None, r["message"]
    assert fault["cell_line"] == _kernel_line('"A must be non-negative")'), r["message"]
    assert fault["cell_file"].endswith("fault_kernels.py") and fault["device_line"] is not None
    assert fault["message"] == "A must be non-negative"
    assert fault["block"] == [3, 0, 0] and fault["thread"] == [17, 0, 0], r["stderr"]
    assert "Assertion" in r["stderr"]  # CUDA's own line reached the notebook's stderr
    assert "your line" in r["message"] and "block (3, 0, 0), thread (17, 0, 0)" in r["message"]
    assert r["mine"] == 90.0 and r["next"] is True


def test_a_device_assert_without_a_message_failing_everywhere_is_located_and_folded(device_faults):
    r = device_faults["bare"]
    fault = r["fault"]
    assert r["kind"] == "device_assert" and fault is not None, r["message"]
    assert fault["cell_line"] == _kernel_line("no_stack_info=True"), r["message"]
    assert fault["threads"] >= 1 and fault["block"] is not None
    if fault["threads"] > 3:  # CUDA printed one line per thread: the notebook shows three and a count
        assert "more thread(s) failed the assert" in r["stderr"], r["stderr"][-2000:]
        assert r["stderr"].count("Assertion `") == 3
    assert r["mine"] == 90.0 and r["next"] is True


def test_a_trap_names_the_kernel_line_and_the_next_launch_works(device_faults):
    r = device_faults["trap"]
    fault = r["fault"]
    assert r["kind"] in ("launch_failure", "other") and fault is not None, r["message"]
    assert fault["kind"] == "trap" and fault["cell_line"] == _kernel_line('T.call_extern("void", "__trap")')
    assert "__trap()" in r["message"] and "your line" in r["message"]
    assert r["mine"] == 90.0 and r["next"] is True


def test_a_tma_descriptor_the_launcher_refuses_names_the_drivers_rule():
    r = _fresh("""
        from fault_kernels import tma_rows
        kernel = tma_rows()
        def attempt(k):
            a = torch.randn(256, k, dtype=torch.float16, device="cuda")
            b = torch.empty(256, k, dtype=torch.float16, device="cuda")
            try:
                return tilelab.run(kernel, a, b, ref=lambda x: x).passed, None
            except KernelLaunchError as err:
                return None, {"kind": err.kind, "sticky": err.sticky, "rules": list(err.tma_rules),
                              "message": str(err)}
        refused = attempt(1001)  # rows of 2002 bytes
        fine = attempt(1024)  # rows of 2048 bytes
        print("RESULT " + json.dumps({"refused": refused, "fine": fine}))
    """)
    passed, err = r["refused"]
    assert err is not None, r
    assert err["kind"] == "tma_descriptor" and not err["sticky"], err["message"]
    assert err["rules"] and "global_stride_multiple" in err["rules"][0] and "2002" in err["rules"][0], err["message"]
    assert "the driver's rule it breaks" in err["message"]
    assert r["fine"] == [True, None], r["fine"]
