"""The Arguments tab: the kernel's parameters (how each is passed or bound), its cache key and its
pass configs."""

from __future__ import annotations

from ...records.kernel import KernelReport
from ..page import Page, Tab, esc, register, table
from ..textkit import dims, text_table


def arguments_html(report: KernelReport) -> str:
    rows = []
    for a in report.arguments:
        rows.append([
            a.name, a.kind, a.dtype or "-", dims(a.shape) if a.shape is not None else "-",
            dims(a.strides) if a.strides is not None else "-",
            "yes" if a.passed_at_launch else ("returned (out_idx)" if a.is_output else "no"),
            ", ".join(f"{k} \u2190 {v}" for k, v in a.binds_from) or "-",
            a.value if a.value is not None else "-", a.cache_key or "-",
        ])
    out = [table(["name", "kind", "dtype", "shape", "strides", "passed at launch", "binds from", "value",
                   "cache key part"], rows)] if rows else ['<p class="tl-muted">No arguments recorded.</p>']
    out.append(f"<p>Cache key: <code>{esc(report.cache_key or '-')}</code></p>")
    if report.pass_configs:
        out.append(table(["pass config", "value"], list(report.pass_configs)))
    return "".join(out)


def arguments_text(report: KernelReport, page: Page) -> str:
    lines = []
    if report.arguments:
        rows = []
        for a in report.arguments:
            how = "passed at launch" if a.passed_at_launch else ("returned" if a.is_output else "not passed")
            if a.binds_from:
                how += "; " + ", ".join(f"{k} from {v}" for k, v in a.binds_from)
            if a.value is not None:
                how += f"; value {a.value}"
            rows.append([a.name, a.kind, a.dtype or "-", dims(a.shape) if a.shape is not None else "-", how])
        lines += ["Arguments", *text_table(["name", "kind", "dtype", "shape", "how it is read"], rows), ""]
    if report.cache_key:
        lines.append(f"Cache key: {report.cache_key}")
    if report.pass_configs:
        lines.append("Pass configs: " + ", ".join(f"{k}={v}" for k, v in report.pass_configs))
    return "\n".join(lines).strip("\n")


register(Tab("arguments", "Arguments", 80, lambda r, page: arguments_html(r), arguments_text,
             count=lambda r, page: len(r.arguments)))
