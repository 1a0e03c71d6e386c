"""HTML for the toolchain tier (PTX, SASS, resources, line links) and the IR pass tab.

Functions of a KernelReport only: every fact was derived before (``tilelab.engine.toolchain``,
``tilelab.engine.occupancy``, TileLang's pass instrumentation); here it is laid out and escaped.
Anchors: ``{rid}-ptx-L{n}``, ``{rid}-sass-L{n}`` (line n of the shown listing), ``{rid}-cuda-L{n}``
(the CUDA tab), ``{rid}-py{f}-L{n}`` (line n of the f-th Python file).
"""

from __future__ import annotations

import html
import re
from typing import Any

from ..records.kernel import KernelReport
from ..records.machine import MachineCode, opcode_counts

# Listings longer than this are cut in the HTML (the record keeps the whole text).
MAX_LISTING_LINES = 4000
NOT_ASKED = ("Not computed: the toolchain tier is opt-in. Use <code>tilelab.inspect(kernel, toolchain=True)</code> "
             "or <code>%%tilelang --sass</code> (needs nvcc and ptxas; "
             '<code>pip install "tilelab[toolchain]"</code> provides them).')
IR_NOT_ASKED = ("Not recorded: use <code>tilelab.inspect(kernel, passes=True)</code> or "
                "<code>%%tilelang --passes</code> to record TileLang's lowering pass by pass.")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ref(href: str, text: str, *, links: bool, title: str = "", css: str = "") -> str:
    """A link, or (where the tab it would point into is not on the page) the same text unlinked."""
    cls = f' class="{css}"' if css else ""
    tip = f' title="{esc(title)}"' if title else ""
    if links:
        return f'<a{cls} href="{esc(href)}"{tip}>{text}</a>'
    return f"<span{cls}{tip}>{text}</span>"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _missing(mc: MachineCode | None) -> str | None:
    if mc is None:
        return f'<p class="tl-absent">{NOT_ASKED}</p>'
    if mc.missing and not mc.ptx and not mc.sass:
        log = (f'<details class="tl-sub"><summary>compiler log</summary><pre>{esc(mc.log)}</pre></details>'
               if mc.log else "")
        return f'<p class="tl-absent">&#9888; {esc(mc.missing)}</p>{log}'
    return None


# --------------------------------------------------------------------------------------------
# Summary additions
# --------------------------------------------------------------------------------------------


def resources_html(report: KernelReport, rid: str) -> str:
    """Resources and occupancy per kernel, and the flags (spills, occupancy limits)."""
    mc = report.machine
    if mc is None:
        return ""
    if not mc.resources:
        return f'<p class="tl-absent">&#9888; machine code: {esc(mc.missing or "no resources reported")}</p>'
    rows, attrs = [], []
    for r in mc.resources:
        occ = r.occupancy
        rows.append("".join(f"<td>{c}</td>" for c in (
            esc(r.kernel), r.registers, f"{r.spill_store_bytes} / {r.spill_load_bytes}", r.stack_bytes,
            esc(_size(r.static_shared_bytes)), esc(_size(r.dynamic_shared_bytes)),
            esc(occ.sentence()) if occ else "unknown (symbolic launch shape)",
            esc(", ".join(f"{k} {v}" for k, v in occ.limit_blocks)) if occ else "-",
        )))
        attrs.append(' class="tl-problem"' if r.flags() else "")
    head = "".join(f"<th>{h}</th>" for h in ("kernel", "registers / thread", "spill stores / loads (B)", "stack (B)",
                                             "static smem", "dynamic smem", f"occupancy on {esc(mc.arch)}",
                                             "blocks / SM allowed by"))
    body = "".join(f"<tr{a}>{r}</tr>" for r, a in zip(rows, attrs))
    out = f'<table class="tl-table"><tr>{head}</tr>{body}</table>'
    flags = mc.flags()
    if flags:
        out += '<ul class="tl-problems">' + "".join(f"<li>&#9888; {esc(f)}</li>" for f in flags) + "</ul>"
    out += ('<p class="tl-muted">ptxas -v via ' + esc(", ".join(f"{k} {v}" for k, v in mc.tools)) + "</p>")
    return out


