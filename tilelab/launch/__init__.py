"""Launch, verify and time TileLang kernels on the notebook's GPU, or on the CPU (target ``c``).

``run`` (verify against a reference), ``bench`` (CUDA-event timing in named modes),
``sanitize`` (one launch under compute-sanitizer), ``measure_ceilings`` (copy bandwidth and matmul rate, cached), ``launch_overhead`` (host cost of
each execution backend), and ``sweep`` (configurations x sizes);
their figures are drawn by :mod:`tilelab.render.plots` when a result is shown.
Importing this package touches neither CUDA nor TileLang; calling ``run``/``bench`` without a
GPU raises :class:`tilelab._errors.NoGpuError`, whose message says inspection still works;
``target="c"`` (or a kernel compiled for it) runs on the CPU instead (``_cpu.py``).
"""

from __future__ import annotations

from ._bench import BenchOptions, bench, count_work, gemm_flops
from ._ceilings import measure_ceilings
from ._inputs import UNIT_ROUNDOFF, tolerance_for
from ._overhead import launch_overhead
from ._sanitize import Finding, SanitizerMissing, SanitizerReport, sanitize
from ._run import KernelLaunchError, MisalignedTensorError, classify_cuda_error, prepare_kernel, run
from ._sweep import SweepOptions, sweep
from ._worker import Worker, WorkerDied, WorkerError, WorkerTimeout, default_worker
from .models import BenchResult, Ceilings, LaunchOverhead, RunResult, SweepRow, SweepTable, TileMap


def shutdown_compile_pools() -> None:
    """Stop the compile processes that ``sweep(..., devices=...)`` keeps for the next sweep (each
    holds TileLang and torch in memory); the next such sweep starts new ones."""
    from ._distribute import shutdown_compile_pools as stop

    stop()


__all__ = [
    "BenchOptions",
    "BenchResult",
    "Ceilings",
    "Finding",
    "KernelLaunchError",
    "LaunchOverhead",
    "MisalignedTensorError",
    "RunResult",
    "SanitizerMissing",
    "SanitizerReport",
    "SweepOptions",
    "SweepRow",
    "SweepTable",
    "TileMap",
    "Worker",
    "WorkerDied",
    "WorkerError",
    "WorkerTimeout",
    "UNIT_ROUNDOFF",
    "bench",
    "classify_cuda_error",
    "shutdown_compile_pools",
    "count_work",
    "default_worker",
    "gemm_flops",
    "launch_overhead",
    "measure_ceilings",
    "prepare_kernel",
    "run",
    "sanitize",
    "sweep",
    "tolerance_for",
]
