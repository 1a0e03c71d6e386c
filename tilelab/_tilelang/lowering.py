"""Lowering without nvcc or a GPU: the device source, the IR and the launcher of each execution
backend from one lowering (TileLang's own wrappers, CuTeDSL's included), and the per-block limits a
kernel asks more than its target allows."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

from ..records.errors import LoweringError
from ..records.kernel import DeviceKernel, LauncherSource
from .env import tilelang
from .errors import _for_target, _lowering_error, _PassTracker, _reason, diagnosed, tilelang_errors
from .ir import Lowered, _calls, _device_funcs
from .resolve import KernelSource


class _CaptureLayouts:
    """Pass instrument keeping the module right after ``tl.LayoutInference``."""

    def __init__(self) -> None:
        self.module = None

    def build(self):
        tvm = tilelang().tvm
        outer = self

        @tvm.instrument.pass_instrument
        class Capture:
            def run_after_pass(self, mod, info):
                if info.name == "tl.LayoutInference":
                    outer.module = mod

        return Capture()


def lower(source: KernelSource, target: Any, *, out_idx: list[int] | None,
          pass_configs: dict[str, Any], backends: tuple[str, ...]) -> Lowered:
    """Lower once for the device code, IR and the launchers of ``backends`` (cutedsl once more
    only where a CuTeDSL-only lowering rule applies: :func:`cutedsl_shares_lowering`).

    ``target`` is a :class:`tilelab.targets.Target` (or an arch name, read as one). Nothing here
    compiles device code or links host code, so no nvcc, hipcc, Metal toolchain, libcuda or GPU is
    needed. Each family's launchers come from TileLang's own wrappers: the ``cython`` launcher is
    ``TLWrapper`` (``TLCUDASourceWrapper``, ``TLHIPSourceWrapper``, ``TLCPUSourceWrapper`` or
    ``TLMetalSourceWrapper`` by target kind), ``tvm_ffi`` is TVM's host C codegen.
    """
    from ..targets import parse_target

    target = parse_target(target)
    tl = tilelang()
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile
    from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs

    func = source.prim_func
    name = source.name
    lower_to_host_device_ir = _original_lower_to_host_device_ir()  # never a shared lowering: the instruments run
    capture = _CaptureLayouts()
    tracker = _PassTracker()
    # The execution backend only decides host codegen; lowering is the same for each of a family's.
    lowering_backend = "tvm_ffi" if target.family in ("cuda", "hip", "metal") else "cython"
    try:
        with tilelang_errors(name, stage="lowering" if target.family == "cuda" else f"lowering for {target.name}"):
            context = create_backend_context(target.tilelang_target(), None, lowering_backend)
            prepared = func
            if lowering_backend == "tvm_ffi":
                # Lower once, the variant tvm_ffi compiles: out_idx only stamps attributes that its
                # host ABI reads; the device code and the cython/nvrtc launchers generated from this
                # lowering are byte-identical to those of the unprepared function (a test holds it).
                prepared, _ = prepare_tvm_ffi_callee_allocated_outputs(
                    func, out_idx,
                    supports_callee_allocated_outputs=context.execution_backend.supports_callee_allocated_outputs)
            with tl.transform.PassContext(opt_level=3, config=pass_configs,
                                          instruments=[capture.build(), tracker.build()]), context.target:
                host_mod, device_mod, _, _, _ = lower_to_host_device_ir(prepared, context)
                _SHARED.offer(prepared, context, host_mod, device_mod)
                device_source = device_codegen_without_compile(device_mod, context).inspect_source()
    except LoweringError as err:
        diagnosed(err, func=func, pass_name=tracker.failing, target_family=target.family)
        raise _for_target(err, target) from err
    except Exception as err:
        raise _for_target(_lowering_error(err, name, func=func, pass_name=tracker.failing,
                                          target_family=target.family), target) from err

    with _host_printed_once(host_mod):
        return _launchers(func, target, context, backends, pass_configs, host_mod, device_mod, device_source,
                          capture.module)


class _SharedLowerings:
    """Lowerings an inspection made, offered to the compile of the same kernel in this process.

    A sweep that prunes inspects each configuration (TileLang's lowering) before compiling it,
    and the compile (``tilelang.compile``) would lower it again from the start. Inside
    :func:`shared_lowerings` an inspection leaves its split IR (host and device modules) here,
    and the compile's lowering step (``tilelang.engine.lower.lower_to_host_device_ir``, which
    :func:`shared_lowerings` wraps) takes it instead of running the pipeline: the same function
    (structurally equal), for the same target, under the same pass configs and opt level (those
    of the compile's ``PassContext``), so the same lowering, deterministic. Each entry is taken
    once; at most ``LIMIT`` wait (the oldest go first); all go when the last block ends.
    """

    LIMIT = 256

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.entries: dict[tuple, tuple[Any, Any, Any]] = {}  # key -> (function, host module, device module)
        self.original: Any = None  # TileLang's own lower_to_host_device_ir, once wrapped

    @staticmethod
    def key(func: Any, context: Any) -> tuple:
        tvm = tilelang().tvm
        current = tvm.transform.PassContext.current()
        configs = sorted((str(k), str(v)) for k, v in dict(current.config).items())
        return (int(tvm.ir.structural_hash(func)), str(context.target), str(context.target_host),
                int(current.opt_level), tuple(configs))

    def offer(self, func: Any, context: Any, host_mod: Any, device_mod: Any) -> None:
        if not self.depth:
            return
        key = self.key(func, context)
        with self.lock:
            if not self.depth:
                return
            self.entries.pop(key, None)
            self.entries[key] = (func, host_mod, device_mod)
            while len(self.entries) > self.LIMIT:
                del self.entries[next(iter(self.entries))]

    def take(self, func: Any, context: Any) -> tuple[Any, Any] | None:
        if not self.depth or not self.entries:
            return None
        key = self.key(func, context)
        with self.lock:
            entry = self.entries.pop(key, None)
        if entry is None or not tilelang().tvm.ir.structural_equal(entry[0], func):
            return None
        return entry[1], entry[2]


_SHARED = _SharedLowerings()


def _original_lower_to_host_device_ir() -> Any:
    """TileLang's own ``lower_to_host_device_ir`` (not :func:`shared_lowerings`' wrapper)."""
    return _SHARED.original or _engine_lower().lower_to_host_device_ir


def _engine_lower() -> Any:
    """The module ``tilelang.engine.lower`` (``tilelang.engine.lower`` as an attribute is its
    function ``lower``, which shadows the module)."""
    import importlib

    tilelang()
    return importlib.import_module("tilelang.engine.lower")


def _install_shared_lowering() -> None:
    engine = _engine_lower()
    with _SHARED.lock:
        if _SHARED.original is not None:
            return
        original = engine.lower_to_host_device_ir
        prim_func = tilelang().tvm.tirx.PrimFunc

        def lower_to_host_device_ir(func_or_mod: Any, context: Any, runtime_only: bool = False) -> Any:
            if _SHARED.depth and isinstance(func_or_mod, prim_func):
                shared = _SHARED.take(func_or_mod, context)
                if shared is not None:
                    params = None if runtime_only else engine.extrac_params(func_or_mod)
                    return shared[0], shared[1], params, context.target, context.target_host
            return original(func_or_mod, context, runtime_only=runtime_only)

        _SHARED.original = original
        engine.lower_to_host_device_ir = lower_to_host_device_ir


@contextlib.contextmanager
def shared_lowerings():
    """Within this block (in any thread of this process), a kernel inspected and then compiled is
    lowered once: the compile takes the inspection's lowering (see :class:`_SharedLowerings`)."""
    _install_shared_lowering()
    with _SHARED.lock:
        _SHARED.depth += 1
    try:
        yield
    finally:
        with _SHARED.lock:
            _SHARED.depth -= 1
            if not _SHARED.depth:
                _SHARED.entries.clear()


