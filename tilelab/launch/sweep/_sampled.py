"""A sampled search (``strategy="optuna"``): Optuna's sampler proposes the configurations worth
measuring, for spaces too large to compile whole (successive halving compiles every one).

Each parameter of the space is one of Optuna's categorical distributions over the values the
space lists (by index: a value may be anything a kernel factory takes). The sampler (Optuna's
TPE by default, seeded by ``seed``; or the ``sampler=`` the caller passes, any of Optuna's) asks
for a batch of trials; tilelab measures them as a grid sweep measures its rows (compiled together
in the compile pool, each timed with the sweep's full rounds, beside the baseline with
``rank_by="ratio"``) and tells each trial its result: the row's ratio to the baseline where it
has one, else its median; a configuration that fails (compile, check, launch) is a failed trial.
The next batch follows, until ``n_trials`` configurations are measured, every configuration of
the space is, or ``time_budget_s`` has passed (no batch starts after it). A configuration the
sampler proposes again is not measured again: its trial is told the first result. A combination
outside the space (a space listed configuration by configuration rather than as a product) is
a failed trial, not measured, and counts towards the proposals, not the measurements.

The first batch is the sampler's random start-up (TPE's model learns from it), every later one
as large as the compile pool is wide: compiling is the slow part, and a batch compiles at once.
The table holds the measured configurations only: each row says which trial measured it; a note
says how many of the space's configurations were measured and by which sampler. Over several
devices (``devices=``, ``client=``) the batches have no final round of their own: one final round
over every batch's rows ends each size (:func:`~._orchestrator.final_round_of`), so that every
final figure there is timed on one device beside one reference. Optuna is an optional extra:
``pip install tilelab[optuna]``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

from ...records.launch import SweepRow, SweepTable
from ._plan import Config, SweepOptions, mark_best, size_key, size_text
from ._search import combine_tables, config_key, on_this_gpu, run_grid, space_order

OPTUNA_MISSING = ("sweep(strategy=\"optuna\") needs Optuna, which is not installed: pip install tilelab[optuna] "
                  "(or pip install optuna), or search with strategy=\"halving\"")


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as err:
        from ...records.errors import OptionError

        raise OptionError(OPTUNA_MISSING) from err
    return optuna


class Space:
    """The space as Optuna's distributions: each parameter's values in the order they came."""

    def __init__(self, configs: list[Config]) -> None:
        self.configs = configs
        self.names: list[str] = []
        self.values: dict[str, list[Any]] = {}
        for config in configs:
            for name, value in config.items():
                if name not in self.values:
                    self.names.append(name)
                    self.values[name] = []
                if all(repr(v) != repr(value) for v in self.values[name]):
                    self.values[name].append(value)
        self.known = {config_key(c): c for c in configs}

    def distributions(self, optuna: Any) -> dict[str, Any]:
        return {n: optuna.distributions.CategoricalDistribution(list(range(len(self.values[n])))) for n in self.names}

    def config(self, params: dict[str, int]) -> Config | None:
        """The configuration a trial's parameters (value indices) name, None outside the space."""
        proposed = {n: self.values[n][params[n]] for n in self.names}
        return self.known.get(config_key(proposed))


def batch_size(first: bool, cpus: int | None = None, startup: int = 10) -> int:
    """Trials per batch: the first is the sampler's random start-up (what its model learns from
    first), every later one as many as compile at once (1.5x the cores, the compile pool's width)."""
    if first:
        return max(1, startup)
    return math.ceil(1.5 * max(1, cpus if cpus is not None else (os.cpu_count() or 1)))


def objective(row: SweepRow) -> float | None:
    """What a trial is told: the row's ratio to its baseline where it has one, else its median."""
    if not row.ok:
        return None
    return row.ratio if row.ratio is not None else row.median_ms


def _ask_batch(optuna: Any, study: Any, space: Space, distributions: Any, told: dict[tuple, float | None],
               want: int) -> tuple[list[tuple[Any, Config]], int]:
    """Ask the sampler until the batch holds ``want`` new configurations (at most 20 proposals a
    place): proposals of measured ones are told at once, and the asking stops (the sampler may
    keep to what it knows best). The batch's (trial, configuration) pairs and the proposals made."""
    batch: list[tuple[Any, Config]] = []
    asked = 0
    while len(batch) < want and asked < 20 * want:
        trial = study.ask(distributions)
        asked += 1
        config = space.config(trial.params)
        if config is None:  # a combination the space does not list
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        key = config_key(config)
        if key in told or any(config_key(c) == key for _, c in batch):
            earlier = told.get(key)
            if earlier is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, earlier)
            continue
        batch.append((trial, config))
    return batch, asked


