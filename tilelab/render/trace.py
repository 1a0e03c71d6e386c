"""Renderers of a :class:`~tilelab.records.tile_trace.TileTrace` (which block read and wrote what).

Each tensor is drawn as a grid (tensors of rank 3 or more folded to rows x last dimension, large
ones in cells of several elements): a written tensor coloured by the block that wrote each cell,
cells written by two blocks outlined and crossed, cells never written hatched grey; a tensor only
read shaded by how many blocks read each cell. Picking a block (radio buttons and CSS, no
script, so it works in an untrusted notebook and an exported page) shows that block's reads and
writes over every tensor. Out-of-bounds attempts and the problems are listed above the grids.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..records.display import register
from ..records.tile_trace import TileTrace

if TYPE_CHECKING:
    from ..records.tile_trace import TensorTrace

MAX_CELLS = 64  # cells per side at most; larger tensors merge neighbouring elements
DRAW_SIDE = 360  # px, the longer side of a tensor's grid
MAX_PICKABLE = 256  # blocks offered in the picker
MAX_OOB_ROWS = 20
FONT = 11  # px, every label (the SVG is drawn at its natural size, never scaled below it)

READ_COLOUR = "var(--jp-brand-color1,#1976d2)"
WRITE_COLOUR = "var(--jp-warn-color0,#e65100)"
TWICE_COLOUR = "var(--jp-error-color1,#d32f2f)"
NEVER_COLOUR = "var(--jp-layout-color3,#9e9e9e)"
TEXT_COLOUR = "var(--jp-ui-font-color1,#222)"
MUTED_COLOUR = "var(--jp-ui-font-color2,#666)"

_counter = itertools.count()


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def block_colour(index: int) -> str:
    """A colour per block: hues a golden angle apart, so neighbouring blocks differ."""
    return f"hsl({(index * 137.508) % 360:.1f},62%,58%)"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _block_text(block: Sequence[int]) -> str:
    return f"({', '.join(str(b) for b in block)})" if len(block) != 1 else f"{block[0]}"


# ------------------------------------------------------------------------------------------------
# Text
# ------------------------------------------------------------------------------------------------


def tile_trace_text(trace: TileTrace) -> str:
    """The trace in a few lines: grid, tensors (who read and wrote them), problems."""
    blocks = len(trace.blocks)
    lines = [(f"{trace.kernel}: {blocks} block{'s' if blocks != 1 else ''} (grid {tuple(trace.grid)}), "
              f"{trace.accesses} accesses traced on the CPU")]
    for t in trace.tensors:
        readers = sum(1 for r in t.reads if r)
        writers = sum(1 for w in t.writes if w)
        shape = "x".join(str(s) for s in t.shape) or "scalar"
        lines.append(f"  {t.name} ({shape} {t.dtype}): read by {_count(readers, 'block')}, "
                     f"written by {_count(writers, 'block')}")
    problems = trace.problems()
    if trace.out_of_bounds_total > len(trace.out_of_bounds):
        problems.append(f"{trace.out_of_bounds_total} out-of-bounds attempts in all "
                        f"({len(trace.out_of_bounds)} kept with their indices)")
    if problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append("no problems: no element written by two blocks (atomic updates aside), none left unwritten, "
                     "nothing out of bounds")
    lines += [f"note: {n}" for n in trace.notes]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Grids
# ------------------------------------------------------------------------------------------------


def _as_2d(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return math.prod(int(s) for s in shape[:-1]), int(shape[-1])


class _Grid:
    """A tensor folded to 2-D and cut into at most MAX_CELLS x MAX_CELLS cells. ``reach`` extends
    the drawing past the tensor's last row and column (at most doubling them), to show where
    out-of-bounds attempts would have landed."""

    def __init__(self, shape: Sequence[int], reach: tuple[int, int] = (0, 0)) -> None:
        self.rows, self.cols = _as_2d(shape)
        self.vector = len(shape) <= 1
        self.rows_drawn = self.rows + min(max(0, reach[0]), self.rows)
        self.cols_drawn = self.cols + min(max(0, reach[1]), self.cols)
        # Cells of a power of two elements per side, so that cell edges fall on tile edges.
        self.cr = _power_of_two_at_least(math.ceil(self.rows_drawn / MAX_CELLS))
        self.cc = _power_of_two_at_least(math.ceil(self.cols_drawn / MAX_CELLS))
        self.nr = math.ceil(self.rows_drawn / self.cr)
        self.nc = math.ceil(self.cols_drawn / self.cc)
        self.cw = max(4, min(28, DRAW_SIDE // max(self.nr, self.nc)))
        self.ch = max(self.cw, 18) if self.nr == 1 else self.cw  # a vector is a strip tall enough to see
        self.left = 8 + FONT * 3  # room for row labels
        self.top = 6 + FONT + 4  # room for column labels
        self.width = self.left + self.nc * self.cw + 6
        self.height = self.top + self.nr * self.ch + 6

    def inside(self) -> tuple[float, float, float, float]:
        """Pixel (x, y, w, h) of the tensor itself (cells may run past it at the ragged edge)."""
        return (self.left, self.top, self.cols * self.cw / self.cc, self.rows * self.ch / self.cr)

    def cells_at(self, rows: Any, cols: Any) -> Any:
        """The (nr x nc) cells holding any of the (row, col) positions given (inside the drawing)."""
        import numpy as np

        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        keep = (rows >= 0) & (rows < self.nr * self.cr) & (cols >= 0) & (cols < self.nc * self.cc)
        out: np.ndarray = np.zeros((self.nr, self.nc), dtype=bool)
        out[rows[keep] // self.cr, cols[keep] // self.cc] = True
        return out

    def fold(self, values: Any, reduce: str) -> Any:
        """values (rows x cols) -> (nr x nc) by any/max/min/mode over each cell."""
        import numpy as np

        v = np.asarray(values).reshape(self.rows, self.cols)
        pad_r, pad_c = self.nr * self.cr - self.rows, self.nc * self.cc - self.cols
        fill = {"any": False, "max": np.iinfo(np.int64).min, "min": np.iinfo(np.int64).max}.get(reduce, -1)
        if v.dtype == bool:
            fill = False
        padded = np.pad(v, ((0, pad_r), (0, pad_c)), constant_values=fill)
        cells = padded.reshape(self.nr, self.cr, self.nc, self.cc).transpose(0, 2, 1, 3).reshape(
            self.nr, self.nc, self.cr * self.cc)
        if reduce == "any":
            return cells.any(axis=2)
        if reduce == "max":
            return cells.max(axis=2)
        return cells.min(axis=2)

    def cells_of(self, runs: Sequence[int]) -> Any:
        """The (nr x nc) cells holding any element of the runs."""
        import numpy as np

        flat = _run_indices(runs)
        out: np.ndarray = np.zeros(self.nr * self.nc, dtype=bool)
        out[(flat // self.cols // self.cr) * self.nc + (flat % self.cols) // self.cc] = True
        return out.reshape(self.nr, self.nc)

    def rect(self, r0: int, c0: int, r1: int, c1: int) -> tuple[int, int, int, int]:
        """Pixel (x, y, w, h) of cells r0..r1-1 x c0..c1-1."""
        return (self.left + c0 * self.cw, self.top + r0 * self.ch, (c1 - c0) * self.cw, (r1 - r0) * self.ch)

    def span_text(self, r0: int, c0: int, r1: int, c1: int) -> str:
        rows = (r0 * self.cr, min(self.rows_drawn, r1 * self.cr) - 1)
        cols = (c0 * self.cc, min(self.cols_drawn, c1 * self.cc) - 1)

        def span(a: int, b: int) -> str:
            return f"{a}-{b}" if a != b else f"{a}"

        def words(word: str, a: int, b: int) -> str:
            return f"{word}{'s' if a != b else ''} {span(a, b)}"

        if self.vector:
            return words("element", *cols)
        return f"{words('row', *rows)}, {words('col', *cols)}"

    def labels(self) -> str:
        """Element indices along the top and the left, every power-of-two number of cells that
        leaves room for the text (so they fall on tile edges)."""
        out = []
        step_c = _power_of_two_at_least(math.ceil(FONT * 3.2 / self.cw))
        for c in range(0, self.nc, step_c):
            x = self.left + c * self.cw
            out.append(f'<text x="{x}" y="{self.top - 4}" font-size="{FONT}" fill="{MUTED_COLOUR}">'
                       f'{c * self.cc}</text>')
        step_r = _power_of_two_at_least(math.ceil(FONT * 1.3 / self.ch))
        for r in range(0, self.nr, step_r):
            y = self.top + r * self.ch + FONT
            out.append(f'<text x="{self.left - 4}" y="{y}" font-size="{FONT}" text-anchor="end" '
                       f'fill="{MUTED_COLOUR}">{r * self.cr}</text>')
        return "".join(out)


def _power_of_two_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def _rects(cells: Any) -> list[tuple[int, int, int, int, Any]]:
    """Equal neighbouring cells of a 2-D array merged into rectangles (r0, c0, r1, c1, value):
    runs along each row, then the same run in consecutive rows stacked (in NumPy: a map of 64 x 64
    cells per block, for hundreds of blocks)."""
    import numpy as np

    a = np.asarray(cells)
    if a.size == 0:
        return []
    nr, nc = a.shape
    starts = np.ones((nr, nc), dtype=bool)
    starts[:, 1:] = a[:, 1:] != a[:, :-1]
    r, c0 = np.nonzero(starts)
    c1: np.ndarray = np.append(c0[1:], nc)
    c1[np.append(r[1:] != r[:-1], True)] = nc  # a row's last run ends at the edge
    values = a[r, c0].astype(np.int64)
    order = np.lexsort((r, values, c1, c0))
    r, c0, c1, values = r[order], c0[order], c1[order], values[order]
    same_run = (c0[1:] == c0[:-1]) & (c1[1:] == c1[:-1]) & (values[1:] == values[:-1]) & (r[1:] == r[:-1] + 1)
    first = np.flatnonzero(np.append(True, ~same_run))
    last: np.ndarray = np.append(first[1:], len(r)) - 1
    kind = bool if a.dtype == bool else int
    return [(int(r[f]), int(c0[f]), int(r[e]) + 1, int(c1[f]), kind(values[f])) for f, e in zip(first, last)]


def _run_indices(runs: Sequence[int]) -> Any:
    """The flat indices of (start, stop, ...) runs, as one array."""
    import numpy as np

    starts = np.asarray(runs[0::2], dtype=np.int64)
    lengths = np.asarray(runs[1::2], dtype=np.int64) - starts
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    offsets: np.ndarray = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) - offsets + np.repeat(starts, lengths)


def _tensor_svg(trace: TileTrace, t: TensorTrace, pickable: int, hatch: str) -> str:
    """One tensor's grid: the overview and, hidden until a block is picked, each block's layer."""
    import numpy as np

    g, attempts = _grid_for(trace, t)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" class="tl-tt-grid" width="{g.width}" height="{g.height}" '
              f'viewBox="0 0 {g.width} {g.height}" role="img" aria-label="{esc(t.name)}">')]
    frame = g.rect(0, 0, g.nr, g.nc)
    parts.append(f'<rect x="{frame[0]}" y="{frame[1]}" width="{frame[2]}" height="{frame[3]}" '
                 f'fill="var(--jp-layout-color2,#eee)"/>')
    blocks = trace.blocks
    parts.append('<g class="tl-tt-overview">')
    if t.written:
        counts = t.write_counts().reshape(-1)
        writer = t.writer().reshape(-1)
        cell_writer = g.fold(writer, "max")
        twice = g.fold(t.contested().reshape(-1), "any")
        never = g.fold(counts == 0, "any")
        for r0, c0, r1, c1, b in _rects(cell_writer):
            if b < 0:
                continue
            x, y, w, h = g.rect(r0, c0, r1, c1)
            parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{block_colour(int(b))}">'
                         f'<title>{esc(g.span_text(r0, c0, r1, c1))}: written by block '
                         f'{esc(_block_text(blocks[int(b)]))}</title></rect>')
        for r0, c0, r1, c1, flag in _rects(never):
            if not flag:
                continue
            x, y, w, h = g.rect(r0, c0, r1, c1)
            parts.append(f'<rect class="tl-tt-never" x="{x}" y="{y}" width="{w}" height="{h}" '
                         f'fill="url(#{hatch})" stroke="{NEVER_COLOUR}"><title>{esc(g.span_text(r0, c0, r1, c1))}: '
                         f'never written (at least one element)</title></rect>')
        for r0, c0, r1, c1, flag in _rects(twice):
            if not flag:
                continue
            x, y, w, h = g.rect(r0, c0, r1, c1)
            parts.append(f'<g class="tl-tt-twice"><rect x="{x + 1}" y="{y + 1}" width="{w - 2}" height="{h - 2}" '
                         f'fill="none" stroke="{TWICE_COLOUR}" stroke-width="2"/>'
                         f'<path d="M{x + 1} {y + 1}L{x + w - 1} {y + h - 1}M{x + w - 1} {y + 1}L{x + 1} {y + h - 1}" '
                         f'stroke="{TWICE_COLOUR}" stroke-width="1.5"/><title>{esc(g.span_text(r0, c0, r1, c1))}: '
                         f'written by more than one block</title></g>')
    elif t.read:
        readers: Any = np.zeros(t.numel, dtype=np.int64)
        for runs in t.reads:
            for start, stop in zip(runs[0::2], runs[1::2]):
                readers[start:stop] += 1
        cells = g.fold(readers, "max")
        top = max(1, int(cells.max()))
        for r0, c0, r1, c1, n in _rects(cells):
            if n <= 0:
                continue
            x, y, w, h = g.rect(r0, c0, r1, c1)
            opacity = 0.25 + 0.75 * n / top
            parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{READ_COLOUR}" '
                         f'fill-opacity="{opacity:.2f}"><title>{esc(g.span_text(r0, c0, r1, c1))}: read by '
                         f'up to {int(n)} block{"s" if n != 1 else ""}</title></rect>')
    if attempts:
        rows, cols = _positions(t.shape, attempts)
        for r0, c0, r1, c1, flag in _rects(g.cells_at(rows, cols)):
            if flag:
                x, y, w, h = g.rect(r0, c0, r1, c1)
                parts.append(f'<rect class="tl-tt-oob" x="{x}" y="{y}" width="{w}" height="{h}" fill="{TWICE_COLOUR}" '
                             f'fill-opacity="0.3" stroke="{TWICE_COLOUR}" stroke-dasharray="3 2"><title>'
                             f'{esc(g.span_text(r0, c0, r1, c1))}: outside {esc(t.name)} (out-of-bounds attempts, '
                             'not performed)</title></rect>')
    parts.append("</g>")
    ex, ey, ew, eh = g.inside()
    if (g.rows_drawn, g.cols_drawn) != (g.rows, g.cols):
        parts.append(f'<rect class="tl-tt-edge" x="{ex}" y="{ey}" width="{ew:g}" height="{eh:g}" fill="none" '
                     f'stroke="{TEXT_COLOUR}" stroke-width="1.5"><title>the edge of {esc(t.name)} '
                     f'({esc(" x ".join(str(d) for d in t.shape))})</title></rect>')
    for k in range(min(pickable, len(blocks))):
        layer = []
        for runs, colour, verb in ((t.reads[k], READ_COLOUR, "read"), (t.writes[k], WRITE_COLOUR, "wrote")):
            if not runs:
                continue
            cells = g.cells_of(runs)
            for r0, c0, r1, c1, flag in _rects(cells):
                if not flag:
                    continue
                x, y, w, h = g.rect(r0, c0, r1, c1)
                fill = f'fill="{colour}" fill-opacity="0.55"' if verb == "wrote" else \
                    f'fill="{colour}" fill-opacity="0.35"'
                layer.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" {fill} stroke="{colour}" '
                             f'stroke-width="1.5"><title>block {esc(_block_text(blocks[k]))} {verb} '
                             f'{esc(g.span_text(r0, c0, r1, c1))}</title></rect>')
        mine = [o for o in attempts if o.block == blocks[k]]
        if mine:
            rows, cols = _positions(t.shape, mine)
            for r0, c0, r1, c1, flag in _rects(g.cells_at(rows, cols)):
                if flag:
                    x, y, w, h = g.rect(r0, c0, r1, c1)
                    layer.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{TWICE_COLOUR}" '
                                 f'fill-opacity="0.55" stroke="{TWICE_COLOUR}" stroke-width="1.5"><title>block '
                                 f'{esc(_block_text(blocks[k]))} reached {esc(g.span_text(r0, c0, r1, c1))}, '
                                 f'outside {esc(t.name)}</title></rect>')
        if layer:
            parts.append(f'<g class="tl-tt-layer tl-tt-v{k}">{"".join(layer)}</g>')
    parts.append(g.labels())
    parts.append("</svg>")
    return "".join(parts)


def _grid_for(trace: TileTrace, t: TensorTrace) -> tuple[_Grid, list[Any]]:
    """A tensor's grid, reaching as far past its edge as its out-of-bounds attempts (drawn only for
    1-D and 2-D tensors indexed per dimension), and those attempts."""
    attempts = [o for o in trace.out_of_bounds_of(t.name) if len(o.index) == len(t.shape) and 1 <= len(t.shape) <= 2]
    return _Grid(t.shape, _reach(t.shape, attempts)), attempts


def _positions(shape: Sequence[int], attempts: Sequence[Any]) -> tuple[list[int], list[int]]:
    """(rows, cols) of out-of-bounds attempts on a 1-D or 2-D tensor (a vector is one row)."""
    if len(shape) == 1:
        return [0] * len(attempts), [o.index[0] for o in attempts]
    return [o.index[0] for o in attempts], [o.index[1] for o in attempts]


def _reach(shape: Sequence[int], attempts: Sequence[Any]) -> tuple[int, int]:
    """How many rows and columns past the tensor the attempts reach (the drawing shows them)."""
    if not attempts:
        return 0, 0
    rows, cols = _positions(shape, attempts)
    last_row, last_col = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
    return max(0, max(rows) + 1 - last_row), max(0, max(cols) + 1 - last_col)


def _hatch_defs(hatch: str) -> str:
    return (f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="var(--jp-layout-color2,#eee)"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="{NEVER_COLOUR}" stroke-width="3"/></pattern></defs>')


def tile_trace_svg(trace: TileTrace, name: str) -> str:
    """One tensor's grid as a standalone SVG (the overview: who wrote what, or who read it)."""
    hatch = f"tl-tt-{next(_counter)}-hatch"
    svg = _tensor_svg(trace, trace.tensor(name), 0, hatch)
    head_end = svg.index(">") + 1
    return svg[:head_end] + _hatch_defs(hatch) + svg[head_end:]


