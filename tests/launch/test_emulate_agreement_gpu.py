"""The CPU path's newer meanings agree with the GPU: each kernel below is built for this machine's
GPU by TileLang and run there, and run on the CPU through ``tilelab.run(device="cpu")``, on the
same inputs. Their outputs are compared bit for bit where the GPU's result is exactly defined (IEEE
roundings with a mode, integer bit operations, curand's Philox words, packed pairs, a warp's elected
lane, barrier protocols, a float4 tensor given as its bytes, a vectorized select, an unsigned
reduction, loads and stores by hand, cp.async by hand, a cluster that shares nothing, a batched
reduce's maxima, a tile atomic add by TMA, NaN-propagating reduces, the default reduce and T.max
skipping a NaN, T.thread_binding loops with no T.Kernel, vector stores by hand, a size solved from a
linear extent, DP4A); within the
order of float sums where the GPU adds in another order (a warp's mma.sync, reducers); within the
GPU's fast-math error where TileLang builds with it."""

import pytest

pytestmark = pytest.mark.gpu

from gpu_only import skip_module_without_cuda  # noqa: E402

skip_module_without_cuda(__name__)

import barrier_kernels as bk  # noqa: E402
import cpu_path_kernels as ck  # noqa: E402
import emulation_kernels as ek  # noqa: E402
import input_kernels as inputs_k  # noqa: E402
import intrinsic_kernels as ik  # noqa: E402
import test_emulate_host_c as host_c  # noqa: E402
import thread_kernels as tk  # noqa: E402
import tilelang.language as T  # noqa: E402
import torch  # noqa: E402

import tilelab  # noqa: E402
from tilelab import _tilelang  # noqa: E402
from tilelab.records.errors import LoweringError  # noqa: E402

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16,
                "int32": torch.int32, "int64": torch.int64, "uint32": torch.uint32, "int8": torch.int8,
                "uint8": torch.uint8}


def _inputs(func, outputs, seed=5, shapes=None):
    gen = torch.Generator().manual_seed(seed)
    args = []
    for p in func.params:
        buf = func.buffer_map[p]
        if shapes and str(buf.name) in shapes:
            args.append(shapes[str(buf.name)](gen))
            continue
        shape, dtype = [int(x) for x in buf.shape], TORCH_DTYPES[str(buf.dtype)]
        if str(buf.name) in outputs:
            args.append(torch.zeros(shape, dtype=dtype))
        elif dtype.is_floating_point:
            values = torch.rand(shape, generator=gen) * 6 - 3
            args.append(torch.where(values.abs() < 0.05, torch.full_like(values, 0.5), values).to(dtype))
        else:
            args.append(torch.randint(-2**31, 2**31 - 1, shape, generator=gen, dtype=torch.int64).to(torch.int32))
    return args


def _both_ways(func, outputs, shapes=None, nan_expected=False):
    """``outputs``: the tensors compared (those the kernel only writes start as zeros); ``shapes``:
    inputs made by a function of a generator instead of from the parameter's type; ``nan_expected``:
    outputs that hold NaN by design (the CPU run's own check fails them; only the comparison counts)."""
    args = _inputs(func, outputs, shapes=shapes)
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    gpu = [a.cuda() for a in args]
    kernel(*gpu)
    torch.cuda.synchronize()
    cpu = [a.clone() for a in args]
    result = tilelab.run(func, *cpu, device="cpu", outputs=[n for n in outputs if n not in (shapes or {})])
    assert result.passed or nan_expected, result
    names = [str(func.buffer_map[p].name) for p in func.params]
    return {n: (c, g.cpu()) for n, c, g in zip(names, cpu, gpu, strict=True) if n in outputs}


def _same_bits(cpu, gpu):
    if cpu.dtype.is_floating_point:
        both_nan = cpu.isnan() & gpu.isnan()
        cpu, gpu = torch.where(both_nan, 0, cpu), torch.where(both_nan, 0, gpu)
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[cpu.element_size()]
        return torch.equal(cpu.view(bits), gpu.view(bits))
    return torch.equal(cpu, gpu)


def _where_differ(cpu, gpu):
    diff = (cpu != gpu) & ~(cpu.isnan() & gpu.isnan()) if cpu.dtype.is_floating_point else cpu != gpu
    idx = diff.nonzero()[:5].tolist()
    return [(i, cpu[tuple(i)].item(), gpu[tuple(i)].item()) for i in idx]


