"""Kernels that call device functions written in CUDA C with inline PTX (``T.import_source``), for
the CPU path's translation of them (tilelab/_tilelang/emulate_ptx.py): a battery of PTX cases whose
values are derived by hand from NVIDIA's PTX ISA, and dequantisers of the kinds quantised GEMMs use
(4-bit integers to float16 by the lop3 magic-number trick, float4 e2m1 to bfloat16 by placing its
bits and scaling by 2^126), each with a wrong variant and a torch reference."""

import tilelang.language as T
import torch

# ------------------------------------------------------------------------------------------------
# The battery: each case one asm statement (or a few), its result's bits written to out[i]
# ------------------------------------------------------------------------------------------------

# Inline PTX in several styles: one instruction per statement, several in one string with a { }
# scope and .reg declarations, "+r", "h", "f" and "n" operands, predicates and a guard, C comments
# between the strings.
DEVICE_SOURCE = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ uint prmt(uint a, uint b, uint c) {
  uint d; asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
__device__ uint prmt_mode(uint a, uint b, uint c, int mode) {
  uint d;
  switch (mode) {
    case 0: asm volatile("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    case 1: asm volatile("prmt.b32.b4e %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    case 2: asm volatile("prmt.b32.rc8 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    case 3: asm volatile("prmt.b32.ecl %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    case 4: asm volatile("prmt.b32.ecr %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    default: asm volatile("prmt.b32.rc16 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
  }
  return d;
}
template <uint LUT> __device__ uint lop3(uint a, uint b, uint c) {
  uint d;
  asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
  return d;
}
__device__ uint shifts(uint a, uint n, int which) {
  uint d;
  if (which == 0) asm volatile("shl.b32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(n));
  else if (which == 1) asm volatile("shr.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(n));
  else asm volatile("shr.s32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(n));
  return d;
}
__device__ uint half2_op(uint a, uint b, uint c, int which) {
  uint d;
  switch (which) {
    case 0: asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b)); break;
    case 1: asm volatile("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b)); break;
    case 2: asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
    case 3: asm volatile("add.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b)); break;
    case 4: asm volatile("add.rn.sat.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b)); break;
    case 5: asm volatile("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b)); break;
    default: asm volatile("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c)); break;
  }
  return d;
}
__device__ uint pack(unsigned short lo, unsigned short hi) {
  uint d; asm("mov.b32 %0, {%1, %2};" : "=r"(d) : "h"(lo), "h"(hi)); return d;
}
__device__ unsigned short high_half(uint v) {
  unsigned short lo, hi; asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(v)); return hi;
}
__device__ uint cvt_pair(float a, float b, int bf16) {
  uint d;
  if (bf16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
  return d;
}
__device__ float widen(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ int to_int(float f, int mode) {
  int d;
  if (mode == 0) asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(d) : "f"(f));
  else asm("cvt.rni.s32.f32 %0, %1;" : "=r"(d) : "f"(f));
  return d;
}
__device__ int sign_extend_byte(uint v) { int d; asm("cvt.s32.s8 %0, %1;" : "=r"(d) : "r"(v)); return d; }
__device__ unsigned short to_e4m3x2(float a, float b) {
  unsigned short d; asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b)); return d;
}
__device__ uint from_e4m3x2(unsigned short v) {
  uint d; asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(v)); return d;
}
__device__ uint fields(uint a, int which) {
  uint d;
  if (which == 0) asm("bfe.u32 %0, %1, 8, 8;" : "=r"(d) : "r"(a));
  else if (which == 1) asm("bfe.s32 %0, %1, 8, 8;" : "=r"(d) : "r"(a));
  else asm("bfi.b32 %0, %1, 0, 4, 4;" : "=r"(d) : "r"(a));
  return d;
}
__device__ uint funnel(uint lo, uint hi, uint n, int clamp) {
  uint d;
  if (clamp) asm("shf.r.clamp.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(n));
  else asm("shf.l.wrap.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(n));
  return d;
}
/* several instructions in one string, a scope with declared registers, a predicate and a guard */
__device__ uint select_less(int a, int b) {
  uint d = 5;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  .reg .b32 t<2>;\n"
      "  setp.lt.s32 p, %1, %2;\n"   // a < b (signed)
      "  selp.b32 t0, 1, 2, p;\n"
      "  @p add.u32 t1, t0, 10;\n"
      "  @!p mov.b32 t1, 20;\n"
      "  add.u32 %0, %0, t1;\n"
      "}\n"
      : "+r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ float fma_f32(float a, float b, float c) {
  float d; asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c)); return d;
}
__device__ void twice(float* x) { asm volatile("add.f32 %0, %0, %0;" : "+f"(*x)); }
__device__ unsigned bits_of(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
__device__ float float_of(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

template <typename Out> __device__ void ptx_cases(Out* out) {
  const uint A = 0x03020100u, B = 0x07060504u;  /* byte i of {B, A} holds i */
  int i = 0;
  out[i++] = (Out)(prmt(A, B, 0x7531));
  out[i++] = (Out)(prmt(0x80017F80u, 0, 0x8889));
  out[i++] = (Out)(__byte_perm(0x80017F80u, 0, 0x8889));
  out[i++] = (Out)(prmt_mode(A, B, 1, 0));
  out[i++] = (Out)(prmt_mode(A, B, 0, 1));
  out[i++] = (Out)(prmt_mode(A, B, 2, 2));
  out[i++] = (Out)(prmt_mode(A, B, 1, 3));
  out[i++] = (Out)(prmt_mode(A, B, 2, 4));
  out[i++] = (Out)(prmt_mode(A, B, 1, 5));
  out[i++] = (Out)(prmt_mode(A, B, 7, 0));
  out[i++] = (Out)(lop3<(0xf0 & 0xcc) | 0xaa>(0x12345678u, 0x0f0f0f0fu, 0x64006400u));
  out[i++] = (Out)(lop3<0xf0>(0x12345678u, 0x0f0f0f0fu, 0x64006400u));
  out[i++] = (Out)(lop3<0xcc>(0x12345678u, 0x0f0f0f0fu, 0x64006400u));
  out[i++] = (Out)(lop3<0xaa>(0x12345678u, 0x0f0f0f0fu, 0x64006400u));
  out[i++] = (Out)(lop3<0xf0 ^ 0xcc ^ 0xaa>(0x12345678u, 0x0f0f0f0fu, 0x64006400u));
  out[i++] = (Out)(lop3<0x00>(0xffffffffu, 0xffffffffu, 0xffffffffu));
  out[i++] = (Out)(shifts(1, 31, 0)); out[i++] = (Out)(shifts(1, 32, 0)); out[i++] = (Out)(shifts(1, 100, 0));
  out[i++] = (Out)(shifts(0x80000000u, 31, 1)); out[i++] = (Out)(shifts(0x80000000u, 32, 1));
  out[i++] = (Out)(shifts(0x80000000u, 31, 2));
  out[i++] = (Out)(shifts(0x80000000u, 40, 2));
  out[i++] = (Out)(shifts(0x40000000u, 40, 2));
  out[i++] = (Out)(half2_op(0x64046400u, 0x64006400u, 0, 0));
  out[i++] = (Out)(half2_op(0x3c01u, 0x3e00u, 0, 1));
  out[i++] = (Out)(half2_op(0x3c03u, 0x3e00u, 0, 1));
  out[i++] = (Out)(half2_op(0x3c01u, 0x3c01u, 0xbc02u, 2));
  out[i++] = (Out)(half2_op(0xfc007bffu, 0x7c007bffu, 0, 3));
  out[i++] = (Out)(half2_op(0xc0004000u, 0, 0, 4));
  out[i++] = (Out)(half2_op(0x40003f80u, 0x7e807e80u, 0, 5));
  out[i++] = (Out)(half2_op(0x3f81u, 0x3fc0u, 0, 5));
  out[i++] = (Out)(half2_op(0x3f80u, 0x3f80u, 0x3f80u, 6));
  out[i++] = (Out)(pack(0x1234, 0xabcd)); out[i++] = (Out)(high_half(0xabcd1234u));
  out[i++] = (Out)(cvt_pair(1.0f, 2.0f, 0)); out[i++] = (Out)(cvt_pair(1.00390625f, 1.01171875f, 1));
  out[i++] = (Out)(bits_of(widen(0x3555)));
  out[i++] = (Out)((unsigned)to_int(-2.7f, 0)); out[i++] = (Out)((unsigned)to_int(2.5f, 1));
  out[i++] = (Out)((unsigned)to_int(3.5f, 1)); out[i++] = (Out)((unsigned)to_int(3e10f, 0));
  out[i++] = (Out)((unsigned)sign_extend_byte(0x180u));
  out[i++] = (Out)(to_e4m3x2(500.0f, 1.0f)); out[i++] = (Out)(from_e4m3x2(0x7e38));
  out[i++] = (Out)(fields(0xabcd1234u, 0)); out[i++] = (Out)(fields(0x00008000u, 1)); out[i++] = (Out)(fields(0xfu, 2));
  out[i++] = (Out)(funnel(0x80000000u, 1, 1, 0)); out[i++] = (Out)(funnel(0, 1, 40, 1));
  out[i++] = (Out)(select_less(-1, 1)); out[i++] = (Out)(select_less(1, -1));
  out[i++] = (Out)(bits_of(fma_f32(float_of(0x3f800800u), float_of(0x3f800800u), -1.0f)));
  float x = 1.5f; twice(&x); out[i++] = (Out)(bits_of(x));
  out[i++] = (Out)(__vadd4(0x01FF7F80u, 0x01010101u));
  out[i++] = (Out)(__vsub4(0x00010203u, 0x01010101u));
  out[i++] = (Out)(__vsubss4(0x807F0000u, 0x01FF0000u));
  out[i++] = (Out)(__funnelshift_l(0x80000000u, 1u, 33u));
  out[i++] = (Out)(__popc(0xF0F0u));
}
"""

# Each value derived by hand from the ISA's definition of the instruction, in ptx_cases' order.
EXPECTED = {
    "prmt": 0x07050301,  # selectors 1, 3, 5, 7 of the bytes {b, a} = 7..0
    "prmt_sign": 0xFFFFFF00,  # 9: byte 1 (0x7f) sign-replicated -> 00; 8: byte 0 (0x80) -> ff
    "byte_perm": 0x8080807F,  # __byte_perm reads only the 3 low bits of each selector
    "f4e": 0x04030201, "b4e": 0x05060700, "rc8": 0x02020202, "ecl": 0x03020101, "ecr": 0x02020100,
    "rc16": 0x03020302, "f4e_c7": 0x06050403,  # a mode reads only c's 2 low bits
    "lop3_ea": 0x66046608,  # immLut (0xf0 & 0xcc) | 0xaa: (a & b) | c
    "lop3_a": 0x12345678, "lop3_b": 0x0F0F0F0F, "lop3_c": 0x64006400,
    "lop3_xor3": 0x12345678 ^ 0x0F0F0F0F ^ 0x64006400, "lop3_zero": 0,
    "shl31": 0x80000000, "shl32": 0, "shl100": 0, "shru31": 1, "shru32": 0,
    "shrs31": 0xFFFFFFFF, "shrs40": 0xFFFFFFFF, "shrs40pos": 0,
    "sub_f16x2": 0x44000000,  # (1028 - 1024, 1024 - 1024) = (4.0, 0.0)
    "mul_tie_up": 0x3E02,  # (1 + 2^-10) * 1.5 = 1.5 + 1.5 ulp: a tie, to the even 0x202
    "mul_tie_down": 0x3E04,  # (1 + 3 * 2^-10) * 1.5 = 1.5 + 4.5 ulp: a tie, to the even 0x204
    "fma_once": 0x0010,  # (1 + 2^-10)^2 - (1 + 2^-9) = 2^-20 (a subnormal), not 0 as mul then add gives
    "overflow_nan": 0x7FFF7C00,  # 65504 + 65504 = inf; -inf + inf = the canonical NaN
    "sat": 0x00003C00,  # 2 -> 1, -2 -> 0
    "bf16_scale": 0x7F007E80,  # (1, 2) * 2^126
    "bf16_tie": 0x3FC2,  # (1 + 2^-7) * 1.5 = 1.5 + 1.5 ulp -> even (the high halves: 0 * 0)
    "bf16_fma": 0x4000,  # 1 * 1 + 1 (the high halves: 0 * 0 + 0)
    "pack": 0xABCD1234, "unpack": 0xABCD,
    "cvt_f16x2": 0x3C004000,  # a to the upper half
    "cvt_bf16x2_ties": 0x3F803F82,  # a = 1 + 2^-8 -> 0x3f80 (even) above, b = 1 + 3 * 2^-8 -> 0x3f82 (even)
    "widen": 0x3EAAA000,
    "rzi": 0xFFFFFFFE, "rni25": 2, "rni35": 4, "rzi_big": 0x7FFFFFFF, "sext": 0xFFFFFF80,
    "e4m3": 0x7E38,  # 500 saturates to 448 (0x7e), 1.0 is 0x38
    "e4m3_back": 0x5F003C00,  # 448 and 1.0 in float16
    "bfe_u": 0x12, "bfe_s": 0xFFFFFF80, "bfi": 0xF0,
    "shf_l": 0x00000003, "shf_r_clamp": 0x00000001,
    "select_lt": 5 + 11, "select_ge": 5 + 20,
    "fma_f32": 0x3A000400,  # (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24, exact in one rounding
    "twice": 0x40400000,
    # CUDA's intrinsics, by the CUDA Math API's definitions
    "vadd4": 0x02008081,  # per byte, wrapping: 01+01, ff+01, 7f+01, 80+01
    "vsub4": 0xFF000102,  # 00-01 wraps to ff
    "vsubss4": 0x807F0000,  # -128 - 1 and 127 - (-1) saturate
    "funnelshift_l": 0x00000003,  # the amount mod 32
    "popc": 8,
}
CASES = tuple(EXPECTED)


def expected_cases():
    """EXPECTED as the int32 tensor ptx_cases writes."""
    return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in EXPECTED.values()], dtype=torch.int32)


def ptx_cases():
    """One thread calls ptx_cases(Out): Out[i] is the i-th case's bits (EXPECTED's order), as an int32."""
    n = len(CASES)

    @T.prim_func
    def ptx_cases(Out: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=32) as _:
            T.import_source(DEVICE_SOURCE)
            tx = T.get_thread_binding()
            if tx == 0:
                T.call_extern("handle", "ptx_cases", T.access_ptr(Out, "w"))

    return ptx_cases


# ------------------------------------------------------------------------------------------------
# Dequantisers
# ------------------------------------------------------------------------------------------------

# 4-bit unsigned integers to float16: 0x6400 | n is the float16 1024 + n, so (word & 0x000f000f) |
# 0x64006400 (one lop3) minus 1024 in both halves (one sub.f16x2) is two values at once. Four
# bytes give eight values: pair i holds nibble i (low half) and nibble i + 4 (high half).
U4_TO_F16 = r"""
template <typename Packed, typename Out>
__device__ void u4_to_f16(Packed* packed, Out* out) {
  uint word = *reinterpret_cast<uint*>(packed);
  uint* pairs = reinterpret_cast<uint*>(out);
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint biased;
    asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n"
                 : "=r"(biased) : "r"(word >> (4 * i)), "n"(0x000f000f), "n"(0x64006400), "n"(@LUT@));
    asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(pairs[i]) : "r"(biased), "r"(0x64006400));
  }
}
"""


def u4_to_f16(N=64, K=64, threads=64, bug=None):
    """W (float16, N x K) from B (N x K/2 bytes of 4-bit values), each thread eight values per call.
    bug: "lut" (immLut 0xf8, a | (b & c), instead of (a & b) | c)."""
    lut = "0xf8" if bug == "lut" else "(0xf0 & 0xcc) | 0xaa"
    source = U4_TO_F16.replace("@LUT@", lut)
    calls = N * K // 8

    @T.prim_func
    def u4_to_f16(B: T.Tensor((N, K // 2), T.int8), W: T.Tensor((N, K), T.float16)):
        with T.Kernel(T.ceildiv(calls, threads), threads=threads) as bx:
            T.import_source(source)
            tx = T.get_thread_binding()
            packed = T.alloc_local((4,), T.int8)
            values = T.alloc_local((8,), T.float16)
            call = bx * threads + tx
            row, col = call // (K // 8), call % (K // 8)
            for v in T.vectorized(4):
                packed[v] = B[row, col * 4 + v]
            T.call_extern("handle", "u4_to_f16", T.access_ptr(packed, "r"), T.access_ptr(values, "w"))
            for v in T.vectorized(8):
                W[row, col * 8 + v] = values[v]

    return u4_to_f16


def u4_to_f16_ref(B):
    """The values u4_to_f16 decodes: in each group of four bytes (a 32-bit word, little-endian),
    output 2i is nibble i and output 2i + 1 is nibble i + 4."""
    b = B.to(torch.int64) & 0xFF
    n, k2 = b.shape
    words = b.reshape(n, k2 // 4, 4)
    word = words[..., 0] | (words[..., 1] << 8) | (words[..., 2] << 16) | (words[..., 3] << 24)
    out = torch.empty(n, k2 // 4, 8, dtype=torch.float32)
    for i in range(4):
        out[..., 2 * i] = ((word >> (4 * i)) & 0xF).float()
        out[..., 2 * i + 1] = ((word >> (4 * i + 16)) & 0xF).float()
    return out.reshape(n, k2 * 2).half()


# The same with a scale: fma.rn.f16x2 of the pair and the scale packed twice, plus zero.
U4_TO_F16_SCALED = r"""
template <typename Packed, typename Out, typename Scale>
__device__ void u4_to_f16_scaled(Packed* packed, Out* out, Scale* scale) {
  uint word = *reinterpret_cast<uint*>(packed);
  uint* pairs = reinterpret_cast<uint*>(out);
  unsigned short bits;
  memcpy(&bits, scale, 2);
  uint scales;
  asm("mov.b32 %0, {%1, %1};" : "=r"(scales) : "h"(bits));
  for (int i = 0; i < 4; ++i) {
    uint biased;
    asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n"
                 : "=r"(biased) : "r"(word >> (4 * i)), "n"(0x000f000f), "n"(0x64006400), "n"(0xea));
    asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(pairs[i]) : "r"(biased), "r"(0x64006400));
    asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(pairs[i]) : "r"(pairs[i]), "r"(scales), "r"(0));
  }
}
"""


def u4_to_f16_scaled(N=16, K=64, threads=32):
    """W (float16, N x K) = the 4-bit values of B times Scale[row] (float16), eight values a call."""
    calls = N * K // 8

    @T.prim_func
    def u4_to_f16_scaled(B: T.Tensor((N, K // 2), T.int8), Scale: T.Tensor((N,), T.float16),
                         W: T.Tensor((N, K), T.float16)):
        with T.Kernel(T.ceildiv(calls, threads), threads=threads) as bx:
            T.import_source(U4_TO_F16_SCALED)
            tx = T.get_thread_binding()
            packed = T.alloc_local((4,), T.int8)
            values = T.alloc_local((8,), T.float16)
            scale = T.alloc_local((1,), T.float16)
            call = bx * threads + tx
            row, col = call // (K // 8), call % (K // 8)
            for v in T.vectorized(4):
                packed[v] = B[row, col * 4 + v]
            scale[0] = Scale[row]
            T.call_extern("handle", "u4_to_f16_scaled", T.access_ptr(packed, "r"), T.access_ptr(values, "w"),
                          T.access_ptr(scale, "r"))
            for v in T.vectorized(8):
                W[row, col * 8 + v] = values[v]

    return u4_to_f16_scaled


def u4_to_f16_scaled_ref(B, Scale):
    """Each value times its row's scale, rounded once to float16 (the product is exact in float32)."""
    return (u4_to_f16_ref(B).float() * Scale.to(torch.float16).float()[:, None]).half()


# float4 e2m1 (sign, 2 exponent bits of bias 1, 1 mantissa bit) to bfloat16: the nibble's sign to
# bit 15 and its other three bits to bits 8..6 make a bfloat16 2^126 times too small (its exponent
# field is e, its first mantissa bit m; e = 0 is a subnormal of value m/2 * 2^-126), so one
# mul.bf16x2 by 2^126 (0x7e80) gives the value. Byte i of the word holds elements 2i (low nibble)
# and 2i + 1; prmt copies byte i to both halves, shr moves the high nibble down in the high half,
# and a lop3 keeps the low half of one and the high half of the other.
FP4_TO_BF16 = r"""
template <typename Packed, typename Out>
__device__ void fp4_to_bf16(Packed* packed, Out* out) {
  uint word = *reinterpret_cast<uint*>(packed);
  uint* pairs = reinterpret_cast<uint*>(out);
  for (int i = 0; i < 4; ++i) {
    asm volatile(
        "{\n"
        ".reg .b32 r_both, r_high, r_nibbles, r_sign, r_rest, r_scale;\n"
        "prmt.b32 r_both, %1, 0, %2;\n"
        "shr.b32 r_high, r_both, 4;\n"
        "lop3.b32 r_nibbles, r_both, r_high, 0x0000ffff, 0xe4;\n"  // (both & mask) | (high & ~mask)
        "and.b32 r_sign, r_nibbles, 0x00080008;\n"
        "shl.b32 r_sign, r_sign, 12;\n"
        "and.b32 r_rest, r_nibbles, @REST@;\n"
        "shl.b32 r_rest, r_rest, 6;\n"
        "or.b32 %0, r_sign, r_rest;\n"
        "mov.b32 r_scale, {%3, %3};\n"
        "mul.rn.bf16x2 %0, %0, r_scale;\n"
        "}\n"
        : "=r"(pairs[i]) : "r"(word), "r"(0x4040 | (i << 8) | i), "h"((unsigned short)0x7e80));
  }
}
"""


def fp4_to_bf16(N=32, K=64, threads=32, bug=None):
    """W (bfloat16, N x K) from B (N x K/2 bytes, two float4 e2m1 values a byte, the low nibble
    first). bug: "mantissa" (the mantissa bit dropped: 0x00060006 instead of 0x00070007)."""
    rest = "0x00060006" if bug == "mantissa" else "0x00070007"
    source = FP4_TO_BF16.replace("@REST@", rest)
    calls = N * K // 8

    @T.prim_func
    def fp4_to_bf16(B: T.Tensor((N, K // 2), T.uint8), W: T.Tensor((N, K), T.bfloat16)):
        with T.Kernel(T.ceildiv(calls, threads), threads=threads) as bx:
            T.import_source(source)
            tx = T.get_thread_binding()
            packed = T.alloc_local((4,), T.uint8)
            values = T.alloc_local((8,), T.bfloat16)
            call = bx * threads + tx
            row, col = call // (K // 8), call % (K // 8)
            for v in T.vectorized(4):
                packed[v] = B[row, col * 4 + v]
            T.call_extern("handle", "fp4_to_bf16", T.access_ptr(packed, "r"), T.access_ptr(values, "w"))
            for v in T.vectorized(8):
                W[row, col * 8 + v] = values[v]

    return fp4_to_bf16


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def fp4_values(B):
    """The float4 e2m1 values of B's bytes (low nibble first) as float32, shape (N, 2 * K/2)."""
    b = B.to(torch.int64) & 0xFF
    nibbles = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(b.shape[0], -1)
    table = torch.tensor(E2M1 + tuple(-x for x in E2M1), dtype=torch.float32)
    return table[nibbles]


def fp4_to_bf16_ref(B):
    return fp4_values(B).to(torch.bfloat16)


def fp4_gemm(M=256, N=256, K=256, block_M=128, block_N=128, block_K=64, threads=128, stages=2, bug=None):
    """C (float32) = A (bfloat16, M x K) @ dequant(B)^T, B's tile decoded into shared memory by
    every thread calling fp4_to_bf16 on 4 bytes, then a T.gemm: the shape of a Hopper
    mixed-precision GEMM. bug: "mantissa" (the decoder drops the mantissa bit)."""
    rest = "0x00060006" if bug == "mantissa" else "0x00070007"
    source = FP4_TO_BF16.replace("@REST@", rest)
    per_thread = block_N * block_K // 8 // threads

    @T.prim_func
    def fp4_gemm(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K // 2), T.uint8),
                 C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            W_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            packed = T.alloc_local((4,), T.uint8)
            values = T.alloc_local((8,), T.bfloat16)
            T.import_source(source)
            tx = T.get_thread_binding()
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K // 2], B_s)
                for j in T.serial(per_thread):
                    call = j * threads + tx
                    row, col = call // (block_K // 8), call % (block_K // 8)
                    for v in T.vectorized(4):
                        packed[v] = B_s[row, col * 4 + v]
                    T.call_extern("handle", "fp4_to_bf16", T.access_ptr(packed, "r"), T.access_ptr(values, "w"))
                    for v in T.vectorized(8):
                        W_s[row, col * 8 + v] = values[v]
                T.gemm(A_s, W_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return fp4_gemm


def fp4_gemm_ref(A, B):
    return A.float() @ fp4_values(B).to(torch.bfloat16).float().T
