"""The ``tile-ops`` rule of the CPU path: options of tile operations that say how a GPU runs them

Some tile operations take an option that chooses the GPU's way of computing them, not what they
compute, and TileLang's CPU lowering rejects the option instead of ignoring it. On the CPU one
thread runs each block and the blocks run one after another, so:

- ``T.reduce_*(..., batch=n)`` (how many outputs share one AllReduce's pair of barriers) is the
  same reduction with ``batch`` dropped;
- ``T.atomic_add(dst, src_tile, use_tma=True)`` (the tile added by one ``cp.reduce.async.bulk``)
  is the same elementwise atomic add of the tile with ``use_tma`` dropped;
- ``T.reduce_max`` / ``reduce_min`` / ``reduce_absmax`` with ``nan_propagate=True`` (the GPU's
  ``__hmax_nan``/``__hmin_nan`` combine, which TileLang allows for float16 and bfloat16 outputs
  only: on the CPU those are held in float32, so TileLang's own check rejects them) run as the
  loops of their meaning: for each output element, the combine of its elements along ``dim``
  (``clear=False``: and of the value the output held), NaN as soon as one of them is NaN;
- every other float maximum and minimum, the combine of TileLang's own reduce lowering
  (``T.reduce_max`` / ``reduce_min`` / ``reduce_absmax``, the latter's ``|x|`` a maximum of ``x``
  and ``-x`` too) and ``T.max`` / ``T.min`` in the kernel's own code, is the GPU's: the PTX ISA's
  ``max`` / ``min``, where a NaN operand gives the other operand and -0 < +0 (:func:`gpu_max_min`,
  run by the late pass once the reduces are loops; the C of :data:`RUNTIME_C`). On the GPU the reduce
  combines with ``max()`` / ``min()`` in each thread and ``tl::MaxOp`` / ``MinOp`` across threads:
  ``fmaxf`` / ``fminf`` for float32, ``__hmax`` / ``__hmax2`` / ``__hmin`` for float16 and bfloat16,
  each returning the other operand for a NaN, and so does CUDA's ``max(a, b)`` of two floats, which
  TileLang prints for a float ``T.max``. So a NaN element is skipped wherever it sits: a row max is
  numpy's ``np.fmax.reduce`` over the row and the reduce's start (-inf for ``reduce_max``, +inf for
  ``reduce_min``, 0 for ``reduce_absmax``; with ``clear=False``, the value the output held), and a
  row of NaN only gives that start. TileLang's C back end prints a maximum as ``a > b ? a : b``,
  which gives ``b`` when either is NaN: its result would depend on where the NaN sits. (For
  float64 TileLang's combine across threads is ``a < b ? b : a``, but each thread's partial starts
  from the reduce's start and skips NaN, so none reaches it; only a NaN the output already held,
  with ``clear=False``, could, for a thread whose elements are all NaN, and there the GPU's answer
  depends on its thread layout.)

A reduce with ``nan_propagate`` over regions whose shapes do not say which axis is reduced is
refused by name.
"""

from __future__ import annotations

from typing import Any

from .emulate_source import EmulationRefused, _source_lines
from .env import tilelang

RULE_ID = "tile-ops"
_REDUCE, _ATOMIC_ADD = "tl.tileop.reduce", "tl.tileop.atomicadd"
# The options dropped: the op -> the annotations that only say how the GPU runs it.
GPU_ONLY_OPTIONS = {_REDUCE: ("batch",), _ATOMIC_ADD: ("use_tma",)}
NAN_REDUCES = ("max", "min", "absmax")


def _flag(value: Any) -> bool:
    try:
        return bool(int(value))
    except (TypeError, ValueError):
        return False


def _line(func: Any, pattern: str) -> tuple[str, int, str]:
    filename, start, lines = _source_lines(func)
    for i, text in enumerate(lines):
        if pattern in text.split("#", 1)[0]:
            return filename, start + i, text
    return filename, 0, ""


