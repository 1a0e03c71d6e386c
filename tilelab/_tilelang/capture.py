"""Capturing the kernels a script compiles, and TileLang's own lowering of them (used by
``python -m tilelab corpus``; kept apart from the inspection engine)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..records.errors import LoweringError
from .env import tilelang
from .errors import _lowering_error, _PassTracker, diagnosed, tilelang_errors


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
    tl_cache: Any = importlib.import_module("tilelang.cache")  # TileLang's modules, patched below
    tl_jit: Any = importlib.import_module("tilelang.jit")

    def cached(func=None, out_idx=None, *args, target=None, target_host=None, execution_backend=None,
               verbose=None, pass_configs=None, compile_flags=None):
        if isinstance(out_idx, int):
            out_idx = [out_idx]
        return on_compile(CompileRequest(func, list(out_idx) if out_idx is not None else None,
                                         dict(pass_configs or {}), target, execution_backend))

    saved = (tl_cache.cached, tl_jit.cached)
    tl_cache.cached = tl_jit.cached = cached
    _ORIGINALS.append(saved)
    try:
        yield
    finally:
        _ORIGINALS.pop()
        tl_cache.cached, tl_jit.cached = saved


_ORIGINALS: list[tuple[Any, Any]] = []  # what each active intercept_compiles replaced


@contextlib.contextmanager
def compiles_not_intercepted():
    """Inside :func:`intercept_compiles`: TileLang compiles as usual again (tilelab's own compiles,
    such as a CPU run of a captured kernel, are not captured as the script's)."""
    import importlib

    if not _ORIGINALS:
        yield
        return
    tl_cache: Any = importlib.import_module("tilelang.cache")
    tl_jit: Any = importlib.import_module("tilelang.jit")
    current = (tl_cache.cached, tl_jit.cached)
    tl_cache.cached, tl_jit.cached = _ORIGINALS[-1]
    try:
        yield
    finally:
        tl_cache.cached, tl_jit.cached = current


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
            callee_allocates = context.execution_backend.supports_callee_allocated_outputs
            prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
                func, out_idx, supports_callee_allocated_outputs=callee_allocates
            )
            with (tl.transform.PassContext(opt_level=3, config=pass_configs, instruments=[tracker.build()]),
                  context.target):
                lower_with_context(prepared, context, enable_host_codegen=True, enable_device_compile=False)
    except LoweringError as err:
        diagnosed(err, func=func, pass_name=tracker.failing, target_family="cuda")  # adds to err itself
        raise
    except Exception as err:
        raise _lowering_error(err, name, func=func, pass_name=tracker.failing, target_family="cuda") from err
