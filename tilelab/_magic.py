"""``%%tilelang``: run a cell, inspect (and on a GPU, compile) the kernels it defines, show them.

The magic is thin: it parses options (``%%tilelang?`` prints them), runs the cell in the user's
namespace, calls :func:`tilelab.inspect` and ``_adapter.compile_kernel``, binds compiled kernels
and displays an :class:`~tilelab.widgets.inspector.Inspector`. Like Cython's ``%%cython`` it
keeps an in-process cache keyed by a hash of the cell text, the options that shape the build
(target, backend, out_idx, pass configs, args, kernel, whether to compile), the kernels' content
and the tool versions, so re-running an unchanged cell does no lowering or compiling at all;
``--force`` bypasses that cache, tilelab.inspect's and TileLang's own, and replaces the entry.

A run is a transaction: if anything fails after the cell ran (inspection, compilation, --run,
--bench, display), every name the cell or the magic bound is restored to what it was.
A ``--run`` whose verification FAILS is not a failure of the magic: it is shown (and printed).

The cell's source is registered with ``linecache`` under an IPython cell name (line numbers as
in the notebook cell, the ``%%tilelang`` line being line 1), so ``inspect.getsource`` works for
kernels defined in it (``T.prim_func`` needs it) and tracebacks point at the cell's lines.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import html
import inspect as _pyinspect
import os
import re
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ._errors import LoweringError, TargetError, TilelabError
from ._model import BACKENDS, KernelReport

_MISSING = object()
_CACHE_SIZE = 32


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


@dataclass
class CellResult:
    """What one ``%%tilelang`` run found and made (``TileLangMagics.last``)."""

    kernels: list[str]  # names of the kernels the cell defines, in cell order
    shown: str  # the kernel the inspector shows
    report: KernelReport
    compiled: dict[str, Any] = field(default_factory=dict)  # cell name -> TileLang JITKernel (GPU only)
    bound: dict[str, str] = field(default_factory=dict)  # name bound in the namespace -> what it compiles
    timing: list[Any] = field(default_factory=list)  # tilelab.launch results (--run/--bench)
    inspector: Any = None
    cache_hit: bool = False
    seconds: float = 0.0
    key: str = ""


def _valid_options(parser: Any) -> str:
    parts = []
    for action in parser._actions:
        if not action.option_strings or "-h" in action.option_strings:
            continue
        opt = max(action.option_strings, key=len)
        if action.choices:
            opt += " {" + ",".join(map(str, action.choices)) + "}"
        elif action.nargs != 0:
            opt += " " + (action.metavar or action.dest.upper())
        parts.append(opt)
    return ", ".join(parts)


def _parse_target(text: str | None) -> str | None:
    """The registered target's name (tilelab.targets.parse_target, shared with the API and CLI)."""
    if text is None:
        return None
    from .targets import parse_target

    try:
        return parse_target(text).name
    except TargetError as err:
        raise UsageError(f"%%tilelang --target {text!r}: {err}") from None


