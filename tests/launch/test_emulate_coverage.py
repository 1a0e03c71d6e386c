"""The CPU path on the constructs upstream kernels use (benchmarks/emulation_coverage.py measures
it on TileLang's examples): each failure class found there has one small kernel of our own here,
run on the CPU (two of its blocks) and checked against torch."""

from __future__ import annotations

import math
import re

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

import cpu_path_kernels as ck  # noqa: E402
import emulation_kernels as ek  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402


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


def _masked_reference(x, keep):
    y = torch.zeros_like(x)
    for i in range(2):
        for j in range(2):
            if keep[i, j]:
                y[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32] = x[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32]
    return y


def test_bool_tensors_run_as_their_bytes():
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(3))
    keep = torch.tensor([[True, False], [False, True]])
    result = tilelab.run(ek.masked_tiles, x, keep, device="cpu", blocks=[0, 3], ref=_masked_reference)
    assert result.passed, result
    assert not any("bool computed" in n for n in result.notes)
    assert keep.dtype == torch.bool and keep.tolist() == [[True, False], [False, True]]  # the input is untouched
    # the last block's tile is masked out: a reference that keeps it is caught
    dropped = torch.tensor([[True, False], [False, False]])
    wrong = tilelab.run(ek.masked_tiles, x, dropped, device="cpu", blocks=[0, 3],
                        ref=lambda a, k: _masked_reference(a, torch.ones(2, 2, dtype=torch.bool)))
    assert not wrong.passed


def test_tfloat32_tiles_are_rounded_to_tf32():
    result = tilelab.run(ek.tf32_gemm, device="cpu", blocks=[0, 3], seed=4, ref=lambda a, b: a @ b)
    assert result.passed, result
    (c,) = result.outputs
    # float32 operands rounded to tf32's 10 mantissa bits: an error far above float32's, within tf32's
    assert 1e-5 < c.rel_error < 2e-3
    assert any("tfloat32 computed in float32" in n for n in result.notes)


def test_float8_outputs_are_checked_on_the_blocks_that_ran():
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(5)) * 100
    result = tilelab.run(ek.fp8_quantise, x, device="cpu", blocks=[0, 3], outputs=["Y"],
                         ref=lambda a: (a / 4).to(torch.float8_e4m3fn).float())
    assert result.passed, result
    assert result.outputs[0].rel_error == 0.0  # rounded to e4m3 exactly as torch rounds
    assert any("wrote 4096 of 8192 elements of Y" in n for n in result.notes)
    wrong = tilelab.run(ek.fp8_quantise, x, device="cpu", blocks=[0, 3], outputs=["Y"],
                        ref=lambda a: (a / 2).to(torch.float8_e4m3fn).float())
    assert not wrong.passed


def _split_reference(x, keep=4):
    quarters = x.double().reshape(4, 4, 64).sum(dim=2)  # [row, quarter]
    return quarters, quarters[:, :keep].sum(dim=1)


def test_a_program_of_two_kernels_runs_the_first_whole_and_the_blocks_of_the_last():
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(6))
    result = tilelab.run(ek.split_then_combine, x, device="cpu", blocks=[0, 3], outputs=["Partial", "Out"],
                         ref=_split_reference)
    assert result.passed, result  # rows 0 and 3 need every quarter the first kernel's four blocks wrote
    assert any("wrote 16 of 16 elements of Partial" in n for n in result.notes)
    assert any("wrote 2 of 4 elements of Out" in n for n in result.notes)
    wrong = tilelab.run(ek.split_then_combine, x, device="cpu", blocks=[0, 3], outputs=["Partial", "Out"],
                        ref=lambda a: _split_reference(a, keep=3))
    assert not wrong.passed


def test_a_global_scratch_buffer_is_heap_memory_of_the_run():
    # 8 MiB of scratch, which a C array on the stack overflows: the CPU worker died of SIGSEGV
    x = torch.randn(ek.SCRATCH_ROWS, ek.SCRATCH_SPLIT * ek.SCRATCH_COLS,
                    generator=torch.Generator().manual_seed(7)).half()
    last = ek.SCRATCH_ROWS - 1

    def summed(a, quarters=ek.SCRATCH_SPLIT):
        return a.float().reshape(ek.SCRATCH_ROWS, ek.SCRATCH_SPLIT, ek.SCRATCH_COLS)[:, :quarters].sum(dim=1)

    result = tilelab.run(ek.split_through_scratch, x, device="cpu", blocks=[0, last], out_idx=[1], ref=summed)
    assert result.passed, result
    assert any(f"wrote {2 * ek.SCRATCH_COLS} of" in n for n in result.notes)
    wrong = tilelab.run(ek.split_through_scratch, x, device="cpu", blocks=[0, last], out_idx=[1],
                        ref=lambda a: summed(a, quarters=3))
    assert not wrong.passed

