"""The shared-tile picture's structure against hand-derived tables: which cells it draws, with
which chunk and bank, how it crops, and what its captions say.

The swizzle tables are derived by hand from the driver's definition of CU_TENSOR_MAP_SWIZZLE_128B
(16-byte chunk index XOR row % 8 within each 128-byte row; 32 banks of 4 bytes), not from
tilelab's own maths, so a drawing step that moved or dropped a cell fails here."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tilelab import swizzle as sw
from tilelab.records.kernel import Layout
from tilelab.render.svg import layout_svg, tile_svg

NS = {"s": "http://www.w3.org/2000/svg"}


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _row_groups(root: ET.Element) -> list[ET.Element]:
    cells = root.find(".//s:g[@class='tlcells']", NS)
    assert cells is not None, "no explicit cells"
    return [g for g in cells if re.fullmatch(r"r\d+", g.get("class", ""))]


def _chunk_128b(r: int, c: int, e: int) -> int:
    """Physical 16-byte chunk of logical element (r, c) of a tile with 128-byte rows, 128B swizzle."""
    return ((c * e) // 16) ^ (r % 8)


def _bank_128b(r: int, c: int, e: int) -> int:
    byte = _chunk_128b(r, c, e) * 16 + (c * e) % 16  # rows are 128 B apart: whole bank lines
    return (byte // 4) % 32


def test_a_128b_fp16_tile_draws_every_word_with_its_chunk_and_bank():
    svg = tile_svg(sw.SharedTile(8, 64, "float16", "128B"))
    root = _parse(svg)
    rows = _row_groups(root)
    assert len(rows) == 8
    for r, group in enumerate(rows):
        rects = group.findall("s:rect", NS)
        # one rect per 4-byte word: two fp16 elements share a bank
        assert len(rects) == 32
        for w, rect in enumerate(rects):
            c = 2 * w
            assert rect.get("class") == f"k{_chunk_128b(r, c, 2)} b{_bank_128b(r, c, 2)}"
            title = rect.find("s:title", NS).text
            assert title.startswith(f"({r}, {c}-{c + 1}): byte ")
            assert title.endswith(f"bank {_bank_128b(r, c, 2)}, chunk {_chunk_128b(r, c, 2)}")
    # the number drawn on each run of one chunk is that chunk: row r reads k ^ r for k = 0..7,
    # one <text> per row with one x per digit, each at the middle of its chunk's 8 elements
    labels = root.findall(".//s:g[@pointer-events='none']/s:text", NS)
    assert len(labels) == 8
    first = rows[0].findall("s:rect", NS)
    left = float(first[0].get("x"))
    # 64 columns; each x and width is rounded to 0.1 px
    cw = (float(first[-1].get("x")) + float(first[-1].get("width")) - left) / 64
    for r, text in enumerate(labels):
        assert [int(d) for d in text.text] == [k ^ r for k in range(8)]
        xs = [float(x) for x in text.get("x").split()]
        assert xs == pytest.approx([left + (8 * k + 4) * cw for k in range(8)], abs=0.11)
    # hover: one rule per bank present (all 32), none for chunks
    assert len(re.findall(r":has\(\.b\d+:hover\)", svg)) == 32
    assert "hover a cell: every cell of its bank" in svg


def test_bank_colouring_of_an_8_byte_tile_names_both_banks_of_each_element():
    svg = tile_svg(sw.SharedTile(8, 16, "float64", "128B"), color_by="bank")
    root = _parse(svg)
    for r, group in enumerate(_row_groups(root)):
        rects = group.findall("s:rect", NS)
        assert len(rects) == 16  # one per 8-byte element
        for c, rect in enumerate(rects):
            b = _bank_128b(r, c, 8)
            assert rect.get("class") == f"k{_chunk_128b(r, c, 8)} b{b} b{(b + 1) % 32}"
    assert "bank (0-31) of each element&#x27;s 4-byte word" in svg


def test_a_large_tile_draws_each_of_its_8_row_patterns_once():
    tile = sw.SharedTile(256, 128, "bfloat16", "128B")
    svg = tile_svg(tile, hover="row")
    root = _parse(svg)
    uses = root.findall(".//s:use", NS)
    patterns = root.findall("s:defs/s:g", NS)
    assert len(uses) == 256  # every row placed
    assert len(patterns) == 8  # the 128B swizzle repeats every 8 rows; the 8 differ
    assert {u.get("class").split()[1] for u in uses[8:16]} == {f"p{i}" for i in range(8)}
    # each pattern: two 64-column panels of 8 chunks, each chunk one run of 8 elements
    assert all(len(g.findall("s:rect", NS)) == 16 for g in patterns)
    assert "hover a row: it and every row with its pattern (cell hover below 2048 cells)" in svg
    assert "showing rows" not in svg  # nothing cropped


def test_crops_say_what_they_show():
    offsets = tuple(int(v) for v in sw.SharedTile(64, 64, "float16", "128B").offsets().ravel())
    layout = Layout(buffer="A_shared", scope="shared", dtype="float16", shape=(64, 64), offsets=offsets,
                    description="")
    # a hover crop of 256 cells keeps whole 8-row bands: 8 rows of 64 columns
    cropped = layout_svg(layout, hover_crop=256, titles=False)
    assert "showing rows 0-7, cols 0-63 of 64x64" in cropped
    assert len(_row_groups(_parse(cropped))) == 8
    assert "<title>" not in cropped
    capped = tile_svg(sw.SharedTile(64, 64, "float16", "128B"), max_rows=8)
    assert "showing rows 0-7, cols 0-63 of 64x64 (max_rows=8: swizzles repeat within 8 rows of 128 bytes)" in capped
    highlighted = tile_svg(sw.SharedTile(16, 64, "float16", "128B"), highlight={"row": 3, "chunk": 1})
    assert "row 3: physical chunks " + " ".join(str(k ^ 3) for k in range(8)) in highlighted
    assert "logical chunk 1: physical chunks by row " + " ".join(str(1 ^ (r % 8)) for r in range(16)) in highlighted


def test_a_conflict_reports_accesses_are_outlined():
    tile = sw.SharedTile(32, 64, "float16", "NONE")
    report = sw.bank_conflicts(tile, "column_read")
    svg = tile_svg(tile, report=report, highlight={"thread": 5})
    root = _parse(svg)
    outlines = [r for r in root.findall("s:rect", NS) if r.get("fill") == "none"]
    # 32 threads each read 16 bytes down column chunk 0; thread 5's is solid, the rest dashed
    assert len(outlines) == 32
    assert sum(1 for r in outlines if r.get("stroke-dasharray") is None) == 1
    assert "thread 5: (5, 0), byte 640" in svg


def test_a_wgmma_operand_picture_outlines_the_core_matrices_one_instruction_reads():
    from tilelab.records.kernel import WgmmaOperand

    # A, 64x64 fp16, 128B swizzle, K-major: one instruction reads 64 rows (8 core matrices of 8
    # rows) by 32 bytes of K (2 chunks): 16 core matrices. With 128-byte swizzled rows, the next 8
    # rows are 8 x 128 = 1024 B away (SBO, encoded >> 4 = 64); LBO is unused (encoded 1).
    desc = sw.wgmma_descriptor(sw.SharedTile(64, 64, "float16", "128B"), "K", operand="A")
    from tilelab.render.svg import wgmma_operand_svg

    agree = wgmma_operand_svg(desc, compiler=WgmmaOperand("A_shared", 1, 1, 64, "K"))
    root = _parse(agree)
    # the outlines share one unfilled group that carries their style
    outlines = root.findall("s:g[@fill='none']/s:rect[@stroke-width='1.6']", NS)
    assert len(outlines) == 16
    # in a 128B-swizzled K-major A, one instruction's core matrices are the first 2 chunk columns
    # by the 8 bands of 8 rows: each outline one chunk wide and 8 rows tall
    xs = sorted({float(r.get("x")) for r in outlines})
    ys = sorted({float(r.get("y")) for r in outlines})
    assert len(xs) == 2 and len(ys) == 8
    cw, band = xs[1] - xs[0], ys[1] - ys[0]
    assert all(float(r.get("width")) == pytest.approx(cw) and float(r.get("height")) == pytest.approx(band)
               for r in outlines)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    # the arrows' words below the grid, led by their direction (the picture fits a laptop's output)
    assert "\u2193 (right of the grid) SBO 1024 B (enc 64): next 8 rows of MN" in texts
    assert "\u2192 LBO: next 16 B of K (unused when swizzled; enc 1)" in texts
    assert float(root.get("width")) <= 480
    assert "compiler's descriptor agrees with tilelab" in texts
    differs = wgmma_operand_svg(desc, compiler=WgmmaOperand("A_shared", 1, 1, 32, "K"))
    assert "compiler emitted layout_type 1, LBO 1, SBO 32: differs from tilelab" in differs
    # the 8 chunk labels of row r read k ^ r, as in the shared picture
    first_row = "".join(t.text for t in root.findall(".//s:defs/s:g[1]//s:text", NS))
    assert [int(d) for d in first_row] == list(range(8))


def test_a_fragment_picture_labels_every_cell_with_its_thread_and_register():
    from tilelab.render.svg import fragment_svg

    # 2 x 8 accumulator: row 0 held by threads 0-7 (register 0), row 1 by threads 32-39 (register 1),
    # with the consumer warp group starting at thread 128
    threads = tuple(range(8)) + tuple(range(32, 40))
    layout = Layout(buffer="C_local", scope="fragment", dtype="float32", shape=(2, 8), threads=threads,
                    locals_=(0,) * 8 + (1,) * 8, thread_base=128, thread_count=64, description="")
    svg_text = fragment_svg(layout, highlight={"warp": 5})
    root = _parse(svg_text)
    cells = [(t.text, t.find("s:tspan", NS).text) for t in root.findall(".//s:g[@pointer-events='none']/s:text", NS)]
    assert cells == [(f"T{128 + t}", f"v{0 if t < 32 else 1}") for t in threads]
    # warp 5 is threads 160-191: the second row
    outlines = [r for r in root.findall("s:rect", NS) if r.get("fill") == "none"]
    assert len(outlines) == 8
    assert "warp 5: 8 element(s)" in svg_text
    assert "threads 128-191" in svg_text
    assert len(_row_groups(root)) == 2
