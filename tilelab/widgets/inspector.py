"""``Inspector(report)``: the kernel inspector, one static HTML page of tabs (no widget model).

The page is :func:`tilelab.render.html.render_html`: tabs are links and CSS, so the same output
works live in JupyterLab, in a saved notebook reopened without its kernel, and in an ``nbconvert``
export with no network. (An ipywidgets view would take priority over the HTML in the output and
show "model not found" once its kernel is gone; the tabs never needed Python.) Its display
bundle is ``text/html`` and ``text/plain`` only, one copy of the report.

Tabs: Summary, Cell (when the source is given), CUDA (HIP, Metal or C for other targets), Launcher,
TMA, WGMMA, MFMA (AMD targets), Layouts, Arguments, the opt-in Lines, PTX, SASS (toolchain tier) and
IR passes when computed, Timeline when a timeline was measured, then Timing (launch results,
sanitizer reports), Profile (Nsight Compute profiles) and Diff (against the previous run of the
same cell) when given.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from ..records.kernel import KernelReport
from ..records.launch import BenchResult, Launches, RunResult, SanitizerReport
from ..records.profile import Profile
from ..records.tile_trace import TileTrace
from ..records.timeline import Timeline
from ..render import html as render
from ..render.profile import profile_html

TABS = render.SECTIONS


def parse_tabs(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"summary,tma"`` -> ("summary", "tma"); raises ValueError naming the valid tabs."""
    if spec is None:
        return TABS
    items = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    valid = render.sections()
    unknown = [s for s in items if s not in valid and s != "timing"]
    if unknown:
        raise ValueError(f"unknown tab(s) {', '.join(unknown)}; choose from {', '.join(TABS)} (comma-separated)")
    return tuple(s for s in items if s != "timing")


class Inspector:
    """Tabbed view of a :class:`KernelReport`.

    ``show`` picks and orders tabs (names from ``TABS``); ``launches`` (a cell's
    :class:`~tilelab.records.launch.Launches`) gives the Timing tab its sanitizer reports, runs and
    benches, the Profile tab its profiles and the Timeline tab its timelines; ``timing`` is the
    same as a list of launch results of any kind (what is of none of those kinds, anything with
    ``_repr_html_``, is shown in the Timing tab as is); ``source`` is the user's source text (the
    cell) whose T.copy / T.gemm lines link to what they made; ``previous`` is the report of the
    previous run of the same cell: a Diff tab shows what changed.
    """

    def __init__(self, report: KernelReport, *, show: Sequence[str] | str | None = None,
                 timing: Sequence[Any] = (), source: str | None = None,
                 previous: KernelReport | None = None, launches: Launches | None = None) -> None:
        self.report = report
        self.tabs = parse_tabs(show) if show is not None else None
        given, others = launches_of(timing)
        self.launches = given if launches is None else launches + given
        self.timelines = self.launches.timelines
        self.profiles = self.launches.profiles
        self.timing = (*self.launches.timing, *others)
        self.source = source
        self.previous = previous if previous is not None and previous != report else None
        extra = []
        self._cuda_anchors: set[int] = set()
        if self.timing:
            extra.append(("Timing", timing_html(self.timing, self._cuda_view())))
        if self.profiles:
            extra.append(("Profile", "".join(render.wrap(profile_html(p, report=report)) for p in self.profiles)))
        if self.previous is not None:
            extra.append(("Diff", diff_html(self.previous, report)))  # announced in the Summary too
        self.extra = tuple(extra)
        self._page: tuple[str, list[render.Panel]] | None = None
        self._html: str | None = None

    def _cuda_view(self) -> Any:
        """Where sanitizer findings link on this page: the CUDA tab's line anchors (when it is shown)."""
        names = self.tabs if self.tabs is not None else render.default_sections(
            self.report, self.source is not None, self.timelines)
        if "cuda" not in names:
            return None
        anchor = render.page_id(self.report, self.tabs, self.source, self.timelines)
        return (f"{anchor}-cuda", self.report.sources.device, self._cuda_anchors)

    def _panels(self) -> tuple[str, list[render.Panel]]:
        """The page's id and panels, built once (the page and each :meth:`tab` are made of them)."""
        if self._page is None:
            self._page = render.page_panels(
                self.report, sections=self.tabs, extra=self.extra, source=self.source,
                profile=self.profiles[0] if self.profiles else None, cuda_anchors=self._cuda_anchors,
                previous=self.previous, anchor=render.page_id(self.report, self.tabs, self.source, self.timelines),
                launched=self.timing, timelines=self.timelines)
        return self._page

    @property
    def html(self) -> str:
        if self._html is None:
            self._html = render.layout_page(self.report, *self._panels())
        return self._html

    @property
    def titles(self) -> tuple[str, ...]:
        names = self.tabs if self.tabs is not None else render.default_sections(
            self.report, self.source is not None, self.timelines)
        return (tuple(render.section_title(self.report, n, timelines=self.timelines) for n in names)
                + tuple(t for t, _ in self.extra))

    def tab(self, title_or_name: str) -> str:
        """The markup of one tab's panel, by its name ("tma") or its title ("TMA (2)")."""
        rid, panels = self._panels()
        wanted = title_or_name.lower()
        for n, panel in enumerate(panels):
            if wanted in (panel.slug, panel.title.lower()):
                return render.panel_html(rid, n, panel)
        raise KeyError(f"no tab {title_or_name!r}; have {list(self.titles)}")

    def close(self) -> None:
        """Nothing to release: the inspector holds no widget model (kept for older callers)."""

    def _repr_html_(self) -> str:
        return self.html

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        from ..render.text import render_text

        return {"text/html": self.html, "text/plain": render_text(self.report, source=self.source, launched=self.timing,
                                                                  timelines=self.timelines)}


