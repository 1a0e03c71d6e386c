"""A kernel check in a process of its own: a student's bug costs one failed check, never the notebook.

A check of a kernel exercise compiles and launches the student's kernel, where a wrong index can
write before the start of a buffer (the heap is corrupted and the process aborts: "corrupted size
vs. prev_size"), read far outside it (a segmentation fault), or loop forever. :func:`isolated`
runs the checker in a child forked from this process (it sees the answer and everything the
notebook defined, with nothing to pickle) and waits for it at most ``timeout`` seconds; what the
child said, or how it ended, comes back as an :class:`Outcome`. What the child wrote to its
standard error (TileLang's own warnings, such as a buffer "read before initialization") comes back
too, so that the checker's message can carry the warnings that name the bug.

Where a process cannot be forked (Windows), or a CUDA GPU is present (a forked child cannot use a
CUDA context its parent made; there the launch layer runs every launch in its worker process),
the checker runs in this process.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT = 300.0  # seconds a kernel check may take (compiling included) before it is stopped


@dataclass(frozen=True)
class Outcome:
    """How an isolated call ended: ``status`` "returned" (``value``), "raised" (``error``: the
    exception, re-created), "crashed" (``signal``: the signal or exit status that ended it), or
    "timed out"; ``stderr`` what the call wrote to its standard error."""

    status: str
    value: Any = None
    error: BaseException | None = None
    signal: int = 0
    stderr: str = ""


def can_isolate() -> bool:
    if not hasattr(os, "fork"):
        return False
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return False
    except Exception:  # torch missing or broken: nothing of CUDA to protect
        pass
    from .. import _tilelang

    return not _tilelang.has_gpu()


def _forget_inherited_workers() -> None:
    """In the forked child: the launch workers this process inherited belong to its parent (their
    pipes are the parent's too), and the child needs none: it is the process of its own a launch
    worker would be (a crash or a hang costs this check, never the notebook), so its kernels run
    in it, without a further Python that imports torch and TileLang (seconds a check)."""
    import threading
    from multiprocessing import util

    util._run_after_forkers()  # type: ignore[attr-defined]  # what multiprocessing runs in a child it forks
    try:
        from ..launch import _worker
    except Exception:
        return
    _worker._DEFAULT_LOCK = threading.Lock()
    _worker._DEFAULT.clear()
    _worker.stand_in_for_a_worker()


def _one_thread() -> None:
    """In the forked child: torch's thread pool (OpenMP) does not survive a fork once the parent
    used it, and a parallel region would wait for threads that are not there; one thread runs
    every operation inline."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(1)
        except Exception:
            pass


def _portable(err: BaseException) -> BaseException:
    """The exception as one that pickles (its type if it pickles by itself, else a RuntimeError)."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        text = str(getattr(err, "summary", "") or err)
        try:  # the same type with its text alone (a checker's Wrong keeps its type), if that pickles
            plain = type(err)(text)
            pickle.loads(pickle.dumps(plain))
            return plain
        except Exception:
            return RuntimeError(f"{type(err).__name__}: {text}")


def isolated(call: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT) -> Outcome:
    """``call()`` in a forked child, stopped after ``timeout`` seconds (see the module)."""
    read_fd, write_fd = os.pipe()
    err_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed below, after the child)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            os.dup2(err_file.fileno(), 2)
            import faulthandler

            faulthandler.disable()  # a crash is reported by the parent, not dumped into the notebook
            _one_thread()
            _forget_inherited_workers()
            try:
                result: tuple[str, Any] = ("returned", call())
                payload = pickle.dumps(result)
            except BaseException as err:  # everything the call raised goes back
                payload = pickle.dumps(("raised", _portable(err)))
            view = memoryview(payload)
            while view:
                n = os.write(write_fd, view)
                view = view[n:]
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    stopped = True  # until the wait below ends by itself: the stop button (a KeyboardInterrupt) ends the child too
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                data = os.read(read_fd, 1 << 16)
                if not data:
                    break
                chunks.append(data)
        stopped = False
    finally:
        os.close(read_fd)
        if timed_out or stopped:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        err_file.seek(0)
        stderr = err_file.read().decode(errors="replace")
        err_file.close()
    if timed_out:
        return Outcome("timed out", stderr=stderr)
    if chunks:
        kind, value = pickle.loads(b"".join(chunks))
        if kind == "returned":
            return Outcome("returned", value=value, stderr=stderr)
        return Outcome("raised", error=value, stderr=stderr)
    ended = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return Outcome("crashed", signal=ended, stderr=stderr)


_SIGNALS = {int(signal.SIGSEGV): "a segmentation fault: a load or store far outside a buffer",
            int(signal.SIGABRT): "an abort: memory next to a buffer was overwritten (a store out of bounds, "
                                 "often before the start: a negative index)",
            int(signal.SIGBUS): "a bus error: a misaligned or unmapped access",
            int(signal.SIGFPE): "an arithmetic fault (an integer division by zero?)"}


def crash_words(ended: int) -> str:
    """What a child that ended with ``ended`` (minus a signal number, or an exit status) met."""
    if ended < 0:
        sig = -ended
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        return f"{name}, {_SIGNALS.get(sig, 'the process was killed')}"
    return f"exit status {ended}"


def warnings_in(stderr: str) -> list[str]:
    """TileLang's own warnings in what a check wrote to standard error: each "Warning:" line with
    the explaining lines right after it (deduplicated, at most four)."""
    found: list[str] = []
    lines = stderr.splitlines()
    for n, line in enumerate(lines):
        if "warning" not in line.lower():
            continue
        text = line.split("Warning:", 1)[-1].strip() if "Warning:" in line else line.strip()
        for more in lines[n + 1:n + 3]:
            if not more.strip() or "warning" in more.lower() or more.lstrip().startswith("["):
                break
            text += " " + more.strip()
        if text not in found:
            found.append(text[:400])
    return found[:4]
