"""The kernels of a ``%%tilelang`` cell: which names are kernels, how they are specialised, the
cell's cache key, building (inspect and, on a GPU, compile) and binding compiled kernels.

Every function takes the user's namespace and records (:class:`Call`, :class:`Build`), and returns
names, records or raises :class:`~tilelab.cell.options.CellUsageError` naming what to change.
"""

from __future__ import annotations

import hashlib
import inspect as _pyinspect
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..records.kernel import KernelReport
from .options import CellOptions, CellUsageError

MISSING = object()


@dataclass(frozen=True)
class Call:
    """The arguments ``--args`` gives: they specialise a @tilelang.jit function or a factory."""

    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.args or self.kwargs)

    def text(self, *, quote: bool = True) -> str:
        text = ", ".join([repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()])
        return f'"{text}"' if quote else text

    def fits(self, obj: Any) -> bool:
        """Whether ``obj``'s signature takes these arguments (True when it cannot be read)."""
        sig = signature(obj)
        if sig is None:
            return True
        try:
            sig.bind(*self.args, **self.kwargs)
        except TypeError:
            return False
        return True


@dataclass(frozen=True)
class Build:
    """What a run builds: the cell's kernels, the one shown, how they are specialised, and where."""

    names: tuple[str, ...]  # the cell's kernels, in cell order
    shown: str  # the kernel the inspector shows (and --run/--bench launch)
    call: Call
    options: CellOptions
    gpu: bool  # a CUDA GPU is here
    refusal: str | None = None  # why the kernels cannot be launched here (None: they can)

    @property
    def compile_now(self) -> bool:
        return self.refusal is None and not self.options.no_compile

    def arguments(self, kind: str | None) -> dict[str, Any]:
        """``args``/``kwargs`` for inspect and compile of a kernel of this kind: --args specialise a
        jit function or a factory; a prim_func takes none."""
        spec = kind != "prim_func"
        return {"args": self.call.args if spec else (), "kwargs": self.call.kwargs if spec else None}


@dataclass(frozen=True)
class CellEntry:
    """What the magic keeps of a built cell: the report and the compiled kernels, never widgets."""

    report: KernelReport
    compiled: dict[str, Any] = field(default_factory=dict)  # cell name -> TileLang JITKernel


def evaluate_args(text: str | None, ns: dict[str, Any]) -> Call:
    """``--args "1024, block=64"`` evaluated in the user's namespace."""
    if not text:
        return Call()
    try:
        args, kwargs = eval(f"__tilelab_args__({text})", ns, {"__tilelab_args__": lambda *a, **k: (a, k)})
    except Exception as err:
        raise CellUsageError(f"%%tilelang --args {text!r}: {type(err).__name__}: {err}") from None
    return Call(args, kwargs)


def evaluate_ref(text: str | None, ns: dict[str, Any]) -> Any:
    """``--ref EXPR`` evaluated in the user's namespace: the reference callable of --run."""
    if not text:
        return None
    try:
        value = eval(text, ns)
    except Exception as err:
        raise CellUsageError(f"%%tilelang --ref {text!r}: {type(err).__name__}: {err}. Give a Python expression "
                             "for the reference callable, e.g. --ref torch.matmul") from None
    if not callable(value):
        raise CellUsageError(f"%%tilelang --ref {text!r} is a {type(value).__name__}, not a callable. Give the "
                             "reference function, e.g. --ref torch.matmul")
    return value


def find_kernels(cell: str, ns: dict[str, Any], changed: list[str], filename: str, call: Call,
                 wanted: str | None) -> list[str]:
    """The names of the kernels the cell defined (``changed``: the names it bound), in the order
    the cell first uses them. With ``--args``, a plain function of the cell that the arguments fit
    and that gives a kernel counts as a factory."""
    from .. import _tilelang

    found = [k for k in changed if _tilelang.kernel_kind(ns[k]) is not None]
    if call and wanted and wanted not in found and wanted in ns and callable(ns[wanted]):
        found.append(wanted)  # --kernel NAME --args ...: NAME is a kernel factory
    elif call and not wanted and not any(_tilelang.kernel_kind(ns[k]) == "jit" for k in found):
        functions = [k for k in changed if k not in found
                     and getattr(getattr(ns[k], "__code__", None), "co_filename", None) == filename]
        found += _factories(functions, ns, call, any_kernel=bool(found))
    order = {name: _first_use(cell, name) for name in found}
    return sorted(dict.fromkeys(found), key=lambda n: order[n])


