"""The inspector without a browser: one static page of tabs, its bundle, its Timing and Diff tabs.

The inspector holds no widget model, so what a saved notebook or an export shows is exactly its
``text/html``; these tests read that markup.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import re

import pytest
from groundtruth import DRIVER_SWIZZLE, cython_tma_fields
from reports import gemm, hostile_report, parse

from tilelab import Inspector


def test_tabs_and_titles():
    report = gemm()
    view = Inspector(report)
    assert view.titles == ("Summary", "CUDA", "Launcher", "TMA (2)", "WGMMA (1)",
                           f"Layouts ({len(report.layouts)})", f"Arguments ({len(report.arguments)})")
    rid = view.anchor
    nav = re.search(r'<nav class="tl-tabs[^"]*"[^>]*>(.*?)</nav>', view.html).group(1)
    tabs = re.findall(r'<label for="([^"]+)">([^<]*)</label>', nav)
    assert [t for _, t in tabs] == list(view.titles)
    assert [h for h, _ in tabs] == [f"{rid}-t-{n}" for n in ("summary", "cuda", "launcher", "tma", "wgmma", "layouts",
                                                            "arguments")]
    launcher = view.tab("launcher")
    for item in report.sources.launchers:  # each launcher whole: drawn, or carried for its folded gaps
        packed = re.search(rf'id="{rid}-src-{item.backend}-0"[^>]* data-z="([^"]+)"', launcher)
        lines = parse(launcher).lines
        assert (gzip.decompress(base64.b64decode(packed.group(1))).decode() if packed
                else "\n".join(lines[f"{rid}-src-{item.backend}-0-L{n}"] for n in range(1, item.text.count("\n") + 2))
                ) == item.text


def test_tma_tab_rows_show_the_launchers_fields_and_short_excerpts():
    report = gemm()
    view = Inspector(report)
    tma = view.tab("TMA (2)")
    rid = view.anchor
    launcher = report.sources.launcher("cython").text
    ids = {a.get("id") for _, a in parse(view.html).tags if a.get("id")}
    for i, d in enumerate(report.tma_descriptors):
        fields = cython_tma_fields(launcher, d.name)
        row = re.search(rf'<tr id="{rid}-tma-{i}"[^>]*>(.*?)</tr>', tma, re.S).group(1)
        assert f'<span class="tl-box">{", ".join(map(str, fields["boxDim"]))}</span>' in row
        assert f"<td>{DRIVER_SWIZZLE[fields['swizzle']]}</td>" in row
        links = re.findall(r'href="#([^"]+)"', row)
        assert len(links) >= 5 and all(link in ids for link in links)  # every link lands on this page
    # one short excerpt per descriptor, only the first open, each under a dozen lines
    excerpts = re.findall(r'<details class="tl-sub"( open)?><summary>(\w+)</summary>(.*?)</details>', tma, re.S)
    assert [(o, n) for o, n, _ in excerpts] == [(" open", "A_desc"), ("", "B_desc")]
    for _, _, body in excerpts:
        for pre in re.findall(r'<pre class="tl-src".*?</pre>', body, re.S):
            assert 1 <= pre.count("\n</span>") <= 8
    # the encode excerpt is the driver call itself, not the argument packing before it
    first = re.findall(r'data-src="([^"]+)-x" data-first="(\d+)"', excerpts[0][2])
    assert first


def test_show_and_timing_tabs():
    class Result:
        def _repr_html_(self):
            return "<b>1.00 ms</b>"

    view = Inspector(hostile_report(), show="tma,summary", timing=[Result()])
    assert view.titles == ("TMA (1)", "Summary", "Timing")
    assert "<b>1.00 ms</b>" in view.tab("Timing")
    with pytest.raises(ValueError, match="choose from summary, cuda, launcher, tma"):
        Inspector(hostile_report(), show="tma,bogus")


def test_links_go_only_to_tabs_on_the_page():
    view = Inspector(gemm(), show="tma")
    tags = parse(view.html).tags
    ids = {a.get("id") for _, a in tags if a.get("id")}
    hrefs = [a["href"][1:] for t, a in tags if t == "a" and (a.get("href") or "").startswith("#")]
    assert hrefs and not [h for h in hrefs if h not in ids]


def test_absent_backend_has_its_reason():
    launcher = Inspector(hostile_report()).tab("launcher")
    assert "absent &mdash; ImportError: &lt;script&gt;" in launcher


def test_mimebundle_is_the_static_report_only():
    """No widget view: a saved notebook, a fresh kernel or an export shows the same page."""
    report = hostile_report()
    bundle = Inspector(report)._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    view = Inspector(report)
    assert bundle["text/html"] != view.html  # each displayed page has ids of its own (two of one kernel)
    shown = re.match(r'<div class="tilelab-report" id="([^"]+)"', bundle["text/html"]).group(1)
    def same(page: str, rid: str) -> str:  # the page less its ids and its compressed parts (which hold ids)
        return re.sub(r'data-zp?="[^"]*"', "", page.replace(rid, ""))

    assert same(bundle["text/html"], shown) == same(view.page, view.anchor)
    assert bundle["text/plain"].startswith("KernelReport ")
    tags = parse(bundle["text/html"]).tags
    assert not [t for t, _ in tags if t in ("script", "img")]
    assert [(t, k) for t, a in tags for k in a if k.startswith("on")] == [("div", "onclick")]  # the link follower


def test_every_in_page_link_resolves():
    class Result:
        def _repr_html_(self):
            return '<a href="https://example.com/x">docs</a>'

    for report in (gemm(), hostile_report()):
        page = Inspector(report, timing=[Result()], source="%%tilelang\nT.copy(A[0, 0], A_shared)\n").html
        tags = parse(page).tags
        ids = [a.get("id") for _, a in tags if a.get("id")]
        hrefs = [a["href"][1:] for t, a in tags if t == "a" and (a.get("href") or "").startswith("#")]
        assert hrefs and not [h for h in hrefs if h not in set(ids)]
        assert len(ids) == len(set(ids))


def test_static_bundle_carries_the_timing_results():
    class Result:
        def _repr_html_(self):
            return "<b>1.00 ms</b>"

    report = hostile_report()
    data = Inspector(report, timing=[Result()])._repr_mimebundle_()
    assert re.search(r'<h3 class="tl-ptitle"[^>]*>Timing</h3></summary><b>1.00 ms</b></details></section>',
                     data["text/html"])
    assert ">Timing</h3>" not in Inspector(report)._repr_mimebundle_()["text/html"]


def test_diff_tab_shows_what_changed_since_the_previous_run():
    report = gemm()
    kernel = report.kernels[0]
    before = dataclasses.replace(
        report, kernels=(dataclasses.replace(kernel, dynamic_shared_memory_bytes=32768),),
        sources=dataclasses.replace(report.sources, device=report.sources.device.replace("(k % 3)", "(k % 2)")))
    view = Inspector(report, previous=before)
    assert view.titles[-1] == "Diff"
    diff = view.tab("Diff")
    changed = sum(1 for line in report.sources.device.split("\n") if "(k % 3)" in line)
    assert f"<b>device CUDA</b>: {2 * changed} line(s) changed" in diff
    plain = re.sub(r"<(?!/?span class=\"g[di]\")[^>]+>", "", diff)  # the diff's code is coloured
    assert re.search(r'<span class="gd" data-n="\d+">-[^\n]*\(k % 2\)', plain)
    assert re.search(r'<span class="gi" data-n="\d+">\+[^\n]*\(k % 3\)', plain)
    # a diff reads as lines: each line of the <pre> is one block holding its whole source line
    pre = re.search(r'<pre class="tl-diff tl-src"[^>]*>(.*)</pre>', diff, re.S).group(1)
    blocks = _top_spans(pre)
    assert all(b.endswith("\n</span>") and b.count("\n") == 1 for b in blocks), blocks[:3]
    texts = [re.sub(r"<[^>]+>", "", b) for b in blocks]
    after = report.sources.device.split("\n")
    for block, text in zip(blocks, texts):
        n = re.match(r'<span[^>]* data-n="(\d*)"', block).group(1)
        if text.startswith((" ", "+")):  # numbered as this run's line, its whole text
            assert html.unescape(text[1:-1]) == after[int(n) - 1]
    # the changed value in the report's own words, before and after, with no cache-key noise
    name = kernel.name
    assert re.search(rf"<td>kernel {name}</td><td>dynamic shared memory</td><td><del>32768 B \(32 KiB\)</del></td>"
                     r'<td class="tl-diff-cell">49152 B \(48 KiB\)</td>', diff), diff[:600]
    assert "cache" not in diff.lower()
    # announced in the Summary and highlighted in the Summary's own table
    summary = view.tab("summary")
    assert "Changed since the previous run of this cell" in summary and f'href="#{view.anchor}-diff"' in summary
    assert '<span class="tl-diff-cell" title="previous run: 32768 B (32 KiB)">49152 B (48 KiB)</span>' in summary
    assert "Diff" not in Inspector(report, previous=report).titles  # the same report: nothing to compare


def _top_spans(markup: str) -> list[str]:
    """The top-level <span>...</span> elements of ``markup`` (nested spans inside them)."""
    out, depth, start = [], 0, 0
    for m in re.finditer(r"<span\b[^>]*>|</span>", markup):
        if m.group(0) == "</span>":
            depth -= 1
            if depth == 0:
                out.append(markup[start:m.end()])
        else:
            if depth == 0:
                start = m.start()
            depth += 1
    return out


def test_diff_highlights_a_changed_tma_box_in_the_tma_table():
    report = gemm()
    d = report.tma_descriptors[0]
    old = (64, 128) if tuple(d.box_dim) != (64, 128) else (32, 128)
    before = dataclasses.replace(report, tma_descriptors=(dataclasses.replace(d, box_dim=old),)
                                 + report.tma_descriptors[1:])
    was = ", ".join(map(str, old))
    view = Inspector(report, previous=before)
    row = re.search(rf'<tr id="{view.anchor}-tma-0"[^>]*>(.*?)</tr>', view.tab("tma"), re.S).group(1)
    want = ", ".join(map(str, d.box_dim))
    assert (f'<span class="tl-diff-cell" title="previous run: {was}"><span class="tl-box">{want}</span></span>'
            in row)
    assert f"<td>TMA {d.name}</td><td>box dim</td><td><del>{was}</del></td><td class=\"tl-diff-cell\">{want}</td>" \
        in view.tab("Diff")
    # the other descriptor did not change: nothing highlighted in its row
    other = re.search(rf'<tr id="{view.anchor}-tma-1"[^>]*>(.*?)</tr>', view.tab("tma"), re.S).group(1)
    assert "tl-diff-cell" not in other


def test_timing_of_several_sizes_adds_a_latency_plot():
    import base64

    from tilelab.launch import BenchResult
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


def test_the_readme_gemm_page_is_light():
    """The page weight target of the Hopper GEMM (the benchmark prints the figure)."""
    page = Inspector(gemm()).html
    assert len(page.encode()) <= 150 * 1024
    assert page.count("<") < 15000


def test_large_layouts_are_drawn_in_part_with_a_show_all_and_repeats_once():
    import tilelab
    from tilelab.render.html import section_body

    report = gemm()
    body = section_body(report, "layouts")
    frag = report.layout("C_local")
    part = re.search(r"<details class=\"tl-sub\"><summary>C_local .*?</details>", body, re.S).group(0)
    assert "showing rows 0-" in part and f"of {frag.shape[0]}x{frag.shape[1]}" in part
    assert "tilelab.draw(report.layout(&#x27;C_local&#x27;))" in part
    # the legend sits above each picture, not in small print under it
    assert part.index('<p class="tl-legend">each cell: the thread (T) and register (v)') < part.index("<svg")
    full = tilelab.draw(frag)
    shown = full._repr_html_()  # the picture where trusted, one line where a sanitiser strips SVG
    assert f'<div class="tl-pic-live" style="display:none">{full}</div>' in shown and "showing rows" not in full
    assert "trust the notebook" in re.sub(r"<svg.*</svg>", "", shown, flags=re.S)
    # a second buffer with the same layout is named, not drawn again
    a = report.layout("A_shared")
    twin = dataclasses.replace(a, buffer="A2_shared")
    body = section_body(dataclasses.replace(report, layouts=report.layouts + (twin,)), "layouts")
    assert "<td>A2_shared</td>" in body and "same layout as A_shared" in body
    assert body.count("<svg") == section_body(report, "layouts").count("<svg")


def test_each_drawn_layout_has_a_zoom_toggle_of_its_own():
    from tilelab.render.html import section_body

    body = section_body(gemm(), "layouts")
    ids = re.findall(r'<input type="checkbox" class="tl-zoom" id="([^"]+)"><label for="\1"', body)
    assert len(ids) == len(gemm().layouts) and len(set(ids)) == len(ids)
