"""The lowering explainer: for each tile op, the hardware path TileLang took and, for a fallback
from the fast path, the reason tilelab can establish.

Evidence comes from the generated device source (which TileLang intrinsic carries the op:
``tl::tma_load`` with the tensor's descriptor, ``tl::cp_async_gs`` reading the tensor,
``tl::wgmma_ss``, ``tl::mma_sync``, ...). Reasons come from what tilelab can check: the target,
the pass configs that switch a path off, and the shape and alignment rules of the fast path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .._tilelang.source import first_matching_line, vector_width
from ..cuda_facts import DTYPE_BYTES, normalize_dtype
from ..records.kernel import Lowering, TileOpPath


def _element_bytes(dtype: str) -> int:
    """Bytes per element, 0 for a dtype tilelab has no size for (the explainer then says less)."""
    return DTYPE_BYTES.get(normalize_dtype(dtype, strict=False), 0)


def _sm(arch: str) -> int:
    m = re.match(r"sm_(\d+)", arch)
    return int(m.group(1)) if m else 0


def _config(configs: dict[str, str], key: str) -> bool | None:
    if key not in configs:
        return None
    return str(configs[key]).strip().lower() in ("true", "1", "t.bool(true)")


def _bytes(operand: tuple) -> int | None:
    _, _, dtype, extents = operand
    if not all(isinstance(e, int) for e in extents):
        return None
    return math.prod(extents) * _element_bytes(dtype) or None


def explain(ops: Sequence[dict[str, Any]], device_source: str, arch: str, pass_configs: dict[str, str],
            threads: int | None, global_shapes: dict[str, tuple[Any, ...]] | None = None) -> Lowering:
    """``ops`` from :func:`tilelab._tilelang.tile_ops`; ``pass_configs`` as the report keeps them (repr values)."""
    device = device_source.split("\n")
    sm = _sm(arch)
    global_shapes = global_shapes or {}
    out: list[TileOpPath] = []
    tma_loads = 0
    slow: list[str] = []  # shared tiles loaded from global memory by threads, not by TMA
    for item in ops:
        kind, operands, stages = item["op"], item["operands"], item.get("stages")
        names = " -> ".join(o[0] for o in operands)
        label = f"T.{kind} {names}" if operands else f"T.{kind}"
        if kind in ("copy", "tma_copy") and len(operands) == 2:
            src, dst = operands
            if src[1] == "global" and dst[1].startswith("shared"):
                path = _global_to_shared(src, dst, device, sm, pass_configs, global_shapes)
                tma_loads += path.path.startswith("TMA")
                if not path.path.startswith("TMA"):
                    slow.append(dst[0])
            elif dst[1] == "global":
                path = _to_global(src, dst, device, sm, pass_configs)
            else:
                path = TileOpPath(label, f"{src[1]} -> {dst[1]} copy", True)
            out.append(TileOpPath(label, path.path, path.fast, path.evidence_line, path.evidence,
                                  "" if path.fast else path.reason, stages))
        elif kind == "gemm":
            out.append(_gemm(label, operands, device, sm, pass_configs, threads, stages))
        else:
            out.append(TileOpPath(label, {"fill": "register/shared fill", "reduce": "reduction"}.get(kind, kind),
                                  True, stages=stages))
    ws, ws_reason = _warp_specialization(device, sm, pass_configs, threads, tma_loads,
                                         any(o.stages for o in out), slow)
    stage_list = [o for o in ops if o.get("stages")]
    stage_n = stage_list[0]["stages"] if stage_list else None
    stage_bytes = None
    if stage_list:
        sizes = [_bytes(item["operands"][1]) for item in stage_list
                 if item["op"] in ("copy", "tma_copy") and len(item["operands"]) == 2
                 and item["operands"][1][1].startswith("shared")]
        stage_bytes = sum(s for s in sizes if s) or None
    return Lowering(tuple(out), ws, ws_reason, stage_n, stage_bytes)


def _global_to_shared(src: tuple, dst: tuple, device: list[str], sm: int, configs: dict[str, str],
                      shapes: dict[str, tuple[Any, ...]]) -> TileOpPath:
    g = re.escape(src[0])
    label = f"T.copy {src[0]} -> {dst[0]}"
    line, text = first_matching_line(device, rf"tl::tma_load\(\s*{g}_desc\b", "tma_load")
    if line:
        return TileOpPath(label, "TMA bulk copy", True, line, text)
    reasons = []
    if sm < 90:
        reasons.append(f"TMA needs sm_90 or later; the target is sm_{sm}")
    if _config(configs, "tl.disable_tma_lower"):
        reasons.append("pass config tl.disable_tma_lower is set")
    e = _element_bytes(src[2])
    inner = src[3][-1] if src[3] else None
    if sm >= 90 and isinstance(inner, int) and e and (inner * e) % 16:
        reasons.append(f"the copied row is {inner * e} bytes; a TMA box row must be a multiple of 16 bytes")
    shape = shapes.get(src[0])
    if sm >= 90 and shape and isinstance(shape[-1], int) and e and len(shape) > 1 and (shape[-1] * e) % 16:
        reasons.append(f"{src[0]}'s rows are {shape[-1] * e} bytes apart; TMA needs global strides that are "
                       "multiples of 16 bytes")
    line, text = first_matching_line(device, rf"cp_async_gs[^;]*\b{g}\b", "cp_async_gs")
    if line:
        path, fast = "cp.async (asynchronous 16-byte copies)", sm < 90
    else:
        if sm >= 80 and _config(configs, "tl.enable_async_copy") is False:
            reasons.append("pass config tl.enable_async_copy is false")
        line, text = first_matching_line(device, rf"\b{g}\s*\+|\b{g}\[", src[0])
        width = vector_width(text)
        path, fast = f"plain loads ({width})" if width else "plain loads", False
    if sm >= 90 and not reasons:
        reasons.append("not established by tilelab (TileLang chose this path; see the IR passes tab)")
    return TileOpPath(label, path, fast, line, text, "; ".join(reasons))


def _to_global(src: tuple, dst: tuple, device: list[str], sm: int, configs: dict[str, str]) -> TileOpPath:
    g = re.escape(dst[0])
    label = f"T.copy {src[0]} -> {dst[0]}"
    line, text = first_matching_line(device, rf"tl::tma_store\(\s*{g}_desc\b", "tma_store")
    if line:
        return TileOpPath(label, "TMA bulk store", True, line, text)
    line, text = first_matching_line(device, rf"\(\s*{g}\s*\+|\b{g}\[", dst[0])
    width = vector_width(text)
    reason = ""
    fast = True
    if src[1].startswith("local") and sm >= 90:
        fast = False
        reason = ("a fragment goes to global memory with per-thread stores; staging it through shared memory "
                  "(T.copy to a shared buffer, then to global) lets TileLang use a TMA store")
    elif sm >= 90 and _config(configs, "tl.disable_tma_lower"):
        fast, reason = False, "pass config tl.disable_tma_lower is set"
    return TileOpPath(label, f"plain stores ({width})" if width else "plain stores", fast, line, text, reason)


def _gemm(label: str, operands: list, device: list[str], sm: int, configs: dict[str, str], threads: int | None,
          stages: int | None) -> TileOpPath:
    for pattern, path in ((r"tl::wgmma_ss<", "WGMMA, both operands from shared memory"),
                          (r"tl::wgmma_rs<", "WGMMA, A from registers"),
                          (r"tl::(tcgen05|utcmma|umma)\w*", "tcgen05 MMA (tensor memory)")):
        line, text = first_matching_line(device, pattern, "tl::")
        if line:
            return TileOpPath(label, path, True, line, text, stages=stages)
    line, text = first_matching_line(device, r"tl::mma_sync|mma\.sync", "mma")
    if line:
        path = "MMA (mma.sync, warp-level tensor cores)"
        reasons = []
        if 90 <= sm < 100:
            if _config(configs, "tl.disable_wgmma"):
                reasons.append("pass config tl.disable_wgmma is set")
            m = operands[0][3][0] if operands and operands[0][3] else None
            if threads is not None and threads % 128:
                reasons.append(f"WGMMA needs whole warpgroups (multiples of 128 threads); the kernel has {threads}")
            if isinstance(m, int) and m < 64:
                reasons.append(f"WGMMA works on M >= 64 per warpgroup; this gemm's M is {m}")
            if not reasons:
                reasons.append("not established by tilelab")
        return TileOpPath(label, path, sm < 90, line, text, "; ".join(reasons), stages)
    reason = f"the target sm_{sm} has no tensor-core path TileLang uses for these dtypes" if sm < 70 else \
        "not established by tilelab (the dtypes or shapes may have no tensor-core instruction)"
    return TileOpPath(label, "FMA (CUDA cores)", False, None, "", reason, stages)


def _warp_specialization(device: list[str], sm: int, configs: dict[str, str], threads: int | None,
                         tma_loads: int, pipelined: bool, slow_loads: Sequence[str] = ()) -> tuple[bool, str]:
    line, _ = first_matching_line(device, r"tl::warpgroup_reg_(alloc|dealloc)<", "warpgroup_reg_")
    if line:
        return True, (f"a producer warpgroup issues the loads and the consumers compute (register split at "
                      f"device line {line})")
    if not pipelined:
        return False, "no T.Pipelined loop"
    if sm < 90:
        return False, f"warp specialization needs sm_90 or later (TMA and mbarriers); the target is sm_{sm}"
    if _config(configs, "tl.disable_warp_specialized"):
        return False, "pass config tl.disable_warp_specialized is set"
    if not tma_loads:
        return False, "the pipelined copies are not TMA loads, which TileLang's producer warpgroup needs"
    filled = set(re.findall(r"cp_async_gs<\d+>\(\(&\(\(\(\w+\*\)(\w+)\)", "\n".join(device)))
    filled.update(slow_loads)
    if filled:
        line, _ = first_matching_line(device, r"threadIdx\.x\)\s*<", "threadIdx.x")
        where = f" (the roles split at device line {line})" if line else ""
        return False, (f"{' and '.join(sorted(filled))} is loaded into shared memory by threads (element by "
                       "element, plain loads or cp.async), not by a TMA T.copy: TileLang then gives the loads a "
                       f"producer as large as the consumers, with no registers handed back{where}; only a loop "
                       "whose loads are all TMA copies gets one producer warpgroup")
    return False, "not established by tilelab"


__all__ = ["Lowering", "TileOpPath", "explain"]
