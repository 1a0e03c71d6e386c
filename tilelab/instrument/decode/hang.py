"""Where a kernel hung, read from the hang watch's slots (:mod:`tilelab.instrument.rewrite.watch`).

No TileLang, no GPU: a slot buffer is a sequence of 64-bit words laid out as the watch rewrite's
docstring says, and the :class:`~tilelab.instrument.rewrite.watch.Watched` tables say what each site is.
:func:`decode` reads each warp's last state, :func:`analyse` groups the warps (producer or
consumer, which barrier, which parity, which iteration, which line) and explains what it can
(a wait for a phase nobody can complete, fewer arrivals than a barrier expects, a parity that
blocks the first pass), and :func:`hang_text` says it in a few lines for the timeout error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..rewrite.watch import FINISHED, KERNEL_SITE, RUNNING, SLOT_WORDS, STATES, WAITING, Arrival, Watched, WatchSite


@dataclass(frozen=True)
class WarpState:
    """One warp's last state, as its slot held it."""

    block: int
    warp: int
    state: str  # "not started", "running", "waiting", "finished"
    site: int
    barrier_index: int
    parity: int
    iteration: int
    time_ns: int  # %globaltimer when it was written


@dataclass(frozen=True)
class HangGroup:
    """Warps in the same state at the same place, over the watched blocks."""

    role: str  # "producer", "consumer", "all"
    state: str
    warps: tuple[int, ...]  # warp indices within a block (the union over the blocks)
    blocks: int  # how many blocks have warps in this group
    kind: str  # the site's kind: "mbarrier", "syncthreads", "named_barrier", or "kernel"
    barrier: str | None  # the barrier as the device code names it, with its index: "full[1]"
    parity: int | None
    iterations: tuple[int, ...]  # the enclosing loop's iterations the warps were in (sorted)
    stage: str | None  # "full" or "empty"
    cell_line: int | None
    device_line: int | None
    label: str
    stage_index: int | None = None  # which stage of the ring the barrier belongs to (its index past the first)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HangGroup:
        return cls(**{**d, "warps": tuple(d["warps"]), "iterations": tuple(d["iterations"])})


@dataclass(frozen=True)
class HangReport:
    """Where a kernel hung: its warps grouped by what they were doing, and what explains it.

    ``outcome``: "hung" (the watched launch stopped changing and never finished), "progressing"
    (its warps still changed state when the watch ended: slow rather than stuck), "finished"
    (the watched launch finished: the hang did not recur).
    """

    kernel: str
    outcome: str
    groups: tuple[HangGroup, ...]
    findings: tuple[str, ...]
    grid_blocks: int
    watched_blocks: int
    warps_per_block: int
    cell_file: str | None
    seconds: float | None = None  # how long locating it took (the relaunch, compile included)
    quiet_s: float | None = None  # how long the slots had not changed when they were read
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "outcome": self.outcome, "groups": [g.to_dict() for g in self.groups],
                "findings": list(self.findings), "grid_blocks": self.grid_blocks,
                "watched_blocks": self.watched_blocks, "warps_per_block": self.warps_per_block,
                "cell_file": self.cell_file, "seconds": self.seconds, "quiet_s": self.quiet_s,
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HangReport:
        return cls(d["kernel"], d["outcome"], tuple(HangGroup.from_dict(g) for g in d["groups"]),
                   tuple(d["findings"]), d["grid_blocks"], d["watched_blocks"], d["warps_per_block"],
                   d.get("cell_file"), d.get("seconds"), d.get("quiet_s"), tuple(d.get("notes") or ()))

    def waiting(self, role: str | None = None) -> list[HangGroup]:
        return [g for g in self.groups if g.state == "waiting" and (role is None or g.role == role)]

    def __str__(self) -> str:
        return hang_text(self)


# ------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------


def pack(state: int, site: int, barrier: int = 0, parity: int = 0, iteration: int = 0) -> int:
    """A state word as the device writes it (the inverse of :func:`unpack`)."""
    return ((state & 3) << 62) | ((site & 0x3FFF) << 48) | ((barrier & 0xFFFF) << 32) | ((parity & 1) << 31) \
        | (iteration & 0x7FFFFFFF)


def unpack(word: int) -> tuple[int, int, int, int, int]:
    """(state, site, barrier index, parity, iteration) of a state word."""
    word = int(word) & ((1 << 64) - 1)
    return word >> 62, (word >> 48) & 0x3FFF, (word >> 32) & 0xFFFF, (word >> 31) & 1, word & 0x7FFFFFFF


