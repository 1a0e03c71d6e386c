"""The launch layer's CPU side: tolerances, sizes, poison and comparison, result models, sweep
bookkeeping with a fake compile step, plots from recorded samples, the no-GPU message."""

import dataclasses
import json
import math

import input_kernels as inputs_k
import pytest
import torch
from gemm_dynamic import matmul_dynamic_m

import tilelab
from tilelab.launch import BenchResult, SweepTable, _inputs
from tilelab.launch.sweep import sweep
from tilelab.render import plots


# Hand-computed: u(fp16) = 2^-11, u(bf16) = 2^-8, u(fp32) = 2^-24, u(tf32) = 2^-11.
@pytest.mark.parametrize("out, ins, k, expected", [
    ("float16", ["float16", "float16"], 4096, 2 * 2**-11 + 2 * 64 * 2**-24),  # 9.842e-4
    ("float16", ["float16", "float16"], 1, 2 * 2**-11 + 2 * 2**-24),  # elementwise
    ("bfloat16", ["bfloat16", "bfloat16"], 1024, 2 * 2**-8 + 2 * 32 * 2**-24),
    ("float32", ["float32", "float32"], 256, 2 * 2**-24 + 2 * 2**-11 + 2 * 16 * 2**-24),  # tf32 operands
    ("float32", ["int8", "int8"], 4096, 2 * 2**-24),  # integer products summed exactly
    ("int32", ["int8", "int8"], 4096, 0.0),  # integer outputs must match exactly
    ("uint8", ["float16"], 1, 0.0),
])
def test_tolerance_rule_against_hand_values(out, ins, k, expected):
    assert math.isclose(_inputs.tolerance_for(out, ins, reduction=k), expected, rel_tol=1e-12)


def test_tolerance_fails_fp16_accumulation_and_passes_fp32_accumulation():
    # Simulate a K=4096 fp16 GEMM on the CPU: fp32 accumulation with one rounding of the result to
    # fp16, against fp16 accumulation (tensor-core chunks of 16 summed into an fp16 accumulator).
    gen = torch.Generator().manual_seed(0)
    m, n, k = 16, 16, 4096
    a = torch.randn(m, k, generator=gen).half()
    b = torch.randn(k, n, generator=gen).half()
    ref = a.double() @ b.double()
    acc16 = torch.zeros(m, n).half()
    for k0 in range(0, k, 16):
        acc16 = (acc16.float() + a[:, k0:k0 + 16].float() @ b[k0:k0 + 16].float()).half()
    acc32 = (a.float() @ b.float()).half()

    def rel(x):  # computed here, not by tilelab
        return ((x.double() - ref).norm() / ref.norm()).item()

    tol = _inputs.tolerance_for("float16", ["float16", "float16"], reduction=k)
    assert rel(acc32) < tol < rel(acc16)
    assert not _inputs.compare("C", acc16, ref, tolerance=tol).passed
    assert _inputs.compare("C", acc32, ref, tolerance=tol).passed
    with pytest.raises(TypeError, match="output's dtype first"):
        _inputs.tolerance_for(["float16", "float32"])


def test_integer_inputs_upcast_for_the_reference():
    a = torch.tensor([[1, -2], [3, 4]], dtype=torch.int8)
    b = torch.tensor([[5, 6], [-7, 8]], dtype=torch.int8)
    ua, ub = _inputs.upcast([a, b])
    assert ua.dtype == torch.float64 and ua.tolist() == [[1.0, -2.0], [3.0, 4.0]]
    assert torch.matmul(ua, ub).tolist() == [[19.0, -10.0], [-13.0, 50.0]]  # by hand
    big = torch.tensor([2**60], dtype=torch.int64)
    assert _inputs.upcast([big])[0].dtype == torch.int64  # not exact in float64: left alone
    assert _inputs.upcast([torch.tensor([2**20], dtype=torch.int32)], torch.float32)[0].dtype == torch.float32
    assert _inputs.upcast([torch.tensor([2**30], dtype=torch.int32)], torch.float32)[0].dtype == torch.int32


def test_symbolic_extents_and_where_sizes_bind():
    assert _inputs.eval_dim("(m + 127) // 128", {"m": 1000}) == 8
    with pytest.raises(ValueError, match="m=4096"):
        _inputs.eval_dim("m * 2", {})
    report = tilelab.inspect(matmul_dynamic_m(1024, 1024), "sm_90a")
    params = _inputs.params_from_arguments(report.arguments)
    assert [p.name for p in params] == ["A", "B", "C"]
    assert params[0].shape == ("m", 1024)
    assert _inputs.bind_sizes(params, [(2000, 1024)], {}) == {"m": 2000}
    with pytest.raises(ValueError, match="m is 2000 but C"):
        _inputs.bind_sizes(params, [(2000, 1024), (1024, 1024), (3000, 1024)], {})
    with pytest.raises(ValueError, match="A has 2 dims"):
        _inputs.bind_sizes(params, [(2000,)], {})


