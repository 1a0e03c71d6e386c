"""Kernels that call a device function written in CUDA C with inline PTX (``T.import_source``) run
on the CPU with the function's meaning (the imported-source rule, tilelab/_tilelang/emulate_ptx.py):
the PTX battery through the whole CPU path, and dequantisers checked against torch references, a
wrong variant of each caught."""

from __future__ import annotations

import ptx_kernels as pk
import pytest
import torch

import tilelab


@pytest.mark.heavy  # the table's own test (tests/_tilelang/test_emulate_ptx.py) runs the battery quickly
def test_the_ptx_battery_computes_through_a_kernel_what_the_isa_defines():
    out = torch.zeros(len(pk.CASES), dtype=torch.int32)
    result = tilelab.run(pk.ptx_cases(), out, device="cpu", outputs=["Out"])
    assert result.passed, result
    got = {name: int(v) & 0xFFFFFFFF for name, v in zip(pk.CASES, out.tolist(), strict=True)}
    wrong = {name: hex(got[name]) for name in pk.CASES if got[name] != pk.EXPECTED[name]}
    assert not wrong, wrong


@pytest.mark.parametrize("factory, ref, bug", [
    (pk.u4_to_f16, pk.u4_to_f16_ref, "lut"),
    pytest.param(pk.fp4_to_bf16, pk.fp4_to_bf16_ref, "mantissa", marks=pytest.mark.heavy),
])
def test_a_dequantiser_in_inline_ptx_matches_torch_and_its_wrong_variant_fails(factory, ref, bug):
    gen = torch.Generator().manual_seed(3)
    kernel = factory()
    n, k2 = (int(x) for x in kernel.buffer_map[kernel.params[0]].shape)
    packed = torch.randint(0, 256, (n, k2), generator=gen, dtype=torch.int32)
    b = packed.to(torch.uint8) if "uint8" in str(kernel.buffer_map[kernel.params[0]].dtype) else \
        packed.to(torch.uint8).view(torch.int8)
    result = tilelab.run(kernel, b, device="cpu", ref=ref, outputs=["W"])
    assert result.passed, result
    assert "imported" in " ".join(result.notes)
    wrong = tilelab.run(factory(bug=bug), b, device="cpu", ref=ref, outputs=["W"])
    assert not wrong.passed


@pytest.mark.heavy
def test_a_dequantiser_with_a_float16_scale_rounds_its_fma_once():
    gen = torch.Generator().manual_seed(4)
    b = torch.randint(-128, 128, (16, 32), generator=gen, dtype=torch.int32).to(torch.int8)
    scale = (torch.rand(16, generator=gen) * 3).half()
    result = tilelab.run(pk.u4_to_f16_scaled(), b, scale, device="cpu", ref=pk.u4_to_f16_scaled_ref, outputs=["W"])
    assert result.passed, result


def test_the_float16_buffer_reaches_the_function_as_its_bits():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    emulation = rewrite_for_cpu(pk.u4_to_f16(), "u4_to_f16")
    text = str(emulation.func)
    assert "imported" in emulation.applied
    assert "values_bits" in text and "tilelab_call_u4_to_f16_0" in text
    assert 'T.call_extern("handle", "u4_to_f16"' not in text


@pytest.mark.heavy
@pytest.mark.slow
def test_a_mixed_precision_gemm_whose_threads_dequantise_by_inline_ptx_matches_torch():
    """The shape of a Hopper bf16 x float4 GEMM at an example's size (256^3): each block's threads
    decode its tile of B in shared memory through the imported function, then a T.gemm."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(256, 256, generator=gen).to(torch.bfloat16)
    b = torch.randint(0, 256, (256, 128), generator=gen, dtype=torch.int32).to(torch.uint8)
    c = torch.zeros(256, 256, dtype=torch.float32)
    result = tilelab.run(pk.fp4_gemm(), a, b, c, device="cpu", ref=pk.fp4_gemm_ref, outputs=["C"])
    assert result.passed, result
    wrong = tilelab.run(pk.fp4_gemm(bug="mantissa"), a, b, c, device="cpu", ref=pk.fp4_gemm_ref, outputs=["C"],
                        blocks=[0])
    assert not wrong.passed