def test_a_float16_tensor_behind_an_address_is_refused_by_name():
    from tilelab.launch._emulate import EmulationError

    with pytest.raises(EmulationError, match=r"float16 tensor reached through an address held in memory") as err:
        tilelab.run(ek.pointer_table_copy, device="cpu")
    assert "T.make_tensor" in str(err.value)  # the kernel's line


def test_bool_fragments_are_held_as_bytes_too():
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(7))
    keep = torch.rand(2, 8, generator=torch.Generator().manual_seed(8)) > 0.5

    def ref(a, k):
        return a * k.repeat_interleave(32, 0).repeat_interleave(16, 1)

    result = tilelab.run(ek.mask_in_a_fragment, x, keep, device="cpu", ref=ref)
    assert result.passed, result
    wrong = tilelab.run(ek.mask_in_a_fragment, x, keep, device="cpu", ref=lambda a, k: ref(a, ~k))
    assert not wrong.passed


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _fp4_reference(a, packed):
    packed = packed.long()  # the reference receives the bytes as floats (exact)
    codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(packed.shape[0], -1).long()
    values = torch.tensor(E2M1)[codes & 7] * torch.where(codes & 8 > 0, -1.0, 1.0)
    return a.float() @ values.T


def test_a_float4_dequantiser_that_reinterprets_bits_runs():
    gen = torch.Generator().manual_seed(9)
    a = torch.randn(64, 64, generator=gen).half()
    packed = torch.randint(0, 256, (64, 32), generator=gen, dtype=torch.uint8)
    result = tilelab.run(ek.fp4_dequant_gemm(), a, packed, device="cpu", ref=_fp4_reference)
    assert result.passed, result
    wrong = tilelab.run(ek.fp4_dequant_gemm(bug="nibbles"), a, packed, device="cpu", ref=_fp4_reference)
    assert not wrong.passed


# Outputs written only by atomic adds (a split-K GEMM's) start at zero on the CPU path, not
# poisoned; an element no block added to is still found.

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


def test_a_checked_load_inside_a_64_bit_index_compiles_and_gathers():
    gen = torch.Generator().manual_seed(4)
    table = torch.randn(ek.GATHER_TABLE, ek.GATHER_DIM, generator=gen)
    token = torch.randperm(ek.GATHER_TABLE, generator=gen).to(torch.int32)
    order = torch.randint(0, ek.GATHER_TABLE, (ek.GATHER_ROWS,), generator=gen, dtype=torch.int32)
    kernel = ek.gather_through_an_index_of_an_index
    result = tilelab.run(kernel, table, token, order, device="cpu", blocks=[0, 3], outputs=["Y"],
                         ref=lambda t, tok, o: t[tok[o.long()].long()])
    assert result.passed, result
    # one level of the indirection dropped is caught
    wrong = tilelab.run(kernel, table, token, order, device="cpu", blocks=[0, 3], outputs=["Y"],
                        ref=lambda t, tok, o: t[o.long()])
    assert not wrong.passed


def test_float16_tensors_are_passed_as_their_bits_and_decoded_in_the_kernel():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    emulation = rewrite_for_cpu(ck.gemm(), "gemm")
    assert emulation.bits == ("A", "B", "C")
    func = emulation.func
    assert [str(func.buffer_map[p].dtype) for p in func.params[:3]] == ["int16"] * 3
    # an output reached only through atomics keeps its float32 form
    assert rewrite_for_cpu(ck.splitk_gemm(), "splitk").bits == ("A", "B")
    a = torch.randn(192, 96, generator=torch.Generator().manual_seed(5)).half()
    b = torch.randn(96, 160, generator=torch.Generator().manual_seed(6)).half()
    before = a.clone()
    result = tilelab.run(ck.gemm(), a, b, device="cpu", blocks=[0, 14], ref=lambda x, y: x @ y)
    assert result.passed, result
    assert torch.equal(a.view(torch.int16), before.view(torch.int16))  # an input handed over itself is untouched


