"""Grading a student's kernel on the CPU (TileLang's target ``c``), for the lessons' checkers.

:func:`build` calls the student's kernel function, :func:`compile_c` compiles what it returned for
the CPU (optionally without TileLang's automatic bounds guards, so that the student's own guards
are what keeps the kernel in bounds), and :func:`launch` runs it on tensors that live in the middle
of a larger, poisoned allocation: every element the kernel leaves unwritten keeps its poison (NaN),
and every element it writes before the start or past the end of an output lands in a poisoned
guard region there, where it is seen instead of corrupting memory (inputs are surrounded by a huge
value, so a read out of bounds shows in the results). An element still NaN after the launch is
told apart from a NaN the kernel computed by a second launch with another poison: "never written"
is said only of an element that kept both poisons. :func:`problems` turns what came back into
sentences that say *where* (rows, columns, blocks), never what the right code is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._core import Wrong

POISON = float("nan")
SECOND_POISON = -3.25e33  # the second launch's poison: finite, and no sum of the lessons' inputs is near it
SPILL_FILL = 1.0e30  # what an input holds around it: a read out of bounds brings it in


def build(factory: Any, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)``, the student's kernel function (or kernel factory) called with
    the sizes the check grades at, checked to be a function and to return a kernel; every lesson's
    checker makes the student's kernel here. ``name`` is the function's name in the notebook."""
    label = name or getattr(factory, "__name__", "your function")
    if not callable(factory):
        raise Wrong(f"answer with {name or 'your kernel function'} (a def that returns the T.prim_func), "
                    f"got {type(factory).__name__}")
    from .. import _tilelang

    with _tilelang.tilelang_errors(label):  # TileLang's log of a failed build goes into the error
        func = factory(*args, **kwargs)
    if func is None:
        raise Wrong(f"{label}(...) returned None: end it with `return` and the T.prim_func it defines")
    return func


def compile_c(func: Any, *, guards: bool = True, name: str | None = None) -> Any:
    """The kernel compiled for the CPU; ``guards=False`` turns off TileLang's own bounds checks on
    global loads and stores (pass config ``tl.disable_safe_memory_legalize``)."""
    import tilelang

    from .. import _tilelang

    configs = {} if guards else {"tl.disable_safe_memory_legalize": True}
    with _tilelang.tilelang_errors(name or getattr(func, "__name__", None), stage="compilation"):
        return tilelang.compile(func, target="c", pass_configs=configs)


def tilelang_warnings(func: Any) -> list[str]:
    """TileLang's own warnings about ``func`` (a buffer "read before initialization"...): it is
    lowered for the CPU without the kernel cache (which would answer without lowering again), with
    what TileLang writes to standard error collected."""
    import os
    import sys
    import tempfile

    import tilelang

    from ._isolate import warnings_in

    with tempfile.TemporaryFile() as caught:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):
            return []
        try:
            os.dup2(caught.fileno(), 2)
            try:
                tilelang.lower(func, target="c")
            except Exception:  # the run reports what is wrong; this only lets TileLang speak
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        return warnings_in(caught.read().decode(errors="replace"))


@dataclasses.dataclass(frozen=True)
class Launched:
    """One CPU launch: each output as the kernel left it, what it wrote past each output's end and
    before its start, and which elements it left unwritten (kept both poisons)."""

    outputs: dict[str, Any]
    spills: dict[str, Any]  # name -> the flat guard after that output (poisoned before the launch)
    before: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> the flat guard before it
    unwritten: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> bool mask (both poisons kept)


def _padded(shape: Sequence[int], dtype: Any, fill: float, values: Any = None) -> tuple[Any, Any, Any]:
    """A tensor of ``shape`` in the middle of an allocation filled with ``fill``: (view, guard
    after, guard before); each guard is as large as the tensor (a whole tile row of reach)."""
    import torch

    n = 1
    for s in shape:
        n *= int(s)
    pad = n + 64
    storage = torch.full((2 * pad + n,), fill, dtype=dtype)
    view = storage[pad:pad + n].view(*shape)
    if values is not None:
        view.copy_(values)
    return view, storage[pad + n:], storage[:pad]


def _once(kernel: Any, inputs: dict[str, Any], outputs: dict[str, tuple[tuple[int, ...], Any]],
          poison: float) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    args, outs, spills, before = [], {}, {}, {}
    for value in inputs.values():
        view, _, _ = _padded(tuple(value.shape), value.dtype, SPILL_FILL, value)
        args.append(view)
    for name, (shape, dtype) in outputs.items():
        view, spill, head = _padded(shape, dtype, poison)
        args.append(view)
        outs[name], spills[name], before[name] = view, spill, head
    kernel(*args)
    return outs, spills, before


def launch(kernel: Any, inputs: dict[str, Any], outputs: dict[str, tuple[tuple[int, ...], Any]]) -> Launched:
    """Run ``kernel`` on the CPU. ``inputs`` maps names to CPU tensors, ``outputs`` names to
    (shape, dtype); the kernel takes the inputs then the outputs, in these dicts' order. Launched
    again with a second poison where the first left NaN, to tell unwritten elements from computed
    NaN."""
    import torch

    outs, spills, before = _once(kernel, inputs, outputs, POISON)
    unwritten = {name: torch.isnan(out) for name, out in outs.items()}
    if any(bool(mask.any()) for mask in unwritten.values()):
        again, _, _ = _once(kernel, inputs, outputs, SECOND_POISON)
        for name, mask in unwritten.items():
            unwritten[name] = mask & (again[name] == SECOND_POISON)
    return Launched(outs, spills, before, unwritten)


