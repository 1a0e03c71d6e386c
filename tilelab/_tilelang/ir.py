"""Reading the lowered IR: the launch configuration of each device kernel, TMA descriptors, WGMMA
instructions (each checked against the generated CUDA), L2 persistence windows, the kernel's
arguments, its tile ops, and its grid and block read without lowering."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..cuda_facts import tma_enum_name as _enum
from ..records.kernel import (
    Argument,
    DeviceKernel,
    L2Window,
    LauncherSource,
    TmaDescriptor,
    WgmmaInstruction,
    WgmmaOperand,
)
from .env import tilelang
from .resolve import KernelSource
from .source import source_wgmma_calls


@dataclass
class Lowered:
    device_source: str
    host_mod: Any
    device_mod: Any
    layout_mod: Any | None
    launchers: dict[str, LauncherSource]
    prim_func: Any
    # Backends whose launcher generation raised: the failure may not repeat (not cacheable).
    transient_failures: tuple[str, ...] = ()
    family: str = "cuda"
    # Per-block limits TileLang's target declares (Metal's threadgroup memory and threads).
    limits: dict[str, int] = field(default_factory=dict)

    @functools.cached_property
    def host_order(self) -> tuple[dict[str, int], dict[str, int]]:
        """Where things first appear in the host function, in statement order (TVMScript's order,
        without printing it: a large kernel's host prints in tens of ms): each variable bound to a
        ``tvm_stack_alloca`` (a TMA descriptor's argument stack), and each string constant (the
        names of the device kernels it launches)."""
        tvm = tilelang().tvm
        stacks: dict[str, int] = {}
        strings: dict[str, int] = {}
        count = [0]
        # the statement binding a variable: Bind in this TVM ("A_desc = T.tvm_stack_alloca(...)")
        binds = tuple(getattr(tvm.tirx, n) for n in ("Bind", "LetStmt") if hasattr(tvm.tirx, n))

        def visit(node: Any) -> bool:
            count[0] += 1
            if isinstance(node, binds) and isinstance(getattr(node, "value", None), tvm.tirx.Call) and \
                    getattr(node.value.op, "name", "").endswith("tvm_stack_alloca"):
                stacks.setdefault(node.var.name, count[0])
            elif isinstance(node, tvm.tirx.StringImm):
                strings.setdefault(node.value, count[0])
            return True  # visit the children too

        tvm.tirx.stmt_functor.pre_order_visit(_host_func(self.host_mod)[1].body, visit)
        return stacks, strings


def _dim(value: Any) -> int | str:
    """An int for constants; the expression's text for symbolic sizes (``m``, ``k * 2``)."""
    tvm = tilelang().tvm
    if isinstance(value, int):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value.value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value.value)  # type: ignore[return-value]
    try:
        simplified = tvm.arith.Analyzer().simplify(value)
        if isinstance(simplified, tvm.tirx.IntImm):
            return int(simplified.value)
        value = simplified
    except Exception:
        pass
    return _expr_text(value)


def _expr_text(expr: Any) -> str:
    text = str(expr)
    # TVMScript wraps some constants/casts: T.int64(2) -> 2, T.Cast("int64", m) -> m
    text = re.sub(r"T\.(?:u?int\d+|float\d+)\((-?\d+)\)", r"\1", text)
    text = re.sub(r'T\.Cast\("\w+", (\w+)\)', r"\1", text)
    return text


def _device_funcs(device_mod: Any) -> list[tuple[str, Any]]:
    return [(g.name_hint, f) for g, f in device_mod.functions.items()]


def _host_func(host_mod: Any) -> tuple[str, Any]:
    items = list(host_mod.functions.items())
    return items[0][0].name_hint, items[0][1]


