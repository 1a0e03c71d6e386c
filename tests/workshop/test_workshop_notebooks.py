"""Every notebook of notebooks/, run headless in a fresh kernel of this environment on the CPU:
as committed (Run All before anything is answered: no cell errors, every check "unanswered") and
with every answer cell replaced by its exercise's solution (every check passed, or needs_gpu for
a GPU-only exercise on a machine without one). The two runs of a notebook go side by side.
``make test`` runs one notebook so (06, whose exercises are of every kind) and checks every
notebook's committed form; ``make test-heavy`` runs the others."""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import GPU_PRESENT

from tilelab import workshop
from tilelab.workshop import _answers, _core

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STATUS = re.compile(r'data-status="(\w+)"')


def _cells(nb, role):
    return [c for c in nb.cells if c.metadata.get("tilelab", {}).get(role)]


def _execute(nb, env_path: Path):
    nbclient = pytest.importorskip("nbclient")
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=False,
                                     resources={"metadata": {"path": str(ROOT)}})  # imports this checkout's tilelab
    client.execute(env={**os.environ, "TILELAB_PROGRESS": str(env_path), "PYTHONPATH": str(ROOT)})
    return nb


def _statuses(nb) -> dict[str, str]:
    out = {}
    for cell in _cells(nb, "check"):
        ex = cell.metadata["tilelab"]["check"]
        html = [o["data"]["text/html"] for o in cell.get("outputs", []) if "text/html" in o.get("data", {})]
        assert html, f"check cell of {ex} showed nothing: {cell.get('outputs')}"
        out[ex] = STATUS.search(html[0]).group(1)
    return out


def _errors(nb) -> list[str]:
    return ["\n".join(o.traceback[-4:]) for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"]


def _shown_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        parts += [str(o.get("text", "")), str(data.get("text/plain", "")),
                  re.sub(r"<[^>]+>", " ", str(data.get("text/html", "")))]
    return "\n".join(parts)


# The notebook make test runs (its exercises are of every kind: writes, predict, explain, fixes);
# make test-heavy runs the others. Every notebook's committed form is checked in make test (below).
RUN_IN_MAKE_TEST = "06_banks_swizzles_wgmma"
RUNS = [p if p.stem == RUN_IN_MAKE_TEST else pytest.param(p, marks=pytest.mark.heavy) for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_clear_and_its_cells_are_its_exercises(path):
    nbformat = pytest.importorskip("nbformat")
    raw = json.loads(path.read_text())
    code = [c for c in raw["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in code), \
        f"{path.name} is committed with outputs: clear them"
    first_code = next(c for c in raw["cells"] if c["cell_type"] == "code")
    assert "from tilelab import workshop" in "".join(first_code["source"])
    assert not re.search(r"\btilelab\._|from tilelab\._|from tilelab\.\w+ import _|tilelab\.workshop\._",
                         path.read_text()), f"{path.name} imports a private module"

    committed = nbformat.read(path, as_version=4)
    key = re.match(r"\d+", path.name).group(0)
    exercises = {e.id: e for e in workshop.exercises(key)}
    answers = {c.metadata["tilelab"]["answer"] for c in _cells(committed, "answer")}
    checks = {c.metadata["tilelab"]["check"] for c in _cells(committed, "check")}
    assert answers == checks == set(exercises), (answers, checks, set(exercises))


@pytest.mark.slow
@pytest.mark.parametrize("path", RUNS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_as_committed_and_with_the_solutions(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    committed = nbformat.read(path, as_version=4)
    key = re.match(r"\d+", path.name).group(0)
    exercises = {e.id: e for e in workshop.exercises(key)}
    solved = nbformat.read(path, as_version=4)
    for cell in _cells(solved, "answer"):
        cell.source = exercises[cell.metadata["tilelab"]["answer"]].solution

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda args: _execute(*args),
                             [(committed, tmp_path / "committed.json"), (solved, tmp_path / "solved.json")]))
    for name, nb in zip(("as committed", "with the solutions"), runs):
        errors = _errors(nb)
        assert not errors, f"{path.name} {name}:\n" + "\n---\n".join(errors)

    assert set(_statuses(runs[0]).values()) == {"unanswered"}, _statuses(runs[0])
    want = {e: ("needs_gpu" if exercises[e].needs_gpu and not GPU_PRESENT else "passed") for e in exercises}
    got = _statuses(runs[1])
    for e, status in got.items():  # a checker's GPU part may say needs_gpu once its CPU part passed
        if status == "needs_gpu" and not GPU_PRESENT:
            want[e] = "needs_gpu"
    assert got == want

    # predict, then reveal: no output above an exercise's check states its answer, as committed and
    # with the solutions (every earlier pass message, reveal, figure's text and tab on screen); and
    # no pass message of this notebook states the answer of any later exercise of the course
    for name, nb in zip(("as committed", "with the solutions"), runs):
        shown: list[str] = []
        for cell in nb.cells:
            ex = cell.metadata.get("tilelab", {}).get("check")
            if ex and exercises[ex].kind == "predict":
                spelled = [s for s in _answer_spellings(exercises[ex]) for text in shown if re.search(s, text)]
                assert not spelled, f"{path.name} {name}: the answer of {ex} is on screen before its check: {spelled}"
            if cell.cell_type == "code" and (not ex or name == "with the solutions"):
                shown.append(_shown_text(cell))
    later = [e for e in workshop.exercises() if _order(e.id) > _order(min(exercises, key=_order))
             and e.kind == "predict"]
    for cell in runs[1].cells:
        ex = cell.metadata.get("tilelab", {}).get("check")
        if not ex:
            continue
        text = _shown_text(cell)
        for other in later:
            if _order(other.id) > _order(ex):
                spelled = [s for s in _answer_spellings(other) if re.search(s, text)]
                assert not spelled, f"{path.name}: {ex}'s pass message states the answer of {other.id}: {spelled}"


def _order(key: str) -> tuple[int, int]:
    a, b = key.split(".")
    return int(a), int(b)


def _answer_spellings(ex) -> list[str]:
    """How an output could state ``ex``'s answer; none for an answer too short to search for (a
    one-letter name) or one an earlier exercise already had (then it is that one's, on screen)."""
    value = _answers.evaluate(ex, ex.solution)
    if isinstance(value, str) and len(value) < 3:
        return []
    earlier = [e for e in workshop.exercises() if _order(e.id) < _order(ex.id) and not e.grades_a_kernel]
    if any(_answers.evaluate(e, e.solution) == value for e in earlier):
        return []
    return _spellings(value)


def _spellings(value):
    if isinstance(value, (tuple, list)) and len(value) > 1:  # (64,) is a bare number: too common to search
        parts = [str(v) for v in value]
        return [rf"(?<![\w.]){re.escape(s)}(?![\w]|\.\d)" for s in (", ".join(parts), "x".join(parts),
                                                                  " x ".join(parts))]
    if isinstance(value, str):
        return [rf"(?<![\w]){re.escape(value)}(?![\w])"]
    if isinstance(value, dict):
        return [re.escape(", ".join(f"{k}: {v}" for k, v in value.items()))]
    return []  # a bare number is in too many unrelated outputs to search for


def test_every_registered_notebook_exists():
    """Each notebook prefix the registry knows has its notebook (the registry and notebooks/ agree)."""
    have = {re.match(r"\d+", p.name).group(0) for p in NOTEBOOKS}
    assert {e.notebook for e in _core.registry().values()} <= have
