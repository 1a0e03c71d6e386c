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
    forms: str = ""  # the forms of the call the CPU form takes, when not every one (said when another is refused)


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


def _pointed(pointer: Any, buffers: dict[Any, Any]) -> tuple[Any, Any] | None:
    """The buffer a pointer points into and the flat (row-major) position of the element it points
    at: ``T.access_ptr`` of a load, or ``tvm_access_ptr`` of a buffer's data and a flat offset in
    elements of the buffer's own type; None for any other pointer (another type, strides)."""
    tirx = tilelang().tvm.tirx
    if not isinstance(pointer, tirx.Call):
        return None
    op = str(pointer.op.name)
    if op == "tl.access_ptr" and isinstance(pointer.args[0], tirx.BufferLoad):
        load = pointer.args[0]
        if not _row_major(load.buffer) or len(load.indices) != len(load.buffer.shape):
            return None
        start: Any = tirx.const(0, "int32")
        for index, extent in zip(load.indices, load.buffer.shape):
            start = start * extent + index
        return load.buffer, start
    if op == "tirx.tvm_access_ptr" and pointer.args[1] in buffers:
        buf = buffers[pointer.args[1]]
        if not _row_major(buf) or str(pointer.args[0].dtype) != str(buf.dtype):
            return None
        return buf, pointer.args[2]
    return None


def _element(buf: Any, flat: Any) -> Any:
    """The element of ``buf`` at the flat (row-major) position ``flat``, as a load with one index
    per dimension (so that the bounds rule checks each)."""
    tirx = tilelang().tvm.tirx
    indices = []
    for extent in reversed(list(buf.shape)[1:]):
        indices.append(tirx.floormod(flat, extent))
        flat = tirx.floordiv(flat, extent)
    return tirx.BufferLoad(buf, [flat, *reversed(indices)])


