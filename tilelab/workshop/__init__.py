"""The tilelab course: exercises the notebooks of ``notebooks/`` check.

In a notebook::

    from tilelab import workshop
    workshop.check("02.1", answer_02_1)   # passed / failed (what is wrong, never the answer) / unanswered
    workshop.hint("02.1")                 # one more hint each call
    workshop.solution("02.1")             # after a first try
    workshop.progress()                   # passed / tried / not tried, this notebook and the course
    workshop.after("06.7", make)          # make() once 06.7 passed (output that would answer it)

A lesson module of :mod:`tilelab.workshop.lessons` declares its exercises::

    @exercise("05.2", "the most stages that fit", question="...", kind="predict",
              hints=("...", "..."), solution="answer_05_2 = 7")
    def _(answer):
        expect(isinstance(answer, int), "answer with a whole number of stages")
        ...
        return "7 stages: ..."          # the pass message; raise Wrong("...") when it is wrong

Progress lives in ``$TILELAB_PROGRESS`` (default: ``progress.json`` in the user's cache folder).
A teacher grades a room with ``python -m tilelab workshop grade DIR``.
"""

from __future__ import annotations

from . import _html  # noqa: F401  (registers the records' text and HTML with the display)
from ._core import Wrong, after, check, exercise, exercises, expect, hint, progress, solution
from ._records import STATUSES, Check, Exercise, Hint, Locked, NeedsGpu, Progress, Solution, Standing

__all__ = ["STATUSES", "Check", "Exercise", "Hint", "Locked", "NeedsGpu", "Progress", "Solution", "Standing", "Wrong",
           "after", "check", "exercise", "exercises", "expect", "hint", "progress", "solution"]