def _nan_reduce(call: Any, func: Any, name: str) -> Any:
    """The loops of a reduce with ``nan_propagate=True`` (see the module's docstring)."""
    tirx = tilelang().tvm.tirx
    src, dst, kind, dim, clear = call.args[0], call.args[1], str(call.args[2].value), int(call.args[3]), \
        _flag(call.args[4])
    src_load, src_ext = src.args[0], list(src.args[2:])
    dst_load, dst_ext = dst.args[0], list(dst.args[2:])
    rank = len(src_ext)
    if dim < 0:
        dim += rank
    kept = [e for i, e in enumerate(src_ext) if i != dim]
    same = len(dst_ext) == rank
    analyzer = tilelang().tvm.arith.Analyzer()

    def equal(a: list[Any], b: list[Any]) -> bool:
        return len(a) == len(b) and all(analyzer.can_prove_equal(x, y) for x, y in zip(a, b))

    if not (0 <= dim < rank) or not (equal(dst_ext, kept) or (same and equal(
            [e for i, e in enumerate(dst_ext) if i != dim], kept) and analyzer.can_prove_equal(dst_ext[dim], 1))):
        file, line, text = _line(func, f"reduce_{kind}")
        raise EmulationRefused(name, f"a T.reduce_{kind} with nan_propagate=True from a region of shape "
                               f"{[str(e) for e in src_ext]} into one of shape {[str(e) for e in dst_ext]} "
                               f"along dim {dim}", "the CPU path runs it as loops over the reduced axis, and "
                               "these shapes do not say which axis that is", file, line, text)
    loops = [tirx.Var(f"tilelab_red{i}", "int32") for i in range(rank)]

    def at(load: Any, positions: list[Any]) -> list[Any]:
        base = list(load.indices)
        lead = len(base) - len(positions)  # a region of fewer axes than its buffer: the leading ones fixed
        return [b if i < lead else b + positions[i - lead] for i, b in enumerate(base)]

    dst_pos = [loops[i] if i != dim else tirx.const(0, "int32") for i in range(rank)] if same else \
        [loops[i] for i in range(rank) if i != dim]
    out_dtype = str(dst_load.buffer.dtype)

    def element(k: Any) -> Any:
        value = tirx.BufferLoad(src_load.buffer, at(src_load, [k if i == dim else loops[i] for i in range(rank)]))
        if str(value.dtype) != out_dtype:
            value = tirx.Cast(out_dtype, value)
        return tirx.Select(value < tirx.const(0, out_dtype), -value, value) if kind == "absmax" else value

    out = tirx.BufferLoad(dst_load.buffer, at(dst_load, dst_pos))
    x = element(loops[dim])
    best = tirx.Max(out, x) if kind in ("max", "absmax") else tirx.Min(out, x)
    # NaN propagates: either operand NaN gives their sum, which is NaN
    combined = tirx.Select(tirx.Or(_isnan(out), _isnan(x)), out + x, best)
    inner: Any = tirx.BufferStore(dst_load.buffer, combined, at(dst_load, dst_pos))
    if clear:  # the first element starts the combine (no identity constant: -inf has no C literal here)
        inner = tirx.IfThenElse(tirx.EQ(loops[dim], 0), tirx.BufferStore(dst_load.buffer, element(loops[dim]),
                                                                          at(dst_load, dst_pos)), inner)
    body: Any = tirx.For(loops[dim], 0, src_ext[dim], tirx.ForKind.SERIAL, inner)
    for i in reversed(range(rank)):
        if i != dim:
            body = tirx.For(loops[i], 0, src_ext[i], tirx.ForKind.SERIAL, body)
    return body


# A float maximum or minimum as the GPU computes it: the runtime's functions (RUNTIME_C) by dtype.
GPU_MAX_MIN = {("Max", "float32"): "tilelab_emu_max_f32", ("Min", "float32"): "tilelab_emu_min_f32",
               ("Max", "float64"): "tilelab_emu_max_f64", ("Min", "float64"): "tilelab_emu_min_f64"}
# Their C, part of the header every CPU-path kernel is built with (tilelab.launch._emulate): the PTX
# ISA's max and min (what fmaxf, fminf, __hmax and __hmin compile to): a NaN operand gives the other,
# two NaN give NaN, and -0 < +0 (C's fmaxf leaves the sign of an equal pair to the library: glibc's
# gives its first operand).
RUNTIME_C = "".join(r"""
extern "C" {
static inline T tilelab_emu_max_S(T a, T b) {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  if (a == b) return signbit(a) ? b : a;
  return a > b ? a : b;
}
static inline T tilelab_emu_min_S(T a, T b) {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  if (a == b) return signbit(a) ? a : b;
  return a < b ? a : b;
}
}
""".replace("T ", t + " ").replace("(T", "(" + t).replace("_S", "_" + suffix) for t, suffix in (("float", "f32"),
                                                                                               ("double", "f64")))


def gpu_max_min(body: Any) -> Any:
    """``body`` with each scalar float32 or float64 maximum and minimum (``tirx.Max`` / ``Min``) as
    the runtime's function of :data:`GPU_MAX_MIN` (see the module's docstring). Run on the lowered kernel,
    where a GPU float type is held in float32: its reduces are loops by then and its vectors lanes."""
    tirx = tilelang().tvm.tirx

    def post(node: Any) -> Any:
        function = GPU_MAX_MIN.get((type(node).__name__, str(node.dtype)))
        if function is None:  # an integer, a vector, or a float type the CPU does not compute in
            return None
        return tirx.call_pure_extern(str(node.dtype), function, node.a, node.b)

    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Max", "tirx.Min"])


def _isnan(value: Any) -> Any:
    """Whether ``value`` is NaN (TVM's isnan takes float32 and float64: a narrower float is widened, exactly)."""
    tirx = tilelang().tvm.tirx
    return tirx.isnan(value if str(value.dtype) in ("float32", "float64") else tirx.Cast("float32", value))


def tile_ops(func: Any, name: str) -> tuple[Any, bool]:
    """``func`` with the GPU-only options of its tile operations dropped and its NaN-propagating
    reduces as loops (see the module's docstring), and whether it changed."""
    tirx = tilelang().tvm.tirx
    changed = False
    problems: list[EmulationRefused] = []

    def post(node: Any) -> Any:
        nonlocal changed
        if not (isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call)):
            return None
        call = node.value
        op = str(getattr(call.op, "name", ""))
        annotations = dict(getattr(call, "annotations", None) or {})
        if op == _REDUCE and _flag(annotations.get("nan_propagate", 0)) and len(call.args) >= 5 \
                and str(call.args[2].value) in NAN_REDUCES:
            try:
                lowered = _nan_reduce(call, func, name)
            except EmulationRefused as err:
                problems.append(err)
                return None
            changed = True
            return lowered
        dropped = [k for k in GPU_ONLY_OPTIONS.get(op, ()) if k in annotations]
        if not dropped:
            return None
        changed = True
        kept = {k: v for k, v in annotations.items() if k not in dropped}
        return tirx.Evaluate(tirx.Call(call.dtype, call.op, call.args, kept, call.span))

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Evaluate"])
    if problems:  # raised after the walk: TVM's callbacks would wrap it
        raise problems[0]
    return (func.with_body(body) if changed else func), changed
