"""The intrinsics rule of the CPU path: TileLang intrinsics that its ``c`` back end does not
implement, each given its meaning in plain TIR by
one entry of :data:`INTRINSICS`, written from TileLang's own definition of the op (its Python
docstring, its CUDA template). An intrinsic that is neither here nor known to the ``c`` back end
is refused by name (:func:`refused_intrinsic`), with the kernel's line that calls it.

Entries whose meaning needs C of its own (the IEEE operations with a rounding mode, curand's
Philox4_32_10, MRG32k3a and XORWOW generators behind ``T.rng_*``) call functions of :data:`RUNTIME_C`, which the launch
side includes in every CPU-path kernel. A store of a pair or vector whose lanes TileLang's C cannot
build (``T.fma2``, ``T.abs2``, a load by hand reinterpreted as float lanes) is stored lane by lane.
Left refused, by name: the packed max2/min2, ``T.rng_rand_float(64, "normal")`` and the
normals of the XORWOW/MRG32k3a generators, cluster operations, and ``T.sync_grid`` (its own refusal: the
blocks run one after another)."""

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


def _op_bits(call: Any) -> int:
    """The width in bits a load or store by hand names (``tl.stg128`` -> 128)."""
    found = re.search(r"(\d+)$", str(getattr(call.op, "name", "")))
    return int(found.group(1)) if found else 0


def _store_word(call: Any, buffers: dict[Any, Any]) -> Any:
    """A 32-bit store by hand of a scalar value. A wider one is lowered with its words by
    :func:`lower_intrinsics`."""
    tirx = tilelang().tvm.tirx
    if call.args[1].dtype.lanes != 1 or _op_bits(call) != 32:  # a scalar is one word: only a 32-bit store
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


def _dp4a(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.dp4a(a, b, c)`` (TileLang's DP4A template, CUDA's __dp4a on its operands' 32-bit words): c
    plus the products of a's and b's four signed bytes, the byte of a lower address the lower byte of
    the word, the sum wrapping as 32-bit integer arithmetic does. Each operand a pointer to an element
    of a row-major buffer (TileLang's T.access_ptr of it)."""
    tirx = tilelang().tvm.tirx
    a, b = _elements(call.args[1], buffers, 32), _elements(call.args[2], buffers, 32)
    c = _pointed(call.args[3], buffers)
    if a is None or b is None or c is None or any(str(x.dtype) != "int8" for x in [*a, *b]) \
            or str(c[0].dtype) != "int32":
        return None
    accumulator = _element(*c)
    total: Any = tirx.Cast("int64", accumulator)
    for x, y in zip(a, b):
        total = total + tirx.Cast("int64", x) * tirx.Cast("int64", y)
    wrapped = tirx.Cast("int32", tirx.Cast("uint32", tirx.bitwise_and(total, tirx.const(0xFFFFFFFF, "int64"))))
    return tirx.BufferStore(c[0], wrapped, list(accumulator.indices))


_POINTERS = ("through a pointer to an element (T.access_ptr, or a region or element of a buffer) of a row-major "
             "buffer of 8-, 16-, 32- or 64-bit elements")
_WIDE = ("a value wider than 32 bits is a vector of 32-bit words, which TileLang's C cannot build: it is given its "
         "meaning where it is bound or passed to a store by hand that stores it, or reinterpreted as a vector of "
         "32-bit lanes that a store takes (Y[i:i + 2] = T.reinterpret(T.ldg64(X[i:i + 2]), T.float32x2)), and "
         "nowhere else")


_PAIR_STORED = ("where a store takes its pair (D[i:i + 2] = T.fma2(A[i:i + 2], ...)), lane by lane: TileLang's C "
                "cannot build a pair from two lanes' values")


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
    Intrinsic("DP4A", "T.dp4a(a, b, c): c += the dot product of the four signed bytes at a and at b, wrapping as "
              "an int32 (TileLang's DP4A template: CUDA's __dp4a of the 32-bit words there)", _dp4a,
              "with int8 operands and an int32 accumulator, each " + _POINTERS.replace("through ", "")),
)}
# Ops TileLang calls as external functions (T.call_extern of the name): the entry is keyed by that name.
EXTERNS = ("DP4A",)


_LOADS_BY_HAND = (*(f"tl.ldg{bits}" for bits in (32, 64, 128, 256)), *(f"tl.lds{bits}" for bits in (32, 64, 128)))
_STORES_BY_HAND = (*(f"tl.stg{bits}" for bits in (32, 64, 128, 256)), *(f"tl.sts{bits}" for bits in (32, 64, 128)))
# The ops whose CPU form is a statement (the call is evaluated for its effect)
STATEMENTS = ("tl.tileop.cumsum", "DP4A", "tl.device_assert", "tl.device_assert_with_msg", "tl.ptx_cp_async",
              *_STORES_BY_HAND)


def _called(call: Any) -> str:
    """The op a call names: its op's name, or for an external function of :data:`EXTERNS` its name."""
    tirx = tilelang().tvm.tirx
    op = str(getattr(call.op, "name", ""))
    if op == "tirx.call_extern" and call.args and isinstance(call.args[0], tirx.StringImm) \
            and str(call.args[0].value) in EXTERNS:
        return str(call.args[0].value)
    return op


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
    vector_binds: dict[Any, Any] = {}  # a vector of indices bound to a variable, for the lanewise stores
    tirx.stmt_functor.post_order_visit(func.body, lambda n: vector_binds.__setitem__(n.var, n.value)
                                       if isinstance(n, tirx.Bind) and n.var.dtype.lanes > 1
                                       and isinstance(n.value, (tirx.Ramp, tirx.Broadcast)) else None)
    buffers[_VECTOR_BINDS] = vector_binds
    generators: set[str] = set()  # the curand state types the kernel's T.rng_init calls name
    tirx.stmt_functor.post_order_visit(func.body, lambda n: generators.add(str(getattr(n.args[3], "value", "")))
                                       if isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) == "tl.rng_init"
                                       and len(n.args) > 3 else None)
    buffers[_GENERATOR] = generators
    split_body = _split_vector_locals(func.body, buffers, used)  # vector locals held as their lanes

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
        if isinstance(value, tirx.Var) and value in word_vars:  # the store's width must be the load's
            bound_words = word_vars[value]
            return _store_words(call, buffers, bound_words) if 32 * len(bound_words) == _op_bits(call) else None
        if wide_load(value):
            words = _load_words(value, buffers)
            if words is None or 32 * len(words) != _op_bits(call):
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
        if isinstance(node, tirx.BufferStore):
            return _lanewise(node, buffers, used)
        if isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            op = _called(node.value)
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

    body = tirx.stmt_functor.ir_transform(split_body, None, post, ["tirx.Call", "tirx.Evaluate", "tirx.Bind",
                                                                  "tirx.BufferStore"])
    if vector_binds and used:  # a vector of indices no statement uses any more (its stores went lane by lane)
        body = _without_unused_binds(body, vector_binds)
    if RNG_STATE_NAME in buffers:  # T.rng_*: each thread's generator state, a buffer of the block
        body = _with_rng_state(body, buffers[RNG_STATE_NAME])
    return (func.with_body(body) if used else func), used


_DRAWS = ("tl.rng_rand", "tl.rng_rand_float")


def _threads_of(func: Any) -> int:
    """The threads of a block of ``func``: the product of T.Kernel's ``threads`` (the block
    annotation ``tl.launch_threads``), 0 when one is not a number, 1 when none is given."""
    tirx = tilelang().tvm.tirx
    counts: list[int] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.SBlock) and "tl.launch_threads" in node.annotations:
            count = 1
            for extent in node.annotations["tl.launch_threads"]:
                count *= int(extent) if isinstance(extent, tirx.IntImm | int) else 0
            counts.append(count)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return max(counts, default=1) if 0 not in counts else 0