def _clip(text: str, limit: int = 90) -> str:
    """``text`` whole when it fits, else cut after the last whole token that fits, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = max(text.rfind(c, 0, limit) for c in " ,;")
    return text[:cut if cut > limit // 2 else limit].rstrip(" ,;") + " \u2026"


def _cell_line(source: str | None, op: str) -> int | None:
    """The cell line of a tile op ("T.copy A -> A_shared"): the first ``T.copy(`` line naming its
    operands in order."""
    if not source:
        return None
    m = re.match(r"(T\.\w+)\s+(.*)$", op)
    if not m:
        return None
    names = [re.escape(n.strip()) for n in m.group(2).split("->") if n.strip()]
    pattern = re.compile(rf"{re.escape(m.group(1))}\s*\(" + "".join(rf".*\b{n}\b" for n in names))
    return next((n for n, line in enumerate(source.split("\n"), 1) if pattern.search(line)), None)


def lowering_html(report: KernelReport, rid: str, links: bool = True, source: str | None = None,
                  cell_links: bool = False) -> str:
    """The lowering explainer: each tile op's hardware path, its cell and device lines, and
    fallbacks. A fallback is a slower path, not a problem: its row is marked as such (amber), and
    the title counts them apart from the problems."""
    low = report.lowering
    if low is None or not low.ops:
        return ""
    device = report.sources.device.split("\n")
    rows = []
    for o in low.ops:
        where = []
        line = _cell_line(source, o.op)
        if line:
            where.append(_ref(f"#{rid}-cell-L{line}", f"cell {line}", links=cell_links))
        if o.evidence_line:
            full = device[o.evidence_line - 1] if 0 < o.evidence_line <= len(device) else o.evidence
            where.append(_ref(f"#{rid}-cuda-L{o.evidence_line}", f"CUDA {o.evidence_line}", links=links,
                              title=full.strip())
                         + f'<br><code class="tl-muted">{esc(_clip(full))}</code>')
        css = "" if o.fast else ' class="tl-slow"'
        stage = f" (stage of {o.stages})" if o.stages else ""
        rows.append(f"<tr{css}><td><code>{esc(o.op)}</code>{esc(stage)}</td><td>{esc(o.path)}</td>"
                    f"<td>{' '.join(where)}</td><td>{esc(o.reason)}</td></tr>")
    head = "<tr><th>tile op</th><th>hardware path</th><th>where</th><th>why not the fast path</th></tr>"
    ws = ("warp-specialized: " + ("yes, " if low.warp_specialized else "no, ") + low.warp_specialization_reason)
    pipe = ""
    if low.stages:
        per = f"{low.stage_bytes / 1024:.1f} KiB of shared memory per stage" if low.stage_bytes else ""
        total = f", {low.stages * low.stage_bytes / 1024:.1f} KiB in all" if low.stage_bytes else ""
        pipe = f"; pipeline: {low.stages} stages{', ' + per if per else ''}{total}"
    slow = len(low.fallbacks)
    count = f", {slow} tile op(s) on a slower path (marked)" if slow else ""
    return (f'<p><b>Lowering</b> <span class="tl-muted">({esc(ws)}{esc(pipe)}{esc(count)})</span></p>'
            f'<div class="tl-scroll" style="overflow-x:auto"><table class="tl-table tl-lowering">'
            f'{head}{"".join(rows)}</table></div>')


# --------------------------------------------------------------------------------------------
# Listings
# --------------------------------------------------------------------------------------------


def _shown_ptx(mc: MachineCode) -> list[tuple[int, str, int]]:
    """(PTX line number, text, device line) for the lines worth showing (no .loc/.file noise)."""
    out: list[tuple[int, str, int]] = []
    for i, text in enumerate(mc.ptx.split("\n")):
        s = text.strip()
        if s.startswith((".loc", ".file", "$L__info", "//")) or (not s and out and not out[-1][1].strip()):
            continue
        out.append((i + 1, text, mc.ptx_device_lines[i] if i < len(mc.ptx_device_lines) else 0))
    return out


def _shown_sass(mc: MachineCode) -> list[tuple[int, str, int]]:
    return [(i + 1, text, mc.sass_device_lines[i] if i < len(mc.sass_device_lines) else 0)
            for i, text in enumerate(mc.sass.split("\n"))]


def _listing(rows: list[tuple[int, str, int]], rid: str, kind: str, mc: MachineCode, links: bool = True) -> str:
    """A <pre> in which each run of lines from one device line starts with an anchor and a link to it.

    Only run starts carry markup (an id and the link): a Hopper GEMM's SASS is ~2,000 lines and
    per-line spans would triple its weight.
    """
    total = len(rows)
    rows = rows[:MAX_LISTING_LINES]
    out = [f'<pre class="tl-src tl-asm" data-lines="{total}">']
    previous = None
    for number, text, device in rows:
        text = " ".join(text.split()) if kind == "sass" else text.replace("\t", "  ")
        if device and device != previous:
            origin = mc.origin(device)
            where = f" {origin.file.rsplit('/', 1)[-1]}:{origin.line}" if origin else ""
            out.append(f'<span class="tl-mark" id="{rid}-{kind}-L{number}">{esc(text)} '
                       + _ref(f"#{rid}-cuda-L{device}", f"CUDA {device}{esc(where)}", links=links, css="tl-back")
                       + "</span>\n")
        else:
            out.append(esc(text) + "\n")
        previous = device or previous
    out.append("</pre>")
    if total > MAX_LISTING_LINES:
        out.append(f'<p class="tl-muted">first {MAX_LISTING_LINES} of {total} lines shown; the whole text is in '
                   f"report.machine.{kind}</p>")
    return "".join(out)


def ptx_html(report: KernelReport, rid: str, links: bool = True) -> str:
    missing = _missing(report.machine)
    if missing:
        return missing
    mc = report.machine
    assert mc is not None
    return (f'<p class="tl-muted">PTX from nvcc -lineinfo for {esc(mc.arch)}</p>'
            + _listing(_shown_ptx(mc), rid, "ptx", mc, links))


def sass_html(report: KernelReport, rid: str, links: bool = True) -> str:
    missing = _missing(report.machine)
    if missing:
        return missing
    mc = report.machine
    assert mc is not None
    note = f'<p class="tl-absent">&#9888; {esc(mc.missing)}</p>' if mc.missing else ""
    if not mc.sass:
        return note
    ops = opcode_counts(mc.sass.split("\n"), range(1, len(_shown_sass(mc)) + 1))
    top = ", ".join(f"{op} {n}" for op, n in ops.most_common(12))
    return (note + f'<p class="tl-muted">SASS for {esc(mc.arch)} ({sum(ops.values())} instructions; most frequent: '
            f"{esc(top)})</p>" + _listing(_shown_sass(mc), rid, "sass", mc, links))


# --------------------------------------------------------------------------------------------
# Python line -> device line -> PTX/SASS
# --------------------------------------------------------------------------------------------


def cuda_marks(report: KernelReport, rid: str) -> dict[int, list[tuple[str, str, str, str]]]:
    """Per device line: (tab, href, label, title) links to its Python line (tab ``"lines"``) and
    its first SASS instruction (tab ``"sass"``)."""
    mc = report.machine
    if mc is None:
        return {}
    files = [f for f, _ in mc.python_sources]
    marks: dict[int, list[tuple[str, str, str, str]]] = {}
    for o in mc.origins:
        for n in range(o.first, o.last + 1):
            name = o.file.rsplit("/", 1)[-1]
            href = f"#{rid}-py{files.index(o.file)}-L{o.line}" if o.file in files else f"#{rid}-lines"
            marks.setdefault(n, []).append(("lines", href, f"{name}:{o.line}", o.file))
    for d, (line, count) in mc.sass_of_device_lines().items():
        marks.setdefault(d, []).append(("sass", f"#{rid}-sass-L{line}", f"SASS x{count}", "first SASS instruction"))
    return marks


def lines_html(report: KernelReport, rid: str, links: bool = True) -> str:
    """The user's Python lines, each with the device lines and the SASS they became."""
    missing = _missing(report.machine)
    if missing:
        return missing
    mc = report.machine
    assert mc is not None
    if not mc.origins:
        return ('<p class="tl-absent">No #line directives could be matched to this device source, so its lines '
                "are not linked to Python lines.</p>")
    sass_lines = mc.sass.split("\n") if mc.sass else []
    device_lines = report.sources.device.split("\n")
    out = []
    groups = mc.python_line_groups()
    files = [f for f, _ in mc.python_sources]
    texts = dict(mc.python_sources)
    rows = []
    for (file, line), devs in groups.items():
        known = file in texts and line <= texts[file].count("\n") + 1
        src_line = texts[file].split("\n")[line - 1].strip() if known else ""
        sass = [n for d in devs for n in mc.sass_lines_of(d)]
        ops = opcode_counts(sass_lines, sass)
        user = file in files
        anchor = f' id="{rid}-py{files.index(file)}-L{line}"' if user else ""
        cuda = ", ".join(_ref(f"#{rid}-cuda-L{d}", str(d), links=links) for d in sorted(set(devs))[:12])
        first = " " + _ref(f"#{rid}-sass-L{sass[0]}", "first", links=links) if sass and links else ""
        where = f"{file.rsplit('/', 1)[-1]}:{line}" + ("" if user else " (inside TileLang)")
        excerpt = esc(device_lines[devs[0] - 1].strip()[:120]) if devs and devs[0] <= len(device_lines) else ""
        rows.append(f"<tr{anchor}><td><code>{esc(where)}</code></td><td><code>{esc(src_line[:100])}</code></td>"
                    f"<td>{cuda}<br><code class=\"tl-muted\">{excerpt}</code></td>"
                    f'<td class="tl-num">{len(sass)}{first}</td>'
                    f"<td>{esc(', '.join(f'{k} {v}' for k, v in ops.most_common(6)))}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("Python line", "source", "device CUDA lines", "SASS instructions",
                                             "opcodes"))
    out.append(_tile_op_rows(report, rid, sass_lines, links))
    out.append(f'<table class="tl-table"><tr>{head}</tr>{"".join(rows)}</table>')
    out.append('<p class="tl-muted">From TileLang\'s #line directives (pass config tl.emit_line_directives) and the '
               "toolchain's line info; lines inside TileLang are its macros (e.g. the GEMM lowering).</p>")
    return "".join(out)


