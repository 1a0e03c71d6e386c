"""How soon a sweep's compile pool delivers its first compiled configuration: spawned processes
(each imports torch and TileLang before it compiles) against forks of the caller, which has them
imported already (tilelab's choice on Linux).

Each run is a fresh Python process with an empty TileLang cache. It elaborates a small kernel at
one configuration per compile task (target ``c``: TileLang's lowering and the host C compiler, no
GPU), creates the compile pool (one process per task, as a sweep sizes it) and submits every task;
the clock runs from the pool's creation to the first compile's result and to the last. The table
gives the median of the runs and their spread (max - min).

    python benchmarks/compile_pool_start.py [--runs 3] [--tasks N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import concurrent.futures, json, sys, time
import tilelang.language as T
from tilelab.launch.sweep import _pool, _runners, _tasks

def factory(N, block):
    @T.prim_func
    def add(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return add


def main():
    method, tasks = sys.argv[1], int(sys.argv[2])
    if method == "spawn":
        _pool.pool_start_method = lambda *args: "spawn"
    steps = [_tasks.default_compile_step(factory, {"N": 4096}, {"block": 32 * (k + 1)}, backend=None,
                                         out_idx=-1, target="c") for k in range(tasks)]
    blobs = [_tasks.dumps(s) for s in steps]
    t0 = time.perf_counter()
    pool = _pool.compile_pool(_pool.compile_pool_size(tasks), exact=False)
    futures = [pool.submit(_tasks.compile_pickled, k, b) for k, b in enumerate(blobs)]
    done = []
    for f in concurrent.futures.as_completed(futures):
        out = f.result()
        assert out.error is None, out.error
        done.append(time.perf_counter() - t0)
    print(json.dumps({"method": type(pool._mp_context).__name__, "first_s": done[0], "last_s": done[-1],
                      "compile_s": sorted(f.result().compile_s for f in futures)}))
    _pool.shutdown_compile_pools()


if __name__ == "__main__":  # the compile processes import this script again
    main()
"""


def one_run(method: str, tasks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, TILELANG_CACHE_DIR=os.path.join(tmp, "tilelang-cache"),
                   PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        script = os.path.join(tmp, "pool_start_child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        out = subprocess.run([sys.executable, script, method, str(tasks)], capture_output=True, text=True,
                             env=env, cwd=root, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the {method} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=0, help="compile tasks (default: 1.5x the CPUs)")
    args = parser.parse_args()
    tasks = args.tasks or max(1, int(1.5 * (os.cpu_count() or 1) + 0.5))
    print(f"{tasks} compile tasks, {os.cpu_count()} CPUs, {args.runs} runs each (alternating)")
    results: dict[str, list[dict]] = {"spawn": [], "fork": []}
    for _ in range(args.runs):
        for method in results:
            results[method].append(one_run(method, tasks))
    print(f"{'start method':<14}{'first compile s (median, spread)':>36}{'all compiles s (median, spread)':>36}")
    for runs in results.values():
        first = [r["first_s"] for r in runs]
        last = [r["last_s"] for r in runs]
        print(f"{runs[0]['method']:<14}{statistics.median(first):>26.2f}  ({max(first) - min(first):.2f})"
              f"{statistics.median(last):>26.2f}  ({max(last) - min(last):.2f})")
        print(f"{'':<14}runs: first {', '.join(f'{x:.2f}' for x in first)}; all {', '.join(f'{x:.2f}' for x in last)}")


if __name__ == "__main__":
    main()
