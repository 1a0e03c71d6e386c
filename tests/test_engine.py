"""The inspection engine against ground truth read from TileLang's own generated texts.

Expected values come from two places the engine does not use: figures derived by hand from the
kernel's parameters (tile sizes, stages, warp specialisation), and the cython C++ launcher and
device CUDA parsed with regular expressions (tests/groundtruth.py). The engine reads the IR.
"""


import dataclasses
import json

import pytest
import tilelang.language as T
from conv_im2col import convolution
from elementwise_sm80 import elementwise_add
from gemm import matmul
from gemm_bf16_nt import matmul_nt
from gemm_dynamic import matmul_dynamic_m
from groundtruth import (
    DRIVER_DTYPE,
    DRIVER_INTERLEAVE,
    DRIVER_L2,
    DRIVER_OOB,
    DRIVER_SWIZZLE,
    cython_call_parameters,
    cython_launch,
    cython_launch_attributes,
    cython_tma_fields,
    device_wgmma,
)
from l2_persist import bias_add
from l2_persist_dynamic import scaled_rows

import tilelab

EXAMPLES = {
    "gemm": (lambda: matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a"),
    "gemm_bf16_nt": (lambda: matmul_nt(1024, 1024, 1024), "sm_90a"),
    "gemm_dynamic": (lambda: matmul_dynamic_m(1024, 1024), "sm_90a"),
    "conv_im2col": (lambda: convolution(8, 64, 56, 56, 64, 3, 1, 1, 1), "sm_90a"),
    "elementwise_sm80": (lambda: elementwise_add(4096, 4096), "sm_80"),
    "l2_persist": (lambda: bias_add(8192, 8192), "sm_90a"),
    "l2_persist_dynamic": (lambda: scaled_rows(8192), "sm_90a"),
}

_REPORTS: dict[str, tilelab.KernelReport] = {}


def report(name: str) -> tilelab.KernelReport:
    if name not in _REPORTS:
        factory, target = EXAMPLES[name]
        _REPORTS[name] = tilelab.inspect(factory(), target)
    return _REPORTS[name]


def _c_value(text: str, m: int = 1000) -> int:
    """Evaluate a launcher's C integer expression (int division) with the dynamic size m."""
    return int(eval(str(text).replace("/", "//"), {"m": m}))


def _py_value(value, m: int = 1000) -> int:
    return int(eval(str(value), {"m": m})) if isinstance(value, str) else int(value)


# --------------------------------------------------------------------------------------------
# Hand-derived figures for the Hopper GEMM (1024^3, 128x128x32 tiles, 3 stages, 256 threads)
# --------------------------------------------------------------------------------------------


def test_hopper_gemm_hand_derived_figures():
    r = report("gemm")
    assert r.target == "sm_90a"
    (kernel,) = r.kernels
    assert kernel.grid == (1024 // 128, 1024 // 128, 1)
    # 256 consumer threads + one producer warpgroup of 128 added by warp specialisation
    assert kernel.block == (256 + 128, 1, 1)
    # 3 stages x (A tile 128x32 + B tile 32x128) x 2 bytes
    assert kernel.dynamic_shared_memory_bytes == 3 * (128 * 32 + 32 * 128) * 2
    a, b = r.tma("A"), r.tma("B")
    # A tile: 32 fp16 along K (64 bytes -> 64B swizzle) by 128 rows of M
    assert (a.dtype, a.box_dim, a.swizzle) == ("FLOAT16", (32, 128), "64B")
    # B tile: 128 along N is 256 bytes, wider than the 128B span: two boxes of 64 x 32
    assert (b.dtype, b.box_dim, b.swizzle) == ("FLOAT16", (64, 32), "128B")
    for d in (a, b):
        assert d.global_dim == (1024, 1024)
        assert d.global_stride_bytes == (2, 1024 * 2)
        assert (d.l2_promotion, d.interleave, d.oob_fill) == ("L2_128B", "NONE", "NONE")
        assert d.problems == ()
    assert a.box_bytes == 32 * 128 * 2 and a.inner_box_bytes == 64 == a.swizzle_span_bytes
    assert b.inner_box_bytes == 128 == b.swizzle_span_bytes
    (w,) = r.wgmma
    assert (w.variant, w.a_major, w.b_major) == ("ss", "K", "MN")
    assert (w.a_dtype, w.b_dtype, w.accum_dtype) == ("float16", "float16", "float32")
    assert w.a.buffer == "A_shared" and w.b.buffer == "B_shared"
    # A: K-major, 64B swizzle (layout type 2); SBO = 8 rows x 64 bytes = 512 bytes = 32 << 4
    assert (w.a.layout_type, w.a.swizzle, w.a.sbo_bytes) == (2, "64B", 8 * 64)


# --------------------------------------------------------------------------------------------
# Every example against the cython launcher and the device CUDA
# --------------------------------------------------------------------------------------------

TMA_EXAMPLES = ["gemm", "gemm_bf16_nt", "gemm_dynamic", "conv_im2col"]


@pytest.mark.parametrize("name", TMA_EXAMPLES)
def test_tma_descriptors_match_the_launcher(name):
    r = report(name)
    launcher = r.sources.launcher("cython").text
    assert r.tma_descriptors, "these examples load through TMA"
    assert launcher.count("cuTensorMapEncode") == len(r.tma_descriptors)
    for d in r.tma_descriptors:
        f = cython_tma_fields(launcher, d.name)
        assert DRIVER_DTYPE[f["type"]] == d.dtype
        assert f["tensorRank"] == d.rank
        # the address is the kernel argument itself or a flat view of it (conv: kernel_flat)
        assert d.buffer in {a.name for a in r.arguments if a.kind in ("tensor", "strided_tensor")}
        assert f["globalAddress"] in (d.buffer, d.name.removesuffix("_desc"))
        assert f["globalDim"] == list(d.global_dim)
        assert f["globalStride"] == list(d.global_stride_bytes)
        assert f["elementStrides"] == list(d.element_strides)
        assert DRIVER_INTERLEAVE[f["interleave"]] == d.interleave
        assert DRIVER_SWIZZLE[f["swizzle"]] == d.swizzle
        assert DRIVER_L2[f["l2Promotion"]] == d.l2_promotion
        assert DRIVER_OOB[f["oobFill"]] == d.oob_fill
        if d.kind == "tiled":
            assert f["boxDim"] == list(d.box_dim)
            assert f"cuTensorMapEncodeTiled)(\n    &{d.name}," in launcher
        else:
            assert f["channelsPerPixel"] == d.channels_per_pixel
            assert f["pixelsPerColumn"] == d.pixels_per_column
            assert f["lowerCorner"] == list(d.lower_corner)
            assert f["upperCorner"] == list(d.upper_corner)
        # the nvrtc launcher encodes the same descriptor from Python
        swizzle = f"{d.name}_swizzle = CUtensorMapSwizzle({DRIVER_SWIZZLE.index(d.swizzle)})"
        assert swizzle in r.sources.launcher("nvrtc").text


def test_im2col_descriptor_hand_derived():
    d = report("conv_im2col").tma("data")
    assert d.kind == "im2col" and d.rank == 4
    # NHWC input, innermost first: C, W, H, N; strides in bytes
    assert d.global_dim == (64, 56, 56, 8)
    assert d.global_stride_bytes == (2, 64 * 2, 56 * 64 * 2, 56 * 56 * 64 * 2)
    # 3x3 filter, pad 1, dilation 1: lower corner -pad, upper corner pad - (K-1)*D
    assert d.lower_corner == (-1, -1) and d.upper_corner == (1 - 2, 1 - 2)
    # one block_K slice of channels per pixel, block_M pixels per column
    assert (d.channels_per_pixel, d.pixels_per_column) == (64, 128)
    assert d.inner_box_bytes == 128 and d.swizzle == "128B" and d.problems == ()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_launch_configuration_matches_the_launcher(name):
    r = report(name)
    launcher = r.sources.launcher("cython").text
    for k in r.kernels:
        launch = cython_launch(launcher, k.name)
        assert [_c_value(g) for g in launch["grid"]] == [_py_value(g) for g in k.grid]
        assert [_c_value(b) for b in launch["block"]] == [_py_value(b) for b in k.block]
        assert _c_value(launch["smem"]) == _py_value(k.dynamic_shared_memory_bytes)
        assert f"__launch_bounds__({_py_value(k.threads_per_block)}" in r.sources.device


@pytest.mark.parametrize("name", ["gemm", "gemm_bf16_nt", "gemm_dynamic", "conv_im2col"])
def test_wgmma_matches_the_device_code(name):
    r = report(name)
    truth = device_wgmma(r.sources.device)
    distinct = {tuple(sorted(f.items())) for f in truth["forms"]}
    assert len(r.wgmma) == len(distinct) >= 1
    by_buffer = {d["buffer"]: d for d in truth["descriptors"].values()}
    dtype_names = {"Float16": "float16", "BFloat16": "bfloat16", "Float32": "float32"}
    for w in r.wgmma:
        form = next(f for f in truth["forms"] if f["instruction"] == w.instruction and f["variant"] == w.variant)
        assert (form["a_major"], form["b_major"]) == (w.a_major, w.b_major)
        assert (dtype_names[form["a"]], dtype_names[form["b"]], dtype_names[form["c"]]) == (
            w.a_dtype, w.b_dtype, w.accum_dtype)
        for operand in (w.a, w.b):
            if operand is None:
                continue
            t = by_buffer[operand.buffer]
            assert (operand.layout_type, operand.lbo, operand.sbo) == (t["layout_type"], t["lbo"], t["sbo"])
            assert operand.lbo_bytes == t["lbo"] * 16 and operand.sbo_bytes == t["sbo"] * 16


def test_bf16_nt_gemm_both_operands_k_major():
    r = report("gemm_bf16_nt")
    (w,) = r.wgmma
    assert (w.a_dtype, w.a_major, w.b_major) == ("bfloat16", "K", "K")
    # B stored (N, K): its TMA box runs 64 bf16 along K (128 bytes) by 128 rows of N
    b = r.tma("B")
    assert (b.dtype, b.global_dim, b.box_dim, b.swizzle) == ("BFLOAT16", (1024, 1024), (64, 128), "128B")


def test_dynamic_m_stays_symbolic():
    r = report("gemm_dynamic")
    (k,) = r.kernels
    assert isinstance(k.grid[1], str) and "m" in k.grid[1]
    assert _py_value(k.grid[1], m=1000) == -(-1000 // 128)
    assert r.tma("A").global_dim == (1024, "m")
    m = next(a for a in r.arguments if a.name == "m")
    assert (m.kind, m.passed_at_launch, dict(m.binds_from)) == ("dynamic_dim", False, {"m": "A.shape[0]"})
    a = next(a for a in r.arguments if a.name == "A")
    assert a.kind == "tensor" and a.shape == ("m", 1024) and a.passed_at_launch
    # the cython launcher takes m as a launch argument after the tensors
    assert "int m, cudaStream_t stream" in r.sources.launcher("cython").text


def test_sm80_elementwise_has_no_tma_and_no_wgmma():
    r = report("elementwise_sm80")
    assert r.target == "sm_80"
    assert r.tma_descriptors == () and r.wgmma == ()
    assert "CUtensorMap" not in r.sources.device and "wgmma" not in r.sources.device
    (k,) = r.kernels
    assert k.grid == (4096 // 128, 4096 // 64, 1) and k.block == (256, 1, 1)
    assert k.dynamic_shared_memory_bytes == 0


def test_l2_window_and_the_launchers_that_omit_it():
    r = report("l2_persist")
    (w,) = r.l2_persistence
    assert (w.buffer, w.hit_ratio, w.bytes) == ("bias", 0.8, 8192 * 2)
    texts = {x.backend: x.text for x in r.sources.launchers}
    assert "__tvm_cuda_stream_set_access_policy_window" in texts["tvm_ffi"]
    assert w.emitted_by == ("tvm_ffi",)
    for backend in ("cython", "nvrtc"):
        assert "ccessPolicyWindow" not in texts[backend] and backend in w.missing_in
    assert any("bug" in note and "L2" in note for note in r.notes)


@pytest.mark.parametrize("name", ["gemm", "gemm_bf16_nt", "conv_im2col"])
def test_shared_layouts_are_permutations_and_fragments_cover_threads(name):

    r = report(name)
    shared = [x for x in r.layouts if x.scope == "shared"]
    fragments = [x for x in r.layouts if x.scope == "fragment"]
    assert shared and fragments
    for lay in shared:
        offsets = lay.array("offsets")
        assert sorted(offsets.ravel().tolist()) == list(range(offsets.size)), lay.buffer
    for lay in fragments:
        threads, locals_ = lay.array("threads"), lay.array("locals")
        pairs = set(zip(threads.ravel().tolist(), locals_.ravel().tolist()))
        assert len(pairs) == threads.size  # no two elements in one register
        assert set(threads.ravel().tolist()) == set(range(lay.thread_count))


def test_fragment_layout_matches_the_epilogue_store():
    """The accumulator's thread/register map equals the address the device code stores to."""
    r = report("gemm")
    lay = r.layout("C_local")
    threads, locals_ = lay.array("threads"), lay.array("locals")
    # From the device store: C[... + ((tx & 127) >> 5) * 16384 + (i & 1) * 8192 + ((tx & 31) >> 2) * 1024
    #   + (tx >> 7) * 64 + ((i & 15) >> 1) * 8 + (tx & 3) * 2 - 64] for register pair i (i_3 loop),
    # with tx the absolute thread (128..383) and blockIdx 0.
    for tx in range(128, 384, 37):
        for i in range(32):
            flat = ((i >> 4) * 65536 + (((tx & 127) >> 5) * 16384) + ((i & 1) * 8192)
                    + (((tx & 31) >> 2) * 1024) + ((tx >> 7) * 64) + (((i & 15) >> 1) * 8) + ((tx & 3) * 2) - 64)
            row, col = divmod(flat, 1024)
            assert threads[row, col] + lay.thread_base == tx
            assert locals_[row, col] == 2 * i and locals_[row, col + 1] == 2 * i + 1


# --------------------------------------------------------------------------------------------
# Launchers, arguments, front ends
# --------------------------------------------------------------------------------------------


def test_every_backend_launcher_text():
    r = report("gemm")
    texts = {x.backend: x for x in r.sources.launchers}
    assert set(texts) == {"tvm_ffi", "cython", "nvrtc", "cutedsl"}
    assert all(x.text and x.reason is None for x in texts.values())
    assert "__tvm_tensormap_create_tiled" in texts["tvm_ffi"].text and "gemm_kernel" in texts["tvm_ffi"].text
    cy = texts["cython"].text
    assert "cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 49152)" in cy
    assert "cudaLaunchKernelEx(&config, gemm_kernel" in cy
    assert "from cuda.bindings.driver import" in texts["nvrtc"].text
    assert texts["nvrtc"].language == "python"
    cute = dict(texts["cutedsl"].extra)
    assert "launcher.cpp" in cute and "cuTensorMapEncodeTiled" in cute["launcher.cpp"]


@T.prim_func
def _two_kernels(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32), C: T.Tensor((256,), T.float32)):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    with T.Kernel(4, threads=64) as bx:
        for i in T.Parallel(64):
            C[bx * 64 + i] = B[bx * 64 + i] + 1.0


def test_launchers_print_the_host_function_once_and_keep_tilelangs_kernel_order(monkeypatch):
    """TileLang's cython, nvrtc and cutedsl wrappers each print the host function to order the
    kernels they launch; inspect prints it once for all three. The launchers must still be the
    ones TileLang's wrappers write on their own, kernel order included, and nothing may stay
    patched afterwards."""
    import tilelang
    from groundtruth import tilelang_own_launchers

    Node = tilelang.tvm.ir.base.Node

    printed: list[str] = []
    original = Node.__repr__

    def counting(self):
        text = original(self)
        if "T.call_packed" in text or "T.tvm_call_packed" in text or "__tvm_" in text:  # a host function
            printed.append(text)
        return text

    monkeypatch.setattr(Node, "__repr__", counting)
    report = tilelab.inspect(_two_kernels, "sm_90a", force=True)
    host_prints = len(printed)
    assert "__str__" not in tilelang.tvm.tirx.PrimFunc.__dict__
    monkeypatch.setattr(Node, "__repr__", original)

    source, own_cython, nvrtc = tilelang_own_launchers(_two_kernels)
    cython = report.sources.launcher("cython").text
    assert report.sources.device == source and cython == own_cython
    assert report.sources.launcher("nvrtc").text == nvrtc
    launches = [line.strip() for line in cython.split("\n") if "cudaLaunchKernelEx(&config," in line]
    assert len(launches) == 2 and launches[0].endswith(", A, B);") and launches[1].endswith(", B, C);"), launches
    assert report.sources.launcher("cutedsl").text
    assert host_prints == 1, f"the host function was printed {host_prints} times"


def test_a_backend_that_fails_is_absent_with_its_reason(monkeypatch):
    from tilelang.jit.adapter.nvrtc import wrapper as nvrtc_wrapper

    class Refuses:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("NVRTC wrapper refuses this kernel")

    monkeypatch.setattr(nvrtc_wrapper, "TLNVRTCSourceWrapper", Refuses)
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a", force=True)
    nv = r.sources.launcher("nvrtc")
    assert nv.text is None and "refuses this kernel" in nv.reason
    assert r.sources.launcher("cython").text  # the others are still there


def test_jit_function_with_out_idx():
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def scale(N, block=256, factor=2.0):
        @T.prim_func
        def scale_kernel(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * factor

        return scale_kernel

    r = tilelab.inspect(scale, "sm_90a", args=(4096,))
    args = {a.name: a for a in r.arguments}
    assert args["X"].passed_at_launch and not args["X"].is_output
    # out_idx=[-1]: the tvm_ffi launcher allocates Y and returns it
    assert args["Y"].is_output and not args["Y"].passed_at_launch
    assert (args["N"].kind, args["N"].value, args["N"].cache_key) == ("constant", "4096", "4096")
    # defaults are not part of TileLang's JIT call key
    assert args["block"].value == "256" and args["block"].cache_key is None
    assert "4096" in r.cache_key
    assert r.kernels[0].grid == (4096 // 256, 1, 1)


def test_compiled_kernel_is_relowered():
    import tilelang

    class FakeCompiled:  # the three attributes inspect reads from a JITKernel
        pass

    # A real JITKernel needs nvcc; inspecting its prim_func with its own options is what matters.
    from tilelab import _tilelang

    source = _tilelang.resolve_kernel(matmul(256, 256, 256, 128, 128, 32))
    assert source.kind == "prim_func" and source.name == "gemm"
    assert _tilelang.kernel_kind(FakeCompiled()) is None
    assert _tilelang.kernel_kind(tilelang) is None


@pytest.mark.parametrize("bad, message", [
    (42, "not a TileLang kernel"),
    ("sm_90a", "not a TileLang kernel"),
    (lambda: 7, "returned int"),
])
def test_not_a_kernel(bad, message):
    with pytest.raises(tilelab.records.errors.NotAKernelError, match=message):
        tilelab.inspect(bad, "sm_90a")


def test_prim_func_takes_no_arguments():
    with pytest.raises(tilelab.records.errors.NotAKernelError, match="already specialised"):
        tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a", args=(1,))


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, arch", [
    ("sm_90a", "sm_90a"), ("sm_80", "sm_80"), ("cuda -arch=sm_90a", "sm_90a"),
    ({"kind": "cuda", "arch": "sm_89"}, "sm_89"),
])
def test_target_forms(spec, arch):
    from tilelab.engine.inspect import resolve_target

    resolved, note = resolve_target(spec)
    assert (resolved.name, note) == (arch, None)


def test_target_object():
    from tilelang import tvm

    from tilelab.engine.inspect import resolve_target

    assert resolve_target(tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))[0].name == "sm_90a"


@pytest.mark.parametrize("spec", ["sm_9x", "cuda", "hopper", {"kind": "llvm"}, 90])
def test_bad_targets_list_the_valid_forms(spec):
    from tilelab.engine.inspect import resolve_target
    from tilelab.records.errors import TargetError

    with pytest.raises(TargetError) as info:
        resolve_target(spec)
    assert "sm_90a" in str(info.value) and "arch" in str(info.value)


def test_no_target_and_no_gpu_says_sm_90a():
    import os

    if os.environ.get("TILELAB_NVCC_HIDDEN") != "1":
        pytest.skip("this machine has a GPU: the default is its arch")
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32))
    assert r.target == "sm_90a"
    assert any("no GPU" in n and "sm_90a" in n for n in r.notes)


