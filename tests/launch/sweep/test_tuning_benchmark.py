"""benchmarks/tuning.py without a GPU: its spaces, its tables on recorded-looking results (every
figure checked against a hand computation), and a failing child reported, not raised."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from fake_gpu import SweepGpu, v_around_64

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tuning():
    spec = importlib.util.spec_from_file_location("tuning_benchmark", ROOT / "benchmarks" / "tuning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spaces_are_the_asked_ones(tuning):
    size, configs = tuning.gemm_space(quick=False)
    assert size == dict(M=8192, N=8192, K=8192) and len(configs) == 64
    assert {c["block_M"] for c in configs} == {c["block_N"] for c in configs} == {128, 256}
    assert {c["num_stages"] for c in configs} == {2, 3, 4, 5} and {c["raster"] for c in configs} == {0, 10}
    assert {c["smem_epilogue"] for c in configs} == {False, True}
    assert len({tuple(sorted(c.items())) for c in configs}) == 64  # no duplicates
    size, configs = tuning.fa_space(quick=False)
    assert len(configs) == 24 and len({tuple(sorted(c.items())) for c in configs}) == 24
    assert len(tuning.gemm_space(quick=True)[1]) == 16 and len(tuning.fa_space(quick=True)[1]) == 8


THEIRS = {"tool": "TileLang AutoTuner", "space": "gemm", "size": {"M": 8192, "N": 8192, "K": 8192}, "configs": 64,
          "wall_s": 180.0, "best_config": {"block_M": 128, "num_stages": 4}, "best_ms": 1.6412}
OURS = {"tool": "tilelab.sweep (halving)", "space": "gemm", "size": {"M": 8192, "N": 8192, "K": 8192}, "configs": 64,
        "wall_s": 72.0, "best_config": {"block_M": 128, "num_stages": 3}, "best_ms": 1.6602}


def test_search_table_states_both_verdicts(tuning):
    retime = {"ratio": 1.0042, "ratio_ci": [1.0031, 1.0050], "ours_ms": 1.6500, "theirs_ms": 1.6431, "same": False}
    text = tuning.search_table("gemm", THEIRS, OURS, retime)
    assert "M=8192, N=8192, K=8192" in text
    assert "180.0" in text and "72.0" in text and "block_M=128, num_stages=3" in text
    assert "tilelab 0.40x the AutoTuner's (target <= 0.5x): met" in text  # 72 / 180
    assert "= 1.0042 (95% CI 1.0031-1.0050)" in text and "(target <= 1.01): met" in text
    slow = dict(OURS, wall_s=120.0)
    worse = dict(retime, ratio=1.02)
    text = tuning.search_table("gemm", THEIRS, slow, worse)
    assert "0.67x" in text and "NOT met" in text and text.count("NOT met") == 2
    told = tuning.search_table("gemm", dict(THEIRS, how="14 threads"), dict(OURS, how="16 processes",
                               rungs="successive halving at size 8192x8192x8192 (eta=3): rung 0: 40"), retime)
    assert "how: TileLang AutoTuner: 14 threads" in told and "how: tilelab.sweep (halving): 16 processes" in told
    assert "tilelab's rungs: successive halving at size 8192x8192x8192 (eta=3): rung 0: 40" in told


def test_a_failed_search_prints_its_reason(tuning):
    failed = {"tool": "TileLang AutoTuner", "error": "Traceback ...\nRuntimeError: Auto-tuning failed: none compiled\n"}
    text = tuning.search_table("fa", failed, OURS, {"error": "no best configuration to compare (a search failed)"})
    assert "failed: RuntimeError: Auto-tuning failed: none compiled" in text
    assert "time:" not in text and "side by side: failed: no best configuration" in text


def test_ratio_table_spreads_by_hand(tuning):
    calls = [dict(median_ms=m, baseline_ms=b, ratio=r, ratio_ci=[r - 0.001, r + 0.001], pairs=60)
             for m, b, r in ((1.640, 1.650, 0.9940), (1.690, 1.700, 0.9941), (1.656, 1.667, 0.9934),
                             (1.662, 1.672, 0.9950))]
    text = tuning.ratio_table({"size": 8192, "calls": calls, "device": "NVIDIA H100"})
    # medians: (1.690 - 1.640) / median(1.640, 1.656, 1.662, 1.690) = 0.050 / 1.659
    assert f"{100 * 0.050 / 1.659:.2f}%" in text
    # ratios: (0.9950 - 0.9934) / median = 0.0016 / 0.99405
    assert f"of the ratios {100 * 0.0016 / 0.99405:.2f}%" in text
    assert "met" in text and "NOT met" not in text and "on NVIDIA H100" in text
    assert "failed: boom" in tuning.ratio_table({"error": "boom"})
    assert tuning.spread([1.0]) is None and tuning.spread([1.0, None, 3.0]) == pytest.approx(2 / 2.0)


def test_a_child_that_fails_comes_back_as_an_error(tuning, tmp_path):
    result = tuning.run_child(["no-such-part"], timeout=120)
    assert "unknown child 'no-such-part'" in result["error"]


def test_retime_words_parse_after_the_json_configurations(tuning, monkeypatch):
    seen = {}
    monkeypatch.setattr(tuning, "child_retime", lambda space, quick, ours, theirs: seen.update(
        space=space, quick=quick, ours=ours, theirs=theirs) or {"ok": True})
    out = tuning._child(["retime", "gemm", json.dumps({"block_M": 128}), json.dumps({"block_M": 256}), "--quick"],
                        False)
    assert out == {"ok": True} and seen == dict(space="gemm", quick=True, ours={"block_M": 128},
                                                theirs={"block_M": 256})


@pytest.mark.parametrize("space", ["gemm", "fa"])
def test_the_autotuner_gets_a_function_it_accepts(tuning, space):
    """TileLang's AutoTuner refuses closures over anything but ints, floats, strings, bools and
    None; each space's function elaborates every configuration's keywords to a prim_func."""
    import tilelang.language as T

    size, configs = getattr(tuning, f"{space}_space")(quick=True)
    kernel = tuning.autotuner_kernel(space, size)
    assert all(isinstance(c.cell_contents, (int, float, str, bool, type(None))) for c in kernel.__closure__)
    func = kernel(**configs[0])
    assert isinstance(func, T.PrimFunc) if hasattr(T, "PrimFunc") else type(func).__name__ == "PrimFunc"


def test_the_flash_attention_forward_lowers_for_hopper_with_two_wgmma():
    """Lowered for sm_90a without a GPU: one block per 128 queries of each head and batch, the two
    matrix products (Q K^T and P V) on WGMMA, the softmax in base 2."""
    import tilelab
    from tilelab.kernels.flash_attention import flash_attention

    report = tilelab.inspect(flash_attention(2, 4, 1024, 128, block_M=128, block_N=64, num_stages=2, threads=256,
                                             is_causal=True), target="sm_90a")
    (kernel,) = report.kernels
    assert kernel.grid == (1024 // 128, 4, 2)
    assert len(report.wgmma) == 2
    assert "exp2" in report.sources.device


def test_the_rung_breakdown_reads_the_sweeps_note(tuning):
    note = ("successive halving at size M=8192, N=8192, K=8192 (eta=3): rung 0: 48 (20 ms of launches, one round; "
            "20.8 s, 16 pruned in their compile tasks), rung 1: 16 (60 ms of launches, one round; 2.4 s), "
            "rung 2: 6 (180 ms of launches, one round; 1.9 s), rung 3: 2 (full rounds; 6.1 s)")
    assert tuning.rung_breakdown(note) == [
        {"rung": 0, "measured": 48, "how": "20 ms of launches, one round", "seconds": 20.8, "pruned": 16},
        {"rung": 1, "measured": 16, "how": "60 ms of launches, one round", "seconds": 2.4, "pruned": 0},
        {"rung": 2, "measured": 6, "how": "180 ms of launches, one round", "seconds": 1.9, "pruned": 0},
        {"rung": 3, "measured": 2, "how": "full rounds", "seconds": 6.1, "pruned": 0}]


def test_the_rung_breakdown_reads_what_a_halving_sweep_writes(tuning):
    from tilelab.launch.sweep import sweep

    gpu = SweepGpu(v_around_64)
    table = sweep(lambda N, block: None, {"block": [16, 32, 48, 64, 80, 96, 112, 128, 144]}, {"N": [1024]},
                  strategy="halving", prune=False, compile_fn=gpu.compile, bench_fn=gpu.bench, progress=False)
    (note,) = [n for n in table.notes if n.startswith("successive halving")]
    rungs = tuning.rung_breakdown(note)
    assert [(r["rung"], r["measured"], r["pruned"]) for r in rungs] == [(0, 9, 0), (1, 3, 0)]  # 9 -> the fastest 3
    assert rungs[0]["how"] == "20 ms of launches, one round" and rungs[1]["how"] == "full rounds"
    assert all(r["seconds"] >= 0 for r in rungs)
    assert sum(1 for r in table.rows if r.rung == 1) == 3


def test_parts_expand_in_the_order_they_must_run(tuning):
    assert tuning.parts_of("ratios,gemm") == ["gemm-autotuner", "gemm-tilelab", "gemm-retime", "ratios"]
    assert tuning.parts_of("fa-retime,fa-autotuner") == ["fa-autotuner", "fa-retime"]
    with pytest.raises(SystemExit, match="no part 'gem'"):
        tuning.parts_of("gem")


def test_each_part_is_saved_as_it_ends_and_the_retime_reads_both_searches(tuning, tmp_path, monkeypatch, capsys):
    """Three commands, as on a machine that allows a few minutes per command: each part's JSON is
    in --out when its command ends; the retime gets the two saved answers; the last prints the table."""
    calls = []

    def fake_child(args, timeout):
        calls.append((args, timeout))
        if args[0] == "autotuner":
            return dict(THEIRS)
        if args[0] == "tilelab":
            return dict(OURS)
        return {"space": "gemm", "ratio": 0.9971, "ratio_ci": [0.9950, 0.9990], "ours_ms": 1.6400,
                "theirs_ms": 1.6448, "same": False, "pairs": 96}

    monkeypatch.setattr(tuning, "run_child", fake_child)
    tuning.main(["--only", "gemm-autotuner", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "gemm-autotuner.json").read_text())["wall_s"] == 180.0
    assert not (tmp_path / "gemm-tilelab.json").exists()
    tuning.main(["--only", "gemm-tilelab,gemm-retime", "--out", str(tmp_path), "--timeout", "500"])
    retime_args, timeout = calls[-1]
    assert retime_args == ["retime", "gemm", json.dumps(OURS["best_config"]), json.dumps(THEIRS["best_config"])]
    assert timeout == 500.0
    capsys.readouterr()
    tuning.main(["--report", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert len(calls) == 3  # the report ran nothing
    assert "tilelab 0.40x the AutoTuner's (target <= 0.5x): met" in text  # 72 / 180
    assert "= 0.9971 (95% CI 0.9950-0.9990)" in text and "(target <= 1.01): met" in text


def test_a_retime_without_its_searches_says_which_to_run(tuning, tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "run_child", lambda args, timeout: pytest.fail("no child should start"))
    tuning.save_part(tmp_path, "fa-autotuner", dict(THEIRS, space="fa"))
    result = tuning.run_part("fa-retime", tmp_path, quick=False, timeout=60)
    assert "run fa-tilelab first" in result["error"]
    assert json.loads((tmp_path / "fa-retime.json").read_text())["error"] == result["error"]
    assert "not run yet" in tuning.report(tmp_path) and "nothing saved" in tuning.report(tmp_path / "none")


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_child_past_its_timeout_ends_with_everything_it_started_and_keeps_what_it_saved(tuning):
    """A part that runs too long (a child that starts a process of its own, which holds the child's
    output open, and never answers) comes back as an error within its timeout, with what the child
    saved before; the child's process group ends with it, so nothing it started keeps the GPU."""
    import time as _time

    result = tuning.run_child(["wait"], timeout=6)
    assert result["error"] == "no answer within 6 s (the result holds what finished before)"
    assert result["waited"] is True
    deadline = _time.monotonic() + 30  # the system's own time to reap a killed process, not the test's
    while not _gone(result["grandchild"]) and _time.monotonic() < deadline:
        _time.sleep(0.05)
    assert _gone(result["grandchild"])


