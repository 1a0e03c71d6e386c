"""Text parsing of the CUDA TileLang generates: where each ``__global__`` kernel starts, and the
WGMMA calls with the descriptors they read."""

from __future__ import annotations

import re
from typing import Any

_SOURCE_KERNEL = re.compile(r'__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\([^;{]*\)\s*\{')
_SOURCE_DESC_INIT = re.compile(
    r"tl::initialize_wgmma_descriptor<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\(\s*(\w+)\s*,\s*(?:\(\(void\*\)\(\(char\*\))?\(&\((?:\(\([^)]*\))?(\w+)\)?\[")
_SOURCE_WGMMA = re.compile(r"tl::wgmma_(ss|rs)<[^>]*>\(([^;]*)\);")
_SOURCE_DESC_USE = re.compile(r"uint64_t\(\s*(\w+)")


def source_wgmma_calls(device_source: str) -> dict[str, list[dict[str, Any]]]:
    """Per kernel, each ``tl::wgmma_ss/rs`` call of the generated CUDA in source order, with the
    ``(buffer, layout_type, lbo, sbo)`` of the latest ``tl::initialize_wgmma_descriptor`` of each
    descriptor variable it reads (the code generator gives every variable a distinct name)."""
    starts = [(m.start(), m.group(1)) for m in _SOURCE_KERNEL.finditer(device_source)]
    result: dict[str, list[dict[str, Any]]] = {}
    for index, (start, name) in enumerate(starts):
        stop = starts[index + 1][0] if index + 1 < len(starts) else len(device_source)
        body = device_source[start:stop]
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
