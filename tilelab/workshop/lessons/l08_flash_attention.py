"""Lesson 08: flash attention. First attention one query row at a time on the CPU (target ``c``,
graded against torch), then a tiled forward pass for sm_90a read through ``tilelab.inspect``:
which of its two GEMMs reads an operand from registers (``wgmma_rs``) and which reads both from
shared memory (``wgmma_ss``), and what the shared-memory budget holds."""

from __future__ import annotations

import math
from typing import Any

from tilelab.workshop import Wrong, exercise, expect

from ._common_b import build, define, inspect, on_gpu, run_cpu, where_wrong

FLASH_SIZE = dict(seq=1024, dim=64)
# fp16 probabilities and output: a relative error norm of a few 1e-3 is the format's, not a bug
ATTENTION_TOLERANCE = 1e-2


def flash_forward(seq: int, dim: int, block_M: int = 64, block_N: int = 64, num_stages: int = 2,
                  threads: int = 128) -> Any:
    """The lesson's tiled attention forward pass (fp16 in, fp32 accumulation, one head):
    a block of queries stays in shared memory; keys and values stream through in a pipelined loop;
    an online softmax (the named region "softmax") rescales the running output as each new row
    maximum appears."""
    import tilelang.language as T

    import tilelab

    scale = 1.44269504 / math.sqrt(dim)  # log2(e) / sqrt(dim): exp2 of scaled scores is exp of the scores

    @T.prim_func
    def attention(Q: T.Tensor((seq, dim), T.float16), K: T.Tensor((seq, dim), T.float16),
                  V: T.Tensor((seq, dim), T.float16), O: T.Tensor((seq, dim), T.float16)):
        with T.Kernel(T.ceildiv(seq, block_M), threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), T.float16)
            K_s = T.alloc_shared((block_N, dim), T.float16)
            V_s = T.alloc_shared((block_N, dim), T.float16)
            S = T.alloc_fragment((block_M, block_N), T.float32)
            P = T.alloc_fragment((block_M, block_N), T.float16)
            acc = T.alloc_fragment((block_M, dim), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            old_max = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            tile_sum = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bx * block_M, 0], Q_s)
            T.fill(acc, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(T.float32))
            for kb in T.Pipelined(T.ceildiv(seq, block_N), num_stages=num_stages):
                T.copy(K[kb * block_N, 0], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)  # S = Q K^T for this block of keys
                with tilelab.region("softmax"):  # a named span in tilelab.timeline; no code otherwise
                    T.copy(row_max, old_max)
                    T.reduce_max(S, row_max, dim=1, clear=False)
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.exp2(S[i, j] * scale - row_max[i] * scale)
                    for i in T.Parallel(block_M):
                        row_sum[i] = row_sum[i] * T.exp2(old_max[i] * scale - row_max[i] * scale)
                    for i, j in T.Parallel(block_M, dim):
                        acc[i, j] = acc[i, j] * T.exp2(old_max[i] * scale - row_max[i] * scale)
                    T.reduce_sum(S, tile_sum, dim=1)
                    for i in T.Parallel(block_M):
                        row_sum[i] = row_sum[i] + tile_sum[i]
                    T.copy(S, P)
                T.copy(V[kb * block_N, 0], V_s)
                T.gemm(P, V_s, acc)  # O += P V
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = acc[i, j] / row_sum[i]
            T.copy(acc, O[bx * block_M, 0])

    return attention


def flash_report() -> Any:
    return inspect(flash_forward(**FLASH_SIZE), "sm_90a")


def _reveal_flash(report: Any) -> Any:
    import tilelab

    return tilelab.Inspector(report, show="summary,wgmma,tma")


