"""The intra-kernel timeline on the CuTeDSL backend, on a Hopper GPU: the rewrite's PTX record helpers
in a CUDA kernel of known phases (nvcc only), and with nvidia-cutlass-dsl installed the GEMM's
pipeline counts and order as the CUDA backends show them, and outputs bit-identical to the plain
CuTeDSL kernel's."""

from __future__ import annotations

import importlib.util
import math
import pickle
import re
import subprocess

import pytest
from gpu_only import skip_module_without_cuda

skip_module_without_cuda(__name__)

import timeline_kernels  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.engine.toolchain import find_toolchain  # noqa: E402
from tilelab.instrument.decode.timeline import decode  # noqa: E402
from tilelab.instrument.rewrite.timeline import BLOCK_WORDS, CLOCK_BITS, HEADER_WORDS, Site, capacity_needed  # noqa: E402
from tilelab.instrument.rewrite.timeline_cutedsl import _end_ptx, _mark_ptx, _start_ptx  # noqa: E402
from tilelab.kernels.gemm import matmul  # noqa: E402
from tilelab.launch import _timeline as launch_timeline  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.get_device_capability()[0] < 9,
                                 reason="needs a Hopper GPU (TMA, WGMMA, sm_90a)")]
needs_cute_dsl = pytest.mark.skipif(importlib.util.find_spec("cutlass") is None,
                                    reason="needs nvidia-cutlass-dsl (pip install nvidia-cutlass-dsl)")

M = N = K = 1024
BLOCK_K = 64  # matmul's default


def _cuda_asm(ptx: str) -> str:
    """One of the rewrite's PTX blocks (LLVM inline-asm operands ``$N``) as CUDA inline asm text."""
    return " ".join(line.strip() for line in re.sub(r"\$(\d)", r"%\1", ptx.replace("%", "%%")).split("\n"))


def test_the_ptx_record_helpers_record_a_kernel_of_known_phases(tmp_path):
    """The CuTe DSL rewrite's start, mark and end PTX, as they are, in a CUDA kernel of 4 blocks x 384
    threads whose producer warp group spins 4 us five times and whose consumers spin 1 us five
    times (on %globaltimer); blocks 0 and 2 traced per warp group. The decoder must find each
    phase, in each traced warp group's first warp only, as long as it spun."""
    nvcc = find_toolchain().nvcc
    if nvcc is None:
        pytest.skip("needs nvcc")
    sites = [Site(3, "tma_issue", "spin 4 us", "producer", None, None, None, True, multiplicity=5),
             Site(4, "mma", "spin 1 us", "consumer", None, None, None, True, multiplicity=5)]
    blocks, traced, warps, cap = 4, (0, 2), 12, capacity_needed(sites)
    words = blocks * BLOCK_WORDS + len(traced) * warps * (HEADER_WORDS + cap)
    mark = _cuda_asm(_mark_ptx(cap)).replace("@SITE@", '" #S "')
    source = f"""#include <cstdio>
typedef unsigned long long U;
#define MK(S) asm volatile("{mark}" : "=r"(n) : "l"(seg), "r"(n) : "memory")
__device__ void spin(U ns) {{ U t0, t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {{ asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); }} while (t - t0 < ns); }}
__global__ void k(U* buf) {{
  U seg; unsigned n = 0;
  asm volatile("{_cuda_asm(_start_ptx(blocks, traced, warps, 4, blocks * BLOCK_WORDS, HEADER_WORDS + cap))}"
               : "=l"(seg) : "l"(buf) : "memory");
  MK({1 << CLOCK_BITS});
  if (threadIdx.x < 128) {{ for (int i = 0; i < 5; i++) {{ MK({3 << CLOCK_BITS}); spin(4000); MK(0); }} }}
  else {{ for (int i = 0; i < 5; i++) {{ MK({4 << CLOCK_BITS}); spin(1000); MK(0); }} }}
  MK({2 << CLOCK_BITS});
  asm volatile("{_cuda_asm(_end_ptx(blocks))}" :: "l"(seg), "r"(n), "l"(buf) : "memory");
}}
int main() {{
  U* d; cudaMalloc(&d, {words} * 8); cudaMemset(d, 0, {words} * 8);
  k<<<{blocks}, 384>>>(d);
  int err = (int)cudaDeviceSynchronize();
  static U h[{words}]; cudaMemcpy(h, d, {words} * 8, cudaMemcpyDeviceToHost);
  printf("%d\\n", err); for (int i = 0; i < {words}; i++) printf("%llu\\n", h[i]);
}}
"""
    (tmp_path / "helpers.cu").write_text(source)
    subprocess.run([str(nvcc), "-arch=sm_90a", "-o", str(tmp_path / "helpers"), str(tmp_path / "helpers.cu")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(tmp_path / "helpers")], check=True, capture_output=True, text=True).stdout.split()
    assert out[0] == "0"
    buf = [int(x) for x in out[1:]]
    spans, times, _, dropped, _ = decode(buf, sites=sites, grid=(blocks, 1, 1), warps=warps, capacity=cap,
                                         traced_blocks=traced, clock_ghz=1.5)
    assert dropped == 0 and len(times) == blocks and len({t.sm for t in times}) == blocks
    for b in range(blocks):
        mine = [s for s in spans if s.block == (b, 0, 0)]
        if b not in traced:
            assert not mine
            continue
        assert {s.warp for s in mine} == {0, 4, 8}
        for warp, kind, ns in ((0, "tma_issue", 4000), (4, "mma", 1000), (8, "mma", 1000)):
            phases = [s for s in mine if s.warp == warp and s.kind == kind]
            assert [s.iteration for s in phases] == list(range(5))
            assert all(ns - 64 <= s.duration_ns <= ns + 500 for s in phases), [s.duration_ns for s in phases]
        assert times[b].end_ns - times[b].start_ns >= 5 * 4000


@needs_cute_dsl
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


@needs_cute_dsl
@pytest.mark.parametrize("name", list(CASES))
def test_cutedsl_outputs_are_bit_identical_to_the_plain_cutedsl_kernels(name):
    make, inputs, kinds = CASES[name]
    # the CuTeDSL backend needs the "cutedsl" key on the CUDA target: tilelab's compile adds it
    plain = tilelab._tilelang.compile_kernel(make(), out_idx=[-1], backend="cutedsl")
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
