"""A sweep over every GPU of this host (``devices=``) or a Dask cluster (``client=``).

A sweep is two kinds of task per configuration. A *compile task* (TileLang lowering + nvcc: CPU
work) turns the configuration's kernel into a :class:`KernelArtifact`: the ``T.prim_func``, its
compile options and TileLang's disk cache entry. A *bench task* (on a GPU) installs that entry into
its machine's TileLang cache, so loading the kernel compiles nothing, then makes the row
(``_tasks.row_step``: check against ``ref``, time). Rows are merged into one :class:`SweepTable` as
they finish, each saying where it ran.

* ``devices="all"`` or ``[0, 1]``: compile tasks run in a pool of processes on this host (steps that
  cannot be pickled run in threads); bench tasks run one per GPU at a time, each GPU taking the next
  compiled configuration. The GPUs must be one model: timings of different models are not merged.
* ``client=dask.distributed.Client(...)``: the same tasks on a Dask cluster. Workers that declare
  the resource ``"GPU"`` (``LocalCUDACluster(resources={"GPU": 1})``, ``dask worker --resources
  GPU=1``) take the bench tasks; workers that declare ``"compile"`` take the compile tasks, so CPU-only
  hosts compile while GPU hosts benchmark. Without those declarations every worker may take either.
  Workers that run several tasks at once must declare ``"GPU"``, so that a GPU times one
  configuration at a time. Each bench task launches through ``tilelab.run``/``tilelab.bench``, so a
  configuration that fails costs its own row, not the sweep; in a daemonic Dask worker (the
  default under a nanny), which may not start child processes, launches run in the worker itself
  and the table says so.

Two GPUs of one model differ by about 1% (their clocks under one power cap), which is as much as
close configurations differ: a sweep over several devices ranks configurations partly by the board
they landed on. So after it, the ``finalists`` fastest configurations at each size are compiled
again (TileLang's disk cache answers) and timed again, one after another, on one device (the first
of ``devices``, where the baselines run too, or the first GPU worker of the cluster): the lowest of
those final figures is the best. A size whose leaders all ran on one device already is left as it
is. Interrupting the final round keeps the sweep's rows: sizes whose final round did not complete
keep the sweep's ranking.

Every finished row is written to a row cache (``$TILELAB_CACHE_DIR/sweeps``) under a key of the
factory's source, the size, the configuration, the bench options and the GPU model: a sweep that
was interrupted (the stop button, Ctrl-C) returns the rows it has, and the same call again takes
those from the cache (marked "cached") and runs only the rest. ``force=True`` measures everything
again. Rows that failed in the bench step are not cached (a timeout may not recur); compile and
check failures are.
"""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..models import SweepRow, SweepTable
from . import _show
from ._final import FinalRound, next_event
from ._plan import Config, Job, SweepOptions, distributed_bench_kwargs, mark_best, short_error
from ._rowcache import CACHED_FAILURES, RowCache, row_key, sweep_identity
from ._runners import choose_runner
from ._tasks import Benched, BenchPlan, default_compile_step

INTERRUPTED = "not run: the sweep was interrupted; the same call again resumes it (finished rows are cached)"


