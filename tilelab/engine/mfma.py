"""AMD matrix cores (MFMA) and the LDS bank model, read from generated HIP source. Pure Python.

Everything here is computed from the HIP C++ text TileLang generates (the ground truth for what
the GPU runs): each ``__builtin_amdgcn_mfma_*`` call becomes an :class:`~tilelab.MfmaInstruction`
and each LDS read that fills an MFMA operand becomes an :class:`~tilelab.LdsRead`, with its
64-lane access pattern evaluated from the index expression TileLang emitted.

Per-lane operand layouts (AMD "CDNA3 Instruction Set Architecture", section 7.1 "Dependent
arithmetic instructions: MFMA", the register layout tables of the single-block
``V_MFMA_*_{16x16,32x32}`` forms; the same maps TileLang's ``rocm/intrinsics/mfma_layout.py``
encodes). For an M x N x K instruction on a 64-lane wavefront:

* A (M x K): lane ``l`` holds row ``l % M`` and the ``M*K/64`` consecutive k values starting at
  ``(l // M) * (M*K/64)``.
* B (K x N): lane ``l`` holds column ``l % N`` and the ``N*K/64`` consecutive k values starting at
  ``(l // N) * (N*K/64)``.
* C/D (M x N): lane ``l`` holds column ``l % N``; its ``i``-th of ``M*N/64`` values is row
  ``(i // 4) * (4 * G) + (l // N) * 4 + i % 4`` with ``G = 64 // N`` lane groups.

LDS bank model (CDNA2/CDNA3 "Local Data Share": 64 KiB per CU in 32 banks, each 4 bytes wide, so
the LDS delivers 128 bytes per clock). A ``ds_read``/``ds_write`` of ``W`` bytes per lane is served
in phases of ``128 // W`` consecutive lanes (W <= 4: 32 lanes, so two phases per 64-lane wave;
``ds_read_b64``: 16 lanes, four phases; ``ds_read_b128``: 8 lanes, eight phases). In a phase,
each bank delivers one 4-byte word per clock and lanes reading the same word share it; a phase
takes as many clocks as the most distinct words any one bank must deliver. Conflict degree =
clocks / phases (1 = conflict-free). This is a model: it is what tilelab computes, and real
hardware may pair lanes differently for 16-byte accesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._tilelang.source import (
    LDS_LOOP,
    LDS_SCALAR_READ,
    LDS_VECTOR_READ,
    MFMA_INTRINSIC,
    kernel_at,
    kernel_spans,
    mfma_calls,
    operand_buffer,
    shared_buffers,
)
from ..cuda_facts import CDNA_LDS_BANK_BYTES, CDNA_LDS_BANKS, CDNA_WAVEFRONT_LANES

LDS_BANKS = CDNA_LDS_BANKS
LDS_BANK_BYTES = CDNA_LDS_BANK_BYTES
WAVE_LANES = CDNA_WAVEFRONT_LANES

# Operand type spellings in MFMA intrinsic names -> (A dtype, B dtype).
_IN_TYPES = {
    "f16": ("float16", "float16"), "bf16": ("bfloat16", "bfloat16"), "bf16_1k": ("bfloat16", "bfloat16"),
    "f32": ("float32", "float32"), "xf32": ("tfloat32", "tfloat32"), "f64": ("float64", "float64"),
    "i8": ("int8", "int8"), "fp8_fp8": ("float8_e4m3", "float8_e4m3"), "fp8_bf8": ("float8_e4m3", "float8_e5m2"),
    "bf8_fp8": ("float8_e5m2", "float8_e4m3"), "bf8_bf8": ("float8_e5m2", "float8_e5m2"),
    "f8f6f4": ("fp8/fp6/fp4 (by cbsz/blgp)", "fp8/fp6/fp4 (by cbsz/blgp)"),
}
_OUT_TYPES = {"f32": "float32", "i32": "int32", "f64": "float64"}
_VARIANTS = {"mfma": "dense", "mfma_scale": "scaled (gfx950)", "smfmac": "sparse (smfmac)"}

INTRINSIC = MFMA_INTRINSIC


@dataclass(frozen=True)
class MfmaShape:
    """What an MFMA intrinsic's name says."""

    intrinsic: str
    variant: str
    m: int
    n: int
    k: int
    a_dtype: str
    b_dtype: str
    accum_dtype: str


