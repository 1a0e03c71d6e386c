"""Targets beyond CUDA: one registry and validation, HIP/Metal/C inspection against TileLang's own
output, MFMA and the LDS bank model against hand-derived tables, and launching on the CPU.

Ground truth comes from outside the code under test: TileLang's own ``tilelang.lower`` and
``tilelang.compile`` (the C target really compiles and runs here), TileLang's MFMA layout maps
(``tilelang/rocm/intrinsics/mfma_layout.py``), hand-derived tables, and torch.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import target_kernels as tk

import tilelab
from tilelab.engine import mfma
from tilelab.records.errors import LoweringError, TargetError
from tilelab.targets import REGISTRY, parse_target

ROOT = Path(__file__).resolve().parents[1]


def tilelang_device_source(func, target: dict) -> str:
    """TileLang's own lowering entry point, as a user would call it (no device compile)."""
    import tilelang
    from tilelang import tvm

    t = tvm.target.Target(target)
    with tilelang.transform.PassContext(opt_level=3), t:
        return tilelang.lower(func, target=t, enable_device_compile=False).kernel_source


def same_source(ours: str, theirs: str) -> bool:
    """Equal up to TileLang's numbering of temporaries: lowering the same kernel twice in one
    process may name a scratch buffer ``workspace`` once and ``workspace_1`` the next time."""
    number = re.compile(r"\b([A-Za-z_]\w*?)_\d+\b")
    return number.sub(r"\1", ours) == number.sub(r"\1", theirs)


# --------------------------------------------------------------------------------------------
# The registry and its one validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, name, family", [
    ("sm_90a", "sm_90a", "cuda"), ("cuda -arch=sm_80", "sm_80", "cuda"),
    ({"kind": "cuda", "arch": "sm_89"}, "sm_89", "cuda"),
    ("gfx942", "gfx942", "hip"), ("hip -mcpu=gfx90a", "gfx90a", "hip"),
    ({"kind": "hip", "mcpu": "gfx950"}, "gfx950", "hip"),
    ({"kind": "hip", "mcpu": "gfx942:sramecc+:xnack-"}, "gfx942", "hip"),
    ("metal", "metal", "metal"), ({"kind": "metal"}, "metal", "metal"),
    ("c", "c", "cpu"), ("cpu", "c", "cpu"), ({"kind": "c"}, "c", "cpu"),
])
def test_every_family_parses_to_one_registered_target(spec, name, family):
    target = parse_target(spec)
    assert (target.name, target.family) == (name, family)
    assert target in REGISTRY


def test_a_report_without_its_family_reads_it_from_its_targets_name_as_the_registry_says():
    from tilelab.records.kernel import KernelReport, Sources, family_of_target_name

    for target in REGISTRY:
        assert family_of_target_name(target.name) == target.family, target.name
        report = KernelReport("k", target.name, (), Sources(device=""))
        assert report.family == target.family
        assert KernelReport.from_dict({k: v for k, v in report.to_dict().items() if k != "family"}).family == \
            target.family  # a report saved before the field
    assert KernelReport("k", "sm_90a", (), Sources(device=""), family="hip").family == "hip"  # the inspection's word


def test_tvm_targets_parse_like_their_dicts():
    from tilelang import tvm

    assert parse_target(tvm.target.Target({"kind": "hip", "mcpu": "gfx942"})).name == "gfx942"
    assert parse_target(tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})).name == "sm_90a"
    assert parse_target(tvm.target.Target("c")).name == "c"


@pytest.mark.parametrize("spec, needle", [
    ("sm_10", "sm_10 is not a CUDA arch"), ("sm_999", "sm_999 is not a CUDA arch"),
    ("gfx1100", "gfx1100 is not an AMD CDNA GPU"), ("llvm", 'use "c"'), ("hip", "names no arch"),
    ({"kind": "opencl"}, "unknown target kind 'opencl'"), ({"kind": "hip"}, "names no AMD arch"), (90, "a int"),
])
def test_unknown_targets_are_refused_with_the_accepted_ones(spec, needle):
    with pytest.raises(TargetError) as info:
        parse_target(spec)
    text = str(info.value)
    assert needle in text
    for listed in ("sm_70", "sm_90a", "sm_120a", "gfx90a", "gfx942", "gfx950", "metal", "c"):
        assert listed in text


