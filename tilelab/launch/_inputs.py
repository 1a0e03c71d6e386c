"""Inputs from a kernel's signature, poison, tolerances and the comparison with a reference.

Everything here works on CPU tensors too (the CPU tests use that); nothing touches CUDA unless
asked to build on a CUDA device. torch is imported inside the functions.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Sequence

from .models import OutputCheck, WorstElement

# TileLang / TVM dtype names -> torch attribute names.
TORCH_DTYPES: dict[str, str] = {
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
    "float8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}

# Relative-error-norm tolerances, ||out - ref|| / ||ref||, by the least precise dtype involved.
# float32 arithmetic lands far under 1e-3; tf32 (Hopper's matrix units on fp32) near 3e-4;
# fp16 operands with fp32 accumulation and an fp16 result near 3e-4 (rounding of the result);
# bf16 between 1e-3 and 1e-2; fp8 a few percent. Integers must match exactly.
TOLERANCES: dict[str, float] = {
    "float64": 1e-10, "float32": 1e-3, "float16": 2e-3, "bfloat16": 1.6e-2,
    "float8_e4m3": 8e-2, "float8_e4m3fn": 8e-2, "float8_e4m3fnuz": 8e-2,
    "float8_e5m2": 1.5e-1, "float8_e5m2fnuz": 1.5e-1,
}
_PRECISION_ORDER = ["float64", "float32", "float16", "bfloat16", "float8_e4m3", "float8_e4m3fn",
                    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]


def canonical_dtype(dtype: Any) -> str:
    """"float16" for T.float16, torch.float16, "float16", tvm DataType(...)."""
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    aliases = {"half": "float16", "float": "float32", "double": "float64", "bf16": "bfloat16",
               "fp16": "float16", "fp32": "float32", "float8_e4m3fn": "float8_e4m3fn"}
    return aliases.get(text, text)


def torch_dtype(dtype: Any):  # -> torch.dtype
    import torch

    name = canonical_dtype(dtype)
    attr = TORCH_DTYPES.get(name)
    if attr is None or not hasattr(torch, attr):
        raise TypeError(f"tilelab cannot build a torch tensor of TileLang dtype {name!r}; pass the tensor yourself")
    return getattr(torch, attr)


_ELEMENT_BYTES = {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
                  "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2}


def element_bytes(dtype: Any) -> int:
    """Bytes per element (1 for 8-bit and bool types)."""
    return _ELEMENT_BYTES.get(canonical_dtype(dtype), 1)


def is_float(dtype: Any) -> bool:
    return canonical_dtype(dtype).startswith(("float", "bfloat"))


def tolerance_for(dtypes: Sequence[Any], *, integer_exact: bool = True) -> float:
    """The relative-error tolerance for a kernel whose tensors have these dtypes.

    The least precise floating dtype among inputs and outputs decides; all-integer kernels must
    match exactly (0.0).
    """
    names = [canonical_dtype(d) for d in dtypes]
    floats = [n for n in names if n in TOLERANCES]
    if not floats:
        unknown_float = [n for n in names if is_float(n)]
        if unknown_float:
            return 1e-1
        return 0.0 if integer_exact else 1e-6
    return max(TOLERANCES[n] for n in floats)


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


def params_from_arguments(arguments: Sequence[Any]) -> list[Param]:
    """Launch parameters in call order from ``KernelReport.arguments`` / ``_adapter.arguments``."""
    out: list[Param] = []
    for a in arguments:
        if a.kind in ("tensor", "strided_tensor"):
            out.append(Param(a.name, "tensor", canonical_dtype(a.dtype), tuple(a.shape or ()),
                             bool(a.is_output), bool(a.passed_at_launch)))
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


def bind_sizes(params: Sequence[Param], given: Sequence[Any], sizes: dict[str, int]) -> dict[str, int]:
    """Symbolic sizes: those passed by name plus those read off tensors or shapes given."""
    bound = dict(sizes)
    launch = [p for p in params if p.passed_at_launch]
    for p, value in zip(launch, given):
        if p.kind != "tensor" or value is None:
            continue
        shape = tuple(value.shape) if hasattr(value, "shape") else tuple(value)
        if len(shape) != len(p.shape):
            raise ValueError(f"{p.name} has {len(p.shape)} dims {list(p.shape)}; got shape {list(shape)}")
        for dim, extent in zip(p.shape, shape):
            if isinstance(dim, str) and dim.isidentifier():
                if dim in bound and bound[dim] != int(extent):
                    raise ValueError(f"{dim} is {bound[dim]} but {p.name} has extent {int(extent)}")
                bound[dim] = int(extent)
    return bound


def random_tensor(shape: Sequence[int], dtype: Any, *, device: Any = "cuda", generator: Any = None):
    """Random values of ``dtype``: normal for floats, small signed/unsigned integers; never zeros."""
    import torch

    tdt = torch_dtype(dtype)
    name = canonical_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if tdt == torch.bool:
        return torch.randint(0, 2, shape, device=device, generator=generator).bool()
    if is_float(name):
        base = torch.randn(shape, device=device, dtype=torch.float32, generator=generator)
        return base.to(tdt)
    if name.startswith("uint"):
        return torch.randint(1, 16, shape, device=device, generator=generator).to(tdt)
    return torch.randint(-8, 8, shape, device=device, generator=generator).to(tdt)


def build_inputs(params: Sequence[Param], given: Sequence[Any], sizes: dict[str, int], *,
                 device: Any = "cuda", seed: int | None = None) -> tuple[list[Any], dict[str, int]]:
    """Arguments for every parameter passed at launch, in order.

    Each given value may be a tensor (used as is), a shape tuple (a random tensor of that shape)
    or, for scalars, a number. Parameters not given are built from the signature, with dynamic
    sizes from ``sizes``. Output tensors passed at launch are allocated (``torch.empty``) and left
    for the caller to poison.
    """
    import torch

    generator = None
    if seed is not None:
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
    bound = bind_sizes(params, given, sizes)
    launch = [p for p in params if p.passed_at_launch]
    if len(given) > len(launch):
        raise TypeError(f"the kernel takes {len(launch)} arguments at launch "
                        f"({', '.join(p.name for p in launch)}); got {len(given)}")
    args: list[Any] = []
    for i, p in enumerate(launch):
        value = given[i] if i < len(given) else None
        if p.kind == "scalar":
            if value is None:
                if p.name in bound:
                    value = bound[p.name]
                else:
                    raise TypeError(f"scalar parameter {p.name} ({p.dtype}) needs a value: pass {p.name}=...")
            args.append(value)
            continue
        if value is not None and hasattr(value, "data_ptr"):
            args.append(value)
            continue
        shape = tuple(int(v) for v in value) if value is not None else tuple(eval_dim(d, bound) for d in p.shape)
        if p.is_output:
            args.append(torch.empty(shape, dtype=torch_dtype(p.dtype), device=device))
        else:
            args.append(random_tensor(shape, p.dtype, device=device, generator=generator))
    return args, bound


# ------------------------------------------------------------------------------------------
# Poison and comparison
# ------------------------------------------------------------------------------------------


def poison_(tensor: Any) -> Any:
    """Fill with the poison pattern: every byte 0xFF (a NaN for every float type, -1 for ints)."""
    import torch

    if tensor.is_contiguous():
        tensor.view(torch.uint8).fill_(0xFF)
    else:
        filled = torch.empty(tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
        filled.view(torch.uint8).fill_(0xFF)
        tensor.copy_(filled)
    return tensor


def unwritten_mask(tensor: Any):  # -> torch.BoolTensor
    """Elements whose bytes are still exactly the poison pattern."""
    import torch

    size = tensor.element_size()
    as_bytes = tensor.contiguous().view(torch.uint8).reshape(*tensor.shape, size)
    return (as_bytes == 0xFF).all(dim=-1)


def compare(name: str, out: Any, ref: Any | None, *, tolerance: float | None, poisoned: bool = True,
            worst: int = 5) -> OutputCheck:
    """Unwritten elements, NaN/inf and the relative error norm of one output against ``ref``."""
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
        mask = unwritten_mask(out)
        if expected is not None and not is_float(dtype):
            # An integer kernel may legitimately write -1: it is unwritten only where ref differs.
            mask &= ~unwritten_mask(expected.to(out.dtype))
        unwritten = int(mask.sum().item())
        if unwritten:
            first = tuple(int(i) for i in torch.nonzero(mask)[0].tolist())
        else:
            mask = None
    got = out.detach().to(torch.float64)
    written = ~mask if mask is not None else None
    nonfinite = 0
    if is_float(dtype):
        bad = ~torch.isfinite(got)
        if written is not None:
            bad &= written
        if expected is not None:
            bad &= torch.isfinite(expected.to(torch.float64))
        nonfinite = int(bad.sum().item())
    if expected is None:
        return OutputCheck(name, dtype, shape, unwritten, first, poisoned, nonfinite)
    expected = expected.to(torch.float64)
    # Error figures over the elements the kernel wrote; unwritten ones are counted apart.
    diff = torch.nan_to_num((got - expected).abs(), nan=float("inf"))
    if written is not None:
        diff = torch.where(written, diff, torch.zeros_like(diff))
        ref_norm = float(torch.linalg.vector_norm(torch.where(written, expected, torch.zeros_like(expected))).item())
    else:
        ref_norm = float(torch.linalg.vector_norm(expected).item())
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
                       tolerance, tuple(worst_items))


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for extent in reversed(shape):
        index.append(flat % extent if extent else 0)
        flat //= extent if extent else 1
    return tuple(reversed(index))


def upcast(values: Sequence[Any], dtype: Any = None) -> list[Any]:
    """Copies of the tensors in higher precision for the reference (float64 by default)."""
    import torch

    target = dtype or torch.float64
    out = []
    for v in values:
        if hasattr(v, "is_floating_point") and v.is_floating_point():
            out.append(v.detach().to(target))
        else:
            out.append(v)
    return out
