"""The two tasks of a sweep. A *compile task* turns a configuration's kernel into something a
bench step can launch: in one process, a prepared kernel (:func:`default_compile`); across processes
and hosts, a :class:`KernelArtifact` (the ``T.prim_func`` as text, its compile options and TileLang's
disk cache entry). :func:`row_step` is the one step that makes a row of a compiled kernel or of a
baseline: check it against ``ref``, count the work, time it with ``bench_fn``, and say when a sticky
error lost the CUDA context. :func:`bench_task` runs that step wherever a sweep sends it."""

from __future__ import annotations

import dataclasses
import functools
import inspect as _pyinspect
import os
import pickle
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...records.launch import BenchResult
from ._plan import Config, Job, describe, short_error, size_kwargs


@dataclass(frozen=True)
class KernelRecipe:
    """A configuration's kernel as a compile task receives it: the ``T.prim_func`` as TVM's JSON
    text (unpickling TVM objects needs TileLang imported first) and how to compile it."""

    ir_text: str
    backend: str | None
    out_idx: Any
    target: str | None
    pass_configs: dict[str, Any]

    def kernel(self) -> Any:
        from ... import _tilelang

        return _tilelang.kernel_ir_from_text(self.ir_text)


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
    lost: str | None = None  # the task's process died before it finished (killed from outside, or crashed)


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
    partial: bool = False  # ``result`` holds the launches timed before a stop: shown, never cached


@dataclass(frozen=True)
class BenchPlan:
    """Everything a bench task needs besides the artifact (picklable by cloudpickle for Dask)."""

    bench_fn: Callable[..., BenchResult] | None  # None: tilelab.bench of the loaded kernel
    check_fn: Callable[..., Any] | None
    ref: Callable[..., Any] | None
    bench_kwargs: Mapping[str, Any]
    flops: Callable[..., float] | None = None
    bytes: Callable[..., float] | None = None
    # rank_by="ratio": f(**size) -> the baseline each row is timed beside
    ratio_baseline: Callable[..., Any] | None = None




# ------------------------------------------------------------------------------------------
# Compile tasks
# ------------------------------------------------------------------------------------------


def default_compile(factory: Callable[..., Any], size: Config, config: Config, *, backend: str | None,
                    out_idx: Any, target: Any = None) -> Callable[[], Any]:
    """A sweep in one process: elaborate now (in the caller's thread); return the compile step to
    run in the pool of threads."""
    from .._kernel import prepare_kernel

    func = factory(**size, **config)
    return lambda: prepare_kernel(func, backend=backend, out_idx=out_idx, target=target)


def _compile(recipe: KernelRecipe) -> Any:
    from ... import _tilelang

    idx = [recipe.out_idx] if isinstance(recipe.out_idx, int) else recipe.out_idx
    return _tilelang.compile_kernel(recipe.kernel(), backend=recipe.backend, target=recipe.target, out_idx=idx,
                                   pass_configs=recipe.pass_configs or None)


def compile_artifact(recipe: KernelRecipe) -> KernelArtifact:
    """The compile task's work: compile (TileLang writes its disk cache entry) and pack the entry."""
    from ... import _tilelang

    return KernelArtifact(recipe, _tilelang.kernel_cache_entry(_compile(recipe)))