def test_ieee_roundings_with_a_mode_are_the_gpus_bits():
    out = _both_ways(ik.ieee_rounding(), {"R"})
    cpu, gpu = out["R"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_philox_words_and_uniforms_are_the_gpus_and_normals_within_its_fast_math():
    out = _both_ways(ik.philox(threads=32, draws=6, seed=12345, offset=3, first_seq=7), {"W", "U", "G"})
    for name in ("W", "U"):
        cpu, gpu = out[name]
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))
    cpu, gpu = out["G"]
    torch.testing.assert_close(cpu, gpu, rtol=1e-5, atol=1e-5)


FLOAT_OPS = {
    "__exp": lambda x: T.__exp(x), "__log": lambda x: T.__log(T.abs(x) + 1.0), "__sin": lambda x: T.__sin(x),
    "exp10": lambda x: T.exp10(x), "fmod": lambda x: T.fmod(x, 0.75),
    "fma and fmul": lambda x: T.fma(x, x, -1.0) + T.fmul(x, 2.0), "pow by an integer": lambda x: T.pow(x, 3),
    "isfinite": lambda x: T.if_then_else(T.isfinite(T.log(x)), 1.0, 0.0), "ldexp": lambda x: T.ldexp(x, 3.0),
}
INT_OPS = {
    "clz": lambda b: T.clz(b), "popcount": lambda b: T.popcount(b), "__ffs": lambda b: T.__ffs(b),
    "__fns up": lambda b: T.Cast("int32", T.__fns(T.Cast("uint32", b), 3, 2)),
    "__fns down": lambda b: T.Cast("int32", T.__fns(T.Cast("uint32", b), 3, -1)),
}


def _one_op(op, dtype, n=64):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), Out: T.Tensor((n,), dtype)) -> None:
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                Out[i] = op(A[i])

    return main


def _both_ways_or_skip(func, outputs, name):
    try:
        _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    except LoweringError as err:
        pytest.skip(f"TileLang does not build {name} for the GPU, so there is nothing to agree with: "
                    f"{str(err).splitlines()[0][:200]}")
    return _both_ways(func, outputs)


@pytest.mark.parametrize("name", sorted(INT_OPS))
def test_integer_bit_operations_are_the_gpus(name):
    cpu, gpu = _both_ways_or_skip(_one_op(INT_OPS[name], "int32"), {"Out"}, f"T.{name}")["Out"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


@pytest.mark.parametrize("name", sorted(FLOAT_OPS))
def test_float_functions_agree_within_the_gpus_fast_math(name):
    cpu, gpu = _both_ways_or_skip(_one_op(FLOAT_OPS[name], "float32"), {"Out"}, f"T.{name}")["Out"]
    assert torch.equal(cpu.isfinite(), gpu.isfinite()), _where_differ(cpu, gpu)
    finite = cpu.isfinite()
    torch.testing.assert_close(cpu[finite], gpu[finite], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("factory,outputs", [(ik.packed_pairs, {"P"}), (ik.elect, {"E"})])
def test_packed_pairs_and_an_elected_lane_are_the_gpus(factory, outputs):
    for name, (cpu, gpu) in _both_ways(factory(), outputs).items():
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))


