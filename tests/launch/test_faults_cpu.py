"""Faults a launch check names, on the CPU (target c): a kernel that writes into one of its inputs,
and NaN/inf in an output, with its first location, its tile and whether the inputs held any.
The expected indices are worked out here from the kernels' own arithmetic."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilelang.language as T  # noqa: E402

import tilelab  # noqa: E402
from tilelab.launch import RunResult  # noqa: E402


def scale_and_clobber(N=1024, block=128):
    """C = 2 * A, and (the bug) A zeroed behind it in blocks 2 and 5."""

    @T.prim_func
    def scale(A: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.serial(block):
                C[bx * block + i] = 2.0 * A[bx * block + i]
                if bx == 2 or bx == 5:
                    A[bx * block + i] = 0.0

    return scale


def divide_by_difference(M=128, N=128, block=32):
    """C = A / (A - B): a 0/0 wherever the row's inputs agree (rows 70 and up, by construction)."""

    @T.prim_func
    def div(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = (
                    (A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j])
                    / (A[by * block + i, bx * block + j] - B[by * block + i, bx * block + j]))

    return div


def plain_copy(N=256, block=64):
    @T.prim_func
    def copy(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]

    return copy


def test_a_kernel_that_writes_into_its_input_fails_and_names_it():
    a = torch.arange(1, 1025, dtype=torch.float32)  # no zeros: every element the bug zeroes changes
    given = a.clone()
    c = torch.empty(1024)
    result = tilelab.run(scale_and_clobber(), a, c, target="c", ref=lambda x: 2 * x)
    (output,) = result.outputs
    assert output.passed  # the output itself is right: it was computed before the clobbering
    (written,) = result.inputs_written
    assert written.name == "A" and written.changed == 2 * 128 and written.first_changed == (2 * 128,)
    assert not result.passed and result.verdict() == "FAIL"
    assert torch.equal(a[:256], given[:256]) and bool((a[256:384] == 0).all())  # what the tests derived
    text = repr(result)
    assert "A was written by the kernel" in text and "256 elements" in text
    assert RunResult.from_dict(result.to_dict()) == result


def test_inputs_the_kernel_only_reads_are_not_flagged():
    result = tilelab.run(plain_copy(), target="c", ref=lambda x: x)
    assert result.passed and result.inputs_written == ()
    assert [(s.name, s.changed, s.nonfinite) for s in result.inputs] == [("A", 0, 0)]


def test_nan_in_an_output_is_located_with_its_tile_and_the_clean_inputs_named():
    a = torch.randn(128, 128)
    b = a + 1.0
    b[70:] = a[70:]  # rows 70..127: A - B == 0, so 0/0
    c = torch.empty(128, 128)
    result = tilelab.run(divide_by_difference(), a, b, c, target="c")
    (output,) = result.outputs
    assert not result.passed and output.nonfinite == 58 * 128
    assert output.first_nonfinite == (70, 0)
    assert output.tiles is not None and output.tiles.tile == (32, 32)  # the launch grid (4, 4, 1)
    assert output.nonfinite_tile == (70 // 32, 0)
    assert any("the inputs held none, so the kernel produced them" in n for n in result.notes), result.notes
    assert "first NaN/inf at (70, 0), in tile (2, 0)" in repr(result)


def test_nan_that_came_with_an_input_is_said_to():
    a = torch.randn(256)
    a[7] = float("nan")
    b = torch.empty(256)
    result = tilelab.run(plain_copy(), a, b, target="c")
    (output,) = result.outputs
    assert output.first_nonfinite == (7,) and output.nonfinite == 1
    assert [(s.name, s.nonfinite) for s in result.inputs] == [("A", 1)]
    assert any("the inputs already held some (A: 1)" in n for n in result.notes), result.notes
    assert result.inputs_written == ()  # NaN kept as NaN is not a change
