"""The Layouts tab: each shared-memory and fragment layout in a plain sentence and a picture
(drawn in part when large, coloured by bank, with the WGMMA operand overlay where one reads it)."""

from __future__ import annotations

import base64
import gzip
from collections.abc import Sequence
from typing import Any

from ...cuda_facts import CHUNKS_PER_LINE, SHARED_MEMORY_BANK_BYTES, SWIZZLE_CHUNK_BYTES, SWIZZLE_REPEAT_BYTES, WGMMA_M
from ...engine.verdicts import OperandUse, layout_checks, layout_elements, layout_repeats, operand_uses
from ...records.kernel import KernelReport, Layout
from .._ids import report_id
from ..page import TRUSTED_ONLY, Page, Tab, esc, register, table
from ..svg import legible
from ..textkit import dims

# A fallback table of a layout lists every element; past this many, only the description is shown.
_LAYOUT_TABLE_LIMIT = 4096
# Cells drawn per layout picture on the page (the caption says how to draw the rest).
_PAGE_SHARED_CELLS = 512
_PAGE_BANK_CELLS = 256
_PAGE_FRAGMENT_CELLS = 64
# Layouts listed on the page with a picture; past this many, the rest are listed in a table.
_PAGE_LAYOUTS = 12

def _zoomable(svg: str, zoom_id: str, css: str = "") -> str:
    """A picture in its own scroller, scaled to the width, with a zoom x2 toggle (checkbox and CSS)."""
    zoom = (f'<input type="checkbox" class="tl-zoom" id="{esc(zoom_id)}"><label for="{esc(zoom_id)}" '
            'class="tl-zoom-label">zoom &times;2</label>') if zoom_id else ""
    return f'{zoom}<div class="tl-scroll tl-zoomable{" " + css if css else ""}">{legible(svg)}</div>'


def _lazy_details(css: str, summary: str, inner: str) -> str:
    """A folded block whose content travels gzip-compressed and is drawn when it is first opened
    (the page's click handler): folded pictures weigh a fifth of their markup until looked at."""
    packed = base64.b64encode(gzip.compress(inner.encode(), mtime=0)).decode("ascii")
    return (f'<details class="{css} tl-lazy" data-z="{packed}"><summary>{esc(summary)}</summary>'
            '<div class="tl-lazy-body"></div></details>')


def _layout_drawing(layout: Layout, operands: Sequence[OperandUse] = (), zoom_id: str = "") -> str:
    """The layout's picture; a shared one also coloured by bank (folded), and, for each WGMMA
    operand that reads it, tilelab's core-matrix overlay with LBO/SBO arrows and whether
    tilelab's descriptor agrees with the compiler's (:func:`tilelab.engine.verdicts.layout_checks`)."""
    try:
        from ..svg import layout_svg, wgmma_operand_svg  # another module draws layouts; optional
    except ImportError:
        return _layout_table(layout)
    try:
        cells = _PAGE_FRAGMENT_CELLS if layout.scope == "fragment" else _PAGE_SHARED_CELLS
        legend = ("each cell: the thread (T) and register (v) holding that element; colour: warp"
                  if layout.scope == "fragment" else
                  f"colour and number: the physical {SWIZZLE_CHUNK_BYTES}-byte chunk "
                  f"({SWIZZLE_CHUNK_BYTES // SHARED_MEMORY_BANK_BYTES} banks) each element is stored in; "
                  f"a swizzle pattern repeats within every {SWIZZLE_REPEAT_BYTES:,} bytes")
        # zoom x2 is a checkbox and CSS (no script): the picture scrolls inside its own box
        zoom = (f'<input type="checkbox" class="tl-zoom" id="{esc(zoom_id)}"><label for="{esc(zoom_id)}" '
                'class="tl-zoom-label">zoom &times;2</label>') if zoom_id else ""
        # the bank picture below hovers cells; this one reuses each distinct row (and hovers rows)
        picture = layout_svg(layout, max_cells=cells, titles=False, max_rows=_repeating_rows(layout),
                             cell_hover=False)
        out = [f'<p class="tl-legend">{legend}</p>{zoom}',
               f'<div class="tl-scroll tl-picture">{legible(picture)}</div>']
        if layout.scope == "shared" and layout.offsets:
            bank_svg = layout_svg(layout, color_by="bank", max_cells=_PAGE_BANK_CELLS, hover_crop=_PAGE_BANK_CELLS,
                                  titles=False)
            out.append(_lazy_details("tl-sub tl-bank-colour", "coloured by bank (hover a cell: every cell of its bank)",
                                     _zoomable(bank_svg, f"{zoom_id}-bank" if zoom_id else "")))
        total = layout_elements(layout)
        if total > cells:
            out.append(f'<p class="tl-muted tl-show-all">Drawn in part (of {total} elements). Show all: '
                       f"<code>tilelab.draw(report.layout({esc(repr(layout.buffer))}))</code> in a cell, with "
                       "<code>report = tilelab.inspect(kernel)</code>.</p>")
        for use, check in layout_checks(layout, list(operands)):
            role = use.role
            cls = "tl-ok" if check.agrees else "tl-absent"
            out.append(f'<p class="{cls} tl-wgmma-check" data-operand="{esc(role)}">WGMMA {esc(role)} operand '
                       f"(m{WGMMA_M}n{use.inst_mn if role == 'B' else '&hellip;'}): {esc(check.summary())}</p>")
            if check.descriptor is not None:
                out.append(_lazy_details("tl-sub", "core matrices, LBO and SBO", _zoomable(
                    wgmma_operand_svg(check.descriptor, compiler=use.operand), f"{zoom_id}-{role}" if zoom_id else "",
                    "tl-wgmma-overlay")))
        # SVG is stripped where the stylesheet is (an untrusted notebook): its numbers would run together
        return f'<div class="tl-pics tl-t"{TRUSTED_ONLY}>' + "".join(out) + "</div>"
    except Exception as err:  # a drawing bug must not hide the rest of the report
        return (f'<p class="tl-absent">Could not draw this layout: {esc(type(err).__name__)}: {esc(err)}</p>'
                + _layout_table(layout))


