"""tilelab.run / launch_overhead on a real GPU (marker ``gpu``; skipped, with the reason, without one).

Run on a machine with a CUDA GPU:  make test-gpu PYTEST_ARGS=tests/launch/test_launch_gpu.py
These tests check behaviour, never timings: figures are only printed.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import tilelang.language as T  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab.launch import launch_overhead, run  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
import gemm as gemm_example  # noqa: E402
import gemm_bf16_nt  # noqa: E402
import gemm_dynamic  # noqa: E402
import tile_copy  # noqa: E402

from tilelab.launch import MisalignedTensorError, bench, measure_ceilings, sweep  # noqa: E402


def skipping_copy(M, N, skip_x, skip_y, block=64):
    """A copy with a bug: block (skip_x, skip_y) writes nothing."""

    @T.prim_func
    def skip_copy(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            if bx * 4096 + by != skip_x * 4096 + skip_y:
                for i, j in T.Parallel(block, block):
                    B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return skip_copy


def byte_copy(n, dtype, skip_block=-1):
    """B = A on 8-bit integers, 256 per block; block ``skip_block`` writes nothing."""

    @T.prim_func
    def copy_bytes(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            if bx != skip_block:
                for i in T.Parallel(256):
                    B[bx * 256 + i] = T.cast(A[bx * 256 + i], dtype)  # dtype in the body: a closure cell

    return copy_bytes


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
    assert 0 < out.rel_error < out.tolerance == 2 * 2**-11 + 2 * 32 * 2**-24  # fp16 out, K=1024
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
            run(k, offset=(1 << 28) + 12345, isolate=False)  # here (the worker: tests/launch/test_isolation_gpu.py)
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


def test_bf16_nt_gemm_matches_matmul_with_b_transposed():
    result = run(gemm_bf16_nt.matmul_nt(256, 256, 512, 128, 128, 64), ref=lambda a, b: a @ b.T, out_idx=-1, seed=4)
    print(result)
    out = result.outputs[0]
    assert result.passed, result
    assert out.tolerance == 2 * 2**-8 + 2 * math.sqrt(512) * 2**-24  # bf16 output, K=512
    assert 0 < out.rel_error < out.tolerance
    # the wrong operand layout must fail: the check tells A @ B from A @ B^T (square, so both run)
    assert not run(gemm_bf16_nt.matmul_nt(256, 256, 256, 128, 128, 64), ref=torch.matmul, out_idx=-1, seed=4).passed


def test_dynamic_m_gemm_runs_at_two_sizes():
    compiled = tilelab.launch.prepare_kernel(gemm_dynamic.matmul_dynamic_m(512, 256), out_idx=-1).compiled
    for m in (256, 384):
        result = run(compiled, ref=torch.matmul, m=m, seed=m)
        print(result)
        assert result.passed, result
        assert dict(result.sizes) == {"m": m} and result.outputs[0].shape == (m, 512)
    a = torch.randn(320, 256, device="cuda", dtype=torch.float16)  # m read off the tensor given
    assert dict(run(compiled, a, ref=torch.matmul).sizes) == {"m": 320}
    with pytest.raises(ValueError, match="A must have shape"):
        run(compiled, torch.randn(320, 128, device="cuda", dtype=torch.float16))


def test_graph_mode_with_launcher_allocated_output():
    res = bench(gemm_example.matmul(512, 512, 512, 128, 128, 32), mode="graph", out_idx=-1, rep_ms=5,
                warmup_ms=1, min_rep=3)
    print(res)
    assert res.mode == "graph" and len(res.samples_ms) >= 3 and res.median_ms > 0
    assert not res.l2_flush and res.rotating_copies > 1  # 1.5 MiB of operands: rotation instead of a flush
    batch = int(res.method.split("; ")[-1].split(" launches per replay")[0])
    assert batch >= 20 and batch % res.rotating_copies == 0
    assert any("MiB of L2" in n for n in res.notes)
    assert res.flops == 2 * 512**3  # counted: the source calls wgmma


def test_sweep_of_gemm_configs_with_reference_and_torch_baseline():
    n = 1024
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    table = sweep(gemm_example.matmul,
                  params=[dict(block_M=128, block_N=128, block_K=32), dict(block_M=128, block_N=256, block_K=64),
                          dict(block_M=64, block_N=128, block_K=64, threads=128)],
                  sizes={"M": [n], "N": [n], "K": [n]}, ref=torch.matmul,
                  baseline={"torch.matmul": lambda M, N, K: (lambda: torch.matmul(a, b))},
                  bench_kwargs={"rep_ms": 10, "warmup_ms": 2}, progress=False)
    print(table)
    kernels = [r for r in table.rows if r.label is None]
    assert len(kernels) == 3 and all(r.ok for r in kernels), table
    assert sum(r.best for r in table.rows) == 1
    best = table.best()
    assert best.median_ms == min(r.median_ms for r in kernels)
    (base,) = table.baselines
    assert base.ok and base.tflops == pytest.approx(2 * n**3 / (base.median_ms * 1e-3) / 1e12)
    assert all(r.tflops for r in kernels)


def test_measure_ceilings_is_plausible_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CEILINGS", str(tmp_path / "ceilings.json"))
    ceilings = measure_ceilings(force=True, copy_bytes=1 << 30, rep_ms=50)
    print(ceilings)
    assert ceilings.copy_gbps > 500 and (tmp_path / "ceilings.json").exists()
    if "H100" in ceilings.device or "H200" in ceilings.device:
        assert ceilings.matmul_tflops > 100
    assert measure_ceilings() == ceilings  # read back, not measured again


def test_misaligned_tensor_for_a_tma_gemm_is_a_clear_error():
    kernel = gemm_example.matmul(256, 256, 256, 128, 128, 32)
    base = torch.randn(256 * 256 + 8, device="cuda", dtype=torch.float16)
    a = base[1:1 + 256 * 256].view(256, 256)  # one element in: 2 bytes past a 16-byte boundary
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    with pytest.raises(MisalignedTensorError, match=r"tensor A .*16-byte boundary.*16-byte rule") as info:
        run(kernel, a, b, ref=torch.matmul, out_idx=-1)
    print(info.value)
    assert run(kernel, a.clone(), b, ref=torch.matmul, out_idx=-1).passed  # the context is still fine


@pytest.mark.parametrize("dtype, torch_dtype, value", [(T.uint8, torch.uint8, 255), (T.int8, torch.int8, -1)])
def test_integer_copy_writing_the_poison_byte_passes(dtype, torch_dtype, value):
    n = 4096
    a = torch.full((n,), value, device="cuda", dtype=torch_dtype)
    a[::3] = 7
    for ref in (identity, None):  # with and without a reference
        result = run(byte_copy(n, dtype), a, ref=ref)
        print(result)
        assert result.passed and result.outputs[0].unwritten == 0 and result.outputs[0].poison_checked
        assert any("launched twice" in note for note in result.notes)
    skipped = run(byte_copy(n, dtype, skip_block=3), a)  # and a block that writes nothing is still caught
    assert not skipped.passed and skipped.outputs[0].unwritten == 256
    assert skipped.outputs[0].first_unwritten == (3 * 256,)