_PRINT_ONCE_LOCK = threading.RLock()


@contextlib.contextmanager
def _host_printed_once(host_mod: Any):
    """Print each host function of ``host_mod`` at most once while the launchers are generated.

    Each of TileLang's source wrappers (cython, nvrtc, cutedsl) prints the whole host function
    to find the kernels' call order (``TLCUDASourceWrapper.parse_source_information``:
    ``str(func)``); for a kernel with fifty buffers that is 150 KB of TVMScript and about 22 ms a
    time. Within this block the text printed first is answered again, for those functions only
    (TVM IR is immutable, and the functions are held so their handles are not reused).
    """
    prim_func = tilelang().tvm.tirx.PrimFunc
    held = list(host_mod.functions.values())
    printed: dict[int, str] = {}
    mine = {f.__chandle__() for f in held}
    # One block at a time, process-wide: two threads' blocks that did not end in reverse order
    # would leave a stale __str__ installed (the class attribute is shared).
    with _PRINT_ONCE_LOCK:
        had = "__str__" in prim_func.__dict__
        previous = prim_func.__dict__.get("__str__")

        def __str__(self: Any) -> str:
            handle = self.__chandle__()
            if handle not in mine:
                return previous(self) if previous is not None else repr(self)
            if handle not in printed:
                printed[handle] = previous(self) if previous is not None else repr(self)
            return printed[handle]

        prim_func.__str__ = __str__
        try:
            yield
        finally:
            if had:
                prim_func.__str__ = previous
            else:
                del prim_func.__str__
            del held


