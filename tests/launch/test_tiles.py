"""The map of a failed output by tile (tilelab.launch._tiles) and its renderers, on CPU tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tilelab.launch import OutputCheck, RunResult, TileMap, _tiles  # noqa: E402
from tilelab.render.tiles import tile_map_html, tile_map_text  # noqa: E402


def test_tile_from_grid_follows_tilelang_bx_columns_by_rows():
    assert _tiles.tile_from_grid((1024, 2048), (16, 16, 1)) == (64, 128)  # bx walks N, by walks M
    assert _tiles.tile_from_grid((1000,), (4, 1, 1)) == (1, 250)
    assert _tiles.tile_from_grid((8, 128, 256), (2, 4, 8)) == (32, 128)  # leading dims folded into rows
    assert _tiles.tile_from_grid((100, 100), (1, 1, 1)) == (100, 100)


def _case():
    ref = torch.randn(256, 256, dtype=torch.float64)
    out = ref.clone()
    unwritten = torch.zeros(256, 256, dtype=torch.bool)
    unwritten[:, 192:] = True  # the right-most column of tiles never written
    out[64:128, 0:64] += 1.0  # one tile wrong
    out[200, 100] = float("nan")  # one element NaN in tile (3, 1)
    unwritten[0:10, 128:192] = True  # tile (0, 2): partly unwritten, rest right
    return out, ref, unwritten


def test_masks_and_map_mark_each_tile():
    out, ref, unwritten = _case()
    unwritten, wrong = _tiles.element_masks(out, ref, 1e-3, unwritten)
    assert int(wrong.sum()) == 64 * 64 + 1 and not bool((wrong & unwritten).any())
    m = _tiles.tile_map("C", unwritten, wrong, (64, 64), source="test")
    assert m.tile == (64, 64) and len(m.cells) == 4 and all(len(r) == 4 for r in m.cells)
    assert [r[3] for r in m.cells] == ["unwritten"] * 4
    assert m.where("wrong") == ((1, 0), (3, 1))
    assert m.where("partial") == ((0, 2),)
    assert m.count("right") == 16 - 4 - 2 - 1


def test_uneven_tiles_and_merging():
    unwritten = torch.zeros(100, 1000, dtype=torch.bool)
    wrong = torch.zeros(100, 1000, dtype=torch.bool)
    wrong[99, 999] = True
    m = _tiles.tile_map("C", unwritten, wrong, (64, 8))  # 2 x 125 tiles: columns merged to fit 64
    assert m.merged and m.tile == (64, 16) and len(m.cells[0]) == 63
    assert m.where("wrong") == ((1, 62),)


def test_small_errors_within_tolerance_are_right():
    ref = torch.ones(64, 64, dtype=torch.float64)
    out = ref + 1e-6
    unwritten, wrong = _tiles.element_masks(out, ref, 1e-3, None)
    assert not bool(wrong.any()) and not bool(unwritten.any())


def test_renderers_and_round_trip():
    out, ref, unwritten = _case()
    unwritten, wrong = _tiles.element_masks(out, ref, 1e-3, unwritten)
    m = _tiles.tile_map("C", unwritten, wrong, (64, 64), source="the launch grid (4, 4, 1)")
    text = tile_map_text(m)
    lines = text.splitlines()
    assert lines[0].startswith("C by tile of 64x64 elements: 4x4 tiles, 2 wrong, 4 unwritten, 1 partial, 9 right")
    assert lines[1:5] == ["  ../o", "  X..o", "  ...o", "  .X.o"]
    page = tile_map_html(m)
    assert page.count("<td") == 16 and 'title="tile (1, 0): rows 64..127, cols 0..63: some element wrong"' in page
    assert TileMap.from_dict(m.to_dict()) == m
    check = OutputCheck("C", "float32", (256, 256), unwritten=1024, tiles=m)
    result = RunResult("copy", (check,))
    assert "  X..o" in repr(result) and "tilelab-tilemap" in result._repr_html_()
    assert RunResult.from_dict(result.to_dict()).outputs[0].tiles == m
