"""``render_html(report) -> str``: the whole inspector as one static HTML page.

The inspector is a row of tabs over panels made of radio buttons, labels and CSS (no widget
model), so the same markup is the live inspector in JupyterLab, a saved notebook reopened without
its kernel, and an ``nbconvert`` export (every tab works offline). Each panel is a ``<details>``
titled by its ``<summary>``: where the stylesheet is stripped (an untrusted notebook, whose
sanitiser keeps inline styles and ``<details>`` but drops ``<style>``, scripts, SVG and ids) the
page reads as folded, titled sections under one line saying what trusting adds, and what needs the
stylesheet (radios, the tab row, pictures) is hidden inline and shown by the stylesheet. One small
click handler on the root makes in-page links cross tabs (it selects the tab holding the link's
target, unfolds it and scrolls it into view; JupyterLab handles in-page links itself and never sets
``:target``) and opens folded launcher gaps and pictures, which travel gzip-compressed. Every fact
links to the lines that say it: a TMA row to the cell line that asked for the copy, the device CUDA
lines that use the descriptor and every launcher's encode call; those lines link back (see
:mod:`tilelab._links`, which finds them).

The page stays light at any kernel size: only lines something links to carry an id, line numbers
are CSS counters, launchers open at their launch and encode calls with the rest folded, layouts are
drawn cropped to a readable part (the caption says how to draw all of it), and repeated layouts are
drawn once.

A new tab is one function registered in one place: :func:`register_section`. Every string that
comes from user code or the compiler goes through ``html.escape``. Styles are scoped under
``.tilelab-report`` and read JupyterLab's CSS variables with fallbacks, so the report follows the
light and the dark theme and stays readable outside Jupyter.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import inspect as _pyinspect
import re
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from .._links import (
    ReportLinks,
    cell_heat,
    device_anchor_lines,
    heat_elsewhere,
    encode_spans,
    heat_shares,
    launch_lines,
    launcher_parts,
    report_links,
    thread_note,
    wgmma_shape_note,
)
from .._model import KernelReport, Layout, TmaDescriptor
from .._verdicts import (
    OperandUse,
    layout_checks,
    layout_elements,
    layout_repeats,
    lds_conflicted,
    lds_phases,
    operand_uses,
    operand_verdict,
    worst_lds_conflict,
)
from ..cuda_facts import (
    CDNA_LDS_BANK_BYTES,
    CDNA_LDS_BANKS,
    CDNA_WAVEFRONT_LANES,
    CHUNKS_PER_LINE,
    SHARED_MEMORY_BANK_BYTES,
    SWIZZLE_CHUNK_BYTES,
    SWIZZLE_REPEAT_BYTES,
    WGMMA_M,
)
from . import machine
from ._ids import report_id
from .code import STYLE_CSS as CODE_CSS
from .code import LineMark, heat_list, highlight_code
from .text import dims, pdl_text, size_text
from .svg import legible

# The device-code tab is named after the language the target's code is written in.
_DEVICE_TITLES = {"cuda": "CUDA", "hip": "HIP", "metal": "Metal", "cpu": "C"}
# A fallback table of a layout lists every element; past this many, only the description is shown.
_LAYOUT_TABLE_LIMIT = 4096
# Cells drawn per layout picture on the page (the caption says how to draw the rest).
_PAGE_SHARED_CELLS = 512
_PAGE_BANK_CELLS = 256
_PAGE_FRAGMENT_CELLS = 64
# Layouts listed on the page with a picture; past this many, the rest are listed in a table.
_PAGE_LAYOUTS = 12
# A launcher other than the first (open) one, past this many lines, is drawn from its interesting
# lines: its head, the lines that launch a kernel or encode a TMA descriptor, and those around them.
_PART_LINES = 100
_PART_HEAD = 0
_PART_CONTEXT = 2
_INTERESTING = re.compile(r"Launch|launch\(|FuncSetAttribute|func_set_attribute|"
                          r"set_max_dynamic_shared|cluster|Cluster")
# Device code longer than this is coloured for its comments only (syntax colouring costs ~5 us a character).
_FULL_COLOUR_CHARS = 20_000
# Inline styles survive a sanitiser that strips <style> (JupyterLab's keeps style attributes):
# parts that only work with the stylesheet are hidden inline, and the stylesheet shows them.
TRUSTED_ONLY = ' style="display:none"'
# ... and a wide table scrolls inside its own box there too
SCROLLS = ' style="overflow-x:auto"'
# Lines of a source excerpt shown under the TMA table.
_EXCERPT_LINES = 8

ROOT_CSS = """
.tilelab-report{color-scheme:light dark;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222);
 font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:var(--jp-ui-font-size1,13px);
 padding:4px 6px;line-height:1.45;max-width:100%;box-sizing:border-box;overflow-wrap:anywhere}