def _tile_op_rows(report: KernelReport, rid: str, sass_lines: list[str], links: bool) -> str:
    """Each tile op -> the device line that carries it (the lowering explainer's evidence) -> its SASS.

    TileLang lowers T.gemm through its own macros, so the #line directives of the GEMM's code
    name TileLang's files, not the user's line: the op's identity comes from the IR instead."""
    low, mc = report.lowering, report.machine
    if low is None or mc is None:
        return ""
    rows = []
    for o in low.ops:
        if not o.evidence_line:
            continue
        sass = mc.sass_lines_of(o.evidence_line)
        ops = opcode_counts(sass_lines, sass)
        first = " " + _ref(f"#{rid}-sass-L{sass[0]}", "first", links=links) if sass and links else ""
        rows.append(f"<tr><td><code>{esc(o.op)}</code></td><td>{esc(o.path)}</td>"
                    f"<td>{_ref(f'#{rid}-cuda-L{o.evidence_line}', str(o.evidence_line), links=links)}"
                    f'<br><code class="tl-muted">{esc(o.evidence[:100])}</code></td>'
                    f'<td class="tl-num">{len(sass)}{first}</td>'
                    f"<td>{esc(', '.join(f'{k} {v}' for k, v in ops.most_common(6)))}</td></tr>")
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("tile op", "path", "device line", "SASS instructions", "opcodes"))
    return (f'<p><b>Tile ops</b></p><table class="tl-table"><tr>{head}</tr>{"".join(rows)}</table>'
            '<p><b>Python lines</b></p>')