def _launchers(func: Any, target: Any, context: Any, backends: tuple[str, ...], pass_configs: dict[str, Any],
               host_mod: Any, device_mod: Any, device_source: str, layouts_module: Any) -> Lowered:
    """Every launcher of ``backends`` from one lowering (see :func:`lower`)."""
    tl = tilelang()
    tvm = tl.tvm
    from tilelang.engine.lower import host_codegen

    launchers: dict[str, LauncherSource] = {}
    decided: set[str] = set()  # absences that are TileLang's design, not a passing failure
    scheduled = tvm.IRModule({str(func.attrs["global_symbol"]): func})
    not_for_target = {b: f"TileLang has no {b} launcher for {target.name} ({target.family}); its launchers there: "
                      + ", ".join(target.backends) for b in backends if b not in target.backends}
    launchers.update({b: LauncherSource(b, None, why) for b, why in not_for_target.items()})
    backends = tuple(b for b in backends if b not in not_for_target)
    refused = {b: why for b in backends if (why := _backend_refuses(b, context))}
    launchers.update({b: LauncherSource(b, None, why) for b, why in refused.items()})
    backends = tuple(b for b in backends if b not in refused)

    if "tvm_ffi" in backends and target.family == "cpu":
        # TileLang 0.1.15's tvm_ffi backend refuses C-target kernels ("Device codegen 'c' for target
        # 'c' does not support lowering with compilation") and its host codegen fails on them; the
        # attempt costs most of an inspection, so the known answer is given without it.
        decided.add("tvm_ffi")
        launchers["tvm_ffi"] = LauncherSource("tvm_ffi", None, (
            "TileLang 0.1.15's tvm_ffi backend cannot build C-target kernels (tilelang.compile refuses them); "
            "the cython launcher runs them"))
        backends = tuple(b for b in backends if b != "tvm_ffi")

    if "tvm_ffi" in backends:
        try:
            with tl.transform.PassContext(opt_level=3, config=pass_configs), context.target:
                text = host_codegen(host_mod, context).inspect_source()
            launchers["tvm_ffi"] = LauncherSource("tvm_ffi", str(text), language="c")
        except Exception as err:
            launchers["tvm_ffi"] = LauncherSource("tvm_ffi", None, _reason(err))

    if "cython" in backends:
        try:
            from tilelang.jit.adapter.wrapper import TLWrapper

            wrapper = TLWrapper(context.target)
            wrapper.assign_optimized_module(scheduled)
            wrapper.assign_pass_configs(pass_configs)
            wrapper.assign_host_module(host_mod)
            wrapper.assign_device_module(device_mod)
            wrapped = str(wrapper.wrap(device_source))
            # TLHIP/TLCPU/TLMetal wrappers return the device source followed by the host code.
            host_follows = wrapped.startswith(device_source) and target.family != "cuda"
            text = wrapped[len(device_source):].lstrip("\n") if host_follows else wrapped
            language = {"cuda": "c++", "hip": "c++", "cpu": "c"}.get(target.family, "c++")
            if text.strip():
                launchers["cython"] = LauncherSource("cython", text, language=language)
            else:
                decided.add("cython")
                launchers["cython"] = LauncherSource("cython", None, (
                    f"TileLang's {target.family} source wrapper adds no host code: its output is the device "
                    "source unchanged (TLMetalSourceWrapper), so there is no launcher to show"))
        except Exception as err:
            launchers["cython"] = LauncherSource("cython", None, _reason(err))

    if "torch" in backends:  # Metal: tilelang/jit/adapter/torch/metal.py, no generated host code
        decided.add("torch")
        launchers["torch"] = LauncherSource("torch", None, (
            "TileLang's torch backend generates no host code for Metal: it compiles the device source with "
            "torch.mps.compile_shader and launches each kernel with threads = grid x threadgroup size and "
            "group_size = threadgroup size (see the launch configuration)"))

    if "nvrtc" in backends:
        try:
            from tilelang.jit.adapter.nvrtc.wrapper import TLNVRTCSourceWrapper

            text = TLNVRTCSourceWrapper(
                scheduled_ir_module=scheduled, source=device_source, target=context.target,
                device_mod=device_mod, host_mod=host_mod, pass_configs=pass_configs,
            ).host_func
            launchers["nvrtc"] = LauncherSource("nvrtc", str(text), language="python")
        except Exception as err:
            launchers["nvrtc"] = LauncherSource("nvrtc", None, _reason(err))

    if "cutedsl" in backends:
        # The cutedsl lowering is the CUDA one unless a CuTeDSL-only rule applies (see
        # cutedsl_shares_lowering): then only its device codegen runs, not the whole pipeline again.
        shares = cutedsl_shares_lowering(host_mod, device_mod, target.name, pass_configs)
        shared = (host_mod, device_mod) if shares else None
        launchers["cutedsl"] = cutedsl_launcher(func, scheduled, target.name, pass_configs, lowered=shared)

    # Every absence not decided above came from an exception while generating the text.
    transient = tuple(b for b in backends if b in launchers and launchers[b].text is None and b not in decided)
    limits = {key: int(context.target.attrs[key]) for key in ("max_shared_memory_per_block", "max_threads_per_block")
              if key in context.target.attrs and target.family != "cuda"}
    return Lowered(device_source, host_mod, device_mod, layouts_module, launchers, func, transient, target.family,
                   limits)


