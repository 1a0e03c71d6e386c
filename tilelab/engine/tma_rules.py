"""The rules ``cuTensorMapEncodeTiled``/``cuTensorMapEncodeIm2col`` put on a TMA descriptor.

A descriptor that breaks one of them is only refused when the host launcher encodes it, with a
bare ``CUDA_ERROR_INVALID_VALUE``. ``check`` finds the break while inspecting, and says which
field to change. Every rule quotes the CUDA Driver API reference, section "Tensor Map Object
Management" (docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html, CUDA 12.8+
wording), and is held against a real driver by ``tests/test_tma_driver_gpu.py``.

Sizes may be symbolic (``"m"``, ``"k * 2"``): a rule that depends on them cannot be decided here
and becomes a launch condition, stated on the symbol where the expression is linear in it.

Pure: imports neither TileLang nor cuda-python.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ..cuda_facts import (
    TMA_DTYPES,
    TMA_ENUM_C,
    TMA_ENUMS,
    TMA_INTERLEAVES,
    TMA_L2_PROMOTIONS,
    TMA_OOB_FILLS,
    TMA_SWIZZLES,
    tma_enum_name,
)
from ..records.kernel import Dim, TmaDescriptor

# --------------------------------------------------------------------------------------------
# Driver enumerators (their one table is tilelab.cuda_facts), by the short names the rules use.
# --------------------------------------------------------------------------------------------

DTYPES, INTERLEAVES, SWIZZLES = TMA_DTYPES, TMA_INTERLEAVES, TMA_SWIZZLES
L2_PROMOTIONS, OOB_FILLS = TMA_L2_PROMOTIONS, TMA_OOB_FILLS
ENUMS = TMA_ENUMS
_ENUM_C = TMA_ENUM_C
_UNKNOWN = re.compile(r"UNKNOWN\((-?\d+)\)")


def decode(kind: str, value: int) -> str:
    """The enumerator name of ``value`` (``decode("swizzle", 3) == "128B"``); ``UNKNOWN(n)`` if none."""
    return tma_enum_name(kind, value)


def encode(kind: str, name: str) -> int:
    """The driver's integer for an enumerator name; ``UNKNOWN(n)`` gives back n."""
    unknown = _UNKNOWN.fullmatch(name)
    if unknown:
        return int(unknown.group(1))
    try:
        return ENUMS[kind].index(name)
    except ValueError:
        known = ", ".join(ENUMS[kind])
        raise ValueError(f"{name!r} is not a {_ENUM_C[kind][1]} enumerator; known: {known}") from None


FLOAT_DTYPES = frozenset(
    {"FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16", "FLOAT32_FTZ", "TFLOAT32", "TFLOAT32_FTZ"})
PACKED_DTYPES = frozenset({"16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B"})
PACKED_16B_DTYPES = frozenset({"16U4_ALIGN16B", "16U6_ALIGN16B"})

# --------------------------------------------------------------------------------------------
# Symbolic sizes: "m", "k * 2", "(m + 1) * 64" as polynomials with integer coefficients.
# --------------------------------------------------------------------------------------------

Poly = dict  # {(symbol, ...): coefficient}; the key () holds the constant term


