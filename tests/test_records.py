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

from tilelab.records import record as _records
from tilelab.records.record import MAPPING, Record, check_serialisable, custom

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
    with pytest.raises(KeyError, match="inner"):
        Outer.from_dict({"name": "o"})  # a required field missing is named


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


# ---------------------------------------------------------------------------------------------
# The JSON forms saved files, the report cache and the worker's messages depend on, written out by
# hand: a record's dict must stay what readers of it (and older tilelab versions) expect.
# ---------------------------------------------------------------------------------------------


def test_a_run_result_is_written_with_its_sizes_as_an_object_and_its_verdicts():
    from tilelab.launch import InputState, OutputCheck, RunResult, WorstElement

    run = RunResult("copy", (OutputCheck("C", "float16", (2, 2), rel_error=1e-4, tolerance=1e-2,
                                         worst=(WorstElement("C", (0, 1), 1.0, 1.5, 0.5),)),),
                    sizes=(("M", 2),), reference="ref", notes=("n",),
                    inputs=(InputState("A", changed=1, first_changed=(0, 1)),))
    written = {"kernel": "copy", "backend": "tvm_ffi", "device": "", "sizes": {"M": 2}, "reference": "ref",
               "passed": False,  # the kernel wrote into its input A
               "outputs": [{"name": "C", "dtype": "float16", "shape": [2, 2], "unwritten": 0,
                            "first_unwritten": None, "poison_checked": True, "nonfinite": 0, "rel_error": 1e-4,
                            "max_abs_error": None, "tolerance": 1e-2,
                            "worst": [{"output": "C", "index": [0, 1], "got": 1.0, "expected": 1.5,
                                       "abs_error": 0.5}],
                            "passed": True, "tiles": None, "first_nonfinite": None}],
               "notes": ["n"], "inputs": [{"name": "A", "changed": 1, "first_changed": [0, 1], "nonfinite": 0}]}
    assert run.to_dict() == written
    assert RunResult.from_dict(json.loads(json.dumps(written))) == run


def test_a_bench_result_carries_its_derived_figures_for_readers_without_tilelab():
    from tilelab.launch import BenchResult

    bench = BenchResult("gemm", (2.0, 1.0, 3.0), flops=2e12, sizes=(("M", 8),))
    d = bench.to_dict()
    # median of 1, 2, 3 ms is 2 ms; 2e12 FLOP in 2 ms is 1000 TFLOP/s
    assert (d["median_ms"], d["min_ms"], d["tflops"], d["gbps"], d["sizes"]) == (2.0, 1.0, 1000.0, None, {"M": 8})
    assert set(d) == {"kernel", "mode", "method", "samples_ms", "median_ms", "min_ms", "spread", "flops", "bytes",
                      "tflops", "gbps", "device", "backend", "sizes", "l2_flush", "rotating_copies", "warmup",
                      "notes", "telemetry", "ci_ms", "ci_target", "ci_half_width", "ci_batches", "ci_correlated",
                      "baseline", "baseline_samples_ms", "baseline_ms", "ratio", "ratio_samples", "ratio_ci",
                      "ratio_batches", "ratio_correlated"}
    assert BenchResult.from_dict(d) == bench


def test_a_sweep_row_writes_its_configuration_and_size_as_objects():
    from tilelab.launch import SweepRow

    row = SweepRow((("block_M", 128), ("raster", True)), (("M", 512),), median_ms=0.5, ratio_ci=(0.9, 1.1))
    d = row.to_dict()
    assert d["config"] == {"block_M": 128, "raster": True} and d["size"] == {"M": 512}
    assert d["ratio_ci"] == [0.9, 1.1] and d["median_ms"] == 0.5 and d["measured_as"] == ""
    assert SweepRow.from_dict({**d, "measured_as": None}) == row  # null text read as the default


def test_telemetry_writes_whether_it_throttled():
    from tilelab.launch import Telemetry

    tele = Telemetry(((0.0, 1980, 2619, 500.0, 60, 0x20),), max_sm_mhz=1980)
    assert tele.to_dict() == {"samples": [[0.0, 1980, 2619, 500.0, 60, 0x20]], "max_sm_mhz": 1980, "note": "",
                              "throttled": True, "reasons": ["software thermal slowdown"]}
    assert Telemetry.from_dict(tele.to_dict()) == tele


def test_a_report_writes_its_schema_and_its_launchers_by_backend():
    from tilelab.records.kernel import SCHEMA_VERSION, DeviceKernel, KernelReport, LauncherSource, Sources

    report = KernelReport("k", "sm_90a", (DeviceKernel("k_kernel", (4, 1, 1), (128, 1, 1)),),
                          Sources("__global__ void k_kernel() {}", (LauncherSource("tvm_ffi", "int main;"),
                                                                    LauncherSource("cython", None, "no nvcc"))),
                          versions=(("tilelang", "0.1.15"),))
    d = report.to_dict()
    assert list(d)[0] == "schema" and d["schema"] == SCHEMA_VERSION
    assert d["sources"] == {"device": "__global__ void k_kernel() {}", "launchers": {
        "tvm_ffi": {"backend": "tvm_ffi", "text": "int main;", "reason": None, "language": "c++", "extra": {}},
        "cython": {"backend": "cython", "text": None, "reason": "no nvcc", "language": "c++", "extra": {}}}}
    assert d["versions"] == {"tilelang": "0.1.15"} and d["kernels"][0]["grid"] == [4, 1, 1]
    assert KernelReport.from_json(report.to_json()) == report
    with pytest.raises(ValueError, match="schema"):
        KernelReport.from_dict({**d, "schema": SCHEMA_VERSION + 1})


def test_a_saved_report_missing_a_nested_field_is_refused_naming_the_field(tmp_path):
    from tilelab.records.errors import ReportFileError
    from tilelab.records.kernel import DeviceKernel, KernelReport, Sources

    report = KernelReport("k", "sm_90a", (DeviceKernel("k_kernel", (4, 1, 1), (128, 1, 1)),), Sources("src"))
    d = report.to_dict()
    del d["kernels"][0]["grid"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ReportFileError, match="missing field 'grid'"):
        KernelReport.load(path)