def test_poison_marks_unwritten_elements_and_compare_measures_error():
    ref = torch.linspace(1, 2, 64, dtype=torch.float64).reshape(8, 8)
    out = _inputs.poison_(torch.empty(8, 8, dtype=torch.float16))
    assert _inputs.unwritten_mask(out).all()  # 0xFFFF is a NaN in fp16
    out[:4] = ref[:4].to(torch.float16)  # the "kernel" skips the lower half
    check = _inputs.compare("C", out, ref, tolerance=2e-3)
    assert check.unwritten == 32 and check.first_unwritten == (4, 0) and not check.passed
    # a fully written output with a 1% relative error fails a 2e-3 tolerance, passes 2e-2
    scaled = (ref * 1.01).to(torch.float32)
    check = _inputs.compare("C", scaled, ref, tolerance=2e-3)
    assert check.unwritten == 0 and math.isclose(check.rel_error, 0.01, rel_tol=1e-5)
    assert not check.passed and _inputs.compare("C", scaled, ref, tolerance=2e-2).passed
    assert check.worst and check.worst[0].index == (7, 7)  # the largest value has the largest error


def test_bench_result_statistics_and_rates():
    r = BenchResult(kernel="gemm", samples_ms=(1.0, 2.0, 3.0, 4.0, 100.0), flops=2e12, mode="sustained",
                    method="CUDA events, back to back, L2 flushed")
    assert (r.median_ms, r.min_ms) == (3.0, 1.0)
    assert math.isclose(r.tflops, 2e12 / 3e-3 / 1e12)
    assert BenchResult.from_dict(r.to_dict()) == r
    assert "L2 flushed" in repr(r) or "L2 flushed" in r._repr_html_()


def test_sweep_bookkeeping_with_a_fake_compile_step():
    timings = {64: 2.0, 128: 1.0, 256: 1.5}

    def fake_compile(factory, size, config):
        if config["block"] == 32:
            raise ValueError("block 32 does not fit the tile")

        def step():
            if config["block"] == 512:
                raise RuntimeError("ptxas: too many resources requested")
            return config["block"]

        return step

    def fake_bench(prepared, size, config, **kwargs):
        return BenchResult(kernel="k", samples_ms=(timings[prepared] * size["N"] / 1024,) * 3,
                           flops=kwargs.get("flops"))

    def factory(N, block):
        return None

    table = sweep(factory, params={"block": [32, 64, 128, 256, 512]}, sizes={"N": [1024, 2048]},
                  flops=lambda N: 2.0 * N, compile_fn=fake_compile, bench_fn=fake_bench, progress=False)
    assert isinstance(table, SweepTable)
    assert len(table.rows) == 10  # every configuration at every size, failures included
    failed = {(dict(r.config)["block"], r.stage) for r in table.failed}
    assert failed == {(32, "elaborate"), (512, "compile")}
    assert all("too many resources" in r.error for r in table.failed if r.stage == "compile")
    best = {dict(r.size)["N"]: dict(r.config)["block"] for r in table.rows if r.best}
    assert best == {1024: 128, 2048: 128}
    assert table.best_call({"N": 2048}) == "factory(N=2048, block=128)"  # the factory, ready to call
    assert "best at 2048: factory(N=2048, block=128)" in repr(table)
    assert SweepTable.from_dict(table.to_dict()) == table


def test_plots_from_recorded_samples_are_png():
    r = BenchResult(kernel="gemm", samples_ms=tuple(1.0 + 0.01 * i for i in range(50)), flops=1e12)
    png = plots.figure_png(plots.samples_plot(r))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_run_without_gpu_runs_the_tile_program_on_the_cpu_and_says_so():
    result = tilelab.run(matmul_dynamic_m(128, 128), m=96, ref=lambda a, b: a @ b)
    assert result.passed, result
    assert result.backend.startswith("emulated") and "(emulated)" in result.device
    assert any("emulated on the CPU: the tile program's meaning, not the GPU's timing or its races" in n
               and "no CUDA GPU is visible" in n for n in result.notes)
    assert dict(result.sizes) == {"m": 96}


# ---------------------------------------------------------------------------------------------
# Validation of the tensors a user passes
# ---------------------------------------------------------------------------------------------

from tilelab.launch import _bench, _kernel, _run  # noqa: E402
from tilelab.launch._inputs import Param  # noqa: E402

GEMM_PARAMS = [Param("A", "tensor", "float16", ("m", 64)), Param("B", "tensor", "float16", (64, 32)),
               Param("C", "tensor", "float16", ("m", 32), is_output=True)]


def test_an_extent_compiled_as_zero_launches_an_empty_tensor_as_a_gpu_does():
    """A kernel compiled with an extent 0 (TileLang launches it on a GPU: a loop over it runs no
    iteration) runs on the CPU too, on the empty tensor a caller passes (torch's strides for it are
    not the row-major ones TileLang's host code checks): S = 1 + the empty row sums."""
    a, s = torch.zeros(8, 0), torch.zeros(8)
    result = tilelab.run(inputs_k.row_sums_plus_one(8, 0), a, s, device="cpu", outputs=["S"])
    assert result.passed, result
    assert torch.equal(s, 1 + a.sum(1))


def test_a_sub_byte_tensor_is_given_as_the_bytes_that_pack_it_along_its_last_dimension():
    # TileLang's rule for types narrower than a byte: a (m, 16) float4 tensor is a (m, 8) byte tensor
    params = [Param("X", "tensor", "float4_e2m1fn", ("m", 16)), Param("Y", "tensor", "int4", (4, "n"))]
    x, y = torch.zeros(4, 8, dtype=torch.uint8), torch.zeros(4, 3, dtype=torch.int8)
    args, bound = _inputs.build_inputs(params, [x, y], {}, device="cpu")
    assert bound == {"m": 4, "n": 6} and args[0] is x and args[1] is y
    with pytest.raises(ValueError, match=r"X must have shape \(m, 16\); the float4_e2m1fn tensor of \[4, 16\] bytes "
                                         r"\(2 elements a byte along the last dimension\), in elements, given has "
                                         r"shape \[4, 32\]"):
        _inputs.build_inputs(params, [torch.zeros(4, 16, dtype=torch.uint8), y], {}, device="cpu")


