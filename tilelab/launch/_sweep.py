"""``tilelab.sweep``: compile configurations in parallel, benchmark each, tabulate.

Elaboration (calling the factory to get a ``T.prim_func``) runs in the calling thread; the
compiles (TileLang lowering + nvcc, mostly in subprocesses) run in a thread pool across the
machine's cores with a progress bar; benchmarks run one at a time on the GPU, with another. Every
configuration that fails (to elaborate, compile, verify or launch) is a row with its error.
The compile and bench steps can be replaced (``compile_fn``/``bench_fn``): the tests use a fake.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
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


def default_compile(factory: Callable[..., Any], size: Config, config: Config, *, backend: str | None,
                    out_idx: Any, target: Any = None) -> Callable[[], Any]:
    """Elaborate now (in the caller's thread); return the compile step to run in the pool."""
    from ._run import prepare_kernel

    func = factory(**size, **config)
    return lambda: prepare_kernel(func, backend=backend, out_idx=out_idx, target=target)


def default_bench(prepared: Any, size: Config, config: Config, **kwargs: Any) -> BenchResult:
    from ._bench import bench

    return bench(prepared, **kwargs)


Space = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None


@dataclass(frozen=True)
class SweepOptions:
    """How :func:`sweep` compiles, checks and times: every keyword of ``sweep`` after the two spaces.

    ``sweep(f, params, sizes, mode="graph", ref=ref)`` and
    ``sweep(f, params, sizes, options=SweepOptions(mode="graph", ref=ref))`` are the same call; a
    keyword given beside ``options`` replaces that field. See :func:`sweep` for each field.
    """

    mode: str = "sustained"
    flops: Callable[..., float] | None = None  # f(**size) -> FLOPs; counted from the signature when None
    bytes: Callable[..., float] | None = None
    ref: Callable[..., Any] | None = None
    baseline: Mapping[str, Callable[..., Callable[[], Any]]] | None = None
    workers: int | None = None
    backend: str | None = None  # None: tvm_ffi (cython for the CPU)
    out_idx: Any = -1
    bench_kwargs: Mapping[str, Any] | None = None
    progress: bool = True
    compile_fn: Callable[..., Callable[[], Any]] | None = None
    devices: str | Sequence[int] | None = None
    client: Any = None
    force: bool = False
    bench_fn: Callable[..., BenchResult] | None = None
    check_fn: Callable[..., Any] | None = None
    name: str | None = None
    isolate: bool = True
    timeout: float | None = None
    target: Any = None  # "c": compile every configuration for the CPU and time it there
    # leaders per size timed again on one device after a sweep over several (0: none; 1 changes
    # nothing: a leader alone has nothing to be ranked against)
    finalists: int = 3

    def __post_init__(self) -> None:
        if isinstance(self.finalists, bool) or not isinstance(self.finalists, int) or self.finalists < 0:
            from .._errors import OptionError

            raise OptionError(f"sweep option finalists={self.finalists!r}: pass a non-negative int, how many of "
                              "the fastest configurations at each size are timed again on one device after a "
                              "sweep over several devices (default 3; 0 turns that final round off)")

    @classmethod
    def merge(cls, options: SweepOptions | None, keywords: dict[str, Any]) -> SweepOptions:
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(keywords) - set(fields))
        if unknown:
            raise TypeError(f"sweep() has no option {', '.join(map(repr, unknown))}; its options are "
                            f"{', '.join(fields)} (sizes go in the sizes= space, not as keywords)")
        return dataclasses.replace(options or cls(), **keywords)

    def bench_options(self) -> dict[str, Any]:
        """The keywords every benchmark of the sweep gets: ``bench_kwargs`` over mode, isolate, timeout."""
        out = dict(self.bench_kwargs or {})
        out.setdefault("mode", self.mode)
        out.setdefault("isolate", self.isolate)
        if self.timeout is not None:
            out.setdefault("timeout", self.timeout)
        return out


