"""``strategy="halving"`` and ``strategy="optuna"`` over several GPUs of the host, on real GPUs
(marker ``gpu``; skipped, with the reason, on fewer than two):

    python -m pytest -m gpu tests/launch/sweep/test_strategies_gpu.py

Each search runs on every GPU (its rows measured on more than one), ranks on one GPU in one final
round, and finds the configuration the same search finds on one GPU, in a space where one
configuration is well ahead of the others (128x256 tiles in 4 stages against 128x128 tiles or 2
stages). Every row is checked against torch.matmul. Every GPU's launch worker is started first:
these sweeps are seconds long, and a GPU whose worker is still starting takes no row meanwhile.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.kernels.gemm import BEST_8192, matmul  # noqa: E402

SIZE = [dict(M=4096, N=4096, K=4096)]
# a product (Optuna samples each parameter; a list of configurations would be mostly outside it)
SPACE = {**{k: [v] for k, v in BEST_8192.items()}, "block_N": [128, 256], "num_stages": [2, 4]}
FAST = {"rep_ms": 100, "steady": False}


def torch_matmul(M, N, K):
    return torch.matmul  # called with each configuration's own inputs, beside it


@pytest.mark.parametrize("strategy, options", [("halving", {"eta": 2, "brief_ms": 20}),
                                               ("optuna", {"n_trials": 4, "seed": 0})])
def test_a_search_over_several_gpus_runs_on_each_and_finds_the_best_one_gpu_finds(strategy, options, tmp_path,
                                                                                 monkeypatch):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"a search over several GPUs needs two; this machine has {torch.cuda.device_count()}")
    if strategy == "optuna":
        pytest.importorskip("optuna", reason="strategy=\"optuna\" needs Optuna (pip install tilelab[optuna])")
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    from tilelab.launch.sweep._tasks import warm_launch_worker

    gpus = list(range(min(torch.cuda.device_count(), 4)))
    with ThreadPoolExecutor(len(gpus)) as pool:
        list(pool.map(warm_launch_worker, gpus))
    common = dict(strategy=strategy, ref=torch.matmul, baseline={"torch.matmul": torch_matmul}, rank_by="ratio",
                  bench_kwargs=FAST, progress=False, force=True, **options)
    one = tilelab.sweep(matmul, SPACE, SIZE, devices=gpus[:1], **common)
    many = tilelab.sweep(matmul, SPACE, SIZE, devices=gpus, **common)
    print(repr(one))
    print(repr(many))
    rows = [r for r in many.rows if r.label is None]
    assert len(rows) == 4 and all(r.ok for r in rows), many
    assert len({r.device for r in rows}) > 1, many  # the GPUs shared the work
    assert {r.device for r in rows} <= {f"cuda:{g}" for g in gpus}
    assert one.best_config() == many.best_config() == BEST_8192, (one, many)
    assert len([n for n in many.notes if n.startswith("final round:")]) <= 1  # one round, on one GPU
    assert len({r.final_device for r in rows if r.final_ratio is not None}) <= 1