def parse_intrinsic(name: str) -> MfmaShape:
    """``__builtin_amdgcn_mfma_f32_16x16x16f16`` -> its shape and types; ValueError if not MFMA."""
    match = INTRINSIC.match(name if name.endswith("(") else name + "(")
    if not match:
        raise ValueError(f"{name!r} is not an AMD MFMA intrinsic (__builtin_amdgcn_mfma_<out>_<M>x<N>x<K><in>)")
    a, b = _IN_TYPES.get(match["in"], (match["in"], match["in"]))
    return MfmaShape(
        intrinsic=name.rstrip("("), variant=_VARIANTS[match["op"]], m=int(match["m"]), n=int(match["n"]),
        k=int(match["k"]), a_dtype=a, b_dtype=b, accum_dtype=_OUT_TYPES[match["out"]],
    )


# --------------------------------------------------------------------------------------------
# Per-lane layouts
# --------------------------------------------------------------------------------------------


def _check(m: int, n: int, k: int) -> None:
    if (m * k) % WAVE_LANES or (n * k) % WAVE_LANES or (m * n) % WAVE_LANES or WAVE_LANES % n or WAVE_LANES % m:
        raise ValueError(f"{m}x{n}x{k} is not a single-block MFMA shape on 64 lanes; its lane layout is not modelled")


