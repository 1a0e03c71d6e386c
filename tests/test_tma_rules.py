"""The TMA descriptor rule checker (tilelab/engine/tma_rules.py), on hand-made descriptors; no GPU."""

from __future__ import annotations

import dataclasses
import re

import pytest
from groundtruth import (
    DRIVER_ALIGNMENTS,
    DRIVER_BOUNDS,
    DRIVER_DTYPE,
    DRIVER_INTERLEAVE,
    DRIVER_L2,
    DRIVER_OOB,
    DRIVER_SWIZZLE,
)

from tilelab import TmaDescriptor
from tilelab.engine import tma_rules as rules

ALIGNED = 0x7F00_0000_0000  # a 256-byte aligned device address, as torch allocations are
EXAMPLES = rules.bad_examples()

# The first field each rule's message must name (the driver's parameter name).
FIELD = {
    "enum_known": "swizzle", "tensor_rank": "tensorRank", "im2col_rank": "tensorRank",
    "interleave_rank": "tensorRank", "global_address_align": "globalAddress",
    "global_address_align_32": "globalAddress", "global_dim_nonzero": "globalDim[1]",
    "global_dim_max": "globalDim[1]", "packed_global_dim": "globalDim[0]",
    "global_stride_multiple": "globalStrides[1]", "global_stride_max": "globalStrides[1]",
    "global_stride_multiple_32": "globalStrides[1]", "box_dim_nonzero": "boxDim[1]", "box_dim_max": "boxDim[1]",
    "box_inner_bytes_multiple_16": "boxDim[0]", "packed_box_dim": "boxDim[0]",
    "element_stride_nonzero": "elementStrides[1]", "element_stride_max": "elementStrides[1]",
    "swizzle_span": "boxDim[0]", "packed_interleave": "interleave", "interleave_32b_swizzle": "swizzle",
    "packed_swizzle": "swizzle", "oob_fill_float": "oobFill", "im2col_corner_range": "pixelBoxLowerCorner[0]",
    "im2col_box_area": "pixelBoxUpperCorner[0]", "channels_per_pixel_max": "channelsPerPixel",
    "packed_channels_per_pixel": "channelsPerPixel", "pixels_per_column_max": "pixelsPerColumn",
}


def test_every_rule_has_a_bad_example_and_a_field():
    assert set(EXAMPLES) == set(rules.RULES) == set(FIELD)


def _set(desc: TmaDescriptor, field: str, value: int) -> TmaDescriptor:
    """``desc`` with ``field`` (``"box_dim[1]"`` or ``"pixels_per_column"``) set to ``value``."""
    match = re.fullmatch(r"(\w+)\[(\d+)\]", field)
    if not match:
        return dataclasses.replace(desc, **{field: value})
    name, index = match.group(1), int(match.group(2))
    values = list(getattr(desc, name))
    values[index] = value
    return dataclasses.replace(desc, **{name: tuple(values)})


@pytest.mark.parametrize("rule_id, field, bound, words", DRIVER_BOUNDS)
def test_each_bound_is_the_driver_references_and_is_enforced_at_it(rule_id, field, bound, words):
    """The bound, from tests/groundtruth.py (written out from the driver reference), is the one the
    rule quotes and the one it enforces: the bound itself passes, one more is refused."""
    rule = rules.RULES[rule_id]
    assert re.search(rf"(?<![\d^]){re.escape(words)}(?![\d])", rule.doc), (rule_id, rule.doc)
    _, good = EXAMPLES[rule_id]
    if field == "rank":  # a rank change needs every per-dimension array resized: use the examples
        bad = EXAMPLES[rule_id][0]
        assert (good.rank, bad.rank) == (bound, bound + 1)
    else:
        good, bad = _set(good, field, bound), _set(good, field, bound + 1)
    assert rule_id not in rules.findings(good, global_address=ALIGNED)
    assert rule_id in rules.findings(bad, global_address=ALIGNED)


