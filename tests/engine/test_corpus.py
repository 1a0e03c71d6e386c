"""``python -m tilelab corpus DIR`` on a folder of our own example scripts, and the checks it makes.

The scripts are written the way TileLang's examples are: kernels built inside ``main()`` with the
example's sizes, inputs allocated as CUDA tensors, results compared with torch. None of it may
need a GPU: the corpus runs each script with compiles intercepted and tensors on the CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import textwrap

import pytest

import tilelab
from tilelab.__main__ import main as cli_main
from tilelab.engine import corpus as _corpus

GEMM = '''
import tilelang
import tilelang.language as T
import torch


def matmul(M, N, K, block_M=128, block_N=128, block_K=64, dtype=T.float16):
    @T.prim_func
    def gemm_tma(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])
    return gemm_tma
'''

SCRIPTS = {
    # builds its kernel in main() with CUDA tensors and checks the result against torch
    "gpu_main.py": GEMM + '''

def main():
    kernel = tilelang.compile(matmul(512, 256, 384), out_idx=[-1])
    a = torch.randn(512, 384, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 256).cuda().half()
    c = kernel(a, b)
    assert c.shape == (512, 256) and c.device.type == "cpu"
    torch.testing.assert_close(c, a @ b)  # fails on the stand-in's zeros: the run ends here


if __name__ == "__main__":
    main()
''',
    # a @tilelang.jit factory specialised by main(), two distinct kernels
    "jit_factory.py": '''
import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[1])
def scale_rows(n, block=256, dtype=T.float32):
    @T.prim_func
    def scale(X: T.Tensor((n, 64), dtype), Y: T.Tensor((n, 64), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i, j in T.Parallel(block, 64):
                Y[bx * block + i, j] = X[bx * block + i, j] * 2
    return scale


def main():
    for n in (1024, 4096, 1024):
        x = torch.ones(n, 64, device="cuda")
        y = scale_rows(n)(x)
        assert tuple(y.shape) == (n, 64)
    print("done")


if __name__ == "__main__":
    main()
''',
    # reads the SM count through TileLang's device driver (torch.device(0)) for a persistent grid
    "persistent.py": """
import tilelang
import tilelang.language as T
from tilelang.carver.arch import driver


def copy_persistent(n):
    sms = driver.get_num_sms()

    @T.prim_func
    def persistent_copy(X: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.float16)):
        with T.Kernel(sms, threads=128) as bx:
            for t in T.serial(T.ceildiv(n, sms * 128)):
                for i in T.Parallel(128):
                    if (t * sms + bx) * 128 + i < n:
                        Y[(t * sms + bx) * 128 + i] = X[(t * sms + bx) * 128 + i]
    return persistent_copy


if __name__ == "__main__":
    kernel = tilelang.compile(copy_persistent(1 << 20), out_idx=[1])
