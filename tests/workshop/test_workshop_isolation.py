"""A student's kernel bug costs one failed check with its reason, never the process that checks it:
02.1's sign slip (a store below the start of C), a read below the start of A, a crash and a kernel
that never ends each leave this process alive and the next check working."""

from __future__ import annotations

import os

import pytest

from tilelab import workshop
from tilelab.workshop import _answers, _core, _isolate

pytestmark = pytest.mark.skipif(not _isolate.can_isolate(), reason="checks run in this process here (no fork, or "
                                "a CUDA GPU: the launch layer's worker isolates each launch there)")

HEAD = "row, col = by * block_M + i, bx * block_N + j"


@pytest.fixture(autouse=True)
def own_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()


def _scale_add(old: str, new: str):
    ex = _core.get("02.1")
    source = ex.solution.replace(old, new)
    assert source != ex.solution
    return _answers.evaluate(ex, source)


def _the_solution_still_passes():
    ex = _core.get("02.1")
    assert workshop.check("02.1", _answers.evaluate(ex, ex.solution)).passed


@pytest.mark.slow
@pytest.mark.heavy
def test_the_sign_slip_of_02_1_is_a_failed_check_that_names_the_store_below_zero():
    pid = os.getpid()
    result = workshop.check("02.1", _scale_add(HEAD, "row, col = by * block_M - i, bx * block_N + j"))
    assert result.status == "failed" and os.getpid() == pid
    assert "out of bounds" in result.message or "below zero" in result.message, result.message
    assert "rows -31" in result.message or "before the start" in result.message, result.message
    _the_solution_still_passes()


@pytest.mark.slow
def test_a_read_below_the_start_of_a_is_caught():
    result = workshop.check("02.1", _scale_add("alpha * A[row, col]", "alpha * A[by * block_M - i, col]"))
    assert result.status == "failed" and "wrong values" in result.message, result.message
    # the reads below A's start were caught, not performed, and are named with the first block that made them
    assert "it read A out of bounds" in result.message and "below its start, in blocks (bx, by) = (0, 0)" in \
        result.message, result.message
    _the_solution_still_passes()


@pytest.mark.slow
def test_a_kernel_that_never_ends_is_stopped_at_the_time_limit():
    endless = _scale_add("C[row, col] = alpha * A[row, col] + B[row, col]",
                         "for t in T.serial(1 << 30):\n"
                         "                        for u in T.serial(1 << 30):\n"
                         "                            C[row, col] = C[row, col] * alpha + A[row, col] + B[row, col]")
    result = workshop.check("02.1", endless, timeout=8)
    assert result.status == "failed" and "stopped after 8 s" in result.message, result.message
    _the_solution_still_passes()


def test_a_crash_and_an_exception_in_an_isolated_call_come_back():
    crashed = _isolate.isolated(lambda: os.abort(), timeout=30)
    assert crashed.status == "crashed" and "SIGABRT" in _isolate.crash_words(crashed.signal)
    raised = _isolate.isolated(lambda: 1 / 0, timeout=30)
    assert raised.status == "raised" and isinstance(raised.error, ZeroDivisionError)
    wrong = _isolate.isolated(lambda: (_ for _ in ()).throw(workshop.Wrong("rows 3-4 are wrong")), timeout=30)
    assert isinstance(wrong.error, workshop.Wrong) and str(wrong.error) == "rows 3-4 are wrong"
    said = _isolate.isolated(lambda: (os.write(2, b"[12:00:01] x.cc:3: Warning: Buffer read before initialization\n"
                                                b"   T.gemm accumulates into C\n\nother\n"), 7)[1], 30)
    assert said.value == 7
    assert _isolate.warnings_in(said.stderr) == ["Buffer read before initialization T.gemm accumulates into C"]


def test_a_kernel_check_runs_its_launches_in_its_own_child():
    """The check's child is the process of its own a launch worker would be: its launches run in
    it (no further Python importing torch and TileLang per check), its parent keeps no worker."""
    from tilelab.launch import _worker

    seen = _isolate.isolated(lambda: (_worker.in_worker(), os.getpid()), timeout=30)
    assert seen.value[0] is True and seen.value[1] != os.getpid()
    assert not _worker.in_worker()


@pytest.mark.stop_button
def test_the_stop_button_ends_an_isolated_call_and_its_child(tmp_path):
    import _thread
    import threading
    import time

    said = tmp_path / "child.pid"

    def endless():
        said.write_text(str(os.getpid()))
        while True:
            pass

    def press_when_started():
        deadline = time.monotonic() + 120
        while not said.exists() or not said.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        _thread.interrupt_main()

    threading.Thread(target=press_when_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        _isolate.isolated(endless, timeout=300)
    with pytest.raises(ProcessLookupError):  # stopped and reaped: no such process any more
        os.kill(int(said.read_text()), 0)