def kernel_launches(lowered: Lowered) -> list[DeviceKernel]:
    host_name, host = _host_func(lowered.host_mod)
    _, launched = lowered.host_order
    result = []
    for name, func in _device_funcs(lowered.device_mod):
        attrs = func.attrs
        grid: list[int | str] = [1, 1, 1]
        block: list[int | str] = [1, 1, 1]
        if attrs is not None and "thread_extent" in attrs:
            for tag, extent in attrs["thread_extent"].items():
                tag = str(tag)
                axis = "xyz".index(tag[-1])
                if "threadIdx" in tag:
                    block[axis] = _dim(extent)
                elif "blockIdx" in tag:
                    grid[axis] = _dim(extent)
        smem = _dim(attrs["dyn_shared_memory_buf"]) if attrs is not None and "dyn_shared_memory_buf" in attrs else 0
        cluster = None
        if attrs is not None and "cluster_dims" in attrs:
            dims = [int(v) for v in attrs["cluster_dims"]]
            cluster = tuple((dims + [1, 1, 1])[:3])
        order = launched.get(name, -1)
        pdl_sync = bool(attrs is not None and "has_cuda_pdl_sync" in attrs)
        cooperative = bool(attrs is not None and "use_cooperative_groups" in attrs
                           and bool(attrs["use_cooperative_groups"]))
        launch_params = [str(t) for t in attrs["tirx.kernel_launch_params"]] if (
            attrs is not None and "tirx.kernel_launch_params" in attrs) else []
        serialised = () if lowered.family != "cuda" else _programmatic_serialization(
            [b for b, item in lowered.launchers.items() if item.text is not None],
            pdl_sync=pdl_sync, cooperative=cooperative,
            clustered=cluster is not None and cluster != (1, 1, 1), launch_params=launch_params,
        )
        result.append((order if order >= 0 else 1 << 30, DeviceKernel(
            name=name,
            grid=tuple(grid),  # type: ignore[arg-type]
            block=tuple(block),  # type: ignore[arg-type]
            dynamic_shared_memory_bytes=smem,
            cluster_dims=cluster,  # type: ignore[arg-type]
            programmatic_dependent_launch=pdl_sync,
            cooperative=cooperative,
            programmatic_serialization_by=serialised,
        )))
    return [k for _, k in sorted(result, key=lambda item: item[0])]


def _programmatic_serialization(backends: list[str], *, pdl_sync: bool, cooperative: bool, clustered: bool,
                                launch_params: list[str]) -> tuple[str, ...]:
    """The backends whose TileLang 0.1.15 launcher sets the programmatic-stream-serialisation
    launch attribute for a kernel (it may then start before the previous kernel in the stream ends).

    * cython (``jit/adapter/wrapper.py``, ``KERNEL_LAUNCH_FUNC_CODE`` and the cluster variant):
      every ``cudaLaunchKernelEx``, whatever the kernel; only ``cudaLaunchCooperativeKernel`` sets none.
    * nvrtc (``nvrtc/wrapper.py``, ``PDL_SYNC_PY``): only kernels marked ``has_cuda_pdl_sync``.
    * cutedsl, C++ launcher (the default, ``TILELANG_CUTEDSL_HOST_LAUNCHER=cpp``): the cluster and
      PDL templates set it; plain and cooperative launches do not.
    * tvm_ffi (TVM's CUDA module): only when the kernel's ``tirx.kernel_launch_params`` carry
      TVM's tag ``tirx.use_programtic_dependent_launch`` (spelt so), which 0.1.15 never adds.
    """
    rules = {
        "tvm_ffi": "tirx.use_programtic_dependent_launch" in launch_params,
        "cython": not cooperative,
        "nvrtc": pdl_sync,
        "cutedsl": not cooperative and (clustered or pdl_sync),
    }
    return tuple(b for b in backends if rules.get(b, False))


def _device_param_names(lowered: Lowered) -> dict[str, str]:
    """descriptor/param name -> device kernel that takes it."""
    owner: dict[str, str] = {}
    for name, func in _device_funcs(lowered.device_mod):
        for param in func.params:
            owner.setdefault(param.name, name)
    return owner