.tilelab-report a{color:var(--jp-content-link-color,#1565c0)}
.tilelab-report details{margin:4px 0}
.tilelab-report .tl-scroll{overflow-x:auto;max-width:100%}
.tilelab-report .tl-tabs{display:flex;flex-wrap:wrap;gap:2px;border-bottom:1px solid var(--jp-border-color1,#bbb);
 margin:2px 0 6px}
.tilelab-report .tl-tabs label{padding:3px 10px;cursor:pointer;color:var(--jp-ui-font-color1,#222);
 border:1px solid transparent;border-bottom:none;border-radius:3px 3px 0 0;white-space:nowrap}
.tilelab-report .tl-tabs label:hover{background:var(--jp-layout-color2,#eee)}
.tilelab-report .tl-radio{position:absolute;opacity:0;width:1px;height:1px;margin:0;pointer-events:none}
.tilelab-report .tl-panel{scroll-margin-top:3em}
.tilelab-report .tl-ptitle{font-size:var(--jp-ui-font-size2,15px);margin:8px 0 4px}
.tilelab-report details.tl-sub>summary{cursor:pointer;font-family:var(--jp-code-font-family,monospace)}
.tilelab-report .tl-head{font-weight:600;font-size:var(--jp-ui-font-size2,15px);margin-bottom:2px}
.tilelab-report table.tl-table{border-collapse:collapse;margin:4px 0;font-size:var(--jp-ui-font-size1,13px)}
.tilelab-report table.tl-table th,.tilelab-report table.tl-table td{border:1px solid var(--jp-border-color2,#ddd);
 padding:2px 6px;text-align:left;vertical-align:top;color:var(--jp-ui-font-color1,#222);overflow-wrap:normal}
.tilelab-report table.tl-table th{background:var(--jp-layout-color2,#f0f0f0);font-weight:600}
.tilelab-report table.tl-table td.tl-num{text-align:right;font-variant-numeric:tabular-nums}
.tilelab-report code{font-family:var(--jp-code-font-family,monospace)}
.tilelab-report tr.tl-problem td,.tilelab-report .tl-problems li{background:rgba(229,57,53,.16)}
.tilelab-report tr.tl-problem td:first-child,.tilelab-report .tl-problems li{box-shadow:inset 3px 0 0 var(--jp-error-color1,#d32f2f)}
.tilelab-report tr:target td{outline:2px solid var(--jp-brand-color1,#1976d2)}
.tilelab-report tr{scroll-margin:3em 0}
.tilelab-report .tl-ok{color:var(--jp-success-color1,#2e7d32)}
.tilelab-report .tl-muted{color:var(--jp-ui-font-color2,#555)}
.tilelab-report .tl-absent{color:var(--jp-warn-color0,#8a5300)}
.tilelab-report .tl-where a{white-space:nowrap}
.tilelab-report .tl-legend{margin:2px 0;font-size:var(--jp-ui-font-size1,13px)}
.tilelab-report .tl-zoom{margin:0 4px 0 0;vertical-align:middle}
.tilelab-report .tl-zoom-label{cursor:pointer;font-size:var(--jp-ui-font-size1,13px)}
.tilelab-report .tl-zoom:checked~.tl-picture svg{zoom:2}
.tilelab-report .tl-zoom:checked~.tl-scroll>svg{zoom:2;max-width:none!important}
.tilelab-report .tl-layout-table td{font-family:var(--jp-code-font-family,monospace);font-size:11px;padding:0 3px}
.tilelab-report .tl-diff .gi{background:rgba(46,160,67,.18)}
.tilelab-report .tl-diff .gd{background:rgba(229,57,53,.16)}
.tilelab-report .tl-panel{display:none}
.tilelab-report .tl-hit{outline:2px solid var(--jp-brand-color1,#1976d2);outline-offset:-2px}
.tilelab-report .tl-tabs.tl-t{display:flex!important}
.tilelab-report .tl-radio.tl-t{display:inline-block!important}
.tilelab-report div.tl-t{display:block!important}
.tilelab-report span.tl-t{display:inline!important}
.tilelab-report .tl-untrusted{display:none}
.tilelab-report details.tl-fold::details-content{content-visibility:visible;display:contents}
.tilelab-report details.tl-fold>summary{list-style:none;pointer-events:none;margin:8px 0 4px}
.tilelab-report details.tl-fold>summary::-webkit-details-marker{display:none}
.tilelab-report .tl-picture svg,.tilelab-report .tl-zoomable svg{max-width:100%;height:auto}
.tilelab-report .tl-zoom:checked~.tl-picture svg,.tilelab-report .tl-zoom:checked~.tl-zoomable svg{max-width:none;zoom:2}
.tilelab-report details.tl-gap>summary{cursor:pointer;color:var(--jp-ui-font-color2,#555)}
.tilelab-report tr.tl-slow td:first-child{box-shadow:inset 3px 0 0 var(--jp-warn-color1,#f57c00)}
.tilelab-report .tl-diff-cell{background:rgba(255,179,0,.28)}
.tilelab-report .tl-diff-cell del{color:var(--jp-ui-font-color2,#555)}
.tilelab-report .tl-diff-note{border-left:3px solid var(--jp-brand-color1,#1976d2);padding-left:6px}
"""


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def esc(value: Any) -> str:
    """Escape anything for element content and quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)




def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, row_attrs: Sequence[str] | None = None,
           numeric: Sequence[int] = (), raw: Sequence[int] = (), css: str = "tl-table") -> str:
    """A table in its own horizontal scroller; cells are escaped except the columns in ``raw``."""
    out = [f'<div class="tl-scroll"{SCROLLS}><table class="{css}"><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for n, row in enumerate(rows):
        attrs = row_attrs[n] if row_attrs else ""
        out.append(f"<tr{attrs}>")
        for i, cell in enumerate(row):
            body = cell if i in raw else esc(cell)
            cls = ' class="tl-num"' if i in numeric else ""
            out.append(f"<td{cls}>{body}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _lines(text: str) -> int:
    return text.count("\n") + 1


def _part_anchor(rid: str, backend: str, part_index: int) -> str:
    return f"{rid}-src-{re.sub(r'[^A-Za-z0-9_]', '_', backend)}-{part_index}"


def _span_text(first: int, last: int) -> str:
    return f"L{first}" if first == last else f"L{first}&ndash;{last}"


# --------------------------------------------------------------------------------------------
# The page: what every section may link to
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """What a section needs beyond its report: the anchor prefix, the line links, the user's
    source text (the cell) when known, and which panels are on the page (links go only there)."""

    rid: str
    links: ReportLinks
    source: str | None = None
    panels: frozenset[str] = field(default_factory=frozenset)
    heat: tuple[tuple[int, float], ...] = ()  # a profile's (device-CUDA line, warp-stall samples)
    cuda_anchors: frozenset[int] = frozenset()  # device lines other tabs (a sanitizer report) link to
    previous: KernelReport | None = None  # the previous run of the same cell: changed values are highlighted
    changes: tuple[tuple[str, str, str, str], ...] = ()  # report_changes(previous, report)
    launched: tuple[Any, ...] = ()  # the cell's --run/--bench results: their verdict and median in the Summary

    def has(self, panel: str) -> bool:
        return panel in self.panels




def make_page(report: KernelReport, source: str | None = None, panels: Iterable[str] | None = None,
              profile: Any = None, cuda_anchors: Iterable[int] = (), previous: KernelReport | None = None,
              launched: Sequence[Any] = ()) -> Page:
    chosen = frozenset(panels) if panels is not None else frozenset(default_sections(report, source is not None))
    heat = tuple(getattr(profile, "hot_device_lines", ()) or ())
    changes = tuple(report_changes(previous, report)) if previous is not None else ()
    return Page(report_id(report), report_links(report, source), source, chosen, heat, frozenset(cuda_anchors),
                previous, changes, tuple(launched))


# The fields of each record the Diff compares, in the words of the report's tables.
_KERNEL_FIELDS = (("grid", lambda k: dims(k.grid)), ("block", lambda k: dims(k.block)),
                  ("dynamic shared memory", lambda k: size_text(k.dynamic_shared_memory_bytes)),
                  ("cluster", lambda k: dims(k.cluster_dims) if k.cluster_dims else "-"))
_TMA_MAIN = (("tensor", lambda d: d.buffer or "-"), ("dtype", lambda d: d.dtype), ("global dim", lambda d: dims(d.global_dim)),
             ("box dim", lambda d: dims(d.box_dim)), ("swizzle", lambda d: d.swizzle),
             ("inner box (bytes)", lambda d: _num(d.inner_box_bytes)),
             ("swizzle span (bytes)", lambda d: _num(d.swizzle_span_bytes)))
_WGMMA_FIELDS = (("instruction", lambda w: w.instruction), ("variant", lambda w: w.variant),
                 ("A dtype", lambda w: w.a_dtype), ("B dtype", lambda w: w.b_dtype), ("accum", lambda w: w.accum_dtype),
                 ("A major", lambda w: w.a_major), ("B major", lambda w: w.b_major), ("call sites", lambda w: w.count))


def report_changes(before: KernelReport, after: KernelReport) -> list[tuple[str, str, str, str]]:
    """(what, field, before, after) for every value of the report's tables that differs between
    two runs: launch configuration, TMA descriptors (by name), WGMMA forms (by position),
    layouts and arguments (by buffer), problems. Cache keys and versions are not compared."""
    out: list[tuple[str, str, str, str]] = []

    def compare(what: str, old: Any, new: Any, fields: Sequence[tuple[str, Callable[[Any], Any]]]) -> None:
        for label, get in fields:
            a, b = ("-" if old is None else str(get(old))), ("-" if new is None else str(get(new)))
            if a != b:
                out.append((what, label, a, b))

    def by(items: Sequence[Any], key: Callable[[Any], str]) -> dict[str, Any]:
        return {key(x): x for x in items}

    for label, old, new, fields in (
            *[(f"kernel {n}", k, by(after.kernels, lambda x: x.name).get(n), _KERNEL_FIELDS)
              for n, k in by(before.kernels, lambda x: x.name).items()],
            *[(f"kernel {n}", None, k, _KERNEL_FIELDS) for n, k in by(after.kernels, lambda x: x.name).items()
              if n not in {x.name for x in before.kernels}],
            *[(f"TMA {n}", d, by(after.tma_descriptors, lambda x: x.name).get(n), _TMA_MAIN + _TMA_FIELDS)
              for n, d in by(before.tma_descriptors, lambda x: x.name).items()],
            *[(f"TMA {n}", None, d, _TMA_MAIN + _TMA_FIELDS) for n, d in by(after.tma_descriptors, lambda x: x.name).items()
              if n not in {x.name for x in before.tma_descriptors}],
            *[(f"WGMMA {i}", w, after.wgmma[i] if i < len(after.wgmma) else None, _WGMMA_FIELDS)
              for i, w in enumerate(before.wgmma)],
            *[(f"WGMMA {i}", None, w, _WGMMA_FIELDS) for i, w in enumerate(after.wgmma) if i >= len(before.wgmma)],
            *[(f"layout {n}", lay, by(after.layouts, lambda x: x.buffer).get(n),
               (("scope", lambda x: x.scope), ("dtype", lambda x: x.dtype), ("shape", lambda x: dims(x.shape)),
                ("layout", lambda x: x.description)))
              for n, lay in by(before.layouts, lambda x: x.buffer).items()],
            *[(f"argument {n}", arg, by(after.arguments, lambda x: x.name).get(n),
               (("dtype", lambda x: x.dtype or "-"), ("shape", lambda x: dims(x.shape) if x.shape is not None else "-")))
              for n, arg in by(before.arguments, lambda x: x.name).items()]):
        if old is None or new is None:
            out.append((label, "", "absent" if old is None else "present", "absent" if new is None else "present"))
        else:
            compare(label, old, new, fields)
    for label, old, new in (("launch", before.target, after.target),):
        if old != new:
            out.append((label, "target", old, new))
    gone = [p for p in before.problems if p not in after.problems]
    came = [p for p in after.problems if p not in before.problems]
    if gone or came:
        out.append(("problems", f"{len(before.problems)} -> {len(after.problems)}", "; ".join(gone) or "-",
                    "; ".join(came) or "-"))
    return out


def _changed(page: Page, what: str, field_name: str, value: str) -> str:
    """``value`` (escaped markup), highlighted with its previous value when it changed since the
    previous run of the cell."""
    for w, f, old, _ in page.changes:
        if w == what and f == field_name:
            return f'<span class="tl-diff-cell" title="previous run: {esc(old)}">{value}</span>'
    return value


def tma_links(report: KernelReport) -> dict[int, list[tuple[str, str, str, tuple[int, int]]]]:
    """For each TMA descriptor index: (backend, part name, anchor prefix, (first, last)) links."""
    rid = report_id(report)
    links = report_links(report)
    return {i: [(s.backend, s.part_name, _part_anchor(rid, s.backend, s.part), (s.first, s.last)) for s in sites]
            for i, sites in links.encode.items()}


def _where(page: Page, i: int, kind: str) -> str:
    """Links from a TMA (``kind="tma"``) or WGMMA row to the lines that ask for, use and encode it."""
    rid, out = page.rid, []
    source = (page.links.tma_source if kind == "tma" else page.links.wgmma_source).get(i, ())
    device = (page.links.tma_device if kind == "tma" else page.links.wgmma_device).get(i, ())
    if source and page.has("cell"):
        out.append("cell " + ", ".join(f'<a href="#{rid}-cell-L{n}">L{n}</a>' for n in source))
    if device and page.has("cuda"):
        out.append("CUDA " + ", ".join(f'<a href="#{rid}-cuda-L{n}">L{n}</a>' for n in device))
    if kind == "tma" and page.has("launcher"):
        sites = page.links.encode.get(i, ())
        out.append("encoded: " + (" ".join(
            f'<a href="#{_part_anchor(rid, s.backend, s.part)}-L{s.call}">'
            f'{esc(s.backend if s.part_name == "main" else f"{s.backend} {s.part_name}")} {_span_text(s.first, s.last)}</a>'
            for s in sites) or '<span class="tl-muted">not found</span>'))
    return '<span class="tl-where">' + "<br>".join(out) + "</span>" if out else '<span class="tl-muted">-</span>'


def _back_marks(report: KernelReport, page: Page) -> tuple[dict[int, list[LineMark]], dict[int, list[LineMark]]]:
    """Back links on the CUDA lines and the cell lines: to the TMA and WGMMA rows they concern."""
    device: dict[int, list[LineMark]] = {}
    cell: dict[int, list[LineMark]] = {}
    for kind, items, on_device, on_cell in (
        ("tma", [d.name for d in report.tma_descriptors], page.links.tma_device, page.links.tma_source),
        ("wgmma", [w.instruction for w in report.wgmma], page.links.wgmma_device, page.links.wgmma_source),
    ):
        if not page.has(kind):
            continue
        for i, label in enumerate(items):
            mark = LineMark(f"#{page.rid}-{kind}-{i}", label, f"{'TMA descriptor' if kind == 'tma' else 'WGMMA'} {label}")
            for lines, target in ((on_device.get(i, ()), device), (on_cell.get(i, ()), cell)):
                for n in lines:
                    if mark not in target.setdefault(n, []):
                        target[n].append(mark)
    return device, cell


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _target_record(report: KernelReport) -> Any:
    from ..targets import parse_target

    try:
        return parse_target(report.target)
    except ValueError:
        return None


def summary_html(report: KernelReport, page: Page | None = None) -> str:
    page = page or make_page(report)
    if report.family != "cuda":
        return _other_summary_html(report, page)
    out = []
    sites = sum(w.count for w in report.wgmma)
    facts = [
        ("kernel", report.name), ("target", report.target), ("device kernels", len(report.kernels)),
        ("TMA descriptors", len(report.tma_descriptors)),
        ("WGMMA instructions", f"{sites} call site(s), {len(report.wgmma)} distinct form(s)"),
        ("problems found", len(report.problems)),
    ]
    out.append(_table(["", ""], facts))
    if page.launched:
        from .launch import launch_summary_html

        out.append(launch_summary_html(page.launched))
    if page.changes:
        out.append(_changes_note(page))
    if report.kernels:
        out.append(_table(
            ["device kernel", "grid", "block", "threads / block", "dynamic shared memory", "cluster", "PDL", "cooperative"],
            [[esc(k.name), _changed(page, f"kernel {k.name}", "grid", esc(dims(k.grid))),
              _changed(page, f"kernel {k.name}", "block", esc(dims(k.block))), k.threads_per_block,
              _changed(page, f"kernel {k.name}", "dynamic shared memory", esc(size_text(k.dynamic_shared_memory_bytes))),
              esc(dims(k.cluster_dims) if k.cluster_dims else "-"), esc(pdl_text(k)),
              "yes" if k.cooperative else "no"] for k in report.kernels],
            raw=(0, 1, 2, 4, 5, 6),
        ))
    why = [n for n in [thread_note(report), *(wgmma_shape_note(report, i) for i in range(len(report.wgmma)))] if n]
    if why:
        out.append('<ul class="tl-why">' + "".join(f"<li>{esc(n)}</li>" for n in why) + "</ul>")
    if report.problems:
        out.append('<ul class="tl-problems">' + "".join(f"<li>&#9888; {esc(p)}</li>" for p in report.problems) + "</ul>")
    else:
        out.append('<p class="tl-ok">No problems found in the TMA descriptors.</p>')
    if report.l2_persistence:
        out.append(_table(
            ["L2 window over", "hit ratio", "bytes", "set by", "missing in"],
            [[w.buffer, w.hit_ratio, size_text(w.bytes), ", ".join(w.emitted_by) or "none",
              ", ".join(w.missing_in) or "none"] for w in report.l2_persistence],
            row_attrs=[' class="tl-problem"' if w.missing_in else "" for w in report.l2_persistence],
        ))
    if report.notes:
        out.append('<ul class="tl-notes">' + "".join(_note(n) for n in report.notes) + "</ul>")
    out.append(machine.lowering_html(report, page.rid, page.has("cuda"), page.source, page.has("cell")))
    out.append(machine.resources_html(report, page.rid))
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def _changes_note(page: Page) -> str:
    """The Summary's line saying what changed since the cell's previous run, linking to the Diff tab."""
    shown = "; ".join(f"{w}{' ' + f if f else ''}: {o} &rarr; {n}" if len(o) + len(n) < 60 else f"{w} {f}"
                      for w, f, o, n in ((esc(w), esc(f), esc(o), esc(n)) for w, f, o, n in page.changes[:6]))
    more = f"; and {len(page.changes) - 6} more" if len(page.changes) > 6 else ""
    return (f'<p class="tl-diff-note">Changed since the previous run of this cell: {shown}{more} '
            f'(<a href="#{page.rid}-diff">Diff tab</a>; changed values are highlighted in their tabs).</p>')


def _other_summary_html(report: KernelReport, page: Page) -> str:
    """Summary of a HIP, Metal or CPU report: the launch configuration in the family's words, the
    matrix instructions, and which CUDA-only features do not apply."""
    target = _target_record(report)
    rid = page.rid
    smem = target.shared_memory_name if target else "shared memory"
    facts: list[list[Any]] = [["kernel", report.name],
                              ["target", f"{report.target} ({target.description})" if target else report.target],
                              ["device kernels", len(report.kernels)]]
    if report.family == "hip":
        sites = sum(m.count for m in report.mfma)
        facts.append(["MFMA instructions", f"{sites} call site(s), {len(report.mfma)} distinct form(s)"])
        worst = worst_lds_conflict(report)
        if worst is not None:
            facts.append(["LDS operand reads", f"{len(report.lds_reads)}, worst {worst:g}-way bank conflict (CDNA model)"])
    if target is not None:
        facts.append(["TMA, WGMMA, L2 windows", "do not apply: CUDA features"])
        facts.append(["launch here", "yes, on the CPU" if target.launch == "cpu" else
                      "no: inspect only (tilelab has no launch path for these GPUs)"])
    out = [_table(["", ""], facts)]
    if report.kernels:
        if report.family == "cpu":
            out.append(_table(
                ["function", "grid (outer loops)", "threads"],
                [[k.name, "the tile loops are in the function body (see C)", "none: one CPU thread runs every tile"]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
        else:
            group = "threadgroup" if report.family == "metal" else "block"
            out.append(_table(
                ["device kernel", "grid", group, f"threads / {group}", f"dynamic {smem}"],
                [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes)]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
    if report.notes:
        out.append('<ul class="tl-notes">' + "".join(_note(n) for n in report.notes) + "</ul>")
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def _note(text: str) -> str:
    """A note of the engine: one line; a long one folds after its first clause."""
    if len(text) <= 140:
        return f"<li>{esc(text)}</li>"
    cut = next((i for i in (text.find(", yet "), text.find(" ("), text.find(". ")) if 20 < i < 140), 120)
    return (f'<li><details class="tl-note"><summary>{esc(text[:cut])} &hellip;</summary>{esc(text)}</details></li>')


def cuda_html(report: KernelReport, page: Page | None = None) -> str:
    page = page or make_page(report)
    text = report.sources.device
    target = _target_record(report)
    language = target.source_language if target else "cuda"
    marks, _ = _back_marks(report, page)
    # Links to the Lines, PTX and SASS tabs (toolchain tier), where those are on the page.
    for n, items in machine.cuda_marks(report, page.rid).items():
        for kind, href, label, title in items:
            if page.has(kind):
                marks.setdefault(n, []).append(LineMark(href, label, title))
    if report.family == "cuda":
        what = ("device code, {n} lines; marked lines use a TMA descriptor or issue a WGMMA, or link to the "
                "Python line and SASS they came from and became (&#8617; follows the link)")
    else:
        what = f"{esc(_DEVICE_TITLES.get(report.family, report.family))} device code, {{n}} lines"
    shares = {n: s for n, s in heat_shares(page.heat).items() if 1 <= n <= _lines(text)}
    # pygments takes about 5 us a character: long device code is coloured for its comments only
    colour = "all" if len(text) <= _FULL_COLOUR_CHARS else "comments"
    note = "" if colour == "all" else f" (coloured for comments only: over {_FULL_COLOUR_CHARS:,} characters)"
    return (f'<p class="tl-muted">{what.format(n=_lines(text))}{note}</p>'
            + heat_list(shares, f"{page.rid}-cuda")
            + highlight_code(text, language, anchor_prefix=f"{page.rid}-cuda", marks=marks,
                             anchors=device_anchor_lines(report) | set(page.cuda_anchors), heat=shares,
                             colour=colour))


# The lines of a launcher that launch each device kernel (found in tilelab._links); kept under
# this name, which tilelab has exported from here.
launch_links = launch_lines


def launcher_html(report: KernelReport, backend: str | None = None, *, back_links: bool = True,
                  page: Page | None = None) -> str:
    """One collapsible block per backend (or only ``backend``), with the reason where absent;
    the first is open. Each launcher opens at what it is read for: its kernel launches and TMA
    encode calls (coloured, a few lines around each, and its head); every other run of lines is a
    folded gap that opens in the page (its lines come from the launcher's text, carried
    gzip-compressed on its block) and says how to print the whole launcher. The lines that encode
    a TMA descriptor are highlighted; with ``back_links`` (and a TMA tab on the page) the driver
    call itself links to the descriptor's row, and the rows link to that line."""
    page = page or make_page(report)
    rid = page.rid
    names = [d.name for d in report.tma_descriptors]
    out = []
    first_open = True
    for b in (report.launcher_backends if backend is None else (backend,)):
        item = report.sources.launcher(b)
        if item is None:
            out.append(f'<p class="tl-absent"><b>{esc(b)}</b>: not generated for this report.</p>')
            continue
        if item.text is None:
            out.append(f'<p class="tl-absent"><b>{esc(b)}</b>: absent &mdash; {esc(item.reason or "no reason given")}</p>')
            continue
        for p, (part, text, language) in enumerate(launcher_parts(item)):
            anchor = _part_anchor(rid, b, p)
            marks: dict[int, list[LineMark]] = {}
            anchors: set[int] = set()  # the lines the TMA tab links to: each encode call
            calls: set[int] = set()
            for i, sites in page.links.encode.items():
                for s in sites:
                    if s.backend != b or s.part != p:
                        continue
                    anchors.add(s.call)
                    calls.add(s.call)
                    for line in range(s.call, s.last + 1):
                        marks.setdefault(line, [])
                    if back_links and page.has("tma"):
                        marks[s.call].append(LineMark(f"#{rid}-tma-{i}", names[i], f"TMA descriptor {names[i]}"))
            launches: set[int] = set()
            for line, kernels in launch_lines(report, text).items():
                launches.add(line)
                if page.has("summary"):
                    for i in kernels:
                        name = report.kernels[i].name
                        marks.setdefault(line, []).append(
                            LineMark(f"#{rid}-kernel-{i}", name, f"launches {name}: see its launch configuration"))
            title = esc(b) if part == "main" else f"{esc(b)}: {esc(part)}"
            whole = f"report.sources.launcher({b!r})" + (".text" if part == "main" else f".extra[{p - 1}][1]")
            keep = _interesting_lines(text, marks, [k.name for k in report.kernels], calls | launches)
            code = _long_code(text, language, anchor, marks, whole, keep=keep, anchors=anchors)
            in_part = "; drawn in part: its kernel launches and TMA encodes" if keep is not None else ""
            packed = (' data-z="' + base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode("ascii") + '"'
                      if keep is not None else "")
            opened = " open" if first_open else ""
            first_open = False
            out.append(f'<details class="tl-sub" id="{anchor}"{opened}{packed}><summary>{title} '
                       f'<span class="tl-muted">({esc(language)}, {_lines(text)} lines{in_part})</span></summary>'
                       f"{code}</details>")
    return "".join(out)


def _interesting_lines(text: str, marks: dict[int, list[LineMark]], kernels: Sequence[str],
                       calls: set[int] = frozenset()) -> set[int] | None:
    """The 1-based lines of a long launcher worth drawing: its head, every driver call that
    encodes a TMA descriptor or launches a kernel (``calls``), every marked line, every line that
    launches, names or sizes a kernel, and a few lines around each; None when the launcher is
    short enough to draw whole."""
    lines = text.split("\n")
    if len(lines) <= _PART_LINES:
        return None
    names = re.compile("|".join(re.escape(k) for k in kernels)) if kernels else None
    hits = set(marks) | set(calls) | {n for n, line in enumerate(lines, 1)
                                      if _INTERESTING.search(line) or (names is not None and names.search(line))}
    keep = set(range(1, _PART_HEAD + 1))
    for n in hits:
        keep |= set(range(max(1, n - _PART_CONTEXT), min(len(lines), n + _PART_CONTEXT) + 1))
    for n in range(1, len(lines) + 1):  # a gap of a line or two costs more to announce than to draw
        if n not in keep and (n - 1 in keep or n == 1) and {n + 1, n + 2} & keep:
            keep |= {n, n + 1}
    # mostly interesting (a launcher that is all encodes and launches): drawn whole
    return keep if len(keep & set(range(1, len(lines) + 1))) < 0.7 * len(lines) else None


def _long_code(text: str, language: str, anchor: str, marks: dict[int, list[LineMark]], whole: str,
               keep: set[int] | None = None, anchors: frozenset[int] | set[int] = frozenset()) -> str:
    """A launcher's code, coloured; where ``keep`` names the lines to draw (a long launcher),
    only those are drawn and each run of the others is a folded gap: its summary says which
    lines and how to print them all, and opening it in the page draws them (the page's click
    handler fills its empty ``<pre>`` from the launcher's compressed text)."""
    lines = text.split("\n")
    if keep is None:
        return highlight_code(text, language, anchor_prefix=anchor, marks=marks, anchors=anchors, mark_ids=False)
    out = [f'<p class="tl-muted tl-show-all">Lines left out are folded (&#8942;; they open on a click where the '
           f"notebook is trusted). Show all: <code>print({esc(whole)})</code>, {len(lines)} lines.</p>"]
    keep = {n for n in keep if 1 <= n <= len(lines)} | {n for n in marks if 1 <= n <= len(lines)} | {
        n for n in anchors if 1 <= n <= len(lines)}
    n = 1
    while n <= len(lines):
        end = n
        if n in keep:
            while end + 1 <= len(lines) and end + 1 in keep:
                end += 1
            out.append(highlight_code(text, language, anchor_prefix=anchor, first_line=n, last_line=end,
                                      marks={k: v for k, v in marks.items() if n <= k <= end},
                                      anchors={k for k in anchors if n <= k <= end}, mark_ids=False))
        else:
            while end + 1 <= len(lines) and end + 1 not in keep:
                end += 1
            out.append(f'<details class="tl-gap"><summary>&#8942; lines {n}&ndash;{end}</summary>'
                       f'<pre class="tl-src" data-first="{n}" data-lines="{end - n + 1}"></pre></details>')
        n = end + 1
    return "".join(out)


_TMA_FIELDS = (
    ("kind", lambda d: d.kind), ("kernel", lambda d: d.kernel or "-"), ("rank", lambda d: d.rank),
    ("global stride (bytes)", lambda d: dims(d.global_stride_bytes)),
    ("element strides", lambda d: dims(d.element_strides)), ("interleave", lambda d: d.interleave),
    ("L2 promotion", lambda d: d.l2_promotion), ("OOB fill", lambda d: d.oob_fill),
    ("element size (bytes)", lambda d: _num(d.element_bytes)), ("box elements", lambda d: _num(d.box_elements)),
    ("box size (bytes)", lambda d: _num(d.box_bytes)),
)


def _none_here(report: KernelReport, fact: str, empty: str) -> str:
    """An empty section: why the target cannot have ``fact`` (TMA, WGMMA, MFMA), or ``empty``."""
    target = _target_record(report)
    if target is not None and not getattr(target, fact):
        return f'<p class="tl-muted">{esc(target.not_applicable(fact))}</p>'
    return f'<p class="tl-muted">{esc(empty)}</p>'


def tma_html(report: KernelReport, *, excerpts: bool = True, page: Page | None = None) -> str:
    """The decoded TMA table, narrow enough to read: one row per descriptor with the fields that
    decide whether it works, and links to the lines that ask for it (cell), use it (CUDA) and
    encode it (every launcher); every other field in a folded table; then one short excerpt per
    descriptor (the first open): the cell line, the device use and one launcher's encode call."""
    if not report.tma_descriptors:
        return _none_here(report, "tma", "This kernel encodes no TMA descriptors.")
    page = page or make_page(report)
    rid = page.rid
    headers = ["descriptor", "tensor", "dtype", "global dim", "box dim", "swizzle", "inner box (bytes)",
               "swizzle span (bytes)", "problems", "where"]
    rows, attrs = [], []
    for i, d in enumerate(report.tma_descriptors):
        rows.append(_tma_cells(d, i, rid, page))
        cls = ' class="tl-problem"' if d.problems else ""
        attrs.append(f' id="{rid}-tma-{i}"{cls} data-descriptor="{esc(d.name)}"')
    table = _table(headers, rows, row_attrs=attrs, numeric=(6, 7), raw=(0, 3, 4, 5, 6, 7, 8, 9))
    note = ('<p class="tl-muted">Dimensions innermost first, as the driver takes them; '
            "global stride[0] is the element size (TileLang's convention). Sizes in bytes.</p>")
    more = _table(["field", *(d.name for d in report.tma_descriptors)],
                  [[label, *(get(d) for d in report.tma_descriptors)] for label, get in _TMA_FIELDS])
    extra = f'<details class="tl-sub"><summary>every field</summary>{more}</details>'
    conditions = [f"<li><b>{esc(d.name)}</b>: {esc(c)}</li>" for d in report.tma_descriptors for c in d.launch_conditions]
    if conditions:
        extra += f"<p>Checked at launch:</p><ul>{''.join(conditions)}</ul>"
    if excerpts:
        extra += _tma_excerpts(report, page)
    return note + table + extra


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
    where = ", ".join(_span_text(r[0], r[-1]) for r in runs)
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
            parts.append(_excerpt(report.sources.device, "cuda", page.links.tma_device.get(i, ()), f"{rid}-cuda", "CUDA"))
        sites = page.links.encode.get(i, ())
        if sites and page.has("launcher"):
            s = sites[0]
            text, language = texts[(s.backend, s.part)]
            # the driver call itself, not the argument packing before it
            parts.append(_excerpt(text, language, tuple(range(s.call, s.last + 1)), _part_anchor(rid, s.backend, s.part),
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
    return [name, d.buffer or "-", d.dtype, _changed(page, what, "global dim", esc(dims(d.global_dim))),
            _changed(page, what, "box dim", box), _changed(page, what, "swizzle", esc(d.swizzle)),
            _changed(page, what, "inner box (bytes)", esc(_num(d.inner_box_bytes))),
            _changed(page, what, "swizzle span (bytes)", esc(_num(d.swizzle_span_bytes))), problems, _where(page, i, "tma")]


def wgmma_html(report: KernelReport, page: Page | None = None) -> str:
    if not report.wgmma:
        return _none_here(report, "wgmma", "This kernel issues no WGMMA instructions.")
    page = page or make_page(report)
    rows, attrs = [], []
    for i, w in enumerate(report.wgmma):
        rows.append([w.kernel or "-", w.instruction, w.variant, w.m, w.n, w.k, w.a_dtype, w.b_dtype, w.accum_dtype,
                     w.a_major, w.b_major, w.count, _where(page, i, "wgmma")])
        attrs.append(f' id="{page.rid}-wgmma-{i}"')
    out = [_table(["kernel", "instruction", "variant", "M", "N", "K", "A dtype", "B dtype", "accum", "A major",
                   "B major", "call sites", "where"], rows, numeric=(3, 4, 5, 11), raw=(12,), row_attrs=attrs)]
    why = [n for n in (wgmma_shape_note(report, i) for i in range(len(report.wgmma))) if n]
    if why:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in why) + "</ul>")
    ops = [_operand_row(report, i, role) for i in range(len(report.wgmma)) for role in ("A", "B")]
    out.append("<p>Shared-memory matrix descriptors (LBO/SBO as encoded: byte offsets &gt;&gt; 4). "
               "&ldquo;tilelab&rdquo;: the descriptor tilelab computes from the buffer&rsquo;s inferred layout "
               "(offsets only), compared with the compiler&rsquo;s; the Layouts section draws its core matrices.</p>")
    out.append(_table(["instruction", "operand", "buffer", "layout type", "swizzle", "LBO", "LBO bytes", "SBO",
                       "SBO bytes", "major", "tilelab"], ops, numeric=(3, 5, 6, 7, 8)))
    return "".join(out)


_VERDICT_WORDS = {"agrees": "agrees", "differs": "differs", "unknown": "-"}


def _operand_row(report: KernelReport, index: int, role: str) -> list[Any]:
    """One row of the operand table: the compiler's descriptor and tilelab's verdict on it."""
    v = operand_verdict(report, index, role)
    op = v.operand
    if op is None:
        return [v.instruction, role, "registers", "-", "-", "-", "-", "-", "-", "-", "-"]
    verdict = _VERDICT_WORDS.get(v.verdict, f"n/a: {v.reason[:80]}")
    return [v.instruction, role, op.buffer or "-", op.layout_type, op.swizzle, op.lbo, op.lbo_bytes, op.sbo,
            op.sbo_bytes, op.major, verdict]


def cell_html(report: KernelReport, page: Page | None = None) -> str:
    """The user's source (the cell), its T.copy / T.gemm lines linked to the rows they made."""
    page = page or make_page(report)
    if not page.source:
        return '<p class="tl-muted">No source text was given for this report.</p>'
    _, marks = _back_marks(report, page)
    shares = cell_heat(report, page.source, page.heat)
    return ('<p class="tl-muted">marked lines made a TMA descriptor or a WGMMA (&#8617; goes to its row)</p>'
            + heat_list(shares, f"{page.rid}-cell") + (_heat_elsewhere_html(report, page) if shares else "")
            + highlight_code(page.source, "python", anchor_prefix=f"{page.rid}-cell", marks=marks, heat=shares))


def _heat_elsewhere_html(report: KernelReport, page: Page) -> str:
    """Where the samples the cell's lines do not carry went (TileLang's own macro lines, mostly)."""
    rest, places = heat_elsewhere(report, page.source, page.heat)
    if rest <= 0:
        return ""
    where = ", ".join(f"{esc(label)} {100 * share:.1f}%" for label, share in places)
    return (f'<p class="tl-muted">the other {100 * rest:.1f}% of the samples are on device lines that #line '
            f"traces to TileLang's own code or to no Python line ({where}); TileLang names the innermost "
            "Python line, so code a tile op expands into inside TileLang's macros is counted there, not on "
            "the cell's line (the Lines tab lists every link)</p>")


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
    tilelab's descriptor agrees with the compiler's (:func:`tilelab._verdicts.layout_checks`)."""
    try:
        from .svg import layout_svg, wgmma_operand_svg  # another module draws layouts; optional
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
        out = [f'<p class="tl-legend">{legend}</p>{zoom}', f'<div class="tl-scroll tl-picture">{legible(picture)}</div>']
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
        for use, check in layout_checks(layout, operands):
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
        return f'<p class="tl-absent">Could not draw this layout: {esc(type(err).__name__)}: {esc(err)}</p>' + _layout_table(layout)


def _layout_words(lay: Layout) -> str:
    """The layout in a plain sentence (:func:`tilelab.render.text.layout_sentence`); the
    compiler's own printout in its tooltip."""
    from .text import layout_sentence

    raw = f' title="the compiler&#x27;s description: {esc(lay.description)}"' if lay.description else ""
    return f'<p class="tl-layout-words"{raw}>{esc(layout_sentence(lay))}</p>'


def _repeating_rows(layout: Layout) -> int:
    """Rows worth drawing of a shared tile whose rows of 16-byte chunks repeat: two periods (at
    least 16 rows); 0 (all) when they do not repeat or the tile is no taller than that."""
    from ..swizzle import dtype_bytes

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
            f'<span class="tl-muted">({esc(lay.scope)} {esc(lay.dtype)} [{esc(dims(lay.shape))}]{esc(extra)})</span></summary>'
            f"{_layout_words(lay)}"
            f"{_layout_drawing(lay, operands.get(lay.buffer, ()), f'{rid}-zoom-{len(drawn)}')}</details>"
        )
    if rest:
        out.append(f"<p>{len(rest)} more layout(s), not drawn (repeated or past the first {_PAGE_LAYOUTS}):</p>")
        out.append(_table(["buffer", "scope", "dtype", "shape", "layout"], rest))
    return "".join(out)


def arguments_html(report: KernelReport) -> str:
    rows = []
    for a in report.arguments:
        rows.append([
            a.name, a.kind, a.dtype or "-", dims(a.shape) if a.shape is not None else "-",
            dims(a.strides) if a.strides is not None else "-",
            "yes" if a.passed_at_launch else ("returned (out_idx)" if a.is_output else "no"),
            ", ".join(f"{k} \u2190 {v}" for k, v in a.binds_from) or "-",
            a.value if a.value is not None else "-", a.cache_key or "-",
        ])
    out = [_table(["name", "kind", "dtype", "shape", "strides", "passed at launch", "binds from", "value",
                   "cache key part"], rows)] if rows else ['<p class="tl-muted">No arguments recorded.</p>']
    out.append(f"<p>Cache key: <code>{esc(report.cache_key or '-')}</code></p>")
    if report.pass_configs:
        out.append(_table(["pass config", "value"], list(report.pass_configs)))
    return "".join(out)


def mfma_html(report: KernelReport, page: Page | None = None) -> str:
    """Each MFMA form (intrinsic, shape, types, operands, per-lane layouts) and the LDS reads that
    feed its operands, with their bank conflicts under the CDNA LDS model (tilelab.mfma)."""
    if not report.mfma:
        return _none_here(report, "mfma", "This kernel issues no MFMA instructions.")
    page = page or make_page(report)
    rid = page.rid
    source_lines = report.sources.device.split("\n")

    def at(n: int) -> str:  # a link to the line in the HIP tab; the line itself rides along as a tooltip
        text = source_lines[n - 1].strip() if 0 < n <= len(source_lines) else ""
        if not page.has("cuda"):
            return f'<span title="{esc(text)}">L{n}</span>'
        return f'<a href="#{rid}-cuda-L{n}" title="{esc(text)}">L{n}</a>'

    rows = []
    for m in report.mfma:
        where = ", ".join(at(n) for n in m.lines)
        rows.append([m.kernel or "-", m.intrinsic, m.variant, m.shape, m.a_dtype, m.b_dtype, m.accum_dtype,
                     m.a_operand + (f" \u2190 {m.a_lds}" if m.a_lds else ""),
                     m.b_operand + (f" \u2190 {m.b_lds}" if m.b_lds else ""), m.accumulator, m.count, where])
    out = [_table(["kernel", "intrinsic", "variant", "M\u00d7N\u00d7K", "A dtype", "B dtype", "accum", "A operand (\u2190 LDS)",
                   "B operand (\u2190 LDS)", "accumulator", "call sites", "in HIP"], rows, numeric=(10,), raw=(11,))]
    out.append(f"<p>What each of the {CDNA_WAVEFRONT_LANES} lanes of a wavefront holds (AMD CDNA3 ISA, "
               "MFMA register layouts):</p>")
    lane_rows = []
    for m in report.mfma:
        lane_rows += [[m.shape, f"A ({m.a_operand})", m.a_lanes], [m.shape, f"B ({m.b_operand})", m.b_lanes],
                      [m.shape, f"C/D ({m.accumulator})", m.c_lanes]]
    out.append(_table(["shape", "operand", "per lane"], lane_rows))
    if report.lds_reads:
        banks, width = CDNA_LDS_BANKS, CDNA_LDS_BANK_BYTES
        out.append(f"<p>LDS reads that fill the operand registers, per {CDNA_WAVEFRONT_LANES}-lane wavefront. "
                   f"Model: {banks} banks &times; {width} bytes; a read of W bytes per lane is served "
                   f"{banks * width}/W lanes at a time (W &le; {width}: {banks} lanes); each phase takes as many "
                   f"clocks as the most distinct {width}-byte words one bank delivers. The Layouts section draws "
                   "each LDS buffer&rsquo;s layout; its bank colours hold on CDNA too "
                   f"(the same {banks} banks of {width} bytes).</p>")
        lds_rows = []
        for r in report.lds_reads:
            verdict = f"{r.conflict_degree:g}-way" if lds_conflicted(r) else "conflict-free"
            lds_rows.append([r.buffer, r.destination, f"{r.width_bytes} B", len(r.phase_clocks),
                             " ".join(str(c) for c in r.phase_clocks), r.clocks, verdict,
                             ", ".join(r.loop_variables) or "-", at(r.line)])
        out.append(_table(["LDS buffer", "into", "per lane", "phases", "clocks per phase (worst loop step)",
                           "clocks", "bank conflicts", "loop variables", "in HIP"], lds_rows,
                          row_attrs=[' class="tl-problem"' if lds_conflicted(r) else "" for r in report.lds_reads],
                          numeric=(3, 5), raw=(8,)))
        for r in report.lds_reads:
            out.append(_bank_strip(r))
    return "".join(out)


def _bank_strip(read: Any) -> str:
    """The bank each lane of the first loop step reads first, one row per phase."""
    rows = [[f"lanes {p.first_lane}-{p.last_lane}", p.clocks, " ".join(str(b) for b in p.banks)]
            for p in lds_phases(read)]
    return (f'<details class="tl-sub"><summary>{esc(read.buffer)} &rarr; {esc(read.destination)}: '
            "bank of each lane</summary>" + _table(["phase", "clocks", "first bank per lane"], rows) + "</details>")


def comparison_html(comparison: Any) -> str:
    """A :class:`tilelab.targets.TargetComparison` as one table, a column per target."""
    rows = [[label, *values] for label, values in comparison.rows]
    return wrap(_table(["", *comparison.targets], rows))


# --------------------------------------------------------------------------------------------
# The registry of sections: a new tab is one call to register_section
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One tab: ``body(report)`` or ``body(report, page)`` gives its markup; ``count(report)``
    (optional) is shown in its title, e.g. "TMA (2)"."""

    name: str
    title: str
    body: Callable[..., str]
    count: Callable[[KernelReport], int] | None = None

    def render(self, report: KernelReport, page: Page) -> str:
        if "page" in _pyinspect.signature(self.body).parameters:
            return self.body(report, page=page)
        return self.body(report)


_REGISTRY: dict[str, Section] = {}


def register_section(name: str, title: str, body: Callable[..., str], *,
                     count: Callable[[KernelReport], int] | None = None, after: str | None = None) -> Section:
    """Add (or replace) a tab. ``body`` takes the report, and may take ``page`` (a :class:`Page`:
    anchor prefix, line links, source text). ``after`` places it after that tab, else last."""
    section = Section(name, title, body, count)
    items = [(k, v) for k, v in _REGISTRY.items() if k != name]
    at = next((n + 1 for n, (k, _) in enumerate(items) if k == after), len(items))
    items.insert(at, (name, section))
    _REGISTRY.clear()
    _REGISTRY.update(items)
    return section


def sections() -> tuple[str, ...]:
    """The names of every registered tab, in order."""
    return tuple(_REGISTRY)


def default_sections(report: KernelReport | None = None, with_source: bool = False) -> tuple[str, ...]:
    """The tabs a page shows by default: every registered one with something to show for
    ``report`` (MFMA only for AMD targets, the opt-in Lines/PTX/SASS and IR tabs only when they
    were computed; the Cell tab only with a source)."""
    skip = set() if with_source else {"cell"}
    if report is None or not _timeline.has_timeline(report):
        skip.add("timeline")  # only on a page the magic gave a timeline (render/timeline.py)
    if report is not None:
        if report.family != "hip":
            skip.add("mfma")
        if report.machine is None:
            skip |= {"lines", "ptx", "sass"}
        if report.passes is None:
            skip.add("ir")
    return tuple(n for n in _REGISTRY if n not in skip)


register_section("summary", "Summary", summary_html)
register_section("cell", "Cell", cell_html)
register_section("cuda", "CUDA", cuda_html)
register_section("launcher", "Launcher", launcher_html)
register_section("tma", "TMA", tma_html, count=lambda r: len(r.tma_descriptors))
register_section("wgmma", "WGMMA", wgmma_html, count=lambda r: len(r.wgmma))
register_section("layouts", "Layouts", layouts_html, count=lambda r: len(r.layouts))
register_section("mfma", "MFMA", mfma_html, count=lambda r: len(r.mfma), after="wgmma")
register_section("arguments", "Arguments", arguments_html, count=lambda r: len(r.arguments))
# The opt-in tiers: toolchain (Lines, PTX, SASS; links run both ways with the CUDA tab) and IR passes.
register_section("lines", "Lines",
                 lambda r, page: machine.lines_html(r, page.rid, page.has("cuda") and page.has("sass")))
register_section("ptx", "PTX", lambda r, page: machine.ptx_html(r, page.rid, page.has("cuda")))
register_section("sass", "SASS", lambda r, page: machine.sass_html(r, page.rid, page.has("cuda")))
register_section("ir", "IR passes", lambda r, page: machine.ir_html(r, page.rid))

from . import timeline as _timeline  # noqa: E402  (the Timeline tab, shown where the magic measured one)

register_section("timeline", "Timeline",
                 lambda r, page: _timeline.timeline_section(
                     r, page, set(_back_marks(r, page)[1]) if page.has("cell") and page.source else set()),
                 count=_timeline.timeline_count)

# The built-in tabs (``--show`` names); the Cell tab appears when a source is given.
SECTIONS = tuple(n for n in _REGISTRY if n != "cell")
SECTION_TITLES = {k: v.title for k, v in _REGISTRY.items()}


def section_title(report: KernelReport, name: str) -> str:
    section = _section(name)
    count = section.count(report) if section.count is not None else None
    if name in ("tma", "wgmma") and report.family != "cuda":
        count = None  # "does not apply", not zero
    title = _DEVICE_TITLES.get(report.family, "CUDA") if name == "cuda" else section.title
    return title + (f" ({count})" if count is not None else "")


def _section(name: str) -> Section:
    if name not in _REGISTRY:
        raise ValueError(f"unknown section {name!r}; choose from {', '.join(SECTIONS)}")
    return _REGISTRY[name]


def section_body(report: KernelReport, name: str, page: Page | None = None) -> str:
    """The inner markup of one section (no root wrapper, no stylesheet)."""
    section = _section(name)
    return section.render(report, page or make_page(report))


def wrap(body: str, *, root_id: str | None = None, css: str = "", onclick: str = "") -> str:
    """Wrap markup in the scoped root with the stylesheet, ready to display on its own."""
    rid = f' id="{esc(root_id)}"' if root_id else ""
    click = f' onclick="{esc(onclick)}"' if onclick else ""
    # inline: long names and expressions wrap even where the stylesheet is stripped
    return (f'<div class="tilelab-report"{rid}{click} style="overflow-wrap:break-word"><style>{ROOT_CSS}{CODE_CSS}{css}</style>'
            f"{body}</div>")


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def render_section(report: KernelReport, name: str) -> str:
    """One section alone, styled."""
    return wrap(section_body(report, name))


def _slug(title: str, n: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or f"extra-{n}"


def _tab_css(rid: str, names: Sequence[str]) -> str:
    """Per page: the panel whose radio is checked shows, and its tab looks selected."""
    shown = ",".join(f"#{rid}-t-{n}:checked~.tl-panels>#{rid}-{n}" for n in names)
    active = ",".join(f'#{rid}-t-{n}:checked~.tl-tabs>label[for="{rid}-t-{n}"]' for n in names)
    focus = ",".join(f'#{rid}-t-{n}:focus-visible~.tl-tabs>label[for="{rid}-t-{n}"]' for n in names)
    return (f".tilelab-report {shown.replace(',', ',.tilelab-report ')}{{display:block}}"
            f".tilelab-report {active.replace(',', ',.tilelab-report ')}"
            "{border-color:var(--jp-border-color1,#bbb);background:var(--jp-layout-color1,#fff);font-weight:600;"
            "margin-bottom:-1px}"
            f".tilelab-report {focus.replace(',', ',.tilelab-report ')}{{outline:2px solid var(--jp-brand-color1,#1976d2)}}")


# One click handler on the page's root (it runs where the page is trusted: JupyterLab's trusted
# outputs, an nbconvert export). A click on a tab unfolds its panel (for browsers that cannot show
# a folded <details> by CSS); a click on a folded gap of a launcher draws the lines it hides, from
# the launcher's gzip-compressed text carried on the page; an in-page link selects the tab that
# holds its target (and opens folded blocks around it), then brings the target into view,
# centred. Tabs themselves need no script (radio buttons and CSS), so where scripts do not run
# the tabs still work and a link still lands when its target's tab is open.
_FOLLOW_JS = (
    "var e=event.target,l=e.closest('.tl-tabs label');"
    "if(l){var f=this.querySelector('[data-tab=\"'+l.htmlFor+'\"]>details');if(f)f.open=true;return}"
    "var g=e.closest('details.tl-gap>summary,details.tl-lazy>summary'),z=g&&g.closest('[data-z]');"
    "if(g){var q=g.nextElementSibling;if(z&&q&&!q.firstChild&&window.DecompressionStream)"
    "new Response(new Blob([Uint8Array.from(atob(z.dataset.z),function(c){return c.charCodeAt(0)})]).stream()"
    ".pipeThrough(new DecompressionStream('gzip'))).text().then(function(t){if(q.tagName!='PRE'){q.innerHTML=t;return}"
    "var L=t.split('\\n'),a=+q.dataset.first;q.style.counterReset='tl-ln '+(a-1);for(var i=a;i<a+ +q.dataset.lines;i++){var s=document.createElement('span');"
    "s.textContent=L[i-1]+'\\n';q.appendChild(s)}});return}"
    "var a=e.closest('a[href^=\"#\"]');if(!a||!this.contains(a))return;"
    "var t=this.querySelector('[id=\"'+a.getAttribute('href').slice(1)+'\"]');if(!t)return;"
    "var p=t.closest('.tl-panel');if(p&&p.dataset.tab){var r=document.getElementById(p.dataset.tab);if(r)r.checked=true}"
    "for(var d=t.closest('details');d;d=d.parentElement.closest('details'))d.open=true;"
    "this.querySelectorAll('.tl-hit').forEach(function(e){e.classList.remove('tl-hit')});t.classList.add('tl-hit');"
    "event.preventDefault();requestAnimationFrame(function(){t.scrollIntoView({block:'center',inline:'nearest'})})"
)

# Shown only where the page's stylesheet was stripped (an untrusted notebook in JupyterLab, a
# viewer that sanitises HTML): what the reader sees there and how to get the whole page.
UNTRUSTED_NOTE = (
    "This inspector is shown without its styles and script (the notebook is not trusted, or the "
    "viewer strips them): each section is folded below, the layout pictures are left out, and a link "
    "lands only in a section that is open. Trust the notebook (Trust Notebook in JupyterLab's command "
    "palette, or <code>jupyter trust NOTEBOOK.ipynb</code>), or run the cell again, for tabs, the "
    "pictures and links that open their tab."
)



def page_id(report: KernelReport, sections: Sequence[str] | None = None, source: str | None = None) -> str:
    """The anchor prefix of a page: the report's id, with a suffix for another choice of tabs (two
    cells showing one kernel, one with ``--show``), so that each page's tabs and links stay its own."""
    rid = report_id(report)
    if sections is None or tuple(sections) == default_sections(report, source is not None):
        return rid
    return rid + hashlib.sha1(",".join(sections).encode()).hexdigest()[:4]


def render_html(report: KernelReport, *, standalone: bool = False, sections: Sequence[str] | None = None,
                extra: Sequence[tuple[str, str]] = (), source: str | None = None, profile: Any = None,
                cuda_anchors: Iterable[int] = (), hidden: Sequence[str] | None = None,
                previous: KernelReport | None = None, anchor: str | None = None,
                launched: Sequence[Any] = ()) -> str:
    """The whole report as one static page of tabs; ``standalone`` adds a page title and colours.

    ``sections`` picks and orders the tabs (default: every registered one with something to show).
    The sections it leaves out (``hidden``, default: every other default one) are still on the
    page, without a tab, so that links into them work: a link opens its section. ``source`` is
    the user's source text (the magic passes the cell, its first line the ``%%tilelang`` line): by
    default it adds the Cell tab, and the T.copy / T.gemm lines link to the rows they made and back. ``extra``
    appends (title, markup) tabs after the report's own (the inspector puts Timing and Diff
    there); the markup is inserted as is, the title escaped. ``profile`` (a Profile) draws its hot
    device lines as a heat margin on the CUDA view; ``cuda_anchors`` are device lines that ``extra``
    tabs link to (``{rid}-cuda-L{n}``). ``previous`` (the report of the cell's previous run, whose
    Diff tab ``extra`` carries) highlights the changed values in their own tables and the Summary
    says what changed. ``anchor`` replaces the ids' prefix (default: :func:`report_id`; the
    inspector gives :func:`page_id`, so two pages of one report in a notebook keep their own ids).

    Each panel is a ``<details>`` titled by its ``<summary>``: where the stylesheet is stripped
    (an untrusted notebook) the page reads as folded, titled sections (the Summary open) under one
    line saying what trusting adds; with it, the radios and CSS make them tabs.
    """
    chosen = tuple(sections) if sections is not None else default_sections(report, source is not None)
    unknown = [s for s in chosen if s not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    if hidden is None:
        hidden = () if sections is None else tuple(
            n for n in default_sections(report, source is not None) if n not in chosen)
    hidden = tuple(n for n in hidden if n in _REGISTRY and n not in chosen)
    page = make_page(report, source, chosen + hidden, profile, cuda_anchors, previous, launched)
    if anchor is not None:
        page = dataclasses.replace(page, rid=anchor)
    rid = page.rid
    sites = sum(w.count for w in report.wgmma)
    if report.family == "cuda":
        counts = f"{len(report.tma_descriptors)} TMA, {sites} WGMMA, {len(report.problems)} problem(s)"
    elif report.family == "hip":
        counts = f"{sum(m.count for m in report.mfma)} MFMA"
    else:
        counts = _DEVICE_TITLES.get(report.family, report.family) + " source"
    head = (f'<div class="tl-head">{esc(report.name)} <span class="tl-muted">for {esc(report.target)}: '
            f"{len(report.kernels)} kernel(s), {esc(counts)}</span></div>"
            f'<p class="tl-untrusted">&#9888; {UNTRUSTED_NOTE}</p>')
    panels: list[tuple[str, str, str, bool]] = []  # (slug, title, body, has a tab)
    for name in chosen:
        panels.append((name, section_title(report, name), _section(name).render(report, page), True))
    for n, (title, markup) in enumerate(extra):
        panels.append((_slug(title, n), esc(title), markup, True))
    for name in hidden:
        panels.append((name, section_title(report, name), _section(name).render(report, page), False))
    radios = "".join(f'<input type="radio" class="tl-radio tl-t" name="{rid}-tabs" id="{rid}-t-{slug}"'
                     f'{" checked" if n == 0 else ""} aria-label="{esc(_plain(title))}"{TRUSTED_ONLY}>'
                     for n, (slug, title, _, _) in enumerate(panels))
    tabs = "".join(f'<label for="{rid}-t-{slug}">{esc(title) if slug in _REGISTRY else title}</label>'
                   for slug, title, _, tab in panels if tab)
    body = "".join(f'<section class="tl-panel" id="{rid}-{slug}" data-tab="{rid}-t-{slug}">'
                   f'<details class="tl-fold"{" open" if n == 0 else ""}><summary><h3 class="tl-ptitle" '
                   f'style="display:inline">{esc(title) if slug in _REGISTRY else title}'
                   f'{"" if tab else " <span class=tl-muted>(no tab: opened by its links)</span>"}</h3></summary>'
                   f"{markup}</details></section>"
                   for n, (slug, title, markup, tab) in enumerate(panels))
    page_html = wrap(f'{head}{radios}<nav class="tl-tabs tl-t"{TRUSTED_ONLY}>{tabs}</nav><div class="tl-panels">{body}</div>',
                     root_id=rid, css=_tab_css(rid, [slug for slug, _, _, _ in panels]), onclick=_FOLLOW_JS)
    if standalone:
        return (f"<title>{esc(report.name)} ({esc(report.target)}) - tilelab</title>"
                "<style>body{margin:0;background:#fff}@media (prefers-color-scheme: dark){body{background:#111}}</style>"
                + page_html)
    return page_html


__all__ = [
    "Page", "SECTIONS", "Section", "comparison_html", "default_sections", "encode_spans", "esc", "launch_links",
    "cell_heat", "launcher_html", "make_page", "mfma_html", "page_id", "register_section", "report_changes",
    "render_html", "render_section", "report_id", "section_body", "section_title", "sections", "tma_links",
]
