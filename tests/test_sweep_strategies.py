"""Sweep strategies on a fake GPU whose true times are known: successive halving finds the best
configuration with fewer full measurements than a grid, each row says how it was measured and why
it was cut, a time budget is respected, and pruning before compiling says why (on real TileLang
lowerings of our GEMM)."""

from __future__ import annotations

import math
import random

import pytest

from tilelab import OptionError
from tilelab.launch import BenchResult
from tilelab.launch.sweep import SweepOptions, sweep
from tilelab.launch.sweep import _halving

BLOCKS = [16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]
STAGES = [1, 2, 3, 4]


def true_ms(config: dict) -> float:
    """A known landscape: the fastest is block=128, stages=3 (1.000 ms); neighbours within 2-8%."""
    return 1.0 + 0.0004 * abs(config["block"] - 128) + 0.02 * abs(config["stages"] - 3)


class FakeGpu:
    """Times each configuration with noise that shrinks with the measurement's length (like a
    real median: +-3% at 20 ms, a tenth of that with full rounds) and counts the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict, float | None]] = []
        self.clock = 0.0

    def compile(self, factory, size, config):
        return lambda: dict(config)  # the compile step: what it returns is the kernel bench_fn times

    def bench(self, prepared, size, config, **kwargs):
        rep_ms = kwargs.get("rep_ms")
        self.calls.append((prepared, rep_ms))
        self.clock += (rep_ms or 1000.0) / 1000.0 + 0.05  # seconds of GPU time this call took
        width = 0.03 * math.sqrt(20.0 / rep_ms) if rep_ms else 0.003
        rng = random.Random(hash((prepared["block"], prepared["stages"], rep_ms, len(self.calls))) & 0xFFFF)
        ms = true_ms(prepared) * (1 + rng.uniform(-width, width))
        return BenchResult(kernel="k", samples_ms=(ms,) * 3)


def factory(N, block, stages):
    return None


SPACE = {"block": BLOCKS, "stages": STAGES}  # 64 configurations


def test_halving_finds_the_best_with_far_fewer_full_measurements():
    gpu = FakeGpu()
    table = sweep(factory, SPACE, {"N": [4096]}, strategy="halving", prune=False, compile_fn=gpu.compile,
                  bench_fn=gpu.bench, progress=False)
    assert table.best_config() == {"block": 128, "stages": 3}
    assert len(table.rows) == 64  # every configuration has its row
    full = [c for c, rep in gpu.calls if rep is None]
    assert 1 <= len(full) <= 3  # a grid would take 64 full measurements
    # rung sizes: 64 -> 22 -> 8 -> 3 (ceil of a third each time), the last with full rounds
    rungs = sorted({r.rung for r in table.rows})
    assert rungs == [0, 1, 2, 3]
    assert [len([c for c, rep in gpu.calls if rep == 20.0 * 3 ** k]) for k in range(3)] == [64, 22, 8]
    final = [r for r in table.rows if r.rung == 3]
    assert len(final) == 3 and all(r.measured_as.endswith("full rounds (sustained)") and r.cut is None for r in final)
    cut = [r for r in table.rows if r.cut]
    assert len(cut) == 61
    for r in cut:
        assert r.cut.startswith(f"cut after rung {r.rung}: ") and "x the fastest of that rung" in r.cut
        assert r.measured_as == f"rung {r.rung}: {20.0 * 3 ** r.rung:g} ms of launches, one round"
    assert any("successive halving at size 4096 (eta=3): rung 0: 64" in n for n in table.notes)
    text = repr(table)
    assert "cut after rung 0" in text and "rung 3" in text


def test_the_grid_measures_everything_fully():
    gpu = FakeGpu()
    table = sweep(factory, SPACE, {"N": [4096]}, compile_fn=gpu.compile, bench_fn=gpu.bench, progress=False)
    assert len([c for c, rep in gpu.calls if rep is None]) == 64
    assert all(r.rung is None and r.cut is None for r in table.rows)


def test_a_time_budget_stops_at_a_rung_and_says_so(monkeypatch):
    gpu = FakeGpu()
    monkeypatch.setattr(_halving.time, "monotonic", lambda: gpu.clock)
    table = sweep(factory, SPACE, {"N": [4096]}, strategy="halving", prune=False, time_budget_s=3.0,
                  compile_fn=gpu.compile, bench_fn=gpu.bench, progress=False)
    # rung 0 (64 x 20 ms + overhead = 4.48 s of fake GPU time) spends the budget: no rung 1
    assert {c.get("rung") for c in [r.to_dict() for r in table.rows]} == {0}
    assert all(rep == 20.0 for _, rep in gpu.calls)
    best = table.best()
    assert best is not None and best.rung == 0
    assert true_ms(dict(best.config)) <= 1.0 + 0.07  # the brief rung's best is near the true best
    assert any("time budget of 3 s was spent before rung 1" in n for n in table.notes)


def test_halving_keeps_failed_configurations_as_rows_and_never_measures_them_again():
    gpu = FakeGpu()

    def compile_fn(f, size, config):
        def step():  # the compile itself fails (as nvcc/ptxas would)
            if config["block"] == 16:
                raise RuntimeError("ptxas: too many resources requested")
            return dict(config)

        return step

    table = sweep(factory, SPACE, {"N": [4096]}, strategy="halving", prune=False, compile_fn=compile_fn,
                  bench_fn=gpu.bench, progress=False)
    failed = [r for r in table.rows if not r.ok]
    assert len(failed) == 4 and all(r.stage == "compile" and r.rung == 0 for r in failed)
    assert table.best_config() == {"block": 128, "stages": 3}


@pytest.mark.parametrize("options, needle", [
    ({"strategy": "random"}, 'pass "grid"'),
    ({"strategy": "halving", "eta": 1}, "eta=1"),
    ({"time_budget_s": 10}, 'needs strategy="halving"'),
    ({"strategy": "halving", "brief_ms": 0}, "brief_ms=0"),
])
def test_bad_strategy_options_say_what_to_pass(options, needle):
    with pytest.raises(OptionError, match=needle):
        SweepOptions(**options)


def test_pruning_leaves_out_what_cannot_launch_or_lower_before_compiling():
    """Real lowerings of our GEMM for sm_90a (no GPU needed): 256x256x128 tiles in 4 stages ask for
    512 KiB of shared memory per block (228 KiB is the most an sm_90 block may have); 96 threads
    cannot tile a GEMM in warpgroups. Neither is compiled or timed."""
    from tilelab.kernels.gemm import matmul

    compiled = []
    gpu = FakeGpu()

    def compile_fn(f, size, config):
        compiled.append(dict(config))
        return lambda: {"block": config["block_M"], "stages": config["num_stages"]}

    space = [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
             dict(block_M=256, block_N=256, block_K=128, num_stages=4, threads=256),
             dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=96)]
    table = sweep(matmul, space, {"M": [1024], "N": [1024], "K": [1024]}, prune=True, target="sm_90a",
                  compile_fn=compile_fn, bench_fn=gpu.bench, progress=False)
    assert compiled == [space[0]]
    pruned = {dict(r.config)["threads"]: r for r in table.rows if r.stage == "pruned"}
    assert set(pruned) == {256, 96}
    smem = 2 * (256 * 128 + 128 * 256) * 4  # fp16 A and B tiles, 4 stages: 524288 bytes
    assert str(smem) in pruned[256].error and "a launch would fail" in pruned[256].error
    assert "[no-warp-partition]" in pruned[96].error
    assert table.best_config()["threads"] == 128
    assert any("2 configuration(s) pruned before compiling" in n for n in table.notes)