def tma_descriptors(lowered: Lowered) -> list[TmaDescriptor]:
    """Decode ``tma_descriptor_args`` of the host function, in the order the host encodes them."""
    _, host = _host_func(lowered.host_mod)
    attrs = host.attrs
    if attrs is None or "tma_descriptor_args" not in attrs:
        return []
    buffer_of = {buf.data.name: buf.name for buf in lowered.prim_func.buffer_map.values()}
    owner = _device_param_names(lowered)
    stacks, _ = lowered.host_order
    found = []
    for desc_var, raw in attrs["tma_descriptor_args"].items():
        args = list(raw)
        call = getattr(args[0], "value", None)  # the packed function's name, a StringImm
        call = call if isinstance(call, str) else str(args[0])
        name = desc_var.name
        address = args[4]
        address_name = getattr(address, "name", None) or _expr_text(address)
        buffer = buffer_of.get(address_name, address_name)
        dtype = _enum("dtype", _dim(args[2]))
        rank = int(_dim(args[3]))
        rest = args[5:]

        def take(n: int) -> list[Any]:
            nonlocal rest
            head, rest = rest[:n], rest[n:]
            return [_dim(v) for v in head]

        if "im2col" in call:
            global_dim, global_stride, element_strides = take(rank), take(rank), take(rank)
            lower_corner, upper_corner = take(rank - 2), take(rank - 2)
            # IR order: pixelsPerColumn then channelsPerPixel (the driver call takes channels first).
            pixels, channels = take(1)[0], take(1)[0]
            interleave, swizzle, l2, oob = take(4)
            desc = TmaDescriptor(
                name=name, buffer=buffer, kind="im2col", dtype=dtype, rank=rank,
                global_dim=tuple(global_dim), global_stride_bytes=tuple(global_stride),
                element_strides=tuple(element_strides),
                lower_corner=tuple(int(v) for v in lower_corner), upper_corner=tuple(int(v) for v in upper_corner),
                pixels_per_column=pixels, channels_per_pixel=channels,
                interleave=_enum("interleave", interleave), swizzle=_enum("swizzle", swizzle),
                l2_promotion=_enum("l2_promotion", l2), oob_fill=_enum("oob_fill", oob),
                kernel=owner.get(name),
            )
        else:
            global_dim, global_stride, box, element_strides = take(rank), take(rank), take(rank), take(rank)
            interleave, swizzle, l2, oob = take(4)
            desc = TmaDescriptor(
                name=name, buffer=buffer, kind="tiled", dtype=dtype, rank=rank,
                global_dim=tuple(global_dim), global_stride_bytes=tuple(global_stride),
                box_dim=tuple(box), element_strides=tuple(element_strides),
                interleave=_enum("interleave", interleave), swizzle=_enum("swizzle", swizzle),
                l2_promotion=_enum("l2_promotion", l2), oob_fill=_enum("oob_fill", oob),
                kernel=owner.get(name),
            )
        found.append((stacks.get(name, 1 << 30), desc))
    return [d for _, d in sorted(found, key=lambda item: item[0])]


def _calls(func: Any, op_names: set[str]) -> list[Any]:
    tvm = tilelang().tvm
    out: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Call) and hasattr(node.op, "name") and node.op.name in op_names:
            out.append(node)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    return out


_WGMMA_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "tfloat32",
                 "e4m3": "float8_e4m3", "e5m2": "float8_e5m2", "s8": "int8", "u8": "uint8", "s32": "int32"}


def _object_identity(obj: Any) -> int:
    """The address of the TVM object behind ``obj``: two variables that share a name differ here."""
    handle = getattr(obj, "__chandle__", None)
    return int(handle()) if callable(handle) else id(obj)


