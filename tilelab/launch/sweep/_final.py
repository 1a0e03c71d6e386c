"""The final round of a sweep over several devices: its leaders timed again on one device, each
side by side with one common reference, so that the best is decided neither by the board each
configuration landed on nor by the clock of the moment each was timed at."""

from __future__ import annotations

import dataclasses
import functools
import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...records.launch import SweepRow
from . import _show
from ._plan import Job, describe, reference_median, short_error, side_by_side_kwargs, size_text
from ._tasks import Benched, BenchPlan, reference_kernel

if TYPE_CHECKING:
    from ._runners import Runner

FINAL_ROUND_WHY = ("two GPUs of one model can differ by about 1%, as much as close configurations do, so the "
                   "sweep's medians, taken on different devices, rank its leaders partly by the board each landed "
                   "on; and one GPU's clock moves by a few percent between calls, so medians timed one after "
                   "another rank them partly by the moment; a ratio to a reference timed in the same window holds "
                   "through both, and BEST is the lowest final ratio")

LEADER_REFERENCE = "the sweep's fastest at each size"


def _kept(runner: Runner, row: SweepRow) -> bool:
    """Whether a finalist's sweep figure stands as its final one: measured on the final device in
    this sweep. A row from the row cache is timed again: its device label ("cuda:0", a worker's
    name) may have named another board in the session that measured it."""
    return not row.cached and runner.on_final_device(row.device)


