"""``%%tilelang`` through IPython's own test machinery (``IPython.testing.globalipapp``).

IPython keeps global state (one shell per process), so in a normal run this module starts a
second pytest process on itself, in which the tests below run against the global test shell;
the parent test fails with the child's output if any of them fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = os.environ.get("TILELAB_MAGIC_CHILD") == "1"
ROOT = Path(__file__).resolve().parents[1]

GEMM_CELL = '''import tilelang
import tilelang.language as T


def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm


gemm = matmul(1024, 1024, 1024)
'''

BAD_CELL = '''import tilelang.language as T


@T.prim_func
def gemm(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
    with T.Kernel(1, 1, threads=96) as (bx, by):
        A_shared = T.alloc_shared((128, 64), T.float16)
        B_shared = T.alloc_shared((64, 128), T.float16)
        C_local = T.alloc_fragment((128, 128), T.float32)
        T.clear(C_local)
        T.copy(A, A_shared)
        T.copy(B, B_shared)
        T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C)
'''


if not CHILD:

    def test_magic_suite_in_its_own_process():
        env = dict(os.environ, TILELAB_MAGIC_CHILD="1")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
            cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
        assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]

    def test_loading_the_extension_does_no_work():
        code = (
            "import sys\n"
            "from IPython.testing.globalipapp import start_ipython\n"
            "ip = start_ipython()\n"
            "ip.run_line_magic('load_ext', 'tilelab')\n"
            "assert 'tilelang' in ip.magics_manager.magics['cell']\n"
            "heavy = [m for m in ('tilelang', 'tvm', 'torch', 'ipywidgets', 'tilelab._inspect') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "print('ok')\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr  # and prints nothing

    def test_first_notebook_runs_and_its_static_html_shows_the_report(tmp_path):
        """notebooks/00_first_kernel.ipynb executed headless; its saved output renders with no kernel."""
        nbformat = pytest.importorskip("nbformat")
        nbclient = pytest.importorskip("nbclient")
        nbconvert = pytest.importorskip("nbconvert")
        assert re.search(r'"outputs": \[\]', (ROOT / "notebooks" / "00_first_kernel.ipynb").read_text())  # committed bare
        nb = nbformat.read(ROOT / "notebooks" / "00_first_kernel.ipynb", as_version=4)
        # As JupyterLab saves by default: without the widget state, so viewers fall back to text/html.
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"]
        rich = [o for o in outputs if o.output_type == "display_data"]
        assert rich and "application/vnd.jupyter.widget-view+json" in rich[-1].data
        static = rich[-1].data["text/html"]
        assert '<div class="tilelab-report"' in static and "<script" not in static.lower()
        body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
        assert 'data-descriptor="A_desc"' in body and '<span class="tl-box">' in body

else:
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.error import UsageError
    from IPython.testing.globalipapp import start_ipython

    @pytest.fixture(scope="module")
    def ip():
        shell = start_ipython()
        shell.run_line_magic("load_ext", "tilelab")
        return shell

    @pytest.fixture
    def shown(ip):
        ip.display_pub = CapturingDisplayPublisher()
        return ip.display_pub.outputs

    def magics(ip):
        return ip.magics_manager.registry["TileLangMagics"]

    def run(ip, line, cell):
        return ip.run_cell(f"%%tilelang {line}\n{cell}")

    def truth(report):
        sys.path.insert(0, str(Path(__file__).parent))
        from groundtruth import DRIVER_SWIZZLE, cython_tma_fields

        launcher = report.sources.launcher("cython").text
        out = {}
        for name in re.findall(r"CUtensorMap (\w+);", launcher):
            f = cython_tma_fields(launcher, name)
            out[name] = (tuple(f["boxDim"]), DRIVER_SWIZZLE[f["swizzle"]])
        return out

    def test_help_lists_every_option(ip):
        doc = ip.find_cell_magic("tilelang").__doc__
        for option in ("--target", "--backend", "--out-idx", "--pass-config", "--kernel", "--args", "--show",
                       "--no-compile", "--force", "--quiet", "--run", "--bench", "--sizes"):
            assert option in doc, option
        assert "tvm_ffi" in doc and "cutedsl" in doc

    def test_gemm_cell_binds_and_shows_the_inspector(ip, shown):
        result = run(ip, "", GEMM_CELL)
        assert result.success, result.error_in_exec
        last = magics(ip).last
        assert last.kernels == ["gemm"] and last.shown == "gemm"
        assert type(ip.user_ns["gemm"]).__name__ == "PrimFunc"  # no GPU here: the kernel stays inspectable
        assert callable(ip.user_ns["matmul"])
        report = last.report
        assert report.target == "sm_90a"
        got = {d.name: (d.box_dim, d.swizzle) for d in report.tma_descriptors}
        assert got == truth(report)
        bundle = shown[-1]["data"]
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert '<span class="tl-box">' in bundle["text/html"]
        assert last.inspector.titles[3] == "TMA (2)"

    def test_kernels_in_the_cell_have_their_source(ip, shown):
        import inspect

        assert run(ip, "--quiet", GEMM_CELL).success
        source = inspect.getsource(ip.user_ns["matmul"])
        assert source.startswith("def matmul(M, N, K") and "T.gemm(A_shared, B_shared, C_local)" in source

    def test_rerun_hits_the_cache_and_force_bypasses_it(ip, shown, monkeypatch):
        import tilelab._inspect as engine

        calls = []
        real = engine.inspect

        def counting(*args, **kwargs):
            calls.append(kwargs.get("force"))
            return real(*args, **kwargs)

        monkeypatch.setattr(engine, "inspect", counting)
        cell = GEMM_CELL.replace("matmul(1024, 1024, 1024)", "matmul(2048, 1024, 1024)")
        assert run(ip, "", cell).success
        assert calls == [False] and not magics(ip).last.cache_hit
        assert run(ip, "", cell).success
        assert calls == [False] and magics(ip).last.cache_hit
        assert magics(ip).last.seconds < 1.0
        assert run(ip, "--force", cell).success
        assert calls == [False, True] and not magics(ip).last.cache_hit
        # a different option is a different cache entry
        assert run(ip, "--show summary,tma", cell).success
        assert not magics(ip).last.cache_hit
        assert magics(ip).last.inspector.titles == ("Summary", "TMA (2)")

    def test_a_changed_earlier_cell_is_not_a_stale_hit(ip, shown):
        ip.run_cell(GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", ""))
        assert run(ip, "--quiet", "gemm = matmul(1024, 1024, 1024)").success
        first = magics(ip).last.report
        ip.run_cell(GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", "").replace("block_K=32", "block_K=64"))
        assert run(ip, "--quiet", "gemm = matmul(1024, 1024, 1024)").success
        last = magics(ip).last
        assert not last.cache_hit
        assert last.report.tma_descriptors[0].box_dim != first.tma_descriptors[0].box_dim

    def test_factory_with_args_and_kernel(ip, shown):
        cell = GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", "")
        assert run(ip, '--kernel matmul --args "512, 512, 512, block_K=64" --quiet', cell).success
        report = magics(ip).last.report
        assert report.name == "gemm"
        assert [d.global_dim for d in report.tma_descriptors] == [(512, 512), (512, 512)]
        assert report.tma_descriptors[0].box_dim == (64, 128)

    def test_python_error_points_at_the_cell_line_and_keeps_names(ip, shown):
        ip.user_ns["keep_me"] = "before"
        result = run(ip, "", "keep_me = 'after'\nfresh_name = 1\nthis_name_is_undefined + 1\n")
        assert isinstance(result.error_in_exec, NameError)
        assert ip.user_ns["keep_me"] == "before" and "fresh_name" not in ip.user_ns
        text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(result.error_in_exec._render_traceback_()))
        # line 1 is %%tilelang; the failing statement is line 4 of the notebook cell
        assert re.search(r"line 4\b", text) and "this_name_is_undefined + 1" in text
        assert "_magic.py" not in text and "interactiveshell.py" not in text

    def test_lowering_error_is_short_with_the_kernel_line_and_a_folded_trace(ip, shown):
        assert run(ip, "--quiet", GEMM_CELL).success
        good = ip.user_ns["gemm"]
        result = run(ip, "", BAD_CELL)
        err = result.error_in_exec
        assert type(err).__name__ == "LoweringError"
        assert ip.user_ns["gemm"] is good  # the earlier kernel is still bound
        lines = err._render_traceback_()
        assert lines[0].startswith("LoweringError: TileLang lowering failed: ") and "warp" in lines[0]
        assert lines[1].strip() == "cell line 14: T.gemm(A_shared, B_shared, C_local)"
        assert ("%%tilelang\n" + BAD_CELL).split("\n")[13].strip() == "T.gemm(A_shared, B_shared, C_local)"
        assert len(lines) <= 4
        folded = shown[-1]["data"]["text/html"]
        assert "<details><summary" in folded and "Full TileLang trace" in folded
        assert "Traceback" in folded or "File " in folded

    @pytest.mark.parametrize("line, needle", [
        ("--bogus", "Valid options: --target TARGET, --backend {tvm_ffi,cython,nvrtc,cutedsl}"),
        ("--backend nope", "choose from 'tvm_ffi', 'cython', 'nvrtc', 'cutedsl'"),
        ("--target sm_9x", "sm_90a"),
        ("--target cuda", "names no arch"),
        ("--show tma,nope", "choose from summary, cuda, launcher, tma"),
        ("--out-idx x", "--out-idx takes an integer"),
        ("--pass-config tl.no_such_key=1", "Valid keys: "),
        ("--kernel nothere", "It defines: gemm"),
        ("--sizes M", "--sizes takes NAME=INT"),
    ])
    def test_bad_options_say_what_is_valid(ip, shown, line, needle):
        result = run(ip, line, GEMM_CELL)
        assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
        assert needle in str(result.error_in_exec)

    def test_compiles_and_binds_on_a_gpu(ip, shown, monkeypatch):
        import tilelab._adapter as adapter

        compiled = []

        class FakeKernel:
            pass

        def fake_compile(obj, **kwargs):
            compiled.append(kwargs)
            return FakeKernel()

        monkeypatch.setattr(adapter, "has_gpu", lambda: True)
        monkeypatch.setattr(adapter, "compile_kernel", fake_compile)
        assert run(ip, "--backend cython --quiet --target sm_90a", GEMM_CELL).success
        assert isinstance(ip.user_ns["gemm"], FakeKernel)
        assert compiled[-1]["backend"] == "cython" and compiled[-1]["target"] == "sm_90a"
        # a re-run is a cache hit and binds the same compiled kernel again
        first = ip.user_ns["gemm"]
        assert run(ip, "--backend cython --quiet --target sm_90a", GEMM_CELL).success
        assert magics(ip).last.cache_hit and ip.user_ns["gemm"] is first and len(compiled) == 1
        assert run(ip, "--no-compile --quiet", GEMM_CELL).success
        assert type(ip.user_ns["gemm"]).__name__ == "PrimFunc"

    def test_run_without_a_gpu_says_inspection_still_works(ip, shown, capsys):
        assert run(ip, "--run --bench --quiet", GEMM_CELL).success
        out = capsys.readouterr().out
        assert "no CUDA GPU" in out and "inspection still works" in out

    def test_a_cell_without_kernels_runs_normally(ip, shown, capsys):
        assert run(ip, "", "plain_value = 41 + 1").success
        assert ip.user_ns["plain_value"] == 42
        assert "defines no TileLang kernel" in capsys.readouterr().out
        assert not shown