def test_given_tensors_are_checked_and_errors_say_what_to_change():
    a, b = torch.randn(8, 64).half(), torch.randn(64, 32).half()
    args, bound = _inputs.build_inputs(GEMM_PARAMS, [a, b], {}, device="cpu")
    assert bound == {"m": 8} and args[0] is a and args[1] is b and tuple(args[2].shape) == (8, 32)
    with pytest.raises(ValueError, match=r"B must have shape \(64, 32\); the tensor given has shape \[64, 16\]"):
        _inputs.build_inputs(GEMM_PARAMS, [a, torch.randn(64, 16).half()], {}, device="cpu")
    with pytest.raises(ValueError, match=r"A must be torch.float16 .*got torch.float32: pass A.to\(torch.float16\)"):
        _inputs.build_inputs(GEMM_PARAMS, [a.float(), b], {}, device="cpu")
    with pytest.raises(ValueError, match=r"B must be contiguous.*strides \[1, 64\].*B.contiguous\(\)"):
        _inputs.build_inputs(GEMM_PARAMS, [a, torch.randn(32, 64).half().t()], {}, device="cpu")
    with pytest.raises(ValueError, match=r"A must be on the cuda device; got a tensor on cpu"):
        _inputs.build_inputs(GEMM_PARAMS, [a, b], {}, device="cuda")
    with pytest.raises(ValueError, match=r"size m=-4 must be positive"):
        _inputs.build_inputs(GEMM_PARAMS, [], {"m": -4}, device="cpu")
    with pytest.raises(ValueError, match=r"size m=0 must be positive"):
        _inputs.build_inputs(GEMM_PARAMS, [], {"m": 0}, device="cpu")
    with pytest.raises(ValueError, match=r"A needs a positive extent in dim 0"):
        _inputs.build_inputs(GEMM_PARAMS, [(0, 64)], {}, device="cpu")
    with pytest.raises(ValueError, match=r"A needs a positive extent in dim 1"):  # empty where 64 is compiled
        _inputs.build_inputs(GEMM_PARAMS, [torch.zeros(8, 0).half()], {}, device="cpu")
    with pytest.raises(ValueError, match=r"m is 8 but C has extent 9 in dim 0"):
        _inputs.build_inputs(GEMM_PARAMS, [a, b, torch.empty(9, 32).half()], {}, device="cpu")
    # a strided_tensor parameter takes any strides
    strided = [Param("X", "tensor", "float32", (4, 4), strided=True), Param("Y", "tensor", "float32", (4, 4), True)]
    x = torch.randn(4, 4).t()
    assert _inputs.build_inputs(strided, [x], {}, device="cpu")[0][0] is x


def test_a_strided_tensor_parameter_keeps_its_strides_when_outputs_are_named():
    """T.StridedTensor parameters (column-major, padded) with outputs= naming one: the CPU run takes the
    caller's strided views, as TileLang's own launcher does, and writes B through its strides."""
    base_a, base_b = torch.randn(10, 32), torch.zeros(12, 32)
    a, b = torch.as_strided(base_a, (8, 32), (1, 10)), torch.as_strided(base_b, (8, 32), (1, 12))
    result = tilelab.run(inputs_k.copy_columns(8, 32, 10, 12), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    assert torch.equal(b, 2 * a)
    flat = base_b.view(-1)
    assert not flat[torch.arange(len(flat)) % 12 >= 8].any()  # each column's padding untouched


def test_a_scalar_parameter_that_is_also_a_size_binds_it_when_passed():
    """kernel(m: T.int32) returning T.empty([m + 1]): the m passed at launch is the output's size."""
    params = [Param("m", "scalar", "int32"), Param("B", "tensor", "float32", ("m + 1",), True, False)]
    assert _inputs.bind_sizes(params, [23], {}) == {"m": 23}
    assert _inputs.bind_sizes(params, [23], {"m": 5}) == {"m": 5}  # one passed by name is kept (checked later)
    unrelated = [Param("n", "scalar", "int32"), Param("B", "tensor", "float32", (4,), True)]
    assert _inputs.bind_sizes(unrelated, [23], {}) == {}


def test_symbolic_expression_extents_are_checked():
    params = [Param("A", "tensor", "float32", ("n",)), Param("B", "tensor", "float32", ("n * 2",), is_output=True)]
    with pytest.raises(ValueError,
                       match=r"B must have shape \(n \* 2\) = \[10\] with n=5; the tensor given has shape \[9\]"):
        _inputs.build_inputs(params, [torch.randn(5), torch.empty(9)], {}, device="cpu")
    args, _ = _inputs.build_inputs(params, [torch.randn(5), torch.empty(10)], {}, device="cpu")
    assert tuple(args[1].shape) == (10,)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "uint8", "int32"]
                         + (["float8_e4m3fn", "float8_e5m2"] if hasattr(torch, "float8_e4m3fn") else []))
