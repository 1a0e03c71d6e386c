"""A GPU kernel's tile program on the CPU (``tilelab.run(kernel, device="cpu")``)

A TileLang kernel is written at the level of tiles: ``T.copy``, ``T.gemm``, ``T.reduce_*``,
``T.fill`` and ``T.Parallel`` over a tile are whole-tile operations of one block, whatever threads,
layouts, TMA or WGMMA the compiler later chooses for a GPU. That meaning runs on the CPU through
TileLang's own target ``c`` once the kernel's IR says nothing the CPU lacks. This module rewrites
the ``PrimFunc`` (never source text) by the rules of :data:`RULES`, each one visible and tested:

- ``scopes``: ``T.alloc_shared`` and ``T.alloc_fragment`` buffers become arrays local to the block
  (one CPU thread runs the whole block, so its shared memory and its threads' fragments are one
  array each);
- ``parallel``: ``T.Parallel`` loops run as serial loops, in order, and so do vectorized loops
  (TileLang's C back end prints a vector's comparisons and selects as scalar C the compiler rejects);
- ``pipeline``: ``T.Pipelined`` runs as a plain loop (its stages overlap copies with MMAs on a GPU;
  one after another, the result is the same);
- ``threads``: one thread runs the block, each tile operation once (TileLang's warp specialisation
  and its thread layouts are how a GPU shares out the block's work, not what the work is);
- ``thread-level``: code that says which thread does what (``T.get_thread_binding``,
  ``T.thread_binding``) runs in loops over the block's threads, split at each barrier, with a slot
  per thread for what a thread keeps across one; all-reduces, shuffles, warp reductions and votes
  become a loop that stores every thread's value and one that reads each thread's result
  (``emulate_threads.py``); mbarriers that code by thread arrives on are shared counters of each
  thread's arrivals, and the groups of a branch on the thread take turns as they let them, a deadlock
  reported with its barriers and lines (``emulate_barriers.py``); a wait on each thread's own
  mbarrier (``bars[tx // 32]``) that every thread makes is met when every thread's is; one-sided
  named barriers (``T.named_barrier_arrive`` with ``T.sync_threads(id, count)``) are counters of
  the threads they name, a ``bar.sync`` the arrival and its group's wait;
- ``warp-roles``: hand-written warp specialisation and mbarriers run in program order: each
  ``T.ws(k)`` region once, for its warp group; each mbarrier a counter of its completed phases and
  of its arrivals (an arrive from a region counts the group's threads); ``T.tma_copy(...,
  barrier=)`` copies at once; a wait on parity P passes when the phase of parity P has completed,
  by PTX's rule, and a wait program order never satisfies fails the run with its barrier and line
  (``emulate_roles.py``); a ``T.gemm`` on one stage of a staged tile takes a 2-D view of it;
- ``explicit-wgmma``: ``T.wgmma_gemm`` (Hopper's GEMM of whole tiles without its implicit wait) is
  the ``T.gemm`` of its operands, and ``T.wait_wgmma`` does nothing (the CPU's GEMM is done when its
  statement ends), and a use of an accumulator a GEMM surely still writes (before the wait that
  completes it) is refused by name with its line (``emulate_wgmma.py``); WGMMA instructions by hand
  stay refused by name;
- ``reducers``: a reducer epoch (``T.alloc_reducer``, ``T.reducer_init``, ``T.reducer_update``,
  ``T.finalize_reducer``) is an array local to the block, each update combined into it once, in order
  (``emulate_reducers.py``; TileLang's own lowering needs its updates in parallel loops, which the
  ``parallel`` rule has made serial);
- ``tile-ops``: a tile operation's option that only says how a GPU runs it is dropped (a reduce's
  ``batch=``, an atomic add's ``use_tma=``), and a ``T.reduce_max/min/absmax`` with
  ``nan_propagate=True`` runs as loops whose combine is NaN when an operand is, and every other
  float maximum and minimum (the default reduce's combine, ``T.max``, ``T.min``) is the GPU's
  (PTX's max and min, which fmaxf and __hmax compile to: a NaN operand gives the other, -0 < +0)
  (``emulate_tileops.py``);
- ``dtypes``: float16, bfloat16, float8, float4 and tfloat32 have no form in the CPU's C: they are
  computed in float32, and every cast to such a type and every store into a buffer of one rounds
  the value to it (round to nearest even, as the GPU's conversions do), so a tile kept in float16
  holds what it would on the GPU; so does a scalar bound in such a type (``x: T.float16 = ...``, a
  tuple assignment's temporaries), and a float16 or bfloat16 constant is rounded as the GPU's
  ``half_t(1.1f)`` rounds it; a float16, bfloat16 or float8 tensor is passed as its bits (no
  float32 copy of a large tensor is made: each load decodes, each store encodes); a bool tensor is
  passed as its bytes (int8) and read as != 0 (the host C rejects bool pointers), and a bool tile
  is held as bytes too (a vectorised copy of bools has no C type); a float4 tensor given as
  the bytes that pack it (TileLang's layout: two elements a byte along the last dimension, element
  2k in the low half) is read as its values (a 4-bit integer buffer is refused by name);
- ``imported``: a device function written in CUDA C (``T.import_source``) is compiled as C++, its
  inline PTX translated instruction by instruction (``emulate_ptx.py``), a float16 or bfloat16
  buffer it takes passed as a copy of its bits;
- ``blocks``: blocks run one after another, and only those selected (a mask passed at launch); a
  kernel launched in thread-block clusters with no operation across its cluster runs its blocks alone
  (an operation across the cluster is refused);
- ``bounds``: every access to a tensor or a tile buffer that cannot be proved inside its extent is
  checked on both sides; an access outside is recorded with its block and indices and not
  performed (a read gives 0), so a kernel bug never corrupts the process that runs it; a ``T.assume``
  is dropped first, since TileLang would prove an access in bounds from it and remove its check.

A ``T.alloc_global`` scratch buffer (flash decoding's partial results between its split and
combine kernels) is global memory on the GPU: on the CPU it is heap memory the runtime allocates
where the program reaches it and frees at the end of its scope (C would put it on the stack,
which a large one overflows).

What has no meaning on the CPU is refused by name, with the line that says it
(:class:`EmulationRefused`): an mbarrier operation neither rule can give a meaning (a wait only some
threads of a group make, an operation they do not know), hand-written PTX outside a
device function, an instruction of a device function's inline PTX outside ``emulate_ptx``'s table,
a barrier or warp operation only some threads reach, an operation on another block of a
thread-block cluster (``T.copy_cluster``, ``T.alloc_cluster_barrier``: the blocks run one after
another), and a tensor reached through an address read from memory (``T.make_tensor`` from a
pointer table: the address is one of the caller's process, and its extent is unknown). Atomics are
kept: the CPU runs blocks one after another, so an atomic update is an update (one valid order of
the GPU's).

The rounding and the out-of-bounds record are C functions of a small runtime library that the
launch side builds and loads before the kernel (``launch/_emulate.py``): the kernel is built with
them undefined, as the trace runtime is.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from .compile import compile_kernel
from .emulate_barriers import interleave
from .emulate_intrinsics import INTRINSICS, lanes_stored, lower_intrinsics, refused_draws, refused_intrinsic
from .emulate_ptx import PtxUnsupported, imported_calls, translate_source
from .emulate_reducers import RULE_ID as REDUCERS_RULE
from .emulate_reducers import reducers
from .emulate_roles import RULE_ID as ROLES_RULE
from .emulate_roles import warp_roles
from .emulate_source import EXTERN_INT, EmulationRefused, _source_lines, oob_call
from .emulate_threads import RULE_ID as THREAD_RULE
from .emulate_threads import WARP_MATRIX_OPS, thread_level
from .emulate_tileops import RULE_ID as TILE_OPS_RULE
from .emulate_tileops import gpu_max_min, tile_ops
from .emulate_wgmma import in_flight_access
from .env import tilelang
from .resolve import resolve_kernel

ROUND_FUNCTION = "tilelab_emu_round"  # float tilelab_emu_round(float x, int64 format)
FROM_BITS_FUNCTION = "tilelab_emu_float_of_bits"  # float (uint32 bits, int64 format): T.reinterpret as a GPU float
TO_BITS_FUNCTION = "tilelab_emu_bits_of_float"  # uint32 (float x, int64 format): a GPU float's bits
SCRATCH_FUNCTION = "tilelab_emu_scratch"  # void* (int64 bytes): zeroed heap memory
SCRATCH_FREE_FUNCTION = "tilelab_emu_scratch_free"  # int32 (void*)
BLOCK_MASK = "tilelab_blocks"
MASK_LOOP = "tilelab_selected"  # the loop of one trip (a selected block) or none around a block's body
# Part of the rewritten kernel (an attribute of its PrimFunc), so of TileLang's cache key: a change
# of the rewrite or of the late pass below changes it, and no compile made by another one answers.
EMULATION_VERSION = "19"  # a value bound alike under a branch on the thread is not per-thread
MAX_RANK = 6
# The parallel rule's second half: every vectorized loop (T.vectorized, and those TileLang makes of a copy or a
# T.Parallel) is lowered as a serial loop. TileLang's C back end prints a vector of lanes as a struct with no
# comparisons, selects or conversions, and the late pass's guards and rounding are scalar code.
CPU_PASS_CONFIGS = {"tirx.disable_vectorize": True}
OOB_READ, OOB_WRITE = 0, 1

# The GPU types the CPU's C lacks, and the format code the runtime rounds to.
NARROW_FLOATS = {
    "float16": 1, "bfloat16": 2, "float8_e4m3fn": 3, "float8_e4m3": 3, "float8_e5m2": 4,
    "float8_e4m3fnuz": 5, "float8_e5m2fnuz": 6, "float4_e2m1fn": 7,
    "tfloat32": 8,  # float32 storage; the tensor cores read 10 bits of its mantissa
}
NARROW_FLOATS["custom[tfloat32]"] = NARROW_FLOATS["tfloat32"]  # TVM's name of TileLang's tf32 type
COMPUTE_DTYPE = "float32"
# The narrow tensors a kernel receives as their bits (an integer of the same width, each load decoded
# and each store encoded by the runtime): no float32 copy of them is made, nor converted back.
BITS_STORAGE = {"float16": "int16", "bfloat16": "int16", "float8_e4m3fn": "int8", "float8_e4m3": "int8",
                "float8_e5m2": "int8", "float8_e4m3fnuz": "int8", "float8_e5m2fnuz": "int8"}
BOOL_TENSOR_DTYPE = "int8"  # a bool tensor's bytes as the CPU kernel takes them (torch.bool is one byte)


@dataclass(frozen=True)
class Rule:
    """One rewrite of a GPU kernel's IR for the CPU: its id, what it does, and why the kernel
    still means the same."""

    id: str
    does: str
    why: str


RULES = (
    Rule("scopes", "T.alloc_shared and T.alloc_fragment buffers become arrays local to the block",
         "one CPU thread runs the whole block: its shared memory, and the fragments its threads hold, are one "
         "array each"),
    Rule("parallel", "T.Parallel loops run as serial loops, and so do vectorized ones (T.vectorized, and those "
         "TileLang makes of a copy); a vector store written by hand (T.Ramp lanes) is stored lane by lane, each lane "
         "its scalars (TVM's math on vectors the call of each lane; a store whose index vector TileLang's C cannot "
         "print and whose value has a lane of no scalar form, a vector variable, is refused by name)",
         "a T.Parallel or vectorized loop says every iteration is independent, so any order computes the same tile "
         "(TileLang's C back end prints a vector's comparisons and selects as scalar code the compiler rejects)"),
    Rule("pipeline", "T.Pipelined runs as a plain loop (num_stages, order, stage and group are dropped)",
         "stages overlap the copies of one iteration with the MMAs of another on a GPU; in order, the values "
         "are the same"),
    Rule("threads", "one CPU thread runs each block, and each of its tile operations once; register-count hints "
         "(T.set_max_nreg, T.disable_warp_group_reg_alloc) are dropped",
         "threads, warps and TileLang's warp specialisation are how a GPU shares out a block's tile operations, "
         "not what they compute"),
    Rule("thread-level", "code that indexes by thread runs in loops over the block's threads, split at each "
         "barrier; what a thread keeps across a barrier (its T.alloc_local / T.alloc_var buffers, the values it "
         "binds) gets one slot per thread; an all-reduce, shuffle, warp reduction or vote stores every thread's "
         "value, then gives each thread its result; a warp's ldmatrix and mma.sync m16n8k16 store every lane's "
         "part of the operands, then give each lane its part of the result (the PTX ISA's lane layouts); a "
         "branch on the thread around tile operations runs them once when some thread takes it; mbarriers that "
         "such code arrives on are counters shared by the block's "
         "threads, each thread's arrival adding one (on its own mbarrier where the index says which, "
         "bars[tx // 32]), and the groups of a branch on the thread take turns, each resumed at the wait it stopped "
         "at; one-sided named barriers (T.named_barrier_arrive, T.sync_threads(id, count)) are such counters too, "
         "a bar.sync the arrival and the group's wait for that phase; a fragment no tile operation touches is a "
         "thread's registers",
         "every thread runs such code on a GPU, and between two barriers any order of the threads is one a GPU may "
         "run; the turns are an order the mbarriers allow, and when no group can pass its wait the block would hang "
         "on a GPU: it is reported as a deadlock; a barrier or warp operation only some threads reach is refused"),
    Rule("warp-roles", "the block's code runs in the order it is written: each T.ws(k) region once, for its warp "
         "group (its tile operations whole; its code by thread for that group's threads); each mbarrier is a counter "
         "of completed phases and of arrivals (an arrive from a region counts its group's threads, T.alloc_barrier "
         "gives the count); a TMA copy with barrier= copies at once; a wait on parity P passes when the phase of "
         "parity P has completed (PTX's rule), and one that program order never satisfies fails the run with its "
         "barrier and line",
         "every interleaving of the groups that the barriers allow computes the same tiles, and program order is "
         "one of them when each wait follows its producer in the code; a protocol that needs its groups to run at "
         "the same time is reported, never hung on"),
    Rule("explicit-wgmma", "a T.wgmma_gemm (Hopper's explicit asynchronous GEMM of whole tiles, its wait left to "
         "T.wait_wgmma) is the T.gemm of the same operands, and T.wait_wgmma does nothing; the WGMMA instructions by "
         "hand (T.ptx_wgmma_*, warpgroup fences and descriptors) stay refused by name, and so does a use of an "
         "accumulator before a T.wait_wgmma that completes its GEMM on every path (emulate_wgmma.py)",
         "T.wgmma_gemm is TileLang's T.gemm (the same tile operation, its operands whole shared or fragment tiles) "
         "pinned to WGMMA without the implicit wait; the CPU's GEMM is done when its statement ends, so every "
         "wait finds it done; a read before the wait reads registers the GPU's tensor cores still write"),
    Rule("reducers", "a reducer (T.alloc_reducer) is an array local to the block: T.reducer_init sets it to its "
         "init value or the combine's identity, each T.reducer_update(acc[i], v) combines v into acc[i], and "
         "T.finalize_reducer copies it into its destination",
         "one thread runs the block, so each logical update is combined once, in order: the reduction TileLang's "
         "plan of partials across threads computes (up to the order of a float sum)"),
    Rule("tile-ops", "a tile operation's option that only says how a GPU runs it is dropped (a reduce's batch=, "
         "the AllReduces sharing barriers; an atomic add's use_tma=, the tile added by one bulk copy); a reduce_max, "
         "reduce_min or reduce_absmax with nan_propagate=True runs as loops whose combine is NaN when either "
         "operand is; every other float maximum and minimum (TileLang's reduce's combine, T.max, T.min) is the GPU's "
         "(PTX's max/min: a NaN operand gives the other, -0 < +0; emulate_tileops.py)",
         "one thread runs the block and the blocks run one after another, so the reduction and the tile's "
         "elementwise atomic add are the same without the GPU's way of sharing them out; __hmax_nan and __hmin_nan "
         "return NaN when an operand is NaN, and TileLang's CPU reduce has no such combine (nor allows the option "
         "on the float32 the CPU holds a float16 tile in); without it the GPU combines with fmaxf/fminf, __hmax/__hmin "
         "(a NaN skipped), where the C back end's a > b ? a : b would depend on where the NaN sits"),
    Rule("sparse", "a T.gemm_sp (2:4 structured sparsity) runs as the loops of its meaning: each 4-bit group of "
         "the metadata E places A's two stored elements among four of K, and C accumulates their products with B",
         "the sparse tensor cores compute exactly this product; the metadata is the one TileLang's compressor "
         "writes (row by row, two 2-bit positions per group, the first group in the low bits)"),
    Rule("dtypes", "float16, bfloat16, float8, float4 and tfloat32 are computed in float32; each cast to such a "
         "type and each store into a buffer of one rounds to it, and so does each scalar bound in one (x: T.float16 "
         "= ...), and a float16 or bfloat16 constant is its float literal rounded as the GPU converts it; a float16, "
         "bfloat16 or float8 tensor is passed as "
         "its bits, each load decoding and each store encoding them (one reached through a pointer, an atomic, is "
         "passed in float32); a float4 tensor given as the bytes that pack it (two elements a byte, along "
         "the last dimension) is read as its values (one the kernel stores into is refused; int4 and uint4 buffers "
         "are refused); a bool tensor is "
         "passed as its bytes (int8), read as != 0, and a bool tile is held as bytes too",
         "the CPU's C has no such types; rounding where the GPU rounds keeps what a tile holds, and a bool is "
         "one byte that is 0 or 1 on both; a uint32 tensor or size is passed as uint32_t (TileLang's CPU host "
         "wrapper has no entry for it)"),
    Rule("imported", "a device function written in CUDA C (T.import_source) is compiled as C++: its body as "
         "written, the CUDA types and intrinsics it uses from a small prelude, each inline PTX instruction turned "
         "into C by one table of the PTX ISA's semantics (emulate_ptx.py; an instruction outside it is refused by "
         "name with its line); a float16, bfloat16 or float8 buffer it takes is passed as a copy of its bits",
         "the function's C is the same program on either processor, and each PTX instruction computes what the ISA "
         "defines (16-bit float arithmetic exact, then rounded once to nearest even)"),
    Rule("intrinsics", "TileLang intrinsics its C back end lacks are given their meaning, each by one entry of a "
         "table (emulate_intrinsics.INTRINSICS: " + ", ".join(sorted(INTRINSICS)) + "); any other is refused by name, "
         "and so is a random draw inside a T.Parallel loop of a block of many threads; a store of a vector TileLang's "
         "C cannot build (T.fma2, T.abs2, a load by hand reinterpreted as float lanes) is a store per lane, and a "
         "vector local (T.alloc_var(T.bfloat16x2)) read by T.extract_lane is held as its lanes",
         "each entry is TileLang's own definition of the op (its docstring, its CUDA template) at the level of one "
         "thread or one tile"),
    Rule("blocks", "blocks run one after another, only the selected ones; in a program of several kernels the "
         "earlier kernels run whole and the selection is of the last kernel's blocks; thread-block clusters "
         "(cluster_dims) of a kernel with no operation across its cluster are dropped",
         "blocks of one launch are independent on a GPU: any order is one the GPU could have run; a later kernel "
         "reads what every block of the earlier ones wrote; a cluster whose blocks share neither shared memory nor "
         "barriers is only where the GPU places them"),
    Rule("bounds", "every access that cannot be proved inside its buffer is checked on both sides, and one "
         "outside is recorded, not performed; a T.assume is not used to prove it (the promise is dropped)",
         "an out-of-bounds access is a bug to report, never memory of the process to corrupt, and a broken "
         "T.assume promise is such a bug"),
)


@dataclass(frozen=True)
class Emulation:
    """A GPU kernel rewritten for the CPU.

    ``func`` is the rewritten ``PrimFunc`` (its last parameter the block mask), ``applied`` the
    ids of the rules that changed something, ``narrow`` each buffer whose GPU type the CPU lacks
    (name -> that dtype), ``tensors`` the kernel's tensor parameters in order, ``block_names`` the
    block-index variables by axis."""

    name: str
    func: Any
    applied: tuple[str, ...]
    narrow: dict[str, str]
    tensors: tuple[str, ...]
    block_names: dict[str, str]
    grid_rank: int
    buffers: tuple[str, ...] = field(default=())  # ids of the out-of-bounds record: tensors, then tiles
    bits: tuple[str, ...] = field(default=())  # narrow tensors passed as their bits (BITS_STORAGE)
    barriers: tuple[str, ...] = field(default=())  # the mbarriers an unsatisfiable wait's record numbers


# ------------------------------------------------------------------------------------------
# What cannot be emulated
# ------------------------------------------------------------------------------------------

_PTX_PATTERN = r"warpgroup_(arrive|commit|wait|fence)|wgmma|ptx_"
# Call ops that synchronise threads or warps by hand: (pattern on the op's name, the construct's
# name as the user wrote it, a pattern that finds the line in the kernel's source).
_REFUSED_CALLS = (
    (r"mbarrier|(?<!named_)barrier_(arrive|wait|init)|arrive_barrier|wait_barrier|init_barrier",
     "an mbarrier operation the warp-roles rule does not know (T.mbarrier_* / T.barrier_*)",
     "the CPU run gives arrives, waits, TMA copies with barrier= and expected byte counts their meaning in "
     "program order; this one it cannot",
     r"\bT\.(mbarrier_\w+|barrier_\w+|alloc_barrier|create_list_of_mbarrier|get_mbarrier)\b"),
    (_PTX_PATTERN, "a hand-written PTX or warp-group instruction",
     "it is one GPU instruction of one warp, not an operation on a tile",
     r"\bT\.(ptx_\w+|warpgroup_\w+|wgmma\w*)\b"),
)
# Barriers, shuffles, warp reductions and votes are the thread-level rule's (emulate_threads.py).


def _locate(func: Any, pattern: str) -> tuple[str, int, str]:
    filename, start, lines = _source_lines(func)
    for i, text in enumerate(lines):
        code = text.split("#", 1)[0]
        if re.search(pattern, code):
            return filename, start + i, text
    return filename, 0, ""


def _cluster_refusal(func: Any, name: str) -> EmulationRefused | None:
    """The first operation of ``func`` on another block of its thread-block cluster (a copy into a
    remote block's shared memory, an mbarrier of the cluster that such a copy arrives on), refused
    by name: the CPU runs the blocks one after another, so one block never sees another's shared
    memory while it runs."""
    tirx = tilelang().tvm.tirx
    found: list[tuple[str, str]] = []

    def visit(node: Any) -> None:
        if found:
            return
        if isinstance(node, tirx.Call) and "dst_block" in (getattr(node, "annotations", None) or {}):
            found.append(("a copy into another block's shared memory (T.copy_cluster with dst_block=, distributed "
                          "shared memory of a thread-block cluster)", r"\bT\.copy_cluster\b"))
        elif isinstance(node, tirx.SBlock):
            for buf in node.alloc_buffers:
                if buf.scope() == "shared.cluster_barrier":
                    found.append((f"an mbarrier of a thread-block cluster ({buf.name}, T.alloc_cluster_barrier), "
                                  "which other blocks of the cluster arrive on", r"\bT\.alloc_cluster_barrier\b"))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    if not found:
        return None
    construct, pattern = found[0]
    file, line, text = _locate(func, pattern)
    return EmulationRefused(name, construct, "the CPU runs a launch's blocks one after another, each with its own "
                            "shared memory, so no block writes into another's or waits for one while it runs",
                            file, line, text)


def _reads_memory(tirx: Any, value: Any) -> bool:
    """Whether ``value`` reads a buffer (an address loaded from memory, not a parameter's)."""
    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), lambda n: found.append(n)
                                       if isinstance(n, tirx.BufferLoad) else None)
    return bool(found)


