"""Confidence intervals for the median of a time-ordered timing series, and the GPU's steady state.

Per-launch times of back-to-back launches are not independent: under a power cap the SM clock
wanders by a few percent over fractions of a second, so neighbouring launches read the same
clock. An interval that assumes independent samples (the binomial order-statistic interval) is
then far too narrow. :func:`median_interval` batches the series in time order and takes the
interval's width from how much the batch medians differ, which holds for a correlated series
and reduces to about the independent-sample interval when there is no correlation.

And when a GPU under back-to-back load has reached its steady state: :func:`is_steady` judges a
window of per-batch median times, :func:`warm_until_steady` drives batches until it holds.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Student's t quantile t((1 + confidence) / 2, df) for the batch counts used (df = batches - 1).
T_QUANTILE = {0.90: {3: 2.3534, 7: 1.8946, 15: 1.7531, 31: 1.6955},
              0.95: {3: 3.1824, 7: 2.3646, 15: 2.1314, 31: 2.0395},
              0.99: {3: 5.8409, 7: 3.4995, 15: 2.9467, 31: 2.7440}}
MAX_BATCHES = 32  # Schmeiser (1982): past about 30 batches the interval hardly narrows
MIN_BATCHES = 4  # fewer: the t quantile (3.18 at 4 batches, 4.30 at 3) makes the interval useless
MIN_BATCH_LEN = 3  # samples per batch at least, so that a batch median is a median
LAG1_MAX = 0.2  # batch medians whose (bias-corrected) lag-1 autocorrelation is above this are merged
# The first test's threshold: the 95th percentile of lag1_unbiased over independent batch medians
# (20,000 simulated Gaussian series per count; about 1.645 / sqrt(b) for many batches, more for few).
LAG1_FIRST = {8: 0.77, 16: 0.47, 32: 0.31}


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """The sample autocorrelation at lag 1, sum((x[i] - mean)(x[i+1] - mean)) / sum((x[i] - mean)^2);
    0 for a constant series."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = statistics.fmean(values)
    dev = [v - mean for v in values]
    denom = sum(d * d for d in dev)
    return sum(dev[i] * dev[i + 1] for i in range(n - 1)) / denom if denom > 0 else 0.0


def lag1_unbiased(values: Sequence[float]) -> float:
    """The lag-1 autocorrelation with its small-sample bias removed: for an AR(1) series of
    ``n`` values the sample estimate r has expectation about phi - (1 + 3 phi) / n (Marriott and
    Pope, Biometrika 41, 1954), so phi is estimated by (n r + 1) / (n - 3). Independent values
    read about 0 whatever ``n`` (r alone reads -1/n: -0.25 for 4 values)."""
    n = len(values)
    return (n * lag1_autocorrelation(values) + 1) / (n - 3) if n > 3 else 0.0


def batch_medians(samples: Sequence[float], batches: int) -> list[float]:
    """The medians of ``batches`` consecutive batches of equal length, in time order; the oldest
    ``len(samples) % batches`` samples (those nearest the warm-up) are left out."""
    length = len(samples) // batches
    skip = len(samples) - length * batches
    return [statistics.median(samples[skip + i * length: skip + (i + 1) * length]) for i in range(batches)]


