"""Every record class with ``to_dict``/``from_dict``, and an instance of each with every field set
to a value unlike its default (built from the field's type hint), for the round-trip tests."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import types
import typing
from typing import Any

RECORD_MODULES = ("tilelab.records.kernel", "tilelab.records.machine", "tilelab.records.launch",
                  "tilelab.records.timeline", "tilelab.records.profile", "tilelab.workshop._model",
                  "tilelab.workshop._grade", "tilelab.records.tile_trace", "tilelab._tilelang.doctor",
                  "tilelab.engine.corpus", "tilelab.instrument.rewrite.timeline")


def record_classes() -> list[type]:
    """The dataclasses defined in the records' modules that have both ``to_dict`` and ``from_dict``."""
    found = []
    for name in RECORD_MODULES:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ == name and dataclasses.is_dataclass(cls) and hasattr(cls, "to_dict")
                    and hasattr(cls, "from_dict")):
                found.append(cls)
    return found


def sample(tp: Any, seed: int = 3) -> Any:
    """A value of type ``tp``, not None and not empty, so a field the round trip drops shows."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return f"any{seed}"
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), seed)
    if origin is tuple:
        if args and args[-1] is Ellipsis:
            return (sample(args[0], seed), sample(args[0], seed + 1))
        return tuple(sample(a, seed + i) for i, a in enumerate(args))
    if origin is list:
        return [sample(args[0], seed)]
    if origin is dict:
        return {f"k{seed}": sample(args[1], seed)}
    if tp is bool:
        return True
    if tp is int:
        return seed + 7
    if tp is float:
        return seed + 0.25
    if tp is str:
        return f"s{seed}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp)[-1]
    if dataclasses.is_dataclass(tp):
        return build(tp, seed)
    raise TypeError(f"no sample for {tp!r}")


# Fields whose values follow a rule of their record (its to_dict writes some fields in one case
# only): the sample takes these values instead, so what is written is all there is.
CONSISTENT = {
    ("TmaDescriptor", "kind"): "im2col",  # the corners and pixel counts are written for im2col only
    ("Layout", "scope"): "shared",  # a shared layout writes its offsets, not threads and locals
    ("Layout", "threads"): (),
    ("Layout", "locals_"): (),
}


def build(cls: type, seed: int = 3) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        if not f.init or not f.compare:
            continue
        key = (cls.__name__, f.name)
        kwargs[f.name] = CONSISTENT[key] if key in CONSISTENT else sample(hints[f.name], seed + i)
    return cls(**kwargs)
