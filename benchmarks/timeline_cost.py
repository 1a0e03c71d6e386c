"""Where the timeline's cost comes from, without a GPU: for the 8192^3 GEMM and flash attention
(b8 h16 s4096 d128), the registers, spills and stack ptxas reports for the plain and the
instrumented kernel, the marks each recording warp writes per loop iteration (by role), and the
PTX branches and clock reads the marks add (marks in the loop body: the conditional ones, as the
first iteration's wait for Q, counted too).

    python benchmarks/timeline_cost.py [--before DIR] [--arch sm_90a]

``--before DIR``: also the instrumented kernel of another checkout's tilelab (its own marks).
Each kernel is lowered by TileLang and compiled by this machine's nvcc/ptxas (no launch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {
    "gemm": ("from tilelab.kernels.gemm import BEST_8192, matmul; func = matmul(8192, 8192, 8192, **BEST_8192); "
             "blocks = 2048", "GEMM 8192^3 fp16"),
    "fa": ("from tilelab.kernels.flash_attention import flash_attention; "
           "func = flash_attention(8, 16, 4096, 128, block_M=128, block_N=128, num_stages=2, threads=256); "
           "blocks = 4096", "flash attention b8 h16 s4096 d128"),
}


def job(spec: dict) -> dict:
    sys.path.insert(0, spec["tree"])
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    from tilelab import _tilelang
    try:  # this checkout's layout, or an older one's (--before)
        from tilelab.engine.toolchain import find_toolchain
        from tilelab.instrument.rewrite.timeline import instrument
    except ImportError:
        from tilelab._timeline_rewrite import instrument  # type: ignore[no-redef]
        from tilelab._toolchain import find_toolchain  # type: ignore[no-redef]

    ns: dict = {}
    exec(KERNELS[spec["kernel"]][0], ns)
    func = ns["func"]
    source = _tilelang.timeline_device_source(func, spec["arch"])
    ins = instrument(source, ops=_tilelang.timeline_ops(func), cell_file=_tilelang.kernel_file(func),
                     blocks=ns["blocks"], traced_blocks=(0,), **spec.get("kwargs", {}))
    texts = {"instrumented": ins.source}
    if spec.get("plain"):
        texts["plain"] = "\n".join(t for t in source.split("\n") if "TLT_BIND" not in t)
    tools = find_toolchain(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")))
    incs = [f"-I{d}" for d in _tilelang.device_include_dirs()]
    out: dict = {"marks_per_iteration": marks_per_iteration(ins)}
    with tempfile.TemporaryDirectory() as tmp:
        for which, text in texts.items():
            cu = Path(tmp) / f"{which}.cu"
            cu.write_text(text)
            done = subprocess.run([str(tools.nvcc), "-cubin", "-std=c++17", f"-arch={spec['arch']}", "-Xptxas", "-v",
                                   "-diag-suppress=1444,20012", *incs, "-o", f"{which}.cubin", cu.name],
                                  cwd=tmp, capture_output=True, text=True)
            log = done.stderr + done.stdout
            ptx = subprocess.run([str(tools.nvcc), "-ptx", "-std=c++17", f"-arch={spec['arch']}",
                                  "-diag-suppress=1444,20012", *incs, "-o", f"{which}.ptx", cu.name],
                                 cwd=tmp, capture_output=True, text=True)
            ptx_text = (Path(tmp) / f"{which}.ptx").read_text() if ptx.returncode == 0 else ""
            out[which] = {
                "registers": _int(r"Used (\d+) registers", log),
                "spill_stores": _int(r"(\d+) bytes spill stores", log),
                "stack": _int(r"(\d+) bytes stack frame", log),
                "ptx_branches": len(re.findall(r"^\s*(?:@%p\d+ )?bra(?:\.uni)? ", ptx_text, re.M)),
                "ptx_clock_reads": ptx_text.count("%clock64"),
                "ptx_global_stores": len(re.findall(r"\bst\.global", ptx_text)),
            }
    return out


def _int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None


def marks_per_iteration(ins) -> dict[str, int]:
    """Per role, the marks one recording warp writes per iteration of its pipelined loop: the
    in-loop sites, and each END placed after one of them (read from the instrumented source)."""
    by_id = {s.id: s for s in ins.sites}
    out: dict[str, int] = {}
    last = None
    for line in ins.source.split("\n"):
        m = re.search(r"TLT_MARK\((\d+)\);", line)
        if not m:
            continue
        sid = int(m.group(1))
        if sid in by_id:
            last = by_id[sid]
            if last.in_loop:
                out[last.role] = out.get(last.role, 0) + 1
        elif sid == 0 and last is not None and last.in_loop:
            out[last.role] = out.get(last.role, 0) + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default=None, help="another checkout's root: its instrumented kernels too")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.job:
        print(json.dumps(job(json.loads(args.job))))
        return
    rows = []
    for kernel in KERNELS:
        variants = [("after", str(ROOT), {}, True)]
        if kernel == "fa":
            variants.append(("after, marks=compact", str(ROOT), {"marks": "compact"}, False))
            variants.append(("after, blocks=all", str(ROOT), {"mode": "grid"}, False))
        else:
            variants.append(("after, blocks=all", str(ROOT), {"mode": "grid"}, False))
        if args.before:
            variants.insert(0, ("before", str(Path(args.before).resolve()), {}, False))
        for name, tree, kwargs, plain in variants:
            spec = {"kernel": kernel, "tree": tree, "kwargs": kwargs, "plain": plain, "arch": args.arch}
            done = subprocess.run([sys.executable, __file__, "--job", json.dumps(spec)], capture_output=True, text=True)
            try:
                result = json.loads(done.stdout.strip().split("\n")[-1])
            except (ValueError, IndexError):
                print(f"{kernel} {name}: failed\n{done.stderr[-2000:]}")
                continue
            if plain:
                rows.append((KERNELS[kernel][1], "plain", result["plain"], {}))
            rows.append((KERNELS[kernel][1], name, result["instrumented"], result["marks_per_iteration"]))
    print(f"{'kernel':36} {'build':22} {'regs':>5} {'spill B':>7} {'stack B':>7} {'PTX bra':>7} {'clock':>6} "
          f"{'st.global':>9}  marks in the pipelined loop body (conditional ones included)")
    for kernel, name, r, marks in rows:
        print(f"{kernel:36} {name:22} {r['registers']!s:>5} {r['spill_stores']!s:>7} {r['stack']!s:>7} "
              f"{r['ptx_branches']:>7} {r['ptx_clock_reads']:>6} {r['ptx_global_stores']:>9}  "
              + ", ".join(f"{role} {n}" for role, n in sorted(marks.items())))


if __name__ == "__main__":
    main()
