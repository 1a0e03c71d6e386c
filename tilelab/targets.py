"""Every target tilelab knows, as one registry, and the one parser the API, CLI and magic share.

A :class:`Target` says what a target is (family, arch, the target dict TileLang takes), which
hardware features the inspector should look for (TMA, WGMMA, MFMA, L2 access-policy windows) and
how tilelab can launch a kernel for it. :func:`parse_target` turns whatever a user wrote
(``"sm_90a"``, ``"gfx942"``, ``"metal"``, ``"c"``, a TileLang target dict, a ``tvm.target.Target``)
into one of the registered records, or refuses it with the list of accepted names.

Adding a target is one entry in :data:`REGISTRY` (one call to ``_cuda``/``_hip`` or a
``Target(...)``). Nothing here imports TileLang; only :func:`launch_refusal` looks at the machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .records.display import Displayed
from .records.errors import TargetError

__all__ = ["Target", "REGISTRY", "FAMILIES", "TargetComparison", "compare_reports", "parse_target", "accepted_names",
           "DEFAULT_CUDA"]

FAMILIES = ("cuda", "hip", "metal", "cpu")

# How tilelab launches a family's kernels: a CUDA GPU through torch, the host CPU through
# TileLang's cython (C) backend, or not at all (tilelab has no launch path for AMD or Apple GPUs).
LAUNCH_CUDA, LAUNCH_CPU, INSPECT_ONLY = "cuda-gpu", "cpu", "inspect-only"


@dataclass(frozen=True)
class Target:
    """One target TileLang 0.1.15 lowers for, and what tilelab does with it.

    ``name`` is the canonical spelling (``"sm_90a"``, ``"gfx942"``, ``"metal"``, ``"c"``) and
    what a :class:`~tilelab.KernelReport` stores as its ``target``. ``tilelang_kind`` and
    ``tilelang_attrs`` give the dict TileLang takes (:meth:`tilelang_target`).
    """

    name: str
    family: str
    description: str
    tilelang_kind: str
    tilelang_attrs: tuple[tuple[str, str], ...] = ()
    tma: bool = False
    wgmma: bool = False
    mfma: bool = False
    l2_windows: bool = False
    launch: str = INSPECT_ONLY
    # TileLang execution backends whose launcher text tilelab generates for this target.
    backends: tuple[str, ...] = ()
    # What the device code is written in, for highlighting ("cuda", "hip", "metal", "c").
    source_language: str = "cuda"

    @property
    def arch(self) -> str | None:
        """The GPU architecture (``sm_90a``, ``gfx942``); None for Metal and the CPU."""
        return dict(self.tilelang_attrs).get("arch") or dict(self.tilelang_attrs).get("mcpu")

    def tilelang_target(self) -> dict[str, str]:
        """The target dict TileLang's ``lower``/``compile`` accept."""
        return {"kind": self.tilelang_kind, **dict(self.tilelang_attrs)}

    @property
    def shared_memory_name(self) -> str:
        """What the family calls a block's on-chip scratch memory."""
        return {"hip": "LDS", "metal": "threadgroup memory", "cpu": "local arrays"}.get(self.family, "shared memory")

    def not_applicable(self, feature: str) -> str:
        """Why a CUDA-only inspector section (``tma``, ``wgmma``, ``l2``) shows nothing here."""
        what = {"tma": "TMA (the Tensor Memory Accelerator)", "wgmma": "WGMMA (warpgroup matrix multiply)",
                "l2": "L2 access-policy windows", "mfma": "MFMA (AMD matrix cores)"}[feature]
        if feature == "mfma":
            return f"{what} does not apply to {self.name}: only AMD CDNA GPUs (gfx90a, gfx942, gfx950) have it."
        if self.family == "cuda":
            need = {"tma": "sm_90 or newer", "wgmma": "sm_90a", "l2": "sm_80 or newer"}[feature]
            return f"{what} does not apply to {self.name}: it needs {need}."
        return f"{what} does not apply to {self.name}: it is a CUDA feature ({self.description})."

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "tilelang": self.tilelang_target(), "tma": self.tma,
                "wgmma": self.wgmma, "mfma": self.mfma, "l2_windows": self.l2_windows, "launch": self.launch}


