"""A halving sweep compiles each configuration once, and a sweep on a GPU starts each GPU's launch
worker while its first configurations compile. Fake compile and bench steps on the CPU: what is
tested is the sweep's course (which step ran how often, with which artifact, in which order)."""

from __future__ import annotations

import threading
import time

import pytest
from fake_gpu import timed

from tilelab.launch.sweep import SweepOptions, _halving, _pool, _runners, _tasks, sweep

BLOCKS = [16, 32, 64, 96, 128, 160, 192, 256, 512]
TRUE_MS = {b: 1.0 + abs(b - 128) / 512 for b in BLOCKS}  # block=128 is the fastest; 512 fails to compile


def factory(N, block):
    return ("kernel", N, block)


class Steps:
    """A fake compile step that counts what it elaborates and compiles (each compile returns a new
    artifact object), and a fake bench step that records the artifact of every call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.elaborated: list[int] = []
        self.compiled: list[int] = []
        self.artifacts: dict[int, object] = {}  # block -> the artifact its compile returned
        self.benched: list[tuple[int, object, float | None]] = []  # (block, artifact, rep_ms)
        self.all_compiled = threading.Event()

    def compile_fn(self, f, size, config):
        with self.lock:
            self.elaborated.append(config["block"])

        def step():
            with self.lock:
                self.compiled.append(config["block"])
                if len(self.compiled) == len(BLOCKS):
                    self.all_compiled.set()
            if config["block"] == 512:
                raise RuntimeError("ptxas: too many resources requested")
            artifact = {"block": config["block"]}
            with self.lock:
                self.artifacts[config["block"]] = artifact
            return artifact

        return step

    def bench(self, artifact, size, config, **kwargs):
        with self.lock:
            self.benched.append((artifact["block"], artifact, kwargs.get("rep_ms")))
        return timed(TRUE_MS[artifact["block"]])


@pytest.fixture
def compile_in_threads(monkeypatch):
    """Compile steps in threads, not spawned processes (each costs seconds on a small machine):
    the counters and artifacts then live in this process."""
    monkeypatch.setattr(_tasks, "dumps", lambda obj: None)


@pytest.mark.parametrize("where", [{}, {"devices": [0]}], ids=["this process", "devices"])
def test_a_halving_sweep_compiles_each_configuration_once_and_later_rungs_time_that_artifact(where,
                                                                                          compile_in_threads):
    steps = Steps()
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, strategy="halving", prune=False, eta=2,
                  compile_fn=steps.compile_fn, bench_fn=steps.bench, progress=False, force=True, **where)
    assert table.best_config() == {"block": 128}
    # 8 compiled configurations: rungs of 8, 4 and 2 (the last with full rounds): 14 rows timed
    assert [rep for _, _, rep in steps.benched].count(None) == 2 and len(steps.benched) == 8 + 4 + 2
    assert sorted(steps.elaborated) == sorted(BLOCKS)  # each elaborated once ...
    assert sorted(steps.compiled) == sorted(BLOCKS)  # ... and compiled once, across all rungs
    for block, artifact, _ in steps.benched:  # every rung timed the artifact of that one compile
        assert artifact is steps.artifacts[block]
    again = [r for r in table.rows if r.ok and r.rung and r.rung > 0]
    assert again and all(r.compile_s is not None for r in again)  # rows keep their first compile's time
    (failed,) = [r for r in table.rows if not r.ok]
    assert failed.stage == "compile" and "too many resources" in failed.error and failed.rung == 0


def test_the_last_rung_times_beside_the_leader_s_own_artifact(monkeypatch, compile_in_threads):
    """The leader of the rung before is handed to each later rung as its rung's compile outcome
    (the artifact the bench steps timed), not compiled again."""
    steps = Steps()
    monkeypatch.setattr(_halving, "_side_by_side", lambda opts, pooled: True)
    leaders = []

    def leader_kernel(f, size, config, opts, compiled=None):
        leaders.append((config, compiled))
        return "the leader"

    monkeypatch.setattr(_halving, "_leader_kernel", leader_kernel)
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, strategy="halving", prune=False, eta=2,
                  devices=[0], compile_fn=steps.compile_fn, bench_fn=steps.bench, progress=False, force=True)
    assert table.best_config() == {"block": 128}
    assert len(leaders) >= 2  # nine configurations, eta=2: rungs 1, 2 and 3 each have one
    assert all(compiled.artifact is steps.artifacts[config["block"]] for config, compiled in leaders)
    assert leaders[-1][0] == {"block": 128}
    assert sorted(steps.compiled) == sorted(BLOCKS)


def test_a_leader_kept_as_a_compiled_artifact_loads_without_compiling(monkeypatch):
    from tilelab.launch.sweep._tasks import Compiled, KernelArtifact, KernelRecipe

    loaded = []
    monkeypatch.setattr(_tasks, "load_artifact", lambda artifact: loaded.append(artifact) or "loaded")
    monkeypatch.setattr(_tasks, "default_compile", lambda *a, **k: pytest.fail("compiled again"))
    artifact = KernelArtifact(KernelRecipe("{}", None, [2], "sm_90a", {}), ("key", {}))
    assert _halving._leader_kernel(factory, {"N": 1}, {"block": 128}, SweepOptions(),
                                   Compiled(0, artifact, 1.0)) == "loaded"
    assert loaded == [artifact]


class WarmUps:
    """A fake GPU warm-up and bench step that log, in order, which thread did what."""

    def __init__(self, fail: bool = False) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, object, str]] = []
        self.fail = fail

    def warm(self, device):
        with self.lock:
            self.log.append(("warm", device, threading.current_thread().name))
        if self.fail:
            raise RuntimeError("the launch worker could not start")

    def bench(self, artifact, size, config, **kwargs):
        with self.lock:
            self.log.append(("bench", artifact["block"], threading.current_thread().name))
        return timed(TRUE_MS[artifact["block"]])


def test_each_gpu_s_launch_worker_is_warmed_once_before_its_first_row(monkeypatch, compile_in_threads):
    fake = WarmUps()
    monkeypatch.setattr(_runners, "warm_up_for", lambda opts, real_gpu: fake.warm)
    steps = Steps()
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, devices=[0, 1], compile_fn=steps.compile_fn,
                  bench_fn=fake.bench, progress=False, force=True, finalists=0)
    assert sum(r.ok for r in table.rows) == len(BLOCKS) - 1
    warmed = [(device, thread) for kind, device, thread in fake.log if kind == "warm"]
    assert sorted(warmed) == [(0, "tilelab-bench-cuda:0"), (1, "tilelab-bench-cuda:1")]  # once per GPU, on its thread
    for _, thread in warmed:
        mine = [kind for kind, _, name in fake.log if name == thread]
        assert mine[0] == "warm"  # before any row on that GPU
    benched = [(block, thread) for kind, block, thread in fake.log if kind == "bench"]
    assert len(benched) == len(BLOCKS) - 1 and {t for _, t in benched} <= {t for _, t in warmed}


def test_in_this_process_the_first_row_waits_for_the_warm_up(monkeypatch, compile_in_threads):
    """The warm-up runs beside the compiles (here it outlasts them: it ends only once every
    configuration compiled) and the first row step waits for it."""
    fake = WarmUps()
    steps = Steps()

    def warm(device):
        fake.warm(device)
        assert steps.all_compiled.wait(60)  # a bound against a hang, not a synchronisation
        with fake.lock:
            fake.log.append(("warmed", device, threading.current_thread().name))

    monkeypatch.setattr(_runners, "warm_up_for", lambda opts, real_gpu: warm)
    monkeypatch.setattr(_runners.InlineRunner, "_current_gpu", staticmethod(lambda: 0))
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, compile_fn=steps.compile_fn, bench_fn=fake.bench,
                  progress=False)
    assert sum(r.ok for r in table.rows) == len(BLOCKS) - 1
    kinds = [kind for kind, _, _ in fake.log]
    assert kinds == ["warm", "warmed"] + ["bench"] * (len(BLOCKS) - 1)
    assert fake.log[0][1:] == (0, "tilelab-bench-warm-up")


@pytest.mark.parametrize("where", [{}, {"devices": [0, 1]}], ids=["this process", "devices"])
def test_a_warm_up_that_fails_does_not_fail_the_sweep(where, monkeypatch, compile_in_threads):
    fake = WarmUps(fail=True)
    monkeypatch.setattr(_runners, "warm_up_for", lambda opts, real_gpu: fake.warm)
    monkeypatch.setattr(_runners.InlineRunner, "_current_gpu", staticmethod(lambda: 0))
    steps = Steps()
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, strategy="halving", prune=False, eta=2,
                  compile_fn=steps.compile_fn, bench_fn=fake.bench, progress=False, force=True, **where)
    assert table.best_config() == {"block": 128}
    assert any(kind == "warm" for kind, _, _ in fake.log)
    assert not any("could not start" in (r.error or "") for r in table.rows)


def test_only_a_sweep_that_launches_in_tilelab_s_worker_on_a_gpu_warms_it(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a machine with a GPU
    gpu = SweepOptions()
    assert _runners.warm_up_for(gpu, real_gpu=True) is _tasks.warm_launch_worker
    assert _runners.warm_up_for(gpu, real_gpu=False) is None  # a custom bench step
    assert _runners.warm_up_for(SweepOptions(isolate=False), real_gpu=True) is None  # launches in this process
    assert _runners.warm_up_for(SweepOptions(bench_kwargs={"isolate": False}), real_gpu=True) is None
    assert _runners.warm_up_for(SweepOptions(target="c"), real_gpu=True) is None  # the CPU
    assert _runners.warm_up_for(SweepOptions(client=object()), real_gpu=True) is None  # Dask workers start their own
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _runners.warm_up_for(gpu, real_gpu=True) is None


def test_warming_a_launch_worker_never_raises(monkeypatch):
    import contextlib

    import torch

    from tilelab.launch import _worker

    tried = []

    class Broken:
        def warm(self, fn=None):
            tried.append(True)
            raise _worker.WorkerDied("the tilelab worker process for device 0 exited while starting")

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())  # as on a GPU
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(_worker, "default_worker", lambda device=None: Broken())
    monkeypatch.setattr(_tasks, "_in_daemon_process", lambda: False)
    assert _tasks.warm_launch_worker(0) is None and tried == [True]  # tried, failed, said nothing
    monkeypatch.setattr(_tasks, "_in_daemon_process", lambda: True)  # a Dask worker launches in itself
    assert _tasks.warm_launch_worker(0) is None and tried == [True]


def test_a_sweep_over_devices_submits_each_compile_as_soon_as_it_is_elaborated(monkeypatch, compile_in_threads):
    """The first compile task (and with it the pool's first process, seconds of start and imports)
    starts while the other configurations are still being elaborated, not after all of them."""
    log = []
    steps = Steps()

    def compile_fn(f, size, config):
        log.append(("elaborated", config["block"]))
        return steps.compile_fn(f, size, config)

    submit = _runners.LocalRunner.compile

    def compile_task(self, index, step):
        log.append(("submitted", index))
        return submit(self, index, step)

    monkeypatch.setattr(_runners.LocalRunner, "compile", compile_task)
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, devices=[0], compile_fn=compile_fn,
                  bench_fn=steps.bench, progress=False, force=True)
    assert sum(r.ok for r in table.rows) == len(BLOCKS) - 1
    assert log == [event for i, block in enumerate(BLOCKS) for event in (("elaborated", block), ("submitted", i))]


def _script_step():
    """A compile step as a caller's script defines it (re-homed to ``__main__`` below)."""
    import sys

    main = sys.modules.get("__main__")
    return {"block": 7, "main": getattr(main, "__file__", None), "spec": getattr(getattr(main, "__spec__", None),
                                                                               "name", None)}


def test_a_compile_process_started_while_a_worker_hides_the_callers_script_still_runs_its_steps():
    """A bench thread starting its launch worker hides ``__main__`` for a moment (the worker must
    not run the caller's script); a compile process the pool starts in that moment does not import
    the script either, and needs nothing from it: its step comes pickled by cloudpickle, which
    carries a function of the script by value. So compile submits take no lock against a worker's
    start (one would hold the worker back while the first submit waits for the forkserver)."""
    import concurrent.futures
    import multiprocessing
    import pickle
    import types

    from tilelab.launch import _worker

    step = types.FunctionType(_script_step.__code__, {"__name__": "__main__", "__builtins__": __builtins__},
                              "step_of_the_script")
    step.__module__ = "__main__"
    step.__qualname__ = "step_of_the_script"
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(step)  # by reference: only a process that imported the script could load it
    blob = _tasks.dumps(step)
    started = []

    class Starting:  # a worker's start: the pool's process is spawned while __main__ is hidden
        def start(self):
            import __main__

            started.append(__main__.__dict__.get("__spec__", "kept"))
            started.append(pool.submit(_tasks.compile_pickled, 3, blob))

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        _worker._start_without_main(Starting())
        out = started[1].result(timeout=600)
    assert started[0] is None  # hidden while the process started
    assert out.error is None and out.artifact["block"] == 7
    import __main__

    caller = getattr(__main__, "__file__", None)  # None where the test runner's main has no file
    assert caller is None or out.artifact["main"] != caller  # the caller's script was not imported there
    assert not _worker.MAIN_HIDDEN.locked()


# ---------------------------------------------------------------------------------------------
# The compile pool: as many processes as compile tasks, up to 1.5x the cores; a kept pool serves
# ---------------------------------------------------------------------------------------------


def test_a_compile_pool_is_sized_by_the_compile_tasks_the_cores_and_the_memory():
    size, big = _pool.compile_pool_size, 128 << 30
    assert size(18, cpus=16, memory_bytes=big) == 18  # every compile at once, none waits for another
    assert size(64, cpus=16, memory_bytes=big) == 24  # at most 1.5x the cores
    assert size(3, cpus=16, memory_bytes=big) == 3  # no more processes than tasks
    assert size(5, cpus=1, memory_bytes=big) == 2  # ceil(1.5)
    assert size(0, cpus=16, memory_bytes=big) == 1
    assert size(64, cpus=16, memory_bytes=16 << 30) == 8  # half of 16 GB, at 1 GB a process
    assert size(64, cpus=16, workers=4, memory_bytes=big) == 4  # the user's workers= decides
    assert size(2, cpus=16, workers=12, memory_bytes=big) == 12


class FakePool:
    """A process pool that runs each task at once, here, and remembers its size and its shutdown."""

    def __init__(self, max_workers, mp_context=None, initializer=None):
        self.max_workers, self.stopped = max_workers, False

    def submit(self, fn, *args):
        import concurrent.futures

        done = concurrent.futures.Future()
        done.set_result(fn(*args))
        return done

    def shutdown(self, wait=True, cancel_futures=False):
        self.stopped = True


def test_a_kept_compile_pool_big_enough_serves_the_next_sweep(monkeypatch):
    monkeypatch.setattr(_pool, "_POOLS", {})
    monkeypatch.setattr(_pool, "ProcessPoolExecutor", FakePool)
    monkeypatch.setattr(_pool, "_pool_context", lambda: None)  # no forkserver for a fake pool
    first = _pool.compile_pool(18, exact=False)
    assert first.max_workers == 18
    assert _pool.compile_pool(6, exact=False) is first  # fewer tasks: the kept pool serves, no spawn
    assert _pool.compile_pool(18, exact=False) is first
    bigger = _pool.compile_pool(24, exact=False)
    assert bigger is not first and bigger.max_workers == 24
    assert first.stopped and list(_pool._POOLS) == [24]  # the smaller pool's idle processes go
    mine = _pool.compile_pool(4)  # the user's workers=4: at most 4 compiles at once, its own pool
    assert mine.max_workers == 4 and not bigger.stopped
    assert _pool.compile_pool(4) is mine and _pool.compile_pool(20, exact=False) is bigger


def compile_block(block):
    if block == 512:
        raise RuntimeError("ptxas: too many resources requested")
    return {"block": block}


def test_a_sweep_over_devices_asks_for_as_many_compile_processes_as_it_has_compile_tasks(monkeypatch):
    import functools
    import os

    asked = []
    monkeypatch.setattr(_pool, "compile_pool",
                        lambda workers, exact=True: asked.append((workers, exact)) or FakePool(workers))
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(_pool, "_host_memory", lambda: 128 << 30)
    steps = Steps()
    compile_fn = lambda f, size, config: functools.partial(compile_block, config["block"])  # noqa: E731
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, strategy="halving", prune=False, eta=2, devices=[0],
                  compile_fn=compile_fn, bench_fn=steps.bench, progress=False, force=True)
    assert table.best_config() == {"block": 128}
    assert asked == [(9, False)]  # rung 0: the nine compile at once; later rungs compile nothing
    sweep(factory, {"block": BLOCKS[:3]}, {"N": [1024]}, devices=[0], compile_fn=compile_fn, bench_fn=steps.bench,
          progress=False, force=True, workers=2, finalists=0)
    assert asked[-1] == (2, True)  # workers=2: exactly that


