"""Tuning, side by side on one GPU: TileLang's AutoTuner against tilelab.sweep(strategy="halving"),
and how well side-by-side ratios hold from call to call.

    python benchmarks/tuning.py --out out/tuning      # every part (GEMM 8192^3, 64 configurations; FA, 24)
    python benchmarks/tuning.py --quick --out out/tuning   # smaller spaces and sizes
    python benchmarks/tuning.py --only gemm-autotuner --out out/tuning           # one part at a time...
    python benchmarks/tuning.py --only gemm-tilelab,gemm-retime --out out/tuning # ...each saved in out/tuning
    python benchmarks/tuning.py --report --out out/tuning   # the tables from the saved parts (no GPU)

The parts: ``gemm-autotuner``, ``gemm-tilelab``, ``gemm-retime`` (``gemm`` is the three),
``fa-autotuner``, ``fa-tilelab``, ``fa-retime`` (``fa``) and ``ratios``. Each part's result is
written to ``--out`` (``<part>.json``) as soon as it is done, a retime reads the two searches
saved there, and every run ends by printing the tables of whatever is saved, so a long run can be
split into commands of a few minutes each on a shared machine.

(a) For each search space (our GEMM, ``tilelab.kernels.gemm.matmul``; our flash-attention forward,
``tilelab.kernels.flash_attention``), TileLang's ``AutoTuner`` and ``tilelab.sweep`` each search
the same configurations at the same size in a process of their own, with an empty TileLang kernel
cache (and the AutoTuner's result cache off; tilelab's own caches empty too), so that both compile
everything, each with its own defaults: the AutoTuner compiles in a pool of threads (90% of the
CPUs) and times every configuration with 25 warm-up and 100 timed launches (its ``do_bench``);
the sweep compiles in a pool of processes (one per compile task, up to 1.5x the CPUs; on Linux
forks of the sweep's process, which has torch and TileLang imported), times
every configuration briefly (20 ms of launches after 25 ms of warm-up), the fastest third 3x
longer, and so on, the last three with full rounds; from the second rung on, the rung before's
leader is one of them, the others are each timed beside it and ranked (and cut) by their ratios to
it (the leader's own ratio is 1 by definition: it is not timed against itself; no warm-up to a
steady clock first, which cancels in a ratio). Neither checks
results (the AutoTuner with ``skip_check=True``,
the sweep without ``ref``). The wall time of each search is taken after the imports, from the
first compile to the answer. Then both answers are timed again
side by side in a third process: ``tilelab.bench(tilelab's best, baseline=AutoTuner's best)``,
batches of each alternating in one window, so the ratio does not depend on the GPU's clock at the
time either search ran. Targets: tilelab's wall time at most half the AutoTuner's, and its best
within 1% of the AutoTuner's best (ratio <= 1.01) or better.

(b) Four back-to-back ``tilelab.bench(gemm, baseline=torch.matmul)`` calls on the GEMM at 8192^3:
the spread ((max - min) / median) of the four ratios against the spread of the four absolute
medians. Target: the ratios' spread under 0.5%, and under the medians'.

Prints the tables; every result is also kept as JSON in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")

TIME_TARGET = 0.5  # tilelab's search time over the AutoTuner's, at most
BEST_TARGET = 1.01  # tilelab's best over the AutoTuner's best, at most
RATIO_SPREAD_TARGET = 0.005

# ------------------------------------------------------------------------------------------
# The spaces
# ------------------------------------------------------------------------------------------


def gemm_space(quick: bool) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """(size, configurations): 8192^3 and 64 configurations; quick: 4096^3 and 16."""
    if quick:
        return dict(M=4096, N=4096, K=4096), [
            dict(block_M=128, block_N=bn, block_K=64, num_stages=st, threads=256, raster=r, smem_epilogue=e)
            for bn in (128, 256) for st in (3, 4) for r in (0, 10) for e in (False, True)]
    return dict(M=8192, N=8192, K=8192), [
        dict(block_M=bm, block_N=bn, block_K=64, num_stages=st, threads=256, raster=r, smem_epilogue=e)
        for bm in (128, 256) for bn in (128, 256) for st in (2, 3, 4, 5) for r in (0, 10) for e in (False, True)]


def fa_space(quick: bool) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """(size, configurations): batch 8, 16 heads, 4096 tokens, dim 128 and 24 configurations; quick:
    2048 tokens and 8."""
    from tilelab.kernels.flash_attention import SPACE

    if quick:
        return dict(batch=4, heads=16, seq_len=2048, dim=128), [
            c for c in SPACE if c["num_stages"] in (1, 2) and c["threads"] == (128 if c["block_M"] == 64 else 256)]
    return dict(batch=8, heads=16, seq_len=4096, dim=128), list(SPACE)


SPACES = {"gemm": gemm_space, "fa": fa_space}


def factory_of(space: str):
    if space == "gemm":
        from tilelab.kernels.gemm import matmul

        return matmul, [2]
    from tilelab.kernels.flash_attention import flash_attention

    return flash_attention, [3]


# ------------------------------------------------------------------------------------------
# Children: each search in its own process
# ------------------------------------------------------------------------------------------


def autotuner_kernel(space: str, size: dict[str, int]):
    """The function the AutoTuner elaborates: configuration keywords -> ``T.prim_func``. The
    AutoTuner accepts closures over plain values only (ints, floats, strings, bools): the kernels'
    factories are imported inside, not captured."""
    if space == "gemm":
        M, N, K = size["M"], size["N"], size["K"]

        def kernel(block_M, block_N, block_K, num_stages, threads, raster, smem_epilogue):
            from tilelab.kernels.gemm import matmul

            return matmul(M, N, K, block_M=block_M, block_N=block_N, block_K=block_K, num_stages=num_stages,
                          threads=threads, raster=raster, smem_epilogue=smem_epilogue)
    else:
        batch, heads, seq_len, dim = size["batch"], size["heads"], size["seq_len"], size["dim"]

        def kernel(block_M, block_N, num_stages, threads):
            from tilelab.kernels.flash_attention import flash_attention

            return flash_attention(batch, heads, seq_len, dim, block_M=block_M, block_N=block_N,
                                   num_stages=num_stages, threads=threads)
    return kernel


def child_autotuner(space: str, quick: bool) -> dict[str, Any]:
    import torch
    from tilelang.autotuner import AutoTuner

    size, configs = SPACES[space](quick)
    out_idx = factory_of(space)[1]
    kernel = autotuner_kernel(space, size)
    t0 = time.perf_counter()
    tuner = AutoTuner.from_kernel(kernel=kernel, configs=configs).set_compile_args(out_idx=out_idx, target="auto")
    tuner.set_profile_args(skip_check=True)
    result = tuner.run()  # its defaults: 25 warm-up and 100 timed launches per configuration
    wall = time.perf_counter() - t0
    share = float(os.environ.get("TILELANG_AUTO_TUNING_CPU_UTILITIES", "0.9"))
    how = (f"compiles in {max(1, int((os.cpu_count() or 1) * share))} threads (its default, {share:g} of "
           f"{os.cpu_count()} CPUs), then times each configuration: 25 warm-up + 100 timed launches (its do_bench, "
           "L2 flushed); empty kernel cache, result cache off")
    return {"tool": "TileLang AutoTuner", "space": space, "size": size, "configs": len(configs), "wall_s": wall,
            "best_config": dict(result.config), "best_ms": float(result.latency), "how": how,
            "device": torch.cuda.get_device_name()}


def child_tilelab(space: str, quick: bool) -> dict[str, Any]:
    import torch

    import tilelab

    size, configs = SPACES[space](quick)
    factory, out_idx = factory_of(space)
    t0 = time.perf_counter()
    table = tilelab.sweep(factory, configs, [size], strategy="halving", out_idx=out_idx, progress=False)
    wall = time.perf_counter() - t0
    best = table.best()
    from tilelab.launch.sweep._pool import compile_pool_size

    how = (f"compiles in {compile_pool_size(len(configs))} processes ({os.cpu_count()} CPUs; on Linux "
           "forks of the sweep's process, which has torch and TileLang imported), each configuration "
           "inspected in its compile task first (pruned when it cannot launch); successive halving, eta=3: "
           "25 ms warm-up + 20 ms of launches each, the fastest third 3x longer, ..., the last <= 3 with full rounds "
           "(+-0.2% interval); from rung 1 on the rung before's leader is one of them, each other timed side by "
           "side with it and ranked (and cut) by that ratio, no steady-clock warm-up (it cancels in the ratio), "
           "the leader's own ratio 1 by definition (not timed against itself); empty TileLang and tilelab caches")
    halving = [n for n in table.notes if n.startswith("successive halving")]
    return {"tool": "tilelab.sweep (halving)", "space": space, "size": size, "configs": len(configs), "wall_s": wall,
            "how": how, "rungs": halving[0] if halving else None,
            "rung_breakdown": rung_breakdown(halving[0]) if halving else [], "device": torch.cuda.get_device_name(),
            "best_config": dict(best.config) if best else None, "best_ms": best.median_ms if best else None,
            "pruned": sum(1 for r in table.rows if r.stage == "pruned"),
            "failed": sum(1 for r in table.failed if r.stage != "pruned"),
            "rows": [{"config": dict(r.config), "stage": r.stage, "error": r.error, "median_ms": r.median_ms,
                      "rung": r.rung, "cut": r.cut, "compile_s": r.compile_s, "bench_s": r.bench_s}
                     for r in table.rows if r.label is None],
            "notes": list(table.notes)}


RUNG = re.compile(r"rung (\d+): (\d+) \(([^;]*); ([0-9.]+) s(?:, (\d+) pruned in their compile tasks)?\)")


def rung_breakdown(note: str) -> list[dict[str, Any]]:
    """The sweep's note "successive halving at size ... (eta=3): rung 0: 48 (20 ms of launches, one
    round; 12.3 s, 16 pruned in their compile tasks), rung 1: ..." as one record per rung: how many
    configurations it measured, how, its wall seconds (compiles, loads and timing together) and how
    many were pruned in their compile tasks."""
    return [{"rung": int(m[1]), "measured": int(m[2]), "how": m[3], "seconds": float(m[4]),
             "pruned": int(m[5]) if m[5] else 0} for m in RUNG.finditer(note)]


def child_retime(space: str, quick: bool, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Both bests timed side by side: ratio = tilelab's best / the AutoTuner's best."""
    import tilelang

    import tilelab

    size, _ = SPACES[space](quick)
    factory, out_idx = factory_of(space)
    a = tilelang.compile(factory(**size, **ours), out_idx=out_idx)
    b = tilelang.compile(factory(**size, **theirs), out_idx=out_idx)
    res = tilelab.bench(a, baseline=b, name="tilelab's best")
    return {"space": space, "ratio": res.ratio, "ratio_ci": list(res.ratio_ci) if res.ratio_ci else None,
            "ours_ms": res.median_ms, "theirs_ms": res.baseline_ms, "same": ours == theirs,
            "pairs": len(res.ratio_samples), "notes": list(res.notes)}


