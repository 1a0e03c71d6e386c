"""A device-side assert or a trap, located: which line of the kernel, which of the user's lines,
which block and thread, and the message.

What CUDA gives when a kernel asserts is text on the launching process's stderr, one line per
failing thread, in the CUDA runtime's format::

    <file>:<line>: <function>: block: [3,0,0], thread: [17,0,0] Assertion `<expression>` failed.

and the context is lost (``cudaErrorAssert``, "device-side assert triggered"). TileLang's
``T.device_assert`` lowers to its helpers ``device_assert``/``device_assert_with_msg`` in
``tl_templates/cuda/debug.h``, so ``<file>:<line>`` names that header, never the kernel: the
kernel's line is found here from the call sites in the generated source instead. With a message,
the helper first ``printf``\\ s ``Device assert failed: <message>`` to stdout, and the message
ends with TileLang's own ``at <file>:<line> in <function>`` lines (the user's line). A trap
(``__trap()``) prints nothing and fails the launch ("unspecified launch failure"): only its call
sites in the source can say where it may have come from.

Parsing and locating are pure (text in, a :class:`DeviceFault` out); :func:`line_origins` lowers
the kernel again with ``#line`` directives to map device lines to the user's lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The CUDA runtime's device assert message ("function: " is missing on some platforms).
ASSERT_LINE = re.compile(
    r"^(?P<file>[^\n]*?):(?P<line>\d+): (?:(?P<function>[^\n]*?): )?block: \[(?P<block>\d+, ?\d+, ?\d+)\], "
    r"thread: \[(?P<thread>\d+, ?\d+, ?\d+)\] Assertion `(?P<expression>[^\n]*)` failed\.\s*$", re.M)
# TileLang's device_assert_with_msg: printf("Device assert failed: %s\n", msg), msg ending with
# "\n  at <file>:<line> in <function>" lines (T.device_assert's stack information).
MESSAGE_LINE = re.compile(r"^Device assert failed: (?P<message>[^\n]*)$", re.M)
STACK_LINE = re.compile(r"^\s+at (?P<file>.+):(?P<line>\d+) in (?P<function>\S+)\s*$")
# Call sites in the generated CUDA (TileLang's helpers, and a trap the kernel calls itself).
_ASSERT_CALL = re.compile(r"\bdevice_assert(?P<with_msg>_with_msg)?\s*\(")
_TRAP_CALL = re.compile(r"\b__trap\s*\(\s*\)")
_C_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# The two helpers' assert() lines print the header's file; their expression is the helper's own.
_TILELANG_HELPER = re.compile(r"tl_templates[/\\]cuda[/\\]debug\.h$|\bdebug\.h$")


@dataclass(frozen=True)
class AssertLine:
    """One line of the CUDA runtime's assert output."""

    file: str
    line: int
    function: str | None
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    expression: str


@dataclass(frozen=True)
class DeviceFault:
    """Where a device-side assert or a trap happened, as far as the kernel and CUDA's output tell.

    ``kind`` is "assert" or "trap". ``device_line`` is 1-based in the kernel's device source (the
    CUDA tab), ``cell_line`` in ``cell_file`` (the user's kernel). ``block``/``thread`` are the
    first failing thread CUDA printed, ``threads`` how many lines it printed in all. ``sites``
    counts the call sites the kernel has of that kind; ``unlocated`` says why a line could not be
    named (several sites, no output), or is None.
    """

    kind: str
    message: str | None = None
    expression: str | None = None
    device_line: int | None = None
    cell_file: str | None = None
    cell_line: int | None = None
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    threads: int = 0
    sites: int = 0
    candidates: tuple[int, ...] = ()  # device lines when several sites could have fired
    unlocated: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "expression": self.expression,
                "device_line": self.device_line, "cell_file": self.cell_file, "cell_line": self.cell_line,
                "block": list(self.block) if self.block else None,
                "thread": list(self.thread) if self.thread else None, "threads": self.threads,
                "sites": self.sites, "candidates": list(self.candidates), "unlocated": self.unlocated}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceFault:
        def triple(v: Any) -> tuple[int, int, int] | None:
            return (int(v[0]), int(v[1]), int(v[2])) if v else None

        return cls(str(d["kind"]), d.get("message"), d.get("expression"), d.get("device_line"), d.get("cell_file"),
                   d.get("cell_line"), triple(d.get("block")), triple(d.get("thread")), int(d.get("threads", 0)),
                   int(d.get("sites", 0)), tuple(d.get("candidates", ())), d.get("unlocated"))


# --------------------------------------------------------------------------------------------
# Parsing CUDA's and TileLang's output
# --------------------------------------------------------------------------------------------


def _triple(text: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in text.split(","))
    return a, b, c


