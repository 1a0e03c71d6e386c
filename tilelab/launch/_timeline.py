"""``tilelab.timeline``: run a kernel once, instrumented, and return where the time went inside it.

The kernel is compiled a second time with one more parameter (the record buffer) and its device
source rewritten through TileLang's post-processing hook (``tilelab._tilelang.compile_instrumented``:
the hook is set for that one compile, TileLang's cache is off for it, and tilelab caches neither):
the CUDA source of the tvm_ffi, cython and nvrtc backends by :mod:`tilelab.instrument.rewrite.timeline`, the
CuTe DSL Python of the cutedsl backend by :mod:`tilelab.instrument.rewrite.timeline_cutedsl`. In tilelab's
worker process (as ``run`` and ``bench`` do) the plain kernel is launched once to warm up, the
instrumented one once more into a zeroed buffer, and then both side by side to measure the
overhead; the SM clock rate that turns ``clock64`` into nanoseconds is measured there too. The decoding and the summary
(:mod:`tilelab.instrument.decode.timeline`) run here.
"""

from __future__ import annotations

import importlib.util
import pickle
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..records.errors import TilelabError
from ..records.timeline import Timeline
from . import _inputs

OVERHEAD_ROUNDS = 15  # alternating plain / instrumented samples per kernel
SAMPLE_MS = 2.0  # each sample launches the kernel this long, at least once
CAPTURE_TIMEOUT_S = 120.0


class TimelineError(TilelabError, ValueError):
    """A timeline cannot be taken as asked (a block outside the grid, an unknown granularity)."""


@dataclass(frozen=True)
class Capture:
    """What the instrumented launch gave back, before decoding."""

    words: Any  # the record buffer: a 1-D uint64 numpy array (a list where numpy is missing)
    instrumented: Any  # tilelab.instrument.rewrite.timeline.Instrumented
    clock_ghz: float
    plain_ms: float | None
    instrumented_ms: float | None
    outputs: tuple[Any, ...]  # the instrumented launch's outputs
    device: str


def timeline(kernel: Any, *args: Any, out_idx: int | list[int] | None = None, blocks: Sequence[Any] = (0,),
             granularity: str = "warpgroup", backend: str | None = None, timeout: float | None = None,
             overhead: bool = True, capacity: int | None = None, isolate: bool = True, **sizes: int) -> Timeline:
    """Run ``kernel`` once, instrumented, and return its :class:`~tilelab.records.timeline.Timeline`.

    ``args`` are tensors, shapes or scalars as :func:`tilelab.run` takes them (missing inputs are
    built from the signature; dynamic sizes as keywords). ``blocks``: the blocks whose warps record
    phases, as linear indices or (x, y[, z]) tuples of the hardware grid (every block records its
    start, end and SM regardless). ``granularity``: "warpgroup" (the first warp of each group of
    four records) or "warp" (every warp). ``overhead=False`` skips the side-by-side timing.
    ``capacity``: records per traced warp (default: from the loops' trip counts). The launch runs
    in tilelab's worker process unless ``isolate=False``; a hang ends after ``timeout`` seconds.
    """
    from .. import _tilelang
    from ..instrument.decode import timeline as _timeline
    from ._run import prepare_kernel, require_gpu

    started = time.perf_counter()
    if granularity not in ("warpgroup", "warp"):
        raise TimelineError(f"granularity must be 'warpgroup' or 'warp', not {granularity!r}")
    if backend == "cutedsl" and importlib.util.find_spec("cutlass") is None:
        raise TimelineError("the CuTeDSL backend compiles its kernels with NVIDIA's CuTe DSL, which is not "
                            "installed: pip install nvidia-cutlass-dsl (or tilelab[cutedsl]), or pass "
                            "backend=\"tvm_ffi\" (the kernel's phases are the same)")
    torch = require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx)
    launch_args, bound = _inputs.build_inputs(prepared.params, args, sizes, device="cuda")
    grid = _grid(_tilelang.launch_dims(prepared.compiled), bound, prepared.name)
    try:
        traced = tuple(dict.fromkeys(_timeline.block_index(b, grid) for b in (blocks or (0,))))
    except (ValueError, TypeError) as err:
        raise TimelineError(f"{prepared.name}: {err}; blocks= takes linear indices or (x, y, z) tuples "
                            f"of the grid {grid}") from err
    options = {"grid": grid, "traced": traced, "granularity": granularity, "overhead": overhead,
               "capacity": capacity}
    payload = pickle.dumps(_payload(prepared))
    from . import _isolated
    from ._api import worker_for  # the one place that chooses where a launch happens

    worker = worker_for(isolate)
    if worker is not None:
        torch.cuda.synchronize()
        capture = _isolated.call(worker, capture_launch, (payload, list(launch_args), options),
                                 {}, timeout if timeout is not None else CAPTURE_TIMEOUT_S,
                                 f"timeline of {prepared.name}")
    else:
        capture = capture_launch(payload, list(launch_args), options, isolate=False)
    return build_timeline(capture, prepared.name, prepared.backend, grid, granularity,
                          time.perf_counter() - started)


