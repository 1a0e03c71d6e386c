"""The WGMMA tab: each warpgroup MMA form, its call sites and shared-memory operand descriptors,
and whether tilelab's descriptor (from the buffer's inferred layout) agrees with the compiler's."""

from __future__ import annotations

from typing import Any

from ...engine.links import wgmma_shape_note
from ...engine.verdicts import operand_verdict
from ...records.kernel import KernelReport
from ..page import Page, Tab, esc, make_page, none_here, register, table, where
from ..textkit import text_table


def wgmma_html(report: KernelReport, page: Page | None = None) -> str:
    if not report.wgmma:
        return none_here(report, "wgmma", "This kernel issues no WGMMA instructions.")
    page = page or make_page(report)
    rows, attrs = [], []
    for i, w in enumerate(report.wgmma):
        rows.append([w.kernel or "-", w.instruction, w.variant, w.m, w.n, w.k, w.a_dtype, w.b_dtype, w.accum_dtype,
                     w.a_major, w.b_major, w.count, where(page, i, "wgmma")])
        attrs.append(f' id="{page.rid}-wgmma-{i}"')
    out = [table(["kernel", "instruction", "variant", "M", "N", "K", "A dtype", "B dtype", "accum", "A major",
                   "B major", "call sites", "where"], rows, numeric=(3, 4, 5, 11), raw=(12,), row_attrs=attrs)]
    why = [n for n in (wgmma_shape_note(report, i) for i in range(len(report.wgmma))) if n]
    if why:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in why) + "</ul>")
    ops = [_operand_row(report, i, role) for i in range(len(report.wgmma)) for role in ("A", "B")]
    out.append("<p>Shared-memory matrix descriptors (LBO/SBO as encoded: byte offsets &gt;&gt; 4). "
               "&ldquo;tilelab&rdquo;: the descriptor tilelab computes from the buffer&rsquo;s inferred layout "
               "(offsets only), compared with the compiler&rsquo;s; the Layouts section draws its core matrices.</p>")
    out.append(table(["instruction", "operand", "buffer", "layout type", "swizzle", "LBO", "LBO bytes", "SBO",
                       "SBO bytes", "major", "tilelab"], ops, numeric=(3, 5, 6, 7, 8)))
    return "".join(out)


_VERDICT_WORDS = {"agrees": "agrees", "differs": "differs", "unknown": "-"}


def _operand_row(report: KernelReport, index: int, role: str) -> list[Any]:
    """One row of the operand table: the compiler's descriptor and tilelab's verdict on it."""
    v = operand_verdict(report, index, role)
    op = v.operand
    if op is None:
        return [v.instruction, role, "registers", "-", "-", "-", "-", "-", "-", "-", "-"]
    verdict = _VERDICT_WORDS.get(v.verdict, f"n/a: {v.reason[:80]}")
    return [v.instruction, role, op.buffer or "-", op.layout_type, op.swizzle, op.lbo, op.lbo_bytes, op.sbo,
            op.sbo_bytes, op.major, verdict]


def _operand_text(op: Any) -> str:
    return (f"{op.buffer or '?'}: {op.swizzle}, LBO {op.lbo} ({op.lbo_bytes} B), "
            f"SBO {op.sbo} ({op.sbo_bytes} B), {op.major}-major")


def wgmma_text(report: KernelReport, page: Page) -> str:
    if not report.wgmma:
        return ""
    rows = [[w.instruction, w.variant, f"{w.a_dtype} x {w.b_dtype} -> {w.accum_dtype}", f"A {w.a_major}, B {w.b_major}",
             w.count, _operand_text(w.a) if w.a else "registers", _operand_text(w.b) if w.b else "-"]
            for w in report.wgmma]
    return "\n".join(["WGMMA", *text_table(
        ["instruction", "variant", "types", "major", "sites", "A descriptor", "B descriptor"], rows)])


register(Tab("wgmma", "WGMMA", 60, lambda r, page: wgmma_html(r, page), wgmma_text,
             count=lambda r, page: len(r.wgmma) if r.family == "cuda" else None))
