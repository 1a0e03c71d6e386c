"""Compiling through ``tilelang.compile`` (needs nvcc; launching needs a GPU) and TileLang's
caches: the in-memory cache's advisory, the ``force`` switch, and the disk cache entry of a
compiled kernel, how a kernel compiled on one machine (a CPU worker of a sweep) reaches another (a
GPU worker) without compiling again there."""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from ..records.errors import LoweringError
from .env import local_gpu_arch, tilelang
from .errors import _for_target, _lowering_error, tilelang_errors
from .resolve import kernel_kind, resolve_kernel


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


# The C types TileLang 0.1.15's CPU host wrapper (the function that calls a target-c kernel with its tensors and
# sizes) has no entry for, though its C back end prints them: a uint32 tensor or size failed with "Unsupported dtype".
HOST_C_TYPES = {"uint32": "uint32_t"}


def _complete_host_types() -> None:
    """Each of :data:`HOST_C_TYPES` added to TileLang's CPU host wrapper's table of C types."""
    from tilelang.jit.adapter.wrapper import TLCPUSourceWrapper

    table = TLCPUSourceWrapper._TYPE_MAP
    for dtype, c_type in HOST_C_TYPES.items():
        table.setdefault(dtype, c_type)


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
    from ..targets import parse_target

    return "cython" if target is not None and parse_target(target).family == "cpu" else "tvm_ffi"


def compile_kernel(obj: Any, *, target: Any = None, backend: str | None = None,
                   out_idx: list[int] | None = None, pass_configs: dict[str, Any] | None = None,
                   args: tuple = (), kwargs: dict | None = None, force: bool = False,
                   compile_flags: list[str] | None = None) -> Any:
    """``tilelang.compile`` for any kernel-like object; returns TileLang's JITKernel.

    ``target`` is any spec :func:`tilelab.targets.parse_target` accepts (default: the local GPU,
    else sm_90a); ``backend`` defaults to :func:`default_backend`. ``force`` compiles afresh:
    TileLang's kernel cache (in memory and on disk) is off for this compile and restored after.
    ``compile_flags``: extra options of the host or device compiler (part of TileLang's cache key).
    """
    from ..targets import local_cuda_target, parse_target

    tl = tilelang()
    _quiet_memory_cache_advice()
    source = resolve_kernel(obj, args, kwargs)
    local = None if target else local_gpu_arch()
    resolved = local_cuda_target(local) if local else parse_target(target or "sm_90a")
    backend = backend or default_backend(resolved)
    if resolved.family == "cpu":
        _complete_host_types()
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
                **({"compile_flags": list(compile_flags)} if compile_flags else {}),
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
