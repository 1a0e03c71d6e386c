"""Inputs from a kernel's signature, poison, tolerances and the comparison with a reference.

Everything here works on CPU tensors too (the CPU tests use that); nothing touches CUDA unless
asked to build on a CUDA device. torch is imported inside the functions.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cuda_facts import dtype_bytes, normalize_dtype
from ..records.launch import OutputCheck, WorstElement

# TileLang / TVM dtype names -> torch attribute names.
TORCH_DTYPES: dict[str, str] = {
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
    "float8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
    "tfloat32": "float32",  # tf32 is float32 storage: TileLang's tf32 tensors are torch float32 tensors
}

# Unit roundoff u = 2^-(stored mantissa bits + 1): the largest relative error of rounding one
# value to the type. "tfloat32" is what Hopper's tensor cores may round float32 operands to.
UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0 ** -53, "float32": 2.0 ** -24, "tfloat32": 2.0 ** -11, "float16": 2.0 ** -11,
    "bfloat16": 2.0 ** -8, "float8_e4m3": 2.0 ** -4, "float8_e4m3fn": 2.0 ** -4,
    "float8_e4m3fnuz": 2.0 ** -4, "float8_e5m2": 2.0 ** -3, "float8_e5m2fnuz": 2.0 ** -3,
}


# Types narrower than a byte, packed along a tensor's last dimension (TileLang's rule for sub-byte
# types): the tensor a kernel takes for ``(m, n)`` such elements is a byte tensor of shape
# ``(m, n // per_byte)``, element 2k in the low half of byte k.
PACKED_PER_BYTE: dict[str, int] = {"float4_e2m1fn": 2, "int4": 2, "uint4": 2}


def packed_per_byte(p: Param, value: Any) -> int:
    """How many of ``p``'s elements one element of the tensor ``value`` holds: 2 for a sub-byte type
    given as the bytes that pack it, else 1 (a shape tuple or a tensor of the type itself)."""
    per = PACKED_PER_BYTE.get(p.dtype, 1)
    if per == 1 or not hasattr(value, "element_size") or value.element_size() != 1:
        return 1
    return per


def _unpacked_shape(p: Param, shape: tuple[Any, ...], per: int) -> tuple[int, ...]:
    """The element shape of a packed tensor's byte shape (its last extent times ``per``)."""
    return (*(int(e) for e in shape[:-1]), int(shape[-1]) * per)


def _packed_what(p: Param, shape: tuple[Any, ...], per: int) -> str:
    return (f"{p.dtype} tensor of {[int(e) for e in shape]} bytes ({per} elements a byte along the last "
            "dimension), in elements,")


def canonical_dtype(dtype: Any) -> str:
    """"float16" for T.float16, torch.float16, "float16", tvm DataType(...); a type tilelab has no
    table for comes back as written (:func:`torch_dtype` then says it cannot build it)."""
    return normalize_dtype(dtype, strict=False)


def torch_dtype(dtype: Any):  # -> torch.dtype
    import torch

    name = canonical_dtype(dtype)
    attr = TORCH_DTYPES.get(name)
    if attr is None or not hasattr(torch, attr):
        raise TypeError(f"tilelab cannot build a torch tensor of TileLang dtype {name!r}; pass the tensor yourself")
    return getattr(torch, attr)


def element_bytes(dtype: Any) -> int:
    """Bytes per element; an unknown dtype raises ValueError naming it (never a guessed size)."""
    return dtype_bytes(dtype)


def is_float(dtype: Any) -> bool:
    return canonical_dtype(dtype).startswith(("float", "bfloat"))