def _layout_words(lay: Layout) -> str:
    """The layout in a plain sentence (:func:`tilelab.render.text.layout_sentence`); the
    compiler's own printout in its tooltip."""
    from ..textkit import layout_sentence

    raw = f' title="the compiler&#x27;s description: {esc(lay.description)}"' if lay.description else ""
    return f'<p class="tl-layout-words"{raw}>{esc(layout_sentence(lay))}</p>'


def _repeating_rows(layout: Layout) -> int:
    """Rows worth drawing of a shared tile whose rows of 16-byte chunks repeat: two periods (at
    least 16 rows); 0 (all) when they do not repeat or the tile is no taller than that."""
    from ...swizzle import dtype_bytes

    if layout.scope != "shared" or not layout.offsets or len(layout.shape) != 2:
        return 0
    try:
        byte = layout.array("offsets") * dtype_bytes(layout.dtype)
        chunks = (byte // SWIZZLE_CHUNK_BYTES) % CHUNKS_PER_LINE
    except ValueError:
        return 0
    rows = chunks.shape[0]
    for period in range(1, rows // 2 + 1):
        if rows % period == 0 and (chunks[period:] == chunks[:-period]).all():
            keep = max(2 * period, 16)
            return keep if keep < rows else 0
    return 0


def _layout_table(layout: Layout) -> str:
    if len(layout.shape) != 2:
        return ""
    rows_n, cols_n = layout.shape
    if rows_n * cols_n > _LAYOUT_TABLE_LIMIT:
        return (f'<p class="tl-muted">{rows_n}&times;{cols_n} elements: too many for a table; '
                "the compiler's description above is exact.</p>")
    if layout.scope == "shared" and layout.offsets:
        cells = [str(v) for v in layout.offsets]
        head = "physical element offset of each logical element"
    elif layout.threads:
        cells = [f"T{t}:{r}" for t, r in zip(layout.threads, layout.locals_)]
        head = "thread:register of each logical element"
    else:
        return ""
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells[r * cols_n:(r + 1) * cols_n]) + "</tr>"
        for r in range(rows_n)
    )
    return (f'<details class="tl-sub"><summary>{esc(head)}</summary>'
            f'<table class="tl-table tl-layout-table"><tbody>{body}</tbody></table></details>')


def layouts_html(report: KernelReport) -> str:
    """Each layout with its picture (drawn in part when large); a layout equal to one drawn
    already is named, not drawn again; past a dozen, the rest are listed in a table."""
    if not report.layouts:
        return '<p class="tl-muted">No shared-memory or fragment layouts were recorded.</p>'
    out = []
    operands = operand_uses(report)  # which WGMMA operands read each shared buffer
    first_equal = layout_repeats(report)
    drawn: dict[int, str] = {}  # the first of each group of equal layouts drawn -> its buffer
    rest: list[list[Any]] = []
    rid = report_id(report)
    for index, lay in enumerate(report.layouts):
        extra = ""
        if lay.scope == "fragment":
            extra = f", threads {lay.thread_base}..{lay.thread_base + (lay.thread_count or 0) - 1}"
            if lay.replicate > 1:
                extra += f", replicated {lay.replicate}x"
        key = first_equal[index]
        same = drawn.get(key)
        if same is not None and not operands.get(lay.buffer):
            rest.append([lay.buffer, lay.scope, lay.dtype, dims(lay.shape), f"same layout as {same}"])
            continue
        if len(drawn) >= _PAGE_LAYOUTS:
            rest.append([lay.buffer, lay.scope, lay.dtype, dims(lay.shape), lay.description[:120]])
            continue
        drawn.setdefault(key, lay.buffer)
        opened = " open" if len(drawn) == 1 else ""
        out.append(
            f'<details class="tl-sub"{opened}><summary>{esc(lay.buffer)} '
            f'<span class="tl-muted">({esc(lay.scope)} {esc(lay.dtype)} [{esc(dims(lay.shape))}]{esc(extra)})</span>'
            "</summary>"
            f"{_layout_words(lay)}"
            f"{_layout_drawing(lay, operands.get(lay.buffer, ()), f'{rid}-zoom-{len(drawn)}')}</details>"
        )
    if rest:
        out.append(f"<p>{len(rest)} more layout(s), not drawn (repeated or past the first {_PAGE_LAYOUTS}):</p>")
        out.append(table(["buffer", "scope", "dtype", "shape", "layout"], rest))
    return "".join(out)


def layouts_text(report: KernelReport, page: Page) -> str:
    if not report.layouts:
        return ""
    lines = ["Layouts"]
    for lay in report.layouts:
        extra = f", threads {lay.thread_base}+{lay.thread_count}" if lay.scope == "fragment" else ""
        lines.append(f"  {lay.buffer}: {lay.scope} {lay.dtype} [{dims(lay.shape)}]{extra}")
    return "\n".join(lines)


register(Tab("layouts", "Layouts", 70, lambda r, page: layouts_html(r), layouts_text,
             count=lambda r, page: len(r.layouts)))
