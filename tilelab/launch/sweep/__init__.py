"""``tilelab.sweep``: compile configurations in parallel, benchmark each, tabulate.

One package, one room per concern:

* ``_plan``: the options (:class:`SweepOptions`), configurations and sizes, one ``Job`` per row,
  and the best row at each size (:func:`mark_best`);
* ``_tasks``: the compile task and the one row step (check against ``ref``, the work, ``bench_fn``,
  a lost CUDA context), here or wherever a runner sends it;
* ``_runners``: where tasks run: this process (compiles in threads, rows one at a time), this
  host's GPUs (a pool of compile processes, a bench thread per GPU) or a Dask cluster;
* ``_orchestrator``: the one course of a sweep, for every runner: jobs, row cache, compile tasks,
  row steps, baselines, final round, table;
* ``_rowcache``: finished rows on disk; ``_final``: the final round on one device; ``_show``: the
  progress bars and the live table; ``_halving``: pruning and successive halving, rungs of grid
  sweeps run by the same course; ``_sampled``: the search Optuna's sampler steers, batches of grid
  sweeps run by the same course; ``_search``: what those two share (one grid sweep of part of the
  space, the table of several).

Every configuration that fails (to elaborate, compile, verify or launch) is a row with its error.
The compile and bench steps can be replaced (``compile_fn``/``bench_fn``): the tests use a fake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...records.launch import SweepTable
from ._plan import Config, Space, SweepOptions, expand, mark_best


def sweep(factory: Callable[..., Any], params: Space = None, sizes: Space = None, *,
          options: SweepOptions | None = None, **keywords: Any) -> SweepTable:
    """Benchmark every configuration of ``factory`` at every size; mark the best per size.

    ``factory(**size, **config)`` returns a TileLang kernel (``examples/gemm.py:matmul``).
    ``params``/``sizes``: a dict of lists (cartesian product) or a list of dicts. The options are
    the fields of :class:`SweepOptions`, as keywords or one ``options=`` record:
    ``flops`` and ``bytes`` are callables of the size's keywords (counted from the signature
    when omitted); ``ref`` checks each configuration with :func:`tilelab.run` before it is timed;
    ``baseline`` maps a label to ``f(**size) -> zero-argument callable`` timed on the same terms
    (``{"torch.matmul": lambda M, N, K: ...}``), rated with the kernels' counted FLOPs and bytes at
    that size unless ``flops``/``bytes`` say otherwise. ``mode`` and ``bench_kwargs`` go to
    :func:`tilelab.bench`; ``workers`` how many compiles run at once (threads in this process;
    processes with ``devices=``, where by default each compile task gets one, up to 1.5x the
    cores); ``backend``/``out_idx`` to the compile; ``compile_fn``/``bench_fn``/``check_fn``
    replace the compile, bench and check steps.

    ``devices="all"`` (or a list of GPU indices) compiles in a pool of processes and benchmarks
    on every listed GPU at once, one configuration per GPU; ``client=`` (a
    ``dask.distributed.Client``) does the same on a Dask cluster (see
    :mod:`tilelab.launch.sweep._runners`). Those sweeps show one progress bar and, in a notebook, the
    table growing as rows finish; each row says where it ran and how long its compile and bench
    took; finished rows are cached on disk, so an interrupted sweep resumes when called again
    (``force=True`` measures everything again). Two GPUs of one model can differ by about 1%, as
    much as close configurations do, so after such a sweep the ``finalists`` (default 3) fastest
    configurations at each size are ranked on one device (the first of ``devices``, or the first
    GPU worker of the cluster; with ``rank_by="ratio"`` the one that measured the most finalists,
    whose ratios stand), each timed there side by side with one common reference (the ratio
    baseline with ``rank_by="ratio"``, else the size's leader): their ``final_ratio`` decides the
    best (see :class:`tilelab.launch.sweep._final.FinalRound`).

    Progress bars follow the compiles and then the benchmarks. A check that fails (or raises) is
    a row of stage "check". Checks and benchmarks run in tilelab's worker process
    (``isolate=True``, the default), each within ``timeout`` seconds (see :func:`tilelab.bench`):
    a configuration that hangs or crashes is a failed row with its reason, and the sweep goes on
    with a fresh worker. With ``isolate=False`` a sticky CUDA error
    (``KernelLaunchError.sticky``) leaves this process's context unusable: the sweep stops there,
    and every row after it is "not run", with a note naming the configuration that caused it.
    Interrupting (the stop button, Ctrl-C) keeps the rows measured so far: the rest are "not run".

    ``target="c"`` compiles every configuration for the CPU and times it there (wall clock);
    ``backend`` defaults to tvm_ffi (cython for the CPU).

    ``strategy="halving"`` searches by successive halving: every configuration is measured
    briefly (``brief_ms`` of launches, one round, no steady warm-up), the fastest ``1/eta`` of them
    again ``eta`` times longer, and so on, until the last few are measured with full rounds; each
    row says in which rung it was last measured, how, and why it was cut. ``time_budget_s`` starts
    no rung after that many seconds (the best then comes from the last rung measured, and a note
    says so). ``prune`` (on by default with halving) inspects each configuration before it is
    compiled and leaves out, as rows of stage "pruned" with the reason, those whose launch would
    fail (more shared memory or threads per block than the target allows) or that TileLang cannot
    lower (with the doctor's cause).

    ``strategy="optuna"`` (``pip install tilelab[optuna]``) measures only the configurations
    Optuna's sampler proposes (TPE by default, seeded by ``seed``; or any Optuna ``sampler=``), in
    batches compiled together, each with full rounds, until ``n_trials`` are measured or
    ``time_budget_s`` has passed: for spaces too large to compile whole. The table holds the
    measured configurations, each saying which trial measured it.

    ``rank_by="ratio"`` times every configuration beside the first ``baseline`` (made at the row's
    size; a zero-argument callable, a function of the kernel's inputs such as ``torch.matmul``, or
    a TileLang kernel of the same signature) with ``bench(kernel, baseline=...)``: batches of the
    two alternate in one window, so each row's ratio to the baseline (``row.ratio``, ``row.ratio_ci``)
    does not move with the GPU's clock between rows, and the lowest ratio is the best. With
    ``strategy="halving"`` the brief rungs rank by median and the last rung by ratio.
    """
    # Long by its docstring (the reference of every option); the body is under 20 lines.
    opts = SweepOptions.merge(options, keywords)
    if opts.strategy == "halving":
        from ._halving import halving_sweep

        return halving_sweep(factory, expand(params), expand(sizes), opts)
    if opts.strategy == "optuna":
        from ._sampled import sampled_sweep

        return sampled_sweep(factory, expand(params), expand(sizes), opts)
    if opts.prune:
        from ._halving import pruned_sweep

        return pruned_sweep(factory, expand(params), expand(sizes), opts)
    from ._orchestrator import grid_sweep

    return grid_sweep(factory, expand(params), expand(sizes), opts)


def shutdown_compile_pools() -> None:
    """Stop the compile processes that ``sweep(..., devices=...)`` keeps for the next sweep (each
    holds TileLang and torch in memory); the next such sweep starts new ones."""
    from ._pool import shutdown_compile_pools as stop

    stop()


__all__ = ["Config", "Space", "SweepOptions", "expand", "mark_best", "shutdown_compile_pools", "sweep"]
