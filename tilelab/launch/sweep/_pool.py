"""The host's pool of compile processes, kept from one sweep to the next: its size
(:func:`compile_pool_size`), how its processes start (forked on Linux: :func:`pool_start_method`)
and at what priority (:func:`yield_to_launches`), when a kept pool is replaced (:func:`compile_pool`),
and how pools stop (:func:`retire_pool`, :func:`shutdown_compile_pools`). The runners
(``_runners.py``) send compile tasks to it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

# workers -> (sys.path and environment it started with, when (time.time_ns), the pool)
_POOLS: dict[int, tuple[str, int, ProcessPoolExecutor]] = {}
_POOLS_LOCK = threading.Lock()

# What one compile process holds once it has compiled: torch, TileLang and TVM imported, a
# lowering in memory (about 1 GB on a CUDA host). The pool takes at most half the host's memory.
PROCESS_BYTES = 1 << 30


def compile_pool_size(tasks: int, cpus: int | None = None, workers: int | None = None,
                      memory_bytes: int | None = None) -> int:
    """How many compile processes a sweep's ``tasks`` compile tasks get: ``workers`` where the
    user said (``sweep(..., workers=)``), else ``min(tasks, ceil(1.5 * cpus))``, and no more than
    half of ``memory_bytes`` at :data:`PROCESS_BYTES` each.

    More processes than cores, as ``make -j`` with more jobs than cores: a spawned process spends
    its first seconds importing torch and TileLang (where the pool cannot fork its processes from
    the caller, which has them: :func:`_pool_context`), and part of each compile waits
    on the disk too (nvcc's files, TileLang's cache), so a process per
    task up to 1.5x the cores keeps every core busy where one process per core would leave a few
    tasks to run after the others, one whole compile (seconds of single-threaded nvcc) later. The
    cost is memory: each process holds about 1 GB (a 16-core host: up to 24 processes, ~24 GB),
    hence the cap at half the host's memory. ``cpus``/``memory_bytes`` default to this host's."""
    if workers:
        return max(1, int(workers))
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if memory_bytes is None:
        memory_bytes = _host_memory()
    size = min(max(1, tasks), math.ceil(1.5 * max(1, cpus)))
    if memory_bytes:
        size = min(size, max(1, memory_bytes // 2 // PROCESS_BYTES))
    return max(1, size)


def _host_memory() -> int | None:
    """This host's physical memory in bytes, where the system says."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _started_with() -> str:
    """What a compile process reads once, when it starts: the import path and the environment."""
    import sys

    return hashlib.sha256(json.dumps([list(sys.path), sorted(os.environ.items())]).encode()).hexdigest()


def _edited_since(ns: int, packages: Sequence[str] | None = None) -> str | None:
    """A module of the user's own (not installed: outside the interpreter's prefixes and any
    site-packages folder) whose file changed after ``ns`` (time.time_ns), if any; with
    ``packages``, only a module of those packages (``"tilelab"``: it and its submodules)."""
    import sys

    prefixes = {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots = tuple({os.path.join(p, "") for p in prefixes} | {os.path.join(os.path.realpath(p), "") for p in prefixes})
    for name, module in list(sys.modules.items()):
        if packages is not None and name.split(".", 1)[0] not in packages:
            continue
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


def compile_pool(workers: int, *, exact: bool = True) -> ProcessPoolExecutor:
    """The host's pool of compile processes, kept for the next sweep: a spawned process takes
    seconds to import torch and TileLang, which every sweep would otherwise pay again before its
    first compile. It is replaced when it broke (a process died), or when what its processes
    started with changed: ``sys.path``, the environment, or a module of the user's own edited on
    disk since (a kept process would compile the module's old code).

    ``exact``: a pool of exactly ``workers`` processes (the user's ``workers=``: at most that many
    compiles at once). Otherwise any kept pool of at least ``workers`` is taken (the smallest such:
    a sweep with fewer compile tasks than processes runs as fast in it); a new one replaces the
    smaller kept pools, whose idle processes would hold their memory for nothing.

    On Linux its processes are forks of this process, made before this returns (they have torch
    and TileLang imported: :func:`pool_start_method`), elsewhere spawned."""
    import importlib

    # TileLang sets variables at import (TVM_LIBRARY_PATH, PYTHONPATH, ...), in a compile process
    # as here: imported here first (a sweep has, to elaborate), the environment compared from one
    # sweep to the next does not change with the first import, and a forked process has them all
    for name in COMPILE_IMPORTS:
        with contextlib.suppress(ImportError):  # cloudpickle is optional
            importlib.import_module(name)
    token = _started_with()
    with _POOLS_LOCK:
        for size, (started, created, pool) in list(_POOLS.items()):
            if (started != token or _edited_since(created) or getattr(pool, "_broken", False)
                    or getattr(pool, "_shutdown_thread", False)):
                del _POOLS[size]
                _stop_pool(pool, kill=False)
        sizes = [workers] if exact else sorted(size for size in _POOLS if size >= workers)
        for size in sizes:
            if size in _POOLS:
                return _POOLS[size][2]
        if not exact:
            for size in [size for size in _POOLS if size < workers]:
                _stop_pool(_POOLS.pop(size)[2], kill=False)
        kept = (token, time.time_ns(), ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(),
                                                           initializer=yield_to_launches))
        _start_processes(kept[2])
        _POOLS[workers] = kept
        return kept[2]


