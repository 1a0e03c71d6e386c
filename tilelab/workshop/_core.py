"""The course framework: lessons declare exercises, students check answers, ask for hints and
solutions, and see their progress.

A lesson is a module of :mod:`tilelab.workshop.lessons` (``l05_pipelining_and_tma.py``); the
registry imports every one of them (``pkgutil.iter_modules``, no list to edit) the first time an
exercise is looked up. A lesson module may also define ``wrong_answers = {"05.2": ("answer_05_2 =
6", ...)}``: answer cells that must fail, each with a message that does not give the answer away
(the tests run every one).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import textwrap
import threading
from collections.abc import Callable
from typing import Any

from . import _progress
from ._records import KINDS, Check, Exercise, Hint, Locked, NeedsGpu, Progress, Solution, Standing

_REGISTRY: dict[str, Exercise] = {}
_WRONG: dict[str, tuple[str, ...]] = {}
_LOADED = False
_BROKEN: dict[str, str] = {}  # lesson module -> why it could not be imported
_LOCK = threading.RLock()
_TRIED: set[str] = set()  # exercises tried in this process (solution() also reads the file)
_LAST_NOTEBOOK: list[str] = []  # the notebook of the exercise touched last: progress()'s default
_ID = re.compile(r"\d\d\.\d+")


class Wrong(Exception):
    """Raised by a checker: the answer is wrong, and the message says why (never the answer)."""


def expect(condition: Any, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise Wrong(message)


def exercise(id: str, title: str, *, question: str, kind: str, hints: tuple[str, ...] | list[str] = (),
             solution: str, needs_gpu: bool = False, reveal: Callable[[Any], Any] | None = None,
             answer_name: str | None = None, setup: str = "",
             given: str = "") -> Callable[[Callable[[Any], Any]], Exercise]:
    """Declare an exercise: decorates its checker, ``answer -> pass message``, which raises
    :class:`Wrong` (or fails :func:`expect`) when the answer is wrong. Returns the :class:`Exercise`.

    ``answer_name`` is the name the check cell passes (default ``answer_05_2`` for "05.2");
    ``setup`` the code the answer cell relies on from cells above it; ``given`` the code a "fixes"
    exercise's answer cell starts from (an answer whose source is still that code is unanswered).
    """
    if not isinstance(id, str) or not _ID.fullmatch(id):
        raise ValueError(f"exercise id {id!r} is not NN.M (the notebook's two digits, a dot, a number)")
    if kind not in KINDS:
        raise ValueError(f"exercise {id}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if not solution or not isinstance(solution, str):
        raise ValueError(f"exercise {id}: give the answer cell's text that passes as solution=")

    def register(checker: Callable[[Any], Any]) -> Exercise:
        record = Exercise(id=id, title=title, question=question, kind=kind, hints=tuple(hints),
                          solution=textwrap.dedent(solution).strip("\n"), needs_gpu=needs_gpu,
                          lesson=getattr(checker, "__module__", "") or "",
                          answer_name=answer_name or "answer_" + id.replace(".", "_"),
                          setup=textwrap.dedent(setup).strip("\n"), given=textwrap.dedent(given).strip("\n"),
                          checker=checker, reveal=reveal)
        with _LOCK:
            old = _REGISTRY.get(id)
            if old is not None and old.lesson != record.lesson:
                raise ValueError(f"exercise {id} is declared twice: in {old.lesson} and in {record.lesson}")
            _REGISTRY[id] = record
        return record

    return register


def _load() -> None:
    global _LOADED
    with _LOCK:
        if _LOADED:
            return
        from . import lessons

        for info in sorted(pkgutil.iter_modules(lessons.__path__), key=lambda m: m.name):
            if info.name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"{lessons.__name__}.{info.name}")
            except Exception as err:
                _BROKEN[info.name] = f"{type(err).__name__}: {err}"
                continue
            for key, sources in (getattr(module, "wrong_answers", None) or {}).items():
                _WRONG[key] = tuple(sources)
        _LOADED = True


def _order(key: str) -> tuple[int, int]:
    major, minor = key.split(".")
    return int(major), int(minor)


def registry() -> dict[str, Exercise]:
    """Every exercise of the course by id, in course order."""
    _load()
    return {k: _REGISTRY[k] for k in sorted(_REGISTRY, key=_order)}


def wrong_answers(exercise_id: str) -> tuple[str, ...]:
    """The answer cells a lesson declares wrong for this exercise (for the tests)."""
    _load()
    return _WRONG.get(exercise_id, ())


def _notebook_key(notebook: str | int) -> str:
    match = re.match(r"\s*(\d+)", str(notebook))
    if not match:
        raise KeyError(f"no notebook {notebook!r}: name one by its number, e.g. '01' or '01_first_kernel'")
    return f"{int(match.group(1)):02d}"


def exercises(notebook: str | int | None = None) -> list[Exercise]:
    """The course's exercises, or one notebook's ("01", 1 or "01_first_kernel.ipynb")."""
    every = registry().values()
    if notebook is None:
        return list(every)
    key = _notebook_key(notebook)
    return [e for e in every if e.notebook == key]


def get(exercise_id: str) -> Exercise:
    """One exercise; a clear KeyError naming the notebook's exercises when there is no such id."""
    reg = registry()
    key = str(exercise_id).strip()
    if key in reg:
        return reg[key]
    prefix = key.split(".")[0]
    near = [k for k in reg if k.split(".")[0] == prefix] or list(reg)
    broken = [f"{name} ({why})" for name, why in _BROKEN.items() if name[1:3] == prefix]
    if broken:
        raise KeyError(f"no exercise {exercise_id!r}: its lesson could not be loaded: {'; '.join(broken)}")
    raise KeyError(f"no exercise {exercise_id!r}: the exercises are {', '.join(near)}")


