"""HTML of a Profile: Nsight Compute's figures, measured bank conflicts next to tilelab's
prediction, and the hot lines (device CUDA and, through the #line links, the user's lines)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from ..records.display import register
from ..records.profile import Profile, conflict_verdict, hot_python_lines
from .page import wrap


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _f(value: float | None, spec: str = ".1f", unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def profile_html(profile: Profile, *, conflicts: Sequence[tuple[str, str, float | None, float]] = (),
                 report: Any = None) -> str:
    """``conflicts``: (buffer, op, predicted wavefronts per request, or None) rows to set beside the
    measured ratio; ``report``: a KernelReport with machine code, to sum hot lines per Python line."""
    p = profile
    rows = [
        ("duration", _f(p.duration_ns / 1e3 if p.duration_ns else None, ".2f", " us")),
        ("compute throughput (SOL)", _f(p.sol_compute_pct, ".1f", "% of peak")),
        ("memory throughput (SOL)", _f(p.sol_memory_pct, ".1f", "% of peak")),
        ("occupancy achieved / theoretical", f"{_f(p.achieved_occupancy_pct)}% / {_f(p.theoretical_occupancy_pct)}%"),
        ("registers / thread", p.registers if p.registers is not None else "n/a"),
        ("DRAM read / written", f"{_bytes(p.dram_read_bytes)} / {_bytes(p.dram_write_bytes)}"),
        ("L2 traffic, hit rate", f"{_bytes(p.l2_bytes)}, {_f(p.l2_hit_pct)}%"),
        ("L1 hit rate", _f(p.l1_hit_pct, ".1f", "%")),
        ("tensor pipe", _f(p.tensor_pipe_pct, ".1f", "% of peak (active cycles)")),
        ("FLOPs counted, intensity", f"{_f(p.flops, '.3g')}, {_f(p.intensity, '.1f', ' FLOP/byte')}"),
        ("ncu", f"{p.ncu}, {_f(p.overhead_s, '.1f', ' s')} wall"),
    ]
    head = (f'<div class="tl-head">Nsight Compute profile of {esc(p.kernel)}'
            + (f" on {esc(p.device)}" if p.device else "") + "</div>")
    out = [head + '<table class="tl-table">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
           + "</table>"]
    if p.stalls:
        top = max(v for _, v in p.stalls) or 1.0
        out.append("<p><b>Top warp stalls</b> (cycles per issued instruction)</p><table class=\"tl-table\">" + "".join(
            f'<tr><td><code>{esc(r)}</code></td><td class="tl-num">{v:.2f}</td><td><div style="background:'
            f'var(--jp-brand-color1,#1976d2);height:8px;width:{int(160 * v / top)}px"></div></td></tr>'
            for r, v in p.stalls) + "</table>")
    shared = [(op, getattr(p, f"shared_{op}_requests"), getattr(p, f"shared_{op}_wavefronts"),
               getattr(p, f"shared_{op}_conflicts")) for op in ("ld", "st")]
    if any(r for _, r, _, _ in shared):
        body = "".join(f"<tr><td>{op}</td><td class=\"tl-num\">{_f(r, '.0f')}</td>"
                       f"<td class=\"tl-num\">{_f(w, '.0f')}</td><td class=\"tl-num\">{_f(c, '.0f')}</td>"
                       f"<td class=\"tl-num\">{_f(p.wavefronts_per_request(op), '.2f')}</td></tr>"
                       for op, r, w, c in shared)
        out.append('<p><b>Shared memory</b> (hardware counters)</p><table class="tl-table"><tr><th>op</th>'
                   "<th>requests</th><th>wavefronts</th><th>bank conflicts</th><th>wavefronts / request</th></tr>"
                   + body + "</table>")
    if conflicts:
        rows_html: list[str] = []
        for buffer, op, predicted, measured in conflicts:
            verdict = conflict_verdict(predicted, measured)
            css = ' class="tl-problem"' if verdict == "disagrees" else ""
            verdict = verdict.upper() if verdict == "disagrees" else verdict
            rows_html.append(f"<tr{css}><td><code>{esc(buffer)}</code></td><td>{esc(op)}</td>"
                        f"<td class=\"tl-num\">{_f(predicted, '.2f')}</td><td class=\"tl-num\">{measured:.2f}</td>"
                        f"<td>{verdict}</td></tr>")
        out.append('<p><b>Bank conflicts: tilelab\'s prediction vs the silicon</b></p><table class="tl-table"><tr>'
                   "<th>buffer</th><th>access</th><th>predicted wavefronts / request</th><th>measured</th>"
                   "<th></th></tr>"
                   + "".join(body) + "</table>")
    if p.hot_device_lines:
        total = sum(s for _, s in p.hot_device_lines) or 1.0
        mc = getattr(report, "machine", None)
        device = report.sources.device.split("\n") if report is not None else []
        rows_html = []
        for line, samples in p.hot_device_lines[:15]:
            origin = mc.origin(line) if mc is not None else None
            where = f"{origin.file.rsplit('/', 1)[-1]}:{origin.line}" if origin else ""
            text = device[line - 1].strip()[:100] if 0 < line <= len(device) else ""
            rows_html.append(f'<tr><td class="tl-num">{line}</td><td class="tl-num">{100 * samples / total:.1f}%</td>'
                             f"<td><code>{esc(where)}</code></td><td><code>{esc(text)}</code></td></tr>")
        out.append("<p><b>Hot spots</b> (share of warp-stall samples per device-CUDA line)</p>"
                   '<table class="tl-table"><tr><th>device line</th><th>samples</th><th>Python line</th>'
                   "<th>code</th></tr>"
                   + "".join(rows_html) + "</table>")
        if mc is not None:
            per_py = hot_python_lines(p, mc)
            if per_py:
                out.append('<table class="tl-table"><tr><th>Python line</th><th>samples</th></tr>' + "".join(
                    f"<tr><td><code>{esc(f.rsplit('/', 1)[-1])}:{n}</code></td>"
                    f"<td class=\"tl-num\">{100 * s / total:.1f}%</td></tr>"
                    for (f, n), s in per_py[:10]) + "</table>")
    out += [f'<p class="tl-muted">{esc(n)}</p>' for n in p.notes]
    return "".join(out)


__all__ = ["hot_python_lines", "profile_html"]

register(Profile, {"text/html": lambda p: wrap(profile_html(p))})
