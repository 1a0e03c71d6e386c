"""A kernel written for a GPU, run on the CPU with its tile program's meaning (``device="cpu"``).

The adapter (``_tilelang/emulate.py``) rewrites the kernel's IR for TileLang's target ``c`` by a few
visible rules (shared and fragment buffers as local arrays, ``T.Parallel`` as serial loops, no
pipeline stages, one thread a block, GPU float types computed in float32 and rounded where the GPU
rounds, a mask of the blocks to run, every access checked against its buffer). This module runs
the result exactly as a GPU run is verified (:func:`tilelab.run`): inputs built or checked from the
signature, outputs poisoned first so elements never written are found, ``ref`` and the tolerance
of the output's GPU dtype, the tile map, NaN location, inputs written.

The launch happens in a worker process of its own (``_worker``), never in the caller's: a kernel
whose loop never ends is killed at ``timeout``, and one that crashes costs the worker. Accesses
outside a buffer (below its start or past its end) do not reach memory at all: the kernel's checks
record them in the *emulation runtime* (a small C library built once per machine into tilelab's
cache and loaded before the kernel) and the run fails with each one's buffer, indices and block.

Blocks run one after another, so a run says what the tile program computes, never the GPU's timing
or its races: every result says so (:data:`EMULATED_NOTE`). ``blocks=`` runs only some blocks and
checks only the elements they wrote.
"""

from __future__ import annotations

import ctypes
import dataclasses
import pickle
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..records.errors import TilelabError
from ..records.launch import RunResult
from . import _checks, _inputs, _worker
from ._cuda_errors import KernelLaunchError
from ._kernel import Prepared, reference
from ._native import load_runtime
from ._options import RunOptions

EMULATED_NOTE = "emulated on the CPU: the tile program's meaning, not the GPU's timing or its races"
EMULATED_BACKEND = "emulated (TileLang target c)"
NATIVE_NOTE = ("ran on the CPU (target c) in tilelab's CPU worker process, every access checked against its buffer "
               "(one outside is reported, never performed)")
RUN_TIMEOUT_S = 120.0  # one emulated launch: blocks run one after another on one core
# An unsatisfiable mbarrier wait comes back as an out-of-bounds record with this buffer id and kind
# (as tilelab/_tilelang/emulate_roles.py writes it): its indices are the barrier, element, parity, line.
PROTOCOL_BUFFER, PROTOCOL_KIND = -2, 2
DEADLOCK_KIND = 3  # a group of threads waiting when no group can pass its wait (the thread-level rule's turns)
MAX_OOB = 64  # out-of-bounds accesses kept with their indices (all are counted)
CPU_WORKER = -1  # the worker process of CPU launches (device numbers of GPUs are >= 0)
LOAD_TIMEOUT_S = 900.0  # a fresh worker imports TileLang and loads the kernel (a compile if the cache lacks it)

# The rounding of a float32 value to a GPU float type, by the bits of the float32 (no division or
# library call on the common path). The runtime exports it (tilelab_emu_round, for the Python side
# and for kernels built without it); an emulated kernel is built with it included, as an inline
# function of its own translation unit, so that each store's rounding is a few integer operations
# with the format folded in (ROUNDING_HEADER, passed to the compiler by -include).
_ROUNDING_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>

/* x rounded to nearest even in a binary float format of `mant` stored mantissa bits, whose normal
   exponents reach down to `emin`, whose largest finite value is `maxv`; `sat`: values beyond it
   saturate to it (the float8 "fn" formats, which have no infinity) instead of becoming infinite.
   Only these formats' bits are read: `has_inf` says what an infinite input becomes. */
static inline float tilelab_round_to(float x, int mant, int emin, float maxv, int sat, int has_inf) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  uint32_t ax = u & 0x7fffffffu;
  if (ax >= 0x7f800000u) {        /* NaN stays NaN; an infinity saturates or stays */
    if (ax > 0x7f800000u) return x;
    return sat ? copysignf(has_inf ? INFINITY : NAN, x) : x;
  }
  if (ax == 0) return x;
  int exp = (int)(ax >> 23) - 127;  /* float32 subnormals read as -127: below every format's emin but tf32's */
  float r;
  if (exp >= emin) {
    /* a normal value of the format: round the float32 mantissa to `mant` bits, ties to even (a carry
       into the exponent is the next binade, or infinity past float32's range, as it should be) */
    int shift = 23 - mant;
    uint32_t lsb = (ax >> shift) & 1u;
    uint32_t rounded = (ax + ((1u << (shift - 1)) - 1u) + lsb) & ~((1u << shift) - 1u);
    memcpy(&r, &rounded, sizeof r);
  } else {
    /* a subnormal of the format: multiples of its smallest spacing (exact scalings by powers of two) */
    float ulp = ldexpf(1.0f, emin - mant);
    r = nearbyintf(fabsf(x) / ulp) * ulp;  /* the default rounding mode: to nearest, ties to even */
  }
  if (r > maxv) {
    /* past the largest finite value: IEEE rounds to infinity from half an ulp above it */
    float top_ulp = ldexpf(1.0f, (int)(logbf(maxv)) - mant);
    if (sat) r = maxv;  /* the GPU converts to these formats with satfinite, as torch does */
    else r = (fabsf(x) >= maxv + top_ulp / 2) ? INFINITY : maxv;
  }
  return copysignf(r, x);
}

static inline float tilelab_emu_round_impl(float x, int32_t format) {
  switch (format) {
    case 1: return tilelab_round_to(x, 10, -14, 65504.0f, 0, 1);          /* float16 */
    case 2: return tilelab_round_to(x, 7, -126, 3.3895313892515355e38f, 0, 1); /* bfloat16 */
    case 3: return tilelab_round_to(x, 3, -6, 448.0f, 1, 0);              /* float8_e4m3fn: no inf, saturates at 448 */
    case 4: return tilelab_round_to(x, 2, -14, 57344.0f, 0, 1);           /* float8_e5m2 */
    case 5: return tilelab_round_to(x, 3, -7, 240.0f, 1, 0);              /* float8_e4m3fnuz */
    case 6: return tilelab_round_to(x, 2, -15, 57344.0f, 1, 0);           /* float8_e5m2fnuz */
    case 7: return tilelab_round_to(x, 1, 0, 6.0f, 1, 1);                 /* float4_e2m1fn: saturates at 6 */
    case 8: return tilelab_round_to(x, 10, -126, 3.4028235e38f, 0, 1);   /* tfloat32: float32's range, 10 bits */
    default: return x;
  }
}
/* The bits of a value of a GPU float format as float32 (T.reinterpret of an integer as that format),
   and back (a value rounded to the format, then its bits). Formats by their code above: exponent
   bits, mantissa bits, bias; "fn" formats have no infinity (e4m3fn's NaN is S.1111.111), "fnuz" ones
   no infinity and no negative zero (0x80 is their NaN). */
typedef struct { int ebits, mbits, bias, has_inf, fnuz; } tilelab_format;

