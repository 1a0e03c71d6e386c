"""The Summary tab: the kernel at a glance (launch configuration of each device kernel, the
run/bench verdicts the magic measured, what changed since the cell's previous run, problems, L2
windows, notes, lowering and resources), in the family's own words for HIP, Metal and CPU targets."""

from __future__ import annotations

from typing import Any

from ...engine.links import thread_note, wgmma_shape_note
from ...engine.verdicts import worst_lds_conflict
from ...records.kernel import KernelReport
from .. import machine
from ..page import Page, Tab, changed, esc, make_page, register, table, target_record
from ..textkit import dims, pdl_text, size_text, text_table


def summary_html(report: KernelReport, page: Page | None = None) -> str:
    page = page or make_page(report)
    if report.family != "cuda":
        return _other_summary_html(report, page)
    out = []
    sites = sum(w.count for w in report.wgmma)
    facts = [
        ("kernel", report.name), ("target", report.target), ("device kernels", len(report.kernels)),
        ("TMA descriptors", len(report.tma_descriptors)),
        ("WGMMA instructions", f"{sites} call site(s), {len(report.wgmma)} distinct form(s)"),
        ("problems found", len(report.problems)),
    ]
    out.append(table(["", ""], facts))
    if page.launched:
        from ..launch import launch_summary_html

        out.append(launch_summary_html(page.launched))
    if page.changes:
        out.append(_changes_note(page))
    if report.kernels:
        out.append(table(
            ["device kernel", "grid", "block", "threads / block", "dynamic shared memory", "cluster", "PDL",
             "cooperative"],
            [[esc(k.name), changed(page, f"kernel {k.name}", "grid", esc(dims(k.grid))),
              changed(page, f"kernel {k.name}", "block", esc(dims(k.block))), k.threads_per_block,
              changed(page, f"kernel {k.name}", "dynamic shared memory", esc(size_text(k.dynamic_shared_memory_bytes))),
              esc(dims(k.cluster_dims) if k.cluster_dims else "-"), esc(pdl_text(k)),
              "yes" if k.cooperative else "no"] for k in report.kernels],
            raw=(0, 1, 2, 4, 5, 6),
        ))
    why = [n for n in [thread_note(report), *(wgmma_shape_note(report, i) for i in range(len(report.wgmma)))] if n]
    if why:
        out.append('<ul class="tl-why">' + "".join(f"<li>{esc(n)}</li>" for n in why) + "</ul>")
    if report.problems:
        out.append('<ul class="tl-problems">' + "".join(f"<li>&#9888; {esc(p)}</li>" for p in report.problems)
                   + "</ul>")
    else:
        out.append('<p class="tl-ok">No problems found in the TMA descriptors.</p>')
    if report.l2_persistence:
        out.append(table(
            ["L2 window over", "hit ratio", "bytes", "set by", "missing in"],
            [[w.buffer, w.hit_ratio, size_text(w.bytes), ", ".join(w.emitted_by) or "none",
              ", ".join(w.missing_in) or "none"] for w in report.l2_persistence],
            row_attrs=[' class="tl-problem"' if w.missing_in else "" for w in report.l2_persistence],
        ))
    if report.notes:
        out.append('<ul class="tl-notes">' + "".join(_note(n) for n in report.notes) + "</ul>")
    out.append(machine.lowering_html(report, page.rid, page.has("cuda"), page.source, page.has("cell")))
    out.append(machine.resources_html(report, page.rid))
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def _changes_note(page: Page) -> str:
    """The Summary's line saying what changed since the cell's previous run, linking to the Diff tab."""
    shown = "; ".join(f"{w}{' ' + f if f else ''}: {o} &rarr; {n}" if len(o) + len(n) < 60 else f"{w} {f}"
                      for w, f, o, n in ((esc(w), esc(f), esc(o), esc(n)) for w, f, o, n in page.changes[:6]))
    more = f"; and {len(page.changes) - 6} more" if len(page.changes) > 6 else ""
    return (f'<p class="tl-diff-note">Changed since the previous run of this cell: {shown}{more} '
            f'(<a href="#{page.rid}-diff">Diff tab</a>; changed values are highlighted in their tabs).</p>')


