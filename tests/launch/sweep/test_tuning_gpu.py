"""bench(kernel, baseline=...) and sweeps ranked by ratio on a real GPU, and the flash-attention
forward checked against torch (marker ``gpu``; skipped, with the reason, without one).

Run on a machine with a CUDA GPU:  make test-gpu PYTEST_ARGS=tests/launch/sweep/test_tuning_gpu.py
About two minutes on an H100; figures are printed (pytest -s).
"""

from __future__ import annotations

import statistics

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.kernels.flash_attention import attention_reference, flash_attention  # noqa: E402
from tilelab.kernels.gemm import matmul, matmul_best  # noqa: E402

N = 4096


@pytest.fixture(scope="module")
def gemm():
    return tilelang.compile(matmul_best(N, N, N), out_idx=[2])


def _spread(values):
    return (max(values) - min(values)) / statistics.median(values)


def test_ratio_to_torch_matmul_holds_across_calls_better_than_the_medians(gemm):
    """Four back-to-back default calls against torch.matmul (a picklable function of the
    kernel's inputs: both run in the worker, side by side)."""
    calls = [tilelab.bench(gemm, baseline=torch.matmul) for _ in range(4)]
    ratios = [c.ratio for c in calls]
    medians = [c.median_ms for c in calls]
    for c in calls:
        print(f"median {c.median_ms:.4f} ms, torch.matmul {c.baseline_ms:.4f} ms, ratio {c.ratio:.4f} "
              f"[{c.ratio_ci[0]:.4f}, {c.ratio_ci[1]:.4f}], {len(c.ratio_samples)} pairs")
    print(f"spread: medians {100 * _spread(medians):.3f}%, ratios {100 * _spread(ratios):.3f}%")
    assert all(c.baseline == "torch.matmul" and c.ratio_ci is not None for c in calls)
    assert all(abs(c.median_ms / c.baseline_ms / c.ratio - 1) < 0.05 for c in calls)  # the ratio is of these two
    assert _spread(ratios) < _spread(medians)


def test_a_kernel_against_itself_reads_one_and_a_lambda_runs_here(gemm):
    same = tilelab.bench(gemm, baseline=gemm, rep_ms=300, ci_target=None)  # two kernels in the worker
    print(f"itself: {same.ratio:.4f} [{same.ratio_ci[0]:.4f}, {same.ratio_ci[1]:.4f}]")
    assert 0.98 < same.ratio < 1.02
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    res = tilelab.bench(gemm, a, b, baseline=lambda: torch.matmul(a, b), rep_ms=300, ci_target=None)
    assert any("timed in this process" in n for n in res.notes)
    assert 0.5 < res.ratio < 2.0 and res.baseline == "baseline"


