"""A failing kernel as a standalone TileLang script, and the check that a script fails the same way.

:func:`recipe` writes, at the moment a kernel fails, what a script needs to build it again with
nothing but TileLang: the ``T.prim_func``'s own source (its Python function, which TileLang keeps),
the values of the names it closes over or reads from its module (tile sizes, dtypes, helper
functions), the target and the pass configs; :func:`call_recipe` writes a factory's call the same way
(the factory's source after what it reads from its module, then ``kernel = factory(...)``), and
:func:`text_recipe` takes a cell's text as it is. :func:`run_script` runs such a script's body in this
process, lowers its kernel as tilelab does and returns the failure (a LoweringError with its
diagnosis) or None; ``stop_after`` ends the lowering after the pass that failed first, so that a
candidate that does not fail costs no more than one that does. :func:`script_tail` is the few
lines that lower the kernel in the standalone script. The shrinking itself is
:mod:`tilelab.engine.reproducer`'s.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import os
import platform
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

from ..records.errors import LoweringError
from .env import tilelang, tilelang_version
from .errors import _lowering_error, _PassTracker, diagnosed, tilelang_errors


@dataclass(frozen=True)
class Recipe:
    """What a standalone script needs to build and lower a failing kernel again.

    ``body`` is Python that defines the kernel (imports aside); ``kernel`` the name the prim_func
    has after it runs ("" when running the body is itself the failure: a kernel that could not be
    built); ``target`` TileLang's target dict and ``target_name`` tilelab's; ``origin`` the lines
    of the source the kernel came from (the cell or the factory with its helpers), for the size
    before shrinking."""

    body: str
    kernel: str
    target: dict[str, Any] = field(default_factory=dict)
    target_name: str = ""
    pass_configs: dict[str, Any] = field(default_factory=dict)
    origin_lines: int = 0


_HEADER = "import tilelang, tilelang.language as T\n"


def versions() -> str:
    """The versions a TileLang issue asks for, as comment lines."""
    import sys

    parts = [f"tilelang {tilelang_version()}", f"python {sys.version.split()[0]}", platform.platform(terse=True)]
    try:
        import torch

        parts.insert(1, f"torch {torch.__version__}")
    except Exception:  # torch is optional for lowering
        pass
    return "# " + ", ".join(parts) + "\n"


def script_tail(recipe: Recipe) -> str:
    """The lines that lower the kernel for the recipe's target, as a TileLang user writes them."""
    if not recipe.kernel:
        return ""
    configs = f", config={recipe.pass_configs!r}" if recipe.pass_configs else ""
    return (f"with tilelang.tvm.target.Target({recipe.target!r}) as target, "
            f"tilelang.transform.PassContext(opt_level=3{configs}):\n"
            f"    tilelang.lower({recipe.kernel}, target=target, enable_device_compile=False)\n")


def script_header() -> str:
    return _HEADER


# -- the recipe at the failure -----------------------------------------------------------------------------
def _literal(value: Any, depth: int = 0) -> str | None:
    """Python text that makes ``value`` again in a script importing TileLang as T; None if none."""
    T = tilelang().language
    if value is None or isinstance(value, (bool, int, float, str)) and type(value) in (bool, int, float, str):
        return repr(value)
    if depth < 3 and isinstance(value, (tuple, list)):
        items = [_literal(v, depth + 1) for v in value]
        if any(i is None for i in items):
            return None
        inner = ", ".join(items)  # type: ignore[arg-type]
        return f"({inner}{',' if len(items) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    text = str(value)
    if text and text.replace("_", "").isalnum() and isinstance(getattr(T, text, None), type(value)):
        return f"T.{text}"  # a dtype (T.float16)
    if isinstance(value, str):
        return repr(str(value))
    return None


def _names_used(code: types.CodeType) -> set[str]:
    """The global and free names ``code`` (and the code nested in it) reads; attribute names aside."""
    import dis

    names = set(code.co_freevars)
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"):
            names.add(str(instruction.argval))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


