"""The one display hook of every record: a mixin giving ``_repr_mimebundle_`` (and the
``_repr_html_``, ``_repr_png_`` and ``_repr_pretty_`` that IPython, nbconvert and the tests ask for
one at a time) from one dispatch in the render layer, :mod:`tilelab.render.display`. Rich's
``JupyterMixin`` is the model: a record never imports its renderers, and a new record is shown by
one entry in the dispatch.

This module imports nothing of tilelab when it is imported. The dispatch is imported when a record
is first shown: that import, in :func:`_dispatch`, is the one import from the records to the
renderers (``tests/test_layers.py`` holds it as the one exception to "no import circles").
"""

from __future__ import annotations

from typing import Any


def _dispatch() -> Any:
    from ..render import display  # the one named exception: records -> renderers, at display time

    return display


class Displayed:
    """A record that IPython shows through the render layer (text, HTML, PNG where drawn)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _dispatch().mimebundle(self, include=include, exclude=exclude)  # type: ignore[no-any-return]

    def _repr_html_(self) -> str | None:
        return _dispatch().render(self, "text/html")  # type: ignore[no-any-return]

    def _repr_png_(self) -> bytes | None:
        return _dispatch().render(self, "image/png")  # type: ignore[no-any-return]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self) if cycle else _dispatch().render(self, "text/plain"))


class DisplayedText(Displayed):
    """A record whose ``repr`` is its text rendering (declared ``@dataclass(repr=False)``)."""

    def __repr__(self) -> str:
        return _dispatch().render(self, "text/plain")  # type: ignore[no-any-return]
