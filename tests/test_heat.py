"""A profile's hot device lines drawn as a heat margin on the inspector's CUDA view.

The samples come through the same parser ``tilelab.profile`` uses, from a source page in the
format ``ncu --page source --csv --print-source cuda,sass`` prints (a File Path row, a header with
"Line No" and "Warp Stall Sampling (All Samples)", a line's row then its SASS rows).
"""

from __future__ import annotations

import re

import pytest
from test_render_html import gemm

from tilelab.records.profile import Profile, parse_source_csv
from tilelab.render.code import heat_list, heat_shares, highlight_code
from tilelab.render.html import render_html, report_id

SOURCE_PAGE = '''"File Path","/tmp/tvm/tvm_kernels.cu"
"Line No","Source","Address","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"3","  int x = 0;","","10","4"
"","","0x7f00","10","4"
"5","  acc += a * b;","","60","30"
"","","0x7f10","35","20"
"","","0x7f20","25","10"
"7","  out[i] = acc;","","30","12"
"","","0x7f30","30","12"
"8","}","","0","0"
"File Path","/usr/include/cuda/barrier.h"
"Line No","Source","Address","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"2","wait();","","999","999"
'''


def _hot_rows(markup: str, prefix: str) -> dict[int, str]:
    """Line number -> the heat margin's title, for each line of the CUDA view that has one."""
    return {int(n): t for n, t in re.findall(
        rf'<span class="[^"]*tl-hot[^"]*" id="{prefix}-L(\d+)"><i class="tl-heat" style="[^"]*" title="([^"]*)"></i>',
        markup)}


def test_the_parser_reads_the_device_file_only():
    assert parse_source_csv(SOURCE_PAGE) == [(3, 10.0), (5, 60.0), (7, 30.0)]


def test_shares_and_the_hottest_first_list():
    shares = heat_shares(parse_source_csv(SOURCE_PAGE))
    assert shares == {3: 0.1, 5: 0.6, 7: 0.3}
    listed = heat_list(shares, "p-cuda")
    assert re.findall(r'href="#p-cuda-L(\d+)">L\d+</a> ([\d.]+)%', listed) == [("5", "60.0"), ("7", "30.0"),
                                                                                ("3", "10.0")]
    assert heat_list({}, "p-cuda") == ""


def test_highlight_code_marks_exactly_the_hot_lines():
    text = "\n".join(f"line {i}" for i in range(1, 11))
    markup = highlight_code(text, "text", anchor_prefix="p", heat={3: 0.1, 5: 0.6, 7: 0.3})
    assert _hot_rows(markup, "p") == {3: "10.0% of warp-stall samples", 5: "60.0% of warp-stall samples",
                                      7: "30.0% of warp-stall samples"}
    assert markup.count('class="tl-heat"') == 3
    # the hottest line is the most opaque
    heat = r'id="p-L(\d+)"><i class="tl-heat" style="background:rgba\(220,38,38,([\d.]+)\)'
    alpha = {int(n): float(a) for n, a in re.findall(heat, markup)}
    assert alpha[5] > alpha[7] > alpha[3]


