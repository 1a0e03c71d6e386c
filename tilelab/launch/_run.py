"""``tilelab.run``: build inputs, poison outputs, launch, synchronise, verify.

The seam to TileLang is :func:`prepare_kernel` (compile + signature) and :func:`call_kernel`;
both go through ``tilelab._adapter`` and touch only the public call of a compiled kernel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .._errors import NoGpuError, TilelabError
from . import _checks, _inputs
from ._inputs import Param
from .models import RunResult

NO_GPU_MESSAGE = (
    "no CUDA GPU is visible to this Python process, so tilelab cannot launch or time CUDA kernels here "
    "(a kernel written for the CPU launches with target=\"c\"). "
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
        self.isolated = False  # True when it happened in a worker process (the notebook's context is intact)
        self.located: str | None = None  # compute-sanitizer's finding, when tilelab could locate the fault
        super().__init__(str(self))

    def __reduce__(self) -> tuple[Any, ...]:  # crosses from the worker process intact
        return (_rebuild_launch_error, (self.kernel, self.kind, self.detail, self.cause, self.sticky, self.flagged,
                                        self.isolated, self.located))

    def __str__(self) -> str:
        text = f"{self.kernel}: {CUDA_ERROR_KINDS.get(self.kind, ('launch failed', ''))[0]} ({self.detail.strip()[:300]})"
        if self.cause:
            text += f"\n  likely cause: {self.cause}"
        for item in self.flagged:
            text += f"\n  flagged by inspection: {item}"
        if self.located:
            text += f"\n  compute-sanitizer located it: {self.located}"
        elif self.kind in ("illegal_address", "misaligned_address"):
            text += ("\n  To find the line and the buffer: tilelab.sanitize(kernel, ...) or %%tilelang --sanitize "
                     "runs it once under compute-sanitizer.")
        if self.sticky and self.isolated:
            text += ("\n  It happened in tilelab's worker process, which was discarded: this notebook's CUDA context "
                     "is untouched and the next launch starts a fresh worker.")
        elif self.sticky:
            text += ("\n  The CUDA context is now unusable (the error is sticky): restart the Python kernel "
                     "before launching again.")
        return text


def _rebuild_launch_error(kernel: str, kind: str, detail: str, cause: str | None, sticky: bool,
                          flagged: Sequence[str], isolated: bool, located: str | None) -> "KernelLaunchError":
    err = KernelLaunchError(kernel, kind, detail, cause, sticky, flagged)
    err.isolated, err.located = isolated, located
    return err


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
    "timeout": ("the kernel did not finish", "a loop that never exits, an mbarrier phase that never completes, "
                "or a producer/consumer deadlock"),
    "other": ("launch failed", ""),
}
# Word boundaries everywhere: "TMA" must not match inside "bitmap", "tensor map" not inside a name.
_PATTERNS: list[tuple[str, str, bool]] = [
    (r"\btensor ?map\b|\bCUtensorMap\w*|\bcuTensorMapEncode\w*|\bTMA\b", "tma_descriptor", False),
    (r"\billegal memory access\b|\billegal address\b|\bILLEGAL_ADDRESS\b|\bIllegalAddress\b|"
     r"\baddress space\b|\bInvalidAddressSpace\b", "illegal_address", True),
    (r"\bmisaligned address\b|\bMISALIGNED_ADDRESS\b|\bMisalignedAddress\b", "misaligned_address", True),
    (r"\bout of memory\b|\bOUT_OF_MEMORY\b|\bMemoryAllocation\b", "out_of_memory", False),
    (r"\btoo many resources\b|\bshared memory\b|\bOUT_OF_RESOURCES\b|\bLaunchOutOfResources\b|"
     r"\binvalid configuration\b", "resources", False),
    (r"\bunspecified launch failure\b|\bLAUNCH_FAILED\b|\blaunch failure\b|\bdevice-side assert|"
     r"\billegal instruction\b|\bLAUNCH_TIMEOUT\b|\bunknown error\b", "launch_failure", True),
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


def is_out_of_memory(err: BaseException) -> bool:
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", None) or getattr(torch, "OutOfMemoryError", None)
    return (oom is not None and isinstance(err, oom)) or classify_cuda_error(str(err))[0] == "out_of_memory"


def out_of_memory_error(kernel_name: str, what: str, err: BaseException) -> KernelLaunchError:
    """OOM before the launch (inputs, rotating copies, the L2-flush buffer) as a KernelLaunchError."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return KernelLaunchError(kernel_name, "out_of_memory", f"while allocating {what}: {memory_text(str(err))}; {first}",
                             f"{what} do not fit in the GPU's free memory: use smaller sizes, free tensors "
                             "you hold (del x; torch.cuda.empty_cache()) or fewer rotating copies")


