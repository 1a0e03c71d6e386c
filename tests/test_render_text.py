"""The plain-text summary (tilelab.render.text), checked against the report's own source texts."""

from __future__ import annotations

import re

from groundtruth import DRIVER_SWIZZLE, cython_launch, cython_tma_fields, device_wgmma
from test_render_html import IMG, SCRIPT, gemm, hostile_report

from tilelab.render.text import render_text


def test_gemm_summary_matches_the_launcher_and_device_code():
    report = gemm()
    text = render_text(report)
    launcher = report.sources.launcher("cython").text
    launch = cython_launch(launcher, report.kernels[0].name)
    kernel_line = next(line for line in text.splitlines() if line.strip().startswith(report.kernels[0].name))
    assert ", ".join(launch["grid"]) in kernel_line
    assert ", ".join(launch["block"]) in kernel_line
    assert f"{launch['smem']} B" in kernel_line
    for name in re.findall(r"CUtensorMap (\w+);", launcher):
        fields = cython_tma_fields(launcher, name)
        row = next(line for line in text.splitlines() if line.strip().startswith(name + " "))
        cols = re.split(r"\s{2,}", row.strip())
        assert cols[6] == ", ".join(str(v) for v in fields["boxDim"])
        assert cols[8] == DRIVER_SWIZZLE[fields["swizzle"]]
    for form in device_wgmma(report.sources.device)["forms"]:
        assert form["instruction"] in text
    assert text.splitlines()[0].startswith(f"KernelReport {report.name} for sm_90a: 1 kernel(s), 2 TMA descriptor(s)")


def test_every_backend_is_accounted_for():
    report = gemm()
    text = render_text(report)
    line = next(line for line in text.splitlines() if line.startswith("Launchers: "))
    for item in report.sources.launchers:
        assert f"{item.backend}: {item.text.count(chr(10)) + 1} lines" in line


def test_hostile_strings_are_plain_text_and_problems_are_listed():
    text = render_text(hostile_report())
    assert SCRIPT in text and IMG in text  # text/plain is not markup: shown verbatim
    assert f"  ! A_desc: inner box of {SCRIPT} exceeds the swizzle span" in text
    assert f"nvrtc: absent (ImportError: {SCRIPT})" in text
    assert "1 problem(s)" in text.splitlines()[0]


def test_plain_repr_is_render_text():
    report = hostile_report()
    assert report._repr_mimebundle_()["text/plain"] == render_text(report)


def test_the_report_model_imports_no_renderer():
    """Records sit below renderers: importing the report model (and the package) loads no
    tilelab.render module, IPython or ipywidgets; the display hooks import theirs when called."""
    import subprocess
    import sys

    probe = ("import sys, tilelab, tilelab.records.kernel\n"
             "print(sorted(n for n in sys.modules "
             "if n.startswith('tilelab.render') or n in ('IPython', 'ipywidgets')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
