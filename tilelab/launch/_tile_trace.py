"""Which elements each block read and wrote: ``tilelab.trace_tiles`` for kernels launched on the CPU.

The kernel is compiled again for target ``c`` with every load and store of a tensor parameter
routed through one C function (the adapter's ``compile_traced``). That function, built here once
per process into a small shared library (the *trace runtime*), logs ``(tensor, read or write,
block, element)`` and answers whether the index lies inside the tensor: an out-of-bounds access is
logged with its indices and not performed (a read gives 0, a write is dropped), so a kernel that
would fault on a GPU is traced safely. The log is folded into a :class:`TileTrace` record: per
tensor and block, the elements read and written, as runs of flat indices.

The traced kernel is compiled and launched where ``run(device="cpu")`` launches (the CPU worker
process, through :func:`._emulate.launch_on_cpu`): a fault the log cannot stop (an access through a
pointer it does not see, a crash in the kernel's own code) or a loop that never ends costs the
worker, never the caller's process. The caller's side (:func:`request`, :func:`trace`) resolves the
kernel and hands it over; the worker's (:func:`load_in_worker`, :func:`trace_in_worker`) compiles,
launches and folds the log into the record that comes back.

Blocks run one after another on the CPU, so the trace says what each block touches, never in
which order blocks ran on a GPU: two blocks writing one element is a race there, whatever order
the trace saw.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.cache import Recent
from ..records.errors import LoweringError, TilelabError
from ..records.tile_trace import OutOfBounds, TensorTrace, TileTrace

MAX_ACCESSES = 50_000_000  # distinct consecutive accesses logged at most (24 bytes each)
MAX_OUT_OF_BOUNDS = 100_000  # out-of-bounds attempts kept with their indices (all are counted)
MAX_RANK = 6  # must match the adapter's TRACE_MAX_RANK

CPU_PATH = ("trace_tiles runs a kernel's tile program on the CPU (TileLang target c, by the rules of "
            "tilelab.run(kernel, device='cpu')): tiles in T.alloc_shared, T.alloc_fragment or T.alloc_local, "
            "T.copy, T.fill/T.clear, T.Parallel/T.Pipelined/T.serial/T.grid loops, reductions and T.gemm, and code "
            "that indexes by thread (in loops over the block's threads, split at barriers), T.ws regions in program "
            "order; not mbarrier waits (tilelab.run(kernel, device='cpu') runs them) or a barrier only some threads "
            "reach")


class TraceError(TilelabError, ValueError):
    """A kernel or argument trace_tiles cannot trace; the message says what it supports."""


_RUNTIME_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>

/* tw: the tensor's id * 4 + the kind of access (0 read, 1 write, 2 atomic update) */
typedef struct { int64_t flat; int32_t bx, by, bz, tw; } tl_entry;
typedef struct { int64_t idx[MAX_RANK]; int32_t bx, by, bz, tw, rank, pad; } tl_oob;

static tl_entry* entries = 0;
static int64_t n_entries = 0, cap_entries = 0, max_entries = 0, overflow = 0, calls = 0;
static tl_oob* oobs = 0;
static int64_t n_oob = 0, cap_oob = 0, max_oob = 0, total_oob = 0;
#define TL_TW 512
static tl_entry last[TL_TW];
static int has_last[TL_TW];

extern "C" {

void tilelab_trace_begin(int64_t max_accesses, int64_t max_out_of_bounds) {
  n_entries = 0; overflow = 0; calls = 0; n_oob = 0; total_oob = 0;
  max_entries = max_accesses; max_oob = max_out_of_bounds;
  for (int i = 0; i < TL_TW; ++i) has_last[i] = 0;
}

int32_t tilelab_trace_access(int32_t tw, int32_t bx, int32_t by, int32_t bz, int32_t rank,
                             int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t i4, int64_t i5,
                             int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4, int64_t s5) {
  int64_t idx[6] = {i0, i1, i2, i3, i4, i5};
  int64_t shape[6] = {s0, s1, s2, s3, s4, s5};
  int64_t flat = 0;
  int inside = 1;
  ++calls;
  for (int d = 0; d < rank; ++d) {
    if (idx[d] < 0 || idx[d] >= shape[d]) inside = 0;
    flat = flat * shape[d] + idx[d];
  }
  if (!inside) {
    ++total_oob;
    if (n_oob > 0) {  /* the same attempt again (a loop re-reading one element): counted once */
      tl_oob* p = &oobs[n_oob - 1];
      int same = p->tw == tw && p->bx == bx && p->by == by && p->bz == bz && p->rank == rank;
      for (int d = 0; same && d < rank; ++d) same = p->idx[d] == idx[d];
      if (same) return 0;
    }
    if (n_oob < max_oob) {
      if (n_oob == cap_oob) {
        int64_t cap = cap_oob ? cap_oob * 2 : 1024;
        tl_oob* grown = (tl_oob*)realloc(oobs, cap * sizeof(tl_oob));
        if (!grown) return 0;
        oobs = grown; cap_oob = cap;
      }
      tl_oob* p = &oobs[n_oob++];
      for (int d = 0; d < 6; ++d) p->idx[d] = d < rank ? idx[d] : 0;
      p->bx = bx; p->by = by; p->bz = bz; p->tw = tw; p->rank = rank; p->pad = 0;
    }
    return 0;
  }
  if (tw >= 0 && tw < TL_TW) {
    tl_entry* l = &last[tw];
    if (has_last[tw] && l->flat == flat && l->bx == bx && l->by == by && l->bz == bz) return 1;
    l->flat = flat; l->bx = bx; l->by = by; l->bz = bz; l->tw = tw; has_last[tw] = 1;
  }
  if (n_entries >= max_entries) { overflow = 1; return 1; }
  if (n_entries == cap_entries) {
    int64_t cap = cap_entries ? cap_entries * 2 : 65536;
    tl_entry* grown = (tl_entry*)realloc(entries, cap * sizeof(tl_entry));
    if (!grown) { overflow = 1; return 1; }
    entries = grown; cap_entries = cap;
  }
  tl_entry* e = &entries[n_entries++];
  e->flat = flat; e->bx = bx; e->by = by; e->bz = bz; e->tw = tw;
  return 1;
}

int64_t tilelab_trace_count(void) { return n_entries; }
int64_t tilelab_trace_calls(void) { return calls; }
int64_t tilelab_trace_overflow(void) { return overflow; }
const void* tilelab_trace_entries(void) { return entries; }
int64_t tilelab_trace_oob_count(void) { return n_oob; }
int64_t tilelab_trace_oob_total(void) { return total_oob; }
const void* tilelab_trace_oobs(void) { return oobs; }

}
""".replace("MAX_RANK", str(MAX_RANK))

