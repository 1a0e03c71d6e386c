"""The worker protocol (tilelab.launch._worker) with fake launchers, no GPU: values, printed
output in order, errors re-created, timeouts, crashes and the fresh worker after each."""

from __future__ import annotations

import os
import time

import pytest
import worker_fakes as fakes

from tilelab.launch import KernelLaunchError
from tilelab.launch._worker import Worker, WorkerDied, WorkerTimeout, in_worker


@pytest.fixture(scope="module")
def worker():
    w = Worker(device=0)
    yield w
    w.close()


def test_call_returns_value_and_stays_warm(worker):
    assert worker.call(fakes.add, 2, b=3) == 5
    first = worker.call(fakes.pid)
    assert first != os.getpid()
    assert worker.call(fakes.pid) == first  # the same process: kept warm
    assert not in_worker()


def test_printed_output_is_forwarded_in_order(worker, capsys):
    assert worker.call(fakes.prints, 3) == 3
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line]
    # C stdio is flushed at the end, so its lines come first only if they were written first;
    # the fd-level capture keeps each stream's order and loses nothing.
    assert [line for line in lines if line.startswith("device")] == ["device line 0", "device line 1", "device line 2"]
    assert "python line" in lines and "raw fd line" in lines


def test_errors_are_recreated_with_their_type(worker):
    with pytest.raises(ValueError, match="not a multiple of 64") as info:
        worker.call(fakes.fail_value)
    assert "fail_value" in info.value.worker_traceback
    pid = worker.pid
    assert worker.call(fakes.add, 1, 1) == 2 and worker.pid == pid  # an ordinary error keeps the worker


def test_unpicklable_exception_becomes_worker_error(worker):
    from tilelab.launch._worker import WorkerError

    with pytest.raises(WorkerError, match="_Unpicklable: 1/2"):
        worker.call(fakes.fail_unpicklable)


def test_unpicklable_value_is_an_error_not_a_hang(worker):
    with pytest.raises(TypeError, match="could not be sent back"):
        worker.call(fakes.returns_lambda, timeout=60)


def test_unsendable_function_is_a_clear_error(worker):
    with pytest.raises(TypeError, match="isolate=False"):
        worker.call(lambda: 1)


def test_sticky_error_discards_the_worker(worker):
    pid = worker.pid
    with pytest.raises(KernelLaunchError) as info:
        worker.call(fakes.fail_sticky)
    assert info.value.kind == "illegal_address" and info.value.sticky
    assert not worker.alive  # its CUDA context would be lost: never reused
    assert worker.call(fakes.pid) != pid


def test_timeout_kills_within_the_limit_and_next_call_gets_a_fresh_worker(worker):
    pid = worker.call(fakes.pid)
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        worker.call(fakes.hang, timeout=1.0, label="spin grid (1, 1, 1)")
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0 + 2.0, elapsed
    assert "spin grid (1, 1, 1)" in str(info.value) and "1 s" in str(info.value)
    assert not worker.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung process is gone
    assert worker.call(fakes.add, 1, 2) == 3
    assert worker.call(fakes.pid) != pid


def test_crash_is_reported_and_recovered(worker):
    starts = worker.starts
    with pytest.raises(WorkerDied, match="exit code 3"):
        worker.call(fakes.crash, 3)
    assert worker.call(fakes.add, 4, 4) == 8
    assert worker.starts == starts + 1


def test_tensors_are_shared_not_copied(worker):
    torch = pytest.importorskip("torch")
    t = torch.zeros(1000)
    assert worker.call(fakes.write_into, t, 2.0) == 2000.0
    assert float(t.sum()) == 2000.0  # the worker wrote into this process's tensor


def test_launch_timeout_error_names_kernel_grid_and_causes():
    from tilelab.launch import _isolated
    from tilelab.launch._run import Prepared

    prepared = Prepared(compiled=None, name="spin_forever", params=[], backend="tvm_ffi")
    err = _isolated.timeout_error(prepared, WorkerTimeout("spin_forever", 2.0), {"M": 128})
    text = str(err)
    assert err.kind == "timeout" and err.isolated and not err.sticky
    assert "spin_forever" in text and "2 s" in text and "M=128" in text
    assert "loop whose exit condition is never met" in text and "mbarrier" in text and "deadlock" in text
    assert "restart" not in text


