"""A TMA descriptor refused at launch, mapped to the driver's rule it breaks.

The launcher encodes each descriptor with ``cuTensorMapEncodeTiled`` when the kernel is called,
with the tensors' real addresses and the sizes bound at that call. A refusal arrives as
TileLang's message (its own check of the arguments, "Invalid TMA descriptor arguments ...
[1] effective cuda globalStrides[0] ... must be a multiple of 16 bytes", or the driver's bare
``CUDA_ERROR_INVALID_VALUE``). tilelab names the rule of :mod:`tilelab.engine.tma_rules` the launch
broke, in the driver's words, with the field to change, two ways:

* :func:`broken_rules`: the kernel's descriptors (from inspection, sizes symbolic) with this
  launch's sizes and addresses put in, checked rule by rule;
* :func:`rules_from_message`: TileLang's numbered findings, each mapped to its rule id (when the
  descriptors cannot be had).

Pure: no TileLang, no torch (the launch's tensors are only asked for ``data_ptr()``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# TileLang 0.1.15's checks before cuTensorMapEncodeTiled (src/cuda/runtime.cc, ValidateTensorMapArgs),
# by the start of each finding it prints, and the driver rule each one is.
RUNTIME_FINDINGS: tuple[tuple[str, str | None], ...] = (
    (r"tensorMap must be non-null|tensorMap address must be 64-byte aligned", None),  # TileLang's own buffer
    (r"tensorDataType is not a supported", "enum_known"),
    (r"tensorRank must be in \[1, 5\]", "tensor_rank"),
    (r"tensorRank must be >= 3 when interleave", "interleave_rank"),
    (r"globalAddress must be non-null", "global_address_align"),
    (r"globalAddress must be 32-byte aligned", "global_address_align_32"),
    (r"globalAddress must be \d+-byte aligned", "global_address_align"),
    (r"globalDim\[\d+\] must be non-zero", "global_dim_nonzero"),
    (r"globalDim\[\d+\] must be <= 2\^32", "global_dim_max"),
    (r"globalDim\[0\] must be a multiple of", "packed_global_dim"),
    (r"effective cuda globalStrides\[\d+\] .*must be non-zero", "global_stride_multiple"),
    (r"effective cuda globalStrides\[\d+\] .*must be a multiple of 32 bytes", "global_stride_multiple_32"),
    (r"effective cuda globalStrides\[\d+\] .*must be a multiple of", "global_stride_multiple"),
    (r"effective cuda globalStrides\[\d+\] .*must be < 2\^40", "global_stride_max"),
    (r"boxDim\[\d+\] must be non-zero", "box_dim_nonzero"),
    (r"boxDim\[\d+\] must be <= 256", "box_dim_max"),
    (r"boxDim\[0\] must be 128 for", "packed_box_dim"),
    (r"boxDim\[0\] \* elementSize must be a multiple of 16 bytes", "box_inner_bytes_multiple_16"),
    (r"boxDim\[0\] \* elementSize must be <= swizzle span", "swizzle_span"),
    (r"elementStrides\[\d+\] must be in \[1, 8\], but got 0\b", "element_stride_nonzero"),
    (r"elementStrides\[\d+\] must be in \[1, 8\]", "element_stride_max"),
    (r"swizzle must be CU_TENSOR_MAP_SWIZZLE_32B when", "interleave_32b_swizzle"),
    (r"interleave must be CU_TENSOR_MAP_INTERLEAVE_NONE for", "packed_interleave"),
    (r"is not supported for", "packed_swizzle"),
    (r"CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA can only be used", "oob_fill_float"),
)
_NUMBERED = re.compile(r"^\s*\[\d+\] (?P<finding>.+?)\s*$", re.M)


def rule_of_runtime_finding(text: str) -> str | None:
    """The rule id of one of TileLang's findings (None for one that is no driver rule, or unknown)."""
    for pattern, rule_id in RUNTIME_FINDINGS:
        if re.search(pattern, text):
            return rule_id
    return None


def rules_from_message(message: str) -> list[tuple[str, str]]:
    """(rule id, TileLang's finding) for each numbered finding in a refusal message it maps."""
    out = []
    for m in _NUMBERED.finditer(message):
        rule_id = rule_of_runtime_finding(m.group("finding"))
        if rule_id is not None:
            out.append((rule_id, m.group("finding")))
    return out


def _address(arg: Any) -> int | None:
    try:
        return int(arg.data_ptr())
    except Exception:
        return None


def broken_rules(descriptors: Sequence[Any], params: Sequence[Any], args: Sequence[Any],
                 bound: Mapping[str, int], arch: str | None = None) -> list[tuple[str, str, str]]:
    """(descriptor name, rule id, finding) for each driver rule a descriptor breaks at this launch.

    ``descriptors`` are the kernel's (``tilelab.inspect(kernel).tma_descriptors``), ``params``
    its launch parameters in order (each with ``.name``), ``args`` the values passed for them,
    ``bound`` the sizes this launch bound (``{"K": 1000}``)."""
    from ..engine import tma_rules as _tma_rules  # the analysis layer, loaded only when a launch was refused

    addresses = {p.name: _address(a) for p, a in zip(params, args)}
    out: list[tuple[str, str, str]] = []
    for desc in descriptors:
        try:
            concrete = _tma_rules.concretize(desc, dict(bound))
        except (KeyError, ValueError):  # a size this launch did not bind: nothing to decide
            continue
        found = _tma_rules.findings(concrete, global_address=addresses.get(desc.buffer or ""), arch=arch)
        for rule_id, items in found.items():
            for item in items:
                if not item.at_launch:
                    out.append((desc.name, rule_id, item.text))
    return out


def explain(message: str, descriptors: Sequence[Any] = (), params: Sequence[Any] = (), args: Sequence[Any] = (),
            bound: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """The lines a refused launch's error shows: each broken rule, its finding, the driver's words."""
    lines: list[str] = []
    found = broken_rules(descriptors, params, args, bound or {}) if descriptors else []
    if found:
        for name, rule_id, text in found:
            lines.append(f"{name}: {rule_id}: {text} (the driver: \"{_doc(rule_id)}\")")
    else:
        for rule_id, text in rules_from_message(message):
            lines.append(f"{rule_id}: {text} (the driver: \"{_doc(rule_id)}\")")
    return tuple(dict.fromkeys(lines))


def refused_rules(prepared: Any, args: Sequence[Any], bound: Mapping[str, int], message: str) -> tuple[str, ...]:
    """:func:`explain` for a prepared kernel (``launch._kernel.Prepared``) and this launch's
    arguments (in launch order) and bound sizes."""
    launch = [p for p in prepared.params if p.passed_at_launch]
    return explain(message, prepared.tma_descriptors(), launch, args, bound)


def _doc(rule_id: str) -> str:
    from ..engine import tma_rules as _tma_rules

    rule = _tma_rules.RULES.get(rule_id)
    doc = rule.doc if rule is not None else "the TMA descriptors of this GPU generation"
    return doc if len(doc) <= 220 else doc[:217].rstrip() + "..."


__all__ = ["RUNTIME_FINDINGS", "broken_rules", "explain", "refused_rules", "rule_of_runtime_finding",
           "rules_from_message"]
