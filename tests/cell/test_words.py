"""What tilelab says, against what happened: a Python error in a kernel named as one (through the
magic's test shell, in a process of its own: IPython keeps global state), the WGMMA split read
against two lowered kernels (which way the warp groups split the accumulator, and whether the
policy the note names really gives the wider instruction), rates of unknown work, the
Summary's launch rows, and each layout's plain sentence against the compiler's descriptors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = os.environ.get("TILELAB_WORDS_CHILD") == "1"

NAME_ERROR_CELL = '''import tilelang.language as T

@T.prim_func
def scale(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            B[i] = A[i] * undefined_scale
'''


def gemm_with(policy_name: str):
    import tilelang.language as T

    policy = getattr(T.GemmWarpPolicy, policy_name)
    M = N = K = 512
    bm = bn = 128
    bk = 32

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), T.float16)
            B_shared = T.alloc_shared((bk, bn), T.float16)
            C_local = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[k * bk, bx * bn], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=policy)
            T.copy(C_local, C[by * bm, bx * bn])

    return gemm


if not CHILD:

    @pytest.mark.heavy
    @pytest.mark.slow
    def test_words_through_the_magic_in_their_own_process():
        env = dict(os.environ, TILELAB_WORDS_CHILD="1")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                              cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
        assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]

    @pytest.fixture(scope="module")
    def lowered():
        pytest.importorskip("tilelang", reason="TileLang is not installed: no compiler output")
        import tilelab

        return {policy: tilelab.inspect(gemm_with(policy), "sm_90a") for policy in ("Square", "FullRow")}

    def test_the_wgmma_note_says_the_split_is_along_n_and_how_to_get_m64n128(lowered):
        from groundtruth import device_wgmma

        from tilelab.engine.links import wgmma_shape_note

        square, full_row = lowered["Square"], lowered["FullRow"]
        # ground truth: the instruction each kernel's device code issues
        assert {f["instruction"] for f in device_wgmma(square.sources.device)["forms"]} == {"m64n64k16"}
        assert {f["instruction"] for f in device_wgmma(full_row.sources.device)["forms"]} == {"m64n128k16"}
        # which warp group holds each element, from the compiler's fragment (threads 0-255 of the consumers)
        threads = square.layout("C_local").array("threads")
        assert threads[0, 0] // 128 != threads[0, 64] // 128 and threads[0, 0] // 128 == threads[127, 0] // 128
        note = wgmma_shape_note(square, 0)
        assert "split over 2 consumer warp group(s) of 128 threads along N" in note
        assert "each holds all 128 rows by 64 of the 128 columns, 8192 elements = 2 x m64n64" in note
        # the way to m64n128 the note names is the one that gives it (the FullRow kernel above)
        assert "For m64n128k16, split along M instead: T.gemm(..., policy=T.GemmWarpPolicy.FullRow)" in note
        wide = full_row.layout("C_local").array("threads")
        assert wide[0, 0] // 128 == wide[0, 127] // 128 and wide[0, 0] // 128 != wide[64, 0] // 128
        wide_note = wgmma_shape_note(full_row, 0)
        assert "along M: each holds 64 rows by all 128 columns, 8192 elements = 1 x m64n128" in wide_note
        assert "FullRow" not in wide_note

    def test_the_summary_carries_the_split_note(lowered):
        from tilelab.render.html import section_body

        body = section_body(lowered["Square"], "summary")
        assert "along N (the T.gemm warp policy)" in body and "GemmWarpPolicy.FullRow" in body

    def test_each_layout_opens_on_a_plain_sentence_that_agrees_with_the_compiler(lowered):
        from groundtruth import device_wgmma

        from tilelab.render.html import section_body
        from tilelab.render.text import layout_sentence

        report = lowered["Square"]
        names = {0: "NONE", 1: "128B", 2: "64B", 3: "32B"}  # the descriptor's layout_type, PTX's encoding
        for desc in device_wgmma(report.sources.device)["descriptors"].values():
            words = layout_sentence(report.layout(desc["buffer"]))
            assert f"stored with the {names[desc['layout_type']]} swizzle" in words, (desc, words)
            assert "one of 2 pipeline stages" in words  # num_stages=2 in the kernel above
        frag = layout_sentence(report.layout("C_local"))
        # 128 x 128 accumulator over the 256 consumer threads, which start at 128 (the producer's 128 first)
        assert frag == ("A 128 x 128 float32 fragment held in registers by 256 threads (threads 128-383), "
                        "64 elements a thread.")
        body = section_body(report, "layouts")
        assert '<p class="tl-layout-words"' in body and "<p><code>Layout(" not in body
        assert "<p><code>Fragment(" not in body

    def test_a_bench_of_unknown_work_shows_a_dash_and_a_small_rate_its_digits():
        from tilelab.launch import BenchResult
        from tilelab.render.launch import UNKNOWN, bench_result_html, launch_summary, rate

        unknown = BenchResult("copy", (1.0, 1.2, 1.1))
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", bench_result_html(unknown))
        table = dict(zip(cells[::2], cells[1::2]))
        assert table["TFLOP/s"] == UNKNOWN and table["GB/s"] == UNKNOWN
        # 2 MFLOP in 1.1 ms: 0.0018 TFLOP/s, shown as such, not 0.0
        slow = BenchResult("gemm", (1.0, 1.1, 1.2), flops=2e6, bytes=3e5)
        assert rate(slow.tflops, ".1f") == "0.00182" and rate(slow.gbps, ".0f") == "0.273"
        assert launch_summary([unknown])[0][1].endswith(f"TFLOP/s {UNKNOWN}, GB/s {UNKNOWN}")

    def test_launch_summary_rows_say_pass_or_fail_and_the_median():
        from tilelab.launch import BenchResult, OutputCheck, RunResult
        from tilelab.render.launch import launch_summary, launch_summary_html

        good = RunResult("gemm", (OutputCheck("C", "float16", (4, 4), rel_error=1e-4, tolerance=1e-2),),
                         reference="ref", sizes=(("M", 512),))
        bad = RunResult("gemm", (OutputCheck("C", "float16", (4, 4), rel_error=0.5, tolerance=1e-2),), reference="ref")
        bench = BenchResult("gemm", (2.0, 1.0, 3.0), flops=2e12)
        rows = launch_summary([good, bad, bench])
        assert rows[0] == ("run (M=512)", "PASS, worst rel error 1.000e-04", "pass")
        assert rows[1] == ("run", "FAIL, worst rel error 5.000e-01", "fail")
        # median of 1, 2, 3 ms is 2 ms: 2e12 FLOP in 2 ms is 1000 TFLOP/s
        assert rows[2][0] == "bench" and rows[2][1].startswith("median 2.0000 ms") and "TFLOP/s 1000.0" in rows[2][1]
        page = launch_summary_html([good, bad, bench])
        assert page.count("<tr>") == 3 and ">PASS</b>" in page and ">FAIL</b>" in page
        assert launch_summary_html([]) == ""

else:
    from ipython_shell import ip, run, shown  # noqa: F401  (fixtures)

    def test_a_name_error_in_a_kernel_is_a_python_error_in_the_cell_with_its_line(ip, shown):
        result = run(ip, "", NAME_ERROR_CELL)
        err = result.error_in_exec
        assert isinstance(err.__cause__, NameError)
        lines = err._render_traceback_()
        text = "\n".join(lines)
        assert lines[0] == "NameError: name 'undefined_scale' is not defined"
        assert "a Python error in the cell" in lines[1]
        assert "LoweringError" not in text and "TileLang elaboration failed" not in text
        # the cell line, counted here: line 1 is %%tilelang
        cell = ("%%tilelang\n" + NAME_ERROR_CELL).split("\n")
        number = next(i + 1 for i, line in enumerate(cell) if "undefined_scale" in line)
        assert f"  cell line {number}: B[i] = A[i] * undefined_scale" in lines
        assert "scale" not in ip.user_ns  # nothing the failed cell defined is bound


def test_a_cells_run_and_bench_say_pass_fail_and_the_median_in_the_summary():
    """With --run --bench, the Summary carries the verdict and the median beside the Timing tab."""
    import re

    from gemm import matmul

    import tilelab
    from tilelab.launch import BenchResult, OutputCheck, RunResult
    from tilelab.widgets.inspector import Inspector

    report = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    run = RunResult(kernel="gemm", outputs=(OutputCheck("C", "float16", (256, 256), rel_error=1e-4, tolerance=1e-3),),
                    reference="matmul")
    bench = BenchResult(kernel="gemm", samples_ms=(0.5, 0.52, 0.51))
    page = Inspector(report, timing=[run, bench]).html
    summary = re.search(r'<section class="tl-panel"[^>]*-summary".*?</section>', page, re.S).group(0)
    assert "PASS" in summary and "median 0.5100 ms" in summary
    failed = RunResult(kernel="gemm", outputs=(OutputCheck("C", "float16", (256, 256), unwritten=3),))
    summary = re.search(r'<section class="tl-panel"[^>]*-summary".*?</section>',
                        Inspector(report, timing=[failed]).html, re.S).group(0)
    assert "FAIL" in summary
    plain = re.search(r'<section class="tl-panel"[^>]*-summary".*?</section>', Inspector(report).html, re.S).group(0)
    assert "tl-launch-summary" not in plain
