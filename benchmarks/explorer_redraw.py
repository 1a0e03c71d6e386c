"""The swizzle explorer's redraw per setting change, in JupyterLab, and where its time goes.

    .venv/bin/python benchmarks/explorer_redraw.py [--repeat 7] [--quick] [--no-browser] [--width 1400]

Each row is one change of one control, from the default explorer (32x64 float16, 128B) or from a
1024 x 1024 tile, measured two ways:

* in the browser, as a user meets it: JupyterLab (started here, serving a temporary folder) runs
  ``tilelab.swizzle_explorer()`` in a notebook open in headless Chromium (Debian's
  ``/usr/bin/chromium``); the control is changed in the page (its ``<select>`` or ``<input>`` and
  a change event, as a click or Enter sends). *redraw*: from the change to the first frame painted
  with the new setting's views on screen (the verdict, the per-mode table and one picture, each
  exactly the markup a direct render of that setting gives: the script renders it in Python and
  the page parses it as it parses a view), the kernel having received the change (busy, then
  idle). Where the explorer draws the setting ahead (a choice control's page), that frame comes
  from the browser alone; else from the message to the kernel, the refresh there, the updates
  back, and the browser's parse, style, layout and paint. *hover ready*: to the frame painted
  with the full picture (per-cell elements: hover strokes and tooltips), which follows once the
  controls rest for ``SETTLE_S``. Median [min-max] over ``--repeat``. A frame painted with other
  views after the new setting's showed is counted as FLICKER (a wrong picture in between).
* where the time goes: the CPU time the kernel, the server and the browser (every thread of each,
  from ``/proc``) spent from the change to the redraw's frame, and the time they waited for a CPU
  (on a machine shared with other work, that wait is what the load adds to the redraw);
* in Python: the refresh the change runs in the kernel (the models and the three views, the
  picture drawn as its few-element preview), and the full picture built once the controls rest;
  the size (KB) and the number of elements of each picture; the pages the kernel draws ahead once
  idle after the change (ms), the markup of the pages it makes for them (sent to the browser
  once, on a first visit) and of the pages its stacks hold (KB).

A last row measures the floor under all of them on the same page: a dropdown whose change the
kernel echoes into a one-word HTML widget (the round trip and a paint, nothing drawn).

The target is a redraw median under 50 ms for every setting; the table marks a row that misses
it (or flickers), and the script exits 1 then. On a machine shared with other work the browser figures grow
with its load: the load average is printed with the table. ``explorer_redraw_rows(repeat)``
returns the rows, for other benchmark scripts to print.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
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
    ("default: dtype float16 -> bfloat16", DEFAULT, "dtype", "bfloat16"),
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
    ("1024x1024: dtype float16 -> int8", BIG, "dtype", "int8"),
    ("1024x1024: swizzle 128B -> 64B", BIG, "swizzle", "64B"),
    ("1024x1024: start row 0 -> 1000", BIG, "start_row", 1000),
    ("1024x1024: hover bank -> none", BIG, "hover", "none"),
]
QUICK = [0, 1, 11, 13, 17]


# -- Python: the refresh in the kernel and the full picture ------------------------------------

def _elements(markup: str) -> int:
    return len(re.findall(r"<[a-zA-Z]", markup))


def _pages(w) -> dict[int, int]:
    """The pages the explorer has made (its pool: each sent to the browser once), bytes by widget id."""
    return {id(page): sum(len(c.value.encode()) for c in page.children) for page in getattr(w, "_pool", {}).values()}


def _held(w) -> int:
    """Bytes of the pages its stacks hold now."""
    return sum(sum(len(c.value.encode()) for c in e.children) for p in getattr(w, "_pages", {}).values()
               for e in p.stack.children if e._dom_classes == ("tl-off",))


def _redraw_pages(w) -> None:
    """Redraw every stale stack of pages now (what the kernel does once idle after a change)."""
    while getattr(w, "_stale", None):
        w._rebuild_next()
        if w._rebuild_handle is not None:
            w._rebuild_handle.cancel()
            w._rebuild_handle = None


def python_figures(state: dict, control: str, value: object, repeat: int) -> dict:
    """Median ms of the refresh one change runs (in an event loop, as in a kernel: the preview),
    of the full picture that follows and of the pages redrawn after it (each choice control's
    other values, drawn ahead for the browser); KB and elements of both pictures; KB of the
    pages' markup that the change sends (the pages that changed) and that the pages hold."""
    from tilelab.widgets.explorer import SwizzleExplorer

    async def once() -> tuple[float, float, str, str, float, float, float]:
        w = SwizzleExplorer()
        for name, v in state.items():
            getattr(w, name).value = v
        _redraw_pages(w)
        made = _pages(w)
        start = time.perf_counter()
        getattr(w, control).value = value
        refresh = time.perf_counter() - start
        preview = w.picture.value
        start = time.perf_counter()
        _redraw_pages(w)
        pages = time.perf_counter() - start
        sent = sum(n for key, n in _pages(w).items() if key not in made) / 1024
        held = _held(w) / 1024
        start = time.perf_counter()
        getattr(w, "_settle", lambda: None)()  # (an explorer of one step draws the full picture at once)
        full = time.perf_counter() - start
        picture = w.picture.value
        w.close()
        return refresh * 1000, full * 1000, preview, picture, pages * 1000, sent, held

    runs = [asyncio.run(once()) for _ in range(repeat)]
    preview, full = runs[-1][2], runs[-1][3]
    return {"python_ms": statistics.median(r[0] for r in runs), "full_ms": statistics.median(r[1] for r in runs),
            "preview_kb": len(preview.encode()) / 1024, "full_kb": len(full.encode()) / 1024,
            "preview_elements": _elements(preview), "full_elements": _elements(full),
            "pages_ms": statistics.median(r[4] for r in runs), "pages_sent_kb": runs[-1][5],
            "pages_kb": runs[-1][6]}


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