# --------------------------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_json_round_trip(name, tmp_path):
    r = report(name)
    data = json.loads(json.dumps(r.to_dict()))
    assert tilelab.KernelReport.from_dict(data) == r
    path = r.save(tmp_path / "report.json")
    assert tilelab.KernelReport.load(path) == r
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "changed"  # frozen


def test_json_keys_named_in_the_issue():
    d = report("conv_im2col").to_dict()
    for key in ("name", "target", "kernels", "sources", "tma_descriptors", "wgmma", "l2_persistence",
                "arguments", "layouts"):
        assert key in d
    assert set(d["sources"]) >= {"device", "launchers"}
    tiled = report("gemm").to_dict()["tma_descriptors"][0]
    for key in ("name", "buffer", "kind", "dtype", "rank", "global_dim", "global_stride_bytes", "box_dim",
                "element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill", "problems"):
        assert key in tiled
    im2col = d["tma_descriptors"][0]
    for key in ("lower_corner", "upper_corner", "channels_per_pixel", "pixels_per_column"):
        assert key in im2col
    w = d["wgmma"][0]
    for key in ("instruction", "variant", "a", "b"):
        assert key in w
    assert {"layout_type", "lbo", "sbo"} <= set(w["a"])


def test_old_schema_is_refused_with_advice():
    d = report("gemm").to_dict()
    d["schema"] = 0
    with pytest.raises(ValueError, match="Re-run tilelab.inspect"):
        tilelab.KernelReport.from_dict(d)


