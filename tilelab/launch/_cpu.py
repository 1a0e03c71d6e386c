"""Launching on the CPU: ``run``/``bench``/``sweep`` for kernels compiled for target ``c``.

TileLang 0.1.15 compiles target ``c`` kernels to C, builds them with the host compiler and calls
them through its cython backend on CPU torch tensors. tilelab uses the same inputs, poisoned
outputs, tolerances and result models as on the GPU; only the clock differs: a CPU kernel is
timed with a wall clock (``time.perf_counter_ns``) around each call, which returns when the
kernel has finished (the call is synchronous), so no events or synchronisation are needed.

The front door (``_api.py``) chooses this path with :func:`wants_cpu` and hands a kernel
:func:`prepare` made to :func:`run` or :func:`bench` here.
"""

from __future__ import annotations

import functools
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..records.errors import BaselineError, TilelabError
from ..records.launch import BenchResult, RunResult
from . import _checks, _inputs, _ratio
from ._kernel import Prepared, call_kernel, count_work, prepare_kernel, reference
from ._options import BenchOptions, RunOptions

CPU_METHOD = ("wall clock (time.perf_counter_ns) around each synchronous call on the CPU, "
              "back to back, inputs warm in the CPU caches")


class InspectOnlyTargetError(TilelabError, RuntimeError):
    """A launch was asked for a target tilelab can only inspect (AMD and Apple GPUs)."""


