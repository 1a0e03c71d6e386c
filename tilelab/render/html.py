"""``render_html(report) -> str``: the whole inspector as static HTML (no JavaScript).

Every section of the inspector (Summary, CUDA, Launcher, TMA, WGMMA, Layouts, Arguments) is a
``<details>`` block, so the same markup works in JupyterLab, nbconvert output, GitHub and
nbviewer. Sources are never truncated: long ones are collapsed. Each TMA row has an id and links
to the lines of every launcher that encode that descriptor; those lines link back to the row.

Every string that comes from user code or the compiler goes through ``html.escape``. Styles are
scoped under ``.tilelab-report`` and read JupyterLab's CSS variables with fallbacks, so the
report follows the light and the dark theme and stays readable outside Jupyter.
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
from typing import Any, Iterable, Sequence

from .._model import KernelReport, Layout, LauncherSource, TmaDescriptor, WgmmaOperand
from .code import STYLE_CSS as CODE_CSS
from . import machine
from .code import LineMark, highlight_code
from .text import dims, pdl_text, size_text

SECTIONS = ("summary", "cuda", "launcher", "tma", "wgmma", "mfma", "layouts", "arguments", "lines", "ptx", "sass",
            "ir")
SECTION_TITLES = {
    "summary": "Summary", "cuda": "CUDA", "launcher": "Launcher", "tma": "TMA", "wgmma": "WGMMA",
    "mfma": "MFMA", "layouts": "Layouts", "arguments": "Arguments", "lines": "Lines", "ptx": "PTX", "sass": "SASS",
    "ir": "IR passes",
}
# The device-code section is named after the language the target's code is written in.
_DEVICE_TITLES = {"cuda": "CUDA", "hip": "HIP", "metal": "Metal", "cpu": "C"}


# Sections open by default in the static report; sources start folded.
_OPEN = {"summary", "tma", "wgmma", "mfma"}
# A fallback table of a layout lists every element; past this many, only the description is shown.
_LAYOUT_TABLE_LIMIT = 4096

ROOT_CSS = """
.tilelab-report{color-scheme:light dark;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222);
 font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:var(--jp-ui-font-size1,13px);
 padding:4px 6px;line-height:1.45}
