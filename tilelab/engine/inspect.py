"""``tilelab.inspect``: everything TileLang generated for a kernel, as one KernelReport."""

from __future__ import annotations

import os
from typing import Any

from .._version import __version__ as TILELAB_VERSION
from ..records.errors import LoweringError, OptionError
from ..records.kernel import BACKENDS, KernelReport, Sources
from ..targets import DEFAULT_CUDA, REGISTRY, Target, local_cuda_target, parse_target
from . import cache as _cache

DEFAULT_ARCH = DEFAULT_CUDA
# The CUDA archs of the registry (kept for callers that list them).
KNOWN_ARCHS = tuple(t.name for t in REGISTRY if t.family == "cuda")

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


def resolve_target(spec: Any) -> tuple[Target, str | None]:
    """The registered target ``spec`` names (:func:`tilelab.targets.parse_target`, the one
    validation the API, CLI and magic share), and a note when the choice was tilelab's: with no
    spec, the local GPU's arch, else sm_90a."""
    if spec is None:
        from .._tilelang import local_gpu_arch

        local = local_gpu_arch()
        if local:
            return local_cuda_target(local), f"target {local}: the local GPU's arch"
        return parse_target(DEFAULT_ARCH), (
            f"no GPU found: inspected for {DEFAULT_ARCH} "
            "(choose another with --target in %%tilelang, target=... in tilelab.inspect)")
    return parse_target(spec), None


# --------------------------------------------------------------------------------------------


def inspect(kernel: Any, target: Any = None, *, out_idx: int | list[int] | None = None,
            pass_configs: dict[str, Any] | None = None, args: tuple = (), kwargs: dict | None = None,
            force: bool = False, backends: tuple[str, ...] | None = None, toolchain: bool = False,
            cuda_home: str | os.PathLike | None = None, passes: bool = False) -> KernelReport:
    """Inspect what TileLang 0.1.15 generates for ``kernel``; needs no GPU, nvcc or libcuda.

    ``kernel`` is a ``T.prim_func``, a ``tilelang.compile`` result, a ``@tilelang.jit`` function
    or a function returning a prim_func, with ``args``/``kwargs`` that specialise the last two.
    ``target`` is any target :func:`tilelab.targets.parse_target` accepts: a CUDA arch
    ("sm_90a"), an AMD one ("gfx942"), "metal", "c" (the CPU), a TileLang target dict or a
    ``tvm.target.Target``; by default the local GPU's arch, else sm_90a (the report's notes say
    which). ``backends`` defaults to every launcher TileLang has for the target's family. Reports
    are cached on disk by content (the kernel, options, TileLang's version and the engine's own
    source files); ``force=True``
    recomputes and overwrites the entry. A report in which a launcher failed with an exception is
    not cached (the failure may not repeat); its notes say so.

    ``toolchain=True`` also compiles the device source with the CUDA toolkit (nvcc, ptxas,
    nvdisasm; found as :func:`tilelab.engine.toolchain.find_toolchain` says, or under ``cuda_home``) into
    ``report.machine``: PTX, SASS, registers, spills, shared memory, occupancy and the links from
    the kernel's Python lines to device lines to PTX/SASS. A missing toolkit is reported there, not
    raised. ``passes=True`` records TileLang's lowering pass by pass into ``report.passes``.
    """
    from .. import _tilelang

    known = tuple(dict.fromkeys(BACKENDS + tuple(b for t in REGISTRY for b in t.backends)))
    unknown = [b for b in (backends or ()) if b not in known]
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; choose from {list(known)}")
    source = _tilelang.resolve_kernel(kernel, tuple(args), kwargs)
    notes: list[str] = []
    hint = source.target_hint  # a target the kernel was built for; a plain "auto"/"cuda" names no device
    if target is None and hint is not None and (not isinstance(hint, str) or hint not in ("auto", "cuda")):
        target = hint
    resolved, target_note = resolve_target(target)
    arch = resolved.name
    backends = tuple(backends) if backends is not None else resolved.backends
    if out_idx is None:
        out_idx_list = source.out_idx
    elif isinstance(out_idx, int):
        out_idx_list = [out_idx]
    else:
        out_idx_list = list(out_idx)
    _check_out_idx(out_idx_list, source, shown=out_idx if out_idx is not None else source.out_idx,
                   given=out_idx is not None)
    user_configs = {**source.pass_configs, **(pass_configs or {})}
    _tilelang.check_pass_configs(user_configs)
    configs = _tilelang.normalize_pass_configs(user_configs)
    version = _tilelang.tilelang_version()

    material = _cache.key_material(
        script=_tilelang.script_text(source.prim_func), kernel=source.name, arch=arch, out_idx=out_idx_list,
        pass_configs=configs, backends=tuple(backends), constants=source.constants, tilelang_version=version,
        tiers=(("toolchain", str(cuda_home)) if toolchain else ()) + (("passes",) if passes else ()))
    key = _cache.key_of(material)
    if not force:
        cached = _cache.read(key, material)
        if cached is not None:
            return _with_target_note(cached, target_note)

    lowered = _lowered(source, resolved, out_idx_list, configs, tuple(backends), user_configs)
    report = _report(source, lowered, resolved, out_idx_list, configs, tuple(backends), notes, version, key)
    report = _with_tiers(report, source, resolved, configs, toolchain, passes, cuda_home)
    # A missing or failing toolkit is the machine's state, not the kernel's: installing it must
    # show the machine code on the next call, so such a report is not cached either.
    no_machine = report.machine is not None and report.machine.missing is not None
    if lowered.transient_failures or no_machine:
        _cache.forget(key)  # a stale entry must not outlive this run either
    else:
        _cache.write(key, material, report)
    return _with_target_note(report, target_note)