static inline tilelab_format tilelab_format_of(int32_t format) {
  switch (format) {
    case 1: return (tilelab_format){5, 10, 15, 1, 0};
    case 2: return (tilelab_format){8, 7, 127, 1, 0};
    case 3: return (tilelab_format){4, 3, 7, 0, 0};
    case 4: return (tilelab_format){5, 2, 15, 1, 0};
    case 5: return (tilelab_format){4, 3, 8, 0, 1};
    case 6: return (tilelab_format){5, 2, 16, 0, 1};
    case 7: return (tilelab_format){2, 1, 1, 0, 0};
    default: return (tilelab_format){8, 23, 127, 1, 0};
  }
}

static inline float tilelab_emu_from_bits(uint32_t bits, int32_t format) {
  if (format == 1 && ((bits >> 10) & 0x1fu) != 0 && ((bits >> 10) & 0x1fu) != 0x1fu) {
    /* a normal float16 (the common case of a float16 tensor passed as its bits): rebias the exponent */
    uint32_t u = ((bits & 0x8000u) << 16) | ((((bits >> 10) & 0x1fu) + 112u) << 23) | ((bits & 0x3ffu) << 13);
    float f; memcpy(&f, &u, sizeof f); return f;
  }
  if (format == 8 || format == 2) {   /* tfloat32: float32's bits; bfloat16: float32's upper half */
    uint32_t u = format == 2 ? (bits & 0xffffu) << 16 : bits;
    float f; memcpy(&f, &u, sizeof f); return f;
  }
  tilelab_format t = tilelab_format_of(format);
  int width = 1 + t.ebits + t.mbits;
  bits &= (1u << width) - 1u;
  int sign = (bits >> (width - 1)) & 1;
  int e = (bits >> t.mbits) & ((1 << t.ebits) - 1);
  int m = bits & ((1 << t.mbits) - 1);
  int emax = (1 << t.ebits) - 1;
  if (t.fnuz && bits == (1u << (width - 1))) return NAN;
  float v;
  if (t.has_inf && e == emax) v = m ? NAN : INFINITY;
  else if (!t.has_inf && !t.fnuz && t.ebits == 4 && e == emax && m == (1 << t.mbits) - 1) v = NAN;
  else if (e == 0) v = ldexpf((float)m, 1 - t.bias - t.mbits);
  else v = ldexpf((float)((1 << t.mbits) + m), e - t.bias - t.mbits);
  return sign ? -v : v;
}

static inline uint32_t tilelab_emu_to_bits(float x, int32_t format) {
  float r = tilelab_emu_round_impl(x, format);
  uint32_t u; memcpy(&u, &r, sizeof u);
  /* a NaN is stored as the GPU's canonical one (positive, every mantissa bit set: what cvt.rn
     writes for any NaN), not with the sign of the CPU's NaN: 0/0 is negative on x86, and a
     negative float16 NaN with every bit set would read as the launch's 0xFF poison (unwritten) */
  if (isnan(r)) {
    if (format == 8) return 0x7fffffffu;
    if (format == 2) return 0x7fffu;
  }
  if (format == 8) return u;
  if (format == 2) return u >> 16;    /* rounded to bfloat16: its bits are float32's upper half */
  if (format == 1) {                  /* a normal float16: rebias float32's exponent */
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 112;
    if (e >= 1 && e <= 30) return ((u >> 16) & 0x8000u) | ((uint32_t)e << 10) | ((u >> 13) & 0x3ffu);
  }
  tilelab_format t = tilelab_format_of(format);
  int width = 1 + t.ebits + t.mbits;
  uint32_t sign = (u >> 31) << (width - 1);
  int emax = (1 << t.ebits) - 1;
  if (isnan(r)) return t.fnuz ? (1u << (width - 1)) : (((uint32_t)emax << t.mbits) | ((1u << t.mbits) - 1u));
  if (isinf(r)) return sign | ((uint32_t)emax << t.mbits);
  float a = fabsf(r);
  if (a == 0.0f) return t.fnuz ? 0u : sign;
  int e;
  frexpf(a, &e);
  e -= 1;                              /* a = 1.f * 2^e */
  if (e < 1 - t.bias)                  /* a subnormal of the format */
    return sign | (uint32_t)ldexpf(a, t.bias - 1 + t.mbits);
  uint32_t m = (uint32_t)ldexpf(a, t.mbits - e) - (1u << t.mbits);
  return sign | ((uint32_t)(e + t.bias) << t.mbits) | m;
}
"""

# Included first in an emulated kernel's C++ (-include): the kernel's own declaration of the
# rounding (extern "C", as TileLang's codegen writes it) then names this inline definition.
ROUNDING_HEADER = _ROUNDING_SOURCE + r"""
/* T.device_assert whose condition is false (the intrinsics rule): its message, and the launch ends
   (in the CPU run's own worker process), as CUDA's assert traps the kernel. C++, beside
   the C declaration TileLang's code writes (void*): the overload a string literal takes. */
static inline int32_t tilelab_emu_assert_failed(const void* message) {
  fprintf(stderr, "device assertion failed: %s\n", (const char*)message);
  fflush(stderr);
  abort();
  return 0;
}
extern "C" {
static inline float tilelab_emu_round(float x, int64_t format) { return tilelab_emu_round_impl(x, (int32_t)format); }
static inline float tilelab_emu_float_of_bits(uint32_t bits, int64_t format) {
  return tilelab_emu_from_bits(bits, (int32_t)format);
}
static inline uint32_t tilelab_emu_bits_of_float(float x, int64_t format) {
  return tilelab_emu_to_bits(x, (int32_t)format);
}
}
"""

_RUNTIME_SOURCE = _ROUNDING_SOURCE + r"""
/* One out-of-bounds access: the buffer's id (see the kernel's emulation), read 0 / write 1, the
   block, and the indices with the buffer's extents. */
typedef struct { int32_t buffer, kind, bx, by, bz, rank; int64_t idx[6]; int64_t extent[6]; } tl_emu_oob;

static tl_emu_oob kept[MAX_OOB];
static int64_t n_kept = 0, n_total = 0;