def test_capabilities_follow_the_hardware():
    assert parse_target("sm_90a").wgmma and parse_target("sm_90a").tma and parse_target("sm_90a").l2_windows
    assert parse_target("sm_90").tma and not parse_target("sm_90").wgmma  # WGMMA needs the "a" suffix
    assert parse_target("sm_80").l2_windows and not parse_target("sm_80").tma
    assert not parse_target("sm_75").l2_windows
    assert all(parse_target(a).mfma and not parse_target(a).tma for a in ("gfx90a", "gfx942", "gfx950"))
    assert parse_target("c").launch == "cpu" and parse_target("metal").launch == "inspect-only"
    assert parse_target("gfx942").tilelang_target() == {"kind": "hip", "mcpu": "gfx942"}


def test_a_local_gpu_of_an_arch_the_registry_lacks_is_still_its_target(monkeypatch):
    from tilelab import _tilelang
    from tilelab.engine import inspect as _inspect
    from tilelab.targets import local_cuda_target

    assert local_cuda_target("sm_90a") is parse_target("sm_90a")
    made = local_cuda_target("sm_121")
    assert (made.name, made.family, made.tma, made.wgmma) == ("sm_121", "cuda", True, False)
    monkeypatch.setattr(_tilelang, "local_gpu_arch", lambda: "sm_121")
    resolved, note = _inspect.resolve_target(None)
    assert resolved.name == "sm_121" and note == "target sm_121: the local GPU's arch"


def test_inspect_refuses_an_unknown_cuda_arch():
    with pytest.raises(TargetError, match="sm_10 is not a CUDA arch"):
        tilelab.inspect(tk.scale_add(), target="sm_10")


def test_the_cli_refuses_an_unknown_target_before_running_the_script(tmp_path, capsys):
    from tilelab.__main__ import main

    marker = tmp_path / "ran"
    script = tmp_path / "k.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n"
                      "import tilelang.language as T\n\ndef f():\n    return None\n")
    assert main(["inspect", f"{script}:f()", "--target", "sm_999"]) == 2
    err = capsys.readouterr().err
    assert "--target sm_999" in err and "Accepted targets" in err and "gfx942" in err
    assert not marker.exists()


# --------------------------------------------------------------------------------------------
# AMD (HIP): device source, launchers, MFMA, LDS
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hip_gemm():
    func = tk.gemm_gpu()
    return func, tilelab.inspect(func, target="gfx942")


def test_hip_device_source_is_tilelangs(hip_gemm):
    func, report = hip_gemm
    assert report.target == "gfx942" and report.family == "hip"
    assert same_source(report.sources.device, tilelang_device_source(func, {"kind": "hip", "mcpu": "gfx942"}))
    assert "__global__" in report.sources.device and "hip_runtime.h" in report.sources.device


# make test: an elementwise kernel and a reduction; make test-heavy attention too
@pytest.mark.parametrize("make", [tk.scale_add, tk.row_sum,
                                  pytest.param(tk.attention_forward, marks=pytest.mark.heavy)])
def test_hip_kernels_of_every_kind_match_tilelangs_source_and_launcher(make):
    func = make()
    report = tilelab.inspect(func, target="gfx942")
    assert same_source(report.sources.device, tilelang_device_source(func, {"kind": "hip", "mcpu": "gfx942"}))
    launcher = report.sources.launcher("cython").text
    for kernel in report.kernels:
        match = re.search(rf"{kernel.name}<<<dim3\((\d+), (\d+), (\d+)\), dim3\((\d+), (\d+), (\d+)\), "
                          r"(\d+), stream>>>", launcher)
        assert match, launcher
        values = [int(v) for v in match.groups()]
        assert (tuple(values[:3]), tuple(values[3:6]), values[6]) == (
            kernel.grid, kernel.block, kernel.dynamic_shared_memory_bytes)
    # every tensor argument is a parameter of the launcher's call(), in order
    call = re.search(r"int call\(([^)]*)\)", launcher).group(1)
    tensors = re.findall(r"\*\s*(?:__restrict__\s+)?(\w+)", call)
    assert [a.name for a in report.arguments if a.kind == "tensor"] == tensors


