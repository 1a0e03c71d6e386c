"""Why TileLang could not lower a kernel, in tile-program terms: the causes, by mechanism first.

TileLang's compile failures are C++ checks and Python asserts deep in its passes ("local_buf must be
a fragment", "Check failed: (0) is false: int4"). :func:`diagnose` takes the kernel's state at the
failure (the pass that was running, the tile operations with their buffers' memories, dtypes and
shapes, the threads, the target) and the sentence TVM gives with its trace, and returns a
:class:`Diagnosis`: the pass, the tile op and buffers involved, the kernel line when it can be
placed, and, for a known cause, what it means and what to change. The state is the key: the rules
of :mod:`tilelab._tilelang.mechanisms` are tried first, and TileLang's sentence is evidence, which
may say which case of the mechanism it is (:data:`REFINES`: which rounding mode, which WGMMA
constraint). Only where no rule finds its mechanism is the sentence matched against the catalogue's
patterns, a fallback. A failure no cause explains still gets the pass, the line, the operation's
buffers and TVM's sentence, and says so.

Each cause is declared with :func:`cause` (the shape of :mod:`tilelab.engine.tma_rules`): an id, a
title, the patterns of TileLang 0.1.15's own wording that recognise it, what it means and what
to change; ``tests/doctor_kernels.py`` holds a small kernel of ours that triggers each one, and
``tests/_tilelang/test_doctor.py`` lowers every one of them and checks the cause it is given.

Pure: imports neither TileLang nor the rest of tilelab (the adapter calls it when it builds a
:class:`~tilelab.LoweringError`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import mechanisms as _mechanisms

__all__ = ["CAUSES", "Cause", "Diagnosis", "TileSite", "cause", "diagnose", "pass_from_trace", "place",
           "tile_op_from_trace"]


@dataclass(frozen=True)
class TileSite:
    """One tile operation of a kernel as TileLang built it: ``op`` (``T.copy``, ``T.Parallel``,
    ``T.Pipelined``, or the name of another intrinsic call such as ``tl.tvm_mfma``), the source
    line its builder stamped on it, and the buffers it touches as (name, dtype, scope, shape)."""

    op: str
    line: int
    file: str = ""
    buffers: tuple[tuple[str, str, str, str], ...] = ()
    text: str = ""
    # For a loop (T.Parallel, T.Pipelined): its variables and extents (a T.Parallel nest together),
    # the buffer accesses of its body as (buffer, indices as Python text, whether it is a store),
    # and its annotations (num_stages, order, stage) with the number of statements of its body.
    loop_vars: tuple[tuple[str, int], ...] = ()
    accesses: tuple[tuple[str, str, bool], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()

    def dtypes(self) -> list[str]:
        return [b[1] for b in self.buffers]

    def scopes(self) -> list[str]:
        return [b[2] for b in self.buffers]


@dataclass(frozen=True)
class Diagnosis:
    """What tilelab can say about one compile failure.

    ``cause`` is the catalogue id (None when the failure is not in the catalogue), ``meaning``
    and ``advice`` its explanation and what to change, filled in with the names the message gave
    (buffers, shapes). ``pass_name`` is TileLang's pass that failed (``tl.LayoutInference``), or
    ``"elaboration"`` when building the prim_func from the Python source failed. ``tile_op`` is
    the tile operation involved (``T.gemm``), ``buffers`` the kernel's buffers the message names,
    ``line`` the kernel line (file, number, text) when one is known, ``message`` TVM's sentence.
    """

    message: str
    cause: str | None = None
    title: str = ""
    meaning: str = ""
    advice: str = ""
    pass_name: str | None = None
    tile_op: str | None = None
    buffers: tuple[str, ...] = ()
    line: tuple[str, int, str] | None = None
    # Other lines of the kernel the failure may belong to, when several tile ops fit what TileLang
    # said: ``line`` is the most likely (the first the pass visits), these the rest, in order.
    candidates: tuple[int, ...] = ()
    # The facts of the kernel's state the cause was read from (or, outside the catalogue, all that is
    # known of the failing operation: its buffers' scopes, dtypes and shapes, the target, the threads);
    # ``by_mechanism`` when the cause was found in that state rather than in TileLang's wording.
    evidence: tuple[str, ...] = ()
    by_mechanism: bool = False

    @property
    def known(self) -> bool:
        return self.cause is not None

    def lines(self) -> list[str]:
        """The diagnosis as short lines, for a traceback or a terminal."""
        out = []
        where = []
        if self.pass_name:
            where.append("in building the kernel from its Python source" if self.pass_name == "elaboration"
                         else f"in pass {self.pass_name}")
        if self.tile_op:
            where.append(f"at {self.tile_op}" + (f" on {', '.join(self.buffers)}" if self.buffers else ""))
        elif self.buffers:
            where.append(f"on {', '.join(self.buffers)}")
        if where:
            out.append("failed " + ", ".join(where))
        if self.candidates:
            out.append(f"the line above is the most likely of {len(self.candidates) + 1} that fit: the first the "
                       f"pass visits; also line{'s' if len(self.candidates) > 1 else ''} "
                       + ", ".join(str(n) for n in self.candidates))
        if self.known:
            out.append(f"cause: {self.title}: {self.meaning}")
            out.append(f"what to change: {self.advice}")
            if self.evidence:
                out.append("seen in the kernel: " + "; ".join(self.evidence))
        else:
            out.append("cause: not in tilelab's catalogue of known compile failures; TileLang's own sentence is above")
            if self.evidence:
                out.append("what is known: " + "; ".join(self.evidence))
        return out

    # hand-written: this facts module imports nothing of the records layer (tilelab.records.record)
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["buffers"] = list(self.buffers)
        data["line"] = list(self.line) if self.line else None
        data["candidates"] = list(self.candidates)
        data["evidence"] = list(self.evidence)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        data = dict(data)
        data["buffers"] = tuple(data.get("buffers") or ())
        data["line"] = tuple(data["line"]) if data.get("line") else None
        data["candidates"] = tuple(data.get("candidates") or ())
        data["evidence"] = tuple(data.get("evidence") or ())
        return cls(**data)


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    patterns: tuple[re.Pattern[str], ...]
    meaning: str
    advice: str
    tile_op: str | None = None
    targets: tuple[str, ...] = ()  # target families it applies to; () for every one
    fields: Callable[[re.Match[str]], dict[str, str]] | None = field(default=None, compare=False)
    # Which of the kernel's tile operations can have failed this way (to place it on a line).
    site: Callable[[TileSite], bool] | None = field(default=None, compare=False)
    # Regular expressions over the kernel's source lines, ``{group}`` filled with what the message
    # said (escaped): the first line one of them finds is the failure's (tried in order).
    source: tuple[str, ...] = ()
    # (inner, outer): regular expressions like ``source``'s; the failure's line is the first line the
    # inner one finds inside a block (by indentation) opened on a line the outer one finds.
    within: tuple[str, str] | None = None

    def match(self, text: str) -> re.Match[str] | None:
        for pattern in self.patterns:
            found = pattern.search(text)
            if found:
                return found
        return None


CAUSES: list[Cause] = []


def cause(id: str, title: str, *patterns: str, meaning: str, advice: str, tile_op: str | None = None,
          targets: Sequence[str] = (), site: Callable[[TileSite], bool] | None = None,
          source: Sequence[str] = (), fields: Callable[[re.Match[str]], dict[str, str]] | None = None,
          within: tuple[str, str] | None = None) -> None:
    """Declare a known cause: ``patterns`` are regular expressions over TileLang's message (its
    named groups fill ``{name}`` in ``meaning`` and ``advice``); ``site`` says which of a kernel's
    tile operations can fail this way (to find its line among several of the same op); ``fields``
    reads more from the matched message (the whole of it is ``match.string``) and returns further
    ``{name}`` values, each with a default for a message that lacks what it reads; ``within`` finds
    the line of a statement nested where it may not be (a T.Pipelined inside a T.Parallel)."""
    if any(c.id == id for c in CAUSES):
        raise ValueError(f"cause {id!r} is declared twice")
    CAUSES.append(Cause(id, title, tuple(re.compile(p, re.S) for p in patterns), meaning, advice, tile_op,
                        tuple(targets), fields=fields, site=site, source=tuple(source), within=within))


def _symbolic(shape: str) -> bool:
    return bool(re.search(r"[A-Za-z_]", shape))


def _int4(site: TileSite) -> bool:
    return any(re.fullmatch(r"u?int4", d) for d in site.dtypes())


# ------------------------------------------------------------------------------------------------
# The catalogue. Patterns quote TileLang 0.1.15's own wording; each cause has a regression kernel
# in tests/doctor_kernels.py.
# ------------------------------------------------------------------------------------------------

cause("accumulator-not-fragment", "T.gemm's accumulator is not a fragment",
      r"local_buf(?: \w+)? must be a fragment",
      meaning="T.gemm writes its result C in registers spread over the threads, so C must be a "
              "register fragment; it was given a shared-memory (or global) buffer",
      advice="allocate the accumulator with T.alloc_fragment((block_M, block_N), accum_dtype), and copy it to "
             "shared or global memory after the loop with T.copy",
      tile_op="T.gemm",
      site=lambda s: s.op == "T.gemm" and len(s.buffers) >= 3 and s.buffers[2][2] != "local.fragment")

cause("mixed-dtype-gemm", "T.gemm operands of two data types",
      r"Mixed-dtype GEMM only supports (?P<family>\S+) family operands currently, got A=(?P<a>\w+), B=(?P<b>\w+)",
      meaning="the tensor-core instruction multiplies A and B of one data type (mixing is only possible "
              "within the fp8/fp6/fp4 family); A is {a} and B is {b}",
      advice="give A and B the same dtype: cast one of them while it is loaded (T.copy into a shared tile of the "
             "other's dtype, or a T.Parallel loop that converts)",
      tile_op="T.gemm",
      site=lambda s: s.op == "T.gemm" and len(set(s.dtypes()[:2])) > 1)

cause("int4-tma-copy", "int4 data through a TMA copy",
      r"to_CUtensorMapDataType[^\n]*\n[^\n]*Check failed: \(0\) is false: int4\b",
      meaning="the copy was lowered to a TMA bulk copy, and a TMA descriptor has no 4-bit integer data type "
              "(TileLang 0.1.15 maps int4 to none), so the copy cannot be encoded",
      advice="move the packed data as bytes: declare the tensor as int8 with half the inner extent, copy that, "
             "and unpack two 4-bit values per byte in a T.Parallel loop; or keep this copy off TMA with "
             "pass_configs={'tl.disable_tma_lower': True}",
      tile_op="T.copy",
      site=lambda s: s.op == "T.copy" and _int4(s) and "global" in s.scopes())

cause("fp4-unpack-copy", "packed fp4 copied into an unpacked tile by threads",
      r"SIMT copy from packed global (?P<packed>\w+) to unpacked shared (?P<unpacked>\w+) is not supported"
      r"[^\n]*?\(src=(?P<src>\w+), dst=(?P<dst>\w+)\)",
      meaning="{src} holds {packed} values packed two to a byte and the shared tile {dst} is {unpacked}, one "
              "value a byte; a T.copy the threads carry out moves bytes and cannot unpack them, only the TMA "
              "unpacking load can",
      advice="load this tile with T.tma_copy({src}, {dst}) (the copy engine unpacks fp4 on the way), or keep the "
             "shared tile packed ({packed}) and unpack it in a T.Parallel loop",
      tile_op="T.copy",
      site=lambda s: s.op == "T.copy" and any("float4" in d for d in s.dtypes()))

cause("async-copy-scope", "T.async_copy between memories it cannot copy",
      r"T\.async_copy only supports global->shared/shared\.dyn copies\. Got src=(?P<src>\w+) "
      r"\(scope=(?P<src_scope>[\w.]+)\), dst=(?P<dst>\w+) \(scope=(?P<dst_scope>[\w.]+)\)",
      meaning="T.async_copy is the cp.async load from global into shared memory; {src} is in {src_scope} and "
              "{dst} in {dst_scope}",
      advice="use T.async_copy only to load a global tile into shared memory; copy between other memories with "
             "T.copy",
      tile_op="T.async_copy",
      site=lambda s: "async_copy" in s.op and bool(s.buffers) and s.buffers[0][2] != "global")

cause("tcgen05-k-origin", "a tcgen05 GEMM operand sliced off its K step",
      r"TCGEN5MMA (?P<operand>[AB]) K origin (?P<origin>\d+) must be aligned to the selected atom (?P<atom>\d+)",
      meaning="Blackwell's tcgen05 MMA reads operand {operand} from shared memory in K steps of {atom} elements "
              "(its instruction's atom); the slice given starts at K offset {origin}, inside a step",
      advice="slice {operand} along K at a multiple of {atom} (a[:, 16:32], not a[:, 8:24]), or copy the slice "
             "into a tile of its own first",
      tile_op="T.tcgen05_gemm",
      site=lambda s: "gemm" in s.op)

cause("view-bit-count", "a T.view that changes the number of bits",
      r"T\.view shape and dtype must preserve the logical bit count of '(?P<buffer>\w+)': (?P<got>\d+) bits != "
      r"(?P<want>\d+) bits",
      meaning="T.view reinterprets the memory of {buffer} with a new shape and dtype, so the new shape times the "
              "new dtype's width must cover the same bits; the view asks for {got} bits of {buffer}'s {want}",
      advice="choose the view's shape so that its elements times their bits make {want} (halve the inner extent "
             "when the dtype's width doubles)",
      tile_op="T.view")

cause("int4-operand", "an int4 operand TileLang cannot lower here",
      r"Check failed: \(0\) is false: int4\b",
      meaning="TileLang 0.1.15 has no path for 4-bit integer data in this operation on this target",
      advice="dequantise the int4 data to int8 or fp16 first (unpack two values per byte in a T.Parallel "
             "loop), then use the wider type in the tile operation",
      site=_int4)

cause("no-warp-partition", "the block's warps cannot tile the GEMM",
      r"No valid warp partition for T\.gemm(?: \([^)]*\))?: M=(?P<m>\d+), N=(?P<n>\d+) cannot be evenly covered by "
      r"(?P<warps>\d+) warps",
      meaning="T.gemm splits the {m}x{n} tile among the block's {warps} warps, each owning a multiple of 16 "
              "rows and 8 columns; {warps} warps cannot divide it that way",
      advice="give the kernel threads= a multiple of 128 for Hopper's warpgroup instructions (or of 32 that "
             "divides the tile: 128 or 256 threads), or change block_M/block_N so the warps divide them",
      tile_op="T.gemm",
      site=lambda s: s.op == "T.gemm")

cause("non-integer-shape", "a buffer shape that is not a whole number",
      r"StructuralEqual check failed.*T\.float\d+\((?P<value>[-\d.e+]+)\)",
      meaning="a shape or extent was given as a float ({value}); buffer shapes and loop extents are integers",
      advice="use integer arithmetic for shapes: // instead of /, int(...) around a computed size")

cause("copy-shape-mismatch", "T.copy between regions of different shapes",
      r"StructuralEqual check failed, caused by lhs at <root>\[\d+\](?:\.value)?: (?P<lhs>\([^)]*\)) "
      r"and rhs at <root>\[\d+\](?:\.value)?: (?P<rhs>\([^)]*\))",
      meaning="T.copy copies a region onto a region of the same extents; here one side is {lhs} and the "
              "other {rhs}",
      advice="make the two extents equal: slice the larger side (A[i0:i0 + 64, j0:j0 + 32]) or allocate the "
             "tile with the shape of the region it receives",
      tile_op="T.copy")

cause("symbolic-fragment", "a fragment or local buffer of a symbolic size",
      r"Can not use non-constant range to iterate over a fragment/local buffer\.\s*"
      r"Non-constant shape expr is: (?P<expr>.+?)\.",
      meaning="registers are allocated when the kernel is compiled, so a fragment's (or T.alloc_local's) "
              "shape must be a constant; its extent here depends on a runtime size ({expr})",
      advice="allocate the fragment with the block's constant tile size (block_M, not M) and loop over the "
             "runtime size in tiles with T.ceildiv, guarding the last tile",
      site=lambda s: any(b[2].startswith("local") and _symbolic(b[3]) for b in s.buffers))

cause("reduce-output-shape", "the reduction's output has the wrong shape",
      r"Invalid reduce output shape, buffer shape is (?P<inp>\([^)]*\)), dim is (?P<dim>-?\d+), "
      r"output shape is (?P<out>\[[^\]]*\]), expected shapes are (?P<expected>.+)",
      meaning="T.reduce_sum/T.reduce_max over dim {dim} of a {inp} buffer removes that dimension (or keeps "
              "it as 1), so the output must be {expected}; it is {out}",
      advice="allocate the output fragment without the reduced dimension, or pass the dim you meant "
             "(dim counts from 0)",
      tile_op="T.reduce")

cause("wrong-arguments", "a tile operation called with the wrong arguments",
      r"(?<![\w.])(?P<op>(?:\w+_)?(?:copy|gemm|gemm_sp)|fill|clear|cumsum|reduce_\w+|atomic_\w+|annotate_\w+|"
      r"Pipelined|Parallel|Kernel|alloc_\w+|tcgen05_\w+|wgmma_\w+)\(\) "
      r"(?P<problem>takes .+? but \d+ (?:were|was) given|got an unexpected keyword argument '\w+'|"
      r"missing \d+ required (?:positional|keyword-only) arguments?: .+?)(?:$|\n)",
      meaning="T.{op} was called with arguments it does not take: it {problem}",
      advice="call T.{op} with the arguments of its signature (help(T.{op}) lists them): for example "
             "T.copy(src, dst), T.gemm(A, B, C, transpose_A=..., transpose_B=...)")

cause("index-rank", "a buffer indexed with the wrong number of indices",
      r"Buffer (?P<buffer>\w+) is (?P<rank>\d+)-dimensional \(shape=(?P<shape>[^)]*\))\), but (?P<given>\d+) index",
      meaning="{buffer} has {rank} dimensions {shape}, but was indexed with {given}",
      advice="index {buffer} with {rank} indices (or slices), one per dimension, e.g. {buffer}[i, j]")

cause("symbolic-parallel-fragment", "a T.Parallel of a runtime extent indexes a fragment",
      r"Loop variable (?P<var>\w+) in a T\.Parallel loop with symbolic range \(min=(?P<min>[^,]+), "
      r"extent=(?P<extent>[^)]+)\) is used to index a fragment buffer",
      meaning="a T.Parallel loop is spread over the block's threads when the kernel is compiled, and a fragment's "
              "elements live in fixed threads' registers; a loop of runtime extent {extent} cannot be mapped "
              "onto them, so its variable {var} cannot index a fragment",
      advice="loop over the fragment's constant extent and guard the runtime size: for {var} in "
             "T.Parallel(block): if {var} < {extent}: ...; or keep that data in shared memory",
      tile_op="T.Parallel",
      source=(r"T\.Parallel\([^)]*(?<![\w.]){extent}(?!\w)",))

cause("serial-index-into-fragment", "a serial loop indexes a fragment spread over the threads",
      r"Cannot lower access to thread-distributed fragment `(?P<buffer>\w+)`.*?non-parallel loop variable "
      r"`(?P<var>\w+)`",
      meaning="{buffer} is a register fragment whose elements are spread over the block's threads (for a T.gemm "
              "result, the tensor-core layout); a T.serial loop variable {var} indexes it, so each thread would "
              "need elements other threads hold",
      advice="reduce {buffer} with T.reduce_sum/T.reduce_max(..., dim=...) instead of a serial loop, index it only "
             "with T.Parallel loop variables for elementwise work, or copy it to shared memory first",
      tile_op="T.Parallel",
      source=(r"(?<![\w.]){buffer}\[[^\]]*(?<![\w.]){var}(?!\w)",))

cause("reduce-threads-not-power-of-two", "a reduction across a number of threads that is not a power of two",
      r"AllReduce requires (?P<what>logical_width|scale)\b[^\n]*? to be a (?:positive )?power of two, got "
      r"(?P<width>\d+) \(threads=(?P<threads>\d+)",
      r"AllReduce requires a warp-aligned participating thread range, got (?P<what>base) (?P<width>\d+)",
      meaning="T.reduce_* combines the threads that hold a row with shuffles between pairs of lanes (a "
              "butterfly), so their number and the stride between them must be powers of two and they must "
              "start at a warp's first lane; here the {what} is {width}",
      advice="give the kernel a power-of-two number of threads (threads=32, 64, 128, 256), or shape the fragment "
             "so that each reduced row is held by a power-of-two number of threads",
      tile_op="T.reduce",
      site=lambda s: s.op.startswith("T.reduce"))

cause("layout-not-injective", "a shared-memory layout that maps two elements to one place",
      r"Invalid layout for shared buffer `?(?P<buffer>\w+)`?: the forward map must be injective",
      meaning="the layout of shared buffer {buffer} (from T.annotate_layout or a swizzle) sends two "
              "logical elements to the same physical address, so one would overwrite the other",
      advice="give {buffer} a layout that is a one-to-one map of its shape (every index used once), or "
             "remove the T.annotate_layout and let TileLang choose",
      source=(r"annotate_layout\(.*(?<![\w.]){buffer}(?!\w)", r"^\s*{buffer}\s*:"))

cause("layout-injectivity-limit", "a layout too large to be proven one-to-one",
      r"injectivity could not be proven: the logical input domain exceeds the exact-check limit of (?P<limit>\d+)",
      meaning="TileLang checks a layout element by element up to {limit} points; this buffer's layout "
              "covers more, so TileLang cannot prove that it is one-to-one",
      advice="use smaller tiles (split the T.Parallel or the shared buffer into pieces under the limit), or "
             "give the layout explicitly with T.annotate_layout on a smaller buffer")

cause("layout-shape-not-constant", "a shared layout whose shape depends on a runtime size",
      r"OutputShape extent (?P<expr>.+?) of a shared tensor layout must be constant",
      meaning="a shared tile's layout is fixed when the kernel is compiled, but its extent here is "
              "{expr}, which depends on a runtime size",
      advice="make the shared tile's extent a constant (the block size, not a size computed from M, N or K), "
             "and loop over the runtime size in tiles",
      site=lambda s: any(b[2].startswith("shared") and _symbolic(b[3]) for b in s.buffers))

cause("no-layout-found", "no register layout fits every use of a fragment",
      r"no available layout found",
      meaning="layout inference could not find a single thread/register layout that satisfies every tile "
              "operation using the fragment",
      advice="give the fragment its layout with T.annotate_layout, split the T.Parallel loop so each piece "
             "uses one layout, or copy through shared memory between operations that want different layouts")

cause("layout-conflict", "two fragments used together want different layouts",
      r"Layout infer conflict between (?P<a>\w+) and (?P<b>\w+) in T\.Parallel loop",
      meaning="a T.Parallel loop uses fragments {a} and {b} with indices that force two incompatible "
              "thread layouts (for example a row vector indexed by the column: r[j] beside c[i, j] "
              "after a reduction over dim=1)",
      advice="index the vector by the dimension it was reduced over (r[i] for a reduction over dim=1), or "
             "copy one of the fragments through shared memory",
      tile_op="T.Parallel")

cause("ws-pipeline-rewrite", "warp specialisation could not restructure the pipelined loop",
      r"ProducerConsumerWS: failed to replace pipeline loop",
      meaning="TileLang's automatic warp specialisation splits a T.Pipelined loop into producer (TMA) and "
              "consumer (WGMMA) branches; this loop's shape (code around it, a nested or conditional "
              "pipeline) does not fit the rewrite",
      advice="keep T.Pipelined the only statement of its level with its copies first, or switch warp "
             "specialisation off for this kernel: pass_configs={'tl.disable_warp_specialized': True}",
      tile_op="T.Pipelined",
      site=lambda s: s.op == "T.Pipelined")

cause("ws-schedule", "a warp-specialisation schedule that does not fit the kernel",
      r"ws_schedule: (?P<detail>[^\n']*'(?P<name>[\w.]+)'[^\n]*)",
      r"ws_schedule: (?P<detail>[^\n]+)",
      meaning="the schedule given with T.annotate_ws_schedule (roles, T.WSPipeline, T.WSSync, T.WSScope) "
              "cannot be applied to the kernel's statements: {detail}",
      advice="correct the schedule where it names that pipeline, role or scope: each T.WSSync names a declared "
             "T.WSPipeline, a pipeline is acquired and committed by one role and waited on and released by "
             "another, in one scope; each op id a scope lists is the T.WSID annotation of one statement. Or "
             "remove T.annotate_ws_schedule and let TileLang specialise the warps itself",
      tile_op="T.annotate_ws_schedule",
      source=(r"""["']{name}["']""", r"T\.annotate_ws_schedule\("))

cause("unbound-symbol", "a symbolic size no tensor argument defines",
      r"variables \((?P<names>[^)]*)\) are used, but are not passed in as API arguments",
      meaning="the kernel uses the symbolic size {names} (T.dynamic/T.symbolic) but no tensor argument "
              "has it in its shape, so nothing gives it a value at launch",
      advice="use {names} in the shape of an argument tensor (T.Tensor((M, K), ...)) or replace it by a "
             "constant")

cause("outside-kernel", "tile code outside T.Kernel",
      r"Variable `(?P<buffer>\w+)` is directly accessed by host memory .*?Did you forget to bind\?",
      r"directly accessed by host memory .*?Did you forget to bind\?",
      meaning="the loop or access runs on the host: tile code must sit inside `with T.Kernel(...) as (bx, "
              "by):`, which launches the blocks and threads",
      advice="move the loop inside the `with T.Kernel(grid..., threads=...)` block",
      source=(r"(?<![\w.]){buffer}\[",))

cause("handle-as-value", "a buffer or string used where a number is expected",
      r"Can't cast a handle to other types",
      meaning="a value of pointer/handle type (a buffer, a string) was used where the kernel expects a "
              "number, for example T.fill(buf, \"0\") or a buffer in arithmetic",
      advice="pass a number of the buffer's dtype (T.fill(buf, 0)), or index the buffer (A[i]) where you "
             "meant its element")

cause("string-intrinsic", "an intrinsic named by a string TVM does not know",
      r"Cannot handle str op argument (?P<name>\w+(?:\.\w+)*)",
      meaning="T.call_intrin was given the name {name} as a string; only TVM's own tirx intrinsics are "
              "found that way" ,
      advice="use the tile-language operation instead of the raw intrinsic (T.gemm rather than "
             "tl.tvm_mfma/tl.ptx_wgmma), or look the op up with tvm.ir.Op.get(name)")

cause("amd-intrinsic-on-cuda", "an AMD matrix instruction in a CUDA kernel",
      r"\btvm_mfma\b|\bmfma\w*\b.*(?:cuda|sm_\d+)",
      meaning="MFMA is the matrix instruction of AMD GPUs (CDNA); the kernel was lowered for an NVIDIA target",
      advice="lower for an AMD target (target='gfx942') or write the product as T.gemm, which picks the "
             "target's instruction", targets=("cuda",),
      site=lambda s: "mfma" in s.op)

cause("python-name", "a Python name the kernel uses is not defined",
      r"name '(?P<name>\w+)' is not defined",
      meaning="the kernel body refers to {name}, which is not defined where the kernel is built "
              "(a typo, or a value that is not an argument of the factory)",
      advice="define {name} before the kernel, or make it a parameter of the function that builds the kernel")

cause("gpu-only-on-cpu", "GPU tile operations in a CPU kernel",
      r"TileLang cannot lower this kernel for c\b",
      meaning="target c runs the kernel as C on the CPU: shared memory, register fragments, TMA, WGMMA and "
              "warp specialisation do not exist there",
      advice="for the CPU keep tiles in T.alloc_local or in global buffers and write the loops with "
             "T.serial/T.Parallel; or inspect the kernel for a GPU target (sm_90a)", targets=("cpu",))


cause("tcgen05-2cta-no-cluster", "a two-CTA tcgen05 GEMM launched without its CTA pair",
      r"T\.(?P<op>tcgen05_gemm)\(use_2cta=True\) requires cluster_dims (?P<dims>\([\d, ]+\) or \([\d, ]+\))",
      meaning="use_2cta=True makes two CTAs issue one MMA together, each holding half of the operands in its "
              "own shared and tensor memory; the two must be one cluster launched side by side, so the kernel "
              "needs cluster_dims {dims}, and it was launched without a cluster or with another cluster shape",
      advice="launch with T.ClusterKernel(grid..., threads=..., cluster_dims=(2, 1, 1)) (the grid a multiple of 2 "
             "along that axis) and allocate the MMA's barrier with T.alloc_cluster_barrier; or drop use_2cta=True "
             "and let each CTA compute its own tile",
      tile_op="T.tcgen05_gemm", site=lambda s: "tcgen05" in s.op,
      source=(r"use_2cta\s*=\s*True",))


# Causes found by mechanism (tilelab._tilelang.mechanisms): no wording of TileLang's recognises them; their
# rules read the kernel's state. Declared here so that the catalogue lists every cause.
MECHANISMS = {
    "feature-newer-arch": "an instruction of a newer architecture than the target",
    "mma-dtype": "operand dtypes the target's matrix instruction does not take",
    "mma-tile-shape": "a GEMM tile the instruction's shape does not divide",
    "threads-below-wavefront": "fewer threads than one warp or wavefront",
    "parallel-layout-not-injective": "a T.Parallel store that two iterations make to one element",
    "parallel-layout-conflict": "a fragment reached with two index patterns in one T.Parallel loop",
    "scope-for-op": "a tile operation given a buffer in a memory it does not take",
    "gemm-k-mismatch": "T.gemm operands whose K extents differ",
    "copy-between-memories": "a tile operation between memories it does not connect",
    "codegen-intrinsic": "an intrinsic the target's code generator has no translation for",
    "gemm-operand-layout": "a GEMM's accumulator handed to another GEMM in registers of another layout",
    "mma-accumulator-dtype": "a GEMM accumulator of a dtype the matrix instruction does not write",
    "no-infinity-dtype": "an infinity asked of a dtype that has none",
}
for _id, _title in MECHANISMS.items():
    if any(c.id == _id for c in CAUSES):
        continue
    CAUSES.append(Cause(_id, _title, (), meaning="(read from the kernel's state)", advice=""))

# Causes of the catalogue that are a case of a mechanism: where a rule finds that mechanism in the
# kernel's state, TileLang's sentence may still say which case it is (which rounding mode, which
# WGMMA constraint), and the case's name and advice are given with the rule's evidence. A cause
# whose id is a mechanism's own is a case of it too.
REFINES: dict[str, tuple[str, ...]] = {
    "mixed-dtype-gemm": ("mma-dtype",),
    "int4-operand": ("mma-dtype", "feature-newer-arch"),
    "async-copy-scope": ("copy-between-memories",),
    "no-warp-partition": ("mma-tile-shape", "threads-below-wavefront"),
    "wgmma-constraints": ("mma-tile-shape", "mma-dtype", "feature-newer-arch"),
    "tcgen05-constraints": ("mma-tile-shape", "mma-dtype", "feature-newer-arch"),
    "ieee-math-dtype": ("codegen-intrinsic",),
    "ieee-half-rounding": ("codegen-intrinsic",),
    "string-intrinsic": ("codegen-intrinsic",),
    "amd-intrinsic-on-cuda": ("codegen-intrinsic", "feature-newer-arch"),
    "barrier-before-hopper": ("feature-newer-arch",),
    "layout-conflict": ("parallel-layout-conflict",),
    "layout-not-injective": ("parallel-layout-not-injective",),
    "layout-injectivity-limit": ("parallel-layout-not-injective",),
    "reduce-threads-not-power-of-two": ("threads-below-wavefront",),
}


def _case_of(mechanism: str, message: str, trace: str, target_family: str | None) -> tuple[Cause, re.Match[str]] | None:
    """The catalogue's case of ``mechanism`` that TileLang's sentence names, if one does."""
    for candidate in CAUSES:
        if candidate.id != mechanism and mechanism not in REFINES.get(candidate.id, ()):
            continue
        if candidate.targets and target_family not in candidate.targets:
            continue
        match = candidate.match(message) or candidate.match(trace)
        if match:
            return candidate, match
    return None


_OPERAND = re.compile(r"\b(?P<name>[ABC])\(scope=(?P<scope>[\w.]+), dtype=(?P<dtype>\w+)\)")
_BITS = {"float64": 64, "float32": 32, "int32": 32, "float16": 16, "bfloat16": 16, "int8": 8, "uint8": 8}


def _bits(dtype: str) -> int | None:
    return _BITS.get(dtype) or (8 if dtype.startswith("float8") else None)


def _mma_constraints(instruction: str) -> Callable[[re.Match[str]], dict[str, str]]:
    """Which of the requirements TileLang's message lets us check the GEMM breaks, as ``{problem}``:
    the target, the operands' memories and dtypes, M and the bytes of K; where none of them is
    broken, the one the message cannot show (the block's threads for WGMMA)."""
    hopper = instruction == "wgmma"

    def fields(match: re.Match[str]) -> dict[str, str]:
        text = match.string[match.start():]
        arch = re.search(r'"arch":\s*"(\w+)"', text)
        operands = {m["name"]: (m["scope"], m["dtype"]) for m in _OPERAND.finditer(text)}
        sizes = {k: int(v) for k, v in re.findall(r"\b([MNK])=(\d+)", text)}
        problems = []
        if arch and not arch[1].startswith("sm_90" if hopper else "sm_10"):
            problems.append(f"the target is {arch[1]}, and {'WGMMA' if hopper else 'tcgen05'} exists only on "
                            f"{'Hopper (sm_90a)' if hopper else 'Blackwell (sm_100a)'}")
        if not hopper and "C" in operands and operands["C"][0] != "shared.tmem":
            problems.append(f"C is a {operands['C'][0]} buffer, and tcgen05 accumulates in tensor memory "
                            "(T.alloc_tmem)")
        wide = sorted({d for n, (_, d) in operands.items() if n in "AB" and (_bits(d) or 0) > 16})
        if wide:
            problems.append(f"A and B are {', '.join(wide)}: TileLang lowers this instruction for 16- and 8-bit "
                            "operands (float16, bfloat16, float8)")
        if hopper and sizes.get("M", 64) % 64:
            problems.append(f"M={sizes['M']} is not a multiple of 64, the rows one wgmma instruction computes "
                            "for a warpgroup")
        bits = _bits(operands.get("A", ("", ""))[1]) if "A" in operands else None
        if bits and "K" in sizes and (sizes["K"] * bits // 8) % 32:
            problems.append(f"K={sizes['K']} of {operands['A'][1]} is {sizes['K'] * bits // 8} bytes, not a "
                            "multiple of the 32 bytes of K one instruction reads")
        if not problems and hopper:
            problems.append("the operands it shows fit, which leaves the block's threads: WGMMA is issued by whole "
                            "warpgroups, so threads= must be a multiple of 128")
        elif not problems:
            problems.append("the operands it shows (scopes, dtypes, M, N, K) fall outside the shapes TileLang "
                            "lowers to tcgen05")
        return {"problem": "; ".join(problems)}

    return fields


cause("wgmma-constraints", "a T.wgmma_gemm that WGMMA cannot compute",
      r"T\.(?P<op>wgmma_gemm)\(\) requires Hopper WGMMA lowering, but constraints were not satisfied",
      meaning="T.wgmma_gemm asks for Hopper's warpgroup MMA and nothing else (T.gemm would fall back to other "
              "instructions); TileLang found that this GEMM does not fit it: {problem}",
      advice="make the GEMM fit WGMMA (threads= a multiple of 128, block_M a multiple of 64, K a multiple of 32 "
             "bytes, float16/bfloat16/float8 operands, the accumulator a fragment, an sm_90a target), or write "
             "T.gemm, which picks the instruction that fits",
      tile_op="T.wgmma_gemm", site=lambda s: "wgmma" in s.op, fields=_mma_constraints("wgmma"))

cause("tcgen05-constraints", "a T.tcgen05_gemm that tcgen05 cannot compute",
      r"T\.(?P<op>tcgen05_gemm)\(\) requires Blackwell TCGEN5MMA lowering, but constraints were not satisfied",
      meaning="T.tcgen05_gemm asks for Blackwell's tensor-core MMA (tcgen05.mma), which reads A and B from shared "
              "memory and accumulates in tensor memory; TileLang found that this GEMM does not fit it: {problem}",
      advice="allocate the accumulator with T.alloc_tmem((block_M, block_N), accum_dtype) and copy it out with "
             "T.copy after the MMA's barrier; keep A and B float16/bfloat16/float8 tiles in shared memory and "
             "lower for sm_100a; or write T.gemm, which picks the instruction that fits",
      tile_op="T.tcgen05_gemm", site=lambda s: "tcgen05" in s.op, fields=_mma_constraints("tcgen05"))


def _ieee_hint(match: re.Match[str]) -> dict[str, str]:
    hint = re.search(r"in CUDA\.\s*(Use [^\n]*?)\.?(?:\n|$)", match.string[match.start():])
    return {"hint": (hint.group(1)[0].lower() + hint.group(1)[1:]) if hint else
            "compute it from other correctly rounded steps"}


cause("ieee-math-dtype", "an IEEE math intrinsic the data type has no version of",
      r"IEEE (?P<name>\w+) is not supported for (?P<dtype>\w+) in CUDA",
      meaning="T.ieee_* calls CUDA's correctly rounded intrinsics (__frsqrt_rn, __fsqrt_rn, __fdiv_rn...), "
              "which exist only for some data types: CUDA has no IEEE {name} for {dtype}, so the kernel's "
              "code cannot be generated",
      advice="{hint}; or convert the value to float32, apply T.ieee_{name} there and convert back",
      source=(r"T\.ieee_{name}\(",), site=lambda s: ".ieee_" in s.op,
      fields=_ieee_hint)

cause("ieee-half-rounding", "a directed rounding mode for half-precision IEEE arithmetic",
      r"IEEE (?P<name>\w+) with rounding mode '(?P<mode>\w+)' is not supported for (?P<dtype>[\w/]+) in CUDA",
      meaning="CUDA's half-precision arithmetic (__hadd, __hmul, __hfma...) rounds to nearest even only; rounding "
              "mode '{mode}' asks for a directed rounding that exists for float32 and float64",
      advice="drop the rounding mode (the default 'rn'), or convert the operands to float32, use '{mode}' there "
             "and convert the result back (that conversion rounds to nearest again)",
      source=(r"T\.ieee_\w+\([^#]*['\"]{mode}['\"]",), site=lambda s: ".ieee_" in s.op)

cause("barrier-before-hopper", "an mbarrier on a GPU older than Hopper",
      r"T\.alloc_barrier\(\) requires sm_90 \(Hopper\) or later, but the current target is (?P<arch>sm_\d+)",
      meaning="T.alloc_barrier allocates a hardware mbarrier in shared memory (the arrive/wait counters TMA "
              "copies and warp-specialised pipelines wait on); mbarriers arrived with Hopper (sm_90), and the "
              "target {arch} has none, so TileLang refuses the kernel before it lowers the barriers",
      advice="on {arch} synchronise the block with T.sync_threads() instead of an mbarrier (and leave the "
             "producer/consumer split to T.Pipelined), or lower the kernel for sm_90a or later",
      source=(r"T\.alloc_(?:cluster_)?barrier\(",))

cause("layout-not-normalisable", "a layout whose map leaves gaps in the threads or registers",
      r"has errors: \(\"Could not normalize iterators\"",
      meaning="TileLang checks a layout given with T.Fragment/T.Layout by rewriting its map as sums of the "
              "index ranges; this map{map} cannot be rewritten so: its values leave gaps or overlap (for "
              "example a thread index i * 64 + j // 4 with j // 4 < 16 uses threads 0-15 and 64-79 only), so "
              "TileLang cannot tell which thread and register hold which element",
      advice="write the map so that each index's stride is the extent of what comes below it (i * 16 + j // 4 "
             "for j // 4 < 16), giving one dense range of threads and registers; or remove this entry of "
             "T.annotate_layout and let TileLang choose",
      source=(r"T\.Fragment\(", r"T\.Layout\(", r"annotate_layout\("),
      fields=lambda m: {"map": (lambda t: f" ({t.group(1)})" if t else "")(
          re.search(r"transform: ([^\n]*?)\) has errors", m.string))})

cause("parallel-in-parallel", "a T.Parallel inside another T.Parallel, with statements between",
      r"Nested parallel loops are not allowed",
      meaning="the iterations of a T.Parallel loop are spread over the block's threads as one iteration space; "
              "a T.Parallel written directly inside another joins it, but one below other statements of the "
              "outer loop's body would spread the threads a second time inside each thread's share",
      advice="write the two loops as one, for i, j in T.Parallel(M, N), and move the outer loop's other "
             "statements to a T.Parallel of their own; or make the inner loop T.serial (each thread runs it "
             "whole)",
      tile_op="T.Parallel",
      within=(r"\bT\.Parallel\(", r"\bT\.Parallel\("))

cause("pipelined-in-parallel", "a T.Pipelined loop inside a T.Parallel",
      r"Pipelined loop cannot be nested inside a parallel loop",
      meaning="T.Pipelined overlaps the whole block's copies of one stage with the compute of another, so "
              "every thread runs each of its iterations; inside a T.Parallel each thread has only its share of "
              "the outer iterations, and the block has no common pipeline to run",
      advice="put the T.Pipelined loop outside (around) the T.Parallel loops: for k in T.Pipelined(...): "
             "then the T.Parallel work of one stage inside its body",
      tile_op="T.Pipelined",
      within=(r"\bT\.Pipelined\(", r"\bT\.Parallel\("))

cause("tile-op-in-parallel", "a tile operation inside a T.Parallel loop",
      r"Only elementwise operations are allowed inside a parallel loop\. Got a tile-op \"(?:[^\"]*?name=\")?"
      r"tl\.tileop\.(?P<op>\w+)",
      r"Only elementwise operations are allowed inside a parallel loop",
      meaning="a T.Parallel loop's body is elementwise work each thread does for its share of the iterations; "
              "a tile operation (T.{op}) is itself spread over all of the block's threads, so it cannot run "
              "once per iteration of a parallel loop",
      advice="call T.{op} outside the T.Parallel loop, on the whole tile or on a slice per iteration of a "
             "T.serial loop; inside T.Parallel keep only element expressions (B[i, j] = A[i, j] * s)",
      within=(r"\bT\.{op}\(", r"\bT\.Parallel\("),
      fields=lambda m: {} if m.groupdict().get("op") else {"op": "copy/gemm/..."})

cause("local-indexed-by-parallel", "a thread-private buffer indexed by a T.Parallel variable",
      r"Local buffer `(?P<buffer>\w+)` is indexed by T\.Parallel loop variable `(?P<var>\w+)`",
      meaning="{buffer} is a T.alloc_local buffer: each thread has its own copy, and TileLang "
              "lays out only fragments over the threads; a T.Parallel variable {var} spreads the iterations over "
              "the threads, so indexing {buffer} by it would leave each thread's copy partly written",
      advice="allocate {buffer} with T.alloc_fragment when its elements belong to different threads, or index it "
             "with a T.serial/T.unroll/T.vectorized loop variable when each thread works through all of it",
      tile_op="T.Parallel",
      source=(r"(?<![\w.]){buffer}\[[^\]]*(?<![\w.]){var}(?!\w)",))

# ------------------------------------------------------------------------------------------------
# Reading the trace
# ------------------------------------------------------------------------------------------------

# TileLang's C++ tile operators, by the T.* call that creates them.
_TILE_OPS = (("GemmNode", "T.gemm"), ("GemmPyNode", "T.gemm"), ("GemmSPNode", "T.gemm_sp"), ("CopyNode", "T.copy"),
             ("Conv2DIm2ColOpNode", "T.c2d_im2col"), ("ReduceOpNode", "T.reduce"), ("CumSumOpNode", "T.cumsum"),
             ("FillNode", "T.fill"), ("AtomicAddNode", "T.atomic_add"), ("ParallelOpNode", "T.Parallel"))
_PY_TILE_OPS = (("tileop/gemm", "T.gemm"), ("tileop/copy", "T.copy"), ("/op/gemm/", "T.gemm"))

# A pass run from Python: "mod = tilelang.transform.LayoutInference()(mod)" in TileLang's pipeline.
_PY_PASS = re.compile(r"\b(tilelang|tvm|tirx)\.(?:transform|analysis)\.(\w+)\(")
# TVM's C++ pass classes that name their pass.
_CPP_PASSES = (("LayoutInferencer", "tl.LayoutInference"), ("LowerTileOpPass", "tl.LowerTileOp"),
               ("MakePackedAPI", "tirx.MakePackedAPI"), ("StmtSimplifier", "tirx.Simplify"),
               ("WarpSpecializedRewriter", "tl.WarpSpecialized"), ("ProducerConsumerWS", "tl.WarpSpecialized"),
               ("PipelinePlanner", "tl.PipelinePlanning"), ("PipelineRewriter", "tl.InjectSoftwarePipeline"),
               ("VerifyMemory", "tirx.VerifyMemory"))


def pass_from_trace(trace: str) -> str | None:
    """The pass a failure happened in, read from its trace: the innermost pass TileLang's Python
    pipeline called, refined by a C++ frame that names one; ``"elaboration"`` when the prim_func
    was still being built from its Python source; None when the trace says neither."""
    cpp = [name for cls, name in _CPP_PASSES if re.search(rf"\b{cls}\b", trace)]
    calls = _PY_PASS.findall(trace)
    if calls:
        ns, name = calls[-1]
        return cpp[0] if cpp and cpp[0].split(".")[-1] == name else ("tl." if ns == "tilelang" else "tirx.") + name
    if cpp:
        return cpp[0]
    if "Memory verification failed" in trace:
        return "tirx.VerifyMemory"
    if re.search(r"Unresolved call|CodeGen(?:TileLang)?CUDA|codegen_cuda|BuildTileLangCUDA", trace):
        return "codegen"  # the device code generator, after every pass
    if "Failed to build prim_func" in trace or "eager/builder.py" in trace:
        return "elaboration"
    return None


def tile_op_from_trace(text: str) -> str | None:
    """The tile operation (``T.gemm``) the trace's innermost tile-operator frame belongs to."""
    found = None
    for cls, op in _TILE_OPS:
        position = max((m.start() for m in re.finditer(rf"tvm::tl::{cls}::", text)), default=-1)
        if position >= 0 and (found is None or position > found[0]):
            found = (position, op)
    if found:
        return found[1]
    for needle, op in _PY_TILE_OPS:
        if needle in text:
            return op
    return None


# Buffer names that are also words of TileLang's sentences: they count only where quoted or indexed.
_WORDS = {"a", "A", "an", "as", "at", "be", "by", "I", "if", "in", "is", "it", "of", "on", "or", "to", "the"}


def _mentioned(names: Sequence[str], text: str) -> tuple[str, ...]:
    seen = []
    for name in names:
        if not name or name in seen:
            continue
        found = (rf"[`'\"]{re.escape(name)}[`'\"]|(?<![\w.]){re.escape(name)}\[" if name in _WORDS
                 else rf"(?<![\w.]){re.escape(name)}(?![\w(])")
        if re.search(found, text):
            seen.append(name)
    return tuple(seen)


def _fill(text: str, groups: dict[str, str], names: set[str]) -> str:
    """``text`` with each ``{name}`` of the cause's pattern groups replaced by what the message
    said there (other braces, such as a dict in the advice, stay as they are)."""
    return re.sub(r"\{(\w+)\}", lambda m: groups.get(m.group(1), "?") if m.group(1) in names else m.group(0), text)


def diagnose(message: str, trace: str = "", *, pass_name: str | None = None, target_family: str | None = None,
             buffers: Sequence[str] = (), line: tuple[str, int, str] | None = None,
             source_lines: Sequence[tuple[int, str]] = (), sites: Sequence[TileSite] = (),
             target: str | None = None, threads: int | None = None) -> Diagnosis:
    """Diagnose one failure from the kernel's state at it, with TileLang's sentence ``message`` and
    its ``trace`` as evidence.

    ``pass_name`` is the pass a pass instrument saw fail (read from the trace otherwise),
    ``buffers`` the kernel's buffer names (those the message names are reported), ``line`` the
    kernel line TileLang pointed at, ``sites`` the kernel's tile operations in program order (with
    their lines and buffers: :func:`place` picks the one that failed when TileLang gave no line),
    and ``source_lines`` the kernel's numbered source lines, to place the failure on the line of its
    tile operation where no sites are known (only where that operation appears once).

    The mechanism rules (:mod:`tilelab._tilelang.mechanisms`) come first: each reads the state (the
    pass, the tile operation and its buffers' memories, dtypes and shapes, the loops, the threads,
    the target). Only where none finds its mechanism there are TileLang's sentences matched against
    the catalogue's patterns (:func:`cause`), a fallback for what the state does not show.
    """
    if pass_name is None or ("." not in pass_name and pass_name not in ("elaboration", "codegen")):
        # A pass written in Python reaches the instrument by its function's name ("pass_fn"):
        # the trace's call of it (tilelang.analysis.FragmentLoopChecker()) names it.
        pass_name = pass_from_trace(trace) or pass_name
    # A target TileLang prints whole ({"kind":"cuda",...,"host":{"kind":"c",...}}) names no buffer.
    names = _mentioned(buffers, re.sub(r'\{"kind":.*?"arch":\s*"\w+"\}', "", message))
    state: dict[str, Any] = dict(pass_name=pass_name, target_family=target_family, names=names, line=line,
                                 source_lines=source_lines, sites=sites, target=target, threads=threads)
    if sites:
        found = _by_mechanism(message, trace, **state)
        if found is not None:
            return found
    said = _by_sentence(message, trace, **state)
    if said.cause is None and not sites:
        # no tile operation was read from the kernel: its state is the pass, the threads and the target
        # only, too little to come before the sentence, but enough for a rule where none matched it
        return _by_mechanism(message, trace, **state) or said
    return said


def _trace_tile_op(message: str, trace: str) -> str | None:
    """The tile operation the trace names, else the first one TileLang's sentence names."""
    tile_op = tile_op_from_trace(trace)
    if tile_op is None:
        ops = re.findall(r"\bT\.(gemm|copy|reduce_\w+|fill|clear|Parallel|Pipelined|atomic_add)\b", message)
        tile_op = f"T.{ops[0]}" if ops else None
    return tile_op


def _by_mechanism(message: str, trace: str, *, pass_name: str | None, target_family: str | None,
                  names: tuple[str, ...], line: tuple[str, int, str] | None, source_lines: Sequence[tuple[int, str]],
                  sites: Sequence[TileSite], target: str | None, threads: int | None) -> Diagnosis | None:
    """The diagnosis of the first mechanism rule that finds its mechanism in the kernel's state;
    None where none does."""
    tile_op = _trace_tile_op(message, trace)
    candidates: tuple[int, ...] = ()
    if line is None and sites:
        line, candidates = place(sites, tile_op=tile_op, names=names)
    site_here = _site_at(sites, line)
    state = _mechanisms.State(message=message, pass_name=pass_name, tile_op=tile_op, target=target,
                              family=target_family, threads=threads, sites=tuple(sites), site=site_here)
    finding = _mechanisms.explain(state)
    if finding is None:
        return None
    if finding.site is not None and (line is None or site_here is None or finding.site is not site_here):
        line = (finding.site.file, finding.site.line, finding.site.text)
        candidates = ()
    if line is None and tile_op and source_lines:
        line = _unique_line(tile_op, source_lines)
    cause_id, title, meaning, advice = finding.id, finding.title, finding.meaning, finding.advice
    case = _case_of(finding.id, message, trace, target_family)
    if case is not None:  # the sentence says which case of the mechanism it is
        cause_id, title = case[0].id, case[0].title
        meaning, advice = _explained(case[0], case[1])
        named_op = case[1].groupdict().get("op")
        tile_op = f"T.{named_op}" if named_op else tile_op
        # the statement the sentence names (a T.alloc_barrier) is the line, where the case can find it
        said = _source_line(case[0].source, case[1].groupdict(), source_lines) if case[0].source else None
        if said is not None:
            line, candidates = said, ()
    return Diagnosis(message=message, cause=cause_id, title=title, meaning=meaning, advice=advice,
                     pass_name=pass_name, tile_op=tile_op or getattr(finding.site, "op", None), buffers=names,
                     line=line, candidates=candidates, evidence=finding.evidence, by_mechanism=True)


def _by_sentence(message: str, trace: str, *, pass_name: str | None, target_family: str | None,
                 names: tuple[str, ...], line: tuple[str, int, str] | None, source_lines: Sequence[tuple[int, str]],
                 sites: Sequence[TileSite], target: str | None, threads: int | None) -> Diagnosis:
    """The fallback: the catalogue's cause whose pattern TileLang's sentence (or trace) matches,
    placed on the kernel's line; outside the catalogue, everything known of the failure."""
    found_cause: Cause | None = None
    match = None
    # A cause that belongs to the target is the better explanation: it comes first.
    ordered = sorted(CAUSES, key=lambda c: not (c.targets and target_family in c.targets))
    for candidate in ordered:
        if candidate.targets and target_family not in candidate.targets:
            continue
        match = candidate.match(message) or candidate.match(trace)
        if match:
            found_cause = candidate
            break
    named_op = match.groupdict().get("op") if match else None
    tile_op = (f"T.{named_op}" if named_op else None) or tile_op_from_trace(trace) or \
        (found_cause.tile_op if found_cause else None) or _trace_tile_op(message, "")
    candidates: tuple[int, ...] = ()
    if line is None and found_cause is not None and found_cause.within and match is not None:
        line = _nested_line(*found_cause.within, match.groupdict(), source_lines)
    if line is None and found_cause is not None and found_cause.source and match is not None:
        line = _source_line(found_cause.source, match.groupdict(), source_lines)
    if line is not None and sites and found_cause is not None and found_cause.tile_op and \
            re.search(r"\bT\.alloc_\w+\(", line[2]):
        # TileLang pointed at a buffer's allocation (the span it stamps on buffers) for a cause that
        # belongs to a tile operation: the operation using the buffer is the line, where the sites
        # tell it (a cause about the buffer itself, a fragment of a runtime size, keeps the allocation).
        placed, others = place(sites, tile_op=tile_op, cause=found_cause, names=names)
        if placed is not None:
            line, candidates = placed, others
    if line is None and sites:
        line, candidates = place(sites, tile_op=tile_op, cause=found_cause, names=names)
    if line is None and tile_op and source_lines:
        line = _unique_line(tile_op, source_lines)
    if found_cause is None:
        if line is None and names:
            line = _first_use(names, source_lines)
        return Diagnosis(message=message, pass_name=pass_name, tile_op=tile_op, buffers=names, line=line,
                         candidates=candidates, evidence=_known(_site_at(sites, line), target, threads))
    if line is None:
        # The names the message gave (a buffer, a symbol) lead to the line that uses them.
        groups = _groups(found_cause, match)
        named = [v for k, v in groups.items() if k in ("buffer", "names", "name", "a", "b") and v.isidentifier()]
        line = _first_use(tuple(named) or names, source_lines)
    meaning, advice = _explained(found_cause, match)
    return Diagnosis(message=message, cause=found_cause.id, title=found_cause.title, meaning=meaning, advice=advice,
                     pass_name=pass_name, tile_op=tile_op, buffers=names, line=line, candidates=candidates)


def _groups(found_cause: Cause, match: re.Match[str] | None) -> dict[str, str]:
    """What the message said in the cause's pattern groups, and what its ``fields`` read further."""
    groups = {k: v.strip().strip(",.").strip() for k, v in (match.groupdict() if match else {}).items() if v}
    if found_cause.fields is not None and match is not None:
        try:
            groups.update(found_cause.fields(match))
        except Exception:  # a reading of the message that fails leaves the pattern's own groups
            pass
    return groups


def _explained(found_cause: Cause, match: re.Match[str] | None) -> tuple[str, str]:
    """The cause's meaning and advice, each ``{name}`` filled with what the message said."""
    groups = _groups(found_cause, match)
    names_in = {name for pattern in found_cause.patterns for name in pattern.groupindex} | set(groups)
    return _fill(found_cause.meaning, groups, names_in), _fill(found_cause.advice, groups, names_in)


def _site_at(sites: Sequence[TileSite], line: tuple[str, int, str] | None) -> TileSite | None:
    """The tile site on ``line`` (the innermost, the last in program order), if one is."""
    if line is None:
        return None
    found = [s for s in sites if s.line == line[1] and (not line[0] or not s.file or s.file == line[0])]
    return found[-1] if found else None


def _known(site: TileSite | None, target: str | None, threads: int | None) -> tuple[str, ...]:
    """Everything known of a failure outside the catalogue: the target, the threads, the failing
    operation's buffers with their dtypes, memories and shapes."""
    out = []
    if target:
        out.append(f"target {target}" + (f", {threads} threads" if threads else ""))
    if site is not None:
        out.append(f"{site.op} at line {site.line}")
        out.extend(f"{b[0]}: {b[1]} in {b[2]}, shape {b[3]}" for b in site.buffers[:6])
    return tuple(out)


def _source_line(patterns: Sequence[str], groups: dict[str, str | None],
                 source_lines: Sequence[tuple[int, str]]) -> tuple[str, int, str] | None:
    """The first source line (comments aside) one of ``patterns`` finds, its ``{group}`` filled
    with what the message said; a pattern naming a group the message did not give is skipped."""
    code = [(n, text) for n, text in source_lines if not text.lstrip().startswith("#")]
    for template in patterns:
        wanted = re.findall(r"\{(\w+)\}", template)
        if any(not groups.get(name) for name in wanted):
            continue
        pattern = re.sub(r"\{(\w+)\}", lambda m: re.escape(str(groups[m.group(1)])), template)
        for n, text in code:
            if re.search(pattern, text):
                return ("", n, text)
    return None


def _nested_line(inner: str, outer: str, groups: dict[str, str | None],
                 source_lines: Sequence[tuple[int, str]]) -> tuple[str, int, str] | None:
    """The first source line ``inner`` finds (``{group}`` filled as in :func:`_source_line`) that
    sits in a block opened by a line ``outer`` finds: one of the lines above it, each less indented
    than the last, that enclose it."""
    def filled(template: str) -> str | None:
        wanted = re.findall(r"\{(\w+)\}", template)
        if any(not groups.get(name) for name in wanted):
            return None
        return re.sub(r"\{(\w+)\}", lambda m: re.escape(str(groups[m.group(1)])), template)

    inner_re, outer_re = filled(inner), filled(outer)
    if inner_re is None or outer_re is None:
        return None
    code = [(n, text) for n, text in source_lines if text.strip() and not text.lstrip().startswith("#")]
    for index, (n, text) in enumerate(code):
        if not re.search(inner_re, text):
            continue
        indent = len(text) - len(text.lstrip())
        for _, above in reversed(code[:index]):
            depth = len(above) - len(above.lstrip())
            if depth < indent:
                if re.search(outer_re, above):
                    return ("", n, text)
                indent = depth
    return None


def _same_op(site_op: str, tile_op: str) -> bool:
    """``T.reduce`` is the site of T.reduce_sum/T.reduce_max, ``T.fill`` of T.clear; ``T.gemm`` (the
    tile operator TileLang's trace names) of every GEMM call, T.wgmma_gemm and T.tcgen05_gemm too."""
    if tile_op == "T.clear":
        tile_op = "T.fill"
    if tile_op == "T.gemm" and re.fullmatch(r"T\.\w+_gemm", site_op):
        return True
    return site_op == tile_op or (tile_op.startswith("T.") and site_op.startswith(tile_op.split("_")[0]))


def place(sites: Sequence[TileSite], *, tile_op: str | None = None, cause: Cause | None = None,
          names: Sequence[str] = ()) -> tuple[tuple[str, int, str] | None, tuple[int, ...]]:
    """The line of the tile operation that failed, and the other lines that fit as well.

    Narrows the kernel's ``sites`` step by step, each step kept only where it leaves one or more:
    the tile op the trace names, the operations the cause can happen at (an int4 buffer for an
    int4 failure, a T.gemm whose accumulator is not a fragment...), those touching a buffer the
    message names. Of what remains, the first in program order is the most likely: TileLang's
    passes visit a kernel in order and stop at the first operation that fails their check.
    (None, ()) when nothing narrows the sites (no tile op, cause or buffer to go by).
    """
    pool = list(sites)
    narrowed = False
    if tile_op:
        same = [s for s in pool if _same_op(s.op, tile_op)]
        if same:
            pool, narrowed = same, True
    if cause is not None and cause.site is not None:
        fits = [s for s in pool if _safe(cause.site, s)]
        if not fits and narrowed:  # the trace's tile op and the cause disagree: the cause decides
            fits = [s for s in sites if _safe(cause.site, s)]
        if fits:
            pool, narrowed = fits, True
    if names:
        touching = [s for s in pool if any(b[0] in names for b in s.buffers)]
        if touching:
            pool, narrowed = touching, True
    if not narrowed or not pool:
        return None, ()
    first = pool[0]
    others = []
    for s in pool[1:]:
        if s.file == first.file and s.line != first.line and s.line not in others:
            others.append(s.line)
    return (first.file, first.line, first.text), tuple(others)


def _safe(test: Callable[[TileSite], bool], site: TileSite) -> bool:
    try:
        return bool(test(site))
    except Exception:
        return False


def _unique_line(tile_op: str, source_lines: Sequence[tuple[int, str]]) -> tuple[str, int, str] | None:
    stem = tile_op.split(".", 1)[1]
    call = re.compile(r"\bT\.(?:\w+_)?gemm\w*\s*\(" if stem == "gemm" else rf"\bT\.{re.escape(stem)}\w*\s*\(")
    hits = [(n, text) for n, text in source_lines if call.search(text) and not text.lstrip().startswith("#")]
    if len(hits) == 1:
        return ("", hits[0][0], hits[0][1])
    return None


def _first_use(names: Sequence[str], source_lines: Sequence[tuple[int, str]]) -> tuple[str, int, str] | None:
    """The first line of the kernel body using one of ``names``: a T.annotate_layout of it first,
    then any other use (the def line and the names' own T.dynamic/T.symbolic definitions aside)."""
    body = [(n, text) for n, text in source_lines[1:] if text.strip() and not text.lstrip().startswith(("#", "@"))]
    words = [re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)") for name in names if name]
    if not words:
        return None
    for n, text in body:
        if "annotate_layout" in text and any(w.search(text) for w in words):
            return ("", n, text)
    for n, text in body:
        if re.search(r"\bT\.(dynamic|symbolic)\(", text) or re.match(r"\s*def\s", text):
            continue
        if any(w.search(text) for w in words):
            return ("", n, text)
    return None