def refused_draws(func: Any, name: str) -> EmulationRefused | None:
    """A random draw (``T.rng_rand``, ``T.rng_rand_float``) inside a ``T.Parallel`` loop, refused with
    its line: each GPU thread draws from its own generator state, and which thread draws for which
    element is the loop's layout, decided by the compiler; the CPU runs the loop as one, so its
    numbers would not be the GPU's. A draw outside such a loop (each thread's own code) runs, and so
    does one in a block of one thread (which draws every element, in the loop's order)."""
    tirx = tilelang().tvm.tirx
    found: list[str] = []

    def visit(node: Any) -> None:
        if found or not isinstance(node, tirx.For) or node.kind != tirx.ForKind.PARALLEL:
            return

        def inner(n: Any) -> None:
            if isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _DRAWS:
                found.append(str(n.op.name))

        tirx.stmt_functor.post_order_visit(node.body, inner)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    if not found or _threads_of(func) == 1:  # one thread draws every element, in the loop's order
        return None
    short = found[0].split(".")[-1]
    filename, start, lines = _source_lines(func)
    line, text = 0, ""
    for i, source in enumerate(lines):
        if re.search(rf"\bT\.{re.escape(short)}\b", source.split("#", 1)[0]):
            line, text = start + i, source
            break
    return EmulationRefused(
        name, f"a random draw (T.{short}) inside a T.Parallel loop",
        "each GPU thread draws from its own generator state, and which thread draws for which element of the "
        "loop is the layout the compiler chooses, so the CPU cannot give the GPU's numbers; draw in each "
        "thread's own code (t = T.get_thread_binding(), then T.rng_rand() outside T.Parallel), which runs",
        filename, line, text)


_UNRESOLVED = re.compile(r'Unresolved call ir\.Op\(.*?name="([\w.]+)"')
_UNDEFINED_EXTERN = re.compile(r"undefined symbol: (" + "|".join(EXTERNS) + r")\b")


def refused_intrinsic(func: Any, name: str, error: BaseException) -> EmulationRefused | None:
    """TileLang's "Unresolved call" of an intrinsic its ``c`` back end lacks (and this rule too),
    as the refusal that names it and the kernel's line calling it; None for any other error."""
    found = _UNRESOLVED.search(str(error)) or _UNDEFINED_EXTERN.search(str(error))
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


# ------------------------------------------------------------------------------------------
# Math, IEEE rounding modes, packed pairs, random numbers (each entry from TileLang's definition:
# tilelang/language/math_intrinsics.py, tilelang/cuda/language/{math,random}.py, and the CUDA
# functions its code generator calls for them)
# ------------------------------------------------------------------------------------------

IEEE_FUNCTION = {"float32": "tilelab_emu_ieee_f32", "float64": "tilelab_emu_ieee_f64"}  # (op, a, b, c, mode)
IEEE_OPS = {"tl.ieee_add": 0, "tl.ieee_sub": 1, "tl.ieee_mul": 2, "tl.ieee_fmaf": 3, "tl.ieee_frcp": 4,
            "tl.ieee_fsqrt": 5, "tl.ieee_frsqrt": 6, "tl.ieee_fdiv": 7}
ROUNDING_MODES = {"rn": 0, "rz": 1, "ru": 2, "rd": 3}  # PTX's names: to nearest even, to zero, up, down
RNG_INIT_FUNCTION = "tilelab_emu_philox_init"  # (uint32* state, uint64 seed, uint64 subsequence, uint64 offset)
RNG_NEXT_FUNCTION = "tilelab_emu_philox_next"  # uint32 (uint32* state, int32 site): curand(&state)
RNG_UNIFORM_FUNCTION = "tilelab_emu_philox_uniform"  # float (uint32* state, int32 site): curand_uniform(&state)
RNG_UNIFORM_DOUBLE_FUNCTION = "tilelab_emu_philox_uniform_double"  # double (uint32* state, int32 site)
RNG_NORMAL_FUNCTION = "tilelab_emu_philox_normal"  # float (uint32* state, int32 site): curand_normal(&state)
RNG_STATE_WORDS = 12  # the generator's words (Philox: key 2, counter 4, the next word's place), a float normal
# kept (flag, bits: words 7-8), a double normal kept (flag, bits: words 9-11)
RNG_STATE_NAME = "tilelab_rng_state"
# curand's generators T.rng_init names, each one's functions of the runtime (a draw's kind absent: refused)
GENERATORS: dict[str, dict[str, str]] = {
    "curandStatePhilox4_32_10_t": {"init": RNG_INIT_FUNCTION, "next": RNG_NEXT_FUNCTION,
                                   "uniform": RNG_UNIFORM_FUNCTION, "uniform_double": RNG_UNIFORM_DOUBLE_FUNCTION,
                                   "normal": RNG_NORMAL_FUNCTION},
    "curandStateMRG32k3a_t": {"init": "tilelab_emu_mrg_init", "next": "tilelab_emu_mrg_next",
                              "uniform": "tilelab_emu_mrg_uniform", "uniform_double": "tilelab_emu_mrg_uniform_double",
                              "normal": "tilelab_emu_mrg_normal", "normal_double": "tilelab_emu_mrg_normal_double"},
    "curandStateXORWOW_t": {"init": "tilelab_emu_xorwow_init", "next": "tilelab_emu_xorwow_next",
                            "uniform": "tilelab_emu_xorwow_uniform",
                            "uniform_double": "tilelab_emu_xorwow_uniform_double",
                            "normal": "tilelab_emu_xorwow_normal"},
}
_GENERATOR = "tilelab_rng_generator"  # the key, among the lowering's buffers, of the kernel's one generator
FNS_FUNCTION = "tilelab_emu_fns"  # uint32 (uint32 mask, uint32 base, int32 offset)
FMA_TO_ODD_FUNCTION = "tilelab_emu_fma_to_odd"  # float (float a, float b, float c): rounded to odd

# The C the entries below call: part of the header every CPU-path kernel is built with
# (tilelab.launch._emulate), so each call is an inline function of the kernel's own code.
RUNTIME_C = r"""
#include <fenv.h>
/* The intrinsics rule's IEEE operations with a rounding mode (T.ieee_add ... T.ieee_fdiv: CUDA's
   __fadd_rd and its kin): the C library's rounding mode set around the one operation, its operands
   read and its result written through volatile so that the compiler computes it in between; every
   basic operation, fma and sqrt of IEEE 754 rounds in the mode in force. op: add, sub, mul, fma, rcp,
   sqrt, rsqrt, div; mode: to nearest even, to zero, up, down. */
static inline int tilelab_emu_fe_mode(int64_t mode) {
  return mode == 1 ? FE_TOWARDZERO : mode == 2 ? FE_UPWARD : mode == 3 ? FE_DOWNWARD : FE_TONEAREST;
}
/* The sign of m*m*x - 1, exactly: m*m is exact in double (m has at most 25 significant bits), and
   fma gives the rounding error of its product with x, so p + e is m*m*x exactly. */
static inline int tilelab_emu_sign_m2x_minus_1(double m, float x) {
  double m2 = m * m, p = m2 * (double)x, e = fma(m2, (double)x, -p);
  if (p != 1.0) return p > 1.0 ? 1 : -1;
  return e > 0 ? 1 : (e < 0 ? -1 : 0);
}
/* 1/sqrt(x) rounded once to nearest float (CUDA's __frsqrt_rn): the double estimate is within one
   float ulp of it; the float f is the right one when 1/sqrt(x) lies between the midpoints around f,
   that is when lo*lo*x >= 1 >= hi*hi*x (no float's 1/sqrt is a midpoint: no ties). */
static inline float tilelab_emu_rsqrt_rn(float x) {
  float f = (float)(1.0 / sqrt((double)x));
  if (!(x > 0.0f) || isinf(x) || !isfinite(f) || f == 0.0f) return f;
  for (int k = 0; k < 2; k++) {
    float up = nextafterf(f, INFINITY), down = nextafterf(f, 0.0f);
    if (tilelab_emu_sign_m2x_minus_1(((double)f + (double)up) / 2, x) < 0) f = up;
    else if (tilelab_emu_sign_m2x_minus_1(((double)f + (double)down) / 2, x) > 0) f = down;
    else break;
  }
  return f;
}
extern "C" {
"""

