"""The intra-kernel timeline on the CuTeDSL backend, on a Hopper GPU with nvidia-cutlass-dsl installed:
the GEMM's pipeline counts and order as the CUDA backends show them, and outputs bit-identical to the
plain CuTeDSL kernel's."""

from __future__ import annotations

import importlib.util
import math
import pickle

import pytest
from gpu_only import skip_module_without_cuda

skip_module_without_cuda(__name__)
if importlib.util.find_spec("cutlass") is None:
    pytest.skip(f"{__name__}: needs nvidia-cutlass-dsl (pip install nvidia-cutlass-dsl)", allow_module_level=True)

import tilelang  # noqa: E402
import timeline_kernels  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.kernels.gemm import matmul  # noqa: E402
from tilelab.launch import _timeline as launch_timeline  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.get_device_capability()[0] < 9,
                                 reason="needs a Hopper GPU (TMA, WGMMA, sm_90a)")]

M = N = K = 1024
BLOCK_K = 64  # matmul's default


def test_the_cutedsl_gemm_pipeline_counts_and_order():
    tl = tilelab.timeline(matmul(M, N, K), blocks=(0, 5), backend="cutedsl", overhead=False)
    k_tiles = math.ceil(K / BLOCK_K)
    assert tl.backend == "cutedsl" and tl.threads == 384
    assert tl.dropped == 0 and len(tl.traced_blocks) == 2
    for block in tl.traced_blocks:
        mine = [s for s in tl.spans if s.block == block]
        issues = [s for s in mine if s.kind == "tma_issue"]
        assert len(issues) == k_tiles
        consumer_groups = sorted({s.warp_group for s in mine if s.role == "consumer"})
        assert consumer_groups == [1, 2]
        for wg in consumer_groups:
            assert len([s for s in mine if s.kind == "mma" and s.warp_group == wg]) == k_tiles
        for warp in {s.warp for s in mine}:
            starts = [s.start_ns for s in mine if s.warp == warp]
            assert starts == sorted(starts)
            assert all(s.end_ns >= s.start_ns for s in mine if s.warp == warp)
        empties = {s.iteration: s for s in mine if s.kind == "barrier_wait" and s.role == "producer"}
        for issue in issues:
            k = issue.iteration
            assert empties[k].end_ns <= issue.start_ns  # the stage was free before its loads were issued
            for wg in consumer_groups:
                (full,) = [s for s in mine if s.kind == "barrier_wait" and s.role == "consumer"
                           and s.warp_group == wg and s.iteration == k and "stage full" in s.label]
                assert full.end_ns >= issue.start_ns  # the consumer's wait ended after the issue began
    assert len(tl.flows) == 2 * 2 * k_tiles
    assert {b.index for b in tl.blocks} == set(range((M // 128) * (N // 256)))  # every block's start and end
    s = tl.summary
    print(f"cutedsl gemm: consumer busy {s.roles[1].busy:.0%}, waiting {s.roles[1].waiting:.0%}; "
          f"bubbles {s.bubbles}; run-ahead {s.run_ahead}; grid {s.grid_ns:.0f} ns; notes {tl.notes}")


def _bitwise_same(a, b) -> bool:
    a, b = a.contiguous().cpu(), b.contiguous().cpu()
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


CASES = {
    "gemm": (lambda: matmul(M, N, K), lambda: [torch.randn(M, K, device="cuda").half(),
                                               torch.randn(K, N, device="cuda").half()],
             {"tma_issue", "mma", "mma_wait", "barrier_wait", "epilogue"}),
    "add": (lambda: timeline_kernels.add(), lambda: [torch.randn(1 << 20, device="cuda") for _ in range(2)],
            {"kernel"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cutedsl_outputs_are_bit_identical_to_the_plain_cutedsl_kernels(name):
    make, inputs, kinds = CASES[name]
    plain = tilelang.compile(make(), out_idx=[-1], execution_backend="cutedsl")
    args = inputs()
    expected = plain(*args)
    torch.cuda.synchronize()
    func = plain.prim_func
    payload = pickle.dumps((func, [len(func.params) - 1], plain.target, "cutedsl", {}))
    grid = tilelab._tilelang.launch_dims(plain)[0]
    capture = launch_timeline.capture_launch(payload, args, {"grid": grid, "traced": (0,), "granularity": "warp",
                                                              "overhead": False, "keep_outputs": True})
    (got,) = capture.outputs
    assert _bitwise_same(got, expected.cpu())
    tl = launch_timeline.build_timeline(capture, name, "cutedsl", tuple(grid), "warp")
    print(f"cutedsl {name}: {len(tl.spans)} spans, kinds {sorted({s.kind for s in tl.spans})}, dropped {tl.dropped}")
    assert tl.dropped == 0
    assert kinds <= {s.kind for s in tl.spans}
    assert {s.warp for s in tl.spans} == set(range(capture.instrumented.warps))  # granularity "warp": every warp
