"""The swizzle explorer's redraw, at the settings it offers: Python refresh + paint in Chromium.

    .venv/bin/python benchmarks/explorer_redraw.py [--repeat 7] [--quick]

For each setting (the default tile, and the largest tiles the controls allow, 1024 x 1024, for
each element size, coloured by chunk and by bank, with and without hover), the explorer goes
from the default tile to that setting: the median, over ``--repeat`` runs, of

* Python: the refresh that rebuilds the models and the three views (verdict, per-mode table,
  picture), as ipywidgets would send them;
* paint: in headless Chromium (Debian's ``/usr/bin/chromium``, when present), the time from
  putting those three views in the page to the next frame, which is what the notebook's front
  end does with them;

and the picture's size (KB) and element count. The target is a redraw (Python + paint) under
50 ms at every setting; the table marks each row that misses it, and the script exits 1 then.
``explorer_redraw_rows(repeat)`` returns the rows, for other benchmark scripts to print.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MS = 50.0
CHROMIUM = Path("/usr/bin/chromium")

# (label, control values): the default, then the largest tiles, for each element size
SETTINGS: list[tuple[str, dict]] = [("default 32x64 float16 128B", {})]
for _dtype in ("float16", "float32", "float64", "int8"):
    for _colour in ("chunk", "bank"):
        SETTINGS.append((f"1024x1024 {_dtype} 128B by {_colour}",
                         {"rows": 1024, "cols": 1024, "dtype": _dtype, "color_by": _colour}))
SETTINGS += [
    ("1024x1024 float64 NONE by bank, row_store", {"rows": 1024, "cols": 1024, "dtype": "float64", "swizzle": "NONE",
                                                  "color_by": "bank", "pattern": "row_store"}),
    ("1024x1024 float16 INTERLEAVE, hover none",
     {"rows": 1024, "cols": 1024, "swizzle": "INTERLEAVE", "hover": "none"}),
    ("1024x1024 float16 64B, start row 1000", {"rows": 1024, "cols": 1024, "swizzle": "64B", "start_row": 1000}),
    ("1x1024 float16 NONE", {"rows": 1, "cols": 1024, "swizzle": "NONE"}),
    ("1024x8 float16 NONE", {"rows": 1024, "cols": 8, "swizzle": "NONE"}),
]


def _apply(w, values: dict) -> float:
    """Set the controls one by one as a user would; ms of the last change (one refresh)."""
    items = list(values.items()) or [("rows", 32)]
    for name, value in items[:-1]:
        getattr(w, name).value = value
    name, value = items[-1]
    control = getattr(w, name)
    if control.value == value:  # the default itself: redraw it from another value of the control
        options = getattr(control, "options", None)
        control.value = next(o for o in options if o != value) if options else value - 1
    start = time.perf_counter()
    control.value = value
    return (time.perf_counter() - start) * 1000


def _views(w) -> str:
    return w.conflicts.value + w.comparison.value + w.picture.value


def python_figures(values: dict, repeat: int) -> tuple[float, str, str]:
    """Median ms of the last control change's refresh on the way from the default tile to
    ``values`` (each change redraws, as in the notebook); the default's and the new views."""
    from tilelab.widgets.explorer import SwizzleExplorer

    times = []
    small = big = ""
    for _ in range(repeat):
        w = SwizzleExplorer()
        small = _views(w)
        times.append(_apply(w, values))
        big = _views(w)
        w.close()
    return statistics.median(times), small, big


def paint_ms(tab, small: str, big: str, repeat: int) -> tuple[float, int]:
    """Median ms from putting ``big`` in the page (in place of ``small``) to the next frame, and
    the number of elements it adds."""
    times = []
    for _ in range(repeat):
        tab.evaluate("(h) => { document.getElementById('x').innerHTML = h; }", small)
        times.append(tab.evaluate("""(h) => new Promise(done => {
            const t0 = performance.now();
            document.getElementById('x').innerHTML = h;
            requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
        })""", big))
    nodes = tab.evaluate("document.getElementById('x').getElementsByTagName('*').length")
    return statistics.median(times), nodes


def explorer_redraw_rows(repeat: int = 7, settings: list[tuple[str, dict]] | None = None) -> list[dict]:
    """One dict per setting: label, python_ms, paint_ms (None without Chromium), total_ms, kb, nodes."""
    rows = []
    figures = [(label, *python_figures(values, repeat)) for label, values in (settings or SETTINGS)]
    tab = browser = pw = None
    try:
        from playwright.sync_api import sync_playwright

        if CHROMIUM.exists():
            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
            tab = browser.new_page(viewport={"width": 1000, "height": 800})
            tab.set_content("<body style='margin:0'><div id=x style='width:960px'></div></body>")
    except ImportError:
        pass
    try:
        for label, py_ms, small, big in figures:
            paint, nodes = paint_ms(tab, small, big, repeat) if tab is not None else (None, None)
            rows.append({"label": label, "python_ms": py_ms, "paint_ms": paint,
                         "total_ms": py_ms + (paint or 0.0), "kb": len(big.encode()) / 1024, "nodes": nodes})
    finally:
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="the default and two large settings only")
    args = parser.parse_args()
    settings = [SETTINGS[0], SETTINGS[5], SETTINGS[8]] if args.quick else SETTINGS
    rows = explorer_redraw_rows(args.repeat, settings)
    print(f"{'setting':44} {'python ms':>9} {'paint ms':>9} {'total ms':>9} {'KB':>6} {'nodes':>6}  "
          f"target < {TARGET_MS:.0f} ms")
    missed = 0
    for r in rows:
        paint = "-" if r["paint_ms"] is None else f"{r['paint_ms']:.1f}"
        nodes = "-" if r["nodes"] is None else str(r["nodes"])
        flag = "" if r["total_ms"] < TARGET_MS else "MISSED"
        missed += bool(flag)
        print(f"{r['label']:44} {r['python_ms']:9.1f} {paint:>9} {r['total_ms']:9.1f} {r['kb']:6.0f} "
              f"{nodes:>6}  {flag}")
    if rows and rows[0]["paint_ms"] is None:
        print("(no Chromium at /usr/bin/chromium or no playwright: Python time only)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