def _factories(functions: list[str], ns: dict[str, Any], call: Call, *, any_kernel: bool) -> list[str]:
    """The cell's functions that ``call`` fits and, called with it, give a kernel."""
    factories = [k for k in functions if call.fits(ns[k])]
    if len(factories) > 1:
        factories = [k for k in factories if _gives_kernel(ns[k], call)]
    if len(factories) > 1:
        raise CellUsageError(
            f"%%tilelang: --args fits several functions of this cell that build a kernel: "
            f"{', '.join(f'{k}{signature(ns[k]) or ()}' for k in factories)}. "
            f"Say which one with --kernel NAME (e.g. --kernel {factories[0]}).")
    if not factories and functions and not any_kernel:
        raise CellUsageError(
            f"%%tilelang --args {call.text()} fits none of the functions this cell "
            f"defines: {', '.join(f'{k}{signature(ns[k]) or ()}' for k in functions)}. "
            "Change --args to the factory's parameters, or name it with --kernel NAME.")
    return factories


def _gives_kernel(fn: Any, call: Call) -> bool:
    from .. import _tilelang

    try:
        with _tilelang.tilelang_errors(None):
            return _tilelang.kernel_kind(fn(*call.args, **call.kwargs)) is not None
    except Exception:
        return False


def choose(names: list[str], wanted: str | None) -> str:
    """The kernel to show: ``--kernel NAME``, else the cell's first."""
    if wanted is None:
        return names[0]
    if wanted not in names:
        raise CellUsageError(f"%%tilelang --kernel {wanted!r}: this cell defines no such kernel. "
                             f"It defines: {', '.join(names)}")
    return wanted