def child_ratios(quick: bool, calls: int = 4, save: Any = None) -> dict[str, Any]:
    """Four back-to-back default ``bench(gemm, baseline=torch.matmul)`` calls (both timed side by side
    in tilelab's worker process, on the inputs it makes there). ``save`` gets the result so far after
    each call, so a timeout keeps the calls that finished."""
    import tilelang
    import torch

    import tilelab
    from tilelab.kernels.gemm import matmul_best

    n = 4096 if quick else 8192
    kernel = tilelang.compile(matmul_best(n, n, n), out_idx=[2])
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        r = tilelab.bench(kernel, baseline=torch.matmul)
        out.append({"median_ms": r.median_ms, "ci_ms": list(r.ci_ms) if r.ci_ms else None,
                    "baseline_ms": r.baseline_ms, "ratio": r.ratio,
                    "ratio_ci": list(r.ratio_ci) if r.ratio_ci else None, "pairs": len(r.ratio_samples),
                    "wall_s": time.perf_counter() - t0, "notes": list(r.notes)})
        if save is not None:
            save({"size": n, "calls": out, "device": torch.cuda.get_device_name()})
    return {"size": n, "calls": out, "device": torch.cuda.get_device_name()}


# ------------------------------------------------------------------------------------------
# The tables (pure functions of the children's results: tested without a GPU)
# ------------------------------------------------------------------------------------------


