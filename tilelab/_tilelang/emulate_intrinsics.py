"""The intrinsics rule of the CPU path: TileLang intrinsics that its ``c`` back end does not
implement, each given its meaning in plain TIR by
one entry of :data:`INTRINSICS`, written from TileLang's own definition of the op (its Python
docstring, its CUDA template). An intrinsic that is neither here nor known to the ``c`` back end
is refused by name (:func:`refused_intrinsic`), with the kernel's line that calls it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .emulate_source import EmulationRefused, _source_lines
from .env import tilelang

ASSERT_FUNCTION = "tilelab_emu_assert_failed"  # defined by the launch side's header (tilelab.launch._emulate)
MAX_FLAGS = 4096  # T.all_of / T.any_of: the most elements unrolled into one expression


@dataclass(frozen=True)
class Intrinsic:
    """One intrinsic op: what TileLang defines it to do, and its CPU form (the call in, an
    expression or a statement out)."""

    op: str
    meaning: str
    lower: Callable[[Any, dict[Any, Any]], Any]


def _float_extern(c32: str, c64: str) -> Callable[[Any, dict[Any, Any]], Any]:
    """A call of the C library's function of the argument's float type (float32 for the narrow
    ones: the dtypes rule computes them in float32)."""
    def lower(call: Any, buffers: dict[Any, Any]) -> Any:
        tirx = tilelang().tvm.tirx
        x = call.args[0]
        return tirx.call_pure_extern(call.dtype, c64 if str(x.dtype) == "float64" else c32, x)
    return lower


def _reciprocal(call: Any, buffers: dict[Any, Any]) -> Any:
    tirx = tilelang().tvm.tirx
    x = call.args[0]
    return tirx.Div(tirx.const(1.0, x.dtype), x)


def _load(call: Any, buffers: dict[Any, Any]) -> Any:
    return call.args[0]


def _nothing(call: Any, buffers: dict[Any, Any]) -> Any:
    return tilelang().tvm.tirx.const(0, "int32")


def _reduce_flags(conjunction: bool) -> Callable[[Any, dict[Any, Any]], Any]:
    """``T.all_of`` / ``T.any_of``: TileLang passes a pointer to the first element (``T.access_ptr``
    of a load) and how many elements follow it in the buffer's row-major order; their flags
    (nonzero) joined by and / or, as one expression of that many loads (a count known when
    the kernel is built, at most :data:`MAX_FLAGS`; otherwise the call is left, and refused)."""
    def lower(call: Any, buffers: dict[Any, Any]) -> Any:
        tirx = tilelang().tvm.tirx
        pointer, count = call.args[0], call.args[1]
        if not (isinstance(pointer, tirx.Call) and str(pointer.op.name) == "tl.access_ptr"
                and isinstance(pointer.args[0], tirx.BufferLoad) and isinstance(count, tirx.IntImm)
                and 0 < int(count) <= MAX_FLAGS and all(isinstance(e, tirx.IntImm)
                                                        for e in pointer.args[0].buffer.shape)):
            return None
        load = pointer.args[0]
        shape = [int(e) for e in load.buffer.shape]
        start: Any = tirx.const(0, "int32")
        for index, extent in zip(load.indices, shape):
            start = start * extent + index
        flags = []
        for k in range(int(count)):
            flat, indices = start + k, []
            for extent in reversed(shape):
                indices.append(tirx.floormod(flat, extent))
                flat = tirx.floordiv(flat, extent)
            element = tirx.BufferLoad(load.buffer, list(reversed(indices)))
            flags.append(tirx.NE(element, tirx.const(0, element.dtype)))
        while len(flags) > 1:  # a balanced tree: the expression's depth grows as log2 of the count
            joined = [(tirx.And if conjunction else tirx.Or)(a, b) for a, b in zip(flags[::2], flags[1::2])]
            flags = joined + ([flags[-1]] if len(flags) % 2 else [])
        return flags[0]
    return lower


def _assertion(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.device_assert(cond, msg)``: when the condition is false, the runtime's report of the
    failed assertion (its message on stderr, and the launch ends: as CUDA's trap ends the kernel)."""
    tirx = tilelang().tvm.tirx
    message = call.args[1] if len(call.args) > 1 else tirx.StringImm("")
    return tirx.IfThenElse(tirx.Not(tirx.Cast("bool", call.args[0])),
                           tirx.Evaluate(tirx.call_extern("int32", ASSERT_FUNCTION, message)), None)