class WaitingPool:
    """A process pool whose first submit waits, as a forkserver still importing torch and TileLang
    makes ``ProcessPoolExecutor.submit`` wait for the first process; later tasks run at once."""

    def __init__(self, release: threading.Event, finish_first: bool = False):
        self.release, self.waiting, self.sent = release, threading.Event(), []
        self.finish_first = finish_first  # else the first task is left pending (a stop must cancel it)

    def submit(self, fn, *args):
        import concurrent.futures

        fut = concurrent.futures.Future()
        self.sent.append(fut)
        if len(self.sent) == 1:
            self.waiting.set()
            assert self.release.wait(120), "the first submit was never released"
            if not self.finish_first:
                return fut
        fut.set_result(fn(*args))
        return fut

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def test_configurations_elaborate_and_compile_here_while_the_compile_pool_starts(monkeypatch):
    """The first submit waits for the pool's first process (the forkserver's imports: seconds):
    meanwhile the caller elaborates every other configuration, and threads of this process compile
    what waits; the pool takes the rest once its process is there, and nothing compiles twice."""
    import functools

    release = threading.Event()
    pool = WaitingPool(release, finish_first=True)
    monkeypatch.setattr(_pool, "compile_pool", lambda workers, exact=True: pool)
    _COMPILED_IN.clear()
    _COMPILED_IN.update(release=release, pool=pool)
    elaborated = []

    def compile_fn(f, size, config):  # a step the pool can take (pickled), as tilelab's own
        elaborated.append(config["block"])
        return functools.partial(compile_noting_the_thread, config["block"])

    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, devices=[0], compile_fn=compile_fn,
                  bench_fn=Steps().bench, progress=False, force=True, finalists=0)
    # the pool's first task waited for the release, which only the early compiles give: all but
    # that one were compiled in threads of this process (the fake pool's assert says so if never)
    assert release.is_set() and len(elaborated) == len(BLOCKS)
    where = {block: thread for block, thread in _COMPILED_IN.items() if isinstance(block, int)}
    assert sorted(where) == sorted(BLOCKS)  # each compiled once
    threads = sorted(where.values())
    assert threads.count("tilelab-compile-send") == 1  # the pool's one (the fake runs it in the sender)
    assert all(t.startswith("tilelab-compile-early") for t in threads if t != "tilelab-compile-send")
    assert {dict(r.config)["block"] for r in table.rows if r.ok} == set(BLOCKS) - {512}
    assert table.best_config() == {"block": 128}


