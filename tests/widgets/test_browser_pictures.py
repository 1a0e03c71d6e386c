"""The pictures and the swizzle explorer in a real JupyterLab (headless Chromium, via Playwright),
at a laptop's 1000 x 800 and at 1400 x 1000, after a kernel restart, and in an offline export.

A notebook with the Hopper GEMM's ``%%tilelang`` cell (inspected for sm_90a), the swizzle lesson's
NONE/128B comparison and ``tilelab.swizzle_explorer()`` is run. At each window size:

* every picture of the inspector's Layouts tab (the layout, its bank colours, the WGMMA overlays,
  the fragment) is no wider than its box, and its text, measured in the page (font size times
  the SVG's on-screen scale), is at least 10 px, with the picture's zoom x2 on where the window
  is too narrow to show it whole at that size; the zoomed picture scrolls in its own box;
* the comparison's two pictures and the explorer's picture show every text at 10 px or more;
* every bank number of the bank-coloured B_shared picture is drawn.

With the kernel held busy, a choice of the explorer's swizzle shows the new setting's views at once
(its page drawn ahead, equal to a direct render of the setting), and a second choice before the
kernel answers shows the drawn views, never a mix; freed, the kernel draws the setting of both.

Then the notebook is saved, its kernel stopped and the page reloaded: the explorer's output
shows its static picture (no "Error displaying widget"), and so does the ``nbconvert`` HTML
export opened with every network request refused. Screenshots go to ``$TILELAB_SCREENSHOTS``
(default: the test's temporary folder), whose path is printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, NOTEBOOK, lab  # noqa: F401  (lab: the JupyterLab fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SIZES = ((1000, 800), (1400, 1000))

# JavaScript: the smallest on-screen font size (px) of the text in each SVG under ``root`` that is
# shown, with the SVG's on-screen width, its box's width and its label.
MEASURE = """(root) => [...root.querySelectorAll('svg[role=img]')].filter(s => s.getBoundingClientRect().width > 0
      && !s.parentElement.closest('svg')).map(s => {
    const box = s.getBoundingClientRect();
    // on-screen px of each text (those drawn through <use> included): its font size in user
    // units times the picture's on-screen scale (its viewBox to its box, CSS zoom included)
    const scale = box.width / s.viewBox.baseVal.width;
    const sizes = [...s.querySelectorAll('text')].filter(t => t.textContent.trim())
        .map(t => parseFloat(t.closest('[font-size]').getAttribute('font-size')) * scale);
    const holder = s.parentElement.getBoundingClientRect();
    return {label: s.getAttribute('aria-label'), min: Math.min(...sizes), width: box.width, holder: holder.width};
})"""


def _shots() -> Path | None:
    """Where the screenshots go: ``$TILELAB_SCREENSHOTS`` when set (kept after the run)."""
    folder = os.environ.get("TILELAB_SCREENSHOTS")
    return Path(folder) if folder else None


def _notebook(root: Path) -> None:
    import nbformat

    first = nbformat.read(NOTEBOOK, as_version=4)
    gemm = next(c.source for c in first.cells if c.cell_type == "code" and c.source.startswith("%%tilelang"))
    nb = nbformat.v4.new_notebook(metadata=first.metadata)  # its kernel: no kernel picker on opening
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext tilelab"),
        nbformat.v4.new_code_cell(gemm),
        nbformat.v4.new_code_cell('from IPython.display import HTML\nfrom tilelab.render import svg\n'
                                  'HTML(svg.compare_svg(16, 64, "float16", ("NONE", "128B"), pattern=None))'),
        nbformat.v4.new_code_cell("import tilelab\ntilelab.swizzle_explorer()"),
    ]
    nbformat.write(nb, root / "pictures.ipynb")


def _open(page, url: str) -> None:
    page.goto(f"{url}/lab/tree/pictures.ipynb", timeout=90_000)
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)


@pytest.mark.heavy
def test_pictures_and_explorer_read_at_both_sizes_after_a_restart_and_offline(lab, tmp_path: Path, capsys) -> None:
    from playwright.sync_api import sync_playwright

    url, _, lab_tmp = lab
    shots = _shots() or tmp_path / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    _notebook(lab_tmp / "root")  # the folder the lab serves
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 800})
        try:
            page = context.new_page()
            _open(page, url)
            page.wait_for_function(
                "() => { const w = window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=90_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            inspector = page.locator(".jp-OutputArea-output .tilelab-report").first
            inspector.wait_for(timeout=240_000)
            explorer = page.locator(".tl-explorer-live").first
            explorer.wait_for(timeout=120_000)
            assert page.locator(".tl-explorer-static").first.is_hidden()  # its static twin hides beside it
            for width, height in SIZES:
                page.set_viewport_size({"width": width, "height": height})
                page.wait_for_timeout(500)
                _layouts_read(page, inspector, shots, f"{width}x{height}")
                _explorer_and_comparison_read(page, explorer, shots, f"{width}x{height}")
            _explorer_switches_without_the_kernel(page, explorer, lab_tmp)
            _restart_shows_the_static_explorer(page, url, shots)
        finally:
            context.close()
    _export_shows_the_static_explorer(lab_tmp, shots)
    with capsys.disabled():
        print(f"\nscreenshots of the picture checks: {shots}")
    for name in ("layouts-1000x800.png", "layouts-1400x1000.png", "explorer-1000x800.png", "explorer-1400x1000.png",
                 "explorer-after-restart.png", "explorer-export-offline.png"):
        assert (shots / name).stat().st_size > 5_000, name


def _layouts_read(page, inspector, shots: Path, size: str) -> None:
    inspector.locator(".tl-tabs label", has_text=re.compile(r"^Layouts")).first.click()
    panel = inspector.locator(".tl-panel:visible").first
    # folded pictures travel compressed and are drawn by the page when their summary is clicked
    panel.evaluate("p => p.querySelectorAll('details.tl-lazy:not([open]) > summary').forEach(s => s.click())")
    panel.evaluate("p => p.querySelectorAll('details').forEach(d => d.open = true)")
    page.wait_for_timeout(300)
    pictures = panel.evaluate(MEASURE)
    assert len(pictures) >= 6, pictures  # A, B: layout, bank colours, overlay; C_local
    for pic in pictures:
        # every picture reads unzoomed: scaled to its box down to 10 px text, past that it scrolls in its box
        assert round(pic["min"], 1) >= 10, (size, pic)
    # too small to read at this width: the picture's own zoom x2 brings it to 10 px or more
    small = [p["label"] for p in pictures if p["min"] < 10]
    zooms = panel.locator(".tl-zoom-label")
    for i in range(zooms.count()):
        zooms.nth(i).click()
    page.wait_for_timeout(300)
    zoomed = {p["label"]: p for p in panel.evaluate(MEASURE)}
    for label in small:
        assert zoomed[label]["min"] >= 10, (size, zoomed[label])
    assert inspector.evaluate("r => r.scrollWidth - r.clientWidth") <= 1  # zoomed pictures scroll in their box
    for i in range(zooms.count()):
        zooms.nth(i).click()
    page.wait_for_timeout(200)
    # every bank of B_shared's bank picture has its number drawn (0-31, as text in the picture)
    bank = panel.locator("details.tl-bank-colour svg").nth(1)
    digits = bank.evaluate("s => [...s.querySelectorAll('g[pointer-events=none] text')].map(t => t.textContent)")
    assert digits, "the bank picture draws no numbers"
    xs = bank.evaluate("s => [...s.querySelectorAll('g[pointer-events=none] text')].map(t => t.getAttribute('x'))")
    numbers = set()
    for text, places in zip(digits, xs):
        at = [float(v) for v in places.split()]
        word = text[0]
        for k in range(1, len(text)):
            if at[k] - at[k - 1] > 7:
                numbers.add(int(word))
                word = ""
            word += text[k]
        numbers.add(int(word))
    assert numbers == set(range(32)), sorted(numbers)
    bank.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"layouts-{size}.png"))
    panel.locator("details.tl-bank-colour").nth(1).screenshot(path=str(shots / f"bank-B_shared-{size}.png"))
    fragment = panel.locator("svg[aria-label='C_local fragment']").first
    fragment.scroll_into_view_if_needed()
    fragment.screenshot(path=str(shots / f"fragment-C_local-{size}.png"))
    overlay = panel.locator("svg[aria-label='WGMMA operand B_shared']").first
    overlay.scroll_into_view_if_needed()
    overlay.screenshot(path=str(shots / f"wgmma-B_shared-{size}.png"))
    # what was measured, picture by picture (a layout's picture and its bank colours share a label)
    figures = [{"picture": p["label"], "unzoomed_min_px": round(p["min"], 2), "width_px": round(p["width"]),
                "box_px": round(p["holder"]), "zoomed_min_px": round(zoomed[p["label"]]["min"], 2)} for p in pictures]
    (shots / f"layouts-{size}.json").write_text(json.dumps(figures, indent=1))


def _explorer_and_comparison_read(page, explorer, shots: Path, size: str) -> None:
    explorer.scroll_into_view_if_needed()
    comparison = page.locator(".tl-compare").first
    for root, what in ((comparison, "comparison"), (explorer, "explorer")):
        pictures = root.evaluate(MEASURE)
        assert pictures, what
        for pic in pictures:
            assert pic["min"] >= 10, (size, what, pic)
            assert pic["width"] <= pic["holder"] + 1, (size, what, pic)
    explorer.screenshot(path=str(shots / f"explorer-{size}.png"))
    comparison.screenshot(path=str(shots / f"comparison-{size}.png"))
    _explorer_hover(page, explorer)


def _explorer_hover(page, explorer) -> None:
    """The live picture (the full one, once the preview has been replaced) hovers by the rules the
    widget holds once: hovering a cell strokes every cell of its bank, and no other."""
    picture = explorer.locator("svg.tl-hg").first
    picture.wait_for(timeout=30_000)
    cell = picture.locator(".tlgroups > g.b5 > rect").nth(2)
    cell.scroll_into_view_if_needed()
    cell.hover()
    page.wait_for_timeout(200)
    strokes = picture.evaluate("s => ['b5', 'b6'].map(b => [...s.querySelectorAll('.tlgroups > g.' + b + ' > rect')]"
                               ".map(r => getComputedStyle(r).strokeWidth))")
    same, other = strokes
    assert len(same) >= 8 and set(same) == {"2.5px"}, same[:4]
    assert other and "2.5px" not in other, other[:4]
    page.mouse.move(0, 0)


# JavaScript: the explorer's views on screen (each shown HTML view's markup) compared with the
# markup of a setting's views, parsed as the page parses a view: [picture's label, equal].
SHOWN = """([expected]) => {
  const norm = s => { const t = document.createElement('template'); t.innerHTML = s; return t.innerHTML; };
  const root = document.querySelector('.tl-explorer-live');
  const seen = [...root.querySelectorAll('.widget-html-content')].filter(e => e.checkVisibility())
      .map(e => e.innerHTML);
  const pictures = [...root.querySelectorAll('svg[role=img]')].filter(s => s.checkVisibility());
  const [conflicts, comparison, preview, full] = (expected || ['', '', '', '']).map(norm);
  return [pictures.map(s => s.getAttribute('aria-label')).join(' + '), seen.includes(conflicts)
          && seen.includes(comparison) && (seen.includes(preview) || seen.includes(full))];
}"""
KERNEL = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"


def _direct_views(values: dict) -> list[str]:
    """A setting's views as the explorer draws them, set in Python: verdict, table, preview, full."""
    import asyncio
    import concurrent.futures

    from tilelab.widgets.explorer import SwizzleExplorer

    async def render() -> list[str]:
        w = SwizzleExplorer()
        for name, value in values.items():
            getattr(w, name).value = value
        views = [w.conflicts.value, w.comparison.value, w.picture.value]
        w._settle()
        w.close()
        return [*views, w.picture.value]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # (Playwright runs an event loop in this thread)
        return pool.submit(asyncio.run, render()).result()


