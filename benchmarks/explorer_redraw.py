"""The swizzle explorer's redraw per setting change, in JupyterLab, and where its time goes.

    .venv/bin/python benchmarks/explorer_redraw.py [--repeat 7] [--quick] [--no-browser] [--width 1400]

Each row is one change of one control, from the default explorer (32x64 float16, 128B) or from a
1024 x 1024 tile, measured two ways:

* in the browser, as a user meets it: JupyterLab (started here, serving a temporary folder) runs
  ``tilelab.swizzle_explorer()`` in a notebook open in headless Chromium (Debian's
  ``/usr/bin/chromium``); the control is changed in the page (its ``<select>`` or ``<input>`` and
  a change event, as a click or Enter sends). *redraw*: from the change to the first frame painted
  with every view redrawn (the verdict, the per-mode table, the picture): the message to the
  kernel, the refresh there, the updates back, and the browser's parse, style, layout and paint.
  *hover ready*: to the frame painted with the picture's per-cell elements (hover strokes and
  tooltips), which follow once the controls rest for ``SETTLE_S``. Median [min-max] over ``--repeat``.
* in Python: the refresh the change runs in the kernel (the models and the three views, the
  picture drawn as its few-element preview), and the full picture built once the controls rest;
  the size (KB) and the number of elements of each picture.

The target is a redraw median under 50 ms for every setting; the table marks a row that misses
it, and the script exits 1 then. On a machine shared with other work the browser figures grow
with its load: the load average is printed with the table. ``explorer_redraw_rows(repeat)``
returns the rows, for other benchmark scripts to print.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MS = 50.0
CHROMIUM = Path("/usr/bin/chromium")

# The controls by the words of their labels in the page.
LABELS = {"dtype": "dtype", "swizzle": "swizzle", "rows": "rows", "cols": "cols", "pattern": "access",
          "start_row": "start row", "chunk": "chunk", "highlight": "highlight",
          "index": "which (row / chunk / thread)", "color_by": "colour by",
          "hover": "hover strokes every cell of the same"}

DEFAULT: dict = {}
BIG = {"rows": 1024, "cols": 1024}
# (label, the explorer's state before, the control changed, its new value)
SETTINGS: list[tuple[str, dict, str, object]] = [
    ("default: swizzle 128B -> NONE", DEFAULT, "swizzle", "NONE"),
    ("default: dtype float16 -> float32", DEFAULT, "dtype", "float32"),
    ("default: dtype float16 -> float64", DEFAULT, "dtype", "float64"),
    ("default: dtype float16 -> int8", DEFAULT, "dtype", "int8"),
    ("default: rows 32 -> 16", DEFAULT, "rows", 16),
    ("default: cols 64 -> 128", DEFAULT, "cols", 128),
    ("default: access -> row_store", DEFAULT, "pattern", "row_store"),
    ("default: start row 0 -> 8", DEFAULT, "start_row", 8),
    ("default: chunk 0 -> 3", DEFAULT, "chunk", 3),
    ("default: highlight -> row", DEFAULT, "highlight", "row"),
    ("highlight row: which 0 -> 5", {"highlight": "row"}, "index", 5),
    ("default: colour chunk -> bank", DEFAULT, "color_by", "bank"),
    ("default: hover bank -> chunk", DEFAULT, "hover", "chunk"),
    ("1024x1024: colour chunk -> bank", BIG, "color_by", "bank"),
    ("1024x1024: dtype float16 -> float64", BIG, "dtype", "float64"),
    ("1024x1024: swizzle 128B -> 64B", BIG, "swizzle", "64B"),
    ("1024x1024: start row 0 -> 1000", BIG, "start_row", 1000),
    ("1024x1024: hover bank -> none", BIG, "hover", "none"),
]
QUICK = [0, 1, 11, 13, 16]


# -- Python: the refresh in the kernel and the full picture ------------------------------------

def _elements(markup: str) -> int:
    return len(re.findall(r"<[a-zA-Z]", markup))


def python_figures(state: dict, control: str, value: object, repeat: int) -> dict:
    """Median ms of the refresh one change runs (in an event loop, as in a kernel: the preview)
    and of the full picture that follows; KB and elements of both pictures."""
    from tilelab.widgets.explorer import SwizzleExplorer

    async def once() -> tuple[float, float, str, str]:
        w = SwizzleExplorer()
        for name, v in state.items():
            getattr(w, name).value = v
        start = time.perf_counter()
        getattr(w, control).value = value
        refresh = time.perf_counter() - start
        preview = w.picture.value
        start = time.perf_counter()
        w._settle()
        full = time.perf_counter() - start
        picture = w.picture.value
        w.close()
        return refresh * 1000, full * 1000, preview, picture

    runs = [asyncio.run(once()) for _ in range(repeat)]
    preview, full = runs[-1][2], runs[-1][3]
    return {"python_ms": statistics.median(r[0] for r in runs), "full_ms": statistics.median(r[1] for r in runs),
            "preview_kb": len(preview.encode()) / 1024, "full_kb": len(full.encode()) / 1024,
            "preview_elements": _elements(preview), "full_elements": _elements(full)}


# -- the browser: JupyterLab in headless Chromium ----------------------------------------------

@contextlib.contextmanager
def jupyter_lab(root: Path) -> Iterator[str]:
    """A JupyterLab serving ``root`` on a free port of this machine, with settings of its own; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    home = Path(tempfile.mkdtemp(prefix="tilelab-lab-"))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTER_DATA_DIR=str(home / "data"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(home / "jupyter-lab.log", "w")  # noqa: SIM115  open while the server runs
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
         "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    log.flush()
                    raise RuntimeError("jupyter lab did not start:\n"
                                       + (home / "jupyter-lab.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# In the page: change one control, then record every change of the explorer's DOM and the frame
# painted after it, until the full picture (no class tl-preview) has followed the preview and
# been painted. redraw: to the frame after the last change made while the preview showed;
# hover: to the frame after the full picture.
CHANGE = """async ([label, value, patience]) => {
  const root = document.querySelector('.tl-explorer-live');
  const box = [...root.querySelectorAll('.widget-inline-hbox')]
      .find(b => (b.querySelector('.widget-label') || {}).textContent === label);
  const control = box.querySelector('select, input');
  const picture = [...root.querySelectorAll('.widget-html-content')].pop();
  const changes = [], painted = [];
  const observer = new MutationObserver(() => {
    const i = changes.length, svg = picture.querySelector(':scope > svg');
    changes.push([performance.now(), !!(svg && svg.classList.contains('tl-preview'))]);
    requestAnimationFrame(() => setTimeout(() => { painted[i] = performance.now(); }, 0));
  });
  observer.observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
  const t0 = performance.now();
  control.value = String(value);
  control.dispatchEvent(new Event('change', {bubbles: true}));
  const settled = () => { const n = changes.length; return n && !changes[n - 1][1] && changes.some(c => c[1])
      && painted[n - 1] !== undefined; };
  const start = Date.now();
  while (!settled() && Date.now() - start < patience) await new Promise(r => setTimeout(r, 10));
  await new Promise(r => setTimeout(r, 100));  // nothing more follows
  observer.disconnect();
  if (!settled()) return null;
  let last = -1;
  changes.forEach((c, i) => { if (c[1]) last = i; });
  return {redraw: painted[last] - t0, hover: painted[changes.length - 1] - t0};
}"""


def _set(page, control: str, value: object) -> dict | None:
    return page.evaluate(CHANGE, [LABELS[control], value, 10_000])


def browser_figures(settings: list[tuple[str, dict, str, object]], repeat: int,
                    width: int = 1400) -> dict[str, dict] | None:
    """Per setting: redraw and hover-ready ms in JupyterLab (median, min, max); None without
    Chromium or Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not CHROMIUM.exists():
        return None
    import nbformat

    from tilelab.widgets.explorer import SwizzleExplorer

    defaults = {name: getattr(SwizzleExplorer(), name).value for name in LABELS}
    root = Path(tempfile.mkdtemp(prefix="tilelab-explorer-"))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("import tilelab\ntilelab.swizzle_explorer()")]
    nbformat.write(nb, root / "explorer.ipynb")
    out: dict[str, dict] = {}
    with jupyter_lab(root) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 1000})
            page.goto(f"{url}/lab/tree/explorer.ipynb", timeout=120_000)
            page.wait_for_function(
                "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }", timeout=120_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.locator(".tl-explorer-live svg").first.wait_for(timeout=120_000)
            page.wait_for_timeout(1000)
            for label, state, control, value in settings:
                for name, v in state.items():
                    _set(page, name, v)
                redraw, hover = [], []
                for _ in range(repeat):
                    got = _set(page, control, value)
                    if got is not None:
                        redraw.append(got["redraw"])
                        hover.append(got["hover"])
                    _set(page, control, defaults[control] if control not in state else state[control])
                for name in reversed(list(state)):
                    _set(page, name, defaults[name])
                out[label] = {"redraw": redraw, "hover": hover}
        finally:
            browser.close()
    return out


def explorer_redraw_rows(repeat: int = 7, settings: list[tuple[str, dict, str, object]] | None = None,
                         browser: bool = True, width: int = 1400) -> list[dict]:
    """One dict per setting: label, the Python figures (python_ms, full_ms, preview_kb, full_kb,
    preview_elements, full_elements) and, in the browser, redraw and hover lists of ms (None
    without Chromium)."""
    settings = settings or SETTINGS
    rows = [{"label": label, **python_figures(state, control, value, repeat)}
            for label, state, control, value in settings]
    lab = browser_figures(settings, repeat, width) if browser else None
    for row in rows:
        row["redraw"] = lab[row["label"]]["redraw"] if lab else None
        row["hover"] = lab[row["label"]]["hover"] if lab else None
    return rows


def _spread(values: list[float] | None) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def print_rows(rows: list[dict]) -> int:
    """The table; the number of rows whose redraw median misses the target."""
    print(f"{'setting change':38} {'redraw ms':>14} {'hover ready ms':>15} {'py ms':>6} {'full py':>7} "
          f"{'KB':>9} {'elements':>10}  target: redraw < {TARGET_MS:.0f} ms")
    missed = 0
    for r in rows:
        flag = ""
        if r["redraw"]:
            flag = "" if statistics.median(r["redraw"]) < TARGET_MS else "MISSED"
        missed += bool(flag)
        print(f"{r['label']:38} {_spread(r['redraw']):>14} {_spread(r['hover']):>15} {r['python_ms']:6.1f} "
              f"{r['full_ms']:7.1f} {r['preview_kb']:4.0f}/{r['full_kb']:<4.0f} "
              f"{r['preview_elements']:4d}/{r['full_elements']:<5d}  {flag}")
    redraws = [statistics.median(r["redraw"]) for r in rows if r["redraw"]]
    if redraws:
        print(f"median of the settings' redraw medians: {statistics.median(redraws):.0f} ms; "
              f"the slowest setting's: {max(redraws):.0f} ms")
    else:
        print("(no Chromium at /usr/bin/chromium or no playwright: Python figures only)")
    print("KB and elements: the preview / the full picture (hover and tooltips). "
          f"Load average while measured: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="five settings only")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--width", type=int, default=1400, help="the browser window's width (px)")
    args = parser.parse_args()
    settings = [SETTINGS[i] for i in QUICK] if args.quick else SETTINGS
    rows = explorer_redraw_rows(args.repeat, settings, browser=not args.no_browser, width=args.width)
    return 1 if print_rows(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