def tolerance_for(output_dtype: Any, input_dtypes: Sequence[Any] = (), *, reduction: int = 1) -> float:
    """The tolerance on ``||out - ref|| / ||ref||`` for one output; the rule, term by term:

    ``2*u(output) + 2*u(operands) + 2*sqrt(reduction)*u(accumulator)``, ``u`` the unit roundoff
    (:data:`UNIT_ROUNDOFF`), where

    * the output term covers rounding each result to the output dtype once (the norm of
      uniformly distributed rounding errors is about ``u/sqrt(3)`` of the reference's: 2u leaves
      a 3x margin);
    * the operand term is 0 when the inputs are 16- or 8-bit floats or integers: the reference
      sees the same rounded input values (upcast to float64), and tensor cores multiply such
      operands exactly. float32 inputs may be rounded to tf32 by the tensor cores: ``u(tfloat32)``;
    * the accumulation term is the usual random-walk bound of a sum of ``reduction`` products
      (``K`` of a GEMM; 1 for elementwise kernels): relative error about ``sqrt(K)*u`` of the
      accumulator, assumed float32 (what wgmma/mma accumulate 16- and 8-bit floats in), float64
      when an input is float64, exact (0) for integer inputs.

    So an fp16 GEMM with K=4096 and an fp16 output gets 2*2^-11 + 2*64*2^-24 = 9.84e-4: fp32
    accumulation (error about 3e-4, the output's rounding) passes, fp16 accumulation (about
    sqrt(K)*2^-11 ~ 1e-2) fails. Integer outputs must match exactly (0.0).
    """
    if isinstance(output_dtype, (list, tuple)):
        raise TypeError("tolerance_for takes the output's dtype first, then the inputs' dtypes: "
                        "tolerance_for('float16', ['float16', 'float16'], reduction=K)")
    out = canonical_dtype(output_dtype)
    if not is_float(out):
        return 0.0
    names = [canonical_dtype(d) for d in input_dtypes]
    float_inputs = [n for n in names if is_float(n)]
    u_out = UNIT_ROUNDOFF.get(out, 2.0 ** -3)  # an unknown float type: as coarse as fp8
    u_operands = UNIT_ROUNDOFF["tfloat32"] if "float32" in float_inputs else 0.0
    if not float_inputs:
        u_acc = 0.0  # integer products summed in integers: exact
    elif "float64" in float_inputs:
        u_acc = UNIT_ROUNDOFF["float64"]
        u_operands = 0.0
    else:
        u_acc = UNIT_ROUNDOFF["float32"]
    return 2.0 * u_out + 2.0 * u_operands + 2.0 * math.sqrt(max(1, int(reduction))) * u_acc


# ------------------------------------------------------------------------------------------
# Signature
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One launch parameter as run/bench need it (built from the engine's ``Argument``)."""

    name: str
    kind: str  # "tensor" | "scalar"
    dtype: str
    shape: tuple[Any, ...] = ()  # ints and symbolic text ("M", "m * 2")
    is_output: bool = False
    passed_at_launch: bool = True
    strided: bool = False  # True for a strided_tensor parameter: any strides are taken


def params_from_arguments(arguments: Sequence[Any]) -> list[Param]:
    """Launch parameters in call order from ``KernelReport.arguments`` / ``_tilelang.arguments``."""
    out: list[Param] = []
    for a in arguments:
        if a.kind in ("tensor", "strided_tensor"):
            out.append(Param(a.name, "tensor", canonical_dtype(a.dtype), tuple(a.shape or ()),
                             bool(a.is_output), bool(a.passed_at_launch), a.kind == "strided_tensor"))
        elif a.kind == "scalar":
            out.append(Param(a.name, "scalar", canonical_dtype(a.dtype), (), False, True))
    return out


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load,
                  ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.USub, ast.Call)


def eval_dim(dim: Any, sizes: dict[str, int]) -> int:
    """A concrete extent from an int or a symbolic expression over ``sizes``."""
    if isinstance(dim, int):
        return dim
    text = str(dim).replace("T.int64(", "(").replace("T.int32(", "(")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"cannot read the extent {dim!r}") from err
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"cannot evaluate the extent {dim!r}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
            raise ValueError(f"cannot evaluate the extent {dim!r}")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {"min", "max"}
    missing = sorted(names - set(sizes))
    if missing:
        raise ValueError(f"size {', '.join(missing)} is dynamic: pass it, e.g. {missing[0]}=4096")
    value = eval(compile(tree, "<extent>", "eval"), {"__builtins__": {"min": min, "max": max}}, dict(sizes))
    return int(value)


def _shape_text(p: Param) -> str:
    return "(" + ", ".join(str(d) for d in p.shape) + ")"


