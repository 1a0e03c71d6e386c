"""Suite-wide set-up.

* nvcc is hidden unless a GPU is present: a shim named ``nvcc`` goes first on PATH and as
  ``$CUDA_HOME/bin/nvcc``; it records every call and fails. The autouse fixture
  ``_nvcc_never_called`` fails any test, wherever it runs in the order, during which the shim
  was called: inspection must never need nvcc. (A test that calls the shim on purpose carries
  the marker ``calls_nvcc``.)
* tilelab's report cache lives in a fresh temporary folder for the session.
* GPU tests (marker ``gpu``) are skipped, with the reason shown, where there is no CUDA GPU.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


def _gpu_present() -> bool:
    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


GPU_PRESENT = _gpu_present()
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="tilelab-tests-"))
NVCC_LOG = _SESSION_TMP / "nvcc-calls.log"

os.environ["TILELAB_CACHE_DIR"] = str(_SESSION_TMP / "reports")
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
if not GPU_PRESENT:
    shim_home = _SESSION_TMP / "cuda-hidden"
    (shim_home / "bin").mkdir(parents=True)
    shim = shim_home / "bin" / "nvcc"
    shim.write_text(f'#!/bin/sh\necho "nvcc $*" >> "{NVCC_LOG}"\n'
                    'echo "nvcc is hidden in this test run" >&2\nexit 127\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["PATH"] = f"{shim_home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["CUDA_HOME"] = str(shim_home)
    os.environ["CUDA_PATH"] = str(shim_home)
    os.environ["TILELAB_NVCC_HIDDEN"] = "1"


def pytest_collection_modifyitems(config, items):
    _slow_files_first(items)
    if GPU_PRESENT:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: none on this machine (run `make test-gpu` on a machine with one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _slow_files_first(items) -> None:
    """Files with the most tests marked ``slow`` first, the others after in their order: with the
    files spread over several processes (``make test``), no long file starts last while the other
    processes have nothing left to do. Tests never depend on this order."""
    slow: dict[str, int] = {}
    for item in items:
        slow.setdefault(item.nodeid.split("::")[0], 0)
        if item.get_closest_marker("slow"):
            slow[item.nodeid.split("::")[0]] += 1
    rank = {path: n for n, path in enumerate(sorted(slow, key=lambda path: -slow[path]))}  # stable
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.fixture(autouse=True, scope="session")
def _sigint_raises_keyboard_interrupt():
    """The stop button is a KeyboardInterrupt, raised by Python's SIGINT handler (the tests press
    it with ``_thread.interrupt_main`` or a SIGINT to this process). A process started in the
    background by a non-interactive shell (``cmd &``, nohup, some CI runners) inherits SIGINT
    ignored, and Python then installs no handler, so a press would do nothing: the tests put
    Python's own handler in place for the session (in each test process) and restore after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL):
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def nvcc_log() -> Path:
    return NVCC_LOG


def _nvcc_calls() -> str:
    return NVCC_LOG.read_text() if NVCC_LOG.exists() else ""


@pytest.fixture(autouse=True)
def _nvcc_never_called(request):
    """Fails the test during which the hidden nvcc was called, naming the calls."""
    before = _nvcc_calls()
    yield
    if GPU_PRESENT or request.node.get_closest_marker("calls_nvcc"):
        return
    new = _nvcc_calls()[len(before):]
    if new:
        pytest.fail(f"nvcc was called during {request.node.nodeid} (inspection must not need it):\n{new}")


@pytest.fixture
def record_progress(monkeypatch):
    """``record_progress(module)`` replaces ``module.Progress`` (the sweep's progress bar) with a
    recorder and returns the list every bar made from then on is appended to (its total, desc,
    count of updates and whether it was closed)."""

    def record(module) -> list:
        bars: list = []

        class Bar:
            def __init__(self, total, desc, enabled):
                self.total, self.desc, self.updates, self.closed = total, desc, 0, False
                bars.append(self)

            def update(self):
                self.updates += 1

            def close(self):
                self.closed = True

        monkeypatch.setattr(module, "Progress", Bar)
        return bars

    return record


@pytest.fixture(scope="session")
def gemm_report():
    """The Hopper GEMM of examples/gemm.py (1024^3, 128x128x32 tiles) inspected for sm_90a, made
    once per process (``tests/reports.py``)."""
    pytest.importorskip("tilelang", reason="TileLang is not installed: no compiler output")
    from reports import gemm

    return gemm()