def parse_assert_lines(stderr: str) -> list[AssertLine]:
    """Every assert line of the CUDA runtime's format in ``stderr``, in order."""
    return [AssertLine(m.group("file"), int(m.group("line")), m.group("function"), _triple(m.group("block")),
                       _triple(m.group("thread")), m.group("expression"))
            for m in ASSERT_LINE.finditer(stderr)]


def parse_messages(stdout: str) -> list[tuple[str, tuple[tuple[str, int, str], ...]]]:
    """TileLang's ``Device assert failed:`` messages in ``stdout``: (the user's message, its
    ``at file:line in function`` lines), each distinct message once, in order of appearance."""
    lines = stdout.split("\n")
    found: dict[tuple, None] = {}
    for i, line in enumerate(lines):
        m = MESSAGE_LINE.match(line)
        if not m:
            continue
        stack = []
        for follow in lines[i + 1:]:
            s = STACK_LINE.match(follow)
            if not s:
                break
            stack.append((s.group("file"), int(s.group("line")), s.group("function")))
        found.setdefault((m.group("message"), tuple(stack)), None)
    return list(found)


def fold_assert_lines(stderr: str, keep: int = 3) -> str:
    """``stderr`` with CUDA's per-thread assert lines cut to the first ``keep`` of each site and a
    count of the rest: a whole grid failing the same assert prints one line per thread."""
    out: list[str] = []
    seen: dict[tuple[str, int, str], int] = {}
    for line in stderr.split("\n"):
        m = ASSERT_LINE.match(line)
        if not m:
            out.append(line)
            continue
        site = (m.group("file"), int(m.group("line")), m.group("expression"))
        seen[site] = seen.get(site, 0) + 1
        if seen[site] <= keep:
            out.append(line)
    more = {site: n - keep for site, n in seen.items() if n > keep}
    text = "\n".join(out)
    for (where, number, _), n in more.items():
        note = f"... and {n} more thread(s) failed the assert at {where}:{number} (not shown)"
        text = text.rstrip("\n") + "\n" + note + ("\n" if stderr.endswith("\n") else "")
    return text


def fold_assert_messages(stdout: str, keep: int = 3) -> str:
    """``stdout`` with TileLang's ``Device assert failed:`` blocks (the message and its ``at`` lines,
    printed once per failing thread) cut to the first ``keep`` of each and a count of the rest."""
    lines = stdout.split("\n")
    out: list[str] = []
    seen: dict[tuple[str, ...], int] = {}
    i = 0
    while i < len(lines):
        if not MESSAGE_LINE.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and STACK_LINE.match(lines[j]):
            j += 1
        if j < len(lines) and not lines[j].strip() and j + 1 < len(lines):
            j += 1  # the message's own trailing newline
        block = tuple(lines[i:j])
        seen[block] = seen.get(block, 0) + 1
        if seen[block] <= keep:
            out.extend(block)
        i = j
    text = "\n".join(out)
    for block, n in seen.items():
        if n > keep:
            note = f"... and {n - keep} more thread(s) printed \"{block[0]}\" (not shown)"
            text = text.rstrip("\n") + "\n" + note + ("\n" if stdout.endswith("\n") else "")
    return text


def _unescape(literal: str) -> str:
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "/": "/", "0": "\0"}
    return re.sub(r"\\(.)", lambda m: simple.get(m.group(1), m.group(1)), literal)


# --------------------------------------------------------------------------------------------
# Locating
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    device_line: int  # 1-based
    with_msg: bool
    message: str | None  # the literal the call passes (unescaped), for device_assert_with_msg


def call_sites(device_source: str, kind: str) -> list[_Site]:
    """The kernel's ``device_assert``/``device_assert_with_msg`` calls (kind "assert") or its
    ``__trap()`` calls (kind "trap"), by device line; ``#include`` and comment lines skipped."""
    sites = []
    for number, line in enumerate(device_source.split("\n"), start=1):
        code = line.strip()
        if code.startswith(("#", "//")):
            continue
        if kind == "trap":
            if _TRAP_CALL.search(code):
                sites.append(_Site(number, False, None))
            continue
        m = _ASSERT_CALL.search(code)
        if m:
            literal = _C_STRING.search(code, m.end()) if m.group("with_msg") else None
            sites.append(_Site(number, bool(m.group("with_msg")), _unescape(literal.group(1)) if literal else None))
    return sites