def _explorer_switches_without_the_kernel(page, explorer, lab_tmp: Path) -> None:
    """The kernel held busy (until a file appears: no timing), a change of the swizzle shows its
    setting's views, equal to a direct render; a second change (dtype) before the kernel answers
    shows the drawn views (no page of a setting that is neither); freed, the kernel draws both."""
    explorer.scroll_into_view_if_needed()
    page.wait_for_function("() => !document.querySelector('.tl-explorer-live .tl-views[class*=tl-stale-]')",
                           timeout=60_000)
    gate = lab_tmp / "explorer-gate"
    page.evaluate(f"code => {{ {KERNEL}.requestExecute({{code}}); }}",
                  f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.02)")
    page.wait_for_function(f"() => {KERNEL}.status === 'busy'", timeout=30_000)
    try:
        explorer.locator("select").nth(1).select_option("NONE")  # the swizzle
        page.wait_for_function(f"() => ({SHOWN})([null])[0] === '32x64 float16, NONE swizzle shared layout'",
                               timeout=30_000)
        assert page.evaluate(SHOWN, [_direct_views({"swizzle": "NONE"})])[1]
        assert page.evaluate(f"() => {KERNEL}.status") == "busy"  # the kernel drew none of it
        explorer.locator("select").nth(0).select_option("float32")  # the dtype, the kernel still busy
        page.wait_for_function("() => document.querySelectorAll('.tl-explorer-live .tl-stack > .tl-off').length === 2",
                               timeout=30_000)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
        label, _ = page.evaluate(SHOWN, [None])
        assert label == "32x64 float16, 128B swizzle shared layout", label  # the drawn views, alone
    finally:
        gate.write_text("go")
    page.wait_for_function(f"() => ({SHOWN})([null])[0] === '32x64 float32, NONE swizzle shared layout'"
                           f" && {KERNEL}.status === 'idle'", timeout=60_000)
    assert page.evaluate(SHOWN, [_direct_views({"swizzle": "NONE", "dtype": "float32"})])[1]
    explorer.locator("select").nth(0).select_option("float16")
    explorer.locator("select").nth(1).select_option("128B")
    page.wait_for_function(f"() => ({SHOWN})([null])[0] === '32x64 float16, 128B swizzle shared layout'"
                           f" && {KERNEL}.status === 'idle'", timeout=60_000)
    # and the static view with it (the restart that follows looks for its next change)
    page.wait_for_function("() => [...document.querySelectorAll('.tl-explorer-static svg')].some(s =>"
                           " s.getAttribute('aria-label') === '32x64 float16, 128B swizzle shared layout')",
                           timeout=30_000)