extern "C" {

int32_t tilelab_emu_oob(int64_t buffer, int64_t kind, int64_t bx, int64_t by, int64_t bz, int64_t rank,
                        int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t i4, int64_t i5,
                        int64_t e0, int64_t e1, int64_t e2, int64_t e3, int64_t e4, int64_t e5) {
  n_total++;
  if (n_kept < MAX_OOB) {
    tl_emu_oob* o = &kept[n_kept++];
    o->buffer = (int32_t)buffer; o->kind = (int32_t)kind; o->bx = (int32_t)bx; o->by = (int32_t)by;
    o->bz = (int32_t)bz; o->rank = (int32_t)rank;
    int64_t idx[6] = {i0, i1, i2, i3, i4, i5}, ext[6] = {e0, e1, e2, e3, e4, e5};
    memcpy(o->idx, idx, sizeof idx); memcpy(o->extent, ext, sizeof ext);
  }
  return 0;
}

/* Elements of n whose bits (width bytes each) have every bit of mask set: NaN and infinity of an
   IEEE-like format when mask is its exponent field. */
int64_t tilelab_emu_count_all_set(const void* data, int64_t n, int32_t width, uint64_t mask) {
  int64_t count = 0;
  if (width == 2) {
    const uint16_t* p = (const uint16_t*)data; uint16_t m = (uint16_t)mask;
    for (int64_t i = 0; i < n; i++) count += (p[i] & m) == m;
  } else if (width == 4) {
    const uint32_t* p = (const uint32_t*)data; uint32_t m = (uint32_t)mask;
    for (int64_t i = 0; i < n; i++) count += (p[i] & m) == m;
  } else if (width == 8) {
    const uint64_t* p = (const uint64_t*)data;
    for (int64_t i = 0; i < n; i++) count += (p[i] & mask) == mask;
  } else {
    const uint8_t* p = (const uint8_t*)data; uint8_t m = (uint8_t)mask;
    for (int64_t i = 0; i < n; i++) count += (p[i] & m) == m;
  }
  return count;
}

/* The flat indices (up to cap of them, into out) of the n elements (width bytes each) whose bits
   differ from word (the poison): how many there are. */
int64_t tilelab_emu_differ(const void* data, int64_t n, int32_t width, uint64_t word, int64_t* out, int64_t cap) {
  int64_t count = 0;
#define TILELAB_DIFFER(T) { const T* p = (const T*)data; T w = (T)word; \
    for (int64_t i = 0; i < n; i++) if (p[i] != w) { if (count < cap) out[count] = i; count++; } }
  if (width == 1) TILELAB_DIFFER(uint8_t)
  else if (width == 2) TILELAB_DIFFER(uint16_t)
  else if (width == 4) TILELAB_DIFFER(uint32_t)
  else TILELAB_DIFFER(uint64_t)
#undef TILELAB_DIFFER
  return count;
}

/* A T.alloc_global scratch buffer: zeroed heap memory for one run of the program. */
void* tilelab_emu_scratch(int64_t bytes) { return calloc(bytes > 0 ? (size_t)bytes : 1, 1); }
int32_t tilelab_emu_scratch_free(void* p) { free(p); return 0; }

void tilelab_emu_reset(void) { n_kept = 0; n_total = 0; }
int64_t tilelab_emu_oob_total(void) { return n_total; }
int64_t tilelab_emu_oob_kept(void) { return n_kept; }
const void* tilelab_emu_oobs(void) { return kept; }

float tilelab_emu_round(float x, int64_t format) { return tilelab_emu_round_impl(x, (int32_t)format); }
float tilelab_emu_float_of_bits(uint32_t bits, int64_t format) { return tilelab_emu_from_bits(bits, (int32_t)format); }
uint32_t tilelab_emu_bits_of_float(float x, int64_t format) { return tilelab_emu_to_bits(x, (int32_t)format); }

}
""".replace("MAX_OOB", str(MAX_OOB))

_RUNTIME: ctypes.CDLL | None = None
_RUNTIME_LOCK = threading.Lock()


class EmulationError(TilelabError, ValueError):
    """A GPU kernel cannot run on the CPU: a construct with no tile-level meaning (the message
    names it and its line), an argument ``run`` does not take, or no C++ compiler."""


def runtime() -> ctypes.CDLL:
    """The emulation runtime (:mod:`._native`), loaded once per process."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is not None:
            return _RUNTIME
        rt = load_runtime(_RUNTIME_SOURCE, "emulation-runtime", EmulationError, "running a GPU kernel on the CPU")
        rt.tilelab_emu_oob_total.restype = ctypes.c_int64
        rt.tilelab_emu_oob_kept.restype = ctypes.c_int64
        rt.tilelab_emu_oobs.restype = ctypes.c_void_p
        rt.tilelab_emu_round.restype = ctypes.c_float
        rt.tilelab_emu_round.argtypes = [ctypes.c_float, ctypes.c_int64]
        rt.tilelab_emu_count_all_set.restype = ctypes.c_int64
        rt.tilelab_emu_differ.restype = ctypes.c_int64
        rt.tilelab_emu_differ.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint64,
                                          ctypes.c_void_p, ctypes.c_int64]
        rt.tilelab_emu_count_all_set.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint64]
        _RUNTIME = rt
        return rt


def compile_flags() -> list[str]:
    """The host compiler's options for an emulated kernel: optimised (TileLang builds target-c
    kernels unoptimised; -O1 runs a tile program as fast as -O2 here and compiles in about the time
    of -O0), with the rounding included inline (:data:`ROUNDING_HEADER`)."""
    from .._tilelang.emulate_intrinsics import RUNTIME_C  # the intrinsics rule's C (T.ieee_*, T.rng_*)
    from .._tilelang.emulate_tileops import RUNTIME_C as MAX_MIN_C  # the tile-ops rule's float max and min
    from ._native import header_file

    return ["-O1", "-include", header_file(ROUNDING_HEADER + RUNTIME_C + MAX_MIN_C, "emulation-rounding")]


def round_to_format(values: Sequence[float], dtype: str) -> list[float]:
    """The runtime's rounding of ``values`` to ``dtype`` (one of the adapter's narrow floats), each
    returned as a float: what an emulated kernel stores into a buffer of that dtype."""
    from .. import _tilelang

    code = _tilelang.NARROW_FLOATS[dtype]
    rt = runtime()
    return [float(rt.tilelab_emu_round(float(v), code)) for v in values]


@dataclass(frozen=True)
class OutOfBoundsAccess:
    """One access an emulated kernel made outside a buffer (it was not performed)."""

    buffer: str
    kind: str  # "read" or "write"
    block: tuple[int, int, int]
    index: tuple[int, ...]
    extent: tuple[int, ...]

    def describe(self) -> str:
        if self.kind in ("wait", "deadlock"):  # an mbarrier wait never satisfied: (element, parity, line)
            element, parity, line = self.index[:3]
            where = f" at line {line}" if line else ""
            if self.kind == "deadlock":
                return (f"a deadlock: every group of threads waits and none can arrive: waiting on {self.buffer}"
                        f"{f'[{element}]' if self.extent and self.extent[0] > 1 else ''} (parity {parity}){where}, "
                        f"in block {self.block}")
            return (f"this protocol needs its warp groups to run at the same time: waiting on {self.buffer}"
                    f"{f'[{element}]' if self.extent and self.extent[0] > 1 else ''} (parity {parity}){where} before "
                    f"any arrive completes its phase, in block {self.block}")
        side = "below its start" if any(i < 0 for i in self.index) else "past its end"
        return (f"{self.kind} of {self.buffer}[{', '.join(map(str, self.index))}] ({side}: {self.buffer} is "
                f"{' x '.join(map(str, self.extent))}) in block {self.block}")


