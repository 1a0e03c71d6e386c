"""Launch, verify and time TileLang kernels on the notebook's GPU, or on the CPU (target ``c``).

``run`` (verify against a reference), ``bench`` (CUDA-event timing in named modes),
``sanitize`` (one launch under compute-sanitizer), ``measure_ceilings`` (copy bandwidth and matmul
rate, cached), ``launch_overhead`` (host cost of each execution backend), and ``sweep``
(configurations x sizes);
their figures are drawn by :mod:`tilelab.render.plots` when a result is shown.
Importing this package touches neither CUDA nor TileLang; calling ``run``/``bench`` without a
GPU raises :class:`tilelab.records.errors.NoGpuError`, whose message says inspection still works;
``target="c"`` (or a kernel compiled for it) runs on the CPU instead (``_cpu.py``). ``_api.py`` is
the one module that chooses where a launch happens (the CPU, the worker process, or here).
"""

from __future__ import annotations

from ..records.launch import (
    BenchResult,
    Ceilings,
    InputState,
    LaunchOverhead,
    OutputCheck,
    RunResult,
    SweepRow,
    SweepTable,
    Telemetry,
    TileMap,
    WorstElement,
)
from ._api import bench, launch_overhead, measure_ceilings, run
from ._cuda_errors import KernelLaunchError, classify_cuda_error
from ._emulate import EMULATED_NOTE, EmulationError
from ._inputs import UNIT_ROUNDOFF, tolerance_for
from ._kernel import MisalignedTensorError, count_work, gemm_flops, prepare_kernel
from ._options import BenchOptions, RunOptions
from ._sanitize import Finding, SanitizerMissing, SanitizerReport, sanitize
from ._worker import Worker, WorkerDied, WorkerError, WorkerTimeout, default_worker
from .sweep import SweepOptions, shutdown_compile_pools, sweep


def __getattr__(name: str) -> object:
    """``EMULATION_RULES``: the rules by which a GPU kernel's IR is rewritten for the CPU
    (``run(kernel, device="cpu")``), each with what it does and why the meaning holds; they live
    with the rewrite in the adapter, loaded when first asked for."""
    if name == "EMULATION_RULES":
        from .. import _tilelang

        return _tilelang.EMULATION_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BenchOptions",
    "BenchResult",
    "Ceilings",
    "EMULATED_NOTE",
    "EMULATION_RULES",
    "EmulationError",
    "Finding",
    "KernelLaunchError",
    "LaunchOverhead",
    "MisalignedTensorError",
    "RunOptions",
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
    # the launch records (tilelab.records.launch), importable where they are used
    "InputState",
    "OutputCheck",
    "Telemetry",
    "WorstElement",
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
