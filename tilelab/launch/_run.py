"""Verify a kernel here: build inputs, poison outputs, launch, synchronise, check.

:func:`verify` does the work of :func:`tilelab.run` with a launcher it is given: a launch in this
process (:func:`poisoned_launch`) or in the worker process (``_isolated.poisoned_launch``), as the
front door (``_api.py``) chose.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..records.launch import RunResult
from . import _checks, _inputs
from ._cuda_errors import (
    CUDA_ERROR_KINDS,
    KernelLaunchError,
    classify_cuda_error,
    is_out_of_memory,
    launch_error,
    memory_text,
    out_of_memory_error,
)
from ._kernel import (
    NO_GPU_MESSAGE,
    MisalignedTensorError,
    Prepared,
    call_kernel,
    check_tma_alignment,
    device_name,
    is_tilelang_kernel,
    prepare_kernel,
    reference,
    require_gpu,
)
from ._options import RunOptions
from ._tma_refusal import refused_rules

# A launch: (prepared, launch arguments, bound sizes, poison pattern) -> (outputs, poisoned per output)
Launcher = Callable[[Prepared, list[Any], dict[str, int], int], tuple[list[Any], list[bool]]]


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


def poisoned_launch(torch: Any, prepared: Prepared, args: list[Any], bound: dict[str, int],
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
        raise launch_error(prepared.name, err, prepared.flagged_problems,
                           tma_rules=lambda message: refused_rules(prepared, args, bound, message)) from err
    poisoned = [True if p.passed_at_launch else any(lo <= o.data_ptr() < hi for lo, hi in ranges)
                for p, o in zip(prepared.outputs, outs)]
    return outs, poisoned



def verify(torch: Any, prepared: Prepared, tensors_or_shapes: Sequence[Any], opts: RunOptions,
           sizes: dict[str, int], launcher: Launcher) -> RunResult:
    """:func:`tilelab.run` of a prepared kernel on the GPU, each launch made by ``launcher``."""
    try:
        args, bound = _inputs.build_inputs(prepared.params, tensors_or_shapes, sizes, device="cuda", seed=opts.seed)
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
    if opts.ref is not None:
        expected = reference(torch, opts.ref, inputs, opts.ref_dtype, notes)
    snapshot = _checks.snapshot_inputs(prepared, args, notes)
    outs, poisoned, seconds = _checks.poisoned_launches(launcher, prepared, args, bound, notes)
    if expected is not None and len(expected) != len(outs):
        raise ValueError(f"ref returned {len(expected)} tensors; {prepared.name} has {len(outs)} outputs "
                         f"({', '.join(p.name for p in prepared.outputs)})")
    checks = _checks.check_outputs(prepared, bound, outs, expected, poisoned, seconds, notes,
                                   tolerance=opts.tolerance, worst=opts.worst, tile=opts.tile,
                                   unpoisoned="is allocated by the kernel's launcher and did not reuse the poisoned "
                                              "block")
    inputs_after = _checks.inputs_after_launch(snapshot, checks, notes)
    return RunResult(kernel=prepared.name, outputs=tuple(checks), backend=prepared.backend,
                     device=torch.cuda.get_device_name(), sizes=tuple(sorted(bound.items())),
                     reference=getattr(opts.ref, "__name__", "ref") if opts.ref is not None else None,
                     notes=tuple(notes),
                     inputs=inputs_after)


__all__ = [  # what this module's users import from it (the errors and kernel helpers are re-exported)
    "CUDA_ERROR_KINDS", "KernelLaunchError", "Launcher", "MisalignedTensorError", "NO_GPU_MESSAGE", "Prepared",
    "call_kernel", "classify_cuda_error", "device_name", "is_out_of_memory", "is_tilelang_kernel", "launch_error",
    "memory_text", "out_of_memory_error", "poisoned_launch", "prepare_kernel", "require_gpu", "verify",
]
