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
            # the verdict and the per-mode comparison above the picture: they are what is read first
            self.conflicts, self.comparison, self.picture,
            # the pictures' hover rules, on the page once for every redraw (never drawn)
            widgets.HTML(svg.HOVER_CSS, layout=widgets.Layout(display="none")),
        ]
        super().__init__(rows_box)
        self.add_class("tl-explorer-live")
        self._static_display: Any = None  # the display handle of the static view, once shown
        self._static_timer: Any = None  # its pending update (an event loop's timer handle)
        self._settle_timer: Any = None  # the pending full picture (an event loop's timer handle)
        self._full: tuple[sw.SharedTile, dict[str, Any]] | None = None  # its arguments, while the preview shows
        self._drawn_with: tuple[sw.SharedTile, dict[str, Any]] | None = None  # the picture's (the static view's)
        for control in (self.dtype, self.swizzle, self.rows, self.cols, self.pattern, self.color_by, self.hover,
                        self.highlight, self.index, self.start_row, self.chunk):
            control.observe(self._on_change, names="value")
        self.refresh()

    # -- the one place that turns control values into models and pictures ---------------------
    def _on_change(self, _change: Any = None) -> None:
        self.refresh()

    def refresh(self) -> None:
        # A refresh with the controls unchanged since the last picture (an explicit refresh()
        # after the controls' own notifications) draws nothing again.
        key = tuple(c.value for c in (self.dtype, self.swizzle, self.rows, self.cols, self.pattern, self.color_by,
                                      self.hover, self.highlight, self.index, self.start_row, self.chunk))
        key += (self.max_cells,)
        if key == getattr(self, "_drawn", None) and self.picture.value:
            return
        self._drawn = key
        self._error = None
        try:
            # the models change only with the tile and the access: a change of colour, hover or
            # highlight redraws the picture from the models it has
            model_key = (self.rows.value, self.cols.value, self.dtype.value, self.swizzle.value, self.pattern.value,
                         self.start_row.value, self.chunk.value)
            if model_key == getattr(self, "_model_key", None) and self._tile is not None and self._report is not None:
                tile, report = self._tile, self._report
            else:
                tile = sw.SharedTile(self.rows.value, self.cols.value, self.dtype.value, self.swizzle.value)
                report = sw.bank_conflicts(tile, self.pattern.value, row=min(self.start_row.value, tile.rows - 1),
                                           chunk=self.chunk.value)
                self._model_key = model_key
        except ValueError as err:
            self._tile, self._report = None, None
            self._model_key = self._compare_key = None
            self._error = str(err)
            self.conflicts.value = ('<div style="color: var(--jp-error-color1, #b00020)">'
                                    f"<b>cannot build this tile:</b> {html.escape(str(err))}</div>")
            self._full = self._drawn_with = None
            self.picture.value = ""
            self.comparison.value = ""
            return
        self._tile, self._report = tile, report
        kind = self.highlight.value
        highlight = {kind: self.index.value} if kind != "none" else None
        self.conflicts.value = self._conflict_html(report)
        # A large tile draws its first rows and columns only (the swizzle repeats within 8 rows of
        # 128 bytes), enough for the access pattern: a 1024x1024 tile stays quick to draw and paint.
        rows_needed = min(max([int(a.row) + 1 for a in report.accesses] + [MAX_ROWS]), MAX_PATTERN_ROWS)
        cols_needed = max([int(a.col) + 1 for a in report.accesses]
                          + [MAX_ROW_BYTES // sw.dtype_bytes(tile.dtype)])
        self._draw(tile, {"color_by": self.color_by.value, "highlight": highlight, "report": report,
                          "max_cells": self.max_cells, "hover": self.hover.value, "max_rows": rows_needed,
                          "max_cols": cols_needed if cols_needed < tile.cols else 0, "fit_width": PICTURE_WIDTH})
        # every mode's count for the pattern: the same whatever the swizzle, colour or highlight
        compare_key = (tile.rows, tile.cols, tile.dtype, self.pattern.value)
        if compare_key != getattr(self, "_compare_key", None) or self._comparison is None:
            self._comparison = sw.compare_modes(tile.rows, tile.cols, tile.dtype, patterns=(self.pattern.value,))
            self._compare_key = compare_key
            self.comparison.value = self._comparison_html(self._comparison)
        self._update_static()

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

    @staticmethod
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

    @staticmethod
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

    def state(self) -> dict[str, Any]:
        return {"tile": self._tile, "report": self._report, "comparison": self._comparison, "error": self._error}


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
