"""CUDA facts, each written once: arch limits, the driver's tensor-map enums, dtypes and their sizes.

Arch limits are the one table tilelab's occupancy maths reads.

Figures from the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability"
table and the allocation rules of the CUDA Occupancy Calculator (``cuda_occupancy.h``): registers
are allocated per warp in units of 256, in each of 4 SM sub-partitions; shared memory per block in
units of 128 bytes, plus 1 KiB the driver reserves for every block (compute capability 8.0 on).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ArchLimits:
    """What one streaming multiprocessor of a compute capability can hold at once."""

    compute_capability: str  # "9.0"
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, allocated per warp
    sub_partitions: int
    shared_memory_per_sm: int  # bytes, the largest carveout
    max_shared_memory_per_block: int  # bytes, with the opt-in attribute
    reserved_shared_memory_per_block: int  # bytes the driver keeps for each block
    shared_memory_allocation_unit: int  # bytes
    max_threads_per_block: int = 1024
    warp_size: int = 32

    def to_dict(self) -> dict:
        return asdict(self)


_KIB = 1024
ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_80": ArchLimits("8.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 164 * _KIB, 163 * _KIB, _KIB, 128),
    "sm_86": ArchLimits("8.6", 1536, 48, 16, 65536, 65536, 255, 256, 4, 100 * _KIB, 99 * _KIB, _KIB, 128),
    "sm_87": ArchLimits("8.7", 1536, 48, 16, 65536, 65536, 255, 256, 4, 164 * _KIB, 163 * _KIB, _KIB, 128),
    "sm_89": ArchLimits("8.9", 1536, 48, 24, 65536, 65536, 255, 256, 4, 100 * _KIB, 99 * _KIB, _KIB, 128),
    "sm_90": ArchLimits("9.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_100": ArchLimits("10.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_103": ArchLimits("10.3", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_120": ArchLimits("12.0", 1536, 48, 32, 65536, 65536, 255, 256, 4, 128 * _KIB, 99 * _KIB, _KIB, 128),
}


def arch_limits(arch: str) -> ArchLimits:
    """Limits for an arch name such as "sm_90a" (the a/f feature suffix does not change them)."""
    match = re.fullmatch(r"sm_(\d+)[af]?", str(arch))
    base = f"sm_{match.group(1)}" if match else None
    if base not in ARCH_LIMITS:
        raise ValueError(f"no published limits for arch {arch!r} in tilelab; known: {', '.join(ARCH_LIMITS)} "
                         "(with or without an a/f suffix)")
    return ARCH_LIMITS[base]


# --------------------------------------------------------------------------------------------
# Shared memory and matrix instructions. NVIDIA: CUDA C++ Programming Guide, "Shared Memory"
# (compute capability 5.x on: 32 banks, successive 32-bit words in successive banks), PTX ISA
# "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma: M is 64 per instruction, N a
# multiple of 8 up to 256, K 32 bytes; operands in 8-row x 16-byte core matrices) and the driver's
# cuTensorMapEncodeTiled (swizzles permute 16-byte chunks; the 128B pattern repeats every 1024 B).
# AMD: CDNA3 ISA (64-lane wavefronts; the LDS has 32 banks of 4 bytes).
# --------------------------------------------------------------------------------------------

WARP_SIZE = 32
WARPGROUP_THREADS = 4 * WARP_SIZE  # wgmma is issued by a warp group: 4 consecutive warps
SHARED_MEMORY_BANKS = 32
SHARED_MEMORY_BANK_BYTES = 4
SHARED_MEMORY_LINE_BYTES = SHARED_MEMORY_BANKS * SHARED_MEMORY_BANK_BYTES  # what one wavefront serves: 128
SWIZZLE_CHUNK_BYTES = 16  # the unit TMA swizzles permute; an ldmatrix row; a WGMMA core-matrix row
CHUNKS_PER_LINE = SHARED_MEMORY_LINE_BYTES // SWIZZLE_CHUNK_BYTES  # 8 chunks of 16 B in a 128-byte line
SWIZZLE_REPEAT_BYTES = 1024  # the 128B swizzle repeats every 8 lines of 128 B (the alignment it needs)
SWIZZLE_REPEAT_ROWS = SWIZZLE_REPEAT_BYTES // SHARED_MEMORY_LINE_BYTES  # 8
CORE_MATRIX_ROWS = 8  # a WGMMA / ldmatrix core matrix: 8 rows of 16 bytes
WGMMA_M = 64  # rows of M one wgmma.mma_async instruction computes (its A operand's MN extent)
WGMMA_MAX_N = 256
WGMMA_K_BYTES = 32  # every wgmma shape reads 32 bytes of K (k16 f16, k8 tf32, k32 fp8)
CDNA_WAVEFRONT_LANES = 64
CDNA_LDS_BANKS = 32
CDNA_LDS_BANK_BYTES = 4


# Warp-wide matrix instructions (PTX ISA, "Warp-level matrix instructions"): which element of which
# matrix each lane holds. ``lane`` and the element number may be ints or integer expressions (// and %).
# ldmatrix.sync.aligned.m8n8.x{1,2,4}.b16: lanes 8m..8m+7 give the addresses of matrix m's 8 rows (16
# bytes each); lane t then holds, of each matrix m, two 16-bit elements: those of row t // 4, columns
# 2 (t % 4) and 2 (t % 4) + 1 (.trans: column t // 4 of rows 2 (t % 4) and 2 (t % 4) + 1).
LDMATRIX_ROWS = 8  # rows of one 8x8 matrix, each an address a lane gives
LDMATRIX_COUNTS = (1, 2, 4)  # matrices per instruction (.x1, .x2, .x4)


def ldmatrix_element(lane: Any, h: int, trans: bool) -> tuple[Any, Any]:
    """(row, column) of one 8x8 matrix that element ``h`` (0 or 1) of ``lane``'s register holds."""
    if trans:
        return 2 * (lane % 4) + h, lane // 4
    return lane // 4, 2 * (lane % 4) + h