def _origin_of(device_line: int, origins: Sequence[Any], kind: str,
               source_lines: Callable[[str], list[str]]) -> tuple[str, int] | None:
    """The user's (file, line) of a device line, per the ``#line`` origins (SourceOrigin records).

    ``T.device_assert`` is a TileLang macro: its lines' directives name TileLang's own file, not
    the line that called it. That line lies between the user's lines lowered just before and just
    after it, in the same file; it is the one there that calls ``device_assert``."""
    here = [o for o in origins if o.first <= device_line <= o.last]
    if any(o.user for o in here):
        return next((o.file, o.line) for o in here if o.user)
    if kind != "assert":
        return None
    before = [o for o in origins if o.user and o.last < device_line]
    after = [o for o in origins if o.user and o.first > device_line]
    near = (before[-1] if before else None), (after[0] if after else None)
    nearest = near[1] or near[0]
    if nearest is None:
        return None
    file = nearest.file
    lines = source_lines(file)
    if near[0] is not None and near[0].file == file:
        low = near[0].line
    else:
        low = max(1, (near[1].line if near[1] else 1) - 40)
    high = near[1].line if near[1] is not None and near[1].file == file else low + 40
    calls = [n for n in range(max(low, 1), min(high, len(lines)) + 1) if "device_assert" in lines[n - 1]]
    return (file, calls[-1]) if len(calls) == 1 or (calls and near[1] is not None) else None


def _message_of(site: _Site) -> tuple[str, tuple[tuple[str, int, str], ...]] | None:
    if site.message is None:
        return None
    head, *rest = site.message.rstrip("\n").split("\n")
    stack = []
    for line in rest:
        s = STACK_LINE.match(line)
        if s:
            stack.append((s.group("file"), int(s.group("line")), s.group("function")))
    return head, tuple(stack)


def _linecache_lines(path: str) -> list[str]:
    import linecache
    import os.path

    lines = linecache.getlines(path)
    if not lines and os.path.basename(path).startswith("<"):  # a notebook cell, registered by name
        lines = linecache.getlines(os.path.basename(path))
    return lines


def locate(kind: str, device_source: str | None, *, stdout: str = "", stderr: str = "",
           origins: Sequence[Any] = (), source_lines: Callable[[str], list[str]] = _linecache_lines
           ) -> DeviceFault | None:
    """The :class:`DeviceFault` of a failed launch from what the kernel printed and its source.

    ``kind`` "assert" (the launch failed with a device-side assert) or "trap" (an unspecified
    launch failure of a kernel that calls ``__trap()``; None when it has no such call: the failure
    is something else). ``origins`` map device lines to the user's lines (:func:`line_origins`).
    """
    sites = call_sites(device_source or "", kind)
    if kind == "trap" and not sites:
        return None
    asserts = parse_assert_lines(stderr) if kind == "assert" else []
    messages = parse_messages(stdout) if kind == "assert" else []
    first = asserts[0] if asserts else None
    fired: list[_Site] = list(sites)
    message = expression = None
    if kind == "assert" and first is not None and not _TILELANG_HELPER.search(first.file):
        expression = first.expression  # an assert() of the kernel's own, not TileLang's helper
    if messages:
        message, printed_stack = messages[0]
        by_text = [s for s in sites if _message_of(s) == (message, printed_stack)]
        fired = by_text or [s for s in sites if s.with_msg] or fired
    elif first is not None and _TILELANG_HELPER.search(first.file):
        # The bare helper asserts `cond`; the one with a message asserts `0` after its printf.
        bare = first.expression.strip() != "0"
        fired = [s for s in sites if s.with_msg != bare] or fired
    candidates = tuple(s.device_line for s in fired)
    device_line = candidates[0] if len(candidates) == 1 else None
    stack: tuple[tuple[str, int, str], ...] = messages[0][1] if messages else ()
    if device_line is not None and not messages and len(fired) == 1 and _message_of(fired[0]) is not None:
        # the printf did not reach us (its buffer is lost with the context on some drivers): the one
        # assert that can have fired carries the same message and stack in its literal
        message, stack = _message_of(fired[0])  # type: ignore[misc]
    cell: tuple[str, int] | None = None
    if stack:
        file, line, _ = stack[-1]  # TileLang's innermost frame: the T.device_assert line
        cell = (file, line)
    elif device_line is not None:
        cell = _origin_of(device_line, origins, kind, source_lines)
    unlocated = None
    if device_line is None:
        if not sites:
            unlocated = (f"the kernel's generated source has no {'__trap()' if kind == 'trap' else 'device_assert'} "
                         "call, so the line cannot be named")
        else:
            lines = ", ".join(str(c) for c in candidates)
            unlocated = (f"the kernel has {len(candidates)} {'__trap() calls' if kind == 'trap' else 'asserts'} "
                         f"(device lines {lines}) and CUDA does not say which one fired"
                         + (": a trap prints nothing" if kind == "trap"
                            else "; give each T.device_assert a message to tell them apart"))
    elif cell is None:
        unlocated = "the #line directives do not map this device line to a line of yours"
    return DeviceFault(kind, message, expression, device_line, cell[0] if cell else None, cell[1] if cell else None,
                       first.block if first else None, first.thread if first else None, len(asserts), len(sites),
                       candidates if device_line is None else (), unlocated)


