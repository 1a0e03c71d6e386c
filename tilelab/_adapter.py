"""The one module that touches TileLang internals.

Everything tilelab knows about TileLang 0.1.15's private layout lives here: how to lower a kernel
without nvcc or a GPU, where the launcher of each execution backend is generated, which IR
attributes hold the TMA descriptors, launch configuration, L2 windows and layouts, and how the
JIT front ends are unwrapped. An upgrade of TileLang should touch this file only, which is why it is
long (about 2,000 lines in sections: resolution, errors, lowering, launchers, IR readers, compile
and caches, passes) rather than split across modules that would each reach into TileLang.

Functions return plain Python values or tilelab models; no TVM object escapes this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from .cuda_facts import tma_enum_name as _enum
from ._errors import KernelFactoryError, LoweringError, NotAKernelError, PassConfigError
from ._model import (
    Argument,
    DeviceKernel,
    L2Window,
    LauncherSource,
    Layout,
    TmaDescriptor,
    WgmmaInstruction,
    WgmmaOperand,
)

# --------------------------------------------------------------------------------------------
# Import and environment
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def tilelang():  # -> module
    """Import TileLang quietly (its compile banner is on by default and floods notebooks)."""
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    import tilelang as _tl

    return _tl


def tilelang_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilelang")
    except Exception:  # pragma: no cover - only when metadata is missing
        return str(getattr(tilelang(), "__version__", "unknown"))


@functools.lru_cache(maxsize=None)
def local_gpu_arch() -> str | None:
    """The local GPU's arch as a TileLang target name ("sm_90a" on Hopper), or None."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
    except Exception:
        return None
    suffix = "a" if (major, minor) in ((9, 0), (10, 0), (10, 3)) else ""
    return f"sm_{major}{minor}{suffix}"


def has_gpu() -> bool:
    return local_gpu_arch() is not None


def normalize_pass_configs(pass_configs: dict[str, Any] | None) -> dict[str, Any]:
    """TileLang's own normalisation (one default comes from an environment variable)."""
    from tilelang.transform.pass_config import normalize_pass_configs as _normalize

    tilelang()
    return dict(_normalize(dict(pass_configs or {})))


def known_pass_config_keys() -> list[str]:
    tilelang()
    from tilelang.transform.pass_config import PassConfigKey

    return sorted(str(k.value) for k in PassConfigKey)


_CONFIG_TYPES = {"ir.IntImm": "an integer or a bool (e.g. True)", "ir.FloatImm": "a number (e.g. 0.5)",
                 "str": "a string", "ffi.String": "a string", "ffi.Array": "a list (e.g. [\"-O3\"])"}


def check_pass_configs(pass_configs: dict[str, Any], where: str = "pass config") -> None:
    """Refuse, naming the key, a pass config TileLang does not register or a value of a type it
    does not take (TVM itself fails later, inside lowering, with a message about the kernel)."""
    import difflib

    if not pass_configs:
        return
    tl = tilelang()
    registered = tl.tvm.ir.transform.PassContext.list_configs()
    known = sorted(str(k) for k in registered)
    for key, value in pass_configs.items():
        if not isinstance(key, str) or key not in registered:
            near = difflib.get_close_matches(str(key), known, n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(near)}?" if near else ""
            raise PassConfigError(
                f"{where} {key!r} is not a pass config TileLang {tilelang_version()} knows.{hint} "
                f"Valid keys: {', '.join(k for k in known if k.startswith('tl.'))} (and TVM's tirx.* keys)")
        try:
            tl.transform.PassContext(opt_level=3, config={key: value})
        except Exception as err:
            wanted = str(registered[key].get("type", "")) if hasattr(registered[key], "get") else ""
            expected = _CONFIG_TYPES.get(wanted, wanted or "another type")
            summary, _ = explain_error(err)
            raise PassConfigError(
                f"{where} {key}={value!r} is refused by TileLang: it takes {expected}, not "
                f"{type(value).__name__} ({summary}). Change the value of {key}") from err


# --------------------------------------------------------------------------------------------
# TileLang's disk cache entry of a compiled kernel: how a kernel compiled on one machine (a CPU
# worker of a sweep) reaches another (a GPU worker) without compiling again there.
# --------------------------------------------------------------------------------------------


def kernel_cache_entry(compiled: Any) -> tuple[str, dict[str, bytes]] | None:
    """(key, {file name: bytes}) of the disk cache entry TileLang wrote or read for ``compiled``;
    None when the kernel has none (TileLang's cache is disabled)."""
    path = getattr(compiled, "_tilelang_cache_path", None)
    if not path or not os.path.isdir(path):
        return None
    files = {}
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                files[entry.name] = f.read()
    return os.path.basename(path), files


def install_kernel_cache_entry(entry: tuple[str, dict[str, bytes]]) -> bool:
    """Write a cache entry from :func:`kernel_cache_entry` into this machine's TileLang cache, so
    the next ``tilelang.compile`` of the same kernel and options loads it. Returns False when the
    entry is already there (the same machine, or an earlier task). TileLang verifies the entry's
    manifest when it loads it."""
    import shutil
    import tempfile

    from tilelang.cache.kernel_cache import KernelCache

    key, files = entry
    if not re.fullmatch(r"[0-9A-Za-z_.-]+", key) or any(os.sep in name or name.startswith(".") for name in files):
        raise ValueError(f"not a TileLang cache entry: key {key!r}, files {sorted(files)}")
    root = KernelCache._get_cache_root()
    dest = os.path.join(root, key)
    if os.path.isdir(dest):
        return False
    os.makedirs(root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=root)
    try:
        for name, data in files.items():
            with open(os.path.join(staging, name), "wb") as f:
                f.write(data)
        os.rename(staging, dest)  # atomic: a reader sees no entry or a whole one
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not os.path.isdir(dest):
            raise
        return False
    return True


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


# --------------------------------------------------------------------------------------------
# Kernel objects
# --------------------------------------------------------------------------------------------


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
    kwargs = dict(kwargs or {})
    kind = kernel_kind(obj)
    if kind == "prim_func":
        if args or kwargs:
            raise NotAKernelError(
                "this is a T.prim_func, already specialised: it takes no arguments to inspect. "
                "Pass the factory or @tilelang.jit function that builds it if you want to vary them."
            )
        name = str(obj.attrs["global_symbol"]) if obj.attrs and "global_symbol" in obj.attrs else "kernel"
        return KernelSource(obj, name, kind)
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
        return None if any(i is None for i in items) else f"{type(value).__name__}({','.join(items)})"
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
    codes, names = [fn.__code__], []
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


# --------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------


@dataclass
class Lowered:
    device_source: str
    host_mod: Any
    device_mod: Any
    layout_mod: Any | None
    launchers: dict[str, LauncherSource]
    prim_func: Any
    # Backends whose launcher generation raised: the failure may not repeat (not cacheable).
    transient_failures: tuple[str, ...] = ()
    family: str = "cuda"
    # Per-block limits TileLang's target declares (Metal's threadgroup memory and threads).
    limits: dict[str, int] = field(default_factory=dict)

    @functools.cached_property
    def host_order(self) -> tuple[dict[str, int], dict[str, int]]:
        """Where things first appear in the host function, in statement order (TVMScript's order,
        without printing it: a large kernel's host prints in tens of ms): each variable bound to a
        ``tvm_stack_alloca`` (a TMA descriptor's argument stack), and each string constant (the
        names of the device kernels it launches)."""
        tvm = tilelang().tvm
        stacks: dict[str, int] = {}
        strings: dict[str, int] = {}
        count = [0]
        # the statement binding a variable: Bind in this TVM ("A_desc = T.tvm_stack_alloca(...)")
        binds = tuple(getattr(tvm.tirx, n) for n in ("Bind", "LetStmt") if hasattr(tvm.tirx, n))

        def visit(node: Any) -> bool:
            count[0] += 1
            if isinstance(node, binds) and isinstance(getattr(node, "value", None), tvm.tirx.Call) and \
                    getattr(node.value.op, "name", "").endswith("tvm_stack_alloca"):
                stacks.setdefault(node.var.name, count[0])
            elif isinstance(node, tvm.tirx.StringImm):
                strings.setdefault(node.value, count[0])
            return True  # visit the children too

        tvm.tirx.stmt_functor.pre_order_visit(_host_func(self.host_mod)[1].body, visit)
        return stacks, strings


def _builder_line(err: BaseException) -> tuple[str, int, str] | None:
    """The kernel line TileLang's eager builder was elaborating when ``err`` was raised.

    The builder's generated closure keeps the builder in a local named ``__tb`` and records the
    user's file and line before each statement (``__tb.set_fileline``).
    """
    import linecache

    found = None
    tb = err.__traceback__
    while tb is not None:
        builder = tb.tb_frame.f_locals.get("__tb")
        if builder is not None and getattr(builder, "current_line", None):
            found = (str(builder.current_file), int(builder.current_line))
        tb = tb.tb_next
    if found is None:
        return None
    return found[0], found[1], linecache.getline(found[0], found[1]).rstrip("\n")


def _from_tilelang(err: BaseException) -> bool:
    tb = err.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/tilelang/" in filename or "/tvm/" in filename or "tvm_ffi" in filename:
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def tilelang_errors(kernel: str | None = None, stage: str = "elaboration"):
    """Run user code that builds or lowers a kernel: TileLang's log records are kept out of the
    user's stderr (folded into the error's trace), and a failure raised inside TileLang becomes
    a LoweringError that names the kernel line. Other errors pass through unchanged.
    """
    import io
    import logging

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger("tilelang")
    saved = [(h, h.level) for h in logger.handlers]
    for h, _ in saved:
        h.setLevel(logging.CRITICAL + 10)
    logger.addHandler(handler)
    try:
        yield buffer
    except LoweringError:
        raise
    except Exception as err:
        if not _from_tilelang(err):
            raise
        error = _lowering_error(err, kernel, stage)
        error.trace = buffer.getvalue() + error.trace
        raise error from err
    finally:
        logger.removeHandler(handler)
        for h, level in saved:
            h.setLevel(level)


# TVM appends to a message a pointer into the user's source and an excerpt of it:
#   --> /path/kernel.py:17:1
#      |
#   17 |     l_i = T.alloc_fragment((block_m,), "float32")
#      |     ^
_SOURCE_POINTER = re.compile(r"^\s*-->\s*(.+?):(\d+)(?::\d+)?\s*$")
_SNIPPET_LINE = re.compile(r"^\s*(\d+\s*)?\|")
_SUMMARY_LIMIT = 800


def explain_error(err: BaseException) -> tuple[str, tuple[str, int, str] | None]:
    """The sentence that explains ``err`` and the user's source line TVM points at, if any.

    The sentence is the message without TVM's source excerpt: for a failed check, from
    "Check failed:" on (the condition, its operands and the reason); otherwise the whole message,
    its lines joined, so that a detail on a line of its own (a shape such as "(32, 16)") stays
    with the sentence it belongs to.
    """
    import linecache

    lines = str(err).strip().splitlines()
    body: list[str] = []
    pointer = None
    for line in lines:
        match = _SOURCE_POINTER.match(line)
        if match:
            filename, lineno = match.group(1), int(match.group(2))
            pointer = (filename, lineno, linecache.getline(filename, lineno).rstrip("\n"))
            break
        if _SNIPPET_LINE.match(line):
            continue
        body.append(line.strip())
    body = [line for line in body if line]
    # Older TVM messages carry a C++ backtrace before the sentence; keep what follows it.
    for index in range(len(body) - 1, -1, -1):
        if re.match(r"^\w*(Error|Exception):\s", body[index]) and index > 0:
            body = body[index:]
            break
    check = next((i for i, line in enumerate(body) if "Check failed" in line), None)
    if check is not None:
        body = body[check:]
        body[0] = body[0][body[0].index("Check failed"):]
    summary = " ".join(body) or type(err).__name__
    summary = re.sub(r"^\w*(Error|Exception):\s*", "", summary)
    if len(summary) > _SUMMARY_LIMIT:
        summary = summary[:_SUMMARY_LIMIT].rstrip() + " ..."
    return summary, pointer


def _is_user_file(filename: str) -> bool:
    """Whether a traceback frame's file is the user's own Python code: not TileLang, TVM, tilelab,
    an installed package, the standard library, or a C++/Cython frame TVM's FFI adds."""
    import sysconfig

    if "site-packages" in filename or "/tilelang/" in filename or "/tvm/" in filename or "/tilelab/" in filename:
        return False
    if filename.startswith("<unknown") or filename.endswith((".cc", ".h", ".cpp", ".pxi", ".pyx")):
        return False
    stdlib = sysconfig.get_paths().get("stdlib")
    return not (stdlib and filename.startswith(stdlib))


def _user_frame(tb: Any) -> tuple[str, int, str] | None:
    """The innermost traceback frame in the user's own Python code."""
    for frame in reversed(traceback.extract_tb(tb)):
        if _is_user_file(frame.filename or ""):
            return (frame.filename, frame.lineno or 0, frame.line or "")
    return None


def _raised_in_user_code(err: BaseException) -> bool:
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and _is_user_file(frames[-1].filename or "")


