"""The inspector widget without a browser: its children, their values, titles and links.

ipywidgets runs here with no kernel (a dummy comm); the values are what the front end renders.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("ipywidgets")
import ipywidgets as widgets  # noqa: E402

from groundtruth import DRIVER_SWIZZLE, cython_tma_fields  # noqa: E402
from test_render_html import gemm, hostile_report, parse  # noqa: E402
from tilelab import Inspector  # noqa: E402
from tilelab.render.html import render_html, report_id  # noqa: E402


def test_tabs_and_titles():
    report = gemm()
    view = Inspector(report)
    assert isinstance(view, widgets.Tab)
    assert view.titles == ("Summary", "CUDA", "Launcher", "TMA (2)", "WGMMA (1)",
                           f"Layouts ({len(report.layouts)})", f"Arguments ({len(report.arguments)})")
    assert len(view.children) == 7
    launcher = view.tab("launcher")
    assert isinstance(launcher, widgets.Tab)
    assert launcher.titles == ("tvm_ffi", "cython", "nvrtc", "cutedsl")
    for child, item in zip(launcher.children, [report.sources.launcher(b) for b in launcher.titles]):
        assert isinstance(child, widgets.HTML)
        lines = parse(child.value).lines
        # the whole launcher, not an excerpt
        assert sum(1 for k in lines if k.endswith("-L1")) == 1 + len(item.extra)
        assert lines[[k for k in lines if k.endswith("-0-L1")][0]] == item.text.split("\n")[0]


def test_tma_tab_rows_link_to_excerpts_in_the_same_tab_and_back():
    report = gemm()
    tma = Inspector(report).tab("TMA (2)").value
    rid = report_id(report)
    launcher = report.sources.launcher("cython").text
    ids = {a.get("id") for _, a in parse(tma).tags if a.get("id")}
    lines = parse(tma).lines
    for i, d in enumerate(report.tma_descriptors):
        fields = cython_tma_fields(launcher, d.name)
        row = re.search(rf'<tr id="{rid}-tma-{i}"[^>]*>(.*?)</tr>', tma, re.S).group(1)
        assert f'<span class="tl-box">{", ".join(map(str, fields["boxDim"]))}</span>' in row
        assert f"<td>{DRIVER_SWIZZLE[fields['swizzle']]}</td>" in row
        links = re.findall(r'href="#([^"]+-L(\d+))"', row)
        assert len(links) >= 5
        for anchor, number in links:
            assert anchor in ids  # the excerpt is in this tab, so the link works in the widget
            backend = re.match(rf"{rid}-x-(\w+?)-(\d+)-L", anchor)
            if backend.group(1) == "cython":
                assert lines[anchor] == launcher.split("\n")[int(number) - 1]  # real line number, real text
        assert f'href="#{rid}-tma-{i}"' in tma.split("</table>", 1)[1]  # excerpts link back


def test_show_and_timing_tabs():
    class Result:
        def _repr_html_(self):
            return "<b>1.00 ms</b>"

    view = Inspector(hostile_report(), show="tma,summary", timing=[Result()])
    assert view.titles == ("TMA (1)", "Summary", "Timing")
    assert "<b>1.00 ms</b>" in view.children[2].value
    with pytest.raises(ValueError, match="choose from summary, cuda, launcher, tma"):
        Inspector(hostile_report(), show="tma,bogus")


def test_absent_backend_has_its_reason():
    view = Inspector(hostile_report())
    launcher = view.tab("launcher")
    assert launcher.titles[2] == "nvrtc (absent)"
    assert "absent &mdash; ImportError: &lt;script&gt;" in launcher.children[2].value


def test_every_child_is_escaped():
    view = Inspector(hostile_report())

    def values(w):
        if isinstance(w, widgets.HTML):
            yield w.value
        for child in getattr(w, "children", ()):
            yield from values(child)

    for value in values(view):
        tags = parse(value).tags
        assert not [t for t, _ in tags if t in ("script", "img")]
        assert not [k for _, a in tags for k in a if k.startswith("on")]


def test_mimebundle_carries_the_static_report():
    report = hostile_report()
    bundle = Inspector(report)._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == render_html(report)
    assert data["text/plain"].startswith("KernelReport ")


def _html_children(w, path=()):
    """(tab path, HTML value) of every HTML view inside ``w``."""
    if isinstance(w, widgets.HTML):
        yield path, w.value
    titles = getattr(w, "titles", ()) or ()
    for i, child in enumerate(getattr(w, "children", ())):
        yield from _html_children(child, path + ((titles[i] if i < len(titles) else str(i)),))


def test_every_in_page_link_of_each_tab_resolves_in_that_tab():
    """A tab hides the others: a link may only point at an anchor of its own tab."""
    class Result:
        def _repr_html_(self):
            return '<a href="https://example.com/x">docs</a>'

    for report in (gemm(), hostile_report()):
        view = Inspector(report, timing=[Result()])
        checked = 0
        for path, value in _html_children(view):
            tags = parse(value).tags
            ids = {a.get("id") for _, a in tags if a.get("id")}
            hrefs = [a["href"][1:] for t, a in tags if t == "a" and (a.get("href") or "").startswith("#")]
            dangling = [h for h in hrefs if h not in ids]
            assert not dangling, (path, dangling[:3])
            checked += len(hrefs)
        assert checked > 0
    # The launcher code still marks the lines that encode each descriptor, without the links.
    report = gemm()
    cython = Inspector(report).tab("launcher").children[1].value
    assert cython.count("tl-line tl-mark") >= 2 and 'class="tl-back"' not in cython
    # ... which the single-page static report keeps, where the TMA rows are on the same page.
    assert 'class="tl-back" href="#' in render_html(report)


def test_static_bundle_carries_the_timing_results():
    class Result:
        def _repr_html_(self):
            return "<b>1.00 ms</b>"

    report = hostile_report()
    view = Inspector(report, timing=[Result()])
    data = view._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert "<b>1.00 ms</b>" in data["text/html"]
    assert re.search(r"<summary>Timing</summary><b>1.00 ms</b></details>", data["text/html"])
    plain = Inspector(report)._repr_mimebundle_()
    plain = plain[0] if isinstance(plain, tuple) else plain
    assert "<summary>Timing</summary>" not in plain["text/html"]


def test_timing_of_several_sizes_adds_a_latency_plot():
    import base64

    from tilelab.launch.models import BenchResult
    from tilelab.widgets.inspector import latency_figure, timing_html

    results = [BenchResult(kernel="gemm", samples_ms=(m / 1000,) * 3, sizes=(("M", m),)) for m in (1024, 2048, 4096)]
    page = timing_html(results)
    assert page.count("<b>gemm</b>") == 3
    png = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")
    fig = latency_figure(results)
    ax = fig.axes[0]
    assert list(ax.lines[0].get_ydata()) == [1.024, 2.048, 4.096]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["M=1024", "M=2048", "M=4096"]
    assert "data:image/png" not in timing_html(results[:1])  # one size: no plot


def test_close_closes_every_inner_widget():
    view = Inspector(gemm())
    inner = [view, *view.children, *view.tab("launcher").children]
    assert all(w.comm is not None for w in inner)
    view.close()
    assert all(w.comm is None for w in inner)
