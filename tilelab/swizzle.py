"""Shared-memory maths of Hopper kernels: TMA swizzle modes, WGMMA descriptors, bank conflicts.

Pure numpy; needs no TileLang, GPU or IPython. Every result is a frozen dataclass with
``to_dict`` so it can be saved, diffed and drawn by :mod:`tilelab.render.svg`. It is one module of
about 1,000 lines because its parts (swizzle modes, WGMMA descriptors, bank conflicts) are one
model: each is computed from the same address map below, which lives in one place.

The model of a shared tile (:class:`SharedTile`) is the one the TMA unit writes and TileLang
0.1.15 infers for WGMMA operands:

* a logical ``rows x cols`` tile, ``cols`` contiguous (row-major), of one dtype;
* with a swizzle of span ``S`` bytes the tile is cut into *panels* ``S`` bytes wide (one TMA box
  each); panel ``p`` holds columns ``[p*S/e, (p+1)*S/e)`` and is stored contiguously, panel after
  panel, each row of a panel ``S`` bytes after the previous one;
* the swizzle then permutes bytes *by address*: ``addr ^ (((addr >> 7) & mask) << shift)``,
  the XOR of CuTe's ``Swizzle<B, M, S>``. For the 16-byte-atom modes this is
  "16-byte chunk index XOR (address bits 7 and up)", i.e. for 128-byte rows: chunk XOR row % 8
  (128B), chunk XOR (row / 2) % 4 (64B, rows of 64 B), chunk XOR (row / 4) % 2 (32B, rows of 32 B).

TileLang writes the same maps per element rather than per byte (its "full/half/quarter bank"
layouts): ``make_full_bank_swizzled_layout`` on an fp16 tile is 8 rows x 64 elements per atom with
``(col // 8) XOR (row % 8)``; for fp32 it is 8 x 32 with ``(col // 4) XOR (row % 8)``; the three
XOR terms it prints (``(_j // 32 + _i % 8 // 4) % 2 * 32 + ...``) are the three bits of that one
XOR. Its column panels come first in the output shape (``_j // 64``), exactly the panel-major
order above. ``tests/test_swizzle_compiler.py`` checks this element by element.

Without a swizzle WGMMA needs each 8-row x 16-byte core matrix as 128 contiguous bytes: mode
``INTERLEAVE`` stores the tile so (core-matrix blocks, ``core_order`` "rows" or "chunks"); a
row-major ``NONE`` tile is readable only when it is 16 bytes wide, where the two coincide.

Why addresses and not elements: the hardware (TMA, WGMMA) swizzles absolute shared-memory
addresses, which is why a buffer must be aligned to the pattern's repeat (1024 B for 128B) and why
the same mode means different element tables for different dtypes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cuda_facts import (
    CORE_MATRIX_ROWS,
    DTYPE_BYTES,
    SHARED_MEMORY_BANK_BYTES,
    SHARED_MEMORY_BANKS,
    SHARED_MEMORY_LINE_BYTES,
    SWIZZLE_CHUNK_BYTES,
    SWIZZLE_SPAN_BYTES,
    WARP_SIZE,
    WGMMA_K_BYTES,
    WGMMA_M,
    WGMMA_MAX_N,
    dtype_bytes,
    normalize_dtype,
)

# The hardware facts this module reads, under its own short names (from tilelab.cuda_facts).
BANKS = SHARED_MEMORY_BANKS
BANK_BYTES = SHARED_MEMORY_BANK_BYTES
LINE_BYTES = SHARED_MEMORY_LINE_BYTES  # one wavefront serves at most one 128-byte line per bank set
CHUNK_BYTES = SWIZZLE_CHUNK_BYTES  # the unit of TMA swizzles, ldmatrix rows, WGMMA core-matrix rows

# What wgmma.mma_async reads from shared memory (PTX ISA 9.7.15). Transposed (MN-major) operands
# exist only for .f16/.bf16 ("imm-trans-a/b ... only valid for .f16/.bf16 types").
WGMMA_INPUT_DTYPES = ("float16", "bfloat16", "tfloat32", "float32", "float8_e4m3", "float8_e5m2",
                      "int8", "uint8")
WGMMA_MN_MAJOR_DTYPES = ("float16", "bfloat16")


# --------------------------------------------------------------------------------------------
# Swizzle modes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SwizzleMode:
    """One ``CUtensorMapSwizzle`` mode as an address map.

    ``physical = addr ^ (((addr >> 7) & (2**xor_bits - 1)) << atom_shift)``, plus, for the
    FLIP_8B variant, bit 3 flipped on odd 128-byte lines. The atom variants (sm_100 TMA) are
    taken from the driver's one-line definitions ("swizzle 32B chunks within 128B span",
    "additionally swap lower 8B with upper 8B within each 16B for every alternate row") and CuTe's
    ``Layout_*_SW128_32B_Atom`` = ``Swizzle<2,5,2>``; ATOM_64B is the same construction with
    64-byte chunks (``Swizzle<1,6,1>``). They were not measured on hardware here.
    """

    name: str
    span_bytes: int | None  # None: no swizzle
    atom_bytes: int = 16
    tma_enum: int | None = 0  # CUtensorMapSwizzle value; None: no TMA swizzle writes it in one box
    layout_type: int | None = None  # WGMMA descriptor layout_type field; None: WGMMA cannot read it
    flip_8b: bool = False
    cute: str = ""

    @property
    def atom_shift(self) -> int:
        return int(self.atom_bytes).bit_length() - 1

    @property
    def xor_bits(self) -> int:
        if not self.span_bytes:
            return 0
        return (self.span_bytes // self.atom_bytes).bit_length() - 1

    @property
    def repeat_bytes(self) -> int:
        """Bytes after which the pattern repeats; also the base alignment it needs."""
        if not self.span_bytes:
            return CHUNK_BYTES
        return LINE_BYTES << self.xor_bits

    @property
    def is_swizzled(self) -> bool:
        return bool(self.span_bytes)

    def apply(self, addr: Any) -> Any:
        """Swizzle byte addresses (numpy arrays or ints). The map is its own inverse."""
        a = np.asarray(addr, dtype=np.int64)
        if self.is_swizzled:
            a = a ^ (((a >> 7) & ((1 << self.xor_bits) - 1)) << self.atom_shift)
            if self.flip_8b:
                a = a ^ (((a >> 7) & 1) << 3)
        return a if a.ndim else int(a)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "span_bytes": self.span_bytes, "atom_bytes": self.atom_bytes,
            "tma_enum": self.tma_enum, "layout_type": self.layout_type, "flip_8b": self.flip_8b,
            "repeat_bytes": self.repeat_bytes, "cute": self.cute,
        }


MODES: dict[str, SwizzleMode] = {
    m.name: m for m in (
        SwizzleMode("NONE", None, 16, 0, 0, cute="Swizzle<0,4,3>"),
        # WGMMA's no-swizzle canonical layout: no XOR, but every 8-row x 16-byte core matrix is
        # one contiguous 128-byte block (CuTe Layout_K_INTER_Atom / Layout_MN_INTER_Atom).
        SwizzleMode("INTERLEAVE", None, 16, None, 0, cute="Swizzle<0,4,3> o 8x16-byte core-matrix blocks"),
        SwizzleMode("32B", 32, 16, 1, 3, cute="Swizzle<1,4,3>"),
        SwizzleMode("64B", 64, 16, 2, 2, cute="Swizzle<2,4,3>"),
        SwizzleMode("128B", 128, 16, 3, 1, cute="Swizzle<3,4,3>"),
        SwizzleMode("128B_ATOM_32B", 128, 32, 4, None, cute="Swizzle<2,5,2>"),
        SwizzleMode("128B_ATOM_32B_FLIP_8B", 128, 32, 5, None, flip_8b=True,
                    cute="Swizzle<2,5,2> + bit 3 ^= bit 7"),
        SwizzleMode("128B_ATOM_64B", 128, 64, 6, None, cute="Swizzle<1,6,1>"),
    )
}
WGMMA_MODES = ("NONE", "32B", "64B", "128B")
_LAYOUT_TYPE_TO_MODE: dict[int, str] = {}
for _m in MODES.values():  # layout_type 0 names NONE first: row-major and INTERLEAVE agree on 16-byte-wide tiles
    if _m.layout_type is not None:
        _LAYOUT_TYPE_TO_MODE.setdefault(_m.layout_type, _m.name)


def swizzle_mode(mode: Any) -> SwizzleMode:
    """Look a mode up by name (``"128B"``, ``"SWIZZLE_128B"``, ``"CU_TENSOR_MAP_SWIZZLE_128B"``,
    ``"none"``), by driver enum value (0-6) or pass a :class:`SwizzleMode` through."""
    if isinstance(mode, SwizzleMode):
        return mode
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):
        for m in MODES.values():
            if m.tma_enum == int(mode):
                return m
    elif mode is None:
        return MODES["NONE"]
    else:
        key = str(mode).upper().replace("CU_TENSOR_MAP_SWIZZLE_", "").replace("SWIZZLE_", "")
        key = {"INTER": "INTERLEAVE", "LINEAR": "NONE", "0": "NONE", "128": "128B", "64": "64B", "32": "32B",
               "FULL": "128B", "HALF": "64B", "QUARTER": "32B"}.get(key, key)
        if key in MODES:
            return MODES[key]
    raise ValueError(f"unknown swizzle mode {mode!r}: use one of {', '.join(MODES)} (or the driver's enum 0-6)")


def mode_for_layout_type(layout_type: int) -> SwizzleMode:
    """The swizzle a WGMMA descriptor's ``layout_type`` field names (0 none, 1 128B, 2 64B, 3 32B).

    0 gives ``NONE`` (row-major), which equals ``INTERLEAVE`` on the 16-byte-wide tiles TileLang
    0.1.15 feeds WGMMA without a swizzle; ask for ``INTERLEAVE`` by name for wider tiles."""
    if layout_type not in _LAYOUT_TYPE_TO_MODE:
        raise ValueError(f"WGMMA layout_type {layout_type} is not one of 0 (none), 1 (128B), 2 (64B), 3 (32B)")
    return MODES[_LAYOUT_TYPE_TO_MODE[layout_type]]


def default_swizzle(inner_bytes: int) -> str:
    """The widest swizzle span that divides a contiguous extent of ``inner_bytes`` bytes.

    This is TileLang 0.1.15's rule (``GemmWGMMA.infer_shared_layout``: 128B if the extent is a
    multiple of 8 x 16 bytes, else 64B, 32B, else linear) *applied to the extent TileLang
    measures*, which is not always the tile's row: see :func:`wgmma_operand_swizzle`."""
    for name in ("128B", "64B", "32B"):
        span = SWIZZLE_SPAN_BYTES[name]
        if span is not None and inner_bytes % span == 0:
            return name
    return "NONE"


