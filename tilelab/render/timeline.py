"""A :class:`~tilelab.records.timeline.Timeline` as a Gantt chart (SVG), its summary (HTML), and a
Perfetto / chrome://tracing trace (the trace-event JSON format).

Functions of the record only. The chart has one lane per block x warp group (a row per warp in
it), phases coloured by kind; each phase's ``<title>`` (the hover) gives its label, iteration,
duration, the user's line and the device line. Every compiler or user string is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..records.display import register
from ..records.timeline import KINDS, Timeline, TimelineSpan

# kind -> (JupyterLab colour variable, fallback, legend text)
KIND_STYLE: dict[str, tuple[str, str, str]] = {
    "barrier_wait": ("--jp-warn-color1", "#e0a000", "barrier wait"),
    "tma_issue": ("--jp-brand-color1", "#1976d2", "TMA issue"),
    "copy_issue": ("--jp-brand-color2", "#64b5f6", "cp.async issue"),
    "mma": ("--jp-success-color1", "#388e3c", "MMA issue / run"),
    "mma_wait": ("--jp-success-color3", "#a5d6a7", "MMA wait"),
    "epilogue": ("--jp-accent-color1", "#8e24aa", "epilogue"),
    "store": ("--jp-accent-color2", "#ce93d8", "store"),
    "kernel": ("--jp-layout-color3", "#9e9e9e", "kernel (setup, or no phase recognised)"),
}

CSS = "".join(
    f".tlt-k-{k}{{fill:var({var},{fallback})}}" for k, (var, fallback, _) in KIND_STYLE.items()
) + (".tlt-flow{stroke:var(--jp-ui-font-color2,#777);stroke-width:0.6;opacity:.55}"
     ".tlt-text{fill:var(--jp-ui-font-color1,#222);font:11px var(--jp-code-font-family,monospace)}"
     ".tlt-axis{stroke:var(--jp-border-color1,#bbb);stroke-width:1}"
     ".tlt-lane{fill:var(--jp-layout-color2,#f3f3f3)}")

LABEL_W = 230
CHART_W = 900
ROW_H = 12
LANE_GAP = 6


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _ns(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3f} ms"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.2f} us"
    return f"{value:.0f} ns"


def span_title(span: TimelineSpan, cell_file: str | None = None) -> str:
    """The hover text of a phase."""
    parts = [span.label or span.kind, f"{span.kind}, {_ns(span.duration_ns)} (from {_ns(span.start_ns)})"]
    if span.iteration is not None:
        parts.append(f"iteration {span.iteration}")
    parts.append(f"block {span.block}, warp {span.warp} (warp group {span.warp_group}, {span.role}), SM {span.sm}")
    if span.cell_line is not None:
        parts.append(f"your line {span.cell_line}" + (f" ({cell_file})" if cell_file else ""))
    if span.device_line is not None:
        parts.append(f"device line {span.device_line} (CUDA tab)")
    return "\n".join(parts)


Links = Callable[[TimelineSpan], "str | None"]


def timeline_svg(tl: Timeline, links: Links | None = None) -> str:
    """The Gantt chart: one lane per traced block x warp group, time from the first traced start.
    ``links`` gives a phase's link target on the page (an anchor), or None."""
    lanes = tl.lanes()
    if not tl.spans:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="20"><text class="tlt-text" x="4" y="14">' \
               "no phases were recorded</text></svg>"
    t0 = min(s.start_ns for s in tl.spans)
    t1 = max(s.end_ns for s in tl.spans)
    scale = CHART_W / max(t1 - t0, 1.0)
    rows: dict[tuple, float] = {}
    lane_top: dict[tuple, float] = {}
    y = 18.0
    out: list[str] = []
    for lane in lanes:
        warps = sorted({s.warp for s in tl.spans if (s.block, s.warp_group) == lane})
        roles = sorted({s.role for s in tl.spans if (s.block, s.warp_group) == lane and s.role != "all"}) or ["all"]
        sm = next(s.sm for s in tl.spans if (s.block, s.warp_group) == lane)
        lane_top[lane] = y
        height = ROW_H * len(warps)
        out.append(f'<rect class="tlt-lane" x="{LABEL_W}" y="{y:.1f}" width="{CHART_W}" height="{height}"/>')
        out.append(f'<text class="tlt-text" x="2" y="{y + 10:.1f}">block {esc(lane[0])} WG{lane[1]} '
                   f'{esc("/".join(roles))} SM{sm}</text>')
        for n, w in enumerate(warps):
            rows[(lane[0], w)] = y + n * ROW_H
        y += height + LANE_GAP
    index = {id(s): i for i, s in enumerate(tl.spans)}
    for s in tl.spans:
        x = LABEL_W + (s.start_ns - t0) * scale
        span_w = max(s.duration_ns * scale, 0.5)
        top = rows[(s.block, s.warp)]
        kind = s.kind if s.kind in KIND_STYLE else "kernel"
        rect = (f'<rect class="tlt-k-{kind}" data-span="{index[id(s)]}" x="{x:.2f}" y="{top + 1:.1f}" '
                f'width="{span_w:.2f}" height="{ROW_H - 2}"><title>{esc(span_title(s, tl.cell_file))}</title></rect>')
        target = links(s) if links is not None else None
        out.append(f'<a href="{esc(target)}">{rect}</a>' if target else rect)
    for f in tl.flows:
        a, b = tl.spans[f.source], tl.spans[f.target]
        xa, xb = LABEL_W + (a.start_ns - t0) * scale, LABEL_W + (b.end_ns - t0) * scale
        ya, yb = rows[(a.block, a.warp)] + ROW_H / 2, rows[(b.block, b.warp)] + ROW_H / 2
        out.append(f'<line class="tlt-flow" x1="{xa:.2f}" y1="{ya:.1f}" x2="{xb:.2f}" y2="{yb:.1f}"/>')
    # the time axis
    out.append(f'<line class="tlt-axis" x1="{LABEL_W}" y1="14" x2="{LABEL_W + CHART_W}" y2="14"/>')
    for n in range(5):
        t = (t1 - t0) * n / 4
        out.append(f'<text class="tlt-text" x="{LABEL_W + t * scale - (20 if n == 4 else 0):.1f}" y="11">'
                   f"{esc(_ns(t))}</text>")
    svg_h = y + 4
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tlt-chart" width="{LABEL_W + CHART_W + 4}" '
            f'height="{svg_h:.0f}" viewBox="0 0 {LABEL_W + CHART_W + 4} {svg_h:.0f}" role="img" '
            f'aria-label="timeline of {esc(tl.kernel)}"><style>{CSS}</style>{"".join(out)}</svg>')