def spread(values: list[float]) -> float | None:
    """(max - min) / median; None for fewer than two values."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def _fmt(x: Any, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _config_text(config: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) if config else "-"


def search_table(space: str, autotuner: dict[str, Any], ours: dict[str, Any], retime: dict[str, Any]) -> str:
    """Both searches of one space: wall time, answer, the answers' side-by-side ratio, verdicts.
    A result with ``error`` (the child failed) prints its reason instead of figures."""
    lines = [f"== search: {space} ({_size_text(autotuner, ours)}) =="]
    rows = [["tool", "configs", "wall s", "reported best ms", "best configuration"]]
    for r in (autotuner, ours):
        if r.get("error"):
            rows.append([r.get("tool", "?"), "-", "-", "-", "failed: " + _first_line(r["error"])])
        else:
            rows.append([r["tool"], str(r["configs"]), _fmt(r.get("wall_s"), ".1f"), _fmt(r.get("best_ms"), ".4f"),
                         _config_text(r.get("best_config"))])
    lines += _aligned(rows)
    verdicts = []
    if not autotuner.get("error") and not ours.get("error") and autotuner.get("wall_s"):
        t = ours["wall_s"] / autotuner["wall_s"]
        verdicts.append(f"time: tilelab {t:.2f}x the AutoTuner's (target <= {TIME_TARGET:g}x): "
                        + ("met" if t <= TIME_TARGET else "NOT met"))
    if retime.get("error"):
        verdicts.append("side by side: failed: " + _first_line(retime["error"]))
    elif retime.get("ratio") is not None:
        ci = retime.get("ratio_ci")
        ci_text = f" (95% CI {ci[0]:.4f}-{ci[1]:.4f})" if ci else ""
        same = " (the same configuration)" if retime.get("same") else ""
        verdicts.append(f"side by side: tilelab's best / AutoTuner's best = {retime['ratio']:.4f}{ci_text}{same}, "
                        f"{_fmt(retime.get('ours_ms'), '.4f')} vs {_fmt(retime.get('theirs_ms'), '.4f')} ms in one "
                        f"window (target <= {BEST_TARGET:g}): "
                        + ("met" if retime["ratio"] <= BEST_TARGET else "NOT met"))
    lines += verdicts
    for r in (autotuner, ours):
        if r.get("how"):
            lines.append(f"how: {r['tool']}: {r['how']}")
    if ours.get("rungs"):
        lines.append(f"tilelab's rungs: {ours['rungs']}")
    return "\n".join(lines)


def ratio_table(result: dict[str, Any]) -> str:
    """Four back-to-back bench(k, baseline=torch.matmul) calls: each call, then both spreads (of the
    calls that finished, where the part stopped early)."""
    if result.get("error") and not result.get("calls"):
        return "== ratios ==\nfailed: " + _first_line(result["error"])
    calls = result["calls"]
    lines = [f"== ratios: GEMM {result['size']}^3 against torch.matmul, {len(calls)} back-to-back calls"
             + (f" on {result['device']}" if result.get("device") else "") + " =="]
    rows = [["call", "median ms", "torch.matmul ms", "ratio", "ratio 95% CI", "pairs"]]
    for i, c in enumerate(calls, 1):
        ci = c.get("ratio_ci")
        rows.append([str(i), _fmt(c.get("median_ms"), ".4f"), _fmt(c.get("baseline_ms"), ".4f"),
                     _fmt(c.get("ratio"), ".4f"), f"{ci[0]:.4f}-{ci[1]:.4f}" if ci else "-", str(c.get("pairs", "-"))])
    lines += _aligned(rows)
    s_med = spread([c.get("median_ms") for c in calls])
    s_base = spread([c.get("baseline_ms") for c in calls])
    s_ratio = spread([c.get("ratio") for c in calls])
    lines.append(f"spread of the kernel's medians {_pct(s_med)}, of torch.matmul's {_pct(s_base)}, "
                 f"of the ratios {_pct(s_ratio)}")
    if s_ratio is not None and s_med is not None:
        met = s_ratio < RATIO_SPREAD_TARGET and s_ratio < s_med
        lines.append(f"target: ratios' spread < {100 * RATIO_SPREAD_TARGET:g}% and below the medians': "
                     + ("met" if met else "NOT met"))
    if result.get("error"):
        lines.append(f"stopped after {len(calls)} call(s): " + _first_line(result["error"]))
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _size_text(*results: dict[str, Any]) -> str:
    for r in results:
        if r.get("size"):
            return ", ".join(f"{k}={v}" for k, v in r["size"].items())
    return "size unknown"


def _first_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no message)"


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


# ------------------------------------------------------------------------------------------
# The parent: one child per search, results collected, tables printed
# ------------------------------------------------------------------------------------------


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    """This script as a child with empty TileLang and tilelab caches; its JSON result, or {"error": why}.

    The child runs in a process group of its own, with its output in a file: when it runs past
    ``timeout`` (or this process is stopped) the whole group ends, its compile processes and
    tilelab's launch worker included, which would otherwise keep the GPU busy (and, holding a pipe,
    keep this process waiting). What the child saved before that (a part that saves as it goes)
    comes back with the error."""
    with tempfile.TemporaryDirectory(prefix="tuning-") as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ, TILELANG_CACHE_DIR=str(Path(tmp) / "tilelang-cache"),
                   TILELANG_AUTO_TUNING_DISABLE_CACHE="1", TILELAB_CACHE_DIR=str(Path(tmp) / "tilelab-cache"))
        t0 = time.perf_counter()
        with open(Path(tmp) / "child.log", "w+") as log:
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", *args, "--json-out",
                                     str(out)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            code = None
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                end_group(proc)
            log.seek(0)
            said = log.read()
        try:
            result = json.loads(out.read_text()) if out.exists() else None
        except ValueError as err:
            return {"error": f"unreadable result: {err}"}
        if code is None:
            kept = " (the result holds what finished before)" if result else ""
            return {**(result or {}), "error": f"no answer within {timeout:g} s{kept}"}
        if code != 0 or result is None:
            return {"error": (said or f"exit status {code}")[-2000:]}
        result["process_s"] = time.perf_counter() - t0  # the child's whole life, imports included
        return result


def end_group(proc: subprocess.Popen) -> None:
    """End a child's process group (the child and every process it started) and reap the child."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def save_partial(path: str):
    """What a child calls with its result so far: written where the parent reads it (atomically)."""
    def save(result: dict[str, Any]) -> None:
        tmp = Path(path).with_suffix(".partial")
        tmp.write_text(json.dumps(result, default=str))
        os.replace(tmp, path)

    return save


