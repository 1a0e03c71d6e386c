"""The whole thing in a real JupyterLab, driven in headless Chromium (Debian's, via Playwright).

One JupyterLab (started once for this file) serves a temporary root holding a copy of
``examples/hopper_gemm.ipynb`` with two more cells: the same kernel shown with
``--show summary,tma,wgmma``, and the first cell again (one kernel inspected twice). One Chromium
runs every cell (``%load_ext tilelab`` and the ``%%tilelang`` Hopper GEMM, inspected for sm_90a
here since there is no GPU) and the tests below reuse that page, in file order:

* the TMA tab's box dims and swizzle against the values the cython launcher's own
  ``cuTensorMapEncodeTiled`` set-up writes; the light and the dark theme (text contrasts with its
  background); the Layouts tab (SVG cells laid out, the bank-coloured picture's hover, zoom); the TMA
  row's links bring the launcher's driver call, the CUDA and the cell lines into view;
* at 1000x800 (a laptop, the file browser open) and at 1400x1000: every tab fits the output or
  scrolls inside its own box, pictures scale to the width, a folded launcher gap opens in the page
  with the launcher's own lines, and ``--show`` keeps links into the sections it leaves out;
* the cell changed and run again: the Summary announces the Diff and the TMA box is highlighted, and
  the Diff's CUDA reads as lines;
* two inspectors of one kernel: each switches its own tabs, and its links land inside it;
* at 1000x800 with the file browser open: no picture wider than its box, no text under 10 px;
* an untrusted copy of the notebook open beside the trusted one: both readable;
* the saved notebook opened untrusted: folded, titled sections under one line saying what trusting
  adds, no stray radio buttons or pictures' loose numbers;
* the saved notebook reopened with its kernel gone, and the ``nbconvert`` export opened with the
  network refused: every tab works.

Screenshots go to ``$TILELAB_SCREENSHOTS`` (default: a folder under pytest's temporary directory),
whose path is printed; look at them to judge the page as a reader would.
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

ROOT = Path(__file__).resolve().parents[2]
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


def _ground_truth(tmp_path: Path, code: str, with_report: bool = False):
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
    return (truth, report) if with_report else truth


SHOW_LINE = "%%tilelang --show summary,tma,wgmma"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("TILELAB_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    reason = _requirements()
    if reason:
        pytest.skip(reason)
    import nbformat

    tmp_path = tmp_path_factory.mktemp("lab")
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%tilelang"))
    nb.cells.append(nbformat.v4.new_code_cell(SHOW_LINE + "\n" + cell.split("\n", 1)[1]))
    nb.cells.append(nbformat.v4.new_code_cell(cell))  # the same kernel inspected twice (a re-run in another cell)
    nbformat.write(nb, root / "first.ipynb")
    port = _free_port()
    env = dict(os.environ)
    env.update({
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),  # its own notebook signatures: what is trusted here
        "TILELAB_CACHE_DIR": str(tmp_path / "reports"),
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        "TILELANG_PRINT_ON_COMPILATION": "0",
    })
    log = open(tmp_path / "jupyter-lab.log", "w")  # noqa: SIM115 open while the server runs, closed in finally
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.port_retries=0",  # the port taken meanwhile (another lab): fail, never serve elsewhere
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
                    raise AssertionError(
                        "jupyter lab did not start:\n" + (tmp_path / "jupyter-lab.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield url, nb, tmp_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    _, _, tmp_path = lab
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1500, "height": 1100},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def notebook(lab, browser):
    """The notebook open in JupyterLab with every cell run: (page, the two inspectors' locators)."""
    url, _, _ = lab
    page = browser.new_page()
    page.goto(f"{url}/lab/tree/first.ipynb", timeout=90_000)
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
        " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=90_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.locator(".jp-OutputArea-output .tilelab-report").nth(2).wait_for(timeout=300_000)
    reports = page.locator(".jp-OutputArea-output .tilelab-report")
    return page, reports.nth(0), reports.nth(1)


def _tab(inspector, title: str):
    return inspector.locator(".tl-tabs label", has_text=re.compile(rf"^{title}")).first


def test_tma_tab_in_jupyterlab_light_and_dark(lab, notebook, shots: Path, tmp_path: Path) -> None:
    _, nb, _ = lab
    page, inspector, _ = notebook
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%tilelang"))
    truth = _ground_truth(tmp_path, cell.split("\n", 1)[1])
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tab = _tab(inspector, "TMA")
    tab.click()
    table = inspector.locator("table.tl-table:visible").first
    table.wait_for(timeout=30_000)
    _links_bring_lines_into_view(page, inspector, shots)
    tab.click()
    for name, want in truth.items():
        row = inspector.locator(f"tr[data-descriptor='{name}']:visible")
        assert row.count() == 1, f"no visible TMA row for {name}"
        cells = row.locator("td").all_inner_texts()
        box = row.locator(".tl-box").inner_text().strip()
        assert box == want["box"], (name, box, want)
        assert want["swizzle"] in cells, (name, cells, want)
    inspector.scroll_into_view_if_needed()
    inspector.screenshot(path=str(shots / "inspector-light.png"))
    page.screenshot(path=str(shots / "lab-light.png"))
    light = _colours(page, inspector)
    assert _contrast(*light) >= 4.5, light
    assert _luminance(light[1]) > 0.5, f"light theme background should be light: {light}"

    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30_000)
    page.wait_for_timeout(500)
    inspector.scroll_into_view_if_needed()
    inspector.screenshot(path=str(shots / "inspector-dark.png"))
    page.screenshot(path=str(shots / "lab-dark.png"))
    dark = _colours(page, inspector)
    assert _contrast(*dark) >= 4.5, dark
    assert _luminance(dark[1]) < 0.2, f"dark theme background should be dark: {dark}"
    assert dark[0] != light[0]
    assert errors.count() == 0 or "Traceback" not in " ".join(errors.all_inner_texts())
    _layouts_tab_hover(page, inspector, shots)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_selector("body[data-jp-theme-light='true']", state="attached", timeout=30_000)
    for name in ("inspector-light.png", "inspector-dark.png", "lab-light.png", "lab-dark.png", "layouts-hover.png",
                 "link-launcher.png", "link-cuda.png", "link-cell.png"):
        assert (shots / name).stat().st_size > 5_000, name


