"""What tilelab says holds on kernels shaped like the ones users write: WGMMA descriptors
associated by variable (not by name), a report cache that answers only for its own kernel, and
inputs refused by name. Ground truth comes from TileLang's generated CUDA and from hand-written
files, never from the engine under test."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from groundtruth import device_wgmma_operands

import tilelab

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------
# WGMMA: two chained GEMMs whose descriptor variables share a name
# --------------------------------------------------------------------------------------------


def attention_forward(heads=2, seq=256, dim=64, block_m=64, block_n=64):
    """Flash-attention-forward shaped: S = Q·Kᵀ, then O += P·V, both on WGMMA with K and V staged
    through shared memory. TileLang names the descriptors of both GEMMs desc_a/desc_b."""
    import tilelang.language as T

    scale = 1.0 / dim**0.5

    @T.prim_func
    def attention(Q: T.Tensor((heads, seq, dim), T.float16), K: T.Tensor((heads, seq, dim), T.float16),
                  V: T.Tensor((heads, seq, dim), T.float16),
                  O: T.Tensor((heads, seq, dim), T.float16)):  # noqa: E741 O: attention's output
        with T.Kernel(T.ceildiv(seq, block_m), heads, threads=128) as (bx, by):
            q_tile = T.alloc_shared((block_m, dim), T.float16)
            k_tile = T.alloc_shared((block_n, dim), T.float16)
            v_tile = T.alloc_shared((block_n, dim), T.float16)
            p_tile = T.alloc_shared((block_m, block_n), T.float16)
            scores = T.alloc_fragment((block_m, block_n), T.float32)
            out = T.alloc_fragment((block_m, dim), T.float32)
            T.copy(Q[by, bx * block_m:(bx + 1) * block_m, :], q_tile)
            T.fill(out, 0)
            for step in T.Pipelined(T.ceildiv(seq, block_n), num_stages=1):
                T.copy(K[by, step * block_n:(step + 1) * block_n, :], k_tile)
                T.clear(scores)
                T.gemm(q_tile, k_tile, scores, transpose_B=True)
                for i, j in T.Parallel(block_m, block_n):
                    scores[i, j] = scores[i, j] * scale
                T.copy(V[by, step * block_n:(step + 1) * block_n, :], v_tile)
                T.copy(scores, p_tile)
                T.gemm(p_tile, v_tile, out)
            T.copy(out, O[by, bx * block_m:(bx + 1) * block_m, :])

    return attention


@pytest.fixture(scope="module")
def attention_report():
    return tilelab.inspect(attention_forward(), "sm_90a", force=True)


def _operand(w):
    return None if w is None else {"buffer": w.buffer, "layout_type": w.layout_type, "lbo": w.lbo, "sbo": w.sbo}


def test_each_wgmma_of_chained_gemms_reads_its_own_descriptors(attention_report):
    r = attention_report
    truth = device_wgmma_operands(r.sources.device)
    assert [c["b"]["buffer"] for c in truth] == ["k_tile", "v_tile"]  # Q·Kᵀ, then P·V
    # the two B descriptors differ in the generated CUDA: a mix-up would be visible
    assert truth[0]["b"] != truth[1]["b"]
    assert len(r.wgmma) == 2 and all(w.count == 1 for w in r.wgmma)
    by_b = {w.b.buffer: w for w in r.wgmma}
    for call in truth:
        w = by_b[call["b"]["buffer"]]
        assert _operand(w.a) == call["a"]
        assert _operand(w.b) == call["b"]
    assert (by_b["k_tile"].b_major, by_b["v_tile"].b_major) == ("K", "MN")
    assert r.problems == ()


def test_a_descriptor_the_generated_cuda_contradicts_is_a_problem(attention_report):
    """Every association is checked against the source: tamper with the CUDA and it says so."""
    from tilelab import _tilelang
    from tilelab.engine import inspect as _inspect

    source = _tilelang.resolve_kernel(attention_forward())
    lowered = _tilelang.lower(source, "sm_90a", out_idx=None, pass_configs=_tilelang.normalize_pass_configs({}),
                             backends=("cython",))
    assert [w.problems for w in _tilelang.wgmma_instructions(lowered)] == [(), ()]
    truth = device_wgmma_operands(lowered.device_source)
    v = truth[1]["b"]
    line = f"initialize_wgmma_descriptor<{v['layout_type']}, {v['lbo']}, {v['sbo']}>"
    assert lowered.device_source.count(line) >= 1
    tampered = lowered.device_source.replace(line, f"initialize_wgmma_descriptor<{v['layout_type']}, "
                                                   f"{v['lbo'] + 7}, {v['sbo']}>")
    checked = _tilelang.wgmma_instructions(dataclasses.replace(lowered, device_source=tampered))
    problems = [p for w in checked for p in w.problems]
    assert len(problems) == 1
    assert "operand B" in problems[0] and "v_tile" in problems[0] and f"{v['lbo'] + 7}" in problems[0]
    # one wgmma call fewer in the CUDA than in the IR: no call-by-call match is claimed
    first = tampered.index("tl::wgmma_ss<")
    dropped = tampered[:first] + tampered[tampered.index(";", first) + 1:]
    checked = _tilelang.wgmma_instructions(dataclasses.replace(lowered, device_source=dropped))
    assert all(any("2 wgmma call(s) in the IR but 1" in p for p in w.problems) for w in checked)
    # and a report carries them among its problems
    report = attention_report.replace(wgmma=tuple(_tilelang.wgmma_instructions(
        dataclasses.replace(lowered, device_source=tampered))))
    assert any(p.startswith("wgmma m64n64k16 in ") and "operand B" in p for p in report.problems)
    assert _inspect  # the module the report came from stays importable


def test_wgmma_problems_survive_a_json_round_trip(attention_report):
    w = dataclasses.replace(attention_report.wgmma[0], problems=("operand B: disagrees",))
    report = attention_report.replace(wgmma=(w,))
    again = tilelab.KernelReport.from_json(report.to_json())
    assert again.wgmma[0].problems == ("operand B: disagrees",) and again == report


# --------------------------------------------------------------------------------------------
# The report cache answers only for what it was made for
# --------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder: tilelab's memory mirror answers per folder, so nothing earlier leaks in."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    yield tmp_path


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_swapped_entries_each_inspect_returns_its_own_kernel(cache):
    from gemm import matmul

    from tilelab import CacheEntryWarning

    def narrow():
        return matmul(256, 256, 256, 128, 128, 32)

    def wide():
        return matmul(256, 256, 256, 128, 128, 64)

    first = tilelab.inspect(narrow(), "sm_90a")
    (entry_first,) = _entries(cache)
    second = tilelab.inspect(wide(), "sm_90a")
    (entry_second,) = [p for p in _entries(cache) if p != entry_first]
    assert first.tma_descriptors[0].box_dim != second.tma_descriptors[0].box_dim
    text_first, text_second = entry_first.read_text(), entry_second.read_text()
    entry_first.write_text(text_second)
    entry_second.write_text(text_first)
    with pytest.warns(CacheEntryWarning, match="made for another script"):
        assert tilelab.inspect(narrow(), "sm_90a") == first
    with pytest.warns(CacheEntryWarning, match="made for another script"):
        assert tilelab.inspect(wide(), "sm_90a") == second
    # both entries were rewritten for their own kernels: the next reads are silent hits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tilelab.inspect(narrow(), "sm_90a") == first
        assert tilelab.inspect(wide(), "sm_90a") == second


def test_an_entry_for_another_target_is_not_served(cache):
    from gemm import matmul

    from tilelab import CacheEntryWarning

    for_90a = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    (entry,) = _entries(cache)
    for_80 = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_80")
    (other,) = [p for p in _entries(cache) if p != entry]
    other.write_text(entry.read_text())  # the sm_80 key now holds the sm_90a entry
    with pytest.warns(CacheEntryWarning, match="another arch"):
        again = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_80")
    assert again == for_80 and again.target == "sm_80" != for_90a.target


@pytest.mark.parametrize("content, reason", [
    ("null", "not a tilelab cache entry"),
    ("[]", "not a tilelab cache entry"),
    ("{}", "not a tilelab cache entry"),
    ("\x00\x01garbage", "not JSON"),
    ("{\"format\": 2, \"material\": null, \"report\": null}", "no key material"),
])
def test_a_bad_entry_is_discarded_with_a_warning_and_recomputed(cache, content, reason):
    from gemm import matmul

    from tilelab import CacheEntryWarning

    real = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a")
    (entry,) = _entries(cache)
    entry.write_text(content)
    with pytest.warns(CacheEntryWarning, match=reason) as caught:
        assert tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a") == real
    assert str(entry) in str(caught[0].message) and "recomputing" in str(caught[0].message)
    assert json.loads(entry.read_text())["report"]["name"] == "gemm"  # rewritten


def test_an_entry_whose_report_is_broken_or_of_another_kernel_is_discarded(cache):
    from gemm import matmul

    from tilelab import CacheEntryWarning

    kernel = matmul(256, 256, 256, 128, 128, 32)
    real = tilelab.inspect(kernel, "sm_90a")
    (entry,) = _entries(cache)
    good = json.loads(entry.read_text())
    for report, reason in ((None, "malformed"), ({"name": "gemm"}, "malformed"),
                          ({**good["report"], "name": "softmax"}, "report is of softmax")):
        entry.write_text(json.dumps({**good, "report": report}))
        with pytest.warns(CacheEntryWarning, match=reason):
            assert tilelab.inspect(kernel, "sm_90a") == real


def test_a_bare_report_file_from_an_older_tilelab_is_not_served(cache):
    from gemm import matmul

    from tilelab import CacheEntryWarning

    kernel = matmul(256, 256, 256, 128, 128, 32)
    real = tilelab.inspect(kernel, "sm_90a")
    (entry,) = _entries(cache)
    entry.write_text(real.replace(name="stale").to_json())  # how entries used to look
    with pytest.warns(CacheEntryWarning):
        assert tilelab.inspect(kernel, "sm_90a").name == "gemm"


# --------------------------------------------------------------------------------------------
# Inputs refused by name
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out_idx, needle", [
    (7, "out_idx=7: index 7 is out of range for gemm, which has 3 parameter(s) (A, B, C)"),
    (-4, "out_idx=-4: index -4 is out of range for gemm"),
    ([0, 3], "index 3 is out of range"),
    ([2, -1], "names the same parameter twice"),
])
def test_out_of_range_out_idx_is_refused(out_idx, needle):
    from gemm import matmul

    with pytest.raises(tilelab.TilelabError, match="out_idx") as err:
        tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a", out_idx=out_idx, force=True)
    assert needle in str(err.value)
    if "range" in needle:
        assert "from 0 to 2 or from -3 to -1" in str(err.value)


def test_an_out_idx_in_range_still_works():
    from gemm import matmul

    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a", out_idx=-1)
    assert [a.name for a in r.arguments if a.is_output] == ["C"]


def test_a_jit_decorators_out_of_range_out_idx_is_refused():
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[5])
    def doubled(n):
        @T.prim_func
        def double(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(n):
                    B[i] = A[i] * 2

        return double

    with pytest.raises(tilelab.TilelabError, match=r"out_idx of the @tilelang.jit decorator of doubled=\[5\]"):
        tilelab.inspect(doubled, "sm_90a", args=(256,), force=True)


def test_bad_pass_config_values_and_keys_are_blamed_on_the_pass_config():
    from gemm import matmul

    kernel = matmul(256, 256, 256, 128, 128, 32)
    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.inspect(kernel, "sm_90a", pass_configs={"tl.disable_tma_lower": "banana"}, force=True)
    message = str(err.value)
    assert message.startswith("pass config tl.disable_tma_lower='banana' is refused by TileLang")
    assert "integer or a bool" in message and "not str" in message
    assert "lowering failed" not in message and "gemm" not in message
    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.inspect(kernel, "sm_90a", pass_configs={"tl.disable_tma_lowr": True}, force=True)
    message = str(err.value)
    assert message.startswith("pass config 'tl.disable_tma_lowr' is not a pass config TileLang")
    assert "Did you mean tl.disable_tma_lower" in message


def test_a_lowering_failure_under_user_pass_configs_says_they_were_in_force():
    import tilelang.language as T

    @T.prim_func
    def scratch(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), T.float16)
            unused = T.alloc_fragment((64,), T.float32)
            T.fill(unused, 0)
            T.copy(A, tile)
            T.copy(tile, B)

    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.inspect(scratch, "sm_90a", pass_configs={"tl.disable_warp_specialized": True}, force=True)
    assert "your pass configs tl.disable_warp_specialized=True" in str(err.value)


def test_a_tvm_check_failure_carries_the_check_and_points_at_the_kernel_line():
    """TVM's message ends with an excerpt of the user's source; the sentence is its first line."""
    import tilelang.language as T

    @T.prim_func
    def scratch(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), T.float16)
            unused = T.alloc_fragment((64,), T.float32)
            T.fill(unused, 0)
            T.copy(A, tile)
            T.copy(tile, B)

    with pytest.raises(tilelab.LoweringError) as err:
        tilelab.inspect(scratch, "sm_90a", force=True)
    e = err.value
    assert e.summary.startswith("TileLang lowering failed: Check failed: ")
    assert "(0 vs. 0)" in e.summary and "The layout for fragment unused can not be inferred" in e.summary
    assert "|" not in e.summary and "-->" not in e.summary
    assert e.kernel_line is not None
    assert e.kernel_line[0] == __file__ and "T.alloc_fragment((64,), T.float32)" in e.kernel_line[2]


@pytest.mark.parametrize("message, expected", [
    ("Check failed: (a == b) is false: shapes differ\n  --> k.py:3:1\n   |\n 3 |  x\n   |  ^",
     "Check failed: (a == b) is false: shapes differ"),
    ("Cannot fit the fragment of shape\n(32, 16)", "Cannot fit the fragment of shape (32, 16)"),
    ("Traceback (most recent call last):\n  0: tvm::Foo\nInternalError: Check failed: x < 4 (7 vs. 4) : too big",
     "Check failed: x < 4 (7 vs. 4) : too big"),
])
def test_explain_error_keeps_the_sentence_not_the_last_line(message, expected):
    from tilelab import _tilelang

    summary, _ = _tilelang.explain_error(RuntimeError(message))
    assert summary == expected


def test_a_factorys_own_type_error_is_the_factorys(tmp_path):
    (tmp_path / "widths.py").write_text(
        "import tilelang.language as T\n"
        "\n"
        "def padded_copy(n, pad):\n"
        "    width = n + pad\n"
        "    @T.prim_func\n"
        "    def copy(A: T.Tensor((width,), T.float32), B: T.Tensor((width,), T.float32)):\n"
        "        with T.Kernel(1, threads=128) as bx:\n"
        "            for i in T.Parallel(width):\n"
        "                B[i] = A[i]\n"
        "    return copy\n")
    sys.path.insert(0, str(tmp_path))
    try:
        from widths import padded_copy
    finally:
        sys.path.remove(str(tmp_path))
    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.inspect(padded_copy, "sm_90a", args=(64, "8"), force=True)
    message = str(err.value)
    assert "padded_copy raised TypeError while building the kernel" in message
    assert "unsupported operand type(s) for +: 'int' and 'str'" in message
    assert f"at {tmp_path / 'widths.py'}:4: width = n + pad" in message
    assert "could not be called with the arguments given" not in message
    # a call that does not fit the signature is still a problem with the call
    with pytest.raises(tilelab.TilelabError, match="could not be called with the arguments given"):
        tilelab.inspect(padded_copy, "sm_90a", args=(64,), force=True)


def test_a_jit_functions_own_type_error_is_the_functions():
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def scaled(n, factor):
        limit = n * factor + "1"  # the function's own TypeError

        @T.prim_func
        def scale(A: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(n):
                    A[i] = A[i] * limit

        return scale

    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.inspect(scaled, "sm_90a", args=(64, 2), force=True)
    assert "scaled raised TypeError while building the kernel" in str(err.value)
    assert 'limit = n * factor + "1"' in str(err.value)


# -- saved reports ----------------------------------------------------------------------------


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not a tilelab report: it is not JSON"),
    ("null", "not a tilelab report: it holds a JSON NoneType"),
    ("[1, 2]", "not a tilelab report: it holds a JSON list"),
    ('{"name": "gemm"}', "it has no 'target', 'kernels', 'sources' fields"),
    ('{"name": "gemm", "target": "sm_90a", "kernels": [{"name": "k"}], "sources": {}}', "malformed tilelab report"),
    ('{"schema": 0, "name": "g", "target": "sm_90a", "kernels": [], "sources": {}}', "schema 0"),
])
def test_loading_a_malformed_report_names_the_file(tmp_path, content, needle):
    path = tmp_path / "saved-report.json"
    path.write_text(content)
    with pytest.raises(tilelab.TilelabError) as err:
        tilelab.KernelReport.load(path)
    assert str(err.value).startswith(f"{path}: ")
    assert needle in str(err.value)
    assert isinstance(err.value, ValueError)  # callers catching ValueError keep working


def test_loading_a_missing_report_names_the_file(tmp_path):
    with pytest.raises(tilelab.TilelabError, match=r"report\.json: no such file"):
        tilelab.KernelReport.load(tmp_path / "report.json")


# -- the command line -------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("code", ["0", "3", "None"])
def test_cli_script_that_exits_fails_with_a_message(tmp_path, code):
    script = tmp_path / "exits.py"
    script.write_text(f"import sys\n\ndef kernel():\n    pass\n\nsys.exit({code})\n")
    out = cli("inspect", f"{script}:kernel()")
    assert out.returncode == 2
    assert out.stderr.startswith(f"tilelab: error: {script} called sys.exit({code})")
    assert 'if __name__ == "__main__":' in out.stderr and "Traceback" not in out.stderr


def test_cli_script_that_defines_nothing_fails_with_a_message(tmp_path):
    script = tmp_path / "empty.py"
    script.write_text("import os\n\nif __name__ == '__main__':\n    def kernel():\n        pass\n")
    out = cli("inspect", f"{script}:kernel()")
    assert out.returncode == 2
    assert out.stderr.startswith(f"tilelab: error: {script} defines nothing to inspect")


def test_cli_expression_that_exits_fails_with_a_message(tmp_path):
    script = tmp_path / "main_exits.py"
    script.write_text("import sys\n\ndef main():\n    sys.exit(0)\n")
    out = cli("inspect", f"{script}:main()")
    assert out.returncode == 2
    assert "tilelab: error: evaluating 'main()' called sys.exit(0)" in out.stderr


def test_cli_factory_error_shows_the_factorys_line(tmp_path):
    script = tmp_path / "factory.py"
    script.write_text("def build(n, pad):\n    width = n + pad\n    return width\n")
    out = cli("inspect", f"{script}:build(64, '8')")
    assert out.returncode == 2
    assert "TypeError: unsupported operand type(s) for +: 'int' and 'str'" in out.stderr
    assert f"at {script}:2: width = n + pad" in out.stderr
