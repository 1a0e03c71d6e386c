"""Confidence intervals for a median, and how many samples a target needs.

Distribution-free: the interval between two order statistics whose ranks come from the binomial
distribution of "samples below the true median" (Binomial(n, 1/2), normal approximation with a
continuity correction), so no assumption about the timing noise's shape is made.

And when a GPU under back-to-back load has reached its steady state: :func:`is_steady` judges a
window of per-batch median times, :func:`warm_until_steady` drives batches until it holds.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

Z = {0.90: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(low, high) bounds of the median at ``confidence`` (0.90, 0.95 or 0.99)."""
    if confidence not in Z:
        raise ValueError(f"confidence must be one of {sorted(Z)}; got {confidence!r}")
    n = len(samples)
    if n < 6:
        raise ValueError(f"a median's confidence interval needs at least 6 samples; got {n}")
    s = sorted(samples)
    half = Z[confidence] * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half - 0.5)), 0)  # 0-based rank
    hi = min(int(math.ceil(n / 2 + half + 0.5)) - 1, n - 1)
    return s[lo], s[hi]


def relative_half_width(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half the interval's width over the median: 0.005 means the median is known to +-0.5%."""
    lo, hi = median_ci(samples, confidence)
    med = statistics.median(samples)
    return (hi - lo) / 2 / med if med else float("inf")


STEADY_WINDOW = 8  # batches judged together (about 120 ms of kernel time at 15 ms a batch)
STEADY_TOL = 0.005  # their spread that counts as flat however they are ordered
STEADY_CAP_MS = 3000.0  # warm-up wall time after which the measurement starts anyway
STEADY_BATCH_MS = 15.0  # kernel time per warm-up batch
# At least this long back to back before a steady state is believed, and the default measuring
# window of a steady sustained bench: under a power cap the clocks wander by a few percent over
# fractions of a second (an H100 at 700 W: four 100 ms windows of a 4096^3 GEMM 2-4% apart even
# after the detector called them flat), so both the heat and the window must span that.
STEADY_MIN_MS = 1000.0
STEADY_REP_MS = 1000.0


def trend_score(values: Sequence[float]) -> float:
    """Mann-Kendall S over the number of pairs: +1 when every later value is above every earlier
    one, -1 when every later one is below, near 0 when the order is random (no monotone trend)."""
    n = len(values)
    if n < 2:
        return 0.0
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n))
    return s / (n * (n - 1) / 2)


def is_steady(window: Sequence[float], tol: float = STEADY_TOL, max_trend: float = 1 / 3) -> bool:
    """True when a window of per-batch median times reads as a steady state.

    Either no monotone trend (|:func:`trend_score`| at most ``max_trend``), so that noise wider
    than ``tol`` does not hold the warm-up until its cap; or all within ``tol`` (relative,
    max-min over the median) of each other without a strong trend (|score| under 0.6); or all
    within ``tol / 5``, a drift too slow to matter however monotone it is."""
    if not window:
        return False
    med = statistics.median(window)
    if med <= 0:
        return False
    span = (max(window) - min(window)) / med
    trend = abs(trend_score(window))
    return trend <= max_trend or (span <= tol and trend < 0.6) or span <= tol / 5


def steady_index(batch_ms: Sequence[float], window: int = STEADY_WINDOW, tol: float = STEADY_TOL) -> int | None:
    """How many batches of ``batch_ms`` it took to reach a steady state: the smallest ``n >= window``
    whose last ``window`` batches satisfy :func:`is_steady`; None when none does."""
    if window < 2:
        raise ValueError(f"a steady-state window needs at least 2 batches; got window={window}")
    for n in range(window, len(batch_ms) + 1):
        if is_steady(batch_ms[n - window:n], tol):
            return n
    return None


@dataclass(frozen=True)
class Warmup:
    """What :func:`warm_until_steady` did: the per-batch median times, the wall time it took, and
    whether the steady state was reached (False: the cap ran out, or a stop was requested)."""

    batch_ms: tuple[float, ...]
    elapsed_ms: float
    reached: bool
    stopped: bool = False
    window: int = STEADY_WINDOW

    def note(self, launches_per_batch: int, cap_ms: float) -> str:
        n = len(self.batch_ms)
        what = f"{n} batch(es) of {launches_per_batch} back-to-back launches"
        if self.stopped:
            return f"warm-up interrupted after {self.elapsed_ms:.0f} ms ({what})"
        if self.reached:
            return (f"warmed up to a steady state in {self.elapsed_ms:.0f} ms ({what}; the last "
                    f"batches' medians within {self._span():.2f}% of each other or without a trend)")
        first, last = (self.batch_ms[0], self.batch_ms[-1]) if self.batch_ms else (0.0, 0.0)
        drift = f"; batch medians went from {first:.4g} to {last:.4g} ms" if self.batch_ms else ""
        return (f"no steady state within the {cap_ms:g} ms warm-up cap ({what}{drift}): measured anyway, "
                "while the GPU's clocks were still drifting")

    def _span(self) -> float:
        tail = self.batch_ms[-self.window:]
        med = statistics.median(tail) if tail else 0.0
        return 100 * (max(tail) - min(tail)) / med if med else 0.0


def warm_until_steady(run_batch: Callable[[], float], *, min_ms: float = 0.0, cap_ms: float = STEADY_CAP_MS,
                      window: int = STEADY_WINDOW, tol: float = STEADY_TOL,
                      clock: Callable[[], float] = time.perf_counter,
                      stop: Callable[[], bool] = lambda: False) -> Warmup:
    """Call ``run_batch`` (which launches one batch back to back and returns its median time per
    launch) until the last ``window`` batches are steady (:func:`is_steady`) and at least ``min_ms``
    of wall time has passed, or until ``cap_ms`` has passed (then ``reached`` is False). ``clock``
    returns seconds."""
    if window < 2:
        raise ValueError(f"a steady-state window needs at least 2 batches; got window={window}")
    if cap_ms <= 0:
        raise ValueError(f"steady_cap_ms is the warm-up's wall-time cap in ms (e.g. 3000); got {cap_ms!r}")
    began = clock()
    batches: list[float] = []
    while True:
        if stop():
            return Warmup(tuple(batches), (clock() - began) * 1e3, False, stopped=True, window=window)
        batches.append(float(run_batch()))
        elapsed = (clock() - began) * 1e3
        if elapsed >= min_ms and len(batches) >= window and is_steady(batches[-window:], tol):
            return Warmup(tuple(batches), elapsed, True, window=window)
        if elapsed >= cap_ms:
            return Warmup(tuple(batches), elapsed, False, window=window)


__all__ = ["Warmup", "is_steady", "median_ci", "relative_half_width", "steady_index", "trend_score",
           "warm_until_steady"]