def refusal(func: Any, name: str) -> EmulationRefused | None:
    """The first construct of ``func`` with no tile-level meaning, as the error to raise; None
    when the kernel can run on the CPU."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    found: list[EmulationRefused] = []

    def note(construct: str, detail: str, *patterns: str) -> None:
        """The construct refused, at the first line the first pattern that finds one finds."""
        if not found:
            file, line, text = "", 0, ""
            for pattern in patterns:
                file, line, text = _locate(func, pattern)
                if line:
                    break
            found.append(EmulationRefused(name, construct, detail, file, line, text))

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Bind) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")).endswith("reinterpret") \
                and str(getattr(getattr(node.var.type_annotation, "element_type", None), "dtype", "")) \
                and _reads_memory(tirx, node.value):
            elem = str(node.var.type_annotation.element_type.dtype)
            narrow = (f"; the CPU run also holds {elem} tensors in float32, where the address points at {elem} data"
                      if elem in NARROW_FLOATS else "")
            note(f"a {elem} tensor reached through an address held in memory (T.make_tensor from a pointer table)",
                 "the address is one the caller's process gave (a data pointer of a tensor that is not an argument of "
                 "the call), so the CPU run, in a process of its own, can neither reach that tensor nor check an "
                 f"access against its extent{narrow}", r"\bT\.reinterpret\b|\bT\.make_tensor\b")
        elif isinstance(node, tirx.Call):
            op = str(getattr(node.op, "name", ""))
            if op == "tirx.call_extern" and node.args:
                op = str(getattr(node.args[0], "value", op))
                if op in imported:  # a device function of the kernel's own CUDA C (the imported-source rule)
                    return
            if op in WARP_MATRIX_OPS:  # the thread-level rule's, lane by lane (or refused there by form)
                return
            for pattern, construct, detail, source in _REFUSED_CALLS:
                matched = re.search(pattern, op)
                if matched and pattern is _PTX_PATTERN:
                    # written as T.ptx_* or through an intrinsic emitter (emitter.ldmatrix_a(...), a
                    # bare call in the kernel naming the instruction or its family)
                    short = op.split(".")[-1].removeprefix("ptx_")
                    family = (matched.group(0) if matched.group(0) != "ptx_" else short).strip("_").split("_")[0]
                    note(f"{construct} ({op})", detail, source, rf"^\s*[\w.]*{re.escape(short)}\w*\s*\(",
                         rf"^\s*[\w.]*{re.escape(family)}\w*\s*\(")
                elif matched:
                    note(construct, detail, source)
        elif isinstance(node, tirx.SBlock) and "code_block_source" in node.annotations:
            note("a kernel written in CUDA C (T.CUDASourceCodeKernel)",
                 "its body is a whole __global__ function of one GPU thread (threadIdx, blockIdx, __syncthreads), not "
                 "a tile program; the CPU run gives a device function called from a tile program (T.import_source) "
                 "its meaning, not a kernel", r"\bT\.CUDASourceCodeKernel\b")
        elif isinstance(node, tirx.AttrStmt) and str(node.attr_key) in ("warp_specialize", "tl.ws",
                                                                        "kWarpSpecializationScope"):
            note("a T.ws region the warp-roles rule left",
                 "it gives warps of the block different programs, and this one is not under the condition on the "
                 "thread that TileLang makes of T.ws", r"\bT\.ws\b")

    sources, imported = _imported_device_calls(func)
    tirx.stmt_functor.post_order_visit(func.body, visit)
    allocated: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        func.body, lambda n: allocated.extend(n.alloc_buffers) if isinstance(n, tirx.SBlock) else None)
    for buf in [*func.buffer_map.values(), *allocated]:
        if str(buf.dtype) in ("int4", "uint4"):
            note(f"a 4-bit integer buffer ({buf.name}, {buf.dtype})",
                 "the CPU's C has no 4-bit integer type and the CPU path does not yet hold one in a wider type "
                 "(float4 tensors run: they are held in float32)", rf"\b{re.escape(str(buf.name))}\b")
    for source in sources:  # the imported-source rule: CUDA C kept, its inline PTX translated by emulate_ptx's table
        try:
            translate_source(source)
        except PtxUnsupported as err:
            called = ", ".join(imported) or "a device function"
            note(f"{err.what} in a device function written in CUDA C ({called}, from T.import_source; its line "
                 f"{err.line}: {err.text.strip()})",
                 "the CPU runs such a function's C body and translates its inline PTX instruction by instruction, "
                 "and this has no translation",
                 "|".join([*(rf"\b{re.escape(c)}\b" for c in imported), r"\bT\.import_source\b"]))
    return found[0] if found else None


_CLUSTER_ANNOTATIONS = ("dst_block", "cluster_mask")  # a copy into another block's shared memory, a multicast


def _clusters(func: Any, name: str) -> tuple[Any, bool]:
    """A kernel launched in thread-block clusters (``T.Kernel(..., cluster_dims=...)``) with its
    ``cluster_dims`` dropped, and whether it had any: a cluster groups blocks that may share their
    shared memory and barriers, and a block of a kernel that uses neither (no cluster-scope
    operation) computes the same tiles alone. An operation across the cluster (a copy into another
    block's shared memory or a multicast, ``T.cluster_sync`` / ``T.cluster_arrive`` / ``T.cluster_wait``,
    a cluster barrier, ``T.block_rank_in_cluster``) is refused by name with its line."""
    tirx = tilelang().tvm.tirx
    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call):
            op = str(getattr(node.op, "name", ""))
            annotations = getattr(node, "annotations", None) or {}
            if "cluster" in op or "multicast" in op:
                found.append(op)
            elif any(k in annotations for k in _CLUSTER_ANNOTATIONS):
                found.append(f"{op} with {', '.join(k for k in _CLUSTER_ANNOTATIONS if k in annotations)}")
        elif isinstance(node, tirx.SBlock):
            found.extend(f"a {b.scope()} buffer" for b in node.alloc_buffers if "cluster" in b.scope())

    tirx.stmt_functor.post_order_visit(func.body, visit)
    if found:
        file, line, text = _locate(func, r"\bT\.(?!get_cluster)\w*cluster\w*\b|\b(dst_block|cluster_mask)\s*=")
        raise EmulationRefused(name, f"an operation across a thread-block cluster ({found[0]})",
                               "the CPU runs the blocks one after another, each with its own shared memory; "
                               "blocks that read or write each other's shared memory or barriers, or wait for "
                               "each other, need to run at the same time", file, line, text)
    dropped: list[bool] = []

    def post(node: Any) -> Any:
        if isinstance(node, tirx.SBlock) and "cluster_dims" in node.annotations:
            dropped.append(True)
            annotations = {k: v for k, v in node.annotations.items() if k != "cluster_dims"}
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               node.alloc_buffers, node.match_buffers, annotations)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock"])
    return (func.with_body(body, span=func.span), True) if dropped else (func, False)


def _imported_device_calls(func: Any) -> tuple[list[str], list[str]]:
    """The CUDA C sources a kernel brings in (T.import_source) and the functions it calls
    (T.call_extern) that they define."""
    tirx = tilelang().tvm.tirx
    sources: list[str] = []
    calls: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.SBlock) and "pragma_import_c" in node.annotations:
            sources.append(str(node.annotations["pragma_import_c"]))
        elif isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) == "tirx.call_extern" and node.args:
            calls.append(str(getattr(node.args[0], "value", "")))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    found = [c for c in dict.fromkeys(calls) if c and any(re.search(rf"\b{re.escape(c)}\s*\(", s) for s in sources)]
    return sources, found


# ------------------------------------------------------------------------------------------
# The rewrite before lowering: scopes, loops, pipelines, threads, dtypes, the block mask
# ------------------------------------------------------------------------------------------

def _constant_in(value: float, dtype: str) -> float:
    """A constant of a narrow float type (``T.float16(1.1)``) as the GPU holds it: TileLang's CUDA prints
    it as a float literal converted to the type (``half_t(1.1f)``), so the value rounded to float32,
    then to nearest even in float16 or bfloat16 (an overflow is infinite, as __float2half_rn and
    __float2bfloat16_rn give). Another narrow type's constant is kept as it is."""
    import numpy as np

    single = np.float32(value)
    if dtype == "float16":
        return float(np.float32(np.float16(single)))
    if dtype == "bfloat16" and np.isfinite(single):
        bits = int(single.view(np.uint32))
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return float(np.uint32(bits & 0xFFFFFFFF).view(np.float32))
    return value


