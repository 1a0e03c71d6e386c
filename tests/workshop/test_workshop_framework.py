"""The course framework (tilelab.workshop): declaring an exercise, checking, hints, solutions,
progress, on a throw-away exercise declared here (removed from the registry afterwards)."""

from __future__ import annotations

import json

import pytest

from tilelab import workshop
from tilelab.workshop import Wrong, _core, expect


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TILELAB_PROGRESS", str(path))
    _core._reset_for_tests()
    yield path
    _core._reset_for_tests()


@pytest.fixture
def toy(progress_file):
    """Exercise 99.1: the number of 32-wide tiles that cover 100 columns (4), with one recognised
    misconception (100 // 32 = 3 leaves the edge out)."""
    workshop.exercises()  # load the real lessons first: the toy must not hide a lesson's load

    @workshop.exercise("99.1", "tiles over an edge", question="How many 32-column tiles cover 100 columns?",
                       kind="predict", hints=("a partial tile still needs a block", "round up"),
                       solution="answer_99_1 = 4", reveal=lambda answer: f"grid of {answer} blocks")
    def _(answer):
        expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number, got {answer!r}")
        if answer == 100 // 32:
            raise Wrong("that rounds down: the last columns get no block")
        expect(answer == -(-100 // 32), "not quite: count the blocks a partial tile needs too")
        return "4 tiles: three full ones and one of 4 columns"

    yield _core._REGISTRY["99.1"]
    _core._REGISTRY.pop("99.1", None)


def test_check_statuses_messages_and_the_try_record(toy, progress_file):
    assert workshop.check("99.1").status == "unanswered" and workshop.check("99.1", ...).status == "unanswered"
    assert not progress_file.exists()  # an unanswered check is no try
    wrong = workshop.check("99.1", 3)
    assert wrong.status == "failed" and "rounds down" in wrong.message and "4" not in wrong.message
    assert not wrong and 'workshop.hint("99.1")' in repr(wrong)
    assert workshop.check("99.1", "4").status == "failed"
    stored = json.loads(progress_file.read_text())["exercises"]["99.1"]
    assert stored["tries"] == 2 and stored["passed"] is False and stored["last"] == "failed"
    passed = workshop.check("99.1", 4)
    assert passed and passed.revealed == "grid of 4 blocks" and "grid of 4 blocks" in passed._repr_html_()
    stored = json.loads(progress_file.read_text())["exercises"]["99.1"]
    assert stored["tries"] == 3 and stored["passed"] is True


def test_an_exception_from_the_answer_is_reported_not_raised(progress_file):
    @workshop.exercise("99.2", "calls the answer", question="q", kind="writes", solution="answer_99_2 = abs")
    def _(answer):
        return f"returned {answer(-1)}"

    try:
        failed = workshop.check("99.2", lambda x: 1 // 0)
        assert failed.status == "failed" and "ZeroDivisionError" in failed.message
        assert workshop.check("99.2", abs).passed
    finally:
        _core._REGISTRY.pop("99.2", None)


def test_a_function_that_still_holds_the_placeholder_is_unanswered(toy):
    def kernel(M, N):
        ...

    def written(M, N):
        return M + N

    assert _core.is_placeholder(...) and _core.is_placeholder(kernel) and not _core.is_placeholder(written)
    assert not _core.is_placeholder(0) and not _core.is_placeholder("...")


def test_hints_come_one_more_per_call_and_persist(toy, progress_file):
    first = workshop.hint("99.1")
    assert (first.number, first.total, first.shown) == (1, 2, ("a partial tile still needs a block",))
    second = workshop.hint("99.1")
    assert second.number == 2 and second.text == "round up" and "hint 2 of 2" in repr(second)
    assert workshop.hint("99.1").number == 2  # stays at the last
    _core._reset_for_tests()  # a restarted kernel continues from the file
    assert workshop.hint("99.1").number == 2


def test_the_solution_opens_only_after_a_try(toy, progress_file):
    refused = workshop.solution("99.1")
    assert refused.status == "refused" and "answer_99_1 = 4" not in repr(refused) + refused._repr_html_()
    workshop.check("99.1", 5)
    shown = workshop.solution("99.1")
    assert shown.shown and shown.text == "answer_99_1 = 4"
    _core._reset_for_tests()  # after a restart the try is still on file
    assert workshop.solution("99.1").shown


def test_progress_per_notebook_and_course(toy, progress_file):
    before = workshop.progress("99")
    assert [s.state for s in before.of("99")] == ["not tried"]
    workshop.check("99.1", 3)
    assert workshop.progress().notebook == "99"  # the notebook touched last
    assert workshop.progress(99).of("99")[0].state == "tried"
    workshop.check("99.1", 4)
    p = workshop.progress("99_toy.ipynb")
    row = p.of("99")[0]
    assert (row.state, row.tries) == ("passed", 2)
    assert "99.1" in repr(p) and 'data-state="passed"' in p._repr_html_()
    assert workshop.Progress.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_an_unreadable_progress_file_is_set_aside_not_lost(toy, progress_file):
    progress_file.write_text("{not json")
    assert workshop.progress("99").of("99")[0].state == "not tried"
    workshop.check("99.1", 4)
    assert (progress_file.parent / "progress.json.unreadable").read_text() == "{not json"
    assert json.loads(progress_file.read_text())["exercises"]["99.1"]["passed"] is True


def test_unknown_ids_and_bad_declarations(toy):
    with pytest.raises(KeyError, match="99.1"):
        workshop.check("99.7", 1)
    with pytest.raises(ValueError, match="NN.M"):
        workshop.exercise("5.2", "t", question="q", kind="predict", solution="x")
    with pytest.raises(ValueError, match="kind"):
        workshop.exercise("99.3", "t", question="q", kind="guess", solution="x")


def test_records_escape_and_round_trip():
    hostile = workshop.Check("99.1", "<b>t</b>", "failed", '<script>alert(1)</script>"><img onerror=x>', 2)
    page = hostile._repr_html_()
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert workshop.Check.from_dict(hostile.to_dict()) == hostile
    hint = workshop.Hint("99.1", "t", 1, 2, ("<u>x</u>",))
    assert "<u>" not in hint._repr_html_() and workshop.Hint.from_dict(hint.to_dict()) == hint
    sol = workshop.Solution("99.1", "t", "shown", "x = '<br>'")
    assert "&lt;br&gt;" in sol._repr_html_() and workshop.Solution.from_dict(sol.to_dict()) == sol


def test_a_lesson_that_cannot_load_is_named_when_its_exercise_is_asked_for(monkeypatch):
    workshop.exercises()
    monkeypatch.setitem(_core._BROKEN, "l97_broken", "SyntaxError: invalid syntax (l97_broken.py, line 3)")
    with pytest.raises(KeyError, match="l97_broken.*SyntaxError"):
        workshop.check("97.1", 1)
    assert workshop.exercises("01")  # the other lessons still work


def test_after_shows_what_would_answer_an_exercise_only_once_it_passed(tmp_path, monkeypatch):
    from tilelab.workshop import _answers, _core
    from tilelab.workshop._html import html, text

    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "after.json"))
    _core._reset_for_tests()
    locked = workshop.after(("01.2", "01.3"), lambda: "the picture", "the map")
    assert isinstance(locked, workshop.Locked) and locked.waiting == ("01.2", "01.3")
    assert "the map opens once 01.2 and 01.3 pass" in text(locked) and "tilelab-locked" in html(locked)
    for key in ("01.2", "01.3"):
        ex = _core.get(key)
        assert workshop.check(key, _answers.evaluate(ex, ex.solution)).passed
    assert workshop.after(("01.2", "01.3"), lambda: "the picture") == "the picture"
    with pytest.raises(KeyError):
        workshop.after("01.99", lambda: None)


def test_a_hint_past_the_last_says_so_and_progress_shows_needs_gpu(tmp_path, monkeypatch):
    from tilelab.workshop import _progress
    from tilelab.workshop._html import text

    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "hints.json"))
    _core._reset_for_tests()
    ex = _core.get("02.2")
    shown = [workshop.hint(ex.id) for _ in range(len(ex.hints) + 1)]
    assert not any(h.exhausted for h in shown[:-1]) and shown[-1].exhausted
    assert shown[-1].number == len(ex.hints) and "that was every hint" in text(shown[-1])
    _progress.update("04.3", tries=1, last="needs_gpu", passed=False)
    standing = {s.exercise: s for s in workshop.progress("04").standings}
    assert standing["04.3"].state == "needs GPU"
    assert "need a GPU" in text(workshop.progress("04"))


