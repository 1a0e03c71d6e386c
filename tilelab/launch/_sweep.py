"""``tilelab.sweep``: compile configurations in parallel, benchmark each, tabulate.

Elaboration (calling the factory to get a ``T.prim_func``) runs in the calling thread; the
compiles (TileLang lowering + nvcc, mostly in subprocesses) run in a thread pool across the
machine's cores with a progress bar; benchmarks run one at a time on the GPU, with another. Every
configuration that fails (to elaborate, compile, verify or launch) is a row with its error.
The compile and bench steps can be replaced (``compile_fn``/``bench_fn``): the tests use a fake.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Mapping, Sequence

from .models import BenchResult, SweepRow, SweepTable

Config = dict[str, Any]


def expand(space: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None) -> list[Config]:
    """A dict of lists -> the cartesian product (in order); a list of dicts -> itself."""
    if space is None:
        return [{}]
    if isinstance(space, Mapping):
        keys = list(space)
        return [dict(zip(keys, values)) for values in itertools.product(*(list(space[k]) for k in keys))]
    return [dict(item) for item in space]


def _short_error(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    first = text.splitlines()[0]
    return f"{type(err).__name__}: {first[:300]}"


class _Progress:
    """tqdm when installed (tqdm.auto: a widget in notebooks), else a line on stderr."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.bar = None
        self.total, self.done, self.desc, self.enabled = total, 0, desc, enabled
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, leave=False)
            except ImportError:
                self.bar = None

    def update(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            sys.stderr.write(f"\r{self.desc}: {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")


def default_compile(factory: Callable[..., Any], size: Config, config: Config, *, backend: str,
                    out_idx: Any) -> Callable[[], Any]:
    """Elaborate now (in the caller's thread); return the compile step to run in the pool."""
    from ._run import prepare_kernel

    func = factory(**size, **config)
    return lambda: prepare_kernel(func, backend=backend, out_idx=out_idx)


def default_bench(prepared: Any, size: Config, config: Config, **kwargs: Any) -> BenchResult:
    from ._bench import bench

    return bench(prepared, **kwargs)


def sweep(factory: Callable[..., Any], params: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None = None,
          sizes: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None = None, *,
          mode: str = "sustained", flops: Callable[..., float] | None = None,
          bytes: Callable[..., float] | None = None, ref: Callable[..., Any] | None = None,
          baseline: Mapping[str, Callable[..., Callable[[], Any]]] | None = None,
          workers: int | None = None, backend: str = "tvm_ffi", out_idx: Any = -1,
          bench_kwargs: Mapping[str, Any] | None = None, progress: bool = True,
          compile_fn: Callable[..., Callable[[], Any]] | None = None,
          devices: str | Sequence[int] | None = None, client: Any = None, force: bool = False,
          bench_fn: Callable[..., BenchResult] | None = None,
          check_fn: Callable[..., Any] | None = None, name: str | None = None, isolate: bool = True,
          timeout: float | None = None) -> SweepTable:
    """Benchmark every configuration of ``factory`` at every size; mark the best per size.

    ``factory(**size, **config)`` returns a TileLang kernel (``examples/gemm.py:matmul``).
    ``params``/``sizes``: a dict of lists (cartesian product) or a list of dicts. ``flops`` and
    ``bytes`` are callables of the size's keywords (counted from the signature when omitted);
    ``ref`` checks each configuration with :func:`tilelab.run` before it is timed;
    ``baseline`` maps a label to ``f(**size) -> zero-argument callable`` timed on the same terms
    (``{"torch.matmul": lambda M, N, K: ...}``), rated with the kernels' counted FLOPs and bytes at
    that size unless ``flops``/``bytes`` say otherwise.

    ``devices="all"`` (or a list of GPU indices) compiles in a pool of processes and benchmarks
    on every listed GPU at once, one configuration per GPU; ``client=`` (a
    ``dask.distributed.Client``) does the same on a Dask cluster (see
    :mod:`tilelab.launch._distribute`). Those sweeps show one progress bar and, in a notebook, the
    table growing as rows finish; each row says where it ran and how long its compile and bench
    took; finished rows are cached on disk, so an interrupted sweep resumes when called again
    (``force=True`` measures everything again).

    Progress bars follow the compiles and then the benchmarks. A check that fails (or raises) is
    a row of stage "check". Checks and benchmarks run in tilelab's worker process
    (``isolate=True``, the default), each within ``timeout`` seconds (see :func:`tilelab.bench`):
    a configuration that hangs or crashes is a failed row with its reason, and the sweep goes on
    with a fresh worker. With ``isolate=False`` a sticky CUDA error
    (``KernelLaunchError.sticky``) leaves this process's context unusable: the sweep stops there,
    and every row after it is "not run", with a note naming the configuration that caused it.
    Interrupting (the stop button, Ctrl-C) keeps the rows measured so far: the rest are "not run".
    """
    if devices is not None or client is not None:  # every GPU of the host, or a Dask cluster
        from ._distribute import distributed_sweep

        # isolate is forwarded only when False: a daemonic Dask worker falls back to in-process
        # launches by itself (and says so) when the caller did not ask for isolation explicitly.
        launch = {**({"isolate": False} if not isolate else {}), **({"timeout": timeout} if timeout is not None else {})}
        return distributed_sweep(factory, expand(params), expand(sizes), devices=devices, client=client, mode=mode,
                                 flops=flops, bytes=bytes, ref=ref, baseline=baseline, workers=workers,
                                 backend=backend, out_idx=out_idx, bench_kwargs={**(bench_kwargs or {}), **launch},
                                 progress=progress,
                                 compile_fn=compile_fn, bench_fn=bench_fn, check_fn=check_fn, name=name, force=force)
    configs, size_list = expand(params), expand(sizes)
    compile_fn = compile_fn or (lambda f, s, c: default_compile(f, s, c, backend=backend, out_idx=out_idx))
    bench_kwargs = dict(bench_kwargs or {})
    bench_kwargs.setdefault("mode", mode)
    bench_kwargs.setdefault("isolate", isolate)
    if timeout is not None:
        bench_kwargs.setdefault("timeout", timeout)
    bench_fn = bench_fn or default_bench
    jobs: list[tuple[int, Config, Config]] = [(i, s, c) for i, (s, c) in
                                             enumerate(itertools.product(size_list, configs))]
    compiled: dict[int, Any] = {}
    failures: dict[int, tuple[str, str]] = {}
    compile_time: dict[int, float] = {}
    steps: dict[int, Callable[[], Any]] = {}
    for i, size, config in jobs:
        try:
            steps[i] = compile_fn(factory, size, config)
        except Exception as err:
            failures[i] = ("elaborate", _short_error(err))
    bar = _Progress(len(steps), f"compiling {len(steps)} configurations", progress)

    def timed(step: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        return step(), time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        futures = {pool.submit(timed, step): i for i, step in steps.items()}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                compiled[i], compile_time[i] = fut.result()
            except Exception as err:
                failures[i] = ("compile", _short_error(err))
            bar.update()
    bar.close()

    rows: list[SweepRow] = []
    notes: list[str] = []
    work: dict[tuple, tuple[float | None, float | None]] = {}  # size -> the kernels' counted (flops, bytes)
    lost: str | None = None  # set when a sticky CUDA error made the context unusable
    runnable = [i for i, _, _ in jobs if i not in failures]
    n_baselines = len(baseline or {}) * len(size_list)
    bar = _Progress(len(runnable) + n_baselines, f"benchmarking {len(runnable) + n_baselines} rows", progress)
    interrupted: str | None = None
    for i, size, config in jobs:
        key_c, key_s = tuple(config.items()), tuple((k, int(v)) for k, v in size.items())
        if interrupted is not None and i not in failures:
            rows.append(SweepRow(key_c, key_s, error=interrupted, stage="not run", compile_s=compile_time.get(i)))
            continue
        if i in failures:
            stage, error = failures[i]
            rows.append(SweepRow(key_c, key_s, error=error, stage=stage))
            continue
        if lost is not None:
            rows.append(SweepRow(key_c, key_s, error=lost, stage="not run", compile_s=compile_time.get(i)))
            bar.update()
            continue
        kernel = compiled[i]
        stage = "check"
        try:
            if ref is not None:
                result = check_fn(kernel, ref, size) if check_fn else _check(kernel, ref, size, isolate, timeout)
                if not result:
                    rows.append(SweepRow(key_c, key_s, error=f"wrong result: rel error {result.rel_error}",
                                         stage="check", compile_s=compile_time.get(i)))
                    bar.update()
                    continue
            stage = "bench"
            extra = dict(bench_kwargs)
            if flops is not None:
                extra["flops"] = flops(**size)
            if bytes is not None:
                extra["bytes"] = bytes(**size)
            res = bench_fn(kernel, size, config, **extra, **_size_kwargs(kernel, size))
        except KeyboardInterrupt as err:
            interrupted = _INTERRUPTED
            partial = getattr(err, "partial", None)
            if isinstance(partial, BenchResult) and partial.samples_ms:
                notes.append(f"interrupted while timing {_describe(key_c, key_s)}: its row has the "
                             f"{len(partial.samples_ms)} launches measured before the stop")
                rows.append(SweepRow(key_c, key_s, median_ms=partial.median_ms, min_ms=partial.min_ms,
                                     spread=partial.spread, tflops=partial.tflops, gbps=partial.gbps,
                                     compile_s=compile_time.get(i)))
            else:
                notes.append(f"interrupted at {_describe(key_c, key_s)}: the rows before it were measured")
                rows.append(SweepRow(key_c, key_s, error=interrupted, stage="not run", compile_s=compile_time.get(i)))
            bar.update()
            continue
        except Exception as err:
            rows.append(SweepRow(key_c, key_s, error=_short_error(err), stage=stage, compile_s=compile_time.get(i)))
            if getattr(err, "sticky", False) and not getattr(err, "isolated", False):
                lost = _lost_context(err, key_c, key_s, stage)
                notes.append(lost)
            bar.update()
            continue
        work.setdefault(key_s, (res.flops, res.bytes))
        rows.append(SweepRow(key_c, key_s, median_ms=res.median_ms, min_ms=res.min_ms, spread=res.spread,
                             tflops=res.tflops, gbps=res.gbps, compile_s=compile_time.get(i)))
        bar.update()
    for label, make in (baseline or {}).items():
        for size in size_list:
            key_s = tuple((k, int(v)) for k, v in size.items())
            if lost is not None or interrupted is not None:
                rows.append(SweepRow((), key_s, error=lost or interrupted, stage="not run", label=label))
                bar.update()
                continue
            try:
                extra = dict(bench_kwargs)
                # the same operation count as the kernels at this size, so rates compare
                counted_flops, counted_bytes = work.get(key_s, (None, None))
                if flops is not None:
                    extra["flops"] = flops(**size)
                elif counted_flops is not None:
                    extra["flops"] = counted_flops
                if bytes is not None:
                    extra["bytes"] = bytes(**size)
                elif counted_bytes is not None:
                    extra["bytes"] = counted_bytes
                res = bench_fn(make(**size), size, {}, name=label, **extra)
                rows.append(SweepRow((), key_s, median_ms=res.median_ms, min_ms=res.min_ms, spread=res.spread,
                                     tflops=res.tflops, gbps=res.gbps, label=label))
            except KeyboardInterrupt:
                interrupted = _INTERRUPTED
                notes.append(f"interrupted at baseline {label}: the rows before it were measured")
                rows.append(SweepRow((), key_s, error=interrupted, stage="not run", label=label))
            except Exception as err:
                rows.append(SweepRow((), key_s, error=_short_error(err), stage="bench", label=label))
                if getattr(err, "sticky", False):
                    lost = _lost_context(err, (("baseline", label),), key_s, "bench")
                    notes.append(lost)
            bar.update()
    bar.close()
    if baseline and str(bench_kwargs.get("mode", mode)) == "graph":
        notes.append("graph mode: the kernels' inputs rotate among copies, but a baseline callable is replayed "
                     "as captured, without rotating its inputs or flushing L2, so it may read cached data")
    rows = mark_best(rows)
    device = ""
    try:
        from ._run import device_name

        device = device_name()
    except Exception:
        pass
    return SweepTable(kernel=name or getattr(factory, "__name__", "kernel"), rows=tuple(rows),
                      mode=str(bench_kwargs.get("mode", mode)), device=device, notes=tuple(notes),
                      factory=getattr(factory, "__name__", ""))


_INTERRUPTED = "not run: the sweep was interrupted"


def _describe(config: tuple, size: tuple) -> str:
    culprit = ", ".join(f"{k}={v}" for k, v in config) or "(defaults)"
    return f"{culprit} at size " + ("x".join(str(v) for _, v in size) or "-")


def _lost_context(err: BaseException, config: tuple, size: tuple, stage: str) -> str:
    """The note for rows after a sticky CUDA error, naming the configuration that caused it."""
    culprit = ", ".join(f"{k}={v}" for k, v in config) or "(defaults)"
    at = "x".join(str(v) for _, v in size) or "-"
    kind = getattr(err, "kind", "error")
    return (f"not run: the CUDA context was lost ({kind}, sticky) in the {stage} step of {culprit} at size {at}; "
            "restart the Python kernel and sweep again without that configuration")


def _size_kwargs(kernel: Any, size: Config) -> dict[str, int]:
    """Dynamic sizes for bench: only those the kernel's signature names symbolically."""
    params = getattr(kernel, "params", None)
    if not params:
        return {}
    symbols = {d for p in params for d in getattr(p, "shape", ()) if isinstance(d, str)}
    return {k: int(v) for k, v in size.items() if k in symbols}


def _check(kernel: Any, ref: Callable[..., Any], size: Config, isolate: bool = True, timeout: float | None = None) -> Any:
    from ._run import run

    return run(kernel.compiled if hasattr(kernel, "compiled") else kernel, ref=ref, isolate=isolate, timeout=timeout,
               **_size_kwargs(kernel, size))


def mark_best(rows: Iterable[SweepRow]) -> list[SweepRow]:
    """Mark the fastest successful configuration (baselines excluded) at each size."""
    import dataclasses

    rows = [dataclasses.replace(r, best=False) for r in rows]
    best: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        if not r.ok or r.label is not None:
            continue
        j = best.get(r.size)
        if j is None or (r.median_ms or 0) < (rows[j].median_ms or 0):
            best[r.size] = i
    for i in best.values():
        rows[i] = dataclasses.replace(rows[i], best=True)
    return rows