# Every element of the visible panel that reaches past the inspector's right edge, unless it sits
# inside a box that scrolls sideways on its own (.tl-scroll, a <pre>); inline text (whose padding may
# poke out at a line end) is covered by the root's own scroll width, checked apart.
_WIDER = """r => { const right = r.getBoundingClientRect().right + 1; const out = [];
  for (const e of r.querySelectorAll('.tl-panel *')) {
    if (!e.offsetParent || e.closest('.tl-scroll, pre') || getComputedStyle(e).display === 'inline') continue;
    const b = e.getBoundingClientRect();
    if (b.width && b.right > right)
      out.push(e.tagName + '.' + e.className + ' ' + Math.round(b.right - right) + ' ' + e.textContent.slice(0, 60));
  } return out.slice(0, 5); }"""


# make test at a laptop's width; make test-heavy at a desktop's too
@pytest.mark.parametrize("width,height", [(1000, 800), pytest.param(1400, 1000, marks=pytest.mark.heavy)])
def test_every_tab_fits_the_output_at_a_laptop_and_a_desktop_width(notebook, shots: Path, width: int, height: int):
    page, inspector, _ = notebook
    page.set_viewport_size({"width": width, "height": height})
    sidebar = "filebrowser" if width < 1200 else None  # a laptop with the file browser open
    page.evaluate("(id) => { const s = window.jupyterapp.shell; if (id) s.activateById(id); else s.collapseLeft(); }",
                  sidebar)
    page.wait_for_timeout(400)
    labels = inspector.locator(".tl-tabs label")
    assert labels.first.is_visible()
    tops = labels.evaluate_all("ls => ls.map(l => l.getBoundingClientRect().right)")
    box = inspector.bounding_box()
    assert max(tops) <= box["x"] + box["width"] + 1, "the tab row does not wrap inside the output"
    for i in range(labels.count()):
        labels.nth(i).click()
        page.wait_for_timeout(100)
        title = labels.nth(i).inner_text()
        _no_overflow(inspector)
        assert inspector.evaluate(_WIDER) == [], (width, title)
        if re.match(r"Summary|Launcher|TMA|Layouts", title):
            inspector.locator(".tl-panel:visible").first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"tab-{title.split()[0].lower()}-{width}.png"))
    # pictures scale to the width down to their legible size (text at 10 px: their min-width), past
    # that they scroll inside their own box; zoom x2 doubles them
    _tab(inspector, "Layouts").click()
    picture = inspector.locator(".tl-panel:visible .tl-picture svg").first
    holder = inspector.locator(".tl-panel:visible .tl-picture").first
    natural = float(picture.get_attribute("width"))
    legible = float(picture.evaluate("s => parseFloat(getComputedStyle(s).minWidth) || 0"))
    before = picture.bounding_box()["width"]
    assert before == pytest.approx(min(natural, max(holder.bounding_box()["width"], legible)), abs=2)
    assert holder.evaluate("h => getComputedStyle(h).overflowX") == "auto"  # wider than its box: it scrolls there
    inspector.locator(".tl-panel:visible .tl-zoom-label").first.click()
    page.wait_for_timeout(200)
    assert picture.bounding_box()["width"] == pytest.approx(2 * natural, abs=2)
    _no_overflow(inspector)
    inspector.locator(".tl-panel:visible .tl-zoom-label").first.click()


