"""Lesson 09: low precision. An fp8 GEMM for sm_90a (what changes in the wgmma instruction and in
the TMA swizzle when elements are one byte, read from ``tilelab.inspect``), then int4 weights
unpacked and scaled by a kernel the student writes and runs on the CPU (target ``c``)."""

from __future__ import annotations

from typing import Any

from tilelab.workshop import Wrong, exercise, expect

from ._common_b import build, gemm_on_cpu, inspect, on_gpu, run_cpu, where_wrong

SIZE = (1024, 1024, 1024)


def nt_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 64,
            dtype: str = "float16", num_stages: int = 3, threads: int = 256) -> Any:
    """C = A B^T with both operands K-major (the layout fp8 wgmma requires), accumulated in fp32."""
    import tilelang.language as T

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return gemm


def report(dtype: str, block_K: int = 64) -> Any:
    return inspect(nt_gemm(*SIZE, block_K=block_K, dtype=dtype), "sm_90a")


def _reveal(rep: Any) -> Any:
    import tilelab

    return tilelab.Inspector(rep, show="summary,wgmma,tma")


def _instructions(rep: Any) -> set[str]:
    return {w.instruction for w in rep.wgmma}


def _mnk(shape: str) -> tuple[int, int, int] | None:
    """(M, N, K) of a wgmma shape written mMnNkK (``m64n128k16``), or None."""
    import re

    match = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    if match is None:
        return None
    m, n, k = (int(x) for x in match.groups())
    return m, n, k


@exercise("09.1", "the fp8 instruction",
          question="The fp16 build of the GEMM (128x128x64 tiles, 256 threads) issues the wgmma shape printed "
                   "above. The same kernel with float8_e4m3 operands: which shape (mMnNkK) does it issue?",
          kind="predict",
          hints=("M and N come from how the tile is split among the warpgroups, which the element type does not "
                 "change.",
                 "One wgmma reads a fixed number of bytes of K from each row of A and B.",
                 "An fp8 element is half as wide as an fp16 one."),
          solution='answer_09_1 = "m64n64k32"',
          reveal=lambda answer: _reveal(report("float8_e4m3")))
def _fp8_shape(answer: Any) -> str:
    expect(isinstance(answer, str), f"answer with the shape as a string like \"m64n8k16\", got {answer!r}")
    text = answer.strip().lower().replace(" ", "")
    shape = _mnk(text)
    if shape is None:
        raise Wrong(f"{answer!r} is not of the form mMnNkK")
    fp16 = _instructions(report("float16"))
    fp8 = _instructions(report("float8_e4m3"))
    expect(len(fp8) == 1 and len(fp16) == 1, "the lesson's GEMM should issue one wgmma shape per build")
    (truth,) = fp8
    (before,) = fp16
    truth_shape, before_shape = _mnk(truth), _mnk(before)
    assert truth_shape is not None and before_shape is not None, (truth, before)  # TileLang's own wgmma shapes
    m, n, k = shape
    tm, tn, tk = truth_shape
    if text == before:
        raise Wrong("that is the fp16 instruction unchanged; one wgmma reads a fixed number of bytes of K per row, "
                    "so what happens to K when an element is one byte?")
    if (m, n) != (tm, tn):
        raise Wrong("M and N do not change with the element type: the tile is split among the warpgroups as in the "
                    "fp16 build")
    fk = before_shape[2]
    if k < fk:
        raise Wrong("narrower elements mean more of them in the same bytes, not fewer")
    expect(text == truth, "not quite: how many fp8 elements fit in the bytes one fp16 wgmma reads along K?")
    return (f"{truth}: {2 * fk} bytes of K per row per instruction, {tk} fp8 values where fp16 had {fk}; twice the "
            "multiply-adds per instruction, which is where fp8's doubled peak comes from")


@exercise("09.2", "the fp8 swizzle",
          question="With block_K=64, the fp16 build's TMA box for A uses the 128B swizzle. Which swizzle does the fp8 "
                   "build's box for A use ('none', '32B', '64B' or '128B')?",
          kind="predict",
          hints=("TMA's swizzle is chosen from the bytes of one row of the box (its inner dimension).",
                 "A row of A's box is block_K elements.",
                 "Count the bytes of a 64-element row at one byte per element."),
          solution='answer_09_2 = "64B"',
          reveal=lambda answer: _reveal(report("float8_e4m3")))
def _fp8_swizzle(answer: Any) -> str:
    expect(isinstance(answer, str), f"answer with the swizzle's name as a string, e.g. \"32B\", got {answer!r}")
    text = answer.strip().upper().replace("NONE", "none")
    expect(text in ("none", "32B", "64B", "128B"), f"{answer!r} is not one of 'none', '32B', '64B', '128B'")
    truth = report("float8_e4m3").tma("A").swizzle
    fp16 = report("float16").tma("A").swizzle
    if text == fp16 and text != truth:
        raise Wrong("that is the fp16 box's swizzle: the swizzle follows a row's bytes, not its element count")
    expect(text == truth, "not quite: how many bytes is one row of A's box in fp8?")
    box = report("float8_e4m3").tma("A").box_dim
    return (f"{truth}: A's box is {tuple(box)} (innermost first), a {box[0]}-byte row, so the widest swizzle that "
            f"fits is {truth}; fp16's {box[0] * 2}-byte rows took {fp16}")