class FinalRound:
    """The leaders of a sweep over several devices, timed again on one device, each side by side
    with one common reference, and ranked by their ratios to it.

    At each size the ``count`` fastest successful configurations are the finalists. The common
    reference is the sweep's ratio baseline where it ranks by ratio (``rank_by="ratio"``), else the
    leader of the size (the sweep's fastest). Each finalist is compiled again (TileLang's disk cache
    answers, so this is cheap) through the sweep's runner and benchmarked, one at a time, pinned
    to the final device, with ``bench(kernel, baseline=reference)``: batches of the two alternate
    in one window, so the ratio holds while the clock wanders between calls (and so no warm-up to a
    steady clock comes first: :func:`~._plan.side_by_side_kwargs`). The ratios become the
    rows' ``final_ratio`` (and their kernels' medians ``final_ms``), which :func:`mark_best` ranks
    by; the leader, where it is the reference, is 1 by definition and is not timed against itself.
    To keep the round short (it is serial time added to a parallel sweep), a finalist whose ratio
    to the sweep's baseline was measured on the final device in this sweep keeps it, and that device
    is the one that measured the most finalists (``Runner.prefer_final``). A size whose
    leaders all ran on one device already is skipped (their figures compare as they are). A size's
    figures are applied only once all its finalists are done, so a stop keeps the sweep's ranking
    wherever the final round did not complete.
    """

    def __init__(self, run: Any, factory: Callable[..., Any], make_step: Callable[..., Any], count: int,
                 progress: bool) -> None:
        self.sweep, self.factory, self.make_step, self.count, self.progress = run, factory, make_step, count, progress
        # against the sweep's ratio baseline (rank_by="ratio"), or against the leader at each size
        self.against_baseline = run.plan.ratio_baseline is not None
        self.sizes = self._leaders() if count else {}
        self.originals: dict[int, Job] = {}  # final-round index -> the sweep's job
        self.futures: dict[int, Any] = {}  # Dask: final-round index -> its compile future
        self.ready: list[tuple[Job, Any]] = []  # compiled, waiting for the device
        self.outcomes: dict[int, Benched] = {}  # the sweep's job index -> its final-round outcome
        self.applied: set[tuple] = set()
        self.kept: set[int] = set()  # the sweep's job indices whose ratio on the final device stands
        self.reference_of: dict[int, tuple] = {}  # final-round index of a leader compiled as reference -> size
        self.references: dict[tuple, Any] = {}  # size -> the leader's compiled artifact
        self.reference_failed: dict[tuple, str] = {}  # size -> why its leader did not compile again
        self.waiting: dict[tuple, list[tuple[Job, Any]]] = {}  # compiled, waiting for their size's reference
        self.busy = False
        self.stopped: str | None = None
        self.bar: Any = None

    def _leaders(self) -> dict[tuple, list[Job]]:
        """The ``count`` fastest at each size: by their ratio where every row there has one (to the
        sweep's baseline, or to the leader of a halving sweep's rung before), else by median."""
        timed: dict[tuple, list[tuple[SweepRow, Job]]] = {}
        for job in self.sweep.jobs:
            row = self.sweep.rows.get(job.index)
            if row is not None and row.ok:
                timed.setdefault(job.size, []).append((row, job))
        leaders = {}
        for size, ranked in timed.items():
            by_ratio = all(row.ratio is not None for row, _ in ranked)
            ranked.sort(key=lambda t: float((t[0].ratio if by_ratio else t[0].median_ms) or 0.0))
            leaders[size] = [job for _, job in ranked[:self.count]]
        return {size: jobs for size, jobs in leaders.items()
                if len({self.sweep.rows[j.index].device for j in jobs}) > 1}

    def _is_kept(self, job: Job) -> bool:
        """Whether a finalist's sweep figure stands as its final one: its ratio to the sweep's
        baseline, measured on the final device in this sweep (a row from the row cache is timed
        again: its device label may have named another board in the session that measured it)."""
        row = self.sweep.rows[job.index]
        return self.against_baseline and row.ratio is not None and _kept(self.sweep.runner, row)

    def _timed(self) -> int:
        """How many finalists the round benchmarks (the leader, as a reference, is not)."""
        return sum(1 for jobs in self.sizes.values() for i, job in enumerate(jobs)
                   if not self._is_kept(job) and (self.against_baseline or i > 0))

    def run(self) -> None:
        if not self.sizes:
            return
        if self.against_baseline:  # where most finalists' ratios were measured: they stand there
            self.sweep.runner.prefer_final([self.sweep.rows[job.index].device for jobs in self.sizes.values()
                                            for job in jobs if not self.sweep.rows[job.index].cached
                                            and self.sweep.rows[job.index].ratio is not None])
        device = self.sweep.runner.final_device()
        total = self._timed()
        if device is None:
            self.sweep.notes.append("no final round: no device of the sweep is usable any more; the best is the "
                                    "fastest median, whichever device measured it")
            return
        self.sweep.final_reference = self.sweep.ratio_label if self.against_baseline else LEADER_REFERENCE
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
        # the kept ones first: a size is applied when its last outcome arrives, kept ones included
        for job in (job for jobs in self.sizes.values() for job in jobs):
            if self._is_kept(job):  # its ratio was measured there, in this sweep: it stands
                row = self.sweep.rows[job.index]
                self.kept.add(job.index)
                self.outcomes[job.index] = Benched(job.index, device=row.device or "")
        self.sweep.runner.expect_compiles(sum(1 for jobs in self.sizes.values() for job in jobs
                                              if job.index not in self.kept))
        for size, jobs in self.sizes.items():
            # the leader first: where it is the reference, the others wait for its compile
            for position, job in enumerate(jobs):
                if job.index in self.kept:
                    continue
                again = dataclasses.replace(job, index=index, key="")
                self.originals[index] = job
                if not self.against_baseline and position == 0:
                    self.reference_of[index] = size
                index += 1
                try:
                    step = self.make_step(self.factory, dict(job.size), dict(job.config))
                except Exception as err:
                    self._compiled_badly(again, short_error(err), "elaborate")
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

    def _compiled_badly(self, job: Job, error: str, stage: str) -> None:
        size = self.reference_of.get(job.index)
        if size is None:
            self._done(job, Benched(job.index, error=error, stage=stage))
            return
        # the reference is gone: nothing at this size can be ranked against it
        self.reference_failed[size] = f"{error} ({stage})"
        self.outcomes[self.originals[job.index].index] = Benched(job.index, error=error, stage=stage)
        for waiting, _ in self.waiting.pop(size, []):
            self._done(waiting, Benched(waiting.index, error="not timed: its size's reference did not compile again",
                                        stage="not run"), count=False)
        self._check_sizes()

    def _handle(self, kind: str, index: int, value: Any) -> None:
        job = dataclasses.replace(self.originals[index], index=index)
        if kind == "compiled":
            if value.error is not None:
                self._compiled_badly(job, value.error, value.stage or "compile")
            else:
                dask = getattr(self.sweep.runner, "passes_futures", False)
                compiled = self.futures.get(index) if dask else value
                if index in self.reference_of:
                    self._reference_ready(job, self.futures[index].result() if dask else value)
                elif self.against_baseline or job.size in self.references:
                    self.ready.append((job, compiled))
                elif job.size in self.reference_failed:
                    self._done(job, Benched(index, error="not timed: its size's reference did not compile again",
                                            stage="not run"), count=False)
                else:
                    self.waiting.setdefault(job.size, []).append((job, compiled))
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
            self.sweep.runner.bench_pinned(self._plan(job.size), job, compiled)

    def _reference_ready(self, job: Job, compiled: Any) -> None:
        """The leader of a size compiled again: the others of its size are timed beside it."""
        self.references[job.size] = compiled.artifact
        self.outcomes[self.originals[job.index].index] = Benched(job.index)  # a reference: never timed itself
        self.ready += self.waiting.pop(job.size, [])
        self._check_sizes()

    def _plan(self, size: tuple) -> BenchPlan:
        # every finalist passed its check in the sweep: the final round only times, beside the
        # reference, with no warm-up to a steady clock (it cancels in the ratio)
        plan = dataclasses.replace(self.sweep.plan, ref=None, check_fn=None,
                                   bench_kwargs=side_by_side_kwargs(self.sweep.plan.bench_kwargs))
        if self.against_baseline:
            return plan
        load = self.sweep.plan.bench_fn is None
        return dataclasses.replace(plan, ratio_baseline=functools.partial(reference_kernel, self.references[size],
                                                                          load))

    def _done(self, job: Job, outcome: Benched, count: bool = True) -> None:
        original = self.originals[job.index]
        self.outcomes[original.index] = outcome
        if outcome.note and outcome.note not in self.sweep.notes:
            self.sweep.notes.append(outcome.note)
        if count:
            self.bar.update()
        # the final device's context is gone: where this size's round stood, the sweep's ranking stands
        if outcome.lost:
            return
        self._check_sizes()

    def _check_sizes(self) -> None:
        for size, jobs in self.sizes.items():
            if size not in self.applied and all(j.index in self.outcomes for j in jobs):
                self._apply(size, jobs)

    def _reference_name(self, jobs: list[Job]) -> str:
        if self.against_baseline:
            return self.sweep.ratio_label or "the sweep's baseline"
        return describe(jobs[0]).split(" at size ")[0]

    def _apply(self, size: tuple, jobs: list[Job]) -> None:
        self.applied.add(size)
        rows = self.sweep.rows
        if size in self.reference_failed:
            self.sweep.notes.append(f"final round at {size_text(size)}: its leader, the reference the others are "
                                    f"timed beside, did not compile again ({self.reference_failed[size]}); there the "
                                    "best is the sweep's fastest median, whichever device measured it")
            return

        def timed(job: Job) -> bool:
            outcome = self.outcomes[job.index]
            return outcome.result is not None and outcome.error is None

        reference = None if self.against_baseline else jobs[0]
        others = [j for j in jobs if j is not reference]
        if not any(timed(j) or j.index in self.kept for j in others):
            # nothing to rank by: the sweep's medians decide, as without the round
            first = self.outcomes[others[0].index] if others else None
            self.sweep.notes.append(f"final round at {size_text(size)}: every finalist failed when timed again "
                                    f"(first: {describe(others[0]) if others else '-'}, "
                                    f"{(first.error if first else None) or 'no result'}); there the best is the "
                                    "sweep's fastest median, whichever device measured it")
            return
        # the reference's own median: its median in the windows it was timed in, beside the others
        reference_ms = reference_median(self.outcomes[j.index].result for j in others if timed(j))
        for job in others:
            outcome, row = self.outcomes[job.index], rows[job.index]
            if job.index in self.kept:
                rows[job.index] = dataclasses.replace(row, final_ms=row.median_ms, final_device=row.device,
                                                      final_ratio=row.ratio, final_ratio_ci=row.ratio_ci)
            elif timed(job) and outcome.result is not None:
                res = outcome.result
                rows[job.index] = dataclasses.replace(row, final_ms=res.median_ms, final_device=outcome.device or None,
                                                      final_ratio=getattr(res, "ratio", None),
                                                      final_ratio_ci=getattr(res, "ratio_ci", None))
            else:
                self.sweep.notes.append(f"final round: {describe(job)} failed ({outcome.stage or 'bench'}): "
                                        f"{outcome.error or 'no result'}; it keeps its sweep row, without a final "
                                        "figure, so it is not ranked at that size")
        if reference is not None:
            row = rows[reference.index]
            # where the others were timed beside it (a bench task's own label of the final device)
            device = next((self.outcomes[j.index].device for j in others if timed(j)), None)
            rows[reference.index] = dataclasses.replace(row, final_ratio=1.0, final_ratio_ci=None,
                                                        final_device=device or None, final_ms=reference_ms)
        self.sweep.live.update(lambda: self.sweep.table([rows[i] for i in sorted(rows)]))

    def _say(self, device: str, total: int, seconds: float) -> None:
        notes = self.sweep.notes
        # (a round has two finalists at least: one alone would have nothing to be ranked against)
        if self.against_baseline:
            against = (f"each side by side with {self.sweep.ratio_label or 'the sweep baseline'} (batches alternating "
                       "in one window), and ranked by their ratio to it")
            kept = (f"; {len(self.kept)} whose ratio was measured there in the sweep kept it: the round runs "
                    "where the most finalists were measured" if self.kept else "")
        else:
            against = ("each side by side with the leader of its size, the sweep's fastest (batches alternating in "
                       "one window), and ranked by their ratio to it (the leader's is 1)")
            kept = ""
            leaders = "; ".join(f"at {size_text(size)}: {self._reference_name(jobs)}"
                                for size, jobs in self.sizes.items())
            kept += f"; the leaders: {leaders}"
        notes.append(f"final round: the {self.count} fastest configurations at each size were timed again on "
                     f"{device}, {against} ({total} timed, {seconds:.1f} s{kept}): {FINAL_ROUND_WHY}")
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
