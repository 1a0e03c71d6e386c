"""What keeps the inspector page light, checked against the report's own facts.

Repeating swizzle rows are drawn twice and the caption says which rows are shown; the rows left
out are, by the compiler's offsets, copies of rows drawn. Long device code keeps every line and
says it is coloured for comments only. (The page's weight itself is printed by
benchmarks/inspector_weight.py; tests/widgets/test_inspector.py holds the 150 KB limit.) Folded
pictures travel gzip-compressed and are the drawings themselves.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import numpy as np
from reports import gemm, parse

from tilelab.render.html import render_html, report_id, section_body

NS = "{http://www.w3.org/2000/svg}"


def _chunk_picture(body: str, buffer: str) -> ET.Element:
    block = body[body.index(f"<summary>{buffer} "):]
    svg = re.search(r'<div class="tl-scroll tl-picture">(<svg .*?</svg>)</div>', block, re.S).group(1)
    return ET.fromstring(svg)


def test_repeating_swizzle_rows_are_drawn_twice_and_the_rest_are_copies():
    report = gemm()
    body = section_body(report, "layouts")
    for layout in (lay for lay in report.layouts if lay.scope == "shared"):
        rows, cols = layout.shape
        chunks = (layout.array("offsets") * 2 // 16) % 8  # fp16: the 16-byte chunk of each element
        period = next(p for p in range(1, rows + 1) if rows % p == 0 and (chunks[p:] == chunks[:-p]).all())
        root = _chunk_picture(body, layout.buffer)
        drawn = sorted(int(u.get("class").split()[0][1:]) for u in root.iter(f"{NS}use"))
        shown = max(2 * period, 16)
        assert drawn == list(range(min(shown, rows))), layout.buffer
        texts = " ".join("".join(t.itertext()) for t in root.iter(f"{NS}text"))
        if shown < rows:
            assert f"showing rows 0-{shown - 1}, cols 0-{cols - 1} of {rows}x{cols}" in texts
            # every row left out repeats a drawn one (the picture hides no pattern)
            for r in range(shown, rows):
                assert (chunks[r] == chunks[r % period]).all()
        # each drawn row's pattern is the one its <use> points at: same pattern id for equal rows
        pattern = {int(u.get("class").split()[0][1:]): u.get("class").split()[1] for u in root.iter(f"{NS}use")}
        for r in drawn:
            for q in drawn:
                assert (pattern[r] == pattern[q]) == bool((chunks[r] == chunks[q]).all()), (layout.buffer, r, q)


def test_a_shared_layout_whose_rows_do_not_repeat_is_not_cut_short():
    report = gemm()
    a = report.layout("A_shared")
    rows, cols = a.shape
    # an irregular placement (a fixed shuffle of the elements): no row pattern repeats with a period
    offsets = np.random.default_rng(7).permutation(rows * cols).reshape(rows, cols)
    chunks = (offsets * 2 // 16) % 8
    assert not any(rows % p == 0 and (chunks[p:] == chunks[:-p]).all() for p in range(1, rows))
    odd = dataclasses.replace(a, buffer="odd_shared", offsets=tuple(offsets.ravel().tolist()))
    body = section_body(dataclasses.replace(report, layouts=(odd,), wgmma=()), "layouts")
    root = _chunk_picture(body, "odd_shared")
    texts = " ".join("".join(t.itertext()) for t in root.iter(f"{NS}text"))
    assert "max_rows" not in texts  # cropped only by the cell budget, if at all


def test_long_device_code_keeps_every_line_and_says_it_is_coloured_for_comments_only():
    report = gemm()
    device = report.sources.device
    long = "\n".join([device] + [f"  int filler_{i} = {i}; // padding line {i}" for i in range(700)])
    assert len(long) > 20_000 and len(device) <= 20_000
    big = dataclasses.replace(report, sources=dataclasses.replace(report.sources, device=long))
    out = render_html(big, sections=["cuda"])
    rid = report_id(big)
    assert "coloured for comments only: over 20,000 characters" in out
    lines = parse(out).lines
    assert [lines[f"{rid}-cuda-L{n}"] for n in range(1, long.count("\n") + 2)] == long.split("\n")
    cuda = re.search(r'<pre class="tl-src".*?</pre>', out, re.S).group(0)
    assert 'class="c1"' in cuda and not re.search(r'<span class="(?:k|kt|mi)">', cuda)
    # the short one is fully coloured, with no such note
    small = render_html(report, sections=["cuda"])
    assert "coloured for comments only" not in small and re.search(r'<span class="kt">', small)


def test_folded_pictures_travel_compressed_and_are_the_drawings_themselves():
    import base64
    import gzip

    from tilelab.render.svg import layout_svg, legible
    from tilelab.render.tabs.layouts import PICTURE_WIDTH

    report = gemm()
    body = section_body(report, "layouts")
    a = report.layout("A_shared")
    block = body[body.index("<summary>A_shared "):]
    packed = re.search(r'<details class="tl-sub tl-bank-colour tl-lazy" data-z="([^"]+)"><summary>', block).group(1)
    inner = gzip.decompress(base64.b64decode(packed)).decode()
    svg = re.search(r"<svg .*</svg>", inner, re.S).group(0)
    # the bank picture tilelab.render.svg draws for this buffer, unchanged, with its own zoom toggle
    # (drawn to the page's picture width, with the legibility floor: scaled down to no less than 10 px text)
    assert svg == legible(layout_svg(a, color_by="bank", max_cells=256, hover_crop=256, titles=False,
                                     fit_width=PICTURE_WIDTH))
    assert re.search(r'<input type="checkbox" class="tl-zoom" id="[^"]+-bank"><label for="[^"]+-bank"', inner)
    # the core-matrix overlays of the WGMMA operands are folded the same way
    overlays = [gzip.decompress(base64.b64decode(z)).decode() for z in re.findall(
        r'<details class="tl-sub tl-lazy" data-z="([^"]+)"><summary>core matrices, LBO and SBO</summary>', body)]
    assert overlays and all("tl-wgmma-overlay" in o and "<svg" in o for o in overlays)