def select_wgmma_inst_n(warp_col_tiles: int) -> int:
    """The N of the wgmma instruction TileLang 0.1.15 issues for a warp's ``warp_col_tiles``
    columns (port of ``wgmma_macro_generator.select_wgmma_inst_n``): the widest multiple of 16 up
    to 256 that divides it, else ``gcd(warp_col_tiles, 256)``."""
    import math

    fallback = math.gcd(int(warp_col_tiles), WGMMA_MAX_N)
    if warp_col_tiles % 16:
        return fallback
    for cand in range(WGMMA_MAX_N, fallback, -16):
        if warp_col_tiles % cand == 0:
            return cand
    return fallback


def wgmma_operand_swizzle(dtype: Any, major: str, *, k: int | None = None, inst_mn: int | None = None) -> str:
    """The swizzle TileLang 0.1.15 infers for a shared WGMMA operand (``GemmWGMMA.infer_layout``).

    TileLang feeds :func:`default_swizzle` the operand's *continuity*: the tile's K extent ``k``
    (elements) for a K-major operand, but for an MN-major one the MN extent of **one
    instruction**, ``inst_mn``: 64 for A, and for B the instruction's N, which is
    ``select_wgmma_inst_n(N // n_warp)`` with ``n_warp`` from TileLang's C++ warp partition
    (``GemmWarpPolicyComputeWarpPartition``). A report has that N as the ``wgmma`` instruction's
    ``n``. Example: the im2col convolution's ``kernel_shared`` is 64x64 fp16 (128-byte rows), but 8
    warps split N=64 in two, the instruction is m64n32k16, the continuity is 32 fp16 = 64 bytes,
    so TileLang picks 64B, not the 128B the row width alone would give.
    """
    e = dtype_bytes(dtype)
    major = str(major).upper().replace("_MAJOR", "")
    if major == "K":
        if k is None:
            raise ValueError("a K-major operand's swizzle follows its K extent: pass k=")
        return default_swizzle(int(k) * e)
    if major != "MN":
        raise ValueError(f"major must be 'K' or 'MN', got {major!r}")
    if inst_mn is None:
        raise ValueError("an MN-major operand's swizzle follows the instruction's M (A: 64) or N (B): pass inst_mn=")
    return default_swizzle(int(inst_mn) * e)


