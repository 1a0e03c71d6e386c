"""Sweeps beyond one GPU: every GPU of the host (``devices=``), or a Dask cluster (``client=``).

A sweep is two kinds of task per configuration. A *compile task* (TileLang lowering + nvcc: CPU
work) turns the configuration's kernel into a :class:`KernelArtifact`: the ``T.prim_func``, its
compile options and TileLang's disk cache entry. A *bench task* (on a GPU) installs that entry into
its machine's TileLang cache, so loading the kernel compiles nothing, then checks the kernel
against ``ref`` and times it. Rows are merged into one :class:`SweepTable` as they finish, each
saying where it ran.

* ``devices="all"`` or ``[0, 1]``: compile tasks run in a pool of processes on this host (steps that
  cannot be pickled run in threads); bench tasks run one per GPU at a time, each GPU taking the next
  compiled configuration. The GPUs must be one model: timings of different models are not merged.
* ``client=dask.distributed.Client(...)``: the same tasks on a Dask cluster. Workers that declare
  the resource ``"GPU"`` (``LocalCUDACluster(resources={"GPU": 1})``, ``dask worker --resources
  GPU=1``) take the bench tasks; workers that declare ``"compile"`` take the compile tasks, so CPU-only
  hosts compile while GPU hosts benchmark. Without those declarations every worker may take either.
  Workers that run several tasks at once must declare ``"GPU"``, so that a GPU times one
  configuration at a time. Each bench task launches through ``tilelab.run``/``tilelab.bench``, so a
  configuration that fails costs its own row, not the sweep; in a daemonic Dask worker (the
  default under a nanny), which may not start child processes, launches run in the worker itself
  and the table says so.

Two GPUs of one model differ by about 1% (their clocks under one power cap), which is as much as
close configurations differ: a sweep over several devices ranks configurations partly by the board
they landed on. So after it, the ``finalists`` fastest configurations at each size are compiled
again (TileLang's disk cache answers) and timed again, one after another, on one device (the first
of ``devices``, where the baselines run too, or the first GPU worker of the cluster): the lowest of
those final figures is the best. A size whose leaders all ran on one device already is left as it
is. Interrupting the final round keeps the sweep's rows: sizes whose final round did not complete
keep the sweep's ranking.

Every finished row is written to a row cache (``$TILELAB_CACHE_DIR/sweeps``) under a key of the
factory's source, the size, the configuration, the bench options and the GPU model: a sweep that
was interrupted (the stop button, Ctrl-C) returns the rows it has, and the same call again takes
those from the cache (marked "cached") and runs only the rest. ``force=True`` measures everything
again. Rows that failed in the bench step are not cached (a timeout may not recur); compile and
check failures are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect as _pyinspect
import json
import os
import pickle
import queue
import re
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from .._errors import NoGpuError, TilelabError
from ._sweep import SweepOptions, _Progress, _short_error, _size_kwargs, mark_best
from .models import BenchResult, SweepRow, SweepTable

Config = dict[str, Any]

INTERRUPTED = "not run: the sweep was interrupted; the same call again resumes it (finished rows are cached)"
# Failed rows from these stages are cached: the same code fails the same way. Bench failures
# (a timeout, a lost context) are measured again.
CACHED_FAILURES = ("elaborate", "compile", "check")
LIVE_TABLE_EVERY_S = 0.5


class MixedDevicesError(TilelabError, ValueError):
    """The GPUs of a sweep are not all one model."""


class DevicesError(TilelabError, ValueError):
    """``devices=`` names no GPU this process can use."""


# ------------------------------------------------------------------------------------------
# Records that travel between the caller, the compile tasks and the bench tasks
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One row to produce: a configuration at a size, or a baseline (``label``) at a size."""

    index: int
    size: tuple[tuple[str, int], ...]
    config: tuple[tuple[str, Any], ...]
    key: str = ""  # the row cache key ("" for baselines: they are measured every time)
    label: str | None = None


@dataclass(frozen=True)
class KernelRecipe:
    """A configuration's kernel as a compile task receives it: the ``T.prim_func`` as TVM's JSON
    text (unpickling TVM objects needs TileLang imported first) and how to compile it."""

    ir_text: str
    backend: str
    out_idx: Any
    target: str | None
    pass_configs: dict[str, Any]

    def kernel(self) -> Any:
        from .. import _adapter

        return _adapter.kernel_ir_from_text(self.ir_text)


@dataclass(frozen=True)
class KernelArtifact:
    """A compiled configuration as a bench task receives it: the recipe, and TileLang's disk cache
    entry that the compile wrote (None when TileLang's cache is off: the GPU side compiles again)."""

    recipe: KernelRecipe
    cache_entry: tuple[str, dict[str, bytes]] | None


@dataclass(frozen=True)
class Compiled:
    """What a compile task returns: the artifact, or why there is none."""

    index: int
    artifact: Any = None
    compile_s: float | None = None
    error: str | None = None
    stage: str | None = None
    where: str = ""


@dataclass(frozen=True)
class Benched:
    """What a bench task returns. ``lost``: the device's CUDA context is unusable from now on."""

    index: int
    result: BenchResult | None = None
    error: str | None = None
    stage: str | None = None
    bench_s: float | None = None
    device: str = ""
    lost: str | None = None
    note: str | None = None  # something the table's notes should say (once)


@dataclass(frozen=True)
class BenchPlan:
    """Everything a bench task needs besides the artifact (picklable by cloudpickle for Dask)."""

    bench_fn: Callable[..., BenchResult] | None  # None: tilelab.bench of the loaded kernel
    check_fn: Callable[..., Any] | None
    ref: Callable[..., Any] | None
    bench_kwargs: Mapping[str, Any]
    flops: Callable[..., float] | None = None
    bytes: Callable[..., float] | None = None


# ------------------------------------------------------------------------------------------
# Compile tasks
# ------------------------------------------------------------------------------------------


def _compile(recipe: KernelRecipe) -> Any:
    from .. import _adapter

    idx = [recipe.out_idx] if isinstance(recipe.out_idx, int) else recipe.out_idx
    return _adapter.compile_kernel(recipe.kernel(), backend=recipe.backend, target=recipe.target, out_idx=idx,
                                   pass_configs=recipe.pass_configs or None)


def compile_artifact(recipe: KernelRecipe) -> KernelArtifact:
    """The compile task's work: compile (TileLang writes its disk cache entry) and pack the entry."""
    from .. import _adapter

    return KernelArtifact(recipe, _adapter.kernel_cache_entry(_compile(recipe)))


