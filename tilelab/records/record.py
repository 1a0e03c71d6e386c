"""One dataclass <-> dict converter for tilelab's records, read from their fields and type hints.

A record (a frozen dataclass) that inherits :class:`Record` gets ``to_dict`` (plain JSON types: a
record becomes a dict, a tuple or list a list, an enum its value) and ``from_dict`` (the field's
type hint says what to rebuild: a tuple, a nested record, an enum, an int or a float as hinted).
A key missing from the dict, or ``null`` for a field that cannot be ``None``, takes the field's
default, so files written before a field was added still load. Fields declared ``compare=False``
(code, callbacks: not part of the record's value) are neither written nor read.

Two class-level knobs and one field-level escape hatch cover the forms records already had:

- ``_derived = ("passed", ...)``: properties written after the fields (for readers of the JSON
  that do not have tilelab), and ignored on load;
- ``field(metadata=MAPPING)``: a tuple of (key, value) pairs written as a JSON object;
- ``field(metadata=custom(dump, load))``: any other form, written by ``dump`` and read by ``load``.

:func:`check_serialisable` walks a record class's hints and names the first field that this module
cannot write, so a field added with a type JSON cannot hold fails a test instead of a user's save.
Only the standard library is imported here: this is the records layer.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MAPPING", "Record", "check_serialisable", "custom", "from_dict", "to_dict"]

_T = TypeVar("_T")
_R = TypeVar("_R", bound="Record")

_FORM = "tilelab.record_form"
MAPPING: dict[str, Any] = {_FORM: "mapping"}


def custom(dump: Callable[[Any], Any], load: Callable[[Any], Any]) -> dict[str, Any]:
    """Field metadata for a field with a form of its own: ``dump(value)`` is written, ``load(json)``
    is what ``from_dict`` gives the constructor."""
    return {_FORM: (dump, load)}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields that make a record's value: a field out of its equality (``compare=False``: code,
    a callback, a cached object) is neither written nor read."""
    return tuple(f for f in dataclasses.fields(cls) if f.init and f.compare)


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and hasattr(tp, "from_dict")


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------


def _dump(value: Any, tp: Any) -> Any:
    if value is None:
        return None
    if _is_union(tp):
        options = [a for a in _args(tp) if a is not type(None)]
        match = next((a for a in options if _accepts(a, value)), options[0])
        return _dump(value, match)
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        args = _args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            return [_dump(v, a) for v, a in zip(value, args)]
        item = args[0] if args else Any
        return [_dump(v, item) for v in value]
    if origin is dict:
        _, item = _args(tp) or (Any, Any)
        return {k: _dump(v, item) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if _is_record(type(value)):
        return value.to_dict()
    return value  # str, int, float, bool, and Any as it is


def _accepts(tp: Any, value: Any) -> bool:
    """Whether ``value`` is of the (union member) type ``tp``, as far as choosing a form goes."""
    origin = typing.get_origin(tp) or tp
    if origin is Any:
        return True
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(origin, type) and isinstance(value, origin)


def to_dict(record: Any) -> dict[str, Any]:
    """``record``'s fields as plain JSON types, in field order, then its ``_derived`` properties."""
    cls: Any = type(record)
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for f in _fields(cls):
        value = getattr(record, f.name)
        form = f.metadata.get(_FORM)
        if form == "mapping":
            pair = _pair_hint(hints[f.name])
            out[f.name] = None if value is None else {k: _dump(v, pair) for k, v in value}
        elif isinstance(form, tuple):
            out[f.name] = form[0](value)
        else:
            out[f.name] = _dump(value, hints[f.name])
    for name in getattr(cls, "_derived", ()):
        out[name] = getattr(record, name)
    return out


def _pair_hint(tp: Any) -> Any:
    """The value type of a ``tuple[tuple[str, V], ...]`` field written as a mapping."""
    for option in (_args(tp) if _is_union(tp) else (tp,)):
        args = _args(option)
        if args and _args(args[0]):
            return _args(args[0])[1]
    return Any


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------


def _load(value: Any, tp: Any) -> Any:
    if value is None or tp is Any:
        return value
    if _is_union(tp):
        options = [a for a in _args(tp) if a is not type(None)]
        if any(isinstance(value, a) for a in options if a in (int, str, bool)):
            return value  # ``int | str``: keep what was written
        return _load(value, options[0])
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = _args(tp)
        if args and args[-1] is not Ellipsis:
            return tuple(_load(v, a) for v, a in zip(value, args))
        item = args[0] if args else Any
        return tuple(_load(v, item) for v in value)
    if origin is list:
        item = _args(tp)[0] if _args(tp) else Any
        return [_load(v, item) for v in value]
    if origin is dict:
        _, item = _args(tp) or (Any, Any)
        return {k: _load(v, item) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if _is_record(tp):
        return tp.from_dict(value)
    if tp is bool:
        return bool(value)
    if tp is int:
        return int(value)
    if tp is float:
        return float(value)
    return value


def _optional(tp: Any) -> bool:
    return tp is Any or (_is_union(tp) and type(None) in _args(tp))


def from_dict(cls: type[_T], data: dict[str, Any]) -> _T:
    """The record of class ``cls`` that ``data`` (written by :func:`to_dict`) describes. Keys that
    are not fields (derived properties, keys of older versions) are ignored; a field without a default
    that is missing raises ``KeyError`` naming it."""
    hints = _hints(typing.cast(Any, cls))  # a class is hashable; mypy reads type[_T] as not
    kwargs: dict[str, Any] = {}
    for f in _fields(cls):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if f.name not in data:
            if has_default:
                continue
            raise KeyError(f.name)  # as data[name] would: readers of files say "missing field 'name'"
        value, tp = data[f.name], hints[f.name]
        if value is None and not _optional(tp) and has_default:
            continue
        form = f.metadata.get(_FORM)
        if form == "mapping":
            pair = _pair_hint(tp)
            kwargs[f.name] = None if value is None else tuple((k, _load(v, pair)) for k, v in value.items())
        elif isinstance(form, tuple):
            kwargs[f.name] = form[1](value)
        else:
            kwargs[f.name] = _load(value, tp)
    return cls(**kwargs)


class Record:
    """``to_dict``/``from_dict`` from the dataclass's fields (see the module's docstring)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[_R], d: dict[str, Any]) -> _R:
        return from_dict(cls, d)


# ---------------------------------------------------------------------------------------------
# checking
# ---------------------------------------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def _writable(tp: Any) -> bool:
    if tp is Any or tp in _SCALARS:
        return True
    if _is_union(tp):
        return all(_writable(a) for a in _args(tp))
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        return all(a is Ellipsis or _writable(a) for a in _args(tp))
    if origin is dict:
        key, item = _args(tp) or (str, Any)
        return key is str and _writable(item)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return True
    return _is_record(tp)


def check_serialisable(cls: type) -> None:
    """Raise ``TypeError`` naming the first field of record class ``cls`` whose type the helper
    cannot write as JSON and that has no form of its own (``metadata=custom(...)``)."""
    hints = _hints(cls)
    for f in _fields(cls):
        if isinstance(f.metadata.get(_FORM), tuple):
            continue  # a form of its own
        if not _writable(hints[f.name]):
            raise TypeError(f"{cls.__name__}.{f.name}: {hints[f.name]!r} cannot be written as JSON; give it a "
                            f"JSON form with field(metadata=custom(dump, load)) or use a JSON type")
