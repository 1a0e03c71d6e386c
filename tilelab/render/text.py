"""``render_text(report) -> str``: a readable plain-text summary of a KernelReport.

Used by ``KernelReport``'s ``text/plain`` repr and by ``python -m tilelab inspect``. Sources are
not printed (the HTML report and the inspector show them); everything else is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model import KernelReport, TmaDescriptor
from .._verdicts import lds_conflicted
from ..cuda_facts import CDNA_LDS_BANK_BYTES, CDNA_LDS_BANKS


def dims(values: Sequence[Any] | None) -> str:
    """``(32, 128)`` -> ``"32, 128"``; the form every renderer uses for a dims tuple."""
    if values is None:
        return "-"
    return ", ".join(str(v) for v in values)


def size_text(n: Any) -> str:
    """Bytes as "49152 B (48 KiB)"; symbolic sizes as their expression ("m * 16384 B")."""
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if not isinstance(n, int):
        return f"{n} B" if isinstance(n, (float, str)) else str(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n} B ({n // 1024} KiB)"
    if n >= 1024:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B"


def layout_sentence(layout: Any) -> str:
    """A layout in one plain sentence for a student: its shape and type, where it lives, how it
    is stored (the swizzle tilelab recognises in its offsets) or which threads hold it. The
    compiler's own ``Layout(...)``/``Fragment(...)`` printout stays in ``layout.description``."""
    import re

    shape = " x ".join(str(s) for s in layout.shape)
    if layout.scope == "fragment":
        count = layout.thread_count
        base = int(layout.thread_base or 0)
        total = 1
        for extent in layout.shape:
            total *= int(extent)
        text = f"A {shape} {layout.dtype} fragment held in registers"
        if count:
            each = total * max(1, int(layout.replicate)) // int(count)
            text += f" by {count} threads (threads {base}-{base + int(count) - 1}), {each} elements a thread"
        if layout.replicate > 1:
            text += f"; each element is held by {layout.replicate} threads"
        return text + "."
    text = f"A {shape} {layout.dtype} tile in shared memory"
    stages = re.match(r"stage 0 of (\d+) pipeline stages", layout.description or "")
    if stages:
        text += f", one of {stages.group(1)} pipeline stages (the drawing shows stage 0)"
    if layout.offsets and len(layout.shape) == 2:
        from ..swizzle import match_layout

        try:
            tile = match_layout(layout)
        except ValueError:
            tile = None
        if tile is None:
            text += "; its element order is none of the TMA swizzle modes"
        elif tile.mode.is_swizzled:
            text += (f", stored with the {tile.swizzle} swizzle: each row's 16-byte chunks are permuted "
                     "so that reading down a column spreads over the banks")
        elif tile.swizzle == "INTERLEAVE":
            text += ", stored as 8-row x 16-byte core matrices one after another (interleaved, no swizzle)"
        else:
            text += ", stored row after row (no swizzle)"
    return text + "."


def pdl_text(kernel: Any) -> str:
    """Programmatic dependent launch of one DeviceKernel: whether its code waits (T.pdl_sync) and
    which launchers allow it to start early, e.g. "no T.pdl_sync; early start: cython"."""
    sync = "T.pdl_sync" if kernel.programmatic_dependent_launch else "no T.pdl_sync"
    return f"{sync}; early start: {', '.join(kernel.programmatic_serialization_by) or 'none'}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        out.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return out


def tma_rows(report: KernelReport) -> list[list[Any]]:
    return [_tma_row(d) for d in report.tma_descriptors]