_RUNTIME: ctypes.CDLL | None = None
_COMPILED = Recent("traced kernel", 8)
_RUNTIME_LOCK = threading.Lock()


def runtime() -> ctypes.CDLL:
    """The trace runtime (:mod:`._native`), loaded once per process."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is not None:
            return _RUNTIME
        from ._native import load_runtime

        rt = load_runtime(_RUNTIME_SOURCE, "trace-runtime", TraceError, "trace_tiles")
        for name in ("tilelab_trace_count", "tilelab_trace_calls", "tilelab_trace_overflow",
                     "tilelab_trace_oob_count", "tilelab_trace_oob_total"):
            getattr(rt, name).restype = ctypes.c_int64
        rt.tilelab_trace_entries.restype = ctypes.c_void_p
        rt.tilelab_trace_oobs.restype = ctypes.c_void_p
        rt.tilelab_trace_begin.argtypes = [ctypes.c_int64, ctypes.c_int64]
        _RUNTIME = rt
        return rt


def _entry_dtype() -> Any:
    import numpy as np

    return np.dtype([("flat", "<i8"), ("bx", "<i4"), ("by", "<i4"), ("bz", "<i4"), ("tw", "<i4")])


def _oob_dtype() -> Any:
    import numpy as np

    return np.dtype([("idx", "<i8", (MAX_RANK,)), ("bx", "<i4"), ("by", "<i4"), ("bz", "<i4"), ("tw", "<i4"),
                     ("rank", "<i4"), ("pad", "<i4")])


def _read_log(rt: ctypes.CDLL) -> tuple[Any, Any, int, int, bool]:
    """(entries, out-of-bounds entries, all out-of-bounds attempts, access calls, overflowed),
    copied out of the runtime before the next trace reuses its buffers."""
    import numpy as np

    def copy(ptr: int | None, count: int, dtype: Any) -> Any:
        if not count or not ptr:
            return np.zeros(0, dtype=dtype)
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
        return np.frombuffer(raw, dtype=dtype).copy()

    entries = copy(rt.tilelab_trace_entries(), rt.tilelab_trace_count(), _entry_dtype())
    oobs = copy(rt.tilelab_trace_oobs(), rt.tilelab_trace_oob_count(), _oob_dtype())
    return entries, oobs, int(rt.tilelab_trace_oob_total()), int(rt.tilelab_trace_calls()), \
        bool(rt.tilelab_trace_overflow())


def _runs(sorted_flat: Any) -> tuple[int, ...]:
    """Sorted distinct flat indices as (start, stop, start, stop, ...) of consecutive runs."""
    import numpy as np

    if len(sorted_flat) == 0:
        return ()
    breaks = np.nonzero(np.diff(sorted_flat) != 1)[0]
    starts = np.concatenate(([sorted_flat[0]], sorted_flat[breaks + 1]))
    stops = np.concatenate((sorted_flat[breaks] + 1, [sorted_flat[-1] + 1]))
    return tuple(int(v) for pair in zip(starts.tolist(), stops.tolist()) for v in pair)


def _per_block(entries: Any, tws: Sequence[int], grid: tuple[int, int, int], numel: int
               ) -> tuple[tuple[int, ...], ...]:
    """For one tensor and kinds of access: each block's elements (runs), blocks in linear order."""
    import numpy as np

    gx, gy, gz = grid
    n_blocks = gx * gy * gz
    mine = entries[np.isin(entries["tw"], list(tws))]
    out: list[tuple[int, ...]] = [()] * n_blocks
    if len(mine) == 0:
        return tuple(out)
    linear = mine["bx"].astype(np.int64) + gx * (mine["by"].astype(np.int64) + gy * mine["bz"].astype(np.int64))
    keys = np.sort(linear * max(numel, 1) + mine["flat"])  # sort and drop repeats: much faster than
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # np.unique's hashing on large logs
    blocks = keys // max(numel, 1)
    flats = keys % max(numel, 1)
    edges: np.ndarray = np.nonzero(np.diff(blocks))[0] + 1
    for part_b, part_f in zip(np.split(blocks, edges), np.split(flats, edges)):
        b = int(part_b[0])
        if 0 <= b < n_blocks:
            out[b] = _runs(part_f)
    return tuple(out)