def _canonical(dtype: str) -> str:
    return "tfloat32" if dtype == "custom[tfloat32]" else dtype


def _cpu_dtype(dtype: Any) -> str:
    text = str(dtype)
    return COMPUTE_DTYPE if text in NARROW_FLOATS else text


_REGISTER_HINTS = ("tl.set_max_nreg", "tl.no_set_max_nreg", "tl.inc_max_nreg", "tl.dec_max_nreg")
_LOCAL_SCOPES = ("shared", "shared.dyn", "local.fragment", "shared.barrier", "local")
_PIPELINE_KEYS = ("num_stages", "tl_pipeline_order", "tl_pipeline_stage", "tl_pipeline_group",
                  "software_pipeline_stage", "software_pipeline_order", "software_pipeline_async_stages",
                  "tl_pipelined_num_stages")


def _block_axis(loop: Any) -> str:
    """"x", "y" or "z" for a loop bound to blockIdx, else ""."""
    if loop.thread_binding is None:
        return ""
    tag = str(loop.thread_binding.thread_tag)
    return tag[-1] if tag.startswith("blockIdx.") and tag[-1] in "xyz" else ""


def _grids(body: Any) -> list[dict[str, tuple[Any, Any]]]:
    """Each kernel launch of a program in order (its nest of blockIdx loops): axis -> (the loop's
    variable, its extent)."""
    tirx = tilelang().tvm.tirx
    kernels: list[dict[str, tuple[Any, Any]]] = []
    nested: set[Any] = set()

    def pre(node: Any) -> Any:
        if isinstance(node, tirx.For) and _block_axis(node):
            if node.loop_var not in nested:
                kernels.append({})
            kernels[-1].setdefault(_block_axis(node), (node.loop_var, node.extent))
            if isinstance(node.body, tirx.For):
                nested.add(node.body.loop_var)
        return None

    tirx.stmt_functor.ir_transform(body, pre, lambda node: None, ["tirx.For"])
    return kernels


