"""The intra-kernel timeline without a GPU: the CUDA rewrite on TileLang's own lowered sources
(checked against the kernels' Python lines and the plain device source the CUDA tab shows, and
compiled by the real nvcc/ptxas beside the plain kernel), the decoder on record buffers written
here by hand, the summary's arithmetic, the Perfetto trace against the trace-event format, the
chart's SVG, the record's round trip and the magic's option."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import timeline_kernels
from timeline_kernels import by_kind, gemm_phases, line_of, plain_line

import tilelab
from tilelab import _tilelang
from tilelab.engine.toolchain import find_toolchain
from tilelab.instrument.decode.timeline import decode, summarize
from tilelab.instrument.rewrite.timeline import END, KERNEL_END, KERNEL_START, RewriteError, Site, instrument
from tilelab.kernels.gemm import matmul
from tilelab.records.timeline import BlockTime, Flow, Timeline

CUDA = Path("/usr/local/cuda")
TOOLS = find_toolchain(CUDA)
GEMM_PY = inspect.getsourcefile(matmul)
KERNELS_PY = inspect.getsourcefile(timeline_kernels)

_CACHE: dict[str, tuple] = {}


def lowered(name: str):
    """(prim_func, arch, device source with the record buffer, instrumented, plain device source)."""
    if name not in _CACHE:
        func, arch = {
            "gemm": (lambda: matmul(1024, 1024, 1024), "sm_90a"),
            "flash": (lambda: timeline_kernels.flash_fwd(), "sm_90a"),
            "sm80": (lambda: matmul(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, threads=128,
                                    num_stages=3, raster=0), "sm_80"),
            "add": (lambda: timeline_kernels.add(), "sm_90a"),
        }[name]
        func = func()
        source = _tilelang.timeline_device_source(func, arch)
        ins = instrument(source, ops=_tilelang.timeline_ops(func), cell_file=_tilelang.kernel_file(func), blocks=32,
                         traced_blocks=(0, 5))
        plain = _tilelang.lower(_tilelang.resolve_kernel(func), arch, out_idx=None, pass_configs={},
                                backends=()).device_source
        _CACHE[name] = (func, arch, source, ins, plain)
    return _CACHE[name]


# ------------------------------------------------------------------------------------------
# The rewrite on TileLang's lowered sources
# ------------------------------------------------------------------------------------------


def test_the_warp_specialised_gemm_gets_each_phase_named_by_the_users_lines():
    _, _, _, ins, plain = lowered("gemm")
    p = gemm_phases(ins, GEMM_PY, 1024 // 64)
    assert p.issue.cell_line == p.copy_a
    # device lines point at the statement in the plain kernel's source (the CUDA tab's numbering)
    assert re.search(r"mbarrier\[.*\]\.wait\(", plain_line(plain, p.empty.device_line))
    assert re.search(r"mbarrier\[.*\]\.wait\(", plain_line(plain, p.full.device_line))
    assert "tl_shuffle_elect" in plain_line(plain, p.issue.device_line)
    assert "warpgroup_arrive" in plain_line(plain, p.mma.device_line)
    assert "warpgroup_wait" in plain_line(plain, p.mma_wait.device_line)
    # each loop phase once per k-tile: the main loop's trip count in TileLang's own source
    trips = re.findall(r"for \(int (k|k_\d+) = 0; \1 < (\d+); \+\+\1\)", plain)
    assert [int(t) for _, t in trips] == [1024 // 64] * 2
    assert ins.threads == 384


def test_no_mark_lands_inside_an_elected_block_or_between_wgmma_instructions():
    _, _, _, ins, _ = lowered("gemm")
    lines = ins.source.split("\n")
    depth_in_elect, inside_wgmma = 0, False
    for text in lines:
        t = text.strip()
        if "tl_shuffle_elect<" in t and t.endswith("{"):
            depth_in_elect = 1
            continue
        if depth_in_elect:
            depth_in_elect += t.endswith("{") - t.startswith("}")
            assert "TLT_MARK" not in t
        if "warpgroup_arrive" in t:
            inside_wgmma = True
        if "warpgroup_commit_batch" in t:
            inside_wgmma = False
        if inside_wgmma:
            assert "TLT_MARK" not in t


def test_flash_attention_names_both_gemms_and_both_loads():
    _, _, _, ins, plain = lowered("flash")
    k_line, v_line = line_of(KERNELS_PY, "T.copy(K[k"), line_of(KERNELS_PY, "T.copy(V[k")
    qk, pv = line_of(KERNELS_PY, "T.gemm(Q_s, K_s"), line_of(KERNELS_PY, "T.gemm(P, V_s")
    issues = by_kind(ins, "tma_issue", "producer")
    assert [s.cell_line for s in issues] == [k_line, v_line]
    mmas = by_kind(ins, "mma", "consumer")
    assert [s.cell_line for s in mmas] == [qk, pv]
    # the second GEMM reads P from registers: TileLang made it wgmma_rs
    rs_line = next(i + 1 for i, t in enumerate(plain.split("\n")) if "wgmma_rs<" in t)
    assert mmas[0].device_line < mmas[1].device_line < rs_line
    fulls = [s for s in by_kind(ins, "barrier_wait", "consumer") if s.stage == "full"]
    assert {f"L{k_line}" in s.label or f"L{v_line}" in s.label for s in fulls[-2:]} == {True}
    assert len(by_kind(ins, "mma_wait", "consumer")) == 2


def test_the_sm80_cp_async_pipeline_has_no_producer_and_marks_its_issue_wait_and_mma():
    _, _, _, ins, plain = lowered("sm80")
    assert {s.role for s in ins.sites} == {"all"}
    trip = int(re.search(r"for \(int k = 0; k < (\d+); \+\+k\)", plain).group(1))
    in_loop = [s for s in ins.sites if s.in_loop]
    assert {s.kind for s in in_loop} == {"barrier_wait", "copy_issue", "mma"}
    assert {s.multiplicity for s in in_loop} == {trip}
    issue = next(s for s in in_loop if s.kind == "copy_issue")
    assert issue.cell_line == line_of(GEMM_PY, "T.copy(A[by")
    assert "cp_async_gs" in plain_line(plain, issue.device_line + 1)
    wait = next(s for s in in_loop if s.stage == "full")
    assert "cp_async_wait" in plain_line(plain, wait.device_line)
    mma = next(s for s in in_loop if s.kind == "mma")
    assert mma.cell_line == line_of(GEMM_PY, "T.gemm(A_shared")
    assert by_kind(ins, "epilogue")[0].cell_line == line_of(GEMM_PY, "T.copy(C_local, C[")


def test_an_elementwise_kernel_falls_back_to_kernel_start_and_end_with_a_note():
    _, _, _, ins, _ = lowered("add")
    assert ins.sites == () and "no pipeline phase was recognised" in ins.notes[0]
    assert ins.source.count(f"TLT_MARK({KERNEL_START})") == 1 and ins.source.count(f"TLT_MARK({KERNEL_END})") == 1


def test_a_source_without_the_bind_is_refused():
    with pytest.raises(RewriteError, match="TLT_BIND"):
        instrument('extern "C" __global__ void k(float* A) {\n  A[0] = 1.0f;\n}\n')


@pytest.mark.calls_nvcc
@pytest.mark.slow
@pytest.mark.skipif(TOOLS.nvcc is None, reason=f"needs nvcc and ptxas in {CUDA}/bin")
# make test compiles the Hopper GEMM's (wgmma, TMA, a producer); make test-heavy the others too
@pytest.mark.parametrize("name", ["gemm", *(pytest.param(n, marks=pytest.mark.heavy)
                                            for n in ("flash", "sm80", "add"))])
def test_the_instrumented_source_compiles_with_no_spill_and_no_serialised_wgmma(name, tmp_path):
    _, arch, source, ins, _ = lowered(name)
    plain = "\n".join(t for t in source.split("\n") if "TLT_BIND" not in t)
    incs = [f"-I{d}" for d in _tilelang.device_include_dirs()]
    logs = {}
    for which, text in (("plain", plain), ("instrumented", ins.source)):
        (tmp_path / f"{which}.cu").write_text(text)
        done = subprocess.run([str(TOOLS.nvcc), "-cubin", "-std=c++17", f"-arch={arch}", "-Xptxas", "-v",
                               "-diag-suppress=1444,20012", *incs, "-o", f"{which}.cubin", f"{which}.cu"],
                              cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        logs[which] = done.stderr + done.stdout
    regs = {w: int(re.search(r"Used (\d+) registers", log).group(1)) for w, log in logs.items()}
    spills = {w: re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log).groups()
              for w, log in logs.items()}
    print(f"{name}: registers plain {regs['plain']}, instrumented {regs['instrumented']}; spills {spills}")
    assert spills["instrumented"] == ("0", "0") == spills["plain"]
    assert not re.search(r"C75\d\d|wgmma.*serializ", logs["instrumented"], re.IGNORECASE), logs["instrumented"]
    assert regs["instrumented"] <= max(regs["plain"] + 8, 32)


def test_the_postproc_hook_is_put_back_as_it_was():
    import tvm_ffi
    from tilelang.engine.callback import register_cuda_postproc

    seen = []
    register_cuda_postproc(lambda code, target: code + "// theirs\n")
    try:
        with _tilelang.cuda_postproc(lambda code: seen.append(code) or code + "// ours\n"):
            source = _tilelang.timeline_device_source(timeline_kernels.add(), "sm_90a")
        assert source.endswith("// ours\n") and seen
        after = _tilelang.timeline_device_source(timeline_kernels.add(), "sm_90a")
        assert after.endswith("// theirs\n")
    finally:
        tvm_ffi.remove_global_func("tilelang_callback_cuda_postproc")
    assert tvm_ffi.get_global_func("tilelang_callback_cuda_postproc", allow_missing=True) is None


# ------------------------------------------------------------------------------------------
# The decoder on a record buffer written here by hand (the layout of _timeline_rewrite's docstring)
# ------------------------------------------------------------------------------------------

SITES = (
    Site(3, "barrier_wait", "stage empty of T.Pipelined L35", "producer", 47, 35, "k.py", True, 35, "empty", ("e",), 2),
    Site(4, "tma_issue", "TMA issue: T.copy A -> A_shared L36", "producer", 48, 36, "k.py", True, 35, None, ("f",), 2),
    Site(5, "barrier_wait", "stage full of T.Pipelined L35", "consumer", 66, 35, "k.py", True, 35, "full", ("f",), 2),
    Site(6, "mma", "WGMMA issue: T.gemm L38", "consumer", 75, 38, "k.py", True, 35, None, (), 2),
)
BASE = (1 << 48) - 50  # the block's start clock: the records' 48-bit clocks wrap past it


def _rec(site, d):
    return (site << 48) | ((BASE + d) & ((1 << 48) - 1))


def synthetic_words():
    grid_blocks, warps, capacity = 2, 8, 6
    words = [0] * (grid_blocks * 4 + 1 * warps * (4 + capacity))
    words[0:4] = [1_000_000, 1_000_400, 3, BASE]  # block 0: start, end (globaltimer ns), SM, start clock
    words[4:8] = [1_000_100, 1_000_300, 7, 99]  # block 1 (not traced)
    seg = 8
    producer = [_rec(KERNEL_START, 20), _rec(3, 100), _rec(4, 140), _rec(END, 180), _rec(3, 200), _rec(4, 300),
                _rec(END, 340), _rec(KERNEL_END, 6000)]
    consumer = [_rec(KERNEL_START, 10), _rec(5, 60), _rec(6, 260), _rec(END, 300), _rec(KERNEL_END, 400)]
    for warp, recs in ((0, producer), (4, consumer)):
        base = seg + warp * (4 + capacity)
        words[base] = len(recs)  # marks attempted
        words[base + 1] = warp + 1
        words[base + 2:base + 4] = [1_003_000, BASE + 6000]  # end pair 3 us after the start: too short to rate
        for i, r in enumerate(recs[:capacity]):
            words[base + 4 + i] = r
    return words, capacity


def test_the_decoder_reads_a_hand_written_buffer():
    words, capacity = synthetic_words()
    spans, blocks, flows, dropped, notes = decode(words, sites=SITES, grid=(2, 1, 1), warps=8, capacity=capacity,
                                                  traced_blocks=(0,), clock_ghz=2.0)
    got = [(s.warp, s.kind, s.iteration, s.start_ns, s.end_ns) for s in spans]
    assert got == [  # ns = cycles / 2 from the block's start; the issue of k=1 lost its end to the drop
        (0, "kernel", None, 10.0, 50.0), (0, "barrier_wait", 0, 50.0, 70.0), (0, "tma_issue", 0, 70.0, 90.0),
        (0, "barrier_wait", 1, 100.0, 150.0),
        (4, "kernel", None, 5.0, 30.0), (4, "barrier_wait", 0, 30.0, 130.0), (4, "mma", 0, 130.0, 150.0),
    ]
    assert dropped == 2 and "2 marks did not fit" in notes[0]
    assert {(s.warp_group, s.role, s.sm, s.block) for s in spans} == {(0, "producer", 3, (0, 0, 0)),
                                                                      (1, "consumer", 3, (0, 0, 0))}
    assert spans[2].cell_line == 36 and spans[2].device_line == 48
    assert blocks == [BlockTime((0, 0, 0), 0, 3, 0.0, 400.0), BlockTime((1, 0, 0), 1, 7, 100.0, 300.0)]
    assert flows == [Flow(2, 5)]  # the issue of k=0 released the consumer's full wait of k=0


def test_a_long_enough_block_is_read_at_the_clock_rate_its_own_timers_measured():
    words, capacity = synthetic_words()
    base = 8 + 4 * (4 + capacity)  # warp 4's header: it ended 20 us and 60000 cycles after the block began
    words[base + 2:base + 4] = [1_020_000, BASE + 60000]
    spans, _, _, _, notes = decode(words, sites=SITES, grid=(2, 1, 1), warps=8, capacity=capacity,
                                   traced_blocks=(0,), clock_ghz=2.0)
    assert [(s.start_ns, s.end_ns) for s in spans[:2]] == [(20 / 3, 100 / 3), (100 / 3, 140 / 3)]
    assert any("3.0000 GHz" in n for n in notes)


def test_the_summary_by_hand():
    words, capacity = synthetic_words()
    spans, blocks, _, _, _ = decode(words, sites=SITES, grid=(2, 1, 1), warps=8, capacity=capacity,
                                    traced_blocks=(0,), clock_ghz=2.0)
    s = summarize(spans, blocks)
    producer, consumer = s.roles
    assert (producer.role, producer.lifetime_ns) == ("producer", 140.0)
    assert producer.busy == pytest.approx((40 + 20) / 140) and producer.waiting == pytest.approx(70 / 140)
    assert (consumer.role, consumer.lifetime_ns) == ("consumer", 145.0)
    assert consumer.busy == pytest.approx(45 / 145) and consumer.waiting == pytest.approx(100 / 145)
    assert (s.bubbles, s.bubble_ns) == (1, 100.0)
    assert s.run_ahead == -1.0  # the consumer began waiting for k=0 before the producer issued it
    assert (s.sms, s.start_skew_ns, s.tail_ns, s.grid_ns) == (2, 100.0, 100.0, 400.0)


def sample_timeline() -> Timeline:
    words, capacity = synthetic_words()
    spans, blocks, flows, dropped, notes = decode(words, sites=SITES, grid=(2, 1, 1), warps=8, capacity=capacity,
                                                  traced_blocks=(0,), clock_ghz=2.0)
    return Timeline("gemm_kernel", "NVIDIA H100 <80GB>", "tvm_ffi", "warpgroup", (2, 1, 1), 384, ((0, 0, 0),),
                    tuple(spans), tuple(blocks), tuple(flows), dropped, 0.031, 1.6, 1.65, 1.98, "k.py", 2.5,
                    tuple(notes + ["a <note> & more"]), summarize(spans, blocks))


def test_the_record_round_trips(tmp_path):
    tl = sample_timeline()
    assert Timeline.from_dict(json.loads(json.dumps(tl.to_dict()))) == tl
    assert Timeline.load(tl.save(tmp_path / "t.json")) == tl
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(tilelab.ReportFileError):
        Timeline.load(tmp_path / "bad.json")


# ------------------------------------------------------------------------------------------
# Perfetto: the Trace Event Format (JSON object form), checked field by field
# ------------------------------------------------------------------------------------------


def check_trace_event_format(trace: dict) -> None:
    """The rules of Google's Trace Event Format that Perfetto's JSON importer applies."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit") in (None, "ms", "ns")
    slices: dict[tuple, list[tuple[float, float]]] = {}
    flows: dict[int, dict[str, dict]] = {}
    for e in trace["traceEvents"]:
        assert isinstance(e["ph"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            assert isinstance(e["args"], dict)
        elif e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e.get("cat", ""), str) and isinstance(e.get("args", {}), dict)
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] in ("s", "f"):
            assert isinstance(e["id"], int) and isinstance(e["ts"], (int, float)) and isinstance(e["cat"], str)
            if e["ph"] == "f":
                assert e.get("bp") == "e"
            assert e["ph"] not in flows.setdefault(e["id"], {})
            flows[e["id"]][e["ph"]] = e
        else:
            raise AssertionError(f"unexpected phase {e['ph']!r}")
    for ident, pair in flows.items():
        assert set(pair) == {"s", "f"}, ident
        assert pair["s"]["ts"] <= pair["f"]["ts"]
        for e in pair.values():  # each end lies inside a slice of its track (what it binds to)
            assert any(lo <= e["ts"] <= hi for lo, hi in slices[(e["pid"], e["tid"])]), e


