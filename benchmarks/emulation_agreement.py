"""Does a kernel run on the CPU (``device="cpu"``) compute what the GPU computes? Needs a CUDA GPU.

    .venv/bin/python benchmarks/emulation_coverage.py EXAMPLES --save-ir /tmp/emulation-ir
    .venv/bin/python benchmarks/emulation_agreement.py /tmp/emulation-ir [--jobs 8] [--budget-s 300]

Takes the kernels ``emulation_coverage.py`` saved (TileLang's IR as text, ``NAME.tir.json``, and
what their CPU run used, ``NAME.json``: sizes, outputs, the two blocks) whose CPU run finished, and
runs each both ways on the same inputs (random, seeded, built on the CPU and copied to the GPU):

- on the CPU: ``tilelab.run(kernel, *tensors, device="cpu", blocks=...)``, the outputs poisoned,
  so the elements those blocks wrote are known;
- on the GPU: TileLang's own compile of the same IR for the local GPU (``tilelang.compile``),
  every block.

The GPU's outputs are compared with the CPU's at the elements the CPU's blocks wrote: ``exact``
(bit for bit), ``agrees`` (relative error norm within the output dtype's tolerance, the GPU
reordering float sums; ``tilelab.launch.tolerance_for`` with the kernel's reduction length
unknown, so K=4096 assumed; with float8 inputs, sqrt(K) * 2^-14: Hopper's fp8 tensor cores
accumulate in about 14 bits of mantissa), ``differs`` (with the error, the worst element and its two
values), or a failure of one side. Kernels run in worker processes, a few kernels each; a kernel
that loses a process's CUDA context (an illegal address on random inputs: index tensors) is
retried alone in a fresh one and reported.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXACT, AGREES, DIFFERS, CPU_FAILS, GPU_FAILS, NOTHING = (
    "exact", "agrees", "differs", "CPU run fails", "GPU run fails", "nothing to compare")
SEED = 1234
ASSUMED_K = 4096


def _inputs_for(func: Any, out_names: list[str], sizes: dict[str, int]) -> tuple[list[Any], list[str]]:
    """Every tensor parameter (inputs random, outputs zero) and the scalars, on the CPU."""
    import torch

    from tilelab import _tilelang
    from tilelab.launch import _inputs

    source = _tilelang.resolve_kernel(func)
    args, names = [], []
    gen = torch.Generator().manual_seed(SEED)
    for a in _tilelang.arguments(source, None):
        if not a.passed_at_launch:  # a dynamic size bound from a tensor's shape, a factory's constant
            continue
        if a.kind == "scalar":
            args.append(int(sizes.get(a.name, 1)))
            names.append(a.name)
            continue
        shape = tuple(int(_inputs.eval_dim(d, sizes)) for d in a.shape)
        dtype = _inputs.torch_dtype(a.dtype)
        if a.name in out_names:
            t = torch.zeros(shape, dtype=dtype)
        elif dtype.is_floating_point:
            t = torch.randn(shape, generator=gen).to(dtype)
        elif dtype == torch.bool:
            t = torch.rand(shape, generator=gen) > 0.5
        else:
            t = torch.randint(0, 4, shape, generator=gen).to(dtype)
        args.append(t)
        names.append(a.name)
    return args, names


def _written(t: Any, twice: bool) -> Any:
    """The elements the CPU's blocks wrote: neither poison. A run with an output whose dtype has 0xFF
    bytes as a value launches twice, the second time with SECOND_POISON in every output passed at
    launch, so then every output's unwritten elements hold that pattern (a float32 output's are
    1.5e16, not NaN)."""
    from tilelab.launch import _inputs

    mask = ~_inputs.unwritten_mask(t, _inputs.POISON)
    if twice:
        mask &= ~_inputs.unwritten_mask(t, _inputs.SECOND_POISON)
    return mask


def compare_one(ir: Path) -> dict[str, Any]:
    import torch

    import tilelab
    from tilelab import _tilelang
    from tilelab.launch import _inputs, tolerance_for

    meta = json.loads(ir.with_name(ir.name[:-len(".tir.json")] + ".json").read_text())
    row: dict[str, Any] = {"kernel": meta["kernel"], "script": meta["script"], "file": ir.name}
    func = _tilelang.kernel_ir_from_text(ir.read_text())
    source = _tilelang.resolve_kernel(func)
    params = _tilelang.arguments(source, None)
    tensors = [a.name for a in params if a.kind in ("tensor", "strided_tensor")]
    out_idx = meta.get("out_idx")
    if out_idx:
        outputs = [tensors[i] if i >= 0 else tensors[len(tensors) + i] for i in out_idx]
    else:
        outputs = meta.get("outputs") or tensors[-1:]
    sizes = {k: int(v) for k, v in (meta.get("sizes") or {}).items()}
    args, names = _inputs_for(func, outputs, sizes)
    originals = [a.clone() if hasattr(a, "clone") else a for a in args]  # what the GPU gets: the same inputs
    try:
        tilelab.run(func, *args, device="cpu", blocks=meta["blocks"], out_idx=[], outputs=outputs, seed=SEED,
                    **sizes)
    except Exception as err:
        row.update(verdict=CPU_FAILS, reason=f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
        return row
    try:
        inputs_gpu = [a.cuda() if hasattr(a, "cuda") else a for a in originals]
        gpu_func = func
        if func.attrs is not None and "tilelang_out_idx" in func.attrs:  # the GPU kernel takes every tensor too
            gpu_func = func.without_attr("tilelang_out_idx")
        kernel = _tilelang.compile_kernel(gpu_func, target=_tilelang.local_gpu_arch(), out_idx=None)
        kernel(*inputs_gpu)
        torch.cuda.synchronize()
    except Exception as err:
        row.update(verdict=GPU_FAILS, reason=f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
        if "CUDA" in str(err) and ("illegal" in str(err) or "launch failure" in str(err)):
            row["context_lost"] = True
        return row
    worst: dict[str, Any] = {}
    verdicts = []
    compared = 0
    twice = any(_inputs.poison_is_value(str(args[names.index(n)].dtype).replace("torch.", "")) for n in outputs)
    for name in outputs:
        cpu = args[names.index(name)]
        gpu = inputs_gpu[names.index(name)].cpu()
        mask = _written(cpu, twice)
        n = int(mask.sum())
        if not n:
            continue
        compared += n
        a, b = cpu[mask].double(), gpu[mask].double()
        if torch.equal(cpu.view(torch.uint8).reshape(*cpu.shape, -1)[mask],
                       gpu.view(torch.uint8).reshape(*gpu.shape, -1)[mask]) if cpu.element_size() else False:
            verdicts.append(EXACT)
            continue
        finite = torch.isfinite(a) & torch.isfinite(b)
        same_nonfinite = bool(((~torch.isfinite(a)) == (~torch.isfinite(b))).all()) and bool(
            (a[~finite].nan_to_num(0) == b[~finite].nan_to_num(0)).all())
        diff = (a[finite] - b[finite]).abs()
        norm = float(b[finite].norm())
        rel = float(diff.norm()) / norm if norm else float(diff.norm())
        dtype = str(cpu.dtype).replace("torch.", "")
        ins = [str(t.dtype).replace("torch.", "") for t, nm in zip(args, names) if hasattr(t, "dtype")
               and nm not in outputs]
        tol = tolerance_for(dtype, ins, reduction=ASSUMED_K)
        if any(d.startswith("float8") for d in ins):  # Hopper's fp8 MMAs accumulate in ~14 mantissa bits
            tol = max(tol, 2.0 * ASSUMED_K ** 0.5 * 2.0 ** -14)
        i = int(diff.argmax()) if diff.numel() else 0
        worst[name] = {"rel_error": rel, "tolerance": tol,
                       "worst": [float(a[finite][i]), float(b[finite][i])] if diff.numel() else None}
        verdicts.append(AGREES if same_nonfinite and rel <= tol else DIFFERS)
    if not compared:
        row.update(verdict=NOTHING, reason="the CPU's blocks wrote no element")
    else:
        verdict = DIFFERS if DIFFERS in verdicts else AGREES if AGREES in verdicts else EXACT
        row.update(verdict=verdict, compared=compared, errors=worst,
                   reason="; ".join(f"{k}: rel {v['rel_error']:.2e} (tol {v['tolerance']:.1e}), worst cpu/gpu "
                                    f"{v['worst']}" for k, v in worst.items()))
    return row


def worker_main(out: Path, irs: list[str]) -> int:
    for ir in irs:
        with out.open("a") as f:
            f.write(json.dumps({"start": ir}) + "\n")
        try:
            row = compare_one(Path(ir))
        except Exception as err:
            row = {"kernel": Path(ir).name, "verdict": CPU_FAILS, "reason": f"{type(err).__name__}: {err}"[:300]}
        row["file"] = Path(ir).name
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if row.get("context_lost"):
            return 3  # this process's CUDA context is gone: the driver goes on in a fresh one
    return 0


def run_chunk(irs: list[Path], timeout_s: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    left = list(irs)
    while left:
        with tempfile.TemporaryDirectory(prefix="tilelab-agree-") as tmp:
            out = Path(tmp) / "rows.jsonl"
            out.touch()
            env = dict(os.environ)
            env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            env["TILELANG_PRINT_ON_COMPILATION"] = "0"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out), *map(str, left)]
            rc = None
            try:
                rc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            started = None
            done = set()
            for line in out.read_text().splitlines():
                d = json.loads(line)
                if "start" in d:
                    started = Path(d["start"]).name
                else:
                    rows.append(d)
                    done.add(d["file"])
            if started is not None and started not in done:  # the kernel that took the process down
                rows.append({"kernel": started, "file": started, "verdict": GPU_FAILS,
                             "reason": f"its process ended ({rc}) during the run"})
                done.add(started)
            if not done and rc not in (0, None):
                rows += [{"kernel": p.name, "file": p.name, "verdict": GPU_FAILS, "reason": f"worker ended ({rc})"}
                         for p in left]
                break
            left = [p for p in left if p.name not in done]
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main(Path(sys.argv[2]), sys.argv[3:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="the folder emulation_coverage.py --save-ir wrote")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=6, help="kernels per worker process")
    parser.add_argument("--budget-s", type=float, default=300.0, help="start no new chunk after this many seconds")
    parser.add_argument("--json")
    args = parser.parse_args()
    start = time.perf_counter()
    irs = []
    for ir in sorted(Path(args.directory).glob("*.tir.json")):
        meta = json.loads(ir.with_name(ir.name[:-len(".tir.json")] + ".json").read_text())
        if meta.get("verdict") == "runs":
            irs.append(ir)
    chunks = [irs[i:i + args.chunk] for i in range(0, len(irs), args.chunk)]
    rows: list[dict[str, Any]] = []
    skipped = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        pending = set()
        queue = list(chunks)
        while queue or pending:
            while queue and len(pending) < args.jobs:
                if time.perf_counter() - start > args.budget_s:
                    skipped += sum(len(c) for c in queue)
                    queue = []
                    break
                pending.add(pool.submit(run_chunk, queue.pop(0), 240.0))
            if not pending:
                break
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in done:
                for r in f.result():
                    rows.append(r)
                    print(f"{r['verdict']:>18}  {r['file']}  {r.get('reason', '')[:150]}", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: r["file"])
    print(f"{'verdict':18}  {'kernel file':70}  reason")
    for r in rows:
        print(f"{r['verdict']:18}  {r['file'][:70]:70}  {r.get('reason', '')[:200]}")
    counts = collections.Counter(r["verdict"] for r in rows)
    ran = sum(counts[v] for v in (EXACT, AGREES, DIFFERS))
    print()
    print(f"{len(irs)} kernels that run on the CPU; compared {ran}: {counts[EXACT]} exact, {counts[AGREES]} agree "
          f"within tolerance, {counts[DIFFERS]} differ; {counts[CPU_FAILS]} CPU failures, {counts[GPU_FAILS]} GPU "
          f"failures, {counts[NOTHING]} with nothing to compare; {skipped} not run (time budget)")
    print(f"{time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