def _stage_views(body: Any) -> Any:
    """A T.gemm on one stage of a staged tile (``A_s[stage, :, :]`` of a (stages, rows, cols) buffer)
    takes a two-dimensional view of the buffer, (stages * rows, cols), at that stage's first row:
    TileLang's CPU lowering of T.gemm indexes its operands with two indices."""
    tvm = tilelang().tvm
    tirx = tvm.tirx

    def view(region: Any, views: list[Any]) -> Any:
        if not (isinstance(region, tirx.Call) and str(getattr(region.op, "name", "")) == "tl.region"
                and isinstance(region.args[0], tirx.BufferLoad)):
            return region
        load = region.args[0]
        buf, extents = load.buffer, list(region.args[2:])
        rank = len(buf.shape)
        if rank <= 2 or len(extents) != rank or len(buf.strides) \
                or not all(isinstance(e, tirx.IntImm) and int(e) == 1 for e in extents[:-2]):
            return region
        # the whole buffer seen as (rows of every stage, cols): the same size as its allocation
        row: Any = tirx.const(0, "int32")
        rows: Any = tirx.const(1, "int32")
        for index, extent in zip(load.indices[:-1], buf.shape[:-1]):
            row = row * extent + index
            rows = rows * extent
        stage = tirx.decl_buffer([rows, buf.shape[-1]], buf.dtype, str(buf.name), data=buf.data, scope=buf.scope(),
                                 elem_offset=buf.elem_offset)
        views.append(stage)
        return tirx.Call(region.dtype, region.op, [tirx.BufferLoad(stage, [row, load.indices[-1]]), region.args[1],
                                                   *extents[-2:]])

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")) == "tl.tileop.gemm":
            views: list[Any] = []
            args = [view(a, views) for a in node.value.args]
            if views:
                call = tirx.Call(node.value.dtype, node.value.op, args)
                return tirx.Evaluate(call)  # the view shares the buffer's data: nothing to declare
        return None

    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Evaluate"])


WGMMA_GEMM, WGMMA_WAIT = "tl.tileop.wgmma_gemm", "tl.wait_wgmma"


def _explicit_wgmma(func: Any) -> tuple[Any, bool]:
    """The explicit-wgmma rule: each ``T.wgmma_gemm`` as the ``T.gemm`` of its arguments (TileLang
    builds both by one function, with the same arguments; the annotation that drops the implicit
    wait is dropped too) and each ``T.wait_wgmma`` as nothing, and whether there was one. A
    ``T.wait_wgmma`` in a kernel with no ``T.wgmma_gemm`` waits for hand-written WGMMA instructions,
    which the refusal names."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    ops: set[str] = set()
    tirx.stmt_functor.post_order_visit(func.body, lambda n: ops.add(str(getattr(n.op, "name", "")))
                                       if isinstance(n, tirx.Call) else None)
    if WGMMA_GEMM not in ops:
        return func, False

    def post(node: Any) -> Any:
        if not (isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call)):
            return None
        op = str(getattr(node.value.op, "name", ""))
        if op == WGMMA_GEMM:
            return tirx.Evaluate(tirx.Call(node.value.dtype, tvm.ir.Op.get("tl.tileop.gemm"), node.value.args))
        if op == WGMMA_WAIT:
            return tirx.Evaluate(tirx.const(0, "int32"))
        return None

    return func.with_body(tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate"])), True


def _region(region: Any) -> tuple[Any, list[Any]]:
    """A tile operation's region argument: its buffer and the start of each dimension."""
    load = region.args[0]
    return load.buffer, list(load.indices)


