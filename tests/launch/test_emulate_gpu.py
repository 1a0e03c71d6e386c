"""The CPU path agrees with the GPU: each kernel runs on the CPU (``device="cpu"``, two of its
blocks) and on the GPU (TileLang's own compile, every block) on the same inputs, and the elements
the CPU's blocks wrote must equal the GPU's, to the output dtype's tolerance (the GPU sums in
another order). benchmarks/emulation_agreement.py does the same over TileLang's examples."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import emulation_kernels as ek  # noqa: E402
import target_kernels as tk  # noqa: E402
import tilelang.language as T  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402
from tilelab.launch import _inputs, tolerance_for  # noqa: E402


def fp8_mma_tolerance(reduction: int) -> float:
    """Hopper's float8 tensor cores sum products in a narrower accumulator than float32 (about 14
    bits of mantissa; FP8 GEMMs promote to float32 every few K steps to bound it), so a float8 GEMM
    on the GPU differs from the CPU's float32 sums by up to about sqrt(K) * 2^-14, not 2^-24."""
    return 2.0 * reduction ** 0.5 * 2.0 ** -14


def _both_ways(func, shapes, dtypes, outputs, blocks, *, reduction=1, out_idx=None):
    """(elements compared, relative error) of the CPU's blocks against the GPU on one set of inputs."""
    gen = torch.Generator().manual_seed(7)
    names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    args = []
    for name, shape, dtype in zip(names, shapes, dtypes):
        if name in outputs:
            args.append(torch.zeros(shape, dtype=dtype))
        else:
            args.append(torch.randn(shape, generator=gen).to(dtype))
    gpu_args = [a.cuda() for a in args]
    result = tilelab.run(func, *args, device="cpu", blocks=blocks, out_idx=[] if out_idx is None else out_idx,
                         outputs=outputs)
    assert result.passed, result  # every element the blocks wrote is finite
    if func.attrs is not None and "tilelang_out_idx" in func.attrs:  # the GPU kernel takes every tensor too
        func = func.without_attr("tilelang_out_idx")
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    kernel(*gpu_args)
    torch.cuda.synchronize()
    compared, worst = 0, 0.0
    for name in outputs:
        i = names.index(name)
        cpu, gpu = args[i], gpu_args[i].cpu()
        written = ~_inputs.unwritten_mask(cpu, _inputs.POISON)
        n = int(written.sum())
        assert n, f"the CPU's blocks {blocks} wrote no element of {name}"
        a, b = cpu[written].double(), gpu[written].double()
        rel = float((a - b).norm() / b.norm()) if float(b.norm()) else float((a - b).norm())
        ins = [str(t.dtype).replace("torch.", "") for t, nm in zip(args, names) if nm not in outputs]
        tol = tolerance_for(str(cpu.dtype).replace("torch.", ""), ins, reduction=reduction)
        if any(d.startswith("float8") for d in ins):
            tol = max(tol, fp8_mma_tolerance(reduction))
        assert rel <= tol, f"{name}: CPU and GPU differ, relative error {rel:.3e} > {tol:.1e}"
        compared += n
        worst = max(worst, rel)
    return compared, worst


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gemm_tiles_agree(dtype):
    func = tk.gemm_gpu(M=256, N=384, K=256, dtype=T.float16 if dtype == torch.float16 else T.bfloat16)
    compared, _ = _both_ways(func, [(256, 256), (256, 384), (256, 384)], [dtype] * 3, ["C"], [0, 5], reduction=256)
    assert compared == 2 * 128 * 128


def test_nt_gemm_fp8_tiles_agree():
    func = tk.nt_gemm(T.float8_e4m3fn, T.float32)
    compared, worst = _both_ways(func, [(256, 256)] * 3, [torch.float8_e4m3fn, torch.float8_e4m3fn, torch.float32],
                                 ["C"], [0, 3], reduction=256)
    assert compared == 2 * 128 * 128
    assert worst < fp8_mma_tolerance(256)  # the accumulator's precision, not a wrong tile (that is O(1))