def torch_attention(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d)) V, the reference every attention here is graded against."""
    import torch

    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v


# ------------------------------------------------------------------------------------------
# 08.1 scalar attention on the CPU
# ------------------------------------------------------------------------------------------

SCALAR_SOLUTION = '''\
def attention(seq, dim):
    scale = 1.0 / (dim ** 0.5)

    @T.prim_func
    def attn(Q: T.Tensor((seq, dim), T.float32), K: T.Tensor((seq, dim), T.float32),
             V: T.Tensor((seq, dim), T.float32), O: T.Tensor((seq, dim), T.float32)):
        with T.Kernel(seq) as q:  # one block per query row
            s = T.alloc_local((seq,), T.float32)
            best = T.alloc_local((1,), T.float32)
            total = T.alloc_local((1,), T.float32)
            best[0] = -T.infinity(T.float32)
            for k in T.serial(seq):
                s[k] = 0.0
                for d in T.serial(dim):
                    s[k] += Q[q, d] * K[k, d]
                s[k] = s[k] * scale
                best[0] = T.max(best[0], s[k])
            total[0] = 0.0
            for k in T.serial(seq):
                s[k] = T.exp(s[k] - best[0])
                total[0] += s[k]
            for d in T.serial(dim):
                O[q, d] = 0.0
                for k in T.serial(seq):
                    O[q, d] += s[k] * V[k, d]
                O[q, d] = O[q, d] / total[0]

    return attn


answer_08_1 = attention
'''


def _inputs(seq: int, dim: int, seed: int, magnitude: float = 1.0) -> tuple[Any, Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    q = torch.randn(seq, dim, generator=g) * magnitude
    k = torch.randn(seq, dim, generator=g)
    v = torch.randn(seq, dim, generator=g)
    return q, k, v


@exercise("08.1", "attention, one query row at a time",
          question="Write attention(seq, dim): a target-c kernel (float32 Q, K, V, O of shape (seq, dim)) with "
                   "O = softmax(Q K^T / sqrt(dim)) V, one block per query row. The check launches it on the CPU at "
                   "two sizes, once with large scores.",
          kind="writes",
          hints=("Per query row q: a score for every key k (a dot product over dim), then the softmax over those "
                 "scores, then the weighted sum of V's rows.",
                 "Keep the row's scores in T.alloc_local((seq,), T.float32); loops are T.serial.",
                 "exp of a large score overflows float32: subtract the row's largest score before T.exp (the "
                 "softmax is unchanged)."),
          solution=SCALAR_SOLUTION)
def _scalar(answer: Any) -> str:
    import torch

    for seq, dim, magnitude in ((64, 32, 1.0), (40, 24, 1.0), (64, 32, 60.0)):
        kernel = build(answer, seq, dim, name="attention")
        q, k, v = _inputs(seq, dim, seed=seq + dim, magnitude=magnitude)
        result = run_cpu(kernel, q, k, v, ref=torch_attention)
        if result.passed:
            continue
        out = result.outputs[0]
        if magnitude > 1 and out.nonfinite:
            raise Wrong("right for ordinary inputs, but with large scores your output has NaN or infinite values: "
                        "exp overflows float32 past about 88. Subtract each row's largest score first")
        if out.unwritten:
            raise Wrong(f"at seq={seq}, dim={dim} some of O was never written: {where_wrong(result)}")

        def same(ref: Any, kernel: Any = kernel, args: tuple = (q, k, v)) -> bool:
            return run_cpu(kernel, *args, ref=ref).passed

        if same(lambda q_, k_, v_: torch.softmax(q_ @ k_.T, dim=-1) @ v_):
            raise Wrong("your scores are not scaled: attention divides Q K^T by sqrt(dim) before the softmax")
        if same(lambda q_, k_, v_: torch.softmax(q_ @ k_.T / math.sqrt(q_.shape[-1]), dim=0) @ v_):
            raise Wrong("your softmax normalises down a column of the scores (over queries); each query's weights "
                        "must sum to 1 over the keys")
        def unnormalised(q_: Any, k_: Any, v_: Any) -> Any:
            s = q_ @ k_.T / math.sqrt(q_.shape[-1])
            return torch.exp(s - s.max(dim=-1, keepdim=True).values) @ v_

        if same(unnormalised):
            raise Wrong("the weights are exponentiated but never divided by their sum")
        raise Wrong(f"at seq={seq}, dim={dim} the output differs from softmax(Q K^T / sqrt(dim)) V: "
                    f"{where_wrong(result)}")
    return "right at (64, 32) and (40, 24), and stable with large scores: each row's softmax and weighted sum of V"


# ------------------------------------------------------------------------------------------
# 08.2, 08.3: the tiled forward pass, inspected for sm_90a
# ------------------------------------------------------------------------------------------

def _gemm_ops(report: Any) -> list[tuple[str, str, str]]:
    """(A, B, accumulator) of each T.gemm, in program order, from the lowering explainer."""
    out = []
    for op in report.lowering.ops:
        if op.op.startswith("T.gemm "):
            parts = [p.strip() for p in op.op[len("T.gemm "):].split("->")]
            if len(parts) == 3:
                out.append((parts[0], parts[1], parts[2]))
    return out


def register_operands(report: Any) -> set[str]:
    """Names of the A operands that the kernel's wgmma instructions read from registers (rs)."""
    b_of_rs = {w.b.buffer for w in report.wgmma if w.variant == "rs" and w.b is not None}
    return {a for a, b, _ in _gemm_ops(report) if b in b_of_rs}


