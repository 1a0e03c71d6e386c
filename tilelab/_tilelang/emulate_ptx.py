"""Device functions written in CUDA C with inline PTX (``T.import_source``), translated for the CPU

A kernel may call a device function it brings in as CUDA C source (a dequantiser's bit tricks,
often inline PTX). On the CPU path that source is kept as C++ (the CPU kernel is C++): the function's
body stays as written, a small prelude gives the CUDA types and intrinsics it uses (``uint``,
``half``, ``__nv_bfloat162``, ``__byte_perm``, ``__pack_half2``, ...), and each inline
``asm volatile(...)`` statement is parsed (its operands and their constraints, ``%0``..``%N`` and
``%[name]``, ``{ }`` scopes with ``.reg`` declarations, several instructions per string, ``@p``
guards) and each PTX instruction becomes C by one table, :data:`INSTRUCTIONS`, written from
NVIDIA's PTX ISA: its types, the modifiers it accepts and what it computes. Registers are held as
their bits; half-precision and bfloat16 arithmetic is computed exactly and rounded once to nearest
even (a sum or product in double rounded to odd first, so rounding it again to the 16-bit format is
the correctly rounded result); a NaN result is the ISA's canonical NaN.

An instruction outside the table, a rounding mode other than ``.rn``, a special register, memory
access or control flow is refused by name with its line (:class:`PtxUnsupported`, which the CPU
path turns into its refusal). The GPU may contract a ``mul`` and an ``add`` without rounding
modifiers into an ``fma``; the CPU computes them as written.

Buffers of a GPU float type the CPU holds in float32 reach the function as their bits: the rewrite
passes a scratch array of the type's bits, encoded before the call and decoded after it
(:func:`pass_bits_to_imported_calls`). The function's own accesses through the pointers it is
given are C++'s, not checked against the buffers' extents as the kernel's accesses are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cuda_facts import PTX_FLOAT_FORMATS, PTX_LOP3_OPERANDS, PTX_PRMT_MODES


class PtxUnsupported(Exception):
    """A construct of an imported device function the CPU translation has no meaning for:
    ``what`` names it, ``line`` is its line in the imported source (1-based), ``text`` that line."""

    def __init__(self, what: str, line: int, text: str) -> None:
        self.what, self.line, self.text = what, line, text
        super().__init__(f"{what} (line {line} of the imported source: {text.strip()})")


# ------------------------------------------------------------------------------------------------
# The C prelude: CUDA's types and intrinsics, and the runtime of the instruction table
# ------------------------------------------------------------------------------------------------

_FORMAT_IDS = {name: i for i, name in enumerate(PTX_FLOAT_FORMATS)}


def _format_table() -> str:
    rows = ", ".join(f"{{{m}, {e}, {b}, {int(inf)}, {nan:#x}u}}" for m, e, b, inf, nan in PTX_FLOAT_FORMATS.values())
    return f"static const tl_ptx_format tl_ptx_formats[{len(PTX_FLOAT_FORMATS)}] = {{{rows}}};"


def _prmt_table() -> str:
    rows = []
    for mode in PTX_PRMT_MODES.values():
        # stored as d.b0..d.b3 (the facts list d.b3 first, as the ISA does)
        rows.append("{" + ", ".join("{" + ", ".join(str(x) for x in reversed(row)) + "}" for row in mode) + "}")
    return f"static const unsigned char tl_ptx_prmt_modes[{len(PTX_PRMT_MODES)}][4][4] = {{{', '.join(rows)}}};"


PRELUDE_GUARD = "TILELAB_PTX_PRELUDE"

_PRELUDE = r"""
#ifndef TILELAB_PTX_PRELUDE
#define TILELAB_PTX_PRELUDE
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <type_traits>
#define __device__
#define __host__
#define __forceinline__ inline
#define __inline__ inline
#define __restrict__
#define TL_DEVICE inline
typedef unsigned int uint;

typedef struct { int mant, ebits, bias, has_inf; uint32_t nan; } tl_ptx_format;
@FORMATS@
@PRMT@
enum { @FORMAT_ENUM@ };
static inline double tl_ptx_f64(uint64_t bits) { double d; memcpy(&d, &bits, 8); return d; }

/* A value of a binary float format (its bits) as a double: exact for every format here. */
static inline double tl_ptx_decode(uint64_t bits, int f) {
  const tl_ptx_format F = tl_ptx_formats[f];
  if (f == TL_PTX_F32) { uint32_t u = (uint32_t)bits; float x; memcpy(&x, &u, 4); return x; }
  uint32_t emask = (1u << F.ebits) - 1u, mmask = (1u << F.mant) - 1u;
  uint32_t b = (uint32_t)bits, sign = (b >> (F.ebits + F.mant)) & 1u, e = (b >> F.mant) & emask, m = b & mmask;
  double v;
  if (F.has_inf && e == emask) v = m ? NAN : INFINITY;
  else if (!F.has_inf && (b & ~(1u << (F.ebits + F.mant))) == F.nan) v = NAN;
  else if (e == 0) v = ldexp((double)m, 1 - F.bias - F.mant);
  else v = ldexp((double)(m | (1u << F.mant)), (int)e - F.bias - F.mant);
  return sign ? -v : v;
}

/* x rounded to nearest even in format f, as its bits. satfinite: beyond the largest finite value
   gives that value (and NaN stays NaN); otherwise it gives infinity, or NaN in a format without. */
static inline uint64_t tl_ptx_encode(double x, int f, int satfinite) {
  const tl_ptx_format F = tl_ptx_formats[f];
  uint32_t sbit = 1u << (F.ebits + F.mant);
  if (f == TL_PTX_F32) {
    float y;
    if (isnan(x)) return F.nan;
    y = (float)x;
    if (satfinite && isinf(y)) y = copysignf(3.40282347e38f, y);
    uint32_t u; memcpy(&u, &y, 4); return u;
  }
  if (isnan(x)) return F.nan;
  uint32_t sign = signbit(x) ? sbit : 0u;
  double ax = fabs(x);
  int emin = 1 - F.bias, emax_field = F.has_inf ? (1 << F.ebits) - 2 : (1 << F.ebits) - 1;
  /* the largest finite value: e4m3's top binade keeps its all-ones mantissa for NaN */
  uint32_t max_bits = ((uint32_t)emax_field << F.mant) | ((1u << F.mant) - 1u);
  if (!F.has_inf) max_bits -= 1u;
  double maxv = tl_ptx_decode(max_bits, f);
  uint32_t inf_bits = F.has_inf ? ((uint32_t)((1 << F.ebits) - 1) << F.mant) : F.nan;
  if (isinf(ax)) return sign | (satfinite ? max_bits : inf_bits);
  int e = ax == 0.0 ? emin : ilogb(ax);
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - F.mant);
  double r = nearbyint(ax / q) * q;  /* the default rounding mode: to nearest, ties to even */
  if (r > maxv) return sign | (satfinite ? max_bits : inf_bits);
  if (r == 0.0) return sign;
  int er = ilogb(r);
  if (er < emin) return sign | (uint32_t)(r / ldexp(1.0, emin - F.mant));
  uint32_t m = (uint32_t)(r / ldexp(1.0, er - F.mant)) - (1u << F.mant);
  return sign | ((uint32_t)(er + F.bias) << F.mant) | m;
}

/* Exact arithmetic for a narrower format: the double result rounded to odd (an inexact result gets
   an odd last bit), so that rounding it once more to a format of at most 51 bits of precision gives
   the correctly rounded result. Products of operands of at most 26 bits are exact in double. */
static inline double tl_ptx_odd(double s, double err) {
  if (err == 0.0 || !isfinite(s)) return s;
  uint64_t u; memcpy(&u, &s, 8);
  if ((u & 1u) == 0) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
  return s;
}
static inline double tl_ptx_sum_odd(double a, double b) {
  double s = a + b, bb = s - a, err = (a - (s - bb)) + (b - bb);
  return tl_ptx_odd(s, err);
}

enum { TL_PTX_ADD, TL_PTX_SUB, TL_PTX_MUL, TL_PTX_FMA, TL_PTX_NEG, TL_PTX_ABS, TL_PTX_MIN, TL_PTX_MAX };

static inline double tl_ptx_ftz(double v, int f) {
  const tl_ptx_format F = tl_ptx_formats[f];
  if (v != 0.0 && isfinite(v) && fabs(v) < ldexp(1.0, 1 - F.bias)) return copysign(0.0, v);
  return v;
}