def broken_lessons() -> dict[str, str]:
    """Lesson modules that failed to import, with why (the tests require none)."""
    _load()
    return dict(_BROKEN)


def _touch(ex: Exercise) -> None:
    _LAST_NOTEBOOK[:] = [ex.notebook]


def _tree(source: str) -> str | None:
    try:
        return ast.dump(ast.parse(textwrap.dedent(source)))
    except SyntaxError:
        return None


def is_placeholder(answer: Any, given: str = "") -> bool:
    """Whether ``answer`` is still the notebook's ``...``: the Ellipsis itself, a function whose body
    still holds a ``...`` statement (a kernel cell not written yet), or a function whose code is
    still ``given`` (a kernel to fix, unchanged; comments and layout aside)."""
    if answer is ...:
        return True
    if inspect.isfunction(answer):
        try:
            source = inspect.getsource(answer)
            tree = ast.parse(textwrap.dedent(source))
        except (OSError, TypeError, SyntaxError):
            return False
        if given and _tree(source) == _tree(given):
            return True
        return any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is ...
                   for node in ast.walk(tree))
    return False


def _short(err: BaseException) -> str:
    text = str(getattr(err, "summary", "") or err).strip() or type(err).__name__
    lines = text.splitlines()
    text = "\n".join(lines[:6]) + ("\n..." if len(lines) > 6 else "")
    return text if len(text) <= 600 else text[:600] + "..."


def _has_gpu() -> bool:
    from .. import _tilelang

    return _tilelang.has_gpu()


