"""err.reproducer(): a failing cell shrunk to a small standalone TileLang script that fails the same
way. The shrinking itself (pure text, a predicate of ours) is tested without TileLang; five cells
of ours that TileLang cannot lower are shrunk for real, and each script is run in a fresh Python
process, where it must fail with TileLang's same sentence, in at most a third of the cell's lines."""

import linecache
import subprocess
import sys
import time

import pytest

from tilelab.cell.options import parse_cell_line
from tilelab.cell.session import CellSession, CellSource, cell_identity
from tilelab.engine.reproducer import code_lines, sentence_key, shrink
from tilelab.records.errors import LoweringError

# -- the shrinking, on text ---------------------------------------------------------------------------
SCRIPT = """\
a = 1
b = 2
def f(x):
    y = x + 1
    for i in range(3):
        y = y + i
    if y > 100:
        y = 0
    boom(y)
    return y
c = 3
f(a)
"""


def test_shrinking_keeps_what_the_failure_needs_and_stops_when_no_step_helps():
    def same(text):  # "fails the same way": the call of boom survives, and the script still defines f
        return "boom(" in text and "f(" in text.split("def f", 1)[-1]

    small, tries, finished = shrink(SCRIPT, same, deadline=time.monotonic() + 30)
    assert finished and tries > 0
    assert "boom(" in small and "c = 3" not in small and "range(3)" not in small
    assert code_lines(small) < code_lines(SCRIPT) // 2


def test_shrinking_stops_at_its_deadline_with_the_smallest_script_so_far():
    small, tries, finished = shrink(SCRIPT, lambda text: "boom(" in text, deadline=time.monotonic() - 1)
    assert not finished and small == SCRIPT and tries == 0


def test_the_sentence_key_sets_numbers_and_printed_ir_aside():
    assert sentence_key("TileLang lowering failed: No valid warp partition for T.gemm: M=128, N=128") == \
        sentence_key("No valid warp partition for T.gemm: M=64, N=32")
    assert sentence_key("block_K (40) must be a multiple of micro_size_k (16)") == \
        "block_K (#) must be a multiple of micro_size_k (#)"


def test_a_failure_without_a_recipe_says_why_no_script_can_be_written():
    err = LoweringError("TileLang lowering failed: something")
    rep = err.reproducer(progress=False)
    assert not rep.reproduces and rep.script == "" and "cannot write this kernel as a script" in rep.note


# -- the script a failure starts from -------------------------------------------------------------------
TILE = 64  # read by the factory below from its module: the script must carry it


