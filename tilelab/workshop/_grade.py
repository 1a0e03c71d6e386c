"""``python -m tilelab workshop grade DIR``: grade a room's submitted notebooks.

Each notebook runs headless (nbclient, a fresh kernel of this Python) in its own process, with a
progress file of its own (``$TILELAB_PROGRESS``) in which every check cell records its outcome; a
cell that runs longer than ``--timeout`` seconds is interrupted and the rest of the notebook still
runs, and a whole notebook that runs longer than ``--notebook-timeout`` is stopped (its process
group killed) with what it had recorded kept. A file that is not a notebook is one row that says so.

Submissions are either ``DIR/<student>.ipynb`` or, as nbgrader collects them,
``DIR/<student>/.../<notebook>.ipynb``. With ``--course DIR`` each check cell is restored from the
course's own notebook of the same name before the run (as nbgrader restores its locked cells), so a
check cell edited by the student grades like the original. Students' code runs with your rights:
grade in a container or an account of its own, as with any autograder.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records.record import Record

STATES = ("passed", "tried", "not tried", "needs GPU")


@dataclass(frozen=True)
class GradedNotebook(Record):
    """One submitted notebook: ``states`` maps each exercise of it to one of :data:`STATES`;
    ``status`` is "ok", "timed out" or "error" (not a notebook, or the run failed), with ``note``."""

    student: str
    notebook: str
    path: str
    status: str
    states: dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class Gradebook(Record):
    rows: tuple[GradedNotebook, ...]

    @property
    def exercises(self) -> list[str]:
        ids = {e for r in self.rows for e in r.states}
        return sorted(ids, key=lambda k: tuple(int(p) for p in k.split(".")))


def _submissions(directory: Path) -> list[tuple[str, Path]]:
    found = []
    for path in sorted(directory.rglob("*.ipynb")):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):  # .ipynb_checkpoints and hidden folders
            continue
        student = rel.parts[0] if len(rel.parts) > 1 else path.stem
        found.append((student, path))
    return found


def _exercise_cells(nb: Any) -> tuple[dict[str, int], dict[str, int]]:
    answers, checks = {}, {}
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("tilelab", {}) or {}
        if meta.get("answer"):
            answers[str(meta["answer"])] = i
        if meta.get("check"):
            checks[str(meta["check"])] = i
    return answers, checks


def _course_checks(course: Path | None, name: str) -> dict[str, str]:
    if course is None:
        return {}
    import nbformat

    original = course / name
    if not original.is_file():
        return {}
    nb = nbformat.read(original, as_version=4)
    _, checks = _exercise_cells(nb)
    return {ex: nb.cells[i].source for ex, i in checks.items()}


def grade_one(student: str, path: Path, *, timeout: float, notebook_timeout: float,
              course: Path | None = None) -> GradedNotebook:
    """Run one submitted notebook in a child process and read what its checks recorded."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:
        return GradedNotebook(student, path.name, str(path), "error", {}, f"not a notebook: {type(err).__name__}: "
                              f"{str(err).splitlines()[0][:200] if str(err) else ''}")
    answers, checks = _exercise_cells(nb)
    exercises = sorted(set(answers) | set(checks), key=lambda k: tuple(int(p) for p in k.split(".") if p.isdigit()))
    if not exercises:
        return GradedNotebook(student, path.name, str(path), "error", {}, "no exercise cells (cell metadata "
                              "tilelab.answer / tilelab.check): is this a notebook of the course?")
    for ex, source in _course_checks(course, path.name).items():
        if ex in checks:
            nb.cells[checks[ex]].source = source
    with tempfile.TemporaryDirectory(prefix="tilelab-grade-") as tmp:
        work = Path(tmp)
        nbformat.write(nb, work / "submission.ipynb")
        env = {**os.environ, "TILELAB_PROGRESS": str(work / "progress.json")}
        cmd = [sys.executable, "-m", "tilelab.workshop._grade", "--child", str(work / "submission.ipynb"),
               str(work / "cells.json"), str(timeout), str(path.parent)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own process group: the kernel dies with it
        status, note = "ok", ""
        try:
            _, stderr = proc.communicate(timeout=notebook_timeout)
            if proc.returncode:
                last = (stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
                status, note = "error", "the run failed: " + last[:300]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            status, note = "timed out", f"stopped after {notebook_timeout:g} s (--notebook-timeout)"
        progress = _read_json(work / "progress.json").get("exercises", {})
        cells = _read_json(work / "cells.json").get("timed_out", [])
    hung = set()
    for index in cells:
        for ex, i in list(answers.items()) + list(checks.items()):
            if i == index:
                hung.add(ex)
    if cells:
        status = "timed out"
        note = "; ".join(filter(None, [note, (f"stopped {len(cells)} cell(s) after {timeout:g} s each: the answer or "
                                             f"check of {', '.join(sorted(hung)) or 'no exercise'}")]))
    states = {}
    for ex in exercises:
        record = progress.get(ex, {})
        if record.get("passed"):
            states[ex] = "passed"
        elif record.get("last") == "needs_gpu":
            states[ex] = "needs GPU"
        elif int(record.get("tries") or 0) > 0 or ex in hung:
            states[ex] = "tried"
        else:
            states[ex] = "not tried"
    return GradedNotebook(student, path.name, str(path), status, states, note)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def grade(directory: str | Path, *, timeout: float = 60.0, notebook_timeout: float = 900.0, jobs: int = 2,
          course: str | Path | None = None) -> Gradebook:
    """Grade every notebook under ``directory`` (see the module's docstring)."""
    root = Path(directory)
    if not root.is_dir():
        from ..records.errors import TilelabError

        raise TilelabError(f"{root} is not a folder: give the folder that holds the submitted notebooks")
    try:
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError:
        from ..records.errors import TilelabError

        raise TilelabError("workshop grade runs notebooks with nbformat and nbclient, which are not installed: "
                           "pip install 'tilelab[lab]' (JupyterLab brings both)") from None
    subs = _submissions(root)
    course_dir = Path(course) if course else None
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        rows = list(pool.map(lambda s: grade_one(s[0], s[1], timeout=timeout, notebook_timeout=notebook_timeout,
                                                 course=course_dir), subs))
    return Gradebook(tuple(rows))


def table(book: Gradebook) -> str:
    """The room as text: one row per submitted notebook, one column per exercise."""
    mark = {"passed": "passed", "tried": "tried", "not tried": "-", "needs GPU": "GPU"}
    ids = book.exercises
    head = ["student", "notebook", "status", *ids]
    body = [[r.student, r.notebook, r.status, *(mark[r.states[e]] if e in r.states else "" for e in ids)]
            for r in book.rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{r.student} {r.notebook}: {r.note}" for r in book.rows if r.note]
    passed = sum(s == "passed" for r in book.rows for s in r.states.values())
    total = sum(len(r.states) for r in book.rows)
    lines.append(f"\n{len(book.rows)} notebook(s); {passed} of {total} exercises passed")
    return "\n".join(lines + notes)


def to_csv(book: Gradebook) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    ids = book.exercises
    writer.writerow(["student", "notebook", "status", *ids, "note"])
    for r in book.rows:
        writer.writerow([r.student, r.notebook, r.status, *(r.states.get(e, "") for e in ids), r.note])
    return out.getvalue()


def add_parser(sub: Any) -> None:
    """``workshop grade`` on the CLI's subcommands."""
    w = sub.add_parser("workshop", help="the course's tools: grade a room's notebooks")
    wsub = w.add_subparsers(dest="workshop_command", required=True)
    g = wsub.add_parser("grade", help="run each submitted notebook's checks and print a table (and CSV)")
    g.add_argument("directory", metavar="DIR", help="a folder of submitted notebooks: DIR/<student>.ipynb or "
                                                    "DIR/<student>/.../<notebook>.ipynb")
    g.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds a cell may run before it is stopped "
                                                              "(default 60)")
    g.add_argument("--notebook-timeout", type=float, default=900.0, help="seconds a whole notebook may run "
                                                                       "(default 900)")
    g.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (default 2)")
    g.add_argument("--course", metavar="DIR", help="the course's notebooks: check cells are restored from them")
    g.set_defaults(func=_grade_command)


def _grade_command(args: argparse.Namespace) -> int:
    book = grade(args.directory, timeout=args.timeout, notebook_timeout=args.notebook_timeout, jobs=args.jobs,
                 course=args.course)
    print(table(book))
    if args.csv:
        Path(args.csv).write_text(to_csv(book))
    return 0


def _child(notebook: str, out: str, timeout: str, cwd: str) -> int:
    """In the grading process: run the notebook, note which cells were stopped."""
    import nbclient
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=int(float(timeout)), kernel_name="python3", allow_errors=True, interrupt_on_timeout=True,
        error_on_timeout={"ename": "CellTimeoutError", "evalue": f"stopped after {timeout} s", "traceback": []},
        store_widget_state=False, resources={"metadata": {"path": cwd}})
    try:
        client.execute()
    finally:
        stopped = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                   and any(o.get("output_type") == "error"
                           and o.get("ename") in ("KeyboardInterrupt", "CellTimeoutError")
                           for o in c.get("outputs", []))]
        Path(out).write_text(json.dumps({"timed_out": stopped}))
    return 0


def main(argv: Sequence[str]) -> int:
    if len(argv) == 5 and argv[0] == "--child":
        return _child(*argv[1:])
    raise SystemExit("usage: python -m tilelab workshop grade DIR [--csv FILE] [--timeout S]")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