def _other_summary_html(report: KernelReport, page: Page) -> str:
    """Summary of a HIP, Metal or CPU report: the launch configuration in the family's words, the
    matrix instructions, and which CUDA-only features do not apply."""
    target = target_record(report)
    rid = page.rid
    smem = target.shared_memory_name if target else "shared memory"
    facts: list[list[Any]] = [["kernel", report.name],
                              ["target", f"{report.target} ({target.description})" if target else report.target],
                              ["device kernels", len(report.kernels)]]
    if report.family == "hip":
        sites = sum(m.count for m in report.mfma)
        facts.append(["MFMA instructions", f"{sites} call site(s), {len(report.mfma)} distinct form(s)"])
        worst = worst_lds_conflict(report)
        if worst is not None:
            facts.append(["LDS operand reads",
                          f"{len(report.lds_reads)}, worst {worst:g}-way bank conflict (CDNA model)"])
    if target is not None:
        facts.append(["TMA, WGMMA, L2 windows", "do not apply: CUDA features"])
        facts.append(["launch here", "yes, on the CPU" if target.launch == "cpu" else
                      "no: inspect only (tilelab has no launch path for these GPUs)"])
    out = [table(["", ""], facts)]
    if report.kernels:
        if report.family == "cpu":
            out.append(table(
                ["function", "grid (outer loops)", "threads"],
                [[k.name, "the tile loops are in the function body (see C)", "none: one CPU thread runs every tile"]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
        else:
            group = "threadgroup" if report.family == "metal" else "block"
            out.append(table(
                ["device kernel", "grid", group, f"threads / {group}", f"dynamic {smem}"],
                [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes)]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
    if report.notes:
        out.append('<ul class="tl-notes">' + "".join(_note(n) for n in report.notes) + "</ul>")
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def _note(text: str) -> str:
    """A note of the engine: one line; a long one folds after its first clause."""
    if len(text) <= 140:
        return f"<li>{esc(text)}</li>"
    cut = next((i for i in (text.find(", yet "), text.find(" ("), text.find(". ")) if 20 < i < 140), 120)
    return (f'<li><details class="tl-note"><summary>{esc(text[:cut])} &hellip;</summary>{esc(text)}</details></li>')


def summary_text(report: KernelReport, page: Page) -> str:
    """The device kernels, the problems, the L2 windows and the notes, as plain text."""
    blocks: list[list[str]] = []
    if report.kernels and report.family != "cuda":
        target = target_record(report)
        memory = target.shared_memory_name if target else "shared memory"
        blocks.append(["Kernels", *text_table(
            ["name", "grid", "block", "threads", f"dynamic {memory}"],
            [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes)]
             for k in report.kernels])])
    elif report.kernels:
        blocks.append(["Kernels", *text_table(
            ["name", "grid", "block", "threads", "dynamic shared memory", "cluster", "PDL", "cooperative"],
            [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes),
              dims(k.cluster_dims) if k.cluster_dims else "-", pdl_text(k),
              "yes" if k.cooperative else "no"] for k in report.kernels])])
    if report.problems:
        blocks.append(["Problems", *(f"  ! {p}" for p in report.problems)])
    if report.l2_persistence:
        blocks.append(["L2 persistence windows", *(
            f"  {w.buffer}: hit ratio {w.hit_ratio}, {size_text(w.bytes)}; set by "
            f"{', '.join(w.emitted_by) or 'no launcher'}; missing in {', '.join(w.missing_in) or 'none'}"
            for w in report.l2_persistence)])
    if report.notes:
        blocks.append([f"Note: {note}" for note in report.notes])
    return "\n\n".join("\n".join(b) for b in blocks)


register(Tab("summary", "Summary", 10, lambda r, page: summary_html(r, page), summary_text))
