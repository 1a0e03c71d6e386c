"""tilelab.sweep over every GPU of the host, and over a dask-cuda cluster, on real GPUs (marker ``gpu``).

    python -m pytest -m gpu tests/launch/sweep/test_distribute_gpu.py

Behaviour only (every row checked against torch.matmul, where each ran, the final round on the
first GPU, the row cache); the speed-up is measured by benchmarks/sweep_multi_gpu.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[3]


from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import torch  # noqa: E402

from tilelab.launch import sweep  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
import gemm  # noqa: E402

N = 1024
PARAMS = [dict(block_M=128, block_N=128, block_K=32, num_stages=s) for s in (2, 3)] + [
    dict(block_M=128, block_N=256, block_K=64, num_stages=3),
    # 4 stages of 256x128 + 128x256 fp16 tiles: 512 KiB of shared memory, more than any GPU has
    dict(block_M=256, block_N=256, block_K=128, num_stages=4),
]
SIZES = {"M": [N], "N": [N], "K": [N]}
FAST = {"rep_ms": 10, "warmup_ms": 2}


def test_sweep_on_every_gpu_checks_each_configuration_and_resumes_from_the_row_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    count = torch.cuda.device_count()
    table = sweep(gemm.matmul, PARAMS, SIZES, ref=torch.matmul, devices="all", bench_kwargs=FAST, progress=False,
                  baseline={"torch.matmul": lambda M, N, K: _matmul(M, N, K)})
    print(table)
    kernels = [r for r in table.rows if r.label is None]
    assert [r.ok for r in kernels[:3]] == [True, True, True], table
    assert not kernels[3].ok and kernels[3].stage in ("compile", "check", "bench") and kernels[3].error
    assert {r.device for r in kernels[:3]} <= {f"cuda:{i}" for i in range(count)}
    if count > 1:
        assert len({r.device for r in kernels[:3]}) > 1  # the GPUs shared the work
        # so the three leaders rank on the first GPU, each timed there beside the leader
        assert all(r.final_ms and r.final_ratio and r.final_device == "cuda:0" for r in kernels[:3]), table
        assert table.best().final_ratio == min(r.final_ratio for r in kernels[:3])
        assert any(n.startswith("final round:") and "on cuda:0" in n for n in table.notes)
    assert table.device == torch.cuda.get_device_name(0)
    assert all(r.compile_s and r.bench_s for r in kernels[:3])
    assert table.best_call().startswith(f"matmul(M={N}, N={N}, K={N}, block_M=")
    (base,) = table.baselines
    assert base.ok and base.tflops == pytest.approx(2 * N**3 / (base.median_ms * 1e-3) / 1e12)

    again = sweep(gemm.matmul, PARAMS, SIZES, ref=torch.matmul, devices="all", bench_kwargs=FAST, progress=False)
    by_config = {r.config: r for r in again.rows}
    for r in kernels:
        if r.ok or r.stage in ("compile", "check"):
            assert by_config[r.config].cached and by_config[r.config].median_ms == r.median_ms


def _matmul(M, N, K):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    return lambda: torch.matmul(a, b)


def test_sweep_on_a_dask_cuda_cluster(tmp_path, monkeypatch):
    dask_cuda = pytest.importorskip("dask_cuda", reason="dask-cuda is the optional extra tilelab[cluster]")
    from distributed import Client

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    with dask_cuda.LocalCUDACluster(resources={"GPU": 1}, dashboard_address=":0") as cluster, Client(cluster) as client:
        table = sweep(gemm.matmul, PARAMS[:3], SIZES, ref=torch.matmul, client=client, bench_kwargs=FAST,
                      progress=False)
    print(table)
    assert all(r.ok for r in table.rows), table
    assert all(r.device and "GPU" in r.device for r in table.rows)
    assert table.device == torch.cuda.get_device_name(0)


def test_sweep_on_a_dask_cluster_of_one_worker_per_gpu(tmp_path, monkeypatch):
    """A cluster as a user starts one by hand (``dask worker --resources GPU=1`` with
    ``CUDA_VISIBLE_DEVICES`` per worker, which is what dask-cuda's LocalCUDACluster automates), plus
    a CPU-only worker that declares "compile": bench tasks go to the GPU workers only, each row
    checked against torch.matmul and labelled with the worker that timed it."""
    pytest.importorskip("distributed", reason="distributed is the optional extra tilelab[cluster]")
    from distributed import Client, Nanny, Scheduler, SpecCluster

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    count = torch.cuda.device_count()
    workers = {f"gpu{i}": {"cls": Nanny, "options": {"env": {"CUDA_VISIBLE_DEVICES": str(i)}, "nthreads": 1,
                                                     "resources": {"GPU": 1}}} for i in range(count)}
    workers["cpu"] = {"cls": Nanny, "options": {"env": {"CUDA_VISIBLE_DEVICES": ""}, "nthreads": 2,
                                                 "resources": {"compile": 2}}}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        client.wait_for_workers(count + 1, timeout=120)
        table = sweep(gemm.matmul, PARAMS[:3], SIZES, ref=torch.matmul, client=client, bench_kwargs=FAST,
                      progress=False, force=True)
    print(table)
    kernels = [r for r in table.rows if r.label is None]
    assert kernels and all(r.ok for r in kernels), table
    assert {r.device for r in kernels} <= {f"gpu{i} (GPU {i})" for i in range(count)}, [r.device for r in kernels]
    assert table.device == torch.cuda.get_device_name(0)
