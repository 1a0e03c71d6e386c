"""How many of TileLang's own compile failures tilelab explains: the doctor over folders of scripts.

    git clone https://github.com/tile-ai/tilelang /tmp/tilelang-src
    git -C /tmp/tilelang-src archive HEAD examples testing | tar -x -C /tmp/tilelang-corpus
    .venv/bin/python benchmarks/doctor.py /tmp/tilelang-corpus/examples /tmp/tilelang-corpus/testing [--jobs 2]

Runs every script of each folder as ``python -m tilelab corpus --lower-only`` does (each kernel it
builds lowered by TileLang for sm_90a, no inspection), and for every kernel TileLang cannot lower
prints the diagnosis: the catalogue's cause, the pass that failed, the script line. Then the
share of failures that are explained (the pass, the line and a known cause), per cause and in
all. Target: at least 90% explained.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilelab import _corpus  # noqa: E402


def report(rows: list[_corpus.CorpusRow]) -> str:
    failed = [r for r in rows if r.verdict == _corpus.CANNOT_LOWER]
    lines = [f"{'script':58} {'kernel':24} {'cause':26} {'pass':22} line"]
    for r in failed:
        lines.append(f"{r.script[:58]:58} {r.kernel[:24]:24} {(r.cause or '(unknown)')[:26]:26} "
                     f"{(r.pass_name or '-')[:22]:22} {r.line.split(':', 1)[0] if r.line else '-'}")
        if not r.cause:
            lines.append(f"    {r.reason[:150]}")
    lines.append("")
    by_cause = collections.Counter(r.cause or "(unknown)" for r in failed)
    lines.append("by cause: " + ", ".join(f"{c} {n}" for c, n in by_cause.most_common()))
    lowered = sum(r.verdict in (_corpus.LOWERED, _corpus.OK, _corpus.MISMATCH, _corpus.INSPECT_ERROR) for r in rows)
    explained = sum(r.explained for r in failed)
    lines.append(f"kernels lowered: {lowered}; compile failures: {len(failed)}")
    if failed:
        lines.append(f"explained (pass, line and a known cause): {explained}/{len(failed)} "
                     f"({100 * explained / len(failed):.1f}%); a known cause: {sum(bool(r.cause) for r in failed)}, "
                     f"the pass: {sum(bool(r.pass_name) for r in failed)}, the line: {sum(bool(r.line) for r in failed)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="folders of TileLang scripts (TileLang's examples/ and testing/)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per script")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB")
    parser.add_argument("--rows", help="read the rows of an earlier run (JSON) instead of running the scripts")
    parser.add_argument("--json", help="write the rows as JSON")
    args = parser.parse_args()
    if args.rows:
        rows = [_corpus.CorpusRow.from_dict(d) for d in json.loads(Path(args.rows).read_text())]
    else:
        rows = []
        for folder in args.folders:
            found = _corpus.run_corpus(folder, jobs=args.jobs, timeout_s=args.timeout, only=args.only, lower_only=True)
            rows += [_corpus.CorpusRow.from_dict({**r.to_dict(), "script": f"{Path(folder).name}/{r.script}"})
                     for r in found]
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
