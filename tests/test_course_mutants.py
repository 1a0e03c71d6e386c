"""The mutant suite: every kernel exercise's solution with one slip of the kinds students make
(tests/course_mutants.py) must fail its check, with a message that names what is wrong; the
exercises graded for a GPU fail by what their kernel computes on the CPU. Heavy (one kernel
compiled and launched per mutant): marked slow, run by ``make test``."""

from __future__ import annotations

import re

import pytest
from course_mutants import EQUIVALENT, MUTANTS

from tilelab import workshop
from tilelab.workshop import _answers, _core

# kernel exercises without mutants here, and why
NOT_MUTATED = {
    "04.3": "its kernel is 04.2's matmul at 4096^3 (04.2's mutants cover it); what it adds is its speed, "
            "measured on a GPU",
    "06.8": "the student picks tile sizes for a swizzle: the kernel computes the same C whatever they are, so "
            "only its lowering can be wrong (its wrong answers are in the lesson)",
}


@pytest.fixture(autouse=True)
def own_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()


def test_every_kernel_exercise_has_five_mutants_and_each_changes_its_solution():
    kernels = {e.id for e in workshop.exercises() if e.grades_a_kernel}
    counts = {e: sum(m.exercise == e for m in MUTANTS) for e in kernels}
    short = {e: n for e, n in counts.items() if n < 5 and e not in NOT_MUTATED}
    assert not short, short
    assert set(NOT_MUTATED) <= kernels
    for m in MUTANTS:
        solution = _core.get(m.exercise).solution
        assert m.old in solution and solution.replace(m.old, m.new) != solution, (m.exercise, m.name)
    assert len({(m.exercise, m.name) for m in MUTANTS}) == len(MUTANTS)
    assert all(why for why in EQUIVALENT.values())


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=[f"{m.exercise}-{m.name}" for m in MUTANTS])
def test_a_mutant_fails_and_the_message_names_what_is_wrong(mutant):
    ex = _core.get(mutant.exercise)
    answer = _answers.evaluate(ex, ex.solution.replace(mutant.old, mutant.new))
    result = workshop.check(ex.id, answer)
    assert result.status == "failed", f"{ex.id} {mutant.name} passed: {result.message}"
    assert re.search(mutant.says, result.message, flags=re.IGNORECASE), (
        f"{ex.id} {mutant.name}: the message does not say /{mutant.says}/: {result.message}")