def test_the_launcher_opens_at_its_calls_and_every_gap_opens_in_the_page(notebook, lab, shots: Path, tmp_path: Path):
    page, inspector, _ = notebook
    page.set_viewport_size({"width": 1000, "height": 800})
    _tab(inspector, "Launcher").click()
    block = inspector.locator("details.tl-sub[open]").first
    assert "tvm_ffi" in block.locator("summary").first.inner_text()
    first = block.locator("pre.tl-src > span").first
    # opens at a driver call, not at the file's includes
    assert not first.inner_text().startswith("//") and "#include" not in first.inner_text()
    text = _launcher_text(lab, tmp_path, "tvm_ffi").split("\n")
    gap = block.locator("details.tl-gap").nth(1)
    pre = gap.locator("pre")
    start, count = int(pre.get_attribute("data-first")), int(pre.get_attribute("data-lines"))
    gap.locator("summary").click()
    pre.locator("span").nth(count - 1).wait_for(timeout=10_000)
    shown = [s[:-1] if s.endswith("\n") else s for s in pre.locator("span").all_text_contents()]
    assert shown == text[start - 1:start - 1 + count]
    # numbered as the launcher's own lines
    number = pre.locator("span").first.evaluate("s => getComputedStyle(s, '::before').content")
    assert number.strip('"') == str(start) or "counter" in number, number
    pre.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "launcher-gap-open.png"))
    # the TMA row's link lands on the driver call itself
    _tab(inspector, "TMA").click()
    link = inspector.locator("tr[data-descriptor='A_desc'] a", has_text=re.compile(r"^tvm_ffi L")).first
    line = _follow(page, inspector, link, shots, "link-launcher-call.png")
    assert "TVMFFIFunctionCall(__tvm_tensormap_create_tiled_packed" in line, line


def test_show_keeps_links_into_the_tabs_it_leaves_out(notebook, shots: Path):
    page, _, shown = notebook
    page.set_viewport_size({"width": 1400, "height": 1000})
    titles = shown.locator(".tl-tabs label").all_inner_texts()
    assert [t.split(" (")[0] for t in titles] == ["Summary", "TMA", "WGMMA"], titles
    _tab(shown, "TMA").click()
    row = shown.locator("tr[data-descriptor='A_desc']")
    where = row.locator(".tl-where").inner_text()
    assert "CUDA" in where and "encoded" in where, where
    excerpt = shown.locator(".tl-panel:visible details.tl-sub[open] pre.tl-src").first
    assert excerpt.inner_text().strip(), "the open A_desc excerpt is empty"
    line = _follow(page, shown, row.locator("a[href*='-cuda-L']").first, shots, "show-link-cuda.png")
    assert "A_desc" in line
    panel = shown.locator(".tl-panel:visible")
    assert panel.count() == 1 and "CUDA" in panel.locator("summary").first.inner_text()