def limit_notes(lowered: Lowered, kernels: list[DeviceKernel], target: Any) -> list[str]:
    """Kernels that ask for more than the per-block limits of the target: those TileLang's target
    declares, or for a CUDA arch the published ones (tilelab.cuda_facts: the opt-in maximum of
    dynamic shared memory per block, threads per block)."""
    from ..cuda_facts import arch_limits

    notes = []
    smem = lowered.limits.get("max_shared_memory_per_block")
    threads = lowered.limits.get("max_threads_per_block")
    whose = f"TileLang's {target.name} target allows"
    if target.family == "cuda" and target.arch and not smem:
        try:
            facts = arch_limits(target.arch)
        except ValueError:  # an arch without published limits in tilelab: nothing to compare with
            facts = None
        if facts is not None:
            smem, threads = facts.max_shared_memory_per_block, threads or facts.max_threads_per_block
            whose = f"{target.arch} allows"
    for k in kernels:
        if smem and isinstance(k.dynamic_shared_memory_bytes, int) and k.dynamic_shared_memory_bytes > smem:
            notes.append(f"{k.name} asks for {k.dynamic_shared_memory_bytes} B of {target.shared_memory_name}; "
                         f"{whose} {smem} B per block: a launch would fail. "
                         "Use smaller tiles or fewer pipeline stages")
        if threads and isinstance(k.threads_per_block, int) and k.threads_per_block > threads:
            notes.append(f"{k.name} runs {k.threads_per_block} threads per block; {whose} {threads}: a launch "
                         "would fail")
    return notes


def _backend_refuses(backend: str, context: Any) -> str | None:
    """TileLang's own decision that an execution backend cannot target ``context.target`` (its
    ``ExecutionBackendSpec.supports_target``), as a reason; None where it can, or cannot tell."""
    target = context.target
    try:
        from tilelang.backend.module import get_backend

        module = get_backend("cutedsl" if backend == "cutedsl" else context.module.name)
        spec = next(s for s in module.execution_backends if s.name == backend)
        if spec.matches(target):
            return None
    except Exception:
        return None  # no decision: try to generate, and a failure then counts as transient
    return f"TileLang's {backend} backend does not support target {target.attrs.get('arch', target)}"


