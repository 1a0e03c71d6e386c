"""The records of launching and timing: what ``run``, ``bench``, ``sweep``, ``sanitize``,
``measure_ceilings`` and ``launch_overhead`` return, and the GPU telemetry of a measurement.

Frozen dataclasses with ``to_dict``/``from_dict`` (plain JSON types), beside the report's records
(``kernel.py``, ``machine.py``). They show themselves through the one display hook
(:class:`tilelab.records.display.Displayed`): their text, HTML and PNG are drawn by
:mod:`tilelab.render.launch`, :mod:`tilelab.render.tiles` and :mod:`tilelab.render.sanitizer`.
No renderer, torch, TileLang or IPython is imported here, so a result can be saved on a GPU machine
and shown anywhere. ``tilelab.launch`` exports them beside the functions that return them.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .display import DisplayedText
from .profile import Profile
from .record import MAPPING, Record
from .tile_trace import TileTrace
from .timeline import Timeline

__all__ = [
    "BENCH_MODES",
    "BenchResult",
    "Ceilings",
    "Finding",
    "LaunchOverhead",
    "OutputCheck",
    "RunResult",
    "SanitizerReport",
    "SweepRow",
    "SweepTable",
    "Telemetry",
    "TileMap",
    "WorstElement",
]

# nvmlClocksEventReasons bits (nvml.h). Idle, application-clock and display settings are not throttling.
THROTTLE_REASONS = {
    0x1: "gpu idle", 0x2: "applications clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
    0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown", 0x100: "display clock setting",
}
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


@dataclass(frozen=True)
class Telemetry(Record):
    """Samples taken during one measurement: (seconds since start, SM MHz, memory MHz, W, deg C, reasons)."""

    samples: tuple[tuple[float, int, int, float, int, int], ...] = ()
    max_sm_mhz: int | None = None  # the GPU's maximum SM clock
    note: str = ""

    _derived = ("throttled", "reasons")  # written for readers of the JSON without tilelab

    @property
    def sm_mhz(self) -> list[int]:
        return [s[1] for s in self.samples]

    @property
    def throttle_mask(self) -> int:
        mask = 0
        for s in self.samples:
            mask |= s[5]
        return mask

    @property
    def throttled(self) -> bool:
        """True when any sample carries a power, thermal or hardware slowdown reason."""
        return bool(self.throttle_mask & THROTTLING)

    @property
    def reasons(self) -> list[str]:
        mask = self.throttle_mask
        return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]

    def summary(self) -> str:
        if not self.samples:
            return f"no telemetry ({self.note})" if self.note else "no telemetry"
        sm, power, temp = self.sm_mhz, [s[3] for s in self.samples], [s[4] for s in self.samples]
        text = (f"SM {min(sm)}-{max(sm)} MHz (median {statistics.median(sm):.0f}), mem {self.samples[0][2]} MHz, "
                f"{statistics.median(power):.0f} W median (max {max(power):.0f}), {max(temp)} C max, "
                f"{len(self.samples)} samples")
        if self.throttled:
            throttling = {n for b, n in THROTTLE_REASONS.items() if b & THROTTLING}
            text += "; THROTTLED: " + ", ".join(r for r in self.reasons if r in throttling)
        return text


def _literal(value: Any) -> str:
    """A value as Python source: repr for literals, the name for everything else (``T.float16``)."""
    if value is None or isinstance(value, (bool, int, float, str, tuple, list)):
        return repr(value)
    return str(value)


# ------------------------------------------------------------------------------------------
# run
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorstElement(Record):
    """One of the elements furthest from the reference."""

    output: str
    index: tuple[int, ...]
    got: float
    expected: float
    abs_error: float


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class TileMap(DisplayedText, Record):
    """One output by tile: each cell is "right", "wrong" (some element wrong), "unwritten" (no
    element written) or "partial" (some elements unwritten, the rest right). ``tile`` is the
    tile's (rows, cols) in elements, over the output folded to 2-D (leading dimensions into rows);
    ``merged`` says neighbouring tiles were merged to keep the map small; ``source`` says where
    the tile shape came from."""

    output: str
    shape: tuple[int, ...]
    tile: tuple[int, int]
    cells: tuple[tuple[str, ...], ...]
    merged: bool = False
    source: str = ""

    def count(self, state: str) -> int:
        return sum(row.count(state) for row in self.cells)

    def where(self, state: str) -> tuple[tuple[int, int], ...]:
        """(tile row, tile column) of every tile in ``state``."""
        return tuple((i, j) for i, row in enumerate(self.cells) for j, c in enumerate(row) if c == state)


@dataclass(frozen=True)
class OutputCheck(Record):
    """How one output compared: unwritten elements (still the poison) and error figures."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    unwritten: int = 0
    first_unwritten: tuple[int, ...] | None = None
    poison_checked: bool = True  # False where tilelab could not poison this output
    nonfinite: int = 0
    rel_error: float | None = None  # ||out - ref|| / ||ref||, None without a reference
    max_abs_error: float | None = None
    tolerance: float | None = None
    worst: tuple[WorstElement, ...] = ()
    tiles: TileMap | None = None  # where it is wrong, by tile, when it failed
    first_nonfinite: tuple[int, ...] | None = None  # the first NaN/inf the kernel wrote (row-major order)

    _derived = ("passed",)  # written for readers of the JSON without tilelab

    @property
    def nonfinite_tile(self) -> tuple[int, ...] | None:
        """The tile (of the tile map) holding the first NaN/inf, when both are known."""
        if self.first_nonfinite is None or self.tiles is None or not self.first_nonfinite:
            return None
        index = self.first_nonfinite
        rows = 1
        for extent in self.shape[:-1]:
            rows *= extent
        row = 0
        for i, extent in zip(index[:-1], self.shape[:-1]):
            row = row * extent + i
        col = index[-1]
        return (row // max(1, self.tiles.tile[0]), col // max(1, self.tiles.tile[1]))

    @property
    def passed(self) -> bool:
        if self.unwritten or self.nonfinite:
            return False
        if self.rel_error is None:
            return True
        if math.isnan(self.rel_error):
            return False
        return self.tolerance is None or self.rel_error <= self.tolerance


@dataclass(frozen=True)
class InputState(Record):
    """An input after the launch: elements the kernel changed (compared with a copy taken before
    the launch; an input the kernel is not meant to write), and NaN/inf it held before."""

    name: str
    changed: int = 0
    first_changed: tuple[int, ...] | None = None
    nonfinite: int = 0  # NaN/inf in the input as it was given to the kernel


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class RunResult(DisplayedText, Record):
    """One verified launch: pass or fail, error figures, worst elements and where they are."""

    kernel: str
    outputs: tuple[OutputCheck, ...]
    backend: str = "tvm_ffi"
    device: str = ""
    sizes: tuple[tuple[str, int], ...] = field(default=(), metadata=MAPPING)
    reference: str | None = None  # the reference's name, None when none was given
    notes: tuple[str, ...] = ()
    inputs: tuple[InputState, ...] = ()  # each input after the launch (written? NaN/inf given?)

    _derived = ("passed",)  # written for readers of the JSON without tilelab

    @property
    def inputs_written(self) -> tuple[InputState, ...]:
        """Inputs the kernel changed: a kernel writing where it should only read fails."""
        return tuple(i for i in self.inputs if i.changed)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs) and not self.inputs_written

    @property
    def rel_error(self) -> float | None:
        errs = [o.rel_error for o in self.outputs if o.rel_error is not None]
        return max(errs) if errs else None

    @property
    def worst(self) -> tuple[WorstElement, ...]:
        return tuple(w for o in self.outputs for w in o.worst)

    def __bool__(self) -> bool:
        return self.passed

    def verdict(self) -> str:
        if self.passed:
            return "PASS" if self.reference else "RAN (every element written; no reference given)"
        return "FAIL"