def _sparse_gemms(body: Any, name: str, narrow: dict[str, str]) -> Any:
    """``T.gemm_sp`` (a 2:4 structured-sparse GEMM) as the loops of its tile meaning: A holds two of
    every four elements of a row's K, and each 4-bit group of the metadata E gives their positions
    among the four (bits [1:0] the first, [3:2] the second; an element of E holds its width / 4
    groups, the first in its low bits). C += the dense product that A and E describe, times B."""
    tvm = tilelang().tvm
    tirx = tvm.tirx

    def loops(call: Any) -> Any:
        a_region, e_region, b_region, c_region = call.args[:4]
        trans_a, trans_e, trans_b = (bool(int(x)) for x in call.args[4:7])
        m, n, k = (int(x) for x in call.args[7:10])
        clear = len(call.args) > 11 and isinstance(call.args[11], tirx.IntImm) and bool(int(call.args[11]))
        a, a0 = _region(a_region)
        e, e0 = _region(e_region)
        b, b0 = _region(b_region)
        c, c0 = _region(c_region)
        bits = tvm.DataType(str(e.dtype)).bits
        wide_a = str(a.name) not in narrow and tvm.DataType(str(a.dtype)).bits > 16  # 32-bit A: pairs, not 2:4
        if trans_a or trans_e or wide_a or not str(e.dtype).startswith(("int", "uint")) or bits < 8:
            problems.append(EmulationRefused(
                name, "a T.gemm_sp with transposed A or E, 32-bit A, or metadata that is not an integer",
                "the CPU run gives T.gemm_sp its 2:4 meaning for 8- and 16-bit A with A and E as rows of K"))
            return tirx.Evaluate(call)
        groups = bits // 4  # 4-bit groups of the metadata per element of E
        i, j, g, t = (tirx.Var(v, "int32") for v in ("i", "j", "g", "t"))
        lead = lambda starts: starts[:-2]  # noqa: E731 (leading dimensions of extent 1)
        meta = tirx.Cast("int32", tirx.BufferLoad(e, [*lead(e0), e0[-2] + i, e0[-1] + tirx.floordiv(g, groups)]))
        shift = tirx.floormod(g, groups) * 4 + t * 2
        pos = tirx.bitwise_and(tirx.shift_right(meta, shift), tirx.const(3, "int32"))
        kk = g * 4 + pos
        a_value = tirx.BufferLoad(a, [*lead(a0), a0[-2] + i, a0[-1] + g * 2 + t])
        b_value = tirx.BufferLoad(b, [*lead(b0), b0[-2] + j, b0[-1] + kk] if trans_b else
                                  [*lead(b0), b0[-2] + kk, b0[-1] + j])
        c_index = [*lead(c0), c0[-2] + i, c0[-1] + j]
        acc = str(c.dtype)
        update = tirx.BufferStore(c, tirx.BufferLoad(c, c_index) + tirx.Cast(acc, a_value) * tirx.Cast(acc, b_value),
                                  c_index)
        inner = tirx.For(g, 0, k // 4, tirx.ForKind.SERIAL, tirx.For(t, 0, 2, tirx.ForKind.SERIAL, update))
        if clear:
            inner = tirx.SeqStmt([tirx.BufferStore(c, tirx.const(0, acc), c_index), inner])
        return tirx.For(i, 0, m, tirx.ForKind.SERIAL, tirx.For(j, 0, n, tirx.ForKind.SERIAL, inner))

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")).startswith("tl.tileop.gemm_sp"):
            return loops(node.value)
        return None

    problems: list[EmulationRefused] = []
    out = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Evaluate"])
    if problems:  # raised after the walk: TVM's callbacks would wrap it
        raise problems[0]
    return out


def rewrite_for_cpu(func: Any, name: str, *, mask: bool = True, waits: bool = True,
                    narrow_bits: bool = True) -> Emulation:
    """``func`` (a GPU kernel's PrimFunc) rewritten by :data:`RULES` for target ``c``, with the
    block mask as its last parameter (``mask=False``: every block runs, no mask; ``waits=False``:
    no runtime record of an unsatisfiable mbarrier wait, so a wait is refused; ``narrow_bits=False``:
    every narrow tensor is a float32 one, for a compile without the late pass, whose decoding and
    encoding a tensor passed as its bits needs). Raises :class:`EmulationRefused` for what cannot run."""
    # Long but whole: one walk of the kernel's IR, each rule's rewrite a branch of its post-order hook.
    original = func

    def spanned(rewritten: Any) -> Any:
        """``rewritten`` with the kernel's span (a new body drops it): the refusals find their line by it."""
        if rewritten.same_as(original) or rewritten.span is not None:
            return rewritten
        return rewritten.with_body(rewritten.body, span=original.span)

    cluster = _cluster_refusal(func, name)
    if cluster is not None:
        raise cluster
    in_flight = in_flight_access(func, name)  # the explicit-wgmma rule's refusal: a tile a WGMMA still writes
    if in_flight is not None:
        raise in_flight
    func, wgmma = _explicit_wgmma(func)  # the explicit-wgmma rule: T.wgmma_gemm is T.gemm, its wait nothing
    func = spanned(func)
    draws = refused_draws(func, name)  # the intrinsics rule's random draws it cannot give the GPU's order
    if draws is not None:
        raise draws
    func, intrinsics = lower_intrinsics(func)  # the intrinsics rule: a table of ops the C back end lacks
    func, tiled = tile_ops(spanned(func), name)  # the tile-ops rule: GPU-only options, NaN-propagating reduces
    func, reduced = reducers(spanned(func), name)  # the reducers rule: reducer epochs as their loops
    func = spanned(func)
    roles = warp_roles(func, name, waits=waits)  # the warp-roles rule: T.ws regions and mbarriers, in program order
    # mbarriers that code by thread arrives on: shared counters, the groups of threads taking turns
    interleaved = interleave(func, name, waits=waits) if roles.handed_over else None
    func = spanned(interleaved.func if interleaved is not None else roles.func)
    refused = refusal(func, name)
    if refused is not None:
        raise refused
    func, clustered = _clusters(func, name)  # the blocks rule: a cluster without cluster-scope operations
    threaded = thread_level(func, name)  # the thread-level rule: code that indexes by thread, in loops over them
    func = threaded.func if interleaved is None else interleaved.place_arrivals(threaded.func)
    tvm = tilelang().tvm
    tirx = tvm.tirx
    applied: set[str] = {THREAD_RULE} if threaded.applied else set()
    if intrinsics:
        applied.add("intrinsics")
    if wgmma:
        applied.add("explicit-wgmma")
    if reduced:
        applied.add(REDUCERS_RULE)
    if tiled:
        applied.add(TILE_OPS_RULE)
    if clustered:
        applied.add("blocks")
    if roles.applied:
        applied.add(ROLES_RULE)
    narrow: dict[str, str] = {}
    remap: dict[Any, Any] = {}
    booleans: set[str] = set()  # bool tensors, held as int8 (the host C rejects bool pointers)

    param_narrow = {str(func.buffer_map[p].name): _canonical(str(func.buffer_map[p].dtype)) for p in func.params
                    if p in func.buffer_map and str(func.buffer_map[p].dtype) in NARROW_FLOATS}
    as_bits = _passed_as_bits(func, param_narrow) if narrow_bits else ()
    bits_params: dict[Any, Any] = {}  # a tensor passed as its bits: the float32 buffer -> the integer one

    def replacement(buf: Any, scope: str | None) -> Any:
        if buf in remap:
            return remap[buf]
        if scope is None and str(buf.name) in as_bits and buf.data not in data_map:
            # the parameter is a buffer of the tensor's bits; the body's buffer is a float32 one over the
            # same data, whose loads and stores the late pass decodes and encodes
            storage = BITS_STORAGE[param_narrow[str(buf.name)]]
            # named as the parameter's buffer: TileLang's host wrapper passes its arguments by that name
            data = tirx.Var(str(buf.name), tvm.ir.PointerType(tvm.ir.PrimType(storage), "global"))
            strides = list(buf.strides) if len(buf.strides) else None
            new = tirx.decl_buffer(buf.shape, COMPUTE_DTYPE, str(buf.name), data=data, strides=strides,
                                   elem_offset=buf.elem_offset)
            bits_params[new] = tirx.decl_buffer(buf.shape, storage, str(buf.name), data=data, strides=strides,
                                                elem_offset=buf.elem_offset)
            narrow[str(buf.name)] = param_narrow[str(buf.name)]
            applied.add("dtypes")
            remap[buf] = new
            data_map[buf.data] = new
            return new
        dtype = str(buf.dtype)
        new_dtype = _cpu_dtype(dtype)
        if dtype == "bool":  # a tensor or a tile of bools: its bytes, read as != 0 (the host C has no boolxN)
            new_dtype = BOOL_TENSOR_DTYPE
            booleans.add(str(buf.name))
            applied.add("dtypes")
        if new_dtype != dtype and dtype in NARROW_FLOATS:
            narrow[str(buf.name)] = _canonical(dtype)
            applied.add("dtypes")
        new_scope = scope if scope is not None else buf.scope()
        if new_scope != buf.scope():
            applied.add("scopes")
        if new_dtype == dtype and new_scope == buf.scope():
            remap[buf] = buf
            kept_by_data.setdefault(buf.data, buf)
            return buf
        new = tirx.decl_buffer(buf.shape, new_dtype, str(buf.name), scope=new_scope,
                               strides=list(buf.strides) if len(buf.strides) else None,
                               elem_offset=buf.elem_offset)
        remap[buf] = new
        data_map[buf.data] = new
        return new

    data_map: dict[Any, Any] = {}  # a replaced buffer's data -> its replacement
    view_refusals: list[EmulationRefused] = []  # a view whose bytes the CPU does not hold as the GPU does
    kept_by_data: dict[Any, Any] = {}  # a parameter or allocation the rules keep as it is, by its data

    def aliased(buf: Any) -> Any:
        """``buf`` rewritten: itself when untouched; a view declared over a replaced buffer's data
        (``T.Tensor(shape, dtype, A.data)``, a reshape) becomes the same view of the replacement."""
        if buf in remap:
            return remap[buf]
        base = data_map.get(buf.data)
        if base is None:
            base = kept_by_data.get(buf.data)  # a buffer the rules kept as it is (a float32 tensor): a view of it
            if base is None or base.same_as(buf) or str(buf.dtype) not in NARROW_FLOATS:
                return None  # in a narrow type would be held in float32, not in the base's bytes
        dtype = str(buf.dtype)
        if dtype == "bool" and str(base.name) in booleans:
            dtype = BOOL_TENSOR_DTYPE
            booleans.add(str(buf.name))
        held = str(base.dtype)
        on_gpu = narrow.get(str(base.name), held)  # the base's dtype on the GPU
        same = _canonical(dtype) == _canonical(on_gpu) and _cpu_dtype(dtype) == held
        real_bytes = dtype not in NARROW_FLOATS and dtype != "bool" and on_gpu not in NARROW_FLOATS
        if not (same or real_bytes):
            # the bytes of a GPU type the CPU holds in float32 (or a bool held as a byte): not the GPU's bytes.
            # Raised after the walk (an exception inside TVM's callback would lose its kind).
            file, line, text = _locate(func, rf"\bT\.view\(\s*{re.escape(str(base.name))}\b|"
                                             rf"\b{re.escape(str(buf.name))}\b")
            view_refusals.append(EmulationRefused(
                name, f"a view of {base.name} ({on_gpu}) as {dtype}",
                f"it reads the bytes of a {on_gpu} buffer as {dtype}, and on the CPU that buffer is held in {held} "
                "(a view that keeps the dtype, or one between types the CPU holds as the GPU does, runs)",
                file, line, text))
            return None
        if dtype in NARROW_FLOATS:
            narrow[str(buf.name)] = _canonical(dtype)
        new = tirx.decl_buffer(buf.shape, _cpu_dtype(dtype), str(buf.name), data=base.data, scope=buf.scope(),
                               strides=list(buf.strides) if len(buf.strides) else None,
                               elem_offset=buf.elem_offset)
        remap[buf] = new
        return new

    buffer_map = {}
    tensors = []
    for p in func.params:
        if p in func.buffer_map:
            buf = func.buffer_map[p]
            new = replacement(buf, None)
            buffer_map[p] = bits_params.get(new, new)
            tensors.append(str(buf.name))

    def collect(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            for b in node.alloc_buffers:
                scope = b.scope()
                replacement(b, "local" if scope in _LOCAL_SCOPES and scope != "local" else None)

    tirx.stmt_functor.post_order_visit(func.body, collect)
    local_names = [str(b.name) for b in remap if str(b.name) not in tensors]

    # A program of several kernels (T.Kernel after T.Kernel: a split kernel and its combine) runs
    # the earlier ones whole, since the last one reads what they wrote; blocks= selects blocks of
    # the last kernel, the one whose grid the launch side sees.
    grids = _grids(func.body)
    last = grids[-1] if grids else {}
    block_vars: dict[str, Any] = {a: v for a, (v, _) in last.items()}
    block_extents: dict[str, Any] = {a: e for a, (_, e) in last.items()}
    last_vars = {v for v, _ in last.values()}

    def narrow_call(value: Any, dtype: str) -> Any:
        return tirx.call_extern(COMPUTE_DTYPE, ROUND_FUNCTION, tirx.Cast(COMPUTE_DTYPE, value),
                                tirx.const(NARROW_FLOATS[dtype], EXTERN_INT))

    def post(node: Any) -> Any:
        if isinstance(node, tirx.SBlock):
            allocs = [remap.get(b, b) for b in node.alloc_buffers]
            annotations = {k: _data_keys(v, data_map) for k, v in node.annotations.items() if k not in ("layout_map",)}
            if "tl.launch_threads" in annotations:
                annotations["tl.launch_threads"] = [1, 1, 1]
                applied.add("threads")
            if "pragma_import_c" in annotations:
                annotations["pragma_import_c"] = translate_source(str(annotations["pragma_import_c"]))
                applied.add("imported")
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               allocs, node.match_buffers, annotations)
        if isinstance(node, tirx.BufferLoad):
            new = aliased(node.buffer)
            if new is not None and not new.same_as(node.buffer):
                load = tirx.BufferLoad(new, node.indices)
                if str(new.name) in booleans:
                    return tirx.NE(load, tirx.const(0, BOOL_TENSOR_DTYPE))
                return load
            return None
        if isinstance(node, tirx.BufferStore):
            new = aliased(node.buffer)
            if new is not None and not new.same_as(node.buffer):
                value = tirx.Cast(BOOL_TENSOR_DTYPE, node.value) if str(new.name) in booleans else node.value
                return tirx.BufferStore(new, value, node.indices)
            return None
        if isinstance(node, tirx.DeclBuffer):
            new = aliased(node.buffer)
            if new is not None and not new.same_as(node.buffer):
                return tirx.DeclBuffer(new)
            return None
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")) == "tirx.assume":
            # the bounds rule: a T.assume is the user's promise, and TileLang's simplifier would prove an
            # access in bounds from it and drop its check; a promise a run breaks is reported as the access
            applied.add("bounds")
            return tirx.Evaluate(tirx.const(0, "int32"))
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call) \
                and str(getattr(node.value.op, "name", "")) in _REGISTER_HINTS:
            applied.add("threads")  # how many registers a warp group keeps: nothing to run on the CPU
            return tirx.Evaluate(tirx.const(0, "int32"))
        if isinstance(node, tirx.For):
            annotations = {k: v for k, v in node.annotations.items() if k not in _PIPELINE_KEYS}
            kind = node.kind
            if kind == tirx.ForKind.PARALLEL:
                kind = tirx.ForKind.SERIAL
                applied.add("parallel")
            if len(annotations) != len(node.annotations):
                applied.add("pipeline")
            if kind == node.kind and len(annotations) == len(node.annotations):
                return None
            return tirx.For(node.loop_var, node.min, node.extent, kind, node.body, node.thread_binding,
                            annotations)
        if isinstance(node, tirx.Cast):
            dtype = str(node.dtype)
            if dtype in NARROW_FLOATS:
                applied.add("dtypes")
                return narrow_call(node.value, dtype)
            return None
        if isinstance(node, tirx.FloatImm):
            if str(node.dtype) in NARROW_FLOATS:
                return tirx.FloatImm(COMPUTE_DTYPE, _constant_in(float(node.value), str(node.dtype)))
            return None
        if isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.NE) \
                and isinstance(node.args[0].a, tirx.BufferLoad) and str(node.args[0].a.buffer.name) in booleans \
                and str(getattr(node.op, "name", "")) in ("tl.region", "tl.access_ptr", "tirx.tvm_access_ptr"):
            # a tile operation's region of a bool tensor names the int8 buffer itself: the copy converts
            return tirx.Call(node.dtype, node.op, [node.args[0].a, *node.args[1:]])
        if isinstance(node, tirx.Call):
            dtype = str(node.dtype)
            if dtype in NARROW_FLOATS:
                return tirx.Call(COMPUTE_DTYPE, node.op, node.args)
            return None
        if isinstance(node, tirx.Var) and node in data_map and not data_map[node].data.same_as(node):
            # a buffer's data used as itself (T.tvm_access_ptr(..., S.data, ...), an address): the replacement's
            return data_map[node].data
        if isinstance(node, tirx.Var) and node in narrow_vars:  # a scalar of a narrow type: its float32 twin
            return narrow_vars[node]
        if isinstance(node, tirx.Bind) and node.var in narrow_vars:  # bound: the value rounded to its type
            applied.add("dtypes")
            return tirx.Bind(narrow_vars[node.var], narrow_call(node.value, str(node.var.dtype)))
        return None

    def bits(node: Any) -> Any:
        """T.reinterpret between an integer and a GPU float type the CPU lacks (a dequantiser building
        a float16 from its bits): the runtime's decoding or encoding of that format's bits."""
        if not (isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) == "tirx.reinterpret"
                and len(node.args) == 1 and node.dtype.lanes == 1 and node.args[0].dtype.lanes == 1):
            return None
        target, value = str(node.dtype), node.args[0]
        origin = str(value.dtype)
        if target in NARROW_FLOATS and origin.startswith(("int", "uint")):
            applied.add("dtypes")
            decoded = tirx.call_extern(COMPUTE_DTYPE, FROM_BITS_FUNCTION, tirx.Cast("uint32", value),
                                       tirx.const(NARROW_FLOATS[target], EXTERN_INT))
            return tirx.Cast(target, decoded)  # exact: the cast's rounding leaves the value as it is
        if origin in NARROW_FLOATS and target.startswith(("int", "uint")):
            applied.add("dtypes")
            encoded = tirx.call_extern("uint32", TO_BITS_FUNCTION, tirx.Cast(COMPUTE_DTYPE, value),
                                       tirx.const(NARROW_FLOATS[origin], EXTERN_INT))
            return tirx.Cast(target, encoded)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, bits, ["tirx.Call"])
    # a scalar bound in a narrow float type (x: T.float16 = ..., a tuple assignment's temporaries) is held
    # in float32, as tiles of the type are: the value it is bound to rounded to the type, as the GPU holds it
    narrow_vars: dict[Any, Any] = {}
    tirx.stmt_functor.post_order_visit(body, lambda n: narrow_vars.setdefault(n.var, tirx.Var(
        str(n.var.name), COMPUTE_DTYPE)) if isinstance(n, tirx.Bind) and str(n.var.dtype) in NARROW_FLOATS else None)
    body = tirx.stmt_functor.ir_transform(body, None, post)
    if view_refusals:
        raise view_refusals[0]
    body = _imported_bits(body, func, narrow, name)
    body = _stage_views(body)
    _tensors_named_as_their_data(buffer_map, {str(p.name) for p in func.params})
    sparse = _sparse_gemms(body, name, narrow)
    if not sparse.same_as(body):
        body = sparse
        applied.add("sparse")

    # The block mask: the innermost block-index loop's body runs only where the mask says so.
    order = [a for a in "zyx" if a in block_vars]
    grid_rank = max(("xyz".index(a) + 1 for a in block_vars), default=1)
    mask_var = tirx.Var(BLOCK_MASK, "handle")
    count = tirx.const(1, "int32")
    for a in order:
        count = count * block_extents[a]
    mask_buffer = tirx.decl_buffer((count + len(tensors),), "int8", BLOCK_MASK)
    linear = tirx.const(0, "int32")
    for a in order:
        linear = linear * block_extents[a] + block_vars[a]
    innermost = block_vars["x"] if "x" in block_vars else (block_vars[order[-1]] if order else None)
    if innermost is not None and mask:
        applied.add("blocks")

        def selected_only(stmt: Any) -> Any:
            """``stmt`` run when the mask selects the block: a loop of one trip or none, not a branch.
            TileLang's IfStmtBinding pushes a branch around a block's body into each of its statements,
            and its Simplify then re-proves the mask's condition with every condition nested under it
            (a minute for a varlen attention kernel; the loop leaves the body as it is)."""
            trips = tirx.Cast("int32", tirx.BufferLoad(mask_buffer, [linear]) != tirx.const(0, "int8"))
            return tirx.For(tirx.Var(MASK_LOOP, "int32"), tirx.const(0, "int32"), trips, tirx.ForKind.SERIAL, stmt)

        def guard(node: Any) -> Any:
            if isinstance(node, tirx.SBlock) and str(node.name_hint) == "tilelang_root":
                guarded = selected_only(node.body)
                return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, guarded, node.init,
                                   node.alloc_buffers, node.match_buffers, node.annotations)
            return None

        def other_kernel(node: Any) -> Any:  # the blocks of earlier kernels all run
            if isinstance(node, tirx.For) and _block_axis(node) and node.loop_var not in last_vars:
                return node
            return None

        guarded_body = tirx.stmt_functor.ir_transform(body, other_kernel, guard, ["tirx.SBlock", "tirx.For"])
        if not guarded_body.same_as(body):
            body = guarded_body
        else:  # no tilelang_root block: guard the innermost block loop's body
            def guard_loop(node: Any) -> Any:
                if isinstance(node, tirx.For) and node.loop_var.same_as(innermost):
                    guarded = selected_only(node.body)
                    return tirx.For(node.loop_var, node.min, node.extent, node.kind, guarded, node.thread_binding,
                                    node.annotations)
                return None

            body = tirx.stmt_functor.ir_transform(body, other_kernel, guard_loop, ["tirx.For"])
    params = _sizes_passed_once(list(func.params), buffer_map)
    body = _sizes_solved_from_shapes(params, buffer_map, body, name)
    if mask:
        params.append(mask_var)
        buffer_map[mask_var] = mask_buffer
    # The GPU types the late pass rounds to are part of the kernel (and so of TileLang's cache key):
    # a float16 tile and a bfloat16 one are the same float32 array until then.
    marker = EMULATION_VERSION + ";" + ",".join(f"{k}:{v}" for k, v in sorted(narrow.items()))
    new = tirx.PrimFunc(params, body, func.ret_type, buffer_map, func.attrs).with_attr("tilelab_emulation", marker)
    # Outputs a @tilelang.jit function allocates (T.empty, the attribute tilelang_out_idx) are
    # allocated and poisoned by the launch side: the CPU kernel takes every tensor.
    if func.attrs is not None and "tilelang_out_idx" in func.attrs:
        new = new.without_attr("tilelang_out_idx")
    applied.update(("bounds",))
    if any(str(func.buffer_map[p].dtype) in NARROW_FLOATS for p in func.params if p in func.buffer_map):
        applied.add("dtypes")
    if len(grids) > 1:
        applied.add("blocks")
    return Emulation(name=name, func=new, applied=tuple(r.id for r in RULES if r.id in applied), narrow=narrow,
                     tensors=tuple(tensors), block_names={a: str(v.name) for a, v in block_vars.items()},
                     grid_rank=grid_rank, buffers=tuple(tensors) + tuple(dict.fromkeys(local_names)),
                     barriers=tuple(interleaved.barriers if interleaved is not None else roles.barriers), bits=as_bits)


