"""Sweeps over several GPUs and over a Dask cluster, on the CPU: fake compile and bench steps stand
in for TileLang and the GPU, so what is tested is the distribution itself (which task ran where,
the merged table, failures, interruption and resume, the dashboard)."""

from __future__ import annotations

import _thread
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_gpu import timed

from tilelab.launch import BenchResult, SweepRow, SweepTable
from tilelab.launch.sweep import _final, _plan, _pool, _rowcache, _runners, _show, _tasks, sweep

TIMINGS = {16: 3.0, 32: 1.0, 64: 2.0, 128: 1.5, 256: 9.0}
PARAMS = {"block": [8, 16, 32, 64, 128, 256]}
SIZES = {"N": [1024, 2048]}


def factory(N, block, dtype="float16"):
    return ("kernel", N, block, dtype)


def _compile(block):
    """A compile task: runs wherever the sweep sends compiles; says where that was."""
    if block == 256:
        raise RuntimeError("ptxas: too many resources requested")
    return {"block": block, "pid": os.getpid(), "where": _tasks.where_am_i()}


def fake_compile(factory, size, config):
    if config["block"] == 8:  # elaboration happens in the caller, before any task
        raise ValueError("block 8 does not fit the tile")
    return functools.partial(_compile, config["block"])


class Recorder:
    """The bench step: records the artifact, the thread and the Dask worker of every call."""

    def __init__(self, barrier: threading.Barrier | None = None, on_call=None):
        self.calls, self.lock, self.barrier, self.on_call = [], threading.Lock(), barrier, on_call
        self.waited: set[str] = set()

    def __call__(self, artifact, size, config, **kwargs):
        if callable(artifact):  # a baseline's callable
            return BenchResult(kwargs["name"], samples_ms=(0.5,) * 3, flops=kwargs.get("flops"))
        me = threading.current_thread().name
        with self.lock:
            self.calls.append((artifact, dict(size), me, _tasks.where_am_i(), kwargs))
            first = me not in self.waited
            self.waited.add(me)
        if self.barrier is not None and first:
            self.barrier.wait()  # both GPUs hold a configuration at the same time, or this times out
        if self.on_call is not None:
            self.on_call(artifact, size)
        if artifact["block"] == 128 and size["N"] == 2048:
            raise RuntimeError("bench exploded")
        return timed(TIMINGS[artifact["block"]] * size["N"] / 1024,
                           flops=kwargs.get("flops"))


@pytest.fixture
def compile_in_threads(monkeypatch):
    """Compile steps in threads, not spawned processes: the process pool has its own test, and each
    spawned process costs seconds on a small machine."""
    monkeypatch.setattr(_tasks, "dumps", lambda obj: None)


def _by(table: SweepTable) -> dict[tuple[int, int], SweepRow]:
    return {(dict(r.size)["N"], dict(r.config)["block"]): r for r in table.rows if r.label is None}


def _check_merged_table(table: SweepTable) -> None:
    rows = _by(table)
    assert [(dict(r.size)["N"], dict(r.config)["block"]) for r in table.rows if r.label is None] == [
        (n, b) for n in SIZES["N"] for b in PARAMS["block"]]  # job order, whatever order they finished in
    assert {k: r.stage for k, r in rows.items() if not r.ok} == {
        (1024, 8): "elaborate", (2048, 8): "elaborate", (1024, 256): "compile", (2048, 256): "compile",
        (2048, 128): "bench"}
    assert "does not fit the tile" in rows[(1024, 8)].error and "too many resources" in rows[(1024, 256)].error
    assert "bench exploded" in rows[(2048, 128)].error
    assert {n: dict(table.best({"N": n}).config)["block"] for n in SIZES["N"]} == {1024: 32, 2048: 32}
    assert rows[(2048, 32)].median_ms == pytest.approx(2.0)
    assert rows[(2048, 32)].tflops == pytest.approx(2 * 2048 / 2e-3 / 1e12)
    for r in table.rows:
        if r.ok and r.label is None:
            assert r.compile_s is not None and r.bench_s is not None and r.device
    # the dashboard: the best configuration as a call that rebuilds it
    call = table.best_call({"N": 2048})
    assert call == "factory(N=2048, block=32)"
    assert eval(call, {"factory": factory}) == factory(N=2048, block=32)
    assert SweepTable.from_dict(table.to_dict()) == table


# ---------------------------------------------------------------------------------------------
# devices=: the host's GPUs
# ---------------------------------------------------------------------------------------------


def test_devices_compile_in_processes_and_bench_on_each_gpu_at_once():
    bench = Recorder(barrier=threading.Barrier(2, timeout=60))
    table = sweep(factory, PARAMS, SIZES, devices=[0, 1], compile_fn=fake_compile, bench_fn=bench,
                  flops=lambda N: 2.0 * N, workers=2, progress=False, force=True, finalists=0)
    _check_merged_table(table)
    compiled_in = {artifact["pid"] for artifact, *_ in bench.calls}
    assert os.getpid() not in compiled_in  # compile tasks ran in the process pool
    threads = {thread for _, _, thread, _, _ in bench.calls}
    assert threads == {"tilelab-bench-cuda:0", "tilelab-bench-cuda:1"}
    devices = {r.device for r in table.rows if r.ok}
    assert devices == {"cuda:0", "cuda:1"}
    assert len(bench.calls) == 8  # 12 rows: 2 never elaborated, 2 failed to compile, 8 benchmarked
    text = repr(table)
    assert "compile s" in text and "bench s" in text and "device" in text
    assert "best at 2048: factory(N=2048, block=32)" in text
    # The next sweep compiles in the same processes: no new spawn (seconds of imports) per sweep.
    again = Recorder()
    sweep(factory, {"block": [16, 32, 64]}, {"N": [1024]}, devices=[0], compile_fn=fake_compile, bench_fn=again,
          workers=2, progress=False, force=True)
    # (which of the pool's processes takes a task depends on the machine's load: compare with the
    # pool's processes, not with those that happened to compile in the first sweep)
    kept = {pid for _, _, pool in _pool._POOLS.values() for pid in pool._processes}
    assert compiled_in <= kept
    assert {artifact["pid"] for artifact, *_ in again.calls} <= kept
    _pool.shutdown_compile_pools()
    after = Recorder()
    sweep(factory, {"block": [16]}, {"N": [1024]}, devices=[0], compile_fn=fake_compile, bench_fn=after,
          workers=2, progress=False, force=True)
    assert {artifact["pid"] for artifact, *_ in after.calls}.isdisjoint(kept)  # a fresh pool


def _versioned_step(factory, size, config):
    import stepmod

    return functools.partial(stepmod.make, config["block"])


def test_a_kept_compile_process_never_compiles_old_code(tmp_path, monkeypatch):
    """The compile processes kept between sweeps are replaced when a folder joins sys.path or a
    module of the user's is edited: the second sweep compiles what the notebook now has."""
    (tmp_path / "stepmod.py").write_text("import os\nVERSION = 1\n\ndef make(block):\n"
                                         "    return {'block': block, 'pid': os.getpid(), 'version': VERSION}\n")
    first = Recorder()
    sweep(factory, {"block": [32]}, {"N": [1024]}, devices=[0], compile_fn=fake_compile, bench_fn=first,
          workers=1, progress=False, force=True)
    monkeypatch.syspath_prepend(str(tmp_path))  # after the pool started: its processes cannot see it
    import importlib

    import stepmod

    second = Recorder()
    table = sweep(factory, {"block": [32]}, {"N": [1024]}, devices=[0], compile_fn=_versioned_step, bench_fn=second,
                  workers=1, progress=False, force=True)
    assert all(r.ok for r in table.rows), table
    assert [a["version"] for a, *_ in second.calls] == [1]
    (tmp_path / "stepmod.py").write_text((tmp_path / "stepmod.py").read_text().replace("VERSION = 1", "VERSION = 2"))
    later = time.time_ns() + 2_000_000_000
    os.utime(tmp_path / "stepmod.py", ns=(later, later))
    importlib.reload(stepmod)
    third = Recorder()
    sweep(factory, {"block": [32]}, {"N": [1024]}, devices=[0], compile_fn=_versioned_step, bench_fn=third,
          workers=1, progress=False, force=True)
    assert [a["version"] for a, *_ in third.calls] == [2]  # not the kept process's old copy
    assert {a["pid"] for a, *_ in third.calls}.isdisjoint({a["pid"] for a, *_ in second.calls})
    sys.modules.pop("stepmod", None)


