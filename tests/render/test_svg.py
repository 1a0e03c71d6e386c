"""SVG renderers on strings: well-formed, escaped, themed, bounded in size, saying what they show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tilelab import swizzle as sw
from tilelab.records.kernel import Layout, WgmmaOperand
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
    # small tile: one rect per 4-byte word (one bank) with a hover title naming its byte, bank and chunk
    titles = ["".join(t.itertext()) for t in root.iter(f"{NS}title")]
    assert len(titles) == 8 * 64 // 2
    assert "(3, 8-9): byte 416, bank 8, chunk 2" in titles  # chunk 1 ^ 3 = 2
    labels = _texts(root)
    assert ("colour and number: physical 16-byte chunk (4-bank group) of each element; "
            "hover a cell: every cell of its bank") in labels


def test_text_colours_and_theme_variables():
    text = svg.tile_svg(sw.SharedTile(8, 64, "float16", "128B"))
    assert "var(--jp-ui-font-color1, #222)" in text  # captions and grid lines follow the theme
    assert 'fill="#111"' in text  # cell labels are dark on light fills in every theme
    assert re.search(r'fill="#[0-9a-f]{6}"', text)


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
    for mode in ("NONE", "32B", "64B", "128B", "INTERLEAVE"):
        for color_by in ("chunk", "bank"):
            text = svg.tile_svg(sw.SharedTile(256, 256, "float16", mode), color_by=color_by)
            _parse(text)
            assert len(text) < 200_000, (mode, color_by, len(text))
            assert "showing rows" not in text  # repeated rows are reused, not cropped


def test_large_irregular_layout_is_cropped_with_a_caption():
    import numpy as np

    rng = np.random.default_rng(0)
    offsets = rng.permutation(512 * 512)
    layout = Layout(buffer="big", scope="shared", dtype="float16", shape=(512, 512),
                    offsets=tuple(int(v) for v in offsets))
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
    # T<thread> over v<register>, by the hand formula of _fragment: (0, 2) -> thread 1, register 0;
    # (8, 3) -> thread 1, register 3; (15, 15) -> thread 7 * 4 + 3 + 32 = 63, register 3
    assert labels.count("T129v0") == 1 and "T129v3" in labels and "T191v3" in labels
    assert any("threads 128-191; cell: T<thread> v<register>; colour: warp" in t for t in labels)
    assert "thread 133: 4 element(s), registers [0, 1, 2, 3]" in text
    # readable: cells wide enough for the label at 9 px monospace (about 0.62 em a character)
    rect = next(r for r in root.iter(f"{NS}rect") if r.get("class") == "t129")
    assert float(rect.get("width")) >= 0.62 * 9 * 4 + 4 and float(rect.get("height")) >= 2 * 9


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
    root = ET.fromstring(text)  # a row of pictures that wraps where the output is narrow
    nested = root.findall(f"{NS}svg")
    assert len(nested) == 2
    assert "32 wavefront(s) for an ideal 4: 8-way bank conflict" in text
    assert "4 wavefront(s) for an ideal 4: no bank conflicts" in text
    # a mode that cannot hold the tile says why instead of failing
    assert "not applicable" in svg.compare_svg(32, 32, "float16", ("128B", "64B"))


# -- cell colours rebuilt from the SVG, against chunk/bank tables computed here by hand ---------------


def _hand_chunk_bank(mode: str, r: int, c: int) -> tuple[int, int]:
    """Physical 16-byte chunk of the 128-byte line and bank of fp16 element (r, c), by hand:
    NONE (rows of whole 128-byte lines): (c / 8) mod 8. 128B: ((c / 8) mod 8) XOR (r mod 8). 64B (panels of
    32 columns, 64-byte rows, 2 rows a line): (r mod 2) * 4 + ((c mod 32) / 8 XOR (r / 2) mod 4).
    32B (panels of 16 columns, 4 rows a line): (r mod 4) * 2 + ((c mod 16) / 8 XOR (r / 4) mod 2).
    Panels start at multiples of 128 B, so they keep the line position. bank = 4 chunk + (c mod 8) / 2."""
    k = c // 8
    chunk = {"NONE": k % 8, "128B": (k % 8) ^ (r % 8), "64B": (r % 2) * 4 + ((k % 4) ^ ((r // 2) % 4)),
             "32B": (r % 4) * 2 + ((k % 2) ^ ((r // 4) % 2))}[mode]
    return chunk, 4 * chunk + (c % 8) // 2


def _cell_fills(text: str, rows: int, cols: int) -> dict[tuple[int, int], str]:
    """(row, col) -> fill, rebuilt from the SVG: explicit cells (each row a <g class="r<i>"> of rects)
    or rows drawn once in <defs> and placed with <use>. Runs are cut into cells of grid width / cols."""
    root = _parse(text)
    runs: dict[int, list[tuple[float, float, str]]] = {}
    explicit = [g for g in root.iter(f"{NS}g") if re.fullmatch(r"r\d+", g.get("class") or "")]
    if explicit:
        for g in explicit:
            runs[int(g.get("class")[1:])] = [(float(r.get("x")), float(r.get("width")), r.get("fill"))
                                             for r in g.findall(f"{NS}rect")]
    else:
        defs = {g.get("id"): g for g in root.iter(f"{NS}g") if g.get("id")}
        for use in root.iter(f"{NS}use"):
            row = defs[use.get("{http://www.w3.org/1999/xlink}href")[1:]]
            i = int(use.get("class").split()[0][1:])
            runs[i] = [(float(r.get("x")), float(r.get("width")), r.get("fill")) for r in row.findall(f"{NS}rect")]
    assert sorted(runs) == list(range(rows))
    out: dict[tuple[int, int], str] = {}
    for i, items in runs.items():
        items.sort()
        cw = (items[-1][0] + items[-1][1] - items[0][0]) / cols
        for x, w, fill in items:
            first = round((x - items[0][0]) / cw)
            for j in range(first, first + round(w / cw)):
                out[(i, j)] = fill
    assert len(out) == rows * cols
    return out


@pytest.mark.parametrize("mode", ["NONE", "32B", "64B", "128B"])
@pytest.mark.parametrize("shape", [(32, 64), (256, 256)])  # explicit cells, and <defs>/<use> rows
def test_cell_colours_rebuilt_from_the_svg_follow_the_hand_tables(mode, shape):
    rows, cols = shape
    tile = sw.SharedTile(rows, cols, "float16", mode)
    for color_by, which in (("chunk", 0), ("bank", 1)):
        fills = _cell_fills(svg.tile_svg(tile, color_by=color_by), rows, cols)
        colour_of: dict[int, str] = {}
        for (r, c), fill in fills.items():
            want = _hand_chunk_bank(mode, r, c)[which]  # NONE: rows are whole 128-byte lines
            assert colour_of.setdefault(want, fill) == fill, (mode, color_by, r, c)
        # one colour per chunk (8) or bank (32), never shared between two
        assert len(set(colour_of.values())) == len(colour_of) == (8 if which == 0 else 32)


def test_hover_classes_and_css_are_structural():
    tile = sw.SharedTile(32, 64, "float16", "128B")
    text = svg.tile_svg(tile)
    root = _parse(text)
    uid = root.get("id")
    assert uid and uid.startswith("tl")
    style = "".join(s.text for s in root.iter(f"{NS}style"))
    for b in range(32):  # one rule per bank: hovering a bank-b cell strokes every bank-b cell
        assert f"#{uid}:has(.b{b}:hover) .b{b}{{stroke: var(--jp-brand-color1, #d6336c)" in style
    rows = [g for g in root.iter(f"{NS}g") if re.fullmatch(r"r\d+", g.get("class") or "")]
    assert len(rows) == 32
    for g in rows:
        r = int(g.get("class")[1:])
        rects = g.findall(f"{NS}rect")
        assert len(rects) == 32  # one per 4-byte word (two fp16, one bank)
        for word, rect in enumerate(rects):
            chunk, bank = _hand_chunk_bank("128B", r, 2 * word)
            assert rect.get("class") == f"k{chunk} b{bank}", (r, word, rect.get("class"))
    chunk_css = svg.tile_svg(tile, hover="chunk")
    assert ":has(.k7:hover) .k7{" in chunk_css and ":has(.b7:hover)" not in chunk_css
    assert "g.tlcells > g:hover > rect{" in svg.tile_svg(tile, hover="row")
    assert "<style>" not in svg.tile_svg(tile, hover="none")
    # big tiles are drawn with <use>: whole rows hover (cells inside <use> cannot), the caption says so
    big = svg.tile_svg(sw.SharedTile(256, 256, "float16", "128B"))
    broot = _parse(big)
    uses = list(broot.iter(f"{NS}use"))
    assert len(uses) == 256 and uses[9].get("class") == "r9 p1"  # row 9 repeats row 1's pattern
    assert f"#{broot.get('id')} use:hover{{" in big and ":has(.p1:hover) .p1{" in big
    assert "hover a row: it and every row with its pattern" in big


def test_fragment_thread_hover():
    text = svg.layout_svg(_fragment())
    root = _parse(text)
    uid = root.get("id")
    threads = {int(r.get("class")[1:]) for r in root.iter(f"{NS}rect") if (r.get("class") or "").startswith("t")}
    assert threads == set(range(128, 192))
    for t in (128, 191):
        assert f"#{uid}:has(.t{t}:hover) .t{t}{{" in text
    # thread 129 owns (0, 2), (0, 3), (8, 2), (8, 3) by the hand formula: two runs of two cells
    runs = [r for r in root.iter(f"{NS}rect") if r.get("class") == "t129"]
    assert len(runs) == 2 and all(float(r.get("width")) > 50 for r in runs)


def test_interleave_overlay_arrows():
    desc = sw.wgmma_descriptor(sw.SharedTile(32, 64, "float16", "INTERLEAVE", core_order="chunks"), "MN",
                               operand="B", mn=64)
    text = svg.wgmma_operand_svg(desc)
    _parse(text)
    # MN-major without swizzle: LBO steps 8 K rows (8 chunks x 128 B), SBO 16 B of MN (128 B)
    assert "LBO 1024 B (enc 64): next 8 rows of K" in text and "SBO 128 B (enc 8): next 16 B of MN" in text
    k = sw.wgmma_descriptor(sw.SharedTile(64, 32, "float16", "INTERLEAVE"), "K", operand="A")
    ktext = svg.wgmma_operand_svg(k, compiler=WgmmaOperand("A_shared", 0, 64, 8, "K"))
    assert "SBO 128 B (enc 8): next 8 rows of MN" in ktext and "LBO 1024 B (enc 64): next 16 B of K" in ktext
    assert "agrees with tilelab" in ktext


def test_render_speed_benchmark_fails_when_a_target_is_missed(monkeypatch, capsys):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "render_speed.py"
    spec = importlib.util.spec_from_file_location("render_speed", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(sys, "argv", ["render_speed.py", "--repeat", "1"])
    monkeypatch.setattr(bench, "TARGET_MS", 1e9)  # a test never times: only the weights decide here
    assert bench.main() == 0  # every picture is under its weight target
    monkeypatch.setattr(bench, "TARGET_KB", 1.0)  # nothing weighs under 1 KB
    assert bench.main() == 1
    assert "missed the target: tile_svg 256x256 fp16 NONE by chunk" in capsys.readouterr().err


def test_wgmma_overlay_is_legible_legend_on_top_caption_within_width():
    import re

    tile = sw.SharedTile(64, 64, "float16", "SWIZZLE_128B")
    text = svg.wgmma_operand_svg(sw.wgmma_descriptor(tile, "K", operand="A"))
    width, height = (float(v) for v in re.search(r'<svg[^>]*width="(\d+)" height="(\d+)"', text).groups())
    texts = [(float(x), float(y), int(size), body) for x, y, size, body in
             re.findall(r'<text x="([\d.]+)" y="([\d.]+)" font-size="(\d+)"[^>]*>([^<]*)</text>', text)]
    # the legend sits above the grid: before the first cell rectangle
    legend_y = next(y for x, y, size, body in texts if body.startswith("outlined: the core matrices"))
    first_rect_y = min(float(y) for y in re.findall(r'<rect x="[\d.]+" y="([\d.]+)"', text))
    assert legend_y < first_rect_y
    # every line of text fits inside the picture (0.62 em per character) and none is tiny
    for x, y, size, body in texts:
        assert x + 0.62 * size * len(body) <= width + 1, body
        assert y <= height
    labels = re.search(r'<g font-size="(\d+)" text-anchor="middle"', text)
    assert labels and int(labels.group(1)) >= 12  # the chunk digits
    cells = re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)" height="([\d.]+)"', text)
    assert min(float(h) for w, h in cells) >= 16 and height > 300


def _full_cells(root: ET.Element) -> dict[tuple[float, float], tuple[str, float]]:
    """The explicit picture's cells: the fill at each cell's centre, and the cell's left edge."""
    fills = {}
    for row in root.find(f".//{NS}g[@class='tlcells']"):
        y = float(re.search(r"translate\(0 ([\d.]+)\)", row.get("transform")).group(1))
        for rect in row.iter(f"{NS}rect"):
            x, w, h = (float(rect.get(k)) for k in ("x", "width", "height"))
            fills[(x + w / 2, y + h / 2)] = (rect.get("fill"), x)
    return fills