def test_a_kernel_baseline_with_other_inputs_is_refused(gemm):
    other = tilelang.compile(matmul(N // 2, N, N), out_idx=[2])
    with pytest.raises(tilelab.TilelabError, match="cannot run on the inputs of"):
        tilelab.bench(gemm, baseline=other, isolate=False, rep_ms=50)


def test_sweep_ranked_by_ratio_gives_every_row_its_ratio():
    def torch_matmul(M, N, K):
        return torch.matmul  # called with each configuration's own inputs

    space = [dict(block_M=128, block_N=256, block_K=64, num_stages=s, threads=256, raster=10, smem_epilogue=True)
             for s in (3, 4)]
    table = tilelab.sweep(matmul, space, [dict(M=2048, N=2048, K=2048)], baseline={"torch.matmul": torch_matmul},
                          rank_by="ratio", bench_kwargs={"rep_ms": 200, "ci_target": None}, progress=False)
    print(repr(table))
    rows = [r for r in table.rows if r.label is None]
    assert all(r.ok and r.ratio is not None and r.ratio_ci is not None for r in rows)
    assert table.best().ratio == min(r.ratio for r in rows)


def test_a_halving_sweep_on_the_gpu_compiles_each_configuration_once_and_warms_the_launch_worker(monkeypatch):
    """Later rungs time the artifact of each configuration's one compile task (none is submitted
    again), the leader the last rung is timed beside is loaded from its artifact (compiling it
    again here would fail: the last rung would then rank by median), and the GPU's launch worker
    is started by the warm-up on its bench thread, not by the first row."""
    import threading

    from tilelab.launch import _worker
    from tilelab.launch.sweep import _runners, _tasks

    submitted = []
    compile_task = _runners.LocalRunner.compile

    def counted(self, index, step):
        submitted.append(index)
        return compile_task(self, index, step)

    warmed = []
    warm = _tasks.warm_launch_worker

    def counted_warm(device):
        warmed.append((device, threading.current_thread().name))
        warm(device)

    monkeypatch.setattr(_runners.LocalRunner, "compile", counted)
    monkeypatch.setattr(_tasks, "warm_launch_worker", counted_warm)
    monkeypatch.setattr(_tasks, "default_compile", lambda *a, **k: pytest.fail("the leader was compiled again"))
    space = [dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=256, raster=r, smem_epilogue=True)
             for bn in (128, 256) for st in (3, 4) for r in (0, 10)]  # 8 configurations
    space.append(dict(block_M=256, block_N=256, block_K=128, num_stages=4, threads=256, raster=10,
                      smem_epilogue=False))  # pruned in its compile task
    table = tilelab.sweep(matmul, space, [dict(M=2048, N=2048, K=2048)], strategy="halving", eta=2,
                          bench_kwargs={"rep_ms": 200, "ci_target": None}, progress=False)
    print(repr(table))
    assert len(submitted) == len(space)  # rungs of 8, 4 and 2: one compile task per configuration
    assert sorted({r.rung for r in table.rows if r.ok}) == [0, 1, 2]
    assert table.ratio_baseline == "the leader of the rung before"  # the leader's kernel came from its artifact
    device = torch.cuda.current_device()
    assert warmed and all(w == (device, f"tilelab-bench-cuda:{device}") for w in warmed)  # once per rung
    assert _worker.default_worker(device).alive


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_attention_forward_matches_torch(is_causal):
    kernel = tilelang.compile(flash_attention(2, 4, 512, 128, block_M=64, block_N=64, num_stages=2, threads=128,
                                              is_causal=is_causal), out_idx=[3])
    q, k, v = (torch.randn(2, 512, 4, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kernel(q, k, v)
    ref = attention_reference(q, k, v, is_causal)
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    print(f"causal={is_causal}: relative error {err:.2e}")
    assert err < 1e-2


def test_halving_on_the_gpu_compiles_in_processes_and_prunes_in_its_compile_tasks():
    """The halving sweep on this process's GPU: compiles in a pool of processes, each configuration
    inspected in its compile task first (256x256x128 tiles in 4 stages ask for 512 KiB of shared
    memory: pruned with the reason, never launched), the rest measured briefly, the last rung in full
    beside the leader of the rung before."""
    space = [dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=256, raster=10, smem_epilogue=True)
             for bn in (128, 256) for st in (3, 4)]
    space.append(dict(block_M=256, block_N=256, block_K=128, num_stages=4, threads=256, raster=10,
                      smem_epilogue=False))
    table = tilelab.sweep(matmul, space, [dict(M=2048, N=2048, K=2048)], strategy="halving", progress=False)
    print(repr(table))
    (pruned,) = [r for r in table.rows if r.stage == "pruned"]
    assert dict(pruned.config)["block_K"] == 128 and "a launch would fail" in pruned.error
    assert all(r.ok for r in table.rows if r.stage != "pruned")
    assert any(n.startswith("compiled in a pool of processes, measured on cuda:") for n in table.notes)
    best = table.best()
    assert best is not None and best.measured_as.startswith("rung 1: ")
    # 4 measured briefly; of the 2 fastest, rung 0's leader is the reference (ratio 1 by definition,
    # not timed against itself) and the other is timed in full beside it: ranked by their ratios to it
    finals = [r for r in table.rows if r.ok and r.rung == 1]
    assert len(finals) == 2 and all(r.ratio is not None for r in finals)
    (leader,) = [r for r in finals if "ratio 1 by definition" in r.measured_as]
    (other,) = [r for r in finals if r is not leader]
    assert leader.ratio == 1.0 and leader.median_ms == other.baseline_ms  # its median in the other's window
    # no warm-up to a steady clock before those rounds: the clock cancels in the ratio
    assert other.measured_as == ("rung 1: full rounds (sustained), side by side with the leader of rung 0 "
                                 "(no warm-up to a steady clock: it cancels in the ratio)")
    assert best.ratio == min(r.ratio for r in finals) and table.ratio_baseline == "the leader of the rung before"


def _count_lowerings(monkeypatch):
    """How many times TileLang's lowering pipeline (``BackendContext.lower``) ran in this process,
    by the kernel's global symbol and shape text."""
    from tilelang.backend.module import BackendContext

    counts: dict[str, int] = {}
    original = BackendContext.lower

    def counted(self, mod):
        counts[str(mod)] = counts.get(str(mod), 0) + 1
        return original(self, mod)

    monkeypatch.setattr(BackendContext, "lower", counted)
    return counts


def test_a_halving_sweep_on_the_gpu_lowers_each_configuration_once(monkeypatch, tmp_path):
    """Pruning inspects each configuration in its compile task (TileLang's lowering) and the compile
    takes that lowering: one lowering per configuration, every row checked against torch.matmul.
    Compile tasks run in threads of this process here (so the counter sees them); K is drawn for
    this run, so TileLang's kernel cache cannot answer the first compile."""
    import random

    from tilelab.launch.sweep import _tasks

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))  # no inspection report from an earlier run
    monkeypatch.setattr(_tasks, "dumps", lambda obj: None)  # compile tasks in threads, in this process
    counts = _count_lowerings(monkeypatch)
    k = 1024 + 64 * random.randint(1, 60)
    space = [dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=256, raster=10, smem_epilogue=True)
             for bn in (128, 256) for st in (3, 4)]
    table = tilelab.sweep(matmul, space, [dict(M=1024, N=1024, K=k)], strategy="halving", eta=2, brief_ms=5,
                          ref=torch.matmul, bench_kwargs={"rep_ms": 50, "ci_target": None}, progress=False)
    print(repr(table))
    print(sorted(counts.values()))
    rows = [r for r in table.rows if r.label is None]
    assert all(r.ok for r in rows) and table.best() is not None
    ours = [n for text, n in counts.items() if f"{k}" in text]
    assert len(ours) == len(space) and ours == [1] * len(space), sorted(counts.values())


