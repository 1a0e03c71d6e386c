"""Device functions written in CUDA C with inline PTX agree on the GPU and on the CPU: the PTX
battery's values on the GPU are the ones derived from the ISA (and the CPU's), and the
dequantisers' outputs are the same bits both ways."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import ptx_kernels as pk  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402


def _on_gpu(func, *args):
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    gpu = [a.cuda() for a in args]
    kernel(*gpu)
    torch.cuda.synchronize()
    return [g.cpu() for g in gpu]


def test_the_ptx_battery_gives_the_isas_values_on_the_gpu_as_on_the_cpu():
    func = pk.ptx_cases()
    gpu = _on_gpu(func, torch.zeros(len(pk.CASES), dtype=torch.int32))[0]
    cpu = torch.zeros(len(pk.CASES), dtype=torch.int32)
    assert tilelab.run(func, cpu, device="cpu", outputs=["Out"]).passed
    got = {name: int(v) & 0xFFFFFFFF for name, v in zip(pk.CASES, gpu.tolist(), strict=True)}
    wrong = {name: (hex(got[name]), hex(pk.EXPECTED[name])) for name in pk.CASES if got[name] != pk.EXPECTED[name]}
    assert not wrong, f"the GPU's values (got, derived): {wrong}"
    assert torch.equal(cpu, gpu)


@pytest.mark.parametrize("factory", [pk.u4_to_f16, pk.fp4_to_bf16, pk.u4_to_f16_scaled])
def test_a_dequantiser_gives_the_same_bits_on_the_gpu_and_the_cpu(factory):
    func = factory()
    gen = torch.Generator().manual_seed(11)
    args = []
    for p in func.params:
        buf = func.buffer_map[p]
        shape, dtype = [int(x) for x in buf.shape], str(buf.dtype)
        if str(buf.name) == "W":
            args.append(torch.zeros(shape, dtype=torch.float16 if dtype == "float16" else torch.bfloat16))
        elif dtype == "float16":
            args.append((torch.rand(shape, generator=gen) * 3).half())
        else:
            packed = torch.randint(0, 256, shape, generator=gen, dtype=torch.int32).to(torch.uint8)
            args.append(packed if dtype == "uint8" else packed.view(torch.int8))
    gpu = _on_gpu(func, *args)[-1]
    cpu = torch.zeros_like(args[-1])
    assert tilelab.run(func, *args[:-1], cpu, device="cpu", outputs=["W"]).passed
    assert torch.equal(cpu.view(torch.int16), gpu.view(torch.int16))


def test_a_gemm_that_dequantises_by_inline_ptx_agrees_with_the_gpu():
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(256, 256, generator=gen).to(torch.bfloat16)
    b = torch.randint(0, 256, (256, 128), generator=gen, dtype=torch.int32).to(torch.uint8)
    func = pk.fp4_gemm()
    gpu = _on_gpu(func, a, b, torch.zeros(256, 256))[2]
    cpu = torch.zeros(256, 256)
    assert tilelab.run(func, a, b, cpu, device="cpu", outputs=["C"], blocks=[0, 3]).passed
    for tile in (slice(0, 128), slice(128, 256)):  # blocks 0 and 3: the tiles (0, 0) and (1, 1)
        rel = float((cpu[tile, tile] - gpu[tile, tile]).norm() / gpu[tile, tile].norm())
        assert rel < 1e-5, rel  # float32 sums of the same bfloat16 products, in another order
