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
ROOT = Path(__file__).resolve().parents[2]

def _gemm_cell() -> str:
    """A notebook cell that defines tilelab's one Hopper GEMM (tilelab/kernels/gemm.py) and builds it."""
    import inspect

    from tilelab.kernels import gemm as shipped

    return ("import tilelang\nimport tilelang.language as T\n\n\n" + inspect.getsource(shipped.matmul)
            + "\n\ngemm = matmul(1024, 1024, 1024)\n")


GEMM_CELL = _gemm_cell()

CPU_ADD_CELL = '''import torch
import tilelang.language as T


@T.prim_func
def vadd(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32), C: T.Tensor((1024,), T.float32)):
    with T.Kernel(4) as bx:
        for i in T.Parallel(256):
            C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]
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

    @pytest.mark.slow
    def test_magic_suite_in_its_own_process():
        env = dict(os.environ, TILELAB_MAGIC_CHILD="1")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
            cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True, timeout=900,
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
            "heavy = [m for m in ('tilelang', 'tvm', 'torch', 'ipywidgets', 'tilelab.engine.inspect')\n"
            "         if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "print('ok')\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr  # and prints nothing

    def test_the_extension_registers_one_cell_magic_and_no_line_magic():
        code = (
            "from IPython.testing.globalipapp import start_ipython\n"
            "ip = start_ipython()\n"
            "before = {kind: set(ip.magics_manager.magics[kind]) for kind in ('line', 'cell')}\n"
            "ip.run_line_magic('load_ext', 'tilelab')\n"
            "after = {kind: set(ip.magics_manager.magics[kind]) for kind in ('line', 'cell')}\n"
            "print(sorted(after['cell'] - before['cell']), sorted(after['line'] - before['line']))\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "['tilelang'] []"

    def test_a_first_cell_that_fails_to_build_prints_no_tilelang_log(tmp_path):
        """TileLang installs its log handler when the cell imports it: the dump is quiet even then."""
        cell = ("import tilelang.language as T\n\n@T.prim_func\n"
                "def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):\n"
                "    with T.Kernel(1, threads=128) as bx:\n"
                "        S = T.alloc_shared((128, 64), T.float16)\n"
                "        T.copy(S, B, 1, 2, 3, 4)\n")
        code = (
            "from IPython.core.displaypub import CapturingDisplayPublisher\n"
            "from IPython.testing.globalipapp import start_ipython\n"
            "ip = start_ipython()\n"
            "ip.display_pub = CapturingDisplayPublisher()\n"
            "ip.run_line_magic('load_ext', 'tilelab')\n"
            f"r = ip.run_cell('%%tilelang\\n' + {cell!r})\n"
            "print('ERROR', type(r.error_in_exec).__name__)\n"
        )
        env = dict(os.environ, TILELAB_CACHE_DIR=str(tmp_path))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        assert "ERROR LoweringError" in proc.stdout, proc.stdout + proc.stderr
        both = proc.stdout + proc.stderr
        assert "CRITICAL" not in both and "Failed to build prim_func" not in both and "make_closure" not in both
        assert "cell line 8: T.copy(S, B, 1, 2, 3, 4)" in proc.stdout  # line 1 is %%tilelang

    @pytest.mark.slow
    def test_first_notebook_runs_and_its_static_html_shows_the_report(tmp_path):
        """examples/hopper_gemm.ipynb executed headless; its saved output renders with no kernel."""
        nbformat = pytest.importorskip("nbformat")
        nbclient = pytest.importorskip("nbclient")
        nbconvert = pytest.importorskip("nbconvert")
        assert re.search(r'"outputs": \[\]', (ROOT / "examples" / "hopper_gemm.ipynb").read_text())  # committed bare
        nb = nbformat.read(ROOT / "examples" / "hopper_gemm.ipynb", as_version=4)
        # As JupyterLab saves by default: without the widget state, so viewers fall back to text/html.
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"]
        rich = [o for o in outputs if o.output_type == "display_data"]
        assert rich and set(rich[-1].data) == {"text/html", "text/plain"}
        static = rich[-1].data["text/html"]
        assert '<div class="tilelab-report"' in static and "<script" not in static.lower()
        body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
        assert 'data-descriptor="A_desc"' in body and '<span class="tl-box">' in body
        # every tab's panel is in the export, and the run notebook stays light (one copy of the page)
        for name in ("summary", "cell", "cuda", "launcher", "tma", "wgmma", "layouts", "arguments"):
            assert re.search(rf'<section class="tl-panel"[^>]* id="tl-[0-9a-f]+-{name}"', body), name
        assert len(nbformat.writes(nb).encode()) < 400 * 1024

else:
    from IPython.core.error import UsageError
    from ipython_shell import ip, magics, run, shown  # noqa: F401  (fixtures)

    from tilelab.records.errors import LoweringError

    def truth(report):
        sys.path.insert(0, str(Path(__file__).parents[1]))
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
        assert set(bundle) == {"text/html", "text/plain"}  # no widget view to go missing after a restart
        assert '<span class="tl-box">' in bundle["text/html"]
        assert last.inspector.titles[:5] == ("Summary", "Cell", "CUDA", "Launcher", "TMA (2)")
        # the Cell tab is the cell as the user sees it, line 1 the magic's line; T.copy lines link to the rows
        cell = last.inspector.tab("cell")
        rid = re.search(r'data-src="([^"]+)-cell"', cell).group(1)
        lines = ("%%tilelang\n" + GEMM_CELL).split("\n")
        marked = [int(n) for n in re.findall(rf'<span class="tl-mark" id="{rid}-cell-L(\d+)">', cell)]
        assert [lines[n - 1].strip() for n in marked] == ["T.copy(A[by * block_M, k * block_K], A_shared)",
                                                         "T.copy(B[k * block_K, bx * block_N], B_shared)",
                                                         "T.gemm(A_shared, B_shared, C_local)"]

    def test_kernels_in_the_cell_have_their_source(ip, shown):
        import inspect

        assert run(ip, "--quiet", GEMM_CELL).success
        source = inspect.getsource(ip.user_ns["matmul"])
        assert source.startswith("def matmul(M, N, K") and "T.gemm(A_shared, B_shared, C_local)" in source

    def test_rerun_hits_the_cache_and_force_bypasses_it(ip, shown, monkeypatch):
        import tilelab.engine.inspect as engine

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
        assert run(ip, "--force", cell).success
        assert calls == [False, True] and not magics(ip).last.cache_hit
        forced = magics(ip).last.report
        # options that do not shape the build share the entry, which --force replaced
        for line in ("--show summary,tma", "--quiet", "--run --quiet", "--bench --show tma"):
            assert run(ip, line, cell).success, line
            assert magics(ip).last.cache_hit and magics(ip).last.report is forced, line
        assert calls == [False, True]
        assert magics(ip).last.inspector.titles == ("TMA (2)",)
        # options that do shape it are other entries
        for line in ("--target sm_80 --quiet", '--pass-config tl.disable_tma_lower=True --quiet',
                     "--out-idx -1 --quiet", "--kernel gemm --quiet"):
            assert run(ip, line, cell).success, line
            assert not magics(ip).last.cache_hit, line
        assert len(calls) == 6
        # the cache keeps reports and kernels, never widgets: a hit builds a new inspector
        shown_before = magics(ip).last.inspector
        assert run(ip, "", cell).success
        assert magics(ip).last.cache_hit and magics(ip).last.inspector is not shown_before

    def test_a_changed_earlier_cell_is_not_a_stale_hit(ip, shown):
        ip.run_cell(GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", ""))
        assert run(ip, "--quiet", "gemm = matmul(1024, 1024, 1024)").success
        first = magics(ip).last.report
        ip.run_cell(GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", "").replace("block_K=64", "block_K=32"))
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
        assert "cell/magic.py" not in text and "interactiveshell.py" not in text

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
        # the doctor's diagnosis: the pass, the tile op, the cause and what to change
        assert lines[2].strip() == "failed in pass tl.LayoutInference, at T.gemm"
        assert lines[3].strip().startswith("cause: the block's warps cannot tile the GEMM")
        assert lines[4].strip().startswith("what to change: ")
        # with the line that offers a minimal reproducer and the facts of the kernel the cause was read from
        assert len(lines) <= 8
        assert "application/vnd.jupyter.widget-view+json" in shown[-1]["data"]  # the reproducer's button
        folded = shown[-2]["data"]["text/html"]
        assert "<details><summary" in folded and "Full TileLang trace" in folded
        assert "Traceback" in folded or "File " in folded
        # shown once: the box holds only the folded trace, the traceback the message and the line
        outside = re.sub(r"<pre.*?</pre>", "", folded, flags=re.S)
        assert "cell line" not in outside and err.summary[:40] not in outside

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
        ("--sizes M=1;;M=2", "empty size set"),
        ("--target sm_999", "Accepted targets (cuda: sm_70, sm_75, sm_80"),
        ("--target llvm", 'use "c"'),
        ("--target gfx1100", "hip: gfx90a, gfx942, gfx950"),
        ("--rep-ms -3", "--rep-ms takes a positive number"),
        ("--run --timeout 0", "--timeout: expected a positive number of seconds"),
        ("--run --timeout soon", "--timeout: expected a positive number of seconds"),
        ("--sanitize leakcheck", "choose one of memcheck, racecheck, synccheck, initcheck"),
    ])
    def test_bad_options_say_what_is_valid(ip, shown, line, needle):
        ip.user_ns.pop("gemm", None)
        result = run(ip, line, GEMM_CELL)
        assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
        assert needle in str(result.error_in_exec)
        assert "gemm" not in ip.user_ns  # nothing of the cell stays bound

    def test_compiles_and_binds_on_a_gpu(ip, shown, monkeypatch):
        import tilelab._tilelang as adapter

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
        assert compiled[-1]["force"] is False
        assert magics(ip).last.bound == {"gemm": "compiled gemm"}
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

    def test_target_c_runs_and_benches_on_the_cpu(ip, shown, capsys):
        assert run(ip, "--target c --run --bench --rep-ms 5 --ref torch.add", CPU_ADD_CELL).success
        out = capsys.readouterr().out
        assert "compiled for c (cython)" in out
        last = magics(ip).last
        checked, timed = last.timing
        assert checked.passed and checked.device.startswith("CPU")
        assert timed.method.startswith("wall clock") and timed.samples_ms
        assert last.report.target == "c" and "vadd_kernel" in last.report.sources.device
        # the prim_func's name now holds the kernel compiled for the CPU
        assert ip.user_ns["vadd"].target.kind.name == "c"

    def test_an_amd_target_is_inspected_its_gpu_launch_refused_and_its_tile_program_run_on_the_cpu(ip, shown,
                                                                                                    capsys):
        assert run(ip, "--target gfx942 --bench", GEMM_CELL).success
        out = capsys.readouterr().out
        assert "gfx942" in out and "inspect-only" in out and "inspection still works" in out
        last = magics(ip).last
        assert last.report.target == "gfx942" and last.report.mfma and not last.compiled
        assert last.inspector.titles[:3] == ("Summary", "Cell", "HIP") and "MFMA (1)" in last.inspector.titles
        assert not last.timing
        assert run(ip, "--target gfx942 --run --quiet", GEMM_CELL).success  # the HIP kernel's tile program
        checked = magics(ip).last.timing[0]
        assert checked.passed and checked.backend.startswith("emulated")

    def test_a_cell_without_kernels_runs_normally(ip, shown, capsys):
        assert run(ip, "", "plain_value = 41 + 1").success
        assert ip.user_ns["plain_value"] == 42
        assert "defines no TileLang kernel" in capsys.readouterr().out
        assert not shown

    # -- stale-cache regressions: values from earlier cells ----------------------------------
    FACTORY_GLOBAL_BK = '''import tilelang.language as T