.tilelab-report a{color:var(--jp-content-link-color,#1565c0)}
.tilelab-report details{margin:4px 0}
.tilelab-report .tl-scroll{overflow-x:auto;max-width:100%}
.tilelab-report details.tl-section>summary{font-weight:600;cursor:pointer;padding:3px 0;
 border-bottom:1px solid var(--jp-border-color2,#ddd)}
.tilelab-report details.tl-sub>summary{cursor:pointer;font-family:var(--jp-code-font-family,monospace)}
.tilelab-report .tl-head{font-weight:600;font-size:var(--jp-ui-font-size2,15px);margin-bottom:2px}
.tilelab-report table.tl-table{border-collapse:collapse;margin:4px 0;font-size:var(--jp-ui-font-size1,13px)}
.tilelab-report table.tl-table th,.tilelab-report table.tl-table td{border:1px solid var(--jp-border-color2,#ddd);
 padding:2px 6px;text-align:left;vertical-align:top;color:var(--jp-ui-font-color1,#222)}
.tilelab-report table.tl-table th{background:var(--jp-layout-color2,#f0f0f0);font-weight:600}
.tilelab-report table.tl-table td.tl-num{text-align:right;font-variant-numeric:tabular-nums}
.tilelab-report code{font-family:var(--jp-code-font-family,monospace)}
.tilelab-report tr.tl-problem td,.tilelab-report .tl-problems li{background:rgba(229,57,53,.16)}
.tilelab-report tr.tl-problem td:first-child,.tilelab-report .tl-problems li{box-shadow:inset 3px 0 0 var(--jp-error-color1,#d32f2f)}
.tilelab-report tr:target td{outline:2px solid var(--jp-brand-color1,#1976d2)}
.tilelab-report .tl-ok{color:var(--jp-success-color1,#2e7d32)}
.tilelab-report .tl-muted{color:var(--jp-ui-font-color2,#555)}
.tilelab-report .tl-absent{color:var(--jp-warn-color0,#8a5300)}
.tilelab-report .tl-layout-table td{font-family:var(--jp-code-font-family,monospace);font-size:11px;padding:0 3px}
"""

# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def esc(value: Any) -> str:
    """Escape anything for element content and quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def report_id(report: KernelReport) -> str:
    """A stable id prefix for the report's anchors (same report, same ids)."""
    digest = hashlib.sha1(
        (report.name + "\0" + report.target + "\0" + (report.cache_key or "") + "\0" + report.sources.device).encode()
    ).hexdigest()
    return f"tl-{digest[:10]}"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, row_attrs: Sequence[str] | None = None,
           numeric: Sequence[int] = (), raw: Sequence[int] = (), css: str = "tl-table") -> str:
    """A table; cells are escaped except the columns in ``raw`` (already-built markup)."""
    out = [f'<div class="tl-scroll"><table class="{css}"><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for n, row in enumerate(rows):
        attrs = row_attrs[n] if row_attrs else ""
        out.append(f"<tr{attrs}>")
        for i, cell in enumerate(row):
            body = cell if i in raw else esc(cell)
            cls = ' class="tl-num"' if i in numeric else ""
            out.append(f"<td{cls}>{body}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _lines(text: str) -> int:
    return text.count("\n") + 1


# --------------------------------------------------------------------------------------------
# Where each launcher encodes each TMA descriptor
# --------------------------------------------------------------------------------------------

# Calls that build a CUtensorMap in each backend's launcher (C driver call, the tvm_ffi packed
# helper, CuTeDSL's Python helpers).
_ENCODE_CALL = re.compile(
    r"cuTensorMapEncode(?:Tiled|Im2col)\s*\)?\s*\(|TVMFFIFunctionCall\(\s*__tvm_tensormap_create|create_tensor_map_\w+\s*\("
)


def _mentions(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![A-Za-z0-9])")


def _declares(name: str) -> re.Pattern[str]:
    # "CUtensorMap A_desc;", "void* A_desc = ...", "A_desc_type = ...", "A_desc__dtype, ... =",
    # "// Descriptor 0: A_desc (tensor: A)"
    n = re.escape(name)
    return re.compile(
        rf"(?<![\w]){n}(?:_\w*)?\s*(?:=(?!=)|;|,\s*\w+\s*=)|CUtensorMap\s+{n}\s*;|Descriptor\s+\d+:\s*{n}\b"
    )


def encode_spans(text: str, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each descriptor name, the (first, last) 1-based lines of ``text`` that encode it.

    Found from the launcher text alone: each encode call is attributed to the descriptor it
    names (or, when the call names none, the nearest descriptor mentioned above it); the span
    starts at that descriptor's first declaration after the previous encode call.
    """
    lines = text.split("\n")
    calls: list[tuple[int, int]] = []  # (call line, end line), 0-based
    for i, line in enumerate(lines):
        if _ENCODE_CALL.search(line):
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("(") - lines[j].count(")")
                if depth <= 0:
                    break
                j += 1
            calls.append((i, min(j, len(lines) - 1)))
    mention = {n: _mentions(n) for n in names}
    declare = {n: _declares(n) for n in names}
    spans: dict[str, tuple[int, int]] = {}
    previous_end = -1
    for call, end in calls:
        owner = None
        for n in names:  # named inside the call itself
            if any(mention[n].search(lines[k]) or re.search(rf"(?<![\w]){re.escape(n)}_", lines[k])
                   for k in range(call, end + 1)):
                owner = n
                break
        if owner is None:  # nearest mention above, back to the previous call
            for k in range(call - 1, previous_end, -1):
                owner = next((n for n in names if mention[n].search(lines[k])), None)
                if owner:
                    break
        if owner is not None and owner not in spans:
            start = next((k for k in range(previous_end + 1, call + 1) if declare[owner].search(lines[k])), call)
            spans[owner] = (start + 1, end + 1)
        previous_end = end
    return spans


def _launcher_parts(item: LauncherSource) -> list[tuple[str, str, str]]:
    """(part name, text, language) of a launcher: its main text and its extra named texts."""
    parts: list[tuple[str, str, str]] = []
    if item.text is not None:
        parts.append(("main", item.text, item.language))
    for name, text in item.extra:
        language = "python" if name.endswith(".py") else "c++" if name.endswith((".cpp", ".cu", ".h")) else "text"
        parts.append((name, text, language))
    return parts


def _part_anchor(rid: str, backend: str, part_index: int) -> str:
    return f"{rid}-src-{re.sub(r'[^A-Za-z0-9_]', '_', backend)}-{part_index}"


@functools.lru_cache(maxsize=64)
def tma_links(report: KernelReport) -> dict[int, list[tuple[str, str, str, tuple[int, int]]]]:
    """For each TMA descriptor index: (backend, part name, anchor prefix, (first, last)) links."""
    rid = report_id(report)
    names = [d.name for d in report.tma_descriptors]
    result: dict[int, list[tuple[str, str, str, tuple[int, int]]]] = {i: [] for i in range(len(names))}
    if not names:
        return result
    for item in report.sources.launchers:
        for p, (part, text, _) in enumerate(_launcher_parts(item)):
            spans = encode_spans(text, names)
            for i, name in enumerate(names):
                if name in spans:
                    result[i].append((item.backend, part, _part_anchor(rid, item.backend, p), spans[name]))
    return result


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _target_record(report: KernelReport) -> Any:
    from ..targets import parse_target

    try:
        return parse_target(report.target)
    except ValueError:
        return None


def summary_html(report: KernelReport, links: bool = True) -> str:
    if report.family != "cuda":
        return _other_summary_html(report)
    out = []
    sites = sum(w.count for w in report.wgmma)
    facts = [
        ("kernel", report.name), ("target", report.target), ("device kernels", len(report.kernels)),
        ("TMA descriptors", len(report.tma_descriptors)),
        ("WGMMA instructions", f"{sites} call site(s), {len(report.wgmma)} distinct form(s)"),
        ("problems found", len(report.problems)),
    ]
    out.append(_table(["", ""], facts))
    if report.kernels:
        out.append(_table(
            ["device kernel", "grid", "block", "threads / block", "dynamic shared memory", "cluster", "PDL", "cooperative"],
            [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes),
              dims(k.cluster_dims) if k.cluster_dims else "-", pdl_text(k),
              "yes" if k.cooperative else "no"] for k in report.kernels],
        ))
    if report.problems:
        out.append('<ul class="tl-problems">' + "".join(f"<li>&#9888; {esc(p)}</li>" for p in report.problems) + "</ul>")
    else:
        out.append('<p class="tl-ok">No problems found in the TMA descriptors.</p>')
    if report.l2_persistence:
        out.append(_table(
            ["L2 window over", "hit ratio", "bytes", "set by", "missing in"],
            [[w.buffer, w.hit_ratio, size_text(w.bytes), ", ".join(w.emitted_by) or "none",
              ", ".join(w.missing_in) or "none"] for w in report.l2_persistence],
            row_attrs=[' class="tl-problem"' if w.missing_in else "" for w in report.l2_persistence],
        ))
    if report.notes:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in report.notes) + "</ul>")
    out.append(machine.lowering_html(report, report_id(report), links))
    out.append(machine.resources_html(report, report_id(report)))
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def _other_summary_html(report: KernelReport) -> str:
    """Summary of a HIP, Metal or CPU report: the launch configuration in the family's words, the
    matrix instructions, and which CUDA-only features do not apply."""
    target = _target_record(report)
    rid = report_id(report)
    smem = target.shared_memory_name if target else "shared memory"
    facts: list[list[Any]] = [["kernel", report.name],
                              ["target", f"{report.target} ({target.description})" if target else report.target],
                              ["device kernels", len(report.kernels)]]
    if report.family == "hip":
        sites = sum(m.count for m in report.mfma)
        facts.append(["MFMA instructions", f"{sites} call site(s), {len(report.mfma)} distinct form(s)"])
        worst = max((r.conflict_degree for r in report.lds_reads), default=None)
        if worst is not None:
            facts.append(["LDS operand reads", f"{len(report.lds_reads)}, worst {worst:g}-way bank conflict (CDNA model)"])
    if target is not None:
        facts.append(["TMA, WGMMA, L2 windows", "do not apply: CUDA features"])
        facts.append(["launch here", "yes, on the CPU" if target.launch == "cpu" else
                      "no: inspect only (no such GPU to test a launch path on)"])
    out = [_table(["", ""], facts)]
    if report.kernels:
        if report.family == "cpu":
            out.append(_table(
                ["function", "grid (outer loops)", "threads"],
                [[k.name, "the tile loops are in the function body (see C)", "none: one CPU thread runs every tile"]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
        else:
            group = "threadgroup" if report.family == "metal" else "block"
            out.append(_table(
                ["device kernel", "grid", group, f"threads / {group}", f"dynamic {smem}"],
                [[k.name, dims(k.grid), dims(k.block), k.threads_per_block, size_text(k.dynamic_shared_memory_bytes)]
                 for k in report.kernels],
                row_attrs=[f' id="{rid}-kernel-{i}"' for i in range(len(report.kernels))],
            ))
    if report.notes:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in report.notes) + "</ul>")
    if report.versions:
        out.append('<p class="tl-muted">' + esc(", ".join(f"{k} {v}" for k, v in report.versions)) + "</p>")
    return "".join(out)


def cuda_html(report: KernelReport, links: bool = True) -> str:
    rid = report_id(report)
    text = report.sources.device
    target = _target_record(report)
    language = target.source_language if target else "cuda"
    # Links to the PTX/SASS/Lines tabs only where those share the page (the static report).
    marks = {n: [LineMark(href, label, title) for href, label, title in items]
             for n, items in machine.cuda_marks(report, rid).items()} if links else {}
    return (f'<details class="tl-sub"><summary>device code ({_lines(text)} lines)</summary>'
            f"{highlight_code(text, language, anchor_prefix=f'{rid}-cuda', marks=marks)}</details>")


_LAUNCH_LINE = {
    # how each family's launchers start a device kernel (HIP's <<< >>>, the CPU's direct call,
    # tvm_ffi's packed function handle)
    "hip": r"{name}\s*<<<|TVMFFIFunctionCall\({name}_packed",
    "metal": r"TVMFFIFunctionCall\({name}_packed",
    "cpu": r"(?<![\w\"]){name}\s*\(",
}


def launch_links(report: KernelReport, text: str) -> dict[int, list[int]]:
    """1-based lines of a non-CUDA launcher ``text`` that launch each device kernel -> kernel indices."""
    pattern = _LAUNCH_LINE.get(report.family)
    found: dict[int, list[int]] = {}
    if pattern is None:
        return found
    for i, k in enumerate(report.kernels):
        regex = re.compile(pattern.format(name=re.escape(k.name)))
        for number, line in enumerate(text.split("\n"), 1):
            if regex.search(line) and not re.match(r"\s*(?:static|//|extern|int32_t\s+\w+\s*\()", line):
                found.setdefault(number, []).append(i)
    return found


@functools.lru_cache(maxsize=64)
def launcher_html(report: KernelReport, backend: str | None = None, *, back_links: bool = True) -> str:
    """One collapsible block per backend (or only ``backend``), with the reason where absent.

    The lines that encode a TMA descriptor are highlighted; with ``back_links`` they also link to
    the descriptor's row of the TMA table. The inspector widget turns the links off: its TMA
    table is in another tab, where an in-page link cannot reach (it shows excerpts instead).
    """
    rid = report_id(report)
    links = tma_links(report)
    names = [d.name for d in report.tma_descriptors]
    out = []
    for b in (report.launcher_backends if backend is None else (backend,)):
        item = report.sources.launcher(b)
        if item is None:
            out.append(f'<p class="tl-absent"><b>{esc(b)}</b>: not generated for this report.</p>')
            continue
        if item.text is None:
            out.append(f'<p class="tl-absent"><b>{esc(b)}</b>: absent &mdash; {esc(item.reason or "no reason given")}</p>')
            continue
        for p, (part, text, language) in enumerate(_launcher_parts(item)):
            anchor = _part_anchor(rid, b, p)
            marks: dict[int, list[LineMark]] = {}
            for i, entries in links.items():
                for eb, epart, eanchor, (first, last) in entries:
                    if eanchor != anchor:
                        continue
                    for line in range(first, last + 1):
                        label = names[i] if line == first else ""
                        if label and back_links:
                            marks.setdefault(line, []).append(
                                LineMark(f"#{rid}-tma-{i}", names[i], f"TMA descriptor {names[i]}"))
                        else:
                            marks.setdefault(line, [])
            for line, kernels in launch_links(report, text).items():
                for i in kernels:
                    name = report.kernels[i].name
                    marks.setdefault(line, []).append(
                        LineMark(f"#{rid}-kernel-{i}", name, f"launches {name}: see its launch configuration"))
            title = esc(b) if part == "main" else f"{esc(b)}: {esc(part)}"
            code = highlight_code(text, language, anchor_prefix=anchor, marks=marks)
            out.append(f'<details class="tl-sub" id="{anchor}"><summary>{title} '
                       f'<span class="tl-muted">({esc(language)}, {_lines(text)} lines)</span></summary>{code}</details>')
    return "".join(out)


@functools.lru_cache(maxsize=64)
def tma_html(report: KernelReport, *, excerpts: bool = False) -> str:
    """The decoded TMA table; rows link to the launcher lines that encode each descriptor.

    With ``excerpts`` the encode lines of every launcher are also shown under the table and the
    rows link there (the inspector widget, whose launcher code sits in another tab, uses this).
    """
    if not report.tma_descriptors:
        target = _target_record(report)
        if target is not None and not target.tma:
            return f'<p class="tl-muted">{esc(target.not_applicable("tma"))}</p>'
        return '<p class="tl-muted">This kernel encodes no TMA descriptors.</p>'
    rid = report_id(report)
    links = tma_links(report)
    if excerpts:
        links = {i: [(b, part, anchor.replace("-src-", "-x-"), span) for b, part, anchor, span in entries]
                 for i, entries in links.items()}
    headers = ["name", "buffer", "kernel", "kind", "dtype", "rank", "global dim", "global stride (B)", "box dim",
               "element strides", "swizzle", "interleave", "L2 promotion", "OOB fill", "element B", "box elements",
               "box B", "inner box B", "swizzle span B", "problems", "encoded at"]
    rows, attrs = [], []
    for i, d in enumerate(report.tma_descriptors):
        rows.append(_tma_cells(d, i, rid, links.get(i, [])))
        cls = ' class="tl-problem"' if d.problems else ""
        attrs.append(f' id="{rid}-tma-{i}"{cls} data-descriptor="{esc(d.name)}"')
    table = _table(headers, rows, row_attrs=attrs, numeric=(5, 14, 15, 16, 17, 18), raw=(0, 8, 19, 20))
    note = ('<p class="tl-muted">Dimensions innermost first, as the driver takes them; '
            "global stride[0] is the element size (TileLang's convention).</p>")
    conditions = [f"<li><b>{esc(d.name)}</b>: {esc(c)}</li>" for d in report.tma_descriptors for c in d.launch_conditions]
    extra = f"<p>Checked at launch:</p><ul>{''.join(conditions)}</ul>" if conditions else ""
    if excerpts:
        extra += _tma_excerpts(report, rid, links)
    return note + table + extra


def _tma_excerpts(report: KernelReport, rid: str, links: dict[int, list[tuple[str, str, str, tuple[int, int]]]]) -> str:
    texts = {}
    for item in report.sources.launchers:
        for p, (part, text, language) in enumerate(_launcher_parts(item)):
            texts[_part_anchor(rid, item.backend, p).replace("-src-", "-x-")] = (text, language)

    def numbered(code: str, tmp_prefix: str, prefix: str, offset: int) -> str:
        # The excerpt's lines get the ids and numbers of the lines in the whole source (the
        # number span ends with a space: see ``highlight_code``).
        def line(m: re.Match[str]) -> str:
            n = int(m.group(1)) + offset
            return f'id="{prefix}-L{n}"><span class="tl-ln">{n}{m.group(2)}</span>'
        return re.sub(rf'id="{re.escape(tmp_prefix)}-L(\d+)"><span class="tl-ln">\d+( ?)</span>', line, code)

    out = ["<p>Where each launcher encodes each descriptor:</p>"]
    for i, d in enumerate(report.tma_descriptors):
        for backend, part, anchor, (first, last) in links.get(i, []):
            text, language = texts[anchor]
            lines = text.split("\n")
            # Blank lines keep the real line numbers; only the span is shown.
            excerpt = "\n".join(lines[first - 1:last])
            code = highlight_code(excerpt, language, anchor_prefix=f"{anchor}-o{first - 1}",
                                  marks={1: [LineMark(f"#{rid}-tma-{i}", d.name, f"TMA descriptor {d.name}")]})
            code = numbered(code, f"{anchor}-o{first - 1}", anchor, first - 1)
            where = backend if part == "main" else f"{backend} {part}"
            out.append(f'<details class="tl-sub" open><summary>{esc(d.name)} in {esc(where)} '
                       f'<span class="tl-muted">lines {first}&ndash;{last}</span></summary>{code}</details>')
    return "".join(out)


def _tma_cells(d: TmaDescriptor, i: int, rid: str, links: list[tuple[str, str, str, tuple[int, int]]]) -> list[Any]:
    if d.kind == "im2col":
        box = (f"channels/pixel {esc(d.channels_per_pixel)}, pixels/column {esc(d.pixels_per_column)}"
               f"<br>corners {esc(dims(d.lower_corner))} .. {esc(dims(d.upper_corner))}")
    else:
        box = f'<span class="tl-box">{esc(dims(d.box_dim))}</span>'
    problems = ("<ul>" + "".join(f"<li>&#9888; {esc(p)}</li>" for p in d.problems) + "</ul>") if d.problems else "ok"
    where = "<br>".join(
        f'<a href="#{esc(anchor)}-L{first}">{esc(backend if part == "main" else f"{backend} {part}")} '
        f"L{first}&ndash;{last}</a>"
        for backend, part, anchor, (first, last) in links
    ) or '<span class="tl-muted">not found</span>'
    name = f'<a href="#{rid}-tma-{i}"><code>{esc(d.name)}</code></a>'
    return [name, d.buffer or "-", d.kernel or "-", d.kind, d.dtype, d.rank, dims(d.global_dim),
            dims(d.global_stride_bytes), box, dims(d.element_strides), d.swizzle, d.interleave, d.l2_promotion,
            d.oob_fill, _num(d.element_bytes), _num(d.box_elements), _num(d.box_bytes), _num(d.inner_box_bytes),
            _num(d.swizzle_span_bytes), problems, where]


def wgmma_html(report: KernelReport) -> str:
    if not report.wgmma:
        target = _target_record(report)
        if target is not None and not target.wgmma:
            return f'<p class="tl-muted">{esc(target.not_applicable("wgmma"))}</p>'
        return '<p class="tl-muted">This kernel issues no WGMMA instructions.</p>'
    rows = []
    for w in report.wgmma:
        rows.append([w.kernel or "-", w.instruction, w.variant, w.m, w.n, w.k, w.a_dtype, w.b_dtype, w.accum_dtype,
                     w.a_major, w.b_major, w.count])
    out = [_table(["kernel", "instruction", "variant", "M", "N", "K", "A dtype", "B dtype", "accum", "A major",
                   "B major", "call sites"], rows, numeric=(3, 4, 5, 11))]
    ops: list[list[Any]] = []
    for w in report.wgmma:
        for role, op in (("A", w.a), ("B", w.b)):
            ops.append(_operand_row(w.instruction, role, op, report, w.n))
    out.append("<p>Shared-memory matrix descriptors (LBO/SBO as encoded: byte offsets &gt;&gt; 4). "
               "&ldquo;tilelab&rdquo;: the descriptor tilelab computes from the buffer&rsquo;s inferred layout "
               "(offsets only), compared with the compiler&rsquo;s; the Layouts section draws its core matrices.</p>")
    out.append(_table(["instruction", "operand", "buffer", "layout type", "swizzle", "LBO", "LBO bytes", "SBO",
                       "SBO bytes", "major", "tilelab"], ops, numeric=(3, 5, 6, 7, 8)))
    return "".join(out)


def _operand_row(instruction: str, role: str, op: WgmmaOperand | None, report: KernelReport | None = None,
                 inst_n: int | None = None) -> list[Any]:
    if op is None:
        return [instruction, role, "registers", "-", "-", "-", "-", "-", "-", "-", "-"]
    verdict = "-"
    layout = next((x for x in (report.layouts if report else ()) if x.buffer == op.buffer and x.scope == "shared"), None)
    if layout is not None:
        from .. import swizzle as sw

        check = sw.check_wgmma_operand(layout, op, role, 64 if role == "A" else int(inst_n or 0))
        verdict = ("agrees" if check.agrees else
                   "differs" if check.descriptor is not None else f"n/a: {check.reason[:80]}")
    return [instruction, role, op.buffer or "-", op.layout_type, op.swizzle, op.lbo, op.lbo_bytes, op.sbo,
            op.sbo_bytes, op.major, verdict]


def _layout_drawing(layout: Layout, operands: Sequence[tuple[str, WgmmaOperand, int]] = ()) -> str:
    """The layout's picture; a shared one also coloured by bank (folded), and, for each WGMMA
    operand ``(role, compiler operand, instruction MN)`` that reads it, tilelab's core-matrix
    overlay with LBO/SBO arrows and whether tilelab's descriptor agrees with the compiler's."""
    try:
        from .. import swizzle as sw
        from .svg import layout_svg, wgmma_operand_svg  # another module draws layouts; optional
    except ImportError:
        return _layout_table(layout)
    try:
        out = [f'<div class="tl-scroll">{layout_svg(layout)}</div>']
        if layout.scope == "shared" and layout.offsets:
            out.append('<details class="tl-sub tl-bank-colour"><summary>coloured by bank (hover a cell: every cell of '
                       'its bank)</summary>'
                       f'<div class="tl-scroll">{layout_svg(layout, color_by="bank", hover_crop=1024)}</div></details>')
        for role, op, inst_mn in operands:
            check = sw.check_wgmma_operand(layout, op, role, inst_mn)
            cls = "tl-ok" if check.agrees else "tl-absent"
            out.append(f'<p class="{cls} tl-wgmma-check" data-operand="{esc(role)}">WGMMA {esc(role)} operand '
                       f"(m64n{inst_mn if role == 'B' else '&hellip;'}): {esc(check.summary())}</p>")
            if check.descriptor is not None:
                out.append(f'<div class="tl-scroll tl-wgmma-overlay">{wgmma_operand_svg(check.descriptor, compiler=op)}</div>')
        return "".join(out)
    except Exception as err:  # a drawing bug must not hide the rest of the report
        return f'<p class="tl-absent">Could not draw this layout: {esc(type(err).__name__)}: {esc(err)}</p>' + _layout_table(layout)


def _layout_table(layout: Layout) -> str:
    if len(layout.shape) != 2:
        return ""
    rows_n, cols_n = layout.shape
    if rows_n * cols_n > _LAYOUT_TABLE_LIMIT:
        return (f'<p class="tl-muted">{rows_n}&times;{cols_n} elements: too many for a table; '
                "the compiler's description above is exact.</p>")
    if layout.scope == "shared" and layout.offsets:
        cells = [str(v) for v in layout.offsets]
        head = "physical element offset of each logical element"
    elif layout.threads:
        cells = [f"T{t}:{r}" for t, r in zip(layout.threads, layout.locals_)]
        head = "thread:register of each logical element"
    else:
        return ""
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells[r * cols_n:(r + 1) * cols_n]) + "</tr>"
        for r in range(rows_n)
    )
    return (f'<details class="tl-sub"><summary>{esc(head)}</summary>'
            f'<table class="tl-table tl-layout-table"><tbody>{body}</tbody></table></details>')


def layouts_html(report: KernelReport) -> str:
    if not report.layouts:
        return '<p class="tl-muted">No shared-memory or fragment layouts were recorded.</p>'
    out = []
    # which WGMMA operands read each shared buffer: (role, compiler's descriptor, instruction MN extent)
    operands: dict[str, list[tuple[str, WgmmaOperand, int]]] = {}
    for w in report.wgmma:
        for role, op in (("A", w.a), ("B", w.b)):
            if op is not None and op.buffer:
                entry = (role, op, 64 if role == "A" else w.n)
                if entry not in operands.setdefault(op.buffer, []):
                    operands[op.buffer].append(entry)
    for lay in report.layouts:
        extra = ""
        if lay.scope == "fragment":
            extra = f", threads {lay.thread_base}..{lay.thread_base + (lay.thread_count or 0) - 1}"
            if lay.replicate > 1:
                extra += f", replicated {lay.replicate}x"
        out.append(
            f'<details class="tl-sub" open><summary>{esc(lay.buffer)} '
            f'<span class="tl-muted">({esc(lay.scope)} {esc(lay.dtype)} [{esc(dims(lay.shape))}]{esc(extra)})</span></summary>'
            f"<p><code>{esc(lay.description)}</code></p>{_layout_drawing(lay, operands.get(lay.buffer, ()))}</details>"
        )
    return "".join(out)


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
    out = [_table(["name", "kind", "dtype", "shape", "strides", "passed at launch", "binds from", "value",
                   "cache key part"], rows)] if rows else ['<p class="tl-muted">No arguments recorded.</p>']
    out.append(f"<p>Cache key: <code>{esc(report.cache_key or '-')}</code></p>")
    if report.pass_configs:
        out.append(_table(["pass config", "value"], list(report.pass_configs)))
    return "".join(out)


def mfma_html(report: KernelReport) -> str:
    """Each MFMA form (intrinsic, shape, types, operands, per-lane layouts) and the LDS reads that
    feed its operands, with their bank conflicts under the CDNA LDS model (tilelab.mfma)."""
    if not report.mfma:
        target = _target_record(report)
        if target is not None and not target.mfma:
            return f'<p class="tl-muted">{esc(target.not_applicable("mfma"))}</p>'
        return '<p class="tl-muted">This kernel issues no MFMA instructions.</p>'
    rid = report_id(report)
    source_lines = report.sources.device.split("\n")

    def at(n: int) -> str:  # the line itself rides along as a tooltip (the HIP tab may be elsewhere)
        text = source_lines[n - 1].strip() if 0 < n <= len(source_lines) else ""
        return f'<a href="#{rid}-cuda-L{n}" title="{esc(text)}">L{n}</a>'

    rows = []
    for m in report.mfma:
        where = ", ".join(at(n) for n in m.lines)
        rows.append([m.kernel or "-", m.intrinsic, m.variant, m.shape, m.a_dtype, m.b_dtype, m.accum_dtype,
                     m.a_operand + (f" \u2190 {m.a_lds}" if m.a_lds else ""),
                     m.b_operand + (f" \u2190 {m.b_lds}" if m.b_lds else ""), m.accumulator, m.count, where])
    out = [_table(["kernel", "intrinsic", "variant", "M\u00d7N\u00d7K", "A dtype", "B dtype", "accum", "A operand (\u2190 LDS)",
                   "B operand (\u2190 LDS)", "accumulator", "call sites", "in HIP"], rows, numeric=(10,), raw=(11,))]
    out.append("<p>What each of the 64 lanes of a wavefront holds (AMD CDNA3 ISA, MFMA register layouts):</p>")
    lane_rows = []
    for m in report.mfma:
        lane_rows += [[m.shape, f"A ({m.a_operand})", m.a_lanes], [m.shape, f"B ({m.b_operand})", m.b_lanes],
                      [m.shape, f"C/D ({m.accumulator})", m.c_lanes]]
    out.append(_table(["shape", "operand", "per lane"], lane_rows))
    if report.lds_reads:
        out.append("<p>LDS reads that fill the operand registers, per 64-lane wavefront. Model: 32 banks &times; "
                   "4 bytes; a read of W bytes per lane is served 128/W lanes at a time (W &le; 4: 32 lanes); "
                   "each phase takes as many clocks as the most distinct 4-byte words one bank delivers. "
                   "The Layouts section draws each LDS buffer&rsquo;s layout; its bank colours hold on CDNA too "
                   "(the same 32 banks of 4 bytes).</p>")
        lds_rows = []
        for r in report.lds_reads:
            verdict = "conflict-free" if r.conflict_degree <= 1 else f"{r.conflict_degree:g}-way"
            lds_rows.append([r.buffer, r.destination, f"{r.width_bytes} B", len(r.phase_clocks),
                             " ".join(str(c) for c in r.phase_clocks), r.clocks, verdict,
                             ", ".join(r.loop_variables) or "-", at(r.line)])
        out.append(_table(["LDS buffer", "into", "per lane", "phases", "clocks per phase (worst loop step)",
                           "clocks", "bank conflicts", "loop variables", "in HIP"], lds_rows,
                          row_attrs=[' class="tl-problem"' if r.conflict_degree > 1 else "" for r in report.lds_reads],
                          numeric=(3, 5), raw=(8,)))
        for r in report.lds_reads:
            out.append(_bank_strip(r))
    return "".join(out)


def _bank_strip(read: Any) -> str:
    """The bank each lane of the first loop step reads first, one row per phase."""
    per = len(read.byte_addresses) // max(1, len(read.phase_clocks))
    rows = []
    for p, clocks in enumerate(read.phase_clocks):
        lanes = range(p * per, (p + 1) * per)
        rows.append([f"lanes {lanes.start}-{lanes.stop - 1}", clocks,
                     " ".join(str(read.banks[lane]) for lane in lanes)])
    return (f'<details class="tl-sub"><summary>{esc(read.buffer)} &rarr; {esc(read.destination)}: '
            "bank of each lane</summary>" + _table(["phase", "clocks", "first bank per lane"], rows) + "</details>")


def comparison_html(comparison: Any) -> str:
    """A :class:`tilelab.targets.TargetComparison` as one table, a column per target."""
    rows = [[label, *values] for label, values in comparison.rows]
    return wrap(_table(["", *comparison.targets], rows))


_SECTION_BODIES = {
    "summary": summary_html, "cuda": cuda_html,
    "launcher": lambda r, links: launcher_html(r), "tma": lambda r, links: tma_html(r),
    "wgmma": lambda r, links: wgmma_html(r), "layouts": lambda r, links: layouts_html(r),
    "arguments": lambda r, links: arguments_html(r),
    "lines": lambda r, links: machine.lines_html(r, report_id(r), links),
    "ptx": lambda r, links: machine.ptx_html(r, report_id(r), links),
    "sass": lambda r, links: machine.sass_html(r, report_id(r), links),
    "ir": lambda r, links: machine.ir_html(r, report_id(r)),
    "mfma": lambda r, links: mfma_html(r),
}


def default_sections(report: KernelReport) -> tuple[str, ...]:
    """Every section with something to show: MFMA only for AMD targets, the opt-in tiers only
    when they were computed."""
    skip = set() if report.family == "hip" else {"mfma"}
    if report.machine is None:
        skip |= {"lines", "ptx", "sass"}
    if report.passes is None:
        skip.add("ir")
    return tuple(s for s in SECTIONS if s not in skip)


def section_title(report: KernelReport, name: str) -> str:
    count = {"tma": len(report.tma_descriptors), "wgmma": len(report.wgmma), "layouts": len(report.layouts),
             "arguments": len(report.arguments), "mfma": len(report.mfma)}.get(name)
    if name in ("tma", "wgmma") and report.family != "cuda":
        count = None  # "does not apply", not zero
    title = _DEVICE_TITLES.get(report.family, "CUDA") if name == "cuda" else SECTION_TITLES[name]
    return title + (f" ({count})" if count is not None else "")


def section_body(report: KernelReport, name: str, *, cross_links: bool = True) -> str:
    """The inner markup of one section (no root wrapper, no stylesheet).

    ``cross_links=False`` leaves out links into other sections (the widget shows each section
    in its own tab, where such links cannot resolve)."""
    if name not in _SECTION_BODIES:
        raise ValueError(f"unknown section {name!r}; choose from {', '.join(SECTIONS)}")
    return _section_body(report, name, cross_links)


@functools.lru_cache(maxsize=64)
def _section_body(report: KernelReport, name: str, cross_links: bool = True) -> str:
    # Reports are frozen and hashable; re-displaying one (a re-run cell) reuses its markup.
    return _SECTION_BODIES[name](report, cross_links)


def wrap(body: str, *, root_id: str | None = None) -> str:
    """Wrap markup in the scoped root with the stylesheet, ready to display on its own."""
    rid = f' id="{esc(root_id)}"' if root_id else ""
    return f'<div class="tilelab-report"{rid}><style>{ROOT_CSS}{CODE_CSS}</style>{body}</div>'


def render_section(report: KernelReport, name: str, *, cross_links: bool = True) -> str:
    """One section alone, styled (what the inspector widget shows in a tab)."""
    return wrap(section_body(report, name, cross_links=cross_links))


def render_html(report: KernelReport, *, standalone: bool = False, sections: Sequence[str] | None = None,
                extra: Sequence[tuple[str, str]] = ()) -> str:
    """The whole report as static HTML; ``standalone`` adds a page title and page colours.

    ``extra`` appends (title, markup) sections after the report's own, open (the inspector puts
    its Timing results there); the markup is inserted as is, the title escaped.
    """
    chosen = tuple(sections) if sections is not None else default_sections(report)
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    rid = report_id(report)
    sites = sum(w.count for w in report.wgmma)
    if report.family == "cuda":
        counts = f"{len(report.tma_descriptors)} TMA, {sites} WGMMA, {len(report.problems)} problem(s)"
    elif report.family == "hip":
        counts = f"{sum(m.count for m in report.mfma)} MFMA"
    else:
        counts = _DEVICE_TITLES.get(report.family, report.family) + " source"
    head = (f'<div class="tl-head">{esc(report.name)} <span class="tl-muted">for {esc(report.target)}: '
            f"{len(report.kernels)} kernel(s), {esc(counts)}</span></div>")
    parts = [head]
    for name in chosen:
        opened = " open" if name in _OPEN else ""
        parts.append(f'<details class="tl-section" id="{rid}-{name}"{opened}>'
                     f"<summary>{esc(section_title(report, name))}</summary>{section_body(report, name)}</details>")
    for n, (title, markup) in enumerate(extra):
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or f"extra-{n}"
        parts.append(f'<details class="tl-section" id="{rid}-{slug}" open>'
                     f"<summary>{esc(title)}</summary>{markup}</details>")
    body = wrap("".join(parts), root_id=rid)
    if standalone:
        return (f"<title>{esc(report.name)} ({esc(report.target)}) - tilelab</title>"
                "<style>body{margin:0;background:#fff}@media (prefers-color-scheme: dark){body{background:#111}}</style>"
                + body)
    return body


__all__ = [
    "SECTIONS", "comparison_html", "default_sections", "encode_spans", "launch_links", "mfma_html", "esc", "launcher_html", "render_html", "render_section", "report_id",
    "section_body", "section_title", "tma_links",
]