@pytest.mark.parametrize("make", [tk.scale_add, tk.gemm_gpu])
def test_metal_kernels_match_tilelangs_source(make):
    func = make()
    report = tilelab.inspect(func, target="metal")
    assert same_source(report.sources.device, tilelang_device_source(func, {"kind": "metal"}))
    (kernel,) = report.kernels
    assert re.search(rf"void {kernel.name}\(", report.sources.device)
    assert f'"{kernel.name}"' in report.sources.launcher("tvm_ffi").text


def test_hip_launcher_launches_what_the_report_says(hip_gemm):
    _, report = hip_gemm
    assert [item.backend for item in report.sources.launchers] == ["cython", "tvm_ffi"]
    launcher = report.sources.launcher("cython").text
    (kernel,) = report.kernels
    match = re.search(rf"{kernel.name}<<<dim3\((\d+), (\d+), (\d+)\), dim3\((\d+), (\d+), (\d+)\), (\d+), stream>>>",
                      launcher)
    assert match, launcher
    values = [int(v) for v in match.groups()]
    assert tuple(values[:3]) == kernel.grid and tuple(values[3:6]) == kernel.block
    # whole stages of one 128x32 A tile and one 32x128 B tile, fp16
    assert values[6] == kernel.dynamic_shared_memory_bytes and values[6] % ((128 * 32 + 32 * 128) * 2) == 0
    # the LDS-size check the launcher's init() makes names the same bytes
    assert f"if ({kernel.dynamic_shared_memory_bytes} > max_smem_{kernel.name})" in launcher
    assert "hipStream_t stream" in launcher
    assert "__tvm_ffi_" in report.sources.launcher("tvm_ffi").text
    assert kernel.programmatic_serialization_by == ()  # a CUDA launch attribute


def test_mfma_table_matches_the_generated_hip(hip_gemm):
    _, report = hip_gemm
    source = report.sources.device
    calls = re.findall(r"(__builtin_amdgcn_mfma_\w+)\(\s*(.*?),\s*(.*?),\s*(.*?),", source, re.S)
    assert sum(m.count for m in report.mfma) == len(calls) >= 1
    (form,) = report.mfma
    intrinsic, a_expr, b_expr, c_expr = calls[0]
    assert form.intrinsic == intrinsic == "__builtin_amdgcn_mfma_f32_16x16x16f16"
    assert (form.m, form.n, form.k) == (16, 16, 16)
    assert (form.a_dtype, form.b_dtype, form.accum_dtype) == ("float16", "float16", "float32")
    assert form.a_operand in a_expr and form.b_operand in b_expr and form.accumulator in c_expr
    assert source.split("\n")[form.lines[0] - 1].count("__builtin_amdgcn_mfma") == 1
    # TileLang passes the kernel's B tile as the instruction's A (it computes C^T = B^T A^T)
    assert (form.a_lds, form.b_lds) == ("B_shared", "A_shared")


