"""The TMA tab: the decoded TMA descriptors, each linked to the lines that ask for it (cell), use
it (device code) and encode it (every launcher), with an excerpt of each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...engine.links import launcher_parts
from ...records.kernel import KernelReport, TmaDescriptor
from ..code import highlight_code
from ..page import (
    TMA_FIELDS,
    Page,
    Tab,
    changed,
    esc,
    make_page,
    none_here,
    part_anchor,
    register,
    span_text,
    table,
    where,
)
from ..textkit import dims, num, text_table, tma_rows

# Lines of a source excerpt shown under the TMA table.
_EXCERPT_LINES = 8

def tma_html(report: KernelReport, *, excerpts: bool = True, page: Page | None = None) -> str:
    """The decoded TMA table, narrow enough to read: one row per descriptor with the fields that
    decide whether it works, and links to the lines that ask for it (cell), use it (CUDA) and
    encode it (every launcher); every other field in a folded table; then one short excerpt per
    descriptor (the first open): the cell line, the device use and one launcher's encode call."""
    if not report.tma_descriptors:
        return none_here(report, "tma", "This kernel encodes no TMA descriptors.")
    page = page or make_page(report)
    rid = page.rid
    headers = ["descriptor", "tensor", "dtype", "global dim", "box dim", "swizzle", "inner box (bytes)",
               "swizzle span (bytes)", "problems", "where"]
    rows, attrs = [], []
    for i, d in enumerate(report.tma_descriptors):
        rows.append(_tma_cells(d, i, rid, page))
        cls = ' class="tl-problem"' if d.problems else ""
        attrs.append(f' id="{rid}-tma-{i}"{cls} data-descriptor="{esc(d.name)}"')
    descriptors = table(headers, rows, row_attrs=attrs, numeric=(6, 7), raw=(0, 3, 4, 5, 6, 7, 8, 9))
    note = ('<p class="tl-muted">Dimensions innermost first, as the driver takes them; '
            "global stride[0] is the element size (TileLang's convention). Sizes in bytes.</p>")
    more = table(["field", *(d.name for d in report.tma_descriptors)],
                 [[label, *(get(d) for d in report.tma_descriptors)] for label, get in TMA_FIELDS])
    extra = f'<details class="tl-sub"><summary>every field</summary>{more}</details>'
    conditions = [f"<li><b>{esc(d.name)}</b>: {esc(c)}</li>"
                  for d in report.tma_descriptors for c in d.launch_conditions]
    if conditions:
        extra += f"<p>Checked at launch:</p><ul>{''.join(conditions)}</ul>"
    if excerpts:
        extra += _tma_excerpts(report, page)
    return note + descriptors + extra


def _excerpt(text: str, language: str, lines: Sequence[int], anchor: str, title: str) -> str:
    """Just the given lines of ``text`` (their own numbers kept; at most ``_EXCERPT_LINES``), each
    run of consecutive lines one block, and a link to the first of them in its tab."""
    if not lines:
        return ""
    chosen = sorted(set(lines))[:_EXCERPT_LINES]
    source = text.split("\n")
    runs: list[list[int]] = []
    for n in chosen:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    code = "".join(highlight_code("\n".join(source[r[0] - 1:r[-1]]), language, anchor_prefix=f"{anchor}-x",
                                  first_line=r[0], colour="comments") for r in runs)
    where = ", ".join(span_text(r[0], r[-1]) for r in runs)
    return f'<div class="tl-excerpt"><a href="#{anchor}-L{chosen[0]}">{esc(title)} {where}</a>{code}</div>'


def _tma_excerpts(report: KernelReport, page: Page) -> str:
    rid = page.rid
    out = ["<p>Where each descriptor comes from (more in the Cell, CUDA and Launcher tabs):</p>"]
    texts = {(item.backend, p): (text, language) for item in report.sources.launchers
             for p, (_, text, language) in enumerate(launcher_parts(item))}
    for i, d in enumerate(report.tma_descriptors):
        parts = []
        if page.source and page.has("cell"):
            parts.append(_excerpt(page.source, "python", page.links.tma_source.get(i, ()), f"{rid}-cell", "cell"))
        if page.has("cuda"):
            parts.append(_excerpt(report.sources.device, "cuda", page.links.tma_device.get(i, ()), f"{rid}-cuda",
                                  "CUDA"))
        sites = page.links.encode.get(i, ())
        if sites and page.has("launcher"):
            s = sites[0]
            text, language = texts[(s.backend, s.part)]
            # the driver call itself, not the argument packing before it
            parts.append(_excerpt(text, language, tuple(range(s.call, s.last + 1)), part_anchor(rid, s.backend, s.part),
                                  f"encoded by {s.backend}"))
        opened = " open" if i == 0 else ""
        out.append(f'<details class="tl-sub"{opened}><summary>{esc(d.name)}</summary>{"".join(parts)}</details>')
    return "".join(out)


def _tma_cells(d: TmaDescriptor, i: int, rid: str, page: Page) -> list[Any]:
    if d.kind == "im2col":
        box = (f"channels/pixel {esc(d.channels_per_pixel)}, pixels/column {esc(d.pixels_per_column)}"
               f"<br>corners {esc(dims(d.lower_corner))} .. {esc(dims(d.upper_corner))}")
    else:
        box = f'<span class="tl-box">{esc(dims(d.box_dim))}</span>'
    problems = ("<ul>" + "".join(f"<li>&#9888; {esc(p)}</li>" for p in d.problems) + "</ul>") if d.problems else "ok"
    name = f'<a href="#{rid}-tma-{i}"><code>{esc(d.name)}</code></a>'
    what = f"TMA {d.name}"
    return [name, d.buffer or "-", d.dtype, changed(page, what, "global dim", esc(dims(d.global_dim))),
            changed(page, what, "box dim", box), changed(page, what, "swizzle", esc(d.swizzle)),
            changed(page, what, "inner box (bytes)", esc(num(d.inner_box_bytes))),
            changed(page, what, "swizzle span (bytes)", esc(num(d.swizzle_span_bytes))), problems,
            where(page, i, "tma")]


def tma_text(report: KernelReport, page: Page) -> str:
    """The descriptors as a table (dimensions innermost first), and what is checked at launch."""
    if not report.tma_descriptors:
        return ""
    lines = ["TMA descriptors (dimensions innermost first; strides in bytes)"]
    lines += text_table(["name", "buffer", "kind", "dtype", "global dim", "global stride", "box dim",
                         "elem strides", "swizzle", "inner box B", "box B", "problems"], tma_rows(report))
    lines += [f"  {d.name}: at launch: {cond}" for d in report.tma_descriptors for cond in d.launch_conditions]
    return "\n".join(lines)


register(Tab("tma", "TMA", 50, lambda r, page: tma_html(r, page=page), tma_text,
             count=lambda r, page: len(r.tma_descriptors) if r.family == "cuda" else None))
