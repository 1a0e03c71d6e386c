"""``%%tilelang``: run a cell, inspect (and on a GPU, compile) the kernels it defines, show them.

The magic is thin: it parses options (``%%tilelang?`` prints them), runs the cell in the user's
namespace, calls :func:`tilelab.inspect` and ``_adapter.compile_kernel``, binds compiled kernels
and displays an :class:`~tilelab.widgets.inspector.Inspector`. Like Cython's ``%%cython`` it
keeps an in-process cache keyed by a hash of the cell text, the options, the kernels' content
and the tool versions, so re-running an unchanged cell does no lowering or compiling at all;
``--force`` bypasses that cache and tilelab.inspect's own.

The cell's source is registered with ``linecache`` under an IPython cell name (line numbers as
in the notebook cell, the ``%%tilelang`` line being line 1), so ``inspect.getsource`` works for
kernels defined in it (``T.prim_func`` needs it) and tracebacks point at the cell's lines.
"""

from __future__ import annotations

import ast
import hashlib
import html
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


@dataclass
class CellResult:
    """What one ``%%tilelang`` run found and made (``TileLangMagics.last``)."""

    kernels: list[str]  # names of the kernels the cell defines, in cell order
    shown: str  # the kernel the inspector shows
    report: KernelReport
    compiled: dict[str, Any] = field(default_factory=dict)  # name -> TileLang JITKernel (GPU only)
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


def _parse_sizes(text: str | None) -> dict[str, int]:
    if not text:
        return {}
    sizes: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UsageError(f'--sizes takes NAME=INT pairs separated by commas (e.g. "M=1024,N=512"); got {text!r}')
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise UsageError(f"--sizes: {name.strip()} must be an integer; got {value.strip()!r}") from None
    return sizes


def _short_traceback(shell: Any, err: BaseException, tb: Any) -> list[str]:
    """IPython's coloured traceback of ``err`` from ``tb`` on (the cell's own frames)."""
    return shell.InteractiveTB.structured_traceback(type(err), err, tb)


