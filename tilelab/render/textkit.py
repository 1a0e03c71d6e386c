"""The words every text rendering of a report uses: dims, sizes, a layout in one sentence, PDL,
and plain-text tables. Below the tabs (:mod:`tilelab.render.tabs`), which write each tab's text
with them, and :mod:`tilelab.render.text`, which puts those texts together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..records.kernel import KernelReport, TmaDescriptor


def dims(values: Sequence[Any] | None) -> str:
    """``(32, 128)`` -> ``"32, 128"``; the form every renderer uses for a dims tuple."""
    if values is None:
        return "-"
    return ", ".join(str(v) for v in values)


def size_text(n: Any) -> str:
    """Bytes as "49152 B (48 KiB)"; symbolic sizes as their expression ("m * 16384 B")."""
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if not isinstance(n, int):
        return f"{n} B" if isinstance(n, (float, str)) else str(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n} B ({n // 1024} KiB)"
    if n >= 1024:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B"


def layout_sentence(layout: Any) -> str:
    """A layout in one plain sentence for a student: its shape and type, where it lives, how it
    is stored (the swizzle tilelab recognises in its offsets) or which threads hold it. The
    compiler's own ``Layout(...)``/``Fragment(...)`` printout stays in ``layout.description``."""
    shape = " x ".join(str(s) for s in layout.shape)
    if layout.scope == "fragment":
        count = layout.thread_count
        base = int(layout.thread_base or 0)
        total = 1
        for extent in layout.shape:
            total *= int(extent)
        text = f"A {shape} {layout.dtype} fragment held in registers"
        if count:
            each = total * max(1, int(layout.replicate)) // int(count)
            text += f" by {count} threads (threads {base}-{base + int(count) - 1}), {each} elements a thread"
        if layout.replicate > 1:
            text += f"; each element is held by {layout.replicate} threads"
        return text + "."
    text = f"A {shape} {layout.dtype} tile in shared memory"
    stages = re.match(r"stage 0 of (\d+) pipeline stages", layout.description or "")
    if stages:
        text += f", one of {stages.group(1)} pipeline stages (the drawing shows stage 0)"
    if layout.offsets and len(layout.shape) == 2:
        from ..swizzle import match_layout

        try:
            tile = match_layout(layout)
        except ValueError:
            tile = None
        if tile is None:
            text += "; its element order is none of the TMA swizzle modes"
        elif tile.mode.is_swizzled:
            text += (f", stored with the {tile.swizzle} swizzle: each row's 16-byte chunks are permuted "
                     "so that reading down a column spreads over the banks")
        elif tile.swizzle == "INTERLEAVE":
            text += ", stored as 8-row x 16-byte core matrices one after another (interleaved, no swizzle)"
        else:
            text += ", stored row after row (no swizzle)"
    return text + "."


def pdl_text(kernel: Any) -> str:
    """Programmatic dependent launch of one DeviceKernel: whether its code waits (T.pdl_sync) and
    which launchers allow it to start early, e.g. "no T.pdl_sync; early start: cython"."""
    sync = "T.pdl_sync" if kernel.programmatic_dependent_launch else "no T.pdl_sync"
    return f"{sync}; early start: {', '.join(kernel.programmatic_serialization_by) or 'none'}"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        out.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return out


def tma_rows(report: KernelReport) -> list[list[Any]]:
    return [_tma_row(d) for d in report.tma_descriptors]


def _tma_row(d: TmaDescriptor) -> list[Any]:
    box = dims(d.box_dim) if d.kind == "tiled" else f"C={d.channels_per_pixel} x P={d.pixels_per_column}"
    return [d.name, d.buffer or "-", d.kind, d.dtype, dims(d.global_dim), dims(d.global_stride_bytes), box,
            dims(d.element_strides), d.swizzle, num(d.inner_box_bytes), num(d.box_bytes),
            "; ".join(d.problems) or "ok"]


def num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


__all__ = ["dims", "layout_sentence", "num", "pdl_text", "size_text", "text_table", "tma_rows"]
