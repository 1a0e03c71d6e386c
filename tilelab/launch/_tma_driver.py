"""Encode a :class:`TmaDescriptor` with the real CUDA driver: what would the launcher get back?

``encode_with_driver(desc, address)`` calls ``cuTensorMapEncodeTiled``/``cuTensorMapEncodeIm2col``
through cuda-python (``cuda.bindings.driver``), exactly as TileLang's nvrtc launcher does, and
returns the ``CUresult`` name. It needs a CUDA context on the calling thread (allocate a torch
tensor on the GPU first) and concrete sizes (``_tma_rules.concretize``).

Where cuda-python itself refuses an argument (an enum value the driver does not define, an empty
corner array), the call goes to libcuda through ctypes instead, so the driver gives the answer.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..engine.tma_rules import encode
from ..records.kernel import TmaDescriptor


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _enums(desc: TmaDescriptor) -> dict[str, int]:
    kinds = ("dtype", "interleave", "swizzle", "l2_promotion", "oob_fill")
    return {kind: encode(kind, getattr(desc, kind)) for kind in kinds}


def _ints(values: Any) -> list[int]:
    out = [int(v) if isinstance(v, int) else v for v in values]
    if not all(isinstance(v, int) for v in out):
        raise ValueError(f"symbolic sizes {values}: concretize the descriptor first (_tma_rules.concretize)")
    return out


def encode_with_driver(desc: TmaDescriptor, global_address: int) -> str:
    """The driver's answer for ``desc`` at ``global_address``: ``"CUDA_SUCCESS"`` or the error's name."""
    cu = _driver()
    e = _enums(desc)
    dims, strides = _ints(desc.global_dim), _ints(desc.global_stride_bytes)[1:]
    element_strides = _ints(desc.element_strides)
    try:  # cuda-python's enums refuse values the driver does not define
        enums = (cu.CUtensorMapDataType(e["dtype"]), cu.CUtensorMapInterleave(e["interleave"]),
                 cu.CUtensorMapSwizzle(e["swizzle"]), cu.CUtensorMapL2promotion(e["l2_promotion"]),
                 cu.CUtensorMapFloatOOBfill(e["oob_fill"]))
        return _encode_cuda_python(cu, desc, global_address, dims, strides, element_strides, enums)
    except (TypeError, ValueError, OverflowError):  # refused by the bindings, not by the driver
        return _encode_ctypes(desc, global_address, e)


def _encode_cuda_python(cu: Any, desc: TmaDescriptor, global_address: int, dims: list[int],
                        strides: list[int], element_strides: list[int], enums: tuple) -> str:
    dtype, interleave, swizzle, l2, oob = enums
    if desc.kind == "im2col":
        result = cu.cuTensorMapEncodeIm2col(
            dtype, desc.rank, global_address, [cu.cuuint64_t(v) for v in dims],
            [cu.cuuint64_t(v) for v in strides], list(desc.lower_corner), list(desc.upper_corner),
            *_ints((desc.channels_per_pixel or 0, desc.pixels_per_column or 0)),
            [cu.cuuint32_t(v) for v in element_strides], interleave, swizzle, l2, oob)
    else:
        result = cu.cuTensorMapEncodeTiled(
            dtype, desc.rank, global_address, [cu.cuuint64_t(v) for v in dims],
            [cu.cuuint64_t(v) for v in strides], [cu.cuuint32_t(v) for v in _ints(desc.box_dim)],
            [cu.cuuint32_t(v) for v in element_strides], interleave, swizzle, l2, oob)
    return result[0].name


def _encode_ctypes(desc: TmaDescriptor, global_address: int, e: dict[str, int]) -> str:
    lib = ctypes.CDLL("libcuda.so.1")
    tensor_map = (ctypes.c_uint64 * 16)()  # CUtensorMap: 128 bytes, 64-byte aligned
    address = ctypes.addressof(tensor_map)
    if address % 64:
        tensor_map = (ctypes.c_uint64 * 24)()
        address = (ctypes.addressof(tensor_map) + 63) // 64 * 64

    def u64(values: list[int]) -> Any:
        return (ctypes.c_uint64 * max(len(values), 1))(*values)

    def u32(values: list[int]) -> Any:
        return (ctypes.c_uint32 * max(len(values), 1))(*values)

    dims, strides = _ints(desc.global_dim), _ints(desc.global_stride_bytes)[1:]
    element_strides = _ints(desc.element_strides)
    tail = (ctypes.c_int(e["interleave"]), ctypes.c_int(e["swizzle"]), ctypes.c_int(e["l2_promotion"]),
            ctypes.c_int(e["oob_fill"]))
    head = (ctypes.c_void_p(address), ctypes.c_int(e["dtype"]), ctypes.c_uint32(desc.rank),
            ctypes.c_void_p(global_address), u64(dims), u64(strides))
    if desc.kind == "im2col":
        corners = [(ctypes.c_int * max(len(c), 1))(*c) for c in (desc.lower_corner, desc.upper_corner)]
        channels, pixels = _ints((desc.channels_per_pixel or 0, desc.pixels_per_column or 0))
        code = lib.cuTensorMapEncodeIm2col(*head, *corners, ctypes.c_uint32(channels),
                                           ctypes.c_uint32(pixels), u32(element_strides), *tail)
    else:
        code = lib.cuTensorMapEncodeTiled(*head, u32(_ints(desc.box_dim)), u32(element_strides), *tail)
    try:
        return _driver().CUresult(code).name
    except Exception:
        return "CUDA_SUCCESS" if code == 0 else f"CUresult({code})"


__all__ = ["encode_with_driver"]