def _lowering_error(err: BaseException, kernel: str | None, stage: str = "lowering", *, func: Any = None,
                    pass_name: str | None = None, target_family: str | None = None) -> LoweringError:
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    summary, pointer = explain_error(err)
    kernel_line = _builder_line(err) or pointer or _user_frame(err.__traceback__)
    if isinstance(err, NameError):  # the kernel's Python names something undefined: not TileLang's failure
        error = LoweringError(
            f"Python {type(err).__name__} in the kernel's code: {err}",
            kernel=kernel, kernel_line=kernel_line, trace=trace, python_error=(type(err).__name__, str(err)),
        )
        return diagnosed(error, func=func, pass_name=pass_name or "elaboration", target_family=target_family)
    error = LoweringError(
        f"TileLang {stage} failed: {summary}",
        kernel=kernel, kernel_line=kernel_line, trace=trace,
    )
    return diagnosed(error, func=func, pass_name=pass_name or ("elaboration" if stage == "elaboration" else None),
                     target_family=target_family)


def diagnosed(error: LoweringError, *, func: Any = None, pass_name: str | None = None,
              target_family: str | None = None) -> LoweringError:
    """Give ``error`` tilelab's diagnosis (:func:`tilelab._doctor.diagnose`), with what the kernel
    ``func`` tells (its buffers' names, its source lines to place a tile op TileLang named no line
    for) and the ``pass_name`` a pass instrument saw fail. Keeps what an earlier diagnosis knew."""
    from . import _doctor

    previous = error.diagnosis
    buffers: tuple[str, ...] = tuple(getattr(previous, "buffers", ()) or ())
    source_file, source_lines = "", []
    if func is not None:
        names, source_file, source_lines = _kernel_context(func)
        buffers = tuple(names) or buffers
    message = error.summary.split(" failed: ", 1)[-1]
    if error.kernel_line is not None and error.kernel_line[0] == "<string>":
        error.kernel_line = None  # a pointer into code TileLang generated and exec'd, not a line of the kernel
    sites = _tile_sites(func) if func is not None else ()
    try:
        diagnosis = _doctor.diagnose(
            message, error.trace, pass_name=pass_name or getattr(previous, "pass_name", None),
            target_family=target_family, buffers=buffers, line=error.kernel_line, source_lines=source_lines,
            sites=sites)
    except Exception:  # the diagnosis never hides the failure it explains
        return error
    if diagnosis.line is not None and source_file and (error.kernel_line is None or diagnosis.line != error.kernel_line):
        error.kernel_line = (source_file, diagnosis.line[1], diagnosis.line[2])
        diagnosis = dataclasses.replace(diagnosis, line=error.kernel_line)
    error.diagnosis = diagnosis
    return error


def _kernel_context(func: Any) -> tuple[list[str], str, list[tuple[int, str]]]:
    """A prim_func's buffer names (arguments, then allocations), its source file and its
    numbered source lines (from the def line to the end of its body), where the builder kept them."""
    import linecache

    names: list[str] = []
    try:
        names = [b.name for b in func.buffer_map.values()]
        tvm = tilelang().tvm

        def visit(node: Any) -> None:
            if isinstance(node, tvm.tirx.SBlock):
                names.extend(b.name for b in node.alloc_buffers)

        tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    except Exception:  # a kernel the helpers cannot walk: the names found so far
        pass
    filename, lines = "", []
    try:
        span = func.span
        filename = str(span.source_name.name) if span is not None else ""
        start = int(span.line) if span is not None else 0
    except Exception:
        filename, start = "", 0
    if filename and start > 0:
        first = linecache.getline(filename, start)
        indent = len(first) - len(first.lstrip())
        number = start
        while True:
            text = linecache.getline(filename, number)
            if not text or (number > start and text.strip() and len(text) - len(text.lstrip()) <= indent
                            and not text.lstrip().startswith((")", "]"))):  # a signature's closing line goes on
                break
            lines.append((number, text.rstrip("\n")))
            number += 1
    return names, filename, lines


def _tile_sites(func: Any) -> tuple[Any, ...]:
    """The kernel's tile operations in program order, for the doctor to place a failure on a line:
    each ``T.*`` call (and any other intrinsic call statement), ``T.Parallel`` and ``T.Pipelined``
    loop, with the source line TileLang's builder stamped on it and the buffers it touches
    (name, dtype, scope, shape); () where the kernel cannot be walked. An operation a library
    macro emitted (its line is in the library's file) is placed on the kernel's line that calls
    it: the call naming the operation between the kernel statements before and after it."""
    import linecache

    from . import _doctor

    try:
        tvm = tilelang().tvm
        from tilelang.ir import get_stmt_span
    except Exception:
        return ()

    def buffers_in(node: Any) -> tuple[tuple[str, str, str, str], ...]:
        found: dict[str, tuple[str, str, str, str]] = {}

        def visit(n: Any) -> None:
            buffer = getattr(n, "buffer", None) if isinstance(n, (tvm.tirx.BufferLoad, tvm.tirx.BufferStore)) else None
            if buffer is not None and buffer.name not in found:
                found[buffer.name] = (buffer.name, str(buffer.dtype), str(buffer.scope()),
                                      "(" + ", ".join(str(x) for x in buffer.shape) + ")")

        tvm.tirx.stmt_functor.post_order_visit(node, visit)
        return tuple(found.values())

    try:
        kernel_file = str(func.span.source_name.name) if func.span is not None else ""
    except Exception:
        kernel_file = ""
    spans: list[tuple[str, int]] = []  # every statement's (file, line), in program order
    found: list[tuple[int, str, str, int, Any]] = []  # (index in spans, op, file, line, node)

    def visit(node: Any) -> bool:
        if not isinstance(node, tvm.tirx.Stmt):
            return True
        span = get_stmt_span(node)
        if span is None or not int(span.line):
            return True
        spans.append((str(span.source_name.name), int(span.line)))
        op = None
        if isinstance(node, tvm.tirx.Evaluate) and isinstance(node.value, tvm.tirx.Call):
            name = str(getattr(node.value.op, "name", ""))
            op = "T." + name.split(".", 2)[2] if name.startswith("tl.tileop.") else name or None
        elif isinstance(node, tvm.tirx.For):
            if "num_stages" in node.annotations:
                op = "T.Pipelined"
            elif int(node.kind) == int(tvm.tirx.ForKind.PARALLEL):
                op = "T.Parallel"
        if op is not None:
            found.append((len(spans) - 1, op, spans[-1][0], spans[-1][1], node))
        return True

    try:
        tvm.tirx.stmt_functor.pre_order_visit(func.body, visit)
        sites = []
        for index, op, filename, line, node in found:
            if kernel_file and filename != kernel_file:
                filename, line = kernel_file, _calling_line(op, kernel_file, spans, index)
                if not line:
                    continue
            body = node.value if isinstance(node, tvm.tirx.Evaluate) else node.body
            sites.append(_doctor.TileSite(op, line, filename, buffers_in(body),
                                          linecache.getline(filename, line).rstrip("\n")))
    except Exception:  # a kernel the helpers cannot walk: no sites
        return ()
    return tuple(sites)


def _calling_line(op: str, kernel_file: str, spans: list[tuple[str, int]], index: int) -> int:
    """The line of ``kernel_file`` that called the library macro whose statement ``spans[index]``
    is: between the kernel's statements before and after it, the call whose name is the op's
    (``.mfma(`` for ``tl.tvm_mfma``), else the first call there; 0 when there is none."""
    import linecache

    before = next((line for f, line in reversed(spans[:index]) if f == kernel_file), 0)
    after = min((line for f, line in spans[index + 1:] if f == kernel_file and line > before), default=before + 40)
    word = re.sub(r"^(tvm|ptx|tl)_", "", op.rsplit(".", 1)[-1])
    calls = [n for n in range(before + 1, after)
             if re.search(r"\w\s*\(", linecache.getline(kernel_file, n)) and not
             linecache.getline(kernel_file, n).lstrip().startswith("#")]
    named = [n for n in calls if re.search(rf"\b{re.escape(word)}\s*\(", linecache.getline(kernel_file, n))]
    return (named or calls or [0])[0]


class _PassTracker:
    """Pass instrument knowing which passes are running: after an exception, the innermost one
    that never finished is the pass that failed."""

    def __init__(self) -> None:
        self.running: list[str] = []

    def build(self):
        tvm = tilelang().tvm
        outer = self

        @tvm.instrument.pass_instrument
        class Track:
            def run_before_pass(self, mod, info):
                outer.running.append(str(info.name))

            def run_after_pass(self, mod, info):
                if outer.running and outer.running[-1] == str(info.name):
                    outer.running.pop()

        return Track()

    @property
    def failing(self) -> str | None:
        return self.running[-1] if self.running else None


class _CaptureLayouts:
    """Pass instrument keeping the module right after ``tl.LayoutInference``."""

    def __init__(self) -> None:
        self.module = None

    def build(self):
        tvm = tilelang().tvm
        outer = self

        @tvm.instrument.pass_instrument
        class Capture:
            def run_after_pass(self, mod, info):
                if info.name == "tl.LayoutInference":
                    outer.module = mod

        return Capture()


def lower(source: KernelSource, target: Any, *, out_idx: list[int] | None,
          pass_configs: dict[str, Any], backends: tuple[str, ...]) -> Lowered:
    """Lower once for the device code, IR and the launchers of ``backends`` (cutedsl once more
    only where a CuTeDSL-only lowering rule applies: :func:`cutedsl_shares_lowering`).

    ``target`` is a :class:`tilelab.targets.Target` (or an arch name, read as one). Nothing here
    compiles device code or links host code, so no nvcc, hipcc, Metal toolchain, libcuda or GPU is
    needed. Each family's launchers come from TileLang's own wrappers: the ``cython`` launcher is
    ``TLWrapper`` (``TLCUDASourceWrapper``, ``TLHIPSourceWrapper``, ``TLCPUSourceWrapper`` or
    ``TLMetalSourceWrapper`` by target kind), ``tvm_ffi`` is TVM's host C codegen.
    """
    from .targets import parse_target

    target = parse_target(target)
    tl = tilelang()
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile, lower_to_host_device_ir
    from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs

    func = source.prim_func
    name = source.name
    capture = _CaptureLayouts()
    tracker = _PassTracker()
    # The execution backend only decides host codegen; lowering is the same for each of a family's.
    lowering_backend = "tvm_ffi" if target.family in ("cuda", "hip", "metal") else "cython"
    try:
        with tilelang_errors(name, stage="lowering" if target.family == "cuda" else f"lowering for {target.name}"):
            context = create_backend_context(target.tilelang_target(), None, lowering_backend)
            prepared = func
            if lowering_backend == "tvm_ffi":
                # Lower once, the variant tvm_ffi compiles: out_idx only stamps attributes that its
                # host ABI reads; the device code and the cython/nvrtc launchers generated from this
                # lowering are byte-identical to those of the unprepared function (a test holds it).
                prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
                    func, out_idx,
                    supports_callee_allocated_outputs=context.execution_backend.supports_callee_allocated_outputs)
            with tl.transform.PassContext(opt_level=3, config=pass_configs,
                                          instruments=[capture.build(), tracker.build()]), context.target:
                host_mod, device_mod, _, _, _ = lower_to_host_device_ir(prepared, context)
                device_source = device_codegen_without_compile(device_mod, context).inspect_source()
    except LoweringError as err:
        diagnosed(err, func=func, pass_name=tracker.failing, target_family=target.family)
        raise _for_target(err, target) from err
    except Exception as err:
        raise _for_target(_lowering_error(err, name, func=func, pass_name=tracker.failing,
                                          target_family=target.family), target) from err

    with _host_printed_once(host_mod):
        return _launchers(func, target, context, backends, pass_configs, host_mod, device_mod, device_source,
                          capture.module)


_PRINT_ONCE_LOCK = threading.RLock()


@contextlib.contextmanager
def _host_printed_once(host_mod: Any):
    """Print each host function of ``host_mod`` at most once while the launchers are generated.

    Each of TileLang's source wrappers (cython, nvrtc, cutedsl) prints the whole host function
    to find the kernels' call order (``TLCUDASourceWrapper.parse_source_information``:
    ``str(func)``); for a kernel with fifty buffers that is 150 KB of TVMScript and about 22 ms a
    time. Within this block the text printed first is answered again, for those functions only
    (TVM IR is immutable, and the functions are held so their handles are not reused).
    """
    prim_func = tilelang().tvm.tirx.PrimFunc
    held = list(host_mod.functions.values())
    printed: dict[int, str] = {}
    mine = {f.__chandle__() for f in held}
    # One block at a time, process-wide: two threads' blocks that did not end in reverse order
    # would leave a stale __str__ installed (the class attribute is shared).
    with _PRINT_ONCE_LOCK:
        had = "__str__" in prim_func.__dict__
        previous = prim_func.__dict__.get("__str__")

        def __str__(self: Any) -> str:
            handle = self.__chandle__()
            if handle not in mine:
                return previous(self) if previous is not None else repr(self)
            if handle not in printed:
                printed[handle] = previous(self) if previous is not None else repr(self)
            return printed[handle]

        prim_func.__str__ = __str__
        try:
            yield
        finally:
            if had:
                prim_func.__str__ = previous
            else:
                del prim_func.__str__
            del held


