"""What several lessons share: building the student's kernel from their factory, launching it on the
CPU and saying where it went wrong (never what the right values are), and inspecting a kernel for
a target with the native compiler's notes that a student cannot act on kept out of the notebook."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from tilelab.workshop import Wrong, expect
from tilelab.workshop._kernel_checks import build  # the one maker of a student's kernel; lessons 07-10 take it here


def define(source: str, name: str, label: str) -> Any:
    """The function ``name`` that ``source`` (a lesson's given kernel, as the notebook shows it)
    defines, with its text readable by ``inspect`` (TileLang parses a kernel from its source)."""
    import linecache

    text = "import tilelang.language as T\n\n" + source
    filename = f"<tilelab-lesson-{label}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": f"tilelab_lesson_{label.replace('.', '_')}"}
    exec(compile(text, filename, "exec", dont_inherit=True), namespace)
    return namespace[name]


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Keep what TVM's C++ logging writes to file descriptor 2 (e.g. "Unable to detect ROCm
    version" when lowering for an AMD GPU on a machine without ROCm) out of the notebook: the
    student cannot act on it. Python's own warnings and errors are untouched."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real descriptor 2 (an embedded interpreter): nothing to hide
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def inspect(kernel: Any, target: str) -> Any:
    """``tilelab.inspect(kernel, target)``, quiet for AMD targets (see :func:`quiet_native_stderr`)."""
    import tilelab

    if target.startswith("gfx"):
        with quiet_native_stderr():
            return tilelab.inspect(kernel, target)
    return tilelab.inspect(kernel, target)


def _tiles(cells: tuple[tuple[int, int], ...], limit: int = 4) -> str:
    shown = ", ".join(f"({r}, {c})" for r, c in cells[:limit])
    return shown + (f" and {len(cells) - limit} more" if len(cells) > limit else "")


def where_wrong(result: Any) -> str:
    """Where a failed CPU launch went wrong, by output and tile: counts and places, no values."""
    parts = []
    for out in result.outputs:
        if out.passed:
            continue
        bits = []
        if out.unwritten:
            first = f" (the first at {list(out.first_unwritten)})" if out.first_unwritten is not None else ""
            bits.append(f"{out.unwritten} of its {_size(out.shape)} elements still hold the poison the "
                        f"launch filled it with{first}")
        if out.nonfinite:
            bits.append(f"{out.nonfinite} elements are NaN or infinite")
        if not out.unwritten and not out.nonfinite and out.rel_error is not None:
            bits.append(f"relative error {out.rel_error:.2g} (the tolerance is {out.tolerance:.2g})")
        tiles = out.tiles
        if tiles is not None:
            t = f"{tiles.tile[0]}x{tiles.tile[1]}"
            for state, label in (("unwritten", "never written"), ("partial", "partly written"), ("wrong", "wrong")):
                cells = tiles.where(state)
                if cells:
                    bits.append(f"{label} in {len(cells)} tile(s) of {t} (tile row, column) {_tiles(cells)}")
        parts.append(f"{out.name}: " + "; ".join(bits))
    return " | ".join(parts)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def run_cpu(kernel: Any, *tensors: Any, ref: Callable[..., Any], tolerance: float | None = None,
            tile: tuple[int, int] | None = None) -> Any:
    """Launch on the CPU (target ``c``) with poisoned outputs and compare with ``ref``; ``tile``
    is the output tile one block writes, for the tile map (the kernel's own, not a guess)."""
    import tilelab

    extra = {} if tile is None else {"tile": tile}
    return tilelab.run(kernel, *tensors, target="c", ref=ref, tolerance=tolerance, seed=11, **extra)


def on_gpu(kernel: Any, ref: Callable[..., Any], tolerance: float | None = None) -> str:
    """The GPU part of a kernel check: where a CUDA GPU is present, launch ``kernel`` there against
    ``ref`` (a wrong result fails the check); elsewhere say that this part was not run."""
    import tilelab

    if not tilelab.has_gpu():
        return " (on a CUDA GPU the check also launches it against torch; there is none here)"
    result = tilelab.run(kernel, ref=ref, seed=13, tolerance=tolerance)
    expect(result.passed, "it lowers as asked, but launched on this GPU it is wrong: " + where_wrong(result))
    return f" Launched on {result.device}: right against torch."


# the size a GEMM written for a GPU is checked at on the CPU: not square, ragged in M, N and K, and
# a tile that is not square (block_M != block_N), small enough to answer in seconds
GEMM_CPU_SIZE = (150, 100, 80, 64, 32, 16)


def _gemm_refs(K: int, block_k: int, transpose_b: bool) -> list[tuple[str, Callable[..., Any]]]:
    def b_of(b: Any) -> Any:
        return b.T if transpose_b else b

    last = (-(-K // block_k) - 1) * block_k  # where the last slice of K starts (K may be ragged)
    return [
        ("C holds the product of every block_K slice of K but the last: the loop over K stops one slice short",
         lambda a, b: a[:, :last] @ b_of(b)[:last, :]),
        ("C holds only the first block_K slice's product: the loop over K must add every slice's product",
         lambda a, b: a[:, :block_k] @ b_of(b)[:block_k, :]),
        ("C holds only the last slice's product: the accumulator is cleared on every step of K",
         lambda a, b: a[:, last:] @ b_of(b)[last:, :]),
        ("C holds -(A @ B): a sign", lambda a, b: -(a @ b_of(b))),
    ]


def gemm_slip(passes: Callable[[Callable[..., Any]], bool], K: int, block_k: int,
              transpose_b: bool = False) -> str | None:
    """Which known slip a wrong GEMM made, if any: ``passes(ref)`` runs it against another
    reference (the K loop one slice short, the first or last slice only, a sign)."""
    for said, other in _gemm_refs(K, block_k, transpose_b):
        try:
            if passes(other):
                return said
        except Exception:
            continue
    return None


def gemm_on_cpu(build: Callable[..., Any], *, transpose_b: bool = False, tolerance: float | None = None,
                size: tuple[int, ...] = GEMM_CPU_SIZE) -> str:
    """The results part of a GEMM exercise graded for a GPU: ``build(M, N, K, block_M, block_N,
    block_K)`` is run on the CPU with its tile program's meaning (``tilelab.run(device="cpu")``) at
    ``size`` against torch; a wrong kernel fails with where, and what it computed instead where that
    is a known slip. Returns the sentence for the pass message."""
    import tilelab

    M, N, K, bm, bn, bk = size

    def ref(a: Any, b: Any) -> Any:
        return a @ (b.T if transpose_b else b)

    kernel = build(M, N, K, bm, bn, bk)
    where = f"run on the CPU at M={M}, N={N}, K={K} with {bm}x{bn}x{bk} tiles"
    result = tilelab.run(kernel, ref=ref, device="cpu", tolerance=tolerance, seed=21, tile=(bm, bn))
    if result.passed:
        return f"right on the CPU at M={M}, N={N}, K={K} with {bm}x{bn}x{bk} tiles"
    said = gemm_slip(lambda other: tilelab.run(kernel, ref=other, device="cpu", tolerance=tolerance, seed=21,
                                               tile=(bm, bn)).passed, K, bk, transpose_b)
    if said:
        raise Wrong(f"it lowers, but {where}: {said}")
    raise Wrong(f"it lowers, but {where} (the tile program's meaning) it is wrong: {where_wrong(result)}. Look at "
                "which tiles: the offsets of the copies (by for A's rows, bx for B's columns), the store, the clear")


def passes_cpu(kernel: Any, *tensors: Any, ref: Callable[..., Any], tolerance: float | None = None) -> bool:
    try:
        return bool(run_cpu(kernel, *tensors, ref=ref, tolerance=tolerance).passed)
    except Exception:
        return False


__all__ = ["GEMM_CPU_SIZE", "Wrong", "build", "define", "expect", "gemm_on_cpu", "gemm_slip", "inspect", "on_gpu",
           "passes_cpu", "quiet_native_stderr", "run_cpu", "where_wrong"]
