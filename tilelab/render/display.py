"""The one dispatch from a record to its renderers: which function draws each record as text,
HTML and PNG. Every record's display hook (:class:`tilelab._display.Displayed`) asks here, so a new
record is shown by one entry in :func:`renderers` (and its renderers stay functions
``record -> str``, tested without IPython)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

MIME_TYPES = ("text/plain", "text/html", "image/png")

Renderer = Callable[[Any], Any]


@functools.cache
def renderers() -> dict[type, dict[str, Renderer]]:
    """Record type -> {MIME type: renderer}. Read once, on the first display (the renderers import
    what they draw with: the inspector page, matplotlib for figures)."""
    from .. import _launch_model as launch
    from .._model import KernelReport
    from .._timeline_model import Timeline
    from ..launch.tile_trace import TileTrace
    from ..profiling import Profile
    from ..targets import TargetComparison
    from . import html, profile, sanitizer, text, tiles
    from . import launch as launch_render
    from . import timeline as timeline_render
    from . import trace as trace_render

    return {
        KernelReport: {"text/plain": text.render_text, "text/html": html.displayed_html},
        TargetComparison: {"text/html": html.comparison_html},
        Profile: {"text/html": lambda p: html.wrap(profile.profile_html(p))},
        launch.TileMap: {"text/plain": tiles.tile_map_text, "text/html": tiles.tile_map_html},
        launch.RunResult: {"text/plain": launch_render.run_result_text, "text/html": launch_render.run_result_html},
        launch.BenchResult: {"text/plain": launch_render.bench_result_text,
                             "text/html": launch_render.bench_result_html,
                             "image/png": launch_render.bench_result_png},
        launch.Ceilings: {"text/plain": launch_render.ceilings_text, "text/html": launch_render.ceilings_html,
                          "image/png": launch_render.ceilings_png},
        launch.LaunchOverhead: {"text/plain": launch_render.overhead_text, "text/html": launch_render.overhead_html,
                                "image/png": launch_render.overhead_png},
        launch.SweepTable: {"text/plain": launch_render.sweep_table_text,
                            "text/html": launch_render.sweep_table_html,
                            "image/png": launch_render.sweep_table_png},
        launch.SanitizerReport: {"text/plain": sanitizer.sanitizer_text, "text/html": sanitizer.sanitizer_html},
        Timeline: {"text/html": timeline_render.timeline_html},
        TileTrace: {"text/plain": trace_render.tile_trace_text, "text/html": trace_render.tile_trace_html},
    }


_REGISTERED: dict[type, dict[str, Renderer]] = {}


def register(record: type, drawn_by: dict[str, Renderer]) -> None:
    """Show ``record`` (a type) with ``drawn_by`` ({MIME type: renderer}): for records of a package
    above the render layer (the course's), which hands its renderers here when it is imported."""
    _REGISTERED[record] = dict(drawn_by)


def _for(record: Any) -> dict[str, Renderer]:
    table = {**renderers(), **_REGISTERED}
    for cls in type(record).__mro__:
        if cls in table:
            return table[cls]
    return {}


def render(record: Any, mime: str) -> Any:
    """``record`` drawn as ``mime``; None when nothing draws it so. Text falls back to ``repr``."""
    drawn = _for(record).get(mime)
    if drawn is not None:
        return drawn(record)
    return repr(record) if mime == "text/plain" else None


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
