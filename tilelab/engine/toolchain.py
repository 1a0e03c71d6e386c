"""The CUDA toolchain tier: PTX, SASS and resources for a report's device source.

Tools are looked for, each on its own, in: the ``cuda_home`` given, ``$TILELAB_CUDA_HOME``,
``$CUDA_HOME``/``$CUDA_PATH``, ``PATH``, ``/usr/local/cuda``, and NVIDIA's pip wheels
(``pip install "tilelab[toolchain]"`` installs ``nvidia-cuda-nvcc``, the CCCL headers that nvcc's
wheel lacks, ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm``). nvcc makes the PTX
(``-lineinfo``), ptxas the cubin and the resource counts (``-v``), nvdisasm the SASS with line info
(``-gi``: inlined template code is charged to the device-CUDA line that called it); cuobjdump is the
fallback disassembler, without lines.

Nothing here runs unless a caller asks for it (``tilelab.inspect(..., toolchain=True)``,
``--sass``): plain inspection never needs nvcc.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._tilelang.source import strip_line_directives
from ..records.machine import KernelResources, MachineCode, SourceOrigin
from .occupancy import theoretical_occupancy

TOOLS = ("nvcc", "ptxas", "nvdisasm", "cuobjdump")
INSTALL_ADVICE = (
    'install the CUDA toolkit (nvcc, ptxas) or NVIDIA\'s wheels with `pip install "tilelab[toolchain]"`, '
    "or pass cuda_home=... (a folder with bin/nvcc)"
)
DEVICE_FILE = "tilelang_device.cu"
_TIMEOUT_S = 300


@dataclass(frozen=True)
class Toolchain:
    """Where each CUDA tool is (None: not found)."""

    nvcc: str | None = None
    ptxas: str | None = None
    nvdisasm: str | None = None
    cuobjdump: str | None = None

    def missing(self) -> list[str]:
        return [t for t in TOOLS if getattr(self, t) is None]


def _wheel_bin_dirs() -> list[Path]:
    """The bin folders of NVIDIA's CUDA wheels in this Python's site-packages."""
    dirs: list[Path] = []
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if not root.is_dir():
            continue
        for pattern in ("cu*/bin", "cuda_nvcc/bin", "cuda_nvdisasm/bin", "cuda_cuobjdump/bin"):
            dirs += sorted(p for p in root.glob(pattern) if p.is_dir())
    return dirs


def _candidate_dirs(cuda_home: str | os.PathLike | None) -> list[Path]:
    dirs: list[Path] = []
    if cuda_home is not None:
        return [Path(cuda_home) / "bin", Path(cuda_home)]
    for var in ("TILELAB_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    dirs.append(Path("/usr/local/cuda/bin"))
    dirs += _wheel_bin_dirs()
    return dirs


def find_cuda_tool(name: str, *, extra_globs: tuple[str, ...] = ()) -> str | None:
    """One CUDA tool by name (``compute-sanitizer``, ``ncu``, ...), looked for as the toolchain's
    tools are (``$TILELAB_CUDA_HOME``, ``$CUDA_HOME``, ``$CUDA_PATH``, ``PATH``, ``/usr/local/cuda``,
    NVIDIA's wheels), then next to the ``nvcc`` on PATH, then in ``extra_globs`` (newest last wins)."""
    import glob
    import shutil

    dirs = _candidate_dirs(None)
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.append(Path(os.path.realpath(nvcc)).parent)
    for d in dirs:
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return str(d / name)
    for pattern in extra_globs:
        hits = [h for h in sorted(glob.glob(pattern)) if os.access(h, os.X_OK)]
        if hits:
            return hits[-1]
    return None


def find_toolchain(cuda_home: str | os.PathLike | None = None) -> Toolchain:
    """Find each tool; with ``cuda_home``, only there (and in NVIDIA's wheels for the disassemblers)."""
    dirs = _candidate_dirs(cuda_home)
    found: dict[str, str | None] = {}
    for tool in TOOLS:
        search = dirs + (_wheel_bin_dirs() if cuda_home is not None and tool in ("nvdisasm", "cuobjdump") else [])
        found[tool] = next((str(d / tool) for d in search if (d / tool).is_file() and os.access(d / tool, os.X_OK)),
                           None)
    return Toolchain(**found)


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)


def tool_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    match = re.search(r"release [\d.]+, V([\d.]+)", out) or re.search(r"V(\d+\.\d+\.\d+)", out)
    return match.group(1) if match else "version unknown"