def _launchers(func: Any, target: Any, context: Any, backends: tuple[str, ...], pass_configs: dict[str, Any],
               host_mod: Any, device_mod: Any, device_source: str, layouts_module: Any) -> Lowered:
    """Every launcher of ``backends`` from one lowering (see :func:`lower`)."""
    tl = tilelang()
    tvm = tl.tvm
    from tilelang.engine.lower import host_codegen

    launchers: dict[str, LauncherSource] = {}
    decided: set[str] = set()  # absences that are TileLang's design, not a passing failure
    scheduled = tvm.IRModule({str(func.attrs["global_symbol"]): func})
    not_for_target = {b: f"TileLang has no {b} launcher for {target.name} ({target.family}); its launchers there: "
                      + ", ".join(target.backends) for b in backends if b not in target.backends}
    launchers.update({b: LauncherSource(b, None, why) for b, why in not_for_target.items()})
    backends = tuple(b for b in backends if b not in not_for_target)
    refused = {b: why for b in backends if (why := _backend_refuses(b, context))}
    launchers.update({b: LauncherSource(b, None, why) for b, why in refused.items()})
    backends = tuple(b for b in backends if b not in refused)

    if "tvm_ffi" in backends and target.family == "cpu":
        # TileLang 0.1.15's tvm_ffi backend refuses C-target kernels ("Device codegen 'c' for target
        # 'c' does not support lowering with compilation") and its host codegen fails on them; the
        # attempt costs most of an inspection, so the known answer is given without it.
        decided.add("tvm_ffi")
        launchers["tvm_ffi"] = LauncherSource("tvm_ffi", None, (
            "TileLang 0.1.15's tvm_ffi backend cannot build C-target kernels (tilelang.compile refuses them); "
            "the cython launcher runs them"))
        backends = tuple(b for b in backends if b != "tvm_ffi")

    if "tvm_ffi" in backends:
        try:
            with tl.transform.PassContext(opt_level=3, config=pass_configs), context.target:
                text = host_codegen(host_mod, context).inspect_source()
            launchers["tvm_ffi"] = LauncherSource("tvm_ffi", str(text), language="c")
        except Exception as err:
            launchers["tvm_ffi"] = LauncherSource("tvm_ffi", None, _reason(err))

    if "cython" in backends:
        try:
            from tilelang.jit.adapter.wrapper import TLWrapper

            wrapper = TLWrapper(context.target)
            wrapper.assign_optimized_module(scheduled)
            wrapper.assign_pass_configs(pass_configs)
            wrapper.assign_host_module(host_mod)
            wrapper.assign_device_module(device_mod)
            wrapped = str(wrapper.wrap(device_source))
            # TLHIP/TLCPU/TLMetal wrappers return the device source followed by the host code.
            text = wrapped[len(device_source):].lstrip("\n") if wrapped.startswith(device_source) and target.family != "cuda" else wrapped
            language = {"cuda": "c++", "hip": "c++", "cpu": "c"}.get(target.family, "c++")
            if text.strip():
                launchers["cython"] = LauncherSource("cython", text, language=language)
            else:
                decided.add("cython")
                launchers["cython"] = LauncherSource("cython", None, (
                    f"TileLang's {target.family} source wrapper adds no host code: its output is the device "
                    "source unchanged (TLMetalSourceWrapper), so there is no launcher to show"))
        except Exception as err:
            launchers["cython"] = LauncherSource("cython", None, _reason(err))

    if "torch" in backends:  # Metal: tilelang/jit/adapter/torch/metal.py, no generated host code
        decided.add("torch")
        launchers["torch"] = LauncherSource("torch", None, (
            "TileLang's torch backend generates no host code for Metal: it compiles the device source with "
            "torch.mps.compile_shader and launches each kernel with threads = grid x threadgroup size and "
            "group_size = threadgroup size (see the launch configuration)"))

    if "nvrtc" in backends:
        try:
            from tilelang.jit.adapter.nvrtc.wrapper import TLNVRTCSourceWrapper

            text = TLNVRTCSourceWrapper(
                scheduled_ir_module=scheduled, source=device_source, target=context.target,
                device_mod=device_mod, host_mod=host_mod, pass_configs=pass_configs,
            ).host_func
            launchers["nvrtc"] = LauncherSource("nvrtc", str(text), language="python")
        except Exception as err:
            launchers["nvrtc"] = LauncherSource("nvrtc", None, _reason(err))

    if "cutedsl" in backends:
        # The cutedsl lowering is the CUDA one unless a CuTeDSL-only rule applies (see
        # cutedsl_shares_lowering): then only its device codegen runs, not the whole pipeline again.
        shared = (host_mod, device_mod) if cutedsl_shares_lowering(host_mod, device_mod, target.name, pass_configs) else None
        launchers["cutedsl"] = cutedsl_launcher(func, scheduled, target.name, pass_configs, lowered=shared)

    # Every absence not decided above came from an exception while generating the text.
    transient = tuple(b for b in backends if b in launchers and launchers[b].text is None and b not in decided)
    limits = {key: int(context.target.attrs[key]) for key in ("max_shared_memory_per_block", "max_threads_per_block")
              if key in context.target.attrs and target.family != "cuda"}
    return Lowered(device_source, host_mod, device_mod, layouts_module, launchers, func, transient, target.family,
                   limits)


# Operations TileLang lowers only for some targets, recognised in its error messages: the message
# fragment, then what to tell the user. Kept here because the messages are TileLang's.
_TARGET_OPERATIONS = (
    ("wgmma", "WGMMA (T.gemm on Hopper warpgroups)"),
    ("tma", "TMA copies"),
    ("warp_special", "warp specialization"),
    ("cluster", "thread-block clusters"),
    ("fragment", "register fragments (T.alloc_fragment)"),
    ("shared.dyn", "shared memory (T.alloc_shared)"),
    ("local_buf must be a fragment", "a T.gemm accumulator outside T.alloc_fragment"),
    ("Unsupported gemm combination", "this T.gemm operand combination"),
)


def _for_target(err: LoweringError, target: Any) -> LoweringError:
    """Say which target could not be lowered and, when TileLang's message names it, which operation;
    the diagnosis follows the new sentence (a cause that belongs to the target comes first)."""
    said = _said_for_target(err, target)
    if said is not err:
        said.diagnosis = err.diagnosis
        diagnosed(said, pass_name=err.pass_name, target_family=target.family)
    return said


def _said_for_target(err: LoweringError, target: Any) -> LoweringError:
    if target.family == "cuda":
        return err
    text = f"{err.summary}\n{err.trace}"
    if "Compilation Failed" in text:
        # TileLang lowered the kernel, but the host compiler rejects the C it generated
        first = re.search(r"error: (.+)", text)
        why = f" (first error: {first.group(1).strip()})" if first else ""
        return LoweringError(
            f"TileLang 0.1.15 lowered {err.kernel or 'the kernel'} for {target.name}, but the host C++ compiler "
            f"rejects the code it generated{why}. This is a limitation of TileLang's {target.name} code generator; "
            "on the CPU, float32 data avoids the fp16 vector conversions it cannot emit",
            kernel=err.kernel, kernel_line=None, trace=err.trace)
    ops = [what for needle, what in _TARGET_OPERATIONS if needle in text]
    summary = err.summary
    if not re.search(r"[A-Za-z]{3}", summary.split("failed:", 1)[-1]):
        # TVM's message ended with a source pointer ("|   ^"): keep the sentence that explains it.
        checks = re.findall(r"(?:Error|Fatal): (?:Check failed: .*?: )?(.+)", err.trace)
        if checks:
            summary = summary.split("failed:", 1)[0] + "failed: " + checks[-1].strip()
    why = f" (the kernel uses {ops[0]}, which TileLang 0.1.15 does not lower for {target.name} this way)" if ops else ""
    summary = f"{summary} -- TileLang cannot lower this kernel for {target.name} ({target.description}){why}"
    if target.family == "cpu":
        summary += ("; a CPU kernel keeps its tiles in T.alloc_local or global buffers and uses no GPU-only "
                    "operations (fragments, shared memory, TMA, WGMMA, warp specialization)")
    return LoweringError(summary, kernel=err.kernel, kernel_line=err.kernel_line, trace=err.trace)


def limit_notes(lowered: Lowered, kernels: list[DeviceKernel], target: Any) -> list[str]:
    """Kernels that ask for more than the per-block limits of the target: those TileLang's target
    declares, or for a CUDA arch the published ones (tilelab.cuda_facts: the opt-in maximum of
    dynamic shared memory per block, threads per block)."""
    from .cuda_facts import arch_limits

    notes = []
    smem = lowered.limits.get("max_shared_memory_per_block")
    threads = lowered.limits.get("max_threads_per_block")
    whose = f"TileLang's {target.name} target allows"
    if target.family == "cuda" and target.arch and not smem:
        try:
            facts = arch_limits(target.arch)
        except ValueError:  # an arch without published limits in tilelab: nothing to compare with
            facts = None
        if facts is not None:
            smem, threads = facts.max_shared_memory_per_block, threads or facts.max_threads_per_block
            whose = f"{target.arch} allows"
    for k in kernels:
        if smem and isinstance(k.dynamic_shared_memory_bytes, int) and k.dynamic_shared_memory_bytes > smem:
            notes.append(f"{k.name} asks for {k.dynamic_shared_memory_bytes} B of {target.shared_memory_name}; "
                         f"{whose} {smem} B per block: a launch would fail. "
                         "Use smaller tiles or fewer pipeline stages")
        if threads and isinstance(k.threads_per_block, int) and k.threads_per_block > threads:
            notes.append(f"{k.name} runs {k.threads_per_block} threads per block; {whose} {threads}: a launch "
                         "would fail")
    return notes


def _backend_refuses(backend: str, context: Any) -> str | None:
    """TileLang's own decision that an execution backend cannot target ``context.target`` (its
    ``ExecutionBackendSpec.supports_target``), as a reason; None where it can, or cannot tell."""
    target = context.target
    try:
        from tilelang.backend.module import get_backend

        module = get_backend("cutedsl" if backend == "cutedsl" else context.module.name)
        spec = next(s for s in module.execution_backends if s.name == backend)
        if spec.matches(target):
            return None
    except Exception:
        return None  # no decision: try to generate, and a failure then counts as transient
    return f"TileLang's {backend} backend does not support target {target.attrs.get('arch', target)}"


def _reason(err: BaseException) -> str:
    summary, _ = explain_error(err)
    return f"{type(err).__name__}: {summary}" if str(err).strip() else type(err).__name__


# TileLang 0.1.15's lowering rules that differ for a CuTeDSL target (its C++ checks of
# TargetIsCuTeDSL): 1D bulk copies (cp.async.bulk without a tensor map) are never chosen
# (cuda/op/copy_analysis.cc), st.bulk zero-fills of shared memory are not used on sm_100+
# (cuda/op/fill.cc), and tl.LowerLDGSTG is skipped (cuda/transform/lower_ldg_stg.cc, off unless
# these pass configs turn it on). Everything else lowers alike, target keys aside.
_LDG_STG_CONFIGS = ("tl.enable_lower_ldgstg", "tl.enable_lower_ldgstg_predicated")
_TMA_COPY_OPS = ("tl.tma_load", "tl.tma_store", "tl.tma_load_im2col")


def cutedsl_shares_lowering(host_mod: Any, device_mod: Any, arch: str, pass_configs: dict[str, Any]) -> bool:
    """Whether TileLang's cutedsl lowering of a kernel equals its CUDA lowering (``host_mod``,
    ``device_mod``): no rule that differs for CuTeDSL applied. A copy the CUDA lowering made a 1D
    bulk copy is a TMA call whose first argument is an address, not one of the host's tensor-map
    descriptors; on sm_100+ or with LDG/STG lowering on, the answer is no without looking further."""
    tvm = tilelang().tvm
    digits = re.match(r"sm_(\d+)", arch)
    if digits is None or int(digits.group(1)) >= 100:
        return False
    if any(pass_configs.get(key) for key in _LDG_STG_CONFIGS):
        return False
    descriptors: set[str] = set()
    for _, host in host_mod.functions.items():
        if host.attrs is not None and "tma_descriptor_args" in host.attrs:
            descriptors |= {var.name for var in host.attrs["tma_descriptor_args"].keys()}
    for _, func in _device_funcs(device_mod):
        for call in _calls(func, set(_TMA_COPY_OPS)):
            first = call.args[0] if len(call.args) else None
            if not isinstance(first, tvm.tirx.Var) or first.name not in descriptors:
                return False
    return True


