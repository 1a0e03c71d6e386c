"""Sweep strategies on a fake GPU whose true times are known: successive halving finds the best
configuration with fewer full measurements than a grid, each row says how it was measured and why
it was cut, a time budget is respected, and pruning before compiling says why (on real TileLang
lowerings of our GEMM)."""

from __future__ import annotations

import collections
import math
import random

import pytest
from fake_gpu import SweepGpu, timed, v_around_64

from tilelab import OptionError
from tilelab.launch.sweep import SweepOptions, _halving, sweep

BLOCKS = [16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]
STAGES = [1, 2, 3, 4]


def true_ms(config: dict) -> float:
    """A known landscape: the fastest is block=128, stages=3 (1.000 ms); neighbours within 2-8%."""
    return 1.0 + 0.0004 * abs(config["block"] - 128) + 0.02 * abs(config["stages"] - 3)


class FakeGpu(SweepGpu):
    """Times each configuration with noise that shrinks with the measurement's length (like a
    real median: +-3% at 20 ms, a tenth of that with full rounds) and counts the calls."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0.0

    @property
    def calls(self) -> list[tuple[dict, float | None]]:
        return [(kernel, options.get("rep_ms")) for kernel, _, _, options in self.log]

    def time(self, prepared, size, config, **kwargs):
        rep_ms = kwargs.get("rep_ms")
        self.clock += (rep_ms or 1000.0) / 1000.0 + 0.05  # seconds of GPU time this call took
        width = 0.03 * math.sqrt(20.0 / rep_ms) if rep_ms else 0.003
        rng = random.Random(hash((prepared["block"], prepared["stages"], rep_ms, len(self.log))) & 0xFFFF)
        return true_ms(prepared) * (1 + rng.uniform(-width, width))


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


def test_a_sweep_over_devices_prunes_inside_each_compile_task(monkeypatch):
    """With devices= (and on this process's GPU by default) each compile task inspects its own
    configuration first: what cannot launch is a "pruned" row with the reason, is never timed, and
    the caller lowers nothing before the first compile. Real lowerings for sm_90a, a fake GPU."""
    from tilelab.kernels.gemm import matmul
    from tilelab.launch.sweep import _tasks

    monkeypatch.setattr(_tasks, "dumps", lambda obj: None)  # compile tasks in threads: no spawned processes
    lowered_here = []
    monkeypatch.setattr(_halving, "prune", lambda *a, **k: lowered_here.append(a) or ({}, [], []))
    gpu = SweepGpu(lambda prepared, size, config, **kw: true_ms(prepared),
                   kernel_of=lambda config: {"block": config["block_N"], "stages": config["num_stages"]})

    good = [dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=128) for bn in (64, 128) for st in (2, 3)]
    bad = [dict(block_M=256, block_N=256, block_K=128, num_stages=4, threads=256),
           dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=96)]
    table = sweep(matmul, good + bad, {"M": [1024], "N": [1024], "K": [1024]}, strategy="halving", devices=[0],
                  target="sm_90a", compile_fn=gpu.compile, bench_fn=gpu.bench, progress=False, eta=2)
    launched = [kernel for kernel, *_ in gpu.log]
    assert lowered_here == []  # no pruning pass in the caller
    assert table.best_config() == good[3]  # block_N=128, 3 stages: the known fastest
    pruned = {dict(r.config)["threads"]: r for r in table.rows if r.stage == "pruned"}
    assert set(pruned) == {256, 96} and all(r.rung is None and r.measured_as == "" for r in pruned.values())
    assert "524288" in pruned[256].error and "a launch would fail" in pruned[256].error
    assert "[no-warp-partition]" in pruned[96].error
    assert {p["block"] for p in launched} <= {64, 128}
    assert len(launched) == 4 + 2  # 4 briefly, then 2 (<= eta) with full rounds
    assert any("2 configuration(s) pruned before compiling (each inspected in its compile task, for sm_90a)" in n
               for n in table.notes)
    assert any("rung 0: 4 (20 ms of launches, one round;" in n and "2 pruned in their compile tasks" in n
               for n in table.notes)


class SideBySide(SweepGpu):
    """A fake GPU for the last rung of a halving sweep (its side-by-side conditions patched in):
    each compile returns its own artifact, the leader's kernel is the artifact its compile made
    (as on a GPU), and every bench call is logged with the kernel and the baseline it was given.
    Rung 0 (brief, alone) reads block=128 fastest; the truth is block=64 (0.99x block=128), and
    the clock moves between windows (block=128's median in them: 1.03, then 1.01 ms)."""

    BRIEF = {128: 0.98, 64: 0.995, 256: 1.00, 96: 1.05, 160: 1.06, 192: 1.07, 224: 1.08, 32: 1.09, 48: 1.10}
    RATIO = {64: 0.99, 256: 1.02}  # the truth, to block=128
    LEADER_MS = {64: 1.03, 256: 1.01}  # block=128's median in each one's window

    def __init__(self, monkeypatch, fail_beside: bool = False) -> None:
        from tilelab.launch.sweep import _tasks

        monkeypatch.setattr(_tasks, "dumps", lambda obj: None)  # compile tasks in threads
        monkeypatch.setattr(_halving, "_side_by_side", lambda opts, pooled: True)
        monkeypatch.setattr(_halving, "_leader_kernel",
                            lambda f, size, config, opts, compiled=None: compiled.artifact)
        super().__init__(kernel_of=lambda config: {"block": config["block"]})  # a new artifact per compile
        self.fail_beside = fail_beside

    @property
    def calls(self) -> list[tuple[object, object]]:  # (kernel, baseline)
        return [(kernel, options.get("baseline")) for kernel, _, _, options in self.log]

    def time(self, kernel, size, config, **kw):
        baseline = kw.get("baseline")
        if baseline is None:
            return timed(self.BRIEF[kernel["block"]])
        if self.fail_beside:
            raise RuntimeError("launch failed")
        block, leader_ms = kernel["block"], self.LEADER_MS[kernel["block"]]
        ratio = self.RATIO[block]
        return timed(ratio * leader_ms, baseline="leader",
                           baseline_samples_ms=(leader_ms,) * 3, ratio_samples=(ratio,) * 12)

    def sweep(self):
        return sweep(lambda N, block: None, {"block": list(self.BRIEF)}, {"N": [1024]}, strategy="halving",
                     prune=False, devices=[0], compile_fn=self.compile, bench_fn=self.bench, progress=False,
                     force=True)


def test_the_last_rung_times_the_others_beside_the_leader_and_never_the_leader_beside_itself(monkeypatch):
    """The last rung's configurations are the fastest of rung 0, the leader among them: the others
    are timed side by side with it, the leader is not timed against itself (ratio 1 by definition,
    its median the one measured in the others' windows), and a finalist faster than the leader wins."""
    gpu = SideBySide(monkeypatch)
    table = gpu.sweep()
    beside = [(kernel["block"], baseline) for kernel, baseline in gpu.calls if baseline is not None]
    assert sorted(block for block, _ in beside) == [64, 256]  # the other two finalists
    assert all(baseline == {"block": 128} for _, baseline in beside)  # beside the leader's own artifact
    assert not [k for k, baseline in gpu.calls if baseline is k or baseline == k]  # never beside itself
    assert len(gpu.calls) == 9 + 2  # rung 0: all nine alone; the last rung: two windows
    rows = {dict(r.config)["block"]: r for r in table.rows}
    leader = rows[128]
    assert leader.ratio == 1.0 and leader.ratio_ci is None and leader.rung == 1
    assert "the reference of the last rung: ratio 1 by definition" in leader.measured_as
    assert leader.median_ms == pytest.approx(1.02)  # the median of 1.03 and 1.01: its windows
    assert rows[64].ratio == pytest.approx(0.99) and rows[256].ratio == pytest.approx(1.02)
    assert "side by side with the leader of rung 0" in rows[64].measured_as
    assert table.best_config() == {"block": 64}  # 0.99x the leader: the true best wins
    assert table.ratio_baseline == "the leader of the rung before"
    assert not [r for r in table.rows if r.label is not None]  # no baseline row of its own
    assert any("rung 1: 2 (full rounds, each beside the leader of rung 0, which is not timed again;" in n
               for n in table.notes)
    assert any("side by side with the fastest of the rung before" in n and "1 by definition" in n
               for n in table.notes)


def test_where_every_other_finalist_fails_the_leader_is_the_best(monkeypatch):
    gpu = SideBySide(monkeypatch, fail_beside=True)
    table = gpu.sweep()
    assert not [k for k, baseline in gpu.calls if baseline is k or baseline == k]
    assert table.best_config() == {"block": 128}
    leader = next(r for r in table.rows if r.best)
    assert leader.ratio == 1.0 and leader.median_ms == pytest.approx(0.98)  # its median of rung 0
    assert "no other finalist was timed beside it" in leader.measured_as
    assert sum(1 for r in table.rows if r.stage == "bench") == 2
    assert any("it is the best, with its median of rung 0" in n for n in table.notes)


def test_the_last_rung_is_timed_beside_the_leader_only_where_a_ratio_is_defined():
    gpu = SweepOptions(strategy="halving")
    assert _halving._side_by_side(gpu, pooled=True)
    assert not _halving._side_by_side(gpu, pooled=False)  # a fake or custom step: not pooled here
    assert not _halving._side_by_side(SweepOptions(strategy="halving", mode="graph"), pooled=True)
    assert not _halving._side_by_side(SweepOptions(strategy="halving", bench_fn=lambda *a, **k: None),
                                            pooled=True)
    assert not _halving._side_by_side(SweepOptions(strategy="halving", target="c"), pooled=True)


# ---------------------------------------------------------------------------------------------
# One lowering per configuration: the compile takes the pruning's lowering
# ---------------------------------------------------------------------------------------------


def _scaled_copy(N, block, scale):
    """B = scale * A for the CPU (target c), ``block`` elements per block."""
    import tilelang.language as T

    @T.prim_func
    def scaled_copy(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.serial(block):
                B[bx * block + i] = A[bx * block + i] * scale

    return scaled_copy


@pytest.fixture
def count_lowerings(monkeypatch):
    """How many times TileLang's lowering pipeline (``BackendContext.lower``) ran, by the kernel's
    content (its IR module as text): the counter sits below anything tilelab wraps."""
    from tilelang.backend.module import BackendContext

    counts: dict[str, int] = {}
    original = BackendContext.lower

    def counted(self, mod):
        counts[str(mod)] = counts.get(str(mod), 0) + 1
        return original(self, mod)

    monkeypatch.setattr(BackendContext, "lower", counted)
    return counts


@pytest.mark.heavy
def test_a_halving_sweep_lowers_each_configuration_once_pruning_and_compile_share_it(count_lowerings, tmp_path,
                                                                                      monkeypatch):
    """Real lowerings and compiles for the CPU (target c), a fake timer: pruning inspects every
    configuration (TileLang's lowering), and the compile of each that survived takes that lowering
    instead of lowering again; later rungs load TileLang's cached kernel. A kernel whose scale is
    drawn for this run keeps TileLang's kernel cache from answering the first compile."""
    import torch

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))  # no inspection report from an earlier run
    scale = round(random.uniform(1.5, 2.5), 6)
    blocks = [16, 32, 64, 128]
    gpu = SweepGpu(v_around_64)
    table = sweep(lambda N, block: _scaled_copy(N, block, scale), {"block": blocks}, {"N": [256]},
                  strategy="halving", eta=2, target="c", bench_fn=gpu.bench, progress=False)
    counts = collections.Counter(config["block"] for _, _, config, _ in gpu.log)
    kernels = {config["block"]: kernel for kernel, _, config, _ in gpu.log}
    assert table.best_config() == {"block": 64}
    assert counts == {16: 1, 32: 2, 64: 2, 128: 1}  # rung 0 for all, the last rung for the best two
    ours = {text: n for text, n in count_lowerings.items() if "scaled_copy" in text}  # (lowered during this test)
    assert len(ours) == len(blocks), sorted(count_lowerings.values())  # each configuration lowered ...
    assert sorted(ours.values()) == [1] * len(blocks)  # ... exactly once
    # the kernels compiled from the shared lowerings compute the right thing
    a = torch.arange(256, dtype=torch.float32)
    for block, kernel in kernels.items():
        checked = tilelab.run(kernel, a, ref=lambda A: A * scale, target="c")
        assert checked.passed and checked.outputs and checked.rel_error < 1e-6, (block, checked)


class DriftingClock(SweepGpu):
    """A fake GPU whose clock moves between calls (as a power-capped one does, boosting after an
    idle moment): measured alone, block=128 reads fast in rung 0 and in rung 1, and block=64 (the
    truth: 0.95x block=128) reads slow in rung 1; measured beside a kernel in one window, the ratio
    is the truth. 27 configurations, eta=3: rung 0 keeps 9, rung 1 keeps 3, rung 2 is the last."""

    BLOCKS = [16 * k for k in range(1, 28)]
    TRUTH = {b: 1.0 + 0.002 * i for i, b in enumerate(b for b in BLOCKS if b not in (64, 128))}
    TRUTH.update({128: 1.0, 64: 0.95})

    def __init__(self, monkeypatch) -> None:
        from tilelab.launch.sweep import _tasks

        monkeypatch.setattr(_tasks, "dumps", lambda obj: None)  # compile tasks in threads
        monkeypatch.setattr(_halving, "_side_by_side", lambda opts, pooled: True)
        monkeypatch.setattr(_halving, "_leader_kernel",
                            lambda f, size, config, opts, compiled=None: compiled.artifact)
        super().__init__(kernel_of=lambda config: {"block": config["block"]})
        self.beside: list[tuple[int, int, float]] = []  # (block, leader block, rep_ms)

    def alone(self, block: int, rung: int) -> float:
        """The median a brief round alone reads: the truth, except the clock's doing."""
        if block == 128:
            return 0.90  # measured right after an idle moment, both times
        if block == 64 and rung == 1:
            return 1.068  # measured at a throttled moment
        return self.TRUTH[block]

    def time(self, kernel, size, config, **kw):
        baseline, block = kw.get("baseline"), kernel["block"]
        rung = round(math.log(kw.get("rep_ms", 20) / 20, 3)) if "rep_ms" in kw else 2
        if baseline is None:
            return timed(self.alone(block, rung))
        self.beside.append((block, baseline["block"], kw.get("rep_ms")))
        ratio = self.TRUTH[block] / self.TRUTH[baseline["block"]]
        leader_ms = 1.01 * self.TRUTH[baseline["block"]]  # the clock of this window
        return timed(ratio * leader_ms, baseline="leader",
                           baseline_samples_ms=(leader_ms,) * 3, ratio_samples=(ratio,) * 12)


def test_rungs_after_the_first_rank_by_the_ratio_to_the_leader_so_a_clock_that_moves_cuts_nobody_wrongly(
        monkeypatch):
    gpu = DriftingClock(monkeypatch)
    # measured alone (by median), rung 1 would cut the true best: block=64 survives rung 0 but is
    # not among the fastest third of rung 1
    rung0 = sorted(gpu.BLOCKS, key=lambda b: gpu.alone(b, 0))[:9]
    assert 64 in rung0 and 64 not in sorted(rung0, key=lambda b: gpu.alone(b, 1))[:3]
    table = sweep(lambda N, block: None, {"block": gpu.BLOCKS}, {"N": [1024]}, strategy="halving", prune=False,
                  devices=[0], compile_fn=gpu.compile, bench_fn=gpu.bench, progress=False, force=True)
    assert table.best_config() == {"block": 64}  # the truth, not the clock
    rows = {dict(r.config)["block"]: r for r in table.rows}
    # rung 1: eight timed beside rung 0's leader (block=128), briefly; the leader not beside itself
    rung1 = [(b, lead) for b, lead, rep in gpu.beside if rep == 60]
    assert len(rung1) == 8 and {lead for _, lead in rung1} == {128} and 128 not in {b for b, _ in rung1}
    # rung 2 (the last): the two others beside rung 1's leader, block=64, in full rounds
    last = [(b, lead) for b, lead, rep in gpu.beside if rep != 60]
    assert len(last) == 2 and {lead for _, lead in last} == {64} and 128 in {b for b, _ in last}
    assert rows[128].ratio == pytest.approx(1 / 0.95) and rows[64].ratio == 1.0
    cut = [r for r in table.rows if r.cut and r.cut.startswith("cut after rung 1")]
    assert len(cut) == 6 and all("to the leader of rung 0, timed beside it" in r.cut for r in cut)
    assert any("rung 1: 8 (60 ms of launches, one round, each beside the leader of rung 0, which is not timed "
               "again;" in n for n in table.notes)