def test_flash_attention_tiles_agree():
    func = tk.attention_forward(batch=1, heads=2, seq=256, dim=64)
    shape = (1, 256, 2, 64)
    compared, _ = _both_ways(func, [shape] * 4, [torch.float16] * 4, ["O"], [0, 7], reduction=256)
    assert compared == 2 * 64 * 64


def test_reduction_tiles_agree():
    func = tk.row_sum(M=256, N=128, block_M=16)
    compared, _ = _both_ways(func, [(256, 128), (256,)], [torch.float32] * 2, ["S"], [0, 15], reduction=128)
    assert compared == 32


def test_regression_kernels_agree():
    func = ek.scaled_copy_empty_output.get_tir(M=64, N=96)
    compared, worst = _both_ways(func, [(64, 96), (64, 96)], [torch.float16, torch.float32], ["B"], [0, 5])
    assert compared == 2048 and worst == 0.0
    compared, worst = _both_ways(ek.reshaped_view_copy, [(64, 128)] * 2, [torch.float16] * 2, ["Y"], [0, 3])
    assert compared == 4096 and worst == 0.0


def test_thread_level_kernels_agree():
    """Kernels that say which thread does what (the thread-level rule: loops over the block's
    threads split at barriers, all-reduces and shuffles through staging) compute on the CPU what
    the GPU's threads compute."""
    import thread_kernels as th

    compared, worst = _both_ways(th.strided_scale(N=1000), [(1000,), (1000,)], [torch.float32] * 2, ["Y"], [0, 1])
    assert compared == 1000 and worst < 1e-6
    compared, _ = _both_ways(th.block_sum_share(rows=4, per=256, threads=64), [(4, 256), (4,), (4, 64)],
                             [torch.float32] * 3, ["S", "P"], [0, 3], reduction=256)
    assert compared == 2 + 2 * 64
    compared, _ = _both_ways(th.gemv_allreduce(N=64, K=256), [(64, 256), (256,), (64,)],
                             [torch.float16, torch.float16, torch.float32], ["y"], [0, 15], reduction=256)
    assert compared == 8
    compared, worst = _both_ways(th.warp_max(N=512), [(512,), (4,)], [torch.float32] * 2, ["M"], [0, 3])
    assert compared == 2 and worst == 0.0


def test_split_k_atomic_outputs_agree():
    """Outputs written only by atomic adds start at zero on the CPU path (they are not poisoned):
    every block of a split-K GEMM run on both, the sums agree."""
    import cpu_path_kernels as ck

    compared, _ = _both_ways(ck.splitk_gemm(M=64, N=64, K=128), [(64, 128), (128, 64), (64, 64)],
                             [torch.float16, torch.float16, torch.float32], ["C"], None, reduction=128)
    assert compared == 64 * 64


def test_warp_roles_kernels_agree():
    """Hand-written warp specialisation (the warp-roles rule: each ``T.ws`` region once for its
    group, mbarriers as phase counters in program order) computes on the CPU what the GPU's warp
    groups compute: a producer/consumer GEMM through two mbarriers, a two-stage one through an
    array of them waited on by parity, and per-group code indexed by thread."""
    import ws_kernels as wk

    gemm_shapes = [(wk.M, wk.K), (wk.K, wk.N), (wk.M, wk.N)]
    for func in (wk.handoff_gemm(), wk.staged_gemm(2)):
        compared, _ = _both_ways(func, gemm_shapes, [torch.float16] * 3, ["C"], [0, 3], reduction=wk.K)
        assert compared == 2 * wk.BLOCK_M * wk.BLOCK_N
    compared, worst = _both_ways(wk.per_thread_roles(), [(256,), (256,)], [torch.float32] * 2, ["B"], [0])
    assert compared == 256 and worst == 0.0
