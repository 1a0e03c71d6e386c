"""SVG pictures of shared-memory layouts, WGMMA operands and fragments: functions model -> str.

One module of about 1,200 lines on purpose: every picture is drawn with the same private kit (the
grid of merged cells, rows reused through ``<defs>``, hover styles, captions kept legible), and
splitting the pictures from the kit would make its thirty helpers a public surface of their own.

Every picture is a self-contained ``<svg>`` that renders in JupyterLab, nbconvert HTML and
GitHub: cells have explicit light fills with explicit dark text (readable on light and dark
themes alike); captions and outlines use JupyterLab's CSS variables with a fallback colour, set
through inline ``style`` so a page without those variables still gets the fallback. Every text
that comes from a user or the compiler is escaped.

Size is kept small on purpose: rows whose cells look the same (a swizzle repeats every few rows)
are drawn once inside ``<defs>`` and reused with ``<use>``; adjacent cells of one colour merge into
one rectangle; per-cell labels and hover titles appear only on small tiles. Past ``max_cells``
rectangles a picture shows its top-left part and says so in its caption.

Legibility: a picture is at most ``MAX_WIDTH`` (1000) units wide and scales down to its output's
width by its viewBox (``max-width: 100%``, never up); no text is under ``MIN_FONT`` (10) units, so
shown 1000 px wide every number and caption is 10 px or more; captions wrap at spaces, never cut.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import swizzle as sw
from ..cuda_facts import CORE_MATRIX_ROWS, SWIZZLE_REPEAT_ROWS, WARP_SIZE

TEXT = "var(--jp-ui-font-color1, #222)"
MUTED = "var(--jp-ui-font-color2, #555)"
ACCENT = "var(--jp-brand-color1, #d6336c)"
CELL_TEXT = "#111"  # on the light cell fills, in every theme
FONT = "font-family: var(--jp-code-font-family, monospace);"
# A picture wider than its output scales down to the width (its viewBox keeps the proportions);
# never up. A page's zoom control lifts the cap (``max-width: none``).
SCALE = "max-width: 100%; height: auto;"
# The smallest text a picture draws (user units): at most 1000 units wide, a picture shown 1000 px
# wide keeps every number and caption at 10 px or more.
MIN_FONT = 10
MAX_WIDTH = 1000
CAPTION_WIDTH = 520  # a narrow picture widens to this for its captions, then wraps them
COMPARE_WIDTH = 500  # each picture of compare_svg: unscaled in a laptop's notebook output (about 520 px)
OPERAND_WIDTH = 480  # a WGMMA operand's picture at least (up to 16 chunks: unscaled in a laptop's output)
MIN_CELL = 1.5  # px: the narrowest cell a shared tile is drawn with (past that, columns are left out)

# Facts of the hardware these pictures show (tilelab.cuda_facts, through swizzle's short names).
_CHUNKS = sw.LINE_BYTES // sw.CHUNK_BYTES  # 16-byte chunks in a 128-byte line: 8 colours
_BANKS_PER_CHUNK = sw.CHUNK_BYTES // sw.BANK_BYTES  # 4
_BAND = SWIZZLE_REPEAT_ROWS  # swizzles repeat within 8 rows: grid bands and axis ticks every 8 rows
_CM = CORE_MATRIX_ROWS  # a WGMMA core matrix: 8 rows of one 16-byte chunk

# 8 hues for 16-byte chunks (4-bank groups); banks vary the lightness within their chunk's hue,
# so "bank" and "chunk" pictures read alike.
_HUES = (4, 32, 55, 110, 170, 205, 250, 300)
_WARP_HUES = (205, 32, 110, 300, 55, 170, 4, 250)


def _hsl(hue: float, sat: float, light: float) -> str:
    """``#rrggbb`` of an HSL colour: a third of the bytes of ``hsl(...)`` in pictures of many cells."""
    import colorsys

    r, g, b = colorsys.hls_to_rgb(hue / 360, light / 100, sat / 100)
    return "#{:02x}{:02x}{:02x}".format(*(round(v * 255) for v in (r, g, b)))


def _chunk_fill(chunk: int) -> str:
    return _hsl(_HUES[chunk % _CHUNKS], 75, 80)