def _lowered(source: Any, resolved: Target, out_idx: list[int] | None, configs: dict[str, Any],
             backends: tuple[str, ...], user_configs: dict[str, Any]) -> Any:
    """TileLang's lowering of ``source``; a failure says which of the user's pass configs were in force."""
    from .. import _tilelang

    try:
        return _tilelang.lower(source, resolved, out_idx=out_idx, pass_configs=configs, backends=backends)
    except LoweringError as err:
        if user_configs:  # the user's options may be the cause: say which were in force
            given = ", ".join(f"{k}={v!r}" for k, v in user_configs.items())
            err.summary += (f" (lowered with your pass configs {given}: inspect once without them to see "
                            "whether they cause this)")
            err.args = (err.summary,)
        raise


def _report(source: Any, lowered: Any, resolved: Target, out_idx: list[int] | None, configs: dict[str, Any],
            backends: tuple[str, ...], notes: list[str], version: str, key: str) -> KernelReport:
    """The report of what the lowering made (the tiers aside), ``notes`` first among its notes."""
    from .. import _tilelang

    notes = list(notes)
    arch = resolved.name
    launchers = tuple(lowered.launchers[b] for b in backends if b in lowered.launchers)
    descriptors = [_checked(d, arch) for d in _tilelang.tma_descriptors(lowered)]
    windows = _tilelang.l2_windows(lowered)
    notes += _l2_notes(windows)
    kernels = _tilelang.kernel_launches(lowered)
    notes += _pdl_notes(kernels)
    notes += _tilelang.limit_notes(lowered, kernels, resolved)
    mfma_records, lds_records = [], []
    if resolved.mfma:  # read from the generated HIP itself: what the GPU will run
        from . import mfma

        mfma_records = mfma.mfma_instructions(lowered.device_source)
        lds_records = mfma.lds_reads(lowered.device_source, mfma_records)
        mfma_records = mfma.with_lds_sources(mfma_records, lds_records)
    left_out: list[str] = []
    layouts = _tilelang.layouts(lowered, left_out=left_out)
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
        wgmma=tuple(_tilelang.wgmma_instructions(lowered)),
        layouts=tuple(layouts),
        l2_persistence=tuple(windows),
        arguments=tuple(_tilelang.arguments(source, out_idx)),
        notes=tuple(notes),
        versions=(("tilelang", version), ("tilelab", TILELAB_VERSION)),
        cache_key=source.cache_key or f"kernel content sha256 {key[:16]}",
        pass_configs=tuple((k, repr(v)) for k, v in sorted(configs.items())),
        mfma=tuple(mfma_records),
        lds_reads=tuple(lds_records),
        family=resolved.family,
    )
    return report


