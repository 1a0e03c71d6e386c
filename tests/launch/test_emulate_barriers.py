"""mbarriers under the thread-level rule of the CPU path (tilelab/_tilelang/emulate_barriers.py):
groups of threads, split by branches on the thread index, that hand tiles to each other through
mbarriers, each thread's arrival counted where it stands (under conditions on the thread too).

Ground truth: torch on the same inputs (tests/barrier_kernels.py's reference), and the kernel's own
source for the line a deadlock names. The relay's consumer is written before its producer (program
order alone would wait forever): it runs and matches torch; with too few arrivals on a barrier it
is a deadlock named by barrier, parity and line, and the process goes on; a wait on the wrong parity
passes at once as PTX says, and the values catch it (heavy). Also here: the lowering-time
regression of the block mask (a branch around a block's body that TileLang's IfStmtBinding pushed
into every statement)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import barrier_kernels as bk
import varlen_kernels as vk

import tilelab
from tilelab.launch import KernelLaunchError

pytestmark = pytest.mark.slow


def _input():
    torch.manual_seed(0)
    return torch.randn(bk.TILES * bk.TILE * bk.BLOCKS)


def test_groups_that_wait_on_each_other_take_turns_and_match_torch():
    result = tilelab.run(bk.relay(), _input(), device="cpu", ref=bk.reference)
    assert result.passed, result
    assert any("thread-level" in n for n in result.notes), result.notes


def test_a_phase_too_few_threads_arrive_on_is_a_deadlock_named_with_its_barrier_and_line():
    with pytest.raises(KernelLaunchError, match=r"a deadlock: every group of threads waits") as info:
        tilelab.run(bk.relay(bug="odd_short"), _input(), device="cpu")
    waits = info.value.protocol_waits
    source = Path(bk.__file__).read_text().splitlines()
    # the consumer waits for a tile the producer cannot load; the producer for a slot never freed
    named = {(w.buffer, source[w.index[2] - 1].strip()) for w in waits}
    assert ("full", "T.barrier_wait(full[k % 2], (k // 2) % 2)") in named, named
    assert ("free", "T.barrier_wait(free[k % 2], ((k // 2) % 2) ^ 1)") in named, named
    assert all(w.block[0] in (0, 1) for w in waits)
    assert info.value.isolated


def test_each_warp_waiting_on_its_own_mbarrier_is_met_when_every_warps_is_and_matches_torch():
    a = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    result = tilelab.run(bk.own_rows(), a, device="cpu", ref=lambda a: a[:, 0] + a[:, -1])
    assert result.passed, result
    assert any("thread-level" in n for n in result.notes), result.notes


@pytest.mark.heavy
def test_a_thread_chosen_mbarrier_whose_count_no_warp_reaches_is_a_deadlock_named_with_its_line():
    with pytest.raises(KernelLaunchError, match=r"a deadlock: every group of threads waits") as info:
        tilelab.run(bk.own_rows(bug="count"), torch.randn(8, 64), device="cpu")
    source = Path(bk.__file__).read_text().splitlines()
    waits = info.value.protocol_waits
    assert {w.buffer for w in waits} == {"bars"}
    assert {w.index[0] for w in waits} == {0, 1, 2, 3}  # every warp's own barrier, in both blocks
    assert {source[w.index[2] - 1].strip() for w in waits} == {"T.mbarrier_wait_parity(mbarrier=bars[w], parity=0)"}


def test_one_sided_named_barriers_let_a_reader_written_first_wait_for_its_writer():
    a = torch.randn(64, generator=torch.Generator().manual_seed(2))
    result = tilelab.run(bk.named_handoff(), a, device="cpu", ref=lambda a: 2 * (a + 1))
    assert result.passed, result


@pytest.mark.heavy
def test_a_named_barrier_no_writer_arrives_on_is_a_deadlock_at_its_sync():
    with pytest.raises(KernelLaunchError, match=r"a deadlock: every group of threads waits") as info:
        tilelab.run(bk.named_handoff(bug="no_arrive"), torch.randn(64), device="cpu")
    source = Path(bk.__file__).read_text().splitlines()
    named = {(w.buffer, w.index[0], source[w.index[2] - 1].strip()) for w in info.value.protocol_waits}
    assert named == {("named_barriers", 1, "T.sync_threads(1, 64)"), ("named_barriers", 2, "T.sync_threads(2, 64)")}


@pytest.mark.heavy
def test_a_wait_on_the_wrong_parity_passes_at_once_and_the_values_catch_it():
    result = tilelab.run(bk.relay(bug="parity"), _input(), device="cpu", ref=bk.reference)
    assert not result.passed


def test_the_rewrite_counts_arrivals_per_thread_and_leaves_no_mbarrier_op():
    from tilelab._tilelang.emulate import EmulationRefused, rewrite_for_cpu

    after = rewrite_for_cpu(bk.relay(), "relay").func.script()
    assert "mbarrier" not in after and "arrive_barrier" not in after and "barrier_init" not in after
    assert "tilelab_turns0" in after and "tilelab_group_step" not in after and "tilelab_emu_arrive" not in after
    # each arrival adds one, inside the loop over the threads that reach it
    loops = after.split("for tilelab_thread in range(96)")
    assert sum("tilelab_arrived" in part for part in loops[1:]) == 3, after
    refused = r"an mbarrier wait only some threads of a group make"
    with pytest.raises(EmulationRefused, match=refused) as info:
        rewrite_for_cpu(bk.relay(bug="wait_by_some"), "relay")
    source = Path(bk.__file__).read_text().splitlines()
    assert "if tx < TILE // 2:" in source[info.value.line - 2]  # the wait under the condition, not another


def test_the_block_mask_is_a_loop_that_tilelangs_branch_binding_leaves_whole():
    """A branch around a block's body was pushed by TileLang's IfStmtBinding into each of its
    statements, each re-proved by Simplify with every condition under it (a minute for a varlen
    attention kernel); the mask is a loop of one trip or none, read once."""
    from tilelab._tilelang import tilelang
    from tilelab._tilelang.emulate import rewrite_for_cpu

    emulation = rewrite_for_cpu(vk.varlen_rows(), "rows")
    text = emulation.func.script()
    assert re.search(r"for tilelab_selected in range\(T\.Cast\(\"int32\", tilelab_blocks", text), text
    assert "if tilelab_blocks" not in text
    tvm = tilelang().tvm
    mod = tvm.IRModule({"main": emulation.func})
    with tvm.transform.PassContext(opt_level=3), tvm.target.Target("c"):
        bound = tilelang().transform.IfStmtBinding()(tilelang().transform.Simplify()(mod))
    assert bound["main"].script().count("tilelab_blocks[") == 1