@magics_class
class TileLangMagics(Magics):
    """The ``%%tilelang`` cell magic; ``last`` is the :class:`CellResult` of the latest run."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self._cache: OrderedDict[str, CellResult] = OrderedDict()
        self.last: CellResult | None = None

    @magic_arguments()
    @argument("--target", default=None,
              help='arch to inspect/compile for: "sm_90a", "sm_80", "cuda -arch=sm_90a" (default: the GPU here, else sm_90a)')
    @argument("--backend", default="tvm_ffi", choices=BACKENDS, help="execution backend when compiling (default tvm_ffi)")
    @argument("--out-idx", default=None, metavar="IDX", help="output parameter index or indices, e.g. -1 or 0,2")
    @argument("--pass-config", action="append", metavar="KEY=VALUE", help="a TileLang pass config (repeatable)")
    @argument("--kernel", default=None, metavar="NAME", help="the kernel to show when the cell defines several")
    @argument("--args", default=None, metavar='"..."',
              help='arguments specialising a @tilelang.jit kernel or a kernel factory, e.g. --args "1024, 1024, 1024"')
    @argument("--show", default=None, metavar="TABS",
              help="comma-separated tabs: summary,cuda,launcher,tma,wgmma,layouts,arguments")
    @argument("--no-compile", action="store_true", help="inspect only, even on a GPU")
    @argument("--force", action="store_true", help="bypass the caches: re-inspect and recompile")
    @argument("--quiet", action="store_true", help="show nothing; still binds the kernels")
    @argument("--run", action="store_true", help="launch the kernel once and check it (GPU only)")
    @argument("--bench", action="store_true", help="time the kernel (GPU only)")
    @argument("--sizes", default=None, metavar='"M=1024,N=..."', help="sizes of dynamic dimensions for --run/--bench")
    @cell_magic
    def tilelang(self, line: str, cell: str) -> None:
        """Run the cell, inspect the TileLang kernels it defines, and show the kernel inspector.

        Kernels are the ``T.prim_func``s and ``@tilelang.jit`` functions the cell defines (a plain
        factory returning a prim_func counts when ``--args`` is given). With a GPU they are
        compiled and bound under their names; without one they are inspected for the target.
        """
        started = time.perf_counter()
        try:
            args = parse_argstring(self.tilelang, line)
        except UsageError as err:
            parser = self.tilelang.parser
            raise UsageError(f"%%tilelang: {err}. Valid options: {_valid_options(parser)}") from None
        # IPython splits the line keeping quotes (--args "1, 2" arrives as '"1, 2"').
        for name in ("target", "out_idx", "kernel", "args", "show", "sizes"):
            setattr(args, name, _unquote(getattr(args, name)))
        args.pass_config = [_unquote(v) for v in args.pass_config] if args.pass_config else None

        from . import _adapter
        from ._inspect import resolve_target

        arch: str | None = None
        if args.target is not None:
            try:
                arch, _ = resolve_target(args.target)
            except TargetError as err:
                raise UsageError(f"%%tilelang --target: {err}") from None
        out_idx = _parse_out_idx(args.out_idx)
        pass_configs = _parse_pass_configs(args.pass_config)
        sizes = _parse_sizes(args.sizes)
        try:
            from .widgets.inspector import parse_tabs

            tabs = parse_tabs(args.show)
        except ValueError as err:
            raise UsageError(f"%%tilelang --show: {err}") from None

        ns = self.shell.user_ns
        before = dict(ns)
        filename = self._run_cell(cell, ns, before)
        try:
            call_args, call_kwargs = self._eval_args(args.args, ns)
            names = self._find_kernels(cell, ns, before, filename, call_args or call_kwargs, args.kernel)
            if not names:
                print("%%tilelang: this cell defines no TileLang kernel (a T.prim_func or a @tilelang.jit "
                      "function); it ran as a normal cell. A plain function returning a prim_func needs "
                      '--args "..." to be specialised.')
                return
            shown = self._choose(names, args.kernel)
            gpu = _adapter.has_gpu()
            compile_now = gpu and not args.no_compile
            key = self._key(cell, line, names, ns, call_args, call_kwargs, gpu)
            result = None if args.force else self._cache.get(key)
            if result is not None:
                self._cache.move_to_end(key)
                result = CellResult(kernels=names, shown=shown, report=result.report, compiled=result.compiled,
                                    cache_hit=True, key=key)
            else:
                result = self._build(ns, names, shown, arch, out_idx, pass_configs, call_args, call_kwargs,
                                     args.backend, compile_now, args.force, key)
                self._cache[key] = result
                while len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
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

        for name, kernel in result.compiled.items():
            ns[name] = kernel
        if args.run or args.bench:
            try:
                result.timing = self._launch(result, ns, args, sizes, gpu)
            except TilelabError as err:  # e.g. a launch failure: its message says what to change
                raise UsageError(f"%%tilelang --run/--bench: {err}") from None
        if not args.quiet:
            from .widgets.inspector import Inspector

            result.inspector = Inspector(result.report, show=tabs, timing=result.timing)
            self._display(result.inspector)
        result.seconds = time.perf_counter() - started
        self.last = result

    # -- running the cell ------------------------------------------------------------------
    def _run_cell(self, cell: str, ns: dict[str, Any], before: dict[str, Any]) -> str:
        """Execute the cell; a Python error is re-raised with a traceback of the cell's frames."""
        # The magic's own line is line 1 of the notebook cell: a leading newline keeps line
        # numbers equal to what the user sees.
        source = "\n" + self.shell.transform_cell(cell)
        number = self.shell.execution_count
        filename = self.shell.compile.cache(source, number, raw_code="\n" + cell)
        try:
            code = compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError:
            self._restore(ns, before)
            raise
        try:
            exec(code, ns)
        except BaseException as err:
            self._restore(ns, before)
            tb = err.__traceback__
            tb = tb.tb_next if tb is not None else None  # drop this frame: start at the cell
            if tb is not None and not isinstance(err, KeyboardInterrupt):
                lines = _short_traceback(self.shell, err, tb)
                try:
                    err._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
                except AttributeError:
                    pass
            raise
        return filename

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

    def _find_kernels(self, cell: str, ns: dict[str, Any], before: dict[str, Any], filename: str,
                      with_args: bool, wanted: str | None) -> list[str]:
        from . import _adapter

        changed = [k for k, v in ns.items() if not k.startswith("_") and before.get(k, _MISSING) is not v]
        found = [k for k in changed if _adapter.kernel_kind(ns[k]) is not None]
        if with_args and wanted and wanted not in found and wanted in ns and callable(ns[wanted]):
            found.append(wanted)  # --kernel NAME --args ...: NAME is a kernel factory
        elif with_args and not any(_adapter.kernel_kind(ns[k]) == "jit" for k in found):
            # A plain function defined in this cell, specialised by --args, is a factory.
            found += [k for k in changed if getattr(getattr(ns[k], "__code__", None), "co_filename", None) == filename]
        order = {name: _first_use(cell, name) for name in found}
        return sorted(dict.fromkeys(found), key=lambda n: order[n])

    @staticmethod
    def _choose(names: list[str], wanted: str | None) -> str:
        if wanted is None:
            return names[0]
        if wanted not in names:
            raise UsageError(f"%%tilelang --kernel {wanted!r}: this cell defines no such kernel. "
                             f"It defines: {', '.join(names)}")
        return wanted

    # -- caching ---------------------------------------------------------------------------
    def _key(self, cell: str, line: str, names: list[str], ns: dict[str, Any], call_args: tuple,
             call_kwargs: dict, gpu: bool) -> str:
        from . import __version__, _adapter

        parts = [cell, line.strip(), _adapter.tilelang_version(), __version__, str(gpu),
                 repr(call_args), repr(sorted(call_kwargs.items()))]
        # The cell's text alone is not enough: a kernel may use names from earlier cells.
        parts += [f"{n}:{_fingerprint(ns[n])}" for n in names]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def _build(self, ns: dict[str, Any], names: list[str], shown: str, arch: str | None, out_idx: list[int] | None,
               pass_configs: dict[str, Any], call_args: tuple, call_kwargs: dict, backend: str,
               compile_now: bool, force: bool, key: str) -> CellResult:
        from . import _adapter
        from ._inspect import inspect

        kernel = ns[shown]
        specialise = _adapter.kernel_kind(kernel) != "prim_func"
        report = inspect(kernel, arch, out_idx=out_idx, pass_configs=pass_configs or None,
                         args=call_args if specialise else (), kwargs=call_kwargs if specialise else None,
                         force=force)
        compiled: dict[str, Any] = {}
        if compile_now:
            for name in names:
                obj = ns[name]
                kind = _adapter.kernel_kind(obj)
                if kind == "compiled":
                    continue  # already a compiled kernel
                if kind == "jit" and not (call_args or call_kwargs):
                    continue  # a @tilelang.jit function compiles itself when called
                spec = kind != "prim_func"
                compiled[name] = _adapter.compile_kernel(
                    obj, target=arch, backend=backend, out_idx=out_idx, pass_configs=pass_configs or None,
                    args=call_args if spec else (), kwargs=call_kwargs if spec else None,
                )
        return CellResult(kernels=names, shown=shown, report=report, compiled=compiled, key=key)

    # -- launching -------------------------------------------------------------------------
    def _launch(self, result: CellResult, ns: dict[str, Any], args: Any, sizes: dict[str, int], gpu: bool) -> list[Any]:
        if not gpu:
            print("%%tilelang: no CUDA GPU here, so --run/--bench were skipped; inspection still works "
                  "(the inspector below shows what TileLang generated for the target).")
            return []
        try:
            from . import launch
        except ImportError:
            print("%%tilelang: --run/--bench need tilelab.launch, which this install lacks.")
            return []
        kernel = result.compiled.get(result.shown, ns[result.shown])
        out = []
        if args.run:
            out.append(launch.run(kernel, **sizes))
        if args.bench:
            out.append(launch.bench(kernel, **sizes))
        return out

    # -- display ---------------------------------------------------------------------------
    def _display(self, obj: Any) -> None:
        # Through this shell's own formatter and publisher (display() would use the global one).
        data, metadata = self.shell.display_formatter.format(obj)
        if data:
            self.shell.display_pub.publish(data=data, metadata=metadata)

    def _kernel_line(self, err: LoweringError, cell: str, filename: str) -> tuple[int, str] | None:
        if err.kernel_line and err.kernel_line[0] == filename:
            return err.kernel_line[1], err.kernel_line[2]
        if err.kernel:  # the failure carries no user frame: find the kernel in the cell
            lines = ("\n" + cell).split("\n")
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
        lines.append("  (the full TileLang trace is folded in the output above)")
        return lines

    def _show_lowering_error(self, err: LoweringError, cell: str, filename: str) -> None:
        where = self._kernel_line(err, cell, filename)
        esc = html.escape
        line_html = (f"<div>cell line {where[0]}: <code>{esc(where[1].strip())}</code></div>" if where else "")
        body = (
            '<div class="tilelab-report tl-error" style="color:var(--jp-ui-font-color1,#222);'
            'background:rgba(229,57,53,.12);border-left:3px solid var(--jp-error-color1,#d32f2f);padding:4px 8px">'
            f"<div><b>{esc(err.kernel or 'kernel')}</b>: {esc(err.summary)}</div>{line_html}"
            '<details><summary style="cursor:pointer">Full TileLang trace</summary>'
            f'<pre style="white-space:pre-wrap">{esc(err.trace)}</pre></details></div>'
        )
        text = err.summary + (f"\n  cell line {where[0]}: {where[1].strip()}" if where else "")
        self.shell.display_pub.publish(data={"text/plain": text, "text/html": body}, metadata={})


def _unquote(value: str | None) -> str | None:
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _first_use(cell: str, name: str) -> int:
    match = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", cell)
    return match.start() if match else sys.maxsize


def _fingerprint(obj: Any) -> str:
    from . import _adapter

    return _adapter.kernel_fingerprint(obj)


__all__ = ["CellResult", "TileLangMagics"]
