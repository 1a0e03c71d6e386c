"""compute-sanitizer's text -> findings, against real output captured on an H100 (tests/data/sanitizer:
our buggy kernels from tests/buggy_kernels.py, host backtraces trimmed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelab.launch import _sanitize
from tilelab.launch._sanitize import Finding, SanitizerReport, locate, parse

DATA = Path(__file__).parents[1] / "data" / "sanitizer"


def test_memcheck_out_of_bounds_rows():
    findings, summary = parse((DATA / "memcheck_oob_store.txt").read_text())
    assert summary.startswith("ERROR SUMMARY")
    assert len(findings) == 2
    f = findings[0]
    assert f.kind == "out-of-bounds read" and f.size == 4
    assert (f.function, f.file, f.line) == ("oob_store_kernel", "tvm_kernels.cu", 19)
    assert f.block == (3, 0, 0) and f.thread == (232, 0, 0)
    assert f.address == 0x7F0976800FA0


def test_memcheck_address_maps_to_the_tensor_it_overran():
    findings, _ = parse((DATA / "memcheck_oob_store.txt").read_text())
    # the allocation the sanitizer names: 0x7f0976800000, 4,000 bytes (1000 float32)
    tensors = [{"name": "A", "ptr": 0x7F0976800000, "nbytes": 4000, "element_size": 4, "shape": [1000], "numel": 1000},
               {"name": "B", "ptr": 0x7F0976A00000, "nbytes": 4096, "element_size": 4, "shape": [1024], "numel": 1024}]
    located = locate(findings, tensors)
    assert located[0].buffer == "A"
    assert located[0].where == "0 elements past the end of A (its last element is 999)"
    inside = locate([Finding("out-of-bounds write", "x", address=0x7F0976A00000 + 4 * 37)], tensors)[0]
    assert inside.buffer == "B" and inside.element == (37,)
    before = locate([Finding("out-of-bounds write", "x", address=0x7F0976800000 - 8)], tensors)[0]
    assert before.buffer == "A" and before.where == "2 elements before the start of A"


def test_memcheck_far_address():
    findings, summary = parse((DATA / "memcheck_far_oob_store.txt").read_text())
    assert [f.kind for f in findings] == ["out-of-bounds write"]
    assert findings[0].line == 19 and findings[0].block == (0, 0, 0) and findings[0].thread == (96, 0, 0)
    assert "1026 errors" in summary


def test_racecheck_row():
    findings, summary = parse((DATA / "racecheck_shared_race.txt").read_text())
    assert summary == "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
    (f,) = findings
    assert f.kind == "shared-memory race" and f.line == 20 and f.other_line == 20 and f.hazards == 369
    assert f.where == "shared memory" and f.buffer is None


def test_clean_run_has_no_findings():
    assert parse("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == ([], "ERROR SUMMARY: 0 errors")


def test_report_renders_rows_links_and_raw_text():
    raw = (DATA / "racecheck_shared_race.txt").read_text()
    findings, summary = parse(raw)
    source = "\n".join(f"// line {i}" for i in range(1, 30))
    report = SanitizerReport("shared_race", "racecheck", tuple(findings), raw, summary, source=source)
    text = repr(report)
    assert "1 finding" in text and "shared-memory race" in text and "line 20" in text
    page = report._repr_html_()
    anchor = page.split('href="#', 1)[1].split('"', 1)[0]
    assert anchor.endswith("-L20") and f'id="{anchor}"' in page  # the link lands on the CUDA line
    assert "raw compute-sanitizer output" in page and "Race reported between Write access" in page
    assert SanitizerReport.from_dict(report.to_dict()).findings == report.findings


def test_missing_sanitizer_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_sanitize, "find_sanitizer", lambda: None)
    with pytest.raises(_sanitize.SanitizerMissing, match="compute-sanitizer was not found.*PATH"):
        _sanitize.sanitize(object(), tool="memcheck")
    with pytest.raises(ValueError, match="memcheck, racecheck, synccheck, initcheck"):
        _sanitize.sanitize(object(), tool="leakcheck")