_COMPILED_IN: dict = {}  # block -> the name of the thread that compiled it


def compile_noting_the_thread(block):
    """A compile step (picklable) that notes where it ran; an early one first waits until the pool
    was handed its first task (so both kinds happen, whichever thread is quicker), and the last
    early one lets the pool go."""
    if threading.current_thread().name.startswith("tilelab-compile-early"):
        assert _COMPILED_IN["pool"].waiting.wait(120)
    _COMPILED_IN[block] = threading.current_thread().name
    if sum(1 for k in _COMPILED_IN if isinstance(k, int)) == len(BLOCKS) - 1:
        _COMPILED_IN["release"].set()
    return compile_block(block)


def test_a_warm_compile_pool_takes_every_task(monkeypatch):
    """A kept pool whose processes run already answers at once: nothing compiles here."""
    import functools

    pool = FakePool(4)
    pool._processes = {1: object()}  # started by an earlier sweep
    monkeypatch.setattr(_pool, "compile_pool", lambda workers, exact=True: pool)
    sent = []
    submit = pool.submit
    monkeypatch.setattr(pool, "submit", lambda fn, *args: sent.append(args[0]) or submit(fn, *args))
    table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, devices=[0],
                  compile_fn=lambda f, size, config: functools.partial(compile_block, config["block"]),
                  bench_fn=Steps().bench, progress=False, force=True, finalists=0)
    assert sorted(sent) == list(range(len(BLOCKS))) and table.best_config() == {"block": 128}


