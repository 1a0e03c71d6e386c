"""What a sweep is asked to do: its options (:class:`SweepOptions`), the configurations and sizes
(:func:`expand`), one :class:`Job` per row, the keywords every benchmark gets, and which row is the
best at each size (:func:`mark_best`)."""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...records.launch import BenchResult, SweepRow

INTERRUPTED = "not run: the sweep was interrupted"  # a row the stop left unmeasured (never cached)

Config = dict[str, Any]
Space = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None


def expand(space: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None) -> list[Config]:
    """A dict of lists -> the cartesian product (in order); a list of dicts -> itself."""
    if space is None:
        return [{}]
    if isinstance(space, Mapping):
        keys = list(space)
        return [dict(zip(keys, values)) for values in itertools.product(*(list(space[k]) for k in keys))]
    return [dict(item) for item in space]


def short_error(err: BaseException) -> str:
    """"RuntimeError: the first line of its message" (at most 300 characters), for a row."""
    text = str(err).strip() or type(err).__name__
    first = text.splitlines()[0]
    return f"{type(err).__name__}: {first[:300]}"


@dataclass(frozen=True)
class SweepOptions:
    """How :func:`sweep` compiles, checks and times: every keyword of ``sweep`` after the two spaces.

    ``sweep(f, params, sizes, mode="graph", ref=ref)`` and
    ``sweep(f, params, sizes, options=SweepOptions(mode="graph", ref=ref))`` are the same call; a
    keyword given beside ``options`` replaces that field. See :func:`sweep` for each field.
    """

    mode: str = "sustained"
    flops: Callable[..., float] | None = None  # f(**size) -> FLOPs; counted from the signature when None
    bytes: Callable[..., float] | None = None
    ref: Callable[..., Any] | None = None
    baseline: Mapping[str, Callable[..., Callable[[], Any]]] | None = None
    workers: int | None = None
    backend: str | None = None  # None: tvm_ffi (cython for the CPU)
    out_idx: Any = -1
    bench_kwargs: Mapping[str, Any] | None = None
    progress: bool = True
    compile_fn: Callable[..., Callable[[], Any]] | None = None
    devices: str | Sequence[int] | None = None
    client: Any = None
    force: bool = False
    bench_fn: Callable[..., BenchResult] | None = None
    check_fn: Callable[..., Any] | None = None
    name: str | None = None
    isolate: bool = True
    timeout: float | None = None
    target: Any = None  # "c": compile every configuration for the CPU and time it there
    # leaders per size timed again on one device after a sweep over several (0: none; 1 changes
    # nothing: a leader alone has nothing to be ranked against)
    finalists: int = 3
    # How the space is searched: "grid" measures every configuration with full rounds; "halving"
    # (successive halving) measures every one briefly, then the fastest 1/eta of them longer, and so
    # on, the last few with full rounds (see tilelab.launch.sweep._halving).
    strategy: str = "grid"
    eta: int = 3  # halving: keep the fastest 1/eta at each rung
    brief_ms: float = 20.0  # halving: rep_ms of the first rung; each later rung eta times longer
    time_budget_s: float | None = None  # halving: start no rung after this many seconds of the sweep
    prune: bool | None = None  # leave out, before compiling, what cannot launch (None: with halving)
    # What ranks the configurations: "median" (each row's own median time) or "ratio" (each row
    # timed side by side with the first baseline, ABAB... in one window: its ratio to it, which
    # holds while the GPU's clock wanders between rows)
    rank_by: str = "median"
    # strategy="optuna": how many configurations Optuna's sampler may have measured (None: the
    # space's size, or what time_budget_s allows), the sampler (None: TPE seeded by ``seed``)
    n_trials: int | None = None
    sampler: Any = None
    seed: int | None = None

    def __post_init__(self) -> None:
        from ...records.errors import OptionError

        if self.strategy not in ("grid", "halving", "optuna"):
            raise OptionError(f"sweep option strategy={self.strategy!r}: pass \"grid\" (every configuration with "
                              "full rounds), \"halving\" (successive halving: all briefly, the fastest longer) or "
                              "\"optuna\" (Optuna's sampler picks which configurations to measure, n_trials of them)")
        if self.n_trials is not None and (isinstance(self.n_trials, bool) or not isinstance(self.n_trials, int)
                                          or self.n_trials < 1):
            raise OptionError(f"sweep option n_trials={self.n_trials!r}: pass an int >= 1, how many configurations "
                              "strategy=\"optuna\" may measure")
        if (self.n_trials is not None or self.sampler is not None or self.seed is not None) \
                and self.strategy != "optuna":
            raise OptionError("sweep options n_trials, sampler and seed belong to strategy=\"optuna\" (Optuna's "
                              f"sampled search); this sweep's strategy is {self.strategy!r}")
        if isinstance(self.eta, bool) or not isinstance(self.eta, int) or self.eta < 2:
            raise OptionError(f"sweep option eta={self.eta!r}: pass an int >= 2, the factor by which each rung of "
                              "strategy=\"halving\" cuts the configurations (3 keeps the fastest third)")
        if not isinstance(self.brief_ms, (int, float)) or isinstance(self.brief_ms, bool) or self.brief_ms <= 0:
            raise OptionError(f"sweep option brief_ms={self.brief_ms!r}: pass the milliseconds of measurement of "
                              "the first rung of strategy=\"halving\" (e.g. 20)")
        if self.time_budget_s is not None:
            if isinstance(self.time_budget_s, bool) or not isinstance(self.time_budget_s, (int, float)) \
                    or self.time_budget_s <= 0:
                raise OptionError(f"sweep option time_budget_s={self.time_budget_s!r}: pass a number of seconds > 0")
            if self.strategy == "grid":
                raise OptionError("sweep option time_budget_s needs strategy=\"halving\" or \"optuna\": a grid "
                                  "measures every configuration fully, and has no earlier answer to stop at")
        if self.rank_by not in ("median", "ratio"):
            raise OptionError(f"sweep option rank_by={self.rank_by!r}: pass \"median\" (each row's own median) or "
                              "\"ratio\" (each row's ratio to a baseline timed beside it)")
        if self.rank_by == "ratio" and not self.baseline:
            raise OptionError("sweep option rank_by=\"ratio\" needs a baseline to time each row beside: pass "
                              "baseline={\"torch.matmul\": lambda M, N, K: (lambda: torch.matmul(a, b))} or a maker "
                              "of a callable of the kernel's inputs (lambda **size: torch.matmul)")
        if isinstance(self.finalists, bool) or not isinstance(self.finalists, int) or self.finalists < 0:
            raise OptionError(f"sweep option finalists={self.finalists!r}: pass a non-negative int, how many of "
                              "the fastest configurations at each size are timed again on one device after a "
                              "sweep over several devices (default 3; 0 turns that final round off)")

    @classmethod
    def merge(cls, options: SweepOptions | None, keywords: dict[str, Any]) -> SweepOptions:
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(keywords) - set(fields))
        if unknown:
            raise TypeError(f"sweep() has no option {', '.join(map(repr, unknown))}; its options are "
                            f"{', '.join(fields)} (sizes go in the sizes= space, not as keywords)")
        return dataclasses.replace(options or cls(), **keywords)

    @property
    def ratio_baseline(self) -> tuple[str, Callable[..., Any]] | None:
        """(label, maker) of the baseline each row is timed beside when ``rank_by="ratio"``: the first one."""
        if self.rank_by != "ratio" or not self.baseline:
            return None
        label = next(iter(self.baseline))
        return label, self.baseline[label]

    def bench_options(self, *, worker_decides_isolation: bool = False) -> dict[str, Any]:
        """The keywords every benchmark of the sweep gets: ``bench_kwargs`` over the mode, how launches
        are isolated and their timeout. With ``worker_decides_isolation`` (tasks sent to other
        processes) ``isolate`` is forwarded only when False: a daemonic process (a Dask worker), which
        may not start tilelab's launch worker, then launches in itself (and says so) unless the
        caller asked for isolation."""
        out = dict(self.bench_kwargs or {})
        out.setdefault("mode", self.mode)
        if not (worker_decides_isolation and self.isolate):
            out.setdefault("isolate", self.isolate)
        if self.timeout is not None:
            out.setdefault("timeout", self.timeout)
        return out