# --------------------------------------------------------------------------------------------
# Parsers of the toolchain's own output
# --------------------------------------------------------------------------------------------

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas(log: str) -> list[KernelResources]:
    """``ptxas -v`` diagnostics -> one KernelResources per entry function, in order."""
    out: list[dict[str, Any]] = []
    for line in log.splitlines():
        if (m := _ENTRY.search(line)):
            out.append({"kernel": m.group(1), "registers": 0})
            continue
        if not out:
            continue
        cur = out[-1]
        if (m := _PROPS.search(line)):
            cur.update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)), spill_load_bytes=int(m.group(3)))
        if (m := _USED.search(line)):
            cur["registers"] = int(m.group(1))
            if (b := _BARRIERS.search(line)):
                cur["barriers"] = int(b.group(1))
            if (s := _SMEM.search(line)):
                cur["static_shared_bytes"] = int(s.group(1))
            if (c := _CMEM.search(line)):
                cur["constant_bytes"] = int(c.group(1))
    return [KernelResources(**d) for d in out]


_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:,.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')


def ptx_device_lines(ptx: str, device_file: str = DEVICE_FILE) -> tuple[int, ...]:
    """For each PTX line, the device-CUDA line its instructions come from (0: none).

    A ``.loc`` in the device file sets the line; a ``.loc`` in a header that is ``inlined_at`` the
    device file charges the header's code to the calling line; deeper inlining keeps the line.
    """
    files = {m.group(1) for line in ptx.splitlines() if (m := _FILE.match(line)) and m.group(2).endswith(device_file)}
    lines = ptx.split("\n")
    out = []
    current = 0
    for line in lines:
        m = _LOC.match(line)
        if m:
            if m.group(1) in files:
                current = int(m.group(2))
            elif m.group(3) in files:
                current = int(m.group(4))
            out.append(0)
            continue
        stripped = line.strip()
        is_code = bool(stripped) and not stripped.startswith(("//", ".", "$", "{", "}", "@@"))
        out.append(current if is_code else 0)
    return tuple(out)