# The IEEE operations with a rounding mode, one C function a float type, written once (float32's
# T.ieee_frsqrt, which float64 does not have, goes to the correctly rounded reciprocal square root).
_IEEE_C = r"""
static inline {t} tilelab_emu_ieee_{suffix}(int64_t op, {t} a, {t} b, {t} c, int64_t mode) {{{rsqrt}
  int saved = fegetround();
  fesetround(tilelab_emu_fe_mode(mode));
  volatile {t} va = a, vb = b, vc = c;
  {t} x = va, y = vb, z = vc, r;
  switch (op) {{
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = {fma}(x, y, z); break;
    case 4: r = {one} / x; break;
    case 5: r = {sqrt}(x); break;
    default: r = x / y; break;
  }}
  volatile {t} vr = r;
  fesetround(saved);
  return vr;
}}
"""
RUNTIME_C += _IEEE_C.format(t="float", suffix="f32", fma="fmaf", sqrt="sqrtf", one="1.0f",
                            rsqrt="\n  if (op == 6) return tilelab_emu_rsqrt_rn(a);")
RUNTIME_C += _IEEE_C.format(t="double", suffix="f64", fma="fma", sqrt="sqrt", one="1.0", rsqrt="")
RUNTIME_C += r"""
/* T.__fns(mask, base, offset): PTX's fns.b32 (CUDA's __fns): the place of the |offset|-th set bit of
   mask counting from bit base (base itself included) toward the high bits for a positive offset,
   toward the low bits for a negative one; for offset 0, base when its bit is set; 0xffffffff when
   there is no such bit. */
static inline uint32_t tilelab_emu_fns(uint32_t mask, uint32_t base, int32_t offset) {
  if (offset == 0) return (base < 32 && ((mask >> base) & 1u)) ? base : 0xffffffffu;
  int32_t step = offset > 0 ? 1 : -1;
  int64_t count = offset > 0 ? (int64_t)offset - 1 : -(int64_t)offset - 1;
  for (int32_t pos = (int32_t)base; pos >= 0 && pos < 32; pos += step) {
    if ((mask >> pos) & 1u) {
      if (count == 0) return (uint32_t)pos;
      count--;
    }
  }
  return 0xffffffffu;
}
/* T.fma2 of a float16 or bfloat16 pair, one lane: a * b + c (float32 operands that hold the narrow
   values) rounded to float32 toward zero, its last bit set when the result is inexact (rounding to
   odd): the store into the narrow type then rounds it to nearest even as if from the exact value
   (float32 has more than two bits beyond either narrow type's), so the lane is rounded once, as
   __hfma2 rounds it. */
static inline float tilelab_emu_fma_to_odd(float a, float b, float c) {
  int saved = fegetround();
  fesetround(FE_TOWARDZERO);
  feclearexcept(FE_INEXACT);
  volatile float va = a, vb = b, vc = c;
  volatile float r = fmaf(va, vb, vc);
  int inexact = fetestexcept(FE_INEXACT);
  fesetround(saved);
  float out = r;
  if (inexact && isfinite(out)) {
    uint32_t bits;
    memcpy(&bits, &out, sizeof bits);
    bits |= 1u;
    memcpy(&out, &bits, sizeof out);
  }
  return out;
}
/* T.rng_init / T.rng_rand / T.rng_rand_float: curand's Philox4_32_10 generator (Salmon et al.,
   "Parallel random numbers: as easy as 1, 2, 3", 2011), as curand_init and curand define its
   stream. state: key[2] (the seed's low and high words), ctr[4] (a 128-bit counter, ctr[0] lowest),
   the place of the next word in the counter's block of four. */
static inline void tilelab_emu_philox_block(const uint32_t* state, uint32_t* out) {
  uint32_t k0 = state[0], k1 = state[1], c0 = state[2], c1 = state[3], c2 = state[4], c3 = state[5];
  for (int round = 0; round < 10; round++) {
    if (round) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1,
             n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
/* The counter plus n, n added to its low 64 bits (a skip of n blocks) or its high 64 bits (of n
   subsequences of 2^64 blocks), with the carry as curand propagates it. */
static inline void tilelab_emu_philox_add(uint32_t* state, uint64_t n, int high) {
  uint32_t* c = state + 2 + (high ? 2 : 0);
  uint32_t lo = (uint32_t)n, hi = (uint32_t)(n >> 32);
  c[0] += lo;
  if (c[0] < lo) hi++;
  c[1] += hi;
  if (!high && c[1] < hi && ++state[4] == 0) ++state[5];
}
static inline int32_t tilelab_emu_philox_init(uint32_t* state, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  state[0] = (uint32_t)seed; state[1] = (uint32_t)(seed >> 32);
  state[2] = state[3] = state[4] = state[5] = 0; state[6] = 0; state[7] = 0; state[8] = 0;
  state[9] = state[10] = state[11] = 0;
  tilelab_emu_philox_add(state, subsequence, 1);
  state[6] = (uint32_t)(offset & 3);  /* skipahead(offset): whole blocks, then the place in one */
  tilelab_emu_philox_add(state, offset / 4, 0);
  return 0;
}
static inline uint32_t tilelab_emu_philox_word(uint32_t* state) {
  uint32_t out[4];
  tilelab_emu_philox_block(state, out);
  uint32_t word = out[state[6] & 3];
  if (++state[6] == 4) {  /* the block used up: the next counter */
    state[6] = 0;
    if (++state[2] == 0 && ++state[3] == 0 && ++state[4] == 0) ++state[5];
  }
  return word;
}
/* The draws the kernel makes: ``site`` numbers the draw's place in the kernel (unused here). Two draws
   of one statement are two calls with the same state; a C code generator that names a repeated
   expression once would take them for one value, and the site keeps their texts apart. */
static inline uint32_t tilelab_emu_philox_next(uint32_t* state, int32_t site) {
  (void)site;
  return tilelab_emu_philox_word(state);
}
/* curand_uniform: a float in (0, 1], x * 2^-32 + 2^-33 (the product exact, the sum rounded) */
static inline float tilelab_emu_philox_uniform(uint32_t* state, int32_t site) {
  (void)site;
  return (float)tilelab_emu_philox_word(state) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}
/* curand_normal: Box-Muller on two words, u = x * 2^-32 + 2^-33, v = y * 2pi 2^-32 + pi 2^-32 (fused,
   as the GPU contracts it), sqrt(-2 log u) times sin v returned and times cos v kept for the next
   draw. The GPU computes log, sin and cos with its fast approximations: the CPU's are exact, so a
   normal draw agrees within their error, not bit for bit. */
static inline float tilelab_emu_philox_normal(uint32_t* state, int32_t site) {
  (void)site;
  if (state[7]) {
    state[7] = 0;
    float kept;
    memcpy(&kept, &state[8], sizeof kept);
    return kept;
  }
  uint32_t x = tilelab_emu_philox_word(state), y = tilelab_emu_philox_word(state);
  const float two_pi_scaled = 6.2831855f * 2.3283064365386963e-10f;
  float u = (float)x * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
  float v = fmaf((float)y, two_pi_scaled, two_pi_scaled / 2.0f);
  float s = sqrtf(-2.0f * logf(u));
  float second = s * cosf(v);
  memcpy(&state[8], &second, sizeof second);
  state[7] = 1;
  return s * sinf(v);
}
/* curand_uniform_double of Philox4_32_10: one word, x * 2^-32 + 2^-32 (curand's Philox takes one word
   where XORWOW takes two) */
static inline double tilelab_emu_philox_uniform_double(uint32_t* state, int32_t site) {
  (void)site;
  uint32_t x = tilelab_emu_philox_word(state);
  return (double)x * 2.3283064365386963e-10 + 2.3283064365386963e-10;
}
/* T.rng_init(..., generator="curandStateMRG32k3a_t"): L'Ecuyer's MRG32k3a as curand seeds and steps it.
   state: s1[3] (words 0-2, modulo m1), s2[3] (words 3-5, modulo m2). A step: p1 = a12 s1[1] - a13n s1[0]
   (mod m1), p2 = a21 s2[2] - a23n s2[0] (mod m2), each component shifted in; the output is p1 - p2 in
   (0, m1]. curand_init: every word 12345, times the seed's words salted (x1 = low ^ 0x55555555,
   x2 = high ^ 0xAAAAAAAA) modulo m when the seed is not 0, then 2^76 steps per subsequence (the
   subsequence masked to 51 bits) and offset steps, as powers of the step's matrices. */
static const uint64_t TILELAB_MRG_M1 = 4294967087ull, TILELAB_MRG_M2 = 4294944443ull;
static inline void tilelab_emu_mrg_matmul(const uint64_t* a, const uint64_t* b, uint64_t m, uint64_t* out) {
  uint64_t r[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      uint64_t acc = 0;
      for (int k = 0; k < 3; k++) acc = (acc + a[3 * i + k] * b[3 * k + j] % m) % m;
      r[3 * i + j] = acc;
    }
  memcpy(out, r, sizeof r);
}
/* s = (step^(2^squarings))^n s, modulo m: the step's matrix squared, then applied by n's bits */
static inline void tilelab_emu_mrg_skip(const uint64_t* step, int squarings, uint64_t n, uint64_t m, uint32_t* s) {
  uint64_t p[9];
  memcpy(p, step, sizeof p);
  for (int i = 0; i < squarings; i++) tilelab_emu_mrg_matmul(p, p, m, p);
  while (n) {
    if (n & 1) {
      uint64_t v[3];
      for (int i = 0; i < 3; i++)
        v[i] = (p[3 * i] * s[0] % m + p[3 * i + 1] * s[1] % m + p[3 * i + 2] * s[2] % m) % m;
      for (int i = 0; i < 3; i++) s[i] = (uint32_t)v[i];
    }
    n >>= 1;
    if (n) tilelab_emu_mrg_matmul(p, p, m, p);
  }
}
static inline int32_t tilelab_emu_mrg_init(uint32_t* state, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  const uint64_t a1[9] = {0, 1, 0, 0, 0, 1, TILELAB_MRG_M1 - 810728u, 1403580u, 0};
  const uint64_t a2[9] = {0, 1, 0, 0, 0, 1, TILELAB_MRG_M2 - 1370589u, 0, 527612u};
  for (int i = 0; i < 12; i++) state[i] = i < 6 ? 12345u : 0u;
  if (seed != 0) {
    uint64_t x1 = (uint32_t)seed ^ 0x55555555u, x2 = (uint32_t)(seed >> 32) ^ 0xAAAAAAAAu;
    state[0] = (uint32_t)(x1 * 12345u % TILELAB_MRG_M1);
    state[1] = (uint32_t)(x2 * 12345u % TILELAB_MRG_M1);
    state[2] = (uint32_t)(x1 * 12345u % TILELAB_MRG_M1);
    state[3] = (uint32_t)(x2 * 12345u % TILELAB_MRG_M2);
    state[4] = (uint32_t)(x1 * 12345u % TILELAB_MRG_M2);
    state[5] = (uint32_t)(x2 * 12345u % TILELAB_MRG_M2);
  }
  subsequence &= (1ull << 51) - 1;
  tilelab_emu_mrg_skip(a1, 76, subsequence, TILELAB_MRG_M1, state);
  tilelab_emu_mrg_skip(a2, 76, subsequence, TILELAB_MRG_M2, state + 3);
  tilelab_emu_mrg_skip(a1, 0, offset, TILELAB_MRG_M1, state);
  tilelab_emu_mrg_skip(a2, 0, offset, TILELAB_MRG_M2, state + 3);
  return 0;
}
static inline uint32_t tilelab_emu_mrg_step(uint32_t* state) {
  uint64_t p1 = (1403580ull * state[1] + 810728ull * (TILELAB_MRG_M1 - state[0])) % TILELAB_MRG_M1;
  uint64_t p2 = (527612ull * state[5] + 1370589ull * (TILELAB_MRG_M2 - state[3])) % TILELAB_MRG_M2;
  state[0] = state[1]; state[1] = state[2]; state[2] = (uint32_t)p1;
  state[3] = state[4]; state[4] = state[5]; state[5] = (uint32_t)p2;
  return p1 <= p2 ? (uint32_t)(p1 - p2 + TILELAB_MRG_M1) : (uint32_t)(p1 - p2);
}
/* curand: the output in (0, m1] times 1.000000048662 (about 2^32 / m1), truncated */
static inline uint32_t tilelab_emu_mrg_next(uint32_t* state, int32_t site) {
  (void)site;
  return (uint32_t)((double)tilelab_emu_mrg_step(state) * 1.000000048662);
}
/* curand_uniform(_double): the output times 2.3283065498378288e-10 (1 / m1), rounded to float for the float */
static inline float tilelab_emu_mrg_uniform(uint32_t* state, int32_t site) {
  (void)site;
  return (float)((double)tilelab_emu_mrg_step(state) * 2.3283065498378288e-10);
}
static inline double tilelab_emu_mrg_uniform_double(uint32_t* state, int32_t site) {
  (void)site;
  return (double)tilelab_emu_mrg_step(state) * 2.3283065498378288e-10;
}
/* T.rng_init(..., generator="curandStateXORWOW_t"): Marsaglia's xorwow as curand seeds and steps it.
   state: v[5] (words 0-4), the Weyl counter d (word 5). A step: t = v0 ^ (v0 >> 2), v shifted down,
   v4 = (v4 ^ (v4 << 4)) ^ (t ^ (t << 1)), d += 362437, the output v4 + d. curand_init: the seed's words
   salted and mixed into v and d, then 2^67 steps per subsequence and offset steps of v (as powers of
   the step's matrix over GF(2), a row per bit of v: the image of that bit), d += 362437 * offset. */
#define TILELAB_XORWOW_POWERS 131  /* step^(2^k): k < 64 for offsets, 67 + k for subsequences */
static uint32_t tilelab_emu_xorwow_pow[TILELAB_XORWOW_POWERS][160][5];
static int tilelab_emu_xorwow_known = 0;
static inline void tilelab_emu_xorwow_apply(const uint32_t (*m)[5], uint32_t* v) {
  uint32_t r[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 160; i++)
    if ((v[i / 32] >> (i % 32)) & 1u)
      for (int k = 0; k < 5; k++) r[k] ^= m[i][k];
  memcpy(v, r, sizeof r);
}
static inline void tilelab_emu_xorwow_linear_step(uint32_t* v) {
  uint32_t t = v[0] ^ (v[0] >> 2);
  v[0] = v[1]; v[1] = v[2]; v[2] = v[3]; v[3] = v[4];
  v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
}
static inline void tilelab_emu_xorwow_powers(void) {
  if (tilelab_emu_xorwow_known) return;
  for (int i = 0; i < 160; i++) {
    uint32_t v[5] = {0, 0, 0, 0, 0};
    v[i / 32] = 1u << (i % 32);
    tilelab_emu_xorwow_linear_step(v);
    memcpy(tilelab_emu_xorwow_pow[0][i], v, sizeof v);
  }
  for (int k = 1; k < TILELAB_XORWOW_POWERS; k++)
    for (int i = 0; i < 160; i++) {
      uint32_t v[5];
      memcpy(v, tilelab_emu_xorwow_pow[k - 1][i], sizeof v);
      tilelab_emu_xorwow_apply(tilelab_emu_xorwow_pow[k - 1], v);
      memcpy(tilelab_emu_xorwow_pow[k][i], v, sizeof v);
    }
  tilelab_emu_xorwow_known = 1;
}
static inline int32_t tilelab_emu_xorwow_init(uint32_t* state, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  uint32_t s0 = (uint32_t)seed ^ 0xaad26b49u, s1 = (uint32_t)(seed >> 32) ^ 0xf7dcefddu;
  uint32_t t0 = 1099087573u * s0, t1 = 2591861531u * s1;
  for (int i = 0; i < 12; i++) state[i] = 0;
  state[5] = 6615241u + t1 + t0;
  state[0] = 123456789u + t0; state[1] = 362436069u ^ t0; state[2] = 521288629u + t1;
  state[3] = 88675123u ^ t1; state[4] = 5783321u + t0;
  tilelab_emu_xorwow_powers();
  for (int k = 0; k < 64; k++) {
    if ((subsequence >> k) & 1u) tilelab_emu_xorwow_apply(tilelab_emu_xorwow_pow[67 + k], state);
  }
  for (int k = 0; k < 64; k++) {
    if ((offset >> k) & 1u) tilelab_emu_xorwow_apply(tilelab_emu_xorwow_pow[k], state);
  }
  state[5] += 362437u * (uint32_t)offset;
  return 0;
}
static inline uint32_t tilelab_emu_xorwow_next(uint32_t* state, int32_t site) {
  (void)site;
  tilelab_emu_xorwow_linear_step(state);
  state[5] += 362437u;
  return state[4] + state[5];
}
/* curand_normal of MRG32k3a: Box-Muller on two uniform floats, x and y * 2pi (float), sqrt(-2 log x)
   times sin y returned, times cos y kept for the next draw (the GPU's fast sine and cosine: within their
   error); curand_normal_double: on two uniform doubles, x and 2y, sin and cos of pi * 2y (sincospi). */
static inline float tilelab_emu_mrg_normal(uint32_t* state, int32_t site) {
  if (state[7]) {
    state[7] = 0;
    float kept;
    memcpy(&kept, &state[8], sizeof kept);
    return kept;
  }
  float x = tilelab_emu_mrg_uniform(state, site), y = tilelab_emu_mrg_uniform(state, site) * 6.2831853071795864f;
  float s = sqrtf(-2.0f * logf(x)), second = s * cosf(y);
  memcpy(&state[8], &second, sizeof second);
  state[7] = 1;
  return s * sinf(y);
}
static inline double tilelab_emu_mrg_normal_double(uint32_t* state, int32_t site) {
  if (state[9]) {
    state[9] = 0;
    double kept;
    memcpy(&kept, &state[10], sizeof kept);
    return kept;
  }
  double x = tilelab_emu_mrg_uniform_double(state, site), y = tilelab_emu_mrg_uniform_double(state, site) * 2.0;
  double s = sqrt(-2.0 * log(x)), second = s * cos(y * 3.1415926535897931);
  memcpy(&state[10], &second, sizeof second);
  state[9] = 1;
  return s * sin(y * 3.1415926535897931);
}
/* curand_uniform: x * 2^-32 + 2^-33; curand_uniform_double: two words, x ^ (y << 21) of 53 bits */
static inline float tilelab_emu_xorwow_uniform(uint32_t* state, int32_t site) {
  return (float)tilelab_emu_xorwow_next(state, site) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}
static inline double tilelab_emu_xorwow_uniform_double(uint32_t* state, int32_t site) {
  uint64_t x = tilelab_emu_xorwow_next(state, site), y = tilelab_emu_xorwow_next(state, site);
  uint64_t z = x ^ (y << 21);
  return (double)z * 1.1102230246251565e-16 + 5.551115123125783e-17;
}
/* curand_normal of XORWOW: Philox's Box-Muller on two words (the same template of curand) */
static inline float tilelab_emu_xorwow_normal(uint32_t* state, int32_t site) {
  if (state[7]) {
    state[7] = 0;
    float kept;
    memcpy(&kept, &state[8], sizeof kept);
    return kept;
  }
  uint32_t x = tilelab_emu_xorwow_next(state, site), y = tilelab_emu_xorwow_next(state, site);
  const float two_pi_scaled = 6.2831855f * 2.3283064365386963e-10f;
  float u = (float)x * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
  float v = fmaf((float)y, two_pi_scaled, two_pi_scaled / 2.0f);
  float s = sqrtf(-2.0f * logf(u)), second = s * cosf(v);
  memcpy(&state[8], &second, sizeof second);
  state[7] = 1;
  return s * sinf(v);
}
}
"""


