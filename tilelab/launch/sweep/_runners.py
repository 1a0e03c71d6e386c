"""Where a sweep's tasks run: this process (:class:`InlineRunner`: compiles in threads, each row
step here), every GPU of this host (:class:`LocalRunner`: compile tasks in a kept pool of
processes, one bench thread per GPU), or a Dask cluster (:class:`DaskRunner`, routed by the
workers' declared resources). All three answer the same calls, which the sweep's one course
(``_orchestrator``) makes, written down as the :class:`Runner` protocol: ``compile(index, step)``,
``bench(plan, job, compiled)``, ``next_event()``, ``close(cancel)``, and for the final round
``prefer_final(labels)``, ``final_device()``, ``on_final_device(label)`` and ``bench_pinned(...)``; they report to one
event queue: ("compiled", index, Compiled) and ("benched", index, Benched). Each says ``where``
it runs, the GPU ``model`` (or CPU) it measures on, and whether it is ``in_process``. The pool of
compile processes the host's runner sends its compile tasks to is ``_pool.py``.

A sweep over devices (``devices=`` or ``client=``)
-------------------------------------------------
A sweep is two kinds of task per configuration. A *compile task* (TileLang lowering + nvcc: CPU
work) turns the configuration's kernel into a :class:`KernelArtifact`: the ``T.prim_func``, its
compile options and TileLang's disk cache entry. A *bench task* (on a GPU) installs that entry into
its machine's TileLang cache, so loading the kernel compiles nothing, then makes the row
(``_tasks.row_step``: check against ``ref``, time). Rows are merged into one :class:`SweepTable` as
they finish, each saying where it ran.

* ``devices="all"`` or ``[0, 1]``: compile tasks run in a pool of processes on this host (steps that
  cannot be pickled run in threads): one process per compile task, up to 1.5x the cores and half the
  memory at about 1 GB a process, or exactly ``workers=`` (:func:`compile_pool_size`); the pool is
  kept for the next sweep, which takes it where it is big enough. Bench tasks run one per GPU at a
  time, each GPU taking the next compiled configuration. The GPUs must be one model: timings of
  different models are not merged.
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
again (TileLang's disk cache answers) and timed again on one device, each side by side with one
common reference: the lowest ratio to it is the best. That device is the first of ``devices``
(where the baselines run too) or the first GPU worker of the cluster; with ``rank_by="ratio"``,
where a finalist's ratio to the baseline measured on the final device in the sweep stands, it is
the device that measured the most finalists (the first on a tie), so that the round, serial time
after a parallel sweep, times again as few as it can. A size whose leaders all ran on one device
already is left as it is. Interrupting the final round keeps the sweep's rows: sizes whose final round did not complete
keep the sweep's ranking.

Every finished row is written to a row cache (``$TILELAB_CACHE_DIR/sweeps``) under a key of the
factory's source, the size, the configuration, the bench options and the GPU model: a sweep that
was interrupted (the stop button, Ctrl-C) returns the rows it has, and the same call again takes
those from the cache (marked "cached") and runs only the rest. ``force=True`` measures everything
again. Rows that failed in the bench step are not cached (a timeout may not recur); compile and
check failures are. A row lost with its process (a compile process or the launch worker killed from
outside, or crashed) says so and is not cached: the same call again measures it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

from ...records.errors import NoGpuError, TilelabError
from . import _pool, _tasks
from ._plan import INTERRUPTED, Job, SweepOptions, describe, short_error
from ._tasks import (
    Benched,
    BenchPlan,
    Compiled,
    bench_task,
    compile_task,
    default_compile,
    default_compile_step,
    row_step,
)


class Runner(Protocol):
    """A place to run a sweep's tasks: what the sweep's one course (``_orchestrator``, and
    ``_final`` for the final round) asks of it. Outcomes come back as events of its queue,
    ("compiled", index, Compiled) and ("benched", index, Benched), read with :meth:`next_event`."""

    where: str  # said in the table: "this process", "cuda:0, cuda:1", "Dask, 2 GPU workers"
    model: str  # the GPU model (or the CPU) every row is measured on
    arch: str | None  # the arch compile tasks compile for (None: the sweep's own target)
    in_process: bool  # the row steps run in the sweep's own process
    passes_futures: bool  # a bench task is handed the compile task's future, not its outcome

    def compile_step(self, opts: SweepOptions) -> Callable[..., Callable[[], Any]]:
        """(factory, size, config) -> the compile task's step, elaborated where it suits the runner."""
        ...

    def expect_compiles(self, tasks: int) -> None:
        """How many compile tasks come next, before the first."""
        ...

    def compile(self, index: int, step: Callable[[], Any]) -> Any:
        """Start compile task ``index``; returns at once (its future). Its outcome is an event."""
        ...

    def bench(self, plan: BenchPlan, job: Job, compiled: Any) -> None:
        """Queue ``job``'s row step (``compiled``: its compile outcome, or None for a baseline)."""
        ...

    def next_event(self) -> tuple[str, int, Any]:
        """The next event, left in the queue until handled (see :class:`Events`)."""
        ...

    def prefer_final(self, device_labels: Sequence[str | None]) -> None:
        """Before the final round: the rows whose figures would stand on the device that measured
        them (``device_labels``, each row's ``device``). The round runs on the usable device that
        measured the most of them (the first of the sweep's devices on a tie), so that it times
        again as few as it can."""
        ...

    def final_device(self) -> str | None:
        """Where the final round runs; None: nothing to rank again (one device)."""
        ...

    def on_final_device(self, device_label: str | None) -> bool:
        """Whether a row measured at ``device_label`` was measured on :meth:`final_device`."""
        ...

    def bench_pinned(self, plan: BenchPlan, job: Job, compiled: Any) -> None:
        """A row step of the final round, on :meth:`final_device` only."""
        ...

    def close(self, cancel: bool = False) -> None:
        """The sweep is over (``cancel``: stopped); tasks not started are dropped."""
        ...