def test_lds_reads_are_read_from_the_source_lines_that_fill_the_operands(hip_gemm):
    _, report = hip_gemm
    lines = report.sources.device.split("\n")
    assert {r.buffer for r in report.lds_reads} == {"A_shared", "B_shared"}
    offsets = mfma.shared_buffers(report.sources.device)
    assert offsets == {"A_shared": 0, "B_shared": 8192}  # from "buf_dyn_shmem + 8192"
    for read in report.lds_reads:
        line = lines[read.line - 1]
        assert read.buffer in line and read.destination in line
        assert len(read.byte_addresses) == 64 and len(read.phase_clocks) == 64 * max(read.width_bytes, 4) // 128
        span = 128 * 32 * 2 if read.buffer == "A_shared" else 32 * 128 * 2
        assert all(offsets[read.buffer] <= a < offsets[read.buffer] + span for a in read.byte_addresses)
    a_read = next(r for r in report.lds_reads if r.buffer == "A_shared")
    assert a_read.width_bytes == 8 and "uint2" in lines[a_read.line - 1]  # ds_read_b64


def test_hip_text_report_speaks_of_lds_and_mfma(hip_gemm):
    from tilelab.render.text import render_text

    _, report = hip_gemm
    text = render_text(report)
    assert "1 MFMA instruction(s)" in text and "TMA, WGMMA and L2 windows do not apply" in text
    assert "dynamic LDS" in text and "PDL" not in text
    assert "__builtin_amdgcn_mfma_f32_16x16x16f16" in text and "lane l: row l % 16" in text


def test_hip_renders_mfma_and_says_cuda_sections_do_not_apply(hip_gemm):
    from tilelab.render.html import default_sections, render_html, report_id, section_title

    _, report = hip_gemm
    out = render_html(report)
    assert "mfma" in default_sections(report) and section_title(report, "cuda") == "HIP"
    assert "__builtin_amdgcn_mfma_f32_16x16x16f16" in out and "lane l: row l % 16" in out
    # no empty TMA and WGMMA tabs: the Summary says they do not apply, the tabs asked for say why
    assert "tma" not in default_sections(report) and "wgmma" not in default_sections(report)
    assert "<td>TMA, WGMMA, L2 windows</td><td>do not apply: CUDA features</td>" in out
    assert "TMA (the Tensor Memory Accelerator) does not apply to gfx942" in render_html(report, sections=["tma"])
    assert "WGMMA (warpgroup matrix multiply) does not apply to gfx942" in render_html(report, sections=["wgmma"])
    # the launch line of the HIP launcher links to the kernel's launch configuration
    rid = report_id(report)
    assert re.search(rf'gemm_kernel.*?&lt;&lt;&lt;.*?href="#{rid}-kernel-0"', out)
    assert f'id="{rid}-kernel-0"' in out
    # every tab is on one page: the MFMA rows' HIP lines are real links, and no link dangles
    (mfma,) = report.mfma
    for n in mfma.lines:
        assert f'href="#{rid}-cuda-L{n}"' in out and f'id="{rid}-cuda-L{n}"' in out
        assert "__builtin_amdgcn_mfma" in report.sources.device.split("\n")[n - 1]
    ids = set(re.findall(r'id="([^"]+)"', out))
    assert not [h for h in re.findall(r'href="#([^"]+)"', out) if h not in ids]


def test_a_flash_attention_forward_lowers_for_hip_with_two_mfma_products():
    report = tilelab.inspect(tk.attention_forward(), target="gfx942")
    assert len(report.mfma) == 2  # S = Q K^T and O += P V
    feeds = {(m.a_lds, m.b_lds) for m in report.mfma}
    assert feeds == {("K_s", "Q_s"), ("V_s", "P")}
    src = report.sources.device
    offsets = mfma.shared_buffers(src)
    assert {"Q_s", "K_s", "V_s", "P"} <= set(offsets)
    # four 64x64 fp16 tiles, one after the other, inside the kernel's dynamic LDS
    tiles = sorted(offsets[name] for name in ("Q_s", "K_s", "P", "V_s"))
    assert tiles == [0, 8192, 16384, 24576]
    assert max(offsets.values()) < report.kernels[0].dynamic_shared_memory_bytes
    assert src.count("__builtin_amdgcn_mfma") == sum(m.count for m in report.mfma)