def default_compile_step(factory: Callable[..., Any], size: Config, config: Config, *, backend: str,
                         out_idx: Any, target: str | None) -> Callable[[], KernelArtifact]:
    """Elaborate here (cheap; the factory may live in a notebook cell), compile in the task."""
    from .. import _adapter

    source = _adapter.resolve_kernel(factory(**size, **config))
    recipe = KernelRecipe(_adapter.kernel_ir_to_text(source.prim_func), backend,
                          out_idx if out_idx is not None else source.out_idx, target, dict(source.pass_configs))
    return functools.partial(compile_artifact, recipe)


def where_am_i() -> str:
    """The Dask worker's name inside a Dask task, else this process's id."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def compile_task(index: int, step: Callable[[], Any]) -> Compiled:
    t0 = time.perf_counter()
    try:
        artifact = step()
    except Exception as err:
        return Compiled(index, compile_s=time.perf_counter() - t0, error=_short_error(err), stage="compile",
                        where=where_am_i())
    return Compiled(index, artifact, time.perf_counter() - t0, where=where_am_i())


def _compile_pickled(index: int, blob: bytes) -> Compiled:
    """A compile task in a pool process: the step arrives pickled (by cloudpickle when installed)."""
    return compile_task(index, pickle.loads(blob))


def _dumps(obj: Any) -> bytes | None:
    """Pickle ``obj`` for another process (cloudpickle: notebook-defined functions too), or None."""
    try:
        import cloudpickle

        return cloudpickle.dumps(obj)
    except ImportError:
        pass
    except Exception:
        return None
    try:
        return pickle.dumps(obj)
    except Exception:
        return None


# ------------------------------------------------------------------------------------------
# Bench tasks
# ------------------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()  # bench threads load one at a time (TileLang's cache is not re-entrant)


def load_artifact(artifact: Any) -> Any:
    """A :class:`KernelArtifact` -> a launchable kernel (installs the cache entry first, so
    TileLang loads what the compile task built). Anything else is what a custom compile step made."""
    if not isinstance(artifact, KernelArtifact):
        return artifact
    from .. import _adapter
    from ._run import prepare_kernel

    with _LOAD_LOCK:
        if artifact.cache_entry is not None:
            _adapter.install_kernel_cache_entry(artifact.cache_entry)
        return prepare_kernel(_compile(artifact.recipe), backend=artifact.recipe.backend)


def _launch_options(bench_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The options of tilelab.run that a sweep shares with tilelab.bench (isolation, timeouts)."""
    return {k: bench_kwargs[k] for k in ("isolate", "timeout") if k in bench_kwargs}


DAEMON_NOTE = ("the Dask workers are daemonic processes, which may not start tilelab's launch worker process: "
               "launches ran in the Dask worker itself, so a crashing configuration costs that worker (Dask restarts "
               "it). Start the cluster under dask.config.set({'distributed.worker.daemon': False}) to isolate them")


def _in_daemon_process() -> bool:
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


