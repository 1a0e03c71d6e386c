"""Renderers of a :class:`~tilelab.launch._sanitize.SanitizerReport`: a table of findings, each
linked to its line of the device CUDA source (shown below it, numbered and highlighted), and the
sanitizer's raw text one click away."""

from __future__ import annotations

import html
import itertools
from typing import Any

from ..records.display import register
from ..records.launch import Finding, SanitizerReport

_COUNTER = itertools.count()


def _row_text(f: Finding) -> list[str]:
    where = f.where or ""
    if f.element is not None:
        where += f" [{', '.join(str(i) for i in f.element)}]"
    line = "" if f.line is None else str(f.line) + (f" / {f.other_line}" if f.other_line is not None else "")
    bt = "" if f.block is None else f"block {f.block} thread {f.thread}"
    return [f.kind, where.strip(), bt, line, f.message]


def sanitizer_text(report: SanitizerReport) -> str:
    head = (f"{report.kernel}: compute-sanitizer --tool {report.tool}: "
            + ("no problems found" if report.clean else f"{len(report.findings)} finding(s)")
            + (f" ({report.summary})" if report.summary else ""))
    lines = [head]
    for f in report.findings:
        kind, where, bt, line, message = _row_text(f)
        parts = [kind] + [p for p in (where, bt, f"line {line}" if line else "") if p]
        lines.append("  " + "; ".join(parts))
        lines.append(f"    {message}")
    if report.launch_error:
        lines.append(f"  the launch raised: {report.launch_error}")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def same_source(a: str | None, b: str | None) -> bool:
    """Whether two device sources are the same text (line ends and trailing blanks aside), so
    that line numbers of one hold for the other."""
    if a is None or b is None:
        return False
    return [x.rstrip() for x in a.strip("\n").splitlines()] == [x.rstrip() for x in b.strip("\n").splitlines()]


def finding_lines(report: SanitizerReport) -> set[int]:
    """The device-CUDA lines the report's findings name."""
    return {n for f in report.findings for n in (f.line, f.other_line) if n is not None}


def sanitizer_html(report: SanitizerReport, cuda_view: tuple[str, str] | None = None) -> str:
    """``cuda_view``: (anchor prefix, device source) of the inspector's CUDA view on the same page.
    When the sanitized source is that source, the findings link to the CUDA view's lines; when it
    differs the report says so and links to its own listing."""
    from .code import STYLE_CSS, highlight_code

    rid = f"tl-san-{next(_COUNTER)}"
    linked = cuda_view is not None and same_source(report.source, cuda_view[1])
    target = cuda_view[0] if cuda_view is not None and linked else rid
    esc = html.escape
    colour = "var(--jp-success-color1,#2a2)" if report.clean else "var(--jp-error-color1,#c22)"
    head = (f'<div><b style="color:{colour}">{"clean" if report.clean else f"{len(report.findings)} finding(s)"}'
            f'</b> <code>{esc(report.kernel)}</code> under compute-sanitizer --tool {esc(report.tool)}'
            + (f" ({esc(report.summary)})" if report.summary else "") + "</div>")
    cell = "border:1px solid var(--jp-border-color2,#ccc);padding:2px 6px;text-align:left"
    rows = []
    for f in report.findings:
        kind, where, bt, line, message = _row_text(f)
        link = ""
        if f.line is not None and report.source:
            link = f'<a href="#{target}-L{f.line}">line {f.line}</a>'
            if f.other_line is not None:
                link += f' / <a href="#{target}-L{f.other_line}">{f.other_line}</a>'
        elif line:
            link = esc(line)
        rows.append("<tr>" + "".join(f'<td style="{cell}">{v}</td>' for v in
                                     (esc(kind), esc(where), esc(bt), link, esc(message))) + "</tr>")
    table = ""
    if rows:
        table = ('<table style="border-collapse:collapse;font-size:12px"><tr>'
                 + "".join(f'<th style="{cell}">{h}</th>' for h in ("kind", "buffer / element", "block, thread",
                                                                   "CUDA line", "sanitizer says"))
                 + "</tr>" + "".join(rows) + "</table>")
    extra = ""
    if report.launch_error:
        extra += f"<div>the launch raised: <code>{esc(report.launch_error)}</code></div>"
    extra += "".join(f"<div><i>{esc(n)}</i></div>" for n in report.notes)
    if linked:
        extra += "<div><i>lines link to the CUDA tab: the sanitized source is the one shown there</i></div>"
    elif cuda_view is not None and report.source:
        extra += ("<div><i>the sanitized device source differs from the CUDA tab's (another build of the "
                  "kernel): lines link to the listing below</i></div>")
    source = ""
    if report.source and not linked:
        marked: dict[int, list[Any]] = {n: [] for f in report.findings for n in (f.line, f.other_line) if n is not None}
        source = (f"<details><summary>device CUDA source</summary>"
                  f"{highlight_code(report.source, 'cuda', anchor_prefix=rid, marks=marked)}</details>")
    raw = f"<details><summary>raw compute-sanitizer output</summary><pre>{esc(report.raw)}</pre></details>"
    return f'<div class="tilelab-report"><style>{STYLE_CSS}</style>{head}{table}{extra}{source}{raw}</div>'


register(SanitizerReport, {"text/plain": sanitizer_text, "text/html": sanitizer_html})