def bind_sizes(params: Sequence[Param], given: Sequence[Any], sizes: dict[str, int]) -> dict[str, int]:
    """Symbolic sizes: those passed by name plus those read off tensors or shapes given.

    Checks, for every tensor or shape given, the number of dimensions, every static extent and
    every extent named by a plain symbol (``m``) against the others; extents and sizes must be
    positive. Extents given by expressions (``m * 2``) are checked once every size is bound
    (:func:`check_extents`)."""
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise ValueError(f"size {key}={value!r} must be a positive integer")
        if int(value) <= 0:
            raise ValueError(f"size {key}={int(value)} must be positive: pass {key}=1 or more")
    bound = {k: int(v) for k, v in sizes.items()}
    launch = [p for p in params if p.passed_at_launch]
    for p, value in zip(launch, given):
        if p.kind != "tensor" or value is None:
            continue
        what = "tensor" if hasattr(value, "data_ptr") else "shape"
        shape = tuple(value.shape) if hasattr(value, "shape") else tuple(value)
        per = packed_per_byte(p, value)
        if per > 1 and shape:  # the bytes of a packed sub-byte tensor: its last extent in elements
            what = _packed_what(p, shape, per)
            shape = _unpacked_shape(p, shape, per)
        if len(shape) != len(p.shape):
            raise ValueError(f"{p.name} has {len(p.shape)} dims {list(p.shape)}; got {what} of shape {list(shape)}")
        for axis, (dim, extent) in enumerate(zip(p.shape, shape)):
            extent = int(extent)
            if extent <= 0 and not (isinstance(dim, int) and dim == extent == 0):  # compiled empty: as on a GPU
                raise ValueError(f"{p.name} needs a positive extent in dim {axis} (expected {dim}); the {what} "
                                 f"given has shape {list(shape)}: an empty tensor cannot be launched on")
            if isinstance(dim, int):
                if dim != extent:
                    raise ValueError(f"{p.name} must have shape {_shape_text(p)}; the {what} given has shape "
                                     f"{list(shape)} (dim {axis} is {extent}, the kernel was compiled for {dim})")
            elif isinstance(dim, str) and dim.isidentifier():
                if dim in bound and bound[dim] != extent:
                    raise ValueError(f"{dim} is {bound[dim]} but {p.name} has extent {extent} in dim {axis} "
                                     f"(shape {_shape_text(p)}): give every tensor the same {dim}")
                bound[dim] = extent
    for p, value in zip(launch, given):  # a scalar parameter that is also a size (T.empty([m + 1]) of m: T.int32)
        if p.kind == "scalar" and p.name not in bound and hasattr(value, "__index__") and not isinstance(value, bool) \
                and any(re.search(rf"\b{re.escape(p.name)}\b", _shape_text(q)) for q in params if q.kind == "tensor"):
            bound[p.name] = int(value)
    _solve_linear_extents(launch, given, bound)
    return bound


def _solve_linear_extents(launch: Sequence[Param], given: Sequence[Any], bound: dict[str, int]) -> None:
    """Sizes that a tensor gives only through an extent linear in one of them (``n * 4``, ``n * 3 + 1``),
    solved from the tensor's extent when it is a whole step of the expression (``check_extents`` then
    checks it). A size no tensor gives alone is still asked for by name."""
    for p, value in zip(launch, given):
        if p.kind != "tensor" or value is None or not hasattr(value, "shape") or packed_per_byte(p, value) > 1:
            continue
        for dim, extent in zip(p.shape, tuple(value.shape)):
            if isinstance(dim, int) or not isinstance(dim, str) or dim.isidentifier():
                continue
            try:
                tree = ast.parse(dim.replace("T.int64(", "(").replace("T.int32(", "("), mode="eval")
                names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {"min", "max"}
            except SyntaxError:
                continue
            free = sorted(names - set(bound))
            if len(free) != 1:
                continue
            try:
                at = [eval_dim(dim, {**bound, free[0]: x}) for x in (0, 1, 2)]
            except (ValueError, ArithmeticError):
                continue
            step, start = at[1] - at[0], at[0]
            if step and at[2] == start + 2 * step and (int(extent) - start) % step == 0 \
                    and (int(extent) - start) // step > 0:
                bound[free[0]] = (int(extent) - start) // step