def distributed_sweep(factory: Callable[..., Any], configs: list[Config], size_list: list[Config],
                      opts: SweepOptions) -> SweepTable:
    """``tilelab.sweep`` with ``devices=`` or ``client=``; see the module doc."""
    if opts.devices is not None and opts.client is not None:
        raise ValueError("pass devices= (this host's GPUs) or client= (a Dask cluster), not both")
    kwargs = distributed_bench_kwargs(opts)
    events: queue.Queue = queue.Queue()
    # a custom bench step may need no GPU at all (the tests' fake)
    runner, model, arch, where = choose_runner(opts.devices, opts.client, events, workers=opts.workers,
                                         real_gpu=opts.bench_fn is None)
    make_step = opts.compile_fn or (lambda f, s, c: default_compile_step(f, s, c, backend=opts.backend,
                                                                          out_idx=opts.out_idx, target=arch))
    identity = sweep_identity(factory, opts, model=model, bench_kwargs=kwargs)
    jobs = [Job(i, tuple((k, int(v)) for k, v in s.items()), tuple(c.items()), row_key(identity, s, c))
            for i, (s, c) in enumerate((s, c) for s in size_list for c in configs)]
    n_base = len(opts.baseline or {}) * len(size_list)
    factory_name = getattr(factory, "__name__", "")
    run = _Run(jobs=jobs, plan=BenchPlan(opts.bench_fn, opts.check_fn, opts.ref, kwargs, opts.flops, opts.bytes,
                                              opts.ratio_baseline[1] if opts.ratio_baseline else None),
               runner=runner, events=events, cache=RowCache.default(), force=opts.force,
               bar=_show.Progress(len(jobs) + n_base, f"sweeping {len(jobs)} configurations on {where}", opts.progress),
               live=_show.LiveTable(opts.progress), title=opts.name or factory_name or "kernel",
               factory_name=factory_name, mode=str(kwargs["mode"]), model=model)
    try:
        _run_jobs(run, factory, make_step)
        _run_baselines(run, opts.baseline or {}, size_list)
        FinalRound(run, factory, make_step, opts.finalists, opts.progress).run()
    except KeyboardInterrupt:
        runner.close(cancel=True)
        done = sum(1 for j in jobs if j.index in run.rows)
        run.notes.append(f"interrupted after {done} of {len(jobs)} configurations: the same call again resumes "
                         "from the row cache")
        for j in jobs:
            run.rows.setdefault(j.index, SweepRow(j.config, j.size, error=INTERRUPTED, stage="not run",
                                                  compile_s=run.compile_s.get(j.index)))
    finally:
        runner.close()
        run.bar.close()
    ordered = [run.rows[j.index] for j in jobs] + [run.rows[i] for i in sorted(run.rows) if i >= len(jobs)]
    table = run.table(ordered)
    run.live.update(lambda: table, final=True)
    if opts.baseline and run.mode == "graph":
        run.notes.append("graph mode: a baseline callable is replayed as captured, without rotating its inputs or "
                         "flushing L2, so it may read cached data")
        table = dataclasses.replace(table, notes=tuple(run.notes))
    return table




