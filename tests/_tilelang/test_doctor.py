"""The doctor for compile failures (tilelab._tilelang.doctor): every cause in the catalogue is triggered by
a kernel of ours (tests/doctor_kernels.py) lowered by TileLang 0.1.15, and recognised with the pass
that failed and the kernel line (read from the ``# <- cause`` marks in that file's text); an
unknown failure still names its pass and says it is not in the catalogue; the magic, the CLI and
the corpus show the same diagnosis."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import tilelab
from tilelab._tilelang import doctor as _doctor
from tilelab.records.errors import LoweringError

sys.path.insert(0, str(Path(__file__).parents[1]))
import doctor_kernels

HERE = Path(__file__).parents[1]
ROOT = HERE.parent
KERNEL_FILE = HERE / "doctor_kernels.py"


def marked_lines(cause_id: str) -> set[int]:
    """The lines of doctor_kernels.py marked ``# <- ... cause_id ...``."""
    found = set()
    for number, text in enumerate(KERNEL_FILE.read_text().splitlines(), 1):
        mark = re.search(r"# <- ([\w\- ]+)$", text)
        if mark and cause_id in mark.group(1).split():
            found.add(number)
    return found


@pytest.fixture(scope="module")
def failures():
    """Each regression kernel lowered once for its target: cause id -> the LoweringError."""
    out = {}
    for cause_id, (factory, target, _) in doctor_kernels.KERNELS.items():
        with pytest.raises(LoweringError) as info:
            tilelab.inspect(factory, target, force=True)
        out[cause_id] = info.value
    return out


def test_the_catalogue_has_at_least_15_causes_each_with_a_regression_kernel():
    ids = [c.id for c in _doctor.CAUSES]
    assert len(ids) == len(set(ids))
    with_kernels = (set(doctor_kernels.KERNELS) | {"wrong-arguments"}) & set(ids)
    assert len(with_kernels) >= 15, with_kernels
    assert set(doctor_kernels.KERNELS) <= set(ids)


@pytest.mark.parametrize("cause_id", sorted(doctor_kernels.KERNELS))
def test_each_regression_kernel_is_diagnosed_with_its_cause_pass_and_line(failures, cause_id):
    err = failures[cause_id]
    expected_pass = doctor_kernels.KERNELS[cause_id][2]
    assert err.cause == cause_id, str(err)
    assert err.pass_name == expected_pass, str(err)
    assert err.advice and err.diagnosis.meaning and "?" not in err.diagnosis.meaning
    marks = marked_lines(cause_id)
    if marks:
        assert err.kernel_line is not None and Path(err.kernel_line[0]).name == KERNEL_FILE.name, str(err)
        assert err.kernel_line[1] in marks, (err.kernel_line, marks)
    text = str(err)
    assert "cause: " in text and "what to change: " in text
    assert err.summary in text  # TVM's own sentence stays


def test_a_tile_op_called_with_the_wrong_arguments_while_the_cell_runs():
    from tilelab import _tilelang

    with pytest.raises(LoweringError) as info, _tilelang.tilelang_errors(None, stage="elaboration"):
        doctor_kernels.copy_with_extra_arguments()
    err = info.value
    assert (err.cause, err.pass_name) == ("wrong-arguments", "elaboration"), str(err)
    assert "T.copy was called with arguments it does not take: it takes 2 positional arguments but 6 were given" \
        in err.diagnosis.meaning
    assert err.kernel_line[1] in marked_lines("wrong-arguments")


def test_the_diagnosis_fills_in_the_names_the_message_gave(failures):
    assert "A is float16 and B is float32" in failures["mixed-dtype-gemm"].diagnosis.meaning
    assert "3 warps" in failures["no-warp-partition"].diagnosis.meaning
    assert failures["layout-not-injective"].diagnosis.buffers == ("tile",)
    assert "scael" in failures["python-name"].advice
    assert "index A with 2 indices" in failures["index-rank"].advice


def test_a_cause_of_the_target_comes_before_a_general_one():
    message = ("local_buf must be a fragment -- TileLang cannot lower this kernel for c (the host CPU, through "
               "C source)")
    assert _doctor.diagnose(message, target_family="cpu").cause == "gpu-only-on-cpu"
    assert _doctor.diagnose(message, target_family="cuda").cause == "accumulator-not-fragment"


def test_an_unknown_failure_names_its_pass_and_says_it_is_not_in_the_catalogue():
    trace = ("  File \"tilelang/cuda/pipeline.py\", line 90, in Body\n"
             "    mod = tilelang.transform.InjectFenceProxy()(mod)\n"
             "  File \"<unknown>\", line 0, in tvm::tl::CopyNode::Lower(tvm::tl::LowerArgs const&) const\n"
             "tvm.error.InternalError: Check failed: (x) is false: a failure nobody has seen\n")
    diagnosis = _doctor.diagnose("Check failed: (x) is false: a failure nobody has seen", trace,
                                 buffers=("A_shared", "x"))
    assert diagnosis.cause is None and not diagnosis.known
    assert diagnosis.pass_name == "tl.InjectFenceProxy" and diagnosis.tile_op == "T.copy"
    assert diagnosis.buffers == ("x",)
    lines = diagnosis.lines()
    assert any("not in tilelab's catalogue" in line for line in lines)
    assert lines[0] == "failed in pass tl.InjectFenceProxy, at T.copy on x"