def test_a_barrier_per_warp_and_named_barriers_hand_over_what_the_gpu_hands_over():
    cpu, gpu = _both_ways(bk.own_rows(), {"B"})["B"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)
    cpu, gpu = _both_ways(bk.named_handoff(), {"B"})["B"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_a_float4_tensor_given_as_its_bytes_reads_as_on_the_gpu():
    func = ck.fp4_decode()
    out = _both_ways(func, {"Y"}, shapes={
        "X": lambda gen: torch.randint(0, 256, (4, 16), generator=gen, dtype=torch.int32).to(torch.uint8),
        "Y": lambda gen: torch.zeros(4, 32)})
    cpu, gpu = out["Y"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_a_vectorized_select_and_an_unsigned_row_max_are_the_gpus():
    cpu, gpu = _both_ways(host_c.vectorized_select(), {"Y"})["Y"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)
    func = host_c.row_max_u32()
    out = _both_ways(func, {"B"}, shapes={
        "A": lambda gen: torch.randint(0, 2**32, (4, 8), generator=gen, dtype=torch.int64).to(torch.uint32),
        "B": lambda gen: torch.zeros(4, dtype=torch.uint32)})
    cpu, gpu = out["B"]
    assert torch.equal(cpu.to(torch.int64), gpu.to(torch.int64)), (cpu, gpu)



@pytest.mark.parametrize("trans_b", [False, True], ids=["B-row", "B-trans"])
def test_a_warps_ldmatrix_and_mma_sync_give_the_gpus_tile(trans_b):
    cpu, gpu = _both_ways(tk.mma_atom(trans_b=trans_b), {"C"})["C"]
    torch.testing.assert_close(cpu, gpu, rtol=1e-5, atol=1e-4)


def test_loads_and_stores_by_hand_and_cp_async_move_the_gpus_bits():
    for name, (cpu, gpu) in _both_ways(ik.wide_words(), {"C", "W", "D"}).items():
        assert torch.equal(cpu.view(torch.uint8), gpu.view(torch.uint8)), (name, _where_differ(cpu, gpu))
    cpu, gpu = _both_ways(ik.async_copies(), {"B"})["B"]
    assert _same_bits(cpu.float(), gpu.float()), _where_differ(cpu, gpu)


def test_reducers_and_a_cluster_that_shares_nothing_give_the_gpus_values():
    out = _both_ways(ek.row_reducers(), {"S", "M"})
    torch.testing.assert_close(*out["S"], rtol=1e-5, atol=1e-5)
    assert _same_bits(*out["M"])
    cpu, gpu = _both_ways(ek.clustered_scale(), {"Y"})["Y"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_a_batched_reduce_and_a_tile_atomic_add_by_tma_give_the_gpus_values():
    out = _both_ways(ek.column_reduce_batched(batch=2), {"S", "M"})
    torch.testing.assert_close(*out["S"], rtol=1e-5, atol=1e-5)  # the GPU adds in another order
    assert _same_bits(*out["M"]), _where_differ(*out["M"])
    # the bulk reduction copy needs a TMA (sm_90 and later); every element's sum is exact in float32
    func = ek.tile_atomic_add_by_tma()
    try:
        cpu, gpu = _both_ways(func, {"Out"})["Out"]
    except LoweringError as err:
        pytest.skip(f"this GPU cannot build a TMA atomic add: {err}")
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_a_nan_propagating_reduce_is_the_gpus_hmax_nan_and_hmin_nan():
    func = ek.nan_propagating_rows()

    def rows(gen):
        x = (torch.rand(4, 32, generator=gen) * 8 - 4).half()
        x[1, 5], x[3, 31] = float("nan"), float("nan")
        return x

    out = _both_ways(func, {"Hi", "Lo", "Big"}, shapes={"X": rows}, nan_expected=True)
    for name, (cpu, gpu) in out.items():
        assert torch.equal(cpu.isnan(), gpu.isnan()), (name, cpu, gpu)
        assert _same_bits(cpu.float(), gpu.float()), (name, _where_differ(cpu.float(), gpu.float()))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_nan_is_skipped_by_the_default_reduce_and_t_max_as_on_the_gpu(dtype):
    """NaN in the first, a middle and the last column, and a row of NaN: the GPU's fmaxf / __hmax
    skip it, and so does the CPU path; of two zeros -0 < +0; both are the rule of
    ek.nan_skipping_reference (numpy's fmax, the sign of zero by PTX's max and min), bit for bit."""
    names = {"Hi", "Lo", "Low", "Big", "M"}
    out = _both_ways(ek.nan_skipping_rows(dtype), names, shapes={"X": lambda gen: ek.nan_rows_input(dtype)},
                     nan_expected=True)
    want = ek.nan_skipping_reference(ek.nan_rows_input(dtype))
    for name, (cpu, gpu) in out.items():
        assert _same_bits(cpu.float(), gpu.float()), (name, _where_differ(cpu.float(), gpu.float()))
        assert _same_bits(gpu.float(), want[name].float()), (name, _where_differ(gpu.float(), want[name].float()))


def test_thread_binding_loops_without_a_kernel_are_the_gpus_blocks_and_threads():
    out = _both_ways(ek.thread_loops_without_kernel(), {"B", "C"})
    for name, (cpu, gpu) in out.items():
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))


def test_vector_stores_by_hand_lane_by_lane_wrap_a_negative_index_as_the_gpu_does():
    # Y's first row reads X[-1], X[1], ...: TileLang wraps the negative lane on both
    out = _both_ways(host_c.lanes_by_hand(), {"Y", "Z", "W"},
                     shapes={"S": lambda gen: torch.tensor([-37], dtype=torch.int8)})
    for name, (cpu, gpu) in out.items():
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))
    cpu, gpu = _both_ways(host_c.lanes_of_a_call(), {"Y"})["Y"]  # T.floor of a vector: floorf of each lane
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)