def judge(ex: Exercise, answer: Any, *, timeout: float | None = None) -> Check:
    """The outcome of ``answer`` for ``ex``, recording nothing (the grader's clean process calls
    this directly; :func:`check` records it in the student's progress). A kernel exercise's
    checker runs in a process of its own where it can (:mod:`._isolate`): a crash or a kernel that
    never ends is one failed check, stopped after ``timeout`` seconds."""
    hints = len(ex.hints)
    if is_placeholder(answer, ex.given):
        what = "change the kernel above" if ex.given else "replace the ... with your answer"
        return Check(ex.id, ex.title, "unanswered", f"not answered yet: {what}", hints)
    if ex.needs_gpu and not _has_gpu():
        return Check(ex.id, ex.title, "needs_gpu", "this exercise needs a CUDA GPU and there is none here; "
                     "the rest of the notebook works without one", hints)
    checker = ex.checker
    assert checker is not None
    from . import _isolate

    limit = _isolate.DEFAULT_TIMEOUT if timeout is None else float(timeout)
    warned: list[str] = []
    try:
        if ex.grades_a_kernel and _isolate.can_isolate():
            run = _isolate.isolated(lambda: checker(answer), limit)
            warned = _isolate.warnings_in(run.stderr)
            if run.status == "timed out":
                raise Wrong(f"the check was stopped after {limit:g} s: your kernel (or its compilation) never "
                            "finished. A loop whose bound never comes, or a very large size? (This notebook "
                            "is fine: the kernel ran in a process of its own.)")
            if run.status == "crashed":
                raise Wrong(f"your kernel crashed the process that ran it ({_isolate.crash_words(run.signal)}). "
                            "This notebook is fine: the kernel ran in a process of its own. Look at the "
                            "indices of every load and store: can one go below zero or past the end?")
            if run.status == "raised":
                assert run.error is not None
                raise run.error
            outcome = run.value
        else:
            outcome = checker(answer)
    except Wrong as wrong:
        if any("before initiali" in w for w in warned):  # TileLang named the bug: that comes first
            return Check(ex.id, ex.title, "failed", _warned(warned).strip() + "\n" + str(wrong), hints)
        return Check(ex.id, ex.title, "failed", str(wrong) + _warned(warned), hints)
    except Exception as err:
        return Check(ex.id, ex.title, "failed", f"your answer raised {type(err).__name__}: {_short(err)}"
                     + _warned(warned), hints)
    if isinstance(outcome, NeedsGpu):
        return Check(ex.id, ex.title, "needs_gpu", str(outcome), hints)
    revealed = None
    if ex.reveal is not None:
        try:
            revealed = ex.reveal(answer)
        except Exception as err:
            revealed = f"(what this exercise reveals could not be drawn: {type(err).__name__}: {_short(err)})"
    return Check(ex.id, ex.title, "passed", str(outcome or "right"), hints, revealed)


def _warned(warnings: list[str]) -> str:
    if not warnings:
        return ""
    return "\nTileLang warned while compiling your kernel: " + " | ".join(warnings)


def check(exercise_id: str, answer: Any = ..., *, timeout: float | None = None) -> Check:
    """Check ``answer`` for exercise ``exercise_id`` and record the try.

    ``...`` (the notebook's placeholder) is ``unanswered``; an exercise that cannot be graded
    without a GPU says ``needs_gpu`` on a machine with none. A wrong answer's message names what
    went wrong, never the answer; an exception from the student's code is reported, not raised.
    A passed exercise with ``reveal`` shows what it reveals. Only an answer of the exercise's kind
    (see :func:`is_attempt`) counts as a try that opens the solution. A kernel's check runs apart
    from the notebook and stops after ``timeout`` seconds (default 300).
    """
    ex = get(exercise_id)
    _touch(ex)
    result = judge(ex, answer, timeout=timeout)
    if result.status == "unanswered":
        return result
    attempt = is_attempt(ex, answer)
    if not attempt and not result.passed:
        result = Check(ex.id, ex.title, result.status, result.message + f" (not yet an attempt of {ex.id}: "
                       f"{_kind_words(ex)}; the solution opens after one)", result.hints)
    return _record(ex, result, attempt)


_SOLUTION_VALUES: dict[str, Any] = {}


def _solution_value(ex: Exercise) -> Any:
    """The value the exercise's own solution cell binds (what an answer of its kind looks like)."""
    if ex.id not in _SOLUTION_VALUES:
        from . import _answers

        try:
            _SOLUTION_VALUES[ex.id] = _answers.evaluate(ex, ex.solution)
        except Exception:  # a lesson whose solution cannot run here: any non-placeholder answer counts
            _SOLUTION_VALUES[ex.id] = None
    return _SOLUTION_VALUES[ex.id]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """What sort of answer a value is: a function, a value (a number, or a tuple, list or dict of
    them: "how many" and "which (x, y)" answers are the same sort), a text, else its type's name."""
    if inspect.isfunction(value) or inspect.ismethod(value):
        return "function"
    if _number(value) or isinstance(value, (tuple, list, dict)):
        return "value"
    if isinstance(value, str):
        return "text"
    return type(value).__name__


_KIND_WORDS = {"function": "the answer is a function: your def of the cell above", "value": "the answer is a value "
               "(a number, or a tuple or dict of them)", "text": "the answer is a text"}