def test_a_failing_pass_seen_by_the_instrument_wins_over_the_trace():
    diagnosis = _doctor.diagnose("local_buf must be a fragment", "tilelang.transform.LowerTileOp()(mod)",
                                 pass_name="tl.LayoutInference")
    assert diagnosis.pass_name == "tl.LayoutInference" and diagnosis.cause == "accumulator-not-fragment"


@pytest.mark.parametrize("trace, expected", [
    ("mod = tilelang.transform.LayoutInference()(mod)\n in tvm::tl::LayoutInferencer::Substitute",
     "tl.LayoutInference"),
    ("mod = tvm.tirx.transform.Simplify()(mod)", "tirx.Simplify"),
    ("in tvm::tl::LowerTileOpPass::VisitStmt_", "tl.LowerTileOp"),
    ("[TileLang:tilelang.language.eager.builder:CRITICAL] Failed to build prim_func from k", "elaboration"),
    ("ValueError: Unresolved call Op(tl.tvm_mfma) in CodeGenCUDA", "codegen"),
    ("nothing that names a pass", None),
])
def test_the_pass_read_from_a_trace(trace, expected):
    assert _doctor.pass_from_trace(trace) == expected


def test_the_diagnosis_never_hides_the_failure(monkeypatch):
    from tilelab import _tilelang

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the doctor")

    monkeypatch.setattr(_doctor, "diagnose", broken)
    err = _tilelang.diagnosed(LoweringError("TileLang lowering failed: something", kernel="k"))
    assert err.diagnosis is None and err.cause is None and str(err) == "k: TileLang lowering failed: something"


def test_a_diagnosis_round_trips_through_a_dict(failures):
    diagnosis = failures["layout-conflict"].diagnosis
    assert _doctor.Diagnosis.from_dict(diagnosis.to_dict()) == diagnosis