# In the page: change one control and record, for every frame painted after a change of the
# explorer's DOM, which views it showed: "preview" or "full" where the views on screen are exactly
# the new setting's (its verdict, its per-mode table and one picture, each equal to the markup a
# direct render of that setting gives, which the script computes in Python and the page parses
# as it parses a view), else null. START resolves once the new setting's views are on screen, the
# kernel has received the change (busy, then idle) and nothing more changed for 40 ms; redraw: to
# the first frame painted with them. SETTLE resolves once the full picture (an element per cell)
# is painted; hover: to it. Frames painted with other views after the new setting's showed count
# as flicker (a change must never show a wrong picture in between).
START = """async ([label, value, expected, patience]) => {
  const norm = s => { const t = document.createElement('template'); t.innerHTML = s; return t.innerHTML; };
  const [conflicts, comparison, preview, full] = expected.map(norm);
  const root = document.querySelector('.tl-explorer-live');
  const box = [...root.querySelectorAll('.widget-inline-hbox')]
      .find(b => (b.querySelector('.widget-label') || {}).textContent === label);
  const control = box.querySelector('select, input');
  const shown = () => {
    const seen = [...root.querySelectorAll('.widget-html-content')].filter(e => e.checkVisibility())
        .map(e => e.innerHTML);
    const pictures = seen.filter(h => h.startsWith('<svg'));
    if (pictures.length !== 1 || !seen.includes(conflicts) || !seen.includes(comparison)) return null;
    return pictures[0] === full ? 'full' : pictures[0] === preview ? 'preview' : null;
  };
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const run = window.__tlRun = {frames: [], busy: false, idle: false, wake: () => {}, shown};
  const first = () => run.frames.findIndex(f => f[1] !== null);
  const drawn = () => run.idle && first() >= 0 && run.frames[run.frames.length - 1][1] !== null
      && performance.now() - run.frames[run.frames.length - 1][0] >= 40;
  run.observer = new MutationObserver(() => requestAnimationFrame(() => {
    const what = shown();
    setTimeout(() => { run.frames.push([performance.now(), what]); run.wake(); }, 0);
  }));
  run.observer.observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
  const status = (_, state) => {
    if (state === 'busy') run.busy = true;
    if (state === 'idle' && run.busy) { run.idle = true; run.wake(); }
  };
  kernel.statusChanged.connect(status);
  const done = new Promise(resolve => {
    const timer = setTimeout(() => resolve(false), patience);
    run.wake = () => setTimeout(() => { if (drawn()) { clearTimeout(timer); resolve(true); } }, 40);
  });
  const t0 = run.t0 = performance.now();
  control.value = String(value);
  control.dispatchEvent(new Event('change', {bubbles: true}));
  const ok = await done;
  kernel.statusChanged.disconnect(status);
  run.wake = () => {};
  return ok ? run.frames[first()][0] - t0 : null;
}"""
# The full picture: resolves once it is painted (at once where it already is); [hover ms, the
# frames painted with other views after the new setting's first showed].
SETTLE = """async (patience) => {
  const run = window.__tlRun;
  const settled = () => run.frames.length && run.frames[run.frames.length - 1][1] === 'full';
  const start = Date.now();
  while (!settled() && Date.now() - start < patience) await new Promise(r => setTimeout(r, 20));
  await new Promise(r => setTimeout(r, 60));  // nothing more follows
  run.observer.disconnect();
  const first = run.frames.findIndex(f => f[1] !== null);
  const flicker = first < 0 ? 0 : run.frames.slice(first).filter(f => f[1] === null).length;
  const at = run.frames.findIndex(f => f[1] === 'full');
  return [settled() && run.shown() === 'full' ? run.frames[at][0] - run.t0 : null, flicker];
}"""