def _tma_row(d: TmaDescriptor) -> list[Any]:
    box = dims(d.box_dim) if d.kind == "tiled" else f"C={d.channels_per_pixel} x P={d.pixels_per_column}"
    return [d.name, d.buffer or "-", d.kind, d.dtype, dims(d.global_dim), dims(d.global_stride_bytes), box,
            dims(d.element_strides), d.swizzle, _num(d.inner_box_bytes), _num(d.box_bytes),
            "; ".join(d.problems) or "ok"]


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def render_text(report: KernelReport) -> str:
    lines: list[str] = []
    n_wgmma_sites = sum(w.count for w in report.wgmma)
    if report.family == "cuda":
        lines.append(
            f"KernelReport {report.name} for {report.target}: {len(report.kernels)} kernel(s), "
            f"{len(report.tma_descriptors)} TMA descriptor(s), {n_wgmma_sites} WGMMA instruction(s) "
            f"({len(report.wgmma)} distinct), {len(report.problems)} problem(s)"
        )
    else:
        mfma = (f", {sum(m.count for m in report.mfma)} MFMA instruction(s) ({len(report.mfma)} distinct)"
                if report.family == "hip" else "")
        lines.append(f"KernelReport {report.name} for {report.target}: {len(report.kernels)} kernel(s){mfma}; "
                     "TMA, WGMMA and L2 windows do not apply (CUDA features)")
    if report.kernels and report.family != "cuda":
        from ..targets import parse_target

        memory = parse_target(report.target).shared_memory_name
        lines.append("")
        lines.append("Kernels")
        lines += _table(["name", "grid", "block", "threads", f"dynamic {memory}"],
                        [[k.name, dims(k.grid), dims(k.block), k.threads_per_block,
                          size_text(k.dynamic_shared_memory_bytes)] for k in report.kernels])
    elif report.kernels:
        lines.append("")
        lines.append("Kernels")
        lines += _table(
            ["name", "grid", "block", "threads", "dynamic shared memory", "cluster", "PDL", "cooperative"],
            [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes),
              dims(k.cluster_dims) if k.cluster_dims else "-", pdl_text(k),
              "yes" if k.cooperative else "no"] for k in report.kernels],
        )
    if report.problems:
        lines.append("")
        lines.append("Problems")
        lines += [f"  ! {p}" for p in report.problems]
    if report.tma_descriptors:
        lines.append("")
        lines.append("TMA descriptors (dimensions innermost first; strides in bytes)")
        lines += _table(["name", "buffer", "kind", "dtype", "global dim", "global stride", "box dim",
                         "elem strides", "swizzle", "inner box B", "box B", "problems"], tma_rows(report))
        for d in report.tma_descriptors:
            for cond in d.launch_conditions:
                lines.append(f"  {d.name}: at launch: {cond}")
    if report.wgmma:
        lines.append("")
        lines.append("WGMMA")
        rows = []
        for w in report.wgmma:
            rows.append([w.instruction, w.variant, f"{w.a_dtype} x {w.b_dtype} -> {w.accum_dtype}",
                         f"A {w.a_major}, B {w.b_major}", w.count,
                         _operand(w.a) if w.a else "registers", _operand(w.b) if w.b else "-"])
        lines += _table(["instruction", "variant", "types", "major", "sites", "A descriptor", "B descriptor"], rows)
    if report.mfma:
        lines.append("")
        lines.append("MFMA (per-lane layouts: AMD CDNA3 ISA)")
        lines += _table(["intrinsic", "MxNxK", "types", "A / B / C operands", "sites"],
                        [[m.intrinsic, m.shape, f"{m.a_dtype} x {m.b_dtype} -> {m.accum_dtype}",
                          f"{m.a_operand} / {m.b_operand} / {m.accumulator}", m.count] for m in report.mfma])
        for m in report.mfma:
            lines += [f"  {m.shape} A: {m.a_lanes}", f"  {m.shape} B: {m.b_lanes}", f"  {m.shape} C: {m.c_lanes}"]
    if report.lds_reads:
        lines.append("")
        lines.append(f"LDS operand reads (CDNA model: {CDNA_LDS_BANKS} banks x {CDNA_LDS_BANK_BYTES} B, "
                     f"{CDNA_LDS_BANKS * CDNA_LDS_BANK_BYTES} B per clock)")
        lines += _table(["buffer", "into", "per lane", "clocks per phase", "conflict"],
                        [[r.buffer, r.destination, f"{r.width_bytes} B", " ".join(map(str, r.phase_clocks)),
                          f"{r.conflict_degree:g}-way" if lds_conflicted(r) else "none"] for r in report.lds_reads])
    if report.l2_persistence:
        lines.append("")
        lines.append("L2 persistence windows")
        for win in report.l2_persistence:
            lines.append(f"  {win.buffer}: hit ratio {win.hit_ratio}, {size_text(win.bytes)}; set by "
                         f"{', '.join(win.emitted_by) or 'no launcher'}; "
                         f"missing in {', '.join(win.missing_in) or 'none'}")
    if report.layouts:
        lines.append("")
        lines.append("Layouts")
        for lay in report.layouts:
            extra = f", threads {lay.thread_base}+{lay.thread_count}" if lay.scope == "fragment" else ""
            lines.append(f"  {lay.buffer}: {lay.scope} {lay.dtype} [{dims(lay.shape)}]{extra}")
    if report.arguments:
        lines.append("")
        lines.append("Arguments")
        rows = []
        for a in report.arguments:
            how = "passed at launch" if a.passed_at_launch else ("returned" if a.is_output else "not passed")
            if a.binds_from:
                how += "; " + ", ".join(f"{k} from {v}" for k, v in a.binds_from)
            if a.value is not None:
                how += f"; value {a.value}"
            rows.append([a.name, a.kind, a.dtype or "-", dims(a.shape) if a.shape is not None else "-", how])
        lines += _table(["name", "kind", "dtype", "shape", "how it is read"], rows)
    lines.append("")
    launchers = []
    for backend in report.launcher_backends:
        item = report.sources.launcher(backend)
        if item is None:
            launchers.append(f"{backend}: not generated")
        elif item.text is None:
            launchers.append(f"{backend}: absent ({item.reason})")
        else:
            launchers.append(f"{backend}: {item.text.count(chr(10)) + 1} lines")
    lines.append("Launchers: " + "; ".join(launchers))
    lines.append(f"Device code: {report.sources.device.count(chr(10)) + 1} lines")
    if report.cache_key:
        lines.append(f"Cache key: {report.cache_key}")
    if report.pass_configs:
        lines.append("Pass configs: " + ", ".join(f"{k}={v}" for k, v in report.pass_configs))
    for note in report.notes:
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def _operand(op: Any) -> str:
    return (f"{op.buffer or '?'}: {op.swizzle}, LBO {op.lbo} ({op.lbo_bytes} B), "
            f"SBO {op.sbo} ({op.sbo_bytes} B), {op.major}-major")


__all__ = ["dims", "pdl_text", "render_text", "size_text"]
