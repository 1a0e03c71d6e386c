"""The timeline's every-block mode, named regions, save/load and comparison on a CUDA GPU (Hopper):
the grid summary's counts against the kernel's structure, a named region's spans, a real timeline
through a file and back, and the GEMM with 2 and 4 stages compared."""

from __future__ import annotations

import math

import pytest
from gpu_only import skip_module_without_cuda

skip_module_without_cuda(__name__)

import timeline_kernels  # noqa: E402
import torch  # noqa: E402
from timeline_kernels import line_of  # noqa: E402

import tilelab  # noqa: E402
from tilelab.kernels.gemm import matmul  # noqa: E402
from tilelab.records.timeline import Timeline  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(torch.cuda.get_device_capability()[0] < 9,
                                                  reason="needs a Hopper GPU (TMA, WGMMA, sm_90a)")]
M = N = 1024
K = 2048
BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64  # matmul's defaults: a grid of 4 x 8 blocks


def test_every_block_counts_match_the_kernels_structure():
    tl = tilelab.timeline(matmul(M, N, K), blocks="all")
    g = tl.grid_summary
    k_tiles = math.ceil(K / BLOCK_K)
    nblocks = math.ceil(M / BLOCK_M) * math.ceil(N / BLOCK_N)
    assert g is not None and tl.spans == () and g.blocks == nblocks and len(tl.blocks) == nblocks
    consumer_groups = (tl.threads // 128) - 1  # the producer is one warp group
    for kind in ("mma", "barrier_wait"):
        (phase,) = [p for p in g.phase("consumer", kind) if kind == "mma" or "stage full" in p.label]
        assert (phase.per_warp_min, phase.per_warp_max) == (k_tiles, k_tiles), phase
        assert phase.warps == nblocks * consumer_groups and phase.count == nblocks * consumer_groups * k_tiles
        assert 0 < phase.p50_ns <= phase.p95_ns
    (issue,) = g.phase("producer", "tma_issue")
    assert issue.count == nblocks * k_tiles and issue.per_warp_min == issue.per_warp_max == k_tiles
    shares = [p.share for p in g.phases if p.role == "consumer"]
    assert 0.9 < sum(shares) < 1.1  # the phases, "other" and the setup cover each warp's life
    assert sum(s.blocks for s in g.sms) == nblocks and g.first_wave_blocks + g.rest_blocks == nblocks
    from tilelab.render.timeline import timeline_text

    print(timeline_text(tl))
    print(f"grid mode: {g.words * 8 / 1e6:.2f} MB, capture {tl.capture_s:.1f} s, overhead {tl.overhead:+.2%}")


def test_a_named_region_is_a_span_per_iteration_between_the_two_gemms():
    seq, block_N = 256, 64
    tl = tilelab.timeline(timeline_kernels.flash_fwd(seq=seq, named=True), overhead=False)
    regions = [s for s in tl.spans if s.kind == "region"]
    consumer_groups = sorted({s.warp_group for s in regions})
    assert regions and consumer_groups and {s.label for s in regions} == {"softmax"}
    for wg in consumer_groups:
        mine = sorted([s for s in tl.spans if s.warp_group == wg], key=lambda s: s.start_ns)
        softmax = [s for s in mine if s.kind == "region"]
        assert [s.iteration for s in softmax] == list(range(seq // block_N))
        mmas = [s for s in mine if s.kind == "mma"]
        for s in softmax:  # after iteration k's first GEMM, before its second
            k = s.iteration
            first, second = [m for m in mmas if m.iteration == k]
            assert first.end_ns <= s.start_ns and s.end_ns <= second.start_ns
        assert all(s.duration_ns > 0 for s in softmax)
    assert {s.cell_line for s in regions} == {line_of(timeline_kernels.__file__, 'tilelab.region("softmax")')}


def test_a_timeline_survives_a_file_and_compares_2_against_4_stages(tmp_path):
    two = tilelab.timeline(matmul(M, N, K, num_stages=2), blocks=(0, 5), overhead=False)
    four = tilelab.timeline(matmul(M, N, K, num_stages=4), blocks=(0, 5), overhead=False)
    assert Timeline.load(two.save(tmp_path / "two.json")) == two
    c = tilelab.compare_timelines(Timeline.load(tmp_path / "two.json"), four, names=("2 stages", "4 stages"))
    print(repr(c))
    k_tiles = math.ceil(K / BLOCK_K)
    fulls = [p for p in c.phases if p.role == "consumer" and "stage full" in p.label]
    assert fulls and all(p.a_count == p.b_count == k_tiles for p in fulls)
    mma = [p for p in c.phases if p.role == "consumer" and p.kind == "mma"]
    assert mma and all(p.a_count == p.b_count == k_tiles for p in mma)
    consumer = next(r for r in c.roles if r.role == "consumer")
    assert consumer.a_busy_ns > 0 and consumer.b_busy_ns > 0