def _pointer_buffer(pointer: Any) -> str | None:
    """The buffer a WGMMA descriptor's start address points into: ``tvm_access_ptr(type, data,
    ...)``, possibly shifted by ``handle_add_byte_offset`` (a later stage of a multi-versioned
    buffer, e.g. the second pipeline stage of a warp-specialised GEMM)."""
    tvm = tilelang().tvm
    while isinstance(pointer, tvm.tirx.Call) and getattr(pointer.op, "name", "") == "tirx.handle_add_byte_offset":
        pointer = pointer.args[0]
    if isinstance(pointer, tvm.tirx.Call) and len(pointer.args) > 1:
        return getattr(pointer.args[1], "name", None) or _expr_text(pointer.args[1])
    return None


def _descriptor_operand(pointer: Any, layout_type: Any, lbo: Any, sbo: Any) -> WgmmaOperand:
    return WgmmaOperand(_pointer_buffer(pointer), int(_dim(layout_type)), int(_dim(lbo)), int(_dim(sbo)), major="K")


def _wgmma_calls(func: Any) -> list[dict[str, Any]]:
    """Every wgmma call of ``func`` in program order, with the descriptors it reads.

    Descriptors are keyed by their variable itself, not by its name: TileLang names the
    descriptors of every ``T.gemm`` ``desc_a``/``desc_b``, so a kernel with two GEMMs (Q·Kᵀ then
    P·V) has two variables called ``desc_b``. Walking in program order, each wgmma reads the
    latest initialisation of the variable it names.
    """
    tvm = tilelang().tvm
    current: dict[int, WgmmaOperand] = {}
    found: list[dict[str, Any]] = []
    for call in _calls(func, {"tl.initialize_wgmma_descriptor", "tl.ptx_wgmma_ss", "tl.ptx_wgmma_rs"}):
        op = call.op.name
        args = list(call.args)
        if op == "tl.initialize_wgmma_descriptor":
            target, pointer, layout_type, lbo, sbo = args[:5]
            var = target.buffer.data if isinstance(target, tvm.tirx.BufferLoad) else target
            current[_object_identity(var)] = _descriptor_operand(pointer, layout_type, lbo, sbo)
            continue
        if op == "tl.ptx_wgmma_ss":
            a_k, b_k = bool(_dim(args[1])), bool(_dim(args[2]))
            dtypes = tuple(str(a.value) for a in args[3:6])
            a_var, b_var, variant = args[6], args[8], "ss"
        else:
            a_k, b_k = True, bool(_dim(args[1]))
            dtypes = tuple(str(a.value) for a in args[2:5])
            a_var, b_var, variant = None, args[7], "rs"
        found.append({
            "shape": str(args[0].value), "variant": variant, "dtypes": dtypes,
            "a_major": "K" if a_k else "MN", "b_major": "K" if b_k else "MN",
            "a": current.get(_object_identity(a_var)) if a_var is not None else None,
            "b": current.get(_object_identity(b_var)),
            "a_name": getattr(a_var, "name", None), "b_name": getattr(b_var, "name", None),
        })
    return found


def _same_buffer(ir_name: str | None, source_name: str) -> bool:
    """The code generator may suffix a buffer's name to keep it unique (``v_s`` -> ``v_s_1``)."""
    return ir_name is not None and re.fullmatch(re.escape(ir_name) + r"(?:_\d+)?", source_name) is not None


