"""A warm worker process that launches kernels, so that a kernel bug never takes the notebook down.

A hung kernel blocks the process that launched it forever, and an illegal address leaves that
process's CUDA context unusable. tilelab therefore launches in a child process on the same GPU,
started once (per device) and kept warm: compiled kernels stay loaded there, and the user's CUDA
tensors travel through CUDA IPC (``torch.multiprocessing``'s tensor sharing, spawn start method),
so outputs land in the user's own tensors and nothing large is copied.

The API is small and is what every launch path uses::

    worker = Worker(device=0)                 # the process starts on the first call
    value = worker.call(fn, *args, timeout=30.0, label="gemm grid (8, 8, 1)", **kwargs)
    worker.close()

``fn`` must be picklable by reference (a module-level function); ``args``/``kwargs``/the value are
pickled (CUDA tensors by IPC handle). ``call`` returns ``fn``'s value, or raises:

* :class:`WorkerTimeout` when no answer came within ``timeout`` seconds: the worker was killed,
  the next call starts a fresh one;
* :class:`WorkerDied` when the worker exited (a crash, or killed from outside);
* the exception ``fn`` raised, re-created in this process (its traceback text is kept in
  ``err.worker_traceback``); when the error left the worker's CUDA context unusable
  (``err.sticky``), the worker is discarded so the next call gets a fresh one;
* :class:`LaunchInterrupted` (a ``KeyboardInterrupt``) within a second of the notebook's stop
  button: the worker is asked to stop (SIGUSR1; long loops poll :func:`stop_requested` and return
  what they have, which the exception carries as ``partial``); one that does not answer within
  INTERRUPT_GRACE_S (a kernel still running) is killed.

Whatever ``fn`` (or the kernel: device ``printf``) writes to the worker's stdout is captured at the
file-descriptor level and written to this process's ``sys.stdout`` before ``call`` returns, in
order, so it appears in the notebook cell that launched it. The worker's stderr (where CUDA prints
a device-side assert, one line per failing thread) is captured the same way, into a file the
notebook's side can read even when the worker dies, and written to ``sys.stderr``. CUDA's
per-thread assert lines, and TileLang's per-thread assert messages on stdout, are cut to a few
each; both texts, whole, stay on an exception from the call (``err.worker_stdout``,
``err.worker_stderr``), and stderr on :class:`WorkerDied` and :class:`WorkerTimeout` (``.stderr``).
The worker ignores SIGINT (Jupyter
sends it to the whole process group): the notebook's side decides.

:func:`default_worker` gives the one warm worker of this process for a device.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..records.errors import TilelabError

START_TIMEOUT_S = 300.0  # importing torch (and later TileLang) in a fresh process, on a busy machine
KILL_WAIT_S = 1.5  # how long a killed worker may take to go
INTERRUPT_GRACE_S = 0.7  # how long an interrupted call may take to hand back what it measured


class WorkerError(TilelabError, RuntimeError):
    """The worker could not run a call (it died, or hung past its timeout)."""


class WorkerTimeout(WorkerError, TimeoutError):
    """No answer within the call's timeout; the worker was killed."""

    def __new__(cls, *args: Any, **kwargs: Any) -> WorkerTimeout:
        # Its instance layout is OSError's (TimeoutError): a copy made without __init__ (tblib's
        # pickling, which Dask installs for every exception) must be created by OSError's __new__.
        return TimeoutError.__new__(cls)

    def __init__(self, label: str, timeout: float, printed: str = "") -> None:
        self.label, self.timeout, self.printed = label, timeout, printed
        self.stderr = ""  # what the worker wrote to stderr during the call, up to the kill
        super().__init__(f"{label or 'the call'} did not finish within {timeout:g} s; the worker process was killed "
                         "(the next launch starts a fresh one)")


class WorkerDied(WorkerError):
    """The worker process ended while running a call; ``stderr`` is what it wrote there during
    the call (a crash's last words)."""

    stderr = ""


