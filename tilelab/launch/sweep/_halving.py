"""Searching a sweep's space faster than a grid: pruning before compiling, and successive halving.

Pruning (:func:`prune`): each configuration is inspected (TileLang's lowering, no nvcc, no GPU)
before anything is compiled; a configuration whose launch would fail (more shared memory or
threads per block than the target allows: the inspector's limit notes) or that TileLang cannot
lower (with the doctor's cause) becomes a row of stage ``"pruned"`` with that reason.

Successive halving (:func:`halving_sweep`, ``strategy="halving"``): at rung 0 every configuration
is measured briefly (``brief_ms`` of launches, one round, no steady warm-up); the fastest
``1/eta`` of each rung go on to the next, measured ``eta`` times longer; once ``eta`` or fewer
remain they are measured with the sweep's full rounds (and its baselines), and the best is the
fastest of those. A rung is the ordinary grid sweep of its survivors (this process, the host's
GPUs or a Dask cluster alike), so the compile of a configuration is TileLang's cached one after
its first rung. Every row says in which rung it was last measured and how (``rung``,
``measured_as``), and a row cut early says why (``cut``). ``time_budget_s`` starts no rung after
that many seconds: the best then comes from the last rung measured, and a note says so.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from typing import Any

from ..models import SweepRow, SweepTable
from ._plan import Config, SweepOptions, expand, short_error, size_key, size_text


def _config_key(config: Config | tuple) -> tuple:
    items = config.items() if isinstance(config, dict) else config
    return tuple((k, repr(v)) for k, v in items)


def prune(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
          opts: SweepOptions) -> tuple[dict[tuple, list[Config]], list[SweepRow], list[str]]:
    """(the configurations kept at each size, the pruned rows, notes): see the module doc."""
    from ..._errors import LoweringError
    from ..._inspect import inspect

    target = opts.target

    def why_not(size: Config, config: Config) -> str | None:
        try:
            kernel = factory(**size, **config)
            report = inspect(kernel, target)
        except LoweringError as err:
            cause = f"[{err.cause}] " if err.cause else ""
            return f"TileLang cannot lower it: {cause}{err.summary}"[:400]
        except Exception as err:  # the factory's own failure: the grid would fail to compile it too
            return f"building it raised {short_error(err)}"
        limits = [n for n in report.notes if "a launch would fail" in n
                  or ("threads per block" in n and "allows" in n)]
        return limits[0] if limits else None

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


def _grid(factory: Callable[..., Any], configs: list[Config], size: Config, opts: SweepOptions) -> SweepTable:
    """A grid sweep of ``configs`` at ``size``, as ``sweep(strategy="grid", prune=False)`` runs it."""
    grid = dataclasses.replace(opts, strategy="grid", prune=False, time_budget_s=None)
    from ._orchestrator import grid_sweep

    return grid_sweep(factory, expand(configs), [size], grid)


def _combine(tables: list[SweepTable], rows: list[SweepRow], notes: list[str], fallback_name: str,
             mode: str) -> SweepTable:
    first = tables[0] if tables else None
    return SweepTable(kernel=first.kernel if first else fallback_name, rows=tuple(rows),
                      mode=first.mode if first else mode, device=first.device if first else "",
                      notes=tuple(notes), factory=first.factory if first else fallback_name,
                      ratio_baseline=next((t.ratio_baseline for t in tables if t.ratio_baseline), None))


def _ordered(rows: list[SweepRow], configs: list[Config], sizes: list[Config]) -> list[SweepRow]:
    """Rows in the space's order (sizes outer, configurations inner), baselines after each size."""
    rank = {(size_key(s), _config_key(c)): i * len(configs) + j
            for i, s in enumerate(sizes) for j, c in enumerate(configs)}
    size_rank = {size_key(s): i for i, s in enumerate(sizes)}

    def order(r: SweepRow) -> tuple:
        if r.label is not None:
            return (size_rank.get(r.size, 0), 1, 0)
        return (size_rank.get(r.size, 0), 0, rank.get((r.size, _config_key(r.config)), 0))

    return sorted(rows, key=order)


def pruned_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                 opts: SweepOptions) -> SweepTable:
    """A grid sweep of what :func:`prune` keeps, with the pruned rows in the table."""
    kept, rows, notes = prune(factory, configs, sizes, opts)
    tables = []
    for size in sizes:
        alive = kept[size_key(size)]
        if alive:
            table = _grid(factory, alive, size, opts)
            tables.append(table)
            rows += list(table.rows)
            notes += [n for n in table.notes if n not in notes]
    return _combine(tables, _ordered(rows, configs, sizes), notes, getattr(factory, "__name__", "kernel"), opts.mode)