# ------------------------------------------------------------------------------------------------
# HTML
# ------------------------------------------------------------------------------------------------


def _css(rid: str, pickable: int) -> str:
    shown = ",".join(f"#{rid}-b{k}:checked~.tl-tt-body .tl-tt-v{k}" for k in range(pickable))
    dim = ",".join(f"#{rid}-b{k}:checked~.tl-tt-body .tl-tt-overview" for k in range(pickable))
    picked = ",".join(f'#{rid}-b{k}:checked~.tl-tt-picker label[for="{rid}-b{k}"]' for k in range(pickable))
    css = [
        f"#{rid}{{font-size:13px;color:{TEXT_COLOUR};max-width:100%}}",
        f"#{rid} .tl-tt-radio{{position:absolute;opacity:0;width:1px;height:1px;margin:0;pointer-events:none}}",
        f"#{rid} .tl-tt-layer{{display:none}}",
        f"#{rid} .tl-tt-grid{{max-width:100%;height:auto}}",
        f"#{rid} .tl-tt-body{{display:flex;flex-wrap:wrap;gap:12px}}",
        f"#{rid} figure{{margin:0}}",
        f"#{rid} figcaption{{font-weight:600;margin-bottom:2px}}",
        f"#{rid} .tl-tt-picker{{display:grid;gap:2px;margin:6px 0;max-width:100%;overflow-x:auto}}",
        (f"#{rid} .tl-tt-picker label{{font-size:11px;padding:1px 3px;border:1px solid "
         f"var(--jp-border-color1,#ccc);cursor:pointer;white-space:nowrap;text-align:center}}"),
        f"#{rid} .tl-tt-key{{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px;vertical-align:middle}}",
        f"#{rid} table{{border-collapse:collapse;font-size:12px}}",
        f"#{rid} td,#{rid} th{{padding:1px 6px;text-align:left;border-bottom:1px solid var(--jp-border-color2,#ddd)}}",
        f"#{rid} .tl-tt-problems li{{color:{TWICE_COLOUR}}}",
    ]
    if pickable:
        css.append(f"{shown}{{display:inline}}")
        css.append(f"{dim}{{opacity:0.25}}")
        css.append(f"{picked}{{outline:2px solid {TEXT_COLOUR};font-weight:700}}")
    return "<style>" + "".join(css) + "</style>"