def cutedsl_launcher(func: Any, scheduled: Any, arch: str, pass_configs: dict[str, Any], *,
                     lowered: tuple[Any, Any] | None = None) -> LauncherSource:
    """The CuTeDSL backend's Python host and C++ launcher, generated without CuTeDSL installed.

    ``create_backend_context`` refuses the cutedsl target when nvidia-cutlass-dsl is missing, so
    the context is assembled from the registered backend module directly. ``lowered`` (host and
    device modules of the CUDA lowering, where :func:`cutedsl_shares_lowering` says they are the
    cutedsl one) skips TileLang's lowering pipeline and runs only the CuTeDSL device codegen;
    without it, TileLang lowers ``func`` for the cutedsl target from the start.
    """
    tl = tilelang()
    tvm = tl.tvm
    try:
        from tilelang.backend.module import BackendContext, get_backend
        from tilelang.engine.lower import device_codegen_without_compile, lower_with_context
        from tilelang.jit.adapter.cutedsl.wrapper import TLCuTeDSLSourceWrapper

        module = get_backend("cutedsl")
        spec = next(s for s in module.execution_backends if s.name == "cutedsl")
        host = tvm.target.Target("c")
        target = tvm.target.Target({"kind": "cuda", "arch": arch, "keys": ["cuda", "gpu", "cutedsl"]}, host)
        context = BackendContext(module=module, target=target, target_host=host, execution_backend=spec)
        with tl.transform.PassContext(opt_level=3, config=pass_configs), context.target:
            if lowered is None:
                art = lower_with_context(func, context, enable_device_compile=False)
                host_mod, device_mod, kernel_source = art.host_mod, art.device_mod, art.kernel_source
            else:
                host_mod, device_mod = lowered
                kernel_source = device_codegen_without_compile(device_mod, context).inspect_source()
        wrapper = TLCuTeDSLSourceWrapper(
            scheduled_ir_module=scheduled, source=kernel_source, target=context.target,
            device_mod=device_mod, host_mod=host_mod, pass_configs=pass_configs,
        )
        host_func = str(wrapper.host_func)
        extra = []
        if getattr(wrapper, "launcher_cpp_code", None):
            extra.append(("launcher.cpp", str(wrapper.launcher_cpp_code)))
        extra.append(("device.py", str(kernel_source)))
        return LauncherSource("cutedsl", host_func, language="python", extra=tuple(extra))
    except Exception as err:
        return LauncherSource("cutedsl", None, f"CuTeDSL launcher cannot be generated for {arch}: {_reason(err)}")


# --------------------------------------------------------------------------------------------
# Reading the IR
# --------------------------------------------------------------------------------------------


def _dim(value: Any) -> int | str:
    """An int for constants; the expression's text for symbolic sizes (``m``, ``k * 2``)."""
    tvm = tilelang().tvm
    if isinstance(value, int):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value.value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value.value)  # type: ignore[return-value]
    try:
        simplified = tvm.arith.Analyzer().simplify(value)
        if isinstance(simplified, tvm.tirx.IntImm):
            return int(simplified.value)
        value = simplified
    except Exception:
        pass
    return _expr_text(value)


def _expr_text(expr: Any) -> str:
    text = str(expr)
    # TVMScript wraps some constants/casts: T.int64(2) -> 2, T.Cast("int64", m) -> m
    text = re.sub(r"T\.(?:u?int\d+|float\d+)\((-?\d+)\)", r"\1", text)
    text = re.sub(r'T\.Cast\("\w+", (\w+)\)', r"\1", text)
    return text


def _device_funcs(device_mod: Any) -> list[tuple[str, Any]]:
    return [(g.name_hint, f) for g, f in device_mod.functions.items()]


def _host_func(host_mod: Any) -> tuple[str, Any]:
    items = list(host_mod.functions.items())
    return items[0][0].name_hint, items[0][1]


def kernel_launches(lowered: Lowered) -> list[DeviceKernel]:
    host_name, host = _host_func(lowered.host_mod)
    _, launched = lowered.host_order
    result = []
    for name, func in _device_funcs(lowered.device_mod):
        attrs = func.attrs
        grid: list[int | str] = [1, 1, 1]
        block: list[int | str] = [1, 1, 1]
        if attrs is not None and "thread_extent" in attrs:
            for tag, extent in attrs["thread_extent"].items():
                tag = str(tag)
                axis = "xyz".index(tag[-1])
                if "threadIdx" in tag:
                    block[axis] = _dim(extent)
                elif "blockIdx" in tag:
                    grid[axis] = _dim(extent)
        smem = _dim(attrs["dyn_shared_memory_buf"]) if attrs is not None and "dyn_shared_memory_buf" in attrs else 0
        cluster = None
        if attrs is not None and "cluster_dims" in attrs:
            dims = [int(v) for v in attrs["cluster_dims"]]
            cluster = tuple((dims + [1, 1, 1])[:3])
        order = launched.get(name, -1)
        pdl_sync = bool(attrs is not None and "has_cuda_pdl_sync" in attrs)
        cooperative = bool(attrs is not None and "use_cooperative_groups" in attrs and bool(attrs["use_cooperative_groups"]))
        launch_params = [str(t) for t in attrs["tirx.kernel_launch_params"]] if (
            attrs is not None and "tirx.kernel_launch_params" in attrs) else []
        serialised = () if lowered.family != "cuda" else _programmatic_serialization(
            [b for b, item in lowered.launchers.items() if item.text is not None],
            pdl_sync=pdl_sync, cooperative=cooperative,
            clustered=cluster is not None and cluster != (1, 1, 1), launch_params=launch_params,
        )
        result.append((order if order >= 0 else 1 << 30, DeviceKernel(
            name=name,
            grid=tuple(grid),  # type: ignore[arg-type]
            block=tuple(block),  # type: ignore[arg-type]
            dynamic_shared_memory_bytes=smem,
            cluster_dims=cluster,  # type: ignore[arg-type]
            programmatic_dependent_launch=pdl_sync,
            cooperative=cooperative,
            programmatic_serialization_by=serialised,
        )))
    return [k for _, k in sorted(result, key=lambda item: item[0])]


def _programmatic_serialization(backends: list[str], *, pdl_sync: bool, cooperative: bool, clustered: bool,
                                launch_params: list[str]) -> tuple[str, ...]:
    """The backends whose TileLang 0.1.15 launcher sets the programmatic-stream-serialisation
    launch attribute for a kernel (it may then start before the previous kernel in the stream ends).

    * cython (``jit/adapter/wrapper.py``, ``KERNEL_LAUNCH_FUNC_CODE`` and the cluster variant):
      every ``cudaLaunchKernelEx``, whatever the kernel; only ``cudaLaunchCooperativeKernel`` sets none.
    * nvrtc (``nvrtc/wrapper.py``, ``PDL_SYNC_PY``): only kernels marked ``has_cuda_pdl_sync``.
    * cutedsl, C++ launcher (the default, ``TILELANG_CUTEDSL_HOST_LAUNCHER=cpp``): the cluster and
      PDL templates set it; plain and cooperative launches do not.
    * tvm_ffi (TVM's CUDA module): only when the kernel's ``tirx.kernel_launch_params`` carry
      TVM's tag ``tirx.use_programtic_dependent_launch`` (spelt so), which 0.1.15 never adds.
    """
    rules = {
        "tvm_ffi": "tirx.use_programtic_dependent_launch" in launch_params,
        "cython": not cooperative,
        "nvrtc": pdl_sync,
        "cutedsl": not cooperative and (clustered or pdl_sync),
    }
    return tuple(b for b in backends if rules.get(b, False))


def _device_param_names(lowered: Lowered) -> dict[str, str]:
    """descriptor/param name -> device kernel that takes it."""
    owner: dict[str, str] = {}
    for name, func in _device_funcs(lowered.device_mod):
        for param in func.params:
            owner.setdefault(param.name, name)
    return owner


def tma_descriptors(lowered: Lowered) -> list[TmaDescriptor]:
    """Decode ``tma_descriptor_args`` of the host function, in the order the host encodes them."""
    _, host = _host_func(lowered.host_mod)
    attrs = host.attrs
    if attrs is None or "tma_descriptor_args" not in attrs:
        return []
    buffer_of = {buf.data.name: buf.name for buf in lowered.prim_func.buffer_map.values()}
    owner = _device_param_names(lowered)
    stacks, _ = lowered.host_order
    found = []
    for desc_var, raw in attrs["tma_descriptor_args"].items():
        args = list(raw)
        call = getattr(args[0], "value", None)  # the packed function's name, a StringImm
        call = call if isinstance(call, str) else str(args[0])
        name = desc_var.name
        address = args[4]
        address_name = getattr(address, "name", None) or _expr_text(address)
        buffer = buffer_of.get(address_name, address_name)
        dtype = _enum("dtype", _dim(args[2]))
        rank = int(_dim(args[3]))
        rest = args[5:]

        def take(n: int) -> list[Any]:
            nonlocal rest
            head, rest = rest[:n], rest[n:]
            return [_dim(v) for v in head]

        if "im2col" in call:
            global_dim, global_stride, element_strides = take(rank), take(rank), take(rank)
            lower_corner, upper_corner = take(rank - 2), take(rank - 2)
            # IR order: pixelsPerColumn then channelsPerPixel (the driver call takes channels first).
            pixels, channels = take(1)[0], take(1)[0]
            interleave, swizzle, l2, oob = take(4)
            desc = TmaDescriptor(
                name=name, buffer=buffer, kind="im2col", dtype=dtype, rank=rank,
                global_dim=tuple(global_dim), global_stride_bytes=tuple(global_stride),
                element_strides=tuple(element_strides),
                lower_corner=tuple(int(v) for v in lower_corner), upper_corner=tuple(int(v) for v in upper_corner),
                pixels_per_column=pixels, channels_per_pixel=channels,
                interleave=_enum("interleave", interleave), swizzle=_enum("swizzle", swizzle),
                l2_promotion=_enum("l2_promotion", l2), oob_fill=_enum("oob_fill", oob),
                kernel=owner.get(name),
            )
        else:
            global_dim, global_stride, box, element_strides = take(rank), take(rank), take(rank), take(rank)
            interleave, swizzle, l2, oob = take(4)
            desc = TmaDescriptor(
                name=name, buffer=buffer, kind="tiled", dtype=dtype, rank=rank,
                global_dim=tuple(global_dim), global_stride_bytes=tuple(global_stride),
                box_dim=tuple(box), element_strides=tuple(element_strides),
                interleave=_enum("interleave", interleave), swizzle=_enum("swizzle", swizzle),
                l2_promotion=_enum("l2_promotion", l2), oob_fill=_enum("oob_fill", oob),
                kernel=owner.get(name),
            )
        found.append((stacks.get(name, 1 << 30), desc))
    return [d for _, d in sorted(found, key=lambda item: item[0])]


def _calls(func: Any, op_names: set[str]) -> list[Any]:
    tvm = tilelang().tvm
    out: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Call) and hasattr(node.op, "name") and node.op.name in op_names:
            out.append(node)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    return out


_WGMMA_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "tfloat32",
                 "e4m3": "float8_e4m3", "e5m2": "float8_e5m2", "s8": "int8", "u8": "uint8", "s32": "int32"}


def _object_identity(obj: Any) -> int:
    """The address of the TVM object behind ``obj``: two variables that share a name differ here."""
    handle = getattr(obj, "__chandle__", None)
    return int(handle()) if callable(handle) else id(obj)


def _pointer_buffer(pointer: Any) -> str | None:
    """The buffer a WGMMA descriptor's start address points into: ``tvm_access_ptr(type, data,
    ...)``, possibly shifted by ``handle_add_byte_offset`` (a later stage of a multi-versioned
    buffer, e.g. the second pipeline stage of a warp-specialised GEMM)."""
    tvm = tilelang().tvm
    while isinstance(pointer, tvm.tirx.Call) and getattr(pointer.op, "name", "") == "tirx.handle_add_byte_offset":
        pointer = pointer.args[0]
    if isinstance(pointer, tvm.tirx.Call) and len(pointer.args) > 1:
        return getattr(pointer.args[1], "name", None) or _expr_text(pointer.args[1])
    return None


def _descriptor_operand(pointer: Any, layout_type: Any, lbo: Any, sbo: Any) -> WgmmaOperand:
    return WgmmaOperand(_pointer_buffer(pointer), int(_dim(layout_type)), int(_dim(lbo)), int(_dim(sbo)), major="K")


def _wgmma_calls(func: Any) -> list[dict[str, Any]]:
    """Every wgmma call of ``func`` in program order, with the descriptors it reads.

    Descriptors are keyed by their variable itself, not by its name: TileLang names the
    descriptors of every ``T.gemm`` ``desc_a``/``desc_b``, so a kernel with two GEMMs (Q·Kᵀ then
    P·V) has two variables called ``desc_b``. Walking in program order, each wgmma reads the
    latest initialisation of the variable it names.
    """
    tvm = tilelang().tvm
    current: dict[int, WgmmaOperand] = {}
    found: list[dict[str, Any]] = []
    for call in _calls(func, {"tl.initialize_wgmma_descriptor", "tl.ptx_wgmma_ss", "tl.ptx_wgmma_rs"}):
        op = call.op.name
        args = list(call.args)
        if op == "tl.initialize_wgmma_descriptor":
            target, pointer, layout_type, lbo, sbo = args[:5]
            var = target.buffer.data if isinstance(target, tvm.tirx.BufferLoad) else target
            current[_object_identity(var)] = _descriptor_operand(pointer, layout_type, lbo, sbo)
            continue
        if op == "tl.ptx_wgmma_ss":
            a_k, b_k = bool(_dim(args[1])), bool(_dim(args[2]))
            dtypes = tuple(str(a.value) for a in args[3:6])
            a_var, b_var, variant = args[6], args[8], "ss"
        else:
            a_k, b_k = True, bool(_dim(args[1]))
            dtypes = tuple(str(a.value) for a in args[2:5])
            a_var, b_var, variant = None, args[7], "rs"
        found.append({
            "shape": str(args[0].value), "variant": variant, "dtypes": dtypes,
            "a_major": "K" if a_k else "MN", "b_major": "K" if b_k else "MN",
            "a": current.get(_object_identity(a_var)) if a_var is not None else None,
            "b": current.get(_object_identity(b_var)),
            "a_name": getattr(a_var, "name", None), "b_name": getattr(b_var, "name", None),
        })
    return found


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