def _read_oobs(rt: ctypes.CDLL, buffers: Sequence[str], barriers: Sequence[str] = ()
               ) -> tuple[int, list[OutOfBoundsAccess]]:
    import numpy as np

    total = int(rt.tilelab_emu_oob_total())
    kept = int(rt.tilelab_emu_oob_kept())
    if not total:
        return 0, []
    dtype = np.dtype([("buffer", "<i4"), ("kind", "<i4"), ("bx", "<i4"), ("by", "<i4"), ("bz", "<i4"),
                      ("rank", "<i4"), ("idx", "<i8", (6,)), ("extent", "<i8", (6,))])
    raw = (ctypes.c_char * (dtype.itemsize * kept)).from_address(rt.tilelab_emu_oobs())
    records = np.frombuffer(bytes(raw), dtype=dtype, count=kept)
    found = []
    for r in records:
        rank = int(r["rank"])
        b = int(r["buffer"])
        if b == PROTOCOL_BUFFER and int(r["kind"]) in (PROTOCOL_KIND, DEADLOCK_KIND):  # barrier, element, parity, line
            which = int(r["idx"][0])
            kind = "wait" if int(r["kind"]) == PROTOCOL_KIND else "deadlock"
            found.append(OutOfBoundsAccess(barriers[which] if 0 <= which < len(barriers) else "an mbarrier", kind,
                                           (int(r["bx"]), int(r["by"]), int(r["bz"])),
                                           tuple(int(i) for i in r["idx"][1:4]), (int(r["extent"][0]),)))
            continue
        name = buffers[b] if 0 <= b < len(buffers) else "a buffer TileLang made"
        found.append(OutOfBoundsAccess(name, "write" if int(r["kind"]) else "read",
                                       (int(r["bx"]), int(r["by"]), int(r["bz"])),
                                       tuple(int(i) for i in r["idx"][:rank]),
                                       tuple(int(e) for e in r["extent"][:rank])))
    return total, found


# ------------------------------------------------------------------------------------------
# In the worker process
# ------------------------------------------------------------------------------------------

_LOADED: dict[str, Any] = {}


def load_in_worker(key: str, payload: bytes) -> str:
    """Compile (TileLang's disk cache answers from the caller's compile) and keep the emulated
    kernel; its name."""
    from .. import _tilelang

    runtime()
    kernel = _LOADED.get(key)
    if kernel is None:
        _tilelang.tilelang()  # TileLang's operators are registered before its IR is unpickled
        func, configs = pickle.loads(payload)
        kernel = _LOADED[key] = _tilelang.compile_emulated(func, pass_configs=configs, compile_flags=compile_flags())
    return str(kernel.emulation.name)


def _empty_row_major(value: Any) -> Any:
    """An empty tensor (an extent the kernel was compiled with as 0, which a GPU launches) with the
    row-major strides of its shape, which TileLang's host code checks (torch gives an empty tensor
    strides of 1 where the later extents' product is 0); any other argument as it is."""
    shape = getattr(value, "shape", None)
    if shape is None or not hasattr(value, "numel") or value.numel() != 0:
        return value
    import torch

    strides, step = [], 1
    for extent in reversed(list(shape)):
        strides.append(step)
        step *= int(extent)
    return torch.empty_strided(tuple(shape), tuple(reversed(strides)), dtype=value.dtype, device=value.device)


def launch_in_worker(key: str, payload: bytes | None, args: list[Any], mask: Any
                     ) -> tuple[list[Any], Any, int, list[Any]]:
    """Launch the emulated kernel (loaded first from ``payload`` if this process lacks it) once on
    ``args`` (float32 where the GPU type has no CPU form) and the block mask; (the arguments after
    the launch, the mask with the kernel's "stored into" flags, how many accesses were out of
    bounds, those kept)."""
    if key not in _LOADED:
        if payload is None:
            raise EmulationError("the worker lost the emulated kernel; launch again")
        load_in_worker(key, payload)
    kernel = _LOADED[key]
    rt = runtime()
    rt.tilelab_emu_reset()
    kernel.compiled(*(_empty_row_major(a) for a in args), mask)
    total, kept = _read_oobs(rt, kernel.emulation.buffers, kernel.emulation.barriers)
    return args, mask, total, kept


# ------------------------------------------------------------------------------------------
# In the caller's process
# ------------------------------------------------------------------------------------------

@dataclass
class Emulated:
    """A GPU kernel prepared for the CPU: ``prepared`` describes the kernel as the GPU sees it (its
    parameters in their GPU dtypes, for inputs, poison and checks), ``kernel`` is the emulated
    compile, ``payload`` what the worker compiles it from."""

    prepared: Prepared
    kernel: Any
    key: str
    payload: bytes  # pickled (prim_func, pass_configs): unpickled once TileLang is imported there
    atomic: tuple[str, ...] = ()  # outputs written only by atomic adds: they start at zero
    written: tuple[str, ...] | None = None  # the tensors its code writes (None: unknown, any of them)




def prepare(kernel: Any, *, out_idx: Any = None, outputs: Sequence[str] | None = None,
            pass_configs: dict[str, Any] | None = None) -> Emulated:
    """``kernel`` (a TileLang kernel written for a GPU) compiled for the CPU here (so that a refusal
    or a lowering failure is raised in the caller's process) and described by its signature."""
    from .. import _tilelang
    from ..records.errors import LoweringError

    source = _tilelang.resolve_kernel(kernel)
    runtime()  # loaded first: TileLang opens the emulated kernel's library as it compiles it
    try:
        emulated = _tilelang.compile_emulated(kernel, pass_configs=pass_configs, compile_flags=compile_flags())
    except _tilelang.EmulationRefused as err:
        raise EmulationError(str(err)) from None
    except LoweringError:
        raise
    idx = [out_idx] if isinstance(out_idx, int) else out_idx
    params = _inputs.params_from_arguments(_tilelang.arguments(source, idx if idx is not None else source.out_idx))
    if not any(p.is_output for p in params):
        tensors = [p for p in params if p.kind == "tensor"]
        wanted = set(outputs) if outputs else ({tensors[-1].name} if tensors else set())
        unknown = wanted - {p.name for p in tensors}
        if unknown:
            raise ValueError(f"outputs {sorted(unknown)} are not tensor parameters of {source.name}: "
                             f"{[p.name for p in tensors]}")
        params = [dataclasses.replace(p, is_output=p.name in wanted) for p in params]  # strided kept
    prepared = Prepared(source.prim_func, source.name, params, EMULATED_BACKEND, source=kernel)
    key = _tilelang.emulation_key(source.prim_func) + repr(sorted((pass_configs or {}).items()))
    configs = {**source.pass_configs, **(pass_configs or {})}
    return Emulated(prepared, emulated, key, pickle.dumps((source.prim_func, configs)),
                    atomic=_tilelang.atomic_add_outputs(source.prim_func),
                    written=_tilelang.written_tensors(source.prim_func))