def sweep(factory: Callable[..., Any], params: Space = None, sizes: Space = None, *,
          options: SweepOptions | None = None, **keywords: Any) -> SweepTable:
    """Benchmark every configuration of ``factory`` at every size; mark the best per size.

    ``factory(**size, **config)`` returns a TileLang kernel (``examples/gemm.py:matmul``).
    ``params``/``sizes``: a dict of lists (cartesian product) or a list of dicts. The options are
    the fields of :class:`SweepOptions`, as keywords or one ``options=`` record:
    ``flops`` and ``bytes`` are callables of the size's keywords (counted from the signature
    when omitted); ``ref`` checks each configuration with :func:`tilelab.run` before it is timed;
    ``baseline`` maps a label to ``f(**size) -> zero-argument callable`` timed on the same terms
    (``{"torch.matmul": lambda M, N, K: ...}``), rated with the kernels' counted FLOPs and bytes at
    that size unless ``flops``/``bytes`` say otherwise. ``mode`` and ``bench_kwargs`` go to
    :func:`tilelab.bench`; ``workers`` compile threads; ``backend``/``out_idx`` to the compile;
    ``compile_fn``/``bench_fn``/``check_fn`` replace the compile, bench and check steps.

    ``devices="all"`` (or a list of GPU indices) compiles in a pool of processes and benchmarks
    on every listed GPU at once, one configuration per GPU; ``client=`` (a
    ``dask.distributed.Client``) does the same on a Dask cluster (see
    :mod:`tilelab.launch._distribute`). Those sweeps show one progress bar and, in a notebook, the
    table growing as rows finish; each row says where it ran and how long its compile and bench
    took; finished rows are cached on disk, so an interrupted sweep resumes when called again
    (``force=True`` measures everything again). Two GPUs of one model can differ by about 1%, as
    much as close configurations do, so after such a sweep the ``finalists`` (default 3) fastest
    configurations at each size are ranked on one device (the first of ``devices``, or the first
    GPU worker of the cluster): those the sweep measured elsewhere are timed again there, one after
    another, and those it measured there keep that figure; their ``final_ms`` decides the best.

    Progress bars follow the compiles and then the benchmarks. A check that fails (or raises) is
    a row of stage "check". Checks and benchmarks run in tilelab's worker process
    (``isolate=True``, the default), each within ``timeout`` seconds (see :func:`tilelab.bench`):
    a configuration that hangs or crashes is a failed row with its reason, and the sweep goes on
    with a fresh worker. With ``isolate=False`` a sticky CUDA error
    (``KernelLaunchError.sticky``) leaves this process's context unusable: the sweep stops there,
    and every row after it is "not run", with a note naming the configuration that caused it.
    Interrupting (the stop button, Ctrl-C) keeps the rows measured so far: the rest are "not run".

    ``target="c"`` compiles every configuration for the CPU and times it there (wall clock);
    ``backend`` defaults to tvm_ffi (cython for the CPU).
    """
    opts = SweepOptions.merge(options, keywords)
    if opts.devices is not None or opts.client is not None:  # every GPU of the host, or a Dask cluster
        return _distributed(factory, params, sizes, opts)
    configs, size_list = expand(params), expand(sizes)
    jobs: list[tuple[int, Config, Config]] = [(i, s, c) for i, (s, c) in
                                             enumerate(itertools.product(size_list, configs))]
    compiled = _compile_all(factory, jobs, opts)
    run = _SweepRun(opts, compiled, n_baseline_rows=len(opts.baseline or {}) * len(size_list))
    for i, size, config in jobs:
        run.kernel_row(i, size, config)
    for label, make in (opts.baseline or {}).items():
        for size in size_list:
            run.baseline_row(label, make, size)
    run.bar.close()
    return _table(factory, run, opts)


def _distributed(factory: Callable[..., Any], params: Space, sizes: Space, opts: SweepOptions) -> SweepTable:
    from ._distribute import distributed_sweep

    return distributed_sweep(factory, expand(params), expand(sizes), opts)


@dataclass
class _Compiled:
    kernels: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, tuple[str, str]] = field(default_factory=dict)  # job -> (stage, error)
    seconds: dict[int, float] = field(default_factory=dict)


