"""Lesson 05: pipelining and TMA (``notebooks/05_pipelining_and_tma.ipynb``).

Shared memory per stage and the most stages that fit (the truth: the compiler's report for
``sm_90a`` and the target's limit from :mod:`tilelab.cuda_facts`), an epilogue made a TMA store,
the fallback under the pass config ``tl.disable_tma_lower``, and the per-copy switch. Every kernel
exercise grades the student's own factory by how TileLang lowered it (:func:`tilelab.inspect`),
with no GPU.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tilelab.workshop import Wrong, exercise, expect

NOTEBOOK = "05"
TARGET = "sm_90a"
SIZES = (1024, 1024, 1024)
TILE = (128, 128, 64)  # block_M, block_N, block_K of the lesson's GEMM
ARGS = SIZES + TILE
STAGES = 3
DISABLE_TMA = "tl.disable_tma_lower"

# The notebook's kernel cells, written once: the committed answer cells, the solutions and the
# declared wrong answers are all this text with a different epilogue or load options.
CELL = '''\
%%tilelang --args "1024, 1024, 1024, 128, 128, 64"
import tilelang.language as T


def {name}(M, N, K, block_M, block_N, block_K, num_stages=3):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
{allocs}            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared{load})
                T.copy(B[k * block_K, bx * block_N], B_shared{load})
                T.gemm(A_shared, B_shared, C_local)
{epilogue}
    return gemm
'''
_IND = " " * 12
STORE_DIRECT = _IND + "T.copy(C_local, C[by * block_M, bx * block_N])"
STORE_STAGED = _IND + "T.copy(C_local, C_shared)\n" + _IND + "T.copy(C_shared, C[by * block_M, bx * block_N])"
C_SHARED = _IND + "C_shared = T.alloc_shared((block_M, block_N), T.float16)\n"


def cell(name: str, *, epilogue: str = STORE_DIRECT, allocs: str = "", load: str = "") -> str:
    """The text of one of the notebook's GEMM cells."""
    return CELL.format(name=name, epilogue=epilogue, allocs=allocs, load=load)


def function_of(cell_text: str) -> str:
    """The kernel function of a cell (its ``def`` to the end): what a "fixes" exercise is given."""
    return cell_text[cell_text.index("\ndef ") + 1:]


# The kernels the two "fixes" exercises start from (their committed answer cells).
GIVEN_TMA_STORE = cell("tma_store_gemm")
GIVEN_CP_ASYNC = cell("cp_async_gemm", epilogue=STORE_STAGED, allocs=C_SHARED)


def lesson_gemm(M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, num_stages: int = STAGES,
                smem_epilogue: bool = False):
    """The notebook's GEMM (the same kernel as its cells: a test holds that)."""
    from tilelab.kernels.gemm import matmul

    return matmul(M, N, K, block_M, block_N, block_K, num_stages=num_stages, threads=256, raster=0,
                  smem_epilogue=smem_epilogue)


@functools.lru_cache(maxsize=16)
def _report(num_stages: int = STAGES, smem_epilogue: bool = False, disable_tma: bool = False):
    import warnings

    import tilelab

    configs = {DISABLE_TMA: True} if disable_tma else None
    with warnings.catch_warnings():  # TileLang's deprecation of the switch: the lesson says it in words
        warnings.simplefilter("ignore", DeprecationWarning)
        return tilelab.inspect(lesson_gemm(*ARGS, num_stages=num_stages, smem_epilogue=smem_epilogue), TARGET,
                               pass_configs=configs)


def _limit() -> int:
    from tilelab import cuda_facts

    return cuda_facts.arch_limits(TARGET).max_shared_memory_per_block


def _whole(answer: Any, what: str) -> int:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with {what}, got {answer!r}")
    return int(answer)


def _tile_bytes() -> tuple[int, int]:
    block_m, block_n, block_k = TILE
    return block_m * block_k * 2, block_k * block_n * 2


# ------------------------------------------------------------------------------------------
# Shared memory per stage, and the most stages that fit
# ------------------------------------------------------------------------------------------


@exercise("05.1", "shared memory per stage",
          question="The GEMM above keeps, in each pipeline stage, the tiles its T.Pipelined loop copies in "
                   "(block_M=128, block_N=128, block_K=64, fp16). How many bytes of shared memory does one "
                   "stage hold?",
          kind="predict",
          hints=("A stage holds everything one iteration of the loop copies into shared memory.",
                 "That is one tile of A (block_M x block_K) and one tile of B (block_K x block_N).",
                 "Count elements, then multiply by 2 bytes per fp16 value."),
          solution="answer_05_1 = 32768")