def parse_blocks(blocks: Any, grid: tuple[int, int, int], name: str) -> tuple[int, ...] | None:
    """``blocks=`` (None: all; one linear index; or a sequence of linear indices and (x, y[, z])
    tuples, as :func:`tilelab.timeline` takes them) as sorted linear
    indices; EmulationError with what to change where a block is outside the grid."""
    from ..instrument.decode import timeline as _timeline

    if blocks is None:
        return None
    items = [blocks] if isinstance(blocks, int) else list(blocks)
    if not items:
        raise EmulationError(f"{name}: blocks= is empty; give linear indices or (x, y, z) tuples, or None for every "
                             "block")
    try:
        return tuple(sorted({_timeline.block_index(b, grid) for b in items}))
    except (ValueError, TypeError) as err:
        raise EmulationError(f"{name}: {err}; blocks= takes a list of linear indices (x fastest) or of (x, y, z) "
                             f"tuples inside the grid {grid}") from None


def _shared_empty(shape: Sequence[int], dtype: Any) -> Any:
    """An uninitialised CPU tensor whose storage is shared memory from the start: handed to the
    worker process, it travels as a file descriptor, with no copy of its elements."""
    import torch

    count = 1
    for extent in shape:
        count *= int(extent)
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    try:
        storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
        return torch.empty(0, dtype=dtype).set_(storage, 0, tuple(int(e) for e in shape))
    except (AttributeError, RuntimeError, TypeError):  # a torch without it: ordinary memory, copied when sent
        return torch.empty(tuple(int(e) for e in shape), dtype=dtype)


def _working_copy(tensor: Any, dtype: str, copy: bool = False, bits: bool = False) -> Any:
    """The tensor as the emulated kernel takes it: its bits (an integer of its width: ``bits``, a
    narrow tensor the kernel decodes itself) or float32 where the GPU's type has no CPU form (always
    a copy then), a bool tensor's bytes as int8, else the tensor itself (or a copy, ``copy``).
    Copies are made in shared memory (:func:`_shared_empty`)."""
    import torch

    from .. import _tilelang

    if _inputs.PACKED_PER_BYTE.get(dtype, 1) > 1 and tensor.element_size() == 1:
        return _unpacked(tensor, dtype)
    if bits:
        view = tensor.view(_bits_dtype(tensor))
        out = _shared_empty(view.shape, view.dtype)
        out.copy_(view)
        return out
    if dtype in _tilelang.NARROW_FLOATS:
        out = _shared_empty(tensor.shape, torch.float32)
        out.copy_(tensor)
        return out
    if dtype == "bool":  # the emulated kernel takes a bool tensor's bytes, as int8 (the rule dtypes)
        view = tensor.view(torch.int8)
        if not copy:
            return view
        out = _shared_empty(view.shape, torch.int8)
        out.copy_(view)
        return out
    if not copy:
        return tensor
    out = _shared_empty(tensor.shape, tensor.dtype)
    out.copy_(tensor)
    return out


# float4_e2m1fn's 16 values by their bits (sign, 2 exponent bits with bias 1, 1 mantissa bit).
_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _unpacked(tensor: Any, dtype: str) -> Any:
    """A packed sub-byte tensor (its bytes, two elements each, element 2k in the low half of byte k:
    TileLang's layout) as the emulated kernel takes it: one element per value, of the logical shape
    (float32 values of float4_e2m1fn; the CPU path refuses 4-bit integer buffers), in shared memory."""
    import torch

    raw = tensor.view(torch.uint8).to(torch.int64)
    nibbles = torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(*tensor.shape[:-1], tensor.shape[-1] * 2)
    values = torch.tensor(_E2M1_VALUES, dtype=torch.float32)[nibbles]
    out = _shared_empty(values.shape, values.dtype)
    out.copy_(values)
    return out


def _bits_dtype(tensor: Any) -> Any:
    """The integer dtype of ``tensor``'s width (a narrow float passed as its bits)."""
    import torch

    return {1: torch.int8, 2: torch.int16}[tensor.element_size()]


def _atomic_start(tensor: Any, dtype: str) -> Any:
    """The work tensor of an output written only by atomic adds: zero. A float one starts at
    negative zero, which any add leaves (-0 + x is x, and -0 + 0 is +0), so an element whose bits
    are still -0 after the launch was never added to (:func:`_unadded_as_poison`)."""
    import torch

    from .. import _tilelang

    if dtype in _tilelang.NARROW_FLOATS:
        return _shared_empty(tensor.shape, torch.float32).fill_(-0.0)
    if tensor.is_floating_point():
        return tensor.fill_(-0.0)
    work = _working_copy(tensor, dtype)
    return work.zero_()


def _unadded_as_poison(result: Any) -> None:
    """The elements of an atomic output's float result still holding negative zero's bits (no
    block added to them) set to the poison, in place, as an unwritten element of any output is."""
    import torch

    words = {2: torch.int16, 4: torch.int32, 8: torch.int64}[result.element_size()]
    bits = result.view(words)
    negative_zero = torch.tensor(-0.0, dtype=result.dtype).view(words)
    poison = int.from_bytes(bytes([_inputs.POISON]) * result.element_size(), "little", signed=True)
    bits.masked_fill_(bits == negative_zero, poison)


def _written_index(unwritten: Any) -> tuple[Any, ...] | None:
    """The coordinates (one index tensor per dimension) of the elements not in ``unwritten``, when
    they are few (at most half the tensor); None when gathering them would cost more than a pass."""
    import torch

    written = unwritten.numel() - int(torch.count_nonzero(unwritten).item())
    if unwritten.dim() == 0 or written * 2 > unwritten.numel():
        return None
    flat = torch.nonzero(~unwritten.reshape(-1)).reshape(-1)
    return _unravel_all(flat, tuple(unwritten.shape))


def _written_of(out: Any) -> tuple[Any, ...] | None:
    """The coordinates of the elements of ``out`` that no longer hold :data:`_inputs.POISON`, when
    they are few (:func:`_written_index`), found by the runtime in one pass over a contiguous CPU
    tensor; None when they are many or the tensor is not such a one."""
    import torch

    size = out.element_size()
    if out.device.type != "cpu" or not out.is_contiguous() or size not in (1, 2, 4, 8) or out.dim() == 0:
        return None
    rt = runtime()
    word = int.from_bytes(bytes([_inputs.POISON]) * size, "little")
    cap = out.numel() // 2
    count = int(rt.tilelab_emu_differ(out.data_ptr(), out.numel(), size, word, None, 0))
    if count > cap:
        return None
    flat = torch.empty(count, dtype=torch.int64)
    rt.tilelab_emu_differ(out.data_ptr(), out.numel(), size, word, flat.data_ptr(), count)
    return _unravel_all(flat, tuple(out.shape))