def _same_buffer(ir_name: str | None, source_name: str) -> bool:
    """The code generator may suffix a buffer's name to keep it unique (``v_s`` -> ``v_s_1``)."""
    return ir_name is not None and re.fullmatch(re.escape(ir_name) + r"(?:_\d+)?", source_name) is not None


def _association_problems(ir_calls: list[dict[str, Any]], source_calls: list[dict[str, Any]] | None,
                          kernel: str) -> list[list[str]]:
    """For each IR wgmma call, the ways its descriptors disagree with the generated CUDA."""
    problems: list[list[str]] = [[] for _ in ir_calls]
    if source_calls is None:
        for found in problems:
            found.append(f"the generated CUDA has no kernel {kernel}: the descriptors could not be checked")
        return problems
    if len(source_calls) != len(ir_calls):
        for found in problems:
            found.append(f"{kernel} issues {len(ir_calls)} wgmma call(s) in the IR but {len(source_calls)} "
                         "in the generated CUDA: the descriptors could not be matched call by call")
        return problems
    for found, ir, src in zip(problems, ir_calls, source_calls):
        if ir["variant"] != src["variant"]:
            found.append(f"the IR issues wgmma_{ir['variant']} where the generated CUDA issues wgmma_{src['variant']}")
            continue
        for side in ("a", "b"):
            mine, theirs = ir[side], src[side]
            if mine is None and theirs is None:
                continue
            if mine is None:
                found.append(f"operand {side.upper()}: tilelab found no descriptor for {ir[side + '_name']}, "
                             f"the generated CUDA initialises {src[side + '_var']} over {theirs[0]}")
                continue
            if theirs is None:
                found.append(f"operand {side.upper()}: the generated CUDA initialises no descriptor "
                             f"{src[side + '_var']} before this wgmma, tilelab associated {mine.buffer}")
                continue
            buffer, layout, lbo, sbo = theirs
            if not _same_buffer(mine.buffer, buffer) or (mine.layout_type, mine.lbo, mine.sbo) != (layout, lbo, sbo):
                found.append(
                    f"operand {side.upper()}: tilelab associated {mine.buffer} <{mine.layout_type}, {mine.lbo}, "
                    f"{mine.sbo}> but the generated CUDA reads {src[side + '_var']} = {buffer} "
                    f"<{layout}, {lbo}, {sbo}>")
    return problems


def wgmma_instructions(lowered: Lowered) -> list[WgmmaInstruction]:
    """Distinct ``wgmma.mma_async`` forms with the descriptors their shared operands use, each
    association checked against the generated CUDA (a disagreement is one of its ``problems``)."""
    result: dict[str, WgmmaInstruction] = {}
    in_source = source_wgmma_calls(lowered.device_source or "")
    for kname, func in _device_funcs(lowered.device_mod):
        calls = _wgmma_calls(func)
        if not calls:
            continue
        checks = _association_problems(calls, in_source.get(kname), kname)
        for call, problems in zip(calls, checks):
            a_t, b_t, c_t = call["dtypes"]
            a_major, b_major = call["a_major"], call["b_major"]
            a_desc, b_desc = call["a"], call["b"]
            if a_desc is not None:
                a_desc = WgmmaOperand(a_desc.buffer, a_desc.layout_type, a_desc.lbo, a_desc.sbo, a_major)
            if b_desc is not None:
                b_desc = WgmmaOperand(b_desc.buffer, b_desc.layout_type, b_desc.lbo, b_desc.sbo, b_major)
            instr = WgmmaInstruction(
                instruction=call["shape"], variant=call["variant"],
                a_dtype=_WGMMA_DTYPES.get(a_t, a_t), b_dtype=_WGMMA_DTYPES.get(b_t, b_t),
                accum_dtype=_WGMMA_DTYPES.get(c_t, c_t),
                a=a_desc, b=b_desc, a_major=a_major, b_major=b_major, kernel=kname,
                problems=tuple(problems),
            )
            key = repr((kname, call["shape"], call["variant"], a_t, b_t, c_t, a_major, b_major,
                        a_desc.to_dict() if a_desc else None, b_desc.to_dict() if b_desc else None,
                        tuple(problems)))
            if key in result:
                prev = result[key]
                result[key] = dataclasses.replace(prev, count=prev.count + 1)
            else:
                result[key] = instr
    return list(result.values())


def l2_windows(lowered: Lowered) -> list[L2Window]:
    _, host = _host_func(lowered.host_mod)
    attrs = host.attrs
    if attrs is None or "l2_persistent_map" not in attrs:
        return []
    windows = []
    for buffer, value in attrs["l2_persistent_map"].items():
        hit_ratio, size = value
        emitted, missing = [], []
        for backend, launcher in lowered.launchers.items():
            if launcher.text is None:
                continue
            texts = [launcher.text, *(v for _, v in launcher.extra)]
            if any(_sets_access_policy(t) for t in texts):
                emitted.append(backend)
            else:
                missing.append(backend)
        windows.append(L2Window(
            buffer=str(buffer), hit_ratio=round(float(_float(hit_ratio)), 6), bytes=_dim(size),
            emitted_by=tuple(emitted), missing_in=tuple(missing),
        ))
    return windows


def _float(value: Any) -> float:
    return float(getattr(value, "value", value))


def _sets_access_policy(text: str) -> bool:
    return any(marker in text for marker in (
        "access_policy_window", "accessPolicyWindow", "AccessPolicyWindow", "ACCESS_POLICY_WINDOW",
    ))


# --------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------


# Layout tables past this many elements are not tabulated (measured on 2 cores: 256 x 512 fp16 shared,
# 131,072 elements, evaluates in 13 ms, adds 0.94 MB to the report's JSON, and the whole HTML report
# renders in 0.15 s, the SVG cropping what it draws). Each layout left out is named in report.notes.
MAX_LAYOUT_ELEMENTS = 1 << 18


def layouts(lowered: Lowered, *, max_elements: int | None = None,
            left_out: list[str] | None = None) -> list[Layout]:
    """The compiler's inferred layouts, evaluated for every logical element.

    Shared buffers that the software pipeline replicates across stages are reported for one
    stage when every stage is the first one shifted by a constant (the description says so).
    Each layout not tabulated gets a sentence in ``left_out`` saying which and why.
    """
    left_out = [] if left_out is None else left_out
    max_elements = MAX_LAYOUT_ELEMENTS if max_elements is None else max_elements
    if lowered.layout_mod is None:
        return []
    tvm = tilelang().tvm
    found: dict[str, tuple[Any, Any, str]] = {}
    for gvar, func in lowered.layout_mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue

        def visit(node: Any, _k=gvar.name_hint) -> None:
            if isinstance(node, tvm.tirx.SBlock) and "layout_map" in node.annotations:
                for buf, lay in node.annotations["layout_map"].items():
                    found.setdefault(buf.name, (buf, lay, _k))

        tvm.tirx.stmt_functor.post_order_visit(func.body, visit)

    result = []
    for name, (buf, lay, kname) in found.items():
        try:
            item = _layout_record(name, buf, lay, max_elements, left_out)
        except Exception as err:
            left_out.append(f"layout of {name} left out: tilelab could not evaluate it ({_reason(err)})")
            continue
        if item is not None:
            result.append(item)
    return result


def _layout_record(name: str, buf: Any, lay: Any, max_elements: int, left_out: list[str]) -> Layout | None:
    import numpy as np

    shape = tuple(int(_dim(s)) for s in lay.get_input_shape())
    total = int(np.prod(shape)) if shape else 0
    is_fragment = type(lay).__name__ == "Fragment"
    scope = str(buf.scope())
    if not is_fragment and not scope.startswith("shared"):
        # T.annotate_layout on a global tensor (an element order for atomics, say): its size is
        # the problem's, not a tile's, so it is described, never evaluated element by element.
        left_out.append(f"layout of {name} ({scope} memory, {total:,} elements) not tabulated: tilelab "
                        f"tabulates on-chip layouts; TileLang's description: {lay}")
        return None
    if not is_fragment and (int(np.prod(shape[1:])) if len(shape) >= 3 else total) > max_elements:
        left_out.append(f"layout of {name} left out: {total:,} elements, more than the "
                        f"{max_elements:,} tilelab tabulates")
        return None
    variables = list(lay.get_forward_vars())
    dtype = str(buf.dtype)
    if is_fragment:
        replicate = int(_dim(lay.replicate_size))
        # A replicated fragment puts its replica variable first among the forward vars.
        index_vars = variables[-len(shape):]
        rng = lay.thread_range
        base = int(_dim(rng.min)) if rng is not None else 0
        count = int(_dim(rng.extent)) if rng is not None else None
        if total > max_elements:
            left_out.append(f"layout of {name} not tabulated: {total:,} elements, more than the "
                            f"{max_elements:,} tilelab evaluates; only its description is kept")
            return Layout(buffer=name, scope="fragment", dtype=dtype, shape=shape, replicate=replicate,
                          thread_base=base, thread_count=count, description=f"{lay} (too large to tabulate)")
        env = _grid(index_vars, shape)
        if replicate > 1 and len(variables) > len(shape):
            env[variables[0].name] = np.zeros(shape, dtype=np.int64)
        threads = _evaluate(lay.forward_thread, env, shape)
        index = list(lay.forward_index)
        locals_ = _linearize([_evaluate(e, env, shape) for e in index], lay.get_output_shape())
        return Layout(
            buffer=name, scope="fragment", dtype=dtype, shape=shape,
            threads=tuple(threads.ravel().tolist()), locals_=tuple(locals_.ravel().tolist()),  # Python ints, at C speed
            replicate=replicate, thread_base=base, thread_count=count, description=str(lay),
        )
    env = _grid(variables, shape)
    offsets = _linearize([_evaluate(e, env, shape) for e in lay.forward_index], lay.get_output_shape())
    description = str(lay)
    if len(shape) >= 3:
        stage = int(np.prod(shape[1:]))
        stages = shape[0]
        if all((offsets[s] == offsets[0] + s * stage).all() for s in range(stages)):
            offsets = offsets[0]
            shape = shape[1:]
            description = f"stage 0 of {stages} pipeline stages (stage s is stage 0 + s * {stage} elements); {description}"
    if int(np.prod(shape)) > max_elements:
        left_out.append(f"layout of {name} left out: {int(np.prod(shape)):,} elements, more than the "
                        f"{max_elements:,} tilelab tabulates")
        return None
    if (offsets.ravel() == np.arange(offsets.size)).all():
        left_out.append(f"layout of {name} not listed: plain row-major, no swizzle")
        return None
    return Layout(buffer=name, scope="shared", dtype=dtype, shape=tuple(shape),
                  offsets=tuple(offsets.ravel().tolist()), description=description)


def _grid(variables: list[Any], shape: tuple[int, ...]) -> dict[str, Any]:
    import numpy as np

    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")
    return {v.name: g for v, g in zip(variables, grids)}


def _linearize(parts: list[Any], out_shape: Any) -> Any:
    import numpy as np

    dims = [int(_dim(s)) for s in out_shape]
    total = np.zeros_like(parts[0])
    for value, extent in zip(parts, dims):
        total = total * extent + value
    return total.astype(np.int64)


def _evaluate(expr: Any, env: dict[str, Any], shape: tuple[int, ...]) -> Any:
    """Evaluate an index expression over numpy grids (TileLang's floordiv/floormod semantics)."""
    import numpy as np

    tir = tilelang().tvm.tirx

    def ev(e: Any) -> Any:
        if isinstance(e, tir.IntImm):
            return np.int64(e.value)
        if isinstance(e, tir.Var):
            return env[e.name]
        if isinstance(e, tir.Add):
            return ev(e.a) + ev(e.b)
        if isinstance(e, tir.Sub):
            return ev(e.a) - ev(e.b)
        if isinstance(e, tir.Mul):
            return ev(e.a) * ev(e.b)
        if isinstance(e, (tir.FloorDiv, tir.Div)):
            return np.floor_divide(ev(e.a), ev(e.b))
        if isinstance(e, (tir.FloorMod, tir.Mod)):
            return np.mod(ev(e.a), ev(e.b))
        if isinstance(e, tir.Min):
            return np.minimum(ev(e.a), ev(e.b))
        if isinstance(e, tir.Max):
            return np.maximum(ev(e.a), ev(e.b))
        if isinstance(e, tir.Cast):
            return ev(e.value)
        if isinstance(e, tir.Select):
            return np.where(ev(e.condition), ev(e.true_value), ev(e.false_value))
        for cls, fn in ((tir.EQ, np.equal), (tir.NE, np.not_equal), (tir.LT, np.less),
                        (tir.LE, np.less_equal), (tir.GT, np.greater), (tir.GE, np.greater_equal),
                        (tir.And, np.logical_and), (tir.Or, np.logical_or)):
            if isinstance(e, cls):
                return fn(ev(e.a), ev(e.b))
        if isinstance(e, tir.Call):
            name = getattr(e.op, "name", "")
            ops = {"tir.bitwise_xor": np.bitwise_xor, "tir.bitwise_and": np.bitwise_and,
                   "tir.bitwise_or": np.bitwise_or, "tir.shift_right": np.right_shift,
                   "tir.shift_left": np.left_shift}
            if name in ops:
                return ops[name](ev(e.args[0]), ev(e.args[1]))
            if name == "tir.if_then_else":
                return np.where(ev(e.args[0]), ev(e.args[1]), ev(e.args[2]))
        raise NotImplementedError(f"cannot evaluate {type(e).__name__}: {e}")

    return np.broadcast_to(ev(expr), shape).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