_LANE_BINARY = ("Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE",
                "GT", "GE", "And", "Or")


def _lane(expr: Any, j: int) -> Any:
    """Lane ``j`` of ``expr`` as scalar TIR (a ramp's ``base + stride * j``, a broadcast's value, a
    shuffle's element, an elementwise operation or call of its operands' lanes). Raises TypeError
    naming the first operation that has no lane of its own (a vector load from a buffer of vectors,
    a call whose operands are wider or narrower than its result)."""
    tirx = tilelang().tvm.tirx
    if expr.dtype.lanes == 1:
        return expr
    if isinstance(expr, tirx.Ramp):
        return _lane(expr.base, j) + _lane(expr.stride, j) * tirx.const(j, expr.base.dtype)
    if isinstance(expr, tirx.Broadcast):
        return _lane(expr.value, j)
    if isinstance(expr, tirx.Shuffle):
        elements = [(v, k) for v in expr.vectors for k in range(v.dtype.lanes)]
        vector, k = elements[int(expr.indices[j])]
        return _lane(vector, k)
    if isinstance(expr, tirx.BufferLoad) and expr.buffer.dtype.lanes == 1:
        return tirx.BufferLoad(expr.buffer, [_lane(i, j) for i in expr.indices])
    if isinstance(expr, tirx.Cast):
        return tirx.Cast(expr.dtype.with_lanes(1), _lane(expr.value, j))
    if isinstance(expr, tirx.Select):
        return tirx.Select(_lane(expr.condition, j), _lane(expr.true_value, j), _lane(expr.false_value, j))
    if isinstance(expr, tirx.Not):
        return tirx.Not(_lane(expr.a, j))
    binary: tuple[Any, ...] = tuple(getattr(tirx, k) for k in _LANE_BINARY)
    if isinstance(expr, binary):
        return type(expr)(_lane(expr.a, j), _lane(expr.b, j))
    if isinstance(expr, tirx.Call) and _elementwise(expr):
        # TVM's math on a vector (T.exp, T.floor of T.Ramp lanes): the call of each operand's lane
        return tirx.Call(expr.dtype.with_lanes(1), expr.op, [_lane(a, j) for a in expr.args])
    if isinstance(expr, tirx.Call):
        raise TypeError(f"a call of {getattr(expr.op, 'name', expr.op)} on vectors")
    if isinstance(expr, tirx.Var):
        raise TypeError(f"the vector variable {expr.name} ({expr.dtype})")
    raise TypeError(f"a {type(expr).__name__} on vectors ({expr.dtype})")


def _elementwise(call: Any) -> bool:
    """A call of TVM's own math on vectors (``tirx.exp``, ``tirx.floor``, ...): its result's lanes are
    its vector operands' (an extern function or a TileLang op of packed lanes, ``tl.fma2``, is not)."""
    op = str(getattr(call.op, "name", ""))
    lanes = call.dtype.lanes
    return op.startswith("tirx.") and op not in ("tirx.call_extern", "tirx.call_pure_extern", "tirx.call_intrin") \
        and all(a.dtype.lanes in (1, lanes) for a in call.args) and any(a.dtype.lanes == lanes for a in call.args)


def _lanes_of(store: Any) -> list[Any] | None:
    """A store of a vector into a buffer of scalars (``B[T.Ramp(0, 1, 4)] = A[T.Ramp(t, 1, 4)]``, written by
    hand) as one store per lane (None for any other store). Raises TypeError (:func:`_lane`) when a lane
    of its value or indices has no scalar form, or would keep a vector inside."""
    tirx = tilelang().tvm.tirx
    if store.buffer.dtype.lanes != 1 or store.predicate is not None:
        return None
    lanes = max([store.value.dtype.lanes, *(i.dtype.lanes for i in store.indices)])
    if lanes == 1:
        return None
    stores = [tirx.BufferStore(store.buffer, _lane(store.value, j), [_lane(i, j) for i in store.indices])
              for j in range(lanes)]
    vectors: list[Any] = []
    for s in stores:  # a scalar built of vectors (a reinterpret of a pair, a reduction of lanes) stays a vector op
        tirx.stmt_functor.post_order_visit(s, lambda n: vectors.append(n) if isinstance(n, tirx.PrimExpr)
                                           and n.dtype.lanes > 1 else None)
    if vectors:
        raise TypeError(f"a {type(vectors[0]).__name__} of {vectors[0].dtype} inside a lane")
    return stores


def _lanes_unrolled(body: Any, unsplit: list[tuple[str, str]] | None = None) -> Any:
    """``body`` with each store of a vector (``B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]``, written by
    hand, after TileLang's negative-index legalisation has made its indices a vector of 64-bit
    scalars) as one store per lane, each lane's indices and value its scalars (:func:`_lane`).
    TileLang's C back end prints such an index vector as a constructor the host C++ compiler rejects,
    and the bounds rule checks scalar indices only; a vector store reads every lane before it writes
    any, so where a lane reads the stored buffer every lane is read first (:func:`lanes_stored`). A
    store with a lane of no scalar form is left as it is
    and noted in ``unsplit`` (its buffer, the operation): when TileLang's C then fails to compile,
    :func:`compile_emulated` refuses it by name."""
    tirx = tilelang().tvm.tirx

    def post(node: Any) -> Any:
        try:
            stores = _lanes_of(node)
        except TypeError as err:
            if unsplit is not None:
                unsplit.append((str(node.buffer.name), str(err)))
            return None
        return None if stores is None else lanes_stored(stores)

    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.BufferStore"])


def _data_keys(value: Any, data_map: dict[Any, Any]) -> Any:
    """A block annotation keyed by buffers' data (``T.annotate_safe_value``'s ``safe_value_map``), each
    key of a buffer the rewrite replaced given as its replacement's data (TileLang looks the key up
    among the block's buffers); any other annotation as it is."""
    from collections.abc import Mapping

    if not isinstance(value, Mapping) or not any(k in data_map for k in value):
        return value
    return {data_map[k].data if k in data_map else k: v for k, v in value.items()}


def _tensors_named_as_their_data(buffer_map: dict[Any, Any], params: set[str]) -> None:
    """``buffer_map`` with each tensor parameter whose data variable has another name (``T.reshape(A,
    ...)`` names A's data after the view, ``A_reshaped``) named as its data. TileLang's C code generator
    names the kernel's pointer parameter after the data variable, and its CPU host wrapper passes the
    arguments by the parameters' names: a kernel declared with ``float* A_reshaped`` would be called
    without ``A``. Only the parameter's name changes (the launch side passes the tensors by position;
    the body keeps its buffer, of the same data, and the out-of-bounds record its name)."""
    tirx = tilelang().tvm.tirx
    taken = {str(buf.name) for buf in buffer_map.values()} | params
    for param, buf in list(buffer_map.items()):
        name = str(buf.data.name)
        if name == str(buf.name) or name in taken:
            continue
        taken.add(name)
        buffer_map[param] = tirx.decl_buffer(buf.shape, buf.dtype, name, data=buf.data,
                                             strides=list(buf.strides) if len(buf.strides) else None,
                                             elem_offset=buf.elem_offset, scope=buf.scope())


