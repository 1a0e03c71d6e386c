"""The Timeline tab: the intra-kernel timelines the magic measured for the report
(``%%tilelang --timeline``), handed to the page as data (:attr:`Page.timelines`), each phase linked
to its line in the Cell or CUDA tab. Shown only on a page given a timeline."""

from __future__ import annotations

from ...engine.links import device_anchor_lines
from ...records.kernel import KernelReport
from ...records.timeline import TimelineSpan
from ..page import Page, Tab, back_marks, register
from ..timeline import Links, timeline_html, timeline_text


def timeline_section(report: KernelReport, page: Page, cell_anchors: set[int] | frozenset[int] = frozenset()) -> str:
    """The Timeline tab's body (``cell_anchors``: the cell lines that carry an anchor on the page)."""
    if not page.timelines:
        return ('<p class="tl-muted">No timeline for this kernel: <code>%%tilelang --timeline</code> (or '
                "<code>tilelab.timeline(kernel, ...)</code>) runs it once instrumented.</p>")
    links = page_links(report, page, cell_anchors)
    return ('<p class="tl-muted">a click on a phase goes to its line in the Cell or CUDA tab, where that line '
            "is shown</p>" + "".join(timeline_html(t, links) for t in page.timelines))


def page_links(report: KernelReport, page: Page, cell_anchors: set[int] | frozenset[int] = frozenset()) -> Links:
    """A phase's anchor on the inspector page: its cell line in the Cell tab, else its device line
    in the CUDA tab, only where that line carries an anchor on this page (``cell_anchors``)."""
    cell = set(cell_anchors) if page.has("cell") and page.source else set()
    device = (device_anchor_lines(report) | set(page.cuda_anchors)) if page.has("cuda") else set()

    def link(span: TimelineSpan) -> str | None:
        if span.cell_line in cell:
            return f"#{page.rid}-cell-L{span.cell_line}"
        if span.device_line in device:
            return f"#{page.rid}-cuda-L{span.device_line}"
        return None

    return link


def timeline_tab_html(report: KernelReport, page: Page) -> str:
    anchored = set(back_marks(report, page)[1]) if page.has("cell") and page.source else set()
    return timeline_section(report, page, anchored)


def timeline_tab_text(report: KernelReport, page: Page) -> str:
    return "\n\n".join(timeline_text(t) for t in page.timelines)


register(Tab("timeline", "Timeline", 130, timeline_tab_html, timeline_tab_text,
             shown=lambda r, page: bool(page.timelines), count=lambda r, page: len(page.timelines)))
