"""``bench(kernel, baseline=...)``: a kernel timed against a baseline, side by side in one window.

Under a power cap the GPU's clock wanders by a few percent over fractions of a second, so two
calls of :func:`tilelab.bench` a minute apart can differ by more than two configurations do. A
ratio measured side by side does not move with the clock: batches of a few launches of the
kernel (A) and of the baseline (B) alternate, each launch behind the same L2 flush, and each
pair of neighbouring batches gives one ratio (the median launch of A's batch over the median of
B's). The two batches of a pair are a few milliseconds apart, far shorter than the clock's
wander, so both read about the same clock and the ratio cancels it. The pairs alternate their
order too (AB, BA, AB, ...): where the clock drifts steadily (a GPU still warming), the batch
measured second in a pair reads a slightly different clock than the first, and with a fixed order
every ratio would lean the same way, by as much as the drift over one batch.

``result.ratio`` is the median of the per-pair ratios; ``result.ratio_ci`` its 95% interval, from
the time-ordered ratio series by the same batched method as the median's interval
(:func:`tilelab.launch._stability.median_interval`), so it stays honest when what is left of the
wander still correlates neighbouring pairs. A steady sustained bench first warms the GPU up with
the alternating batches (both kernels), then measures rounds of ``rep_ms`` (both kernels' time)
until the ratio's interval is within ``ci_target`` (at most ``max_rounds``); ``ci_target="auto"``
asks the ratio for +-0.2% (:data:`RATIO_CI_TARGET`), tighter than a median's +-0.5%: a ratio is
cheap to pin down (the clock cancels), and four calls can then agree within about 0.5%.

The timing loops take zero-argument callables and a ``torch`` (or, on the CPU, a wall clock), so
the tests drive them on a fake GPU whose clock wanders (``tests/fake_gpu.py``).
"""

from __future__ import annotations

import contextlib
import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..records.errors import BaselineError, OptionError
from ..records.launch import BenchResult
from . import _stability
from ._options import BenchOptions

PAIR_BATCH_MS = 5.0  # kernel time per batch: short beside the clock's wander (hundreds of ms)
PAIR_MIN_LAUNCHES = 3  # a batch median is a median
PAIR_MAX_LAUNCHES = 50
MIN_PAIRS = 16  # the ratio's interval needs 12 (4 batches of 3); 16 leaves room for a merge
HOST_AHEAD = 64  # launches the host may queue ahead of the GPU
# ci_target="auto" for the ratio (steady sustained mode): a +-0.2% half-width. Four calls whose
# 95% intervals are that wide land within about 0.5% of each other (their spread is about
# 2.06 sigma for four draws, sigma = 0.2% / 1.96); one round of ~100 pairs of a 1.6 ms GEMM
# usually gives +-0.1-0.3%, so it costs one more round at most most of the time.
RATIO_CI_TARGET = 0.002


# ------------------------------------------------------------------------------------------
# What the baseline is
# ------------------------------------------------------------------------------------------