def launches_of(results: Iterable[Any]) -> tuple[Launches, tuple[Any, ...]]:
    """Launch results of any kind (``Inspector(timing=...)``) as one :class:`Launches` record, by
    their types, and what is of none of its kinds."""
    kinds = {SanitizerReport: "sanitizer", RunResult: "runs", BenchResult: "benches", Profile: "profiles",
             Timeline: "timelines", TileTrace: "traces"}
    found: dict[str, list[Any]] = {kind: [] for kind in kinds.values()}
    others: list[Any] = []
    for result in results:
        kind = next((k for cls, k in kinds.items() if isinstance(result, cls)), None)
        (found[kind] if kind is not None else others).append(result)
    return Launches(**{kind: tuple(items) for kind, items in found.items()}), tuple(others)


def diff_html(before: KernelReport, after: KernelReport) -> str:
    """What changed between two runs of a cell: the changed values of the report's own tables
    (launch configuration, TMA descriptors, WGMMA instructions, layouts, arguments, problems),
    each as before -> after, then the device CUDA as a coloured unified diff (changed lines, three
    lines of context). Cache keys and versions are left out: they change with everything."""
    from ..render.html import report_changes

    changes = report_changes(before, after)
    parts = []
    if changes:
        rows = [[what, field, old, new] for what, field, old, new in changes]
        body = "".join(f"<tr><td>{render.esc(w)}</td><td>{render.esc(f)}</td><td><del>{render.esc(o)}</del></td>"
                       f'<td class="tl-diff-cell">{render.esc(n)}</td></tr>' for w, f, o, n in rows)
        parts.append(f"<p><b>report</b>: {len(changes)} value(s) changed (also highlighted in their own tabs)</p>"
                     '<div class="tl-scroll"><table class="tl-table tl-changes"><thead><tr><th>what</th><th>field</th>'
                     f"<th>previous run</th><th>this run</th></tr></thead><tbody>{body}</tbody></table></div>")
    else:
        parts.append("<p><b>report</b>: no value changed.</p>")
    a, b = before.sources.device.split("\n"), after.sources.device.split("\n")
    groups = list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3))
    if not groups:
        parts.append("<p><b>device CUDA</b>: unchanged.</p>")
        return "".join(parts)
    from ..render.code import colour_lines

    old, new = colour_lines(before.sources.device, "cuda"), colour_lines(after.sources.device, "cuda")
    out, changed = [], 0
    for group in groups:
        i1, j1 = group[0][1], group[0][3]
        out.append(f'<span class="tl-muted">@@ -{i1 + 1} +{j1 + 1} @@\n</span>')
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [f" {new[j]}\n" for j in range(j1, j2)]
                continue
            out += [f'<span class="gd">-{old[i]}\n</span>' for i in range(i1, i2)]
            out += [f'<span class="gi">+{new[j]}\n</span>' for j in range(j1, j2)]
            changed += (i2 - i1) + (j2 - j1)
    parts.append(f"<p><b>device CUDA</b>: {changed} line(s) changed</p>"
                 '<pre class="tl-diff tl-src" style="white-space:pre-wrap;overflow-wrap:anywhere;padding:4px 8px">'
                 f'{"".join(out)}</pre>')
    return "".join(parts)


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


def timing_html(results: Sequence[Any], cuda_view: Any = None) -> str:
    """Every launch result's HTML, then (for more than one timing) a latency-vs-size PNG.
    ``cuda_view`` (anchor prefix, device source, set of linked lines): sanitizer reports of that
    source link into the CUDA tab, and the lines they link to are added to the set."""
    from ..render.sanitizer import finding_lines, same_source, sanitizer_html

    parts = []
    for r in results:
        if cuda_view is not None and isinstance(r, SanitizerReport):
            parts.append(sanitizer_html(r, cuda_view[:2]))
            if same_source(r.source, cuda_view[1]):
                cuda_view[2].update(finding_lines(r))
        else:
            parts.append(_result_html(r))
    timed = [r for r in results if isinstance(r, BenchResult)]
    if len(timed) > 1:
        import base64

        from ..render.plots import figure_png

        png = base64.b64encode(figure_png(latency_figure(timed))).decode("ascii")
        parts.append(f'<img class="tl-latency" alt="median latency against size" src="data:image/png;base64,{png}">')
    return "".join(parts)


__all__ = ["Inspector", "TABS", "diff_html", "latency_figure", "launches_of", "parse_tabs", "timing_html"]