def test_built_inputs_are_random_and_never_all_zero(dtype):
    params = [Param("A", "tensor", dtype, (64, 64)), Param("B", "tensor", dtype, (64, 64), is_output=True)]
    (a1, b1), _ = _inputs.build_inputs(params, [], {}, device="cpu", seed=1)
    (a2, _), _ = _inputs.build_inputs(params, [], {}, device="cpu", seed=2)
    assert a1.dtype == _inputs.torch_dtype(dtype) and tuple(a1.shape) == (64, 64)
    v1, v2 = a1.to(torch.float64), a2.to(torch.float64)
    assert (v1 != 0).sum() > 64 * 64 // 2  # mostly non-zero
    assert len(torch.unique(v1)) > 4  # not a constant
    assert not torch.equal(v1, v2)  # the seed changes the values
    assert torch.equal(v1, _inputs.build_inputs(params, [], {}, device="cpu", seed=1)[0][0].to(torch.float64))


# ---------------------------------------------------------------------------------------------
# Work counts
# ---------------------------------------------------------------------------------------------

WGMMA_SOURCE = """#include <tl_templates/cuda/instruction/wgmma.h>
extern "C" __global__ void gemm_kernel(const CUtensorMap A_desc, half_t* C) {
  tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16>(a, b, c);
}"""
MMA_SOURCE = "__global__ void k(half* A) { tl::gemm_ss<128, 128, 32, 2, 2, 0, 0>(a, b, c); }"
PTX_SOURCE = 'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0}, ...");'
ADD_SOURCE = """#include <tl_templates/cuda/gemm.h>
extern "C" __global__ void add_kernel(half_t* A, half_t* B, half_t* C) {
  C[threadIdx.x] = A[threadIdx.x] + B[threadIdx.x];  // bitmap of the gemm-free kind
}"""


def test_count_work_counts_gemm_flops_only_for_matrix_multiplies():
    square = [Param("A", "tensor", "float16", (1024, 1024)), Param("B", "tensor", "float16", (1024, 1024)),
              Param("C", "tensor", "float16", (1024, 1024), is_output=True)]
    bytes_ = 3 * 1024 * 1024 * 2  # three fp16 1024x1024 tensors, each touched once
    assert _kernel.count_work(square, {}, ADD_SOURCE) == (None, bytes_)  # C = A + B is no GEMM
    assert _kernel.count_work(square, {}, None) == (None, bytes_)  # unknown source: bytes only
    for src in (WGMMA_SOURCE, MMA_SOURCE, PTX_SOURCE):
        assert _kernel.count_work(square, {}, src) == (2 * 1024**3, bytes_)
    # M=8, N=32, K=64 by hand: 2*8*32*64 flops; bytes (8*64 + 64*32 + 8*32) * 2
    assert _kernel.count_work(GEMM_PARAMS, {"m": 8}, WGMMA_SOURCE) == (32768.0, (512 + 2048 + 256) * 2)
    assert _kernel.gemm_flops([(64, 8), (32, 64)], [(8, 32)]) == 32768.0  # A stored (K, M), B stored (N, K)
    assert _kernel.gemm_flops([(8, 64), (63, 32)], [(8, 32)]) is None  # K disagrees
    assert _kernel.gemm_flops([(8, 64)], [(8, 32)]) is None


def test_graph_batch_covers_every_copy_and_rotation_note_is_honest():
    assert _bench.graph_launches(20, 1) == 20
    assert _bench.graph_launches(20, 64) == 64
    assert _bench.graph_launches(20, 3) == 21 and _bench.graph_launches(20, 3) % 3 == 0
    mib = 1 << 20
    note = _bench._rotation_note(64, 0.25 * mib, 50 * mib)  # 16 MiB working set
    assert "16.0 MiB still fits in 50 MiB of L2" in note and "exceeds" not in note
    note = _bench._rotation_note(8, 20 * mib, 50 * mib)
    assert "160.0 MiB against 50 MiB of L2" in note and "DRAM" in note


def test_isolated_repetitions_are_capped_by_wall_time():
    # 10 us kernel, 2 ms idle: each launch costs 2 + 0.1 + 0.01 + 0.05 = 2.16 ms of wall time
    assert _bench.isolated_reps(0.01, 2.0, 500.0, 10, 10_000) == int(500 / 2.16) == 231
    assert _bench.isolated_reps(0.01, 0.0, 500.0, 10, 10_000) == _bench.ISOLATED_MAX_REP == 300
    assert _bench.isolated_reps(50.0, 2.0, 500.0, 10, 10_000) == 10  # min_rep still holds


# ---------------------------------------------------------------------------------------------
# Poison where 0xFF is a value
# ---------------------------------------------------------------------------------------------


def test_two_poison_patterns_tell_written_minus_one_from_unwritten():
    assert _inputs.poison_is_value("int8") and _inputs.poison_is_value("uint8")
    assert _inputs.poison_is_value("float8_e4m3fnuz") and not _inputs.poison_is_value("float8_e4m3fn")
    assert not _inputs.poison_is_value("float16")

    def kernel(out):  # writes -1 (0xFF) everywhere except the last row
        out[:-1] = -1
        return out

    first = kernel(_inputs.poison_(torch.empty(4, 8, dtype=torch.int8)))
    second = kernel(_inputs.poison_(torch.empty(4, 8, dtype=torch.int8), _inputs.SECOND_POISON))
    assert _inputs.unwritten_mask(first).all()  # one pattern alone cannot tell
    mask = _inputs.unwritten_in_both(first, second)
    assert mask.sum() == 8 and mask[-1].all() and not mask[:-1].any()
    check = _inputs.compare("C", first, None, tolerance=0.0, second=second)
    assert check.unwritten == 8 and check.first_unwritten == (3, 0)
    full = torch.full((4, 8), 255, dtype=torch.uint8)  # a kernel that writes 255 everywhere
    assert _inputs.compare("C", full, None, tolerance=0.0, second=full.clone()).unwritten == 0


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("message, kind, sticky", [
    ("CUDA error: an illegal memory access was encountered (cudaErrorIllegalAddress)", "illegal_address", True),
    ("CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address", "misaligned_address", True),
    ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
     "out_of_memory", False),
    ("CUDA error: too many resources requested for launch", "resources", False),
    ("Error: Failed to initialize the TMA descriptor A_desc: CUDA_ERROR_INVALID_VALUE", "tma_descriptor", False),
    ("cuTensorMapEncodeTiled failed with CUDA_ERROR_INVALID_VALUE", "tma_descriptor", False),
    ("could not allocate the bitmap for the output image", "other", False),  # "tma" inside a word
    ("CUDA error: unspecified launch failure", "launch_failure", True),
])
def test_classify_cuda_error_on_real_messages(message, kind, sticky):
    assert _run.classify_cuda_error(message) == (kind, sticky)