def _unravel_all(flat: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    coords = []
    for extent in reversed(shape):
        coords.append(flat % max(extent, 1))
        flat = flat // max(extent, 1)
    return tuple(reversed(coords))


def _gather(tensor: Any, coords: tuple[Any, ...]) -> Any:
    """``tensor[coords]`` for any dtype (float8 read through its bytes)."""
    import torch

    if tensor.element_size() == 1 and tensor.dtype not in (torch.int8, torch.uint8, torch.bool):
        return tensor.view(torch.uint8)[coords].view(tensor.dtype)
    return tensor[coords]


def run(emulated: Emulated, tensors_or_shapes: Sequence[Any], opts: RunOptions, sizes: dict[str, int], *,
        blocks: Any = None, timeout: float | None = None, worker: Any = None,
        reason: str | None = None, native: bool = False) -> RunResult:
    """:func:`tilelab.run` of a GPU kernel on the CPU (see the module doc), launched in ``worker``
    (None: in this process); ``reason`` is said in the result's notes (why the CPU was chosen, when
    the caller did not ask). ``native``: a kernel written for the CPU (target ``c``), whose run is
    its own meaning, not an emulation: the result names TileLang's cython backend and the CPU."""
    # Long but whole: the launcher closure shares the run's copies, mask and flags with the checks after it.
    import torch

    from .. import _tilelang
    from ._cpu import cpu_name

    prepared = emulated.prepared
    notes: list[str] = [NATIVE_NOTE if native else EMULATED_NOTE + (f" ({reason})" if reason else "")]
    args, bound = _inputs.build_inputs(prepared.params, tensors_or_shapes, sizes, device="cpu", seed=opts.seed)
    launch = [p for p in prepared.params if p.passed_at_launch]
    inputs = [a for a, p in zip(args, launch) if not p.is_output]
    expected = reference(torch, opts.ref, inputs, opts.ref_dtype, notes) if opts.ref is not None else None
    # a grid sized by a scalar argument (T.Kernel(T.ceildiv(max_seqlen, 64))) reads it from the call
    scalars = {p.name: int(a) for a, p in zip(args, launch) if p.kind == "scalar" and hasattr(a, "__index__")}
    grid = _tilelang.emulated_grid(emulated.kernel.emulation, {**scalars, **bound})
    selected = parse_blocks(blocks, grid, prepared.name)
    count = grid[0] * grid[1] * grid[2]
    tensor_params = [p for p in prepared.params if p.kind == "tensor"]
    mask = torch.zeros(count + len(tensor_params), dtype=torch.int8)  # the blocks, then each tensor's flag
    if selected is None:
        mask[:count] = 1
    else:
        mask[list(selected)] = 1
    # Outputs the GPU kernel's launcher allocates (out_idx) are allocated here, so that they are poisoned too.
    full: list[Any] = []
    given = iter(args)
    for p in prepared.params:
        if p.passed_at_launch:
            full.append(next(given))
        else:
            shape = tuple(int(_inputs.eval_dim(d, bound)) for d in p.shape)
            full.append(torch.empty(shape, dtype=_inputs.torch_dtype(p.dtype)))
    out_positions = [i for i, p in enumerate(prepared.params) if p.is_output]
    in_positions = [i for i, p in enumerate(prepared.params) if p.kind == "tensor" and not p.is_output]
    # An input the kernel's code may store into is handed over as a copy (float32 where the GPU type
    # has no CPU form and the kernel does not take its bits): the caller's tensor stays as it was, so
    # it is compared with what the kernel left (its flag says whether it stored). One the code never
    # writes is handed over itself (its bits, or float32 copy), as the GPU's launch takes it.
    as_bits = {i for i, p in enumerate(prepared.params) if p.name in emulated.kernel.emulation.bits}
    written = emulated.written
    # a packed sub-byte tensor is read as its values (decoded from its half bytes); one the code stores
    # into is refused (its values are not packed back), so an output of this kind is never written
    packed = {i for i, p in enumerate(prepared.params)
              if p.kind == "tensor" and _inputs.PACKED_PER_BYTE.get(p.dtype, 1) > 1}
    for p in (prepared.params[i] for i in sorted(packed)):
        if written is None or p.name in written:
            raise EmulationError(
                f"{prepared.name}: {p.name} is a {p.dtype} tensor the kernel writes, packed two elements to "
                "a byte: the CPU run reads such a tensor (each element decoded from its half byte) but does not "
                "store into one. What still works: tilelab.inspect and a run on a GPU (tilelab.run without "
                "device=\"cpu\").")
    copies = {i: _working_copy(full[i], prepared.params[i].dtype, copy=True, bits=i in as_bits) for i in in_positions
              if written is None or prepared.params[i].name in written}
    timeout = RUN_TIMEOUT_S if timeout is None else timeout
    stored: list[Any] = []  # the "stored into" flags of the last launch
    inputs_after: list[Any] = []  # the inputs as the first launch left them

    def launcher(_prepared: Any, _args: Any, _bound: Any, pattern: int) -> tuple[list[Any], list[bool]]:
        work = []
        for i, (t, p) in enumerate(zip(full, prepared.params)):
            if p.is_output:
                _inputs.poison_(t, pattern)
            if i in copies:
                work.append(copies[i] if not inputs_after else _working_copy(full[i], p.dtype, copy=True,
                                                                             bits=i in as_bits))
            elif i in atomic:
                work.append(_atomic_start(t, p.dtype))
            elif i in as_bits:  # the tensor's bits, the output poisoned in place
                work.append(t.view(_bits_dtype(t)))
            elif p.is_output and p.dtype in _tilelang.NARROW_FLOATS and i not in packed:
                # a float32 copy of a poisoned output
                work.append(_inputs.poison_(_shared_empty(t.shape, torch.float32), _inputs.POISON))
            else:
                work.append(_working_copy(t, p.dtype) if p.kind == "tensor" else t)
        mask[count:] = 0
        after, flags, total, kept = _launch(worker, emulated, work, mask, timeout, bound)
        after = [a.view(full[i].dtype) if i in as_bits else a for i, a in enumerate(after)]
        waits = [k for k in kept if k.kind in ("wait", "deadlock")]
        if waits:
            raise protocol_error(prepared.name, waits)
        stored[:] = [bool(f) for f in flags[count:].tolist()]
        if not inputs_after:
            inputs_after.extend(after[i] for i in in_positions)
        outs = []
        for i in out_positions:
            res, dest = after[i], full[i]
            if i in packed and res.dtype != dest.dtype:  # never written (above): dest keeps the poison
                outs.append(dest)
                continue
            if i in atomic and res.is_floating_point():
                _unadded_as_poison(res)
            if res is not dest and res.data_ptr() != dest.data_ptr() and res.dtype != dest.dtype:
                # dest holds the poison pattern: only the elements the kernel wrote are converted into it
                unwritten = _inputs.unwritten_mask(res, _inputs.POISON)
                coords = _written_index(unwritten)
                if coords is None:
                    converted = res.to(dest.dtype)
                    words = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dest.element_size()]
                    keep = dest.view(words)
                    keep.copy_(torch.where(unwritten, keep, converted.view(words)))
                elif coords[0].numel():
                    values = res[coords].to(dest.dtype)
                    if dest.element_size() == 1 and dest.dtype not in (torch.int8, torch.uint8, torch.bool):
                        dest.view(torch.uint8)[coords] = values.view(torch.uint8)
                    else:
                        dest[coords] = values
            elif res.data_ptr() != dest.data_ptr():
                dest.copy_(res)
            outs.append(dest)
        if total:  # the outputs given keep what the kernel wrote in bounds; the error says where it went outside
            raise out_of_bounds_error(prepared.name, total, kept)
        # an integer output updated by atomic adds starts at 0: which elements were added to is unknown
        return outs, [not (i in atomic and not full[i].is_floating_point()) for i in out_positions]

    atomic = {i for i in out_positions if prepared.params[i].name in emulated.atomic}
    for i in sorted(atomic):
        name = prepared.params[i].name
        notes.append(f"{name} is written only by atomic adds, so it started at zero instead of the poison"
                     + (" (negative zero: an element no block added to still holds its bits, and counts as "
                        "unwritten)" if full[i].is_floating_point() else
                        " (an integer zero: elements no block added to cannot be told apart)"))
    outs, poisoned, seconds = _checks.poisoned_launches(launcher, prepared, args, bound, notes)
    if expected is not None and len(expected) != len(outs):
        raise ValueError(f"ref returned {len(expected)} tensors; {prepared.name} has {len(outs)} outputs "
                         f"({', '.join(p.name for p in prepared.outputs)})")
    if selected is not None:
        outs, expected, poisoned, compact = _only_written(prepared, outs, expected, poisoned, seconds, selected,
                                                          grid, notes)
    applied = [r for r in _tilelang.EMULATION_RULES if r.id in emulated.kernel.emulation.applied
               and not (native and r.id in ("blocks", "bounds"))]
    if applied:
        notes.append("rewritten for the CPU by the rules " + ", ".join(r.id for r in applied)
                     + " (tilelab.launch.EMULATION_RULES says what each does and why the meaning holds)")
    narrow = sorted(set(emulated.kernel.emulation.narrow.values()))
    if narrow:
        notes.append(f"{', '.join(narrow)} computed in float32 (the CPU's C has none), rounded to "
                     f"{'it' if len(narrow) == 1 else 'them'} at every cast and store; outputs compared at the GPU "
                     "type's tolerance")
    checks = _checks.check_outputs(prepared, bound, outs, expected, poisoned, seconds, notes,
                                   tolerance=opts.tolerance, worst=opts.worst, tile=opts.tile,
                                   unpoisoned="was checked only where the selected blocks wrote it")
    if selected is not None:
        checks = [_expanded(c, part, prepared, bound, opts.tile) for c, part in zip(checks, compact)]
    states = _input_states(prepared, full, in_positions, inputs_after, stored, tensor_params)
    inputs_state = _checks.inputs_after_launch([], checks, notes, states=states)
    return RunResult(kernel=prepared.name, outputs=tuple(checks), backend="cython" if native else EMULATED_BACKEND,
                     device=cpu_name() if native else f"{cpu_name()} (emulated)", sizes=tuple(sorted(bound.items())),
                     reference=getattr(opts.ref, "__name__", "ref") if opts.ref is not None else None,
                     notes=tuple(notes), inputs=inputs_state)


