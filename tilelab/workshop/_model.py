"""The course's records: an exercise, the outcome of a check, a hint, a solution, a student's
progress. Pure frozen dataclasses with ``to_dict``/``from_dict``; their HTML and text come from
:mod:`tilelab.workshop._html` (functions of the record), and none of them imports IPython.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..records.display import DisplayedText
from ..records.record import Record

STATUSES = ("passed", "failed", "unanswered", "needs_gpu")
KINDS = ("writes", "fixes", "predict", "explain")
STATES = ("passed", "tried", "not tried")  # a student's standing on one exercise


class _Shown(DisplayedText):
    """Text and HTML for the notebook, through tilelab's one display dispatch (the renderers are
    :mod:`tilelab.workshop._html`'s, registered with it when the package is imported)."""


@dataclass(frozen=True, repr=False)
class Exercise(_Shown):
    """One exercise of the course, as a lesson module declares it with :func:`exercise`.

    ``notebook`` is the id's prefix ("05" for "05.2"); ``lesson`` the module that declares it;
    ``solution`` the answer cell's text that passes; ``answer_name`` the name the check cell
    passes to :func:`check` (``answer_05_2`` unless the lesson says otherwise); ``setup`` the code
    an answer cell relies on from the cells above it (run before a solution checked outside its
    notebook); ``given`` the code a "fixes" exercise starts from (an answer still equal to it is not
    answered yet). ``checker`` and ``reveal`` are the lesson's functions (not part of ``to_dict``).
    """

    id: str
    title: str
    question: str
    kind: str
    hints: tuple[str, ...]
    solution: str
    needs_gpu: bool = False
    lesson: str = ""
    answer_name: str = ""
    setup: str = ""
    given: str = ""
    checker: Callable[[Any], Any] | None = field(default=None, compare=False)
    reveal: Callable[[Any], Any] | None = field(default=None, compare=False)

    @property
    def notebook(self) -> str:
        return self.id.split(".")[0]

    @property
    def grades_a_kernel(self) -> bool:
        """Whether the student writes or fixes a kernel here."""
        return self.kind in ("writes", "fixes")

    # hand-written: it writes whether it reveals, and neither its checker nor its reveal (code)
    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "question": self.question, "kind": self.kind,
                "hints": list(self.hints), "solution": self.solution, "needs_gpu": self.needs_gpu,
                "lesson": self.lesson, "answer_name": self.answer_name, "setup": self.setup,
                "given": self.given, "reveals": self.reveal is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Exercise:
        """The exercise's description (without the lesson's checker, which is code)."""
        return cls(id=d["id"], title=d["title"], question=d["question"], kind=d["kind"], hints=tuple(d["hints"]),
                   solution=d["solution"], needs_gpu=bool(d.get("needs_gpu", False)), lesson=d.get("lesson", ""),
                   answer_name=d.get("answer_name", ""), setup=d.get("setup", ""), given=d.get("given", ""))


@dataclass(frozen=True, repr=False)
class Check(_Shown):
    """The outcome of one check: ``status`` is one of :data:`STATUSES`. Falsy unless passed.

    ``revealed`` is what a passed exercise with ``reveal`` shows (a value, a picture, a report:
    anything with a rich repr); ``hints`` how many hints the exercise has, so a failed check can
    say where the next one is.
    """

    exercise: str
    title: str
    status: str
    message: str
    hints: int = 0
    revealed: Any = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    # hand-written: what was revealed is written as its repr (any object), and read back as that text
    def to_dict(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "title": self.title, "status": self.status, "message": self.message,
                "hints": self.hints, "revealed": None if self.revealed is None else repr(self.revealed)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Check:
        return cls(exercise=d["exercise"], title=d["title"], status=d["status"], message=d["message"],
                   hints=int(d.get("hints", 0)), revealed=d.get("revealed"))


@dataclass(frozen=True, repr=False)
class Hint(_Shown, Record):
    """The hints given so far for one exercise: ``shown`` holds hints 1..``number`` of ``total``."""

    exercise: str
    title: str
    number: int
    total: int
    shown: tuple[str, ...]

    @property
    def text(self) -> str:
        """The newest hint."""
        return self.shown[-1] if self.shown else ""


@dataclass(frozen=True, repr=False)
class Solution(_Shown, Record):
    """An exercise's solution (``shown``), or the refusal before a first try (``refused``)."""

    exercise: str
    title: str
    status: str  # "shown" | "refused"
    text: str

    @property
    def shown(self) -> bool:
        return self.status == "shown"

    def __bool__(self) -> bool:
        return self.shown


@dataclass(frozen=True)
class Standing(Record):
    """A student's standing on one exercise: ``state`` is one of :data:`STATES`."""

    exercise: str
    title: str
    state: str
    tries: int = 0
    hints: int = 0
    last: str = ""  # the status of the latest check ("" when never checked)
    solution_seen: bool = False


@dataclass(frozen=True, repr=False)
class Progress(_Shown, Record):
    """What a student has done: every exercise of the course (``standings``, in course order) and
    the notebook shown in detail (``notebook``; None shows the course's notebooks only)."""

    notebook: str | None
    standings: tuple[Standing, ...]
    path: str = ""  # the progress file it was read from

    def of(self, notebook: str) -> tuple[Standing, ...]:
        return tuple(s for s in self.standings if s.exercise.split(".")[0] == notebook)

    def notebooks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.exercise.split(".")[0] for s in self.standings))

    def count(self, state: str, notebook: str | None = None) -> int:
        rows = self.standings if notebook is None else self.of(notebook)
        return sum(s.state == state for s in rows)


class NeedsGpu(str):
    """What a checker returns when the part it could grade here passed and the rest (speed) needs
    a GPU: ``return NeedsGpu("correct on the CPU; its speed is measured on a GPU")``."""