def _ranges(indices: Sequence[int]) -> str:
    """'96-99, 128' from sorted integers."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive integers
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    parts = [f"{first}" if first == last else f"{first}-{last}" for first, last in runs]
    return ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")


def where(mask: Any) -> str:
    """Where a boolean mask of a 1-D or 2-D tensor is set, as rows and columns."""
    if mask.dim() == 1:
        return "elements " + _ranges(mask.nonzero().flatten().tolist())
    # consecutive rows with the same columns set form one band: an L-shaped edge is two bands
    bands: list[tuple[list[int], list[int]]] = []
    for row in mask.any(dim=1).nonzero().flatten().tolist():
        cols = mask[row].nonzero().flatten().tolist()
        if bands and bands[-1][1] == cols and bands[-1][0][-1] == row - 1:
            bands[-1][0].append(row)
        else:
            bands.append(([row], cols))
    if len(bands) > 3:  # scattered: the bounding box says where to look
        rows = mask.any(dim=1).nonzero().flatten().tolist()
        cols = mask.any(dim=0).nonzero().flatten().tolist()
        return f"elements scattered over rows {_ranges(rows)}, columns {_ranges(cols)}"
    parts = []
    for rows, cols in bands:
        what = "every column" if len(cols) == mask.shape[1] else f"columns {_ranges(cols)}"
        parts.append(f"rows {_ranges(rows)} ({what})")
    return "; ".join(parts)


def blocks(mask: Any, tile: tuple[int, ...]) -> str:
    """The blocks (bx, by) whose tile of ``tile`` = (rows, cols) holds a set element of ``mask``."""
    if mask.dim() == 1:
        found = sorted({i // tile[0] for i in mask.nonzero().flatten().tolist()})
        return "blocks " + ", ".join(f"bx={b}" for b in found[:6]) + (", ..." if len(found) > 6 else "")
    found = sorted({(j // tile[1], i // tile[0]) for i, j in mask.nonzero().tolist()})
    return "blocks (bx, by) = " + ", ".join(str(b) for b in found[:6]) + (", ..." if len(found) > 6 else "")


def problems(name: str, launched: Launched, expected: Any, *, tile: tuple[int, ...] | None = None,
             tolerance: float = 1e-4) -> list[str]:
    """What is wrong with output ``name``, in sentences that say where; empty when it is right."""
    import torch

    out, spill = launched.outputs[name], launched.spills[name]
    found = []
    head = launched.before.get(name)
    written_before = 0 if head is None else int((~torch.isnan(head)).sum())
    if written_before and head is not None:
        if out.dim() == 2:
            offsets = (~torch.isnan(head)).nonzero().flatten().tolist()
            rows = sorted({(i - head.numel()) // out.shape[1] for i in offsets})
            found.append(f"it wrote {written_before} elements before the start of {name}, where rows "
                         f"{_ranges(rows)} would be: an index went below zero")
        else:
            found.append(f"it wrote {written_before} elements before the start of {name}: an index went below zero")
    written_past = int((~torch.isnan(spill)).sum())
    if written_past:
        if out.dim() == 2:
            written = (~torch.isnan(spill)).nonzero().flatten().tolist()
            rows = sorted({out.shape[0] + i // out.shape[1] for i in written})
            found.append(f"it wrote {written_past} elements past the end of {name}, where rows {_ranges(rows)} "
                         f"would be if {name} had them: a store ran out of bounds")
        else:
            found.append(f"it wrote {written_past} elements past the end of {name}: a store ran out of bounds")
    never = launched.unwritten.get(name)
    if never is None:
        never = torch.isnan(out)
    unwritten = never & ~torch.isnan(expected)
    if unwritten.any():
        sentence = f"{name} {where(unwritten)} were never written"
        if tile:
            sentence += f" (the tiles of {blocks(unwritten, tile)})"
        found.append(sentence)
    computed = ~torch.isfinite(out) & ~never & torch.isfinite(expected)
    if computed.any():
        found.append(f"{name} {where(computed)} hold NaN or infinity that your kernel computed "
                     f"({int(computed.sum())} elements): a value overflowed (an exp of a large number?) "
                     "or a division by zero")
    close = torch.isclose(out.double(), expected.double(), rtol=tolerance, atol=tolerance)
    wrong = ~close & ~unwritten & ~computed & ~(torch.isnan(out) & torch.isnan(expected))
    if wrong.any():
        sentence = f"{name} {where(wrong)} hold wrong values ({int(wrong.sum())} elements)"
        if tile:
            sentence += f", in the tiles of {blocks(wrong, tile)}"
        found.append(sentence)
    return found


def traced(func: Any, args: Sequence[Any], name: str, *, guards: bool = True) -> list[str]:
    """``tilelab.trace_tiles``' sentences about ``name`` (which block wrote where, twice, never, or
    out of bounds), at most four; empty where the trace cannot be taken."""
    try:
        import tilelab

        configs = None if guards else {"tl.disable_safe_memory_legalize": True}
        return list(tilelab.trace_tiles(func, *args, pass_configs=configs).problems(name))[:4]
    except Exception:
        return []


def explained(found: list[str], func: Any, args: Sequence[Any], name: str, *, guards: bool = True) -> list[str]:
    """The problems found, with the trace's account of which block did what in place of the
    launch's own sentences about unwritten and out-of-bounds elements where the trace has one."""
    if not found:
        return found
    trace = traced(func, args, name, guards=guards)
    if not trace:
        return found
    kept = [f for f in found if "never written" not in f and "past the end" not in f and "before the start" not in f]
    return trace + kept


def grade(problems_found: list[str], *, size: str) -> None:
    """Fail with every problem found at ``size`` (e.g. "M=100, N=70")."""
    if problems_found:
        raise Wrong(f"at {size}: " + "; ".join(problems_found))
