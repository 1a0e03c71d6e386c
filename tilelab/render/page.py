"""The page kit: what every inspector tab is built with, and the registry the tabs join.

A tab is one module under :mod:`tilelab.render.tabs` that calls :func:`register` with a
:class:`Tab`: its name, title, place in the row (``order``), whether a page shows it by default,
the function ``(report, page) -> HTML`` and the function ``(report, page) -> text``. The page
(:func:`tilelab.render.html.render_html`) and the plain text (:func:`tilelab.render.text.render_text`)
both read this one registry, so a new inspector section is one new module and nothing else.

:class:`Page` is what a tab needs beyond its report: the anchor prefix, the line links, the
user's source text, which panels are on the page (links go only there) and the results the magic
measured for the report (its run/bench verdicts, its timelines), handed over as data: no renderer
keeps state. Every string from user code or the compiler goes through :func:`esc`.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.links import ReportLinks, report_links
from ..records.kernel import KernelReport
from ._ids import report_id
from .code import STYLE_CSS as CODE_CSS
from .code import LineMark
from .textkit import dims, num, size_text

# The device-code tab is named after the language the target's code is written in.
DEVICE_TITLES = {"cuda": "CUDA", "hip": "HIP", "metal": "Metal", "cpu": "C"}

# Inline styles survive a sanitiser that strips <style> (JupyterLab's keeps style attributes):
# parts that only work with the stylesheet are hidden inline, and the stylesheet shows them.
TRUSTED_ONLY = ' style="display:none"'
# ... and a wide table scrolls inside its own box there too
SCROLLS = ' style="overflow-x:auto"'

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
.tilelab-report tr.tl-problem td:first-child,.tilelab-report .tl-problems li{\
box-shadow:inset 3px 0 0 var(--jp-error-color1,#d32f2f)}
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
.tilelab-report .tl-zoom:checked~.tl-picture svg,\
.tilelab-report .tl-zoom:checked~.tl-zoomable svg{max-width:none;zoom:2}
.tilelab-report details.tl-gap>summary{cursor:pointer;color:var(--jp-ui-font-color2,#555)}
.tilelab-report tr.tl-slow td:first-child{box-shadow:inset 3px 0 0 var(--jp-warn-color1,#f57c00)}
.tilelab-report .tl-diff-cell{background:rgba(255,179,0,.28)}
.tilelab-report .tl-diff-cell del{color:var(--jp-ui-font-color2,#555)}
.tilelab-report .tl-diff-note{border-left:3px solid var(--jp-brand-color1,#1976d2);padding-left:6px}
"""


