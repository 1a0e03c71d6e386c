"""``tilelab.bench``: CUDA-event timing in three named modes.

* ``sustained`` — back to back, as ``triton.testing.do_bench``: an L2 flush (zeroing a 256 MiB
  buffer) then the launch between a pair of events, many times, never waiting: the GPU stays
  busy, so it runs at the clocks its power limit sustains. First (``steady=True``, the default)
  the GPU is brought to that steady state: batches of about 15 ms of back-to-back launches until
  the per-batch medians stop drifting (``_stability.warm_until_steady``), at most
  ``steady_cap_ms`` (3 s). Without it each call measures a different point of the GPU's warm-up
  towards its power-limited clocks (seen on an H100: four calls of a 4096^3 GEMM 3.5% apart).
  Then 1 s of launches, repeated (``ci_target``, 0.5% by default, at most ``max_rounds`` rounds)
  until the median's interval, taken from batches of consecutive launches, is that narrow: at a
  power cap the SM clock wanders by 1-3% over fractions of a second, so one second holds only a
  few independent looks at the clock.
* ``isolated`` — one launch at a time: wait for the GPU, leave it idle ``idle_ms``, flush L2,
  spin briefly on the device so the host's launch latency is hidden, time one launch. Clocks
  recover between launches, as under Nsight Compute's replay (``gpu__time_duration`` with
  ``--clock-control none``). The idle gap matters: on an H200 (2026-11-22) 0 ms read 10-12% above
  ncu (sustained power), 20 ms read 3-13% above (clocks drop while idle), 2 ms within 0.6-0.9%.
  Repetitions are bounded by wall time (``rep_ms``, idle gaps included) and by 300.
* ``graph`` — at least ``graph_batch`` launches captured in a CUDA graph (a multiple of the
  rotating copies, so each replay uses every copy equally), each replay timed and divided;
  inputs rotate among copies when they would fit in L2 (a flush cannot go inside the graph).

Samples are milliseconds per launch. Tests never call the timing loops on a GPU; the benchmarks do.
:func:`measure` times here, in this process: :func:`tilelab.bench` (``_api.py``) chooses where.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records.errors import BaselineError
from ..records.launch import BENCH_MODES, BenchResult
from . import _inputs, _ratio, _stability
from ._cuda_errors import is_out_of_memory, launch_error, out_of_memory_error
from ._kernel import Prepared, call_kernel, check_tma_alignment, count_work, device_name
from ._options import BenchOptions
from ._tma_refusal import refused_rules
from ._worker import stop_requested

SPIN_CYCLES = 200_000  # about 100 us at Hopper clocks: longer than any host launch path here
SPIN_MS = 0.1
ISOLATED_MAX_REP = 300  # isolated launches each wait idle_ms: a few hundred is enough for a median
FLUSH_BYTES = 256 << 20  # what triton.testing.do_bench zeroes between launches

MAX_COPIES = 64  # rotating input copies at most


_FLUSH: dict[int, Any] = {}


def _flush_buffer(torch: Any):
    dev = torch.cuda.current_device()
    if dev not in _FLUSH:
        _FLUSH[dev] = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    return _FLUSH[dev]


def l2_bytes(torch: Any) -> int:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 50 << 20))


# ------------------------------------------------------------------------------------------
# Timing loops
# ------------------------------------------------------------------------------------------


_estimate_ms = _ratio.estimate_ms  # one launch's time with its flush (it lives beside the paired loops)


def time_sustained(torch: Any, fns: Sequence[Callable[[], Any]], n_warmup: int, n_rep: int,
                   flush: Any | None) -> list[float]:
    for i in range(n_warmup):
        fns[i % len(fns)]()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    done = 0
    for i in range(n_rep):
        if stop_requested():
            break
        if flush is not None:
            flush.zero_()
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
        done += 1
        if i >= 64:
            # The host stays at most 64 launches ahead (so that a stop request takes effect soon)
            # while the GPU always has work queued: the timings are those of back-to-back launches.
            ends[i - 64].synchronize()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts[:done], ends[:done])]


def warm_to_steady(torch: Any, fns: Sequence[Callable[[], Any]], estimate_ms: float, flush: Any | None,
                   min_ms: float, cap_ms: float) -> tuple[_stability.Warmup, int]:
    """Back-to-back batches of about ``STEADY_BATCH_MS`` of kernel time until the per-batch median
    stops drifting (:func:`_stability.warm_until_steady`); (what happened, launches per batch)."""
    per_batch = max(1, int(round(_stability.STEADY_BATCH_MS / estimate_ms)))

    def run_batch() -> float:
        times = time_sustained(torch, fns, 0, per_batch, flush)
        return statistics.median(times) if times else 0.0

    return _stability.warm_until_steady(run_batch, min_ms=min_ms, cap_ms=cap_ms, stop=stop_requested), per_batch


def isolated_reps(estimate_ms: float, idle_ms: float, budget_ms: float, min_rep: int, max_rep: int) -> int:
    """Launches that fit ``budget_ms`` of wall time when each costs its idle gap, the spin, the
    kernel and about 50 us of host synchronisation; at least ``min_rep``, at most
    ``min(max_rep, ISOLATED_MAX_REP)``."""
    per_launch = idle_ms + SPIN_MS + estimate_ms + 0.05
    return int(min(max_rep, ISOLATED_MAX_REP, max(min_rep, budget_ms / per_launch)))


def time_isolated(torch: Any, fns: Sequence[Callable[[], Any]], n_warmup: int, n_rep: int,
                  flush: Any | None, idle_ms: float, budget_ms: float | None = None, min_rep: int = 1) -> list[float]:
    for i in range(n_warmup):
        fns[i % len(fns)]()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples: list[float] = []
    began = time.perf_counter()
    for i in range(n_rep):
        if stop_requested():
            break
        if budget_ms is not None and len(samples) >= min_rep and (time.perf_counter() - began) * 1e3 > 2 * budget_ms:
            break  # the estimate was off (slow host): the wall-time budget still holds
        torch.cuda.synchronize()
        if idle_ms > 0:
            time.sleep(idle_ms / 1e3)
        if flush is not None:
            flush.zero_()
        # Hide the host's launch latency from the measurement: a short device-side spin keeps
        # the stream busy while the host enqueues start event, kernel and end event, so the
        # kernel begins the moment the start event is recorded (as under Nsight Compute).
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fns[i % len(fns)]()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def time_graph(torch: Any, fns: Sequence[Callable[[], Any]], n_warmup: int, n_rep: int, batch: int) -> list[float]:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):  # warm on the side stream before capture, as torch's graph docs ask
            fns[i % len(fns)]()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(batch):
            fns[i % len(fns)]()
    for _ in range(max(1, n_warmup // batch)):
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    done = 0
    for i in range(n_rep):
        if stop_requested():
            break
        starts[i].record()
        graph.replay()
        ends[i].record()
        done += 1
        if i >= 4:
            ends[i - 4].synchronize()  # at most 4 replays queued: a stop request takes effect soon
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / batch for s, e in zip(starts[:done], ends[:done])]


# ------------------------------------------------------------------------------------------
# bench
# ------------------------------------------------------------------------------------------


def _rotation_note(n_copies: int, work_bytes: float, l2: int) -> str:
    working = n_copies * work_bytes
    mib = 1 << 20
    if working >= l2:
        return (f"inputs rotate among {n_copies} copies: a working set of {working / mib:.1f} MiB against "
                f"{l2 / mib:.0f} MiB of L2, so launches read from DRAM as after a flush")
    return (f"inputs rotate among {n_copies} copies (the most tilelab makes): a working set of "
            f"{working / mib:.1f} MiB still fits in {l2 / mib:.0f} MiB of L2, so launches may read cached data")


def graph_launches(graph_batch: int, n_copies: int) -> int:
    """Launches captured per graph: at least ``graph_batch``, a multiple of the copies so that
    every copy is used equally in each replay."""
    n_copies = max(1, n_copies)
    return n_copies * max(1, math.ceil(graph_batch / n_copies))


@dataclass
class _Timed:
    """What the timing loops launch: one zero-argument call per rotating copy, and what is known
    about it before the first measurement."""

    fns: list[Callable[[], Any]]
    name: str
    backend: str = ""
    sizes: dict[str, int] = field(default_factory=dict)
    flops: float | None = None
    bytes: float | None = None
    copies: int = 1
    notes: list[str] = field(default_factory=list)
    prepared: Prepared | None = None  # the kernel, when a kernel is timed
    launch_args: list[list[Any]] = field(default_factory=list)  # its arguments, one list per rotating copy


def measure(torch: Any, target: Prepared | Callable[[], Any], args: Sequence[Any], opts: BenchOptions,
            sizes: dict[str, int], baseline: Any = None, baseline_note: str | None = None) -> BenchResult:
    """Time ``target`` (a prepared kernel, or a zero-argument callable) here, on ``torch``'s
    current GPU; see the module doc for the modes and :func:`tilelab.bench` for the options.
    With ``baseline`` (a prepared kernel or a callable), the two alternate in one window and the
    result carries their ratio (:mod:`tilelab.launch._ratio`)."""
    opts = opts.resolved()
    if baseline is not None:
        _ratio.check_mode(opts)
        if not isinstance(baseline, Prepared):
            _ratio.check_callable(baseline)
    if isinstance(target, Prepared):
        timed = _prepare_kernel_launches(torch, target, args, sizes, opts)
    else:
        timed = _prepare_callable(torch, target, opts)
    if baseline is None:
        return _measure(torch, timed, opts)
    if baseline_note:
        timed.notes.append(baseline_note)
    return _measure_ratio(torch, timed, baseline, opts, sizes)


def _launcher(prepared: Prepared, args: Any) -> Callable[[], Any]:
    """One launch of ``prepared`` on ``args`` (one rotating copy of the inputs)."""
    return lambda: call_kernel(prepared, args)


def _baseline_launches(torch: Any, timed: _Timed, baseline: Any, opts: BenchOptions, sizes: dict[str, int]
                       ) -> tuple[list[Callable[[], Any]], str]:
    """The baseline's calls, one per rotating copy of the kernel's inputs, after one checked call."""
    name = _ratio.baseline_name(baseline)
    if (isinstance(baseline, Prepared) or _ratio.takes_inputs(baseline)) and timed.prepared is None:
        raise BaselineError(f"the baseline {name} takes the kernel's inputs, but what is timed is a callable with "
                            f"no inputs to share: pass the baseline as a zero-argument callable "
                            f"(lambda: ...) instead")
    fns: list[Callable[[], Any]] = []
    if isinstance(baseline, Prepared):
        for copy in timed.launch_args:
            try:
                args_b, _ = _inputs.build_inputs(baseline.params, copy, sizes, device="cuda")
            except (TypeError, ValueError) as err:
                raise BaselineError(
                    f"the baseline kernel {baseline.name} cannot run on the inputs of {timed.name}: {err}. A kernel "
                    "baseline shares the kernel's tensors, so its signature must match (same parameters, shapes and "
                    "dtypes); otherwise pass a zero-argument callable with its own inputs") from err
            fns.append(_launcher(baseline, args_b))
    elif _ratio.takes_inputs(baseline) and timed.prepared is not None:  # (None was refused above)
        launch = [p for p in timed.prepared.params if p.passed_at_launch]

        def call_with(ins: list[Any]) -> Callable[[], Any]:
            return lambda: baseline(*ins)

        fns = [call_with([a for a, p in zip(copy, launch) if not p.is_output]) for copy in timed.launch_args]
    else:
        fns = [baseline]
    _ratio.first_call(fns[0], name)
    torch.cuda.synchronize()
    return fns, name


def _measure_ratio(torch: Any, timed: _Timed, baseline: Any, opts: BenchOptions, sizes: dict[str, int],
                   clock: Callable[[], float] = time.perf_counter) -> BenchResult:
    """The kernel and the baseline in alternating batches (:mod:`tilelab.launch._ratio`)."""
    fns_b, bname = _baseline_launches(torch, timed, baseline, opts, sizes)
    name = timed.name or "kernel"
    try:
        flush_buf = _flush_buffer(torch) if opts.flushes else None
    except Exception as err:
        if is_out_of_memory(err):
            raise out_of_memory_error(name, f"the {FLUSH_BYTES >> 20} MiB L2-flush buffer", err) from err
        raise
    sampler = _telemetry_sampler(torch) if opts.telemetry else None
    rounds, interval, per_batch, notes = _ratio.measure_gpu(torch, timed.fns, fns_b, opts, flush_buf,
                                                            stop_requested, sampler, warm_clock=clock)
    samples = [x for batch in rounds.a for x in batch]
    kernel_interval = median_interval(samples)
    tele = sampler.result() if sampler is not None else None
    if kernel_interval is not None:
        notes.append(kernel_interval.note())
    if tele is not None and tele.throttled:
        notes.append("the GPU throttled during this measurement (" + ", ".join(tele.reasons) + ")")
    method = (BENCH_MODES[opts.mode] + f"; alternating with {bname} in batches of {per_batch} launches"
              + ("; after a warm-up to the GPU's steady state" if opts.steady else ""))
    result = BenchResult(
        telemetry=tele, ci_ms=(kernel_interval.low, kernel_interval.high) if kernel_interval else None,
        ci_batches=kernel_interval.batches if kernel_interval else 0,
        ci_correlated=bool(kernel_interval and kernel_interval.correlated), ci_target=opts.interval_target,
        kernel=name, samples_ms=tuple(float(s) for s in samples), mode=opts.mode, method=method,
        flops=timed.flops, bytes=timed.bytes, device=device_name(), backend=timed.backend,
        sizes=tuple(sorted(timed.sizes.items())), l2_flush=bool(opts.flushes), rotating_copies=timed.copies,
        notes=tuple(timed.notes + notes))
    return _ratio.result_with_ratio(result, rounds, interval, bname, per_batch, opts.interval_target, opts.max_rounds)


def _prepare_kernel_launches(torch: Any, prepared: Prepared, args: Sequence[Any], sizes: dict[str, int],
                             opts: BenchOptions) -> _Timed:
    """Inputs (and their rotating copies) for a compiled kernel, counted work, one checked launch."""
    name = prepared.name
    try:
        launch_args, bound = _inputs.build_inputs(prepared.params, args, sizes, device="cuda", seed=opts.seed)
    except Exception as err:
        if is_out_of_memory(err):
            raise out_of_memory_error(name, "the inputs and outputs", err) from err
        raise
    check_tma_alignment(prepared, launch_args)
    auto_flops, auto_bytes = count_work(prepared.params, bound, prepared.kernel_source())
    timed = _Timed([], name, prepared.backend, bound,
                   opts.flops if opts.flops is not None else auto_flops,
                   opts.bytes if opts.bytes is not None else auto_bytes)
    timed.copies = _rotating_copies(torch, opts, auto_bytes)
    copies = _copy_inputs(torch, prepared, launch_args, timed.copies, name)
    if timed.copies > 1:
        timed.notes.append(_rotation_note(timed.copies, auto_bytes, l2_bytes(torch)))
    timed.fns = [_launcher(prepared, c) for c in copies]
    timed.prepared, timed.launch_args = prepared, copies
    try:
        timed.fns[0]()
        torch.cuda.synchronize()
    except Exception as err:
        raise launch_error(name, err, prepared.flagged_problems,
                           tma_rules=lambda message: refused_rules(prepared, launch_args, bound, message)) from err
    return timed


def _rotating_copies(torch: Any, opts: BenchOptions, work_bytes: float) -> int:
    """``rotate`` when given; else enough copies to overflow L2 three times where nothing flushes it."""
    if opts.rotate is not None:
        return opts.rotate
    l2 = l2_bytes(torch)
    if not opts.flushes and work_bytes and work_bytes < 2 * l2:
        return min(MAX_COPIES, math.ceil(3 * l2 / work_bytes))
    return 1


def _copy_inputs(torch: Any, prepared: Prepared, launch_args: list[Any], n_copies: int, name: str) -> list[list[Any]]:
    """The launch arguments and ``n_copies - 1`` copies: inputs cloned, outputs fresh."""
    copies = [launch_args]
    launch = [p for p in prepared.params if p.passed_at_launch]
    try:
        for _ in range(n_copies - 1):
            copies.append([a.clone() if hasattr(a, "clone") and not p.is_output else
                           (torch.empty_like(a) if hasattr(a, "clone") else a) for a, p in zip(launch_args, launch)])
    except Exception as err:
        if is_out_of_memory(err):
            raise out_of_memory_error(name, f"{n_copies} rotating copies of the inputs", err) from err
        raise
    return copies


def _prepare_callable(torch: Any, fn: Callable[[], Any], opts: BenchOptions) -> _Timed:
    name = opts.name or str(getattr(fn, "__name__", "callable"))
    timed = _Timed([fn], "callable" if name == "<lambda>" else name, flops=opts.flops, bytes=opts.bytes)
    if opts.mode == "graph":
        timed.notes.append("a callable is captured as it is: its inputs do not rotate and L2 is not flushed inside "
                           "the graph, so it may read data left in L2 by the previous launch")
    fn()
    torch.cuda.synchronize()
    return timed


def _measure(torch: Any, timed: _Timed, opts: BenchOptions) -> BenchResult:
    """Warm up, time in the asked mode (more rounds until ``ci_target``), and make the result."""
    name = timed.name or "kernel"
    try:
        flush_buf = _flush_buffer(torch) if opts.flushes else None
    except Exception as err:
        if is_out_of_memory(err):
            raise out_of_memory_error(name, f"the {FLUSH_BYTES >> 20} MiB L2-flush buffer", err) from err
        raise
    estimate = _estimate_ms(torch, timed.fns[0], flush_buf)
    n_warmup = max(1, int(opts.warmup_ms / estimate))
    n_rep = int(min(opts.max_rep, max(opts.min_rep, opts.repetition_ms / estimate)))
    target = opts.interval_target
    sampler = _telemetry_sampler(torch) if opts.telemetry else None
    with sampler if sampler is not None else contextlib.nullcontext():
        rounds = _Rounds(torch, timed, opts, flush_buf, estimate, n_warmup, n_rep)
        samples = rounds.first()
        interval = median_interval(samples)
        while (target is not None and rounds.count < opts.max_rounds and not stop_requested()
               and not within_target(interval, target)):
            samples += rounds.again()
            interval = median_interval(samples)
    notes = timed.notes + rounds.notes
    tele = sampler.result() if sampler is not None else None
    notes += _closing_notes(samples, opts, rounds.count, interval, tele)
    return BenchResult(telemetry=tele, ci_ms=(interval.low, interval.high) if interval else None,
        ci_batches=interval.batches if interval else 0, ci_correlated=bool(interval and interval.correlated),
        ci_target=target, kernel=timed.name or "kernel", samples_ms=tuple(float(s) for s in samples),
        mode=opts.mode, method=rounds.method, flops=timed.flops, bytes=timed.bytes, device=device_name(),
        backend=timed.backend, sizes=tuple(sorted(timed.sizes.items())),
        l2_flush=bool(opts.flushes and opts.mode != "graph"), rotating_copies=timed.copies,
        warmup=rounds.n_warmup, notes=tuple(notes))


def median_interval(samples: Sequence[float]) -> _stability.MedianInterval | None:
    """The median's 95% interval from batches of consecutive launches; None when there are too few
    samples for 4 batches of 3."""
    if len(samples) < _stability.MIN_BATCHES * _stability.MIN_BATCH_LEN:
        return None
    return _stability.median_interval(samples)


def within_target(interval: _stability.MedianInterval | None, target: float) -> bool:
    """True when the interval is within +-``target`` of the median and rests on batches whose
    medians do not follow each other (a correlated one is likely too narrow to stop on)."""
    return interval is not None and interval.relative_half_width <= target and not interval.correlated


class _Rounds:
    """The timing loop of one mode: a first round (with warm-up), then further rounds on request."""

    def __init__(self, torch: Any, timed: _Timed, opts: BenchOptions, flush_buf: Any, estimate: float,
                 n_warmup: int, n_rep: int) -> None:
        self.torch, self.fns, self.opts, self.flush = torch, timed.fns, opts, flush_buf
        self.n_warmup, self.n_rep, self.count = n_warmup, n_rep, 0
        self.notes: list[str] = []
        self.estimate = estimate
        self.method = BENCH_MODES[opts.mode]
        if opts.mode == "isolated":
            self.n_rep = isolated_reps(estimate, opts.idle_ms, opts.repetition_ms, opts.min_rep, opts.max_rep)
        self.batch = graph_launches(opts.graph_batch, timed.copies)
        self.copies = timed.copies

    def first(self) -> list[float]:
        o = self.opts
        if o.mode == "sustained" and o.steady:
            # Inside the telemetry sampler: starting it between the warm-up and the measurement
            # would leave the GPU idle (its clocks recovering) just before the timed launches.
            warm, per_batch = warm_to_steady(self.torch, self.fns, self.estimate, self.flush,
                                             max(o.warmup_ms, _stability.STEADY_MIN_MS), o.steady_cap_ms)
            self.notes.append(warm.note(per_batch, o.steady_cap_ms))
            self.n_warmup = len(warm.batch_ms) * per_batch
            self.method += "; after a warm-up to the GPU's steady state"
            return self._round(0)
        samples = self._round(self.n_warmup)
        if o.mode == "isolated":
            self.method += (f"; idle {o.idle_ms:g} ms before each; {len(samples)} launches, capped by a wall-time "
                            f"budget of {o.repetition_ms:g} ms that counts the idle gaps (at most {ISOLATED_MAX_REP})")
        elif o.mode == "graph":
            if o.flush_l2:
                self.notes.append("no L2 flush inside a CUDA graph: flush_l2 ignored")
            self.method += f"; {self.batch} launches per replay" + (
                f", each of the {self.copies} copies {self.batch // self.copies} times" if self.copies > 1 else "")
        return samples

    def again(self) -> list[float]:
        return self._round(1)

    def _round(self, n_warmup: int) -> list[float]:
        self.count += 1
        o, torch = self.opts, self.torch
        if o.mode == "sustained":
            return time_sustained(torch, self.fns, n_warmup, self.n_rep, self.flush)
        if o.mode == "isolated":
            warm = min(n_warmup, 3)
            return time_isolated(torch, self.fns, warm, self.n_rep, self.flush, o.idle_ms, o.repetition_ms, o.min_rep)
        return time_graph(torch, self.fns, n_warmup, max(o.min_rep, self.n_rep // self.batch), self.batch)


def _closing_notes(samples: list[float], opts: BenchOptions, rounds: int,
                   interval: _stability.MedianInterval | None, tele: Any) -> list[str]:
    notes = []
    stopped = stop_requested()
    if stopped:
        notes.append(f"interrupted: {len(samples)} launches measured before the stop")
    if interval is not None:
        notes.append(interval.note())
    target = opts.interval_target
    if target is not None:
        # the samples a round took, not rep_ms: max_rep caps a round of a short kernel below it
        what = f"{rounds} round(s) of {len(samples) // max(rounds, 1)} samples"
        if within_target(interval, target):
            notes.append(f"{what} until the median's 95% interval was within +-{100 * target:g}% (ci_target)")
        elif not stopped and rounds >= opts.max_rounds:
            why = ("its batches still correlated" if interval is not None and interval.correlated and
                   interval.relative_half_width <= target else
                   f"+-{100 * interval.relative_half_width:.2f}%" if interval is not None else "too few samples")
            notes.append(f"the median's 95% interval missed ci_target +-{100 * target:g}% ({why}) when the cap of "
                         f"max_rounds={opts.max_rounds} rounds stopped the measurement ({what}); raise max_rounds= "
                         "or rep_ms= to measure longer, or pass ci_target=None for one round")
    if tele is not None and tele.throttled:
        notes.append("the GPU throttled during this measurement (" + ", ".join(tele.reasons) + "): "
                     "the timings are slower than the GPU's sustained rate")
    return notes


def _telemetry_sampler(torch: Any):
    """An NVML sampler for the current CUDA device (NVML counts devices as CUDA does by PCI bus)."""
    from ._telemetry import NvmlSampler

    index = torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        parts = [p.strip() for p in visible.split(",") if p.strip()]
        if index < len(parts) and parts[index].isdigit():
            index = int(parts[index])
    return NvmlSampler(index)