# ------------------------------------------------------------------------------------------
# bench
# ------------------------------------------------------------------------------------------

BENCH_MODES = {
    "sustained": "back-to-back launches, CUDA events around each, L2 flushed before each "
                 "(the GPU never idles: sustained clocks, as triton.testing.do_bench)",
    "isolated": "one launch at a time after an idle gap, L2 flushed, CUDA events around it "
                "(boost clocks, as Nsight Compute's gpu__time_duration with --clock-control none)",
    "graph": "CUDA-graph replays of many launches, timed as a whole and divided "
             "(no host launch cost, rotating input copies instead of an L2 flush)",
}


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class BenchResult(DisplayedText, Record):
    """Timed launches of one kernel: every sample (ms), the method, and derived rates."""

    kernel: str
    samples_ms: tuple[float, ...]
    mode: str = "sustained"
    method: str = ""
    flops: float | None = None
    bytes: float | None = None
    device: str = ""
    backend: str = ""
    sizes: tuple[tuple[str, int], ...] = field(default=(), metadata=MAPPING)
    l2_flush: bool = True
    rotating_copies: int = 1
    warmup: int = 0
    notes: tuple[str, ...] = ()
    telemetry: Telemetry | None = None  # NVML samples taken during the measurement
    ci_ms: tuple[float, float] | None = None  # 95% confidence interval of the median
    ci_target: float | None = None  # the relative half-width asked for, if any
    ci_batches: int = 0  # batches of consecutive launches the interval was taken from
    ci_correlated: bool = False  # even 8 batches' medians followed each other: the interval is likely too narrow
    # bench(kernel, baseline=...): the baseline timed side by side (ABAB... batches in one window)
    baseline: str | None = None  # its name
    baseline_samples_ms: tuple[float, ...] = ()
    ratio_samples: tuple[float, ...] = ()  # kernel / baseline, one per pair of neighbouring batches, in time order
    ratio_ci: tuple[float, float] | None = None  # 95% interval of the median ratio
    ratio_batches: int = 0  # batches of consecutive pairs the ratio's interval was taken from
    ratio_correlated: bool = False

    # written for readers of the JSON without tilelab
    _derived = ("median_ms", "min_ms", "spread", "tflops", "gbps", "ci_half_width", "baseline_ms", "ratio")

    @property
    def ratio(self) -> float | None:
        """The kernel's time over the baseline's, the median of the per-pair ratios (None without a baseline)."""
        return statistics.median(self.ratio_samples) if self.ratio_samples else None

    @property
    def baseline_ms(self) -> float | None:
        return statistics.median(self.baseline_samples_ms) if self.baseline_samples_ms else None

    @property
    def ratio_half_width(self) -> float | None:
        """Half the ratio's 95% interval over the ratio (0.002: +-0.2%)."""
        r = self.ratio
        if not self.ratio_ci or not r:
            return None
        return (self.ratio_ci[1] - self.ratio_ci[0]) / 2 / r

    @property
    def ci_half_width(self) -> float | None:
        """Half the median's 95% interval over the median (0.005: +-0.5%)."""
        if not self.ci_ms or not self.median_ms:
            return None
        return (self.ci_ms[1] - self.ci_ms[0]) / 2 / self.median_ms

    @property
    def throttled(self) -> bool:
        return bool(self.telemetry is not None and self.telemetry.throttled)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else float("nan")

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms) if self.samples_ms else float("nan")

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms) if self.samples_ms else float("nan")

    @property
    def iqr_ms(self) -> float:
        s = sorted(self.samples_ms)
        return _quantile(s, 0.75) - _quantile(s, 0.25)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: the relative run-to-run noise of a sample."""
        med = self.median_ms
        return self.iqr_ms / med if med and not math.isnan(med) else float("nan")

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.median_ms * 1e-3) / 1e12 if self.flops else None

    @property
    def gbps(self) -> float | None:
        return self.bytes / (self.median_ms * 1e-3) / 1e9 if self.bytes else None

    @property
    def intensity(self) -> float | None:
        """Operations per byte: where the kernel sits on the roofline's x axis."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    def fraction_of(self, ceilings: Ceilings) -> float | None:
        """Achieved rate over the roofline bound at this kernel's intensity."""
        bound = ceilings.bound_tflops(self.intensity) if self.intensity else None
        if bound and self.tflops:
            return self.tflops / bound
        if self.gbps and not self.flops:
            return self.gbps / ceilings.copy_gbps
        return None

    def ratio_summary(self) -> str:
        """"0.9123x torch.matmul (95% CI 0.9101-0.9140; baseline median 1.2345 ms)"; empty without a baseline."""
        r = self.ratio
        if r is None:
            return ""
        ci = f"95% CI {self.ratio_ci[0]:.4f}-{self.ratio_ci[1]:.4f}" if self.ratio_ci else "no interval: too few pairs"
        if self.ratio_ci and self.ratio_correlated:
            ci += ", likely too narrow"
        return f"{r:.4f}x {self.baseline} ({ci}; baseline median {self.baseline_ms:.4f} ms)"

    def summary(self) -> str:
        rate = []
        if self.tflops is not None:
            rate.append(f"{self.tflops:.1f} TFLOP/s")
        if self.gbps is not None:
            rate.append(f"{self.gbps:.0f} GB/s")
        ci = (f", 95% CI +-{100 * self.ci_half_width:.2f}%" if self.ci_half_width is not None else "")
        if ci and self.ci_correlated:
            ci += " (likely too narrow: the timings wander slowly)"
        flag = ", THROTTLED" if self.throttled else ""
        return (f"median {self.median_ms:.4f} ms (min {self.min_ms:.4f}, spread {100 * self.spread:.2f}%{ci}, "
                f"n={len(self.samples_ms)}{flag})" + (", " + ", ".join(rate) if rate else ""))