# The floor under every redraw: a dropdown whose change a kernel echoes into a one-word HTML
# widget (the message there and back, and a paint), beside the explorer on the same page.
PROBE_CELL = ("import ipywidgets as W\n_a = W.Dropdown(options=('a', 'b'), description='probe')\n"
              "_b = W.HTML('a')\n_a.observe(lambda c: setattr(_b, 'value', c['new']), 'value')\n"
              "W.VBox([_a, _b], _dom_classes=['tl-probe'])")
PROBE = """async (value) => {
  const root = document.querySelector('.tl-probe'), select = root.querySelector('select');
  const out = root.querySelector('.widget-html-content');
  let wake = () => {};
  const painted = new Promise(resolve => { wake = resolve; setTimeout(() => resolve(null), 10000); });
  const observer = new MutationObserver(() => { if (out.textContent === value)
      requestAnimationFrame(() => setTimeout(() => wake(performance.now()), 0)); });
  observer.observe(out, {subtree: true, childList: true, characterData: true});
  const t0 = performance.now();
  select.value = value;
  select.dispatchEvent(new Event('change', {bubbles: true}));
  const at = await painted;
  await new Promise(r => setTimeout(r, 40));  // as a redraw's: nothing more follows
  observer.disconnect();
  return at === null ? null : at - t0;
}"""