@pytest.mark.parametrize("dtype, intrinsic, width", [
    ("bfloat16", "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", 8),
    ("float8_e4m3fn", "__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8", 8),
    ("int8", "__builtin_amdgcn_mfma_i32_16x16x32_i8", 8),
    ("float32", "__builtin_amdgcn_mfma_f32_16x16x4f32", 4),
])
def test_mfma_forms_per_dtype_with_their_lds_operand_reads(dtype, intrinsic, width):
    import tilelang.language as T

    acc = T.int32 if dtype == "int8" else T.float32
    report = tilelab.inspect(tk.nt_gemm(getattr(T, dtype), acc), target="gfx942")
    (form,) = report.mfma
    assert form.intrinsic == intrinsic and re.search(rf"{intrinsic}\(", report.sources.device)
    assert (form.a_lds, form.b_lds) == ("B_s", "A_s")
    lines = report.sources.device.split("\n")
    for read in report.lds_reads:
        assert read.width_bytes == width and read.buffer in lines[read.line - 1]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx950"])
def test_other_cdna_archs_lower_and_name_their_arch(arch):
    report = tilelab.inspect(tk.scale_add(), target=arch)
    assert report.target == arch and report.mfma == ()
    assert "__global__" in report.sources.device


# --------------------------------------------------------------------------------------------
# MFMA lane layouts and the LDS bank model, against tables derived by hand and TileLang's maps
# --------------------------------------------------------------------------------------------


def test_mfma_intrinsic_names_parse():
    s = mfma.parse_intrinsic("__builtin_amdgcn_mfma_f32_32x32x8f16")
    assert (s.m, s.n, s.k, s.a_dtype, s.accum_dtype, s.variant) == (32, 32, 8, "float16", "float32", "dense")
    s = mfma.parse_intrinsic("__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8")
    assert (s.k, s.a_dtype, s.b_dtype) == (32, "float8_e4m3", "float8_e4m3")
    s = mfma.parse_intrinsic("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k")
    assert s.a_dtype == "bfloat16"
    assert mfma.parse_intrinsic("__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4").variant == "scaled (gfx950)"
    assert mfma.parse_intrinsic("__builtin_amdgcn_smfmac_f32_16x16x32_f16").variant == "sparse (smfmac)"
    with pytest.raises(ValueError, match="not an AMD MFMA intrinsic"):
        mfma.parse_intrinsic("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32")


def test_mfma_lane_layouts_by_hand():
    # 16x16x16 f16: lane 17 is row 1 of A and holds k 4..7; C: lane 17 is column 1, rows 4..7
    assert mfma.lane_elements("A", 16, 16, 16, 17) == [(1, 4), (1, 5), (1, 6), (1, 7)]
    assert mfma.lane_elements("B", 16, 16, 16, 63) == [(12, 15), (13, 15), (14, 15), (15, 15)]
    assert mfma.lane_elements("C", 16, 16, 16, 17) == [(4, 1), (5, 1), (6, 1), (7, 1)]
    # 32x32x8 f16: lane 33 is row 1, k 4..7; C: 16 values, rows 4-7, 12-15, 20-23, 28-31 of column 1
    assert mfma.lane_elements("A", 32, 32, 8, 33) == [(1, 4), (1, 5), (1, 6), (1, 7)]
    assert [r for r, _ in mfma.lane_elements("C", 32, 32, 8, 33)] == [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23,
                                                                      28, 29, 30, 31]
    assert mfma.lane_elements("A", 16, 16, 4, 20) == [(4, 1)]  # fp32 16x16x4: one value per lane


