"""Launch paths through the worker process (:mod:`tilelab.launch._worker`).

The notebook's side keeps everything that cannot hang or corrupt a CUDA context: compiling (no
launch), building inputs, the reference, verification. The worker gets the kernel once, as a
:class:`KernelRef` (its ``T.prim_func`` and the options it was compiled with; the worker compiles
it again, which TileLang's disk cache answers from the artifact the notebook's compile just
wrote) and keeps it loaded by key; each launch then sends only the key and the tensors (by CUDA IPC).

Functions named ``*_in_worker`` run in the worker; the others run in the notebook and call them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import _inputs, _worker
from ._cuda_errors import KernelLaunchError
from ._device_faults import with_device_fault
from ._kernel import Prepared, prepare_kernel
from ._options import BenchOptions

RUN_TIMEOUT_S = 30.0  # one verified launch: honest kernels take milliseconds
BENCH_TIMEOUT_S = 60.0  # added to the bench's own warm-up and repetition time
LOAD_TIMEOUT_S = 900.0  # loading a kernel may compile it (TileLang lowering + nvcc)

LIKELY_HANG_CAUSES = (
    "a loop whose exit condition is never met (a while loop or a spin on a flag), an mbarrier wait on a phase "
    "that never completes (a wrong parity, or fewer arrivals than the barrier expects), or a producer/consumer "
    "deadlock in a warp-specialised pipeline (a consumer waiting on a stage the producer never fills). "
    "If the kernel is only slow at this size, pass a larger timeout= (%%tilelang --timeout S)")


@dataclass(frozen=True)
class KernelRef:
    """A compiled kernel as the worker receives it: ``payload`` is None once the worker has it."""

    key: str
    name: str
    payload: bytes | None  # pickled (prim_func, out_idx, target, backend, pass_configs, compile_flags, outputs)


_KEYS: weakref.WeakKeyDictionary[Any, tuple] = weakref.WeakKeyDictionary()


def _payload(prepared: Prepared) -> tuple:
    compiled = prepared.compiled
    outputs = tuple(p.name for p in prepared.outputs if p.passed_at_launch)
    return (compiled.prim_func, list(compiled.out_idx) if compiled.out_idx else None, compiled.target,
            prepared.backend, dict(getattr(compiled, "pass_configs", None) or {}),
            getattr(compiled, "compile_flags", None), outputs)


def kernel_ref(prepared: Prepared, worker: _worker.Worker) -> KernelRef:
    """The reference to send: with its payload only the first time this worker process sees it."""
    try:
        key, payload = _KEYS[prepared.compiled]
    except (KeyError, TypeError):
        # Pickled here, unpickled in the worker only after it has imported TileLang (whose
        # operators a prim_func refers to must be registered first).
        payload = pickle.dumps(_payload(prepared))
        key = hashlib.sha256(payload).hexdigest()
        try:
            _KEYS[prepared.compiled] = (key, payload)
        except TypeError:
            pass
    return KernelRef(key, prepared.name, None if key in worker.loaded else payload)


# ------------------------------------------------------------------------------------------
# In the worker
# ------------------------------------------------------------------------------------------

_LOADED: dict[str, Prepared] = {}


def _torch() -> Any:
    import torch

    device = int(os.environ.get("TILELAB_WORKER_DEVICE", "0"))
    if torch.cuda.is_available() and torch.cuda.current_device() != device:
        torch.cuda.set_device(device)
    return torch


NOT_LOADED = "is not loaded in this worker"


def load_in_worker(ref: KernelRef) -> str:
    """Compile (TileLang's cache answers) and keep the kernel; returns its key."""
    if ref.key in _LOADED:
        return ref.key
    if ref.payload is None:
        raise KeyError(f"kernel {ref.name} {NOT_LOADED}")
    _LOADED[ref.key] = prepare_payload(unpack(ref.payload))
    return ref.key


def prepare_for_launches() -> None:
    """In the worker, ahead of its first launch: torch with its CUDA context, TileLang, and the
    measuring code, imported (see :meth:`_worker.Worker.warm`)."""
    _worker._warm_up()
    from . import _bench  # noqa: F401


def prepare_payload(payload: tuple) -> Prepared:
    """The kernel a payload (:func:`_payload`) describes, compiled again in this process (TileLang's
    cache answers) and prepared to launch: the worker's and the sanitizer child's way in."""
    import tilelang

    func, out_idx, target, backend, pass_configs, flags, outputs = payload
    compiled = tilelang.compile(func, out_idx=out_idx, target=target, execution_backend=backend,
                                pass_configs=pass_configs or None, compile_flags=flags)
    return prepare_kernel(compiled, outputs=list(outputs) or None)


def unpack(payload: bytes) -> tuple:
    """The kernel payload, unpickled after TileLang is imported."""
    import tilelang  # noqa: F401  (registers the operators the prim_func refers to)

    return pickle.loads(payload)


def _mark_isolated(err: BaseException) -> BaseException:
    if isinstance(err, KernelLaunchError):
        err.isolated = True
    return err


def poisoned_launch_in_worker(ref: KernelRef, args: list[Any], bound: dict[str, int], pattern: int,
                              dests: list[Any]) -> list[bool]:
    """``_run.poisoned_launch`` on the shared tensors; outputs the launcher allocates are copied
    into ``dests`` (the notebook's tensors). Returns the poisoned flags."""
    from ._run import poisoned_launch

    torch = _torch()
    prepared = _LOADED[load_in_worker(ref)]
    try:
        outs, poisoned = poisoned_launch(torch, prepared, list(args), bound, pattern)
        callee = iter(dests)
        for p, out in zip(prepared.outputs, outs):
            if not p.passed_at_launch:
                next(callee).copy_(out)
        torch.cuda.synchronize()
    except BaseException as err:
        raise _mark_isolated(err)  # noqa: B904 (the error itself, marked, not a new one)
    return poisoned


def bench_in_worker(ref: KernelRef, args: tuple, opts: BenchOptions, sizes: dict[str, int],
                    baseline: Any = None) -> Any:
    """``_bench.measure`` of the loaded kernel with ``opts`` at ``sizes``; a ``baseline`` that is a
    :class:`KernelRef` names a kernel loaded here."""
    from ._bench import measure

    prepared = _LOADED[load_in_worker(ref)]
    if isinstance(baseline, KernelRef):
        baseline = _LOADED[load_in_worker(baseline)]
    try:
        return measure(_torch(), prepared, args, opts, sizes, baseline=baseline)
    except BaseException as err:
        raise _mark_isolated(err)  # noqa: B904 (the error itself, marked, not a new one)


def call_in_worker(fn: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    """Any module-level function that measures here (ceilings, launch overhead)."""
    _torch()
    try:
        return fn(*args, **kwargs)
    except BaseException as err:
        raise _mark_isolated(err)  # noqa: B904 (the error itself, marked, not a new one)


# ------------------------------------------------------------------------------------------
# In the notebook
# ------------------------------------------------------------------------------------------


def launch_shape(prepared: Prepared, bound: dict[str, int] | None = None) -> str:
    """"grid (8, 8, 1), block (256, 1, 1)" as the kernel's ``T.Kernel`` wrote them, sizes
    substituted (read from the prim_func in microseconds; empty when it cannot tell)."""
    from .. import _tilelang

    try:
        dims = _tilelang.launch_dims(prepared.compiled)
    except Exception:
        dims = None
    if dims is None:
        return ""
    grid = tuple(_evaluate(d, bound or {}) for d in dims[0])
    block = tuple(_evaluate(d, bound or {}) for d in dims[1])
    return f"grid {grid}, block {block}"


def _evaluate(dim: Any, bound: dict[str, int]) -> Any:
    if isinstance(dim, int) or not bound:
        return dim
    try:
        return _inputs.eval_dim(dim, bound)
    except Exception:
        return dim


def timeout_error(prepared: Prepared, err: _worker.WorkerTimeout, bound: dict[str, int] | None) -> KernelLaunchError:
    shape = launch_shape(prepared, bound)
    sizes = ", ".join(f"{k}={v}" for k, v in sorted((bound or {}).items()))
    detail = (f"no answer within {err.timeout:g} s" + (f"; {shape}" if shape else "")
              + (f"; sizes {sizes}" if sizes else ""))
    out = KernelLaunchError(prepared.name, "timeout", detail, LIKELY_HANG_CAUSES)
    out.isolated = True
    return out


def died_error(prepared: Prepared, err: _worker.WorkerDied) -> KernelLaunchError:
    detail = str(err)
    last = [line for line in (getattr(err, "stderr", "") or "").splitlines() if line.strip()][-3:]
    if last:
        detail += "; its last words on stderr: " + " | ".join(last)
    out = KernelLaunchError(prepared.name, "launch_failure", detail,
                            "the worker process crashed during the launch (a fault in the launcher or the driver)",
                            sticky=True)
    out.isolated = True
    return out


def _call(worker: _worker.Worker, prepared: Prepared, bound: dict[str, int] | None, timeout: float,
          fn: Any, *args: Any) -> Any:
    try:
        for attempt in (1, 2):
            ref = kernel_ref(prepared, worker)
            if ref.payload is not None:
                worker.call(load_in_worker, ref, timeout=LOAD_TIMEOUT_S, label=f"loading {prepared.name}")
                worker.loaded.add(ref.key)
                ref = KernelRef(ref.key, ref.name, None)
            try:
                return worker.call(fn, ref, *args, timeout=timeout, label=prepared.name)
            except KeyError as err:
                # The worker process was replaced between the load and the call (killed from outside,
                # its replacement started by another thread): load the kernel into the new one, once.
                if attempt == 2 or NOT_LOADED not in str(err):
                    raise
                worker.loaded.discard(ref.key)
        raise AssertionError("unreachable")
    except KernelLaunchError as err:
        raise with_device_fault(err, prepared)  # noqa: B904 (the worker's error itself, located)
    except _worker.WorkerTimeout as err:
        raise timeout_error(prepared, err, bound) from None
    except _worker.WorkerDied as err:
        raise died_error(prepared, err) from None


def _call_watched(worker: _worker.Worker, prepared: Prepared, bound: dict[str, int] | None, timeout: float,
                  fn: Any, *args: Any, watch_args: Any = None) -> Any:
    """:func:`_call`; after a timeout, ``watch_args`` (a callable giving the kernel's launch
    arguments; None: don't) relaunches the kernel watched, to say where it hung."""
    try:
        return _call(worker, prepared, bound, timeout, fn, *args)
    except KernelLaunchError as error:
        if watch_args is not None and error.kind == "timeout" and error.isolated:
            locate_hang(worker, prepared, bound, watch_args, error)
        raise


def locate_hang(worker: _worker.Worker, prepared: Prepared, bound: dict[str, int] | None, watch_args: Any,
                error: KernelLaunchError) -> None:
    """Attach to a timeout ``error`` where the kernel hung (``error.hang``), from one watched
    relaunch in a fresh worker (:mod:`tilelab.launch._watch`); never raises."""
    from . import _watch

    def locate() -> Any:
        payload = pickle.dumps(_payload(prepared))
        return _watch.locate_hang(worker, prepared, list(watch_args()), bound, payload)

    _watch.attach(error, locate)


def poisoned_launch(worker: _worker.Worker, prepared: Prepared, args: list[Any], bound: dict[str, int],
                    pattern: int, timeout: float | None, diagnose_hang: bool = True) -> tuple[list[Any], list[bool]]:
    """The isolated counterpart of ``_run.poisoned_launch``: same answer, launched in ``worker``.
    A timeout is followed by one watched relaunch that locates the hang, unless ``diagnose_hang``
    is False."""
    import torch

    dests = []
    for p in prepared.outputs:
        if not p.passed_at_launch:
            shape = tuple(_inputs.eval_dim(d, bound) for d in p.shape)
            dests.append(torch.empty(shape, dtype=_inputs.torch_dtype(p.dtype), device="cuda"))
    torch.cuda.synchronize()  # the inputs this process wrote are complete before the worker reads them
    poisoned = _call_watched(worker, prepared, bound, timeout if timeout is not None else RUN_TIMEOUT_S,
                             poisoned_launch_in_worker, list(args), dict(bound), pattern, dests,
                             watch_args=(lambda: args) if diagnose_hang else None)
    launch = [p for p in prepared.params if p.passed_at_launch]
    outs, callee = [], iter(dests)
    for p in prepared.outputs:
        outs.append(args[launch.index(p)] if p.passed_at_launch else next(callee))
    return outs, list(poisoned)


def bench(worker: _worker.Worker, prepared: Prepared, args: Sequence[Any], opts: BenchOptions, sizes: dict[str, int],
          timeout: float | None, baseline: Any = None, diagnose_hang: bool = True) -> Any:
    """``_bench.measure`` in the worker, with ``opts`` (resolved) at ``sizes``; a ``baseline`` (a
    prepared kernel, loaded there first, or a picklable callable) travels beside them and is timed
    with the kernel. The default ``timeout`` covers :attr:`BenchOptions.longest_ms` four times
    (twice that with a baseline). A timeout is followed by one watched relaunch that locates the
    hang, unless ``diagnose_hang`` is False."""
    if isinstance(baseline, Prepared):  # loaded in the worker first, then named by its key
        ref = kernel_ref(baseline, worker)
        if ref.payload is not None:
            try:
                worker.call(load_in_worker, ref, timeout=LOAD_TIMEOUT_S, label=f"loading {baseline.name}")
            except _worker.WorkerDied as err:
                raise died_error(baseline, err) from None
            worker.loaded.add(ref.key)
        baseline = KernelRef(ref.key, ref.name, None)
    if timeout is None:
        timeout = BENCH_TIMEOUT_S + 4 * opts.longest_ms / 1e3 * (2 if baseline is not None else 1)
    try:
        import torch

        torch.cuda.synchronize()
    except Exception:
        pass
    def watch_args() -> list[Any]:
        launch, _ = _inputs.build_inputs(prepared.params, tuple(args), sizes, device="cuda")
        return list(launch)

    if not diagnose_hang:
        return _call(worker, prepared, sizes, timeout, bench_in_worker, tuple(args), opts, dict(sizes), baseline)
    return _call_watched(worker, prepared, sizes, timeout, bench_in_worker, tuple(args), opts, dict(sizes), baseline,
                         watch_args=watch_args)


def call(worker: _worker.Worker, fn: Any, args: tuple, kwargs: dict[str, Any], timeout: float | None,
         label: str) -> Any:
    """``fn(*args, **kwargs)`` in the worker (ceilings, launch overhead)."""
    try:
        return worker.call(call_in_worker, fn, tuple(args), dict(kwargs), timeout=timeout, label=label)
    except _worker.WorkerTimeout as err:
        out = KernelLaunchError(label, "timeout", f"no answer within {err.timeout:g} s", LIKELY_HANG_CAUSES)
        out.isolated = True
        raise out from None
