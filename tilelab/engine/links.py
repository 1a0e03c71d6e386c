"""Which lines of which text say each fact of a report: analysis, no markup.

A TMA descriptor is *encoded* by some lines of each launcher, *used* by some lines of the device
CUDA (``tl::tma_load(A_desc, ...)``), and *asked for* by a line of the user's source
(``T.copy(A[...], A_shared)``); a WGMMA instruction is issued by ``tl::wgmma_ss<..., 64, 64, 16,
...>`` lines whose descriptors ``tl::initialize_wgmma_descriptor<...>`` sets up, and asked for by
``T.gemm(...)``. :func:`report_links` finds all of them from the texts alone, once (the device
CUDA's and the launchers' lines through ``tilelab._tilelang.source``, the one parser of the texts
TileLang generates), so that the renderers only draw links (source and generated lines linked both ways, as Compiler
Explorer and Nsight Compute's source view do).

Also here: the plain-language reasons for numbers a reader meets in the summary (why the block
has more threads than the cell asked for; why a 128x128 tile issues m64n64k16).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._tilelang.source import descriptor_use_lines, encode_calls, encode_spans, kernel_launch_lines, wgmma_lines
from ..cuda_facts import WARPGROUP_THREADS, WGMMA_K_BYTES, WGMMA_M, WGMMA_MAX_N
from ..records.kernel import KernelReport, LauncherSource


@dataclass(frozen=True)
class EncodeSite:
    """Lines ``first..last`` (1-based) of one text of one backend's launcher encode a descriptor;
    the driver call itself starts at ``call``."""

    backend: str
    part: int  # 0: the launcher's main text; 1..: its extra texts, in order
    part_name: str  # "main" or the extra text's name
    first: int
    last: int
    call: int


@dataclass(frozen=True)
class ReportLinks:
    """Line numbers (1-based) of every fact, per text. Keys are indices into the report's
    ``tma_descriptors`` and ``wgmma``; ``source`` lines are lines of the user's source text."""

    encode: dict[int, tuple[EncodeSite, ...]] = field(default_factory=dict)
    tma_device: dict[int, tuple[int, ...]] = field(default_factory=dict)
    tma_source: dict[int, tuple[int, ...]] = field(default_factory=dict)
    wgmma_device: dict[int, tuple[int, ...]] = field(default_factory=dict)
    wgmma_source: dict[int, tuple[int, ...]] = field(default_factory=dict)


def launcher_parts(item: LauncherSource) -> list[tuple[str, str, str]]:
    """(part name, text, language) of a launcher: its main text and its extra named texts."""
    parts: list[tuple[str, str, str]] = []
    if item.text is not None:
        parts.append(("main", item.text, item.language))
    for name, text in item.extra:
        language = "python" if name.endswith(".py") else "c++" if name.endswith((".cpp", ".cu", ".h")) else "text"
        parts.append((name, text, language))
    return parts


def _source_lines(source: str, pattern: re.Pattern[str]) -> tuple[int, ...]:
    out = []
    for n, line in enumerate(source.split("\n"), 1):
        code = line.split("#", 1)[0]
        if pattern.search(code):
            out.append(n)
    return tuple(out)


def report_links(report: KernelReport, source: str | None = None) -> ReportLinks:
    """Every line link of ``report`` (and of the user's ``source`` text, when given)."""
    names = [d.name for d in report.tma_descriptors]
    encode: dict[int, list[EncodeSite]] = {i: [] for i in range(len(names))}
    if names:
        for item in report.sources.launchers:
            for p, (part, text, _) in enumerate(launcher_parts(item)):
                calls = encode_calls(text, names)
                for i, name in enumerate(names):
                    if name in calls:
                        first, call, last = calls[name]
                        encode[i].append(EncodeSite(item.backend, p, part, first, last, call))
    device = report.sources.device.split("\n")
    tma_device = {i: descriptor_use_lines(device, name) for i, name in enumerate(names)}
    wgmma_device = {i: wgmma_lines(device, w.variant, w.instruction,
                                   [(op.layout_type, op.lbo, op.sbo) for op in (w.a, w.b) if op is not None])
                    for i, w in enumerate(report.wgmma)}
    tma_source: dict[int, tuple[int, ...]] = {}
    wgmma_source: dict[int, tuple[int, ...]] = {}
    if source:
        for i, d in enumerate(report.tma_descriptors):
            if d.buffer:
                tma_source[i] = _source_lines(source, re.compile(
                    rf"\bT\.(?:copy|c2d_im2col|tma_copy)\s*\((?:[^#]*?[(,\s])?{re.escape(d.buffer)}\b(?!\w)"))
        for i, w in enumerate(report.wgmma):
            buffers = [op.buffer for op in (w.a, w.b) if op is not None and op.buffer]
            if buffers:
                alts = "|".join(re.escape(b) for b in buffers)
                wgmma_source[i] = _source_lines(source, re.compile(rf"\bT\.(?:gemm|wgmma_gemm)\s*\(.*\b(?:{alts})\b"))
    return ReportLinks({i: tuple(v) for i, v in encode.items()}, tma_device, tma_source, wgmma_device, wgmma_source)


