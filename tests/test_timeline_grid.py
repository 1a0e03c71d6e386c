"""The timeline's named regions, compact marks, every-block (grid) mode, save/load/compare, without a
GPU: the rewrite on TileLang's own lowered sources (named regions and compact marks checked against
the kernel's lines and the plain device source), the grid decoder on a record buffer written here by
hand (its arithmetic done by hand), a saved timeline loaded and drawn in the inspector's tab, two
timelines compared; and the launch check's verdict where the reference holds NaN."""

from __future__ import annotations

import json
import re

import pytest
import timeline_kernels
from timeline_kernels import by_kind, line_of

import tilelab
from tilelab import _tilelang
from tilelab.instrument.decode.timeline import decode, decode_grid, summarize
from tilelab.instrument.rewrite.timeline import END, FIRST_SITE, Site, instrument
from tilelab.kernels.gemm import matmul
from tilelab.records.timeline import BlockTime, GridSummary, Timeline, TimelineSpan, compare_timelines

KERNELS_PY = timeline_kernels.__file__
_CACHE: dict[str, tuple] = {}


def lowered(name: str):
    """(prim_func, device source with the record buffer, plain device source)."""
    if name not in _CACHE:
        func = {"named": lambda: timeline_kernels.flash_fwd(named=True), "flash": timeline_kernels.flash_fwd,
                "gemm": lambda: matmul(1024, 1024, 1024)}[name]()
        source = _tilelang.timeline_device_source(func, "sm_90a")
        plain = _tilelang.lower(_tilelang.resolve_kernel(func), "sm_90a", out_idx=None, pass_configs={},
                                backends=()).device_source
        _CACHE[name] = (func, source, plain)
    return _CACHE[name]


def instrumented(name: str, **kw):
    func, source, _ = lowered(name)
    return instrument(source, ops=_tilelang.timeline_ops(func), cell_file=_tilelang.kernel_file(func),
                      regions=_tilelang.region_names(func), blocks=8, traced_blocks=(0,), **kw)


# ------------------------------------------------------------------------------------------
# Named regions
# ------------------------------------------------------------------------------------------


def test_a_named_region_leaves_nothing_in_an_ordinary_compile():
    assert lowered("named")[2] == lowered("flash")[2]  # the same device source, byte for byte


def test_a_named_region_becomes_a_span_on_its_line_between_the_two_gemms():
    func, source, _ = lowered("named")
    assert _tilelang.region_names(func) == [{"name": "softmax", "id": 1, "file": KERNELS_PY,
                                             "line": line_of(KERNELS_PY, 'tilelab.region("softmax")')}]
    ins = instrumented("named")
    (region,) = by_kind(ins, "region")
    assert (region.label, region.role, region.in_loop) == ("softmax", "consumer", True)
    assert region.cell_line == line_of(KERNELS_PY, 'tilelab.region("softmax")')
    # in the device code, the region's mark follows the first GEMM's wait and the next mark (the
    # second stage's wait) closes it: the softmax's statements lie between them
    lines = ins.source.split("\n")
    begin = next(i for i, t in enumerate(lines) if f"TLT_MARK({region.id});" in t)
    end = next(i for i in range(begin + 1, len(lines)) if "TLT_MARK(" in lines[i])
    assert "TLT_REGION(1, 0);" in lines[end - 1] and ".wait(" in lines[end + 1]
    between = "\n".join(lines[begin:end])
    assert "exp2" in between and "warpgroup_arrive" not in between and ".wait(" not in between
    assert "tl::warpgroup_wait<0>();" in "\n".join(lines[begin - 6:begin])
    # the markers themselves compile to nothing (the macro is empty)
    assert "#define TLT_REGION(id, begin)\n" in ins.source + "\n"


def test_a_region_needs_a_name():
    with pytest.raises(tilelab.TilelabError, match="non-empty name"), tilelab.region(""):
        pass


# ------------------------------------------------------------------------------------------
# Compact marks (the overhead's choice) and the branch-free mark
# ------------------------------------------------------------------------------------------


