"""Text, HTML and PNG of the launch records (run, bench, ceilings, launch overhead, sweep).

Functions of one record each; the records in :mod:`tilelab.records.launch` are shown through
their ``__repr__``/``_repr_html_``/``_repr_png_``, importing this module when they are shown.
Every string from a user or a compiler is escaped; styles use JupyterLab's CSS variables.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from ..records.display import register
from ..records.launch import (
    BENCH_MODES,
    BenchResult,
    Ceilings,
    LaunchOverhead,
    OutputCheck,
    RunResult,
    SweepRow,
    SweepTable,
)

_TABLE = "border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);font-size:12px"
_CELL = "border:1px solid var(--jp-border-color2,#ccc);padding:2px 6px;text-align:left"
_HIGHLIGHT = "font-weight:bold;background:var(--jp-layout-color2,#eef)"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table_html(header: list[str], rows: list[list[Any]], highlight: set[int] | None = None) -> str:
    """A plain bordered table; rows whose index is in ``highlight`` are bold."""
    out = [f'<table style="{_TABLE}"><thead><tr>']
    out += [f'<th style="{_CELL}">{_esc(h)}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        style = f' style="{_HIGHLIGHT}"' if highlight and i in highlight else ""
        out.append(f"<tr{style}>" + "".join(f'<td style="{_CELL}">{_esc(c)}</td>' for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def fmt(value: float | None, spec: str = ".4g") -> str:
    """A number for a table cell; "-" for None and NaN."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


UNKNOWN = "\u2014"  # an em dash: a rate tilelab cannot compute (the kernel's work is not known)


def rate(value: float | None, spec: str) -> str:
    """A throughput for a table cell: an em dash where the work is unknown (no FLOP or byte count,
    so no rate; never a 0), and a small rate with three significant digits instead of zeros."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value <= 0:
        return UNKNOWN
    text = format(value, spec)
    return text if float(text) else format(value, ".3g")


def run_verdict(result: RunResult) -> str:
    """A run's verdict in the page's words: PASS or FAIL, and what a PASS checked when no reference
    was given (every element written, none NaN or inf), with how to compare the values too."""
    if not result.passed:
        return "FAIL"
    if result.reference:
        return "PASS"
    return "PASS (every element written, none NaN or inf; no reference given: --ref EXPR compares the values)"


def launch_summary(results: Sequence[object]) -> list[tuple[str, str, str]]:
    """What the Summary says of a cell's ``--run``/``--bench`` results: one row per result,
    ``(label, text, verdict)`` with ``verdict`` "pass", "fail" or "" (a bench). A run says PASS/FAIL
    (or that it ran with no reference) and the worst error; a bench its median and rates."""
    rows = []
    for result in results:
        if not isinstance(result, (RunResult, BenchResult)):
            continue  # a timeline, a profile...: shown in their own tabs
        sizes = ", ".join(f"{k}={v}" for k, v in result.sizes)
        at = f" ({sizes})" if sizes else ""
        if isinstance(result, RunResult):
            err = result.rel_error
            detail = f", worst rel error {err:.3e}" if err is not None else ""
            rows.append((f"run{at}", f"{run_verdict(result)}{detail}", "pass" if result.passed else "fail"))
        else:
            rates = f"; TFLOP/s {rate(result.tflops, '.1f')}, GB/s {rate(result.gbps, '.0f')}"
            spread = f" (spread {100 * result.spread:.2f}%)"
            rows.append((f"bench{at}", f"median {result.median_ms:.4f} ms{spread}{rates}", ""))
    return rows


def launch_summary_html(results: Sequence[object]) -> str:
    """:func:`launch_summary` as a small table for the inspector's Summary ("" with no results)."""
    rows = launch_summary(results)
    if not rows:
        return ""
    colour = {"pass": "var(--jp-success-color1,#2a2)", "fail": "var(--jp-error-color1,#c22)"}
    cells = "".join(
        f'<tr><th style="text-align:left;padding-right:8px">{_esc(label)}</th>'
        + (f'<td><b style="color:{colour[verdict]}">{_esc(_verdict_word(text))}</b>'
           f'{_esc(text[len(_verdict_word(text)):])}</td>'
           if verdict else f"<td>{_esc(text)}</td>") + "</tr>"
        for label, text, verdict in rows)
    return f'<table class="tl-launch-summary">{cells}</table>'


