"""Lesson 10: when it goes wrong, and one kernel for many targets.

Out-of-bounds indexing and a race between blocks, each found on the CPU (target ``c``) by a launch
with poisoned outputs and the map of its tiles; the sanitizer's view of an out-of-bounds store
(a GPU part); then one tiled GEMM lowered for Hopper (TMA, WGMMA), MI300 (LDS, MFMA) and the CPU,
with what each build's report says predicted before it is shown."""

from __future__ import annotations

from typing import Any

from tilelab.workshop import NeedsGpu, Wrong, exercise, expect

from ._common_b import build, gemm_on_cpu, gemm_slip, inspect, run_cpu, where_wrong


def has_gpu() -> bool:
    import tilelab

    return bool(tilelab.has_gpu())


# ------------------------------------------------------------------------------------------
# 10.1 out of bounds: a transpose with its grid the wrong way round
# ------------------------------------------------------------------------------------------

TRANSPOSE = '''\
def transpose(M, N, block_M=32, block_N=32):
    @T.prim_func
    def tr(A: T.Tensor((M, N), T.float32), B: T.Tensor((N, M), T.float32)):
        with T.Kernel({grid}) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[bx * block_N + j, by * block_M + i] = A[by * block_M + i, bx * block_N + j]

    return tr
'''
TRANSPOSE_BUGGY = TRANSPOSE.format(grid="T.ceildiv(M, block_M), T.ceildiv(N, block_N)")
TRANSPOSE_FIXED = TRANSPOSE.format(grid="T.ceildiv(N, block_N), T.ceildiv(M, block_M)")


def _transpose_ref(a: Any) -> Any:
    return a.T.contiguous()


def _out_of_bounds(kernel: Any, *args: Any) -> str:
    """What the trace of a launch with TileLang's bounds checks off says: where the stores went."""
    import tilelab

    try:
        trace = tilelab.trace_tiles(kernel, *args, pass_configs={"tl.disable_safe_memory_legalize": True})
    except Exception:  # the trace is extra feedback; the launch above already graded the kernel
        return ""
    bad = trace.out_of_bounds
    said = " ".join(s.rstrip(".") + "." for s in trace.problems()[:3])
    if not bad:
        return f" {said}" if said else ""
    blocks = sorted({tuple(o.block) for o in bad})
    return (f" {said} With TileLang's bounds checks off, {len(bad)} accesses from {len(blocks)} block(s) land outside "
            "a tensor: on a GPU those are out-of-bounds stores and loads")


@exercise("10.1", "a transpose that writes out of bounds",
          question="transpose(M, N) should write B = A^T. At M=96, N=160 part of B is never written, and on a GPU with "
                   "TileLang's bounds checks off it stores past the end of B. Fix it (the check launches it on the "
                   "CPU at 96x160 and at the ragged 100x72 with 32 x 16 tiles).",
          kind="fixes",
          hints=("The launch's map of B's tiles shows which tiles were never written: which blocks should have "
                 "written them?",
                 "bx indexes A's columns (block_N wide) and by its rows (block_M tall): how many of each are there?",
                 "T.Kernel's first extent is bx's, the second by's."),
          solution=TRANSPOSE_FIXED,
          answer_name="transpose",
          given=TRANSPOSE_BUGGY)
def _transpose(answer: Any) -> str:
    import torch

    # the second size is ragged and its tile not square (block_M=32, block_N=16): rows and columns of
    # the tile cannot be mixed up there
    for m, n, bm, bn in ((96, 160, 32, 32), (100, 72, 32, 16)):
        kernel = build(answer, m, n, bm, bn, name="transpose")
        a = torch.randn(m, n, generator=torch.Generator().manual_seed(m + n))
        result = run_cpu(kernel, a, ref=_transpose_ref, tile=(bn, bm))  # B's tile of one block: block_N x block_M
        if not result.passed:
            raise Wrong(f"at M={m}, N={n} with block_M={bm}, block_N={bn}: {where_wrong(result)}."
                        f"{_out_of_bounds(kernel, a)}")
        if (m, n) == (96, 160):  # whole tiles: with the bounds checks off, nothing may go astray
            import tilelab

            trace = tilelab.trace_tiles(kernel, a, pass_configs={"tl.disable_safe_memory_legalize": True})
            expect(not trace.out_of_bounds and not int(trace.written_twice("B").sum()),
                   "B comes out right, but with TileLang's bounds checks off: " + " ".join(trace.problems()[:3]))
    return ("every element of B written once and right, at 96x160 and 100x72 (with 32x16 tiles too): one block "
            "per tile of A, bx over its columns and by over its rows")


# ------------------------------------------------------------------------------------------
# 10.2 a race between blocks: partial sums added into the output
# ------------------------------------------------------------------------------------------

