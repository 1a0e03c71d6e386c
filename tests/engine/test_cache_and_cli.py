"""The report cache across processes, and the command line's output and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GEMM = "examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)"


def _run_py(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
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
        "import tilelab, json; from tilelab import _tilelang; from gemm import matmul\n"
        "def refuse(*a, **k): raise SystemExit('lowered although cached')\n"
        "_tilelang.lower = refuse\n"
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
    from gemm import matmul

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 64), "sm_90a")  # another tile
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90")  # another target
    tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")  # a hit
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_corrupt_cache_entry_is_recomputed(tmp_path, monkeypatch):
    from gemm import matmul

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    (entry,) = tmp_path.glob("*.json")
    entry.write_text("{not json")
    from tilelab import CacheEntryWarning

    with pytest.warns(CacheEntryWarning, match="not JSON"):
        assert tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a") == r


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelab", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def cli_here(monkeypatch, capsys):
    """The command line's ``main`` run in this process from the repository root, as ``python -m
    tilelab`` runs it: a CompletedProcess of its exit status, stdout and stderr. (Fresh processes
    cost seconds each: the test below runs ``python -m tilelab`` itself; its summary and errors run here.)"""
    from tilelab.__main__ import main

    monkeypatch.chdir(ROOT)

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as end:  # argparse's own refusals
            code = end.code
        printed = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, printed.out, printed.err)

    return run


def test_cli_json_and_html(tmp_path):
    out = cli("inspect", GEMM, "--target", "sm_90a", "--json", str(tmp_path / "r.json"),
              "--html", str(tmp_path / "r.html"))
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert set(data) >= {"name", "target", "kernels", "sources", "tma_descriptors", "wgmma", "l2_persistence",
                         "arguments", "layouts"}
    assert data["target"] == "sm_90a"
    assert [d["box_dim"] for d in data["tma_descriptors"]] == [[32, 128], [64, 32]]
    assert set(data["sources"]["launchers"]) == {"tvm_ffi", "cython", "nvrtc", "cutedsl"}
    html = (tmp_path / "r.html").read_text()
    assert "gemm_kernel" in html and "128B" in html


def test_cli_summary(cli_here):
    out = cli_here("inspect", GEMM)
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
def test_cli_errors_are_one_clear_line(spec, message, cli_here):
    out = cli_here("inspect", spec)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("tilelab: error: ")


def test_cli_lowering_error_points_at_the_kernel_line(tmp_path, cli_here):
    (tmp_path / "broken.py").write_text(BROKEN)
    out = cli_here("inspect", f"{tmp_path / 'broken.py'}:broken()")
    assert out.returncode == 2
    assert "T.gemm K shape check failed" in out.stderr
    assert f"{tmp_path / 'broken.py'}:14: T.gemm(A_s, B_s, C_l)" in out.stderr
    assert "Traceback" not in out.stderr and "__tb" not in out.stderr


def test_cli_bad_target_lists_valid_ones(cli_here):
    out = cli_here("inspect", GEMM, "--target", "hopper")
    assert out.returncode == 2 and "sm_90a" in out.stderr and "sm_80" in out.stderr


# --------------------------------------------------------------------------------------------
# The cache follows the engine's code; failures that may not repeat are not cached
# --------------------------------------------------------------------------------------------

_INSPECT_512 = ("import tilelab, json; from gemm import matmul\n"
                "r = tilelab.inspect(matmul(512, 512, 512, 128, 128, 32), 'sm_90a')\n"
                "print(tilelab.__file__)\n")


@pytest.mark.slow
@pytest.mark.heavy  # four fresh processes; make test keeps test_cache_serves_a_new_process_without_lowering
def test_an_edit_to_the_engine_invalidates_the_cache(tmp_path):
    """A copy of the package in a new process: the same code hits, an edited engine file misses."""
    import shutil

    shutil.copytree(ROOT / "tilelab", tmp_path / "pkg" / "tilelab", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    env = {**os.environ, "TILELAB_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkg"), str(ROOT / "examples")])}

    def run() -> None:  # from tmp_path, so that the copy (not the checkout) is imported
        out = subprocess.run([sys.executable, "-c", _INSPECT_512], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(tmp_path / "pkg" / "tilelab" / "__init__.py")

    for _ in range(2):
        run()
    assert len(list(cache.glob("*.json"))) == 1
    for n, name in enumerate(("records/kernel.py", "engine/tma_rules.py"), start=2):
        with open(tmp_path / "pkg" / "tilelab" / name, "a") as f:
            f.write("\n# an edit\n")
        run()
        assert len(list(cache.glob("*.json"))) == n, name
    # a change outside the engine (a renderer) keeps the entries
    with open(tmp_path / "pkg" / "tilelab" / "render" / "text.py", "a") as f:
        f.write("\n# an edit\n")
    run()
    assert len(list(cache.glob("*.json"))) == 3


def test_a_transient_launcher_failure_is_not_cached(tmp_path, monkeypatch):
    from gemm import matmul
    from tilelang.jit.adapter.nvrtc import wrapper as nvrtc_wrapper

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    real = nvrtc_wrapper.TLNVRTCSourceWrapper

    class Flaky:
        def __init__(self, *args, **kwargs):
            raise OSError("disk full while generating")

    kernel = matmul(256, 256, 256, 128, 128, 32)
    first = tilelab.inspect(kernel, "sm_90a")  # cached: every launcher generated
    assert len(list(tmp_path.glob("*.json"))) == 1
    monkeypatch.setattr(nvrtc_wrapper, "TLNVRTCSourceWrapper", Flaky)
    failed = tilelab.inspect(kernel, "sm_90a", force=True)
    assert failed.sources.launcher("nvrtc").text is None
    assert any("nvrtc launcher failed to generate" in n and "not cached" in n for n in failed.notes)
    assert list(tmp_path.glob("*.json")) == []  # the forced run also dropped the old entry
    monkeypatch.setattr(nvrtc_wrapper, "TLNVRTCSourceWrapper", real)
    again = tilelab.inspect(kernel, "sm_90a")  # not served the failed report
    assert again.sources.launcher("nvrtc").text == first.sources.launcher("nvrtc").text
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_a_backend_that_cannot_target_the_arch_is_cached(tmp_path, monkeypatch):
    """TileLang's own "this backend does not support this target" is a decision: it is cached."""
    import dataclasses

    from gemm import matmul
    from tilelang.backend import module as backend_module

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    real_get = backend_module.get_backend

    def get_backend(name):
        module = real_get(name)
        specs = tuple(dataclasses.replace(s, supports_target=lambda t: False) if s.name == "nvrtc" else s
                      for s in module.execution_backends)
        return dataclasses.replace(module, execution_backends=specs) if dataclasses.is_dataclass(module) else module

    monkeypatch.setattr(backend_module, "get_backend", get_backend)
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    nv = r.sources.launcher("nvrtc")
    assert nv.text is None and nv.reason == "TileLang's nvrtc backend does not support target sm_90a"
    assert not any("not cached" in n for n in r.notes)
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_force_overwrites_the_cached_report(tmp_path, monkeypatch):
    from gemm import matmul

    import tilelab

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    kernel = matmul(256, 256, 256, 128, 128, 32)
    real = tilelab.inspect(kernel, "sm_90a")
    (entry,) = tmp_path.glob("*.json")
    # an entry for this very kernel whose report differs (as one from an older engine might)
    stored = json.loads(entry.read_text())
    stored["report"]["notes"] = ["stale"]
    entry.write_text(json.dumps(stored))
    assert tilelab.inspect(kernel, "sm_90a").notes == ("stale",)  # served from the cache
    assert tilelab.inspect(kernel, "sm_90a", force=True).notes == real.notes != ("stale",)
    assert json.loads(entry.read_text())["report"]["notes"] == list(real.notes)  # overwritten on disk
    assert tilelab.inspect(kernel, "sm_90a") == real


