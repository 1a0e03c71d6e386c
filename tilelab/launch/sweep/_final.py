"""The final round of a sweep over several devices: its leaders timed again, one after another,
on one device, so that the best is not decided by the board each configuration landed on."""

from __future__ import annotations

import dataclasses
import queue
import time
from collections.abc import Callable
from typing import Any

from ..._launch_model import SweepRow
from . import _show
from ._plan import Job, describe, short_error, size_text
from ._tasks import Benched, BenchPlan

FINAL_ROUND_WHY = ("two GPUs of one model can differ by about 1%, as much as close configurations do, so the "
                   "sweep's medians, taken on different devices, rank its leaders partly by the board each landed "
                   "on; the final round ranks them on one device, and BEST is the lowest final ms")



def _kept(runner: Any, row: SweepRow) -> bool:
    """Whether a finalist's sweep figure stands as its final one: measured on the final device in
    this sweep. A row from the row cache is timed again: its device label ("cuda:0", a worker's
    name) may have named another board in the session that measured it."""
    return not row.cached and runner.on_final_device(row.device)


class FinalRound:
    """The leaders of a sweep over several devices, timed again one after another on one device.

    At each size the ``count`` fastest successful configurations are the finalists. Those the
    sweep measured on the runner's final device keep that median as their final figure; the
    others are compiled again (TileLang's disk cache answers, so this is cheap) through the
    sweep's runner and benchmarked, one at a time, pinned to the final device. The figures become
    the rows' ``final_ms``, which :func:`mark_best` ranks by. Re-timing only the finalists measured
    elsewhere keeps the round short (on two GPUs, half the finalists on average): it is serial
    time added to a parallel sweep. A size whose leaders all ran on one device already is skipped
    (their figures compare as they are). A size's figures are applied only once all its finalists
    are done, so a stop keeps the sweep's ranking wherever the final round did not complete.
    """

    def __init__(self, run: Any, factory: Callable[..., Any], make_step: Callable[..., Any], count: int,
                 progress: bool) -> None:
        self.sweep, self.factory, self.make_step, self.count, self.progress = run, factory, make_step, count, progress
        self.sizes = self._leaders() if count else {}
        self.originals: dict[int, Job] = {}  # final-round index -> the sweep's job
        self.futures: dict[int, Any] = {}  # Dask: final-round index -> its compile future
        self.ready: list[tuple[Job, Any]] = []  # compiled, waiting for the device
        self.outcomes: dict[int, Benched] = {}  # the sweep's job index -> its final-round outcome
        self.applied: set[tuple] = set()
        self.kept: set[int] = set()  # the sweep's job indices whose median on the final device stands
        self.busy = False
        self.stopped: str | None = None
        self.bar: Any = None

    def _leaders(self) -> dict[tuple, list[Job]]:
        timed: dict[tuple, list[tuple[float, Job]]] = {}
        for job in self.sweep.jobs:
            row = self.sweep.rows.get(job.index)
            if row is not None and row.ok:
                timed.setdefault(job.size, []).append((float(row.median_ms or 0.0), job))
        leaders = {size: [job for _, job in sorted(ranked, key=lambda t: t[0])[:self.count]]
                   for size, ranked in timed.items()}
        return {size: jobs for size, jobs in leaders.items()
                if len({self.sweep.rows[j.index].device for j in jobs}) > 1}

    def run(self) -> None:
        if not self.sizes:
            return
        device = self.sweep.runner.final_device()
        runner, rows = self.sweep.runner, self.sweep.rows
        total = sum(not _kept(runner, rows[j.index]) for jobs in self.sizes.values() for j in jobs)
        if device is None:
            self.sweep.notes.append("no final round: no device of the sweep is usable any more; the best is the "
                                    "fastest median, whichever device measured it")
            return
        self.bar = _show.Progress(total, f"final round: {total} configurations on {device}", self.progress)
        t0 = time.perf_counter()
        try:
            self._submit_compiles()
            self._wait()
        except KeyboardInterrupt:
            self._drain()
            self.sweep.runner.close(cancel=True)
            self.stopped = "interrupted"
        except Exception as err:  # every row is measured: an error here must not lose the table
            self.sweep.runner.close(cancel=True)
            self.stopped = f"the final round failed: {short_error(err)}"
        finally:
            self.bar.close()
        self._say(device, total, time.perf_counter() - t0)

    def _submit_compiles(self) -> None:
        index = max(self.sweep.rows) + 1
        runner = self.sweep.runner
        # the kept ones first: a size is applied when its last outcome arrives, kept ones included
        for job in (job for jobs in self.sizes.values() for job in jobs):
            row = self.sweep.rows[job.index]
            if _kept(runner, row):  # measured there already, in this sweep: its median stands
                self.kept.add(job.index)
                self.outcomes[job.index] = Benched(job.index, device=row.device or "")
        for jobs in self.sizes.values():
            for job in jobs:
                if job.index in self.kept:
                    continue
                again = dataclasses.replace(job, index=index, key="")
                self.originals[index] = job
                index += 1
                try:
                    step = self.make_step(self.factory, dict(job.size), dict(job.config))
                except Exception as err:
                    self._done(again, Benched(again.index, error=short_error(err), stage="elaborate"))
                    continue
                self.futures[again.index] = self.sweep.runner.compile(again.index, step)

    def _waiting(self) -> bool:
        return len(self.outcomes) < len(self.originals) + len(self.kept)

    def _wait(self) -> None:
        while self._waiting() and self.stopped is None:
            self._handle(*self.sweep.runner.next_event())
            self.sweep.events.get_nowait()  # handled (a stop before this handles it again)

    def _drain(self) -> None:
        """After a stop: keep what finished before it (sent, not yet read); start nothing."""
        self.stopped = "interrupted"
        while True:
            try:
                self._handle(*self.sweep.events.get_nowait())
            except queue.Empty:
                return

    def _handle(self, kind: str, index: int, value: Any) -> None:
        job = dataclasses.replace(self.originals[index], index=index)
        if kind == "compiled":
            if value.error is not None:
                self._done(job, Benched(index, error=value.error, stage=value.stage or "compile"))
            else:
                dask = getattr(self.sweep.runner, "passes_futures", False)
                self.ready.append((job, self.futures.get(index) if dask else value))
        else:
            self.busy = False
            self._done(job, value)
            if value.lost:
                self.stopped = value.lost
                if value.lost not in self.sweep.notes:
                    self.sweep.notes.append(value.lost)
        if not self.busy and self.ready and self.stopped is None:  # one configuration at a time
            job, compiled = self.ready.pop(0)
            self.busy = True
            self.sweep.runner.bench_pinned(self._plan(), job, compiled)

    def _plan(self) -> BenchPlan:
        # every finalist passed its check in the sweep: the final round only times
        return dataclasses.replace(self.sweep.plan, ref=None, check_fn=None)

    def _done(self, job: Job, outcome: Benched) -> None:
        original = self.originals[job.index]
        self.outcomes[original.index] = outcome
        if outcome.note and outcome.note not in self.sweep.notes:
            self.sweep.notes.append(outcome.note)
        self.bar.update()
        # the final device's context is gone: where this size's round stood, the sweep's ranking stands
        if outcome.lost:
            return
        for size, jobs in self.sizes.items():
            if size not in self.applied and all(j.index in self.outcomes for j in jobs):
                self._apply(size, jobs)

    def _apply(self, size: tuple, jobs: list[Job]) -> None:
        self.applied.add(size)
        rows = self.sweep.rows
        figures = [j for j in jobs if j.index in self.kept or (self.outcomes[j.index].result is not None
                                                               and self.outcomes[j.index].error is None)]
        if not figures:  # nothing to rank by: the sweep's medians decide, as without the round
            first = self.outcomes[jobs[0].index]
            self.sweep.notes.append(f"final round at {size_text(size)}: every finalist failed when timed again "
                                    f"(first: {describe(jobs[0])}, {first.error or 'no result'}); there the best is "
                                    "the sweep's fastest median, whichever device measured it")
            return
        for job in jobs:
            outcome = self.outcomes[job.index]
            if job.index in self.kept:
                rows[job.index] = dataclasses.replace(rows[job.index], final_ms=rows[job.index].median_ms,
                                                      final_device=rows[job.index].device)
            elif outcome.result is not None and outcome.error is None:
                rows[job.index] = dataclasses.replace(rows[job.index], final_ms=outcome.result.median_ms,
                                                      final_device=outcome.device or None)
            else:
                self.sweep.notes.append(f"final round: {describe(job)} failed ({outcome.stage or 'bench'}): "
                                        f"{outcome.error or 'no result'}; it keeps its sweep row, without a final "
                                        "figure, so it is not ranked at that size")
        self.sweep.live.update(lambda: self.sweep.table([rows[i] for i in sorted(rows)]))

    def _say(self, device: str, total: int, seconds: float) -> None:
        notes = self.sweep.notes
        # (a round has two finalists at least: one alone would have nothing to be ranked against)
        kept = f"; {len(self.kept)} measured there in the sweep kept that figure" if self.kept else ""
        notes.append(f"final round: of the {self.count} fastest configurations at each size, those measured "
                     f"elsewhere were timed again, one after another, on {device} ({total} configurations, "
                     f"{seconds:.1f} s{kept}): {FINAL_ROUND_WHY}")
        unfinished = [size for size in self.sizes if size not in self.applied]
        if unfinished:
            why = ("the sweep was interrupted during it" if self.stopped == "interrupted"
                   else f"it stopped: {self.stopped}")
            notes.append(f"final round incomplete at {', '.join(size_text(s) for s in unfinished)} ({why}): "
                         "there the best is the sweep's fastest median, whichever device measured it")
        skipped = [size for size in {j.size for j in self.sweep.jobs} if size not in self.sizes]
        if skipped and len({j.size for j in self.sweep.jobs}) > 1:
            notes.append(f"no final round at {', '.join(size_text(s) for s in sorted(skipped))}: its leaders all ran "
                         "on one device already (or fewer than two succeeded), so their medians compare as they are")