_HOLD = threading.Event()  # the compile steps of the stop test below wait for it


def held_compile(block):
    assert _HOLD.wait(300)
    return compile_block(block)


@pytest.mark.stop_button
def test_a_stop_while_the_compile_pool_starts_cancels_every_task_sent_or_not(monkeypatch):
    """A stop while the first submit waits for the pool (and early compiles run here): the tasks
    not started are cancelled, the one handed to the pool is cancelled once the pool is there,
    nothing else is sent, every row is "not run" (measured by the next call)."""
    import _thread
    import functools

    release = threading.Event()
    pool = WaitingPool(release)
    monkeypatch.setattr(_pool, "compile_pool", lambda workers, exact=True: pool)
    _HOLD.clear()
    elaborated = []

    def compile_fn(f, size, config):
        elaborated.append(config["block"])
        return functools.partial(held_compile, config["block"])

    def stop_while_the_first_submit_waits():
        assert pool.waiting.wait(300)
        while len(elaborated) < len(BLOCKS):
            time.sleep(0.01)
        _thread.interrupt_main()  # the stop button

    threading.Thread(target=stop_while_the_first_submit_waits, daemon=True).start()
    try:
        table = sweep(factory, {"block": BLOCKS}, {"N": [1024]}, devices=[0], compile_fn=compile_fn,
                      bench_fn=Steps().bench, progress=False, force=True, finalists=0)
    finally:
        _HOLD.set()  # the early compiles running here finish (a thread cannot be stopped)
    assert [r.stage for r in table.rows] == ["not run"] * len(BLOCKS), [(r.stage, r.error) for r in table.rows]
    release.set()  # the pool's first process is ready now: the task it was handed is cancelled
    deadline = time.monotonic() + 300
    while not pool.sent[0].cancelled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.sent[0].cancelled() and len(pool.sent) == 1  # and nothing else was sent