def matmul_bk(M, N, K):
    @T.prim_func
    def gemm_bk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_shared = T.alloc_shared((128, BK), T.float16)
            B_shared = T.alloc_shared((BK, 128), T.float16)
            C_local = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=3):
                T.copy(A[by * 128, k * BK], A_shared)
                T.copy(B[k * BK, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])
    return gemm_bk
'''

    JIT_DEFAULT_BLOCK = '''import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def add_one(N, block=BLOCK):
    @T.prim_func
    def add_one_kernel(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1
    return add_one_kernel
'''

    def test_a_factory_global_from_an_earlier_cell_is_not_a_stale_hit(ip, shown):
        for bk in (32, 64, 32):
            ip.run_cell(f"BK = {bk}")
            assert run(ip, '--args "1024, 1024, 1024" --quiet', FACTORY_GLOBAL_BK).success
            a_desc = magics(ip).last.report.tma_descriptors[0]
            # A's box is BK elements wide (innermost) and 128 rows: set by BK, not by the cache
            assert a_desc.box_dim == (bk, 128), (bk, a_desc.box_dim)
        assert magics(ip).last.cache_hit  # BK = 32 again: the first entry is still right

    def test_a_jit_default_from_an_earlier_cell_is_not_a_stale_hit(ip, shown):
        grids = []
        for block in (128, 256):
            ip.run_cell(f"BLOCK = {block}")
            assert run(ip, '--args "1024" --quiet', JIT_DEFAULT_BLOCK).success
            last = magics(ip).last
            assert not last.cache_hit
            grids.append(last.report.kernels[0].grid[0])
            assert last.report.kernels[0].block[0] == block
        assert grids == [1024 // 128, 1024 // 256]

    # -- which functions --args specialise ---------------------------------------------------
    def test_a_helper_function_beside_the_factory_is_not_a_kernel(ip, shown):
        ip.run_cell("BK = 32")
        cell = "def helper(x):\n    return x * 2\n\n\n" + FACTORY_GLOBAL_BK
        result = run(ip, '--args "1024, 1024, 1024" --quiet', cell)
        assert result.success, result.error_in_exec
        assert magics(ip).last.kernels == ["matmul_bk"] and callable(ip.user_ns["helper"])
        # a helper whose signature fits too: called, it gives no kernel, so it is left out
        cell = "def helper(*args):\n    return sum(args)\n\n\n" + FACTORY_GLOBAL_BK
        assert run(ip, '--args "1024, 1024, 1024" --quiet', cell).success
        assert magics(ip).last.kernels == ["matmul_bk"]

    def test_two_factories_fitting_args_need_kernel(ip, shown):
        ip.run_cell("BK = 32")
        ip.user_ns.pop("matmul_bk2", None)
        cell = FACTORY_GLOBAL_BK + "\n\n" + FACTORY_GLOBAL_BK.split("\n", 2)[2].replace("matmul_bk", "matmul_bk2")
        result = run(ip, '--args "1024, 1024, 1024" --quiet', cell)
        assert isinstance(result.error_in_exec, UsageError)
        message = str(result.error_in_exec)
        assert "matmul_bk(M, N, K)" in message and "matmul_bk2(M, N, K)" in message and "--kernel" in message
        assert "matmul_bk2" not in ip.user_ns  # the failed cell bound nothing
        assert run(ip, '--args "1024, 1024, 1024" --kernel matmul_bk2 --quiet', cell).success
        assert magics(ip).last.shown == "matmul_bk2"

    def test_args_fitting_no_function_say_so(ip, shown):
        result = run(ip, '--args "1, 2, 3"', "def helper(x):\n    return x\n")
        assert isinstance(result.error_in_exec, UsageError)
        assert "fits none of the functions" in str(result.error_in_exec) and "helper(x)" in str(result.error_in_exec)

    def test_a_jit_kernel_without_args_says_which_are_missing(ip, shown):
        ip.run_cell("BLOCK = 128")
        result = run(ip, "--quiet", JIT_DEFAULT_BLOCK)
        err = result.error_in_exec
        assert isinstance(err, UsageError), err
        message = str(err)
        assert "add_one(N, block=128)" in message and "N is missing" in message
        assert '--args "1024"' in message
        assert message.count("failed") == 0 and "contextlib" not in message

    # -- errors ------------------------------------------------------------------------------
    ELAB_CELL = '''import tilelang.language as T

@T.prim_func
def bad_copy(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128, 64), T.float16)
        T.copy(A, S)
        T.copy(S, B, 1, 2, 3, 4)