def test_compact_marks_fold_each_wgmma_wait_into_its_mma():
    full, compact = instrumented("flash"), instrumented("flash", marks="compact")
    assert len(by_kind(full, "mma_wait")) == 2 and by_kind(compact, "mma_wait") == []
    assert [s.label for s in by_kind(compact, "mma")] == [s.label for s in by_kind(full, "mma")]
    assert compact.marks == "compact"
    # one mark fewer per GEMM in the consumer's loop: the waits' marks are gone, an END follows each wait
    marks = lambda ins: len(re.findall(r"TLT_MARK\(\d+\);", ins.source))  # noqa: E731
    assert marks(full) - marks(compact) == 2
    for line in [n for n, t in enumerate(compact.source.split("\n")) if "tl::warpgroup_wait<0>();" in t]:
        assert f"TLT_MARK({END});" in compact.source.split("\n")[line + 1]


def test_the_mark_is_one_store_with_no_lane_branch():
    ins = instrumented("gemm")
    define = next(t for t in ins.source.split("\n") if t.startswith("#define TLT_MARK"))
    assert "tlt_rec" in define and "lane" not in define and "threadIdx" not in define
    assert "tlt_seg[tlt_n]" in define  # the capacity holds every mark of this kernel: no bound check
    assert re.search(r"const bool tlt_rec = tlt_slot >= 0 && tlt_warp < 12u && \(tlt_warp & 3u\) == 0u;",
                     ins.source)
    small = instrumented("gemm", capacity=8)
    assert "tlt_seg[(tlt_n < TLT_CAP ? (int)tlt_n : -1)]" in small.source  # past it: the header word, overwritten


# ------------------------------------------------------------------------------------------
# Every block: the grid mode's rewrite and decoder
# ------------------------------------------------------------------------------------------


def test_the_grid_mode_sums_per_phase_in_every_block():
    ins = instrumented("gemm", mode="grid")
    assert ins.mode == "grid" and ins.traced_blocks == ()
    assert ins.recording_warps == 3 and ins.slots == FIRST_SITE + len(ins.sites)
    assert ins.words() == 8 * 4 + 8 * 3 * (2 + 2 * ins.slots)
    # the sums live in registers, one slot per lane of the recording warp: no memory, no branch per mark
    assert ins.slots <= 32 and "unsigned long long tlt_acc0 = 0ull; unsigned tlt_cnt0 = 0u;" in ins.source
    define = next(t for t in ins.source.split("\n") if t.startswith("#define TLT_MARK"))
    assert "tlt_acc0 += (tlt_lane + 0u == tlt_open) ? tlt_d : 0ull;" in define and "[" not in define
    assert "const bool tlt_rec = tlt_block < 8u && tlt_warp < 12u && (tlt_warp & 3u) == 0u;" in ins.source
    with pytest.raises(ValueError, match="mode must be"):
        instrumented("gemm", mode="every")


GSITES = (
    Site(3, "tma_issue", "TMA issue: T.copy A -> A_shared L36", "producer", 48, 36, "k.py", True, 35, None, (), 4),
    Site(4, "barrier_wait", "stage full of T.Pipelined L35", "consumer", 66, 35, "k.py", True, 35, "full", (), 4),
    Site(5, "mma", "WGMMA issue: T.gemm L38", "consumer", 75, 38, "k.py", True, 35, None, (), 4),
)


def grid_words():
    """4 blocks on 2 SMs, 2 recording warps each (a producer, a consumer): per slot (other, kernel
    start, kernel end, sites 3..5) ticks and count, written by hand; the clock runs at 2 GHz."""
    nblocks, rec, slots = 4, 2, FIRST_SITE + len(GSITES)
    per = 2 + 2 * slots
    words = [0] * (nblocks * 4 + nblocks * rec * per)
    starts = [(0, 0), (10, 1), (1000, 0), (1200, 1)]  # (start ns, SM): blocks 2 and 3 are the second wave
    for b, (start, sm) in enumerate(starts):
        words[b * 4:(b + 1) * 4] = [5000 + start, 5000 + start + 900 + 100 * b, sm, 0]
        for w, pairs in ((0, {1: (40, 1), 0: (160, 4), 3: (400, 4)}), (1, {1: (20, 1), 4: (200 * (b + 1), 4),
                                                                         5: (1200, 4), 0: (100, 5)})):
            base = nblocks * 4 + (b * rec + w) * per
            words[base] = 4 * w + 1
            words[base + 1] = sum(t for t, _ in pairs.values())
            for slot, (ticks, n) in pairs.items():
                words[base + 2 + 2 * slot] = ticks
                words[base + 3 + 2 * slot] = n
    return words