def _verdict_word(text: str) -> str:
    """The verdict that opens a row's text ("PASS" of "PASS, worst rel error ..."), without its comma."""
    return text.split(" ")[0].rstrip(",")


def _notes_html(notes: Any) -> str:
    return "".join(f"<div><i>{_esc(n)}</i></div>" for n in notes)


def _png(figure_fn: Any, *args: Any) -> bytes | None:
    try:
        from .plots import figure_png
    except ImportError:  # matplotlib missing: text and HTML still work
        return None
    return figure_png(figure_fn(*args))


# ------------------------------------------------------------------------------------------
# RunResult
# ------------------------------------------------------------------------------------------


def _output_figures(o: OutputCheck) -> str:
    figures = []
    if o.rel_error is not None:
        figures.append(f"rel error {fmt(o.rel_error, '.3e')} (tolerance {fmt(o.tolerance, '.1e')})")
        figures.append(f"max abs error {fmt(o.max_abs_error, '.3e')}")
    if o.unwritten:
        figures.append(f"{o.unwritten} elements never written (first at {list(o.first_unwritten or ())})")
    elif not o.poison_checked:
        figures.append("unwritten elements not checked (output could not be poisoned)")
    if o.nonfinite:
        where = ""
        if o.first_nonfinite is not None:
            tile = o.nonfinite_tile
            where = f" (first NaN/inf at {tuple(o.first_nonfinite)}" + (f", in tile {tile}" if tile else "") + ")"
        figures.append(f"{o.nonfinite} NaN/inf elements{where}")
    if o.ref_nan:
        figures.append(f"the reference holds NaN at {o.ref_nan} elements (first at {tuple(o.first_ref_nan or ())}): "
                       "a NaN there matches")
    return "; ".join(figures) or "written"


def _inputs_written(result: RunResult) -> list[str]:
    return [f"input {s.name} was written by the kernel: {s.changed} elements changed (first at "
            f"{tuple(s.first_changed or ())}); a kernel must only read its inputs (name it an output, "
            "outputs=[...], if it is meant to write it)" for s in result.inputs_written]


def run_result_text(result: RunResult) -> str:
    from .tiles import tile_map_text

    lines = [f"{result.kernel}: {run_verdict(result)}  [{result.backend} on {result.device or 'GPU'}]"]
    for o in result.outputs:
        lines.append(f"  {o.name} {o.dtype}{list(o.shape)}: " + _output_figures(o))
        for w in o.worst[:5]:
            lines.append(f"    at {list(w.index)}: got {w.got:.6g}, expected {w.expected:.6g} "
                         f"(|err| {w.abs_error:.3g})")
        if o.tiles is not None:
            lines += ["    " + line for line in tile_map_text(o.tiles).splitlines()]
    lines += [f"  {line}" for line in _inputs_written(result)]
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def run_result_html(result: RunResult) -> str:
    from .tiles import tile_map_html

    colour = "var(--jp-success-color1,#2a2)" if result.passed else "var(--jp-error-color1,#c22)"
    word, _, checked = run_verdict(result).partition(" ")
    head = (f'<div><b style="color:{colour}">{_esc(word)}</b> {_esc(checked)} '
            f'<code>{_esc(result.kernel)}</code> on {_esc(result.device or "GPU")} ({_esc(result.backend)})</div>')
    rows = [[o.name, f"{o.dtype}{list(o.shape)}", fmt(o.rel_error, ".3e"), fmt(o.tolerance, ".1e"),
             fmt(o.max_abs_error, ".3e"), o.unwritten if o.poison_checked else "not checked",
             o.nonfinite, "pass" if o.passed else "FAIL"] for o in result.outputs]
    body = table_html(["output", "shape", "rel error", "tolerance", "max |err|", "unwritten", "NaN/inf", ""], rows)
    worst = result.worst
    if worst:
        body += "<div>worst elements</div>" + table_html(
            ["output", "index", "got", "expected", "|err|"],
            [[w.output, list(w.index), f"{w.got:.6g}", f"{w.expected:.6g}", f"{w.abs_error:.3g}"] for w in worst])
    body += "".join(tile_map_html(o.tiles) for o in result.outputs if o.tiles is not None)
    body += "".join(f'<div style="color:var(--jp-error-color1,#c22)">{_esc(line)}</div>'
                    for line in _inputs_written(result))
    body += "".join(f"<div>{_esc(o.name)}: {_esc(_output_figures(o))}</div>" for o in result.outputs
                    if o.first_nonfinite is not None)
    return f"<div>{head}{body}{_notes_html(result.notes)}</div>"