def _association_problems(ir_calls: list[dict[str, Any]], source_calls: list[dict[str, Any]] | None,
                          kernel: str) -> list[list[str]]:
    """For each IR wgmma call, the ways its descriptors disagree with the generated CUDA."""
    problems: list[list[str]] = [[] for _ in ir_calls]
    if source_calls is None:
        for found in problems:
            found.append(f"the generated CUDA has no kernel {kernel}: the descriptors could not be checked")
        return problems
    if len(source_calls) != len(ir_calls):
        for found in problems:
            found.append(f"{kernel} issues {len(ir_calls)} wgmma call(s) in the IR but {len(source_calls)} "
                         "in the generated CUDA: the descriptors could not be matched call by call")
        return problems
    for found, ir, src in zip(problems, ir_calls, source_calls):
        if ir["variant"] != src["variant"]:
            found.append(f"the IR issues wgmma_{ir['variant']} where the generated CUDA issues wgmma_{src['variant']}")
            continue
        for side in ("a", "b"):
            mine, theirs = ir[side], src[side]
            if mine is None and theirs is None:
                continue
            if mine is None:
                found.append(f"operand {side.upper()}: tilelab found no descriptor for {ir[side + '_name']}, "
                             f"the generated CUDA initialises {src[side + '_var']} over {theirs[0]}")
                continue
            if theirs is None:
                found.append(f"operand {side.upper()}: the generated CUDA initialises no descriptor "
                             f"{src[side + '_var']} before this wgmma, tilelab associated {mine.buffer}")
                continue
            buffer, layout, lbo, sbo = theirs
            if not _same_buffer(mine.buffer, buffer) or (mine.layout_type, mine.lbo, mine.sbo) != (layout, lbo, sbo):
                found.append(
                    f"operand {side.upper()}: tilelab associated {mine.buffer} <{mine.layout_type}, {mine.lbo}, "
                    f"{mine.sbo}> but the generated CUDA reads {src[side + '_var']} = {buffer} "
                    f"<{layout}, {lbo}, {sbo}>")
    return problems


def wgmma_instructions(lowered: Lowered) -> list[WgmmaInstruction]:
    """Distinct ``wgmma.mma_async`` forms with the descriptors their shared operands use, each
    association checked against the generated CUDA (a disagreement is one of its ``problems``)."""
    result: dict[str, WgmmaInstruction] = {}
    in_source = source_wgmma_calls(lowered.device_source or "")
    for kname, func in _device_funcs(lowered.device_mod):
        calls = _wgmma_calls(func)
        if not calls:
            continue
        checks = _association_problems(calls, in_source.get(kname), kname)
        for call, problems in zip(calls, checks):
            a_t, b_t, c_t = call["dtypes"]
            a_major, b_major = call["a_major"], call["b_major"]
            a_desc, b_desc = call["a"], call["b"]
            if a_desc is not None:
                a_desc = WgmmaOperand(a_desc.buffer, a_desc.layout_type, a_desc.lbo, a_desc.sbo, a_major)
            if b_desc is not None:
                b_desc = WgmmaOperand(b_desc.buffer, b_desc.layout_type, b_desc.lbo, b_desc.sbo, b_major)
            instr = WgmmaInstruction(
                instruction=call["shape"], variant=call["variant"],
                a_dtype=_WGMMA_DTYPES.get(a_t, a_t), b_dtype=_WGMMA_DTYPES.get(b_t, b_t),
                accum_dtype=_WGMMA_DTYPES.get(c_t, c_t),
                a=a_desc, b=b_desc, a_major=a_major, b_major=b_major, kernel=kname,
                problems=tuple(problems),
            )
            key = repr((kname, call["shape"], call["variant"], a_t, b_t, c_t, a_major, b_major,
                        a_desc.to_dict() if a_desc else None, b_desc.to_dict() if b_desc else None,
                        tuple(problems)))
            if key in result:
                prev = result[key]
                result[key] = dataclasses.replace(prev, count=prev.count + 1)
            else:
                result[key] = instr
    return list(result.values())


def l2_windows(lowered: Lowered) -> list[L2Window]:
    _, host = _host_func(lowered.host_mod)
    attrs = host.attrs
    if attrs is None or "l2_persistent_map" not in attrs:
        return []
    windows = []
    for buffer, value in attrs["l2_persistent_map"].items():
        hit_ratio, size = value
        emitted, missing = [], []
        for backend, launcher in lowered.launchers.items():
            if launcher.text is None:
                continue
            texts = [launcher.text, *(v for _, v in launcher.extra)]
            if any(_sets_access_policy(t) for t in texts):
                emitted.append(backend)
            else:
                missing.append(backend)
        windows.append(L2Window(
            buffer=str(buffer), hit_ratio=round(float(_float(hit_ratio)), 6), bytes=_dim(size),
            emitted_by=tuple(emitted), missing_in=tuple(missing),
        ))
    return windows