def _parse_out_idx(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return list(value)
    raise UsageError(f"--out-idx takes an integer or a comma-separated list of integers (e.g. -1 or 0,2); got {text!r}")


def _parse_pass_configs(items: list[str] | None) -> dict[str, Any]:
    if not items:
        return {}
    from . import _adapter

    known = _adapter.known_pass_config_keys()
    configs: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--pass-config takes KEY=VALUE (e.g. tl.disable_tma_lower=True); got {item!r}")
        if key not in known:
            raise UsageError(f"unknown pass config {key!r}. Valid keys: {', '.join(known)}")
        try:
            configs[key] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            configs[key] = raw.strip()
    return configs


_SIZES_FORM = '--sizes takes NAME=INT pairs separated by commas, several size sets separated by ";" (e.g. "M=1024,N=512" or "M=1024;M=2048")'


def _parse_sizes(text: str | None) -> list[dict[str, int]]:
    """``"M=1024,N=512;M=2048,N=512"`` -> one dict per size set (an empty list when none)."""
    if not text:
        return []
    sets: list[dict[str, int]] = []
    for group in text.split(";"):
        if not group.strip():
            raise UsageError(f"{_SIZES_FORM}; got an empty size set in {text!r}")
        sizes: dict[str, int] = {}
        for part in group.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip().isidentifier():
                raise UsageError(f"{_SIZES_FORM}; got {text!r}")
            try:
                sizes[name.strip()] = int(value)
            except ValueError:
                raise UsageError(f"--sizes: {name.strip()} must be an integer; got {value.strip()!r}") from None
        sets.append(sizes)
    return sets


_SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def _parse_timeout(text: str | None) -> float | None:
    """--timeout S: a positive number of seconds."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value != value or value == float("inf"):
        raise UsageError(f"%%tilelang --timeout: expected a positive number of seconds, e.g. --timeout 10; got {text!r}")
    return value


def _parse_rep_ms(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UsageError(f"--rep-ms takes a positive number of milliseconds (e.g. 20); got {text!r}")
    return value


def _short_traceback(shell: Any, err: BaseException, tb: Any) -> list[str]:
    """IPython's coloured traceback of ``err`` from ``tb`` on (the cell's own frames)."""
    return shell.InteractiveTB.structured_traceback(type(err), err, tb)


def _inner_function(obj: Any) -> Any:
    """The Python function behind a @tilelang.jit object (or the object itself)."""
    target = getattr(obj, "func", obj)
    return getattr(target, "orig_func", None) or getattr(target, "__wrapped__", None) or target


def _signature(obj: Any) -> _pyinspect.Signature | None:
    try:
        return _pyinspect.signature(_inner_function(obj))
    except (TypeError, ValueError):
        return None


def _binds(obj: Any, call_args: tuple, call_kwargs: dict) -> bool:
    sig = _signature(obj)
    if sig is None:
        return True
    try:
        sig.bind(*call_args, **call_kwargs)
    except TypeError:
        return False
    return True


@magics_class
class TileLangMagics(Magics):
    """The ``%%tilelang`` cell magic; ``last`` is the :class:`CellResult` of the latest run."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        # Reports and compiled kernels only: widgets are never cached (they are closed on re-run).
        self._cache: OrderedDict[str, CellResult] = OrderedDict()
        # cell identity -> the report its inspector showed last (the Diff tab compares with it)
        self._shown_reports: dict[str, KernelReport] = {}
        self._bound: dict[str, Any] = {}  # names this magic bound -> the kernel it bound there
        self.last: CellResult | None = None

    @magic_arguments()
    @argument("--target", default=None,
              help='target to inspect/compile for: a CUDA arch ("sm_90a", "sm_80"), an AMD one ("gfx942"), '
                   '"metal", or "c" (the CPU, which --run/--bench launch here) (default: the GPU here, else sm_90a)')
    @argument("--backend", default=None, choices=BACKENDS,
              help="execution backend when compiling (default tvm_ffi; cython for target c)")
    @argument("--out-idx", default=None, metavar="IDX", help="output parameter index or indices, e.g. -1 or 0,2")
    @argument("--pass-config", action="append", metavar="KEY=VALUE", help="a TileLang pass config (repeatable)")
    @argument("--kernel", default=None, metavar="NAME", help="the kernel to show when the cell defines several")
    @argument("--args", default=None, metavar='"..."',
              help='arguments specialising a @tilelang.jit kernel or a kernel factory, e.g. --args "1024, 1024, 1024"')
    @argument("--show", default=None, metavar="TABS",
              help="comma-separated tabs: summary,cuda,launcher,tma,wgmma,layouts,arguments")
    @argument("--no-compile", action="store_true", help="inspect only, even on a GPU")
    @argument("--force", action="store_true", help="bypass the caches: re-inspect and recompile")
    @argument("--quiet", action="store_true", help="show nothing; still binds the kernels (a failed --run is still printed)")
    @argument("--run", action="store_true", help="launch the kernel once and check it (GPU only)")
    @argument("--ref", default=None, metavar="EXPR",
              help="a Python expression giving the reference callable for --run, e.g. --ref torch.matmul")
    @argument("--bench", action="store_true", help="time the kernel (GPU only)")
    @argument("--sizes", default=None, metavar='"M=1024,N=..."',
              help='sizes of dynamic dimensions for --run/--bench; several sets separated by ";" (e.g. "M=1024;M=2048")')
    @argument("--rep-ms", default=None, metavar="MS", help="--bench: milliseconds of timed repetitions (default 100)")
    @argument("--sass", action="store_true",
              help="also compile with the CUDA toolkit: PTX, SASS, registers, spills, occupancy, Python-line links")
    @argument("--passes", action="store_true", help="record TileLang's lowering pass by pass (IR passes tab)")
    @argument("--profile", action="store_true", help="profile one launch with Nsight Compute (GPU and ncu only); implies --sass, "
              "whose line links carry the profile's hot lines onto the cell")
    @argument("--timeout", default=None, metavar="S",
              help="--run/--bench: seconds before a launch that has not finished is stopped (default 30 for --run)")
    @argument("--in-process", action="store_true",
              help="--run/--bench: launch in this Python process instead of tilelab's worker process")
    @argument("--sanitize", nargs="?", const="memcheck", default=None, metavar="TOOL",
              help="run the kernel once under compute-sanitizer: memcheck (default), racecheck, synccheck or initcheck")
    @cell_magic
    def tilelang(self, line: str, cell: str) -> None:
        """Run the cell, inspect the TileLang kernels it defines, and show the kernel inspector.

        Kernels are the ``T.prim_func``s and ``@tilelang.jit`` functions the cell defines (a plain
        factory returning a prim_func counts when ``--args`` is given). With a GPU they are
        compiled: a ``T.prim_func`` is replaced by its compiled kernel; a factory or jit function
        is left alone and its compiled kernel is bound under the kernel's own name (or
        ``<factory>_kernel`` when that name is taken). Without a GPU they are inspected for the target.
        """
        started = time.perf_counter()
        try:
            args = parse_argstring(self.tilelang, line)
        except UsageError as err:
            parser = self.tilelang.parser
            raise UsageError(f"%%tilelang: {err}. Valid options: {_valid_options(parser)}") from None
        args.line = line.strip()
        # IPython splits the line keeping quotes (--args "1, 2" arrives as '"1, 2"').
        for name in ("target", "out_idx", "kernel", "args", "show", "sizes", "ref", "rep_ms", "timeout", "sanitize"):
            setattr(args, name, _unquote(getattr(args, name)))
        args.pass_config = [_unquote(v) for v in args.pass_config] if args.pass_config else None

        arch = _parse_target(args.target)
        out_idx = _parse_out_idx(args.out_idx)
        pass_configs = _parse_pass_configs(args.pass_config)
        size_sets = _parse_sizes(args.sizes)
        rep_ms = _parse_rep_ms(args.rep_ms)
        args.timeout = _parse_timeout(args.timeout)
        if args.sanitize is not None and args.sanitize not in _SANITIZER_TOOLS:
            raise UsageError(f"%%tilelang --sanitize: unknown tool {args.sanitize!r}; choose one of "
                             f"{', '.join(_SANITIZER_TOOLS)} (or --sanitize alone for memcheck)")
        try:
            from .widgets.inspector import parse_tabs

            tabs = parse_tabs(args.show)
        except ValueError as err:
            raise UsageError(f"%%tilelang --show: {err}") from None

        ns = self.shell.user_ns
        before = dict(ns)
        filename = self._register_cell(cell)
        try:
            self._run_cell(cell, filename, ns, before)
            result = self._process(cell, filename, ns, before, args, arch, out_idx, pass_configs, size_sets,
                                   rep_ms, tabs)
        except LoweringError as err:
            self._restore(ns, before)
            self._show_lowering_error(err, cell, filename)
            short = self._lowering_lines(err, cell, filename)
            err._render_traceback_ = lambda: short  # type: ignore[attr-defined]
            raise
        except TilelabError as err:
            self._restore(ns, before)
            raise UsageError(f"%%tilelang: {err}") from None
        except BaseException:
            self._restore(ns, before)
            raise
        if result is None:
            return
        result.seconds = time.perf_counter() - started
        self.last = result
        if result.inspector is not None:
            self._shown_reports[self._cell_identity(cell)] = result.report

    def _process(self, cell: str, filename: str, ns: dict[str, Any], before: dict[str, Any], args: Any,
                 arch: str | None, out_idx: list[int] | None, pass_configs: dict[str, Any],
                 size_sets: list[dict[str, int]], rep_ms: float | None, tabs: tuple[str, ...]) -> CellResult | None:
        """Everything after the cell ran; any exception here is undone by the caller."""
        from . import _adapter

        call_args, call_kwargs = self._eval_args(args.args, ns)
        ref = self._eval_ref(args.ref, ns)
        names = self._find_kernels(cell, ns, before, filename, call_args, call_kwargs, args.kernel)
        if not names:
            print("%%tilelang: this cell defines no TileLang kernel (a T.prim_func or a @tilelang.jit "
                  "function); it ran as a normal cell. A plain function returning a prim_func needs "
                  '--args "..." to be specialised.')
            return None
        shown = self._choose(names, args.kernel)
        self._check_call(shown, ns[shown], call_args, call_kwargs)
        gpu = _adapter.has_gpu()
        refusal = self._launch_refusal(arch, gpu)
        compile_now = refusal is None and not args.no_compile
        key = self._key(cell, names, ns, arch, args.backend, out_idx, pass_configs, call_args, call_kwargs,
                        args.kernel, compile_now, gpu, tiers=(args.sass, args.passes))
        cached = None if args.force else self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            result = CellResult(kernels=names, shown=shown, report=cached.report, compiled=dict(cached.compiled),
                                cache_hit=True, key=key)
        else:
            result = self._build(ns, names, shown, arch, out_idx, pass_configs, call_args, call_kwargs,
                                 args.backend, compile_now, args.force, key, toolchain=args.sass or args.profile, passes=args.passes)
            # A forced build replaces the entry; the cache never holds widgets or timings.
            self._cache[key] = dataclasses.replace(result, inspector=None, timing=[], bound={})
            self._cache.move_to_end(key)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)

        result.bound = self._bind(result, ns, call_args, call_kwargs)
        if result.bound and not args.quiet:
            target = arch or result.report.target
            print(f"%%tilelang: compiled for {target} ({args.backend or _adapter.default_backend(target)}) and bound "
                  + ", ".join(f"{name} = {what}" for name, what in result.bound.items()))
        if args.run or args.bench or args.profile or args.sanitize:
            result.timing = self._launch(result, ns, args, size_sets, ref, rep_ms, refusal, arch, out_idx,
                                         pass_configs, call_args, call_kwargs)
        if not args.quiet:
            from .widgets.inspector import Inspector

            previous = self._shown_reports.get(self._cell_identity(cell))
            source = "%%tilelang" + (f" {args.line}" if args.line else "") + "\n" + cell
            result.inspector = Inspector(result.report, show=tabs if args.show else None, timing=result.timing,
                                         source=source, previous=previous)
            self._display(result.inspector)
        return result

    # -- running the cell ------------------------------------------------------------------
    def _register_cell(self, cell: str) -> str:
        # The magic's own line is line 1 of the notebook cell: a leading newline keeps line
        # numbers equal to what the user sees.
        number = self.shell.execution_count
        return self.shell.compile.cache("\n" + self.shell.transform_cell(cell), number, raw_code="\n" + cell)

    def _run_cell(self, cell: str, filename: str, ns: dict[str, Any], before: dict[str, Any]) -> None:
        """Execute the cell. A Python error is re-raised with a traceback of the cell's frames
        only; one raised inside TileLang while a kernel is built becomes a LoweringError."""
        from . import _adapter

        source = "\n" + self.shell.transform_cell(cell)
        try:
            code = compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError as err:
            # Only the cell line, as for a plain cell (not the magic's frames).
            lines = self.shell.SyntaxTB.structured_traceback(type(err), err, None)
            raise CellSyntaxError(err, lines) from None
        # TileLang installs its log handler on import: import it first, so that the handler is
        # there to be quieted below (a cell that imports TileLang itself would print through it).
        _adapter.tilelang()
        try:
            # TileLang's log records (a CRITICAL dump of the builder's generated code when a
            # T.prim_func fails to build) go into the error's folded trace, not onto stderr.
            with _adapter.tilelang_errors(None, stage="elaboration"):
                exec(code, ns)
        except LoweringError as err:
            if err.kernel is None:
                found = re.search(r"Failed to build prim_func from (\w+)", err.trace)
                err.kernel = found.group(1) if found else None
            raise
        except BaseException as err:
            self._restore(ns, before)
            tb = err.__traceback__
            # Drop this frame and the context manager's: start at the cell.
            while tb is not None and tb.tb_frame.f_code.co_filename != filename:
                tb = tb.tb_next
            if tb is not None and not isinstance(err, KeyboardInterrupt):
                lines = _short_traceback(self.shell, err, tb)
                try:
                    err._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
                except AttributeError:
                    pass
            raise

    @staticmethod
    def _restore(ns: dict[str, Any], before: dict[str, Any]) -> None:
        """Undo the cell's name bindings: a failing cell leaves the earlier names intact."""
        for name in [k for k in ns if k not in before]:
            del ns[name]
        for name, value in before.items():
            if ns.get(name, _MISSING) is not value:
                ns[name] = value

    def _eval_args(self, text: str | None, ns: dict[str, Any]) -> tuple[tuple, dict]:
        if not text:
            return (), {}
        try:
            return eval(f"__tilelab_args__({text})", ns, {"__tilelab_args__": lambda *a, **k: (a, k)})
        except Exception as err:
            raise UsageError(f"%%tilelang --args {text!r}: {type(err).__name__}: {err}") from None

    def _eval_ref(self, text: str | None, ns: dict[str, Any]) -> Any:
        if not text:
            return None
        try:
            value = eval(text, ns)
        except Exception as err:
            raise UsageError(f"%%tilelang --ref {text!r}: {type(err).__name__}: {err}. Give a Python expression "
                             "for the reference callable, e.g. --ref torch.matmul") from None
        if not callable(value):
            raise UsageError(f"%%tilelang --ref {text!r} is a {type(value).__name__}, not a callable. Give the "
                             "reference function, e.g. --ref torch.matmul")
        return value

    def _find_kernels(self, cell: str, ns: dict[str, Any], before: dict[str, Any], filename: str,
                      call_args: tuple, call_kwargs: dict, wanted: str | None) -> list[str]:
        from . import _adapter

        with_args = bool(call_args or call_kwargs)
        changed = [k for k, v in ns.items() if not k.startswith("_") and before.get(k, _MISSING) is not v]
        found = [k for k in changed if _adapter.kernel_kind(ns[k]) is not None]
        if with_args and wanted and wanted not in found and wanted in ns and callable(ns[wanted]):
            found.append(wanted)  # --kernel NAME --args ...: NAME is a kernel factory
        elif with_args and not wanted and not any(_adapter.kernel_kind(ns[k]) == "jit" for k in found):
            # A plain function defined in this cell and specialised by --args may be a factory:
            # keep those the arguments fit and that, called with them, give a kernel.
            functions = [k for k in changed if k not in found
                         and getattr(getattr(ns[k], "__code__", None), "co_filename", None) == filename]
            factories = [k for k in functions if _binds(ns[k], call_args, call_kwargs)]
            if len(factories) > 1:
                factories = [k for k in factories if self._gives_kernel(ns[k], call_args, call_kwargs)]
            if len(factories) > 1:
                raise UsageError(
                    f"%%tilelang: --args fits several functions of this cell that build a kernel: "
                    f"{', '.join(f'{k}{_signature(ns[k]) or ()}' for k in factories)}. "
                    f"Say which one with --kernel NAME (e.g. --kernel {factories[0]}).")
            if not factories and functions and not found:
                raise UsageError(
                    f"%%tilelang --args {_args_text(call_args, call_kwargs)} fits none of the functions this cell "
                    f"defines: {', '.join(f'{k}{_signature(ns[k]) or ()}' for k in functions)}. "
                    "Change --args to the factory's parameters, or name it with --kernel NAME.")
            found += factories
        order = {name: _first_use(cell, name) for name in found}
        return sorted(dict.fromkeys(found), key=lambda n: order[n])

    @staticmethod
    def _gives_kernel(fn: Any, call_args: tuple, call_kwargs: dict) -> bool:
        from . import _adapter

        try:
            with _adapter.tilelang_errors(None):
                return _adapter.kernel_kind(fn(*call_args, **call_kwargs)) is not None
        except Exception:
            return False

    @staticmethod
    def _choose(names: list[str], wanted: str | None) -> str:
        if wanted is None:
            return names[0]
        if wanted not in names:
            raise UsageError(f"%%tilelang --kernel {wanted!r}: this cell defines no such kernel. "
                             f"It defines: {', '.join(names)}")
        return wanted

    @staticmethod
    def _check_call(name: str, obj: Any, call_args: tuple, call_kwargs: dict) -> None:
        """A jit function or factory must be given the arguments that specialise it."""
        from . import _adapter

        kind = _adapter.kernel_kind(obj)
        if kind in ("prim_func", "compiled"):
            if call_args or call_kwargs:
                what = "T.prim_func" if kind == "prim_func" else "compiled kernel"
                raise UsageError(
                    f"%%tilelang --args {_args_text(call_args, call_kwargs)}: {name} is a {what}, already "
                    "specialised, so it takes no arguments. Drop --args, or define the @tilelang.jit function "
                    "or the factory that builds it in this cell (--kernel NAME picks it)")
            return
        sig = _signature(obj)
        if sig is None:
            return
        try:
            sig.bind(*call_args, **call_kwargs)
            return
        except TypeError as err:
            problem = str(err)
        given = set(list(sig.parameters)[:len(call_args)]) | set(call_kwargs)
        missing = [p.name for p in sig.parameters.values() if p.default is p.empty and p.name not in given
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if missing:
            example = ", ".join("1024" for _ in missing)
            raise UsageError(
                f"%%tilelang: {name}{sig} needs the argument(s) that specialise it: "
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing. "
                f'Pass them with --args, e.g. --args "{example}".')
        raise UsageError(f"%%tilelang --args {_args_text(call_args, call_kwargs)} do not fit {name}{sig}: "
                         f"{problem}. Change --args to match its parameters.")

    # -- caching ---------------------------------------------------------------------------
    def _key(self, cell: str, names: list[str], ns: dict[str, Any], arch: str | None, backend: str | None,
             out_idx: list[int] | None, pass_configs: dict[str, Any], call_args: tuple, call_kwargs: dict,
             kernel: str | None, compile_now: bool, gpu: bool, tiers: tuple = ()) -> str:
        from . import __version__, _adapter

        # Only what shapes the build: --show/--quiet/--force/--run/--bench do not.
        parts = [cell, _adapter.tilelang_version(), __version__, str(gpu), str(compile_now), repr(arch), repr(backend),
                 repr(out_idx), repr(sorted((k, repr(v)) for k, v in pass_configs.items())), repr(kernel),
                 repr(call_args), repr(sorted(call_kwargs.items())), repr(tiers)]
        # The cell's text alone is not enough: a kernel may use names from earlier cells.
        parts += [f"{n}:{_fingerprint(ns[n])}" for n in names]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def _build(self, ns: dict[str, Any], names: list[str], shown: str, arch: str | None, out_idx: list[int] | None,
               pass_configs: dict[str, Any], call_args: tuple, call_kwargs: dict, backend: str | None,
               compile_now: bool, force: bool, key: str, toolchain: bool = False, passes: bool = False) -> CellResult:
        from . import _adapter
        from ._inspect import inspect

        kernel = ns[shown]
        specialise = _adapter.kernel_kind(kernel) != "prim_func"
        report = inspect(kernel, arch, out_idx=out_idx, pass_configs=pass_configs or None,
                         args=call_args if specialise else (), kwargs=call_kwargs if specialise else None,
                         force=force, toolchain=toolchain, passes=passes)
        compiled: dict[str, Any] = {}
        if compile_now:
            for name in names:
                obj = ns[name]
                kind = _adapter.kernel_kind(obj)
                if kind == "compiled":
                    continue  # already a compiled kernel
                if kind != "prim_func" and name != shown:
                    continue  # --args specialise the shown factory / jit function only
                spec = kind != "prim_func"
                compiled[name] = _adapter.compile_kernel(
                    obj, target=arch, backend=backend, out_idx=out_idx, pass_configs=pass_configs or None,
                    args=call_args if spec else (), kwargs=call_kwargs if spec else None, force=force,
                )
        return CellResult(kernels=names, shown=shown, report=report, compiled=compiled, key=key)

    def _bind(self, result: CellResult, ns: dict[str, Any], call_args: tuple, call_kwargs: dict) -> dict[str, str]:
        """Bind compiled kernels: a prim_func's name now names its compiled kernel; a factory or
        jit function stays, and its compiled kernel goes under the kernel's own name (or
        ``<factory>_kernel`` when that name holds something else)."""
        from . import _adapter

        bound: dict[str, str] = {}
        order = sorted(result.compiled, key=lambda n: _adapter.kernel_kind(ns[n]) != "prim_func")
        for name in order:
            kernel = result.compiled[name]
            if _adapter.kernel_kind(ns[name]) == "prim_func":
                target, what = name, f"compiled {name}"
            else:
                target = result.report.name if name == result.shown else f"{name}_kernel"
                current = ns.get(target, _MISSING)
                taken = target in bound or (current is not _MISSING and current is not self._bound.get(target)
                                            and _adapter.kernel_kind(current) != "compiled")
                if taken or not target.isidentifier():
                    target = f"{name}_kernel"
                what = f"{name}({_args_text(call_args, call_kwargs, quote=False)})"
            ns[target] = kernel
            self._bound[target] = kernel
            bound[target] = what
        return bound

    # -- launching -------------------------------------------------------------------------
    def _launch(self, result: CellResult, ns: dict[str, Any], args: Any, size_sets: list[dict[str, int]], ref: Any,
                rep_ms: float | None, refusal: str | None, arch: str | None, out_idx: list[int] | None,
                pass_configs: dict[str, Any], call_args: tuple, call_kwargs: dict) -> list[Any]:
        if refusal is not None:
            print(f"%%tilelang: --run/--bench/--profile/--sanitize were skipped: {refusal}; inspection still works "
                  "(the inspector below shows what TileLang generated for the target).")
            return []
        from . import _adapter

        try:
            from . import launch
        except ImportError:
            print("%%tilelang: --run/--bench need tilelab.launch, which this install lacks.")
            return []
        # The kernel compiled with this cell's --target/--backend/--out-idx/--args.
        kernel = result.compiled.get(result.shown)
        if kernel is None:
            obj = ns[result.shown]
            if _adapter.kernel_kind(obj) == "compiled":
                kernel = obj
            else:  # --no-compile: compile now, for launching only
                spec = _adapter.kernel_kind(obj) != "prim_func"
                kernel = _adapter.compile_kernel(
                    obj, target=arch, backend=args.backend, out_idx=out_idx, pass_configs=pass_configs or None,
                    args=call_args if spec else (), kwargs=call_kwargs if spec else None, force=args.force)
        bench_options: dict[str, Any] = {}
        if rep_ms is not None:
            bench_options = {"rep_ms": rep_ms, "warmup_ms": min(25.0, rep_ms)}
        out: list[Any] = []
        where = {"isolate": not args.in_process, "timeout": args.timeout}
        for sizes in size_sets or [{}]:
            try:
                if args.sanitize:
                    found = launch.sanitize(kernel, tool=args.sanitize, **sizes)
                    out.append(found)
                    print(f"%%tilelang --sanitize: {repr(found).splitlines()[0]}")
                if args.run:
                    checked = launch.run(kernel, ref=ref, **where, **sizes)
                    out.append(checked)
                    if not getattr(checked, "passed", True):
                        head = repr(checked).split("\n", 1)[0]
                        print(f"%%tilelang --run: {head}" + (f" at {_sizes_text(sizes)}" if sizes else ""))
                if args.bench:
                    out.append(launch.bench(kernel, **bench_options, **where, **sizes))
                if args.profile:
                    from .launch._profile import ProfileError, profile
                    from .profiling import measured_work
                    from .render.profile import ProfileView

                    try:
                        measured = profile(kernel, **sizes)
                    except ProfileError as err:
                        print(f"%%tilelang --profile: {err}")
                    else:
                        # the roofline places this size's timing by the work the counters measured
                        if out and hasattr(out[-1], "median_ms"):
                            out[-1] = measured_work(out[-1], measured)
                        out.append(ProfileView(measured, result.report))
            except (ValueError, TypeError) as err:
                raise UsageError(_launch_message(err, sizes)) from None
            except TilelabError as err:  # e.g. a launch failure: its message says what to change
                raise UsageError(f"%%tilelang --run/--bench: {err}") from None
        return out

    # -- display ---------------------------------------------------------------------------
    @staticmethod
    def _launch_refusal(arch: str | None, gpu: bool) -> str | None:
        """Why kernels of this cell cannot be compiled and launched here (None: they can)."""
        from .targets import launch_refusal, parse_target

        if arch is None:
            return None if gpu else ("there is no CUDA GPU here; for a kernel written for the CPU, "
                                     "pass --target c to launch it on the CPU")
        return launch_refusal(parse_target(arch), has_cuda_gpu=gpu)

    def _cell_identity(self, cell: str) -> str:
        """The notebook cell being run: the front end's cell id when the kernel has one, else
        the cell's text (a re-run compares with what that cell showed last: the Diff tab)."""
        parent: Any = None
        getter = getattr(self.shell, "get_parent", None)
        if callable(getter):
            try:
                parent = getter()
            except Exception:
                parent = None
        parent = parent or getattr(self.shell, "parent_header", None) or {}
        cell_id = (parent.get("metadata") or {}).get("cellId") if isinstance(parent, dict) else None
        return f"id:{cell_id}" if cell_id else "text:" + hashlib.sha256(cell.encode()).hexdigest()

    def _display(self, obj: Any) -> None:
        # Through this shell's own formatter and publisher (display() would use the global one).
        data, metadata = self.shell.display_formatter.format(obj)
        if data:
            self.shell.display_pub.publish(data=data, metadata=metadata)

    def _kernel_line(self, err: LoweringError, cell: str, filename: str) -> tuple[int, str] | None:
        lines = ("\n" + cell).split("\n")
        if err.kernel_line:
            path, number = err.kernel_line[0], err.kernel_line[1]
            # TileLang's builder records the cell's file with the working directory in front.
            if (path == filename or path.endswith(os.sep + filename)) and 0 < number <= len(lines):
                return number, lines[number - 1]
        if err.kernel:  # the failure carries no user frame: find the kernel in the cell
            pattern = re.compile(rf"^\s*def\s+{re.escape(err.kernel)}\s*\(")
            start = next((n for n, text in enumerate(lines) if pattern.match(text)), None)
            if start is None:
                return None
            # The compiler's message usually names the operation (``T.gemm``): point at its call.
            ops = re.findall(r"\bT\.(\w+)", err.summary)
            for op in ops:
                call = re.compile(rf"\bT\.{re.escape(op)}\s*\(")
                for number in range(start + 1, len(lines)):
                    if call.search(lines[number]):
                        return number + 1, lines[number]  # 1-based; line 1 is %%tilelang
            return start + 1, lines[start]
        return None

    def _lowering_lines(self, err: LoweringError, cell: str, filename: str) -> list[str]:
        where = self._kernel_line(err, cell, filename)
        lines = [f"LoweringError: {err.summary}"]
        if where:
            lines.append(f"  cell line {where[0]}: {where[1].strip()}")
        elif err.kernel_line:
            lines.append(f"  {err.kernel_line[0]}:{err.kernel_line[1]}: {err.kernel_line[2].strip()}")
        lines.append("  (the full TileLang trace is folded above)")
        return lines

    def _show_lowering_error(self, err: LoweringError, cell: str, filename: str) -> None:
        """The full TileLang trace, folded: the only part of the error the traceback below it
        (message and cell line, see ``_lowering_lines``) does not already say."""
        esc = html.escape
        body = (
            '<div class="tilelab-report tl-error" style="color:var(--jp-ui-font-color1,#222);'
            'border-left:3px solid var(--jp-error-color1,#d32f2f);padding:2px 8px">'
            f'<details><summary style="cursor:pointer">Full TileLang trace of <b>{esc(err.kernel or "the kernel")}</b>'
            f'</summary><pre style="white-space:pre-wrap">{esc(err.trace)}</pre></details></div>'
        )
        text = f"(the full TileLang trace of {err.kernel or 'the kernel'}: {len(err.trace.splitlines())} lines, " \
               "folded in the HTML view)"
        self.shell.display_pub.publish(data={"text/plain": text, "text/html": body}, metadata={})


def _unquote(value: str | None) -> str | None:
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _args_text(call_args: tuple, call_kwargs: dict, *, quote: bool = True) -> str:
    text = ", ".join([repr(a) for a in call_args] + [f"{k}={v!r}" for k, v in call_kwargs.items()])
    return f'"{text}"' if quote else text


def _sizes_text(sizes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def _launch_message(err: BaseException, sizes: dict[str, int]) -> str:
    """A launch's ValueError/TypeError as what to pass: a missing dynamic size names --sizes."""
    text = str(err)
    missing = re.search(r"size ([\w, ]+?) is dynamic", text)
    at = f" (at --sizes {_sizes_text(sizes)!r})" if sizes else ""
    if missing:
        names = [n.strip() for n in missing.group(1).split(",") if n.strip()]
        example = ",".join(f"{n}=4096" for n in names)
        return (f"%%tilelang --run/--bench{at}: the kernel's size {', '.join(names)} is dynamic and was not given. "
                f'Pass it with --sizes "{example}" (several sets: "{names[0]}=1024;{names[0]}=4096").')
    return (f"%%tilelang --run/--bench{at}: {type(err).__name__}: {text}. Check --sizes (dynamic sizes), "
            "--ref (the reference's arguments and outputs) and --out-idx.")


def _first_use(cell: str, name: str) -> int:
    match = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", cell)
    return match.start() if match else sys.maxsize


def _fingerprint(obj: Any) -> str:
    from . import _adapter

    return _adapter.kernel_fingerprint(obj)


__all__ = ["CellResult", "CellSyntaxError", "TileLangMagics"]
