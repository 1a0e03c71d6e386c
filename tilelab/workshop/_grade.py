"""``python -m tilelab workshop grade DIR``: grade a room's submitted notebooks by their answers.

Every answer cell of every submitted notebook (cell metadata ``tilelab.answer``) is graded in a
clean process of its own: a fresh Python that imports the course, runs the exercise's ``setup``
and the answer cell, and calls the exercise's checker on the value the cell binds, under a time
limit (``--timeout``; a cell or check that runs longer is stopped, its process group killed).
Nothing else of the submission runs: not its check cells, not the cells between, and the progress
file its author's process wrote is not read. So a notebook whose cells rewrite their own progress,
or whose check cells were edited, earns exactly what its answers earn.

The exercises a notebook is graded on are the course's exercises of that notebook (its number:
``03_reductions.ipynb`` is notebook 03; a notebook not named by its number is known by the
exercises of its cells): an exercise whose answer cell was deleted is "unanswered", and a file that
cannot be read as a notebook still counts its notebook's exercises, none passed. Hints used and
whether the solution was shown are read from the hint and solution outputs the notebook was
submitted with (what the student's own session showed).

Submissions are either ``DIR/<student>.ipynb`` or, as nbgrader collects them,
``DIR/<student>/.../<notebook>.ipynb``. ``--course DIR`` names the course's notebooks: a
submission is graded on the exercises of the course notebook of its name. Students' code runs with
your rights: grade in a container or an account of its own, as with any autograder.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records.record import Record

# an exercise's outcome: the checker's four statuses, and what the grader saw around it
STATES = ("passed", "failed", "unanswered", "needs_gpu", "timed out", "crashed")
_HINT = re.compile(r'class="tilelab-hint" data-exercise="([\d.]+)" data-number="(\d+)"')
_SOLUTION = re.compile(r'class="tilelab-solution" data-exercise="([\d.]+)" data-status="shown"')


@dataclass(frozen=True)
class GradedExercise(Record):
    """One exercise of one submission: ``status`` is one of :data:`STATES`, ``message`` the
    check's message (what is wrong, for a failure), ``hints`` how many hints its outputs show,
    ``solution_seen`` whether they show its solution, ``seconds`` how long its check took."""

    exercise: str
    status: str
    message: str = ""
    hints: int = 0
    solution_seen: bool = False
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class GradedNotebook(Record):
    """One submitted notebook: ``status`` is "ok" or "error" (not a notebook: ``note`` says why);
    ``exercises`` every exercise of its notebook, graded."""

    student: str
    notebook: str
    path: str
    status: str
    exercises: tuple[GradedExercise, ...] = ()
    note: str = ""

    @property
    def states(self) -> dict[str, str]:
        return {e.exercise: e.status for e in self.exercises}


@dataclass(frozen=True)
class Gradebook(Record):
    rows: tuple[GradedNotebook, ...]

    @property
    def exercises(self) -> list[str]:
        ids = {e.exercise for r in self.rows for e in r.exercises}
        return sorted(ids, key=_order)

    @property
    def total(self) -> int:
        return sum(len(r.exercises) for r in self.rows)

    @property
    def passed(self) -> int:
        return sum(e.passed for r in self.rows for e in r.exercises)


def _order(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split(".") if p.isdigit())


def _submissions(directory: Path) -> list[tuple[str, Path]]:
    found = []
    for path in sorted(directory.rglob("*.ipynb")):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):  # .ipynb_checkpoints and hidden folders
            continue
        student = rel.parts[0] if len(rel.parts) > 1 else path.stem
        found.append((student, path))
    return found


def _answer_cells(nb: Any) -> dict[str, str]:
    """Each exercise's answer cell source (the last one, if a student duplicated it)."""
    answers = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("tilelab", {}) or {}
        if meta.get("answer") and cell.get("cell_type") == "code":
            answers[str(meta["answer"])] = str(cell.source)
    return answers


def _shown(nb: Any) -> tuple[dict[str, int], set[str]]:
    """The hints (most shown per exercise) and solutions the notebook's saved outputs show."""
    hints: dict[str, int] = {}
    solutions: set[str] = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []) or []:
            text = str((out.get("data") or {}).get("text/html", ""))
            for ex, number in _HINT.findall(text):
                hints[ex] = max(hints.get(ex, 0), int(number))
            solutions.update(_SOLUTION.findall(text))
    return hints, solutions


def _notebook_exercises(name: str, cell_ids: Sequence[str], course: Path | None) -> list[str]:
    """The course's exercises of this notebook: by its number, else by its cells' exercises."""
    from . import _core

    keys: set[str] = set()
    if course is not None and (course / name).is_file():
        import nbformat

        try:
            keys |= {k.split(".")[0] for k in _answer_cells(nbformat.read(course / name, as_version=4))}
        except Exception:
            pass
    match = re.match(r"(\d+)", name)
    if not keys and match:
        keys.add(f"{int(match.group(1)):02d}")
    if not keys:
        keys = {k.split(".")[0] for k in cell_ids}
    known = _core.registry()
    ids = {e.id for e in known.values() if e.notebook in keys} | {e for e in cell_ids if e in known}
    return sorted(ids, key=_order)


