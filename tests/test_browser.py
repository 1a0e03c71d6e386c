"""The whole thing in a real JupyterLab, driven in headless Chromium (Debian's, via Playwright).

Starts ``jupyter lab`` on a free local port with a temporary root holding a copy of
``examples/hopper_gemm.ipynb``, runs all cells (``%load_ext tilelab`` and the ``%%tilelang``
Hopper GEMM, inspected for sm_90a here since there is no GPU), opens the inspector's TMA tab and
checks the box dims and swizzle it shows against the values the cython launcher's own
``cuTensorMapEncodeTiled`` set-up writes. Screenshots of the light and the dark theme are saved
in the test's temporary folder; in each theme the report's text colour must contrast with its
background. Then the Layouts tab: its SVG cells are laid out (nonzero boxes), and hovering a cell
of the bank-coloured A_shared picture (pure CSS, no JavaScript) strokes every cell of the same bank
and no cell of another bank; a screenshot of that is saved too. The TMA row's links bring the
launcher, CUDA and cell lines into view with no sideways scrolling and nothing overflows the
inspector; the saved notebook reopened with its kernel gone still shows the inspector; the
``nbconvert`` export opened with the network refused shows every tab. The folder holding the
screenshots is printed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = ROOT / "examples" / "hopper_gemm.ipynb"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


def _requirements() -> str | None:
    if not CHROMIUM.exists():
        return ("Debian's chromium is not installed at /usr/bin/chromium (`make chromium` installs it "
                "with apt-get; it could not be installed on this machine)")
    for module in ("playwright", "jupyterlab", "nbformat", "nbconvert", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (make test installs the [dev] extra)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _luminance(css: str) -> float:
    parts = [float(v) for v in re.findall(r"[\d.]+", css)[:3]]
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in parts)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _ground_truth(tmp_path: Path, code: str) -> dict[str, dict]:
    """box dims and swizzle per descriptor, parsed from the cython launcher's encode set-up."""
    sys.path.insert(0, str(ROOT / "tests"))
    from groundtruth import DRIVER_SWIZZLE, cython_tma_fields

    import tilelab

    module_path = tmp_path / "first_kernel_cell.py"
    module_path.write_text(code)  # a real file: T.prim_func needs inspect.getsource
    spec = importlib.util.spec_from_file_location("first_kernel_cell", module_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["first_kernel_cell"] = module
    spec.loader.exec_module(module)
    report = tilelab.inspect(module.gemm, "sm_90a")
    launcher = report.sources.launcher("cython").text
    assert launcher
    truth = {}
    for name in sorted(set(re.findall(r"CUtensorMap (\w+);", launcher))):
        fields = cython_tma_fields(launcher, name)
        truth[name] = {"box": ", ".join(str(v) for v in fields["boxDim"]),
                       "swizzle": DRIVER_SWIZZLE[fields["swizzle"]]}
    assert truth, "the cython launcher encodes no TMA descriptor"
    return truth


@pytest.fixture
def lab(tmp_path: Path):
    reason = _requirements()
    if reason:
        pytest.skip(reason)
    import nbformat

    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.write(nb, root / "first.ipynb")
    port = _free_port()
    env = dict(os.environ)
    env.update({
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "TILELAB_CACHE_DIR": str(tmp_path / "reports"),
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        "TILELANG_PRINT_ON_COMPILATION": "0",
    })
    log = open(tmp_path / "jupyter-lab.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    log.flush()
                    raise AssertionError("jupyter lab did not start:\n" + (tmp_path / "jupyter-lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, nb
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_tma_tab_in_jupyterlab_light_and_dark(lab, tmp_path: Path, capsys) -> None:
    from playwright.sync_api import sync_playwright

    url, nb = lab
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%tilelang"))
    truth = _ground_truth(tmp_path, cell.split("\n", 1)[1])

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1500, "height": 1100},
        )
        try:
            page = context.new_page()
            page.goto(f"{url}/lab/tree/first.ipynb", timeout=90_000)
            page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
            # Wait for the kernel, then run every cell.
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            page.wait_for_function(
                "() => { const w = window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=90_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            inspector = page.locator(".jp-OutputArea-output .tilelab-report").first
            inspector.wait_for(timeout=240_000)
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            tab = inspector.locator(".tl-tabs label", has_text=re.compile(r"^TMA")).first
            tab.click()
            table = inspector.locator("table.tl-table:visible").first
            table.wait_for(timeout=30_000)
            _links_bring_lines_into_view(page, inspector, tmp_path)
            tab.click()
            for name, want in truth.items():
                row = inspector.locator(f"tr[data-descriptor='{name}']:visible")
                assert row.count() == 1, f"no visible TMA row for {name}"
                cells = row.locator("td").all_inner_texts()
                box = row.locator(".tl-box").inner_text().strip()
                assert box == want["box"], (name, box, want)
                assert want["swizzle"] in cells, (name, cells, want)
            inspector.scroll_into_view_if_needed()
            inspector.screenshot(path=str(tmp_path / "inspector-light.png"))
            page.screenshot(path=str(tmp_path / "lab-light.png"))
            light = _colours(page, inspector)
            assert _contrast(*light) >= 4.5, light
            assert _luminance(light[1]) > 0.5, f"light theme background should be light: {light}"

            page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
            page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30_000)
            page.wait_for_timeout(500)
            inspector.scroll_into_view_if_needed()
            inspector.screenshot(path=str(tmp_path / "inspector-dark.png"))
            page.screenshot(path=str(tmp_path / "lab-dark.png"))
            dark = _colours(page, inspector)
            assert _contrast(*dark) >= 4.5, dark
            assert _luminance(dark[1]) < 0.2, f"dark theme background should be dark: {dark}"
            assert dark[0] != light[0]
            assert errors.count() == 0 or "Traceback" not in " ".join(errors.all_inner_texts())
            _layouts_tab_hover(page, inspector, tmp_path)
            _saved_notebook_reopened(page, url, tmp_path)
        finally:
            context.close()
    _export_offline_shows_every_tab(tmp_path)
    with capsys.disabled():  # shown even when pytest captures output: where a reviewer finds the pictures
        print(f"\nscreenshots of the browser test: {tmp_path}")
    for name in ("inspector-light.png", "inspector-dark.png", "lab-light.png", "lab-dark.png", "layouts-hover.png",
                 "link-launcher.png", "link-cuda.png", "link-cell.png", "reopened.png", "export-offline.png"):
        assert (tmp_path / name).stat().st_size > 5_000, name


def _layouts_tab_hover(page, inspector, tmp_path: Path) -> None:
    """Layouts tab: visible SVG cells; hover a bank-5 cell and read the computed strokes."""
    inspector.locator(".tl-tabs label", has_text=re.compile(r"^Layouts")).first.click()
    first_svg = inspector.locator(".tl-panel:visible svg").first
    first_svg.wait_for(timeout=30_000)
    boxes = inspector.locator(".tl-panel:visible svg rect").evaluate_all(
        "rs => rs.slice(0, 200).map(r => { const b = r.getBoundingClientRect(); return [b.width, b.height]; })")
    assert boxes and sum(1 for w, h in boxes if w > 0 and h > 0) >= len(boxes) // 2, boxes[:10]
    # zoom x2 (a checkbox, no script): the picture doubles and scrolls inside its own box
    picture = inspector.locator(".tl-panel:visible .tl-picture svg").first
    width = picture.bounding_box()["width"]
    inspector.locator(".tl-panel:visible .tl-zoom-label").first.click()
    page.wait_for_timeout(200)
    assert abs(picture.bounding_box()["width"] - 2 * width) < 2, (width, picture.bounding_box())
    _no_overflow(inspector)
    inspector.locator(".tl-panel:visible .tl-zoom-label").first.click()
    # the WGMMA overlays are there, each saying whether tilelab agrees with the compiler
    checks = inspector.locator(".tl-panel:visible .tl-wgmma-check").evaluate_all("es => es.map(e => e.textContent)")
    assert len(checks) >= 2 and all("agrees with the compiler" in c for c in checks), checks
    # the bank-coloured picture of the first shared buffer (A_shared), folded by default
    bank = inspector.locator(".tl-panel:visible details.tl-bank-colour").first
    bank.locator("summary").click()
    picture = bank.locator("svg").first
    picture.wait_for(timeout=10_000)
    target = picture.locator("g.tlcells rect.b5").nth(3)
    target.scroll_into_view_if_needed()
    before = picture.locator("g.tlcells rect.b5").nth(0).evaluate("r => getComputedStyle(r).stroke")
    target.hover()
    page.wait_for_timeout(200)
    strokes = picture.evaluate(
        "svg => ['b5', 'b6'].map(c => [...svg.querySelectorAll('g.tlcells rect.' + c)].map("
        "r => getComputedStyle(r).stroke + ' ' + getComputedStyle(r).strokeWidth))")
    same, other = strokes
    assert len(same) >= 4 and len(set(same)) == 1, same[:8]  # every bank-5 cell drawn, one style
    assert same[0] != before and same[0].endswith("2.5px"), (same[0], before)
    assert other and not any(s == same[0] for s in other), other[:4]
    bank.screenshot(path=str(tmp_path / "layouts-hover.png"))


def _no_overflow(inspector) -> None:
    """Nothing in the inspector is wider than its box unless it scrolls inside its own wrapper."""
    overflow = inspector.evaluate("r => r.scrollWidth - r.clientWidth")
    assert overflow <= 1, f"the inspector overflows its box by {overflow}px"


def _follow(page, inspector, link, tmp_path: Path, shot: str) -> str:
    """Click an in-page link; its target line must be shown, in the viewport, with no sideways scroll."""
    href = link.get_attribute("href")
    link.click()
    page.wait_for_timeout(300)
    line = page.locator(f"[id='{href[1:]}']")
    assert line.is_visible(), href
    box = line.bounding_box()
    view = page.viewport_size
    assert box and 0 <= box["y"] < view["height"] and 0 <= box["x"] < view["width"], (href, box)
    scrolled = page.evaluate("() => [...document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook, "
                             ".tilelab-report, .tl-scroll, pre.tl-src')].map(e => e.scrollLeft).filter(x => x)")
    assert not scrolled, f"following {href} scrolled sideways: {scrolled}"
    _no_overflow(inspector)
    page.screenshot(path=str(tmp_path / shot))
    return line.inner_text()


def _links_bring_lines_into_view(page, inspector, tmp_path: Path) -> None:
    """A TMA row links to the launcher line that encodes it, the CUDA line that uses it and the
    cell line that asked for it; the cell line links back to the row."""
    tma = inspector.locator(".tl-tabs label", has_text=re.compile(r"^TMA")).first
    row = inspector.locator("tr[data-descriptor='A_desc']")
    _no_overflow(inspector)
    text = _follow(page, inspector, row.locator("a", has_text=re.compile(r"^tvm_ffi L")).first, tmp_path,
                   "link-launcher.png")
    assert "A_desc" in text, text
    tma.click()
    text = _follow(page, inspector, row.locator("a[href*='-cuda-L']").first, tmp_path, "link-cuda.png")
    assert "A_desc" in text, text
    tma.click()
    text = _follow(page, inspector, row.locator("a[href*='-cell-L']").first, tmp_path, "link-cell.png")
    assert "T.copy(A[" in text, text
    cell_href = row.locator("a[href*='-cell-L']").first.get_attribute("href")
    back = page.locator(f"[id='{cell_href[1:]}'] a.tl-back").first
    back.click()
    page.wait_for_timeout(300)
    assert row.is_visible()


def _saved_notebook_reopened(page, url: str, tmp_path: Path) -> None:
    """Save, stop the kernel, reload: the output is the static inspector, its tabs still work."""
    import json

    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)
    sessions = json.loads(urllib.request.urlopen(f"{url}/api/sessions", timeout=10).read())
    for session in sessions:
        request = urllib.request.Request(f"{url}/api/sessions/{session['id']}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).read()
    page.reload()
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    inspector = page.locator(".jp-OutputArea-output .tilelab-report").first
    inspector.wait_for(timeout=60_000)
    assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()
    inspector.locator(".tl-tabs label", has_text=re.compile(r"^TMA")).first.click()
    page.wait_for_timeout(300)
    assert inspector.locator("tr[data-descriptor='A_desc']").is_visible()
    inspector.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "reopened.png"))