@dataclass(frozen=True)
class MedianInterval:
    """The median of a series, its confidence interval, and the batching the interval rests on."""

    low: float
    high: float
    median: float
    batches: int
    batch_len: int
    lag1: float  # bias-corrected lag-1 autocorrelation of the batch medians (lag1_unbiased), at the last count tested
    correlated: bool = False  # even 8 batches' medians followed each other: the interval is likely too narrow
    confidence: float = 0.95

    @property
    def relative_half_width(self) -> float:
        """Half the interval's width over the median: 0.005 means the median is known to +-0.5%."""
        return (self.high - self.low) / 2 / self.median if self.median else float("inf")

    def note(self) -> str:
        text = (f"median {100 * self.confidence:g}% interval +-{100 * self.relative_half_width:.2f}% from "
                f"{self.batches} batches of {self.batch_len} consecutive launches")
        if self.correlated:
            text += (f"; the medians of 8 batches still followed each other (lag-1 autocorrelation about "
                     f"{min(self.lag1, 1.0):.2f}): the timings wander more slowly than the measurement is long, so "
                     "this interval is likely too narrow; measure longer (rep_ms=, max_rounds=)")
        return text


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> MedianInterval:
    """The median of a time-ordered series and its ``confidence`` interval (0.90, 0.95 or 0.99),
    valid when the samples are autocorrelated.

    Batching and sectioning (Asmussen and Glynn, *Stochastic Simulation*, 2007, ch. III.5; for
    quantiles of dependent series, Alexopoulos et al., "Sequest", Operations Research 67(4),
    2019): the series is split, in time order, into ``b`` consecutive batches of equal length; the
    interval is centred on the median of all samples, with half-width
    ``t(b - 1) * stdev(batch medians) / sqrt(b)``. Batches much longer than the series'
    correlation time have nearly independent medians, so their spread measures the median's
    uncertainty whatever the correlation inside each batch.

    The batch count: ``b`` starts at 32, or at the most batches of at least 3 samples (a power of
    two). Schmeiser ("Batch size effects in the analysis of simulation output", Operations
    Research 30(3), 1982) found 10 to 30 batches lose little to the ideal interval once the batch
    medians are independent; fewer cost width through the t quantile (3.18 at 4 batches against
    2.04 at 32). While the batch medians read correlated (their lag-1 autocorrelation, corrected
    for its small-sample bias by :func:`lag1_unbiased`, above 0.2) neighbouring batches are
    merged, half as many twice as long, down to 4: the batch length grows until the batch
    statistics stop following each other, as in the batch-means procedures of Law and Carson
    (Operations Research 27(5), 1979) and Fishman and Yarberry (INFORMS J. Computing 9(3), 1997).
    4 batches are too few to test, so they are taken when 8 read correlated, and the result
    says so (``correlated``): the series wanders more slowly than an eighth of its length, and
    the interval is likely too narrow (under 24 samples, 4 batches are all there is, untested). The
    first test, with no merge behind it, asks for significance instead (LAG1_FIRST: the 95th
    percentile of the estimate under independence), so short independent series are not flagged.
    The threshold 0.2 was chosen by simulation: 0.1 or 0 merge independent series' batches more
    often (their intervals 10-15% wider on average) for a point or two of coverage on the AR(1).

    Simulated (``tests/launch/test_median_interval.py``, 95%): independent samples, normal or skewed,
    are covered 95% of the time by an interval about 1.1x as wide as the binomial
    order-statistic one; an AR(1) series with phi = 0.99 (600 samples, a correlation time of
    about 200) about 85% (the binomial interval: 15%); a sinusoidal wander slower than the
    window, always (the binomial interval: about 10%).
    """
    table = T_QUANTILE.get(confidence)
    if table is None:
        raise ValueError(f"confidence must be one of {sorted(T_QUANTILE)}; got {confidence!r}")
    n = len(samples)
    need = MIN_BATCHES * MIN_BATCH_LEN
    if n < need:
        raise ValueError(f"a median's confidence interval needs at least {need} samples "
                         f"({MIN_BATCHES} batches of {MIN_BATCH_LEN}); got {n}")
    values = [float(s) for s in samples]
    start = b = 1 << int(math.log2(min(MAX_BATCHES, n // MIN_BATCH_LEN)))
    tested = 0.0
    correlated = False
    while True:
        medians = batch_medians(values, b)
        if b == MIN_BATCHES:
            # 4 values say too little about their own correlation (the estimate's spread is
            # about as large as the threshold): 4 batches are taken when 8 read correlated.
            correlated = b < start
            break
        tested = lag1_unbiased(medians)
        # The first test has no earlier merge behind it, and with few batches the estimate's own
        # noise under independence is above LAG1_MAX (a third of independent 24-47 sample series
        # read correlated at 8 batches): it asks for significance (one-sided 5%, LAG1_FIRST).
        # After a merge the series has shown its correlation once, and 0.2 holds.
        if tested <= (max(LAG1_MAX, LAG1_FIRST[b]) if b == start else LAG1_MAX):
            break
        b //= 2
    centre = statistics.median(values)
    half = table[b - 1] * statistics.stdev(medians) / math.sqrt(b)
    return MedianInterval(centre - half, centre + half, centre, b, n // b, tested, correlated, confidence)


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(low, high) bounds of the median at ``confidence``: :func:`median_interval`'s."""
    ci = median_interval(samples, confidence)
    return ci.low, ci.high


def relative_half_width(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half the median's interval over the median: 0.005 means the median is known to +-0.5%."""
    return median_interval(samples, confidence).relative_half_width


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


__all__ = ["MedianInterval", "Warmup", "batch_medians", "is_steady", "lag1_autocorrelation", "median_ci",
           "median_interval", "relative_half_width", "steady_index", "trend_score", "warm_until_steady"]