def _sparse_operands(gen):
    """A dense (M, K) float16 matrix with two nonzeros in every four of K, its stored values and
    its int16 metadata (4-bit groups: the two positions, the first in the low bits)."""
    m, k = ek.SPARSE_M, ek.SPARSE_K
    pos = torch.stack([torch.randperm(4, generator=gen)[:2].sort().values for _ in range(m * k // 4)])
    pos = pos.reshape(m, k // 4, 2)
    vals = torch.randn(m, k // 4, 2, generator=gen).half()
    dense = torch.zeros(m, k // 4, 4, dtype=torch.half).scatter_(2, pos, vals).reshape(m, k)
    nibble = (pos[..., 0] | (pos[..., 1] << 2)).reshape(m, k // 16, 4)
    meta = nibble[..., 0] | (nibble[..., 1] << 4) | (nibble[..., 2] << 8) | (nibble[..., 3] << 12)
    meta = torch.where(meta >= 1 << 15, meta - (1 << 16), meta).to(torch.int16)
    return dense, vals.reshape(m, k // 2), meta


def test_the_sparse_rule_turns_a_2_4_gemm_into_loops():
    from tilelab._tilelang.emulate import rewrite_for_cpu

    emulation = rewrite_for_cpu(ek.sparse_24_gemm, "sparse")
    assert "sparse" in emulation.applied
    assert "gemm_sp" not in emulation.func.script()


@pytest.mark.heavy
def test_a_2_4_sparse_gemm_runs_as_its_dense_product():
    gen = torch.Generator().manual_seed(7)
    dense, values, meta = _sparse_operands(gen)
    b = torch.randn(ek.SPARSE_K, ek.SPARSE_N, generator=gen).half()
    result = tilelab.run(ek.sparse_24_gemm, values, meta, b, device="cpu", blocks=[0, 3],
                         ref=lambda a, e, b_: dense.float() @ b_)
    assert result.passed, result
    assert any("sparse" in n for n in result.notes)
    # metadata whose two positions are swapped places the values wrongly: caught
    swapped = ((meta.to(torch.int32) & 0x3333) << 2 | (meta.to(torch.int32) >> 2) & 0x3333)
    swapped = torch.where(swapped >= 1 << 15, swapped - (1 << 16), swapped).to(torch.int16)
    wrong = tilelab.run(ek.sparse_24_gemm, values, swapped, b, device="cpu", blocks=[0, 3],
                        ref=lambda a, e, b_: dense.float() @ b_)
    assert not wrong.passed


def test_register_count_hints_are_dropped():
    x = torch.randn(128, 64, generator=torch.Generator().manual_seed(8))
    result = tilelab.run(ek.scale_without_register_hints, x, device="cpu", blocks=[0, 3], outputs=["Y"],
                         ref=lambda a: a * 3)
    assert result.passed, result
    wrong = tilelab.run(ek.scale_without_register_hints, x, device="cpu", blocks=[0, 3], outputs=["Y"],
                        ref=lambda a: a * 2)
    assert not wrong.passed


def test_a_nan_stored_to_a_narrow_tensor_is_a_nan_not_the_poison():
    """0/0 on the CPU is a NaN with its sign bit set; stored with every mantissa bit as well it
    would be float16's 0xFFFF, the launch's poison, and the element would read as unwritten. The
    GPU stores its canonical NaN (positive), and so does the CPU path: the run counts the NaNs
    where X is zero, and no element as unwritten."""
    x = torch.ones(64)
    x[::8] = 0.0
    x[1::8] = -3.0
    h, g, e = torch.zeros(64).half(), torch.zeros(64).bfloat16(), torch.zeros(64).to(torch.float8_e4m3fn)
    result = tilelab.run(ek.zero_over_zero, x, h, g, e, device="cpu", outputs=["H", "G", "E"], out_idx=[])
    assert [(o.name, o.unwritten, o.nonfinite, o.first_nonfinite) for o in result.outputs] == [
        (name, 0, 8, (0,)) for name in ("H", "G", "E")], result
    for out in (h, g, e):
        nan = torch.isnan(out.float())
        assert torch.equal(nan, x == 0), out
        assert torch.equal(out.float()[~nan], torch.ones(56))
    assert int(h.view(torch.int16)[0]) == 0x7FFF and int(g.view(torch.int16)[0]) == 0x7FFF
    assert int(e.view(torch.uint8)[0]) == 0x7F


def _row_reference(a):
    return a.sum(1) + 1.5, a.max(1).values


def test_reducer_epochs_run_as_their_loops():
    a = -torch.rand(8, 64) - 1  # every element below 0: a max started from 0 would be wrong
    s, m = torch.zeros(8), torch.zeros(8)
    result = tilelab.run(ek.row_reducers(), a, s, m, device="cpu", outputs=["S", "M"], ref=_row_reference)
    assert result.passed, result
    assert any("reducers" in n for n in result.notes), result.notes
    torch.testing.assert_close(s, a.sum(1) + 1.5)  # the init value once per row
    assert torch.equal(m, a.max(1).values)


def test_a_reducer_updated_before_its_init_is_refused_with_tilelangs_sentence():
    from tilelab.records.errors import LoweringError

    with pytest.raises(LoweringError, match=r"T\.reducer_update on reducer `total` before T\.reducer_init"):
        tilelab.run(ek.row_reducers(no_init=True), torch.rand(8, 64), torch.zeros(8), torch.zeros(8), device="cpu",
                    outputs=["S", "M"])


@pytest.mark.heavy
def test_a_reducer_updated_one_tile_short_is_caught():
    a = -torch.rand(8, 64) - 1
    wrong = tilelab.run(ek.row_reducers(short=True), a, torch.zeros(8), torch.zeros(8), device="cpu",
                        outputs=["S", "M"], ref=_row_reference)
    assert not wrong.passed


def test_a_cluster_whose_blocks_share_nothing_runs_its_blocks_alone():
    x, y = torch.randn(256), torch.zeros(256)
    result = tilelab.run(ek.clustered_scale(), x, y, device="cpu", outputs=["Y"], ref=lambda x: 3 * x)
    assert result.passed, result
    assert torch.equal(y, 3 * x)
    with pytest.raises(tilelab.EmulationError, match=r"an operation across a thread-block cluster \(tl\.cluster_sync\) "
                                                     r"\(line \d+: T\.cluster_sync\(\)\)"):
        tilelab.run(ek.clustered_scale(cluster_sync=True), x, y, device="cpu", outputs=["Y"])


def test_a_warp_group_instruction_written_by_a_helper_is_refused_with_its_op_and_the_helpers_line():
    with pytest.raises(tilelab.EmulationError, match=r"a hand-written PTX or warp-group instruction "
                                                     r"\(tl\.warpgroup_arrive\) \(line \d+: warpgroup_fence\(\)\)"):
        tilelab.run(ek.warpgroup_fence_by_helper(), device="cpu")


def test_a_batched_reduce_runs_as_the_reduction_it_batches():
    x = torch.randn(4, 8, 16)
    s, m = torch.zeros(4, 16), torch.zeros(4, 16)
    result = tilelab.run(ek.column_reduce_batched(batch=2), x, s, m, device="cpu", outputs=["S", "M"])
    assert result.passed, result
    assert any("tile-ops" in n for n in result.notes)
    torch.testing.assert_close(s, x.double().sum(1).float(), rtol=1e-6, atol=1e-6)
    assert torch.equal(m, x.amax(1))


def test_a_nan_propagating_reduce_gives_nan_for_a_row_holding_one():
    # bfloat16 here (the GPU agreement test takes float16)
    x = (torch.randn(4, 32) * 4).bfloat16()
    x[0, 0], x[1, 5], x[3, 31] = float("nan"), float("nan"), float("nan")  # first, middle, last column
    hi, lo, big = (torch.zeros(4).bfloat16() for _ in range(3))
    tilelab.run(ek.nan_propagating_rows(dtype="bfloat16"), x, hi, lo, big, device="cpu",
                outputs=["Hi", "Lo", "Big"])
    nan = torch.tensor([True, True, False, True])
    xf = x.float()
    for out, ref in ((hi, xf.amax(1)), (lo, xf.amin(1).clamp(max=-1)), (big, xf.abs().amax(1))):
        assert torch.equal(out.isnan(), nan), (out, ref)  # torch's amax propagates NaN too
        assert torch.equal(out[~nan].float(), ref[~nan])


def test_a_nan_is_skipped_by_the_default_reduce_and_t_max_wherever_it_sits():
    """Without nan_propagate a GPU's maximum is PTX's max (a NaN operand gives the other, -0 < +0):
    the row's maximum, minimum and largest magnitude skip a NaN in the first, a middle or the last
    column, a row of NaN gives the reduce's start, and T.max/T.min in the kernel's code skip it too."""
    x = ek.nan_rows_input("float32")
    outs = {name: torch.zeros(8) for name in ("Hi", "Lo", "Low", "Big")}
    outs["M"] = torch.zeros(8, 32)
    tilelab.run(ek.nan_skipping_rows(), x, *outs.values(), device="cpu", outputs=list(outs))
    want = ek.nan_skipping_reference(x)
    assert want["Hi"][3] == -math.inf and want["Big"][3] == 0 and want["Lo"][3] == -1  # the all-NaN row
    assert not want["Hi"][5:7].signbit().any() and want["Low"][7].signbit()  # the zeros: -0 < +0
    for name, got in outs.items():
        same = ((got == want[name]) & (got.signbit() == want[name].signbit())) | (got.isnan() & want[name].isnan())
        assert bool(same.all()), (name, got, want[name])
    assert not outs["Hi"].isnan().any() and outs["M"].isnan().sum() == 32 + 2  # NaN only where both are


@pytest.mark.heavy  # a second compile; make test keeps the NaN-propagating one
def test_a_reduce_without_nan_propagate_keeps_tilelangs_cpu_reduce():
    x = (torch.randn(4, 32) * 4).bfloat16()
    hi, lo, big = (torch.zeros(4).bfloat16() for _ in range(3))
    result = tilelab.run(ek.nan_propagating_rows(nan_propagate=False, dtype="bfloat16"), x, hi, lo, big,
                         device="cpu", outputs=["Hi", "Lo", "Big"])
    assert result.passed, result
    assert not any("tile-ops" in n for n in result.notes)
    xf = x.float()
    for out, ref in ((hi, xf.amax(1)), (lo, xf.amin(1).clamp(max=-1)), (big, xf.abs().amax(1))):
        assert torch.equal(out.float(), ref)


def test_a_tile_atomic_add_by_tma_adds_the_tile():
    out = torch.zeros(8, 8)
    result = tilelab.run(ek.tile_atomic_add_by_tma(), out, device="cpu", outputs=["Out"])
    assert result.passed, result
    assert torch.equal(out, torch.full((8, 8), 3 * (0.5 + 1.0 + 1.5 + 2.0)))


def test_thread_binding_loops_without_a_kernel_run_over_the_blocks_threads():
    a, b, c = torch.randn(3, 32), torch.zeros(3, 32), torch.full((3, 8), -1.0)
    result = tilelab.run(ek.thread_loops_without_kernel(), a, b, c, device="cpu", outputs=["B", "C"])
    assert result.passed, result
    assert torch.equal(b, a * 2 + 1)
    ref = torch.full((3, 8), -1.0)
    ref[:, 0::2] = torch.arange(3.0)[:, None]
    ref[:, 1::2] = torch.arange(0.0, 8.0, 2.0)
    assert torch.equal(c, ref)


def test_thread_binding_loops_of_two_extents_in_one_block_are_refused_by_name_with_the_line():
    """The GPU runs both loops over the last one's 64 threads (B[64:] never written); a block of 128
    would write all of B: refused, not answered."""
    with pytest.raises(tilelab.EmulationError, match=r"threadIdx\.x of different extents \(128, 64\).*line \d+"):
        tilelab.run(ek.thread_loops_of_two_extents(), torch.zeros(128), torch.zeros(128), torch.zeros(128),
                    device="cpu", outputs=["B", "C"])


@pytest.mark.parametrize("axis", ["threadIdx.x", "blockIdx.x"])
def test_a_thread_binding_loop_from_an_offset_is_refused_by_name_with_the_line(axis):
    """On the GPU the loop runs from 0 (TileLang binds it to threadIdx.x / blockIdx.x and drops the
    start), on the CPU it would run from the start (or not at all): refused, not answered."""
    with pytest.raises(tilelab.EmulationError, match=re.escape(axis) + r" from 32 \(not 0\).*line \d+"):
        tilelab.run(ek.thread_loop_from_an_offset(axis=axis), torch.zeros(64), torch.zeros(64), device="cpu",
                    outputs=["B"])


def test_a_thread_loop_sized_at_launch_is_refused_by_name_with_its_line():
    with pytest.raises(tilelab.EmulationError, match=r"T\.thread_binding loop over threadIdx\.x of n threads, a "
                       r"number known only at launch \(line \d+: for t in T\.thread_binding\(n, "):
        tilelab.run(ek.thread_loops_sized_at_launch(), torch.zeros(2, 8), torch.zeros(2, 8), device="cpu",
                    outputs=["B"])
