"""The device-code tab (CUDA; HIP, Metal or C for other targets): the code TileLang generated,
its lines linked to the TMA and WGMMA rows, the cell lines and the SASS they came from and became."""

from __future__ import annotations

from ...engine.links import device_anchor_lines, heat_shares
from ...records.kernel import KernelReport
from .. import machine
from ..code import LineMark, heat_list, highlight_code
from ..page import DEVICE_TITLES, Page, Tab, back_marks, esc, line_count, make_page, register, target_record

# Device code longer than this is coloured for its comments only (syntax colouring costs ~5 us a character).
_FULL_COLOUR_CHARS = 20_000

def cuda_html(report: KernelReport, page: Page | None = None) -> str:
    page = page or make_page(report)
    text = report.sources.device
    target = target_record(report)
    language = target.source_language if target else "cuda"
    marks, _ = back_marks(report, page)
    # Links to the Lines, PTX and SASS tabs (toolchain tier), where those are on the page.
    for n, items in machine.cuda_marks(report, page.rid).items():
        for kind, href, label, title in items:
            if page.has(kind):
                marks.setdefault(n, []).append(LineMark(href, label, title))
    if report.family == "cuda":
        what = ("device code, {n} lines; marked lines use a TMA descriptor or issue a WGMMA, or link to the "
                "Python line and SASS they came from and became (&#8617; follows the link)")
    else:
        what = f"{esc(DEVICE_TITLES.get(report.family, report.family))} device code, {{n}} lines"
    shares = {n: s for n, s in heat_shares(page.heat).items() if 1 <= n <= line_count(text)}
    # pygments takes about 5 us a character: long device code is coloured for its comments only
    colour = "all" if len(text) <= _FULL_COLOUR_CHARS else "comments"
    note = "" if colour == "all" else f" (coloured for comments only: over {_FULL_COLOUR_CHARS:,} characters)"
    return (f'<p class="tl-muted">{what.format(n=line_count(text))}{note}</p>'
            + heat_list(shares, f"{page.rid}-cuda")
            + highlight_code(text, language, anchor_prefix=f"{page.rid}-cuda", marks=marks,
                             anchors=device_anchor_lines(report) | set(page.cuda_anchors), heat=shares,
                             colour=colour))


def cuda_text(report: KernelReport, page: Page) -> str:
    return f"Device code: {line_count(report.sources.device)} lines"


register(Tab("cuda", "CUDA", 30, lambda r, page: cuda_html(r, page), cuda_text,
             heading=lambda r: DEVICE_TITLES.get(r.family, "CUDA")))