@exercise("08.2", "which GEMM reads registers",
          question="The forward pass issues two GEMMs: S = Q K^T and O += P V. On sm_90a one of them is a "
                   "wgmma_rs (operand A from registers) and the other a wgmma_ss (both from shared memory). Name "
                   "the buffer that is read from registers, as the kernel names it (a string).",
          kind="predict",
          hints=("wgmma's operand B is always read from shared memory, through a descriptor.",
                 "A buffer made with T.alloc_shared lives in shared memory; one made with T.alloc_fragment lives in "
                 "registers, spread over the threads.",
                 "Which operand A is computed in the loop itself rather than loaded by T.copy?"),
          solution='answer_08_2 = "P"',
          reveal=lambda answer: _reveal_flash(flash_report()))
def _rs(answer: Any) -> str:
    expect(isinstance(answer, str), f"answer with a buffer name as a string, e.g. \"Q_s\", got {answer!r}")
    report = flash_report()
    truth = register_operands(report)
    expect(len(truth) == 1, "the lesson kernel should issue exactly one wgmma_rs")
    name = answer.strip()
    shared = {lay.buffer for lay in report.layouts if lay.scope == "shared"}
    if name in shared:
        raise Wrong(f"{name} is made with T.alloc_shared: a T.copy (a TMA load) puts it in shared memory, and wgmma "
                    "reads it there through a descriptor")
    if name == "S":
        raise Wrong("S is the first GEMM's accumulator (fp32); the second GEMM multiplies something derived from it")
    if name in ("acc", "O"):
        raise Wrong("that is where the second GEMM accumulates, not one of its inputs")
    expect(name in truth, "not a buffer of this kernel that a GEMM reads; look at the two T.gemm lines")
    (a,) = truth
    return (f"{a}: the fp16 probabilities are computed in registers (a fragment) and fed straight to "
            f"wgmma_rs as operand A; S = Q_s K_s^T reads both from shared memory (wgmma_ss). Keeping {a} in "
            "registers saves a round trip through shared memory and its shared-memory space")


@exercise("08.3", "the shared-memory budget",
          question="How many bytes of dynamic shared memory does the forward pass's sm_90a build ask for "
                   "(seq=1024, dim=64, block_M=block_N=64, num_stages=2)?",
          kind="predict",
          hints=("Which buffers are T.alloc_shared? Each fp16 element is 2 bytes.",
                 "Q's block is loaded once, before the loop; K's and V's blocks are loaded inside the pipelined "
                 "loop.",
                 "A pipelined buffer is kept once per stage."),
          solution="answer_08_3 = 40960",
          reveal=lambda answer: _reveal_flash(flash_report()))
def _smem(answer: Any) -> str:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number of bytes, got "
                                                                     f"{answer!r}")
    report = flash_report()
    truth = int(report.kernels[0].dynamic_shared_memory_bytes)
    stages = int(report.lowering.stages or 1)
    tile = {lay.buffer: 2 * math.prod(lay.shape) for lay in report.layouts if lay.scope == "shared"}
    q = tile.get("Q_s", 0)
    kv = tile.get("K_s", 0) + tile.get("V_s", 0)
    p_bytes = 64 * 64 * 2
    if answer == q + kv:
        raise Wrong("that is one copy of each tile; the pipelined loop keeps K's and V's blocks once per stage")
    if answer == stages * (q + kv):
        raise Wrong("Q's block is loaded once before the loop: it is not kept per stage")
    if answer == truth + p_bytes:
        raise Wrong("P never goes to shared memory here: it is a fragment, in registers")
    if answer == stages * kv:
        raise Wrong("the block of queries waits in shared memory too, for every GEMM of the loop")
    if answer == truth // 1024 or answer * 1000 == truth:
        raise Wrong("the question asks for bytes")
    expect(answer == truth, "not quite: add up the T.alloc_shared buffers, each pipelined one once per stage")
    return (f"{truth} B: Q_s {q} B once, K_s and V_s {kv} B per stage x {stages} stages. The tiles grow with dim "
            "and the key block, and a Hopper block has at most 227 KiB: the budget decides block sizes and stages")


# ------------------------------------------------------------------------------------------
# 08.4 keep P in registers
# ------------------------------------------------------------------------------------------

GIVEN_08_4 = '''\
def my_flash(seq, dim, block_M=64, block_N=64, num_stages=2, threads=128):
    scale = 1.44269504 / dim ** 0.5

    @T.prim_func
    def attention(Q: T.Tensor((seq, dim), T.float16), K: T.Tensor((seq, dim), T.float16),
                  V: T.Tensor((seq, dim), T.float16), O: T.Tensor((seq, dim), T.float16)):
        with T.Kernel(T.ceildiv(seq, block_M), threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), T.float16)
            K_s = T.alloc_shared((block_N, dim), T.float16)
            V_s = T.alloc_shared((block_N, dim), T.float16)
            S = T.alloc_fragment((block_M, block_N), T.float32)
            P = {p_alloc}((block_M, block_N), T.float16)
            acc = T.alloc_fragment((block_M, dim), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            old_max = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            tile_sum = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bx * block_M, 0], Q_s)
            T.fill(acc, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(T.float32))
            for kb in T.Pipelined(T.ceildiv(seq, block_N), num_stages=num_stages):
                T.copy(K[kb * block_N, 0], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                T.copy(row_max, old_max)
                T.reduce_max(S, row_max, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - row_max[i] * scale)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * T.exp2(old_max[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] = acc[i, j] * T.exp2(old_max[i] * scale - row_max[i] * scale)
                T.reduce_sum(S, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] + tile_sum[i]
                T.copy(S, P)
                T.copy(V[kb * block_N, 0], V_s)
                T.gemm(P, V_s, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = acc[i, j] / row_sum[i]
            T.copy(acc, O[bx * block_M, 0])

    return attention
'''


