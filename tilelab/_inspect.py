"""``tilelab.inspect``: everything TileLang generated for a kernel, as one KernelReport."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from . import __version__ as TILELAB_VERSION
from ._errors import TargetError
from ._model import BACKENDS, SCHEMA_VERSION, KernelReport, Sources

DEFAULT_ARCH = "sm_90a"
KNOWN_ARCHS = (
    "sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_103a", "sm_120", "sm_120a",
)
_TARGET_FORMS = (
    'an arch name such as "sm_90a" or "sm_80" (known: ' + ", ".join(KNOWN_ARCHS) + "), "
    '"cuda -arch=sm_90a", a TileLang target dict {"kind": "cuda", "arch": "sm_90a"}, '
    "or a tvm.target.Target of kind cuda"
)

# Why a launcher sets no L2 access-policy window, per backend (read in TileLang 0.1.15's
# jit/adapter/{wrapper.py,nvrtc/wrapper.py,cutedsl/wrapper.py}).
L2_LOOKUP_BUG = (
    "TileLang 0.1.15 bug: the {backends} launcher(s) set no L2 access-policy window for {buffers}: "
    "they look up l2_persistent_map by device kernel name while it is keyed by the host function name"
)
L2_UNSUPPORTED = (
    "TileLang 0.1.15's {backends} launcher has no L2 persistence code at all (its wrapper never reads "
    "l2_persistent_map): no window for {buffers}"
)
_L2_REASONS = {"cython": L2_LOOKUP_BUG, "nvrtc": L2_LOOKUP_BUG, "cutedsl": L2_UNSUPPORTED}
L2_UNKNOWN = "the {backends} launcher(s) set no L2 access-policy window for {buffers}"

PDL_SERIALIZATION_NOTE = (
    "programmatic dependent launch: {kernels} never call(s) T.pdl_sync, yet the {backends} launcher(s) "
    "set programmaticStreamSerializationAllowed on its launch (TileLang 0.1.15's cython launcher does "
    "so for every non-cooperative launch; nvrtc only for kernels that call T.pdl_sync; tvm_ffi never). "
    "After a kernel that calls T.pdl_trigger, such a launch may start before that kernel's writes "
    "are complete"
)


def _l2_notes(windows: list) -> list[str]:
    """One sentence per reason a launcher omits a window, naming the backends and buffers."""
    groups: dict[str, list[str]] = {}
    buffers: dict[str, list[str]] = {}
    for w in windows:
        for backend in w.missing_in:
            template = _L2_REASONS.get(backend, L2_UNKNOWN)
            if backend not in groups.setdefault(template, []):
                groups[template].append(backend)
            if w.buffer not in buffers.setdefault(template, []):
                buffers[template].append(w.buffer)
    if not groups:
        return []
    emitted = sorted({b for w in windows for b in w.emitted_by})
    notes = [t.format(backends=" and ".join(groups[t]), buffers=", ".join(buffers[t])) + "." for t in groups]
    notes.append(f"Only {', '.join(emitted) or 'no launcher'} applies T.annotate_l2_hit_ratio.")
    return [" ".join(notes)]


def _pdl_notes(kernels: list) -> list[str]:
    unsynced = [k for k in kernels if k.programmatic_serialization_by and not k.programmatic_dependent_launch]
    if not unsynced:
        return []
    backends = list(dict.fromkeys(b for k in unsynced for b in k.programmatic_serialization_by))
    return [PDL_SERIALIZATION_NOTE.format(kernels=", ".join(k.name for k in unsynced),
                                          backends=" and ".join(backends)) + "."]


def resolve_target(spec: Any) -> tuple[str, str | None]:
    """Normalise a target spec to an arch name; returns (arch, note about the choice or None)."""
    if spec is None:
        from ._adapter import local_gpu_arch

        local = local_gpu_arch()
        if local:
            return local, f"target {local}: the local GPU's arch"
        return DEFAULT_ARCH, f"no GPU found: inspected for {DEFAULT_ARCH} (choose another with --target in %%tilelang, target=... in tilelab.inspect)"
    arch: Any = None
    if isinstance(spec, str):
        text = spec.strip()
        match = re.fullmatch(r"(?:cuda\s+)?(?:-arch=)?(sm_\d+[af]?)", text)
        if match:
            arch = match.group(1)
        elif text in ("cuda", "auto"):
            raise TargetError(f"target {spec!r} names no arch. Use {_TARGET_FORMS}.")
    elif isinstance(spec, dict):
        if spec.get("kind", "cuda") != "cuda":
            raise TargetError(f"tilelab inspects CUDA targets; got kind {spec.get('kind')!r}. Use {_TARGET_FORMS}.")
        arch = spec.get("arch")
    elif type(spec).__name__ == "Target":
        if str(spec.kind.name) != "cuda":
            raise TargetError(f"tilelab inspects CUDA targets; got a {spec.kind.name} Target. Use {_TARGET_FORMS}.")
        arch = str(spec.attrs.get("arch", "")) or None
    if not isinstance(arch, str) or not re.fullmatch(r"sm_\d+[af]?", arch):
        raise TargetError(f"unknown target {spec!r}. Use {_TARGET_FORMS}.")
    return arch, None


# --------------------------------------------------------------------------------------------
# The report cache: content-addressed by the kernel's script, target, options and versions.
# --------------------------------------------------------------------------------------------

_MEMORY: dict[str, KernelReport] = {}


def cache_dir() -> Path:
    root = os.environ.get("TILELAB_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "tilelab" / "reports"


# The engine's own sources: a report is only as current as the code that built it, and tilelab's
# version string does not change with every edit.
ENGINE_SOURCES = ("_adapter.py", "_inspect.py", "_model.py", "_tma_rules.py")


@functools.lru_cache(maxsize=None)
def engine_fingerprint() -> str:
    """SHA-256 over the engine's source files, computed once per process."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ENGINE_SOURCES:
        digest.update(name.encode() + b"\0")
        try:
            digest.update((here / name).read_bytes())
        except OSError:  # pragma: no cover - an installed copy without sources
            digest.update(b"missing")
        digest.update(b"\0")
    return digest.hexdigest()


