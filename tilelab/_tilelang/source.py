"""Text parsing of the CUDA TileLang generates (the device source), in one place: where each
``__global__`` kernel is declared and what its body holds, the WGMMA calls with the descriptors
they read, and the lines that use a TMA descriptor or issue a WGMMA instruction.

Pure text, no TileLang import. Two readings of the WGMMA calls live here on purpose, each serving
a different check: :func:`source_wgmma_calls` is what the IR readers hold their descriptor
associations against (``ir.wgmma_instructions``), and :func:`source_wgmma` is the corpus's own
ground truth (``python -m tilelab corpus``), which a report built from the IR must agree with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# The head of a kernel's declaration or definition: extern "C" __global__ void
# __launch_bounds__(256, 1) gemm_kernel(...
KERNEL_HEAD = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(")
# A definition: the head, its parameters, and the brace that opens the body.
KERNEL_DEFINITION = re.compile(KERNEL_HEAD.pattern + r"[^;{]*\)\s*\{")


def split_top_level(text: str) -> list[str]:
    """``text`` split at its top-level commas (not those inside brackets), each part stripped."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def source_kernels(device: str) -> list[str]:
    """Names of the ``__global__`` functions the device source declares or defines, in order."""
    names: list[str] = []
    for m in KERNEL_HEAD.finditer(device):
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def kernel_bodies(device: str) -> list[tuple[str, str]]:
    """(kernel name, body text) for each ``__global__`` definition: the text from the brace that
    opens it to the next definition (or the end of the source)."""
    found = list(KERNEL_DEFINITION.finditer(device))
    return [(m.group(1), device[m.end():found[i + 1].start() if i + 1 < len(found) else len(device)])
            for i, m in enumerate(found)]


def is_kernel_declaration(line: str) -> bool:
    """Whether a device-source line declares a kernel (its parameters name every descriptor)."""
    return "__global__" in line


def mentions(name: str) -> re.Pattern[str]:
    """An identifier ``name`` as a whole word (``A_desc``, not ``A_desc2`` or ``xA_desc``)."""
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![A-Za-z0-9])")


def descriptor_use_lines(lines: Sequence[str], name: str) -> tuple[int, ...]:
    """The 1-based device-source ``lines`` that use TMA descriptor ``name`` (``tl::tma_load(A_desc,
    ...)``, its prefetch), kernel declarations left out."""
    m = mentions(name)
    return tuple(n for n, line in enumerate(lines, 1)
                 if name in line and m.search(line) and not is_kernel_declaration(line))


def wgmma_lines(lines: Sequence[str], variant: str, instruction: str,
                descriptors: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    """The 1-based device-source ``lines`` that issue the WGMMA ``instruction`` ("m64n128k16") of
    ``variant`` ("ss" or "rs"), or initialise one of its ``descriptors`` (layout type, LBO, SBO)."""
    shape = re.match(r"m(\d+)n(\d+)k(\d+)", instruction)
    issue = re.compile(rf"\btl::wgmma_{re.escape(variant)}<[^>]*?\b{shape.group(1)},\s*{shape.group(2)},\s*"
                       rf"{shape.group(3)}\b") if shape else re.compile(r"\btl::wgmma_")
    descs = [re.compile(rf"\binitialize_wgmma_descriptor<\s*{layout},\s*{lbo},\s*{sbo}\s*>")
             for layout, lbo, sbo in descriptors]
    return tuple(n for n, line in enumerate(lines, 1) if issue.search(line) or any(d.search(line) for d in descs))


_SOURCE_DESC_INIT = re.compile(
    r"tl::initialize_wgmma_descriptor<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\(\s*(\w+)\s*,\s*(?:\(\(void\*\)\(\(char\*\))?\(&\((?:\(\([^)]*\))?(\w+)\)?\[")
_SOURCE_WGMMA = re.compile(r"tl::wgmma_(ss|rs)<[^>]*>\(([^;]*)\);")
_SOURCE_DESC_USE = re.compile(r"uint64_t\(\s*(\w+)")


def source_wgmma_calls(device_source: str) -> dict[str, list[dict[str, Any]]]:
    """Per kernel, each ``tl::wgmma_ss/rs`` call of the generated CUDA in source order, with the
    ``(buffer, layout_type, lbo, sbo)`` of the latest ``tl::initialize_wgmma_descriptor`` of each
    descriptor variable it reads (the code generator gives every variable a distinct name)."""
    result: dict[str, list[dict[str, Any]]] = {}
    for name, body in kernel_bodies(device_source):
        events = sorted([(m.start(), "init", m) for m in _SOURCE_DESC_INIT.finditer(body)]
                        + [(m.start(), "mma", m) for m in _SOURCE_WGMMA.finditer(body)], key=lambda e: e[0])
        current: dict[str, tuple] = {}
        calls: list[dict[str, Any]] = []
        for _, kind, m in events:
            if kind == "init":
                layout, lbo, sbo, var, buffer = m.groups()
                current[var] = (buffer, int(layout), int(lbo), int(sbo))
                continue
            used = _SOURCE_DESC_USE.findall(m.group(2))
            if m.group(1) == "ss":
                a_var, b_var = (used + [None, None])[:2]
            else:
                a_var, b_var = None, (used + [None])[0]
            calls.append({"variant": m.group(1), "a_var": a_var, "b_var": b_var,
                          "a": current.get(a_var) if a_var else None, "b": current.get(b_var) if b_var else None})
        if calls or name not in result:
            result.setdefault(name, []).extend(calls)
    return result


_WGMMA_EVENT = re.compile(
    r"tl::initialize_wgmma_descriptor<(\d+), (\d+), (\d+)>\((\w+), (.*?)\);"
    r"|tl::wgmma_(ss|rs)<([^>]*)>\((.*?)\);")


def source_wgmma(device: str) -> list[tuple]:
    """One record per ``tl::wgmma_ss/rs`` call site: (kernel, instruction, variant, a_major, b_major,
    a operand, b operand), an operand being (buffer, layout type, LBO, SBO) of the descriptor its
    variable was last initialised to before the call, or None when it comes from registers."""
    sites = []
    for kernel, body in kernel_bodies(device):
        current: dict[str, tuple] = {}
        for m in _WGMMA_EVENT.finditer(body):
            if m.group(1) is not None:
                # (&(((half_t*)A_shared)[0])), at a byte offset ((void*)((char*)(&(...)) + 4096)),
                # or, for a statically declared buffer, (&(A_shared[0]))
                pointer = (re.search(r"\(\w+\s*\*\)(\w+)\)\[", m.group(5))
                           or re.search(r"&\((\w+)\[", m.group(5)))
                buffer = pointer.group(1) if pointer else None
                current[m.group(4)] = (buffer, int(m.group(1)), int(m.group(2)), int(m.group(3)))
                continue
            variant, params, args = m.group(6), split_top_level(m.group(7)), split_top_level(m.group(8))
            mm, nn, kk = params[3:6]
            tnsp_a, tnsp_b = params[6], params[7]  # rs keeps both template arguments (A's is false)

            def operand(expr: str, current: dict[str, tuple] = current) -> tuple | None:
                for ident in re.findall(r"[A-Za-z_]\w*", expr):
                    if ident in current:
                        return current[ident]
                return ("?", -1, -1, -1)

            a = operand(args[0]) if variant == "ss" else None
            b = operand(args[1])
            sites.append((kernel, f"m{mm}n{nn}k{kk}", variant, "MN" if tnsp_a == "true" else "K",
                          "MN" if tnsp_b == "true" else "K", a, b))
    return sites
