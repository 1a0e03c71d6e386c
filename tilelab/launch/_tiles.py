"""Where a wrong output is wrong: a map of the output by tile of the kernel's block shape.

Most wrong kernels are wrong on a pattern of tiles (the edge tiles of a size that is not a
multiple of the block, one stage of a pipeline, one warp's share), and a map of tiles shows it at
a glance. :func:`element_masks` decides, per element, written or not and right or not;
:func:`tile_map` folds the masks into a :class:`~tilelab.records.launch.TileMap`.

The tile is the output's share of one thread block: for an output of shape (..., rows, cols) and
a grid (gx, gy, gz), ``(ceil(rows' / (gy * gz)), ceil(cols / gx))`` where rows' folds the
leading dimensions into the rows (TileLang's convention: ``bx`` walks the columns, ``by`` the rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..records.launch import TileMap

MAX_SIDE = 64  # tiles per side at most; larger maps merge neighbouring tiles


def tile_from_grid(shape: Sequence[int], grid: Sequence[int]) -> tuple[int, int]:
    """The output's tile (rows, cols) for a launch grid, per the module doc."""
    rows, cols = _as_2d(shape)
    gx, gy, gz = (list(int(g) for g in grid) + [1, 1, 1])[:3]
    if len(shape) <= 1:
        return 1, max(1, math.ceil(cols / max(1, gx * gy * gz)))
    return max(1, math.ceil(rows / max(1, gy * gz))), max(1, math.ceil(cols / max(1, gx)))


def _as_2d(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return math.prod(int(s) for s in shape[:-1]), int(shape[-1])


def element_masks(out: Any, expected: Any | None, tolerance: float | None, unwritten: Any | None
                  ) -> tuple[Any, Any]:
    """(unwritten, wrong) boolean tensors of ``out``'s shape.

    An element the kernel wrote is wrong when it is NaN/inf where the reference is finite, or
    when ``|out - ref| > tolerance * (|ref| + rms(ref))`` (if every element were within that
    bound, the relative error norm would be within about twice the tolerance). Without a
    reference only NaN/inf count as wrong."""
    import torch

    got = out.detach().to(torch.float64)
    unwritten = unwritten if unwritten is not None else torch.zeros(got.shape, dtype=torch.bool, device=got.device)
    if got.is_floating_point():
        wrong = ~torch.isfinite(got)
    else:
        wrong = torch.zeros(got.shape, dtype=torch.bool, device=got.device)
    if expected is not None:
        ref = torch.as_tensor(expected, device=got.device).to(torch.float64).expand(got.shape)
        wrong &= torch.isfinite(ref)
        finite = torch.nan_to_num(ref, posinf=0.0, neginf=0.0)
        rms = float(torch.sqrt(torch.mean(finite**2)).item()) if ref.numel() else 0.0
        tol = tolerance if tolerance is not None else 0.0
        diff = torch.nan_to_num((got - ref).abs(), nan=float("inf"))
        wrong |= diff > tol * (ref.abs() + rms)
    return unwritten, wrong & ~unwritten


def tile_map(name: str, unwritten: Any, wrong: Any, tile: Sequence[int], *, source: str = "") -> TileMap:
    """Fold per-element masks into tiles of ``tile`` = (rows, cols) elements (merged so that the
    map has at most MAX_SIDE tiles per side; ``TileMap.tile`` says the final size)."""
    import torch

    shape = tuple(int(s) for s in unwritten.shape)
    rows, cols = _as_2d(shape)
    tr, tc = (max(1, int(tile[0])), max(1, int(tile[1]))) if len(tile) == 2 else (1, max(1, int(tile[0])))
    merged = False
    while math.ceil(rows / tr) > MAX_SIDE:
        tr *= 2
        merged = True
    while math.ceil(cols / tc) > MAX_SIDE:
        tc *= 2
        merged = True
    nr, nc = math.ceil(rows / tr), math.ceil(cols / tc)

    def fold(mask: Any, pad_value: bool) -> tuple[Any, Any]:
        m = mask.reshape(rows, cols).to(torch.bool)
        padded = torch.full((nr * tr, nc * tc), pad_value, dtype=torch.bool, device=m.device)
        padded[:rows, :cols] = m
        blocks = padded.reshape(nr, tr, nc, tc).permute(0, 2, 1, 3).reshape(nr, nc, tr * tc)
        return blocks.any(dim=2).cpu(), blocks.all(dim=2).cpu()

    any_unwritten, _ = fold(unwritten, False)
    _, all_unwritten = fold(unwritten, True)
    any_wrong, _ = fold(wrong, False)
    cells = []
    for i in range(nr):
        row = []
        for j in range(nc):
            if bool(all_unwritten[i, j]):
                row.append("unwritten")
            elif bool(any_wrong[i, j]):
                row.append("wrong")
            elif bool(any_unwritten[i, j]):
                row.append("partial")
            else:
                row.append("right")
        cells.append(tuple(row))
    return TileMap(output=name, shape=shape, tile=(tr, tc), cells=tuple(cells), merged=merged, source=source)