def mismatched_factory(M, N, K, block_K=32):
    import tilelang.language as T

    @T.prim_func
    def mismatched(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // TILE, M // TILE, threads=128) as (bx, by):
            A_s = T.alloc_shared((TILE, block_K), T.float16)
            B_s = T.alloc_shared((TILE, TILE), T.float16)
            C_l = T.alloc_fragment((TILE, TILE), T.float32)
            T.gemm(A_s, B_s, C_l)  # A's K is block_K, B's is TILE
            T.copy(C_l, C[by * TILE, bx * TILE])
    return mismatched


def test_a_factory_that_fails_while_it_runs_is_written_as_its_call_with_what_it_reads_from_its_module():
    from tilelab import _tilelang
    from tilelab.targets import parse_target

    rec = _tilelang.call_recipe(mismatched_factory, {"M": 256, "N": 256, "K": 128}, parse_target("sm_90a"))
    assert rec is not None and "TILE = 64" in rec.body
    assert rec.body.rstrip().endswith("kernel = mismatched_factory(M=256, N=256, K=128)")
    err = _tilelang.run_script(rec.body, rec)
    assert err is not None and err.pass_name == "elaboration" and err.cause == "gemm-k-mismatch", err


def test_a_failure_of_the_code_generator_is_run_again_past_every_pass():
    from fault_kernels import asserting_bare

    from tilelab import _tilelang
    from tilelab.engine.reproducer import failure_key

    with pytest.raises(LoweringError) as info:  # HIP's code generator has no device_assert
        _tilelang.lower(_tilelang.resolve_kernel(asserting_bare()), "gfx942", out_idx=None, pass_configs={},
                        backends=())
    err = info.value
    assert err.recipe is not None and "Unresolved call" in err.summary
    again = _tilelang.run_script(err.recipe.body, err.recipe)
    assert again is not None and failure_key(again) == failure_key(err)


# -- five failing cells, shrunk for real ----------------------------------------------------------------
GEMM_CELL = """\
import tilelang.language as T

M, N, K = 1024, 1024, 512
block_M, block_N, block_K = 128, 128, {block_K}
threads = {threads}
dtype, accum = {dtype}, T.float32


def scale_of(k):
    return 1.0 / k


@T.prim_func
def gemm_bias_relu(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), bias: T.Tensor((N,), accum),
                   C: T.Tensor((M, N), dtype)):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        C_l = T.alloc_fragment((block_M, block_N), accum)
        bias_l = T.alloc_fragment((block_N,), accum)
        C_s = T.alloc_shared((block_M, block_N), dtype)
        T.use_swizzle(8)
        T.clear(C_l)
        T.copy(bias[bx * block_N], bias_l)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, ko * block_K], A_s)
            T.copy(B[ko * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_l)
        for i, j in T.Parallel(block_M, block_N):
            C_l[i, j] = C_l[i, j] + bias_l[j]
        for i, j in T.Parallel(block_M, block_N):
            C_l[i, j] = T.max(C_l[i, j], 0.0)
        for i, j in T.Parallel(block_M, block_N):
            C_l[i, j] = C_l[i, j] * scale_of(2)
        T.copy(C_l, C_s)
        T.copy(C_s, C[by * block_M, bx * block_N])
"""

SOFTMAX_CELL = """\
import tilelang.language as T

rows, cols = 4096, 128
block_rows = 64
threads = 128


@T.prim_func
def row_softmax(X: T.Tensor((rows, cols), T.float16), Y: T.Tensor((rows, cols), T.float16)):
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        x_s = T.alloc_shared((block_rows, cols), T.float16)
        x = T.alloc_fragment((block_rows, cols), T.float32)
        row_max = T.alloc_fragment((block_rows,), T.float32)
        row_sum = T.alloc_fragment((block_rows,), T.float32)
        y_s = T.alloc_shared((block_rows, cols), T.float16)
        T.copy(X[bx * block_rows, 0], x_s)
        T.copy(x_s, x)
        T.reduce_max(x, row_max, dim=1)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = T.exp2(x[i, j] - row_max[i])
        T.reduce_sum(x, row_sum, dim=1)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j // 2] = x[i, j] / row_sum[i]
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = T.min(x[i, j], 1.0)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = T.max(x[i, j], 0.0)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = x[i, j] * 1.0
        T.copy(x, y_s)
        T.copy(y_s, Y[bx * block_rows, 0])
"""

TRANSPOSED_CELL = """\
import tilelang.language as T


def matmul_nt(M, N, K, block_M=128, block_N=128, block_K=32, threads=128):
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum)
            C_s = T.alloc_shared((block_M, block_N), dtype)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0.0)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = C_l[i, j] * 0.5
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.min(C_l[i, j], 8.0)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return kernel


small = matmul_nt(512, 512, 256)
large = matmul_nt(4096, 4096, 4096, block_K=64)
"""

CELLS = {
    "no-warp-partition": (GEMM_CELL.format(block_K=32, threads=96, dtype="T.float16"), "sm_90a"),
    "mma-tile-shape": (GEMM_CELL.format(block_K=40, threads=128, dtype="T.float16"), "sm_90a"),
    "feature-newer-arch": (GEMM_CELL.format(block_K=64, threads=128, dtype="T.float4_e2m1fn"), "sm_90a"),
    "parallel-layout-not-injective": (SOFTMAX_CELL, "sm_90a"),
    "gemm-k-mismatch": (TRANSPOSED_CELL, "sm_90a"),
}


def run_cell(text, target, name):
    python = "\n" + text
    filename = f"<tilelab-repro-{name}>"
    linecache.cache[filename] = (len(python), None, python.splitlines(True), filename)
    host_shown = []
    from tilelab.cell.session import CellHost

    host = CellHost(display=host_shown.append, traceback=lambda err, tb: [str(err)],
                    syntax_traceback=lambda err: [str(err)], say=lambda line: None)
    source = CellSource(text, python, filename, cell_identity({}, text))
    with pytest.raises(LoweringError) as info:
        CellSession().run(source, parse_cell_line(f"--target {target} --force"), {}, host)
    return info.value


@pytest.mark.slow  # five cells shrunk (10-30 s each) and five fresh TileLang processes: make test runs the one
# that shrinks quickest (no-warp-partition), make test-heavy the other four
@pytest.mark.parametrize("cause", [c if c == "no-warp-partition" else pytest.param(c, marks=pytest.mark.heavy)
                                   for c in sorted(CELLS)])
def test_the_reproducer_of_a_failing_cell_fails_the_same_way_in_a_fresh_process_in_a_third_of_its_lines(
        cause, tmp_path):
    text, target = CELLS[cause]
    err = run_cell(text, target, cause)
    assert err.cause == cause, str(err)
    # the magic's short traceback says how to get the reproducer
    from tilelab.cell.session import lowering_lines

    source = CellSource(text, "\n" + text, f"<tilelab-repro-{cause}>", "")
    assert any("sys.last_value.reproducer()" in line for line in lowering_lines(err, source))
    said = []
    rep = err.reproducer(time_limit_s=240, progress=said.append)
    assert rep.reproduces, rep.note
    assert said and said[-1].startswith("reproducer: ")  # progress, a line per step
    assert "no single step" in rep.note or "time limit" in rep.note
    original = code_lines(text)
    assert rep.lines_after <= original / 3, (original, rep.script)
    assert "tilelang 0.1.15" in rep.script and "python 3." in rep.script  # the versions, for the issue
    path = tmp_path / "repro.py"
    path.write_text(rep.script)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode != 0, proc.stdout[-2000:]
    said_last = [line for line in proc.stderr.splitlines() if line.strip()]
    assert any(sentence_key(err.diagnosis.message) == sentence_key(line.split("Error: ", 1)[-1])
               for line in said_last), (sentence_key(err.diagnosis.message), proc.stderr[-3000:])
