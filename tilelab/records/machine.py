"""Pure records of what the CUDA toolchain made of a kernel's device source, and of TileLang's passes.

``MachineCode``: PTX and SASS with, for each of their lines, the device-CUDA line it came from
(the toolchain's own line info), ptxas's resource counts per kernel, the theoretical occupancy,
and, from TileLang's ``#line`` directives, the Python line each device line came from.
``PassTrace``: TileLang's lowering pipeline pass by pass. Nothing here imports TileLang.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .record import MAPPING, Record

# Theoretical occupancy (tilelab.engine.occupancy computes it).


@dataclass(frozen=True)
class Occupancy(Record):
    """Resident blocks and warps per SM for one kernel launch shape on one arch."""

    arch: str
    threads_per_block: int
    registers_per_thread: int
    shared_memory_per_block: int  # static + dynamic bytes, before the driver's reserve
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limit_blocks: tuple[tuple[str, int], ...] = field(metadata=MAPPING)  # blocks each limit alone allows
    binding: tuple[str, ...]  # the limit(s) that give blocks_per_sm
    registers_per_block: int  # allocated, after rounding
    shared_memory_allocated_per_block: int  # with reserve and rounding

    @property
    def ratio(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm if self.max_warps_per_sm else 0.0

    @property
    def limited(self) -> bool:
        """True when fewer warps than the SM's maximum can be resident."""
        return self.warps_per_sm < self.max_warps_per_sm

    def sentence(self) -> str:
        if self.blocks_per_sm == 0:
            return (f"does not fit on an SM of {self.arch}: {', '.join(self.binding)} "
                    f"exceed(s) the per-block limit")
        return (f"{self.blocks_per_sm} block(s) = {self.warps_per_sm} of {self.max_warps_per_sm} warps per SM "
                f"({self.ratio:.0%}), bound by {' and '.join(self.binding)}")


@dataclass(frozen=True)
class KernelResources(Record):
    """``ptxas -v`` for one ``__global__`` function."""

    kernel: str
    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    static_shared_bytes: int = 0
    dynamic_shared_bytes: int = 0  # from the launch configuration, not from ptxas
    barriers: int = 0
    constant_bytes: int = 0
    occupancy: Occupancy | None = None

    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)

    def flags(self) -> list[str]:
        """Sentences for what deserves attention: spills and occupancy limits."""
        out = []
        if self.spills:
            out.append(f"{self.kernel} spills registers: {self.spill_store_bytes} bytes stored and "
                       f"{self.spill_load_bytes} bytes loaded per thread through local memory")
        occ = self.occupancy
        if occ is not None and occ.blocks_per_sm == 0:
            out.append(f"{self.kernel} {occ.sentence()}")
        elif occ is not None and occ.limited:
            out.append(f"{self.kernel}: occupancy {occ.sentence()}")
        return out


@dataclass(frozen=True)
class SourceOrigin:
    """Where a run of device-CUDA lines came from, per TileLang's ``#line`` directive."""

    first: int  # device lines first..last (1-based, in the source tilelab shows)
    last: int
    file: str
    line: int
    user: bool  # False for lines inside TileLang's own Python (its GEMM macros, ...)

    # written as a list (one per origin, many per report), not as a dict of its fields
    def to_dict(self) -> list[Any]:
        return [self.first, self.last, self.file, self.line, self.user]

    @classmethod
    def from_dict(cls, d: list[Any]) -> SourceOrigin:
        return cls(int(d[0]), int(d[1]), str(d[2]), int(d[3]), bool(d[4]))


