"""Static plots of timing results: functions ``model -> matplotlib Figure``.

Figures are built with ``matplotlib.figure.Figure`` and the Agg canvas directly, never through
pyplot, so no global figure state leaks into the user's session and exported notebooks keep
the PNG. ``figure_png(fig)`` gives the bytes an ``image/png`` repr needs.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from ..records.launch import BenchResult, Ceilings, LaunchOverhead, SweepRow, SweepTable

__all__ = [
    "configs_compared",
    "figure_png",
    "latency_vs_size",
    "overhead_plot",
    "roofline_plot",
    "samples_plot",
    "throughput_vs_size",
]


def _figure(width: float = 6.4, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def samples_plot(result: BenchResult):
    """Every sample of one BenchResult in launch order, with the median and quartiles."""
    fig = _figure(6.4, 2.8)
    ax = fig.add_subplot()
    samples = list(result.samples_ms)
    ax.plot(range(len(samples)), samples, ".", markersize=3, label="samples")
    ax.axhline(result.median_ms, color="C1", label=f"median {result.median_ms:.4f} ms")
    ci = getattr(result, "ci_ms", None)
    if ci:
        ax.axhspan(ci[0], ci[1], color="C1", alpha=0.2, label="median 95% interval")
    ax.set_xlabel("launch")
    ax.set_ylabel("ms")
    tele = getattr(result, "telemetry", None)
    title = f"{result.kernel} [{result.mode}]"
    if tele is not None and tele.samples and len(samples) > 1:
        # SM clock over the measurement, stretched onto the launch axis (NVML samples by time)
        span = tele.samples[-1][0] or 1.0
        twin = ax.twinx()
        twin.plot([s[0] / span * (len(samples) - 1) for s in tele.samples], [s[1] for s in tele.samples],
                  color="C2", linewidth=1, label="SM clock (MHz)")
        twin.set_ylabel("SM MHz", color="C2")
        if tele.throttled:
            title += "  THROTTLED: " + ", ".join(tele.reasons)
    ax.set_title(title, fontsize=10, **({"color": "C3"} if tele is not None and tele.throttled else {}))
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _median(row: SweepRow) -> float:
    """The median of a row that ran (``row.ok``: it has one)."""
    return row.median_ms or 0.0


def _size_label(size: Sequence[tuple[str, int]]) -> str:
    return "x".join(str(v) for _, v in size) or "-"


def _size_value(size: Sequence[tuple[str, int]]) -> float:
    """One number per size for the x axis: the product of its extents (problem volume)."""
    return float(math.prod(v for _, v in size)) if size else 0.0


def _series(table: SweepTable, top: int | None) -> list[tuple[str, list[SweepRow], bool]]:
    """(label, rows ordered by size, is_baseline) for the configurations worth drawing.

    Labels name only the parameters that differ between configurations; the shared ones go in
    the title (``_fixed_note``)."""
    by_name: dict[str, list[SweepRow]] = {}
    baseline: dict[str, bool] = {}
    for r in table.rows:
        if not r.ok:
            continue
        name = table.short_name(r)
        by_name.setdefault(name, []).append(r)
        baseline[name] = r.label is not None
    configs = [n for n in table.leading_configs(top) if n in by_name and not baseline[n]]
    names = configs + [n for n in by_name if baseline[n]]
    return [(n, sorted(by_name[n], key=lambda r: _size_value(r.size)), baseline[n]) for n in names]


def _fixed_note(table: SweepTable) -> str:
    common = getattr(table, "common_config", {}) or {}
    text = ", ".join(f"{k}={v}" for k, v in common.items())
    return f"\nevery configuration: {text}" if text else ""


def _against_size(table: SweepTable, metric: str, ylabel: str, top: int | None):
    series = _series(table, top)
    fig = _figure(7.6, 3.8)
    ax = fig.add_subplot()
    sizes = table.sizes
    # Several sizes: a log axis of problem volume, labelled with the sizes; one size: one tick.
    position = {s: (_size_value(s) if len(sizes) > 1 else 0.0) for s in sizes}
    for label, rows, is_base in series:
        xs = [position[r.size] for r in rows]
        ys = [getattr(r, metric) for r in rows]
        if any(y is None for y in ys):
            continue
        ax.plot(xs, ys, "--s" if is_base else "-o", color="black" if is_base else None,
                label=label, markersize=4, linewidth=1.5 if is_base else 1)
    if len(sizes) > 1:
        ax.set_xscale("log")
        ax.set_xticks([position[s] for s in sizes], [_size_label(s) for s in sizes], fontsize=7, rotation=30)
        ax.minorticks_off()
    else:
        ax.set_xticks([0.0], [_size_label(s) for s in sizes] or ["-"], fontsize=8)
        ax.set_xlim(-1, 1)
    ax.set_xlabel("size (" + "x".join(k for k, _ in sizes[0]) + ")" if sizes and sizes[0] else "size")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{table.kernel} ({table.mode}){_fixed_note(table)}", fontsize=9)
    if series:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def latency_vs_size(table: SweepTable, top: int | None = 6):
    """Median latency of each configuration (best ``top``) and of each baseline against size."""
    fig = _against_size(table, "median_ms", "median ms", top)
    fig.axes[0].set_yscale("log")
    return fig


def throughput_vs_size(table: SweepTable, top: int | None = 6):
    """TFLOP/s (or GB/s for kernels without an operation count) against size, baselines dashed;
    where the configurations were timed beside a baseline (``rank_by="ratio"``), their ratio to it
    (:func:`ratio_vs_size`)."""
    if any(r.ratio is not None for r in table.rows if r.ok):
        return ratio_vs_size(table, top)
    use_flops = any(r.tflops for r in table.rows if r.ok)
    return _against_size(table, "tflops" if use_flops else "gbps", "TFLOP/s" if use_flops else "GB/s", top)


def ratio_vs_size(table: SweepTable, top: int | None = 6):
    """Each configuration's ratio to the baseline timed beside it, against size, with a line at
    1 (the baseline): lower is faster. Rows without a ratio are not drawn."""
    baseline = getattr(table, "ratio_baseline", None) or "baseline"
    fig = _against_size(table, "ratio", f"time / {baseline} (side by side)", top)
    ax = fig.axes[0]
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    return fig


def configs_compared(table: SweepTable, size: dict[str, int] | None = None, top: int | None = 20):
    """Horizontal bars: every configuration (and baseline) at one size, fastest on top, each
    labelled with what sets it apart and its value; the shared parameters are in the title."""
    sizes = table.sizes
    key = tuple(size.items()) if size else (sizes[-1] if sizes else ())
    rows = [r for r in table.rows if r.size == key]
    failed = [r for r in rows if not r.ok]
    with_ratio = sorted([r for r in rows if r.ok and r.ratio is not None], key=lambda r: r.ratio or 0.0)
    if with_ratio:
        without = sum(1 for r in rows if r.ok and r.ratio is None and r.label is None)
        return _ratios_compared(table, key, with_ratio[:top] if top is not None else with_ratio, failed, without)
    ok = sorted([r for r in rows if r.ok], key=_median)
    if top is not None:
        ok = ok[:top]
    use_flops = any(r.tflops for r in ok)
    use_gbps = not use_flops and any(r.gbps for r in ok)
    fig = _figure(7.6, max(2.0, 0.26 * (len(ok) + 3)))
    ax = fig.add_subplot()
    values = [(r.tflops if use_flops else (r.gbps if use_gbps else 1.0 / _median(r))) or 0.0 for r in ok]
    colours = ["black" if r.label else ("C2" if r.best else "C0") for r in ok]
    ax.barh(range(len(ok)), values, color=colours)
    ax.set_yticks(range(len(ok)), [table.short_name(r) for r in ok], fontsize=7)
    unit = "TFLOP/s" if use_flops else ("GB/s" if use_gbps else "1 / ms")
    for i, (v, r) in enumerate(zip(values, ok)):
        ax.text(v, i, f" {v:.1f} ({r.median_ms:.3f} ms)" + (" best" if r.best else ""), va="center", fontsize=6.5)
    ax.invert_yaxis()
    ax.set_xlim(0, (max(values) if values else 1.0) * 1.35)
    ax.set_xlabel(unit)
    title = f"{table.kernel} at {_size_label(key)}"
    if failed:
        title += f" ({len(failed)} failed, not drawn)"
    ax.set_title(title + _fixed_note(table), fontsize=9)
    return fig


def _ratios_compared(table: SweepTable, key: tuple, rows: list[SweepRow], failed: list[SweepRow], without: int = 0):
    """The configurations at one size by their ratio to the baseline timed beside each (lower is
    faster), with each ratio's 95% interval as an error bar and a line at 1 (the baseline)."""
    measured = sorted([(r.ratio, r) for r in rows if r.ratio is not None], key=lambda vr: vr[0])
    rows = [r for _, r in measured]
    fig = _figure(7.6, max(2.0, 0.26 * (len(rows) + 3)))
    ax = fig.add_subplot()
    values = [v for v, _ in measured]
    err = [[max(0.0, v - r.ratio_ci[0]) if r.ratio_ci else 0.0 for v, r in measured],
           [max(0.0, r.ratio_ci[1] - v) if r.ratio_ci else 0.0 for v, r in measured]]
    ax.barh(range(len(rows)), values, xerr=err, color=["C2" if r.best else "C0" for r in rows],
            error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.set_yticks(range(len(rows)), [table.short_name(r) for r in rows], fontsize=7)
    for i, (v, r) in enumerate(measured):
        half = f" +-{100 * r.ratio_half_width:.2f}%" if r.ratio_half_width is not None else ""
        ax.text(v, i, f" {v:.4f}{half}" + (" best" if r.best else ""), va="center", fontsize=6.5)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values + [1.0]) * 1.35)
    ax.set_xlabel(f"time / {table.ratio_baseline or 'baseline'} (side by side; lower is faster)")
    title = f"{table.kernel} at {_size_label(key)}, ratio to {table.ratio_baseline or 'baseline'}"
    if failed:
        title += f" ({len(failed)} failed, not drawn)"
    if without:
        title += f" ({without} cut before the baseline's rung, not drawn)"
    ax.set_title(title + _fixed_note(table), fontsize=9)
    return fig