def lane_elements(role: str, m: int, n: int, k: int, lane: int) -> list[tuple[int, int]]:
    """The (row, column) of every element ``lane`` holds for operand ``role`` ("A", "B", "C").

    A: (row m, column k); B: (row k, column n); C: (row m, column n). See the module docstring.
    """
    _check(m, n, k)
    if not 0 <= lane < WAVE_LANES:
        raise ValueError(f"lane {lane} is outside a 64-lane wavefront")
    if role == "A":
        per = m * k // WAVE_LANES
        return [(lane % m, (lane // m) * per + i) for i in range(per)]
    if role == "B":
        per = n * k // WAVE_LANES
        return [((lane // n) * per + i, lane % n) for i in range(per)]
    if role == "C":
        groups = WAVE_LANES // n
        return [((i // 4) * 4 * groups + (lane // n) * 4 + i % 4, lane % n) for i in range(m * n // WAVE_LANES)]
    raise ValueError(f"operand role {role!r}: choose A, B or C")


def lane_layout_text(role: str, m: int, n: int, k: int) -> str:
    """One line saying what each lane holds, e.g. "lane l: row l % 16, k 4*(l // 16) .. +3"."""
    try:
        _check(m, n, k)
    except ValueError:
        return "not modelled (multi-block shape)"
    if role == "A":
        per = m * k // WAVE_LANES
        return f"lane l: row l % {m}, k {per}*(l // {m}) .. +{per - 1}"
    if role == "B":
        per = n * k // WAVE_LANES
        return f"lane l: column l % {n}, k {per}*(l // {n}) .. +{per - 1}"
    groups = WAVE_LANES // n
    values = m * n // WAVE_LANES
    if values <= 4:
        return f"lane l: column l % {n}, rows 4*(l // {n}) .. +{values - 1}"
    return f"lane l: column l % {n}, value i at row {4 * groups}*(i // 4) + 4*(l // {n}) + i % 4 (i < {values})"


# --------------------------------------------------------------------------------------------
# The LDS bank model
# --------------------------------------------------------------------------------------------


def lanes_per_phase(width_bytes: int) -> int:
    """Lanes the LDS serves together for accesses of ``width_bytes`` per lane (see the module doc)."""
    if width_bytes <= 0:
        raise ValueError("an access moves at least one byte")
    return max(1, min(WAVE_LANES, (LDS_BANKS * LDS_BANK_BYTES) // max(width_bytes, LDS_BANK_BYTES)))


def phase_clocks(byte_addresses: list[int], width_bytes: int) -> tuple[int, ...]:
    """Clocks each phase of one 64-lane LDS access takes under the CDNA bank model."""
    per = lanes_per_phase(width_bytes)
    clocks = []
    for start in range(0, len(byte_addresses), per):
        per_bank: dict[int, set[int]] = {}
        for addr in byte_addresses[start:start + per]:
            for word in range(addr // LDS_BANK_BYTES, (addr + width_bytes - 1) // LDS_BANK_BYTES + 1):
                per_bank.setdefault(word % LDS_BANKS, set()).add(word)
        clocks.append(max((len(s) for s in per_bank.values()), default=1))
    return tuple(clocks)


# --------------------------------------------------------------------------------------------
# LDS reads under the bank model (the HIP text itself is read by tilelab._tilelang.source)
# --------------------------------------------------------------------------------------------


# The vector types a HIP LDS access moves, in bytes.
_WIDTHS = {"uint4": 16, "int4": 16, "float4": 16, "uint2": 8, "int2": 8, "float2": 8, "uint1": 4, "uint": 4,
           "int": 4, "float": 4, "half_t": 2, "half": 2, "bfloat16_t": 2, "short": 2, "uchar": 1, "int8_t": 1,
           "char": 1, "float16x4": 8, "bfloat16x4": 8, "float16x8": 16, "fp8_e4_t": 1, "fp8_e5_t": 1,
           "long": 8, "int64_t": 8}
_ELEMENT_BYTES = {"half_t": 2, "bfloat16_t": 2, "float": 4, "int8_t": 1, "fp8_e4_t": 1, "fp8_e5_t": 1,
                  "double": 8, "int": 4, "uint8_t": 1, "signed char": 1, "char": 1, "unsigned char": 1,
                  "uchar": 1}


def access_width(type_name: str) -> int:
    """Bytes one lane moves with a HIP access of ``type_name`` (0 when unknown)."""
    if type_name in _WIDTHS:
        return _WIDTHS[type_name]
    packed = re.fullmatch(r"fp8_e[45]_(\d+)_t", type_name)  # TileLang's packed fp8 vectors
    return int(packed.group(1)) if packed else _ELEMENT_BYTES.get(type_name, 0)


def _python_expr(c_expr: str) -> str:
    text = re.sub(r"\(\(int\)threadIdx\.x\)", "tx", c_expr)
    text = re.sub(r"\(int\)threadIdx\.x", "tx", text)
    text = re.sub(r"\(\(int\)(?:threadIdx|blockIdx)\.[xyz]\)", "0", text)
    text = text.replace("/", "//")
    if re.search(r"[^\w\s()+\-*%<>&|^/]", text):
        raise ValueError(f"cannot evaluate {c_expr!r}")
    return text


def lds_operand_reads(source: str, operand_buffers: set[str]) -> list[dict[str, Any]]:
    """LDS reads that fill the registers of an MFMA operand, with each lane's byte address.

    The index expression is TileLang's, evaluated for lanes 0..63 (``threadIdx.x`` = lane, the
    first wavefront) with the enclosing loops' variables at every value (up to 64 combinations);
    ``clocks`` is the worst combination's phase clocks under the CDNA bank model.
    """
    shared = shared_buffers(source)
    spans = kernel_spans(source)
    reads: list[dict[str, Any]] = []
    loops: list[tuple[str, int, int]] = []  # (var, extent, brace depth at its body)
    depth = 0
    offset = 0
    for number, line in enumerate(source.split("\n"), start=1):
        loop = LDS_LOOP.search(line)
        match = LDS_VECTOR_READ.match(line)
        if match and match.group(2) in operand_buffers and match.group(5) in shared:
            width, dest, element, buffer, expr = (access_width(match.group(1)), match.group(2),
                                                  match.group(4), match.group(5), match.group(6))
        else:
            scalar = LDS_SCALAR_READ.match(line)
            if scalar and scalar.group(1) in operand_buffers and scalar.group(3) in shared:
                dest, element, buffer, expr = scalar.group(1), scalar.group(2), scalar.group(3), scalar.group(4)
                width = _ELEMENT_BYTES.get(element, 0)
            else:
                dest = None
        if dest is not None and width:
            record = _evaluate_read(expr, [(v, e) for v, e, _ in loops], width, _ELEMENT_BYTES.get(element, 0),
                                    shared[buffer])
            if record is not None:
                reads.append({"kernel": kernel_at(spans, offset), "buffer": buffer, "destination": dest,
                              "width_bytes": width, "line": number, "expression": expr.strip(), **record})
        depth += line.count("{") - line.count("}")
        if loop and "{" in line:
            loops.append((loop.group(1), int(loop.group(2)), depth))
        while loops and depth < loops[-1][2]:
            loops.pop()
        offset += len(line) + 1
    return reads


def _evaluate_read(expr: str, loops: list[tuple[str, int]], width: int, element_bytes: int,
                   base: int) -> dict[str, Any] | None:
    if not element_bytes:
        return None
    try:
        code = compile(_python_expr(expr), "<lds index>", "eval")
    except (ValueError, SyntaxError):
        return None
    names = set(code.co_names) - {"tx"}
    free = [(v, e) for v, e in loops if v in names]
    if names - {v for v, _ in free}:
        return None  # depends on something other than the lane and the enclosing loops
    combos: list[dict[str, int]] = [{}]
    for var, extent in free:
        combos = [{**c, var: i} for c in combos for i in range(extent)]
    if len(combos) > 64:
        combos = combos[:64]
    worst: tuple[int, ...] | None = None
    first: list[int] = []
    for env in combos:
        addresses = [base + element_bytes * int(eval(code, {"__builtins__": {}}, {**env, "tx": lane}))
                     for lane in range(WAVE_LANES)]
        clocks = phase_clocks(addresses, width)
        if not first:
            first = addresses
        if worst is None or sum(clocks) > sum(worst):
            worst = clocks
    assert worst is not None
    return {"byte_addresses": tuple(first), "phase_clocks": worst, "loop_variables": tuple(v for v, _ in free)}


# --------------------------------------------------------------------------------------------
# Records for a report
# --------------------------------------------------------------------------------------------


def mfma_instructions(source: str) -> list[Any]:
    """One :class:`~tilelab.MfmaInstruction` per distinct (kernel, intrinsic, operands) in the source."""
    from ..records.kernel import MfmaInstruction

    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for call in mfma_calls(source):
        buffers = tuple(operand_buffer(op) for op in call["operands"]) + ("?",) * (3 - len(call["operands"]))
        grouped.setdefault((call["kernel"], call["intrinsic"], buffers[:3]), []).append(call)
    result = []
    for (kernel, intrinsic, buffers), calls in grouped.items():
        shape = parse_intrinsic(intrinsic)
        result.append(MfmaInstruction(
            intrinsic=intrinsic, variant=shape.variant, m=shape.m, n=shape.n, k=shape.k,
            a_dtype=shape.a_dtype, b_dtype=shape.b_dtype, accum_dtype=shape.accum_dtype,
            a_operand=buffers[0], b_operand=buffers[1], accumulator=buffers[2],
            a_lanes=lane_layout_text("A", shape.m, shape.n, shape.k),
            b_lanes=lane_layout_text("B", shape.m, shape.n, shape.k),
            c_lanes=lane_layout_text("C", shape.m, shape.n, shape.k),
            count=len(calls), kernel=kernel, lines=tuple(c["line"] for c in calls),
        ))
    return result


def lds_reads(source: str, instructions: list[Any]) -> list[Any]:
    """The LDS reads that fill the A/B operand registers of ``instructions``, as records."""
    from ..records.kernel import LdsRead

    operands = {b for i in instructions for b in (i.a_operand, i.b_operand)}
    return [LdsRead(buffer=r["buffer"], destination=r["destination"], width_bytes=r["width_bytes"],
                    expression=r["expression"], byte_addresses=r["byte_addresses"], phase_clocks=r["phase_clocks"],
                    loop_variables=r["loop_variables"], line=r["line"], kernel=r["kernel"])
            for r in lds_operand_reads(source, operands)]


def with_lds_sources(instructions: list[Any], reads: list[Any]) -> list[Any]:
    """Each instruction with the LDS buffers its A and B registers are loaded from."""
    import dataclasses

    source = {(r.kernel, r.destination): r.buffer for r in reads}
    return [dataclasses.replace(i, a_lds=source.get((i.kernel, i.a_operand)), b_lds=source.get((i.kernel, i.b_operand)))
            for i in instructions]