def test_the_inspector_cuda_view_draws_the_profile_as_a_heat_margin():
    report = gemm()
    n = report.sources.device.count("\n") + 1
    # Lines of the real device source: two hot ones, one cooler one, and one past the end (dropped).
    profile = Profile(kernel="k", hot_device_lines=((20, 30.0), (n // 2, 60.0), (10, 10.0), (n + 50, 500.0)))
    page = render_html(report, sections=("cuda",), profile=profile)
    cuda = re.search(r'<section class="tl-panel"[^>]*-cuda".*?</section>', page, re.S).group(0)
    rid = report_id(report)
    total = 600.0  # shares are of every sample the profile counted, the dropped line's too
    assert _hot_rows(cuda, f"{rid}-cuda") == {
        n // 2: f"{100 * 60 / total:.1f}% of warp-stall samples",
        20: f"{100 * 30 / total:.1f}% of warp-stall samples",
        10: f"{100 * 10 / total:.1f}% of warp-stall samples"}
    assert re.findall(rf'href="#{rid}-cuda-L(\d+)">L\d+</a> [\d.]+%', cuda) == [str(n // 2), "20", "10"]
    plain = render_html(report, sections=("cuda",))
    assert "tl-heat" not in re.sub(r"<style.*?</style>", "", plain, flags=re.S)


CELL = '''%%tilelang --profile
import tilelang.language as T

def kernel(A, B):
    T.copy(A, B)
    T.gemm(A, B, C)
'''


def test_the_cell_view_sums_the_device_samples_per_cell_line():
    import dataclasses

    from tilelab.records.machine import MachineCode, SourceOrigin

    report = gemm()
    # The cell's file as the magic compiles it: a blank first line, then the cell's body.
    cell_file = "<ipython-input-7-ab12>"
    machine = MachineCode(arch="sm_90a", origins=(
        SourceOrigin(1, 4, cell_file, 5, True),     # T.copy: device lines 1-4
        SourceOrigin(5, 9, cell_file, 6, True),     # T.gemm: device lines 5-9
        SourceOrigin(10, 12, "/site-packages/tilelang/macro.py", 6, False),  # another file: not the cell
    ), python_sources=((cell_file, "\n" + CELL.split("\n", 1)[1]),))
    report = dataclasses.replace(report, machine=machine)
    profile = Profile(kernel="k", hot_device_lines=((2, 10.0), (3, 10.0), (6, 50.0), (9, 10.0), (11, 20.0)))
    page = render_html(report, sections=("cell",), source=CELL, profile=profile)
    rid = report_id(report)
    cell = re.search(r'<section class="tl-panel"[^>]*-cell".*?</section>', page, re.S).group(0)
    # line 5 (T.copy): 20 of 100 samples; line 6 (T.gemm): 60; the macro's 20 belong to no cell line
    assert _hot_rows(cell, f"{rid}-cell") == {5: "20.0% of warp-stall samples", 6: "60.0% of warp-stall samples"}
    assert re.findall(rf'href="#{rid}-cell-L(\d+)">L\d+</a> ([\d.]+)%', cell) == [("6", "60.0"), ("5", "20.0")]
    # the 20% the cell's lines cannot carry (the macro's line) is said, with where it went
    assert "the other 20.0% of the samples" in cell and "macro.py L6 20.0%" in cell
    # a cell whose text differs from the linked file gets no margin (its line numbers would mislead)
    other = render_html(report, sections=("cell",), source=CELL.replace("T.copy", "T.fill"), profile=profile)
    other_cell = re.search(r'<section class="tl-panel"[^>]*-cell".*?</section>', other, re.S).group(0)
    assert "tl-heat\"" not in re.sub(r"<style.*?</style>", "", other_cell, flags=re.S)


def test_sanitizer_findings_link_into_the_cuda_tab_when_the_source_is_the_same():
    from pathlib import Path

    from tilelab.launch._sanitize import SanitizerReport, parse
    from tilelab.widgets.inspector import Inspector

    report = gemm()
    raw = (Path(__file__).parent / "data" / "sanitizer" / "memcheck_oob_store.txt").read_text()
    findings, summary = parse(raw)
    lines = sorted({f.line for f in findings})
    assert lines == [19]
    rid = report_id(report)
    same = SanitizerReport("oob_store", "memcheck", tuple(findings), raw, summary, source=report.sources.device + "\n")
    inspector = Inspector(report, timing=[same])
    timing = inspector.tab("Timing")
    assert re.findall(r'href="#([\w-]+-L\d+)">line', timing) == [f"{rid}-cuda-L19"] * len(findings)
    assert "device CUDA source</summary>" not in timing  # no second listing
    assert f'id="{rid}-cuda-L19"' in inspector.tab("cuda")  # the link lands on the CUDA tab's line

    other_source = report.sources.device.replace("\n", "\n// rebuilt\n", 1)
    differs = SanitizerReport("oob_store", "memcheck", tuple(findings), raw, summary, source=other_source)
    inspector = Inspector(report, timing=[differs])
    timing = inspector.tab("Timing")
    local = re.findall(r'href="#([\w-]+)-L19">line', timing)
    assert local and not local[0].endswith("-cuda") and "differs from the CUDA tab" in timing
    assert f'id="{local[0]}-L19"' in timing  # the report's own listing


def test_every_sample_is_on_a_cell_line_or_said_elsewhere():
    """A #line into the cell's file past the cell's last line is not a cell line: it is counted
    with the samples elsewhere, so the two always add up to every sample."""
    import dataclasses

    from tilelab.engine.links import cell_heat, heat_elsewhere
    from tilelab.records.machine import MachineCode, SourceOrigin

    cell_file = "<ipython-input-9-cd34>"
    machine = MachineCode(arch="sm_90a", origins=(
        SourceOrigin(1, 4, cell_file, 6, True),
        SourceOrigin(5, 6, cell_file, 99, True),  # past the cell's end
        SourceOrigin(7, 8, "/site-packages/tilelang/macro.py", 3, False),
    ), python_sources=((cell_file, "\n" + CELL.split("\n", 1)[1]),))
    report = dataclasses.replace(gemm(), machine=machine)
    samples = ((2, 50.0), (5, 20.0), (7, 20.0), (9, 10.0))  # device line 9: no #line covers it
    on_cell = cell_heat(report, CELL, samples)
    rest, places = heat_elsewhere(report, CELL, samples, top=5)
    assert on_cell == {6: 0.5}
    assert rest == pytest.approx(0.5) and sum(on_cell.values()) + rest == pytest.approx(1.0)
    assert dict(places) == {f"{cell_file} L99": pytest.approx(0.2), "macro.py L3": pytest.approx(0.2),
                            "no #line": pytest.approx(0.1)}
