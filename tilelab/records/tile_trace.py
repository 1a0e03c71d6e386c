"""The record of :func:`tilelab.trace_tiles`: which elements each block read and wrote.

Frozen dataclasses with ``to_dict``/``from_dict`` (plain JSON types). Element sets are stored as
runs of flat (row-major) indices; the query methods return NumPy boolean masks of the tensor's
shape (NumPy is imported when they are called, never here). Its SVG/HTML is drawn by
:mod:`tilelab.render.trace`, through tilelab's one display dispatch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .display import DisplayedText
from .record import Record

__all__ = ["OutOfBounds", "TensorTrace", "TileTrace", "describe_elements"]

MAX_PIECES = 3  # places named in one sentence before "and N more elements"
MAX_SENTENCES = 4  # sentences of one kind per tensor before a summary sentence


@dataclass(frozen=True)
class OutOfBounds(Record):
    """One access outside its tensor, logged and not performed (a read gave 0, a write was
    dropped). ``index`` has one entry per dimension of the tensor, or a single flat element index
    when the kernel reached the tensor through a view of another shape."""

    tensor: str
    block: tuple[int, ...]
    index: tuple[int, ...]
    write: bool

    @property
    def verb(self) -> str:
        return "wrote" if self.write else "read"


@dataclass(frozen=True)
class TensorTrace(Record):
    """One tensor parameter: per block (in the order of :attr:`TileTrace.blocks`), the elements it
    read and wrote as ``(start, stop, start, stop, ...)`` runs of flat indices; ``atomic_writes``
    (empty when there were none) the part of each block's writes made by atomic updates
    (``T.atomic_add`` and kin). ``expected_written``: every element should be written (the kernel
    writes this tensor, or it was named an output)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    reads: tuple[tuple[int, ...], ...]
    writes: tuple[tuple[int, ...], ...]
    expected_written: bool = False
    atomic_writes: tuple[tuple[int, ...], ...] = ()

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def written(self) -> bool:
        return any(self.writes)

    @property
    def read(self) -> bool:
        return any(self.reads)

    def mask(self, runs: Sequence[int]) -> Any:
        import numpy as np

        flat: np.ndarray = np.zeros(self.numel, dtype=bool)
        for start, stop in zip(runs[0::2], runs[1::2]):
            flat[start:stop] = True
        return flat.reshape(self.shape)

    def write_counts(self, atomic_only: bool = False) -> Any:
        """How many blocks wrote each element (an int array of the tensor's shape); with
        ``atomic_only``, how many updated it atomically."""
        import numpy as np

        runs = self.atomic_writes if atomic_only else self.writes
        diff: np.ndarray = np.zeros(self.numel + 1, dtype=np.int64)
        starts = [r[i] for r in runs for i in range(0, len(r), 2)]
        stops = [r[i] for r in runs for i in range(1, len(r), 2)]
        np.add.at(diff, np.asarray(starts, dtype=np.int64), 1)
        np.add.at(diff, np.asarray(stops, dtype=np.int64), -1)
        return np.cumsum(diff[:-1]).reshape(self.shape)

    def contested(self) -> Any:
        """Elements two or more blocks wrote, not all of them by atomic updates: on a GPU those
        blocks race (atomic updates of one element by many blocks are how a sum is meant to be
        shared, and are not counted)."""
        counts = self.write_counts()
        if not self.atomic_writes:
            return counts >= 2
        return (counts >= 2) & (self.write_counts(atomic_only=True) < counts)

    def writer(self) -> Any:
        """Per element, the linear index of the last block that wrote it, -1 where none did."""
        import numpy as np

        out: np.ndarray = np.full(self.numel, -1, dtype=np.int64)
        for b, runs in enumerate(self.writes):
            for start, stop in zip(runs[0::2], runs[1::2]):
                out[start:stop] = b
        return out.reshape(self.shape)


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class TileTrace(DisplayedText, Record):
    """Which elements of every tensor parameter each block of one CPU launch read and wrote.

    ``grid`` is the launch grid as ``T.Kernel`` gave it (1 to 3 extents); a block is a tuple of
    that length, ``(bx, by)`` for a 2-D grid. ``accesses`` counts the loads and stores the kernel
    made of its tensors; ``out_of_bounds`` lists the attempts outside a tensor (at most a hundred
    thousand kept, ``out_of_bounds_total`` counts them all)."""

    kernel: str
    grid: tuple[int, ...]
    tensors: tuple[TensorTrace, ...]
    out_of_bounds: tuple[OutOfBounds, ...] = ()
    out_of_bounds_total: int = 0
    accesses: int = 0
    notes: tuple[str, ...] = ()

    # -- blocks --------------------------------------------------------------------------------

    @property
    def blocks(self) -> tuple[tuple[int, ...], ...]:
        """Every block of the launch grid, ``bx`` fastest (the order of the per-block runs)."""
        gx, gy, gz = (list(self.grid) + [1, 1, 1])[:3]
        rank = len(self.grid)
        return tuple((x, y, z)[:rank] for z in range(gz) for y in range(gy) for x in range(gx))

    def block_index(self, block: int | Sequence[int]) -> int:
        """The position of ``block`` in :attr:`blocks` (an int is ``bx`` for a 1-D grid)."""
        coords = [int(block)] if isinstance(block, int) else [int(b) for b in block]
        dims = list(self.grid)
        if len(coords) > len(dims) and all(c == 0 for c in coords[len(dims):]):
            coords = coords[:len(dims)]
        if len(coords) != len(dims) or any(not 0 <= c < g for c, g in zip(coords, dims)):
            raise ValueError(f"block {tuple(coords)} is not in {self.kernel}'s launch grid {tuple(dims)}: "
                             f"blocks run from {tuple(0 for _ in dims)} to {tuple(g - 1 for g in dims)}")
        index, scale = 0, 1
        for c, g in zip(coords, dims):
            index += c * scale
            scale *= g
        return index

    def tensor(self, name: str) -> TensorTrace:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"{self.kernel} has no tensor {name!r}; its tensors: {', '.join(t.name for t in self.tensors)}")

    # -- element masks ---------------------------------------------------------------------------

    def reads(self, name: str, block: int | Sequence[int]) -> Any:
        """The elements of ``name`` that ``block`` read (a NumPy boolean array of its shape)."""
        t = self.tensor(name)
        return t.mask(t.reads[self.block_index(block)])

    def writes(self, name: str, block: int | Sequence[int]) -> Any:
        """The elements of ``name`` that ``block`` wrote (a NumPy boolean array of its shape)."""
        t = self.tensor(name)
        return t.mask(t.writes[self.block_index(block)])

    def written_twice(self, name: str) -> Any:
        """Elements written by two or more blocks, not all by atomic updates: on a GPU those
        blocks race and the last one wins."""
        return self.tensor(name).contested()

    def never_written(self, name: str) -> Any:
        """Elements no block wrote."""
        return self.tensor(name).write_counts() == 0

    def writers(self, name: str, element: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """The blocks that wrote one element (by its index)."""
        t = self.tensor(name)
        flat = 0
        for i, s in zip(element, t.shape):
            flat = flat * s + int(i)
        return tuple(b for b, runs in zip(self.blocks, t.writes) if _in_runs(runs, flat))

    def out_of_bounds_of(self, name: str) -> tuple[OutOfBounds, ...]:
        return tuple(o for o in self.out_of_bounds if o.tensor == name)

    # -- what a student can act on ---------------------------------------------------------------

    def problems(self, name: str | None = None) -> list[str]:
        """Sentences that say where the kernel went wrong, for one tensor (or all of them):
        out-of-bounds attempts, elements written by two blocks, elements never written."""
        if name is None:
            return [p for t in self.tensors for p in self.problems(t.name)]
        import numpy as np

        t = self.tensor(name)
        out: list[str] = []
        out += _out_of_bounds_sentences(t, self.out_of_bounds_of(name))
        if not t.expected_written:
            return out
        counts = t.write_counts()
        twice = t.contested()
        if twice.any():
            groups: dict[str, list[tuple[int, ...]]] = {}
            for block, runs in zip(self.blocks, t.writes):
                if not runs:
                    continue
                overlap = t.mask(runs) & twice
                if overlap.any():
                    groups.setdefault(describe_elements(overlap), []).append(block)
            sentences = []
            group_blocks = list(groups.values())
            for where, blocks in groups.items():
                if len(blocks) == 1:  # the others overlap it in different places: named in their own
                    sentences.append(f"block {_block_text(blocks[0])} wrote {where} of {name} that another "
                                     "block also wrote")
                else:
                    sentences.append(f"blocks {_join_blocks(blocks)} all wrote {where} of {name}"
                                     if len(blocks) > 2 else
                                     f"blocks {_join_blocks(blocks)} both wrote {where} of {name}")
            if len(sentences) > MAX_SENTENCES:
                rest = {b for blocks in group_blocks[MAX_SENTENCES - 1:] for b in blocks}
                sentences = sentences[:MAX_SENTENCES - 1] + [
                    f"{len(sentences) - MAX_SENTENCES + 1} more groups of blocks wrote the same elements of "
                    f"{name} ({len(rest)} blocks)"]
            out += sentences
            out.append(f"{int(twice.sum())} elements of {name} were written by more than one block "
                       "(on a GPU those blocks race: the last to write wins)")
        never = counts == 0
        if never.all():
            out.append(f"no block wrote {name}")
        elif never.any():
            out.append(f"{describe_elements(never)} of {name} were never written "
                       f"({int(np.count_nonzero(never))} of {t.numel} elements)")
        return out

    # -- records ---------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> TileTrace:
        return cls.from_dict(json.loads(text))


# ------------------------------------------------------------------------------------------------
# Sentences
# ------------------------------------------------------------------------------------------------


def _in_runs(runs: Sequence[int], flat: int) -> bool:
    return any(start <= flat < stop for start, stop in zip(runs[0::2], runs[1::2]))


def _block_text(block: Sequence[int]) -> str:
    return f"({', '.join(str(b) for b in block)})" if len(block) != 1 else f"{block[0]}"


def _join_blocks(blocks: Sequence[Sequence[int]], limit: int = 4) -> str:
    texts = [_block_text(b) for b in blocks[:limit]]
    if len(blocks) > limit:
        texts.append(f"{len(blocks) - limit} more")
    return ", ".join(texts[:-1]) + " and " + texts[-1] if len(texts) > 1 else texts[0]


def _spans(values: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted distinct ints merged into inclusive (first, last) spans."""
    spans: list[tuple[int, int]] = []
    for v in sorted({int(x) for x in values}):
        if spans and v == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], v)
        else:
            spans.append((v, v))
    return spans


def _span_text(spans: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def _plural(word: str, spans: Sequence[tuple[int, int]]) -> str:
    single = len(spans) == 1 and spans[0][0] == spans[0][1]
    return word if single else word + "s"


def describe_elements(mask: Any) -> str:
    """A boolean mask's True elements in words a student can find in their indices:
    ``"rows 96-127"``, ``"rows 0-31, cols 64-71"``, ``"elements 128-255"``; leading dimensions of
    a tensor of rank 3 or more are named by index (``"[1, 0] rows 0-63"``). At most MAX_PIECES
    places, then ``"and N more elements"``."""
    import numpy as np

    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 0:
        return "the element" if bool(mask) else "no element"
    if mask.ndim == 1:
        spans = _spans(np.nonzero(mask)[0].tolist())
        shown = spans[:MAX_PIECES]
        text = f"{_plural('element', shown)} {_span_text(shown)}"
        rest = int(sum(b - a + 1 for a, b in spans[MAX_PIECES:]))
        return text + (f" and {rest} more elements" if rest else "")
    pieces: list[tuple[str, int]] = []  # (words, elements they cover)
    lead_shape = mask.shape[:-2]
    for lead in np.ndindex(*lead_shape) if lead_shape else [()]:
        plane = mask[lead] if lead else mask
        if not plane.any():
            continue
        prefix = f"[{', '.join(str(i) for i in lead)}] " if lead else ""
        for words, count in _plane_pieces(plane):
            pieces.append((prefix + words, count))
    more = sum(c for _, c in pieces[MAX_PIECES:])
    return "; ".join(w for w, _ in pieces[:MAX_PIECES]) + (f" and {more} more elements" if more else "")


def _plane_pieces(plane: Any) -> list[tuple[str, int]]:
    """A 2-D mask as (words, count) pieces: consecutive rows with the same columns merged."""
    import numpy as np

    rows, cols = plane.shape
    groups: list[tuple[int, int, tuple[tuple[int, int], ...]]] = []
    for r in np.nonzero(plane.any(axis=1))[0].tolist():
        spans = tuple(_spans(np.nonzero(plane[r])[0].tolist()))
        if groups and groups[-1][1] == r - 1 and groups[-1][2] == spans:
            groups[-1] = (groups[-1][0], r, spans)
        else:
            groups.append((r, r, spans))
    full_cols = ((0, cols - 1),)
    if len(groups) > 1 and len({g[2] for g in groups}) == 1 and groups[0][2] != full_cols:
        # the same columns in rows apart: name the columns and the rows once
        spans = groups[0][2]
        row_spans = [(a, b) for a, b, _ in groups]
        count = sum(b - a + 1 for a, b in row_spans) * sum(b - a + 1 for a, b in spans)
        if [(0, rows - 1)] == row_spans:
            return [(f"{_plural('col', spans)} {_span_text(spans)}", count)]
        words = f"{_plural('row', row_spans)} {_span_text(row_spans)}, {_plural('col', spans)} {_span_text(spans)}"
        return [(words, count)]
    pieces = []
    for first, last, spans in groups:
        rows_text = f"{_plural('row', [(first, last)])} {_span_text([(first, last)])}"
        count = (last - first + 1) * sum(b - a + 1 for a, b in spans)
        if spans == full_cols:
            pieces.append((rows_text, count))
        elif first == 0 and last == rows - 1:
            pieces.append((f"{_plural('col', spans)} {_span_text(spans)}", count))
        else:
            pieces.append((f"{rows_text}, {_plural('col', spans)} {_span_text(spans)}", count))
    return pieces


_DIM_WORDS = {1: ("element",), 2: ("row", "col")}


def _out_of_bounds_sentences(t: TensorTrace, attempts: Sequence[OutOfBounds]) -> list[str]:
    """Per block and direction: how many attempts, and where (the indices' ranges per dimension,
    the dimensions outside the tensor first)."""
    if not attempts:
        return []
    by_block: dict[tuple[tuple[int, ...], bool], list[OutOfBounds]] = {}
    for o in attempts:
        by_block.setdefault((o.block, o.write), []).append(o)
    sentences = []
    for (block, write), group in by_block.items():
        verb = "wrote" if write else "read"
        rank = len(group[0].index)
        flat = rank != len(t.shape)
        if flat:
            where = f"flat elements {_span_text(_spans(o.index[0] for o in group)[:MAX_PIECES])}"
            limit = f"{t.name} has {t.numel} elements"
        else:
            words = _DIM_WORDS.get(rank, tuple(f"dim {d}" for d in range(rank)))
            parts, limits = [], []
            for d in range(rank):
                spans = _spans(o.index[d] for o in group)
                outside = any(a < 0 or b >= t.shape[d] for a, b in spans)
                text = f"{_plural(words[d], spans) if rank <= 2 else words[d]} {_span_text(spans[:MAX_PIECES])}"
                if len(spans) > MAX_PIECES:
                    text += " ..."
                parts.append((not outside, text))
                if outside:
                    limits.append(f"{words[d]}s 0-{t.shape[d] - 1}" if rank <= 2 else
                                  f"{words[d]} 0-{t.shape[d] - 1}")
            where = ", ".join(text for _, text in sorted(parts, key=lambda p: p[0]))
            limit = f"{t.name} has {' and '.join(limits)}"
        distinct = len({o.index for o in group})
        times = f"{distinct} element{'s' if distinct != 1 else ''}"
        sentences.append(f"block {_block_text(block)} {verb} {t.name} out of bounds ({times}) at {where}; {limit}")
    if len(sentences) <= MAX_SENTENCES:
        return sentences
    keys = list(by_block)
    shown = {block for block, _ in keys[:MAX_SENTENCES - 1]}
    more = len({block for block, _ in keys[MAX_SENTENCES - 1:]} - shown)
    tail = (f"{more} more block{'s' if more != 1 else ''} reached outside {t.name}" if more else
            f"the blocks above reached outside {t.name} in {len(sentences) - MAX_SENTENCES + 1} more ways")
    return sentences[:MAX_SENTENCES - 1] + [tail]