def _compile_all(factory: Callable[..., Any], jobs: list[tuple[int, Config, Config]],
                 opts: SweepOptions) -> _Compiled:
    """Elaborate every job here, then compile them in a pool of threads, timing each compile."""
    compile_fn = opts.compile_fn or (lambda f, s, c: default_compile(f, s, c, backend=opts.backend,
                                                                      out_idx=opts.out_idx, target=opts.target))
    out = _Compiled()
    steps: dict[int, Callable[[], Any]] = {}
    for i, size, config in jobs:
        try:
            steps[i] = compile_fn(factory, size, config)
        except Exception as err:
            out.failures[i] = ("elaborate", _short_error(err))
    bar = _Progress(len(steps), f"compiling {len(steps)} configurations", opts.progress)

    def timed(step: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        return step(), time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=opts.workers or os.cpu_count() or 1) as pool:
        futures = {pool.submit(timed, step): i for i, step in steps.items()}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                out.kernels[i], out.seconds[i] = fut.result()
            except Exception as err:
                out.failures[i] = ("compile", _short_error(err))
            bar.update()
    bar.close()
    return out


class _SweepRun:
    """The benchmark phase: one row per job, then the baselines; stops cleanly on an interrupt or
    a lost CUDA context, marking what remains "not run"."""

    def __init__(self, opts: SweepOptions, compiled: _Compiled, n_baseline_rows: int) -> None:
        self.opts, self.compiled = opts, compiled
        self.bench_kwargs = opts.bench_options()
        self.bench_fn = opts.bench_fn or default_bench
        self.rows: list[SweepRow] = []
        self.notes: list[str] = []
        self.work: dict[tuple, tuple[float | None, float | None]] = {}  # size -> the kernels' (flops, bytes)
        self.lost: str | None = None  # set when a sticky CUDA error made the context unusable
        self.interrupted: str | None = None
        runnable = len(compiled.kernels)
        self.bar = _Progress(runnable + n_baseline_rows, f"benchmarking {runnable + n_baseline_rows} rows",
                             opts.progress)

    def kernel_row(self, i: int, size: Config, config: Config) -> None:
        key_c, key_s = tuple(config.items()), tuple((k, int(v)) for k, v in size.items())
        compile_s = self.compiled.seconds.get(i)
        if i in self.compiled.failures:
            stage, error = self.compiled.failures[i]
            self.rows.append(SweepRow(key_c, key_s, error=error, stage=stage))
            return
        if self.interrupted is not None:
            self.rows.append(SweepRow(key_c, key_s, error=self.interrupted, stage="not run", compile_s=compile_s))
            return
        self.rows.append(self._measure_kernel(self.compiled.kernels[i], size, config, key_c, key_s, compile_s))
        self.bar.update()

    def _measure_kernel(self, kernel: Any, size: Config, config: Config, key_c: tuple, key_s: tuple,
                        compile_s: float | None) -> SweepRow:
        if self.lost is not None:
            return SweepRow(key_c, key_s, error=self.lost, stage="not run", compile_s=compile_s)
        opts, stage = self.opts, "check"
        try:
            if opts.ref is not None:
                result = (opts.check_fn(kernel, opts.ref, size) if opts.check_fn
                          else _check(kernel, opts.ref, size, opts.isolate, opts.timeout))
                if not result:
                    return SweepRow(key_c, key_s, error=f"wrong result: rel error {result.rel_error}",
                                    stage="check", compile_s=compile_s)
            stage = "bench"
            extra = dict(self.bench_kwargs)
            if opts.flops is not None:
                extra["flops"] = opts.flops(**size)
            if opts.bytes is not None:
                extra["bytes"] = opts.bytes(**size)
            res = self.bench_fn(kernel, size, config, **extra, **_size_kwargs(kernel, size))
        except KeyboardInterrupt as err:
            return self._interrupted_row(err, key_c, key_s, compile_s)
        except Exception as err:
            if getattr(err, "sticky", False) and not getattr(err, "isolated", False):
                self.lost = _lost_context(err, key_c, key_s, stage)
                self.notes.append(self.lost)
            return SweepRow(key_c, key_s, error=_short_error(err), stage=stage, compile_s=compile_s)
        self.work.setdefault(key_s, (res.flops, res.bytes))
        return SweepRow.measured(key_c, key_s, res, compile_s=compile_s)

    def _interrupted_row(self, err: KeyboardInterrupt, key_c: tuple, key_s: tuple,
                         compile_s: float | None) -> SweepRow:
        self.interrupted = _INTERRUPTED
        partial = getattr(err, "partial", None)
        if isinstance(partial, BenchResult) and partial.samples_ms:
            self.notes.append(f"interrupted while timing {_describe(key_c, key_s)}: its row has the "
                              f"{len(partial.samples_ms)} launches measured before the stop")
            return SweepRow.measured(key_c, key_s, partial, compile_s=compile_s)
        self.notes.append(f"interrupted at {_describe(key_c, key_s)}: the rows before it were measured")
        return SweepRow(key_c, key_s, error=self.interrupted, stage="not run", compile_s=compile_s)

    def baseline_row(self, label: str, make: Callable[..., Callable[[], Any]], size: Config) -> None:
        key_s = tuple((k, int(v)) for k, v in size.items())
        if self.lost is not None or self.interrupted is not None:
            self.rows.append(SweepRow((), key_s, error=self.lost or self.interrupted, stage="not run", label=label))
            self.bar.update()
            return
        try:
            res = self.bench_fn(make(**size), size, {}, name=label, **self._baseline_work(size, key_s))
            self.rows.append(SweepRow.measured((), key_s, res, label=label))
        except KeyboardInterrupt:
            self.interrupted = _INTERRUPTED
            self.notes.append(f"interrupted at baseline {label}: the rows before it were measured")
            self.rows.append(SweepRow((), key_s, error=self.interrupted, stage="not run", label=label))
        except Exception as err:
            self.rows.append(SweepRow((), key_s, error=_short_error(err), stage="bench", label=label))
            if getattr(err, "sticky", False):
                self.lost = _lost_context(err, (("baseline", label),), key_s, "bench")
                self.notes.append(self.lost)
        self.bar.update()

    def _baseline_work(self, size: Config, key_s: tuple) -> dict[str, Any]:
        """bench keywords for a baseline: the kernels' operation count at this size, so rates compare."""
        extra = dict(self.bench_kwargs)
        counted_flops, counted_bytes = self.work.get(key_s, (None, None))
        if self.opts.flops is not None:
            extra["flops"] = self.opts.flops(**size)
        elif counted_flops is not None:
            extra["flops"] = counted_flops
        if self.opts.bytes is not None:
            extra["bytes"] = self.opts.bytes(**size)
        elif counted_bytes is not None:
            extra["bytes"] = counted_bytes
        return extra