def default_compile_step(factory: Callable[..., Any], size: Config, config: Config, *, backend: str | None,
                         out_idx: Any, target: str | None) -> Callable[[], KernelArtifact]:
    """Elaborate here (cheap; the factory may live in a notebook cell), compile in the task."""
    from ... import _tilelang

    source = _tilelang.resolve_kernel(factory(**size, **config))
    recipe = KernelRecipe(_tilelang.kernel_ir_to_text(source.prim_func), backend,
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
        return Compiled(index, compile_s=time.perf_counter() - t0, error=short_error(err), stage="compile",
                        where=where_am_i())
    return Compiled(index, artifact, time.perf_counter() - t0, where=where_am_i())


def compile_pickled(index: int, blob: bytes) -> Compiled:
    """A compile task in a pool process: the step arrives pickled (by cloudpickle when installed)."""
    return compile_task(index, pickle.loads(blob))


def dumps(obj: Any) -> bytes | None:
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
# The row step
# ------------------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()  # bench threads load one at a time (TileLang's cache is not re-entrant)


def load_artifact(artifact: Any) -> Any:
    """A :class:`KernelArtifact` -> a launchable kernel (installs the cache entry first, so
    TileLang loads what the compile task built). Anything else is what a custom compile step made."""
    if not isinstance(artifact, KernelArtifact):
        return artifact
    from ... import _tilelang
    from .._kernel import prepare_kernel

    with _LOAD_LOCK:
        if artifact.cache_entry is not None:
            _tilelang.install_kernel_cache_entry(artifact.cache_entry)
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
    from .. import _api

    if "isolate" not in _pyinspect.signature(_api.bench).parameters:
        return {}, None
    return {"isolate": False}, DAEMON_NOTE



def warm_launch_worker(device: int) -> None:
    """Start tilelab's launch worker process for GPU ``device`` now (and this process's CUDA
    context there), so that a sweep's first row does not wait seconds for it: a sweep calls it on
    each GPU's bench thread while its first configurations compile. Idempotent (a warm worker is
    left as it is). Never raises: where the worker cannot start, the first row starts it and
    reports why, as without this. A daemonic process (a Dask worker) launches in itself instead
    (see :func:`_isolation_fallback`): nothing to start there."""
    if _in_daemon_process():
        return
    try:
        import torch

        from .. import _isolated, _worker

        with torch.cuda.device(device):
            torch.cuda.synchronize()  # this process's context on the device, which the row step needs too
        _worker.default_worker(device).warm(_isolated.prepare_for_launches)
    except Exception:
        pass


def default_bench(prepared: Any, size: Config, config: Config, **kwargs: Any) -> BenchResult:
    from .. import _api

    return _api.bench(prepared, **kwargs)


def check(kernel: Any, ref: Callable[..., Any], size: Config, isolate: bool = True,
          timeout: float | None = None) -> Any:
    """The default check: :func:`tilelab.run` of the kernel against ``ref``."""
    from .. import _api

    sizes: dict[str, Any] = size_kwargs(kernel, size)
    return _api.run(kernel.compiled if hasattr(kernel, "compiled") else kernel, ref=ref, isolate=isolate,
                    timeout=timeout, **sizes)


def lost_context(err: BaseException, device: str, stage: str, job: Job) -> str:
    """The note for rows after a sticky CUDA error, naming the configuration that caused it."""
    where = f" of {device}" if device else ""
    return (f"not run: the CUDA context{where} was lost ({getattr(err, 'kind', 'error')}, sticky) in the {stage} "
            f"step of {describe(job)}; restart the Python kernel and sweep again without it")


BESIDE = "beside"  # a baseline row's stage when its callable takes the kernel's inputs


def _takes_inputs(fn: Callable[..., Any]) -> bool:
    from .._ratio import takes_inputs

    return takes_inputs(fn)


def row_step(plan: BenchPlan, job: Job, kernel: Any = None, *, device: str = "") -> Benched:
    """The one step that makes a row, here: a baseline (``job.label``: ``job.config`` carries
    its callable's maker and the work to rate it by) is timed; a compiled ``kernel`` is checked
    against ``plan.ref`` (a wrong result is a row of stage "check"), rated by ``plan.flops`` and
    ``plan.bytes`` and timed by ``plan.bench_fn``. An error is the row's; one that made this
    process's CUDA context unusable (sticky, not isolated in the worker) says so in ``lost``.
    A KeyboardInterrupt is not caught: the caller decides what a stop keeps."""
    t0 = time.perf_counter()
    size = dict(job.size)
    stage = "bench" if job.label is not None else "check"
    note = None
    try:
        bench_fn = plan.bench_fn or default_bench
        extra = dict(plan.bench_kwargs)
        if plan.bench_fn is None:
            fallback, note = _isolation_fallback(extra)
            extra.update(fallback)
        if job.label is not None:
            spec = dict(job.config)
            made = spec["make"](**size)
            if plan.bench_fn is None and callable(made) and _takes_inputs(made):
                # a baseline of the kernel's inputs (torch.matmul) has no inputs of its own: the
                # orchestrator fills its row from the windows it was timed in beside each configuration
                return Benched(job.index, stage=BESIDE, bench_s=time.perf_counter() - t0, device=device, note=note)
            result = bench_fn(made, size, {}, name=job.label, **extra, **spec["work"])
            return Benched(job.index, result, bench_s=time.perf_counter() - t0, device=device, note=note)
        if plan.flops is not None:
            extra["flops"] = plan.flops(**size)
        if plan.bytes is not None:
            extra["bytes"] = plan.bytes(**size)
        if plan.ref is not None:
            checked = (plan.check_fn(kernel, plan.ref, size) if plan.check_fn is not None
                       else check(kernel, plan.ref, size, **_launch_options(extra)))
            if not checked:
                return Benched(job.index, error=f"wrong result: rel error {checked.rel_error}", stage="check",
                               bench_s=time.perf_counter() - t0, device=device, note=note)
        stage = "bench"
        if plan.ratio_baseline is not None:
            extra["baseline"] = ratio_baseline_at(plan.ratio_baseline, size)
        result = bench_fn(kernel, size, dict(job.config), **extra, **size_kwargs(kernel, size))
    except Exception as err:
        lost = None
        if getattr(err, "sticky", False) and not getattr(err, "isolated", False):
            lost = lost_context(err, device, stage, job)
        return Benched(job.index, error=short_error(err), stage=stage, bench_s=time.perf_counter() - t0,
                       device=device, lost=lost, note=note)
    return Benched(job.index, result, bench_s=time.perf_counter() - t0, device=device, note=note)


def ratio_baseline_at(make: Callable[..., Any], size: Config) -> Any:
    """The baseline a row is timed beside at ``size``: ``make(**size)``, which must be callable."""
    from ...records.errors import BaselineError

    made = make(**size)
    if isinstance(make, functools.partial) and make.func is reference_kernel:
        return made  # the final round's reference: a kernel as the sweep's own compile step made it
    if not callable(made):
        raise BaselineError(f"the sweep's ratio baseline maker returned {type(made).__name__} at size {size}, not a "
                            "callable: it should return a zero-argument callable (lambda: torch.matmul(a, b)), a "
                            "callable of the kernel's inputs (torch.matmul) or a TileLang kernel")
    return made


def reference_kernel(artifact: Any, load: bool, **size: Any) -> Any:
    """The final round's common reference at a size (a ``BenchPlan.ratio_baseline`` maker): the
    leader's compiled artifact, loaded as a launchable kernel (``load``, tilelab's own bench step)
    or as the custom compile step made it."""
    return load_artifact(artifact) if load else artifact


def bench_task(plan: BenchPlan, job: Job, compiled: Compiled | None, device: str | None = None) -> Benched:
    """A sweep over devices: the row step of one configuration (or one baseline when ``compiled`` is
    None) on the GPU of this thread, process or Dask worker, its kernel loaded from the artifact."""
    device = _device_label() if device is None else device
    if compiled is None:
        return row_step(plan, job, device=device)
    t0 = time.perf_counter()
    try:
        kernel = load_artifact(compiled.artifact) if plan.bench_fn is None else compiled.artifact
    except Exception as err:
        return Benched(job.index, error=short_error(err), stage="check", bench_s=time.perf_counter() - t0,
                       device=device)
    outcome = row_step(plan, job, kernel, device=device)
    return dataclasses.replace(outcome, bench_s=time.perf_counter() - t0)


def _device_label() -> str:
    """Where a bench task runs: the Dask worker (and its GPU when it sees one), or this process."""
    where = where_am_i()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return f"{where} (GPU {visible})" if visible else where



def probe_device() -> tuple[str, str | None]:
    """(model name, TileLang arch) of the GPU this process sees, ("", None) without one."""
    from ... import _tilelang

    try:
        import torch

        if not torch.cuda.is_available():
            return "", None
        return torch.cuda.get_device_name(), _tilelang.local_gpu_arch()
    except Exception:
        return "", None


