"""The one course of a grid sweep, whatever runs its tasks: plan the jobs, take finished rows from
the row cache, send each configuration's compile task to the runner, send each compiled one to its
row step, collect the rows as they come back, time the baselines, run the final round, tabulate.

A runner (``_runners``) says where tasks run: :class:`InlineRunner` in this process (compiles in
threads, then each row step here, one at a time), :class:`LocalRunner` on the host's GPUs
(compiles in a pool of processes, one bench thread per GPU), :class:`DaskRunner` on a cluster.
Every runner answers the same calls (``compile``, ``bench``, ``next_event``, ``close``, the final
round's ``final_device``/``bench_pinned``) and reports to one event queue, so the steps below are
the same for each. What differs is said by the runner's ``in_process``: a sweep in this process
shows a compile bar and then a bench bar (its benchmarks wait for every compile, so they do not
share the machine with them), caches no rows and says nothing of where a row ran; a sweep over
devices shows one bar and, in a notebook, the table growing; its finished rows are cached on disk
(see ``_runners``' doc), and its leaders get a final round.

A stop (the stop button, Ctrl-C) keeps every finished row, and the row being timed in this process
keeps the launches it measured; the rest are "not run". A row whose worker died (a process killed
from outside) says so and is not cached, so the same call again measures it.
"""

from __future__ import annotations

import dataclasses
import queue
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...records.launch import SweepRow, SweepTable
from . import _show
from ._final import FinalRound
from ._plan import INTERRUPTED, Config, Job, SweepOptions, make_jobs, mark_best, short_error, size_key
from ._rowcache import CACHED_FAILURES, RowCache, row_key, sweep_identity
from ._runners import Events, Runner, choose_runner
from ._tasks import BESIDE, Benched, BenchPlan, Compiled

RESUMES = "; the same call again resumes it (finished rows are cached)"
GRAPH_NOTE = ("graph mode: the kernels' inputs rotate among copies, but a baseline callable is replayed as captured, "
              "without rotating its inputs or flushing L2, so it may read cached data")


def grid_sweep(factory: Callable[..., Any], configs: list[Config], size_list: list[Config],
               opts: SweepOptions, compiled: CompiledConfigs | None = None) -> SweepTable:
    """Every configuration at every size, measured by the runner ``opts`` asks for; see the module
    doc. ``compiled``: configurations compiled by an earlier sweep (none is compiled again), and
    where this sweep keeps what it compiles."""
    course = _course(factory, configs, size_list, opts, compiled)
    runner = course.runner
    make_step = opts.compile_fn or runner.compile_step(opts)
    try:
        course.compile_and_measure(factory, make_step)
        course.measure_baselines()
        if not runner.in_process:
            FinalRound(course, factory, make_step, opts.finalists, opts.progress).run()
    except KeyboardInterrupt:
        course.stopped()
    finally:
        runner.close()
        course.close_bars()
    if opts.baseline and course.mode == "graph":
        course.notes.append(GRAPH_NOTE)
    table = course.table(course.ordered())
    course.live.update(lambda: table, final=True)
    return table