def _row_major(buf: Any) -> bool:
    """Whether ``buf`` is laid out in row-major order (no strides, or constant ones that say so)."""
    tirx = tilelang().tvm.tirx
    if not len(buf.strides):
        return True
    if not all(isinstance(e, tirx.IntImm) for e in [*buf.shape, *buf.strides]):
        return False
    expected = 1
    for extent, stride in zip(reversed(list(buf.shape)), reversed(list(buf.strides))):
        if int(stride) != expected:
            return False
        expected *= int(extent)
    return True


def _word_element(pointer: Any, buffers: dict[Any, Any]) -> Any:
    """The element a pointer (``T.access_ptr`` of a load, or ``tvm_access_ptr`` of a buffer's data
    and a flat offset) points at, as a load, when it is one 32-bit element (a 32-bit access is then
    that element's bits); None otherwise."""
    tirx = tilelang().tvm.tirx
    if not isinstance(pointer, tirx.Call):
        return None
    element = None
    if str(pointer.op.name) == "tl.access_ptr" and isinstance(pointer.args[0], tirx.BufferLoad):
        element = pointer.args[0]
    elif str(pointer.op.name) == "tirx.tvm_access_ptr" and pointer.args[1] in buffers:
        buf, flat, indices = buffers[pointer.args[1]], pointer.args[2], []
        if not _row_major(buf):
            return None
        for extent in reversed(list(buf.shape)):
            indices.append(tirx.floormod(flat, extent))
            flat = tirx.floordiv(flat, extent)
        element = tirx.BufferLoad(buf, list(reversed(indices)))
    if element is None or element.buffer.dtype.bits != 32 or element.buffer.dtype.lanes != 1:
        return None
    return element