# ------------------------------------------------------------------------------------------
# BenchResult
# ------------------------------------------------------------------------------------------


def bench_result_text(result: BenchResult) -> str:

    lines = [f"{result.kernel} [{result.mode}] {result.summary()}",
             f"  method: {result.method or BENCH_MODES.get(result.mode, result.mode)}"]
    if result.ratio is not None:
        lines.insert(1, f"  ratio to {result.ratio_summary()}")
    if result.device:
        lines.append(f"  device: {result.device}" + (f", backend {result.backend}" if result.backend else ""))
    if result.telemetry is not None:
        lines.append(f"  telemetry: {result.telemetry.summary()}")
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def bench_result_html(result: BenchResult) -> str:

    rows: list[list[Any]] = [["median", f"{result.median_ms:.4f} ms"], ["min", f"{result.min_ms:.4f} ms"],
            ["spread (IQR/median)", f"{100 * result.spread:.2f}%"], ["samples", len(result.samples_ms)],
            ["TFLOP/s", rate(result.tflops, ".1f")], ["GB/s", rate(result.gbps, ".0f")],
            ["mode", result.mode], ["method", result.method or BENCH_MODES.get(result.mode, "")],
            ["device", result.device], ["backend", result.backend]]
    if result.ci_ms:
        batches = f", {result.ci_batches} batches" if result.ci_batches else ""
        narrow = "; likely too narrow: the timings wander slowly" if result.ci_correlated else ""
        rows.insert(2, ["median 95% interval", f"{result.ci_ms[0]:.4f} - {result.ci_ms[1]:.4f} ms "
                                                f"(+-{100 * (result.ci_half_width or 0):.2f}%{batches}{narrow})"])
    if result.telemetry is not None:
        rows.append(["GPU telemetry", result.telemetry.summary()])
    if result.ratio is not None:
        ci = (f"{result.ratio_ci[0]:.4f} - {result.ratio_ci[1]:.4f} (+-{100 * (result.ratio_half_width or 0):.2f}%, "
              f"{result.ratio_batches} batches of pairs" + ("; likely too narrow" if result.ratio_correlated else "")
              + ")") if result.ratio_ci else "too few pairs for an interval"
        rows[:0] = [[f"ratio to {result.baseline}", f"{result.ratio:.4f}x"], ["ratio 95% interval", ci],
                    [f"{result.baseline} median", f"{result.baseline_ms:.4f} ms"],
                    ["pairs", len(result.ratio_samples)]]
    return f"<div><b>{_esc(result.kernel)}</b>{table_html(['', ''], rows)}{_notes_html(result.notes)}</div>"


def bench_result_png(result: BenchResult) -> bytes | None:
    from . import plots

    return _png(plots.samples_plot, result)


# ------------------------------------------------------------------------------------------
# Ceilings and LaunchOverhead
# ------------------------------------------------------------------------------------------


def ceilings_text(c: Ceilings) -> str:
    m, n, k = c.matmul_shape
    return (f"Ceilings({c.device}: copy {c.copy_gbps:.0f} GB/s (read+written), "
            f"matmul {c.matmul_tflops:.0f} TFLOP/s ({c.matmul_dtype} {m}x{n}x{k}), "
            f"ridge {c.ridge_intensity:.0f} FLOP/B; driver {c.driver}, torch {c.torch_version})")


