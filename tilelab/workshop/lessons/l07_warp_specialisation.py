"""Lesson 07: warp specialisation. Why a pipelined Hopper kernel asked for ``threads=256``
launches 384 threads, which threads produce and which consume, how the two roles hand stages to
each other, and a kernel of the student's that TileLang warp-specialises. Every truth is read from
``tilelab.inspect`` of the kernel for sm_90a: no GPU is needed."""

from __future__ import annotations

import re
from typing import Any

from tilelab.workshop import Wrong, exercise, expect

from ._common_b import build, gemm_on_cpu, inspect, on_gpu

SIZE = (512, 512, 512)
TILES = dict(block_M=128, block_N=128, block_K=32)


def lesson_gemm(threads: int = 256, num_stages: int = 3) -> Any:
    """The lesson's fp16 GEMM: 128x128x32 tiles, a pipelined loop over K, ``threads`` threads."""
    from tilelab.kernels.gemm import matmul

    return matmul(*SIZE, **TILES, num_stages=num_stages, threads=threads, raster=0)


def lesson_report(threads: int = 256, num_stages: int = 3) -> Any:
    return inspect(lesson_gemm(threads, num_stages), "sm_90a")


def _reveal(report: Any) -> Any:
    import tilelab

    return tilelab.Inspector(report, show="summary,cuda")


def _whole(answer: Any, what: str) -> None:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number of {what}, "
                                                                     f"got {answer!r}")


@exercise("07.1", "how many threads a block launches",
          question="The GEMM is written with threads=256 and a T.Pipelined loop of T.copy into shared memory. "
                   "How many threads does each block of its sm_90a build launch?",
          kind="predict",
          hints=("threads= is what the computing part of the kernel asks for.",
                 "On sm_90 TileLang gives the loads of a pipelined loop to threads of their own (TMA needs only one "
                 "thread to issue a copy, but registers are handed out per warpgroup).",
                 "A warpgroup is 4 warps of 32 threads; TileLang adds one for the loads."),
          solution="answer_07_1 = 384",
          reveal=lambda answer: _reveal(lesson_report()))
def _threads(answer: Any) -> str:
    _whole(answer, "threads")
    report = lesson_report()
    truth = int(report.kernels[0].block[0])
    asked = 256
    if answer == asked:
        raise Wrong("that is the threads= the kernel asks for; the block that really launches has more: a pipelined "
                    "loop of TMA copies on sm_90a gets threads that only load")
    expect(answer > asked, "a block never launches fewer threads than threads= asks for")
    if answer - asked in (32, 64):
        raise Wrong("the loads get whole warps, but registers are split between roles per warpgroup (4 warps): "
                    "count a warpgroup")
    expect(answer == truth, "not quite: the extra threads are one warpgroup (4 warps of 32)")
    return (f"{truth} threads: the {asked} you asked for compute (two consumer warpgroups) and TileLang adds "
            f"{truth - asked} for the producer, which issues the TMA loads. "
            f"{report.lowering.warp_specialization_reason}.")


@exercise("07.2", "which threads consume",
          question="In the same block, which threadIdx.x values hold the accumulator C_local (the consumers)? "
                   "Answer (first, last), both included.",
          kind="predict",
          hints=("The consumers are the threads= you asked for; the producer warpgroup is the extra one.",
                 "TileLang's generated code tests `if (threadIdx.x < 128)` to pick one role.",
                 "The producer comes first in the block."),
          solution="answer_07_2 = (128, 383)",
          reveal=lambda answer: _reveal(lesson_report()))
def _consumers(answer: Any) -> str:
    expect(isinstance(answer, (tuple, list)) and len(answer) == 2
           and all(isinstance(x, int) and not isinstance(x, bool) for x in answer),
           f"answer with a pair of whole numbers (first, last), got {answer!r}")
    report = lesson_report()
    acc = next(lay for lay in report.layouts if lay.buffer == "C_local")
    first = int(acc.thread_base)
    last = first + int(acc.thread_count) - 1
    got = (int(answer[0]), int(answer[1]))
    if got == (0, int(acc.thread_count) - 1):
        raise Wrong("that is where the consumers would sit with no producer; TileLang puts the producer warpgroup "
                    "at the front of the block")
    expect(got[1] - got[0] + 1 == int(acc.thread_count),
           "count again: every thread you asked for with threads= holds part of the accumulator")
    expect(got == (first, last), "the count is right but not the place: which warpgroup does `threadIdx.x < 128` pick?")
    return (f"threads {first}-{last}: the consumers are warpgroups 1 and 2; warpgroup 0 (threads 0-{first - 1}) "
            "only loads, and gives back registers (tl::warpgroup_reg_dealloc) so the consumers get more")


def _barrier_counts(source: str) -> list[int]:
    return [int(n) for n in re.findall(r"mbarrier\[\d+\]\.init\((\d+)\)", source)]


@exercise("07.3", "how a stage is given back",
          question="A consumer that has finished with a stage arrives on that stage's 'empty' barrier, and the "
                   "producer waits on it before loading the stage again. How many arrivals does that barrier "
                   "wait for?",
          kind="predict",
          hints=("Two kinds of barrier guard each stage: 'full' (the TMA copy has landed) and 'empty' (the stage "
                 "may be overwritten).",
                 "The 'full' barrier needs one arrival: the one producer thread that issued the copy, plus the "
                 "bytes the copy brings.",
                 "The stage may be overwritten only when every consumer thread is done reading it."),
          solution="answer_07_3 = 256",
          reveal=lambda answer: _reveal(lesson_report()))
