"""bench(kernel, baseline=...): the side-by-side ratio, on a fake GPU whose clock wanders (known
true times, so the truth is known), the sweep ranked by it, and its error messages."""

from __future__ import annotations

import dataclasses
import json
import statistics

import pytest
from fake_gpu import FakeGpu, WanderingGpu

from tilelab.launch import BenchResult, SweepTable, _bench, _ratio
from tilelab.launch._options import BenchOptions
from tilelab.launch.sweep import sweep
from tilelab.records.errors import BaselineError, OptionError

QUIET = dict(telemetry=False, flush_l2=False)


def _spread(values):
    return (max(values) - min(values)) / statistics.median(values)


def test_ratio_holds_across_calls_where_absolute_medians_wander():
    """Four back-to-back calls, A truly 1.30 ms and B 1.00 ms on a clock wandering by 4% with a
    2 s correlation time (a power-capped GPU's clock drifts over seconds): each call's ratio
    interval holds 1.3, and the ratios spread far less than the kernel's absolute medians do."""
    gpu = WanderingGpu(seed=7, amplitude=0.04, tau_ms=2000.0)
    a, b = gpu.kernel(1.30), gpu.kernel(1.00)
    opts = BenchOptions(steady=False, ci_target=None, rep_ms=1000.0, **QUIET).resolved()
    ratios, medians = [], []
    for _ in range(4):
        rounds, interval, per_batch, _ = _ratio.measure_gpu(gpu, [a], [b], opts, None, warm_clock=gpu.clock_s)
        assert per_batch == 4  # about 5 ms of the slower kernel
        r = statistics.median(_ratio.pair_ratios(rounds.a, rounds.b))
        assert interval.low <= 1.30 <= interval.high
        ratios.append(r)
        medians.append(statistics.median([x for batch in rounds.a for x in batch]))
        gpu.idle(700.0)  # the host between two calls
    assert _spread(medians) > 0.01  # the clock moved between calls
    assert _spread(ratios) < _spread(medians) / 4
    assert _spread(ratios) < 0.005


def test_interval_covers_the_true_ratio_at_about_its_nominal_rate():
    """300 simulated short measurements on independently wandering clocks: the ratio's 95%
    interval (batched over consecutive pairs) holds the true ratio in about 95% of them."""
    opts = BenchOptions(steady=False, ci_target=None, rep_ms=200.0, warmup_ms=5.0, **QUIET).resolved()
    covered = 0
    widths = []
    n = 300
    for seed in range(n):
        gpu = WanderingGpu(seed=1000 + seed, amplitude=0.03, tau_ms=100.0, noise=0.01)
        _, interval, _, _ = _ratio.measure_gpu(gpu, [gpu.kernel(0.5)], [gpu.kernel(0.4)], opts, None)
        covered += interval.low <= 1.25 <= interval.high
        widths.append(interval.relative_half_width)
    assert 0.88 <= covered / n <= 0.99
    assert statistics.median(widths) < 0.01


def test_bench_measure_carries_the_ratio_text_html_and_json():
    gpu = WanderingGpu(seed=3)
    timed = _bench._Timed([gpu.kernel(2.0)], "mine")
    base = gpu.kernel(1.6)
    base.__name__ = "matmul"
    opts = BenchOptions(steady=True, steady_cap_ms=200.0, warmup_ms=5.0, rep_ms=400.0, max_rounds=2, **QUIET).resolved()
    res = _bench._measure_ratio(gpu, timed, base, opts, {}, clock=gpu.clock_s)  # the warm-up reads the fake's clock
    assert res.baseline == "matmul"
    assert res.ratio_ci[0] <= 1.25 <= res.ratio_ci[1]
    assert abs(res.baseline_ms / 1.6 - 1) < 0.05 and abs(res.median_ms / 2.0 - 1) < 0.05
    assert len(res.ratio_samples) >= _ratio.MIN_PAIRS
    again = BenchResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert again == res and again.ratio == res.ratio
    text = repr(res)
    assert "ratio to" in text and "matmul" in text and f"{res.ratio:.4f}x" in text
    from tilelab.render import launch as render

    html = render.bench_result_html(res)
    assert "ratio 95% interval" in html and f"{res.ratio:.4f}x" in html
    plain = BenchResult(kernel="k", samples_ms=(1.0, 1.1))
    assert plain.ratio is None and "ratio" not in repr(plain)  # a plain bench says nothing of a ratio