def test_strided_tensor_scalar_and_stride_symbol():
    import tilelang.language as T

    def axpy(M, N, block=128):
        S = T.dynamic("s")

        @T.prim_func
        def axpy_kernel(X: T.StridedTensor((M, N), (S, 1), T.float32), Y: T.Tensor((M, N), T.float32),
                        alpha: T.float32):
            with T.Kernel(T.ceildiv(N, block), M, threads=block) as (bx, by):
                for j in T.Parallel(block):
                    Y[by, bx * block + j] = Y[by, bx * block + j] + alpha * X[by, bx * block + j]

        return axpy_kernel

    r = tilelab.inspect(axpy, "sm_90a", args=(256, 1024))
    args = {a.name: a for a in r.arguments}
    assert (args["X"].kind, args["X"].strides) == ("strided_tensor", ("s", 1))
    assert "strides" in args["X"].cache_key
    assert (args["Y"].kind, args["Y"].strides) == ("tensor", None)
    assert (args["alpha"].kind, args["alpha"].dtype, args["alpha"].passed_at_launch) == ("scalar", "float32", True)
    assert dict(args["s"].binds_from) == {"s": "X.stride(0)"} and not args["s"].passed_at_launch
    # a plain factory bakes defaults in: block is part of what the kernel was built from
    assert (args["block"].kind, args["block"].value, args["block"].cache_key) == ("constant", "128", "128")
    # ground truth: the cython launcher's entry takes alpha and the stride symbol s
    call = r.sources.launcher("cython").text.split('extern "C" TL_EXPORT int call(')[1].split(")")[0]
    assert "float alpha" in call and "int s" in call