def check_call(name: str, obj: Any, call: Call) -> None:
    """A jit function or factory must be given the arguments that specialise it; a prim_func none."""
    from .. import _tilelang

    kind = _tilelang.kernel_kind(obj)
    if kind in ("prim_func", "compiled"):
        if call:
            what = "T.prim_func" if kind == "prim_func" else "compiled kernel"
            raise CellUsageError(
                f"%%tilelang --args {call.text()}: {name} is a {what}, already "
                "specialised, so it takes no arguments. Drop --args, or define the @tilelang.jit function "
                "or the factory that builds it in this cell (--kernel NAME picks it)")
        return
    sig = signature(obj)
    if sig is None:
        return
    try:
        sig.bind(*call.args, **call.kwargs)
        return
    except TypeError as err:
        problem = str(err)
    given = set(list(sig.parameters)[:len(call.args)]) | set(call.kwargs)
    missing = [p.name for p in sig.parameters.values() if p.default is p.empty and p.name not in given
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        example = ", ".join("1024" for _ in missing)
        raise CellUsageError(
            f"%%tilelang: {name}{sig} needs the argument(s) that specialise it: "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing. "
            f'Pass them with --args, e.g. --args "{example}".')
    raise CellUsageError(f"%%tilelang --args {call.text()} do not fit {name}{sig}: "
                         f"{problem}. Change --args to match its parameters.")


def launch_refusal(arch: str | None, gpu: bool) -> str | None:
    """Why kernels of this cell cannot be compiled and launched here (None: they can)."""
    from ..targets import launch_refusal as refusal_for
    from ..targets import parse_target

    if arch is None:
        return None if gpu else "there is no CUDA GPU here"
    return refusal_for(parse_target(arch), has_cuda_gpu=gpu)


def cell_key(cell: str, build: Build, ns: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The cell cache's key and its material: what shapes the build, and nothing else (--show,
    --quiet, --force, --run, --bench do not). The cell's text alone is not enough: a kernel may
    use names from earlier cells, so each kernel's content is part of it."""
    from .. import _tilelang
    from .._version import __version__

    material = (cell, _tilelang.tilelang_version(), __version__, str(build.gpu), str(build.compile_now),
                repr(build.options.build_options), repr(build.call.args), repr(sorted(build.call.kwargs.items())),
                *(f"{n}:{_tilelang.kernel_fingerprint(ns[n])}" for n in build.names))
    return hashlib.sha256("\0".join(material).encode()).hexdigest(), material


def build_cell(build: Build, ns: dict[str, Any]) -> CellEntry:
    """Inspect the shown kernel and, when the kernels are compiled here, compile every one."""
    from .. import _tilelang
    from ..engine.inspect import inspect

    options = build.options
    kernel = ns[build.shown]
    report = inspect(kernel, options.target, out_idx=_out_idx(options), pass_configs=options.pass_configs or None,
                     **build.arguments(_tilelang.kernel_kind(kernel)), force=options.force, toolchain=options.sass,
                     passes=options.passes)
    compiled: dict[str, Any] = {}
    if build.compile_now:
        for name in build.names:
            kind = _tilelang.kernel_kind(ns[name])
            if kind == "compiled":
                continue  # already a compiled kernel
            if kind != "prim_func" and name != build.shown:
                continue  # --args specialise the shown factory / jit function only
            compiled[name] = compile_one(ns[name], build)
    return CellEntry(report, compiled)


def compile_one(obj: Any, build: Build) -> Any:
    """``obj`` compiled with the cell's --target/--backend/--out-idx/--pass-config/--args."""
    from .. import _tilelang

    options = build.options
    return _tilelang.compile_kernel(obj, target=options.target, backend=options.backend, out_idx=_out_idx(options),
                                   pass_configs=options.pass_configs or None,
                                   **build.arguments(_tilelang.kernel_kind(obj)), force=options.force)


def bind(entry: CellEntry, build: Build, ns: dict[str, Any], ours: dict[str, Any]) -> dict[str, str]:
    """Bind compiled kernels: a prim_func's name now names its compiled kernel; a factory or jit
    function stays, and its compiled kernel goes under the kernel's own name (or
    ``<factory>_kernel`` when that name holds something else). ``ours`` (name -> kernel) records
    what the magic bound, so that a later run may bind there again; returns name -> what it is."""
    from .. import _tilelang

    bound: dict[str, str] = {}
    order = sorted(entry.compiled, key=lambda n: _tilelang.kernel_kind(ns[n]) != "prim_func")
    for name in order:
        kernel = entry.compiled[name]
        if _tilelang.kernel_kind(ns[name]) == "prim_func":
            target, what = name, f"compiled {name}"
        else:
            target = entry.report.name if name == build.shown else f"{name}_kernel"
            current = ns.get(target, MISSING)
            taken = target in bound or (current is not MISSING and current is not ours.get(target)
                                        and _tilelang.kernel_kind(current) != "compiled")
            if taken or not target.isidentifier():
                target = f"{name}_kernel"
            what = f"{name}({build.call.text(quote=False)})"
        ns[target] = kernel
        ours[target] = kernel
        bound[target] = what
    return bound


def signature(obj: Any) -> _pyinspect.Signature | None:
    """The signature of the Python function behind a @tilelang.jit object (or of the object)."""
    target = getattr(obj, "func", obj)
    target = getattr(target, "orig_func", None) or getattr(target, "__wrapped__", None) or target
    try:
        return _pyinspect.signature(target)
    except (TypeError, ValueError):
        return None


def _out_idx(options: CellOptions) -> list[int] | None:
    return list(options.out_idx) if options.out_idx is not None else None


def _first_use(cell: str, name: str) -> int:
    match = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", cell)
    return match.start() if match else sys.maxsize