class LaunchInterrupted(KeyboardInterrupt):
    """The notebook was interrupted during a call; ``partial`` is what the call had measured by
    then (None when it could not say: the worker was killed)."""

    def __init__(self, label: str = "", partial: Any = None) -> None:
        self.label, self.partial = label, partial
        kept = "; what was measured so far is in .partial" if partial is not None else ""
        super().__init__(f"{label or 'the call'} was interrupted{kept}")


_STOP = False


def stop_requested() -> bool:
    """True in the worker once the notebook asked the current call to stop (long loops poll it)."""
    return _STOP


def _on_stop(signum: int, frame: Any) -> None:
    global _STOP
    _STOP = True


@dataclass(frozen=True)
class _Failure:
    """An exception raised in the worker, as sent back: the exception itself when it survives
    pickling, else its type name and message."""

    type_name: str
    message: str
    traceback: str
    exception: Any = None  # the pickled-and-checked exception, or None
    sticky: bool = False


STDERR_FILE = "stderr"  # in the worker's capture folder: this call's stderr, readable after a crash


def _capture_start(folder: str | None = None) -> tuple[Any, ...]:
    """Send fd 1 to a temporary file and fd 2 to ``folder``/stderr (truncated for each call)."""
    sys.stdout.flush()
    saved = os.dup(1)
    tmp = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _capture_end, after the call it captures)
    os.dup2(tmp.fileno(), 1)
    if folder is None:
        return saved, tmp, None, None
    try:
        sys.stderr.flush()
    except Exception:
        pass
    saved_err = os.dup(2)
    err = open(os.path.join(folder, STDERR_FILE), "w+b")  # noqa: SIM115 (closed by _capture_end)
    os.dup2(err.fileno(), 2)
    return saved, tmp, saved_err, err


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)  # device printf goes through the C library's stdout buffer
    except Exception:
        pass


def _capture_end(state: tuple[Any, ...]) -> tuple[str, str]:
    """(stdout, stderr) written since :func:`_capture_start`; the real fds are back."""
    saved, tmp, saved_err, err = state
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    _flush_c_stdio()
    os.dup2(saved, 1)
    os.close(saved)
    tmp.seek(0)
    text = tmp.read().decode("utf-8", "replace")
    tmp.close()
    err_text = ""
    if err is not None:
        os.dup2(saved_err, 2)
        os.close(saved_err)
        err.seek(0)
        err_text = err.read().decode("utf-8", "replace")
        err.close()
    return text, err_text


def _failure(err: BaseException) -> _Failure:
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    exc = None
    try:
        exc = pickle.loads(pickle.dumps(err))
        if type(exc) is not type(err) or str(exc) != str(err):
            exc = None
    except Exception:
        exc = None
    return _Failure(type(err).__name__, str(err), tb, exc, bool(getattr(err, "sticky", False)))


def _serve(conn: Any, device: int, capture_folder: str | None = None) -> None:
    """The worker's loop: receive (fn, args, kwargs), answer ("ok", value, printed) or
    ("error", _Failure, printed), ``printed`` being (stdout, stderr); None ends it."""
    global _STOP
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, _on_stop)
    os.environ["TILELAB_IN_WORKER"] = "1"
    os.environ["TILELAB_WORKER_DEVICE"] = str(device)
    conn.send(("ready", os.getpid(), ""))
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        state = _capture_start(capture_folder if capture_folder and os.path.isdir(capture_folder) else None)
        _STOP = False
        try:
            request = pickle.loads(message)
            if request is None:
                _capture_end(state)
                return
            fn, args, kwargs = request
            reply: tuple[str, Any] = ("ok", fn(*args, **kwargs))
        except BaseException as err:  # everything goes back to the notebook
            reply = ("error", _failure(err))
        printed = _capture_end(state)
        try:
            conn.send((*reply, printed))
        except Exception as err:  # the value did not pickle
            conn.send(("error", _failure(TypeError(f"the worker's answer could not be sent back: {err}")), printed))


