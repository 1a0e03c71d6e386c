"""What every launch path shares about a kernel: compiling it and reading its signature
(:func:`prepare_kernel` -> :class:`Prepared`), one asynchronous call (:func:`call_kernel`), its
TMA alignment check, the work it does (:func:`count_work`), the reference it is checked against
(:func:`reference`) and the GPU it needs (:func:`require_gpu`).

The seam to TileLang is :func:`prepare_kernel` and :func:`call_kernel`; both go through
``tilelab._tilelang`` and touch only the public call of a compiled kernel.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..records.errors import NoGpuError, TilelabError
from . import _inputs
from ._inputs import Param

NO_GPU_MESSAGE = (
    "no CUDA GPU is visible to this Python process, so tilelab cannot launch or time CUDA kernels here "
    "(a kernel written for the CPU launches with target=\"c\"). "
    "Inspection still works without one: tilelab.inspect(kernel) and the %%tilelang magic show the "
    "generated CUDA, launchers, TMA descriptors, WGMMA instructions and layouts."
)


class MisalignedTensorError(TilelabError, ValueError):
    """A tensor read or written through a TMA descriptor does not start on the driver's boundary."""


def check_tma_alignment(prepared: Prepared, args: Sequence[Any]) -> None:
    """Raise :class:`MisalignedTensorError` naming the tensor when a TMA descriptor would get a
    ``globalAddress`` that ``cuTensorMapEncodeTiled`` refuses (16-byte alignment, 32 for some
    layouts), instead of letting the launcher fail. Inspection runs only when some tensor is not
    16-byte aligned (torch's own allocations always are)."""
    from ..engine import tma_rules as _tma_rules

    launch = [p for p in prepared.params if p.passed_at_launch]
    suspects = [(p, a) for p, a in zip(launch, args)
                if p.kind == "tensor" and hasattr(a, "data_ptr") and a.data_ptr() % 32]
    if not suspects:
        return
    descriptors = prepared.tma_descriptors()
    for p, a in suspects:
        for desc in descriptors:
            if desc.buffer != p.name:
                continue
            problems, _ = _tma_rules.check(desc, global_address=a.data_ptr())
            broken = [t for t in problems if "globalAddress" in t]
            if broken:
                unit = 32 if "32-byte" in broken[0] else 16
                raise MisalignedTensorError(
                    f"{prepared.name}: tensor {p.name} starts at {a.data_ptr():#x}, {a.data_ptr() % unit} bytes past "
                    f"a {unit}-byte boundary, but the kernel reads it through the TMA descriptor {desc.name}, and "
                    f"cuTensorMapEncodeTiled needs its globalAddress {unit}-byte aligned (the {unit}-byte rule). "
                    f"Pass {p.name}.clone() (a fresh, aligned copy) or a view whose offset is a multiple of "
                    f"{unit // a.element_size()} elements.")


def require_gpu() -> Any:  # the torch module
    """torch, with a CUDA device; NoGpuError (saying inspection still works) otherwise."""
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is a dependency
        raise NoGpuError(NO_GPU_MESSAGE + " (torch is not importable)") from err
    if not torch.cuda.is_available():
        raise NoGpuError(NO_GPU_MESSAGE)
    return torch


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""



@dataclass
class Prepared:
    """A compiled kernel and how to call it."""

    compiled: Any
    name: str
    params: list[Param]
    backend: str
    source: Any = None  # what the user passed, for inspection on failure

    @property
    def outputs(self) -> list[Param]:
        return [p for p in self.params if p.is_output]

    def flagged_problems(self) -> list[str]:
        from ..engine.inspect import inspect

        return list(inspect(self.compiled).problems)

    def tma_descriptors(self) -> tuple[Any, ...]:
        """The kernel's TMA descriptors from ``tilelab.inspect`` (empty when it cannot tell)."""
        from ..engine.inspect import inspect

        try:
            return tuple(inspect(self.compiled).tma_descriptors)
        except Exception:  # best effort: without it, the driver's own error still comes
            return ()

    def kernel_source(self) -> str | None:
        """The device source TileLang generated (the JITKernel's public ``get_kernel_source``)."""
        get = getattr(self.compiled, "get_kernel_source", None)
        if get is None:
            return None
        try:
            text = get()
        except Exception:
            return None
        return text if isinstance(text, str) else None


def is_tilelang_kernel(obj: Any) -> bool:
    from .. import _tilelang

    try:
        return _tilelang.kernel_kind(obj) is not None
    except Exception:
        return False


