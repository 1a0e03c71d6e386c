"""Record the course's saved timelines (notebook 05's "where is the bubble", graded without a GPU).

On a machine with a Hopper GPU, from the repository's root:

    python -m tilelab.workshop.data.record_timelines [FOLDER]

writes ``gemm_1_stage.timeline.json`` and ``gemm_3_stages.timeline.json`` (notebook 05's GEMM,
1024^3 fp16, 128 x 128 x 64 tiles, block 0 traced) and ``flash.timeline.json`` (notebook 08's
forward pass) into FOLDER (default: this folder), each a ``tilelab.Timeline`` saved as JSON.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tilelab
from tilelab.workshop.lessons.l05_pipelining_and_tma import lesson_gemm
from tilelab.workshop.lessons.l08_flash_attention import flash_forward

SIZE = (1024, 1024, 1024, 128, 128, 64)


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    jobs = {
        "gemm_1_stage": lambda: lesson_gemm(*SIZE, num_stages=1),
        "gemm_3_stages": lambda: lesson_gemm(*SIZE, num_stages=3),
        "flash": lambda: flash_forward(seq=1024, dim=64),
    }
    for name, make in jobs.items():
        started = time.perf_counter()
        try:
            tl = tilelab.timeline(make(), blocks=(0,), overhead=False)
        except Exception as err:  # one failed recording does not lose the others
            print(f"{name}: failed: {type(err).__name__}: {err}", flush=True)
            continue
        path = tl.save(folder / f"{name}.timeline.json")
        print(f"{name}: {len(tl.spans)} spans, {path.stat().st_size} bytes, {time.perf_counter() - started:.1f} s; "
              f"{tl!r}", flush=True)
        if tl.summary is not None:
            for role in tl.summary.roles:
                print("   ", role, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
