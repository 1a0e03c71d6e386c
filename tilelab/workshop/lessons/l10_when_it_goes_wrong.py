"""Lesson 10: when it goes wrong on a GPU: a launch that never finishes, stopped by its timeout,
and the sanitizer's view of an out-of-bounds store (both GPU parts; out-of-bounds indexing and races
between blocks, found on the CPU, are notebooks 01 and 03's)."""

from __future__ import annotations

from typing import Any

from tilelab.workshop import NeedsGpu, Wrong, exercise, expect


def has_gpu() -> bool:
    import tilelab

    return bool(tilelab.has_gpu())


# ------------------------------------------------------------------------------------------
# 10.1 the sanitizer (a GPU part)
# ------------------------------------------------------------------------------------------

def shifted_store(n: int = 1 << 16) -> Any:
    """B[i + offset] = A[i]: with offset > 0 the last block stores past B's end."""
    import tilelang.language as T

    @T.prim_func
    def shifted_store(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), offset: T.int32):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i + offset] = A[bx * 128 + i]

    return shifted_store


SANITIZER_OFFSET = 3


def sanitizer_report(offset: int = SANITIZER_OFFSET) -> Any:
    """shifted_store compiled with TileLang's bounds checks off, run once under memcheck."""
    import tilelang

    import tilelab

    unguarded = tilelang.compile(shifted_store(), pass_configs={"tl.disable_safe_memory_legalize": True})
    return tilelab.sanitize(unguarded, offset=offset, tool="memcheck")


@exercise("10.1", "what memcheck finds",
          question=f"shifted_store, built with TileLang's bounds checks off, runs once under compute-sanitizer's "
                   f"memcheck with offset={SANITIZER_OFFSET}. How many out-of-bounds writes does it report? "
                   "(This one needs a CUDA GPU and compute-sanitizer.)",
          kind="predict",
          hints=("Each thread stores one element: B[bx * 128 + i + offset].",
                 "Which indices are past B's last element, n - 1?",
                 "memcheck reports each faulting access of each thread."),
          solution=f"answer_10_1 = {SANITIZER_OFFSET}",
          needs_gpu=True)
def _sanitizer(answer: Any) -> Any:
    expect(isinstance(answer, int) and not isinstance(answer, bool), f"answer with a whole number, got {answer!r}")
    if not has_gpu():
        return NeedsGpu("memcheck runs the kernel on a CUDA GPU; there is none here")
    report = sanitizer_report()
    writes = [f for f in report.findings if "out-of-bounds" in f.kind and "write" in f.kind]
    truth = len(writes)
    if answer == 0:
        raise Wrong("the bounds checks TileLang adds are off in this build, so nothing stops the stores")
    expect(answer == truth, "not quite: count the threads whose index lands past the end of B")
    return f"{truth} out-of-bounds writes: " + "; ".join(f"{f.where} (block {f.block}, thread {f.thread})"
                                                        for f in writes[:4])