# mma.sync.aligned.m16n8k16.row.col with 16-bit A and B (f16, bf16) and f16 or f32 C/D: element i of a
# lane's fragment is (row, column) of its matrix; groupID = lane // 4, threadID_in_group = lane % 4.
MMA_M16N8K16 = {"m": 16, "n": 8, "k": 16, "a": 8, "b": 4, "c": 4}  # the shape, elements per lane of A, B, C


def mma_m16n8k16_a(lane: Any, i: int) -> tuple[Any, Any]:
    """A (16 x 16, row-major): a0, a1, a4, a5 in row groupID, the others 8 rows below; columns
    2 threadID_in_group + (i & 1), 8 further for i >= 4."""
    return lane // 4 + 8 * ((i // 2) % 2), 2 * (lane % 4) + (i % 2) + 8 * (i // 4)


def mma_m16n8k16_b(lane: Any, i: int) -> tuple[Any, Any]:
    """B (16 x 8, "col"): rows (k) 2 threadID_in_group + (i & 1), 8 further for i >= 2; column groupID."""
    return 2 * (lane % 4) + (i % 2) + 8 * (i // 2), lane // 4


def mma_m16n8k16_c(lane: Any, i: int) -> tuple[Any, Any]:
    """C and D (16 x 8): c0, c1 in row groupID, c2, c3 8 rows below; columns 2 threadID_in_group + (i & 1)."""
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + (i % 2)


# --------------------------------------------------------------------------------------------
# The driver's tensor-map enumerators (cuda.h), in declaration order so a value indexes its name;
# prefixes stripped ("128B" is CU_TENSOR_MAP_SWIZZLE_128B).
# --------------------------------------------------------------------------------------------

TMA_DTYPES = (
    "UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32", "FLOAT64",
    "BFLOAT16", "FLOAT32_FTZ", "TFLOAT32", "TFLOAT32_FTZ", "16U4_ALIGN8B", "16U4_ALIGN16B",
    "16U6_ALIGN16B",
)
TMA_INTERLEAVES = ("NONE", "16B", "32B")
TMA_SWIZZLES = ("NONE", "32B", "64B", "128B", "128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B")
TMA_L2_PROMOTIONS = ("NONE", "L2_64B", "L2_128B", "L2_256B")
TMA_OOB_FILLS = ("NONE", "NAN_REQUEST_ZERO_FMA")

TMA_ENUMS: dict[str, tuple[str, ...]] = {
    "dtype": TMA_DTYPES, "interleave": TMA_INTERLEAVES, "swizzle": TMA_SWIZZLES,
    "l2_promotion": TMA_L2_PROMOTIONS, "oob_fill": TMA_OOB_FILLS,
}
# The C spelling of each enum, for messages: (cuTensorMapEncode* parameter, C type, value prefix).
TMA_ENUM_C: dict[str, tuple[str, str, str]] = {
    "dtype": ("tensorDataType", "CUtensorMapDataType", "CU_TENSOR_MAP_DATA_TYPE_"),
    "interleave": ("interleave", "CUtensorMapInterleave", "CU_TENSOR_MAP_INTERLEAVE_"),
    "swizzle": ("swizzle", "CUtensorMapSwizzle", "CU_TENSOR_MAP_SWIZZLE_"),
    "l2_promotion": ("l2Promotion", "CUtensorMapL2promotion", "CU_TENSOR_MAP_L2_PROMOTION_"),
    "oob_fill": ("oobFill", "CUtensorMapFloatOOBfill", "CU_TENSOR_MAP_FLOAT_OOB_FILL_"),
}


def tma_enum_name(kind: str, value: Any) -> str:
    """The enumerator name of a driver value (``tma_enum_name("swizzle", 3) == "128B"``);
    ``UNKNOWN(n)`` for a value outside the table."""
    table = TMA_ENUMS[kind]
    try:
        index = int(value)
    except (TypeError, ValueError):
        return f"UNKNOWN({value})"
    return table[index] if 0 <= index < len(table) else f"UNKNOWN({index})"


# Element sizes of CUtensorMapDataType values (bytes; packed sub-byte types count as the
# 16-byte-aligned container the driver describes them with: 16 4-bit values in 8 bytes).
TMA_DTYPE_BYTES: dict[str, float] = {
    "UINT8": 1, "UINT16": 2, "UINT32": 4, "INT32": 4, "UINT64": 8, "INT64": 8,
    "FLOAT16": 2, "FLOAT32": 4, "FLOAT64": 8, "BFLOAT16": 2, "FLOAT32_FTZ": 4,
    "TFLOAT32": 4, "TFLOAT32_FTZ": 4, "16U4_ALIGN8B": 0.5, "16U4_ALIGN16B": 0.5,
    "16U6_ALIGN16B": 0.75,
}
# The bytes a swizzle pattern repeats over (its span; NONE has none).
SWIZZLE_SPAN_BYTES: dict[str, int | None] = {
    "NONE": None, "32B": 32, "64B": 64, "128B": 128,
    "128B_ATOM_32B": 128, "128B_ATOM_32B_FLIP_8B": 128, "128B_ATOM_64B": 128,
}

# --------------------------------------------------------------------------------------------
# Element dtypes: TileLang/torch spelling is canonical; every other spelling is an alias.
# --------------------------------------------------------------------------------------------

DTYPE_BYTES: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "tfloat32": 4, "float64": 8,
    "float8_e4m3": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "bool": 1,
}
DTYPE_ALIASES: dict[str, str] = {
    "fp16": "float16", "half": "float16", "f16": "float16", "bf16": "bfloat16",
    "fp32": "float32", "float": "float32", "f32": "float32", "tf32": "tfloat32",
    "custom[tfloat32]": "tfloat32",  # how TVM prints TileLang's tf32 type
    "fp64": "float64", "double": "float64", "fp8": "float8_e4m3", "e4m3": "float8_e4m3",
    "e5m2": "float8_e5m2", "float8_e4m3fn": "float8_e4m3",  # TileLang's float8_e4m3 is the fn format
    "s8": "int8", "u8": "uint8", "s32": "int32",
    # the driver's CUtensorMapDataType names
    "FLOAT16": "float16", "BFLOAT16": "bfloat16", "FLOAT32": "float32", "TFLOAT32": "tfloat32",
    "FLOAT64": "float64", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "INT32": "int32",
    "UINT64": "uint64", "INT64": "int64", "FLOAT32_FTZ": "float32", "TFLOAT32_FTZ": "tfloat32",
}


