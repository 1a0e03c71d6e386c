"""Every in-page link of every inspector page lands: each ``href="#..."`` has an element of that id
on the same page (in its compressed parts too), for the kernels of the tests and of the notebooks.

The notebooks' ``%%tilelang`` cells run through IPython's test shell as a notebook would run them
(their inspectors as displayed); the tests' kernels are shown with every tab, with and without
their source, after a change (the Diff tab), on a Hopper, an Ampere and the CPU target.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest
from ipython_shell import ip, shown  # noqa: F401  (fixtures)

import tilelab
from tilelab.render.html import sections
from tilelab.widgets.inspector import Inspector

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "examples" / "hopper_gemm.ipynb"]


def carried(page: str) -> str:
    """The page with its compressed parts (folded launcher lines, pictures, panels) unpacked after it."""
    parts = [page]
    for packed in re.findall(r'data-zp?="([^"]+)"', page):
        parts.append(carried(gzip.decompress(base64.b64decode(packed)).decode()))
    return "".join(parts)


def dead_links(page: str) -> list[str]:
    """The in-page links of ``page`` whose target is not on it."""
    whole = carried(page)
    ids = set(re.findall(r'\sid="([^"]+)"', whole))
    return sorted({h for h in re.findall(r'href="#([^"]*)"', whole) if h not in ids})


def magic_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and "".join(c["source"]).startswith("%%tilelang")]


def test_the_dead_link_check_finds_a_dead_link():
    page = '<div id="a"><a href="#a">here</a><a href="#b">gone</a></div>'
    assert dead_links(page) == ["b"]
    packed = base64.b64encode(gzip.compress(b'<p id="b">folded</p>')).decode()
    assert dead_links(page + f'<div data-z="{packed}"></div>') == []


@pytest.mark.slow
# make test: one notebook's inspectors (05's); make test-heavy every notebook's
@pytest.mark.parametrize("notebook", [n if n.stem.startswith("05") else pytest.param(n, marks=pytest.mark.heavy)
                                      for n in NOTEBOOKS], ids=lambda p: p.stem)
def test_every_link_of_the_notebooks_inspectors_lands(ip, shown, notebook, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    cells = magic_cells(notebook)
    if not cells:
        pytest.skip(f"{notebook.name} has no %%tilelang cell")
    ip.run_cell("import tilelang\nimport tilelang.language as T")  # the notebooks' first cells
    pages = []
    for cell in cells:
        shown.clear()
        result = ip.run_cell(cell.replace(" --quiet", "", 1))  # the inspector a reader asks for
        assert result.success, (notebook.name, cell.split("\n")[0], result.error_in_exec)
        pages += [out["data"]["text/html"] for out in shown if "tilelab-report" in out["data"].get("text/html", "")]
    assert pages, f"no inspector shown by {notebook.name}"
    for page in pages:
        assert dead_links(page) == [], notebook.name


def _kernels():
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    from gemm import matmul
    from target_kernels import attention_forward, gemm_cpu

    from tilelab.kernels.tiled_gemm import tiled_gemm

    return [
        ("hopper gemm", matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a", ROOT / "examples" / "gemm.py"),
        ("hopper attention", attention_forward(), "sm_90a", ROOT / "tests" / "target_kernels.py"),
        ("ampere gemm", tiled_gemm(512, 512, 512), "sm_80", ROOT / "tilelab" / "kernels" / "tiled_gemm.py"),
        ("cpu gemm", gemm_cpu(), "c", ROOT / "tests" / "target_kernels.py"),
    ]


@pytest.mark.slow
@pytest.mark.heavy
def test_every_link_of_the_tests_kernels_pages_lands():
    every = [s for s in sections()]
    for label, kernel, target, file in _kernels():
        report = tilelab.inspect(kernel, target)
        source = file.read_text()
        changed = dataclasses.replace(report, kernels=tuple(
            dataclasses.replace(k, grid=tuple(2 * g for g in k.grid)) for k in report.kernels))
        for view in (Inspector(report), Inspector(report, source=source), Inspector(report, show=every),
                     Inspector(report, show=every, source=source), Inspector(report, source=source, previous=changed),
                     Inspector(report, show="summary,tma,wgmma", source=source)):
            assert dead_links(view.html) == [] and dead_links(view.page) == [], (label, view.tabs)
        first, second = Inspector(report, source=source), Inspector(report, source=source)
        assert first.anchor != second.anchor  # one kernel shown twice: two pages, each its own ids
        # (a picture's own ids name its drawing: the same drawing twice is the same picture)
        ids = [set(re.findall(r'\sid="(tl-[^"]+)"', view.html)) for view in (first, second)]
        assert ids[0] and not ids[0] & ids[1]
