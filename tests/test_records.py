"""The records' JSON form: every record class round-trips (``from_dict(to_dict(x)) == x``, through
``json``), a field added with a type JSON cannot hold is named, and the generic converter writes
exactly the hand-written forms it replaced (the dicts below are written out by hand)."""

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Any

import pytest
from record_samples import build, record_classes

from tilelab import _records
from tilelab._records import MAPPING, Record, check_serialisable, custom

CLASSES = record_classes()


def test_the_records_are_found():
    names = {c.__name__ for c in CLASSES}
    assert {"KernelReport", "RunResult", "BenchResult", "SweepTable", "Timeline", "Profile", "Progress",
            "MachineCode", "SanitizerReport", "Exercise"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_record_round_trips_through_json(cls):
    record = build(cls)
    text = json.dumps(record.to_dict())
    assert cls.from_dict(json.loads(text)) == record


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_record_field_has_a_json_form(cls):
    check_serialisable(cls)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Inner(Record):
    n: int
    x: float = 0.0


@dataclasses.dataclass(frozen=True)
class Outer(Record):
    name: str
    inner: Inner
    inners: tuple[Inner, ...] = ()
    listed: list[Inner] = dataclasses.field(default_factory=list)
    keyed: dict[str, Inner] = dataclasses.field(default_factory=dict)
    maybe: Inner | None = None
    colour: Colour = Colour.RED
    pair: tuple[int, str] = (0, "")
    sizes: tuple[tuple[str, int], ...] = dataclasses.field(default=(), metadata=MAPPING)
    upper: str = dataclasses.field(default="", metadata=custom(str.upper, str.lower))
    count: int = 3

    _derived = ("total",)

    @property
    def total(self) -> int:
        return sum(i.n for i in self.inners)


def test_the_converter_writes_each_form_as_by_hand():
    record = Outer("o", Inner(1, 0.5), (Inner(2), Inner(3)), [Inner(4)], {"k": Inner(5)}, None, Colour.BLUE,
                   (7, "seven"), (("M", 64), ("N", 32)), "shout")
    expected = {"name": "o", "inner": {"n": 1, "x": 0.5}, "inners": [{"n": 2, "x": 0.0}, {"n": 3, "x": 0.0}],
                "listed": [{"n": 4, "x": 0.0}], "keyed": {"k": {"n": 5, "x": 0.0}}, "maybe": None,
                "colour": "blue", "pair": [7, "seven"], "sizes": {"M": 64, "N": 32}, "upper": "SHOUT",
                "count": 3, "total": 5}
    assert record.to_dict() == expected
    assert list(record.to_dict()) == list(expected)  # fields in order, derived properties last
    assert Outer.from_dict(json.loads(json.dumps(expected))) == record


def test_missing_keys_and_nulls_take_the_defaults_and_numbers_take_the_hinted_type():
    back = Outer.from_dict({"name": "o", "inner": {"n": 1.0, "x": 2}, "count": None, "extra": "ignored"})
    assert back == Outer("o", Inner(1, 2.0))
    assert type(back.inner.n) is int and type(back.inner.x) is float
    with pytest.raises(TypeError):
        Outer.from_dict({"name": "o"})  # a required field missing


def test_non_finite_floats_survive_the_round_trip():
    record = Inner(1, float("inf"))
    assert Inner.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    nan = Inner.from_dict(json.loads(json.dumps(Inner(1, float("nan")).to_dict())))
    assert nan.x != nan.x


def test_a_field_added_without_a_json_form_is_named():
    @dataclasses.dataclass(frozen=True)
    class Grown(Record):
        name: str
        callback: Callable[[int], int] | None = None

    with pytest.raises(TypeError, match=r"Grown\.callback"):
        check_serialisable(Grown)

    @dataclasses.dataclass(frozen=True)
    class Fixed(Record):
        name: str
        callback: Callable[[int], int] | None = dataclasses.field(default=None, metadata=custom(
            lambda f: None, lambda d: None))

    check_serialisable(Fixed)


def test_the_check_catches_what_json_cannot_hold():
    for bad in (set[int], bytes, dict[int, str], tuple[object, ...], Callable[[], Any]):
        assert not _records._writable(bad), bad
    for good in (int, str | None, tuple[tuple[str, int], ...], dict[str, list[float]], Colour, Inner, Any):
        assert _records._writable(good), good