# ---------------------------------------------------------------------------------------------
# The compile pool's processes: forks of the caller on Linux (torch and TileLang imported already)
# ---------------------------------------------------------------------------------------------


def test_the_pool_forks_the_caller_on_linux_else_spawns():
    how = _pool.pool_start_method
    assert how("linux", ["fork", "spawn", "forkserver"]) == "fork"
    assert how("linux", ["spawn"]) == "spawn"
    assert how("win32", ["spawn"]) == "spawn"
    assert how("darwin", ["spawn", "fork", "forkserver"]) == "spawn"  # a fork of torch is not safe there
    # what the caller imports before the pool starts: what a compile needs, never the caller's script
    imports = _pool.COMPILE_IMPORTS
    assert "__main__" not in imports and {"torch", "tilelang", "tilelab.launch.sweep._tasks"} <= set(imports)


# A compile step as a notebook cell or a script's top level defines it: in module ``__main__``,
# which the compile process does not import (cloudpickle sends it by value).
_MAIN_STEP = """
def step():
    import os, sys
    import torch
    runners = sys.modules.get("tilelab.launch.sweep._runners")
    return {"pid": os.getpid(), "ppid": os.getppid(), "mark": getattr(runners, "_TEST_MARK", None),
            "cuda": torch.cuda.is_initialized(), "env": os.environ.get("TILELAB_TEST_POOL_ENV"),
            "nice": os.nice(0)}
"""


