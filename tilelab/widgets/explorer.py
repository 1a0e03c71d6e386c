"""``tilelab.swizzle_explorer()``: a thin ipywidgets view over :mod:`tilelab.swizzle` and
:mod:`tilelab.render.svg`.

The controls choose a tile (dtype, swizzle mode, rows, columns) and an access pattern; the
highlight controls pick one row, one 16-byte chunk or one thread. Every change rebuilds the
pure models and re-renders the SVG, so the widget holds no maths of its own and works with no GPU
and no front-end code beyond ipywidgets 8.

The explorer also answers as a picture where its live model is gone (the notebook reopened after
its kernel stopped, an nbconvert export, a notebook viewer): shown, it puts a static view of its
current state (the verdict, the per-mode table and the picture, as last drawn) in an output of
its own next to the widget, kept up to date as the controls change; a style rule hides that view
while the live widget is on the page, and hides JupyterLab's "model not found" line where the
static view stands in for it. ``_repr_mimebundle_`` carries the same view as ``text/html``.

Hover is pure CSS inside the SVG (no JavaScript, no round trip to the kernel): hovering a cell
strokes every cell of its bank, its physical 16-byte chunk or its row (the ``hover`` buttons
choose), and on tiles up to 2,048 cells (the default 32x64 included) its title gives the element,
byte, bank and chunk. The highlight dropdown and index stay the keyboard path to the same answers.

A redraw comes in two steps where an event loop runs (a notebook's kernel): at once the picture
as it looks, drawn with a few elements (each colour one path, the cells' borders one more: what
the browser lays out and paints in a few milliseconds), and once the controls rest for
``SETTLE_S`` the same picture with an element per cell, which hovering and tooltips need (two
thousand elements, the bulk of a redraw's time in the browser). The two look the same, pixel for
pixel but for anti-aliasing. The widget's pictures carry no ``<style>``: their cells are gathered
by hover group and one plain rule, on the page once in a hidden view of the widget, strokes the
hovered group (a stylesheet that came and went with each picture, or rules with ``:has()``,
would restyle the whole notebook page on every redraw). The static view holds the full picture
with the same rules before it, as a picture that stands alone.

A change of a choice control (dtype, swizzle, access, highlight, colour, hover) waits for no
kernel: each has a stack of pages, one per value, each holding the views of the drawn setting
with that control at that value (the verdict, the per-mode table and the preview, exactly as the
kernel draws them), and ipywidgets' ``jsdlink`` turns the stack to the chosen value's page in the
browser. The kernel then draws the setting as above and, once the controls rest
(``PAGES_DELAY_S``), redraws the other stacks' pages for it; until then they are stale and
hidden. Pages are widgets of a pool kept by setting, so a page the browser has is not sent
again. The pages' rules (``PAGES_CSS``, beside the hover rules) show a page only while it is the
one control chosen away from the drawn setting; a number (rows, columns, start row, chunk,
which), a second choice before the kernel answers, or a value whose page was left out by the
bounds (``PAGE_MAX_KB``, ``STACK_MAX_KB``) keeps the drawn views until the kernel draws the
setting, as every change did before. One case escapes them: a choice made while a number's
change is on its way to the kernel shows, until the kernel answers (a round trip), the page
drawn for the previous number.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from .. import swizzle as sw
from ..render import svg

# Where the live widget is on the page its static twin hides; where the widget could not be
# drawn (no model after a restart: JupyterLab writes one line of text and no element), that line
# hides and the static view stands. :has() is in every current browser (Chromium 105, Firefox 121).
STATIC_CSS = ("<style>.jp-OutputArea:has(.tl-explorer-live) .tl-explorer-static{display:none}"
              ".jp-OutputArea:has(.tl-explorer-static) .jupyter-widgets.jp-OutputArea-output:not(:has(*))"
              "{display:none}</style>")

STATIC_DELAY_S = 0.5  # the static view follows the controls once they rest this long
SETTLE_S = 0.25  # and the picture gains its hover and tooltips (an element per cell) once they rest this long

DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3", "int8", "float64")
HIGHLIGHTS = ("none", "row", "chunk", "thread")
MAX_ROWS = 32  # rows drawn at most (more when the access pattern reaches further down)
# Columns drawn at most, in bytes of a row: four 128-byte lines, where every swizzle mode has
# repeated (a 1024-column tile redraws in a few tens of ms; the caption says what is shown).
MAX_ROW_BYTES = 512
# Rows drawn at most to follow an access pattern down the tile (the conflict count above covers
# all of it; past this, the caption says which rows are drawn).
MAX_PATTERN_ROWS = 160
# The picture's width: a laptop's notebook output (1000 px window, file browser open) is about
# 550 px wide; drawn this wide, the picture is shown unscaled there and every number stays 10 px.
PICTURE_WIDTH = 540

# The controls by name, in the order of a setting's key; those the models (tile, report) follow;
# the choice controls whose every value is drawn ahead as a page the browser switches to.
CONTROLS = ("dtype", "swizzle", "rows", "cols", "pattern", "color_by", "hover", "highlight", "index", "start_row",
            "chunk")
MODEL_CONTROLS = ("rows", "cols", "dtype", "swizzle", "pattern", "start_row", "chunk")
STACKED = ("dtype", "swizzle", "pattern", "highlight", "color_by", "hover")
MEMO_SETTINGS = 64  # settings whose views are kept (going back and forth draws nothing again)
# The pages' weight: a page (its three views) at most this many KB, a stack's pages together at
# most this many; the pool keeps POOL_PAGES pages (the browser's models of them: 2-4 MB for most
# settings, 6 MB at most); what does not fit is drawn by the kernel when chosen.
PAGE_MAX_KB = 64
STACK_MAX_KB = 192
POOL_PAGES = 96  # pages kept (a few settings' neighbourhoods: going back and forth sends no page again)
PAGES_DELAY_S = SETTLE_S  # the stale stacks are redrawn once the controls rest this long
# The pages' rules. A stack shows only its chosen page; the drawn value's page (tl-at) and a
# page not drawn ahead (tl-none) are never shown. One control chosen away from the drawn setting,
# to a page drawn ahead: that page stands in for the drawn views. Two controls chosen away (or one
# whose pages are stale): no page is the chosen setting's; the drawn views stay until the kernel
# draws the setting (as every change did before pages). The stale stacks are classes of the
# views' box (tl-stale-NAME for the stack tl-s-NAME): one message marks them all.
_STALE = [(f".tl-views.tl-stale-{n}>.tl-s-{n}>.tl-off", f".tl-views.tl-stale-{n}>.tl-s-{n}:has(>.tl-off)~.tl-current")
          for n in STACKED]
PAGES_CSS = ("<style>.tl-views>.tl-stack>:is(.tl-at,.tl-none),"
             + ",".join(hide for hide, _ in _STALE) + "{display:none}"
             ".tl-views>.tl-stack:has(>.tl-off)~.tl-current{display:none}"
             ".tl-views>.tl-stack:has(>:is(.tl-off,.tl-none))~.tl-stack>.tl-off,"
             ".tl-views>.tl-stack:has(~.tl-stack>:is(.tl-off,.tl-none))>.tl-off{display:none}"
             ".tl-views>.tl-stack:has(>:is(.tl-off,.tl-none))~.tl-stack:has(>:is(.tl-off,.tl-none))~.tl-current,"
             + ",".join(show for _, show in _STALE) + "{display:flex}</style>")


class SwizzleExplorer(widgets.VBox):
    """The explorer widget. ``state()`` returns the current models (tile, conflict report,
    comparison) so a notebook can keep working with what the picture shows."""

    def __init__(self, *, dtype: str = "float16", swizzle: str = "128B", rows: int = 32, cols: int = 64,
                 pattern: str = "column_read", color_by: str = "chunk", max_cells: int = 4096,
                 hover: str = "bank") -> None:
        self.max_cells = max_cells
        style = {"description_width": "initial"}
        self.dtype = widgets.Dropdown(options=DTYPES, value=sw.normalize_dtype(dtype), description="dtype", style=style)
        self.swizzle = widgets.Dropdown(options=tuple(sw.MODES), value=sw.swizzle_mode(swizzle).name,
                                        description="swizzle", style=style)
        self.rows = widgets.BoundedIntText(value=rows, min=1, max=1024, description="rows", style=style,
                                           layout=widgets.Layout(width="140px"))
        self.cols = widgets.BoundedIntText(value=cols, min=1, max=1024, description="cols", style=style,
                                           layout=widgets.Layout(width="140px"))
        self.pattern = widgets.Dropdown(options=tuple(sw.PATTERNS), value=pattern, description="access", style=style)
        # Dropdowns, not toggle buttons: a row of buttons wraps into a grid in a narrow notebook.
        self.color_by = widgets.Dropdown(options=("chunk", "bank"), value=color_by, description="colour by",
                                         style=style, layout=widgets.Layout(width="170px"))
        self.hover = widgets.Dropdown(options=("bank", "chunk", "row", "none"), value=hover,
                                      description="hover strokes every cell of the same", style=style,
                                      layout=widgets.Layout(width="330px"))
        self.highlight = widgets.Dropdown(options=HIGHLIGHTS, value="none", description="highlight", style=style)
        self.index = widgets.BoundedIntText(value=0, min=0, max=1023, description="which (row / chunk / thread)",
                                            style=style, layout=widgets.Layout(width="250px"))
        self.start_row = widgets.BoundedIntText(value=0, min=0, max=1023, description="start row", style=style,
                                                layout=widgets.Layout(width="150px"))
        self.chunk = widgets.BoundedIntText(value=0, min=0, max=127, description="chunk", style=style,
                                            layout=widgets.Layout(width="130px"))
        self.conflicts = widgets.HTML()
        self.picture = widgets.HTML()
        self.comparison = widgets.HTML()
        # the views as drawn (the verdict and the per-mode comparison above the picture: they are
        # what is read first) and, before them, a stack of pages per choice control (see _Pages)
        self.current = widgets.VBox([self.conflicts, self.comparison, self.picture], _dom_classes=("tl-current",))
        self._pages = {name: _Pages(getattr(self, name), name) for name in STACKED}
        self.views = widgets.VBox([p.stack for p in self._pages.values()] + [self.current],
                                  _dom_classes=("tl-views",))
        self._tile: sw.SharedTile | None = None
        self._report: sw.ConflictReport | None = None
        self._comparison: sw.ModeComparison | None = None
        self._model_key: tuple[Any, ...] | None = None  # the settings the tile and its report were built for
        self._compare_key: tuple[Any, ...] | None = None
        self._error: str | None = None
        wrap = widgets.Layout(flex_flow="row wrap")  # a narrow output wraps a row instead of clipping it
        rows_box = [
            widgets.HBox([self.dtype, self.swizzle, self.rows, self.cols], layout=wrap),
            widgets.HBox([self.pattern, self.start_row, self.chunk], layout=wrap),
            widgets.HBox([self.highlight, self.index], layout=wrap),
            widgets.HBox([self.color_by, self.hover], layout=wrap),
            self.views,
            # the pictures' hover rules and the pages' rules, on the page once (never drawn)
            widgets.HTML(svg.HOVER_CSS + PAGES_CSS, layout=widgets.Layout(display="none")),
        ]
        super().__init__(rows_box)
        self.add_class("tl-explorer-live")
        self._static_display: Any = None  # the display handle of the static view, once shown
        self._static_timer: Any = None  # its pending update (an event loop's timer handle)
        self._settle_timer: Any = None  # the pending full picture (an event loop's timer handle)
        self._full: tuple[sw.SharedTile, dict[str, Any]] | None = None  # its arguments, while the preview shows
        self._drawn_with: tuple[sw.SharedTile, dict[str, Any]] | None = None  # the picture's (the static view's)
        self._memo: dict[tuple[Any, ...], tuple[str, str, str]] = {}  # the views of the last settings
        self._comparisons: dict[tuple[Any, ...], sw.ModeComparison] = {}
        self._stale: set[str] = set()  # the stacks whose pages were drawn for an older setting
        self._pool: dict[tuple[Any, ...], Any] = {}  # the pages by setting, the least recently used first
        self._rebuild_handle: Any = None  # the pending redraw of a stale stack (an event loop's handle)
        for control in (self.dtype, self.swizzle, self.rows, self.cols, self.pattern, self.color_by, self.hover,
                        self.highlight, self.index, self.start_row, self.chunk):
            control.observe(self._on_change, names="value")
        self.refresh()

    # -- the one place that turns control values into models and pictures ---------------------
    def _on_change(self, _change: Any = None) -> None:
        self.refresh()

    def values(self) -> dict[str, Any]:
        """The controls' values by name (the setting the views show once the kernel has drawn it)."""
        return {name: getattr(self, name).value for name in CONTROLS}

    def refresh(self) -> None:
        # A refresh with the controls unchanged since the last picture (an explicit refresh()
        # after the controls' own notifications) draws nothing again.
        values = self.values()
        key = (*values.values(), self.max_cells)
        if key == getattr(self, "_drawn", None) and self.picture.value:
            return
        self._drawn = key
        before, self._values = getattr(self, "_values", None), values
        loop = _running_loop()
        changed = [n for n in CONTROLS if before is None or before[n] != values[n]]
        # (outside an event loop there is no browser to switch pages: they wait, stale, for one)
        flip = changed[0] if loop is not None and len(changed) == 1 and changed[0] in STACKED else None
        # first of all, the pages drawn for the previous setting hide: in the browser they are
        # never shown for another (a choice made while this change travelled shows no mix)
        self._stale |= {name for name in STACKED if name != flip}
        self._mark_stale()
        self._draw_current(values)
        self._restack(before, values, flip)

    def _draw_current(self, values: dict[str, Any]) -> None:
        self._error = None
        try:
            # the models change only with the tile and the access: a change of colour, hover or
            # highlight redraws the picture from the models it has
            model_key = tuple(values[n] for n in MODEL_CONTROLS)
            if model_key == getattr(self, "_model_key", None) and self._tile is not None and self._report is not None:
                tile, report = self._tile, self._report
            else:
                tile, report = _models(values)
                self._model_key = model_key
        except ValueError as err:
            self._tile, self._report = None, None
            self._model_key = self._compare_key = None
            self._error = str(err)
            self.conflicts.value = _error_html(err)
            self._full = self._drawn_with = None
            self.picture.value = ""
            self.comparison.value = ""
            return
        self._tile, self._report = tile, report
        self.conflicts.value = _conflict_html(report)
        self._draw(tile, _picture_options(values, tile, report, self.max_cells))
        # every mode's count for the pattern: the same whatever the swizzle, colour or highlight
        compare_key = (tile.rows, tile.cols, tile.dtype, values["pattern"])
        if compare_key != getattr(self, "_compare_key", None) or self._comparison is None:
            self._comparison = _compare(compare_key, self._comparisons)
            self._compare_key = compare_key
            self.comparison.value = _comparison_html(self._comparison)
        self._update_static()

    # -- the pages: each choice control's other values drawn ahead, switched to in the browser -----
    def _views_of(self, values: dict[str, Any]) -> tuple[str, str, str]:
        """The verdict, the comparison and the preview of a setting, as the views show it drawn
        (kept for the last few settings: going back and forth draws nothing again)."""
        views = self._memo.get((*values.values(), self.max_cells))
        if views is None:
            views = setting_views(values, self.max_cells, self._comparisons)
        self._memo_put(values, views)
        return views

    def _restack(self, before: dict[str, Any] | None, after: dict[str, Any], flip: str | None) -> None:
        """The pages after the views changed from the setting ``before`` to ``after``. One choice
        control changed (``flip``): its stack already shows the new value's page (the browser
        switched to it); that page becomes the drawn one and the previous setting's views a page of
        their own. Every other stack is stale (hidden) until redrawn, one stack per turn of the
        event loop, once the kernel is idle."""
        loop = _running_loop()
        if loop is not None and self._full is not None:  # the views just drawn, as a page shows them
            self._memo_put(after, (self.conflicts.value, self.comparison.value, self.picture.value))
        if flip is not None and before is not None:
            # the kernel's views now hold what the page showed; the old value's page takes the
            # previous setting's views (kept: nothing is drawn again)
            self._pages[flip].flip(before[flip], after[flip], self._page(before))
            self._evict()
        if loop is not None and self._stale:
            # once the controls rest, after the full picture: the pages' messages never stand
            # between this change and its frame, nor between a quick run of changes
            if self._rebuild_handle is not None:
                self._rebuild_handle.cancel()
            self._rebuild_handle = loop.call_later(PAGES_DELAY_S, self._rebuild_next)

    def _page(self, values: dict[str, Any]) -> Any:
        """The pool's page of a setting (made once: the browser keeps what it was sent), or None
        for a page over ``PAGE_MAX_KB``."""
        key = (*values.values(), self.max_cells)
        page = self._pool.pop(key, None)
        if page is None:
            views = self._views_of(values)
            if _weight(views) > PAGE_MAX_KB * 1024:
                return None
            page = widgets.VBox([widgets.HTML(v) for v in views], _dom_classes=("tl-off",))
        self._pool[key] = page  # the most recently used last
        return page

    def _evict(self) -> None:
        """The pool down to ``POOL_PAGES``, the least recently used first, never a page a stack holds."""
        if len(self._pool) <= POOL_PAGES:
            return
        held = {id(e) for p in self._pages.values() for e in p.stack.children}
        for key in [k for k, page in self._pool.items() if id(page) not in held][:len(self._pool) - POOL_PAGES]:
            page = self._pool.pop(key)
            for child in page.children:
                child.close()
            page.close()

    def _mark_stale(self) -> None:
        """The stale stacks as classes of the views' box: one message for all of them."""
        classes = ("tl-views", *(f"tl-stale-{name}" for name in STACKED if name in self._stale))
        if tuple(self.views._dom_classes) != classes:
            self.views._dom_classes = classes

    def _memo_put(self, values: dict[str, Any], views: tuple[str, str, str]) -> None:
        key = (*values.values(), self.max_cells)
        self._memo.pop(key, None)
        self._memo[key] = views
        while len(self._memo) > MEMO_SETTINGS:
            del self._memo[next(iter(self._memo))]

    def _rebuild_next(self) -> None:
        """Redraw one stale stack's pages for the setting drawn now; again at the loop's next turn."""
        self._rebuild_handle = None
        name = next((n for n in STACKED if n in self._stale), None)
        if name is None:
            return
        values = self._values
        self._pages[name].redraw(values[name], lambda value: self._page({**values, name: value}))
        self._evict()
        self._stale.discard(name)
        self._mark_stale()
        if self._stale:
            loop = _running_loop()
            if loop is not None:
                self._rebuild_handle = loop.call_soon(self._rebuild_next)

    def _draw(self, tile: sw.SharedTile, options: dict[str, Any]) -> None:
        """The picture: in an event loop the preview at once and the full picture once the
        controls rest; otherwise the full picture at once. The full picture hovers by the rules
        the explorer holds once (``svg.HOVER_CSS``): a ``<style>`` of its own, coming and going
        with each redraw, would restyle the whole notebook page each time."""
        self._drawn_with = (tile, options)
        loop = _running_loop()
        if loop is None:
            self._full = None
            self.picture.value = svg.tile_svg(tile, shared_style=True, **options)
            return
        self.picture.value = svg.tile_svg(tile, preview=True, **options)
        self._full = (tile, options)
        if self._settle_timer is not None:
            self._settle_timer.cancel()
        self._settle_timer = loop.call_later(SETTLE_S, self._settle)

    def _settle(self) -> None:
        """The full picture in place of the preview (the same look, with hover and tooltips)."""
        self._settle_timer = None
        if self._full is not None:
            tile, options = self._full
            self._full = None
            self.picture.value = svg.tile_svg(tile, shared_style=True, **options)

    # -- the static view: the explorer as last drawn, for a page without the live model ----------
    def settings_text(self) -> str:
        """The controls' values in words (what the static view says it shows)."""
        words = (f"{self.rows.value}x{self.cols.value} {self.dtype.value}, {self.swizzle.value} swizzle; "
                 f"access {self.pattern.value} from row {self.start_row.value}, chunk {self.chunk.value}; "
                 f"colour by {self.color_by.value}")
        if self.highlight.value != "none":
            words += f"; highlight {self.highlight.value} {self.index.value}"
        return words

    def static_picture(self) -> str:
        """The picture as the widget shows it once its controls rest, with its hover rules before
        it (a picture that stands alone: the static view, an export). Its rules are plain ones:
        updating the static view beside the live widget costs the page no restyle."""
        if self._drawn_with is None:
            return ""
        tile, options = self._drawn_with
        return svg.HOVER_CSS + svg.tile_svg(tile, shared_style=True, **options)

    def static_html(self) -> str:
        """The explorer's current state as plain HTML and SVG: no widget, no script."""
        return (f'{STATIC_CSS}<div class="tl-explorer-static" style="color: var(--jp-ui-font-color1, #222)">'
                '<p style="margin: 0 0 4px 0"><b>Swizzle explorer</b> as last drawn: '
                f'{html.escape(self.settings_text())}'
                f'<br><i style="color: var(--jp-ui-font-color2, #555)">a picture: run the cell again for the '
                f"controls</i></p>{self.conflicts.value}"
                f"{svg.trusted_picture(self.comparison.value + self.static_picture(), 'the explorer picture')}</div>")

    def _static_bundle(self) -> dict[str, str]:
        return {"text/html": self.static_html(),
                "text/plain": f"Swizzle explorer: {self.settings_text()} (run the cell again for the controls)"}

    def _update_static(self) -> None:
        """Bring the static view up to date: at once outside a running event loop, else once the
        controls have rested ``STATIC_DELAY_S`` (a drag of a control sends one update, not one
        per step: the hidden view costs the front end nothing while the student explores)."""
        if self._static_display is None:
            return
        loop = _running_loop()
        if loop is None:
            self._flush_static()
            return
        if self._static_timer is not None:
            self._static_timer.cancel()
        self._static_timer = loop.call_later(STATIC_DELAY_S, self._flush_static)

    def _flush_static(self) -> None:
        self._static_timer = None
        if self._static_display is not None:
            self._static_display.update(self._static_bundle(), raw=True)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget's view beside a static ``text/html`` view of its current state (the first a
        notebook front end with the live model shows; the second what an export or a viewer can)."""
        data = super()._repr_mimebundle_(**kwargs)
        if data is None:  # a closed widget has no view
            return None
        return {**data, **self._static_bundle()}

    def _ipython_display_(self) -> None:
        """Shown in a notebook: the static view in an output of its own (kept current through its
        display id, so the saved notebook holds the last picture), then the live widget."""
        from IPython.display import display

        self._static_display = display(self._static_bundle(), raw=True, display_id=True)
        data = super()._repr_mimebundle_()
        if data is not None:  # the widget's own output: its text says what it is, not its children
            data["text/plain"] = "Swizzle explorer controls (live while the kernel runs; the picture is above)"
            display(data, raw=True)

    def state(self) -> dict[str, Any]:
        return {"tile": self._tile, "report": self._report, "comparison": self._comparison, "error": self._error}


def _models(values: dict[str, Any]) -> tuple[sw.SharedTile, sw.ConflictReport]:
    """The tile and its access pattern's conflict report for a setting (ValueError: no such tile)."""
    tile = sw.SharedTile(values["rows"], values["cols"], values["dtype"], values["swizzle"])
    report = sw.bank_conflicts(tile, values["pattern"], row=min(values["start_row"], tile.rows - 1),
                               chunk=values["chunk"])
    return tile, report