def decode(words: Sequence[int], watched: Watched) -> list[WarpState]:
    """Every watched warp's last state (blocks whose warps wrote nothing included, as "not started")."""
    need = watched.words()
    if len(words) < need:
        raise ValueError(f"the slot buffer holds {len(words)} words; {watched.blocks} blocks of {watched.warps} "
                         f"warps need {need}")
    out = []
    for b in range(watched.blocks):
        for w in range(watched.warps):
            base = (b * watched.warps + w) * SLOT_WORDS
            state, site, bar, par, it = unpack(int(words[base]))
            out.append(WarpState(b, w, STATES[state], site, bar, par, it, int(words[base + 1])))
    return out


# ------------------------------------------------------------------------------------------
# Analysis
# ------------------------------------------------------------------------------------------


def _role_of_warp(watched: Watched, warp: int) -> str:
    """A warp's role from the thread ranges of the sites (the warp-split branches it lies in)."""
    lo, hi = warp * 32, warp * 32 + 32
    for s in watched.sites:
        if s.threads and s.threads[0] <= lo and hi <= s.threads[1] and s.role != "all":
            return s.role
    for a in watched.arrivals:
        if a.thread_range and a.thread_range[0] <= lo and hi <= a.thread_range[1] and a.role != "all":
            return a.role
    return "all"


def _barrier_name(site: WatchSite, index: int) -> str | None:
    if site.kind == "mbarrier":
        return f"{site.barrier}[{index}]"
    if site.kind == "named_barrier":
        return f"named barrier {index}"
    if site.kind == "syncthreads":
        return "__syncthreads"
    return None


def analyse(states: Sequence[WarpState], watched: Watched, *, grid_blocks: int, outcome: str = "hung",
            seconds: float | None = None, quiet_s: float | None = None, notes: Sequence[str] = ()) -> HangReport:
    """Group the warps' states and explain the hang where the kernel's barriers allow it."""
    sites = {s.id: s for s in watched.sites}
    started = {s.block for s in states if s.state != "not started"}
    groups: dict[tuple, dict[str, Any]] = {}
    for s in states:
        if s.block not in started:
            continue
        site = sites.get(s.site)
        role = site.role if site is not None and site.role != "all" else _role_of_warp(watched, s.warp)
        key: tuple[str, str, int, int | None, int | None]
        if s.state == "finished" or site is None:
            key = (role, s.state, KERNEL_SITE, None, None)
        elif s.state == "running":
            key = (role, s.state, s.site, None, None)
        else:
            key = (role, s.state, s.site, s.barrier_index, s.parity)
        g = groups.setdefault(key, {"warps": set(), "blocks": set(), "iterations": set()})
        g["warps"].add(s.warp)
        g["blocks"].add(s.block)
        if site is not None and site.loop_var and s.state in ("waiting", "running"):
            g["iterations"].add(s.iteration)
    order = {"waiting": 0, "running": 1, "finished": 2, "not started": 3}
    roles = {"producer": 0, "consumer": 1, "all": 2}
    out = []
    for (role, state, sid, bar, par), g in sorted(
            groups.items(), key=lambda kv: (order.get(kv[0][1], 9), roles.get(kv[0][0], 9), min(kv[1]["warps"]))):
        site = sites.get(sid)
        if site is None or sid == KERNEL_SITE:
            out.append(HangGroup(role, state, tuple(sorted(g["warps"])), len(g["blocks"]), "kernel", None, None, (),
                                 None, None, None, "kernel start" if state == "running" else "kernel end"))
            continue
        out.append(HangGroup(role, state, tuple(sorted(g["warps"])), len(g["blocks"]), site.kind,
                             _barrier_name(site, bar) if state == "waiting" else None,
                             par if state == "waiting" and site.kind == "mbarrier" else None,
                             tuple(sorted(g["iterations"])), site.stage, site.cell_line or site.loop_line,
                             site.device_line, site.label,
                             bar - site.first_index if state == "waiting" and site.first_index is not None
                             and bar is not None and bar >= site.first_index else None))
    never = watched.blocks - len(started)
    report_notes = list(watched.notes) + list(notes)
    if never and started:
        report_notes.append(f"{never} of the {watched.blocks} watched blocks never started (the blocks that hung "
                            "hold the SMs they would run on)")
    findings = explain(out, watched) if outcome == "hung" else []
    return HangReport(watched.kernel, outcome, tuple(out), tuple(findings), grid_blocks, watched.blocks,
                      watched.warps, watched.cell_file, seconds, quiet_s, tuple(report_notes))


def _arrivers(watched: Watched, array: str, index: int) -> list[Arrival]:
    return [a for a in watched.arrivals if a.barrier == array and a.kind != "tma"
            and (a.indices is None or index in a.indices)]


def _expected(watched: Watched, array: str, index: int) -> int | None:
    return next((n for name, i, n in watched.inits if name == array and i == index), None)