def check_extents(p: Param, shape: Sequence[int], bound: dict[str, int], what: str = "tensor") -> None:
    """Every extent of ``shape`` equals the parameter's, symbolic expressions evaluated."""
    for axis, (dim, extent) in enumerate(zip(p.shape, shape)):
        expected = eval_dim(dim, bound)
        if expected != int(extent):
            raise ValueError(f"{p.name} must have shape {_shape_text(p)} = {[eval_dim(d, bound) for d in p.shape]} "
                             f"with {', '.join(f'{k}={v}' for k, v in sorted(bound.items())) or 'these sizes'}; "
                             f"the {what} given has shape {[int(x) for x in shape]} (dim {axis})")
        if expected < 0 or expected == 0 and not isinstance(dim, int):  # an extent compiled as 0 is the kernel's
            raise ValueError(f"{p.name} would have extent {expected} in dim {axis} ({dim}): sizes must make "
                             "every extent positive")


def validate_tensor(p: Param, value: Any, bound: dict[str, int], device: Any = None) -> None:
    """A tensor given for ``p``: extents, dtype, device and layout, or ValueError saying what to change."""
    import torch

    shape = tuple(value.shape)
    per = packed_per_byte(p, value)
    if per > 1 and shape:
        check_extents(p, _unpacked_shape(p, shape, per), bound, what=_packed_what(p, shape, per))
    else:
        check_extents(p, shape, bound)
    try:
        expected = torch_dtype(p.dtype)
    except TypeError:
        expected = None
    if expected is not None and value.dtype != expected:
        raise ValueError(f"{p.name} must be {expected} (the kernel's {p.dtype}); got {value.dtype}: "
                         f"pass {p.name}.to({expected})")
    if device is not None:
        want = torch.device(device).type
        if value.device.type != want:
            raise ValueError(f"{p.name} must be on the {want} device; got a tensor on {value.device}: "
                             f"pass {p.name}.to('{want}')" + (" (is_cuda is False)" if want == "cuda" else ""))
    if not p.strided and not value.is_contiguous():
        raise ValueError(f"{p.name} must be contiguous (row-major, the kernel reads it with the strides of shape "
                         f"{list(value.shape)}); got strides {list(value.stride())}: pass {p.name}.contiguous()")


def random_tensor(shape: Sequence[int], dtype: Any, *, device: Any = "cuda", generator: Any = None):
    """Random values of ``dtype``: normal for floats, small signed/unsigned integers; never zeros."""
    import torch

    tdt = torch_dtype(dtype)
    name = canonical_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if tdt == torch.bool:
        return torch.randint(0, 2, shape, device=device, generator=generator).bool()
    if tdt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):  # drawn in its dtype: one pass
        return torch.randn(shape, device=device, dtype=tdt, generator=generator)
    if is_float(name):
        base = torch.randn(shape, device=device, dtype=torch.float32, generator=generator)
        return base.to(tdt)
    if name.startswith("uint"):
        return torch.randint(1, 16, shape, device=device, generator=generator).to(tdt)
    return torch.randint(-8, 8, shape, device=device, generator=generator).to(tdt)


