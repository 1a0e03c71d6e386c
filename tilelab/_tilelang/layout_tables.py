"""The compiler's inferred layouts (``tl.LayoutInference``), evaluated for every logical element
over numpy grids."""

from __future__ import annotations

from typing import Any

from ..records.kernel import Layout
from .env import tilelang
from .errors import _reason
from .ir import Lowered, _dim

# Layout tables past this many elements are not tabulated (measured on 2 cores: 256 x 512 fp16 shared,
# 131,072 elements, evaluates in 13 ms, adds 0.94 MB to the report's JSON, and the whole HTML report
# renders in 0.15 s, the SVG cropping what it draws). Each layout left out is named in report.notes.
MAX_LAYOUT_ELEMENTS = 1 << 18


def layouts(lowered: Lowered, *, max_elements: int | None = None,
            left_out: list[str] | None = None) -> list[Layout]:
    """The compiler's inferred layouts, evaluated for every logical element.

    Shared buffers that the software pipeline replicates across stages are reported for one
    stage when every stage is the first one shifted by a constant (the description says so).
    Each layout not tabulated gets a sentence in ``left_out`` saying which and why.
    """
    left_out = [] if left_out is None else left_out
    max_elements = MAX_LAYOUT_ELEMENTS if max_elements is None else max_elements
    if lowered.layout_mod is None:
        return []
    tvm = tilelang().tvm
    found: dict[str, tuple[Any, Any, str]] = {}
    for gvar, func in lowered.layout_mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue

        def visit(node: Any, _k=gvar.name_hint) -> None:
            if isinstance(node, tvm.tirx.SBlock) and "layout_map" in node.annotations:
                for buf, lay in node.annotations["layout_map"].items():
                    found.setdefault(buf.name, (buf, lay, _k))

        tvm.tirx.stmt_functor.post_order_visit(func.body, visit)

    result = []
    for name, (buf, lay, _kname) in found.items():
        try:
            item = _layout_record(name, buf, lay, max_elements, left_out)
        except Exception as err:
            left_out.append(f"layout of {name} left out: tilelab could not evaluate it ({_reason(err)})")
            continue
        if item is not None:
            result.append(item)
    return result


def _layout_record(name: str, buf: Any, lay: Any, max_elements: int, left_out: list[str]) -> Layout | None:
    import numpy as np

    shape = tuple(int(_dim(s)) for s in lay.get_input_shape())
    total = int(np.prod(shape)) if shape else 0
    is_fragment = type(lay).__name__ == "Fragment"
    scope = str(buf.scope())
    if not is_fragment and not scope.startswith("shared"):
        # T.annotate_layout on a global tensor (an element order for atomics, say): its size is
        # the problem's, not a tile's, so it is described, never evaluated element by element.
        left_out.append(f"layout of {name} ({scope} memory, {total:,} elements) not tabulated: tilelab "
                        f"tabulates on-chip layouts; TileLang's description: {lay}")
        return None
    if not is_fragment and (int(np.prod(shape[1:])) if len(shape) >= 3 else total) > max_elements:
        left_out.append(f"layout of {name} left out: {total:,} elements, more than the "
                        f"{max_elements:,} tilelab tabulates")
        return None
    variables = list(lay.get_forward_vars())
    dtype = str(buf.dtype)
    if is_fragment:
        replicate = int(_dim(lay.replicate_size))
        # A replicated fragment puts its replica variable first among the forward vars.
        index_vars = variables[-len(shape):]
        rng = lay.thread_range
        base = int(_dim(rng.min)) if rng is not None else 0
        count = int(_dim(rng.extent)) if rng is not None else None
        if total > max_elements:
            left_out.append(f"layout of {name} not tabulated: {total:,} elements, more than the "
                            f"{max_elements:,} tilelab evaluates; only its description is kept")
            return Layout(buffer=name, scope="fragment", dtype=dtype, shape=shape, replicate=replicate,
                          thread_base=base, thread_count=count, description=f"{lay} (too large to tabulate)")
        env = _grid(index_vars, shape)
        if replicate > 1 and len(variables) > len(shape):
            env[variables[0].name] = np.zeros(shape, dtype=np.int64)
        threads = _evaluate(lay.forward_thread, env, shape)
        index = list(lay.forward_index)
        locals_ = _linearize([_evaluate(e, env, shape) for e in index], lay.get_output_shape())
        return Layout(
            buffer=name, scope="fragment", dtype=dtype, shape=shape,
            threads=tuple(threads.ravel().tolist()), locals_=tuple(locals_.ravel().tolist()),  # Python ints, at C speed
            replicate=replicate, thread_base=base, thread_count=count, description=str(lay),
        )
    env = _grid(variables, shape)
    offsets = _linearize([_evaluate(e, env, shape) for e in lay.forward_index], lay.get_output_shape())
    description = str(lay)
    if len(shape) >= 3:
        stage = int(np.prod(shape[1:]))
        stages = shape[0]
        if all((offsets[s] == offsets[0] + s * stage).all() for s in range(stages)):
            offsets = offsets[0]
            shape = shape[1:]
            description = (f"stage 0 of {stages} pipeline stages (stage s is stage 0 + s * {stage} elements); "
                           f"{description}")
    if int(np.prod(shape)) > max_elements:
        left_out.append(f"layout of {name} left out: {int(np.prod(shape)):,} elements, more than the "
                        f"{max_elements:,} tilelab tabulates")
        return None
    if (offsets.ravel() == np.arange(offsets.size)).all():
        left_out.append(f"layout of {name} not listed: plain row-major, no swizzle")
        return None
    return Layout(buffer=name, scope="shared", dtype=dtype, shape=tuple(shape),
                  offsets=tuple(offsets.ravel().tolist()), description=description)