def _poly(text: str) -> Poly | None:
    """Parse +, -, * over ints and names; None for anything else (division, calls, ...)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> Poly | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return {(): node.value}
        if isinstance(node, ast.Name):
            return {(node.id,): 1}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = walk(node.operand)
            return None if inner is None else {k: -v for k, v in inner.items()}
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = walk(node.left), walk(node.right)
            if left is None or right is None:
                return None
            out: Poly = {}
            if isinstance(node.op, ast.Mult):
                for ka, va in left.items():
                    for kb, vb in right.items():
                        key = tuple(sorted(ka + kb))
                        out[key] = out.get(key, 0) + va * vb
            else:
                sign = 1 if isinstance(node.op, ast.Add) else -1
                out = dict(left)
                for k, v in right.items():
                    out[k] = out.get(k, 0) + sign * v
            return {k: v for k, v in out.items() if v}
        return None

    return walk(tree)


def _linear(text: str) -> tuple[str, int, int] | None:
    """``a * s + b`` in one symbol s: (s, a, b); else None."""
    poly = _poly(text)
    if poly is None:
        return None
    terms = [k for k in poly if k]
    if len(terms) != 1 or len(terms[0]) != 1:
        return None
    return terms[0][0], poly[terms[0]], poly.get((), 0)


def evaluate(value: Dim, sizes: Mapping[str, int]) -> int:
    """A concrete size: ``value`` with its symbols replaced by ``sizes`` (KeyError if one is missing)."""
    if isinstance(value, int):
        return value
    poly = _poly(value)
    if poly is None:
        raise ValueError(f"cannot evaluate the size expression {value!r}")
    return sum(coef * math.prod(sizes[s] for s in key) for key, coef in poly.items())


def symbols(desc: TmaDescriptor) -> set[str]:
    """The names of the symbolic sizes ``desc`` uses (``{"m"}``)."""
    values = (*desc.global_dim, *desc.global_stride_bytes, *desc.box_dim, *desc.element_strides,
              desc.channels_per_pixel, desc.pixels_per_column)
    return {name for v in values if isinstance(v, str) for name in re.findall(r"[A-Za-z_]\w*", v)}


def concretize(desc: TmaDescriptor, sizes: Mapping[str, int] | int) -> TmaDescriptor:
    """``desc`` with every symbolic size evaluated; an int gives every symbol that value."""
    table = {s: sizes for s in symbols(desc)} if isinstance(sizes, int) else dict(sizes)

    def dims(values: tuple[Dim, ...]) -> tuple[int, ...]:
        return tuple(evaluate(v, table) for v in values)

    return dataclasses.replace(
        desc, global_dim=dims(desc.global_dim), global_stride_bytes=dims(desc.global_stride_bytes),
        box_dim=dims(desc.box_dim), element_strides=dims(desc.element_strides),
        channels_per_pixel=_maybe(desc.channels_per_pixel, table),
        pixels_per_column=_maybe(desc.pixels_per_column, table),
    )


def _maybe(value: Dim | None, sizes: Mapping[str, int]) -> int | None:
    return None if value is None else evaluate(value, sizes)


def _power(n: int) -> str:
    """2^32 rather than 4294967296 where the bound is a power of two."""
    return f"2^{n.bit_length() - 1}" if n > 1024 and n & (n - 1) == 0 else str(n)


# --------------------------------------------------------------------------------------------
# Findings: a rule yields definite problems, or launch conditions where sizes are symbolic.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    text: str
    at_launch: bool = False


Findings = Iterator[Finding]


def _multiple_of(field: str, value: Dim, unit: int, rule: str, fix: str) -> Findings:
    """``field`` (``value`` bytes or elements) must be a multiple of ``unit``."""
    if isinstance(value, int):
        if value % unit:
            yield Finding(f"{field} is {value} but {rule}: {fix}")
        return
    poly = _poly(value)
    if poly is not None and all(coef % unit == 0 for coef in poly.values()):
        return  # a multiple whatever the sizes
    text = f"{field} = {value} must be a multiple of {unit} at launch"
    line = _linear(value)
    if line is not None:
        symbol, a, b = line
        g = math.gcd(a, unit)
        if b % g:
            yield Finding(f"{field} = {value} is never a multiple of {unit}, whatever {symbol} is, "
                          f"but {rule}: {fix}")
            return
        modulus = unit // g
        residue = (-b // g) * pow(a // g, -1, modulus) % modulus
        text += (f": {symbol} must be a multiple of {modulus}" if residue == 0
                 else f": {symbol} must leave {residue} when divided by {modulus}")
    yield Finding(text, at_launch=True)


def _within(field: str, value: Dim, low: int, high: int, rule: str, fix: str, unit: str = "") -> Findings:
    """``low <= value <= high``."""
    if isinstance(value, int):
        if not low <= value <= high:
            yield Finding(f"{field} is {value}{unit} but {rule}: {fix}")
        return
    bounds = f"between {_power(low)} and {_power(high)}" if low > 0 else f"at most {_power(high)}"
    text = f"{field} = {value}{unit} must be {bounds} at launch"
    line = _linear(value)
    if line is not None and line[1] > 0 and (line[1], line[2]) != (1, 0):
        symbol, a, b = line
        lo, hi = -((b - low) // a), (high - b) // a  # ceil((low - b) / a), floor((high - b) / a)
        text += f": {symbol} must be between {lo} and {hi}" if lo > 0 else f": {symbol} must be at most {hi}"
    yield Finding(text, at_launch=True)


def _dim_name(i: int) -> str:
    return f"dimension {i}"  # innermost first, as the driver and the report number them


# --------------------------------------------------------------------------------------------
# The rules. ``doc`` is the driver reference's own wording; ``kinds`` says which encode call
# states it. ``driver_enforced`` is False for a rule the real driver turns out not to check:
# such a rule is never reported (the GPU test then asserts the driver accepts its example).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    id: str
    doc: str
    check: Callable[[TmaDescriptor, int | None], Findings]
    kinds: tuple[str, ...] = ("tiled", "im2col")
    driver_enforced: bool = True
    # The bad example's globalAddress is an aligned base plus this many bytes (alignment rules).
    address_offset: int = 0


RULES: dict[str, Rule] = {}


def rule(id: str, doc: str, *, kinds: tuple[str, ...] = ("tiled", "im2col"), driver_enforced: bool = True,
         address_offset: int = 0) -> Callable:
    def register(fn: Callable[[TmaDescriptor, int | None], Findings]) -> Callable:
        RULES[id] = Rule(id, " ".join(doc.split()), fn, kinds, driver_enforced, address_offset)
        return fn

    return register


@rule("enum_known", """tensorDataType has to be an enum from CUtensorMapDataType ... interleave specifies
      the interleaved layout of type CUtensorMapInterleave ... swizzle ... has to be of type
      CUtensorMapSwizzle ... l2Promotion ... must be of type CUtensorMapL2promotion ... oobFill ...
      must be of type CUtensorMapFloatOOBfill""")
def _enum_known(d: TmaDescriptor, address: int | None) -> Findings:
    for kind, table in ENUMS.items():
        value = getattr(d, kind)
        if value not in table:
            param, ctype, prefix = _ENUM_C[kind]
            names = ", ".join(prefix + n for n in table)
            yield Finding(f"{param} is {value} but the driver takes only a {ctype} ({names}): "
                          f"pass one of those")


@rule("tensor_rank", """tensorRank must be non-zero and less than or equal to the maximum supported
      dimensionality of 5.""", kinds=("tiled",))
def _tensor_rank(d: TmaDescriptor, address: int | None) -> Findings:
    if not 1 <= d.rank <= 5:
        yield Finding(f"tensorRank is {d.rank} but the driver allows 1 to 5 dimensions: "
                      f"merge contiguous dimensions of the tensor (or split the copy) to use at most 5")


@rule("im2col_rank", "tensorRank, which specifies the number of tensor dimensions, must be 3, 4, or 5.",
      kinds=("im2col",))
def _im2col_rank(d: TmaDescriptor, address: int | None) -> Findings:
    if d.rank not in (3, 4, 5):
        yield Finding(f"tensorRank is {d.rank} but an im2col descriptor must have 3, 4 or 5 dimensions "
                      f"(NWC, NHWC or NDHWC): give the input tensor its batch, spatial and channel "
                      f"dimensions")


@rule("interleave_rank", """If interleave is not CU_TENSOR_MAP_INTERLEAVE_NONE, then tensorRank must
      additionally be greater than or equal to 3.""", kinds=("tiled",))
def _interleave_rank(d: TmaDescriptor, address: int | None) -> Findings:
    if d.interleave in ("16B", "32B") and d.rank < 3:
        yield Finding(f"tensorRank is {d.rank} with interleave {d.interleave} but an interleaved layout "
                      f"needs at least 3 dimensions: use interleave NONE or describe the tensor as NC/xHWCx")


def _address_alignment(d: TmaDescriptor) -> int:
    return 32 if d.interleave == "32B" or d.dtype in PACKED_16B_DTYPES else 16


def _address(d: TmaDescriptor, address: int | None, unit: int) -> Findings:
    owner = f"the data pointer of {d.buffer}" if d.buffer else "globalAddress"
    if address is None:
        yield Finding(f"{owner} must be {unit}-byte aligned at launch (a tensor view that starts at an "
                      f"offset may not be)", at_launch=True)
    elif address % unit:
        yield Finding(f"globalAddress {address:#x} is {address % unit} bytes past a {unit}-byte boundary but "
                      f"the driver needs it {unit}-byte aligned: pass a tensor (or view) that starts on a "
                      f"{unit}-byte boundary, e.g. .contiguous() copy or an aligned offset")


@rule("global_address_align", """globalAddress, which specifies the starting address of the memory
      region described, must be 16 byte aligned.""", address_offset=8)
def _global_address_align(d: TmaDescriptor, address: int | None) -> Findings:
    if _address_alignment(d) == 16:
        yield from _address(d, address, 16)


@rule("global_address_align_32", """When interleave is CU_TENSOR_MAP_INTERLEAVE_32B, globalAddress must
      be 32 byte aligned. When tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, globalAddress must be 32 byte aligned.""", address_offset=16)
def _global_address_align_32(d: TmaDescriptor, address: int | None) -> Findings:
    if _address_alignment(d) == 32:
        yield from _address(d, address, 32)


_DIM_DOC = """globalDim array, which specifies tensor size of each of the tensorRank dimensions, must be
non-zero and less than or equal to 2^32."""


@rule("global_dim_nonzero", _DIM_DOC)
def _global_dim_nonzero(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in enumerate(d.global_dim):
        if isinstance(v, int) and v <= 0:
            yield Finding(f"globalDim[{i}] is {v} but every tensor dimension must be at least 1: "
                          f"an empty tensor cannot be described; skip the launch or give {_dim_name(i)} "
                          f"a size")


@rule("global_dim_max", _DIM_DOC)
def _global_dim_max(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in enumerate(d.global_dim):
        yield from _within(f"globalDim[{i}]", v, 1 if isinstance(v, str) else -(2**63), 2**32,
                           "the driver allows at most 2^32 elements per dimension",
                           f"split {_dim_name(i)} into two dimensions")


@rule("packed_global_dim", """When tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, globalDim[0] must be a multiple of 128. When tensorDataType is
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, globalDim[0] must be a multiple of 2.""")
def _packed_global_dim(d: TmaDescriptor, address: int | None) -> Findings:
    unit = 128 if d.dtype in PACKED_16B_DTYPES else 2 if d.dtype == "16U4_ALIGN8B" else None
    if unit and d.global_dim:
        yield from _multiple_of("globalDim[0]", d.global_dim[0], unit,
                                f"{d.dtype} needs the innermost dimension to be a multiple of {unit} values",
                                f"pad the innermost dimension to a multiple of {unit}")


_STRIDE_DOC = """globalStrides array, which specifies tensor stride of each of the lower tensorRank - 1
dimensions in bytes, must be a multiple of 16 and less than 2^40."""


def _in_elements(d: TmaDescriptor, unit: int) -> str:
    size = d.element_bytes
    return f" ({unit / size:g} {d.dtype} elements)" if size and (unit / size).is_integer() else ""


def _outer_strides(d: TmaDescriptor) -> Iterator[tuple[int, Dim]]:
    # global_stride_bytes[0] is the element size (TileLang's convention); the driver gets [1:].
    yield from list(enumerate(d.global_stride_bytes))[1:]


@rule("global_stride_multiple", _STRIDE_DOC)
def _global_stride_multiple(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in _outer_strides(d):
        yield from _multiple_of(f"globalStrides[{i}]", v, 16,
                                "the driver needs every stride to be a multiple of 16 bytes",
                                f"pad {_dim_name(i - 1)} so that this stride is a multiple of 16 bytes"
                                + _in_elements(d, 16))


@rule("global_stride_max", _STRIDE_DOC)
def _global_stride_max(d: TmaDescriptor, address: int | None) -> Findings:
    # A symbolic stride gets no launch condition: a stride of 2^40 bytes (1 TiB) needs more memory
    # than any GPU has, so the condition would only be noise.
    for i, v in _outer_strides(d):
        if isinstance(v, int) and v >= 2**40:
            yield Finding(f"globalStrides[{i}] is {v} bytes but the driver needs every stride below 2^40 "
                          f"bytes: describe a smaller tensor (split the copy)")


@rule("global_stride_multiple_32", """When interleave is CU_TENSOR_MAP_INTERLEAVE_32B, the strides must
      be a multiple of 32. When tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, the strides must be a multiple of 32.""")
def _global_stride_multiple_32(d: TmaDescriptor, address: int | None) -> Findings:
    if d.interleave != "32B" and d.dtype not in PACKED_16B_DTYPES:
        return
    why = "interleave 32B" if d.interleave == "32B" else f"dtype {d.dtype}"
    for i, v in _outer_strides(d):
        yield from _multiple_of(f"globalStrides[{i}]", v, 32, f"with {why} the driver needs strides that are "
                                f"multiples of 32 bytes",
                                f"pad {_dim_name(i - 1)} so that this stride is a multiple of 32 bytes"
                                + _in_elements(d, 32))


_BOX_DOC = """boxDim array, which specifies number of elements to be traversed along each of the tensorRank
dimensions, must be non-zero and less than or equal to 256."""


@rule("box_dim_nonzero", _BOX_DOC, kinds=("tiled",))
def _box_dim_nonzero(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in enumerate(d.box_dim):
        if isinstance(v, int) and v <= 0:
            yield Finding(f"boxDim[{i}] is {v} but a box must have at least 1 element along every dimension: "
                          f"use a tile of at least 1 along {_dim_name(i)}")


@rule("box_dim_max", _BOX_DOC, kinds=("tiled",))
def _box_dim_max(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in enumerate(d.box_dim):
        yield from _within(f"boxDim[{i}]", v, 1 if isinstance(v, str) else -(2**63), 256,
                           "the driver allows at most 256 elements per box dimension",
                           f"use a tile of at most 256 along {_dim_name(i)} (or copy it in several boxes)")


@rule("box_inner_bytes_multiple_16", """When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE, { boxDim[0] *
      elementSizeInBytes( tensorDataType ) } must be a multiple of 16 bytes.""", kinds=("tiled",))
def _box_inner_bytes(d: TmaDescriptor, address: int | None) -> Findings:
    size = d.element_bytes
    if d.interleave != "NONE" or not d.box_dim or size is None:
        return
    inner = d.box_dim[0]
    if isinstance(inner, int):
        if (inner * size) % 16:
            per16 = 16 / size
            yield Finding(f"boxDim[0] is {inner} elements of {d.dtype} = {inner * size:g} bytes but the "
                          f"driver needs the box's innermost row to be a multiple of 16 bytes: use a "
                          f"multiple of "
                          f"{per16:g} elements along the innermost dimension")
    elif float(size).is_integer():
        yield from _multiple_of("boxDim[0] * element size", f"({inner}) * {int(size)}", 16,
                                "the box's innermost row must be a multiple of 16 bytes",
                                "change the tile's innermost extent")


@rule("packed_box_dim", """When tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, boxDim[0] must be 128.""", kinds=("tiled",))
def _packed_box_dim(d: TmaDescriptor, address: int | None) -> Findings:
    if d.dtype in PACKED_16B_DTYPES and d.box_dim and d.box_dim[0] != 128:
        yield Finding(f"boxDim[0] is {d.box_dim[0]} but {d.dtype} needs exactly 128 values along the "
                      f"innermost box dimension: use a tile of 128 along dimension 0")


_ES_DOC = """elementStrides array, which specifies the iteration step along each of the tensorRank
dimensions, must be non-zero and less than or equal to 8. Note that when interleave is
CU_TENSOR_MAP_INTERLEAVE_NONE, the first element of this array is ignored since TMA doesn't support
the stride for dimension zero."""


def _checked_element_strides(d: TmaDescriptor) -> Iterator[tuple[int, Dim]]:
    start = 1 if d.interleave == "NONE" else 0  # "the first element of this array is ignored"
    yield from list(enumerate(d.element_strides))[start:]


@rule("element_stride_nonzero", _ES_DOC)
def _element_stride_nonzero(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in _checked_element_strides(d):
        if isinstance(v, int) and v <= 0:
            yield Finding(f"elementStrides[{i}] is {v} but the driver needs a step of 1 to 8: use 1 "
                          f"(every element) along {_dim_name(i)}")


@rule("element_stride_max", _ES_DOC)
def _element_stride_max(d: TmaDescriptor, address: int | None) -> Findings:
    for i, v in _checked_element_strides(d):
        yield from _within(f"elementStrides[{i}]", v, 1 if isinstance(v, str) else -(2**63), 8,
                           "the driver allows a traversal step of at most 8",
                           f"use a step of at most 8 along {_dim_name(i)} (or gather in several copies)")


@rule("swizzle_span", """When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is not
      CU_TENSOR_MAP_SWIZZLE_NONE, the bounding box inner dimension (computed as boxDim[0] multiplied by
      element size derived from tensorDataType) must be less than or equal to the swizzle size.
      CU_TENSOR_MAP_SWIZZLE_32B requires the bounding box inner dimension to be <= 32.
      CU_TENSOR_MAP_SWIZZLE_64B requires the bounding box inner dimension to be <= 64.
      CU_TENSOR_MAP_SWIZZLE_128B* require the bounding box inner dimension to be <= 128.
      [im2col: computed as channelsPerPixel multiplied by element size in bytes]""")
def _swizzle_span(d: TmaDescriptor, address: int | None) -> Findings:
    span, inner, size = d.swizzle_span_bytes, d.inner_box_elements, d.element_bytes
    if d.interleave != "NONE" or span is None or size is None or inner is None:
        return
    field = "channelsPerPixel" if d.kind == "im2col" else "boxDim[0]"
    fits = int(span // size)
    fix = f"use at most {fits} elements along the innermost dimension"
    if isinstance(inner, int):
        if inner * size > span:
            wider = [s for s in ("64B", "128B") if span < int(s[:-1]) and inner * size <= int(s[:-1])]
            if wider:
                fix = f"use swizzle {wider[0]}, or {fix}"
            yield Finding(f"{field} is {inner} elements of {d.dtype} = {inner * size:g} bytes but "
                          f"swizzle {d.swizzle} spans {span} bytes and the driver needs the box's innermost "
                          f"row to fit in it: {fix}")
    else:
        yield from _within(field, inner, 1, fits, f"swizzle {d.swizzle} spans {span} bytes", fix)


@rule("packed_interleave", """Additionally, tensorDataType of CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
      requires interleave to be CU_TENSOR_MAP_INTERLEAVE_NONE.""")
def _packed_interleave(d: TmaDescriptor, address: int | None) -> Findings:
    if d.dtype == "16U6_ALIGN16B" and d.interleave != "NONE":
        yield Finding(f"interleave is {d.interleave} but dtype 16U6_ALIGN16B requires interleave NONE: "
                      f"use interleave NONE")


# Held against the driver (H200, driver 580.159.04, 2026-11-22): cuTensorMapEncodeTiled ACCEPTED
# interleave 32B with swizzle 64B, so this documented rule is not reported.
@rule("interleave_32b_swizzle", """When interleave is CU_TENSOR_MAP_INTERLEAVE_32B, swizzle must be
      CU_TENSOR_MAP_SWIZZLE_32B.""", driver_enforced=False)
def _interleave_32b_swizzle(d: TmaDescriptor, address: int | None) -> Findings:
    if d.interleave == "32B" and d.swizzle != "32B":
        yield Finding(f"swizzle is {d.swizzle} with interleave 32B but the driver requires swizzle 32B "
                      f"there: use swizzle 32B (or another interleave)")


_PACKED_SWIZZLES = {
    # "(Load & Store)", "(Store only)", "(Load only)": the descriptor does not say which way it copies,
    # so any listed mode is accepted.
    "16U6_ALIGN16B": ("NONE", "128B", "128B_ATOM_32B", "128B_ATOM_64B"),
    "16U4_ALIGN16B": ("NONE", "128B", "128B_ATOM_32B"),
}


@rule("packed_swizzle", """When the tensorDataType is CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, only the
      following swizzle modes are supported: CU_TENSOR_MAP_SWIZZLE_NONE (Load & Store),
      CU_TENSOR_MAP_SWIZZLE_128B (Load & Store), CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B (Load & Store),
      CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B (Store only). When the tensorDataType is
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, only the following swizzle modes are supported:
      CU_TENSOR_MAP_SWIZZLE_NONE (Load only), CU_TENSOR_MAP_SWIZZLE_128B (Load only),
      CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B (Load only)""")
def _packed_swizzle(d: TmaDescriptor, address: int | None) -> Findings:
    allowed = _PACKED_SWIZZLES.get(d.dtype)
    if allowed and d.swizzle not in allowed:
        yield Finding(f"swizzle is {d.swizzle} but dtype {d.dtype} supports only swizzle "
                      f"{', '.join(allowed)}: use one of those")


@rule("oob_fill_float", """Note that CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA can only be used
      when tensorDataType represents a floating-point data type, and when tensorDataType is not
      CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, and
      CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B.""")
def _oob_fill_float(d: TmaDescriptor, address: int | None) -> Findings:
    if d.oob_fill == "NAN_REQUEST_ZERO_FMA" and d.dtype not in FLOAT_DTYPES:
        yield Finding(f"oobFill is NAN_REQUEST_ZERO_FMA but dtype {d.dtype} is not a floating-point type: "
                      f"use oobFill NONE (out-of-bounds elements read as zero)")


_CORNER_RANGE = {3: (-32768, 32767), 4: (-128, 127), 5: (-16, 15)}


@rule("im2col_corner_range", """pixelBoxLowerCorner array specifies the coordinate offsets {D, H, W} of
      the bounding box from top/left/front corner. The number of offsets and their precision depend on the
      tensor dimensionality: When tensorRank is 3, one signed offset within range [-32768, 32767] is
      supported. When tensorRank is 4, two signed offsets each within range [-128, 127] are supported. When
      tensorRank is 5, three offsets each within range [-16, 15] are supported. [pixelBoxUpperCorner: the
      same]""", kinds=("im2col",))
def _im2col_corner_range(d: TmaDescriptor, address: int | None) -> Findings:
    corner_range = _CORNER_RANGE.get(d.rank)
    if corner_range is None:
        return
    low, high = corner_range
    for name, corner in (("pixelBoxLowerCorner", d.lower_corner), ("pixelBoxUpperCorner", d.upper_corner)):
        for i, v in enumerate(corner):
            if not low <= v <= high:
                yield Finding(f"{name}[{i}] is {v} but a rank-{d.rank} im2col descriptor allows offsets in "
                              f"[{low}, {high}]: reduce the padding or dilated filter extent along that "
                              f"spatial dimension (or use a lower-rank layout, whose offsets are wider)")


@rule("im2col_box_area", """The bounding box specified by pixelBoxLowerCorner and pixelBoxUpperCorner
      must have non-zero area.""", kinds=("im2col",))
def _im2col_box_area(d: TmaDescriptor, address: int | None) -> Findings:
    # Corners are offsets from the tensor's own corners, innermost spatial dimension first (W, H, D):
    # along spatial dimension i+1 the box spans globalDim[i+1] + upper[i] - lower[i] pixels.
    for i, (low, up) in enumerate(zip(d.lower_corner, d.upper_corner)):
        if i + 1 >= len(d.global_dim):
            break
        extent = d.global_dim[i + 1]
        field = f"globalDim[{i + 1}] + pixelBoxUpperCorner[{i}] - pixelBoxLowerCorner[{i}]"
        if isinstance(extent, int):
            if extent + up - low <= 0:
                yield Finding(f"{field} is {extent} + ({up}) - ({low}) = {extent + up - low} pixels but the "
                              f"im2col bounding box must have non-zero area: the filter (with its dilation) "
                              f"is larger than the padded input along {_dim_name(i + 1)}; pad more or use a "
                              f"smaller filter")
        else:
            yield Finding(f"{field} = {extent} + ({up}) - ({low}) pixels must be at least 1 at launch: "
                          f"the padded input must be at least as large as the dilated filter", at_launch=True)


@rule("channels_per_pixel_max", """channelsPerPixel, which specifies the number of elements which must be
      accessed along C dimension, must be less than or equal to 256.""", kinds=("im2col",))
def _channels_per_pixel_max(d: TmaDescriptor, address: int | None) -> Findings:
    if d.channels_per_pixel is not None:
        yield from _within("channelsPerPixel", d.channels_per_pixel, -(2**63), 256,
                           "the driver allows at most 256 channels per pixel",
                           "use a channel tile (block_K) of at most 256")


@rule("packed_channels_per_pixel", """Additionally, when tensorDataType is
      CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B or CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, channelsPerPixel must
      be 128.""", kinds=("im2col",))
def _packed_channels_per_pixel(d: TmaDescriptor, address: int | None) -> Findings:
    if d.dtype in PACKED_16B_DTYPES and d.channels_per_pixel != 128:
        yield Finding(f"channelsPerPixel is {d.channels_per_pixel} but dtype {d.dtype} needs exactly 128: "
                      f"use a channel tile of 128")


@rule("pixels_per_column_max", """pixelsPerColumn, which specifies the number of elements that must be
      accessed along the {N, D, H, W} dimensions, must be less than or equal to 1024.""", kinds=("im2col",))
def _pixels_per_column_max(d: TmaDescriptor, address: int | None) -> Findings:
    if d.pixels_per_column is not None:
        yield from _within("pixelsPerColumn", d.pixels_per_column, -(2**63), 1024,
                           "the driver allows at most 1024 pixels per column",
                           "use a pixel tile (block_M) of at most 1024")


# --------------------------------------------------------------------------------------------


# Seen on the driver (H200, sm_90, driver 580.159.04, 2026-11-22): cuTensorMapEncodeTiled returns
# CUDA_ERROR_INVALID_VALUE for every descriptor using the 128B_ATOM_* swizzles or the packed
# 16U4/16U6 types, whatever its other fields. The reference ties them to newer GPUs; the driver
# refuses them on Hopper outright, so a kernel built for sm_9x must not use them.
_NEWER_THAN_HOPPER_SWIZZLES = ("128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B")
_NEWER_THAN_HOPPER_DTYPES = ("16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B")


def arch_findings(desc: TmaDescriptor, arch: str | None) -> list[Finding]:
    """What the driver refuses on the target's GPU generation (sm_9x) whatever the other fields."""
    if not arch or not arch.startswith("sm_9"):
        return []
    out = []
    if desc.swizzle in _NEWER_THAN_HOPPER_SWIZZLES:
        out.append(Finding(f"swizzle {desc.swizzle} is refused by the driver on {arch} (Hopper); it exists "
                           f"for newer GPUs: use swizzle 128B"))
    if desc.dtype in _NEWER_THAN_HOPPER_DTYPES:
        out.append(Finding(f"data type {desc.dtype} is refused by the driver on {arch} (Hopper); packed "
                           f"sub-byte types need a newer GPU: store the data as UINT8"))
    return out