def test_the_grid_decoder_by_hand():
    words = grid_words()
    _, blocks, _, _, _ = decode(words, sites=GSITES, grid=(4, 1, 1), warps=8, capacity=0, traced_blocks=(),
                                clock_ghz=2.0)
    g = decode_grid(words, sites=GSITES, grid=(4, 1, 1), recording_warps=2, clock_ghz=2.0, blocks=blocks)
    mma = g.phase("consumer", "mma")[0]
    assert (mma.count, mma.warps, mma.per_warp_min, mma.per_warp_max) == (16, 4, 4, 4)
    assert mma.total_ns == 4 * 600.0 and mma.mean_ns == 150.0 and mma.p50_ns == mma.p95_ns == 150.0
    wait = g.phase("consumer", "barrier_wait")[0]
    # the full wait: 200, 400, 600, 800 ticks over 4 runs -> 25, 50, 75, 100 ns per run in each block
    assert wait.total_ns == 1000.0 and wait.mean_ns == 62.5
    assert wait.p50_ns == 62.5 and wait.p95_ns == pytest.approx(75 + 0.85 * 25)
    consumer_life = sum((20 + 200 * (b + 1) + 1200 + 100) / 2 for b in range(4))
    assert wait.share == pytest.approx(1000.0 / consumer_life)
    other = next(p for p in g.phases if p.role == "consumer" and p.kind == "other")
    assert (other.count, other.total_ns) == (20, 200.0)
    assert {p.kind for p in g.phases if p.role == "producer"} == {"kernel", "other", "tma_issue"}
    assert [(s.sm, s.blocks) for s in g.sms] == [(0, 2), (1, 2)]
    # grid end 1200 + 1200 = 2400 ns after the first start; SM 0's last block ended at 1000 + 1100
    assert [s.idle_tail_ns for s in g.sms] == [300.0, 0.0]
    assert (g.first_wave_blocks, g.first_wave_mean_ns, g.rest_blocks, g.rest_mean_ns) == (2, 950.0, 2, 1150.0)
    with pytest.raises(ValueError, match="layout needs"):
        decode_grid(words[:-1], sites=GSITES, grid=(4, 1, 1), recording_warps=2, clock_ghz=2.0)


# ------------------------------------------------------------------------------------------
# Save, load (no GPU), compare
# ------------------------------------------------------------------------------------------


def grid_timeline() -> Timeline:
    words = grid_words()
    _, blocks, _, _, _ = decode(words, sites=GSITES, grid=(4, 1, 1), warps=8, capacity=0, traced_blocks=(),
                                clock_ghz=2.0)
    g = decode_grid(words, sites=GSITES, grid=(4, 1, 1), recording_warps=2, clock_ghz=2.0, blocks=blocks)
    return Timeline("gemm_kernel", "NVIDIA H200", "tvm_ffi", "warpgroup", (4, 1, 1), 384, (), (), tuple(blocks),
                    clock_ghz=2.0, notes=("every block recorded",), summary=summarize([], blocks), grid_summary=g)


def span_timeline(wait_ns: float, stages: int) -> Timeline:
    spans = []
    for k in range(4):
        t = k * 1000.0
        spans.append(TimelineSpan((0, 0, 0), 0, 1, 4, "consumer", "barrier_wait", k, t, t + wait_ns, 66, 35,
                                  "stage full of T.Pipelined L35", 4))
        spans.append(TimelineSpan((0, 0, 0), 0, 1, 4, "consumer", "mma", k, t + wait_ns, t + wait_ns + 500, 75, 38,
                                  "WGMMA issue: T.gemm L38", 5))
    return Timeline(f"gemm_{stages}_stages", "NVIDIA H200", "tvm_ffi", "warpgroup", (1, 1, 1), 384, ((0, 0, 0),),
                    tuple(spans), (BlockTime((0, 0, 0), 0, 0, 0.0, 4000.0),), plain_ms=1.0 + wait_ns / 1000)


def test_the_magic_option_takes_all_blocks():
    from tilelab.cell.options import CellUsageError, parse_cell_line

    assert parse_cell_line("--timeline=all").timeline == "all"
    with pytest.raises(CellUsageError, match="--timeline takes"):
        parse_cell_line("--timeline=every")


