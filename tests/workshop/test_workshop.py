"""Every exercise of the course, generic over the registry (a new lesson module is covered with
nothing to add here): its solution passes, no answer is "unanswered", and each wrong answer its
lesson declares fails with a message that does not contain the solution's value."""

from __future__ import annotations

import re

import pytest
from conftest import GPU_PRESENT

from tilelab import workshop
from tilelab.workshop import _answers, _core

EXERCISES = workshop.exercises()
IDS = [e.id for e in EXERCISES]
# A kernel exercise's check compiles the kernel and runs it on the CPU (seconds each). Of the kernel
# exercises, make test checks the solution of each lesson's first and the first wrong answer of it,
# make test-heavy the other solutions and wrong answers (each exercise's checker is also shown to fail
# its first mutant in make test: test_course_mutants*.py); the other exercises are all checked in make test.
FIRST_KERNEL_EXERCISE = {e.id.split(".")[0]: e.id for e in reversed(EXERCISES) if e.grades_a_kernel}


def _quick(e) -> bool:
    return not e.grades_a_kernel or FIRST_KERNEL_EXERCISE[e.id.split(".")[0]] == e.id


SOLVED = [e.id if _quick(e) else pytest.param(e.id, marks=pytest.mark.heavy) for e in EXERCISES]
WRONG = [(e.id, i) if not e.grades_a_kernel or (i == 0 and _quick(e))
         else pytest.param(e.id, i, marks=pytest.mark.heavy)
         for e in EXERCISES for i in range(len(_core.wrong_answers(e.id)))]


@pytest.fixture(autouse=True)
def own_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()


def _solution_value(ex):
    return _answers.evaluate(ex, ex.solution)


def _spellings(value) -> list[str]:
    """How a message could state ``value``: a number as a whole token, a string, a tuple's forms."""
    if isinstance(value, bool) or value is None or callable(value):
        return []
    if isinstance(value, (int, float)):
        return [rf"(?<![\w.]){re.escape(repr(value))}(?![\w]|\.\d)"]
    if isinstance(value, str):
        return [re.escape(value.strip())] if len(value.strip()) >= 2 else []
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, str)) for v in value):
        parts = [str(v) for v in value]
        return [re.escape(s) for s in (", ".join(parts), ",".join(parts), "x".join(parts), " x ".join(parts),
                                        "\u00d7".join(parts))]
    return []


def leaked(message: str, value) -> list[str]:
    return [p for p in _spellings(value) if re.search(p, message, flags=re.IGNORECASE)]


def test_the_leak_detector_itself():
    assert leaked("you need 7 stages", 7) and not leaked("you need 17 stages or 127", 7)
    assert leaked("the box is (64, 128)", (64, 128)) and leaked("use M64N8K16", "m64n8k16")
    assert not leaked("anything", lambda: 0)


@pytest.mark.parametrize("exercise_id", SOLVED)
def test_the_solution_passes(exercise_id):
    (ex,) = [e for e in workshop.exercises(exercise_id.split(".")[0]) if e.id == exercise_id]
    result = workshop.check(ex.id, _solution_value(ex))
    expected = "needs_gpu" if ex.needs_gpu and not GPU_PRESENT else "passed"
    if result.status == "needs_gpu" and not GPU_PRESENT:
        expected = "needs_gpu"  # a checker's GPU part: graded on the CPU as far as it goes
    assert result.status == expected, result


@pytest.mark.parametrize("exercise_id", IDS)
def test_no_answer_is_unanswered_and_declared_well(exercise_id):
    ex = _core.get(exercise_id)
    assert workshop.check(ex.id).status == "unanswered" and workshop.check(ex.id, ...).status == "unanswered"
    assert ex.question and ex.title and ex.hints, f"{ex.id} needs a question, a title and hints"
    assert ex.answer_name in ex.solution, f"{ex.id}'s solution does not bind {ex.answer_name}"
    assert workshop.solution(ex.id).status == "refused"  # nothing tried yet


@pytest.mark.parametrize("exercise_id,index", WRONG)
def test_a_wrong_answer_fails_without_giving_the_answer_away(exercise_id, index):
    ex = _core.get(exercise_id)
    source = _core.wrong_answers(exercise_id)[index]
    result = workshop.check(ex.id, _answers.evaluate(ex, source))
    assert result.status == "failed", f"{ex.id}: {source!r} should fail: {result}"
    value = _solution_value(ex)
    assert not leaked(result.message, value), f"{ex.id}: the message states the answer: {result.message}"
    # tried now: the solution opens, if the answer was of the exercise's sort (not 64 for a kernel)
    assert workshop.solution(ex.id).shown == _core.is_attempt(ex, _answers.evaluate(ex, source))


@pytest.mark.parametrize("exercise_id", IDS)
def test_an_answer_of_another_sort_never_opens_the_solution(exercise_id):
    ex = _core.get(exercise_id)
    sort = _core._kind(_solution_value(ex))
    for junk in (0, "x", (1, 2), None, print):
        if _core._kind(junk) == sort or (sort == "text" and isinstance(junk, str)):
            continue
        result = workshop.check(ex.id, junk)
        assert result.status in ("failed", "needs_gpu"), (junk, result)
        assert not workshop.solution(ex.id).shown, (ex.id, junk)
        if result.status == "failed":
            assert "not yet an attempt" in result.message


@pytest.mark.parametrize("exercise_id", [e.id for e in EXERCISES if e.given])
def test_the_code_a_fix_starts_from_is_unanswered(exercise_id):
    ex = _core.get(exercise_id)
    assert workshop.check(ex.id, _answers.evaluate(ex, ex.given)).status == "unanswered"


def test_every_lesson_module_imports():
    assert _core.broken_lessons() == {}
    assert len(EXERCISES) >= 9