# --------------------------------------------------------------------------------------------
# Review fixes: symbolic L2 windows, symbol dtypes, layouts left out, launch flags, front ends
# --------------------------------------------------------------------------------------------


def test_l2_window_over_a_dynamic_buffer_is_symbolic():
    r = report("l2_persist_dynamic")
    (w,) = r.l2_persistence
    assert (w.buffer, w.hit_ratio) == ("X", 0.5)
    # X is (m, 8192) fp16: 2 * 8192 bytes per row, m rows
    assert isinstance(w.bytes, str) and _py_value(w.bytes, m=1000) == 1000 * 8192 * 2
    assert w.emitted_by == ("tvm_ffi",)
    assert "__tvm_cuda_stream_set_access_policy_window" in r.sources.launcher("tvm_ffi").text
    assert tilelab.KernelReport.from_json(r.to_json()).l2_persistence == (w,)
    from tilelab.render.html import render_html
    from tilelab.render.text import render_text

    assert f"X: hit ratio 0.5, {w.bytes} B" in render_text(r)
    assert f"{w.bytes} B" in render_html(r)


def test_l2_notes_give_each_backend_its_own_reason():
    import re
    from pathlib import Path

    import tilelang

    adapters = Path(tilelang.__file__).parent / "jit" / "adapter"
    # Ground truth from TileLang's sources: cython/nvrtc have L2 code (keyed wrongly), cutedsl none.
    assert "l2_persistent_map" in (adapters / "wrapper.py").read_text()
    assert "l2_persistent_map" in (adapters / "nvrtc" / "wrapper.py").read_text()
    assert "l2_persistent_map" not in (adapters / "cutedsl" / "wrapper.py").read_text()
    (note,) = [n for n in report("l2_persist").notes if "L2" in n]
    lookup, no_code = re.split(r"(?<=\.) (?=TileLang 0\.1\.15's cutedsl)", note)[:2]
    assert "cython and nvrtc" in lookup and "kernel name" in lookup and "cutedsl" not in lookup
    assert "cutedsl launcher has no L2 persistence code" in no_code and "kernel name" not in no_code
    assert note.endswith("Only tvm_ffi applies T.annotate_l2_hit_ratio.")


