"""The records of launching and timing: what ``run``, ``bench``, ``sweep``, ``sanitize``,
``measure_ceilings`` and ``launch_overhead`` return, and the GPU telemetry of a measurement.

Frozen dataclasses with ``to_dict``/``from_dict`` (plain JSON types), beside the report's records
(``_model.py``, ``_machine.py``). They show themselves through the one display hook
(:class:`tilelab._display.Displayed`): their text, HTML and PNG are drawn by
:mod:`tilelab.render.launch`, :mod:`tilelab.render.tiles` and :mod:`tilelab.render.sanitizer`.
No renderer, torch, TileLang or IPython is imported here, so a result can be saved on a GPU machine
and shown anywhere. ``tilelab.launch.models`` re-exports them where they always were.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from ._display import DisplayedText

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
class Telemetry:
    """Samples taken during one measurement: (seconds since start, SM MHz, memory MHz, W, deg C, reasons)."""

    samples: tuple[tuple[float, int, int, float, int, int], ...] = ()
    max_sm_mhz: int | None = None  # the GPU's maximum SM clock
    note: str = ""

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

    def to_dict(self) -> dict[str, Any]:
        return {"samples": [list(s) for s in self.samples], "max_sm_mhz": self.max_sm_mhz, "note": self.note,
                "throttled": self.throttled, "reasons": self.reasons}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Telemetry:
        samples = tuple((float(a), int(b), int(c), float(e), int(f), int(g))
                        for a, b, c, e, f, g in d.get("samples", ()))
        return cls(samples, d.get("max_sm_mhz"), d.get("note", ""))



def _literal(value: Any) -> str:
    """A value as Python source: repr for literals, the name for everything else (``T.float16``)."""
    if value is None or isinstance(value, (bool, int, float, str, tuple, list)):
        return repr(value)
    return str(value)


# ------------------------------------------------------------------------------------------
# run
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorstElement:
    """One of the elements furthest from the reference."""

    output: str
    index: tuple[int, ...]
    got: float
    expected: float
    abs_error: float

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "index": list(self.index), "got": self.got,
                "expected": self.expected, "abs_error": self.abs_error}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorstElement:
        return cls(d["output"], tuple(int(i) for i in d["index"]), float(d["got"]),
                   float(d["expected"]), float(d["abs_error"]))


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class TileMap(DisplayedText):
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

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "shape": list(self.shape), "tile": list(self.tile),
                "cells": [list(r) for r in self.cells], "merged": self.merged, "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TileMap:
        return cls(output=d["output"], shape=tuple(d["shape"]), tile=tuple(d["tile"]),
                   cells=tuple(tuple(r) for r in d["cells"]), merged=bool(d.get("merged", False)),
                   source=d.get("source", ""))




@dataclass(frozen=True)
class OutputCheck:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "dtype": self.dtype, "shape": list(self.shape),
            "unwritten": self.unwritten,
            "first_unwritten": list(self.first_unwritten) if self.first_unwritten is not None else None,
            "poison_checked": self.poison_checked, "nonfinite": self.nonfinite,
            "rel_error": self.rel_error, "max_abs_error": self.max_abs_error,
            "tolerance": self.tolerance, "worst": [w.to_dict() for w in self.worst],
            "passed": self.passed, "tiles": self.tiles.to_dict() if self.tiles is not None else None,
            "first_nonfinite": list(self.first_nonfinite) if self.first_nonfinite is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OutputCheck:
        fu = d.get("first_unwritten")
        return cls(
            name=d["name"], dtype=d["dtype"], shape=tuple(d["shape"]),
            unwritten=int(d.get("unwritten", 0)),
            first_unwritten=tuple(fu) if fu is not None else None,
            poison_checked=bool(d.get("poison_checked", True)), nonfinite=int(d.get("nonfinite", 0)),
            rel_error=d.get("rel_error"), max_abs_error=d.get("max_abs_error"),
            tolerance=d.get("tolerance"),
            worst=tuple(WorstElement.from_dict(w) for w in d.get("worst", ())),
            tiles=TileMap.from_dict(d["tiles"]) if d.get("tiles") else None,
            first_nonfinite=tuple(d["first_nonfinite"]) if d.get("first_nonfinite") is not None else None,
        )


@dataclass(frozen=True)
class InputState:
    """An input after the launch: elements the kernel changed (compared with a copy taken before
    the launch; an input the kernel is not meant to write), and NaN/inf it held before."""

    name: str
    changed: int = 0
    first_changed: tuple[int, ...] | None = None
    nonfinite: int = 0  # NaN/inf in the input as it was given to the kernel

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "changed": self.changed,
                "first_changed": list(self.first_changed) if self.first_changed is not None else None,
                "nonfinite": self.nonfinite}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InputState:
        first = d.get("first_changed")
        return cls(name=d["name"], changed=int(d.get("changed", 0)),
                   first_changed=tuple(first) if first is not None else None, nonfinite=int(d.get("nonfinite", 0)))


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class RunResult(DisplayedText):
    """One verified launch: pass or fail, error figures, worst elements and where they are."""

    kernel: str
    outputs: tuple[OutputCheck, ...]
    backend: str = "tvm_ffi"
    device: str = ""
    sizes: tuple[tuple[str, int], ...] = ()
    reference: str | None = None  # the reference's name, None when none was given
    notes: tuple[str, ...] = ()
    inputs: tuple[InputState, ...] = ()  # each input after the launch (written? NaN/inf given?)

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "backend": self.backend, "device": self.device,
            "sizes": dict(self.sizes), "reference": self.reference, "passed": self.passed,
            "outputs": [o.to_dict() for o in self.outputs], "notes": list(self.notes),
            "inputs": [i.to_dict() for i in self.inputs],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        return cls(
            kernel=d["kernel"], backend=d.get("backend", "tvm_ffi"), device=d.get("device", ""),
            sizes=tuple((k, int(v)) for k, v in (d.get("sizes") or {}).items()),
            reference=d.get("reference"),
            outputs=tuple(OutputCheck.from_dict(o) for o in d["outputs"]),
            notes=tuple(d.get("notes", ())),
            inputs=tuple(InputState.from_dict(i) for i in d.get("inputs", ())),
        )





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
class BenchResult(DisplayedText):
    """Timed launches of one kernel: every sample (ms), the method, and derived rates."""

    kernel: str
    samples_ms: tuple[float, ...]
    mode: str = "sustained"
    method: str = ""
    flops: float | None = None
    bytes: float | None = None
    device: str = ""
    backend: str = ""
    sizes: tuple[tuple[str, int], ...] = ()
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "mode": self.mode, "method": self.method,
            "samples_ms": list(self.samples_ms), "median_ms": self.median_ms, "min_ms": self.min_ms,
            "spread": self.spread, "flops": self.flops, "bytes": self.bytes, "tflops": self.tflops,
            "gbps": self.gbps, "device": self.device, "backend": self.backend, "sizes": dict(self.sizes),
            "l2_flush": self.l2_flush, "rotating_copies": self.rotating_copies, "warmup": self.warmup,
            "notes": list(self.notes), "telemetry": self.telemetry.to_dict() if self.telemetry else None,
            "ci_ms": list(self.ci_ms) if self.ci_ms else None, "ci_target": self.ci_target,
            "ci_half_width": self.ci_half_width, "ci_batches": self.ci_batches, "ci_correlated": self.ci_correlated,
            "baseline": self.baseline, "baseline_samples_ms": list(self.baseline_samples_ms),
            "baseline_ms": self.baseline_ms, "ratio": self.ratio, "ratio_samples": list(self.ratio_samples),
            "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None, "ratio_batches": self.ratio_batches,
            "ratio_correlated": self.ratio_correlated,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchResult:
        return cls(
            kernel=d["kernel"], samples_ms=tuple(float(s) for s in d["samples_ms"]),
            mode=d.get("mode", "sustained"), method=d.get("method", ""), flops=d.get("flops"),
            bytes=d.get("bytes"), device=d.get("device", ""), backend=d.get("backend", ""),
            sizes=tuple((k, int(v)) for k, v in (d.get("sizes") or {}).items()),
            l2_flush=bool(d.get("l2_flush", True)), rotating_copies=int(d.get("rotating_copies", 1)),
            warmup=int(d.get("warmup", 0)), notes=tuple(d.get("notes", ())),
            telemetry=Telemetry.from_dict(d["telemetry"]) if d.get("telemetry") else None,
            ci_ms=tuple(float(x) for x in d["ci_ms"]) if d.get("ci_ms") else None,  # type: ignore[arg-type]
            ci_target=d.get("ci_target"), ci_batches=int(d.get("ci_batches") or 0),
            ci_correlated=bool(d.get("ci_correlated", False)),
            baseline=d.get("baseline"), baseline_samples_ms=tuple(float(x) for x in d.get("baseline_samples_ms") or ()),
            ratio_samples=tuple(float(x) for x in d.get("ratio_samples") or ()),
            ratio_ci=tuple(float(x) for x in d["ratio_ci"]) if d.get("ratio_ci") else None,  # type: ignore[arg-type]
            ratio_batches=int(d.get("ratio_batches") or 0), ratio_correlated=bool(d.get("ratio_correlated", False)),
        )

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
class Ceilings(DisplayedText):
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device, "copy_gbps": self.copy_gbps, "matmul_tflops": self.matmul_tflops,
            "matmul_dtype": self.matmul_dtype, "matmul_shape": list(self.matmul_shape),
            "copy_bytes": self.copy_bytes, "driver": self.driver, "torch_version": self.torch_version,
            "measured_at": self.measured_at, "method": self.method,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceilings:
        return cls(
            device=d["device"], copy_gbps=float(d["copy_gbps"]), matmul_tflops=float(d["matmul_tflops"]),
            matmul_dtype=d.get("matmul_dtype", "float16"),
            matmul_shape=tuple(d.get("matmul_shape", (8192, 8192, 8192))),
            copy_bytes=int(d.get("copy_bytes", 0)), driver=d.get("driver", ""),
            torch_version=d.get("torch_version", ""), measured_at=d.get("measured_at", ""),
            method=d.get("method", ""),
        )





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
class SweepRow:
    """One configuration at one size: its timing, or the error that stopped it."""

    config: tuple[tuple[str, Any], ...]
    size: tuple[tuple[str, int], ...]
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

    def to_dict(self) -> dict[str, Any]:
        return {"config": dict(self.config), "size": dict(self.size), "median_ms": self.median_ms,
                "min_ms": self.min_ms, "spread": self.spread, "tflops": self.tflops, "gbps": self.gbps,
                "error": self.error, "stage": self.stage, "best": self.best, "label": self.label,
                "compile_s": self.compile_s, "bench_s": self.bench_s, "device": self.device, "cached": self.cached,
                "sm_mhz": self.sm_mhz, "throttled": self.throttled, "final_ms": self.final_ms,
                "final_device": self.final_device, "rung": self.rung, "measured_as": self.measured_as,
                "cut": self.cut, "ratio": self.ratio, "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None,
                "baseline_ms": self.baseline_ms}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepRow:
        return cls(config=tuple((d.get("config") or {}).items()),
                   size=tuple((k, int(v)) for k, v in (d.get("size") or {}).items()),
                   median_ms=d.get("median_ms"), min_ms=d.get("min_ms"), spread=d.get("spread"),
                   tflops=d.get("tflops"), gbps=d.get("gbps"), error=d.get("error"), stage=d.get("stage"),
                   best=bool(d.get("best", False)), label=d.get("label"), compile_s=d.get("compile_s"),
                   bench_s=d.get("bench_s"), device=d.get("device"), cached=bool(d.get("cached", False)),
                   sm_mhz=d.get("sm_mhz"), throttled=bool(d.get("throttled", False)), final_ms=d.get("final_ms"),
                   final_device=d.get("final_device"), rung=d.get("rung"), measured_as=d.get("measured_as") or "",
                   cut=d.get("cut"), ratio=d.get("ratio"),
                   ratio_ci=tuple(float(x) for x in d["ratio_ci"]) if d.get("ratio_ci") else None,  # type: ignore[arg-type]
                   baseline_ms=d.get("baseline_ms"))


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class SweepTable(DisplayedText):
    """One row per configuration and size (baselines included), the best per size marked."""

    kernel: str
    rows: tuple[SweepRow, ...]
    mode: str = "sustained"
    device: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    factory: str = ""  # the factory's name, for best_call (the kernel's name when empty)
    ratio_baseline: str | None = None  # rank_by="ratio": the baseline every row was timed beside

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

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "mode": self.mode, "device": self.device,
                "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes), "factory": self.factory,
                "ratio_baseline": self.ratio_baseline}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepTable:
        return cls(kernel=d["kernel"], rows=tuple(SweepRow.from_dict(r) for r in d["rows"]),
                   mode=d.get("mode", "sustained"), device=d.get("device", ""), notes=tuple(d.get("notes", ())),
                   factory=d.get("factory", ""), ratio_baseline=d.get("ratio_baseline"))

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)


# ------------------------------------------------------------------------------------------
# sanitize
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
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

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        out = dict(d)
        for k in ("block", "thread", "element"):
            if out.get(k) is not None:
                out[k] = tuple(out[k])
        return cls(**out)


@dataclass(frozen=True, repr=False)  # its repr is its text (the display hook)
class SanitizerReport(DisplayedText):
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

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "tool": self.tool, "findings": [f.to_dict() for f in self.findings],
                "raw": self.raw, "summary": self.summary, "launch_error": self.launch_error,
                "source": self.source, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SanitizerReport:
        return cls(kernel=d["kernel"], tool=d["tool"], findings=tuple(Finding.from_dict(f) for f in d["findings"]),
                   raw=d.get("raw", ""), summary=d.get("summary", ""), launch_error=d.get("launch_error"),
                   source=d.get("source"), notes=tuple(d.get("notes", ())))
