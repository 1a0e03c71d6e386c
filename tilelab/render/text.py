"""``render_text(report) -> str``: a readable plain-text summary of a KernelReport.

Used by ``KernelReport``'s ``text/plain`` repr and by ``python -m tilelab inspect``. A head line,
then the text of each tab the inspector page would show, in the page's order: the same registry
(:mod:`tilelab.render.tabs`) gives both, so a new tab's text appears here with nothing else to
change. Sources are not printed (the HTML report and the inspector show them); everything else is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records.display import register
from ..records.kernel import KernelReport
from . import tabs as _tabs  # noqa: F401  (registers every tab)
from .page import tabs, text_page
from .textkit import dims, layout_sentence, pdl_text, size_text, tma_rows


def head_text(report: KernelReport) -> str:
    """The first line: the kernel, its target and what it holds."""
    if report.family == "cuda":
        return (f"KernelReport {report.name} for {report.target}: {len(report.kernels)} kernel(s), "
                f"{len(report.tma_descriptors)} TMA descriptor(s), {sum(w.count for w in report.wgmma)} WGMMA "
                f"instruction(s) ({len(report.wgmma)} distinct), {len(report.problems)} problem(s)")
    mfma = (f", {sum(m.count for m in report.mfma)} MFMA instruction(s) ({len(report.mfma)} distinct)"
            if report.family == "hip" else "")
    return (f"KernelReport {report.name} for {report.target}: {len(report.kernels)} kernel(s){mfma}; "
            "TMA, WGMMA and L2 windows do not apply (CUDA features)")


def render_text(report: KernelReport, *, source: str | None = None, launched: Sequence[Any] = (),
                timelines: Sequence[Any] = ()) -> str:
    """The head line, then each tab's text (tabs with nothing to say are left out), a blank line
    between them. ``source``, ``launched`` and ``timelines`` are the page's data, as
    :func:`tilelab.render.html.render_html` takes them: they decide which tabs are shown."""
    page = text_page(report, source, launched, timelines)
    blocks = [head_text(report)]
    for tab in tabs():
        if tab.name in page.panels and tab.text is not None:
            text = tab.text(report, page)
            if text:
                blocks.append(text)
    return "\n\n".join(blocks)


__all__ = ["dims", "head_text", "layout_sentence", "pdl_text", "render_text", "size_text", "tma_rows"]

register(KernelReport, {"text/plain": render_text})
