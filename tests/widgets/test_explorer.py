"""The swizzle explorer widget, driven without a browser: set control values, read the views."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

import ipywidgets as widgets

import tilelab
from tilelab.render import svg
from tilelab.widgets.explorer import PAGES_CSS, STACKED, SwizzleExplorer, swizzle_explorer


def test_public_entry_point_and_layout():
    w = tilelab.swizzle_explorer()
    assert isinstance(w, SwizzleExplorer) and isinstance(w, widgets.VBox)
    assert tilelab.swizzle_explorer is swizzle_explorer
    kinds = [type(c).__name__ for c in w.children]
    assert kinds == ["HBox", "HBox", "HBox", "HBox", "VBox", "HTML"]
    # the last: the pictures' hover rules and the pages' rules, on the page once, never drawn
    assert w.children[-1].value == svg.HOVER_CSS + PAGES_CSS and w.children[-1].layout.display == "none"
    assert w.hover.value == "bank" and w.hover in w.children[3].children
    # the views: a stack of pages per choice control, then the drawn views; the verdict and the
    # per-mode comparison come before the picture; no unexplained labels
    assert w.children[4] is w.views and w.views.children[-1] is w.current
    assert [type(c).__name__ for c in w.views.children] == ["Stack"] * len(STACKED) + ["VBox"]
    assert list(w.current.children) == [w.conflicts, w.comparison, w.picture]
    assert w.index.description != "#" and "thread" in w.index.description
    assert not [c for c in w.children for c in getattr(c, "children", ()) if type(c).__name__ == "ToggleButtons"]
    assert w.picture.value.startswith("<svg") and "32x64 float16, 128B swizzle" in w.picture.value


def test_changing_the_mode_updates_picture_and_conflict_count():
    w = swizzle_explorer(rows=32, cols=64, swizzle="128B", pattern="column_read")
    assert "<b>4 wavefront(s)</b> for an ideal 4: no bank conflicts" in w.conflicts.value
    before = w.picture.value
    w.swizzle.value = "NONE"
    assert "<b>32 wavefront(s)</b> for an ideal 4: 8-way bank conflict" in w.conflicts.value
    assert w.picture.value != before and "NONE swizzle" in w.picture.value
    assert w.state()["report"].wavefronts == 32
    # the per-mode table answers "why 128B?" for the chosen pattern
    assert "NONE: 32/4 wavefronts (8-way conflict)" in w.comparison.value
    assert "128B: 4/4 wavefronts (no conflict)" in w.comparison.value and "1-way" not in w.comparison.value


def test_pattern_dtype_and_size_controls():
    w = swizzle_explorer()
    w.pattern.value = "column_store"
    assert w.state()["report"].pattern == "column_store"
    w.dtype.value = "float32"
    assert w.state()["tile"].dtype == "float32" and "float32" in w.picture.value
    w.rows.value = 8
    assert w.state()["tile"].rows == 8


def test_highlight_row_chunk_thread():
    w = swizzle_explorer(rows=16, cols=64)
    w.highlight.value = "row"
    w.index.value = 3
    assert "row 3: physical chunks 3 2 1 0 7 6 5 4" in w.picture.value
    w.highlight.value = "chunk"
    w.index.value = 1
    assert "logical chunk 1: physical chunks by row 1 0 3 2" in w.picture.value
    w.highlight.value = "thread"
    w.index.value = 5
    assert "thread 5: (5, 0)" in w.picture.value


def test_invalid_tile_shows_the_reason_instead_of_raising():
    w = swizzle_explorer(cols=64, swizzle="128B")
    w.cols.value = 32  # 64-byte rows cannot hold the 128B span
    assert "cannot build this tile" in w.conflicts.value and "swizzle=&#x27;64B&#x27;" in w.conflicts.value
    assert w.picture.value == "" and w.state()["error"]
    w.swizzle.value = "64B"
    assert w.state()["error"] is None and w.picture.value.startswith("<svg")


def test_colour_by_bank():
    w = swizzle_explorer(rows=8, cols=64)
    w.color_by.value = "bank"
    assert "bank (0-31)" in w.picture.value


def test_state_the_front_end_would_receive():
    # what ipywidgets would send over the comm: the SVG and the conflict text as plain values
    w = swizzle_explorer(rows=16, cols=64, swizzle="NONE")
    state = w.picture.get_state()
    assert state["value"].startswith("<svg") and "NONE swizzle" in state["value"]
    assert "8-way bank conflict" in w.conflicts.get_state()["value"]
    assert w.swizzle.get_state()["index"] == list(w.swizzle.options).index("NONE")


def test_hover_is_pure_css_in_the_picture_and_the_buttons_choose_it():
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"

    def groups(picture: str) -> dict[str, list[str]]:
        """The hover groups of a picture: each group's class and its cells' classes."""
        cells = ET.fromstring(picture).find(f".//{ns}g[@class='tlcells tlgroups']")
        return {g.get("class"): [r.get("class") for r in g.iter(f"{ns}rect")] for g in cells}

    w = swizzle_explorer()  # the default 32x64 fp16 128B tile
    pic = w.picture.value
    # no <style> and no :has() in the widget's picture: its cells are gathered by hover group and
    # one plain rule, on the page once (the widget holds it), strokes the hovered group
    assert pic.startswith('<svg class="tl-hg" ') and "<style>" not in pic
    assert "svg.tl-hg .tlgroups > g:hover > rect{" in svg.HOVER_CSS and ":has(" not in svg.HOVER_CSS
    by_bank = groups(pic)  # bank hover by default: a group per bank, each cell of that bank in it
    assert sorted(by_bank) == sorted(f"b{b}" for b in range(32))
    assert all(len(cells) == 32 and all(c.split()[1] == bank for c in cells) for bank, cells in by_bank.items())
    # the picture that stands alone (the static view) carries the same rules before it
    assert w.static_picture() == svg.HOVER_CSS + pic
    # every cell of the default tile has a title: 32 rows x 32 four-byte words (two fp16 each)
    assert pic.count("<title>") == 32 * 32
    assert "<title>(1, 0-1): byte 144, bank 4, chunk 1</title>" in pic  # row 1: chunk 0 ^ 1
    w.hover.value = "chunk"
    by_chunk = groups(w.picture.value)
    assert sorted(by_chunk) == [f"k{k}" for k in range(8)]
    assert all(len(cells) == 128 and all(c.split()[0] == k for c in cells) for k, cells in by_chunk.items())
    w.hover.value = "row"
    assert sorted(groups(w.picture.value), key=lambda r: int(r[1:])) == [f"r{i}" for i in range(32)]
    w.hover.value = "none"
    assert w.picture.value.startswith("<svg xmlns")  # no rule applies
    # a float64 cell spans two banks: hovering it strokes both banks' cells
    w.dtype.value, w.cols.value, w.hover.value = "float64", 16, "bank"
    pairs = groups(w.picture.value)
    assert sorted(pairs) == sorted(f"b{b} b{b + 1}" for b in range(0, 32, 2))
    assert all(c.endswith(pair) for pair, cells in pairs.items() for c in cells)
    # a large tile hovers rows: the rows of one pattern in one group
    w.dtype.value, w.rows.value, w.cols.value = "float16", 256, 256
    assert w.picture.value.startswith('<svg class="tl-hu" ') and '<g class="tlrows"><g class="p0">' in w.picture.value
    w.dtype.value, w.rows.value, w.cols.value = "float16", 32, 64
    # the keyboard path is unchanged: dropdown + index outline a row
    w.highlight.value = "row"
    w.index.value = 2
    assert "row 2: physical chunks 2 3 0 1 6 7 4 5" in w.picture.value


def test_interleave_is_a_mode_of_the_explorer():
    w = swizzle_explorer(rows=16, cols=16, swizzle="INTERLEAVE", pattern="column_read")
    assert w.state()["error"] is None and "INTERLEAVE swizzle" in w.picture.value
    # 16 rows x 16 fp16, core matrices column-first: chunk 0 of rows 0-15 is 256 contiguous bytes:
    # a column read is conflict-free (each phase of 8 rows is one 128-byte block)
    assert w.state()["report"].wavefronts == 4


def test_a_large_tile_draws_the_rows_its_access_pattern_reaches():
    w = swizzle_explorer(rows=256, cols=256, swizzle="128B", pattern="column_read")
    reached = max(int(a.row) for a in w.state()["report"].accesses) + 1
    assert reached <= 32
    assert "showing rows 0-31, cols 0-255 of 256x256 (max_rows=32" in w.picture.value
    w.start_row.value = 100  # the pattern moves down: the picture follows it
    reached = max(int(a.row) for a in w.state()["report"].accesses) + 1
    assert reached > 100 and f"showing rows 0-{reached - 1}," in w.picture.value


def test_a_refresh_with_unchanged_controls_draws_nothing(monkeypatch):
    from tilelab.render import svg as svg_module
    from tilelab.widgets.explorer import SwizzleExplorer

    w = SwizzleExplorer()
    drawn = []
    real = svg_module.tile_svg
    monkeypatch.setattr(svg_module, "tile_svg", lambda *a, **k: drawn.append(a[0]) or real(*a, **k))
    w.rows.value, w.cols.value = 256, 256  # each control notifies: two pictures
    w.refresh()
    w.refresh()
    assert [(t.rows, t.cols) for t in drawn] == [(256, 64), (256, 256)]
    w.swizzle.value = "64B"  # a real change still redraws
    assert len(drawn) == 3


# -- the static view: what a notebook without the live model (restarted, exported) shows ----------

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _static_svg(html_text: str):
    import re
    import xml.etree.ElementTree as ET

    return ET.fromstring(re.search(r"<svg .*?</svg>(?=</div><p class=\"tl-pic-note\")", html_text, re.DOTALL).group(0))


def test_the_bundle_carries_a_static_view_of_the_current_state_beside_the_widget():
    w = swizzle_explorer(rows=16, cols=64, swizzle="NONE", pattern="column_read")
    bundle = w._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", WIDGET_VIEW}
    assert bundle[WIDGET_VIEW]["model_id"] == w.model_id
    # the text is what the explorer shows, not ipywidgets' SwizzleExplorer(children=...) repr
    plain = bundle["text/plain"]
    assert not plain.startswith("SwizzleExplorer(") and "16x64 float16, NONE swizzle" in plain
    page = bundle["text/html"]
    assert "<script" not in page and 'class="tl-explorer-static"' in page
    # the verdict, the per-mode table and the picture, exactly as the widget's views hold them
    assert w.conflicts.value in page and w.comparison.value in page and w.static_picture() in page
    report = w.state()["report"]
    assert f"<b>{report.wavefronts} wavefront(s)</b>" in page and "8-way bank conflict" in page
    assert _static_svg(page).get("aria-label") == "16x64 float16, NONE swizzle shared layout"
    # where the output is sanitised (an untrusted notebook) the picture, hidden inline, is one line
    assert f'<div class="tl-pic-live" style="display:none">{svg.HOVER_CSS}<svg' in page.replace(w.comparison.value, "")
    assert "the explorer picture is left out here" in page and "Trust Notebook" in page
    # a change of the controls changes the static view with it
    w.swizzle.value = "128B"
    after = w._repr_mimebundle_()["text/html"]
    assert "128B swizzle" in after and "no bank conflicts" in after and "NONE swizzle shared layout" not in after
    # the rule that hides it beside a live widget, and hides JupyterLab's "model not found" line
    assert ".jp-OutputArea:has(.tl-explorer-live) .tl-explorer-static{display:none}" in after
    assert "tl-explorer-live" in w._dom_classes


def test_shown_in_a_notebook_the_static_view_has_its_own_output_kept_current(monkeypatch):
    import IPython.display

    published = []

    class Handle:
        def update(self, obj, raw=False):
            published.append(("update", obj, raw))

    def display(obj, raw=False, display_id=None):
        published.append(("display", obj, raw))
        return Handle() if display_id else None

    monkeypatch.setattr(IPython.display, "display", display)
    w = swizzle_explorer()
    w._ipython_display_()
    (kind1, static, raw1), (kind2, widget, raw2) = published
    assert kind1 == kind2 == "display" and raw1 and raw2
    assert set(static) == {"text/html", "text/plain"} and w.static_picture() in static["text/html"]
    assert set(widget) == {"text/plain", WIDGET_VIEW} and "controls" in widget["text/plain"]
    w.dtype.value = "float32"  # the saved notebook holds the last picture, not the first
    kind, update, raw = published[-1]
    assert kind == "update" and raw and "32x64 float32, 128B swizzle" in update["text/html"]
    assert update["text/html"] == w.static_html()


def test_a_closed_explorer_has_no_bundle():
    w = swizzle_explorer()
    w.close()
    assert w._repr_mimebundle_ is None or w._repr_mimebundle_() is None


def test_a_change_of_colour_or_highlight_reuses_the_models_and_the_mode_table(monkeypatch):
    from tilelab import swizzle as sw_module

    w = swizzle_explorer()
    calls = []
    real_conflicts, real_compare = sw_module.bank_conflicts, sw_module.compare_modes
    monkeypatch.setattr(sw_module, "bank_conflicts",
                        lambda *a, **k: calls.append("conflicts") or real_conflicts(*a, **k))
    monkeypatch.setattr(sw_module, "compare_modes", lambda *a, **k: calls.append("compare") or real_compare(*a, **k))
    table = w.comparison.value
    w.color_by.value = "bank"
    w.hover.value = "chunk"
    w.highlight.value = "row"
    assert calls == [] and w.comparison.value == table and "bank (0-31)" in w.picture.value
    w.swizzle.value = "NONE"  # a new tile: new conflicts; the per-mode table is the same for every mode
    assert calls == ["conflicts"] and "NONE: 32/4 wavefronts" in w.comparison.value
    before = len(calls)
    w.cols.value = 32  # a new size: new conflicts and a new per-mode table
    assert calls[before] == "conflicts" and "compare" in calls[before:]
    w.swizzle.value = "128B"  # 64-byte rows cannot hold 128B: the reason, then back to a valid tile
    assert w.comparison.value == "" and w.state()["error"]
    w.swizzle.value = "64B"
    assert w.state()["error"] is None and "64B:" in w.comparison.value


def test_in_a_running_event_loop_the_static_view_follows_once_the_controls_rest(monkeypatch):
    import asyncio

    import IPython.display

    import tilelab.widgets.explorer as explorer_module

    updates = []

    class Handle:
        def update(self, obj, raw=False):
            updates.append(obj["text/html"])

    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw=False, display_id=None: Handle() if display_id else None)
    monkeypatch.setattr(explorer_module, "STATIC_DELAY_S", 0.0)

    async def explore() -> None:
        w = swizzle_explorer()
        w._ipython_display_()
        for dtype in ("float32", "int8", "bfloat16"):  # three changes in a row: one update, of the last
            w.dtype.value = dtype
        assert updates == []
        for _ in range(100):  # the loop runs the update once this coroutine yields to it
            if updates:
                break
            await asyncio.sleep(0)
        assert len(updates) == 1 and "32x64 bfloat16, 128B swizzle" in updates[0]

    asyncio.run(explore())


def test_in_a_running_event_loop_a_change_shows_the_preview_then_the_full_picture(monkeypatch):
    """In a kernel a change sends the picture as its few-element preview at once, and the full
    picture (hover and a title per cell) once the controls rest: one, for several changes."""
    import asyncio

    import tilelab.widgets.explorer as explorer_module
    from tilelab.render import svg as svg_module

    monkeypatch.setattr(explorer_module, "SETTLE_S", 0.0)
    drawn = []
    real = svg_module.tile_svg
    monkeypatch.setattr(svg_module, "tile_svg", lambda *a, **k: drawn.append(k.get("preview", False)) or real(*a, **k))

    async def explore() -> None:
        w = swizzle_explorer()
        for mode in ("NONE", "64B", "32B"):
            w.swizzle.value = mode
            assert w.picture.value.startswith('<svg class="tl-preview"') and "<title>" not in w.picture.value
        assert "32B swizzle" in w.picture.value
        for _ in range(100):
            if "<title>" in w.picture.value:
                break
            await asyncio.sleep(0)
        full = w.picture.value
        assert "<title>(0, 0-1): byte 0, bank 0, chunk 0</title>" in full and "tl-preview" not in full
        assert full == svg_module.tile_svg(w.state()["tile"], report=w.state()["report"], max_rows=32,
                                           fit_width=explorer_module.PICTURE_WIDTH, shared_style=True)
        # the constructor's and three changes' previews, then one full picture (and the check
        # above); the other previews drawn in between are the pages'
        assert drawn[:4] == [True, True, True, True] and drawn.count(False) == 2
        # the static view (a saved notebook, an export) always holds the full picture
        w.swizzle.value = "128B"
        assert "tl-preview" in w.picture.value and "<title>" in w.static_html() and "tl-preview" not in w.static_html()

    asyncio.run(explore())


def test_the_pages_drawn_ahead_are_what_a_direct_render_of_their_setting_shows(monkeypatch):
    """Each choice control's other values are drawn ahead as pages the browser switches to with no
    round trip to the kernel: every page holds exactly the verdict, per-mode table and preview the
    explorer itself shows once set to that setting (an unbuildable tile: its reason). A change of
    a choice control keeps its stack (the old value's page takes the views drawn before); any
    change makes the other stacks stale (hidden) until the kernel has redrawn them; going back
    and forth makes no page again; a stack holds no more than its bounds."""
    import asyncio

    import tilelab.widgets.explorer as explorer_module

    monkeypatch.setattr(explorer_module, "PAGES_DELAY_S", 0.0)
    # no full picture replaces a preview while this test runs, however slowly the machine runs it:
    # the direct render below is made in the running loop too (a preview, as a page holds), and
    # its settle timer firing between two renders of one setting would leave the full picture
    monkeypatch.setattr(explorer_module, "SETTLE_S", 3600.0)
    ref = swizzle_explorer(rows=16, cols=64)  # the direct render: an explorer set to the setting

    def direct(values: dict) -> tuple[str, str, str]:
        for name, value in values.items():
            getattr(ref, name).value = value
        return ref.conflicts.value, ref.comparison.value, ref.picture.value

    def stale(w) -> list[str]:
        return [name for name in STACKED if f"tl-stale-{name}" in w.views._dom_classes]

    async def explore() -> None:
        w = swizzle_explorer(rows=16, cols=64)

        async def redrawn() -> None:
            for _ in range(100):
                if not w._stale and w._rebuild_handle is None:
                    return
                await asyncio.sleep(0)

        def check() -> int:
            drawn, errors = w.values(), 0
            assert stale(w) == []
            for name in STACKED:
                control, pages = getattr(w, name), w._pages[name]
                entries = pages.stack.children
                assert len(entries) == len(control.options) and pages.link.source == (control, "index")
                held = 0
                for value, entry in zip(control.options, entries, strict=True):
                    if value == drawn[name]:
                        assert entry is pages.at and entry._dom_classes == ("tl-at",)
                    elif entry is not pages.none:  # (none: past the bounds, the kernel draws it)
                        views = tuple(c.value for c in entry.children)
                        assert entry._dom_classes == ("tl-off",)
                        assert views == direct({**drawn, name: value}), (name, value)
                        errors += "cannot build this tile" in views[0]
                        held += sum(len(v.encode()) for v in views)
                assert held <= explorer_module.STACK_MAX_KB * 1024
            return errors

        assert stale(w) == list(STACKED)  # drawn once the kernel is idle
        await redrawn()
        errors = check()
        before = (w.conflicts.value, w.comparison.value, w.picture.value)
        w.swizzle.value = "NONE"  # the browser showed the NONE page; the kernel draws it, the rest follows
        assert stale(w) == [n for n in STACKED if n != "swizzle"]
        old = w._pages["swizzle"].stack.children[list(w.swizzle.options).index("128B")]
        assert old._dom_classes == ("tl-off",) and tuple(c.value for c in old.children) == before
        await redrawn()
        check()
        # back and forth: every page is the one made before (the browser has it: nothing is sent)
        made = {id(page) for page in w._pool.values()}
        w.swizzle.value = "128B"
        await redrawn()
        w.swizzle.value = "NONE"
        await redrawn()
        check()
        held = [e for p in w._pages.values() for e in p.stack.children if e._dom_classes == ("tl-off",)]
        assert held and {id(e) for e in held} <= made
        w.cols.value = 32  # a number (no pages): every stack redrawn; 128B cannot hold 64-byte rows
        assert stale(w) == list(STACKED)
        await redrawn()
        assert check() > errors  # the pages of settings with no tile say why, as the explorer does
        # bounded: a stack's pages past its budget are left to the kernel, the nearest values kept
        monkeypatch.setattr(explorer_module, "STACK_MAX_KB", 30)
        w.cols.value = 64
        await redrawn()
        check()
        kinds = [p._dom_classes[0] for p in w._pages["dtype"].stack.children]  # float16, its neighbours next
        assert kinds[0] == "tl-at" and kinds[1] == "tl-off" and "tl-none" in kinds  # the nearest kept

    asyncio.run(explore())
