"""Text and HTML of the course's records: functions ``record -> str``; every string is escaped,
colours are JupyterLab's CSS variables (with light fallbacks for nbviewer and GitHub)."""

from __future__ import annotations

import html as _html
from typing import Any

from ._model import Check, Exercise, Hint, Progress, Solution

_MARK = {"passed": "\u2713", "failed": "\u2717", "unanswered": "\u2026", "needs_gpu": "\u23f8",
         "shown": "\u2139", "refused": "\u2026", "tried": "\u2717", "not tried": "\u00b7"}
_COLOUR = {"passed": "var(--jp-success-color1, #388e3c)", "failed": "var(--jp-error-color1, #d32f2f)",
           "tried": "var(--jp-error-color1, #d32f2f)", "unanswered": "var(--jp-ui-font-color2, #757575)",
           "not tried": "var(--jp-ui-font-color2, #757575)", "refused": "var(--jp-ui-font-color2, #757575)",
           "needs_gpu": "var(--jp-warn-color1, #f57c00)", "shown": "var(--jp-info-color1, #0288d1)"}
_BOX = 'padding:2px 8px;color:var(--jp-ui-font-color1, #222);border-left:4px solid {colour}'


def _e(value: Any) -> str:
    return _html.escape(str(value))


def _hint_note(check: Check) -> str:
    if check.status == "failed" and check.hints:
        return f'workshop.hint("{check.exercise}") gives a hint ({check.hints} in all)'
    return ""


def text(record: Any) -> str:
    """The plain-text form of a course record."""
    if isinstance(record, Check):
        out = f"{_MARK[record.status]} {record.exercise} {record.title}: {record.message}"
        note = _hint_note(record)
        if note:
            out += f"\n  {note}"
        if record.passed and record.revealed is not None:
            out += "\n" + (record.revealed if isinstance(record.revealed, str) else repr(record.revealed))
        return out
    if isinstance(record, Hint):
        if not record.total:
            return f"{record.exercise} {record.title}: this exercise has no hints"
        lines = [f"hint {i} of {record.total}: {h}" for i, h in enumerate(record.shown, 1)]
        return f"{record.exercise} {record.title}\n" + "\n".join(lines)
    if isinstance(record, Solution):
        if not record.shown:
            return f"{_MARK['refused']} {record.exercise} {record.title}: {record.text}"
        return f"{record.exercise} {record.title}, a solution:\n{record.text}"
    if isinstance(record, Exercise):
        gpu = ", needs a GPU" if record.needs_gpu else ""
        return f"{record.id} {record.title} ({record.kind}{gpu}): {record.question}"
    if isinstance(record, Progress):
        return _progress_text(record)
    return repr(record)


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _progress_text(p: Progress) -> str:
    lines = []
    if p.notebook is not None:
        lines.append(f"notebook {p.notebook}:")
        for s in p.of(p.notebook):
            extra = f" ({_n(s.tries, 'try', 'tries')}, {_n(s.hints, 'hint', 'hints')})" if s.tries or s.hints else ""
            lines.append(f"  {_MARK[s.state]} {s.exercise} {s.title}: {s.state}{extra}")
    lines.append("the course:")
    for nb in p.notebooks():
        total = len(p.of(nb))
        lines.append(f"  {nb}: {p.count('passed', nb)} of {total} passed, {p.count('tried', nb)} tried")
    lines.append(f"  in all: {p.count('passed')} of {len(p.standings)} passed")
    return "\n".join(lines)


def html(record: Any) -> str:
    """The HTML form of a course record (for the notebook)."""
    if isinstance(record, Check):
        colour = _COLOUR[record.status]
        note = _hint_note(record)
        note_html = f'<div style="margin-top:2px;opacity:0.8">{_e(note)}</div>' if note else ""
        message = _e(record.message).replace("\n", "<br>")
        out = (f'<div class="tilelab-check" data-exercise="{_e(record.exercise)}" data-status="{_e(record.status)}" '
               f'style="{_BOX.format(colour=colour)}"><b style="color:{colour}">{_MARK[record.status]} '
               f'{_e(record.exercise)}</b> {_e(record.title)}: {message}{note_html}</div>')
        if record.passed and record.revealed is not None:
            out += f'<div class="tilelab-reveal">{_rich(record.revealed)}</div>'
        return out
    if isinstance(record, Hint):
        colour = _COLOUR["shown"]
        if not record.total:
            body = "this exercise has no hints"
        else:
            body = "".join(f"<div><i>hint {i} of {record.total}:</i> {_e(h)}</div>"
                           for i, h in enumerate(record.shown, 1))
        return (f'<div class="tilelab-hint" data-exercise="{_e(record.exercise)}" data-number="{record.number}" '
                f'style="{_BOX.format(colour=colour)}"><b>{_e(record.exercise)}</b> {_e(record.title)}{body}</div>')
    if isinstance(record, Solution):
        colour = _COLOUR[record.status]
        head = (f'<b style="color:{colour}">{_e(record.exercise)}</b> {_e(record.title)}')
        if not record.shown:
            return (f'<div class="tilelab-solution" data-status="refused" style="{_BOX.format(colour=colour)}">'
                    f'{head}: {_e(record.text)}</div>')
        return (f'<div class="tilelab-solution" data-status="shown" style="{_BOX.format(colour=colour)}">{head}, '
                f'a solution:<pre style="margin:4px 0">{_e(record.text)}</pre></div>')
    if isinstance(record, Exercise):
        return f"<div><b>{_e(record.id)}</b> {_e(record.title)}: {_e(record.question)}</div>"
    if isinstance(record, Progress):
        return _progress_html(record)
    return f"<pre>{_e(repr(record))}</pre>"


def _rich(value: Any) -> str:
    """A revealed value's own HTML when it has one, else its text."""
    if isinstance(value, str):
        return f'<div style="padding:2px 12px">{_e(value)}</div>'
    method = getattr(value, "_repr_html_", None)
    if callable(method):
        try:
            out = method()
        except Exception:
            out = None
        if out:
            return out
    return f"<pre>{_e(repr(value))}</pre>"


def _progress_html(p: Progress) -> str:
    parts = ['<div class="tilelab-progress">']
    if p.notebook is not None:
        rows = "".join(
            f'<tr data-state="{_e(s.state)}"><td style="color:{_COLOUR[s.state]}">{_MARK[s.state]}</td>'
            f"<td>{_e(s.exercise)}</td><td>{_e(s.title)}</td><td>{_e(s.state)}</td>"
            f"<td>{s.tries}</td><td>{s.hints}</td></tr>" for s in p.of(p.notebook))
        parts.append(f"<b>notebook {_e(p.notebook)}</b><table><tr><th></th><th>exercise</th><th></th>"
                     f"<th>state</th><th>tries</th><th>hints</th></tr>{rows}</table>")
    rows = "".join(f"<tr><td>{_e(nb)}</td><td>{p.count('passed', nb)} of {len(p.of(nb))}</td>"
                   f"<td>{p.count('tried', nb)}</td></tr>" for nb in p.notebooks())
    parts.append(f"<b>the course</b>: {p.count('passed')} of {len(p.standings)} passed"
                 f"<table><tr><th>notebook</th><th>passed</th><th>tried</th></tr>{rows}</table></div>")
    return "".join(parts)


def _register() -> None:
    """Hand the course's records to tilelab's display dispatch (their text and HTML)."""
    from ..records.display import register

    for record in (Exercise, Check, Hint, Solution, Progress):
        register(record, {"text/plain": text, "text/html": html})


_register()
