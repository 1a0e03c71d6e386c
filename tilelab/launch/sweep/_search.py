"""What the searches that run grid sweeps of part of a space share (successive halving, the
sampled search): the key of a configuration, whether to compile in processes for this process's
GPU, one grid sweep of some configurations at one size, and the table made of several."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...records.launch import SweepRow, SweepTable
from ._plan import Config, SweepOptions, expand, size_key

if TYPE_CHECKING:
    from ._orchestrator import CompiledConfigs


def config_key(config: Config | tuple) -> tuple:
    """A configuration (a dict, or a row's items) as a hashable key: names and their values' reprs."""
    items = config.items() if isinstance(config, dict) else config
    return tuple((k, repr(v)) for k, v in items)


def on_this_gpu(opts: SweepOptions) -> int | None:
    """The current GPU's index when a search (halving, sampled) should compile in processes as a
    sweep over that one device (this process's GPU, tilelab's own compile and bench steps), else None."""
    if (opts.devices is not None or opts.client is not None or opts.compile_fn is not None
            or opts.bench_fn is not None or opts.target is not None):
        return None
    try:
        import torch

        return int(torch.cuda.current_device()) if torch.cuda.is_available() else None
    except Exception:
        return None


def run_grid(factory: Callable[..., Any], configs: list[Config], size: Config, opts: SweepOptions,
             compiled: CompiledConfigs | None = None) -> SweepTable:
    """A grid sweep of ``configs`` at ``size``, as ``sweep(strategy="grid", prune=False)`` runs it;
    ``compiled``: what earlier rungs (or batches) compiled, not compiled again, and where this one
    keeps what it compiles."""
    grid = dataclasses.replace(opts, strategy="grid", prune=False, time_budget_s=None)
    from ._orchestrator import grid_sweep

    return grid_sweep(factory, expand(configs), [size], grid, compiled=compiled)


def combine_tables(tables: list[SweepTable], rows: list[SweepRow], notes: list[str], fallback_name: str,
                   mode: str, ratio_baseline: str | None = None, final_reference: str | None = None) -> SweepTable:
    """One table of the rows and notes of several grid sweeps (its kernel, mode, device and
    references from the first that has them, or as given)."""
    first = tables[0] if tables else None
    return SweepTable(kernel=first.kernel if first else fallback_name, rows=tuple(rows),
                      mode=first.mode if first else mode, device=first.device if first else "",
                      notes=tuple(notes), factory=first.factory if first else fallback_name,
                      ratio_baseline=ratio_baseline or next((t.ratio_baseline for t in tables if t.ratio_baseline),
                                                            None),
                      final_reference=final_reference or next((t.final_reference for t in tables
                                                               if t.final_reference), None))


def space_order(rows: list[SweepRow], configs: list[Config], sizes: list[Config]) -> list[SweepRow]:
    """Rows in the space's order (sizes outer, configurations inner), baselines after each size."""
    rank = {(size_key(s), config_key(c)): i * len(configs) + j
            for i, s in enumerate(sizes) for j, c in enumerate(configs)}
    size_rank = {size_key(s): i for i, s in enumerate(sizes)}

    def order(r: SweepRow) -> tuple:
        if r.label is not None:
            return (size_rank.get(r.size, 0), 1, 0)
        return (size_rank.get(r.size, 0), 0, rank.get((r.size, config_key(r.config)), 0))

    return sorted(rows, key=order)
