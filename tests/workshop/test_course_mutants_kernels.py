"""The mutant suite, notebooks 04-10 (see test_course_mutants.py): the GEMMs and attention graded
for a GPU fail by what their kernel computes on the CPU, the CPU kernels by their results."""

from __future__ import annotations

import pytest
from course_mutants import MUTANTS, assert_caught

from tilelab.workshop import _core

LATER = [m for m in MUTANTS if m.exercise.split(".")[0] not in ("01", "02", "03", "06")]


@pytest.fixture(autouse=True)
def own_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()


@pytest.mark.slow
@pytest.mark.parametrize("mutant", LATER, ids=[f"{m.exercise}-{m.name}" for m in LATER])
def test_a_mutant_fails_and_the_message_names_what_is_wrong(mutant):
    assert_caught(mutant)