def memory_text(message: str, free_total: tuple[int, int] | None = None) -> str:
    """"asked for 2.00 GiB, 1.25 GiB free of 79.19 GiB": the request from the allocator's message
    (torch's "Tried to allocate X") and the device's free memory (cudaMemGetInfo, or ``free_total``)."""
    asked = re.search(r"[Tt]ried to allocate ([\d.]+ ?[KMGT]?i?B)", message)
    parts = [f"asked for {asked.group(1)}"] if asked else []
    if free_total is None:
        try:
            import torch

            free_total = tuple(int(v) for v in torch.cuda.mem_get_info())  # type: ignore[assignment]
        except Exception:
            free_total = None
    if free_total is not None:
        free, total = free_total
        parts.append(f"{free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB")
    return ", ".join(parts) or "the allocator did not say how much"


class MisalignedTensorError(TilelabError, ValueError):
    """A tensor read or written through a TMA descriptor does not start on the driver's boundary."""


def check_tma_alignment(prepared: Prepared, args: Sequence[Any]) -> None:
    """Raise :class:`MisalignedTensorError` naming the tensor when a TMA descriptor would get a
    ``globalAddress`` that ``cuTensorMapEncodeTiled`` refuses (16-byte alignment, 32 for some
    layouts), instead of letting the launcher fail. Inspection runs only when some tensor is not
    16-byte aligned (torch's own allocations always are)."""
    from .. import _tma_rules

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

    def tma_descriptors(self) -> tuple[Any, ...]:
        """The kernel's TMA descriptors from ``tilelab.inspect`` (empty when it cannot tell)."""
        from .._inspect import inspect

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
        compiled = _adapter.compile_kernel(kernel, backend=backend, target=target, out_idx=idx,
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


def _poison_allocator(torch: Any, nbytes: list[int], pattern: int = _inputs.POISON) -> list[tuple[int, int]]:
    """Poison the blocks the caching allocator will hand to outputs the kernel allocates itself.

    Kernels compiled with ``out_idx`` allocate their outputs inside the call (``torch.empty``);
    emptying the cache, then allocating, poisoning and freeing blocks of the same sizes makes
    those the blocks the call receives. The caller checks the pointers to know it worked.
    """
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    blocks = [torch.empty(max(n, 1), dtype=torch.uint8, device="cuda") for n in nbytes]
    for b in blocks:
        b.fill_(pattern)
    torch.cuda.synchronize()
    ranges = [(b.data_ptr(), b.data_ptr() + b.numel()) for b in blocks]
    del blocks
    return ranges


def _poisoned_launch(torch: Any, prepared: Prepared, args: list[Any], bound: dict[str, int],
                     pattern: int) -> tuple[list[Any], list[bool]]:
    """Poison every output with ``pattern``, launch, synchronise: (outputs, poisoned per output)."""
    launch = [p for p in prepared.params if p.passed_at_launch]
    for a, p in zip(args, launch):
        if p.is_output:
            _inputs.poison_(a, pattern)
    callee = [p for p in prepared.outputs if not p.passed_at_launch]
    ranges: list[tuple[int, int]] = []
    if callee:
        nbytes = [math.prod(_inputs.eval_dim(d, bound) for d in p.shape)
                  * torch.empty((), dtype=_inputs.torch_dtype(p.dtype)).element_size() for p in callee]
        ranges = _poison_allocator(torch, nbytes, pattern)
    try:
        outs = call_kernel(prepared, args)
        torch.cuda.synchronize()
    except Exception as err:
        raise launch_error(prepared.name, err, prepared.flagged_problems) from err
    poisoned = [True if p.passed_at_launch else any(lo <= o.data_ptr() < hi for lo, hi in ranges)
                for p, o in zip(prepared.outputs, outs)]
    return outs, poisoned


def run(kernel: Any, *tensors_or_shapes: Any, ref: Callable[..., Any] | None = None,
        tolerance: float | None = None, backend: str | None = None, out_idx: int | list[int] | None = None,
        outputs: Sequence[str] | None = None, seed: int | None = None, ref_dtype: Any = None,
        worst: int = 5, isolate: bool = True, timeout: float | None = None, tile: Sequence[int] | None = None,
        target: Any = None, **sizes: int) -> RunResult:
    """Launch ``kernel`` once on the GPU and verify it.

    Inputs not given are built from the signature (random values of each dtype, on the GPU);
    dynamic sizes come from keyword arguments (``M=4096``) or from the tensors and shapes given,
    and tensors given are checked (shape, dtype, device, contiguity, TMA alignment) first.
    Outputs are poisoned (every byte 0xFF) before the launch and checked for elements never
    written; where 0xFF bytes are a valid value of the output's dtype (integers, fnuz float8)
    the kernel is launched a second time with another pattern, and an element counts as
    unwritten only if it kept the poison both times. With ``ref``, a callable on the same inputs
    (upcast to float64, integers too where exact, or ``ref_dtype``), each output is compared by
    relative error norm against ``tolerance``, by default :func:`tilelab.launch.tolerance_for`
    of the output's dtype, the inputs' dtypes and the reduction length K of a GEMM-shaped kernel.
    An output that fails carries a map of its tiles (``OutputCheck.tiles``: wrong, unwritten or
    right per tile of the kernel's block shape, or of ``tile=(rows, cols)``).

    The launch happens in tilelab's warm worker process (``isolate=True``, the default): a kernel
    that hangs ends in :class:`KernelLaunchError` (kind "timeout") after ``timeout`` seconds
    (default 30), and an illegal address loses the worker's CUDA context, not this process's.
    ``isolate=False`` launches in this process.

    ``target="c"`` (or a kernel compiled for target ``c``) launches on the CPU with CPU tensors
    (``tilelab.launch._cpu``); AMD and Apple targets are inspect-only and refused with a reason.
    """
    from . import _cpu

    if _cpu.wants_cpu(kernel, target):
        return _cpu.run(kernel, tensors_or_shapes, ref=ref, tolerance=tolerance, backend=backend, out_idx=out_idx,
                        outputs=outputs, seed=seed, ref_dtype=ref_dtype, worst=worst, sizes=sizes)
    torch = require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs)
    try:
        args, bound = _inputs.build_inputs(prepared.params, tensors_or_shapes, sizes, device="cuda", seed=seed)
    except Exception as err:
        if is_out_of_memory(err):
            raise out_of_memory_error(prepared.name, "the inputs and outputs", err) from err
        raise
    check_tma_alignment(prepared, args)
    launch = [p for p in prepared.params if p.passed_at_launch]
    notes: list[str] = []
    inputs = [a for a, p in zip(args, launch) if not p.is_output]
    # Reference first, on copies: a kernel that writes its inputs must not change what ref sees.
    expected: list[Any] | None = None
    if ref is not None:
        expected = _reference(torch, ref, inputs, ref_dtype, notes)
    outs, poisoned, seconds = _checks.poisoned_launches(_launcher(torch, isolate, timeout), prepared, args, bound, notes)
    if expected is not None and len(expected) != len(outs):
        raise ValueError(f"ref returned {len(expected)} tensors; {prepared.name} has {len(outs)} outputs "
                         f"({', '.join(p.name for p in prepared.outputs)})")
    checks = _checks.check_outputs(prepared, bound, outs, expected, poisoned, seconds, notes, tolerance=tolerance,
                                   worst=worst, tile=tile,
                                   unpoisoned="is allocated by the kernel's launcher and did not reuse the poisoned block")
    return RunResult(kernel=prepared.name, outputs=tuple(checks), backend=prepared.backend,
                     device=torch.cuda.get_device_name(), sizes=tuple(sorted(bound.items())),
                     reference=getattr(ref, "__name__", "ref") if ref is not None else None, notes=tuple(notes))


def _launcher(torch: Any, isolate: bool, timeout: float | None) -> Callable[..., tuple[list[Any], list[bool]]]:
    """The poisoned launch, here or in the worker (never a worker inside the worker)."""
    from . import _worker

    if isolate and not _worker.in_worker():
        from . import _isolated

        worker = _worker.default_worker()
        return lambda prepared, args, bound, pattern: _isolated.poisoned_launch(
            worker, prepared, args, bound, pattern, timeout)
    return lambda prepared, args, bound, pattern: _poisoned_launch(torch, prepared, args, bound, pattern)


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
