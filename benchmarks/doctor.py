"""How many of TileLang's own compile failures tilelab explains: the doctor over folders of scripts.

    git clone https://github.com/tile-ai/tilelang /tmp/tilelang-src
    git -C /tmp/tilelang-src archive HEAD examples testing | tar -x -C /tmp/tilelang-corpus
    .venv/bin/python benchmarks/doctor.py /tmp/tilelang-corpus/examples /tmp/tilelang-corpus/testing [--jobs 2]
    .venv/bin/python benchmarks/doctor.py --rows examples.json --rows testing.json   # rows of earlier runs
    .venv/bin/python benchmarks/doctor.py --rows testing.json --replace rerun.json --rediagnose

Runs every script of each folder as ``python -m tilelab corpus --lower-only --tests`` does (each
kernel a script or a pytest file's test functions build, lowered by TileLang for sm_90a, no
inspection), and for every kernel TileLang cannot lower prints the diagnosis: the catalogue's
cause, the pass that failed, the script line. Then the criterion per folder (or rows file) and in
all: the compile failures, how many name the pass, the kernel line, a known cause, and all three
(explained), as counts and shares. Target: at least 90% explained.

Rows of earlier runs (``--rows``) carry the diagnosis of the code that ran them. ``--rediagnose``
reads each failure's cause again from the TileLang sentence the row saved, with today's catalogue
(no lowering; the pass and the line stay those the run found). ``--replace`` takes the rows of a
later run of some of the scripts (``python -m tilelab corpus ... --only GLOB --json``): they take
the place of those scripts' rows, so a pass or a line only a new run can find comes from a run.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilelab.engine import corpus as _corpus  # noqa: E402


def report(rows: list[_corpus.CorpusRow], groups: dict[str, list[_corpus.CorpusRow]] | None = None) -> str:
    failed = [r for r in rows if r.verdict == _corpus.CANNOT_LOWER]
    lines = [f"{'script':58} {'kernel':24} {'cause':26} {'pass':22} line"]
    for r in failed:
        lines.append(f"{r.script:58} {r.kernel[:24]:24} {(r.cause or '(unknown)')[:26]:26} "
                     f"{(r.pass_name or '-')[:22]:22} {r.line.split(':', 1)[0] if r.line else '-'}")
        if not r.cause:
            lines.append(f"    {r.reason[:150]}")
    lines.append("")
    by_cause = collections.Counter(r.cause or "(unknown)" for r in failed)
    lines.append("by cause: " + ", ".join(f"{c} {n}" for c, n in by_cause.most_common()))
    lowered = sum(r.verdict in (_corpus.LOWERED, _corpus.OK, _corpus.MISMATCH, _corpus.INSPECT_ERROR) for r in rows)
    distinct = len({(r.script.split("::")[0], r.kernel, r.cause, r.line) for r in failed})
    lines.append(f"kernels lowered: {lowered}; compile failures: {len(failed)} ({distinct} distinct by script, kernel, "
                 "cause and line)")
    lines.append("")
    lines.append(_corpus.render_criterion(groups or {"all": rows}))
    return "\n".join(lines)


def _script(row: _corpus.CorpusRow) -> str:
    return row.script.split("::", 1)[0].split(" (", 1)[0]


def replaced(rows: list[_corpus.CorpusRow], later: list[_corpus.CorpusRow]) -> list[_corpus.CorpusRow]:
    """``rows`` with every script of theirs that ``later`` ran again given the later run's rows instead,
    in the place of its first row; other scripts are kept as they were, and scripts of ``later`` that
    ``rows`` do not hold are left out (they belong to another group)."""
    by_script: dict[str, list[_corpus.CorpusRow]] = {}
    for row in later:
        by_script.setdefault(_script(row), []).append(row)
    out, done = [], set()
    for row in rows:
        script = _script(row)
        if script not in by_script:
            out.append(row)
        elif script not in done:
            out.extend(by_script[script])
            done.add(script)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="folders of TileLang scripts (TileLang's examples/ and testing/)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per script")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB")
    parser.add_argument("--rows", action="append", default=[], metavar="JSON",
                        help="read the rows of an earlier run (the corpus's --json) instead of running the scripts; "
                             "repeatable, each file a group of the criterion")
    parser.add_argument("--replace", action="append", default=[], metavar="JSON",
                        help="rows of a later run of some scripts: they replace those scripts' rows in --rows "
                             "(repeatable, applied in order)")
    parser.add_argument("--rediagnose", action="store_true",
                        help="read the cause of each saved failure again with today's catalogue (no lowering)")
    parser.add_argument("--json", help="write the rows as JSON")
    args = parser.parse_args()
    if not args.rows and not args.folders:
        parser.error("give folders of scripts to run, or --rows JSON of an earlier run")
    groups: dict[str, list[_corpus.CorpusRow]] = {}
    later = [[_corpus.CorpusRow.from_dict(d) for d in json.loads(Path(path).read_text())] for path in args.replace]
    for path in args.rows:
        group = [_corpus.CorpusRow.from_dict(d) for d in json.loads(Path(path).read_text())]
        for run in later:  # in the order given: a later file's rows of a script replace an earlier's
            group = replaced(group, run)
        if args.rediagnose:
            before = [r.cause for r in group]
            group = [_corpus.rediagnosed(r) for r in group]
            changed = sum(a != r.cause for a, r in zip(before, group))
            print(f"{Path(path).stem}: {changed} failures given another cause by today's catalogue", file=sys.stderr)
        groups[Path(path).stem] = group
    for folder in args.folders:
        found = _corpus.run_corpus(folder, jobs=args.jobs, timeout_s=args.timeout, only=args.only, lower_only=True,
                                   tests=True)
        name = Path(folder).name
        groups[name] = [_corpus.CorpusRow.from_dict({**r.to_dict(), "script": f"{name}/{r.script}"}) for r in found]
    rows = [r for group in groups.values() for r in group]
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    print(report(rows, groups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
