"""The front door of every launch: :func:`run`, :func:`bench`, :func:`trace_tiles`, :func:`measure_ceilings`
and :func:`launch_overhead` choose where the work happens (the CPU for target ``c``, tilelab's worker
process, or this process) and hand it to the module that does it here (``_run.verify``,
``_bench.measure``, ``_cpu``, ``_ceilings.measure_once``, ``_overhead.measure_overhead``), or to
``_isolated``, which sends it to the worker. This is the only module that makes that choice; the
worker calls the modules that do the work, never this one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..records.launch import BenchResult, Ceilings, LaunchOverhead, RunResult
from . import _bench, _ceilings, _cpu, _emulate, _isolated, _overhead, _run, _worker
from ._cuda_errors import KernelLaunchError
from ._device_faults import with_device_fault
from ._kernel import Prepared, is_tilelang_kernel, prepare_kernel, require_gpu
from ._options import BenchOptions, RunOptions, check_sizes

if TYPE_CHECKING:
    from ..records.tile_trace import TileTrace


def worker_for(isolate: bool) -> _worker.Worker | None:
    """The worker process to launch in, or None to launch in this process: with ``isolate`` unless
    this process is the worker already (never a worker inside the worker)."""
    if isolate and not _worker.in_worker():
        return _worker.default_worker()
    return None


def cpu_worker_for(isolate: bool) -> _worker.Worker | None:
    """The process a CPU launch (``run(device="cpu")``, ``trace_tiles``) runs in: the CPU worker
    with ``isolate``, unless this process is a worker already or stands for one (None: here)."""
    if isolate and not _worker.in_worker():
        return _worker.default_worker(_emulate.CPU_WORKER)
    return None


def run(kernel: Any, *tensors_or_shapes: Any, options: RunOptions | None = None, backend: str | None = None,
        out_idx: int | list[int] | None = None, outputs: Sequence[str] | None = None, isolate: bool = True,
        timeout: float | None = None, target: Any = None, diagnose_hang: bool = True, device: str | None = None,
        blocks: Any = None, pass_configs: dict[str, Any] | None = None, **keywords: Any) -> RunResult:
    """Launch ``kernel`` once on the GPU (or on the CPU, ``device="cpu"``) and verify it.

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
    After a timeout, tilelab launches the kernel once more, instrumented so that each warp keeps
    its state (waiting on which barrier, for which parity, in which iteration, at which line) in
    host memory, and the error says where the warps hung (``err.hang``, a
    :class:`tilelab.instrument.decode.hang.HangReport`); ``diagnose_hang=False`` skips that relaunch.
    ``isolate=False`` launches in this process.

    ``device="cpu"`` runs a kernel written for a GPU (CUDA or HIP) on the CPU with its tile
    program's meaning (:mod:`tilelab.launch._emulate`): shared and fragment buffers as arrays of
    the block, ``T.Parallel`` as serial loops, no pipeline stages, one thread a block, GPU float
    types computed in float32 and rounded where the GPU rounds, every access checked against its
    buffer. It is verified exactly as a GPU run, in a worker process of its own (a kernel that loops
    forever ends at ``timeout``, default 120 s; an access outside a buffer is reported, never
    performed: the error, :class:`KernelLaunchError` of kind "illegal_address", carries the first
    accesses as ``err.out_of_bounds`` and their count as ``err.out_of_bounds_total``, and the output
    tensors given hold what the kernel wrote inside them). ``blocks=`` (CPU only) runs only those
    blocks (linear indices or ``(x, y, z)``) and checks only the elements they wrote: a large kernel
    is checked in seconds by two of its blocks.
    On a machine with no CUDA GPU, a GPU kernel takes this path by itself and the result says so.
    ``target="c"`` (or a kernel compiled for target ``c``) runs on the CPU the same way, in the
    worker, every access checked. AMD and Apple targets are inspect-only on a GPU and refused with
    a reason (``device="cpu"`` runs them on the CPU).

    ``ref``, ``tolerance``, ``seed``, ``ref_dtype``, ``worst`` and ``tile`` are the fields of
    :class:`RunOptions`, given as keywords or as one ``options=`` record; every other keyword must
    be a dynamic size of the kernel (a keyword that is neither is refused by name). ``pass_configs``
    are TileLang's, for this compile (e.g. ``{"tl.disable_safe_memory_legalize": True}`` leaves
    global accesses unguarded, so that the CPU run reports each one outside a tensor).
    """
    # Long by its docstring; the body is the one choice of device (the CPU path, then the GPU's) and the launch.
    opts, sizes = RunOptions.split(options, keywords)
    if device not in (None, "cpu", "cuda", "gpu"):
        raise ValueError(f"device={device!r}: run launches on 'cpu' (the tile program's meaning, any machine) or "
                         "'cuda' (the GPU); leave it out to use the GPU where there is one")
    native = device != "cpu" and _cpu.wants_cpu(kernel, target)  # a kernel written for the CPU (target c)
    on_cpu = device == "cpu" or (device is None and native)
    reason = None
    if not on_cpu and device is None and not _tilelang_has_gpu():
        on_cpu, reason = True, "no CUDA GPU is visible, so tilelab ran it on the CPU; device='cpu' says so yourself"
    if on_cpu:
        source = kernel.compiled if isinstance(kernel, Prepared) else kernel
        emulated = _emulate.prepare(source, out_idx=out_idx, outputs=outputs, pass_configs=pass_configs)
        check_sizes(sizes, emulated.prepared.params, emulated.prepared.name, RunOptions)
        return _emulate.run(emulated, tensors_or_shapes, opts, sizes, blocks=blocks, timeout=timeout,
                            worker=cpu_worker_for(isolate), reason=reason, native=native)
    if blocks is not None:
        raise ValueError("blocks= selects the blocks of a CPU run (device='cpu'); on a GPU every block runs")
    torch = require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs, pass_configs=pass_configs)
    check_sizes(sizes, prepared.params, prepared.name, RunOptions)
    worker = worker_for(isolate)
    launcher: _run.Launcher
    if worker is not None:
        def launcher(prepared: Prepared, args: list[Any], bound: dict[str, int], pattern: int
                     ) -> tuple[list[Any], list[bool]]:
            return _isolated.poisoned_launch(worker, prepared, args, bound, pattern, timeout, diagnose_hang)
    else:
        def launcher(prepared: Prepared, args: list[Any], bound: dict[str, int], pattern: int
                     ) -> tuple[list[Any], list[bool]]:
            try:
                return _run.poisoned_launch(torch, prepared, args, bound, pattern)
            except KernelLaunchError as err:  # located from the source (CUDA's lines went to stderr)
                raise with_device_fault(err, prepared)  # noqa: B904 (the launch's error itself, located)
    return _run.verify(torch, prepared, tensors_or_shapes, opts, sizes, launcher)


def trace_tiles(kernel: Any, *args: Any, out_idx: int | Sequence[int] | None = None,
                outputs: Sequence[str] | None = None, target: Any = "c", pass_configs: dict[str, Any] | None = None,
                seed: int | None = 0, isolate: bool = True, timeout: float | None = None, **sizes: int) -> TileTrace:
    """Launch ``kernel`` once on the CPU and record, per block of its launch grid, which elements
    of every tensor parameter it read and wrote, and every out-of-bounds attempt (logged, not
    performed). ``args`` are tensors, shapes or numbers as for :func:`tilelab.run` (missing ones
    are random inputs); dynamic sizes by name (``M=1000``). ``outputs`` names the tensors the
    kernel should write in full (default: those it writes at all, and ``out_idx``'s).

    The traced kernel is compiled and launched in tilelab's CPU worker process, as ``run(kernel,
    device="cpu")`` launches (``isolate=False``: in this process): a kernel that crashes there ends
    in :class:`KernelLaunchError` (kind "launch_failure") and one that loops forever ends at
    ``timeout`` seconds (default 120), while this process goes on."""
    from . import _tile_trace  # the trace runtime and its record: loaded by the first trace

    job = _tile_trace.request(kernel, out_idx=out_idx, outputs=outputs, target=target, pass_configs=pass_configs)
    return _tile_trace.trace(job, args, sizes, seed=seed, worker=cpu_worker_for(isolate), timeout=timeout)


def _tilelang_has_gpu() -> bool:
    from .. import _tilelang

    return bool(_tilelang.has_gpu())


def bench(kernel: Any, *args: Any, options: BenchOptions | None = None, backend: str | None = None,
          out_idx: int | list[int] | None = None, outputs: Sequence[str] | None = None, isolate: bool = True,
          timeout: float | None = None, target: Any = None, baseline: Any = None, diagnose_hang: bool = True,
          **keywords: Any) -> BenchResult:
    """Time ``kernel`` (a TileLang kernel, or any zero-argument callable such as
    ``lambda: torch.matmul(a, b)``) with CUDA events; :mod:`tilelab.launch._bench` describes the modes.

    The measurement options are the fields of :class:`BenchOptions`, given as keywords
    (``mode=``, ``flops=``, ``bytes=``, ``warmup_ms=``, ``rep_ms=``, ``min_rep=``, ``max_rep=``,
    ``flush_l2=``, ``rotate=``, ``idle_ms=``, ``graph_batch=``, ``seed=``, ``name=``,
    ``ci_target=``, ``max_rounds=``, ``telemetry=``, ``steady=``, ``steady_cap_ms=``) or as one
    ``options=`` record; every other keyword is a dynamic size of the kernel (``M=4096``).

    Inputs are built (and given tensors checked) as for :func:`tilelab.run`. Rates come from
    ``flops``/``bytes`` when given, else from the signature (bytes of every tensor; 2*M*N*K
    for kernels whose compiled source multiplies matrices, see :func:`count_work`).
    Repetitions: ``sustained`` and ``graph`` derive them, as ``do_bench``, from ``warmup_ms`` and
    ``rep_ms`` (default: 1000 ms of kernel time in steady sustained mode, long enough to average
    the clock wander of a power-capped GPU; 100 ms for graph mode and ``steady=False``) over a
    first estimate, bounded by
    ``min_rep``/``max_rep``. ``isolated`` counts the idle gap, the spin and the kernel in
    ``rep_ms`` (default 500 ms of wall time) and makes at most 300 launches.
    ``graph`` captures a multiple of the rotating copies, at least ``graph_batch`` launches.
    ``result.ci_ms`` is the median's 95% interval, taken from batches of consecutive launches
    (:func:`tilelab.launch._stability.median_interval`), so that it stays honest when the GPU's
    clock wanders and neighbouring launches read the same clock; ``result.ci_correlated`` marks
    an interval whose batches still followed each other (likely too narrow). ``ci_target``
    (default ``"auto"``: 0.005 in steady sustained mode, None in the others): measure again, a
    round of ``rep_ms`` at a time and up to ``max_rounds`` (4) rounds in all, until that
    interval is within +-ci_target of the median and its batches are not correlated; the notes
    say how many rounds it took, or that the cap stopped it. On a steady GPU one round suffices.
    ``ci_target=None``: one round. ``telemetry``: sample clocks, power, temperature and throttle
    reasons through NVML during the measurement (needs nvidia-ml-py) into ``result.telemetry``.

    ``steady`` (sustained mode only; default True): before measuring, launch back to back in
    batches of about 15 ms until the GPU's per-batch median stops drifting, for at least
    ``warmup_ms`` and 1 s and at most ``steady_cap_ms`` (then it measures anyway and says so in
    ``result.notes``; the notes say how long the warm-up took). ``steady=False`` warms up for
    ``warmup_ms`` only, as ``do_bench`` does.

    A TileLang kernel is timed in tilelab's warm worker process (``isolate=True``, the default;
    see :func:`tilelab.run`), within ``timeout`` seconds (default: 60 s plus four times the warm-up
    and repetition time, every round ``ci_target`` may take counted); after a timeout the error
    says where the kernel hung, as :func:`tilelab.run`'s does (``diagnose_hang=False``: it doesn't).
    A zero-argument callable runs in this process: it cannot be sent to another one.

    ``target="c"`` (or a kernel compiled for target ``c``) times on the CPU with a wall clock.

    ``baseline`` (sustained mode): time the kernel side by side with a baseline and report their
    ratio, which holds from call to call where absolute times move with the GPU's clock. The
    baseline is a zero-argument callable (``lambda: torch.matmul(a, b)``), a callable of the
    kernel's input tensors (``torch.matmul``), or another TileLang kernel launched on the same
    tensors (its signature must match). Batches of a few launches (``pair_launches``; about 5 ms)
    of the kernel and of the baseline alternate in one window, each launch behind the same L2
    flush; ``result.ratio`` is the median of the per-pair ratios (kernel over baseline),
    ``result.ratio_ci`` its 95% interval (batched over consecutive pairs, as ``ci_ms``), and
    ``result.baseline_ms`` the baseline's median in that window. ``ci_target`` applies to the
    ratio's interval. Both run in the worker process when the baseline can travel there (a
    TileLang kernel, or a picklable function such as ``torch.matmul``); a lambda is timed with
    the kernel in this process, and the result's notes say so. See :mod:`tilelab.launch._ratio`.
    """
    # Long by its docstring (the reference of every option); the body is under 30 lines.
    opts, sizes = BenchOptions.split(options, keywords)
    is_kernel = is_tilelang_kernel(kernel) or isinstance(kernel, Prepared)
    if not is_kernel and not callable(kernel):
        raise TypeError(f"bench times a TileLang kernel or a zero-argument callable; got {type(kernel).__name__}")
    cpu = _cpu.wants_cpu(kernel, target)
    if baseline is not None:
        return _bench_ratio(kernel, is_kernel, cpu, args, opts, sizes, baseline, backend=backend, out_idx=out_idx,
                            outputs=outputs, isolate=isolate, timeout=timeout, diagnose_hang=diagnose_hang)
    torch = None if cpu else require_gpu()
    if cpu:
        timed: Prepared | Callable[[], Any] = (
            _cpu.prepare(kernel, backend=backend, out_idx=out_idx, outputs=outputs) if is_kernel else kernel)
        return _cpu.bench(timed, args, opts, sizes)
    opts = opts.resolved()
    if not is_kernel:  # a callable cannot be sent to another process: it is timed here
        return _bench.measure(torch, kernel, args, opts, sizes)
    prepared = kernel if isinstance(kernel, Prepared) else prepare_kernel(
        kernel, backend=backend, out_idx=out_idx, outputs=outputs)
    worker = worker_for(isolate)
    if worker is not None:
        result: BenchResult = _isolated.bench(worker, prepared, args, opts, sizes, timeout,
                                              diagnose_hang=diagnose_hang)
        return result
    return _bench.measure(torch, prepared, args, opts, sizes)


def _bench_ratio(kernel: Any, is_kernel: bool, cpu: bool, args: Sequence[Any], opts: BenchOptions,
                 sizes: dict[str, int], baseline: Any, *, backend: str | None, out_idx: Any,
                 outputs: Sequence[str] | None, isolate: bool, timeout: float | None,
                 diagnose_hang: bool = True) -> BenchResult:
    """``bench(kernel, baseline=...)``: on the CPU, here, or both in the worker process (``kernel``
    checked by :func:`bench`: a TileLang kernel when ``is_kernel``, else a callable)."""
    import pickle

    from ..records.errors import BaselineError

    base_is_kernel = is_tilelang_kernel(baseline) or isinstance(baseline, Prepared)
    if not base_is_kernel:
        _ratio_mod().check_callable(baseline)
    if cpu:
        timed = _cpu.prepare(kernel, backend=backend, out_idx=out_idx, outputs=outputs) if is_kernel else kernel
        base = _cpu.prepare(baseline, backend=backend, out_idx=None, outputs=None) if base_is_kernel else baseline
        return _cpu.measure_cpu_ratio(timed, base, args, opts, sizes)
    torch = require_gpu()
    opts = _ratio_mod().resolved_for_ratio(opts)  # ci_target="auto": the ratio's own, tighter target
    _ratio_mod().check_mode(opts)
    base = prepare_kernel(baseline, backend=backend) if base_is_kernel and not isinstance(baseline, Prepared) \
        else baseline
    if not is_kernel:
        return _bench.measure(torch, kernel, args, opts, sizes, baseline=base)
    prepared = kernel if isinstance(kernel, Prepared) else prepare_kernel(
        kernel, backend=backend, out_idx=out_idx, outputs=outputs)
    worker = worker_for(isolate)
    note = None
    if worker is not None and not base_is_kernel:
        try:
            pickle.dumps(baseline)
        except Exception:
            worker = None
            note = ("the baseline (a lambda or closure) cannot travel to tilelab's worker process, so the kernel and "
                    "the baseline were timed in this process; pass a module-level function of the kernel's inputs "
                    "(torch.matmul) to keep both in the worker")
    if worker is not None:
        result: BenchResult = _isolated.bench(worker, prepared, args, opts, sizes, timeout,
                                              baseline=base, diagnose_hang=diagnose_hang)  # unpickled here
        return result
    if base_is_kernel and not isinstance(base, Prepared):
        raise BaselineError(f"the baseline {baseline!r:.60} could not be prepared")
    return _bench.measure(torch, prepared, args, opts, sizes, baseline=base, baseline_note=note)


def _ratio_mod() -> Any:
    from . import _ratio

    return _ratio


def measure_ceilings(*, force: bool = False, copy_bytes: int = 2 << 30, matmul_n: int = 8192,
                     dtype: str = "float16", rep_ms: float = 300.0, isolate: bool = True,
                     timeout: float | None = 600.0) -> Ceilings:
    """Measure (or read from the cache) the copy bandwidth and matmul rate of this GPU, in
    tilelab's worker process unless ``isolate=False``."""
    torch = require_gpu()
    key = _ceilings.current_key(torch)
    if not force:
        cached = _ceilings.read_cache(key)
        if cached is not None:
            return cached
    options: dict[str, Any] = dict(copy_bytes=copy_bytes, matmul_n=matmul_n, dtype=dtype, rep_ms=rep_ms, key=key)
    worker = worker_for(isolate)
    ceilings: Ceilings
    if worker is not None:
        ceilings = _isolated.call(worker, _ceilings.measure_once, (), options, timeout, "measure_ceilings")
    else:
        ceilings = _ceilings.measure_once(**options)
    try:
        _ceilings.write_cache(ceilings)
    except OSError:
        pass  # a read-only home still gets the measurement
    return ceilings


