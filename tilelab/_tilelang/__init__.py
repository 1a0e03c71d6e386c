"""The one package that touches TileLang and TVM internals.

Everything tilelab knows about TileLang 0.1.15's private layout lives here: how to lower a kernel
without nvcc or a GPU, where the launcher of each execution backend is generated, which IR
attributes hold the TMA descriptors, launch configuration, L2 windows and layouts, how the JIT
front ends are unwrapped, and how the CUDA TileLang generates reads as text. An upgrade of
TileLang should touch this package only. One module per concern:

- ``env``: importing TileLang quietly, its version, the local GPU's arch, the pass-config registry
- ``errors``: TileLang's failures as tilelab's errors (``tilelang_errors``, ``explain_error``,
  ``diagnosed``), the failing pass, what a target cannot lower, the pass-config check
- ``resolve``: kernel objects (``kernel_kind``, ``resolve_kernel``, ``kernel_fingerprint``) and a
  kernel's IR as text
- ``lowering``: lowering (``lower``) and every execution backend's launcher, CuTeDSL's included
- ``ir``: readers of the lowered IR (launches, TMA descriptors, WGMMA, L2 windows, arguments,
  tile ops, launch dims)
- ``layout_tables``: the inferred layouts, evaluated element by element
- ``source``: text parsing of the generated CUDA (kernels, WGMMA calls and their descriptors)
- ``compile``: ``tilelang.compile`` and TileLang's caches (memory advisory, disk cache entries)
- ``passes``: the "why is it slow" tier (``#line`` directives, include paths, the passes one by one)
- ``capture``: the corpus's compile interception and TileLang's own lowering
- ``trace``: the traced CPU compile behind ``tilelab.trace_tiles``
- ``emulate``: a GPU kernel's IR rewritten for the CPU (``tilelab.run(kernel, device="cpu")``)
- ``timeline``: the instrumented compile behind ``tilelab.timeline``
- ``reproduce``: a failing kernel as a standalone script (``recipe``), and running a candidate of it

Functions return plain Python values or tilelab models; no TVM object escapes this package. The
rest of tilelab imports the package (``from tilelab import _tilelang``) and calls the names below;
tests that replace a name a module uses internally patch that module (``_tilelang.layout_tables``).
"""

from __future__ import annotations

from .capture import (
    CompileRequest,
    compiles_not_intercepted,
    intercept_compiles,
    target_arch,
    tilelang_lower,
)
from .compile import (
    _drop_memory_cache_advice as _drop_memory_cache_advice,
)
from .compile import (
    _quiet_memory_cache_advice as _quiet_memory_cache_advice,
)
from .compile import (
    compile_kernel,
    compiled_target_family,
    compiled_target_name,
    default_backend,
    install_kernel_cache_entry,
    kernel_cache_entry,
)
from .emulate import (
    NARROW_FLOATS,
    EmulatedKernel,
    EmulationRefused,
    atomic_add_outputs,
    compile_emulated,
    emulated_grid,
    emulation_key,
    written_tensors,
)
from .emulate import (
    RULES as EMULATION_RULES,
)
from .env import (
    has_gpu,
    known_pass_config_keys,
    local_gpu_arch,
    normalize_pass_configs,
    tilelang,
    tilelang_version,
)
from .errors import (
    _user_frame as _user_frame,
)
from .errors import (
    check_pass_configs,
    diagnosed,
    explain_error,
    tilelang_errors,
)
from .ir import (
    Lowered,
    arguments,
    kernel_launches,
    l2_windows,
    launch_dims,
    tile_ops,
    tma_descriptors,
    wgmma_instructions,
)
from .layout_tables import (
    MAX_LAYOUT_ELEMENTS,
    layouts,
)
from .layout_tables import (
    _evaluate as _evaluate,
)
from .lowering import (
    _host_printed_once as _host_printed_once,
)
from .lowering import (
    cutedsl_launcher,
    cutedsl_shares_lowering,
    limit_notes,
    lower,
    shared_lowerings,
)
from .passes import (
    LINE_DIRECTIVES_CONFIG,
    device_include_dirs,
    device_source_with_line_directives,
    is_tilelang_file,
    pass_trace,
)
from .reproduce import (
    Recipe,
    call_recipe,
    recipe,
    run_script,
    script_header,
    script_tail,
    text_recipe,
    versions,
)
from .resolve import (
    KernelSource,
    kernel_fingerprint,
    kernel_ir_from_text,
    kernel_ir_to_text,
    kernel_kind,
    resolve_kernel,
    script_text,
)
from .source import (
    source_wgmma_calls,
)
from .tile_trace import (
    TRACE_ACCESS_FUNCTION,
    TRACE_ATOMIC,
    TRACE_ATOMIC_ATTR,
    TRACE_MAX_RANK,
    TRACE_READ,
    TRACE_WRITE,
    TracedKernel,
    compile_traced,
    cxx_compiler,
    traced_kernel_key,
)
from .timeline import (
    TIMELINE_BUFFER,
    TIMELINE_WORDS,
    compile_instrumented,
    cuda_postproc,
    cutedsl_threads,
    cutedsl_timeline_sources,
    kernel_file,
    record_dtype,
    region_marker,
    region_names,
    timeline_device_source,
    timeline_ops,
    with_record_buffer,
)