@pytest.mark.heavy
def test_the_cli_shows_the_diagnosis():
    expr = f"{KERNEL_FILE}:accumulator_in_shared()"
    proc = subprocess.run([sys.executable, "-m", "tilelab", "inspect", expr, "--target", "sm_90a"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    err = proc.stderr
    assert "local_buf must be a fragment" in err
    assert "failed in pass tl.LayoutInference, at T.gemm" in err
    assert "cause: T.gemm's accumulator is not a fragment" in err and "what to change: allocate the accumulator" in err


def test_corpus_rows_carry_the_diagnosis_and_the_table_counts_the_explained():
    from tilelab.engine import corpus as _corpus

    rows = [
        _corpus.CorpusRow("a.py", "k", "sm_90a", _corpus.CANNOT_LOWER, "local_buf must be a fragment",
                          cause="accumulator-not-fragment", pass_name="tl.LayoutInference", line="12: T.gemm(a, b, c)"),
        _corpus.CorpusRow("b.py", "k", "sm_90a", _corpus.CANNOT_LOWER, "Check failed: something new",
                          pass_name="tl.LowerTileOp"),
        _corpus.CorpusRow("c.py", "k", "sm_90a", _corpus.OK),
    ]
    assert [r.explained for r in rows] == [True, False, False]
    table = _corpus.render_table(rows)
    assert "[accumulator-not-fragment] local_buf must be a fragment (tl.LayoutInference, line 12)" in table
    assert "[unknown cause] Check failed: something new (tl.LowerTileOp)" in table
    assert "explained: 1/2 compile failures name the pass, the line and a known cause (50.0%)" in table
    assert _corpus.CorpusRow.from_dict(rows[0].to_dict()) == rows[0]
    several = _corpus.CorpusRow("d.py", "k", "sm_90a", _corpus.CANNOT_LOWER, "Check failed: (0) is false: int4",
                                cause="int4-tma-copy", pass_name="tl.LowerTileOp", line="31: T.copy(A, a)",
                                candidates=(32, 40))
    assert "(tl.LowerTileOp, line 31 or 32 or 40)" in _corpus.render_table([several])
    assert _corpus.CorpusRow.from_dict(several.to_dict()) == several


# ------------------------------------------------------------------------------------------------
# Placing a failure among several tile ops of the same kind


def _site(op, line, *buffers, file="k.py"):
    return _doctor.TileSite(op, line, file, tuple(buffers), f"line {line}")


GLOBAL_INT4 = ("Q", "int4", "global", "(256, 256)")
SHARED_INT4 = ("q", "int4", "shared.dyn", "(64, 64)")
GLOBAL_F16 = ("A", "float16", "global", "(256, 256)")
SHARED_F16 = ("a", "float16", "shared.dyn", "(64, 64)")


def test_a_failure_is_placed_on_the_first_op_its_cause_can_happen_at_with_the_others_as_candidates():
    sites = [_site("T.fill", 3, ("c", "float32", "local.fragment", "(64, 64)")),
             _site("T.copy", 4, GLOBAL_F16, SHARED_F16),
             _site("T.copy", 5, GLOBAL_INT4, SHARED_INT4),
             _site("T.copy", 6, SHARED_INT4, GLOBAL_INT4),
             _site("T.copy", 7, SHARED_F16, GLOBAL_F16)]
    int4_copy = next(c for c in _doctor.CAUSES if c.id == "int4-tma-copy")
    line, candidates = _doctor.place(sites, tile_op="T.copy", cause=int4_copy)
    assert line == ("k.py", 5, "line 5") and candidates == (6,)
    # The buffers the message names narrow further: the copy touching them.
    assert _doctor.place(sites, tile_op="T.copy", cause=int4_copy, names=("R",))[0][1] == 5
    assert _doctor.place(sites, tile_op="T.copy", names=("a",)) == (("k.py", 4, "line 4"), (7,))
    # Nothing to go by: no line rather than a guess.
    assert _doctor.place(sites) == (None, ())


def test_a_cause_that_disagrees_with_the_traces_tile_op_decides_where_the_failure_is():
    sites = [_site("T.copy", 4, GLOBAL_F16, SHARED_F16), _site("tl.tvm_mfma", 9, SHARED_F16)]
    mfma = next(c for c in _doctor.CAUSES if c.id == "amd-intrinsic-on-cuda")
    assert _doctor.place(sites, tile_op="T.copy", cause=mfma)[0][1] == 9


def test_the_diagnosis_names_the_candidate_lines_and_keeps_them_through_a_dict():
    sites = [_site("T.gemm", 10, SHARED_F16, SHARED_F16, ("c", "float32", "shared.dyn", "(64, 64)")),
             _site("T.gemm", 20, SHARED_F16, SHARED_F16, ("c", "float32", "shared.dyn", "(64, 64)"))]
    diagnosis = _doctor.diagnose("local_buf must be a fragment", "in tvm::tl::GemmNode::InferLayout", sites=sites)
    assert diagnosis.cause == "accumulator-not-fragment" and diagnosis.line[1] == 10 and diagnosis.candidates == (20,)
    assert any("most likely of 2" in text and "also line 20" in text for text in diagnosis.lines())
    assert _doctor.Diagnosis.from_dict(diagnosis.to_dict()) == diagnosis


def test_a_schedules_failure_is_placed_on_the_line_that_quotes_the_name():
    source = [(1, "def k():"), (2, "    # 'acc' is the accumulator"), (3, "    T.WSPipeline('kv', [s], depth=2)"),
              (4, "    T.WSPipeline(\"acc\", [o], depth=1)"), (5, "    T.annotate_ws_schedule(schedule)")]
    message = "ws_schedule: pipeline 'acc' has sync entries in scopes 'loop_kv' and 'loop_wave'"
    diagnosis = _doctor.diagnose(message, source_lines=source)
    assert diagnosis.cause == "ws-schedule" and diagnosis.line[1] == 4
    unnamed = _doctor.diagnose("ws_schedule: the schedule is empty", source_lines=source)
    assert unnamed.cause == "ws-schedule" and unnamed.line[1] == 5


# ------------------------------------------------------------------------------------------------
# The corpus over pytest files


def test_the_parameter_sets_a_pytest_function_is_called_with():
    from tilelab.engine import corpus as _corpus

    @pytest.mark.parametrize("m", [64, pytest.param(128, id="big")])
    @pytest.mark.parametrize("dtype, acc", [("float16", "float32"), ("int8", "int32")])
    def parametrized(m, dtype, acc, threads=128):
        pass

    def plain():
        pass

    def needs_a_fixture(tmp_path):
        pass

    assert _corpus.param_sets(parametrized) == [
        {"dtype": "float16", "acc": "float32", "m": 64}, {"dtype": "float16", "acc": "float32", "m": 128},
        {"dtype": "int8", "acc": "int32", "m": 64}, {"dtype": "int8", "acc": "int32", "m": 128}]
    assert _corpus.param_sets(parametrized, limit=1) == [{"dtype": "float16", "acc": "float32", "m": 64}]
    assert _corpus.param_sets(plain) == [{}]
    assert _corpus.param_sets(needs_a_fixture) is None


TEST_FILE = '''
import pytest
import tilelang
import tilelang.language as T


def build(threads):
    @T.prim_func
    def k(A: T.Tensor((128, 128), T.float16), B: T.Tensor((128, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((128, 128), T.float16)
            b = T.alloc_shared((128, 128), T.float16)
            c = T.alloc_fragment((128, 128), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c)  # <- no-warp-partition
            T.copy(c, C)
    return k


@pytest.mark.parametrize("threads", [128, 96])
def test_gemm(threads):
    kernel = tilelang.compile(build(threads), out_idx=[2])
    assert kernel is not None


def test_copy_with_extra_arguments():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=64) as bx:
            T.copy(A, B, 1, 2, 3)  # <- wrong-arguments


def test_needs_a_fixture(tmp_path):
    raise AssertionError("never called")
'''


@pytest.mark.slow  # two TileLang processes: one per pytest file, and its lowering
def test_the_corpus_lowers_the_kernels_a_pytest_file_builds_and_diagnoses_its_failures(tmp_path):
    from tilelab.engine import corpus as _corpus

    path = tmp_path / "test_kernels.py"
    path.write_text(TEST_FILE)
    marks = {m: n for n, text in enumerate(TEST_FILE.splitlines(), 1) for m in re.findall(r"# <- ([\w-]+)", text)}
    assert _corpus.find_scripts(tmp_path) == [] and _corpus.find_scripts(tmp_path, tests=True) == [path]
    rows = _corpus.run_corpus(tmp_path, jobs=1, timeout_s=240, lower_only=True, tests=True)
    by_script = {r.script: r for r in rows}
    assert by_script["test_kernels.py::test_gemm[0]"].verdict == _corpus.LOWERED
    failed = by_script["test_kernels.py::test_gemm[1]"]
    assert (failed.verdict, failed.cause, failed.pass_name) == (_corpus.CANNOT_LOWER, "no-warp-partition",
                                                                "tl.LayoutInference")
    assert failed.line.startswith(f"{marks['no-warp-partition']}: T.gemm(a, b, c)")
    built = by_script["test_kernels.py::test_copy_with_extra_arguments"]
    assert (built.verdict, built.cause, built.pass_name) == (_corpus.CANNOT_LOWER, "wrong-arguments", "elaboration")
    assert built.line.startswith(f"{marks['wrong-arguments']}: T.copy(A, B, 1, 2, 3)")
    assert not any("test_needs_a_fixture" in r.script for r in rows)
    assert all(r.explained for r in rows if r.verdict == _corpus.CANNOT_LOWER)


def test_the_criterion_table_counts_each_folders_failures_by_what_their_diagnosis_names():
    from tilelab.engine import corpus as _corpus

    def failure(script, cause="", pass_name="", line=""):
        return _corpus.CorpusRow(script, "k", "sm_90a", _corpus.CANNOT_LOWER, "why", cause=cause,
                                 pass_name=pass_name, line=line)

    examples = [failure("a.py", "int4-tma-copy", "tl.LowerTileOp", "31: T.copy(A, a)"),
                failure("b.py", "", "tl.MaterializeWSSchedule", "12: T.WSPipeline('acc', [o], depth=1)"),
                _corpus.CorpusRow("c.py", "k", "sm_90a", _corpus.LOWERED)]
    testing = [failure("t.py::test_a", "ws-schedule", "tl.MaterializeWSSchedule", "4: x"),
               failure("t.py::test_b", "no-layout-found", "tl.LayoutInference"),
               failure("t.py::test_c", "python-name", "", "7: y"),
               failure("t.py::test_d", "wrong-arguments", "elaboration", "9: T.copy(A, B, 1)")]
    assert _corpus.criterion(examples) == {"failures": 2, "pass": 2, "line": 2, "known cause": 1, "explained": 1}
    table = _corpus.render_criterion({"examples": examples, "testing": testing}).splitlines()
    assert table[0].split() == ["failures", "with", "pass", "with", "line", "known", "cause", "explained", "(all",
                                "three)"]
    assert table[1].split() == ["examples", "2", "2", "(100%)", "2", "(100%)", "1", "(50%)", "1", "(50%)"]
    assert table[2].split() == ["testing", "4", "3", "(75%)", "3", "(75%)", "4", "(100%)", "2", "(50%)"]
    assert table[3].split() == ["all", "6", "5", "(83%)", "5", "(83%)", "5", "(83%)", "3", "(50%)"]


def test_the_magic_shows_the_likeliest_cell_line_and_the_other_candidates_short_with_the_trace_folded():
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.testing import globalipapp

    # IPython's test shell is global to the process: another module of this process may have made it
    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tilelab")
    shell.display_pub = CapturingDisplayPublisher()
    cell = KERNEL_FILE.read_text().split("def int4_in_the_second_copy", 1)[1].split("\n\n\ndef ", 1)[0]
    cell = ("import tilelang.language as T\n\n\ndef int4_in_the_second_copy" + cell
            + "\n\nkernel = int4_in_the_second_copy()\n")
    result = shell.run_cell("%%tilelang --target sm_90a\n" + cell)
    err = result.error_in_exec
    assert type(err).__name__ == "LoweringError"
    lines = [line.strip() for line in err._render_traceback_()]
    cell_lines = ("%%tilelang --target sm_90a\n" + cell).split("\n")
    marked = next(n for n, text in enumerate(cell_lines, 1) if text.endswith("# <- int4-tma-copy"))
    store = next(n for n, text in enumerate(cell_lines, 1) if "T.copy(q, R[" in text)
    assert lines[0] == "LoweringError: TileLang lowering failed: Check failed: (0) is false: int4"
    assert lines[1] == f"cell line {marked}: {cell_lines[marked - 1].strip()}"
    assert lines[2] == "failed in pass tl.LowerTileOp, at T.copy"
    assert lines[3] == f"the line above is the most likely of 2 that fit: the first the pass visits; also line {store}"
    assert lines[4].startswith("cause: int4 data through a TMA copy") and lines[5].startswith("what to change: ")
    folded = shell.display_pub.outputs[-2]["data"]["text/html"]
    assert "<details><summary" in folded and "CopyNode" in folded
    # then the button that shrinks it to a reproducer (a widget; a line to act on where none shows)
    button = shell.display_pub.outputs[-1]["data"]
    assert "application/vnd.jupyter.widget-view+json" in button and "reproducer()" in button["text/plain"]


@pytest.mark.heavy
def test_the_cli_names_the_likeliest_line_and_the_candidates():
    expr = f"{KERNEL_FILE}:int4_in_the_second_copy()"
    proc = subprocess.run([sys.executable, "-m", "tilelab", "inspect", expr, "--target", "sm_90a"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    (marked,) = marked_lines("int4-tma-copy")
    store = next(n for n, text in enumerate(KERNEL_FILE.read_text().splitlines(), 1) if "T.copy(q, R[" in text)
    assert f"doctor_kernels.py:{marked}: T.copy(Q[by * 64, bx * 64], q)" in proc.stderr
    assert f"also line {store}" in proc.stderr and "cause: int4 data through a TMA copy" in proc.stderr


def test_the_warpgroup_form_of_the_warp_partition_failure_is_the_same_cause():
    with pytest.raises(LoweringError) as info:
        tilelab.inspect(doctor_kernels.three_warpgroups_on_104_columns(), "sm_90a", force=True)
    err = info.value
    assert "(Warp-Group MMA)" in err.summary
    assert (err.cause, err.pass_name, err.tile_op) == ("no-warp-partition", "tl.LayoutInference", "T.gemm")
    assert err.kernel_line[1] in marked_lines("no-warp-partition")
    assert "the 64x104 tile among the block's 12 warps" in err.diagnosis.meaning


def test_a_pass_written_in_python_is_named_by_its_call_in_the_trace_not_its_functions_name():
    trace = ("    tilelang.analysis.FragmentLoopChecker()(mod)\n"
             '  File "tilelang/analysis/fragment_loop_checker.py", line 112, in pass_fn\n')
    assert _doctor.diagnose("something", trace, pass_name="pass_fn").pass_name == "tl.FragmentLoopChecker"
    assert _doctor.diagnose("something", "", pass_name="pass_fn").pass_name == "pass_fn"


def test_a_tile_op_missing_a_keyword_only_argument_is_the_wrong_arguments_cause():
    from tilelab import _tilelang

    with pytest.raises(LoweringError) as info, _tilelang.tilelang_errors(None, stage="elaboration"):
        doctor_kernels.tcgen05_gemm_without_its_barrier()
    err = info.value
    assert "missing 1 required keyword-only argument: 'mbar'" in err.summary
    assert (err.cause, err.pass_name) == ("wrong-arguments", "elaboration"), str(err)
    assert "T.tcgen05_gemm was called with arguments it does not take" in err.diagnosis.meaning
    assert err.kernel_line[1] in marked_lines("wrong-arguments-keyword")


def test_an_unknown_failure_is_still_placed_on_the_line_of_the_op_it_names():
    sites = [_site("T.copy", 4, GLOBAL_F16, SHARED_F16),
             _site("T.copy", 5, SHARED_F16, ("x_frag", "float16", "local.fragment", "(64, 64)")),
             _site("T.copy", 6, ("x_frag", "float16", "local.fragment", "(64, 64)"), GLOBAL_F16)]
    trace = ("    mod = tilelang.transform.LowerTileOp()(mod)\n"
             '  File "<unknown>", line 0, in tvm::tl::CopyNode::Lower(tvm::tl::LowerArgs const&) const\n')
    diagnosis = _doctor.diagnose("Check failed: (ok) is false: a check nobody has seen on x_frag", trace,
                                 buffers=("A", "a", "x_frag"), sites=sites)
    assert not diagnosis.known and diagnosis.pass_name == "tl.LowerTileOp" and diagnosis.tile_op == "T.copy"
    assert diagnosis.line == ("k.py", 5, "line 5") and diagnosis.candidates == (6,)
    assert diagnosis.lines()[-2].startswith("cause: not in tilelab's catalogue")
    # everything known of the operation: its buffers' dtypes, memories and shapes
    assert diagnosis.lines()[-1] == ("what is known: T.copy at line 5; a: float16 in shared.dyn, shape (64, 64); "
                                     "x_frag: float16 in local.fragment, shape (64, 64)")


def test_the_reductions_two_power_of_two_checks_are_one_cause():
    message = ("Check failed: (tirx::is_const_power_of_two_integer(Integer(logical_width), &shift)) is false: "
               "tl.reduce: XOR-butterfly AllReduce requires logical_width (threads / scale) to be a positive power "
               "of two, got 48 (threads=48, scale=1)")
    diagnosis = _doctor.diagnose(message)
    assert diagnosis.cause == "reduce-threads-not-power-of-two"
    assert "the logical_width is 48" in diagnosis.meaning
    aligned = _doctor.diagnose("Check failed: base % warp_size == 0 (16 vs. 0) : tl.reduce: partial scalar AllReduce "
                               "requires a warp-aligned participating thread range, got base 16")
    assert aligned.cause == "reduce-threads-not-power-of-two" and "the base is 16" in aligned.meaning


def test_a_view_of_more_bits_than_its_buffer_fails_while_the_cell_runs():
    from tilelab import _tilelang

    with pytest.raises(LoweringError) as info, _tilelang.tilelang_errors(None, stage="elaboration"):
        doctor_kernels.view_of_more_bits()
    err = info.value
    assert (err.cause, err.pass_name) == ("view-bit-count", "elaboration"), str(err)
    assert "the view asks for 98304 bits of A's 65536" in err.diagnosis.meaning
    assert err.kernel_line[1] in marked_lines("view-bit-count")


# ------------------------------------------------------------------------------------------------
# Causes of TileLang's testing/ failures: what the MMA instructions, IEEE intrinsics, mbarriers and
# layout maps require, with the piece of the message that broke it


def test_the_instruction_gemms_name_the_requirement_the_kernel_breaks(failures):
    wgmma = failures["wgmma-constraints"]
    assert wgmma.diagnosis.tile_op == "T.wgmma_gemm" and wgmma.diagnosis.buffers == ()  # the target's "c" is no buffer
    assert "threads= must be a multiple of 128" in wgmma.diagnosis.meaning  # the 64-thread block
    tcgen05 = failures["tcgen05-constraints"]
    assert "C is a local.fragment buffer, and tcgen05 accumulates in tensor memory" in tcgen05.diagnosis.meaning
    assert "T.alloc_tmem" in tcgen05.advice
    pair = failures["tcgen05-2cta-no-cluster"]
    assert "cluster_dims (2,1,1) or (1,2,1)" in pair.diagnosis.meaning and "T.ClusterKernel" in pair.advice


def test_each_requirement_the_message_shows_is_checked():
    head = ('T.wgmma_gemm() requires Hopper WGMMA lowering, but constraints were not satisfied. Got target={"kind":'
            '"cuda","tag":"","keys":["cuda","gpu"],"host":{"kind":"c","tag":"","keys":["cpu"]},"arch":"sm_90a"}, ')
    small = _doctor.diagnose(head + "A(scope=shared.dyn, dtype=float16), B(scope=shared.dyn, dtype=float16), "
                                    "C(scope=local.fragment, dtype=float32), M=32, N=64, K=8.")
    assert small.cause == "wgmma-constraints"
    assert "M=32 is not a multiple of 64" in small.meaning and "K=8 of float16 is 16 bytes" in small.meaning
    assert "threads" not in small.meaning.split("does not fit it:")[1]
    wide = _doctor.diagnose(head.replace("wgmma_gemm() requires Hopper WGMMA", "tcgen05_gemm() requires Blackwell "
                                         "TCGEN5MMA") + "A(scope=shared.dyn, dtype=float32), B(scope=shared.dyn, "
                                         "dtype=float32), C(scope=shared.tmem, dtype=float32), M=128, N=128, K=64.")
    assert wide.cause == "tcgen05-constraints"
    assert "the target is sm_90a, and tcgen05 exists only on Blackwell" in wide.meaning
    assert "A and B are float32" in wide.meaning and "C is a" not in wide.meaning
    # a corpus row keeps TileLang's sentence cut at 300 characters: the cause stays, and no "?" is filled in
    cut = _doctor.diagnose((head + "A(scope=shared.dyn, dtype=float16), B(scope=shared.dyn, dtype=float16)")[:300])
    assert cut.cause == "wgmma-constraints" and "?" not in cut.meaning


def test_the_ieee_intrinsics_name_the_dtype_and_the_rounding_mode(failures):
    rsqrt = failures["ieee-math-dtype"]
    assert "CUDA has no IEEE frsqrt for float64" in rsqrt.diagnosis.meaning
    assert rsqrt.advice.startswith("use ieee_fsqrt followed by ieee_frcp")  # TileLang's own workaround, kept
    rounding = failures["ieee-half-rounding"]
    assert "rounding mode 'ru'" in rounding.diagnosis.meaning and "default 'rn'" in rounding.advice


def test_a_check_between_two_passes_names_the_pass_it_guards(failures):
    barrier = failures["barrier-before-hopper"]
    assert barrier.pass_name == "tl.LowerSharedBarrier"  # read from TileLang's pipeline after the raise
    assert "the target sm_80 has none" in barrier.diagnosis.meaning and "T.sync_threads()" in barrier.advice


def test_a_layout_map_with_a_gap_quotes_the_map(failures):
    gap = failures["layout-not-normalisable"]
    assert "(_i, _j, _k) -> (_j % 4, _i * 64 + _j // 4)" in gap.diagnosis.meaning


@pytest.mark.parametrize("fixed, target", [
    (lambda: doctor_kernels.cta_pair_mma(cluster=True), "sm_100a"),  # T.ClusterKernel(cluster_dims=(2, 1, 1))
    (lambda: doctor_kernels.fragment_map(rows_apart=16), "sm_90a"),  # strides that leave no gap
    (lambda: doctor_kernels.mbarrier_handshake(), "sm_90a"),  # the mbarrier on Hopper
])
def test_what_the_advice_says_to_change_lowers(fixed, target):
    from tilelab import _tilelang

    _tilelang.tilelang_lower(fixed(), target, out_idx=None, pass_configs={})


def test_a_saved_row_is_diagnosed_again_from_its_sentence_keeping_the_runs_pass_and_line():
    from tilelab.engine import corpus as _corpus

    saved = _corpus.CorpusRow("math/t.py::test_x", "k", "sm_90a", _corpus.CANNOT_LOWER,
                              "IEEE frsqrt is not supported for float64 in CUDA. Use ieee_fsqrt followed by "
                              "ieee_frcp as a workaround.", pass_name="codegen", line="12: y = T.ieee_frsqrt(x)")
    again = _corpus.rediagnosed(saved)
    assert again.cause == "ieee-math-dtype" and again.explained
    assert (again.pass_name, again.line, again.reason) == (saved.pass_name, saved.line, saved.reason)
    # what the run did not find stays missing: a re-reading has neither the trace nor the kernel
    bare = _corpus.rediagnosed(_corpus.CorpusRow("t.py", "k", "sm_80", _corpus.CANNOT_LOWER, saved.reason))
    assert bare.cause == "ieee-math-dtype" and (bare.pass_name, bare.line) == ("", "") and not bare.explained
    lowered = _corpus.CorpusRow("t.py", "k", "sm_90a", _corpus.LOWERED)
    assert _corpus.rediagnosed(lowered) is lowered


def test_a_failure_not_in_the_catalogue_still_shows_the_pass_the_line_and_tvms_sentence(monkeypatch):
    # A WGMMA tile 24 columns wide: its mechanism (a B row of 48 bytes no WGMMA layout tiles) is found
    # from the kernel's state; with no rule to find it, the failure is outside the catalogue.
    with pytest.raises(LoweringError) as info:
        tilelab.inspect(doctor_kernels.wgmma_on_24_columns(), "sm_90a", force=True)
    assert info.value.cause == "mma-tile-shape" and "N=24 float16 are 48 bytes" in info.value.diagnosis.meaning
    from tilelab._tilelang import mechanisms

    monkeypatch.setattr(mechanisms, "RULES", [])
    with pytest.raises(LoweringError) as info:
        tilelab.inspect(doctor_kernels.wgmma_on_24_columns(), "sm_90a", force=True)
    err = info.value
    assert err.cause is None and err.pass_name == "tl.LowerTileOp"
    assert "Not a canonical GMMA_MN layout" in err.summary  # TVM's own sentence
    assert Path(err.kernel_line[0]).name == KERNEL_FILE.name and err.kernel_line[1] in marked_lines("unknown")
    text = str(err)
    assert "failed in pass tl.LowerTileOp" in text and "not in tilelab's catalogue" in text
    # and everything known of the operation: the target, the threads, its buffers
    assert "what is known: target sm_90a, 128 threads; T.wgmma_gemm at line" in text


def test_a_loop_nested_where_it_may_not_be_is_placed_on_the_inner_loop(failures):
    # the inner statement's line, not the outer T.Parallel's (which the checker does not name)
    assert "T.copy" in failures["tile-op-in-parallel"].diagnosis.meaning
    assert "call T.copy outside the T.Parallel loop" in failures["tile-op-in-parallel"].advice
    assert "scratch is a T.alloc_local buffer" in failures["local-indexed-by-parallel"].diagnosis.meaning
    lines = [(n, " " * indent + text) for n, indent, text in
             [(1, 0, "def k():"), (2, 4, "for i in T.Parallel(4):"), (3, 8, "T.fill(a, 0)"),
              (4, 4, "T.copy(a, b)"), (5, 4, "for j in T.Parallel(4):"), (6, 8, "T.copy(b, c)")]]
    assert _doctor._nested_line(r"\bT\.copy\(", r"\bT\.Parallel\(", {}, lines)[1] == 6


def test_a_cause_the_run_found_with_the_trace_is_kept_when_the_row_is_read_again():
    from tilelab.engine import corpus as _corpus

    saved = _corpus.CorpusRow("gemm_int4.py", "main", "sm_90a", _corpus.CANNOT_LOWER,
                              "Check failed: (0) is false: int4",
                              cause="int4-tma-copy", pass_name="tl.LowerTileOp", line="31: T.copy(A, a)")
    assert _corpus.rediagnosed(saved) == saved  # the sentence alone would say int4-operand
    assert _doctor.diagnose(saved.reason).cause == "int4-operand"
    gone = _corpus.rediagnosed(_corpus.CorpusRow("t.py", "k", "sm_90a", _corpus.CANNOT_LOWER, saved.reason,
                                                 cause="a-cause-since-renamed"))
    assert gone.cause == "int4-operand"


# -- causes found by mechanism: read from the kernel's state, not from TileLang's wording ----------------
MECHANISM_CAUSES = sorted(set(_doctor.MECHANISMS) & set(doctor_kernels.KERNELS))


@pytest.mark.parametrize("cause_id", MECHANISM_CAUSES)
def test_a_cause_by_mechanism_is_found_from_the_state_whatever_tilelang_says(failures, cause_id):
    err = failures[cause_id]
    assert err.diagnosis.by_mechanism and err.diagnosis.evidence, str(err)
    assert any(line.startswith("seen in the kernel: ") for line in err.diagnosis_lines())
    buffers, _, source_lines, sites, threads, target = err._doctor_context
    _, target_name, _ = doctor_kernels.KERNELS[cause_id]
    family = "hip" if target_name.startswith("gfx") else "cuda"
    again = _doctor.diagnose("a sentence tilelab has never read", "", pass_name=err.pass_name, target_family=family,
                             buffers=buffers, source_lines=source_lines, sites=sites, target=target,
                             threads=threads)
    assert again.cause == cause_id and again.line[1] == err.kernel_line[1]


def test_the_mechanism_names_what_collides_conflicts_or_does_not_divide(failures):
    said = {c: failures[c].diagnosis.meaning for c in MECHANISM_CAUSES}
    assert "iterations (i=0, j=0) and (i=0, j=1) both write f[0, 0]" in said["parallel-layout-not-injective"]
    assert "as f[i, j] and as f[j, i]" in said["parallel-layout-conflict"]
    assert "A's K is 32 and B's K is 128" in said["gemm-k-mismatch"]
    assert "K=40 is not a multiple of 16" in said["mma-tile-shape"]
    assert "sm_100a introduced" in said["feature-newer-arch"] and "lowered for sm_90a" in said["feature-newer-arch"]
    assert "A_s is int4, B_s is int4" in said["mma-dtype"]
    assert "64-lane" in failures["threads-below-wavefront"].diagnosis.advice or "64" in said["threads-below-wavefront"]
    assert "A_t (local) is not" in said["scope-for-op"]
    assert "tl.device_assert" in said["codegen-intrinsic"]
    # which GEMM laid out each fragment, and why the layouts differ: the first GEMM's warp split
    assert "S is the accumulator of T.gemm" in said["gemm-operand-layout"]
    assert "P is the A operand, in registers, of T.gemm" in said["gemm-operand-layout"]
    assert "128 threads split 2 x 2 warps" in said["gemm-operand-layout"]
    assert "GemmWarpPolicy.FullRow" in failures["gemm-operand-layout"].diagnosis.advice
    assert "accumulates into C_l, a int4 fragment" in said["mma-accumulator-dtype"]
    assert "writes an infinity into m, a float8_e4m3fn buffer" in said["no-infinity-dtype"]


def test_an_operand_in_the_wrong_memory_is_found_on_the_gemm_that_has_it():
    """TileLang's trace names T.gemm, and the failure is placed on the first; the second has the
    operand in thread-private memory: the cause and the line are the second's."""
    shared, fragment = "shared.dyn", "local.fragment"
    first = _doctor.TileSite("T.gemm", 10, "k.py", (("Q_s", "float16", shared, "(64, 64)"),
                                                    ("K_s", "float16", shared, "(64, 64)"),
                                                    ("S", "float32", fragment, "(64, 64)")), "T.gemm(Q_s, K_s, S)")
    second = _doctor.TileSite("T.gemm", 14, "k.py", (("P", "float16", "local", "(64, 64)"),
                                                     ("V_s", "float16", shared, "(64, 64)"),
                                                     ("acc", "float32", fragment, "(64, 64)")), "T.gemm(P, V_s, acc)")
    diagnosis = _doctor.diagnose("a sentence tilelab has never read", "", pass_name="tl.LayoutInference",
                                 target_family="cuda", sites=(first, second), line=("k.py", 10, first.text),
                                 target="sm_80", threads=128)
    assert diagnosis.cause == "scope-for-op" and diagnosis.line[1] == 14, diagnosis
    assert "P (local) is not" in diagnosis.meaning
