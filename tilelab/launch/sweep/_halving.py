"""Searching a sweep's space faster than a grid: pruning before compiling, and successive halving.

Pruning (:func:`prune`): each configuration is inspected (TileLang's lowering, no nvcc, no GPU)
before anything is compiled; a configuration whose launch would fail (more shared memory or
threads per block than the target allows: the inspector's limit notes) or that TileLang cannot
lower (with the doctor's cause) becomes a row of stage ``"pruned"`` with that reason.

Successive halving (:func:`halving_sweep`, ``strategy="halving"``): at rung 0 every configuration
is measured briefly (``brief_ms`` of launches, one round, no steady warm-up); the fastest
``1/eta`` of each rung go on to the next, measured ``eta`` times longer; once ``eta`` or fewer
remain they are measured with the sweep's full rounds (and its baselines), and the best is the
fastest of those. On a GPU with tilelab's own steps (and ``rank_by="median"``) every rung after
the first times each of its configurations side by side with the fastest of the rung before
(``bench(kernel, baseline=leader)``), and their ratios to it rank them and make the cut: measured
one after another, their medians would read a clock that moves by several percent between calls
(a power-capped GPU boosts after an idle moment, and rung 0's rows come as their compiles finish,
with idle moments between), so a configuration timed at a lucky moment would push out one faster
than it. The clock cancels in a ratio, so those rounds skip the warm-up to a steady clock
(:func:`side_by_side_bench_kwargs` for the last rung's full rounds). The leader is one of each
rung's configurations (the fastest of the rung before go on) and is not timed beside itself: its
ratio is 1 by definition, and its median is its median in the others' windows (as the final round
of a sweep over several devices does with its leader, :class:`~._final.FinalRound`). A rung is the ordinary grid sweep
of its survivors (this process, the host's GPUs or a Dask cluster alike), except that nothing is
compiled twice: each configuration is compiled in the first rung that measures it, and later
rungs (and the leader each later rung is timed beside) take the artifact that compile made
(:class:`~._orchestrator.CompiledConfigs`). Every row says in which rung it was last measured and
how (``rung``, ``measured_as``), and a row cut early says why (``cut``). ``time_budget_s`` starts
no rung after that many seconds: the best then comes from the last rung measured, and a note says
so.

Where the rungs compile: a sweep over devices (``devices=``/``client=``) compiles in its pool of
processes (or on the cluster), and so does a halving sweep on this process's GPU with tilelab's own
compile and bench steps (as ``devices=[the current GPU]``, measuring everything anew): lowering and
nvcc are CPU work, and part of TileLang's lowering runs in Python under the GIL (two threads lower
1.3-1.6x as fast as one, not 2x), so threads of one process stop scaling long before 16 cores.
There pruning is part of each compile task (inspect, then compile what can launch, in the same
process), so no lowering runs in the caller before the first compile; elsewhere (the caller's
replaced compile step, the CPU) it runs in a pool of threads first. Either way a configuration is
lowered once: the inspection lowers it as the compile would (the compile's ``out_idx`` and pass
configs), and inside ``_tilelang.shared_lowerings()`` the compile takes that lowering instead of
running TileLang's pipeline again; later rungs load TileLang's cached kernel. The pool has a
process per compile task of rung 0, up to 1.5x the cores (:func:`~._pool.compile_pool_size`):
with one per core, the few tasks beyond the core count would start only once others finished,
one whole compile later.

Over several devices only the last rung has a final round (brief rungs rank by median and cut by
``1/eta``); its ratios rank the best, as in a grid sweep (:func:`mark_best`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...records.launch import SweepRow, SweepTable
from ._plan import Config, SweepOptions, mark_best, short_error, side_by_side_kwargs, size_key, size_text
from ._search import combine_tables, config_key, on_this_gpu, run_grid, space_order

if TYPE_CHECKING:
    from ._tasks import Compiled




def prune(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
          opts: SweepOptions) -> tuple[dict[tuple, list[Config]], list[SweepRow], list[str]]:
    """(the configurations kept at each size, the pruned rows, notes): see the module doc."""
    target = opts.target

    def why_not(size: Config, config: Config) -> str | None:
        try:
            kernel = factory(**size, **config)
        except Exception as err:  # the factory's own failure: the grid would fail to compile it too
            return f"building it raised {short_error(err)}"
        try:
            # lowered as the compile will lower it (its out_idx), so that the compile takes this
            # lowering inside shared_lowerings() instead of lowering again
            return why_not_launchable(kernel, target, out_idx=opts.out_idx)
        except Exception as err:
            return f"inspecting it raised {short_error(err)}"

    # Each inspection lowers the configuration (seconds each): in a pool of threads, as the
    # compiles are, so that pruning 64 configurations does not cost 64 lowerings one after another.
    pairs = [(size, config) for size in sizes for config in configs]
    with ThreadPoolExecutor(max_workers=max(1, min(len(pairs), opts.workers or os.cpu_count() or 1))) as pool:
        reasons = list(pool.map(lambda pair: why_not(*pair), pairs))
    kept: dict[tuple, list[Config]] = {size_key(size): [] for size in sizes}
    rows: list[SweepRow] = []
    for (size, config), why in zip(pairs, reasons):
        if why is None:
            kept[size_key(size)].append(config)
        else:
            rows.append(SweepRow(tuple(config.items()), size_key(size), error=why, stage="pruned"))
    notes = []
    if rows:
        notes.append(f"{len(rows)} configuration(s) pruned before compiling (inspected for "
                     f"{target or 'the local GPU, or sm_90a'}): they could not launch or TileLang cannot lower them")
    return kept, rows, notes


class Pruned(Exception):
    """A compile task's configuration cannot launch (or TileLang cannot lower it): not compiled."""