def build_inputs(params: Sequence[Param], given: Sequence[Any], sizes: dict[str, int], *,
                 device: Any = "cuda", seed: int | None = None) -> tuple[list[Any], dict[str, int]]:
    """Arguments for every parameter passed at launch, in order.

    Each given value may be a tensor (used as is, once its shape, dtype, device and layout are
    checked), a shape tuple (a random tensor of that shape) or, for scalars, a number.
    Parameters not given are built from the signature, with dynamic sizes from ``sizes``.
    Output tensors passed at launch are allocated (``torch.empty``) and left for the caller to
    poison. Bad input raises ValueError naming the parameter, what it needs and what it got.
    """
    import torch

    launch = [p for p in params if p.passed_at_launch]
    if len(given) > len(launch):
        raise TypeError(f"the kernel takes {len(launch)} arguments at launch "
                        f"({', '.join(p.name for p in launch)}); got {len(given)}")
    bound = bind_sizes(params, given, sizes)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
    args: list[Any] = []
    for i, p in enumerate(launch):
        value = given[i] if i < len(given) else None
        if p.kind == "scalar":
            if value is None:
                if p.name in bound:
                    value = bound[p.name]
                else:
                    raise TypeError(f"scalar parameter {p.name} ({p.dtype}) needs a value: pass {p.name}=...")
            elif p.name in bound and hasattr(value, "__index__") and int(value) != bound[p.name]:
                # One value on a GPU too: TileLang's entry point refuses such a call.
                holders = [q.name for q in launch
                           if q.kind == "tensor" and re.search(rf"\b{re.escape(p.name)}\b", _shape_text(q))]
                raise ValueError(f"scalar parameter {p.name} is {int(value)}, but it is also a size of "
                                 f"{', '.join(holders) or 'the tensors'}, which the tensors given make "
                                 f"{bound[p.name]}: pass {p.name}={bound[p.name]}, or tensors of that size")
            args.append(value)
            continue
        if value is not None and hasattr(value, "data_ptr"):
            validate_tensor(p, value, bound, device)
            args.append(value)
            continue
        if value is not None:
            shape = tuple(int(v) for v in value)
            check_extents(p, shape, bound, what="shape")
        else:
            shape = tuple(eval_dim(d, bound) for d in p.shape)
            bad = [(d, e) for d, e in zip(p.shape, shape) if e < 0 or e == 0 and not isinstance(d, int)]
            if bad:
                raise ValueError(f"{p.name} would have shape {list(shape)} ({_shape_text(p)} with "
                                 f"{', '.join(f'{k}={v}' for k, v in sorted(bound.items()))}): every extent must "
                                 "be positive")
        if p.is_output:
            args.append(torch.empty(shape, dtype=torch_dtype(p.dtype), device=device))
        else:
            args.append(random_tensor(shape, p.dtype, device=device, generator=generator))
    return args, bound


# ------------------------------------------------------------------------------------------
# Poison and comparison
# ------------------------------------------------------------------------------------------


POISON = 0xFF  # every byte: a NaN in float16/bfloat16/float32/float64/e4m3fn/e5m2
SECOND_POISON = 0x5A  # the second launch's pattern where 0xFF bytes are a value the kernel may write


def poison_is_value(dtype: Any) -> bool:
    """True where all-0xFF bytes are an ordinary value: integers (-1, 255, ...), bool, and the
    fnuz float8 types (whose only NaN is 0x80, so 0xFF is -240 or -57344). Outputs of these
    types are launched twice, with :data:`POISON` and :data:`SECOND_POISON`."""
    name = canonical_dtype(dtype)
    return not is_float(name) or name.endswith("fnuz")


