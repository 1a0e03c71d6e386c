"""Locating a hang: after a launch times out, launch the kernel once more, watched, and read where
each warp is while it hangs.

The watched kernel is compiled in the worker process with the hang watch's rewrite
(:mod:`tilelab.instrument.rewrite.watch`, through the same CUDA post-processing hook and extra ``uint64``
parameter as the timeline: ``tilelab._tilelang.compile_instrumented``). Its slot buffer is a file
in shared memory (``/dev/shm`` where there is one) that the worker maps, pins and maps into the
GPU's address space (``cuMemHostRegister`` with ``DEVICEMAP``), so the kernel's stores land in
host memory that this process maps too, and that keeps what the kernel wrote after the worker is
killed. The worker launches, then watches the slots until they stop changing (or the kernel
ends) and answers; this process kills the worker (its kernel never ends), reads the file and
decodes it (:mod:`tilelab.instrument.decode.hang`). Nothing here ever replaces the user's timeout error: a watch
that fails leaves the error as it was, with one line saying why the hang was not located.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import pickle
import shutil
import tempfile
import time
from typing import Any

from ..records.errors import TilelabError
from . import _worker

WATCH_S = 10.0  # the longest a watched launch is watched
QUIET_S = 1.0  # the slots unchanged this long: the kernel is stuck
POLL_S = 0.02
PREPARE_TIMEOUT_S = 900.0  # compiling the watched kernel (TileLang lowering + nvcc) in a fresh worker
ANSWER_MARGIN_S = 30.0  # beyond the watch, before this process stops waiting for the worker's answer


class WatchError(TilelabError, RuntimeError):
    """The watched relaunch could not be made (no driver, no shared memory, a rewrite it refused)."""


# ------------------------------------------------------------------------------------------
# Host memory the GPU writes and another process reads (the CUDA driver API, through ctypes)
# ------------------------------------------------------------------------------------------

CU_MEMHOSTREGISTER_PORTABLE = 0x01
CU_MEMHOSTREGISTER_DEVICEMAP = 0x02


def _driver() -> Any:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise WatchError(f"the CUDA driver library (libcuda.so.1) cannot be loaded: {err}") from err


def _check(lib: Any, code: int, what: str) -> None:
    if code == 0:
        return
    text = ctypes.c_char_p()
    try:
        lib.cuGetErrorString(int(code), ctypes.byref(text))
    except Exception:
        pass
    name = text.value.decode(errors="replace") if text.value else "unknown error"
    raise WatchError(f"{what} failed: CUDA driver error {code} ({name})")


class MappedSlots:
    """A file of ``nbytes`` mapped here (shared) and registered with CUDA as mapped host memory.

    ``device_pointer`` is the address kernels write through. :meth:`close` unregisters and unmaps;
    it must not be called while a kernel still writes (a hung kernel's process is killed instead).
    """

    def __init__(self, path: str, nbytes: int) -> None:
        self.path = path
        self.registered = False
        self._lib = _driver()
        page = mmap.PAGESIZE
        self.nbytes = max(page, (int(nbytes) + page - 1) // page * page)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, self.nbytes)
            self.map = mmap.mmap(fd, self.nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._view = (ctypes.c_char * self.nbytes).from_buffer(self.map)
        self.host_pointer = ctypes.addressof(self._view)
        try:
            self._register()
        except BaseException:
            self.close()
            raise

    def _register(self) -> None:
        self._lib.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self._lib.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p,
                                                           ctypes.c_uint]
        self._lib.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
        self._lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        context = ctypes.c_void_p()
        _check(self._lib, self._lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        if not context.value:
            raise WatchError("no CUDA context is current in the worker (torch has not initialised the device)")
        _check(self._lib, self._lib.cuMemHostRegister_v2(
            ctypes.c_void_p(self.host_pointer), ctypes.c_size_t(self.nbytes),
            ctypes.c_uint(CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE)),
            f"cuMemHostRegister of {self.nbytes} bytes of {self.path}")
        self.registered = True
        pointer = ctypes.c_uint64()
        _check(self._lib, self._lib.cuMemHostGetDevicePointer_v2(ctypes.byref(pointer),
                                                                 ctypes.c_void_p(self.host_pointer), 0),
               "cuMemHostGetDevicePointer")
        self.device_pointer = int(pointer.value)

    def snapshot(self) -> bytes:
        return bytes(self.map)

    def close(self) -> None:
        try:
            if self.registered:
                self.registered = False
                _check(self._lib, self._lib.cuMemHostUnregister(ctypes.c_void_p(self.host_pointer)),
                       "cuMemHostUnregister")
        finally:
            del self._view
            self.map.close()


class _DeviceArray:
    """What ``torch.as_tensor`` reads a device pointer from (the CUDA array interface)."""

    def __init__(self, pointer: int, words: int) -> None:
        self.__cuda_array_interface__ = {"shape": (int(words),), "typestr": "<u8", "data": (int(pointer), False),
                                         "version": 2, "strides": None}


def slot_tensor(torch: Any, slots: MappedSlots, words: int) -> Any:
    """A uint64 CUDA tensor over the mapped slots (what the kernel's extra parameter receives)."""
    tensor = torch.as_tensor(_DeviceArray(slots.device_pointer, words), device="cuda")
    if tensor.data_ptr() != slots.device_pointer or tensor.dtype != torch.uint64:
        raise WatchError(f"torch made a {tensor.dtype} tensor at {tensor.data_ptr():#x} of the mapped slots at "
                         f"{slots.device_pointer:#x}")
    return tensor


def shared_memory_dir() -> str:
    """Where the slot file lives: /dev/shm (RAM) where it is a writable directory, else the temp dir."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


# ------------------------------------------------------------------------------------------
# In the worker
# ------------------------------------------------------------------------------------------

_WATCHED: dict[str, Any] = {}  # key -> (compiled watched kernel, Watched)


def _torch() -> Any:
    """torch, on the worker's device (as the worker's other launch paths set it)."""
    import torch

    device = int(os.environ.get("TILELAB_WORKER_DEVICE", "0"))
    if torch.cuda.is_available() and torch.cuda.current_device() != device:
        torch.cuda.set_device(device)
    return torch


def prepare_in_worker(payload: bytes, options: dict[str, Any]) -> dict[str, Any]:
    """Compile the watched kernel and write its tables beside the slot file (``options["path"]``
    + ".json"), so that this process can be killed once it launched and the tables still read."""
    import tilelang  # noqa: F401  (registers the operators the prim_func refers to)

    from .. import _tilelang
    from ..instrument.rewrite.watch import watch

    _torch()
    func, out_idx, target, backend, pass_configs, _flags, _outputs = pickle.loads(payload)
    # the watched kernel has one more parameter, last: an output counted from the end moves
    out_idx = [int(i) if int(i) >= 0 else int(i) + len(func.params) for i in (out_idx or [])] or None
    ops = _tilelang.timeline_ops(func)
    cell_file = _tilelang.kernel_file(func)
    made: list[Any] = []

    def rewrite(code: str) -> str:
        w = watch(code, ops=ops, cell_file=cell_file, blocks=int(options["blocks"]),
                  block_threads=options.get("block_threads"))
        made.append(w)
        return w.source

    compiled = _tilelang.compile_instrumented(func, rewrite, target=target, backend=backend, out_idx=out_idx,
                                             pass_configs=pass_configs)
    if not made:
        raise WatchError("TileLang did not pass the device source through its CUDA post-processing hook")
    watched = made[-1]
    meta = options["path"] + ".json"
    with open(meta + ".tmp", "w") as f:
        json.dump(watched.to_dict(), f)
    os.replace(meta + ".tmp", meta)
    key = options["path"]
    _WATCHED[key] = (compiled, watched)
    return {"key": key, "words": watched.words(), "sites": len(watched.sites)}


def launch_in_worker(key: str, args: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    """Launch the watched kernel and watch its slots; answers when the kernel finished, when the
    slots have not changed for ``quiet_s`` (some warp wrote), or after ``watch_s``. A kernel still
    running is left running: the caller kills this process."""
    torch = _torch()
    compiled, watched = _WATCHED.pop(key)
    torch.zeros(1, device="cuda")  # the device's primary context, current on this thread (the driver calls need it)
    torch.cuda.synchronize()
    slots = MappedSlots(options["path"], watched.words() * 8)
    buf = slot_tensor(torch, slots, watched.words())
    quiet_s, watch_s = float(options.get("quiet_s", QUIET_S)), float(options.get("watch_s", WATCH_S))
    done = torch.cuda.Event()
    began = time.monotonic()
    compiled(*args, buf)
    done.record()
    last = slots.snapshot()
    changed = time.monotonic()
    written = any(last)
    finished = False
    while True:
        time.sleep(POLL_S)
        now = time.monotonic()
        if done.query():
            finished = True
            break
        snap = slots.snapshot()
        if snap != last:
            last, changed, written = snap, now, True
        if written and now - changed >= quiet_s:
            break
        if now - began >= watch_s:
            break
    elapsed = time.monotonic() - began
    if finished:
        torch.cuda.synchronize()
        del buf
        try:
            slots.close()
        except Exception:
            pass  # the answer matters more than releasing a page of pinned memory in this worker
    return {"finished": finished, "elapsed_s": elapsed, "quiet_s": time.monotonic() - changed,
            "progressing": not finished and time.monotonic() - changed < quiet_s}


# ------------------------------------------------------------------------------------------
# In the notebook
# ------------------------------------------------------------------------------------------


def locate_hang(worker: _worker.Worker, prepared: Any, args: list[Any], bound: dict[str, int] | None,
                payload: bytes, *, watch_s: float = WATCH_S, quiet_s: float = QUIET_S) -> Any:
    """Launch ``prepared`` once more, watched, in ``worker`` and return the
    :class:`~tilelab.instrument.decode.hang.HangReport` of where its warps were; raises when it cannot."""
    from .. import _tilelang
    from ..instrument.decode.hang import analyse, decode
    from ..instrument.rewrite.watch import Watched
    from . import _inputs

    started = time.monotonic()
    dims = _tilelang.launch_dims(prepared.compiled)
    if dims is None:
        raise WatchError("tilelab cannot read the kernel's grid from its T.Kernel")
    grid = [_inputs.eval_dim(d, bound or {}) for d in dims[0]]
    block = [_inputs.eval_dim(d, bound or {}) for d in dims[1]]
    if not all(isinstance(v, int) and v > 0 for v in grid + block):
        raise WatchError(f"the launch's grid {dims[0]} and block {dims[1]} do not evaluate with {bound}")
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    directory = tempfile.mkdtemp(prefix="tilelab-hang-", dir=shared_memory_dir())
    path = os.path.join(directory, "slots")
    label = f"watching {prepared.name}"
    try:
        worker.call(prepare_in_worker, payload, {"path": path, "blocks": blocks, "block_threads": threads},
                    timeout=PREPARE_TIMEOUT_S, label=label)
        try:
            outcome = worker.call(launch_in_worker, path, list(args),
                                  {"path": path, "watch_s": watch_s, "quiet_s": quiet_s},
                                  timeout=watch_s + ANSWER_MARGIN_S, label=label)
        except _worker.WorkerTimeout:
            outcome = {"finished": False, "elapsed_s": watch_s + ANSWER_MARGIN_S, "quiet_s": None,
                       "progressing": False}
        if not outcome.get("finished"):
            worker.kill()  # its kernel never ends; the next launch gets a fresh worker
            worker._replace_soon()
        with open(path + ".json") as f:
            watched = Watched.from_dict(json.load(f))
        words = _read_words(path, watched.words())
        states = decode(words, watched)
        result = "finished" if outcome.get("finished") else ("progressing" if outcome.get("progressing") else "hung")
        return analyse(states, watched, grid_blocks=blocks, outcome=result,
                       seconds=time.monotonic() - started, quiet_s=outcome.get("quiet_s"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _read_words(path: str, words: int) -> list[int]:
    import struct

    with open(path, "rb") as f:
        data = f.read(words * 8)
    if len(data) < words * 8:
        raise WatchError(f"the slot file holds {len(data)} bytes; {words * 8} were expected")
    return list(struct.unpack(f"<{words}Q", data))


def attach(error: Any, locate: Any) -> None:
    """Locate the hang behind ``error`` (a timeout :class:`KernelLaunchError`) with ``locate()`` and
    attach the report as ``error.hang``; when locating fails, say why in ``error.hang_note`` and
    leave the error as it was."""
    started = time.monotonic()
    try:
        report = locate()
    except BaseException as err:  # the user's error comes first, whatever the watch did
        if isinstance(err, KeyboardInterrupt):
            error.hang_note = "locating the hang was interrupted"
            return
        first = str(err).strip().split("\n")[0][:300]
        error.hang_note = (f"tilelab could not locate the hang with a watched relaunch "
                           f"({time.monotonic() - started:.1f} s): {type(err).__name__}: {first}")
        return
    error.hang = report
    if report.outcome == "hung" and report.findings and report.waiting():
        error.cause = None  # the findings say why these barrier waits never complete


__all__ = ["MappedSlots", "WatchError", "attach", "launch_in_worker", "locate_hang", "prepare_in_worker",
           "shared_memory_dir", "slot_tensor"]
