"""Lesson 08: flash attention. The student writes the tiled forward pass (query blocks, key blocks
streamed through the online softmax, an optional causal mask) and runs it on the CPU, graded by its
results and its tile map; reads the lesson's Hopper kernel through ``tilelab.inspect`` (which GEMM
reads an operand from registers, what the shared-memory budget holds); then writes the same body
for sm_90a, graded by its results on the CPU and by how it lowered."""

from __future__ import annotations

import math
from typing import Any

from tilelab.workshop import Wrong, exercise, expect

from ._common_b import build, inspect, on_gpu, where_wrong

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
# 08.1 the tiled forward pass, written for the CPU
# ------------------------------------------------------------------------------------------

def causal_attention(q: Any, k: Any, v: Any) -> Any:
    """Attention in which query i sees keys 0..i only (a decoder's mask)."""
    import torch

    s = q @ k.T / math.sqrt(q.shape[-1])
    above = torch.ones(s.shape, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax(s.masked_fill(above, float("-inf")), dim=-1) @ v


def blockwise(q: Any, k: Any, v: Any, block_M: int, block_N: int, causal: bool, *, rescale_acc: bool = True,
              rescale_sum: bool = True, carry_max: bool = True, divide: bool = True, short: int = 0,
              diagonal: bool = True, masked: bool = True) -> Any:
    """The tiled forward pass computed block by block in float64, with the slips students make
    switched on by name: what a wrong kernel computed, to say which slip it made."""
    import torch

    q, k, v = (t.double() for t in (q, k, v))
    seq, dim = q.shape
    out = torch.empty_like(q)
    for m0 in range(0, seq, block_M):
        rows = torch.arange(m0, min(m0 + block_M, seq))
        qs = q[rows]
        steps = -(-min(seq, m0 + block_M) // block_N) if causal else -(-seq // block_N)
        m = torch.full((len(rows),), float("-inf"), dtype=torch.float64)
        total = torch.zeros(len(rows), dtype=torch.float64)
        acc = torch.zeros(len(rows), dim, dtype=torch.float64)
        for kb in range(steps - short):
            cols = torch.arange(kb * block_N, min((kb + 1) * block_N, seq))
            s = qs @ k[cols].T / math.sqrt(dim)
            if causal and masked:
                after = cols[None, :] > rows[:, None] if diagonal else cols[None, :] >= rows[:, None]
                s = s.masked_fill(after, float("-inf"))
            new = torch.maximum(m, s.max(dim=1).values) if carry_max else s.max(dim=1).values
            p = torch.exp(s - new[:, None])
            alpha = torch.exp(m - new)
            total = (total * alpha if rescale_sum else total) + p.sum(dim=1)
            acc = (acc * alpha[:, None] if rescale_acc else acc) + p @ v[cols]
            m = new
        out[rows] = acc / total[:, None] if divide else acc
    return out


# What a wrong flash attention computed instead, tried in this order: (the slip's words, blockwise's
# switches, whether it needs the causal mask to show)
SLIPS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("the output is never divided by the row sums: after the loop, acc / row_sum is the softmax's weighted "
     "average (the division of the softmax, done once at the end)", {"divide": False}, False),
    ("acc is not rescaled when a row's maximum grows: the terms it holds were exponentiated against the old "
     "maximum, so each step multiplies acc by exp2((old_max - row_max) * scale) before adding P V",
     {"rescale_acc": False}, False),
    ("row_sum is not rescaled when a row's maximum grows: it adds terms exponentiated against the old maximum to "
     "terms against the new one; multiply it by exp2((old_max - row_max) * scale) first", {"rescale_sum": False},
     False),
    ("neither acc nor row_sum is rescaled when a row's maximum grows (the online softmax's correction)",
     {"rescale_acc": False, "rescale_sum": False}, False),
    ("the row maximum is not carried across key blocks: each block's maximum replaces the running one "
     "(T.reduce_max(..., clear=False) keeps the largest score seen so far)", {"carry_max": False}, False),
    ("the loop over key blocks stops one block short: the last block of K and V never reaches the output",
     {"short": 1}, False),
    ("the causal mask also hides the diagonal: query i attends to keys 0..i, itself included (mask keys with "
     "index > the query's, not >=)", {"diagonal": False}, True),
    ("keys after the query are not masked: with causal=True, a key whose index is greater than the query's "
     "gets a score of -infinity before the softmax", {"masked": False}, True),
)

# sizes the tiled CPU version is graded at: (seq, dim, block_M, block_N, causal); key blocks
# smaller and larger than query blocks, several key blocks so that every row's maximum moves
FLASH_CPU_SIZES = ((96, 16, 32, 16, False), (64, 8, 16, 32, True))

FLASH_CPU_SOLUTION = """\
def flash(seq, dim, block_M, block_N, causal=False):
    scale = 1.44269504 / dim ** 0.5  # log2(e) / sqrt(dim): T.exp2(x * scale) is exp(x / sqrt(dim))

    @T.prim_func
    def attention(Q: T.Tensor((seq, dim), T.float32), K: T.Tensor((seq, dim), T.float32),
                  V: T.Tensor((seq, dim), T.float32), O: T.Tensor((seq, dim), T.float32)):
        with T.Kernel(T.ceildiv(seq, block_M), threads=128) as bx:  # block bx: queries bx * block_M ...
            Q_t = T.alloc_fragment((block_M, dim), T.float32)
            K_t = T.alloc_fragment((block_N, dim), T.float32)
            V_t = T.alloc_fragment((block_N, dim), T.float32)
            S = T.alloc_fragment((block_M, block_N), T.float32)  # scores, then weights, of one key block
            acc = T.alloc_fragment((block_M, dim), T.float32)  # the running output, not yet divided
            row_max = T.alloc_fragment((block_M,), T.float32)
            old_max = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            tile_sum = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bx * block_M, 0], Q_t)
            T.fill(acc, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(T.float32))
            steps = T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq, block_N)
            for kb in T.serial(steps):
                T.copy(K[kb * block_N, 0], K_t)
                T.clear(S)
                T.gemm(Q_t, K_t, S, transpose_B=True)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.if_then_else(kb * block_N + j > bx * block_M + i, -T.infinity(T.float32),
                                                 S[i, j])
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
                T.copy(V[kb * block_N, 0], V_t)
                T.gemm(S, V_t, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = acc[i, j] / row_sum[i]
            T.copy(acc, O[bx * block_M, 0])

    return attention
"""

_CPU_HEAD, _CPU_REST = FLASH_CPU_SOLUTION.split("            steps = ", 1)
# the committed answer cell: the signature, the buffers and the loop's skeleton
GIVEN_08_1 = _CPU_HEAD + """\
            steps = ...  # how many key blocks: every one, or (causal) only those up to the diagonal
            for kb in T.serial(steps):
                ...  # 1. S = Q K^T for key block kb: copy K's block, T.clear(S), T.gemm(..., transpose_B=True)
                ...  # 2. causal only: a key after the query (kb * block_N + j > bx * block_M + i) scores -infinity
                ...  # 3. the new row maximum: keep the old one in old_max, then T.reduce_max(..., clear=False)
                ...  # 4. S = exp2((S - row_max) * scale); rescale row_sum and acc by exp2((old_max - row_max) * scale)
                ...  # 5. add this block's row sums to row_sum; acc += S V (copy V's block kb, T.gemm)
            ...  # 6. divide each row of acc by its row_sum and store the block's rows of O

    return attention
"""


LARGE = 100.0


def _large_scores(seq: int, dim: int, half: bool = False) -> tuple[Any, Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seq + dim)
    q, k, v = (torch.randn(seq, dim, generator=g) for _ in range(3))
    dtype = torch.float16 if half else torch.float32
    return (q * LARGE).to(dtype), k.to(dtype), v.to(dtype)


def name_the_slip(kernel: Any, causal: bool, block_M: int, block_N: int, *, device: str = "cpu",
                  tolerance: float | None = None, seed: int = 23, tensors: tuple[Any, ...] = ()) -> str | None:
    """Which of :data:`SLIPS` a wrong flash attention made (launched again against each)."""
    import tilelab

    for said, switches, needs_causal in SLIPS:
        if needs_causal and not causal:
            continue

        def ref(q: Any, k: Any, v: Any, switches: dict[str, Any] = switches) -> Any:
            return blockwise(q, k, v, block_M, block_N, causal, **switches)

        try:
            if tilelab.run(kernel, *tensors, ref=ref, device=device, seed=seed, tolerance=tolerance).passed:
                return said
        except Exception:
            continue
    return None


def _keys_past_the_diagonal(kernel: Any, seq: int, block_M: int, block_N: int) -> str | None:
    """From the tile map: a causal kernel's blocks that read key blocks wholly after their last query."""
    import tilelab

    trace = tilelab.trace_tiles(kernel, seed=3)
    extra = []
    for b in range(-(-seq // block_M)):
        rows = trace.reads("K", b).any(axis=1).nonzero()[0]
        last = int(rows.max()) if len(rows) else -1
        needed = min(seq, -(-(b + 1) * block_M // block_N) * block_N) - 1
        if last > needed:
            extra.append((b, last, needed))
    if not extra:
        return None
    b, last, needed = extra[0]
    return (f"the tile map shows block {b} reading keys up to row {last} of K, where its last query is row "
            f"{(b + 1) * block_M - 1}: {len(extra)} block(s) load key blocks that the mask wholly throws away. "
            "With causal=True, stop the loop at the key block that holds the block's last query "
            "(T.ceildiv((bx + 1) * block_M, block_N) steps)")


def flash_verdict(kernel: Any, seq: int, dim: int, block_M: int, block_N: int, causal: bool, where: str, *,
                  tolerance: float | None = None, half: bool = False) -> None:
    """Run a flash attention on the CPU against torch and raise :class:`Wrong` with what is wrong. The
    causal run has large scores (Q x LARGE): a maximum that is not carried across key blocks
    overflows exp2 there (a block's maximum far below the previous one's)."""
    import tilelab

    ref = causal_attention if causal else torch_attention
    tensors = _large_scores(seq, dim, half) if causal else ()
    result = tilelab.run(kernel, *tensors, ref=ref, device="cpu", seed=23, tolerance=tolerance, tile=(block_M, dim))
    if result.passed:
        return
    out = result.outputs[0]
    if out.unwritten:
        raise Wrong(f"{where}, {where_wrong(result)}: does every block store its block_M rows of O, at "
                    "O[bx * block_M, 0]?")
    if out.nonfinite and causal:
        ordinary = tilelab.run(kernel, ref=ref, device="cpu", seed=23, tolerance=tolerance).outputs[0]
        if ordinary.nonfinite:
            raise Wrong(f"{where}, even with ordinary scores {ordinary.nonfinite} elements of O are NaN: a row whose "
                        "every key is masked divides 0 by 0. Query 0 sees one key, itself: if your mask hides the "
                        "diagonal (key == query), mask only keys with index > the query's")
        raise Wrong(f"{where}, with large scores (Q x {LARGE:g}), {out.nonfinite} elements of O are NaN or infinite: "
                    "an exp2 overflowed float32 (past about 2^128). Its argument must never be positive: is the "
                    "row maximum carried across key blocks (T.reduce_max with clear=False), so that old_max - "
                    "row_max <= 0, and subtracted before every exp2?")
    said = name_the_slip(kernel, causal, block_M, block_N, tolerance=tolerance, tensors=tensors)
    if said:
        raise Wrong(f"{where}: {said}")
    raise Wrong(f"{where} O is wrong: {where_wrong(result)}. Each row of the softmax sums to 1: follow one row "
                "through two key blocks (its maximum, the rescale, the sum) and the final division")


@exercise("08.1", "the tiled forward pass, on the CPU",
          question="Write flash(seq, dim, block_M, block_N, causal): flash attention's forward pass, one block per "
                   "block_M queries, streaming keys and values block_N at a time with the online softmax (running "
                   "row maximum, rescale, final division). With causal=True query i sees keys 0..i only, and a "
                   "block visits only the key blocks up to its diagonal. The check runs it on the CPU at two sizes "
                   "(block_M > block_N without the mask, block_M < block_N with it) and reads its tile map.",
          kind="writes",
          hints=("Notebook 03's online softmax, a block of rows at a time: S holds one key block's scores; "
                 "row_max, row_sum and acc carry across the loop; each step multiplies the old row_sum and acc by "
                 "exp2((old_max - row_max) * scale) before adding the new block's terms.",
                 "Step 1: T.copy(K[kb * block_N, 0], K_t); T.clear(S); T.gemm(Q_t, K_t, S, transpose_B=True). "
                 "Step 5: T.reduce_sum(S, tile_sum, dim=1), row_sum += tile_sum, T.copy(V[kb * block_N, 0], V_t); "
                 "T.gemm(S, V_t, acc).",
                 "steps = T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq, block_N); the mask "
                 "is T.if_then_else(kb * block_N + j > bx * block_M + i, -T.infinity(T.float32), S[i, j])."),
          solution=FLASH_CPU_SOLUTION, answer_name="flash", given=GIVEN_08_1)
def _tiled_cpu(factory: Any) -> str:

    done = []
    for seq, dim, bm, bn, causal in FLASH_CPU_SIZES:
        kernel = build(factory, seq, dim, bm, bn, causal, name="flash")
        where = f"at seq={seq}, dim={dim} with {bm} queries x {bn} keys a step, causal={causal}"
        flash_verdict(kernel, seq, dim, bm, bn, causal, where)
        if causal:
            past = _keys_past_the_diagonal(kernel, seq, bm, bn)
            if past:
                raise Wrong(f"right {where}, but {past}")
        done.append(f"seq={seq} {bm}x{bn}" + (" causal" if causal else ""))
    return (f"right on the CPU at {' and '.join(done)}, and the tile map shows each causal block reading only the "
            "key blocks up to its diagonal: the online softmax carries each row's maximum and sum across the key "
            "blocks and corrects acc as the maximum grows")


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
# 08.4 the same body for Hopper
# ------------------------------------------------------------------------------------------

HOPPER_SOLUTION = """\
def my_flash(seq, dim, block_M=64, block_N=64, num_stages=2, threads=128, causal=False):
    scale = 1.44269504 / dim ** 0.5

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
            steps = T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq, block_N)
            for kb in T.Pipelined(steps, num_stages=num_stages):
                T.copy(K[kb * block_N, 0], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.if_then_else(kb * block_N + j > bx * block_M + i, -T.infinity(T.float32),
                                                 S[i, j])
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
"""

_HOPPER_HEAD = HOPPER_SOLUTION.split("            Q_s = ", 1)[0]
# the committed answer cell: the signature and fp16 tensors; the buffers and the loop are the student's
GIVEN_08_4 = _HOPPER_HEAD + """\
            ...  # the buffers: Q's, K's and V's blocks where TMA loads them and wgmma reads them; S, acc and
            ...  # the row statistics in float32 fragments; P, the fp16 weights that O += P V reads from registers
            ...  # then your 08.1 body: Q's block once, the fills, the key loop as T.Pipelined(steps, num_stages=...)
            ...  # with P = S in fp16 before the second GEMM, the final division and the store

    return attention
"""

# the sizes a flash attention written for a GPU is checked at on the CPU: query and key tiles of
# different sizes (block_M != block_N, both ways), several key blocks so the online softmax
# rescales, without and with the causal mask
FLASH_CPU = {"seq": 128, "dim": 32, "block_M": 64, "block_N": 32}
FLASH_CPU_CAUSAL = {"seq": 128, "dim": 32, "block_M": 32, "block_N": 64, "causal": True}


def _flash_on_cpu(answer: Any) -> str:
    """The results part of a flash attention graded for Hopper: its tile program run on the CPU."""

    for sizes in (FLASH_CPU, FLASH_CPU_CAUSAL):
        causal = bool(sizes.get("causal"))
        kernel = build(answer, name="my_flash", **sizes)
        where = (f"run on the CPU (the tile program's meaning) at seq={sizes['seq']}, dim={sizes['dim']} with "
                 f"{sizes['block_M']} queries x {sizes['block_N']} keys a step, causal={causal}")
        flash_verdict(kernel, sizes["seq"], sizes["dim"], sizes["block_M"], sizes["block_N"], causal, where,
                      tolerance=ATTENTION_TOLERANCE, half=True)
    return (f"right on the CPU at seq={FLASH_CPU['seq']} with {FLASH_CPU['block_M']}x{FLASH_CPU['block_N']} tiles "
            f"and, causal, with {FLASH_CPU_CAUSAL['block_M']}x{FLASH_CPU_CAUSAL['block_N']}")


def _lowered_for_hopper(report: Any) -> str:
    """How a flash attention lowered for sm_90a: TMA loads of K and V, both GEMMs on wgmma, the
    second reading P from registers."""
    loaded = {}
    for op in report.lowering.ops:
        if op.op.startswith("T.copy ") and "->" in op.op:
            src, dst = (p.strip() for p in op.op[len("T.copy "):].split("->"))
            loaded[src] = (dst, op.path)
    gemms = _gemm_ops(report)
    expect(len(gemms) == 2, f"the kernel issues {len(gemms)} T.gemm; flash attention has two: S = Q K^T and "
                            "O += P V")
    for name in ("Q", "K", "V"):
        dst, path = loaded.get(name, (None, ""))
        if dst is None:
            raise Wrong(f"right on the CPU, but no T.copy loads {name}'s block into a buffer of the kernel")
        if not path.startswith("TMA"):
            raise Wrong(f"right on the CPU, but {name}'s copy lowered to {path}, not a TMA bulk copy: TMA writes "
                        "shared memory (T.alloc_shared)")
    expect(report.wgmma, "right on the CPU, but neither GEMM lowered to wgmma: both read their operand B from "
                         "shared memory and accumulate in a float32 fragment")
    variants = {(w.b.buffer if w.b is not None else None): w.variant for w in report.wgmma}
    k_buffer, v_buffer = loaded["K"][0], loaded["V"][0]
    expect(k_buffer in variants and v_buffer in variants, "right on the CPU, but the two GEMMs do not both lower to "
                                                          "wgmma reading K's and V's blocks from shared memory")
    expect(variants[k_buffer] == "ss", "S = Q K^T should read both operands from shared memory (wgmma_ss)")
    expect(variants[v_buffer] == "rs", "O += P V reads P from shared memory (wgmma_ss): P is computed in the loop, "
                                       "from S; keep it in registers (a fragment) so that wgmma_rs reads it there")
    expect(int(report.lowering.stages or 1) >= 2, "the key loop is not pipelined: T.Pipelined(steps, num_stages=2) "
                                                  "lets the next blocks' loads fly while this one computes")
    expect(not report.problems, "the lowered kernel has problems: " + "; ".join(report.problems))
    return (f"S = Q K^T is wgmma_ss and O += P V wgmma_rs, K and V loaded by TMA in a {report.lowering.stages}-stage "
            "loop")


@exercise("08.4", "the same body for Hopper",
          question="Write my_flash(seq, dim, block_M=64, block_N=64, num_stages=2, threads=128, causal=False): your "
                   "08.1 forward pass for sm_90a, fp16 in and out. Q's, K's and V's blocks in shared memory (TMA "
                   "loads), the key loop pipelined, both GEMMs on wgmma, the second reading the fp16 weights P from "
                   "registers. The check runs it on the CPU (without and with the causal mask, block_M != block_N) "
                   "and reads how it lowered for sm_90a.",
          kind="writes",
          hints=("The loop body is 08.1's. What changes is where the tiles live: T.alloc_shared for the blocks "
                 "T.copy loads (TMA writes shared memory), T.alloc_fragment for what is computed.",
                 "wgmma multiplies fp16: S stays float32 (the scores and the softmax), and P = "
                 "T.alloc_fragment((block_M, block_N), T.float16) takes T.copy(S, P) before T.gemm(P, V_s, acc).",
                 "for kb in T.Pipelined(steps, num_stages=num_stages), with steps as in 08.1; "
                 "lesson.flash_forward is the kernel without the causal mask."),
          solution=HOPPER_SOLUTION, answer_name="my_flash", given=GIVEN_08_4,
          reveal=lambda answer: _reveal_flash(inspect(answer(**FLASH_SIZE, causal=True), "sm_90a")))
def _hopper(answer: Any) -> str:
    right = _flash_on_cpu(answer)
    report = inspect(build(answer, FLASH_SIZE["seq"], FLASH_SIZE["dim"], causal=True, name="my_flash"), "sm_90a")
    lowered = _lowered_for_hopper(report)
    gpu = on_gpu(build(answer, FLASH_SIZE["seq"], FLASH_SIZE["dim"], name="my_flash"), torch_attention,
                 tolerance=ATTENTION_TOLERANCE)
    return f"{right}; {lowered}." + gpu


wrong_answers = {
    "08.1": (FLASH_CPU_SOLUTION.replace("acc[i, j] = acc[i, j] / row_sum[i]", "acc[i, j] = acc[i, j]"),
             FLASH_CPU_SOLUTION.replace("clear=False", "clear=True")),
    "08.2": ('answer_08_2 = "Q_s"', 'answer_08_2 = "S"', 'answer_08_2 = "V_s"'),
    "08.3": ("answer_08_3 = 24576", "answer_08_3 = 49152", "answer_08_3 = 32768"),
    "08.4": (HOPPER_SOLUTION.replace("P = T.alloc_fragment", "P = T.alloc_shared"),),
}
