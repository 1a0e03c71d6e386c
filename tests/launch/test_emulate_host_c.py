"""Kernels whose CPU program TileLang's C back end or the host C compiler used to reject: a
vectorized select, a T.assume, a size also passed as a scalar, uint32 tensors, a block's safe-value
annotation, a buffer's data used as an address, a kernel written in CUDA C. Each is run on the CPU
and compared with torch (or refused by name)."""

from __future__ import annotations

import pytest
import tilelang.language as T
import torch

import tilelab
from tilelab import _tilelang


def vectorized_select(N=64, block=16):
    @T.prim_func
    def relu_or_shift(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block, threads=32) as bx:
            for v in T.serial(block // 4):
                for i in T.vectorized(4):
                    x = X[bx * block + v * 4 + i]
                    Y[bx * block + v * 4 + i] = T.Select(x > 0.0, x * 2.0, x - 1.0)

    return relu_or_shift


@pytest.mark.heavy
def test_a_vectorized_select_runs_as_a_serial_loop():
    result = tilelab.run(vectorized_select(), device="cpu", seed=3,
                         ref=lambda x: torch.where(x > 0, x * 2, x - 1))
    assert result.passed, result


def assumed_in_bounds(N=64, offset=0):
    @T.prim_func
    def shifted_copy(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in T.serial(N):
                T.assume(i + offset < N)  # a promise the kernel breaks when offset > 0
                Y[i] = X[i] * 3.0
                Y[i + offset] = X[i] * 3.0

    return shifted_copy


@pytest.mark.heavy
def test_a_broken_assume_is_an_access_reported_not_performed():
    kept = tilelab.run(assumed_in_bounds(), device="cpu", seed=1, ref=lambda x: x * 3)
    assert kept.passed, kept
    # TileLang's own guard of global accesses off: the promise alone would have removed the check
    configs = {"tl.disable_safe_memory_legalize": True}
    with pytest.raises(tilelab.launch.KernelLaunchError, match=r"write of Y\[64\] \(past its end: Y is 64\)"):
        tilelab.run(assumed_in_bounds(offset=5), device="cpu", pass_configs=configs)


@pytest.mark.heavy
def test_a_vectorized_loop_under_an_assume_with_a_dynamic_size_runs():
    N = T.dynamic("N")

    @T.prim_func
    def rows(A: T.Tensor((8, N), T.float32), B: T.Tensor((8, N), T.float32)):
        with T.Kernel(8, threads=32) as bx:
            T.assume(N % 4 == 0)
            for c in T.serial(T.ceildiv(N, 4)):
                for i in T.vectorized(4):
                    T.assume(c * 4 + i < N)
                    B[bx, c * 4 + i] = A[bx, c * 4 + i] + T.Cast(T.float32, c)

    def ref(a):
        return a + (torch.arange(a.shape[1]) // 4).float()

    result = tilelab.run(rows, device="cpu", N=24, seed=2, ref=ref)
    assert result.passed, result


@pytest.mark.heavy
def test_a_size_also_passed_as_a_scalar_parameter_is_one_value():
    @T.prim_func
    def scaled(a: T.handle, b: T.handle, n: T.int32):
        A = T.match_buffer(a, (n, 32), T.float32)
        B = T.match_buffer(b, (n, 32), T.float32)
        with T.Kernel(T.ceildiv(n, 16), threads=64) as bx:
            for i, j in T.Parallel(16, 32):
                if bx * 16 + i < n:
                    B[bx * 16 + i, j] = A[bx * 16 + i, j] * T.Cast(T.float32, n)

    a = torch.randn(40, 32)
    result = tilelab.run(scaled, a, torch.empty(40, 32), 40, device="cpu", ref=lambda a, n: a * n)
    assert result.passed, result
    with pytest.raises(ValueError, match=r"scalar parameter n is 41, but it is also a size of A, B, which the "
                                         r"tensors given make 40: pass n=40"):
        tilelab.run(scaled, a, torch.empty(40, 32), 41, device="cpu")


def row_max_u32():
    """B = the row maxima of a uint32 tile (a signed comparison would pick others past 2**31)."""

    @T.prim_func
    def row_max(A: T.Tensor((4, 8), T.uint32), B: T.Tensor((4,), T.uint32)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((4, 8), T.uint32)
            best = T.alloc_fragment((4,), T.uint32)
            T.copy(A, tile)
            T.reduce_max(tile, best, dim=1)
            T.copy(best, B)

    return row_max


@pytest.mark.heavy
def test_a_uint32_reduction_is_unsigned():
    row_max = row_max_u32()
    values = torch.tensor([[(r * 8 + c) * 0x1F3D5B79 % 2**32 for c in range(8)] for r in range(4)], dtype=torch.int64)
    assert (values >= 2**31).any()  # a signed comparison would pick another maximum
    out = torch.zeros(4, dtype=torch.uint32)
    result = tilelab.run(row_max, values.to(torch.uint32), out, device="cpu", outputs=["B"])
    assert result.passed, result
    assert torch.equal(out.to(torch.int64), values.amax(1))


@pytest.mark.heavy
@pytest.mark.parametrize("dtype", [T.float32, T.float16])
def test_a_safe_value_fills_the_reads_outside_the_tensor(dtype):
    @T.prim_func
    def shifted_rows(A: T.Tensor((64, 16), dtype), B: T.Tensor((64, 16), dtype)):
        with T.Kernel(2, threads=64) as bx:
            T.annotate_safe_value({A: 7})
            tile = T.alloc_shared((32, 16), dtype)
            for i, j in T.Parallel(32, 16):
                tile[i, j] = A[bx * 32 + i - 3, j]
            for i, j in T.Parallel(32, 16):
                B[bx * 32 + i, j] = tile[i, j]

    def ref(a):
        out = torch.full_like(a, 7)
        out[3:] = a[:-3]
        return out

    result = tilelab.run(shifted_rows, device="cpu", seed=4, ref=ref)
    assert result.passed, result


def test_a_buffer_used_by_its_data_names_the_rewritten_buffer():
    """A shared tile's access pointer (S.access_ptr) names the tile's data itself: after the scopes rule it
    is the block-local replacement's, so the function has no variable left undefined."""
    from tilelab._tilelang.emulate import rewrite_for_cpu

    @T.prim_func
    def staged(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            S = T.alloc_shared((32,), T.float32)
            T.evaluate(T.call_extern("int32", "touch", S.access_ptr("rw")))  # S.data itself
            for i in T.Parallel(32):
                Y[bx * 32 + i] = X[bx * 32 + i]

    func = rewrite_for_cpu(staged, "staged").func
    tirx = _tilelang.env.tilelang().tvm.tirx
    assert tirx.analysis.verify_well_formed(func, assert_mode=False)


def test_a_kernel_written_in_cuda_c_is_refused_by_name_with_its_line():
    source = 'extern "C" __global__ void twice(float* x, float* y) { y[threadIdx.x] = 2 * x[threadIdx.x]; }'

    @T.prim_func
    def twice(X: T.Tensor((32,), T.float32), Y: T.Tensor((32,), T.float32)):
        T.CUDASourceCodeKernel(1, threads=32, source_code_or_path=source, entry_name="twice")

    with pytest.raises(tilelab.EmulationError, match=r"a kernel written in CUDA C \(T.CUDASourceCodeKernel\) "
                                                     r"\(line \d+: T.CUDASourceCodeKernel\(1") as info:
        tilelab.run(twice, device="cpu")
    assert "What still works: tilelab.inspect" in str(info.value)


def reshaped_rows(n=64, cols=8, past=0):
    @T.prim_func
    def reshaped(A: T.Tensor((n,), T.float32), B: T.Tensor((n // cols, cols), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            rows = T.reshape(A, [n // cols, cols])  # TileLang names A's data after the view
            T.copy(rows, B)
            B[0, 0] = A[bx + n - 1 + past] * 2.0

    return reshaped


def test_a_tensor_read_through_its_reshaped_view_is_passed_by_its_datas_name():
    a, b = torch.randn(64), torch.zeros(8, 8)
    result = tilelab.run(reshaped_rows(), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    ref = a.reshape(8, 8).clone()
    ref[0, 0] = a[63] * 2
    assert torch.equal(b, ref)
    # a read past A's end is still reported as A's
    with pytest.raises(tilelab.launch.KernelLaunchError, match=r"read of A\[64\] \(past its end"):
        tilelab.run(reshaped_rows(past=1), a, torch.zeros(8, 8), device="cpu", outputs=["B"])


def sized_by_expression(square=False):
    n = T.dynamic("n")
    extent = n * n if square else n * 3 + 1

    @T.prim_func
    def fill(A: T.Tensor((extent,), T.int32)):
        with T.Kernel(1, threads=32):
            for i in T.serial(extent):
                A[i] = i * 10 + n

    return fill


def test_a_size_given_only_by_a_linear_extent_is_solved_from_the_tensor():
    a = torch.zeros(16, dtype=torch.int32)  # 16 = 3 n + 1: n = 5
    result = tilelab.run(sized_by_expression(), a, device="cpu", outputs=["A"])
    assert result.passed, result
    assert torch.equal(a, torch.arange(16, dtype=torch.int32) * 10 + 5)
    # n * n: the CPU kernel is passed the tensor's extent, and n is not found from it
    with pytest.raises(tilelab.EmulationError, match=r"the size n, which the tensors' shapes give only as n \* n"):
        tilelab.run(sized_by_expression(square=True), torch.zeros(16, dtype=torch.int32), device="cpu", n=4,
                    outputs=["A"])


def lanes_by_hand(n=64, past=0):
    @T.prim_func
    def shifted(X: T.Tensor((n,), T.float32), Y: T.Tensor((3, 4), T.float32), Z: T.Tensor((n,), T.float32),
                S: T.Tensor((1,), T.int8), W: T.Tensor((32,), T.int8)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_local((32,), T.int8)
            packed[0:32] = T.Broadcast(S[0], 32)  # 32 lanes of int8: no C type of TileLang's
            for i in T.serial(32):
                W[i] = packed[i]
            for r in T.serial(3):
                # lanes written by hand; r - 1 is -1 for the first row (TileLang wraps a negative index of a
                # vector whose sign it cannot know, as Python does: X[-1] is X[n - 1])
                Y[r, T.Ramp(0, 1, 4)] = X[T.Ramp(r - 1, 2, 4)] * 2.0
            for i in T.serial(n):
                Z[i] = 0.0
            Z[T.Ramp(n - 8 + past, 2, 4)] = T.Broadcast(T.float32(5.0), 4)

    return shifted


def test_a_vector_store_written_by_hand_is_stored_lane_by_lane():
    x, y, z = torch.randn(64), torch.zeros(3, 4), torch.zeros(64)
    s, w = torch.tensor([-37], dtype=torch.int8), torch.zeros(32, dtype=torch.int8)
    result = tilelab.run(lanes_by_hand(), x, y, z, s, w, device="cpu", outputs=["Y", "Z", "W"])
    assert result.passed, result
    assert torch.equal(w, torch.full((32,), -37, dtype=torch.int8))
    index = torch.tensor([[(r - 1 + 2 * j) % 64 for j in range(4)] for r in range(3)])
    assert torch.equal(y, x[index] * 2)
    ref = torch.zeros(64)
    ref[56:64:2] = 5.0
    assert torch.equal(z, ref)
    # each lane is checked: the last one past Z's end is reported, not stored
    with pytest.raises(tilelab.launch.KernelLaunchError, match=r"write of Z\[64\]"):
        tilelab.run(lanes_by_hand(past=2), x, y, z, s, w, device="cpu", outputs=["Y", "Z", "W"])


def lanes_of_a_call(bound=False):
    @T.prim_func
    def floor4(X: T.Tensor((16,), T.float32), Y: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            for r in T.serial(4):
                if bound:  # a variable holding a vector (no lane of its own), stored from Y[-1] (an index vector)
                    v = X[T.Ramp(r * 4, 1, 4)]
                    Y[T.Ramp(r * 4 - 1, 1, 4)] = v * T.Broadcast(T.float32(4.0), 4)
                else:  # an elementwise call of vectors: the call of each lane
                    Y[T.Ramp(r * 4, 1, 4)] = T.floor(X[T.Ramp(r * 4, 1, 4)] * T.Broadcast(T.float32(4.0), 4))

    return floor4


def test_a_vector_store_of_an_elementwise_call_is_stored_lane_by_lane():
    x, y = torch.randn(16), torch.zeros(16)
    result = tilelab.run(lanes_of_a_call(), x, y, device="cpu", outputs=["Y"])
    assert result.passed, result
    assert torch.equal(y, torch.floor(x * 4))


def test_a_vector_store_holding_a_vector_variable_is_refused_by_name_with_its_line():
    x, y = torch.randn(16), torch.zeros(16)
    with pytest.raises(tilelab.EmulationError, match=r"a vector store written by hand into Y whose value holds the "
                       r"vector variable v \(float32x4\) \(line \d+: Y\[T\.Ramp\(r \* 4 - 1, 1, 4\)\] = v \* "):
        tilelab.run(lanes_of_a_call(bound=True), x, y, device="cpu", outputs=["Y"])