ROW_SUM_BUGGY = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(splits, M) as (s, i):  # block (s, i) sums part s of row i
            part = T.alloc_local((1,), T.float32)
            part[0] = 0.0
            for j in T.serial(N // splits):
                part[0] += A[i, s * (N // splits) + j]
            Out[i] = Out[i] + part[0]

    return rs
'''
ROW_SUM_FIXED = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(M) as i:  # one block per row: no other block touches Out[i]
            total = T.alloc_local((1,), T.float32)
            total[0] = 0.0
            for j in T.serial(N):
                total[0] += A[i, j]
            Out[i] = total[0]

    return rs
'''


ROW_SUM_ACCUMULATES_IN_OUT = '''\
def row_sum(M, N, splits=4):
    @T.prim_func
    def rs(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(M) as i:
            for j in T.serial(N):
                Out[i] += A[i, j]

    return rs
'''


def _row_sum_ref(a: Any) -> Any:
    return a.sum(dim=1)


def _race(kernel: Any, a: Any) -> str:
    import tilelab

    try:
        return " ".join(s.rstrip(".") + "." for s in tilelab.trace_tiles(kernel, a).problems("Out")[:2])
    except Exception:
        return ""


@exercise("10.2", "blocks that race for one element",
          question="row_sum splits each row among `splits` blocks, and each adds its part into Out[i]. Fix it so that "
                   "Out[i] is the sum of row i whatever the order the blocks run in and whatever Out held before "
                   "(the check launches it on the CPU with Out poisoned, at 64x128 and 48x96).",
          kind="fixes",
          hints=("On a GPU, two blocks that read Out[i], add and write it back at the same time lose one of the "
                 "two updates: a race. And nothing ever set Out[i] to zero first.",
                 "The poisoned launch shows the second problem on the CPU: what does Out[i] + part start from?",
                 "Give each row to one block that sums the whole row and writes Out[i] once."),
          solution=ROW_SUM_FIXED,
          answer_name="row_sum",
          given=ROW_SUM_BUGGY)
def _row_sum(answer: Any) -> str:
    import torch

    for m, n in ((64, 128), (48, 96)):
        kernel = build(answer, m, n, name="row_sum")
        a = torch.randn(m, n, generator=torch.Generator().manual_seed(m * n))
        result = run_cpu(kernel, a, ref=_row_sum_ref)
        if result.passed:
            if (m, n) == (64, 128):  # one trace says whether blocks share elements
                import tilelab

                trace = tilelab.trace_tiles(kernel, a)
                twice = int(trace.written_twice("Out").sum())
                expect(twice == 0, "the sums are right on the CPU, where blocks run one after another, but "
                                   f"{twice} elements of Out are written by more than one block: "
                                   + "; ".join(trace.problems("Out")[:2]))
            continue
        out = result.outputs[0]
        if out.unwritten == m or out.nonfinite == m:
            raise Wrong("every Out[i] still holds the poison: your kernel reads Out[i] before anything wrote it, so "
                        "the sum starts from whatever memory held. " + _race(kernel, a))
        for splits in (2, 3, 4, 8):
            def last_part(x: Any, s: int = splits) -> Any:  # the sum of a row's last 1/s only
                return x[:, -(x.shape[1] // s):].sum(dim=1)

            if n % splits == 0 and run_cpu(kernel, a, ref=last_part).passed:
                raise Wrong("Out holds only the last block's part of each row: every block writes Out[i] and the last "
                            "one wins here; on a GPU any of them may win. " + _race(kernel, a))
        raise Wrong(f"at {m}x{n} Out is not the row sums: {where_wrong(result)}")
    return "each Out[i] written once, by one block, from nothing but A: no race and no dependence on Out's old contents"


# ------------------------------------------------------------------------------------------
# 10.3 the sanitizer (a GPU part)
# ------------------------------------------------------------------------------------------

def shifted_store(n: int = 1 << 16) -> Any:
    """B[i + offset] = A[i]: with offset > 0 the last block stores past B's end."""
    import tilelang.language as T

    @T.prim_func
    def shifted_store(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), offset: T.int32):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i + offset] = A[bx * 128 + i]

    return shifted_store


SANITIZER_OFFSET = 3


def sanitizer_report(offset: int = SANITIZER_OFFSET) -> Any:
    """shifted_store compiled with TileLang's bounds checks off, run once under memcheck."""
    import tilelang

    import tilelab

    unguarded = tilelang.compile(shifted_store(), pass_configs={"tl.disable_safe_memory_legalize": True})
    return tilelab.sanitize(unguarded, offset=offset, tool="memcheck")


@exercise("10.3", "what memcheck finds",
          question=f"shifted_store, built with TileLang's bounds checks off, runs once under compute-sanitizer's "
                   f"memcheck with offset={SANITIZER_OFFSET}. How many out-of-bounds writes does it report? "
                   "(This one needs a CUDA GPU and compute-sanitizer.)",
          kind="predict",
          hints=("Each thread stores one element: B[bx * 128 + i + offset].",
                 "Which indices are past B's last element, n - 1?",
                 "memcheck reports each faulting access of each thread."),
          solution=f"answer_10_3 = {SANITIZER_OFFSET}",
          needs_gpu=True)
def _sanitizer(answer: Any) -> Any:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number, got {answer!r}")
    if not has_gpu():
        return NeedsGpu("memcheck runs the kernel on a CUDA GPU; there is none here")
    report = sanitizer_report()
    writes = [f for f in report.findings if "out-of-bounds" in f.kind and "write" in f.kind]
    truth = len(writes)
    if answer == 0:
        raise Wrong("the bounds checks TileLang adds are off in this build, so nothing stops the stores")
    expect(answer == truth, "not quite: count the threads whose index lands past the end of B")
    return f"{truth} out-of-bounds writes: " + "; ".join(f"{f.where} (block {f.block}, thread {f.thread})"
                                                        for f in writes[:4])


# ------------------------------------------------------------------------------------------
# Many targets: one tiled GEMM for Hopper, MI300 and the CPU
# ------------------------------------------------------------------------------------------

GEMM_SIZE = (1024, 1024, 1024)
GEMM_TILES = dict(block_M=128, block_N=128, block_K=32)


def tiled_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32,
               target: str = "sm_90a") -> Any:
    """One tiled GEMM for every target: the same tiles, K loop and T.gemm. A GPU stages the tiles in
    shared memory (LDS on AMD) and accumulates in a register fragment; the CPU has neither, so there
    the tiles are T.alloc_local arrays (and the data float32)."""
    import tilelang.language as T

    cpu = target == "c"
    dtype = T.float32 if cpu else T.float16

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            if cpu:
                A_tile = T.alloc_local((block_M, block_K), dtype)
                B_tile = T.alloc_local((block_K, block_N), dtype)
                C_tile = T.alloc_local((block_M, block_N), T.float32)
            else:
                A_tile = T.alloc_shared((block_M, block_K), dtype)
                B_tile = T.alloc_shared((block_K, block_N), dtype)
                C_tile = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_tile)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0 if cpu else 2):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, C_tile)
            T.copy(C_tile, C[by * block_M, bx * block_N])

    return gemm


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


