"""Nsight Compute profiles as records: what the hardware counters said about one kernel launch.

``Profile`` is plain data (JSON round trip); ``parse_raw_csv`` and ``parse_source_csv`` read what
``ncu --import REPORT --csv --page raw`` / ``--page source`` print; ``profile_from_metrics`` picks
the figures tilelab shows. Nothing here runs ncu (see :mod:`tilelab.launch._profile`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Any

from .display import Displayed
from .record import Record

# Metrics asked for on top of ncu's sections (shared-memory wavefronts and requests per op,
# for the bank-conflict comparison; FLOP counters for the roofline). ncu refuses derived__
# metrics on its command line: the full section set reports those (the _x2 FMA counts) itself.
EXTRA_METRICS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
)

_FIELDS = {
    "duration_ns": ("gpu__time_duration.sum",),
    "sol_compute_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "sol_memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers": ("launch__registers_per_thread",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "l2_bytes": ("lts__t_bytes.sum",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "tensor_pipe_pct": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active"),
    "shared_ld_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "shared_st_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "shared_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "shared_st_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "shared_ld_requests": ("smsp__inst_executed_op_shared_ld.sum",),
    "shared_st_requests": ("smsp__inst_executed_op_shared_st.sum",),
}
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_UNIT_SCALE = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9,
               "second": 1e9, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
               "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1.0}


def _number(text: str) -> float | None:
    text = (text or "").strip().replace(",", "")
    if not text or text in ("n/a", "N/A", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict[str, tuple[float | str | None, str]]]:
    """``ncu --csv --page raw``: a header of metric names, a row of units, one row per launch.

    Returns one dict per launch: metric name -> (value as float where numeric, else text; unit).
    Lines ncu prints before the table (``==PROF==`` and the like) are skipped.
    """
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    if units and units[0].strip() not in ("", "ID") and _number(units[0]) is not None:
        data, units = rows[1:], [""] * len(header)  # no unit row
    out: list[dict[str, tuple[float | str | None, str]]] = []
    for row in data:
        record: dict[str, tuple[float | str | None, str]] = {}
        for i, name in enumerate(header):
            raw = row[i] if i < len(row) else ""
            num = _number(raw)
            record[name] = (num if num is not None else raw, units[i] if i < len(units) else "")
        out.append(record)
    return out


def _scaled(value: tuple[Any, str] | None, to: str) -> float | None:
    if value is None or not isinstance(value[0], float):
        return None
    v, unit = value
    if to == "ns" and unit in _UNIT_SCALE:
        return v * _UNIT_SCALE[unit]
    if to == "byte" and unit in _UNIT_SCALE:
        return v * _UNIT_SCALE[unit]
    return v


@dataclass(frozen=True)
class Profile(Displayed, Record):
    """Nsight Compute's view of one launch of one kernel."""

    kernel: str
    device: str = ""
    duration_ns: float | None = None
    sol_compute_pct: float | None = None
    sol_memory_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers: int | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    l2_bytes: float | None = None
    l2_hit_pct: float | None = None
    l1_hit_pct: float | None = None
    tensor_pipe_pct: float | None = None
    stalls: tuple[tuple[str, float], ...] = ()  # warp-stall reason -> cycles per issued instruction, top first
    shared_ld_conflicts: float | None = None
    shared_st_conflicts: float | None = None
    shared_ld_wavefronts: float | None = None
    shared_st_wavefronts: float | None = None
    shared_ld_requests: float | None = None
    shared_st_requests: float | None = None
    flops: float | None = None  # counted by the SASS counters (FMA = 2), tensor ops included where ncu has them
    hot_device_lines: tuple[tuple[int, float], ...] = ()  # device-CUDA line -> warp-stall samples
    ncu: str = ""  # path and version
    overhead_s: float | None = None  # wall time of the ncu run
    notes: tuple[str, ...] = ()

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_read_bytes is None and self.dram_write_bytes is None:
            return None
        return (self.dram_read_bytes or 0.0) + (self.dram_write_bytes or 0.0)

    def wavefronts_per_request(self, op: str) -> float | None:
        """Measured shared-memory wavefronts per warp-level request (``op``: "ld" or "st")."""
        w, r = getattr(self, f"shared_{op}_wavefronts"), getattr(self, f"shared_{op}_requests")
        return w / r if w is not None and r else None

    @property
    def intensity(self) -> float | None:
        return self.flops / self.dram_bytes if self.flops and self.dram_bytes else None

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.duration_ns * 1e-9) / 1e12 if self.flops and self.duration_ns else None

    def __repr__(self) -> str:
        ms = f"{self.duration_ns / 1e6:.4f} ms" if self.duration_ns else "?"
        return (f"Profile({self.kernel!r}: {ms}, SOL compute {self.sol_compute_pct}%, memory "
                f"{self.sol_memory_pct}%, occupancy {self.achieved_occupancy_pct}% of "
                f"{self.theoretical_occupancy_pct}%)")