def test_a_changed_cell_announces_its_diff_and_highlights_the_changed_box(notebook, lab, shots: Path):
    _, nb, _ = lab
    page, _, _ = notebook
    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("%%tilelang\n"))
    source = nb.cells[index].source
    assert "block_K=32" in source
    page.evaluate("""([i, text]) => { const nb = window.jupyterapp.shell.currentWidget;
        nb.content.widgets[i].model.sharedModel.setSource(text); nb.content.activeCellIndex = i;
        return window.jupyterapp.commands.execute('notebook:run-cell'); }""",
                  [index, source.replace("block_K=32", "block_K=64")])
    inspector = page.locator(".jp-OutputArea-output .tilelab-report").first
    _tab(inspector, "Diff").wait_for(timeout=240_000)
    note = inspector.locator(".tl-diff-note")
    assert note.is_visible() and "box dim: 32, 128 \u2192 64, 128" in note.inner_text(), note.inner_text()
    _tab(inspector, "TMA").click()
    cell = inspector.locator("tr[data-descriptor='A_desc'] .tl-diff-cell:has(.tl-box)")
    assert cell.inner_text() == "64, 128" and cell.get_attribute("title") == "previous run: 32, 128"
    background = cell.evaluate("e => getComputedStyle(e).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
    inspector.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "diff-tma.png"))
    _tab(inspector, "Diff").click()
    assert inspector.locator(".tl-panel:visible pre.tl-diff span.gi").count() > 0
    assert inspector.locator(".tl-panel:visible pre.tl-diff span.gi span[class]").count() > 0  # coloured code
    # a diff reads as lines: each line of the <pre> is one line high (a token is not a line of its own)
    lines = inspector.locator(".tl-panel:visible pre.tl-diff").evaluate(
        "p => [...p.children].map(s => [s.getBoundingClientRect().height, s.textContent])")
    height = min(h for h, _ in lines)
    assert all(text.count("\n") == 1 for _, text in lines)
    one_high = [h for h, _ in lines if h < 1.5 * height]  # long lines wrap; the rest are one line high
    assert len(one_high) >= 0.7 * len(lines), [x for x in lines if x[0] >= 1.5 * height][:3]
    assert any(text.startswith("+") and "extern" not in text and len(text.split()) > 2 for _, text in lines)
    inspector.locator(".tl-panel:visible pre.tl-diff").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "diff-cuda-lines.png"))
    page.screenshot(path=str(shots / "diff-tab.png"))
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)


def test_two_inspectors_of_one_kernel_keep_their_own_tabs_and_links(notebook, shots: Path):
    page, first, _ = notebook
    twin = page.locator(".jp-OutputArea-output .tilelab-report").nth(2)
    page.set_viewport_size({"width": 1400, "height": 1000})
    assert first.get_attribute("id") != twin.get_attribute("id")
    _tab(first, "Summary").click()
    _tab(twin, "TMA").click()
    page.wait_for_timeout(200)

    def shown(inspector) -> list[str]:
        return inspector.locator(".tl-panel").evaluate_all(
            "ps => ps.filter(p => p.offsetParent).map(p => p.id.split('-').pop())")

    assert shown(twin) == ["tma"] and shown(first) == ["summary"]
    assert twin.locator("tr[data-descriptor='A_desc']").is_visible()
    # a link in the second lands in the second; the first keeps its tab
    link = twin.locator("tr[data-descriptor='A_desc'] a[href*='-cuda-L']").first
    href = link.get_attribute("href")
    assert href.startswith(f"#{twin.get_attribute('id')}-")
    line = _follow(page, twin, link, shots, "twin-link-cuda.png")
    assert "A_desc" in line and twin.locator(f"[id='{href[1:]}']").is_visible()
    assert shown(twin) == ["cuda"] and shown(first) == ["summary"]
    _tab(first, "Layouts").click()
    assert shown(first) == ["layouts"] and shown(twin) == ["cuda"]
    _tab(first, "Summary").click()


# The pictures on screen: each svg's box against its holder's, and the smallest text drawn, in px
# (the font size times the picture's scale).
_PICTURES = """r => [...r.querySelectorAll('.tl-panel svg')].filter(s => s.getBoundingClientRect().width > 0
    && !s.parentElement.closest('svg')).map(s => {
  const box = s.getBoundingClientRect(), holder = s.parentElement.getBoundingClientRect();
  const scale = box.width / (s.viewBox.baseVal && s.viewBox.baseVal.width || box.width);
  const sizes = [...s.querySelectorAll('text')].filter(t => t.getBoundingClientRect().width > 0)
    .map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
  const scroller = s.parentElement.closest('.tl-scroll');
  return {label: s.getAttribute('aria-label'), width: box.width, box: Math.min(holder.width,
          r.getBoundingClientRect().width), text: sizes.length ? Math.min(...sizes) : 99,
          // a picture wider than its box scrolls inside a box of its own, no wider than the page
          scrolls: !!scroller && getComputedStyle(scroller).overflowX === 'auto'
                   && scroller.getBoundingClientRect().right <= r.getBoundingClientRect().right + 1};
})"""


