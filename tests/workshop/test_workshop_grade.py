"""``python -m tilelab workshop grade DIR`` over a room of submissions of notebook 03, built from
the course's own notebook: right answers (with hints and a solution on screen), wrong ones, a file
that is not a notebook, an answer that never ends and one that kills its process, and two forgeries
(a cell that writes "passed" into the progress file and edited check cells; an answer cell that
swaps the registry's checker). Each answer is graded in a clean process; the forgeries earn what
their answers earn; every exercise of every submission is in the total."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelab.workshop import _core, _grade

ROOT = Path(__file__).resolve().parents[2]
COURSE_03 = ROOT / "notebooks" / "03_reductions.ipynb"

FORGE_PROGRESS = """\
from tilelab.workshop import _progress
for e in ("03.1", "03.2", "03.3", "03.4"):
    _progress.update(e, passed=True, tries=1, last="passed")
"""
FORGE_REGISTRY = """\
import dataclasses
from tilelab.workshop import _core
ex = _core.get("03.2")
_core._REGISTRY["03.2"] = dataclasses.replace(ex, checker=lambda answer: "right")
answer_03_2 = (8,)
"""


def _notebook(answers: dict[str, str], *, keep_only: set[str] | None = None, extra: list[str] = (),
              outputs: dict[str, list[dict]] | None = None):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell

    nb = nbformat.read(COURSE_03, as_version=4)
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("tilelab", {})
        ex = meta.get("answer") or meta.get("check")
        if keep_only is not None and ex and ex not in keep_only:
            continue
        if meta.get("answer") in answers:
            cell.source = answers[meta["answer"]]
        if meta.get("check"):  # an edited check cell: the grader never runs it
            cell.source = 'print("passed")'
        cells.append(cell)
    for source in extra:
        cells.append(new_code_cell(source))
    for ex, outs in (outputs or {}).items():
        cell = new_code_cell(f'workshop.hint("{ex}")')
        cell.outputs = [nbformat.from_dict(o) for o in outs]
        cells.append(cell)
    nb.cells = cells
    return nb


def _html(text: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": text, "text/plain": ""}}


@pytest.mark.slow
@pytest.mark.heavy
def test_a_room_graded_by_its_answers_in_clean_processes(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    room = tmp_path / "room"
    solutions = {e: _core.get(e).solution for e in ("03.1", "03.2", "03.3", "03.4")}
    hint_html = '<div class="tilelab-hint" data-exercise="03.2" data-number="2" style="">'
    sol_html = '<div class="tilelab-solution" data-exercise="03.1" data-status="shown" style="">'
    rooms = {
        "ada": _notebook(solutions, outputs={"03.2": [_html(hint_html)], "03.1": [_html(sol_html)]}),
        "bo": _notebook({"03.2": "answer_03_2 = (8,)", "03.4": _core.wrong_answers("03.4")[0]},
                        keep_only={"03.2", "03.4"}),
        "ed": _notebook({"03.2": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"}, keep_only={"03.2"}),
        "fo": _notebook({"03.2": FORGE_REGISTRY}, keep_only={"03.2"}, extra=[FORGE_PROGRESS]),
    }
    for student, nb in rooms.items():
        (room / student).mkdir(parents=True)
        nbformat.write(nb, room / student / "03_reductions.ipynb")
    (room / "di").mkdir()
    (room / "di" / "03_reductions.ipynb").write_text('{"cells": [')  # cut off mid-upload
    (room / ".ipynb_checkpoints").mkdir()
    nbformat.write(rooms["ada"], room / ".ipynb_checkpoints" / "x-checkpoint.ipynb")  # not a submission

    out_csv = tmp_path / "room.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILELAB_PROGRESS": str(tmp_path / "teacher.json")}
    done = subprocess.run([sys.executable, "-m", "tilelab", "workshop", "grade", str(room), "--csv", str(out_csv),
                           "--timeout", "300", "--jobs", "2"], capture_output=True, text=True, env=env,
                          cwd=str(ROOT), timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert list(rows[0]) == list(_grade.CSV_COLUMNS)
    got = {(r["student"], r["exercise"]): r for r in rows}
    status = {k: r["status"] for k, r in got.items()}
    ids = ("03.1", "03.2", "03.3", "03.4")
    assert {s for s, _ in got} == {"ada", "bo", "di", "ed", "fo"}
    # every exercise of every submission is counted, the broken one's too
    assert all((s, e) in got for s in ("ada", "bo", "di", "ed", "fo") for e in ids)
    assert [status["ada", e] for e in ids] == ["passed"] * 4, rows
    assert got["ada", "03.2"]["hints_used"] == "2" and got["ada", "03.1"]["solution_seen"] == "yes"
    assert got["ada", "03.3"]["hints_used"] == "0" and got["ada", "03.3"]["solution_seen"] == "no"
    assert status["bo", "03.2"] == "failed" and got["bo", "03.2"]["message"]
    assert status["bo", "03.4"] == "failed" and "Y" in got["bo", "03.4"]["message"]
    assert status["bo", "03.1"] == "unanswered" and "no answer cell" in got["bo", "03.1"]["message"]
    assert got["di", "03.1"]["notebook_status"] == "error" and "not a notebook" in got["di", "03.1"]["note"]
    assert status["ed", "03.2"] == "crashed" and "signal" in got["ed", "03.2"]["message"]
    assert [status["fo", e] for e in ids] == ["unanswered", "failed", "unanswered", "unanswered"], rows
    text = done.stdout
    assert "5 notebook(s); 4 of 25 exercises passed" in text
    assert "passed h2" in text and "passed sol" in text
    assert "bo 03_reductions.ipynb 03.4 failed:" in text and "ed 03_reductions.ipynb 03.2 crashed:" in text

    # an answer that never ends is stopped at --timeout (a short one here: nothing else is graded)
    hang = tmp_path / "hang"
    (hang / "gu").mkdir(parents=True)
    nbformat.write(_notebook({"03.2": "while True:\n    pass"}, keep_only={"03.2"}),
                   hang / "gu" / "03_reductions.ipynb")
    book = _grade.grade(hang, timeout=3)
    (row,) = book.rows
    assert row.states == {"03.1": "unanswered", "03.2": "timed out", "03.3": "unanswered", "03.4": "unanswered",
                          "03.5": "unanswered"}
    assert "stopped after 3 s" in row.exercises[1].message


def test_the_table_and_csv_of_a_gradebook():
    G = _grade.GradedExercise
    book = _grade.Gradebook((
        _grade.GradedNotebook("ada", "01.ipynb", "/r/ada/01.ipynb", "ok",
                              (G("01.1", "passed", "right", 1, False), G("01.2", "failed", "too many\nblocks", 0,
                                                                         True))),
        _grade.GradedNotebook("bo", "02.ipynb", "/r/bo/02.ipynb", "error", (), "not a notebook"),
        _grade.GradedNotebook("bo", "01.ipynb", "/r/bo/01.ipynb", "ok",
                              (G("01.1", "needs_gpu"), G("01.2", "unanswered"))),
    ))
    assert book.exercises == ["01.1", "01.2"] and (book.passed, book.total) == (1, 4)
    text = _grade.table(book)
    assert text.splitlines()[2].split() == ["ada", "01.ipynb", "ok", "passed", "h1", "failed", "sol"]
    assert text.splitlines()[4].split() == ["bo", "01.ipynb", "ok", "GPU", "-"]
    assert "bo 02.ipynb: not a notebook" in text and "1 of 4 exercises passed" in text
    assert "ada 01.ipynb 01.2 failed: too many" in text
    rows = list(csv.reader(io.StringIO(_grade.to_csv(book))))
    assert rows[0] == list(_grade.CSV_COLUMNS)
    assert rows[2] == ["ada", "01.ipynb", "ok", "01.2", "failed", "too many\nblocks", "0", "yes", "0", ""]
    assert rows[3] == ["bo", "02.ipynb", "error", "", "", "", "", "", "", "not a notebook"]
    assert _grade.Gradebook.from_dict(json.loads(json.dumps(book.to_dict()))) == book


def test_nested_submissions_name_the_student_by_folder(tmp_path):
    (tmp_path / "ada" / "week1").mkdir(parents=True)
    (tmp_path / "ada" / "week1" / "03_reductions.ipynb").write_text("{}")
    (tmp_path / "bo.ipynb").write_text("{}")
    assert [(s, p.name) for s, p in _grade._submissions(tmp_path)] == [("ada", "03_reductions.ipynb"),
                                                                        ("bo", "bo.ipynb")]


def test_a_notebook_is_graded_on_its_notebooks_exercises():
    assert _grade._notebook_exercises("03_reductions.ipynb", (), None) == ["03.1", "03.2", "03.3", "03.4", "03.5"]
    assert _grade._notebook_exercises("mine.ipynb", ("02.1", "99.9"), None) == ["02.1", "02.2", "02.3", "02.4",
                                                                                 "02.5"]


def test_a_folder_that_does_not_exist_is_a_clear_error(tmp_path):
    from tilelab import TilelabError

    with pytest.raises(TilelabError, match="not a folder"):
        _grade.grade(tmp_path / "nope")