def _picker(trace: TileTrace, rid: str, pickable: int) -> tuple[str, str]:
    """(radio buttons, their labels laid out as the grid: bx across, by down)."""
    blocks = trace.blocks[:pickable]
    radios = [f'<input type="radio" class="tl-tt-radio" name="{rid}-pick" id="{rid}-none" checked>']
    radios += [f'<input type="radio" class="tl-tt-radio" name="{rid}-pick" id="{rid}-b{k}">'
               for k in range(len(blocks))]
    gx = trace.grid[0] if trace.grid else 1
    cols = min(gx, 32)
    labels = [f'<label for="{rid}-none" style="grid-column:1/-1;text-align:left">all blocks (who wrote what)</label>']
    labels += [f'<label for="{rid}-b{k}" title="block {esc(_block_text(b))}">{esc(_block_text(b))}</label>'
               for k, b in enumerate(blocks)]
    more = (f'<div style="color:{MUTED_COLOUR}">the first {pickable} of {len(trace.blocks)} blocks can be picked</div>'
            if len(trace.blocks) > pickable else "")
    picker = (f'<div class="tl-tt-picker" style="grid-template-columns:repeat({cols},max-content)">'
              f'{"".join(labels)}</div>{more}')
    return "".join(radios), picker


def _oob_table(trace: TileTrace) -> str:
    if not trace.out_of_bounds:
        return ""
    rows = "".join(f"<tr><td>{esc(_block_text(o.block))}</td><td>{esc(o.tensor)}</td><td>{esc(o.verb)}</td>"
                   f"<td>{esc(list(o.index))}</td></tr>" for o in trace.out_of_bounds[:MAX_OOB_ROWS])
    rest = trace.out_of_bounds_total - min(MAX_OOB_ROWS, len(trace.out_of_bounds))
    more = f'<div style="color:{MUTED_COLOUR}">and {rest} more attempts</div>' if rest > 0 else ""
    return (f"<details><summary>{trace.out_of_bounds_total} out-of-bounds attempt"
            f"{'s' if trace.out_of_bounds_total != 1 else ''} (not performed: reads gave 0, writes were dropped)"
            f"</summary><table><tr><th>block</th><th>tensor</th><th>access</th><th>index</th></tr>{rows}</table>"
            f"{more}</details>")


