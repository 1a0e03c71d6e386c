"""The timeline's analysis: record buffer -> spans, flows, and the summary the chart shows.

No TileLang, no GPU: the record buffer is a sequence of 64-bit words laid out as
:mod:`tilelab.instrument.rewrite.timeline` describes, and the site table says what each mark means.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Sequence

from ...records.timeline import WAIT_KINDS, BlockTime, Flow, RoleShare, TimelineSpan, TimelineSummary
from ..rewrite.timeline import BLOCK_WORDS, CLOCK_BITS, END, HEADER_WORDS, KERNEL_END, KERNEL_START, Site

_MASK = (1 << CLOCK_BITS) - 1
BUSY_KINDS = ("tma_issue", "copy_issue", "mma", "epilogue", "store", "kernel")
BUBBLE_THRESHOLD_NS = 64.0  # a full-barrier wait shorter than two globaltimer steps is not a bubble


def block_coords(index: int, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    gx, gy, _ = grid
    return index % gx, (index // gx) % gy, index // (gx * gy)


def block_index(block: int | Sequence[int], grid: tuple[int, int, int]) -> int:
    """A block given as a linear index or (x, y[, z]) -> its linear index; ValueError outside the grid."""
    gx, gy, gz = grid
    if isinstance(block, int):
        index = block
    else:
        coords = list(block) + [0] * (3 - len(block))
        x, y, z = coords[:3]
        if not (0 <= x < gx and 0 <= y < gy and 0 <= z < gz):
            raise ValueError(f"block {tuple(block)} is outside the grid {grid}")
        index = x + gx * (y + gy * z)
    if not 0 <= index < gx * gy * gz:
        raise ValueError(f"block {block} is outside the grid {grid} ({gx * gy * gz} blocks)")
    return index


def _unwrap(low: int, anchor: int) -> int:
    """The full 64-bit clock of a 48-bit record near ``anchor`` (the block's start clock)."""
    value = (anchor & ~_MASK) | low
    if value < anchor - (1 << (CLOCK_BITS - 1)):
        value += 1 << CLOCK_BITS
    return value


def decode(words: Sequence[int], *, sites: Sequence[Site], grid: tuple[int, int, int], warps: int,
           capacity: int, traced_blocks: Sequence[int], clock_ghz: float
           ) -> tuple[list[TimelineSpan], list[BlockTime], list[Flow], int, list[str]]:
    """(spans, blocks, flows, dropped, notes) from a record buffer."""
    if clock_ghz <= 0:
        raise ValueError("clock_ghz must be positive")
    by_id = {s.id: s for s in sites}
    nblocks = grid[0] * grid[1] * grid[2]
    notes: list[str] = []
    raw_blocks = []
    for b in range(nblocks):
        start_gt, end_gt, sm, start_clk = (int(w) for w in words[b * BLOCK_WORDS:(b + 1) * BLOCK_WORDS])
        raw_blocks.append((b, start_gt, end_gt, sm, start_clk))
    ran = [r for r in raw_blocks if r[1]]
    if len(ran) < nblocks:
        notes.append(f"{nblocks - len(ran)} of {nblocks} blocks wrote no start time")
    t0 = min((r[1] for r in ran), default=0)
    blocks = [BlockTime(block_coords(b, grid), b, sm, float(start - t0), float(max(end, start) - t0))
              for b, start, end, sm, _ in ran]
    anchors = {b: (start, clk, sm) for b, start, _, sm, clk in raw_blocks}

    spans: list[TimelineSpan] = []
    dropped = 0
    seg0 = nblocks * BLOCK_WORDS
    seg_words = HEADER_WORDS + capacity
    for slot, b in enumerate(traced_blocks):
        start_gt, start_clk, sm = anchors[b]
        if not start_gt:
            continue
        coords = block_coords(b, grid)
        bases = [seg0 + (slot * warps + w) * seg_words for w in range(warps)]
        ghz = _block_rate(words, bases, start_gt, start_clk) or clock_ghz
        if ghz != clock_ghz:
            notes.append(f"block {coords}: clock64 read at {ghz:.4f} GHz, the rate its own timers measured "
                         f"during this launch")
        for w, base in enumerate(bases):
            attempted, tag = int(words[base]), int(words[base + 1])
            if tag == 0:
                continue  # this warp does not record (granularity) or did not finish
            written = min(attempted, capacity)
            if attempted > capacity:
                dropped += attempted - capacity
            records = [int(x) for x in words[base + HEADER_WORDS:base + HEADER_WORDS + written]]
            spans.extend(_warp_spans(records, by_id, coords, sm, w, start_gt - t0, start_clk, ghz,
                                     truncated=attempted > capacity))
    if dropped:
        notes.append(f"{dropped} marks did not fit the record buffer and were dropped: the spans of the warps "
                     "that dropped them stop early (a larger capacity= keeps them)")
    flows = link_flows(spans, by_id)
    return spans, blocks, flows, dropped, notes


MIN_BASELINE_NS = 10_000.0  # shorter, and 32 ns timer steps would make the block's own rate worse than a calibration


def _block_rate(words: Sequence[int], bases: Sequence[int], start_gt: int, start_clk: int) -> float | None:
    """clock64 ticks per ns over the block's life: its start pair (globaltimer, clock64) and the
    latest end pair of its recording warps; None when that baseline is under MIN_BASELINE_NS."""
    ends = [(int(words[b + 2]), int(words[b + 3])) for b in bases if int(words[b + 1]) and int(words[b + 2])]
    if not ends:
        return None
    end_gt, end_clk = max(ends)
    if end_gt - start_gt < MIN_BASELINE_NS or end_clk <= start_clk:
        return None
    return (end_clk - start_clk) / (end_gt - start_gt)


def _warp_spans(records: list[int], sites: dict[int, Site], block: tuple[int, int, int], sm: int, warp: int,
                block_start_ns: float, start_clk: int, ghz: float, truncated: bool) -> list[TimelineSpan]:
    out: list[TimelineSpan] = []
    seen: dict[int, int] = defaultdict(int)
    open_site: Site | None = None
    open_at = 0.0
    open_iter: int | None = None
    for rec in records:
        site_id = rec >> CLOCK_BITS
        t = block_start_ns + (_unwrap(rec & _MASK, start_clk) - start_clk) / ghz
        if open_site is not None:
            out.append(_span(open_site, block, sm, warp, open_iter, open_at, t))
            open_site = None
        if site_id in (END, KERNEL_END):
            continue
        site = sites.get(site_id) if site_id != KERNEL_START else _KERNEL_SITE
        if site is None:
            continue
        n = seen[site_id]
        seen[site_id] += 1
        open_site, open_at, open_iter = site, t, (n if site.in_loop else None)
    del truncated  # an open phase at a truncated end has no end time: it is left out
    role = next((s.role for s in out if s.role != "all"), None)
    if role is not None:  # the kernel start span belongs to the warp's side too
        out = [dataclasses.replace(s, role=role) if s.role == "all" else s for s in out]
    return out


_KERNEL_SITE = Site(KERNEL_START, "kernel", "kernel start (setup before the first phase)", "all", None, None, None,
                    False)


def _span(site: Site, block: tuple[int, int, int], sm: int, warp: int, iteration: int | None, start: float,
          end: float) -> TimelineSpan:
    return TimelineSpan(block, sm, warp // 4, warp, site.role, site.kind, iteration, start, end, site.device_line,
                        site.cell_line, site.label, site.id)


def link_flows(spans: Sequence[TimelineSpan], sites: dict[int, Site]) -> list[Flow]:
    """Each producer TMA issue -> the first consumer warp's full-barrier wait of the same stage
    (a barrier the issue's loads arrive on) and iteration, per consumer warp group, same block."""
    waits: dict[tuple, int] = {}
    for i, s in enumerate(spans):
        site = sites.get(s.site)
        if site is None or s.kind != "barrier_wait" or site.stage != "full":
            continue
        for b in site.barriers:
            key = (s.block, s.warp_group, b, s.iteration or 0)
            if key not in waits or spans[waits[key]].warp > s.warp:
                waits[key] = i
    flows = []
    for i, s in enumerate(spans):
        site = sites.get(s.site)
        if site is None or s.kind != "tma_issue" or s.warp % 4:
            continue
        for b in site.barriers:
            for key, j in waits.items():
                if key[0] == s.block and key[2] == b and key[3] == (s.iteration or 0):
                    flows.append(Flow(i, j))
    return sorted(set(flows), key=lambda f: (f.source, f.target))


def summarize(spans: Sequence[TimelineSpan], blocks: Sequence[BlockTime],
              bubble_threshold_ns: float = BUBBLE_THRESHOLD_NS) -> TimelineSummary:
    """Per role the busy/waiting shares, pipeline bubbles, producer run-ahead, start skew, tail."""
    lifetimes: dict[tuple, tuple[float, float]] = {}
    for s in spans:
        key = (s.block, s.warp)
        lo, hi = lifetimes.get(key, (s.start_ns, s.end_ns))
        lifetimes[key] = (min(lo, s.start_ns), max(hi, s.end_ns))
    roles: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    role_warps: dict[str, set] = defaultdict(set)
    role_life: dict[str, float] = defaultdict(float)
    warp_role: dict[tuple, str] = {}
    for s in spans:
        if s.role != "all" or (s.block, s.warp) not in warp_role:
            warp_role[(s.block, s.warp)] = s.role
    for s in spans:
        role = warp_role[(s.block, s.warp)]
        roles[role][s.kind] += s.duration_ns
        role_warps[role].add((s.block, s.warp))
    for key, (lo, hi) in lifetimes.items():
        role_life[warp_role[key]] += hi - lo
    shares = []
    for role in sorted(roles, key=lambda r: ("producer", "consumer", "all").index(r) if r in
                       ("producer", "consumer", "all") else 3):
        life = role_life[role] or 1.0
        kinds = roles[role]
        busy = sum(v for k, v in kinds.items() if k in BUSY_KINDS) / life
        waiting = sum(v for k, v in kinds.items() if k in WAIT_KINDS) / life
        shares.append(RoleShare(role, len(role_warps[role]), role_life[role], busy, waiting,
                                max(0.0, 1.0 - busy - waiting),
                                tuple(sorted(((k, v / life) for k, v in kinds.items()), key=lambda x: -x[1]))))
    consumer_role = "consumer" if "consumer" in roles else "all"
    full_waits = [s for s in spans if s.kind == "barrier_wait" and warp_role[(s.block, s.warp)] == consumer_role
                  and "stage full" in s.label]
    bubbles = [s for s in full_waits if s.duration_ns > bubble_threshold_ns]
    run_ahead = _run_ahead(spans)
    sms = len({b.sm for b in blocks})
    first_wave = sorted(blocks, key=lambda b: b.start_ns)[:max(sms, 1)]
    skew = (max(b.start_ns for b in first_wave) - min(b.start_ns for b in first_wave)) if first_wave else 0.0
    last_end: dict[int, float] = {}
    for b in blocks:
        last_end[b.sm] = max(last_end.get(b.sm, 0.0), b.end_ns)
    grid_end = max((b.end_ns for b in blocks), default=0.0)
    tail = grid_end - min(last_end.values()) if last_end else 0.0
    return TimelineSummary(tuple(shares), len(bubbles), sum(s.duration_ns for s in bubbles), bubble_threshold_ns,
                           run_ahead, skew, tail, grid_end - min((b.start_ns for b in blocks), default=0.0), sms)


def _run_ahead(spans: Sequence[TimelineSpan]) -> float | None:
    """Mean number of stages the producer had started issuing beyond the one a consumer waits for,
    when that consumer warp group began its full-barrier wait (per block; None without both roles)."""
    issues: dict[tuple, list[float]] = defaultdict(list)
    for s in spans:
        if s.kind == "tma_issue" and s.role == "producer" and s.iteration is not None and s.warp % 4 == 0:
            issues[(s.block, s.site)].append(s.start_ns)
    if not issues:
        return None
    # the first (per block) producer issue site in program order stands for the stage
    first_site: dict[tuple[int, int, int], int] = {}  # block -> site
    for (block, site) in sorted(issues, key=lambda k: k[1]):
        first_site.setdefault(block, site)
    values = []
    for s in spans:
        if s.kind != "barrier_wait" or s.role != "consumer" or s.iteration is None or "stage full" not in s.label:
            continue
        site = first_site.get(s.block)
        if site is None:
            continue
        started = sum(1 for t in issues[(s.block, site)] if t <= s.start_ns)
        values.append(started - (s.iteration + 1))
    return statistics.fmean(values) if values else None


def phase_totals(spans: Sequence[TimelineSpan]) -> list[dict]:
    """Where the traced warps' time went, by phase (role, kind, label): count, total and mean ns,
    the user's line and the device line; the largest total first."""
    groups: dict[tuple, dict] = {}
    for s in spans:
        key = (s.role, s.kind, s.label)
        g = groups.setdefault(key, {"role": s.role, "kind": s.kind, "label": s.label, "count": 0, "total_ns": 0.0,
                                    "cell_line": s.cell_line, "device_line": s.device_line})
        g["count"] += 1
        g["total_ns"] += s.duration_ns
    out = sorted(groups.values(), key=lambda g: -g["total_ns"])
    for g in out:
        g["mean_ns"] = g["total_ns"] / g["count"]
    return out


__all__ = ["block_coords", "block_index", "decode", "link_flows", "phase_totals", "summarize"]