def ceilings_html(c: Ceilings) -> str:
    rows = [["device", c.device], ["copy (read + written)", f"{c.copy_gbps:.0f} GB/s"],
            ["matmul", f"{c.matmul_tflops:.0f} TFLOP/s ({c.matmul_dtype} {list(c.matmul_shape)})"],
            ["ridge point", f"{c.ridge_intensity:.0f} FLOP/byte"], ["driver", c.driver],
            ["torch", c.torch_version], ["measured", c.measured_at], ["method", c.method]]
    return table_html(["ceiling", "value"], rows)


def ceilings_png(c: Ceilings) -> bytes | None:
    from . import plots

    return _png(plots.roofline_plot, c, [])


def overhead_text(o: LaunchOverhead) -> str:
    lines = [f"launch overhead of {o.kernel} ({o.method or 'host us per call'}):"]
    lines += [f"  {b:8s} {med:8.1f} us" for b, med in o.medians.items()]
    lines += [f"  {b:8s} not measured: {e}" for b, e in o.errors]
    return "\n".join(lines)


def overhead_html(o: LaunchOverhead) -> str:
    rows = [[b, f"{m:.1f}"] for b, m in o.medians.items()] + [[b, f"n/a: {e}"] for b, e in o.errors]
    return f"<div><b>{_esc(o.kernel)}</b> {_esc(o.method)}{table_html(['backend', 'host us/call'], rows)}</div>"


def overhead_png(o: LaunchOverhead) -> bytes | None:
    from . import plots

    return _png(plots.overhead_plot, o)


# ------------------------------------------------------------------------------------------
# SweepTable: the timing columns (with the final round's figure after the median when any row
# has one), then compile and bench seconds and the device when any row has them, then the
# verdict (BEST, cached, or the stage and reason of a failure).
# ------------------------------------------------------------------------------------------

_SWEEP_HEADER = ["size", "configuration", "median ms", "TFLOP/s", "GB/s", "spread %", ""]


def _has_final(table: SweepTable) -> bool:
    return any(r.final_ms is not None for r in table.rows)


def _has_final_ratio(table: SweepTable) -> bool:
    return any(r.final_ratio is not None for r in table.rows)


def _final_ratio_cell(r: SweepRow) -> str:
    if r.final_ratio is None:
        return "-"
    ci = r.final_ratio_ci
    half = (ci[1] - ci[0]) / 2 / r.final_ratio if ci and r.final_ratio else None
    return f"{r.final_ratio:.4f}" + (f" +-{100 * half:.2f}%" if half is not None else "")


def _sweep_optional_columns(table: SweepTable) -> list[str]:
    cols = []
    if any(r.compile_s is not None for r in table.rows):
        cols.append("compile s")
    if any(r.bench_s is not None for r in table.rows):
        cols.append("bench s")
    if any(r.device for r in table.rows):
        cols.append("device")
    if any(r.sm_mhz is not None for r in table.rows):
        cols.append("SM MHz")
    if any(r.rung is not None for r in table.rows):
        cols.append("measured")
    return cols


def _has_ratio(table: SweepTable) -> bool:
    return any(r.ratio is not None for r in table.rows)


def _ratio_cell(r: SweepRow) -> str:
    if r.ratio is None:
        return "-"
    return f"{r.ratio:.4f}" + (f" +-{100 * r.ratio_half_width:.2f}%" if r.ratio_half_width is not None else "")


def _sweep_header(table: SweepTable) -> list[str]:
    timing = _SWEEP_HEADER[:3] + (["final ms"] if _has_final(table) else []) + (
        [f"final ratio to {table.final_reference or 'the reference'}"] if _has_final_ratio(table) else []) + (
        [f"ratio to {table.ratio_baseline or 'baseline'}"] if _has_ratio(table) else []) + _SWEEP_HEADER[3:-1]
    return timing + _sweep_optional_columns(table) + _SWEEP_HEADER[-1:]