@dataclass(frozen=True)
class MachineCode(Record):
    """PTX, SASS, resources and line links for a report's device source.

    ``ptx_device_lines[i]`` / ``sass_device_lines[i]``: the device-CUDA line that line ``i + 1`` of
    the PTX / SASS text belongs to (0: none, e.g. a directive or label). ``missing`` says why
    there is no machine code (no toolchain, a failed compile) and what to do about it.
    """

    arch: str
    ptx: str = ""
    sass: str = ""
    ptx_device_lines: tuple[int, ...] = ()
    sass_device_lines: tuple[int, ...] = ()
    resources: tuple[KernelResources, ...] = ()
    origins: tuple[SourceOrigin, ...] = ()
    python_sources: tuple[tuple[str, str], ...] = ()  # (file, text) of the user's files that #line names
    tools: tuple[tuple[str, str], ...] = ()  # (tool, path and version)
    missing: str | None = None
    log: str = ""  # the compiler's diagnostics when it failed

    # -- queries ---------------------------------------------------------------------------
    def origin(self, device_line: int) -> SourceOrigin | None:
        for item in self.origins:
            if item.first <= device_line <= item.last:
                return item
        return None

    def device_lines_of(self, file: str, line: int) -> list[int]:
        """Device-CUDA lines that a Python line generated."""
        return [n for o in self.origins if o.file == file and o.line == line for n in range(o.first, o.last + 1)]

    def sass_lines_of(self, device_line: int) -> list[int]:
        return [i + 1 for i, d in enumerate(self.sass_device_lines) if d == device_line]

    def ptx_lines_of(self, device_line: int) -> list[int]:
        return [i + 1 for i, d in enumerate(self.ptx_device_lines) if d == device_line]

    def sass_of_device_lines(self) -> dict[int, tuple[int, int]]:
        """Each device line with SASS -> (its first SASS line, how many SASS lines it became)."""
        first: dict[int, int] = {}
        counts: dict[int, int] = {}
        for i, d in enumerate(self.sass_device_lines):
            if d:
                first.setdefault(d, i + 1)
                counts[d] = counts.get(d, 0) + 1
        return {d: (line, counts[d]) for d, line in first.items()}

    def python_line_groups(self) -> dict[tuple[str, int], list[int]]:
        """Each (file, line) that ``#line`` directives name -> the device lines it became, in order."""
        groups: dict[tuple[str, int], list[int]] = {}
        for o in self.origins:
            groups.setdefault((o.file, o.line), []).extend(range(o.first, o.last + 1))
        return groups

    def flags(self) -> list[str]:
        return [f for r in self.resources for f in r.flags()]

    def resource(self, kernel: str) -> KernelResources:
        for item in self.resources:
            if item.kernel == kernel:
                return item
        raise KeyError(f"no resources for kernel {kernel!r}; have {[r.kernel for r in self.resources]}")

    # -- serialisation ---------------------------------------------------------------------
# A SASS line as nvdisasm prints it: "/*0040*/  @!P0 BRA `(.L_x_1) ;" -> its opcode, before the
# first dot of its modifiers (HMMA.16816.F32 -> HMMA); a guard predicate (@P0, @!UP1) comes first.
_SASS_OPCODE = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def sass_opcode(text: str) -> str | None:
    """The opcode of one SASS listing line (None for a label, a comment or a blank line)."""
    m = _SASS_OPCODE.match(text)
    return m.group(1).split(".")[0] if m else None


def opcode_counts(sass_lines: list[str], numbers: Iterable[int]) -> Counter[str]:
    """How often each opcode occurs among the 1-based ``numbers`` of ``sass_lines``."""
    opcodes = (sass_opcode(sass_lines[n - 1]) for n in numbers if n <= len(sass_lines))
    return Counter(op for op in opcodes if op is not None)


@dataclass(frozen=True)
class PassStep(Record):
    """One top-level pass of TileLang's lowering pipeline."""

    name: str
    seconds: float
    changed: bool
    diff: str = ""  # unified diff of the TVMScript, when changed (may be cut, see ``diff_cut``)
    diff_cut: bool = False
    phase: str | None = None


@dataclass(frozen=True)
class PassTrace(Record):
    """TileLang's lowering, pass by pass, as its own pass instrumentation saw it."""

    steps: tuple[PassStep, ...]
    input_script: str = ""

    @property
    def changed(self) -> tuple[PassStep, ...]:
        return tuple(s for s in self.steps if s.changed)

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

__all__ = ["KernelResources", "MachineCode", "PassStep", "PassTrace", "SourceOrigin", "opcode_counts", "sass_opcode"]