def _grid(variables: list[Any], shape: tuple[int, ...]) -> dict[str, Any]:
    import numpy as np

    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")
    return {v.name: g for v, g in zip(variables, grids)}


def _linearize(parts: list[Any], out_shape: Any) -> Any:
    import numpy as np

    dims = [int(_dim(s)) for s in out_shape]
    total = np.zeros_like(parts[0])
    for value, extent in zip(parts, dims):
        total = total * extent + value
    return total.astype(np.int64)


def _evaluate(expr: Any, env: dict[str, Any], shape: tuple[int, ...]) -> Any:
    """Evaluate an index expression over numpy grids (TileLang's floordiv/floormod semantics)."""
    import numpy as np

    tir = tilelang().tvm.tirx

    def ev(e: Any) -> Any:
        if isinstance(e, tir.IntImm):
            return np.int64(e.value)
        if isinstance(e, tir.Var):
            return env[e.name]
        if isinstance(e, tir.Add):
            return ev(e.a) + ev(e.b)
        if isinstance(e, tir.Sub):
            return ev(e.a) - ev(e.b)
        if isinstance(e, tir.Mul):
            return ev(e.a) * ev(e.b)
        if isinstance(e, (tir.FloorDiv, tir.Div)):
            return np.floor_divide(ev(e.a), ev(e.b))
        if isinstance(e, (tir.FloorMod, tir.Mod)):
            return np.mod(ev(e.a), ev(e.b))
        if isinstance(e, tir.Min):
            return np.minimum(ev(e.a), ev(e.b))
        if isinstance(e, tir.Max):
            return np.maximum(ev(e.a), ev(e.b))
        if isinstance(e, tir.Cast):
            return ev(e.value)
        if isinstance(e, tir.Select):
            return np.where(ev(e.condition), ev(e.true_value), ev(e.false_value))
        for cls, fn in ((tir.EQ, np.equal), (tir.NE, np.not_equal), (tir.LT, np.less),
                        (tir.LE, np.less_equal), (tir.GT, np.greater), (tir.GE, np.greater_equal),
                        (tir.And, np.logical_and), (tir.Or, np.logical_or)):
            if isinstance(e, cls):
                return fn(ev(e.a), ev(e.b))
        if isinstance(e, tir.Call):
            name = getattr(e.op, "name", "")
            ops = {"tir.bitwise_xor": np.bitwise_xor, "tir.bitwise_and": np.bitwise_and,
                   "tir.bitwise_or": np.bitwise_or, "tir.shift_right": np.right_shift,
                   "tir.shift_left": np.left_shift}
            if name in ops:
                return ops[name](ev(e.args[0]), ev(e.args[1]))
            if name == "tir.if_then_else":
                return np.where(ev(e.args[0]), ev(e.args[1]), ev(e.args[2]))
        raise NotImplementedError(f"cannot evaluate {type(e).__name__}: {e}")

    return np.broadcast_to(ev(expr), shape).astype(np.int64)