def _definitions(fn: types.FunctionType, seen: set[str], out: list[str]) -> None:
    """The assignments and helper definitions ``fn`` needs, appended to ``out`` in dependency order."""
    values: dict[str, Any] = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                values[name] = cell.cell_contents
            except ValueError:
                continue
    module = fn.__globals__
    builtins = module.get("__builtins__", {})
    for name in sorted(_names_used(fn.__code__)):
        if name in values or name in seen:
            continue
        if name in module:
            values[name] = module[name]
        elif name not in (builtins if isinstance(builtins, dict) else vars(builtins)):
            continue
    for name, value in values.items():
        if name in seen or name in ("T", "tilelang"):
            continue
        seen.add(name)
        if isinstance(value, types.ModuleType):
            out.append(f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}")
            continue
        if isinstance(value, types.FunctionType):
            try:
                text = textwrap.dedent(inspect.getsource(value))
            except (OSError, TypeError):
                raise ValueError(f"the helper {name} has no source tilelab can read") from None
            _definitions(value, seen, out)
            out.append(text.rstrip("\n"))
            continue
        literal = _literal(value)
        if literal is None:
            orig = getattr(value, "orig_func", None) or getattr(value, "func", None)
            if isinstance(orig, types.FunctionType):  # a T.macro or a prim_func used by the kernel
                try:
                    text = textwrap.dedent(inspect.getsource(orig))
                except (OSError, TypeError):
                    raise ValueError(f"{name} has no source tilelab can read") from None
                _definitions(orig, seen, out)
                out.append(text.rstrip("\n"))
                continue
            raise ValueError(f"the kernel uses {name} = {type(value).__name__}, which a script cannot write down")
        out.append(f"{name} = {literal}")


def recipe(func: Any, target: Any, pass_configs: dict[str, Any] | None = None) -> Recipe | None:
    """The recipe of a prim_func that failed to lower (None where its source cannot be had)."""
    fn = getattr(func, "orig_func", None)
    if not isinstance(fn, types.FunctionType):
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        out: list[str] = []
        _definitions(fn, {fn.__name__}, out)
    except Exception:
        return None
    body = "\n".join(out + [source.rstrip("\n")]) + "\n"
    origin = _origin_lines(fn)
    return Recipe(body=body, kernel=fn.__name__, target=dict(target.tilelang_target()), target_name=target.name,
                  pass_configs=_plain_configs(pass_configs or {}), origin_lines=origin)


def call_recipe(factory: Any, kwargs: dict[str, Any], target: Any,
                pass_configs: dict[str, Any] | None = None, *, kernel: str = "kernel") -> Recipe | None:
    """The recipe of a kernel a factory builds (``kernel = factory(**kwargs)``), as the cell that
    calls it is written: the names the factory reads from its module (imports, constants, helpers),
    its source and the call; running it raises a failure of the factory, lowering ``kernel`` one of
    TileLang's passes. None where the factory's source or a value it reads cannot be written down."""
    fn = getattr(factory, "__wrapped__", factory)
    if not isinstance(fn, types.FunctionType):
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        out: list[str] = []
        _definitions(fn, {fn.__name__}, out)
        arguments = []
        for name, value in kwargs.items():
            literal = _literal(value)
            if literal is None:
                return None
            arguments.append(f"{name}={literal}")
    except Exception:
        return None
    body = "\n".join(out + [source.rstrip("\n"), f"{kernel} = {fn.__name__}({', '.join(arguments)})"]) + "\n"
    return Recipe(body=body, kernel=kernel, target=dict(target.tilelang_target()), target_name=target.name,
                  pass_configs=_plain_configs(pass_configs or {}), origin_lines=0)


def text_recipe(text: str, target: Any = None, pass_configs: dict[str, Any] | None = None) -> Recipe:
    """The recipe of a failure raised while ``text`` (a cell) ran: the text is the script."""
    return Recipe(body=text if text.endswith("\n") else text + "\n", kernel="",
                  target=dict(target.tilelang_target()) if target is not None else {},
                  target_name=getattr(target, "name", ""), pass_configs=_plain_configs(pass_configs or {}),
                  origin_lines=len([line for line in text.splitlines() if line.strip()]))


def _plain_configs(configs: dict[str, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in configs.items() if isinstance(v, (bool, int, float, str, list, tuple))}


def _origin_lines(fn: types.FunctionType) -> int:
    """The code lines of the source the kernel came from: the whole cell (a source of the notebook's,
    ``<...>``), else the top-level statement of its file that defines it (a factory with its kernel)."""
    import ast

    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename)
    if not lines:
        return 0

    def code(chunk: list[str]) -> int:
        return len([line for line in chunk if line.strip() and not line.lstrip().startswith("#")])

    if filename.startswith("<"):
        return code(lines)
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return 0
    first = fn.__code__.co_firstlineno
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if start <= first <= (node.end_lineno or node.lineno):
            return code(lines[start - 1:node.end_lineno])
    return 0