class MixedDevicesError(TilelabError, ValueError):
    """The GPUs of a sweep are not all one model."""


class DevicesError(TilelabError, ValueError):
    """``devices=`` names no GPU this process can use."""



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


# Threads of the caller's process that compile while a new compile pool's spawned processes import
# torch and TileLang (seconds): the caller has them imported already.
EARLY_COMPILE_THREADS = 4


class Events(queue.Queue):
    """A sweep's event queue. The course reads an event with :meth:`peek` and removes it
    (``get_nowait``) only once it has handled it, so a stop (a KeyboardInterrupt, which may land
    between any two steps of the sweep's thread) that lands while an event is handled loses
    nothing: the stop's drain handles it again."""

    def peek(self, timeout: float) -> tuple[str, int, Any] | None:
        with self.not_empty:
            if not self._qsize() and timeout > 0:
                self.not_empty.wait(timeout)
            return self.queue[0] if self._qsize() else None


def wait_event(events: queue.Queue) -> tuple[str, int, Any]:
    """The next event of a sweep's queue, waiting for it; left in the queue (see :class:`Events`)."""
    peek = getattr(events, "peek", None)
    while True:  # a short timeout keeps the stop button (KeyboardInterrupt) responsive
        if peek is not None:
            event = peek(0.2)
            if event is not None:
                return event
            continue
        try:  # a plain queue: read is removed
            return events.get(timeout=0.2)
        except queue.Empty:
            continue


