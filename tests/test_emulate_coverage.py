"""The CPU path on the constructs upstream kernels use (benchmarks/emulation_coverage.py measures
it on TileLang's examples): each failure class found there has one small kernel of our own here,
run on the CPU (two of its blocks) and checked against torch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

import tilelab  # noqa: E402

import emulation_kernels as ek  # noqa: E402


def test_jit_kernel_with_empty_output_runs_with_its_own_out_idx():
    func = ek.scaled_copy_empty_output.get_tir(M=64, N=96)
    # the 2 x 3 grid: the first and the last block
    result = tilelab.run(func, device="cpu", blocks=[0, 5], seed=1, ref=lambda a: a.float() * 2.0)
    assert result.passed, result
    assert [o.name for o in result.outputs] == ["B"]
    assert any("wrote 2048 of 6144 elements of B" in n for n in result.notes)
    # a wrong scale is caught
    wrong = tilelab.run(func, device="cpu", blocks=[0, 5], seed=1, ref=lambda a: a.float() * 3.0)
    assert not wrong.passed


def test_views_declared_over_a_tensors_data_follow_its_cpu_form():
    func = ek.reshaped_view_copy  # 128 rows of 64: 4 blocks
    result = tilelab.run(func, device="cpu", blocks=[0, 3], outputs=["Y"], seed=2,
                         ref=lambda x: x.float() + 1)
    assert result.passed, result
    assert any("wrote 4096 of 8192 elements of Y" in n for n in result.notes)
    wrong = tilelab.run(func, device="cpu", blocks=[0, 3], outputs=["Y"], seed=2, ref=lambda x: x.float() + 2)
    assert not wrong.passed