GRID_ROW_H = 3


def grid_svg(tl: Timeline) -> str:
    """Every block of the grid on its SM (a row per SM, time across): start skew and the tail."""
    if not tl.blocks:
        return ""
    sms = sorted({b.sm for b in tl.blocks})
    row = {sm: n for n, sm in enumerate(sms)}
    t1 = max(b.end_ns for b in tl.blocks)
    scale = CHART_W / max(t1, 1.0)
    traced = set(tl.traced_blocks)
    out = []
    for b in tl.blocks:
        cls = "tlt-k-tma_issue" if b.block in traced else "tlt-k-kernel"
        out.append(f'<rect class="{cls}" data-block="{b.index}" x="{LABEL_W + b.start_ns * scale:.2f}" '
                   f'y="{14 + row[b.sm] * GRID_ROW_H}" width="{max((b.end_ns - b.start_ns) * scale, 0.5):.2f}" '
                   f'height="{GRID_ROW_H - 0.5}">'
                   f'<title>{esc(f"block {b.block} on SM {b.sm}: {_ns(b.start_ns)} to {_ns(b.end_ns)}")}'
                   "</title></rect>")
    height = 16 + len(sms) * GRID_ROW_H
    label = f"grid: {len(tl.blocks)} blocks on {len(sms)} SMs (traced blocks in colour), 0 to {_ns(t1)}"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tlt-grid" width="{LABEL_W + CHART_W + 4}" '
            f'height="{height}" role="img" aria-label="{esc(label)}"><style>{CSS}</style>'
            f'<text class="tlt-text" x="2" y="11">{esc(label)}</text>{"".join(out)}</svg>')


def legend_html(tl: Timeline) -> str:
    used = [k for k in KINDS if any(s.kind == k for s in tl.spans)]
    items = "".join(f'<span style="margin-right:10px"><svg width="10" height="10"><style>{CSS}</style>'
                    f'<rect class="tlt-k-{k}" width="10" height="10"/></svg> {esc(KIND_STYLE[k][2])}</span>'
                    for k in used)
    return f'<div class="tl-muted">{items}</div>'