def test_dynamic_dim_dtype_is_the_symbols_own():
    import tilelang.language as T

    def copy_rows(N=1024, block=128, dtype="int64"):
        M = T.dynamic("m", dtype)

        @T.prim_func
        def copy_rows_kernel(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
            with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
                for i in T.Parallel(block):
                    for j in T.serial(N):
                        B[bx * block + i, j] = A[bx * block + i, j]

        return copy_rows_kernel

    c_types = {"int64": "int64_t", "int32": "int"}
    for dtype in ("int64", "int32"):
        r = tilelab.inspect(copy_rows(dtype=dtype), "sm_90a")
        m = next(a for a in r.arguments if a.name == "m")
        assert (m.kind, m.dtype) == ("dynamic_dim", dtype)
        # ground truth: the type of m in the cython launcher's entry point
        assert cython_call_parameters(r.sources.launcher("cython").text)["m"] == c_types[dtype]


def _big_tile_copy():
    import tilelang.language as T

    @T.prim_func
    def big_tile(A: T.Tensor((4096, 4096), T.float16), B: T.Tensor((4096, 4096), T.float16)):
        with T.Kernel(4096 // 512, 4096 // 256, threads=256) as (bx, by):
            tile = T.alloc_shared((256, 512), T.float16)  # 131,072 elements
            T.copy(A[by * 256, bx * 512], tile)
            T.copy(tile, B[by * 256, bx * 512])

    return big_tile


def test_a_big_shared_layout_is_tabulated():
    import numpy as np

    r = tilelab.inspect(_big_tile_copy(), "sm_90a")
    lay = r.layout("tile")
    assert lay.shape == (256, 512) and len(lay.offsets) == 256 * 512
    assert sorted(lay.array("offsets").ravel().tolist()) == list(range(256 * 512))
    assert not np.array_equal(lay.array("offsets").ravel(), np.arange(256 * 512))  # swizzled
    assert not any("tile" in n and "left out" in n for n in r.notes)


def test_layouts_left_out_are_named_in_the_notes(monkeypatch):
    from tilelab import _tilelang

    monkeypatch.setattr(_tilelang.layout_tables, "MAX_LAYOUT_ELEMENTS", 1 << 16)
    r = tilelab.inspect(_big_tile_copy(), "sm_90a", force=True)
    assert [x.buffer for x in r.layouts] == []
    assert "layout of tile left out: 131,072 elements, more than the 65,536 tilelab tabulates" in r.notes

    real = _tilelang.layout_tables._evaluate

    def refuse_fragments(expr, env, shape):
        if tuple(shape) == (128, 128):  # only C_local (the accumulator) has this shape here
            raise NotImplementedError("cannot evaluate Foo: bar")
        return real(expr, env, shape)

    monkeypatch.setattr(_tilelang.layout_tables, "MAX_LAYOUT_ELEMENTS", 1 << 18)
    monkeypatch.setattr(_tilelang.layout_tables, "_evaluate", refuse_fragments)
    r = tilelab.inspect(matmul(256, 256, 256, 128, 128, 32), "sm_90a", force=True)
    assert "C_local" not in {x.buffer for x in r.layouts}
    assert {"A_shared", "B_shared"} <= {x.buffer for x in r.layouts}
    assert ("layout of C_local left out: tilelab could not evaluate it "
            "(NotImplementedError: cannot evaluate Foo: bar)") in r.notes


def _swizzled(lin, span_bytes: int, element_bytes: int):
    """TMA/CuTe swizzle by hand: the 16-byte chunk index (byte bits 4..) is XORed with the 128-byte
    row index (byte bits 7..) modulo span / 16; ``lin`` in elements."""
    mask = span_bytes // 16 - 1
    byte = lin * element_bytes
    return (byte ^ (((byte >> 7) & mask) << 4)) // element_bytes


def test_hopper_gemm_shared_layout_values_follow_the_tma_swizzle():
    import numpy as np

    r = report("gemm")
    for buffer, rows, cols in (("A_shared", 128, 32), ("B_shared", 32, 128)):
        lay = r.layout(buffer)
        desc = r.tma(buffer[0])
        assert lay.shape == (rows, cols)
        span = {"64B": 64, "128B": 128}[desc.swizzle]
        box_cols, box_rows = desc.box_dim  # innermost first
        row, col = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        # TMA writes box after box along the inner dimension; within a box, rows of box_cols elements
        box, in_box = col // box_cols, col % box_cols
        expected = box * (box_rows * box_cols) + _swizzled(row * box_cols + in_box, span, 2)
        assert np.array_equal(lay.array("offsets"), expected), buffer
    # the brief's formulas, in elements: 64B lin ^ (((lin >> 6) & 3) << 3); 128B with & 7
    lin = np.arange(128 * 32)
    assert np.array_equal(r.layout("A_shared").array("offsets").ravel(), lin ^ (((lin >> 6) & 3) << 3))


def test_rs_wgmma_takes_a_from_registers():
    import tilelang.language as T

    def gemm_rs(M=1024, N=1024, K=1024, bM=128, bN=128, bK=64):
        @T.prim_func
        def gemm_rs_kernel(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                           C: T.Tensor((M, N), T.float16)):
            with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
                A_shared = T.alloc_shared((bM, bK), T.float16)
                A_frag = T.alloc_fragment((bM, bK), T.float16)
                B_shared = T.alloc_shared((bK, bN), T.float16)
                C_local = T.alloc_fragment((bM, bN), T.float32)
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                    T.copy(A[by * bM, k * bK], A_shared)
                    T.copy(A_shared, A_frag)
                    T.copy(B[k * bK, bx * bN], B_shared)
                    T.gemm(A_frag, B_shared, C_local)
                T.copy(C_local, C[by * bM, bx * bN])

        return gemm_rs_kernel

    r = tilelab.inspect(gemm_rs(), "sm_90a")
    truth = device_wgmma(r.sources.device)
    (form,) = truth["forms"]
    (w,) = r.wgmma
    assert form["variant"] == w.variant == "rs" and w.a is None
    assert (w.instruction, w.b_major) == (form["instruction"], form["b_major"])
    assert (w.a_dtype, w.b_dtype, w.accum_dtype) == ("float16", "float16", "float32")
    (desc,) = truth["descriptors"].values()
    assert (w.b.buffer, w.b.layout_type, w.b.lbo, w.b.sbo) == (desc["buffer"], desc["layout_type"], desc["lbo"],
                                                              desc["sbo"])


def _launch_kernels():
    import tilelang.language as T

    def body(A, B, block, bx, by):
        for j in T.Parallel(block):
            B[by, bx * block + j] = A[by, bx * block + j]

    @T.prim_func
    def clustered(A: T.Tensor((1024, 1024), T.float16), B: T.Tensor((1024, 1024), T.float16)):
        with T.Kernel(8, 1024, threads=128, cluster_dims=(2, 1, 1)) as (bx, by):
            for j in T.Parallel(128):
                B[by, bx * 128 + j] = A[by, bx * 128 + j]

    @T.prim_func
    def pdl(A: T.Tensor((1024, 1024), T.float16), B: T.Tensor((1024, 1024), T.float16)):
        with T.Kernel(8, 1024, threads=128) as (bx, by):
            T.pdl_sync()
            for j in T.Parallel(128):
                B[by, bx * 128 + j] = A[by, bx * 128 + j]
            T.pdl_trigger()

    @T.prim_func
    def cooperative(A: T.Tensor((1024, 1024), T.float16), B: T.Tensor((1024, 1024), T.float16)):
        with T.Kernel(8, 1024, threads=128) as (bx, by):
            for j in T.Parallel(128):
                B[by, bx * 128 + j] = A[by, bx * 128 + j]
            T.sync_grid()
            for j in T.Parallel(128):
                B[by, bx * 128 + j] = B[by, bx * 128 + j] + A[by, bx * 128 + j]

    return {"clustered": clustered, "pdl": pdl, "cooperative": cooperative}


@pytest.mark.parametrize("name", ["clustered", "pdl", "cooperative"])
def test_cluster_pdl_and_cooperative_flags_match_the_cython_launcher(name):
    r = tilelab.inspect(_launch_kernels()[name], "sm_90a")
    (k,) = r.kernels
    truth = cython_launch_attributes(r.sources.launcher("cython").text, k.name)
    assert k.cooperative == truth["cooperative"] == (name == "cooperative")
    assert list(k.cluster_dims or []) == (truth["cluster"] or []) == ([2, 1, 1] if name == "clustered" else [])
    assert ("cython" in k.programmatic_serialization_by) == truth["serialization"]
    # the kernel's own PDL wait: cudaGridDependencySynchronize in the device code
    assert k.programmatic_dependent_launch == ("cudaGridDependencySynchronize()" in r.sources.device) == (name == "pdl")
    # nvrtc allows the early start only for kernels that wait (its PDL_SYNC_PY block)
    nvrtc_sets = "programmaticStreamSerializationAllowed = 1" in r.sources.launcher("nvrtc").text
    assert ("nvrtc" in k.programmatic_serialization_by) == nvrtc_sets == (name == "pdl")
    assert "tvm_ffi" not in k.programmatic_serialization_by
    unsynced = [n for n in r.notes if n.startswith("programmatic dependent launch")]
    assert bool(unsynced) == (truth["serialization"] and not k.programmatic_dependent_launch)


def test_cython_sets_programmatic_serialization_on_an_ordinary_launch():
    r = report("gemm")
    (k,) = r.kernels
    assert cython_launch_attributes(r.sources.launcher("cython").text, k.name)["serialization"]
    assert not k.programmatic_dependent_launch and k.programmatic_serialization_by == ("cython",)
    (note,) = [n for n in r.notes if n.startswith("programmatic dependent launch")]
    assert "gemm_kernel never call(s) T.pdl_sync" in note and "cython launcher(s)" in note


@pytest.mark.filterwarnings("ignore:`tl.disable_tma_lower` is deprecated")
def test_compiled_kernel_brings_its_target_out_idx_and_pass_configs():
    """A tilelang.compile result built through TileLang's own constructor without compiling
    (``from_database=True``, the path TileLang's disk cache uses); its adapter supplies out_idx."""
    import types

    from tilelang.jit.kernel import JITKernel

    func = matmul(256, 256, 256, 128, 128, 32)
    compiled = JITKernel(func, out_idx=[-1], execution_backend="tvm_ffi", target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs={"tl.disable_tma_lower": True}, from_database=True)
    compiled.adapter = types.SimpleNamespace(result_idx=[2])  # what a compile would set for out_idx=[-1]
    assert tilelab._tilelang.kernel_kind(compiled) == "compiled"
    r = tilelab.inspect(compiled)  # no target: the kernel's own
    assert r.target == "sm_90a" and not any("no GPU" in n for n in r.notes)
    assert {a.name: a.is_output for a in r.arguments if a.kind == "tensor"} == {"A": False, "B": False, "C": True}
    assert dict(r.pass_configs)["tl.disable_tma_lower"] == "True"
    direct = tilelab.inspect(func, "sm_90a", out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})
    assert (r.kernels, r.tma_descriptors, r.wgmma, r.arguments) == (
        direct.kernels, direct.tma_descriptors, direct.wgmma, direct.arguments)
    assert r.sources.device == direct.sources.device


@pytest.mark.filterwarnings("ignore:`tl.disable_tma_lower` is deprecated")
def test_pass_configs_and_explicit_out_idx():
    """In TileLang 0.1.15 ``tl.disable_tma_lower`` stops plain T.copy from lowering to a TMA *store*
    (its docstring: "prevents plain T.copy() from auto-lowering to TMA store"); TMA loads stay."""
    from tile_copy import copy

    off = {"tl.disable_tma_lower": True}
    plain = tilelab.inspect(copy(1024, 1024), "sm_90a")
    no_tma = tilelab.inspect(copy(1024, 1024), "sm_90a", pass_configs=off)
    assert [d.buffer for d in plain.tma_descriptors] == ["B"] and no_tma.tma_descriptors == ()
    assert plain.sources.launcher("cython").text.count("cuTensorMapEncode") == 1
    assert "cuTensorMapEncode" not in no_tma.sources.launcher("cython").text
    assert dict(no_tma.pass_configs)["tl.disable_tma_lower"] == "True"
    # the GEMM's staged epilogue store goes; its TMA loads stay
    func = matmul(1024, 1024, 1024, 128, 128, 32, smem_epilogue=True)
    staged = tilelab.inspect(func, "sm_90a")
    unstaged = tilelab.inspect(func, "sm_90a", pass_configs=off, out_idx=[-1])
    assert [d.buffer for d in staged.tma_descriptors] == ["A", "B", "C"]
    assert [d.buffer for d in unstaged.tma_descriptors] == ["A", "B"]
    assert unstaged.sources.launcher("cython").text.count("cuTensorMapEncode") == 2
    # explicit out_idx=[-1]: C is the output, allocated by the tvm_ffi launcher
    args = {a.name: a for a in unstaged.arguments}
    assert args["C"].is_output and not args["C"].passed_at_launch and args["A"].passed_at_launch
    assert not any(a.is_output for a in staged.arguments)
    # ground truth: TileLang's tvm_ffi host code then allocates C instead of taking it as a tensor
    taken = "kernel gemm input C expected pointer or tensor handle"
    staged_text, unstaged_text = staged.sources.launcher("tvm_ffi").text, unstaged.sources.launcher("tvm_ffi").text
    assert taken in staged_text and "TVMFFIEnvTensorAlloc" not in staged_text
    assert taken not in unstaged_text and "TVMFFIEnvTensorAlloc" in unstaged_text


def test_jit_cache_key_is_tilelangs_own():
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def scale(N, block=256):
        @T.prim_func
        def scale_kernel(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2.0

        return scale_kernel

    for args in ((4096,), (8192,), (4096, 128)):
        key = scale.parse_cache_key(*args)  # TileLang's JIT call key, asked directly
        r = tilelab.inspect(scale, "sm_90a", args=args)
        assert r.cache_key == f"JIT call key {key!r}"
    assert scale.parse_cache_key(4096) != scale.parse_cache_key(4096, 128)


def test_only_tilelangs_memory_cache_advice_is_dropped():
    """tilelab compiles the same kernel for run, bench and sweep; TileLang's "consider @tilelang.jit"
    advice on each in-process cache hit is dropped, every other message of that logger kept."""
    import logging

    from tilelab import _tilelang

    _tilelang._quiet_memory_cache_advice()
    _tilelang._quiet_memory_cache_advice()  # idempotent: one filter
    log = logging.getLogger("tilelang.cache.kernel_cache")
    assert log.filters.count(_tilelang._drop_memory_cache_advice) == 1
    advice = logging.LogRecord(log.name, logging.WARNING, __file__, 1,
                               "Found kernel '%s' in memory cache. For better performance, consider using "
                               "`@tilelang.jit` instead of direct kernel caching.", ("gemm",), None)
    other = logging.LogRecord(log.name, logging.WARNING, __file__, 1, "cache directory %s is not writable",
                              ("/x",), None)
    assert not log.filter(advice) and log.filter(other)


def test_the_host_printing_memo_is_one_block_at_a_time_across_threads():
    """Two threads generating launchers at once: the second block waits for the first to end, so
    the class attribute it swaps is restored in order and nothing stays installed afterwards."""
    import threading

    import tilelang

    from tilelab import _tilelang

    prim_func = tilelang.tvm.tirx.PrimFunc

    class Func:
        def __init__(self, handle):
            self.handle = handle

        def __chandle__(self):
            return self.handle

    class Module:
        def __init__(self, handle):
            self.functions = {"main": Func(handle)}

    events, a_inside, release_a = [], threading.Event(), threading.Event()

    def first():
        with _tilelang._host_printed_once(Module(1)):
            events.append("a in")
            a_inside.set()
            release_a.wait(10)
            events.append("a out")

    def second():
        a_inside.wait(10)
        with _tilelang._host_printed_once(Module(2)):
            events.append("b in")
        events.append("b out")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    a_inside.wait(10)
    threading.Event().wait(0.2)  # give the second thread the chance to enter too early
    release_a.set()
    for t in threads:
        t.join(10)
    assert events == ["a in", "a out", "b in", "b out"]
    assert "__str__" not in prim_func.__dict__