def _fast_math(c32: str, c64: str) -> Callable[[Any, dict[Any, Any]], Any]:
    """CUDA's fast-math function (``__expf`` ...: an approximation within its documented error)
    as the C library's correctly rounded one of the same meaning."""
    return _float_extern(c32, c64)


def _exp10(call: Any, buffers: dict[Any, Any]) -> Any:
    """10**x: the C library's pow of 10 (C has no standard exp10)."""
    tirx = tilelang().tvm.tirx
    x = call.args[0]
    wide = str(x.dtype) == "float64"
    return tirx.call_pure_extern(call.dtype, "pow" if wide else "powf", tirx.const(10.0, x.dtype), x)


def _fmod(call: Any, buffers: dict[Any, Any]) -> Any:
    tirx = tilelang().tvm.tirx
    x, y = call.args[0], call.args[1]
    return tirx.call_pure_extern(call.dtype, "fmod" if str(x.dtype) == "float64" else "fmodf", x, y)


def _bit_count(kind: str) -> Callable[[Any, dict[Any, Any]], Any]:
    """``T.clz`` (leading zero bits; all the bits for 0, as CUDA's __clz) and ``T.popcount``
    (set bits), by GCC's builtins on the value's unsigned bits."""
    def lower(call: Any, buffers: dict[Any, Any]) -> Any:
        tirx = tilelang().tvm.tirx
        x = call.args[0]
        bits = x.dtype.bits
        if bits not in (32, 64) or x.dtype.lanes != 1 or "int" not in str(x.dtype):
            return None
        wide = "ll" if bits == 64 else ""
        unsigned = tirx.Cast(f"uint{bits}", x)
        if kind == "popcount":
            return tirx.Cast(call.dtype, tirx.call_pure_extern("int32", f"__builtin_popcount{wide}", unsigned))
        counted = tirx.call_pure_extern("int32", f"__builtin_clz{wide}", unsigned)
        return tirx.Cast(call.dtype, tirx.if_then_else(tirx.EQ(x, tirx.const(0, x.dtype)),
                                                        tirx.const(bits, "int32"), counted))
    return lower