def _export_offline_shows_every_tab(tmp_path: Path) -> None:
    """``jupyter nbconvert --to html`` of the saved notebook, opened with every network request
    refused: each tab shows its own panel."""
    from playwright.sync_api import sync_playwright

    subprocess.run([str(Path(sys.executable).parent / "jupyter"), "nbconvert", "--to", "html",
                    str(tmp_path / "root" / "first.ipynb"), "--output-dir", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    exported = tmp_path / "first.html"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: route.abort() if route.request.url.startswith("http")
                       else route.continue_())
            page.goto(exported.as_uri())
            report = page.locator(".tilelab-report").first
            tabs = report.locator(".tl-tabs label")
            assert tabs.count() >= 8
            for i in range(tabs.count()):
                tab = tabs.nth(i)
                tab.click()
                panel = page.locator(f"[data-tab='{tab.get_attribute('for')}']")
                assert panel.is_visible() and panel.bounding_box()["height"] > 20, tab.inner_text()
                shown = report.locator(".tl-panel").evaluate_all("ps => ps.filter(p => p.offsetParent).length")
                assert shown == 1, (tab.inner_text(), shown)
            report.locator(".tl-tabs label", has_text=re.compile(r"^TMA")).first.click()
            page.screenshot(path=str(tmp_path / "export-offline.png"))
        finally:
            browser.close()


def _colours(page, inspector) -> tuple[str, str]:
    """(text colour of a TMA table cell, background of the report root) as computed in the page."""
    return inspector.locator(".tl-panel:visible td").first.evaluate(
        "td => [getComputedStyle(td).color, getComputedStyle(td.closest('.tilelab-report')).backgroundColor]"
    )