def esc(value: Any) -> str:
    """Escape anything for element content and quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, row_attrs: Sequence[str] | None = None,
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


def line_count(text: str) -> int:
    return text.count("\n") + 1


def part_anchor(rid: str, backend: str, part_index: int) -> str:
    return f"{rid}-src-{re.sub(r'[^A-Za-z0-9_]', '_', backend)}-{part_index}"


def span_text(first: int, last: int) -> str:
    return f"L{first}" if first == last else f"L{first}&ndash;{last}"


@dataclass(frozen=True)
class Page:
    """What a tab needs beyond its report: the anchor prefix, the line links, the user's source
    text (the cell) when known, which panels are on the page (links go only there), and what the
    magic measured for the report, handed over as data (a renderer keeps no state)."""

    rid: str
    links: ReportLinks
    source: str | None = None
    panels: frozenset[str] = field(default_factory=frozenset)
    heat: tuple[tuple[int, float], ...] = ()  # a profile's (device-CUDA line, warp-stall samples)
    cuda_anchors: frozenset[int] = frozenset()  # device lines other tabs (a sanitizer report) link to
    previous: KernelReport | None = None  # the previous run of the same cell: changed values are highlighted
    changes: tuple[tuple[str, str, str, str], ...] = ()  # report_changes(previous, report)
    launched: tuple[Any, ...] = ()  # the cell's --run/--bench results: their verdict and median in the Summary
    timelines: tuple[Any, ...] = ()  # the cell's --timeline results (Timeline records): the Timeline tab

    def has(self, panel: str) -> bool:
        return panel in self.panels


def make_page(report: KernelReport, source: str | None = None, panels: Iterable[str] | None = None,
              profile: Any = None, cuda_anchors: Iterable[int] = (), previous: KernelReport | None = None,
              launched: Sequence[Any] = (), timelines: Sequence[Any] = ()) -> Page:
    """The page of ``report``; ``panels`` default to the tabs shown by default (:func:`default_sections`)."""
    heat = tuple(getattr(profile, "hot_device_lines", ()) or ())
    changes = tuple(report_changes(previous, report)) if previous is not None else ()
    page = Page(report_id(report), report_links(report, source), source, frozenset(), heat, frozenset(cuda_anchors),
                previous, changes, tuple(launched), tuple(timelines))
    chosen = panels if panels is not None else _shown_by_default(report, page)
    return dataclasses.replace(page, panels=frozenset(chosen))


# Every field of a TMA descriptor, in the words of the TMA tab's folded table (and the Diff's).
TMA_FIELDS = (
    ("kind", lambda d: d.kind), ("kernel", lambda d: d.kernel or "-"), ("rank", lambda d: d.rank),
    ("global stride (bytes)", lambda d: dims(d.global_stride_bytes)),
    ("element strides", lambda d: dims(d.element_strides)), ("interleave", lambda d: d.interleave),
    ("L2 promotion", lambda d: d.l2_promotion), ("OOB fill", lambda d: d.oob_fill),
    ("element size (bytes)", lambda d: num(d.element_bytes)), ("box elements", lambda d: num(d.box_elements)),
    ("box size (bytes)", lambda d: num(d.box_bytes)),
)

# The fields of each record the Diff compares, in the words of the report's tables.
_KERNEL_FIELDS = (("grid", lambda k: dims(k.grid)), ("block", lambda k: dims(k.block)),
                  ("dynamic shared memory", lambda k: size_text(k.dynamic_shared_memory_bytes)),
                  ("cluster", lambda k: dims(k.cluster_dims) if k.cluster_dims else "-"))
_TMA_MAIN = (("tensor", lambda d: d.buffer or "-"), ("dtype", lambda d: d.dtype),
             ("global dim", lambda d: dims(d.global_dim)),
             ("box dim", lambda d: dims(d.box_dim)), ("swizzle", lambda d: d.swizzle),
             ("inner box (bytes)", lambda d: num(d.inner_box_bytes)),
             ("swizzle span (bytes)", lambda d: num(d.swizzle_span_bytes)))
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
            *[(f"TMA {n}", d, by(after.tma_descriptors, lambda x: x.name).get(n), _TMA_MAIN + TMA_FIELDS)
              for n, d in by(before.tma_descriptors, lambda x: x.name).items()],
            *[(f"TMA {n}", None, d, _TMA_MAIN + TMA_FIELDS)
              for n, d in by(after.tma_descriptors, lambda x: x.name).items()
              if n not in {x.name for x in before.tma_descriptors}],
            *[(f"WGMMA {i}", w, after.wgmma[i] if i < len(after.wgmma) else None, _WGMMA_FIELDS)
              for i, w in enumerate(before.wgmma)],
            *[(f"WGMMA {i}", None, w, _WGMMA_FIELDS) for i, w in enumerate(after.wgmma) if i >= len(before.wgmma)],
            *[(f"layout {n}", lay, by(after.layouts, lambda x: x.buffer).get(n),
               (("scope", lambda x: x.scope), ("dtype", lambda x: x.dtype), ("shape", lambda x: dims(x.shape)),
                ("layout", lambda x: x.description)))
              for n, lay in by(before.layouts, lambda x: x.buffer).items()],
            *[(f"argument {n}", arg, by(after.arguments, lambda x: x.name).get(n),
               (("dtype", lambda x: x.dtype or "-"),
                ("shape", lambda x: dims(x.shape) if x.shape is not None else "-")))
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


def changed(page: Page, what: str, field_name: str, value: str) -> str:
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
    return {i: [(s.backend, s.part_name, part_anchor(rid, s.backend, s.part), (s.first, s.last)) for s in sites]
            for i, sites in links.encode.items()}


def where(page: Page, i: int, kind: str) -> str:
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
            f'<a href="#{part_anchor(rid, s.backend, s.part)}-L{s.call}">'
            f'{esc(s.backend if s.part_name == "main" else f"{s.backend} {s.part_name}")} '
            f'{span_text(s.first, s.last)}</a>'
            for s in sites) or '<span class="tl-muted">not found</span>'))
    return '<span class="tl-where">' + "<br>".join(out) + "</span>" if out else '<span class="tl-muted">-</span>'


def back_marks(report: KernelReport, page: Page) -> tuple[dict[int, list[LineMark]], dict[int, list[LineMark]]]:
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
            what = "TMA descriptor" if kind == "tma" else "WGMMA"
            mark = LineMark(f"#{page.rid}-{kind}-{i}", label, f"{what} {label}")
            for lines, target in ((on_device.get(i, ()), device), (on_cell.get(i, ()), cell)):
                for n in lines:
                    if mark not in target.setdefault(n, []):
                        target[n].append(mark)
    return device, cell


def target_record(report: KernelReport) -> Any:
    """The report's :class:`tilelab.targets.Target`, or None for a target tilelab does not know."""
    from ..targets import parse_target

    try:
        return parse_target(report.target)
    except ValueError:
        return None


