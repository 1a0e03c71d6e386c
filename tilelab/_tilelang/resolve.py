"""Kernel objects: what kind of TileLang object a value is (a ``T.prim_func``, a
``@tilelang.jit`` function, a compiled kernel, a factory returning one), the PrimFunc and front-end
settings behind it, a cheap fingerprint of what it is made of, and its IR as text that travels to
another process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..records.errors import KernelFactoryError, LoweringError, NotAKernelError
from .env import tilelang
from .errors import _lowering_error, _raised_in_user_code, _user_frame, tilelang_errors


def kernel_ir_to_text(prim_func: Any) -> str:
    """A ``T.prim_func`` as TVM's JSON text: it travels to processes that have not imported
    TileLang yet (unpickling the object itself needs TileLang's bundled ``tvm`` importable)."""
    tilelang()
    import tvm

    return tvm.ir.save_json(prim_func)


def kernel_ir_from_text(text: str) -> Any:
    tilelang()  # puts TileLang's bundled tvm on the path
    import tvm

    return tvm.ir.load_json(text)


def kernel_kind(obj: Any) -> str | None:
    """What kind of TileLang object ``obj`` is: "prim_func", "jit", "compiled", or None."""
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    if not (module.startswith("tvm") or module.startswith("tilelang")):
        return None
    tl = tilelang()
    from tilelang.jit import JITImpl
    from tilelang.jit.kernel import JITKernel

    if isinstance(obj, JITKernel):
        return "compiled"
    if isinstance(obj, JITImpl):
        return "jit"
    if isinstance(obj, tl.tvm.tirx.PrimFunc):
        return "prim_func"
    return None


@dataclass
class KernelSource:
    """A kernel reduced to what lowering needs, with what the front end said about it."""

    prim_func: Any
    name: str
    kind: str
    out_idx: list[int] | None = None
    pass_configs: dict[str, Any] = field(default_factory=dict)
    target_hint: Any = None
    constants: list[tuple[str, Any, bool]] = field(default_factory=list)  # factory parameters
    cache_key: str | None = None


def _factory_constants(fn: Callable, args: tuple, kwargs: dict) -> list[tuple[str, Any, bool]]:
    """(name, value, passed explicitly) for each parameter of a kernel factory.

    TileLang's JIT call key holds only the arguments actually passed; defaults are not part of it.
    """
    import inspect as _inspect

    try:
        bound = _inspect.signature(fn).bind(*args, **kwargs)
        explicit = set(bound.arguments)
        bound.apply_defaults()
        return [(k, v, k in explicit) for k, v in bound.arguments.items()]
    except (TypeError, ValueError):
        return [(f"arg{i}", a, True) for i, a in enumerate(args)] + [(k, v, True) for k, v in kwargs.items()]


def resolve_kernel(obj: Any, args: tuple = (), kwargs: dict | None = None) -> KernelSource:
    """Turn any kernel-like object into a PrimFunc plus the front end's settings."""
    # Not split: one short branch per kind of kernel object, read as one table.
    kwargs = dict(kwargs or {})
    kind = kernel_kind(obj)
    if kind == "prim_func":
        if args or kwargs:
            raise NotAKernelError(
                "this is a T.prim_func, already specialised: it takes no arguments to inspect. "
                "Pass the factory or @tilelang.jit function that builds it if you want to vary them."
            )
        name = str(obj.attrs["global_symbol"]) if obj.attrs and "global_symbol" in obj.attrs else "kernel"
        # A @tilelang.jit function whose outputs are ``T.empty`` tensors says so on its PrimFunc.
        outs = obj.attrs["tilelang_out_idx"] if obj.attrs and "tilelang_out_idx" in obj.attrs else None
        return KernelSource(obj, name, kind, out_idx=[int(i) for i in outs] if outs is not None else None)
    if kind == "compiled":
        func = obj.prim_func
        name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"
        return KernelSource(
            func, name, kind,
            out_idx=list(obj.out_idx) if getattr(obj, "out_idx", None) else None,
            pass_configs=dict(getattr(obj, "pass_configs", None) or {}),
            target_hint=getattr(obj, "target", None),
        )
    if kind == "jit":
        inner = getattr(obj.func, "orig_func", None) or getattr(obj.func, "__wrapped__", None) or obj.func
        try:
            with tilelang_errors(_callable_name(obj)):
                func = obj.get_tir(*args, **kwargs)
        except LoweringError as err:
            # TileLang calls the function: its own TypeError arrives wrapped, as TileLang's failure
            cause = err.__cause__
            if isinstance(cause, TypeError) and _raised_in_user_code(cause) and _binds(inner, args, kwargs) is True:
                raise _factory_error(_callable_name(obj), cause) from cause
            raise
        except TypeError as err:
            if _binds(inner, args, kwargs) is True:
                raise _factory_error(_callable_name(obj), err) from err
            raise NotAKernelError(
                f"{_callable_name(obj)} needs the arguments that specialise it ({err}). "
                f"Pass them: tilelab.inspect(kernel, args=(...)) or %%tilelang --args \"...\"."
            ) from err
        except Exception as err:
            raise _lowering_error(err, _callable_name(obj), stage="elaboration") from err
        key = repr(obj.parse_cache_key(*args, **kwargs))
        out_idx = obj.out_idx
        return KernelSource(
            func, _callable_name(obj), kind,
            out_idx=([out_idx] if isinstance(out_idx, int) else list(out_idx)) if out_idx is not None else None,
            pass_configs=dict(obj.pass_configs or {}),
            target_hint=obj.target,
            constants=_factory_constants(inner, args, kwargs) if callable(inner) else [],
            cache_key=f"JIT call key {key}",
        )
    if callable(obj) and not isinstance(obj, type):
        # A plain factory returning a T.prim_func (examples/gemm.py: matmul(M, N, K, ...)).
        try:
            with tilelang_errors(_callable_name(obj)):
                produced = obj(*args, **kwargs)
        except LoweringError as err:
            cause = err.__cause__
            if isinstance(cause, TypeError) and _raised_in_user_code(cause) and _binds(obj, args, kwargs) is True:
                raise _factory_error(_callable_name(obj), cause) from cause
            raise
        except TypeError as err:
            if _binds(obj, args, kwargs) is True:
                raise _factory_error(_callable_name(obj), err) from err
            raise NotAKernelError(
                f"{_callable_name(obj)} could not be called with the arguments given ({err}). "
                "Pass the arguments that specialise it."
            ) from err
        if kernel_kind(produced) is None:
            raise NotAKernelError(
                f"{_callable_name(obj)} returned {type(produced).__name__}, not a TileLang kernel. "
                "tilelab inspects a T.prim_func, a tilelang.compile result, a @tilelang.jit function, "
                "or a function that returns one of these."
            )
        inner = resolve_kernel(produced)
        # A plain factory bakes every parameter, default or not, into the kernel it returns.
        inner.constants = [(k, v, True) for k, v, _ in _factory_constants(obj, args, kwargs)]
        inner.kind = f"factory:{inner.kind}"
        return inner
    raise NotAKernelError(
        f"{type(obj).__name__} is not a TileLang kernel. tilelab inspects a T.prim_func, a "
        "tilelang.compile result, or a @tilelang.jit function (with the arguments that specialise it)."
    )


def _binds(fn: Any, args: tuple, kwargs: dict) -> bool | None:
    """Whether ``fn``'s signature accepts these arguments; None when it has no readable signature."""
    import inspect as _inspect

    try:
        signature = _inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _factory_error(name: str, err: TypeError) -> KernelFactoryError:
    """A TypeError raised inside the user's factory (the call itself fitted its signature)."""
    where = _user_frame(err.__traceback__)
    return KernelFactoryError(
        f"{name} raised TypeError while building the kernel: {err}. The arguments fit {name}'s "
        "signature; the error is in its own code (the line below)", where=where)


def _callable_name(obj: Any) -> str:
    for attr in ("__name__", "__qualname__"):
        if hasattr(obj, attr):
            return str(getattr(obj, attr))
    inner = getattr(obj, "func", None)
    if inner is not None:
        return _callable_name(inner)
    return type(obj).__name__


def kernel_fingerprint(obj: Any) -> str:
    """What a kernel object is made of, cheaply: TVM's structural hash of its PrimFunc, or the
    source of a @tilelang.jit / factory function (its arguments are hashed separately)."""
    import hashlib
    import inspect as _inspect

    kind = kernel_kind(obj)
    try:
        if kind == "prim_func":
            return "pf:" + str(tilelang().tvm.ir.structural_hash(obj))
        if kind == "compiled":
            return "jk:" + str(tilelang().tvm.ir.structural_hash(obj.prim_func))
        target = getattr(obj, "func", obj)
        target = getattr(target, "orig_func", None) or getattr(target, "__wrapped__", None) or target
        digest = hashlib.sha256(_inspect.getsource(target).encode())
        # The source is not enough: defaults (block=BLOCK), closure cells and globals the
        # function or its nested kernels read (BK from an earlier cell) shape the kernel too.
        digest.update(_function_values(target, set()).encode())
        return "src:" + digest.hexdigest()
    except Exception:
        return f"id:{id(obj)}"  # unknown: never a false cache hit across objects


def _plain_value(value: Any, depth: int = 0) -> str | None:
    """A stable text for values that can shape a kernel (numbers, strings, dtypes, tuples of
    them); None for anything else (modules, tensors, objects with an address in their repr)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list, frozenset)) and depth < 3:
        items = [_plain_value(v, depth + 1) for v in value]
        known = [i for i in items if i is not None]
        return f"{type(value).__name__}({','.join(known)})" if len(known) == len(items) else None
    module = type(value).__module__ or ""
    if module.split(".")[0] in ("tvm", "tilelang", "torch", "numpy") and (
            "dtype" in type(value).__name__.lower() or type(value).__name__ == "DataType"):
        return f"dtype:{value!s}"
    return None


def _function_values(fn: Any, seen: set[int]) -> str:
    """Defaults, keyword defaults, closure values and referenced globals of ``fn`` and of the
    functions nested in it (``co_consts``), and of plain functions it calls from the notebook."""
    import types

    if not isinstance(fn, types.FunctionType) or id(fn) in seen:
        return ""
    seen.add(id(fn))
    parts: list[str] = []
    for value in fn.__defaults__ or ():
        parts.append(f"d={_plain_value(value)}")
    for key, value in sorted((fn.__kwdefaults__ or {}).items()):
        parts.append(f"kw:{key}={_plain_value(value)}")
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            parts.append(f"c:{name}={_plain_value(cell.cell_contents)}")
        except ValueError:  # an empty cell
            parts.append(f"c:{name}=<empty>")
    codes = [fn.__code__]
    names: list[str] = []
    while codes:
        code = codes.pop()
        names += code.co_names
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    for name in sorted(set(names)):
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        text = _plain_value(value)
        if text is not None:
            parts.append(f"g:{name}={text}")
        elif isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
            parts.append(f"f:{name}={_function_values(value, seen)}")  # a helper from the notebook
    return "\n".join(parts)


def script_text(prim_func: Any) -> str:
    """The TVMScript of the kernel: the content its cache key is computed from."""
    return prim_func.script(show_meta=True)