def why_not_launchable(kernel: Any, target: Any, *, out_idx: Any = None,
                       pass_configs: dict[str, Any] | None = None) -> str | None:
    """Why ``kernel`` (a ``T.prim_func``) would fail to launch on ``target``, from its inspection
    (TileLang's lowering, no nvcc, no GPU), or None when nothing stops it. ``out_idx`` and
    ``pass_configs`` are the compile's, so that its lowering is the one the compile would make."""
    from ...engine.inspect import inspect
    from ...records.errors import LoweringError

    try:
        # no launcher: the limits come from the kernel, not from how it is launched
        report = inspect(kernel, target, backends=(), out_idx=out_idx, pass_configs=pass_configs or None)
    except LoweringError as err:
        cause = f"[{err.cause}] " if err.cause else ""
        return f"TileLang cannot lower it: {cause}{err.summary}"[:400]
    limits = [n for n in report.notes if "a launch would fail" in n
              or ("threads per block" in n and "allows" in n)]
    return limits[0] if limits else None


def prune_then_compile(ir_text: str, target: Any, step: Callable[[], Any], out_idx: Any = None,
                       pass_configs: dict[str, Any] | None = None) -> Any:
    """A compile task that inspects first: raises :class:`Pruned` with the reason, or compiles,
    taking the inspection's lowering (one lowering per configuration)."""
    from ... import _tilelang

    with _tilelang.shared_lowerings():
        why = why_not_launchable(_tilelang.kernel_ir_from_text(ir_text), target, out_idx=out_idx,
                                 pass_configs=pass_configs)
        if why is not None:
            raise Pruned(why)
        return step()


def pruning_compile_fn(make_step: Callable[..., Callable[[], Any]], target: Any
                       ) -> Callable[..., Callable[[], Any]]:
    """``make_step`` (a sweep's compile_fn) whose steps inspect their configuration first."""
    from ... import _tilelang
    from ._tasks import compile_artifact

    def compile_fn(factory: Callable[..., Any], size: Config, config: Config) -> Callable[[], Any]:
        step = make_step(factory, size, config)
        if isinstance(step, functools.partial) and step.func is compile_artifact:
            recipe = step.args[0]  # the recipe elaborated it already: inspect it as it compiles
            return functools.partial(prune_then_compile, recipe.ir_text, target, step, recipe.out_idx,
                                     recipe.pass_configs)
        source = _tilelang.resolve_kernel(factory(**size, **config))
        return functools.partial(prune_then_compile, _tilelang.kernel_ir_to_text(source.prim_func), target, step)

    return compile_fn


def _pruned_in_task(row: SweepRow) -> SweepRow:
    """A compile failure raised by :class:`Pruned` -> a row of stage "pruned" with the reason (not
    measured in any rung, as a row pruned before the sweep)."""
    prefix = "Pruned: "
    if row.stage == "compile" and row.error and row.error.startswith(prefix):
        return dataclasses.replace(row, stage="pruned", error=row.error[len(prefix):], rung=None, measured_as="")
    return row