def _cuda(arch: str, description: str) -> Target:
    number = int(re.match(r"sm_(\d+)", arch).group(1))  # type: ignore[union-attr]
    return Target(
        name=arch, family="cuda", description=description, tilelang_kind="cuda",
        tilelang_attrs=(("arch", arch),),
        tma=number >= 90, wgmma=arch == "sm_90a", l2_windows=number >= 80,
        launch=LAUNCH_CUDA, backends=("tvm_ffi", "cython", "nvrtc", "cutedsl"), source_language="cuda",
    )


def _hip(arch: str, description: str) -> Target:
    return Target(
        name=arch, family="hip", description=description, tilelang_kind="hip",
        tilelang_attrs=(("mcpu", arch),), mfma=True,
        launch=INSPECT_ONLY, backends=("cython", "tvm_ffi"), source_language="hip",
    )


# The CUDA archs TileLang 0.1.15 generates code for (its arch-specific templates and passes
# distinguish sm_70/75 (Volta/Turing MMA), sm_80-89 (Ampere/Ada), sm_90/sm_90a (Hopper; WGMMA only
# with the "a" suffix), sm_100/103 (Blackwell datacenter) and sm_120 (Blackwell consumer)).
REGISTRY: tuple[Target, ...] = (
    _cuda("sm_70", "NVIDIA Volta (V100)"),
    _cuda("sm_75", "NVIDIA Turing (T4)"),
    _cuda("sm_80", "NVIDIA Ampere (A100)"),
    _cuda("sm_86", "NVIDIA Ampere (RTX 30xx, A10)"),
    _cuda("sm_87", "NVIDIA Ampere (Jetson Orin)"),
    _cuda("sm_89", "NVIDIA Ada (L4, RTX 40xx)"),
    _cuda("sm_90", "NVIDIA Hopper without arch-specific features"),
    _cuda("sm_90a", "NVIDIA Hopper (H100, H200)"),
    _cuda("sm_100", "NVIDIA Blackwell without arch-specific features"),
    _cuda("sm_100a", "NVIDIA Blackwell (B200)"),
    _cuda("sm_103a", "NVIDIA Blackwell Ultra (B300)"),
    _cuda("sm_120", "NVIDIA Blackwell (RTX 50xx)"),
    _cuda("sm_120a", "NVIDIA Blackwell (RTX 50xx), arch-specific"),
    _hip("gfx90a", "AMD CDNA2 (MI200)"),
    _hip("gfx942", "AMD CDNA3 (MI300)"),
    _hip("gfx950", "AMD CDNA4 (MI350)"),
    Target(name="metal", family="metal", description="Apple GPUs (Metal Shading Language)",
           tilelang_kind="metal", launch=INSPECT_ONLY, backends=("torch", "tvm_ffi", "cython"),
           source_language="metal"),
    Target(name="c", family="cpu", description="the host CPU, through C source", tilelang_kind="c",
           launch=LAUNCH_CPU, backends=("cython", "tvm_ffi"), source_language="c"),
)

DEFAULT_CUDA = "sm_90a"
_BY_NAME = {t.name: t for t in REGISTRY}
# Other spellings of a registered target.
_ALIASES = {"cpu": "c", "mps": "metal"}


def accepted_names() -> list[str]:
    return [t.name for t in REGISTRY]


