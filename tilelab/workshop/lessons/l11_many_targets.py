"""Lesson 11: one kernel for many targets. One tiled GEMM lowered for Hopper (TMA, WGMMA), the MI300
(LDS, MFMA) and the CPU, with what each build's report says predicted before it is shown; then the
student's own GEMM for the three targets, graded by its results on the CPU and its lowerings."""

from __future__ import annotations

from typing import Any

from tilelab.kernels.tiled_gemm import tiled_gemm  # the one tiled GEMM the targets benchmark also lowers
from tilelab.workshop import Wrong, exercise, expect

from ._common_b import build, gemm_on_cpu, gemm_slip, inspect, run_cpu, where_wrong

# ------------------------------------------------------------------------------------------
# Many targets: one tiled GEMM for Hopper, MI300 and the CPU
# ------------------------------------------------------------------------------------------

GEMM_SIZE = (1024, 1024, 1024)
GEMM_TILES = dict(block_M=128, block_N=128, block_K=32)



def target_report(target: str) -> Any:
    return inspect(tiled_gemm(*GEMM_SIZE, **GEMM_TILES, target=target), target)


def _show(target: str, tabs: str = "summary") -> Any:
    import tilelab

    return tilelab.Inspector(target_report(target), show=tabs)


def _shared_tile_bytes(report: Any) -> dict[str, int]:
    from tilelab.swizzle import dtype_bytes

    out = {}
    for lay in report.layouts:
        if lay.scope == "shared":
            size = int(dtype_bytes(lay.dtype))
            for extent in lay.shape:
                size *= int(extent)
            out[lay.buffer] = size
    return out


@exercise("11.1", "LDS on the MI300",
          question="The GEMM (128x128x32 fp16 tiles, T.Pipelined with num_stages=2) built for the MI300 (gfx942): "
                   "how many bytes of LDS (AMD's shared memory) does its kernel ask for?",
          kind="predict",
          hints=("The tiles in LDS are A_tile (block_M x block_K) and B_tile (block_K x block_N), 2 bytes a value.",
                 "The Hopper build keeps one copy of each per stage, because its TMA loads run ahead of the compute.",
                 "A copy per stage is needed only where the loop is software-pipelined (the next tile loads while "
                 "this one is used). Read the MI300 build's device code: does its K loop overlap them?"),
          solution="answer_11_1 = 16384",
          reveal=lambda answer: _show("gfx942"))
def _lds(answer: Any) -> str:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number of bytes, got "
                                                                     f"{answer!r}")
    amd = target_report("gfx942")
    hopper = target_report("sm_90a")
    truth = int(amd.kernels[0].dynamic_shared_memory_bytes)
    tiles = _shared_tile_bytes(amd)
    one_stage = sum(tiles.values())
    if answer == int(hopper.kernels[0].dynamic_shared_memory_bytes) and answer != truth:
        raise Wrong("that is what the Hopper build asks for, a copy of both tiles per stage; the MI300 build "
                    "buffers them differently")
    if tiles and answer in set(tiles.values()) and answer != truth:
        raise Wrong("that is one tile; LDS holds a tile of A and a tile of B")
    if answer == 2 * one_stage and answer != truth:
        raise Wrong("that is a copy of both tiles per stage, which a software-pipelined loop needs; read the MI300 "
                    "build's K loop: does it load the next tile while it computes on this one?")
    if answer * 2 == one_stage:
        raise Wrong("count 2 bytes for each fp16 value")
    expect(answer == truth, "not quite: block_M x block_K + block_K x block_N values, 2 bytes each, and how many "
                            "copies?")
    return (f"{truth} B: A_tile and B_tile once each ({', '.join(f'{k} {v} B' for k, v in tiles.items())}). "
            "TileLang 0.1.15's HIP build of this loop is not software-pipelined: each iteration waits at "
            "__syncthreads for its loads, then computes. The Hopper build asks for "
            f"{int(hopper.kernels[0].dynamic_shared_memory_bytes)} B: a copy per stage, so TMA can load ahead")


@exercise("11.2", "TMA on two GPUs",
          question="How many TMA descriptors does each build of the GEMM encode on the host? Answer a dict "
                   "{\"sm_90a\": ..., \"gfx942\": ...}.",
          kind="predict",
          hints=("A TMA descriptor describes one global tensor that a T.copy moves to or from shared memory by TMA.",
                 "C's tile goes from a register fragment straight to global memory: TMA copies only between global "
                 "and shared memory.",
                 "Does the MI300 have a Tensor Memory Accelerator?"),
          solution='answer_11_2 = {"sm_90a": 2, "gfx942": 0}',
          reveal=lambda answer: _show("sm_90a", "summary,tma"))