def _traced_kernel(key: str, payload: bytes) -> Any:
    """The kernel of ``payload`` compiled with its accesses traced, kept in memory (by ``key``) for
    the next trace of the same kernel (other inputs or sizes, a grader's second try) with the same
    out_idx and pass configs."""
    import pickle

    from .. import _tilelang

    runtime()  # loaded first: TileLang opens the traced kernel's library as it compiles it
    from ._emulate import runtime as emulation_runtime

    emulation_runtime()  # a GPU kernel's float16 stores round through it (the tile program's rules)
    traced = _COMPILED.get(key, key)
    if traced is not None:
        return traced
    _tilelang.tilelang()  # TileLang's operators are registered before its IR is unpickled
    func, out_idx, pass_configs = pickle.loads(payload)
    try:
        traced = _tilelang.compile_traced(func, out_idx=out_idx, pass_configs=pass_configs)
    except _tilelang.EmulationRefused as err:
        raise TraceError(str(err)) from None
    except LoweringError as err:
        raise TraceError(f"{err.summary}\n\n{CPU_PATH}.") from err
    _COMPILED.put(key, traced, key)
    return traced


def _block_of(bx: int, by: int, bz: int, rank: int) -> tuple[int, ...]:
    return (bx, by, bz)[:rank]


@dataclass(frozen=True)
class TraceRequest:
    """A trace asked for, made in the caller's process: the kernel (``payload``: its prim_func,
    out_idx and pass configs, pickled) and what the trace of it says besides the log."""

    name: str
    key: str  # the traced compile's: a process keeps it by this
    payload: bytes
    outputs: tuple[str, ...] | None
    outputs_named: bool  # outputs= or out_idx named the outputs (each must be written in full)
    notes: tuple[str, ...]


