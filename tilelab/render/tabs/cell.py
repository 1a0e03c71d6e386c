"""The Cell tab: the user's source text (the cell), its T.copy / T.gemm lines linked to the TMA
and WGMMA rows they made, with a profile's heat margin when one was taken."""

from __future__ import annotations

from ...engine.links import cell_heat, heat_elsewhere
from ...records.kernel import KernelReport
from ..code import heat_list, highlight_code
from ..page import Page, Tab, back_marks, esc, make_page, register


def cell_html(report: KernelReport, page: Page | None = None) -> str:
    """The user's source (the cell), its T.copy / T.gemm lines linked to the rows they made."""
    page = page or make_page(report)
    if not page.source:
        return '<p class="tl-muted">No source text was given for this report.</p>'
    _, marks = back_marks(report, page)
    shares = cell_heat(report, page.source, page.heat)
    return ('<p class="tl-muted">marked lines made a TMA descriptor or a WGMMA (&#8617; goes to its row)</p>'
            + heat_list(shares, f"{page.rid}-cell") + (_heat_elsewhere_html(report, page) if shares else "")
            + highlight_code(page.source, "python", anchor_prefix=f"{page.rid}-cell", marks=marks, heat=shares))


def _heat_elsewhere_html(report: KernelReport, page: Page) -> str:
    """Where the samples the cell's lines do not carry went (TileLang's own macro lines, mostly)."""
    rest, places = heat_elsewhere(report, page.source or "", page.heat)
    if rest <= 0:
        return ""
    where = ", ".join(f"{esc(label)} {100 * share:.1f}%" for label, share in places)
    return (f'<p class="tl-muted">the other {100 * rest:.1f}% of the samples are on device lines that #line '
            f"traces to TileLang's own code or to no Python line ({where}); TileLang names the innermost "
            "Python line, so code a tile op expands into inside TileLang's macros is counted there, not on "
            "the cell's line (the Lines tab lists every link)</p>")


register(Tab("cell", "Cell", 20, lambda r, page: cell_html(r, page), shown=lambda r, page: page.source is not None))