# PTX instruction facts (NVIDIA's PTX ISA, "Instruction Set"), read by the CPU path's table of PTX
# semantics (tilelab/_tilelang/emulate_ptx.py).
# prmt.b32 with a mode: the two low bits of c choose a row; the row names the source byte (of the
# 8 bytes {b, a}, a's low byte 0) of each result byte, listed d.b3 d.b2 d.b1 d.b0 as the ISA does.
PTX_PRMT_MODES: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "f4e": ((3, 2, 1, 0), (4, 3, 2, 1), (5, 4, 3, 2), (6, 5, 4, 3)),  # forward 4 extract
    "b4e": ((5, 6, 7, 0), (6, 7, 0, 1), (7, 0, 1, 2), (0, 1, 2, 3)),  # backward 4 extract
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),  # replicate 8
    "ecl": ((3, 2, 1, 0), (3, 2, 1, 1), (3, 2, 2, 2), (3, 3, 3, 3)),  # edge clamp left
    "ecr": ((0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 1, 0), (3, 2, 1, 0)),  # edge clamp right
    "rc16": ((1, 0, 1, 0), (3, 2, 3, 2), (1, 0, 1, 0), (3, 2, 3, 2)),  # replicate 16
}
# lop3.b32's immLut is the truth table of F(a, b, c) evaluated on these three constants.
PTX_LOP3_OPERANDS = (0xF0, 0xCC, 0xAA)
# The binary float formats PTX computes in or converts to: (stored mantissa bits, exponent bits,
# bias, has an infinity, the canonical NaN's bits). f16 and bf16 arithmetic returns the canonical
# NaN; the fp8 e4m3 format has no infinity (its only NaN is S.1111.111), e5m2 has IEEE's.
PTX_FLOAT_FORMATS: dict[str, tuple[int, int, int, bool, int]] = {
    "f16": (10, 5, 15, True, 0x7FFF),
    "bf16": (7, 8, 127, True, 0x7FFF),
    "e4m3": (3, 4, 7, False, 0x7F),
    "e5m2": (2, 5, 15, True, 0x7F),
    "f32": (23, 8, 127, True, 0x7FFFFFFF),
}


