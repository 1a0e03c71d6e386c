"""Every picture reads at a 1000 px laptop width: geometry of the SVG elements, checked on strings.

What is checked, for each picture a user meets (the inspector's shared, bank and fragment
pictures of a Hopper GEMM, the WGMMA overlays, the swizzle lesson's NONE/128B comparison, the
explorer's tiles):

* the picture scales to its output's width by its viewBox (``max-width: 100%``), and shown at
  most 1000 px wide no text is under 10 px: font size x min(1, 1000 / viewBox width) >= 10;
* every caption is whole: each line fits the picture's width (0.62 em a character, the widest
  monospace advance), no phrase is cut mid-word (the words of each caption line up again);
* coloured by bank, every one of the 32 banks has its number drawn, computed here by hand from
  the layout's own offsets (not from tilelab's maths);
* the LBO/SBO arrows never cross a cell: each arrow's segment lies outside the grid's box;
* a fragment too large to draw whole shows one warp's unit: every thread of the first warp, by
  hand from the layout's thread table.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tilelab import swizzle as sw
from tilelab.records.kernel import Layout
from tilelab.render import svg

NS = "{http://www.w3.org/2000/svg}"
SHOWN_WIDTH = 1000.0  # px: the laptop width the pictures must read at


def _font_sizes(root: ET.Element) -> list[tuple[float, str]]:
    """(font size, text) of every text element, the size inherited from its group when unset."""
    out = []

    def walk(node: ET.Element, inherited: float | None) -> None:
        size = float(node.get("font-size")) if node.get("font-size") else inherited
        if node.tag in (f"{NS}text", f"{NS}tspan") and (node.text or "").strip():
            assert size is not None, ET.tostring(node)[:80]
            out.append((size, node.text))
        for child in node:
            walk(child, size)

    walk(root, None)
    return out


def _view_width(root: ET.Element) -> float:
    return float(root.get("viewBox").split()[2])


def assert_legible(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert "max-width: 100%" in root.get("style") and root.get("viewBox"), "the picture must scale to the width"
    scale = min(1.0, SHOWN_WIDTH / _view_width(root))
    sizes = _font_sizes(root)
    assert sizes
    small = [(size * scale, body) for size, body in sizes if size * scale < 10]
    assert not small, small[:5]
    # every line of words fits its picture (nested pictures: their own width)
    for pic in [root, *root.iter(f"{NS}svg")]:
        width = float(pic.get("width"))
        for t in pic.findall(f"{NS}text"):
            body = "".join(t.itertext())
            if t.get("x") and " " in body:  # a caption line (cell labels are placed digit by digit)
                x = float(t.get("x").split()[0])
                anchor = 0.5 if t.get("text-anchor") == "middle" else 0.0
                assert x + (1 - anchor) * 0.62 * float(t.get("font-size")) * len(body) <= width + 1, body
    return root


def _caption_text(root: ET.Element) -> str:
    """The picture's words, line after line (not the cell labels, drawn in their own group)."""
    labels = {id(t) for g in root.iter(f"{NS}g") if g.get("pointer-events") == "none" or g.get("text-anchor")
              for t in g.iter(f"{NS}text")}
    return " ".join("".join(t.itertext()) for t in root.iter(f"{NS}text") if id(t) not in labels)


@pytest.fixture(scope="module")
def gemm_report():
    pytest.importorskip("tilelang", reason="TileLang is not installed: no compiler output")
    from gemm import matmul

    import tilelab

    return tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a")


def _row_label_numbers(root: ET.Element) -> list[list[int]]:
    """Each row's drawn labels, split into numbers where the gap between characters passes one
    character's advance (the characters of one label sit 0.6 em apart)."""
    group = root.find(f".//{NS}g[@pointer-events='none']")
    font = float(group.get("font-size"))
    rows = []
    for t in group.findall(f"{NS}text"):
        xs = [float(x) for x in t.get("x").split()]
        assert len(xs) == len(t.text)
        numbers, word = [], t.text[0]
        for k in range(1, len(xs)):
            if xs[k] - xs[k - 1] > 0.6 * font + 0.2:
                numbers.append(int(word))
                word = ""
            word += t.text[k]
        numbers.append(int(word))
        rows.append(numbers)
    return rows


