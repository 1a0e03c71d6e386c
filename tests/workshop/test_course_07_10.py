"""Lessons 07-11 of the course, beyond what the course's generic tests check for every lesson
(test_workshop.py: each solution passes, each declared wrong answer fails without the solution's
value; test_workshop_notebooks.py: every notebook runs as committed and with the solutions): what
the lessons declare, that a wrong kernel is told what is wrong in its own terms, that notebook 11
shows no native compiler warnings, and the GPU parts. The truths come from tilelab.inspect of real
lowerings and from CPU launches, so these tests fail if TileLang lowers differently or a checker
stops recognising a bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilelab import workshop
from tilelab.workshop import _answers, _core

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()
    yield
    _core._reset_for_tests()


def ours() -> list[workshop.Exercise]:
    return [e for n in ("07", "08", "09", "10", "11") for e in workshop.exercises(n)]


def test_the_lessons_declare_what_the_course_asks():
    exercises = ours()
    assert len(exercises) >= 11
    kernels = [e for e in exercises if e.kind in ("writes", "fixes")]
    assert len(kernels) >= 5 and not any(e.needs_gpu for e in kernels)
    for e in exercises:
        assert 2 <= len(e.hints) <= 3, e.id
        assert e.id in _core._WRONG or e.needs_gpu, f"{e.id} declares no wrong answers"
        assert e.lesson.startswith("tilelab.workshop.lessons.l")


@pytest.mark.slow
def test_a_wrong_kernel_is_told_what_is_wrong_in_its_own_terms():
    """The messages of the kernel checks come from the student's kernel: where its tiles went wrong,
    which blocks race, which misreading of the format it matches."""
    ex = _core.get("03.5")
    message = workshop.check("03.5", _answers.evaluate(ex, _core.wrong_answers("03.5")[1])).message
    assert "blocks (0, 0), (1, 0), (2, 0) and (3, 0) all wrote element 0 of Out" in message
    ex = _core.get("09.4")
    swapped = workshop.check("09.4", _answers.evaluate(ex, _core.wrong_answers("09.4")[0])).message
    assert "swapped" in swapped
    ex = _core.get("01.6")
    edge = workshop.check("01.6", _answers.evaluate(ex, _core.wrong_answers("01.6")[0])).message
    assert "at M=100, N=72" in edge and "never written" in edge  # right at whole tiles, not at the ragged size
    ex = _core.get("07.4")
    unchanged = workshop.check("07.4", _answers.evaluate(ex, ex.given))
    assert unchanged.status == "unanswered"  # the given kernel, untouched, is not a wrong try


@pytest.mark.gpu
def test_memcheck_counts_the_stores_past_the_end():
    """On a CUDA GPU with compute-sanitizer: 10.1's truth is memcheck's own count, and the
    solution's offset is what it reports for shifted_store."""
    from tilelab.workshop.lessons import l10_when_it_goes_wrong as lesson

    report = lesson.sanitizer_report()
    writes = [f for f in report.findings if "out-of-bounds" in f.kind and "write" in f.kind]
    assert len(writes) == lesson.SANITIZER_OFFSET, report.raw[-2000:]
    assert workshop.check("10.1", lesson.SANITIZER_OFFSET).status == "passed"


# ------------------------------------------------------------------------------------------
# The notebooks, run headless
# ------------------------------------------------------------------------------------------

def _run_notebook(name: str, tmp_path: Path, solutions: bool, monkeypatch: pytest.MonkeyPatch) -> list:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's tilelab
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        assert not cell.get("outputs"), "committed with outputs"
        if cell.cell_type == "code":
            assert not re.search(r"\btilelab\._|from tilelab\.\w*\._|import tilelab\.\w*\._", cell.source), cell.source
        key = cell.metadata.get("tilelab", {}).get("answer")
        if key and solutions:
            cell.source = _core.get(key).solution
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return nb.cells


def _checks(cells: list) -> dict[str, str]:
    """Each check cell's status, from its text output."""
    out = {}
    for cell in cells:
        key = cell.metadata.get("tilelab", {}).get("check")
        if key:
            text = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
            out[key] = text
    return out


def _stderr(cells: list) -> list[str]:
    return ["".join(o.get("text", "")) for c in cells for o in c.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stderr"]


@pytest.mark.slow
@pytest.mark.heavy  # make test runs notebook 06 whole; make test-heavy notebook 11 too (test_workshop_notebooks.py)
def test_notebook_11_lowers_for_the_mi300_without_red_warnings(tmp_path, monkeypatch):
    """TVM's C++ logging writes "Unable to detect ROCm version" and a vectorisation note to the
    process's stderr when a kernel is lowered for gfx942 on a machine without ROCm; the notebook
    shows neither (its lowering goes through the lesson, which keeps them out). The report cache
    is empty here, so the notebook really lowers for the MI300."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "reports"))
    cells = _run_notebook("11_many_targets", tmp_path, solutions=True, monkeypatch=monkeypatch)
    assert all(text.startswith(("\u2713", "\u23f8")) for text in _checks(cells).values()), _checks(cells)
    assert not _stderr(cells)


def test_the_flash_kernel_shown_in_notebook_08_is_the_lessons():
    import inspect

    nbformat = pytest.importorskip("nbformat")
    from tilelab.workshop.lessons import l08_flash_attention as lesson

    nb = nbformat.read(ROOT / "notebooks" / "08_flash_attention.ipynb", as_version=4)
    assert any(inspect.getsource(lesson.flash_forward) in c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.gpu
@pytest.mark.parametrize("exercise_id", ["07.4", "08.4", "09.3"])
def test_kernels_graded_by_their_lowering_are_also_right_on_a_gpu(exercise_id):
    """On a CUDA GPU the checks of 07.4, 08.4 and 09.3 also launch the solution against torch
    (elsewhere they grade how it was lowered): the solutions must pass that part too."""
    ex = _core.get(exercise_id)
    result = workshop.check(ex.id, _answers.evaluate(ex, ex.solution))
    assert result.status == "passed" and "right against torch" in result.message, result.message


@pytest.mark.gpu
def test_the_lesson_flash_kernel_matches_torch_on_a_gpu():
    import tilelab
    from tilelab.workshop.lessons import l08_flash_attention as lesson

    result = tilelab.run(lesson.flash_forward(1024, 64), ref=lesson.torch_attention,
                         tolerance=lesson.ATTENTION_TOLERANCE)
    assert result.passed, repr(result)
