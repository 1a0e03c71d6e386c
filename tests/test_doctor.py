"""The doctor for compile failures (tilelab._doctor): every cause in the catalogue is triggered by
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
from tilelab import _doctor
from tilelab._errors import LoweringError

sys.path.insert(0, str(Path(__file__).parent))
import doctor_kernels  # noqa: E402

HERE = Path(__file__).parent
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

    with pytest.raises(LoweringError) as info:
        with _tilelang.tilelang_errors(None, stage="elaboration"):
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
    ("mod = tilelang.transform.LayoutInference()(mod)\n in tvm::tl::LayoutInferencer::Substitute", "tl.LayoutInference"),
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
    from tilelab import _corpus

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