def takes_inputs(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` cannot be called without arguments (``torch.matmul``): it is then called
    with the kernel's input tensors. A builtin without a signature counts as taking them."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        sig.bind()
    except TypeError:
        return True
    return False


def baseline_name(baseline: Any, given: str | None = None) -> str:
    if given:
        return given
    name = getattr(baseline, "name", None) or getattr(baseline, "__name__", None) or type(baseline).__name__
    if name == "<lambda>":
        return "baseline"
    module = getattr(baseline, "__module__", None) or ""
    qual = getattr(baseline, "__qualname__", "") or ""
    if module.startswith("torch") or qual.startswith("_VariableFunctions"):
        return f"torch.{name}"
    return str(name)


def check_callable(baseline: Any) -> None:
    if baseline is None or not callable(baseline):
        raise BaselineError(f"baseline= takes a zero-argument callable (lambda: torch.matmul(a, b)), a callable of "
                            f"the kernel's inputs (torch.matmul) or a TileLang kernel; got "
                            f"{type(baseline).__name__} {baseline!r:.60}")


def first_call(fn: Callable[[], Any], name: str) -> None:
    """The baseline's first (untimed) call; what it raises becomes a :class:`BaselineError`."""
    try:
        fn()
    except BaselineError:
        raise
    except Exception as err:
        raise BaselineError(f"the baseline {name} raised {type(err).__name__}: {err}; fix it, or pass one that runs "
                            "on its own (bench calls it with no arguments, or with the kernel's inputs when it "
                            "takes arguments)") from err


def batch_launches(estimate_a_ms: float, estimate_b_ms: float, given: int | None) -> int:
    """Launches per batch: ``given``, else about ``PAIR_BATCH_MS`` of the slower one."""
    if given is not None:
        return given
    slower = max(estimate_a_ms, estimate_b_ms, 1e-4)
    return int(min(PAIR_MAX_LAUNCHES, max(PAIR_MIN_LAUNCHES, round(PAIR_BATCH_MS / slower))))


def pairs_for(rep_ms: float, per_batch: int, estimate_a_ms: float, estimate_b_ms: float, max_rep: int) -> int:
    """Pairs in a round of ``rep_ms`` of both kernels' time: at least MIN_PAIRS, and no more
    launches of either than ``max_rep``."""
    per_pair = per_batch * (estimate_a_ms + estimate_b_ms)
    n = int(rep_ms / max(per_pair, 1e-6))
    return max(MIN_PAIRS, min(n, max(MIN_PAIRS, max_rep // per_batch)))


# ------------------------------------------------------------------------------------------
# Timing loops
# ------------------------------------------------------------------------------------------


def estimate_ms(torch: Any, fn: Callable[[], Any], flush: Any) -> float:
    """One launch's time (with its L2 flush), from 5 launches after an untimed one: the first
    use of the flush in a process loads its fill kernel (lazy module loading), which inflated the
    estimate of a 1.6 ms GEMM to 8 ms and cut the launches a round was sized for by 5x."""
    if flush is not None:
        flush.zero_()
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if flush is not None:
            flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end) / 5, 1e-4)



def time_pairs(torch: Any, fns_a: Sequence[Callable[[], Any]], fns_b: Sequence[Callable[[], Any]], per_batch: int,
               n_pairs: int, flush: Any | None, stop: Callable[[], bool] = lambda: False
               ) -> tuple[list[list[float]], list[list[float]]]:
    """``n_pairs`` pairs of a batch of ``per_batch`` launches of A and one of B, back to back, in
    alternating order (AB, BA, AB, ...), each launch behind the L2 flush when ``flush`` is given,
    between its own pair of CUDA events. Returns the per-launch times of A's batches and of B's, pair by pair."""
    events: list[tuple[str, Any, Any]] = []
    counters = {"a": 0, "b": 0}
    # made before the loop, as time_sustained does: the host's work between launches stays small
    pool = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(2 * per_batch * n_pairs)]
    for i in range(n_pairs):
        if stop():
            break
        # AB, BA, AB...: a steady drift of the clock leans the ratios of the two orders opposite ways
        for side, fns in (("a", fns_a), ("b", fns_b)) if i % 2 == 0 else (("b", fns_b), ("a", fns_a)):
            for _k in range(per_batch):
                if flush is not None:
                    flush.zero_()
                start, end = pool[len(events)]
                start.record()
                fns[counters[side] % len(fns)]()
                end.record()
                counters[side] += 1
                events.append((side, start, end))
                if len(events) > HOST_AHEAD:
                    events[-HOST_AHEAD - 1][2].synchronize()
    torch.cuda.synchronize()
    return _group(events, per_batch, lambda s, e: s.elapsed_time(e))


def wall_pairs(fn_a: Callable[[], Any], fn_b: Callable[[], Any], per_batch: int, n_pairs: int,
               clock: Callable[[], float] = time.perf_counter) -> tuple[list[list[float]], list[list[float]]]:
    """:func:`time_pairs` on the CPU: each call timed by the wall clock (``clock`` in seconds)."""
    a: list[list[float]] = []
    b: list[list[float]] = []
    for i in range(n_pairs):
        for fn, out in ((fn_a, a), (fn_b, b)) if i % 2 == 0 else ((fn_b, b), (fn_a, a)):
            batch = []
            for _k in range(per_batch):
                t0 = clock()
                fn()
                batch.append((clock() - t0) * 1e3)
            out.append(batch)
    return a, b


def _group(events: list[tuple[str, Any, Any]], per_batch: int, elapsed: Callable[[Any, Any], float]
           ) -> tuple[list[list[float]], list[list[float]]]:
    a: list[list[float]] = []
    b: list[list[float]] = []
    full = len(events) // (2 * per_batch) * 2 * per_batch  # whole pairs only (a stop may cut one)
    for i in range(0, full, per_batch):
        chunk = events[i:i + per_batch]
        times = [elapsed(s, e) for _, s, e in chunk]
        (a if chunk[0][0] == "a" else b).append(times)
    return a, b


def pair_ratios(a_batches: Sequence[Sequence[float]], b_batches: Sequence[Sequence[float]]) -> list[float]:
    """One ratio per pair: the median launch of A's batch over the median of B's, in time order."""
    out = []
    for a, b in zip(a_batches, b_batches):
        mb = statistics.median(b)
        out.append(statistics.median(a) / mb if mb > 0 else float("inf"))
    return out


def ratio_interval(ratios: Sequence[float]) -> _stability.MedianInterval | None:
    """The median ratio's 95% interval from batches of consecutive pairs (None: too few pairs)."""
    if len(ratios) < _stability.MIN_BATCHES * _stability.MIN_BATCH_LEN:
        return None
    return _stability.median_interval(ratios)


# ------------------------------------------------------------------------------------------
# The measurement
# ------------------------------------------------------------------------------------------


class PairRounds:
    """Warm-up and rounds of ABAB... batches; ``run_pairs(n)`` measures ``n`` more pairs and
    returns (A's batches, B's batches). Shared by the GPU and the CPU."""

    def __init__(self, run_pairs: Callable[[int], tuple[list[list[float]], list[list[float]]]], n_pairs: int,
                 target: float | None, max_rounds: int, stop: Callable[[], bool] = lambda: False) -> None:
        self.run_pairs, self.n_pairs, self.target, self.max_rounds, self.stop = \
            run_pairs, n_pairs, target, max_rounds, stop
        self.a: list[list[float]] = []
        self.b: list[list[float]] = []
        self.rounds = 0

    def measure(self) -> _stability.MedianInterval | None:
        interval = None
        while True:
            a, b = self.run_pairs(self.n_pairs)
            self.a += a
            self.b += b
            self.rounds += 1
            interval = ratio_interval(pair_ratios(self.a, self.b))
            if self.target is None or self.rounds >= self.max_rounds or self.stop():
                return interval
            if interval is not None and interval.relative_half_width <= self.target and not interval.correlated:
                return interval


def result_with_ratio(base: BenchResult, rounds: PairRounds, interval: _stability.MedianInterval | None,
                      name: str, per_batch: int, target: float | None, max_rounds: int) -> BenchResult:
    """``base`` (the kernel's result) with the baseline's samples and the per-pair ratios."""
    import dataclasses

    ratios = pair_ratios(rounds.a, rounds.b)
    notes = list(base.notes)
    notes.append(f"side by side with {name}: {len(ratios)} pairs of {per_batch}-launch batches (kernel and "
                 f"baseline, in alternating order), {rounds.rounds} round(s)")
    if interval is not None:
        text = (f"ratio 95% interval +-{100 * interval.relative_half_width:.2f}% from {interval.batches} batches of "
                f"{interval.batch_len} consecutive pairs")
        if interval.correlated:
            text += "; the ratios of neighbouring pairs still followed each other: the interval is likely too narrow"
        notes.append(text)
        if target is not None and (interval.relative_half_width > target or interval.correlated):
            notes.append(f"the ratio's interval missed ci_target +-{100 * target:g}% when the cap of "
                         f"max_rounds={max_rounds} rounds stopped the measurement")
    return dataclasses.replace(
        base, notes=tuple(notes), baseline=name,
        baseline_samples_ms=tuple(float(x) for batch in rounds.b for x in batch),
        ratio_samples=tuple(float(r) for r in ratios),
        ratio_ci=(interval.low, interval.high) if interval is not None else None,
        ratio_batches=interval.batches if interval is not None else 0,
        ratio_correlated=bool(interval is not None and interval.correlated))


def resolved_for_ratio(opts: BenchOptions) -> BenchOptions:
    """``opts.resolved()``, with ``ci_target="auto"`` the ratio's own :data:`RATIO_CI_TARGET` (in
    steady sustained mode; elsewhere one round, as for a median)."""
    import dataclasses

    out = opts.resolved()
    if opts.ci_target == "auto" and out.ci_target is not None:
        out = dataclasses.replace(out, ci_target=RATIO_CI_TARGET)
    return out


def check_mode(opts: BenchOptions) -> None:
    if opts.mode != "sustained":
        raise OptionError(f"bench(..., baseline=...) alternates batches of back-to-back launches (mode=\"sustained\"); "
                          f"mode={opts.mode!r} times launches one by one or in a graph, where a side-by-side ratio "
                          "is not defined: leave mode at its default")


def measure_gpu(torch: Any, fns_a: Sequence[Callable[[], Any]], fns_b: Sequence[Callable[[], Any]],
                opts: BenchOptions, flush: Any | None, stop: Callable[[], bool] = lambda: False,
                sampler: Any = None, warm_clock: Callable[[], float] = time.perf_counter
                ) -> tuple[PairRounds, _stability.MedianInterval | None, int, list[str]]:
    """Estimate both, warm up (alternating), and measure rounds of pairs on ``torch``'s GPU.
    Returns (the rounds, the ratio's interval, launches per batch, notes)."""
    ea = estimate_ms(torch, fns_a[0], flush)
    eb = estimate_ms(torch, fns_b[0], flush)
    per_batch = batch_launches(ea, eb, opts.pair_launches)
    n_pairs = pairs_for(opts.repetition_ms, per_batch, ea, eb, opts.max_rep)
    notes: list[str] = []

    def run(n: int) -> tuple[list[list[float]], list[list[float]]]:
        return time_pairs(torch, fns_a, fns_b, per_batch, n, flush, stop)

    with sampler if sampler is not None else contextlib.nullcontext():
        if opts.steady:
            warm_pairs = max(1, int(round(_stability.STEADY_BATCH_MS / (per_batch * (ea + eb)))))

            def one_batch() -> float:
                a, b = run(warm_pairs)
                return statistics.median([x for batch in a + b for x in batch]) if a else 0.0

            warm = _stability.warm_until_steady(one_batch, min_ms=max(opts.warmup_ms, _stability.STEADY_MIN_MS),
                                                cap_ms=opts.steady_cap_ms, clock=warm_clock, stop=stop)
            notes.append(warm.note(2 * warm_pairs * per_batch, opts.steady_cap_ms))
        else:
            run(max(1, int(opts.warmup_ms / max(per_batch * (ea + eb), 1e-6))))
        rounds = PairRounds(run, n_pairs, opts.interval_target, opts.max_rounds, stop)
        interval = rounds.measure()
    return rounds, interval, per_batch, notes


def measure_cpu(fn_a: Callable[[], Any], fn_b: Callable[[], Any], opts: BenchOptions,
                clock: Callable[[], float] = time.perf_counter) -> tuple[PairRounds, Any, int]:
    """The CPU's side-by-side measurement: wall-clock pairs, one round of ``rep_ms`` (100 ms by
    default) unless ``ci_target`` asks for more."""
    t0 = clock()
    fn_a()
    ea = max((clock() - t0) * 1e3, 1e-3)
    t0 = clock()
    fn_b()
    eb = max((clock() - t0) * 1e3, 1e-3)
    per_batch = batch_launches(ea, eb, opts.pair_launches)
    rep = opts.rep_ms if opts.rep_ms is not None else 100.0
    n_pairs = pairs_for(rep, per_batch, ea, eb, opts.max_rep)
    wall_pairs(fn_a, fn_b, per_batch, max(1, int(opts.warmup_ms / (per_batch * (ea + eb)))), clock)
    target = opts.ci_target if isinstance(opts.ci_target, float) else None
    rounds = PairRounds(lambda n: wall_pairs(fn_a, fn_b, per_batch, n, clock), n_pairs, target, opts.max_rounds)
    return rounds, rounds.measure(), per_batch