@dataclass(frozen=True)
class _Task:
    exercise: str
    source: str


def _grade_answer(task: _Task, timeout: float) -> GradedExercise:
    """One answer in a clean process of its own, stopped after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="tilelab-grade-") as tmp:
        work = Path(tmp)
        (work / "answer.py").write_text(task.source)
        env = {**os.environ, "TILELAB_PROGRESS": str(work / "progress.json")}
        cmd = [sys.executable, "-m", "tilelab.workshop._grade", "--answer", task.exercise, str(work / "answer.py"),
               str(work / "result.json")]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)  # its own group: all of it stops
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return GradedExercise(task.exercise, "timed out", f"stopped after {timeout:g} s (--timeout): the answer "
                                  "cell or its check never finished (an endless loop?)", seconds=float(timeout))
        seconds = round(time.monotonic() - start, 2)
        result = _read_json(work / "result.json")
        if proc.returncode or not result:
            why = (f"signal {-proc.returncode}" if proc.returncode and proc.returncode < 0
                   else f"exit status {proc.returncode}")
            last = (stderr.decode(errors="replace").strip().splitlines() or [""])[-1][:300]
            return GradedExercise(task.exercise, "crashed", f"the check's process died ({why})"
                                  + (f": {last}" if last else ""), seconds=seconds)
    return GradedExercise(task.exercise, str(result["status"]), str(result.get("message", "")), seconds=seconds)


def _prepare(student: str, path: Path, course: Path | None) -> tuple[GradedNotebook, list[_Task]]:
    """A submission read: its row with every exercise still "unanswered", and the answers to grade."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:
        first = str(err).splitlines()[0][:200] if str(err) else ""
        ids = _notebook_exercises(path.name, (), course)
        return GradedNotebook(student, path.name, str(path), "error",
                              tuple(GradedExercise(e, "unanswered", "the notebook could not be read") for e in ids),
                              f"not a notebook: {type(err).__name__}: {first}"), []
    answers = _answer_cells(nb)
    ids = _notebook_exercises(path.name, tuple(answers), course)
    if not ids:
        return GradedNotebook(student, path.name, str(path), "error", (), "no exercise cells (cell metadata "
                              "tilelab.answer): is this a notebook of the course?"), []
    hints, solutions = _shown(nb)
    rows = tuple(GradedExercise(e, "unanswered", "" if e in answers else "no answer cell for it in the notebook",
                                hints.get(e, 0), e in solutions) for e in ids)
    return (GradedNotebook(student, path.name, str(path), "ok", rows),
            [_Task(e, answers[e]) for e in ids if e in answers])


def _merged(row: GradedNotebook, done: dict[str, GradedExercise]) -> GradedNotebook:
    exercises = []
    for e in row.exercises:
        g = done.get(e.exercise)
        exercises.append(e if g is None else GradedExercise(e.exercise, g.status, g.message, e.hints,
                                                            e.solution_seen, g.seconds))
    return GradedNotebook(row.student, row.notebook, row.path, row.status, tuple(exercises), row.note)


def grade_one(student: str, path: Path, *, timeout: float, course: Path | None = None,
              jobs: int = 1) -> GradedNotebook:
    """Grade one submitted notebook: each answer cell in a clean process (see the module)."""
    row, tasks = _prepare(student, path, course)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        done = {t.exercise: g for t, g in zip(tasks, pool.map(lambda t: _grade_answer(t, timeout), tasks))}
    return _merged(row, done)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def grade(directory: str | Path, *, timeout: float = 60.0, jobs: int = 2,
          course: str | Path | None = None) -> Gradebook:
    """Grade every notebook under ``directory`` (see the module's docstring)."""
    root = Path(directory)
    if not root.is_dir():
        from ..records.errors import TilelabError

        raise TilelabError(f"{root} is not a folder: give the folder that holds the submitted notebooks")
    try:
        import nbformat  # noqa: F401
    except ImportError:
        from ..records.errors import TilelabError

        raise TilelabError("workshop grade reads notebooks with nbformat, which is not installed: "
                           "pip install 'tilelab[lab]' (JupyterLab brings it)") from None
    course_dir = Path(course) if course else None
    prepared = [_prepare(s, p, course_dir) for s, p in _submissions(root)]
    tasks = [(i, t) for i, (_, ts) in enumerate(prepared) for t in ts]  # every answer of the room, `jobs` at once
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        graded = list(pool.map(lambda it: _grade_answer(it[1], timeout), tasks))
    done: list[dict[str, GradedExercise]] = [{} for _ in prepared]
    for (i, task), g in zip(tasks, graded):
        done[i][task.exercise] = g
    return Gradebook(tuple(_merged(row, d) for (row, _), d in zip(prepared, done)))