_STANDS_IN = False  # this process is a process of its own already (see stand_in_for_a_worker)


def stand_in_for_a_worker() -> None:
    """Mark this process as one that stands for a worker: a child made to run one call apart (a
    workshop check's), where a crash or a hang already costs that call and never its caller. Its
    launches then run in it, not in a further worker process of its own (a fresh Python that
    imports torch and TileLang: seconds, once per check)."""
    global _STANDS_IN
    _STANDS_IN = True


def in_worker() -> bool:
    """True inside a tilelab worker process, or a process that stands for one."""
    return _STANDS_IN or os.environ.get("TILELAB_IN_WORKER") == "1"


def _context() -> Any:
    try:
        import torch.multiprocessing as mp  # registers CUDA tensor sharing with the pickler

        return mp.get_context("spawn")
    except ImportError:  # pragma: no cover - torch is a dependency
        import multiprocessing as mp

        return mp.get_context("spawn")


# Held while ``__main__`` is hidden (below), so that two workers starting at once in two threads
# (a sweep's bench threads, one per GPU) restore it as it was. A process that another thread starts
# meanwhile (a sweep's compile process) does not import the caller's script either; those
# processes need nothing from it (their tasks come pickled by cloudpickle) and take no lock.
MAIN_HIDDEN = threading.Lock()


def _start_without_main(process: Any) -> None:
    """Start a spawned process without re-running the caller's main script in it.

    The spawn start method imports the parent's ``__main__`` (a script's file) in the child; a
    script that launches at top level, without an ``if __name__ == "__main__"`` guard, would then
    launch again in the worker. The worker needs nothing from ``__main__``, so it is hidden from
    multiprocessing while the process starts (under :data:`MAIN_HIDDEN`)."""
    main = sys.modules.get("__main__")
    if main is None:
        process.start()
        return
    missing = object()
    with MAIN_HIDDEN:
        saved = {k: main.__dict__.get(k, missing) for k in ("__file__", "__spec__")}
        try:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
            process.start()
        finally:
            for k, v in saved.items():
                if v is missing:
                    main.__dict__.pop(k, None)
                else:
                    main.__dict__[k] = v


