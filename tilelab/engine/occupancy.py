"""Theoretical occupancy: how many blocks of a kernel one SM holds, and which limit binds.

Pure arithmetic over :mod:`tilelab.cuda_facts`, following the rules the CUDA runtime's
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` applies with the default shared-memory carveout.
"""

from __future__ import annotations

from ..cuda_facts import arch_limits
from ..records.machine import Occupancy

LIMITS = ("registers", "shared memory", "threads", "blocks")


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def theoretical_occupancy(arch: str, *, threads_per_block: int, registers_per_thread: int,
                          shared_memory_per_block: int = 0) -> Occupancy:
    """Blocks per SM for ``threads_per_block`` threads using ``registers_per_thread`` registers and
    ``shared_memory_per_block`` bytes of static plus dynamic shared memory."""
    lim = arch_limits(arch)
    for name, value in (("threads_per_block", threads_per_block), ("registers_per_thread", registers_per_thread),
                        ("shared_memory_per_block", shared_memory_per_block)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int; got {value!r}")
    if threads_per_block == 0:
        raise ValueError("threads_per_block must be at least 1")
    warps = -(-threads_per_block // lim.warp_size)

    # Registers: per warp, rounded to the allocation unit, in each of the SM's sub-partitions.
    regs_per_warp = _round_up(registers_per_thread * lim.warp_size, lim.register_allocation_unit)
    regs_per_block = regs_per_warp * warps
    regs_checked = regs_per_warp * _round_up(warps, lim.sub_partitions)
    if (registers_per_thread > lim.max_registers_per_thread or regs_checked > lim.max_registers_per_block
            or regs_per_block > lim.max_registers_per_block):
        by_regs = 0
    elif regs_per_warp == 0:
        by_regs = lim.max_blocks_per_sm
    else:
        warps_per_sub = (lim.registers_per_sm // lim.sub_partitions) // regs_per_warp
        by_regs = warps_per_sub * lim.sub_partitions // warps

    # Shared memory: the driver's reserve per block, rounded to the allocation unit.
    smem_alloc = _round_up(shared_memory_per_block + lim.reserved_shared_memory_per_block,
                           lim.shared_memory_allocation_unit)
    if smem_alloc - lim.reserved_shared_memory_per_block > lim.max_shared_memory_per_block:
        by_smem = 0
    else:
        by_smem = lim.shared_memory_per_sm // smem_alloc

    by_threads = 0 if threads_per_block > lim.max_threads_per_block else lim.max_warps_per_sm // warps
    by_blocks = lim.max_blocks_per_sm
    limits = (("registers", by_regs), ("shared memory", by_smem), ("threads", by_threads), ("blocks", by_blocks))
    blocks = min(v for _, v in limits)
    binding = tuple(name for name, v in limits if v == blocks)
    return Occupancy(
        arch=arch, threads_per_block=threads_per_block, registers_per_thread=registers_per_thread,
        shared_memory_per_block=shared_memory_per_block, blocks_per_sm=blocks, warps_per_sm=blocks * warps,
        max_warps_per_sm=lim.max_warps_per_sm, limit_blocks=limits, binding=binding,
        registers_per_block=regs_per_block, shared_memory_allocated_per_block=smem_alloc,
    )


__all__ = ["LIMITS", "Occupancy", "theoretical_occupancy"]