'''

    def test_an_error_while_a_prim_func_is_built_is_short(ip, shown, capfd):
        ip.user_ns["keep_me"] = "before"
        ip.user_ns.pop("bad_copy", None)
        result = run(ip, "", "keep_me = 'after'\n" + ELAB_CELL)
        err = result.error_in_exec
        assert type(err).__name__ == "LoweringError", err
        assert ip.user_ns["keep_me"] == "before" and "bad_copy" not in ip.user_ns
        lines = err._render_traceback_()
        assert len(lines) <= 7  # with the line that offers a minimal reproducer
        assert lines[0].startswith("LoweringError: ") and "copy() takes 2 positional arguments" in lines[0]
        assert lines[2].strip() == "failed in building the kernel from its Python source, at T.copy"
        assert lines[3].strip().startswith("cause: a tile operation called with the wrong arguments: T.copy")
        cell_lines = ("%%tilelang\nkeep_me = 'after'\n" + ELAB_CELL).split("\n")
        number = next(n for n, text in enumerate(cell_lines, 1) if "T.copy(S, B, 1, 2, 3, 4)" in text)
        assert lines[1].strip() == f"cell line {number}: T.copy(S, B, 1, 2, 3, 4)"
        assert "application/vnd.jupyter.widget-view+json" in shown[-1]["data"]  # the reproducer's button
        folded = shown[-2]["data"]["text/html"]
        assert "<b>bad_copy</b>" in folded and "Full TileLang trace" in folded
        assert "Failed to build prim_func from bad_copy" in folded  # TileLang's log, folded
        err_out = capfd.readouterr().err
        assert "CRITICAL" not in err_out and "Failed to build prim_func" not in err_out

    def test_a_syntax_error_shows_only_the_cell_line(ip, shown, capsys):
        ip.user_ns.pop("before_syntax", None)
        capsys.readouterr()
        result = run(ip, "", "before_syntax = 1\ny = (\n")
        err = result.error_in_exec
        assert isinstance(err.error, SyntaxError) and err.lineno == 3
        printed = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # what IPython showed
        for text in (printed, re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(err._render_traceback_()))):
            assert "y = (" in text and "SyntaxError: '(' was never closed" in text
            assert re.search(r":3\b|line 3\b", text), text
            assert "cell/magic.py" not in text and "interactiveshell.py" not in text and "run_cell_magic" not in text
        assert "before_syntax" not in ip.user_ns

    def test_a_python_error_as_printed_has_no_magic_frames(ip, shown, capsys):
        capsys.readouterr()
        result = run(ip, "", "import tilelang\nx = 1\nundefined_name_here\n")
        assert isinstance(result.error_in_exec, NameError)
        printed = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
        assert "undefined_name_here" in printed and re.search(r"line 4\b", printed)
        assert "cell/magic.py" not in printed and "contextlib.py" not in printed
        assert "interactiveshell.py" not in printed

    def test_the_error_html_escapes_what_the_kernel_says(ip, shown):
        from tilelab.records.errors import LoweringError

        cell = ('import tilelang.language as T\n\n@T.prim_func\n'
                'def says(A: T.Tensor((128,), T.float16)):\n'
                '    with T.Kernel(1, threads=128) as bx:\n'
                '        raise ValueError("<script>alert(1)</script>")\n')
        result = run(ip, "", cell)
        assert type(result.error_in_exec).__name__ == "LoweringError", result.error_in_exec
        assert "<script" not in str(shown[-1]["data"]).lower()  # the reproducer's button says nothing of it
        page = shown[-2]["data"]["text/html"]
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page.lower()
        # a kernel name with markup (possible through a factory's __name__) is escaped too
        from tilelab.cell.session import FoldedTrace

        data, _ = ip.display_formatter.format(FoldedTrace(LoweringError("x <img src=y>", kernel="<script>k</script>")))
        page = data["text/html"]
        assert "<b>&lt;script&gt;k&lt;/script&gt;</b>" in page and "<img" not in page and "<script" not in page

    # -- options reaching the report -----------------------------------------------------------
    def test_pass_config_and_target_reach_the_report(ip, shown):
        result = run(ip, "--target sm_80 --pass-config tl.disable_warp_specialized=True --quiet", GEMM_CELL)
        assert result.success, result.error_in_exec
        report = magics(ip).last.report
        assert report.target == "sm_80"
        # Ampere has neither the tensor memory accelerator nor warpgroup MMA
        assert report.tma_descriptors == () and report.wgmma == ()
        assert "cuTensorMapEncode" not in report.sources.launcher("cython").text
        assert "wgmma" not in report.sources.device
        assert ("tl.disable_warp_specialized", "True") in report.pass_configs

    # -- GPU paths, faked: binding, --force, transactions, launching ----------------------------
    class FakeKernel:
        def __init__(self, obj=None, **kwargs):
            self.obj, self.kwargs = obj, kwargs

    @pytest.fixture
    def fake_gpu(monkeypatch):
        import tilelab._tilelang as adapter

        compiled = []

        def fake_compile(obj, **kwargs):
            compiled.append(kwargs)
            return FakeKernel(obj, **kwargs)

        monkeypatch.setattr(adapter, "has_gpu", lambda: True)
        monkeypatch.setattr(adapter, "compile_kernel", fake_compile)
        return compiled

    def test_a_factory_stays_and_its_kernel_is_bound_under_the_kernels_name(ip, shown, fake_gpu, capsys):
        ip.run_cell("BK = 32")
        for name in ("gemm_bk", "matmul_bk_kernel"):
            ip.user_ns.pop(name, None)
        assert run(ip, '--args "1024, 1024, 1024"', FACTORY_GLOBAL_BK).success
        assert callable(ip.user_ns["matmul_bk"]) and not isinstance(ip.user_ns["matmul_bk"], FakeKernel)
        kernel = ip.user_ns["gemm_bk"]
        assert isinstance(kernel, FakeKernel) and kernel.kwargs["args"] == (1024, 1024, 1024)
        assert magics(ip).last.bound == {"gemm_bk": "matmul_bk(1024, 1024, 1024)"}
        assert "bound gemm_bk = matmul_bk(1024, 1024, 1024)" in capsys.readouterr().out
        # the kernel's name holds something of the user's: it stays, the kernel goes beside it
        ip.user_ns["gemm_bk"] = "mine"
        assert run(ip, '--args "1024, 1024, 1024" --quiet', FACTORY_GLOBAL_BK).success
        assert ip.user_ns["gemm_bk"] == "mine" and isinstance(ip.user_ns["matmul_bk_kernel"], FakeKernel)
        assert magics(ip).last.bound == {"matmul_bk_kernel": "matmul_bk(1024, 1024, 1024)"}
        assert capsys.readouterr().out == ""  # --quiet

    def test_a_jit_function_stays_and_its_kernel_is_bound(ip, shown, fake_gpu):
        ip.run_cell("BLOCK = 128")
        ip.user_ns.pop("add_one_kernel", None)
        assert run(ip, '--args "2048" --quiet', JIT_DEFAULT_BLOCK).success
        assert type(ip.user_ns["add_one"]).__name__ == "JITImpl"
        assert isinstance(ip.user_ns["add_one_kernel"], FakeKernel)
        assert magics(ip).last.bound == {"add_one_kernel": "add_one(2048)"}

    def test_force_recompiles_with_tilelangs_cache_off(ip, shown, monkeypatch):
        import tilelang
        from tilelang.env import CacheState

        import tilelab._tilelang as adapter

        seen = []

        def fake_tilelang_compile(func, **kwargs):
            seen.append(tilelang.is_cache_enabled())
            return FakeKernel(func, **kwargs)

        monkeypatch.setattr(tilelang, "compile", fake_tilelang_compile)
        monkeypatch.setattr(adapter, "has_gpu", lambda: True)
        ip.user_ns.pop("gemm", None)
        assert run(ip, "--quiet --target sm_90a", GEMM_CELL).success
        assert run(ip, "--quiet --target sm_90a --force", GEMM_CELL).success
        assert seen == [True, False]  # the forced compile ran with TileLang's cache off ...
        assert CacheState.is_enabled() and tilelang.is_cache_enabled()  # ... and it is back on
        forced = ip.user_ns["gemm"]
        assert run(ip, "--quiet --target sm_90a", GEMM_CELL).success
        assert magics(ip).last.cache_hit and ip.user_ns["gemm"] is forced  # --force replaced the entry
        # a failing forced compile restores the cache switch too
        monkeypatch.setattr(tilelang, "compile", lambda func, **kw: (_ for _ in ()).throw(RuntimeError("boom")))
        with pytest.raises(LoweringError):
            adapter.compile_kernel(ip.user_ns["matmul"](256, 256, 256), target="sm_90a", force=True)
        assert CacheState.is_enabled()

    def test_a_late_failure_restores_every_name(ip, shown, fake_gpu, monkeypatch):
        import tilelab.launch as launch
        import tilelab.widgets.inspector as inspector_module

        ip.user_ns["gemm"] = "earlier gemm"
        ip.user_ns.pop("matmul", None)

        def broken_run(kernel, **kwargs):
            raise RuntimeError("the launch broke")

        monkeypatch.setattr(launch, "run", broken_run)
        result = run(ip, "--run", GEMM_CELL)
        assert isinstance(result.error_in_exec, RuntimeError)
        assert ip.user_ns["gemm"] == "earlier gemm" and "matmul" not in ip.user_ns

        class BrokenInspector:
            def __init__(self, *args, **kwargs):
                raise RuntimeError("the widget broke")

        monkeypatch.setattr(inspector_module, "Inspector", BrokenInspector)
        result = run(ip, "", GEMM_CELL)
        assert isinstance(result.error_in_exec, RuntimeError)
        assert ip.user_ns["gemm"] == "earlier gemm" and "matmul" not in ip.user_ns

    def _run_result(passed):
        from tilelab.launch import OutputCheck, RunResult

        check = OutputCheck("C", "float16", (1024, 1024), rel_error=1e-4 if passed else 0.5, tolerance=1e-2)
        return RunResult(kernel="gemm", outputs=(check,), device="Fake GPU", reference="matmul")

    def _bench_result(sizes, ms):
        from tilelab.launch import BenchResult

        return BenchResult(kernel="gemm", samples_ms=(ms, ms * 1.01, ms * 0.99), sizes=tuple(sizes.items()))

    def test_run_and_bench_use_the_compiled_kernel_ref_and_each_size_set(ip, shown, fake_gpu, monkeypatch):
        import base64

        import tilelab.launch as launch

        calls = []

        def fake_run(kernel, *args, ref=None, isolate=True, timeout=None, **sizes):
            assert isolate is True and timeout is None  # by default: the worker, default timeout
            calls.append(("run", kernel, ref, sizes))
            return _run_result(True)

        def fake_bench(kernel, *args, **kwargs):
            assert kwargs.pop("isolate") is True and kwargs.pop("timeout") is None
            calls.append(("bench", kernel, None, kwargs))
            m = kwargs["M"]
            return _bench_result({"M": m}, m / 1024 * 0.1)

        monkeypatch.setattr(launch, "run", fake_run)
        monkeypatch.setattr(launch, "bench", fake_bench)
        ip.run_cell("def my_reference(a, b):\n    return a @ b")
        line = ('--run --bench --ref my_reference --sizes "M=1024;M=2048;M=4096" --backend cython --out-idx -1 '
                '--rep-ms 5 --args "1024, 1024, 1024"')
        ip.user_ns.pop("gemm", None)
        assert run(ip, line, GEMM_CELL.replace("gemm = matmul(1024, 1024, 1024)", "")).success
        last = magics(ip).last
        assert last.bound == {"gemm": "matmul(1024, 1024, 1024)"} and last.shown == "matmul"
        kernel = ip.user_ns["gemm"]
        assert isinstance(kernel, FakeKernel) and kernel.kwargs["backend"] == "cython"
        assert kernel.kwargs["out_idx"] == [-1] and kernel.kwargs["args"] == (1024, 1024, 1024)
        runs = [c for c in calls if c[0] == "run"]
        benches = [c for c in calls if c[0] == "bench"]
        assert [c[3] for c in runs] == [{"M": 1024}, {"M": 2048}, {"M": 4096}]
        assert all(c[1] is kernel and c[2] is ip.user_ns["my_reference"] for c in runs)
        assert [c[3]["M"] for c in benches] == [1024, 2048, 4096]
        assert all(c[1] is kernel and c[3]["rep_ms"] == 5.0 for c in benches)
        assert len(last.timing) == 6
        assert last.inspector.titles[-1] == "Timing"
        timing_tab = last.inspector.tab("Timing")
        assert timing_tab.count("<b>gemm</b>") == 3 and timing_tab.count("PASS") == 3
        png = re.search(r'src="data:image/png;base64,([^"]+)"', timing_tab)
        assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
        static = shown[-1]["data"]["text/html"]  # the saved notebook's view has the timings too
        # three runs' PASS in the Timing tab, and again in the Summary (a cell's verdict is said there too)
        assert "Timing" in static and static.count("PASS") == 6 and "data:image/png;base64," in static

    def test_in_process_timeout_and_sanitize_reach_the_launch_functions(ip, shown, fake_gpu, monkeypatch, capsys):
        import tilelab.launch as launch
        from tilelab.launch._sanitize import Finding, SanitizerReport

        calls = []

        def fake_run(kernel, *args, ref=None, **kwargs):
            calls.append(("run", kwargs))
            return _run_result(True)

        def fake_bench(kernel, *args, **kwargs):
            calls.append(("bench", kwargs))
            return _bench_result({}, 0.1)

        def fake_sanitize(kernel, *args, tool="memcheck", **sizes):
            calls.append(("sanitize", {"tool": tool, **sizes}))
            return SanitizerReport("gemm", tool, (Finding("shared-memory race", "Race reported", line=20),), "raw text")

        monkeypatch.setattr(launch, "run", fake_run)
        monkeypatch.setattr(launch, "bench", fake_bench)
        monkeypatch.setattr(launch, "sanitize", fake_sanitize)
        ip.user_ns.pop("gemm", None)
        assert run(ip, "--run --bench --in-process --timeout 7.5 --quiet", GEMM_CELL).success
        assert calls[0] == ("run", {"isolate": False, "timeout": 7.5})
        assert calls[1][1]["isolate"] is False and calls[1][1]["timeout"] == 7.5
        calls.clear()
        assert run(ip, "--sanitize racecheck --sizes M=64", GEMM_CELL).success
        assert calls == [("sanitize", {"tool": "racecheck", "M": 64})]
        assert "compute-sanitizer --tool racecheck: 1 finding" in capsys.readouterr().out
        timing_tab = magics(ip).last.inspector.tab("Timing")
        assert "shared-memory race" in timing_tab and "raw compute-sanitizer output" in timing_tab
        calls.clear()
        assert run(ip, "--sanitize --quiet", GEMM_CELL).success
        assert calls == [("sanitize", {"tool": "memcheck"})]

    def test_a_bad_ref_is_a_usage_error_naming_it(ip, shown, fake_gpu):
        ip.user_ns.pop("gemm", None)
        result = run(ip, "--run --ref no_such_reference", GEMM_CELL)
        err = result.error_in_exec
        assert isinstance(err, UsageError) and "--ref 'no_such_reference'" in str(err)
        assert "NameError" in str(err) and "gemm" not in ip.user_ns
        result = run(ip, "--run --ref 42", GEMM_CELL)
        assert isinstance(result.error_in_exec, UsageError) and "not a callable" in str(result.error_in_exec)

    def test_a_missing_dynamic_size_says_which_to_pass(ip, shown, fake_gpu, monkeypatch):
        import tilelab.launch as launch
        from tilelab.launch._inputs import eval_dim

        def fake_run(kernel, *args, ref=None, **sizes):
            eval_dim("m * 2", sizes)  # what the real input builder does with a dynamic extent
            return _run_result(True)

        monkeypatch.setattr(launch, "run", fake_run)
        ip.user_ns.pop("gemm", None)
        result = run(ip, "--run", GEMM_CELL)
        err = result.error_in_exec
        assert isinstance(err, UsageError), err
        assert "size m is dynamic" in str(err) and '--sizes "m=4096"' in str(err)
        assert "gemm" not in ip.user_ns
        ip.user_ns.pop("gemm", None)
        assert run(ip, '--run --sizes "m=512" --quiet', GEMM_CELL).success

    def test_a_failed_verification_is_shown_and_printed_even_quiet(ip, shown, fake_gpu, monkeypatch, capsys):
        import tilelab.launch as launch

        monkeypatch.setattr(launch, "run", lambda kernel, *a, ref=None, **sizes: _run_result(False))
        assert run(ip, "--run --quiet", GEMM_CELL).success  # not an error: the kernel ran
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and "FAIL" in out[0] and out[0].startswith("%%tilelang --run: gemm")
        assert isinstance(ip.user_ns["gemm"], FakeKernel)  # bound: the cell succeeded
        assert magics(ip).last.timing and not magics(ip).last.timing[0].passed

    # -- the inspector across runs --------------------------------------------------------------
    def test_a_changed_rerun_of_a_cell_shows_a_diff_tab(ip, shown, monkeypatch):
        magic = magics(ip)
        # the front end's cell id, as ipykernel's parent message carries it
        monkeypatch.setattr(ip, "parent_header", {"metadata": {"cellId": "one-cell"}}, raising=False)
        assert run(ip, "", GEMM_CELL).success
        assert "Diff" not in magic.last.inspector.titles  # a first run has nothing to compare
        assert run(ip, "", GEMM_CELL.replace("num_stages=3", "num_stages=2")).success
        view = magic.last.inspector
        assert view.titles[-1] == "Diff"
        diff = view.tab("Diff")
        # the generated code's own pipeline depth changed: "% 3" stage indices became "% 2"
        plain = re.sub(r"<(?!/?span class=\"g[di]\")[^>]+>", "", diff)  # the diff's code is coloured
        removed = re.findall(r'<span class="gd"[^>]*>-([^\n]*)', plain)  # one block per line, numbered
        added = re.findall(r'<span class="gi"[^>]*>\+([^\n]*)', plain)
        assert any("% 3)" in line for line in removed) and added and not any("% 3)" in line for line in added)
        assert "Changed since the previous run of this cell" in view.tab("Summary")  # announced
        assert run(ip, "", GEMM_CELL.replace("num_stages=3", "num_stages=2")).success
        assert magic.last.inspector.titles[-1] == "Diff"  # the same report again: the Diff stays
        def text(html):  # each displayed page has ids of its own: the Diff's words are what must stay
            return re.sub(r"<[^>]+>", "", html)

        assert text(magic.last.inspector.tab("Diff")) == text(diff)
        assert run(ip, "", GEMM_CELL).success  # the next change: compared with the run before it
        assert magic.last.inspector.previous.sources.device == view.report.sources.device

    # -- options that do not fit the kernel are refused by name ------------------------------
    from target_kernels import COPY_CELL

    def test_args_given_to_a_prim_func_are_refused(ip, shown):
        ip.user_ns.pop("copy_tile", None)
        result = run(ip, '--args "1024" --quiet', COPY_CELL)
        err = result.error_in_exec
        assert isinstance(err, UsageError), err
        assert "copy_tile is a T.prim_func, already specialised" in str(err) and "Drop --args" in str(err)
        assert "copy_tile" not in ip.user_ns  # the refused cell bound nothing

    def test_out_of_range_out_idx_and_bad_pass_config_name_the_option(ip, shown):
        result = run(ip, "--out-idx 7 --quiet", COPY_CELL)
        err = result.error_in_exec
        assert isinstance(err, UsageError), err
        assert "out_idx=[7]: index 7 is out of range for copy_tile, which has 2 parameter(s) (A, B)" in str(err)
        result = run(ip, "--pass-config tl.disable_tma_lower=banana --quiet", COPY_CELL)
        err = result.error_in_exec
        assert isinstance(err, UsageError), err
        assert "pass config tl.disable_tma_lower='banana' is refused by TileLang" in str(err)
