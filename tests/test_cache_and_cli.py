"""The report cache across processes, and the command line's output and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GEMM = "examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)"


def _run_py(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cache_serves_a_new_process_without_lowering(tmp_path):
    env = {**os.environ, "TILELAB_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT / "examples")}
    first = _run_py(
        "import tilelab, json; from gemm import matmul\n"
        "r = tilelab.inspect(matmul(512, 512, 512, 128, 128, 32), 'sm_90a')\n"
        "print(json.dumps(r.to_dict()))", env)
    assert first.returncode == 0, first.stderr
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    # A second process whose lowering would fail: the report must come from the cache.
    second = _run_py(
        "import tilelab, json; from tilelab import _adapter; from gemm import matmul\n"
        "def refuse(*a, **k): raise SystemExit('lowered although cached')\n"
        "_adapter.lower = refuse\n"
        "r = tilelab.inspect(matmul(512, 512, 512, 128, 128, 32), 'sm_90a')\n"
        "print(json.dumps(r.to_dict()))\n"
        "try:\n"
        "    tilelab.inspect(matmul(512, 512, 512, 128, 128, 32), 'sm_90a', force=True)\n"
        "except SystemExit as e: print('FORCED', e)\n", env)
    assert second.returncode == 0, second.stderr
    lines = second.stdout.strip().splitlines()
    assert json.loads(lines[0]) == json.loads(first.stdout)
    assert lines[1] == "FORCED lowered although cached"


def test_cache_key_changes_with_the_kernel_and_target(tmp_path, monkeypatch):
    import tilelab
    from tilelab import _inspect

    from gemm import matmul

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    _inspect._MEMORY.clear()
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 64), "sm_90a")  # another tile
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90")  # another target
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")  # a hit
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_corrupt_cache_entry_is_recomputed(tmp_path, monkeypatch):
    import tilelab
    from tilelab import _inspect

    from gemm import matmul

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    _inspect._MEMORY.clear()
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    (entry,) = tmp_path.glob("*.json")
    entry.write_text("{not json")
    _inspect._MEMORY.clear()
    assert tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a") == r


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelab", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_cli_json_and_html(tmp_path):
    out = cli("inspect", GEMM, "--target", "sm_90a", "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"))
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert set(data) >= {"name", "target", "kernels", "sources", "tma_descriptors", "wgmma", "l2_persistence",
                         "arguments", "layouts"}
    assert data["target"] == "sm_90a"
    assert [d["box_dim"] for d in data["tma_descriptors"]] == [[32, 128], [64, 32]]
    assert set(data["sources"]["launchers"]) == {"tvm_ffi", "cython", "nvrtc", "cutedsl"}
    html = (tmp_path / "r.html").read_text()
    assert "gemm_kernel" in html and "128B" in html


def test_cli_summary():
    out = cli("inspect", GEMM)
    assert out.returncode == 0, out.stderr
    assert "gemm_kernel" in out.stdout and "sm_90a" in out.stdout


BROKEN = '''
import tilelang.language as T

def broken(M=256, N=256, K=256):
    @T.prim_func
    def broken_gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((48, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            T.copy(A[by * 128, 0], A_s)
            T.copy(B[0, bx * 128], B_s)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])
    return broken_gemm
'''


@pytest.mark.parametrize("spec, message", [
    ("examples/nope.py:f()", "no such file: examples/nope.py"),
    ("examples/gemm.py", "names a file but no expression"),
    ("examples/gemm.py:matmul(1024,", "bad expression"),
    ("examples/gemm.py:matmull(1)", "name 'matmull' is not defined"),
    ("examples/gemm.py:42", "int is not a TileLang kernel"),
    ("examples/gemm.py:matmul()", "missing 3 required positional arguments"),
])
def test_cli_errors_are_one_clear_line(spec, message):
    out = cli("inspect", spec)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("tilelab: error: ")


def test_cli_lowering_error_points_at_the_kernel_line(tmp_path):
    (tmp_path / "broken.py").write_text(BROKEN)
    out = cli("inspect", f"{tmp_path / 'broken.py'}:broken()")
    assert out.returncode == 2
    assert "T.gemm K shape check failed" in out.stderr
    assert f"{tmp_path / 'broken.py'}:14: T.gemm(A_s, B_s, C_l)" in out.stderr
    assert "Traceback" not in out.stderr and "__tb" not in out.stderr


def test_cli_bad_target_lists_valid_ones():
    out = cli("inspect", GEMM, "--target", "hopper")
    assert out.returncode == 2 and "sm_90a" in out.stderr and "sm_80" in out.stderr