# ------------------------------------------------------------------------------------------
# ceilings
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class Ceilings(DisplayedText, Record):
    """The device's measured ceilings: copy bandwidth (read + written) and matmul rate."""

    device: str
    copy_gbps: float
    matmul_tflops: float
    matmul_dtype: str = "float16"
    matmul_shape: tuple[int, int, int] = (8192, 8192, 8192)
    copy_bytes: int = 0
    driver: str = ""
    torch_version: str = ""
    measured_at: str = ""
    method: str = ""

    @property
    def key(self) -> str:
        return f"{self.device} | driver {self.driver} | torch {self.torch_version}"

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the memory roof meets the compute roof."""
        return self.matmul_tflops * 1e12 / (self.copy_gbps * 1e9)

    def bound_tflops(self, intensity: float) -> float:
        return min(self.matmul_tflops, intensity * self.copy_gbps * 1e9 / 1e12)


# ------------------------------------------------------------------------------------------
# launch overhead
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class LaunchOverhead(DisplayedText):
    """Host microseconds per call of the same kernel through each execution backend."""

    kernel: str
    per_backend_us: tuple[tuple[str, tuple[float, ...]], ...]  # backend -> samples (us per call)
    errors: tuple[tuple[str, str], ...] = ()  # backend -> why it could not be measured
    device: str = ""
    method: str = ""

    def median_us(self, backend: str) -> float:
        for name, samples in self.per_backend_us:
            if name == backend:
                return statistics.median(samples)
        raise KeyError(backend)

    @property
    def medians(self) -> dict[str, float]:
        return {b: statistics.median(s) for b, s in self.per_backend_us if s}

    # hand-written: the medians are written as "medians_us", a name no field or property has
    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "per_backend_us": {b: list(s) for b, s in self.per_backend_us},
                "medians_us": self.medians, "errors": dict(self.errors), "device": self.device,
                "method": self.method}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchOverhead:
        return cls(kernel=d["kernel"],
                   per_backend_us=tuple((b, tuple(float(x) for x in s)) for b, s in d["per_backend_us"].items()),
                   errors=tuple((d.get("errors") or {}).items()), device=d.get("device", ""),
                   method=d.get("method", ""))


# ------------------------------------------------------------------------------------------
# sweep
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepRow(Record):
    """One configuration at one size: its timing, or the error that stopped it."""

    config: tuple[tuple[str, Any], ...] = field(metadata=MAPPING)
    size: tuple[tuple[str, int], ...] = field(metadata=MAPPING)
    median_ms: float | None = None
    min_ms: float | None = None
    spread: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    error: str | None = None
    stage: str | None = None  # "compile", "check" or "bench" for failed rows
    best: bool = False
    label: str | None = None  # baselines: "torch.matmul"; configurations: None
    compile_s: float | None = None
    bench_s: float | None = None  # wall time of the check and bench step
    device: str | None = None  # where it was benchmarked ("cuda:1", a Dask worker), when several could
    cached: bool = False  # taken from the sweep's row cache instead of measured in this call
    sm_mhz: float | None = None  # median SM clock during the measurement (NVML), when sampled
    throttled: bool = False  # a power, thermal or hardware slowdown was reported during it
    # the final round (a sweep over several devices): this leader timed again on one device
    final_ms: float | None = None
    final_device: str | None = None
    # strategy="halving": the rung this row was last measured in (0 the briefest), how it was
    # measured there, and why it went no further (None for the rows that reached the last rung)
    rung: int | None = None
    measured_as: str = ""
    cut: str | None = None
    # rank_by="ratio": this row's time over the baseline's, measured side by side (ABAB...) in one
    # window, with its 95% interval and the baseline's median in that window
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    baseline_ms: float | None = None
    # the final round: this finalist's ratio to the round's common reference (the sweep's ratio
    # baseline, or the leader at its size), timed side by side on the final device, with its 95%
    # interval; the reference itself is 1 by definition (no interval)
    final_ratio: float | None = None
    final_ratio_ci: tuple[float, float] | None = None

    @property
    def ratio_half_width(self) -> float | None:
        if self.ratio is None or not self.ratio_ci or not self.ratio:
            return None
        return (self.ratio_ci[1] - self.ratio_ci[0]) / 2 / self.ratio

    @classmethod
    def measured(cls, config: tuple[tuple[str, Any], ...], size: tuple[tuple[str, int], ...], res: BenchResult,
                 **extra: Any) -> SweepRow:
        """The row of a configuration that was timed: the timing, its rates and its clocks."""
        tele = res.telemetry
        sm = tele.sm_mhz if tele is not None else []
        ratio = getattr(res, "ratio", None)
        if ratio is not None:
            extra = {"ratio": ratio, "ratio_ci": res.ratio_ci, "baseline_ms": res.baseline_ms, **extra}
        return cls(config, size, median_ms=res.median_ms, min_ms=res.min_ms, spread=res.spread, tflops=res.tflops,
                   gbps=res.gbps, sm_mhz=float(statistics.median(sm)) if sm else None,
                   throttled=bool(tele is not None and tele.throttled), **extra)

    @property
    def ok(self) -> bool:
        return self.error is None and self.median_ms is not None

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return ", ".join(f"{k}={v}" for k, v in self.config)


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class SweepTable(DisplayedText, Record):
    """One row per configuration and size (baselines included), the best per size marked."""

    kernel: str
    rows: tuple[SweepRow, ...]
    mode: str = "sustained"
    device: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    factory: str = ""  # the factory's name, for best_call (the kernel's name when empty)
    ratio_baseline: str | None = None  # rank_by="ratio": the baseline every row was timed beside
    final_reference: str | None = None  # the final round: what its finalists' ratios are to

    @property
    def sizes(self) -> list[tuple[tuple[str, int], ...]]:
        seen: list[tuple[tuple[str, int], ...]] = []
        for r in self.rows:
            if r.size not in seen:
                seen.append(r.size)
        return seen

    @property
    def failed(self) -> tuple[SweepRow, ...]:
        return tuple(r for r in self.rows if not r.ok and r.label is None)

    @property
    def baselines(self) -> tuple[SweepRow, ...]:
        return tuple(r for r in self.rows if r.label is not None)

    def best(self, size: dict[str, int] | None = None) -> SweepRow | None:
        """The best configuration at ``size`` (the only or last size by default)."""
        sizes = self.sizes
        if not sizes:
            return None
        key = tuple(size.items()) if size else sizes[-1]
        for r in self.rows:
            if r.best and r.size == key:
                return r
        return None

    def best_config(self, size: dict[str, int] | None = None) -> dict[str, Any] | None:
        row = self.best(size)
        return dict(row.config) if row else None

    @property
    def common_config(self) -> dict[str, Any]:
        """The parameters every configuration shares (said once, not on every row)."""
        configs = [dict(r.config) for r in self.rows if r.label is None]
        if len(configs) < 2:
            return {}
        first = configs[0]
        return {k: v for k, v in first.items() if all(k in c and c[k] == v for c in configs[1:])}

    def short_name(self, row: SweepRow) -> str:
        """A row's name with the shared parameters left out: what tells configurations apart."""
        if row.label:
            return row.label
        common = self.common_config
        varying = [(k, v) for k, v in row.config if k not in common]
        return ", ".join(f"{k}={v}" for k, v in varying) or row.name or "(defaults)"

    def leading_configs(self, top: int | None = None) -> list[str]:
        """The short names of the configurations (baselines aside) that ran, in table order; with
        ``top``, only that many: every one marked best at some size, then the fastest overall
        (the geometric mean of their medians over the sizes they ran at, a little in favour of
        configurations that ran at more sizes)."""
        runs: dict[str, list[float]] = {}
        for r in self.rows:
            if r.ok and r.label is None:
                runs.setdefault(self.short_name(r), []).append(float(r.median_ms))  # type: ignore[arg-type]
        names = list(runs)
        if top is None or len(names) <= top:
            return names
        ranked = sorted(names, key=lambda n: sum(math.log(ms) for ms in runs[n]) / len(runs[n]) - 0.01 * len(runs[n]))
        best = {self.short_name(r) for r in self.rows if r.best}
        keep = list(dict.fromkeys([n for n in names if n in best] + ranked))[:top]
        return [n for n in names if n in keep]

    def best_call(self, size: dict[str, int] | None = None) -> str | None:
        """The best configuration at ``size`` as a call of the factory, ready to paste:
        ``matmul(M=8192, N=8192, K=8192, block_M=128, num_stages=4)``."""
        row = self.best(size)
        if row is None:
            return None
        args = [f"{k}={_literal(v)}" for k, v in (*row.size, *row.config)]
        return f"{self.factory or self.kernel}({', '.join(args)})"

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)