def launch_overhead(kernel: Any = None, *args: Any, backends: Sequence[str] = _overhead.RUNNABLE_BACKENDS,
                    calls: int = 2000, batches: int = 20, warmup: int = 200, out_idx: Any = -1,
                    isolate: bool = True, timeout: float | None = 600.0, **sizes: int) -> LaunchOverhead:
    """Host microseconds per call of ``kernel`` through each backend (compiled with ``out_idx``,
    so the figure includes output allocation, as a notebook user's call would).

    ``calls`` calls in ``batches`` batches: each sample is the mean of one batch. Measured in
    tilelab's worker process unless ``isolate=False`` (a compiled kernel travels as its prim_func)."""
    if batches < 1 or calls < batches:
        raise ValueError(f"calls ({calls}) must be at least batches ({batches}), and batches at least 1")
    require_gpu()
    options: dict[str, Any] = dict(backends=tuple(backends), calls=calls, batches=batches, warmup=warmup,
                                   out_idx=out_idx, **sizes)
    worker = worker_for(isolate)
    if worker is not None:
        shipped = getattr(kernel, "prim_func", kernel)  # a JITKernel does not pickle; its prim_func does
        overhead: LaunchOverhead = _isolated.call(worker, _overhead.measure_overhead, (shipped, *args), options,
                                                  timeout, "launch_overhead")
        return overhead
    return _overhead.measure_overhead(kernel, *args, **options)