# TileLang 0.1.15's lowering rules that differ for a CuTeDSL target (its C++ checks of
# TargetIsCuTeDSL): 1D bulk copies (cp.async.bulk without a tensor map) are never chosen
# (cuda/op/copy_analysis.cc), st.bulk zero-fills of shared memory are not used on sm_100+
# (cuda/op/fill.cc), and tl.LowerLDGSTG is skipped (cuda/transform/lower_ldg_stg.cc, off unless
# these pass configs turn it on). Everything else lowers alike, target keys aside.
_LDG_STG_CONFIGS = ("tl.enable_lower_ldgstg", "tl.enable_lower_ldgstg_predicated")
_TMA_COPY_OPS = ("tl.tma_load", "tl.tma_store", "tl.tma_load_im2col")


def cutedsl_shares_lowering(host_mod: Any, device_mod: Any, arch: str, pass_configs: dict[str, Any]) -> bool:
    """Whether TileLang's cutedsl lowering of a kernel equals its CUDA lowering (``host_mod``,
    ``device_mod``): no rule that differs for CuTeDSL applied. A copy the CUDA lowering made a 1D
    bulk copy is a TMA call whose first argument is an address, not one of the host's tensor-map
    descriptors; on sm_100+ or with LDG/STG lowering on, the answer is no without looking further."""
    tvm = tilelang().tvm
    digits = re.match(r"sm_(\d+)", arch)
    if digits is None or int(digits.group(1)) >= 100:
        return False
    if any(pass_configs.get(key) for key in _LDG_STG_CONFIGS):
        return False
    descriptors: set[str] = set()
    for _, host in host_mod.functions.items():
        if host.attrs is not None and "tma_descriptor_args" in host.attrs:
            descriptors |= {var.name for var in host.attrs["tma_descriptor_args"]}
    for _, func in _device_funcs(device_mod):
        for call in _calls(func, set(_TMA_COPY_OPS)):
            first = call.args[0] if len(call.args) else None
            if not isinstance(first, tvm.tirx.Var) or first.name not in descriptors:
                return False
    return True


def cutedsl_launcher(func: Any, scheduled: Any, arch: str, pass_configs: dict[str, Any], *,
                     lowered: tuple[Any, Any] | None = None) -> LauncherSource:
    """The CuTeDSL backend's Python host and C++ launcher, generated without CuTeDSL installed.

    ``create_backend_context`` refuses the cutedsl target when nvidia-cutlass-dsl is missing, so
    the context is assembled from the registered backend module directly. ``lowered`` (host and
    device modules of the CUDA lowering, where :func:`cutedsl_shares_lowering` says they are the
    cutedsl one) skips TileLang's lowering pipeline and runs only the CuTeDSL device codegen;
    without it, TileLang lowers ``func`` for the cutedsl target from the start.
    """
    tl = tilelang()
    tvm = tl.tvm
    try:
        from tilelang.backend.module import BackendContext, get_backend
        from tilelang.engine.lower import device_codegen_without_compile, lower_with_context
        from tilelang.jit.adapter.cutedsl.wrapper import TLCuTeDSLSourceWrapper

        module = get_backend("cutedsl")
        spec = next(s for s in module.execution_backends if s.name == "cutedsl")
        host = tvm.target.Target("c")
        target = tvm.target.Target({"kind": "cuda", "arch": arch, "keys": ["cuda", "gpu", "cutedsl"]}, host)
        context = BackendContext(module=module, target=target, target_host=host, execution_backend=spec)
        with tl.transform.PassContext(opt_level=3, config=pass_configs), context.target:
            if lowered is None:
                art = lower_with_context(func, context, enable_device_compile=False)
                host_mod, device_mod, kernel_source = art.host_mod, art.device_mod, art.kernel_source
            else:
                host_mod, device_mod = lowered
                kernel_source = device_codegen_without_compile(device_mod, context).inspect_source()
        wrapper = TLCuTeDSLSourceWrapper(
            scheduled_ir_module=scheduled, source=kernel_source, target=context.target,
            device_mod=device_mod, host_mod=host_mod, pass_configs=pass_configs,
        )
        host_func = str(wrapper.host_func)
        extra = []
        if getattr(wrapper, "launcher_cpp_code", None):
            extra.append(("launcher.cpp", str(wrapper.launcher_cpp_code)))
        extra.append(("device.py", str(kernel_source)))
        return LauncherSource("cutedsl", host_func, language="python", extra=tuple(extra))
    except Exception as err:
        return LauncherSource("cutedsl", None, f"CuTeDSL launcher cannot be generated for {arch}: {_reason(err)}")
