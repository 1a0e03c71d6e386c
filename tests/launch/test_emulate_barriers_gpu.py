"""The thread-level rule's mbarriers agree with the GPU: tests/barrier_kernels.py's relay (groups of
threads handing tiles through mbarriers, arrivals counted thread by thread) run on the CPU and by
TileLang's own compile on the GPU, on the same input: the two outputs agree to float32's rounding
(each element is a sum of four float32 values in the same order on both), and with torch's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import barrier_kernels as bk  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402


def test_the_relay_on_the_cpu_equals_the_relay_on_the_gpu():
    torch.manual_seed(3)
    a = torch.randn(bk.TILES * bk.TILE * bk.BLOCKS)
    c_cpu = torch.zeros(bk.TILE * bk.BLOCKS)
    result = tilelab.run(bk.relay(), a, c_cpu, device="cpu", out_idx=[], outputs=["C"], ref=bk.reference)
    assert result.passed, result
    kernel = _tilelang.compile_kernel(bk.relay(), target=_tilelang.local_gpu_arch(), out_idx=None)
    a_gpu, c_gpu = a.cuda(), torch.zeros(bk.TILE * bk.BLOCKS, device="cuda")
    kernel(a_gpu, c_gpu)
    torch.cuda.synchronize()
    assert torch.allclose(c_gpu.cpu(), c_cpu, rtol=1e-6, atol=1e-6), (c_gpu.cpu() - c_cpu).abs().max()
    assert torch.allclose(c_cpu, bk.reference(a), rtol=1e-6, atol=1e-6)
