"""Ground truth read straight from TileLang's generated texts, independently of tilelab's engine.

Each function parses a launcher or the device CUDA with regular expressions; the engine reads
the IR instead, so agreement between the two is evidence, not tautology.
"""

from __future__ import annotations

import re

# CUDA driver enumerators in cuda.h order (CUtensorMapDataType, CUtensorMapSwizzle, ...),
# written out here by hand from the CUDA Driver API reference.
DRIVER_DTYPE = ["UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32", "FLOAT64",
                "BFLOAT16", "FLOAT32_FTZ", "TFLOAT32", "TFLOAT32_FTZ", "16U4_ALIGN8B", "16U4_ALIGN16B",
                "16U6_ALIGN16B"]
DRIVER_SWIZZLE = ["NONE", "32B", "64B", "128B", "128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B"]
DRIVER_L2 = ["NONE", "L2_64B", "L2_128B", "L2_256B"]
DRIVER_INTERLEAVE = ["NONE", "16B", "32B"]
DRIVER_OOB = ["NONE", "NAN_REQUEST_ZERO_FMA"]


def _value(text: str):
    text = text.strip()
    cast = re.fullmatch(r"\(\w+\)\s*(-?\d+)", text)
    if cast:
        return int(cast.group(1))
    if text.startswith("{") and text.endswith("}"):
        return [_value(part) for part in text[1:-1].split(",")]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def cython_tma_fields(launcher: str, desc: str) -> dict:
    """Every ``<desc>_<field> = value;`` the cython C++ launcher writes before encoding ``desc``."""
    fields = {}
    for match in re.finditer(rf"\b{re.escape(desc)}_(\w+?)(?:\[[^\]]*\])?\s*=\s*([^;]+);", launcher):
        fields[match.group(1)] = _value(match.group(2))
    return fields


def cython_launch(launcher: str, kernel: str) -> dict:
    """Grid, block and dynamic shared memory of the cudaLaunchKernelEx that launches ``kernel``."""
    start = launcher.index(f"cudaLaunchKernelEx(&config, {kernel}")
    block = launcher[:start]
    grid = re.findall(r"config\.gridDim = dim3\(([^;]+)\);", block)[-1]
    threads = re.findall(r"config\.blockDim = dim3\(([^;]+)\);", block)[-1]
    smem = re.findall(r"config\.dynamicSmemBytes = ([^;]+);", block)[-1]
    split = lambda s: [p.strip() for p in re.split(r",(?![^(]*\))", s)]  # noqa: E731
    return {"grid": split(grid), "block": split(threads), "smem": smem.strip()}


def device_wgmma(device: str) -> dict:
    """initialize_wgmma_descriptor<LAYOUT, LBO, SBO> per shared buffer, and each wgmma_ss/rs form."""
    descs = {}
    pattern = r"tl::initialize_wgmma_descriptor<(\d+), (\d+), (\d+)>\((\w+), \(&\(\(\(\w+\*\)(\w+)\)"
    for m in re.finditer(pattern, device):
        layout, lbo, sbo, var, buffer = m.groups()
        descs[var] = {"buffer": buffer, "layout_type": int(layout), "lbo": int(lbo), "sbo": int(sbo)}
    forms = []
    for m in re.finditer(r"tl::wgmma_(ss|rs)<tl::DataType::k(\w+), tl::DataType::k(\w+), tl::DataType::k(\w+), "
                         r"(\d+), (\d+), (\d+), (true|false), (true|false)", device):
        variant, a, b, c, mm, nn, kk, tnsp_a, tnsp_b = m.groups()
        forms.append({"variant": variant, "instruction": f"m{mm}n{nn}k{kk}", "a": a, "b": b, "c": c,
                      "a_major": "MN" if tnsp_a == "true" else "K", "b_major": "MN" if tnsp_b == "true" else "K"})
    return {"descriptors": descs, "forms": forms}


def device_wgmma_operands(device: str) -> list[dict]:
    """Each ``tl::wgmma_ss/rs`` call of the device CUDA in source order, with the buffer and
    <LAYOUT, LBO, SBO> of the descriptor each operand reads: the last
    ``tl::initialize_wgmma_descriptor`` of that variable above the call (the printed variables
    have distinct names, e.g. ``desc_b`` and ``desc_b_1``)."""
    latest: dict[str, dict] = {}
    calls = []
    for line in device.splitlines():
        init = re.search(r"initialize_wgmma_descriptor<(\d+), (\d+), (\d+)>\((\w+), \(&\(\(\(\w+\*\)(\w+)\)", line)
        if init:
            layout, lbo, sbo, var, buffer = init.groups()
            latest[var] = {"buffer": buffer, "layout_type": int(layout), "lbo": int(lbo), "sbo": int(sbo)}
            continue
        call = re.search(r"tl::wgmma_(ss|rs)<.*?>\((.*)\);", line)
        if call:
            descs = re.findall(r"uint64_t\((\w+)", call.group(2))
            a, b = (descs[0], descs[1]) if call.group(1) == "ss" else (None, descs[0])
            calls.append({"variant": call.group(1), "a": latest[a] if a else None, "b": latest[b]})
    return calls