FP8_SOLUTION = '''\
def fp8_gemm(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=3, threads=256):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float8_e4m3fn), B: T.Tensor((N, K), T.float8_e4m3fn),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3fn)
            B_s = T.alloc_shared((block_N, block_K), T.float8_e4m3fn)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return gemm


answer_09_3 = fp8_gemm
'''


@exercise("09.3", "an fp8 GEMM with the widest swizzle",
          question="Write fp8_gemm(M, N, K): C (fp32) = A B^T with A (M, K) and B (N, K) in float8_e4m3, whose "
                   "sm_90a build loads both tiles by TMA with the 128B swizzle, multiplies on fp8 wgmma with fp32 "
                   "accumulation, and has no problems in its report. The check builds it at 1024^3.",
          kind="writes",
          hints=("Start from the GEMM at the top of this notebook: the dtype is T.float8_e4m3fn.",
                 "The 128B swizzle needs a 128-byte row in the box.",
                 "block_K = 128 fp8 values; keep B as (N, K) and T.gemm(..., transpose_B=True)."),
          solution=FP8_SOLUTION,
          reveal=lambda answer: _reveal(inspect(answer(*SIZE), "sm_90a")))
def _fp8_gemm(answer: Any) -> str:
    rep = inspect(build(answer, *SIZE, name="fp8_gemm"), "sm_90a")
    expect(rep.wgmma, "the product is not on wgmma: " + "; ".join(
        f"{op.op}: {op.path}" for op in (rep.lowering.ops if rep.lowering else ()) if op.op.startswith("T.gemm")))
    dtypes = {(w.a_dtype, w.b_dtype) for w in rep.wgmma}
    expect(all(a.startswith("float8") and b.startswith("float8") for a, b in dtypes),
           f"the wgmma operands are {sorted(dtypes)}: A and B must be fp8")
    expect(all(w.accum_dtype == "float32" for w in rep.wgmma), "accumulate in fp32 (the fragment's dtype)")
    descs = {d.buffer: d for d in rep.tma_descriptors}
    expect("A" in descs and "B" in descs, "A and B should both be loaded by TMA (T.copy of a global tile into a "
                                          "shared buffer inside the pipelined loop)")
    for name in ("A", "B"):
        d = descs[name]
        expect(d.swizzle == "128B", f"{name}'s box is {tuple(d.box_dim)} (innermost first), swizzle {d.swizzle}: "
                                    "its rows are too narrow for the 128B swizzle")
    expect(not rep.problems, "the report lists problems: " + "; ".join(rep.problems))
    shape = min(w.instruction for w in rep.wgmma)
    # Hopper's fp8 WGMMA adds its products with a narrower accumulator than fp32 (an H100 gave a
    # relative error of 5.4e-4 against an fp32 sum of the same fp8 inputs): judged at 2e-3.
    right = gemm_on_cpu(lambda M, N, K, bm, bn, bk: build(answer, M, N, K, bm, bn, bk, name="fp8_gemm"),
                        transpose_b=True, size=(150, 100, 160, 64, 32, 16))
    gpu = on_gpu(build(answer, *SIZE, name="fp8_gemm"), lambda a, b: a @ b.T, tolerance=2e-3)
    return (f"{shape} on fp8 operands, A and B boxes {tuple(descs['A'].box_dim)} / {tuple(descs['B'].box_dim)} "
            f"with the 128B swizzle; {right}." + gpu)


# ------------------------------------------------------------------------------------------
# 09.4 int4 on the CPU
# ------------------------------------------------------------------------------------------

def unpack_int4(q: Any, s: Any) -> Any:
    """The reference: byte j of row i holds element 2j in its low nibble and 2j+1 in its high nibble,
    each a 4-bit two's-complement integer (-8..7), times the row's scale."""
    import torch

    q = q.to(torch.int64)
    lo, hi = q & 15, q >> 4
    lo = torch.where(lo >= 8, lo - 16, lo)
    hi = torch.where(hi >= 8, hi - 16, hi)
    w = torch.stack([lo, hi], dim=-1).reshape(q.shape[0], -1).to(torch.float64)
    return w * s[:, None].to(torch.float64)