def side_by_side_kwargs(bench_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The bench keywords of a measurement side by side with a reference (a halving sweep's last
    rung, the final round of a sweep over several devices): ``bench_kwargs`` and full rounds, but
    no warm-up to a steady clock first. Each ratio compares two kernels in one window, batches
    alternating, so the clock cancels in it: the seconds of warm-up buy nothing. ``steady=False``
    alone would also shorten the rounds (100 ms) and measure one round; they stay what a steady
    bench measures (``rep_ms`` of 1 s and the ratio's own ``ci_target``) unless ``bench_kwargs``
    say otherwise, and a ``steady=`` given there is kept (then nothing is changed)."""
    from .._ratio import RATIO_CI_TARGET
    from .._stability import STEADY_REP_MS

    user = dict(bench_kwargs)
    if "steady" in user:
        return user
    ci_target = user.get("ci_target", "auto")
    return {**user, "steady": False, "rep_ms": user.get("rep_ms") or STEADY_REP_MS,
            "ci_target": RATIO_CI_TARGET if ci_target == "auto" else ci_target}


@dataclass(frozen=True)
class Job:
    """One row to produce: a configuration at a size, or a baseline (``label``) at a size, whose
    ``config`` then carries its callable's maker and the work to rate it by."""

    index: int
    size: tuple[tuple[str, int], ...]
    config: tuple[tuple[str, Any], ...]
    key: str = ""  # the row cache key ("" for rows measured every time: baselines, a sweep on one GPU)
    label: str | None = None


def size_key(size: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    return tuple((k, int(v)) for k, v in size.items())


def make_jobs(configs: list[Config], sizes: list[Config],
              key: Callable[[Config, Config], str] | None = None) -> list[Job]:
    """One job per size and configuration (sizes outer, configurations inner), numbered in that order."""
    return [Job(i, size_key(size), tuple(config.items()), key(size, config) if key else "")
            for i, (size, config) in enumerate(itertools.product(sizes, configs))]


def describe(job: Job) -> str:
    """"block=64 at size 1024x1024": a row's configuration (or baseline) and size, for notes."""
    name = job.label or ", ".join(f"{k}={v}" for k, v in job.config) or "(defaults)"
    return f"{name} at size " + size_text(job.size)


def size_text(size: tuple) -> str:
    return "x".join(str(v) for _, v in size) or "-"


def size_kwargs(kernel: Any, size: Config) -> dict[str, int]:
    """Dynamic sizes for bench: only those the kernel's signature names symbolically."""
    params = getattr(kernel, "params", None)
    if not params:
        return {}
    symbols = {d for p in params for d in getattr(p, "shape", ()) if isinstance(d, str)}
    return {k: int(v) for k, v in size.items() if k in symbols}


def reference_median(measured: Iterable[Any]) -> float | None:
    """The median of a common reference that is never timed against itself (a final round's
    leader; the last rung's leader of a halving sweep): each other finalist was timed side by side
    with it, ``bench(kernel, baseline=reference)``, and ``measured`` are those results (or their
    rows), whose ``baseline_ms`` is the reference's median in that window. Its own median is the
    median of those; None where no window timed it. (Its ratio to itself is 1 by definition.)"""
    values = [float(ms) for ms in (getattr(m, "baseline_ms", None) for m in measured) if ms is not None]
    return statistics.median(values) if values else None


def mark_best(rows: Iterable[SweepRow]) -> list[SweepRow]:
    """Mark the fastest successful configuration (baselines excluded) at each size: at a size with
    a final round (rows with a final figure, timed on one device, since the sweep's medians came
    from different devices) the finalist with the lowest ``final_ratio`` (each timed side by side
    with one common reference), or the lowest ``final_ms`` where the bench step gave no ratios; at
    a size where every configuration has a ratio to a baseline timed beside it
    (``rank_by="ratio"``) the lowest ratio; elsewhere the lowest median."""
    rows = [dataclasses.replace(r, best=False) for r in rows]
    candidates = [i for i, r in enumerate(rows) if r.ok and r.label is None]
    finalists = [i for i in candidates if rows[i].final_ms is not None or rows[i].final_ratio is not None]
    final_sizes = {rows[i].size for i in finalists}
    # a final round's ratios rank its size where every finalist there has one
    final_ratio_sizes = {s for s in final_sizes
                         if all(rows[i].final_ratio is not None for i in finalists if rows[i].size == s)}

    # where every candidate at a size has a ratio to the baseline timed beside it, the ratio ranks
    ratio_sizes = {s for s in {rows[i].size for i in candidates}
                   if all(rows[i].ratio is not None for i in candidates if rows[i].size == s)}

    def figure(r: SweepRow) -> float | None:
        if r.size in final_ratio_sizes:
            return r.final_ratio
        if r.size in final_sizes:
            return r.final_ms
        return r.ratio if r.size in ratio_sizes else r.median_ms

    best: dict[tuple, int] = {}
    for i in candidates:
        ms = figure(rows[i])
        if ms is None:  # at a size with a final round, a row without a final figure cannot be best
            continue
        j = best.get(rows[i].size)
        if j is None or ms < (figure(rows[j]) or 0):
            best[rows[i].size] = i
    for i in best.values():
        rows[i] = dataclasses.replace(rows[i], best=True)
    return rows
