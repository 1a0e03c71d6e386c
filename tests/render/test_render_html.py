"""The static HTML report (tilelab.render.html), checked on strings with no IPython at all.

Expected values come from the report's own source texts (the cython launcher and the device CUDA
parsed by tests/groundtruth.py), never from the renderer. Escaping is checked with a report whose
every user- or compiler-provided string is hostile markup.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import re
import sys
from pathlib import Path

import pytest
from groundtruth import DRIVER_SWIZZLE, cython_tma_fields, device_wgmma
from reports import IMG, SCRIPT, gemm, hostile_report, parse, stripped_lines

from tilelab.render import html as render_module
from tilelab.render.html import SECTIONS, default_sections, render_html, report_id, section_body
from tilelab.render.page import STYLED_ROOT

# ---------------------------------------------------------------------------------------------


def test_tma_rows_show_the_launchers_box_dims_and_swizzle():
    report = gemm()
    out = render_html(report)
    launcher = report.sources.launcher("cython").text
    names = re.findall(r"CUtensorMap (\w+);", launcher)
    assert names == ["A_desc", "B_desc"]
    for name in names:
        fields = cython_tma_fields(launcher, name)
        row = re.search(rf'<tr id="[^"]+" data-descriptor="{name}">(.*?)</tr>', out, re.S)
        assert row, name
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
        box = re.search(r'<span class="tl-box">([^<]*)</span>', row.group(1)).group(1)
        assert box == ", ".join(str(v) for v in fields["boxDim"])
        assert DRIVER_SWIZZLE[fields["swizzle"]] in cells
        assert ", ".join(str(v) for v in fields["globalDim"]) in cells


def test_every_tma_row_links_to_its_encode_lines_and_back():
    report = gemm()
    out = render_html(report)
    rid = report_id(report)
    ids = {a.get("id") for _, a in parse(out).tags if a.get("id")}
    launchers = {item.backend: item for item in report.sources.launchers}
    for i, desc in enumerate(report.tma_descriptors):
        row_id = f"{rid}-tma-{i}"
        assert row_id in ids
        row = re.search(rf'<tr id="{row_id}"[^>]*>(.*?)</tr>', out, re.S).group(1)
        hrefs = re.findall(r'href="#([^"]+)"', row)
        targets = [h for h in hrefs if "-src-" in h]
        backends = {re.match(rf"{rid}-src-(\w+?)-\d+-L\d+$", h).group(1) for h in targets}
        assert {"tvm_ffi", "cython", "nvrtc", "cutedsl"} <= backends
        for href in targets:
            assert href in ids, f"dangling link {href}"
            m = re.match(rf"{rid}-src-(\w+?)-(\d+)-L(\d+)$", href)
            backend, part, call = m.group(1), int(m.group(2)), int(m.group(3))
            item = launchers[backend]
            text = item.text if part == 0 else item.extra[part - 1][1]
            first, last = (int(n) for n in re.search(rf'#{href}">[^<]*L(\d+)&ndash;(\d+)', row).groups())
            span = "\n".join(text.split("\n")[first - 1:last])
            # The range named is the encode call for this descriptor, in the source text itself, and
            # the link lands on the driver call, not on the argument packing before it.
            encode = r"cuTensorMapEncodeTiled|create_tensor_map_tiled|__tvm_tensormap_create_tiled"
            assert first <= call <= last and re.search(encode, text.split("\n")[call - 1]), (backend, call)
            assert re.search(encode, span), (backend, span)
            assert desc.name in span or f"Descriptor {i}" in span
            other = report.tma_descriptors[1 - i].name
            assert other not in span, (backend, span)
            # ... and that line links back to the row.
            line = re.search(rf'<span class="tl-mark" id="{href}">(.*?)\n</span>', out, re.S)
            assert line and f'href="#{row_id}"' in line.group(0), href


def test_sources_are_complete_and_each_section_is_a_tab():
    report = gemm()
    out = render_html(report)
    rid = report_id(report)
    lines = parse(out).lines
    texts = [(f"{rid}-cuda", report.sources.device, True)]
    first = report.launcher_backends[0]
    for item in report.sources.launchers:
        if item.text is not None:
            texts.append((f"{rid}-src-{item.backend}-0", item.text, item.backend == first))
        for p, (_, extra) in enumerate(item.extra, 1):
            texts.append((f"{rid}-src-{item.backend}-{p}", extra, False))
    assert len(texts) >= 7
    in_part = 0
    for prefix, text, whole in texts:
        source_lines = text.split("\n")
        drawn = [n for n in range(1, len(source_lines) + 1) if f"{prefix}-L{n}" in lines]
        for n in drawn:  # every line drawn is the source's line of that number
            assert lines[f"{prefix}-L{n}"] == source_lines[n - 1], (prefix, n)
        assert f"{prefix}-L{len(source_lines) + 1}" not in lines
        if len(source_lines) <= 100 or len(drawn) == len(source_lines):  # short, or all launches and encodes
            assert len(drawn) == len(source_lines), prefix
            continue
        # A long launcher (the open one too) opens at its kernel launches and TMA encode calls; every
        # line left out is in a folded gap that names its lines, and the block carries the whole
        # text (gzip, base64) from which the page draws a gap when it is opened.
        start = out.index(f'<details class="tl-sub" id="{prefix}"')
        end = min(i for i in (out.find('<details class="tl-sub" id=', start + 1), out.find("</section>", start))
                  if i > 0)
        block = re.match(r'<details class="tl-sub" id="[^"]+"( open)? data-z="([^"]+)">(.*)', out[start:end], re.S)
        assert block, prefix
        assert (block.group(1) is not None) == whole, prefix
        assert gzip.decompress(base64.b64decode(block.group(2))).decode() == text, prefix
        body = block.group(3)
        assert "drawn in part: its kernel launches and TMA encodes" in body
        expr = html.unescape(re.search(r"Show all: <code>print\((.*?)\)</code>", body).group(1))
        assert eval(expr, {"report": report}) == text  # the show-all expression gives the whole text
        gaps = [(int(a), int(n)) for a, n in re.findall(
            r'<details class="tl-gap"><summary>&#8942; lines \d+&ndash;\d+</summary><pre class="tl-src" '
            r'data-first="(\d+)" data-lines="(\d+)"></pre></details>', body)]
        missing = sorted(set(range(1, len(source_lines) + 1)) - set(drawn))
        assert missing and sorted(n for a, k in gaps for n in range(a, a + k)) == missing, prefix
        calls = [n for n, line in enumerate(source_lines, 1)
                 if re.search(r"cuTensorMapEncodeTiled\(|cuLaunchKernel\(|cudaLaunchKernelEx\("
                              r"|create_tensor_map_tiled\(|"
                              r"TVMFFIFunctionCall\((?:__tvm_tensormap_create_tiled|gemm_kernel)_packed", line)]
        assert calls and set(calls) <= set(drawn), prefix
        assert len(drawn) < 0.7 * len(source_lines), prefix  # it opens at those calls, not at the boilerplate
        in_part += len(calls)
    assert in_part >= 3  # the cutedsl C++ launcher's two encodes and its launch, at least
    # One tab link and one panel per section, the first launcher open, the CUDA not folded; the
    # opt-in tiers (toolchain, IR passes) and MFMA (AMD targets) only when they were computed.
    tabs = re.search(r'<nav class="tl-tabs tl-t" style="display:none">(.*?)</nav>', out).group(1)
    for name in SECTIONS:
        shown = name in default_sections(report) and name not in ("lines", "ptx", "sass", "ir", "mfma")
        assert (f'<label for="{rid}-t-{name}">' in tabs) == shown, name
        assert (f'<section class="tl-panel" id="{rid}-{name}" data-tab="{rid}-t-{name}">' in out) == shown, name
        radio = rf'<input type="radio" class="tl-radio tl-t" name="{rid}-tabs" id="{rid}-t-{name}"'
        assert bool(re.search(radio, out)) == shown
    # the first tab's radio is the checked one; CSS shows the panel of the checked radio
    assert out.count(" checked ") == 1 and f'id="{rid}-t-summary" checked' in out
    assert (f"#{rid}-t-tma:checked~.tl-panels>#{rid}-tma{{" in out
            or f"#{rid}-t-tma:checked~.tl-panels>#{rid}-tma," in out)
    assert re.search(rf'<details class="tl-sub" id="{rid}-src-tvm_ffi-0" open[ >]', out)
    cuda = re.search(rf'<section class="tl-panel" id="{rid}-cuda"[^>]*>(.*?)</section>', out, re.S).group(1)
    assert cuda.count("<details") == 1 and f'data-src="{rid}-cuda"' in cuda  # its own fold only
    assert "<script" not in out.lower()


def test_descriptors_and_wgmma_link_to_their_device_lines_and_back():
    report = gemm()
    out = render_html(report)
    rid = report_id(report)
    device = report.sources.device.split("\n")
    for i, desc in enumerate(report.tma_descriptors):
        row = re.search(rf'<tr id="{rid}-tma-{i}"[^>]*>(.*?)</tr>', out, re.S).group(1)
        uses = [int(n) for n in re.findall(rf'href="#{rid}-cuda-L(\d+)"', row)]
        # the device code's own tma_load of this descriptor (read from the text, not from the report)
        loads = [n for n, line in enumerate(device, 1) if re.search(rf"tma_load\({desc.name}\b", line)]
        assert loads and set(loads) <= set(uses)
        for n in uses:
            assert re.search(rf"\b{desc.name}\b", device[n - 1])
            line = re.search(rf'<span class="tl-mark" id="{rid}-cuda-L{n}">(.*?)\n</span>', out, re.S).group(1)
            assert f'href="#{rid}-tma-{i}"' in line
    row = re.search(rf'<tr id="{rid}-wgmma-0"[^>]*>(.*?)</tr>', out, re.S).group(1)
    issues = [n for n, line in enumerate(device, 1) if "tl::wgmma_ss<" in line]
    linked = [int(n) for n in re.findall(rf'href="#{rid}-cuda-L(\d+)"', row)]
    assert issues and set(issues) <= set(linked)


def test_a_source_text_adds_the_cell_tab_linked_both_ways():
    report = gemm()
    cell = Path(__file__).resolve().parents[2].joinpath("tilelab", "kernels", "gemm.py").read_text()
    out = render_html(report, source=cell)
    rid = report_id(report)
    lines = cell.split("\n")
    assert f'<label for="{rid}-t-cell">Cell</label>' in out
    for i, desc in enumerate(report.tma_descriptors):
        row = re.search(rf'<tr id="{rid}-tma-{i}"[^>]*>(.*?)</tr>', out, re.S).group(1)
        asked = [int(n) for n in re.findall(rf'href="#{rid}-cell-L(\d+)"', row)]
        assert asked, desc.name
        for n in asked:
            assert re.match(rf"\s*T\.copy\({desc.buffer}\[", lines[n - 1]), lines[n - 1]
            mark = re.search(rf'<span class="tl-mark" id="{rid}-cell-L{n}">(.*?)\n</span>', out, re.S).group(1)
            assert f'href="#{rid}-tma-{i}"' in mark
    row = re.search(rf'<tr id="{rid}-wgmma-0"[^>]*>(.*?)</tr>', out, re.S).group(1)
    gemm_lines = [int(n) for n in re.findall(rf'href="#{rid}-cell-L(\d+)"', row)]
    assert gemm_lines and all("T.gemm(" in lines[n - 1] for n in gemm_lines)
    # without a source there is no Cell tab and no link to one
    assert f"{rid}-cell" not in render_html(report)


def test_summary_explains_the_block_size_and_the_instruction_shape():
    report = gemm()
    body = section_body(report, "summary")
    k = report.kernels[0]
    frag = next(lay for lay in report.layouts if lay.scope == "fragment")
    # TileLang's producer warp group: threads below the consumers' first thread
    assert frag.thread_base == 128 and k.threads_per_block == 384
    assert "block 384 = the 256 threads the kernel asks for" in body and "producer warp group" in body
    w = report.wgmma[0]
    assert (f"{w.instruction}: the 128x128 accumulator {frag.buffer} is split over 2 consumer warp group(s)"
            in body) and "= 2 x m64n64" in body


def test_summary_figures_come_from_the_launcher():
    from groundtruth import cython_launch

    report = gemm()
    body = section_body(report, "summary")
    launch = cython_launch(report.sources.launcher("cython").text, report.kernels[0].name)
    assert f"<td>{', '.join(launch['grid'])}</td>" in body
    assert f"<td>{', '.join(launch['block'])}</td>" in body
    assert f"{launch['smem']} B" in body
    assert "<td>TMA descriptors</td><td>2</td>" in body


def test_wgmma_section_matches_the_device_code():
    report = gemm()
    body = section_body(report, "wgmma")
    truth = device_wgmma(report.sources.device)
    assert truth["forms"]
    for form in truth["forms"]:
        assert f"<td>{form['instruction']}</td>" in body
    for desc in truth["descriptors"].values():
        row = re.search(rf"<tr><td>[^<]*</td><td>[AB]</td><td>{desc['buffer']}</td>(.*?)</tr>", body)
        assert row, desc
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
        assert cells[0] == str(desc["layout_type"]) and cells[2] == str(desc["lbo"]) and cells[4] == str(desc["sbo"])


def test_css_is_scoped_and_uses_jupyterlab_variables_with_fallbacks():
    out = render_html(gemm())
    assert out.startswith('<div class="tilelab-report"')
    style = re.search(r"<style>(.*?)</style>", out, re.S).group(1)
    assert "var(--jp-layout-color1,#fff)" in style and "var(--jp-ui-font-color1,#222)" in style
    for rule in re.findall(r"([^{}]+)\{", style):
        if rule.strip().startswith("@supports"):
            continue
        depth, selectors, current = 0, [], ""
        for ch in rule:  # split at top-level commas only (":has(a, b)" is one selector)
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                selectors.append(current)
                current = ""
            else:
                current += ch
        for selector in selectors + [current]:
            assert selector.strip().startswith(".tilelab-report"), selector
    # every var() has a fallback, so the page reads outside Jupyter
    assert not re.findall(r"var\(--[\w-]+\)", style)


@pytest.mark.parametrize("renderer", ["full", "standalone", *SECTIONS])
def test_hostile_strings_are_escaped(renderer):
    report = hostile_report()
    if renderer == "full":
        out = render_html(report)
    elif renderer == "standalone":
        out = render_html(report, standalone=True)
    else:
        out = section_body(report, renderer)
    tags = parse(out).tags
    assert not [t for t, _ in tags if t in ("script", "img")]
    # the only handler is the page's own link follower, on its root, never text from the report
    handlers = [(t, k, v) for t, a in tags for k, v in a.items() if k.startswith("on")]
    assert all(t == "div" and k == "onclick" and v == html.unescape(render_module._FOLLOW_JS) for t, k, v in handlers)
    assert "<script>alert" not in out and "<img" not in out


def test_hostile_strings_still_read_as_text():
    out = render_html(hostile_report())
    assert html.escape(SCRIPT) in out
    assert html.escape(IMG) in out
    assert html.escape(f"inner box of {SCRIPT} exceeds the swizzle span") in out
    # a hostile comment in a source line comes back exactly as the source had it
    rid = report_id(hostile_report())
    assert parse(out).lines[f"{rid}-cuda-L1"] == f"// kernel comment {SCRIPT}"


def test_problems_are_highlighted_and_absent_launchers_give_their_reason():
    report = hostile_report()
    out = render_html(report)
    row = re.search(r'<tr id="[^"]+" class="tl-problem" data-descriptor="A_desc">(.*?)</tr>', out, re.S)
    assert row and "exceeds the swizzle span" in row.group(1)
    assert '<ul class="tl-problems"><li>&#9888; A_desc: inner box of' in out
    assert f"<b>nvrtc</b>: absent &mdash; ImportError: {html.escape(SCRIPT)}" in out
    # the hand-built launcher's encode lines (2-6) link back to the row
    rid = report_id(report)
    assert f'href="#{rid}-src-cython-0-L4">cython L2&ndash;6</a>' in out  # the cuTensorMapEncodeTiled line


def test_layouts_use_the_svg_drawing_or_fall_back_to_a_table(monkeypatch):
    report = hostile_report()
    body = section_body(report, "layouts")
    assert "<svg" in body
    monkeypatch.setitem(sys.modules, "tilelab.render.svg", None)  # import fails
    from tilelab.render import html as render

    fallback = (render.layouts_html.__wrapped__(report) if hasattr(render.layouts_html, "__wrapped__")
                else render.layouts_html(report))
    cells = re.findall(r"<td>(\d+)</td>", fallback)
    assert cells == ["0", "1", "3", "2"]  # the offsets, row by row


def test_unknown_section_lists_the_valid_ones():
    with pytest.raises(ValueError, match="choose from summary, cuda, launcher, tma, wgmma, mfma, layouts, arguments"):
        render_html(hostile_report(), sections=["nope"])


def test_report_repr_html_is_render_html_with_ids_of_its_own():
    report = hostile_report()
    shown, again = report._repr_html_(), report._repr_mimebundle_()["text/html"]
    ids = [re.match(r'<div class="tilelab-report" id="([^"]+)"', page).group(1) for page in (shown, again)]
    assert ids[0] != ids[1] and all(i.startswith(report_id(report)) for i in ids)  # the report shown twice
    for page, rid in zip((shown, again), ids):
        assert page == render_html(report, anchor=rid, lazy=True)


def test_sources_read_line_by_line_without_styles():
    """GitHub and nbviewer drop <style>: the code must still be one source line per line."""
    from tilelab.render.code import highlight_code

    report = gemm()
    out = render_html(report)
    sources = {"cuda": report.sources.device, "cython": report.sources.launcher("cython").text,
               "tvm_ffi": report.sources.launcher("tvm_ffi").text}
    rid = report_id(report)
    prefixes = {"cuda": f"{rid}-cuda", "cython": f"{rid}-src-cython-0", "tvm_ffi": f"{rid}-src-tvm_ffi-0"}
    names = [d.name for d in report.tma_descriptors] + [w.instruction for w in report.wgmma]
    for key, text in sources.items():
        source = text.split("\n")
        # a launcher drawn in part is several <pre>s, each numbered from its first line
        pres = re.findall(rf'<pre class="tl-src" data-src="{prefixes[key]}" data-first="(\d+)"[^>]*>.*?</pre>',
                          out, re.S)
        blocks = re.findall(rf'(<pre class="tl-src" data-src="{prefixes[key]}"[^>]*>.*?</pre>)', out, re.S)
        assert pres and len(pres) == len(blocks), key
        if key == "cuda":
            assert pres == ["1"], key  # the CUDA: one block, every line
        covered = 0
        for first, block in zip(pres, blocks):
            shown = stripped_lines(block)
            assert shown[-1] == "", key  # one newline per line
            covered += len(shown) - 1
            for n, got in enumerate(shown[:-1], int(first)):
                want = source[n - 1]
                # the line itself, then any back link ("↩ A_desc") on marked lines; numbers are CSS
                assert got.startswith(want), (key, n, got, want)
                rest = got[len(want):]
                assert rest == "" or re.fullmatch("(\u21a9 (" + "|".join(names) + "))+", rest), (key, n, rest)
        assert covered == len(source) or key != "cuda", key
    # plain text and an empty source too; an excerpt keeps its own line numbers
    assert stripped_lines(highlight_code("a < b\n\n  c", "text", anchor_prefix="p")) == ["a < b", "", "  c", ""]
    assert stripped_lines(highlight_code("", "cuda", anchor_prefix="p")) == ["", ""]
    excerpt = highlight_code("x\ny", "text", anchor_prefix="p", first_line=40, anchors=[41])
    assert 'style="white-space:pre-wrap;counter-reset:tl-ln 39"' in excerpt and '<span id="p-L41">y' in excerpt
    assert parse(excerpt).lines == {"p-L40": "x", "p-L41": "y"}


def test_every_in_page_link_of_the_static_page_resolves():
    for report in (gemm(), hostile_report()):
        out = render_html(report)
        ids = {a.get("id") for _, a in parse(out).tags if a.get("id")}
        hrefs = [a["href"][1:] for t, a in parse(out).tags if t == "a" and (a.get("href") or "").startswith("#")]
        assert hrefs and not [h for h in hrefs if h not in ids]
        assert len(ids) == len([a.get("id") for _, a in parse(out).tags if a.get("id")])  # ids are unique


def test_extra_sections_are_appended_as_tabs_with_escaped_titles():
    report = hostile_report()
    out = render_html(report, extra=(("Timing <b>", "<p>1.00 ms</p>"),))
    rid = report_id(report)
    section = re.search(rf'<section class="tl-panel" id="{rid}-timing-b"[^>]*><details class="tl-fold">'
                        rf'<summary><h3 class="tl-ptitle"[^>]*>(.*?)</h3></summary>(.*?)</details></section>',
                        out, re.S)
    assert section and section.group(1) == "Timing &lt;b&gt;" and section.group(2) == "<p>1.00 ms</p>"
    assert f'<label for="{rid}-t-timing-b">Timing &lt;b&gt;</label>' in out
    assert out.index("Arguments") < out.index("Timing &lt;b&gt;")
    assert render_html(report) == render_html(report, extra=())


def test_a_new_section_is_one_registered_function():
    from tilelab.render import html as render

    def notes_html(report):
        return f"<p>{render.esc(report.name)} has {len(report.notes)} note(s)</p>"

    render.register_section("notes", "Notes", notes_html, count=lambda r: len(r.notes), after="summary")
    try:
        report = hostile_report()
        out = render_html(report)
        rid = report_id(report)
        assert render.sections()[:2] == ("summary", "notes")
        assert f'<label for="{rid}-t-notes">Notes ({len(report.notes)})</label>' in out
        assert out.index(f'id="{rid}-summary"') < out.index(f'id="{rid}-notes"') < out.index(f'id="{rid}-cuda"')
        assert f"has {len(report.notes)} note(s)" in section_body(report, "notes")
    finally:
        render._REGISTRY.pop("notes")
    assert "notes" not in render.sections()


def test_a_new_tab_is_one_module_and_shows_in_the_page_and_the_text(tmp_path, monkeypatch):
    """A module that registers a Tab is all a new inspector section takes: the page gets its tab
    (title, count, escaped body, place in the row) and the plain text its words, in the same order."""
    import importlib

    from tilelab.render import page as kit
    from tilelab.render.text import render_text

    (tmp_path / "tilelab_notes_tab.py").write_text(
        "from tilelab.render.page import Tab, esc, register\n"
        "def notes_html(report, page):\n"
        "    return '<ul>' + ''.join(f'<li>{esc(n)}</li>' for n in report.notes) + '</ul>'\n"
        "def notes_text(report, page):\n"
        "    return '\\n'.join(['Notes of the notes tab', *(f'  * {n}' for n in report.notes)])\n"
        "register(Tab('notes', 'Notes', 35, notes_html, notes_text, count=lambda report, page: len(report.notes)))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("tilelab_notes_tab")
    try:
        report = hostile_report()
        out, text = render_html(report), render_text(report)
        rid = report_id(report)
        assert f'<label for="{rid}-t-notes">Notes ({len(report.notes)})</label>' in out
        # order 35: after the CUDA tab (30), before the Launcher (40), on the page and in the text
        assert out.index(f'id="{rid}-cuda"') < out.index(f'id="{rid}-notes"') < out.index(f'id="{rid}-launcher"')
        assert "<li>note &lt;script&gt;alert(1)&lt;/script&gt;</li>" in out and f"<li>note {SCRIPT}" not in out
        assert f"  * note {SCRIPT}" in text  # text/plain is not markup: verbatim
        assert text.index("Device code:") < text.index("Notes of the notes tab") < text.index("Launchers:")
    finally:
        kit.unregister("notes")
        sys.modules.pop("tilelab_notes_tab", None)
    assert "notes" not in render_module.sections() and "Notes of the notes tab" not in render_text(hostile_report())


def test_a_registered_section_can_say_when_it_shows_and_what_it_says_in_text():
    from tilelab.render import html as render
    from tilelab.render.text import render_text

    render.register_section("kernels", "Kernels", lambda r: f"<p>{len(r.kernels)} kernel(s)</p>",
                            text=lambda r: f"{len(r.kernels)} device kernel(s), one table",
                            shown=lambda r, page: r is not None and r.family == "cuda", after="launcher")
    try:
        report = hostile_report()
        assert render.sections()[:5] == ("summary", "cell", "cuda", "launcher", "kernels")
        assert "kernels" in default_sections(report)
        assert "1 device kernel(s), one table" in render_text(report)
        assert f'id="{report_id(report)}-kernels"' in render_html(report)
        hip = dataclasses.replace(report, target="gfx942", family="hip")
        assert "kernels" not in default_sections(hip) and "one table" not in render_text(hip)
    finally:
        render._REGISTRY.pop("kernels")


def test_long_launchers_colour_only_their_comments_and_keep_every_character():
    from tilelab.render.code import highlight_code

    c = 'int x = 1; // set <x> & "y"\nf("//not a comment");\n  // whole line\nchar* s = "a";'
    out = highlight_code(c, "c++", anchor_prefix="p", colour="comments")
    assert stripped_lines(out)[:-1] == c.split("\n")  # every character, escaped and back
    comments = re.findall(r'<span class="c1">(.*?)</span>', out)
    assert comments == ['// set &lt;x&gt; &amp; "y"', "// whole line"]
    py = highlight_code("x = '#'\n    # note", "python", anchor_prefix="p", colour="comments")
    assert re.findall(r'<span class="c1">(.*?)</span>', py) == ["# note"]


def test_the_lowering_table_cuts_cuda_at_a_token_with_an_ellipsis_and_links_cell_lines():
    report = gemm()
    cell = Path(__file__).resolve().parents[2].joinpath("tilelab", "kernels", "gemm.py").read_text()
    body = section_body(report, "summary", render_module.make_page(report, cell))
    rid = report_id(report)
    table = re.search(r'<table class="tl-table tl-lowering">(.*?)</table>', body, re.S).group(1)
    device = report.sources.device.split("\n")
    cells = cell.split("\n")
    for op in report.lowering.ops:
        row = next(r for r in re.findall(r"<tr[^>]*>.*?</tr>", table, re.S)
                   if f"<code>{html.escape(op.op)}</code>" in r)
        if op.evidence_line:
            full = " ".join(device[op.evidence_line - 1].split())
            shown = html.unescape(re.search(r'<code class="tl-muted">(.*?)</code>', row).group(1))
            # whole, or a prefix of the line that ends at a token boundary, with an ellipsis
            assert shown == full or (shown.endswith(" \u2026") and full.startswith(shown[:-2])
                                     and full[len(shown) - 2] in " ,;"), (shown, full)
        if op.op.startswith(("T.copy", "T.gemm")):  # the cell line that wrote the op
            n = int(re.search(rf'href="#{rid}-cell-L(\d+)"', row).group(1))
            assert re.search(rf"{re.escape(op.op.split()[0])}\s*\(", cells[n - 1]), (op.op, cells[n - 1])
    # a slower path is marked as such, not as a problem counted nowhere
    assert "tl-problem" not in table
    slow = [o for o in report.lowering.ops if not o.fast]
    assert table.count('class="tl-slow"') == len(slow)
    if slow:
        assert f"{len(slow)} tile op(s) on a slower path (marked)" in body



def test_where_styles_are_stripped_the_page_reads_as_folded_titled_sections():
    """An untrusted notebook's sanitiser drops <style>, scripts and ids but keeps inline styles and
    <details>: what needs the stylesheet is hidden inline (and shown by the stylesheet), each
    panel is a titled <details> (the first open), and one line says what trusting adds."""
    report = gemm()
    out = render_html(report)
    rid = report_id(report)
    style = re.search(r"<style>(.*?)</style>", out, re.S).group(1)
    # every rule applies to reports that keep their stylesheet only: a trusted page's <style> reaches
    # the whole JupyterLab page, and an untrusted report beside it must keep its fallback
    selectors = [sel.strip() for rule in re.findall(r"([^{}]+)\{[^{}]*\}", style) for sel in rule.split(",")]
    assert selectors and all(sel.startswith(STYLED_ROOT) for sel in selectors), [
        sel for sel in selectors if not sel.startswith(STYLED_ROOT)][:3]
    style = style.replace(STYLED_ROOT, ".tilelab-report")
    tags = parse(out).tags
    radios = [a for t, a in tags if t == "input" and a.get("type") == "radio"]
    assert radios and all(a.get("style") == "display:none" for a in radios)
    nav = next(a for t, a in tags if t == "nav")
    assert nav.get("style") == "display:none"
    assert ".tilelab-report .tl-tabs.tl-t{display:flex!important}" in style
    assert ".tilelab-report .tl-radio.tl-t{display:inline-block!important}" in style
    # the pictures, whose SVG a sanitiser strips to loose numbers, are hidden the same way
    pics = [a for t, a in tags if "tl-pics" in (a.get("class") or "").split()]
    assert pics and all(a.get("style") == "display:none" for a in pics)
    assert ".tilelab-report div.tl-t{display:block!important}" in style
    # the note for a page without styles, hidden by the stylesheet
    note = re.search(r'<p class="tl-untrusted">(.*?)</p>', out, re.S).group(1)
    assert "jupyter trust NOTEBOOK.ipynb" in note and "Trust Notebook" in note
    assert ".tilelab-report .tl-untrusted{display:none}" in style
    # every panel a titled <details>, the first open; the stylesheet shows a folded panel's content
    panels = re.findall(rf'<section class="tl-panel" id="{rid}-([\w-]+)" data-tab="{rid}-t-\1">'
                        r'<details class="tl-fold"( open)?>'
                        r'<summary><h3 class="tl-ptitle" style="display:inline">([^<]*)</h3></summary>', out)
    assert [p[0] for p in panels] == list(default_sections(report))
    assert [bool(p[1]) for p in panels] == [True] + [False] * (len(panels) - 1)
    assert [html.unescape(p[2]) for p in panels] == [render_module.section_title(report, n)
                                                      for n in default_sections(report)]
    assert ".tilelab-report details.tl-fold::details-content{content-visibility:visible;display:contents}" in style


def test_show_keeps_the_other_sections_for_links():
    report = gemm()
    cell = Path(__file__).resolve().parents[2].joinpath("tilelab", "kernels", "gemm.py").read_text()
    out = render_html(report, sections=["summary", "tma", "wgmma"], source=cell)
    rid = report_id(report)
    anchor = render_module.page_id(report, ["summary", "tma", "wgmma"], cell)
    assert anchor.startswith(rid) and anchor != rid  # the inspector's ids for it, beside the full page's
    tabs = re.findall(r'<label for="([^"]+)">', re.search(r"<nav[^>]*>(.*?)</nav>", out).group(1))
    assert tabs == [f"{rid}-t-{n}" for n in ("summary", "tma", "wgmma")]
    # the rows still link to the cell, the CUDA and every launcher, and each link lands
    row = re.search(rf'<tr id="{rid}-tma-0"[^>]*>(.*?)</tr>', out, re.S).group(1)
    hrefs = re.findall(r'href="#([^"]+)"', row)
    assert (any("-cuda-L" in h for h in hrefs) and any("-cell-L" in h for h in hrefs)
            and any("-src-" in h for h in hrefs))
    ids = {a.get("id") for _, a in parse(out).tags if a.get("id")}
    assert all(h in ids for h in hrefs)
    # the sections without a tab are there, after the shown ones, each with a radio for its link to select
    for name in ("cell", "cuda", "launcher", "layouts", "arguments"):
        assert f'<section class="tl-panel" id="{rid}-{name}" data-tab="{rid}-t-{name}">' in out, name
        assert f'id="{rid}-t-{name}"' in out
    assert out.index(f'id="{rid}-wgmma"') < out.index(f'id="{rid}-cell"')
    # the open A_desc excerpt has its lines
    tma = re.search(rf'<section class="tl-panel" id="{rid}-tma".*?</section>', out, re.S).group(0)
    excerpt = re.search(r'<details class="tl-sub" open><summary>A_desc</summary>(.*?)</details>', tma, re.S).group(1)
    assert excerpt.count("\n</span>") >= 3
