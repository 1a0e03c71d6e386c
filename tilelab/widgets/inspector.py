"""``Inspector(report)``: the kernel inspector, a thin ``ipywidgets.Tab`` over the HTML renderers.

Tabs: Summary, CUDA, Launcher (one sub-tab per execution backend), TMA, WGMMA, Layouts,
Arguments, and Timing when launch results are given. Every tab's content is the markup of
``tilelab.render.html``; the widget adds no logic of its own. Its mime bundle also carries the
full static ``text/html`` report, so a saved notebook shows it where widgets do not run
(GitHub, nbviewer, nbconvert).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import ipywidgets as widgets

from .._model import KernelReport
from ..render import html as render

TABS = ("summary", "cuda", "launcher", "tma", "wgmma", "mfma", "layouts", "arguments", "lines", "ptx", "sass", "ir")


def parse_tabs(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"summary,tma"`` -> ("summary", "tma"); raises ValueError naming the valid tabs."""
    if spec is None:
        return TABS
    items = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [s for s in items if s not in TABS and s != "timing"]
    if unknown:
        raise ValueError(f"unknown tab(s) {', '.join(unknown)}; choose from {', '.join(TABS)} (comma-separated)")
    return tuple(s for s in items if s != "timing")


class Inspector(widgets.Tab):
    """Tabbed view of a :class:`KernelReport`.

    ``show`` picks and orders tabs (names from ``TABS``); ``timing`` is a list of launch results
    (anything with ``_repr_html_``) shown in a Timing tab.
    """

    def __init__(self, report: KernelReport, *, show: Sequence[str] | str | None = None,
                 timing: Sequence[Any] = (), **kwargs: Any) -> None:
        self.report = report
        self.tabs = parse_tabs(show) if show is not None else render.default_sections(report)
        children, titles = [], []
        for name in self.tabs:
            children.append(self._view(name))
            titles.append(render.section_title(report, name))
        # Nsight Compute profiles (anything carrying a .profile) get their own tab.
        self.profiles = tuple(t for t in timing if hasattr(t, "profile"))
        self.timing = tuple(t for t in timing if not hasattr(t, "profile"))
        if self.timing:
            children.append(widgets.HTML(render.wrap(timing_html(self.timing))))
            titles.append("Timing")
        if self.profiles:
            children.append(widgets.HTML(render.wrap(timing_html(self.profiles))))
            titles.append("Profile")
        super().__init__(children=children, **kwargs)
        self.titles = tuple(titles)
        self.add_class("tilelab-inspector")

    def _view(self, name: str) -> widgets.Widget:
        if name == "launcher":
            # No back links to TMA rows here: they live in the TMA tab, hidden while this one shows.
            subs = [widgets.HTML(render.wrap(render.launcher_html(self.report, b, back_links=False)))
                    for b in self.report.launcher_backends]
            tab = widgets.Tab(children=subs)
            tab.titles = tuple(_backend_title(self.report, b) for b in self.report.launcher_backends)
            return tab
        if name == "tma":
            return widgets.HTML(render.wrap(render.tma_html(self.report, excerpts=True)))
        return widgets.HTML(render.render_section(self.report, name, cross_links=False))

    def tab(self, title_or_name: str) -> widgets.Widget:
        """The child widget of a tab, by its name ("tma") or its title ("TMA (2)")."""
        for i, name in enumerate(self.tabs):
            if title_or_name in (name, self.titles[i]):
                return self.children[i]
        for i, title in enumerate(self.titles):
            if title_or_name == title or title.lower() == title_or_name.lower():
                return self.children[i]
        raise KeyError(f"no tab {title_or_name!r}; have {list(self.titles)}")

    def close(self) -> None:
        """Close this view and every widget inside it (the launcher sub-tabs too)."""
        stack = list(self.children)
        while stack:
            child = stack.pop()
            stack += list(getattr(child, "children", ()) or ())
            child.close()
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):  # (data, metadata)
            data, metadata = bundle
        else:
            data, metadata = bundle, None
        data = dict(data or {})
        extra = ((("Timing", timing_html(self.timing)),) if self.timing else ()) + \
            ((("Profile", timing_html(self.profiles)),) if self.profiles else ())
        data["text/html"] = render.render_html(self.report, extra=extra)
        from ..render.text import render_text

        data["text/plain"] = render_text(self.report)
        return (data, metadata) if metadata is not None else data


def _backend_title(report: KernelReport, backend: str) -> str:
    item = report.sources.launcher(backend)
    return backend if item is not None and item.text is not None else f"{backend} (absent)"


def _result_html(result: Any) -> str:
    rich = getattr(result, "_repr_html_", None)
    if callable(rich):
        return str(rich())
    return f"<pre>{render.esc(result)}</pre>"


def _size_label(result: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in getattr(result, "sizes", ())) or "-"


def latency_figure(results: Sequence[Any]):
    """Median latency of each timing result (anything with ``median_ms`` and ``sizes``) against
    its sizes, in the order given: a matplotlib Figure, built without pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = list(range(len(results)))
    ax.plot(xs, [r.median_ms for r in results], "-o", markersize=4)
    ax.set_xticks(xs, [_size_label(r) for r in results], fontsize=8, rotation=20)
    ax.set_xlabel("sizes")
    ax.set_ylabel("median ms")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{getattr(results[0], 'kernel', 'kernel')}: latency against size", fontsize=10)
    return fig


def timing_html(results: Sequence[Any]) -> str:
    """Every launch result's HTML, then (for more than one timing) a latency-vs-size PNG."""
    parts = [_result_html(r) for r in results]
    timed = [r for r in results if hasattr(r, "median_ms") and hasattr(r, "sizes")]
    if len(timed) > 1:
        import base64

        from ..render.plots import figure_png

        png = base64.b64encode(figure_png(latency_figure(timed))).decode("ascii")
        parts.append(f'<img class="tl-latency" alt="median latency against size" src="data:image/png;base64,{png}">')
    return "".join(parts)


__all__ = ["Inspector", "TABS", "latency_figure", "parse_tabs", "timing_html"]