def _who(role: str) -> str:
    return {"producer": "the producer", "consumer": "the consumer", "all": "the block's warps"}.get(role, role)


def _lines(items: Sequence[Arrival]) -> str:
    lines = sorted({a.cell_line for a in items if a.cell_line})
    if lines:
        return "line" + ("s " if len(lines) > 1 else " ") + ", ".join(str(n) for n in lines)
    return "device line" + ("s " if len(items) > 1 else " ") + ", ".join(sorted({str(a.device_line) for a in items}))


def explain(groups: Sequence[HangGroup], watched: Watched) -> list[str]:
    """What the waiting warps' barriers say: a cycle of waits, an arrival shortfall, a parity that
    blocks a stage's first pass, warps that wait at ``__syncthreads`` for warps that are elsewhere."""
    findings: list[str] = []
    waiting = [g for g in groups if g.state == "waiting"]
    stuck_roles = {g.role for g in waiting}
    seen_shortfall: set[tuple[str, int, int]] = set()
    cycle_parts: list[str] = []
    for g in waiting:
        if g.kind != "mbarrier" or not g.barrier:
            continue
        array, index = g.barrier.split("[")[0], int(g.barrier.split("[")[1].rstrip("]"))
        arrivers = _arrivers(watched, array, index)
        expected = _expected(watched, array, index)
        if not arrivers:
            findings.append(f"nothing in the kernel arrives on {g.barrier} (its phase can complete only through "
                            "transaction bytes), yet " + _who(g.role) + " waits on it")
            continue
        per_phase = [a.threads for a in arrivers]
        if expected is not None and all(t is not None for t in per_phase):
            total = sum(t for t in per_phase if t is not None)
            if total < expected:
                key = (array, total, expected)
                if key not in seen_shortfall:
                    seen_shortfall.add(key)
                    same = sorted({i for name, i, n in watched.inits if name == array and n == expected})
                    names = ", ".join(f"{array}[{i}]" for i in same) if len(same) > 1 else g.barrier
                    who = " and ".join(sorted({_who(a.role) for a in arrivers}))
                    findings.append(
                        f"fewer arrivals than expected: {names} {'are' if len(same) > 1 else 'is'} initialised for "
                        f"{expected} arrivals per phase, but only {total} threads arrive on "
                        f"{'them' if len(same) > 1 else 'it'} ({who}, {_lines(arrivers)}), so the phase "
                        f"{_who(g.role)} waits for never completes: make the barrier's count the number of threads "
                        "that arrive (T.alloc_barrier's arrive_count), or have all of them arrive")
        arriving_roles = {a.role for a in arrivers}
        if arriving_roles and arriving_roles <= stuck_roles and g.role not in arriving_roles:
            cycle_parts.append(f"{_who(g.role)} waits on {g.barrier}, which only "
                               f"{' and '.join(_who(r) for r in sorted(arriving_roles))} arrives on "
                               f"({_lines(arrivers)})")
        first = g.iterations and min(g.iterations) == 0
        if g.parity == 0 and first and (g.stage == "empty" or (g.role == "producer" and "consumer" in arriving_roles)):
            findings.append(
                f"a parity that blocks the first pass: {_who(g.role)} waits for parity 0 of {g.barrier} in its loop's "
                f"first iteration{_at(g)}. A fresh barrier's phase 0 completes only when its arrivals come, and "
                f"{' and '.join(_who(r) for r in sorted(arriving_roles))} arrives only after using the stage "
                "the producer has not filled yet. A stage that starts empty is waited on for parity 1 first (the "
                "phase before the first counts as complete), i.e. parity ((k // stages) % 2) ^ 1")
    if len(cycle_parts) >= 2:
        findings.insert(0, "a deadlock: " + "; ".join(cycle_parts) + ". Neither side can go on.")
    elif cycle_parts:
        findings.insert(0, cycle_parts[0] + ", and it is itself waiting")
    at_sync = [g for g in waiting if g.kind == "syncthreads"]
    elsewhere = [g for g in waiting if g.kind != "syncthreads"]
    if at_sync and elsewhere:
        findings.append("warps wait at __syncthreads for every warp of their block, but "
                        + ", ".join(f"{_who(g.role)} (warps {_warp_list(g.warps)})" for g in elsewhere)
                        + " wait elsewhere: a barrier of the whole block inside one side of a warp-split branch")
    running = [g for g in groups if g.state == "running"]
    if running and not waiting:
        never = "; ".join(f"{len(g.warps)} warp{'s' if len(g.warps) != 1 else ''} (warps {_warp_list(g.warps)}) of "
                          f"{g.blocks} block{'s' if g.blocks != 1 else ''} never finished"
                          + (f", past {g.label}" if g.kind != "kernel" else "") for g in running)
        findings.append(f"no watched warp was waiting on a barrier: {never}. They are running code that never "
                        "ends: a loop whose exit condition is never met (a spin on a flag nobody sets)")
    return findings