# --------------------------------------------------------------------------------------------
# The command line: output paths and unexpected errors
# --------------------------------------------------------------------------------------------

SMALL = "examples/gemm.py:matmul(256, 256, 256, 128, 128, 32)"


@pytest.mark.parametrize("option", ["--json", "--html"])
def test_cli_output_into_a_missing_folder(option, tmp_path):
    target = tmp_path / "no-such-folder" / "report.out"
    out = cli("inspect", SMALL, option, str(target))
    assert out.returncode == 2
    assert out.stderr == (f"tilelab: error: {option} {target}: the folder {target.parent} does not exist; "
                          "create it first\n")


@pytest.mark.heavy
def test_cli_output_onto_a_folder_or_an_unwritable_place(tmp_path):
    out = cli("inspect", SMALL, "--json", str(tmp_path))
    assert out.returncode == 2 and "is a folder" in out.stderr and "Traceback" not in out.stderr
    # /proc takes no new files, even for root (permission bits would not stop root)
    out = cli("inspect", SMALL, "--html", "/proc/tilelab-report.html")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("tilelab: error: --html /proc/tilelab-report.html: ")
    assert len(out.stderr.strip().splitlines()) == 1


CRASHING = '''
import sys
sys.path.insert(0, {examples!r})
from tilelab import _tilelang
from l2_persist import bias_add

def crash(lowered):
    raise ValueError("invalid literal for int() with base 10: 'm * 16384'")

_tilelang.l2_windows = crash  # a bug inside the engine, as the reviewer's L2 crash was
'''


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_internal_error_is_one_message_and_asks_for_a_report(tmp_path):
    (tmp_path / "crashing.py").write_text(CRASHING.format(examples=str(ROOT / "examples")))
    spec = f"{tmp_path / 'crashing.py'}:bias_add(256, 256)"
    out = cli("inspect", spec, "--force")
    assert out.returncode == 3
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("tilelab: error: internal error: ValueError: invalid literal for int()")
    assert "please report" in out.stderr and "TILELAB_DEBUG=1" in out.stderr
    debug = subprocess.run([sys.executable, "-m", "tilelab", "inspect", spec, "--force"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "TILELAB_DEBUG": "1"})
    assert debug.returncode == 3
    assert "Traceback (most recent call last)" in debug.stderr and "def crash" not in debug.stdout
    assert "please report" in debug.stderr


def test_the_memory_mirror_follows_the_file(tmp_path, monkeypatch):
    """A repeated inspect is served from memory while the entry file holds what it mirrors; a file
    deleted by hand is recomputed; a cache folder that cannot be written still serves from memory."""
    from gemm import matmul

    import tilelab
    from tilelab import _tilelang

    lowered = []
    real_lower = _tilelang.lower
    monkeypatch.setattr(_tilelang, "lower", lambda *a, **k: lowered.append(1) or real_lower(*a, **k))
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    kernel = matmul(256, 256, 256, 128, 128, 32)
    first = tilelab.inspect(kernel, "sm_90a")
    assert tilelab.inspect(kernel, "sm_90a") is first and len(lowered) == 1  # the mirror, no JSON parsed
    (entry,) = (tmp_path / "cache").glob("*.json")
    entry.unlink()
    assert tilelab.inspect(kernel, "sm_90a") == first and len(lowered) == 2  # gone by hand: recomputed
    assert entry.exists()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(blocked))
    again = tilelab.inspect(kernel, "sm_90a")
    assert tilelab.inspect(kernel, "sm_90a") is again and len(lowered) == 3  # unwritable: memory only
