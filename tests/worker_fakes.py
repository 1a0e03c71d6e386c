"""Fake launchers for the worker-protocol tests: module-level functions a spawned worker can
import (tests/ is on the worker's sys.path, which it inherits from the test process)."""

from __future__ import annotations

import ctypes
import os
import sys
import time

from tilelab.launch import KernelLaunchError


def add(a, b):
    return a + b


def _say_started(path):
    if path is not None:
        with open(path, "w") as f:
            f.write(str(os.getpid()))


def pid():
    return os.getpid()


def hang(seconds=3600.0, started=None):
    """Stands in for a kernel that never finishes: the worker's main thread is stuck. ``started``:
    a file it creates once it runs (the test interrupts it only then)."""
    _say_started(started)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "finished"


def prints(n):
    """What a kernel's printf looks like from the worker: C stdio on fd 1 (buffered), and Python prints."""
    libc = ctypes.CDLL(None)
    for i in range(n):
        libc.printf(b"device line %d\n", ctypes.c_int(i))
    print("python line", flush=False)
    os.write(1, b"raw fd line\n")
    return n


def fail_value():
    raise ValueError("bad size M=7: not a multiple of 64")


def fail_sticky():
    raise KernelLaunchError("oob_store", "illegal_address", "RuntimeError: CUDA error: an illegal memory access "
                            "was encountered", "a thread wrote outside its buffers", sticky=True)


class _Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


def fail_unpicklable():
    raise _Unpicklable(1, 2)


def crash(code=3):
    sys.stdout.flush()
    os._exit(code)


def returns_lambda():
    return lambda: 1


def write_into(tensor, value):
    """Writes into a tensor the notebook passed (shared memory for CPU tensors)."""
    tensor.fill_(value)
    return float(tensor.sum())


def measure_until_stopped(limit_s=60.0, started=None):
    """Stands in for a long bench: samples until the notebook asks it to stop, then returns them.
    ``started``: a file it creates once it has its first sample."""
    from tilelab.launch._worker import stop_requested

    samples = [1.0]
    _say_started(started)
    end = time.monotonic() + limit_s
    while time.monotonic() < end and not stop_requested():
        samples.append(1.0)
        time.sleep(0.01)
    return samples


def fail_device_assert(threads=5):
    """What a kernel's failed assert looks like from the worker: CUDA's lines on fd 2, then the error."""
    for t in range(threads):
        os.write(2, (f"/opt/tilelang/src/tl_templates/cuda/debug.h:126: void device_assert_with_msg(bool, const "
                     f"char *): block: [2,0,0], thread: [{t},0,0] Assertion `0` failed.\n").encode())
    raise KernelLaunchError("checked", "device_assert", "RuntimeError: CUDA error: device-side assert triggered",
                            sticky=True)


def crash_with_last_words(code=6):
    os.write(2, b"terminate called after throwing an instance of 'std::runtime_error'\n")
    os._exit(code)


def imported(name):
    """Whether the worker has imported module ``name``."""
    return name in sys.modules
