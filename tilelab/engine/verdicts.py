"""What tilelab concludes about a report's facts, derived once, before any markup.

The renderers (:mod:`tilelab.render.html`) only format what these functions return:

* :func:`operand_uses`: which WGMMA operands read each shared buffer, and how many rows or
  columns of MN one instruction reads there (A: always ``WGMMA_M``; B: the instruction's N);
* :func:`operand_verdicts`: for each WGMMA operand, whether the descriptor tilelab computes from
  the buffer's inferred layout agrees with the compiler's (:func:`tilelab.swizzle.check_wgmma_operand`);
* :func:`layout_checks`: the same check for each operand that reads one drawn layout;
* :func:`layout_repeats`: which layouts of a report equal an earlier one (drawn once);
* :func:`lds_phases` and :func:`worst_lds_conflict`: the CDNA LDS reads' phases and their worst
  bank conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cuda_facts import WGMMA_M
from ..records.kernel import KernelReport, Layout, LdsRead, WgmmaOperand


def instruction_mn(role: str, instruction_n: int | None) -> int:
    """The MN extent one WGMMA instruction reads of an operand: ``WGMMA_M`` (64) rows of M for A,
    the instruction's N for B."""
    return WGMMA_M if role == "A" else int(instruction_n or 0)


@dataclass(frozen=True)
class OperandUse:
    """One WGMMA operand reading a shared buffer: its role ("A" or "B"), the compiler's
    descriptor, and the MN extent one instruction reads (:func:`instruction_mn`)."""

    role: str
    operand: WgmmaOperand
    inst_mn: int


def operand_uses(report: KernelReport) -> dict[str, tuple[OperandUse, ...]]:
    """Each shared buffer that a WGMMA operand reads, with every distinct use, in the order the
    report lists its instructions (A before B)."""
    uses: dict[str, list[OperandUse]] = {}
    for w in report.wgmma:
        for role, op in (("A", w.a), ("B", w.b)):
            if op is not None and op.buffer:
                use = OperandUse(role, op, instruction_mn(role, w.n))
                if use not in uses.setdefault(op.buffer, []):
                    uses[op.buffer].append(use)
    return {buffer: tuple(items) for buffer, items in uses.items()}


def shared_layout(report: KernelReport, buffer: str | None) -> Layout | None:
    """The shared-memory layout the report recorded for ``buffer`` (None if it recorded none)."""
    return next((x for x in report.layouts if x.buffer == buffer and x.scope == "shared"), None)


@dataclass(frozen=True)
class OperandVerdict:
    """tilelab's reading of one operand of one WGMMA instruction.

    ``verdict``: ``"registers"`` (an ``rs`` A operand: no descriptor), ``"unknown"`` (no shared
    layout recorded for its buffer), ``"agrees"``/``"differs"`` (tilelab's layout_type, LBO and SBO
    against the compiler's) or ``"n/a"`` (tilelab could not compute a descriptor: ``reason``).
    """

    index: int  # into report.wgmma
    instruction: str
    role: str
    operand: WgmmaOperand | None
    inst_mn: int
    verdict: str
    reason: str = ""
    check: Any = None  # the swizzle.OperandCheck behind the verdict, when there is one


def operand_verdict(report: KernelReport, index: int, role: str) -> OperandVerdict:
    """The verdict on operand ``role`` of ``report.wgmma[index]``."""
    w = report.wgmma[index]
    op = w.a if role == "A" else w.b
    inst_mn = instruction_mn(role, w.n)
    if op is None:
        return OperandVerdict(index, w.instruction, role, None, inst_mn, "registers")
    layout = shared_layout(report, op.buffer)
    if layout is None:
        return OperandVerdict(index, w.instruction, role, op, inst_mn, "unknown")
    from .. import swizzle as sw

    check = sw.check_wgmma_operand(layout, op, role, inst_mn)
    verdict = "agrees" if check.agrees else "differs" if check.descriptor is not None else "n/a"
    return OperandVerdict(index, w.instruction, role, op, inst_mn, verdict, check.reason, check)


def operand_verdicts(report: KernelReport) -> tuple[OperandVerdict, ...]:
    """Every WGMMA operand's verdict: per instruction, A then B."""
    return tuple(operand_verdict(report, i, role) for i in range(len(report.wgmma)) for role in ("A", "B"))


def layout_identity(layout: Layout) -> tuple:
    """What makes two layouts the same picture: scope, dtype, shape and the per-element maps
    (the buffer's name and the compiler's description aside)."""
    return (layout.scope, layout.dtype, layout.shape, layout.offsets, layout.threads, layout.locals_,
            layout.replicate, layout.thread_base)


def layout_repeats(report: KernelReport) -> tuple[int, ...]:
    """For each layout of the report, the index of the first layout equal to it (its own index
    when none before it is)."""
    first: dict[tuple, int] = {}
    return tuple(first.setdefault(layout_identity(lay), i) for i, lay in enumerate(report.layouts))


def layout_checks(layout: Layout, uses: Sequence[OperandUse]) -> tuple[tuple[OperandUse, Any], ...]:
    """Each use of a shared ``layout`` by a WGMMA operand with tilelab's check of it (a
    :class:`tilelab.swizzle.OperandCheck`: the descriptor tilelab computes from the layout's
    offsets, and whether it agrees with the compiler's)."""
    from .. import swizzle as sw

    return tuple((use, sw.check_wgmma_operand(layout, use.operand, use.role, use.inst_mn)) for use in uses)


def layout_elements(layout: Layout) -> int:
    """How many elements the layout's shape holds."""
    total = 1
    for extent in layout.shape:
        total *= int(extent)
    return total


@dataclass(frozen=True)
class LdsPhase:
    """One phase of an LDS read: the lanes it serves, the clocks it takes (worst loop step) and
    the first bank each of its lanes reads in the first loop step."""

    first_lane: int
    last_lane: int
    clocks: int
    banks: tuple[int, ...]


def lds_phases(read: LdsRead) -> tuple[LdsPhase, ...]:
    """The read's phases in lane order (each serves an equal run of consecutive lanes)."""
    per = len(read.byte_addresses) // max(1, len(read.phase_clocks))
    banks = read.banks
    return tuple(LdsPhase(p * per, (p + 1) * per - 1, clocks, banks[p * per:(p + 1) * per])
                 for p, clocks in enumerate(read.phase_clocks))


def lds_conflicted(read: LdsRead) -> bool:
    """Whether any phase of the read takes more than one clock (a bank conflict)."""
    return read.conflict_degree > 1


def worst_lds_conflict(report: KernelReport) -> float | None:
    """The largest conflict degree of the report's LDS reads (1: conflict-free); None without any."""
    return max((r.conflict_degree for r in report.lds_reads), default=None)


__all__ = ["LdsPhase", "OperandUse", "OperandVerdict", "instruction_mn", "layout_checks", "layout_elements",
           "layout_identity", "layout_repeats", "lds_conflicted", "lds_phases", "operand_uses",
           "operand_verdict", "operand_verdicts", "shared_layout", "worst_lds_conflict"]