def arguments(source: KernelSource, out_idx: list[int] | None) -> list[Argument]:
    """How each parameter is read at launch, and where each symbolic size binds from."""
    tvm = tilelang().tvm
    func = source.prim_func
    params = list(func.params)
    outputs = {i % len(params) for i in (out_idx or [])}
    binds: dict[str, str] = {}
    records: list[Argument] = []
    symbols: list[str] = []
    symbol_dtypes: dict[str, str] = {}  # T.dynamic("m", "int64"): the launchers take an int64_t m
    for position, param in enumerate(params):
        if param in func.buffer_map:
            buf = func.buffer_map[param]
            shape = tuple(_dim(s) for s in buf.shape)
            for axis, extent in enumerate(buf.shape):
                if isinstance(extent, tvm.tirx.Var):
                    binds.setdefault(extent.name, f"{buf.name}.shape[{axis}]")
                for var in _free_vars(extent, symbol_dtypes):
                    if var not in symbols:
                        symbols.append(var)
            strides = tuple(_dim(s) for s in buf.strides) if len(buf.strides) else None
            strided = strides is not None and strides != _contiguous(buf.shape)
            if strided and strides is not None:
                for axis, stride in enumerate(buf.strides):
                    if isinstance(stride, tvm.tirx.Var):
                        binds.setdefault(stride.name, f"{buf.name}.stride({axis})")
                        symbol_dtypes.setdefault(stride.name, str(stride.dtype))
                        if stride.name not in symbols:
                            symbols.append(stride.name)
            is_output = position in outputs
            records.append(Argument(
                name=buf.name, kind="strided_tensor" if strided else "tensor", dtype=str(buf.dtype),
                shape=shape, strides=strides if strided else None,
                # With out_idx the tvm_ffi launcher allocates the output itself and returns it.
                passed_at_launch=not is_output, is_output=is_output,
                cache_key=f"dtype {buf.dtype}, shape {list(shape)}" + (f", strides {list(strides)}" if strided and strides else ""),
            ))
        else:
            records.append(Argument(name=param.name, kind="scalar", dtype=str(param.dtype),
                                    passed_at_launch=True, cache_key=None))
    params_by_name = {r.name for r in records}
    for symbol in symbols:
        if symbol in params_by_name:
            continue
        records.append(Argument(
            name=symbol, kind="dynamic_dim", dtype=symbol_dtypes.get(symbol, "int32"), passed_at_launch=False,
            binds_from=((symbol, binds[symbol]),) if symbol in binds else (),
            cache_key=None,
        ))
    for name, value, explicit in source.constants:
        records.append(Argument(
            name=name, kind="constant", dtype=type(value).__name__, passed_at_launch=False,
            value=_constant_text(value), cache_key=_constant_text(value) if explicit else None,
        ))
    return records


def _constant_text(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def _free_vars(expr: Any, dtypes: dict[str, str] | None = None) -> list[str]:
    """Names of the variables in ``expr``; ``dtypes`` (if given) collects each one's dtype."""
    tvm = tilelang().tvm
    names: list[str] = []
    dtypes = {} if dtypes is None else dtypes

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Var) and node.name not in names:
            names.append(node.name)
            dtypes.setdefault(node.name, str(node.dtype))

    if isinstance(expr, tvm.tirx.Var):
        dtypes.setdefault(expr.name, str(expr.dtype))
        return [expr.name]
    try:
        tvm.tirx.stmt_functor.post_order_visit(tvm.tirx.Evaluate(expr), visit)
    except Exception:
        pass
    return names


def _contiguous(shape: Any) -> tuple[Any, ...]:
    """Row-major strides of a buffer shape, as ``_dim`` values (symbolic where an extent is)."""
    strides: list[Any] = []
    acc: Any = 1
    for extent in reversed(list(shape)):
        strides.append(acc if isinstance(acc, int) else _dim(acc))
        acc = extent if isinstance(acc, int) and acc == 1 else acc * extent
    return tuple(reversed(strides))


# --------------------------------------------------------------------------------------------
# Compiling (needs nvcc; launching needs a GPU)
# --------------------------------------------------------------------------------------------


def _drop_memory_cache_advice(record: Any) -> bool:
    return not str(record.getMessage()).startswith("Found kernel")


def _quiet_memory_cache_advice() -> None:
    """TileLang warns "Found kernel ... in memory cache. ... consider using @tilelang.jit" on every
    in-process cache hit; tilelab compiles through that cache on purpose (run, bench and sweep of
    the same kernel), so that one advisory is dropped. Every other TileLang message stays."""
    import logging

    log = logging.getLogger("tilelang.cache.kernel_cache")
    if _drop_memory_cache_advice not in log.filters:
        log.addFilter(_drop_memory_cache_advice)


def compiled_target_name(kernel: Any) -> str | None:
    """The registered target name of a compiled JITKernel ("sm_90a", "c"), or None."""
    target = getattr(kernel, "target", None)
    if target is None or not hasattr(target, "kind"):
        return None
    kind = str(target.kind.name)
    if kind == "cuda":
        return str(target.attrs["arch"]) if "arch" in target.attrs else None
    if kind == "hip":
        return str(target.attrs["mcpu"]).split(":")[0] if "mcpu" in target.attrs else None
    return kind


def compiled_target_family(kernel: Any) -> str | None:
    """"cuda", "hip", "metal" or "cpu" for a compiled JITKernel; None for anything else."""
    target = getattr(kernel, "target", None)
    if target is None or not hasattr(target, "kind") or kernel_kind(kernel) != "compiled":
        return None
    return {"cuda": "cuda", "hip": "hip", "metal": "metal", "c": "cpu", "llvm": "cpu"}.get(str(target.kind.name))


@contextlib.contextmanager
def _host_compiler_output(sink: list[str], active: bool):
    """Keep the host compiler's diagnostics (TileLang 0.1.15 lets g++ write straight to file
    descriptor 2 when a CPU kernel fails to build) out of the user's stderr, into ``sink``."""
    if not active:
        yield
        return
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            sink.append(capture.read().decode("utf-8", errors="replace"))


def default_backend(target: Any) -> str:
    """The execution backend tilelab compiles with for ``target``: tvm_ffi, or cython for the CPU
    (TileLang 0.1.15's tvm_ffi cannot build C-target kernels)."""
    from .targets import parse_target

    return "cython" if target is not None and parse_target(target).family == "cpu" else "tvm_ffi"


def compile_kernel(obj: Any, *, target: Any = None, backend: str | None = None,
                   out_idx: list[int] | None = None, pass_configs: dict[str, Any] | None = None,
                   args: tuple = (), kwargs: dict | None = None, force: bool = False) -> Any:
    """``tilelang.compile`` for any kernel-like object; returns TileLang's JITKernel.

    ``target`` is any spec :func:`tilelab.targets.parse_target` accepts (default: the local GPU,
    else sm_90a); ``backend`` defaults to :func:`default_backend`. ``force`` compiles afresh:
    TileLang's kernel cache (in memory and on disk) is off for this compile and restored after.
    """
    from .targets import local_cuda_target, parse_target

    tl = tilelang()
    _quiet_memory_cache_advice()
    source = resolve_kernel(obj, args, kwargs)
    local = None if target else local_gpu_arch()
    resolved = local_cuda_target(local) if local else parse_target(target or "sm_90a")
    backend = backend or default_backend(resolved)
    if resolved.family == "cpu" and backend != "cython":
        raise ValueError(f"execution backend {backend!r} cannot run target c kernels in TileLang 0.1.15; "
                         "use backend='cython' (the default for target c)")
    tilelang_target = resolved.tilelang_target()
    if backend == "cutedsl":
        tilelang_target["keys"] = ["cuda", "gpu", "cutedsl"]  # type: ignore[assignment]
    configs = {**source.pass_configs, **(pass_configs or {})}
    from tilelang.env import CacheState  # the switch itself: is_cache_enabled also reads the env var

    was_enabled = CacheState.is_enabled()
    if force:
        tl.disable_cache()
    compiler_output: list[str] = []
    stage = "compilation" if resolved.family == "cuda" else f"compilation for {resolved.name}"
    try:
        with tilelang_errors(source.name, stage=stage), \
                _host_compiler_output(compiler_output, resolved.family == "cpu"):
            return tl.compile(
                source.prim_func,
                out_idx=out_idx if out_idx is not None else source.out_idx,
                target=tilelang_target,
                execution_backend=backend,
                pass_configs=configs or None,
            )
    except LoweringError as err:
        err.trace += "".join(compiler_output)
        raise _for_target(err, resolved) from err
    except Exception as err:
        error = _lowering_error(err, source.name, stage=stage)
        error.trace += "".join(compiler_output)
        raise _for_target(error, resolved) from err
    finally:
        if force and was_enabled:
            tl.enable_cache()


# --------------------------------------------------------------------------------------------
# The "why is it slow" tier: #line directives, include paths, pass-by-pass lowering
# --------------------------------------------------------------------------------------------

LINE_DIRECTIVES_CONFIG = "tl.emit_line_directives"


def device_source_with_line_directives(source: KernelSource, arch: str, pass_configs: dict[str, Any]) -> str:
    """The device source lowered again with ``#line`` directives naming the Python lines."""
    configs = {**pass_configs, LINE_DIRECTIVES_CONFIG: True}
    return lower(source, arch, out_idx=None, pass_configs=configs, backends=()).device_source


def device_include_dirs() -> list[str]:
    """The folders TileLang's device source needs on the include path (its templates, CUTLASS)."""
    import tilelang.env as env

    return [d for d in (env.TILELANG_TEMPLATE_PATH, env.CUTLASS_INCLUDE_DIR) if d]


def is_tilelang_file(path: str) -> bool:
    """True for a file inside the installed TileLang package (its macros, not the user's code)."""
    import os.path

    root = os.path.dirname(tilelang().__file__)
    return os.path.abspath(path).startswith(root + os.sep)


def pass_trace(source: KernelSource, arch: str, pass_configs: dict[str, Any], *,
               max_diff_lines: int = 400):
    """TileLang's lowering pipeline pass by pass, through its own pass instrumentation.

    TileLang's ``StackedPassInstrument`` pairs the pass callbacks and numbers the top-level passes;
    its pass-timing instrument times them (it runs first, so the script printing here is not
    charged to the pass). A pass changed the module when its TVMScript differs.
    """
    import difflib

    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import lower_to_host_device_ir
    from tilelang.instrumentation.events import PassEventObserver, StackedPassInstrument
    from tilelang.tools.pass_timing import TileLangPassTimingInstrument

    from ._machine import PassStep, PassTrace

    tl = tilelang()
    events: list[tuple[Any, bool, str, bool]] = []
    state = {"text": None}

    def script(mod: Any) -> str:
        try:
            return mod.script(show_meta=False)
        except Exception:  # some intermediate modules do not print as TVMScript
            return str(mod)

    class Observer(PassEventObserver):
        def pass_started(self, mod, event):
            if state["text"] is None:
                state["text"] = script(mod)
                state["input"] = state["text"]
            return mod

        def pass_finished(self, mod, event, before):
            if mod.same_as(before):
                events.append((event, False, "", False))
                return
            text = script(mod)
            if text == state["text"]:
                events.append((event, False, "", False))
                return
            diff = list(difflib.unified_diff(state["text"].splitlines(), text.splitlines(), "before", "after",
                                             lineterm="", n=2))
            cut = len(diff) > max_diff_lines
            events.append((event, True, "\n".join(diff[:max_diff_lines]), cut))
            state["text"] = text

    stacked = StackedPassInstrument(Observer(), capture_nested=False)
    timing = TileLangPassTimingInstrument()
    try:
        with tilelang_errors(source.name, stage="lowering"):
            context = create_backend_context({"kind": "cuda", "arch": arch}, None, "tvm_ffi")
            with tl.transform.PassContext(opt_level=3, config=pass_configs,
                                          instruments=[timing.instrument, stacked]), context.target:
                lower_to_host_device_ir(source.prim_func, context)
    except LoweringError:
        raise
    except Exception as err:
        raise _lowering_error(err, source.name) from err
    top = [r for r in timing.records if r.depth == 0]
    steps = []
    for i, (event, changed, diff, cut) in enumerate(events):
        seconds = top[i].duration_s if i < len(top) and top[i].name == event.name else 0.0
        steps.append(PassStep(event.name, seconds, changed, diff, cut, event.phase))
    return PassTrace(tuple(steps), state.get("input") or "")


