"""The inspector's Layouts and WGMMA sections on the example kernels (sm_90a, no GPU).

Ground truth: the descriptors in the generated device code (``tl::initialize_wgmma_descriptor<
LAYOUT, LBO, SBO>``, parsed by ``groundtruth.device_wgmma``) and per-cell bank numbers computed
here by hand from the swizzle formula; tilelab's pictures must show both.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from page_text import unfold

pytest.importorskip("tilelang", reason="TileLang is not installed: no compiler output")

from groundtruth import device_wgmma

NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def reports():
    from conv_im2col import convolution
    from gemm import matmul
    from gemm_bf16_nt import matmul_nt

    import tilelab

    return {
        "gemm": tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a"),
        "gemm_bf16_nt": tilelab.inspect(matmul_nt(1024, 1024, 1024, 128, 128, 64), "sm_90a"),
        "conv": tilelab.inspect(convolution(8, 64, 56, 56, 64, 3, 1, 1, 1), "sm_90a"),
    }


def _svgs(body: str) -> list[ET.Element]:
    return [ET.fromstring(m.group(0)) for m in re.finditer(r"<svg .*?</svg>(?=</div>)", body, re.S)]


@pytest.mark.parametrize("name", ["gemm", "gemm_bf16_nt", "conv"])
def test_every_wgmma_operand_has_its_overlay_and_verdict(reports, name):
    from tilelab.render.html import section_body

    report = reports[name]
    body = unfold(section_body(report, "layouts"))
    truth = device_wgmma(report.sources.device)["descriptors"]
    assert truth
    for desc in truth.values():
        buffer = desc["buffer"]
        block = body[body.index(f"<summary>{buffer} "):]
        block = block[:block.index("</details>", block.index("tl-wgmma-overlay"))]
        # the verdict names the compiler's own numbers, read from the device code
        want = (f"tilelab&#x27;s descriptor agrees with the compiler&#x27;s: layout_type {desc['layout_type']}, "
                f"LBO {desc['lbo']}, SBO {desc['sbo']}")
        assert want in block, (name, buffer)
        overlay = re.search(r'<div class="tl-scroll[^"]* tl-wgmma-overlay">(<svg .*?</svg>)</div>', block,
                            re.S).group(1)
        root = ET.fromstring(overlay)
        assert root.get("aria-label") == f"WGMMA operand {buffer}"
        texts = " ".join("".join(t.itertext()) for t in root.iter(f"{NS}text"))
        assert f"SBO {desc['sbo'] << 4} B (enc {desc['sbo']})" in texts
        assert "compiler's descriptor agrees with tilelab" in texts
        assert any(p.get("marker-end") for p in root.iter(f"{NS}path"))  # the arrows


def test_conv_kernel_shared_says_64b_and_tilelangs_rule_predicts_it(reports):
    from tilelab.render.html import section_body

    body = unfold(section_body(reports["conv"], "layouts"))
    assert "(layout 64B; TileLang&#x27;s rule predicts 64B)" in body
    wgmma = section_body(reports["conv"], "wgmma")
    assert wgmma.count("<td>agrees</td>") == 2


def test_bank_colouring_with_hover_for_every_shared_layout(reports):
    from tilelab.render.html import section_body
    from tilelab.swizzle import match_layout

    report = reports["gemm"]
    body = unfold(section_body(report, "layouts"))
    shared = [lay for lay in report.layouts if lay.scope == "shared"]
    pictures = re.findall(r'<details class="tl-sub tl-bank-colour">.*?'
                          r'<div class="tl-scroll[^"]*">(<svg .*?</svg>)</div>', body, re.S)
    assert len(pictures) == len(shared) == 2
    for layout, picture in zip(shared, pictures):
        root = ET.fromstring(picture)
        uid = root.get("id")
        assert f"#{uid}:has(.b0:hover) .b0{{" in picture
        tile = match_layout(layout)
        e = tile.element_bytes
        offsets = layout.array("offsets")
        banks = set()
        for g in root.iter(f"{NS}g"):
            m = re.fullmatch(r"r(\d+)", g.get("class") or "")
            if not m:
                continue
            r = int(m.group(1))
            rects = g.findall(f"{NS}rect")
            # one rect per 4-byte word of the columns drawn (as many as fit the page's picture width with
            # their bank numbers), in column order: its bank by hand from the compiler's offset
            assert 8 <= len(rects) <= layout.shape[1] * e // 4
            for word, rect in enumerate(rects):
                byte = int(offsets[r, word * 4 // e]) * e
                assert f"b{(byte // 4) % 32}" in rect.get("class").split(), (layout.buffer, r, word)
                banks.add((byte // 4) % 32)
        assert banks == set(range(32)), layout.buffer  # the swizzle spreads the columns drawn over every bank


def test_layouts_tab_stays_light(reports):
    from tilelab.render.html import section_body

    for name, report in reports.items():
        body = unfold(section_body(report, "layouts"))
        assert len(body) < 600_000, (name, len(body))
        for root in _svgs(body):
            assert root.tag == f"{NS}svg"