def test_a_size_given_by_a_linear_extent_is_solved_as_the_gpus_host_solves_it():
    func = host_c.sized_by_expression()  # A: (n * 3 + 1,), n = 5 for 16 elements
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    gpu = torch.zeros(16, dtype=torch.int32, device="cuda")
    kernel(gpu)
    torch.cuda.synchronize()
    cpu = torch.zeros(16, dtype=torch.int32)
    result = tilelab.run(func, cpu, device="cpu", outputs=["A"])
    assert result.passed, result
    assert torch.equal(cpu, gpu.cpu()), (cpu, gpu)


def test_dp4a_is_the_gpus_dot_product_of_four_signed_bytes():
    def bytes_(gen):
        return torch.randint(-128, 128, (16, 8), generator=gen, dtype=torch.int32).to(torch.int8)

    cpu, gpu = _both_ways(ik.byte_dots(), {"C"}, shapes={"A": bytes_, "B": bytes_})["C"]  # C0: any int32
    assert torch.equal(cpu, gpu), (cpu, gpu)
# ---- the explicit-wgmma rule, lanewise stores, vector locals, views, other generators, inputs ----------

def test_an_explicit_wgmma_gemm_gives_the_gpus_tile_gemm():
    cpu, gpu = _both_ways(ik.explicit_wgmma(), {"D"})["D"]
    torch.testing.assert_close(cpu, gpu, rtol=1e-5, atol=1e-4)  # float16 products exact: only the sums' order


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fma2_abs2_and_pairs_of_halves_are_the_gpus_bits(dtype):
    for name, (cpu, gpu) in _both_ways(ik.packed_fma_abs(dtype), {"D", "E", "F"}).items():
        assert _same_bits(cpu, gpu), (dtype, name, _where_differ(cpu, gpu))


def test_wide_loads_reinterpreted_as_float_lanes_are_the_gpus_bits():
    for name, (cpu, gpu) in _both_ways(ik.wide_loads_as_floats(), {"Y2", "Y4"}).items():
        assert _same_bits(cpu, gpu), (name, _where_differ(cpu, gpu))


@pytest.mark.parametrize("generator", ["curandStateMRG32k3a_t", "curandStateXORWOW_t", "curandStatePhilox4_32_10_t"])
def test_each_generators_words_and_uniforms_are_the_gpus_and_normals_within_its_fast_math(generator):
    mrg = generator == "curandStateMRG32k3a_t"
    func = ik.generator_draws(generator, threads=32, draws=6, seed=0x0123456789ABCDEF, offset=5, first_seq=3,
                              double_normals=mrg)
    out = _both_ways(func, {"W", "U", "D", "G", *({"H"} if mrg else set())})
    for name in ("W", "U", "D"):
        cpu, gpu = out[name]
        assert _same_bits(cpu, gpu), (generator, name, _where_differ(cpu, gpu))
    torch.testing.assert_close(*out["G"], rtol=1e-5, atol=1e-5)
    if mrg:
        torch.testing.assert_close(*out["H"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_vector_local_read_by_extract_lane_and_a_view_as_bytes_are_the_gpus(dtype):
    cpu, gpu = _both_ways(ik.pair_lanes(dtype), {"B"})["B"]
    assert _same_bits(cpu, gpu), _where_differ(cpu, gpu)
    cpu, gpu = _both_ways(ik.shared_views("int8"), {"B"})["B"]
    assert torch.equal(cpu, gpu), _where_differ(cpu, gpu)


def test_an_extent_compiled_as_zero_and_strided_tensors_launch_as_on_the_gpu():
    """TileLang launches both on the GPU: the CPU path takes the same tensors."""
    cpu, gpu = _both_ways(inputs_k.row_sums_plus_one(8, 0), {"S"})["S"]
    assert torch.equal(cpu, gpu) and torch.equal(cpu, torch.ones(8)), (cpu, gpu)
    func = inputs_k.copy_columns(8, 32, 10, 12)
    base_a, base_b = torch.randn(10, 32), torch.zeros(12, 32)
    kernel = _tilelang.compile_kernel(func, target=_tilelang.local_gpu_arch(), out_idx=None)
    gpu_a, gpu_b = base_a.cuda(), base_b.cuda()
    kernel(torch.as_strided(gpu_a, (8, 32), (1, 10)), torch.as_strided(gpu_b, (8, 32), (1, 12)))
    torch.cuda.synchronize()
    a, b = torch.as_strided(base_a, (8, 32), (1, 10)), torch.as_strided(base_b, (8, 32), (1, 12))
    assert tilelab.run(func, a, b, device="cpu", outputs=["B"]).passed
    assert torch.equal(base_b, gpu_b.cpu())