/* One element of add/sub/mul/fma/neg/abs/min/max in format f (.rn), with .ftz, .sat and .relu. */
static inline uint64_t tl_ptx_float_op(int op, uint64_t ab, uint64_t bb, uint64_t cb, int f, int ftz, int sat,
                                       int relu) {
  double a = tl_ptx_decode(ab, f), b = tl_ptx_decode(bb, f), c = tl_ptx_decode(cb, f), r;
  if (ftz) { a = tl_ptx_ftz(a, f); b = tl_ptx_ftz(b, f); c = tl_ptx_ftz(c, f); }
  uint64_t sign = 1ull << (tl_ptx_formats[f].ebits + tl_ptx_formats[f].mant);
  switch (op) {
    case TL_PTX_NEG: return isnan(a) ? tl_ptx_formats[f].nan : (ab ^ sign);
    case TL_PTX_ABS: return isnan(a) ? tl_ptx_formats[f].nan : (ab & ~sign);
    case TL_PTX_MIN: case TL_PTX_MAX:
      if (isnan(a) && isnan(b)) return tl_ptx_formats[f].nan;
      if (isnan(a)) return bb;
      if (isnan(b)) return ab;
      if (a == b) r = (op == TL_PTX_MIN) == (signbit(a) != 0) ? a : b;  /* -0 < +0 */
      else r = (op == TL_PTX_MIN) == (a < b) ? a : b;
      return tl_ptx_encode(r, f, 0);
    case TL_PTX_ADD: r = tl_ptx_sum_odd(a, b); break;
    case TL_PTX_SUB: r = tl_ptx_sum_odd(a, -b); break;
    case TL_PTX_MUL: r = a * b; break;
    default: r = tl_ptx_sum_odd(a * b, c); break;
  }
  if (isnan(r)) return tl_ptx_formats[f].nan;
  if (sat) r = r > 1.0 ? 1.0 : (r > 0.0 ? r : 0.0);
  if (relu && r < 0.0) r = 0.0;
  uint64_t bits = tl_ptx_encode(r, f, 0);
  if (ftz && tl_ptx_ftz(tl_ptx_decode(bits, f), f) == 0.0) bits &= sign;
  return bits;
}

/* The same on each 16-bit half of a packed pair (element 0 in the low half). */
static inline uint64_t tl_ptx_float_op_x2(int op, uint64_t a, uint64_t b, uint64_t c, int f, int ftz, int sat,
                                          int relu) {
  uint64_t lo = tl_ptx_float_op(op, a & 0xffff, b & 0xffff, c & 0xffff, f, ftz, sat, relu);
  uint64_t hi = tl_ptx_float_op(op, (a >> 16) & 0xffff, (b >> 16) & 0xffff, (c >> 16) & 0xffff, f, ftz, sat, relu);
  return (hi << 16) | lo;
}

/* f64 arithmetic is the CPU's own (IEEE double, round to nearest even). */
static inline uint64_t tl_ptx_f64_op(int op, uint64_t ab, uint64_t bb, uint64_t cb) {
  double a, b, c, r; memcpy(&a, &ab, 8); memcpy(&b, &bb, 8); memcpy(&c, &cb, 8);
  switch (op) {
    case TL_PTX_ADD: r = a + b; break;
    case TL_PTX_SUB: r = a - b; break;
    case TL_PTX_MUL: r = a * b; break;
    case TL_PTX_FMA: r = fma(a, b, c); break;
    case TL_PTX_NEG: r = -a; break;
    case TL_PTX_ABS: r = fabs(a); break;
    case TL_PTX_MIN: r = fmin(a, b); break;
    default: r = fmax(a, b); break;
  }
  uint64_t u; memcpy(&u, &r, 8); return u;
}

/* lop3.b32: bit i of d is bit (a_i b_i c_i, as a 3-bit number) of immLut. */
static inline uint64_t tl_ptx_lop3(uint64_t a, uint64_t b, uint64_t c, uint64_t lut) {
  uint32_t d = 0;
  for (int k = 0; k < 8; k++) {
    if (!((lut >> k) & 1u)) continue;
    uint32_t ma = (k & 4) ? (uint32_t)a : ~(uint32_t)a, mb = (k & 2) ? (uint32_t)b : ~(uint32_t)b;
    uint32_t mc = (k & 1) ? (uint32_t)c : ~(uint32_t)c;
    d |= ma & mb & mc;
  }
  return d;
}

/* prmt.b32: mode 0 is the generic form (a nibble of c per result byte: 3 bits choose one of the
   8 bytes {b, a}, the fourth replicates its sign); modes 1..6 are the table's rows by c's 2 low bits. */
