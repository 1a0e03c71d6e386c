"""The sustained mode's warm-up to the GPU's steady state: the detector over synthetic series of
per-batch medians, the warm-up loop with a fake clock, bench's batches through a fake CUDA event
API, and the option's way through the worker process path."""

import random

import pytest
from fake_gpu import FakeGpu

from tilelab.launch import _api, _bench, _isolated, _stability, _worker
from tilelab.launch._run import Prepared
from tilelab.launch._stability import is_steady, steady_index, trend_score, warm_until_steady


def drifting_then_flat(n_drift=30, n_flat=30, start=0.2256, end=0.2335, noise=0.0002, seed=0):
    """Per-batch medians that rise linearly (clocks falling towards the power limit) then hold."""
    rng = random.Random(seed)
    out = [start + (end - start) * i / n_drift for i in range(n_drift)]
    out += [end] * n_flat
    return [v * (1 + rng.uniform(-noise, noise)) for v in out]


def test_trend_score_by_hand():
    assert trend_score([1, 2, 3, 4]) == 1.0
    assert trend_score([4, 3, 2, 1]) == -1.0
    # pairs (i<j): 1<3 +, 1>0.5 -, 1<2 +, 3>0.5 -, 3>2 -, 0.5<2 +  -> S = 0
    assert trend_score([1, 3, 0.5, 2]) == 0.0
    assert trend_score([5]) == 0.0
    assert trend_score([2, 2, 2]) == 0.0  # ties count neither way


def test_drifting_then_flat_stops_in_the_flat_part():
    series = drifting_then_flat()
    n = steady_index(series)
    assert n is not None
    # Not while drifting: at least a window into the flat part would be ideal; a window that
    # straddles the end of the drift still spans well over 0.5% until few drifting batches remain.
    assert 30 <= n <= 30 + _stability.STEADY_WINDOW
    flat = series[n - _stability.STEADY_WINDOW:n]
    assert (max(flat) - min(flat)) / min(flat) < 0.01
    # Any window wholly inside the drift is refused: it spans more than the tolerance and trends.
    assert not is_steady(series[5:5 + _stability.STEADY_WINDOW])


def test_noisy_flat_stops_early():
    rng = random.Random(3)
    series = [0.23 * (1 + rng.gauss(0, 0.02)) for _ in range(200)]  # 2% noise, 4x the tolerance
    n = steady_index(series)
    assert n is not None and n <= 3 * _stability.STEADY_WINDOW
    # Quiet flat data: the first full window already counts.
    assert steady_index([0.23 * (1 + 0.0005 * (-1) ** i) for i in range(40)]) == _stability.STEADY_WINDOW


def test_ever_drifting_never_steady():
    series = [0.2 * (1 + 0.002 * i) for i in range(300)]  # 0.2% slower each batch, forever
    assert steady_index(series) is None
    assert steady_index(series[::-1]) is None  # and when it gets faster


def test_a_slow_monotone_drift_within_the_tolerance_is_not_steady_but_a_negligible_one_is():
    rng = random.Random(5)
    slow = [0.23 * (1 + 0.0006 * i + rng.uniform(-5e-5, 5e-5)) for i in range(8)]  # 0.42% over the window
    assert (max(slow) - min(slow)) / min(slow) < _stability.STEADY_TOL
    assert not is_steady(slow)  # still clearly heading somewhere
    creeping = [0.23 * (1 + 0.0001 * i) for i in range(8)]  # 0.07% over the window
    assert is_steady(creeping)


def test_detector_rejects_bad_window():
    with pytest.raises(ValueError, match="window"):
        steady_index([1.0] * 10, window=1)