def test_a_ratios_part_cut_short_still_shows_the_calls_it_made(tuning):
    calls = [dict(median_ms=1.64, baseline_ms=1.65, ratio=0.994, ratio_ci=[0.993, 0.995], pairs=60)]
    text = tuning.ratio_table({"size": 8192, "calls": calls, "error": "no answer within 555 s (the result holds "
                               "what finished before)"})
    assert "0.9940" in text and "stopped after 1 call(s): no answer within 555 s" in text
    assert "spread of the kernel's medians -" in text  # one call: no spread


@pytest.fixture(scope="module")
def multi_gpu():
    path = ROOT / "benchmarks" / "sweep_multi_gpu.py"
    spec = importlib.util.spec_from_file_location("sweep_multi_gpu_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(median_ms, ratio=None, device="cuda:0", **extra):
    from tilelab.launch import SweepRow

    return SweepRow((("block_M", 128),), (("M", 8192),), median_ms=median_ms, ratio=ratio, device=device, **extra)


def test_the_repeat_figure_holds_by_ratio_where_the_clock_wandered_between_calls(multi_gpu):
    """The best configuration timed again alone on cuda:0 after the sweep, on a clock 2.5% slower:
    its medians miss the sweep's by 2.5% (a FAIL by median), its ratios to torch.matmul, timed
    beside it, agree within 0.1% (a PASS by ratio); the absolute medians are printed beside."""
    best = _row(1.000, ratio=0.9500)
    per_gpu = {0: [_row(1.025, 0.9510), _row(1.030, 0.9490), _row(1.020, 0.9505)],
               1: [_row(1.040, 0.9600, device="cuda:1")]}
    ok, alone, lines = multi_gpu.compare_alone(per_gpu, best, by_ratio=True)
    assert ok and alone == {0: pytest.approx(0.9505), 1: pytest.approx(0.96)}
    first = lines[0]
    assert "cuda:0 alone, 3 runs: ratio to torch.matmul 0.9505" in first
    assert f"{100 * (0.9505 / 0.95 - 1):+.2f}% vs the 1-GPU sweep's 0.9500" in first and "PASS" in first
    assert "absolute medians 1.0250, 1.0300, 1.0200 ms, +2.50% vs the sweep's 1.0000 ms" in first
    assert f"spread {100 * (0.9510 - 0.9490) / 0.9505:.2f}%" in first
    assert "another board, not a target" in lines[1]
    assert lines[2].startswith("    board difference, cuda:1 alone vs cuda:0 alone: "
                               f"{100 * (0.96 / 0.9505 - 1):+.2f}% by ratio to torch.matmul")
    ok, alone, lines = multi_gpu.compare_alone(per_gpu, best, by_ratio=False)
    assert not ok and alone[0] == pytest.approx(1.025) and "+2.50% vs the 1-GPU sweep's 1.0000 ms" in lines[0]
    assert "FAIL" in lines[0]


def test_the_final_comparison_uses_the_final_rounds_ratio_to_torch_matmul(multi_gpu):
    from tilelab.launch import SweepTable

    best = _row(1.000, ratio=0.9500)
    winner = _row(1.031, ratio=0.9530, device="cuda:1", final_ms=1.028, final_device="cuda:0", final_ratio=0.9520,
                  best=True)
    spread = SweepTable(kernel="matmul", rows=(winner,), factory="matmul")
    ok, lines = multi_gpu.compare_final(spread, best, 2, by_ratio=True)
    assert ok and "ratio to torch.matmul 0.9520 (1.0280 ms) (cuda:0, final round; as on 1 GPU)" in lines[0]
    assert f"{100 * (0.952 / 0.95 - 1):+.2f}% vs the 1-GPU sweep's best (0.9500, 1.0000 ms)" in lines[0]
    ok, lines = multi_gpu.compare_final(spread, best, 2, by_ratio=False)
    assert ok is False and "median 1.0280 ms" in lines[0] and "+2.80%" in lines[0] and "FAIL" in lines[0]


def test_the_final_rounds_time_is_read_from_its_note(multi_gpu):
    from tilelab.launch import SweepTable

    note = ("final round: the 3 fastest configurations at each size were timed again on cuda:0, each side by side "
            "with torch.matmul (batches alternating in one window), and ranked by their ratio to it (2 timed, 6.3 s; "
            "1 whose ratio was measured there in the sweep kept it): ...")
    table = SweepTable(kernel="matmul", rows=(), notes=(note,))
    assert multi_gpu._final_round_time(table) == "of which the final round: 2 configurations timed on cuda:0 in 6.3 s"
    assert multi_gpu._final_round_time(SweepTable(kernel="m", rows=())).startswith("no final round")


def test_a_sweeps_wall_time_splits_per_gpu_and_the_final_round(multi_gpu):
    """Row steps of two GPUs (index < 4 configurations), a baseline's and a final round's: each GPU's
    rows, busy and idle seconds, and the round after the rows, from the trace alone."""
    events = [("cuda:0", 0, False, 0.5, 2.5), ("cuda:1", 1, False, 0.6, 2.6), ("cuda:0", 2, False, 2.7, 4.7),
              ("cuda:1", 3, False, 2.6, 5.6), ("cuda:0", 4, True, 5.7, 5.8), ("cuda:1", 5, False, 5.9, 7.0)]
    parts = multi_gpu.breakdown(events, 4, 7.2)
    assert parts["rows_end_s"] == 5.6
    zero, one = parts["devices"]["cuda:0"], parts["devices"]["cuda:1"]
    assert (zero["rows"], zero["start_s"]) == (2, 0.5) and zero["busy_s"] == pytest.approx(4.0)
    assert zero["row_s"] == pytest.approx(2.0) and zero["gaps_s"] == pytest.approx(0.2)
    assert zero["tail_s"] == pytest.approx(0.9) and one["tail_s"] == pytest.approx(0.0)
    assert parts["final"]["timed"] == 1 and parts["final"]["on"] == ["cuda:1"]
    assert parts["final"]["busy_s"] == pytest.approx(1.1)
    lines = multi_gpu.breakdown_lines(parts)
    assert "cuda:0:  2 rows" in lines[0] and "idle at the end 0.90 s" in lines[0]
    assert "after them 1.6 s" in lines[-1] and "1 timed on cuda:1" in lines[-1]
    assert [multi_gpu.scaling_target(k) for k in (1, 2, 4)] == pytest.approx([0.9, 1.8, 3.4])
