"""tilelab.swizzle against tables derived by hand in this file (not by the code under test)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilelab import swizzle as sw
from tilelab.records.kernel import WgmmaOperand
from tilelab.swizzle import SharedTile, bank_conflicts, wgmma_descriptor

# 128B, fp16, 8 x 64 (one 128-byte row per tile row): physical 16-byte chunk of logical chunk k
# in row r is k XOR r. Written out by hand, row by row.
CHUNK_128B = [
    [0, 1, 2, 3, 4, 5, 6, 7],
    [1, 0, 3, 2, 5, 4, 7, 6],
    [2, 3, 0, 1, 6, 7, 4, 5],
    [3, 2, 1, 0, 7, 6, 5, 4],
    [4, 5, 6, 7, 0, 1, 2, 3],
    [5, 4, 7, 6, 1, 0, 3, 2],
    [6, 7, 4, 5, 2, 3, 0, 1],
    [7, 6, 5, 4, 3, 2, 1, 0],
]
# 64B, fp16, 8 x 32 (64-byte rows): chunk k of row r goes to k XOR ((r / 2) mod 4), within the row.
CHUNK_64B_IN_ROW = [
    [0, 1, 2, 3], [0, 1, 2, 3],
    [1, 0, 3, 2], [1, 0, 3, 2],
    [2, 3, 0, 1], [2, 3, 0, 1],
    [3, 2, 1, 0], [3, 2, 1, 0],
]
# 32B, fp16, 8 x 16 (32-byte rows): chunk k of row r goes to k XOR ((r / 4) mod 2).
CHUNK_32B_IN_ROW = [[0, 1]] * 4 + [[1, 0]] * 4


def _chunk_in_row(tile: SharedTile, r: int, k: int) -> int:
    per = 16 // tile.element_bytes
    byte = tile.byte_offset(r, k * per)
    assert byte // tile.panel_bytes == r  # the swizzle never moves data to another row
    return (byte % tile.panel_bytes) // 16


def test_128b_table_fp16():
    tile = SharedTile(8, 64, "float16", "128B")
    got = [[_chunk_in_row(tile, r, k) for k in range(8)] for r in range(8)]
    assert got == CHUNK_128B
    # every element keeps its place inside its chunk: element 5 of chunk 2 in row 3 (2^3 = 1)
    assert tile.byte_offset(3, 2 * 8 + 5) == 3 * 128 + 1 * 16 + 5 * 2


def test_128b_table_fp32_and_int8_same_bytes():
    # the mode is a byte map: fp32 has 4 elements per chunk, int8 16, the chunk table is the same
    for dtype, per in (("float32", 4), ("int8", 16)):
        tile = SharedTile(8, 8 * per, dtype, "128B")
        got = [[_chunk_in_row(tile, r, k) for k in range(8)] for r in range(8)]
        assert got == CHUNK_128B, dtype


def test_64b_and_32b_tables():
    t64 = SharedTile(8, 32, "float16", "64B")
    assert [[_chunk_in_row(t64, r, k) for k in range(4)] for r in range(8)] == CHUNK_64B_IN_ROW
    t32 = SharedTile(8, 16, "float16", "32B")
    assert [[_chunk_in_row(t32, r, k) for k in range(2)] for r in range(8)] == CHUNK_32B_IN_ROW


def test_pattern_repeats_after_8_rows_and_none_is_identity():
    tile = SharedTile(16, 64, "bfloat16", "128B")
    assert tile.byte_offset(8 + 5, 3 * 8) - 8 * 128 == tile.byte_offset(5, 3 * 8)
    plain = SharedTile(16, 24, "float16", "NONE")  # 48-byte rows are fine without swizzle
    r, c = plain.grid()
    assert (plain.offsets() == r * 24 + c).all()


def test_panels_are_stored_one_after_another():
    # 16 x 128 fp16 with 128B: two 64-column panels, each 16 rows x 128 B = 2048 B
    tile = SharedTile(16, 128, "float16", "128B")
    assert tile.panels == 2 and tile.panel_cols == 64
    assert tile.byte_offset(0, 64) == 2048
    assert tile.byte_offset(1, 64) == 2048 + 128 + 16  # row 1: chunk 0 -> 1
    # 64B on a 64-column fp16 tile: two panels of 32 columns, 8 rows x 64 B = 512 B each
    t = SharedTile(8, 64, "float16", "64B")
    assert t.byte_offset(0, 32) == 512 and t.byte_offset(2, 32) == 512 + 2 * 64 + 16


def test_banks_by_hand():
    tile = SharedTile(8, 64, "float16", "128B")
    # (1, 0): byte 128 + 16 -> word 36 -> bank 4; (7, 9): chunk 1^7=6, element 1 -> byte 7*128+96+2 -> bank 24
    assert tile.bank(1, 0) == 4
    assert tile.bank(7, 9) == 24
    assert tile.chunk(7, 9) == 6
    plain = SharedTile(8, 64, "float16", "NONE")
    assert [plain.bank(r, 0) for r in range(8)] == [0] * 8  # the textbook column conflict


def test_inverse_map_all_modes():
    for mode in sw.MODES:
        tile = SharedTile(16, 128, "float16", mode)
        r, c = tile.grid()
        phys = tile.byte_offset(r, c)
        assert len(np.unique(phys)) == phys.size, mode  # a permutation
        rr, cc = tile.logical(phys)
        assert (rr == r).all() and (cc == c).all(), mode
        assert tile.logical(int(phys[3, 17])) == (3, 17)


def test_atom_variants_by_hand():
    # 128B_ATOM_32B: 32-byte chunk q of row r -> q XOR (r mod 4) (CuTe Swizzle<2,5,2>)
    t = SharedTile(8, 64, "float16", "128B_ATOM_32B")
    table = [[(t.byte_offset(r, q * 16) % 128) // 32 for q in range(4)] for r in range(4)]
    assert table == [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    # 128B_ATOM_64B: 64-byte half h of row r -> h XOR (r mod 2)
    t = SharedTile(4, 64, "float16", "128B_ATOM_64B")
    assert [[(t.byte_offset(r, h * 32) % 128) // 64 for h in range(2)] for r in range(4)] == [[0, 1], [1, 0]] * 2
    # FLIP_8B: as ATOM_32B, and odd rows swap the 8-byte halves of every 16 B:
    # row 1, element 0 -> 32-byte chunk 1, upper 8 B -> byte 128 + 32 + 8
    t = SharedTile(8, 64, "float16", "128B_ATOM_32B_FLIP_8B")
    assert t.byte_offset(1, 0) == 128 + 32 + 8
    assert t.byte_offset(2, 0) == 256 + 64


def test_modes_by_name_and_enum():
    assert sw.swizzle_mode("CU_TENSOR_MAP_SWIZZLE_128B").name == "128B"
    assert sw.swizzle_mode(2).name == "64B"
    assert sw.swizzle_mode("none").name == "NONE"
    assert sw.mode_for_layout_type(1).name == "128B"
    assert sw.MODES["128B"].repeat_bytes == 1024 and sw.MODES["32B"].repeat_bytes == 256
    assert sw.default_swizzle(128) == "128B" and sw.default_swizzle(96) == "32B" and sw.default_swizzle(48) == "NONE"
    with pytest.raises(ValueError, match="unknown swizzle mode"):
        sw.swizzle_mode("96B")


# -- validation ---------------------------------------------------------------------------------


def test_inner_extent_narrower_than_span():
    with pytest.raises(ValueError, match=r"64-byte rows, narrower than the 128-byte span.*swizzle='64B'"):
        SharedTile(64, 32, "float16", "128B")


def test_inner_extent_not_a_whole_number_of_panels():
    with pytest.raises(ValueError, match=r"192-byte rows, not a whole number of 128-byte.*multiple of 64"):
        SharedTile(64, 96, "float16", "128B")


def test_misaligned_base():
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        SharedTile(8, 64, "float16", "NONE", base=8)
    with pytest.raises(ValueError, match=r"not aligned to the 1024-byte repeat.*align the buffer to 1024 bytes"):
        SharedTile(8, 64, "float16", "128B", base=512)
    assert SharedTile(8, 64, "float16", "128B", base=2048).byte_offset(1, 0) == 128 + 16


def test_bad_dtype_and_shape():
    with pytest.raises(ValueError, match="unknown dtype"):
        SharedTile(8, 64, "float12", "128B")
    with pytest.raises(ValueError, match="rows must be a positive int"):
        SharedTile(0, 64)


def test_wgmma_cannot_read():
    with pytest.raises(ValueError, match="only K-major"):
        wgmma_descriptor(SharedTile(32, 32, "float32", "128B"), "MN", operand="B")
    with pytest.raises(ValueError, match="only K-major"):
        wgmma_descriptor(SharedTile(32, 128, "float8_e4m3", "128B"), "MN", operand="B")
    with pytest.raises(ValueError, match="cannot read a 128B_ATOM_32B tile"):
        wgmma_descriptor(SharedTile(64, 64, "float16", "128B_ATOM_32B"), "K")
    with pytest.raises(ValueError, match="no float64 input"):
        wgmma_descriptor(SharedTile(64, 16, "float64", "128B"), "K")
    with pytest.raises(ValueError, match="128 contiguous bytes.*48 B apart"):
        wgmma_descriptor(SharedTile(64, 24, "float16", "NONE"), "K")


# -- WGMMA descriptors: values from the PTX ISA rules, by hand ----------------------------------
# K-major swizzled: SBO = 8 rows x span bytes, LBO unused (1); MN-major swizzled: SBO = 8 K rows x
# span, LBO = panel stride = K rows x span bytes. Encoded values are bytes >> 4.


@pytest.mark.parametrize("shape, dtype, mode, major, mn, expect", [
    ((128, 64), "float16", "128B", "K", 64, (1, 1, 64)),       # 1024 B >> 4
    ((128, 32), "float16", "64B", "K", 64, (2, 1, 32)),        # 512 B
    ((64, 16), "float16", "32B", "K", 64, (3, 1, 16)),         # 256 B
    ((64, 32), "float32", "128B", "K", 64, (1, 1, 64)),        # tf32: 32 fp32 per 128-byte row
    ((64, 128), "float8_e4m3", "128B", "K", 64, (1, 1, 64)),
    ((32, 128), "float16", "128B", "MN", 64, (1, 256, 64)),    # panel 32 x 128 B = 4096 B
    ((64, 256), "float16", "128B", "MN", 128, (1, 512, 64)),   # panel 64 x 128 B = 8192 B
    ((64, 64), "float16", "64B", "MN", 32, (2, 256, 32)),      # panel 64 x 64 B = 4096 B
    ((16, 64), "float16", "128B", "MN", 64, (1, 0, 64)),       # one panel: LBO unused, 0
])
def test_descriptor_fields(shape, dtype, mode, major, mn, expect):
    operand = "A" if mn == 64 and major == "K" else "B"
    d = wgmma_descriptor(SharedTile(*shape, dtype, mode), major, operand=operand, mn=mn)
    assert (d.layout_type, d.lbo, d.sbo) == expect
    assert d.to_operand("X") == WgmmaOperand("X", expect[0], expect[1], expect[2], major)


def test_core_matrices_of_an_a_operand():
    # m64 x 32 bytes of K: 8 x 2 core matrices of 8 rows x 16 B; each row a distinct 16-byte slot
    d = wgmma_descriptor(SharedTile(128, 64, "float16", "128B"), "K")
    assert len(d.core_matrices) == 16
    rows = [b for cm in d.core_matrices for b in cm.row_bytes]
    assert len(set(rows)) == 128 and all(b % 16 == 0 for b in rows)
    # core matrix (1, 1): rows 8..15, K chunk 1 -> row 9 (r % 8 = 1): chunk 1 ^ 1 = 0
    cm = next(c for c in d.core_matrices if (c.mn, c.k) == (1, 1))
    assert cm.cells[1] == (9, 8) and cm.row_bytes[1] == 9 * 128 + 0
    # the second K step starts 32 B further along the row
    d2 = wgmma_descriptor(SharedTile(128, 64, "float16", "128B"), "K", k_step=1)
    assert d2.start_byte == 32 and d2.sbo == 64
    json.dumps(d.to_dict())


# -- bank conflicts: textbook cases --------------------------------------------------------------


def test_column_of_16_byte_vectors():
    # fp16 tile, 64 columns (128-byte rows); a warp reads 16 B down one column: 4 phases of 8
    # threads. Without swizzle all 8 land on banks 0-3 -> 8 wavefronts per phase (8-way).
    plain = bank_conflicts(SharedTile(64, 64, "float16", "NONE"), "column_read")
    assert plain.wavefronts_per_phase == (8, 8, 8, 8) and plain.conflict_degree == 8
    swz = bank_conflicts(SharedTile(64, 64, "float16", "128B"), "column_read")
    assert swz.wavefronts == 4 and swz.conflict_free
    assert swz.accesses[9].banks == (4, 5, 6, 7)  # row 9 chunk 0 -> physical chunk 1


def test_scalar_column_store():
    # one fp16 per thread down a column, 32 threads in one phase: 32 words of bank 0 without
    # swizzle; with 128B, rows r and r+8 share a chunk: 4 words per bank
    assert bank_conflicts(SharedTile(64, 64, "float16", "NONE"), "column_store").wavefronts == 32
    assert bank_conflicts(SharedTile(64, 64, "float16", "128B"), "column_store").wavefronts == 4


def test_row_store_and_why_128b():
    # A warp storing a row of 16-byte vectors: 128B keeps the 8 chunks of a row in one 128-byte
    # line; 32B splits the row over 4 panels 2 KB apart (same banks): 4-way; 64B: 2-way.
    table = sw.compare_modes(64, 64, "float16", patterns=("row_store", "column_read"))
    way = {m: tuple(r.conflict_degree for r in reps) for m, reps in table.results}
    assert way == {"NONE": (1, 8), "32B": (4, 1), "64B": (2, 1), "128B": (1, 1)}
    assert "128B | 4/4 (no conflict) | 4/4 (no conflict)" in table.to_text()
    assert "NONE | 4/4 (no conflict) | 32/4 (8-way)" in table.to_text()
    json.dumps(table.to_dict())


def test_ldmatrix_and_tma():
    assert bank_conflicts(SharedTile(64, 64, "float16", "NONE"), "ldmatrix_x4").wavefronts == 32
    assert bank_conflicts(SharedTile(64, 64, "float16", "128B"), "ldmatrix_x4").wavefronts == 4
    tma = bank_conflicts(SharedTile(64, 64, "float16", "128B"), "tma_box_write")
    assert tma.ideal_wavefronts == 64 * 128 // 128 and tma.conflict_free and len(tma.accesses) == 32


def test_conflict_validation():
    with pytest.raises(ValueError, match="unknown access pattern"):
        bank_conflicts(SharedTile(8, 64), "diagonal")
    with pytest.raises(ValueError, match="chunk 8 is outside"):
        bank_conflicts(SharedTile(8, 64), "column_read", chunk=8)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        bank_conflicts(SharedTile(8, 12, "float16", "NONE"), "column_read")


def test_models_round_trip_and_layout():
    tile = SharedTile(16, 64, "bf16", "64B")
    assert SharedTile.from_dict(json.loads(json.dumps(tile.to_dict()))) == tile
    layout = tile.to_layout("A_shared")
    assert layout.scope == "shared" and layout.shape == (16, 64)
    assert sw.match_layout(layout) == tile
    rep = bank_conflicts(tile, "column_read")
    assert json.loads(json.dumps(rep.to_dict()))["wavefronts"] == rep.wavefronts


def test_pure_modules_import_no_tilelang_or_ipython():
    import subprocess
    import sys

    code = ("import sys, tilelab.swizzle, tilelab.render.svg; "
            "bad = [m for m in ('tilelang', 'tvm', 'IPython', 'ipywidgets', 'torch') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- INTERLEAVE: WGMMA's no-swizzle canonical layout (core matrices of 128 contiguous bytes) -------
# By hand for a 16 x 16 fp16 tile: 2 bands of 8 rows x 2 chunks of 16 B = 4 core matrices.
# "rows" order: block (band b, chunk c) = c * 2 + b; "chunks" order: block = b * 2 + c;
# element (r, col) at block * 128 + (r % 8) * 16 + (col % 8) * 2.


@pytest.mark.parametrize("order, cells", [
    ("rows", {(0, 0): 0, (9, 0): 128 + 16, (0, 8): 256, (9, 9): 384 + 16 + 2, (7, 15): 256 + 112 + 14}),
    ("chunks", {(0, 0): 0, (9, 0): 256 + 16, (0, 8): 128, (9, 9): 384 + 16 + 2, (7, 15): 128 + 112 + 14}),
])
def test_interleave_offsets_by_hand(order, cells):
    tile = SharedTile(16, 16, "float16", "INTERLEAVE", core_order=order)
    for (r, c), byte in cells.items():
        assert tile.byte_offset(r, c) == byte, (order, r, c)
        assert tile.logical(byte) == (r, c)
    # each core matrix is 128 contiguous bytes: rows 8..15 of chunk 0 step by 16 B
    assert [tile.byte_offset(8 + i, 0) - tile.byte_offset(8, 0) for i in range(8)] == [16 * i for i in range(8)]


@pytest.mark.parametrize("shape, major, order, expect", [
    # K-major (MN, K) 64 x 32 fp16: 8 bands x 4 chunks. rows order: next 8 MN rows +128 B (SBO 8),
    # next 16 B of K + 8 * 128 B (LBO 64). chunks order: SBO = 4 * 128 B (32), LBO = 128 B (8).
    ((64, 32), "K", "rows", (0, 64, 8)),
    ((64, 32), "K", "chunks", (0, 8, 32)),
    # MN-major (K, MN) 32 x 64 fp16: 4 bands of K x 8 chunks of MN. LBO steps 8 K rows, SBO 16 B of MN.
    # chunks order: LBO = 8 * 128 B (64), SBO = 128 B (8); rows order: LBO = 128 B (8), SBO = 4 * 128 B (32).
    ((32, 64), "MN", "chunks", (0, 64, 8)),
    ((32, 64), "MN", "rows", (0, 8, 32)),
    # fp32 (tf32) K-major: 4 elements per 16 B, 64 x 16 -> 8 bands x 4 chunks, same bytes as fp16 above
    ((64, 16), "K", "rows", (0, 64, 8)),
])
def test_interleave_descriptors_by_hand(shape, major, order, expect):
    dtype = "float32" if shape == (64, 16) else "float16"
    tile = SharedTile(*shape, dtype, "INTERLEAVE", core_order=order)
    mn = shape[0] if major == "K" else shape[1]
    d = wgmma_descriptor(tile, major, operand="B", mn=mn)
    assert (d.layout_type, d.lbo, d.sbo) == expect
    # every core matrix the instruction reads is 8 consecutive 16-byte rows
    for cm in d.core_matrices:
        assert list(cm.row_bytes) == [cm.row_bytes[0] + 16 * i for i in range(len(cm.row_bytes))]
    assert len(d.core_matrices) == (mn // 8) * 2 if major == "K" else (mn * tile.element_bytes // 16) * 2


def test_interleave_second_k_step_and_mn_offset():
    # K-major 64 x 64 fp16 rows order (8 bands, 8 chunks): K step 1 starts at chunk 2 = block 2 * 8 -> byte 2048
    tile = SharedTile(64, 64, "float16", "INTERLEAVE")
    assert wgmma_descriptor(tile, "K", operand="A", k_step=1).start_byte == 2048
    # B at mn_offset 8: band 1 -> byte 128
    assert wgmma_descriptor(tile, "K", operand="B", mn=8, mn_offset=8).start_byte == 128


def test_row_major_without_swizzle_points_to_interleave():
    with pytest.raises(ValueError, match=r"48 B apart; store it as core-matrix blocks \(swizzle='INTERLEAVE'\)"):
        wgmma_descriptor(SharedTile(64, 24, "float16", "NONE"), "K")
    with pytest.raises(ValueError, match="swizzle='INTERLEAVE'"):
        wgmma_descriptor(SharedTile(16, 64, "float16", "NONE"), "MN", operand="B")
    with pytest.raises(ValueError, match="multiple of 8"):
        SharedTile(12, 16, "float16", "INTERLEAVE")
    # 16-byte-wide tiles: row-major NONE is already canonical, and equals INTERLEAVE
    none = SharedTile(64, 8, "float16", "NONE")
    inter = SharedTile(64, 8, "float16", "INTERLEAVE")
    assert (none.offsets() == inter.offsets()).all()
    assert sw.mode_for_layout_type(0).name == "NONE" and sw.swizzle_mode("INTERLEAVE").name == "INTERLEAVE"


def test_inverse_map_with_base_and_other_dtypes():
    for dtype, cols in (("float32", 64), ("int8", 256)):
        for mode, base in (("128B", 3 * 1024), ("64B", 512), ("32B", 256), ("NONE", 48), ("INTERLEAVE", 16)):
            tile = SharedTile(16, cols, dtype, mode, base=base)
            r, c = tile.grid()
            phys = tile.byte_offset(r, c)
            rr, cc = tile.logical(phys)
            assert (rr == r).all() and (cc == c).all(), (dtype, mode)
    # by hand: fp32 128B at base 2048, (1, 0): chunk 0 ^ 1 = 1 -> byte 128 + 16, bank (2048 + 144) / 4 % 32 = 4
    t = SharedTile(8, 32, "float32", "128B", base=2048)
    assert t.logical(144) == (1, 0) and t.bank(1, 0) == 4
    # int8 128B, (2, 16): chunk 1 ^ 2 = 3 -> byte 256 + 48
    assert SharedTile(8, 128, "int8", "128B", base=1024).logical(256 + 48) == (2, 16)


# -- access patterns ----------------------------------------------------------------------------


def test_stmatrix_x4_by_hand():
    # NONE, 128-byte rows: each phase's 8 rows of one chunk share banks 0-3: 8 wavefronts x 4 phases
    assert bank_conflicts(SharedTile(64, 64, "float16", "NONE"), "stmatrix_x4").wavefronts == 32
    # 64B, 32 x 32 fp16 (64-byte rows, 2 rows a line): rows 0-7 of chunk 0 land on line chunks
    # 0, 4, 1, 5, 2, 6, 3, 7 (row r: (r % 2) * 4 + (0 ^ (r // 2) % 4)): all distinct, 1 wavefront a phase
    rep = bank_conflicts(SharedTile(32, 32, "float16", "64B"), "stmatrix_x4")
    assert rep.wavefronts_per_phase == (1, 1, 1, 1)
    assert [a.banks[0] // 4 for a in rep.accesses[:8]] == [0, 4, 1, 5, 2, 6, 3, 7]
    # 32B, 32 x 16 fp16 (32-byte rows): row r chunk 0 -> line chunk (r % 4) * 2 + (r // 4) % 2
    rep = bank_conflicts(SharedTile(32, 16, "float16", "32B"), "stmatrix_x4")
    assert [a.banks[0] // 4 for a in rep.accesses[:8]] == [0, 2, 4, 6, 1, 3, 5, 7] and rep.conflict_free
    assert "store twin of ldmatrix" in sw.PATTERNS["stmatrix_x4"]


def test_row_store_element_by_hand():
    # one fp16 per thread along row 0: 64 contiguous bytes, 16 words, one wavefront
    assert bank_conflicts(SharedTile(64, 64, "float16", "128B"), "row_store_element").wavefronts == 1
    # fp32, 64 columns, 32B swizzle: panels of 8 columns, 8 rows x 32 B = 256 B apart -> threads 0-7,
    # 8-15, 16-23, 24-31 all hit banks 0-7: 4 wavefronts (4-way). 128B: 32 fp32 = one 128-byte row.
    rep = bank_conflicts(SharedTile(8, 64, "float32", "32B"), "row_store_element")
    assert rep.wavefronts == 4 and rep.conflict_degree == 4
    assert [a.banks for a in rep.accesses[::8]] == [(0,), (0,), (0,), (0,)]
    assert bank_conflicts(SharedTile(8, 64, "float32", "128B"), "row_store_element").wavefronts == 1
    # fp64: 16 threads a phase, 16 x 8 B = 128 B each: 2 phases, 1 wavefront each
    assert bank_conflicts(SharedTile(8, 32, "float64", "NONE"), "row_store_element").wavefronts_per_phase == (1, 1)
    # continues into the next row: 24 fp32 a row, thread 30 -> (1, 6)
    acc = bank_conflicts(SharedTile(8, 24, "float32", "NONE"), "row_store_element").accesses[30]
    assert (acc.row, acc.col) == (1, 6)


def test_tma_box_writes_are_conflict_free_by_construction():
    assert "conflict-free by construction" in sw.PATTERNS["tma_box_write"]
    for mode in ("NONE", "32B", "64B", "128B", "INTERLEAVE"):
        for dtype, cols in (("float16", 64), ("float32", 32), ("int8", 128), ("float16", 128)):
            tile = SharedTile(16, cols, dtype, mode)
            rep = bank_conflicts(tile, "tma_box_write")
            assert rep.wavefronts_per_phase == (1,) * (tile.nbytes // 128), (mode, dtype)
            # the first phase: 8 granules on 32 distinct banks
            assert sorted(b for a in rep.accesses[:8] for b in a.banks) == list(range(32))
    # and the granules' logical cells are the swizzle's inverse: 128B row 1, physical chunk 0 = logical chunk 1
    rep = bank_conflicts(SharedTile(16, 64, "float16", "128B"), "tma_box_write")
    assert (rep.accesses[8].row, rep.accesses[8].col) == (1, 8)


# -- TileLang's swizzle rule for WGMMA operands ---------------------------------------------------


def test_select_wgmma_inst_n_by_hand():
    # widest multiple of 16 up to 256 dividing the warp's columns; else gcd with 256
    assert [sw.select_wgmma_inst_n(n) for n in (32, 64, 96, 128, 256, 512, 24, 40, 160, 48)] == \
        [32, 64, 96, 128, 256, 256, 8, 8, 160, 48]


def test_wgmma_operand_swizzle_follows_the_instruction_for_mn_major():
    # the conv example's kernel_shared: 64 x 64 fp16, MN-major B, instruction m64n32k16:
    # continuity 32 fp16 = 64 B -> 64B, although its 128-byte rows alone would give 128B
    assert sw.wgmma_operand_swizzle("float16", "MN", inst_mn=32) == "64B"
    assert sw.default_swizzle(64 * 2) == "128B"
    assert sw.wgmma_operand_swizzle("float16", "MN", inst_mn=64) == "128B"  # A is always m64
    assert sw.wgmma_operand_swizzle("float16", "MN", inst_mn=8) == "NONE"  # 16 bytes: linear
    # K-major: the K extent: 32 fp16 = 64 B -> 64B; 64 bf16 -> 128B; 16 fp32 = 64 B -> 64B
    assert sw.wgmma_operand_swizzle("float16", "K", k=32) == "64B"
    assert sw.wgmma_operand_swizzle("bfloat16", "K", k=64) == "128B"
    assert sw.wgmma_operand_swizzle("float32", "K", k=16) == "64B"
    with pytest.raises(ValueError, match="pass inst_mn="):
        sw.wgmma_operand_swizzle("float16", "MN", k=64)


@pytest.mark.parametrize("rows,cols,dtype,mode", [(64, 64, "float16", "128B"), (32, 128, "float32", "64B"),
                                                  (16, 64, "float16", "32B"), (7, 24, "float64", "NONE")])
def test_a_tma_box_write_counts_each_phase_as_the_per_bank_rule_does(rows, cols, dtype, mode):
    """The TMA box write counts its phases at once (a 1024 x 1024 tile in well under a second): each
    phase's wavefronts are what the per-bank rule gives for its eight granules of four words."""
    tile = sw.SharedTile(rows, cols, dtype, mode)
    words = [w // sw.BANK_BYTES for w in range(tile.base, tile.base + tile.nbytes, 16)]
    expected = [sw._phase_wavefronts([[w + i for i in range(4)] for w in words[s:s + 8]])
                for s in range(0, len(words), 8)]
    assert list(sw.bank_conflicts(tile, "tma_box_write").wavefronts_per_phase) == expected