@exercise("08.4", "keep P in registers",
          question="my_flash stages the probabilities P through shared memory, so both GEMMs are wgmma_ss and the "
                   "kernel asks for more shared memory than it needs. Change it so that O += P V reads P from "
                   "registers (wgmma_rs), the first GEMM still reads shared memory, and the shared memory shrinks.",
          kind="fixes",
          hints=("The inspector's WGMMA tab gives each instruction's variant; the Summary its shared memory.",
                 "wgmma can take operand A from registers when A is a register fragment laid out as it wants.",
                 "P = T.alloc_fragment(...) instead of T.alloc_shared(...)."),
          solution=GIVEN_08_4.format(p_alloc="T.alloc_fragment"),
          answer_name="my_flash",
          given=GIVEN_08_4.format(p_alloc="T.alloc_shared"),
          reveal=lambda answer: _reveal_flash(inspect(answer(**FLASH_SIZE), "sm_90a")))
def _keep_p(answer: Any) -> str:
    report = inspect(build(answer, FLASH_SIZE["seq"], FLASH_SIZE["dim"], name="my_flash"), "sm_90a")
    loaded = {}
    for op in report.lowering.ops:
        if op.op.startswith("T.copy ") and "->" in op.op:
            src, dst = (p.strip() for p in op.op[len("T.copy "):].split("->"))
            loaded[src] = dst
    gemms = _gemm_ops(report)
    expect(len(gemms) == 2 and len(report.wgmma) >= 2, "the kernel should still issue its two GEMMs on wgmma")
    variants = {(w.b.buffer if w.b is not None else None): w.variant for w in report.wgmma}
    v_buffer, k_buffer = loaded.get("V"), loaded.get("K")
    expect(v_buffer in variants and k_buffer in variants, "K and V should still be loaded into shared memory by "
                                                          "T.copy and read by the two GEMMs")
    expect(variants[k_buffer] == "ss", "S = Q K^T should still read both operands from shared memory")
    expect(variants[v_buffer] == "rs", "O += P V still reads P from shared memory (wgmma_ss): where does P live?")
    expect(not report.problems, "the lowered kernel has problems: " + "; ".join(report.problems))
    given = inspect(build(_given_08_4(), FLASH_SIZE["seq"], FLASH_SIZE["dim"]), "sm_90a")
    mine = int(report.kernels[0].dynamic_shared_memory_bytes)
    before = int(given.kernels[0].dynamic_shared_memory_bytes)
    expect(mine < before, "P is read from registers now, but the kernel asks for as much shared memory as before")
    gpu = on_gpu(build(answer, FLASH_SIZE["seq"], FLASH_SIZE["dim"], name="my_flash"), torch_attention,
                 tolerance=ATTENTION_TOLERANCE)
    return f"O += P V is wgmma_rs; shared memory {before} B -> {mine} B." + gpu


def _given_08_4() -> Any:
    return define(GIVEN_08_4.format(p_alloc="T.alloc_shared"), "my_flash", "08.4")


wrong_answers = {
    "08.1": (SCALAR_SOLUTION.replace("s[k] = s[k] * scale", "s[k] = s[k]"),
             SCALAR_SOLUTION.replace("T.exp(s[k] - best[0])", "T.exp(s[k])"),
             SCALAR_SOLUTION.replace("O[q, d] = O[q, d] / total[0]", "O[q, d] = O[q, d]"),
             SCALAR_SOLUTION.replace("with T.Kernel(seq) as q:", "with T.Kernel(seq // 2) as q:")),
    "08.2": ('answer_08_2 = "Q_s"', 'answer_08_2 = "S"', 'answer_08_2 = "V_s"'),
    "08.3": ("answer_08_3 = 24576", "answer_08_3 = 49152", "answer_08_3 = 32768"),
    "08.4": (GIVEN_08_4.format(p_alloc="T.alloc_shared").replace("num_stages=2, threads=128",
                                                                "num_stages=1, threads=128"),),
}
