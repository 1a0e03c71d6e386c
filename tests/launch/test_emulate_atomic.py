"""Outputs written only by atomic adds (a split-K GEMM's) start at zero on the CPU path, not
poisoned; an element no block added to is still found."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

import cpu_path_kernels as ck  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402


def _matmul(a, b):
    return a @ b


def test_atomic_add_outputs_are_found_in_the_ir():
    assert _tilelang.atomic_add_outputs(ck.splitk_gemm()) == ("C",)
    assert _tilelang.atomic_add_outputs(ck.splitk_gemm(tile_add=True)) == ("C",)
    assert _tilelang.atomic_add_outputs(ck.gemm()) == ()  # C is written by a copy


def test_a_split_k_gemm_starts_at_zero_and_an_element_never_added_to_is_found():
    right = tilelab.run(ck.splitk_gemm(), device="cpu", seed=0, ref=_matmul)
    assert right.passed, right
    assert right.outputs[0].unwritten == 0
    assert any("C is written only by atomic adds, so it started at zero" in n for n in right.notes)
    half = tilelab.run(ck.splitk_gemm(bug="half_tile"), device="cpu", seed=0, ref=_matmul)
    assert not half.passed
    assert half.outputs[0].unwritten == 64 * 64 // 2  # the lower half of every tile's rows
    assert half.outputs[0].first_unwritten == (16, 0)


@pytest.mark.heavy
def test_a_split_k_gemm_adding_whole_tiles_runs_and_a_wrong_slice_is_caught():
    tiles = tilelab.run(ck.splitk_gemm(tile_add=True), device="cpu", seed=0, ref=_matmul)
    assert tiles.passed, tiles
    wrong = tilelab.run(ck.splitk_gemm(bug="same_slice"), device="cpu", seed=0, ref=_matmul)
    assert not wrong.passed and wrong.outputs[0].unwritten == 0 and wrong.outputs[0].rel_error > 0.1