def _sizes_solved_from_shapes(params: list[Any], buffer_map: dict[Any, Any], body: Any, name: str) -> Any:
    """``body`` and ``buffer_map`` (changed in place) for a size that a tensor's shape gives only through
    an expression (``n = T.symbolic("n")`` with ``A: T.Tensor((n * 4,), ...)``). TileLang's CPU host wrapper
    passes the kernel each size that is a whole dimension of a tensor, and no other: the kernel would be
    called without ``n``. Such a dimension becomes a size of its own (``A_size0``), and ``n`` is bound
    from it at the top of the body by solving the dimension's expression, linear in ``n`` (``n = (A_size0 -
    b) // a``; on a GPU, TileLang's entry point rejects a tensor whose dimension is not ``a * n + b``).
    A size no dimension gives linearly is refused by name."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    known = {p for p in params if p not in buffer_map}
    for buf in buffer_map.values():
        known.update(d for d in [*buf.shape, *buf.strides] if isinstance(d, tirx.Var))
    solved: dict[Any, Any] = {}
    unsolved: list[tuple[Any, Any]] = []
    for param, buf in list(buffer_map.items()):
        shape = list(buf.shape)
        for d, dim in enumerate(shape):
            if isinstance(dim, (tirx.Var, tirx.IntImm)):
                continue
            free = [v for v in tirx.analysis.undefined_vars(dim) if v not in known and v not in solved]
            if not free:
                continue
            if len(free) > 1:
                unsolved.append((free[0], dim))
                continue
            coefficients = tvm.arith.detect_linear_equation(dim, free)
            if len(coefficients) != 2 or not isinstance(coefficients[0], tirx.IntImm) or int(coefficients[0]) == 0 \
                    or tirx.analysis.undefined_vars(coefficients[1]):
                unsolved.append((free[0], dim))
                continue
            size = tirx.Var(f"{buf.name}_size{d}", dim.dtype)
            solved[free[0]] = tirx.floordiv(size - coefficients[1], coefficients[0])
            shape[d] = size
            known.add(size)
        if any(not a.same_as(b) for a, b in zip(shape, buf.shape)):
            buffer_map[param] = tirx.decl_buffer(shape, buf.dtype, str(buf.name), data=buf.data,
                                                 strides=list(buf.strides) if len(buf.strides) else None,
                                                 elem_offset=buf.elem_offset, scope=buf.scope())
    unsolved = [(v, dim) for v, dim in unsolved if v not in solved]
    if unsolved:
        var, dim = unsolved[0]
        raise EmulationRefused(name, f"the size {var.name}, which the tensors' shapes give only as {dim}",
                               "the CPU kernel is passed each tensor's dimensions, and the size is found from one "
                               "only where a dimension is a * size + b")
    for var, value in solved.items():
        body = tirx.SeqStmt([tirx.Bind(var, value), body])
    return body


def _sizes_passed_once(params: list[Any], buffer_map: dict[Any, Any]) -> list[Any]:
    """A scalar parameter that is also a tensor's size (``def main(a_ptr: T.handle, m: T.int32)``
    with ``A = T.match_buffer(a_ptr, (m, k))``) is one value on a GPU; TileLang's C host wrapper
    declares each tensor size once more as an argument of its own, and the C compiler rejects the
    second ``int32_t m``. The parameter keeps its place in the call under a name of its own, and the
    body reads the size from the tensor's shape (on a GPU, TileLang's entry point fails a call whose
    parameter differs from that shape; on the CPU the shape is the one value)."""
    tirx = tilelang().tvm.tirx
    sizes: set[Any] = set()
    for buf in buffer_map.values():
        for dim in [*buf.shape, *buf.strides]:
            if isinstance(dim, tirx.Var):
                sizes.add(dim)
    taken = {str(p.name) for p in params} | {str(v.name) for v in sizes}
    out = []
    for p in params:
        if p in buffer_map or p not in sizes:
            out.append(p)
            continue
        alias = f"{p.name}_arg"
        while alias in taken:
            alias += "_"
        taken.add(alias)
        out.append(tirx.Var(alias, p.dtype))
    return out


def _imported_bits(body: Any, func: Any, narrow: dict[str, str], name: str) -> Any:
    """The imported-source rule's IR side (emulate_ptx.imported_calls): each call of an imported
    device function through an entry point, a float16/bfloat16/float8 buffer (float32 on the CPU)
    it takes given as a scratch array of its bits."""
    _, imported = _imported_device_calls(func)
    if not imported:
        return body
    widths = {k: 16 if v == "int16" else 8 for k, v in BITS_STORAGE.items()}
    return imported_calls(body, set(imported), narrow, widths, NARROW_FLOATS, TO_BITS_FUNCTION, FROM_BITS_FUNCTION,
                          COMPUTE_DTYPE, EXTERN_INT, name)


_POINTER_OPS = ("tirx.address_of", "tl.access_ptr", "tirx.tvm_access_ptr")


def _passed_as_bits(func: Any, narrow: dict[str, str]) -> tuple[str, ...]:
    """The narrow tensor parameters of a rewritten kernel that it can take as their bits: every
    access to them (or to a view of their data) is a load, a store or a tile operation's region,
    which lower to loads and stores the late pass decodes and encodes. A tensor reached through a
    pointer (an atomic, an access pointer, an address) or an atomic tile operation stays float32."""
    tirx = tilelang().tvm.tirx
    candidates = {}
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is not None and narrow.get(str(buf.name)) in BITS_STORAGE:
            candidates[buf.data] = str(buf.name)
    if not candidates:
        return ()
    excluded: set[str] = set()

    def pointers(call: Any) -> None:
        for arg in call.args:
            if isinstance(arg, tirx.Call) and arg.args and isinstance(arg.args[0], tirx.BufferLoad):
                op = str(getattr(arg.op, "name", ""))
                data = arg.args[0].buffer.data
                if data in candidates and (op in _POINTER_OPS or (op == "tl.region" and call_is_pointer(call))):
                    excluded.add(candidates[data])
            elif isinstance(arg, tirx.Var) and arg in candidates:
                excluded.add(candidates[arg])

    def call_is_pointer(call: Any) -> bool:
        op = str(getattr(call.op, "name", ""))
        return "atomic" in op.lower() or op in ("tirx.call_extern", "tirx.call_packed", "tirx.call_intrin")

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call):
            op = str(getattr(node.op, "name", ""))
            if op in _POINTER_OPS and node.args and isinstance(node.args[0], tirx.BufferLoad) \
                    and node.args[0].buffer.data in candidates:
                excluded.add(candidates[node.args[0].buffer.data])
            pointers(node)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return tuple(name for name in candidates.values() if name not in excluded)


# ------------------------------------------------------------------------------------------
# The rewrite after the tile ops are lowered: bounds checks and rounding on every store
# ------------------------------------------------------------------------------------------

def _late_pass(emulation: Emulation, unsplit: list[tuple[str, str]] | None = None) -> Any:
    """The TIR pass run just before TileLang's FlattenBuffer: tile ops are loads and stores by
    then, with their per-dimension indices. Each access that cannot be proved inside its buffer
    is guarded (an access outside calls the runtime's record and is not performed); each store
    into a buffer whose GPU type the CPU lacks rounds its value to that type; each ``T.alloc_global``
    scratch buffer is heap memory from the runtime, freed where its scope ends; each float maximum
    and minimum is the GPU's (``emulate_tileops.gpu_max_min``: a NaN operand gives the other, -0 < +0)."""
    # Long but whole: the pass's hooks share its analyzer and scope; split, they would pass both around.
    tvm = tilelang().tvm
    tirx = tvm.tirx
    narrow = emulation.narrow
    block_names = {name: axis for axis, name in emulation.block_names.items()}

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        # Long but whole: the late pass itself (see above), its hooks sharing one analyzer and scope.
        analyzer = tvm.arith.Analyzer()
        ids = {name: i for i, name in enumerate(emulation.buffers)}
        mask = next((func.buffer_map[p] for p in func.params if p in func.buffer_map
                     and str(func.buffer_map[p].name) == BLOCK_MASK), None)
        tensor_ids = {name: i for i, name in enumerate(emulation.tensors)}
        # The tensors passed as their bits: the parameter is a buffer of integers (rewrite_for_cpu), and
        # the body's float32 buffer of the same data (or a view of it) is read and written through it:
        # each load decoded, each store encoded.
        formats: dict[Any, str] = {}  # the parameter's data -> its GPU type
        for p in func.params:
            buf = func.buffer_map.get(p)
            if buf is not None and str(buf.name) in emulation.bits:
                formats[buf.data] = narrow[str(buf.name)]
        remade: dict[Any, Any] = {}

        def bits_of(buf: Any) -> Any:
            """The integer buffer standing for ``buf`` (None when ``buf`` is not one of them)."""
            if buf.data not in formats or str(buf.dtype) != COMPUTE_DTYPE:
                return None
            if buf not in remade:
                strides = list(buf.strides) if len(buf.strides) else None
                remade[buf] = tirx.decl_buffer(buf.shape, BITS_STORAGE[formats[buf.data]], str(buf.name),
                                               data=buf.data, scope=buf.scope(), strides=strides,
                                               elem_offset=buf.elem_offset)
            return remade[buf]

        def decoded(load: Any, dtype: str) -> Any:
            width = "uint16" if BITS_STORAGE[dtype] == "int16" else "uint8"
            return tirx.call_extern(COMPUTE_DTYPE, FROM_BITS_FUNCTION, tirx.Cast("uint32", tirx.Cast(width, load)),
                                    tirx.const(NARROW_FLOATS[dtype], EXTERN_INT))

        def encoded(value: Any, dtype: str) -> Any:
            storage = BITS_STORAGE[dtype]
            bits = tirx.call_extern("uint32", TO_BITS_FUNCTION, tirx.Cast(COMPUTE_DTYPE, value),
                                    tirx.const(NARROW_FLOATS[dtype], EXTERN_INT))
            return tirx.Cast(storage, tirx.Cast("uint16" if storage == "int16" else "uint8", bits))

        def flagged(store: Any) -> Any:
            """``store`` into a tensor, with the tensor's "stored into" flag set beside it."""
            tid = tensor_ids.get(str(store.buffer.name))
            if mask is None or tid is None:
                return store
            slot = mask.shape[0] - tirx.const(len(emulation.tensors) - tid, mask.shape[0].dtype)
            return tirx.SeqStmt([tirx.BufferStore(mask, tirx.const(1, "int8"), [slot]), store])

        def buffer_id(buf: Any) -> int:
            return ids.get(str(buf.name), len(emulation.buffers))  # past the end: a buffer TileLang made

        def inside(buf: Any, indices: Any) -> Any:
            """The condition that ``indices`` lie inside ``buf`` (None when it is proved)."""
            if str(buf.name) == BLOCK_MASK or len(indices) != len(buf.shape):
                return None
            conds = []
            for i, extent in zip(indices, buf.shape):
                if i.dtype.lanes != 1:
                    return None
                lo = i >= tirx.const(0, i.dtype)
                hi = i < tirx.Cast(i.dtype, extent) if str(extent.dtype) != str(i.dtype) else i < extent
                if not analyzer.can_prove(lo):
                    conds.append(lo)
                if not analyzer.can_prove(hi):
                    conds.append(hi)
            if not conds:
                return None
            cond = conds[0]
            for c in conds[1:]:
                cond = tirx.And(cond, c)
            return cond

        def record(buf: Any, indices: Any, kind: int, scope: dict[str, Any]) -> Any:
            i64 = "int64"
            idx = [tirx.Cast(i64, i) for i in indices][:MAX_RANK]
            shape = [tirx.Cast(i64, s) for s in buf.shape][:MAX_RANK]
            rank = len(idx)
            idx += [tirx.const(0, i64)] * (MAX_RANK - rank)
            shape += [tirx.const(1, i64)] * (MAX_RANK - rank)
            blocks = [tirx.Cast("int32", scope[a]) if a in scope else tirx.const(0, "int32") for a in "xyz"]
            return oob_call(buffer_id(buf), kind, *blocks, rank, *idx, *shape)

        def rewrite(stmt: Any, scope: dict[str, Any]) -> Any:
            def pre(node: Any) -> Any:
                if isinstance(node, tirx.For):
                    if not is_const_zero_extent(node):
                        analyzer.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
                    axis = block_names.get(str(node.loop_var.name))
                    if axis is not None and axis not in scope:
                        inner = {**scope, axis: node.loop_var}
                        return tirx.For(node.loop_var, node.min, node.extent, node.kind, rewrite(node.body, inner),
                                        node.thread_binding, node.annotations)
                    return None
                if isinstance(node, tirx.IfThenElse):
                    with analyzer.constraint_scope(node.condition):
                        then_case = rewrite(node.then_case, scope)
                    else_case = None
                    if node.else_case is not None:
                        with analyzer.constraint_scope(tirx.Not(node.condition)):
                            else_case = rewrite(node.else_case, scope)
                    return tirx.IfThenElse(node.condition, then_case, else_case)
                return None

            def post(node: Any) -> Any:
                if isinstance(node, tirx.SeqStmt):
                    return _scratch_on_heap(node)
                if isinstance(node, tirx.DeclBuffer):
                    held = bits_of(node.buffer)
                    return tirx.DeclBuffer(held) if held is not None else None
                if isinstance(node, tirx.BufferLoad):
                    held = bits_of(node.buffer)
                    if held is not None:
                        load = tirx.BufferLoad(held, node.indices)
                        cond = inside(held, node.indices)
                        if cond is not None:
                            load = tirx.if_then_else(cond, load, tirx.Cast(
                                load.dtype, record(held, node.indices, OOB_READ, scope)))
                        return decoded(load, formats[node.buffer.data])
                    cond = inside(node.buffer, node.indices)
                    if cond is None:
                        return None
                    fallback = tirx.Cast(node.dtype, record(node.buffer, node.indices, OOB_READ, scope))
                    return tirx.if_then_else(cond, node, fallback)
                if isinstance(node, tirx.BufferStore):
                    held = bits_of(node.buffer)
                    if held is not None:
                        node = tirx.BufferStore(held, encoded(node.value, formats[node.buffer.data]), node.indices,
                                                node.predicate)
                    value = node.value
                    target = narrow.get(str(node.buffer.name)) if held is None else None
                    if target is not None and value.dtype.lanes == 1 and str(value.dtype) == COMPUTE_DTYPE:
                        value = tirx.call_extern(COMPUTE_DTYPE, ROUND_FUNCTION, value,
                                                 tirx.const(NARROW_FLOATS[target], EXTERN_INT))
                    cond = inside(node.buffer, node.indices)
                    store = tirx.BufferStore(node.buffer, value, node.indices, node.predicate) \
                        if not value.same_as(node.value) else node
                    if cond is None:
                        return flagged(store)
                    held = tirx.Var("tilelab_value", value.dtype)
                    guarded = flagged(tirx.BufferStore(node.buffer, held, node.indices, node.predicate))
                    return tirx.SeqStmt([tirx.Bind(held, value),
                                         tirx.IfThenElse(cond, guarded,
                                                         tirx.Evaluate(record(node.buffer, node.indices, OOB_WRITE,
                                                                              scope)))])
                return None

            return tirx.stmt_functor.ir_transform(stmt, pre, post, ["tirx.For", "tirx.IfThenElse", "tirx.DeclBuffer",
                                                                    "tirx.BufferLoad", "tirx.BufferStore",
                                                                    "tirx.SeqStmt"])

        def is_const_zero_extent(loop: Any) -> bool:
            return isinstance(loop.extent, tirx.IntImm) and int(loop.extent) <= 0

        # the tile-ops rule's float maximum and minimum (the reduces are loops by now): the GPU's, NaN skipped
        return func.with_body(rewrite(gpu_max_min(_lanes_unrolled(func.body, unsplit)), {}))

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tilelab.EmulateOnCPU")


def _scratch_on_heap(seq: Any) -> Any:
    """``seq`` with each global-scope allocation in it (``T.alloc_global``) bound to heap memory
    from the runtime and freed at the sequence's end; None when it has none. The runtime's memory
    is a ``void*`` and C++ casts it to the buffer's type only when told: the buffer's data is bound
    to an access pointer of its type into it."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    stmts: list[Any] = []
    frees: list[Any] = []
    for stmt in seq.seq:
        if isinstance(stmt, tirx.AllocBuffer) and stmt.buffer.scope() == "global":
            buf = stmt.buffer
            size = tirx.const(1, "int64")
            for extent in buf.shape:
                size = size * tirx.Cast("int64", extent)
            width = tirx.const(max(1, buf.dtype.bits * buf.dtype.lanes // 8), "int64")
            heap = tirx.Var(f"{buf.data.name}_heap", tvm.ir.PointerType(tvm.ir.PrimType("void"), "global"))
            stmts.append(tirx.Bind(heap, tirx.call_extern("handle", SCRATCH_FUNCTION, size * width)))
            stmts.append(tirx.Bind(buf.data, tirx.op.tvm_access_ptr(tirx.type_annotation(buf.dtype), heap, 0,
                                                                      size, 3)))
            frees.append(tirx.Evaluate(tirx.call_extern("int32", SCRATCH_FREE_FUNCTION, heap)))
        else:
            stmts.append(stmt)
    return tirx.SeqStmt(stmts + frees) if frees else None


_COMPILE_LOCK = threading.RLock()


@dataclass(frozen=True)
class EmulatedKernel:
    """A GPU kernel compiled for the CPU by :func:`compile_emulated`: ``compiled`` is TileLang's
    JITKernel (call it with the kernel's tensors in float32 where the GPU's type has no CPU form,
    then the block mask)."""

    compiled: Any
    emulation: Emulation


def compile_emulated(obj: Any, *, pass_configs: dict[str, Any] | None = None, args: tuple = (),
                     kwargs: dict | None = None, compile_flags: list[str] | None = None) -> EmulatedKernel:
    """``obj`` (any kernel-like object written for a GPU) rewritten and compiled for target ``c``.
    Raises :class:`EmulationRefused` for constructs with no tile-level meaning and tilelab's
    LoweringError with TileLang's reason when the rewritten kernel does not lower. ``compile_flags``:
    the host compiler's options (the launch side's: optimisation, the rounding inline)."""
    from .passes import passes_before

    source = resolve_kernel(obj, args, kwargs)
    emulation = rewrite_for_cpu(source.prim_func, source.name)
    unsplit: list[tuple[str, str]] = []  # vector stores by hand with a lane of no scalar form
    late = _late_pass(emulation, unsplit)
    configs = {**{k: v for k, v in source.pass_configs.items() if not k.startswith("tl.disable_warp")},
               **(pass_configs or {}), **CPU_PASS_CONFIGS}
    with _COMPILE_LOCK, passes_before({"FlattenBuffer": late}):
        try:
            compiled = compile_kernel(emulation.func, target="c", backend="cython", out_idx=None,
                                      pass_configs=configs, compile_flags=compile_flags)
        except Exception as err:
            refused = refused_intrinsic(source.prim_func, source.name, err)
            if refused is not None:
                raise refused from err
            if unsplit:
                raise _unsplit_refusal(source.prim_func, source.name, *unsplit[0]) from err
            raise
    return EmulatedKernel(compiled, emulation)


def _unsplit_refusal(func: Any, name: str, buffer: str, what: str) -> EmulationRefused:
    """The refusal of a vector store written by hand that the parallel rule could not store lane by
    lane (``what``: the operation of its value with no lane of its own), which TileLang's C back end
    then failed to compile."""
    buf = re.escape(buffer)
    file, line, text = "", 0, ""
    for pattern in (rf"\b{buf}\s*\[[^=]*\bT\.Ramp\b", rf"\b{buf}\s*\[.*\]\s*=", r"\bT\.Ramp\b"):
        file, line, text = _locate(func, pattern)
        if line:
            break
    why = ("the CPU path stores a vector store lane by lane, each lane its scalars (ramps, broadcasts, shuffles, "
           "loads, casts, selects, arithmetic, TVM's math), and this operation has no lane of its own, while "
           "TileLang's C back end cannot print this store's vector indices; write the lanes as a loop (for j in "
           "T.vectorized(n)), which TileLang vectorizes on the GPU")
    return EmulationRefused(name, f"a vector store written by hand into {buffer} whose value holds {what}", why,
                            file, line, text)


def emulation_key(obj: Any) -> str:
    """What an emulated compile of ``obj`` depends on: its fingerprint and its tensors' names."""
    from .resolve import kernel_fingerprint

    func = getattr(obj, "prim_func", obj)
    names: list[str] = []
    if isinstance(func, tilelang().tvm.tirx.PrimFunc):
        names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    return f"emulated:{kernel_fingerprint(obj)}:{','.join(names)}"