def test_out_of_memory_before_launch_names_the_kernel():
    err = _run.out_of_memory_error("gemm", "the inputs and outputs",
                                   torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"))
    assert isinstance(err, _run.KernelLaunchError) and err.kind == "out_of_memory" and not err.sticky
    assert str(err).startswith("gemm: out of GPU memory (while allocating the inputs and outputs: asked for 8.00 GiB")
    assert "CUDA out of memory" in str(err)
    assert _run.is_out_of_memory(torch.cuda.OutOfMemoryError("x"))
    assert not _run.is_out_of_memory(ValueError("bad shape"))


def test_out_of_memory_says_what_was_asked_and_what_is_free():
    torch_message = ("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
                     "which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.9 GiB memory in use.")
    text = _run.memory_text(torch_message, free_total=(int(1.25 * 2**30), int(79.19 * 2**30)))
    assert text == "asked for 20.00 GiB, 1.25 GiB free of 79.19 GiB"
    assert _run.memory_text("out of memory", free_total=(0, 2**30)) == "0.00 GiB free of 1.00 GiB"


def test_misaligned_tensor_under_a_tma_descriptor_is_named():
    from tilelab.engine import tma_rules as _tma_rules

    prepared = _run.Prepared(compiled=None, name="gemm", params=GEMM_PARAMS, backend="tvm_ffi")
    prepared.tma_descriptors = lambda: (_tma_rules._TILED,)  # a TMA descriptor over buffer "A"
    base = torch.empty(8 * 64 + 8, dtype=torch.float16)
    aligned = base[:512].view(8, 64)
    offset = base[1:513].view(8, 64)  # one fp16 element in: 2 bytes past the boundary
    assert aligned.data_ptr() % 16 == 0 and offset.data_ptr() % 16 == 2
    b, c = torch.empty(64, 32).half(), torch.empty(8, 32).half()
    _run.check_tma_alignment(prepared, [aligned, b, c])  # no error
    with pytest.raises(_run.MisalignedTensorError,
                       match=r"tensor A starts at 0x[0-9a-f]+, 2 bytes past a 16-byte boundary.*A_desc.*16-byte rule"):
        _run.check_tma_alignment(prepared, [offset, b, c])
    # a misaligned tensor no descriptor reads is left to the kernel
    _run.check_tma_alignment(prepared, [aligned, b, base[1:257].view(8, 32)])


# ---------------------------------------------------------------------------------------------
# Sweep: sticky errors, check stage, baselines, progress
# ---------------------------------------------------------------------------------------------


def _fake_sweep(fail: dict, baseline=None, progress=False, ref=None, check_fn=None):
    def fake_compile(factory, size, config):
        return lambda: config["block"]

    seen = []

    def fake_bench(prepared, size, config, **kwargs):
        seen.append((prepared, kwargs))
        if not callable(prepared) and prepared in fail:
            raise fail[prepared]
        return BenchResult(kernel="k", samples_ms=(1.0 / (prepared if not callable(prepared) else 1),) * 3,
                           flops=kwargs.get("flops", 2.0 * size["N"] ** 3 if not callable(prepared) else None),
                           bytes=kwargs.get("bytes", 6.0 * size["N"] ** 2 if not callable(prepared) else None))

    table = sweep(lambda N, block: None, params={"block": [1, 2, 4]}, sizes={"N": [64]}, baseline=baseline,
                  compile_fn=fake_compile, bench_fn=fake_bench, progress=progress, ref=ref, check_fn=check_fn)
    return table, seen


def test_sweep_stops_after_a_sticky_cuda_error():
    sticky = _run.KernelLaunchError("gemm", "illegal_address", "RuntimeError: an illegal memory access", sticky=True)
    table, seen = _fake_sweep({2: sticky}, baseline={"torch": lambda N: (lambda: None)})
    by_block = {dict(r.config).get("block"): r for r in table.rows if r.label is None}
    assert by_block[1].ok and by_block[2].stage == "bench" and "illegal memory access" in by_block[2].error
    assert by_block[4].stage == "not run" and not by_block[4].ok
    assert "block=2 at size 64" in by_block[4].error and "illegal_address" in by_block[4].error
    (base,) = table.baselines
    assert base.stage == "not run"
    assert [p for p, _ in seen] == [1, 2]  # nothing was launched after the sticky error
    assert any("block=2" in n for n in table.notes)
    # a non-sticky failure does not stop the sweep
    table, _ = _fake_sweep({2: _run.KernelLaunchError("gemm", "resources", "too many resources")})
    assert [r.ok for r in table.rows] == [True, False, True]


def test_sweep_goes_on_after_a_crash_or_hang_in_the_worker():
    from tilelab.launch import _isolated
    from tilelab.launch._run import Prepared
    from tilelab.launch._worker import WorkerDied, WorkerTimeout

    prepared = Prepared(compiled=None, name="gemm", params=[], backend="tvm_ffi")
    crash = _isolated.died_error(prepared, WorkerDied("the tilelab worker process died (killed by SIGSEGV)"))
    hang = _isolated.timeout_error(prepared, WorkerTimeout("gemm", 5.0), {})
    assert crash.sticky and crash.isolated and not hang.sticky
    table, seen = _fake_sweep({1: crash, 2: hang}, baseline={"torch": lambda N: (lambda: None)})
    by_block = {dict(r.config).get("block"): r for r in table.rows if r.label is None}
    assert "SIGSEGV" in by_block[1].error and by_block[1].stage == "bench"
    assert "did not finish" in by_block[2].error
    assert by_block[4].ok and table.baselines[0].ok  # a fresh worker took the next configuration
    assert [p for p, _ in seen if not callable(p)] == [1, 2, 4] and not table.notes


def test_sweep_interrupted_keeps_rows_and_the_partial_measurement():
    from tilelab.launch._worker import LaunchInterrupted

    partial = BenchResult(kernel="k", samples_ms=(2.0, 2.0, 2.0))
    table, seen = _fake_sweep({2: LaunchInterrupted("gemm", partial)}, baseline={"torch": lambda N: (lambda: None)})
    by_block = {dict(r.config).get("block"): r for r in table.rows if r.label is None}
    assert by_block[1].ok and by_block[2].ok and by_block[2].median_ms == 2.0
    assert by_block[4].stage == "not run" and "interrupted" in by_block[4].error
    assert table.baselines[0].stage == "not run"
    assert [p for p, _ in seen] == [1, 2]  # nothing launched after the stop
    assert any("3 launches measured before the stop" in n for n in table.notes)
    # without a partial measurement the interrupted row says so
    table, _ = _fake_sweep({2: KeyboardInterrupt()})
    assert [r.ok for r in table.rows] == [True, False, False]
    assert all("interrupted" in r.error and r.stage == "not run" for r in table.rows[1:])


def test_sweep_labels_check_failures_and_gives_baselines_the_kernels_work():
    def check_fn(kernel, ref, size):
        if kernel == 4:
            raise RuntimeError("the reference raised")
        from tilelab.launch import RunResult

        check = _inputs.compare("C", torch.ones(2), torch.ones(2) * (1.5 if kernel == 2 else 1.0), tolerance=1e-3)
        return RunResult("k", (check,), reference="ref")

    table, seen = _fake_sweep({}, baseline={"torch.matmul": lambda N: (lambda: None)}, ref=lambda x: x,
                              check_fn=check_fn)
    stages = {dict(r.config).get("block"): r.stage for r in table.rows if r.label is None}
    assert stages == {1: None, 2: "check", 4: "check"}
    assert "the reference raised" in [r for r in table.rows if dict(r.config).get("block") == 4][0].error
    (base,) = table.baselines
    baseline_kwargs = seen[-1][1]
    assert baseline_kwargs["flops"] == 2.0 * 64**3 and baseline_kwargs["bytes"] == 6.0 * 64**2
    assert base.tflops == pytest.approx(2.0 * 64**3 / 1e-3 / 1e12)  # 1 ms median


def test_sweep_shows_progress_for_compiles_and_benchmarks(record_progress):
    from tilelab.launch.sweep import _show

    bars = record_progress(_show)
    _fake_sweep({}, baseline={"torch": lambda N: (lambda: None)}, progress=True)
    assert [(b.desc.split()[0], b.total, b.updates) for b in bars] == [("compiling", 3, 3), ("benchmarking", 4, 4)]


# ---------------------------------------------------------------------------------------------
# Ceilings cache, result reprs
# ---------------------------------------------------------------------------------------------


def test_ceilings_cache_is_keyed_by_device_driver_and_torch(tmp_path):
    from tilelab.launch import Ceilings, _ceilings

    path = tmp_path / "ceilings.json"
    h100 = Ceilings("NVIDIA H100 80GB HBM3", 3000.0, 750.0, driver="580.159.04", torch_version="2.11.0")
    h200 = Ceilings("NVIDIA H200", 4300.0, 790.0, driver="580.159.04", torch_version="2.11.0")
    _ceilings.write_cache(h100, path)
    _ceilings.write_cache(h200, path)
    key = _ceilings.cache_key("NVIDIA H100 80GB HBM3", "580.159.04", "2.11.0")
    assert key == h100.key
    assert _ceilings.read_cache(key, path) == h100
    assert _ceilings.read_cache(h200.key, path).copy_gbps == 4300.0
    assert _ceilings.read_cache(_ceilings.cache_key("NVIDIA H100 80GB HBM3", "590.1", "2.11.0"), path) is None
    assert _ceilings.read_cache(key, tmp_path / "missing.json") is None
    path.write_text("not json")
    assert _ceilings.read_cache(key, path) is None


def test_run_result_repr_shows_verdict_figures_and_worst_elements():
    from tilelab.launch import OutputCheck, RunResult, WorstElement

    worst = (WorstElement("C", (7, 3), 1.25, 1.0, 0.25),)
    bad = RunResult("gemm", (OutputCheck("C", "float16", (8, 8), rel_error=3.5e-2, max_abs_error=0.25,
                                         tolerance=9.8e-4, worst=worst),), reference="matmul", device="H100")
    text = repr(bad)
    assert text.startswith("gemm: FAIL")
    assert "rel error 3.500e-02 (tolerance 9.8e-04)" in text and "max abs error 2.500e-01" in text
    assert "at [7, 3]: got 1.25, expected 1 (|err| 0.25)" in text
    good = RunResult("gemm", (OutputCheck("C", "float16", (8, 8), rel_error=2e-4, max_abs_error=1e-3,
                                          tolerance=9.8e-4),), reference="matmul")
    assert repr(good).startswith("gemm: PASS") and good
    unwritten = RunResult("copy", (OutputCheck("B", "int8", (4, 8), unwritten=8, first_unwritten=(3, 0)),))
    assert "FAIL" in repr(unwritten) and "8 elements never written (first at [3, 0])" in repr(unwritten)


# ---------------------------------------------------------------------------------------------
# Plots from recorded data: assert on the Figure, not on PNG bytes
# ---------------------------------------------------------------------------------------------

from tilelab.launch import Ceilings, SweepRow  # noqa: E402


def _recorded_table() -> SweepTable:
    rows = []
    for n, base_ms in ((1024, 0.02), (2048, 0.12), (4096, 0.9)):
        size = (("M", n), ("N", n), ("K", n))
        flops = 2.0 * n**3
        for block, factor in ((64, 1.3), (128, 1.0)):
            ms = base_ms * factor
            rows.append(SweepRow((("block_M", block), ("threads", 256)), size, median_ms=ms, min_ms=ms,
                                 spread=0.01, tflops=flops / ms / 1e9, best=block == 128))
        rows.append(SweepRow((), size, median_ms=base_ms * 0.95, tflops=flops / (base_ms * 0.95) / 1e9,
                             label="torch.matmul"))
    rows.append(SweepRow((("block_M", 256), ("threads", 256)), (("M", 4096), ("N", 4096), ("K", 4096)),
                         error="ptxas: too many resources", stage="compile"))
    return SweepTable("gemm", tuple(rows))


def _tick_texts(labels):
    return [t.get_text() for t in labels]


def test_throughput_and_latency_plots_draw_every_series_against_named_sizes():
    table = _recorded_table()
    for fig, ylabel in ((plots.throughput_vs_size(table), "TFLOP/s"), (plots.latency_vs_size(table), "median ms")):
        ax = fig.axes[0]
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == {"block_M=64", "block_M=128", "torch.matmul"}  # threads=256 is common
        assert lines["torch.matmul"].get_linestyle() == "--" and len(lines["torch.matmul"].get_xdata()) == 3
        assert ax.get_ylabel() == ylabel and ax.get_xlabel() == "size (MxNxK)"
        assert _tick_texts(ax.get_xticklabels()) == ["1024x1024x1024", "2048x2048x2048", "4096x4096x4096"]
        assert "every configuration: threads=256" in ax.get_title()
    ys = plots.throughput_vs_size(table).axes[0].get_lines()[1].get_ydata()  # block_M=128
    assert ys[0] == pytest.approx(2.0 * 1024**3 / 0.02 / 1e9)


def test_configs_compared_draws_one_bar_per_row_fastest_first():
    fig = plots.configs_compared(_recorded_table())
    ax = fig.axes[0]
    assert len(ax.patches) == 3  # two configurations and the baseline; the failed one is not drawn
    assert _tick_texts(ax.get_yticklabels()) == ["torch.matmul", "block_M=128", "block_M=64"]
    assert ax.get_xlabel() == "TFLOP/s" and "4096x4096x4096 (1 failed, not drawn)" in ax.get_title()
    widths = [p.get_width() for p in ax.patches]
    assert widths == sorted(widths, reverse=True)


def test_roofline_places_flop_kernels_and_shows_bytes_only_kernels_against_bandwidth():
    ceilings = Ceilings("H100", copy_gbps=3000.0, matmul_tflops=750.0)
    gemm = BenchResult("gemm", (1.0,), flops=2.0 * 4096**3, bytes=3 * 4096**2 * 2.0)
    copy = BenchResult("copy", (1.0,), bytes=2.4e9)  # 2400 GB/s, 80% of the roof
    fig = plots.roofline_plot(ceilings, [("gemm", gemm), ("copy", copy)])
    roof_ax, bw_ax = fig.axes
    labels = [line.get_label() for line in roof_ax.get_lines()]
    assert labels[0].startswith("roof: 3000 GB/s, 750 TFLOP/s") and labels[1].startswith("gemm: 137.4 TFLOP/s")
    (x,), (y,) = roof_ax.get_lines()[1].get_data()
    assert x == pytest.approx(2.0 * 4096**3 / (3 * 4096**2 * 2.0)) and y == pytest.approx(137.438953472)
    assert len(bw_ax.patches) == 1 and bw_ax.patches[0].get_width() == pytest.approx(2400.0)
    assert _tick_texts(bw_ax.get_yticklabels()) == ["copy"]
    assert bw_ax.get_lines()[0].get_xdata()[0] == 3000.0  # the bandwidth roof
    assert any("80%" in t.get_text() for t in bw_ax.texts)
    assert len(plots.roofline_plot(ceilings, [("gemm", gemm)]).axes) == 1  # no bytes-only kernel: one panel


def test_launch_records_import_no_renderer_and_delegate_their_display():
    """The records stay pure: importing them loads no renderer, matplotlib or IPython; showing
    one draws it through tilelab.render.launch, with the record's own values escaped."""
    import subprocess
    import sys

    probe = ("import sys, tilelab.launch as m\n"
             "bad = [n for n in ('tilelab.render.launch', 'tilelab.render.plots', 'matplotlib', 'IPython')"
             " if n in sys.modules]\n"
             "print(bad)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

    from tilelab.launch import BenchResult
    from tilelab.render import launch as render_launch

    r = BenchResult(kernel="<gemm&1>", samples_ms=(1.0, 2.0, 3.0), mode="sustained")
    assert r._repr_html_() == render_launch.bench_result_html(r)
    assert "&lt;gemm&amp;1&gt;" in r._repr_html_() and "<gemm&1>" not in r._repr_html_()
    assert repr(r).startswith("<gemm&1> [sustained] median 2.0000 ms (min 1.0000")


def test_bench_options_record_and_keywords_are_one_call():
    """bench's measurement options are one frozen record; keywords that name its fields fill it,
    every other keyword is a size; the worker receives the record and the sizes apart."""
    import tilelab
    from tilelab.launch import BenchOptions

    opts, sizes = BenchOptions.split(None, {"mode": "isolated", "idle_ms": 5.0, "M": 4096, "N": 128})
    assert opts == BenchOptions(mode="isolated", idle_ms=5.0) and sizes == {"M": 4096, "N": 128}
    assert opts.repetition_ms == 500.0 and BenchOptions().repetition_ms == 1000.0
    assert BenchOptions(steady=False).repetition_ms == 100.0 and BenchOptions(mode="graph").repetition_ms == 100.0
    assert BenchOptions(rep_ms=7.0, mode="isolated").repetition_ms == 7.0
    assert BenchOptions().flushes and not BenchOptions(mode="graph").flushes
    assert BenchOptions(mode="graph", flush_l2=True).flushes
    # a keyword beside options= replaces that field only
    base = BenchOptions(mode="graph", graph_batch=40)
    assert BenchOptions.split(base, {"graph_batch": 8})[0] == BenchOptions(mode="graph", graph_batch=8)
    # what travels to the worker comes back as the same record and sizes
    import pickle

    assert pickle.loads(pickle.dumps((opts, sizes))) == (opts, sizes)
    wire = {**opts.to_dict(), **sizes}
    assert json.loads(json.dumps(wire)) == wire
    assert BenchOptions.split(None, wire) == (opts, sizes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.mode = "graph"
    # bad options are refused by name before anything needs a GPU
    with pytest.raises(ValueError, match="mode must be one of .*'graph'.*got 'fast'"):
        tilelab.bench(lambda: None, mode="fast")
    with pytest.raises(ValueError, match="ci_target is a relative half-width"):
        tilelab.bench(lambda: None, options=BenchOptions(), ci_target=5)
    if not _has_cuda():
        with pytest.raises(tilelab.NoGpuError):
            tilelab.bench(lambda: None, options=BenchOptions(mode="isolated"))


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_sweep_options_record_equals_its_keywords_and_unknown_options_are_named():
    from tilelab.launch import SweepOptions

    seen = []

    def fake_bench(prepared, size, config, **kwargs):
        seen.append(kwargs)
        return BenchResult(kernel="k", samples_ms=(float(config["block"]) / size["N"],) * 3)

    def factory(N, block):
        return None

    common = dict(compile_fn=lambda f, s, c: (lambda: c["block"]), bench_fn=fake_bench, progress=False)
    by_keywords = sweep(factory, {"block": [64, 128]}, {"N": [1024]}, mode="graph", timeout=9.0, **common)
    by_record = sweep(factory, {"block": [64, 128]}, {"N": [1024]},
                      options=SweepOptions(mode="graph", timeout=9.0, **common))
    def untimed(table):  # compile seconds are measured, so they differ run to run
        return [dataclasses.replace(r, compile_s=None) for r in table.rows]

    assert untimed(by_keywords) == untimed(by_record) and by_record.mode == "graph"
    assert [dict(r.config)["block"] for r in by_record.rows if r.best] == [64]
    assert seen[0] == seen[2] == {"mode": "graph", "isolate": True, "timeout": 9.0}
    with pytest.raises(TypeError, match="sweep\\(\\) has no option 'repeats'; its options are mode, flops"):
        sweep(factory, {"block": [64]}, {"N": [1024]}, repeats=3, **common)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn,
                                   torch.int32, torch.int8, torch.uint8])
def test_unwritten_and_nonfinite_counts_read_the_bits_of_every_dtype(dtype):
    """Ground truth: the bytes written by hand and torch's own isfinite (through float32)."""
    t = torch.empty(6, dtype=dtype)
    _inputs.poison_(t)
    t[2] = 1
    assert _inputs.unwritten_mask(t).tolist() == [True, True, False, True, True, True]
    _inputs.poison_(t, _inputs.SECOND_POISON)
    t[0] = 0
    assert _inputs.unwritten_mask(t, _inputs.SECOND_POISON).tolist() == [False] + [True] * 5
    if dtype.is_floating_point:
        values = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, -0.0, 65504.0]).to(dtype)
        want = int((~torch.isfinite(values.float())).sum())
        assert _inputs.count_nonfinite(values) == want
    else:
        assert _inputs.count_nonfinite(t) == 0
