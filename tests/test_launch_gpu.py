"""tilelab.run / launch_overhead on a real GPU (marker ``gpu``; skipped, with the reason, without one).

Run on the lent H100/H200:  source .gpu/setup.sh && python -m pytest -m gpu tests/test_launch_gpu.py
These tests check behaviour, never timings: figures are only printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]


def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not importable"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch sees none on this machine (run on the lent H100: make test-gpu)"
    return None


if _cuda_reason():
    pytest.skip(_cuda_reason(), allow_module_level=True)

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.launch import KernelLaunchError, launch_overhead, run  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
import gemm as gemm_example  # noqa: E402
import tile_copy  # noqa: E402


def skipping_copy(M, N, skip_x, skip_y, block=64):
    """A copy with a bug: block (skip_x, skip_y) writes nothing."""

    @T.prim_func
    def skip_copy(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            if bx * 4096 + by != skip_x * 4096 + skip_y:
                for i, j in T.Parallel(block, block):
                    B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return skip_copy


def identity(a):
    return a


# ---------------------------------------------------------------------------------------------


def test_gemm_is_correct_with_launcher_allocated_output():
    kernel = gemm_example.matmul(1024, 1024, 1024, 128, 128, 32)
    result = run(kernel, ref=torch.matmul, out_idx=-1, seed=1)
    print(result)
    assert result.passed, result
    out = result.outputs[0]
    assert out.name == "C" and out.shape == (1024, 1024)
    assert out.poison_checked, result.notes  # the allocator-poison trick reached the launcher's output
    assert out.unwritten == 0
    assert 0 < out.rel_error < out.tolerance == 2e-3
    assert len(result.worst) == 5


def test_copy_kernel_is_exact_with_output_passed_at_launch():
    result = run(tile_copy.copy(2048, 4096), ref=identity, seed=2)  # no out_idx: B is passed in
    print(result)
    assert result.passed and result.outputs[0].poison_checked
    assert result.outputs[0].rel_error == 0.0
    assert result.outputs[0].name == "B"


def test_given_tensors_are_used_as_is():
    a = torch.arange(64 * 256, device="cuda", dtype=torch.float32).reshape(64, 256).half()
    result = run(tile_copy.copy(64, 256), a, ref=identity)
    assert result.passed and result.rel_error == 0.0


@pytest.mark.parametrize("out_idx", [None, -1])
def test_poison_catches_a_skipped_tile(out_idx):
    result = run(skipping_copy(256, 512, skip_x=3, skip_y=2), ref=identity, out_idx=out_idx, seed=3)
    print(result)
    assert not result.passed
    out = result.outputs[0]
    assert out.poison_checked
    assert out.unwritten == 64 * 64
    assert out.first_unwritten == (2 * 64, 3 * 64)
    assert "never written" in repr(result) and "FAIL" in result._repr_html_()
    assert out.rel_error == 0.0  # the error figures cover the written elements only


def test_illegal_address_is_reported_clearly(tmp_path):
    # In a child process: an illegal address leaves the CUDA context unusable.
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import tilelang, tilelang.language as T, torch
        from tilelab.launch import run, KernelLaunchError

        N = 1 << 16
        @T.prim_func
        def oob_read(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), offset: T.int32):
            with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    B[bx * 128 + i] = A[bx * 128 + i + offset]

        k = tilelang.compile(oob_read, target={{"kind": "cuda", "arch": "sm_90a"}},
                             pass_configs={{"tl.disable_safe_memory_legalize": True}})
        try:
            run(k, offset=(1 << 28) + 12345)
        except KernelLaunchError as err:
            print("KIND", err.kind, "STICKY", err.sticky)
            print("MESSAGE", str(err))
        else:
            print("KIND none")
    """)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    path = tmp_path / "oob.py"  # T.prim_func reads its source: a file, not python -c
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
    print(proc.stdout, proc.stderr[-3000:])
    assert "KIND illegal_address STICKY True" in proc.stdout
    assert "oob_read: illegal memory access" in proc.stdout  # named kernel, clear headline
    assert "likely cause" in proc.stdout and "restart the Python kernel" in proc.stdout


def test_every_backend_launch_overhead_is_measured():
    result = launch_overhead(calls=300, warmup=50)
    print(result)
    medians = result.medians
    for backend in ("tvm_ffi", "cython", "nvrtc"):
        assert backend in medians, dict(result.errors)
        assert medians[backend] > 0
    assert "cutedsl" in medians or "cutedsl" in dict(result.errors)
    assert result._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_modes_return_samples_and_name_their_method():
    kernel = tile_copy.copy(1024, 1024)
    for mode in ("sustained", "isolated", "graph"):
        res = tilelab.bench(kernel, mode=mode, rep_ms=5, warmup_ms=1, min_rep=5, max_rep=20, idle_ms=1)
        print(res)
        assert res.mode == mode and len(res.samples_ms) >= 5 and res.bytes == 2 * 1024 * 1024 * 2
        assert res.method and res.median_ms > 0
    res = tilelab.bench(gemm_example.matmul(1024, 1024, 1024, 128, 128, 32), rep_ms=5, min_rep=5)
    assert res.flops == 2 * 1024**3 and res.tflops > 0