def _processes() -> dict[str, list[int]]:
    """This script's descendant processes by part: the kernel, the server, the browser."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    parts: dict[str, list[int]] = {"kernel": [], "server": [], "browser": []}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        with contextlib.suppress(OSError):
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            part = ("kernel" if "ipykernel" in cmd else "server" if "jupyter-lab" in cmd or "jupyter lab" in cmd
                    else "browser" if "chromium" in cmd else None)
            if part:
                parts[part].append(pid)
    return parts


def _cpu_ns(parts: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
    """Per part: nanoseconds on a CPU and waiting for one (every thread's /proc schedstat)."""
    out = {}
    for part, pids in parts.items():
        run = wait = 0
        for pid in pids:
            with contextlib.suppress(OSError):
                for task in (Path("/proc") / str(pid) / "task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        on, queued = (task / "schedstat").read_text().split()[:2]
                        run, wait = run + int(on), wait + int(queued)
        out[part] = (run, wait)
    return out


def expected_views(state: dict) -> list[str]:
    """What a direct render of a setting shows (the explorer built and set in Python, with no
    browser): its verdict, per-mode table, picture preview and full picture."""
    from tilelab.widgets.explorer import SwizzleExplorer

    key = tuple(sorted(state.items()))
    if key not in _EXPECTED:
        async def render() -> list[str]:
            w = SwizzleExplorer()
            for name, v in state.items():
                getattr(w, name).value = v
            views = [w.conflicts.value, w.comparison.value, w.picture.value]
            getattr(w, "_settle", lambda: None)()
            w.close()
            return [*views, w.picture.value]

        # (in a thread of its own: the browser's driver runs an event loop in this one)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            _EXPECTED[key] = pool.submit(asyncio.run, render()).result()
    return _EXPECTED[key]


_EXPECTED: dict[tuple, list[str]] = {}


def _set(page, control: str, value: object, state: dict, cpu: dict | None = None) -> tuple[float, float, int] | None:
    """Change a control in the page, from the setting ``state`` (its changed controls); (redraw ms,
    hover-ready ms, flicker frames), None if the new setting's views never showed. With ``cpu``
    (the processes), the CPU ms each part spent on the redraw are added to its lists."""
    parts = before = None
    if cpu is not None:
        parts = cpu["processes"]
        before = _cpu_ns(parts)
    expected = expected_views({**state, control: value})
    redraw = page.evaluate(START, [LABELS[control], value, expected, 10_000])
    if cpu is not None and parts is not None and before is not None and redraw is not None:
        after = _cpu_ns(parts)
        for part in parts:
            cpu.setdefault(part, []).append((after[part][0] - before[part][0]) / 1e6)
            cpu.setdefault(part + " waiting", []).append((after[part][1] - before[part][1]) / 1e6)
    hover, flicker = page.evaluate(SETTLE, 10_000)
    return None if redraw is None or hover is None else (redraw, hover, flicker)


def browser_figures(settings: list[tuple[str, dict, str, object]], repeat: int,
                    width: int = 1400) -> dict[str, dict] | None:
    """Per setting: redraw and hover-ready ms in JupyterLab (lists of ``repeat``), and the CPU
    ms the kernel, the server and the browser spent on each redraw; None without Chromium or
    Playwright."""
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
    nb.cells = [nbformat.v4.new_code_cell("import tilelab\ntilelab.swizzle_explorer()"),
                nbformat.v4.new_code_cell(PROBE_CELL)]
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
            page.locator(".tl-probe select").first.wait_for(timeout=120_000)
            page.wait_for_timeout(1000)
            processes = _processes()
            for label, state, control, value in settings:
                now: dict = {}
                for name, v in state.items():
                    _set(page, name, v, now)
                    now[name] = v
                redraw, hover, flicker = [], [], 0
                cpu: dict = {"processes": processes}
                for _ in range(repeat):
                    got = _set(page, control, value, state, cpu)
                    if got is not None:
                        redraw.append(got[0])
                        hover.append(got[1])
                        flicker += got[2]
                    back = _set(page, control, defaults[control] if control not in state else state[control],
                                {**state, control: value})
                    flicker += back[2] if back else 0
                for name in reversed(list(state)):
                    del now[name]
                    _set(page, name, defaults[name], {**now, name: state[name]})
                del cpu["processes"]
                out[label] = {"redraw": redraw, "hover": hover, "cpu": cpu, "flicker": flicker}
            probe, cpu = [], {}
            for _ in range(repeat):
                for v in ("b", "a"):
                    before = _cpu_ns(processes)
                    ms = page.evaluate(PROBE, v)
                    after = _cpu_ns(processes)
                    if ms is not None:
                        probe.append(ms)
                        for part in processes:
                            cpu.setdefault(part, []).append((after[part][0] - before[part][0]) / 1e6)
                            cpu.setdefault(part + " waiting", []).append((after[part][1] - before[part][1]) / 1e6)
            out[PROBE_LABEL] = {"redraw": probe, "cpu": cpu}
        finally:
            browser.close()
    return out


PROBE_LABEL = "floor: a one-word HTML widget's round trip"


def explorer_redraw_rows(repeat: int = 7, settings: list[tuple[str, dict, str, object]] | None = None,
                         browser: bool = True, width: int = 1400) -> list[dict]:
    """One dict per setting: label, the Python figures (python_ms, full_ms, preview_kb, full_kb,
    preview_elements, full_elements) and, in the browser, redraw and hover lists of ms (None
    without Chromium)."""
    settings = settings or SETTINGS
    rows = [{"label": label, "repeat": repeat, **python_figures(state, control, value, repeat)}
            for label, state, control, value in settings]
    lab = browser_figures(settings, repeat, width) if browser else None
    for row in rows:
        row["redraw"] = lab[row["label"]]["redraw"] if lab else None
        row["hover"] = lab[row["label"]]["hover"] if lab else None
        row["cpu"] = lab[row["label"]]["cpu"] if lab else None
        row["flicker"] = lab[row["label"]]["flicker"] if lab else None
    if lab:
        rows.append({"label": PROBE_LABEL, "redraw": lab[PROBE_LABEL]["redraw"], "cpu": lab[PROBE_LABEL]["cpu"],
                     "probe": True})
    return rows


def _cpu(row: dict) -> str:
    """Median CPU ms of the kernel, the server and the browser per redraw, and their median wait."""
    cpu = row.get("cpu")
    if not cpu or not cpu.get("kernel"):
        return "-"
    parts = [statistics.median(cpu[p]) for p in ("kernel", "server", "browser")]
    waiting = statistics.median(a + b + c for a, b, c in zip(cpu["kernel waiting"], cpu["server waiting"],
                                                              cpu["browser waiting"]))
    return f"{'+'.join(f'{v:.0f}' for v in parts)} ({waiting:.0f})"


def _spread(values: list[float] | None) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def print_rows(rows: list[dict]) -> int:
    """The table; the number of rows whose redraw median misses the target."""
    print(f"{'setting change':38} {'redraw ms':>14} {'hover ready ms':>15} {'CPU ms (wait)':>15} {'py ms':>6} "
          f"{'full py':>7} {'KB':>9} {'elements':>10} {'pages py':>8} {'KB sent/held':>12}"
          f"  target: redraw < {TARGET_MS:.0f} ms")
    missed = 0
    for r in rows:
        if r.get("probe"):
            print(f"{r['label']:38} {_spread(r['redraw']):>14} {'':>15} {_cpu(r):>15}")
            continue
        flag = ""
        if r["redraw"]:
            flag = "" if statistics.median(r["redraw"]) < TARGET_MS else "MISSED"
        if r.get("flicker"):
            flag += f" FLICKER x{r['flicker']}"
        if r["redraw"] is not None and len(r["redraw"]) < r.get("repeat", 0):
            flag += " NOT SHOWN"
        missed += bool(flag)
        print(f"{r['label']:38} {_spread(r['redraw']):>14} {_spread(r['hover']):>15} {_cpu(r):>15} "
              f"{r['python_ms']:6.1f} {r['full_ms']:7.1f} {r['preview_kb']:4.0f}/{r['full_kb']:<4.0f} "
              f"{r['preview_elements']:4d}/{r['full_elements']:<5d} {r['pages_ms']:8.1f} "
              f"{r['pages_sent_kb']:5.0f}/{r['pages_kb']:<6.0f}  {flag}")
    redraws = [statistics.median(r["redraw"]) for r in rows if r["redraw"] and not r.get("probe")]
    if redraws:
        print(f"median of the settings' redraw medians: {statistics.median(redraws):.0f} ms; "
              f"the slowest setting's: {max(redraws):.0f} ms")
    else:
        print("(no Chromium at /usr/bin/chromium or no playwright: Python figures only)")
    print("redraw: to the first frame painted with the new setting's views, each as a direct render of the setting "
          "gives it; FLICKER: frames painted with other views after them (a wrong picture in between)")
    print("CPU ms: median per redraw of the kernel + the server + the browser (every thread, from the change to "
          "the redraw's frame), in brackets the time they waited for a CPU (a busy machine's share of the redraw)")
    print("pages py: ms the kernel spends, once idle after the change, drawing the pages ahead (every choice "
          "control's other values); KB sent: the pages made for it (a first visit: the browser keeps them); "
          "held: what the stacks hold")
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
