"""``python -m tilelab workshop grade DIR`` over a room of generated submissions of exercise 03.2:
right, wrong, a file that is not JSON, and an answer cell that never ends. Each is
one row of the table and of the CSV; the hang is stopped and the rest of its notebook graded."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelab.workshop import _grade

ROOT = Path(__file__).resolve().parents[2]


def _submission(path: Path, answer: str, *, extra_check: bool = False) -> None:
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [new_code_cell("from tilelab import workshop")]
    a = new_code_cell(answer)
    a.metadata = {"tilelab": {"answer": "03.2"}, "tags": ["answer"]}
    c = new_code_cell('workshop.check("03.2", answer_03_2)')
    c.metadata = {"tilelab": {"check": "03.2"}, "tags": ["check"]}
    cells += [a, c]
    if extra_check:  # a cell after the hang: it still runs
        cells.append(new_code_cell("after_the_hang = 1"))
    nbformat.write(new_notebook(cells=cells), path)


@pytest.mark.slow
def test_a_room_with_right_wrong_broken_and_hanging_notebooks(tmp_path):
    room = tmp_path / "room"
    room.mkdir()
    _submission(room / "ada.ipynb", "answer_03_2 = (64,)")
    _submission(room / "bo.ipynb", "answer_03_2 = (8,)")
    (room / "di.ipynb").write_text('{"cells": [')  # cut off mid-upload
    _submission(room / "ed.ipynb", "while True:\n    pass", extra_check=True)
    (room / ".ipynb_checkpoints").mkdir()
    _submission(room / ".ipynb_checkpoints" / "ada-checkpoint.ipynb", "answer_03_2 = (8,)")  # not a submission
    out_csv = tmp_path / "room.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tilelab", "workshop", "grade", str(room), "--csv", str(out_csv),
                           "--timeout", "15", "--jobs", "3"], capture_output=True, text=True, env=env, cwd=str(ROOT),
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(out_csv.read_text()))}
    assert set(rows) == {"ada", "bo", "di", "ed"}
    assert (rows["ada"]["status"], rows["ada"]["03.2"]) == ("ok", "passed")
    assert (rows["bo"]["status"], rows["bo"]["03.2"]) == ("ok", "tried")
    assert rows["di"]["status"] == "error" and "not a notebook" in rows["di"]["note"]
    assert (rows["ed"]["status"], rows["ed"]["03.2"]) == ("timed out", "tried")
    assert "03.2" in rows["ed"]["note"]
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["student", "notebook", "status", "03.2"]
    by_student = {line.split()[0]: line.split() for line in lines[2:6]}
    assert by_student["ada"][-1] == "passed" and by_student["bo"][-1] == "tried" and by_student["ed"][-1] == "tried"
    assert "4 notebook(s); 1 of 3 exercises passed" in done.stdout


def test_the_table_and_csv_of_a_gradebook():
    book = _grade.Gradebook((
        _grade.GradedNotebook("ada", "01.ipynb", "/r/ada/01.ipynb", "ok", {"01.1": "passed", "01.2": "tried"}),
        _grade.GradedNotebook("bo", "02.ipynb", "/r/bo/02.ipynb", "error", {}, "not a notebook"),
        _grade.GradedNotebook("bo", "01.ipynb", "/r/bo/01.ipynb", "ok", {"01.1": "needs GPU", "01.2": "not tried"}),
    ))
    assert book.exercises == ["01.1", "01.2"]
    text = _grade.table(book)
    assert text.splitlines()[2].split() == ["ada", "01.ipynb", "ok", "passed", "tried"]
    assert text.splitlines()[4].split() == ["bo", "01.ipynb", "ok", "GPU", "-"]
    assert "bo 02.ipynb: not a notebook" in text and "1 of 4 exercises passed" in text
    rows = list(csv.reader(io.StringIO(_grade.to_csv(book))))
    assert rows[0] == ["student", "notebook", "status", "01.1", "01.2", "note"]
    assert rows[2] == ["bo", "02.ipynb", "error", "", "", "not a notebook"]
    assert _grade.Gradebook.from_dict(json.loads(json.dumps(book.to_dict()))) == book


def test_nested_submissions_name_the_student_by_folder(tmp_path):
    (tmp_path / "ada" / "week1").mkdir(parents=True)
    _submission(tmp_path / "ada" / "week1" / "03_reductions.ipynb", "answer_03_2 = ...")
    (tmp_path / "bo.ipynb").write_text("{}")
    assert [(s, p.name) for s, p in _grade._submissions(tmp_path)] == [("ada", "03_reductions.ipynb"),
                                                                        ("bo", "bo.ipynb")]


def test_a_folder_that_does_not_exist_is_a_clear_error(tmp_path):
    from tilelab import TilelabError

    with pytest.raises(TilelabError, match="not a folder"):
        _grade.grade(tmp_path / "nope")