# -- running a candidate ---------------------------------------------------------------------------------
class _Passed(Exception):
    """Raised after the pass that failed first has run to its end: this candidate got past it."""


def run_script(body: str, rec: Recipe, *, stop_after: str | None = None) -> LoweringError | None:
    """Run ``header + body`` in a fresh namespace and lower its kernel for the recipe's target:
    the LoweringError (with its diagnosis) it ends in, or None where it builds and lowers (or gets
    past the pass ``stop_after``). A Python error of the script (a name removed) is returned as the
    LoweringError TileLang's elaboration would give, or None where TileLang did not run it."""
    from ..targets import parse_target

    text = _HEADER + body
    filename = f"<reproducer {hashlib.sha1(text.encode()).hexdigest()[:12]}>"
    # TileLang stamps spans with the file name made absolute (the working folder before "<reproducer ...>"):
    # the text answers under both names, so that the doctor reads the script's lines as it reads a cell's
    names = (filename, os.path.abspath(filename))
    for name in names:
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace: dict[str, Any] = {"__name__": "__reproducer__"}
    try:
        code = compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError:
        return None
    try:
        try:
            with tilelang_errors(rec.kernel or None, stage="elaboration"):
                exec(code, namespace)
        except LoweringError as err:
            return err
        except Exception as err:
            # a NameError or TypeError of the script outside TileLang: not the failure
            del err
            return None
        if not rec.kernel:
            return None
        func = namespace.get(rec.kernel)
        if func is None:
            return None
        target = parse_target(rec.target_name or rec.target)
        return _lower(func, rec.kernel, target, rec.pass_configs, stop_after)
    finally:
        for name in names:
            linecache.cache.pop(name, None)


def _lower(func: Any, name: str, target: Any, pass_configs: dict[str, Any],
           stop_after: str | None) -> LoweringError | None:
    tl = tilelang()
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile, lower_to_host_device_ir
    from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs

    tracker = _PassTracker()
    instruments = [tracker.build()]
    if stop_after:
        tvm = tl.tvm

        @tvm.instrument.pass_instrument
        class Stop:
            def run_after_pass(self, mod: Any, info: Any) -> None:
                if str(info.name) == stop_after:
                    raise _Passed(stop_after)

        instruments.append(Stop())
    backend = "tvm_ffi" if target.family in ("cuda", "hip", "metal") else "cython"
    try:
        with tilelang_errors(name, stage="lowering"):
            context = create_backend_context(target.tilelang_target(), None, backend)
            prepared = func
            if backend == "tvm_ffi":  # as tilelab's lowering does (lowering.lower): the same passes see it
                prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
                    func, None,
                    supports_callee_allocated_outputs=context.execution_backend.supports_callee_allocated_outputs)
            with tl.transform.PassContext(opt_level=3, config=pass_configs, instruments=instruments), context.target:
                _, device_mod, _, _, _ = lower_to_host_device_ir(prepared, context)
                # the device code too: a failure of the code generator comes after every pass
                device_codegen_without_compile(device_mod, context).inspect_source()
    except LoweringError as err:
        if _passed(err):
            return None
        diagnosed(err, func=func, pass_name=tracker.failing, target_family=target.family, target_name=target.name)
        return err
    except _Passed:
        return None
    except Exception as err:
        if _passed(err):
            return None
        return _lowering_error(err, name, func=func, pass_name=tracker.failing, target_family=target.family,
                               target_name=target.name)
    return None


def _passed(err: BaseException) -> bool:
    """Whether ``err`` is the stop after the pass that failed first (TVM may wrap it)."""
    seen: set[int] = set()
    node: BaseException | None = err
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, _Passed) or type(node).__name__ == "_Passed":
            return True
        node = node.__cause__ or node.__context__
    trace = getattr(err, "trace", "") or ""
    return "_Passed" in trace and "Error" not in trace.split("_Passed", 1)[0].splitlines()[-1]