_SASS_LINE_INFO = re.compile(r'^\s*//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
_SASS_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/")


def parse_sass(listing: str, device_file: str = DEVICE_FILE) -> tuple[str, tuple[int, ...]]:
    """nvdisasm ``-gi`` output -> (listing without the line-info comments, device line per line).

    The outermost location in the device file wins: with ``-gi`` nvdisasm prints the chain of
    inlined locations, ending with the device file's own line.
    """
    kept: list[str] = []
    lines: list[int] = []
    current = 0
    for raw in listing.split("\n"):
        m = _SASS_LINE_INFO.match(raw)
        if m:
            if m.group(1).endswith(device_file):
                current = int(m.group(2))
            elif m.group(3) and m.group(3).endswith(device_file):
                current = int(m.group(4))
            continue
        kept.append(raw)
        lines.append(current if _SASS_INSTR.match(raw) else 0)
        if not _SASS_INSTR.match(raw) and raw.strip().startswith(".text."):
            current = 0  # a new function starts with no location
    return "\n".join(kept), tuple(lines)


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


def machine_code(device_source: str, arch: str, *, include_dirs: list[str], kernels: tuple = (),
                 origins: tuple[SourceOrigin, ...] = (), python_sources: tuple[tuple[str, str], ...] = (),
                 cuda_home: str | os.PathLike | None = None) -> MachineCode:
    """Compile ``device_source`` for ``arch`` and read back PTX, SASS, resources and line links.

    ``kernels`` (DeviceKernel records) give each kernel's threads and dynamic shared memory for
    its occupancy. A missing tool or a failed compile gives a MachineCode whose ``missing`` says
    why and what to do; it never raises for those.
    """
    tools = find_toolchain(cuda_home)
    base = MachineCode(arch=arch, origins=origins, python_sources=python_sources)
    if tools.nvcc is None or tools.ptxas is None:
        where = f" in {cuda_home}" if cuda_home is not None else ""
        names = " and ".join(t for t in ("nvcc", "ptxas") if getattr(tools, t) is None)
        return _replace(base, missing=f"no {names} found{where}: {INSTALL_ADVICE}")
    used = [("nvcc", f"{tools.nvcc} ({tool_version(tools.nvcc)})"),
            ("ptxas", f"{tools.ptxas} ({tool_version(tools.ptxas)})")]
    with tempfile.TemporaryDirectory(prefix="tilelab-sass-") as tmp:
        work = Path(tmp)
        (work / DEVICE_FILE).write_text(device_source)
        incs = [f"-I{d}" for d in include_dirs]
        nvcc = _run([tools.nvcc, "-ptx", "-lineinfo", "-std=c++17", "-w", f"-arch={arch}", *incs,
                     "-o", "kernel.ptx", DEVICE_FILE], work)
        if nvcc.returncode != 0:
            return _replace(base, tools=tuple(used), log=(nvcc.stderr + nvcc.stdout)[-20000:],
                            missing=f"nvcc failed (exit {nvcc.returncode}) on the device source; its log is in .log")
        ptx = (work / "kernel.ptx").read_text()
        ptxas = _run([tools.ptxas, "-v", "-lineinfo", f"-arch={arch}", "-o", "kernel.cubin", "kernel.ptx"], work)
        if ptxas.returncode != 0:
            return _replace(base, ptx=ptx, ptx_device_lines=ptx_device_lines(ptx), tools=tuple(used),
                            log=(ptxas.stderr + ptxas.stdout)[-20000:],
                            missing=f"ptxas failed (exit {ptxas.returncode}); its log is in .log")
        resources = _with_occupancy(parse_ptxas(ptxas.stderr + ptxas.stdout), arch, kernels)
        sass, missing = "", None
        sass_lines: tuple[int, ...] = ()
        if tools.nvdisasm is not None:
            used.append(("nvdisasm", f"{tools.nvdisasm} ({tool_version(tools.nvdisasm)})"))
            dis = _run([tools.nvdisasm, "-gi", "-c", "kernel.cubin"], work)
            if dis.returncode == 0:
                sass, sass_lines = parse_sass(dis.stdout)
            else:
                missing = f"nvdisasm failed (exit {dis.returncode}): {dis.stderr.strip()[:300]}"
        elif tools.cuobjdump is not None:
            used.append(("cuobjdump", f"{tools.cuobjdump} ({tool_version(tools.cuobjdump)})"))
            dis = _run([tools.cuobjdump, "-sass", "kernel.cubin"], work)
            sass = dis.stdout if dis.returncode == 0 else ""
            sass_lines = tuple(0 for _ in sass.split("\n")) if sass else ()
            missing = ("SASS without line info: nvdisasm not found (pip install nvidia-cuda-nvdisasm)"
                       if dis.returncode == 0 else f"cuobjdump failed: {dis.stderr.strip()[:300]}")
        else:
            missing = "no SASS: neither nvdisasm nor cuobjdump found (pip install nvidia-cuda-nvdisasm)"
    return MachineCode(arch=arch, ptx=ptx, sass=sass, ptx_device_lines=ptx_device_lines(ptx),
                       sass_device_lines=sass_lines, resources=tuple(resources), origins=origins,
                       python_sources=python_sources, tools=tuple(used), missing=missing)


def _replace(mc: MachineCode, **changes: Any) -> MachineCode:
    import dataclasses

    return dataclasses.replace(mc, **changes)


def _with_occupancy(resources: list[KernelResources], arch: str, kernels: tuple) -> list[KernelResources]:
    import dataclasses

    by_name = {k.name: k for k in kernels}
    out = []
    for r in resources:
        k = by_name.get(r.kernel)
        dyn = k.dynamic_shared_memory_bytes if k is not None else 0
        threads = k.threads_per_block if k is not None else None
        occ = None
        if isinstance(threads, int) and isinstance(dyn, int):
            try:
                occ = theoretical_occupancy(arch, threads_per_block=threads, registers_per_thread=r.registers,
                                            shared_memory_per_block=r.static_shared_bytes + dyn)
            except ValueError:
                occ = None
        out.append(dataclasses.replace(r, dynamic_shared_bytes=dyn if isinstance(dyn, int) else 0, occupancy=occ))
    return out


__all__ = ["Toolchain", "compile_cubin", "find_cuda_tool", "find_toolchain", "machine_code", "parse_ptxas",
           "parse_sass", "ptx_device_lines", "strip_line_directives"]


def compile_cubin(device_source: str, arch: str, *, include_dirs: list[str],
                  cuda_home: str | os.PathLike | None = None, extra: list[str] | None = None) -> tuple[bytes, str]:
    """nvcc straight to a cubin (for loading with the driver API); (cubin bytes, ptxas -v log)."""
    tools = find_toolchain(cuda_home)
    if tools.nvcc is None:
        raise FileNotFoundError(f"no nvcc found: {INSTALL_ADVICE}")
    with tempfile.TemporaryDirectory(prefix="tilelab-cubin-") as tmp:
        work = Path(tmp)
        (work / DEVICE_FILE).write_text(device_source)
        run = _run([tools.nvcc, "-cubin", "-lineinfo", "-std=c++17", "-w", f"-arch={arch}", "-Xptxas", "-v",
                    *[f"-I{d}" for d in include_dirs], *(extra or []), "-o", "kernel.cubin", DEVICE_FILE], work)
        if run.returncode != 0:
            raise RuntimeError(f"nvcc failed (exit {run.returncode}):\n{(run.stderr + run.stdout)[-4000:]}")
        return (work / "kernel.cubin").read_bytes(), run.stderr + run.stdout