# ------------------------------------------------------------------------------------------
# sanitize
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding(Record):
    """One problem compute-sanitizer reported."""

    kind: str  # "out-of-bounds write", "shared-memory race", "barrier misuse", "uninitialised read", ...
    message: str  # the sanitizer's headline
    function: str | None = None
    file: str | None = None
    line: int | None = None  # line of the device CUDA source (the inspector's CUDA view)
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    address: int | None = None
    size: int | None = None  # bytes accessed
    buffer: str | None = None  # the tensor the address belongs to (or is nearest to)
    element: tuple[int, ...] | None = None  # its index in that tensor, when inside it
    where: str | None = None  # "inside B", "3 elements past the end of B", "shared memory"
    other_line: int | None = None  # racecheck: the other access's line
    hazards: int | None = None  # racecheck: how many hazards this pair stands for


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class SanitizerReport(DisplayedText, Record):
    """What one run under compute-sanitizer found; ``raw`` is the sanitizer's own text."""

    kernel: str
    tool: str
    findings: tuple[Finding, ...]
    raw: str
    summary: str = ""  # the sanitizer's ERROR/RACECHECK SUMMARY line
    launch_error: str | None = None  # what the launch itself raised in the child, if anything
    source: str | None = None  # the device CUDA source the lines refer to
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def clean(self) -> bool:
        return not self.findings


