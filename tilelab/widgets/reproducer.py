"""``ReproducerButton(err)``: a failed cell's button that shrinks it to a minimal reproducer.

A thin ipywidgets view over ``err.reproducer()`` (:mod:`tilelab.engine.reproducer`): one click
shrinks the failing kernel to a small standalone TileLang script that fails the same way, with the
progress on the line beside the button, then shows the script in a text box ready to copy and
writes it to a file of the notebook's folder (``tilelang_reproducer_<kernel>.py``; an existing
file is never overwritten), with the note that says how far it shrank or why it stopped. The
magic shows it under a lowering error that has a recipe; with no live kernel (a saved notebook)
its text line says how to get the same script by hand.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import ipywidgets as widgets

__all__ = ["ReproducerButton"]


class ReproducerButton:
    """The button, its progress line and the script's box for one ``LoweringError``.

    ``folder`` is where the script is written (the working folder: the notebook's), ``time_limit_s``
    the shrinking's limit. ``click()`` does what a click does (the tests' way in)."""

    def __init__(self, err: Any, *, folder: str | Path = ".", time_limit_s: float = 120.0) -> None:
        self.err = err
        self.folder = Path(folder).resolve()  # the notebook's folder when the cell failed
        self.time_limit_s = time_limit_s
        self.path: Path | None = None
        self.button = widgets.Button(description="Minimal reproducer", icon="compress",
                                     tooltip="shrink this kernel to a small standalone script that fails the same "
                                             "way, for a TileLang issue", layout=widgets.Layout(width="auto"))
        self.status = widgets.Label(value=f"shrinks the kernel (up to {time_limit_s:.0f} s) to a script failing "
                                          "the same way")
        self.script = widgets.Textarea(value="", layout=widgets.Layout(width="100%", height="16em",
                                                                       display="none"))
        self.button.on_click(lambda _button: self.click())
        self.view = widgets.VBox([widgets.HBox([self.button, self.status]), self.script])

    def click(self) -> None:
        """Shrink, show the script and write it to a new file; the button is off while it runs."""
        self.button.disabled = True
        try:
            rep: Any = self.err.reproducer(time_limit_s=self.time_limit_s, progress=self._progress)
        except Exception as exc:  # the view must say what happened, never lose the error it shows
            self.status.value = f"the reproducer failed: {type(exc).__name__}: {exc}"
            self.button.disabled = False
            return
        self.button.disabled = False
        if not rep.script:
            self.status.value = rep.note
            return
        self.path = self._new_path()
        self.path.write_text(rep.script)
        self.script.value = rep.script
        self.script.layout.display = None
        done = "fails the same way" if rep.reproduces else "the unshrunk kernel (it does not fail the same way)"
        self.status.value = (f"{rep.lines_after} lines, {done}; written to {self.path} (copy it from the box). "
                             f"{rep.note}")
        self.button.description = "Shrink again"

    def _progress(self, line: str) -> None:
        self.status.value = line

    def _new_path(self) -> Path:
        kernel = re.sub(r"\W+", "_", str(getattr(self.err, "kernel", "") or "kernel")).strip("_") or "kernel"
        path = self.folder / f"tilelang_reproducer_{kernel}.py"
        n = 2
        while path.exists():
            path = self.folder / f"tilelang_reproducer_{kernel}_{n}.py"
            n += 1
        return path

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.view._repr_mimebundle_() or {})
        bundle["text/plain"] = ("a minimal script failing the same way, for a TileLang issue: "
                                "import sys; print(sys.last_value.reproducer())")
        return bundle