def profile_from_metrics(row: dict[str, tuple[Any, str]], *, kernel: str | None = None, **extra: Any) -> Profile:
    """The figures tilelab shows, from one launch's raw metrics."""
    kw: dict[str, Any] = {}
    for field, names in _FIELDS.items():
        for name in names:
            if name in row and isinstance(row[name][0], float):
                to = "ns" if field == "duration_ns" else ("byte" if field.endswith("_bytes") else "")
                kw[field] = _scaled(row[name], to)
                break
    if kw.get("registers") is not None:
        kw["registers"] = int(kw["registers"])
    stalls = sorted(((m.group(1), v[0]) for n, v in row.items() if (m := _STALL.match(n)) and isinstance(v[0], float)
                     and v[0] > 0), key=lambda x: -x[1])
    kw["stalls"] = tuple(stalls[:8])
    kw["flops"] = _flops(row)
    name = kernel or str(row.get("Kernel Name", ("kernel", ""))[0])
    device = str(row.get("device__attribute_display_name", row.get("Device Name", ("", "")))[0])
    return Profile(kernel=name, device=device, **kw, **extra)


_TENSOR_OPS = re.compile(r"^sm__ops_path_tensor_op_[a-z0-9]+_src_\w+\.sum$")


def _flops(row: dict[str, tuple[Any, str]]) -> float | None:
    """FLOPs as Nsight Compute's roofline counts them: scalar FMAs twice (its derived ``_x2``
    metrics), adds and multiplies once, and the tensor path's ``ops_path`` counters (their
    peak is the GPU's dense FLOPs per cycle: 4,096 fp16 per SM per cycle on an H100)."""
    def get(name: str) -> float:
        v = row.get(name)
        return v[0] if v is not None and isinstance(v[0], float) else 0.0

    scalar = (get("derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2")
              + get("derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4")
              + get("derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2")
              + get("sm__sass_thread_inst_executed_op_fadd_pred_on.sum")
              + get("sm__sass_thread_inst_executed_op_fmul_pred_on.sum"))
    tensor = sum(v[0] for n, v in row.items() if _TENSOR_OPS.match(n) and isinstance(v[0], float))
    total = scalar + tensor
    return total if total > 0 and not math.isnan(total) else None


def parse_source_csv(text: str, device_file: str = "tvm_kernels.cu") -> list[tuple[int, float]]:
    """``ncu --page source --csv --print-source cuda,sass``: (line, warp-stall samples) per line of
    the kernel's CUDA file.

    ncu prints a ``"File Path"`` row per source file, then a header with ``"Line No"`` and
    ``"Warp Stall Sampling (All Samples)"``, then rows: a line's own row (its number, the samples
    summed over its instructions) followed by its SASS rows (no number). Only the file whose path
    ends with ``device_file`` (TileLang writes its device source as tvm_kernels.cu) is read, or
    the only file when there is one.
    """
    sections: list[tuple[str, list[tuple[int, float]]]] = []
    current: list[tuple[int, float]] | None = None
    num = samp = None
    for row in csv.reader(io.StringIO("\n".join(ln for ln in text.splitlines() if ln.startswith('"')))):
        if not row:
            continue
        if row[0] == "File Path":
            current = []
            sections.append((row[1] if len(row) > 1 else "", current))
            num = samp = None
            continue
        if row[0] in ("Line No", "#", "Line") and any(c.startswith("Warp Stall Sampling (All") for c in row):
            num = 0
            samp = next(i for i, c in enumerate(row) if c.startswith("Warp Stall Sampling (All"))
            if current is None:
                current = []
                sections.append(("", current))
            continue
        if current is None or num is None or samp is None or len(row) <= samp:
            continue
        n, s = _number(row[num]), _number(row[samp])
        if n is not None and s:
            current.append((int(n), s))
    chosen = [rows for path, rows in sections if path.endswith(device_file)]
    if not chosen and len(sections) == 1:
        chosen = [sections[0][1]]
    return [x for rows in chosen for x in rows]


def measured_work(result: Any, profile: Profile) -> Any:
    """``result`` (a BenchResult) with the FLOPs and DRAM bytes Nsight Compute counted in place of
    the counted-from-the-signature ones: where it then sits on the roofline is measured."""
    import dataclasses

    if not profile.flops and not profile.dram_bytes:
        return result
    note = (f"FLOPs and bytes measured by Nsight Compute ({profile.flops or 0:.4g} FLOPs, "
            f"{profile.dram_bytes or 0:.4g} DRAM bytes read + written)")
    return dataclasses.replace(result, flops=profile.flops or result.flops, bytes=profile.dram_bytes or result.bytes,
                               notes=(*result.notes, note))


def hot_python_lines(profile: Profile, machine: Any) -> list[tuple[tuple[str, int], float]]:
    """Warp-stall samples summed per Python line through the #line links (device lines inside
    TileLang's macros count for the macro's file), hottest first."""
    sums: dict[tuple[str, int], float] = {}
    for line, samples in profile.hot_device_lines:
        origin = machine.origin(line)
        if origin is not None:
            key = (origin.file, origin.line)
            sums[key] = sums.get(key, 0.0) + samples
    return sorted(sums.items(), key=lambda x: -x[1])


# Measured wavefronts per request within this fraction of tilelab's prediction count as agreeing
# (the counters include the odd request a model of one access pattern leaves out).
CONFLICT_TOLERANCE = 0.05


def conflict_verdict(predicted: float | None, measured: float) -> str:
    """tilelab's predicted wavefronts per request against the measured ones: ``"agrees"``,
    ``"disagrees"``, or ``"no prediction"``."""
    if predicted is None:
        return "no prediction"
    return "agrees" if abs(measured - predicted) <= CONFLICT_TOLERANCE * max(predicted, 1) else "disagrees"


__all__ = ["CONFLICT_TOLERANCE", "EXTRA_METRICS", "Profile", "conflict_verdict", "hot_python_lines", "measured_work",
           "parse_raw_csv", "parse_source_csv", "profile_from_metrics"]