def _load_word(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.ldg32(x[i][, pred])`` of a 32-bit element: its bits (0 when the predicate is false)."""
    tirx = tilelang().tvm.tirx
    element = _word_element(call.args[0], buffers)
    if element is None:
        return None
    bits = tirx.reinterpret("uint32", element)
    return tirx.if_then_else(call.args[1], bits, tirx.const(0, "uint32")) if len(call.args) > 1 else bits


def _store_word(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.stg32(y[i], v[, pred])`` into a 32-bit element: y[i] holds the bits of v (when the
    predicate holds)."""
    tirx = tilelang().tvm.tirx
    element = _word_element(call.args[0], buffers)
    if element is None:
        return None
    store = tirx.BufferStore(element.buffer, tirx.reinterpret(element.buffer.dtype, tirx.Cast("uint32", call.args[1])),
                             element.indices)
    return tirx.IfThenElse(call.args[2], store, None) if len(call.args) > 2 else store


def _cumsum(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.cumsum(src, dst, dim, reverse)`` over two regions of one shape: loops over the other
    axes, and along ``dim`` each element the sum of its own and the previous result (from the end
    when reversed); in place when src is dst, as each element reads its source before writing."""
    tirx = tilelang().tvm.tirx
    src, dst, dim, reverse = call.args[0], call.args[1], int(call.args[2]), bool(int(call.args[3]))
    src_load, extents = src.args[0], list(src.args[2:])
    dst_load = dst.args[0]
    rank = len(extents)
    loops = [tirx.Var(f"tilelab_scan{i}", "int32") for i in range(rank)]
    last = extents[dim] - 1
    along = (last - loops[dim]) if reverse else loops[dim]
    before = (along + 1) if reverse else (along - 1)

    def at(load: Any, position: Any) -> list[Any]:
        base = list(load.indices)
        lead = len(base) - rank  # a region of fewer axes than its buffer: the leading ones are fixed
        return [b if i < lead else b + (position if i - lead == dim else loops[i - lead])
                for i, b in enumerate(base)]

    value = tirx.BufferLoad(src_load.buffer, at(src_load, along))
    previous = tirx.BufferLoad(dst_load.buffer, at(dst_load, before))
    body: Any = tirx.IfThenElse(
        tirx.EQ(loops[dim], 0),
        tirx.BufferStore(dst_load.buffer, value, at(dst_load, along)),
        tirx.BufferStore(dst_load.buffer, value + previous, at(dst_load, along)))
    for i in reversed(range(rank)):
        body = tirx.For(loops[i], 0, extents[i], tirx.ForKind.SERIAL, body)
    return body


INTRINSICS = {i.op: i for i in (
    Intrinsic("tl.round_ties_away_from_zero", "T.round(x, 'ties-away-from-zero'): the nearest integer, a halfway "
              "case away from zero (C's round)", _float_extern("roundf", "round")),
    Intrinsic("tirx.fabs", "T.abs of a float: its absolute value (C's fabs)", _float_extern("fabsf", "fabs")),
    Intrinsic("tl.fast_rcp", "T.fast_rcp(x): 1/x (rcp.approx.ftz.f32 on the GPU, within its error; exact here)",
              _reciprocal),
    Intrinsic("tl.__ldg", "T.__ldg(x[i]): the load x[i] through the read-only cache; a plain load", _load),
    Intrinsic("tl.ldg32", "T.ldg32(x[i]): the 32 bits at x[i] (a global load by PTX); of a 32-bit element, its bits",
              _load_word),
    Intrinsic("tl.stg32", "T.stg32(y[i], v): the 32 bits of v stored at y[i]; into a 32-bit element, as its bits",
              _store_word),
    Intrinsic("tl.tma_store_wait", "T.tma_store_wait(): waits for the block's TMA stores; every store on the CPU "
              "is done when its statement ends, so nothing to wait for", _nothing),
    Intrinsic("tl.all_of", "T.all_of(tile): whether every element of the tile (or region) is nonzero",
              _reduce_flags(True)),
    Intrinsic("tl.any_of", "T.any_of(tile): whether some element of the tile (or region) is nonzero",
              _reduce_flags(False)),
    Intrinsic("tl.device_assert", "T.device_assert(cond): when cond is false, the kernel stops (CUDA's assert)",
              _assertion),
    Intrinsic("tl.device_assert_with_msg", "T.device_assert(cond, msg): when cond is false, msg is printed and the "
              "kernel stops (CUDA's assert)", _assertion),
    Intrinsic("tl.tileop.cumsum", "T.cumsum(src, dst, dim, reverse): the inclusive prefix sum of src along dim "
              "(from the end when reversed) into dst", _cumsum),
)}


# The ops whose CPU form is a statement (the call is evaluated for its effect)
STATEMENTS = ("tl.tileop.cumsum", "tl.device_assert", "tl.device_assert_with_msg", "tl.stg32")


def lower_intrinsics(func: Any) -> tuple[Any, set[str]]:
    """``func`` with each call of an op in :data:`INTRINSICS` replaced by its CPU form, and the
    ops it replaced."""
    tirx = tilelang().tvm.tirx
    used: set[str] = set()
    buffers = {buf.data: buf for buf in func.buffer_map.values()}  # a buffer by its data (for tvm_access_ptr)

    def note(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            buffers.update({buf.data: buf for buf in node.alloc_buffers})

    tirx.stmt_functor.post_order_visit(func.body, note)

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            entry = INTRINSICS.get(str(getattr(node.value.op, "name", "")))
            if entry is not None and entry.op in STATEMENTS:
                lowered = entry.lower(node.value, buffers)
                if lowered is not None:
                    used.add(entry.op)
                return lowered
            return None
        if isinstance(node, tirx.Call):
            entry = INTRINSICS.get(str(getattr(node.op, "name", "")))
            if entry is not None and entry.op not in STATEMENTS:
                lowered = entry.lower(node, buffers)
                if lowered is not None:
                    used.add(entry.op)
                return lowered
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Call", "tirx.Evaluate"])
    return (func.with_body(body) if used else func), used


_UNRESOLVED = re.compile(r'Unresolved call ir\.Op\(.*?name="([\w.]+)"')


def refused_intrinsic(func: Any, name: str, error: BaseException) -> EmulationRefused | None:
    """TileLang's "Unresolved call" of an intrinsic its ``c`` back end lacks (and this rule too),
    as the refusal that names it and the kernel's line calling it; None for any other error."""
    found = _UNRESOLVED.search(str(error))
    if found is None:
        return None
    op = found.group(1)
    short = op.split(".")[-1]
    filename, start, lines = _source_lines(func)
    line, text = 0, ""
    for i, source in enumerate(lines):
        if re.search(rf"\bT\.{re.escape(short)}\b", source.split("#", 1)[0]):
            line, text = start + i, source
            break
    return EmulationRefused(name, f"the TileLang intrinsic {op}",
                            "TileLang's C back end has no implementation of it and the CPU path's table of "
                            "intrinsics (tilelab's intrinsics rule) does not give it a meaning", filename, line, text)
