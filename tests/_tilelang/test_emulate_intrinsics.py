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


def _np(t):
    return t.detach().cpu().numpy()


def _round_away(x):  # numpy's round is ties-to-even: halves away from zero by hand
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@pytest.mark.parametrize("op, ref", [
    ("round_ties_away_from_zero", _round_away),
    ("fast_rcp", lambda x: 1.0 / x),
    ("ldg", lambda x: x),
])
def test_an_elementwise_intrinsic_runs_with_its_meaning(op, ref):
    a = torch.tensor(np.concatenate([np.arange(-64, 64) + 0.5, np.linspace(-9.7, 9.3, 128)]).astype(np.float32))
    b = torch.zeros(ik.N)
    result = tilelab.run(ik.elementwise(op), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    np.testing.assert_allclose(_np(b), ref(_np(a)), rtol=1e-6)
    assert any("intrinsics" in n for n in result.notes), result.notes


@pytest.mark.parametrize("kind", ["all", "any"])
def test_all_of_and_any_of_reduce_a_tile_of_flags(kind):
    m = torch.tensor([[1] * 8, [1] * 7 + [0], [0] * 8, [0] * 3 + [5] + [0] * 4], dtype=torch.int32)
    b = torch.full((4,), -1, dtype=torch.int32)
    result = tilelab.run(ik.row_flags(kind), m, b, device="cpu", outputs=["B"])
    assert result.passed, result
    flags = (_np(m) != 0)
    expected = flags.all(1) if kind == "all" else flags.any(1)
    assert _np(b).tolist() == expected.astype(np.int32).tolist()


@pytest.mark.parametrize("dim, reverse", [(1, False), (0, True)])
def test_cumsum_is_the_prefix_sum_along_its_axis(dim, reverse):
    a = torch.randn(4, 16)
    b = torch.zeros(4, 16)
    result = tilelab.run(ik.cumsum(dim=dim, reverse=reverse), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    x = _np(a)
    expected = np.flip(np.cumsum(np.flip(x, dim), dim), dim) if reverse else np.cumsum(x, dim)
    np.testing.assert_allclose(_np(b), expected, rtol=1e-5, atol=1e-5)


def test_an_intrinsic_outside_the_table_is_refused_by_name_with_its_line():
    with pytest.raises(tilelab.EmulationError, match=r"the TileLang intrinsic tl\.ldg32") as info:
        tilelab.run(ik.unknown_intrinsic(), torch.arange(64, dtype=torch.int32),
                    torch.zeros(64, dtype=torch.int32), device="cpu")
    assert "T.ldg32(A[i])" in str(info.value) and "What still works: tilelab.inspect" in str(info.value)
