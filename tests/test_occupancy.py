"""Theoretical occupancy against cases worked by hand from the published limits.

Each case: blocks per SM each limit allows, computed on paper with the CUDA Occupancy
Calculator's rules (registers per warp rounded up to 256, in 4 sub-partitions of 16,384; shared
memory per block plus the driver's 1 KiB, rounded up to 128 B; sm_80: 164 KiB, 64 warps, 32
blocks per SM; sm_90: 228 KiB, 64 warps, 32 blocks).
"""

import pytest

from tilelab.cuda_facts import arch_limits
from tilelab.engine.occupancy import Occupancy, theoretical_occupancy

CASES = [
    # arch, threads, regs, smem -> (by regs, by smem, by threads, by blocks), binding
    # 256 thr x 128 regs: 4096 regs/warp, 16384/4096 = 4 warps per sub-partition, 16 per SM, 8 per block.
    ("sm_80", 256, 128, 0, (2, 164, 8, 32), ("registers",)),
    # 48 KiB + 1 KiB = 50,176 B per block; 167,936 / 50,176 = 3.
    ("sm_80", 128, 32, 48 * 1024, (16, 3, 16, 32), ("shared memory",)),
    # 1024 threads = 32 warps of 64; 16 regs: 512/warp, 32 per sub-partition, 128 warps -> 4 blocks.
    ("sm_80", 1024, 16, 0, (4, 164, 2, 32), ("threads",)),
    # one warp, 16 regs: 128 by registers, 64 by threads, 164 by smem: the 32-block cap binds.
    ("sm_80", 32, 16, 0, (128, 164, 64, 32), ("blocks",)),
    # The Hopper GEMM of examples/gemm.py: 384 thr, 168 regs -> 5376 regs/warp, 3 warps per
    # sub-partition, 12 per SM = one 12-warp block; 49,152 + 1,024 static + 1,024 reserve = 51,200 B.
    ("sm_90a", 384, 168, 50176, (1, 4, 5, 32), ("registers",)),
    # 100 KiB + 1 KiB = 103,424 B; 233,472 / 103,424 = 2.
    ("sm_90", 256, 64, 100 * 1024, (4, 2, 8, 32), ("shared memory",)),
    ("sm_90", 1024, 32, 0, (2, 228, 2, 32), ("registers", "threads")),
    ("sm_90", 64, 32, 0, (32, 228, 32, 32), ("registers", "threads", "blocks")),
]


@pytest.mark.parametrize("arch,threads,regs,smem,limits,binding", CASES)
def test_hand_computed_cases(arch, threads, regs, smem, limits, binding):
    occ = theoretical_occupancy(arch, threads_per_block=threads, registers_per_thread=regs,
                                shared_memory_per_block=smem)
    assert dict(occ.limit_blocks) == dict(zip(("registers", "shared memory", "threads", "blocks"), limits))
    assert occ.blocks_per_sm == min(limits)
    assert occ.binding == binding
    assert occ.warps_per_sm == min(limits) * -(-threads // 32)
    assert Occupancy.from_dict(occ.to_dict()) == occ


def test_each_limit_binds_alone_on_sm80_and_sm90():
    alone = {(c[0][:5], c[5][0]) for c in CASES if len(c[5]) == 1}
    assert {("sm_80", x) for x in ("registers", "shared memory", "threads", "blocks")} <= alone
    assert {("sm_90", "registers"), ("sm_90", "shared memory")} <= alone


def test_too_big_for_an_sm():
    occ = theoretical_occupancy("sm_90", threads_per_block=128, registers_per_thread=32,
                                shared_memory_per_block=228 * 1024)
    assert occ.blocks_per_sm == 0 and occ.binding == ("shared memory",)
    assert "does not fit" in occ.sentence()
    occ = theoretical_occupancy("sm_80", threads_per_block=128, registers_per_thread=256)
    assert occ.blocks_per_sm == 0 and "registers" in occ.binding


def test_published_limits_and_bad_input():
    assert arch_limits("sm_90a").shared_memory_per_sm == 233472
    assert arch_limits("sm_86").max_warps_per_sm == 48
    with pytest.raises(ValueError, match="sm_75.*known: sm_80"):
        arch_limits("sm_75")
    with pytest.raises(ValueError, match="threads_per_block"):
        theoretical_occupancy("sm_90", threads_per_block=0, registers_per_thread=32)
    with pytest.raises(ValueError, match="registers_per_thread must be a non-negative int"):
        theoretical_occupancy("sm_90", threads_per_block=128, registers_per_thread=-1)


def test_one_dtype_table_answers_every_spelling_and_refuses_unknown_names():
    """Sizes by the PTX ISA's type widths, written here by hand; aliases from TileLang, torch and
    the driver all land on the same canonical name; an unknown dtype is refused by name."""
    from tilelab import cuda_facts, swizzle
    from tilelab.launch import _inputs

    by_hand = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float8_e4m3": 1, "int8": 1,
               "uint16": 2, "int64": 8, "bool": 1}
    for name, size in by_hand.items():
        assert cuda_facts.dtype_bytes(name) == swizzle.dtype_bytes(name) == _inputs.element_bytes(name) == size
    for spelling in ("torch.float16", "T.float16", "half", "fp16", "FLOAT16", "f16"):
        assert cuda_facts.normalize_dtype(spelling) == _inputs.canonical_dtype(spelling) == "float16"
    assert _inputs.canonical_dtype("torch.float8_e4m3fn") == swizzle.normalize_dtype("float8_e4m3fn") == "float8_e4m3"
    assert _inputs.canonical_dtype("float8_e4m3fnuz") == "float8_e4m3fnuz"  # a different format, kept apart
    for bad in ("int4", "float4_e2m1fn", "complex64"):
        with pytest.raises(ValueError, match=f"unknown dtype '{bad}'"):
            _inputs.element_bytes(bad)
    assert _inputs.canonical_dtype("int4") == "int4"  # passed through; torch_dtype refuses it by name