def test_kernel_payload_unpickles_in_a_fresh_worker():
    """A prim_func refers to TileLang operators: the worker imports TileLang before unpickling."""
    import pickle

    import tilelang.language as T

    from tilelab.launch import _isolated

    @T.prim_func
    def scale(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            B[tx] = A[tx] * 2.0

    payload = pickle.dumps((scale, None, None, "tvm_ffi", {}, None, ("B",)))
    with Worker(device=0) as fresh:
        func, *_rest, outputs = fresh.call(_isolated.unpack, payload, timeout=300)
    assert func.script() == scale.script() and outputs == ("B",)


def _interrupt_once_started(started):
    """The stop button, pressed once the call runs in the worker (``started`` exists): a SIGINT to
    this process, as Jupyter sends it. Returns a list that gets the moment it was sent."""
    import signal
    import threading

    sent: list[float] = []

    def press():
        deadline = time.monotonic() + 300  # only keeps a broken worker from hanging the test
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press, daemon=True).start()
    return sent


@pytest.mark.stop_button
def test_interrupt_returns_what_was_measured_within_a_second(worker, tmp_path):
    from tilelab.launch._worker import LaunchInterrupted

    pid = worker.call(fakes.pid)
    sent = _interrupt_once_started(tmp_path / "started")
    with pytest.raises(LaunchInterrupted) as info:
        worker.call(fakes.measure_until_stopped, 60.0, started=str(tmp_path / "started"), label="bench")
    assert time.monotonic() - sent[0] < 1.0
    assert isinstance(info.value, KeyboardInterrupt)
    assert info.value.partial and all(s == 1.0 for s in info.value.partial)
    assert worker.pid == pid  # it answered: kept warm


@pytest.mark.stop_button
def test_interrupt_of_a_stuck_call_kills_it_within_a_second(worker, tmp_path):
    from tilelab.launch._worker import LaunchInterrupted

    worker.call(fakes.pid)
    sent = _interrupt_once_started(tmp_path / "started")
    with pytest.raises(LaunchInterrupted) as info:
        worker.call(fakes.hang, 60.0, started=str(tmp_path / "started"))
    assert time.monotonic() - sent[0] < 1.0 + 1.5  # grace, then the kill
    assert info.value.partial is None and not worker.alive
    assert worker.call(fakes.add, 1, 1) == 2



def test_a_stop_landing_while_the_call_is_still_being_sent_stops_the_running_call(worker, tmp_path):
    """On a busy machine the worker can read the call and start it before the notebook's thread
    returns from writing it: a stop landing then must stop the call (LaunchInterrupted with what
    it measured), not escape as a bare KeyboardInterrupt and leave the call running."""
    from tilelab.launch._worker import LaunchInterrupted

    pid = worker.call(fakes.pid)
    started = tmp_path / "started"
    real_send = worker._conn.send_bytes

    def send_then_stop(payload):
        real_send(payload)
        deadline = time.monotonic() + 300  # only keeps a broken worker from hanging the test
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        raise KeyboardInterrupt  # the stop, before the write returned

    worker._conn.send_bytes = send_then_stop
    try:
        with pytest.raises(LaunchInterrupted) as info:
            worker.call(fakes.measure_until_stopped, 60.0, started=str(started), label="bench")
    finally:
        del worker._conn.send_bytes
    assert info.value.partial and all(s == 1.0 for s in info.value.partial)
    assert worker.pid == pid and worker.call(fakes.add, 1, 1) == 2  # it answered: kept warm

def test_launch_shape_is_read_from_the_prim_func_with_sizes_substituted():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import buggy_kernels as bk
    import gemm_dynamic

    from tilelab.launch import _isolated
    from tilelab.launch._run import Prepared

    def shape(func, bound):
        return _isolated.launch_shape(Prepared(compiled=func, name="k", params=[], backend="tvm_ffi"), bound)

    assert shape(bk.half_written(), {}) == "grid (4, 4, 1), block (128, 1, 1)"
    assert shape(bk.spin_forever(), {}) == "grid (1, 1, 1), block (256, 1, 1)"
    # a dynamic M: (m + 127) // 128 blocks along y, as matmul_dynamic_m's T.Kernel writes it
    assert shape(gemm_dynamic.matmul_dynamic_m(1024, 1024), {"m": 1000}) == "grid (8, 8, 1), block (256, 1, 1)"
    assert shape(gemm_dynamic.matmul_dynamic_m(1024, 1024), {}) == "grid (8, '(m + 127) // 128', 1), block (256, 1, 1)"
    assert shape(object(), {}) == ""