def poison_(tensor: Any, pattern: int = POISON) -> Any:
    """Fill with the poison pattern: every byte ``pattern`` (0xFF: a NaN for IEEE-like floats)."""
    import torch

    if tensor.is_contiguous():
        tensor.view(torch.uint8).fill_(pattern)
    else:
        filled = torch.empty(tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
        filled.view(torch.uint8).fill_(pattern)
        tensor.copy_(filled)
    return tensor


def unwritten_mask(tensor: Any, pattern: int = POISON):  # -> torch.BoolTensor
    """Elements whose bytes are still exactly the poison pattern (compared as one integer word per
    element where the element is 1, 2, 4 or 8 bytes: one pass, not a reduction over bytes)."""
    import torch

    size = tensor.element_size()
    words = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if size in words:
        word = int.from_bytes(bytes([pattern]) * size, "little", signed=size > 1)
        return tensor.contiguous().view(words[size]) == word
    as_bytes = tensor.contiguous().view(torch.uint8).reshape(*tensor.shape, size)
    return (as_bytes == pattern).all(dim=-1)


def count_nonfinite(tensor: Any) -> int:
    """NaN and inf elements of a floating-point tensor (0 for others), read from the exponent bits
    of IEEE formats in one integer pass (float16, bfloat16, float32, float64), else by isfinite."""
    import torch

    if not tensor.is_floating_point():
        return 0
    exponent = {torch.float16: (torch.int16, 0x7C00), torch.bfloat16: (torch.int16, 0x7F80),
                torch.float32: (torch.int32, 0x7F800000), torch.float64: (torch.int64, 0x7FF0000000000000)}
    if tensor.dtype in exponent:
        word, mask = exponent[tensor.dtype]
        bits = tensor.contiguous().view(word)
        return int(torch.count_nonzero((bits & mask) == mask).item())
    return int(torch.count_nonzero(~torch.isfinite(tensor.float())).item())  # float8 and others: through float32


def unwritten_in_both(first: Any, second: Any):  # -> torch.BoolTensor
    """Elements never written by either of two launches: still :data:`POISON` after the first
    (poisoned with it) and still :data:`SECOND_POISON` after the second. A deterministic kernel
    writes the same value both times, which cannot equal two different patterns."""
    return unwritten_mask(first, POISON) & unwritten_mask(second, SECOND_POISON)


def compare(name: str, out: Any, ref: Any | None, *, tolerance: float | None, poisoned: bool = True,
            worst: int = 5, second: Any | None = None) -> OutputCheck:
    """Unwritten elements, NaN/inf and the relative error norm of one output against ``ref``.

    ``out`` was poisoned with :data:`POISON` before the launch. ``second`` is the same output
    from a second launch poisoned with :data:`SECOND_POISON` (for dtypes where the poison is a
    value, :func:`poison_is_value`): an element is unwritten only if it kept the poison in both.
    Without ``second`` such an element counts as written where the reference also holds it.
    """
    # Long by its docstring; the body is the checks of one output in the order they are reported.
    import torch

    shape = tuple(int(s) for s in out.shape)
    dtype = canonical_dtype(out.dtype)
    unwritten = 0
    first = None
    mask = None
    expected = None
    if ref is not None:
        expected = torch.as_tensor(ref, device=out.device)
        if tuple(expected.shape) != shape:
            try:
                expected = expected.expand(shape)
            except RuntimeError as err:
                raise ValueError(f"the reference for {name} has shape {list(expected.shape)}, the output "
                                 f"{list(shape)}") from err
    if poisoned:
        if second is not None:
            mask = unwritten_in_both(out, second)
        else:
            mask = unwritten_mask(out)
            if expected is not None and poison_is_value(dtype):
                # The poison is a value this kernel may write: unwritten only where ref differs.
                mask &= ~unwritten_mask(expected.to(out.dtype))
        unwritten = int(torch.count_nonzero(mask).item())
        if unwritten:
            first = tuple(int(i) for i in torch.nonzero(mask)[0].tolist())
        else:
            mask = None
    got = out.detach().to(torch.float64)
    written = ~mask if mask is not None else None
    nonfinite = 0
    first_nonfinite = None
    if is_float(dtype):
        bad = ~torch.isfinite(got)
        if written is not None:
            bad &= written
        if expected is not None:
            bad &= torch.isfinite(expected.to(torch.float64))
        nonfinite = int(torch.count_nonzero(bad).item())
        if nonfinite:
            first_nonfinite = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
    if expected is None:
        return OutputCheck(name, dtype, shape, unwritten, first, poisoned, nonfinite,
                           first_nonfinite=first_nonfinite)
    expected = expected.to(torch.float64)
    # Error figures over the elements the kernel wrote; unwritten ones are counted apart. Where
    # the reference is NaN or inf, an element matches when the kernel wrote the same (NaN for
    # NaN, an infinity of the same sign), as numpy's assert_allclose treats them.
    diff = element_errors(got, expected)
    ref_nan_mask = torch.isnan(expected)
    if written is not None:
        ref_nan_mask &= written
    ref_nan = int(torch.count_nonzero(ref_nan_mask).item())
    first_ref_nan = tuple(int(i) for i in torch.nonzero(ref_nan_mask)[0].tolist()) if ref_nan else None
    finite_ref = torch.where(torch.isfinite(expected), expected, torch.zeros_like(expected))
    if written is not None:
        diff = torch.where(written, diff, torch.zeros_like(diff))
        finite_ref = torch.where(written, finite_ref, torch.zeros_like(finite_ref))
        ref_norm = float(torch.linalg.vector_norm(finite_ref).item())
    else:
        ref_norm = float(torch.linalg.vector_norm(finite_ref).item())
    num = float(torch.linalg.vector_norm(diff).item())
    if math.isinf(num) or math.isnan(num):
        rel = float("nan")
    elif ref_norm == 0.0:
        rel = 0.0 if num == 0.0 else float("inf")
    else:
        rel = num / ref_norm
    ranked = diff.flatten()
    k = min(worst, ranked.numel())
    worst_items: list[WorstElement] = []
    if k:
        values, flat_idx = torch.topk(ranked, k)
        for v, fi in zip(values.tolist(), flat_idx.tolist()):
            if v <= 0:
                break
            index = _unravel(int(fi), shape)
            worst_items.append(WorstElement(name, index, float(got[index].item()),
                                            float(expected[index].item()), float(v)))
    max_abs = float(ranked.max().item()) if ranked.numel() else 0.0
    return OutputCheck(name, dtype, shape, unwritten, first, poisoned, nonfinite, rel, max_abs,
                       tolerance, tuple(worst_items), first_nonfinite=first_nonfinite, ref_nan=ref_nan,
                       first_ref_nan=first_ref_nan)


def element_errors(got: Any, expected: Any):  # -> torch.Tensor of float64
    """``|got - expected|`` per element (float64 tensors of one shape), 0 where both are NaN or
    both the same infinity (numpy's ``assert_allclose`` counts those equal), inf where only one
    side is NaN or they are different infinities."""
    import torch

    same = (got == expected) | (torch.isnan(got) & torch.isnan(expected))
    diff = torch.nan_to_num((got - expected).abs(), nan=float("inf"))
    return torch.where(same, torch.zeros_like(diff), diff)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for extent in reversed(shape):
        index.append(flat % extent if extent else 0)
        flat //= extent if extent else 1
    return tuple(reversed(index))


_EXACT_INTEGER_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def upcast(values: Sequence[Any], dtype: Any = None) -> list[Any]:
    """Copies of the tensors in higher precision for the reference (float64 by default).

    Floating tensors are converted; integer tensors too where every value is exactly
    representable in the target (int8/int16/int32/uint8 in float64 always, int64 when every
    |value| <= 2^53), so ``ref=torch.matmul`` works on an int8 GEMM. Other values pass as given.
    """
    import torch

    target = dtype or torch.float64
    bits = _EXACT_INTEGER_BITS.get(canonical_dtype(target))
    out = []
    for v in values:
        tensor = hasattr(v, "is_floating_point")
        if tensor and v.is_floating_point() or (bits is not None and tensor and v.dtype != torch.bool
                                                and not v.is_complex() and _fits(v, bits)):
            out.append(v.detach().to(target))
        else:
            out.append(v)
    return out


def _fits(tensor: Any, bits: int) -> bool:
    if tensor.numel() == 0:
        return True
    if tensor.element_size() * 8 <= bits:
        return True  # every value of a narrow integer type fits the mantissa
    return int(tensor.abs().max().item()) <= 2 ** bits


def gemm_shape(inputs: Sequence[tuple[int, ...]], outputs: Sequence[tuple[int, ...]]) -> tuple[int, int, int] | None:
    """(M, N, K) when the shapes read as C(M,N) = A(M,K|K,M) @ B(K,N|N,K); None when they do not.

    Shapes alone cannot tell a GEMM from an elementwise kernel on square tensors: callers that
    count FLOPs also ask the compiled source (``tilelab._tilelang.source.is_matrix_multiply``)."""
    if len(outputs) != 1 or len(inputs) != 2:
        return None
    out, (a, b) = outputs[0], inputs
    if len(out) != 2 or len(a) != 2 or len(b) != 2:
        return None
    m, n = out
    for a_mk in (a, a[::-1]):
        for b_kn in (b, b[::-1]):
            if a_mk[0] == m and b_kn[1] == n and a_mk[1] == b_kn[0]:
                return int(m), int(n), int(a_mk[1])
    return None


def param_shapes(params: Sequence[Param], sizes: dict[str, int]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Concrete (input shapes, output shapes) of the tensor parameters."""
    ins: list[tuple[int, ...]] = []
    outs: list[tuple[int, ...]] = []
    for p in params:
        if p.kind == "tensor":
            (outs if p.is_output else ins).append(tuple(eval_dim(d, sizes) for d in p.shape))
    return ins, outs