def summary_html(tl: Timeline) -> str:
    s = tl.summary
    rows = []
    if s is not None:
        for r in s.roles:
            kinds = ", ".join(f"{k} {v:.0%}" for k, v in r.by_kind[:4])
            rows.append(f"<tr><td>{esc(r.role)}</td><td>{r.warps}</td><td>{r.busy:.0%}</td><td>{r.waiting:.0%}</td>"
                        f"<td>{r.other:.0%}</td><td>{esc(kinds)}</td></tr>")
    table = ('<table class="tl-table"><tr><th>role</th><th>warps traced</th><th>busy</th><th>waiting</th>'
             "<th>other code</th><th>largest phases</th></tr>" + "".join(rows) + "</table>") if rows else ""
    facts = []
    if s is not None:
        facts.append(f"pipeline bubbles: {s.bubbles} consumer waits on a full stage longer than "
                     f"{_ns(s.bubble_threshold_ns)}, {_ns(s.bubble_ns)} in all")
        if s.run_ahead is not None:
            facts.append(f"producer run-ahead: {s.run_ahead:.2f} stages issued beyond the one a consumer waits for, "
                         "on average, when it starts waiting")
        facts.append(f"grid: {_ns(s.grid_ns)} on {s.sms} SMs; "
                     f"block start skew in the first wave {_ns(s.start_skew_ns)}; "
                     f"tail (first SM idle to grid end) {_ns(s.tail_ns)}")
    if tl.overhead is not None:
        facts.append(f"instrumentation overhead: {tl.overhead:+.1%} (median {tl.instrumented_ms:.4f} ms instrumented "
                     f"vs {tl.plain_ms:.4f} ms plain, side by side)")
    facts.append(f"dropped marks: {tl.dropped}")
    facts.append(f"SM clock {tl.clock_ghz:.3f} GHz; {len(tl.spans)} phases of {len(tl.traced_blocks)} traced "
                 f"block(s), granularity {esc(tl.granularity)}")
    notes = "".join(f"<li>{esc(n)}</li>" for n in tl.notes)
    return (table + phases_html(tl) + "<ul>" + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>"
            + (f'<div class="tl-muted">Notes:</div><ul>{notes}</ul>' if notes else ""))


def phases_html(tl: Timeline, limit: int = 12) -> str:
    """The phases with the most time (all traced warps together), each with its lines."""
    from ..instrument.decode.timeline import phase_totals

    rows = "".join(
        f"<tr><td>{esc(g['role'])}</td><td>{esc(g['label'] or g['kind'])}</td><td>{g['count']}</td>"
        f"<td>{esc(_ns(g['total_ns']))}</td><td>{esc(_ns(g['mean_ns']))}</td>"
        f"<td>{'L' + str(g['cell_line']) if g['cell_line'] is not None else '-'}</td>"
        f"<td>{'L' + str(g['device_line']) if g['device_line'] is not None else '-'}</td></tr>"
        for g in phase_totals(tl.spans)[:limit])
    if not rows:
        return ""
    return ('<table class="tl-table"><tr><th>role</th><th>phase</th><th>count</th><th>total</th><th>mean</th>'
            f"<th>your line</th><th>device line</th></tr>{rows}</table>")


def timeline_html(tl: Timeline, links: Links | None = None) -> str:
    """Chart, legend and summary, as a standalone fragment (the record's notebook display);
    ``links`` as :func:`timeline_svg` takes them (the inspector's tab links phases to its lines)."""
    head = (f'<div class="tl-head">{esc(tl.kernel)} <span class="tl-muted">timeline on {esc(tl.device)}, '
            f'{esc(tl.backend)}, grid {esc(tl.grid)}</span></div>')
    return (f'<div class="tilelab-report tlt">{head}<div style="overflow-x:auto">{timeline_svg(tl, links)}</div>'
            f'{legend_html(tl)}{summary_html(tl)}<div style="overflow-x:auto">{grid_svg(tl)}</div></div>')


def timeline_text(tl: Timeline) -> str:
    """The timeline's summary in plain text: what it measured, where the time went, how well the
    pipeline kept its consumers fed."""
    lines = [f"Timeline of {tl.kernel} on {tl.device}, {tl.backend}, grid {tl.grid}: {len(tl.spans)} phases of "
             f"{len(tl.traced_blocks)} traced block(s)"]
    s = tl.summary
    if s is not None:
        lines += [f"  {r.role}: {r.warps} warp(s), busy {r.busy:.0%}, waiting {r.waiting:.0%}, other {r.other:.0%}"
                  for r in s.roles]
        lines.append(f"  pipeline bubbles: {s.bubbles} ({_ns(s.bubble_ns)} in all)")
        lines.append(f"  grid: {_ns(s.grid_ns)} on {s.sms} SMs; tail {_ns(s.tail_ns)}")
    if tl.overhead is not None:
        lines.append(f"  instrumentation overhead: {tl.overhead:+.1%}")
    lines.append(f"  dropped marks: {tl.dropped}")
    return "\n".join(lines)


__all__ = ["KIND_STYLE", "grid_svg", "legend_html", "phases_html", "span_title", "summary_html",
           "timeline_html", "timeline_svg", "timeline_text"]

register(Timeline, {"text/html": timeline_html})
