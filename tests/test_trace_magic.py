"""``%%tilelang --run --trace`` (target c, and GPU kernels on the CPU) through IPython's test shell
(``tests/ipython_shell.py``).

As in ``tests/test_magic.py``, IPython keeps global state, so in a normal run this module starts a
second pytest process on itself and the tests below run there against the global test shell.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = os.environ.get("TILELAB_TRACE_MAGIC_CHILD") == "1"

# Blocks with by > 1 copy the tile of by = 1 again: rows 32-63 are written twice, 64-95 never.
CLAMPED_CELL = '''import tilelang.language as T


@T.prim_func
def clamped(A: T.Tensor((96, 32), T.float32), B: T.Tensor((96, 32), T.float32)):
    with T.Kernel(1, 3) as (bx, by):
        row = T.min(by, 1) * 32
        for i, j in T.grid(32, 32):
            B[row + i, j] = A[row + i, j]
'''

# A kernel written for a GPU: a shared tile, T.Parallel, 128 threads.
GPU_CELL = '''import tilelang.language as T


@T.prim_func
def tiled_copy(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((64, 32), T.float16)
        T.copy(A[0, bx * 32], S)
        for i, j in T.Parallel(64, 32):
            B[i, bx * 32 + j] = S[i, j]
'''

if not CHILD:

    @pytest.mark.slow
    def test_trace_magic_suite_in_its_own_process():
        env = dict(os.environ, TILELAB_TRACE_MAGIC_CHILD="1")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
            cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
        assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]

else:
    from IPython.core.error import UsageError
    from ipython_shell import ip, magics, run, shown  # noqa: F401  (fixtures)

    def test_trace_shows_the_trace_above_the_inspector_and_says_its_problems(ip, shown, capsys):
        assert run(ip, "--target c --run --trace", CLAMPED_CELL).success
        out = capsys.readouterr().out
        assert ("%%tilelang --trace: blocks (0, 1) and (0, 2) both wrote rows 32-63 of B; 1024 elements of B were "
                "written by more than one block") in out
        assert "rows 64-95 of B were never written" in out
        last = magics(ip).last
        (trace,) = last.traces
        assert trace.kernel == "clamped" and trace.grid == (1, 3)
        assert [type(t).__name__ for t in last.timing] == ["RunResult"]  # the trace is not in the Timing tab
        html = [o["data"]["text/html"] for o in shown if "text/html" in o["data"]]
        assert len(html) == 2 and '<div class="tilelab-trace"' in html[0]  # the trace, then the inspector
        assert "blocks (0, 1) and (0, 2) both wrote rows 32-63 of B" in html[0]
        assert "tilelab-trace" not in html[1]

    def test_trace_with_quiet_shows_nothing_but_still_says_the_problems(ip, shown, capsys):
        assert run(ip, "--target c --trace --quiet", CLAMPED_CELL).success
        assert not shown
        assert "rows 64-95 of B were never written" in capsys.readouterr().out
        assert magics(ip).last.traces[0].grid == (1, 3)

    def test_trace_of_a_gpu_kernel_goes_through_its_tile_program_on_the_cpu(ip, shown, capsys):
        assert run(ip, "--trace --quiet", GPU_CELL).success
        trace = magics(ip).last.traces[0]
        assert trace.kernel == "tiled_copy" and trace.grid == (2,)
        assert not trace.problems()

    def test_run_on_the_cpu_checks_a_gpu_kernel_and_refuses_gpu_only_options_by_name(ip, shown, capsys):
        assert run(ip, "--run --device cpu --quiet --ref 'lambda a: a'", GPU_CELL).success
        checked = magics(ip).last.timing[0]
        assert type(checked).__name__ == "RunResult" and checked.passed
        assert checked.backend.startswith("emulated") and "(emulated)" in checked.device
        assert run(ip, "--run --device cpu --blocks 1 --quiet --ref 'lambda a: a'", GPU_CELL).success
        checked = magics(ip).last.timing[0]
        assert checked.passed and any("blocks 1 of 2 ran" in n for n in checked.notes)
        assert run(ip, "--run --device cpu --quiet --ref 'lambda a: a + 1'", GPU_CELL).success
        assert "%%tilelang --run: tiled_copy: FAIL" in capsys.readouterr().out  # said even with --quiet
        for line, needle in [("--run --device cpu --bench", "--device cpu runs the kernel's tile program on the CPU"),
                             ("--run --blocks 0", "--blocks chooses the blocks of a CPU run: add --device cpu")]:
            result = run(ip, line, GPU_CELL)
            assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
            assert needle in str(result.error_in_exec)
