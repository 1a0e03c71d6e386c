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
:mod:`tilelab.engine.links`, which finds them).

The page stays light at any kernel size: only lines something links to carry an id, line numbers
are CSS counters, launchers open at their launch and encode calls with the rest folded, layouts are
drawn cropped to a readable part (the caption says how to draw all of it), and repeated layouts are
drawn once.

Each tab is a module of :mod:`tilelab.render.tabs` that registers itself in the page kit's one
registry (:mod:`tilelab.render.page`: title, order, shown by default or not, HTML, text); this
module lays the registered tabs out as the page. :func:`register_section` is the short way to add
one from anywhere. Every string that comes from user code or the compiler goes through
``html.escape``. Styles are scoped under ``.tilelab-report`` and read JupyterLab's CSS variables
with fallbacks, so the report follows the light and the dark theme and stays readable outside
Jupyter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import inspect as _pyinspect
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..engine.links import cell_heat, encode_spans
from ..records.display import register as register_record
from ..records.kernel import KernelReport
from ..targets import TargetComparison
from ._ids import report_id
from .page import _REGISTRY as _REGISTRY
from .page import (
    DEVICE_TITLES,
    TRUSTED_ONLY,
    Page,
    Tab,
    default_sections,
    esc,
    make_page,
    order_after,
    register,
    report_changes,
    section_body,
    section_title,
    tab,
    table,
    tabs,
    tma_links,
    wrap,
)
from .tabs import (  # importing the package registers every tab
    arguments_html,
    cell_html,
    cuda_html,
    launch_links,
    launcher_html,
    layouts_html,
    mfma_html,
    summary_html,
    tma_html,
    wgmma_html,
)

# A tab, under the name this module has exported it by.
Section = Tab


def comparison_html(comparison: Any) -> str:
    """A :class:`tilelab.targets.TargetComparison` as one table, a column per target."""
    rows = [[label, *values] for label, values in comparison.rows]
    return wrap(table(["", *comparison.targets], rows))


# --------------------------------------------------------------------------------------------
# Adding a tab from anywhere: one call
# --------------------------------------------------------------------------------------------


def register_section(name: str, title: str, body: Callable[..., str], *,
                     count: Callable[..., int | None] | None = None, after: str | None = None,
                     text: Callable[..., str] | None = None,
                     shown: Callable[[KernelReport | None, Page], bool] | None = None) -> Tab:
    """Add (or replace) a tab in the registry the tabs of :mod:`tilelab.render.tabs` join. ``body``
    takes the report, and may take ``page`` (a :class:`Page`: anchor prefix, line links, source
    text, the magic's results); ``text`` likewise gives its plain text (default: none); ``count``
    takes the report (and may take ``page``). ``after`` places it after that tab, else last;
    ``shown(report, page)`` says whether a page shows it by default (default: always)."""
    return register(Tab(name, title, order_after(after, moving=name), _with_page(body),
                        _with_page(text) if text is not None else None, shown,
                        _with_page(count) if count is not None else None))


def _with_page(function: Callable[..., Any]) -> Callable[[KernelReport, Page], Any]:
    """``function(report, page)`` for a function of the report that may also take ``page``."""
    parameters = _pyinspect.signature(function).parameters
    if "page" in parameters:
        return lambda report, page: function(report, page=page)
    if len(parameters) >= 2:
        return function
    return lambda report, page: function(report)


def sections() -> tuple[str, ...]:
    """The names of every registered tab, in order."""
    return tuple(t.name for t in tabs())


# The built-in tabs (``--show`` names); the Cell tab appears when a source is given.
SECTIONS = tuple(n for n in sections() if n != "cell")
SECTION_TITLES = {t.name: t.title for t in tabs()}


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
            f".tilelab-report {focus.replace(',', ',.tilelab-report ')}"
            "{outline:2px solid var(--jp-brand-color1,#1976d2)}")


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
    "var L=t.split('\\n'),a=+q.dataset.first;q.style.counterReset='tl-ln '+(a-1);"
    "for(var i=a;i<a+ +q.dataset.lines;i++){var s=document.createElement('span');"
    "s.textContent=L[i-1]+'\\n';q.appendChild(s)}});return}"
    "var a=e.closest('a[href^=\"#\"]');if(!a||!this.contains(a))return;"
    "var t=this.querySelector('[id=\"'+a.getAttribute('href').slice(1)+'\"]');if(!t)return;"
    "var p=t.closest('.tl-panel');"
    "if(p&&p.dataset.tab){var r=document.getElementById(p.dataset.tab);if(r)r.checked=true}"
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


def page_id(report: KernelReport, sections: Sequence[str] | None = None, source: str | None = None,
            timelines: Sequence[Any] = ()) -> str:
    """The anchor prefix of a page: the report's id, with a suffix for another choice of tabs (two
    cells showing one kernel, one with ``--show``), so that each page's tabs and links stay its own."""
    rid = report_id(report)
    if sections is None or tuple(sections) == default_sections(report, source is not None, timelines):
        return rid
    return rid + hashlib.sha1(",".join(sections).encode()).hexdigest()[:4]


@dataclasses.dataclass(frozen=True)
class Panel:
    """One panel of a page: a tab's (``has_tab``) or a section without a tab, opened by its links."""

    slug: str  # its anchor: {page id}-{slug}
    title: str  # plain text
    markup: str
    has_tab: bool = True


def panel_html(rid: str, n: int, panel: Panel) -> str:
    """The ``n``-th panel of page ``rid`` (the first one opens folded pages)."""
    note = "" if panel.has_tab else " <span class=tl-muted>(no tab: opened by its links)</span>"
    return (f'<section class="tl-panel" id="{rid}-{panel.slug}" data-tab="{rid}-t-{panel.slug}">'
            f'<details class="tl-fold"{" open" if n == 0 else ""}><summary><h3 class="tl-ptitle" '
            f'style="display:inline">{esc(panel.title)}{note}</h3></summary>{panel.markup}</details></section>')


