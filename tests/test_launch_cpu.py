"""The launch layer's CPU side: tolerances, sizes, poison and comparison, result models, sweep
bookkeeping with a fake compile step, plots from recorded samples, the no-GPU message."""

import math

import pytest
import torch

import tilelab
from tilelab.launch import _inputs, plots
from tilelab.launch._sweep import sweep
from tilelab.launch.models import BenchResult, SweepTable

from gemm_dynamic import matmul_dynamic_m


@pytest.mark.parametrize("dtypes, expected", [
    (["float16", "float32"], 2e-3),  # the least precise float decides
    (["bfloat16", "float16"], 1.6e-2),
    (["float32"], 1e-3),
    (["int32", "int8"], 0.0),  # integer kernels must match exactly
])
def test_tolerance_from_dtypes(dtypes, expected):
    assert _inputs.tolerance_for(dtypes) == expected


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
    assert SweepTable.from_dict(table.to_dict()) == table


def test_plots_from_recorded_samples_are_png():
    r = BenchResult(kernel="gemm", samples_ms=tuple(1.0 + 0.01 * i for i in range(50)), flops=1e12)
    png = plots.figure_png(plots.samples_plot(r))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_run_without_gpu_says_inspection_still_works():
    from tilelab._errors import NoGpuError

    with pytest.raises(NoGpuError, match="inspect"):
        tilelab.run(matmul_dynamic_m(1024, 1024), m=1024)
