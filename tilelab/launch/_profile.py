"""``tilelab.profile(kernel, *args)``: one launch under Nsight Compute, read back as a Profile.

ncu runs in a subprocess on :mod:`tilelab.launch._profile_child`, which rebuilds the kernel from
its saved prim_func and launches it with the inputs saved here; ``--launch-skip`` passes the
warm-up launches, one launch is profiled with ncu's full section set plus the metrics of
:data:`tilelab.records.profile.EXTRA_METRICS`. The report is read back with ``ncu --import --csv``
(raw page for the metrics, source page for warp-stall samples per device line).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..records.profile import EXTRA_METRICS, Profile, parse_raw_csv, parse_source_csv, profile_from_metrics

WARMUP_LAUNCHES = 2
NCU_HELP = ("Nsight Compute's `ncu` was not found: install Nsight Compute (it ships with the CUDA toolkit) "
            "and put it on PATH, or pass ncu=/path/to/ncu")


class ProfileError(RuntimeError):
    """ncu could not profile the kernel; the message carries ncu's own words."""


def find_ncu(explicit: str | None = None) -> str | None:
    """``explicit`` if it runs, else ncu looked for as every CUDA tool is
    (:func:`tilelab.engine.toolchain.find_cuda_tool`), then in Nsight Compute's own install folders."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    from ..engine.toolchain import find_cuda_tool

    return find_cuda_tool("ncu", extra_globs=("/opt/nvidia/nsight-compute/*/ncu",
                                              "/usr/local/cuda/nsight-compute*/ncu"))


def ncu_command(ncu: str, kernel_regex: str, report: Path, argv: Sequence[str], *, skip: int = WARMUP_LAUNCHES,
                section_set: str = "full", metrics: Sequence[str] = EXTRA_METRICS) -> list[str]:
    return [ncu, "--target-processes", "all", "--kernel-name", f"regex:{kernel_regex}", "--launch-skip", str(skip),
            "--launch-count", "1", "--set", section_set, "--import-source", "yes",
            "--metrics", ",".join(metrics), "--export", str(report), "--force-overwrite", *argv]


def read_report(ncu: str, report: Path, *, kernel: str | None = None) -> tuple[Profile, str]:
    """(Profile of the report's first launch, the raw CSV text)."""
    raw = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw"], capture_output=True, text=True,
                         timeout=300, check=False)
    rows = parse_raw_csv(raw.stdout)
    if not rows:
        raise ProfileError(f"ncu's report {report} has no profiled launch: {raw.stderr.strip()[-2000:]}")
    source = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "source", "--print-source", "cuda,sass"],
                            capture_output=True, text=True, timeout=300, check=False)
    hot = tuple(sorted(parse_source_csv(source.stdout), key=lambda x: -x[1]))
    notes = () if hot else ("no per-line warp-stall samples in the report (ncu's source page gave none)",)
    return profile_from_metrics(rows[0], kernel=kernel, hot_device_lines=hot, notes=notes), raw.stdout


def profile_command(argv: Sequence[str], kernel_regex: str, *, ncu: str | None = None, skip: int = 0,
                    kernel: str | None = None, keep: str | os.PathLike | None = None,
                    timeout_s: float = 600) -> Profile:
    """Profile the first launch (after ``skip``) of a kernel matching ``kernel_regex`` in ``argv``."""
    tool = find_ncu(ncu)
    if tool is None:
        raise ProfileError(NCU_HELP)
    with tempfile.TemporaryDirectory(prefix="tilelab-ncu-") as tmp:
        report = Path(keep) if keep else Path(tmp) / "profile"
        start = time.perf_counter()
        run = subprocess.run(ncu_command(tool, kernel_regex, report, argv, skip=skip), capture_output=True, text=True,
                             timeout=timeout_s, check=False)
        elapsed = time.perf_counter() - start
        path = report.with_suffix(".ncu-rep") if report.suffix != ".ncu-rep" else report
        if run.returncode != 0 or not path.exists():
            raise ProfileError(f"ncu failed (exit {run.returncode}) profiling {kernel or kernel_regex}:\n"
                               + (run.stdout + run.stderr).strip()[-3000:])
        profile, _ = read_report(tool, path, kernel=kernel)
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    import dataclasses

    return dataclasses.replace(profile, ncu=f"{tool} ({version.splitlines()[-1] if version else '?'})",
                               overhead_s=elapsed)


def profile(kernel: Any, *args: Any, backend: str | None = None, out_idx: int | list[int] | None = None,
            outputs: Sequence[str] | None = None, pass_configs: dict[str, Any] | None = None,
            ncu: str | None = None, seed: int | None = None, keep: str | os.PathLike | None = None,
            **sizes: int) -> Profile:
    """Run ``kernel`` once under Nsight Compute and return what its counters measured.

    Inputs are built as for :func:`tilelab.run`. The kernel is compiled again in ncu's child
    process (TileLang's disk cache makes that quick). ``keep`` saves the ``.ncu-rep`` report there.
    """
    import torch

    from .. import _tilelang
    from . import _inputs
    from ._run import prepare_kernel, require_gpu

    require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs, pass_configs=pass_configs)
    launch_args, _ = _inputs.build_inputs(prepared.params, args, sizes, device="cuda", seed=seed)
    source = _tilelang.resolve_kernel(prepared.compiled)
    with tempfile.TemporaryDirectory(prefix="tilelab-profile-") as tmp:
        folder = Path(tmp)
        (folder / "prim_func.json").write_text(_tilelang.kernel_ir_to_text(source.prim_func))
        out = list(source.out_idx) if source.out_idx else None
        (folder / "spec.json").write_text(json.dumps({
            "backend": prepared.backend, "out_idx": out, "launches": WARMUP_LAUNCHES + 1,
            "pass_configs": {k: v for k, v in (pass_configs or {}).items()},
        }))
        torch.save([a.detach().cpu() if hasattr(a, "detach") else a for a in launch_args], folder / "args.pt")
        argv = [sys.executable, "-m", "tilelab.launch._profile_child", str(folder)]
        regex = f"^{re.escape(prepared.name)}"
        return profile_command(argv, regex, ncu=ncu, skip=WARMUP_LAUNCHES, kernel=prepared.name, keep=keep)


__all__ = ["ProfileError", "find_ncu", "ncu_command", "profile", "profile_command", "read_report"]