_EXPONENT_FIELDS = {"float16": 0x7C00, "bfloat16": 0x7F80, "float32": 0x7F800000, "float64": 0x7FF0000000000000}


def _count_nonfinite(tensor: Any) -> int:
    """:func:`_inputs.count_nonfinite`, in one pass of the runtime over a contiguous CPU tensor of an
    IEEE format (a large input's count costs a read of its bytes)."""
    field = _EXPONENT_FIELDS.get(str(tensor.dtype).replace("torch.", ""))
    if field is None or tensor.device.type != "cpu" or not tensor.is_contiguous():
        return _inputs.count_nonfinite(tensor)
    return int(runtime().tilelab_emu_count_all_set(tensor.data_ptr(), tensor.numel(), tensor.element_size(), field))


def _input_states(prepared: Prepared, full: list[Any], in_positions: list[int], after: list[Any],
                  stored: list[bool], tensor_params: list[Any]) -> tuple[Any, ...]:
    """Each input after the launch: compared element by element with the caller's tensor only if
    the kernel stored into it (its flag), which then takes what the kernel left (rounded to its
    dtype), as the GPU's launch would have; the NaN/inf it held before."""
    import torch

    from ..records.launch import InputState

    flag_of = {p.name: stored[k] if k < len(stored) else True for k, p in enumerate(tensor_params)}
    states = []
    for i, now in zip(in_positions, after):
        p, before = prepared.params[i], full[i]
        written = flag_of.get(p.name, True)
        held = now if not written else before  # an input never stored into holds what it was given
        nonfinite = _count_nonfinite(held)
        changed, first = 0, None
        if written:
            was = before.to(now.dtype)
            differ = (now != was) & ~(torch.isnan(now) & torch.isnan(was)) if now.is_floating_point() else now != was
            changed = int(torch.count_nonzero(differ).item())
            if changed:
                first = tuple(int(j) for j in torch.nonzero(differ)[0].tolist())
                before.copy_(now.to(before.dtype))
        states.append(InputState(p.name, changed, first, nonfinite))
    return tuple(states)


@dataclass
class _Compact:
    """An output checked on the elements the selected blocks wrote, gathered (``coords``, one
    index tensor per dimension); ``full`` and ``want`` are the whole output and its reference (None
    without one), for the tile map of a failure."""

    coords: tuple[Any, ...]
    shape: tuple[int, ...]
    full: Any
    want: Any
    unwritten: Any  # None: found by the runtime, made again for a failure's tile map


def _only_written(prepared: Prepared, outs: list[Any], expected: list[Any] | None, poisoned: list[bool],
                  seconds: list[Any], selected: tuple[int, ...], grid: tuple[int, int, int],
                  notes: list[str]) -> tuple[list[Any], list[Any] | None, list[bool], list[_Compact | None]]:
    """With ``blocks=``: only the elements the selected blocks wrote are checked. Where they are
    few, they are gathered (the check reads them alone: a two-block check of a large output costs
    what its tiles do); else the others take the reference's value (or zero), so that the
    comparison sees the blocks' work alone."""
    import torch

    new_outs: list[Any] = []
    new_expected: list[Any] | None = [] if expected is not None else None
    compact: list[_Compact | None] = []
    for i, (p, out) in enumerate(zip(prepared.outputs, outs)):
        fast = _written_of(out) if seconds[i] is None else None
        unwritten = None if fast is not None else _inputs.unwritten_mask(out) if seconds[i] is None else \
            _inputs.unwritten_in_both(out, seconds[i])
        want = expected[i] if expected is not None else None
        if want is not None:
            want = torch.as_tensor(want)
            if tuple(want.shape) != tuple(out.shape):
                try:
                    want = want.expand(out.shape)
                except RuntimeError as err:
                    raise ValueError(f"the reference for {p.name} has shape {list(want.shape)}, the output "
                                     f"{list(out.shape)}") from err
        coords = fast if unwritten is None else _written_index(unwritten)
        if coords is not None:
            written = int(coords[0].numel())
            compact.append(_Compact(coords, tuple(int(e) for e in out.shape), out, want, unwritten))
            new_outs.append(_gather(out, coords))
            if new_expected is not None:
                new_expected.append(_gather(want, coords))
        else:
            assert unwritten is not None  # the runtime's pass gives coordinates or leaves the mask to make
            written = unwritten.numel() - int(torch.count_nonzero(unwritten).item())
            compact.append(None)
            new_outs.append(_filled(out, unwritten, want))
            if new_expected is not None:
                new_expected.append(want)
        shown = ", ".join(map(str, selected[:8])) + (", ..." if len(selected) > 8 else "")
        if written:
            notes.append(f"blocks {shown} of {grid[0] * grid[1] * grid[2]} ran: they wrote {written} of "
                         f"{out.numel()} elements of {p.name}, and only those were checked")
        else:
            notes.append(f"blocks {shown} of {grid[0] * grid[1] * grid[2]} ran and wrote no element of {p.name}")
    return new_outs, new_expected, [False] * len(outs), compact