def _isfinite(call: Any, buffers: dict[Any, Any]) -> Any:
    """Neither NaN nor infinite: the exponent field of x's bits not all ones (float32, float64;
    TVM spells its own isfinite with fabs, after this rule has run, and folds x == x to true)."""
    tirx = tilelang().tvm.tirx
    x = call.args[0]
    field = {"float32": ("uint32", 0x7F800000), "float64": ("uint64", 0x7FF0000000000000)}.get(str(x.dtype))
    if field is None:
        return None
    bits, mask = field
    exponent = tirx.bitwise_and(tirx.reinterpret(bits, x), tirx.const(mask, bits))
    return tirx.NE(exponent, tirx.const(mask, bits))


def _pow_of_int(call: Any, buffers: dict[Any, Any]) -> Any:
    """x**y for a constant integer y >= 1, as TileLang's template computes it: x multiplied by x,
    y - 1 times, from the left."""
    tirx = tilelang().tvm.tirx
    x, y = call.args[0], call.args[1]
    if not isinstance(y, tirx.IntImm) or not 1 <= int(y) <= 64:
        return None
    result = x
    for _ in range(int(y) - 1):
        result = result * x
    return result


def _fmul(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.fmul(x, y)``: x * y rounded to nearest even (CUDA's __fmul_rn): the C product."""
    return call.args[0] * call.args[1]


def _fma(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.fma(x, y, z)``: x * y + z rounded once (CUDA's __fmaf_rn): the C library's fma."""
    tirx = tilelang().tvm.tirx
    x, y, z = call.args
    if x.dtype.lanes != 1:
        return None
    return tirx.call_pure_extern(call.dtype, "fma" if str(x.dtype) == "float64" else "fmaf", x, y, z)


def _first_set(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.__ffs(x)``: the position of x's least significant set bit, counted from 1; 0 for 0
    (CUDA's __ffs / __ffsll; GCC's __builtin_ffs is the same function)."""
    tirx = tilelang().tvm.tirx
    x = call.args[0]
    if x.dtype.bits not in (32, 64):
        return None
    name = "__builtin_ffsll" if x.dtype.bits == 64 else "__builtin_ffs"
    return tirx.Cast(call.dtype, tirx.call_pure_extern("int32", name, tirx.Cast(f"int{x.dtype.bits}", x)))


def _ieee(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.ieee_add(x, y, mode)`` and its kin (CUDA's __fadd_rn, __dmul_rz ...): the operation
    rounded once in the given mode (the runtime's tilelab_emu_ieee_*: the C library's rounding mode
    around it). float32 and float64, as CUDA has them; T.ieee_frsqrt of float64 has none."""
    tirx = tilelang().tvm.tirx
    op = IEEE_OPS[str(call.op.name)]
    dtype = str(call.dtype)
    if dtype not in IEEE_FUNCTION or (op == 6 and dtype != "float32"):
        return None
    arity = {3: 3, 4: 1, 5: 1, 6: 1}.get(op, 2)
    operands = list(call.args[:arity])
    mode = "rn" if op == 6 else str(call.args[arity].value)
    operands += [tirx.const(0.0, dtype)] * (3 - arity)
    return tirx.call_pure_extern(dtype, IEEE_FUNCTION[dtype], tirx.const(op, "int64"), *operands,
                                 tirx.const(ROUNDING_MODES[mode], "int64"))


def _packed(kind: str) -> Callable[[Any, dict[Any, Any]], Any]:
    """``T.add2`` and its kin on a pair (float32x2, float16x2, bfloat16x2): the operation on each
    lane, as TileLang's CUDA template defines it per type (__fadd2_rn / make_float2(a.x + b.x, ...),
    __hadd2 ...: each lane rounded to nearest even; max/min of a NaN and a number the number)."""
    def lower(call: Any, buffers: dict[Any, Any]) -> Any:
        args = list(call.args)
        if kind == "add":
            return args[0] + args[1]
        if kind == "sub":
            return args[0] - args[1]
        if kind == "mul":
            return args[0] * args[1]
        return None  # fma2, abs2: TileLang's C makes no pair of two lanes' values (stored lane by lane: _lanewise)
    return lower


_SPLIT = "tilelab_split_vectors"  # the key, among the lowering's buffers, of vector locals held as their lanes
_VECTOR_BINDS = "tilelab_vector_binds"  # the key, among the lowering's buffers, of vectors of indices bound once
_NARROW_LANES = ("float16", "bfloat16")  # pairs of these are stored lane by lane, whatever op made them
_LANEWISE = ("tl.fma2", "tl.abs2")  # packed ops given their meaning lane by lane, where a store takes the pair


def _scalar_dtype(dtype: Any) -> str:
    return re.sub(r"x\d+$", "", str(dtype))


def _lane(e: Any, k: int, buffers: dict[Any, Any], used: set[str]) -> Any:
    """Lane ``k`` of the vector expression ``e`` as a scalar one: loads at a ramp of indices,
    broadcasts, ramps, arithmetic and casts lane by lane; ``T.fma2`` as one fma of the lane
    (float32: C's fmaf, rounded once as the GPU's fused multiply-add; float16 and bfloat16: rounded
    to odd in float32, then once to the pair's type by the store: __hfma2's single rounding);
    ``T.abs2`` as the lane's absolute value (its sign bit cleared: fabs);
    ``T.add2``/``sub2``/``mul2`` as the lane's operation; ``T.reinterpret`` of a load by hand
    (T.ldg64/128...) as the bits of its k-th 32-bit word. None for anything else."""
    tirx = tilelang().tvm.tirx
    if isinstance(e, tirx.Shuffle):  # the vectors' lanes concatenated, the k-th index picking one
        flat = [(v, j) for v in e.vectors for j in range(v.dtype.lanes)]
        index = e.indices[k]
        if not isinstance(index, tirx.IntImm) or not 0 <= int(index) < len(flat):
            return None
        vector, j = flat[int(index)]
        return _lane(vector, j, buffers, used)
    if e.dtype.lanes == 1:
        return e
    if isinstance(e, tirx.Var):  # a vector of indices bound once (idx = T.Ramp(t * 2, 1, 2)): its value's lane
        bound = buffers.get(_VECTOR_BINDS, {}).get(e)
        return None if bound is None else _lane(bound, k, buffers, used)
    if isinstance(e, tirx.Ramp):
        return e.base + e.stride * k
    if isinstance(e, tirx.Broadcast):
        return e.value
    if isinstance(e, tirx.BufferLoad):
        split = buffers.get(_SPLIT, {}).get(e.buffer)
        if split is not None and len(e.indices) == 1:  # a vector local held as its lanes
            return tirx.BufferLoad(split, [e.indices[0] * e.buffer.dtype.lanes + k])
        if e.buffer.dtype.lanes != 1:
            return None
        indices = [_lane(i, k, buffers, used) for i in e.indices]
        return None if any(i is None for i in indices) else tirx.BufferLoad(e.buffer, indices)
    if isinstance(e, tirx.Cast):
        value = _lane(e.value, k, buffers, used)
        return None if value is None else tirx.Cast(_scalar_dtype(e.dtype), value)
    if isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Min, tirx.Max)):
        a, b = _lane(e.a, k, buffers, used), _lane(e.b, k, buffers, used)
        return None if a is None or b is None else type(e)(a, b)
    if not isinstance(e, tirx.Call):
        return None
    op = str(getattr(e.op, "name", ""))
    if op == "tirx.reinterpret" and len(e.args) == 1 and isinstance(e.args[0], tirx.Call) \
            and str(getattr(e.args[0].op, "name", "")) in _LOADS_BY_HAND and e.dtype.bits == 32:
        words = _load_words(e.args[0], buffers)
        if words is None or len(words) != e.dtype.lanes:
            return None
        used.add(str(e.args[0].op.name))
        return tirx.reinterpret(_scalar_dtype(e.dtype), words[k])
    args = [_lane(a, k, buffers, used) for a in e.args]
    if any(a is None for a in args):
        return None
    scalar = _scalar_dtype(e.dtype)
    if op in ("tl.add2", "tl.sub2", "tl.mul2"):
        return {"tl.add2": tirx.Add, "tl.sub2": tirx.Sub, "tl.mul2": tirx.Mul}[op](args[0], args[1])
    if op == "tl.abs2":
        return tirx.call_pure_extern(scalar, "fabs" if scalar == "float64" else "fabsf", args[0])
    if op == "tl.fma2":
        if scalar == "float32":
            return tirx.call_pure_extern("float32", "fmaf", *args)
        if scalar in ("float16", "bfloat16"):
            return tirx.Cast(scalar, tirx.call_pure_extern("float32", FMA_TO_ODD_FUNCTION,
                                                           *(tirx.Cast("float32", a) for a in args)))
    return None


def _without_unused_binds(body: Any, binds: dict[Any, Any]) -> Any:
    """``body`` without the bindings of ``binds``' variables that nothing reads any more."""
    tirx = tilelang().tvm.tirx

    def drop(keep: set[Any]) -> Any:
        def post(n: Any) -> Any:
            if isinstance(n, tirx.Bind) and n.var in binds and n.var not in keep:
                return tirx.Evaluate(tirx.const(0, "int32"))
            return None
        return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.Bind"])

    read: set[Any] = set()  # the variables the body reads once every such binding is gone
    tirx.stmt_functor.post_order_visit(drop(set()), lambda n: read.add(n)
                                       if isinstance(n, tirx.Var) and n in binds else None)
    return drop(read)


def _split_vector_locals(body: Any, buffers: dict[Any, Any], used: set[str]) -> Any:
    """``body`` with each vector local (``T.alloc_var(T.bfloat16x2)``: a buffer of one vector type, of
    the thread's own scope) held as a buffer of its lanes (2 bfloat16), when every use of it is a
    store of a vector value whose lanes :func:`_lane` knows (``T.bfloat16x2(a, b)``) or a load a
    ``T.extract_lane`` (a Shuffle of one lane) reads: TileLang's C cannot build such a vector, and a
    lane of a narrow type is then held, rounded, as the dtypes rule holds any other; ``body`` as it is
    otherwise."""
    tirx = tilelang().tvm.tirx
    split: dict[Any, Any] = {}

    def find(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            for b in node.alloc_buffers:
                if b.dtype.lanes > 1 and b.scope() in ("local", "local.var") and len(b.shape) == 1 \
                        and isinstance(b.shape[0], tirx.IntImm):
                    split[b] = tirx.decl_buffer((int(b.shape[0]) * b.dtype.lanes,), _scalar_dtype(b.dtype),
                                                str(b.name), scope=b.scope())

    tirx.stmt_functor.post_order_visit(body, find)
    if not split:
        return body
    buffers[_SPLIT] = split
    failed: list[Any] = []

    def post(node: Any) -> Any:
        if isinstance(node, tirx.SBlock):
            if not any(b in split for b in node.alloc_buffers):
                return None
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               [split.get(b, b) for b in node.alloc_buffers], node.match_buffers, node.annotations)
        if isinstance(node, tirx.Shuffle) and node.dtype.lanes == 1:
            return _lane(node, 0, buffers, used) if any(
                isinstance(v, tirx.BufferLoad) and v.buffer in split for v in node.vectors) else None
        if isinstance(node, tirx.BufferStore) and node.buffer in split:
            lanes, stores = node.buffer.dtype.lanes, []
            for k in range(lanes):
                value = _lane(node.value, k, buffers, used)
                if value is None or len(node.indices) != 1:
                    failed.append(node)
                    return None
                stores.append(tirx.BufferStore(split[node.buffer], value, [node.indices[0] * lanes + k]))
            return tirx.SeqStmt(stores)
        return None

    out = tirx.stmt_functor.ir_transform(body, None, post, ["tirx.SBlock", "tirx.Shuffle", "tirx.BufferStore"])
    left: list[Any] = []
    tirx.stmt_functor.post_order_visit(out, lambda n: left.append(n) if isinstance(
        n, (tirx.BufferLoad, tirx.BufferStore)) and n.buffer in split else None)
    if failed or left:  # a use with no lane form: the vector is left (and TileLang's C refuses it, by name)
        del buffers[_SPLIT]
        return body
    used.add("tirx.Shuffle")
    return out


def _holds_lanewise(value: Any) -> bool:
    """Whether ``value`` holds a packed op of :data:`_LANEWISE` or a reinterpreted wide load by hand,
    or is a vector of float16 or bfloat16."""
    tirx = tilelang().tvm.tirx
    found: list[Any] = []

    def visit(n: Any) -> None:
        if isinstance(n, tirx.Call):
            op = str(getattr(n.op, "name", ""))
            if op in _LANEWISE or (op == "tirx.reinterpret" and n.args and isinstance(n.args[0], tirx.Call)
                                   and str(getattr(n.args[0].op, "name", "")) in _LOADS_BY_HAND):
                found.append(n)

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), visit)
    # a vector of a narrow float type (T.add2 of bfloat16 pairs): the CPU computes in float32 and rounds each
    # stored value, one lane at a time
    return bool(found) or _scalar_dtype(value.dtype) in _NARROW_LANES


def _lanewise(store: Any, buffers: dict[Any, Any], used: set[str]) -> Any:
    """A store of a pair or a wider vector whose lanes TileLang's C cannot build (``T.fma2``,
    ``T.abs2``, a load by hand reinterpreted as floats) as one store per lane, each of the lane's
    scalar value (:func:`_lane`); None when a part of it has no lane form (left, and refused)."""
    tirx = tilelang().tvm.tirx
    value = store.value
    if value.dtype.lanes == 1 or store.buffer.dtype.lanes != 1 or getattr(store, "predicate", None) is not None \
            or not _holds_lanewise(value):
        return None
    found: set[str] = set()
    stores = []
    for k in range(value.dtype.lanes):
        lane = _lane(value, k, buffers, found)
        indices = [_lane(i, k, buffers, found) for i in store.indices]
        if lane is None or any(i is None for i in indices):
            return None
        stores.append(tirx.BufferStore(store.buffer, lane, indices))
    calls: list[str] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), lambda n: calls.append(str(n.op.name))
                                       if isinstance(n, tirx.Call) and str(getattr(n.op, "name", "")) in _LANEWISE
                                       else None)
    used.update(found, calls)
    return tirx.SeqStmt(stores)


def _fns(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.__fns(mask, base, offset)``: the runtime's tilelab_emu_fns, PTX's fns.b32 by its
    definition (the offset-th set bit of mask from bit base; 0xffffffff when none)."""
    tirx = tilelang().tvm.tirx
    mask, base, offset = call.args
    return tirx.call_pure_extern("uint32", FNS_FUNCTION, tirx.Cast("uint32", mask), tirx.Cast("uint32", base),
                                 tirx.Cast("int32", offset))


def _ldexp(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.ldexp(x, e)``: x * 2**e, e converted to an integer as C converts it (CUDA's ldexpf takes
    an int; TileLang's C declares it with a float exponent, which the compiler rejects)."""
    tirx = tilelang().tvm.tirx
    x, e = call.args
    if str(x.dtype) not in ("float32", "float64") or x.dtype.lanes != 1:
        return None
    return tirx.call_pure_extern(call.dtype, "ldexp" if str(x.dtype) == "float64" else "ldexpf", x,
                                 tirx.Cast("int32", e))


def _shuffle_elect(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.shuffle_elect(extent)``: one thread of each group of ``extent`` threads, as TileLang's
    template elects it (elect.sync, the lowest lane of a converged warp: lane 0, in each warp whose
    index is a multiple of ceil(extent / 32); extent 0: lane 0 of warp 0). Written with the thread's
    lane and warp index, which the thread-level rule gives each thread."""
    tirx = tilelang().tvm.tirx
    extent = call.args[0]
    if not isinstance(extent, tirx.IntImm):
        return None
    lane = tirx.call_intrin("int32", tirx.op.Op.get("tl.get_lane_idx"))
    warp = tirx.call_intrin("int32", tirx.op.Op.get("tl.get_warp_idx"))
    warps = (int(extent) + 31) // 32
    first = tirx.EQ(lane, tirx.const(0, "int32"))
    if int(extent) == 0:
        return tirx.And(first, tirx.EQ(warp, tirx.const(0, "int32")))
    return tirx.And(first, tirx.EQ(tirx.floormod(warp, tirx.const(warps, "int32")), tirx.const(0, "int32")))


def _rng_state(buffers: dict[Any, Any]) -> Any:
    """A pointer to the thread's generator state: a local buffer of :data:`RNG_STATE_WORDS` words
    that :func:`lower_intrinsics` allocates in the block (so the thread-level rule gives each
    thread its own, as each CUDA thread has its own curand state)."""
    tirx = tilelang().tvm.tirx
    if RNG_STATE_NAME not in buffers:
        buffers[RNG_STATE_NAME] = tirx.decl_buffer((RNG_STATE_WORDS,), "uint32", RNG_STATE_NAME, scope="local")
    state = buffers[RNG_STATE_NAME]
    return tirx.address_of(tirx.BufferLoad(state, [tirx.const(0, "int32")]))


_SITES = "tilelab_draw_sites"  # the key, among the lowering's buffers, of how many draws it has numbered


def _generator(buffers: dict[Any, Any]) -> str | None:
    """The generator of the kernel's T.rng_init calls (curand's state type; Philox4_32_10 when there
    is none), None when they name more than one or one :data:`GENERATORS` lacks."""
    found = buffers.get(_GENERATOR, set())
    generator = next(iter(found)) if len(found) == 1 else "curandStatePhilox4_32_10_t" if not found else None
    return generator if generator in GENERATORS else None


def _draw_site(buffers: dict[Any, Any]) -> Any:
    """The next draw's number in this kernel: an argument the runtime ignores, which makes each draw's
    call a text of its own in the C source (TVM's C code generator names a repeated expression of a
    statement once, and would take two draws of one statement for one value)."""
    buffers[_SITES] = buffers.get(_SITES, 0) + 1
    return tilelang().tvm.tirx.const(buffers[_SITES], "int32")


def _rng_init(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.rng_init(seed, seq, off, generator=...)``: curand_init(seed, seq, off, &state) of the
    kernel's generator. Philox4_32_10 (the default): key = the seed's two words, counter = seq
    subsequences of 2^64 blocks of four words, then off words on; MRG32k3a: seq subsequences of 2^76
    steps, then off steps; XORWOW: seq subsequences of 2^67 steps, then off steps (the runtime's
    tilelab_emu_mrg_init / tilelab_emu_xorwow_init, curand's seeding of each)."""
    tirx = tilelang().tvm.tirx
    generator = _generator(buffers)
    if len(call.args) < 4 or generator is None or str(getattr(call.args[3], "value", "")) != generator:
        return None
    seed, seq, off = (tirx.Cast("uint64", a) for a in call.args[:3])
    return tirx.Evaluate(tirx.call_extern("int32", GENERATORS[generator]["init"], _rng_state(buffers), seed, seq,
                                          off))


def _rng_rand(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.rng_rand()``: curand(&state), the next 32-bit word of the thread's Philox stream."""
    generator = _generator(buffers)
    if generator is None:
        return None
    return tilelang().tvm.tirx.call_extern("uint32", GENERATORS[generator]["next"], _rng_state(buffers),
                                           _draw_site(buffers))


def _rng_rand_float(call: Any, buffers: dict[Any, Any]) -> Any:
    """``T.rng_rand_float(bit, dist)``: curand_uniform (float32: one word, x * 2^-32 + 2^-33),
    curand_uniform_double (float64: two words, 53 bits), curand_normal (float32: Box-Muller, two words
    every second draw; within the GPU's fast log and sine error), of the kernel's generator
    (:data:`GENERATORS`: MRG32k3a's from its uniforms, its float64 normal too). The float64 normal of
    Philox4_32_10 and XORWOW is left (refused): curand draws its four words in a way this rule does not
    follow."""
    tirx = tilelang().tvm.tirx
    dist, wide = str(getattr(call.args[0], "value", "")), str(call.dtype) == "float64"
    generator = _generator(buffers)
    if generator is None:
        return None
    name = GENERATORS[generator].get(f"{dist}{'_double' if wide else ''}")
    if name is None:
        return None
    return tirx.call_extern(str(call.dtype), name, _rng_state(buffers), _draw_site(buffers))


def _with_rng_state(body: Any, state: Any) -> Any:
    """``body`` with the generator state allocated in each kernel's root block (TileLang's
    ``tilelang_root``: one per block of the launch)."""
    tirx = tilelang().tvm.tirx

    def post(node: Any) -> Any:
        if isinstance(node, tirx.SBlock) and str(node.name_hint) == "tilelang_root":
            return tirx.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, node.body, node.init,
                               [*node.alloc_buffers, state], node.match_buffers, node.annotations)
        return None

    return tirx.stmt_functor.ir_transform(body, None, post, ["tirx.SBlock"])


INTRINSICS.update({i.op: i for i in (
    *(Intrinsic(f"tl.__{f}", f"T.__{f}(x): CUDA's fast {f} (__{f}f, within its documented error); the C library's "
                f"{f} here", _fast_math(f"{f}f", f)) for f in ("exp", "log", "log2", "log10", "sin", "cos", "tan")),
    Intrinsic("tl.__exp10", "T.__exp10(x): CUDA's fast 10**x (__exp10f, within its documented error); the C "
              "library's pow(10, x) here", _exp10),
    Intrinsic("tirx.exp10", "T.exp10(x): 10**x (the C library's pow(10, x))", _exp10),
    Intrinsic("tirx.fmod", "T.fmod(x, y): the remainder of x / y with the sign of x (C's fmod)", _fmod),
    Intrinsic("tirx.clz", "T.clz(x): the number of leading zero bits of a 32- or 64-bit integer (all its bits for 0)",
              _bit_count("clz")),
    Intrinsic("tirx.popcount", "T.popcount(x): the number of set bits of a 32- or 64-bit integer",
              _bit_count("popcount")),
    Intrinsic("tirx.isfinite", "T.isfinite(x): x is neither NaN nor infinite", _isfinite),
    Intrinsic("tl.pow_of_int", "T.pow(x, n) for a constant integer n >= 1: x multiplied by itself n - 1 times",
              _pow_of_int),
    Intrinsic("tl.fmul", "T.fmul(x, y): x * y rounded to nearest even (__fmul_rn, never fused into an fma)", _fmul),
    Intrinsic("tl.fma", "T.fma(x, y, z): x * y + z rounded once to nearest even (__fmaf_rn)", _fma),
    Intrinsic("tl.__ffs", "T.__ffs(x): the place of the lowest set bit of x counting from 1, 0 for x == 0",
              _first_set),
    *(Intrinsic(op, f"T.{op[3:]}(...): the IEEE operation rounded once in the mode given ('rn' to nearest even, "
                "'rz' to zero, 'ru' up, 'rd' down; CUDA's __f*_r* / __d*_r*)", _ieee) for op in IEEE_OPS),
    *(Intrinsic(f"tl.{k}2", f"T.{k}2(x, y): {k} of each lane of a pair (float32x2, float16x2, bfloat16x2)",
                _packed(k)) for k in ("add", "sub", "mul")),
    Intrinsic("tl.fma2", "T.fma2(a, b, c): a * b + c of each lane of a pair, rounded once (float32x2: fmaf, as the "
              "GPU fuses it; float16x2, bfloat16x2: __hfma2)", _packed("fma"), _PAIR_STORED),
    Intrinsic("tl.abs2", "T.abs2(x): the absolute value of each lane of a pair (its sign bit cleared)", _packed("abs"),
              _PAIR_STORED),
    Intrinsic("tl.pdl_trigger", "T.pdl_trigger(): lets the next kernel of the stream start before this one ends "
              "(programmatic dependent launch); on the CPU the next kernel starts after it, which the GPU allows",
              _nothing),
    Intrinsic("tl.pdl_sync", "T.pdl_sync(): waits until the previous kernel of the stream has finished; on the "
              "CPU it has", _nothing),
    Intrinsic("tl.fence_proxy_async", "T.fence_proxy_async(): orders the block's plain memory accesses before its "
              "later TMA and tensor-core ones; on the CPU every access is done when its statement ends", _nothing),
    Intrinsic("tl.tma_store_arrive", "T.tma_store_arrive(): commits the block's TMA stores as a group (for "
              "T.tma_store_wait); on the CPU each store is done when its statement ends", _nothing),
    Intrinsic("tl.__fns", "T.__fns(mask, base, offset): the place of the offset-th set bit of mask from bit base "
              "(up for offset > 0, down for offset < 0), 0xffffffff when there is none (PTX's fns)", _fns),
    Intrinsic("tirx.ldexp", "T.ldexp(x, e): x * 2**e (C's ldexp, e an integer)", _ldexp),
    Intrinsic("tl.tl_shuffle_elect", "T.shuffle_elect(n): true for one thread of each group of n threads (lane 0 of "
              "the group's first warp; n = 0: of the block)", _shuffle_elect),
    Intrinsic("tl.rng_init", "T.rng_init(seed, seq, off, generator=...): the thread's curand state, "
              "curand_init(seed, seq, off): seq picks the subsequence, off skips draws of it; Philox4_32_10 (the "
              "default), MRG32k3a and XORWOW, each as curand seeds and steps it", _rng_init,
              "with one of curand's generators Philox4_32_10, MRG32k3a and XORWOW, the same one for every "
              "T.rng_init of the kernel"),
    Intrinsic("tl.rng_rand", "T.rng_rand(): the next 32-bit word of the thread's Philox4_32_10 stream (curand)",
              _rng_rand),
    Intrinsic("tl.rng_rand_float", "T.rng_rand_float(bit, dist): curand_uniform / curand_uniform_double of the "
              "thread's stream, in (0, 1]; curand_normal (float32, Philox4_32_10: Box-Muller, within the GPU's fast "
              "log and sine)", _rng_rand_float,
              "uniform of any of the three generators, normal of float32 from any, normal of float64 from MRG32k3a "
              "(float64 normals of Philox4_32_10 and XORWOW, four words each, are not reproduced)"),
)})
STATEMENTS: tuple[str, ...] = (*STATEMENTS, "tl.rng_init")  # type: ignore[no-redef]