def _restart_shows_the_static_explorer(page, url: str, shots: Path) -> None:
    """Change the explorer, save, stop the kernel, reload: its output is the picture as last drawn."""
    explorer = page.locator(".tl-explorer-live").first
    explorer.locator("select").nth(1).select_option("NONE")  # the swizzle control
    page.wait_for_function("() => [...document.querySelectorAll('.tl-explorer-live svg')]"
                           ".some(s => (s.getAttribute('aria-label') || '').includes('NONE swizzle'))", timeout=30_000)
    # the hidden static view follows once the controls rest: wait for it before saving
    page.wait_for_function("() => [...document.querySelectorAll('.tl-explorer-static svg')]"
                           ".some(s => (s.getAttribute('aria-label') || '').includes('NONE swizzle'))", timeout=30_000)
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)
    for session in json.loads(urllib.request.urlopen(f"{url}/api/sessions", timeout=10).read()):
        request = urllib.request.Request(f"{url}/api/sessions/{session['id']}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).read()
    page.reload()
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    static = page.locator(".tl-explorer-static").first
    static.wait_for(timeout=60_000)
    page.wait_for_timeout(3000)  # the widget manager gives up on the missing model
    assert static.is_visible()
    label = static.locator("svg").first.get_attribute("aria-label")
    assert label == "32x64 float16, NONE swizzle shared layout", label  # the last state, not the first
    assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()
    static.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "explorer-after-restart.png"))


def _export_shows_the_static_explorer(tmp_path: Path, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    subprocess.run([str(Path(sys.executable).parent / "jupyter"), "nbconvert", "--to", "html",
                    str(tmp_path / "root" / "pictures.ipynb"), "--output-dir", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.route("**/*", lambda route: route.abort() if route.request.url.startswith("http")
                       else route.continue_())
            page.goto((tmp_path / "pictures.html").as_uri())
            static = page.locator(".tl-explorer-static").first
            assert static.is_visible()
            assert "SwizzleExplorer(" not in page.locator("body").inner_text()
            pictures = static.evaluate(MEASURE)
            assert pictures and all(p["min"] >= 10 for p in pictures), pictures
            static.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "explorer-export-offline.png"))
        finally:
            browser.close()