@pytest.mark.parametrize("rule_id, unit, words", DRIVER_ALIGNMENTS)
def test_each_alignment_is_the_driver_references(rule_id, unit, words):
    rule = rules.RULES[rule_id]
    assert words in rule.doc, (rule_id, rule.doc)
    bad, good = EXAMPLES[rule_id]
    found = rules.findings(bad, global_address=ALIGNED + rule.address_offset)
    assert rule_id in found and rule_id not in rules.findings(good, global_address=ALIGNED)
    # the finding names the unit the reference gives
    assert any(str(unit) in f.text for f in found[rule_id])


ENFORCED = sorted(k for k in EXAMPLES if rules.RULES[k].driver_enforced)


@pytest.mark.parametrize("rule_id", ENFORCED)
def test_bad_example_breaks_exactly_its_rule(rule_id):
    bad, good = EXAMPLES[rule_id]
    r = rules.RULES[rule_id]
    assert bad.kind in r.kinds
    found = rules.findings(bad, global_address=ALIGNED + r.address_offset)
    broken = {i for i, fs in found.items() if any(not f.at_launch for f in fs)}
    assert broken == {rule_id}
    problems, conditions = rules.check(bad, global_address=ALIGNED + r.address_offset)
    assert len(problems) == 1 and conditions == ()
    (problem,) = problems
    assert FIELD[rule_id] in problem.split(" is ")[0], problem
    assert " but " in problem and ": " in problem  # "<field> is <value> but <rule>: <what to change>"
    # the good variant passes every rule
    assert rules.check(good, global_address=ALIGNED) == ((), ())


@pytest.mark.parametrize("rule_id", ["global_address_align", "global_address_align_32"])
def test_an_unknown_address_is_a_launch_condition(rule_id):
    bad, _ = EXAMPLES[rule_id]
    problems, conditions = rules.check(bad)
    unit = 32 if rule_id.endswith("32") else 16
    assert problems == ()
    assert conditions == (f"the data pointer of {bad.buffer} must be {unit}-byte aligned at launch "
                          "(a tensor view that starts at an offset may not be)",)


def test_ranges_are_checked_at_both_ends():
    tiled, _ = EXAMPLES["global_dim_nonzero"]
    assert rules.check(dataclasses.replace(tiled, global_dim=(2**32 + 1, 4)), global_address=ALIGNED)[0]
    assert rules.check(dataclasses.replace(tiled, box_dim=(64, 257)), global_address=ALIGNED)[0]
    assert not rules.check(dataclasses.replace(tiled, box_dim=(64, 256), global_dim=(1024, 1)),
                           global_address=ALIGNED)[0]
    assert rules.check(dataclasses.replace(tiled, rank=0), global_address=ALIGNED)[0]


def test_first_element_stride_is_ignored_without_interleave():
    # "when interleave is CU_TENSOR_MAP_INTERLEAVE_NONE, the first element of this array is ignored"
    good = EXAMPLES["element_stride_max"][1]
    assert rules.check(dataclasses.replace(good, element_strides=(9, 1)), global_address=ALIGNED) == ((), ())
    interleaved = EXAMPLES["global_address_align_32"][1]
    assert rules.check(dataclasses.replace(interleaved, element_strides=(9, 1, 1)), global_address=ALIGNED)[0]


def test_swizzle_span_applies_to_im2col_channels():
    conv = EXAMPLES["pixels_per_column_max"][1]
    (problem,) = rules.check(dataclasses.replace(conv, channels_per_pixel=128), global_address=ALIGNED)[0]
    assert problem.startswith("channelsPerPixel is 128 elements of FLOAT16 = 256 bytes but swizzle 128B spans 128")
    # a wider swizzle is suggested when one fits
    tiled = EXAMPLES["swizzle_span"][1]
    (problem,) = rules.check(dataclasses.replace(tiled, swizzle="32B"), global_address=ALIGNED)[0]
    assert "use swizzle 128B, or use at most 16 elements" in problem


def test_packed_types_need_32_byte_alignment():
    packed = EXAMPLES["packed_box_dim"][1]
    assert rules.check(packed, global_address=ALIGNED + 16)[0]
    assert rules.check(packed, global_address=ALIGNED) == ((), ())


