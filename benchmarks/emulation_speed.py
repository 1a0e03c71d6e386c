"""How long a GPU kernel's tile program takes on the CPU (``tilelab.run(kernel, device="cpu")``).

    .venv/bin/python benchmarks/emulation_speed.py [--repeat 5] [--course] [--json rows.json] [--only TEXT]

Rows: a Hopper GEMM and a flash-attention forward at small sizes (every block), an 8192^3 float16
GEMM (128x256x64 tiles, 3 stages) checked by two of its 2048 blocks against a reference of just
their tiles, a flash-attention forward at the size of TileLang's example (batch 8, 32 heads,
sequence 4096, head dim 128, 128x128 tiles: 134M-element tensors) checked by its first and last
blocks against a reference of their rows, and with ``--course`` every course exercise whose check
runs a kernel, checked with its solution. Each row is measured ``--repeat`` times in this
process: the first call includes the compile (TileLang's cache is a fresh folder) and the
worker's start; the table gives it apart ("first") and the median and range of the others.
Targets: a student's check answers in a few seconds; the 8192^3 GEMM is checked in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TILELANG_CACHE_DIR", tempfile.mkdtemp(prefix="tilelab-emu-bench-"))


def _gemm_rows(repeat: int) -> list[tuple[str, Callable[[], Any]]]:
    import cpu_path_kernels as ck
    import torch

    import tilelab

    def attention_ref(q, k, v):
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
        return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)

    big = ck.gemm(M=8192, N=8192, K=8192, block_M=128, block_N=256, block_K=64, stages=3)
    grid = (8192 // 256, 8192 // 128)
    blocks = [0, grid[0] * grid[1] - 1]

    def two_tiles(a, b):
        """The reference of the two blocks' tiles only (the rest is not checked)."""
        out = torch.zeros(8192, 8192, dtype=a.dtype)
        for index in blocks:
            bx, by = index % grid[0], index // grid[0]
            rows, cols = slice(by * 128, (by + 1) * 128), slice(bx * 256, (bx + 1) * 256)
            out[rows, cols] = a[rows] @ b[:, cols]
        return out

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(8192, 8192, generator=gen).half()
    b = torch.randn(8192, 8192, generator=gen).half()
    c = torch.empty(8192, 8192, dtype=torch.float16)
    # flash attention at the size of TileLang's example: two of its 8192 blocks, a reference of their rows
    batch, heads, seq, dim = 8, 32, 4096, 128
    attn = ck.attention(batch=batch, heads=heads, seq=seq, dim=dim, block_M=128, block_N=128)
    attn_grid = (seq // 128, heads, batch)
    attn_blocks = [0, attn_grid[0] * attn_grid[1] * attn_grid[2] - 1]
    q, k, v = (torch.randn(batch, seq, heads, dim, generator=gen, dtype=torch.float16) for _ in range(3))

    def attention_rows(q, k, v):
        """The reference of the two blocks' rows only (the rest is not checked)."""
        out = torch.zeros(q.shape, dtype=torch.float32)
        for index in attn_blocks:
            bx, by = index % attn_grid[0], index // attn_grid[0] % attn_grid[1]
            bz = index // (attn_grid[0] * attn_grid[1])
            rows = slice(bx * 128, (bx + 1) * 128)
            head = [t[bz:bz + 1, :, by:by + 1].float() for t in (q, k, v)]
            out[bz, rows, by] = attention_ref(head[0][:, rows], head[1], head[2])[0, :, 0]
        return out

    o = torch.empty(batch, seq, heads, dim, dtype=torch.float16)
    return [
        ("GEMM 192x160x96 fp16 (every block)", lambda: tilelab.run(ck.gemm(), device="cpu", ref=lambda x, y: x @ y)),
        ("flash attention 1x128x2x64 (every block)",
         lambda: tilelab.run(ck.attention(), device="cpu", ref=attention_ref)),
        ("GEMM 8192^3 fp16, 2 of 2048 blocks",
         lambda: tilelab.run(big, a, b, c, device="cpu", blocks=blocks, ref=two_tiles, ref_dtype=torch.float32)),
        ("flash attention 8x4096x32x128 fp16, 2 of 8192 blocks",
         lambda: tilelab.run(attn, q, k, v, o, device="cpu", blocks=attn_blocks, ref=attention_rows,
                             ref_dtype=torch.float32)),
    ]


def _course_rows() -> list[tuple[str, Callable[[], Any]]]:
    import linecache

    from tilelab import workshop
    from tilelab.workshop import _core

    rows = []
    for ex in _core.registry().values():
        if ex.needs_gpu or "T.prim_func" not in (ex.setup + ex.solution) and "T.Kernel" not in (ex.setup + ex.solution):
            continue
        # the notebook's first cell imports these; a %%tilelang cell is not plain Python and is left out
        source = "import tilelang\nimport tilelang.language as T\nimport torch\n" + ex.setup + "\n" + ex.solution + "\n"
        filename = f"<course {ex.id} solution>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace: dict[str, Any] = {}
        try:
            exec(compile(source, filename, "exec"), namespace)
        except Exception as err:  # a solution that needs the notebook's cells above it
            print(f"  {ex.id}: solution not runnable alone ({type(err).__name__}: {err})", file=sys.stderr)
            continue
        answer = namespace.get(ex.answer_name or f"answer_{ex.id.replace('.', '_')}")
        if answer is None:
            continue
        rows.append((f"course {ex.id} check ({ex.title})", lambda ex=ex, answer=answer: workshop.check(ex.id, answer)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--course", action="store_true", help="also time the course's kernel checks")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    parser.add_argument("--only", default=None, help="only the rows whose name contains this text")
    args = parser.parse_args()
    rows = _gemm_rows(args.repeat) + (_course_rows() if args.course else [])
    if args.only:
        rows = [row for row in rows if args.only in row[0]]
    table = []
    print(f"{'what':60} {'first s':>8} {'median s':>9} {'min-max s':>14}  result")
    for name, fn in rows:
        times, outcome = [], ""
        for _ in range(max(args.repeat, 2)):
            start = time.perf_counter()
            try:
                result = fn()
                outcome = "PASS" if getattr(result, "passed", True) else "FAIL: " + str(
                    getattr(result, "message", ""))[:50].replace("\n", " ")
            except Exception as err:
                outcome = f"{type(err).__name__}: {str(err)[:60]}"
            times.append(time.perf_counter() - start)
        rest = times[1:]
        row = {"what": name, "first_s": times[0], "median_s": statistics.median(rest), "min_s": min(rest),
               "max_s": max(rest), "runs": len(rest), "result": outcome}
        table.append(row)
        print(f"{name[:60]:60} {times[0]:8.2f} {row['median_s']:9.2f} {min(rest):6.2f}-{max(rest):<7.2f}  {outcome}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