def findings(desc: TmaDescriptor, *, global_address: int | None = None,
             arch: str | None = None) -> dict[str, list[Finding]]:
    """Each enforced rule's findings, by rule id (rules with none are left out)."""
    out: dict[str, list[Finding]] = {}
    for r in RULES.values():
        if desc.kind in r.kinds and r.driver_enforced:
            found = list(r.check(desc, global_address))
            if found:
                out[r.id] = found
    by_arch = arch_findings(desc, arch)
    if by_arch:
        out["arch_support"] = by_arch
    return out


def check(desc: TmaDescriptor, *, global_address: int | None = None,
          arch: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(problems, launch_conditions)``: the driver rules ``desc`` breaks, and those that depend on
    sizes or an address known only at launch. ``global_address`` decides the alignment rules."""
    problems: list[str] = []
    conditions: list[str] = []
    for found in findings(desc, global_address=global_address, arch=arch).values():
        for f in found:
            (conditions if f.at_launch else problems).append(f.text)
    return tuple(dict.fromkeys(problems)), tuple(dict.fromkeys(conditions))


def with_checks(desc: TmaDescriptor, arch: str | None = None) -> TmaDescriptor:
    problems, conditions = check(desc, arch=arch)
    return dataclasses.replace(desc, problems=problems, launch_conditions=conditions)


# --------------------------------------------------------------------------------------------
# One hand-made descriptor per rule that breaks exactly that rule, and a good variant.
# --------------------------------------------------------------------------------------------

_TILED = TmaDescriptor(  # a Hopper GEMM operand: fp16 (1024 x 1024), 128 x 64 boxes, 128B swizzle
    name="A_desc", buffer="A", kind="tiled", dtype="FLOAT16", rank=2,
    global_dim=(1024, 1024), global_stride_bytes=(2, 2048), box_dim=(64, 128), element_strides=(1, 1),
    interleave="NONE", swizzle="128B", l2_promotion="L2_128B", oob_fill="NONE",
)
_INTERLEAVED_32B = dataclasses.replace(  # NC/16HWC16 fp16: C16 = 32 bytes innermost
    _TILED, rank=3, global_dim=(16, 32, 32), global_stride_bytes=(2, 32, 1024), box_dim=(16, 32, 4),
    element_strides=(1, 1, 1), interleave="32B", swizzle="32B",
)
_INTERLEAVED_16B = dataclasses.replace(  # NC/8HWC8 fp16: C8 = 16 bytes innermost
    _TILED, rank=3, global_dim=(8, 32, 32), global_stride_bytes=(2, 16, 512), box_dim=(8, 32, 4),
    element_strides=(1, 1, 1), interleave="16B", swizzle="NONE",
)
_PACKED_U4 = dataclasses.replace(  # 4-bit values, 16 per 8 bytes in global memory
    _TILED, dtype="16U4_ALIGN16B", global_dim=(1024, 64), global_stride_bytes=(1, 512), box_dim=(128, 32),
)
_IM2COL = TmaDescriptor(  # NHWC fp16 input of a 3x3 convolution, pad 1 (examples/conv_im2col.py)
    name="data_desc", buffer="data", kind="im2col", dtype="FLOAT16", rank=4,
    global_dim=(64, 56, 56, 8), global_stride_bytes=(2, 128, 7168, 401408), element_strides=(1, 1, 1, 1),
    lower_corner=(-1, -1), upper_corner=(-1, -1), channels_per_pixel=64, pixels_per_column=128,
    interleave="NONE", swizzle="128B", l2_promotion="L2_128B", oob_fill="NONE",
)


def _pair(base: TmaDescriptor, bad: dict, good: dict | None = None) -> tuple[TmaDescriptor, TmaDescriptor]:
    return dataclasses.replace(base, **bad), dataclasses.replace(base, **(good or {}))


def bad_examples() -> dict[str, tuple[TmaDescriptor, TmaDescriptor]]:
    """``{rule id: (bad, good)}``: ``bad`` breaks only that rule, ``good`` differs minimally and breaks
    none. For the alignment rules the descriptors are the same and the bad one sits at
    ``RULES[id].address_offset`` bytes past an aligned address."""
    rank6 = dict(rank=6, global_dim=(64, 4, 4, 4, 4, 4), global_stride_bytes=(2, 128, 512, 2048, 8192, 32768),
                 box_dim=(64, 1, 1, 1, 1, 1), element_strides=(1,) * 6)
    rank5 = {k: v[:5] if isinstance(v, tuple) else 5 for k, v in rank6.items()}
    return {
        "enum_known": _pair(_TILED, dict(swizzle="UNKNOWN(9)")),
        "tensor_rank": _pair(_TILED, rank6, rank5),
        "im2col_rank": _pair(
            _IM2COL,
            dict(rank=2, global_dim=(64, 3136), global_stride_bytes=(2, 128), element_strides=(1, 1),
                 lower_corner=(), upper_corner=()),
            dict(rank=3, global_dim=(64, 56, 56), global_stride_bytes=(2, 128, 7168),
                 element_strides=(1, 1, 1), lower_corner=(-1,), upper_corner=(-1,))),
        "interleave_rank": _pair(
            _INTERLEAVED_16B,
            dict(rank=2, global_dim=(8, 1024), global_stride_bytes=(2, 16), box_dim=(8, 128),
                 element_strides=(1, 1))),
        "global_address_align": (_TILED, _TILED),
        "global_address_align_32": (_INTERLEAVED_32B, _INTERLEAVED_32B),
        "global_dim_nonzero": _pair(_TILED, dict(global_dim=(1024, 0))),
        "global_dim_max": _pair(_TILED, dict(global_dim=(1024, 2**32 + 1)), dict(global_dim=(1024, 2**32))),
        "packed_global_dim": _pair(
            _TILED, dict(dtype="16U4_ALIGN8B", global_dim=(255, 64), global_stride_bytes=(1, 128)),
            dict(dtype="16U4_ALIGN8B", global_dim=(256, 64), global_stride_bytes=(1, 128))),
        "global_stride_multiple": _pair(
            _TILED, dict(global_dim=(1028, 1024), global_stride_bytes=(2, 2056)),
            dict(global_dim=(1028, 1024), global_stride_bytes=(2, 2064))),
        "global_stride_max": _pair(
            _TILED, dict(global_dim=(1024, 2), global_stride_bytes=(2, 2**40)),
            dict(global_dim=(1024, 2), global_stride_bytes=(2, 2**40 - 16))),
        "global_stride_multiple_32": _pair(_INTERLEAVED_32B, dict(global_stride_bytes=(2, 48, 1536))),
        "box_dim_nonzero": _pair(_TILED, dict(box_dim=(64, 0))),
        "box_dim_max": _pair(_TILED, dict(box_dim=(64, 300)), dict(box_dim=(64, 256))),
        "box_inner_bytes_multiple_16": _pair(_TILED, dict(box_dim=(36, 128)), dict(box_dim=(40, 128))),
        "packed_box_dim": _pair(_PACKED_U4, dict(box_dim=(64, 32))),
        "element_stride_nonzero": _pair(_TILED, dict(element_strides=(1, 0))),
        "element_stride_max": _pair(_TILED, dict(element_strides=(1, 9)), dict(element_strides=(1, 8))),
        "swizzle_span": _pair(_TILED, dict(box_dim=(128, 64)), dict(box_dim=(64, 64))),
        "packed_interleave": _pair(
            _TILED,
            dict(dtype="16U6_ALIGN16B", rank=3, global_dim=(128, 32, 4), global_stride_bytes=(1, 96, 3072),
                 box_dim=(128, 32, 2), element_strides=(1, 1, 1), interleave="16B"),
            dict(dtype="16U6_ALIGN16B", rank=3, global_dim=(128, 32, 4), global_stride_bytes=(1, 96, 3072),
                 box_dim=(128, 32, 2), element_strides=(1, 1, 1))),
        "interleave_32b_swizzle": _pair(_INTERLEAVED_32B, dict(swizzle="64B")),
        "packed_swizzle": _pair(_PACKED_U4, dict(swizzle="128B_ATOM_64B")),
        "oob_fill_float": _pair(_TILED, dict(dtype="UINT16", oob_fill="NAN_REQUEST_ZERO_FMA"),
                                dict(oob_fill="NAN_REQUEST_ZERO_FMA")),
        "im2col_corner_range": _pair(_IM2COL, dict(lower_corner=(-129, -1)), dict(lower_corner=(-128, -1))),
        "im2col_box_area": _pair(
            _IM2COL, dict(global_dim=(64, 8, 8, 2), global_stride_bytes=(2, 128, 1024, 8192),
                          lower_corner=(0, 0), upper_corner=(-8, 0)),
            dict(global_dim=(64, 8, 8, 2), global_stride_bytes=(2, 128, 1024, 8192),
                 lower_corner=(0, 0), upper_corner=(-7, 0))),
        "channels_per_pixel_max": _pair(
            _IM2COL, dict(global_dim=(512, 56, 56, 8), global_stride_bytes=(2, 1024, 57344, 3211264),
                          channels_per_pixel=272, swizzle="NONE"),
            dict(global_dim=(512, 56, 56, 8), global_stride_bytes=(2, 1024, 57344, 3211264),
                 channels_per_pixel=256, swizzle="NONE")),
        "packed_channels_per_pixel": _pair(
            _IM2COL, dict(dtype="16U4_ALIGN16B", global_dim=(256, 56, 56, 8),
                          global_stride_bytes=(1, 128, 7168, 401408), channels_per_pixel=64),
            dict(dtype="16U4_ALIGN16B", global_dim=(256, 56, 56, 8),
                 global_stride_bytes=(1, 128, 7168, 401408), channels_per_pixel=128)),
        "pixels_per_column_max": _pair(_IM2COL, dict(pixels_per_column=1025), dict(pixels_per_column=1024)),
    }


__all__ = [
    "DTYPES", "INTERLEAVES", "L2_PROMOTIONS", "OOB_FILLS", "RULES", "SWIZZLES", "Finding", "Rule",
    "bad_examples", "check", "concretize", "decode", "encode", "evaluate", "findings", "symbols",
    "with_checks",
]