def test_an_answer_of_another_sort_is_no_attempt():
    assert not _core.is_attempt(_core.get("08.1"), 0)
    assert not _core.is_attempt(_core.get("08.1"), "attention")
    assert _core.is_attempt(_core.get("08.1"), lambda seq, dim: None)
    assert _core.is_attempt(_core.get("01.2"), (4, 7)) and _core.is_attempt(_core.get("01.2"), 35)
    assert not _core.is_attempt(_core.get("01.2"), "7 by 5")
    assert _core.is_attempt(_core.get("06.7"), "m64n8k16") and not _core.is_attempt(_core.get("06.7"), "  ")


def test_a_launch_out_of_bounds_is_said_where_from_its_records():
    """The sentences of a kernel check on a CPU launch's out-of-bounds records (made by hand here,
    as tilelab.run(kernel, target="c") reports them): stores below the start and past the end of the
    output by rows and columns, a read of an input by block, none of which took the place of an
    element (the output's own check is by its values and poison)."""
    import torch

    from tilelab.launch._emulate import OutOfBoundsAccess
    from tilelab.workshop import _kernel_checks as kc

    out = torch.zeros(4, 6)
    unwritten = torch.zeros(4, 6, dtype=torch.bool)
    unwritten[3] = True  # row 3 kept the poison
    out[3] = float("nan")
    outside = (OutOfBoundsAccess("B", "write", (0, 0, 0), (-2, 1), (4, 6)),
               OutOfBoundsAccess("B", "write", (0, 0, 0), (-1, 1), (4, 6)),
               OutOfBoundsAccess("B", "write", (1, 1, 0), (2, 7), (4, 6)),
               OutOfBoundsAccess("A", "read", (1, 0, 0), (4, 0), (4, 6)))
    launched = kc.Launched({"B": out}, {"B": unwritten}, outside, outside_total=4)
    found = kc.problems("B", launched, torch.zeros(4, 6), tile=(2, 3))
    assert found == [
        "it wrote 2 elements before the start of B, at rows -2 to -1, columns 1: an index went below zero",
        "it wrote 1 element past the end of B, at rows 2, columns 7: a store ran out of bounds",
        "it read A out of bounds (1 element beyond its end, in blocks (bx, by) = (1, 0)): an index ran outside A",
        "B rows 3 (every column) were never written (the tiles of blocks (bx, by) = (0, 1), (1, 1))"]
    # past the records kept, the counts are lower bounds and the blocks are the first
    some = kc.Launched({"B": torch.zeros(4, 6)}, {"B": torch.zeros(4, 6, dtype=torch.bool)}, outside[3:], 100)
    assert kc.problems("B", some, torch.zeros(4, 6)) == [
        "it read A out of bounds (at least 1 elements beyond its end, in blocks (bx, by) = (1, 0), ...): an index "
        "ran outside A"]
