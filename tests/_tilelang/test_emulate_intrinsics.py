"""The intrinsics rule of the CPU path (tilelab/_tilelang/emulate_intrinsics.py): each TileLang
intrinsic its C back end lacks runs with TileLang's meaning of it, checked against numpy on the
same inputs (tests/intrinsic_kernels.py); an intrinsic outside the table is refused by name with
its line."""

from __future__ import annotations

import intrinsic_kernels as ik
import numpy as np
import pytest
import torch

import tilelab
from tilelab.launch import KernelLaunchError


def _np(t):
    return t.detach().cpu().numpy()


def _round_away(x):  # numpy's round is ties-to-even: halves away from zero by hand
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def test_elementwise_intrinsics_run_with_their_meaning():
    a = torch.tensor(np.concatenate([np.arange(-64, 64) + 0.5, np.linspace(-9.7, 9.3, 128)]).astype(np.float32))
    outs = [torch.zeros(ik.N) for _ in range(4)]
    result = tilelab.run(ik.elementwise(), a, *outs, device="cpu", outputs=["R", "Q", "L", "M"])
    assert result.passed, result
    assert any("intrinsics" in n for n in result.notes), result.notes
    x = _np(a)
    np.testing.assert_array_equal(_np(outs[0]), _round_away(x))
    np.testing.assert_allclose(_np(outs[1]), 1.0 / x, rtol=1e-6)
    np.testing.assert_array_equal(_np(outs[2]), x)
    np.testing.assert_array_equal(_np(outs[3]), np.abs(x))


def test_all_of_and_any_of_reduce_a_tile_and_a_region_of_flags():
    m = torch.tensor([[1] * 8, [1] * 7 + [0], [0] * 8, [0] * 3 + [5] + [0] * 4], dtype=torch.int32)
    flags = [torch.full((4,), -1, dtype=torch.int32) for _ in range(2)]
    result = tilelab.run(ik.row_flags(), m, *flags, device="cpu", outputs=["All", "Any"])
    assert result.passed, result
    nonzero = _np(m) != 0
    assert _np(flags[0]).tolist() == nonzero.all(1).astype(np.int32).tolist() == [1, 0, 0, 0]
    assert _np(flags[1]).tolist() == nonzero.any(1).astype(np.int32).tolist() == [1, 1, 0, 1]


@pytest.mark.parametrize("dim, reverse", [(1, False), pytest.param(0, True, marks=pytest.mark.heavy)])
def test_cumsum_is_the_prefix_sum_along_its_axis(dim, reverse):
    a = torch.randn(4, 16)
    b = torch.zeros(4, 16)
    result = tilelab.run(ik.cumsum(dim=dim, reverse=reverse), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    x = _np(a)
    expected = np.flip(np.cumsum(np.flip(x, dim), dim), dim) if reverse else np.cumsum(x, dim)
    np.testing.assert_allclose(_np(b), expected, rtol=1e-5, atol=1e-5)


def test_a_32_bit_load_and_store_by_hand_move_the_bits_of_a_32_bit_element():
    a = torch.randn(64) + 3
    b = torch.full((64,), 7.0)
    result = tilelab.run(ik.words(), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    expected = _np(a).copy()
    expected[1::2] = 0.0  # the load its predicate skips gives 0
    np.testing.assert_array_equal(_np(b), expected)


def test_wide_loads_and_stores_by_hand_move_the_bits_in_memory_order():
    h, f = torch.randn(64).half(), torch.randn(64)
    c, w, d = torch.zeros(64).half(), torch.zeros(32, dtype=torch.int32), torch.zeros(32, dtype=torch.int64)
    result = tilelab.run(ik.wide_words(), h, f, c, w, d, device="cpu", outputs=["C", "W", "D"])
    assert result.passed, result
    assert torch.equal(c, h)  # 128 bits through a shared tile and back
    assert torch.equal(w, h.view(torch.int32))  # two halves to a word, the first in its low bits
    expected = f.view(torch.int64).clone().reshape(8, 4)
    expected[1::2] = 0  # the 256-bit loads of odd blocks are predicated off: 0
    assert torch.equal(d, expected.reshape(-1))


def test_an_async_copy_by_hand_copies_at_once_and_zero_fills_where_its_predicate_is_false():
    a, b = torch.randn(4, 16).half(), torch.zeros(4, 16).half()
    result = tilelab.run(ik.async_copies(), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    expected = (a.float() * 2).half()
    expected[0::2, 8:] = 0  # thread 1's copy in even rows: cp.async's zero fill
    assert torch.equal(b, expected)


@pytest.mark.heavy
def test_an_async_copy_by_hand_past_its_tile_is_reported_never_performed():
    a, b = torch.randn(4, 16).half(), torch.zeros(4, 16).half()
    with pytest.raises(KernelLaunchError, match=r"write of S\[16\] \(past its end: S is 16\) in block \(0, 0, 0\)"):
        tilelab.run(ik.async_copies(shift=1), a, b, device="cpu", outputs=["B"])


def test_an_intrinsic_in_a_form_outside_the_table_is_refused_by_name_with_its_line():
    with pytest.raises(tilelab.EmulationError, match=r"the TileLang intrinsic tl\.ldg64") as info:
        tilelab.run(ik.unknown_intrinsic(), torch.randn(64), torch.zeros(64), device="cpu")
    assert "T.ldg64(A[bx * 2:bx * 2 + 2])" in str(info.value)
    assert "where it is bound or passed to a store by hand" in str(info.value)
    assert "What still works: tilelab.inspect" in str(info.value)


def test_a_device_assertion_passes_when_it_holds_and_ends_the_launch_when_it_does_not():
    b = torch.zeros(64)
    assert tilelab.run(ik.asserting(), torch.arange(64, dtype=torch.float32), b, device="cpu",
                       outputs=["B"]).passed
    with pytest.raises(KernelLaunchError, match="died"):
        tilelab.run(ik.asserting(), torch.arange(64, dtype=torch.float32) * 2, b, device="cpu", outputs=["B"])


def test_the_test_files_are_dealt_alternately_into_halves_by_their_sorted_paths():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "emulation_coverage.py"
    spec = importlib.util.spec_from_file_location("emulation_coverage", path)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    files = ["math/test_b.py", "issue/test_z.py", "cuda/test_a.py", "issue/test_a.py", "kernel/test_c.py"]
    halves = {f: coverage.test_file_half(f, files) for f in files}
    # sorted: cuda/test_a, issue/test_a, issue/test_z, kernel/test_c, math/test_b
    assert halves == {"cuda/test_a.py": "first", "issue/test_a.py": "second", "issue/test_z.py": "first",
                      "kernel/test_c.py": "second", "math/test_b.py": "first"}