static inline uint64_t tl_ptx_prmt(uint64_t a, uint64_t b, uint64_t c, int mode) {
  uint64_t src = ((uint64_t)(uint32_t)b << 32) | (uint32_t)a;
  uint32_t d = 0;
  for (int i = 0; i < 4; i++) {
    uint32_t byte;
    if (mode == 0) {
      uint32_t sel = ((uint32_t)c >> (4 * i)) & 0xfu;
      byte = (uint32_t)(src >> (8 * (sel & 7u))) & 0xffu;
      if (sel & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    } else {
      byte = (uint32_t)(src >> (8 * tl_ptx_prmt_modes[mode - 1][c & 3u][i])) & 0xffu;
    }
    d |= byte << (8 * i);
  }
  return d;
}

static inline uint64_t tl_ptx_mask(int w) { return w >= 64 ? ~0ull : ((1ull << w) - 1ull); }
static inline int64_t tl_ptx_signed(uint64_t v, int w) {
  return w >= 64 ? (int64_t)v : (int64_t)(v << (64 - w)) >> (64 - w);
}
/* shl: shift amounts past the width give 0 (the ISA clamps them to the width). */
static inline uint64_t tl_ptx_shl(uint64_t a, uint64_t n, int w) {
  n = (uint32_t)n;
  return n >= (uint64_t)w ? 0 : (a << n) & tl_ptx_mask(w);
}
/* shr: logical for .b and .u, arithmetic (sign fill) for .s; amounts past the width clamp to it. */
static inline uint64_t tl_ptx_shr(uint64_t a, uint64_t n, int w, int is_signed) {
  n = (uint32_t)n;
  if (n >= (uint64_t)w) n = (uint64_t)w;
  if (is_signed) {
    int64_t s = tl_ptx_signed(a, w);
    return (uint64_t)(n >= 64 ? (s < 0 ? -1 : 0) : (s >> (n >= 63 ? 63 : n))) & tl_ptx_mask(w);
  }
  return n >= 64 ? 0 : ((a & tl_ptx_mask(w)) >> n);
}
/* shf.l / shf.r on {b, a}: .wrap takes the amount mod 32, .clamp caps it at 32. */
static inline uint64_t tl_ptx_shf(uint64_t a, uint64_t b, uint64_t c, int left, int wrap) {
  uint32_t n = wrap ? ((uint32_t)c & 31u) : ((uint32_t)c > 32u ? 32u : (uint32_t)c);
  uint64_t v = ((uint64_t)(uint32_t)b << 32) | (uint32_t)a;
  return left ? (uint32_t)((v << n) >> 32) : (uint32_t)(v >> n);
}
/* bfe: len bits of a from pos, sign-extended from the field's top bit for .s. */
static inline uint64_t tl_ptx_bfe(uint64_t a, uint64_t b, uint64_t c, int w, int is_signed) {
  int msb = w - 1, pos = (int)(b & 0xff), len = (int)(c & 0xff);
  int top = pos + len - 1 < msb ? pos + len - 1 : msb;
  uint64_t sbit = (!is_signed || len == 0) ? 0 : ((a >> top) & 1u);
  uint64_t d = 0;
  for (int i = 0; i <= msb; i++) {
    uint64_t bit = (i < len && pos + i <= msb) ? ((a >> (pos + i)) & 1u) : sbit;
    d |= bit << i;
  }
  return d;
}
/* bfi: the low len bits of f inserted into b at pos. */
static inline uint64_t tl_ptx_bfi(uint64_t f, uint64_t b, uint64_t c, uint64_t dd, int w) {
  int msb = w - 1, pos = (int)(c & 0xff), len = (int)(dd & 0xff);
  uint64_t d = b & tl_ptx_mask(w);
  for (int i = 0; i < len && pos + i <= msb; i++)
    d = (d & ~(1ull << (pos + i))) | (((f >> i) & 1u) << (pos + i));
  return d;
}
/* dp4a: c plus the four products of a's and b's bytes, each byte signed or not by its operand's type. */
static inline uint64_t tl_ptx_dp4a(uint64_t a, uint64_t b, uint64_t c, int a_signed, int b_signed) {
  int64_t acc = (int64_t)(int32_t)(uint32_t)c;
  for (int i = 0; i < 4; i++) {
    int64_t x = (int64_t)((a >> (8 * i)) & 0xffu), y = (int64_t)((b >> (8 * i)) & 0xffu);
    if (a_signed && x > 127) x -= 256;
    if (b_signed && y > 127) y -= 256;
    acc += x * y;
  }
  return (uint32_t)acc;
}
/* float -> integer with .rni/.rzi/.rmi/.rpi, saturating to the integer type's range (NaN -> 0). */
static inline uint64_t tl_ptx_f2i(double x, int w, int is_signed, int mode) {
  if (isnan(x)) return 0;
  double r = mode == 0 ? nearbyint(x) : mode == 1 ? trunc(x) : mode == 2 ? floor(x) : ceil(x);
  double lo = is_signed ? -ldexp(1.0, w - 1) : 0.0, hi = is_signed ? ldexp(1.0, w - 1) - 1 : ldexp(1.0, w) - 1;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return (is_signed ? (uint64_t)(int64_t)r : (uint64_t)r) & tl_ptx_mask(w);
}

/* The bits of an asm operand's value (an "r", "h", "l", "f", "d" or "n" operand). */
template <class U, class T> static inline uint64_t tl_ptx_get(const T& v) {
  if constexpr (std::is_integral<T>::value || std::is_enum<T>::value) {
    return (uint64_t)(U)v;
  } else {
    U u = 0;
    memcpy(&u, &v, sizeof(T) < sizeof(U) ? sizeof(T) : sizeof(U));
    return (uint64_t)u;
  }
}
/* An output operand written back from its register's bits. */
template <class U, class T> static inline void tl_ptx_set(T& dst, uint64_t bits) {
  U u = (U)bits;
  if constexpr (std::is_integral<T>::value && sizeof(T) != sizeof(U)) dst = (T)u;
  else memcpy(&dst, &u, sizeof(T) < sizeof(U) ? sizeof(T) : sizeof(U));
}

/* The call an entry point makes: the function's value, or a zero of the declared type for a void one. */
template <class R, class F, class... A> static inline R tl_ptx_invoke(F f, A... a) {
  if constexpr (std::is_void<std::invoke_result_t<F, A...>>::value) { f(a...); return R{}; }
  else return (R)f(a...);
}

/* CUDA's 16-bit float types: their bits, converted to and from float by round to nearest even. */
template <int F> struct tl_ptx_float16 {
  uint16_t bits;
  tl_ptx_float16() : bits(0) {}
  tl_ptx_float16(float x) : bits((uint16_t)tl_ptx_encode(x, F, 0)) {}
  tl_ptx_float16(double x) : bits((uint16_t)tl_ptx_encode(x, F, 0)) {}
  tl_ptx_float16(int x) : bits((uint16_t)tl_ptx_encode((double)x, F, 0)) {}
  operator float() const { return (float)tl_ptx_decode(bits, F); }
};
template <class T> static inline T tl_ptx_op16(int op, T a, T b, int f) {
  T r; r.bits = (uint16_t)tl_ptx_float_op(op, a.bits, b.bits, 0, f, 0, 0, 0); return r;
}
#define TL_PTX_ARITH(T, F)                                                                     \
  static inline T operator+(T a, T b) { return tl_ptx_op16(TL_PTX_ADD, a, b, F); }            \
  static inline T operator-(T a, T b) { return tl_ptx_op16(TL_PTX_SUB, a, b, F); }            \
  static inline T operator*(T a, T b) { return tl_ptx_op16(TL_PTX_MUL, a, b, F); }            \
  static inline T operator-(T a) { T r; r.bits = (uint16_t)(a.bits ^ 0x8000u); return r; }
typedef tl_ptx_float16<TL_PTX_F16> tl_ptx_half;
typedef tl_ptx_float16<TL_PTX_BF16> tl_ptx_bfloat16;
TL_PTX_ARITH(tl_ptx_half, TL_PTX_F16)
TL_PTX_ARITH(tl_ptx_bfloat16, TL_PTX_BF16)
struct tl_ptx_half2 { tl_ptx_half x, y; };
struct tl_ptx_bfloat162 { tl_ptx_bfloat16 x, y; };
#define TL_PTX_VEC(N, T) struct tl_ptx_##N##2 { T x, y; }; struct tl_ptx_##N##4 { T x, y, z, w; };
TL_PTX_VEC(int, int) TL_PTX_VEC(uint, unsigned int) TL_PTX_VEC(float, float) TL_PTX_VEC(char, signed char)
TL_PTX_VEC(uchar, unsigned char) TL_PTX_VEC(short, short) TL_PTX_VEC(ushort, unsigned short)
@RENAME@
static inline half __float2half(float x) { return half(x); }
static inline half __float2half_rn(float x) { return half(x); }
static inline float __half2float(half x) { return (float)x; }
static inline __nv_bfloat16 __float2bfloat16(float x) { return __nv_bfloat16(x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float x) { return __nv_bfloat16(x); }
static inline float __bfloat162float(__nv_bfloat16 x) { return (float)x; }
static inline half2 __halves2half2(half a, half b) { half2 r; r.x = a; r.y = b; return r; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
  __nv_bfloat162 r; r.x = a; r.y = b; return r;
}
/* TileLang's helpers: two 16-bit values packed, x in the low half. */
template <class T> static inline unsigned __pack_half2(const T x, const T y) {
  static_assert(sizeof(T) == 2, "__pack_half2 packs two 16-bit values");
  unsigned short v0, v1; memcpy(&v0, &x, 2); memcpy(&v1, &y, 2);
  return ((unsigned)v1 << 16) | v0;
}
template <class T> static inline unsigned __pack_nv_bfloat162(const T x, const T y) { return __pack_half2(x, y); }
/* __byte_perm(x, y, s): byte n of the result is byte s<4n+2:4n> of {y, x} (no sign replication). */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  return (unsigned)tl_ptx_prmt(x, y, s & 0x7777u, 0);
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned n) {
  return (unsigned)tl_ptx_shf(lo, hi, n, 1, 1);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned n) {
  return (unsigned)tl_ptx_shf(lo, hi, n, 0, 1);
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __dp4a(int a, int b, int c) {
  return (int)(uint32_t)tl_ptx_dp4a((uint32_t)a, (uint32_t)b, (uint32_t)c, 1, 1);
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) { return (unsigned)tl_ptx_dp4a(a, b, c, 0, 0); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
/* Per-byte SIMD: wrap-around add and subtract, and the signed saturating subtract. */
static inline unsigned tl_ptx_bytes(unsigned a, unsigned b, int op) {
  unsigned r = 0;
  for (int i = 0; i < 4; i++) {
    int x = (int)((a >> (8 * i)) & 0xffu), y = (int)((b >> (8 * i)) & 0xffu), v;
    if (op == 2) {
      v = (int)(signed char)x - (int)(signed char)y;
      v = v < -128 ? -128 : (v > 127 ? 127 : v);
    } else {
      v = op == 0 ? x + y : x - y;
    }
    r |= ((unsigned)v & 0xffu) << (8 * i);
  }
  return r;
}
static inline unsigned __vadd4(unsigned a, unsigned b) { return tl_ptx_bytes(a, b, 0); }
static inline unsigned __vsub4(unsigned a, unsigned b) { return tl_ptx_bytes(a, b, 1); }
static inline unsigned __vsubss4(unsigned a, unsigned b) { return tl_ptx_bytes(a, b, 2); }
@UNRENAME@
#endif
"""


# CUDA's type names, each the prelude's type of the same meaning while a translated source is
# compiled (TileLang's CPU header has types of some of these names, of another layout: the names are
# macros around the imported source only, undefined after it).
CUDA_TYPE_NAMES = {
    "half": "tl_ptx_half", "__half": "tl_ptx_half", "half_t": "tl_ptx_half", "half2": "tl_ptx_half2",
    "__half2": "tl_ptx_half2", "__nv_bfloat16": "tl_ptx_bfloat16", "bfloat16_t": "tl_ptx_bfloat16",
    "__nv_bfloat162": "tl_ptx_bfloat162",
    **{f"{n}{k}": f"tl_ptx_{n}{k}" for n in ("int", "uint", "float", "char", "uchar", "short", "ushort")
       for k in (2, 4)},
}


def _renames() -> str:
    return "\n".join(f"#define {cuda} {ours}" for cuda, ours in CUDA_TYPE_NAMES.items())


def _unrenames() -> str:
    return "\n".join(f"#undef {cuda}" for cuda in CUDA_TYPE_NAMES)


@functools.lru_cache(maxsize=1)
def prelude() -> str:
    """The C++ every translated device function is compiled with (guarded: once per kernel)."""
    enum = ", ".join(f"TL_PTX_{name.upper()} = {i}" for name, i in _FORMAT_IDS.items())
    return (_PRELUDE.replace("@FORMATS@", _format_table()).replace("@PRMT@", _prmt_table())
            .replace("@FORMAT_ENUM@", enum).replace("@RENAME@", _renames()).replace("@UNRENAME@", _unrenames()))


# ------------------------------------------------------------------------------------------------
# PTX: operands, instructions, and the table of their meanings
# ------------------------------------------------------------------------------------------------

# The width in bits of each PTX type; the 16-bit float pairs are 32-bit registers.
TYPE_BITS = {
    "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64, "pred": 1, "e4m3x2": 16, "e5m2x2": 16,
}
_REG_C_TYPE = "uint64_t"  # every register holds its bits, the instruction masks to its width
# An asm operand's constraint and the integer its value's bits are taken as.
CONSTRAINT_BITS = {"r": "uint32_t", "n": "uint64_t", "h": "uint16_t", "l": "uint64_t", "f": "uint32_t",
                   "d": "uint64_t", "c": "uint16_t"}


@dataclass(frozen=True)
class Instr:
    """One PTX instruction as written: its guard, its name, its modifiers (rounding, mode, ...),
    its types in order, its operands as C expressions of register bits; ``vectors`` marks the
    operands written ``{a, b}`` (their parts, element 0 first)."""

    guard: str
    name: str
    modifiers: tuple[str, ...]
    types: tuple[str, ...]
    operands: tuple[str, ...]
    vectors: tuple[tuple[str, ...], ...]
    text: str
    line: int


@dataclass(frozen=True)
class Semantics:
    """What one PTX instruction computes, from NVIDIA's PTX ISA: the types and modifiers it takes,
    its operand count (destination first), and the C it becomes (``emit(instr) -> statements``)."""

    types: tuple[str, ...]
    modifiers: tuple[str, ...]
    operands: tuple[int, ...]
    meaning: str
    emit: Callable[[Instr], str]


def _w(ins: Instr) -> int:
    return TYPE_BITS[ins.types[-1]]


def _m(ins: Instr) -> str:
    return f"tl_ptx_mask({_w(ins)})"


def _set(ins: Instr, expr: str) -> str:
    return f"{ins.operands[0]} = ({expr});"


def _logic(op: str) -> Callable[[Instr], str]:
    def emit(ins: Instr) -> str:
        a, b = ins.operands[1], ins.operands[2]
        if ins.types[-1] == "pred":
            return _set(ins, f"(uint64_t)(({a} != 0) {op} ({b} != 0))")
        return _set(ins, f"({a} {op} {b}) & {_m(ins)}")
    return emit


def _not(ins: Instr) -> str:
    a = ins.operands[1]
    return _set(ins, f"(uint64_t)({a} == 0)") if ins.types[-1] == "pred" else _set(ins, f"~{a} & {_m(ins)}")


def _signed(ins: Instr) -> bool:
    return ins.types[-1].startswith("s")


def _int_arith(op: str) -> Callable[[Instr], str]:
    def emit(ins: Instr) -> str:
        a, b = ins.operands[1], ins.operands[2]
        w = _w(ins)
        if "sat" in ins.modifiers:  # add.sat.s32 / sub.sat.s32: clamps to the int32 range
            return _set(ins, f"(uint64_t)(uint32_t)(int32_t)fmax(-2147483648.0, fmin(2147483647.0, "
                             f"(double)tl_ptx_signed({a}, 32) {op} (double)tl_ptx_signed({b}, 32)))")
        return _set(ins, f"({a} {op} {b}) & tl_ptx_mask({w})")
    return emit


def _product(ins: Instr, a: str, b: str) -> tuple[str, int]:
    """The full product of a and b (C expression of __int128 or a 64-bit type) and its width."""
    w = _w(ins)
    if _signed(ins):
        return f"((__int128)tl_ptx_signed({a}, {w}) * (__int128)tl_ptx_signed({b}, {w}))", 2 * w
    return f"((unsigned __int128)({a} & tl_ptx_mask({w})) * (unsigned __int128)({b} & tl_ptx_mask({w})))", 2 * w


def _mul_int(ins: Instr) -> str:
    w = _w(ins)
    prod, _ = _product(ins, ins.operands[1], ins.operands[2])
    part = next((m for m in ins.modifiers if m in ("lo", "hi", "wide")), "lo")
    if part == "hi":
        return _set(ins, f"(uint64_t)((unsigned __int128){prod} >> {w}) & tl_ptx_mask({w})")
    if part == "wide":
        return _set(ins, f"(uint64_t)(unsigned __int128){prod} & tl_ptx_mask({2 * w})")
    return _set(ins, f"(uint64_t)(unsigned __int128){prod} & tl_ptx_mask({w})")


def _mad_int(ins: Instr) -> str:
    w = _w(ins)
    prod, _ = _product(ins, ins.operands[1], ins.operands[2])
    c = ins.operands[3]
    part = next((m for m in ins.modifiers if m in ("lo", "hi", "wide")), "lo")
    if part == "hi":
        return _set(ins, f"((uint64_t)((unsigned __int128){prod} >> {w}) + {c}) & tl_ptx_mask({w})")
    if part == "wide":
        return _set(ins, f"((uint64_t)(unsigned __int128){prod} + {c}) & tl_ptx_mask({2 * w})")
    return _set(ins, f"((uint64_t)(unsigned __int128){prod} + {c}) & tl_ptx_mask({w})")


_FLOAT_FORMAT_OF = {"f16": "F16", "f16x2": "F16", "bf16": "BF16", "bf16x2": "BF16", "f32": "F32"}
_FLOAT_OPS = {"add": "ADD", "sub": "SUB", "mul": "MUL", "fma": "FMA", "mad": "FMA", "neg": "NEG", "abs": "ABS",
              "min": "MIN", "max": "MAX"}


def _is_float(t: str) -> bool:
    return t in _FLOAT_FORMAT_OF or t == "f64"


def _arith(ins: Instr) -> str:
    """add, sub, mul, mad/fma, neg, abs, min, max: integer or float by the instruction's type."""
    t = ins.types[-1]
    name = ins.name
    srcs = list(ins.operands[1:]) + ["0"] * (4 - len(ins.operands))
    if t == "f64":
        return _set(ins, f"tl_ptx_f64_op(TL_PTX_{_FLOAT_OPS[name]}, {srcs[0]}, {srcs[1]}, {srcs[2]})")
    if t in _FLOAT_FORMAT_OF:
        fn = "tl_ptx_float_op_x2" if t.endswith("x2") else "tl_ptx_float_op"
        flags = ", ".join(str(int(m in ins.modifiers)) for m in ("ftz", "sat", "relu"))
        return _set(ins, f"{fn}(TL_PTX_{_FLOAT_OPS[name]}, {srcs[0]}, {srcs[1]}, {srcs[2]}, "
                         f"TL_PTX_{_FLOAT_FORMAT_OF[t]}, {flags})")
    if name in ("add", "sub"):
        return _int_arith("+" if name == "add" else "-")(ins)
    if name == "mul":
        return _mul_int(ins)
    if name == "mad":
        return _mad_int(ins)
    w = _w(ins)
    a, b = srcs[0], srcs[1]
    if name == "neg":
        return _set(ins, f"(0 - {a}) & tl_ptx_mask({w})")
    if name == "abs":
        return _set(ins, f"(uint64_t)(tl_ptx_signed({a}, {w}) < 0 ? -tl_ptx_signed({a}, {w}) : "
                         f"tl_ptx_signed({a}, {w})) & tl_ptx_mask({w})")
    cmp = "<" if name == "min" else ">"
    if _signed(ins):
        return _set(ins, f"(tl_ptx_signed({a}, {w}) {cmp} tl_ptx_signed({b}, {w}) ? {a} : {b}) & tl_ptx_mask({w})")
    return _set(ins, f"(({a} & tl_ptx_mask({w})) {cmp} ({b} & tl_ptx_mask({w})) ? {a} : {b}) & tl_ptx_mask({w})")


def _mov(ins: Instr) -> str:
    w = _w(ins)
    dst, src = ins.vectors[0], ins.vectors[1]
    if len(src) > 1:  # packing: element 0 in the low bits
        part = w // len(src)
        expr = " | ".join(f"(({s} & tl_ptx_mask({part})) << {i * part})" for i, s in enumerate(src))
        return f"{ins.operands[0]} = ({expr});"
    if len(dst) > 1:  # unpacking
        part = w // len(dst)
        return " ".join(f"{d} = ({src[0]} >> {i * part}) & tl_ptx_mask({part});" for i, d in enumerate(dst)
                        if d != "_")
    return _set(ins, f"{src[0]} & {_m(ins)}")


def _lop3(ins: Instr) -> str:
    a, b, c, lut = ins.operands[1:5]
    return _set(ins, f"tl_ptx_lop3({a}, {b}, {c}, {lut})")


_PRMT_MODE_IDS = {mode: i + 1 for i, mode in enumerate(PTX_PRMT_MODES)}


def _prmt(ins: Instr) -> str:
    mode = next((_PRMT_MODE_IDS[m] for m in ins.modifiers if m in _PRMT_MODE_IDS), 0)
    a, b, c = ins.operands[1:4]
    return _set(ins, f"tl_ptx_prmt({a}, {b}, {c}, {mode})")


def _shift(ins: Instr) -> str:
    a, b = ins.operands[1], ins.operands[2]
    if ins.name == "shl":
        return _set(ins, f"tl_ptx_shl({a}, {b}, {_w(ins)})")
    return _set(ins, f"tl_ptx_shr({a}, {b}, {_w(ins)}, {int(_signed(ins))})")


def _shf(ins: Instr) -> str:
    a, b, c = ins.operands[1:4]
    return _set(ins, f"tl_ptx_shf({a}, {b}, {c}, {int('l' in ins.modifiers)}, {int('wrap' in ins.modifiers)})")


def _bfe(ins: Instr) -> str:
    a, b, c = ins.operands[1:4]
    return _set(ins, f"tl_ptx_bfe({a}, {b}, {c}, {_w(ins)}, {int(_signed(ins))})")


def _bfi(ins: Instr) -> str:
    f, b, c, d = ins.operands[1:5]
    return _set(ins, f"tl_ptx_bfi({f}, {b}, {c}, {d}, {_w(ins)})")


def _dp4a(ins: Instr) -> str:
    a, b, c = ins.operands[1:4]
    a_signed, b_signed = (int(t.startswith("s")) for t in ins.types)
    return _set(ins, f"tl_ptx_dp4a({a}, {b}, {c}, {a_signed}, {b_signed})")


def _selp(ins: Instr) -> str:
    a, b, c = ins.operands[1:4]
    return _set(ins, f"({c} != 0 ? {a} : {b}) & {_m(ins)}")


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}


def _setp(ins: Instr) -> str:
    t = ins.types[-1]
    w = TYPE_BITS[t]
    cmp = next(m for m in ins.modifiers if m in _COMPARE or m.rstrip("u") in _COMPARE or m in ("num", "nan"))
    a, b = ins.operands[1], ins.operands[2]
    if _is_float(t):
        fmt = "TL_PTX_F32" if t == "f32" else "-1" if t == "f64" else f"TL_PTX_{_FLOAT_FORMAT_OF[t]}"
        if t == "f64":
            x, y = f"tl_ptx_f64({a})", f"tl_ptx_f64({b})"
        else:
            x, y = f"tl_ptx_decode({a}, {fmt})", f"tl_ptx_decode({b}, {fmt})"
        unordered = f"(isnan({x}) || isnan({y}))"
        if cmp == "num":
            test = f"!{unordered}"
        elif cmp == "nan":
            test = unordered
        elif cmp.endswith("u") and cmp[:-1] in _COMPARE:
            test = f"({unordered} || ({x} {_COMPARE[cmp[:-1]]} {y}))"
        else:
            test = f"(!{unordered} && ({x} {_COMPARE[cmp]} {y}))" if cmp != "ne" else \
                f"(!{unordered} && ({x} != {y}))"
    elif t.startswith("s"):
        test = f"(tl_ptx_signed({a}, {w}) {_COMPARE[cmp]} tl_ptx_signed({b}, {w}))"
    else:
        test = f"(({a} & tl_ptx_mask({w})) {_COMPARE[cmp]} ({b} & tl_ptx_mask({w})))"
    combine = next((m for m in ins.modifiers if m in ("and", "or", "xor")), "")
    if combine:
        c = ins.operands[3]
        op = {"and": "&&", "or": "||", "xor": "!="}[combine]
        test = f"(({test}) {op} ({c} != 0))"
    dst = ins.vectors[0]
    out = f"{dst[0]} = (uint64_t)({test});"
    if len(dst) > 1:
        out += f" {dst[1]} = (uint64_t)!({dst[0]});"
    return out


_ROUND_TO_INT = {"rni": 0, "rzi": 1, "rmi": 2, "rpi": 3}


def _cvt(ins: Instr) -> str:  # one branch per documented pair of types
    dst_t, src_t = ins.types[0], ins.types[1]
    d, srcs = ins.operands[0], ins.operands[1:]
    sat = int("satfinite" in ins.modifiers)
    relu = "relu" in ins.modifiers

    def relu_of(expr: str) -> str:
        return f"fmax(0.0, {expr})" if relu else expr

    if dst_t in ("f16x2", "bf16x2") and src_t == "f32":  # a to the upper half, b to the lower
        fmt = f"TL_PTX_{_FLOAT_FORMAT_OF[dst_t]}"
        hi = f"tl_ptx_encode({relu_of(f'tl_ptx_decode({srcs[0]}, TL_PTX_F32)')}, {fmt}, {sat})"
        lo = f"tl_ptx_encode({relu_of(f'tl_ptx_decode({srcs[1]}, TL_PTX_F32)')}, {fmt}, {sat})"
        return f"{d} = (({hi}) << 16) | ({lo});"
    if dst_t in ("e4m3x2", "e5m2x2") and src_t == "f32":  # a to the upper byte, b to the lower
        fmt = f"TL_PTX_{dst_t[:4].upper()}"
        hi = f"tl_ptx_encode({relu_of(f'tl_ptx_decode({srcs[0]}, TL_PTX_F32)')}, {fmt}, {sat})"
        lo = f"tl_ptx_encode({relu_of(f'tl_ptx_decode({srcs[1]}, TL_PTX_F32)')}, {fmt}, {sat})"
        return f"{d} = (({hi}) << 8) | ({lo});"
    if dst_t in ("e4m3x2", "e5m2x2") and src_t == "f16x2":
        fmt = f"TL_PTX_{dst_t[:4].upper()}"
        parts = [f"tl_ptx_encode({relu_of(f'tl_ptx_decode(({srcs[0]} >> {s}) & 0xffff, TL_PTX_F16)')}, {fmt}, "
                 f"{sat})" for s in (16, 0)]
        return f"{d} = (({parts[0]}) << 8) | ({parts[1]});"
    if dst_t == "f16x2" and src_t in ("e4m3x2", "e5m2x2"):  # exact: element 0 (the low byte) to the low half
        fmt = f"TL_PTX_{src_t[:4].upper()}"
        parts = [f"tl_ptx_encode({relu_of(f'tl_ptx_decode(({srcs[0]} >> {s}) & 0xff, {fmt})')}, TL_PTX_F16, 0)"
                 for s in (8, 0)]
        return f"{d} = (({parts[0]}) << 16) | ({parts[1]});"
    if _is_float(dst_t) and _is_float(src_t) and "f64" not in (dst_t, src_t):
        value = relu_of(f"tl_ptx_decode({srcs[0]}, TL_PTX_{_FLOAT_FORMAT_OF[src_t]})")
        return f"{d} = tl_ptx_encode({value}, TL_PTX_{_FLOAT_FORMAT_OF[dst_t]}, {sat});"
    if dst_t == "f64" and src_t in _FLOAT_FORMAT_OF:
        return f"{{ double v = tl_ptx_decode({srcs[0]}, TL_PTX_{_FLOAT_FORMAT_OF[src_t]}); memcpy(&{d}, &v, 8); }}"
    if src_t == "f64" and dst_t in _FLOAT_FORMAT_OF:
        return f"{d} = tl_ptx_encode(tl_ptx_f64({srcs[0]}), TL_PTX_{_FLOAT_FORMAT_OF[dst_t]}, {sat});"
    if _is_float(src_t) and not _is_float(dst_t):  # to an integer, by the rounding the instruction names
        mode = next((_ROUND_TO_INT[m] for m in ins.modifiers if m in _ROUND_TO_INT), 1)
        value = f"tl_ptx_f64({srcs[0]})" if src_t == "f64" else \
            f"tl_ptx_decode({srcs[0]}, TL_PTX_{_FLOAT_FORMAT_OF[src_t]})"
        return f"{d} = tl_ptx_f2i({value}, {TYPE_BITS[dst_t]}, {int(dst_t.startswith('s'))}, {mode});"
    if _is_float(dst_t):  # from an integer: exact in double for 32 bits, then rounded to nearest even
        w = TYPE_BITS[src_t]
        value = f"(double)tl_ptx_signed({srcs[0]}, {w})" if src_t.startswith("s") else \
            f"(double)({srcs[0]} & tl_ptx_mask({w}))"
        if dst_t == "f64":
            return f"{{ double v = {value}; memcpy(&{d}, &v, 8); }}"
        return f"{d} = tl_ptx_encode({value}, TL_PTX_{_FLOAT_FORMAT_OF[dst_t]}, 0);"
    # integer to integer: truncation, or sign / zero extension from the source's width
    ws, wd = TYPE_BITS[src_t], TYPE_BITS[dst_t]
    value = f"(uint64_t)tl_ptx_signed({srcs[0]}, {ws})" if src_t.startswith("s") else f"({srcs[0]} & tl_ptx_mask({ws}))"
    return f"{d} = {value} & tl_ptx_mask({wd});"


_INT = ("u16", "s16", "u32", "s32", "u64", "s64")
_BITS = ("b16", "b32", "b64")
_F16 = ("f16", "f16x2", "bf16", "bf16x2")
_ALL_MOV = ("b16", "b32", "b64", "u16", "s16", "u32", "s32", "u64", "s64", "f16", "f16x2", "bf16", "bf16x2", "f32",
            "f64", "pred", "u8", "s8", "b8")
_CVT_TYPES = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64", "f16x2", "bf16x2",
              "e4m3x2", "e5m2x2")
_SETP_CMP = tuple(_COMPARE) + ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")

# The table: every PTX instruction the CPU translation gives a meaning, from NVIDIA's PTX ISA
# ("Integer Arithmetic", "Half Precision Floating-Point", "Floating-Point", "Logic and Shift",
# "Comparison and Selection", "Data Movement and Conversion").
INSTRUCTIONS: dict[str, Semantics] = {
    "and": Semantics(_BITS + ("pred",), (), (3,), "bitwise AND", _logic("&")),
    "or": Semantics(_BITS + ("pred",), (), (3,), "bitwise OR", _logic("|")),
    "xor": Semantics(_BITS + ("pred",), (), (3,), "bitwise exclusive OR", _logic("^")),
    "not": Semantics(_BITS + ("pred",), (), (2,), "bitwise NOT (one's complement)", _not),
    "lop3": Semantics(("b32",), (), (5,),
                      f"any logic function of a, b, c: bit i of d is bit (a_i b_i c_i) of immLut, the function "
                      f"applied to {', '.join(hex(x) for x in PTX_LOP3_OPERANDS)}", _lop3),
    "prmt": Semantics(("b32",), tuple(PTX_PRMT_MODES), (4,),
                      "four bytes of {b, a} chosen by c (generic: a nibble per byte, its msb replicates the sign; "
                      "a mode: its table's row by c's two low bits)", _prmt),
    "shl": Semantics(_BITS, (), (3,), "shift left; amounts past the width give 0", _shift),
    "shr": Semantics(_BITS + _INT, (), (3,),
                     "shift right: logical for .b/.u, sign-filling for .s; amounts past the width clamp to it", _shift),
    "shf": Semantics(("b32", "u32", "s32"), ("l", "r", "wrap", "clamp"), (4,),
                     "funnel shift of {b, a}: .wrap takes c mod 32, .clamp caps it at 32", _shf),
    "bfe": Semantics(("u32", "s32", "u64", "s64"), (), (4,), "bit field extract (sign-extended for .s)", _bfe),
    "bfi": Semantics(("b32", "b64"), (), (5,), "bit field insert", _bfi),
    "mov": Semantics(_ALL_MOV, (), (2,), "copy; {a, b} packs (element 0 in the low bits) or unpacks", _mov),
    "add": Semantics(_INT + _F16 + ("f32", "f64"), ("rn", "ftz", "sat", "relu"), (3,),
                     "addition (floats: exact, rounded once to nearest even)", _arith),
    "sub": Semantics(_INT + _F16 + ("f32", "f64"), ("rn", "ftz", "sat", "relu"), (3,),
                     "subtraction (floats: exact, rounded once to nearest even)", _arith),
    "mul": Semantics(_INT + _F16 + ("f32", "f64"), ("lo", "hi", "wide", "rn", "ftz", "sat"), (3,),
                     "multiplication (.lo/.hi/.wide halves of the integer product; floats rounded to nearest even)",
                     _arith),
    "mad": Semantics(_INT + ("f32", "f64"), ("lo", "hi", "wide", "rn", "ftz", "sat"), (4,),
                     "a * b + c (floats: fused, as fma)", _arith),
    "fma": Semantics(_F16 + ("f32", "f64"), ("rn", "ftz", "sat", "relu"), (4,),
                     "fused a * b + c, rounded once to nearest even", _arith),
    "neg": Semantics(("s16", "s32", "s64") + _F16 + ("f32", "f64"), ("ftz",), (2,), "negation", _arith),
    "abs": Semantics(("s16", "s32", "s64") + _F16 + ("f32", "f64"), ("ftz",), (2,), "absolute value", _arith),
    "min": Semantics(_INT + _F16 + ("f32", "f64"), ("ftz",), (3,), "minimum (a NaN operand gives the other)", _arith),
    "max": Semantics(_INT + _F16 + ("f32", "f64"), ("ftz",), (3,), "maximum (a NaN operand gives the other)", _arith),
    "selp": Semantics(_ALL_MOV, (), (4,), "d = c ? a : b", _selp),
    "dp4a": Semantics(("u32", "s32"), (), (4,), "c plus the dot product of a's and b's four bytes (signed by type)",
                      _dp4a),
    "setp": Semantics(_INT + _BITS + ("f16", "bf16", "f32", "f64"), _SETP_CMP + ("and", "or", "xor", "ftz"),
                      (3, 4), "compare, into a predicate (and its complement with p|q), optionally combined with c",
                      _setp),
    "cvt": Semantics(_CVT_TYPES, ("rn", "rni", "rzi", "rmi", "rpi", "satfinite", "relu", "ftz"), (2, 3),
                     "conversion: float to float rounded to nearest even (.f16x2/.bf16x2 from two f32: a in the "
                     "upper half), float to integer by .rni/.rzi/.rmi/.rpi saturating, integer widths by "
                     "truncation or sign/zero extension", _cvt),
}

# Modifiers that say nothing the CPU computes differently (a GPU's cache or scheduling hint, the
# approximate-is-allowed default of .f32 min/max, the integer .lo default).
_NEUTRAL_MODIFIERS = ("approx", "full", "uni", "sync", "aligned")
# Rounding modes the table does not compute (it rounds to nearest even only).
_OTHER_ROUNDING = ("rz", "rm", "rp", "rna", "rs")


# ------------------------------------------------------------------------------------------------
# Parsing: the CUDA C source's asm statements, their operands, and PTX text
# ------------------------------------------------------------------------------------------------

def _skip_string(text: str, i: int) -> int:
    """The index after the string or character literal starting at ``text[i]``."""
    quote = text[i]
    i += 1
    while i < len(text) and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _code_mask(text: str) -> list[bool]:
    """For each character of C source, whether it is code (not inside a comment or a literal)."""
    mask = [True] * len(text)
    i = 0
    while i < len(text):
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = len(text) if j < 0 else j + 2
        elif text[i] in "\"'":
            j = _skip_string(text, i)
        else:
            i += 1
            continue
        for k in range(i, min(j, len(text))):
            mask[k] = False
        i = j
    return mask


_ASM_START = re.compile(r"\b(?:asm|__asm__|__asm)\b(\s*(?:volatile|__volatile__|inline|goto)\b)*\s*\(")


def _matching(text: str, i: int, close: str = ")") -> int:
    """Index of the bracket closing the one at ``text[i]`` (strings skipped)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[text[i]]]
    j = i + 1
    while j < len(text):
        ch = text[j]
        if ch in "\"'":
            j = _skip_string(text, j)
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                raise ValueError("unbalanced brackets")
            if not stack:
                return j
        j += 1
    raise ValueError("unbalanced brackets")


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets and string literals."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):  # an asm's "::" is two separators (no outputs)
            parts.append(text[start:i])
            start = i + len(sep)
        i += 1
    parts.append(text[start:])
    return parts


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "", "0": ""}


def _string_value(text: str) -> str:
    """The value of adjacent C string literals."""
    out, i = [], 0
    while i < len(text):
        if text[i] == '"':
            j = _skip_string(text, i)
            body = text[i + 1:j - 1]
            k = 0
            while k < len(body):
                if body[k] == "\\" and k + 1 < len(body):
                    out.append(_ESCAPES.get(body[k + 1], body[k + 1]))
                    k += 2
                else:
                    out.append(body[k])
                    k += 1
            i = j
        elif text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = len(text) if j < 0 else j + 2
        else:
            raise ValueError(f"the asm template is not a string literal: {text.strip()[:60]}")
    return "".join(out)


@dataclass(frozen=True)
class Operand:
    name: str  # the [name] of a symbolic operand, or ""
    constraint: str  # "=r", "+r", "r", "n", ...
    expr: str  # the C expression
    output: bool


def _operands(text: str, output: bool, line: int, source_line: str) -> list[Operand]:
    ops = []
    for part in _split_top(text, ","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r'(?:\[\s*(\w+)\s*\]\s*)?"([^"]*)"\s*\((.*)\)\s*$', part, re.S)
        if m is None:
            raise PtxUnsupported(f"an asm operand written as {part!r}", line, source_line)
        ops.append(Operand(m.group(1) or "", m.group(2).replace(" ", ""), m.group(3).strip(), output))
    return ops


def _constraint_letter(constraint: str) -> str:
    letters = constraint.lstrip("=+&")
    return letters[:1]


_TYPE_NAMES = set(TYPE_BITS)


def _parse_number(token: str) -> str | None:
    """An immediate as a C uint64_t literal, or None when ``token`` is not one."""
    t = token.strip()
    neg = t.startswith("-")
    body = t[1:] if neg else t
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", body):
        value = int(body[2:], 16) ^ (0x80000000 if neg else 0)
        return f"0x{value:x}ull"
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", body):
        value = int(body[2:], 16) ^ (1 << 63 if neg else 0)
        return f"0x{value:x}ull"
    body = body.rstrip("uU")
    for pattern, base in ((r"0[xX][0-9a-fA-F]+", 16), (r"0[bB][01]+", 2), (r"0[0-7]+", 8), (r"[0-9]+", 10)):
        if re.fullmatch(pattern, body):
            value = int(body[2:] if base in (16, 2) else body, base)
            return f"(uint64_t)(-(int64_t){value}ll)" if neg else f"{value}ull"
    if re.fullmatch(r"[0-9]*\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+", body):
        return None  # a decimal float: PTX takes it for .f32/.f64 operands only; refused where met
    return None


@dataclass
class _Scope:
    """What an asm statement's PTX names: its operands' C variables and its declared registers."""

    operands: dict[str, str]  # "%0" / "%[name]" -> C variable
    registers: dict[str, str]  # a .reg name -> C variable
    decls: list[str]
    counter: int = 0


_SPECIAL = re.compile(r"%(?:tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|clock|clock64|lanemask_\w+|"
                      r"pm\d|globaltimer\w*|envreg\d+|dynamic_smem_size|total_smem_size|cluster\w*)\b")


def _expand_regs(names: str) -> list[str]:
    out = []
    for n in (x.strip() for x in names.split(",")):
        m = re.fullmatch(r"(%?\w+)<(\d+)>", n)
        if m:
            out += [f"{m.group(1)}{i}" for i in range(int(m.group(2)))]
        elif n:
            out.append(n)
    return out


def _c_name(reg: str, scope: _Scope) -> str:
    scope.counter += 1
    return f"tl_ptx_v{scope.counter}_" + re.sub(r"\W", "_", reg)


def _operand_c(token: str, scope: _Scope, line: int, source_line: str) -> str:
    t = token.strip()
    if t in scope.operands:
        return scope.operands[t]
    if t in scope.registers:
        return scope.registers[t]
    if t == "_":
        return "tl_ptx_sink"
    number = _parse_number(t)
    if number is not None:
        return number
    if _SPECIAL.match(t):
        raise PtxUnsupported(f"the special register {t}", line, source_line)
    if re.fullmatch(r"%\d+|%\[\w+\]", t):
        raise PtxUnsupported(f"the operand {t}, which the asm statement does not list", line, source_line)
    raise PtxUnsupported(f"the operand {t!r}", line, source_line)


def _split_opcode(opcode: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    parts = opcode.split(".")
    name, rest = parts[0], parts[1:]
    types = tuple(p for p in rest if p in _TYPE_NAMES)
    modifiers = tuple(p for p in rest if p not in _TYPE_NAMES)
    return name, modifiers, types


def _instruction(stmt: str, scope: _Scope, line: int, source_line: str) -> str:
    """One PTX statement (no trailing ';') as C statements."""
    guard = ""
    m = re.match(r"@\s*(!?)\s*(%?[\w]+)\s+", stmt)
    if m:
        reg = _operand_c(m.group(2), scope, line, source_line)
        guard = f"{'!' if m.group(1) else ''}({reg} != 0)"
        stmt = stmt[m.end():]
    head, _, rest = stmt.strip().partition(" ")
    opcode = head.strip()
    name, modifiers, types = _split_opcode(opcode)
    if name.endswith(":"):
        raise PtxUnsupported(f"the label {name[:-1]} (control flow)", line, source_line)
    sem = INSTRUCTIONS.get(name)
    if sem is None:
        known = ", ".join(sorted(INSTRUCTIONS))
        raise PtxUnsupported(f"the PTX instruction {opcode} (the CPU's table of PTX instructions has {known})",
                             line, source_line)
    unknown = [x for x in modifiers if x not in sem.modifiers and x not in _NEUTRAL_MODIFIERS]
    rounding = [x for x in unknown if x in _OTHER_ROUNDING]
    if rounding:
        raise PtxUnsupported(f"the PTX instruction {opcode}: rounding mode .{rounding[0]} (the CPU's table rounds "
                             "to nearest even, .rn, only)", line, source_line)
    if unknown:
        raise PtxUnsupported(f"the PTX instruction {opcode}: modifier .{unknown[0]} is outside the CPU's table "
                             f"(it takes {', '.join('.' + x for x in sem.modifiers) or 'none'} for {name})",
                             line, source_line)
    if not types or any(t not in sem.types for t in types):
        raise PtxUnsupported(f"the PTX instruction {opcode}: its type{'s' if len(types) > 1 else ''} "
                             f"{', '.join('.' + t for t in types) or '(none)'} outside the CPU's table for {name} "
                             f"({', '.join('.' + t for t in sem.types)})", line, source_line)
    if name == "setp" and not any(x in _SETP_CMP for x in modifiers):
        raise PtxUnsupported(f"the PTX instruction {opcode} without a comparison", line, source_line)
    if name == "shf" and not ({"l", "r"} & set(modifiers) and {"wrap", "clamp"} & set(modifiers)):
        raise PtxUnsupported(f"the PTX instruction {opcode} without .l/.r and .wrap/.clamp", line, source_line)
    if name in ("cvt", "dp4a") and len(types) != 2:
        raise PtxUnsupported(f"the PTX instruction {opcode} without its two types", line, source_line)
    raw = [x.strip() for x in _split_top(rest, ",") if x.strip()]
    if len(raw) not in sem.operands:
        raise PtxUnsupported(f"the PTX instruction {opcode} with {len(raw)} operands (the table expects "
                             f"{' or '.join(str(n) for n in sem.operands)})", line, source_line)
    vectors: list[tuple[str, ...]] = []
    operands: list[str] = []
    for i, tok in enumerate(raw):
        if tok.startswith("{") and tok.endswith("}"):
            parts = tuple(_operand_c(p, scope, line, source_line) for p in tok[1:-1].split(","))
            if name != "mov" or len(parts) not in (2, 4):
                raise PtxUnsupported(f"the vector operand {tok} of {opcode}", line, source_line)
            vectors.append(parts)
            operands.append(parts[0])
        elif "|" in tok and i == 0 and name == "setp":
            parts = tuple(_operand_c(p, scope, line, source_line) for p in tok.split("|"))
            vectors.append(parts)
            operands.append(parts[0])
        elif tok.startswith("[") or tok.startswith("!"):
            raise PtxUnsupported(f"the operand {tok} of {opcode} (memory or a negated predicate)", line, source_line)
        else:
            c = _operand_c(tok, scope, line, source_line)
            vectors.append((c,))
            operands.append(c)
    ins = Instr(guard, name, modifiers, types, tuple(operands), tuple(vectors), stmt, line)
    code = sem.emit(ins)
    return f"if ({guard}) {{ {code} }}" if guard else code


def translate_ptx(template: str, operands: list[Operand], line: int, source_line: str) -> str:
    """The PTX text of one asm statement as C over its operands' registers."""
    scope = _Scope({}, {}, [])
    setup, writeback = [], []
    for i, op in enumerate(operands):
        var = f"tl_ptx_o{i}"
        scope.operands[f"%{i}"] = var
        if op.name:
            scope.operands[f"%[{op.name}]"] = var
        letter = _constraint_letter(op.constraint)
        if letter not in CONSTRAINT_BITS:
            raise PtxUnsupported(f"the asm constraint \"{op.constraint}\"", line, source_line)
        bits = CONSTRAINT_BITS[letter]
        if op.output and not op.constraint.startswith("+"):
            setup.append(f"uint64_t {var} = 0;")
        else:
            setup.append(f"uint64_t {var} = tl_ptx_get<{bits}>({op.expr});")
        if op.output:
            writeback.append(f"tl_ptx_set<{bits}>({op.expr}, {var});")
    body: list[str] = []
    text = re.sub(r"//[^\n]*", "", template)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = text.replace("%%", "%")  # "%%" is a literal "%": a special register, a register named %r1
    for raw in re.split(r"[;\n]", text):
        stmt = raw.strip()
        while stmt:
            if stmt[0] in "{}":
                body.append(stmt[0])
                stmt = stmt[1:].strip()
                continue
            if stmt.startswith(".reg"):
                m = re.match(r"\.reg\s+\.(\w+)\s+(.+)$", stmt, re.S)
                if m is None or m.group(1) not in TYPE_BITS:
                    raise PtxUnsupported(f"the declaration {stmt}", line, source_line)
                for reg in _expand_regs(m.group(2)):
                    c = _c_name(reg, scope)
                    scope.registers[reg] = c
                    body.append(f"uint64_t {c} = 0;")
                stmt = ""
                continue
            if stmt.startswith("."):
                raise PtxUnsupported(f"the directive {stmt.split()[0]}", line, source_line)
            end = stmt.find("}") if "{" not in stmt.split(" ", 1)[-1] else -1
            if end > 0:  # "add ... }" closing a scope on the same statement
                body.append(_instruction(stmt[:end].strip(), scope, line, source_line))
                stmt = stmt[end:]
                continue
            body.append(_instruction(stmt, scope, line, source_line))
            stmt = ""
    # a statement wherever the asm statement stood (its ';' follows): under an if, before an else
    return "do { uint64_t tl_ptx_sink = 0; (void)tl_ptx_sink; " + " ".join(setup + body + writeback) + " } while (0)"


def _in_macro(text: str, index: int) -> bool:
    """Whether ``text[index]`` is part of a #define (its line, or a line the define continues)."""
    start = text.rfind("\n", 0, index) + 1
    while True:
        if text[start:].lstrip().startswith("#"):
            return True
        if start < 2 or text[start - 2] != "\\":
            return False
        start = text.rfind("\n", 0, start - 1) + 1


def _line_of(text: str, index: int) -> tuple[int, str]:
    line = text.count("\n", 0, index) + 1
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return line, text[start:end if end >= 0 else len(text)]


_CUDA_HEADERS = re.compile(r"^[ \t]*#\s*include\s*[<\"](?:cuda\w*\.h|cuda/[^>\"]*|mma\.h|cuda_fp16\.h|cuda_bf16\.h|"
                           r"cuda_fp8\.h|cuda_runtime\.h)[>\"][^\n]*$", re.M)


@functools.lru_cache(maxsize=64)
def translate_source(source: str) -> str:
    """``source`` (CUDA C a kernel imports) as C++ for the CPU: the prelude, then the source with
    each asm statement replaced by its translation (line numbers kept). Raises
    :class:`PtxUnsupported` for what has no translation."""
    mask = _code_mask(source)
    out, pos = [], 0
    for m in _ASM_START.finditer(source):
        if not mask[m.start()] or m.start() < pos:
            continue
        line, text = _line_of(source, m.start())
        if _in_macro(source, m.start()):
            raise PtxUnsupported("an asm statement in a macro (#define): the translation reads the source as "
                                 "written, so write the statement in a function", line, text)
        open_paren = m.end() - 1
        try:
            close = _matching(source, open_paren)
        except ValueError:
            raise PtxUnsupported("an asm statement whose parentheses do not close", line, text) from None
        inner = source[open_paren + 1:close]
        sections = _split_top(inner, ":")
        try:
            template = _string_value(sections[0])
        except ValueError as err:
            raise PtxUnsupported(str(err), line, text) from None
        outputs = _operands(sections[1], True, line, text) if len(sections) > 1 else []
        inputs = _operands(sections[2], False, line, text) if len(sections) > 2 else []
        if len(sections) > 4:
            raise PtxUnsupported("an asm goto statement", line, text)
        translated = translate_ptx(template, outputs + inputs, line, text)
        end = close + 1
        out.append(source[pos:m.start()])
        out.append(translated + "\n" * source.count("\n", m.start(), end))
        pos = end
    out.append(source[pos:])
    body = _CUDA_HEADERS.sub(lambda mm: "// (CUDA header: its types are the prelude's) " + mm.group(0).strip(),
                             "".join(out))
    return f"{prelude()}\n{_renames()}\n{body}\n{_unrenames()}\n"


# ------------------------------------------------------------------------------------------------
# The IR side: GPU float buffers passed to an imported function, as their bits
# ------------------------------------------------------------------------------------------------

BITS_OF_FORMAT = {16: "uint16", 8: "uint8"}


def pass_bits_to_imported_calls(body: Any, functions: set[str], narrow: dict[str, str],
                                widths: dict[str, int], codes: dict[str, int], to_bits: str, from_bits: str,
                                compute: str, extern_int: str, name: str) -> tuple[Any, list[Any]]:
    """``body`` with each call of an imported device function (one of ``functions``) that takes a
    pointer into a buffer held in float32 for a narrower GPU type (``narrow``: name -> type,
    ``widths``: its bits) given instead a scratch array of that type's bits: filled from the buffer
    before the call (when the pointer reads), decoded back into it after (when it writes). Returns
    the body and the scratch buffers to allocate in the kernel's root block."""
    from .emulate_source import EmulationRefused
    from .env import tilelang

    tvm = tilelang().tvm
    tirx = tvm.tirx
    scratch: list[Any] = []

    def flat_offset(load: Any) -> Any:
        buf = load.buffer
        offset = tirx.const(0, "int32")
        if len(buf.strides):
            for idx, stride in zip(load.indices, buf.strides, strict=False):
                offset = offset + idx * stride
            return offset
        for idx, extent in zip(load.indices, buf.shape, strict=False):
            offset = offset * extent + idx
        return offset

    def rewrite(call: Any) -> Any:
        before, after, args = [], [], []
        for arg in call.args:
            op = str(getattr(arg, "op", None) and getattr(arg.op, "name", "")) if isinstance(arg, tirx.Call) else ""
            if op == "tl.access_ptr" and isinstance(arg.args[0], tirx.BufferLoad) \
                    and str(arg.args[0].buffer.name) in narrow:
                load, extent, rw = arg.args[0], arg.args[1], int(arg.args[2].value)
                buf = load.buffer
                kind = narrow[str(buf.name)]
                if kind not in widths:
                    raise EmulationRefused(name, f"a {kind} buffer ({buf.name}) passed to an imported device function",
                                           f"the CPU holds {kind} in float32 and has no bits form of it to pass")
                size = 1
                for e in buf.shape:
                    size = size * e
                flat = tirx.decl_buffer((size,), compute, str(buf.name), data=buf.data, scope=buf.scope())
                if not isinstance(extent, tirx.IntImm):
                    raise EmulationRefused(name, f"{buf.name} passed to an imported device function with an extent "
                                                 "that is not a constant",
                                           "the CPU passes a float16 or bfloat16 buffer as a copy of its bits, "
                                           "and needs its size")
                n = int(extent.value)
                bits = tirx.decl_buffer((n,), BITS_OF_FORMAT[widths[kind]], f"{buf.name}_bits", scope="local")
                scratch.append(bits)
                base = flat_offset(load)
                i = tirx.Var("tilelab_i", "int32")
                fmt = tirx.const(codes[kind], extern_int)
                if rw & 1:
                    value = tirx.call_extern("uint32", to_bits, tirx.BufferLoad(flat, [base + i]), fmt)
                    before.append(tirx.For(i, tirx.const(0, "int32"), tirx.const(n, "int32"), tirx.ForKind.SERIAL,
                                           tirx.BufferStore(bits, tirx.Cast(bits.dtype, value), [i])))
                if rw & 2:
                    j = tirx.Var("tilelab_i", "int32")
                    value = tirx.call_extern(compute, from_bits, tirx.Cast("uint32", tirx.BufferLoad(bits, [j])), fmt)
                    after.append(tirx.For(j, tirx.const(0, "int32"), tirx.const(n, "int32"), tirx.ForKind.SERIAL,
                                          tirx.BufferStore(flat, value, [base + j])))
                args.append(tirx.Call(arg.dtype, arg.op, [tirx.BufferLoad(bits, [tirx.const(0, "int32")]),
                                                          extent, arg.args[2]]))
            elif isinstance(arg, tirx.Call) and op in ("tirx.address_of", "tirx.tvm_access_ptr") and arg.args \
                    and isinstance(arg.args[0], tirx.BufferLoad) and str(arg.args[0].buffer.name) in narrow:
                buf = arg.args[0].buffer
                raise EmulationRefused(name, f"{buf.name} passed to an imported device function by address",
                                       f"the CPU holds {narrow[str(buf.name)]} in float32 and passes it as a copy "
                                       "of its bits when the pointer is T.access_ptr (which says its extent)")
            else:
                args.append(arg)
        if not before and not after:
            return None
        new_call = tirx.Call(call.dtype, call.op, args)
        return before, new_call, after

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")) == "tirx.call_extern" and node.value.args \
                and str(getattr(node.value.args[0], "value", "")) in functions:
            done = rewrite(node.value)
            if done is None:
                return None
            before, call, after = done
            return tirx.SeqStmt([*before, tirx.Evaluate(call), *after])
        return None

    body = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Evaluate"])
    return body, scratch


# The C type TileLang's C code generator writes for each TIR dtype (its declarations of the
# functions a kernel calls are made of these).
_C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t",
            "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t", "float32": "float", "float64": "double",
            "bool": "bool", "handle": "void*"}