def request(kernel: Any, *, out_idx: int | Sequence[int] | None = None, outputs: Sequence[str] | None = None,
            target: Any = "c", pass_configs: dict[str, Any] | None = None) -> TraceRequest:
    """What :func:`trace` needs of ``kernel``, checked here: a target other than the CPU is refused,
    and the kernel object (a compiled kernel, a factory, a ``@tilelang.jit`` function) becomes the
    prim_func it stands for, with its out_idx and pass configs."""
    import pickle

    from .. import _tilelang
    from ..targets import parse_target

    if target is not None:
        resolved = parse_target(target)
        if resolved.family != "cpu":
            raise TraceError(f"trace_tiles traces kernels launched on the CPU (target 'c'); got target "
                             f"{resolved.name!r}. Pass target='c' (or leave it out): {CPU_PATH}.")
    notes: list[str] = []
    if _tilelang.kernel_kind(kernel) == "compiled" and _tilelang.compiled_target_family(kernel) != "cpu":
        notes.append("compiled again for the CPU (target c) from the kernel's prim_func")
    idx = [out_idx] if isinstance(out_idx, int) else (list(out_idx) if out_idx is not None else None)
    source = _tilelang.resolve_kernel(kernel)
    configs = {**source.pass_configs, **(pass_configs or {})}
    compile_idx = idx if idx is not None else source.out_idx
    key = repr((_tilelang.traced_kernel_key(source.prim_func), compile_idx,
                sorted((k, repr(v)) for k, v in configs.items())))
    return TraceRequest(source.name, key, pickle.dumps((source.prim_func, compile_idx, configs)),
                        tuple(outputs) if outputs else None, bool(outputs) or idx is not None, tuple(notes))


def trace(job: TraceRequest, args: Sequence[Any], sizes: dict[str, int], *, seed: int | None,
          worker: Any, timeout: float | None) -> TileTrace:
    """The traced launch of ``job`` in ``worker`` (None: in this process), by the one path of CPU
    launches (:func:`._emulate.launch_on_cpu`): a kernel that crashes or loops past ``timeout``
    seconds (default :data:`._emulate.RUN_TIMEOUT_S`) costs the worker, never this process."""
    from . import _emulate

    trace_record: TileTrace = _emulate.launch_on_cpu(
        worker, job.name, job.key, job.payload, load_in_worker, trace_in_worker,
        (list(args), dict(sizes), seed, job.outputs, job.outputs_named, job.notes),
        _emulate.RUN_TIMEOUT_S if timeout is None else timeout, what="the traced kernel", resend=True,
        hint="a loop whose exit condition is never met, or a grid too large to trace whole: smaller sizes, or a "
             "larger timeout=")
    return trace_record


# ------------------------------------------------------------------------------------------
# Where the traced kernel runs (the CPU worker, or this process)
# ------------------------------------------------------------------------------------------

def load_in_worker(key: str, payload: bytes) -> None:
    """Compile (once per process) and keep the traced kernel."""
    _traced_kernel(key, payload)