def _picture_options(values: dict[str, Any], tile: sw.SharedTile, report: sw.ConflictReport,
                     max_cells: int) -> dict[str, Any]:
    """The picture's options for a setting (``svg.tile_svg``'s keywords)."""
    kind = values["highlight"]
    highlight = {kind: values["index"]} if kind != "none" else None
    # A large tile draws its first rows and columns only (the swizzle repeats within 8 rows of
    # 128 bytes), enough for the access pattern: a 1024x1024 tile stays quick to draw and paint.
    rows_needed = min(max([int(a.row) + 1 for a in report.accesses] + [MAX_ROWS]), MAX_PATTERN_ROWS)
    cols_needed = max([int(a.col) + 1 for a in report.accesses] + [MAX_ROW_BYTES // sw.dtype_bytes(tile.dtype)])
    return {"color_by": values["color_by"], "highlight": highlight, "report": report, "max_cells": max_cells,
            "hover": values["hover"], "max_rows": rows_needed,
            "max_cols": cols_needed if cols_needed < tile.cols else 0, "fit_width": PICTURE_WIDTH}


def _error_html(err: ValueError) -> str:
    return ('<div style="color: var(--jp-error-color1, #b00020)">'
            f"<b>cannot build this tile:</b> {html.escape(str(err))}</div>")


def _compare(key: tuple[Any, ...], known: dict[tuple[Any, ...], sw.ModeComparison]) -> sw.ModeComparison:
    """Every mode's count for a size, dtype and pattern (``known`` keeps the last few)."""
    if key not in known:
        rows, cols, dtype, pattern = key
        known[key] = sw.compare_modes(rows, cols, dtype, patterns=(pattern,))
        while len(known) > MEMO_SETTINGS:
            del known[next(iter(known))]
    return known[key]


def setting_views(values: dict[str, Any], max_cells: int = 4096,
                  comparisons: dict[tuple[Any, ...], sw.ModeComparison] | None = None) -> tuple[str, str, str]:
    """The explorer's three views of a setting as a change draws them: the verdict, the per-mode
    comparison and the picture's preview (an unbuildable tile: the reason, and no table or picture)."""
    try:
        tile, report = _models(values)
    except ValueError as err:
        return _error_html(err), "", ""
    comparison = _compare((tile.rows, tile.cols, tile.dtype, values["pattern"]), {} if comparisons is None
                          else comparisons)
    picture = svg.tile_svg(tile, preview=True, **_picture_options(values, tile, report, max_cells))
    return _conflict_html(report), _comparison_html(comparison), picture


class _Pages:
    """A choice control's pages: a ``Stack`` with an entry per value of the control, linked in the
    browser to the control's index (``jsdlink``), so that choosing a value shows its entry at once,
    with no message to the kernel and back. An entry is a page (``tl-off``: the views, verdict,
    comparison and preview, of the drawn setting with this control at that value; pages are
    widgets of the explorer's pool, one per setting, so a page the browser has seen is never sent
    again), the drawn value's ``at`` (``tl-at``: hidden, the drawn views stand there) or ``none``
    (``tl-none``: no page within the bounds, ``PAGE_MAX_KB`` a page and ``STACK_MAX_KB`` the
    stack, the values nearest the drawn one first; the kernel draws it when chosen). ``PAGES_CSS``
    shows a page in place of the drawn views only while it is the one entry chosen away from the
    drawn setting and its stack is not stale (entries for an older setting)."""

    def __init__(self, control: Any, name: str) -> None:
        self.control = control
        self.at = widgets.VBox(_dom_classes=("tl-at",))
        self.none = widgets.VBox(_dom_classes=("tl-none",))
        entries = [self.none] * len(control.options)
        entries[control.index] = self.at
        self.stack = widgets.Stack(entries, selected_index=control.index, _dom_classes=("tl-stack", f"tl-s-{name}"))
        self.link = widgets.jsdlink((control, "index"), (self.stack, "selected_index"))

    def held(self, *leaving: int) -> int:
        """Bytes of the pages the stack holds (but those at the indices ``leaving``)."""
        return sum(_weight(e) for i, e in enumerate(self.stack.children)
                   if i not in leaving and e is not self.at and e is not self.none)

    def flip(self, old: Any, new: Any, old_page: Any) -> None:
        """The drawn value went from ``old`` to ``new``: the old value's entry becomes the page of
        the setting drawn before (if within the bounds), the new value's the drawn one."""
        options = list(self.control.options)
        at, i = options.index(new), options.index(old)
        entries = list(self.stack.children)
        fits = old_page is not None and self.held(at, i) + _weight(old_page) <= STACK_MAX_KB * 1024
        entries[i], entries[at] = (old_page if fits else self.none), self.at
        # (the stack's choice is the browser's, through the link: a value set here could only be
        # as new as this change, and undo a later choice made while it travelled)
        self.stack.children = entries

    def redraw(self, drawn: Any, page: Any) -> None:
        """The entries for the drawn setting (``page(value)``: its page widget, None past
        ``PAGE_MAX_KB``), the values nearest the drawn one first, within the bounds."""
        options = list(self.control.options)
        at = options.index(drawn)
        entries: list[Any] = [self.none] * len(options)
        entries[at] = self.at
        held = 0
        for i in sorted(range(len(options)), key=lambda j: (abs(j - at), j)):
            if i == at or held >= STACK_MAX_KB * 1024:
                continue
            widget = page(options[i])
            if widget is not None and held + _weight(widget) <= STACK_MAX_KB * 1024:
                entries[i] = widget
                held += _weight(widget)
        if list(self.stack.children) != entries:
            self.stack.children = entries


def _weight(views: Any) -> int:
    """Bytes of a page's markup (a page widget's or three views')."""
    values = [c.value for c in views.children] if isinstance(views, widgets.Widget) else views
    return sum(len(v.encode()) for v in values)


def _conflict_html(report: sw.ConflictReport) -> str:
    ok = report.conflict_free
    colour = "var(--jp-success-color1, #2e7d32)" if ok else "var(--jp-warn-color1, #b35900)"
    phases = ", ".join(str(w) for w in report.wavefronts_per_phase[:16])
    notes = "".join(f"<br><i>{html.escape(n)}</i>" for n in report.notes)
    return (f'<div style="color: {colour}"><b>{report.wavefronts} wavefront(s)</b> for an ideal '
            f"{report.ideal_wavefronts}: "
            f"{'no bank conflicts' if ok else f'{report.conflict_degree:g}-way bank conflict'}"
            f" (per phase: {phases})</div>"
            f'<div style="color: var(--jp-ui-font-color2, #555)">{html.escape(report.description)}{notes}</div>')

def _comparison_html(cmp: sw.ModeComparison) -> str:
    pattern = cmp.patterns[0]
    cells = []
    for mode, reports in cmp.results:
        if isinstance(reports, str):
            value = html.escape(reports.split(":")[0][:60] + "...")
        else:
            r = reports[0]
            verdict = "no conflict" if r.conflict_free else f"{r.conflict_degree:g}-way conflict"
            value = f"{r.wavefronts}/{r.ideal_wavefronts} wavefronts ({verdict})"
        cells.append(f'<td style="padding: 0 8px">{html.escape(mode)}: {value}</td>')
    return (f'<table style="color: var(--jp-ui-font-color1, #222)"><tr><td><b>{html.escape(pattern)} by mode</b>'
            f"</td>{''.join(cells)}</tr></table>")


def _running_loop() -> Any:
    """The running event loop (a notebook kernel's), or None."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def swizzle_explorer(**kwargs: Any) -> SwizzleExplorer:
    """An interactive swizzle and bank-conflict explorer (dtype, mode, rows, columns, access
    pattern; highlight a row, a 16-byte chunk or a thread). Needs no GPU."""
    return SwizzleExplorer(**kwargs)


__all__ = ["SwizzleExplorer", "swizzle_explorer"]