def _table(factory: Callable[..., Any], run: _SweepRun, opts: SweepOptions) -> SweepTable:
    mode = str(run.bench_kwargs.get("mode", opts.mode))
    notes = list(run.notes)
    if opts.baseline and mode == "graph":
        notes.append("graph mode: the kernels' inputs rotate among copies, but a baseline callable is replayed "
                     "as captured, without rotating its inputs or flushing L2, so it may read cached data")
    device = ""
    try:
        from ._cpu import cpu_name, wants_cpu
        from ._run import device_name

        device = cpu_name() if wants_cpu(None, opts.target) else device_name()
    except Exception:
        pass
    return SweepTable(kernel=opts.name or getattr(factory, "__name__", "kernel"), rows=tuple(mark_best(run.rows)),
                      mode=mode, device=device, notes=tuple(notes), factory=getattr(factory, "__name__", ""))


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
    """Mark the fastest successful configuration (baselines excluded) at each size: at a size with
    a final round (rows with ``final_ms``, timed one after another on one device) the finalist
    with the lowest ``final_ms``, since the sweep's medians came from different devices;
    elsewhere the lowest median."""
    rows = [dataclasses.replace(r, best=False) for r in rows]
    candidates = [i for i, r in enumerate(rows) if r.ok and r.label is None]
    final_sizes = {rows[i].size for i in candidates if rows[i].final_ms is not None}

    def figure(r: SweepRow) -> float | None:
        return r.final_ms if r.size in final_sizes else r.median_ms

    best: dict[tuple, int] = {}
    for i in candidates:
        ms = figure(rows[i])
        if ms is None:  # at a size with a final round, a row without a final figure cannot be best
            continue
        j = best.get(rows[i].size)
        if j is None or ms < (figure(rows[j]) or 0):
            best[rows[i].size] = i
    for i in best.values():
        rows[i] = dataclasses.replace(rows[i], best=True)
    return rows