def test_time_pairs_alternates_equal_batches_behind_the_same_flush():
    gpu = WanderingGpu(seed=1, amplitude=0.0, noise=0.0, flush_ms=0.25)
    flush = gpu.empty(1)
    order = []

    def a():
        order.append("a")
        gpu.kernel(1.0)()

    def b():
        order.append("b")
        gpu.kernel(0.5)()

    ta, tb = _ratio.time_pairs(gpu, [a], [b], 3, 5, flush)
    assert order == (["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3) * 2 + ["a"] * 3 + ["b"] * 3  # AB, BA, ...
    assert gpu.flushes == 30  # one flush per launch, for both
    assert ta == [[1.0] * 3] * 5 and tb == [[0.5] * 3] * 5  # the flush is outside the events
    assert _ratio.pair_ratios(ta, tb) == [2.0] * 5


class DriftingGpu(FakeGpu):
    """A GPU still warming up: every launch takes ``true_ms * (1 + slope * now_ms)``, no noise."""

    def __init__(self, slope: float) -> None:
        super().__init__(iter(()))
        self.slope = slope

    def kernel(self, true_ms: float):
        def launch() -> None:
            self.now_ms += true_ms * (1 + self.slope * self.now_ms)

        return launch


def test_alternating_the_order_of_each_pair_cancels_a_steady_drift():
    """Two kernels of the same true time on a clock slowing by 0.02% per ms: with 5-launch batches
    the batch measured second in a pair runs about 0.1% slower, so a pair's ratio leans by 0.1%,
    one way for AB pairs and the other for BA pairs; the median ratio reads 1 within 0.02%."""
    gpu = DriftingGpu(slope=2e-4)
    ta, tb = _ratio.time_pairs(gpu, [gpu.kernel(1.0)], [gpu.kernel(1.0)], 5, 40, None)
    ratios = _ratio.pair_ratios(ta, tb)
    ab, ba = ratios[0::2], ratios[1::2]
    assert all(r < 1 - 0.0007 for r in ab) and all(r > 1 + 0.0007 for r in ba)  # each order leans
    assert abs(statistics.median(ratios) - 1) < 0.0002


def test_the_ratio_aims_at_a_tighter_interval_than_a_median_by_default():
    assert BenchOptions(**QUIET).resolved().ci_target == 0.005  # a median's
    assert _ratio.resolved_for_ratio(BenchOptions(**QUIET)).ci_target == _ratio.RATIO_CI_TARGET == 0.002
    assert _ratio.resolved_for_ratio(BenchOptions(ci_target=0.01, **QUIET)).ci_target == 0.01  # asked for
    assert _ratio.resolved_for_ratio(BenchOptions(steady=False, **QUIET)).ci_target is None  # one round


# ------------------------------------------------------------------------------------------
# Sweeps ranked by the ratio
# ------------------------------------------------------------------------------------------

TRUE = {64: 1.00, 128: 0.97, 256: 0.99}  # block -> true ms


def test_sweep_ranks_by_the_ratio_to_a_baseline_timed_with_each_row():
    """The clock slows by 6% while block=128 is measured: its median reads slowest, its ratio
    (measured in the same window as its baseline) still says it is the fastest."""
    slow = {128: 1.06}
    seen = []

    def bench_fn(kernel, size, config, **kw):
        base = kw["baseline"]
        assert callable(base) and base() == "baseline at 1024"  # the maker was called with the size
        clock = slow.get(config["block"], 1.0)
        ms = TRUE[config["block"]] * clock
        seen.append(config["block"])
        return BenchResult(kernel="k", samples_ms=(ms,) * 3, baseline="torch.matmul",
                           baseline_samples_ms=(1.0 * clock,) * 3, ratio_samples=(TRUE[config["block"]],) * 12,
                           ratio_ci=(TRUE[config["block"]] * 0.999, TRUE[config["block"]] * 1.001))

    def baseline_bench(fn, size, config, **kw):
        return BenchResult(kernel="torch.matmul", samples_ms=(1.0,) * 3)

    def factory(N, block):
        return None

    def route(kernel, size, config, **kw):
        return bench_fn(kernel, size, config, **kw) if config else baseline_bench(kernel, size, config, **kw)

    base = {"torch.matmul": lambda N: (lambda: f"baseline at {N}")}
    def median_only(kernel, size, config, **kw):
        assert "baseline" not in kw  # rank_by="median": rows are timed alone
        return route(kernel, size, config, baseline=base["torch.matmul"](**size)) if not config else BenchResult(
            kernel="k", samples_ms=(TRUE[config["block"]] * slow.get(config["block"], 1.0),) * 3)

    by_median = sweep(factory, {"block": [64, 128, 256]}, {"N": [1024]}, compile_fn=lambda f, s, c: (lambda: c),
                      bench_fn=median_only, baseline=base, progress=False, isolate=False)
    table = sweep(factory, {"block": [64, 128, 256]}, {"N": [1024]}, compile_fn=lambda f, s, c: (lambda: c),
                  bench_fn=route, baseline=base, rank_by="ratio", progress=False, isolate=False)
    assert by_median.best_config() == {"block": 256}  # the wandering clock misleads the median
    assert table.best_config() == {"block": 128}
    assert table.ratio_baseline == "torch.matmul"
    row = table.best()
    assert row.ratio == pytest.approx(0.97) and row.ratio_ci == pytest.approx((0.97 * 0.999, 0.97 * 1.001))
    assert row.baseline_ms == pytest.approx(1.06)
    again = SweepTable.from_dict(json.loads(table.to_json()))
    assert again.best() == row and again.ratio_baseline == "torch.matmul"
    text = repr(table)
    assert "ratio to torch.matmul" in text and "0.9700 +-0.10%" in text
    from tilelab.render import plots

    fig = plots.configs_compared(table)
    assert "ratio to torch.matmul" in fig.axes[0].get_title()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "block=128"  # lowest ratio on top


def test_halving_ranks_its_last_rung_by_ratio():
    """Nine configurations (eta=3): rung 0 briefly by median, without the baseline; the three
    survivors beside the baseline, ranked by ratio, where a slow clock misleads the median."""
    true = {b: 1.0 + 0.01 * i for i, b in enumerate((128, 64, 256, 96, 160, 192, 224, 32, 48))}
    calls = []

    def bench_fn(kernel, size, config, **kw):
        if not config:  # the baseline's own row
            return BenchResult(kernel="b", samples_ms=(1.0,) * 3)
        calls.append((config["block"], "baseline" in kw))
        ms = true[config["block"]] * (1.05 if config["block"] == 128 and "baseline" in kw else 1.0)
        extra = {}
        if "baseline" in kw:
            extra = dict(baseline="b", baseline_samples_ms=(1.0,) * 3, ratio_samples=(true[config["block"]],) * 12)
        return BenchResult(kernel="k", samples_ms=(ms,) * 3, **extra)

    table = sweep(lambda N, block: None, {"block": list(true)}, {"N": [1024]}, strategy="halving", prune=False,
                  compile_fn=lambda f, s, c: (lambda: c), bench_fn=bench_fn, rank_by="ratio",
                  baseline={"b": lambda N: (lambda: None)}, progress=False, isolate=False)
    assert [with_base for _, with_base in calls[:9]] == [False] * 9  # rung 0: briefly, alone
    assert sorted(b for b, with_base in calls[9:] if with_base) == [64, 128, 256]  # the last rung: beside it
    assert table.best_config() == {"block": 128}  # 1.05 ms by median, the lowest ratio
    assert table.best().rung == 1 and table.ratio_baseline == "b"
    assert all(r.ok for r in table.rows)  # the baseline's own row too


def test_rank_by_ratio_without_a_baseline_says_what_to_pass():
    with pytest.raises(OptionError, match="needs a baseline"):
        sweep(lambda N: None, {}, {"N": [1]}, rank_by="ratio")
    with pytest.raises(OptionError, match="rank_by='speed'"):
        sweep(lambda N: None, {}, {"N": [1]}, rank_by="speed")


def test_a_ratio_baseline_maker_that_returns_no_callable_fails_the_row_with_the_reason():
    table = sweep(lambda N, block: None, {"block": [64]}, {"N": [8]}, compile_fn=lambda f, s, c: (lambda: c),
                  bench_fn=lambda k, s, c, **kw: BenchResult(kernel="k", samples_ms=(1.0,) * 3),
                  baseline={"b": lambda N: 42}, rank_by="ratio", progress=False, isolate=False)
    failed = [r for r in table.rows if r.label is None][0]
    assert not failed.ok and "returned int" in failed.error and "not a callable" in failed.error


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------


def test_a_baseline_that_is_not_callable_or_raises_gets_a_specific_error():
    import tilelab

    with pytest.raises(BaselineError, match="got int"):
        tilelab.bench(lambda: None, baseline=3, target="c")

    def broken():
        raise RuntimeError("shapes do not match")

    with pytest.raises(BaselineError, match="raised RuntimeError: shapes do not match"):
        tilelab.bench(lambda: None, baseline=broken, target="c", rep_ms=5)
    with pytest.raises(BaselineError, match="takes the kernel's inputs"):
        tilelab.bench(lambda: None, baseline=lambda x, y: x, target="c", rep_ms=5)
    with pytest.raises(OptionError, match="mode=\"sustained\""):
        tilelab.bench(lambda: None, baseline=lambda: None, target="c", mode="graph")
    with pytest.raises(ValueError, match="pair_launches"):
        BenchOptions(pair_launches=0)


def test_baseline_kinds_are_told_apart():
    import torch

    assert _ratio.takes_inputs(torch.matmul)  # a builtin: called with the kernel's inputs
    assert _ratio.takes_inputs(lambda a, b: a @ b)
    assert not _ratio.takes_inputs(lambda: None)
    assert not _ratio.takes_inputs(lambda *a: None)
    assert _ratio.baseline_name(torch.matmul) == "torch.matmul"
    assert _ratio.baseline_name(lambda: None) == "baseline"


def test_cpu_bench_against_a_baseline_with_the_wall_clock():
    """Target c: the same alternation, timed by the wall clock; a callable against itself."""
    import tilelab

    def work():
        return sum(range(2000))

    res = tilelab.bench(work, baseline=work, target="c", rep_ms=30)
    assert res.baseline == "work" and len(res.ratio_samples) >= _ratio.MIN_PAIRS
    assert res.ratio_ci is not None and res.ratio_ci[0] <= res.ratio <= res.ratio_ci[1]
    assert len(res.baseline_samples_ms) == len(res.samples_ms)
    assert "alternating with work" in res.method


def test_cpu_kernel_baseline_with_other_inputs_is_refused(c_kernels):
    import tilelab

    small, other = c_kernels
    with pytest.raises(BaselineError, match="cannot run on the inputs of"):
        tilelab.bench(small, baseline=other, target="c", rep_ms=5)
    res = tilelab.bench(small, baseline=small, target="c", rep_ms=5)  # the same signature: shares the tensors
    assert res.ratio is not None and res.baseline


@pytest.fixture(scope="module")
def c_kernels():
    import tilelang
    import tilelang.language as T

    def copy(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i] = A[i]
        return main

    return (tilelang.compile(copy(64), out_idx=[1], target="c", execution_backend="cython"),
            tilelang.compile(copy(32), out_idx=[1], target="c", execution_backend="cython"))


def test_options_keep_their_fields_in_a_round_trip():
    o = BenchOptions(pair_launches=4)
    assert dataclasses.replace(BenchOptions(), **o.to_dict()) == o


def test_plots_over_sizes_draw_ratios_where_rows_have_them():
    from tilelab.launch import SweepRow
    from tilelab.render import plots

    rows = []
    for n, (r64, r128) in ((1024, (1.10, 0.95)), (2048, (1.05, 0.97))):
        size = (("N", n),)
        rows += [SweepRow((("block", 64),), size, median_ms=1.0, ratio=r64, ratio_ci=(r64 - 0.01, r64 + 0.01)),
                 SweepRow((("block", 128),), size, median_ms=1.2, ratio=r128, ratio_ci=(r128 - 0.01, r128 + 0.01)),
                 SweepRow((), size, median_ms=1.1, label="torch.matmul")]
    table = SweepTable("k", tuple(rows), ratio_baseline="torch.matmul")
    fig = plots.throughput_vs_size(table)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "time / torch.matmul (side by side)"
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    assert drawn == {"block=64": [1.10, 1.05], "block=128": [0.95, 0.97]}  # the baseline has no ratio to itself
    bars = plots.configs_compared(table, {"N": 2048})
    assert [t.get_text() for t in bars.axes[0].get_yticklabels()] == ["block=128", "block=64"]


# ------------------------------------------------------------------------------------------
# Where a side-by-side bench runs (the worker's protocol, with the launches faked)
# ------------------------------------------------------------------------------------------


def test_bench_with_a_baseline_routes_to_the_worker_or_here(monkeypatch):
    import torch

    from tilelab.launch import _api, _isolated, _worker
    from tilelab.launch._kernel import Prepared

    monkeypatch.setattr(_api, "require_gpu", lambda: object())
    monkeypatch.setattr(_worker, "in_worker", lambda: False)
    loads = []

    class Worker:
        loaded: set = set()

        def call(self, fn, ref, timeout=None, label=""):
            loads.append((fn, ref))

    monkeypatch.setattr(_worker, "default_worker", lambda: Worker())
    seen = {}

    def fake_call(worker, prepared, bound, timeout, func, args, opts, sizes, baseline):
        seen.update(options=opts, baseline=baseline, timeout=timeout, func=func)
        return "from the worker"

    monkeypatch.setattr(_isolated, "_call", fake_call)
    monkeypatch.setattr(_bench, "measure", lambda torch, target, args, opts, sizes, baseline=None, baseline_note=None:
                        seen.update(here=(target, baseline, baseline_note)) or "here")
    kernel = Prepared(compiled=lambda *a: None, name="k", params=[], backend="tvm_ffi")
    # a picklable function of the inputs travels with the options; the default timeout doubles
    assert _api.bench(kernel, baseline=torch.matmul) == "from the worker"
    assert seen["baseline"] is torch.matmul and seen["func"] is _isolated.bench_in_worker
    assert seen["timeout"] == pytest.approx(_isolated.BENCH_TIMEOUT_S + 2 * 4 * 7.0)
    # a lambda cannot travel: both are timed here, and the result will say so
    base = lambda: None  # noqa: E731
    assert _api.bench(kernel, baseline=base) == "here"
    assert seen["here"][1] is base and "cannot travel to tilelab's worker process" in seen["here"][2]
    # a kernel baseline is loaded in the worker first, then named by its key
    other = Prepared(compiled=lambda *a: None, name="other", params=[], backend="tvm_ffi")
    monkeypatch.setattr(_isolated, "kernel_ref", lambda p, w: _isolated.KernelRef("key-" + p.name, p.name, b"payload"))
    assert _api.bench(kernel, baseline=other) == "from the worker"
    assert loads[-1] == (_isolated.load_in_worker, _isolated.KernelRef("key-other", "other", b"payload"))
    assert seen["baseline"] == _isolated.KernelRef("key-other", "other", None)
    with pytest.raises(OptionError, match="sustained"):
        _api.bench(kernel, baseline=torch.matmul, mode="isolated")


def test_the_worker_times_the_kernel_with_its_options_record_and_a_loaded_baseline(monkeypatch):
    from tilelab.launch import _isolated
    from tilelab.launch._kernel import Prepared

    kernel = Prepared(compiled=None, name="k", params=[], backend="tvm_ffi")
    other = Prepared(compiled=None, name="other", params=[], backend="tvm_ffi")
    monkeypatch.setattr(_isolated, "_LOADED", {"key-k": kernel, "key-other": other})
    monkeypatch.setattr(_isolated, "_torch", lambda: "torch")
    seen = {}
    monkeypatch.setattr(_bench, "measure", lambda torch, prepared, args, opts, sizes, baseline=None:
                        seen.update(prepared=prepared, opts=opts, sizes=sizes, baseline=baseline) or "timed")
    ref = _isolated.KernelRef("key-k", "k", None)
    opts = BenchOptions(rep_ms=300.0)
    other_ref = _isolated.KernelRef("key-other", "other", None)
    assert _isolated.bench_in_worker(ref, (), opts, {"M": 64}, other_ref) == "timed"
    assert seen["prepared"] is kernel and seen["baseline"] is other
    assert seen["sizes"] == {"M": 64} and seen["opts"].rep_ms == 300.0
    assert seen["opts"] is opts  # the record travels as it is: nothing to split or guess


def _doubling(N, block):
    import tilelang.language as T

    @T.prim_func
    def double(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=1) as bx:
            for i in T.serial(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] * 2.0

    return double


def test_a_baseline_of_the_kernels_inputs_gets_its_row_from_the_windows_beside_each_configuration():
    """A baseline like torch.matmul is called with each configuration's inputs when timed beside it
    (rank_by="ratio"); it has no inputs of its own, so its row is the median of its time in those
    side-by-side windows, not a failure. Ranked by median, its row says what to pass instead."""
    base = {"twice": lambda N: (lambda A: A * 2)}
    table = sweep(_doubling, {"block": [64, 128]}, {"N": [4096]}, target="c", out_idx=[1], baseline=base,
                  rank_by="ratio", progress=False)
    configs = [r for r in table.rows if r.label is None]
    (row,) = [r for r in table.rows if r.label == "twice"]
    assert all(r.ok and r.baseline_ms for r in configs)
    assert row.ok and row.median_ms == pytest.approx(statistics.median(r.baseline_ms for r in configs))
    assert "beside each configuration" in row.measured_as and "2 side-by-side windows" in row.measured_as
    alone = sweep(_doubling, {"block": [64]}, {"N": [4096]}, target="c", out_idx=[1], baseline=base,
                  progress=False)
    (failed,) = [r for r in alone.rows if r.label == "twice"]
    assert not failed.ok and "called with the kernel's inputs" in failed.error
    assert "lambda: torch.matmul(a, b)" in failed.error