def _tma(answer: Any) -> str:
    expect(isinstance(answer, dict) and set(answer) == {"sm_90a", "gfx942"}
           and all(isinstance(x, int) and not isinstance(x, bool) for x in answer.values()),
           f"answer with a dict of two whole numbers, {{\"sm_90a\": ..., \"gfx942\": ...}}, got {answer!r}")
    hopper, amd = target_report("sm_90a"), target_report("gfx942")
    truth = (len(hopper.tma_descriptors), len(amd.tma_descriptors))
    got = (int(answer["sm_90a"]), int(answer["gfx942"]))
    expect(got[1] == truth[1], "the MI300 has no Tensor Memory Accelerator: its threads load the tiles into LDS "
                               "themselves")
    if got[0] == truth[0] + 1:
        raise Wrong("C's tile is stored from registers with plain stores: a TMA store needs the tile staged in "
                    "shared memory first")
    expect(got[0] == truth[0], "not quite for Hopper: one descriptor per global tensor a T.copy moves by TMA")
    names = ", ".join(d.buffer or d.name for d in hopper.tma_descriptors)
    return (f"Hopper {truth[0]}, one for each of {names}; MI300 {truth[1]}: its threads copy the tiles into LDS "
            "themselves")


GEMM_SOLUTION = '''\
def my_gemm(M, N, K, target, block_M=64, block_N=64, block_K=32):
    cpu = target == "c"
    dtype = T.float32 if cpu else T.float16

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            if cpu:
                A_t = T.alloc_local((block_M, block_K), dtype)
                B_t = T.alloc_local((block_K, block_N), dtype)
                C_t = T.alloc_local((block_M, block_N), T.float32)
            else:
                A_t = T.alloc_shared((block_M, block_K), dtype)
                B_t = T.alloc_shared((block_K, block_N), dtype)
                C_t = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_t)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0 if cpu else 2):
                T.copy(A[by * block_M, k * block_K], A_t)
                T.copy(B[k * block_K, bx * block_N], B_t)
                T.gemm(A_t, B_t, C_t)
            T.copy(C_t, C[by * block_M, bx * block_N])

    return gemm


answer_11_3 = my_gemm
'''


@exercise("11.3", "one GEMM, three targets",
          question="Write my_gemm(M, N, K, target): one tiled GEMM C = A B (A (M, K), B (K, N)) for target \"c\" "
                   "(float32, runs here), \"sm_90a\" and \"gfx942\" (fp16). The check runs the CPU build at "
                   "64x96x128 against torch.matmul, and inspects the Hopper build (TMA loads, WGMMA) and the MI300 "
                   "build (MFMA) at 512^3.",
          kind="writes",
          hints=("Start from tiled_gemm above: the tiling, the K loop and T.gemm are the same on every target.",
                 "Only where the tiles live changes: shared memory and a fragment on a GPU, T.alloc_local on the "
                 "CPU.",
                 "A CPU loop has no pipeline: num_stages=0 there."),
          solution=GEMM_SOLUTION)
def _many(answer: Any) -> str:
    import torch

    kernel = build(answer, 64, 96, 128, "c", name="my_gemm")
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(64, 128, generator=g), torch.randn(128, 96, generator=g)
    result = run_cpu(kernel, a, b, ref=torch.matmul)
    if not result.passed:
        said = gemm_slip(lambda other: run_cpu(kernel, a, b, ref=other).passed, 128, 32)
        raise Wrong(f"the CPU build is not A @ B: {said or where_wrong(result)}")
    hopper = inspect(build(answer, 512, 512, 512, "sm_90a", name="my_gemm"), "sm_90a")
    low = hopper.lowering
    expect(hopper.wgmma, "the Hopper build's T.gemm is not on WGMMA: "
           + "; ".join(f"{op.op}: {op.path} {op.reason}" for op in low.ops if op.op.startswith("T.gemm")))
    expect(len(hopper.tma_descriptors) >= 2, "the Hopper build should load A's and B's tiles by TMA (T.copy into "
                                             "shared memory inside T.Pipelined)")
    amd = inspect(build(answer, 512, 512, 512, "gfx942", name="my_gemm"), "gfx942")
    expect(amd.mfma, "the MI300 build's T.gemm does not issue MFMA: its tiles must be in LDS (T.alloc_shared) and "
                     "its accumulator a fragment")
    right = gemm_on_cpu(lambda M, N, K, bm, bn, bk: build(answer, M, N, K, "sm_90a", bm, bn, bk, name="my_gemm"))
    return (f"the CPU build is right; Hopper: {min(w.instruction for w in hopper.wgmma)} WGMMA with "
            f"{len(hopper.tma_descriptors)} TMA loads, its tile program {right}; MI300: "
            f"{amd.mfma[0].m}x{amd.mfma[0].n}x{amd.mfma[0].k} MFMA")


wrong_answers = {
    "11.1": ("answer_11_1 = 32768", "answer_11_1 = 8192", "answer_11_1 = 8192 + 8192 // 2"),
    "11.2": ('answer_11_2 = {"sm_90a": 3, "gfx942": 0}', 'answer_11_2 = {"sm_90a": 2, "gfx942": 2}',
             'answer_11_2 = {"sm_90a": 1, "gfx942": 0}'),
    "11.3": (GEMM_SOLUTION.replace("cpu = target == \"c\"", "cpu = False"),
             GEMM_SOLUTION.replace("                A_t = T.alloc_shared((block_M, block_K), dtype)\n"
                                   "                B_t = T.alloc_shared((block_K, block_N), dtype)\n"
                                   "                C_t = T.alloc_fragment((block_M, block_N), T.float32)",
                                   "                A_t = T.alloc_local((block_M, block_K), dtype)\n"
                                   "                B_t = T.alloc_local((block_K, block_N), dtype)\n"
                                   "                C_t = T.alloc_local((block_M, block_N), T.float32)")),
}