def test_at_a_laptop_width_no_picture_is_wider_than_its_box_and_no_text_is_under_10px(notebook, shots: Path):
    page, inspector, _ = notebook
    page.set_viewport_size({"width": 1000, "height": 800})
    page.evaluate("window.jupyterapp.shell.activateById('filebrowser')")
    page.wait_for_timeout(400)
    _tab(inspector, "Layouts").click()
    opened = []
    for details in inspector.locator(".tl-panel:visible details.tl-sub:not([open]):not(.tl-lazy)").all():
        if details.is_visible():  # every layout, and its bank picture, open and drawn
            details.locator(":scope > summary").click()
            opened.append(details)
    # the folded pictures too (drawn by the page when opened): bank colours, WGMMA core matrices
    panel = inspector.locator(".tl-panel:visible").first
    lazy = panel.evaluate("p => { const ds = [...p.querySelectorAll('details.tl-lazy:not([open])')]"
                          ".filter(d => d.offsetParent); ds.forEach(d => { d.dataset.tlOpened = '1';"
                          " d.querySelector(':scope > summary').click(); }); return ds.length; }")
    assert lazy >= 3  # each layout's bank colours, each WGMMA operand's core matrices
    inspector.locator(".tl-panel:visible details.tl-bank-colour svg").first.wait_for(timeout=10_000)
    inspector.locator(".tl-panel:visible .tl-wgmma-overlay svg").first.wait_for(timeout=10_000)
    pictures = inspector.evaluate(_PICTURES)
    assert len(pictures) >= 6 and any(p["label"].startswith("B_shared") for p in pictures), pictures
    assert sum(p["label"].startswith("WGMMA operand") for p in pictures) >= 2, pictures
    inspector.locator(".tl-panel:visible .tl-wgmma-overlay").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "layouts-1000-filebrowser.png"))
    # no picture wider than its box, but one in a scroller of its own (its text kept at 10 px)
    wide = [p for p in pictures if p["width"] > p["box"] + 1 and not p["scrolls"]]
    small = [p for p in pictures if p["text"] < 9.9]
    assert not wide, wide
    assert not small, small
    _no_overflow(inspector)
    panel.evaluate("p => p.querySelectorAll('details[data-tl-opened]').forEach(d => {"
                   " d.open = false; delete d.dataset.tlOpened; })")
    for details in reversed(opened):
        if details.get_attribute("open") is not None:
            details.locator(":scope > summary").click()


@pytest.mark.heavy
def test_an_untrusted_notebook_beside_a_trusted_one_is_readable(lab, notebook, shots: Path):
    import json

    url, _, tmp_path = lab
    page, inspector, _ = notebook
    root = tmp_path / "root"
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.time() + 30
    while "tilelab-report" not in (root / "first.ipynb").read_text() and time.time() < deadline:
        time.sleep(0.5)
    data = json.loads((root / "first.ipynb").read_text())
    data["metadata"]["received_from"] = "a student"  # its signature no longer holds: untrusted
    (root / "beside.ipynb").write_text(json.dumps(data))
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.evaluate("window.jupyterapp.commands.execute('docmanager:open', "
                  "{path: 'beside.ipynb', options: {mode: 'split-right'}}).then(() => 0)")
    untrusted = page.locator(".jp-OutputArea-output .tilelab-report:not(:has(> style))").first
    untrusted.wait_for(timeout=90_000)
    page.wait_for_timeout(1500)
    page.keyboard.press("Escape")  # a kernel dialog, if any
    try:
        # the trusted page's stylesheet does not reach it: its trust line and its sections show
        note = untrusted.locator("p.tl-untrusted").first
        assert note.is_visible() and "Trust the notebook" in note.inner_text()
        folds = untrusted.locator("details.tl-fold")
        assert folds.count() >= 8 and folds.first.locator(":scope > summary").is_visible()
        assert untrusted.locator("details.tl-fold[open] table").first.is_visible()  # the Summary, open
        assert untrusted.bounding_box()["height"] > 300
        untrusted.evaluate("r => r.scrollIntoView()")
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / "untrusted-beside-trusted.png"))
        # and the trusted one still reads as tabs
        _tab(inspector, "TMA").click()
        assert inspector.locator("tr[data-descriptor='A_desc']").is_visible()
        assert not inspector.locator("p.tl-untrusted").first.is_visible()
        _tab(inspector, "Summary").click()
    finally:
        page.evaluate("() => { const s = window.jupyterapp.shell; for (const w of [...s.widgets('main')])"
                      " if (w.context && w.context.path === 'beside.ipynb') w.dispose(); return 0; }")