def describe(fault: DeviceFault) -> str:
    """One or two lines for the launch error: where, which thread, the message."""
    import os.path

    what = "the device-side assert"
    where = []
    if fault.cell_line is not None:
        name = f" ({os.path.basename(fault.cell_file)})" if fault.cell_file else ""
        where.append(f"your line {fault.cell_line}{name}")
    if fault.device_line is not None:
        where.append(f"device line {fault.device_line} of the generated CUDA")
    if fault.kind == "trap":  # CUDA does not say a trap fired: the kernel can trap, and failed so
        text = (f"the kernel calls __trap() at {', '.join(where)}, and a trap fails a launch this way" if where
                else "the kernel calls __trap(), and a trap fails a launch this way")
    else:
        text = f"{what} is at {', '.join(where)}" if where else f"{what} could not be located"
    if fault.message:
        text += f': "{fault.message}"'
    elif fault.expression:
        text += f": `{fault.expression}` was false"
    if fault.block is not None and fault.thread is not None:
        text += f"; first failing thread: block {fault.block}, thread {fault.thread}"
        if fault.threads > 1:
            text += f" ({fault.threads} threads failed in all)"
    elif fault.kind == "trap":
        text += "; a trap reports no block, thread or message"
    else:
        text += "; CUDA printed the failing blocks and threads on the launching process's stderr"
    if fault.unlocated:
        text += f" ({fault.unlocated})"
    return text


# --------------------------------------------------------------------------------------------
# The user's lines (lowers the kernel again, with #line directives)
# --------------------------------------------------------------------------------------------


def line_origins(kernel: Any, arch: str | None = None) -> tuple[str, tuple[Any, ...]]:
    """(device source, its origins): the kernel lowered again with ``#line`` directives, stripped
    of them, and which of the user's lines each run of device lines came from. ``arch`` defaults to
    the one the kernel was compiled for (else the local GPU's)."""
    from .. import _tilelang
    from ..engine.inspect import resolve_target
    from ..engine.toolchain import strip_line_directives

    source = _tilelang.resolve_kernel(kernel)
    if arch is None:
        hint = source.target_hint
        resolved, _ = resolve_target(None if hint is None or hint in ("auto", "cuda") else hint)
        arch = resolved.name
    configs = _tilelang.normalize_pass_configs(source.pass_configs)
    text = _tilelang.device_source_with_line_directives(source, arch, configs)
    return strip_line_directives(text, is_user_file=lambda f: not _tilelang.is_tilelang_file(f))


def fault_of(kind: str, kernel: Any, plain_source: str | None, stdout: str, stderr: str,
             origins: Callable[[], tuple[str, tuple[Any, ...]]] | None = None) -> DeviceFault | None:
    """:func:`locate` for a kernel (a compiled one, or anything ``tilelab.inspect`` takes) whose
    launched device source is ``plain_source`` (None: unknown). The ``#line`` lowering runs only
    where a line is left to map, and its failure costs only the user's line, never the error."""
    fault = locate(kind, plain_source, stdout=stdout, stderr=stderr) if plain_source else None
    if plain_source and (fault is None or fault.device_line is None or fault.cell_line is not None):
        return fault  # not a trap of this kernel, nothing to map, or mapped by the message already
    try:
        source, found = (origins or (lambda: line_origins(kernel)))()
    except Exception:
        return fault
    if plain_source and source.strip() == plain_source.strip():
        source = plain_source
    # else the re-lowered source differs from the one launched (or that one is unknown): locate in
    # it, so that its line numbers and origins agree
    return locate(kind, source, stdout=stdout, stderr=stderr, origins=found)


def with_device_fault(err: Any, prepared: Any) -> Any:
    """``err`` (a KernelLaunchError) with its device-side assert or trap located (the kernel's line,
    the user's line, the block and thread, the message) from what the worker printed (none when the
    launch was in this process) and the kernel's source (``prepared``: a ``launch._kernel.Prepared``)."""
    kind = "assert" if err.kind == "device_assert" else "trap" if err.kind in ("launch_failure", "other") else None
    if kind is None or err.device_fault is not None:
        return err
    try:
        fault = fault_of(kind, prepared.compiled, prepared.kernel_source(), getattr(err, "worker_stdout", "") or "",
                         getattr(err, "worker_stderr", "") or "")
    except Exception:  # locating is a bonus: the launch error is what matters
        return err
    if fault is not None:
        err.device_fault = fault
        err.refresh()
    return err


__all__ = ["AssertLine", "DeviceFault", "call_sites", "describe", "fault_of", "fold_assert_lines",
           "fold_assert_messages", "line_origins", "locate", "parse_assert_lines", "parse_messages",
           "with_device_fault"]