def cython_launch_attributes(launcher: str, kernel: str) -> dict:
    """How the cython launcher launches ``kernel``: the launch attributes of its
    ``cudaLaunchKernelEx`` block, or ``cooperative`` for ``cudaLaunchCooperativeKernel``."""
    cooperative = re.search(rf"cudaLaunchCooperativeKernel\(\(void\*\){re.escape(kernel)},", launcher)
    if cooperative:
        return {"cooperative": True, "cluster": None, "serialization": False}
    end = launcher.index(f"cudaLaunchKernelEx(&config, {kernel}")
    start = launcher.rindex("cudaLaunchConfig_t config;", 0, end)
    block = launcher[start:end]
    cluster = re.search(r"clusterDim = \{(\d+), (\d+), (\d+)\};", block)
    return {
        "cooperative": False,
        "cluster": [int(v) for v in cluster.groups()] if cluster else None,
        "serialization": "programmaticStreamSerializationAllowed = 1;" in block,
    }


def cython_call_parameters(launcher: str) -> dict:
    """``name -> C type`` of the parameters of the cython launcher's ``call(...)`` entry."""
    signature = launcher.split('extern "C" TL_EXPORT int call(')[1].split(")")[0]
    params = {}
    for part in signature.split(","):
        decl = part.split("=")[0].strip()
        ctype, name = decl.rsplit(" ", 1)
        params[name] = ctype.strip()
    return params


# Bounds the CUDA Driver API reference ("Tensor Map Object Management", cuTensorMapEncodeTiled /
# cuTensorMapEncodeIm2col) states, written out by hand: (rule id, field, largest allowed value,
# the number as the reference writes it).
DRIVER_BOUNDS = [
    ("tensor_rank", "rank", 5, "5"),
    ("box_dim_max", "box_dim[1]", 256, "256"),
    ("element_stride_max", "element_strides[1]", 8, "8"),
    ("global_dim_max", "global_dim[1]", 2**32, "2^32"),
    ("channels_per_pixel_max", "channels_per_pixel", 256, "256"),
    ("pixels_per_column_max", "pixels_per_column", 1024, "1024"),
]
# Alignment the reference demands, in bytes: (rule id, unit, the reference's words).
DRIVER_ALIGNMENTS = [
    ("global_address_align", 16, "16 byte aligned"),
    ("global_stride_multiple", 16, "multiple of 16"),
    ("global_stride_multiple_32", 32, "multiple of 32"),
    ("box_inner_bytes_multiple_16", 16, "multiple of 16 bytes"),
]


def tilelang_own_launchers(func, arch: str = "sm_90a") -> tuple[str, str, str]:
    """(device source, cython launcher, nvrtc launcher) as TileLang's own wrappers write them for
    ``func`` lowered on its own (TLWrapper and TLNVRTCSourceWrapper, no tilelab in between)."""
    import tilelang
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile, lower_to_host_device_ir
    from tilelang.jit.adapter.nvrtc.wrapper import TLNVRTCSourceWrapper
    from tilelang.jit.adapter.wrapper import TLWrapper

    from tilelab._tilelang import normalize_pass_configs

    context = create_backend_context({"kind": "cuda", "arch": arch}, None, "cython")
    with tilelang.transform.PassContext(opt_level=3, config=normalize_pass_configs({})), context.target:
        host, device, *_ = lower_to_host_device_ir(func, context)
        source = device_codegen_without_compile(device, context).inspect_source()
    scheduled = tilelang.tvm.IRModule({str(func.attrs["global_symbol"]): func})
    wrapper = TLWrapper(context.target)
    wrapper.assign_optimized_module(scheduled)
    wrapper.assign_pass_configs({})
    wrapper.assign_host_module(host)
    wrapper.assign_device_module(device)
    nvrtc = TLNVRTCSourceWrapper(scheduled_ir_module=scheduled, source=source, target=context.target,
                                 device_mod=device, host_mod=host, pass_configs={}).host_func
    return source, wrapper.wrap(source), nvrtc