def _course(factory: Callable[..., Any], configs: list[Config], size_list: list[Config], opts: SweepOptions,
            compiled: CompiledConfigs | None, progress: bool | None = None) -> Course:
    """A sweep's course, its runner chosen and its jobs planned (``progress``: its own bar, by
    default the sweep's ``progress``)."""
    if opts.devices is not None and opts.client is not None:
        raise ValueError("pass devices= (this host's GPUs) or client= (a Dask cluster), not both")
    events = Events()
    # a custom bench step may need no GPU at all (the tests' fake)
    runner = choose_runner(opts, events, real_gpu=opts.bench_fn is None)
    kwargs = opts.bench_options(worker_decides_isolation=not runner.in_process)
    key = None
    if not runner.in_process:
        identity = sweep_identity(factory, opts, model=runner.model, bench_kwargs=kwargs)
        key = lambda size, config: row_key(identity, size, config)  # noqa: E731
    jobs = make_jobs(configs, size_list, key)
    plan = BenchPlan(opts.bench_fn, opts.check_fn, opts.ref, kwargs, opts.flops, opts.bytes,
                     opts.ratio_baseline[1] if opts.ratio_baseline else None)
    factory_name = getattr(factory, "__name__", "")
    return Course(jobs=jobs, plan=plan, runner=runner, events=events, cache=RowCache.default(), force=opts.force,
                  progress=opts.progress if progress is None else progress, title=opts.name or factory_name or "kernel",
                  factory_name=factory_name, mode=str(kwargs["mode"]),
                  ratio_label=opts.ratio_baseline[0] if opts.ratio_baseline else None,
                  baselines=[(label, make, size) for label, make in (opts.baseline or {}).items()
                             for size in size_list], compiled=compiled)


def final_round_of(factory: Callable[..., Any], rows: list[SweepRow], size: Config, opts: SweepOptions,
                   compiled: CompiledConfigs | None = None) -> tuple[list[SweepRow], list[str], str | None]:
    """The final round of a search whose rows at ``size`` came from several grid sweeps over the
    same devices (the sampled search's batches, each run with ``finalists=0``): one round over all
    of them, as a grid sweep of those rows would end, so that every final figure at the size is
    timed on one device beside one reference. Returns (the rows with their final figures, the
    round's notes, what its ratios are to); the rows as they were where their leaders all ran on
    one device (or ``opts.finalists`` is 0)."""
    measured = [r for r in rows if r.ok and r.label is None]
    if not opts.finalists or len({r.device for r in measured}) < 2:
        return rows, [], None
    course = _course(factory, [dict(r.config) for r in rows], [size], opts, compiled, progress=False)
    course.baselines = []  # the batches measured them
    course.rows = dict(enumerate(rows))
    make_step = opts.compile_fn or course.runner.compile_step(opts)
    try:
        FinalRound(course, factory, make_step, opts.finalists, opts.progress).run()
    finally:
        course.runner.close()
        course.close_bars()
    return [course.rows[i] for i in range(len(rows))], list(course.notes), course.final_reference