def _pool_target(opts: SweepOptions) -> Any:
    """The target pruning inspects for in a compile task: the sweep's, the local GPU's, or sm_90a."""
    if opts.target is not None:
        return opts.target
    from ... import _tilelang

    return _tilelang.local_gpu_arch() or "sm_90a"


def pruned_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                 opts: SweepOptions) -> SweepTable:
    """A grid sweep of what :func:`prune` keeps, with the pruned rows in the table; each compile in
    this process takes its configuration's lowering from the pruning (one lowering each)."""
    from ... import _tilelang

    with _tilelang.shared_lowerings():
        return _pruned_sweep(factory, configs, sizes, opts)


def _pruned_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                  opts: SweepOptions) -> SweepTable:
    kept, rows, notes = prune(factory, configs, sizes, opts)
    tables = []
    for size in sizes:
        alive = kept[size_key(size)]
        if alive:
            table = run_grid(factory, alive, size, opts)
            tables.append(table)
            rows += list(table.rows)
            notes += [n for n in table.notes if n not in notes]
    return combine_tables(tables, space_order(rows, configs, sizes), notes, getattr(factory, "__name__", "kernel"),
                          opts.mode)


def rung_bench_kwargs(opts: SweepOptions, rung: int) -> dict[str, Any]:
    """The bench keywords of a brief rung: ``brief_ms * eta**rung`` of launches, one round, no
    steady warm-up (the full rounds of the last rung use the sweep's own ``bench_kwargs``)."""
    return {**(opts.bench_kwargs or {}), "rep_ms": opts.brief_ms * opts.eta ** rung, "ci_target": None,
            "steady": False}


def side_by_side_bench_kwargs(opts: SweepOptions, baseline: Any) -> dict[str, Any]:
    """The bench keywords of a last rung timed side by side with ``baseline`` (the leader): the
    sweep's own ``bench_kwargs`` and full rounds, no warm-up to a steady clock first
    (:func:`~._plan.side_by_side_kwargs`)."""
    return {**side_by_side_kwargs(opts.bench_kwargs or {}), "baseline": baseline}


def _measured_as(opts: SweepOptions, rung: int, final: bool) -> str:
    if final:
        return f"rung {rung}: full rounds ({opts.mode})"
    return f"rung {rung}: {opts.brief_ms * opts.eta ** rung:g} ms of launches, one round"


LEADER = "the leader of the rung before"


def _side_by_side(opts: SweepOptions, pooled: bool) -> bool:
    """Whether rungs after the first time each configuration side by side with the rung before's
    leader: on a GPU, with tilelab's own compile and bench steps, ranked by median (a ratio to a
    baseline the user chose ranks the last rung otherwise), in sustained mode (where a side-by-side
    ratio is defined)."""
    return (pooled and opts.client is None and opts.bench_fn is None and opts.compile_fn is None
            and opts.rank_by == "median" and opts.bench_options().get("mode") == "sustained"
            and not (isinstance(opts.target, str) and opts.target == "c"))


def _leader_kernel(factory: Callable[..., Any], size: Config, config: Config, opts: SweepOptions,
                   compiled: Compiled | None = None) -> Any:
    """The leader's kernel: loaded from the artifact its rung compiled (``compiled``, a compile
    task's outcome: nothing compiles again), else compiled here (TileLang's cache has it)."""
    from ... import _tilelang
    from ._tasks import KernelArtifact, default_compile, load_artifact

    if compiled is not None and isinstance(compiled.artifact, KernelArtifact):
        return load_artifact(compiled.artifact)
    target = opts.target if opts.target is not None else _tilelang.local_gpu_arch()
    return default_compile(factory, size, config, backend=opts.backend, out_idx=opts.out_idx, target=target)()


REFERENCE = "the reference of the last rung: ratio 1 by definition"