def test_mfma_lane_layouts_agree_with_tilelangs_maps():
    from tilelang.rocm.intrinsics import mfma_layout as L

    for lane in range(64):
        a16, b16 = mfma.lane_elements("A", 16, 16, 16, lane), mfma.lane_elements("B", 16, 16, 16, lane)
        for i in range(4):  # 16x16x16: TileLang's A/B maps are (row, k) / (k, column)
            assert a16[i] == L.thread_id_shared_access_64x4_to_16x16_layout_A(lane, i)
            assert b16[i] == L.thread_id_shared_access_64x4_to_16x16_layout_B(lane, i)
        a32 = mfma.lane_elements("A", 32, 32, 32, lane)
        for i in range(16):  # 32x32x32 int8: A is (row, k); TileLang's C map is the transposed (D^T) view
            assert a32[i] == L.thread_id_shared_access_64x16_to_32x32_layout_A(lane, i)
            row, col = mfma.lane_elements("C", 32, 32, 32, lane)[i]
            assert (col, row) == L.thread_id_shared_access_64x16_to_32x32_layout_C_m_n(lane, i)


@pytest.mark.parametrize("addresses, width, clocks", [
    ([4 * lane for lane in range(64)], 4, (1, 1)),            # consecutive words: conflict-free
    ([0] * 64, 4, (1, 1)),                                     # one word for everyone: broadcast
    ([128 * lane for lane in range(64)], 4, (32, 32)),         # stride 128 B: every lane in bank 0
    ([8 * lane for lane in range(64)], 4, (2, 2)),             # stride 8 B: banks 0,2,..; two words per bank
    ([16 * lane for lane in range(64)], 16, (1,) * 8),         # ds_read_b128, consecutive: 8 lanes per clock
    ([128 * lane for lane in range(64)], 8, (16, 16, 16, 16)),  # ds_read_b64 down a column of 128 B rows
    ([2 * lane for lane in range(64)], 2, (1, 1)),             # 16-bit reads: two lanes share each word
])
def test_lds_bank_model_by_hand(addresses, width, clocks):
    assert mfma.phase_clocks(addresses, width) == clocks


def test_lds_reads_evaluate_the_emitted_index_for_every_lane():
    source = """extern "C" __global__ void __launch_bounds__(64) k_kernel(half_t* __restrict__ A) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* X_shared = ((void*)((char*)buf_dyn_shmem + 256));
  half_t X_local[8];
  for (int ki = 0; ki < 2; ++ki) {
    *(uint2*)(X_local + 0) = *(uint2*)(((half_t*)X_shared) + ((((int)threadIdx.x) * 64) + (ki * 4)));
  }
}
"""
    (read,) = mfma.lds_operand_reads(source, {"X_local"})
    assert read["buffer"] == "X_shared" and read["width_bytes"] == 8 and read["loop_variables"] == ("ki",)
    assert read["byte_addresses"][:3] == (256, 256 + 128, 256 + 256)  # base + 2 B * 64 * lane
    assert read["phase_clocks"] == (16, 16, 16, 16) and read["line"] == 6 and read["kernel"] == "k_kernel"
    assert mfma.lds_operand_reads(source, {"Y_local"}) == []


# --------------------------------------------------------------------------------------------
# Metal
# --------------------------------------------------------------------------------------------


def test_metal_source_launchers_and_threadgroup_memory():
    func = tk.gemm_gpu()
    report = tilelab.inspect(func, target="metal")
    assert same_source(report.sources.device, tilelang_device_source(func, {"kind": "metal"}))
    assert "kernel void gemm_kernel" in report.sources.device or "[[kernel" in report.sources.device
    torch_launch = report.sources.launcher("torch")
    assert torch_launch.text is None and "torch.mps.compile_shader" in torch_launch.reason
    assert "TLMetalSourceWrapper" in report.sources.launcher("cython").reason
    assert not any("not cached" in n for n in report.notes)  # TileLang's design, not a passing failure
    assert "__tvm_ffi_gemm" in report.sources.launcher("tvm_ffi").text
    (kernel,) = report.kernels
    threadgroup = re.findall(r"threadgroup\s+\w+\s+\w+\[(\d+)\]", report.sources.device)
    assert kernel.dynamic_shared_memory_bytes > 0 or threadgroup
    from tilelab.render.html import summary_html

    assert "dynamic threadgroup memory" in summary_html(report)
    # the tvm_ffi host code's call of the kernel links to its launch configuration
    from tilelab.render.html import launch_links

    host = report.sources.launcher("tvm_ffi").text
    (line,) = launch_links(report, host)
    assert "TVMFFIFunctionCall(gemm_kernel_packed" in host.split("\n")[line - 1]
    # TileLang's metal target declares 32 KiB of threadgroup memory per threadgroup: two stages of
    # a 128x32 and a 32x128 fp16 tile fit exactly (2 x 16384 B); three stages do not, and the
    # report says so.
    from gemm import matmul  # examples/gemm.py: 3 stages
    from tilelang import tvm

    limit = int(tvm.target.Target({"kind": "metal"}).attrs["max_shared_memory_per_block"])
    assert kernel.dynamic_shared_memory_bytes == 2 * (128 * 32 + 32 * 128) * 2 == limit
    assert not any("per block" in n for n in report.notes)
    big = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32, threads=256, raster=0), target="metal")
    assert big.kernels[0].dynamic_shared_memory_bytes == 3 * (128 * 32 + 32 * 128) * 2 > limit
    assert any(f"allows {limit} B per block" in n and "threadgroup memory" in n for n in big.notes)


