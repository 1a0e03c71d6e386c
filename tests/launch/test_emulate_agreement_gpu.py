"""The CPU path's newer meanings agree with the GPU: each kernel below is built for this machine's
GPU by TileLang and run there, and run on the CPU through ``tilelab.run(device="cpu")``, on the
same inputs; their outputs are compared bit for bit where the GPU's result is exactly defined
(IEEE roundings with a mode, integer bit operations, curand's Philox words, packed pairs, a warp's
elected lane) and within the GPU's fast-math error where TileLang builds with it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import intrinsic_kernels as ik  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "int32": torch.int32, "uint32": torch.uint32, "int8": torch.int8, "uint8": torch.uint8}


def _inputs(func, outputs, seed=5):
    gen = torch.Generator().manual_seed(seed)
    args = []
    for p in func.params:
        buf = func.buffer_map[p]
        shape, dtype = [int(x) for x in buf.shape], TORCH_DTYPES[str(buf.dtype)]
        if str(buf.name) in outputs:
            args.append(torch.zeros(shape, dtype=dtype))
        elif dtype.is_floating_point:
            values = torch.rand(shape, generator=gen) * 6 - 3
            args.append(torch.where(values.abs() < 0.05, torch.full_like(values, 0.5), values).to(dtype))
        else:
            args.append(torch.randint(-2**31, 2**31 - 1, shape, generator=gen, dtype=torch.int64).to(torch.int32))
    return args


def _both_ways(func, outputs):
    args = _inputs(func, outputs)
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    gpu = [a.cuda() for a in args]
    kernel(*gpu)
    torch.cuda.synchronize()
    cpu = [a.clone() for a in args]
    result = tilelab.run(func, *cpu, device="cpu", outputs=list(outputs))
    assert result.passed, result
    names = [str(func.buffer_map[p].name) for p in func.params]
    return {n: (c, g.cpu()) for n, c, g in zip(names, cpu, gpu, strict=True) if n in outputs}


def _same_bits(cpu, gpu):
    if cpu.dtype.is_floating_point:
        both_nan = cpu.isnan() & gpu.isnan()
        cpu, gpu = torch.where(both_nan, 0, cpu), torch.where(both_nan, 0, gpu)
        return torch.equal(cpu.view(torch.int32), gpu.view(torch.int32))
    return torch.equal(cpu, gpu)


def _where_differ(cpu, gpu):
    diff = (cpu != gpu) & ~(cpu.isnan() & gpu.isnan()) if cpu.dtype.is_floating_point else cpu != gpu
    idx = diff.nonzero()[:5].tolist()
    return [(i, cpu[tuple(i)].item(), gpu[tuple(i)].item()) for i in idx]


def test_ieee_roundings_with_a_mode_are_the_gpus_bits():
    out = _both_ways(ik.ieee_rounding(), {"R"})
    cpu, gpu = out["R"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_philox_words_and_uniforms_are_the_gpus_and_normals_within_its_fast_math():
    out = _both_ways(ik.philox(threads=32, draws=6, seed=12345, offset=3, first_seq=7), {"W", "U", "G"})
    for name in ("W", "U"):
        cpu, gpu = out[name]
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))
    cpu, gpu = out["G"]
    torch.testing.assert_close(cpu, gpu, rtol=1e-5, atol=1e-5)


def test_the_math_group_bits_exactly_and_floats_within_fast_math():
    out = _both_ways(ik.math_group(), {"F", "K"})
    cpu, gpu = out["K"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)
    cpu, gpu = out["F"]
    finite = cpu.isfinite() & gpu.isfinite()
    assert torch.equal(cpu.isfinite(), gpu.isfinite())
    torch.testing.assert_close(cpu[finite], gpu[finite], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("factory,outputs", [(ik.packed_pairs, {"P"}), (ik.elect, {"E"})])
def test_packed_pairs_and_an_elected_lane_are_the_gpus(factory, outputs):
    for name, (cpu, gpu) in _both_ways(factory(), outputs).items():
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))