def _at(g: HangGroup) -> str:
    return f" (line {g.cell_line})" if g.cell_line else (f" (device line {g.device_line})" if g.device_line else "")


def _warp_list(warps: Sequence[int]) -> str:
    """0, 1, 2, 3, 8 -> "0-3, 8"."""
    out: list[str] = []
    ws = sorted(warps)
    i = 0
    while i < len(ws):
        j = i
        while j + 1 < len(ws) and ws[j + 1] == ws[j] + 1:
            j += 1
        out.append(str(ws[i]) if i == j else f"{ws[i]}-{ws[j]}")
        i = j + 1
    return ", ".join(out)


def _iterations(its: Sequence[int]) -> str:
    if not its:
        return ""
    if len(its) == 1:
        return f"iteration {its[0]}"
    if len(its) <= 3:
        return "iterations " + ", ".join(str(i) for i in its)
    return f"iterations {its[0]}..{its[-1]}"


def group_text(g: HangGroup, report: HangReport) -> str:
    """One line for a group: who, where, what."""
    role = {"producer": "producer ", "consumer": "consumer ", "all": ""}.get(g.role, f"{g.role} ")
    ws = g.warps
    whole_groups = bool(ws) and len(ws) % 4 == 0 and ws[0] % 4 == 0 and ws == tuple(range(ws[0], ws[0] + len(ws)))
    if whole_groups:
        who = f"{role}warp group{'s' if len(ws) > 4 else ''} (warps {_warp_list(ws)})"
    else:
        who = f"{role}warp{'s' if len(ws) != 1 else ''} {_warp_list(ws)}"
    blocks = f" in {g.blocks} of {report.watched_blocks} blocks" if report.watched_blocks > 1 else ""
    where = []
    if g.iterations:
        where.append(_iterations(g.iterations))
    if g.cell_line:
        name = os.path.basename(report.cell_file) if report.cell_file else ""
        where.append(f"line {g.cell_line}" + (f" of {name}" if name and not name.startswith("<") else ""))
    elif g.device_line:
        where.append(f"device line {g.device_line}")
    at = (", " + ", ".join(where)) if where else ""
    if g.state == "waiting":
        if g.kind == "mbarrier":
            stage = ""
            if g.stage and g.barrier and g.stage not in g.barrier:
                which = f"stage {g.stage_index}'s" if g.stage_index is not None else "a stage's"
                stage = f" ({which} '{g.stage}' barrier)"
            what = f"waiting on {g.barrier}{stage} for parity {g.parity}"
        elif g.kind == "syncthreads":
            what = "waiting at __syncthreads"
        else:
            what = f"waiting at {g.barrier}"
    elif g.state == "running":
        what = "running (started, never reached a barrier)" if g.kind == "kernel" else \
            f"running, past {g.label}"
    else:
        what = g.state
    return f"{who}{blocks}: {what}{at}"


def hang_text(report: HangReport) -> str:
    """The lines the timeout error shows: where the warps were, and why they could not go on."""
    took = f"; located in {report.seconds:.1f} s" if report.seconds is not None else ""
    if report.outcome == "finished":
        return (f"a second launch, watched, finished{took}: the hang did not recur (it depends on timing, or the "
                "kernel is only slow at this size; a larger timeout= tells)")
    lines = []
    if report.outcome == "progressing":
        lines.append(f"where its warps were when a second, watched launch was stopped (they were still changing "
                     f"state: slow rather than stuck{took}):")
    else:
        quiet = f", read {report.quiet_s:.1f} s after the last change" if report.quiet_s else ""
        lines.append(f"where it hung (a second launch, each warp's state in host memory{quiet}{took}):")
    shown = [g for g in report.groups if g.state in ("waiting", "running")]
    for g in shown[:8]:
        lines.append("  " + group_text(g, report))
    if len(shown) > 8:
        lines.append(f"  ... and {len(shown) - 8} more groups (err.hang.groups)")
    finished = [g for g in report.groups if g.state == "finished"]
    if finished:
        n = sum(len(g.warps) for g in finished)
        lines.append(f"  ({n} warp{'s' if n != 1 else ''} of some blocks finished)")
    if report.findings:
        lines.append("why:")
        lines.extend(f"  - {f}" for f in report.findings)
    lines.extend(f"  note: {n}" for n in report.notes)
    return "\n".join(lines)


__all__ = ["FINISHED", "RUNNING", "WAITING", "HangGroup", "HangReport", "WarpState", "analyse", "decode", "explain",
           "group_text", "hang_text", "pack", "unpack"]