@pytest.mark.slow
def test_compile_processes_are_forks_of_the_caller_made_at_once_and_a_changed_environment_replaces_them(
        monkeypatch):
    """On Linux a new pool's processes are forks of the caller, made when the pool is (before any
    task): they hold what the caller held in memory then (a value no import could give them) and
    never start CUDA. A step defined in ``__main__`` (a notebook cell) compiles in one, at a lower
    priority than the caller. A changed environment replaces the kept pool with new forks."""
    import os
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("compile processes are forks of the caller on Linux only")
    _pool.shutdown_compile_pools()  # the kept pools of earlier tests: their processes end
    namespace: dict = {"__name__": "__main__"}
    exec(_MAIN_STEP, namespace)
    blob = _tasks.dumps(namespace["step"])
    monkeypatch.setattr(_pool, "_POOLS", {})
    monkeypatch.setattr(_runners, "_TEST_MARK", f"set in memory by {os.getpid()}", raising=False)
    try:
        pool = _pool.compile_pool(1)
        assert len(pool._processes) == 1  # forked already, before any task came
        first = pool.submit(_tasks.compile_pickled, 0, blob).result(timeout=300)
        assert first.error is None, first.error
        seen = first.artifact
        assert seen["pid"] != os.getpid() and seen["ppid"] == os.getpid()  # a child of this process
        assert seen["mark"] == f"set in memory by {os.getpid()}"  # this process's memory: a fork
        assert not seen["cuda"]  # a compile never starts CUDA
        # compiles yield the cores to the launches and the notebook (as `nice make -j`)
        assert seen["nice"] == min(19, os.nice(0) + _pool.COMPILE_NICENESS)
        monkeypatch.setenv("TILELAB_TEST_POOL_ENV", "changed")
        again = _pool.compile_pool(1).submit(_tasks.compile_pickled, 1, blob).result(timeout=300)
        assert again.error is None, again.error
        assert again.artifact["env"] == "changed" and again.artifact["pid"] != seen["pid"]  # a new pool
        assert again.artifact["ppid"] == os.getpid()
    finally:
        _pool.shutdown_compile_pools()


