"""The MFMA tab (AMD targets): each MFMA form with its per-lane register layouts, and the LDS
reads that feed its operands with their bank conflicts under the CDNA LDS model."""

from __future__ import annotations

from typing import Any

from ...cuda_facts import CDNA_LDS_BANK_BYTES, CDNA_LDS_BANKS, CDNA_WAVEFRONT_LANES
from ...engine.verdicts import lds_conflicted, lds_phases
from ...records.kernel import KernelReport
from ..page import Page, Tab, esc, make_page, none_here, register, table
from ..textkit import text_table


def mfma_html(report: KernelReport, page: Page | None = None) -> str:
    """Each MFMA form (intrinsic, shape, types, operands, per-lane layouts) and the LDS reads that
    feed its operands, with their bank conflicts under the CDNA LDS model (tilelab.engine.mfma)."""
    if not report.mfma:
        return none_here(report, "mfma", "This kernel issues no MFMA instructions.")
    page = page or make_page(report)
    rid = page.rid
    source_lines = report.sources.device.split("\n")

    def at(n: int) -> str:  # a link to the line in the HIP tab; the line itself rides along as a tooltip
        text = source_lines[n - 1].strip() if 0 < n <= len(source_lines) else ""
        if not page.has("cuda"):
            return f'<span title="{esc(text)}">L{n}</span>'
        return f'<a href="#{rid}-cuda-L{n}" title="{esc(text)}">L{n}</a>'

    rows = []
    for m in report.mfma:
        where = ", ".join(at(n) for n in m.lines)
        rows.append([m.kernel or "-", m.intrinsic, m.variant, m.shape, m.a_dtype, m.b_dtype, m.accum_dtype,
                     m.a_operand + (f" \u2190 {m.a_lds}" if m.a_lds else ""),
                     m.b_operand + (f" \u2190 {m.b_lds}" if m.b_lds else ""), m.accumulator, m.count, where])
    out = [table(["kernel", "intrinsic", "variant", "M\u00d7N\u00d7K", "A dtype", "B dtype", "accum",
                  "A operand (\u2190 LDS)",
                   "B operand (\u2190 LDS)", "accumulator", "call sites", "in HIP"], rows, numeric=(10,), raw=(11,))]
    out.append(f"<p>What each of the {CDNA_WAVEFRONT_LANES} lanes of a wavefront holds (AMD CDNA3 ISA, "
               "MFMA register layouts):</p>")
    lane_rows = []
    for m in report.mfma:
        lane_rows += [[m.shape, f"A ({m.a_operand})", m.a_lanes], [m.shape, f"B ({m.b_operand})", m.b_lanes],
                      [m.shape, f"C/D ({m.accumulator})", m.c_lanes]]
    out.append(table(["shape", "operand", "per lane"], lane_rows))
    if report.lds_reads:
        banks, width = CDNA_LDS_BANKS, CDNA_LDS_BANK_BYTES
        out.append(f"<p>LDS reads that fill the operand registers, per {CDNA_WAVEFRONT_LANES}-lane wavefront. "
                   f"Model: {banks} banks &times; {width} bytes; a read of W bytes per lane is served "
                   f"{banks * width}/W lanes at a time (W &le; {width}: {banks} lanes); each phase takes as many "
                   f"clocks as the most distinct {width}-byte words one bank delivers. The Layouts section draws "
                   "each LDS buffer&rsquo;s layout; its bank colours hold on CDNA too "
                   f"(the same {banks} banks of {width} bytes).</p>")
        lds_rows = []
        for r in report.lds_reads:
            verdict = f"{r.conflict_degree:g}-way" if lds_conflicted(r) else "conflict-free"
            lds_rows.append([r.buffer, r.destination, f"{r.width_bytes} B", len(r.phase_clocks),
                             " ".join(str(c) for c in r.phase_clocks), r.clocks, verdict,
                             ", ".join(r.loop_variables) or "-", at(r.line)])
        out.append(table(["LDS buffer", "into", "per lane", "phases", "clocks per phase (worst loop step)",
                           "clocks", "bank conflicts", "loop variables", "in HIP"], lds_rows,
                          row_attrs=[' class="tl-problem"' if lds_conflicted(r) else "" for r in report.lds_reads],
                          numeric=(3, 5), raw=(8,)))
        for r in report.lds_reads:
            out.append(_bank_strip(r))
    return "".join(out)


def _bank_strip(read: Any) -> str:
    """The bank each lane of the first loop step reads first, one row per phase."""
    rows = [[f"lanes {p.first_lane}-{p.last_lane}", p.clocks, " ".join(str(b) for b in p.banks)]
            for p in lds_phases(read)]
    return (f'<details class="tl-sub"><summary>{esc(read.buffer)} &rarr; {esc(read.destination)}: '
            "bank of each lane</summary>" + table(["phase", "clocks", "first bank per lane"], rows) + "</details>")


def mfma_text(report: KernelReport, page: Page) -> str:
    """The MFMA forms with their lane layouts, and the LDS reads with their bank conflicts."""
    blocks = []
    if report.mfma:
        lines = ["MFMA (per-lane layouts: AMD CDNA3 ISA)"]
        lines += text_table(["intrinsic", "MxNxK", "types", "A / B / C operands", "sites"],
                            [[m.intrinsic, m.shape, f"{m.a_dtype} x {m.b_dtype} -> {m.accum_dtype}",
                              f"{m.a_operand} / {m.b_operand} / {m.accumulator}", m.count] for m in report.mfma])
        for m in report.mfma:
            lines += [f"  {m.shape} A: {m.a_lanes}", f"  {m.shape} B: {m.b_lanes}", f"  {m.shape} C: {m.c_lanes}"]
        blocks.append("\n".join(lines))
    if report.lds_reads:
        lines = [f"LDS operand reads (CDNA model: {CDNA_LDS_BANKS} banks x {CDNA_LDS_BANK_BYTES} B, "
                 f"{CDNA_LDS_BANKS * CDNA_LDS_BANK_BYTES} B per clock)"]
        lines += text_table(["buffer", "into", "per lane", "clocks per phase", "conflict"],
                            [[r.buffer, r.destination, f"{r.width_bytes} B", " ".join(map(str, r.phase_clocks)),
                              f"{r.conflict_degree:g}-way" if lds_conflicted(r) else "none"] for r in report.lds_reads])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


register(Tab("mfma", "MFMA", 65, lambda r, page: mfma_html(r, page), mfma_text,
             shown=lambda r, page: r is None or r.family == "hip", count=lambda r, page: len(r.mfma)))