def _accepted_text() -> str:
    by_family: dict[str, list[str]] = {}
    for t in REGISTRY:
        by_family.setdefault(t.family, []).append(t.name)
    listing = "; ".join(f"{family}: {', '.join(names)}" for family, names in by_family.items())
    return (f"Accepted targets ({listing}), as a name (\"sm_90a\", \"gfx942\", \"metal\", \"c\"), "
            '"cuda -arch=sm_90a", "hip -mcpu=gfx942", a TileLang target dict such as '
            '{"kind": "cuda", "arch": "sm_90a"} or {"kind": "hip", "mcpu": "gfx942"}, or a tvm.target.Target.')


def _lookup(name: str, spec: Any) -> Target:
    key = _ALIASES.get(name, name)
    if key in _BY_NAME:
        return _BY_NAME[key]
    hint = ""
    if key == "llvm":
        hint = ' TileLang 0.1.15 compiles CPU kernels through C: use "c".'
    elif re.fullmatch(r"sm_\d+[af]?", key):
        hint = f" {key} is not a CUDA arch TileLang 0.1.15 generates code for."
    elif re.fullmatch(r"gfx\w+", key):
        hint = f" {key} is not an AMD CDNA GPU with matrix cores that tilelab knows."
    raise TargetError(f"unknown target {spec!r}.{hint} {_accepted_text()}")


def parse_target(spec: Any) -> Target:
    """The registered :class:`Target` a user's target spec names; a :class:`TargetError`
    listing the accepted targets otherwise. ``None`` is not a spec (the caller picks a default)."""
    if isinstance(spec, Target):
        return spec
    if isinstance(spec, str):
        text = spec.strip()
        match = re.fullmatch(r"(?:cuda\s+)?-arch=(\S+)|cuda\s*:\s*(\S+)", text)
        if match:
            return _lookup(match.group(1) or match.group(2), spec)
        match = re.fullmatch(r"(?:hip|rocm)\s+-mcpu=(\S+)|(?:hip|rocm)\s*:\s*(\S+)", text)
        if match:
            return _lookup(match.group(1) or match.group(2), spec)
        if text in ("cuda", "auto", "hip", "rocm", "gpu", ""):
            raise TargetError(f"target {spec!r} names no arch. {_accepted_text()}")
        return _lookup(text.lower() if not text.startswith("sm_") else text, spec)
    if isinstance(spec, dict):
        kind = spec.get("kind", "cuda")
        return _from_kind(str(kind), spec.get("arch"), spec.get("mcpu"), spec)
    if type(spec).__name__ == "Target" and hasattr(spec, "kind"):
        attrs = spec.attrs
        arch = str(attrs["arch"]) if "arch" in attrs else None
        mcpu = str(attrs["mcpu"]) if "mcpu" in attrs else None
        return _from_kind(str(spec.kind.name), arch, mcpu, spec)
    raise TargetError(f"unknown target {spec!r} (a {type(spec).__name__}). {_accepted_text()}")


def _from_kind(kind: str, arch: Any, mcpu: Any, spec: Any) -> Target:
    if kind == "cuda":
        if not arch:
            raise TargetError(f"target {spec!r} names no arch. {_accepted_text()}")
        return _lookup(str(arch), spec)
    if kind in ("hip", "rocm"):
        if not mcpu:
            raise TargetError(f"target {spec!r} names no AMD arch (\"mcpu\"). {_accepted_text()}")
        return _lookup(str(mcpu).split(":")[0], spec)
    if kind in ("metal", "c", "llvm"):
        return _lookup(kind, spec)
    raise TargetError(f"unknown target kind {kind!r} in {spec!r}. {_accepted_text()}")


def local_cuda_target(arch: str) -> Target:
    """The target of the local CUDA GPU: its registry entry, or one made for an arch the registry
    does not list (the GPU is real, so its arch is taken as the driver reports it)."""
    try:
        return parse_target(arch)
    except TargetError:
        return _cuda(arch, "the local CUDA GPU")


