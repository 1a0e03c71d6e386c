"""The options of a launch, as records that travel to the worker process: :class:`RunOptions`
(how :func:`tilelab.run` checks a kernel) and :class:`BenchOptions` (how :func:`tilelab.bench`
times one). ``run(kernel, tolerance=1e-3)`` and ``run(kernel, options=RunOptions(tolerance=1e-3))``
are the same call; a keyword given beside ``options`` replaces that field, and every other keyword
is a dynamic size of the kernel (``M=4096``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..records.launch import BENCH_MODES
from . import _stability

ISOLATED_BUDGET_MS = 500.0  # default wall time of an isolated run, idle gaps included
# Steady sustained mode measures again until the median's 95% interval is within +-0.5%, at most
# MAX_ROUNDS rounds of rep_ms in all (1 s each by default). On a steady GPU one round suffices
# (per-launch noise of 0.3% gives about +-0.03% over 1000 launches); a clock wandering over
# fractions of a second (a power-capped H100: four 1 s medians 0.1-2% apart) needs about four
# times the samples to halve a +-1% interval. Simulated (tests/launch/test_median_interval.py), a 1%
# AR(1) wander correlated over 200 launches of 1 ms: one round's medians land 0.42% (rms) from
# the centre, four calls 0.80% apart; with the default about 3 rounds, 0.27% and 0.52%; a steady
# GPU takes 1.03 rounds. The cap bounds what a 200-configuration sweep can add: 3 s a row.
CI_TARGET = 0.005
MAX_ROUNDS = 4

_Options = TypeVar("_Options", "RunOptions", "BenchOptions")


def split_keywords(cls: type[_Options], options: _Options | None, keywords: dict[str, Any]
                   ) -> tuple[_Options, dict[str, int]]:
    """(``options`` with the keywords that name its fields, the other keywords: the kernel's sizes)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    chosen = {k: v for k, v in keywords.items() if k in fields}
    sizes = {k: v for k, v in keywords.items() if k not in fields}
    return dataclasses.replace(options or cls(), **chosen), sizes


@dataclass(frozen=True)
class RunOptions:
    """How :func:`tilelab.run` checks a kernel; see :func:`tilelab.run` for each field.

    ``ref`` is the reference callable, ``tolerance`` the relative error norm allowed (None: from
    the dtypes), ``seed`` seeds the random inputs, ``ref_dtype`` is the dtype the reference runs in,
    ``worst`` how many of the worst elements each failed output lists, and ``tile`` the tile shape
    of an output's map (None: the kernel's block shape)."""

    ref: Callable[..., Any] | None = None
    tolerance: float | None = None
    seed: int | None = None
    ref_dtype: Any = None
    worst: int = 5
    tile: Sequence[int] | None = None

    @classmethod
    def split(cls, options: RunOptions | None, keywords: dict[str, Any]) -> tuple[RunOptions, dict[str, int]]:
        """(options with the keywords that name its fields, the other keywords: the kernel's sizes)."""
        return split_keywords(cls, options, keywords)


@dataclass(frozen=True)
class BenchOptions:
    """How :func:`bench` measures: every option that travels with a kernel to the worker process.

    ``bench(kernel, mode="isolated", rep_ms=200)`` and
    ``bench(kernel, options=BenchOptions(mode="isolated", rep_ms=200))`` are the same call; a
    keyword given beside ``options`` replaces that field. See :func:`bench` for each field.
    """

    mode: str = "sustained"
    flops: float | None = None
    bytes: float | None = None
    warmup_ms: float = 25.0
    rep_ms: float | None = None  # None: 1 s of kernel time (steady sustained), 100 ms (graph, or steady=False),
    # or 500 ms of wall time (isolated)
    # 24: the median's interval takes batches of at least 3 launches, and 8 batches are the fewest
    # whose own correlation can be tested (_stability.median_interval); with 10, a graph replay of
    # a kernel over about 0.4 ms gave no interval at all
    min_rep: int = 24
    max_rep: int = 10_000
    flush_l2: bool | None = None  # None: flush unless mode is "graph"
    rotate: int | None = None  # None: rotate input copies only where they would fit in L2 unflushed
    idle_ms: float = 2.0
    graph_batch: int = 20
    seed: int | None = None
    name: str | None = None
    ci_target: float | str | None = "auto"  # "auto": CI_TARGET in steady sustained mode, else None (one round)
    max_rounds: int = MAX_ROUNDS
    telemetry: bool = True
    steady: bool = True  # sustained mode: warm to the GPU's steady state before measuring
    steady_cap_ms: float = _stability.STEADY_CAP_MS
    # bench(..., baseline=...): launches per batch of the alternating kernel and baseline batches
    # (None: about 5 ms of the slower one, at least 3)
    pair_launches: int | None = None

    def __post_init__(self) -> None:
        if self.pair_launches is not None and (isinstance(self.pair_launches, bool) or not isinstance(
                self.pair_launches, int) or self.pair_launches < 1):
            raise ValueError(f"pair_launches is how many launches each batch of a side-by-side bench has (e.g. 5), "
                             f"or None; got {self.pair_launches!r}")
        if not isinstance(self.steady, bool):
            raise TypeError(f"steady is True (warm the GPU to its steady state first) or False; got {self.steady!r}")
        if not (isinstance(self.steady_cap_ms, (int, float)) and self.steady_cap_ms > 0):
            raise ValueError(f"steady_cap_ms is the steady-state warm-up's wall-time cap in ms (e.g. 3000); "
                             f"got {self.steady_cap_ms!r}")
        if self.ci_target is not None and self.ci_target != "auto" and not (
                isinstance(self.ci_target, (int, float)) and not isinstance(self.ci_target, bool)
                and 0 < self.ci_target < 1):
            raise ValueError(f"ci_target is a relative half-width such as 0.005 (0.5%), \"auto\" or None; "
                             f"got {self.ci_target!r}")
        if not (isinstance(self.max_rounds, int) and not isinstance(self.max_rounds, bool) and self.max_rounds >= 1):
            raise ValueError(f"max_rounds is how many rounds of rep_ms ci_target may measure in all (e.g. 4); "
                             f"got {self.max_rounds!r}")
        if self.mode not in BENCH_MODES:
            raise ValueError(f"mode must be one of {sorted(BENCH_MODES)}; got {self.mode!r}")

    @property
    def repetition_ms(self) -> float:
        """``rep_ms``, or its default for the mode."""
        if self.rep_ms is not None:
            return self.rep_ms
        if self.mode == "isolated":
            return ISOLATED_BUDGET_MS
        return _stability.STEADY_REP_MS if self.mode == "sustained" and self.steady else 100.0

    @property
    def interval_target(self) -> float | None:
        """``ci_target``, with ``"auto"`` resolved: CI_TARGET in steady sustained mode, else None."""
        if self.ci_target == "auto":
            return CI_TARGET if self.mode == "sustained" and self.steady else None
        return self.ci_target  # type: ignore[return-value]

    @property
    def longest_ms(self) -> float:
        """The longest the measurement may take, in ms: the warm-up (up to the steady-state cap in
        steady sustained mode) and every round ``ci_target`` may take."""
        warm = max(self.warmup_ms, self.steady_cap_ms) if self.mode == "sustained" and self.steady else self.warmup_ms
        rounds = self.max_rounds if self.interval_target else 1
        return warm + rounds * self.repetition_ms

    @property
    def flushes(self) -> bool:
        return self.flush_l2 if self.flush_l2 is not None else self.mode != "graph"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def split(cls, options: BenchOptions | None, keywords: dict[str, Any]) -> tuple[BenchOptions, dict[str, int]]:
        """(options with the keywords that name its fields, the other keywords: the kernel's sizes)."""
        return split_keywords(cls, options, keywords)

    def resolved(self) -> BenchOptions:
        """These options with their mode-dependent defaults written out (``rep_ms``, and
        ``ci_target="auto"``), as they travel to the worker process."""
        return dataclasses.replace(self, rep_ms=self.repetition_ms, ci_target=self.interval_target)


def check_sizes(sizes: dict[str, Any], params: Sequence[Any], kernel: str, options: type, call: str = "run") -> None:
    """Refuse a keyword that is neither an option of ``call`` (the fields of ``options``) nor one of
    the kernel's dynamic sizes (the names in its parameters' symbolic shapes) or scalar parameters,
    by name, with the
    nearest of either: a typo (``timout=``) never travels on as a size."""
    import difflib
    import re

    dynamic: set[str] = {p.name for p in params if getattr(p, "kind", "") == "scalar"}  # scalars by name
    for p in params:
        for dim in getattr(p, "shape", ()):
            if isinstance(dim, str):
                dynamic.update(re.findall(r"[A-Za-z_]\w*", dim))
    unknown = [k for k in sizes if k not in dynamic]
    if not unknown:
        return
    known_options = sorted(f.name for f in dataclasses.fields(options))
    front = {"run": ["options", "backend", "out_idx", "outputs", "isolate", "timeout", "target",
                     "diagnose_hang", "device", "blocks", "pass_configs"]}.get(call, [])
    name = unknown[0]
    close = difflib.get_close_matches(name, [*known_options, *front, *sorted(dynamic)], n=1, cutoff=0.7)
    hint = f" Did you mean {close[0]}=?" if close else ""
    sizes_text = ", ".join(sorted(dynamic)) if dynamic else "none: its shapes are all fixed"
    raise TypeError(f"{call}() got an unexpected keyword argument {name!r}: it is neither an option of {call} "
                    f"({', '.join([*front, *known_options])}) nor a dynamic size of {kernel} ({sizes_text}).{hint}")
