"""A sweep in this process, on its current device (or the CPU): the compiles in a pool of threads
with a progress bar, then the row step of each configuration one at a time, then the baselines.
It stops cleanly on an interrupt or a lost CUDA context, marking what remains "not run"."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from ..models import BenchResult, SweepRow, SweepTable
from . import _show
from ._plan import Config, Job, SweepOptions, describe, make_jobs, mark_best, short_error, size_key
from ._tasks import BenchPlan, default_compile, row_step

INTERRUPTED = "not run: the sweep was interrupted"


def inline_sweep(factory: Callable[..., Any], configs: list[Config], size_list: list[Config],
                 opts: SweepOptions) -> SweepTable:
    """``tilelab.sweep`` without ``devices=`` or ``client=``."""
    jobs = make_jobs(configs, size_list)
    compiled = _compile_all(factory, jobs, opts)
    run = _InlineRun(opts, compiled, n_baseline_rows=len(opts.baseline or {}) * len(size_list))
    for job in jobs:
        run.kernel_row(job)
    for label, make in (opts.baseline or {}).items():
        for size in size_list:
            run.baseline_row(label, make, size)
    run.bar.close()
    return _table(factory, run, opts)


@dataclass
class _Compiled:
    kernels: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, tuple[str, str]] = field(default_factory=dict)  # job -> (stage, error)
    seconds: dict[int, float] = field(default_factory=dict)


def _compile_all(factory: Callable[..., Any], jobs: list[Job], opts: SweepOptions) -> _Compiled:
    """Elaborate every job here, then compile them in a pool of threads, timing each compile."""
    compile_fn = opts.compile_fn or (lambda f, s, c: default_compile(f, s, c, backend=opts.backend,
                                                                      out_idx=opts.out_idx, target=opts.target))
    out = _Compiled()
    steps: dict[int, Callable[[], Any]] = {}
    for job in jobs:
        try:
            steps[job.index] = compile_fn(factory, dict(job.size), dict(job.config))
        except Exception as err:
            out.failures[job.index] = ("elaborate", short_error(err))
    bar = _show.Progress(len(steps), f"compiling {len(steps)} configurations", opts.progress)

    def timed(step: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        return step(), time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=opts.workers or os.cpu_count() or 1) as pool:
        futures = {pool.submit(timed, step): i for i, step in steps.items()}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                out.kernels[i], out.seconds[i] = fut.result()
            except Exception as err:
                out.failures[i] = ("compile", short_error(err))
            bar.update()
    bar.close()
    return out


class _InlineRun:
    """The benchmark phase: one row per job, then the baselines; stops cleanly on an interrupt or
    a lost CUDA context, marking what remains "not run"."""

    def __init__(self, opts: SweepOptions, compiled: _Compiled, n_baseline_rows: int) -> None:
        self.opts, self.compiled = opts, compiled
        self.bench_kwargs = opts.bench_options()
        self.plan = BenchPlan(opts.bench_fn, opts.check_fn, opts.ref, self.bench_kwargs, opts.flops, opts.bytes,
                              opts.ratio_baseline[1] if opts.ratio_baseline else None)
        self.rows: list[SweepRow] = []
        self.notes: list[str] = []
        self.work: dict[tuple, tuple[float | None, float | None]] = {}  # size -> the kernels' (flops, bytes)
        self.lost: str | None = None  # set when a sticky CUDA error made the context unusable
        self.interrupted: str | None = None
        runnable = len(compiled.kernels)
        self.bar = _show.Progress(runnable + n_baseline_rows, f"benchmarking {runnable + n_baseline_rows} rows",
                            opts.progress)

    def kernel_row(self, job: Job) -> None:
        compile_s = self.compiled.seconds.get(job.index)
        if job.index in self.compiled.failures:
            stage, error = self.compiled.failures[job.index]
            self.rows.append(SweepRow(job.config, job.size, error=error, stage=stage))
            return
        if self.interrupted is not None:
            self.rows.append(SweepRow(job.config, job.size, error=self.interrupted, stage="not run",
                                      compile_s=compile_s))
            return
        self.rows.append(self._measure(job, compile_s))
        self.bar.update()

    def _measure(self, job: Job, compile_s: float | None) -> SweepRow:
        if self.lost is not None:
            return SweepRow(job.config, job.size, error=self.lost, stage="not run", compile_s=compile_s)
        try:
            outcome = row_step(self.plan, job, self.compiled.kernels[job.index])
        except KeyboardInterrupt as err:
            return self._interrupted_row(err, job, compile_s)
        if outcome.lost is not None:
            self.lost = outcome.lost
            self.notes.append(outcome.lost)
        if outcome.result is None or outcome.error is not None:
            return SweepRow(job.config, job.size, error=outcome.error or "no result", stage=outcome.stage or "bench",
                            compile_s=compile_s)
        self.work.setdefault(job.size, (outcome.result.flops, outcome.result.bytes))
        return SweepRow.measured(job.config, job.size, outcome.result, compile_s=compile_s)

    def _interrupted_row(self, err: KeyboardInterrupt, job: Job, compile_s: float | None) -> SweepRow:
        self.interrupted = INTERRUPTED
        partial = getattr(err, "partial", None)
        if isinstance(partial, BenchResult) and partial.samples_ms:
            self.notes.append(f"interrupted while timing {describe(job)}: its row has the "
                              f"{len(partial.samples_ms)} launches measured before the stop")
            return SweepRow.measured(job.config, job.size, partial, compile_s=compile_s)
        self.notes.append(f"interrupted at {describe(job)}: the rows before it were measured")
        return SweepRow(job.config, job.size, error=self.interrupted, stage="not run", compile_s=compile_s)

    def baseline_row(self, label: str, make: Callable[..., Callable[[], Any]], size: Config) -> None:
        key_s = size_key(size)
        if self.lost is not None or self.interrupted is not None:
            self.rows.append(SweepRow((), key_s, error=self.lost or self.interrupted, stage="not run", label=label))
            self.bar.update()
            return
        job = Job(-1, key_s, (("make", make), ("work", self._baseline_work(size, key_s))), label=label)
        try:
            outcome = row_step(self.plan, job)
        except KeyboardInterrupt:
            self.interrupted = INTERRUPTED
            self.notes.append(f"interrupted at baseline {label}: the rows before it were measured")
            self.rows.append(SweepRow((), key_s, error=self.interrupted, stage="not run", label=label))
            self.bar.update()
            return
        if outcome.result is not None and outcome.error is None:
            self.rows.append(SweepRow.measured((), key_s, outcome.result, label=label))
        else:
            self.rows.append(SweepRow((), key_s, error=outcome.error or "no result", stage="bench", label=label))
            if outcome.lost is not None:
                self.lost = outcome.lost
                self.notes.append(self.lost)
        self.bar.update()

    def _baseline_work(self, size: Config, key_s: tuple) -> dict[str, Any]:
        """A baseline's work: the kernels' operation count at this size, so rates compare."""
        extra: dict[str, Any] = {}
        counted_flops, counted_bytes = self.work.get(key_s, (None, None))
        if self.opts.flops is not None:
            extra["flops"] = self.opts.flops(**size)
        elif counted_flops is not None:
            extra["flops"] = counted_flops
        if self.opts.bytes is not None:
            extra["bytes"] = self.opts.bytes(**size)
        elif counted_bytes is not None:
            extra["bytes"] = counted_bytes
        return extra


def _table(factory: Callable[..., Any], run: _InlineRun, opts: SweepOptions) -> SweepTable:
    mode = str(run.bench_kwargs.get("mode", opts.mode))
    notes = list(run.notes)
    if opts.baseline and mode == "graph":
        notes.append("graph mode: the kernels' inputs rotate among copies, but a baseline callable is replayed "
                     "as captured, without rotating its inputs or flushing L2, so it may read cached data")
    device = ""
    try:
        from .._cpu import cpu_name, wants_cpu
        from .._kernel import device_name

        device = cpu_name() if wants_cpu(None, opts.target) else device_name()
    except Exception:
        pass
    return SweepTable(kernel=opts.name or str(getattr(factory, "__name__", "kernel")), rows=tuple(mark_best(run.rows)),
                      mode=mode, device=device, notes=tuple(notes), factory=getattr(factory, "__name__", ""),
                      ratio_baseline=opts.ratio_baseline[0] if opts.ratio_baseline else None)