class InlineRunner:
    """Everything in this process, on its current device (or the CPU): compile tasks in a pool of
    threads; each row step in the sweep's own thread, one at a time in job order, once every
    compile is in, so that timings never share the machine with a compile. The row step launches
    in tilelab's worker process unless ``isolate=False`` (see :func:`tilelab.bench`). A sticky
    CUDA error that made this process's context unusable answers every later row step "not run";
    a stop (KeyboardInterrupt) during a row step sends that row's partial measurement, if any,
    before it goes on up to the sweep."""

    in_process = True
    passes_futures = False
    arch: str | None = None  # compiles for the sweep's own target

    def __init__(self, events: Events, *, workers: int | None, target: Any,
                 warm: Callable[[int], None] | None = None) -> None:
        """``warm``: started now in a thread of its own with this thread's GPU, and awaited before
        the first row step (see :func:`warm_up_for`)."""
        self.events = events
        self._lock = threading.Lock()
        self.where, self.model = "this process", _this_device(target)
        self._threads = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                           thread_name_prefix="tilelab-compile")
        self._compiling = 0
        self._ready: list[tuple[BenchPlan, Job, Compiled | None]] = []
        self._lost: str | None = None
        self._warming: threading.Thread | None = None
        if warm is not None:
            self._warming = threading.Thread(target=_quietly, args=(warm, self._current_gpu()), daemon=True,
                                             name="tilelab-bench-warm-up")
            self._warming.start()

    @staticmethod
    def _current_gpu() -> int:
        """The GPU this thread launches on (a new thread's would be GPU 0)."""
        import torch

        return int(torch.cuda.current_device())

    def compile_step(self, opts: SweepOptions) -> Callable[..., Callable[[], Any]]:
        """Elaborate in the caller's thread; the step compiles to a launchable kernel here."""
        return lambda f, s, c: default_compile(f, s, c, backend=opts.backend, out_idx=opts.out_idx, target=opts.target)

    def expect_compiles(self, tasks: int) -> None:
        """(Its compiles run in threads of this process: ``workers`` of them, or one per core.)"""

    def compile(self, index: int, step: Callable[[], Any]) -> Any:
        with self._lock:
            self._compiling += 1

        def done(f: Any) -> None:
            self.events.put(("compiled", index, _outcome(f, index)))
            with self._lock:  # after the event: the row steps start once every compile is in the queue
                self._compiling -= 1

        fut = self._threads.submit(compile_task, index, step)
        fut.add_done_callback(done)
        return fut

    def bench(self, plan: BenchPlan, job: Job, compiled: Compiled | None) -> None:
        if self._lost is not None:
            self.events.put(("benched", job.index, Benched(job.index, error=self._lost, stage="not run")))
        else:
            self._ready.append((plan, job, compiled))

    def next_event(self) -> tuple[str, int, Any]:
        """The next event, left in the queue (see :class:`Events`); once every compile is in and
        nothing else waits, the next row step runs here and its outcome is that event."""
        while True:
            with self._lock:
                idle = bool(self._ready) and not self._compiling
            event = self.events.peek(0 if idle else 0.2)  # a short wait keeps the stop button responsive
            if event is not None:
                return event
            if idle:
                self._step()

    def _step(self) -> None:
        """The next row step, here (the lowest job first); its outcome goes to the queue."""
        while self._warming is not None and self._warming.is_alive():
            self._warming.join(0.2)  # a short wait keeps the stop button responsive
        plan, job, compiled = min(self._ready, key=lambda item: item[1].index)
        self._ready.remove((plan, job, compiled))
        try:
            outcome = row_step(plan, job, None if compiled is None else compiled.artifact)
        except KeyboardInterrupt as err:
            self.events.put(("benched", job.index, _interrupted(job, err)))
            raise
        # rows of one process say neither where they ran nor how long their step took
        self.events.put(("benched", job.index, dataclasses.replace(outcome, bench_s=None, device="")))
        if outcome.lost is not None:
            self._lost = outcome.lost
            for _, waiting, _ in self._ready:
                self.events.put(("benched", waiting.index, Benched(waiting.index, error=self._lost, stage="not run")))
            self._ready.clear()

    def prefer_final(self, device_labels: Sequence[str | None]) -> None:
        """(One device: no final round.)"""

    def final_device(self) -> str | None:
        return None  # one device: nothing to rank again

    def on_final_device(self, device_label: str | None) -> bool:
        return True

    def bench_pinned(self, plan: BenchPlan, job: Job, compiled: Compiled | None) -> None:
        """(No final round on one device; a row step here is on its one device anyway.)"""
        self.bench(plan, job, compiled)

    def close(self, cancel: bool = False) -> None:
        self._ready.clear()
        self._threads.shutdown(wait=not cancel, cancel_futures=cancel)


