"""tilelab.swizzle against what TileLang 0.1.15 itself computes: ground truth tilelab did not make.

1. TileLang's swizzled layouts (``make_{full,half,quarter}_bank_swizzled_layout``), evaluated
   element by element with ``Layout.map_forward_index``, equal ``SharedTile(..., "128B"/"64B"/"32B")``
   offsets. TileLang states them per element and tiles the columns into span-wide panels first
   (output shape ``(cols // W, rows // 8, 8 * W)`` with ``W = span / element bytes``), and its XOR
   terms are the bits of ``(col // (16 / e)) XOR (row % 8 ...)``: the same bytes as the driver's
   ``CU_TENSOR_MAP_SWIZZLE_*`` on a buffer aligned to the pattern repeat.
2. ``compute_gmma_descriptor`` (TileLang's port of CuTe ``make_gmma_desc``) gives the same
   layout type, LBO and SBO as ``tilelab.swizzle.wgmma_descriptor``.
3. For every WGMMA operand of the example kernels as ``tilelab.inspect`` reports it (the values in
   the generated ``tl::initialize_wgmma_descriptor<...>``): the swizzle is found from the compiler's
   inferred layout *offsets*, TileLang's rule as tilelab states it predicts that swizzle (including
   the conv kernel's 64B B operand, chosen from the per-warp N), and tilelab's descriptor then
   equals the compiler's.
4. INTERLEAVE (no-swizzle canonical) K-major layouts written by hand give TileLang's LBO/SBO.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilelab import swizzle as sw

tilelang = pytest.importorskip("tilelang", reason="TileLang is not installed: no compiler ground truth")


def _tvm():
    from tilelang import tvm

    return tvm


def _buffer(shape, dtype):
    return _tvm().tirx.decl_buffer(shape, dtype, scope="shared.dyn")


def _evaluate(layout, shape) -> np.ndarray:
    out_shape = [int(s) for s in layout.get_output_shape()]
    result = np.zeros(shape, dtype=np.int64)
    for i in range(shape[0]):
        for j in range(shape[1]):
            parts = [int(v) for v in layout.map_forward_index([i, j])]
            flat = 0
            for value, extent in zip(parts, out_shape):
                flat = flat * extent + value
            result[i, j] = flat
    return result


MAKERS = {"128B": "make_full_bank_swizzled_layout", "64B": "make_half_bank_swizzled_layout",
          "32B": "make_quarter_bank_swizzled_layout"}
SHAPES = [((8, 64), "float16"), ((16, 128), "float16"), ((32, 64), "bfloat16"), ((16, 32), "float32"),
          ((8, 64), "float32"), ((32, 128), "int8"), ((16, 256), "float8_e4m3"), ((64, 64), "float16")]


@pytest.mark.parametrize("mode", list(MAKERS))
@pytest.mark.parametrize("shape, dtype", SHAPES)
def test_tilelang_swizzled_layouts_element_by_element(mode, shape, dtype):
    import tilelang.layout as tl_layout

    try:
        tile = sw.SharedTile(shape[0], shape[1], dtype, mode)
    except ValueError:
        pytest.skip(f"{shape} {dtype} has rows narrower than {mode}")
    layout = getattr(tl_layout, MAKERS[mode])(_buffer(shape, dtype))
    assert np.array_equal(_evaluate(layout, shape), tile.offsets())


@pytest.mark.parametrize("shape, dtype", [((64, 64), "float16"), ((64, 32), "float16"), ((64, 16), "float16"),
                                          ((64, 24), "float16"), ((32, 96), "float16"), ((64, 32), "float32"),
                                          ((64, 128), "float8_e4m3")])
def test_tilelang_picks_the_swizzle_tilelab_predicts(shape, dtype):
    """make_wgmma_swizzled_layout on a whole tile = default_swizzle(row bytes), offsets included."""
    from tilelang.layout import make_wgmma_swizzled_layout

    layout = make_wgmma_swizzled_layout(_buffer(shape, dtype), k_major=True)
    mode = sw.default_swizzle(shape[1] * sw.dtype_bytes(dtype))
    assert np.array_equal(_evaluate(layout, shape), sw.SharedTile(shape[0], shape[1], dtype, mode).offsets())


DESCRIPTOR_CASES = [
    # (shape, dtype, mode, major)
    ((64, 64), "float16", "128B", "K"), ((64, 32), "float16", "64B", "K"), ((64, 16), "float16", "32B", "K"),
    ((64, 128), "float16", "128B", "K"), ((64, 32), "float32", "128B", "K"), ((64, 128), "float8_e4m3", "128B", "K"),
    ((64, 64), "bfloat16", "128B", "MN"), ((32, 128), "float16", "128B", "MN"), ((16, 64), "float16", "64B", "MN"),
    ((64, 256), "float16", "128B", "MN"), ((64, 192), "float16", "64B", "MN"), ((16, 16), "float16", "32B", "MN"),
    ((64, 8), "float16", "NONE", "K"),
]


@pytest.mark.parametrize("shape, dtype, mode, major", DESCRIPTOR_CASES)
def test_descriptor_equals_tilelang_make_gmma_desc(shape, dtype, mode, major):
    import tilelang.layout as tl_layout
    from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import compute_gmma_descriptor

    buf = _buffer(shape, dtype)
    maker = getattr(tl_layout, MAKERS[mode]) if mode != "NONE" else tl_layout.make_linear_layout
    params = compute_gmma_descriptor(maker(buf), buf, transposed=(major == "MN"))
    tile = sw.SharedTile(shape[0], shape[1], dtype, mode)
    mn_extent = shape[0] if major == "K" else shape[1]
    desc = sw.wgmma_descriptor(tile, major, operand="B", mn=min(mn_extent, 256))
    assert (desc.layout_type, desc.lbo, desc.sbo) == (
        params.swizzle_mode.wgmma_layout_type(), params.leading_byte_offset, params.stride_byte_offset)


# -- the engine's reports of the example kernels --------------------------------------------------

def _example_reports():
    from conv_im2col import convolution
    from gemm import matmul
    from gemm_bf16_nt import matmul_nt
    from gemm_dynamic import matmul_dynamic_m

    import tilelab

    kernels = {
        "gemm 128x128x32": matmul(1024, 1024, 1024, 128, 128, 32),
        "gemm 128x256x64 (default)": matmul(1024, 1024, 1024),
        "gemm bf16 NT": matmul_nt(1024, 1024, 1024, 128, 128, 64),
        "gemm dynamic M": matmul_dynamic_m(1024, 1024, 128, 128, 64),
        "conv im2col": convolution(8, 64, 56, 56, 64, 3, 1, 1, 1),
    }
    return {name: tilelab.inspect(k, target="sm_90a") for name, k in kernels.items()}


@pytest.fixture(scope="module")
def reports():
    return _example_reports()


def _operands(report):
    """(role, compiler operand, instruction MN extent, shared layout) of every WGMMA operand."""
    shared = {layout.buffer: layout for layout in report.layouts if layout.scope == "shared"}
    for instr in report.wgmma:
        for role, operand in (("A", instr.a), ("B", instr.b)):
            if operand is not None:
                yield role, operand, (64 if role == "A" else instr.n), shared[operand.buffer]


def test_every_wgmma_operand_matches_the_compiler(reports):
    """Not circular: the mode comes from the compiler's inferred layout *offsets* (match_layout),
    and TileLang's rule (wgmma_operand_swizzle, fed the tile's K or the instruction's M/N) must
    predict it; then tilelab's layout_type, LBO and SBO must equal the compiler's descriptor."""
    checked = 0
    for name, report in reports.items():
        assert report.wgmma, f"{name}: no WGMMA found"
        for role, operand, inst_mn, layout in _operands(report):
            tile = sw.match_layout(layout)
            assert tile is not None, (name, operand.buffer, "offsets match no tilelab mode")
            rows, cols = layout.shape
            predicted = sw.wgmma_operand_swizzle(layout.dtype, operand.major, k=cols if operand.major == "K" else None,
                                                 inst_mn=inst_mn)
            assert tile.swizzle == predicted, (name, operand.buffer, tile.swizzle, predicted)
            desc = sw.wgmma_descriptor(tile, operand.major, operand=role, mn=inst_mn)
            assert (desc.layout_type, desc.lbo, desc.sbo) == (operand.layout_type, operand.lbo, operand.sbo), \
                (name, role, desc.to_dict())
            assert desc.to_operand(operand.buffer) == operand
            check = sw.check_wgmma_operand(layout, operand, role, inst_mn)
            assert check.agrees and "agrees with the compiler" in check.summary()
            checked += 1
    assert checked >= 2 * len(reports)


def test_conv_kernel_shared_is_64b_because_of_the_per_warp_extent(reports):
    """The case default_swizzle(row bytes) gets wrong, recorded explicitly: 64 x 64 fp16
    (128-byte rows), but 8 warps split N=64 in two, the instruction is m64n32k16, and TileLang's
    continuity for an MN-major B is that N (32 fp16 = 64 B)."""
    report = reports["conv im2col"]
    layout = report.layout("kernel_shared")
    assert tuple(layout.shape) == (64, 64) and sw.normalize_dtype(layout.dtype) == "float16"
    (instr,) = [w for w in report.wgmma if w.b is not None and w.b.buffer == "kernel_shared"]
    assert instr.instruction == "m64n32k16" and instr.b.major == "MN"
    assert sw.match_layout(layout).swizzle == "64B"  # the compiler's offsets
    assert sw.default_swizzle(64 * 2) == "128B"  # the whole-row rule alone: wrong here
    assert sw.wgmma_operand_swizzle("float16", "MN", inst_mn=instr.n) == "64B"
    assert sw.select_wgmma_inst_n(64 // 2) == instr.n  # N // n_warp, n_warp = 2 from the C++ partition


def test_select_wgmma_inst_n_equals_tilelang():
    from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import select_wgmma_inst_n

    for n in range(8, 1032, 8):
        assert sw.select_wgmma_inst_n(n) == select_wgmma_inst_n(n), n


def _interleave_layout(shape, dtype, order):
    """WGMMA's no-swizzle canonical layout written here by hand as a TileLang Layout."""
    import tilelang.layout as tl_layout

    rows, cols = shape
    per = 16 // sw.dtype_bytes(dtype)
    bands, chunks = rows // 8, cols // per

    def forward(i, j):
        block = (j // per) * bands + i // 8 if order == "rows" else (i // 8) * chunks + j // per
        return block * 8 * per + (i % 8) * per + j % per

    return tl_layout.Layout(list(shape), forward)


@pytest.mark.parametrize("shape, dtype, order", [((64, 32), "float16", "rows"), ((64, 32), "float16", "chunks"),
                                                 ((64, 16), "float16", "chunks"), ((128, 64), "bfloat16", "rows"),
                                                 ((64, 8), "float16", "rows"), ((64, 16), "float32", "rows")])
def test_interleave_k_major_descriptor_equals_tilelang(shape, dtype, order):
    """TileLang's make_gmma_desc port accepts any canonical layout: hand-written INTERLEAVE blocks
    give the LBO/SBO tilelab computes, and the same offsets. (TileLang 0.1.15's decoder refuses
    MN-major INTERLEAVE layouts: their u128 recast has its unit stride in K; those are tested by
    hand in test_swizzle.py.)"""
    from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import compute_gmma_descriptor

    layout = _interleave_layout(shape, dtype, order)
    params = compute_gmma_descriptor(layout, _buffer(shape, dtype), transposed=False)
    tile = sw.SharedTile(shape[0], shape[1], dtype, "INTERLEAVE", core_order=order)
    assert np.array_equal(_evaluate(layout, shape), tile.offsets())
    desc = sw.wgmma_descriptor(tile, "K", operand="B", mn=shape[0])
    assert (desc.layout_type, desc.lbo, desc.sbo) == (
        params.swizzle_mode.wgmma_layout_type(), params.leading_byte_offset, params.stride_byte_offset)


def test_every_shared_layout_matches_element_by_element(reports):
    """Every shared buffer of the examples is one of tilelab's modes, found from offsets alone."""
    checked = 0
    for name, report in reports.items():
        for layout in report.layouts:
            if layout.scope != "shared":
                continue
            tile = sw.match_layout(layout)
            assert tile is not None, (name, layout.buffer)
            assert np.array_equal(tile.offsets(), layout.array("offsets")), (name, layout.buffer)
            checked += 1
    assert checked >= 2 * len(reports)


def test_layouts_tab_pictures_of_the_kernels_own_buffers(reports):
    """What the inspector's Layouts tab shows: every layout draws, shared ones name their mode."""
    import xml.etree.ElementTree as ET

    from tilelab.render.svg import layout_svg

    for name, report in reports.items():
        for layout in report.layouts:
            text = layout_svg(layout)
            ET.fromstring(text)
            assert len(text) < 300_000, (name, layout.buffer, len(text))
            if layout.scope == "shared":
                assert "matches tilelab&#x27;s" in text, (name, layout.buffer)
            else:
                assert "colour: warp" in text