def build_timeline(capture: Capture, name: str, backend: str, grid: tuple[int, int, int], granularity: str,
                   capture_s: float | None = None) -> Timeline:
    from ..instrument.decode import timeline as _timeline

    ins = capture.instrumented
    spans, block_times, flows, dropped, notes = _timeline.decode(
        [int(w) for w in capture.words], sites=ins.sites, grid=grid, warps=ins.warps, capacity=ins.capacity,
        traced_blocks=ins.traced_blocks, clock_ghz=capture.clock_ghz)
    notes = list(ins.notes) + notes
    if not ins.capacity_exact:
        notes.append(f"a loop's trip count is not a constant in the device code: each traced warp had room for "
                     f"{ins.capacity} marks")
    unnamed = sorted({s.label for s in ins.sites if s.cell_line is None and s.kind not in ("mma_wait", "kernel")})
    if unnamed:
        notes.append("phases without a line of yours (TileLang-made code): " + "; ".join(unnamed))
    overhead = None
    if capture.plain_ms and capture.instrumented_ms:
        overhead = capture.instrumented_ms / capture.plain_ms - 1.0
    summary = _timeline.summarize(spans, block_times) if block_times else None
    return Timeline(kernel=name, device=capture.device, backend=backend, granularity=granularity, grid=grid,
                    threads=ins.threads or 0,
                    traced_blocks=tuple(_timeline.block_coords(b, grid) for b in ins.traced_blocks),
                    spans=tuple(spans), blocks=tuple(block_times), flows=tuple(flows), dropped=dropped,
                    overhead=overhead, plain_ms=capture.plain_ms, instrumented_ms=capture.instrumented_ms,
                    clock_ghz=capture.clock_ghz, cell_file=_cell_file(ins), capture_s=capture_s,
                    notes=tuple(notes), summary=summary)


def _cell_file(ins: Any) -> str | None:
    return next((s.cell_file for s in ins.sites if s.cell_file), None)


def _payload(prepared: Any) -> tuple:
    compiled = prepared.compiled
    func = compiled.prim_func
    out_idx = [int(i) if int(i) >= 0 else int(i) + len(func.params) for i in (compiled.out_idx or [])] or None
    return (func, out_idx, compiled.target, prepared.backend, dict(getattr(compiled, "pass_configs", None) or {}))


def _grid(dims: Any, bound: dict[str, int], name: str) -> tuple[int, int, int]:
    if dims is None:
        raise TimelineError(f"{name}: tilelab cannot read the kernel's grid from its T.Kernel")
    grid = tuple(_inputs.eval_dim(d, bound) for d in dims[0])
    if not all(isinstance(g, int) and g > 0 for g in grid):
        raise TimelineError(f"{name}: the grid {dims[0]} does not evaluate to positive sizes with {bound}")
    return grid  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------
# Where the kernel runs (the worker, or this process with isolate=False)
# ------------------------------------------------------------------------------------------


