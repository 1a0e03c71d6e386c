"""Kernels that index by thread, run on the CPU by the thread-level rule (tilelab.run(device="cpu")).

Ground truth: torch on the same inputs. Each right kernel passes; each planted mistake
(tests/thread_kernels.py) fails: a wrong stride leaves elements unwritten, a missing barrier
reads a tree of partial sums before it is summed, an all-reduce over the wrong threads and a
butterfly one step short give other values. A barrier only some threads reach is refused by name
with its line."""

from __future__ import annotations

import re

import pytest
import thread_kernels as tk
import torch

import tilelab
from tilelab.launch import KernelLaunchError

pytestmark = pytest.mark.slow

CASES = {
    # name: (factory, reference, outputs)
    "strided_loop": (tk.strided_scale, lambda x: 3 * x - 1, None),
    "shared_tree_and_register_across_barriers": (
        tk.block_sum_share, lambda x: (x.sum(1), x.view(4, 4, 64).sum(1) / x.sum(1, keepdim=True)), ["S", "P"]),
    "gemv_thread_allreduce": (tk.gemv_allreduce, lambda w, x: w @ x, None),
    "shuffle_and_warp_reduce": (tk.warp_max, lambda x: x.view(-1, 128).amax(1), None),
}
# The mistake planted in each; make test runs the first, make test-heavy the others.
MISTAKES = [("shared_tree_and_register_across_barriers", "no_barrier"),
            pytest.param("strided_loop", "wrong_stride", marks=pytest.mark.heavy),
            pytest.param("gemv_thread_allreduce", "wrong_axis", marks=pytest.mark.heavy),
            pytest.param("shuffle_and_warp_reduce", "short", marks=pytest.mark.heavy)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_thread_indexed_kernel_runs_on_the_cpu_and_matches_torch(name):
    factory, ref, outputs = CASES[name]
    right = tilelab.run(factory(), device="cpu", ref=ref, seed=1, outputs=outputs)
    assert right.passed, right
    assert any("thread-level" in n for n in right.notes), right.notes


@pytest.mark.parametrize("name, bug", MISTAKES)
def test_a_planted_mistake_in_a_thread_indexed_kernel_fails(name, bug):
    factory, ref, outputs = CASES[name]
    wrong = tilelab.run(factory(bug=bug), device="cpu", ref=ref, seed=1, outputs=outputs)
    assert not wrong.passed, (name, bug, wrong)
    bad = [o for o in wrong.outputs if not o.passed]
    assert bad and all(o.unwritten or o.rel_error > o.tolerance for o in bad), wrong
    if bug == "wrong_stride":  # each block's threads cover 320 of its 512 elements (the last block: of 488)
        assert wrong.outputs[0].unwritten == (512 - 320) + (488 - 320)


def shuffles_ref(x):
    """CUDA's rules for each shuffle (a lane outside its group of ``width`` keeps its own value)."""
    n = len(x)
    lane = torch.arange(n) % 32
    base = torch.arange(n) - lane

    def take(src, ok):
        return torch.where(ok, x[(base + src).clamp(0, n - 1)], x)

    w = (x * 2).flip(0)
    ballot = ((x > 0).view(-1, 32).long() * (1 << torch.arange(32))).sum(1) & 0xFFFF
    return (take(lane + 3, lane + 3 < lane // 16 * 16 + 16), take(lane - 2, lane >= 2),
            x[base + lane // 8 * 8 + 5], w + w[base + (lane ^ 4)], ballot.repeat_interleave(32))


@pytest.mark.heavy
def test_each_warp_shuffle_follows_cudas_rules():
    result = tilelab.run(tk.shuffles(), device="cpu", outputs=["A", "B", "C", "D", "E"], ref=shuffles_ref, seed=2)
    assert result.passed, result


@pytest.mark.heavy  # make test checks its rewritten IR (below)
def test_tile_operations_under_a_branch_on_the_thread_run_once_for_the_threads_that_take_it():
    x = torch.randn(128)
    result = tilelab.run(tk.branch_by_thread(), x, device="cpu", outputs=["A", "B"],
                         ref=lambda x: (x + 1, torch.full_like(x, 2.0)))
    assert result.passed, result


def test_a_value_bound_alike_under_a_branch_on_the_thread_leaves_the_tile_loop_reading_it_once():
    """``w = W_s[k]`` under the ``else`` of ``tx < 32``: each of the 64 threads taking it holds the
    same value, so the tile loop accumulating ``w * X[k, i]`` runs once for them (it ran once per
    thread, 64 times the sum, without a word)."""
    x, w = torch.randn(4, 64), torch.rand(4)
    y = torch.zeros(64)
    result = tilelab.run(tk.weighted_rows_in_a_branch(), x, w, y, device="cpu", outputs=["Y"],
                         ref=lambda x, w: (w.double()[:, None] * x.double()).sum(0).float())
    assert result.passed, result


def test_an_access_outside_a_buffer_from_a_loop_over_the_threads_is_reported_never_performed():
    where = "write of Y[1000] (past its end: Y is 1000) in block (1, 0, 0)"
    with pytest.raises(KernelLaunchError, match=re.escape(where)):
        tilelab.run(tk.strided_scale(bug="past_end"), device="cpu",
                    pass_configs={"tl.disable_safe_memory_legalize": True})


@pytest.mark.parametrize("factory, construct, line_text", [
    (tk.divergent_barrier, r"a barrier under a condition on the thread \(divergent T.sync_threads\)",
     "T.sync_threads()"),
    (tk.divergent_shuffle, r"a warp operation under a condition on the thread", "v = v + T.shfl_down(v, 1)"),
    (tk.barrier_in_a_thread_loop, r"a barrier or warp operation in a loop whose trip count depends on the thread",
     "T.sync_threads()"),
])
def test_a_barrier_or_warp_operation_only_some_threads_reach_is_refused_by_name_with_its_line(
        factory, construct, line_text):
    with pytest.raises(tilelab.EmulationError, match=construct) as info:
        tilelab.run(factory(), device="cpu")
    assert f": {line_text})" in str(info.value) and "What still works: tilelab.inspect" in str(info.value)


# ------------------------------------------------------------------------------------------------
# The rule on the rewritten IR (no compile)
# ------------------------------------------------------------------------------------------------

def _loops_over_threads(script):
    return script.count("for tilelab_thread in range(")


def test_barriers_split_the_loops_over_the_threads_and_registers_get_a_slot_per_thread():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    emulation = rewrite_for_cpu(tk.block_sum_share(), "block_sum_share")
    assert "thread-level" in emulation.applied and "threads" in emulation.applied
    after = emulation.func.script()
    # before the first barrier, inside each step of the tree, after the last: three loops
    assert _loops_over_threads(after) == 3 and "tvm_storage_sync" not in after
    assert 'part = T.sblock_alloc_buffer((64, 1), scope="local")' in after  # one slot per thread
    assert 'tree = T.sblock_alloc_buffer((64,), scope="local")' in after  # shared: one array, as it was
    assert "part[tilelab_thread, 0]" in after and "tree[tilelab_thread + half]" in after
    # without the barrier in the tree, each thread runs all its steps in one loop
    wrong = rewrite_for_cpu(tk.block_sum_share(bug="no_barrier"), "block_sum_share").func.script()
    assert _loops_over_threads(wrong) == 2


def test_an_all_reduce_and_a_shuffle_are_split_in_a_staging_loop_and_a_reading_loop():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    gemv = rewrite_for_cpu(tk.gemv_allreduce(), "gemv_allreduce").func.script()
    assert "tvm_thread_allreduce" not in gemv and _loops_over_threads(gemv) == 2
    assert "tilelab_stage0[tilelab_thread] = acc[tilelab_thread, 0]" in gemv
    assert "tilelab_stage0[tilelab_lane + tilelab_thread // 32 * 32]" in gemv  # the lanes of the thread's row
    shuffled = rewrite_for_cpu(tk.warp_max(), "warp_max").func.script()
    assert "shfl" not in shuffled and "warp_reduce" not in shuffled


def test_a_float16_register_with_a_slot_per_thread_still_rounds_at_every_store():
    from tilelab._tilelang.emulate import ROUND_FUNCTION, _late_pass, rewrite_for_cpu
    from tilelab._tilelang.env import tilelang

    emulation = rewrite_for_cpu(tk.gemv_allreduce(acc_dtype="float16"), "gemv_allreduce")
    assert emulation.narrow["acc"] == "float16" and emulation.narrow["total"] == "float16"
    after = emulation.func.script()
    assert 'acc = T.sblock_alloc_buffer((128, 1), scope="local")' in after  # float32 storage, a slot per thread
    tvm = tilelang().tvm
    late = _late_pass(emulation)(tvm.IRModule({"main": emulation.func}))["main"].script()
    assert f"acc[tilelab_thread, 0] = T.call_extern(\"float32\", \"{ROUND_FUNCTION}\"" in late
    assert f"total[tilelab_thread, 0] = T.call_extern(\"float32\", \"{ROUND_FUNCTION}\"" in late


def test_tile_operations_under_a_branch_on_the_thread_stay_outside_the_loops():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    after = rewrite_for_cpu(tk.branch_by_thread(), "branch_by_thread").func.script()
    assert _loops_over_threads(after) == 0  # threads 0-31 take one side, 32-95 the other: both run once
    assert after.count("T.fill(") == 1 and "for i in range(128):" in after


def test_a_named_barrier_of_exactly_the_threads_that_reach_it_splits_their_loops():
    from tilelab._tilelang.emulate import EmulationRefused, rewrite_for_cpu

    after = rewrite_for_cpu(tk.named_barrier(64), "named_barrier").func.script()
    assert _loops_over_threads(after) == 2 and after.count("if tilelab_thread < 64:") == 2
    with pytest.raises(EmulationRefused, match=r"divergent T.sync_threads\) \(line \d+: T.sync_threads\(1, count\)\)"):
        rewrite_for_cpu(tk.named_barrier(96), "named_barrier")


def test_a_kernel_without_threads_runs_tilelangs_default_block_of_128():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    after = rewrite_for_cpu(tk.no_threads_given(), "no_threads_given").func.script()
    # the loop over the threads (printed with the block mask's loop around it as one grid)
    assert re.search(r"tilelab_thread in (range\(128\)|T\.grid\(.*, 128\))", after), after
    assert "tn" not in after.split("tilelang_root")[1]


def test_the_rule_is_listed_with_what_it_does_and_why():
    rules = {r.id: r for r in tilelab.launch.EMULATION_RULES}
    assert "barrier" in rules["thread-level"].does and "loops over the block's threads" in rules["thread-level"].does
    assert rules["thread-level"].why


@pytest.mark.heavy  # about 5 s: its lowering is long
@pytest.mark.parametrize("trans_b", [False, True])
def test_a_warps_ldmatrix_and_mma_sync_by_hand_compute_its_tile_product(trans_b):
    a, b = torch.randn(16, 16).half(), torch.randn(8, 16).half()
    c = torch.zeros(16, 8)
    given_b = b.T.contiguous() if trans_b else b  # .trans loads B stored K-major
    result = tilelab.run(tk.mma_atom(trans_b=trans_b), a, given_b, c, device="cpu", outputs=["C"],
                         ref=lambda a, b: a.float() @ (b.float() if trans_b else b.float().T))
    assert result.passed, result
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-5, atol=1e-5)


@pytest.mark.heavy
def test_an_ldmatrix_whose_lanes_give_the_wrong_rows_is_caught():
    a, b = torch.randn(16, 16).half(), torch.randn(8, 16).half()
    wrong = tilelab.run(tk.mma_atom(wrong_lane=True), a, b, torch.zeros(16, 8), device="cpu", outputs=["C"],
                        ref=lambda a, b: a.float() @ b.float().T)
    assert not wrong.passed