def launch_refusal(target: Target, *, has_cuda_gpu: bool) -> str | None:
    """Why a kernel for ``target`` cannot be launched here, or None when it can."""
    if target.launch == LAUNCH_CPU:
        return None
    if target.launch == LAUNCH_CUDA:
        if has_cuda_gpu:
            return None
        return (f"launching a kernel for {target.name} needs a CUDA GPU and this machine has none; "
                'inspect it (tilelab.inspect, %%tilelang without --run), or launch it on the CPU with target "c"')
    return (f"{target.name} ({target.description}) is inspect-only in tilelab: it has no launch path for "
            f"{target.family.upper() if target.family == 'hip' else target.family.capitalize()} GPUs "
            "yet. Inspect the kernel, or launch it on the CPU with target \"c\"")


# --------------------------------------------------------------------------------------------
# One kernel, several targets, side by side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetComparison(Displayed):
    """The facts of several reports of one kernel, one column per target (rows: label, values)."""

    targets: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"targets": list(self.targets), "rows": [[label, list(values)] for label, values in self.rows]}

    def __repr__(self) -> str:
        width = max(len(label) for label, _ in self.rows) if self.rows else 0
        lines = [" " * width + "  " + " | ".join(self.targets)]
        lines += [f"{label:<{width}}  " + " | ".join(values) for label, values in self.rows]
        return "\n".join(lines)



def compare_reports(reports: Any) -> TargetComparison:
    """What TileLang generated for each target: launch shape, on-chip memory, matrix instructions,
    TMA, launchers and whether tilelab can launch it here. ``reports`` are KernelReports."""
    reports = list(reports)
    targets = [parse_target(r.target) for r in reports]

    def per(fn: Any) -> tuple[str, ...]:
        return tuple(str(fn(r, t)) for r, t in zip(reports, targets))

    def launch_shape(r: Any, t: Target) -> str:
        if t.family == "cpu":
            return "no threads: the tile grid is the C function's loop nest"
        return "; ".join(f"grid {'x'.join(map(str, k.grid))}, {k.threads_per_block} threads" for k in r.kernels)

    def matrix(r: Any, t: Target) -> str:
        if r.wgmma:
            return ", ".join(f"WGMMA {w.instruction} x{w.count}" for w in r.wgmma)
        if r.mfma:
            return ", ".join(f"MFMA {m.shape} {m.a_dtype} -> {m.accum_dtype} x{m.count}" for m in r.mfma)
        if t.family == "cpu":
            return "none: T.gemm is a scalar loop nest"
        return "none"

    def tma(r: Any, t: Target) -> str:
        return str(len(r.tma_descriptors)) if t.tma else "does not apply"

    def lds(r: Any, t: Target) -> str:
        if not r.lds_reads:
            return "-"
        worst = max(x.conflict_degree for x in r.lds_reads)
        return "none" if worst <= 1 else f"worst {worst:g}-way (CDNA model)"

    def launchers(r: Any, t: Target) -> str:
        return ", ".join(item.backend for item in r.sources.launchers if item.text is not None) or "none"

    rows = (
        ("target", per(lambda r, t: f"{t.name}: {t.description}")),
        ("device code", per(lambda r, t: f"{ {'cuda': 'CUDA', 'hip': 'HIP', 'metal': 'Metal', 'cpu': 'C'}[t.family]}, "
                                         f"{r.sources.device.count(chr(10)) + 1} lines")),
        ("launch", per(launch_shape)),
        ("on-chip tile memory", per(lambda r, t: (
            f"{t.shared_memory_name}: " + ", ".join(f"{k.dynamic_shared_memory_bytes} B" for k in r.kernels))
            if t.family != "cpu" else "none: the tiles are local arrays (T.alloc_local)")),
        ("matrix instructions", per(matrix)),
        ("TMA descriptors", per(tma)),
        ("LDS bank conflicts", per(lds)),
        ("launchers generated", per(launchers)),
        ("launch here", per(lambda r, t: {"cpu": "yes, on the CPU", "cuda-gpu": "on a CUDA GPU"}.get(
            t.launch, "inspect only"))),
    )
    return TargetComparison(tuple(t.name for t in targets), rows)