# --------------------------------------------------------------------------------------------
# Symbolic sizes become launch conditions, stated on the symbol where possible
# --------------------------------------------------------------------------------------------

HOPPER_A = TmaDescriptor(
    name="A_desc", buffer="A", kind="tiled", dtype="FLOAT16", rank=2, global_dim=(1024, 1024),
    global_stride_bytes=(2, 2048), box_dim=(64, 128), element_strides=(1, 1), interleave="NONE",
    swizzle="128B", l2_promotion="L2_128B", oob_fill="NONE",
)
ALIGN_CONDITION = ("the data pointer of A must be 16-byte aligned at launch "
                   "(a tensor view that starts at an offset may not be)")


def _symbolic(**changes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return rules.check(dataclasses.replace(HOPPER_A, **changes))


def test_realistic_hopper_gemm_descriptor_is_clean():
    assert rules.check(HOPPER_A, global_address=ALIGNED) == ((), ())
    assert rules.check(HOPPER_A) == ((), (ALIGN_CONDITION,))
    checked = rules.with_checks(HOPPER_A)
    assert (checked.problems, checked.launch_conditions) == ((), (ALIGN_CONDITION,))
    assert checked.inner_box_bytes == 128 == checked.swizzle_span_bytes


def test_dynamic_m_dimension_must_be_non_empty_at_launch():
    problems, conditions = _symbolic(global_dim=(1024, "m"))
    assert problems == ()
    assert conditions == (ALIGN_CONDITION, "globalDim[1] = m must be between 1 and 2^32 at launch")


def test_symbolic_stride_condition_is_solved_for_the_symbol():
    problems, conditions = _symbolic(global_dim=("k", 1024), global_stride_bytes=(2, "k * 2"))
    assert problems == ()
    assert "globalStrides[1] = k * 2 must be a multiple of 16 at launch: k must be a multiple of 8" in conditions
    # 3k + 8 = 0 (mod 16)  <=>  k = 8 (mod 16)
    _, conditions = _symbolic(global_stride_bytes=(2, "k * 3 + 8"))
    assert ("globalStrides[1] = k * 3 + 8 must be a multiple of 16 at launch: "
            "k must leave 8 when divided by 16") in conditions
    assert all(((k * 3 + 8) % 16 == 0) == (k % 16 == 8) for k in range(64))


def test_symbolic_stride_that_is_always_or_never_aligned():
    problems, conditions = _symbolic(global_stride_bytes=(2, "m * 64"))
    assert problems == () and conditions == (ALIGN_CONDITION,)
    problems, _ = _symbolic(global_stride_bytes=(2, "k * 2 + 1"))
    assert problems and problems[0].startswith("globalStrides[1] = k * 2 + 1 is never a multiple of 16")


def test_unparsed_expression_gives_a_plain_condition():
    _, conditions = _symbolic(global_stride_bytes=(2, "n // 2"))
    assert "globalStrides[1] = n // 2 must be a multiple of 16 at launch" in conditions


def test_concretize_replaces_every_symbol():
    desc = dataclasses.replace(HOPPER_A, global_dim=("k", "m"), global_stride_bytes=(2, "k * 2"))
    assert rules.symbols(desc) == {"k", "m"}
    concrete = rules.concretize(desc, {"k": 1024, "m": 512})
    assert concrete.global_dim == (1024, 512) and concrete.global_stride_bytes == (2, 2048)
    assert rules.concretize(desc, 64).global_stride_bytes == (2, 128)


# --------------------------------------------------------------------------------------------
# Enumerators: the driver's order, written out from cuda.h's typedefs
# --------------------------------------------------------------------------------------------

DRIVER_ENUMS = {
    "dtype": {0: "UINT8", 1: "UINT16", 2: "UINT32", 3: "INT32", 4: "UINT64", 5: "INT64", 6: "FLOAT16",
              7: "FLOAT32", 8: "FLOAT64", 9: "BFLOAT16", 10: "FLOAT32_FTZ", 11: "TFLOAT32", 12: "TFLOAT32_FTZ",
              13: "16U4_ALIGN8B", 14: "16U4_ALIGN16B", 15: "16U6_ALIGN16B"},
    "interleave": {0: "NONE", 1: "16B", 2: "32B"},
    "swizzle": {0: "NONE", 1: "32B", 2: "64B", 3: "128B", 4: "128B_ATOM_32B", 5: "128B_ATOM_32B_FLIP_8B",
                6: "128B_ATOM_64B"},
    "l2_promotion": {0: "NONE", 1: "L2_64B", 2: "L2_128B", 3: "L2_256B"},
    "oob_fill": {0: "NONE", 1: "NAN_REQUEST_ZERO_FMA"},
}


@pytest.mark.parametrize("kind", sorted(DRIVER_ENUMS))
def test_enum_decode_and_encode(kind):
    table = DRIVER_ENUMS[kind]
    assert rules.ENUMS[kind] == tuple(table[i] for i in range(len(table)))
    for value, name in table.items():
        assert rules.decode(kind, value) == name
        assert rules.encode(kind, name) == value
    assert rules.decode(kind, len(table)) == f"UNKNOWN({len(table)})"
    assert rules.encode(kind, f"UNKNOWN({len(table)})") == len(table)
    with pytest.raises(ValueError, match="not a CUtensorMap"):
        rules.encode(kind, "NOT_A_NAME")


def test_enum_tables_match_the_hand_written_driver_order():
    """tilelab's one table of the driver's enums (tilelab.cuda_facts, which the rule checker and
    the IR reader both decode with) against the cuda.h order written out by hand in
    tests/groundtruth.py, value by value through the public decode/encode."""
    from tilelab import cuda_facts

    truth = {"dtype": DRIVER_DTYPE, "interleave": DRIVER_INTERLEAVE, "swizzle": DRIVER_SWIZZLE,
             "l2_promotion": DRIVER_L2, "oob_fill": DRIVER_OOB}
    for kind, want in truth.items():
        assert list(cuda_facts.TMA_ENUMS[kind]) == want
        assert [cuda_facts.tma_enum_name(kind, i) for i in range(len(want))] == want
        assert [rules.encode(kind, name) for name in want] == list(range(len(want)))
    # spot checks of cuda.h values, independent of list order: FLOAT16 = 6, BFLOAT16 = 9, SWIZZLE_128B = 3
    assert (rules.encode("dtype", "FLOAT16"), rules.encode("dtype", "BFLOAT16")) == (6, 9)
    assert rules.encode("swizzle", "128B") == 3 and rules.encode("l2_promotion", "L2_128B") == 2


@pytest.mark.parametrize("field, value", [("swizzle", "128B_ATOM_32B"), ("swizzle", "128B_ATOM_64B"),
                                          ("dtype", "16U4_ALIGN16B")])
def test_hopper_driver_refuses_newer_swizzles_and_packed_types(field, value):
    # Seen on an H200 (driver 580.159.04): these encode with CUDA_ERROR_INVALID_VALUE on sm_90
    # whatever the other fields (tests/test_tma_driver_gpu.py reports it in its skip reasons).
    import dataclasses

    from tilelab.engine.tma_rules import _TILED

    desc = dataclasses.replace(_TILED, **{field: value})
    problems, _ = rules.check(desc, arch="sm_90a")
    assert any(value in p and "sm_90a" in p for p in problems)
    assert not any("sm_90a" in p for p in rules.check(desc, arch="sm_100a")[0])
    assert not any("sm_90" in p for p in rules.check(_TILED, arch="sm_90a")[0])


def test_rule_the_driver_does_not_enforce_is_not_reported():
    bad, _ = rules.bad_examples()["interleave_32b_swizzle"]
    assert not rules.RULES["interleave_32b_swizzle"].driver_enforced
    assert not any("interleave 32B" in p for p in rules.check(bad)[0])
