"""The CPU path's ``warp-roles`` rule: hand-written warp specialisation (``T.ws``) and mbarriers run
in program order. A producer/consumer GEMM (tests/ws_kernels.py) is verified against torch, a
K loop one short is caught by its values, a consumer written before its producer and a missing
arrive are reported by barrier and line (a failed run that never hangs), a two-stage pipe over an
array of mbarriers waited on by parity runs (and a wrong parity is reported), and what the rule
cannot give a meaning is refused. The K loop one short, the missing arrive and the two-stage pipe
are heavy proofs (make test-heavy)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import ws_kernels as wk

import tilelab
from tilelab.launch import KernelLaunchError


def _inputs():
    torch.manual_seed(0)
    return torch.randn(wk.M, wk.K, dtype=torch.float16), torch.randn(wk.K, wk.N, dtype=torch.float16)


def _ref(a, b):
    return (a.float() @ b.float()).half()


def test_a_producer_consumer_gemm_through_two_mbarriers_runs_in_program_order():
    a, b = _inputs()
    result = tilelab.run(wk.handoff_gemm(), a, b, device="cpu", ref=lambda a, b: _ref(a, b))
    assert result.passed, result
    assert "warp-roles" in str(result)


@pytest.mark.heavy
def test_a_k_loop_one_short_is_caught_by_its_values():
    a, b = _inputs()
    result = tilelab.run(wk.handoff_gemm(bug="k_short"), a, b, device="cpu", ref=lambda a, b: _ref(a, b))
    assert not result.passed


@pytest.mark.parametrize("bug, waiting", [("consumer_first", "loaded"),
                                          pytest.param("no_arrive", "loaded", marks=pytest.mark.heavy)])
def test_a_wait_program_order_never_meets_is_reported_with_its_barrier_and_line(bug, waiting):
    a, b = _inputs()
    with pytest.raises(KernelLaunchError, match=rf"needs its warp groups to run at the same time: waiting on "
                                                rf"{waiting} \(parity 0\) at line \d+") as info:
        tilelab.run(wk.handoff_gemm(bug=bug), a, b, device="cpu")
    wait = info.value.protocol_waits[0]
    source = Path(wk.__file__).read_text().splitlines()[wait.index[2] - 1]
    assert "T.barrier_wait(loaded, ko % 2)" in source
    assert info.value.isolated


@pytest.mark.heavy
def test_a_two_stage_pipe_over_an_array_of_mbarriers_waits_by_parity():
    a, b = _inputs()
    assert tilelab.run(wk.staged_gemm(), a, b, device="cpu", ref=lambda a, b: _ref(a, b)).passed
    with pytest.raises(KernelLaunchError, match=r"waiting on bars\[0\] \(parity 1\)"):
        tilelab.run(wk.staged_gemm(bug="parity"), a, b, device="cpu")


def test_the_rule_rewrites_regions_and_barriers_and_refuses_what_it_cannot_mean():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    after = rewrite_for_cpu(wk.staged_gemm(), "staged").func.script()
    assert "warp_specialize" not in after and "mbarrier" not in after and "tma_copy" not in after
    assert "barrier_init" not in after and '"tilelab_emu_oob", T.int64(-2), T.int64(2)' in after
    rules = {r.id: r for r in tilelab.launch.EMULATION_RULES}
    assert "T.ws" in rules["warp-roles"].does and "parity" in rules["warp-roles"].does
    # an arrive under a condition on data is the thread-level rule's: each thread that takes it arrives
    by_data = rewrite_for_cpu(wk.arrive_by_some_threads(by_data=True), "some")
    assert "thread-level" in by_data.applied and "warp-roles" not in by_data.applied
    assert "tilelab_arrived" in by_data.func.script().split("for tilelab_thread in range(64)", 1)[1]


@pytest.mark.heavy
def test_an_arrive_under_a_condition_on_data_counts_each_thread_that_takes_it():
    some = torch.linspace(-1, 1, 64)  # 32 positive: the count
    assert tilelab.run(wk.arrive_by_some_threads(by_data=True), some, device="cpu", ref=lambda a: a).passed
    with pytest.raises(KernelLaunchError, match=r"a deadlock: .* waiting on ready \(parity 0\)"):
        tilelab.run(wk.arrive_by_some_threads(by_data=True), some - 0.5, device="cpu")  # 16 positive


def test_an_arrive_under_a_branch_on_the_thread_counts_the_threads_it_picks():
    x = torch.randn(64)
    assert tilelab.run(wk.arrive_by_some_threads(32), x, device="cpu", ref=lambda a: a).passed
    with pytest.raises(KernelLaunchError, match=r"waiting on ready \(parity 0\)"):
        tilelab.run(wk.arrive_by_some_threads(16), x, device="cpu")  # 16 arrivals of 32: never completes


@pytest.mark.heavy
def test_code_by_thread_in_a_region_runs_for_that_groups_threads():
    x = torch.randn(256)
    want = torch.cat([x[:128] * 2, x[128:] + 1])
    assert tilelab.run(wk.per_thread_roles(), x, device="cpu", ref=lambda a: want).passed
