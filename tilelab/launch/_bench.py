"""``tilelab.bench``: CUDA-event timing in three named modes.

* ``sustained`` — back to back, as ``triton.testing.do_bench``: an L2 flush (zeroing a 256 MiB
  buffer) then the launch between a pair of events, many times, never waiting: the GPU stays
  busy, so it runs at the clocks its power limit sustains.
* ``isolated`` — one launch at a time: wait for the GPU, leave it idle ``idle_ms``, flush L2,
  spin briefly on the device so the host's launch latency is hidden, time one launch. Clocks
  recover between launches, as under Nsight Compute's replay (``gpu__time_duration`` with
  ``--clock-control none``). The idle gap matters: on an H200 (2026-11-22) 0 ms read 10-12% above
  ncu (sustained power), 20 ms read 3-13% above (clocks drop while idle), 2 ms within 0.6-0.9%.
* ``graph`` — ``graph_batch`` launches captured in a CUDA graph, each replay timed and divided;
  inputs rotate among copies when they would fit in L2 (a flush cannot go inside the graph).

Samples are milliseconds per launch. Tests never call the timing loops; the benchmarks do.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

from . import _inputs
from ._run import Prepared, call_kernel, device_name, is_tilelang_kernel, launch_error, prepare_kernel, require_gpu
from .models import BENCH_MODES, BenchResult

SPIN_CYCLES = 200_000  # about 100 us at Hopper clocks: longer than any host launch path here
FLUSH_BYTES = 256 << 20  # what triton.testing.do_bench zeroes between launches

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
# Operation and byte counts
# ------------------------------------------------------------------------------------------


def count_work(params: Sequence[_inputs.Param], sizes: dict[str, int]) -> tuple[float | None, float]:
    """(flops, bytes) for a kernel's signature: bytes = every tensor read or written once;
    flops = 2*M*N*K when it looks like a GEMM (two 2-D inputs, one 2-D output sharing M, N, K),
    None otherwise (a copy-like kernel is timed by bytes alone)."""
    total = 0.0
    for p in params:
        if p.kind == "tensor":
            numel = math.prod(_inputs.eval_dim(d, sizes) for d in p.shape)
            total += numel * _inputs.element_bytes(p.dtype)
    flops = gemm_flops([tuple(_inputs.eval_dim(d, sizes) for d in p.shape) for p in params
                        if p.kind == "tensor" and not p.is_output],
                       [tuple(_inputs.eval_dim(d, sizes) for d in p.shape) for p in params
                        if p.kind == "tensor" and p.is_output])
    return flops, total


def gemm_flops(inputs: Sequence[tuple[int, ...]], outputs: Sequence[tuple[int, ...]]) -> float | None:
    """2*M*N*K when shapes read as C(M,N) = A(M,K|K,M) @ B(K,N|N,K); None when they do not."""
    if len(outputs) != 1 or len(inputs) != 2:
        return None
    out, (a, b) = outputs[0], inputs
    if len(out) != 2 or len(a) != 2 or len(b) != 2:
        return None
    m, n = out
    for a_mk in (a, a[::-1]):
        for b_kn in (b, b[::-1]):
            if a_mk[0] == m and b_kn[1] == n and a_mk[1] == b_kn[0]:
                return 2.0 * m * n * a_mk[1]
    return None


# ------------------------------------------------------------------------------------------
# Timing loops
# ------------------------------------------------------------------------------------------


def _estimate_ms(torch: Any, fn: Callable[[], Any], flush: Any) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if flush is not None:
            flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end) / 5, 1e-4)


def time_sustained(torch: Any, fns: Sequence[Callable[[], Any]], n_warmup: int, n_rep: int,
                   flush: Any | None) -> list[float]:
    for i in range(n_warmup):
        fns[i % len(fns)]()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if flush is not None:
            flush.zero_()
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_isolated(torch: Any, fns: Sequence[Callable[[], Any]], n_warmup: int, n_rep: int,
                  flush: Any | None, idle_ms: float) -> list[float]:
    for i in range(n_warmup):
        fns[i % len(fns)]()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for i in range(n_rep):
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
    for i in range(n_rep):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / batch for s, e in zip(starts, ends)]


# ------------------------------------------------------------------------------------------
# bench
# ------------------------------------------------------------------------------------------


def bench(kernel: Any, *args: Any, mode: str = "sustained", flops: float | None = None,
          bytes: float | None = None, warmup_ms: float = 25.0, rep_ms: float = 100.0,
          min_rep: int = 10, max_rep: int = 10_000, flush_l2: bool | None = None, rotate: int | None = None,
          idle_ms: float = 2.0, graph_batch: int = 20, backend: str | None = None,
          out_idx: int | list[int] | None = None, outputs: Sequence[str] | None = None,
          seed: int | None = None, name: str | None = None, **sizes: int) -> BenchResult:
    """Time ``kernel`` (a TileLang kernel, or any zero-argument callable such as
    ``lambda: torch.matmul(a, b)``) with CUDA events; see the module doc for the modes.

    Inputs are built as for :func:`tilelab.run`. Rates come from ``flops``/``bytes`` when given,
    else from the signature (bytes of every tensor; 2*M*N*K for GEMM-like kernels).
    Warm-up and repetition counts are derived, as in ``do_bench``, from ``warmup_ms``/``rep_ms``
    over a first estimate, bounded by ``min_rep``/``max_rep``.
    """
    if mode not in BENCH_MODES:
        raise ValueError(f"mode must be one of {sorted(BENCH_MODES)}; got {mode!r}")
    torch = require_gpu()
    notes: list[str] = []
    bound: dict[str, int] = {}
    backend_used = ""
    if is_tilelang_kernel(kernel) or isinstance(kernel, Prepared):
        prepared = kernel if isinstance(kernel, Prepared) else prepare_kernel(
            kernel, backend=backend, out_idx=out_idx, outputs=outputs)
        kname, backend_used = prepared.name, prepared.backend
        launch_args, bound = _inputs.build_inputs(prepared.params, args, sizes, device="cuda", seed=seed)
        auto_flops, auto_bytes = count_work(prepared.params, bound)
        flops = flops if flops is not None else auto_flops
        bytes = bytes if bytes is not None else auto_bytes
        copies = [launch_args]
        flush = flush_l2 if flush_l2 is not None else mode != "graph"
        n_copies = rotate if rotate is not None else 1
        if rotate is None and not flush and auto_bytes and auto_bytes < 2 * l2_bytes(torch):
            n_copies = min(64, math.ceil(3 * l2_bytes(torch) / auto_bytes))
        launch = [p for p in prepared.params if p.passed_at_launch]
        for _ in range(n_copies - 1):
            copies.append([a.clone() if hasattr(a, "clone") and not p.is_output else
                           (torch.empty_like(a) if hasattr(a, "clone") else a) for a, p in zip(launch_args, launch)])
        if n_copies > 1:
            notes.append(f"inputs rotate among {n_copies} copies so that the working set exceeds L2")
        fns = [(lambda c=c: call_kernel(prepared, c)) for c in copies]
        try:
            fns[0]()
            torch.cuda.synchronize()
        except Exception as err:
            raise launch_error(kname, err, prepared.flagged_problems) from err
    elif callable(kernel):
        kname = name or getattr(kernel, "__name__", "callable")
        if kname == "<lambda>":
            kname = "callable"
        fns = [kernel]
        n_copies = 1
        flush = flush_l2 if flush_l2 is not None else mode != "graph"
        fns[0]()
        torch.cuda.synchronize()
    else:
        raise TypeError(f"bench times a TileLang kernel or a zero-argument callable; got {type(kernel).__name__}")
    flush_buf = _flush_buffer(torch) if flush else None
    estimate = _estimate_ms(torch, fns[0], flush_buf)
    n_warmup = max(1, int(warmup_ms / estimate))
    n_rep = int(min(max_rep, max(min_rep, rep_ms / estimate)))
    if mode == "sustained":
        samples = time_sustained(torch, fns, n_warmup, n_rep, flush_buf)
    elif mode == "isolated":
        samples = time_isolated(torch, fns, min(n_warmup, 3), n_rep, flush_buf, idle_ms)
    else:
        if flush:
            notes.append("no L2 flush inside a CUDA graph: flush_l2 ignored")
        samples = time_graph(torch, fns, n_warmup, max(min_rep, n_rep // graph_batch), graph_batch)
    method = BENCH_MODES[mode]
    if mode == "isolated":
        method += f"; idle {idle_ms:g} ms before each"
    if mode == "graph":
        method += f"; {graph_batch} launches per replay"
    return BenchResult(
        kernel=kname or "kernel", samples_ms=tuple(float(s) for s in samples), mode=mode, method=method,
        flops=flops, bytes=bytes, device=device_name(), backend=backend_used,
        sizes=tuple(sorted(bound.items())), l2_flush=bool(flush and mode != "graph"), rotating_copies=n_copies,
        warmup=n_warmup, notes=tuple(notes),
    )