def tile_ops(prim_func: Any) -> list[dict[str, Any]]:
    """The tile operators of a prim_func in program order, as TileLang's front end built them.

    Each: ``op`` ("copy", "gemm", "fill", "reduce", ...), ``operands``: (buffer, scope, dtype,
    region extents) per region argument, ``stages``: the ``num_stages`` of the enclosing
    ``T.Pipelined`` loop (None outside one).
    """
    tvm = tilelang().tvm
    visit = tvm.tirx.stmt_functor.post_order_visit
    calls: list[Any] = []

    def is_tile_op(node: Any) -> bool:
        return (isinstance(node, tvm.tirx.Call) and hasattr(node.op, "name")
                and str(node.op.name).startswith("tl.tileop.") and str(node.op.name) != "tl.tileop.region")

    visit(prim_func.body, lambda n: calls.append(n) if is_tile_op(n) else None)
    loops = _pipelined_calls(prim_func, is_tile_op)
    out = []
    for call in calls:
        operands = []
        for arg in call.args:
            if isinstance(arg, tvm.tirx.Call) and str(getattr(arg.op, "name", "")) in ("tl.region", "tl.tileop.region"):
                load = arg.args[0]
                buf = load.buffer
                extents = [_dim(e) for e in list(arg.args)[2:]]
                operands.append((str(buf.name), str(buf.scope()), str(buf.dtype), extents))
        out.append({"op": str(call.op.name).split(".")[-1], "operands": operands, "stages": None, "_call": call})
    # the calls inside each pipelined loop, matched by identity of their IR nodes
    for item in out:
        for stages_n, members in loops:
            if any(item["_call"].same_as(m) for m in members):
                item["stages"] = stages_n
        del item["_call"]
    return out


def _pipelined_calls(prim_func: Any, is_tile_op: Callable[[Any], bool]) -> list[tuple[int, list[Any]]]:
    tvm = tilelang().tvm
    visit = tvm.tirx.stmt_functor.post_order_visit
    loops: list[tuple[int, list[Any]]] = []

    def find(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and "num_stages" in node.annotations:
            members: list[Any] = []
            visit(node.body, lambda c: members.append(c) if is_tile_op(c) else None)
            loops.append((int(node.annotations["num_stages"]), members))

    visit(prim_func.body, find)
    return loops


def launch_dims(obj: Any) -> tuple[tuple[int | str, ...], tuple[int | str, ...]] | None:
    """(grid, block) as the kernel's ``T.Kernel`` wrote them, read from its prim_func without
    lowering (microseconds: used when a launch has to be described at once, e.g. after a
    timeout): grid from the ``blockIdx`` thread bindings, block from ``tl.launch_threads``.
    Symbolic extents come back as text (``(m + 63) // 64``); None when there is no prim_func."""
    tvm = tilelang().tvm
    func = getattr(obj, "prim_func", obj)
    if not isinstance(func, tvm.tirx.PrimFunc):
        return None
    grid: dict[str, Any] = {}
    block: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.thread_binding is not None:
            tag = str(node.thread_binding.thread_tag)
            if tag.startswith("blockIdx."):
                grid.setdefault(tag[-1], node.extent)
        elif isinstance(node, tvm.tirx.SBlock) and "tl.launch_threads" in node.annotations and not block:
            block.extend(node.annotations["tl.launch_threads"])

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    if not grid and not block:
        return None
    dims = tuple(_dim(grid[a]) if a in grid else 1 for a in "xyz")
    threads = tuple(_dim(v) for v in (list(block) + [1, 1, 1])[:3])
    return dims, threads


# -- corpus: capturing the kernels a script compiles, and TileLang's own lowering -------------
# (used by ``python -m tilelab corpus``; kept apart from the inspection engine above)


@dataclass
class CompileRequest:
    """One ``tilelang.compile`` (or ``@tilelang.jit`` compile) a script asked for."""

    prim_func: Any
    out_idx: list[int] | None
    pass_configs: dict[str, Any]
    target: Any  # as the script gave it: None, "auto", "cuda", a dict or a Target
    execution_backend: str | None


@contextlib.contextmanager
def intercept_compiles(on_compile: Callable[[CompileRequest], Any]):
    """Route every compile TileLang is asked for to ``on_compile`` instead of the device compiler.

    TileLang funnels ``tilelang.compile``, ``@tilelang.jit`` and ``par_compile`` into its kernel
    cache's ``cached``: replacing it there (and where ``tilelang.jit`` imported it) catches each
    compile after the front end merged the PrimFunc's own out_idx/pass configs, before any target
    is resolved, nvcc runs or a GPU is touched. ``on_compile``'s result is what the script gets
    back in place of the JITKernel.
    """
    import importlib

    tilelang()
    # import_module, not ``import tilelang.cache``: the package attribute ``cache`` is a function.
    tl_cache, tl_jit = importlib.import_module("tilelang.cache"), importlib.import_module("tilelang.jit")

    def cached(func=None, out_idx=None, *args, target=None, target_host=None, execution_backend=None,
               verbose=None, pass_configs=None, compile_flags=None):
        if isinstance(out_idx, int):
            out_idx = [out_idx]
        return on_compile(CompileRequest(func, list(out_idx) if out_idx is not None else None,
                                         dict(pass_configs or {}), target, execution_backend))

    saved = (tl_cache.cached, tl_jit.cached)
    tl_cache.cached = tl_jit.cached = cached
    try:
        yield
    finally:
        tl_cache.cached, tl_jit.cached = saved


def target_arch(target: Any) -> str | None:
    """The CUDA arch a script's own target names ("sm_90a"), or None where it names none
    ("auto", "cuda", None) or is not CUDA."""
    tvm = tilelang().tvm
    if target is None or (isinstance(target, str) and target.strip() in ("auto", "cuda", "")):
        return None
    try:
        resolved = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    except Exception:
        match = re.search(r"sm_\d+a?", str(target))
        return match.group(0) if match else None
    if resolved.kind.name != "cuda":
        return None
    arch = resolved.attrs.get("arch")
    return str(arch) if arch else None


def tilelang_lower(func: Any, arch: str, *, out_idx: list[int] | None, pass_configs: dict[str, Any]) -> None:
    """What ``tilelang.compile`` does for the tvm_ffi backend short of running nvcc: prepare the
    outputs, lower, and generate host and device code. Raises LoweringError with TileLang's reason."""
    tl = tilelang()
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import lower_with_context
    from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs

    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"
    tracker = _PassTracker()
    try:
        with tilelang_errors(name, stage="lowering"):
            context = create_backend_context({"kind": "cuda", "arch": arch}, None, "tvm_ffi")
            prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
                func, out_idx, supports_callee_allocated_outputs=context.execution_backend.supports_callee_allocated_outputs
            )
            with tl.transform.PassContext(opt_level=3, config=pass_configs, instruments=[tracker.build()]), context.target:
                lower_with_context(prepared, context, enable_host_codegen=True, enable_device_compile=False)
    except LoweringError as err:
        raise diagnosed(err, func=func, pass_name=tracker.failing, target_family="cuda")
    except Exception as err:
        raise _lowering_error(err, name, func=func, pass_name=tracker.failing, target_family="cuda") from err


# ============================================================================================
# Tracing a CPU kernel's global accesses (tilelab.trace_tiles)
#
# Self-contained: everything below serves ``launch/_trace.py`` only. A target-c kernel is
# compiled again with one extra TIR pass, run just before TileLang's FlattenBuffer (tile ops are
# lowered to loads and stores by then, block loops are plain loops, and every access still has
# its per-dimension indices): each load of a kernel parameter becomes
# ``tilelab_trace_access(...) ? A[i, j] : 0`` and each store ``if (tilelab_trace_access(...))
# B[i, j] = ...``. The function (C, in the trace runtime tilelab builds) logs the access with its
# block and answers whether the index is inside the tensor, so an out-of-bounds access is logged
# and not performed. Vectorisation is off for this compile (one call per element).
# ============================================================================================

TRACE_ACCESS_FUNCTION = "tilelab_trace_access"
TRACE_READ, TRACE_WRITE, TRACE_ATOMIC = 0, 1, 2  # kinds of access: tensor id * 4 + kind goes to the call
TRACE_ATOMIC_ATTR = "tilelab_atomic"  # marks an atomic update from before LowerTileOp to the trace pass
TRACE_MAX_RANK = 6  # indices per call; a tensor of higher rank is traced by its flat index
_TRACE_LOCK = threading.RLock()


@dataclass(frozen=True)
class TracedKernel:
    """A kernel compiled for the CPU with every global access traced.

    ``compiled`` is TileLang's JITKernel (launch it as any target-c kernel, with the trace runtime
    loaded); ``tensors`` names the tensor of each id the access function receives (the kernel's
    tensor parameters, in order); ``grid_rank`` is how many grid axes ``T.Kernel`` gave (1-3);
    ``untraced`` says which tensors were also reached in ways the trace cannot see."""

    compiled: Any
    tensors: tuple[str, ...]
    grid_rank: int
    untraced: tuple[str, ...] = ()


def _block_vars(func: Any) -> tuple[dict[str, Any], int]:
    """{"x"|"y"|"z": the Var of that blockIdx binding} of a prim_func, and the grid's rank."""
    tvm = tilelang().tvm
    found: dict[str, Any] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.thread_binding is not None:
            tag = str(node.thread_binding.thread_tag)
            if tag.startswith("blockIdx.") and tag[-1] in "xyz":
                found.setdefault(tag[-1], node.loop_var)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    rank = max(("xyz".index(a) + 1 for a in found), default=1)
    return found, rank


def _trace_pass(tensor_ids: dict[str, int], block_vars: dict[str, Any], untraced: set[str]) -> Any:
    """The TIR pass that wraps every load and store of a tensor parameter in an access call."""
    tvm = tilelang().tvm
    tirx = tvm.tirx

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        by_data: dict[Any, tuple[int, Any]] = {}
        for param in func.params:
            buf = func.buffer_map.get(param)
            if buf is not None and buf.name in tensor_ids:
                by_data[buf.data] = (tensor_ids[buf.name], buf)
        if not by_data:
            return func
        block_loops = {}  # loop var -> axis, for the loops that enumerate the grid's blocks
        block_names = {str(v.name): a for a, v in block_vars.items()}

        def find(node: Any) -> None:
            if isinstance(node, tirx.For):
                for axis, var in block_vars.items():
                    if node.loop_var.same_as(var):
                        block_loops[node.loop_var] = axis
                if node.loop_var not in block_loops and str(node.loop_var.name) in block_names:
                    block_loops[node.loop_var] = block_names[str(node.loop_var.name)]

        tirx.stmt_functor.post_order_visit(func.body, find)

        def owner(buf: Any) -> tuple[int, Any] | None:
            for data, entry in by_data.items():
                if buf.data.same_as(data):
                    return entry
            return None

        def call(buf: Any, indices: Any, kind: int, scope: dict[str, Any]) -> Any | None:
            tid, param = owner(buf)  # type: ignore[misc]
            if any(i.dtype.lanes != 1 for i in indices):
                untraced.add(param.name)
                return None
            i64 = "int64"
            same = len(buf.shape) == len(param.shape) and all(
                tvm.arith.Analyzer().can_prove_equal(a, b) for a, b in zip(buf.shape, param.shape))
            if same and len(indices) <= TRACE_MAX_RANK:
                idx = [tirx.Cast(i64, i) for i in indices]
                shape = [tirx.Cast(i64, s) for s in buf.shape]
            else:  # a view of the tensor (or a rank beyond the call's): its flat element index
                flat = tirx.Cast(i64, buf.elem_offset) if buf.elem_offset is not None else tirx.const(0, i64)
                strides = list(buf.strides) if len(buf.strides) else None
                if strides is None:
                    strides, step = [], tirx.const(1, i64)
                    for extent in reversed(list(buf.shape)):
                        strides.insert(0, step)
                        step = step * tirx.Cast(i64, extent)
                for i, s in zip(indices, strides):
                    flat = flat + tirx.Cast(i64, i) * tirx.Cast(i64, s)
                numel = tirx.const(1, i64)
                for extent in param.shape:
                    numel = numel * tirx.Cast(i64, extent)
                idx, shape = [flat], [numel]
            rank = len(idx)
            idx += [tirx.const(0, i64)] * (TRACE_MAX_RANK - rank)
            shape += [tirx.const(1, i64)] * (TRACE_MAX_RANK - rank)
            blocks = [tirx.Cast("int32", scope[a]) if a in scope else tirx.const(0, "int32") for a in "xyz"]
            return tirx.call_extern("int32", TRACE_ACCESS_FUNCTION, tirx.const(tid * 4 + kind, "int32"), *blocks,
                                    tirx.const(rank, "int32"), *idx, *shape)

        def rewrite(stmt: Any, scope: dict[str, Any], atomic: bool = False) -> Any:
            def pre(node: Any) -> Any:
                if isinstance(node, tirx.AttrStmt) and str(node.attr_key) == TRACE_ATOMIC_ATTR:
                    return rewrite(node.body, scope, True)  # the marker goes; its stores are atomic
                if isinstance(node, tirx.For) and node.loop_var in block_loops \
                        and block_loops[node.loop_var] not in scope:
                    inner = {**scope, block_loops[node.loop_var]: node.loop_var}
                    return tirx.For(node.loop_var, node.min, node.extent, node.kind, rewrite(node.body, inner, atomic),
                                    node.thread_binding, node.annotations)
                return None

            def post(node: Any) -> Any:
                if isinstance(node, tirx.BufferLoad) and owner(node.buffer) is not None:
                    check = call(node.buffer, node.indices, TRACE_READ, scope)
                    if check is None:
                        return None
                    return tirx.if_then_else(check != 0, node, tirx.const(0, node.dtype))
                if isinstance(node, tirx.BufferStore) and owner(node.buffer) is not None:
                    check = call(node.buffer, node.indices, TRACE_ATOMIC if atomic else TRACE_WRITE, scope)
                    if check is None:
                        return None
                    # The value first, as the kernel computes it before storing: a read feeding an
                    # out-of-bounds write is still a read (and is traced).
                    value = tirx.Var("tilelab_stored", node.value.dtype)
                    store = tirx.BufferStore(node.buffer, value, node.indices, node.predicate)
                    return tirx.SeqStmt([tirx.Bind(value, node.value), tirx.IfThenElse(check != 0, store, None)])
                return None

            return tirx.stmt_functor.ir_transform(stmt, pre, post, ["tirx.For", "tirx.AttrStmt", "tirx.BufferLoad",
                                                                    "tirx.BufferStore"])

        body = rewrite(func.body, {})

        def reached_otherwise(node: Any) -> None:  # a tensor's pointer handed to a call
            if isinstance(node, tirx.Call):
                for arg in node.args:
                    if isinstance(arg, tirx.Var):
                        for data, (_, param) in by_data.items():
                            if arg.same_as(data):
                                untraced.add(param.name)

        tirx.stmt_functor.post_order_visit(body, reached_otherwise)
        return func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tilelab.TraceGlobalAccesses")