def _sweep_cells(table: SweepTable, r: SweepRow, optional_columns: list[str], final: bool) -> list[Any]:
    size = "x".join(str(v) for _, v in r.size) or "-"
    if r.ok:
        flags = (("BEST", r.best), ("cached", r.cached), ("THROTTLED", r.throttled))
        status = " ".join(word for word, on in flags if on)
        if r.cut:
            status = (status + " " + r.cut).strip()
    elif r.stage == "pruned":
        status = f"pruned before compiling: {r.error}"
    else:
        status = f"failed ({r.stage}): {r.error}" + (" (cached)" if r.cached else "")
    optional = {"compile s": fmt(r.compile_s, ".2f"), "bench s": fmt(r.bench_s, ".2f"), "device": r.device or "",
                "SM MHz": fmt(r.sm_mhz, ".0f"), "measured": r.measured_as or "-"}
    return ([size, table.short_name(r), fmt(r.median_ms, ".4f")] + ([fmt(r.final_ms, ".4f")] if final else [])
            + ([_final_ratio_cell(r)] if _has_final_ratio(table) else [])
            + ([_ratio_cell(r)] if _has_ratio(table) else [])
            + [rate(r.tflops, ".1f"), rate(r.gbps, ".0f"), fmt(100 * r.spread if r.spread is not None else None, ".2f")]
            + [optional[c] for c in optional_columns] + [status])


def _sweep_rows(table: SweepTable) -> list[list[Any]]:
    optional = _sweep_optional_columns(table)
    final = _has_final(table)
    return [_sweep_cells(table, r, optional, final) for r in table.rows]


def _sweep_best_lines(table: SweepTable) -> list[str]:
    lines = []
    for size in table.sizes:
        call = table.best_call(dict(size))
        if call:
            lines.append(f"best at {'x'.join(str(v) for _, v in size) or '-'}: {call}")
    return lines


def sweep_table_text(table: SweepTable) -> str:
    header = _sweep_header(table)
    cells = [header] + [[str(c) for c in row] for row in _sweep_rows(table)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    cached = sum(r.cached for r in table.rows)
    lines = [f"sweep of {table.kernel} ({table.mode}, {table.device or 'GPU'}): {len(table.rows)} rows, "
             f"{len(table.failed)} failed" + (f", {cached} from the row cache" if cached else "")]
    if table.common_config:
        lines.append("every configuration: " + ", ".join(f"{k}={v}" for k, v in table.common_config.items()))
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    lines += _sweep_best_lines(table)
    lines += [f"note: {n}" for n in table.notes]
    return "\n".join(lines)


def sweep_table_html(table: SweepTable) -> str:
    best = {i for i, r in enumerate(table.rows) if r.best}
    common = ", ".join(f"{k}={v}" for k, v in table.common_config.items())
    return (f"<div><b>sweep of {_esc(table.kernel)}</b> ({_esc(table.mode)}, {_esc(table.device)})"
            + (f"<div>every configuration: <code>{_esc(common)}</code></div>" if common else "")
            + table_html(_sweep_header(table), _sweep_rows(table), best)
            + "".join(f"<div><code>{_esc(line)}</code></div>" for line in _sweep_best_lines(table))
            + "".join(f"<div>note: {_esc(n)}</div>" for n in table.notes) + "</div>")


def sweep_table_png(table: SweepTable) -> bytes | None:
    from . import plots

    if len(table.sizes) > 1:
        return _png(plots.throughput_vs_size, table)
    return _png(plots.configs_compared, table)


register(RunResult, {"text/plain": run_result_text, "text/html": run_result_html})
register(BenchResult, {"text/plain": bench_result_text, "text/html": bench_result_html, "image/png": bench_result_png})
register(Ceilings, {"text/plain": ceilings_text, "text/html": ceilings_html, "image/png": ceilings_png})
register(LaunchOverhead, {"text/plain": overhead_text, "text/html": overhead_html, "image/png": overhead_png})
register(SweepTable, {"text/plain": sweep_table_text, "text/html": sweep_table_html, "image/png": sweep_table_png})