def _stuck(path, block):
    Path(path).write_text(str(os.getpid()))
    time.sleep(120)  # a compile that hangs: only ending its process stops it


def _stuck_step(path):
    return lambda factory, size, config: functools.partial(_stuck, path, config["block"])


@pytest.mark.stop_button
def test_an_interrupt_ends_a_running_compile_and_the_next_sweep_starts_afresh(tmp_path):
    marker = tmp_path / "pid"
    def stop_once_it_hangs():
        # the compile process writes the marker when it runs: only then is it a running compile
        # (the cap only keeps a broken pool from hanging the test; starting one may take minutes
        # on a busy machine)
        deadline = time.monotonic() + 900
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _thread.interrupt_main()  # the stop button, while the compile hangs

    threading.Thread(target=stop_once_it_hangs, daemon=True).start()
    table = sweep(factory, {"block": [32]}, {"N": [1024]}, devices=[0], compile_fn=_stuck_step(str(marker)),
                  bench_fn=Recorder(), workers=1, progress=False, force=True)
    assert table.rows[0].stage == "not run" and "interrupted" in table.rows[0].error
    stuck = int(marker.read_text())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # terminated: gone once its parent has reaped it
        try:
            os.kill(stuck, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the hung compile process {stuck} is still running after the interrupt")
    after = Recorder()
    sweep(factory, {"block": [16]}, {"N": [1024]}, devices=[0], compile_fn=fake_compile, bench_fn=after,
          workers=1, progress=False, force=True)
    assert [a["block"] for a, *_ in after.calls] == [16] and after.calls[0][0]["pid"] != stuck


def test_unpicklable_compile_steps_run_in_threads(compile_in_threads):  # as if neither pickle nor cloudpickle could
    bench = Recorder()
    table = sweep(factory, PARAMS, SIZES, devices=[0], compile_fn=fake_compile, bench_fn=bench,
                  flops=lambda N: 2.0 * N, workers=2, progress=False, force=True)
    _check_merged_table(table)
    assert {artifact["pid"] for artifact, *_ in bench.calls} == {os.getpid()}


def test_devices_are_checked_by_name():
    for bad, words in (("some", '"all" or a list'), ([], "names no GPU"), ([0, 0], "each GPU once"),
                       (["x"], '"all" or a list')):
        with pytest.raises(_runners.DevicesError, match=words):
            sweep(factory, PARAMS, SIZES, devices=bad, compile_fn=fake_compile, bench_fn=Recorder(), progress=False)
    with pytest.raises(ValueError, match="not both"):
        sweep(factory, PARAMS, SIZES, devices=[0], client=object(), bench_fn=Recorder(), progress=False)


@pytest.mark.skipif(_tasks.probe_device()[0] != "", reason="this machine has a GPU")
def test_all_devices_without_a_gpu_says_what_still_works():
    from tilelab.records.errors import NoGpuError

    with pytest.raises(NoGpuError, match="Inspection still works"):
        sweep(factory, PARAMS, SIZES, devices="all", progress=False)


def test_gpus_of_different_models_are_refused_not_averaged():
    assert _runners.check_one_model({"cuda:0": "NVIDIA H100", "cuda:1": "NVIDIA H100"}) == "NVIDIA H100"
    with pytest.raises(_runners.MixedDevicesError) as info:
        _runners.check_one_model({"cuda:0": "NVIDIA H100 80GB HBM3", "cuda:1": "NVIDIA A100-SXM4-40GB"})
    message = str(info.value)
    assert "cuda:0: NVIDIA H100 80GB HBM3" in message and "cuda:1: NVIDIA A100-SXM4-40GB" in message
    assert "devices=[...]" in message


# ---------------------------------------------------------------------------------------------
# Progress: one bar; in a notebook the table grows as rows finish
# ---------------------------------------------------------------------------------------------


def test_one_bar_and_a_table_that_grows_row_by_row(monkeypatch, record_progress, compile_in_threads):
    bars, live = record_progress(_show), []

    class Live:
        def __init__(self, enabled):
            pass

        def update(self, table, final=False):
            live.append(None if final else len(table().rows))

    monkeypatch.setattr(_show, "LiveTable", Live)
    table = sweep(factory, PARAMS, SIZES, devices=[0, 1], compile_fn=fake_compile, bench_fn=Recorder(),
                  baseline={"torch.matmul": lambda N: (lambda: None)}, workers=2, progress=True, force=True,
                  finalists=0)  # the final round's own bar is tested with it
    (bar,) = bars
    assert (bar.total, bar.updates, bar.closed) == (12 + 2, 12 + 2, True)
    assert "12 configurations on cuda:0, cuda:1" in bar.desc
    assert live == list(range(1, 13)) + [None]  # one more row each time, then the cell's own table
    assert len(table.baselines) == 2 and all(b.ok for b in table.baselines)


def test_baselines_are_rated_with_the_kernels_counted_work(compile_in_threads):
    bench = Recorder()

    def base_bench(artifact, size, config, **kwargs):
        if config == {} and "name" in kwargs:
            bench.calls.append(("baseline", dict(size), kwargs))
            return BenchResult(kwargs["name"], samples_ms=(0.5,) * 3, flops=kwargs.get("flops"))
        return bench(artifact, size, config, **kwargs)

    table = sweep(factory, PARAMS, SIZES, devices=[0], compile_fn=fake_compile, bench_fn=base_bench,
                  flops=lambda N: 2.0 * N**3, baseline={"torch.matmul": lambda N: (lambda: None)}, progress=False,
                  force=True)
    seen = {c[1]["N"]: c[2] for c in bench.calls if c[0] == "baseline"}
    assert seen[1024]["flops"] == 2.0 * 1024**3 and seen[2048]["flops"] == 2.0 * 2048**3
    base = {dict(r.size)["N"]: r for r in table.baselines}
    assert base[1024].tflops == pytest.approx(2.0 * 1024**3 / 0.5e-3 / 1e12) and base[1024].label == "torch.matmul"
    assert not any(r.best for r in table.baselines)


# ---------------------------------------------------------------------------------------------
# Interrupt and resume
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def stop_button(monkeypatch):
    """``press()``, from a thread the sweep runs (a bench step): what the stop button does, a
    KeyboardInterrupt in the notebook's thread; then the step waits until the sweep has taken the
    stop (it cancels its runner), so the configuration is still being timed when the stop lands,
    however busy the machine is."""
    taken = threading.Event()
    close = _runners.LocalRunner.close

    def closing(self, cancel=False):
        if cancel:
            taken.set()
        return close(self, cancel)

    monkeypatch.setattr(_runners.LocalRunner, "close", closing)

    def press():
        _thread.interrupt_main()
        assert taken.wait(timeout=300), "the sweep never took the stop"

    return press


@pytest.mark.stop_button
def test_an_interrupted_sweep_keeps_its_rows_and_resumes_from_the_row_cache(compile_in_threads, stop_button):
    def stop_at_64(artifact, size):
        if artifact["block"] == 64 and size["N"] == 1024:
            stop_button()  # still timing this one when the interrupt lands

    first = Recorder(on_call=stop_at_64)
    kwargs = dict(compile_fn=fake_compile, flops=lambda N: 2.0 * N, workers=1, progress=False)
    table = sweep(factory, PARAMS, SIZES, devices=[0], bench_fn=first, **kwargs)
    rows = _by(table)
    not_run = {k for k, r in rows.items() if r.stage == "not run"}
    assert not_run and all("interrupted" in rows[k].error for k in not_run)
    assert any("resumes" in n for n in table.notes)
    finished = {k for k, r in rows.items() if r.stage != "not run"}
    assert {(1024, 8), (1024, 16), (1024, 32)} <= finished

    second = Recorder()
    table = sweep(factory, PARAMS, SIZES, devices=[0], bench_fn=second, **kwargs)
    _check_merged_table(table)
    rows = _by(table)
    cached = {k for k, r in rows.items() if r.cached}
    # every finished row came back from the cache, except bench failures (measured again)
    assert {k for k in finished if rows[k].stage != "bench"} <= cached
    benched_again = {(s["N"], a["block"]) for a, s, *_ in second.calls}
    assert not benched_again & cached
    assert benched_again | cached >= {k for k, r in rows.items() if r.stage not in ("elaborate", "compile")}
    assert "from the row cache" in repr(table) and "cached" in repr(table)

    third = Recorder()
    table = sweep(factory, PARAMS, SIZES, devices=[0], bench_fn=third, force=True, **kwargs)
    assert not any(r.cached for r in table.rows) and len(third.calls) == 8


def test_a_stop_that_lands_while_a_finished_row_is_handled_keeps_that_row(compile_in_threads, monkeypatch, tmp_path):
    # The stop button raises KeyboardInterrupt wherever the sweep's thread is; here, on a loaded
    # machine, while it files a row that has finished (between caching it and adding it to the table).
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    put = _rowcache.RowCache.put
    pressed = []

    def put_then_stop(self, key, row):
        put(self, key, row)
        if dict(row.config).get("block") == 32 and not pressed:
            pressed.append(row)
            raise KeyboardInterrupt

    monkeypatch.setattr(_rowcache.RowCache, "put", put_then_stop)
    table = sweep(factory, PARAMS, {"N": [1024]}, devices=[0], compile_fn=fake_compile, bench_fn=Recorder(),
                  workers=1, progress=False, force=True, finalists=0)
    rows = _by(table)
    assert pressed and rows[(1024, 32)].ok and rows[(1024, 32)].median_ms == pytest.approx(TIMINGS[32])
    assert rows[(1024, 16)].ok and rows[(1024, 8)].stage == "elaborate"
    # what the stop left unfinished (whatever the bench thread got to by then) is "not run"
    assert all(r.stage != "not run" or "interrupted" in r.error for r in rows.values())
    assert any(n.startswith("interrupted after") for n in table.notes)


def _compile_or_hang(armed, marker, block):
    """A compile task that, while ``armed`` exists, hangs at block 64 once it has said which process runs it."""
    if block == 64 and os.path.exists(armed):
        Path(marker).write_text(str(os.getpid()))
        time.sleep(600)  # a compile that never ends by itself: the test kills its process
    return {"block": block, "pid": os.getpid(), "where": _tasks.where_am_i()}


def _killable_step(armed, marker):
    return lambda factory, size, config: functools.partial(_compile_or_hang, armed, marker, config["block"])


def _wait_for_file(path, what):
    # a handshake on a fact (the file exists once the compile runs), not a guess at a duration: the
    # cap only keeps a broken pool from hanging the test (starting one may take minutes when busy)
    deadline = time.monotonic() + 900
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never started")
        time.sleep(0.05)


def test_a_compile_process_killed_mid_sweep_keeps_the_finished_rows_and_the_next_call_works(tmp_path, monkeypatch):
    import signal

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    armed, marker = tmp_path / "armed", tmp_path / "pid"
    armed.write_text("")
    killed = {}

    def kill_the_compile_process():
        _wait_for_file(marker, "the compile of block=64")
        killed["pid"] = int(marker.read_text())
        os.kill(killed["pid"], signal.SIGKILL)  # from outside, as the OOM killer or `kill -9` would

    killer = threading.Thread(target=kill_the_compile_process, daemon=True)
    killer.start()
    first = Recorder()
    kwargs = dict(compile_fn=_killable_step(str(armed), str(marker)), flops=lambda N: 2.0 * N, workers=1,
                  progress=False, finalists=0)
    table = sweep(factory, {"block": [16, 32, 64]}, {"N": [1024]}, devices=[0], bench_fn=first, **kwargs)
    killer.join()
    rows = _by(table)
    # the configurations compiled before the kill were measured, and are in the table ...
    assert rows[(1024, 16)].ok and rows[(1024, 32)].ok
    assert rows[(1024, 16)].median_ms == pytest.approx(TIMINGS[16]) and rows[(1024, 32)].median_ms == pytest.approx(1.0)
    # ... the one whose process died says so, naming the process and the signal
    lost = rows[(1024, 64)]
    assert not lost.ok and lost.stage == "not run"
    assert f"pid {killed['pid']}, killed by SIGKILL" in lost.error and "compile process" in lost.error
    assert "the same call again compiles it" in lost.error
    assert sorted(a["block"] for a, *_ in first.calls) == [16, 32]
    # the finished rows are in the row cache, the lost one is not
    cached = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "sweeps").glob("*.json")]
    assert sorted(dict(r["config"])["block"] for r in cached) == [16, 32]

    # the next call works: a fresh compile process, the finished rows from the cache, the lost one measured
    armed.unlink()
    second = Recorder()
    table = sweep(factory, {"block": [16, 32, 64]}, {"N": [1024]}, devices=[0], bench_fn=second, **kwargs)
    rows = _by(table)
    assert all(r.ok for r in rows.values())
    assert rows[(1024, 16)].cached and rows[(1024, 32)].cached and not rows[(1024, 64)].cached
    assert [(a["block"], a["pid"] != killed["pid"]) for a, *_ in second.calls] == [(64, True)]
    assert rows[(1024, 64)].median_ms == pytest.approx(TIMINGS[64])
    assert dict(table.best().config) == {"block": 32}