def launch_lines(report: KernelReport, text: str) -> dict[int, list[int]]:
    """1-based lines of a non-CUDA launcher ``text`` that launch each device kernel -> the
    indices of the kernels they launch (empty for a family whose launches are not looked for)."""
    return kernel_launch_lines(text, report.family, [k.name for k in report.kernels])


def device_anchor_lines(report: KernelReport) -> set[int]:
    """Device-code lines that other parts of a report point at: MFMA call sites and LDS reads,
    the lowering explainer's evidence, and the toolchain tier's ``#line`` origins, PTX and SASS."""
    wanted: set[int] = set()
    for m in report.mfma:
        wanted.update(m.lines)
    wanted.update(r.line for r in report.lds_reads)
    if report.lowering is not None:
        wanted.update(o.evidence_line for o in report.lowering.ops if o.evidence_line)
    mc = report.machine
    if mc is not None:
        for o in mc.origins:
            wanted.update(range(o.first, o.last + 1))
        wanted.update(d for d in (*mc.sass_device_lines, *mc.ptx_device_lines) if d)
    return wanted


def heat_shares(samples: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Each line's share of all samples (lines listed twice are summed; lines with none dropped)."""
    sums: dict[int, float] = {}
    for line, s in samples:
        if s and s > 0:
            sums[int(line)] = sums.get(int(line), 0.0) + float(s)
    total = sum(sums.values())
    return {n: s / total for n, s in sums.items()} if total > 0 else {}


def cell_heat(report: KernelReport, source: str, samples: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Each line of the user's ``source`` and its share of a profile's warp-stall samples: the
    device lines' samples summed through the ``#line`` links into the Python file whose text is
    ``source`` (its first line, the ``%%tilelang`` line, aside). Empty when no linked file is it."""
    mc = getattr(report, "machine", None)
    shares = heat_shares(samples)
    if mc is None or not shares or not source:
        return {}
    want = source.split("\n")[1:]
    files = _cell_files(mc, source)
    out: dict[int, float] = {}
    for line, share in shares.items():
        origin = mc.origin(line)
        if origin is not None and origin.file in files and 1 <= origin.line <= len(want) + 1:
            out[origin.line] = out.get(origin.line, 0.0) + share
    return out


def _cell_files(mc: Any, source: str) -> set[str]:
    """The files ``#line`` names whose text is ``source`` (its first line, the magic's, aside)."""
    def body(text: str) -> list[str]:  # the lines after the first, trailing blanks aside
        lines = [x.rstrip() for x in text.split("\n")[1:]]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return {f for f, text in mc.python_sources if body(text) == body(source)}


def heat_elsewhere(report: KernelReport, source: str | None, samples: Sequence[tuple[int, float]],
                   top: int = 3) -> tuple[float, tuple[tuple[str, float], ...]]:
    """The share of a profile's samples that :func:`cell_heat` cannot put on a line of ``source``,
    and the hottest places it went instead (``("wgmma_macro_generator.py L649", share)``, or "no
    #line" for device lines no directive covers): TileLang's ``#line`` names the innermost Python
    line, so code a tile op expands into inside TileLang's own macros is charged there."""
    mc = getattr(report, "machine", None)
    shares = heat_shares(samples)
    if mc is None or not shares:
        return 0.0, ()
    files = _cell_files(mc, source) if source else set()
    last = len(source.split("\n")) if source else 0
    places: dict[str, float] = {}
    for line, share in shares.items():
        origin = mc.origin(line)
        if origin is not None and origin.file in files and 1 <= origin.line <= last:
            continue  # on a line of the cell: cell_heat counts it
        label = "no #line" if origin is None else f"{origin.file.rsplit('/', 1)[-1]} L{origin.line}"
        places[label] = places.get(label, 0.0) + share
    hot = tuple(sorted(places.items(), key=lambda x: (-x[1], x[0]))[:top])
    return sum(places.values()), hot


# --------------------------------------------------------------------------------------------
# Reasons for numbers a reader cannot explain from the cell alone
# --------------------------------------------------------------------------------------------


def thread_note(report: KernelReport) -> str | None:
    """Why the block has more threads than the fragments use: TileLang's producer warp group.

    A warp-specialized kernel's fragments (the consumer's accumulators) start at thread
    ``thread_base`` > 0; the threads below are the producer TileLang added to issue TMA loads.
    """
    frags = [lay for lay in report.layouts if lay.scope == "fragment" and lay.thread_count]
    if not frags or not report.kernels:
        return None
    base = min(lay.thread_base for lay in frags)
    used = max(lay.thread_base + int(lay.thread_count or 0) for lay in frags)
    block = report.kernels[0].threads_per_block
    if not isinstance(block, int) or base <= 0 or used != block:
        return None
    return (f"block {block} = the {used - base} threads the kernel asks for (threads {base}-{used - 1}, the consumers "
            f"that compute) + {base} threads (threads 0-{base - 1}) of a producer warp group TileLang adds to issue "
            "the TMA loads (warp specialization)")


def wgmma_shape_note(report: KernelReport, index: int) -> str | None:
    """Why this instruction shape: how the accumulator tile splits over the consumer warp groups."""
    w = report.wgmma[index]
    shape = re.match(r"m(\d+)n(\d+)k(\d+)", w.instruction)
    if not shape:
        return None
    m, n, k = (int(v) for v in shape.groups())
    accum = [lay for lay in report.layouts if lay.scope == "fragment" and len(lay.shape) == 2 and lay.thread_count
             and (w.kernel is None or lay.kernel in (None, w.kernel))]
    if not accum:
        return None
    lay = max(accum, key=lambda x: x.shape[0] * x.shape[1])
    rows, cols = lay.shape
    groups = max(1, int(lay.thread_count or 0) // WARPGROUP_THREADS)
    per_group = rows * cols // groups
    count = per_group // (m * n) if m * n else 0
    along_m, along_n = _warpgroup_split(lay)
    text = (f"{w.instruction}: the {rows}x{cols} accumulator {lay.buffer} is split over {groups} consumer warp "
            f"group(s) of {WARPGROUP_THREADS} threads")
    if groups > 1 and along_n == groups and along_m == 1:
        text += (f" along N (the T.gemm warp policy): each holds all {rows} rows by {cols // groups} of the {cols} "
                 f"columns, {per_group} elements")
    elif groups > 1 and along_m == groups and along_n == 1:
        text += f" along M: each holds {rows // groups} rows by all {cols} columns, {per_group} elements"
    else:
        text += f", {per_group} elements each"
    if count >= 1 and count * m * n == per_group:
        text += f" = {count} x m{m}n{n}" + (f" ({count} instructions down M)" if count > 1 and n == cols // along_n
                                             else "")
    text += (f"; M is always {WGMMA_M} per WGMMA, and K is {k} for {w.a_dtype} inputs "
             f"({WGMMA_K_BYTES} bytes of K per instruction)")
    if groups > 1 and along_n == groups and along_m == 1 and n < cols <= WGMMA_MAX_N and rows % (WGMMA_M * groups) == 0:
        text += (f". For m{WGMMA_M}n{cols}k{k}, split along M instead: T.gemm(..., policy=T.GemmWarpPolicy.FullRow) "
                 f"gives each warp group {rows // groups} rows of all {cols} columns")
    return text


def _warpgroup_split(lay: Any) -> tuple[int, int]:
    """How many consumer warp groups share the accumulator's rows (along M) and its columns
    (along N), read from the fragment's own thread of each element."""
    if not lay.threads:
        return 1, 1
    group = lay.array("threads") // WARPGROUP_THREADS
    return len(set(group[:, 0].tolist())), len(set(group[0, :].tolist()))


__all__ = ["EncodeSite", "ReportLinks", "cell_heat", "device_anchor_lines", "encode_calls", "encode_spans",
           "heat_elsewhere", "heat_shares", "launch_lines", "launcher_parts", "report_links", "thread_note",
           "wgmma_shape_note"]