def test_the_last_rung_side_by_side_skips_the_steady_warm_up_and_keeps_full_rounds():
    from tilelab.launch import BenchOptions
    from tilelab.launch._ratio import resolved_for_ratio

    leader = object()
    kwargs = _halving.side_by_side_bench_kwargs(SweepOptions(), leader)
    assert kwargs.pop("baseline") is leader
    opts = resolved_for_ratio(BenchOptions(**kwargs))
    # steady=False alone would measure one round of 100 ms; the ratio keeps 1 s rounds to +-0.2%
    assert (opts.steady, opts.rep_ms, opts.ci_target) == (False, 1000.0, 0.002)
    assert resolved_for_ratio(BenchOptions(steady=False)).rep_ms == 100.0
    mine = _halving.side_by_side_bench_kwargs(SweepOptions(bench_kwargs={"rep_ms": 300, "ci_target": 0.01}), leader)
    assert (mine["steady"], mine["rep_ms"], mine["ci_target"]) == (False, 300, 0.01)
    kept = _halving.side_by_side_bench_kwargs(SweepOptions(bench_kwargs={"steady": True}), leader)
    assert kept == {"steady": True, "baseline": leader}  # the user's steady= stands
    # the brief rungs: one short round, no steady warm-up, as before
    assert _halving.rung_bench_kwargs(SweepOptions(), 1)["steady"] is False