def test_the_perfetto_trace_follows_the_trace_event_format(tmp_path):
    tl = sample_timeline()
    trace = json.loads(tl.to_perfetto(tmp_path / "t.json").read_text())
    check_trace_event_format(trace)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] != 0]
    assert len(xs) == len(tl.spans)
    assert {(e["pid"], e["tid"]) for e in xs} == {(1, 0), (1, 1)}  # one track per block x warp group
    assert sum(e["ph"] == "s" for e in trace["traceEvents"]) == len(tl.flows) == 1
    grid = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    assert sorted(e["tid"] for e in grid) == [3, 7]  # every block, on its SM's track
    issue = next(e for e in xs if e["cat"] == "tma_issue")
    assert issue["args"]["cell_line"] == 36 and issue["args"]["iteration"] == 0 and issue["ts"] == 0.07


def test_the_checker_rejects_a_dangling_flow():
    bad = {"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 0},
                           {"ph": "s", "id": 1, "name": "f", "cat": "c", "ts": 0.5, "pid": 1, "tid": 0}]}
    with pytest.raises(AssertionError):
        check_trace_event_format(bad)


# ------------------------------------------------------------------------------------------
# The chart
# ------------------------------------------------------------------------------------------


def test_the_svg_draws_a_lane_per_block_and_warp_group_and_hover_names_the_lines():
    from tilelab.render.timeline import timeline_html, timeline_svg

    tl = sample_timeline()
    root = ET.fromstring(timeline_svg(tl))
    ns = "{http://www.w3.org/2000/svg}"
    phases = [r for r in root.iter(f"{ns}rect") if (r.get("class") or "").startswith("tlt-k-")]
    assert len(phases) == len(tl.spans)
    assert [r.get("class")[6:] for r in phases] == [s.kind for s in tl.spans]
    lanes = [r for r in root.iter(f"{ns}rect") if r.get("class") == "tlt-lane"]
    assert len(lanes) == len(tl.lanes()) == 2
    issue = phases[2].find(f"{ns}title").text
    assert "your line 36" in issue and "device line 48" in issue and "iteration 0" in issue
    widths = [float(r.get("width")) for r in phases]
    assert widths[5] == pytest.approx(5 * widths[6], abs=0.02)  # the 100 ns wait is five times the 20 ns MMA
    assert len(list(root.iter(f"{ns}line"))) == len(tl.flows) + 1  # flows and the axis
    page = timeline_html(tl)
    assert "a &lt;note&gt; &amp; more" in page and "<note>" not in page
    assert "pipeline bubbles: 1" in page and "+3.1%" in page


