"""How heavy and how fast the inspector page is. Prints a table.

- the README's Hopper GEMM: static HTML bytes and element count as displayed (target: at most 150 KB
  whatever tabs it has: no cell, --passes, every tab, a Diff; "before" is every panel travelling open);
- a kernel with 50 buffers: inspect + page time and page bytes (targets: under 3 s, under 1 MB);
- in Chromium (when installed): the time from a click on a tab to the next painted frame, and
  the page's DOM node count (target: under 100 ms);
- the swizzle explorer's redraw per setting change, in JupyterLab in Chromium (target: a median
  under 50 ms), with where its time goes: ``benchmarks/explorer_redraw.py``'s table (``--quick``:
  five of its settings; ``--no-explorer``: none).

    .venv/bin/python benchmarks/inspector_weight.py [--repeat 5] [--no-browser] [--quick] [--no-explorer]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def many_buffers(n_pairs: int = 25):
    """A kernel with ``2 * n_pairs`` tensors: each input copied through shared memory to an output."""
    names = [f"X{i}" for i in range(n_pairs)] + [f"Y{i}" for i in range(n_pairs)]
    params = ", ".join(f"{n}: T.Tensor((1024, 256), T.float16)" for n in names)
    body = "\n".join(
        f"        S{i} = T.alloc_shared((64, 64), T.float16)\n"
        f"        T.copy(X{i}[by * 64, bx * 64], S{i})\n"
        f"        T.copy(S{i}, Y{i}[by * 64, bx * 64])" for i in range(n_pairs))
    source = (f"import tilelang.language as T\n\n@T.prim_func\ndef many({params}):\n"
              f"    with T.Kernel(4, 16, threads=128) as (bx, by):\n{body}\n")
    path = Path(tempfile.mkdtemp()) / "many_buffers.py"
    path.write_text(source)  # T.prim_func reads its source from a real file
    scope: dict = {}
    exec(compile(source, str(path), "exec"), scope)
    return scope["many"], source


def page_figures(report, source=None):
    from tilelab.widgets.inspector import Inspector

    start = time.perf_counter()
    page = Inspector(report, source=source).page  # as displayed
    return time.perf_counter() - start, page


def browser_figures(page: str, repeat: int) -> dict[str, float] | None:
    chromium = Path("/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not chromium.exists():
        return None
    html_file = Path(tempfile.mkdtemp()) / "inspector.html"
    html_file.write_text(f"<!doctype html><meta charset=utf-8><body style='width:1000px'>{page}</body>")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.goto(html_file.as_uri())
        nodes = tab.evaluate("document.getElementsByTagName('*').length")
        tabs = tab.evaluate("[...document.querySelectorAll('.tl-tabs label')].map(l => l.getAttribute('for'))")
        times = []
        for _ in range(repeat):
            for target in tabs[1:] + tabs[:1]:
                ms = tab.evaluate("""(target) => new Promise(done => {
                    const label = document.querySelector(`.tl-tabs label[for="${target}"]`);
                    const t0 = performance.now();
                    label.click();
                    requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
                })""", target)
                times.append(ms)
        browser.close()
    return {"nodes": nodes, "median_ms": statistics.median(times), "max_ms": max(times), "min_ms": min(times),
            "clicks": len(times)}


def tab_option_rows(gemm, source: str) -> list[tuple[str, str, str, str]]:
    """The README GEMM's page with each tab option: the cell, --passes, every tab, a Diff."""
    import dataclasses

    import tilelab
    from examples.gemm import matmul
    from tilelab.render.html import sections
    from tilelab.widgets.inspector import Inspector

    passes = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a", passes=True)
    before = dataclasses.replace(gemm, kernels=tuple(dataclasses.replace(k, grid=(4, 4, 1)) for k in gemm.kernels))
    pages = {
        "no cell": Inspector(gemm), "--passes": Inspector(passes, source=source),
        "every tab": Inspector(gemm, source=source, show=sections()),
        "--passes, every tab": Inspector(passes, source=source, show=sections()),
        "a Diff": Inspector(gemm, source=source, previous=before),
    }
    # as displayed (the panels not open travel compressed), and every panel open (the page before)
    return [(f"README Hopper GEMM, {name}: page KB", f"{len(view.page.encode()) / 1024:.0f}",
             f"{len(view.html.encode()) / 1024:.0f}", "<= 150") for name, view in pages.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--quick", action="store_true", help="the explorer's redraw at five settings only")
    parser.add_argument("--no-explorer", action="store_true", help="leave out the explorer's redraw")
    args = parser.parse_args()
    import tilelab
    from examples.gemm import matmul

    gemm = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a")
    gemm_source = (ROOT / "examples" / "gemm.py").read_text()
    seconds, page = page_figures(gemm, gemm_source)
    rows = [("README Hopper GEMM: page KB", f"{len(page.encode()) / 1024:.0f}", "208", "<= 150"),
            ("README Hopper GEMM: elements", str(page.count("<") - page.count("</")), "-", "-"),
            ("README Hopper GEMM: page s", f"{seconds:.2f}", "-", "-")]
    rows += tab_option_rows(gemm, gemm_source)
    kernel, source = many_buffers()
    start = time.perf_counter()
    many = tilelab.inspect(kernel, "sm_90a", force=True)
    inspect_s = time.perf_counter() - start
    seconds, big = page_figures(many, source)
    rows += [(f"{len(many.arguments)}-buffer kernel: inspect s", f"{inspect_s:.2f}", "-", "-"),
             (f"{len(many.arguments)}-buffer kernel: page s", f"{seconds:.2f}", "21 (cell)", "< 3 (cell)"),
             (f"{len(many.arguments)}-buffer kernel: page KB", f"{len(big.encode()) / 1024:.0f}", "7000 + 7900 state",
              "< 1024")]
    if not args.no_browser:
        figures = browser_figures(page, args.repeat)
        if figures is None:
            rows.append(("tab switch (Chromium)", "skipped: no Chromium or Playwright", "", ""))
        else:
            rows.append(("README GEMM page: DOM nodes", str(figures["nodes"]), "-", "-"))
            rows.append((f"tab switch ms, median of {figures['clicks']} (min-max)",
                         f"{figures['median_ms']:.1f} ({figures['min_ms']:.1f}-{figures['max_ms']:.1f})",
                         "84-301", "< 100"))
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'now':>22}  {'before':>18}  target")
    for name, now, before, target in rows:
        print(f"{name:<{width}}  {now:>22}  {before:>18}  {target}")
    if args.no_explorer:
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from explorer_redraw import QUICK, SETTINGS, explorer_redraw_rows, print_rows

    print("\nThe swizzle explorer's redraw per setting change (benchmarks/explorer_redraw.py):")
    settings = [SETTINGS[i] for i in QUICK] if args.quick else SETTINGS
    missed = print_rows(explorer_redraw_rows(args.repeat, settings, browser=not args.no_browser))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
