"""The trace's static HTML in headless Chromium with scripts off: picking a block shows its reads
and writes (radio buttons and CSS only), and at 1000 px the grids are drawn at their natural size
with labels of at least 10 px."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tilelab.records.tile_trace import TensorTrace, TileTrace
from tilelab.render.trace import tile_trace_html

pytestmark = [pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]


def _skip_reason() -> str | None:
    if not CHROMIUM.exists():
        return "Debian's chromium is not installed at /usr/bin/chromium (`make chromium` installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (make test installs the [dev] extra)"
    return None


def _copy_trace(rows: int = 64, cols: int = 64, tile: int = 32) -> TileTrace:
    """A 2 x 2 grid of blocks, each writing its own tile of B and reading the same tile of A."""
    per_block = []
    for by in range(rows // tile):
        for bx in range(cols // tile):
            runs = []
            for r in range(by * tile, (by + 1) * tile):
                runs += [r * cols + bx * tile, r * cols + (bx + 1) * tile]
            per_block.append(tuple(runs))
    blocks = len(per_block)
    a = TensorTrace("A", (rows, cols), "float32", tuple(per_block), ((),) * blocks)
    b = TensorTrace("B", (rows, cols), "float32", ((),) * blocks, tuple(per_block), expected_written=True)
    return TileTrace("copy", (cols // tile, rows // tile), (a, b), accesses=2 * rows * cols)


def test_picking_a_block_shows_its_layer_without_scripts(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "trace.html"
    page_file.write_text("<!doctype html><html><body>" + tile_trace_html(_copy_trace()) + "</body></html>")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 900}, java_script_enabled=False)
            page = context.new_page()
            page.goto(page_file.as_uri())
            layers = page.locator(".tl-tt-v3")
            assert layers.count() == 2  # block (1, 1)'s reads of A and writes of B
            assert not layers.first.is_visible() and not layers.last.is_visible()
            page.locator('label[title="block (1, 1)"]').click()
            assert layers.first.is_visible() and layers.last.is_visible()
            assert not page.locator(".tl-tt-v0").first.is_visible()
            box = layers.last.bounding_box()
            grid = page.locator("svg.tl-tt-grid").last
            frame = grid.bounding_box()
            # block (1, 1) owns the bottom-right quarter of B
            assert box["x"] > frame["x"] + frame["width"] / 3 and box["y"] > frame["y"] + frame["height"] / 3
            assert abs(frame["width"] - float(grid.get_attribute("width"))) < 1  # not scaled down at 1000 px
            heights = page.locator("svg.tl-tt-grid text").evaluate_all(
                "ts => ts.map(t => t.getBoundingClientRect().height)")
            assert heights and min(heights) >= 10
            page.locator('label[for$="-none"]').click()
            assert not layers.first.is_visible()
        finally:
            browser.close()