# --------------------------------------------------------------------------------------------
# Shared tiles
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedTile:
    """A ``rows x cols`` row-major tile in shared memory under one swizzle mode.

    ``base`` is the tile's shared-memory address in bytes (only its residue matters): it must be
    16-byte aligned and, when swizzled, aligned to the pattern's repeat, because the hardware
    XORs absolute address bits and TileLang writes WGMMA descriptors with base_offset 0.
    Construction validates and raises ``ValueError`` saying what to change.

    ``swizzle="INTERLEAVE"`` is WGMMA's no-swizzle canonical layout: the tile is cut into core
    matrices of 8 rows x 16 bytes, each stored as 128 contiguous bytes (row ``r % 8`` at
    ``16 * (r % 8)``); ``core_order`` says how the blocks follow each other: ``"rows"`` (the
    8-row blocks of one 16-byte column first, then the next column: CuTe's ``tile_to_shape`` of
    ``Layout_K_INTER_Atom`` over an ``(MN, K)`` tile) or ``"chunks"`` (the 16-byte columns of one
    8-row band first: ``Layout_MN_INTER_Atom`` over a ``(K, MN)`` tile).
    """

    rows: int
    cols: int
    dtype: str = "float16"
    swizzle: str = "128B"
    base: int = 0
    core_order: str = "rows"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        object.__setattr__(self, "swizzle", swizzle_mode(self.swizzle).name)
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
            object.__setattr__(self, name, int(value))
        mode, e, row_bytes = self.mode, self.element_bytes, self.row_bytes
        if mode.is_swizzled:
            span = int(mode.span_bytes or 0)
            fit = default_swizzle(row_bytes)
            if row_bytes < span:
                raise ValueError(
                    f"a {self.rows}x{self.cols} {self.dtype} tile has {row_bytes}-byte rows, narrower than "
                    f"the {span}-byte span of the {mode.name} swizzle: use swizzle={fit!r} (the widest span "
                    f"its rows fill, TileLang's choice) or at least {span // e} columns"
                )
            if row_bytes % span:
                raise ValueError(
                    f"a {self.rows}x{self.cols} {self.dtype} tile has {row_bytes}-byte rows, not a whole number "
                    f"of {span}-byte {mode.name} panels: make cols a multiple of {span // e} or use "
                    f"swizzle={fit!r}"
                )
            if self.panels > 1 and (self.rows * span) % mode.repeat_bytes:
                raise ValueError(
                    f"{self.panels} panels of {self.rows} rows x {span} B would start off the "
                    f"{mode.repeat_bytes}-byte pattern repeat: make rows a multiple of "
                    f"{mode.repeat_bytes // span} or use one panel"
                )
        if mode.name == "INTERLEAVE":
            if self.core_order not in ("rows", "chunks"):
                raise ValueError(f"core_order must be 'rows' or 'chunks', got {self.core_order!r}")
            if self.rows % CORE_MATRIX_ROWS or row_bytes % CHUNK_BYTES:
                raise ValueError(
                    f"an INTERLEAVE tile is made of 8-row x 16-byte core matrices: a {self.rows}x{self.cols} "
                    f"{self.dtype} tile needs rows a multiple of 8 and cols a multiple of {CHUNK_BYTES // e}"
                )
        if self.base % CHUNK_BYTES:
            raise ValueError(
                f"base address {self.base} is not 16-byte aligned: TMA, ldmatrix, 16-byte vector accesses "
                f"and WGMMA descriptors (address >> 4) all need 16 B; align the buffer to "
                f"{max(mode.repeat_bytes, 128)} bytes"
            )
        if mode.is_swizzled and self.base % mode.repeat_bytes:
            raise ValueError(
                f"base address {self.base} is not aligned to the {mode.repeat_bytes}-byte repeat of the "
                f"{mode.name} swizzle (off by {self.base % mode.repeat_bytes} B): the XOR takes address bits "
                f"7 and up, so row 0 would get another row's pattern, and a WGMMA descriptor with "
                f"base_offset 0 (what TileLang writes) would read the wrong bytes; align the buffer to "
                f"{mode.repeat_bytes} bytes"
            )

    # -- geometry ----------------------------------------------------------------------------
    @property
    def mode(self) -> SwizzleMode:
        return MODES[self.swizzle]

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def row_bytes(self) -> int:
        return self.cols * self.element_bytes

    @property
    def panel_bytes(self) -> int:
        """Width of one panel row in bytes: the span when swizzled, the whole row otherwise."""
        return self.mode.span_bytes or self.row_bytes  # (no span: not swizzled)

    @property
    def panel_cols(self) -> int:
        return self.panel_bytes // self.element_bytes

    @property
    def panels(self) -> int:
        return self.row_bytes // self.panel_bytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    # -- maps --------------------------------------------------------------------------------
    def _check_index(self, row: Any, col: Any) -> tuple[Any, Any]:
        r, c = np.asarray(row, dtype=np.int64), np.asarray(col, dtype=np.int64)
        if (r < 0).any() or (r >= self.rows).any() or (c < 0).any() or (c >= self.cols).any():
            raise ValueError(f"index out of the {self.rows}x{self.cols} tile: row {row!r}, col {col!r}")
        return r, c

    @property
    def core_matrix_strides(self) -> tuple[int, int]:
        """Bytes from one 8-row x 16-byte core matrix to the next (down 8 rows, across 16 bytes),
        before the swizzle. For swizzled tiles 'across' is 16 inside a panel."""
        if self.mode.name == "INTERLEAVE":
            block = CORE_MATRIX_ROWS * CHUNK_BYTES  # one core matrix: 128 contiguous bytes
            blocks_down, blocks_across = self.rows // CORE_MATRIX_ROWS, self.row_bytes // CHUNK_BYTES
            if self.core_order == "rows":
                return block, blocks_down * block
            return blocks_across * block, block
        return CORE_MATRIX_ROWS * self.panel_bytes, CHUNK_BYTES

    def linear_byte_offset(self, row: Any, col: Any) -> Any:
        """Byte offset before the swizzle (panel-major, rows ``panel_bytes`` apart; INTERLEAVE:
        core-matrix blocks of 128 bytes)."""
        r, c = self._check_index(row, col)
        e, w = self.element_bytes, self.panel_cols
        if self.mode.name == "INTERLEAVE":
            down, across = self.core_matrix_strides
            byte = c * e
            lin = ((r // CORE_MATRIX_ROWS) * down + (byte // CHUNK_BYTES) * across
                   + (r % CORE_MATRIX_ROWS) * CHUNK_BYTES + byte % CHUNK_BYTES)
        else:
            lin = (c // w) * (self.rows * self.panel_bytes) + r * self.panel_bytes + (c % w) * e
        return lin if lin.ndim else int(lin)

    def byte_offset(self, row: Any, col: Any) -> Any:
        """Physical byte offset from the tile base of logical element ``(row, col)``."""
        lin = np.asarray(self.linear_byte_offset(row, col), dtype=np.int64)
        phys = np.asarray(self.mode.apply(lin + self.base), dtype=np.int64) - self.base
        return phys if phys.ndim else int(phys)

    def element_offset(self, row: Any, col: Any) -> Any:
        """Physical element offset: what the compiler's inferred layout maps ``(row, col)`` to."""
        off = np.asarray(self.byte_offset(row, col)) // self.element_bytes
        return off if off.ndim else int(off)

    def bank(self, row: Any, col: Any) -> Any:
        """Bank (0-31) of the 4-byte word holding the element's first byte."""
        b = ((np.asarray(self.byte_offset(row, col)) + self.base) // BANK_BYTES) % BANKS
        return b if b.ndim else int(b)

    def chunk(self, row: Any, col: Any) -> Any:
        """Physical 16-byte chunk (0-7) within its 128-byte line: which 4-bank group it hits."""
        ch = ((np.asarray(self.byte_offset(row, col)) + self.base) // CHUNK_BYTES) % (LINE_BYTES // CHUNK_BYTES)
        return ch if ch.ndim else int(ch)

    def logical(self, byte_offset: Any) -> tuple[Any, Any]:
        """Inverse map: the logical ``(row, col)`` stored at a physical byte offset."""
        phys = np.asarray(byte_offset, dtype=np.int64)
        if (phys < 0).any() or (phys >= self.nbytes).any():
            raise ValueError(f"byte offset {byte_offset!r} is outside the tile's {self.nbytes} bytes")
        lin = np.asarray(self.mode.apply(phys + self.base), dtype=np.int64) - self.base
        if self.mode.name == "INTERLEAVE":
            block, within = lin // (CORE_MATRIX_ROWS * CHUNK_BYTES), lin % (CORE_MATRIX_ROWS * CHUNK_BYTES)
            blocks_down, blocks_across = self.rows // CORE_MATRIX_ROWS, self.row_bytes // CHUNK_BYTES
            if self.core_order == "rows":
                band, chunk = block % blocks_down, block // blocks_down
            else:
                band, chunk = block // blocks_across, block % blocks_across
            r = band * CORE_MATRIX_ROWS + within // CHUNK_BYTES
            c = (chunk * CHUNK_BYTES + within % CHUNK_BYTES) // self.element_bytes
            return (r, c) if r.ndim else (int(r), int(c))
        panel_size = self.rows * self.panel_bytes
        p, rem = lin // panel_size, lin % panel_size
        r = rem // self.panel_bytes
        c = p * self.panel_cols + (rem % self.panel_bytes) // self.element_bytes
        return (r, c) if r.ndim else (int(r), int(c))

    def grid(self) -> tuple[Any, Any]:
        return np.meshgrid(np.arange(self.rows), np.arange(self.cols), indexing="ij")

    def offsets(self) -> Any:
        """Physical element offsets of every logical element, shape ``(rows, cols)``."""
        r, c = self.grid()
        return self.element_offset(r, c)

    def to_layout(self, buffer: str = "tile") -> Any:
        """This tile as the report model's shared :class:`~tilelab.records.kernel.Layout`."""
        from .records.kernel import Layout

        return Layout(buffer=buffer, scope="shared", dtype=self.dtype, shape=(self.rows, self.cols),
                      offsets=tuple(int(v) for v in self.offsets().ravel()),
                      description=f"tilelab {self.swizzle} swizzle, {self.panels} panel(s) of {self.panel_cols} columns"
                      + (f", core matrices in {self.core_order} order" if self.swizzle == "INTERLEAVE" else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "cols": self.cols, "dtype": self.dtype, "swizzle": self.swizzle,
                "base": self.base, "core_order": self.core_order, "element_bytes": self.element_bytes,
                "row_bytes": self.row_bytes,
                "panel_cols": self.panel_cols, "panels": self.panels, "nbytes": self.nbytes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SharedTile:
        return cls(int(d["rows"]), int(d["cols"]), d.get("dtype", "float16"), d.get("swizzle", "128B"),
                   int(d.get("base", 0)), d.get("core_order", "rows"))


def match_layout(layout: Any, modes: Iterable[str] = tuple(MODES)) -> SharedTile | None:
    """The :class:`SharedTile` whose offsets equal a 2-D shared ``Layout``'s, or None.

    Lets a report's Layouts tab say "this is the 128B swizzle" without trusting the compiler's text.
    """
    if getattr(layout, "scope", None) != "shared" or len(layout.shape) != 2 or not layout.offsets:
        return None
    try:
        dtype = normalize_dtype(layout.dtype)
    except ValueError:
        return None
    want = np.asarray(layout.offsets, dtype=np.int64).reshape(layout.shape)
    head = min(want.shape[0], 16)  # every mode repeats within 8 rows: a cheap first filter
    candidates = [(name, order) for name in modes
                  for order in (("rows", "chunks") if swizzle_mode(name).name == "INTERLEAVE" else ("rows",))]
    for name, order in candidates:
        try:
            tile = SharedTile(layout.shape[0], layout.shape[1], dtype, name, core_order=order)
        except ValueError:
            continue
        r, c = np.indices((head, tile.cols))  # the row and the column of each of the first rows' elements
        if np.array_equal(tile.element_offset(r, c), want[:head]) and np.array_equal(tile.offsets(), want):
            return tile
    return None


# --------------------------------------------------------------------------------------------
# WGMMA operand descriptors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreMatrix:
    """One 8-row x 16-byte core matrix an instruction reads.

    ``mn``/``k`` index it in core-matrix units (K-major: 8 MN rows by 16 B of K; MN-major: 16 B of
    MN by 8 K rows). ``row_bytes`` are the physical byte offsets of its eight 16-byte rows and
    ``cells`` the logical tile ``(row, first col)`` of each, in the same order.
    """

    mn: int
    k: int
    row_bytes: tuple[int, ...]
    cells: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"mn": self.mn, "k": self.k, "row_bytes": list(self.row_bytes), "cells": [list(c) for c in self.cells]}


@dataclass(frozen=True)
class WgmmaDescriptor:
    """The shared-memory matrix descriptor of one WGMMA operand, computed by tilelab.

    ``lbo``/``sbo`` are encoded as the descriptor holds them (bytes >> 4), like
    ``tl::initialize_wgmma_descriptor<LAYOUT, LBO, SBO>``. Where the PTX ISA leaves a field unused
    (LBO of a swizzled K-major operand; LBO of a one-panel MN-major operand) the value is what
    CuTe and TileLang write (1 and 0), and ``notes`` says so.
    """

    operand: str  # "A" or "B"
    major: str  # "K" or "MN"
    tile: SharedTile
    layout_type: int
    lbo_bytes: int
    sbo_bytes: int
    mn: int  # MN extent one instruction reads (64 for A)
    k_step: int  # which 32-byte K step of the tile
    mn_offset: int
    start_byte: int  # physical byte offset of the descriptor's start address in the tile
    core_matrices: tuple[CoreMatrix, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def lbo(self) -> int:
        return self.lbo_bytes >> 4

    @property
    def sbo(self) -> int:
        return self.sbo_bytes >> 4

    @property
    def swizzle(self) -> str:
        return self.tile.swizzle

    def agrees_with(self, operand: Any) -> bool:
        """Whether a compiler's descriptor (a report's ``WgmmaOperand``) encodes the same layout
        type, LBO and SBO (in the descriptor's 16-byte units) as this one."""
        return (self.layout_type, self.lbo, self.sbo) == (operand.layout_type, operand.lbo, operand.sbo)

    def to_operand(self, buffer: str | None = None) -> Any:
        """As the report model's :class:`~tilelab.records.kernel.WgmmaOperand` (for direct comparison)."""
        from .records.kernel import WgmmaOperand

        return WgmmaOperand(buffer=buffer, layout_type=self.layout_type, lbo=self.lbo, sbo=self.sbo, major=self.major)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operand": self.operand, "major": self.major, "tile": self.tile.to_dict(),
            "layout_type": self.layout_type, "swizzle": self.swizzle, "lbo": self.lbo, "sbo": self.sbo,
            "lbo_bytes": self.lbo_bytes, "sbo_bytes": self.sbo_bytes, "mn": self.mn, "k_step": self.k_step,
            "mn_offset": self.mn_offset, "start_byte": self.start_byte,
            "core_matrices": [c.to_dict() for c in self.core_matrices], "notes": list(self.notes),
        }


def _canonical_byte(desc_start_lin: int, mode: SwizzleMode, major: str, lbo: int, sbo: int,
                    mn_unit: int, k_unit: int, span: int) -> int:
    """Byte address of one core-matrix row by the PTX ISA canonical layouts (CuTe make_gmma_desc).

    K-major:  mn_unit = MN row, k_unit = 16-byte K chunk;  MN-major: mn_unit = 16-byte MN chunk,
    k_unit = K row. Addresses are formed unswizzled, then the swizzle is applied to the address.
    """
    rows = CORE_MATRIX_ROWS
    if major == "K":
        if mode.is_swizzled:
            addr = desc_start_lin + (mn_unit // rows) * sbo + (mn_unit % rows) * span + k_unit * CHUNK_BYTES
        else:
            addr = desc_start_lin + (mn_unit // rows) * sbo + (mn_unit % rows) * CHUNK_BYTES + k_unit * lbo
    else:
        if mode.is_swizzled:
            w = span // CHUNK_BYTES
            addr = (desc_start_lin + (mn_unit // w) * lbo + (mn_unit % w) * CHUNK_BYTES + (k_unit // rows) * sbo
                    + (k_unit % rows) * span)
        else:
            addr = desc_start_lin + mn_unit * sbo + (k_unit // rows) * lbo + (k_unit % rows) * CHUNK_BYTES
    return int(mode.apply(addr))


def wgmma_descriptor(tile: SharedTile, major: str = "K", *, operand: str = "A", mn: int | None = None,
                     k_step: int = 0, mn_offset: int = 0) -> WgmmaDescriptor:
    """Descriptor fields and core matrices of a WGMMA operand stored as ``tile``.

    ``major="K"``: the tile is ``(MN, K)`` with K contiguous (A as ``(M, K)``, B stored ``(N, K)``).
    ``major="MN"``: the tile is ``(K, MN)`` with MN contiguous (B stored ``(K, N)``).
    ``mn`` is the MN extent of one instruction (A: 64; B: the instruction's N, by default the
    tile's MN extent up to 256). LBO and SBO are measured on the tile's own address map, then every
    core matrix the instruction reads is recomputed from (start, LBO, SBO, layout type) by the PTX
    ISA's canonical-layout formula and must land on the same bytes, or a ``ValueError`` says why
    WGMMA cannot read the tile.
    """
    major, operand = _wgmma_readable(tile, major, operand)
    mn = _wgmma_instruction_mn(tile, major, operand, mn, k_step, mn_offset)
    notes: list[str] = []
    k_extent_bytes = tile.row_bytes if major == "K" else tile.rows * tile.element_bytes
    if k_extent_bytes < WGMMA_K_BYTES:
        notes.append(
            f"the tile holds {k_extent_bytes} B of K; one instruction reads {WGMMA_K_BYTES} B "
            f"({WGMMA_K_BYTES // tile.element_bytes} {tile.dtype}), so it cannot feed a whole K step"
        )
    if tile.mode.name == "NONE" and tile.row_bytes != CHUNK_BYTES:
        raise ValueError(
            f"without a swizzle WGMMA reads each 8-row x 16-byte core matrix as 128 contiguous bytes, but this "
            f"row-major tile puts its rows {tile.row_bytes} B apart; store it as core-matrix blocks "
            f"(swizzle='INTERLEAVE') or use the swizzle TileLang would pick for these rows "
            + (f"(swizzle={default_swizzle(tile.row_bytes)!r})" if default_swizzle(tile.row_bytes) != "NONE"
               else "(no swizzle span divides these rows)")
        )
    geometry = _wgmma_geometry(tile, major, mn, k_step, mn_offset, notes)
    layout_type = tile.mode.layout_type
    assert layout_type is not None  # _wgmma_readable refused the modes WGMMA cannot read
    return WgmmaDescriptor(
        operand=operand, major=major, tile=tile, layout_type=layout_type,
        lbo_bytes=int(geometry.lbo_bytes), sbo_bytes=int(geometry.sbo_bytes), mn=mn, k_step=k_step,
        mn_offset=mn_offset, start_byte=int(tile.byte_offset(geometry.row0, geometry.col0)),
        core_matrices=_wgmma_core_matrices(tile, major, geometry), notes=tuple(notes),
    )


def _wgmma_readable(tile: SharedTile, major: str, operand: str) -> tuple[str, str]:
    """The canonical (major, operand) names, or a ValueError where WGMMA cannot read the tile at all."""
    major = str(major).upper().replace("_MAJOR", "")
    if major not in ("K", "MN"):
        raise ValueError(f"major must be 'K' or 'MN', got {major!r}")
    operand = str(operand).upper()
    if operand not in ("A", "B"):
        raise ValueError(f"operand must be 'A' or 'B', got {operand!r}")
    mode = tile.mode
    if mode.layout_type is None:
        raise ValueError(
            f"WGMMA (sm_90) cannot read a {mode.name} tile: its descriptor knows only none, 32B, 64B and "
            f"128B swizzles ({mode.name} is a TMA/tcgen05 mode of sm_100); load it with swizzle='128B'"
        )
    if tile.dtype not in WGMMA_INPUT_DTYPES:
        raise ValueError(
            f"WGMMA has no {tile.dtype} input: use one of {', '.join(WGMMA_INPUT_DTYPES)} "
            f"(float32 operands are read as tf32)"
        )
    if major == "MN" and tile.dtype not in WGMMA_MN_MAJOR_DTYPES:
        raise ValueError(
            f"WGMMA reads {tile.dtype} operands only K-major (transposed operands exist for float16 and "
            f"bfloat16 only): store the operand as (MN, K) with K contiguous, e.g. B as (N, K) with "
            f"T.gemm(..., transpose_B=True)"
        )
    return major, operand


def _wgmma_instruction_mn(tile: SharedTile, major: str, operand: str, mn: int | None, k_step: int,
                          mn_offset: int) -> int:
    """The MN extent one instruction reads (default: A 64, B the tile's MN up to 256), checked to
    fit the tile in whole core matrices, with ``k_step`` inside the tile's K."""
    e = tile.element_bytes
    mn_extent = tile.rows if major == "K" else tile.cols
    k_extent_bytes = tile.row_bytes if major == "K" else tile.rows * e
    if mn is None:
        mn = WGMMA_M if operand == "A" else min(mn_extent, WGMMA_MAX_N)
    mn_quantum = CORE_MATRIX_ROWS if major == "K" else CHUNK_BYTES // e
    if mn <= 0 or mn % mn_quantum or mn_offset % mn_quantum or mn_offset + mn > mn_extent:
        raise ValueError(
            f"an instruction reading {mn} MN at offset {mn_offset} does not fit the tile's MN extent "
            f"{mn_extent} in whole core matrices (multiples of {mn_quantum}); use a tile with at least "
            f"{mn_offset + mn} MN {'rows' if major == 'K' else 'columns'}"
        )
    if operand == "A" and mn != WGMMA_M:
        raise ValueError(f"a WGMMA A operand is always {WGMMA_M} rows of M per instruction (got mn={mn})")
    k_steps = k_extent_bytes // WGMMA_K_BYTES
    if not 0 <= k_step < max(k_steps, 1):
        raise ValueError(f"k_step {k_step} is outside the tile's {max(k_steps, 1)} 32-byte K step(s)")
    return mn


@dataclass(frozen=True)
class _DescriptorGeometry:
    """Where one instruction's operand starts in the tile, its strides, and its core-matrix grid."""

    row0: int
    col0: int
    lbo_bytes: int
    sbo_bytes: int
    n_mn: int  # core matrices along MN
    n_k: int  # core matrices along K


def _wgmma_geometry(tile: SharedTile, major: str, mn: int, k_step: int, mn_offset: int,
                    notes: list[str]) -> _DescriptorGeometry:
    """LBO and SBO measured on the tile's own address map (PTX ISA canonical layouts), with a
    note wherever a field addresses nothing; a ValueError where they overflow the descriptor."""
    mode, e, span = tile.mode, tile.element_bytes, tile.panel_bytes
    k_extent_bytes = tile.row_bytes if major == "K" else tile.rows * e
    k_per_step = WGMMA_K_BYTES // e  # K elements one instruction reads
    down, across = tile.core_matrix_strides  # unswizzled bytes to the next core matrix: 8 rows down, 16 B across
    if major == "K":  # rows are MN, columns K
        row0, col0 = mn_offset, k_step * k_per_step
        if mode.is_swizzled:
            sbo_bytes, lbo_bytes = down, CHUNK_BYTES
            notes.append("LBO is unused for a swizzled K-major operand (PTX ISA); CuTe and TileLang write 1")
        else:  # PTX canonical K-major, no swizzle: SBO steps 8 MN rows, LBO steps 16 bytes of K
            sbo_bytes, lbo_bytes = down, across
            if tile.row_bytes == CHUNK_BYTES:
                lbo_bytes = CHUNK_BYTES
                notes.append("the tile has one 16-byte core matrix along K, so LBO addresses nothing; "
                             "TileLang writes 1")
        n_mn, n_k = mn // CORE_MATRIX_ROWS, max(min(WGMMA_K_BYTES, k_extent_bytes) // CHUNK_BYTES, 1)
    else:  # rows are K, columns MN
        row0, col0 = k_step * k_per_step, mn_offset
        if mode.is_swizzled:  # SBO steps 8 K rows; LBO steps one span-wide panel of MN
            sbo_bytes, lbo_bytes = down, tile.rows * span
            if tile.panels == 1:
                lbo_bytes = 0
                notes.append("the tile is one swizzle panel wide, so LBO (the panel stride) addresses nothing; "
                             "CuTe and TileLang write 0")
        else:  # PTX canonical MN-major, no swizzle: LBO steps 8 K rows, SBO steps 16 bytes of MN
            lbo_bytes, sbo_bytes = down, across
            if tile.row_bytes == CHUNK_BYTES:
                notes.append("the tile is one 16-byte core matrix wide, so SBO addresses nothing")
        n_mn, n_k = mn * e // CHUNK_BYTES, max(min(k_per_step, tile.rows) // CORE_MATRIX_ROWS, 1)
    if lbo_bytes % 16 or sbo_bytes % 16 or not 0 <= lbo_bytes >> 4 < 1 << 14 or not 0 <= sbo_bytes >> 4 < 1 << 14:
        raise ValueError(
            f"LBO {lbo_bytes} B / SBO {sbo_bytes} B do not fit the descriptor's 14-bit fields of 16-byte "
            f"units (0..262128 B, multiples of 16): use a smaller tile or another swizzle"
        )
    return _DescriptorGeometry(row0, col0, lbo_bytes, sbo_bytes, n_mn, n_k)


def _wgmma_core_matrices(tile: SharedTile, major: str, g: _DescriptorGeometry) -> tuple[CoreMatrix, ...]:
    """Every core matrix the instruction reads, each row recomputed from (start, LBO, SBO, layout
    type) by the canonical formula and checked to land on the byte the tile stores it at."""
    e, mode = tile.element_bytes, tile.mode
    start_lin = int(tile.linear_byte_offset(g.row0, g.col0))
    cms: list[CoreMatrix] = []
    for i in range(g.n_mn):
        for j in range(g.n_k):
            rows_b, cells = [], []
            for r in range(CORE_MATRIX_ROWS):
                if major == "K":
                    row, col = g.row0 + CORE_MATRIX_ROWS * i + r, g.col0 + j * (CHUNK_BYTES // e)
                    mn_unit, k_unit = CORE_MATRIX_ROWS * i + r, j
                else:
                    row, col = g.row0 + CORE_MATRIX_ROWS * j + r, g.col0 + i * (CHUNK_BYTES // e)
                    mn_unit, k_unit = i, CORE_MATRIX_ROWS * j + r
                if row >= tile.rows or col >= tile.cols:
                    continue
                actual = int(tile.byte_offset(row, col)) + tile.base
                canon = _canonical_byte(start_lin + tile.base, mode, major, g.lbo_bytes, g.sbo_bytes, mn_unit, k_unit,
                                        tile.panel_bytes)
                if actual != canon:
                    raise ValueError(
                        f"the tile is not a canonical WGMMA {major}-major layout: core matrix ({i}, {j}) row {r} "
                        f"(logical {row}, {col}) is at byte {actual - tile.base}, but the descriptor would read "
                        f"byte {canon - tile.base}; use TileLang's layout for this shape (swizzle="
                        f"{default_swizzle(tile.row_bytes)!r}) or swizzle='INTERLEAVE'"
                    )
                rows_b.append(actual - tile.base)
                cells.append((row, col))
            cms.append(CoreMatrix(i, j, tuple(rows_b), tuple(cells)))
    return tuple(cms)


@dataclass(frozen=True)
class OperandCheck:
    """tilelab's own reading of one WGMMA operand of a report, next to the compiler's descriptor.

    ``tile`` is matched from the compiler's inferred shared layout *offsets* (never from its
    descriptor); ``descriptor`` is computed from that tile; ``predicted`` is the swizzle TileLang's
    rule gives (:func:`wgmma_operand_swizzle`). ``agrees``: tilelab's layout_type, LBO and SBO equal
    the compiler's. ``reason`` says why there is no descriptor when there is none.
    """

    buffer: str | None
    role: str
    compiler: Any
    tile: SharedTile | None
    descriptor: WgmmaDescriptor | None
    predicted: str | None
    reason: str = ""

    @property
    def agrees(self) -> bool:
        return self.descriptor is not None and self.descriptor.agrees_with(self.compiler)

    def summary(self) -> str:
        c = self.compiler
        theirs = f"layout_type {c.layout_type}, LBO {c.lbo}, SBO {c.sbo}"
        if self.descriptor is None:
            return f"tilelab could not compute a descriptor ({self.reason}); the compiler wrote {theirs}"
        d = self.descriptor
        if self.agrees:
            text = f"tilelab's descriptor agrees with the compiler's: {theirs}"
        else:
            text = (f"tilelab's descriptor differs from the compiler's: tilelab layout_type {d.layout_type}, "
                    f"LBO {d.lbo}, SBO {d.sbo}; compiler {theirs}")
        if self.predicted is not None and self.tile is not None:
            text += (f" (layout {self.tile.swizzle}; TileLang's rule predicts {self.predicted})"
                     if self.predicted == self.tile.swizzle else
                     f" (layout {self.tile.swizzle}, but TileLang's rule predicts {self.predicted})")
        return text


def check_wgmma_operand(layout: Any, operand: Any, role: str, inst_mn: int) -> OperandCheck:
    """Recompute one WGMMA operand of a report from its shared ``layout`` (a report ``Layout``):
    match the offsets to a mode, compute the descriptor for ``role`` ("A"/"B") with an instruction
    of MN extent ``inst_mn`` (A: 64, B: the instruction's N), and compare with ``operand`` (the
    compiler's ``WgmmaOperand``)."""
    buffer = getattr(operand, "buffer", None)
    predicted = None
    try:
        shape = tuple(layout.shape)
        if len(shape) == 2:
            k = shape[1] if operand.major == "K" else None
            predicted = wgmma_operand_swizzle(layout.dtype, operand.major, k=k, inst_mn=inst_mn)
    except ValueError:
        predicted = None
    tile = match_layout(layout)
    if tile is None:
        return OperandCheck(buffer, role, operand, None, None, predicted,
                            "its shared layout is not one of tilelab's swizzle modes")
    try:
        desc = wgmma_descriptor(tile, operand.major, operand=role, mn=inst_mn)
    except ValueError as err:
        return OperandCheck(buffer, role, operand, tile, None, predicted, str(err))
    return OperandCheck(buffer, role, operand, tile, desc, predicted)


# --------------------------------------------------------------------------------------------
# Bank conflicts
# --------------------------------------------------------------------------------------------

PATTERNS: dict[str, str] = {
    "row_store": "a warp stores 16-byte vectors along the rows: thread t writes the t-th 16 B of the "
                 "tile in row-major order from the start row",
    "column_read": "a warp reads 16-byte vectors down one column: thread t reads the 16 B of "
                   "chunk `chunk` in row start+t",
    "row_store_element": "a warp stores one element per thread along a row: thread t writes element "
                         "(start, col + t), continuing into the next row",
    "column_store": "a warp stores one element per thread down one column (thread t: row start+t)",
    "ldmatrix_x4": "ldmatrix.x4: four 8x8 matrices of 16-byte rows; thread t gives the address of "
                   "row start + t % 16 of chunk `chunk` + t // 16; one matrix per phase",
    "stmatrix_x4": "stmatrix.x4 (the store twin of ldmatrix.x4): thread t gives the address of row "
                   "start + t % 16 of chunk `chunk` + t // 16, and each 8x8 matrix is written in its own phase",
    "tma_box_write": "a TMA box write: conflict-free by construction. The box lands in a dense region of "
                     "shared memory written 128-byte line by 128-byte line; every swizzle mode only permutes "
                     "the eight 16-byte chunks inside one 128-byte line, so each line is 8 granules on 32 "
                     "distinct banks: one wavefront per 128 bytes, whatever the mode",
}
PATTERN_WIDTH = {"row_store": 16, "column_read": 16, "row_store_element": None, "column_store": None,
                 "ldmatrix_x4": 16, "stmatrix_x4": 16, "tma_box_write": 16}


@dataclass(frozen=True)
class Access:
    """One thread's (or TMA granule's) access: logical cell, physical byte, banks touched."""

    thread: int
    row: int
    col: int
    nbytes: int
    byte: int
    banks: tuple[int, ...]
    phase: int

    def to_dict(self) -> dict[str, Any]:
        return {"thread": self.thread, "row": self.row, "col": self.col, "nbytes": self.nbytes,
                "byte": self.byte, "banks": list(self.banks), "phase": self.phase}


@dataclass(frozen=True)
class ConflictReport:
    """Wavefronts of one shared-memory request.

    The hardware model: a request is split into phases (32 threads for accesses of up to 4 B,
    16 for 8 B, 8 for 16 B and for each ldmatrix matrix); a phase takes as many wavefronts as the
    most distinct 4-byte words any one bank must deliver (threads reading the same word share it).
    ``conflict_degree`` is wavefronts / ideal, the number Nsight Compute's "bank conflicts" ratio
    reports as N-way; 1 means conflict-free.
    """

    pattern: str
    description: str
    tile: SharedTile
    accesses: tuple[Access, ...]
    wavefronts_per_phase: tuple[int, ...]
    ideal_wavefronts: int
    notes: tuple[str, ...] = ()

    @property
    def wavefronts(self) -> int:
        return int(sum(self.wavefronts_per_phase))

    @property
    def conflict_degree(self) -> float:
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 1.0

    @property
    def max_way(self) -> int:
        return max(self.wavefronts_per_phase) if self.wavefronts_per_phase else 0

    @property
    def conflict_free(self) -> bool:
        return self.wavefronts <= self.ideal_wavefronts

    def summary(self) -> str:
        way = self.conflict_degree
        verdict = "no bank conflicts" if self.conflict_free else f"{way:g}-way bank conflict"
        return (f"{self.pattern} on a {self.tile.rows}x{self.tile.cols} {self.tile.dtype} tile, "
                f"{self.tile.swizzle} swizzle: {self.wavefronts} wavefront(s) for an ideal "
                f"{self.ideal_wavefronts}: {verdict}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern, "description": self.description, "tile": self.tile.to_dict(),
            "accesses": [a.to_dict() for a in self.accesses],
            "wavefronts_per_phase": list(self.wavefronts_per_phase), "wavefronts": self.wavefronts,
            "ideal_wavefronts": self.ideal_wavefronts, "conflict_degree": self.conflict_degree,
            "max_way": self.max_way, "summary": self.summary(), "notes": list(self.notes),
        }


def _phase_wavefronts(word_lists: list[list[int]]) -> int:
    per_bank: dict[int, set[int]] = {}
    for words in word_lists:
        for w in words:
            per_bank.setdefault(w % BANKS, set()).add(w)
    return max((len(s) for s in per_bank.values()), default=1)


def bank_conflicts(tile: SharedTile, pattern: str = "column_read", *, row: int = 0, chunk: int = 0,
                   col: int | None = None) -> ConflictReport:
    """Wavefronts and conflict degree of a common access pattern on ``tile``.

    ``row`` is the first row; ``chunk`` the 16-byte logical chunk (column of chunks) for the
    vector patterns; ``col`` the element column for ``column_store`` (default: the chunk's first).
    Rows past the tile wrap around (a 16-row tile read by 32 threads reads each row twice).
    """
    if pattern not in PATTERNS:
        raise ValueError(f"unknown access pattern {pattern!r}: use one of {', '.join(PATTERNS)}")
    e = tile.element_bytes
    width = PATTERN_WIDTH[pattern] or e
    notes: list[str] = []
    if width == 16 and tile.row_bytes % CHUNK_BYTES:
        raise ValueError(
            f"16-byte vector accesses need rows of a multiple of 16 bytes; this tile's rows are "
            f"{tile.row_bytes} B: make cols a multiple of {CHUNK_BYTES // e}"
        )
    chunks_per_row = max(tile.row_bytes // CHUNK_BYTES, 1)
    if pattern in ("column_read", "ldmatrix_x4", "stmatrix_x4") and not 0 <= chunk < chunks_per_row:
        raise ValueError(f"chunk {chunk} is outside the tile's {chunks_per_row} 16-byte chunks per row")
    if not 0 <= row < tile.rows:
        raise ValueError(f"row {row} is outside the tile's {tile.rows} rows")

    cells: list[tuple[int, int, int, int]] = []  # (thread, row, col, phase)
    vector_phase = LINE_BYTES // CHUNK_BYTES  # threads per phase of 16-byte accesses: 8
    if pattern == "row_store":
        start = row * chunks_per_row
        total = tile.rows * chunks_per_row
        for t in range(WARP_SIZE):
            v = (start + t) % total
            cells.append((t, v // chunks_per_row, (v % chunks_per_row) * (CHUNK_BYTES // e), t // vector_phase))
    elif pattern == "column_read":
        for t in range(WARP_SIZE):
            cells.append((t, (row + t) % tile.rows, chunk * (CHUNK_BYTES // e), t // vector_phase))
    elif pattern == "row_store_element":
        c0 = 0 if col is None else col
        if not 0 <= c0 < tile.cols:
            raise ValueError(f"col {c0} is outside the tile's {tile.cols} columns")
        phase_size = LINE_BYTES // max(e, BANK_BYTES)  # 32 threads up to 4 B, 16 of 8 B
        for t in range(WARP_SIZE):
            v = (row * tile.cols + c0 + t) % (tile.rows * tile.cols)
            cells.append((t, v // tile.cols, v % tile.cols, t // phase_size))
    elif pattern == "column_store":
        c = chunk * (CHUNK_BYTES // e) if col is None else col
        if not 0 <= c < tile.cols:
            raise ValueError(f"col {c} is outside the tile's {tile.cols} columns")
        phase_size = LINE_BYTES // max(e, BANK_BYTES)  # 32 threads up to 4 B, 16 of 8 B
        for t in range(WARP_SIZE):
            cells.append((t, (row + t) % tile.rows, c, t // phase_size))
    elif pattern in ("ldmatrix_x4", "stmatrix_x4"):
        if chunks_per_row < 2:
            notes.append("the tile has one 16-byte chunk per row; matrices 2 and 3 reuse chunk 0")
        for t in range(WARP_SIZE):
            col_t = ((chunk + t // 16) % chunks_per_row) * (CHUNK_BYTES // e)
            cells.append((t, (row + t % 16) % tile.rows, col_t, t // vector_phase))
    if tile.rows < WARP_SIZE and pattern in ("column_read", "column_store"):
        notes.append(f"the tile has {tile.rows} rows; threads past them wrap to row 0")

    if pattern == "tma_box_write":
        return _tma_box_write(tile, notes)

    accesses = []
    by_phase: dict[int, list[list[int]]] = {}
    # every thread's offset in one call (the explorer redraws the per-mode table on each change)
    offsets = tile.byte_offset(np.array([cell[1] for cell in cells]), np.array([cell[2] for cell in cells]))
    for (t, r, c, ph), byte in zip(cells, offsets.tolist()):
        first = (byte + tile.base) // BANK_BYTES
        if width >= BANK_BYTES:
            aligned = (byte + tile.base) & ~(width - 1)
            words = [aligned // BANK_BYTES + i for i in range(width // BANK_BYTES)]
        else:
            words = [first]
        by_phase.setdefault(ph, []).append(words)
        accesses.append(Access(t, r, c, width, byte, tuple(w % BANKS for w in words), ph))
    per_phase = tuple(_phase_wavefronts(by_phase[p]) for p in sorted(by_phase))
    return ConflictReport(pattern, PATTERNS[pattern], tile, tuple(accesses), per_phase, len(per_phase), tuple(notes))


def _tma_box_write(tile: SharedTile, notes: list[str]) -> ConflictReport:
    # Granules in physical address order: the box's destination is dense, written line by line.
    e = tile.element_bytes
    phys: np.ndarray = np.arange(0, tile.nbytes, CHUNK_BYTES, dtype=np.int64)
    r_all, c_all = tile.logical(phys)
    words: np.ndarray = (phys + tile.base) // BANK_BYTES
    per_line, banks = LINE_BYTES // CHUNK_BYTES, CHUNK_BYTES // BANK_BYTES  # 8 granules of 4 banks
    # A phase's wavefronts: the most words of one bank (_phase_wavefronts's count, per phase at
    # once: the granules are distinct 16-byte ranges, so no word repeats within a phase)
    all_words = (words[:, None] + np.arange(banks)).reshape(-1)
    phase: np.ndarray = np.repeat(np.arange(len(words)) // per_line, banks)
    phases = (len(words) + per_line - 1) // per_line
    counts = np.bincount(phase * BANKS + all_words % BANKS, minlength=phases * BANKS).reshape(phases, BANKS)
    per_phase = [int(n) for n in counts.max(axis=1)]
    accesses = tuple(
        Access(i, int(r_all[i]), int(c_all[i]) - int(c_all[i]) % max(CHUNK_BYTES // e, 1), CHUNK_BYTES,
               int(phys[i]), tuple((int(words[i]) + k) % BANKS for k in range(banks)), i // per_line)
        for i in range(min(len(phys), 32))
    )
    notes.append("NVIDIA does not document the order in which the TMA unit writes shared memory; any order "
                 "that fills whole 128-byte lines is conflict-free. accesses lists the first 32 granules")
    return ConflictReport("tma_box_write", PATTERNS["tma_box_write"], tile, accesses, tuple(per_phase),
                          len(per_phase), tuple(notes))


@dataclass(frozen=True)
class ModeComparison:
    """Wavefronts of each access pattern under each swizzle mode, for one tile shape: the number
    behind "why 128B?". A mode that cannot hold the tile has its reason instead of numbers."""

    rows: int
    cols: int
    dtype: str
    patterns: tuple[str, ...]
    results: tuple[tuple[str, tuple[ConflictReport, ...] | str], ...]

    def get(self, mode: str, pattern: str) -> ConflictReport | None:
        for name, reports in self.results:
            if name == mode and not isinstance(reports, str):
                return reports[self.patterns.index(pattern)]
        return None

    def to_text(self) -> str:
        head = ["mode"] + list(self.patterns)
        lines = [" | ".join(head)]
        for name, reports in self.results:
            if isinstance(reports, str):
                lines.append(f"{name} | n/a: {reports}")
            else:
                cells = [f"{r.wavefronts}/{r.ideal_wavefronts} "
                         f"({'no conflict' if r.conflict_free else f'{r.conflict_degree:g}-way'})" for r in reports]
                lines.append(" | ".join([name, *cells]))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows, "cols": self.cols, "dtype": self.dtype, "patterns": list(self.patterns),
            "results": {name: (reports if isinstance(reports, str) else
                               {p: {"wavefronts": r.wavefronts, "ideal": r.ideal_wavefronts,
                                    "conflict_degree": r.conflict_degree} for p, r in zip(self.patterns, reports)})
                        for name, reports in self.results},
        }


def compare_modes(rows: int, cols: int, dtype: str = "float16",
                  patterns: Iterable[str] = ("row_store", "column_read", "column_store", "ldmatrix_x4"),
                  modes: Iterable[str] = WGMMA_MODES) -> ModeComparison:
    patterns = tuple(patterns)
    results: list[tuple[str, tuple[ConflictReport, ...] | str]] = []
    for name in modes:
        try:
            tile = SharedTile(rows, cols, dtype, name)
            results.append((tile.swizzle, tuple(bank_conflicts(tile, p) for p in patterns)))
        except ValueError as err:
            results.append((swizzle_mode(name).name, str(err)))
    return ModeComparison(rows, cols, normalize_dtype(dtype), patterns, tuple(results))


__all__ = [
    "BANKS", "BANK_BYTES", "DTYPE_BYTES", "MODES", "PATTERNS", "WGMMA_MODES",
    "Access", "ConflictReport", "CoreMatrix", "ModeComparison", "OperandCheck", "SharedTile", "SwizzleMode",
    "WgmmaDescriptor", "bank_conflicts", "check_wgmma_operand", "compare_modes", "default_swizzle", "dtype_bytes",
    "match_layout", "mode_for_layout_type",
    "normalize_dtype", "select_wgmma_inst_n", "swizzle_mode", "wgmma_descriptor", "wgmma_operand_swizzle",
]