def trace_in_worker(key: str, payload: bytes, args: list[Any], sizes: dict[str, int], seed: int | None,
                    outputs: Sequence[str] | None, outputs_named: bool, notes: Sequence[str]) -> TileTrace:
    """Launch the traced kernel once on the CPU with the trace runtime logging its accesses, and
    fold the log into the :class:`TileTrace` record (``args`` are tensors, shapes or numbers as for
    :func:`tilelab.run`, missing ones random inputs from ``seed``; ``sizes`` the dynamic ones)."""
    from . import _checks, _inputs
    from ._run import call_kernel, prepare_kernel

    traced = _traced_kernel(key, payload)
    notes = list(notes)
    prepared = prepare_kernel(traced.compiled, outputs=outputs)
    launch_args, bound = _inputs.build_inputs(prepared.params, args, sizes, device="cpu", seed=seed)
    grid = _checks.launch_grid(prepared, bound)
    if grid is None:
        raise TraceError(f"{prepared.name}: its launch grid could not be read (no T.Kernel?): {CPU_PATH}.")
    rt = runtime()
    with _RUNTIME_LOCK:
        rt.tilelab_trace_begin(MAX_ACCESSES, MAX_OUT_OF_BOUNDS)
        try:
            outs = call_kernel(prepared, launch_args)
        except Exception as err:
            raise TilelabError(f"{prepared.name}: the traced CPU kernel failed: {type(err).__name__}: {err}") from err
        entries, oobs, oob_total, calls, overflow = _read_log(rt)
    if overflow:
        notes.append(f"the trace kept the first {MAX_ACCESSES:,} accesses; later ones are missing: "
                     "trace a smaller size")
    for name in traced.untraced:
        notes.append(f"{name} is also reached through a pointer or a vector access the trace cannot see: "
                     "its reads and writes may be incomplete")
    return _record(prepared, traced, launch_args, outs, bound, grid, entries, oobs, oob_total, calls, notes,
                   outputs_named=outputs_named)


def _record(prepared: Any, traced: Any, launch_args: list[Any], outs: list[Any], bound: dict[str, int],
            grid: tuple[int, int, int], entries: Any, oobs: Any, oob_total: int, calls: int,
            notes: list[str], *, outputs_named: bool) -> TileTrace:
    from . import _inputs

    launch = [p for p in prepared.params if p.passed_at_launch]
    given = {p.name: a for p, a in zip(launch, launch_args) if p.kind == "tensor"}
    returned = {p.name: o for p, o in zip(prepared.outputs, outs)}
    tensors = []
    rank = traced.grid_rank
    for tid, name in enumerate(traced.tensors):
        param = next((p for p in prepared.params if p.name == name), None)
        value = given.get(name, returned.get(name))
        if value is not None:
            shape = tuple(int(s) for s in value.shape)
        elif param is not None:
            shape = tuple(int(_inputs.eval_dim(d, bound)) for d in param.shape)
        else:
            continue
        numel = 1
        for s in shape:
            numel *= s
        dtype = str(param.dtype) if param is not None else ""
        reads = _per_block(entries, [tid * 4], grid, numel)
        writes = _per_block(entries, [tid * 4 + 1, tid * 4 + 2], grid, numel)
        atomic = _per_block(entries, [tid * 4 + 2], grid, numel)
        # Written in full is expected of a tensor some block writes and of a named output (out_idx,
        # outputs=); the last tensor, the output by default, also when no block touched it at all.
        output = param is not None and param.is_output
        expected = (output and outputs_named) or any(writes) or (output and not any(reads))
        tensors.append(TensorTrace(name, shape, dtype, reads, writes, expected_written=bool(expected),
                                   atomic_writes=atomic if any(atomic) else ()))
    oob_records = []
    for row in oobs:
        tw = int(row["tw"])
        if tw // 4 >= len(traced.tensors):
            continue
        oob_records.append(OutOfBounds(traced.tensors[tw // 4], _block_of(int(row["bx"]), int(row["by"]),
                                                                            int(row["bz"]), rank),
                                       tuple(int(i) for i in row["idx"][:int(row["rank"])]), bool(tw % 4)))
    return TileTrace(kernel=prepared.name, grid=tuple(grid[:rank]), tensors=tuple(tensors),
                     out_of_bounds=tuple(oob_records), out_of_bounds_total=oob_total, accesses=calls,
                     notes=tuple(notes))
