"""Published per-architecture limits of NVIDIA GPUs: the one table tilelab's occupancy maths reads.

Figures from the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability"
table and the allocation rules of the CUDA Occupancy Calculator (``cuda_occupancy.h``): registers
are allocated per warp in units of 256, in each of 4 SM sub-partitions; shared memory per block in
units of 128 bytes, plus 1 KiB the driver reserves for every block (compute capability 8.0 on).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ArchLimits:
    """What one streaming multiprocessor of a compute capability can hold at once."""

    compute_capability: str  # "9.0"
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, allocated per warp
    sub_partitions: int
    shared_memory_per_sm: int  # bytes, the largest carveout
    max_shared_memory_per_block: int  # bytes, with the opt-in attribute
    reserved_shared_memory_per_block: int  # bytes the driver keeps for each block
    shared_memory_allocation_unit: int  # bytes
    max_threads_per_block: int = 1024
    warp_size: int = 32

    def to_dict(self) -> dict:
        return asdict(self)


_KIB = 1024
ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_80": ArchLimits("8.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 164 * _KIB, 163 * _KIB, _KIB, 128),
    "sm_86": ArchLimits("8.6", 1536, 48, 16, 65536, 65536, 255, 256, 4, 100 * _KIB, 99 * _KIB, _KIB, 128),
    "sm_87": ArchLimits("8.7", 1536, 48, 16, 65536, 65536, 255, 256, 4, 164 * _KIB, 163 * _KIB, _KIB, 128),
    "sm_89": ArchLimits("8.9", 1536, 48, 24, 65536, 65536, 255, 256, 4, 100 * _KIB, 99 * _KIB, _KIB, 128),
    "sm_90": ArchLimits("9.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_100": ArchLimits("10.0", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_103": ArchLimits("10.3", 2048, 64, 32, 65536, 65536, 255, 256, 4, 228 * _KIB, 227 * _KIB, _KIB, 128),
    "sm_120": ArchLimits("12.0", 1536, 48, 32, 65536, 65536, 255, 256, 4, 128 * _KIB, 99 * _KIB, _KIB, 128),
}


def arch_limits(arch: str) -> ArchLimits:
    """Limits for an arch name such as "sm_90a" (the a/f feature suffix does not change them)."""
    match = re.fullmatch(r"sm_(\d+)[af]?", str(arch))
    base = f"sm_{match.group(1)}" if match else None
    if base not in ARCH_LIMITS:
        raise ValueError(f"no published limits for arch {arch!r} in tilelab; known: {', '.join(ARCH_LIMITS)} "
                         "(with or without an a/f suffix)")
    return ARCH_LIMITS[base]


__all__ = ["ARCH_LIMITS", "ArchLimits", "arch_limits"]