def test_the_timeline_tab_appears_only_where_the_magic_measured_one():
    from tilelab.render import html as render
    from tilelab.widgets.inspector import launches_of

    report = tilelab.inspect(timeline_kernels.add(), "sm_90a")
    assert "timeline" not in render.default_sections(report)
    launches, rest = launches_of(["a bench result", sample_timeline()])
    timelines = launches.timelines
    assert list(rest) == ["a bench result"]
    assert "timeline" in render.default_sections(report, timelines=timelines)
    page = render.render_html(report, timelines=timelines)
    assert ">Timeline (1)<" in page and "tlt-k-tma_issue" in page
    # the page is handed its timelines: nothing is kept, so the next page without them has no tab
    assert "timeline" not in render.default_sections(report)
    assert ">Timeline" not in render.render_html(report)


def test_the_inspector_hands_its_timelines_to_the_page_and_the_text():
    from tilelab.widgets.inspector import Inspector

    report = tilelab.inspect(timeline_kernels.add(), "sm_90a")
    tl = sample_timeline()
    shown = Inspector(report, timing=[tl])
    assert shown.titles[-1] == "Timeline (1)" and not any(t.startswith("Timing") for t in shown.titles)
    assert shown.tab("timeline").count(' data-span="') == len(tl.spans)  # one mark per phase
    text = shown._repr_mimebundle_()["text/plain"]
    assert f"Timeline of {tl.kernel} on {tl.device}" in text and f"{len(tl.spans)} phases" in text
    assert "Timeline" not in Inspector(report).titles[-1]  # the next page, given none, shows none


