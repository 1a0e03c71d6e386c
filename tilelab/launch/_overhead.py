"""Host launch overhead of each execution backend, for the same kernel.

Host microseconds per call, measured with ``time.perf_counter`` around each call (no
synchronisation inside the timed region; the GPU is drained every ``sync_every`` calls so the
launch queue never fills). The default kernel is a 4096-element vector add: its GPU time is far
below the host cost, so what is measured is the launcher.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from typing import Any, Sequence

from ._run import device_name, prepare_kernel, require_gpu
from . import _inputs
from ._run import call_kernel
from .models import LaunchOverhead

RUNNABLE_BACKENDS = ("tvm_ffi", "cython", "nvrtc", "cutedsl")


def default_kernel(n: int = 4096):
    """A tiny TileLang kernel (C = A + B on ``n`` floats) for overhead measurements."""
    import tilelang.language as T

    @T.prim_func
    def vector_add(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

    return vector_add


def backend_available(backend: str) -> str | None:
    """None when the backend can run here, else why not."""
    if backend == "cutedsl" and importlib.util.find_spec("cutlass") is None:
        return "nvidia-cutlass-dsl is not installed"
    if backend == "nvrtc" and importlib.util.find_spec("cuda") is None:
        return "cuda-python (cuda.bindings) is not installed"
    return None


def launch_overhead(kernel: Any = None, *args: Any, backends: Sequence[str] = RUNNABLE_BACKENDS,
                    calls: int = 2000, warmup: int = 200, sync_every: int = 100, out_idx: Any = -1,
                    **sizes: int) -> LaunchOverhead:
    """Host microseconds per call of ``kernel`` through each backend (compiled with ``out_idx``,
    so the figure includes output allocation, as a notebook user's call would)."""
    torch = require_gpu()
    source = kernel if kernel is not None else default_kernel()
    per_backend: list[tuple[str, tuple[float, ...]]] = []
    errors: list[tuple[str, str]] = []
    name = "vector_add" if kernel is None else ""
    for backend in backends:
        why = backend_available(backend)
        if why:
            errors.append((backend, why))
            continue
        try:
            prepared = prepare_kernel(source, backend=backend, out_idx=out_idx)
            name = name or prepared.name
            launch_args, _ = _inputs.build_inputs(prepared.params, args, sizes, device="cuda", seed=0)
            for _ in range(warmup):
                call_kernel(prepared, launch_args)
            torch.cuda.synchronize()
            samples = []
            clock = time.perf_counter
            for i in range(calls):
                t0 = clock()
                call_kernel(prepared, launch_args)
                samples.append((clock() - t0) * 1e6)
                if (i + 1) % sync_every == 0:
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
            per_backend.append((backend, tuple(samples)))
        except Exception as err:  # one backend failing must not hide the others
            errors.append((backend, f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"))
    return LaunchOverhead(kernel=name or "kernel", per_backend_us=tuple(per_backend), errors=tuple(errors),
                          device=device_name(),
                          method=f"host us per call (perf_counter), {calls} calls after {warmup} warm-up, "
                                 "outputs allocated by the launcher")


def summary(result: LaunchOverhead) -> dict[str, float]:
    return {b: statistics.median(s) for b, s in result.per_backend_us}