def test_the_row_key_changes_with_the_factory_the_size_the_config_and_the_bench_options():
    from tilelab.launch import SweepOptions

    opts = SweepOptions(backend="tvm_ffi", out_idx=-1)

    def ident(f, bench_kwargs, model="NVIDIA H100", options=opts):
        return _rowcache.sweep_identity(f, options, model=model, bench_kwargs=bench_kwargs)

    base = ident(factory, {"mode": "sustained"})
    assert base == ident(factory, {"mode": "sustained", "isolate": True})  # how, not what, it measures
    assert base != ident(factory, {"mode": "graph"})
    assert base != ident(_compile, {"mode": "sustained"})
    assert base != ident(factory, {"mode": "sustained"}, model="NVIDIA H200")
    assert base != ident(factory, {"mode": "sustained"}, options=SweepOptions(backend="cython", out_idx=-1))
    assert base != ident(factory, {"mode": "sustained"}, options=SweepOptions(backend="tvm_ffi", out_idx=-1,
                                                                              ref=lambda a, b: a @ b))
    key = _rowcache.row_key(base, {"N": 1024}, {"block": 32})
    assert key != _rowcache.row_key(base, {"N": 2048}, {"block": 32})
    assert key != _rowcache.row_key(base, {"N": 1024}, {"block": 64})


# ---------------------------------------------------------------------------------------------
# TileLang's cache entry travels from the compile task to the bench task
# ---------------------------------------------------------------------------------------------


def test_a_kernel_cache_entry_is_packed_and_installed_whole(tmp_path, monkeypatch):
    from tilelang.cache.kernel_cache import KernelCache

    from tilelab import _tilelang

    built = tmp_path / "there" / "kernels" / ("ab" * 32)
    built.mkdir(parents=True)
    files = {"executable.so": b"\x7fELF...", "params.json": b"[]", "manifest.json": b"{}"}
    for name, data in files.items():
        (built / name).write_bytes(data)

    class Kernel:
        _tilelang_cache_path = str(built)

    entry = _tilelang.kernel_cache_entry(Kernel())
    assert entry == ("ab" * 32, files)
    here = tmp_path / "here" / "kernels"
    monkeypatch.setattr(KernelCache, "_get_cache_root", staticmethod(lambda: str(here)))
    assert _tilelang.install_kernel_cache_entry(entry) is True
    assert {p.name: p.read_bytes() for p in (here / ("ab" * 32)).iterdir()} == files
    assert [p.name for p in here.iterdir()] == ["ab" * 32]  # no staging directory left behind
    assert _tilelang.install_kernel_cache_entry(entry) is False  # already there
    assert _tilelang.kernel_cache_entry(object()) is None
    with pytest.raises(ValueError, match="not a TileLang cache entry"):
        _tilelang.install_kernel_cache_entry(("../escape", files))