# How much lower than the caller a compile process (and its nvcc) runs: compiles are throughput
# work, and a sweep times configurations and starts its launch worker while they run. With the
# cores full of compiles, each core shares its time by weight; at +10 (Linux: weight 110 against
# 1024) the launch worker's start, the bench threads and the notebook take what they need first,
# and compiles take the rest, as ``nice make -j``.
COMPILE_NICENESS = 10

def yield_to_launches() -> None:
    """A compile process's first step: run :data:`COMPILE_NICENESS` lower than its parent (where
    the system has priorities; a process may always lower its own)."""
    with contextlib.suppress(AttributeError, OSError):
        os.nice(COMPILE_NICENESS)


# What a compile task imports: imported in the caller before its compile processes start, so a
# forked process has them (and a spawned one imports them itself).
COMPILE_IMPORTS = ("torch", "tilelang", "cloudpickle", "tilelab._tilelang", "tilelab.launch.sweep._tasks")


def pool_start_method(platform: str, methods: Sequence[str]) -> str:
    """How the compile pool starts its processes: ``"fork"`` on Linux, else ``"spawn"``.

    A spawned process imports torch and TileLang before its first compile: seconds of CPU each
    (5 s on a 16-core GPU host), which every one of a new pool's processes pays before the first
    configuration compiles. A fork of the caller has them already and compiles at once. A compile
    process never touches CUDA (TileLang lowers, nvcc compiles, the disk cache is written), so a
    fork of a caller whose CUDA context is up is safe, as PyTorch's DataLoader workers are; it is
    forked from the caller's thread before the sweep starts its own threads (:func:`compile_pool`).
    macOS: a fork of a process that imported torch is not safe there; Windows has no fork."""
    if platform.startswith("linux") and "fork" in methods:
        return "fork"
    return "spawn"


def _pool_context() -> Any:
    """The multiprocessing context of a new compile pool (see :func:`pool_start_method`)."""
    import multiprocessing
    import sys

    return multiprocessing.get_context(pool_start_method(sys.platform, multiprocessing.get_all_start_methods()))


def _start_processes(pool: ProcessPoolExecutor) -> None:
    """Start a forking pool's processes now, in this thread. ``ProcessPoolExecutor`` forks all its
    processes at its first submit, from the submitting thread: this makes that now, before a
    sweep's threads (sender, bench threads warming their launch workers) run, so no lock another
    thread of the sweep holds is copied locked into a compile process. Python warns of a fork of a
    process with threads (a notebook kernel always has some; CUDA starts its own): a compile
    process uses none of them, nor CUDA, nor a lock they take."""
    import warnings

    if type(getattr(pool, "_mp_context", None)).__name__ != "ForkContext":
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks.*",
                                category=DeprecationWarning)
        pool.submit(os.getpid).result()


def _stop_pool(pool: ProcessPoolExecutor, *, kill: bool) -> None:
    """Shut a pool down; with ``kill``, end its processes too (tasks already running in them,
    which cancelling cannot stop, would otherwise hold the next sweep back)."""
    if kill:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def retire_pool(pool: ProcessPoolExecutor) -> None:
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