def wants_cpu(kernel: Any, target: Any = None) -> bool:
    """True when ``kernel`` is to be launched on the CPU: ``target`` names the CPU, or the kernel
    was compiled for it. Raises :class:`InspectOnlyTargetError` for targets tilelab only inspects."""
    from .. import _tilelang
    from ..targets import launch_refusal, parse_target

    if target is not None:
        resolved = parse_target(target)
        if resolved.family == "cpu":
            return True
        if resolved.family != "cuda":
            raise InspectOnlyTargetError(launch_refusal(resolved, has_cuda_gpu=_tilelang.has_gpu()))
        return False
    compiled = getattr(kernel, "compiled", kernel)  # a Prepared, or a JITKernel
    family = _tilelang.compiled_target_family(compiled)
    if family is not None and family not in ("cuda", "cpu"):
        resolved = parse_target(_tilelang.compiled_target_name(compiled))
        raise InspectOnlyTargetError(launch_refusal(resolved, has_cuda_gpu=_tilelang.has_gpu()))
    return family == "cpu"


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """The host CPU's model name (from /proc/cpuinfo where there is one), for result models."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return "CPU: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU: " + (platform.processor() or platform.machine() or "unknown")


def _torch():
    import torch

    return torch


def prepare(kernel: Any, *, backend: str | None, out_idx: Any, outputs: Sequence[str] | None) -> Prepared:
    """``kernel`` compiled for target ``c`` (unless it already is a prepared one)."""
    if isinstance(kernel, Prepared):
        return kernel
    return prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs, target="c")


def _launch(prepared: Prepared, args: list[Any], pattern: int) -> tuple[list[Any], list[bool]]:
    launch = [p for p in prepared.params if p.passed_at_launch]
    for a, p in zip(args, launch):
        if p.is_output:
            _inputs.poison_(a, pattern)
    try:
        outs = call_kernel(prepared, args)
    except Exception as err:
        raise TilelabError(f"{prepared.name}: the CPU kernel failed: {type(err).__name__}: {err}") from err
    # Outputs the launcher allocates itself (out_idx) come from torch's CPU allocator, which
    # cannot be poisoned beforehand: those are not checked for unwritten elements.
    return outs, [p.passed_at_launch for p in prepared.outputs]


def run(prepared: Prepared, tensors_or_shapes: Sequence[Any], opts: RunOptions, sizes: dict[str, int]) -> RunResult:
    """:func:`tilelab.run` on the CPU (same checks and result model) of a kernel :func:`prepare` made."""
    torch = _torch()
    ref = opts.ref
    args, bound = _inputs.build_inputs(prepared.params, tensors_or_shapes, sizes, device="cpu", seed=opts.seed)
    launch = [p for p in prepared.params if p.passed_at_launch]
    notes: list[str] = []
    inputs = [a for a, p in zip(args, launch) if not p.is_output]
    expected = reference(torch, ref, inputs, opts.ref_dtype, notes) if ref is not None else None
    snapshot = _checks.snapshot_inputs(prepared, args, notes)
    outs, poisoned, seconds = _checks.poisoned_launches(
        lambda prepared, args, bound, pattern: _launch(prepared, args, pattern), prepared, args, bound, notes)
    if expected is not None and len(expected) != len(outs):
        raise ValueError(f"ref returned {len(expected)} tensors; {prepared.name} has {len(outs)} outputs "
                         f"({', '.join(p.name for p in prepared.outputs)})")
    checks = _checks.check_outputs(prepared, bound, outs, expected, poisoned, seconds, notes,
                                   tolerance=opts.tolerance, worst=opts.worst, tile=None,
                                   unpoisoned="is allocated by the kernel's launcher (out_idx) from torch's CPU "
                                              "allocator, which cannot be poisoned first")
    inputs_after = _checks.inputs_after_launch(snapshot, checks, notes)
    return RunResult(kernel=prepared.name, outputs=tuple(checks), backend=prepared.backend, device=cpu_name(),
                     sizes=tuple(sorted(bound.items())),
                     reference=getattr(ref, "__name__", "ref") if ref is not None else None, notes=tuple(notes),
                     inputs=inputs_after)


def time_calls(fn: Callable[[], Any], n_warmup: int, n_rep: int) -> list[float]:
    """Milliseconds of each of ``n_rep`` calls of ``fn`` after ``n_warmup`` untimed ones."""
    for _ in range(n_warmup):
        fn()
    samples = []
    for _ in range(n_rep):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def bench(kernel: Prepared | Callable[[], Any], args: Sequence[Any], opts: BenchOptions,
          sizes: dict[str, int]) -> BenchResult:
    """:func:`tilelab.bench` on the CPU of a kernel :func:`prepare` made, or of a zero-argument
    callable: wall-clock samples, the method named in the result."""
    mode, name, flops, bytes = opts.mode, opts.name, opts.flops, opts.bytes
    notes: list[str] = []
    if mode != "sustained":
        notes.append(f"mode {mode!r} is a GPU timing mode; on the CPU every mode times back-to-back calls")
    bound: dict[str, int] = {}
    backend_used = ""
    if isinstance(kernel, Prepared):
        prepared = kernel
        kname, backend_used = prepared.name, prepared.backend
        launch_args, bound = _inputs.build_inputs(prepared.params, args, sizes, device="cpu", seed=opts.seed)
        # TileLang's CPU T.gemm is a scalar loop nest with no marker in the C source: FLOPs are
        # counted only when given (flops=...); bytes always.
        auto_flops, auto_bytes = count_work(prepared.params, bound, prepared.kernel_source())
        flops = flops if flops is not None else auto_flops
        bytes = bytes if bytes is not None else auto_bytes

        def fn() -> Any:
            return call_kernel(prepared, launch_args)
    elif callable(kernel):
        kname = name or str(getattr(kernel, "__name__", "callable"))
        kname = "callable" if kname == "<lambda>" else kname
        fn = kernel
    else:
        raise TypeError(f"bench times a TileLang kernel or a zero-argument callable; got {type(kernel).__name__}")
    start = time.perf_counter()
    fn()
    estimate = max((time.perf_counter() - start) * 1e3, 1e-3)
    n_warmup = max(1, int(opts.warmup_ms / estimate))
    n_rep = int(min(opts.max_rep, max(opts.min_rep, (opts.rep_ms if opts.rep_ms is not None else 100.0) / estimate)))
    samples = time_calls(fn, n_warmup, n_rep)
    return BenchResult(kernel=name or kname, samples_ms=tuple(samples), mode=mode, method=CPU_METHOD, flops=flops,
                       bytes=bytes, device=cpu_name(), backend=backend_used, sizes=tuple(sorted(bound.items())),
                       l2_flush=False, rotating_copies=1, warmup=n_warmup, notes=tuple(notes))


def measure_cpu_ratio(target: Prepared | Callable[[], Any], baseline: Any, args: Sequence[Any], opts: BenchOptions,
                      sizes: dict[str, int]) -> BenchResult:
    """``bench(kernel, baseline=...)`` on the CPU (target ``c``): the same alternating batches,
    each call timed by the wall clock."""
    _ratio.check_mode(opts)
    bound: dict[str, int] = {}
    flops, nbytes, backend = opts.flops, opts.bytes, ""
    launch_args: list[Any] = []
    if isinstance(target, Prepared):
        launch_args, bound = _inputs.build_inputs(target.params, args, sizes, device="cpu", seed=opts.seed)
        auto_flops, auto_bytes = count_work(target.params, bound, target.kernel_source())
        flops = flops if flops is not None else auto_flops
        nbytes = nbytes if nbytes is not None else auto_bytes
        name, backend = target.name, target.backend

        def fn_a() -> Any:
            return call_kernel(target, launch_args)
    else:
        name = opts.name or str(getattr(target, "__name__", "callable"))
        name = "callable" if name == "<lambda>" else name
        fn_a = target
    bname = _ratio.baseline_name(baseline)
    if (isinstance(baseline, Prepared) or _ratio.takes_inputs(baseline)) and not isinstance(target, Prepared):
        raise BaselineError(f"the baseline {bname} takes the kernel's inputs, but what is timed is a callable with "
                            "no inputs to share: pass the baseline as a zero-argument callable (lambda: ...)")
    if isinstance(baseline, Prepared):
        try:
            args_b, _ = _inputs.build_inputs(baseline.params, launch_args, sizes, device="cpu")
        except (TypeError, ValueError) as err:
            raise BaselineError(f"the baseline kernel {baseline.name} cannot run on the inputs of {name}: {err}. A "
                                "kernel baseline shares the kernel's tensors, so its signature must match; otherwise "
                                "pass a zero-argument callable with its own inputs") from err

        def fn_b() -> Any:
            return call_kernel(baseline, args_b)
    elif _ratio.takes_inputs(baseline):
        launch = [p for p in target.params if p.passed_at_launch]  # type: ignore[union-attr]
        inputs = [a for a, p in zip(launch_args, launch) if not p.is_output]

        def fn_b() -> Any:
            return baseline(*inputs)
    else:
        fn_b = baseline
    _ratio.first_call(fn_b, bname)
    rounds, interval, per_batch = _ratio.measure_cpu(fn_a, fn_b, opts)
    samples = [x for batch in rounds.a for x in batch]
    result = BenchResult(kernel=opts.name or name, samples_ms=tuple(samples), mode=opts.mode,
                         method=CPU_METHOD + f"; alternating with {bname} in batches of {per_batch} calls",
                         flops=flops, bytes=nbytes, device=cpu_name(), backend=backend,
                         sizes=tuple(sorted(bound.items())), l2_flush=False)
    return _ratio.result_with_ratio(result, rounds, interval, bname, per_batch, None, opts.max_rounds)
