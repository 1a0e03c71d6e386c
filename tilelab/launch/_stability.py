"""Confidence intervals for a median, and how many samples a target needs.

Distribution-free: the interval between two order statistics whose ranks come from the binomial
distribution of "samples below the true median" (Binomial(n, 1/2), normal approximation with a
continuity correction), so no assumption about the timing noise's shape is made.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

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


__all__ = ["median_ci", "relative_half_width"]