def capture_launch(payload: bytes, args: list[Any], options: dict[str, Any], *, isolate: bool = False) -> Capture:
    """Compile the plain and the instrumented kernel, launch, read the record buffer."""
    import tilelang
    import torch

    from .. import _tilelang

    del isolate
    func, out_idx, target, backend, pass_configs = pickle.loads(payload)
    plain = tilelang.compile(func, out_idx=out_idx, target=target, execution_backend=backend,
                             pass_configs=pass_configs or None)
    ops = _tilelang.timeline_ops(func)
    cell_file = _tilelang.kernel_file(func)
    grid = tuple(options["grid"])
    nblocks = grid[0] * grid[1] * grid[2]
    made: list[Any] = []
    # the device source is CUDA for tvm_ffi, cython and nvrtc, CuTe DSL Python for cutedsl
    instrument: Any
    if backend == "cutedsl":
        from functools import partial

        from ..instrument.rewrite.timeline_cutedsl import instrument as instrument_cutedsl

        instrument = partial(instrument_cutedsl, threads=_tilelang.cutedsl_threads(plain))
    else:
        from ..instrument.rewrite.timeline import instrument as instrument_cuda

        instrument = instrument_cuda

    def rewrite(code: str) -> str:
        ins = instrument(code, ops=ops, cell_file=cell_file, blocks=nblocks, traced_blocks=options["traced"],
                         granularity=options["granularity"], capacity=options.get("capacity"))
        made.append(ins)
        return ins.source

    compiled = _tilelang.compile_instrumented(func, rewrite, target=target, backend=backend, out_idx=out_idx,
                                             pass_configs=pass_configs,
                                             language="cutedsl" if backend == "cutedsl" else "cuda")
    if not made:
        raise RuntimeError("TileLang did not pass the device source through its post-processing hook")
    ins = made[-1]
    buf = torch.zeros(ins.words(), dtype=getattr(torch, _tilelang.record_dtype(backend)), device="cuda")

    def run_plain() -> Any:
        return plain(*args)

    def run_instrumented() -> Any:
        return compiled(*args, buf)

    run_plain()  # warm-up: module load, caches
    run_instrumented()
    torch.cuda.synchronize()
    buf.zero_()
    out = run_instrumented()
    torch.cuda.synchronize()
    words = buf.cpu().numpy().copy()
    outs = out if isinstance(out, (list, tuple)) else ([out] if out is not None else [])
    outputs = tuple(o.cpu() for o in outs) if options.get("keep_outputs") else ()
    ghz = clock_rate_ghz(torch)
    plain_ms = instrumented_ms = None
    if options.get("overhead", True):
        plain_ms, instrumented_ms = side_by_side(torch, run_plain, run_instrumented)
    return Capture(words, ins, ghz, plain_ms, instrumented_ms, outputs, torch.cuda.get_device_name())


def clock_rate_ghz(torch: Any, cycles: int = 4_000_000, repeats: int = 5) -> float:
    """The SM clock (clock64 ticks per ns), from torch's clock64 spin kernel timed with CUDA events:
    the difference of a spin of ``2 * cycles`` and one of ``cycles`` cancels the launch cost."""
    rates = []
    for _ in range(repeats):
        times = []
        for n in (cycles, 2 * cycles):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(n)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        rates.append(cycles / ((times[1] - times[0]) * 1e6))
    return statistics.median(rates)


def side_by_side(torch: Any, plain: Any, instrumented: Any, rounds: int = OVERHEAD_ROUNDS,
                 sample_ms: float = SAMPLE_MS) -> tuple[float, float]:
    """Median ms per launch of each, from alternating samples (each ``reps`` back-to-back launches
    between CUDA events), so both see the same clocks and temperature."""
    def sample(fn: Any, reps: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps

    one = sample(plain, 1)
    reps = max(1, min(1000, int(sample_ms / max(one, 1e-4))))
    for _ in range(3):  # warm-up rounds
        sample(plain, reps)
        sample(instrumented, reps)
    a, b = [], []
    for _ in range(rounds):
        a.append(sample(plain, reps))
        b.append(sample(instrumented, reps))
    return statistics.median(a), statistics.median(b)


__all__ = ["Capture", "TimelineError", "build_timeline", "capture_launch", "clock_rate_ghz", "side_by_side",
           "timeline"]