def test_metal_names_what_tilelang_cannot_lower():
    with pytest.raises(LoweringError) as info:
        tilelab.inspect(tk.row_sum(), target="metal")
    text = str(info.value)
    assert "no reduce implementation is registered" in text and "TileLang cannot lower this kernel for metal" in text


# --------------------------------------------------------------------------------------------
# The CPU (target c): inspection against a real compile, launch, and refusals
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [tk.gemm_cpu, tk.scale_add, tk.row_sum_cpu])
def test_c_source_and_launcher_are_what_tilelang_compiles_and_runs(make):
    import tilelang

    func = make()
    report = tilelab.inspect(func, target="c")
    compiled = tilelang.compile(func, target="c", execution_backend="cython")
    assert same_source(report.sources.device, compiled.get_kernel_source(kernel_only=True))
    launcher = report.sources.launcher("cython")
    assert launcher.language == "c" and compiled.get_host_source().endswith(launcher.text)
    assert re.search(r"int32_t call\(", launcher.text)
    (kernel,) = report.kernels
    assert f"return {kernel.name}(" in launcher.text
    assert "cannot build C-target kernels" in report.sources.launcher("tvm_ffi").reason
    if make is tk.scale_add:  # the reason holds: TileLang's tvm_ffi backend refuses target c
        with pytest.raises(Exception, match="does not support lowering with compilation"):
            tilelang.compile(func, target="c", execution_backend="tvm_ffi")
    from tilelab.render.html import render_html, report_id

    out = render_html(report)
    assert f'href="#{report_id(report)}-kernel-0"' in out and "one CPU thread runs every tile" in out


def test_a_gpu_kernel_on_the_cpu_names_the_operation():
    with pytest.raises(LoweringError) as info:
        tilelab.inspect(tk.gemm_gpu(), target="c")
    text = str(info.value)
    assert "TileLang cannot lower this kernel for c" in text
    assert "register fragments (T.alloc_fragment)" in text or "shared memory (T.alloc_shared)" in text


def test_a_hopper_kernel_asked_for_on_the_cpu_runs_its_tile_program():
    import torch
    from gemm import matmul  # examples/gemm.py: TMA + WGMMA on sm_90a

    result = tilelab.run(matmul(256, 256, 256, 128, 128, 32), target="c", ref=torch.matmul)
    assert result.passed, result
    assert any("scopes" in n and "EMULATION_RULES" in n for n in result.notes)