# ---------------------------------------------------------------------------------------------
# client=: a Dask cluster of CPU workers, one declaring "compile" and one "GPU"
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed", reason="Dask is the optional extra tilelab[cluster]")
    spec = {
        "cpu": {"cls": distributed.Worker, "options": {"nthreads": 1, "resources": {"compile": 1}}},
        "gpu": {"cls": distributed.Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}},
    }
    cluster = distributed.SpecCluster(workers=spec, scheduler={"cls": distributed.Scheduler,
                                                               "options": {"dashboard_address": ":0"}})
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


DASK_CALLS: list[tuple] = []  # what the bench tasks saw (Dask pickles the step: functions by reference)


def dask_bench(artifact, size, config, **kwargs):
    if callable(artifact):
        DASK_CALLS.append(("baseline", dict(size), _tasks.where_am_i(), kwargs))
        return BenchResult(kwargs["name"], samples_ms=(1.0,) * 3, flops=kwargs.get("flops"))
    DASK_CALLS.append((artifact, dict(size), _tasks.where_am_i(), kwargs))
    if artifact["block"] == 128 and size["N"] == 2048:
        raise RuntimeError("bench exploded")
    return timed(TIMINGS[artifact["block"]] * size["N"] / 1024, flops=kwargs.get("flops"))


def dask_flops(N):
    return 2.0 * N


def test_dask_compile_tasks_go_to_compile_workers_and_bench_tasks_to_gpu_workers(dask_client):
    DASK_CALLS.clear()
    table = sweep(factory, PARAMS, SIZES, client=dask_client, compile_fn=fake_compile, bench_fn=dask_bench,
                  flops=dask_flops, progress=False, force=True)
    _check_merged_table(table)
    assert len(DASK_CALLS) == 8
    assert {artifact["where"] for artifact, *_ in DASK_CALLS} == {"cpu"}  # compiled on the "compile" worker
    assert {where for _, _, where, _ in DASK_CALLS} == {"gpu"}  # benchmarked on the "GPU" worker
    assert {r.device for r in table.rows if r.ok} == {"gpu"}


def test_dask_sweep_resumes_and_baselines_run_on_gpu_workers(dask_client):
    kwargs = dict(client=dask_client, compile_fn=fake_compile, bench_fn=dask_bench, flops=dask_flops, progress=False,
                  baseline={"torch": lambda N: (lambda: None)})
    DASK_CALLS.clear()
    table = sweep(factory, PARAMS, SIZES, force=True, **kwargs)
    assert [c[2] for c in DASK_CALLS if c[0] == "baseline"] == ["gpu", "gpu"]
    assert [dict(b.size)["N"] for b in table.baselines] == [1024, 2048] and all(b.ok for b in table.baselines)
    DASK_CALLS.clear()
    table = sweep(factory, PARAMS, SIZES, **kwargs)
    _check_merged_table(table)
    assert all(r.cached for r in table.rows if r.label is None and r.stage != "bench")
    assert not any(r.cached for r in table.baselines)
    # only the bench failure and the baselines ran again
    assert sorted((c[1]["N"], str(c[0] if c[0] == "baseline" else c[0]["block"])) for c in DASK_CALLS) == [
        (1024, "baseline"), (2048, "128"), (2048, "baseline")]


def test_dask_gpu_workers_of_different_models_or_without_a_gpu_are_refused(dask_client, monkeypatch):
    def probe(models):  # client.run hands a function its worker when it takes dask_worker
        return lambda dask_worker: models[dask_worker.name]

    monkeypatch.setattr(_tasks, "probe_device",
                        probe({"gpu": ("NVIDIA H100", "sm_90a"), "cpu": ("NVIDIA A100", "sm_80")}))
    # with no "GPU" declared anywhere every worker may bench, so both are probed
    monkeypatch.setattr(_runners.DaskRunner, "__init__", _runner_without_resources)
    with pytest.raises(_runners.MixedDevicesError, match="NVIDIA A100.*NVIDIA H100|NVIDIA H100.*NVIDIA A100"):
        sweep(factory, PARAMS, SIZES, client=dask_client, compile_fn=fake_compile, progress=False)
    monkeypatch.setattr(_tasks, "probe_device", probe({"gpu": ("NVIDIA H100", "sm_90a"), "cpu": ("", None)}))
    with pytest.raises(_runners.DevicesError, match=r"see no CUDA GPU.*resources=\{'GPU': 1\}"):
        sweep(factory, PARAMS, SIZES, client=dask_client, compile_fn=fake_compile, progress=False)
    # every worker sees an H100, but one of them would time two configurations at once
    monkeypatch.setattr(_tasks, "probe_device", probe({"gpu": ("NVIDIA H100", "sm_90a"),
                                                            "cpu": ("NVIDIA H100", "sm_90a")}))
    monkeypatch.setattr(_runners.DaskRunner, "__init__", _runner_with_two_threads_on_cpu)
    with pytest.raises(_runners.DevicesError, match=r"several tasks at once.*resources=\{'GPU': 1\}"):
        sweep(factory, PARAMS, SIZES, client=dask_client, compile_fn=fake_compile, progress=False)


_original_init = _runners.DaskRunner.__init__


def _runner_without_resources(self, client, events):
    _original_init(self, client, events)
    self.compile_resources = self.bench_resources = None
    self.gpu_workers = list(client.scheduler_info()["workers"])


def _runner_with_two_threads_on_cpu(self, client, events):
    _runner_without_resources(self, client, events)
    workers = client.scheduler_info()["workers"]
    self.threads = {addr: 2 if w["name"] == "cpu" else 1 for addr, w in workers.items()}


# ---------------------------------------------------------------------------------------------
# The real compile step: compiled in one process, loaded in another without compiling again
# ---------------------------------------------------------------------------------------------