def _stage_bytes(answer: Any) -> str:
    got = _whole(answer, "a whole number of bytes")
    report = _report()
    truth = report.lowering.stage_bytes
    a_bytes, b_bytes = _tile_bytes()
    if got != truth:
        if got in (a_bytes, b_bytes):
            raise Wrong("that is one tile's bytes (or both tiles' elements): a stage holds a tile of A and a tile "
                        "of B, 2 bytes a value")
        if got * 2 == truth:
            raise Wrong("that counts elements; an fp16 value is 2 bytes")
        if got == truth * 2:
            raise Wrong("that counts 4 bytes a value: A and B are fp16 (the fp32 accumulator lives in registers, "
                        "not in the stages)")
        if got == truth * STAGES:
            raise Wrong(f"that is all {STAGES} stages together; the question asks for one")
        if got * 1024 == truth:
            raise Wrong("answer in bytes, not KiB")
        raise Wrong(f"{got} is not it: add the bytes of the two tiles one iteration copies in")
    total = report.kernels[0].dynamic_shared_memory_bytes
    return (f"{truth} bytes a stage: A's tile {a_bytes} B + B's tile {b_bytes} B; with {STAGES} stages the "
            f"kernel asks for {total} B of dynamic shared memory")


def _most_stages() -> tuple[int, int, int]:
    """(most stages that fit, the bytes they take, the bytes of one more): from the kernels
    TileLang lowers, starting from the per-stage estimate."""
    limit = _limit()
    per_stage = _report().lowering.stage_bytes

    def smem(n: int) -> int:
        return int(_report(num_stages=n).kernels[0].dynamic_shared_memory_bytes)

    n = max(1, limit // per_stage)
    while n > 1 and smem(n) > limit:
        n -= 1
    while smem(n + 1) <= limit:
        n += 1
    return n, smem(n), smem(n + 1)


@exercise("05.2", "the most stages that fit",
          question="How many pipeline stages of that GEMM fit in the shared memory one block may use on sm_90a "
                   "(tilelab.cuda_facts.arch_limits('sm_90a').max_shared_memory_per_block)?",
          kind="predict",
          hints=(("Read the limit from cuda_facts: it is the most a block may ask for with the opt-in attribute, "
                 "which TileLang's launcher sets."),
                 "Divide the limit by the bytes of one stage (exercise 05.1) and round down.",
                 ("In Python: cuda_facts.arch_limits('sm_90a').max_shared_memory_per_block // (your answer to "
                 "05.1).")),
          solution="answer_05_2 = 7")
def _stages(answer: Any) -> str:
    got = _whole(answer, "a whole number of stages")
    expect(got > 0, "a pipeline has at least one stage")
    limit = _limit()
    truth, fits, more = _most_stages()
    a_bytes, _ = _tile_bytes()
    per_stage = _report().lowering.stage_bytes
    if got == truth:
        return (f"{truth} stages: {fits} B of the {limit} B a block may use on {TARGET}; one more would ask "
                f"for {more} B")
    if got == limit // a_bytes and got != truth:
        raise Wrong("that counts stages of A's tile only: each stage holds B's tile too")
    if got == (limit * 1000 // 1024) // per_stage and got != truth:
        raise Wrong("the limit is in bytes (KiB of 1024 bytes), not thousands")
    if got == 48 * 1024 // per_stage:
        raise Wrong("48 KiB is what a block gets without the opt-in attribute; TileLang's launcher raises it "
                    "to the target's maximum (max_shared_memory_per_block)")
    if got > truth:
        raise Wrong(f"{got} stages ask for more than the {limit} bytes a block may use on {TARGET}: the kernel "
                    "would fail to launch")
    raise Wrong(f"{got} stages fit, but so does one more: how many whole stages fit in {limit} bytes?")


# ------------------------------------------------------------------------------------------
# The epilogue as a TMA store
# ------------------------------------------------------------------------------------------


def _ops(report: Any) -> dict[str, Any]:
    """The report's tile-op paths by role: 'A', 'B' (loads into shared memory), 'C' (the store to
    global memory), 'gemm'."""
    out: dict[str, Any] = {}
    params = [a.name for a in report.arguments if a.kind in ("tensor", "strided_tensor")]
    for op in report.lowering.ops:
        names = [n.strip() for n in op.op.split(" ", 1)[-1].split("->")]
        if op.op.startswith("T.gemm"):
            out["gemm"] = op
        elif op.op.startswith("T.copy") and len(names) == 2:
            src, dst = names
            if src in params and dst not in params:
                out.setdefault(src, op)
            elif dst in params:
                out[dst] = op
    return out


def _kind_of(path: str) -> str:
    if path.startswith("TMA"):
        return "TMA"
    if path.startswith("cp.async"):
        return "cp.async"
    return "plain"


def _inspect(kernel: Any, pass_configs: dict[str, Any] | None = None) -> Any:
    import tilelab

    return tilelab.inspect(kernel, TARGET, pass_configs=pass_configs)


def _expect_gemm_fast(ops: dict[str, Any], report: Any) -> None:
    gemm = ops.get("gemm")
    if gemm is None:
        raise Wrong("the kernel has no T.gemm: keep the GEMM's main loop as it was")
    expect(gemm.path.startswith("WGMMA"), f"T.gemm lowered to {gemm.path}, no longer WGMMA: keep the main loop "
                                          "as it was")
    expect(not report.problems, "the report lists problems: " + "; ".join(report.problems))
    smem = report.kernels[0].dynamic_shared_memory_bytes
    expect(not isinstance(smem, int) or smem <= _limit(),
           f"the kernel asks for {smem} B of dynamic shared memory, more than the {_limit()} B a block may use on "
           f"{TARGET}")


@exercise("05.3", "the epilogue as a TMA store",
          question="Rewrite the epilogue of tma_store_gemm so that C is written to global memory by a TMA store "
                   "(the loads stay TMA and T.gemm stays WGMMA).",
          kind="fixes",
          hints=("Look at the Summary's lowering rows: what does the copy to C become now, and why?",
                 "A TMA store copies a tile from shared memory to global memory.",
                 ("Allocate C_shared = T.alloc_shared((block_M, block_N), T.float16), copy C_local into it, then "
                 "copy C_shared to C.")),
          solution=cell("tma_store_gemm", epilogue=STORE_STAGED, allocs=C_SHARED),
          answer_name="tma_store_gemm", given=function_of(GIVEN_TMA_STORE))
def _tma_store(factory: Any) -> str:
    expect(callable(factory), f"answer with your kernel factory tma_store_gemm, got {type(factory).__name__}")
    report = _inspect(factory(*ARGS))
    ops = _ops(report)
    store = ops.get("C")
    if store is None:
        raise Wrong("nothing in the kernel copies a tile to C any more: keep one store of the block's "
                    "tile")
    for name in ("A", "B"):
        load = ops.get(name)
        expect(load is not None and load.path.startswith("TMA"),
               f"{name}'s load is no longer a TMA bulk copy: leave the main loop as it was")
    source = store.op.split(" ", 1)[-1].split("->")[0].strip()
    if not store.path.startswith("TMA"):
        if source in [lay.buffer for lay in report.layouts if lay.scope == "fragment"] or source == "C_local":
            raise Wrong("C still goes from the register fragment to global memory, each thread storing its own "
                        "elements: which memory does a TMA store read from?")
        raise Wrong(f"the store from {source} lowered to {store.path}: a TMA store copies bytes as they are, so "
                    "the tile it reads must have C's dtype and the block's tile shape")
    _expect_gemm_fast(ops, report)
    smem = report.kernels[0].dynamic_shared_memory_bytes
    before = _report().kernels[0].dynamic_shared_memory_bytes
    reuse = (f"; dynamic shared memory is still {smem} B: TileLang reuses the pipeline's buffers for the staging "
             "tile once the K loop is done") if smem == before else f"; dynamic shared memory {smem} B"
    from ._common_b import gemm_on_cpu

    right = gemm_on_cpu(factory)
    return (f"C is written by a TMA bulk store (device line {store.evidence_line}: {store.evidence[:60]}...)"
            f"{reuse}; {right}")


# ------------------------------------------------------------------------------------------
# The fallback, and the per-copy switch
# ------------------------------------------------------------------------------------------

CHOICES = ("TMA", "cp.async", "plain")


def _normalise_path(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace("_", ".").replace(" ", "")
    if text.startswith(("tma", "bulk")):
        return "TMA"
    if text.startswith(("cp.async", "cpasync")):
        return "cp.async"
    if text.startswith("plain") or text in ("ld", "st", "ld/st", "vector", "vectorised", "vectorized", "sync",
                                             "normal", "stores", "loads"):
        return "plain"
    return None


def _reveal_fallback(answer: Any) -> Any:
    """The copies' lowering and the warp specialisation, from the report (the inspector's other
    tabs would show the wgmma instruction, 06.7's answer)."""
    report = _report(smem_epilogue=True, disable_tma=True)
    ops = _ops(report)
    rows = [f"{name}: {ops[name].path}" for name in ("A", "B", "C") if name in ops]
    low = report.lowering
    ws = ("warp-specialized" if low is not None and low.warp_specialized
          else f"not warp-specialized ({low.warp_specialization_reason if low is not None else 'no tile ops'})")
    return "with tl.disable_tma_lower=True: " + "; ".join(rows) + f"; the kernel is {ws}"


@exercise("05.4", "the fallback under tl.disable_tma_lower",
          question="Build the TMA-store GEMM with the pass config tl.disable_tma_lower=True. What does each copy "
                   "lower to? Answer a dict {'A': ..., 'B': ..., 'C': ...} with 'TMA', 'cp.async' or 'plain'.",
          kind="predict",
          hints=("The Summary's warp-specialization row says who issues the loads in this kernel.",
                 ("TileLang 0.1.15 marks the pass config deprecated in favour of a per-copy switch; it is read "
                 "where TileLang lowers an ordinary T.copy, not where it plans a warp-specialized producer's loads."),
                 ("The loads of the producer warpgroup keep their path; the epilogue's copy is an ordinary T.copy "
                 "and cp.async cannot store.")),
          solution='answer_05_4 = {"A": "TMA", "B": "TMA", "C": "plain"}',
          reveal=_reveal_fallback)
def _fallback(answer: Any) -> str:
    expect(isinstance(answer, dict) and set(answer) == {"A", "B", "C"},
           f"answer with a dict with keys 'A', 'B' and 'C', got {answer!r}")
    got = {k: _normalise_path(v) for k, v in answer.items()}
    bad = [k for k, v in got.items() if v is None]
    expect(not bad, f"{', '.join(bad)}: answer each with one of {', '.join(repr(c) for c in CHOICES)}")
    report = _report(smem_epilogue=True, disable_tma=True)
    ops = _ops(report)
    truth = {k: _kind_of(ops[k].path) for k in ("A", "B", "C")}
    if got == truth:
        ws = report.lowering.warp_specialized
        return (f"A: {ops['A'].path}, B: {ops['B'].path}, C: {ops['C'].path}. "
                + ("The kernel stays warp-specialized: its producer warpgroup's loads are planned without this "
                   "pass config, which only reaches ordinary copies such as the epilogue's. " if ws else "")
                + "TileLang 0.1.15 deprecates tl.disable_tma_lower for T.copy(..., disable_tma=True), per copy.")
    if got["C"] == "cp.async":
        raise Wrong("C: cp.async copies global memory into shared memory; it cannot store to global memory")
    wrong_loads = [k for k in ("A", "B") if got[k] != truth[k]]
    if wrong_loads:
        raise Wrong(f"{' and '.join(wrong_loads)}: your prediction assumes the pass config reaches every copy. "
                    "Who issues the loads in this kernel (the Summary's warp-specialization row), and where is "
                    "their path decided?")
    raise Wrong("C: the epilogue's copy is an ordinary T.copy from shared memory; what does the pass config do "
                "to an ordinary T.copy's TMA path?")


@exercise("05.5", "cp.async loads, per copy",
          question="Make the two loads of cp_async_gemm use cp.async instead of TMA, switching TMA off on those "
                   "two copies only: the epilogue stays a TMA store and T.gemm stays WGMMA.",
          kind="fixes",
          hints=("A pass config acts on every copy of the kernel; the exercise wants two copies changed.",
                 "T.copy takes a keyword that switches TMA off for that copy alone.",
                 "T.copy(A[...], A_shared, disable_tma=True), and the same for B."),
          solution=cell("cp_async_gemm", epilogue=STORE_STAGED, allocs=C_SHARED, load=", disable_tma=True"),
          answer_name="cp_async_gemm", given=function_of(GIVEN_CP_ASYNC))
def _per_copy(factory: Any) -> str:
    expect(callable(factory), f"answer with your kernel factory cp_async_gemm, got {type(factory).__name__}")
    report = _inspect(factory(*ARGS))
    ops = _ops(report)
    store = ops.get("C")
    if store is None:
        raise Wrong("nothing in the kernel copies a tile to C: keep the epilogue")
    for name in ("A", "B"):
        if ops.get(name) is None:
            raise Wrong(f"the kernel no longer copies {name} into shared memory: keep both loads")
    still = [name for name in ("A", "B") if ops[name].path.startswith("TMA")]
    if still:  # named first: a pipeline that mixes TMA and other loads lowers the others differently
        other = [n for n in ("A", "B") if n not in still]
        mixed = (f" ({other[0]}'s copy is switched; with {still[0]} still on TMA the pipeline lowers it to "
                 f"{ops[other[0]].path})") if other else ""
        raise Wrong(f"{' and '.join(still)}'s copy is still a TMA bulk copy: the switch must be in the kernel, on "
                    f"each copy (an option of the %%tilelang line is not part of the kernel your factory builds)"
                    f"{mixed}")
    for name in ("A", "B"):
        load = ops[name]
        expect(load.path.startswith("cp.async"), f"{name}'s copy lowered to {load.path}; the exercise asks for "
                                                 "asynchronous copies (cp.async)")
    if not store.path.startswith("TMA"):
        raise Wrong("the epilogue lost its TMA store: switch TMA off on the two loads only, and keep C staged "
                    "through shared memory")
    _expect_gemm_fast(ops, report)
    from ._common_b import gemm_on_cpu

    right = gemm_on_cpu(factory)
    ws = report.lowering
    # the thread count is not said: it is 07.1's answer
    return ("A and B load with cp.async, C is a TMA store, T.gemm is WGMMA; "
            + ("still warp-specialized" if ws.warp_specialized
               else f"not warp-specialized ({ws.warp_specialization_reason})") + f"; {right}")


# ------------------------------------------------------------------------------------------
# 05.6 where is the bubble: two saved timelines (recorded on an H200), graded without a GPU
# ------------------------------------------------------------------------------------------

DATA = Path(__file__).resolve().parent.parent / "data"
SAVED = {1: "gemm_1_stage", 3: "gemm_3_stages"}  # this notebook's GEMM, 1024^3, block 0 traced


def saved_timeline(stages: int) -> Any:
    """The timeline of this notebook's GEMM (1024^3, 128 x 128 x 64 tiles) with ``stages`` pipeline
    stages (1 or 3), recorded on an NVIDIA H200 by ``python -m tilelab.workshop.data.record_timelines``
    and saved with ``Timeline.save``: a :class:`tilelab.Timeline`, loaded with no GPU."""
    import tilelab

    if stages not in SAVED:
        raise ValueError(f"the saved timelines have {' and '.join(map(str, SAVED))} stages, not {stages!r}")
    return tilelab.Timeline.load(DATA / f"{SAVED[stages]}.timeline.json")


def _waits(tl: Any) -> dict[tuple[str, str], float]:
    """Total ns per traced warp of each (role, barrier) wait on a pipeline stage ("full"/"empty")."""
    warps: dict[str, set[Any]] = {}
    for sp in tl.spans:
        warps.setdefault(sp.role, set()).add((sp.block, sp.warp_group, sp.warp))
    out: dict[tuple[str, str], float] = {}
    for sp in tl.spans:
        if sp.kind == "barrier_wait" and sp.label.startswith("stage "):
            key = (sp.role, sp.label.split()[1])
            out[key] = out.get(key, 0.0) + (sp.end_ns - sp.start_ns) / len(warps[sp.role])
    return out


def _bubble_truth() -> tuple[str, str]:
    """The role that issues the MMAs, and the stage barrier it waits on longest: the Tensor Cores'
    idle time (the bubble), from the 1-stage recording."""
    tl = saved_timeline(1)
    mma = {sp.role for sp in tl.spans if sp.kind == "mma"}
    waits = {k: v for k, v in _waits(tl).items() if k[0] in mma}
    role, barrier = max(waits, key=lambda k: waits[k])
    return role, barrier


def _reveal_bubble(answer: Any) -> Any:
    return saved_timeline(1).compare(saved_timeline(3), names=("1 stage", "3 stages"))


@exercise("05.6", "where is the bubble",
          question="lesson.saved_timeline(1) is this notebook's GEMM with one pipeline stage, recorded on a GPU. "
                   "The Tensor Cores sit idle while the warp group that issues the WGMMAs waits. Which role is "
                   "that, and which barrier of the pipeline does it wait on? Answer (role, barrier) with role "
                   "\"producer\" or \"consumer\" and barrier \"full\" or \"empty\".",
          kind="predict",
          hints=("tl.summary.roles gives each role's share of time busy and waiting, by kind; tl.spans each span's "
                 "role, kind and label (\"stage full of T.Pipelined ...\", \"stage empty of ...\").",
                 "The producer issues the TMA loads; the consumers issue the WGMMAs. A slot is 'full' once its "
                 "load has landed and 'empty' once the MMAs that read it are done.",
                 "Waiting for a free slot is the loads running ahead (no harm); the bubble is the MMA side "
                 "waiting for data."),
          solution='answer_05_6 = ("consumer", "full")', reveal=_reveal_bubble)
def _bubble(answer: Any) -> str:
    expect(isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(a, str) for a in answer),
           f"answer with two words, (role, barrier), e.g. (\"producer\", \"empty\"), got {answer!r}")
    role, barrier = (a.strip().lower() for a in answer)
    expect(role in ("producer", "consumer") and barrier in ("full", "empty"),
           "the role is \"producer\" or \"consumer\", the barrier \"full\" or \"empty\"")
    truth = _bubble_truth()
    one, three = _waits(saved_timeline(1)), _waits(saved_timeline(3))
    if role != truth[0]:
        raise Wrong(f"the {role} does wait, on \"{'empty' if role == 'producer' else 'full'}\" stages, but it "
                    "issues the TMA loads, not the WGMMAs: its waits are the loads running ahead, waiting for a "
                    "free slot. Who issues the WGMMAs?")
    if barrier != truth[1]:
        raise Wrong(f"the {role}s issue the WGMMAs, but their waits on \"{barrier}\" stages are not the long "
                    "ones: look at the labels of their barrier waits in tl.spans, or tl.summary.roles")
    before, after = one[truth], three[truth]
    return (f"the {truth[0]}s wait for \"{truth[1]}\" stages: {before / 1e3:.1f} us per warp with one stage, "
            f"{after / 1e3:.1f} us with three, where two more loads are in flight while the MMAs run "
            f"(summary.bubble_ns {saved_timeline(1).summary.bubble_ns / 1e3:.1f} -> "
            f"{saved_timeline(3).summary.bubble_ns / 1e3:.1f} us)")


def _wrong_stage_answers() -> dict[str, tuple[str, ...]]:
    return {
        "05.1": ("answer_05_1 = 16384", "answer_05_1 = 65536",
                 "answer_05_1 = 98304", "answer_05_1 = 32"),
        "05.2": ("answer_05_2 = 14", "answer_05_2 = 6", "answer_05_2 = 1", "answer_05_2 = 8", "answer_05_2 = 3"),
        "05.3": (cell("tma_store_gemm", allocs=C_SHARED,
                      epilogue=_IND + "T.copy(C_local, C_shared)\n" + STORE_DIRECT),
                 cell("tma_store_gemm", epilogue=STORE_STAGED,
                      allocs=C_SHARED.replace("T.float16)", "T.float32)"))),
        "05.4": ('answer_05_4 = {"A": "cp.async", "B": "cp.async", "C": "plain"}',
                 'answer_05_4 = {"A": "TMA", "B": "TMA", "C": "TMA"}',
                 'answer_05_4 = {"A": "plain", "B": "plain", "C": "cp.async"}',
                 'answer_05_4 = ("TMA", "TMA", "plain")'),
        "05.5": (GIVEN_CP_ASYNC.replace("A_shared)", "A_shared, disable_tma=True)"),
                 cell("cp_async_gemm",
                      epilogue=STORE_STAGED.replace("C[by * block_M, bx * block_N])",
                                                    "C[by * block_M, bx * block_N], disable_tma=True)"),
                      allocs=C_SHARED, load=", disable_tma=True")),
        "05.6": ('answer_05_6 = ("producer", "empty")', 'answer_05_6 = ("consumer", "empty")',
                 'answer_05_6 = "consumer"'),
    }


wrong_answers = _wrong_stage_answers()