def _bank_fill(bank: int) -> str:
    return _hsl(_HUES[(bank // _BANKS_PER_CHUNK) % _CHUNKS], 60 + 10 * (bank % 2), 70 + 5 * (bank % 4))


def _warp_fill(warp: int, shade: int = 0) -> str:
    return _hsl(_WARP_HUES[warp % 8], 70, 78 + 6 * (shade % 2))


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    """A coordinate with at most one decimal and none when whole (keeps big pictures small)."""
    tenths = round(float(value) * 10)  # an int: cheaper than rounding to a float, in pictures of many cells
    return str(tenths // 10) if tenths % 10 == 0 else f"{tenths / 10:.1f}"


def _uid(*parts: Any) -> str:
    """An id prefix unique to the picture's content, so that several pictures on one page (whose
    ``<defs>`` share one id space) never borrow each other's rows."""
    h = hashlib.sha1()
    for part in parts:
        h.update(part.tobytes() if isinstance(part, np.ndarray) else repr(part).encode())
    return "tl" + h.hexdigest()[:8]


LEGIBLE_PX = 10.0  # the smallest text a picture may be drawn with on screen
_VIEWBOX = re.compile(r'viewBox="0 0 ([\d.]+) [\d.]+"')
_FONT_SIZE = re.compile(r'font-size(?:="|:\s*)([\d.]+)')


def legible(svg: str, floor: float = LEGIBLE_PX) -> str:
    """``svg`` with a ``min-width`` on its root so that scaling it to a narrow output (its
    ``max-width: 100%``) never draws text under ``floor`` px: it shrinks to the width down to that,
    and past it scrolls in its own scroller instead."""
    box = _VIEWBOX.search(svg, 0, 4000)
    sizes = [float(x) for x in _FONT_SIZE.findall(svg)]
    if box is None or not sizes or 'style="' not in svg[:4000]:
        return svg
    width = float(box.group(1))
    least = width * min(1.0, floor / min(sizes))
    return svg.replace('style="', f'style="min-width: {least:.0f}px; ', 1)


def _svg_open(width: float, height: float, label: str, uid: str | None = None) -> str:
    ident = f' id="{uid}"' if uid else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"{ident} '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'role="img" aria-label="{_esc(label)}" style="{FONT} {SCALE}">')


# Pure-CSS hover highlighting. Cells carry classes (b<bank>, k<physical 16-byte chunk>, t<thread>;
# each row of cells is a <g class="r<row>">), and one rule per value, e.g.
#   #<id>:has(.b5:hover) .b5 {stroke: ...}
# strokes every cell of the hovered cell's bank (CSS :has, Chromium 105+, Firefox 121+, Safari 15.4+).
# Cells placed with <use> cannot take part (their instances live in shadow trees that selectors do
# not see), so big pictures, drawn with <use>, highlight whole rows instead: the hovered row and every
# row with the same pattern (class p<pattern>).
HOVER_KINDS = ("bank", "chunk", "row", "none")
HOVER_STROKE = "stroke: var(--jp-brand-color1, #d6336c); stroke-width: 2.5px"
EXPLICIT_CELLS = 2048  # up to this many cells (the explorer's default 32x64 tile), cells are elements: hover works
TITLE_CELLS = 2048  # and each cell (a 4-byte word of 1- and 2-byte types) has its own title
EXPLICIT_RECTS = 1024  # ... as long as that is at most this many rects (a 32 x 64 fp16 tile's words): a
# tile of 8-byte elements draws a rect per element, twice the nodes, and would paint twice as slowly


# The explorer's pictures hover without :has(): their cells are gathered by hover group (a bank,
# a chunk, a row; rows of one pattern), and one plain rule strokes the hovered group. The rules
# live once on the page (the explorer holds them) or once in a picture that stands alone, for
# pictures whose root has the class tl-hg (cells) or tl-hu (reused rows). Adding or removing a
# :has() rule makes the browser check every element of a notebook page (half a second beside
# the explorer's two thousand cells); these cost nothing of the kind.
HOVER_CSS = ("<style>"
             f"svg.tl-hg .tlgroups > g:hover > rect{{{HOVER_STROKE}}}"
             "svg.tl-hu .tlrows > g:hover > use{stroke: var(--jp-ui-font-color1, #222); stroke-width: 1.5px}"
             f"svg.tl-hu .tlrows > g > use:hover{{{HOVER_STROKE}}}"
             "</style>")


def _hover_groups(hover: str, banks: Any, chunks: Any, element_bytes: int) -> list[list[str]]:
    """Each cell's hover group: its bank (both banks of an 8-byte element), chunk or row."""
    rows, cols = banks.shape
    if hover == "bank":
        names = ([f"b{b} b{(b + 1) % sw.BANKS}" for b in range(sw.BANKS)] if element_bytes == 8
                 else [f"b{b}" for b in range(sw.BANKS)])
        return [[names[b] for b in row] for row in banks.tolist()]
    if hover == "chunk":
        return [[f"k{k}" for k in row] for row in chunks.tolist()]
    return [[f"r{i}"] * cols for i in range(rows)]


def _hover_style(uid: str, prefix: str | None, values: Sequence[int] = (), *, rows: bool = False,
                 patterns: int = 0) -> str:
    rules = []
    if prefix:
        rules += [f"#{uid}:has(.{prefix}{v}:hover) .{prefix}{v}{{{HOVER_STROKE}}}" for v in values]
    if rows:
        rules.append(f"#{uid} g.tlcells > g:hover > rect{{{HOVER_STROKE}}}")
        rules.append(f"#{uid} use:hover{{{HOVER_STROKE}}}")
    rules += [f"#{uid}:has(.p{v}:hover) .p{v}{{stroke: var(--jp-ui-font-color1, #222); stroke-width: 1.5px}}"
              for v in range(patterns)]
    return f"<style>{''.join(rules)}</style>" if rules else ""


def _text(x: float, y: float, text: Any, *, size: int = 12, color: str = TEXT, anchor: str = "start",
          weight: str = "normal") -> str:
    # SVG's defaults (start, normal) are left out: a picture carries a hundred of these captions
    extra = (f' text-anchor="{anchor}"' if anchor != "start" else "") + (
        f' font-weight="{weight}"' if weight != "normal" else "")
    return f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}"{extra} style="fill: {color}">{_esc(text)}</text>'


def _message_svg(title: str, lines: Sequence[str], width: float | None = None) -> str:
    """A picture that is only words (why there is no drawing), wrapped to its width."""
    width = width or min(CAPTION_WIDTH, max(320, 7.5 * max([len(title)] + [len(s) for s in lines]) + 20))
    lines = [part for line in lines for part in _wrap(line, width - 16, 12)]
    height = 28 + 16 * len(lines)
    body = [_svg_open(width, height, title), _text(8, 18, title, weight="bold")]
    body += [_text(8, 36 + 16 * i, s, color=MUTED) for i, s in enumerate(lines)]
    return "".join(body) + "</svg>"


# --------------------------------------------------------------------------------------------
# The grid engine: colour indices + labels -> deduplicated rows of merged runs
# --------------------------------------------------------------------------------------------


def _row_runs(row: Any) -> tuple[Any, Any, Any]:
    """Starts, lengths and values of the runs of equal values in one row of colour indices."""
    n = len(row)
    starts = np.r_[0, np.flatnonzero(np.diff(row)) + 1]
    lengths = np.diff(np.r_[starts, n])
    return starts, lengths, row[starts]


def _all_runs(index: Any) -> tuple[Any, Any, Any, Any]:
    """The runs of equal values of every row of ``index`` at once, in reading order: their rows,
    starts, lengths and values (what :func:`_row_runs` gives row by row)."""
    rows, cols = index.shape
    start = np.ones((rows, cols), dtype=bool)
    start[:, 1:] = index[:, 1:] != index[:, :-1]
    r, c = np.nonzero(start)
    flat = r * cols + c
    lengths = np.diff(np.r_[flat, rows * cols])  # a row's first cell always starts a run
    return r, c, lengths, index[r, c]


def _ns(values: Any) -> list[str]:
    """:func:`_n` of every value of an array."""
    tenths = np.round(np.asarray(values, dtype=np.float64) * 10).astype(np.int64).tolist()
    return [str(t // 10) if t % 10 == 0 else f"{t / 10:.1f}" for t in tenths]


def _fit(index: Any, max_cells: int) -> tuple[int, int]:
    """How many rows and columns to draw so that the rectangles of distinct rows stay under
    ``max_cells`` (identical rows cost nothing: they are reused)."""
    rows, cols = index.shape
    seen: set[bytes] = set()
    cost = 0
    for r in range(rows):
        key = index[r].tobytes()
        if key in seen:
            continue
        seen.add(key)
        runs = len(_row_runs(index[r])[0])
        if runs > max_cells:  # one row alone is too busy: crop columns too
            return 1, max(1, max_cells)
        cost += runs
        if cost > max_cells:
            return max(r, 1), cols
    return rows, cols


def _grid(index: Any, fill_of: Sequence[str], *, cw: float, ch: float, x0: float, y0: float, uid: str,
          label_of: Sequence[str] | None = None, titles: Any = None,
          cell_labels: list[list[str]] | None = None, classes: list[list[str]] | None = None,
          label_font: int | None = None, paths: bool = False, preview: bool = False,
          word: int = 0, groups: list[list[str]] | None = None) -> tuple[str, int]:
    """Cells coloured by ``fill_of[index]``; returns (markup, number of distinct row patterns).

    Explicit mode (``titles``, a function ``(row, first col, end col) -> str``, or ``classes``
    given): each row is a ``<g class="r<i>">`` of rects, one per run of equal colour and class,
    carrying ``classes`` for hover highlighting and a title each. Otherwise runs of one colour merge into one rect, and
    identical rows are drawn once in ``<defs>`` and placed with ``<use class="r<i> p<pattern>">``.
    Labels: ``cell_labels`` per cell (``\n`` splits two lines), or ``label_of[index]`` once per run.
    ``paths``: a reused row is one ``<path>`` per colour instead of one ``<rect>`` per run.
    ``preview``: the same look in a few elements (:func:`_preview_cells`), without classes, titles
    or reused rows: the look of explicit cells, bordered every ``word`` columns as their rects
    are, or (``word`` 0) of reused rows."""
    font = label_font or max(MIN_FONT, min(12, int(ch * 0.65)))
    fit = _LabelFit(cw, font, ch >= font + 1)
    if preview and cell_labels is None:
        # the labels' baseline in a row: the explicit cells' (centred), the reused rows' (_row_labels)
        baseline = ch * 0.5 + font * 0.35 if word else ch * 0.72
        runs = (_run_labels(index, fit, cw=cw, ch=ch, x0=x0, y0=y0, label_of=label_of, baseline=baseline)
                if label_of is not None else [])
        group = f'<g font-size="{font}" text-anchor="middle" fill="{CELL_TEXT}" pointer-events="none">'
        return (_preview_cells(index, fill_of, cw=cw, ch=ch, x0=x0, y0=y0, word=word)
                + (group + "".join(runs) + "</g>" if runs else "")), 0
    if titles is not None or classes is not None:
        cells = _explicit_cells(index, fill_of, cw=cw, ch=ch, x0=x0, y0=y0, titles=titles, classes=classes,
                                groups=groups)
        labels = _explicit_labels(index, fit, cw=cw, ch=ch, x0=x0, y0=y0, label_of=label_of,
                                  cell_labels=cell_labels)
        return cells + labels, 0
    return _reused_rows(index, fill_of, fit, cw=cw, ch=ch, x0=x0, y0=y0, uid=uid, label_of=label_of,
                        paths=paths, by_pattern=groups is not None)


@dataclass(frozen=True)
class _LabelFit:
    """Whether a label fits a run of cells: rows taller than the font, runs as wide as the label
    (digits at the monospace advance, 0.6 em, and a pixel either side)."""

    cw: float
    font: int
    tall_enough: bool

    def __call__(self, length: int, lab: str) -> bool:
        widest = max((len(part) for part in lab.split("\n")), default=0)
        return bool(lab) and self.tall_enough and length * self.cw >= 0.6 * self.font * widest + 2


def _explicit_cells(index: Any, fill_of: Sequence[str], *, cw: float, ch: float, x0: float, y0: float,
                    titles: Any, classes: list[list[str]] | None, groups: list[list[str]] | None = None) -> str:
    """One rect per run of equal colour and class (a 4-byte word of fp16 shares its bank class),
    each row a ``<g class="r<i>">`` moved into place, so rects need no y. ``groups``: instead, the
    rects of one hover group (a cell's key: its bank, chunk or row) in one ``<g>``, each rect
    with its y, so that hovering a cell strokes its group by one plain rule (no ``:has()``)."""
    if groups is not None:
        return _grouped_cells(index, fill_of, cw=cw, ch=ch, x0=x0, y0=y0, titles=titles, classes=classes,
                              groups=groups)
    rows, cols = index.shape
    out = ['<g class="tlcells" stroke="#fff" stroke-width="0.5">']
    # the coordinates repeat from row to row: written once (a redraw of the explorer writes thousands)
    xs = [_n(x0 + j * cw) for j in range(cols)]
    widths: dict[int, str] = {}
    height, fills = _n(ch), list(fill_of)
    values = index.tolist()
    escape = _esc if not getattr(titles, "plain", False) else str  # numbers and punctuation need no escape
    for i in range(rows):
        out.append(f'<g class="r{i}" transform="translate(0 {_n(y0 + i * ch)})">')
        row, names = values[i], classes[i] if classes is not None else None
        j = 0
        while j < cols:
            k = j + 1
            while k < cols and row[k] == row[j] and (names is None or names[k] == names[j]):
                k += 1
            width = widths.get(k - j)
            if width is None:
                width = widths[k - j] = _n((k - j) * cw)
            cls = f' class="{names[j]}"' if names is not None and names[j] else ""
            head = f'<rect x="{xs[j]}" width="{width}" height="{height}" fill="{fills[int(row[j])]}"{cls}'
            out.append(f"{head}><title>{escape(titles(i, j, k))}</title></rect>" if titles is not None
                       else head + "/>")
            j = k
        out.append("</g>")
    out.append("</g>")
    return "".join(out)


def _grouped_cells(index: Any, fill_of: Sequence[str], *, cw: float, ch: float, x0: float, y0: float,
                   titles: Any, classes: list[list[str]] | None, groups: list[list[str]]) -> str:
    """:func:`_explicit_cells`'s rects (one per run of one colour and class, each with its title),
    gathered by hover group: ``<g class="tlcells tlgroups"><g class="<group>">rects</g>...``."""
    rows, cols = index.shape
    xs, ys = _ns(x0 + np.arange(cols + 1) * cw), _ns(y0 + np.arange(rows + 1) * ch)
    widths: dict[int, str] = {}
    height, fills = _n(ch), list(fill_of)
    values = index.tolist()
    escape = _esc if not getattr(titles, "plain", False) else str
    gathered: dict[str, list[str]] = {}
    for i in range(rows):
        row, names, keys = values[i], classes[i] if classes is not None else None, groups[i]
        j = 0
        while j < cols:
            k = j + 1
            while k < cols and row[k] == row[j] and (names is None or names[k] == names[j]) and keys[k] == keys[j]:
                k += 1
            width = widths.get(k - j)
            if width is None:
                width = widths[k - j] = _n((k - j) * cw)
            cls = f' class="{names[j]}"' if names is not None and names[j] else ""
            head = f'<rect x="{xs[j]}" y="{ys[i]}" width="{width}" height="{height}" fill="{fills[int(row[j])]}"{cls}'
            gathered.setdefault(keys[j], []).append(
                f"{head}><title>{escape(titles(i, j, k))}</title></rect>" if titles is not None else head + "/>")
            j = k
    return ('<g class="tlcells tlgroups" stroke="#fff" stroke-width="0.5">'
            + "".join(f'<g class="{key}">{"".join(rects)}</g>' for key, rects in gathered.items()) + "</g>")


def _preview_cells(index: Any, fill_of: Sequence[str], *, cw: float, ch: float, x0: float, y0: float,
                   word: int) -> str:
    """What :func:`_explicit_cells` draws, in a few elements: every run of one colour of every row
    in one ``<path>`` per colour, and the cells' white borders (the explicit rects' strokes: one
    cell every ``word`` columns, one row high) in one more. No classes and no titles: a picture
    to look at while the explicit one, which hovers and answers, is on its way (``word`` 0: no
    borders, as the reused rows of a large picture have none)."""
    rows, cols = index.shape
    r, c, lengths, values = _all_runs(index)
    xs, ys = _ns(x0 + np.arange(cols + 1) * cw), _ns(y0 + np.arange(rows + 1) * ch)
    widths = dict(zip(np.unique(lengths).tolist(), _ns(np.unique(lengths) * cw)))
    height = _n(ch)
    by_colour: dict[int, list[str]] = {}
    for row, start, length, value in zip(r.tolist(), c.tolist(), lengths.tolist(), values.tolist()):
        w = widths[length]
        by_colour.setdefault(value, []).append(f"M{xs[start]} {ys[row]}h{w}v{height}h-{w}z")
    cells = "".join(f'<path fill="{fill_of[v]}" d="{"".join(d)}"/>' for v, d in sorted(by_colour.items()))
    if not word:
        return cells
    lines = [f"M{xs[j]} {ys[0]}V{ys[rows]}" for j in [*range(0, cols, word), cols]]
    lines += [f"M{xs[0]} {y}H{xs[cols]}" for y in ys]
    return f'{cells}<path d="{"".join(lines)}" fill="none" stroke="#fff" stroke-width="0.5"/>'


def _explicit_labels(index: Any, fit: _LabelFit, *, cw: float, ch: float, x0: float, y0: float,
                     label_of: Sequence[str] | None, cell_labels: list[list[str]] | None) -> str:
    """The explicit cells' labels: one per cell (two lines when it holds ``\n``), or one
    ``<text>`` per row of run labels, each character placed."""
    font = fit.font
    rows, cols = index.shape
    out = [f'<g font-size="{font}" text-anchor="middle" fill="{CELL_TEXT}" pointer-events="none">']
    if cell_labels is None and label_of is not None:
        out += _run_labels(index, fit, cw=cw, ch=ch, x0=x0, y0=y0, label_of=label_of,
                           baseline=ch * 0.5 + font * 0.35)
        rows = 0
    for i in range(rows):
        ty = y0 + i * ch + ch * 0.5 + font * 0.35
        if cell_labels is not None:
            for j in range(cols):
                lab = cell_labels[i][j]
                if not fit(1, lab):
                    continue
                parts = lab.split("\n")
                x = _n(x0 + (j + 0.5) * cw)
                if len(parts) == 1:
                    out.append(f'<text x="{x}" y="{_n(ty)}">{_esc(lab)}</text>')
                else:  # two lines: thread over register
                    out.append(f'<text x="{x}" y="{_n(ty - font * 0.5)}">{_esc(parts[0])}'
                               f'<tspan x="{x}" dy="{font}">{_esc(parts[1])}</tspan></text>')
        elif label_of is not None:
            row = [(x0 + (start + length / 2) * cw, label_of[int(value)])
                   for start, length, value in zip(*_row_runs(index[i]))
                   if fit(int(length), label_of[int(value)])]
            if row:  # one <text> per row, each character placed (labels are short digits)
                xs, chars = _centred_chars(row, font)
                out.append(f'<text x="{xs}" y="{_n(ty)}">{_esc(chars)}</text>')
    out.append("</g>")
    return "".join(out)


def _run_labels(index: Any, fit: _LabelFit, *, cw: float, ch: float, x0: float, y0: float,
                label_of: Sequence[str], baseline: float) -> list[str]:
    """The label of every run of one value that fits it, one ``<text>`` per row with each
    character placed (as :func:`_centred_chars`), ``baseline`` below the row's top, computed for
    all rows at once."""
    font = fit.font
    if not fit.tall_enough:
        return []
    r, c, lengths, values = _all_runs(index)
    sizes = np.array([len(lab) for lab in label_of])[values]
    keep = (sizes > 0) & (lengths * cw >= 0.6 * font * sizes + 2)
    r, c, lengths, values, sizes = r[keep], c[keep], lengths[keep], values[keep], sizes[keep]
    centres = x0 + (c + lengths / 2) * cw
    # each character at the code font's advance from its label's centre
    each: Any = np.repeat(np.arange(len(sizes)), sizes)
    k = np.arange(len(each)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    xs = _ns(centres[each] + (k - (sizes[each] - 1) / 2) * 0.6 * font)
    chars = "".join(label_of[v] for v in values.tolist())
    ys = _ns(y0 + np.arange(index.shape[0]) * ch + baseline)
    rows_of = r[each].tolist()
    out = []
    first = 0
    for row in sorted(set(rows_of)):
        last = first
        while last < len(rows_of) and rows_of[last] == row:
            last += 1
        out.append(f'<text x="{" ".join(xs[first:last])}" y="{ys[row]}">{_esc(chars[first:last])}</text>')
        first = last
    return out


def _reused_rows(index: Any, fill_of: Sequence[str], fit: _LabelFit, *, cw: float, ch: float, x0: float,
                 y0: float, uid: str, label_of: Sequence[str] | None, paths: bool,
                 by_pattern: bool = False) -> tuple[str, int]:
    """Each distinct row drawn once in ``<defs>`` (runs of one colour as one rect, or one path per
    colour) and placed with a ``<use>``; returns the markup and the number of distinct rows.
    ``by_pattern``: the ``<use>`` of one pattern in one ``<g class="p<pattern>">`` (inside a
    ``<g class="tlrows">``), so that hovering a row outlines every row of its pattern by one plain
    rule (no ``:has()``)."""
    defs: dict[bytes, int] = {}
    parts: list[str] = []
    uses: list[str] = []
    sids: list[int] = []
    for i in range(index.shape[0]):
        key = index[i].tobytes()
        sid = defs.get(key)
        if sid is None:
            sid = defs[key] = len(defs)
            parts.append(f'<g id="{uid}r{sid}">')
            labels: list[tuple[str, str]] = []  # (x, label) of each run whose label fits
            runs = list(zip(*_row_runs(index[i])))
            if paths:
                parts.append(_row_paths(runs, fill_of, cw, ch))
            for start, length, value in runs:
                if not paths:
                    parts.append(f'<rect x="{_n(start * cw)}" width="{_n(length * cw)}" height="{_n(ch)}" '
                                 f'fill="{fill_of[int(value)]}"/>')
                lab = label_of[int(value)] if label_of is not None else ""
                if fit(int(length), lab):
                    labels.append((_n((start + length / 2) * cw), lab))
            if labels:
                parts.append(f'<g font-size="{fit.font}" text-anchor="middle" fill="{CELL_TEXT}">'
                             f"{_row_labels(labels, ch)}</g>")
            parts.append("</g>")
        uses.append(f'<use xlink:href="#{uid}r{sid}" class="r{i} p{sid}" y="{_n(y0 + i * ch)}"/>')
        sids.append(sid)
    if by_pattern:
        placed: dict[int, list[str]] = {}
        for sid, use in zip(sids, uses):
            placed.setdefault(sid, []).append(use)
        uses = ['<g class="tlrows">'] + [f'<g class="p{sid}">{"".join(u)}</g>' for sid, u in placed.items()] + ["</g>"]
    # every row starts at x0: one translated group instead of an x on each <use>
    return ("<defs>" + "".join(parts) + f'</defs><g transform="translate({_n(x0)} 0)">' + "".join(uses) + "</g>",
            len(defs))


def _row_paths(runs: Sequence[tuple[int, int, int]], fill_of: Sequence[str], cw: float, ch: float) -> str:
    """One row of runs ``(start, length, colour index)`` as one ``<path>`` per colour."""
    by_colour: dict[int, list[str]] = {}
    for start, length, value in runs:
        w = _n(length * cw)
        by_colour.setdefault(int(value), []).append(f"M{_n(start * cw)} 0h{w}v{_n(ch)}h-{w}z")
    return "".join(f'<path fill="{fill_of[v]}" d="{"".join(d)}"/>' for v, d in by_colour.items())


def _centred_chars(labels: Sequence[tuple[float, str]], size: int) -> tuple[str, str]:
    """x positions (one per character) and text of labels centred at their x, for one ``<text>``
    with ``text-anchor="middle"``: the characters of a label sit side by side at the code font's
    advance (about 0.6 em)."""
    xs: list[str] = []
    for x, lab in labels:
        for k in range(len(lab)):
            xs.append(_n(x + (k - (len(lab) - 1) / 2) * 0.6 * size))
    return " ".join(xs), "".join(lab for _, lab in labels)


def _row_labels(labels: Sequence[tuple[str, str]], ch: float) -> str:
    """One row's cell labels. Labels of one character each (chunk digits) share one ``<text>``
    with a list of x positions, one per character; longer ones get a ``<text>`` each."""
    y = _n(ch * 0.72)
    if all(len(lab) == 1 for _, lab in labels):
        return f'<text x="{" ".join(x for x, _ in labels)}" y="{y}">{_esc("".join(lab for _, lab in labels))}</text>'
    return "".join(f'<text x="{x}" y="{y}">{_esc(lab)}</text>' for x, lab in labels)


def _cell_size(rows: int, cols: int, *, max_width: float = 900, max_height: float = 900) -> tuple[float, float]:
    cw = max(MIN_CELL, min(24.0, max_width / max(cols, 1)))
    ch = max(2.0, min(18.0, max_height / max(rows, 1)))
    return cw, ch


def _outlines(boxes: Sequence[tuple[float, float, float, float]], *, color: str = ACCENT, width: float = 2.0) -> str:
    """Many unfilled rectangles of one style: one group carries the style, each box only its place."""
    if not boxes:
        return ""
    rects = "".join(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" stroke-width="{width}"/>'
                    for x, y, w, h in boxes)
    return f'<g fill="none" style="stroke: {color}">{rects}</g>'


def _ticks(items: Sequence[tuple[float, float, Any]], *, anchor: str = "start") -> str:
    """Axis tick labels (``MIN_FONT`` px, muted): one group carries their style."""
    if not items:
        return ""
    extra = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return (f'<g style="fill: {MUTED}">'
            + "".join(f'<text x="{_n(x)}" y="{_n(y)}" font-size="{MIN_FONT}"{extra}>{_esc(t)}</text>'
                      for x, y, t in items) + "</g>")


def _outline(x: float, y: float, w: float, h: float, *, color: str = ACCENT, width: float = 2.0,
             dash: str | None = None) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="none" '
            f'style="stroke: {color}" stroke-width="{width}"{d}/>')


# --------------------------------------------------------------------------------------------
# Shared tiles
# --------------------------------------------------------------------------------------------


_HOVER_NOTES = {"bank": "hover a cell: every cell of its bank",
                "chunk": f"hover a cell: every cell of its physical {sw.CHUNK_BYTES}-byte chunk "
                         f"({_BANKS_PER_CHUNK}-bank group)",
                "row": "hover a cell: its row", "none": ""}


@dataclass(frozen=True)
class _Frame:
    """Where a grid of cells lies in its picture: the part shown and each cell's size."""

    show_rows: int
    show_cols: int
    cw: float
    ch: float
    left: float = 34.0
    top: float = 44.0


def _check_shared_options(color_by: str, hover: str) -> None:
    if color_by not in ("chunk", "bank"):
        raise ValueError(f"color_by must be 'chunk' or 'bank', got {color_by!r}")
    if hover not in HOVER_KINDS:
        raise ValueError(f"hover must be one of {', '.join(HOVER_KINDS)}, got {hover!r}")


def _colour_index(byte: Any, color_by: str) -> tuple[Any, list[str]]:
    """Each cell's colour number (its physical chunk in the line, or its bank) and the fills."""
    if color_by == "chunk":
        return (byte // sw.CHUNK_BYTES) % _CHUNKS, [_chunk_fill(k) for k in range(_CHUNKS)]
    return (byte // sw.BANK_BYTES) % sw.BANKS, [_bank_fill(k) for k in range(sw.BANKS)]


def _shown_part(index: Any, per_chunk: int, *, max_cells: int, hover_crop: int, max_rows: int
                ) -> tuple[int, int, int, bool]:
    """(rows, columns) to draw, the hover crop's cell limit, and whether ``max_rows`` cut rows."""
    rows, cols = index.shape
    show_rows, show_cols = _fit(index, max_cells)
    if show_cols < cols:
        show_cols = max(per_chunk, (show_cols // per_chunk) * per_chunk)
    limit = min(int(hover_crop), EXPLICIT_CELLS)
    if limit and show_rows * show_cols > limit:
        # fewer rows, every cell hoverable: the swizzle patterns repeat within 8 rows anyway
        show_rows = min(show_rows, max(_BAND, (limit // max(show_cols, 1)) // _BAND * _BAND))
        if show_rows * show_cols > EXPLICIT_CELLS:
            show_cols = max(per_chunk, (EXPLICIT_CELLS // show_rows) // per_chunk * per_chunk)
    row_capped = bool(max_rows) and show_rows > max_rows
    if row_capped:
        show_rows = max_rows
    return show_rows, show_cols, limit, row_capped


def _cell_titles(byte: Any, base: int, banks: Any, chunks: Any) -> Any:
    byte_, banks_, chunks_ = (byte - base).tolist(), banks.tolist(), chunks.tolist()  # Python ints: quick to print

    def titles(i: int, j: int, k: int) -> str:
        cells = f"{j}" if k == j + 1 else f"{j}-{k - 1}"
        return f"({i}, {cells}): byte {byte_[i][j]}, bank {banks_[i][j]}, chunk {chunks_[i][j]}"
    titles.plain = True  # type: ignore[attr-defined]  # digits and punctuation: nothing to escape
    return titles


def _cell_classes(banks: Any, chunks: Any, element_bytes: int) -> list[list[str]]:
    """``k<chunk> b<bank>`` per cell (an 8-byte element also names the second bank it spans)."""
    extra = ([f" b{(b + 1) % sw.BANKS}" for b in range(sw.BANKS)] if element_bytes == 8
             else [""] * sw.BANKS)
    names = {(k, b): f"k{k} b{b}{extra[b]}" for k in range(_CHUNKS) for b in range(sw.BANKS)}
    return [[names[k, b] for k, b in zip(krow, brow)] for krow, brow in zip(chunks.tolist(), banks.tolist())]


def _hover(uid: str, hover: str, explicit: bool, banks: Any, chunks: Any, element_bytes: int,
           patterns: int, explicit_cells: int = EXPLICIT_CELLS) -> tuple[str, str]:
    """The picture's hover rules and the words saying what hovering does (``explicit_cells``: the
    picture's cell-hover limit, 0 when its cells never hover)."""
    if explicit:
        prefix = {"bank": "b", "chunk": "k"}.get(hover)
        present = sorted(set(int(v) for v in np.unique(banks if prefix == "b" else chunks))) if prefix else []
        if prefix == "b" and element_bytes == 8:
            present = sorted(set(present) | {(v + 1) % sw.BANKS for v in present})
        return _hover_style(uid, prefix, present, rows=hover == "row"), _HOVER_NOTES[hover]
    style = _hover_style(uid, None, rows=hover != "none",
                         patterns=min(patterns, 256) if hover != "none" else 0)
    note = "" if hover == "none" else "hover a row: it and every row with its pattern" + (
        f" (cell hover below {explicit_cells} cells)" if explicit_cells else "")
    return style, note


def _chunk_lines(f: _Frame, per_chunk: int) -> str:
    """Thin lines on chunk boundaries and 8-row bands, so the XOR blocks read as blocks."""
    grid_lines = []
    if f.cw * per_chunk >= 6:
        for j in range(0, f.show_cols + 1, per_chunk):
            grid_lines.append(f"M{f.left + j * f.cw:.1f} {f.top:.1f}V{f.top + f.show_rows * f.ch:.1f}")
    for i in range(0, f.show_rows + 1, _BAND):
        grid_lines.append(f"M{f.left:.1f} {f.top + i * f.ch:.1f}H{f.left + f.show_cols * f.cw:.1f}")
    if not grid_lines:
        return ""
    return f'<path d="{"".join(grid_lines)}" fill="none" style="stroke: {TEXT}" stroke-width="0.6" opacity="0.6"/>'


def _axis_ticks(f: _Frame, per_chunk: int) -> list[str]:
    """Row numbers every 8 rows; column numbers every chunk (or every few, when chunks are narrow)."""
    step = per_chunk * max(1, int(np.ceil(24 / max(f.cw * per_chunk, 1e-9))))
    return [_ticks([(f.left - 4, f.top + i * f.ch + min(f.ch, 10) * 0.9, i)
                    for i in range(0, f.show_rows, _BAND)], anchor="end"),
            _ticks([(f.left + j * f.cw, f.top - 4, j) for j in range(0, f.show_cols, step)])]


def _access_outlines(f: _Frame, accesses: Sequence[Any], element_bytes: int, thread: Any) -> list[str]:
    """A conflict report's accesses as dashed outlines; the highlighted thread's solid."""
    out = []
    for acc in accesses:
        r, c = int(acc.row), int(acc.col)
        if r < f.show_rows and c < f.show_cols:
            n = max(1, int(acc.nbytes) // element_bytes)
            solid = thread is not None and int(thread) == int(acc.thread)
            out.append(_outline(f.left + c * f.cw, f.top + r * f.ch, n * f.cw, f.ch, width=2.5 if solid else 1.0,
                                dash=None if solid else "2 2", color=ACCENT if solid else TEXT))
    return out


def _highlights(f: _Frame, hl: dict[str, Any], byte: Any, per_chunk: int, accesses: Sequence[Any]
                ) -> tuple[list[str], list[str]]:
    """Outlines and caption phrases of a highlighted row, logical chunk or thread."""
    out, caption = [], []
    if "row" in hl and hl["row"] is not None:
        r = int(hl["row"])
        if 0 <= r < f.show_rows:
            out.append(_outline(f.left, f.top + r * f.ch, f.show_cols * f.cw, f.ch))
            physical = (byte[r, ::per_chunk] // sw.CHUNK_BYTES) % _CHUNKS
            caption.append(f"row {r}: physical chunks " + " ".join(str(int(v)) for v in physical[:16]))
    if "chunk" in hl and hl["chunk"] is not None:
        k = int(hl["chunk"])
        if 0 <= k * per_chunk < f.show_cols:
            out.append(_outline(f.left + k * per_chunk * f.cw, f.top, per_chunk * f.cw, f.show_rows * f.ch))
            physical = (byte[:16, k * per_chunk] // sw.CHUNK_BYTES) % _CHUNKS
            caption.append(f"logical chunk {k}: physical chunks by row " + " ".join(str(int(v)) for v in physical))
    if hl.get("thread") is not None and accesses:
        t = int(hl["thread"])
        for acc in accesses:
            if int(acc.thread) == t:
                caption.append(f"thread {t}: ({acc.row}, {acc.col}), byte {acc.byte}, banks "
                               f"{', '.join(str(b) for b in acc.banks)}, phase {acc.phase}")
    return out, caption


def _crop_caption(f: _Frame, rows: int, cols: int, *, limit: int, row_capped: bool, max_rows: int,
                  max_cells: int, col_capped: bool = False) -> str:
    shown = f.show_rows * f.show_cols
    why = [f"the first {shown} cells, every one hoverable" if limit and shown <= limit
           else f"max_rows={max_rows}: swizzles repeat within {_BAND} rows of {sw.LINE_BYTES} bytes" if row_capped
           else f"max_cells={max_cells}" if f.show_rows < rows or not col_capped else ""]
    reason = f" ({why[0]})" if why[0] else ""
    if col_capped:
        reason += f", the columns that fit {MAX_WIDTH} px"
    return f"showing rows 0-{f.show_rows - 1}, cols 0-{f.show_cols - 1} of {rows}x{cols}{reason}"


def _shared_legend(color_by: str, hover_note: str, numbers: bool = True) -> str:
    what = "colour and number" if numbers else "colour"
    legend = (f"{what}: physical {sw.CHUNK_BYTES}-byte chunk ({_BANKS_PER_CHUNK}-bank group) "
              "of each element" if color_by == "chunk" else
              f"{what}: bank (0-{sw.BANKS - 1}) of each element's {sw.BANK_BYTES}-byte word")
    if not numbers:
        legend += " (too many columns for the bank numbers: draw fewer columns to see them)"
    return legend + (f"; {hover_note}" if hover_note else "")


def _bank_cell_width(element_bytes: int) -> float:
    """The cell width at which a two-digit bank number fits its run (one 4-byte word: two fp16
    cells, four int8 cells; one cell of 4 and 8 bytes) at ``MIN_FONT``: 64 words (a 128-column
    fp16 tile) draw 896 px wide, so the picture fits a 940 px output unscaled."""
    per_word = max(1, sw.BANK_BYTES // element_bytes)
    return (0.6 * MIN_FONT * 2 + 2) / per_word  # two digits at a monospace advance of 0.6 em, 1 px either side


def _caption_lines(texts: Sequence[str], width: float, size: int) -> list[str]:
    """Each phrase on its own line(s), broken at spaces to fit ``width``: a caption is never cut."""
    return [line for text in texts if text for line in _wrap(text, width - 8, size)]


def _caption_width(texts: Sequence[str], size: int) -> float:
    return max([0.62 * size * len(t) + 12 for t in texts if t] + [0.0])


def _shared_picture(offsets: Any, dtype: str, *, name: str, subtitle: str, color_by: str, max_cells: int,
                    highlight: dict[str, Any] | None, accesses: Sequence[Any] = (), uid_parts: tuple = (),
                    max_width: float = 900, hover: str = "bank", base: int = 0, hover_crop: int = 0,
                    max_rows: int = 0, titles: bool = True, explicit_cells: int = EXPLICIT_CELLS,
                    max_cols: int = 0, fixed_width: bool = False, total_shape: tuple[int, int] | None = None,
                    preview: bool = False, shared_style: bool = False) -> str:
    """A shared tile's cells at their logical positions, coloured by where their bytes land: the
    steps are named functions above (what part to show, cell classes, hover, outlines, captions).
    ``explicit_cells``: at most this many cells hover one by one (0: none; each distinct row is
    then drawn once, as one path per colour, and reused). The picture is at most ``MAX_WIDTH``
    wide: columns that would need cells narrower than ``MIN_CELL`` (or, coloured by bank, narrower than
    the bank number) are left out and the caption says so; ``max_cols`` caps them further.
    ``total_shape``: the whole tile's shape when ``offsets`` is only its top-left part (a caller
    that knows what cannot be drawn computes no more), for the caption. ``preview``: the same
    picture (its size, colours, numbers, outlines and words) without what hovering and tooltips
    need, in a few elements: quick to send and to paint while controls move. ``shared_style``: no
    ``<style>`` of its own: cells gathered by hover group, hovering by the rules of
    :data:`HOVER_CSS`, which the page (or the picture's holder) has once."""
    # Not split: one picture drawn in order (cells, bank colours, highlights, hover boxes, titles) on one geometry.
    e = sw.dtype_bytes(dtype)
    offsets = np.asarray(offsets, dtype=np.int64)
    rows, cols = total_shape or offsets.shape
    byte = offsets * e + base  # absolute address residue: banks follow the buffer's alignment
    _check_shared_options(color_by, hover)
    index, fill_of = _colour_index(byte, color_by)
    per_chunk = max(sw.CHUNK_BYTES // e, 1)
    show_rows, show_cols, limit, row_capped = _shown_part(index, per_chunk, max_cells=max_cells,
                                                          hover_crop=hover_crop, max_rows=max_rows)
    f = _Frame(show_rows, show_cols, 2.0, 2.0)
    grid_room = min(max(max_width, 100.0), MAX_WIDTH - f.left - 12)
    # coloured by bank, every bank number is drawn or none is (never 0-9 without 10-31): the cells
    # widen for two digits where the columns shown fit that way
    min_cw = _bank_cell_width(e) if color_by == "bank" else MIN_CELL
    wanted = min(show_cols, max_cols or show_cols) * min_cw
    # a picture drawn to a given width keeps its bank numbers and shows the columns they fit in
    bank_numbers = color_by == "bank" and (fixed_width or wanted <= MAX_WIDTH - f.left - 12)
    if bank_numbers and not fixed_width:
        grid_room = max(grid_room, wanted)
    elif not bank_numbers:
        min_cw = MIN_CELL
    width_cap = max(per_chunk, int(grid_room // min_cw) // per_chunk * per_chunk)
    if max_cols:
        width_cap = min(width_cap, max(per_chunk, max_cols // per_chunk * per_chunk))
    col_capped = show_cols > width_cap
    show_cols = min(show_cols, width_cap)
    sub = index[:show_rows, :show_cols]
    n_shown = show_rows * show_cols
    banks = (byte[:show_rows, :show_cols] // sw.BANK_BYTES) % sw.BANKS
    chunks = (byte[:show_rows, :show_cols] // sw.CHUNK_BYTES) % _CHUNKS
    cell_titles = (_cell_titles(byte, base, banks, chunks) if titles and n_shown <= TITLE_CELLS
                   and (n_shown * e // sw.BANK_BYTES if e < sw.BANK_BYTES else n_shown) <= EXPLICIT_RECTS else None)
    rects = n_shown * e // sw.BANK_BYTES if e < sw.BANK_BYTES else n_shown  # a rect per 4-byte word or element
    explicit = n_shown <= min(explicit_cells, EXPLICIT_CELLS) and rects <= EXPLICIT_RECTS
    classes = _cell_classes(banks, chunks, e) if explicit and not preview else None
    if preview:
        cell_titles = None
    groups = (_hover_groups(hover, banks, chunks, e) if explicit else []) if shared_style and not preview else None
    cw, ch = _cell_size(show_rows, show_cols, max_width=grid_room)
    cw = max(cw, min_cw)
    label_font = MIN_FONT if color_by == "bank" else max(MIN_FONT + 1, min(12, int(ch * 0.65)))
    hl = dict(highlight or {})
    # the words first: they set the picture's width (up to CAPTION_WIDTH) and wrap inside it
    grid_width = f.left + show_cols * cw + 4
    uid = _uid("shared", name, dtype, color_by, hover, show_rows, show_cols, uid_parts, np.ascontiguousarray(sub))
    probe = _Frame(show_rows, show_cols, cw, ch)
    _, caption = _highlights(probe, hl, byte, per_chunk, accesses)
    if show_rows < rows or show_cols < cols:
        caption.append(_crop_caption(probe, rows, cols, limit=limit, row_capped=row_capped, max_rows=max_rows,
                                     max_cells=max_cells, col_capped=col_capped))
    phrases = subtitle.split(" | ")
    # the title (one line, bold) always fits; the other words wrap past CAPTION_WIDTH
    width = max(grid_width, min(max_width + f.left + 12, 360.0)) if fixed_width else min(MAX_WIDTH, max(
        grid_width, 360.0, _caption_width([name], 12),
        min(CAPTION_WIDTH, max(_caption_width(phrases, 11), _caption_width(caption, MIN_FONT)))))
    head = _caption_lines(phrases, width, 11)
    f = _Frame(show_rows, show_cols, cw, ch, top=34.0 + 14 * len(head))
    numbers = color_by == "chunk" or bank_numbers
    grid, patterns = _grid(sub, fill_of, label_of=[str(k) for k in range(len(fill_of))] if numbers else None,
                           cw=cw, ch=ch, x0=f.left,
                           y0=f.top, uid=uid, titles=cell_titles, classes=classes, paths=explicit_cells == 0,
                           label_font=label_font, preview=preview,
                           word=max(1, sw.BANK_BYTES // e) if explicit else 0, groups=groups)
    style, hover_note = _hover(uid, hover, explicit, banks, chunks, e, patterns, explicit_cells)
    root_class = ""
    if preview:  # the words say what hovering does: the full picture that follows does it
        style, root_class = "", "tl-preview"
    elif shared_style:
        style, root_class = "", "" if hover == "none" else "tl-hg" if explicit else "tl-hu"
    out = ["", style, _text(4, 16, f"{name}", weight="bold")]
    out += [_text(4, 32 + 14 * i, line, size=11, color=MUTED) for i, line in enumerate(head)]
    out.append(grid)
    out.append(_chunk_lines(f, per_chunk))
    out += _axis_ticks(f, per_chunk)
    out += _access_outlines(f, accesses, e, hl.get("thread"))
    marks, _ = _highlights(f, hl, byte, per_chunk, accesses)
    out += marks
    legend = _caption_lines([_shared_legend(color_by, hover_note, numbers)], width, MIN_FONT)
    notes = _caption_lines(caption, width, MIN_FONT)
    y = f.top + show_rows * ch + 16
    out += [_text(4, y + 13 * i, line, size=MIN_FONT, color=MUTED) for i, line in enumerate(legend)]
    y += 13 * len(legend)
    out += [_text(4, y + 13 * i, line, size=MIN_FONT, color=TEXT) for i, line in enumerate(notes)]
    height = y + 13 * len(notes) + 6
    out[0] = _svg_open(width, height, f"{name} shared layout", uid)
    if root_class:  # a preview says what it is; a picture of shared style, which rules it takes
        out[0] = out[0].replace("<svg ", f'<svg class="{root_class}" ', 1)
    return "".join(out) + "</svg>"


def tile_svg(tile: sw.SharedTile, *, color_by: str = "chunk", highlight: dict[str, Any] | None = None,
             report: sw.ConflictReport | None = None, max_cells: int = 4096, title: str | None = None,
             max_width: float = 900, hover: str = "bank", max_rows: int = 0, max_cols: int = 0,
             fit_width: float = 0, preview: bool = False, shared_style: bool = False) -> Picture:
    """A :class:`~tilelab.swizzle.SharedTile` at its logical positions, coloured by the physical
    16-byte chunk (``color_by="chunk"``: the swizzle's XOR reads as a permutation of colours per
    row) or bank. ``highlight``: ``{"row": r}``, ``{"chunk": k}`` (a logical 16-byte column) or
    ``{"thread": t}`` (with ``report``, a :class:`~tilelab.swizzle.ConflictReport`, whose accesses
    are outlined). ``hover``: what hovering a cell highlights (``"bank"``, ``"chunk"``, ``"row"``,
    ``"none"``), pure CSS inside the SVG. ``max_rows``/``max_cols``: draw at most this many rows /
    columns (0: no cap; the caption says what is shown). ``fit_width``: the whole picture, cells
    and captions, at most this wide (0: cells up to ``max_width``, captions up to 640 px), so
    that it is shown unscaled in an output of that width. ``preview``: the same picture without
    its hover and tooltips, in a few elements (what the explorer shows while its controls move).
    ``shared_style``: hover by the rules of :data:`HOVER_CSS`, which the page holds once (the
    explorer's), instead of a ``<style>`` of the picture's own."""
    if fit_width:
        max_width = max(100.0, fit_width - _Frame(0, 0, 0, 0).left - 12)
    return Picture(_tile_svg(tile, color_by=color_by, highlight=highlight, report=report, max_cells=max_cells,
                             title=title,
                             max_width=max_width, hover=hover, max_rows=max_rows, max_cols=max_cols,
                             fixed_width=bool(fit_width), preview=preview, shared_style=shared_style))


def _tile_svg(tile: sw.SharedTile, *, color_by: str, highlight: dict[str, Any] | None,
              report: sw.ConflictReport | None, max_cells: int, title: str | None, max_width: float, hover: str,
              max_rows: int, max_cols: int, fixed_width: bool = False, preview: bool = False,
              shared_style: bool = False) -> str:
    name = title or f"{tile.rows}x{tile.cols} {tile.dtype}, {tile.swizzle} swizzle"
    sub = (f"{tile.panels} panel(s) of {tile.panel_cols} columns, rows {tile.panel_bytes} B apart"
           if tile.mode.is_swizzled else f"row-major, rows {tile.row_bytes} B apart")
    if report is not None:
        sub += f" | {report.summary().split(': ', 1)[-1]}"
    # Draw-only part: at most max_rows + 1 rows (one more than drawn tells the caption rows were
    # cut) and the columns the widest picture could hold at MIN_CELL, so that a 1024 x 1024 tile
    # computes a few thousand offsets, not a million.
    keep_rows = min(tile.rows, max_rows + 1) if max_rows else tile.rows
    keep_cols = min(tile.cols, int((MAX_WIDTH - _Frame(0, 0, 0, 0).left - 12) // MIN_CELL) + 1)
    if max_cols:
        keep_cols = min(keep_cols, max_cols + 1)
    r, c = np.indices((keep_rows, keep_cols))  # the row and the column of each element drawn
    return _shared_picture(tile.element_offset(r, c), tile.dtype, name=name, subtitle=sub, color_by=color_by,
                           max_cells=max_cells, highlight=highlight,
                           accesses=report.accesses if report is not None else (),
                           uid_parts=(tile.swizzle, tile.base, tile.core_order), max_width=max_width, hover=hover,
                           base=tile.base % sw.LINE_BYTES, max_rows=max_rows, max_cols=max_cols,
                           fixed_width=fixed_width, total_shape=(tile.rows, tile.cols), preview=preview,
                           shared_style=shared_style)


def layout_svg(layout: Any, *, max_cells: int | None = None, color_by: str = "chunk",
               highlight: dict[str, Any] | None = None, hover: str = "bank", hover_crop: int = 0,
               titles: bool = True, max_rows: int = 0, cell_hover: bool = True, fit_width: float = 0) -> str:
    """A report's :class:`~tilelab.records.kernel.Layout`: a shared tile coloured by the 16-byte chunk (or
    bank) of its physical offset, or a fragment as a grid of thread ids coloured by warp.
    ``max_cells`` defaults to 4096 for shared tiles and 1024 (labelled cells) for fragments.
    ``hover_crop``: show only the first rows of a shared tile, about this many cells (at least 8
    rows, at most 2,048 cells), so that every cell shown is hoverable. ``titles=False`` leaves out
    the per-cell tooltips (byte, bank, chunk): the numbers drawn in the cells remain.
    ``max_rows``: draw at most this many rows of a shared tile (0: no cap); the caption says so.
    ``cell_hover=False`` draws each distinct row once and reuses it (much lighter), hovering whole
    rows and their repeats instead of cells (the inspector's bank picture hovers cells).
    ``fit_width``: the whole picture at most this wide (0: up to ``MAX_WIDTH``), so that it is shown
    unscaled, every text at its size, in an output of that width (columns past it are left out and
    the caption says so)."""
    if layout.scope == "fragment":
        return fragment_svg(layout, highlight=highlight, max_cells=max_cells or 1024, fit_width=fit_width)
    max_cells = max_cells or 4096
    shape = tuple(layout.shape)
    if not layout.offsets:
        return _message_svg(f"{layout.buffer}: {layout.dtype} {shape}",
                            ["no per-element offsets recorded (too large to tabulate)", str(layout.description)[:120]])
    arr = np.asarray(layout.offsets, dtype=np.int64)
    if len(shape) != 2:
        flat = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        arr = arr.reshape(flat, shape[-1] if shape else arr.size)
    else:
        arr = arr.reshape(shape)
    tile = sw.match_layout(layout) if len(shape) == 2 else None
    sub = f"{layout.dtype} {' x '.join(str(s) for s in shape)}"
    sub += f"; matches tilelab's {tile.swizzle} swizzle" if tile is not None else "; not one of tilelab's swizzle modes"
    try:
        return _shared_picture(arr, layout.dtype, name=f"{layout.buffer} (shared)", subtitle=sub,
                               color_by=color_by, max_cells=max_cells, highlight=highlight, uid_parts=(layout.buffer,),
                               hover=hover, hover_crop=hover_crop, titles=titles, max_rows=max_rows,
                               explicit_cells=EXPLICIT_CELLS if cell_hover else 0,
                               max_width=max(100.0, fit_width - _Frame(0, 0, 0, 0).left - 12) if fit_width else 900,
                               fixed_width=bool(fit_width))
    except ValueError as err:  # unknown dtype and the like: say so rather than fail the whole tab
        return _message_svg(f"{layout.buffer}: cannot draw", [str(err)])


def side_by_side(svgs: Sequence[str], *, gap: int = 24) -> str:
    """Several SVGs in one row, each kept whole (nested ``<svg>`` elements)."""
    sizes = []
    for s in svgs:
        m = re.search(r'width="([\d.]+)" height="([\d.]+)"', s)
        sizes.append((float(m.group(1)), float(m.group(2))) if m else (400.0, 300.0))
    width = sum(w for w, _ in sizes) + gap * (len(svgs) - 1)
    height = max((h for _, h in sizes), default=0)
    out = [_svg_open(width, height, "comparison")]
    x = 0.0
    for s, (w, _) in zip(svgs, sizes):
        out.append(s.replace("<svg ", f'<svg x="{x:.0f}" y="0" ', 1))
        x += w + gap
    return "".join(out) + "</svg>"


def compare_svg(rows: int, cols: int, dtype: str = "float16", modes: Sequence[str] = ("NONE", "128B"), *,
                color_by: str = "chunk", pattern: str | None = "column_read", max_cells: int = 4096) -> Picture:
    """Two (or more) swizzle modes of one tile side by side, with a pattern's wavefront count.

    HTML: the pictures in a row that wraps (``display: flex``), each drawn ``COMPARE_WIDTH`` wide
    with its captions wrapped, so that they sit side by side where the output is wide and one
    above the other where it is not (a laptop's notebook), never scaled under 10 px text."""
    parts = []
    for mode in modes:
        try:
            tile = sw.SharedTile(rows, cols, dtype, mode)
        except ValueError as err:
            parts.append(_message_svg(f"{mode}: not applicable", [str(err)], width=COMPARE_WIDTH))
            continue
        report = sw.bank_conflicts(tile, pattern) if pattern else None
        parts.append(_tile_svg(tile, color_by=color_by, highlight=None, report=report, max_cells=max_cells, title=None,
                               max_width=COMPARE_WIDTH - _Frame(0, 0, 0, 0).left - 12, hover="bank", max_rows=0,
                               max_cols=0, fixed_width=True))
    return Picture('<div class="tl-compare" style="display: flex; flex-wrap: wrap; gap: 12px 24px; '
                   'align-items: flex-start">' + "".join(parts) + "</div>")


# --------------------------------------------------------------------------------------------
# WGMMA operand: core matrices with LBO/SBO arrows
# --------------------------------------------------------------------------------------------


def wgmma_operand_svg(operand: Any, *, shape: tuple[int, int] | None = None, dtype: str = "float16",
                      operand_name: str = "A", mn: int | None = None, max_chunks: int = 2048,
                      compiler: Any = None) -> str:
    """Core-matrix overlay of one WGMMA operand: the tile as 16-byte chunks coloured by physical
    chunk, the core matrices one instruction reads outlined and numbered, and arrows for SBO (next
    8 rows) and LBO (next core matrix along the leading dimension).

    ``operand`` is a :class:`~tilelab.swizzle.WgmmaDescriptor`, or a report's
    :class:`~tilelab.records.kernel.WgmmaOperand` together with the buffer's ``shape`` and ``dtype``
    (tilelab recomputes the core matrices and says whether its LBO/SBO agree with the compiler's).
    A descriptor tilelab computed from the layout's own offsets may come with ``compiler=``, the
    report's operand: the caption then says whether the two agree (what the Layouts tab does).
    """
    if not isinstance(operand, sw.WgmmaDescriptor):
        compiler = operand
        computed = _descriptor_of(operand, shape, dtype, operand_name, mn)
        if isinstance(computed, str):
            return computed
        operand = computed
    desc: sw.WgmmaDescriptor = operand
    tile = desc.tile
    per_chunk = sw.CHUNK_BYTES // tile.element_bytes
    n_chunks = tile.row_bytes // sw.CHUNK_BYTES
    rows, cw, ch = _operand_rows(tile.rows, n_chunks, max_chunks)
    f = _Frame(rows, n_chunks, cw, ch, left=40.0)
    # as wide as the grid and its arrow (the arrows' words go below it, every line wrapped), at
    # least a caption's width: a 16-chunk operand (a 128-column fp16 tile) fits a laptop's output
    width = min(MAX_WIDTH, max(f.left + n_chunks * cw + 24, float(OPERAND_WIDTH)))
    header = _operand_header(desc, getattr(compiler, "buffer", None) or desc.operand, compiler, width)
    legend_lines = _wrap(f"outlined: the core matrices ({_CM} rows x {sw.CHUNK_BYTES} B) one instruction reads; "
                         f"number in a cell: its physical {sw.CHUNK_BYTES}-byte chunk", width - 8, 11)
    legend_y = 16.0 + 15 * len(header)
    f = dataclasses.replace(f, top=legend_y + 14 * len(legend_lines) + 14)
    r, c = np.indices((rows, len(range(0, tile.cols, per_chunk))))
    byte = np.asarray(tile.byte_offset(r, c * per_chunk))  # the first byte of each chunk
    phys_chunk = (byte // sw.CHUNK_BYTES) % _CHUNKS
    uid = _uid("wgmma", tile.to_dict(), desc.major, desc.mn, rows)
    buffer = getattr(compiler, "buffer", None) or desc.operand
    out = [""]  # the <svg> opening, once the height is known
    out += header
    out += [_text(4, legend_y + 14 * i, line, size=11, color=MUTED) for i, line in enumerate(legend_lines)]
    out.append(_grid(np.asarray(phys_chunk, dtype=np.int64), [_chunk_fill(k) for k in range(_CHUNKS)],
                     label_of=[str(k) for k in range(_CHUNKS)], cw=cw, ch=ch, x0=f.left, y0=f.top, uid=uid,
                     label_font=12, paths=True)[0])
    out += _operand_ticks(f)
    out += _core_matrix_outlines(desc, f, per_chunk)
    arrows, below = _descriptor_arrows(desc, f, per_chunk, uid, width)
    out += arrows
    notes = list(desc.notes)
    y = f.top + rows * ch + 16 + below
    if rows < tile.rows:
        notes.append(f"showing rows 0-{rows - 1} of {tile.rows}")
    caption = [line for note in notes[:3] for line in _wrap(note, width - 8, 11)]
    out += [_text(4, y + 14 * i, line, size=11, color=TEXT) for i, line in enumerate(caption)]
    height = y + 14 * len(caption) + 8
    out[0] = _svg_open(width, height, f"WGMMA operand {buffer}")
    return "".join(out) + "</svg>"


def _descriptor_of(operand: Any, shape: tuple[int, int] | None, dtype: str, operand_name: str,
                   mn: int | None) -> sw.WgmmaDescriptor | str:
    """tilelab's descriptor of a report's operand stored as a ``shape`` tile, or a picture saying
    why there is none."""
    if shape is None:
        return _message_svg(
            f"WGMMA operand {getattr(operand, 'buffer', '') or ''}",
            [f"layout {getattr(operand, 'swizzle', '?')}, LBO {operand.lbo_bytes} B (enc {operand.lbo}), "
             f"SBO {operand.sbo_bytes} B (enc {operand.sbo}), {operand.major}-major",
             "pass shape=(rows, cols) and dtype= to draw its core matrices"])
    try:
        tile = sw.SharedTile(shape[0], shape[1], dtype, sw.mode_for_layout_type(operand.layout_type).name)
        return sw.wgmma_descriptor(tile, operand.major, operand=operand_name, mn=mn)
    except ValueError as err:
        return _message_svg(f"WGMMA operand {getattr(operand, 'buffer', '')}: cannot draw", [str(err)[:160]])


def _operand_rows(tile_rows: int, n_chunks: int, max_chunks: int) -> tuple[int, float, float]:
    """Rows to draw (whole core matrices) and the cell size: cells big enough for their digit (at
    least 26 x 16 px), so a tall tile shows its top rows."""
    rows = tile_rows
    if rows * n_chunks > max_chunks:
        rows = max(_CM, (max_chunks // max(n_chunks, 1)) // _CM * _CM)
    cw, ch = _cell_size(rows, n_chunks, max_width=640, max_height=640)
    cw, ch = max(cw, 26.0), max(ch, 16.0)
    if rows * ch > 1024:
        rows = max(_CM, int(1024 // ch) // _CM * _CM)
    return rows, cw, ch


def _operand_header(desc: sw.WgmmaDescriptor, buffer: str, compiler: Any, width: float) -> list[str]:
    """Title, the descriptor's fields and, with the compiler's operand, whether the two agree:
    one ``<text>`` per line, wrapped to ``width``, 15 px apart from y 16."""
    tile = desc.tile
    dims = "(MN, K), K contiguous" if desc.major == "K" else "(K, MN), MN contiguous"
    title = f"WGMMA {desc.operand} operand {buffer}: {tile.rows}x{tile.cols} {tile.dtype} {dims}"
    lines = [(line, 12, TEXT, "bold") for line in _wrap(title, width - 8, 12)]
    lines += [(line, 11, MUTED, "normal") for line in
              _wrap(f"layout_type {desc.layout_type} ({desc.swizzle}), LBO {desc.lbo_bytes} B (enc {desc.lbo}), "
                    f"SBO {desc.sbo_bytes} B (enc {desc.sbo}); one cell = {sw.CHUNK_BYTES} bytes", width - 8, 11)]
    if compiler is not None:
        same = desc.agrees_with(compiler)
        words = ("compiler's descriptor agrees with tilelab" if same else
                 f"compiler emitted layout_type {compiler.layout_type}, LBO {compiler.lbo}, "
                 f"SBO {compiler.sbo}: differs from tilelab")
        lines += [(line, 11, TEXT if same else ACCENT, "normal") for line in _wrap(words, width - 8, 11)]
    return [_text(4, 16 + 15 * i, text, size=size, color=color, weight=weight)
            for i, (text, size, color, weight) in enumerate(lines)]


def _operand_ticks(f: _Frame) -> list[str]:
    """Byte offsets along the chunks (every few, when narrow) and row numbers every core matrix."""
    return [_ticks([(f.left + j * f.cw + 2, f.top - 4, f"{j * sw.CHUNK_BYTES}B")
                    for j in range(0, f.show_cols, max(1, int(np.ceil(30 / f.cw))))]),
            _ticks([(f.left - 4, f.top + i * f.ch + min(f.ch, 10) * 0.9, i)
                    for i in range(0, f.show_rows, _CM)], anchor="end")]


def _core_matrix_outlines(desc: sw.WgmmaDescriptor, f: _Frame, per_chunk: int) -> list[str]:
    """Every core matrix the instruction reads (8 rows x one 16-byte chunk column) outlined, all
    under one style."""
    boxes = []
    for cm in desc.core_matrices:
        if not cm.cells:
            continue
        r0, c0 = cm.cells[0]
        if r0 >= f.show_rows:
            continue
        boxes.append((f.left + (c0 // per_chunk) * f.cw, f.top + r0 * f.ch, f.cw,
                      min(_CM, f.show_rows - r0) * f.ch))
    return [_outlines(boxes, width=1.6)]


def _descriptor_arrows(desc: sw.WgmmaDescriptor, f: _Frame, per_chunk: int, uid: str,
                       width: float) -> tuple[list[str], float]:
    """Arrows from core matrix (0, 0) of the instruction for the strides SBO and LBO encode, drawn
    outside the grid so that they never cover a cell's number: a step of 8 rows right of the
    grid, a step along the row below the grid; their words below the grid, each line wrapped to
    ``width`` and led by its arrow's direction. Returns the markup and the height the marks
    below the grid take."""
    tile, cw, ch, top, rows, n_chunks = desc.tile, f.cw, f.ch, f.top, f.show_rows, f.show_cols
    marker = f"{uid}arrow"
    out = [f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           f'orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" style="fill: {ACCENT}"/></marker></defs>']
    right = f.left + n_chunks * cw
    bottom = top + rows * ch
    below_y = bottom + 10  # the along-the-row arrow's line, under the grid

    def arrow(x1: float, y1: float, x2: float, y2: float) -> None:
        out.append(f'<path d="M{x1:.1f} {y1:.1f}L{x2:.1f} {y2:.1f}" style="stroke: {ACCENT}" stroke-width="2.5" '
                   f'fill="none" marker-end="url(#{marker})"/>')

    words: list[str] = []  # the arrows' words, below the grid

    def down(r0: int, label: str) -> None:  # 8 rows, right of the grid
        y1, y2 = top + r0 * ch + 1, top + (r0 + _CM) * ch - 1
        arrow(right + 8, y1, right + 8, y2)
        words.append(f"\u2193 (right of the grid) {label}")

    def across(c0: int, steps: int, label: str) -> None:  # ``steps`` chunks along the row, below the grid
        x1, x2 = f.left + c0 * cw + 1, f.left + (c0 + steps) * cw - 1
        arrow(x1, below_y, x2, below_y)
        words.append(f"\u2192 {label}")

    start = desc.core_matrices[0].cells[0] if desc.core_matrices and desc.core_matrices[0].cells else (0, 0)
    r0, c0 = start[0], start[1] // per_chunk
    what = "MN" if desc.major == "K" else "K"
    interleaved_mn = desc.major == "MN" and not tile.mode.is_swizzled
    below = False
    if r0 + _CM <= rows:  # down 8 rows: SBO, except for an unswizzled MN-major operand, where LBO steps K
        field, enc, nbytes = ("LBO", desc.lbo, desc.lbo_bytes) if interleaved_mn else ("SBO", desc.sbo, desc.sbo_bytes)
        down(r0, f"{field} {nbytes} B (enc {enc}): next {_CM} rows of {what}")
    if interleaved_mn:
        if c0 + 1 < n_chunks:
            across(c0, 1, f"SBO {desc.sbo_bytes} B (enc {desc.sbo}): next {sw.CHUNK_BYTES} B of MN")
            below = True
    elif desc.major == "K":
        if c0 + 1 < n_chunks:
            across(c0, 1, f"LBO: next {sw.CHUNK_BYTES} B of K (unused when swizzled; enc 1)" if tile.mode.is_swizzled
                   else f"LBO {desc.lbo_bytes} B (enc {desc.lbo}): next {sw.CHUNK_BYTES} B of K")
            below = True
    else:
        w = tile.panel_cols // per_chunk
        if tile.mode.is_swizzled and c0 + w < n_chunks:
            across(c0, w, f"LBO {desc.lbo_bytes} B (enc {desc.lbo}): next {tile.panel_bytes}-byte panel of MN")
            below = True
        elif tile.mode.is_swizzled:
            words.append(f"LBO {desc.lbo_bytes} (enc {desc.lbo}): one panel, unused")
    lines = [line for label in words for line in _wrap(label, width - 8, 11)]
    first = below_y + (18 if below else 4)
    out += [_text(4, first + 14 * i, line, size=11, color=ACCENT, weight="bold") for i, line in enumerate(lines)]
    return out, (first - bottom - 6) + 14 * len(lines)


def _wrap(text: str, width: float, size: int) -> list[str]:
    """``text`` broken at spaces into lines that fit ``width`` px at font ``size`` (about 0.62 em
    per character, the widest of the fonts a notebook uses for SVG text)."""
    per_line = max(10, int(width / (0.62 * size)))
    lines: list[str] = []
    for word in str(text).split():
        if lines and len(lines[-1]) + 1 + len(word) <= per_line:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


# --------------------------------------------------------------------------------------------
# Fragments
# --------------------------------------------------------------------------------------------


def fragment_svg(layout: Any, *, max_cells: int = 1024, highlight: dict[str, Any] | None = None,
                 hover: bool = True, fit_width: float = 0) -> str:
    """A fragment layout as CuTe draws thread-value pictures: every cell labelled ``T<thread>``
    over ``v<register>`` and coloured by warp (two shades per warp alternate every 4 threads).
    Hovering a cell highlights every cell of its thread (pure CSS; cells carry class ``t<thread>``).
    ``highlight={"thread": t}`` outlines that thread's elements; ``{"warp": w}`` a warp's.

    Past ``max_cells`` the picture shows one warp's unit (:func:`_fragment_unit`): the top-left
    block holding every thread of the first warp, as tall as that warp's rows when that fits,
    and the caption says which block it is, what repeats beyond it and how many elements each
    thread holds in all. A fragment with no such block shows its top-left part. ``fit_width``: the
    picture at most this wide (0: ``MAX_WIDTH``), columns past it left out."""
    widest_picture = min(MAX_WIDTH, fit_width) if fit_width else MAX_WIDTH
    # Long by its docstring; the drawing is one pass over the cells.
    shape = tuple(layout.shape)
    if not layout.threads:
        return _message_svg(f"{layout.buffer}: fragment {shape}",
                            ["no per-element threads recorded (too large to tabulate)", str(layout.description)[:120]])
    threads, locals_ = _fragment_grids(layout)
    rows, cols = threads.shape
    base = int(layout.thread_base or 0)
    absolute = threads + base
    warp = absolute // WARP_SIZE
    unit = _fragment_unit(absolute, max_cells) if rows * cols > max_cells else None
    if unit is not None:
        show_rows, show_cols, unit_words = unit
    else:
        show_rows, show_cols = _fragment_shown(rows, cols, max_cells)
        unit_words = ""
    font = MIN_FONT
    labelled = show_rows * show_cols <= 1024
    if labelled:  # wide enough for "T383" / "v127" on two lines
        widest = max(len(f"T{int(absolute[:show_rows, :show_cols].max())}"),
                     len(f"v{int(locals_[:show_rows, :show_cols].max())}"))
        cw, ch = max(30.0, 0.62 * font * widest + 8), 26.0
        fit_cols = max(1, int((widest_picture - _Frame(0, 0, 0, 0).left - 12) // cw))
        if show_cols > fit_cols:  # labelled cells never make the picture wider than MAX_WIDTH
            show_cols, unit_words = fit_cols, ""
    else:
        cw, ch = _cell_size(show_rows, show_cols, max_width=widest_picture - _Frame(0, 0, 0, 0).left - 12)
    n_shown = show_rows * show_cols
    shown_t, shown_v = absolute[:show_rows, :show_cols], locals_[:show_rows, :show_cols]
    colour = (warp * 2 + (absolute // 4) % 2)[:show_rows, :show_cols]
    fill_of = [_warp_fill(w, shade) for w in range(int(warp.max()) + 1) for shade in (0, 1)]
    labels = ([[f"T{int(shown_t[i, j])}\nv{int(shown_v[i, j])}" for j in range(show_cols)] for i in range(show_rows)]
              if labelled else None)

    # labelled cells already say thread and register: no per-cell titles (they would double the size)
    def titles(i: int, j: int, k: int) -> str:
        regs = ", ".join(str(int(v)) for v in shown_v[i, j:k])
        span = str(j) if k == j + 1 else f"{j}-{k - 1}"
        return f"({i}, {span}): thread {int(shown_t[i, j])} (warp {int(warp[i, j])}), register(s) {regs}"
    classes = ([[f"t{int(shown_t[i, j])}" for j in range(show_cols)] for i in range(show_rows)]
               if hover and n_shown <= EXPLICIT_CELLS else None)
    uid = _uid("frag", layout.buffer, shape, show_rows, show_cols, np.ascontiguousarray(colour),
               np.ascontiguousarray(shown_t), np.ascontiguousarray(shown_v))
    f0 = _Frame(show_rows, show_cols, cw, ch)
    marks, caption = _fragment_highlights(f0, dict(highlight or {}), shown_t, shown_v, warp)
    if show_rows < rows or show_cols < cols:
        caption.append(f"showing rows 0-{show_rows - 1}, cols 0-{show_cols - 1} of {rows}x{cols} "
                       f"(max_cells={max_cells}){unit_words}")
    caption.append("colour: warp (two shades, alternating every 4 threads)")
    if classes is not None:
        caption.append("hover a cell: every element of its thread")
    subtitle = _fragment_subtitle(layout, shape, base, threads)
    grid_width = f0.left + show_cols * cw + 12
    caption_width = min(CAPTION_WIDTH, widest_picture,
                        max(_caption_width([subtitle], 11), _caption_width(caption, MIN_FONT)))
    width = min(widest_picture, max(grid_width, min(380.0, widest_picture),
                                    _caption_width([f"{layout.buffer} (fragment)"], 12), caption_width))
    head = _caption_lines([subtitle], width, 11)
    f = dataclasses.replace(f0, top=34.0 + 14 * len(head))
    marks, _ = _fragment_highlights(f, dict(highlight or {}), shown_t, shown_v, warp)
    notes = _caption_lines(caption, width, MIN_FONT)
    height = f.top + show_rows * ch + 10 + 13 * len(notes) + 6
    out = [_svg_open(width, height, f"{layout.buffer} fragment", uid)]
    if classes is not None:
        out.append(_hover_style(uid, "t", sorted(int(v) for v in np.unique(shown_t))))
    out.append(_text(4, 16, f"{layout.buffer} (fragment)", weight="bold"))
    out += [_text(4, 32 + 14 * i, line, size=11, color=MUTED) for i, line in enumerate(head)]
    out.append(_grid(colour, fill_of, cw=cw, ch=ch, x0=f.left, y0=f.top, uid=uid,
                     titles=titles if classes is not None and not labelled else None, cell_labels=labels,
                     classes=classes, label_font=font)[0])
    out += marks
    out.append(_ticks([(f.left - 4, f.top + i * ch + min(ch, 10) * 0.9, i) for i in range(0, show_rows, 8)],
                      anchor="end"))
    y = f.top + show_rows * ch + 18
    out += [_text(4, y + 13 * i, line, size=MIN_FONT, color=TEXT) for i, line in enumerate(notes)]
    return "".join(out) + "</svg>"


def _fragment_unit(absolute: Any, max_cells: int) -> tuple[int, int, str] | None:
    """(rows, cols, words) of one warp's unit of a fragment too large to draw whole.

    The first warp is the warp of element (0, 0). Columns: the fewest from the left that hold
    every thread of that warp (and a thread's next element when it is the column's neighbour).
    Rows: the first warp's rows (those of column 0, from the top),
    or, when that block would pass ``max_cells``, the fewest rows that still hold every thread.
    ``words`` says what the block is and what lies beyond it (for a WGMMA accumulator: 16 rows
    by 8 columns, 4 registers a thread; the next 8 columns hold the same threads' next
    registers). None when no block of at most ``max(max_cells, 64)`` cells holds the warp."""
    rows, cols = absolute.shape
    warp = absolute // WARP_SIZE
    w0 = int(warp[0, 0])
    lanes = {int(t) for t in np.unique(absolute[warp == w0])}
    own_rows = int(np.argmax(warp[:, 0] != w0)) if (warp[:, 0] != w0).any() else rows

    def holds_all(r: int, c: int) -> bool:
        return lanes <= {int(t) for t in np.unique(absolute[:r, :c])}

    unit_cols = next((c for c in range(1, cols + 1) if holds_all(own_rows, c)), None)
    if unit_cols is None:
        return None
    while unit_cols < cols and (absolute[:own_rows, unit_cols] == absolute[:own_rows, unit_cols - 1]).all():
        unit_cols += 1  # a thread's neighbouring elements (a pair of one 8-byte access) stay together
    unit_rows = own_rows
    if unit_rows * unit_cols > max_cells:
        unit_rows = next(r for r in range(1, own_rows + 1) if holds_all(r, unit_cols))
    if unit_rows * unit_cols > max(max_cells, 64) or (unit_rows, unit_cols) == (rows, cols):
        return None
    block = absolute[:unit_rows, :unit_cols]
    each = int(np.count_nonzero(block == int(block[0, 0])))
    total = int(np.count_nonzero(absolute == int(block[0, 0])))
    words = (f": one warp's unit, every one of warp {w0}'s {len(lanes)} threads, {each} of its elements each "
             f"(a thread holds {total} in all)")
    if 2 * unit_cols <= cols and (absolute[:unit_rows, unit_cols:2 * unit_cols] == block).all():
        words += f"; cols {unit_cols}-{2 * unit_cols - 1} hold the same threads' next registers"
    if unit_rows < own_rows:
        words += f"; rows {unit_rows}-{own_rows - 1} are warp {w0}'s too"
    return unit_rows, unit_cols, words


def _fragment_grids(layout: Any) -> tuple[Any, Any]:
    """The fragment's thread and register of each element as 2-D arrays (leading dimensions
    folded into rows; a 1-D fragment is one row)."""
    shape = tuple(layout.shape)
    threads = np.asarray(layout.threads, dtype=np.int64)
    locals_ = np.asarray(layout.locals_, dtype=np.int64) if layout.locals_ else np.zeros_like(threads)
    if len(shape) == 1:
        return threads.reshape(1, -1), locals_.reshape(1, -1)
    threads = threads.reshape(int(np.prod(shape[:-1])), shape[-1])
    return threads, locals_.reshape(threads.shape)


def _fragment_shown(rows: int, cols: int, max_cells: int) -> tuple[int, int]:
    """Rows and columns to draw: the larger side halved (to at least 8) until under ``max_cells``."""
    show_rows, show_cols = rows, cols
    while show_rows * show_cols > max_cells and (show_rows > 8 or show_cols > 8):
        if show_cols >= show_rows and show_cols > 8:
            show_cols = max(8, show_cols // 2)
        else:
            show_rows = max(8, show_rows // 2)
    return show_rows, show_cols


def _fragment_subtitle(layout: Any, shape: tuple, base: int, threads: Any) -> str:
    count = layout.thread_count if layout.thread_count is not None else int(threads.max()) + 1
    sub = (f"{layout.dtype} {' x '.join(str(s) for s in shape)}; threads {base}-{base + int(count) - 1}; "
           f"cell: T<thread> v<register>; colour: warp")
    if layout.replicate > 1:
        sub += f"; each element held by {layout.replicate} threads (replica 0 shown)"
    return sub


def _fragment_highlights(f: _Frame, hl: dict[str, Any], shown_t: Any, shown_v: Any, warp: Any
                         ) -> tuple[list[str], list[str]]:
    """Outlines and caption phrases of a highlighted thread or warp."""
    out, caption = [], []
    if hl.get("thread") is not None:
        t = int(hl["thread"])
        mask = shown_t == t
        for i, j in zip(*np.nonzero(mask)):
            out.append(_outline(f.left + j * f.cw, f.top + i * f.ch, f.cw, f.ch, width=2.0))
        regs = sorted(int(v) for v in shown_v[mask])
        caption.append(f"thread {t}: {int(mask.sum())} element(s), registers {regs[:16]}")
    if hl.get("warp") is not None:
        w = int(hl["warp"])
        mask = warp[:f.show_rows, :f.show_cols] == w
        for i, j in zip(*np.nonzero(mask)):
            out.append(_outline(f.left + j * f.cw, f.top + i * f.ch, f.cw, f.ch, width=1.2))
        caption.append(f"warp {w}: {int(mask.sum())} element(s)")
    return out, caption


# A sanitiser (an untrusted notebook) strips <svg> and leaves its captions and tooltips as loose
# text, thousands of pixels of it: there a picture is folded to one line saying what trusting
# shows. The picture is hidden inline and shown by a style the sanitiser strips along with it.
_TRUSTED_PICTURE_CSS = ("<style>.tl-picbox:has(>style)>.tl-pic-live{display:block!important}"
                        ".tl-picbox:has(>style)>.tl-pic-note{display:none}</style>")


def trusted_picture(markup: str, what: str = "a picture") -> str:
    """``markup`` (SVG, or HTML holding SVG) shown where the output is trusted; elsewhere one line
    saying what trusting the notebook shows."""
    return (f'<div class="tl-picbox">{_TRUSTED_PICTURE_CSS}<div class="tl-pic-live" style="display:none">{markup}'
            f'</div><p class="tl-pic-note" style="margin:2px 0;color:var(--jp-ui-font-color2,#555)">&#9888; '
            f"{_esc(what)} is left out here (the notebook is not trusted, or the viewer strips pictures): trust "
            "the notebook (Trust Notebook in the command palette) to see it.</p></div>")


class Picture(str):
    """An SVG string that notebooks display as the picture (folded to one line where the output
    is sanitised: see :func:`trusted_picture`)."""

    def _repr_html_(self) -> str:
        return trusted_picture(str(self), "this picture")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Its text form (a notebook's text/plain): what it shows, not the SVG markup."""
        label = re.search(r'aria-label="([^"]*)"', self[:4000])
        what = html.unescape(label.group(1)) if label else "SVG"
        printer.text(f"<picture: {what}, {len(self) / 1024:.0f} KB of SVG>")


def draw(layout: Any, *, color_by: str = "chunk") -> Picture:
    """Every element of a report's layout (``report.layout("C_local")``), however large: the
    inspector draws large layouts in part and points here for the rest."""
    total = 1
    for extent in layout.shape:
        total *= int(extent)
    if layout.scope == "fragment":
        return Picture(fragment_svg(layout, max_cells=max(total, 1)))
    return Picture(layout_svg(layout, max_cells=max(total, 1), color_by=color_by))


__all__ = ["HOVER_CSS", "Picture", "compare_svg", "draw", "fragment_svg", "layout_svg", "side_by_side", "tile_svg",
           "trusted_picture", "wgmma_operand_svg"]