def none_here(report: KernelReport, fact: str, empty: str) -> str:
    """An empty section: why the target cannot have ``fact`` (TMA, WGMMA, MFMA), or ``empty``."""
    target = target_record(report)
    if target is not None and not getattr(target, fact):
        return f'<p class="tl-muted">{esc(target.not_applicable(fact))}</p>'
    return f'<p class="tl-muted">{esc(empty)}</p>'


def wrap(body: str, *, root_id: str | None = None, css: str = "", onclick: str = "") -> str:
    """Wrap markup in the scoped root with the stylesheet, ready to display on its own."""
    rid = f' id="{esc(root_id)}"' if root_id else ""
    click = f' onclick="{esc(onclick)}"' if onclick else ""
    # inline: long names and expressions wrap even where the stylesheet is stripped
    return (f'<div class="tilelab-report"{rid}{click} style="overflow-wrap:break-word">'
            f"<style>{ROOT_CSS}{CODE_CSS}{css}</style>"
            f"{body}</div>")


# --------------------------------------------------------------------------------------------
# The registry of tabs: each module of tilelab.render.tabs registers its own
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tab:
    """One inspector tab.

    ``html(report, page)`` is its panel's markup and ``text(report, page)`` its part of the plain
    text (None or an empty string: nothing to say in text; its page has no line links, see
    :func:`text_page`). ``order`` places it in the row of tabs (smaller first; the built-in ones
    are 10 apart). ``shown(report, page)`` says whether a page shows it by default (None: always);
    it sees the report (None when only the catalogue of tabs is asked for) and the page's data
    (its ``source``, ``launched``, ``timelines``), not its panels. ``count(report, page)``
    (optional) is shown in its title, e.g. "TMA (2)"; None from it: no count. ``heading(report)``
    (optional) replaces the title for a report (the CUDA tab is "HIP" for an AMD target)."""

    name: str
    title: str
    order: float
    html: Callable[[KernelReport, Page], str]
    text: Callable[[KernelReport, Page], str] | None = None
    shown: Callable[[KernelReport | None, Page], bool] | None = None
    count: Callable[[KernelReport, Page], int | None] | None = None
    heading: Callable[[KernelReport], str] | None = None

    def render(self, report: KernelReport, page: Page) -> str:
        return self.html(report, page)

    def title_for(self, report: KernelReport, page: Page) -> str:
        count = self.count(report, page) if self.count is not None else None
        title = self.heading(report) if self.heading is not None else self.title
        return title + (f" ({count})" if count is not None else "")


_REGISTRY: dict[str, Tab] = {}