def test_the_multi_gpu_final_round_ranks_its_finalists_by_ratio():
    """A sweep over two GPUs: its configurations (finalists=4: all of them, so that the finalists
    ran on both GPUs) ranked on one GPU, each side by side with the leader (rank_by="median", on
    cuda:0) or with torch.matmul (rank_by="ratio", on the GPU that measured the most of them, whose
    ratios stand), by those ratios."""
    if torch.cuda.device_count() < 2:
        pytest.skip(f"the final round needs two GPUs; this machine has {torch.cuda.device_count()}")

    def torch_matmul(M, N, K):
        return torch.matmul  # called with each configuration's own inputs

    space = [dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=256, raster=10, smem_epilogue=True)
             for bn in (128, 256) for st in (3, 4)]
    size = [dict(M=2048, N=2048, K=2048)]
    fast = {"rep_ms": 100, "ci_target": None}
    for rank_by, reference in (("median", "the sweep's fastest at each size"), ("ratio", "torch.matmul")):
        table = tilelab.sweep(matmul, space, size, devices=[0, 1], force=True, progress=False, bench_kwargs=fast,
                              finalists=4, baseline={"torch.matmul": torch_matmul}, rank_by=rank_by)
        print(repr(table))
        rows = [r for r in table.rows if r.label is None]
        assert all(r.ok for r in rows) and len({r.device for r in rows}) == 2
        finalists = [r for r in rows if r.final_ratio is not None]
        assert len(finalists) == 4, table
        (final,) = {r.final_device for r in finalists}  # one GPU ranks them all
        assert all(r.final_ms for r in finalists)
        if rank_by == "median":  # every finalist but the leader timed again on the first GPU
            assert final == "cuda:0"
        else:  # where the most finalists' ratios were measured (the first GPU on a tie): they stand
            measured = [r.device for r in finalists]
            assert measured.count(final) >= max(measured.count(d) for d in ("cuda:0", "cuda:1"))
        assert table.final_reference == reference
        assert table.best().final_ratio == min(r.final_ratio for r in finalists)
        if rank_by == "median":  # the leader is the reference: 1, the others with an interval
            assert sorted(r.final_ratio_ci is None for r in finalists) == [False, False, False, True]
            assert any(r.final_ratio == 1.0 for r in finalists)
            assert any("side by side with the leader of its size" in n for n in table.notes)
        else:
            assert all(r.final_ratio_ci is not None and 0.3 < r.final_ratio < 3 for r in finalists)
            assert any("side by side with torch.matmul" in n for n in table.notes)