def test_the_magic_option_takes_block_indices():
    from tilelab.cell.options import CellUsageError, parse_cell_line

    assert parse_cell_line("--timeline").timeline == (0,)
    assert parse_cell_line("--timeline=0,5").timeline == (0, 5)
    assert parse_cell_line("--timeline=3 --run").launches
    assert parse_cell_line("").timeline is None and not parse_cell_line("").launches
    with pytest.raises(CellUsageError, match="--timeline takes"):
        parse_cell_line("--timeline=first")
    with pytest.raises(CellUsageError, match="non-negative"):
        parse_cell_line("--timeline=-1")


def test_the_phase_table_sums_each_phase():
    from tilelab.instrument.decode.timeline import phase_totals

    rows = phase_totals(sample_timeline().spans)
    first = rows[0]  # the consumer's one 100 ns full wait is the largest total; the producer's two waits 20 + 50
    assert (first["role"], first["kind"], first["count"], first["total_ns"]) == ("consumer", "barrier_wait", 1, 100.0)
    producer_waits = next(r for r in rows if r["role"] == "producer" and r["kind"] == "barrier_wait")
    assert (producer_waits["count"], producer_waits["total_ns"], producer_waits["mean_ns"]) == (2, 70.0, 35.0)
    assert producer_waits["cell_line"] == 35 and producer_waits["device_line"] == 47