def _arrivals(answer: Any) -> str:
    _whole(answer, "arrivals")
    report = lesson_report()
    counts = _barrier_counts(report.sources.device)
    empty = sorted({c for c in counts if c != 1})
    expect(len(empty) == 1, "this kernel's barriers are not the producer/consumer pair the lesson expects")
    truth = empty[0]
    if answer == 1:
        raise Wrong("one arrival is the 'full' barrier: the producer thread arms it with the copy's byte count. "
                    "The 'empty' barrier is the consumers' to release")
    if answer == int(report.kernels[0].block[0]):
        raise Wrong("the producer does not arrive on the barrier it is waiting for: count only the consumers")
    if answer == truth // 2:
        raise Wrong("that is one consumer warpgroup; both read every stage")
    expect(answer == truth, "not quite: who must be done with a stage before it may be overwritten?")
    stages = report.lowering.stages
    return (f"{truth}: every consumer thread arrives (mbarrier init({truth}) in the device code), once per stage; "
            f"the kernel keeps {stages} stages, each with a 'full' barrier of 1 arrival and an 'empty' one of {truth}")


_TMA_A = "T.copy(A[by * block_M, k * block_K], A_s)"
_BY_HAND_A = """for i, j in T.Parallel(block_M, block_K):
                    A_s[i, j] = A[by * block_M + i, k * block_K + j]"""
GIVEN_07_4 = '''\
def my_gemm(M, N, K, block_M=128, block_N=128, block_K=32, threads=256):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages={stages}):
                {load_a}
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return gemm
'''


def _given_07_4(load_a: str = _TMA_A, stages: int = 3) -> str:
    return GIVEN_07_4.format(load_a=load_a, stages=stages)


@exercise("07.4", "a pipelined GEMM that is not warp-specialised",
          question="my_gemm's loop is already T.Pipelined with 3 stages, yet TileLang does not warp-specialise it "
                   "on sm_90a: its block launches twice the threads= it asks for, and no warpgroup gives registers "
                   "back. Find why in the inspector's Summary, and fix it so that the block is threads= plus one "
                   "producer warpgroup, at any threads= (the check builds it at 128 and 256).",
          kind="fixes",
          hints=("The Summary tab of the inspector says whether a kernel is warp-specialised and, if not, why; the "
                 "Tile ops table lists how each T.copy into shared memory lowered. Which tile of the loop is "
                 "missing from it?",
                 "One thread can issue a whole TMA copy, so a producer of TMA copies needs one warpgroup; a tile "
                 "filled element by element needs a thread per element, as many as the consumers.",
                 "Load A_s the way B_s is loaded: T.copy(A[by * block_M, k * block_K], A_s)."),
          solution=_given_07_4(),
          answer_name="my_gemm",
          given=_given_07_4(_BY_HAND_A),
          reveal=lambda answer: _reveal(inspect(answer(512, 512, 512, threads=256), "sm_90a")))
def _fix_ws(answer: Any) -> str:
    seen = []
    for threads in (256, 128):
        report = inspect(build(answer, 512, 512, 512, threads=threads, name="my_gemm"), "sm_90a")
        low = report.lowering
        expect(low is not None, "tilelab found no tile ops in this kernel")
        block = int(report.kernels[0].block[0])
        expect(low.warp_specialized, f"at threads={threads} the kernel is not warp-specialised ({block} threads "
                                     f"launched): {low.warp_specialization_reason}")
        expect((low.stages or 0) >= 2, "it is warp-specialised, but a pipeline of one stage cannot load the next "
                                       "tile while the current one is multiplied: ask for at least 2")
        copies = [op for op in low.ops if op.op.startswith("T.copy") and "_s" in op.op.split("->")[-1]]
        expect(len(copies) >= 2 and all("TMA" in op.path for op in copies),
               "the loads into shared memory must stay TMA copies (T.copy of a global tile into A_s and B_s): "
               + "; ".join(f"{op.op}: {op.path}" for op in copies))
        expect(any(op.op.startswith("T.gemm") and "WGMMA" in op.path for op in low.ops),
               "the product must stay a T.gemm that runs on WGMMA")
        expect(block == threads + 128, f"at threads={threads} the block should be your threads plus the producer "
                                       "warpgroup")
        seen.append((threads, block, low.stages))
    right = gemm_on_cpu(lambda M, N, K, bm, bn, bk: build(answer, M, N, K, bm, bn, bk, name="my_gemm"))
    gpu = on_gpu(build(answer, 512, 512, 512, threads=256, name="my_gemm"), lambda a, b: a @ b)
    return ("warp-specialised with " + ", ".join(f"threads={t} -> {b} launched" for t, b, _ in seen)
            + f"; {seen[0][2]} stages: one producer warpgroup issues both tiles' TMA copies (one thread per copy) and "
            "gives its registers to the consumers, which multiply stage k while stage k+1 lands; "
            + right + "." + gpu)


wrong_answers = {
    "07.1": ("answer_07_1 = 256", "answer_07_1 = 288", "answer_07_1 = 512"),
    "07.2": ("answer_07_2 = (0, 255)", "answer_07_2 = (128, 255)", "answer_07_2 = (256, 511)"),
    "07.3": ("answer_07_3 = 1", "answer_07_3 = 384", "answer_07_3 = 128"),
    "07.4": (_given_07_4(_TMA_A, stages=1),
             _given_07_4(_TMA_A.replace("A_s)", "A_s, disable_tma=True)"))),
}