def _with_tiers(report: KernelReport, source: Any, resolved: Target, configs: dict[str, Any], toolchain: bool,
                passes: bool, cuda_home: Any) -> KernelReport:
    """``report`` with the lowering explainer and the opt-in tiers (CUDA targets), or a note why not."""
    from .. import _tilelang

    arch = resolved.name
    if resolved.family == "cuda":  # the explainer and both tiers read CUDA source and CUDA tools
        report = report.replace(lowering=_lowering(source, arch, report))
        if toolchain:
            report = report.replace(machine=_machine_code(source, arch, configs, report, cuda_home))
        if passes:
            report = report.replace(passes=_tilelang.pass_trace(source, arch, configs))
    elif toolchain or passes:
        flags = (("toolchain=True (--sass)", toolchain), ("passes=True (--passes)", passes))
        asked = " and ".join(n for n, on in flags if on)
        report = report.replace(notes=report.notes + (
            f"{asked}: only for CUDA targets (PTX/SASS come from the CUDA toolkit, and the passes follow "
            f"TileLang's CUDA pipeline); {arch} is a {resolved.family} target, so it was not recorded",))
    return report


def _check_out_idx(out_idx: list[int] | None, source: Any, *, shown: Any, given: bool) -> None:
    """Each output index must name one of the kernel's parameters, once."""
    if out_idx is None:
        return
    func = source.prim_func
    params = [func.buffer_map[p].name if p in func.buffer_map else getattr(p, "name", str(p)) for p in func.params]
    count = len(params)
    origin = "out_idx" if given else f"out_idx of the @tilelang.jit decorator of {source.name}"
    for index in out_idx:
        if isinstance(index, bool) or not isinstance(index, int):
            raise OptionError(f"{origin}={shown!r}: each index must be an integer, got {index!r}. "
                              f"Give parameter positions of {source.name}({', '.join(params)}), e.g. -1 for the last")
        if not -count <= index < count:
            raise OptionError(
                f"{origin}={shown!r}: index {index} is out of range for {source.name}, which has {count} "
                f"parameter(s) ({', '.join(params)}). Give an index from 0 to {count - 1} "
                f"or from {-count} to -1 (e.g. -1 for {params[-1] if params else 'the last'})")
    positions = [i % count for i in out_idx]
    if len(set(positions)) != len(positions):
        raise OptionError(f"{origin}={shown!r} names the same parameter twice "
                          f"({source.name} has {count}: {', '.join(params)}). Give each output once")


def _with_target_note(report: KernelReport, note: str | None) -> KernelReport:
    """How the target was chosen depends on the call, not on the kernel: it is not cached."""
    return report.replace(notes=(note, *report.notes)) if note else report


def _checked(desc, arch: str):
    from .tma_rules import with_checks

    return with_checks(desc, arch)


def _machine_code(source: Any, arch: str, configs: dict[str, Any], report: KernelReport, cuda_home: Any):
    """PTX/SASS/resources of the report's device source, with the Python line of each device line."""
    from .. import _tilelang
    from .toolchain import machine_code, strip_line_directives

    with_lines = _tilelang.device_source_with_line_directives(source, arch, configs)
    stripped, origins = strip_line_directives(with_lines, is_user_file=lambda f: not _tilelang.is_tilelang_file(f))
    if stripped != report.sources.device:
        origins = ()  # the line-directive build differs from the one shown: its lines would mislead
    files = list(dict.fromkeys(o.file for o in origins if o.user))
    python_sources = tuple((f, "".join(_source_lines(f))) for f in files if _source_lines(f))
    return machine_code(report.sources.device, arch, include_dirs=_tilelang.device_include_dirs(),
                        kernels=report.kernels, origins=origins, python_sources=python_sources,
                        cuda_home=cuda_home)


def _source_lines(path: str) -> list[str]:
    """The lines of a kernel's Python file; notebook cells live only in linecache, under names
    such as ``<ipython-input-3-ab12>`` that TileLang's #line directives make absolute."""
    import linecache

    lines = linecache.getlines(path)
    name = os.path.basename(path)
    if not lines and name.startswith("<"):
        lines = linecache.getlines(name)
    return lines


def _lowering(source: Any, arch: str, report: KernelReport):
    """The lowering explainer's record; None (with nothing claimed) if the tile ops cannot be read."""
    from .. import _tilelang
    from .explain import explain

    try:
        ops = _tilelang.tile_ops(source.prim_func)
    except Exception:  # an unusual prim_func: the explainer is a bonus, never a failure
        return None
    threads = next((k.threads_per_block for k in report.kernels if isinstance(k.threads_per_block, int)), None)
    shapes = {a.name: tuple(a.shape) for a in report.arguments if a.shape}
    return explain(ops, report.sources.device, arch, dict(report.pass_configs), threads, shapes)