def _quietly(warm: Callable[[int], None], device: int) -> None:
    """A GPU's warm-up: whatever goes wrong there, the first row step meets again and reports."""
    with contextlib.suppress(Exception):
        warm(device)


def _interrupted(job: Job, err: KeyboardInterrupt) -> Benched:
    """A row step stopped by the stop button: the launches it measured, if any, make its row."""
    from ...records.launch import BenchResult

    partial = getattr(err, "partial", None)
    if isinstance(partial, BenchResult) and partial.samples_ms:
        return Benched(job.index, partial, partial=True,
                       note=f"interrupted while timing {describe(job)}: its row has the {len(partial.samples_ms)} "
                            "launches measured before the stop")
    return Benched(job.index, error="not run: the sweep was interrupted", stage="not run")


def _this_device(target: Any) -> str:
    """The CPU's or the current GPU's name, for the table of a sweep in this process."""
    try:
        from .._cpu import cpu_name, wants_cpu
        from .._kernel import device_name

        return cpu_name() if wants_cpu(None, target) else device_name()
    except Exception:
        return ""


def _outcome(fut: Any, index: int, processes: Mapping[int, Any] | None = None) -> Compiled:
    """A compile task's future -> its outcome; a task that never ran to its end says why."""
    try:
        return fut.result()
    except BaseException as err:
        from concurrent.futures import CancelledError
        from concurrent.futures.process import BrokenProcessPool

        if isinstance(err, CancelledError):  # a stop cancelled it before it ran: not a compile failure
            return Compiled(index, error=INTERRUPTED, stage="not run")
        if isinstance(err, BrokenProcessPool):  # a compile process died: killed from outside, or crashed
            reason = (f"not compiled: a compile process of the sweep died ({_deaths(processes or {})}) while this "
                      "configuration was compiling or waiting to; the same call again compiles it")
            return Compiled(index, error=reason, stage="not run", lost=reason)
        return Compiled(index, error=short_error(err), stage="compile")


def _deaths(processes: Mapping[int, Any]) -> str:
    """"pid 123, killed by SIGKILL" for each process of a pool that is gone. The pool finds a
    process gone when its pipes close, a moment before the process can be reaped: wait for that
    (a bounded wait for the system, not for the sweep), so the reason names the signal."""
    import signal

    deadline = time.monotonic() + 30.0
    while True:
        codes = {pid: getattr(process, "exitcode", None) for pid, process in processes.items()}
        if any(code is not None for code in codes.values()) or not codes or time.monotonic() > deadline:
            break
        for process in processes.values():
            with contextlib.suppress(Exception):
                process.join(0.05)
    said = []
    for pid, code in codes.items():
        if code is None:
            continue
        how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
               else f"exit code {code}")
        said.append(f"pid {pid}, {how}")
    return "; ".join(said) or "its exit status unknown"


def _settle(proxy: Future, sent: Any) -> None:
    """The pool's future ``sent`` is done: its outcome becomes the task's (``proxy``), a cancel a
    CancelledError (read as "not run", as a task cancelled before it was sent)."""
    from concurrent.futures import CancelledError

    if sent.cancelled():
        proxy.set_exception(CancelledError())
    elif sent.exception() is not None:
        proxy.set_exception(sent.exception())
    else:
        proxy.set_result(sent.result())


