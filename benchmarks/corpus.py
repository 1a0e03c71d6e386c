"""tilelab over TileLang's own examples: every kernel inspected and checked, with the time it took.

    git clone https://github.com/tile-ai/tilelang /tmp/tilelang-src
    git -C /tmp/tilelang-src archive COMMIT examples | tar -x -C /tmp/tilelang-examples
    .venv/bin/python benchmarks/corpus.py /tmp/tilelang-examples/examples [--jobs 2] [--repeat 3] [--json rows.json]

Prints one row per kernel (ok / mismatch / inspect error / TileLang cannot lower, with the
reason; scripts that built no kernel say why), the totals, and per kernel TileLang's own lowering
time (what ``tilelang.compile`` does for tvm_ffi short of nvcc) against an uncached
``tilelab.inspect``; with ``--repeat N`` both are measured in N interleaved rounds (lower,
inspect, lower, inspect, ...) and compared on the median of the rounds' ratios, so a burst of
load on a shared machine does not decide it. ``--only GLOB`` re-runs a few scripts alone.
Targets: at least 95% of the kernels TileLang lowers are consistent; no inspect takes more than
3x TileLang's lowering (on the median ratio). Some examples import packages of their own
(einops, triton, flash_attn, fla, ...): put them on PYTHONPATH to reach their kernels.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilelab.engine import corpus as _corpus  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="TileLang's examples/ folder (or any folder of TileLang scripts)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per script")
    parser.add_argument("--target", default=_corpus.DEFAULT_ARCH)
    parser.add_argument("--repeat", type=int, default=1,
                        help="interleaved rounds of lowering and inspect per kernel; the ratio is their median")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB",
                        help="only scripts whose path relative to the folder matches (repeatable)")
    parser.add_argument("--json", help="write the rows here as JSON")
    args = parser.parse_args()

    start = time.perf_counter()
    done = []

    partial = Path(args.json).with_suffix(".partial.jsonl") if args.json else None
    if partial:
        partial.write_text("")

    def progress(rows: list) -> None:
        done.append(rows)
        print(f"[{len(done)}] {rows[0].script}: {', '.join(r.verdict for r in rows)}", file=sys.stderr, flush=True)
        if partial:  # rows as they come, so an interrupted run still leaves its table
            with partial.open("a") as f:
                f.writelines(json.dumps(r.to_dict()) + "\n" for r in rows)

    rows = _corpus.run_corpus(args.directory, jobs=args.jobs, arch=args.target, timeout_s=args.timeout,
                              on_script=progress, repeat=args.repeat, only=args.only)
    print(_corpus.render_table(rows))
    over = _corpus.over_target(rows, 3.0)
    print(f"kernels whose inspect took more than 3x TileLang's lowering: {len(over)}"
          + (f" (medians of {args.repeat} interleaved rounds)" if args.repeat > 1 else ""))
    for r in over:
        print(f"  {r.script} {r.kernel}: {r.inspect_s:.2f} s vs {r.lower_s:.2f} s ({_corpus.format_ratio(r)}x)")
    print(f"{len(done)} scripts in {time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