# --------------------------------------------------------------------------------------------
# IR passes
# --------------------------------------------------------------------------------------------

MAX_DIFF_HTML_LINES = 40  # per pass; the record keeps up to 400


def ir_html(report: KernelReport, rid: str) -> str:
    trace = report.passes
    if trace is None:
        return f'<p class="tl-absent">{IR_NOT_ASKED}</p>'
    rows = []
    for i, step in enumerate(trace.steps):
        state = '<span class="tl-ok">changed</span>' if step.changed else '<span class="tl-muted">unchanged</span>'
        diff = ""
        if step.changed:
            lines = step.diff.split("\n")
            shown = "".join(_diff_line(t) for t in lines[:MAX_DIFF_HTML_LINES])
            more = (f"\n... {len(lines) - MAX_DIFF_HTML_LINES} more diff lines"
                    if len(lines) > MAX_DIFF_HTML_LINES else "")
            more += "\n... diff cut by the recorder" if step.diff_cut else ""
            diff = (f'<details class="tl-sub"><summary>diff ({len(lines)} lines)</summary>'
                    f'<pre class="tl-src">{shown}{esc(more)}</pre></details>')
        rows.append(f'<tr id="{rid}-pass-{i}"><td class="tl-num">{i + 1}</td><td><code>{esc(step.name)}</code></td>'
                    f'<td>{state}</td><td class="tl-num">{step.seconds * 1000:.2f}</td><td>{diff}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("#", "pass", "", "ms", "TVMScript diff"))
    summary = (f"<p>{len(trace.steps)} passes, {len(trace.changed)} changed the module, "
               f"{trace.total_seconds * 1000:.1f} ms in all (TileLang's pass instrumentation).</p>")
    return summary + f'<table class="tl-table"><tr>{head}</tr>{"".join(rows)}</table>'


def _diff_line(text: str) -> str:
    color = ""
    if text.startswith("+") and not text.startswith("+++"):
        color = ' style="background:rgba(46,160,67,.18)"'
    elif text.startswith("-") and not text.startswith("---"):
        color = ' style="background:rgba(229,57,53,.16)"'
    return f"<span{color}>{esc(text)}\n</span>"


__all__ = ["cuda_marks", "ir_html", "lines_html", "lowering_html", "ptx_html", "resources_html", "sass_html"]
