"""The intra-kernel timeline's records: what ``tilelab.timeline`` returns.

Frozen, JSON round-trip (``to_dict``/``from_dict``, ``save``/``load``), no TileLang, no IPython.
``Timeline.to_perfetto(path)`` and the notebook display import their renderer only when called.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .display import Displayed, DisplayedText
from .errors import ReportFileError
from .record import Record
from .record import from_dict as _from_dict
from .record import to_dict as _to_dict

TIMELINE_FORMAT = 2  # 2: grid summaries, compact marks (format 1 files still load)

KINDS = ("barrier_wait", "tma_issue", "copy_issue", "mma", "mma_wait", "epilogue", "store", "region", "kernel", "other")
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
class GridPhase(Record):
    """One phase (a site of the kernel) summed over every block of the grid, for one role.

    ``count``: how many times the recording warps ran it in all; ``per_warp_min``/``max``: the
    fewest and most times one recording warp ran it (a GEMM's MMA: ceil(K / block_K) each);
    ``mean_ns``: the mean duration of one run; ``p50_ns``/``p95_ns``: percentiles over the
    recording warps of each warp's mean duration of this phase; ``share``: its part of the
    role's warps' lifetime. Site 0 is ``other`` (between phases), site 1 the kernel's setup.
    """

    role: str
    site: int
    kind: str
    label: str
    cell_line: int | None
    count: int
    warps: int  # the recording warps that ran it
    per_warp_min: int
    per_warp_max: int
    total_ns: float
    mean_ns: float
    p50_ns: float
    p95_ns: float
    share: float


@dataclass(frozen=True)
class SmLoad(Record):
    """One SM over the launch: the blocks it ran, the time it held one, and its idle tail (from its
    last block's end to the grid's end)."""

    sm: int
    blocks: int
    busy_ns: float
    idle_tail_ns: float


@dataclass(frozen=True)
class GridSummary(Record):
    """Statistics over every block of the grid (``tilelab.timeline(..., blocks="all")``): per role
    and phase (:class:`GridPhase`), per SM (:class:`SmLoad`), and the first wave (each SM's first
    block) against the rest. ``recording_warps`` per block (the first warp of each warp group,
    or every warp); ``words``: the record buffer's size in 64-bit words."""

    phases: tuple[GridPhase, ...]
    sms: tuple[SmLoad, ...]
    blocks: int
    recording_warps: int
    first_wave_blocks: int
    first_wave_mean_ns: float
    rest_blocks: int
    rest_mean_ns: float | None
    words: int = 0

    def phase(self, role: str, kind: str) -> list[GridPhase]:
        return [p for p in self.phases if p.role == role and p.kind == kind]


@dataclass(frozen=True)
class PhaseChange(Record):
    """One phase (role, kind, label) in two timelines: total ns per traced warp and count in each
    (None where a timeline has no such phase), and the change b - a."""

    role: str
    kind: str
    label: str
    a_ns: float | None
    b_ns: float | None
    a_count: int
    b_count: int

    @property
    def change_ns(self) -> float | None:
        return None if self.a_ns is None or self.b_ns is None else self.b_ns - self.a_ns

    @property
    def waiting(self) -> bool:
        return self.kind in WAIT_KINDS


@dataclass(frozen=True)
class RoleChange(Record):
    """One role in two timelines: busy and waiting ns per traced warp in each."""

    role: str
    a_busy_ns: float
    b_busy_ns: float
    a_wait_ns: float
    b_wait_ns: float


@dataclass(frozen=True, repr=False)
class TimelineComparison(DisplayedText, Record):
    """Two timelines side by side (``tilelab.compare_timelines(a, b)`` or ``a.compare(b)``): per
    role, the busy and waiting time per warp in each; per phase, the change (:class:`PhaseChange`)."""

    a: str
    b: str
    a_ms: float | None
    b_ms: float | None
    roles: tuple[RoleChange, ...]
    phases: tuple[PhaseChange, ...]


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
    grid_summary: GridSummary | None = None  # blocks="all": statistics over every block
    marks: str = "all"  # "compact": each WGMMA's issue and wait were recorded as one MMA phase

    def compare(self, other: Timeline, *, names: tuple[str, str] | None = None) -> TimelineComparison:
        """This timeline against ``other``: per role and phase, the change in wait and busy time
        (``tilelab.compare_timelines``)."""
        return compare_timelines(self, other, names=names)

    def lanes(self) -> list[tuple[tuple[int, int, int], int]]:
        """(block, warp group) of every lane the chart draws, in order."""
        return sorted({(s.block, s.warp_group) for s in self.spans}, key=lambda x: (x[0][2], x[0][1], x[0][0], x[1]))

    def to_dict(self) -> dict[str, Any]:
        return {"format": TIMELINE_FORMAT, **_to_dict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timeline:
        if d.get("format") not in (1, TIMELINE_FORMAT):
            raise ReportFileError(f"not a tilelab timeline of format {TIMELINE_FORMAT} (format {d.get('format')!r})")
        try:
            return _from_dict(cls, {k: v for k, v in d.items() if k != "format"})
        except (KeyError, TypeError, ValueError) as err:
            raise ReportFileError(f"a tilelab timeline with a field tilelab cannot read: {err}") from err

    def save(self, path: str | Path) -> Path:
        """Write the timeline as JSON (versioned: ``format``); :meth:`load` reads it back anywhere,
        no GPU or TileLang needed."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict()))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        """A timeline :meth:`save` wrote; :class:`~tilelab.ReportFileError` names what is wrong
        with a file that is not one."""
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
# Two timelines side by side
# ------------------------------------------------------------------------------------------


def compare_timelines(a: Timeline, b: Timeline, *, names: tuple[str, str] | None = None) -> TimelineComparison:
    """``a`` against ``b`` (two stage counts, two tile shapes, before and after a change): per role
    the busy and waiting time per traced warp, per phase (role, kind, label) its time per traced
    warp and count in each, and the change b - a. Timelines of every block (``blocks="all"``)
    compare by their grid summaries (per recording warp). ``names`` names the two columns (by
    default the kernels' names, with ``(1)``/``(2)`` where equal)."""
    if not isinstance(a, Timeline) or not isinstance(b, Timeline):
        raise TypeError(f"compare_timelines takes two Timelines (tilelab.timeline(...) or Timeline.load(path)), "
                        f"not {type(a).__name__} and {type(b).__name__}")
    a_label, b_label = names if names else (a.kernel, b.kernel)
    if a_label == b_label:
        a_label, b_label = f"{a_label} (1)", f"{b_label} (2)"
    pa, pb = _per_warp_phases(a), _per_warp_phases(b)
    keys = list(dict.fromkeys(list(pa) + list(pb)))
    phases = tuple(PhaseChange(role, kind, label, pa[k][0] if k in pa else None, pb[k][0] if k in pb else None,
                               pa[k][1] if k in pa else 0, pb[k][1] if k in pb else 0)
                   for k in keys for role, kind, label in [k])
    roles = []
    for role in dict.fromkeys(k[0] for k in keys):
        def total(table: dict[tuple[str, str, str], tuple[float, int]], wait: bool, role: str = role) -> float:
            return sum(v[0] for k, v in table.items()
                       if k[0] == role and k[1] != "other" and (k[1] in WAIT_KINDS) == wait)
        roles.append(RoleChange(role, total(pa, False), total(pb, False), total(pa, True), total(pb, True)))
    phases = tuple(sorted(phases, key=lambda p: -abs(p.change_ns or 0.0)))
    return TimelineComparison(a_label, b_label, a.plain_ms, b.plain_ms, tuple(roles), phases)


def _per_warp_phases(tl: Timeline) -> dict[tuple[str, str, str], tuple[float, int]]:
    """(role, kind, label) -> (ns per recording warp, count per recording warp)."""
    if tl.grid_summary is not None:
        return {(p.role, p.kind, p.label): (p.total_ns / max(1, p.warps), round(p.count / max(1, p.warps)))
                for p in tl.grid_summary.phases}
    lanes: dict[str, set] = defaultdict(set)
    for s in tl.spans:
        lanes[s.role].add((s.block, s.warp))
    table: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for s in tl.spans:
        entry = table[(s.role, s.kind, s.label)]
        entry[0] += s.duration_ns
        entry[1] += 1
    return {k: (v[0] / max(1, len(lanes[k[0]])), round(v[1] / max(1, len(lanes[k[0]])))) for k, v in table.items()}


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



__all__ = ["BlockTime", "compare_timelines", "Flow", "GridPhase", "GridSummary", "KINDS", "PhaseChange",
           "RoleChange", "SmLoad", "TimelineComparison", "RoleShare", "Timeline", "perfetto_trace", "TimelineSpan",
           "TimelineSummary",
           "WAIT_KINDS"]