def _isolation_fallback(bench_kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A daemonic process (a Dask worker under its nanny, by default) may not start child
    processes, so tilelab.run/bench cannot launch in their worker process there: ask them to
    launch in this process instead, and say so. Nothing changes where bench has no such choice."""
    if "isolate" in bench_kwargs or not _in_daemon_process():
        return {}, None
    from . import _bench

    if "isolate" not in _pyinspect.signature(_bench.bench).parameters:
        return {}, None
    return {"isolate": False}, DAEMON_NOTE


def bench_task(plan: BenchPlan, job: Job, compiled: Compiled | None, device: str | None = None) -> Benched:
    """Check and time one configuration (or one baseline when ``compiled`` is None), here."""
    from . import _sweep

    device = device or _device_label()
    t0 = time.perf_counter()
    size = dict(job.size)
    stage = "bench" if compiled is None else "check"
    note = None
    try:
        bench_fn = plan.bench_fn or _sweep.default_bench
        extra = dict(plan.bench_kwargs)
        if plan.bench_fn is None:
            fallback, note = _isolation_fallback(extra)
            extra.update(fallback)
        if compiled is None:  # a baseline: job.config carries its callable's maker and the work to rate it by
            spec = dict(job.config)
            result = bench_fn(spec["make"](**size), size, {}, name=job.label, **extra, **spec["work"])
            return Benched(job.index, result, bench_s=time.perf_counter() - t0, device=device, note=note)
        if plan.flops is not None:
            extra["flops"] = plan.flops(**size)
        if plan.bytes is not None:
            extra["bytes"] = plan.bytes(**size)
        kernel = load_artifact(compiled.artifact) if plan.bench_fn is None else compiled.artifact
        if plan.ref is not None:
            if plan.check_fn is not None:
                checked = plan.check_fn(kernel, plan.ref, size)
            else:
                checked = _sweep._check(kernel, plan.ref, size, **_launch_options(extra))
            if not checked:
                return Benched(job.index, error=f"wrong result: rel error {checked.rel_error}", stage="check",
                               bench_s=time.perf_counter() - t0, device=device, note=note)
        stage = "bench"
        result = bench_fn(kernel, size, dict(job.config), **extra, **_size_kwargs(kernel, size))
    except Exception as err:
        lost = None
        if getattr(err, "sticky", False) and not getattr(err, "isolated", False):
            lost = (f"not run: the CUDA context of {device} was lost ({getattr(err, 'kind', 'error')}, sticky) in the "
                    f"{stage} step of {_describe(job)}; restart the Python kernel and sweep again without it")
        return Benched(job.index, error=_short_error(err), stage=stage, bench_s=time.perf_counter() - t0,
                       device=device, lost=lost, note=note)
    return Benched(job.index, result, bench_s=time.perf_counter() - t0, device=device, note=note)


def _device_label() -> str:
    """Where a bench task runs: the Dask worker (and its GPU when it sees one), or this process."""
    where = where_am_i()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return f"{where} (GPU {visible})" if visible else where


def _describe(job: Job) -> str:
    name = job.label or ", ".join(f"{k}={v}" for k, v in job.config) or "(defaults)"
    return f"{name} at size " + ("x".join(str(v) for _, v in job.size) or "-")


def probe_device() -> tuple[str, str | None]:
    """(model name, TileLang arch) of the GPU this process sees, ("", None) without one."""
    from .. import _adapter

    try:
        import torch

        if not torch.cuda.is_available():
            return "", None
        return torch.cuda.get_device_name(), _adapter.local_gpu_arch()
    except Exception:
        return "", None


# ------------------------------------------------------------------------------------------
# Where tasks run: the host's GPUs, or a Dask cluster. Both report to one event queue:
# ("compiled", index, Compiled) and ("benched", index, Benched).
# ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _on_device(device: int, use_cuda: bool) -> Iterator[None]:
    """Make ``device`` current in this thread: tilelab.run/bench allocate and launch there (and,
    where they launch in a worker process, pick that device's worker)."""
    if not use_cuda:
        yield
        return
    import torch

    with torch.cuda.device(device):
        yield


# workers -> (sys.path and environment it started with, when (time.time_ns), the pool)
_POOLS: dict[int, tuple[str, int, ProcessPoolExecutor]] = {}
_POOLS_LOCK = threading.Lock()


def _started_with() -> str:
    """What a compile process reads once, when it starts: the import path and the environment."""
    import sys

    return hashlib.sha256(json.dumps([list(sys.path), sorted(os.environ.items())]).encode()).hexdigest()


def _edited_since(ns: int) -> str | None:
    """A module of the user's own (not installed: outside the interpreter's prefixes and any
    site-packages folder) whose file changed after ``ns`` (time.time_ns), if any."""
    import sys

    prefixes = {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots = tuple({os.path.join(p, "") for p in prefixes} | {os.path.join(os.path.realpath(p), "") for p in prefixes})
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        # the cheap tests first: most loaded modules are installed ones (no realpath's stat calls)
        if not path or "site-packages" in path or "dist-packages" in path or path.startswith(roots):
            continue
        real = os.path.realpath(path)
        if real.startswith(roots):
            continue
        with contextlib.suppress(OSError):
            if os.stat(real).st_mtime_ns > ns:
                return name
    return None


def _compile_pool(workers: int) -> ProcessPoolExecutor:
    """The host's pool of compile processes, kept for the next sweep: a spawned process takes
    seconds to import torch and TileLang, which every sweep would otherwise pay again before its
    first compile. It is replaced when it broke (a process died), or when what its processes
    started with changed: ``sys.path``, the environment, or a module of the user's own edited on
    disk since (a kept process would compile the module's old code)."""
    import multiprocessing

    token = _started_with()
    with _POOLS_LOCK:
        kept = _POOLS.get(workers)
        if kept is not None:
            started, created, pool = kept
            if (started != token or _edited_since(created) or getattr(pool, "_broken", False)
                    or getattr(pool, "_shutdown_thread", False)):
                _stop_pool(pool, kill=False)
                kept = None
        if kept is None:
            kept = (token, time.time_ns(),
                    ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")))
            _POOLS[workers] = kept
        return kept[2]


def _stop_pool(pool: ProcessPoolExecutor, *, kill: bool) -> None:
    """Shut a pool down; with ``kill``, end its processes too (tasks already running in them,
    which cancelling cannot stop, would otherwise hold the next sweep back)."""
    if kill:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _retire_pool(pool: ProcessPoolExecutor) -> None:
    """Take a pool out of the kept ones and end its processes."""
    with _POOLS_LOCK:
        for workers, (_, _, kept) in list(_POOLS.items()):
            if kept is pool:
                del _POOLS[workers]
    _stop_pool(pool, kill=True)


def shutdown_compile_pools() -> None:
    """Stop the kept compile processes (they also stop when Python exits)."""
    with _POOLS_LOCK:
        pools = [pool for _, _, pool in _POOLS.values()]
        _POOLS.clear()
    for pool in pools:
        _stop_pool(pool, kill=False)


class LocalRunner:
    """Compile tasks in the host's kept process pool (threads for steps that cannot be pickled);
    one bench thread per GPU, each taking the next compiled configuration."""

    def __init__(self, devices: Sequence[int], events: queue.Queue, *, workers: int | None, use_cuda: bool) -> None:
        self.devices, self.events, self.use_cuda = list(devices), events, use_cuda
        self.workers = workers or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None  # the kept pool this sweep compiles in
        self._futures: list[Any] = []  # this sweep's compile tasks in it
        self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="tilelab-compile")
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._alive = len(self.devices)
        self._lost: str | None = None
        self._lost_devices: set[int] = set()
        self._closed = False
        self._bench_threads = [threading.Thread(target=self._serve, args=(d,), daemon=True,
                                                name=f"tilelab-bench-cuda:{d}") for d in self.devices]
        for t in self._bench_threads:
            t.start()

    def compile(self, index: int, step: Callable[[], Any]) -> None:
        blob = _dumps(step)
        if blob is not None:
            if self._pool is None:
                self._pool = _compile_pool(self.workers)
            fut = self._pool.submit(_compile_pickled, index, blob)
            self._futures.append(fut)
        else:
            fut = self._threads.submit(compile_task, index, step)

        def done(f: Any) -> None:
            try:
                value = f.result()
            except BaseException as err:  # the pool itself failed (a compile process died)
                value = Compiled(index, error=_short_error(err), stage="compile")
            self.events.put(("compiled", index, value))

        fut.add_done_callback(done)

    def bench(self, plan: BenchPlan, job: Job, compiled: Compiled | None) -> None:
        with self._lock:
            if self._alive == 0:
                self.events.put(("benched", job.index, Benched(job.index, error=self._lost, stage="not run")))
                return
            if compiled is not None:
                self._queue.put((plan, job, compiled))
                return
        # A baseline runs here, on the first GPU, once the configurations are done: its callable
        # may hold tensors the notebook made on the current device.
        device = next(d for d in self.devices if d not in self._lost_devices)
        with _on_device(device, self.use_cuda):
            self.events.put(("benched", job.index, bench_task(plan, job, None, device=f"cuda:{device}")))

    def final_device(self) -> str | None:
        """Where the final round runs: the first listed GPU still usable (the baselines' GPU)."""
        live = [d for d in self.devices if d not in self._lost_devices]
        return f"cuda:{live[0]}" if live else None

    def on_final_device(self, device_label: str | None) -> bool:
        """Whether a row measured at ``device_label`` was measured on :meth:`final_device`."""
        return device_label is not None and device_label == self.final_device()

    def bench_pinned(self, plan: BenchPlan, job: Job, compiled: Compiled) -> None:
        """One configuration on :meth:`final_device`, in a thread of its own named after it (the
        sweep is over: the device's bench thread is idle)."""
        device = next(d for d in self.devices if d not in self._lost_devices)
        label = f"cuda:{device}"

        def work() -> None:
            with _on_device(device, self.use_cuda):
                outcome = bench_task(plan, job, compiled, device=label)
            if outcome.lost:
                self._lost_devices.add(device)
            self.events.put(("benched", job.index, outcome))

        threading.Thread(target=work, daemon=True, name=f"tilelab-bench-{label}").start()

    def _serve(self, device: int) -> None:
        label = f"cuda:{device}"
        while True:
            item = self._queue.get()
            if item is None:
                return
            plan, job, compiled = item
            with _on_device(device, self.use_cuda):
                outcome = bench_task(plan, job, compiled, device=label)
            self.events.put(("benched", job.index, outcome))
            if outcome.lost:
                self._lost_devices.add(device)
                self._retire(outcome.lost)
                return

    def _retire(self, lost: str) -> None:
        """A device lost its context: it takes no more work; the last one answers what is queued."""
        with self._lock:
            self._alive -= 1
            self._lost = lost
            if self._alive:
                return
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    return
                if item is not None:
                    self.events.put(("benched", item[1].index, Benched(item[1].index, error=lost, stage="not run")))

    def close(self, cancel: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if cancel:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
        for _ in self._bench_threads:
            self._queue.put(None)
        self._threads.shutdown(wait=not cancel, cancel_futures=cancel)
        # The process pool is kept for the next sweep. An interrupted sweep cancels its compile
        # tasks that have not started; one that is running (or already handed to a process)
        # cannot be cancelled, so that pool's processes are ended and the next sweep starts anew.
        for fut in self._futures:
            if cancel:
                fut.cancel()
            elif not fut.cancelled():
                with contextlib.suppress(Exception):
                    fut.exception()  # wait, as a finished sweep's pool shutdown did
        if cancel and self._pool is not None and not all(f.done() for f in self._futures):
            _retire_pool(self._pool)


def _workers_info(client: Any) -> dict[str, dict[str, Any]]:
    """Every worker the scheduler knows now, by address (some versions of distributed list only
    the first few unless asked for all)."""
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:
        return client.scheduler_info()["workers"]


def _natural(name: str) -> list[Any]:
    """gpu0 before gpu1 before gpu10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class DaskRunner:
    """Compile and bench tasks on a Dask cluster, routed by the workers' declared resources."""

    def __init__(self, client: Any, events: queue.Queue) -> None:
        self.client, self.events = client, events
        workers = _workers_info(client)
        if not workers:
            raise ValueError("the Dask client's cluster has no workers: start some (cluster.scale(n)) before sweeping")
        declared = {name for w in workers.values() for name in (w.get("resources") or {})}
        self.compile_resources = {"compile": 1} if "compile" in declared else None
        self.bench_resources = {"GPU": 1} if "GPU" in declared else None
        self.gpu_workers = [addr for addr, w in workers.items()
                            if self.bench_resources is None or (w.get("resources") or {}).get("GPU")]
        self.threads = {addr: int(w.get("nthreads") or 1) for addr, w in workers.items()}
        self.names = {addr: str(w.get("name", addr)) for addr, w in workers.items()}
        self._futures: list[Any] = []
        self._final: str | None = None  # the final round's worker, by name, once chosen

    def probe(self) -> dict[str, tuple[str, str | None]]:
        """(model, arch) of each worker that may take bench tasks."""
        return self.client.run(probe_device, workers=self.gpu_workers)

    def compile(self, index: int, step: Callable[[], Any]) -> Any:
        fut = self.client.submit(compile_task, index, step, pure=False, resources=self.compile_resources,
                                 key=f"tilelab-compile-{index}-{os.urandom(4).hex()}")
        self._watch(fut, "compiled", index)
        return fut

    def bench(self, plan: BenchPlan, job: Job, compiled: Any) -> None:
        # ``compiled`` is the compile task's future: the artifact goes from worker to worker
        fut = self.client.submit(bench_task, plan, job, compiled, pure=False, resources=self.bench_resources,
                                 key=f"tilelab-bench-{job.index}-{os.urandom(4).hex()}")
        self._watch(fut, "benched", job.index)

    def _final_worker(self) -> str | None:
        """The final round's worker: the first GPU worker by name among those alive when the round
        starts (asked of the scheduler then: one that died since the sweep began is not waited
        for, and one its nanny restarted is found at its new address), the same one for the whole
        round; None when no GPU worker is left."""
        if self._final is None:
            alive = [str(w.get("name", addr)) for addr, w in _workers_info(self.client).items()
                     if self.bench_resources is None or (w.get("resources") or {}).get("GPU")]
            self._final = min(alive, key=_natural) if alive else None
        return self._final

    def final_device(self) -> str | None:
        worker = self._final_worker()
        return None if worker is None else f"{worker} (the cluster's first GPU worker)"

    def on_final_device(self, device_label: str | None) -> bool:
        """Whether a row measured at ``device_label`` (a bench task's "worker name (GPU n)") was
        measured on the final round's worker."""
        worker = self._final_worker()
        return worker is not None and device_label is not None and device_label.split(" (", 1)[0] == worker

    def bench_pinned(self, plan: BenchPlan, job: Job, compiled: Any) -> None:
        """One configuration on the final round's worker only."""
        fut = self.client.submit(bench_task, plan, job, compiled, pure=False, resources=self.bench_resources,
                                 workers=[self._final_worker()], allow_other_workers=False,  # by name
                                 key=f"tilelab-final-{job.index}-{os.urandom(4).hex()}")
        self._watch(fut, "benched", job.index)

    def _watch(self, fut: Any, kind: str, index: int) -> None:
        self._futures.append(fut)

        def done(f: Any) -> None:
            try:
                value = f.result()
            except BaseException as err:  # the task never ran to its end (its worker died, or cancelled)
                reason = f"the Dask task failed: {_short_error(err)}"
                value = (Compiled(index, error=reason, stage="compile") if kind == "compiled"
                         else Benched(index, error=reason, stage="bench"))
            self.events.put((kind, index, value))

        fut.add_done_callback(done)

    def close(self, cancel: bool = False) -> None:
        if cancel:
            self.client.cancel([f for f in self._futures if not f.done()])
        self._futures = []


# ------------------------------------------------------------------------------------------
# Devices and their models
# ------------------------------------------------------------------------------------------


def local_devices(devices: str | Sequence[int], need_cuda: bool) -> list[int]:
    """``"all"`` or a list of GPU indices -> the indices, checked against this host's GPUs."""
    count = None
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:  # pragma: no cover - torch is a dependency
        count = 0
    if isinstance(devices, str):
        if devices != "all":
            raise DevicesError(f'devices={devices!r}: pass "all" or a list of GPU indices such as [0, 1]')
        if not count:
            raise NoGpuError("devices='all': this process sees no CUDA GPU. Inspection still works without one; "
                             "to sweep on another machine's GPUs pass client= (a Dask client)")
        return list(range(count))
    try:
        indices = [int(d) for d in devices]
    except (TypeError, ValueError):
        raise DevicesError(f"devices={devices!r}: pass \"all\" or a list of GPU indices such as [0, 1]") from None
    if not indices:
        raise DevicesError("devices=[] names no GPU: pass \"all\" or a list of GPU indices such as [0, 1]")
    if len(set(indices)) != len(indices):
        raise DevicesError(f"devices={indices}: each GPU once (a GPU times one configuration at a time)")
    if need_cuda:
        if not count:
            raise NoGpuError(f"devices={indices}: this process sees no CUDA GPU")
        bad = [d for d in indices if not 0 <= d < count]
        if bad:
            raise DevicesError(f"devices={indices}: no GPU {bad} here; this process sees {count} "
                               f"(indices 0..{count - 1}, after CUDA_VISIBLE_DEVICES)")
    return indices


def check_one_model(models: Mapping[str, str]) -> str:
    """The one model name of ``{device: model}``; mixed models are refused, never averaged."""
    names = sorted(set(models.values()))
    if len(names) > 1:
        listing = ", ".join(f"{d}: {m or 'no GPU'}" for d, m in models.items())
        raise MixedDevicesError(
            f"the sweep's GPUs are not one model ({listing}); timings of different GPUs are not comparable. "
            "Sweep on one model at a time: devices=[...] with those of one model, or a Dask cluster whose "
            "GPU workers (resources={'GPU': 1}) are one model")
    return names[0] if names else ""


# ------------------------------------------------------------------------------------------
# The row cache (resume)
# ------------------------------------------------------------------------------------------


def _source_of(fn: Any) -> str:
    fn = getattr(fn, "func", fn)  # functools.partial
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    try:
        return name + "\n" + _pyinspect.getsource(fn)
    except (OSError, TypeError):
        return name


def sweep_identity(factory: Any, opts: SweepOptions, *, model: str, bench_kwargs: Mapping[str, Any]) -> str:
    """What every row key of one sweep shares: the code that makes and measures a row, and the GPU
    (how a launch is isolated, and its timeout, say how it is measured, not what: not part of it)."""
    def code(fn: Any) -> str | None:
        return fn and _source_of(fn)

    parts = {
        "factory": _source_of(factory), "compile_fn": code(opts.compile_fn), "bench_fn": code(opts.bench_fn),
        "check_fn": code(opts.check_fn), "ref": code(opts.ref), "flops": code(opts.flops), "bytes": code(opts.bytes),
        "backend": opts.backend, "out_idx": repr(opts.out_idx), "model": model,
        "bench": {k: repr(v) for k, v in sorted(bench_kwargs.items()) if k not in ("isolate", "timeout")},
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


def _versions() -> str:
    from .. import __version__

    try:
        from importlib.metadata import version

        tilelang = version("tilelang")
    except Exception:
        tilelang = "?"
    return f"tilelab {__version__}, tilelang {tilelang}"


def row_key(identity: str, size: Config, config: Config) -> str:
    text = json.dumps([identity, sorted((k, repr(v)) for k, v in size.items()),
                       sorted((k, repr(v)) for k, v in config.items())])
    return hashlib.sha256(text.encode()).hexdigest()


class RowCache:
    """Finished rows on disk, one JSON file per key (written whole, then renamed into place)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def default(cls) -> RowCache:
        from .._cache import cache_dir

        return cls(cache_dir() / "sweeps")

    def get(self, key: str) -> SweepRow | None:
        try:
            return SweepRow.from_dict(json.loads((self.root / f"{key}.json").read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, row: SweepRow) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps(dataclasses.replace(row, best=False, cached=False, final_ms=None,
                                                        final_device=None).to_dict(), default=str))
            os.replace(tmp, self.root / f"{key}.json")
        except OSError:
            pass  # a read-only cache costs resuming, not the sweep


# ------------------------------------------------------------------------------------------
# Showing progress: one bar, and in a notebook the table growing as rows finish
# ------------------------------------------------------------------------------------------


class _LiveTable:
    """The partial table in a notebook output that is updated in place (nothing outside a kernel)."""

    def __init__(self, enabled: bool) -> None:
        self.handle = None
        self.last = 0.0
        if not enabled:
            return
        try:
            from IPython import get_ipython
            from IPython.display import HTML, display

            shell = get_ipython()
            if shell is None or not hasattr(shell, "kernel"):
                return
            self.handle = display(HTML(""), display_id=True)
        except Exception:
            self.handle = None

    def update(self, table: Callable[[], SweepTable], final: bool = False) -> None:
        if self.handle is None:
            return
        now = time.monotonic()
        if not final and now - self.last < LIVE_TABLE_EVERY_S:
            return
        self.last = now
        from IPython.display import HTML

        # the table's HTML only: its PNG plots are drawn once, for the table the cell returns
        self.handle.update(HTML("" if final else table()._repr_html_()))


# ------------------------------------------------------------------------------------------
# The sweep
# ------------------------------------------------------------------------------------------


def distributed_sweep(factory: Callable[..., Any], configs: list[Config], size_list: list[Config],
                      opts: SweepOptions) -> SweepTable:
    """``tilelab.sweep`` with ``devices=`` or ``client=``; see the module doc."""
    if opts.devices is not None and opts.client is not None:
        raise ValueError("pass devices= (this host's GPUs) or client= (a Dask cluster), not both")
    kwargs = _bench_kwargs(opts)
    events: queue.Queue = queue.Queue()
    # a custom bench step may need no GPU at all (the tests' fake)
    runner, model, arch, where = _runner(opts.devices, opts.client, events, workers=opts.workers,
                                         real_gpu=opts.bench_fn is None)
    make_step = opts.compile_fn or (lambda f, s, c: default_compile_step(f, s, c, backend=opts.backend,
                                                                          out_idx=opts.out_idx, target=arch))
    identity = sweep_identity(factory, opts, model=model, bench_kwargs=kwargs)
    jobs = [Job(i, tuple((k, int(v)) for k, v in s.items()), tuple(c.items()), row_key(identity, s, c))
            for i, (s, c) in enumerate((s, c) for s in size_list for c in configs)]
    n_base = len(opts.baseline or {}) * len(size_list)
    factory_name = getattr(factory, "__name__", "")
    run = _Run(jobs=jobs, plan=BenchPlan(opts.bench_fn, opts.check_fn, opts.ref, kwargs, opts.flops, opts.bytes),
               runner=runner, events=events, cache=RowCache.default(), force=opts.force,
               bar=_Progress(len(jobs) + n_base, f"sweeping {len(jobs)} configurations on {where}", opts.progress),
               live=_LiveTable(opts.progress), title=opts.name or factory_name or "kernel",
               factory_name=factory_name, mode=str(kwargs["mode"]), model=model)
    try:
        _run_jobs(run, factory, make_step)
        _run_baselines(run, opts.baseline or {}, size_list)
        _FinalRound(run, factory, make_step, opts.finalists, opts.progress).run()
    except KeyboardInterrupt:
        runner.close(cancel=True)
        done = sum(1 for j in jobs if j.index in run.rows)
        run.notes.append(f"interrupted after {done} of {len(jobs)} configurations: the same call again resumes "
                         "from the row cache")
        for j in jobs:
            run.rows.setdefault(j.index, SweepRow(j.config, j.size, error=INTERRUPTED, stage="not run",
                                                  compile_s=run.compile_s.get(j.index)))
    finally:
        runner.close()
        run.bar.close()
    ordered = [run.rows[j.index] for j in jobs] + [run.rows[i] for i in sorted(run.rows) if i >= len(jobs)]
    table = run.table(ordered)
    run.live.update(lambda: table, final=True)
    if opts.baseline and run.mode == "graph":
        run.notes.append("graph mode: a baseline callable is replayed as captured, without rotating its inputs or "
                         "flushing L2, so it may read cached data")
        table = dataclasses.replace(table, notes=tuple(run.notes))
    return table


def _bench_kwargs(opts: SweepOptions) -> dict[str, Any]:
    """The keywords of every bench task: ``bench_kwargs``, the mode, and how launches are isolated.
    ``isolate`` is forwarded only when False: a daemonic Dask worker falls back to in-process
    launches by itself (and says so) when the caller did not ask for isolation explicitly."""
    kwargs = {**(opts.bench_kwargs or {}), **({"isolate": False} if not opts.isolate else {}),
              **({"timeout": opts.timeout} if opts.timeout is not None else {})}
    kwargs.setdefault("mode", opts.mode)
    return kwargs


@dataclass
class _Run:
    """One distributed sweep under way: where its tasks go, and the rows and notes come back so far."""

    jobs: list[Job]
    plan: BenchPlan
    runner: Any
    events: queue.Queue
    cache: RowCache
    force: bool
    bar: Any
    live: _LiveTable
    title: str  # the table's kernel name
    factory_name: str
    mode: str
    model: str
    rows: dict[int, SweepRow] = dataclasses.field(default_factory=dict)
    compile_s: dict[int, float | None] = dataclasses.field(default_factory=dict)
    counted: dict[tuple, tuple[float | None, float | None]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def table(self, rows: list[SweepRow]) -> SweepTable:
        return _table(rows, self.title, self.mode, self.model, self.notes, self.factory_name)

    def finish(self, job: Job, row: SweepRow, store: bool = True) -> None:
        """A row is final: cached (when worth measuring once), shown, counted."""
        if store and (row.ok or row.stage in CACHED_FAILURES):
            self.cache.put(job.key, row)  # first: a stop that lands between the two loses no measurement
        self.rows[job.index] = row
        self.bar.update()
        self.live.update(lambda: self.table([self.rows[i] for i in sorted(self.rows)]))


def _runner(devices: str | Sequence[int] | None, client: Any, events: queue.Queue, *, workers: int | None,
            real_gpu: bool) -> tuple[LocalRunner | DaskRunner, str, str | None, str]:
    """Where the tasks run, the one GPU model they run on, its TileLang arch, and a description."""
    if client is not None:
        runner = DaskRunner(client, events)
        if not real_gpu:
            return runner, "", None, f"Dask, {len(runner.gpu_workers)} bench workers"
        found = runner.probe()
        missing = [w for w, (m, _) in found.items() if not m]
        if missing:
            raise DevicesError(f"Dask workers {missing} would take bench tasks but see no CUDA GPU: give the GPU "
                               "workers resources={'GPU': 1} (LocalCUDACluster(resources={'GPU': 1}), "
                               "dask worker --resources GPU=1) so bench tasks go only there")
        crowded = [w for w in runner.gpu_workers if runner.threads.get(w, 1) > 1]
        if runner.bench_resources is None and crowded:
            raise DevicesError(f"Dask workers {crowded} run several tasks at once, so two configurations could be "
                               "timed on one GPU together: give the GPU workers resources={'GPU': 1} "
                               "(LocalCUDACluster(resources={'GPU': 1}), dask worker --resources GPU=1) so each "
                               "GPU times one configuration at a time")
        model = check_one_model({w: m for w, (m, _) in found.items()})
        return runner, model, next(iter(found.values()))[1], f"Dask, {len(runner.gpu_workers)} GPU workers"
    indices = local_devices(devices, need_cuda=real_gpu)  # type: ignore[arg-type]
    model, arch = "", None
    if real_gpu:
        import torch

        from .. import _adapter

        model = check_one_model({f"cuda:{d}": torch.cuda.get_device_name(d) for d in indices})
        with torch.cuda.device(indices[0]):
            arch = _adapter.local_gpu_arch()
    runner = LocalRunner(indices, events, workers=workers, use_cuda=real_gpu)
    return runner, model, arch, ", ".join(f"cuda:{d}" for d in indices)


def _table(rows: list[SweepRow], kernel: str, mode: str, model: str, notes: list[str], factory: str) -> SweepTable:
    return SweepTable(kernel=kernel, rows=tuple(mark_best(rows)), mode=mode, device=model, notes=tuple(notes),
                      factory=factory)


def _row(job: Job, outcome: Benched, compile_s: float | None) -> SweepRow:
    if outcome.error is not None or outcome.result is None:
        return SweepRow(job.config, job.size, error=outcome.error or "no result", stage=outcome.stage or "bench",
                        compile_s=compile_s, bench_s=outcome.bench_s, device=outcome.device or None, label=job.label)
    r = outcome.result
    return SweepRow.measured(job.config, job.size, r, compile_s=compile_s, bench_s=outcome.bench_s,
                             device=outcome.device or None, label=job.label)


def _run_jobs(run: _Run, factory: Callable[..., Any], make_step: Callable[..., Any]) -> None:
    """Submit every configuration's compile task; each compiled one goes to a GPU as it arrives;
    rows are final when benched (or failed, or taken from the cache)."""
    by_index = {j.index: j for j in run.jobs}
    compile_futures: dict[int, Any] = {}
    pending = 0
    for job in run.jobs:
        hit = None if run.force else run.cache.get(job.key)
        if hit is not None:
            run.finish(job, dataclasses.replace(hit, cached=True), store=False)
            continue
        try:
            step = make_step(factory, dict(job.size), dict(job.config))
        except Exception as err:
            run.finish(job, SweepRow(job.config, job.size, error=_short_error(err), stage="elaborate"))
            continue
        compile_futures[job.index] = run.runner.compile(job.index, step)
        pending += 1

    def handle(kind: str, index: int, value: Any, submit: bool = True) -> bool:
        """One event; True when it made a row final."""
        job = by_index[index]
        if kind == "compiled":
            run.compile_s[index] = value.compile_s
            if value.error is None:
                if submit:  # Dask: the bench task gets the compile task's future (worker to worker)
                    run.runner.bench(run.plan, job, compile_futures.get(index) if isinstance(run.runner, DaskRunner)
                                     else value)
                return False
            run.finish(job, SweepRow(job.config, job.size, error=value.error, stage=value.stage or "compile",
                                     compile_s=value.compile_s))
            return True
        for said in (value.lost, value.note):
            if said and said not in run.notes:
                run.notes.append(said)
        if value.result is not None:
            run.counted.setdefault(job.size, (value.result.flops, value.result.bytes))
        run.finish(job, _row(job, value, run.compile_s.get(index)), store=value.stage != "not run")
        return True

    try:
        while pending:
            pending -= handle(*_next_event(run.events))
    except KeyboardInterrupt:
        while True:  # keep what finished before the stop: results already sent, not yet read
            try:
                handle(*run.events.get_nowait(), submit=False)
            except queue.Empty:
                break
        raise


def _baseline_work(run: _Run, key_s: tuple, size: Config) -> dict[str, float]:
    """The kernels' counted work at a size (rate = work / time), so a baseline's rates compare."""
    work: dict[str, float] = {}
    done = [r for r in (run.rows.get(j.index) for j in run.jobs) if r is not None and r.size == key_s and r.ok]
    measured = run.counted.get(key_s)
    if measured is not None:
        work.update({k: v for k, v in zip(("flops", "bytes"), measured) if v is not None})
    elif done and done[0].median_ms:  # every row came from the row cache: its rates give the work back
        if done[0].tflops:
            work["flops"] = done[0].tflops * 1e9 * done[0].median_ms
        if done[0].gbps:
            work["bytes"] = done[0].gbps * 1e6 * done[0].median_ms
    if run.plan.flops is not None:
        work["flops"] = run.plan.flops(**size)
    if run.plan.bytes is not None:
        work["bytes"] = run.plan.bytes(**size)
    return work


def _run_baselines(run: _Run, baseline: Mapping[str, Callable[..., Any]], size_list: list[Config]) -> None:
    """Each baseline at each size, on a GPU, rated with the kernels' counted work at that size."""
    if not baseline:
        return
    index = len(run.jobs)
    waiting: dict[int, Job] = {}
    for label, make in baseline.items():
        for size in size_list:
            key_s = tuple((k, int(v)) for k, v in size.items())
            job = Job(index, key_s, (("make", make), ("work", _baseline_work(run, key_s, size))), label=label)
            waiting[index] = job
            run.runner.bench(run.plan, job, None)
            index += 1
    while waiting:
        kind, i, value = _next_event(run.events)
        job = waiting.pop(i)
        if value.note and value.note not in run.notes:
            run.notes.append(value.note)
        row = _row(job, value, None)
        run.rows[i] = dataclasses.replace(row, config=())
        run.bar.update()


FINAL_ROUND_WHY = ("two GPUs of one model can differ by about 1%, as much as close configurations do, so the "
                   "sweep's medians, taken on different devices, rank its leaders partly by the board each landed "
                   "on; the final round ranks them on one device, and BEST is the lowest final ms")


def _size_text(size: tuple) -> str:
    return "x".join(str(v) for _, v in size) or "-"


def _kept(runner: Any, row: SweepRow) -> bool:
    """Whether a finalist's sweep figure stands as its final one: measured on the final device in
    this sweep. A row from the row cache is timed again: its device label ("cuda:0", a worker's
    name) may have named another board in the session that measured it."""
    return not row.cached and runner.on_final_device(row.device)


class _FinalRound:
    """The leaders of a sweep over several devices, timed again one after another on one device.

    At each size the ``count`` fastest successful configurations are the finalists. Those the
    sweep measured on the runner's final device keep that median as their final figure; the
    others are compiled again (TileLang's disk cache answers, so this is cheap) through the
    sweep's runner and benchmarked, one at a time, pinned to the final device. The figures become
    the rows' ``final_ms``, which :func:`mark_best` ranks by. Re-timing only the finalists measured
    elsewhere keeps the round short (on two GPUs, half the finalists on average): it is serial
    time added to a parallel sweep. A size whose leaders all ran on one device already is skipped
    (their figures compare as they are). A size's figures are applied only once all its finalists
    are done, so a stop keeps the sweep's ranking wherever the final round did not complete.
    """

    def __init__(self, run: _Run, factory: Callable[..., Any], make_step: Callable[..., Any], count: int,
                 progress: bool) -> None:
        self.sweep, self.factory, self.make_step, self.count, self.progress = run, factory, make_step, count, progress
        self.sizes = self._leaders() if count else {}
        self.originals: dict[int, Job] = {}  # final-round index -> the sweep's job
        self.futures: dict[int, Any] = {}  # Dask: final-round index -> its compile future
        self.ready: list[tuple[Job, Any]] = []  # compiled, waiting for the device
        self.outcomes: dict[int, Benched] = {}  # the sweep's job index -> its final-round outcome
        self.applied: set[tuple] = set()
        self.kept: set[int] = set()  # the sweep's job indices whose median on the final device stands
        self.busy = False
        self.stopped: str | None = None
        self.bar: Any = None

    def _leaders(self) -> dict[tuple, list[Job]]:
        timed: dict[tuple, list[tuple[float, Job]]] = {}
        for job in self.sweep.jobs:
            row = self.sweep.rows.get(job.index)
            if row is not None and row.ok:
                timed.setdefault(job.size, []).append((float(row.median_ms), job))  # type: ignore[arg-type]
        leaders = {size: [job for _, job in sorted(ranked, key=lambda t: t[0])[:self.count]]
                   for size, ranked in timed.items()}
        return {size: jobs for size, jobs in leaders.items()
                if len({self.sweep.rows[j.index].device for j in jobs}) > 1}

    def run(self) -> None:
        if not self.sizes:
            return
        device = self.sweep.runner.final_device()
        total = sum(not _kept(self.sweep.runner, self.sweep.rows[j.index]) for jobs in self.sizes.values() for j in jobs)
        if device is None:
            self.sweep.notes.append("no final round: no device of the sweep is usable any more; the best is the "
                                    "fastest median, whichever device measured it")
            return
        self.bar = _Progress(total, f"final round: {total} configurations on {device}", self.progress)
        t0 = time.perf_counter()
        try:
            self._submit_compiles()
            self._wait()
        except KeyboardInterrupt:
            self._drain()
            self.sweep.runner.close(cancel=True)
            self.stopped = "interrupted"
        except Exception as err:  # every row is measured: an error here must not lose the table
            self.sweep.runner.close(cancel=True)
            self.stopped = f"the final round failed: {_short_error(err)}"
        finally:
            self.bar.close()
        self._say(device, total, time.perf_counter() - t0)

    def _submit_compiles(self) -> None:
        index = max(self.sweep.rows) + 1
        runner = self.sweep.runner
        # the kept ones first: a size is applied when its last outcome arrives, kept ones included
        for job in (job for jobs in self.sizes.values() for job in jobs):
            row = self.sweep.rows[job.index]
            if _kept(runner, row):  # measured there already, in this sweep: its median stands
                self.kept.add(job.index)
                self.outcomes[job.index] = Benched(job.index, device=row.device or "")
        for jobs in self.sizes.values():
            for job in jobs:
                if job.index in self.kept:
                    continue
                again = dataclasses.replace(job, index=index, key="")
                self.originals[index] = job
                index += 1
                try:
                    step = self.make_step(self.factory, dict(job.size), dict(job.config))
                except Exception as err:
                    self._done(again, Benched(again.index, error=_short_error(err), stage="elaborate"))
                    continue
                self.futures[again.index] = self.sweep.runner.compile(again.index, step)

    def _waiting(self) -> bool:
        return len(self.outcomes) < len(self.originals) + len(self.kept)

    def _wait(self) -> None:
        while self._waiting() and self.stopped is None:
            self._handle(*_next_event(self.sweep.events))

    def _drain(self) -> None:
        """After a stop: keep what finished before it (sent, not yet read); start nothing."""
        self.stopped = "interrupted"
        while True:
            try:
                self._handle(*self.sweep.events.get_nowait())
            except queue.Empty:
                return

    def _handle(self, kind: str, index: int, value: Any) -> None:
        job = dataclasses.replace(self.originals[index], index=index)
        if kind == "compiled":
            if value.error is not None:
                self._done(job, Benched(index, error=value.error, stage=value.stage or "compile"))
            else:
                dask = isinstance(self.sweep.runner, DaskRunner)
                self.ready.append((job, self.futures.get(index) if dask else value))
        else:
            self.busy = False
            self._done(job, value)
            if value.lost:
                self.stopped = value.lost
                if value.lost not in self.sweep.notes:
                    self.sweep.notes.append(value.lost)
        if not self.busy and self.ready and self.stopped is None:  # one configuration at a time
            job, compiled = self.ready.pop(0)
            self.busy = True
            self.sweep.runner.bench_pinned(self._plan(), job, compiled)

    def _plan(self) -> BenchPlan:
        # every finalist passed its check in the sweep: the final round only times
        return dataclasses.replace(self.sweep.plan, ref=None, check_fn=None)

    def _done(self, job: Job, outcome: Benched) -> None:
        original = self.originals[job.index]
        self.outcomes[original.index] = outcome
        if outcome.note and outcome.note not in self.sweep.notes:
            self.sweep.notes.append(outcome.note)
        self.bar.update()
        if outcome.lost:  # the final device's context is gone: where this size's round stood, the sweep's ranking stands
            return
        for size, jobs in self.sizes.items():
            if size not in self.applied and all(j.index in self.outcomes for j in jobs):
                self._apply(size, jobs)

    def _apply(self, size: tuple, jobs: list[Job]) -> None:
        self.applied.add(size)
        rows = self.sweep.rows
        figures = [j for j in jobs if j.index in self.kept or (self.outcomes[j.index].result is not None
                                                               and self.outcomes[j.index].error is None)]
        if not figures:  # nothing to rank by: the sweep's medians decide, as without the round
            first = self.outcomes[jobs[0].index]
            self.sweep.notes.append(f"final round at {_size_text(size)}: every finalist failed when timed again "
                                    f"(first: {_describe(jobs[0])}, {first.error or 'no result'}); there the best is "
                                    "the sweep's fastest median, whichever device measured it")
            return
        for job in jobs:
            outcome = self.outcomes[job.index]
            if job.index in self.kept:
                rows[job.index] = dataclasses.replace(rows[job.index], final_ms=rows[job.index].median_ms,
                                                      final_device=rows[job.index].device)
            elif outcome.result is not None and outcome.error is None:
                rows[job.index] = dataclasses.replace(rows[job.index], final_ms=outcome.result.median_ms,
                                                      final_device=outcome.device or None)
            else:
                self.sweep.notes.append(f"final round: {_describe(job)} failed ({outcome.stage or 'bench'}): "
                                        f"{outcome.error or 'no result'}; it keeps its sweep row, without a final "
                                        "figure, so it is not ranked at that size")
        self.sweep.live.update(lambda: self.sweep.table([rows[i] for i in sorted(rows)]))

    def _say(self, device: str, total: int, seconds: float) -> None:
        notes = self.sweep.notes
        # (a round has two finalists at least: one alone would have nothing to be ranked against)
        kept = f"; {len(self.kept)} measured there in the sweep kept that figure" if self.kept else ""
        notes.append(f"final round: of the {self.count} fastest configurations at each size, those measured "
                     f"elsewhere were timed again, one after another, on {device} ({total} configurations, "
                     f"{seconds:.1f} s{kept}): {FINAL_ROUND_WHY}")
        unfinished = [size for size in self.sizes if size not in self.applied]
        if unfinished:
            why = ("the sweep was interrupted during it" if self.stopped == "interrupted"
                   else f"it stopped: {self.stopped}")
            notes.append(f"final round incomplete at {', '.join(_size_text(s) for s in unfinished)} ({why}): "
                         "there the best is the sweep's fastest median, whichever device measured it")
        skipped = [size for size in {j.size for j in self.sweep.jobs} if size not in self.sizes]
        if skipped and len({j.size for j in self.sweep.jobs}) > 1:
            notes.append(f"no final round at {', '.join(_size_text(s) for s in sorted(skipped))}: its leaders all ran "
                         "on one device already (or fewer than two succeeded), so their medians compare as they are")


def _next_event(events: queue.Queue) -> tuple[str, int, Any]:
    while True:  # a short timeout keeps the stop button (KeyboardInterrupt) responsive
        try:
            return events.get(timeout=0.2)
        except queue.Empty:
            continue