def roofline_plot(ceilings: Ceilings, points: Sequence[tuple[str, BenchResult]] = ()):
    """The roofline of measured ceilings with each (label, BenchResult) placed on it.

    Kernels with an operation count sit on the roofline (x: FLOP per byte, from their counted
    FLOPs and bytes; y: TFLOP/s). Kernels with bytes but no FLOPs (copies, elementwise kernels
    rated by bytes) have no place on that x axis: a second panel on the right draws their
    achieved GB/s as bars against the bandwidth roof, a vertical line at the measured copy
    bandwidth, each labelled with its fraction of it."""
    # (label, result, FLOP/byte, TFLOP/s) on the roof; (label, GB/s) rated by bytes
    on_roof = [(label, r, x, y) for label, r in points if (x := r.intensity) and (y := r.tflops)]
    by_bytes = [(label, gbps) for label, r in points if not r.flops and (gbps := r.gbps)]
    fig = _figure(9.6 if by_bytes else 6.4, 3.6)
    ax = fig.add_subplot(1, 2, 1) if by_bytes else fig.add_subplot()
    ridge = ceilings.ridge_intensity
    xs = [ridge / 1000.0, ridge, ridge * 100.0] + [x for _, _, x, _ in on_roof]
    lo, hi = min(xs) / 2, max(xs) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [ceilings.bound_tflops(x) for x in grid], color="black", linewidth=1.5,
            label=f"roof: {ceilings.copy_gbps:.0f} GB/s, {ceilings.matmul_tflops:.0f} TFLOP/s")
    for i, (label, r, x, y) in enumerate(on_roof):
        frac = r.fraction_of(ceilings)
        ax.plot([x], [y], "o", color=f"C{i}",
                label=f"{label}: {y:.1f} TFLOP/s" + (f" ({100 * frac:.0f}% of roof)" if frac else ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP / byte")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"roofline, {ceilings.device}", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    if by_bytes:
        bw = fig.add_subplot(1, 2, 2)
        values = [gbps for _, gbps in by_bytes]
        bw.barh(range(len(by_bytes)), values, color=[f"C{len(on_roof) + i}" for i in range(len(by_bytes))])
        bw.set_yticks(range(len(by_bytes)), [label for label, _ in by_bytes], fontsize=7)
        bw.axvline(ceilings.copy_gbps, color="black", linewidth=1.5,
                   label=f"bandwidth roof {ceilings.copy_gbps:.0f} GB/s")
        for i, v in enumerate(values):
            bw.text(v, i, f" {v:.0f} GB/s ({100 * v / ceilings.copy_gbps:.0f}%)", va="center", fontsize=7)
        bw.invert_yaxis()
        bw.set_xlim(0, max(values + [ceilings.copy_gbps]) * 1.35)
        bw.set_xlabel("GB/s (read + written)")
        bw.set_title("kernels rated by bytes (no FLOP count)", fontsize=9)
        bw.legend(fontsize=7, loc="lower right")
    return fig


def overhead_plot(overhead: LaunchOverhead):
    """Host microseconds per call for each execution backend (median, with quartile whiskers)."""
    import statistics

    fig = _figure(5.0, 2.6)
    ax = fig.add_subplot()
    names, medians, lows, highs = [], [], [], []
    for backend, samples in overhead.per_backend_us:
        s = sorted(samples)
        q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0], s[0], s[0]]
        med = statistics.median(s)
        names.append(backend)
        medians.append(med)
        lows.append(med - q[0])
        highs.append(q[2] - med)
    ax.barh(range(len(names)), medians, xerr=[lows, highs], color="C0")
    ax.set_yticks(range(len(names)), names)
    for i, m in enumerate(medians):
        ax.text(m, i, f" {m:.1f} us", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("host us per call")
    missing = ", ".join(b for b, _ in overhead.errors)
    ax.set_title(f"launch overhead, {overhead.kernel}" + (f" (not run: {missing})" if missing else ""), fontsize=9)
    return fig