def _kind_words(ex: Exercise) -> str:
    kind = _kind(_solution_value(ex))
    return _KIND_WORDS.get(kind, f"the answer is a {kind}")


def is_attempt(ex: Exercise, answer: Any) -> bool:
    """Whether ``answer`` is a real attempt of ``ex``: of the sort its solution is (see
    :func:`_kind`), so that ``check("08.1", 0)`` does not open 08.1's solution; a text must say
    something."""
    if is_placeholder(answer, ex.given):
        return False
    value = _solution_value(ex)
    if value is None:
        return True
    kind = _kind(value)
    if kind == "text":
        return isinstance(answer, str) and bool(answer.strip())
    if kind in ("function", "value"):
        return _kind(answer) == kind
    return isinstance(answer, type(value))


def _record(ex: Exercise, result: Check, attempt: bool = True) -> Check:
    if attempt:
        _TRIED.add(ex.id)
    passed = result.passed
    _progress.update(ex.id, tries=lambda n: (n or 0) + 1, last=result.status,
                     attempts=lambda n: (n or 0) + int(attempt), passed=lambda old: bool(old) or passed)
    return result


def hint(exercise_id: str) -> Hint:
    """The next hint of an exercise: the first call shows hint 1, the next 1 and 2, and so on."""
    ex = get(exercise_id)
    _touch(ex)
    total = len(ex.hints)
    if not total:
        return Hint(ex.id, ex.title, 0, 0, ())
    before = int(_progress.read().get(ex.id, {}).get("hints") or 0)
    record = _progress.update(ex.id, hints=lambda n: min((n or 0) + 1, total))
    number = int(record["hints"])
    return Hint(ex.id, ex.title, number, total, ex.hints[:number], exhausted=before >= total)


def solution(exercise_id: str) -> Solution:
    """An exercise's solution, once it was tried (checked with an answer) at least once."""
    ex = get(exercise_id)
    _touch(ex)
    tried = ex.id in _TRIED or int(_progress.read().get(ex.id, {}).get("attempts") or 0) > 0
    if not tried:
        return Solution(ex.id, ex.title, "refused", "try it first: the solution opens after your first check "
                        f"of {ex.id} with an answer of its kind ({_kind_words(ex)}; "
                        f"workshop.hint(\"{ex.id}\") helps meanwhile)")
    _progress.update(ex.id, solution_seen=True)
    return Solution(ex.id, ex.title, "shown", ex.solution)


def after(exercise_ids: str | tuple[str, ...] | list[str], make: Callable[[], Any], what: str = "") -> Any:
    """``make()`` (a figure, an inspector, an explorer) once every exercise of ``exercise_ids`` has
    passed; before that a note that it opens then. For a cell whose output would answer those
    exercises, so that *Run All* does not put the answers on screen."""
    ids = (exercise_ids,) if isinstance(exercise_ids, str) else tuple(exercise_ids)
    for key in ids:
        get(key)  # a clear KeyError for a typo
    records = _progress.read()
    waiting = tuple(k for k in ids if not records.get(k, {}).get("passed"))
    if waiting:
        return Locked(waiting, what)
    return make()


def progress(notebook: str | int | None = None) -> Progress:
    """What has been done: per exercise passed / tried / not tried, for the whole course, with the
    notebook of the latest exercise checked (or ``notebook``) in detail."""
    key = _notebook_key(notebook) if notebook is not None else (_LAST_NOTEBOOK[0] if _LAST_NOTEBOOK else None)
    records = _progress.read()
    standings = []
    for ex in registry().values():
        r = records.get(ex.id, {})
        tries = int(r.get("tries") or 0)
        state = ("passed" if r.get("passed") else "needs GPU" if r.get("last") == "needs_gpu"
                 else "tried" if tries else "not tried")
        standings.append(Standing(ex.id, ex.title, state, tries, int(r.get("hints") or 0), str(r.get("last") or ""),
                                  bool(r.get("solution_seen"))))
    return Progress(key, tuple(standings), str(_progress.path()))


def _reset_for_tests() -> None:
    """Forget this process's tries (the file is the caller's: point $TILELAB_PROGRESS elsewhere)."""
    _TRIED.clear()
    _LAST_NOTEBOOK.clear()