def tile_trace_html(trace: TileTrace) -> str:
    """The trace as static HTML and SVG: problems, out-of-bounds attempts, a block picker and one
    grid per tensor."""
    rid = f"tl-tt-{next(_counter)}"
    pickable = min(MAX_PICKABLE, len(trace.blocks))
    radios, picker = _picker(trace, rid, pickable)
    problems = trace.problems()
    if problems:
        listed = "".join(f"<li>{esc(p)}</li>" for p in problems)
        verdict = f'<ul class="tl-tt-problems">{listed}</ul>'
    else:
        verdict = ("<div>no problems: no element written by two blocks (atomic updates aside), none left "
                   "unwritten, nothing out of bounds</div>")
    notes = "".join(f'<div style="color:{MUTED_COLOUR}">note: {esc(n)}</div>' for n in trace.notes)
    figures = []
    for t in trace.tensors:
        shape = " x ".join(str(s) for s in t.shape)
        g, _ = _grid_for(trace, t)
        scale = f", cells of {g.cr}x{g.cc} elements" if g.cr * g.cc > 1 else ""
        folded = " (leading dimensions folded into rows)" if len(t.shape) > 2 else ""
        role = "written" if t.written else ("read" if t.read else "not touched")
        figures.append(f"<figure><figcaption>{esc(t.name)} <span style=\"font-weight:400;color:{MUTED_COLOUR}\">"
                       f"{esc(shape)} {esc(t.dtype)}, {role}{esc(scale)}{esc(folded)}</span></figcaption>"
                       f"{_tensor_svg(trace, t, pickable, f'{rid}-hatch')}</figure>")
    key = (f'<div><span class="tl-tt-key" style="background:{block_colour(0)}"></span>colour: the block that wrote it'
           f'<span class="tl-tt-key" style="border:2px solid {TWICE_COLOUR}"></span>written by two or more blocks'
           f'<span class="tl-tt-key" style="background:{NEVER_COLOUR}"></span>never written'
           f'<span class="tl-tt-key" style="background:{READ_COLOUR};opacity:.5"></span>read (picked block)'
           f'<span class="tl-tt-key" style="background:{WRITE_COLOUR};opacity:.7"></span>written (picked block)'
           + (f'<span class="tl-tt-key" style="background:{TWICE_COLOUR};opacity:.4;border:1px dashed {TWICE_COLOUR}">'
              '</span>outside the tensor (out-of-bounds attempts)' if trace.out_of_bounds else "") + '</div>')
    head = (f"<div><b>{esc(trace.kernel)}</b>: {len(trace.blocks)} blocks, grid {esc(tuple(trace.grid))}, "
            f"{trace.accesses} accesses traced on the CPU</div>")
    return (f'<div class="tilelab-trace" id="{rid}">{_css(rid, pickable)}'
            '<svg width="0" height="0" style="position:absolute" aria-hidden="true">'
            f'{_hatch_defs(rid + "-hatch")}</svg>'
            f'{head}{verdict}{_oob_table(trace)}'
            f"{notes}{radios}{picker}{key}<div class=\"tl-tt-body\">{''.join(figures)}</div></div>")


register(TileTrace, {"text/plain": tile_trace_text, "text/html": tile_trace_html})