# make test at a laptop's width; make test-heavy at a desktop's too
@pytest.mark.parametrize("width,height", [(1000, 800), pytest.param(1400, 1000, marks=pytest.mark.heavy)])
def test_an_untrusted_notebook_reads_as_folded_titled_sections(lab, browser, notebook, shots: Path, width: int,
                                                               height: int):
    import json

    url, _, tmp_path = lab
    root = tmp_path / "root"
    notebook[0].evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.time() + 30
    while "tilelab-report" not in (root / "first.ipynb").read_text() and time.time() < deadline:
        time.sleep(0.5)
    name = f"untrusted-{width}.ipynb"
    data = json.loads((root / "first.ipynb").read_text())
    data["metadata"]["received_from"] = "a student"  # the content changed: its signature no longer holds
    (root / name).write_text(json.dumps(data))
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": height})
    try:
        page.goto(f"{url}/lab/tree/{name}", timeout=90_000)
        report = page.locator(".jp-OutputArea-output .tilelab-report").first
        report.wait_for(timeout=90_000)
        page.wait_for_timeout(1500)
        page.keyboard.press("Escape")  # a kernel dialog, if any
        # JupyterLab sanitised it: no stylesheet, no script, ids renamed
        assert report.evaluate("r => r.querySelector('style') === null && !r.hasAttribute('onclick')")
        note = report.locator("p.tl-untrusted").first
        assert note.is_visible() and "Trust the notebook" in note.inner_text()
        assert report.locator("input[type=radio]:visible").count() == 0
        assert not report.locator("nav").is_visible()
        folds = report.locator("details.tl-fold")
        titles = folds.evaluate_all("ds => ds.map(d => [d.open, d.querySelector('summary').innerText.trim()])")
        assert titles[0] == [True, "Summary"], titles
        assert all(not opened for opened, _ in titles[1:]) and len(titles) >= 8
        assert [t.split(" (")[0] for _, t in titles[:8]] == ["Summary", "Cell", "CUDA", "Launcher", "TMA", "WGMMA",
                                                              "Layouts", "Arguments"], titles
        height_px = report.bounding_box()["height"]
        assert height_px < 2500, f"the untrusted inspector is {height_px:.0f} px tall"
        # no loose numbers of stripped pictures: the layouts are hidden with their pictures
        folds.nth(6).locator("summary").first.click()
        assert not report.locator(".tl-pics").first.is_visible()
        page.screenshot(path=str(shots / f"untrusted-layouts-{width}.png"))
        report.evaluate("r => r.scrollIntoView()")
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / f"untrusted-{width}.png"))
        for i in range(folds.count()):
            folds.nth(i).evaluate("d => { d.open = true; }")
        assert report.evaluate(_WIDER) == [], width
        _no_overflow(report)
    finally:
        page.close()


@pytest.mark.heavy
def test_the_saved_notebook_reopened_and_exported_offline(lab, browser, notebook, shots: Path, capsys):
    url, _, tmp_path = lab
    page, _, _ = notebook
    page.set_viewport_size({"width": 1400, "height": 1000})
    _saved_notebook_reopened(page, url, shots)
    _export_offline_shows_every_tab(browser, tmp_path, shots)
    with capsys.disabled():  # shown even when pytest captures output: where a reviewer finds the pictures
        print(f"\nscreenshots of the browser test: {shots}")
    for name in ("reopened.png", "export-offline.png", "export-offline-1000.png"):
        assert (shots / name).stat().st_size > 5_000, name