def _dtype_text(dtype: Any) -> str:
    return str(dtype).replace("torch.", "").replace("T.", "").strip()


def normalize_dtype(dtype: Any, *, strict: bool = True) -> str:
    """The canonical dtype name (``"float16"``) from TileLang, torch, numpy or driver spellings.

    An unknown name raises ``ValueError`` naming the accepted ones; with ``strict=False`` it comes
    back as written (minus a ``torch.`` prefix), for callers that pass other types through."""
    text = _dtype_text(dtype)
    for candidate in (text, text.lower()):
        if candidate in DTYPE_BYTES:
            return candidate
        if candidate in DTYPE_ALIASES:
            return DTYPE_ALIASES[candidate]
    if not strict:
        return text
    raise ValueError(
        f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)} "
        f"(aliases such as fp16, bf16, tf32, e4m3 are accepted)"
    )


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element; an unknown dtype raises ``ValueError`` (never a guessed size)."""
    return DTYPE_BYTES[normalize_dtype(dtype)]


__all__ = [
    "ARCH_LIMITS", "ArchLimits", "arch_limits",
    "WARP_SIZE", "WARPGROUP_THREADS", "SHARED_MEMORY_BANKS", "SHARED_MEMORY_BANK_BYTES", "SHARED_MEMORY_LINE_BYTES",
    "SWIZZLE_CHUNK_BYTES",
    "CHUNKS_PER_LINE", "SWIZZLE_REPEAT_BYTES", "SWIZZLE_REPEAT_ROWS", "CORE_MATRIX_ROWS", "WGMMA_M", "WGMMA_MAX_N",
    "WGMMA_K_BYTES", "CDNA_WAVEFRONT_LANES", "CDNA_LDS_BANKS", "CDNA_LDS_BANK_BYTES",
    "TMA_DTYPES", "TMA_INTERLEAVES", "TMA_SWIZZLES", "TMA_L2_PROMOTIONS", "TMA_OOB_FILLS", "TMA_ENUMS",
    "TMA_ENUM_C", "tma_enum_name", "TMA_DTYPE_BYTES", "SWIZZLE_SPAN_BYTES",
    "DTYPE_BYTES", "DTYPE_ALIASES", "normalize_dtype", "dtype_bytes",
    "PTX_PRMT_MODES", "PTX_LOP3_OPERANDS", "PTX_FLOAT_FORMATS",
]
