"""Renderers of a :class:`~tilelab.records.launch.TileMap` (which tiles of an output are wrong)."""

from __future__ import annotations

import html

from ..records.display import register
from ..records.launch import TileMap

GLYPHS = {"right": ".", "wrong": "X", "unwritten": "o", "partial": "/"}
COLOURS = {"right": "var(--jp-success-color2,#8c8)", "wrong": "var(--jp-error-color1,#d33)",
           "unwritten": "var(--jp-layout-color3,#999)", "partial": "var(--jp-warn-color1,#e90)"}
LEGEND = {"right": "right", "wrong": "some element wrong", "unwritten": "never written",
          "partial": "partly unwritten"}


def _headline(m: TileMap) -> str:
    counts = ", ".join(f"{m.count(s)} {s}" for s in ("wrong", "unwritten", "partial", "right") if m.count(s))
    rows, cols = len(m.cells), len(m.cells[0]) if m.cells else 0
    merged = " (neighbouring tiles merged)" if m.merged else ""
    src = f"; tile from {m.source}" if m.source else ""
    return (f"{m.output} by tile of {m.tile[0]}x{m.tile[1]} elements{merged}: {rows}x{cols} tiles, {counts}{src}")


def tile_map_text(m: TileMap) -> str:
    """The map as text: one character per tile (. right, X wrong, o unwritten, / partly unwritten)."""
    lines = [_headline(m)]
    lines += ["  " + "".join(GLYPHS.get(c, "?") for c in row) for row in m.cells]
    lines.append("  " + ", ".join(f"{g} {LEGEND[s]}" for s, g in GLYPHS.items()))
    return "\n".join(lines)


def tile_map_html(m: TileMap) -> str:
    """The map as an HTML grid of coloured cells, each titled with its tile and element range."""
    cell = 10 if max(len(m.cells), len(m.cells[0]) if m.cells else 0) > 32 else 14
    tr, tc = m.tile
    rows = []
    for i, row in enumerate(m.cells):
        tds = "".join(
            f'<td title="tile ({i}, {j}): rows {i * tr}..{(i + 1) * tr - 1}, cols {j * tc}..{(j + 1) * tc - 1}: '
            f'{html.escape(LEGEND.get(c, c))}" style="width:{cell}px;height:{cell}px;padding:0;'
            f'background:{COLOURS.get(c, "#fff")};border:1px solid var(--jp-layout-color0,#fff)"></td>'
            for j, c in enumerate(row))
        rows.append(f"<tr>{tds}</tr>")
    legend = " ".join(f'<span style="display:inline-block;width:10px;height:10px;background:{COLOURS[s]}"></span> '
                      f"{html.escape(LEGEND[s])}" for s in GLYPHS)
    return (f'<div class="tilelab-tilemap"><div>{html.escape(_headline(m))}</div>'
            f'<table style="border-collapse:collapse">{"".join(rows)}</table><div>{legend}</div></div>')


register(TileMap, {"text/plain": tile_map_text, "text/html": tile_map_html})
