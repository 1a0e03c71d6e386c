"""One run of a ``%%tilelang`` cell, as a transaction: the library under the magic.

:meth:`CellSession.run` executes the cell in the user's namespace, finds the kernels it defines,
builds them (``tilelab.inspect``, and on a GPU ``_tilelang.compile_kernel``) or takes them from
the session's cell cache, binds compiled kernels, launches them when asked and shows the
inspector; it returns a :class:`CellResult`. If anything fails after the cell began (its own
code, inspection, compilation, --run, --bench, display), every name the cell or the run bound is
restored to what it was (:class:`NameTransaction`). A ``--run`` whose verification FAILS is not a
failure: it is shown (and said).

The cell cache follows the report cache's one policy (:class:`tilelab.engine.cache.Recent`: bounded,
and an entry answers only for the key material it was stored with). The key covers the cell text,
the options that shape the build (target, backend, out_idx, pass configs, args, kernel, tiers,
whether to compile), the kernels' content and the tool versions, so re-running an unchanged cell
does no lowering or compiling at all; ``--force`` bypasses it, tilelab.inspect's cache and
TileLang's own, and replaces the entry.

Errors are made short: a Python error of the cell keeps only the cell's frames, a failure inside
TileLang (:class:`~tilelab.LoweringError`) becomes its message and the cell line it points at,
with TileLang's full trace shown folded. Nothing here needs an IPython shell: what the notebook
lends a run (display, print, traceback colouring) comes in a :class:`CellHost`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine import cache as _cache
from ..records.errors import LoweringError
from ..records.kernel import KernelReport
from ..records.launch import Launches
from .kernels import (
    MISSING,
    Build,
    CellEntry,
    bind,
    build_cell,
    cell_key,
    check_call,
    choose,
    evaluate_args,
    evaluate_ref,
    find_kernels,
    launch_refusal,
)
from .options import CellOptions

# Cells whose reports and compiled kernels a session keeps (and reports it remembers for Diff tabs).
CELLS_IN_MEMORY = 32


class CellSyntaxError(Exception):
    """A SyntaxError in a ``%%tilelang`` cell, shown as the cell line alone.

    Not a SyntaxError subclass on purpose: IPython prints any SyntaxError with the frames it was
    raised through (here the magic's own), ignoring ``_render_traceback_``. ``error`` is the
    original SyntaxError; ``lineno``, ``offset``, ``text`` and ``msg`` are its fields.
    """

    def __init__(self, error: SyntaxError, rendered: list[str]) -> None:
        super().__init__(error.msg)
        self.error = error
        self.msg, self.lineno, self.offset, self.text = error.msg, error.lineno, error.offset, error.text
        self.filename = error.filename
        self._rendered = rendered

    def _render_traceback_(self) -> list[str]:
        return self._rendered


@dataclass(frozen=True)
class CellSource:
    """A cell as the run sees it."""

    text: str  # the cell as typed, below the %%tilelang line
    python: str  # what runs: IPython's transforms applied, a newline first so line 1 is the magic's line
    filename: str  # the name linecache holds ``python`` under (inspect.getsource needs it)
    identity: str = ""  # the notebook cell (front end's id, or the text's hash): whose last report Diff compares

    @property
    def magic_text(self) -> str:
        return "%%tilelang\n" + self.text


@dataclass(frozen=True)
class CellHost:
    """What the notebook lends a run: how to show an object, say a line, colour a traceback."""

    display: Callable[[Any], None]
    traceback: Callable[[BaseException, Any], list[str]]  # (error, traceback from the cell's frame) -> lines
    syntax_traceback: Callable[[SyntaxError], list[str]]
    say: Callable[[str], None] = print


@dataclass(frozen=True)
class CellResult:
    """What one ``%%tilelang`` run found and made (``TileLangMagics.last``)."""

    kernels: list[str]  # names of the kernels the cell defines, in cell order
    shown: str  # the kernel the inspector shows
    report: KernelReport
    compiled: dict[str, Any] = field(default_factory=dict)  # cell name -> TileLang JITKernel (GPU only)
    bound: dict[str, str] = field(default_factory=dict)  # name bound in the namespace -> what it compiles
    launches: Launches = field(default_factory=Launches)  # --run/--bench/--profile/--sanitize/--timeline/--trace
    inspector: Any = None
    cache_hit: bool = False
    seconds: float = 0.0
    key: str = ""

    @property
    def timing(self) -> list[Any]:
        """What the inspector's Timing tab shows: the sanitizer reports, runs and benches."""
        return list(self.launches.timing)

    @property
    def traces(self) -> list[Any]:
        """--trace: the TileTrace records, shown above the inspector."""
        return list(self.launches.traces)


class NameTransaction:
    """The user's namespace as a transaction: ``with NameTransaction(ns):`` undoes every binding
    made inside the block (new names removed, rebound names restored) if the block raises."""

    def __init__(self, ns: dict[str, Any]) -> None:
        self.ns = ns
        self.before = dict(ns)

    def __enter__(self) -> NameTransaction:
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:  # an error propagates
        if kind is not None:
            self.restore()

    def changed(self) -> list[str]:
        """The public names bound or rebound since the transaction began, in namespace order."""
        return [k for k, v in self.ns.items() if not k.startswith("_") and self.before.get(k, MISSING) is not v]

    def restore(self) -> None:
        for name in [k for k in self.ns if k not in self.before]:
            del self.ns[name]
        for name, value in self.before.items():
            if self.ns.get(name, MISSING) is not value:
                self.ns[name] = value


def execute(source: CellSource, ns: dict[str, Any], host: CellHost) -> None:
    """Execute the cell. A SyntaxError becomes a :class:`CellSyntaxError` showing the cell line; a
    Python error keeps a traceback of the cell's frames only; one raised inside TileLang while a
    kernel is built is a LoweringError naming the kernel."""
    from .. import _tilelang

    try:
        code = compile(source.python, source.filename, "exec", dont_inherit=True)
    except SyntaxError as err:
        raise CellSyntaxError(err, host.syntax_traceback(err)) from None
    # TileLang installs its log handler on import: import it first, so that the handler is
    # there to be quieted below (a cell that imports TileLang itself would print through it).
    _tilelang.tilelang()
    try:
        # TileLang's log records (a CRITICAL dump of the builder's generated code when a
        # T.prim_func fails to build) go into the error's folded trace, not onto stderr.
        with _tilelang.tilelang_errors(None, stage="elaboration"):
            exec(code, ns)
    except LoweringError as err:
        if err.kernel is None:
            found = re.search(r"Failed to build prim_func from (\w+)", err.trace)
            err.kernel = found.group(1) if found else None
        raise
    except BaseException as err:
        tb = err.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != source.filename:
            tb = tb.tb_next  # drop this frame and the context manager's: start at the cell
        if tb is not None and not isinstance(err, KeyboardInterrupt):
            lines = host.traceback(err, tb)
            try:
                err._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
            except AttributeError:
                pass
        raise


class CellSession:
    """What ``%%tilelang`` remembers between runs of one notebook: the cell cache, the report each
    cell showed last (the Diff tab compares with it), the names it bound, the last result."""

    def __init__(self) -> None:
        self.cells = _cache.Recent("cell's report and compiled kernels", CELLS_IN_MEMORY)
        self.shown = _cache.Recent("report a cell showed", CELLS_IN_MEMORY)
        self.bound: dict[str, Any] = {}  # names a run bound -> the kernel it bound there
        self.last: CellResult | None = None

    def run(self, source: CellSource, options: CellOptions, ns: dict[str, Any], host: CellHost) -> CellResult | None:
        """Run the cell and everything the options ask; None when it defines no kernel."""
        started = time.perf_counter()
        with NameTransaction(ns) as names:
            try:
                execute(source, ns, host)
                result = self._after_cell(source, options, names, host)
            except LoweringError as err:
                names.restore()
                if err.recipe is None:  # failed while the cell ran: the cell is the script to shrink
                    from .. import _tilelang
                    from ..targets import parse_target

                    err.recipe = _tilelang.text_recipe(source.python, parse_target(options.target or "sm_90a"))
                host.display(FoldedTrace(err))
                if err.recipe is not None:  # a button that shrinks it to a reproducer (widgets/reproducer.py)
                    from ..widgets.reproducer import ReproducerButton

                    host.display(ReproducerButton(err))
                short = lowering_lines(err, source)
                err._render_traceback_ = lambda: short  # type: ignore[attr-defined]
                raise
        if result is None:
            return None
        result = dataclasses.replace(result, seconds=time.perf_counter() - started)
        self.last = result
        if result.inspector is not None:
            # (the report before the last change, the report shown): an unchanged re-run keeps its Diff
            self.shown.put(source.identity, (result.inspector.previous, result.report))
        return result

    def _after_cell(self, source: CellSource, options: CellOptions, names: NameTransaction,
                    host: CellHost) -> CellResult | None:
        from .. import _tilelang

        ns = names.ns
        call = evaluate_args(options.args, ns)
        ref = evaluate_ref(options.ref, ns)
        found = find_kernels(source.text, ns, names.changed(), source.filename, call, options.kernel)
        if not found:
            host.say("%%tilelang: this cell defines no TileLang kernel (a T.prim_func or a @tilelang.jit "
                     "function); it ran as a normal cell. A plain function returning a prim_func needs "
                     '--args "..." to be specialised.')
            return None
        shown = choose(found, options.kernel)
        check_call(shown, ns[shown], call)
        gpu = _tilelang.has_gpu()
        build = Build(tuple(found), shown, call, options, gpu, launch_refusal(options.target, gpu))
        entry, key, hit = self._entry(source, build, ns)
        result = CellResult(kernels=found, shown=shown, report=entry.report, compiled=dict(entry.compiled),
                            cache_hit=hit, key=key, bound=bind(entry, build, ns, self.bound))
        if result.bound and not options.quiet:
            target = options.target or result.report.target
            host.say(f"%%tilelang: compiled for {target} ({options.backend or _tilelang.default_backend(target)}) "
                     "and bound " + ", ".join(f"{name} = {what}" for name, what in result.bound.items()))
        if options.launches:
            from .launch import launch_cell

            result = dataclasses.replace(result, launches=launch_cell(entry, build, ns, ref, host.say))
            if not options.quiet:
                for traced in result.launches.traces:
                    host.display(traced)
        return result if options.quiet else self._shown(source, options, result, host)

    def _entry(self, source: CellSource, build: Build, ns: dict[str, Any]) -> tuple[CellEntry, str, bool]:
        """The cell's built kernels from the cell cache, or built now (and stored: a forced build
        replaces the entry). Returns the entry, its key and whether it was a hit."""
        key, material = cell_key(source.text, build, ns)
        entry = None if build.options.force else self.cells.get(key, material)
        if entry is not None:
            return entry, key, True
        entry = build_cell(build, ns)
        self.cells.put(key, entry, material)
        return entry, key, False

    def previous_report(self, identity: str, report: KernelReport) -> KernelReport | None:
        """What the cell's Diff compares ``report`` with: the report it showed last, or, when that
        is ``report`` itself (an unchanged re-run), the one before the last change, so that a Diff
        stays until the next change."""
        kept = self.shown.get(identity)
        if kept is None:
            return None
        before, last = kept
        return before if last == report else last

    def _shown(self, source: CellSource, options: CellOptions, result: CellResult, host: CellHost) -> CellResult:
        from ..widgets.inspector import Inspector

        text = "%%tilelang" + (f" {options.line}" if options.line else "") + "\n" + source.text
        inspector = Inspector(result.report, show=options.show, launches=result.launches, source=text,
                              previous=self.previous_report(source.identity, result.report))
        host.display(inspector)
        return dataclasses.replace(result, inspector=inspector)


def cell_identity(parent_header: Any, text: str) -> str:
    """The notebook cell being run: the front end's cell id when the kernel's message has one
    (``metadata.cellId``), else the cell's text (a re-run compares with what it showed last)."""
    metadata = parent_header.get("metadata") if isinstance(parent_header, dict) else None
    cell_id = metadata.get("cellId") if isinstance(metadata, dict) else None
    return f"id:{cell_id}" if cell_id else "text:" + hashlib.sha256(text.encode()).hexdigest()


# -- a lowering error, short ----------------------------------------------------------------------
def kernel_line(err: LoweringError, source: CellSource) -> tuple[int, str] | None:
    """The cell line (1-based, line 1 being %%tilelang) a lowering error points at, and its text."""
    lines = source.magic_text.split("\n")
    if err.kernel_line:
        path, number = err.kernel_line[0], err.kernel_line[1]
        # TileLang's builder records the cell's file with the working directory in front.
        if (path == source.filename or path.endswith(os.sep + source.filename)) and 0 < number <= len(lines):
            return number, lines[number - 1]
    if not err.kernel:
        return None
    # The failure carries no user frame: find the kernel in the cell, then the operation the
    # compiler's message names (``T.gemm``) below it.
    pattern = re.compile(rf"^\s*def\s+{re.escape(err.kernel)}\s*\(")
    start = next((n for n, text in enumerate(lines) if pattern.match(text)), None)
    if start is None:
        return None
    named = [err.tile_op.split(".", 1)[1]] if err.tile_op else []
    for op in named + re.findall(r"\bT\.(\w+)", err.summary):
        call = re.compile(rf"\bT\.{re.escape(op)}\s*\(")
        for number in range(start + 1, len(lines)):
            if call.search(lines[number]):
                return number + 1, lines[number]
    return start + 1, lines[start]


def lowering_lines(err: LoweringError, source: CellSource) -> list[str]:
    """What a lowering error shows as its traceback: the message and the cell line."""
    where = kernel_line(err, source)
    lines = [f"LoweringError: {err.summary}"]
    if err.python_error:  # a Python error in the cell's code, raised while TileLang ran it
        name, message = err.python_error
        lines = [f"{name}: {message}",
                 "  a Python error in the cell's kernel code, raised while TileLang ran it (nothing was lowered)"]
    if where:
        lines.append(f"  cell line {where[0]}: {where[1].strip()}")
    elif err.kernel_line:
        lines.append(f"  {err.kernel_line[0]}:{err.kernel_line[1]}: {err.kernel_line[2].strip()}")
    lines.extend(f"  {line}" for line in err.diagnosis_lines())
    if err.recipe is not None:
        lines.append("  a minimal script failing the same way, for a TileLang issue: "
                     "import sys; print(sys.last_value.reproducer())")
    lines.append("  (the full TileLang trace is folded above)")
    return lines


class FoldedTrace:
    """TileLang's full trace of a lowering error, folded: the only part of the error its short
    traceback (:func:`lowering_lines`) does not already say."""

    def __init__(self, err: LoweringError) -> None:
        self.kernel, self.trace = err.kernel, err.trace

    def __repr__(self) -> str:
        return (f"(the full TileLang trace of {self.kernel or 'the kernel'}: {len(self.trace.splitlines())} lines, "
                "folded in the HTML view)")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from ..render.errors import folded_trace_html

        return {"text/plain": repr(self), "text/html": folded_trace_html(self.kernel, self.trace)}


__all__ = ["CellHost", "CellResult", "CellSession", "CellSource", "CellSyntaxError", "FoldedTrace",
           "NameTransaction", "cell_identity", "execute", "kernel_line", "lowering_lines"]