def _mark_atomics_pass() -> Any:
    """Wraps each atomic operation (``T.atomic_add`` and kin, on an element or a tile region) in
    an attribute the trace pass reads: TileLang's CPU lowering turns them into plain
    read-modify-writes, after which an atomic update looks like any other store."""
    tirx = tilelang().tvm.tirx

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        def post(node: Any) -> Any:
            call = node.value if isinstance(node, tirx.Evaluate) else None
            op = getattr(call, "op", None) if isinstance(call, tirx.Call) else None
            if op is not None and "atomic" in str(getattr(op, "name", "")):
                return tirx.AttrStmt(tirx.StringImm("tilelab"), TRACE_ATOMIC_ATTR, tirx.const(1, "int32"), node)
            return None

        return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate"]))

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tilelab.MarkAtomics")


@contextlib.contextmanager
def _flatten_buffer_traced(trace: Any):
    """Within the block, TileLang's CPU pipeline marks atomics before its LowerTileOp pass and runs
    ``trace`` before its FlattenBuffer pass (the pipeline looks both up in ``tilelang.transform``
    each time it lowers); compiles in other threads meanwhile are left alone."""
    tl = tilelang()
    tvm = tl.tvm
    originals = {"FlattenBuffer": tl.transform.FlattenBuffer, "LowerTileOp": tl.transform.LowerTileOp}
    before = {"FlattenBuffer": trace, "LowerTileOp": _mark_atomics_pass()}
    mine = threading.get_ident()

    def preceded(name: str) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != mine:
                return originals[name](*args, **kwargs)
            return tvm.transform.Sequential([before[name], originals[name](*args, **kwargs)])

        return make

    with _TRACE_LOCK:
        for name in originals:
            setattr(tl.transform, name, preceded(name))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(tl.transform, name, original)


def compile_traced(obj: Any, *, out_idx: list[int] | None = None, pass_configs: dict[str, Any] | None = None,
                   args: tuple = (), kwargs: dict | None = None) -> TracedKernel:
    """Compile ``obj`` (any kernel-like object; a compiled kernel is compiled again from its
    prim_func) for the CPU with its global accesses traced. TileLang's kernel cache is off for
    this compile, so the traced kernel never answers for the plain one. Raises LoweringError with
    TileLang's reason when the kernel cannot be lowered or built for target c."""
    source = resolve_kernel(obj, args, kwargs)
    func = source.prim_func
    tensors = tuple(str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map)
    block_vars, rank = _block_vars(func)
    untraced: set[str] = set()
    trace = _trace_pass({name: i for i, name in enumerate(tensors)}, block_vars, untraced)
    configs = {**source.pass_configs, **(pass_configs or {}), "tirx.disable_vectorize": True}
    idx = out_idx if out_idx is not None else source.out_idx
    with _flatten_buffer_traced(trace):
        compiled = compile_kernel(func, target="c", backend="cython", out_idx=idx, pass_configs=configs,
                                  force=True)
    return TracedKernel(compiled, tensors, rank, tuple(sorted(untraced)))


def traced_kernel_key(obj: Any) -> str:
    """What a traced compile of ``obj`` depends on: its fingerprint (TVM's structural hash, which
    ignores names) and its tensor parameters' names (which the trace reports by)."""
    func = getattr(obj, "prim_func", obj)
    names: list[str] = []
    if isinstance(func, tilelang().tvm.tirx.PrimFunc):
        names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    return f"{kernel_fingerprint(obj)}:{','.join(names)}"


def cxx_compiler() -> str:
    """The host C++ compiler TileLang builds target-c kernels with."""
    from tilelang.contrib.cc import get_cplus_compiler

    return get_cplus_compiler() or "c++"


# ============================================================================================
# Timeline: the instrumented compile (tilelab.timeline). Everything here that reaches into
# TileLang 0.1.15 for the intra-kernel timeline: the tile ops' user lines, the record-buffer
# parameter, and the CUDA post-processing hook around one compile. The rewrite itself is pure
# text (_timeline_rewrite.py).
# ============================================================================================

TIMELINE_BUFFER = "tlt_buf"
TIMELINE_WORDS = "tlt_words"
_CUDA_POSTPROC = "tilelang_callback_cuda_postproc"
_POSTPROC_LOCK = threading.RLock()


def timeline_ops(prim_func: Any) -> list[dict[str, Any]]:
    """The tile ops of a prim_func in program order with their user lines (the spans TileLang's
    builder stamps on each statement): ``op``, ``buffers`` (the region operands' buffer names, in
    argument order), ``line`` and ``file``, and ``loop_line``, the line of the enclosing
    ``T.Pipelined`` loop (None outside one)."""
    tvm = tilelang().tvm
    from tilelang.ir import get_stmt_span

    visit = tvm.tirx.stmt_functor.post_order_visit
    out: list[dict[str, Any]] = []
    loops: list[tuple[Any, int | None]] = []

    def span_of(node: Any) -> tuple[str | None, int | None]:
        try:
            span = get_stmt_span(node)
        except Exception:
            return None, None
        if span is None:
            return None, None
        name = span.source_name.name if getattr(span, "source_name", None) is not None else None
        return (str(name) if name else None), (int(span.line) if span.line else None)

    def find_loops(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and "num_stages" in node.annotations:
            loops.append((node, span_of(node)[1]))

    visit(prim_func.body, find_loops)

    def loop_line_of(stmt: Any) -> int | None:
        for loop, line in loops:
            found = []
            visit(loop.body, lambda n: found.append(1) if n.same_as(stmt) else None)
            if found:
                return line
        return None

    def record(node: Any) -> None:
        if not isinstance(node, tvm.tirx.Evaluate) or not isinstance(node.value, tvm.tirx.Call):
            return
        call = node.value
        name = str(getattr(call.op, "name", ""))
        if not name.startswith("tl.tileop.") or name == "tl.tileop.region":
            return
        buffers = []
        for arg in call.args:
            if isinstance(arg, tvm.tirx.Call) and str(getattr(arg.op, "name", "")) in ("tl.region", "tl.tileop.region"):
                buffers.append(str(arg.args[0].buffer.name))
        file, line = span_of(node)
        out.append({"op": name.split(".")[-1], "buffers": buffers, "line": line, "file": file,
                    "loop_line": loop_line_of(node)})

    visit(prim_func.body, record)
    return out


def with_record_buffer(prim_func: Any) -> Any:
    """``prim_func`` with one more parameter, a 1-D ``uint64`` buffer of symbolic length
    ``tlt_words``, bound by ``TLT_BIND(tlt_buf);`` as the first statement of the kernel's root
    block (before TileLang splits the warps, so both branches of a warp-specialised kernel see it).
    The timeline's rewrite replaces the bind with its records."""
    tir = tilelang().tvm.tirx
    words = tir.Var(TIMELINE_WORDS, "int32")
    buf = tir.decl_buffer((words,), "uint64", name=TIMELINE_BUFFER)
    handle = tir.Var(TIMELINE_BUFFER + "_handle", "handle")
    bind = tir.Evaluate(tir.call_extern("handle", "TLT_BIND", buf.data))
    done = [False]

    def inject(node: Any) -> Any:
        if done[0] or not isinstance(node, tir.SBlock) or node.name_hint != "tilelang_root":
            return None
        done[0] = True
        return tir.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, tir.SeqStmt([bind, node.body]),
                          node.init, node.alloc_buffers, node.match_buffers, node.annotations)

    body = tir.stmt_functor.ir_transform(prim_func.body, None, inject, ["tirx.SBlock"])
    if not done[0]:
        raise ValueError("the kernel has no T.Kernel block (tilelang_root) to record from")
    buffer_map = dict(prim_func.buffer_map)
    buffer_map[handle] = buf
    return tir.PrimFunc(list(prim_func.params) + [handle], body, prim_func.ret_type, buffer_map, prim_func.attrs)


@contextlib.contextmanager
def cuda_postproc(rewrite: Callable[[str], str]):
    """TileLang's public CUDA post-processing hook (``register_cuda_postproc``: after codegen,
    before TileLang's nvcc/NVRTC compile) set to ``rewrite`` for the block, and put back as it
    was after (the hook is process-global: one block at a time)."""
    import tvm_ffi

    from tilelang.engine.callback import register_cuda_postproc

    with _POSTPROC_LOCK:
        previous = tvm_ffi.get_global_func(_CUDA_POSTPROC, allow_missing=True)
        register_cuda_postproc(lambda code, target: rewrite(code), override=True)
        try:
            yield
        finally:
            if previous is not None:
                tvm_ffi.register_global_func(_CUDA_POSTPROC, f=previous, override=True)
            else:
                tvm_ffi.remove_global_func(_CUDA_POSTPROC)


def compile_instrumented(prim_func: Any, rewrite: Callable[[str], str], *, target: Any, backend: str,
                         out_idx: list[int] | None, pass_configs: dict[str, Any] | None) -> Any:
    """Compile ``with_record_buffer(prim_func)`` with ``rewrite`` applied to its device source,
    with ``#line`` directives on (they name the user's lines) and TileLang's kernel cache off for
    this one compile (in memory and on disk), so the instrumented kernel is never cached."""
    tl = tilelang()
    from tilelang.env import CacheState

    func = with_record_buffer(prim_func)
    configs = {**(pass_configs or {}), LINE_DIRECTIVES_CONFIG: True}
    was_enabled = CacheState.is_enabled()
    tl.disable_cache()
    name = str(prim_func.attrs["global_symbol"]) if prim_func.attrs and "global_symbol" in prim_func.attrs else "kernel"
    try:
        with cuda_postproc(rewrite), tilelang_errors(name, stage="instrumented compilation"):
            return tl.compile(func, out_idx=out_idx, target=target, execution_backend=backend, pass_configs=configs)
    finally:
        if was_enabled:
            tl.enable_cache()


def timeline_device_source(prim_func: Any, arch: str, pass_configs: dict[str, Any] | None = None) -> str:
    """The device source TileLang generates for ``with_record_buffer(prim_func)`` with ``#line``
    directives, without compiling it (what the rewrite receives; no GPU, no nvcc)."""
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile, lower_to_host_device_ir

    tl = tilelang()
    func = with_record_buffer(prim_func)
    configs = {**(pass_configs or {}), LINE_DIRECTIVES_CONFIG: True}
    context = create_backend_context({"kind": "cuda", "arch": arch}, None, "tvm_ffi")
    with tilelang_errors(None, stage="lowering"):
        with tl.transform.PassContext(opt_level=3, config=configs), context.target:
            _, device_mod, *_ = lower_to_host_device_ir(func, context)
            return device_codegen_without_compile(device_mod, context).inspect_source()


def kernel_file(prim_func: Any) -> str | None:
    """The file TileLang's spans name for the kernel's own statements (a notebook cell's
    registered name, or a module's path): what ``#line`` directives say for the user's lines."""
    tvm = tilelang().tvm
    from tilelang.ir import get_stmt_span

    found: list[str] = []

    def visit(node: Any) -> None:
        if found or not isinstance(node, (tvm.tirx.For, tvm.tirx.Evaluate)):
            return
        try:
            span = get_stmt_span(node)
        except Exception:
            return
        if span is not None and getattr(span, "source_name", None) is not None and span.source_name.name:
            if not is_tilelang_file(str(span.source_name.name)):
                found.append(str(span.source_name.name))

    tvm.tirx.stmt_functor.post_order_visit(prim_func.body, visit)
    return found[0] if found else None


# ============================================================================================
# End of the timeline section
# ============================================================================================
