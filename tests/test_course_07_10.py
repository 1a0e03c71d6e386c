"""Lessons 07-10 of the course: every exercise with its solution, with the typical wrong answers its
lesson declares (each message names a misconception and never contains the solution's value), and
unanswered; notebook 10 shows no native compiler warnings (test_workshop_notebooks.py runs every notebook
as committed and with the solutions). The truths come from tilelab.inspect of real lowerings and from CPU
launches, so these tests fail if TileLang lowers differently or a checker stops recognising a bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilelab import workshop
from tilelab.workshop import _answers, _core

ROOT = Path(__file__).resolve().parent.parent
# The checks that launch the student's kernel on the CPU several times (solution and every wrong one).
SLOW = {"08.1", "09.4", "10.1", "10.2", "10.6"}


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()
    yield
    _core._reset_for_tests()


def ours() -> list[workshop.Exercise]:
    return [e for n in ("07", "08", "09", "10") for e in workshop.exercises(n)]


def _ids(slow: bool) -> list:
    marks = (pytest.mark.slow,) if slow else ()
    return [pytest.param(e.id, marks=marks, id=e.id) for e in ours() if (e.id in SLOW) == slow]


def solution_values(ex: workshop.Exercise) -> list[str]:
    """What of the solution a wrong answer's message must not give away: a predicted value."""
    value = _answers.evaluate(ex, ex.solution)
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, tuple):
        return [repr(value), ", ".join(map(str, value))]
    return []


def test_the_lessons_declare_what_the_course_asks():
    exercises = ours()
    assert len(exercises) >= 11
    kernels = [e for e in exercises if e.kind in ("writes", "fixes")]
    assert len(kernels) >= 5 and not any(e.needs_gpu for e in kernels)
    for e in exercises:
        assert 2 <= len(e.hints) <= 3, e.id
        assert e.id in _core._WRONG or e.needs_gpu, f"{e.id} declares no wrong answers"
        assert e.lesson.startswith("tilelab.workshop.lessons.l")


def _grade(exercise_id: str) -> None:
    ex = _core.get(exercise_id)
    assert workshop.check(ex.id).status == "unanswered"
    answer = _answers.evaluate(ex, ex.solution)
    result = workshop.check(ex.id, answer)
    if ex.needs_gpu:
        assert result.status in ("needs_gpu", "passed")
        return
    assert result.status == "passed", result.message
    hidden = solution_values(ex)
    for source in _core.wrong_answers(ex.id):
        wrong = workshop.check(ex.id, _answers.evaluate(ex, source))
        assert wrong.status == "failed", (source, wrong.message)
        assert "raised" not in wrong.message or "LoweringError" in wrong.message, wrong.message
        for value in hidden:
            assert not re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", wrong.message), (value, wrong.message)


@pytest.mark.parametrize("exercise_id", _ids(slow=False))
def test_exercise_solution_passes_and_each_wrong_answer_names_its_mistake(exercise_id):
    _grade(exercise_id)


@pytest.mark.parametrize("exercise_id", _ids(slow=True))
def test_kernel_exercise_graded_on_the_cpu(exercise_id):
    _grade(exercise_id)


def test_a_wrong_kernel_is_told_what_is_wrong_in_its_own_terms():
    """The messages of the kernel checks come from the student's kernel: where its tiles went wrong,
    which blocks race, which misreading of the format it matches."""
    ex = _core.get("10.2")
    message = workshop.check("10.2", _answers.evaluate(ex, _core.wrong_answers("10.2")[1])).message
    assert "blocks (0, 0), (1, 0), (2, 0) and (3, 0) all wrote element 0 of Out" in message
    ex = _core.get("09.4")
    swapped = workshop.check("09.4", _answers.evaluate(ex, _core.wrong_answers("09.4")[0])).message
    assert "swapped" in swapped


@pytest.mark.gpu
def test_memcheck_counts_the_stores_past_the_end():
    """On a CUDA GPU with compute-sanitizer: 10.3's truth is memcheck's own count, and the
    solution's offset is what it reports for shifted_store."""
    from tilelab.workshop.lessons import l10_when_it_goes_wrong as lesson

    report = lesson.sanitizer_report()
    writes = [f for f in report.findings if "out-of-bounds" in f.kind and "write" in f.kind]
    assert len(writes) == lesson.SANITIZER_OFFSET, report.raw[-2000:]
    assert workshop.check("10.3", lesson.SANITIZER_OFFSET).status == "passed"


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
def test_notebook_10_lowers_for_the_mi300_without_red_warnings(tmp_path, monkeypatch):
    """TVM's C++ logging writes "Unable to detect ROCm version" and a vectorisation note to the
    process's stderr when a kernel is lowered for gfx942 on a machine without ROCm; the notebook
    shows neither (its lowering goes through the lesson, which keeps them out). The report cache
    is empty here, so the notebook really lowers for the MI300."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "reports"))
    cells = _run_notebook("10_when_it_goes_wrong", tmp_path, solutions=True, monkeypatch=monkeypatch)
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

    result = tilelab.run(lesson.flash_forward(1024, 64), ref=lesson.torch_attention, tolerance=lesson.ATTENTION_TOLERANCE)
    assert result.passed, repr(result)
