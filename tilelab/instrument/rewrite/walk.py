"""The walk both timeline rewriters share: which statements of a kernel's body open a phase, where
each phase ends, and the epilogue after the last.

The CUDA rewriter (``_timeline_rewrite``) reads the device source as C++ text, the CuTe DSL one
(``_timeline_rewrite_cutedsl``) reads TileLang's CuTe DSL Python through :mod:`ast`; both place
the same marks by the same rules, which live here once, over the statements each side gives:

* a statement the side classifies as a phase (a barrier wait, a TMA issue, a WGMMA arrive, an
  MMA loop, a cp.async issue, ...) gets a mark before it, which also closes the phase before;
  a phase that is not *open* (its end is not another phase's mark, as a WGMMA arrive's is its
  wait) ends after its statement, unless the next statement is a phase itself;
* consecutive cp.async issue loops of one role (and the commits between them) are one phase;
* a block that holds phases (a loop, a warp-uniform branch) is walked into; a branch that splits
  producer from consumer warps walks each side with its role; a thread-dependent branch gets no
  marks inside;
* at the kernel's top level (or one side of its warp split), what follows the last phase is the
  epilogue.

A side subclasses :class:`PhaseWalk` and answers its hooks; the statements (``N``) are its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

N = TypeVar("N")

# (kind, label, the cell line, extras: "open", "stage", "barriers")
Phase = tuple[str, str, "int | None", dict[str, Any]]

SKIP = "skip"  # :meth:`PhaseWalk.inner` of a thread-dependent branch: no marks inside

NO_PHASE = ("no pipeline phase was recognised in this kernel (no mbarrier, TMA, WGMMA, cp.async or __syncthreads "
            "pattern): each warp shows one span from kernel start to end")


def split_roles(then_text: str, else_text: str, issues: Sequence[str]) -> tuple[str, str]:
    """(the then side's role, the else side's) of a branch that splits the warps: the side that
    issues the loads (any of ``issues``: TMA or cp.async, as the side's source spells them) and
    the other does not is the producer; otherwise both are "all"."""
    then_issues = any(mark in then_text for mark in issues)
    else_issues = any(mark in else_text for mark in issues)
    if then_issues and not else_issues:
        return "producer", "consumer"
    if else_issues and not then_issues:
        return "consumer", "producer"
    return "all", "all"


def repeats(loops: Sequence[int | None]) -> int | None:
    """How many times a statement inside ``loops`` (their trip counts) runs; None when one is unknown."""
    mult: int | None = 1
    for trip in loops:
        mult = None if (mult is None or trip is None) else mult * trip
    return mult


class PhaseWalk(Generic[N]):
    """The shared walk (:meth:`walk`); a side gives the hooks below and keeps ``sites`` (its
    records, each with ``kind``, ``role`` and ``label``)."""

    sites: list[Any]

    # -- the hooks each side answers for its own statements
    def classify(self, node: N, role: str, loops: list[int | None], loop_line: int | None) -> Phase | None:
        raise NotImplementedError

    def site(self, kind: str, label: str, node: N, role: str, loops: list[int | None], cell_line: int | None,
             loop_line: int | None = None, stage: str | None = None, barriers: tuple[str, ...] = ()) -> int:
        raise NotImplementedError

    def mark_before(self, node: N, sid: int) -> None:
        raise NotImplementedError

    def end_after(self, node: N) -> None:
        raise NotImplementedError

    def is_commit(self, node: N) -> bool:
        """Whether ``node`` commits cp.async groups (it joins the cp.async issue phase before it)."""
        raise NotImplementedError

    def closes_pending(self, node: N) -> bool:
        """Whether ``node`` ends a phase waiting for its end (a blank line or a brace does not)."""
        return True

    def wgmma_named(self, nodes: list[N], index: int, last_phase: N | None) -> tuple[str, int | None]:
        """(label, cell line) of the WGMMA that the arrive ``nodes[index]`` opens, named after its T.gemm."""
        raise NotImplementedError

    def inner(self, node: N, role: str, loops: list[int | None], loop_line: int | None, top: bool
              ) -> list[tuple[list[N], str, list[int | None], int | None, bool]] | str | None:
        """The statement lists inside ``node`` to walk (each with its role, loops, pipelined line
        and whether it is a top level), :data:`SKIP` for a thread-dependent branch, or None where
        ``node`` holds no phase."""
        raise NotImplementedError

    def epilogue(self, after: list[N], role: str, loops: list[int | None]) -> None:
        """Mark the epilogue: ``after``, what follows the last phase of a top level."""
        raise NotImplementedError

    # -- the walk
    def walk_kernel(self, body: list[N]) -> list[str]:
        """Walk the kernel's body (its top level, every warp's role); the notes the timeline says."""
        return [] if self.walk(body, "all", [], None, top=True) else [NO_PHASE]

    def walk(self, nodes: list[N], role: str, loops: list[int | None], loop_line: int | None,
             top: bool = False) -> bool:
        """Marks for the phases among ``nodes``; True when any was placed. ``top``: the kernel's
        body or one side of its warp split (where an epilogue follows the last phase)."""
        placed = False
        last_phase: N | None = None
        pending_end: N | None = None  # a phase whose END waits: the next sibling may be a phase itself
        for index, node in enumerate(nodes):
            found = self.classify(node, role, loops, loop_line)
            if found is not None and found[0] == "copy_issue" and pending_end is not None \
                    and self.sites[-1].kind == "copy_issue" and self.sites[-1].role == role:
                # consecutive cp.async issue loops (and their commits) are one phase
                prev = self.sites[-1]
                more = found[1].split(": ", 1)[-1]
                if more not in prev.label:
                    self.sites[-1] = dataclasses.replace(prev, label=f"{prev.label}, {more}")
                pending_end = node
                continue
            if found is None and pending_end is not None and self.sites[-1].kind == "copy_issue" \
                    and self.is_commit(node):
                pending_end = node
                continue
            if found is not None:
                kind, label, cell_line, extra = found
                if kind == "mma" and extra.get("open"):
                    label, cell_line = self.wgmma_named(nodes, index, last_phase)
                sid = self.site(kind, label, node, role, loops, cell_line, loop_line=loop_line,
                                stage=extra.get("stage"), barriers=extra.get("barriers", ()))
                self.mark_before(node, sid)  # this mark also closes the previous phase
                pending_end = None if extra.get("open") else node
                placed = True
                last_phase = node
                continue
            if pending_end is not None and self.closes_pending(node):
                self.end_after(pending_end)
                pending_end = None
            inside = self.inner(node, role, loops, loop_line, top)
            if inside is None:
                continue
            if isinstance(inside, str):  # SKIP: a thread-dependent branch, no marks inside
                continue
            for children, child_role, child_loops, child_line, child_top in inside:
                placed |= self.walk(children, child_role, child_loops, child_line, top=child_top)
            last_phase = node
        if pending_end is not None:
            self.end_after(pending_end)
        # the epilogue: what follows the last phase of the kernel's top level (or a branch of it)
        if placed and last_phase is not None and top:
            after = nodes[nodes.index(last_phase) + 1:]
            if after:
                self.epilogue(after, role, loops)
        return placed
