"""What the CPU path's rules share: the refusal of a construct with no tile-level meaning, and the
kernel's source lines that name it (apart from ``emulate.py`` so that its rules' modules import
them without importing it)."""

from __future__ import annotations

import linecache
from typing import Any

OOB_FUNCTION = "tilelab_emu_oob"  # int32 tilelab_emu_oob(buffer id, kind, bx, by, bz, rank, idx[6], extent[6])
# Every integer argument of the runtime's functions is an int64: TileLang's codegen declares an
# extern function once per call, from that call's argument types, and its index-width pass widens
# the int32 arguments of a call that sits inside a 64-bit index (a guarded load whose value indexes
# another buffer) but not the others; two declarations that differ do not compile.
EXTERN_INT = "int64"


def oob_call(*args: Any) -> Any:
    """The call of the out-of-bounds record with ``args`` (buffer id, kind, bx, by, bz, rank,
    idx[6], extent[6]), each an int64 (:data:`EXTERN_INT`)."""
    from .env import tilelang

    tirx = tilelang().tvm.tirx
    wide = [tirx.const(int(a if isinstance(a, int) else a.value), EXTERN_INT) if isinstance(a, (int, tirx.IntImm)) else
            a if str(a.dtype) == EXTERN_INT else tirx.Cast(EXTERN_INT, a) for a in args]
    return tirx.call_extern("int32", OOB_FUNCTION, *wide)


class EmulationRefused(Exception):
    """A kernel uses a construct with no tile-level meaning: ``construct`` names it, ``line`` is
    where the kernel says it (0 when unknown), ``file`` the file of that line."""

    def __init__(self, kernel: str, construct: str, detail: str, file: str = "", line: int = 0,
                 text: str = "") -> None:
        self.kernel, self.construct, self.detail = kernel, construct, detail
        self.file, self.line, self.text = file, line, text
        where = f" (line {line}: {text.strip()})" if line and text.strip() else ""
        super().__init__(
            f"{kernel}: {construct}{where} has no meaning at the level of tiles, so it cannot run on the CPU: "
            f"{detail}. What still works: tilelab.inspect (the lowering, the source, TMA, WGMMA, layouts) and a run "
            "on a GPU (tilelab.run without device='cpu')")


def _source_lines(func: Any) -> tuple[str, int, list[str]]:
    """(file, first line, the kernel's lines) from the PrimFunc's span, as far as linecache has them."""
    try:
        span = func.span
        filename = str(span.source_name.name) if span is not None else ""
        start = int(span.line) if span is not None else 0
    except Exception:
        return "", 0, []
    if not filename or start <= 0:
        return filename, start, []
    lines, number = [], start
    while True:
        text = linecache.getline(filename, number)
        if not text:
            break
        lines.append(text)
        number += 1
        if len(lines) > 2000:
            break
    # the kernel ends where the indentation falls back to (or below) its def's
    first = lines[0] if lines else ""
    indent = len(first) - len(first.lstrip())
    end = len(lines)
    for i, text in enumerate(lines[1:], 1):
        if text.strip() and not text.lstrip().startswith(("#", ")", "@")) and len(text) - len(text.lstrip()) <= indent:
            end = i
            break
    return filename, start, lines[:end]