def _misreadings() -> list[tuple[str, Any]]:
    import torch

    def swapped(q: Any, s: Any) -> Any:
        w = unpack_int4(q, s)
        return w.reshape(w.shape[0], -1, 2).flip(-1).reshape(w.shape)

    def unsigned(q: Any, s: Any) -> Any:
        q = q.to(torch.int64)
        w = torch.stack([q & 15, q >> 4], dim=-1).reshape(q.shape[0], -1).to(torch.float64)
        return w * s[:, None].to(torch.float64)

    def offset(q: Any, s: Any) -> Any:
        q = q.to(torch.int64)
        w = torch.stack([(q & 15) - 8, (q >> 4) - 8], dim=-1).reshape(q.shape[0], -1).to(torch.float64)
        return w * s[:, None].to(torch.float64)

    def unscaled(q: Any, s: Any) -> Any:
        return unpack_int4(q, torch.ones_like(s))

    return [
        ("the two nibbles are swapped: element 2j is in the low 4 bits of byte j, element 2j+1 in the high 4", swapped),
        ("the values are read as unsigned (0..15); a nibble is a two's-complement int4, -8..7: a nibble of 8 or "
         "more is negative", unsigned),
        ("you subtract 8 from every nibble (an offset encoding); these nibbles are two's complement: only those of "
         "8 or more are negative, and they wrap", offset),
        ("the integers are right but not scaled: multiply by the row's scale S[i]", unscaled),
    ]


INT4_SOLUTION = '''\
def dequantise(M, N):
    @T.prim_func
    def dequant(Qw: T.Tensor((M, N // 2), T.uint8), S: T.Tensor((M,), T.float32), W: T.Tensor((M, N), T.float32)):
        with T.Kernel(M) as i:
            for j in T.serial(N // 2):
                lo = T.Cast(T.int32, Qw[i, j] & T.uint8(15))
                hi = T.Cast(T.int32, Qw[i, j] >> T.uint8(4))
                W[i, 2 * j] = T.Cast(T.float32, T.if_then_else(lo >= 8, lo - 16, lo)) * S[i]
                W[i, 2 * j + 1] = T.Cast(T.float32, T.if_then_else(hi >= 8, hi - 16, hi)) * S[i]

    return dequant


answer_09_4 = dequantise
'''


@exercise("09.4", "unpack int4 weights",
          question="Write dequantise(M, N): a target-c kernel that reads Qw (uint8, (M, N/2)), two int4 values per "
                   "byte (element 2j in the low nibble of byte j, element 2j+1 in the high nibble, each a "
                   "two's-complement integer -8..7), and writes W[i, n] = int4 value * S[i] as float32 (M, N). "
                   "The check launches it on the CPU at two sizes.",
          kind="writes",
          hints=("Byte j of a row gives two outputs: W[i, 2j] and W[i, 2j+1].",
                 "Qw[i, j] & T.uint8(15) is the low nibble, Qw[i, j] >> T.uint8(4) the high one; cast to T.int32 "
                 "before doing arithmetic with a sign.",
                 "A nibble v of 8 or more stands for v - 16: T.if_then_else(v >= 8, v - 16, v)."),
          solution=INT4_SOLUTION)
def _int4(answer: Any) -> str:
    import torch

    for m, n in ((16, 64), (8, 40)):
        kernel = build(answer, m, n, name="dequantise")
        g = torch.Generator().manual_seed(m * n)
        q = torch.randint(0, 256, (m, n // 2), dtype=torch.uint8, generator=g)
        s = torch.rand(m, generator=g) + 0.5
        result = run_cpu(kernel, q, s, ref=unpack_int4)
        if result.passed:
            continue
        out = result.outputs[0]
        if out.unwritten:
            raise Wrong(f"at M={m}, N={n} part of W was never written: {where_wrong(result)}")
        for message, misread in _misreadings():
            if run_cpu(kernel, q, s, ref=misread).passed:
                raise Wrong(message)
        raise Wrong(f"at M={m}, N={n} W is not the unpacked, scaled weights: {where_wrong(result)}")
    return "every nibble unpacked, sign-extended and scaled, at (16, 64) and (8, 40)"


wrong_answers = {
    "09.1": ('answer_09_1 = "m64n64k16"', 'answer_09_1 = "m64n128k32"', 'answer_09_1 = "m64n64k8"'),
    "09.2": ('answer_09_2 = "128B"', 'answer_09_2 = "32B"'),
    "09.3": (FP8_SOLUTION.replace("block_K=128", "block_K=64"),
             FP8_SOLUTION.replace("T.float8_e4m3fn", "T.float16")),
    "09.4": (INT4_SOLUTION.replace("W[i, 2 * j] =", "W[i, 2 * j + 1] =").replace("W[i, 2 * j + 1] = T.Cast(T.float32, "
                                                                                  "T.if_then_else(hi",
                                                                                  "W[i, 2 * j] = T.Cast(T.float32, "
                                                                                  "T.if_then_else(hi"),
             INT4_SOLUTION.replace("T.if_then_else(lo >= 8, lo - 16, lo)", "lo").replace(
                 "T.if_then_else(hi >= 8, hi - 16, hi)", "hi"),
             INT4_SOLUTION.replace("T.if_then_else(lo >= 8, lo - 16, lo)", "(lo - 8)").replace(
                 "T.if_then_else(hi >= 8, hi - 16, hi)", "(hi - 8)"),
             INT4_SOLUTION.replace(" * S[i]", "")),
}
