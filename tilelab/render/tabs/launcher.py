"""The Launcher tab: each backend's host code (or why it is absent), opened at its kernel launches
and TMA encode calls, the rest folded in gaps that open in the page."""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Sequence

from ...engine.links import launch_lines, launcher_parts
from ...records.kernel import KernelReport
from ..code import LineMark, highlight_code
from ..page import Page, Tab, esc, line_count, make_page, part_anchor, register

# A launcher other than the first (open) one, past this many lines, is drawn from its interesting
# lines: its head, the lines that launch a kernel or encode a TMA descriptor, and those around them.
_PART_LINES = 100
_PART_HEAD = 0
_PART_CONTEXT = 2
_INTERESTING = re.compile(r"Launch|launch\(|FuncSetAttribute|func_set_attribute|"
                          r"set_max_dynamic_shared|cluster|Cluster")

# The lines of a launcher that launch each device kernel (found in tilelab.engine.links); kept under
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
            reason = esc(item.reason or "no reason given")
            out.append(f'<p class="tl-absent"><b>{esc(b)}</b>: absent &mdash; {reason}</p>')
            continue
        for p, (part, text, language) in enumerate(launcher_parts(item)):
            anchor = part_anchor(rid, b, p)
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
                       f'<span class="tl-muted">({esc(language)}, {line_count(text)} lines{in_part})</span></summary>'
                       f"{code}</details>")
    return "".join(out)


def _interesting_lines(text: str, marks: dict[int, list[LineMark]], kernels: Sequence[str],
                       calls: set[int] | frozenset[int] = frozenset()) -> set[int] | None:
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


def launcher_text(report: KernelReport, page: Page) -> str:
    """One line: every backend's launcher and its length, or why it is absent."""
    launchers = []
    for backend in report.launcher_backends:
        item = report.sources.launcher(backend)
        if item is None:
            launchers.append(f"{backend}: not generated")
        elif item.text is None:
            launchers.append(f"{backend}: absent ({item.reason})")
        else:
            launchers.append(f"{backend}: {line_count(item.text)} lines")
    return "Launchers: " + "; ".join(launchers)


register(Tab("launcher", "Launcher", 40, lambda r, page: launcher_html(r, page=page), launcher_text))
