"""Notebook 06 (banks, swizzles, WGMMA) read on a laptop: JupyterLab at 1000 x 800 with the file
browser open (the notebook about 520 px wide), in headless Chromium.

The notebook is run as a student who solved it would run it (each exercise's answer cell holds
its solution, so the explorer, the core-matrix picture of 06.5 and the inspector of 06.6/06.7 are
shown). Then, for every output: no picture is wider than its box unless it scrolls in a box of its
own, no text of a picture is drawn under 10 px (its font size times the picture's scale), every
caption lies inside its picture, and every table wider than the output scrolls in a box of its
own. A long proof (the notebook lowers two GEMMs): ``make test-heavy`` runs it; the inspector's
own pictures at that width are checked in ``make test`` (``test_browser.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, ROOT, lab  # noqa: F401  (lab: the JupyterLab fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.heavy]

NOTEBOOK = ROOT / "notebooks" / "06_banks_swizzles_wgmma.ipynb"

# Every picture and table of the outputs shown: its box, whether it scrolls in a box of its own,
# the smallest text drawn (px on screen) and the captions that reach past the picture's edge.
MEASURE = """() => {
  const shown = e => e.getBoundingClientRect().width > 0;
  const scroller = e => { for (let a = e.parentElement; a && !a.classList.contains('jp-OutputArea-output');
      a = a.parentElement) { const s = getComputedStyle(a).overflowX;
      if ((s === 'auto' || s === 'scroll') && a.clientWidth < a.scrollWidth + 1) return a; } return null; };
  const out = [];
  for (const area of document.querySelectorAll('.jp-OutputArea-output')) {
    if (!shown(area)) continue;
    const right = area.getBoundingClientRect().right + 1;
    for (const s of area.querySelectorAll('svg')) {
      if (!shown(s) || s.parentElement.closest('svg')) continue;
      const box = s.getBoundingClientRect(), own = scroller(s);
      const scale = box.width / (s.viewBox.baseVal && s.viewBox.baseVal.width || box.width);
      const texts = [...s.querySelectorAll('text')].filter(t => t.textContent.trim() && shown(t));
      const sizes = texts.map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
      const cut = texts.filter(t => t.getBoundingClientRect().right > box.right + 1
                                    || t.getBoundingClientRect().left < box.left - 1).map(t => t.textContent);
      out.push({kind: 'picture', label: s.getAttribute('aria-label'), width: box.width,
                fits: box.right <= right || (own !== null && own.getBoundingClientRect().right <= right),
                text: sizes.length ? Math.min(...sizes) : 99, cut: cut.slice(0, 3)});
    }
    for (const t of area.querySelectorAll('table')) {
      if (!shown(t) || t.closest('svg')) continue;
      const own = scroller(t);
      out.push({kind: 'table', label: t.textContent.trim().slice(0, 40), width: t.getBoundingClientRect().width,
                fits: t.getBoundingClientRect().right <= right
                      || (own !== null && own.getBoundingClientRect().right <= right)});
    }
  }
  return out;
}"""


def _solved_notebook(folder: Path) -> Path:
    """Notebook 06 with each answer cell holding its exercise's solution, progress kept in ``folder``."""
    import nbformat

    from tilelab.workshop import _core

    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        found = re.search(r"\banswer_(\d\d)_(\d)\b", cell.source)
        if found and "workshop.check" not in cell.source:
            cell.source = _core.get(f"{found.group(1)}.{found.group(2)}").solution
    progress = json.dumps(str(folder / "progress.json"))
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os\nos.environ['TILELAB_PROGRESS'] = {progress}"))
    path = folder / "root" / "06_solved.ipynb"
    nbformat.write(nb, path)
    return path


def test_notebook_06_at_a_laptop_width_every_picture_and_table_fits_and_reads(lab, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    url, _, lab_tmp = lab
    path = _solved_notebook(lab_tmp)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 800})
        try:
            page = context.new_page()
            page.goto(f"{url}/lab/tree/{path.name}", timeout=90_000)
            page.wait_for_function(
                "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=90_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # every cell ran: the last code cell has its execution count
            page.wait_for_function(
                "() => { const cells = [...document.querySelectorAll('.jp-CodeCell')];"
                " const p = cells.length && cells[cells.length - 1].querySelector('.jp-InputPrompt');"
                " return p && /\\[\\d+\\]/.test(p.textContent); }", timeout=600_000)
            page.locator(".tl-explorer-live svg").first.wait_for(timeout=60_000)
            page.locator(".jp-OutputArea-output .tilelab-report").first.wait_for(timeout=60_000)
            page.evaluate("window.jupyterapp.shell.activateById('filebrowser')")
            page.wait_for_timeout(1000)
            width = page.evaluate("document.querySelector('.jp-Notebook .jp-OutputArea-output')"
                                  ".getBoundingClientRect().width")
            assert width < 600, f"the notebook's output is {width:.0f} px wide: not a laptop's"
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert "Traceback" not in " ".join(errors.all_inner_texts())
            items = page.evaluate(MEASURE)
            labels = [i["label"] or "" for i in items if i["kind"] == "picture"]
            # the lesson's pictures are all there: the tile, the comparison, the explorer, the core
            # matrices of 06.5, and the inspector (its TMA table)
            assert len(labels) >= 6, labels  # the off-screen outputs measured too
            assert any("16x64 float16, NONE swizzle" in lab_ for lab_ in labels), labels
            assert any(lab_.startswith("WGMMA operand") for lab_ in labels), labels
            assert any(i["kind"] == "table" for i in items)
            page.screenshot(path=str(tmp_path / "notebook06-1000.png"), full_page=True)
            assert [i for i in items if not i["fits"]] == [], width
            assert [i for i in items if i["kind"] == "picture" and i["text"] < 9.9] == [], width
            assert [i for i in items if i["kind"] == "picture" and i["cut"]] == [], width
        finally:
            context.close()
