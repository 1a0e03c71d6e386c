"""The intra-kernel timeline's records: what ``tilelab.timeline`` returns.

Frozen, JSON round-trip (``to_dict``/``from_dict``, ``save``/``load``), no TileLang, no IPython.
``Timeline.to_perfetto(path)`` and the notebook display import their renderer only when called.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .display import Displayed
from .errors import ReportFileError
from .record import Record
from .record import from_dict as _from_dict
from .record import to_dict as _to_dict

TIMELINE_FORMAT = 1

KINDS = ("barrier_wait", "tma_issue", "copy_issue", "mma", "mma_wait", "epilogue", "store", "kernel")
WAIT_KINDS = ("barrier_wait", "mma_wait")


@dataclass(frozen=True)
class TimelineSpan(Record):
    """One phase of one warp: ``[start_ns, end_ns)`` from the grid's first block start.

    ``block`` is the hardware block index (x, y, z) (before any rasterisation the kernel applies);
    ``warp`` the warp's index in the block and ``warp_group`` ``warp // 4``; ``role`` "producer",
    "consumer" (the two sides of a warp-specialised kernel) or "all"; ``iteration`` the n-th time
    this warp reached this phase inside a loop (the pipeline's k), None outside loops.
    ``device_line`` is the line in the kernel's device source, ``cell_line`` the user's line.
    """

    block: tuple[int, int, int]
    sm: int
    warp_group: int
    warp: int
    role: str
    kind: str
    iteration: int | None
    start_ns: float
    end_ns: float
    device_line: int | None
    cell_line: int | None
    label: str
    site: int = 0  # the mark's site id (which statement of the kernel opened this phase)

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class BlockTime(Record):
    """When a block ran, for every block of the grid (start skew and the grid's tail)."""

    block: tuple[int, int, int]
    index: int
    sm: int
    start_ns: float
    end_ns: float


@dataclass(frozen=True)
class Flow(Record):
    """A producer's stage issue (span index ``source``) releasing a consumer's wait (``target``)."""

    source: int
    target: int


@dataclass(frozen=True)
class RoleShare(Record):
    """Per role: the share of its warps' time in each phase kind (and unmarked: ``other``)."""

    role: str
    warps: int
    lifetime_ns: float
    busy: float  # issue, MMA, epilogue and store phases
    waiting: float  # barrier and WGMMA waits
    other: float  # between marked phases (address math, softmax, ...)
    by_kind: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class TimelineSummary(Record):
    """What the chart's summary says, computed from the spans (``tilelab.instrument.decode.timeline.summarize``)."""

    roles: tuple[RoleShare, ...]
    bubbles: int  # consumer waits on a full barrier that lasted longer than the bubble threshold
    bubble_ns: float  # their total time (all traced consumer warps)
    bubble_threshold_ns: float
    run_ahead: float | None  # mean stages the producer had issued ahead when a consumer began waiting
    start_skew_ns: float  # the spread of block start times within the first wave (blocks <= SMs)
    tail_ns: float  # from the first SM's last block end to the grid's end
    grid_ns: float
    sms: int


@dataclass(frozen=True)
class Timeline(Displayed):
    """The intra-kernel timeline of one instrumented launch.

    ``spans``: one per phase per traced warp (every warp, or the first warp of each warp group);
    ``blocks``: start, end and SM of every block of the grid; ``flows``: stage issue -> the
    consumer wait it released; ``dropped``: marks that did not fit the record buffer (never
    silent: the spans of a warp that dropped end early); ``overhead``: the instrumented launch's
    median time over the plain kernel's, measured side by side in the same call (None when not
    measured); ``notes``: what could not be placed or named.
    """

    kernel: str
    device: str
    backend: str
    granularity: str
    grid: tuple[int, int, int]
    threads: int
    traced_blocks: tuple[tuple[int, int, int], ...]
    spans: tuple[TimelineSpan, ...]
    blocks: tuple[BlockTime, ...]
    flows: tuple[Flow, ...] = ()
    dropped: int = 0
    overhead: float | None = None
    plain_ms: float | None = None
    instrumented_ms: float | None = None
    clock_ghz: float = 0.0
    cell_file: str | None = None
    capture_s: float | None = None
    notes: tuple[str, ...] = ()
    summary: TimelineSummary | None = None

    def lanes(self) -> list[tuple[tuple[int, int, int], int]]:
        """(block, warp group) of every lane the chart draws, in order."""
        return sorted({(s.block, s.warp_group) for s in self.spans}, key=lambda x: (x[0][2], x[0][1], x[0][0], x[1]))

    def to_dict(self) -> dict[str, Any]:
        return {"format": TIMELINE_FORMAT, **_to_dict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timeline:
        if d.get("format") != TIMELINE_FORMAT:
            raise ReportFileError(f"not a tilelab timeline of format {TIMELINE_FORMAT} (format {d.get('format')!r})")
        return _from_dict(cls, d)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict()))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise ReportFileError(f"cannot read a timeline from {path}: {err}") from err
        if not isinstance(data, dict):
            raise ReportFileError(f"{path} does not hold a tilelab timeline (a JSON object)")
        return cls.from_dict(data)

    def to_perfetto(self, path: str | Path) -> Path:
        """Write a trace Perfetto (ui.perfetto.dev) and chrome://tracing open: one track per
        block x warp group, flows from each stage issue to the consumer wait it releases."""
        path = Path(path)
        path.write_text(json.dumps(perfetto_trace(self)))
        return path

    def __repr__(self) -> str:
        return (f"Timeline({self.kernel}: {len(self.spans)} spans in {len(self.lanes())} lanes, "
                f"{len(self.blocks)} blocks, dropped {self.dropped})")


# ------------------------------------------------------------------------------------------
# Perfetto / chrome://tracing (the Trace Event Format, JSON object form)
# ------------------------------------------------------------------------------------------


def perfetto_trace(tl: Timeline) -> dict[str, Any]:
    """One process per traced block (tracks: its warp groups, or warps at warp granularity) and
    one "grid" process whose tracks are the SMs, each block a slice; flow arrows ("s" -> "f")
    from each stage issue to the consumer wait it releases. Times in microseconds."""
    events: list[dict[str, Any]] = []
    per_warp = tl.granularity == "warp"
    pids: dict[tuple, int] = {}
    for lane_block in sorted({s.block for s in tl.spans}):
        pids[lane_block] = len(pids) + 1
        sm = next(s.sm for s in tl.spans if s.block == lane_block)
        events.append({"ph": "M", "name": "process_name", "pid": pids[lane_block], "tid": 0,
                       "args": {"name": f"{tl.kernel} block {lane_block} (SM {sm})"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pids[lane_block], "tid": 0,
                       "args": {"sort_index": pids[lane_block]}})

    def tid(s: TimelineSpan) -> int:
        return s.warp if per_warp else s.warp_group

    named: set[tuple[int, int]] = set()
    for s in tl.spans:
        key = (pids[s.block], tid(s))
        if key not in named:
            named.add(key)
            what = f"warp {s.warp}" if per_warp else f"warp group {s.warp_group}"
            events.append({"ph": "M", "name": "thread_name", "pid": key[0], "tid": key[1],
                           "args": {"name": f"{what} ({s.role})"}})
    for s in tl.spans:
        args: dict[str, Any] = {"kind": s.kind, "warp": s.warp, "role": s.role}
        if s.iteration is not None:
            args["iteration"] = s.iteration
        if s.cell_line is not None:
            args["cell_line"] = s.cell_line
        if s.device_line is not None:
            args["device_line"] = s.device_line
        events.append({"ph": "X", "name": s.label or s.kind, "cat": s.kind, "ts": s.start_ns / 1e3,
                       "dur": max(s.duration_ns, 0.0) / 1e3, "pid": pids[s.block], "tid": tid(s), "args": args})
    for n, f in enumerate(tl.flows):
        a, b = tl.spans[f.source], tl.spans[f.target]
        # the start binds to the issue slice; the end (binding point "enclosing") lies inside the
        # wait slice, no earlier than the start: the wait ends after the issue began
        start = a.start_ns + min(max(a.duration_ns, 0.0) / 2, 1.0)
        end = min(max(start, b.start_ns + min(max(b.duration_ns, 0.0) / 2, 1.0)), b.end_ns)
        events.append({"ph": "s", "id": n + 1, "name": "stage", "cat": "stage", "ts": start / 1e3,
                       "pid": pids[a.block], "tid": tid(a)})
        events.append({"ph": "f", "bp": "e", "id": n + 1, "name": "stage", "cat": "stage", "ts": end / 1e3,
                       "pid": pids[b.block], "tid": tid(b)})
    if tl.blocks:
        events.append({"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                       "args": {"name": f"{tl.kernel} grid: every block, by SM"}})
        for blk in tl.blocks:
            events.append({"ph": "X", "name": f"block {blk.block}", "cat": "block", "ts": blk.start_ns / 1e3,
                           "dur": max(blk.end_ns - blk.start_ns, 0.0) / 1e3, "pid": 0, "tid": blk.sm,
                           "args": {"index": blk.index}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": tl.kernel, "device": tl.device, "dropped": tl.dropped,
                          "clock_ghz": tl.clock_ghz}}



__all__ = ["BlockTime", "Flow", "KINDS", "RoleShare", "Timeline", "perfetto_trace", "TimelineSpan", "TimelineSummary",
           "WAIT_KINDS"]
