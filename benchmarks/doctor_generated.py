"""The doctor on generated failures: clusters, the held-out share explained, the hand-check sample,
and reproducer sizes and times (``benchmarks/doctor.py --generate``)."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import doctor_mutants as dm

HALVES = ("build", "held-out")


def half(seed: str) -> str:
    """Which half a source kernel belongs to: fixed by its name, never by its failures."""
    return HALVES[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % 2]


def explained(row: dict[str, Any]) -> bool:
    """Pass named, the line placed in the kernel's own source, and a cause."""
    line = row.get("line")
    in_kernel = bool(line) and "<mutant" in str(line[0])
    return bool(row.get("pass")) and in_kernel and bool(row.get("cause"))


def cluster(row: dict[str, Any]) -> str:
    from tilelab.engine.reproducer import sentence_key

    what = row.get("cause") or ("? " + sentence_key(row.get("reason", "")))
    return f"{row.get('pass') or '?'} / {what}"


def _relower(rows: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """The failures lowered again with today's doctor (a failure takes a tenth of a second)."""
    failed = [dm.mutant_of(r) for r in rows if r.get("status") == "failed"]
    again = {(r["seed"], r["mutation"], r["target"]): r for r in dm.run(failed, jobs=jobs)}
    return [again.get((r["seed"], r["mutation"], r["target"]), r) for r in rows]


def failing_sources(rows: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """The source kernels that fail unmutated, by (seed, target): the status of their unmutated
    ("base") row there. Their mutants on that target fail for the reason the kernel does, whatever
    the mutation: they say nothing about it."""
    return {(r["seed"], r["target"]): r["status"] for r in rows
            if r.get("mutation") == "base" and r.get("status") != "lowered"}


def to_lower(all_mutants: list[dm.Mutant], base_rows: list[dict[str, Any]]) -> list[dm.Mutant]:
    """The mutants worth lowering once the unmutated kernels were: none of a (seed, target) whose
    unmutated kernel failed there, and none of the unmutated ones again."""
    failing = failing_sources(base_rows)
    return [m for m in all_mutants if m.mutation != "base" and (m.seed, m.target) not in failing]


def without_failing_sources(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[tuple[str, str], str]]:
    """``rows`` less those of every source kernel that fails unmutated on their target (its base row
    included: a failure of the kernel as written is not a generated one); and those sources."""
    failing = failing_sources(rows)
    return [r for r in rows if (r["seed"], r["target"]) not in failing], failing


def main(args: Any) -> int:
    store = Path(args.mutants) if args.mutants else None
    started = time.perf_counter()
    not_lowered = 0
    if store is not None and store.exists():
        rows = json.loads(store.read_text())
        rows = _relower(rows, args.jobs)
    else:
        files = dm.seed_files(args.seeds or list(dm.DEFAULT_SEED_FILES))
        pairs = dm.seeds(files)
        every = list(dm.mutants(pairs))
        rows = dm.run([m for m in every if m.mutation == "base"], jobs=args.jobs)  # the kernels as written first
        rest = to_lower(every, rows)
        not_lowered = len(every) - len(rows) - len(rest)
        rows += dm.run(rest, jobs=args.jobs)
    if store is not None:
        store.write_text(json.dumps(rows))
    seconds = time.perf_counter() - started
    return table(rows, seconds, args, not_lowered=not_lowered)


def table(rows: list[dict[str, Any]], seconds: float, args: Any, not_lowered: int = 0) -> int:
    """The tables of ``main`` on the mutants' rows (``args``: ``sample``, ``reproducers``);
    ``not_lowered``: mutants of failing source kernels that were not even lowered."""
    all_rows = rows
    rows, skipped = without_failing_sources(rows)
    failed = [r for r in rows if r.get("status") == "failed"]
    seeds = sorted({r["seed"] for r in rows})
    lowered = sum(r["status"] == "lowered" for r in rows)
    print(f"mutants: {len(rows)} of {len(seeds)} source kernels ({seconds:.0f} s); lowered {lowered}, "
          f"generated failures {len(failed)}, not a kernel {sum(r['status'] == 'invalid' for r in rows)}, "
          f"crashed {sum(r['status'] == 'crashed' for r in rows)}")
    by_status = collections.Counter(skipped.values())
    words = {"failed": "fail to lower", "invalid": "are not a kernel", "crashed": "crashed the lowering"}
    why = ", ".join(f"{n} {words.get(status, status)}" for status, n in sorted(by_status.items()))
    dropped = sum(r.get("mutation") != "base" for r in all_rows) - sum(r.get("mutation") != "base" for r in rows)
    print(f"skipped: {len(skipped)} source kernels (on a target) that fail unmutated ({why or 'none'}); their "
          f"{dropped + not_lowered} mutants are not counted ({not_lowered} not lowered at all): a mutant of a "
          "failing kernel says nothing about its mutation")
    targets: dict[str, list[str]] = collections.defaultdict(list)
    for (seed, target), status in sorted(skipped.items()):
        targets[seed].append(f"{target} ({status})")
    for seed, where in targets.items():
        print(f"    {seed}: {', '.join(where)}")
    for h in HALVES:
        members = [s for s in seeds if half(s) == h]
        print(f"  {h}: {len(members)} kernels: {', '.join(members)}")
    print()
    clusters: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in failed:
        clusters[cluster(r)].append(r)
    print(f"{'cluster (pass / cause)':78} {'all':>4} {'build':>5} {'held':>5} {'expl.':>5}")
    for name, members in sorted(clusters.items(), key=lambda kv: -len(kv[1])):
        held = [r for r in members if half(r["seed"]) == "held-out"]
        print(f"{name[:78]:78} {len(members):4d} {len(members) - len(held):5d} {len(held):5d} "
              f"{sum(explained(r) for r in members):5d}")
    print(f"{len(clusters)} clusters")
    print()
    for h in HALVES:
        part = [r for r in failed if half(r["seed"]) == h]
        n = len(part)
        if not n:
            continue
        share = sum(explained(r) for r in part) / n
        print(f"{h:9}: {n} failures; pass {sum(bool(r.get('pass')) for r in part)}, line in the kernel "
              f"{sum(bool(r.get('line')) and '<mutant' in str(r['line'][0]) for r in part)}, cause "
              f"{sum(bool(r.get('cause')) for r in part)}; explained {share:.0%} (target >= 90% on held-out)")
    held = [r for r in failed if half(r["seed"]) == "held-out"]
    print()
    rng = random.Random(38)
    sample = rng.sample(held, min(args.sample, len(held)))
    print(f"hand-check sample: {len(sample)} held-out failures (seeded), each: the mutant, the cause, the line")
    for i, r in enumerate(sample, 1):
        line = r.get("line") or ["", 0, ""]
        print(f"{i:2d}. {r['seed']} [{r['mutation']}] {r['target']}: {r.get('pass')} / {r.get('cause') or '(none)'}")
        print(f"    line {line[1]}: {str(line[2]).strip()[:100]}")
        said = re.sub(r"\s+", " ", r.get("meaning") or r.get("reason", ""))
        print(f"    {said[:260]}")
    if args.reproducers:
        print()
        reproducer_table(held, args.reproducers)
    return 0


def reproducer_table(failed: list[dict[str, Any]], count: int, time_limit_s: float = 60.0) -> None:
    """Shrink ``count`` failures (one per cluster first) and print lines before/after and times.

    Each failure's "cell" is its factory as a user's cell holds it: the names it reads from its
    module, its (edited) source and the call. A failure of TileLang's passes comes with the recipe
    tilelab writes at the failure (``err.recipe``: the prim_func's source and the values it reads);
    one raised while the factory ran is given the factory's call (``call_recipe``), as the magic
    gives a cell that failed while it ran its text."""
    from tilelab import _tilelang
    from tilelab.records.errors import LoweringError
    from tilelab.targets import parse_target

    picked: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in sorted(failed, key=lambda r: (cluster(r), r["seed"], r["mutation"])):
        if cluster(r) not in seen:
            picked.append(r)
            seen.add(cluster(r))
    picked = picked[:count]
    results = []
    print(f"{'reproducer of':62} {'target':7} {'before':>6} {'after':>5} {'s':>5}  same way")
    for r in picked:
        mutant = dm.mutant_of(r)
        err = None
        fn, kwargs, _, _ = dm.factory(mutant)
        try:
            with _tilelang.tilelang_errors(mutant.seed.rsplit(":", 1)[1], stage="elaboration"):
                func = fn(**kwargs)
            _tilelang.lower(_tilelang.resolve_kernel(func), mutant.target, out_idx=None, pass_configs={}, backends=())
        except LoweringError as caught:
            err = caught
        except Exception:
            err = None
        if err is None:
            print(f"{(r['seed'] + ' ' + r['mutation'])[:62]:62} {mutant.target:7} no longer fails")
            continue
        if err.recipe is None:  # failed while the factory ran: the factory's call is the script
            err.recipe = _tilelang.call_recipe(fn, kwargs, parse_target(mutant.target))
        rep = err.reproducer(time_limit_s=time_limit_s, progress=False)  # type: ignore[attr-defined]
        results.append((rep.lines_before, rep.lines_after, rep.seconds, rep.reproduces))
        verdict = "yes" if rep.reproduces else "no: " + rep.note[:60]
        if rep.reproduces and "time limit" in rep.note:
            verdict += " (time limit)"
        print(f"{(r['seed'] + ' ' + r['mutation'])[:62]:62} {mutant.target:7} {rep.lines_before:6d} "
              f"{rep.lines_after:5d} {rep.seconds:5.1f}  {verdict}")
    shrunk = [x for x in results if x[3]]
    if shrunk:
        b = [x[0] for x in shrunk]
        a = [x[1] for x in shrunk]
        t = [x[2] for x in shrunk]
        print(f"{len(shrunk)} of {len(results)} failures shrunk to a script failing the same way: lines before median "
              f"{statistics.median(b):.0f} (range {min(b)}-{max(b)}), after median {statistics.median(a):.0f} "
              f"(range {min(a)}-{max(a)}); seconds median {statistics.median(t):.1f} (range {min(t):.1f}-{max(t):.1f})"
              f"; time limit {time_limit_s:.0f} s each")
    elif results:
        print(f"none of {len(results)} failures shrunk")


if __name__ == "__main__":
    sys.exit(0)