def test_the_page_bank_picture_numbers_every_bank_from_the_compilers_offsets(gemm_report):
    # the inspector's bank picture of B_shared (32 x 128 fp16, two 128B-swizzled panels)
    layout = gemm_report.layout("B_shared")
    text = svg.layout_svg(layout, color_by="bank", max_cells=256, hover_crop=256, titles=False)
    root = assert_legible(text)
    offsets = layout.array("offsets")
    rows = _row_label_numbers(root)
    assert rows
    for r, numbers in enumerate(rows):
        # by hand: the bank of each 4-byte word (two fp16) of row r, from the compiler's offsets
        want = [int(offsets[r, c] * 2 // 4) % 32 for c in range(0, layout.shape[1], 2)]
        assert numbers == want, r
    assert {n for numbers in rows for n in numbers} == set(range(32))


def test_a_bank_picture_too_wide_for_numbers_draws_none_and_says_so():
    text = svg.tile_svg(sw.SharedTile(16, 256, "float16", "128B"), color_by="bank")
    root = assert_legible(text)
    assert root.find(f".//{NS}g[@pointer-events='none']") is None
    assert "too many columns for the bank numbers" in _caption_text(root)


def test_the_inspector_pictures_of_a_hopper_gemm_read_at_1000_px(gemm_report):
    from page_text import unfold

    from tilelab.render.html import section_body

    body = unfold(section_body(gemm_report, "layouts"))
    pictures = re.findall(r"<svg .*?</svg>(?=</div>)", body, re.DOTALL)
    assert len(pictures) >= 5  # A, B, their bank pictures, the overlays, C_local
    for picture in pictures:
        assert_legible(picture)


def test_the_fragment_picture_shows_one_warps_unit_and_says_which(gemm_report):
    layout = gemm_report.layout("C_local")
    threads = layout.array("threads") + layout.thread_base
    for max_cells, rows in ((64, 8), (1024, 16)):
        text = svg.layout_svg(layout, max_cells=max_cells)
        root = assert_legible(text)
        labels = [(t.text, t.find(f"{NS}tspan").text)
                  for t in root.findall(f".//{NS}g[@pointer-events='none']/{NS}text")]
        shown = {int(th[1:]) for th, _ in labels}
        # by hand: warp of element (0, 0) and all of its threads, from the compiler's thread table
        w0 = int(threads[0, 0]) // 32
        assert shown == set(range(32 * w0, 32 * w0 + 32))
        assert len(labels) == rows * 8
        caption = _caption_text(root)
        assert f"showing rows 0-{rows - 1}, cols 0-7 of 128x128" in caption
        assert f"every one of warp {w0}'s 32 threads" in caption
        # each of the 256 threads holds 128 * 128 / 256 elements
        assert "a thread holds 64 in all" in caption
        assert "cols 8-15 hold the same threads' next registers" in caption
        # the next 8 columns really are the same threads (hand check of the claim)
        assert (threads[:rows, 8:16] == threads[:rows, :8]).all()


@pytest.mark.parametrize("desc", [
    sw.wgmma_descriptor(sw.SharedTile(32, 128, "float16", "128B"), "MN", operand="B", mn=64),
    sw.wgmma_descriptor(sw.SharedTile(64, 64, "float16", "128B"), "K", operand="A"),
    sw.wgmma_descriptor(sw.SharedTile(64, 32, "float16", "INTERLEAVE"), "K", operand="A"),
    sw.wgmma_descriptor(sw.SharedTile(32, 64, "float16", "INTERLEAVE", core_order="chunks"), "MN", operand="B", mn=64),
], ids=["B-MN-128B", "A-K-128B", "A-K-interleave", "B-MN-interleave"])
def test_lbo_and_sbo_arrows_never_cross_a_cell(desc):
    text = svg.wgmma_operand_svg(desc)
    root = assert_legible(text)
    # the grid's box: the cell rows placed by <use> (each row one cell tall) inside the translated group
    group = next(g for g in root.iter(f"{NS}g") if (g.get("transform") or "").startswith("translate("))
    left = float(re.match(r"translate\(([\d.]+)", group.get("transform")).group(1))
    ys = [float(u.get("y")) for u in group.iter(f"{NS}use")]
    row_def = root.find(f"{NS}defs/{NS}g")
    right = left + max(float(x) + float(w) for p in row_def.iter(f"{NS}path")
                       for x, w in re.findall(r"M([\d.]+) 0h([\d.]+)", p.get("d")))
    height = float(re.search(r"v([\d.]+)", row_def.find(f"{NS}path").get("d")).group(1))
    top, bottom = min(ys), max(ys) + height
    arrows = [p for p in root.iter(f"{NS}path") if p.get("marker-end")]
    assert arrows
    for p in arrows:
        x1, y1, x2, y2 = (float(v) for v in re.fullmatch(r"M([\d.]+) ([\d.]+)L([\d.]+) ([\d.]+)", p.get("d")).groups())
        outside = (min(x1, x2) >= right or max(x1, x2) <= left or min(y1, y2) >= bottom or max(y1, y2) <= top)
        assert outside, (p.get("d"), (left, top, right, bottom))
    # the numbers in the cells are still drawn: each row pattern has its chunk digits
    patterns = [g for g in root.findall(f"{NS}defs/{NS}g") if g.get("id")]
    assert patterns and all(g.find(f"{NS}g/{NS}text") is not None for g in patterns)


def test_the_lessons_none_and_128b_side_by_side_reads_in_a_laptops_output():
    for text in (svg.compare_svg(16, 64, "float16", ("NONE", "128B"), pattern=None),
                 svg.compare_svg(32, 64, "float16", ("NONE", "128B", "64B")),
                 svg.compare_svg(32, 32, "float16", ("128B", "64B"))):
        row = ET.fromstring(text)
        assert row.tag == "div" and "flex-wrap: wrap" in row.get("style")  # side by side, or stacked
        pictures = row.findall(f"{NS}svg")
        assert len(pictures) >= 2
        for pic in pictures:
            assert_legible(ET.tostring(pic, encoding="unicode"))
            # 540 wide: unscaled in a 553 px output (a 1000 px window with the file browser open)
            assert _view_width(pic) <= 540
            digits = pic.find(f".//{NS}g[@font-size]")
            assert digits is None or float(digits.get("font-size")) >= 11  # the chunk digits


@pytest.mark.parametrize("rows, cols, dtype, mode, color_by", [
    (32, 64, "float16", "128B", "chunk"), (32, 64, "float16", "128B", "bank"),
    (256, 256, "float16", "NONE", "chunk"), (1024, 1024, "float64", "128B", "chunk"),
    (1024, 1024, "int8", "64B", "bank"), (8, 16, "float32", "32B", "chunk"),
])
def test_explorer_tiles_read_at_1000_px_with_whole_captions(rows, cols, dtype, mode, color_by):
    tile = sw.SharedTile(rows, cols, dtype, mode)
    report = sw.bank_conflicts(tile, "column_read")
    text = svg.tile_svg(tile, color_by=color_by, report=report, highlight={"row": 1}, max_rows=32)
    root = assert_legible(text)
    caption = _caption_text(root)
    # the conflict summary is whole, as the report words it
    assert report.summary().split(": ", 1)[-1] in caption
    if cols * sw.dtype_bytes(dtype) > 1024:
        assert re.search(r"cols 0-\d+ of \d+x\d+", caption)


def test_a_long_fragment_caption_wraps_whole():
    threads = tuple(range(64)) * 4
    layout = Layout(buffer="acc_" + "very_long_name_" * 4, scope="fragment", dtype="float32", shape=(16, 16),
                    threads=threads, locals_=tuple(i // 64 for i in range(256)), thread_base=0, thread_count=64,
                    replicate=2, description="")
    root = assert_legible(svg.fragment_svg(layout, highlight={"thread": 3}))
    caption = _caption_text(root)
    assert "each element held by 2 threads (replica 0 shown)" in caption
    assert "thread 3: 4 element(s), registers [0, 1, 2, 3]" in caption


def test_a_picture_shrinks_to_its_output_only_down_to_10_px_text():
    from tilelab.render.svg import legible

    small = ('<svg xmlns="http://www.w3.org/2000/svg" width="800" height="100" viewBox="0 0 800 100" '
             'style="max-width: 100%; height: auto;"><text font-size="8">a</text><text font-size="12">b</text></svg>')
    # 8-unit text reaches 10 px at 10/8 of the picture's own size: it never shrinks, it scrolls
    assert 'style="min-width: 800px; max-width: 100%' in legible(small)
    big = small.replace('font-size="8"', 'font-size="20"')
    # 12-unit text may shrink to 10/12 of the width: 667 px
    assert 'style="min-width: 667px; max-width: 100%' in legible(big)