def test_c_that_the_host_compiler_rejects_is_named_as_tilelangs(capfd):
    import tilelang.language as T

    from tilelab import _tilelang

    with pytest.raises(LoweringError) as info:  # the plain target-c compile: the host C has no float16
        _tilelang.compile_kernel(tk.gemm_cpu(dtype=T.float16), target="c", force=True)
    text = str(info.value)
    assert "host C++ compiler rejects the code it generated" in text and "first error:" in text
    assert "float32" in text and "Compilation Failed" in info.value.trace
    assert "error:" not in capfd.readouterr().err  # the compiler's output stays in the trace
    # run() computes the float16 CPU kernel in float32, rounded to float16 where it stores (rule dtypes)
    result = tilelab.run(tk.gemm_cpu(dtype=T.float16), target="c", ref=lambda a, b: a @ b)
    assert result.passed and any("dtypes" in n for n in result.notes)


def test_run_on_the_cpu_checks_against_the_reference():
    import torch

    result = tilelab.run(tk.gemm_cpu(), target="c", ref=torch.matmul)
    assert result.passed and result.device.startswith("CPU") and result.backend == "cython"
    (check,) = result.outputs
    assert check.poison_checked and check.unwritten == 0 and check.rel_error < 1e-5
    a = torch.randn(4096)
    b = torch.randn(4096)
    out = torch.empty(4096)
    result = tilelab.run(tk.scale_add(), a, b, out, target="c", ref=lambda x, y: 2 * x + y)
    assert result.passed and torch.allclose(out, 2 * a + b)


def test_unwritten_outputs_are_found_on_the_cpu():
    result = tilelab.run(tk.half_copy(), target="c", ref=lambda a: a)
    (check,) = result.outputs
    assert not result.passed and check.unwritten == 128 and check.first_unwritten == (128,)


def test_a_cpu_run_draws_the_tiles_a_kernel_left_unwritten():
    """The tile map of a failed output is drawn on the CPU as on the GPU: eight blocks of 128
    elements (the kernel's launch grid), the odd-numbered ones never written."""
    result = tilelab.run(tk.even_blocks_only(), target="c", ref=lambda a: a)
    (check,) = result.outputs
    assert not result.passed and check.unwritten == 4 * 128 and check.first_unwritten == (128,)
    tiles = check.tiles
    assert tiles is not None and tiles.tile == (1, 128) and "launch grid (8, 1, 1)" in tiles.source
    assert tiles.cells == (("right", "unwritten") * 4,)
    assert "o never written" in repr(result)


def test_a_kernel_compiled_for_c_launches_on_the_cpu_without_target():
    import tilelang
    import torch

    compiled = tilelang.compile(tk.scale_add(), target="c", execution_backend="cython")
    assert tilelab.run(compiled, ref=lambda x, y: 2 * x + y).passed
    with pytest.raises(ValueError, match="must be on the cpu device"):
        tilelab.run(compiled, torch.randn(4096, device="meta"), torch.randn(4096), torch.empty(4096))


def test_bench_and_sweep_on_the_cpu_name_the_wall_clock():
    result = tilelab.bench(tk.scale_add(), target="c", rep_ms=5, warmup_ms=1, min_rep=3)
    assert result.method.startswith("wall clock") and len(result.samples_ms) >= 3
    assert result.device.startswith("CPU") and result.bytes == 3 * 4096 * 4 and not result.l2_flush
    assert "wall clock" in repr(result)
    table = tilelab.sweep(lambda N, block: tk.scale_add(N, block), {"block": [128, 256]}, {"N": [4096]},
                          target="c", progress=False, bench_kwargs={"rep_ms": 5, "warmup_ms": 1, "min_rep": 3})
    assert table.device.startswith("CPU")
    assert sum(r.ok for r in table.rows) == 2 and sum(r.best for r in table.rows) == 1


@pytest.mark.parametrize("target", ["gfx942", "metal"])
def test_inspect_only_targets_refuse_a_launch_by_name(target):
    from tilelab.launch._cpu import InspectOnlyTargetError

    with pytest.raises(InspectOnlyTargetError, match=rf"{target} .* is inspect-only in tilelab"):
        tilelab.run(tk.scale_add(), target=target)
    with pytest.raises(InspectOnlyTargetError, match="inspect-only"):
        tilelab.bench(tk.scale_add(), target=target)