def _preview_fill(root: ET.Element, x: float, y: float) -> str | None:
    """The fill of the preview's path whose run holds (x, y)."""
    for path in root.iter(f"{NS}path"):
        for x0, y0, w, h in re.findall(r"M([\d.]+) ([\d.]+)h([\d.]+)v([\d.]+)h-[\d.]+z", path.get("d", "")):
            if float(x0) <= x <= float(x0) + float(w) and float(y0) <= y <= float(y0) + float(h):
                return path.get("fill")
    return None


@pytest.mark.parametrize("dtype,color_by", [("float16", "chunk"), ("float64", "bank"), ("int8", "bank")])
def test_the_preview_looks_as_the_full_picture_in_a_few_elements(dtype, color_by):
    """The explorer's preview (shown while its controls move) has the full picture's size, words,
    numbers and the colour of every cell, with its cells' white borders, in a few elements and
    without hover rules or titles; the full picture keeps an element and a title per cell."""
    cols = {"float16": 64, "float64": 16, "int8": 128}[dtype]
    tile = sw.SharedTile(16, cols, dtype, "128B")
    report = sw.bank_conflicts(tile, "column_read")
    options = {"color_by": color_by, "report": report, "highlight": {"row": 2}, "max_rows": 32, "fit_width": 540}
    full, preview = svg.tile_svg(tile, **options), svg.tile_svg(tile, preview=True, **options)
    a, b = _parse(full), _parse(preview)
    assert [a.get(k) for k in ("width", "height", "viewBox")] == [b.get(k) for k in ("width", "height", "viewBox")]
    assert b.get("class") == "tl-preview" and a.get("class") is None
    where = [[(t.get("x"), t.get("y"), "".join(t.itertext())) for t in r.iter(f"{NS}text")] for r in (a, b)]
    assert where[0] == where[1]  # every caption and cell number, at the same place
    fills = _full_cells(a)
    assert len(fills) == len(list(a.iter(f"{NS}title"))) == 16 * cols * sw.dtype_bytes(dtype) // max(
        4, sw.dtype_bytes(dtype))  # a rect and a title per 4-byte word (per element of 8 bytes)
    sample = list(fills.items())[:: max(1, len(fills) // 97)]
    assert all(_preview_fill(b, x, y) == fill for (x, y), (fill, _) in sample)
    # the borders: where each cell's rect had its white stroke, one path of lines
    borders = [p for p in b.iter(f"{NS}path") if p.get("stroke") == "#fff"]
    assert len(borders) == 1
    lines = {round(float(v), 1) for v in re.findall(r"M([\d.]+) [\d.]+V", borders[0].get("d"))}
    assert {round(left, 1) for _, left in fills.values()} <= lines
    assert sum(1 for _ in b.iter()) < 140 < sum(1 for _ in a.iter())
    assert b.find(f"{NS}style") is None and b.find(f".//{NS}title") is None
    # and the outlines (the accesses, the highlighted row) are the same
    outline = [sorted((r.get("x"), r.get("y"), r.get("width")) for r in t.iter(f"{NS}rect") if r.get("fill") == "none")
               for t in (a, b)]
    assert outline[0] == outline[1] and outline[0]