class CompiledConfigs:
    """Configurations compiled once, kept for later sweeps of the same ones (successive halving's
    rungs after the first), by size and configuration: the compile task's outcome (its artifact,
    its compile time). A configuration kept here is neither elaborated nor compiled again: its row
    step gets the kept artifact (on a Dask cluster the artifact travels to the bench worker with
    the task), and its row keeps its first compile's time. Only successful compiles are kept."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Compiled] = {}

    @staticmethod
    def _key(size: tuple, config: Config | tuple) -> tuple:
        items = config.items() if isinstance(config, dict) else config
        return tuple(size), tuple((k, repr(v)) for k, v in items)

    def get(self, size: tuple, config: Config | tuple) -> Compiled | None:
        """The kept outcome of ``config`` at ``size`` (a size key: ``_plan.size_key``), or None."""
        return self._kept.get(self._key(size, config))

    def put(self, size: tuple, config: Config | tuple, compiled: Compiled) -> None:
        if compiled.error is None:
            self._kept[self._key(size, config)] = compiled

    def retain(self, size: tuple, configs: list[Config]) -> None:
        """Keep, at ``size``, only ``configs`` (a halving rung's survivors): the others' artifacts go."""
        wanted = {self._key(size, c) for c in configs}
        self._kept = {k: v for k, v in self._kept.items() if k[0] != tuple(size) or k in wanted}


@dataclass
class Course:
    """One sweep under way: its jobs, where their tasks go, and the rows and notes come back so far.
    (:class:`FinalRound` reads and amends it too.)"""

    jobs: list[Job]
    plan: BenchPlan
    runner: Runner
    events: queue.Queue
    cache: RowCache
    force: bool
    progress: bool
    title: str  # the table's kernel name
    factory_name: str
    mode: str
    ratio_label: str | None
    baselines: list[tuple[str, Callable[..., Any], Config]]  # (label, maker, size), in table order
    rows: dict[int, SweepRow] = field(default_factory=dict)
    compile_s: dict[int, float | None] = field(default_factory=dict)
    compiled: CompiledConfigs | None = None  # compiled by an earlier sweep; where this one keeps its compiles
    counted: dict[tuple, tuple[float | None, float | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compile_bar: Any = None
    bar: Any = None
    live: Any = None
    final_reference: str | None = None  # what the final round's ratios are to, once it ran

    def __post_init__(self) -> None:
        n_rows = len(self.jobs) + len(self.baselines)
        if self.runner.in_process:
            self.live = _show.LiveTable(False)
        else:
            self.bar = _show.Progress(n_rows, f"sweeping {len(self.jobs)} configurations on {self.runner.where}",
                                      self.progress)
            self.live = _show.LiveTable(self.progress)

    # -- the table --------------------------------------------------------------------------
    def table(self, rows: list[SweepRow]) -> SweepTable:
        return SweepTable(kernel=self.title, rows=tuple(mark_best(rows)), mode=self.mode, device=self.runner.model,
                          notes=tuple(self.notes), factory=self.factory_name, ratio_baseline=self.ratio_label,
                          final_reference=self.final_reference)

    def ordered(self) -> list[SweepRow]:
        """The configurations in job order, then the baselines (whatever order they finished in)."""
        return [self.rows[i] for i in sorted(self.rows) if i < len(self.jobs) + len(self.baselines)]

    def finish(self, job: Job, row: SweepRow, store: bool = True) -> None:
        """A row is final: cached (when worth measuring once), shown, counted."""
        if store and job.key and (row.ok or row.stage in CACHED_FAILURES):
            self.cache.put(job.key, row)  # first: a stop that lands between the two loses no measurement
        self.rows[job.index] = row
        if self.bar is not None:
            self.bar.update()
        self.live.update(lambda: self.table([self.rows[i] for i in sorted(self.rows)]))

    def note(self, *said: str | None) -> None:
        for text in said:
            if text and text not in self.notes:
                self.notes.append(text)

    def close_bars(self) -> None:
        for bar in (self.compile_bar, self.bar):
            if bar is not None:
                bar.close()

    # -- the steps ---------------------------------------------------------------------------
    def compile_and_measure(self, factory: Callable[..., Any], make_step: Callable[..., Any]) -> None:
        """Take each job from the row cache or submit its compile task; each compiled one goes to
        its row step as it arrives; a row is final when measured (or failed, or cached)."""
        futures: dict[int, Any] = {}
        steps: dict[int, Any] = {}  # in this process: submitted once the compile bar knows how many
        known: dict[int, Compiled] = {}  # compiled by an earlier sweep: straight to the row step
        to_compile = []
        for job in self.jobs:
            hit = None if self.force or not job.key else self.cache.get(job.key)
            if hit is not None:
                self.finish(job, dataclasses.replace(hit, cached=True), store=False)
                continue
            kept = self.compiled.get(job.size, job.config) if self.compiled is not None else None
            if kept is not None:
                known[job.index] = kept
                continue
            to_compile.append(job)
        self.runner.expect_compiles(len(to_compile))  # a pool of processes is sized for them
        for job in to_compile:
            try:
                step = make_step(factory, dict(job.size), dict(job.config))
            except Exception as err:
                self.finish(job, SweepRow(job.config, job.size, error=short_error(err), stage="elaborate"))
                continue
            if self.runner.in_process:
                steps[job.index] = step
            else:  # at once: a pool's processes start (spawn, imports: seconds) while the rest elaborate
                futures[job.index] = self.runner.compile(job.index, step)
        if self.runner.in_process:
            self.compile_bar = _show.Progress(len(steps), f"compiling {len(steps)} configurations", self.progress)
            for index, step in steps.items():
                futures[index] = self.runner.compile(index, step)
        by_index = {j.index: j for j in self.jobs}
        compiling, measuring = len(futures), 0
        for index, kept in known.items():
            measuring += self._compiled(by_index[index], kept, None, again=True)
        if self.runner.in_process and not futures:
            self._compiles_done(measuring)
        while compiling or measuring:
            kind, index, value = self.runner.next_event()
            if kind == "compiled":
                compiling -= 1
                measuring += self._compiled(by_index[index], value, futures.get(index))
                if not compiling:
                    self._compiles_done(measuring)
            else:
                measuring -= 1
                self._benched(by_index[index], value)
            self.events.get_nowait()  # handled: a stop from now on need not handle it again

    def _compiles_done(self, runnable: int) -> None:
        if self.compile_bar is not None:  # in this process: the bench bar follows the compile bar
            self.compile_bar.close()
            self.compile_bar = None
            total = runnable + len(self.baselines)
            self.bar = _show.Progress(total, f"benchmarking {total} rows", self.progress)

    def _compiled(self, job: Job, value: Compiled, future: Any, again: bool = False) -> bool:
        """A compile task's outcome (``again``: one kept from an earlier sweep); True when the
        configuration went on to its row step."""
        self.compile_s[job.index] = value.compile_s
        if self.compile_bar is not None and not again:
            self.compile_bar.update()
        if value.error is not None:
            self.finish(job, SweepRow(job.config, job.size, error=value.error, stage=value.stage or "compile",
                                      compile_s=value.compile_s), store=not value.lost)
            return False
        if self.compiled is not None and not again:
            self.compiled.put(job.size, job.config, value)
        # Dask: the row step gets the compile task's future (the artifact goes worker to worker);
        # an outcome kept from an earlier sweep travels with the task itself
        self.runner.bench(self.plan, job, future if self.runner.passes_futures and future is not None else value)
        return True

    def _benched(self, job: Job, value: Benched) -> None:
        self.note(value.lost, value.note)
        if value.result is not None and value.error is None:
            self.counted.setdefault(job.size, (value.result.flops, value.result.bytes))
        # a row cut short (a stop, a lost worker) or not run is measured again by the next call
        self.finish(job, outcome_row(job, value, self.compile_s.get(job.index)),
                    store=value.stage != "not run" and not value.partial and not value.lost)

    def measure_baselines(self) -> None:
        """Each baseline at each size, rated with the kernels' counted work at that size."""
        waiting: dict[int, Job] = {}
        for i, (label, make, size) in enumerate(self.baselines):
            key_s = size_key(size)
            job = Job(len(self.jobs) + i, key_s, (("make", make), ("work", self._baseline_work(key_s, size))),
                      label=label)
            waiting[job.index] = job
            self.runner.bench(self.plan, job, None)
        while waiting:
            kind, index, value = self.runner.next_event()
            job = waiting.pop(index)
            self.note(value.lost, value.note)
            if value.stage == BESIDE:
                self.rows[index] = self._beside_row(job, value)
            else:
                self.rows[index] = dataclasses.replace(outcome_row(job, value, None), config=())  # measured every time
            self.bar.update()
            self.events.get_nowait()

    def _beside_row(self, job: Job, value: Benched) -> SweepRow:
        """The row of a baseline that takes the kernel's inputs (``torch.matmul``): it has none of
        its own to be timed on, but with ``rank_by="ratio"`` it was timed beside every configuration
        at its size, on that configuration's inputs; its row gives the median of those windows."""
        beside = [r.baseline_ms for r in (self.rows.get(j.index) for j in self.jobs)
                  if r is not None and r.size == job.size and r.baseline_ms and not r.cached]
        if job.label != self.ratio_label or not beside:
            return SweepRow((), job.size, stage="bench", label=job.label, device=value.device or None,
                            error=(f"{job.label} is called with the kernel's inputs, so it cannot be timed as a row of "
                                   "its own: give a zero-argument callable (lambda: torch.matmul(a, b)), or rank "
                                   f"by ratio (rank_by='ratio') to time it beside each configuration"))
        ms = statistics.median(beside)
        work = dict(dict(job.config).get("work") or {})
        return SweepRow((), job.size, median_ms=ms, label=job.label, device=value.device or None,
                        tflops=work["flops"] / (ms * 1e9) if work.get("flops") else None,
                        gbps=work["bytes"] / (ms * 1e6) if work.get("bytes") else None,
                        measured_as=f"beside each configuration: the median of its {len(beside)} side-by-side windows")

    def _baseline_work(self, key_s: tuple, size: Config) -> dict[str, float]:
        """The kernels' counted work at a size (rate = work / time), so a baseline's rates compare."""
        work: dict[str, float] = {}
        done = [r for r in (self.rows.get(j.index) for j in self.jobs) if r is not None and r.size == key_s and r.ok]
        measured = self.counted.get(key_s)
        if measured is not None:
            work.update({k: v for k, v in zip(("flops", "bytes"), measured) if v is not None})
        elif done and done[0].median_ms:  # every row came from the row cache: its rates give the work back
            if done[0].tflops:
                work["flops"] = done[0].tflops * 1e9 * done[0].median_ms
            if done[0].gbps:
                work["bytes"] = done[0].gbps * 1e6 * done[0].median_ms
        if self.plan.flops is not None:
            work["flops"] = self.plan.flops(**size)
        if self.plan.bytes is not None:
            work["bytes"] = self.plan.bytes(**size)
        return work

    def stopped(self) -> None:
        """The stop button: cancel what the runner holds, keep every row that finished before the
        stop (results already sent, not yet read or read but not yet handled when the stop landed),
        and mark the rest "not run"."""
        self.runner.close(cancel=True)
        while True:
            try:
                kind, index, value = self.events.get_nowait()
            except queue.Empty:
                break
            if index in self.rows:
                continue
            if index < len(self.jobs):
                job = self.jobs[index]
                if kind == "compiled":
                    self.compile_s[index] = value.compile_s
                    if value.error is not None:
                        self.finish(job, SweepRow(job.config, job.size, error=value.error,
                                                  stage=value.stage or "compile", compile_s=value.compile_s),
                                    store=not value.lost)
                else:
                    self._benched(job, value)
        cached = not self.runner.in_process
        done = sum(1 for j in self.jobs if j.index in self.rows and self.rows[j.index].stage != "not run")
        self.notes.append(f"interrupted after {done} of {len(self.jobs)} configurations: "
                          + ("the same call again resumes from the row cache" if cached
                             else "the rows before the stop were measured"))
        why = INTERRUPTED + (RESUMES if cached else "")
        for job in self.jobs:
            self.rows.setdefault(job.index, SweepRow(job.config, job.size, error=why, stage="not run",
                                                     compile_s=self.compile_s.get(job.index)))
        for i, (label, _, size) in enumerate(self.baselines):
            self.rows.setdefault(len(self.jobs) + i, SweepRow((), size_key(size), error=why, stage="not run",
                                                              label=label))


def outcome_row(job: Job, outcome: Benched, compile_s: float | None) -> SweepRow:
    """A row step's outcome as the table's row."""
    if outcome.result is not None and (outcome.error is None or outcome.partial):
        return SweepRow.measured(job.config, job.size, outcome.result, compile_s=compile_s, bench_s=outcome.bench_s,
                                 device=outcome.device or None, label=job.label)
    return SweepRow(job.config, job.size, error=outcome.error or "no result", stage=outcome.stage or "bench",
                    compile_s=compile_s, bench_s=outcome.bench_s, device=outcome.device or None, label=job.label)


