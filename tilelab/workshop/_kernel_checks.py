"""Grading a student's kernel on the CPU (TileLang's target ``c``), for the lessons' checkers.

:func:`build` calls the student's kernel function and :func:`launch` runs what it returned on the
CPU by tilelab's own CPU path (``tilelab.run(kernel, target="c")``: optionally without TileLang's
automatic bounds guards, so that the student's own guards are what keeps the kernel in bounds). Its
outputs are poisoned first, so every element the kernel leaves unwritten keeps the poison's bits
(told apart from a NaN the kernel computed), and every access outside a buffer (before its start or
past its end, an output's or an input's) is recorded with its indices and block instead of being
performed. :func:`problems` turns what came back into sentences that say *where* (rows, columns,
blocks), never what the right code is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._core import Wrong


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
    """One CPU launch: each output as the kernel left it, which of its elements the kernel left
    unwritten (they kept the launch's poison), and the accesses it attempted outside a buffer (none
    was performed): the first :data:`tilelab.launch._emulate.MAX_OOB` with their indices and block
    (``outside``), how many there were in all (``outside_total``)."""

    outputs: dict[str, Any]
    unwritten: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> bool mask
    outside: tuple[Any, ...] = ()  # tilelab.launch._emulate.OutOfBoundsAccess
    outside_total: int = 0


def _tensor_names(func: Any) -> list[str]:
    """The names of ``func``'s tensor parameters, in order."""
    from .. import _tilelang

    return [a.name for a in _tilelang.arguments(_tilelang.resolve_kernel(func), None)
            if a.kind in ("tensor", "strided_tensor")]


def launch(func: Any, inputs: dict[str, Any], outputs: dict[str, tuple[tuple[int, ...], Any]], *,
           guards: bool = True, name: str | None = None) -> Launched:
    """Run the student's kernel ``func`` once on the CPU, by ``tilelab.run(func, target="c")`` (in
    tilelab's CPU worker, or in this process where it stands for one: a kernel check's own);
    ``guards=False`` turns off TileLang's own bounds checks on global loads and stores (pass config
    ``tl.disable_safe_memory_legalize``). ``inputs`` maps names to CPU tensors, ``outputs`` names to
    (shape, dtype) of a float type; the kernel takes the inputs then the outputs, in these dicts'
    order (the outputs are its last tensor parameters, whatever the student named them)."""
    import torch

    import tilelab
    from tilelab.launch import KernelLaunchError
    from tilelab.launch._inputs import unwritten_mask

    from .. import _tilelang

    outs = {n: torch.empty(tuple(shape), dtype=dtype) for n, (shape, dtype) in outputs.items()}
    configs = {} if guards else {"tl.disable_safe_memory_legalize": True}
    label = name or getattr(func, "__name__", None)
    outside: tuple[Any, ...] = ()
    total = 0
    with _tilelang.tilelang_errors(label, stage="compilation"):  # TileLang's log of a failed build goes into the error
        names = _tensor_names(func)[-len(outs):] if outs else []
        try:
            tilelab.run(func, *inputs.values(), *outs.values(), target="c", outputs=names, pass_configs=configs)
        except KernelLaunchError as err:  # the outputs given still hold what the kernel wrote inside them
            if err.kind != "illegal_address":
                raise
            outside = tuple(getattr(err, "out_of_bounds", ()))
            total = int(getattr(err, "out_of_bounds_total", len(outside)))
    return Launched(outs, {n: unwritten_mask(t) for n, t in outs.items()}, outside, total)


def _ranges(indices: Sequence[int]) -> str:
    """'96-99, 128' from sorted integers."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive integers
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    parts = [f"{first}" if first == last else f"{first}{' to ' if first < 0 else '-'}{last}" for first, last in runs]
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


def _blocks_of(accesses: Sequence[Any], more: bool) -> str:
    """The blocks (bx, by) of ``accesses``; ``more``: they are only the first of them."""
    found = sorted({tuple(o.block[:2]) for o in accesses})
    return ", ".join(str(b) for b in found[:4]) + (", ..." if len(found) > 4 or more else "")


def _outside(name: str, launched: Launched, out: Any) -> list[str]:
    """Sentences about the accesses outside a buffer: writes before the start or past the end of
    output ``name`` (where its rows would be), and any other buffer's reads and writes."""
    found = []
    more = launched.outside_total > len(launched.outside)  # only the first were kept with their indices

    def count(group: Sequence[Any]) -> str:
        n = len({o.index for o in group})
        return f"{'at least ' if more else ''}{n} element{'s' if n != 1 or more else ''}"

    def place(group: Sequence[Any]) -> str:
        if out.dim() != 2 or any(len(o.index) != 2 for o in group):
            return ""
        rows, cols = sorted({o.index[0] for o in group}), sorted({o.index[1] for o in group})
        return f", at rows {_ranges(rows)}, columns {_ranges(cols)}"

    writes = [o for o in launched.outside if o.buffer == name and o.kind == "write"]
    below = [o for o in writes if any(i < 0 for i in o.index)]
    past = [o for o in writes if o not in below]
    if below:
        found.append(f"it wrote {count(below)} before the start of {name}{place(below)}: an index went "
                     "below zero")
    if past:
        found.append(f"it wrote {count(past)} past the end of {name}{place(past)}: a store ran out of "
                     "bounds")
    others: dict[tuple[str, str], list[Any]] = {}
    for o in launched.outside:
        if not (o.buffer == name and o.kind == "write") and o.kind in ("read", "write"):
            others.setdefault((o.kind, o.buffer), []).append(o)
    for (kind, buffer), group in others.items():
        side = "below its start" if any(i < 0 for o in group for i in o.index) else "beyond its end"
        found.append(f"it {'read' if kind == 'read' else 'wrote'} {buffer} out of bounds ({count(group)} "
                     f"{side}, in blocks (bx, by) = {_blocks_of(group, more)}): an index ran outside {buffer}")
    if launched.outside_total and not launched.outside:
        found.append(f"it went out of bounds ({launched.outside_total} accesses outside a buffer)")
    return found


def problems(name: str, launched: Launched, expected: Any, *, tile: tuple[int, ...] | None = None,
             tolerance: float = 1e-4) -> list[str]:
    """What is wrong with output ``name``, in sentences that say where; empty when it is right."""
    import torch

    out = launched.outputs[name]
    found = _outside(name, launched, out)
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