def _float(value: Any) -> float:
    return float(getattr(value, "value", value))


def _sets_access_policy(text: str) -> bool:
    return any(marker in text for marker in (
        "access_policy_window", "accessPolicyWindow", "AccessPolicyWindow", "ACCESS_POLICY_WINDOW",
    ))


def arguments(source: KernelSource, out_idx: list[int] | None) -> list[Argument]:
    """How each parameter is read at launch, and where each symbolic size binds from."""
    tvm = tilelang().tvm
    func = source.prim_func
    params = list(func.params)
    outputs = {i % len(params) for i in (out_idx or [])}
    binds: dict[str, str] = {}
    records: list[Argument] = []
    symbols: list[str] = []
    symbol_dtypes: dict[str, str] = {}  # T.dynamic("m", "int64"): the launchers take an int64_t m
    for position, param in enumerate(params):
        if param in func.buffer_map:
            buf = func.buffer_map[param]
            shape = tuple(_dim(s) for s in buf.shape)
            for axis, extent in enumerate(buf.shape):
                if isinstance(extent, tvm.tirx.Var):
                    binds.setdefault(extent.name, f"{buf.name}.shape[{axis}]")
                for var in _free_vars(extent, symbol_dtypes):
                    if var not in symbols:
                        symbols.append(var)
            strides = tuple(_dim(s) for s in buf.strides) if len(buf.strides) else None
            strided = strides is not None and strides != _contiguous(buf.shape)
            if strided and strides is not None:
                for axis, stride in enumerate(buf.strides):
                    if isinstance(stride, tvm.tirx.Var):
                        binds.setdefault(stride.name, f"{buf.name}.stride({axis})")
                        symbol_dtypes.setdefault(stride.name, str(stride.dtype))
                        if stride.name not in symbols:
                            symbols.append(stride.name)
            is_output = position in outputs
            records.append(Argument(
                name=buf.name, kind="strided_tensor" if strided else "tensor", dtype=str(buf.dtype),
                shape=shape, strides=strides if strided else None,
                # With out_idx the tvm_ffi launcher allocates the output itself and returns it.
                passed_at_launch=not is_output, is_output=is_output,
                cache_key=(f"dtype {buf.dtype}, shape {list(shape)}"
                           + (f", strides {list(strides)}" if strided and strides else "")),
            ))
        else:
            records.append(Argument(name=param.name, kind="scalar", dtype=str(param.dtype),
                                    passed_at_launch=True, cache_key=None))
    params_by_name = {r.name for r in records}
    for symbol in symbols:
        if symbol in params_by_name:
            continue
        records.append(Argument(
            name=symbol, kind="dynamic_dim", dtype=symbol_dtypes.get(symbol, "int32"), passed_at_launch=False,
            binds_from=((symbol, binds[symbol]),) if symbol in binds else (),
            cache_key=None,
        ))
    for name, value, explicit in source.constants:
        records.append(Argument(
            name=name, kind="constant", dtype=type(value).__name__, passed_at_launch=False,
            value=_constant_text(value), cache_key=_constant_text(value) if explicit else None,
        ))
    return records


def _constant_text(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def _free_vars(expr: Any, dtypes: dict[str, str] | None = None) -> list[str]:
    """Names of the variables in ``expr``; ``dtypes`` (if given) collects each one's dtype."""
    tvm = tilelang().tvm
    names: list[str] = []
    dtypes = {} if dtypes is None else dtypes

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Var) and node.name not in names:
            names.append(node.name)
            dtypes.setdefault(node.name, str(node.dtype))

    if isinstance(expr, tvm.tirx.Var):
        dtypes.setdefault(expr.name, str(expr.dtype))
        return [expr.name]
    try:
        tvm.tirx.stmt_functor.post_order_visit(tvm.tirx.Evaluate(expr), visit)
    except Exception:
        pass
    return names