def _filled(out: Any, unwritten: Any, want: Any) -> Any:
    """A copy of ``out`` whose ``unwritten`` elements hold the reference's value (zero without one),
    in one pass (float8 through its bytes)."""
    import torch

    other = want.to(out.dtype) if want is not None else torch.zeros_like(out)
    if out.element_size() == 1 and out.dtype not in (torch.int8, torch.uint8, torch.bool):
        return torch.where(unwritten, other.view(torch.uint8), out.view(torch.uint8)).view(out.dtype)
    return torch.where(unwritten, other, out)


def _expanded(check: Any, part: _Compact | None, prepared: Prepared, bound: dict[str, int],
              tile: Sequence[int] | None) -> Any:
    """A check made on the gathered elements, said of the whole output: its shape, the indices it
    names, and the tile map of a failure (drawn from the whole output)."""
    if part is None:
        return check

    def index(at: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if at is None:
            return None
        return tuple(int(c[at[0]]) for c in part.coords)

    import dataclasses

    check = dataclasses.replace(
        check, shape=part.shape, tiles=None, first_nonfinite=index(check.first_nonfinite),
        first_ref_nan=index(check.first_ref_nan),
        worst=tuple(dataclasses.replace(w, index=index(w.index)) for w in check.worst))
    if not check.passed:
        unwritten = part.unwritten if part.unwritten is not None else _inputs.unwritten_mask(part.full)
        full = _filled(part.full, unwritten, part.want)
        check = dataclasses.replace(check, tiles=_checks.tile_map(prepared, check, full, part.want, False, None,
                                                                  bound, tile))
    return check


def launch_on_cpu(worker: _worker.Worker | None, name: str, key: str, payload: bytes,
                  load: Callable[[str, bytes], Any], launch: Callable[..., Any], args: Sequence[Any],
                  timeout: float, *, what: str = "the emulated kernel", resend: bool = False,
                  hint: str = ("a loop whose exit condition is never met, or a grid too large to emulate whole: pass "
                               "blocks= to run a few blocks, smaller sizes, or a larger timeout=")) -> Any:
    """The one way a CPU launch reaches the process it runs in (``run(device="cpu")`` and
    ``trace_tiles``): ``launch(key, payload, *args)`` there, after ``load(key, payload)`` made the
    kernel ready (its compile, once per process, under :data:`LOAD_TIMEOUT_S`: loading is not the
    launch). In ``worker`` (None: in this process, as it is), a launch past ``timeout`` seconds or a
    crash costs the worker, never this process, and ends in a :class:`KernelLaunchError` that says
    so (``what`` names the kernel there; ``hint`` says why a launch times out and what to change). ``launch`` is
    handed the payload again with ``resend`` (a process that may have dropped the kernel since its
    load compiles it again), else None."""
    if worker is None:
        return launch(key, payload, *args)
    try:
        if key not in worker.loaded or not worker.alive:
            worker.call(load, key, payload, timeout=LOAD_TIMEOUT_S, label=f"loading {name} for the CPU")
            worker.loaded.add(key)
        return worker.call(launch, key, payload if resend else None, *args, timeout=timeout,
                           label=f"{name} on the CPU")
    except _worker.WorkerTimeout as err:
        out = KernelLaunchError(name, "timeout", f"{what} gave no answer within {err.timeout:g} s on the CPU, "
                                "and its process was stopped", hint)
        out.isolated = True
        raise out from None
    except _worker.WorkerDied as err:
        out = KernelLaunchError(name, "launch_failure", f"{what}'s process died: {err}",
                                "a crash in the kernel's CPU code; the calling process is unharmed")
        out.isolated = True
        raise out from None


def _launch(worker: Any, emulated: Emulated, work: list[Any], mask: Any, timeout: float,
            bound: dict[str, int]) -> tuple[list[Any], Any, int, list[Any]]:
    result: tuple[list[Any], Any, int, list[Any]] = launch_on_cpu(
        worker, emulated.prepared.name, emulated.key, emulated.payload, load_in_worker, launch_in_worker,
        (work, mask), timeout)
    return result


def protocol_error(name: str, waits: Sequence[OutOfBoundsAccess]) -> KernelLaunchError:
    """The error of an emulated launch whose mbarrier protocol program order cannot satisfy."""
    if waits[0].kind == "deadlock":
        hint = ("the block's groups of threads took turns as its mbarriers let them, until each waited on a phase no "
                "arrive can complete (a missing or extra arrive, an arrive count that does not match the threads "
                "that arrive, a wrong parity): on a GPU this block would hang")
        more = f" (and {len(waits) - 1} more waiting)" if len(waits) > 1 else ""
    else:
        hint = ("on the CPU the block's T.ws regions run in the order they are written: a wait written before the "
                "arrive that completes its phase (a consumer before its producer, a missing arrive, a wrong parity) "
                "is never satisfied; on a GPU such a kernel would hang or rely on its warp groups running at once")
        more = f" (and {len(waits) - 1} more such waits)" if len(waits) > 1 else ""
    err = KernelLaunchError(name, "other", waits[0].describe() + more, hint)
    err.isolated = True
    err.protocol_waits = tuple(waits)  # type: ignore[attr-defined]
    return err


def out_of_bounds_error(name: str, total: int, kept: Sequence[OutOfBoundsAccess]) -> KernelLaunchError:
    """The error of an emulated launch that accessed memory outside a buffer (none was performed)."""
    shown = "; ".join(o.describe() for o in kept[:3])
    more = f", and {total - min(total, 3)} more" if total > 3 else ""
    err = KernelLaunchError(
        name, "illegal_address",
        f"{total} access{'es' if total != 1 else ''} outside a buffer on the CPU: {shown}{more} (none was performed)",
        "an index computed from the block index or a loop variable that runs outside the tensor or tile: look at "
        "the offsets of the copies and stores named above")
    err.isolated = True
    err.out_of_bounds = tuple(kept)  # type: ignore[attr-defined]
    err.out_of_bounds_total = total  # type: ignore[attr-defined]  # kept: the first MAX_OOB of them
    return err