PARTS = ("gemm-autotuner", "gemm-tilelab", "gemm-retime", "fa-autotuner", "fa-tilelab", "fa-retime", "ratios")


def parts_of(only: str) -> list[str]:
    """``--only`` -> the parts, in the order they must run: "gemm" is its three parts, "fa" too."""
    asked = set()
    for word in (w.strip() for w in only.split(",")):
        if not word:
            continue
        group = [p for p in PARTS if p.startswith(word + "-")]
        if word not in PARTS and not group:
            raise SystemExit(f"--only: no part {word!r}; the parts are {', '.join(PARTS)} (or gemm, fa)")
        asked.update(group or [word])
    return [p for p in PARTS if p in asked]


def load_part(folder: Path, part: str) -> dict[str, Any] | None:
    try:
        return json.loads((folder / f"{part}.json").read_text())
    except (OSError, ValueError):
        return None


def save_part(folder: Path, part: str, result: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{part}.json.tmp"
    tmp.write_text(json.dumps(result, indent=1, default=str))
    os.replace(tmp, folder / f"{part}.json")


def run_part(part: str, folder: Path, quick: bool, timeout: float) -> dict[str, Any]:
    """One part in its child process (a retime reads both searches from ``folder``); saved there."""
    flag = ["--quick"] if quick else []  # --quick last: after it, argparse takes no words
    space, _, which = part.partition("-")
    if part == "ratios":
        result = run_child(["ratios", *flag], timeout)
    elif which == "autotuner":
        result = run_child(["autotuner", space, *flag], timeout)
        result.setdefault("tool", "TileLang AutoTuner")
    elif which == "tilelab":
        result = run_child(["tilelab", space, *flag], timeout)
        result.setdefault("tool", "tilelab.sweep (halving)")
    else:
        theirs, ours = load_part(folder, f"{space}-autotuner"), load_part(folder, f"{space}-tilelab")
        if not (ours or {}).get("best_config") or not (theirs or {}).get("best_config"):
            missing = [n for n, r in (("autotuner", theirs), ("tilelab", ours)) if not (r or {}).get("best_config")]
            result = {"error": f"no best configuration to compare: run {', '.join(f'{space}-{m}' for m in missing)} "
                               f"first (with the same --out)"}
        elif theirs.get("quick", quick) != quick or ours.get("quick", quick) != quick:
            result = {"error": "the saved searches were run with another --quick setting than this retime"}
        else:
            result = run_child(["retime", space, json.dumps(ours["best_config"]), json.dumps(theirs["best_config"]),
                                *flag], timeout)
    result["quick"] = quick
    save_part(folder, part, result)
    return result


def report(folder: Path) -> str:
    """The tables of every part saved in ``folder``."""
    out = []
    for space in SPACES:
        theirs, ours, retime = (load_part(folder, f"{space}-{w}") for w in ("autotuner", "tilelab", "retime"))
        if theirs is None and ours is None:
            continue
        out.append(search_table(space, theirs or {"tool": "TileLang AutoTuner", "error": "not run yet"},
                                ours or {"tool": "tilelab.sweep (halving)", "error": "not run yet"},
                                retime or {"error": f"not run yet ({space}-retime)"}))
    ratios = load_part(folder, "ratios")
    if ratios is not None:
        out.append(ratio_table(ratios))
    return "\n\n".join(out) if out else f"nothing saved in {folder} yet"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller spaces and sizes")
    ap.add_argument("--only", default="gemm,fa,ratios", help=f"which parts: {', '.join(PARTS)}, or gemm, fa")
    ap.add_argument("--out", default="out/tuning",
                    help="folder of the parts' JSON results, kept between runs (default out/tuning)")
    ap.add_argument("--report", action="store_true", help="only print the tables of the parts saved in --out")
    ap.add_argument("--timeout", type=float, default=555.0,
                    help="seconds per part (default 555: a part fits a command of 9.5 minutes)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--json-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        result = _child(args.child, args.quick, save_partial(args.json_out))
        save_partial(args.json_out)(result)
        return
    folder = Path(args.out)
    if not args.report:
        import signal

        def stop(signum: int, frame: Any) -> None:  # a command's time limit: end the running child too
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            for part in parts_of(args.only):
                t0 = time.perf_counter()
                result = run_part(part, folder, args.quick, args.timeout)
                state = "failed: " + _first_line(result["error"]) if result.get("error") else "done"
                print(f"{part}: {state} ({time.perf_counter() - t0:.0f} s; saved in {folder / (part + '.json')})",
                      flush=True)
        except KeyboardInterrupt:
            print("stopped: the parts saved so far are in " + str(folder), flush=True)
        finally:
            signal.signal(signal.SIGTERM, previous)
        print()
    print(report(folder), flush=True)


def _child(words: list[str], quick: bool, save: Any = None) -> dict[str, Any]:
    kind = words[0]
    quick = quick or "--quick" in words
    rest = [w for w in words[1:] if w != "--quick"]
    if kind == "autotuner":
        return child_autotuner(rest[0], quick)
    if kind == "tilelab":
        return child_tilelab(rest[0], quick)
    if kind == "retime":
        return child_retime(rest[0], quick, json.loads(rest[1]), json.loads(rest[2]))
    if kind == "ratios":
        return child_ratios(quick, save=save)
    if kind == "wait":  # a child that starts a grandchild and never answers: how a timeout is tested
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        if save is not None:
            save({"waited": True, "grandchild": grandchild.pid})
        time.sleep(600)
    raise SystemExit(f"unknown child {kind!r}")


if __name__ == "__main__":
    main()