@exercise("10.4", "LDS on the MI300",
          question="The GEMM (128x128x32 fp16 tiles, T.Pipelined with num_stages=2) built for the MI300 (gfx942): "
                   "how many bytes of LDS (AMD's shared memory) does its kernel ask for?",
          kind="predict",
          hints=("The tiles in LDS are A_tile (block_M x block_K) and B_tile (block_K x block_N), 2 bytes a value.",
                 "The Hopper build keeps one copy of each per stage, because its TMA loads run ahead of the compute.",
                 "A copy per stage is needed only where the loop is software-pipelined (the next tile loads while "
                 "this one is used). Read the MI300 build's device code: does its K loop overlap them?"),
          solution="answer_10_4 = 16384",
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


@exercise("10.5", "TMA on two GPUs",
          question="How many TMA descriptors does each build of the GEMM encode on the host? Answer a dict "
                   "{\"sm_90a\": ..., \"gfx942\": ...}.",
          kind="predict",
          hints=("A TMA descriptor describes one global tensor that a T.copy moves to or from shared memory by TMA.",
                 "C's tile goes from a register fragment straight to global memory: TMA copies only between global "
                 "and shared memory.",
                 "Does the MI300 have a Tensor Memory Accelerator?"),
          solution='answer_10_5 = {"sm_90a": 2, "gfx942": 0}',
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


answer_10_6 = my_gemm
'''


@exercise("10.6", "one GEMM, three targets",
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
    "10.1": (TRANSPOSE.format(grid="N // block_N, M // block_M"),),
    "10.2": (ROW_SUM_ACCUMULATES_IN_OUT,
             ROW_SUM_BUGGY.replace("Out[i] = Out[i] + part[0]", "Out[i] = part[0]")),
    "10.4": ("answer_10_4 = 32768", "answer_10_4 = 8192", "answer_10_4 = 8192 + 8192 // 2"),
    "10.5": ('answer_10_5 = {"sm_90a": 3, "gfx942": 0}', 'answer_10_5 = {"sm_90a": 2, "gfx942": 2}',
             'answer_10_5 = {"sm_90a": 1, "gfx942": 0}'),
    "10.6": (GEMM_SOLUTION.replace("cpu = target == \"c\"", "cpu = False"),
             GEMM_SOLUTION.replace("                A_t = T.alloc_shared((block_M, block_K), dtype)\n"
                                   "                B_t = T.alloc_shared((block_K, block_N), dtype)\n"
                                   "                C_t = T.alloc_fragment((block_M, block_N), T.float32)",
                                   "                A_t = T.alloc_local((block_M, block_K), dtype)\n"
                                   "                B_t = T.alloc_local((block_K, block_N), dtype)\n"
                                   "                C_t = T.alloc_local((block_M, block_N), T.float32)")),
}