ENTRY_PREFIX = "tilelab_call_"


def entry_points(body: Any, functions: set[str], name: str) -> tuple[Any, str]:
    """``body`` with each call of an imported device function renamed to an entry point of C
    linkage, and the C++ that defines those entry points (to follow the translated source).

    TileLang's C code generator declares every function a kernel calls, ``extern "C"`` with the
    call's argument types; such a declaration of the imported function itself (often a template)
    would be what the call chooses, with nothing behind it. The entry point is declared with those
    same types and calls the function as CUDA C would."""
    from .emulate_source import EmulationRefused
    from .env import tilelang

    tirx = tilelang().tvm.tirx
    signatures: dict[tuple[str, tuple[str, ...], str], str] = {}

    def c_type(arg: Any) -> str:
        if isinstance(arg, tirx.Call) and arg.args and isinstance(arg.args[0], tirx.BufferLoad) \
                and str(getattr(arg.op, "name", "")) in ("tl.access_ptr", "tirx.address_of"):
            dtype = str(arg.args[0].buffer.dtype)
            if dtype in _C_TYPES:
                return _C_TYPES[dtype] + "*"
        elif isinstance(arg, tirx.Var) and hasattr(arg.type_annotation, "element_type"):
            dtype = str(getattr(arg.type_annotation.element_type, "dtype", ""))
            if dtype in _C_TYPES:
                return _C_TYPES[dtype] + "*"
        elif str(arg.dtype) in _C_TYPES and str(arg.dtype) != "handle":
            return _C_TYPES[str(arg.dtype)]
        raise EmulationRefused(name, f"an argument of an imported device function written as {arg}",
                               "the CPU calls the function through an entry point typed from its arguments, and "
                               "this argument's C type is not one it knows (a pointer from T.access_ptr or "
                               "T.address_of, a buffer's data, or a number)")

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) == "tirx.call_extern" and node.args \
                and str(getattr(node.args[0], "value", "")) in functions:
            fn = str(node.args[0].value)
            types = tuple(c_type(a) for a in node.args[1:])
            ret = _C_TYPES.get(str(node.dtype), "void*")
            entry = signatures.setdefault((fn, types, ret), f"{ENTRY_PREFIX}{fn}_{len(signatures)}")
            return tirx.Call(node.dtype, node.op, [tirx.StringImm(entry), *node.args[1:]])
        return None

    body = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Call"])
    lines = []
    for (fn, types, ret), entry in signatures.items():
        params = ", ".join(f"{t} a{i}" for i, t in enumerate(types))
        args = ", ".join(f"a{i}" for i in range(len(types)))
        lines.append(
            f'extern "C" {ret} {entry}({params}) {{\n'
            f"  return tl_ptx_invoke<{ret}>([](auto... x) -> decltype({fn}(x...)) {{ return {fn}(x...); }}"
            f"{', ' if args else ''}{args});\n}}")
    return body, "\n".join(lines)