def test_a_phase_in_the_tab_links_to_its_anchored_device_line():
    import dataclasses

    from tilelab.engine.links import device_anchor_lines
    from tilelab.render import html as render
    report = tilelab.inspect(matmul(1024, 1024, 1024), "sm_90a")
    n = min(device_anchor_lines(report))
    sample = sample_timeline()
    tl = dataclasses.replace(sample, spans=tuple(dataclasses.replace(s, device_line=n, cell_line=None)
                                                 for s in sample.spans))
    page = render.render_html(report, timelines=[tl])
    rid = render.report_id(report)
    assert page.count(f'<a href="#{rid}-cuda-L{n}"><rect class="tlt-k-') == len(tl.spans)
    assert f'id="{rid}-cuda-L{n}"' in page  # the CUDA tab has the anchor the phases link to


def test_the_grid_strip_draws_every_block_on_its_sm_row():
    from tilelab.render.timeline import GRID_ROW_H, grid_svg

    tl = sample_timeline()
    root = ET.fromstring(grid_svg(tl))
    rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
    assert [int(r.get("data-block")) for r in rects] == [0, 1]
    assert [float(r.get("y")) for r in rects] == [14, 14 + GRID_ROW_H]  # SM 3 first row, SM 7 second
    assert rects[0].get("class") == "tlt-k-tma_issue" and rects[1].get("class") == "tlt-k-kernel"  # traced vs not
    assert float(rects[0].get("width")) == pytest.approx(2 * float(rects[1].get("width")))  # 400 ns vs 200 ns


def test_the_cutedsl_backend_without_cute_dsl_says_what_to_install(monkeypatch):
    import importlib.util

    import tilelab
    from tilelab.launch import _timeline as launch_timeline
    from tilelab.launch._timeline import TimelineError

    real = importlib.util.find_spec
    monkeypatch.setattr(launch_timeline.importlib.util, "find_spec",
                        lambda name, *a: None if name == "cutlass" else real(name, *a))
    with pytest.raises(TimelineError, match='pip install nvidia-cutlass-dsl.*backend="tvm_ffi"'):
        tilelab.timeline(object(), backend="cutedsl")
