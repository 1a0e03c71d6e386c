"""``tilelab.sanitize``: run a kernel once under NVIDIA compute-sanitizer and say what it found.

The kernel runs in a child process started by ``compute-sanitizer --tool TOOL`` (memcheck,
racecheck, synccheck, initcheck). The child rebuilds the kernel from its ``T.prim_func``
(TileLang's disk cache answers; TileLang compiles every kernel with ``-lineinfo``, so findings
carry the line of the device CUDA source), makes the inputs from copies of the tensors given (or
from the signature), records where each tensor lives, launches once and synchronises.
:func:`parse` turns the sanitizer's text into :class:`Finding` rows; addresses are mapped back to
the tensor and element they hit (or the one they missed: "3 elements past the end of B").
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..records.errors import TilelabError
from ..records.launch import Finding, SanitizerReport

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DEFAULT_TIMEOUT_S = 600.0


class SanitizerMissing(TilelabError, FileNotFoundError):
    """compute-sanitizer is not installed where tilelab looks."""


def find_sanitizer() -> str | None:
    """compute-sanitizer, looked for as every CUDA tool is (:func:`tilelab.engine.toolchain.find_cuda_tool`)."""
    from ..engine.toolchain import find_cuda_tool

    return find_cuda_tool("compute-sanitizer")


# ------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------


# Finding and SanitizerReport live with the other launch records (tilelab.records.launch).


# ------------------------------------------------------------------------------------------
# Parsing compute-sanitizer's text
# ------------------------------------------------------------------------------------------

_PREFIX = re.compile(r"^=+ ?(.*)$")
_AT = re.compile(r"\bat (?:0x[0-9a-fA-F]+ in )?(?P<func>[\w:~<>]+?)(?:\(.*?\))?(?:\+0x[0-9a-fA-F]+)?"
                 r"(?: in (?P<file>[^\s:]+(?:[^\s:]*)):(?P<line>\d+))?\s*$")
_IN_FILE = re.compile(r"in (?P<file>\S+?):(?P<line>\d+)")
_THREAD = re.compile(r"by thread \((\d+),\s*(\d+),\s*(\d+)\) in block \((\d+),\s*(\d+),\s*(\d+)\)")
_ADDRESS = re.compile(r"\b(?:Address|Access to) (0x[0-9a-fA-F]+)")
_SIZE = re.compile(r"of size (\d+) bytes?")
_HAZARDS = re.compile(r"\[(\d[\d,]*) hazards?\]")
_RACE = re.compile(r"Race reported between (\w+) access at .*? in (?P<file>\S+?):(?P<line>\d+)")
_RACE_OTHER = re.compile(r"and (\w+) access at .*? in (?P<file>\S+?):(?P<line>\d+)")
_SKIP = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|Target application)")


def _kind(headline: str) -> str:
    h = headline.lower()
    if "race reported" in h or "hazard" in h:
        return "shared-memory race"
    if "barrier" in h or "divergent thread" in h:
        return "barrier misuse"
    if "uninitialized" in h or "uninitialised" in h:
        return "uninitialised read"
    if "misaligned" in h:
        return "misaligned address"
    if "invalid" in h or "out-of-range" in h or "out of range" in h:
        access = "write" if "write" in h else "read" if "read" in h else "access"
        return f"out-of-bounds {access}"
    if "program hit" in h or "cuda error" in h:
        return "CUDA error"
    if "malloc" in h or "free" in h:
        return "allocation misuse"
    return "other"


def _records(text: str) -> list[list[str]]:
    records: list[list[str]] = []
    for raw in text.splitlines():
        m = _PREFIX.match(raw)
        if not m:
            continue
        body = m.group(1)
        if not body.strip():
            continue
        if body[:1] != " ":
            if _SKIP.match(body):
                continue
            records.append([body.strip()])
        elif records:
            records[-1].append(body.strip())
    return records


def parse(text: str) -> tuple[list[Finding], str]:
    """(findings, summary line) from compute-sanitizer's output (any tool). Host backtraces and
    the "Program hit cudaError..." echoes of the same fault are dropped."""
    summary = ""
    for raw in text.splitlines():
        m = _PREFIX.match(raw)
        if m and not summary and re.match(r"(ERROR|RACECHECK) SUMMARY", m.group(1).strip()):
            summary = m.group(1).strip()  # the first: later ones say how many were not printed
    findings: list[Finding] = []
    for rec in _records(text):
        headline = rec[0]
        kind = _kind(headline)
        if kind == "CUDA error":
            continue  # the API call that saw the fault: the fault itself is its own record
        func = file = None
        line = other_line = hazards = None
        block = thread = None
        address = size = None
        race = _RACE.search(headline)
        if race:
            file, line = race.group("file"), int(race.group("line"))
        m = _SIZE.search(headline)
        if m:
            size = int(m.group(1))
        for body in rec[1:]:
            if body.startswith(("Saved host backtrace", "Host Frame", "Device Frame")):
                break
            if body.startswith("at ") and line is None:
                at = _AT.match(body)
                if at:
                    func = at.group("func")
                m = _IN_FILE.search(body)
                if m:
                    file, line = m.group("file"), int(m.group("line"))
            m = _THREAD.search(body)
            if m:
                v = [int(x) for x in m.groups()]
                thread, block = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            m = _ADDRESS.search(body)
            if m and address is None:
                address = int(m.group(1), 16)
            m = _RACE_OTHER.search(body)
            if m:
                other_line = int(m.group("line"))
            m = _HAZARDS.search(body) or _HAZARDS.search(headline)
            if m:
                hazards = int(m.group(1).replace(",", ""))
        where = "shared memory" if ("__shared__" in headline or kind == "shared-memory race") else None
        findings.append(Finding(kind=kind, message=headline, function=func, file=file, line=line, block=block,
                                thread=thread, address=address, size=size, where=where, other_line=other_line,
                                hazards=hazards))
    return findings, summary


def locate(findings: Sequence[Finding], tensors: Sequence[dict[str, Any]]) -> list[Finding]:
    """Name the tensor each global address hit: inside it (with the element index), or the
    nearest one it overran ("3 elements past the end of B"). ``tensors``: dicts with name,
    ptr, nbytes, element_size, shape."""
    out = []
    for f in findings:
        if f.address is None or f.where == "shared memory" or not tensors:
            out.append(f)
            continue
        inside = [t for t in tensors if t["ptr"] <= f.address < t["ptr"] + t["nbytes"]]
        if inside:
            t = inside[0]
            flat = (f.address - t["ptr"]) // t["element_size"]
            out.append(replace(f, buffer=t["name"], element=_unravel(flat, t["shape"]), where=f"inside {t['name']}"))
            continue
        after = [t for t in tensors if f.address >= t["ptr"] + t["nbytes"]]
        before = [t for t in tensors if f.address < t["ptr"]]
        best, text = None, None
        if after:
            t = max(after, key=lambda t: t["ptr"] + t["nbytes"])
            past = (f.address - (t["ptr"] + t["nbytes"])) // t["element_size"]
            best, text = t, f"{past} elements past the end of {t['name']} (its last element is {t['numel'] - 1})"
        if before:
            t = min(before, key=lambda t: t["ptr"])
            gap = t["ptr"] - f.address
            if best is None or gap < f.address - (best["ptr"] + best["nbytes"]):
                best, text = t, f"{gap // t['element_size']} elements before the start of {t['name']}"
        out.append(replace(f, buffer=best["name"] if best else None, where=text))
    return out


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for extent in reversed(list(shape)):
        index.append(flat % extent if extent else 0)
        flat //= extent if extent else 1
    return tuple(reversed(index))


# ------------------------------------------------------------------------------------------
# Running it
# ------------------------------------------------------------------------------------------


def sanitize(kernel: Any, *args: Any, tool: str = "memcheck", timeout: float = DEFAULT_TIMEOUT_S,
             backend: str | None = None, out_idx: int | list[int] | None = None, outputs: Sequence[str] | None = None,
             seed: int | None = None, extra: Sequence[str] = (), **sizes: int) -> SanitizerReport:
    """Run ``kernel`` once under ``compute-sanitizer --tool TOOL`` and report each finding.

    Arguments are as for :func:`tilelab.run` (tensors given are copied to the child; the others are
    built from the signature and ``sizes``). The kernel runs in a separate process, so a fault
    it makes never reaches this one. ``extra``: more compute-sanitizer options."""
    from ._run import prepare_kernel, require_gpu

    if tool not in TOOLS:
        raise ValueError(f"tool must be one of {', '.join(TOOLS)}; got {tool!r}")
    exe = find_sanitizer()
    if exe is None:
        raise SanitizerMissing(
            "compute-sanitizer was not found (looked in $CUDA_HOME/bin, on PATH, in /usr/local/cuda/bin, in NVIDIA's "
            "wheels and next to nvcc). It ships with the CUDA toolkit; install the toolkit or put its bin/ folder on "
            "PATH.")
    require_gpu()
    prepared = prepare_kernel(kernel, backend=backend, out_idx=out_idx, outputs=outputs)
    from ._isolated import _payload

    shipped = [a.detach().cpu() if hasattr(a, "detach") else a for a in args]
    with tempfile.TemporaryDirectory(prefix="tilelab-sanitize-") as tmp:
        request, result, log = Path(tmp, "request.pkl"), Path(tmp, "result.json"), Path(tmp, "sanitizer.log")
        with open(request, "wb") as fh:
            pickle.dump({"payload": _payload(prepared), "args": shipped, "sizes": sizes, "seed": seed}, fh)
        cmd = [exe, "--tool", tool, "--log-file", str(log), "--print-limit", "100", *extra,
               sys.executable, "-m", "tilelab.launch._sanitize", str(request), str(result)]
        if tool == "racecheck":
            cmd[3:3] = ["--racecheck-report", "analysis"]
        env = dict(os.environ)
        # One cudaMalloc per tensor, so that an overrun past a tensor is past an allocation the
        # sanitizer knows (torch's caching allocator would hide it inside a larger segment).
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as err:
            raise TilelabError(f"{prepared.name}: compute-sanitizer --tool {tool} did not finish within {timeout:g} s "
                               "(the kernel may hang; tilelab.run(kernel, timeout=...) tells a hang apart)") from err
        raw = log.read_text(errors="replace") if log.exists() else ""
        child = json.loads(result.read_text()) if result.exists() else {}
    findings, summary = parse(raw)
    findings = locate(findings, child.get("tensors", []))
    notes = []
    if not child:
        notes.append(f"the child process ended before reporting (exit code {proc.returncode}): "
                      + (proc.stderr.strip().splitlines() or [""])[-1][:300])
    return SanitizerReport(kernel=prepared.name, tool=tool, findings=tuple(findings), raw=raw, summary=summary,
                           launch_error=child.get("error"), source=prepared.kernel_source(), notes=tuple(notes))


def _child(request_path: str, result_path: str) -> None:
    """Inside compute-sanitizer: rebuild, launch once, write where each tensor lives."""
    import tilelang  # noqa: F401  (registers the operators the pickled prim_func refers to)
    import torch

    from . import _inputs
    from ._isolated import prepare_payload
    from ._run import call_kernel

    with open(request_path, "rb") as fh:
        req = pickle.load(fh)
    prepared = prepare_payload(req["payload"])
    args = [a.cuda() if hasattr(a, "cuda") else a for a in req["args"]]
    launch_args, _ = _inputs.build_inputs(prepared.params, args, req["sizes"], device="cuda", seed=req["seed"])
    launch = [p for p in prepared.params if p.passed_at_launch]
    tensors = [{"name": p.name, "ptr": a.data_ptr(), "nbytes": a.numel() * a.element_size(),
                "element_size": a.element_size(), "shape": list(a.shape), "numel": a.numel()}
               for p, a in zip(launch, launch_args) if hasattr(a, "data_ptr")]
    error = None
    try:
        call_kernel(prepared, launch_args)
        torch.cuda.synchronize()
    except Exception as err:
        error = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300] if str(err).strip() else ''}"
    Path(result_path).write_text(json.dumps({"tensors": tensors, "error": error}))
    sys.stdout.flush()
    os._exit(0)  # a lost context must not make interpreter shutdown hang or add noise


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