def _as_reference(rows: list[SweepRow], measured: list[SweepRow], size: tuple, leader: Config,
                  rung: int) -> tuple[list[SweepRow], list[str]]:
    """``rows`` with the leader's row as the last rung's reference, and the notes to add. The
    other finalists were timed side by side with it (``measured``); the leader itself is not timed
    against itself: its ratio to itself is 1 by definition, and its median is its median in their
    windows (:func:`~._plan.reference_median`; its rates follow from it). Where no window timed it
    (every other finalist failed) it keeps its median of the rung before, and is the best there."""
    from ._plan import reference_median

    at = next((i for i, r in enumerate(rows) if r.label is None and r.size == size
               and config_key(r.config) == config_key(leader)), None)
    if at is None:
        return rows, []
    row = rows[at]
    windows = [r for r in measured if r.ok and r.label is None and r.baseline_ms is not None]
    median = reference_median(windows)
    name = ", ".join(f"{k}={v}" for k, v in leader.items())
    if median is None:
        rows = list(rows)
        rows[at] = dataclasses.replace(row, rung=rung, ratio=1.0, ratio_ci=None, baseline_ms=None, cut=None,
                                       best=False, measured_as=f"rung {rung}: {REFERENCE} (its median from rung "
                                                               f"{rung - 1}: no other finalist was timed beside it)")
        return rows, [f"at size {size_text(size)}: no other configuration of rung {rung} was timed beside the leader "
                      f"of rung {rung - 1} ({name}): it is the best, with its median of rung {rung - 1}"]

    def scaled(rate: float | None) -> float | None:  # a rate is work over the median
        return rate * row.median_ms / median if rate is not None and row.median_ms else None

    rows = list(rows)
    rows[at] = dataclasses.replace(
        row, rung=rung, measured_as=f"rung {rung}: {REFERENCE} (its median in the {len(windows)} other finalists' "
                                    "windows)",
        median_ms=median, min_ms=None, spread=None, tflops=scaled(row.tflops), gbps=scaled(row.gbps),
        ratio=1.0, ratio_ci=None, baseline_ms=None, bench_s=None, sm_mhz=None,
        throttled=any(r.throttled for r in windows), cut=None, best=False, device=windows[0].device)
    return rows, []


def _cut(row: SweepRow, fastest: SweepRow, rung: int, by_ratio: bool) -> str:
    """Why ``row`` goes no further than ``rung``: how far behind the fastest of that rung it was."""
    if by_ratio:
        return (f"cut after rung {rung}: ratio {row.ratio:.3f} to the leader of rung {rung - 1}, timed beside it "
                f"(the fastest of that rung: {fastest.ratio:.3f})")
    return (f"cut after rung {rung}: {(row.median_ms or 0) / (fastest.median_ms or 1):.3f}x the fastest of that rung "
            f"({row.median_ms or 0:.4f} vs {fastest.median_ms or 0:.4f} ms)")


def halving_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                  opts: SweepOptions) -> SweepTable:
    """Successive halving over ``configs`` at each size (see the module doc). A configuration is
    lowered once: its compile in this process takes the pruning's lowering, and later rungs load
    TileLang's cached kernel."""
    from ... import _tilelang

    with _tilelang.shared_lowerings():
        return _halving_sweep(factory, configs, sizes, opts)


def _pruned_first(factory: Callable[..., Any], configs: list[Config], sizes: list[Config], opts: SweepOptions,
                  pooled: bool) -> tuple[SweepOptions, dict[Any, list[Config]], list[SweepRow], list[str]]:
    """Rung 0's options, the configurations each size keeps, the pruned rows and their notes:
    pruned here before the sweep, or (a sweep in processes) by each compile task, or not at all."""
    if opts.prune is not False and pooled:  # each compile task inspects its configuration first
        from ... import _tilelang
        from ._tasks import default_compile_step

        # for the GPU's arch by name, as the sweep over devices compiles its later rungs (TileLang's
        # cache answers them), and so that no compile process opens a CUDA context to find it
        arch = opts.target if opts.target is not None else _tilelang.local_gpu_arch()
        make_step = opts.compile_fn or (lambda f, s, c: default_compile_step(
            f, s, c, backend=opts.backend, out_idx=opts.out_idx, target=arch))
        rung0_opts = dataclasses.replace(opts, compile_fn=pruning_compile_fn(make_step, _pool_target(opts)))
        return rung0_opts, {size_key(s): list(configs) for s in sizes}, [], []
    if opts.prune is not False:
        return (opts, *prune(factory, configs, sizes, opts))
    return opts, {size_key(s): list(configs) for s in sizes}, [], []


