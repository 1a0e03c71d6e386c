"""strategy="optuna": Optuna's sampler picks which configurations a sweep measures, on a fake GPU
whose true times are known (a smooth function of the parameters, fastest at block_M=128,
block_N=64, num_stages=2)."""

from __future__ import annotations

import math
import statistics
import sys

import pytest
from fake_gpu import SweepGpu, v_around_64

from tilelab import OptionError
from tilelab.launch.sweep import SweepOptions, _sampled, sweep

optuna = pytest.importorskip("optuna", reason="strategy=\"optuna\" needs Optuna (pip install tilelab[optuna])")

SPACE = {"block_M": [32, 64, 128, 256], "block_N": [32, 64, 128, 256], "num_stages": [1, 2, 3]}


def true_ms(block_M, block_N, num_stages):
    return 1.0 + 0.1 * abs(math.log2(block_M / 128)) + 0.1 * abs(math.log2(block_N / 64)) + 0.05 * abs(num_stages - 2)


@pytest.fixture(autouse=True)
def two_cores(monkeypatch):
    """Batches as on a 2-core machine (10, then 3 at a time), whatever this machine has."""
    monkeypatch.setattr(_sampled.os, "cpu_count", lambda: 2)


def factory(N, block_M, block_N, num_stages):
    return ("kernel", N, block_M, block_N, num_stages)


def _key(config):
    return (config["block_M"], config["block_N"], config["num_stages"])


class FakeGpu(SweepGpu):
    """Compiles a configuration to itself (``fail``: those raise) and times it at its true time."""

    def __init__(self, fail=()):
        super().__init__(fail=fail, key=_key)

    def time(self, kernel, size, config, **kw):
        return true_ms(*_key(kernel))

    @property
    def benched(self) -> list[tuple[int, int, int]]:
        return [_key(kernel) for kernel, *_ in self.log]

    def sweep(self, space=SPACE, **kw):
        kw.setdefault("seed", 0)
        return sweep(factory, space, {"N": [1024]}, strategy="optuna", compile_fn=self.compile, bench_fn=self.bench,
                     progress=False, force=True, **kw)


def measured(table):
    return [(dict(r.config)["block_M"], dict(r.config)["block_N"], dict(r.config)["num_stages"])
            for r in table.rows if r.label is None]


def test_with_trials_enough_for_the_whole_space_every_configuration_is_measured_once_and_the_best_is_the_truth():
    gpu = FakeGpu()
    table = gpu.sweep(n_trials=100)
    assert sorted(gpu.benched) == sorted(set(gpu.benched)) and len(gpu.benched) == 48  # each once, all of them
    assert table.best_config() == {"block_M": 128, "block_N": 64, "num_stages": 2}
    assert all(r.measured_as.startswith("trial ") and "of TPESampler: full rounds" in r.measured_as
               for r in table.rows)
    assert any("TPESampler (Optuna) measured 48 of the space's 48 configurations" in n for n in table.notes)


def test_the_sampler_measures_n_trials_and_its_model_finds_the_best_more_often_than_random_proposals():
    gpu = FakeGpu()
    table = gpu.sweep(n_trials=20)
    got = measured(table)
    assert len(got) == 20 and len(set(got)) == 20 == len(gpu.benched)
    best = min(got, key=lambda k: true_ms(*k))
    assert table.best_config() == dict(zip(SPACE, best))  # the best is the fastest measured

    # 20 of the 48 configurations, six seeds each: TPE (the default) against random proposals
    def found(sampler):
        fake = FakeGpu()
        fake.sweep(n_trials=20, seed=None, sampler=sampler)
        return min(true_ms(*k) for k in fake.benched)

    tpe = [found(optuna.samplers.TPESampler(seed=s)) for s in range(6)]
    rand = [found(optuna.samplers.RandomSampler(seed=s)) for s in range(6)]
    assert sum(t == 1.0 for t in tpe) > sum(r == 1.0 for r in rand)
    assert statistics.mean(tpe) < statistics.mean(rand)