REAL_NVCC = Path(os.environ.get("TILELAB_TEST_CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"

_COMPILE_ELSEWHERE = """
import pickle, sys
sys.path.insert(0, sys.argv[2])
import gemm
from tilelab.launch.sweep import _tasks
step = _tasks.default_compile_step(gemm.matmul, {"M": 256, "N": 256, "K": 256},
                                        {"block_M": 128, "block_N": 128, "block_K": 32},
                                        backend="tvm_ffi", out_idx=-1, target="sm_90a")
step = pickle.loads(pickle.dumps(step))  # what a process pool or a Dask worker receives
done = _tasks.compile_task(0, step)
open(sys.argv[1], "wb").write(pickle.dumps(done))
"""


@pytest.mark.slow
@pytest.mark.skipif(not REAL_NVCC.exists(), reason=f"compiling needs nvcc; none at {REAL_NVCC}")
@pytest.mark.heavy
def test_a_kernel_compiled_elsewhere_loads_here_without_compiling(tmp_path, monkeypatch, nvcc_log):
    import pickle
    import subprocess
    import sys

    from tilelang.cache.kernel_cache import KernelCache

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "compile-host"), CUDA_HOME=str(REAL_NVCC.parents[1]),
               PATH=f"{REAL_NVCC.parent}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(root))
    out = tmp_path / "compiled.pkl"
    proc = subprocess.run([sys.executable, "-c", _COMPILE_ELSEWHERE, str(out), str(root / "examples")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = pickle.loads(out.read_bytes())
    assert done.error is None and done.compile_s > 0, done.error
    key, files = done.artifact.cache_entry
    assert {"executable.so", "params.json", "device_kernel.cu"} <= set(files)
    assert "wgmma" in files["device_kernel.cu"].decode() or "mma" in files["device_kernel.cu"].decode()

    # this process: nvcc is the recording shim (without a GPU), and TileLang's cache is empty
    calls_before = nvcc_log.read_text() if nvcc_log.exists() else ""
    here = tmp_path / "gpu-host" / "kernels"
    monkeypatch.setattr(KernelCache, "_get_cache_root", staticmethod(lambda: str(here)))
    prepared = _tasks.load_artifact(done.artifact)
    assert [p.name for p in prepared.params] == ["A", "B", "C"] and [p.name for p in prepared.outputs] == ["C"]
    assert (here / key / "executable.so").read_bytes() == files["executable.so"]
    assert (nvcc_log.read_text() if nvcc_log.exists() else "") == calls_before  # loaded, not compiled


def test_a_gpu_whose_context_is_lost_takes_no_more_work(compile_in_threads):
    from tilelab.launch._run import KernelLaunchError

    def sticky_at_16(artifact, size):
        if artifact["block"] == 16 and size["N"] == 1024:
            raise KernelLaunchError("gemm", "illegal_address", "an illegal memory access", sticky=True)

    bench = Recorder(on_call=sticky_at_16)
    table = sweep(factory, PARAMS, SIZES, devices=[0, 1], compile_fn=fake_compile, bench_fn=bench,
                  workers=1, progress=False, force=True)
    rows = _by(table)
    assert rows[(1024, 16)].stage == "bench" and "illegal memory access" in rows[(1024, 16)].error
    lost_on = rows[(1024, 16)].device
    after = [(s["N"], a["block"]) for a, s, thread, *_ in bench.calls if thread.endswith(lost_on)]
    assert after[-1] == (1024, 16)  # nothing more ran on that GPU
    assert {k for k, r in rows.items() if r.stage == "not run"} == set()  # the other GPU did the rest
    assert any(f"context of {lost_on} was lost" in n and "block=16 at size 1024" in n for n in table.notes)

    bench = Recorder(on_call=sticky_at_16)
    table = sweep(factory, PARAMS, SIZES, devices=[0], compile_fn=fake_compile, bench_fn=bench,
                  baseline={"torch": lambda N: (lambda: None)}, workers=1, progress=False, force=True)
    rows = _by(table)
    assert [(s["N"], a["block"]) for a, s, *_ in bench.calls] == [(1024, 16)]
    not_run = {k for k, r in rows.items() if r.stage == "not run"}
    assert not_run == {(1024, 32), (1024, 64), (1024, 128), (2048, 16), (2048, 32), (2048, 64), (2048, 128)}
    assert all("block=16 at size 1024" in rows[k].error for k in not_run)
    assert all(b.stage == "not run" for b in table.baselines)


def test_in_a_daemonic_dask_worker_launches_fall_back_to_the_worker_itself_and_say_so(monkeypatch):
    from tilelab.launch import _api

    seen = []

    def bench_with_isolation(kernel, *args, isolate=True, **kwargs):
        seen.append(isolate)
        return timed(1.0)

    plan = _tasks.BenchPlan(None, None, None, {"mode": "sustained"})
    job = _plan.Job(0, (("N", 64),), (("block", 32),))
    compiled = _tasks.Compiled(0, artifact="a kernel")
    monkeypatch.setattr(_tasks, "_in_daemon_process", lambda: True)
    monkeypatch.setattr(_api, "bench", bench_with_isolation)
    out = _tasks.bench_task(plan, job, compiled, device="worker-0")
    assert out.result is not None and seen == [False] and out.note == _tasks.DAEMON_NOTE
    assert "distributed.worker.daemon" in out.note
    # the user's own choice stands
    _tasks.bench_task(dataclasses_replace(plan, bench_kwargs={"isolate": True}), job, compiled, device="w")
    assert seen[-1] is True
    # tilelab.bench always offers the choice, so the fallback never asks whether it does
    import inspect

    monkeypatch.undo()
    assert "isolate" in inspect.signature(_api.bench).parameters
    monkeypatch.setattr(_tasks, "_in_daemon_process", lambda: False)
    monkeypatch.setattr(_api, "bench", bench_with_isolation)
    out = _tasks.bench_task(plan, job, compiled, device="worker-0")
    assert seen[-1] is True and out.note is None


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_the_live_table_updates_one_notebook_output_in_place(monkeypatch):
    import IPython
    import IPython.display

    class Handle:
        def __init__(self):
            self.shown = []

        def update(self, obj):
            self.shown.append(obj)

    handle = Handle()
    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Shell", (), {"kernel": object()})())
    monkeypatch.setattr(IPython.display, "display", lambda obj, display_id=None: handle if display_id else None)
    monkeypatch.setattr(_show, "LIVE_TABLE_EVERY_S", 0.0)
    live = _show.LiveTable(True)
    partial = SweepTable("k", (SweepRow((("block", 32),), (("N", 64),), median_ms=1.0),))
    live.update(lambda: partial)
    live.update(lambda: partial, final=True)
    # the table (as HTML: no plots drawn for every row), then cleared for the one the cell returns
    assert handle.shown[0].data == partial._repr_html_() and "block=32" in handle.shown[0].data
    assert handle.shown[1].data == ""
    # outside a notebook kernel (a terminal, a script) nothing is displayed
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert _show.LiveTable(True).handle is None


# ---------------------------------------------------------------------------------------------
# The final round: after a sweep over several devices, the leaders timed again on one device
# ---------------------------------------------------------------------------------------------

TRUE_MS = {32: 1.00, 64: 1.01, 16: 1.50}  # block 64 is truly 1% slower than block 32
FINAL_PARAMS = {"block": [32, 64, 16]}
FAST_BOARD = 0.98  # two GPUs of one model differ by about 1-2%


REF_MS = 2.0  # the true time of a baseline callable (rank_by="ratio")


class Boards:
    """A bench step whose figures depend on the board it runs on (the device in the bench thread's
    name): the device that first times ``lucky`` is 2% faster, the case that misleads a sweep (the
    truly slower configuration lands on the faster board). The first call of each bench thread at
    each size waits for the other GPU's, so the first two configurations of a size (32 and 64:
    the compiles finish in job order with one compile worker) run on different GPUs.

    A configuration's second call at a size is its final-round call; there the clock wanders from
    call to call (``final_clock``), as a power-capped GPU's does, so medians timed one after another
    mislead, while a ratio to a reference timed in the same window (``baseline=``: the leader's
    artifact, or a baseline callable) is the true one."""

    def __init__(self, lucky=64, pair=True, fail_final=None, on_final=None, boards_differ=True,
                 final_clock=(1.04, 0.95, 1.02, 0.97)):
        self.lucky, self.pair, self.fail_final, self.on_final = lucky, pair, fail_final, on_final
        self.boards_differ = boards_differ
        self.lock = threading.Lock()
        self.calls = []  # (block, N, thread, final)
        self.references = []  # (block, N, the reference's block or "callable") of each call given a baseline
        self.fast = None
        self.barriers = {}
        self.seen = set()
        self.final_clock = list(final_clock)
        self.final_kwargs = []  # the bench keywords of each final-round call

    def __call__(self, artifact, size, config, **kwargs):
        me, n = threading.current_thread().name, size["N"]
        board = FAST_BOARD if self.fast and me.endswith(self.fast) else 1.0
        if callable(artifact):  # a baseline row
            return BenchResult(kwargs["name"], samples_ms=(REF_MS * board * n / 1024,) * 3)
        block = artifact["block"]
        with self.lock:
            final = any(c[:2] == (block, n) for c in self.calls)
            first = not final and (me, n) not in self.seen
            self.seen.add((me, n))
            self.calls.append((block, n, me, final))
            if block == self.lucky and self.fast is None and self.boards_differ:
                self.fast = me.rsplit("-", 1)[-1]
            barrier = self.barriers.setdefault(n, threading.Barrier(2, timeout=60))
            clock = self.final_clock[sum(c[3] for c in self.calls) % len(self.final_clock) - 1] if final else 1.0
            if final:
                self.final_kwargs.append({k: v for k, v in kwargs.items() if k != "baseline"})
        if first and self.pair:
            barrier.wait()
        if final and self.on_final is not None:
            self.on_final(block, n)
        if final and self.fail_final in (block, "all"):
            raise RuntimeError("the final round's launch failed")
        board = FAST_BOARD if self.fast and me.endswith(self.fast) else 1.0
        ms = TRUE_MS[block] * board * clock * n / 1024
        reference = kwargs.get("baseline")
        if reference is None:
            return timed(ms)
        ref_true = REF_MS if callable(reference) else TRUE_MS[reference["block"]]
        with self.lock:
            self.references.append((block, n, "callable" if callable(reference) else reference["block"]))
        ref_ms = ref_true * board * clock * n / 1024
        return BenchResult("k", samples_ms=(ms,) * 4, baseline="ref", baseline_samples_ms=(ref_ms,) * 4,
                           ratio_samples=(TRUE_MS[block] / ref_true,) * 4,
                           ratio_ci=(0.999 * TRUE_MS[block] / ref_true, 1.001 * TRUE_MS[block] / ref_true))

    def final_calls(self):
        return [(b, n, thread) for b, n, thread, final in self.calls if final]


def _final_sweep(bench, sizes=None, **kwargs):
    kwargs = {"devices": [0, 1], "compile_fn": fake_compile, "bench_fn": bench, "workers": 1, "progress": False,
              "force": True, **kwargs}
    return sweep(factory, FINAL_PARAMS, sizes or {"N": [1024]}, **kwargs)


def _leader(rows, n):
    """The sweep's fastest configuration at size ``n`` (by median): the final round's reference."""
    return min(TRUE_MS, key=lambda b: rows[(n, b)].median_ms)


def test_the_final_round_ranks_the_leaders_by_ratio_on_one_gpu_not_by_board_or_moment(record_progress,
                                                                                       compile_in_threads):
    # today's behaviour (finalists=0): block 64 wins on its faster board although it is 1% slower
    before = Boards()
    table = _final_sweep(before, finalists=0)
    rows = _by(table)
    assert rows[(1024, 32)].device != rows[(1024, 64)].device  # the two leaders ran on different GPUs
    assert rows[(1024, 64)].median_ms == pytest.approx(1.01 * FAST_BOARD)
    assert rows[(1024, 64)].median_ms < rows[(1024, 32)].median_ms
    assert dict(table.best().config) == {"block": 64}
    assert not before.final_calls() and all(r.final_ms is None for r in table.rows)
    assert "final" not in repr(table) and "final" not in table._repr_html_()

    bars = record_progress(_show)
    bench = Boards()
    table = _final_sweep(bench)  # finalists=3 by default
    rows = _by(table)
    assert rows[(1024, 32)].device != rows[(1024, 64)].device
    assert _leader(rows, 1024) == 64  # the sweep's medians say 64: it is the reference
    # the two others timed again, once each, on the first GPU, each beside the leader's kernel
    assert sorted(bench.final_calls()) == [(16, 1024, "tilelab-bench-cuda:0"), (32, 1024, "tilelab-bench-cuda:0")]
    assert sorted(bench.references) == [(16, 1024, 64), (32, 1024, 64)]
    assert {r.final_device for r in rows.values()} == {"cuda:0"}
    # the ratios are the true ones, whatever the board and the clock of the moment said
    assert {b: rows[(1024, b)].final_ratio for b in TRUE_MS} == pytest.approx(
        {b: t / TRUE_MS[64] for b, t in TRUE_MS.items()})
    assert rows[(1024, 64)].final_ratio == 1.0 and rows[(1024, 64)].final_ratio_ci is None
    assert rows[(1024, 32)].final_ratio_ci == pytest.approx((0.999 * 1.00 / 1.01, 1.001 * 1.00 / 1.01))
    # the clock wandered between the two calls: their medians alone would have ranked 32 last
    assert rows[(1024, 32)].final_ms > rows[(1024, 64)].median_ms
    assert dict(table.best().config) == {"block": 32}  # the ratio says 32, which is right
    assert [r.best for r in table.rows] == [True, False, False]
    assert table.best_call() == "factory(N=1024, block=32)"
    assert table.final_reference == "the sweep's fastest at each size"
    # the dashboard: final ms and final ratio columns, a note saying what the round was, to what, and why
    assert [(b.total, b.desc, b.updates) for b in bars[1:]] == [(2, "final round: 2 configurations on cuda:0", 2)]
    text = repr(table)
    header = next(line for line in text.splitlines() if line.startswith("size"))
    assert header.split()[:9] == ["size", "configuration", "median", "ms", "final", "ms", "final", "ratio", "to"]
    assert "final ratio to the sweep's fastest at each size" in header
    assert f"{rows[(1024, 32)].final_ratio:.4f} +-0.10%" in text
    (note,) = [n for n in table.notes if n.startswith("final round")]
    assert "the 3 fastest configurations at each size were timed again on cuda:0" in note
    assert "side by side with the leader of its size" in note and "ranked by their ratio to it" in note
    assert "at 1024: block=64" in note and "about 1%" in note and "lowest final ratio" in note
    html = table._repr_html_()
    assert ">final ms</th>" in html and "final ratio to the sweep&#x27;s fastest" in html and "about 1%" in html
    assert SweepTable.from_dict(table.to_dict()) == table
    old = {k: v for k, v in rows[(1024, 32)].to_dict().items() if not k.startswith("final")}
    assert SweepRow.from_dict(old).final_ms is None and SweepRow.from_dict(old).final_ratio is None

    # finalists=2: the two fastest by the sweep's medians, no more: the second timed beside the first
    bench = Boards()
    table = _final_sweep(bench, finalists=2)
    rows = _by(table)
    assert bench.final_calls() == [(32, 1024, "tilelab-bench-cuda:0")] and bench.references == [(32, 1024, 64)]
    assert rows[(1024, 32)].final_ratio is not None and rows[(1024, 64)].final_ratio == 1.0
    assert rows[(1024, 16)].final_ms is None and dict(table.best().config) == {"block": 32}
    assert any("the 2 fastest configurations" in n for n in table.notes)


def test_with_rank_by_ratio_the_final_round_times_its_finalists_beside_the_sweeps_baseline(compile_in_threads):
    bench = Boards()
    table = _final_sweep(bench, baseline={"ref": lambda N: (lambda: None)}, rank_by="ratio")
    rows = _by(table)
    assert all(rows[(1024, b)].ratio == pytest.approx(TRUE_MS[b] / REF_MS) for b in TRUE_MS)  # the sweep's ratios
    # the round runs on the GPU that measured two of the three finalists (the pair barrier gave
    # each GPU one first): only the one measured on the other GPU is timed again, beside the
    # baseline; those the sweep measured there keep their ratio to it
    boards = [rows[(1024, b)].device for b in TRUE_MS]
    final = max(("cuda:0", "cuda:1"), key=boards.count)
    elsewhere = sorted(b for b in TRUE_MS if rows[(1024, b)].device != final)
    assert boards.count(final) == 2 and len(elsewhere) == 1
    assert sorted(bench.final_calls()) == [(b, 1024, f"tilelab-bench-{final}") for b in elsewhere]
    # every call, the sweep's and the final round's, was given the baseline to time beside
    assert len(bench.references) == 3 + len(elsewhere) and {r[2] for r in bench.references} == {"callable"}
    for b in TRUE_MS:
        assert rows[(1024, b)].final_ratio == pytest.approx(TRUE_MS[b] / REF_MS)
        assert rows[(1024, b)].final_device == final
    assert dict(table.best().config) == {"block": 32}
    assert table.final_reference == "ref" and table.ratio_baseline == "ref"
    assert "final ratio to ref" in repr(table)
    (note,) = [n for n in table.notes if n.startswith("final round")]
    assert "side by side with ref" in note and "2 whose ratio was measured there in the sweep kept it" in note
    assert f"timed again on {final}" in note
    # side by side, the clock cancels in the ratio: no warm-up to a steady clock, full 1 s rounds to
    # the ratio's own interval (the sweep's own rows were warmed up)
    assert [(k["steady"], k["rep_ms"], k["ci_target"]) for k in bench.final_kwargs] == [(False, 1000.0, 0.002)]


def test_the_final_round_runs_on_the_usable_gpu_that_measured_the_most_finalists():
    runner = _runners.LocalRunner([2, 0, 1, 3], _runners.Events(), workers=1, use_cuda=False)
    try:
        assert runner.final_device() == "cuda:2"  # no preference: the first listed
        runner.prefer_final(["cuda:1", "cuda:3", "cuda:1", None])
        assert runner.final_device() == "cuda:1" and runner.on_final_device("cuda:1")
        assert not runner.on_final_device("cuda:3")
        runner.prefer_final(["cuda:3", "cuda:0"])  # a tie: the first of devices among them
        assert runner.final_device() == "cuda:0"
        runner.prefer_final(["cuda:7"])  # no device of this sweep: the choice stands
        assert runner.final_device() == "cuda:0"
        runner._lost_devices.add(0)  # its context was lost: the first usable one
        assert runner.final_device() == "cuda:2"
    finally:
        runner.close()


def test_the_final_round_skips_sizes_whose_leaders_ran_on_one_gpu_and_runs_again_on_resume(tmp_path, monkeypatch,
                                                                                          compile_in_threads):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    one = Boards(pair=False, boards_differ=False)
    _final_sweep(one, devices=[0], force=False)  # cached: every row at 1024 ran on cuda:0
    assert not one.final_calls()  # one GPU: nothing to rank again
    bench = Boards(pair=True)
    table = _final_sweep(bench, sizes={"N": [1024, 2048]}, force=False)
    rows = _by(table)
    assert all(rows[(1024, b)].cached and rows[(1024, b)].device == "cuda:0" for b in TRUE_MS)
    leader = _leader(rows, 2048)
    assert {(b, n) for b, n, _ in bench.final_calls()} == {(b, 2048) for b in TRUE_MS if b != leader}
    assert all(rows[(1024, b)].final_ms is None for b in TRUE_MS)  # ranked by their medians, as before
    assert all(rows[(2048, b)].final_ms is not None and rows[(2048, b)].final_ratio is not None for b in TRUE_MS)
    assert dict(table.best({"N": 1024}).config) == {"block": 32} == dict(table.best({"N": 2048}).config)
    assert any(n.startswith("no final round at 1024") and "one device" in n for n in table.notes)
    # the row cache holds the sweep's rows, never a final figure
    cached = [json.loads(p.read_text()) for p in (tmp_path / "sweeps").glob("*.json")]
    assert len(cached) == 6 and all(c["final_ms"] is None and c["final_ratio"] is None for c in cached)
    # resumed: every row from the cache, and the final round runs again (on the same two boards)
    again = Boards(pair=False, boards_differ=False)
    again.fast = bench.fast
    table = _final_sweep(again, sizes={"N": [1024, 2048]}, force=False)
    assert all(r.cached for r in table.rows)
    # nothing measured but the final round: each finalist at 2048 but the leader once, on the first GPU
    assert sorted((b, n, t) for b, n, t, _ in again.calls) == [
        (b, 2048, "tilelab-bench-cuda:0") for b in sorted(TRUE_MS) if b != leader]
    assert dict(table.best({"N": 2048}).config) == {"block": 32}


def test_a_finalist_that_fails_in_the_final_round_keeps_its_sweep_row_and_is_named(compile_in_threads):
    bench = Boards(fail_final=16)
    table = _final_sweep(bench)
    rows = _by(table)
    assert sorted(b for b, *_ in bench.final_calls()) == [16, 32]
    assert rows[(1024, 16)].ok and rows[(1024, 16)].final_ms is None and rows[(1024, 16)].final_ratio is None
    assert rows[(1024, 32)].final_ratio == pytest.approx(1.00 / 1.01)
    assert dict(table.best().config) == {"block": 32}
    (note,) = [n for n in table.notes if "failed" in n]
    assert "block=16 at size 1024" in note and "the final round's launch failed" in note
    assert "keeps its sweep row" in note

    # every timed finalist fails: nothing to rank by, the sweep's medians decide, and a note says so
    bench = Boards(fail_final="all")
    table = _final_sweep(bench)
    rows = _by(table)
    assert all(r.final_ratio is None and r.final_ms is None for r in rows.values())
    assert dict(table.best().config) == {"block": _leader(rows, 1024)}
    assert any("every finalist failed when timed again" in n for n in table.notes)


def test_a_leader_that_does_not_compile_again_leaves_the_sweeps_ranking_and_says_so(compile_in_threads):
    compiles = []

    def compile_once(factory, size, config):
        compiles.append(config["block"])
        if config["block"] == 64 and compiles.count(64) > 1:
            raise ValueError("the disk cache is gone and nvcc with it")
        return functools.partial(_compile, config["block"])

    bench = Boards()
    table = _final_sweep(bench, compile_fn=compile_once)
    rows = _by(table)
    assert _leader(rows, 1024) == 64 and not bench.final_calls()  # nothing timed against no reference
    assert all(r.final_ratio is None and r.final_ms is None for r in rows.values())
    assert dict(table.best().config) == {"block": 64}
    (note,) = [n for n in table.notes if "did not compile again" in n]
    assert "the disk cache is gone" in note and "sweep's fastest median" in note


@pytest.mark.stop_button
def test_an_interrupt_during_the_final_round_keeps_the_sweep_and_the_finished_sizes(compile_in_threads, stop_button):
    def stop_at_2048(block, n):
        if n == 2048:
            stop_button()  # while the final round times its first leader at 2048

    bench = Boards(on_final=stop_at_2048)
    table = _final_sweep(bench, sizes={"N": [1024, 2048]})
    rows = _by(table)
    assert all(r.ok and not r.cached for r in rows.values())  # the sweep's rows, every one
    assert [n for _, n, _ in bench.final_calls()] == [1024, 1024, 2048]  # all but the leader at 1024
    assert all(rows[(1024, b)].final_ratio is not None for b in TRUE_MS)
    assert all(rows[(2048, b)].final_ms is None and rows[(2048, b)].final_ratio is None
               for b in TRUE_MS)  # not complete there: not used
    assert dict(table.best({"N": 1024}).config) == {"block": 32}
    fastest = min(TRUE_MS, key=lambda b: rows[(2048, b)].median_ms)
    assert dict(table.best({"N": 2048}).config) == {"block": fastest}  # the sweep's ranking at 2048
    (note,) = [n for n in table.notes if n.startswith("final round incomplete")]
    assert "at 2048" in note and "interrupted" in note and "sweep's fastest median" in note


def test_finalists_is_checked_by_name():
    from tilelab import OptionError
    from tilelab.launch import SweepOptions

    calls = Recorder()
    for bad in (-1, 1.5, "3", True, None):
        with pytest.raises(OptionError, match=r"finalists=.*non-negative int"):
            sweep(factory, PARAMS, SIZES, devices=[0, 1], compile_fn=fake_compile, bench_fn=calls, finalists=bad,
                  progress=False)
        with pytest.raises(OptionError, match="finalists"):
            SweepOptions(finalists=bad)
    assert not calls.calls  # refused before anything ran
    assert SweepOptions().finalists == 3 and SweepOptions(finalists=0).finalists == 0


@pytest.fixture(scope="module")
def dask_two_gpus():
    """A Dask cluster of CPU workers: two declaring "GPU" (gpu0, gpu1), one declaring "compile"."""
    distributed = pytest.importorskip("distributed", reason="Dask is the optional extra tilelab[cluster]")
    spec = {name: {"cls": distributed.Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}}
            for name in ("gpu1", "gpu0")}  # listed out of order: the final round takes gpu0 by name
    spec["cpu"] = {"cls": distributed.Worker, "options": {"nthreads": 1, "resources": {"compile": 1}}}
    cluster = distributed.SpecCluster(workers=spec, scheduler={"cls": distributed.Scheduler,
                                                               "options": {"dashboard_address": ":0"}})
    client = distributed.Client(cluster)
    client.wait_for_workers(3, timeout=60)
    yield client
    client.close()
    cluster.close()


DASK_BOARDS = Boards()  # the workers run in this process: Dask pickles the bench step by reference


def dask_boards_bench(artifact, size, config, **kwargs):
    """Boards, with the Dask worker's name standing for the bench thread's device."""
    worker = _tasks.where_am_i()
    thread = threading.current_thread()
    name, thread.name = thread.name, f"dask-{worker}"
    try:
        return DASK_BOARDS(artifact, size, config, **kwargs)
    finally:
        thread.name = name


def test_dask_final_round_runs_on_the_first_gpu_worker_only(dask_two_gpus):
    global DASK_BOARDS
    DASK_BOARDS = Boards()
    table = sweep(factory, FINAL_PARAMS, {"N": [1024]}, client=dask_two_gpus, compile_fn=fake_compile,
                  bench_fn=dask_boards_bench, progress=False, force=True)
    rows = _by(table)
    assert rows[(1024, 32)].device != rows[(1024, 64)].device  # the leaders ran on both GPU workers
    assert {rows[(1024, b)].device for b in TRUE_MS} <= {"gpu0", "gpu1"}
    leader = _leader(rows, 1024)
    assert sorted(DASK_BOARDS.final_calls()) == [(b, 1024, "dask-gpu0") for b in sorted(TRUE_MS) if b != leader]
    assert sorted(DASK_BOARDS.references) == [(b, 1024, leader) for b in sorted(TRUE_MS) if b != leader]
    assert {r.final_device for r in rows.values()} == {"gpu0"}
    assert dict(table.best().config) == {"block": 32}
    assert rows[(1024, 64)].median_ms < rows[(1024, 32)].median_ms  # the sweep alone would have picked 64
    (note,) = [n for n in table.notes if n.startswith("final round")]
    assert "on gpu0 (the cluster's first GPU worker)" in note


def test_a_context_lost_in_the_final_round_stops_it_and_the_sweep_ranking_stands(compile_in_threads):
    from tilelab.launch._run import KernelLaunchError

    def sticky(block, n):
        raise KernelLaunchError("gemm", "illegal_address", "an illegal memory access", sticky=True)

    bench = Boards(on_final=sticky)
    table = _final_sweep(bench, isolate=False)
    rows = _by(table)
    assert len(bench.final_calls()) == 1  # nothing more on a device whose context is gone
    assert all(r.ok and r.final_ms is None and r.final_ratio is None for r in rows.values())
    assert dict(table.best().config) == {"block": 64}  # the sweep's fastest median, as before the round
    assert any("context of cuda:0 was lost" in n for n in table.notes)
    assert any(n.startswith("final round incomplete at 1024 (it stopped") for n in table.notes)


def test_dask_final_round_pins_by_name_to_a_worker_alive_when_it_starts():
    """The final round asks the scheduler which GPU workers are alive when it starts and pins by
    name: a worker that died since the sweep began is not waited for (a task pinned to its old
    address would stay pending), one restarted by its nanny is found at its new address, and with
    none left there is no final device."""
    import queue as queue_

    class Client:
        def __init__(self):
            self.workers = {"tcp://a:1": {"name": "gpu0", "resources": {"GPU": 1}, "nthreads": 1},
                            "tcp://b:1": {"name": "gpu1", "resources": {"GPU": 1}, "nthreads": 1},
                            "tcp://c:1": {"name": "cpu", "resources": {"compile": 1}, "nthreads": 1}}
            self.submitted = []

        def scheduler_info(self, n_workers=5):
            return {"workers": dict(self.workers)}

        def submit(self, fn, *args, **kwargs):
            self.submitted.append(kwargs)

            class Future:
                def add_done_callback(self, callback):
                    pass

            return Future()

    client = Client()
    runner = _runners.DaskRunner(client, queue_.Queue())
    del client.workers["tcp://a:1"]  # gpu0 died during the sweep
    assert runner.final_device() == "gpu1 (the cluster's first GPU worker)"
    assert runner.on_final_device("gpu1 (GPU 1)") and not runner.on_final_device("gpu0 (GPU 0)")
    runner.bench_pinned(None, _plan.Job(7, (), ()), None)
    assert client.submitted[-1]["workers"] == ["gpu1"] and client.submitted[-1]["allow_other_workers"] is False

    restarted = Client()
    runner = _runners.DaskRunner(restarted, queue_.Queue())
    restarted.workers["tcp://a:2"] = restarted.workers.pop("tcp://a:1")  # its nanny restarted it elsewhere
    assert runner.final_device() == "gpu0 (the cluster's first GPU worker)"

    gone = Client()
    runner = _runners.DaskRunner(gone, queue_.Queue())
    gone.workers = {"tcp://c:1": gone.workers["tcp://c:1"]}
    assert runner.final_device() is None and not runner.on_final_device("gpu0")

    # rank_by="ratio": the worker that measured the most finalists, if it is alive
    preferred = Client()
    runner = _runners.DaskRunner(preferred, queue_.Queue())
    runner.prefer_final(["gpu1 (GPU 1)", "gpu0 (GPU 0)", "gpu1 (GPU 1)"])
    assert runner.final_device() == "gpu1 (the GPU worker that measured the most finalists)"
    runner.bench_pinned(None, _plan.Job(7, (), ()), None)
    assert preferred.submitted[-1]["workers"] == ["gpu1"]
    dead = Client()
    runner = _runners.DaskRunner(dead, queue_.Queue())
    runner.prefer_final(["gpu1 (GPU 1)"])
    del dead.workers["tcp://b:1"]  # it died before the round
    assert runner.final_device() == "gpu0 (the cluster's first GPU worker)"


def test_cached_finalists_are_timed_again_and_a_round_where_every_one_fails_leaves_the_sweeps_ranking(
        tmp_path, monkeypatch, compile_in_threads):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    first = Boards()
    _final_sweep(first, force=False)  # fills the row cache: rows on cuda:0 and cuda:1
    failing = Boards(pair=False, boards_differ=False, fail_final="all")
    failing.fast, failing.calls = first.fast, list(first.calls)  # the same boards; a call now is a final one
    table = _final_sweep(failing, force=False)
    rows = _by(table)
    assert all(r.cached for r in rows.values())
    # every finalist but the leader (the reference) was timed again beside it, and all failed
    fastest = min(TRUE_MS, key=lambda b: rows[(1024, b)].median_ms)
    assert sorted((b, t) for b, _, t, _ in failing.calls[len(first.calls):]) == [
        (b, "tilelab-bench-cuda:0") for b in sorted(TRUE_MS) if b != fastest]
    assert all(r.final_ms is None and r.final_ratio is None for r in rows.values())
    assert dict(table.best().config) == {"block": fastest}
    (note,) = [n for n in table.notes if n.startswith("final round at 1024")]
    assert "every finalist failed when timed again" in note and "the sweep's fastest median" in note
    assert not any("not ranked" in n for n in table.notes)


def test_an_error_inside_the_final_round_keeps_the_measured_table(monkeypatch, compile_in_threads):
    def broken(self):
        raise RuntimeError("the scheduler went away")

    monkeypatch.setattr(_final.FinalRound, "_submit_compiles", broken)
    table = _final_sweep(Boards())
    rows = _by(table)
    assert all(r.ok and r.final_ms is None for r in rows.values()) and table.best() is not None
    assert any("the final round failed: RuntimeError: the scheduler went away" in n for n in table.notes)


def test_a_compile_the_stop_cancelled_is_not_run_not_a_compile_failure():
    """A stop cancels the compile tasks still waiting in the pool: their rows are "not run" (measured
    by the next call), never a cached compile failure reading CancelledError."""
    from concurrent.futures import Future

    cancelled: Future = Future()
    assert cancelled.cancel()
    outcome = _runners._outcome(cancelled, 3)
    assert outcome.index == 3 and outcome.stage == "not run" and "interrupted" in outcome.error
    assert outcome.stage not in _rowcache.CACHED_FAILURES
