"""SVG renderers on strings: well-formed, escaped, themed, bounded in size, saying what they show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from tilelab import swizzle as sw
from tilelab._model import Layout, WgmmaOperand
from tilelab.render import svg

NS = "{http://www.w3.org/2000/svg}"


def _parse(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == f"{NS}svg"
    return root


def _texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def test_tile_colours_follow_the_xor():
    tile = sw.SharedTile(8, 64, "float16", "128B")
    root = _parse(svg.tile_svg(tile))
    # small tile: one rect per element with a hover title naming its byte, bank and chunk
    titles = ["".join(t.itertext()) for t in root.iter(f"{NS}title")]
    assert len(titles) == 8 * 64
    assert "(3, 8) -> element 208, byte 416, bank 8, chunk 2" in titles  # chunk 1 ^ 3 = 2
    # the labels of row 3 read the XOR pattern 3 2 1 0 7 6 5 4 (one label per 16-byte run)
    labels = _texts(root)
    assert "colour and number: physical 16-byte chunk (4-bank group) of each element" in labels


def test_text_colours_and_theme_variables():
    text = svg.tile_svg(sw.SharedTile(8, 64, "float16", "128B"))
    assert "var(--jp-ui-font-color1, #222)" in text  # captions and grid lines follow the theme
    assert 'fill="#111"' in text  # cell labels are dark on light fills in every theme
    assert "hsl(" in text


def test_highlight_row_chunk_and_thread():
    tile = sw.SharedTile(16, 64, "float16", "128B")
    report = sw.bank_conflicts(tile, "column_read")
    text = svg.tile_svg(tile, highlight={"row": 3, "chunk": 1, "thread": 5}, report=report)
    _parse(text)
    assert "row 3: physical chunks 3 2 1 0 7 6 5 4" in text
    assert "logical chunk 1: physical chunks by row 1 0 3 2 5 4 7 6 1 0 3 2 5 4 7 6" in text
    assert "thread 5: (5, 0), byte 720, banks 20, 21, 22, 23, phase 0" in text  # 5*128 + (0^5)*16
    assert text.count('stroke-dasharray="2 2"') == 31  # the other 31 threads' accesses


def test_escaping_of_compiler_and_user_text():
    layout = sw.SharedTile(8, 64, "float16", "64B").to_layout('A_<script>alert("x")</script>')
    text = svg.layout_svg(layout)
    _parse(text)
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_256x256_is_small_and_complete():
    for mode in ("NONE", "128B"):
        for color_by in ("chunk", "bank"):
            text = svg.tile_svg(sw.SharedTile(256, 256, "float16", mode), color_by=color_by)
            _parse(text)
            assert len(text) < 200_000, (mode, color_by, len(text))
            assert "showing rows" not in text  # repeated rows are reused, not cropped


def test_large_irregular_layout_is_cropped_with_a_caption():
    import numpy as np

    rng = np.random.default_rng(0)
    offsets = rng.permutation(512 * 512)
    layout = Layout(buffer="big", scope="shared", dtype="float16", shape=(512, 512), offsets=tuple(int(v) for v in offsets))
    text = svg.layout_svg(layout, max_cells=2048)
    _parse(text)
    assert "showing rows 0-" in text and "of 512x512 (max_cells=2048)" in text
    assert len(text) < 400_000


def test_layout_svg_names_the_matching_mode():
    text = svg.layout_svg(sw.SharedTile(32, 64, "bfloat16", "128B").to_layout("B_shared"))
    assert "matches tilelab&#x27;s 128B swizzle" in text or "matches tilelab's 128B swizzle" in text
    empty = Layout(buffer="huge", scope="shared", dtype="float16", shape=(4096, 4096), description="too big")
    assert "too large to tabulate" in svg.layout_svg(empty)


def _fragment(rows=16, cols=16, base=128):
    # thread of (i, j): 4 threads per row-pair quad, like an mma accumulator, by hand
    threads = [((i % 8) * 4 + (j % 8) // 2 + 32 * (j // 8)) for i in range(rows) for j in range(cols)]
    locals_ = [(i // 8) * 2 + (j % 2) for i in range(rows) for j in range(cols)]
    return Layout(buffer="C_local", scope="fragment", dtype="float32", shape=(rows, cols), threads=tuple(threads),
                  locals_=tuple(locals_), thread_base=base, thread_count=64)


def test_fragment_thread_grid():
    text = svg.layout_svg(_fragment(), highlight={"thread": 128 + 5})
    root = _parse(text)
    labels = _texts(root)
    assert "T128" in labels and "T133" in labels and "T191" in labels
    assert "threads 128-191; colour: warp" in text
    assert "thread 133: 4 element(s), registers [0, 1, 2, 3]" in text
    titles = ["".join(t.itertext()) for t in root.iter(f"{NS}title")]
    assert "(0, 2): thread 129 (warp 4), register 0" in titles


def test_fragment_large_is_cropped():
    text = svg.fragment_svg(_fragment(128, 256), max_cells=1024)
    _parse(text)
    assert "of 128x256 (max_cells=1024)" in text
    assert len(text) < 200_000


def test_wgmma_operand_overlay():
    desc = sw.wgmma_descriptor(sw.SharedTile(32, 128, "float16", "128B"), "MN", operand="B", mn=64)
    text = svg.wgmma_operand_svg(desc)
    _parse(text)
    assert "SBO 1024 B (enc 64): next 8 rows of K" in text
    assert "LBO 4096 B (enc 256): next 128-byte panel of MN" in text
    assert 'marker-end="url(#' in text
    # 8 MN chunks x 2 K groups of core matrices outlined
    assert len(re.findall(r'stroke-width="1.6"', text)) == 16


def test_wgmma_operand_from_report_model():
    compiler = WgmmaOperand(buffer="A_shared", layout_type=1, lbo=1, sbo=64, major="K")
    text = svg.wgmma_operand_svg(compiler, shape=(128, 64), dtype="float16")
    _parse(text)
    assert "compiler&#x27;s descriptor agrees with tilelab" in text or "compiler's descriptor agrees" in text
    assert "LBO: next 16 B of K (unused when swizzled; enc 1)" in text
    wrong = WgmmaOperand(buffer="A_shared", layout_type=1, lbo=1, sbo=32, major="K")
    assert "differs from tilelab" in svg.wgmma_operand_svg(wrong, shape=(128, 64))
    assert "pass shape=" in svg.wgmma_operand_svg(compiler)


def test_compare_two_modes():
    text = svg.compare_svg(32, 64, "float16", ("NONE", "128B"))
    root = _parse(text)
    nested = root.findall(f"{NS}svg")
    assert len(nested) == 2
    assert "32 wavefront(s) for an ideal 4: 8-way bank conflict" in text
    assert "4 wavefront(s) for an ideal 4: no bank conflicts" in text
    # a mode that cannot hold the tile says why instead of failing
    assert "not applicable" in svg.compare_svg(32, 32, "float16", ("128B", "64B"))