def written_tensors(obj: Any) -> tuple[str, ...]:
    """The tensor parameters a kernel writes, in parameter order: stores into them, tile
    operations whose region of one is written (``T.copy``'s destination, ``T.gemm``'s C,
    ``T.fill``), atomics through an access pointer. What a kernel with no ``out_idx`` outputs."""
    tirx = tilelang().tvm.tirx
    func = getattr(obj, "prim_func", obj)
    written: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferStore):
            written.add(str(node.buffer.name))
        elif isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.BufferLoad):
            op = str(getattr(node.op, "name", ""))
            mask = node.args[1] if op == "tl.region" and len(node.args) > 1 else \
                node.args[-1] if op in ("tl.access_ptr", "tirx.tvm_access_ptr") else None
            if isinstance(mask, tirx.IntImm) and int(mask) & 2:
                written.add(str(node.args[0].buffer.name))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    return tuple(n for n in names if n in written)


def atomic_add_outputs(obj: Any) -> tuple[str, ...]:
    """The tensor parameters a kernel writes only by atomic adds (``T.atomic_add`` of an element or
    a tile; a split-K GEMM's output): no store, no tile operation and no other atomic writes them.
    Such an output accumulates onto what it held, so it must start at zero, not poisoned."""
    tirx = tilelang().tvm.tirx
    func = getattr(obj, "prim_func", obj)
    plain: set[str] = set()
    added: set[str] = set()

    def written(arg: Any) -> str | None:
        """The buffer an argument (a region, an access pointer, an address) writes, if it writes one."""
        if not (isinstance(arg, tirx.Call) and arg.args and isinstance(arg.args[0], tirx.BufferLoad)):
            return None
        op = str(getattr(arg.op, "name", ""))
        name = str(arg.args[0].buffer.name)
        if op == "tl.region" and len(arg.args) > 1:
            mask = arg.args[1]
        elif op in ("tl.access_ptr", "tirx.tvm_access_ptr"):
            mask = arg.args[-1]
        elif op == "tirx.address_of":
            return name
        else:
            return None
        return name if isinstance(mask, tirx.IntImm) and int(mask) & 2 else None

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferStore):
            plain.add(str(node.buffer.name))
        elif isinstance(node, tirx.Call):
            op = str(getattr(node.op, "name", ""))
            if op == "tirx.call_extern" and node.args:
                op = str(getattr(node.args[0], "value", op))
            atomic_add = "atomic" in op.lower() and "add" in op.lower()
            for arg in node.args:
                name = written(arg)
                if name is not None:
                    (added if atomic_add else plain).add(name)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    names = [str(func.buffer_map[p].name) for p in func.params if p in func.buffer_map]
    return tuple(n for n in names if n in added and n not in plain)


def emulated_grid(emulation: Emulation, sizes: dict[str, int]) -> tuple[int, int, int]:
    """The grid (x, y, z) of an emulated kernel, its dynamic sizes substituted from ``sizes``."""
    tvm = tilelang().tvm
    tirx = tvm.tirx
    grids = _grids(emulation.func.body)
    extents: dict[str, Any] = {a: e for a, (_, e) in grids[-1].items()} if grids else {}
    analyzer = tvm.arith.Analyzer()
    out = []
    for axis in "xyz":
        extent = extents.get(axis)
        if extent is None:
            out.append(1)
            continue
        free: dict[Any, Any] = {}
        tirx.stmt_functor.post_order_visit(
            tirx.Evaluate(extent), lambda node, found=free: found.setdefault(node, node)
            if isinstance(node, tirx.Var) else None)
        missing = [str(v.name) for v in free if str(v.name) not in sizes]
        if missing:
            raise ValueError(f"the grid's {axis} extent {extent} needs the size(s) {', '.join(missing)}")
        value = analyzer.simplify(tirx.stmt_functor.substitute(
            extent, {v: tirx.const(int(sizes[str(v.name)]), v.dtype) for v in free}))
        out.append(int(value))
    return out[0], out[1], out[2]