def _launcher_text(lab, tmp_path: Path, backend: str) -> str:
    _, nb, _ = lab
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%tilelang"))
    _, report = _ground_truth(tmp_path, cell.split("\n", 1)[1], with_report=True)
    return report.sources.launcher(backend).text


def _layouts_tab_hover(page, inspector, shots: Path) -> None:
    """Layouts tab: visible SVG cells; hover a bank-5 cell and read the computed strokes."""
    inspector.locator(".tl-tabs label", has_text=re.compile(r"^Layouts")).first.click()
    first_svg = inspector.locator(".tl-panel:visible svg").first
    first_svg.wait_for(timeout=30_000)
    boxes = inspector.locator(".tl-panel:visible svg rect").evaluate_all(
        "rs => rs.slice(0, 200).map(r => { const b = r.getBoundingClientRect(); return [b.width, b.height]; })")
    assert boxes and sum(1 for w, h in boxes if w > 0 and h > 0) >= len(boxes) // 2, boxes[:10]
    # zoom x2 (a checkbox, no script): the picture doubles and scrolls inside its own box
    picture = inspector.locator(".tl-panel:visible .tl-picture svg").first
    width = float(picture.get_attribute("width"))  # drawn at most this wide, scaled to the output
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
    bank.screenshot(path=str(shots / "layouts-hover.png"))


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


def _links_bring_lines_into_view(page, inspector, shots: Path) -> None:
    """A TMA row links to the launcher line that encodes it, the CUDA line that uses it and the
    cell line that asked for it; the cell line links back to the row."""
    tma = inspector.locator(".tl-tabs label", has_text=re.compile(r"^TMA")).first
    row = inspector.locator("tr[data-descriptor='A_desc']")
    _no_overflow(inspector)
    text = _follow(page, inspector, row.locator("a", has_text=re.compile(r"^tvm_ffi L")).first, shots,
                   "link-launcher.png")
    assert "A_desc" in text, text
    tma.click()
    text = _follow(page, inspector, row.locator("a[href*='-cuda-L']").first, shots, "link-cuda.png")
    assert "A_desc" in text, text
    tma.click()
    text = _follow(page, inspector, row.locator("a[href*='-cell-L']").first, shots, "link-cell.png")
    assert "T.copy(A[" in text, text
    cell_href = row.locator("a[href*='-cell-L']").first.get_attribute("href")
    back = page.locator(f"[id='{cell_href[1:]}'] a.tl-back").first
    back.click()
    page.wait_for_timeout(300)
    assert row.is_visible()


def _saved_notebook_reopened(page, url: str, shots: Path) -> None:
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
    page.screenshot(path=str(shots / "reopened.png"))


def _export_offline_shows_every_tab(browser, tmp_path: Path, shots: Path) -> None:
    """``jupyter nbconvert --to html`` of the saved notebook, opened with every network request
    refused: each tab shows its own panel."""
    subprocess.run([str(Path(sys.executable).parent / "jupyter"), "nbconvert", "--to", "html",
                    str(tmp_path / "root" / "first.ipynb"), "--output-dir", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    exported = tmp_path / "first.html"
    page = browser.new_page()
    try:
        page.set_viewport_size({"width": 1400, "height": 1000})
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
        page.screenshot(path=str(shots / "export-offline.png"))
        # the export's script runs: a folded launcher gap opens, a folded picture is drawn
        page.set_viewport_size({"width": 1000, "height": 800})
        report.locator(".tl-tabs label", has_text=re.compile(r"^Launcher")).first.click()
        gap = report.locator(".tl-panel:visible details.tl-gap").first
        gap.locator("summary").click()
        gap.locator("pre span").first.wait_for(timeout=10_000)
        report.locator(".tl-tabs label", has_text=re.compile(r"^Layouts")).first.click()
        bank = report.locator(".tl-panel:visible details.tl-bank-colour").first
        bank.locator("summary").click()
        bank.locator("svg").first.wait_for(timeout=10_000)
        _no_overflow(report)
        page.screenshot(path=str(shots / "export-offline-1000.png"))
    finally:
        page.close()


def _colours(page, inspector) -> tuple[str, str]:
    """(text colour of a TMA table cell, background of the report root) as computed in the page."""
    return inspector.locator(".tl-panel:visible td").first.evaluate(
        "td => [getComputedStyle(td).color, getComputedStyle(td.closest('.tilelab-report')).backgroundColor]"
    )