def _elements(pointer: Any, buffers: dict[Any, Any], bits: int) -> list[Any] | None:
    """The elements that ``bits`` bits at a pointer cover, as loads in memory order, when they are
    whole elements of 8, 16, 32 or 64 bits; None otherwise."""
    found = _pointed(pointer, buffers)
    if found is None:
        return None
    buf, start = found
    width = buf.dtype.bits
    if buf.dtype.lanes != 1 or width not in (8, 16, 32, 64) or bits % width:
        return None
    return [_element(buf, start + k) for k in range(bits // width)]


def _words_of(elements: list[Any]) -> list[Any]:
    """The 32-bit words (uint32) that consecutive elements make in memory, the first element in the
    low bits (little-endian, as on the GPU)."""
    tirx = tilelang().tvm.tirx
    width = elements[0].buffer.dtype.bits
    if width == 64:
        out = []
        for e in elements:
            bits = tirx.reinterpret("uint64", e)
            out += [tirx.Cast("uint32", bits), tirx.Cast("uint32", tirx.shift_right(bits, tirx.const(32, "uint64")))]
        return out
    per = 32 // width
    words = []
    for w in range(len(elements) // per):
        word: Any = None
        for k in range(per):
            e = elements[w * per + k]
            part = tirx.reinterpret("uint32", e) if width == 32 else \
                tirx.Cast("uint32", tirx.reinterpret(f"uint{width}", e))
            if k:
                part = tirx.shift_left(part, tirx.const(width * k, "uint32"))
            word = part if word is None else tirx.bitwise_or(word, part)
        words.append(word)
    return words


def _load_words(call: Any, buffers: dict[Any, Any]) -> list[Any] | None:
    """A load by hand's 32-bit words (``T.ldg32/64/128/256(x[i:...][, pred])``, ``T.lds32/64/128``):
    those of the bits at its pointer, each 0 when the predicate is false; None when the pointer is
    not one :func:`_elements` knows."""
    tirx = tilelang().tvm.tirx
    elements = _elements(call.args[0], buffers, 32 * max(1, call.dtype.lanes))
    if elements is None:
        return None
    words = _words_of(elements)
    if len(call.args) > 1:
        words = [tirx.if_then_else(call.args[1], w, tirx.const(0, "uint32")) for w in words]
    return words


def _load_word(call: Any, buffers: dict[Any, Any]) -> Any:
    """A 32-bit load by hand: its word. A wider one is a vector of words, which TileLang's C has no
    constructor for: it is lowered where its value is bound or stored (:func:`lower_intrinsics`),
    word by word, and refused anywhere else."""
    if call.dtype.lanes != 1:
        return None
    words = _load_words(call, buffers)
    return words[0] if words is not None else None


def _store_words(call: Any, buffers: dict[Any, Any], words: list[Any]) -> Any:
    """A store by hand (``T.stg32/64/128/256(y[i:...], v[, pred])``, ``T.sts32/64/128``) of the
    32-bit words ``words``: the elements they cover at its pointer hold their bits (when the
    predicate holds); None when the pointer is not one :func:`_elements` knows."""
    tirx = tilelang().tvm.tirx
    elements = _elements(call.args[0], buffers, 32 * len(words))
    if elements is None:
        return None
    dtype = elements[0].buffer.dtype
    width = dtype.bits
    stores = []
    for k, e in enumerate(elements):
        if width == 64:
            part: Any = tirx.bitwise_or(tirx.Cast("uint64", words[2 * k]), tirx.shift_left(
                tirx.Cast("uint64", words[2 * k + 1]), tirx.const(32, "uint64")))
        else:
            per = 32 // width
            part = words[k // per]
            if k % per:
                part = tirx.shift_right(part, tirx.const(width * (k % per), "uint32"))
            if width != 32:
                part = tirx.Cast(f"uint{width}", part)
        stores.append(tirx.BufferStore(e.buffer, tirx.reinterpret(str(dtype), part), e.indices))
    body: Any = stores[0] if len(stores) == 1 else tirx.SeqStmt(stores)
    return tirx.IfThenElse(call.args[2], body, None) if len(call.args) > 2 else body


def _store_word(call: Any, buffers: dict[Any, Any]) -> Any:
    """A 32-bit store by hand of a scalar value. A wider one is lowered with its words by
    :func:`lower_intrinsics`."""
    tirx = tilelang().tvm.tirx
    if call.args[1].dtype.lanes != 1:
        return None
    held = tirx.Var("tilelab_word", "uint32")
    stored = _store_words(call, buffers, [held])
    return tirx.SeqStmt([tirx.Bind(held, tirx.Cast("uint32", call.args[1])), stored]) if stored is not None else None


def _cp_async(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.ptx_cp_async(dst, src, n[, predicate])``: the ``n`` elements at src copied to dst at once
    (zeros where the predicate is false: cp.async's zero fill), each element a load and a store the
    bounds rule checks; the pointers' element types must have the same width (bytes are copied)."""
    tirx = tilelang().tvm.tirx
    dst, src = _pointed(call.args[0], buffers), _pointed(call.args[1], buffers)
    if dst is None or src is None or dst[0].dtype.bits != src[0].dtype.bits or dst[0].dtype.lanes != 1 \
            or src[0].dtype.lanes != 1 or (dst[0].dtype.bits < 8 and str(dst[0].dtype) != str(src[0].dtype)):
        return None
    (dbuf, dstart), (sbuf, sstart) = dst, src
    e = tirx.Var("tilelab_e", "int32")
    value: Any = _element(sbuf, sstart + e)
    if str(sbuf.dtype) != str(dbuf.dtype):
        value = tirx.reinterpret(str(dbuf.dtype), value)
    if len(call.args) > 3:
        value = tirx.if_then_else(call.args[3], value, tirx.const(0, str(dbuf.dtype)))
    store = _element(dbuf, dstart + e)
    return tirx.For(e, 0, tirx.Cast("int32", call.args[2]), tirx.ForKind.SERIAL,
                    tirx.BufferStore(dbuf, value, store.indices))


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


_POINTERS = ("through a pointer to an element (T.access_ptr, or a region or element of a buffer) of a row-major "
             "buffer of 8-, 16-, 32- or 64-bit elements")
_WIDE = ("a value wider than 32 bits is a vector of 32-bit words, which TileLang's C cannot build: it is given its "
         "meaning where it is bound or passed to a store by hand that stores it, and nowhere else")


def _by_hand(bits: int) -> str:
    """The forms of a load or store by hand of ``bits`` bits that have a CPU form."""
    return _POINTERS if bits == 32 else f"{_POINTERS}; {_WIDE}"


INTRINSICS = {i.op: i for i in (
    Intrinsic("tl.round_ties_away_from_zero", "T.round(x, 'ties-away-from-zero'): the nearest integer, a halfway "
              "case away from zero (C's round)", _float_extern("roundf", "round")),
    Intrinsic("tirx.fabs", "T.abs of a float: its absolute value (C's fabs)", _float_extern("fabsf", "fabs")),
    Intrinsic("tl.fast_rcp", "T.fast_rcp(x): 1/x (rcp.approx.ftz.f32 on the GPU, within its error; exact here)",
              _reciprocal),
    Intrinsic("tl.__ldg", "T.__ldg(x[i]): the load x[i] through the read-only cache; a plain load", _load),
    *(Intrinsic(f"tl.ldg{bits}", f"T.ldg{bits}(x[i:...]): the {bits} bits at x[i] (a global load by PTX) as "
                f"32-bit words, 0 when its predicate is false", _load_word, _by_hand(bits))
      for bits in (32, 64, 128, 256)),
    *(Intrinsic(f"tl.stg{bits}", f"T.stg{bits}(y[i:...], v): the {bits} bits of v stored at y[i] (a global store by "
                f"PTX), when its predicate holds", _store_word, _by_hand(bits))
      for bits in (32, 64, 128, 256)),
    *(Intrinsic(f"tl.lds{bits}", f"T.lds{bits}(s[i:...]): the {bits} bits at s[i] (a shared-memory load) as 32-bit "
                f"words", _load_word, _by_hand(bits))
      for bits in (32, 64, 128)),
    *(Intrinsic(f"tl.sts{bits}", f"T.sts{bits}(s[i:...], v): the {bits} bits of v stored at s[i] (a shared-memory "
                f"store)", _store_word, _by_hand(bits))
      for bits in (32, 64, 128)),
    Intrinsic("tl.ptx_cp_async", "T.ptx_cp_async(dst, src, n[, predicate]): n elements copied from global to shared "
              "memory (asynchronously on the GPU; at once here), zeros where the predicate is false", _cp_async,
              _POINTERS.replace("through a pointer", "with each pointer one") + ", the two of one width (of a sub-byte "
              "type, the same type)"),
    Intrinsic("tirx.ptx_commit_group", "T.ptx_commit_group(): closes a group of cp.async copies; every copy is done "
              "when its statement ends on the CPU, so nothing to do", _nothing),
    Intrinsic("tirx.ptx_wait_group", "T.ptx_wait_group(n): waits for all but n groups of cp.async copies; none is "
              "pending on the CPU", _nothing),
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


_LOADS_BY_HAND = (*(f"tl.ldg{bits}" for bits in (32, 64, 128, 256)), *(f"tl.lds{bits}" for bits in (32, 64, 128)))
_STORES_BY_HAND = (*(f"tl.stg{bits}" for bits in (32, 64, 128, 256)), *(f"tl.sts{bits}" for bits in (32, 64, 128)))
# The ops whose CPU form is a statement (the call is evaluated for its effect)
STATEMENTS = ("tl.tileop.cumsum", "tl.device_assert", "tl.device_assert_with_msg", "tl.ptx_cp_async", *_STORES_BY_HAND)


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
    # A wide load by hand (64 bits and more) is a vector of 32-bit words, which TileLang's C cannot
    # build: a variable it binds becomes one variable per word when every use of it is the value of a
    # store by hand (which stores the words), and such a store of the load itself takes its words.
    uses: dict[Any, int] = {}
    stored: dict[Any, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, tirx.Var):
            uses[node] = uses.get(node, 0) + 1
        elif isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) in _STORES_BY_HAND \
                and len(node.args) > 1 and isinstance(node.args[1], tirx.Var):
            stored[node.args[1]] = stored.get(node.args[1], 0) + 1

    tirx.stmt_functor.post_order_visit(func.body, count)
    word_vars: dict[Any, list[Any]] = {}

    def wide_load(value: Any) -> bool:
        return isinstance(value, tirx.Call) and str(getattr(value.op, "name", "")) in _LOADS_BY_HAND \
            and value.dtype.lanes > 1

    def bound(node: Any) -> Any:
        """A wide load bound to a variable that only stores use: one bound variable per word."""
        if not (wide_load(node.value) and uses.get(node.var, 0) == stored.get(node.var, 0)):
            return None
        words = _load_words(node.value, buffers)
        if words is None:
            return None
        word_vars[node.var] = [tirx.Var(f"{node.var.name}_w{j}", "uint32") for j in range(len(words))]
        used.add(str(node.value.op.name))
        return tirx.SeqStmt([tirx.Bind(v, w) for v, w in zip(word_vars[node.var], words)])

    def wide_store(call: Any) -> Any:
        """A store by hand of a wide value: a bound load's word variables, or a load's own words."""
        value = call.args[1]
        if isinstance(value, tirx.Var) and value in word_vars:
            return _store_words(call, buffers, word_vars[value])
        if wide_load(value) and value.dtype.lanes == call.args[1].dtype.lanes:
            words = _load_words(value, buffers)
            if words is None:
                return None
            held = [tirx.Var(f"tilelab_word{j}", "uint32") for j in range(len(words))]
            stores = _store_words(call, buffers, held)
            if stores is None:
                return None
            used.add(str(value.op.name))
            return tirx.SeqStmt([*(tirx.Bind(v, w) for v, w in zip(held, words)), stores])
        return None

    def post(node: Any) -> Any:
        if isinstance(node, tirx.Bind):
            return bound(node)
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            op = str(getattr(node.value.op, "name", ""))
            if op in _STORES_BY_HAND and len(node.value.args) > 1 and node.value.args[1].dtype.lanes > 1:
                lowered = wide_store(node.value)
                if lowered is not None:
                    used.add(op)
                return lowered
            entry = INTRINSICS.get(op)
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

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.Call", "tirx.Evaluate", "tirx.Bind"])
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
    entry = INTRINSICS.get(op)
    if entry is not None and entry.forms:
        detail = (f"TileLang's C back end has no implementation of it, and the CPU path's table of intrinsics "
                  f"(tilelab's intrinsics rule) gives it its meaning {entry.forms}; this use is another")
    else:
        detail = ("TileLang's C back end has no implementation of it and the CPU path's table of intrinsics (tilelab's "
                  "intrinsics rule) does not give it a meaning")
    return EmulationRefused(name, f"the TileLang intrinsic {op}", detail, filename, line, text)
