"""Checking a launch's outputs, on the GPU and the CPU alike: the poisoned launches (0xFF bytes in
every output first, so elements the kernel never wrote are found; a second launch with another
pattern for dtypes where 0xFF is a value), one OutputCheck per output at its tolerance, and the
map of tiles of an output that failed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from . import _inputs


def poisoned_launches(launcher: Callable[..., Any], prepared: Any, args: list[Any], bound: dict[str, int],
                      notes: list[str]) -> tuple[list[Any], list[bool], list[Any]]:
    """(outputs, whether each was poisoned, its second-launch copy or None): one launch with
    0xFF bytes, and a second with another pattern for outputs whose dtype has 0xFF as a value."""
    outs, poisoned = launcher(prepared, args, bound, _inputs.POISON)
    seconds: list[Any] = [None] * len(outs)
    twice = [i for i, p in enumerate(prepared.outputs) if _inputs.poison_is_value(p.dtype) and poisoned[i]]
    if twice:
        # 0xFF bytes are a value of these dtypes: launch again with another pattern, keeping the
        # first launch's outputs (passed-at-launch ones are re-poisoned, so copy them first).
        outs = [o.clone() if p.passed_at_launch else o for o, p in zip(outs, prepared.outputs)]
        outs2, poisoned2 = launcher(prepared, args, bound, _inputs.SECOND_POISON)
        for i in twice:
            if poisoned2[i]:
                seconds[i] = outs2[i]
            else:
                poisoned[i] = False
        notes.append(f"launched twice ({', '.join(prepared.outputs[i].name for i in twice)} poisoned with "
                     f"0x{_inputs.POISON:02X}, then 0x{_inputs.SECOND_POISON:02X} bytes, since 0xFF is a valid "
                     "value of their dtype)")
    return outs, poisoned, seconds


def check_outputs(prepared: Any, bound: dict[str, int], outs: list[Any], expected: list[Any] | None,
                  poisoned: list[bool], seconds: list[Any], notes: list[str], *, tolerance: float | None,
                  worst: int, tile: Sequence[int] | None, unpoisoned: str) -> list[Any]:
    """One OutputCheck per output (with a tile map where it fails), at each output's tolerance.
    ``unpoisoned``: why an output that was not poisoned could not be (the note says it)."""
    input_dtypes = [p.dtype for p in prepared.params if p.kind == "tensor" and not p.is_output]
    mnk = _inputs.gemm_shape(*_inputs.param_shapes(prepared.params, bound))
    checks = []
    for i, (p, out) in enumerate(zip(prepared.outputs, outs)):
        if not poisoned[i]:
            notes.append(f"{p.name} {unpoisoned}: unwritten elements were not checked")
        tol = tolerance if tolerance is not None else _inputs.tolerance_for(
            p.dtype, input_dtypes, reduction=mnk[2] if mnk else 1)
        want = expected[i] if expected is not None else None
        check = _inputs.compare(p.name, out, want, tolerance=tol, poisoned=poisoned[i], worst=worst,
                                second=seconds[i])
        if not check.passed:
            check = dataclasses.replace(check, tiles=tile_map(prepared, check, out, want, poisoned[i], seconds[i],
                                                               bound, tile))
        checks.append(check)
    return checks


def tile_map(prepared: Any, check: Any, out: Any, expected: Any, poisoned: bool, second: Any,
              bound: dict[str, int], tile: Sequence[int] | None) -> Any:
    """The failed output's map of tiles (None when it cannot be drawn); best effort."""
    from . import _tiles

    try:
        unwritten = None
        if poisoned:
            if second is not None:
                unwritten = _inputs.unwritten_in_both(out, second)
            else:
                unwritten = _inputs.unwritten_mask(out)
                if expected is not None and _inputs.poison_is_value(check.dtype):
                    unwritten &= ~_inputs.unwritten_mask(expected.to(out.dtype))
        unwritten, wrong = _tiles.element_masks(out, expected, check.tolerance, unwritten)
        source = f"tile={tuple(tile)}" if tile else ""
        if not tile:
            grid = launch_grid(prepared, bound)
            if grid is None:
                return None
            tile = _tiles.tile_from_grid(check.shape, grid)
            source = f"the launch grid {tuple(grid)}"
        return _tiles.tile_map(check.name, unwritten, wrong, tuple(tile), source=source)
    except Exception:
        return None


def launch_grid(prepared: Any, bound: dict[str, int]) -> tuple[int, int, int] | None:
    """The kernel's grid as its ``T.Kernel`` wrote it, sizes substituted; None when unknown."""
    from .. import _tilelang

    try:
        dims = _tilelang.launch_dims(prepared.compiled)
        if dims is None:
            return None
        return tuple(int(_inputs.eval_dim(d, bound)) for d in dims[0])  # type: ignore[return-value]
    except Exception:
        return None


def snapshot_inputs(prepared: Any, args: list[Any], notes: list[str]) -> list[tuple[str, Any, Any]]:
    """(name, the tensor passed, a copy of it) for every input tensor, taken before the launch so
    that :func:`input_states` can tell whether the kernel wrote into an input. An input too large
    to copy is left out, with a note."""
    launch = [p for p in prepared.params if p.passed_at_launch]
    kept = []
    for a, p in zip(args, launch):
        if p.is_output or p.kind not in ("tensor", "strided_tensor") or not hasattr(a, "clone"):
            continue
        try:
            kept.append((p.name, a, a.detach().clone()))
        except Exception as err:  # out of memory for a copy: the check is skipped, never the launch
            notes.append(f"{p.name} was not copied before the launch ({type(err).__name__}), so whether the kernel "
                         "wrote into it was not checked")
    return kept


def input_states(snapshot: list[tuple[str, Any, Any]]) -> tuple[Any, ...]:
    """Each input after the launch: the elements that differ from the copy taken before it (NaN
    compared equal to NaN), and the NaN/inf the input held."""
    import torch

    from ..records.launch import InputState

    states = []
    for name, after, before in snapshot:
        # compared bit for bit (every dtype, fp8 included; a NaN the kernel left alone is no change)
        size = before.element_size()
        a = after.detach().contiguous().view(torch.uint8).reshape(*before.shape, size)
        b = before.contiguous().view(torch.uint8).reshape(*before.shape, size)
        changed_mask = (a != b).any(dim=-1)
        nonfinite = _inputs.count_nonfinite(before)
        changed = int(torch.count_nonzero(changed_mask).item())
        first = tuple(int(i) for i in torch.nonzero(changed_mask)[0].tolist()) if changed else None
        states.append(InputState(name, changed, first, nonfinite))
    return tuple(states)


def inputs_after_launch(snapshot: list[tuple[str, Any, Any]], checks: Sequence[Any],
                        notes: list[str], states: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """:func:`input_states` (or ``states`` made otherwise), with a note on where NaN/inf written into
    an output can come from: inputs that held some before the launch, or none (then the kernel made
    them)."""
    states = input_states(snapshot) if states is None else states
    bad_outputs = [c.name for c in checks if c.nonfinite]
    if bad_outputs and states:
        holding = [s for s in states if s.nonfinite]
        if holding:
            notes.append(f"NaN/inf in {', '.join(bad_outputs)}: the inputs already held some ("
                         + ", ".join(f"{s.name}: {s.nonfinite}" for s in holding) + ")")
        else:
            notes.append(f"NaN/inf in {', '.join(bad_outputs)}: the inputs held none, so the kernel produced them")
    return states