def test_another_sampler_of_optuna_is_used_as_given():
    gpu = FakeGpu()
    table = gpu.sweep(n_trials=12, seed=None, sampler=optuna.samplers.RandomSampler(seed=7))
    # the same sampler alone, on the same distributions, proposes the same first configurations
    # (random: it does not read the results)
    alone = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    space = _sampled.Space([{"block_M": m, "block_N": n, "num_stages": s} for m in SPACE["block_M"]
                            for n in SPACE["block_N"] for s in SPACE["num_stages"]])
    expected = []
    while len(expected) < 12:
        config = space.config(alone.ask(space.distributions(optuna)).params)
        key = (config["block_M"], config["block_N"], config["num_stages"])
        if key not in expected:
            expected.append(key)
    assert gpu.benched == expected
    assert all("of RandomSampler" in r.measured_as for r in table.rows)


class Stubborn(optuna.samplers.BaseSampler):
    """A sampler that always proposes the same configuration."""

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, name, distribution):
        return 0


def test_a_configuration_proposed_again_is_not_measured_again_and_a_sampler_with_nothing_new_ends_the_search():
    gpu = FakeGpu()
    table = gpu.sweep(n_trials=10, seed=None, sampler=Stubborn())
    assert gpu.benched == [(32, 32, 1)] and measured(table) == [(32, 32, 1)]
    assert any("measured 1 of the space's 48 configurations" in n for n in table.notes)


def test_a_configuration_that_fails_is_a_failed_trial_and_the_search_goes_on():
    gpu = FakeGpu(fail=[(128, 64, 2)])  # the true best does not compile
    table = gpu.sweep(n_trials=100)
    failed = [r for r in table.rows if not r.ok]
    assert [(dict(r.config)["block_M"], dict(r.config)["block_N"]) for r in failed] == [(128, 64)]
    assert failed[0].stage == "compile" and "too many resources" in failed[0].error
    assert len(gpu.benched) == 47 and table.best_config() in ({"block_M": 128, "block_N": 64, "num_stages": 1},
                                                               {"block_M": 128, "block_N": 64, "num_stages": 3})