""",
    # tensor memory and tcgen05 MMA, target left to the local GPU: inspected for sm_100a
    "blackwell_auto.py": (
        'import tilelang\n'
        'import tilelang.language as T\n'
        'import torch\n'
        '\n'
        '\n'
        'def tmem_gemm(M, N, K, bm=128, bn=128, bk=64):\n'
        '    @T.prim_func\n'
        '    def gemm_tmem(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), '
        'C: T.Tensor((M, N), T.float32)):\n'
        '        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):\n'
        '            a = T.alloc_shared((bm, bk), T.bfloat16)\n'
        '            b = T.alloc_shared((bn, bk), T.bfloat16)\n'
        '            acc = T.alloc_tmem([bm, bn], T.float32)\n'
        '            done = T.alloc_barrier(1)\n'
        '            out = T.alloc_fragment((bm, bn), T.float32)\n'
        '            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=1):\n'
        '                T.copy(A[by * bm, k * bk], a)\n'
        '                T.copy(B[bx * bn, k * bk], b)\n'
        '                T.gemm(a, b, acc, transpose_B=True, mbar=done, clear_accum=k == 0)\n'
        '            T.copy(acc, out)\n'
        '            T.copy(out, C[by * bm, bx * bn])\n'
        '    return gemm_tmem\n'
        '\n'
        '\n'
        'def main():\n'
        '    kernel = tilelang.compile(tmem_gemm(256, 256, 256), out_idx=[2])\n'
        '    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)\n'
        '    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)\n'
        '    print(kernel(a, b).shape)\n'
        '\n'
        '\n'
        'if __name__ == "__main__":\n'
        '    main()\n'),
    # a symbolic size used in the body but bound by no argument: TileLang refuses to lower it
    "unbound_symbol.py": (
        'import tilelang\n'
        'import tilelang.language as T\n'
        '\n'
        'def fill(block=128):\n'
        '    n = T.symbolic("n")\n'
        '\n'
        '    @T.prim_func\n'
        '    def fill_n(A: T.Tensor((1024,), T.float32)):\n'
        '        with T.Kernel(T.ceildiv(1024, block), threads=block) as bx:\n'
        '            for i in T.Parallel(block):\n'
        '                A[bx * block + i] = T.cast(n, T.float32)\n'
        '    return fill_n\n'
        '\n'
        'def main():\n'
        '    kernel = tilelang.compile(fill(), out_idx=[0])\n'
        '    print(kernel())\n'
        '\n'
        'if __name__ == "__main__":\n'
        '    main()\n'),
    "syntax_error.py": "import tilelang\n\n\ndef main(:\n    pass\n",
    "no_kernel.py": "import tilelang\nprint('a helper module with no kernel')\n",
    "not_tilelang.py": "import sys\nsys.exit(3)\n",
}


# The command over these scripts (a process each, tens of seconds) is one of `make test-heavy`'s proofs;
# `make test` proves the corpus through the doctor's run over a pytest file (tests/_tilelang/test_doctor.py).
@pytest.fixture(scope="module")
def corpus_cli(tmp_path_factory):
    """``python -m tilelab corpus DIR --quiet --json PATH`` over the scripts above, its ``main`` run in
    this process (each script runs in its own process, as always): the exit status, what it printed
    and the JSON it wrote. One run serves the rows' tests and the command line's."""
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in SCRIPTS.items():
        (folder / name).write_text(textwrap.dedent(text))
    (folder / "test_ignored.py").write_text("raise SystemExit('tests are not examples')\n")
    out = folder.parent / f"{folder.name}-rows.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli_main(["corpus", str(folder), "--quiet", "--json", str(out), "--jobs", "2", "--timeout", "240"])
    return code, printed.getvalue(), json.loads(out.read_text())


@pytest.fixture(scope="module")
def corpus_rows(corpus_cli):
    return [_corpus.CorpusRow.from_dict(row) for row in corpus_cli[2]]


def _rows(rows, script):
    return [r for r in rows if r.script == script]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_main_that_needs_a_gpu_yields_its_kernel(corpus_rows):
    (row,) = _rows(corpus_rows, "gpu_main.py")
    assert (row.kernel, row.target, row.verdict) == ("gemm_tma", "sm_90a", _corpus.OK), row
    assert row.lower_s > 0 and row.inspect_s > 0 and row.ratio == row.inspect_s / row.lower_s


@pytest.mark.heavy
def test_a_jit_factory_yields_each_distinct_specialisation_once(corpus_rows):
    rows = _rows(corpus_rows, "jit_factory.py")
    assert [r.verdict for r in rows] == [_corpus.OK, _corpus.OK], rows
    assert {r.kernel for r in rows} == {"scale"}


@pytest.mark.heavy
def test_device_properties_and_tensor_memory_kernels(corpus_rows):
    (persistent,) = _rows(corpus_rows, "persistent.py")
    assert (persistent.kernel, persistent.verdict) == ("persistent_copy", _corpus.OK), persistent
    (blackwell,) = _rows(corpus_rows, "blackwell_auto.py")
    assert (blackwell.kernel, blackwell.target, blackwell.verdict) == ("gemm_tmem", "sm_100a", _corpus.OK), blackwell


@pytest.mark.heavy
def test_a_kernel_tilelang_cannot_lower_names_tilelangs_check(corpus_rows):
    (row,) = _rows(corpus_rows, "unbound_symbol.py")
    assert row.verdict == _corpus.CANNOT_LOWER and row.lower_s is None and row.inspect_s is None
    assert row.reason == ("Check failed: undefined.size() == 0 (1 vs. 0) : In PrimFunc fill_n variables (n,) "
                          "are used, but are not passed in as API arguments")
    # the doctor's diagnosis: the cause, the pass and the script line that uses the unbound size
    assert (row.cause, row.pass_name) == ("unbound-symbol", "tl.MakePackedAPI"), row
    assert row.line == "11: A[bx * block + i] = T.cast(n, T.float32)", row


@pytest.mark.heavy
def test_scripts_without_kernels_say_why(corpus_rows):
    (syntax,) = _rows(corpus_rows, "syntax_error.py")
    assert syntax.verdict == _corpus.NO_KERNEL and "SyntaxError" in syntax.reason
    (helper,) = _rows(corpus_rows, "no_kernel.py")
    assert helper.verdict == _corpus.NO_KERNEL and helper.reason == "finished"
    (plain,) = _rows(corpus_rows, "not_tilelang.py")
    assert plain.verdict == _corpus.NO_KERNEL and plain.reason == "does not use TileLang (not run)"
    assert not _rows(corpus_rows, "test_ignored.py")


@pytest.mark.heavy
def test_table_totals(corpus_rows):
    table = _corpus.render_table(corpus_rows)
    assert ("total: ok 5, mismatch 0, inspect error 0, TileLang cannot lower 1, timed out 0, no kernel 3, "
            "skipped 0") in table
    assert "consistent: 5/5 kernels that TileLang lowers (100.0%)" in table
    assert "inspect/lower time ratio: median" in table


# -- the checks, on reports we corrupt on purpose ----------------------------------------------


@pytest.fixture(scope="module")
def gemm_report():
    from gemm import matmul  # examples/gemm.py: TMA loads of A and B, one WGMMA form

    return tilelab.inspect(matmul(512, 256, 384, 128, 128, 64), "sm_90a")


def test_a_consistent_report_passes(gemm_report):
    assert _corpus.check_report(gemm_report) == ([], [])


def test_a_wrong_tma_box_is_a_mismatch(gemm_report):
    d = gemm_report.tma_descriptors[0]
    wrong = dataclasses.replace(d, box_dim=(d.box_dim[0], d.box_dim[1] * 2))
    report = gemm_report.replace(tma_descriptors=(wrong, *gemm_report.tma_descriptors[1:]))
    problems, _ = _corpus.check_report(report)
    assert problems == [f"TMA {d.name}.boxDim: report {list(wrong.box_dim)}, launcher {list(d.box_dim)}"]


def test_a_missing_descriptor_and_a_wrong_grid_are_mismatches(gemm_report):
    k = gemm_report.kernels[0]
    report = gemm_report.replace(tma_descriptors=gemm_report.tma_descriptors[1:],
                                 kernels=(dataclasses.replace(k, grid=(k.grid[0] + 1, *k.grid[1:])),))
    problems, _ = _corpus.check_report(report)
    assert f"{k.name} grid[0]: report {k.grid[0] + 1}, launcher {k.grid[0]}" in problems
    assert any(p.startswith("TMA: the launcher encodes 2 descriptor(s), the report has 1") for p in problems)


def test_a_wgmma_operand_read_from_another_buffer_is_a_mismatch(gemm_report):
    w = gemm_report.wgmma[0]
    swapped = dataclasses.replace(w, a=w.b, b=w.a)
    problems, _ = _corpus.check_report(gemm_report.replace(wgmma=(swapped,)))
    assert any(p.startswith(f"WGMMA {w.instruction} in {w.kernel}: the source reads A ('{w.a.buffer}'")
               for p in problems), problems


def test_source_wgmma_follows_the_last_initialisation_of_a_reused_variable():
    # Hand-written device code: one descriptor variable initialised for K, used, then for V.
    device = textwrap.dedent('''
        extern "C" __global__ void __launch_bounds__(256, 1) attn_kernel(half_t* __restrict__ O) {
          tl::initialize_wgmma_descriptor<1, 1, 64>(desc_b, (&(((half_t*)K_shared)[0])));
          tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16, false, false, 1, 1>(uint64_t(desc_a + 0), uint64_t(desc_b + 2), ((uint32_t*)(acc_s + 0)), 1);
          tl::initialize_wgmma_descriptor<1, 1024, 64>(desc_b, (&(((half_t*)V_shared)[0])));
          tl::wgmma_rs<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16, false, true, 1, 1>(((uint32_t*)(p + 0)), uint64_t(desc_b + 0), ((uint32_t*)(acc_o + 0)), 1);
        }
    ''')  # noqa: E501 the device code as TileLang writes it, one statement a line
    sites = _corpus.source_wgmma(device)
    assert [s[5:] for s in sites] == [(("?", -1, -1, -1), ("K_shared", 1, 1, 64)),
                                      (None, ("V_shared", 1, 1024, 64))]
    assert [s[1:5] for s in sites] == [("m64n128k16", "ss", "K", "K"), ("m64n128k16", "rs", "K", "MN")]


def test_cli_corpus_refuses_a_folder_without_scripts(tmp_path, capsys):
    (tmp_path / "test_only.py").write_text("pass\n")
    assert cli_main(["corpus", str(tmp_path)]) == 2
    assert "no example scripts in it" in capsys.readouterr().err
    assert cli_main(["corpus", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err
    (tmp_path / "example.py").write_text("import tilelang\n")
    assert cli_main(["corpus", str(tmp_path), "--target", "sm_999x"]) == 2
    assert "--target: unknown target 'sm_999x'" in capsys.readouterr().err
    assert cli_main(["corpus", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_rows_round_trip_as_json():
    row = _corpus.CorpusRow("a.py", "k", "sm_90a", _corpus.OK, "", 0.5, 1.0)
    assert _corpus.CorpusRow.from_dict(json.loads(json.dumps(row.to_dict()))) == row
    assert row.ratio == 2.0 and row.ratio_spread is None and _corpus.format_ratio(row) == "2.00"
    rounds = _corpus.CorpusRow("a.py", "k", "sm_90a", _corpus.OK, "", 2.0, 3.0, (1.0, 2.0, 4.0), (2.0, 3.0, 20.0))
    assert _corpus.CorpusRow.from_dict(json.loads(json.dumps(rounds.to_dict()))) == rounds


def test_the_ratio_of_repeated_rounds_is_the_median_of_each_rounds_ratio():
    """Rounds (lower, inspect) = (1, 2), (2, 3), (4, 20): ratios 2, 1.5 and 5 (the third round hit
    a burst of load on inspect's side). The median ratio is 2 and the range 1.5-5; the ratio of the
    medians (3 / 2 = 1.5) would pair measurements taken at different moments."""
    row = _corpus.CorpusRow("a.py", "k", "sm_90a", _corpus.OK, "", 2.0, 3.0, (1.0, 2.0, 4.0), (2.0, 3.0, 20.0))
    assert row.round_ratios == (2.0, 1.5, 5.0)
    assert row.ratio == 2.0 and row.ratio_spread == (1.5, 5.0)
    assert _corpus.format_ratio(row) == "2.00 (1.5-5.0)"
    slow = dataclasses.replace(row, lower_runs=(1.0, 1.0, 1.0), inspect_runs=(3.5, 2.0, 4.0))
    assert [r.kernel for r in _corpus.over_target([row, slow])] == ["k"] and _corpus.over_target([row]) == []
    table = _corpus.render_table([row])
    assert "2.00 (1.5-5.0)" in table
    assert "worst 2.00 (1.5-5.0) (a.py k: 3.00 s vs 2.00 s); each the median of 3 interleaved rounds" in table


def test_repeated_rounds_interleave_lowering_and_inspect(monkeypatch, tmp_path):
    """The worker's timing loop, with TileLang's lowering and inspect replaced by recorders: the
    first round of a process (one-time set-up) is dropped, then lower and inspect alternate."""
    import types

    from gemm import matmul

    from tilelab import _tilelang
    from tilelab.engine import inspect as _inspect

    func = matmul(256, 256, 128, 128, 128, 64)
    report = tilelab.inspect(func, "sm_90a")
    calls = []
    monkeypatch.setattr(_tilelang, "tilelang_lower", lambda *a, **k: calls.append("lower"))
    monkeypatch.setattr(_inspect, "inspect", lambda *a, **k: calls.append("inspect") or report)
    out = tmp_path / "rows.jsonl"
    worker = _corpus._Worker(tmp_path / "script.py", out, "sm_90a", 5.0, repeat=3)
    request = types.SimpleNamespace(prim_func=func, out_idx=[-1], pass_configs={}, target="cuda")
    worker._inspect(request, _tilelang)  # not on_compile: that arms the script's SIGALRM grace timer
    assert calls == ["lower", "inspect"] * 4  # a dropped warm-up round, then 3 timed rounds
    (row,) = [json.loads(line) for line in out.read_text().splitlines() if "verdict" in json.loads(line)]
    assert row["verdict"] == _corpus.OK, row
    assert len(row["lower_runs"]) == len(row["inspect_runs"]) == 3
    assert row["lower_s"] == sorted(row["lower_runs"])[1] and row["inspect_s"] == sorted(row["inspect_runs"])[1]
    calls.clear()
    worker._inspect(types.SimpleNamespace(prim_func=matmul(512, 256, 128, 128, 128, 64), out_idx=[-1],
                                          pass_configs={}, target="cuda"), _tilelang)
    assert calls == ["lower", "inspect"] * 3  # a warm process: its first round counts


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_corpus_repeat_and_only(tmp_path, capsys):
    folder = tmp_path / "scripts"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "unbound_symbol.py").write_text(SCRIPTS["unbound_symbol.py"])
    (folder / "no_kernel.py").write_text(SCRIPTS["no_kernel.py"])
    assert [p.name for p in _corpus.select_scripts(folder, ["sub/*.py"])] == ["unbound_symbol.py"]
    assert cli_main(["corpus", str(folder), "--only", "gemm/*.py"]) == 2
    assert "--only 'gemm/*.py': matches no script under" in capsys.readouterr().err
    assert cli_main(["corpus", str(folder), "--repeat", "0"]) == 2
    assert "--repeat 0: give at least 1 round" in capsys.readouterr().err
    assert cli_main(["corpus", str(folder), "--quiet", "--only", "sub/*.py", "--repeat", "2"]) == 0
    printed = capsys.readouterr().out
    assert "sub/unbound_symbol.py" in printed and "no_kernel.py" not in printed


def test_one_lowering_serves_every_launcher_with_out_idx():
    """inspect lowers once (the variant tvm_ffi compiles, out_idx stamped) to stay within 3x of
    TileLang's own lowering; the cython and nvrtc launchers must still be those TileLang writes
    for the function as given, which it lowers without the stamp."""
    import tilelang
    from gemm import matmul
    from groundtruth import tilelang_own_launchers
    from tilelang.backend.module import create_backend_context

    func = matmul(256, 256, 128, 128, 128, 64)
    report = tilelab.inspect(func, "sm_90a", out_idx=[2], force=True)
    source, cython, nvrtc = tilelang_own_launchers(func)
    assert report.sources.device == source
    assert report.sources.launcher("cython").text == cython
    assert report.sources.launcher("nvrtc").text == nvrtc
    # and the tvm_ffi host code is TileLang's own for the function with out_idx stamped
    from tilelang.engine.lower import lower_with_context
    from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs

    ffi = create_backend_context({"kind": "cuda", "arch": "sm_90a"}, None, "tvm_ffi")
    prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
        func, [2], supports_callee_allocated_outputs=ffi.execution_backend.supports_callee_allocated_outputs)
    assert not prepared.same_as(func)
    with tilelang.transform.PassContext(opt_level=3, config=tilelab._tilelang.normalize_pass_configs({})), ffi.target:
        artifact = lower_with_context(prepared, ffi, enable_host_codegen=True, enable_device_compile=False)
    assert report.sources.launcher("tvm_ffi").text == artifact.rt_mod.inspect_source()


# -- regression kernels for the failure classes the upstream corpus showed ---------------------


def test_a_layout_annotated_on_a_global_tensor_is_described_not_evaluated():
    """Backward attention kernels annotate the layout of a global gradient (an element order for
    atomic adds): millions of elements, which tilelab once evaluated one by one (46x TileLang's
    lowering time) before leaving them out."""
    import tilelang.language as T

    @T.prim_func
    def atomic_reordered(G: T.Tensor((4, 4096, 128), T.float32), X: T.Tensor((4, 4096, 128), T.float32)):
        with T.Kernel(4096 // 64, 4, threads=128) as (bx, b):
            T.annotate_layout({G: T.Layout(G.shape, lambda i, s, d: [i, s // 8, d // 8, s % 8, d % 8])})
            for s, d in T.Parallel(64, 128):
                T.atomic_add(G[b, bx * 64 + s, d], X[b, bx * 64 + s, d])

    report = tilelab.inspect(atomic_reordered, "sm_90a", force=True)
    assert "G" not in [x.buffer for x in report.layouts]
    (note,) = [n for n in report.notes if n.startswith("layout of G")]
    assert note.startswith("layout of G (global memory, 2,097,152 elements) not tabulated")
    assert "(4, 4096, 128) -> (4, 512, 16, 8, 8)" in note  # TileLang's own description of the order


@pytest.mark.heavy
def test_cli_corpus_prints_the_table_and_writes_json(corpus_cli):
    code, printed, rows = corpus_cli
    assert code == 0  # no mismatch, no inspect error
    # the table's row (its columns as wide as the longest entry of each)
    assert re.search(r"\nunbound_symbol\.py +fill_n +sm_90a +TileLang cannot lower ", printed), printed
    assert "total: ok 5, mismatch 0, inspect error 0, TileLang cannot lower 1" in printed
    assert _corpus.render_table([_corpus.CorpusRow.from_dict(r) for r in rows]) in printed  # the JSON is the table's
    (row,) = [r for r in rows if r["script"] == "unbound_symbol.py"]
    assert (row["script"], row["kernel"], row["verdict"]) == ("unbound_symbol.py", "fill_n", _corpus.CANNOT_LOWER)


def test_wgmma_descriptor_of_a_later_pipeline_stage_names_its_buffer():
    """A warp-specialised, two-stage pipeline initialises the second stage's descriptors at a
    byte offset into the same buffer (``handle_add_byte_offset`` in the IR); the report once
    named the offset ("4096") as the buffer."""
    import re

    import tilelang.language as T

    def ws_gemm(M=1024, N=512, K=1024, bm=64, bn=128, bk=32):
        @T.prim_func
        def ws_two_stage(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
                         C: T.Tensor((M, N), T.float32)):
            with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
                a = T.alloc_shared((bm, bk), T.bfloat16)
                b = T.alloc_shared((bk, bn), T.bfloat16)
                acc = T.alloc_fragment((bm, bn), T.float32)
                full = T.alloc_barrier(arrive_count=128)
                empty = T.alloc_barrier(arrive_count=128)
                with T.ws(0):
                    T.clear(acc)
                for k in T.Pipelined(K // bk, num_stages=2):
                    with T.ws(1):
                        T.barrier_wait(empty, (k + 1) % 2)
                        T.tma_copy(A[by * bm, k * bk], a, barrier=full)
                        T.tma_copy(B[k * bk, bx * bn], b, barrier=full)
                        T.barrier_arrive(full)
                    with T.ws(0):
                        T.barrier_wait(full, k % 2)
                        T.gemm(a, b, acc)
                        T.barrier_arrive(empty)
                with T.ws(0):
                    T.copy(acc, C[by * bm, bx * bn])
        return ws_two_stage

    report = tilelab.inspect(ws_gemm(), "sm_90a", force=True)
    device = report.sources.device
    assert re.search(r"initialize_wgmma_descriptor<2, 1, 32>\(desc_a_1, "
                     r"\(\(void\*\)\(\(char\*\)\(&\(\(\(bfloat16_t\*\)a\)\[0\]\)\) \+ 4096\)\)\)", device)
    sites = _corpus.source_wgmma(device)
    assert [(s[5], s[6]) for s in sites] == [(("a", 2, 1, 32), ("b", 1, 256, 64))] * 2
    assert [(w.a.buffer, w.b.buffer, w.count) for w in report.wgmma] == [("a", "b", 2)]
    assert _corpus.check_report(report)[0] == []


def test_wgmma_descriptor_over_statically_declared_shared_memory():
    """Shared buffers of scope "shared" are declared with their type, so the generated CUDA
    initialises their descriptors at ``(&(a[0]))``, with no cast: the source parser must read that
    form too, and the report's own association check must not flag it."""
    import tilelang.language as T

    @T.prim_func
    def static_smem(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
                    C: T.Tensor((256, 256), T.float32)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            a = T.alloc_shared((64, 64), T.float16, scope="shared")
            b = T.alloc_shared((64, 64), T.float16, scope="shared")
            acc = T.alloc_fragment((64, 64), T.float32)
            T.clear(acc)
            for k in T.serial(4):
                T.copy(A[by * 64, k * 64], a)
                T.copy(B[k * 64, bx * 64], b)
                T.gemm(a, b, acc)
            T.copy(acc, C[by * 64, bx * 64])

    report = tilelab.inspect(static_smem, "sm_90a", force=True)
    assert "initialize_wgmma_descriptor<1, 1, 64>(desc_a, (&(a[0])))" in report.sources.device
    assert [s[5:] for s in _corpus.source_wgmma(report.sources.device)] == [(("a", 1, 1, 64), ("b", 1, 0, 64))]
    assert report.problems == ()
    assert _corpus.check_report(report) == ([], [])


def test_a_script_cut_short_says_which_kernel_and_stage():
    lines = [json.dumps({"kernel": "a", "target": "sm_90a", "verdict": "ok", "reason": "", "lower_s": 1.0,
                         "inspect_s": 2.0}),
             json.dumps({"progress": "lowering", "kernel": "b", "target": "sm_90a"}),
             json.dumps({"progress": "inspecting", "kernel": "b", "target": "sm_90a", "lower_s": 40.0})]
    rows = _corpus._rows_from("big.py", lines, None, True, 150.0, "")
    assert [(r.kernel, r.verdict) for r in rows] == [("a", _corpus.OK), ("b", _corpus.INSPECT_ERROR)]
    assert rows[1].reason == "inspect did not finish within the script's 150 s (TileLang lowered it in 40.0 s)"
    rows = _corpus._rows_from("big.py", lines[:2], None, True, 150.0, "")
    assert (rows[1].verdict, rows[1].reason) == (_corpus.TIMED_OUT, "TileLang's lowering did not finish within "
                                                                    "the script's 150 s")