def sampled_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                  opts: SweepOptions) -> SweepTable:
    """See the module doc."""
    from ._orchestrator import CompiledConfigs

    optuna = _optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.monotonic()
    gpu = on_this_gpu(opts)
    if gpu is not None:  # compile in processes, as a sweep over this one GPU, measuring anew
        opts = dataclasses.replace(opts, devices=[gpu], force=True)
    space = Space(configs)
    # each batch is a grid sweep of its configurations (the search's own options set aside); over
    # several devices the batches have no final round of their own: one, over every batch's rows,
    # ends each size (a batch's leaders are not the size's, and ratios to a batch's leader would
    # not compare across batches)
    grid = dataclasses.replace(opts, strategy="grid", n_trials=None, sampler=None, seed=None, time_budget_s=None,
                               prune=False)
    final_later = opts.devices is not None or opts.client is not None
    batch_opts = dataclasses.replace(grid, finalists=0) if final_later else grid
    final_reference: str | None = None
    rows: list[SweepRow] = []
    tables: list[SweepTable] = []
    notes: list[str] = []
    compiled = CompiledConfigs()
    for size in sizes:
        sampler = opts.sampler if opts.sampler is not None else optuna.samplers.TPESampler(seed=opts.seed)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        distributions = space.distributions(optuna)
        told: dict[tuple, float | None] = {}  # configuration -> what its trial was told (None: failed)
        proposals, batches, stopped = 0, 0, False
        limit = min(opts.n_trials or len(configs), len(configs))
        startup = getattr(sampler, "_n_startup_trials", 10)
        while len(told) < limit:
            if opts.time_budget_s is not None and batches and time.monotonic() - started > opts.time_budget_s:
                stopped = True
                break
            want = min(batch_size(not batches, startup=startup), limit - len(told))
            batch, asked = _ask_batch(optuna, study, space, distributions, told, want)
            proposals += asked
            if not batch:
                break  # the sampler proposes only what was measured: nothing new to learn
            batches += 1
            table = run_grid(factory, [c for _, c in batch], size, batch_opts, compiled)
            tables.append(table)
            by_key = {config_key(dict(r.config)): r for r in table.rows if r.label is None}
            for trial, config in batch:
                row = by_key.get(config_key(config))
                value = objective(row) if row is not None else None
                told[config_key(config)] = value
                if value is None:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                else:
                    study.tell(trial, value)
                if row is not None:
                    rows.append(dataclasses.replace(row, rung=None, best=False,
                                                    measured_as=f"trial {trial.number} of {type(sampler).__name__}: "
                                                                f"full rounds ({opts.mode})"))
            rows += [r for r in table.rows if r.label is not None]
            notes += [n for n in table.notes if n not in notes]
        at = [i for i, r in enumerate(rows) if r.size == size_key(size) and r.label is None]
        if final_later and at:
            from ._orchestrator import final_round_of

            finals, said, reference = final_round_of(factory, [rows[i] for i in at], size, grid, compiled)
            for i, row in zip(at, finals):
                rows[i] = row
            notes += [n for n in said if n not in notes]
            final_reference = reference or final_reference
        ranked = [r for r in (rows[i] for i in at) if r.ok]
        if ranked:
            marked = {config_key(dict(r.config)): r for r in mark_best(ranked)}
            for i in at:
                rows[i] = marked.get(config_key(dict(rows[i].config)), rows[i])
        notes.append(f"at size {size_text(size_key(size))}: {type(sampler).__name__} (Optuna) measured {len(told)} of "
                     f"the space's {len(configs)} configurations in {batches} batch(es) ({proposals} proposals; "
                     f"n_trials={opts.n_trials}); the best is the best of those measured, the others were not"
                     + ("; stopped by the time budget" if stopped else ""))
    if gpu is not None:
        notes.append(f"compiled in a pool of processes, measured on cuda:{gpu} (as devices=[{gpu}], force=True)")
    return combine_tables(tables, space_order(rows, configs, sizes), notes, getattr(factory, "__name__", "kernel"),
                          opts.mode, final_reference=final_reference)


__all__ = ["OPTUNA_MISSING", "Space", "batch_size", "objective", "sampled_sweep"]