_MARK = {"passed": "passed", "failed": "failed", "unanswered": "-", "needs_gpu": "GPU", "timed out": "timeout",
         "crashed": "crashed"}


def _cell(e: GradedExercise) -> str:
    extra = (f" h{e.hints}" if e.hints else "") + (" sol" if e.solution_seen else "")
    return _MARK.get(e.status, e.status) + extra


def table(book: Gradebook) -> str:
    """The room as text: one row per submitted notebook, one column per exercise (its status, then
    ``hN`` for N hints used and ``sol`` for a solution seen), then what failed and why."""
    ids = book.exercises
    head = ["student", "notebook", "status", *ids]
    body = []
    for r in book.rows:
        by_id = {e.exercise: e for e in r.exercises}
        body.append([r.student, r.notebook, r.status, *(_cell(by_id[e]) if e in by_id else "" for e in ids)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"\n{len(book.rows)} notebook(s); {book.passed} of {book.total} exercises passed"
                 " (hN: N hints used; sol: the solution was shown)")
    for r in book.rows:
        if r.note:
            lines.append(f"{r.student} {r.notebook}: {r.note}")
        for e in r.exercises:
            if e.status in ("failed", "timed out", "crashed"):
                first = e.message.splitlines()[0] if e.message else ""
                lines.append(f"{r.student} {r.notebook} {e.exercise} {e.status}: {first[:300]}")
    return "\n".join(lines)


CSV_COLUMNS = ("student", "notebook", "notebook_status", "exercise", "status", "message", "hints_used",
               "solution_seen", "seconds", "note")


def to_csv(book: Gradebook) -> str:
    """One row per exercise of every submission (a notebook with none: one row, ``exercise`` empty)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for r in book.rows:
        for e in r.exercises or (None,):
            if e is None:
                writer.writerow([r.student, r.notebook, r.status, "", "", "", "", "", "", r.note])
            else:
                writer.writerow([r.student, r.notebook, r.status, e.exercise, e.status, e.message, e.hints,
                                 "yes" if e.solution_seen else "no", f"{e.seconds:g}", r.note])
    return out.getvalue()


def add_parser(sub: Any) -> None:
    """``workshop grade`` on the CLI's subcommands."""
    w = sub.add_parser("workshop", help="the course's tools: grade a room's notebooks")
    wsub = w.add_subparsers(dest="workshop_command", required=True)
    g = wsub.add_parser("grade", help="grade each submitted notebook's answers in clean processes; print a "
                                      "table (and CSV)")
    g.add_argument("directory", metavar="DIR", help="a folder of submitted notebooks: DIR/<student>.ipynb or "
                                                    "DIR/<student>/.../<notebook>.ipynb")
    g.add_argument("--csv", metavar="FILE", help="also write one row per exercise as CSV (status, message, "
                                                 "hints used, solution seen)")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds an answer and its check may run before "
                                                              "they are stopped (default 60)")
    g.add_argument("--jobs", type=int, default=2, help="answers graded at once (default 2)")
    g.add_argument("--course", metavar="DIR", help="the course's notebooks: each submission is graded on the "
                                                   "exercises of the course notebook of its name")
    g.set_defaults(func=_grade_command)


def _grade_command(args: argparse.Namespace) -> int:
    book = grade(args.directory, timeout=args.timeout, jobs=args.jobs, course=args.course)
    print(table(book))
    if args.csv:
        Path(args.csv).write_text(to_csv(book))
    return 0


def _answer(exercise_id: str, source_file: str, out: str) -> int:
    """In the answer's own process: the checker is looked up before the answer's code runs, the
    answer cell runs after the exercise's setup, and the check's outcome is written to ``out``."""
    from . import _answers, _core

    ex = _core.get(exercise_id)  # the course's checker, taken before any of the submission's code runs
    judge = _core.judge
    write = Path(out).write_text
    try:
        value = _answers.evaluate(ex, Path(source_file).read_text())
    except (Exception, SystemExit) as err:  # the cell itself failed: what it raised is the failure
        write(json.dumps({"status": "failed", "message": f"the answer cell raised {type(err).__name__}: "
                                                          f"{_core._short(err)}"}))
        return 0
    result = judge(ex, value)
    write(json.dumps({"status": result.status, "message": result.message}))
    return 0


def main(argv: Sequence[str]) -> int:
    if len(argv) == 4 and argv[0] == "--answer":
        return _answer(*argv[1:])
    raise SystemExit("usage: python -m tilelab workshop grade DIR [--csv FILE] [--timeout S] [--course DIR]")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
