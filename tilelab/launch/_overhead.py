"""Host launch overhead of each execution backend, for the same kernel.

Host microseconds per call of the compiled kernel itself (``JITKernel.__call__`` with arguments
built beforehand, so none of tilelab's own Python is timed): ``time.perf_counter`` around a batch
of calls, divided by their number; one sample per batch, several batches for a spread. The GPU
is drained before each batch (outside the timed region), and a batch is short enough (100 calls
by default) that the launch queue never fills. The default kernel is a 4096-element vector add:
its GPU time is far below the host cost, so what is measured is the launcher.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..records.launch import LaunchOverhead
from . import _inputs
from ._kernel import device_name, prepare_kernel

RUNNABLE_BACKENDS = ("tvm_ffi", "cython", "nvrtc", "cutedsl")


def default_kernel(n: int = 4096):
    """A tiny TileLang kernel (C = A + B on ``n`` floats) for overhead measurements."""
    import tilelang.language as T

    @T.prim_func
    def vector_add(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):  # type: ignore[valid-type]
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


def time_calls(call: Any, args: Sequence[Any], batches: int, per_batch: int, sync: Any) -> list[float]:
    """Host microseconds per call: ``per_batch`` calls of ``call(*args)`` timed together, divided,
    once per batch; ``sync()`` drains the GPU between batches, outside the timed region."""
    clock = time.perf_counter
    samples = []
    for _ in range(batches):
        sync()
        t0 = clock()
        for _ in range(per_batch):
            call(*args)
        samples.append((clock() - t0) * 1e6 / per_batch)
    sync()
    return samples


def measure_overhead(kernel: Any, *args: Any, backends: Sequence[str], calls: int, batches: int, warmup: int,
                     out_idx: Any, **sizes: int) -> LaunchOverhead:
    """:func:`tilelab.launch.launch_overhead` here, in this process."""
    import torch

    source = kernel if kernel is not None else default_kernel()
    per_backend: list[tuple[str, tuple[float, ...]]] = []
    errors: list[tuple[str, str]] = []
    name = "vector_add" if kernel is None else ""
    per_batch = calls // batches
    for backend in backends:
        why = backend_available(backend)
        if why:
            errors.append((backend, why))
            continue
        try:
            prepared = prepare_kernel(source, backend=backend, out_idx=out_idx)
            name = name or prepared.name
            launch_args, _ = _inputs.build_inputs(prepared.params, args, sizes, device="cuda", seed=0)
            compiled = prepared.compiled
            for _ in range(warmup):
                compiled(*launch_args)
            torch.cuda.synchronize()
            samples = time_calls(compiled, launch_args, batches, per_batch, torch.cuda.synchronize)
            per_backend.append((backend, tuple(samples)))
        except Exception as err:  # one backend failing must not hide the others
            first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
            errors.append((backend, f"{type(err).__name__}: {first}"))
    return LaunchOverhead(kernel=name or "kernel", per_backend_us=tuple(per_backend), errors=tuple(errors),
                          device=device_name(),
                          method=f"host us per call of the compiled kernel (perf_counter over {batches} batches of "
                                 f"{per_batch} calls, after {warmup} warm-up), outputs allocated by the launcher")


def summary(result: LaunchOverhead) -> dict[str, float]:
    return {b: statistics.median(s) for b, s in result.per_backend_us}
