"""What a reader sees, and nothing a reader cannot act on: the short text forms of the records, and a
CPU kernel's page (no empty TMA/WGMMA tabs, its run under a Run tab that says PASS and what it
checked, no warning about a launcher the target cannot have), the Summary's tables and the IR passes."""

from __future__ import annotations

import dataclasses
import re

from test_render_html import gemm

import tilelab
from tilelab.records.launch import OutputCheck, RunResult
from tilelab.records.machine import PassStep, PassTrace
from tilelab.widgets.inspector import Inspector


def test_every_record_of_a_report_prints_one_short_readable_line():
    report = gemm()
    c_local, a_shared = report.layout("C_local"), report.layout("A_shared")
    d, w = report.tma_descriptors[0], report.wgmma[0]
    for record in (c_local, a_shared, d, w, w.a, w.b, report.sources, report.lowering, report.sources.launchers[0]):
        text = repr(record)
        assert "\n" not in text and len(text) < 400, text[:200]
        assert str(record) == text
    # the few fields a person reads, in the report's words, the data one attribute away
    assert repr(c_local).startswith("Layout(C_local: fragment float32 [128x128], threads ")
    assert "array('threads')" in repr(c_local) and c_local.array("threads").shape == (128, 128)
    box = "x".join(map(str, d.box_dim))
    assert repr(d) == (f"TmaDescriptor({d.name}: {d.kind} {d.dtype} of {d.buffer} "
                       f"[{'x'.join(map(str, d.global_dim))}], box {box}, swizzle {d.swizzle})")
    assert f"LBO {w.b.lbo << 4} B, SBO {w.b.sbo << 4} B" in repr(w.b) and f"{w.b.major}-major" in repr(w.b)
    assert repr(w).startswith(f"WgmmaInstruction({w.instruction}.{w.variant} ")
    lines = report.sources.device.count("\n") + 1
    assert repr(report.sources).startswith(f"Sources(device: {lines} lines; launchers: ")


def _cpu_report():
    from target_kernels import gemm_cpu

    return tilelab.inspect(gemm_cpu(), "c")


def test_a_cpu_kernel_page_has_no_tab_or_warning_it_cannot_act_on():
    report = _cpu_report()
    checked = OutputCheck("C", "float32", (128, 128))
    run = RunResult("gemm", (checked,), backend="cython", device="CPU")
    view = Inspector(report, timing=[run])
    titles = [t.split(" (")[0] for t in view.titles]
    assert "TMA" not in titles and "WGMMA" not in titles and titles[-1] == "Run"
    assert 'class="tl-absent"' not in view.html  # tvm_ffi cannot build C kernels: a muted line, no warning
    assert "tvm_ffi</b>: absent" in view.tab("launcher")
    summary, ran = view.tab("summary"), view.tab("Run")
    for panel in (summary, ran):
        assert ">PASS</b> " in panel and "RAN" not in panel
        assert "every element written, none NaN or inf; no reference given: --ref EXPR compares" in panel
    assert "<th></th>" not in view.html  # no empty header row


def test_the_summary_shows_pdl_only_where_a_kernel_waits_and_names_no_launcher_noise():
    report = gemm()
    summary = Inspector(report).tab("summary")
    assert not any(k.programmatic_dependent_launch for k in report.kernels)
    assert "early start" not in summary and "<th>PDL</th>" not in summary and "<th></th>" not in summary
    waits = report.replace(kernels=tuple(dataclasses.replace(k, programmatic_dependent_launch=True)
                                         for k in report.kernels))
    summary = Inspector(waits).tab("summary")
    by = ", ".join(report.kernels[0].programmatic_serialization_by)
    assert "<th>PDL</th>" in summary and f"waits (T.pdl_sync); may start early when launched by {by}" in summary


def test_unnamed_python_passes_are_one_row_and_the_table_scrolls_in_its_own_box():
    steps = (PassStep("pass_fn", 0.001, False), PassStep("pass_fn", 0.002, False), PassStep("pass_fn", 0.001, False),
             PassStep("tl.LowerTileOp", 0.004, True, "-a\n+b"))
    report = gemm().replace(passes=PassTrace(steps))
    ir = Inspector(report, show="summary,ir").tab("ir")
    rows = re.findall(r"<tr id=[^>]*>(.*?)</tr>", ir, re.S)
    assert len(rows) == 2 and "3 unnamed Python pass(es) (pass_fn)" in rows[0] and ">1-3<" in rows[0]
    assert "<code>tl.LowerTileOp</code>" in rows[1]
    assert re.search(r'<div class="tl-scroll" style="overflow-x:auto"><table class="tl-table tl-passes">', ir)


def test_a_page_stays_light_whatever_tabs_it_has_and_its_packed_panels_are_the_panels():
    import base64
    import gzip
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    sys.path.insert(0, str(examples))
    from gemm import matmul

    from tilelab.render.html import sections

    report = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a", passes=True)
    view = Inspector(report, show=sections(), source="%%tilelang\n" + (examples / "gemm.py").read_text())
    assert len(view.html.encode()) > 150 * 1024  # every tab with the IR passes: heavy when all travel open
    assert len(view.page.encode()) < 150 * 1024  # as displayed
    # the largest panels (never the first) travel compressed, each unpacks to the very panel of the page
    full = re.findall(r'<section class="tl-panel" id="([^"]+)".*?</summary>(.*?)</details></section>', view.html, re.S)
    shown = re.findall(r'<section class="tl-panel" id="([^"]+)".*?</summary>(.*?)</details></section>', view.page, re.S)
    assert [i for i, _ in full] == [i for i, _ in shown] and shown[0][1] == full[0][1]
    packed = 0
    for (_, whole), (_, travels) in zip(full[1:], shown[1:]):
        m = re.fullmatch(r'<div class="tl-packed" data-zp="([^"]+)"><p class="tl-untrusted">[^<]*</p></div>', travels)
        if m is None:
            assert travels == whole  # the others travel as they are
            continue
        packed += 1
        assert gzip.decompress(base64.b64decode(m.group(1))).decode() == whole
    assert packed >= 1
    # a page of the usual tabs under the budget travels whole: readable where scripts do not run
    light = Inspector(_cpu_report())
    assert len(light.html.encode()) < 120 * 1024 and light.page == light.html


def test_the_layout_pictures_fit_a_laptop_output_unscaled():
    """A 1000 px window with the file browser open leaves a notebook output about 520 px wide: the
    Layouts tab's pictures (and its folded bank pictures) are drawn at most PICTURE_WIDTH wide with
    no text under 10 units, so that there they are shown unscaled, nothing cut, every digit legible."""
    import base64
    import gzip

    from tilelab.render.html import section_body
    from tilelab.render.tabs.layouts import PICTURE_WIDTH

    body = section_body(gemm(), "layouts")
    folded = [gzip.decompress(base64.b64decode(z)).decode()
              for z in re.findall(r'<details class="tl-sub tl-bank-colour tl-lazy" data-z="([^"]+)"', body)]
    pictures = [svg for part in [body, *folded] for svg in re.findall(r"<svg .*?</svg>", part, re.S)
                if 'aria-label="WGMMA operand' not in svg[:600]]
    assert len(pictures) >= 4 and folded
    for svg in pictures:
        width = float(re.search(r'viewBox="0 0 ([\d.]+)', svg).group(1))
        sizes = [float(x) for x in re.findall(r'font-size(?:="|:\s*)([\d.]+)', svg)]
        assert PICTURE_WIDTH <= 520 and width <= PICTURE_WIDTH, re.search(r'aria-label="([^"]+)"', svg).group(1)
        assert min(sizes) >= 10