__all__ = [
    "EMULATION_RULES",
    "EmulatedKernel",
    "EmulationRefused",
    "NARROW_FLOATS",
    "compile_emulated",
    "emulated_grid",
    "emulation_key",
    "Recipe",
    "recipe",
    "run_script",
    "script_header",
    "script_tail",
    "call_recipe",
    "text_recipe",
    "versions",
    "atomic_add_outputs",
    "written_tensors",
    "CompileRequest",
    "compiles_not_intercepted",
    "KernelSource",
    "LINE_DIRECTIVES_CONFIG",
    "Lowered",
    "MAX_LAYOUT_ELEMENTS",
    "TIMELINE_BUFFER",
    "TIMELINE_WORDS",
    "TRACE_ACCESS_FUNCTION",
    "TRACE_ATOMIC",
    "TRACE_ATOMIC_ATTR",
    "TRACE_MAX_RANK",
    "TRACE_READ",
    "TRACE_WRITE",
    "TracedKernel",
    "arguments",
    "check_pass_configs",
    "compile_instrumented",
    "compile_kernel",
    "compile_traced",
    "compiled_target_family",
    "compiled_target_name",
    "cuda_postproc",
    "cutedsl_launcher",
    "cutedsl_threads",
    "cutedsl_timeline_sources",
    "cutedsl_shares_lowering",
    "cxx_compiler",
    "default_backend",
    "device_include_dirs",
    "device_source_with_line_directives",
    "diagnosed",
    "explain_error",
    "has_gpu",
    "install_kernel_cache_entry",
    "intercept_compiles",
    "is_tilelang_file",
    "kernel_cache_entry",
    "kernel_file",
    "kernel_fingerprint",
    "kernel_ir_from_text",
    "kernel_ir_to_text",
    "kernel_kind",
    "kernel_launches",
    "known_pass_config_keys",
    "l2_windows",
    "launch_dims",
    "layouts",
    "limit_notes",
    "local_gpu_arch",
    "lower",
    "shared_lowerings",
    "normalize_pass_configs",
    "pass_trace",
    "resolve_kernel",
    "script_text",
    "source_wgmma_calls",
    "target_arch",
    "tile_ops",
    "tilelang",
    "tilelang_errors",
    "tilelang_lower",
    "tilelang_version",
    "record_dtype",
    "region_marker",
    "region_names",
    "timeline_device_source",
    "timeline_ops",
    "tma_descriptors",
    "traced_kernel_key",
    "wgmma_instructions",
    "with_record_buffer",
]