def _mark_best_of_size(rows: list[SweepRow], size: Config) -> None:
    """Mark the best of ``size``'s rows in place, among the last rung's uncut ones: as a grid ranks
    its rows, by the final round's ratios (a sweep over several devices), by the ratio each row was
    timed beside (rank_by="ratio", or the rung before's leader), else by median."""
    last = max((r.rung for r in rows if r.size == size_key(size) and r.rung is not None and r.label is None
                and r.ok), default=None)
    contenders = [i for i, r in enumerate(rows) if r.size == size_key(size) and r.label is None and r.ok
                  and r.rung == last and r.cut is None]
    if contenders:
        marked = mark_best([rows[i] for i in contenders])
        for i, row in zip(contenders, marked):
            rows[i] = row


def _halving_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                   opts: SweepOptions) -> SweepTable:
    # Not split further: each rung reads and updates the same state (the rows, the live
    # configurations, the leader, the notes and counts); pieces would pass most of it back and forth.
    started = time.monotonic()
    gpu = on_this_gpu(opts)
    if gpu is not None:  # compile in processes, as a sweep over this one GPU, measuring anew
        opts = dataclasses.replace(opts, devices=[gpu], force=True)
    pooled = opts.devices is not None or opts.client is not None
    rung0_opts, kept, pruned_rows, notes = _pruned_first(factory, configs, sizes, opts, pooled)
    rows: list[SweepRow] = list(pruned_rows)
    tables: list[SweepTable] = []
    # each configuration is compiled once, in the first rung that measures it: later rungs (and the
    # leader the last rung is timed beside) take the artifact that compile made
    from ._orchestrator import CompiledConfigs

    compiled = CompiledConfigs()
    pruned_in_tasks = 0
    leader_label: str | None = None
    for size in sizes:
        alive = kept[size_key(size)]
        leader: Config | None = None  # the fastest of the rung before
        rung = 0
        counts: list[str] = []
        stopped = False
        while alive:
            final = len(alive) <= opts.eta
            if rung > 0 and opts.time_budget_s is not None and time.monotonic() - started > opts.time_budget_s:
                notes.append(f"at size {size_text(size_key(size))}: the time budget of {opts.time_budget_s:g} s was "
                             f"spent before rung {rung}; the best is the fastest of rung {rung - 1}, measured "
                             f"briefly ({_measured_as(opts, rung - 1, False)})")
                stopped = True
                break
            # rung 0 ranks by median, without baselines; the last rung keeps the sweep's own
            # baselines and ranking (rank_by="ratio": each row timed beside the first baseline)
            base = rung0_opts if rung == 0 else opts
            rung_kwargs = opts.bench_kwargs if final else rung_bench_kwargs(opts, rung)
            beside: Config | None = None  # the rung's reference: the leader, not timed against itself
            if leader is not None and len(alive) > 1 and _side_by_side(opts, pooled):
                # Rung 0's configurations were timed one after another, while others compiled, and a
                # power-capped GPU's clock moves by several percent between calls (boosting after an
                # idle moment): from rung 1 on each is timed beside the same kernel (the rung
                # before's leader), batches alternating in one window, and their ratios to it rank
                # them, the brief rungs' cut included.
                try:
                    kernel = _leader_kernel(factory, size, leader, opts, compiled.get(size_key(size), leader))
                    rung_kwargs = (side_by_side_bench_kwargs(opts, kernel) if final
                                   else {**(rung_kwargs or {}), "baseline": kernel})
                    beside = leader
                    leader_label = LEADER
                    text = (f"at size {size_text(size_key(size))}: rungs 1 and on timed each other configuration "
                            "side by side with the fastest of the rung before, batches alternating in one window, and "
                            "ranked (and cut) by the ratio to it (the leader's own ratio is 1 by definition: it is "
                            "not timed against itself)")
                    if text not in notes:
                        notes.append(text)
                except Exception as err:  # ranked by median, as without it
                    notes.append(f"rung {rung} is ranked by median: the leader of rung {rung - 1} did not compile "
                                 f"again here ({short_error(err)})")
            # a brief rung ranks by median and cuts by 1/eta: no final round on one device for it
            step = dataclasses.replace(
                base, baseline=opts.baseline if final else None, rank_by=opts.rank_by if final else "median",
                bench_kwargs=rung_kwargs, finalists=opts.finalists if final else 0)
            timed = [c for c in alive if beside is None or config_key(c) != config_key(beside)]
            t0 = time.monotonic()
            table = run_grid(factory, timed, size, step, compiled)
            seconds = time.monotonic() - t0
            tables.append(table)
            # the row's compile time is its first compile's (later rungs take its artifact)
            first_compile = {(r.size, config_key(r.config)): r.compile_s for r in rows if r.label is None}
            how = _measured_as(opts, rung, final).split(": ", 1)[1]
            if beside is not None:
                how += f", side by side with the leader of rung {rung - 1}"
                if final and not (rung_kwargs or {}).get("steady", True):
                    how += " (no warm-up to a steady clock: it cancels in the ratio)"
            measured = [_pruned_in_task(dataclasses.replace(
                r, rung=rung, measured_as=f"rung {rung}: {how}" if r.label is None else _measured_as(opts, rung, final),
                best=False, compile_s=first_compile.get((r.size, config_key(r.config))) or r.compile_s))
                for r in table.rows]
            gone = [r for r in measured if r.stage == "pruned"]
            pruned_in_tasks += len(gone)
            brief = _measured_as(opts, rung, final).split(": ", 1)[1]
            counts.append(f"rung {rung}: {len(timed) - len(gone)} ({'full rounds' if final else brief}"
                          + (f", each beside the leader of rung {rung - 1}, which is not timed again"
                             if beside is not None else "")
                          + f"; {seconds:.1f} s"
                          + (f", {len(gone)} pruned in their compile tasks" if gone else "") + ")")
            notes += [n for n in table.notes if n not in notes]
            # a configuration measured again replaces its row of the rung before
            again = {(r.size, config_key(r.config)) for r in measured if r.label is None}
            rows = [r for r in rows if r.label is not None or (r.size, config_key(r.config)) not in again]
            if final:
                if beside is not None:  # the leader's row: ratio 1, its median in the others' windows
                    rows, said = _as_reference(rows, measured, size_key(size), beside, rung)
                    notes += [n for n in said if n not in notes]
                rows += measured
                break
            reference: list[SweepRow] = []
            if beside is not None:  # the leader's row: ratio 1, its median in the others' windows
                rows, said = _as_reference(rows, measured, size_key(size), beside, rung)
                notes += [n for n in said if n not in notes]
                reference = [r for r in rows if r.label is None and r.size == size_key(size)
                             and config_key(r.config) == config_key(beside)]
            ok = [r for r in measured + reference if r.ok and r.label is None]
            # by the ratio to the leader where every one has it (a custom bench step may not say)
            by_ratio = beside is not None and all(r.ratio is not None for r in ok)
            ok.sort(key=lambda r: (r.ratio if by_ratio else r.median_ms) or 0.0)
            keep = ok[:max(1, math.ceil(len(ok) / opts.eta))]
            survivors = {config_key(r.config) for r in keep}
            for r in measured + reference:
                if r.ok and r.label is None and config_key(r.config) not in survivors and ok:
                    r = dataclasses.replace(r, cut=_cut(r, ok[0], rung, by_ratio))
                if r in reference:
                    rows[rows.index(reference[0])] = r
                else:
                    rows.append(r)
            alive = [c for c in alive if config_key(c) in survivors]
            leader = dict(ok[0].config) if ok else None
            compiled.retain(size_key(size), alive)  # (the leader is one of them)
            rung += 1
        _mark_best_of_size(rows, size)
        if counts:
            notes.append(f"successive halving at size {size_text(size_key(size))} (eta={opts.eta}): "
                         + ", ".join(counts) + ("; stopped by the time budget" if stopped else ""))
    if pruned_in_tasks:
        notes.append(f"{pruned_in_tasks} configuration(s) pruned before compiling (each inspected in its compile task, "
                     f"for {_pool_target(opts)}): they could not launch or TileLang cannot lower them")
    if gpu is not None:
        notes.append(f"compiled in a pool of processes, measured on cuda:{gpu} (as devices=[{gpu}], force=True)")
    return combine_tables(tables, space_order(rows, configs, sizes), notes, getattr(factory, "__name__", "kernel"),
                          opts.mode, leader_label)