class _CompilesElsewhere:
    """What the host's GPUs and a Dask cluster share: the configuration is elaborated in the
    sweep's process (the factory may live in a notebook cell) and compiled in a task, for the GPUs'
    arch; events arrive from other threads."""

    arch: str | None
    events: queue.Queue

    def compile_step(self, opts: SweepOptions) -> Callable[..., Callable[[], Any]]:
        return lambda f, s, c: default_compile_step(f, s, c, backend=opts.backend, out_idx=opts.out_idx,
                                                    target=self.arch)

    def next_event(self) -> tuple[str, int, Any]:
        return wait_event(self.events)


class LocalRunner(_CompilesElsewhere):
    """Compile tasks in the host's kept process pool (threads for steps that cannot be pickled);
    one bench thread per GPU, each taking the next compiled configuration (after starting that
    GPU's launch worker, while the first configurations compile: :func:`warm_up_for`)."""

    in_process = False
    passes_futures = False  # a bench task gets the compile task's outcome

    def __init__(self, devices: Sequence[int], events: queue.Queue, *, workers: int | None, use_cuda: bool,
                 warm: Callable[[int], None] | None = None) -> None:
        """``warm``: each GPU's bench thread calls it first, with its GPU, while the first
        configurations compile (see :func:`warm_up_for`)."""
        self.devices, self.events, self.use_cuda = list(devices), events, use_cuda
        self._warm = warm
        self.where, self.model = ", ".join(f"cuda:{d}" for d in self.devices), ""
        self.arch: str | None = None
        self._processes: dict[int, Any] = {}  # the pool's processes this sweep saw: pid -> process
        self.workers = workers or os.cpu_count() or 1
        self._explicit = workers  # the user's workers=: exactly that many compile processes
        self._tasks = 1  # compile tasks this sweep will send (expect_compiles), for the pool's size
        self._pool: ProcessPoolExecutor | None = None  # the kept pool this sweep compiles in
        self._futures: list[Future] = []  # this sweep's compile tasks for it, sent or not yet
        self._sends: queue.Queue = queue.Queue()  # (index, pickled step, step, its future) for the sender
        self._sent: dict[int, Any] = {}  # id of a task's future -> the pool's future, once sent
        self._sender: threading.Thread | None = None
        self._stopping = threading.Event()  # a stop: what the sender sends from now on is cancelled
        self._pool_started = threading.Event()  # the pool took its first task: no more early compiles
        self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="tilelab-compile")
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._alive = len(self.devices)
        self._lost: str | None = None
        self._lost_devices: set[int] = set()
        self._preferred: int | None = None  # the final round's GPU, where prefer_final chose one
        self._closed = False
        self._bench_threads = [threading.Thread(target=self._serve, args=(d,), daemon=True,
                                                name=f"tilelab-bench-cuda:{d}") for d in self.devices]
        self._started = False  # the bench threads: started once the compile pool's processes are

    def _start_bench_threads(self) -> None:
        """Start the bench threads (each warms its GPU's launch worker first), once: after a new
        compile pool forked its processes (:meth:`expect_compiles`), so that none is copied into
        a compile process midway through starting CUDA or its worker."""
        with self._lock:
            if self._started:
                return
            self._started = True
        for t in self._bench_threads:
            t.start()


    def expect_compiles(self, tasks: int) -> None:
        """How many compile tasks come next (before the first): the pool's size follows
        (:func:`compile_pool_size`). The pool is taken (or made: on Linux its processes are forks of
        this process, made now, in the caller's thread) before the bench threads start."""
        self._tasks = max(self._tasks, tasks)
        try:
            if tasks:
                self._take_pool()
        finally:
            self._start_bench_threads()

    def _take_pool(self) -> ProcessPoolExecutor:
        """This sweep's compile pool, taken (or made) once. A new pool whose processes are not there
        yet (spawned: they import torch and TileLang first) gets the early compiles' threads."""
        with self._lock:
            if self._pool is None:
                self._pool = _pool.compile_pool(self.pool_size(), exact=self._explicit is not None)
                started = getattr(self._pool, "_processes", None)
                self._processes.update(started or {})
                if not started and self._explicit is None:  # not with the user's workers= to keep to
                    self._start_early_compiles()
            return self._pool

    def pool_size(self) -> int:
        """The compile processes this sweep asks for (a kept pool at least that big serves)."""
        return _pool.compile_pool_size(self._tasks, workers=self._explicit)

    def compile(self, index: int, step: Callable[[], Any]) -> Any:
        """Send ``step`` to the pool (or a thread, where it cannot be pickled); returns at once.

        Where a new pool's processes are spawned (not Linux), its first starts only once it has
        imported torch and TileLang (seconds), and ``ProcessPoolExecutor.submit`` waits for it: a
        thread of this runner (:meth:`_send`) submits, so the caller elaborates the other
        configurations meanwhile. Until that first submit returns, a few threads of this process, which has
        TileLang imported already, compile what waits (:meth:`_compile_early`; not with the user's
        ``workers=``, which bounds the compiles at once); the pool takes the rest, all at once.
        The future returned stands for the task wherever it runs: a stop cancels it, sent or
        not."""
        blob = _tasks.dumps(step)
        processes = self._processes
        if blob is None:
            fut = self._threads.submit(compile_task, index, step)
        else:
            fut = Future()
            self._futures.append(fut)
            with self._lock:
                if self._sender is None:
                    self._sender = threading.Thread(target=self._send, daemon=True, name="tilelab-compile-send")
                    self._sender.start()
            self._sends.put((index, blob, step, fut))
        fut.add_done_callback(lambda f: self.events.put(("compiled", index, _outcome(f, index, dict(processes)))))
        return fut

    def _send(self) -> None:
        """The sender thread: each compile task to the kept pool, in the order they came."""
        try:
            while True:
                item = self._sends.get()
                if item is None:
                    return
                index, blob, _, proxy = item
                if not proxy.set_running_or_notify_cancel():
                    continue  # a stop cancelled it before it was sent
                try:
                    pool = self._take_pool()
                    # No lock against a bench thread starting its launch worker, which hides the caller's
                    # script for a moment: a compile process started then does not import that script,
                    # and needs nothing from it (the step came pickled by cloudpickle, which carries what
                    # the script defines by value). Holding one here would hold the worker's start
                    # back for as long as this submit waits for a spawned process's imports.
                    sent = pool.submit(_tasks.compile_pickled, index, blob)
                except BaseException as err:
                    proxy.set_exception(err)
                    continue
                finally:
                    self._pool_started.set()  # the early compiles take nothing more
                self._sent[id(proxy)] = sent
                if self._stopping.is_set() and not sent.cancel():
                    _pool.retire_pool(pool)  # a stop came while it was being sent, and it already runs
                # the pool starts its processes as tasks arrive: note them, to say which one died, and how
                self._processes.update(getattr(self._pool, "_processes", None) or {})
                sent.add_done_callback(functools.partial(_settle, proxy))
        finally:
            self._pool_started.set()

    def _start_early_compiles(self) -> None:
        """Threads that compile here while the new pool's spawned processes import torch and
        TileLang: :data:`EARLY_COMPILE_THREADS` (at most a quarter of the cores: part of TileLang's
        lowering holds the GIL, which elaborating and the bench threads need too)."""
        for k in range(max(1, min(EARLY_COMPILE_THREADS, (os.cpu_count() or 1) // 4))):
            threading.Thread(target=self._compile_early, daemon=True, name=f"tilelab-compile-early-{k}").start()

    def _compile_early(self) -> None:
        """Take compile tasks from the sender's queue and compile them in this process, until the
        pool has its first process; the pool takes every later one."""
        while not self._pool_started.is_set():
            try:
                item = self._sends.get(timeout=0.05)
            except queue.Empty:
                continue
            if item is None:  # the sweep is over: the sender takes the end too
                self._sends.put(None)
                return
            index, _, step, proxy = item
            if proxy.set_running_or_notify_cancel():
                proxy.set_result(compile_task(index, step))

    def bench(self, plan: BenchPlan, job: Job, compiled: Compiled | None) -> None:
        self._start_bench_threads()
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

    def prefer_final(self, device_labels: Sequence[str | None]) -> None:
        live = [d for d in self.devices if d not in self._lost_devices]
        counts = {d: sum(1 for label in device_labels if label == f"cuda:{d}") for d in live}
        if counts and max(counts.values()) > 0:
            self._preferred = max(live, key=lambda d: (counts[d], -live.index(d)))

    def _final_gpu(self) -> int | None:
        """The final round's GPU: the one :meth:`prefer_final` chose while it is usable, else the
        first listed GPU still usable (the baselines' GPU)."""
        if self._preferred is not None and self._preferred not in self._lost_devices:
            return self._preferred
        return next((d for d in self.devices if d not in self._lost_devices), None)

    def final_device(self) -> str | None:
        """Where the final round runs (:meth:`_final_gpu`)."""
        gpu = self._final_gpu()
        return None if gpu is None else f"cuda:{gpu}"

    def on_final_device(self, device_label: str | None) -> bool:
        """Whether a row measured at ``device_label`` was measured on :meth:`final_device`."""
        return device_label is not None and device_label == self.final_device()

    def bench_pinned(self, plan: BenchPlan, job: Job, compiled: Compiled) -> None:
        """One configuration on :meth:`final_device`, in a thread of its own named after it (the
        sweep is over: the device's bench thread is idle)."""
        device = self._final_gpu()
        assert device is not None  # the final round starts only where final_device() named one
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
        if self._warm is not None:  # before its first row, while the first configurations compile
            with _on_device(device, self.use_cuda):
                _quietly(self._warm, device)
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
        # tasks that have not started (sent to the pool or not); one that is running (or already
        # handed to a process) cannot be cancelled, so that pool's processes are ended and the next
        # sweep starts anew.
        if cancel:
            self._stopping.set()
            for fut in self._futures:
                fut.cancel()  # not sent yet: the sender skips it
        self._sends.put(None)
        self._pool_started.set()  # early compiles take nothing more
        if self._sender is not None and not cancel:
            self._sender.join()  # everything asked for is sent
        sent = list(self._sent.values())
        for fut in sent:
            if cancel:
                fut.cancel()
            elif not fut.cancelled():
                with contextlib.suppress(Exception):
                    fut.exception()  # wait, as a finished sweep's pool shutdown did
        if cancel and self._pool is not None and not all(f.done() for f in sent):
            _pool.retire_pool(self._pool)


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


class DaskRunner(_CompilesElsewhere):
    """Compile and bench tasks on a Dask cluster, routed by the workers' declared resources."""

    in_process = False
    passes_futures = True  # a bench task gets the compile task's future: the artifact goes worker to worker

    def __init__(self, client: Any, events: queue.Queue) -> None:
        self.client, self.events = client, events
        self.where, self.model = "Dask", ""
        self.arch: str | None = None
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
        self._preferred: str | None = None  # the worker prefer_final chose, by name


    def expect_compiles(self, tasks: int) -> None:
        """(The cluster's workers run its compile tasks: nothing to size here.)"""

    def probe(self) -> dict[str, tuple[str, str | None]]:
        """(model, arch) of each worker that may take bench tasks."""
        return self.client.run(_tasks.probe_device, workers=self.gpu_workers)

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
        """The final round's worker: the one :meth:`prefer_final` chose, else the first GPU worker
        by name, among those alive when the round starts (asked of the scheduler then: one that died
        since the sweep began is not waited for, and one its nanny restarted is found at its new
        address), the same one for the whole round; None when no GPU worker is left."""
        if self._final is None:
            alive = [str(w.get("name", addr)) for addr, w in _workers_info(self.client).items()
                     if self.bench_resources is None or (w.get("resources") or {}).get("GPU")]
            preferred = self._preferred if self._preferred in alive else None
            self._final = preferred or (min(alive, key=_natural) if alive else None)
        return self._final

    def prefer_final(self, device_labels: Sequence[str | None]) -> None:
        """(A bench task's label is "worker name (GPU n)": the worker that measured the most of
        them, the first by name on a tie, if it is alive when the round starts.)"""
        names = [label.split(" (", 1)[0] for label in device_labels if label]
        if names:
            self._preferred = min(set(names), key=lambda name: (-names.count(name), _natural(name)))

    def final_device(self) -> str | None:
        worker = self._final_worker()
        if worker is None:
            return None
        why = "the GPU worker that measured the most finalists" if worker == self._preferred else \
            "the cluster's first GPU worker"
        return f"{worker} ({why})"

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
                # (compile_task returns a compile error as its outcome: this is the task's loss, and
                # such a row is not cached, so the same call again compiles it)
                reason = f"the Dask task failed: {short_error(err)}"
                value = (Compiled(index, error=reason, stage="not run", lost=reason) if kind == "compiled"
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




def warm_up_for(opts: SweepOptions, real_gpu: bool) -> Callable[[int], None] | None:
    """What starts a GPU's launch worker ahead of a sweep's first row, in parallel with its first
    compiles (:func:`_tasks.warm_launch_worker`: seconds a fresh process takes to start and import
    torch and TileLang, which the first row would otherwise wait for), or None where the rows
    launch in no such worker here: a custom bench step, ``isolate=False``, the CPU, no CUDA GPU,
    a Dask cluster (its bench workers start their own)."""
    if not real_gpu or opts.client is not None or not opts.bench_options().get("isolate", True):
        return None
    try:
        from .._cpu import wants_cpu

        if wants_cpu(None, opts.target):
            return None
        import torch

        if not torch.cuda.is_available():
            return None
    except Exception:
        return None
    return _tasks.warm_launch_worker


def choose_runner(opts: SweepOptions, events: Events, *,
                  real_gpu: bool) -> Runner:
    """Where the tasks of a sweep with these options run: this process (neither ``devices`` nor
    ``client``), the host's GPUs or a Dask cluster; the runner knows the one GPU model it runs on
    (``model``), its TileLang arch and says where it is (``where``). ``real_gpu``: the bench step
    is tilelab's own, so the devices must be real GPUs of one model."""
    if opts.devices is None and opts.client is None:
        return InlineRunner(events, workers=opts.workers, target=opts.target, warm=warm_up_for(opts, real_gpu))
    if opts.client is not None:
        runner = DaskRunner(opts.client, events)
        if not real_gpu:
            runner.where = f"Dask, {len(runner.gpu_workers)} bench workers"
            return runner
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
        runner.model = check_one_model({w: m for w, (m, _) in found.items()})
        runner.arch = next(iter(found.values()))[1]
        runner.where = f"Dask, {len(runner.gpu_workers)} GPU workers"
        return runner
    assert opts.devices is not None  # neither devices nor client: the InlineRunner above
    indices = local_devices(opts.devices, need_cuda=real_gpu)
    model, arch = "", None
    if real_gpu:
        import torch

        from ... import _tilelang

        model = check_one_model({f"cuda:{d}": torch.cuda.get_device_name(d) for d in indices})
        with torch.cuda.device(indices[0]):
            arch = _tilelang.local_gpu_arch()
    local = LocalRunner(indices, events, workers=opts.workers, use_cuda=real_gpu, warm=warm_up_for(opts, real_gpu))
    local.model, local.arch = model, arch
    return local