def test_a_saved_timeline_loads_and_draws_in_the_tab_with_no_gpu(tmp_path):
    from tilelab.render import html as render

    tl = grid_timeline()
    path = tl.save(tmp_path / "grid.json")
    assert json.loads(path.read_text())["format"] == 2
    loaded = Timeline.load(path)
    assert loaded == tl and isinstance(loaded.grid_summary, GridSummary)
    report = tilelab.inspect(timeline_kernels.add(), "sm_90a")
    page = render.render_html(report, timelines=[loaded])
    assert ">Timeline (1)<" in page and "tlt-grid-phases" in page and 'class="tlt-sms"' in page
    assert page.count("<g data-sm=") == 2 and "stage full of T.Pipelined L35" in page
    assert "first wave: 2 blocks" in page and "sums per phase, not spans" in page


def test_a_timeline_of_the_first_format_still_loads(tmp_path):
    tl = span_timeline(100.0, 2)
    data = tl.to_dict()
    data["format"] = 1
    for key in ("grid_summary", "marks"):
        data.pop(key)
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert Timeline.load(tmp_path / "old.json") == tl
    (tmp_path / "future.json").write_text(json.dumps({**data, "format": 99}))
    with pytest.raises(tilelab.ReportFileError, match="format 99"):
        Timeline.load(tmp_path / "future.json")


def test_two_timelines_compared_per_phase_and_role():
    two, four = span_timeline(300.0, 2), span_timeline(50.0, 4)
    c = tilelab.compare_timelines(two, four)
    assert (c.a, c.b) == ("gemm_2_stages", "gemm_4_stages") and c == two.compare(four)
    wait = next(p for p in c.phases if p.kind == "barrier_wait")
    assert (wait.a_ns, wait.b_ns, wait.change_ns, wait.a_count, wait.b_count) == (1200.0, 200.0, -1000.0, 4, 4)
    mma = next(p for p in c.phases if p.kind == "mma")
    assert mma.change_ns == 0.0 and c.phases[0] is wait  # the largest change first
    (role,) = c.roles
    assert (role.role, role.a_wait_ns, role.b_wait_ns, role.a_busy_ns, role.b_busy_ns) == \
        ("consumer", 1200.0, 200.0, 2000.0, 2000.0)
    text = repr(c)
    assert "waiting 1.20 us -> 200 ns" in text
    from tilelab.render.timeline import comparison_html
    assert "<td>-1.00 us</td>" in comparison_html(c)
    g = compare_timelines(grid_timeline(), grid_timeline(), names=("before", "after"))
    assert (g.a, g.b) == ("before", "after") and all(p.change_ns == 0.0 for p in g.phases)
    with pytest.raises(TypeError, match="two Timelines"):
        compare_timelines(two, "four")


# ------------------------------------------------------------------------------------------
# The launch check where the reference holds NaN
# ------------------------------------------------------------------------------------------


def test_nan_in_the_reference_matched_by_nan_is_right_and_reported():
    import torch

    from tilelab.launch import _inputs, _tiles

    ref = torch.arange(64, dtype=torch.float32).reshape(8, 8) + 1
    ref[2, 3] = float("nan")
    ref[5, 1] = float("inf")
    out = ref.clone()
    check = _inputs.compare("O", out, ref, tolerance=1e-3, poisoned=False)
    assert check.passed and check.worst == () and check.rel_error == 0.0
    assert (check.ref_nan, check.first_ref_nan) == (1, (2, 3))
    _, wrong = _tiles.element_masks(out, ref, 1e-3, None)
    assert not wrong.any()  # the tile map agrees with the verdict
    out[2, 3] = 7.0  # a number where the reference holds NaN: wrong, and listed first
    check = _inputs.compare("O", out, ref, tolerance=1e-3, poisoned=False)
    assert not check.passed and check.worst[0].index == (2, 3)
    _, wrong = _tiles.element_masks(out, ref, 1e-3, None)
    assert wrong.nonzero().tolist() == [[2, 3]]
    out[2, 3] = float("nan")
    out[5, 1] = float("-inf")  # the other infinity: wrong
    check = _inputs.compare("O", out, ref, tolerance=1e-3, poisoned=False)
    assert not check.passed and check.worst[0].index == (5, 1)
    from tilelab.render.launch import _output_figures
    assert "the reference holds NaN at 1 elements (first at (2, 3))" in _output_figures(check)