def _contiguous(shape: Any) -> tuple[Any, ...]:
    """Row-major strides of a buffer shape, as ``_dim`` values (symbolic where an extent is)."""
    strides: list[Any] = []
    acc: Any = 1
    for extent in reversed(list(shape)):
        strides.append(acc if isinstance(acc, int) else _dim(acc))
        acc = extent if isinstance(acc, int) and acc == 1 else acc * extent
    return tuple(reversed(strides))


def tile_ops(prim_func: Any) -> list[dict[str, Any]]:
    """The tile operators of a prim_func in program order, as TileLang's front end built them.

    Each: ``op`` ("copy", "gemm", "fill", "reduce", ...), ``operands``: (buffer, scope, dtype,
    region extents) per region argument, ``stages``: the ``num_stages`` of the enclosing
    ``T.Pipelined`` loop (None outside one).
    """
    tvm = tilelang().tvm
    visit = tvm.tirx.stmt_functor.post_order_visit
    calls: list[Any] = []

    def is_tile_op(node: Any) -> bool:
        return (isinstance(node, tvm.tirx.Call) and hasattr(node.op, "name")
                and str(node.op.name).startswith("tl.tileop.") and str(node.op.name) != "tl.tileop.region")

    visit(prim_func.body, lambda n: calls.append(n) if is_tile_op(n) else None)
    loops = _pipelined_calls(prim_func, is_tile_op)
    out = []
    for call in calls:
        operands = []
        for arg in call.args:
            if isinstance(arg, tvm.tirx.Call) and str(getattr(arg.op, "name", "")) in ("tl.region", "tl.tileop.region"):
                load = arg.args[0]
                buf = load.buffer
                extents = [_dim(e) for e in list(arg.args)[2:]]
                operands.append((str(buf.name), str(buf.scope()), str(buf.dtype), extents))
        out.append({"op": str(call.op.name).split(".")[-1], "operands": operands, "stages": None, "_call": call})
    # the calls inside each pipelined loop, matched by identity of their IR nodes
    for item in out:
        for stages_n, members in loops:
            if any(item["_call"].same_as(m) for m in members):
                item["stages"] = stages_n
        del item["_call"]
    return out


def _pipelined_calls(prim_func: Any, is_tile_op: Callable[[Any], bool]) -> list[tuple[int, list[Any]]]:
    tvm = tilelang().tvm
    visit = tvm.tirx.stmt_functor.post_order_visit
    loops: list[tuple[int, list[Any]]] = []

    def find(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and "num_stages" in node.annotations:
            members: list[Any] = []
            visit(node.body, lambda c: members.append(c) if is_tile_op(c) else None)
            loops.append((int(node.annotations["num_stages"]), members))

    visit(prim_func.body, find)
    return loops


def launch_dims(obj: Any) -> tuple[tuple[int | str, ...], tuple[int | str, ...]] | None:
    """(grid, block) as the kernel's ``T.Kernel`` wrote them, read from its prim_func without
    lowering (microseconds: used when a launch has to be described at once, e.g. after a
    timeout): grid from the ``blockIdx`` thread bindings, block from ``tl.launch_threads``.
    Symbolic extents come back as text (``(m + 63) // 64``); None when there is no prim_func."""
    tvm = tilelang().tvm
    func = getattr(obj, "prim_func", obj)
    if not isinstance(func, tvm.tirx.PrimFunc):
        return None
    grid: dict[str, Any] = {}
    block: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.thread_binding is not None:
            tag = str(node.thread_binding.thread_tag)
            if tag.startswith("blockIdx."):
                grid.setdefault(tag[-1], node.extent)
        elif isinstance(node, tvm.tirx.SBlock) and "tl.launch_threads" in node.annotations and not block:
            block.extend(node.annotations["tl.launch_threads"])

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    if not grid and not block:
        return None
    dims = tuple(_dim(grid[a]) if a in grid else 1 for a in "xyz")
    threads = tuple(_dim(v) for v in (list(block) + [1, 1, 1])[:3])
    return dims, threads
