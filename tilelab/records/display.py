"""The one display hook of every record, and the one registry of their renderers.

:class:`Displayed` is a mixin giving ``_repr_mimebundle_`` (and the ``_repr_html_``, ``_repr_png_``
and ``_repr_pretty_`` that IPython, nbconvert and the tests ask for one at a time) from one
dispatch: :func:`mimebundle` and :func:`render` look the record's type up in the registry that
:func:`register` fills. As in pyinstrument, where a session never imports a renderer, a record
here never imports its renderers: each module of the render layer registers what it draws when
``tilelab.render`` is imported (as each tab registers itself with the inspector's page), and a
package above the render layer (the course) registers its own records the same way.

The render layer is loaded at the first display by the loader :func:`load_renderers_with` was
given: the package's face (``tilelab/__init__.py``) hands one over, so this module imports
nothing of tilelab, at import time or later, and no import circle runs through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MIME_TYPES = ("text/plain", "text/html", "image/png")

Renderer = Callable[[Any], Any]

_DRAWN_BY: dict[type, dict[str, Renderer]] = {}
_LOADERS: list[Callable[[], object]] = []


def register(record: type, drawn_by: dict[str, Renderer]) -> None:
    """Show records of type ``record`` with ``drawn_by`` ({MIME type: renderer ``record -> str``
    or PNG bytes}), added to what is registered for that type already (its text from one module,
    its HTML from another)."""
    unknown = set(drawn_by) - set(MIME_TYPES)
    if unknown:
        raise ValueError(f"register({record.__name__}, ...): unknown MIME type(s) {sorted(unknown)}; "
                         f"a record is drawn as {', '.join(MIME_TYPES)}")
    _DRAWN_BY.setdefault(record, {}).update(drawn_by)


def load_renderers_with(loader: Callable[[], object]) -> None:
    """Call ``loader`` (which imports the renderers, so that they register) before the first
    record is drawn."""
    _LOADERS.append(loader)


def renderers(record_type: type) -> dict[str, Renderer]:
    """{MIME type: renderer} for records of ``record_type``: its own entry, else its nearest base's."""
    while _LOADERS:
        _LOADERS.pop(0)()
    for cls in record_type.__mro__:
        if cls in _DRAWN_BY:
            return _DRAWN_BY[cls]
    return {}


def render(record: Any, mime: str) -> Any:
    """``record`` drawn as ``mime``; None when nothing draws it so. Text falls back to ``repr``."""
    drawn = renderers(type(record)).get(mime)
    if drawn is not None:
        return drawn(record)
    if mime != "text/plain":
        return None
    return object.__repr__(record) if isinstance(record, DisplayedText) else repr(record)


def mimebundle(record: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """IPython's ``_repr_mimebundle_``: every MIME type drawn for ``record`` that ``include`` (when
    given) names and ``exclude`` does not; drawings that come back empty (a figure matplotlib could
    not draw) are left out."""
    bundle: dict[str, Any] = {}
    for mime in MIME_TYPES:
        if (include and mime not in include) or (exclude and mime in exclude):
            continue
        value = render(record, mime)
        if value is not None:
            bundle[mime] = value
    return bundle


class Displayed:
    """A record that IPython shows through its registered renderers (text, HTML, PNG where drawn)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mimebundle(self, include=include, exclude=exclude)

    def _repr_html_(self) -> str | None:
        return render(self, "text/html")  # type: ignore[no-any-return]

    def _repr_png_(self) -> bytes | None:
        return render(self, "image/png")  # type: ignore[no-any-return]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self) if cycle else render(self, "text/plain"))


class DisplayedText(Displayed):
    """A record whose ``repr`` is its text rendering (declared ``@dataclass(repr=False)``)."""

    def __repr__(self) -> str:
        return render(self, "text/plain")  # type: ignore[no-any-return]
