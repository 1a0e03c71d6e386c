"""The mutant suite, notebooks 01-03 and 06 (04-10's kernels: test_course_mutants_kernels.py):
every kernel exercise's solution with one slip of the kinds students make (tests/course_mutants.py)
must fail its check, with a message that names what is wrong. Heavy (a kernel compiled and
launched per mutant): marked slow, run by ``make test``."""

from __future__ import annotations

import pytest
from course_mutants import EQUIVALENT, MUTANTS, assert_caught

from tilelab import workshop
from tilelab.workshop import _core

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


FIRST = [m for m in MUTANTS if m.exercise.split(".")[0] in ("01", "02", "03", "06")]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", FIRST, ids=[f"{m.exercise}-{m.name}" for m in FIRST])
def test_a_mutant_fails_and_the_message_names_what_is_wrong(mutant):
    assert_caught(mutant)
