"""tilelab.trace_tiles: which elements each block of a CPU launch read and wrote.

Every expectation is derived here from the kernel's own tiling (the index ranges a block of a
hand-written kernel must touch), never from the tracer: a correct tiled copy, a copy whose ragged
edge is unguarded, a kernel that writes a tile twice and leaves rows unwritten, a broadcast outer
add, a row reduction and a GEMM. Then the record's JSON round trip, the sentences on hand-made
masks, the refusals, and the renderer's SVG (parsed as XML)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import target_kernels as tk
import torch

import tilelab
from tilelab.records.tile_trace import OutOfBounds, TensorTrace, TileTrace, describe_elements

T = pytest.importorskip("tilelang.language")


# ------------------------------------------------------------------------------------------------
# Kernels of the tests (each test's truth is computed from these tile sizes)
# ------------------------------------------------------------------------------------------------


def tiled_copy(M, N, bm, bn):
    @T.prim_func
    def tiled_copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            tile = T.alloc_local((bm, bn), T.float32)
            T.copy(A[by * bm, bx * bn], tile)
            T.copy(tile, B[by * bm, bx * bn])

    return tiled_copy


def unguarded_copy(M, N, bm, bn):
    """No guard at the ragged edge: the last row and column of blocks reach past A and B."""

    @T.prim_func
    def unguarded_copy(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            for i, j in T.grid(bm, bn):
                B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j]

    return unguarded_copy


def clamped_rows(M, N, bm, bn, last):
    """Blocks with by > last copy the tile of by = last again: that tile is written twice and the
    rows after it never."""

    @T.prim_func
    def clamped_rows(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            row = T.min(by, last) * bm
            for i, j in T.grid(bm, bn):
                B[row + i, bx * bn + j] = A[row + i, bx * bn + j]

    return clamped_rows


def outer_add(M, N, bm, bn):
    """C[i, j] = a[i] + b[j], guarded at the ragged edge."""

    @T.prim_func
    def outer_add(a: T.Tensor((M,), T.float32), b: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            for i, j in T.grid(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = a[by * bm + i] + b[bx * bn + j]

    return outer_add


def tile_of(M, N, bm, bn, bx, by):
    """The elements block (bx, by) of a bm x bn tiling owns, by hand."""
    mask = np.zeros((M, N), dtype=bool)
    mask[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn] = True
    return mask


# ------------------------------------------------------------------------------------------------
# Traced launches
# ------------------------------------------------------------------------------------------------


def test_a_tiled_copy_writes_every_element_once_each_block_its_own_tile():
    M, N, bm, bn = 100, 72, 32, 32  # ragged both ways; T.copy guards the edge
    a = torch.randn(M, N)
    b = torch.zeros(M, N)
    trace = tilelab.trace_tiles(tiled_copy(M, N, bm, bn), a, b)
    assert torch.equal(a, b)  # the traced kernel still copies
    assert trace.grid == (3, 4) and len(trace.blocks) == 12 and trace.blocks[:4] == ((0, 0), (1, 0), (2, 0), (0, 1))
    for bx, by in trace.blocks:
        tile = tile_of(M, N, bm, bn, bx, by)
        assert np.array_equal(trace.writes("B", (bx, by)), tile), (bx, by)
        assert np.array_equal(trace.reads("A", (bx, by)), tile), (bx, by)
        assert not trace.reads("B", (bx, by)).any() and not trace.writes("A", (bx, by)).any()
    assert not trace.written_twice("B").any() and not trace.never_written("B").any()
    assert trace.out_of_bounds == () and trace.problems() == []
    assert trace.accesses == 2 * M * N
    assert trace.writers("B", (99, 71)) == ((2, 3),)


def test_an_unguarded_ragged_edge_is_recorded_named_and_not_performed():
    """With TileLang's own bounds guards off, the edge blocks reach past A and B: every attempt
    is recorded with its block and index, none is performed (B holds A exactly, and the memory
    just past B is untouched: a column past the edge would land in the next row)."""
    M, N, bm, bn = 40, 24, 16, 16
    a = torch.randn(M, N)
    storage = torch.full((M * N + 64,), 7.0)
    b = storage[:M * N].view(M, N)
    b.zero_()
    trace = tilelab.trace_tiles(unguarded_copy(M, N, bm, bn), a, b,
                                pass_configs={"tl.disable_safe_memory_legalize": True})
    assert torch.equal(b, a) and torch.all(storage[M * N:] == 7.0)
    expected = set()
    for bx in range(2):
        for by in range(3):
            for i in range(bm):
                for j in range(bn):
                    r, c = by * bm + i, bx * bn + j
                    if r >= M or c >= N:
                        expected.add(((bx, by), (r, c)))
    writes = {(o.block, o.index) for o in trace.out_of_bounds if o.write and o.tensor == "B"}
    reads = {(o.block, o.index) for o in trace.out_of_bounds if not o.write and o.tensor == "A"}
    assert writes == expected and reads == expected
    assert trace.out_of_bounds_total == 2 * len(expected)
    # in bounds, each block wrote its tile clipped to B
    assert np.array_equal(trace.writes("B", (1, 2)), tile_of(M, N, bm, bn, 1, 2))
    problems = trace.problems("B")
    assert "block (0, 2) wrote B out of bounds (128 elements) at rows 40-47, cols 0-15; B has rows 0-39" in problems
    assert "block (1, 0) wrote B out of bounds (128 elements) at cols 24-31, rows 0-15; B has cols 0-23" in problems
    assert any(p.startswith("block (1, 2) wrote B out of bounds (192 elements)") for p in problems)
    assert not trace.never_written("B").any()


def test_a_tile_written_twice_and_rows_never_written_are_named_with_their_ranges_and_kept_in_json():
    M, N, bm, bn = 160, 64, 32, 32
    trace = tilelab.trace_tiles(clamped_rows(M, N, bm, bn, last=3))
    twice = np.zeros((M, N), dtype=bool)
    twice[96:128] = True  # blocks (bx, 3) and (bx, 4) both copy rows 96-127
    never = np.zeros((M, N), dtype=bool)
    never[128:] = True
    assert np.array_equal(trace.written_twice("B"), twice)
    assert np.array_equal(trace.never_written("B"), never)
    assert trace.writers("B", (100, 40)) == ((1, 3), (1, 4))
    problems = trace.problems("B")
    assert "blocks (0, 3) and (0, 4) both wrote rows 96-127, cols 0-31 of B" in problems
    assert "blocks (1, 3) and (1, 4) both wrote rows 96-127, cols 32-63 of B" in problems
    assert "rows 128-159 of B were never written (2048 of 10240 elements)" in problems
    assert trace.problems("A") == []  # an input is never expected to be written
    again = TileTrace.from_json(json.dumps(json.loads(trace.to_json())))
    assert again == trace and again.problems("B") == problems


def test_a_broadcast_outer_add_reads_its_slices_of_both_vectors():
    M, N, bm, bn = 50, 70, 16, 32
    a, b = torch.randn(M), torch.randn(N)
    c = torch.zeros(M, N)
    trace = tilelab.trace_tiles(outer_add(M, N, bm, bn), a, b, c)
    assert torch.allclose(c, a[:, None] + b[None, :])
    assert trace.grid == (3, 4)
    for bx, by in trace.blocks:
        rows = np.zeros(M, dtype=bool)
        rows[by * bm:(by + 1) * bm] = True
        cols = np.zeros(N, dtype=bool)
        cols[bx * bn:(bx + 1) * bn] = True
        assert np.array_equal(trace.reads("a", (bx, by)), rows), (bx, by)
        assert np.array_equal(trace.reads("b", (bx, by)), cols), (bx, by)
        assert np.array_equal(trace.writes("C", (bx, by)), tile_of(M, N, bm, bn, bx, by))
    assert trace.problems() == [] and trace.out_of_bounds_total == 0


def test_a_row_reduction_reads_whole_rows_and_writes_one_sum_each():
    M, N, block = 256, 128, 16
    x = torch.randn(M, N)
    s = torch.zeros(M)
    trace = tilelab.trace_tiles(tk.row_sum_cpu(M, N, block), x, s)
    assert torch.allclose(s, x.sum(dim=1), atol=1e-4)
    assert trace.grid == (M // block,) and trace.blocks[3] == (3,)
    for (bx,) in trace.blocks:
        rows = np.zeros((M, N), dtype=bool)
        rows[bx * block:(bx + 1) * block] = True
        sums = np.zeros(M, dtype=bool)
        sums[bx * block:(bx + 1) * block] = True
        assert np.array_equal(trace.reads("X", bx), rows)
        assert np.array_equal(trace.writes("S", (bx,)), sums)
    assert trace.problems() == []


def test_a_cpu_gemm_block_reads_its_row_panel_of_a_and_column_panel_of_b():
    M = N = K = 128
    bm = bn = 32
    trace = tilelab.trace_tiles(tk.gemm_cpu(M, N, K, bm, bn, 32))
    for bx, by in [(0, 0), (1, 2), (3, 3)]:
        panel_a = np.zeros((M, K), dtype=bool)
        panel_a[by * bm:(by + 1) * bm] = True
        panel_b = np.zeros((K, N), dtype=bool)
        panel_b[:, bx * bn:(bx + 1) * bn] = True
        assert np.array_equal(trace.reads("A", (bx, by)), panel_a)
        assert np.array_equal(trace.reads("B", (bx, by)), panel_b)
        assert np.array_equal(trace.writes("C", (bx, by)), tile_of(M, N, bm, bn, bx, by))
    assert trace.problems() == []


def test_blocks_outside_the_grid_are_refused_by_name():
    trace = TileTrace("k", (3, 4), (TensorTrace("B", (4,), "float32", ((),) * 12, ((),) * 12),))
    with pytest.raises(ValueError, match=r"block \(3, 0\) is not in k's launch grid \(3, 4\).*\(0, 0\) to \(2, 3\)"):
        trace.writes("B", (3, 0))
    with pytest.raises(KeyError, match="no tensor 'C'; its tensors: B"):
        trace.reads("C", (0, 0))
    assert trace.block_index((2, 3)) == 11 and trace.block_index((2, 3, 0)) == 11


# ------------------------------------------------------------------------------------------------
# Refusals
# ------------------------------------------------------------------------------------------------


def test_a_gpu_kernel_is_traced_through_its_tile_program_on_the_cpu():
    """Shared and fragment tiles, T.Pipelined and 256 threads: traced by the rules of run(device="cpu").
    Ground truth: block (bx, by) of a 128x128-tiled GEMM writes rows by*128.. and columns bx*128.. of C
    and reads those rows of A (all of K) and those columns of B."""
    trace = tilelab.trace_tiles(tk.gemm_gpu())
    for bx, by in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        wrote = trace.writes("C", (bx, by)).reshape(256, 256)
        expect = np.zeros((256, 256), dtype=bool)
        expect[by * 128:(by + 1) * 128, bx * 128:(bx + 1) * 128] = True
        assert np.array_equal(wrote, expect), (bx, by)
        read_a = trace.reads("A", (bx, by)).reshape(256, 256)
        assert read_a[by * 128:(by + 1) * 128].all() and int(read_a.sum()) == 128 * 256
        read_b = trace.reads("B", (bx, by)).reshape(256, 256)
        assert read_b[:, bx * 128:(bx + 1) * 128].all() and int(read_b.sum()) == 256 * 128
    assert not trace.out_of_bounds


def test_a_kernel_that_indexes_by_thread_is_traced_through_its_loops_over_the_threads():
    trace = tilelab.trace_tiles(tk.thread_indexed_copy())
    assert trace.writes("B", 0).all() and trace.reads("A", 0).all() and not trace.out_of_bounds


def test_a_kernel_with_no_tile_meaning_is_refused_by_name_and_a_gpu_target_too():
    with pytest.raises(tilelab.TraceError, match=r"a barrier under a condition on the thread"):
        tilelab.trace_tiles(__import__("thread_kernels").divergent_barrier())
    with pytest.raises(tilelab.TraceError, match=r"got target 'sm_90a'\. Pass target='c'"):
        tilelab.trace_tiles(tk.scale_add(), target="sm_90a")
    assert issubclass(tilelab.TraceError, tilelab.TilelabError)


# ------------------------------------------------------------------------------------------------
# Sentences on hand-made masks (no TileLang)
# ------------------------------------------------------------------------------------------------


def test_element_sets_are_described_as_merged_row_and_column_ranges():
    m = np.zeros((160, 64), dtype=bool)
    m[128:160] = True
    assert describe_elements(m) == "rows 128-159"
    m[:] = False
    m[96:128, 32:64] = True
    assert describe_elements(m) == "rows 96-127, cols 32-63"
    m[:] = False
    m[:, 60:64] = True
    assert describe_elements(m) == "cols 60-63"
    m[:] = False
    m[0:8, 0:4] = True
    m[16:24, 0:4] = True
    assert describe_elements(m) == "rows 0-7, 16-23, cols 0-3"
    m[:] = False
    m[5, 7] = True
    assert describe_elements(m) == "row 5, col 7"
    v = np.zeros(300, dtype=bool)
    v[128:256] = True
    assert describe_elements(v) == "elements 128-255"
    v[:] = False
    v[[1, 3, 5, 7, 9]] = True  # capped: three places, then a count
    assert describe_elements(v) == "elements 1, 3, 5 and 2 more elements"
    cube = np.zeros((2, 4, 8), dtype=bool)
    cube[1, 2:4] = True
    assert describe_elements(cube) == "[1] rows 2-3"


def test_out_of_bounds_sentences_name_the_dimension_outside_first():
    t = TensorTrace("B", (10, 8), "float32", ((),), ((0, 80),), expected_written=True)
    oob = tuple(OutOfBounds("B", (0,), (r, c), True) for r in (10, 11) for c in range(4))
    trace = TileTrace("k", (1,), (t,), oob, out_of_bounds_total=len(oob))
    assert trace.problems("B") == [("block 0 wrote B out of bounds (8 elements) at rows 10-11, cols 0-3; "
                                    "B has rows 0-9")]


# ------------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------------


def _hand_trace(name: str = "B") -> TileTrace:
    """Grid (2, 2) over an 8 x 8 output: block (1, 1) wrote nothing, block (0, 1) wrote block (1, 0)'s
    tile too; the input A is read by every block."""
    def tile(r, c):
        return tuple(v for i in range(4) for v in ((r * 4 + i) * 8 + c * 4, (r * 4 + i) * 8 + c * 4 + 4))

    writes = (tile(0, 0), tile(0, 1), _merge(tile(1, 0), tile(0, 1)), ())
    a = TensorTrace("A", (8, 8), "float32", ((0, 64),) * 4, ((),) * 4)
    b = TensorTrace(name, (8, 8), "float32", ((),) * 4, writes, expected_written=True)
    oob = (OutOfBounds(name, (1, 1), (8, 0), True),)
    return TileTrace("k<&>", (2, 2), (a, b), oob, out_of_bounds_total=1, accesses=200, notes=("a <note>",))


def _merge(*runs_lists):
    flat = sorted({i for runs in runs_lists for s, e in zip(runs[0::2], runs[1::2]) for i in range(s, e)})
    out = []
    for i in flat:
        if out and out[-1] == i:
            out[-1] = i + 1
        else:
            out += [i, i + 1]
    return tuple(out)


def test_the_html_is_static_escaped_and_one_radio_per_block():
    from tilelab.render.tile_trace import tile_trace_html

    trace = _hand_trace("B<x>")
    page = tile_trace_html(trace)
    assert "<script" not in page.lower() and "k&lt;&amp;&gt;" in page and "a &lt;note&gt;" in page
    assert "B<x>" not in page and "B&lt;x&gt;" in page
    assert len(re.findall(r'<input type="radio"', page)) == len(trace.blocks) + 1  # + "all blocks"
    rid = re.search(r'id="(tl-tt-\d+)"', page).group(1)
    for k in range(4):
        assert f"#{rid}-b{k}:checked~.tl-tt-body .tl-tt-v{k}" in page
    assert "1 out-of-bounds attempt (not performed" in page and "[8, 0]" in page
    assert trace.problems("B<x>")[0].startswith("block (1, 1) wrote B<x> out of bounds")
    assert trace._repr_html_().count("<svg") == page.count("<svg")


def test_each_grid_is_an_svg_with_a_view_box_drawn_at_its_natural_size():
    from tilelab.render.tile_trace import FONT, tile_trace_html, tile_trace_svg

    trace = _hand_trace()
    svg = tile_trace_svg(trace, "B")
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert width <= 480 and height <= 480  # two grids side by side at 1000 px, never scaled down
    assert FONT >= 10 and all(float(t.get("font-size")) >= 10 for t in root.iter("{http://www.w3.org/2000/svg}text"))
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert "rows 0-3, cols 4-7: written by more than one block" in titles
    assert "rows 4-7, cols 4-7: never written (at least one element)" in titles
    assert "rows 0-3, cols 0-3: written by block (0, 0)" in titles
    # block (1, 1)'s attempt at B[8, 0] is drawn one row past the edge of B, which is outlined
    assert "row 8, col 0: outside B (out-of-bounds attempts, not performed)" in titles
    assert root.find(".//{http://www.w3.org/2000/svg}rect[@class='tl-tt-edge']") is not None
    assert tile_trace_svg(_hand_trace(), "A").count("tl-tt-oob") == 0
    # in the page, block (0, 1)'s layer draws its two tiles (merged rectangles) and nothing else
    page = tile_trace_html(trace)
    for svg_text in re.findall(r"<svg xmlns=.*?</svg>", page):
        ET.fromstring(svg_text)  # every grid is well-formed XML
    layer = re.findall(r'<g class="tl-tt-layer tl-tt-v2">(.*?)</g>', page)
    assert len(layer) == 2  # A (read) and B (written)
    assert layer[1].count("<rect") == 2 and "block (0, 1) wrote rows 0-3, cols 4-7" in layer[1]
    assert "block (1, 1) reached row 8, col 0, outside B" in page
    assert "block (0, 1) wrote rows 4-7, cols 0-3" in layer[1]


def test_the_text_repr_lists_tensors_and_problems():
    text = repr(_hand_trace())
    assert text.splitlines()[0] == "k<&>: 4 blocks (grid (2, 2)), 200 accesses traced on the CPU"
    assert "  B (8x8 float32): read by 0 blocks, written by 3 blocks" in text
    assert "rows 4-7, cols 4-7 of B were never written (16 of 64 elements)" in text
    assert "note: a <note>" in text


def test_merged_rectangles_cover_each_cell_once_with_its_value():
    from tilelab.render.tile_trace import _rects

    rng = np.random.default_rng(0)
    for shape, values in [((7, 9), 3), ((1, 5), 2), ((6, 1), 2), ((16, 16), 1)]:
        cells = rng.integers(0, values, size=shape)
        cells[4:, :] = cells[3, :] if shape[0] > 4 else cells[-1, :]  # some stacked rows to merge
        drawn = np.full(shape, -1)
        for r0, c0, r1, c1, v in _rects(cells):
            assert (drawn[r0:r1, c0:c1] == -1).all()  # no overlap
            drawn[r0:r1, c0:c1] = v
        assert np.array_equal(drawn, cells)
    tile = np.zeros((8, 8), dtype=bool)
    tile[2:6, 4:8] = True
    assert sorted(_rects(tile)) == [(0, 0, 2, 8, False), (2, 0, 6, 4, False), (2, 4, 6, 8, True), (6, 0, 8, 8, False)]


def test_the_trace_option_is_parsed_and_documented():
    from tilelab.cell.options import HELP, parse_cell_line

    options = parse_cell_line("--target c --run --trace")
    assert options.trace and options.launches and options.run
    assert parse_cell_line("--target c --trace").launches  # --trace alone launches too
    assert not parse_cell_line("--target c --run").trace
    assert "--trace" in HELP and "tilelab.trace_tiles" in HELP


def test_an_output_no_block_writes_is_named():
    @T.prim_func
    def forgot(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(2) as bx:
            for i in T.serial(32):
                A[bx * 32 + i] = A[bx * 32 + i] * 2.0  # writes its input in place, never B

    trace = tilelab.trace_tiles(forgot)
    assert trace.problems("B") == ["no block wrote B"]
    assert trace.problems("A") == []  # read and written in place, every element by one block
    assert not trace.writes("B", 0).any() and trace.writes("A", 1)[32:].all()


def _copy_xy():
    @T.prim_func
    def copy(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(2) as bx:
            for i in T.serial(32):
                Y[bx * 32 + i] = X[bx * 32 + i]

    return copy


def _copy_pq():
    @T.prim_func
    def copy(P: T.Tensor((64,), T.float32), Q: T.Tensor((64,), T.float32)):
        with T.Kernel(2) as bx:
            for i in T.serial(32):
                Q[bx * 32 + i] = P[bx * 32 + i]

    return copy


def test_the_traced_build_never_answers_for_a_plain_one_and_names_come_from_each_kernel():
    import tilelang

    first = tilelab.trace_tiles(_copy_xy())
    second = tilelab.trace_tiles(_copy_pq())  # the same structure (TVM's hash ignores names), other names
    assert [t.name for t in first.tensors] == ["X", "Y"] and [t.name for t in second.tensors] == ["P", "Q"]
    plain = tilelang.compile(_copy_xy(), target="c", execution_backend="cython")
    assert "tilelab_trace_access" not in plain.get_kernel_source()


def test_blocks_that_race_for_one_element_are_grouped_and_counted():
    M, N, splits = 8, 64, 4

    @T.prim_func
    def split_sum(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(splits, M) as (s, i):  # block (s, i) adds part s of row i into Out[i]
            part = T.alloc_local((1,), T.float32)
            part[0] = 0.0
            for j in T.serial(N // splits):
                part[0] += A[i, s * (N // splits) + j]
            Out[i] = Out[i] + part[0]

    trace = tilelab.trace_tiles(split_sum)
    assert trace.written_twice("Out").all() and trace.writers("Out", (5,)) == tuple((s, 5) for s in range(splits))
    assert trace.problems("Out") == [
        "blocks (0, 0), (1, 0), (2, 0) and (3, 0) all wrote element 0 of Out",
        "blocks (0, 1), (1, 1), (2, 1) and (3, 1) all wrote element 1 of Out",
        "blocks (0, 2), (1, 2), (2, 2) and (3, 2) all wrote element 2 of Out",
        f"{M - 3} more groups of blocks wrote the same elements of Out ({(M - 3) * splits} blocks)",
        f"{M} elements of Out were written by more than one block (on a GPU those blocks race: the last to "
        "write wins)",
    ]
    for s in range(splits):
        part = np.zeros((M, N), dtype=bool)
        part[3, s * (N // splits):(s + 1) * (N // splits)] = True
        assert np.array_equal(trace.reads("A", (s, 3)), part)


def test_atomic_updates_shared_by_blocks_are_not_a_race():
    M, N, splits = 8, 64, 4

    @T.prim_func
    def split_sum_atomic(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(splits, M) as (s, i):
            part = T.alloc_local((1,), T.float32)
            part[0] = 0.0
            for j in T.serial(N // splits):
                part[0] += A[i, s * (N // splits) + j]
            T.atomic_add(Out[i], part[0])

    a = torch.randn(M, N)
    out = torch.zeros(M)
    trace = tilelab.trace_tiles(split_sum_atomic, a, out)
    assert torch.allclose(out, a.sum(dim=1), atol=1e-4)
    assert trace.problems() == [] and not trace.written_twice("Out").any()
    assert trace.writers("Out", (5,)) == tuple((s, 5) for s in range(splits))  # all four still wrote it
    t = trace.tensor("Out")
    assert np.array_equal(t.mask(t.atomic_writes[trace.block_index((2, 5))]), trace.writes("Out", (2, 5)))
    assert TileTrace.from_dict(json.loads(trace.to_json())) == trace


# ------------------------------------------------------------------------------------------------
# Where the traced kernel runs (last: the crash costs the CPU worker, which starts again)
# ------------------------------------------------------------------------------------------------


def crashing_copy(n=64):
    """A copy whose every block then raises SIGSEGV (a call into the C library the trace cannot
    guard): a fault of the kernel's own CPU code, as a wild pointer would make it."""

    @T.prim_func
    def crashing_copy(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(2) as bx:
            for i in T.serial(n // 2):
                B[bx * (n // 2) + i] = A[bx * (n // 2) + i]
            T.evaluate(T.call_extern("int32", "raise", 11))  # SIGSEGV

    return crashing_copy


@pytest.mark.slow
def test_a_traced_kernel_that_crashes_costs_the_cpu_worker_never_this_process():
    from tilelab.launch import KernelLaunchError, _emulate, _worker

    worker = _worker.default_worker(_emulate.CPU_WORKER)
    with pytest.raises(KernelLaunchError, match=r"the traced kernel's process died: .*killed by SIGSEGV") as info:
        tilelab.trace_tiles(crashing_copy())
    err = info.value
    assert err.kind == "launch_failure" and err.isolated and err.kernel == "crashing_copy"
    assert "the calling process is unharmed" in str(err)
    assert worker.starts >= 1  # the CPU worker of run(device="cpu") took it