def prepare_kernel(kernel: Any, *, backend: str | None = None, out_idx: int | list[int] | None = None,
                   outputs: Sequence[str] | None = None, target: str | None = None,
                   pass_configs: dict[str, Any] | None = None, args: tuple[Any, ...] = (),
                   kwargs: dict[str, Any] | None = None) -> Prepared:
    """Compile ``kernel`` (unless it already is a compiled JITKernel) and read its signature.

    Every touch of TileLang is here: ``_tilelang.kernel_kind``/``compile_kernel``/
    ``resolve_kernel``/``arguments`` and the JITKernel attributes ``out_idx`` and
    ``execution_backend``. A kernel compiled without ``out_idx`` takes every tensor at launch;
    its outputs are those named in ``outputs`` (default: the last tensor parameter).
    """
    from .. import _tilelang

    kind = _tilelang.kernel_kind(kernel)
    if kind == "compiled":
        compiled = kernel
        if backend is not None and getattr(compiled, "execution_backend", backend) != backend:
            compiled = _tilelang.compile_kernel(compiled.prim_func, backend=backend, target=target,
                                               out_idx=list(compiled.out_idx or []) or None,
                                               pass_configs=pass_configs)
    else:
        idx = [out_idx] if isinstance(out_idx, int) else out_idx
        compiled = _tilelang.compile_kernel(kernel, backend=backend, target=target, out_idx=idx,
                                           pass_configs=pass_configs, args=tuple(args), kwargs=kwargs)
    source = _tilelang.resolve_kernel(compiled)
    params = _inputs.params_from_arguments(_tilelang.arguments(source, source.out_idx))
    if not any(p.is_output for p in params):
        tensors = [p for p in params if p.kind == "tensor"]
        wanted = set(outputs) if outputs else ({tensors[-1].name} if tensors else set())
        unknown = wanted - {p.name for p in tensors}
        if unknown:
            raise ValueError(f"outputs {sorted(unknown)} are not tensor parameters of {source.name}: "
                             f"{[p.name for p in tensors]}")
        params = [dataclasses.replace(p, is_output=p.name in wanted) for p in params]  # strided kept
    name = source.name
    used_backend = str(getattr(compiled, "execution_backend", None) or backend or "tvm_ffi")
    return Prepared(compiled, name, params, used_backend, source=kernel)


def call_kernel(prepared: Prepared, args: Sequence[Any]) -> list[Any]:
    """Launch once (asynchronously) and return the outputs in parameter order."""
    result = prepared.compiled(*args)
    launch = [p for p in prepared.params if p.passed_at_launch]
    outs: list[Any] = []
    returned = list(result) if isinstance(result, (list, tuple)) else ([] if result is None else [result])
    for p in prepared.params:
        if not p.is_output:
            continue
        if p.passed_at_launch:
            outs.append(args[launch.index(p)])
        else:
            outs.append(returned.pop(0))
    return outs


# ------------------------------------------------------------------------------------------
# Operation and byte counts
# ------------------------------------------------------------------------------------------




def count_work(params: Sequence[_inputs.Param], sizes: dict[str, int], source: str | None = None
               ) -> tuple[float | None, float]:
    """(flops, bytes) for a kernel's signature.

    bytes = every tensor read or written once. flops = 2*M*N*K only when the shapes read as a
    GEMM *and* ``source`` (the compiled kernel's ``get_kernel_source()``) calls a matrix
    multiply (``tilelab._tilelang.source.is_matrix_multiply``): shapes alone take C = A + B on square tensors for a
    GEMM. Otherwise None, and the kernel is rated by bytes alone (pass ``flops=`` to override)."""
    from .._tilelang.source import is_matrix_multiply  # the adapter package loads when a kernel is measured

    total = 0.0
    for p in params:
        if p.kind == "tensor":
            numel = math.prod(_inputs.eval_dim(d, sizes) for d in p.shape)
            total += numel * _inputs.element_bytes(p.dtype)
    flops = None
    if is_matrix_multiply(source):
        flops = gemm_flops(*_inputs.param_shapes(params, sizes))
    return flops, total


def gemm_flops(inputs: Sequence[tuple[int, ...]], outputs: Sequence[tuple[int, ...]]) -> float | None:
    """2*M*N*K when shapes read as C(M,N) = A(M,K|K,M) @ B(K,N|N,K); None when they do not."""
    mnk = _inputs.gemm_shape(inputs, outputs)
    return 2.0 * mnk[0] * mnk[1] * mnk[2] if mnk else None


# ------------------------------------------------------------------------------------------
# The reference
# ------------------------------------------------------------------------------------------


def reference(torch: Any, ref: Callable[..., Any], inputs: list[Any], ref_dtype: Any, notes: list[str]) -> list[Any]:
    tried = [ref_dtype] if ref_dtype is not None else [torch.float64, torch.float32]
    last: BaseException | None = None
    for dt in tried:
        try:
            value = ref(*_inputs.upcast(inputs, dt))
        except (RuntimeError, TypeError, NotImplementedError) as err:
            last = err
            continue
        if dt is not tried[0]:
            notes.append(f"the reference failed in {tried[0]} ({last}); evaluated in {dt}")
        vals = list(value) if isinstance(value, (list, tuple)) else [value]
        return [v.detach() if hasattr(v, "detach") else v for v in vals]
    raise RuntimeError(f"the reference failed in {[str(t) for t in tried]}: {last}") from last