@dataclass(frozen=True)
class Launches(Record):
    """What the launches of one ``%%tilelang`` cell returned, by kind, each in the order of its
    ``--sizes`` sets: the Timing tab shows the sanitizer reports, runs and benches (:attr:`timing`),
    the Profile tab the profiles, the Timeline tab the timelines; the traces are shown above the
    inspector."""

    sanitizer: tuple[SanitizerReport, ...] = ()  # --sanitize
    runs: tuple[RunResult, ...] = ()  # --run
    benches: tuple[BenchResult, ...] = ()  # --bench (placed by the measured work under --profile)
    profiles: tuple[Profile, ...] = ()  # --profile
    timelines: tuple[Timeline, ...] = ()  # --timeline
    traces: tuple[TileTrace, ...] = ()  # --trace

    @property
    def timing(self) -> tuple[SanitizerReport | RunResult | BenchResult, ...]:
        """What the Timing tab shows, in its order."""
        return (*self.sanitizer, *self.runs, *self.benches)

    def __add__(self, other: Launches) -> Launches:
        """Both cells' worth, kind by kind (this one's first)."""
        return Launches(self.sanitizer + other.sanitizer, self.runs + other.runs, self.benches + other.benches,
                        self.profiles + other.profiles, self.timelines + other.timelines, self.traces + other.traces)