@pytest.mark.heavy
def test_a_script_without_a_main_guard_is_not_rerun_in_the_worker(tmp_path):
    """The spawn start method would import the script again in the worker; tilelab hides it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    marker = tmp_path / "ran.txt"
    script = tmp_path / "user_script.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(root)!r}, {str(root / 'tests')!r}]\n"
        f"open({str(marker)!r}, 'a').write('x')\n"
        "import worker_fakes\n"
        "from tilelab.launch import Worker\n"
        "w = Worker()\n"
        "print('RESULT', w.call(worker_fakes.add, 20, 22))\n"
        "w.close()\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert "RESULT 42" in proc.stdout, proc.stderr[-2000:]
    assert marker.read_text() == "x"  # the script's top level ran once: not again in the worker


def test_a_killed_worker_is_replaced_in_the_background():
    with Worker(device=0, prestart=True) as w:
        first = w.call(fakes.pid)
        with pytest.raises(WorkerTimeout):
            w.call(fakes.hang, timeout=0.5)
        deadline = time.monotonic() + 120
        while not w.alive and time.monotonic() < deadline:
            time.sleep(0.05)  # nobody calls: the replacement starts by itself
        assert w.alive and w.pid != first
        replacement = w.pid
        assert w.call(fakes.pid) == replacement  # the next launch uses it
        assert w.starts == 2


def test_a_worker_killed_from_outside_between_calls_is_replaced_by_the_next_call():
    import signal

    with Worker(device=0) as w:
        first = w.call(fakes.pid)
        os.kill(first, signal.SIGKILL)
        w._process.join(30)  # the kill has landed
        assert w.call(fakes.pid) != first  # a fresh worker takes the call
        assert w.starts == 2


def test_a_broken_pipe_to_the_worker_sends_the_call_to_a_fresh_one():
    """The pipe to the worker breaks while start() still sees its process (a kill from outside lands
    between the two): nothing reached the old worker, so a fresh one runs the call."""
    with Worker(device=0) as w:
        first = w.call(fakes.pid)
        w._conn.close()
        assert w.call(fakes.pid) != first
        assert w.starts == 2


def test_a_timeout_survives_tblibs_pickling_of_exceptions():
    """Dask installs tblib's pickling for every exception; a worker timeout (whose instance layout
    is OSError's) and a launch error raised from one must still cross a process boundary."""
    import subprocess
    import sys

    code = ("import pickle\nfrom tblib import pickling_support\n"
            "from tilelab.launch._worker import WorkerTimeout\n"
            "from tilelab.launch._cuda_errors import KernelLaunchError\n"
            "pickling_support.install()\n"
            "try:\n    try:\n        raise WorkerTimeout('k', 2.0)\n"
            "    except WorkerTimeout:\n        raise KernelLaunchError('k', 'timeout', 'no answer within 2 s')\n"
            "except KernelLaunchError as err:\n    again = pickle.loads(pickle.dumps(err))\n"
            "t = pickle.loads(pickle.dumps(WorkerTimeout('k', 2.0)))\n"
            "print(type(again.__context__).__name__, t.timeout, str(t))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split(" ", 2) == ["WorkerTimeout", "2.0",
                                        "k did not finish within 2 s; the worker process was killed (the next "
                                        "launch starts a fresh one)\n"]


def test_warm_starts_the_worker_with_what_launches_need_once(worker, monkeypatch):
    """``warm`` (a sweep calls it while it compiles, with _isolated's warm-up) starts the process
    if needed and imports TileLang and the measuring code there; a warm process is left alone (no
    call at all)."""
    from tilelab.launch import _isolated

    worker.warm(_isolated.prepare_for_launches)
    pid, starts = worker.pid, worker.starts
    assert pid is not None and worker.call(fakes.imported, "tilelang")
    assert worker.call(fakes.imported, "tilelab.launch._bench")
    monkeypatch.setattr(worker, "call", lambda *a, **k: pytest.fail("a warm worker was called again"))
    worker.warm()
    assert (worker.pid, worker.starts) == (pid, starts)
