"""Running an answer cell outside its notebook (the tests, and anyone checking a lesson): the
cell's text after a prelude of the notebook's first cell and the exercise's ``setup``, in a fresh
namespace, with its source registered in ``linecache`` so that TileLang can read kernels defined
in it. A ``%%tilelang`` line is dropped (the cell's Python is the answer; the magic's display is
not needed to grade it)."""

from __future__ import annotations

import itertools
import linecache
from typing import Any

from ._records import Exercise

PRELUDE = """\
import tilelang
import tilelang.language as T
import tilelab
from tilelab import workshop
"""

_COUNTER = itertools.count()


def _python(source: str) -> str:
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        lines[0] = ""  # keep line numbers as in the cell
    return "\n".join(lines) + "\n"


def run_cell(source: str, namespace: dict[str, Any], label: str = "cell") -> None:
    """Execute one cell's Python in ``namespace``, its source readable by ``inspect``."""
    text = _python(source)
    filename = f"<tilelab-{label}-{next(_COUNTER)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), namespace)


def evaluate(exercise: Exercise, source: str) -> Any:
    """The value an answer cell binds to the exercise's ``answer_name``."""
    namespace: dict[str, Any] = {"__name__": "__tilelab_answer__"}
    run_cell(PRELUDE, namespace, "prelude")
    if exercise.setup:
        run_cell(exercise.setup, namespace, f"setup-{exercise.id}")
    run_cell(source, namespace, f"answer-{exercise.id}")
    if exercise.answer_name not in namespace:
        raise NameError(f"the answer cell of {exercise.id} binds no {exercise.answer_name}")
    return namespace[exercise.answer_name]