def imported_calls(body: Any, functions: set[str], narrow: dict[str, str], widths: dict[str, int],
                   codes: dict[str, int], to_bits: str, from_bits: str, compute: str, extern_int: str,
                   name: str) -> Any:
    """``body`` with the calls of imported device functions made as the CPU makes them: GPU float
    buffers passed as scratch arrays of their bits (:func:`pass_bits_to_imported_calls`, the arrays
    allocated in the kernel's root block) and each call through an entry point
    (:func:`entry_points`, defined after the first translated source)."""
    from .emulate_source import EmulationRefused
    from .env import tilelang

    tirx = tilelang().tvm.tirx
    body, scratch = pass_bits_to_imported_calls(body, functions, narrow, widths, codes, to_bits, from_bits, compute,
                                                extern_int, name)
    body, entries = entry_points(body, functions, name)
    placed, defined = [not scratch], [False]

    def post(node: Any) -> Any:
        allocs = list(node.alloc_buffers)
        annotations = dict(node.annotations)
        if not placed[0] and str(node.name_hint) == "tilelang_root":
            allocs += scratch
            placed[0] = True
        if not defined[0] and "pragma_import_c" in annotations:
            annotations["pragma_import_c"] = f"{annotations['pragma_import_c']}\n{entries}\n"
            defined[0] = True
        elif len(allocs) == len(node.alloc_buffers):
            return None
        return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                           allocs, node.match_buffers, annotations)

    body = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.SBlock"])
    if not placed[0]:
        raise EmulationRefused(name, "a float16 or bfloat16 buffer passed to an imported device function outside "
                                     "the kernel's root block",
                               "the CPU passes it as a copy of its bits, kept in the root block")
    return body


__all__ = ["INSTRUCTIONS", "PtxUnsupported", "Semantics", "entry_points", "imported_calls",
           "pass_bits_to_imported_calls", "prelude", "translate_ptx", "translate_source"]