def test_no_batch_starts_after_the_time_budget(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(_sampled.time, "monotonic", lambda: clock[0])
    gpu = FakeGpu()
    bench = gpu.bench

    def slow_bench(kernel, size, config, **kw):
        clock[0] += 1.0  # each configuration takes a second of the fake clock
        return bench(kernel, size, config, **kw)

    gpu.bench = slow_bench
    table = gpu.sweep(n_trials=40, time_budget_s=15)
    # the random start (10) ends at 10 s; batches of 3 start at 10 s and 13 s, none at 16 s
    assert len(gpu.benched) == 16
    assert any("measured 16 of the space's 48" in n and "stopped by the time budget" in n for n in table.notes)


def test_a_space_listed_configuration_by_configuration_measures_only_what_it_lists():
    gpu = FakeGpu()
    listed = [{"block_M": 64, "block_N": 64, "num_stages": 2}, {"block_M": 128, "block_N": 128, "num_stages": 3}]
    table = gpu.sweep(space=listed, n_trials=5)
    assert sorted(gpu.benched) == [(64, 64, 2), (128, 128, 3)]
    assert table.best_config() == {"block_M": 64, "block_N": 64, "num_stages": 2}


def test_without_optuna_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    with pytest.raises(OptionError, match=r"pip install tilelab\[optuna\]"):
        FakeGpu().sweep(n_trials=4)


def test_the_sampled_search_options_are_checked_by_name():
    with pytest.raises(OptionError, match="n_trials"):
        SweepOptions(strategy="optuna", n_trials=0)
    with pytest.raises(OptionError, match="belong to strategy=\"optuna\""):
        SweepOptions(n_trials=10)
    with pytest.raises(OptionError, match="\"optuna\""):
        SweepOptions(strategy="bayes")
    assert SweepOptions(strategy="optuna", time_budget_s=60).time_budget_s == 60
    with pytest.raises(OptionError, match="time_budget_s"):
        SweepOptions(time_budget_s=60)  # a grid has no earlier answer


def test_the_first_batch_is_the_random_start_and_the_others_as_wide_as_the_compile_pool():
    assert _sampled.batch_size(True, cpus=16) == 10  # TPE's 10 random trials first
    assert _sampled.batch_size(False, cpus=16) == 24
    assert _sampled.batch_size(False, cpus=2) == 3


def test_real_compiles_for_the_cpu_each_measured_once_and_right(tmp_path, monkeypatch):
    """TileLang compiles each proposed configuration for the CPU (target c); a fake timer; the
    kernels the sampled search measured compute the right thing."""
    import torch
    from test_sweep_strategies import _scaled_copy

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    gpu = SweepGpu(v_around_64)
    table = sweep(lambda N, block: _scaled_copy(N, block, 3.0), {"block": [16, 32, 64, 128]}, {"N": [256]},
                  strategy="optuna", n_trials=3, seed=0, target="c", bench_fn=gpu.bench, progress=False)
    kernels = {config["block"]: kernel for kernel, _, config, _ in gpu.log}
    assert len(kernels) == 3 and len(table.rows) == 3 and all(r.ok for r in table.rows)
    assert table.best_config() == {"block": min(kernels, key=lambda b: abs(b - 64))}
    a = torch.arange(256, dtype=torch.float32)
    for block, kernel in kernels.items():
        checked = tilelab.run(kernel, a, ref=lambda A: A * 3.0, target="c")
        assert checked.passed and checked.rel_error < 1e-6, (block, checked)


def test_over_several_gpus_one_final_round_ranks_every_batchs_rows_on_one_gpu(monkeypatch):
    """Two GPUs, the second 2% faster (two boards of one model differ so): the batches (10, 3, 3)
    have no final round of their own; one round at the end times every measured configuration
    (finalists=16) on one GPU beside the leader, so every final ratio is to one reference and
    the truth ranks, whatever board each configuration landed on."""
    import threading

    from tilelab.launch import BenchResult
    from tilelab.launch.sweep import _tasks

    monkeypatch.setattr(_tasks, "dumps", lambda obj: None)  # compiles in threads
    lock, calls, waited = threading.Lock(), [], set()
    barrier = threading.Barrier(2, timeout=60)

    def bench(kernel, size, config, **kw):
        me = threading.current_thread().name
        key = (kernel["block_M"], kernel["block_N"], kernel["num_stages"])
        board = 0.98 if me.endswith("cuda:1") else 1.0
        with lock:
            calls.append((key, me, "baseline" in kw))
            first = me not in waited
            waited.add(me)
        if first:
            barrier.wait()  # each GPU's first configuration: both GPUs measure
        if "baseline" not in kw:
            return timed(true_ms(*key) * board)
        leader = kw["baseline"]
        ref = true_ms(leader["block_M"], leader["block_N"], leader["num_stages"])
        return BenchResult("k", samples_ms=(true_ms(*key) * board,) * 4, baseline="leader",
                           baseline_samples_ms=(ref * board,) * 4, ratio_samples=(true_ms(*key) / ref,) * 4)

    gpu = FakeGpu()
    table = sweep(factory, SPACE, {"N": [1024]}, strategy="optuna", n_trials=16, seed=0, devices=[0, 1],
                  compile_fn=gpu.compile, bench_fn=bench, progress=False, force=True, finalists=16, workers=1)
    rows = [r for r in table.rows if r.label is None]
    assert len(rows) == 16 and len({r.device for r in rows}) == 2
    (note,) = [n for n in table.notes if n.startswith("final round:")]  # one round, not one per batch
    assert "the 16 fastest configurations at each size were timed again on cuda:0" in note
    final = [c for c in calls if c[2]]
    assert len(final) == 15 and {me for _, me, _ in final} == {"tilelab-bench-cuda:0"}  # all but the leader
    assert {r.final_device for r in rows} == {"cuda:0"} and all(r.final_ratio is not None for r in rows)
    truth = min(rows, key=lambda r: true_ms(*dict(r.config).values()))
    assert table.best_config() == dict(truth.config) and table.final_reference == "the sweep's fastest at each size"