class FakeClock:
    """Seconds that advance by each batch's kernel time (the batch runs back to back)."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def driven(series, clock, batch_s=0.015):
    it = iter(series)

    def run_batch():
        clock.t += batch_s
        return next(it)

    return run_batch


def test_warm_until_steady_stops_at_the_flat_part_and_notes_the_time():
    clock = FakeClock()
    series = drifting_then_flat()
    warm = warm_until_steady(driven(series, clock), clock=clock)
    assert warm.reached and not warm.stopped
    assert len(warm.batch_ms) == steady_index(series)
    assert warm.elapsed_ms == pytest.approx(15.0 * len(warm.batch_ms))
    note = warm.note(40, 3000)
    assert f"in {warm.elapsed_ms:.0f} ms" in note and "40 back-to-back launches" in note


def test_warm_until_steady_honours_the_minimum():
    clock = FakeClock()
    flat = [0.23] * 1000
    warm = warm_until_steady(driven(flat, clock), clock=clock, min_ms=600)
    assert warm.reached and len(warm.batch_ms) == 40  # 600 ms at 15 ms a batch, although steady at 8


def test_warm_until_steady_caps_and_says_so():
    clock = FakeClock()
    series = [0.2 * (1 + 0.002 * i) for i in range(10_000)]
    warm = warm_until_steady(driven(series, clock), clock=clock, cap_ms=3000)
    assert not warm.reached
    assert len(warm.batch_ms) == 200  # 3000 ms / 15 ms
    note = warm.note(40, 3000)
    assert "no steady state within the 3000 ms warm-up cap" in note and "measured anyway" in note
    assert "0.2 to 0.2796 ms" in note


def test_warm_until_steady_stops_on_request():
    clock = FakeClock()
    calls = []
    warm = warm_until_steady(driven([0.2 * (1 + 0.01 * i) for i in range(100)], clock), clock=clock,
                             stop=lambda: calls.append(1) or len(calls) > 3)
    assert warm.stopped and not warm.reached and len(warm.batch_ms) == 3
    assert "interrupted" in warm.note(1, 3000)


def test_bench_warm_up_runs_batches_of_about_15ms_until_steady(monkeypatch):
    per_batch_ms = drifting_then_flat()
    per_batch = int(round(_stability.STEADY_BATCH_MS / 0.3))  # 50 launches of 0.3 ms each
    gpu = FakeGpu(iter([t for t in per_batch_ms for _ in range(per_batch)]))
    clock = FakeClock()
    real = _stability.warm_until_steady
    monkeypatch.setattr(_stability, "warm_until_steady",
                        lambda run_batch, **kw: real(lambda: (setattr(clock, "t", clock.t + 0.015), run_batch())[1],
                                                     clock=clock, **kw))
    warm, n = _bench.warm_to_steady(gpu, [gpu.launch], 0.3, gpu.empty(), 25.0, 3000.0)
    assert n == per_batch
    assert warm.reached
    assert len(warm.batch_ms) == steady_index(per_batch_ms)
    assert list(warm.batch_ms) == pytest.approx(per_batch_ms[:len(warm.batch_ms)])
    assert gpu.flushes == gpu.launches == n * len(warm.batch_ms)  # a flush before every launch


def _fake_gpu(monkeypatch):
    monkeypatch.setattr(_api, "require_gpu", lambda: object())
    monkeypatch.setattr(_worker, "in_worker", lambda: False)
    monkeypatch.setattr(_worker, "default_worker", lambda: "worker")


def test_bench_forwards_steady_to_the_worker(monkeypatch):
    _fake_gpu(monkeypatch)
    seen = {}

    def fake_call(worker, prepared, bound, timeout, func, args, opts, sizes, baseline):
        seen.update(options=opts.to_dict(), timeout=timeout, func=func)  # the options travel as their record
        return "result"

    monkeypatch.setattr(_isolated, "_call", fake_call)
    prepared = Prepared(compiled=lambda *a: None, name="k", params=[], backend="tvm_ffi")
    assert _api.bench(prepared) == "result"
    assert seen["options"]["steady"] is True and seen["options"]["steady_cap_ms"] == 3000.0
    assert seen["func"] is _isolated.bench_in_worker
    # ci_target travels resolved: steady sustained mode's default interval target, 4 rounds at most.
    assert seen["options"]["ci_target"] == 0.005 and seen["options"]["max_rounds"] == 4
    # The default timeout covers the warm-up's cap and every round: 60 s + 4 * (3 s cap + 4 x 1 s).
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 4 * 7.0)
    _api.bench(prepared, ci_target=None)  # one round
    assert seen["options"]["ci_target"] is None
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 4 * 4.0)
    _api.bench(prepared, steady=False, steady_cap_ms=500)  # no default interval target without the warm-up
    assert seen["options"]["steady"] is False and seen["options"]["steady_cap_ms"] == 500
    assert seen["options"]["ci_target"] is None
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 4 * 0.125)
    _api.bench(prepared, mode="isolated")  # isolated mode has no steady-state warm-up
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 4 * 0.525)
    _api.bench(prepared, mode="isolated", ci_target=0.01, max_rounds=3)  # asked for: 3 rounds of 500 ms
    assert seen["options"]["ci_target"] == 0.01
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 4 * 1.525)


def test_bench_rejects_bad_steady_options():
    with pytest.raises(TypeError, match="steady is True"):
        _api.bench(lambda: None, steady="yes")
    with pytest.raises(ValueError, match="steady_cap_ms"):
        _api.bench(lambda: None, steady_cap_ms=0)


def test_the_launch_estimate_leaves_out_the_first_use_of_the_flush():
    """A GPU whose first zeroing of the flush buffer in a process stalls 30 ms (its fill kernel
    loaded on first use, as CUDA's lazy module loading does): the estimate that sizes every round
    is one launch and its flush (1.65 ms), not 7.65 ms as when the stall was timed."""
    gpu = FakeGpu(iter(lambda: 1.6, None), flush_ms=0.05, first_flush_ms=30.0)
    assert _bench._estimate_ms(gpu, gpu.launch, gpu.empty()) == pytest.approx(1.65)
    assert _bench._estimate_ms(gpu, gpu.launch, None) == pytest.approx(1.6)