class Worker:
    """One worker process on ``device`` (see the module doc). Thread-safe: calls are serialised."""

    def __init__(self, device: int = 0, *, start_timeout: float = START_TIMEOUT_S, prestart: bool = False) -> None:
        """``prestart``: after a hang, a crash or a lost CUDA context kills the worker, start its
        replacement at once in the background (and import torch and TileLang there), so that the
        next launch does not wait for a fresh process."""
        self.device = int(device)
        self.start_timeout = start_timeout
        self.prestart = prestart
        self._closed = False
        self._process: Any = None
        self._conn: Any = None
        self._lock = threading.RLock()
        self.starts = 0  # how many processes this worker has started (a restart counts)
        self.loaded: set[str] = set()  # keys of kernels loaded in the current process (see _isolated)
        self._capture_folder: str | None = None  # where the current process writes its stderr
        self._warmed = False  # the current process has imported what launches need (see warm)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        with self._lock:
            if self.alive:
                return
            self._discard()
            ctx = _context()
            parent, child = ctx.Pipe(duplex=True)
            self._capture_folder = tempfile.mkdtemp(prefix="tilelab-worker-")
            process = ctx.Process(target=_serve, args=(child, self.device, self._capture_folder), daemon=True,
                                  name=f"tilelab-worker-{self.device}")
            _start_without_main(process)
            child.close()
            self._process, self._conn = process, parent
            self.starts += 1
            self.loaded = set()
            self._warmed = False
            deadline = time.monotonic() + self.start_timeout
            while not parent.poll(0.1):
                if not process.is_alive():
                    self._discard()
                    raise WorkerDied(f"the tilelab worker process for device {self.device} exited while starting "
                                     f"(exit code {process.exitcode})")
                if time.monotonic() > deadline:
                    self._discard()
                    raise WorkerDied(f"the tilelab worker process for device {self.device} did not start within "
                                     f"{self.start_timeout:g} s")
            parent.recv()

    def warm(self, fn: Callable[[], Any] | None = None, timeout: float | None = None) -> None:
        """Start the process now, unless it runs already, and bring it to where a launch begins:
        ``fn`` runs there (default: import torch with its CUDA context on the device, and
        TileLang). Seconds on a fresh process, which a caller that will launch soon (a sweep, while
        it compiles) can spend ahead of its first launch; nothing when the current process is warm
        already. Raises as :meth:`call`."""
        with self._lock:
            if self._warmed and self.alive:
                return
            self.call(fn or _warm_up, timeout=self.start_timeout if timeout is None else timeout,
                      label=f"starting tilelab's worker process for device {self.device}")
            self._warmed = True

    def close(self) -> None:
        """Stop the worker (politely, then by force); a later call starts a fresh one."""
        self._closed = True
        with self._lock:
            if self._conn is not None and self.alive:
                try:
                    self._conn.send_bytes(pickle.dumps(None))
                    self._process.join(KILL_WAIT_S)
                except Exception:
                    pass
            self._discard()

    def kill(self) -> None:
        """Kill the worker now (a hung kernel cannot be stopped any other way)."""
        with self._lock:
            self._discard()

    def _last_stderr(self) -> str:
        """What the current (or just killed) process wrote to stderr during its last call."""
        if self._capture_folder is None:
            return ""
        try:
            with open(os.path.join(self._capture_folder, STDERR_FILE), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _discard(self) -> None:
        process, conn, folder = self._process, self._conn, self._capture_folder
        self._process = self._conn = self._capture_folder = None
        self.loaded = set()
        if process is not None and process.is_alive():
            try:
                os.kill(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.join(KILL_WAIT_S)
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        if folder is not None:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)

    # -- calls -----------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, label: str = "",
             **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` in the worker; see the module doc for what it raises."""
        with self._lock:
            self._closed = False
            self.start()
            from multiprocessing.reduction import ForkingPickler

            try:
                payload = bytes(ForkingPickler.dumps((fn, args, kwargs)))
            except Exception as err:
                raise TypeError(f"cannot send {getattr(fn, '__name__', fn)!r} and its arguments to the tilelab worker: "
                                f"{err}. Pass tensors, numbers and module-level functions, or launch in this "
                                "process with isolate=False.") from err
            # A stop (KeyboardInterrupt) may land while the call is still being written to the pipe,
            # even after the worker has read it and started (a busy machine schedules this thread back
            # late): the send is inside the block that answers a stop, so the running call is stopped
            # or killed either way, never left running behind a bare KeyboardInterrupt.
            try:
                try:
                    self._conn.send_bytes(payload)
                except OSError:
                    # The process died between calls (killed from outside) after start() saw it alive:
                    # nothing was sent, so a fresh worker takes the call.
                    self._discard()
                    self.start()
                    self._conn.send_bytes(payload)
                began = time.monotonic()
                while not self._conn.poll(0.05):
                    if timeout is not None and time.monotonic() - began > timeout:
                        self._kill_and_raise(WorkerTimeout(label, timeout))
                    if not self._process.is_alive():
                        code = self._process.exitcode
                        self._kill_and_raise(WorkerDied(f"{label or 'the call'}: the tilelab worker process died "
                                                        f"({_exit_text(code)}); the next launch starts a fresh one"))
                try:
                    status, value, printed = self._conn.recv()
                except (EOFError, OSError) as err:
                    code = None
                    if self._process is not None:
                        self._process.join(KILL_WAIT_S)  # the pipe closes a moment before the exit is reaped
                        code = self._process.exitcode
                    died = WorkerDied(f"{label or 'the call'}: the tilelab worker process died "
                                      f"({_exit_text(code)}); the next launch starts a fresh one")
                    self._kill_and_raise(died, err)
            except KeyboardInterrupt:
                raise self._interrupt(label) from None
            out, err_text = _forward(printed)
            if status == "ok":
                return value
            failure: _Failure = value
            if failure.sticky:
                self.kill()  # its CUDA context is lost: the next call gets a fresh process
                self._replace_soon()
            error = _recreate(failure)
            try:
                setattr(error, "worker_stdout", out)  # noqa: B010 (an attribute of our own on any exception)
                setattr(error, "worker_stderr", err_text)  # noqa: B010
            except Exception:
                pass
            raise error

    def _kill_and_raise(self, error: WorkerDied | WorkerTimeout, cause: BaseException | None = None) -> None:
        """Keep what the process wrote to stderr on ``error`` (and show it), discard it, raise."""
        error.stderr = self._last_stderr()
        if error.stderr:
            _forward(("", error.stderr))
        self.kill()
        self._replace_soon()
        raise error from cause

    def _replace_soon(self) -> None:
        if not self.prestart or self._closed:
            return

        def warm() -> None:
            try:
                if not self._closed:
                    self.call(_warm_up, timeout=self.start_timeout, label="starting a replacement worker")
            except BaseException:
                pass  # the next call starts one itself and reports what goes wrong

        threading.Thread(target=warm, name="tilelab-worker-prestart", daemon=True).start()

    def _interrupt(self, label: str) -> LaunchInterrupted:
        """Ask the running call to stop and take what it hands back; kill it if it cannot."""
        try:
            os.kill(self._process.pid, signal.SIGUSR1)
            if self._conn.poll(INTERRUPT_GRACE_S):
                status, value, printed = self._conn.recv()
                _forward(printed)
                return LaunchInterrupted(label, value if status == "ok" else None)
        except Exception:
            pass
        self.kill()
        self._replace_soon()
        return LaunchInterrupted(label)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Worker(device={self.device}, pid={self.pid}, alive={self.alive})"


def _warm_up() -> None:
    """In a fresh worker (a replacement, or :meth:`Worker.warm`): import what launches need (torch
    with its CUDA context, TileLang)."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("TILELAB_WORKER_DEVICE", "0")))
            torch.zeros(1, device="cuda")
    except Exception:
        pass
    try:
        import tilelang  # noqa: F401
    except Exception:
        pass


def _forward(printed: Any) -> tuple[str, str]:
    """Write what the worker printed to this process's stdout and stderr; (stdout, stderr)."""
    out, err = (printed, "") if isinstance(printed, str) else tuple(printed)
    if out:
        from ._device_faults import fold_assert_messages

        sys.stdout.write(fold_assert_messages(out) if "Device assert failed: " in out else out)
        sys.stdout.flush()
    if err:
        from ._device_faults import fold_assert_lines

        sys.stderr.write(fold_assert_lines(err))
        sys.stderr.flush()
    return out, err


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _recreate(failure: _Failure) -> BaseException:
    err = failure.exception
    if err is None:
        err = WorkerError(f"{failure.type_name}: {failure.message}")
    try:
        err.worker_traceback = failure.traceback
    except Exception:
        pass
    return err


_DEFAULT: dict[int, Worker] = {}
_DEFAULT_LOCK = threading.Lock()


def default_worker(device: int | None = None) -> Worker:
    """This process's warm worker for ``device`` (default: torch's current device), created on
    first use and closed when Python exits."""
    if device is None:
        try:
            import torch

            device = torch.cuda.current_device() if torch.cuda.is_available() else 0
        except ImportError:  # pragma: no cover
            device = 0
    with _DEFAULT_LOCK:
        worker = _DEFAULT.get(int(device))
        if worker is None:
            worker = _DEFAULT[int(device)] = Worker(int(device), prestart=True)
        return worker


@atexit.register
def shutdown() -> None:
    """Close every default worker (also run when Python exits)."""
    with _DEFAULT_LOCK:
        workers = list(_DEFAULT.values())
        _DEFAULT.clear()
    for worker in workers:
        try:
            worker.close()
        except Exception:
            pass