def rung_bench_kwargs(opts: SweepOptions, rung: int) -> dict[str, Any]:
    """The bench keywords of a brief rung: ``brief_ms * eta**rung`` of launches, one round, no
    steady warm-up (the full rounds of the last rung use the sweep's own ``bench_kwargs``)."""
    return {**(opts.bench_kwargs or {}), "rep_ms": opts.brief_ms * opts.eta ** rung, "ci_target": None,
            "steady": False}


def _measured_as(opts: SweepOptions, rung: int, final: bool) -> str:
    if final:
        return f"rung {rung}: full rounds ({opts.mode})"
    return f"rung {rung}: {opts.brief_ms * opts.eta ** rung:g} ms of launches, one round"


def halving_sweep(factory: Callable[..., Any], configs: list[Config], sizes: list[Config],
                  opts: SweepOptions) -> SweepTable:
    """Successive halving over ``configs`` at each size (see the module doc)."""
    started = time.monotonic()
    prune_first = opts.prune is not False
    if prune_first:
        kept, pruned_rows, notes = prune(factory, configs, sizes, opts)
    else:
        kept, pruned_rows, notes = {size_key(s): list(configs) for s in sizes}, [], []
    rows: list[SweepRow] = list(pruned_rows)
    tables: list[SweepTable] = []
    for size in sizes:
        alive = kept[size_key(size)]
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
            # brief rungs rank by median, without baselines; the last rung keeps the sweep's own
            # baselines and ranking (rank_by="ratio": each row timed beside the first baseline)
            step = dataclasses.replace(
                opts, baseline=opts.baseline if final else None, rank_by=opts.rank_by if final else "median",
                bench_kwargs=opts.bench_kwargs if final else rung_bench_kwargs(opts, rung))
            table = _grid(factory, alive, size, step)
            tables.append(table)
            counts.append(f"rung {rung}: {len(alive)} ({'full rounds' if final else _measured_as(opts, rung, False).split(': ')[1]})")
            measured = [dataclasses.replace(r, rung=rung, measured_as=_measured_as(opts, rung, final), best=False)
                        for r in table.rows]
            notes += [n for n in table.notes if n not in notes]
            # a configuration measured again replaces its row of the rung before
            again = {(r.size, _config_key(r.config)) for r in measured if r.label is None}
            rows = [r for r in rows if r.label is not None or (r.size, _config_key(r.config)) not in again]
            if final:
                rows += measured
                break
            ok = sorted((r for r in measured if r.ok and r.label is None), key=lambda r: r.median_ms or 0.0)
            keep = ok[:max(1, math.ceil(len(ok) / opts.eta))]
            fastest = ok[0].median_ms if ok else None
            survivors = {_config_key(r.config) for r in keep}
            for r in measured:
                if r.ok and r.label is None and _config_key(r.config) not in survivors and fastest:
                    r = dataclasses.replace(r, cut=f"cut after rung {rung}: {r.median_ms / fastest:.3f}x the fastest "
                                                   f"of that rung ({r.median_ms:.4f} vs {fastest:.4f} ms)")
                rows.append(r)
            alive = [c for c in alive if _config_key(c) in survivors]
            rung += 1
        last = max((r.rung for r in rows if r.size == size_key(size) and r.rung is not None and r.label is None),
                   default=None)
        contenders = [i for i, r in enumerate(rows) if r.size == size_key(size) and r.label is None and r.ok
                      and r.rung == last and r.cut is None]
        if contenders:
            # the last rung's rows carry their ratio to the baseline when rank_by="ratio": it ranks them
            by_ratio = all(rows[i].ratio is not None for i in contenders)
            best = min(contenders, key=lambda i: (rows[i].ratio if by_ratio else rows[i].median_ms) or 0.0)
            rows[best] = dataclasses.replace(rows[best], best=True)
        if counts:
            notes.append(f"successive halving at size {size_text(size_key(size))} (eta={opts.eta}): "
                         + ", ".join(counts) + ("; stopped by the time budget" if stopped else ""))
    return _combine(tables, _ordered(rows, configs, sizes), notes, getattr(factory, "__name__", "kernel"), opts.mode)