@dataclass
class _Run:
    """One distributed sweep under way: where its tasks go, and the rows and notes come back so far."""

    jobs: list[Job]
    plan: BenchPlan
    runner: Any
    events: queue.Queue
    cache: RowCache
    force: bool
    bar: Any
    live: _show.LiveTable
    title: str  # the table's kernel name
    factory_name: str
    mode: str
    model: str
    rows: dict[int, SweepRow] = dataclasses.field(default_factory=dict)
    compile_s: dict[int, float | None] = dataclasses.field(default_factory=dict)
    counted: dict[tuple, tuple[float | None, float | None]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def table(self, rows: list[SweepRow]) -> SweepTable:
        return _table(rows, self.title, self.mode, self.model, self.notes, self.factory_name)

    def finish(self, job: Job, row: SweepRow, store: bool = True) -> None:
        """A row is final: cached (when worth measuring once), shown, counted."""
        if store and (row.ok or row.stage in CACHED_FAILURES):
            self.cache.put(job.key, row)  # first: a stop that lands between the two loses no measurement
        self.rows[job.index] = row
        self.bar.update()
        self.live.update(lambda: self.table([self.rows[i] for i in sorted(self.rows)]))




def _table(rows: list[SweepRow], kernel: str, mode: str, model: str, notes: list[str], factory: str) -> SweepTable:
    return SweepTable(kernel=kernel, rows=tuple(mark_best(rows)), mode=mode, device=model, notes=tuple(notes),
                      factory=factory)


def _row(job: Job, outcome: Benched, compile_s: float | None) -> SweepRow:
    if outcome.error is not None or outcome.result is None:
        return SweepRow(job.config, job.size, error=outcome.error or "no result", stage=outcome.stage or "bench",
                        compile_s=compile_s, bench_s=outcome.bench_s, device=outcome.device or None, label=job.label)
    r = outcome.result
    return SweepRow.measured(job.config, job.size, r, compile_s=compile_s, bench_s=outcome.bench_s,
                             device=outcome.device or None, label=job.label)


def _run_jobs(run: _Run, factory: Callable[..., Any], make_step: Callable[..., Any]) -> None:
    """Submit every configuration's compile task; each compiled one goes to a GPU as it arrives;
    rows are final when benched (or failed, or taken from the cache)."""
    by_index = {j.index: j for j in run.jobs}
    compile_futures: dict[int, Any] = {}
    pending = 0
    for job in run.jobs:
        hit = None if run.force else run.cache.get(job.key)
        if hit is not None:
            run.finish(job, dataclasses.replace(hit, cached=True), store=False)
            continue
        try:
            step = make_step(factory, dict(job.size), dict(job.config))
        except Exception as err:
            run.finish(job, SweepRow(job.config, job.size, error=short_error(err), stage="elaborate"))
            continue
        compile_futures[job.index] = run.runner.compile(job.index, step)
        pending += 1

    def handle(kind: str, index: int, value: Any, submit: bool = True) -> bool:
        """One event; True when it made a row final."""
        job = by_index[index]
        if kind == "compiled":
            run.compile_s[index] = value.compile_s
            if value.error is None:
                if submit:  # Dask: the bench task gets the compile task's future (worker to worker)
                    run.runner.bench(run.plan, job, compile_futures.get(index) if run.runner.passes_futures
                                     else value)
                return False
            run.finish(job, SweepRow(job.config, job.size, error=value.error, stage=value.stage or "compile",
                                     compile_s=value.compile_s))
            return True
        for said in (value.lost, value.note):
            if said and said not in run.notes:
                run.notes.append(said)
        if value.result is not None:
            run.counted.setdefault(job.size, (value.result.flops, value.result.bytes))
        run.finish(job, _row(job, value, run.compile_s.get(index)), store=value.stage != "not run")
        return True

    try:
        while pending:
            pending -= handle(*next_event(run.events))
    except KeyboardInterrupt:
        while True:  # keep what finished before the stop: results already sent, not yet read
            try:
                kind, index, value = run.events.get_nowait()
                handle(kind, index, value, submit=False)
            except queue.Empty:
                break
        raise


def _baseline_work(run: _Run, key_s: tuple, size: Config) -> dict[str, float]:
    """The kernels' counted work at a size (rate = work / time), so a baseline's rates compare."""
    work: dict[str, float] = {}
    done = [r for r in (run.rows.get(j.index) for j in run.jobs) if r is not None and r.size == key_s and r.ok]
    measured = run.counted.get(key_s)
    if measured is not None:
        work.update({k: v for k, v in zip(("flops", "bytes"), measured) if v is not None})
    elif done and done[0].median_ms:  # every row came from the row cache: its rates give the work back
        if done[0].tflops:
            work["flops"] = done[0].tflops * 1e9 * done[0].median_ms
        if done[0].gbps:
            work["bytes"] = done[0].gbps * 1e6 * done[0].median_ms
    if run.plan.flops is not None:
        work["flops"] = run.plan.flops(**size)
    if run.plan.bytes is not None:
        work["bytes"] = run.plan.bytes(**size)
    return work


def _run_baselines(run: _Run, baseline: Mapping[str, Callable[..., Any]], size_list: list[Config]) -> None:
    """Each baseline at each size, on a GPU, rated with the kernels' counted work at that size."""
    if not baseline:
        return
    index = len(run.jobs)
    waiting: dict[int, Job] = {}
    for label, make in baseline.items():
        for size in size_list:
            key_s = tuple((k, int(v)) for k, v in size.items())
            job = Job(index, key_s, (("make", make), ("work", _baseline_work(run, key_s, size))), label=label)
            waiting[index] = job
            run.runner.bench(run.plan, job, None)
            index += 1
    while waiting:
        kind, i, value = next_event(run.events)
        job = waiting.pop(i)
        if value.note and value.note not in run.notes:
            run.notes.append(value.note)
        row = _row(job, value, None)
        run.rows[i] = dataclasses.replace(row, config=())
        run.bar.update()


