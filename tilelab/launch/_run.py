"""``tilelab.run``: build inputs, poison outputs, launch, synchronise, verify.

The seam to TileLang is :func:`prepare_kernel` (compile + signature) and :func:`call_kernel`;
both go through ``tilelab._adapter`` and touch only the public call of a compiled kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .._errors import NoGpuError, TilelabError
from . import _inputs
from ._inputs import Param
from .models import RunResult

NO_GPU_MESSAGE = (
    "no CUDA GPU is visible to this Python process, so tilelab cannot launch or time kernels here. "
    "Inspection still works without one: tilelab.inspect(kernel) and the %%tilelang magic show the "
    "generated CUDA, launchers, TMA descriptors, WGMMA instructions and layouts."
)


class KernelLaunchError(TilelabError, RuntimeError):
    """A launch failed on the GPU; ``cause`` is what tilelab thinks went wrong (may be None).

    ``kind`` is one of "illegal_address", "misaligned_address", "launch_failure",
    "out_of_memory", "tma_descriptor", "resources", "other". ``sticky`` is True when the CUDA
    context is now unusable and the Python process must be restarted before the next launch.
    """

    def __init__(self, kernel: str, kind: str, detail: str, cause: str | None = None,
                 sticky: bool = False, flagged: Sequence[str] = ()) -> None:
        self.kernel, self.kind, self.detail, self.cause = kernel, kind, detail, cause
        self.sticky, self.flagged = sticky, tuple(flagged)
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.kernel}: {CUDA_ERROR_KINDS.get(self.kind, ('launch failed', ''))[0]} ({self.detail.strip()[:300]})"
        if self.cause:
            text += f"\n  likely cause: {self.cause}"
        for item in self.flagged:
            text += f"\n  flagged by inspection: {item}"
        if self.sticky:
            text += ("\n  The CUDA context is now unusable (the error is sticky): restart the Python kernel "
                     "before launching again.")
        return text


# kind -> (headline, likely cause), matched against the driver/runtime message in order.
CUDA_ERROR_KINDS: dict[str, tuple[str, str]] = {
    "tma_descriptor": ("the driver rejected a TMA descriptor",
                       "a cuTensorMapEncode rule is broken (address or stride alignment, box size, swizzle "
                       "span against the inner box); tilelab.inspect(kernel).tma_descriptors lists each"),
    "illegal_address": ("illegal memory access",
                        "a thread read or wrote outside its buffers (an address no allocation "
                        "covers): an index past a tile edge, a wrong stride, or a dynamic size larger than "
                        "the tensor passed"),
    "misaligned_address": ("misaligned address",
                           "a vectorised or bulk (TMA) access at an address not aligned to its width: a "
                           "tensor view whose offset or stride is not a multiple of 16 bytes"),
    "out_of_memory": ("out of GPU memory", "the inputs, outputs and L2-flush buffer do not fit; use smaller sizes"),
    "resources": ("the launch asked for more than the device allows",
                  "too much shared memory or too many registers or threads per block for this GPU"),
    "launch_failure": ("the kernel failed", "an exception inside the kernel (trap, assert, timeout)"),
    "other": ("launch failed", ""),
}
_PATTERNS: list[tuple[str, str, bool]] = [
    (r"tensor ?map|tensormap|cuTensorMapEncode|TMA", "tma_descriptor", False),
    (r"illegal memory access|illegal address|ILLEGAL_ADDRESS|address space|InvalidAddressSpace",
     "illegal_address", True),
    (r"misaligned address|MISALIGNED", "misaligned_address", True),
    (r"out of memory|OUT_OF_MEMORY", "out_of_memory", False),
    (r"too many resources|shared memory|OUT_OF_RESOURCES|invalid configuration", "resources", False),
    (r"unspecified launch failure|LAUNCH_FAILED|launch failure|device-side assert|illegal instruction|"
     r"LAUNCH_TIMEOUT|unknown error", "launch_failure", True),
]


def classify_cuda_error(message: str) -> tuple[str, bool]:
    """(kind, sticky) for a CUDA error message; ("other", False) when nothing matches."""
    for pattern, kind, sticky in _PATTERNS:
        if re.search(pattern, message, re.IGNORECASE):
            return kind, sticky
    return "other", False


def launch_error(kernel_name: str, err: BaseException, flagged: Callable[[], Sequence[str]] | None = None
                 ) -> KernelLaunchError:
    kind, sticky = classify_cuda_error(str(err))
    cause = CUDA_ERROR_KINDS[kind][1] or None
    problems: Sequence[str] = ()
    if flagged is not None and kind in ("tma_descriptor", "illegal_address", "misaligned_address", "other"):
        try:
            problems = list(flagged())
        except Exception:  # inspection is best effort here: the launch error is what matters
            problems = ()
        if problems and kind in ("other", "misaligned_address"):
            cause = "the TMA descriptor problem that inspection had already flagged (below)"
    return KernelLaunchError(kernel_name, kind, f"{type(err).__name__}: {err}", cause, sticky, problems)


def require_gpu():  # -> torch module
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


# ------------------------------------------------------------------------------------------
# The TileLang seam (to move into tilelab/_adapter.py)
# ------------------------------------------------------------------------------------------


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
        from .._inspect import inspect

        return list(inspect(self.compiled).problems)


def is_tilelang_kernel(obj: Any) -> bool:
    from .. import _adapter

    try:
        return _adapter.kernel_kind(obj) is not None
    except Exception:
        return False


def prepare_kernel(kernel: Any, *, backend: str | None = None, out_idx: int | list[int] | None = None,
                   outputs: Sequence[str] | None = None, target: str | None = None,
                   pass_configs: dict[str, Any] | None = None, args: tuple = (),
                   kwargs: dict | None = None) -> Prepared:
    """Compile ``kernel`` (unless it already is a compiled JITKernel) and read its signature.

    Every touch of TileLang is here: ``_adapter.kernel_kind``/``compile_kernel``/
    ``resolve_kernel``/``arguments`` and the JITKernel attributes ``out_idx`` and
    ``execution_backend``. A kernel compiled without ``out_idx`` takes every tensor at launch;
    its outputs are those named in ``outputs`` (default: the last tensor parameter).
    """
    from .. import _adapter

    kind = _adapter.kernel_kind(kernel)
    if kind == "compiled":
        compiled = kernel
        if backend is not None and getattr(compiled, "execution_backend", backend) != backend:
            compiled = _adapter.compile_kernel(compiled.prim_func, backend=backend, target=target,
                                               out_idx=list(compiled.out_idx or []) or None,
                                               pass_configs=pass_configs)
    else:
        idx = [out_idx] if isinstance(out_idx, int) else out_idx
        compiled = _adapter.compile_kernel(kernel, backend=backend or "tvm_ffi", target=target, out_idx=idx,
                                           pass_configs=pass_configs, args=tuple(args), kwargs=kwargs)
    source = _adapter.resolve_kernel(compiled)
    params = _inputs.params_from_arguments(_adapter.arguments(source, source.out_idx))
    if not any(p.is_output for p in params):
        tensors = [p for p in params if p.kind == "tensor"]
        wanted = set(outputs) if outputs else ({tensors[-1].name} if tensors else set())
        unknown = wanted - {p.name for p in tensors}
        if unknown:
            raise ValueError(f"outputs {sorted(unknown)} are not tensor parameters of {source.name}: "
                             f"{[p.name for p in tensors]}")
        params = [Param(p.name, p.kind, p.dtype, p.shape, p.name in wanted, p.passed_at_launch) for p in params]
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
# run
# ------------------------------------------------------------------------------------------


def _poison_allocator(torch: Any, nbytes: list[int]) -> list[tuple[int, int]]:
    """Poison the blocks the caching allocator will hand to outputs the kernel allocates itself.

    Kernels compiled with ``out_idx`` allocate their outputs inside the call (``torch.empty``);
    emptying the cache, then allocating, poisoning and freeing blocks of the same sizes makes
    those the blocks the call receives. The caller checks the pointers to know it worked.
    """
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    blocks = [torch.empty(max(n, 1), dtype=torch.uint8, device="cuda") for n in nbytes]
    for b in blocks:
        b.fill_(0xFF)
    torch.cuda.synchronize()
    ranges = [(b.data_ptr(), b.data_ptr() + b.numel()) for b in blocks]
    del blocks
    return ranges


def run(kernel: Any, *tensors_or_shapes: Any, ref: Callable[..., Any] | None = None,
        tolerance: float | None = None, backend: str | None = None, out_idx: int | list[int] | None = None,
        outputs: Sequence[str] | None = None, seed: int | None = None, ref_dtype: Any = None,
        worst: int = 5, **sizes: int) -> RunResult:
    """Launch ``kernel`` once on the GPU and verify it.

    Inputs not given are built from the signature (random values of each dtype, on the GPU);
    dynamic sizes come from keyword arguments (``M=4096``) or from the tensors and shapes given.
    Outputs are poisoned (every byte 0xFF) before the launch and checked for elements never
    written. With ``ref``, a callable on the same inputs (upcast to float64, or ``ref_dtype``),
    each output is compared by relative error norm against a tolerance chosen from the dtypes.
    """
    torch = require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs)
    args, bound = _inputs.build_inputs(prepared.params, tensors_or_shapes, sizes, device="cuda", seed=seed)
    launch = [p for p in prepared.params if p.passed_at_launch]
    notes: list[str] = []
    inputs = [a for a, p in zip(args, launch) if not p.is_output]
    # Reference first, on copies: a kernel that writes its inputs must not change what ref sees.
    expected: list[Any] | None = None
    if ref is not None:
        expected = _reference(torch, ref, inputs, ref_dtype, notes)
    for a, p in zip(args, launch):
        if p.is_output:
            _inputs.poison_(a)
    callee = [p for p in prepared.outputs if not p.passed_at_launch]
    ranges: list[tuple[int, int]] = []
    if callee:
        nbytes = []
        for p in callee:
            numel = 1
            for d in p.shape:
                numel *= _inputs.eval_dim(d, bound)
            nbytes.append(numel * torch.empty((), dtype=_inputs.torch_dtype(p.dtype)).element_size())
        ranges = _poison_allocator(torch, nbytes)
    try:
        outs = call_kernel(prepared, args)
        torch.cuda.synchronize()
    except Exception as err:
        raise launch_error(prepared.name, err, prepared.flagged_problems) from err
    if expected is not None and len(expected) != len(outs):
        raise ValueError(f"ref returned {len(expected)} tensors; {prepared.name} has {len(outs)} outputs "
                         f"({', '.join(p.name for p in prepared.outputs)})")
    dtypes = [p.dtype for p in prepared.params if p.kind == "tensor"]
    tol = tolerance if tolerance is not None else _inputs.tolerance_for(dtypes)
    checks = []
    for i, (p, out) in enumerate(zip(prepared.outputs, outs)):
        poisoned = True
        if not p.passed_at_launch:
            ptr = out.data_ptr()
            poisoned = any(lo <= ptr < hi for lo, hi in ranges)
            if not poisoned:
                notes.append(f"{p.name} is allocated by the kernel's launcher and did not reuse the poisoned "
                             "block: unwritten elements were not checked")
        checks.append(_inputs.compare(p.name, out, expected[i] if expected is not None else None,
                                      tolerance=tol, poisoned=poisoned, worst=worst))
    return RunResult(kernel=prepared.name, outputs=tuple(checks), backend=prepared.backend,
                     device=torch.cuda.get_device_name(), sizes=tuple(sorted(bound.items())),
                     reference=getattr(ref, "__name__", "ref") if ref is not None else None, notes=tuple(notes))


def _reference(torch: Any, ref: Callable[..., Any], inputs: list[Any], ref_dtype: Any, notes: list[str]) -> list[Any]:
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