def render_html(report: KernelReport, *, standalone: bool = False, sections: Sequence[str] | None = None,
                extra: Sequence[tuple[str, str]] = (), source: str | None = None, profile: Any = None,
                cuda_anchors: Iterable[int] = (), hidden: Sequence[str] | None = None,
                previous: KernelReport | None = None, anchor: str | None = None,
                launched: Sequence[Any] = (), timelines: Sequence[Any] = ()) -> str:
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
    ``launched`` (the cell's run/bench results) gives the Summary their verdicts; ``timelines``
    (the cell's :class:`~tilelab.records.timeline.Timeline` records) the Timeline tab.

    Each panel is a ``<details>`` titled by its ``<summary>``: where the stylesheet is stripped
    (an untrusted notebook) the page reads as folded, titled sections (the Summary open) under one
    line saying what trusting adds; with it, the radios and CSS make them tabs.
    """
    rid, panels = page_panels(report, sections=sections, extra=extra, source=source, profile=profile,
                              cuda_anchors=cuda_anchors, hidden=hidden, previous=previous, anchor=anchor,
                              launched=launched, timelines=timelines)
    return layout_page(report, rid, panels, standalone=standalone)


def layout_page(report: KernelReport, rid: str, panels: Sequence[Panel], *, standalone: bool = False) -> str:
    """Page ``rid``'s panels laid out as its tabs (see :func:`render_html`)."""
    sites = sum(w.count for w in report.wgmma)
    if report.family == "cuda":
        counts = f"{len(report.tma_descriptors)} TMA, {sites} WGMMA, {len(report.problems)} problem(s)"
    elif report.family == "hip":
        counts = f"{sum(m.count for m in report.mfma)} MFMA"
    else:
        counts = DEVICE_TITLES.get(report.family, report.family) + " source"
    head = (f'<div class="tl-head">{esc(report.name)} <span class="tl-muted">for {esc(report.target)}: '
            f"{len(report.kernels)} kernel(s), {esc(counts)}</span></div>"
            f'<p class="tl-untrusted">&#9888; {UNTRUSTED_NOTE}</p>')
    radios = "".join(f'<input type="radio" class="tl-radio tl-t" name="{rid}-tabs" id="{rid}-t-{p.slug}"'
                     f'{" checked" if n == 0 else ""} aria-label="{esc(_plain(p.title))}"{TRUSTED_ONLY}>'
                     for n, p in enumerate(panels))
    labels = "".join(f'<label for="{rid}-t-{p.slug}">{esc(p.title)}</label>' for p in panels if p.has_tab)
    body = "".join(panel_html(rid, n, p) for n, p in enumerate(panels))
    page_html = wrap(f'{head}{radios}<nav class="tl-tabs tl-t"{TRUSTED_ONLY}>{labels}</nav>'
                     f'<div class="tl-panels">{body}</div>',
                     root_id=rid, css=_tab_css(rid, [p.slug for p in panels]), onclick=_FOLLOW_JS)
    if standalone:
        return (f"<title>{esc(report.name)} ({esc(report.target)}) - tilelab</title>"
                "<style>body{margin:0;background:#fff}"
                "@media (prefers-color-scheme: dark){body{background:#111}}</style>"
                + page_html)
    return page_html


def page_panels(report: KernelReport, *, sections: Sequence[str] | None = None,
                extra: Sequence[tuple[str, str]] = (), source: str | None = None, profile: Any = None,
                cuda_anchors: Iterable[int] = (), hidden: Sequence[str] | None = None,
                previous: KernelReport | None = None, anchor: str | None = None,
                launched: Sequence[Any] = (), timelines: Sequence[Any] = ()) -> tuple[str, list[Panel]]:
    """The page's id and its panels, in order (as :func:`render_html` lays them out; its
    parameters): the chosen tabs, then ``extra``, then the hidden sections."""
    chosen = tuple(sections) if sections is not None else default_sections(report, source is not None, timelines)
    unknown = [s for s in chosen if s not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    if hidden is None:
        hidden = () if sections is None else tuple(
            n for n in default_sections(report, source is not None, timelines) if n not in chosen)
    hidden = tuple(n for n in hidden if n in _REGISTRY and n not in chosen)
    page = make_page(report, source, chosen + hidden, profile, cuda_anchors, previous, launched, timelines)
    if anchor is not None:
        page = dataclasses.replace(page, rid=anchor)
    panels = [Panel(name, section_title(report, name, page), tab(name).render(report, page)) for name in chosen]
    panels += [Panel(_slug(title, n), title, markup) for n, (title, markup) in enumerate(extra)]
    panels += [Panel(name, section_title(report, name, page), tab(name).render(report, page), has_tab=False)
               for name in hidden]
    return page.rid, panels


__all__ = [
    "Page", "Panel", "SECTIONS", "Section", "Tab", "arguments_html", "cell_html", "cell_heat", "comparison_html",
    "cuda_html", "default_sections", "encode_spans", "esc", "launch_links", "launcher_html", "layouts_html",
    "layout_page", "make_page", "mfma_html", "page_id", "page_panels", "panel_html", "register_section", "render_html",
    "render_section", "report_changes", "report_id", "section_body", "section_title", "sections", "summary_html",
    "tma_html", "tma_links", "wgmma_html",
]

register_record(KernelReport, {"text/html": render_html})
register_record(TargetComparison, {"text/html": comparison_html})