def _cache_key(script: str, arch: str, out_idx: Any, pass_configs: dict[str, Any],
               backends: tuple[str, ...], constants: Any, tilelang_version: str) -> str:
    payload = json.dumps({
        "script": hashlib.sha256(script.encode()).hexdigest(),
        "arch": arch, "out_idx": out_idx, "pass_configs": {k: repr(v) for k, v in sorted(pass_configs.items())},
        "backends": list(backends), "constants": [(k, repr(v), e) for k, v, e in constants],
        "tilelang": tilelang_version, "tilelab": TILELAB_VERSION, "schema": SCHEMA_VERSION,
        "engine": engine_fingerprint(),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _cache_read(key: str) -> KernelReport | None:
    if key in _MEMORY:
        return _MEMORY[key]
    path = cache_dir() / f"{key}.json"
    try:
        report = KernelReport.load(path)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _MEMORY[key] = report
    return report


def _cache_write(key: str, report: KernelReport) -> None:
    _MEMORY[key] = report
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(report.to_json())
        tmp.replace(directory / f"{key}.json")
    except OSError:
        pass  # a read-only home must not break inspection


def _cache_forget(key: str) -> None:
    _MEMORY.pop(key, None)
    try:
        (cache_dir() / f"{key}.json").unlink(missing_ok=True)
    except OSError:
        pass


def clear_cache() -> None:
    _MEMORY.clear()
    directory = cache_dir()
    if directory.is_dir():
        for path in directory.glob("*.json"):
            path.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------


def inspect(kernel: Any, target: Any = None, *, out_idx: int | list[int] | None = None,
            pass_configs: dict[str, Any] | None = None, args: tuple = (), kwargs: dict | None = None,
            force: bool = False, backends: tuple[str, ...] = BACKENDS) -> KernelReport:
    """Inspect what TileLang 0.1.15 generates for ``kernel``; needs no GPU, nvcc or libcuda.

    ``kernel`` is a ``T.prim_func``, a ``tilelang.compile`` result, a ``@tilelang.jit`` function
    or a function returning a prim_func, with ``args``/``kwargs`` that specialise the last two.
    ``target`` is "sm_90a"-style, a TileLang target dict or a ``Target``; by default the local
    GPU's arch, else sm_90a (the report's notes say which). Reports are cached on disk by content
    (the kernel, options, TileLang's version and the engine's own source files); ``force=True``
    recomputes and overwrites the entry. A report in which a launcher failed with an exception is
    not cached (the failure may not repeat); its notes say so.
    """
    from . import _adapter

    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}")
    source = _adapter.resolve_kernel(kernel, tuple(args), kwargs)
    notes: list[str] = []
    if target is None and source.target_hint is not None and not isinstance(source.target_hint, str):
        target = source.target_hint
    elif target is None and isinstance(source.target_hint, (str, dict)) and source.target_hint not in ("auto", "cuda"):
        target = source.target_hint
    arch, target_note = resolve_target(target)
    if out_idx is None:
        out_idx_list = source.out_idx
    else:
        out_idx_list = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    configs = _adapter.normalize_pass_configs({**source.pass_configs, **(pass_configs or {})})
    version = _adapter.tilelang_version()

    key = _cache_key(_adapter.script_text(source.prim_func), arch, out_idx_list, configs,
                     tuple(backends), source.constants, version)
    if not force:
        cached = _cache_read(key)
        if cached is not None:
            return _with_target_note(cached, target_note)

    lowered = _adapter.lower(source, arch, out_idx=out_idx_list, pass_configs=configs, backends=tuple(backends))
    launchers = tuple(lowered.launchers[b] for b in backends if b in lowered.launchers)
    descriptors = [_checked(d, arch) for d in _adapter.tma_descriptors(lowered)]
    windows = _adapter.l2_windows(lowered)
    notes += _l2_notes(windows)
    kernels = _adapter.kernel_launches(lowered)
    notes += _pdl_notes(kernels)
    left_out: list[str] = []
    layouts = _adapter.layouts(lowered, left_out=left_out)
    notes += left_out
    for backend in lowered.transient_failures:
        notes.append(f"the {backend} launcher failed to generate ({lowered.launchers[backend].reason}); "
                     "this report is not cached, so the next inspect tries again")
    report = KernelReport(
        name=source.name,
        target=arch,
        kernels=tuple(kernels),
        sources=Sources(device=lowered.device_source, launchers=launchers),
        tma_descriptors=tuple(descriptors),
        wgmma=tuple(_adapter.wgmma_instructions(lowered)),
        layouts=tuple(layouts),
        l2_persistence=tuple(windows),
        arguments=tuple(_adapter.arguments(source, out_idx_list)),
        notes=tuple(notes),
        versions=(("tilelang", version), ("tilelab", TILELAB_VERSION)),
        cache_key=source.cache_key or f"kernel content sha256 {key[:16]}",
        pass_configs=tuple((k, repr(v)) for k, v in sorted(configs.items())),
    )
    if lowered.transient_failures:
        _cache_forget(key)  # a stale entry must not outlive this run either
    else:
        _cache_write(key, report)
    return _with_target_note(report, target_note)


def _with_target_note(report: KernelReport, note: str | None) -> KernelReport:
    """How the target was chosen depends on the call, not on the kernel: it is not cached."""
    return report.replace(notes=(note, *report.notes)) if note else report


def _checked(desc, arch: str):
    from ._tma_rules import with_checks

    return with_checks(desc, arch)