def register(tab: Tab) -> Tab:
    """Add ``tab`` (or replace the tab of its name); returns it."""
    _REGISTRY.pop(tab.name, None)
    _REGISTRY[tab.name] = tab
    return tab


def unregister(name: str) -> None:
    """Remove the tab ``name`` (nothing happens when there is none)."""
    _REGISTRY.pop(name, None)


def tabs() -> tuple[Tab, ...]:
    """Every registered tab, in order (equal orders: first registered first)."""
    return tuple(sorted(_REGISTRY.values(), key=lambda t: t.order))


def tab(name: str) -> Tab:
    """The tab ``name``; a ValueError naming the tabs there are when there is none."""
    if name not in _REGISTRY:
        names = ", ".join(t.name for t in tabs() if t.name != "cell")
        raise ValueError(f"unknown section {name!r}; choose from {names}")
    return _REGISTRY[name]


def order_after(name: str | None, moving: str = "") -> float:
    """An order that places a tab right after the tab ``name`` (before the one that follows it);
    last when ``name`` is None or not registered. ``moving`` (a tab being re-registered) is
    left out of the row."""
    row = [t for t in tabs() if t.name != moving]
    at = next((n for n, t in enumerate(row) if t.name == name), None) if name is not None else None
    if at is None:
        return row[-1].order + 10 if row else 10.0
    if at + 1 == len(row):
        return row[at].order + 10
    return (row[at].order + row[at + 1].order) / 2


def _shown_by_default(report: KernelReport | None, page: Page) -> tuple[str, ...]:
    return tuple(t.name for t in tabs() if t.shown is None or t.shown(report, page))


def default_sections(report: KernelReport | None = None, with_source: bool = False,
                     timelines: Sequence[Any] = (), launched: Sequence[Any] = ()) -> tuple[str, ...]:
    """The tabs a page shows by default: every registered one whose ``shown`` says so for
    ``report`` and the page's data (MFMA only for AMD targets, the opt-in Lines/PTX/SASS and IR
    tabs only when they were computed; the Cell tab only with a source, the Timeline tab only with
    timelines). ``with_source``: the page has the user's source text."""
    return _shown_by_default(report, _draft_page(report, "" if with_source else None, timelines, launched))


def _draft_page(report: KernelReport | None, source: str | None = None, timelines: Sequence[Any] = (),
                launched: Sequence[Any] = ()) -> Page:
    """A page's data without its line links or panels: what decides which tabs show and their counts."""
    return Page(report_id(report) if report is not None else "", ReportLinks(), source,
                launched=tuple(launched), timelines=tuple(timelines))


def text_page(report: KernelReport, source: str | None = None, launched: Sequence[Any] = (),
              timelines: Sequence[Any] = ()) -> Page:
    """The page a tab's text is written for: the page's data and the tabs shown by default, without
    the line links (plain text has no links to follow, and finding them costs milliseconds)."""
    page = _draft_page(report, source, timelines, launched)
    return dataclasses.replace(page, panels=frozenset(_shown_by_default(report, page)))


def section_title(report: KernelReport, name: str, page: Page | None = None, *,
                  timelines: Sequence[Any] = ()) -> str:
    """The title of the tab ``name`` for ``report``, with its count: "TMA (2)", "HIP" (the device
    code of an AMD target); ``page`` (or, without it, ``timelines``) gives what the counts of
    data-fed tabs read."""
    return tab(name).title_for(report, page if page is not None else _draft_page(report, timelines=timelines))


def section_body(report: KernelReport, name: str, page: Page | None = None) -> str:
    """The inner markup of one section (no root wrapper, no stylesheet)."""
    return tab(name).render(report, page or make_page(report))


__all__ = [
    "DEVICE_TITLES", "Page", "ROOT_CSS", "SCROLLS", "TMA_FIELDS", "TRUSTED_ONLY", "Tab", "back_marks", "changed",
    "default_sections", "esc", "line_count", "make_page", "none_here", "order_after", "part_anchor", "register",
    "report_changes", "report_id", "section_body", "section_title", "span_text", "table", "tabs", "target_record",
    "text_page", "tma_links", "unregister", "where", "wrap",
]
