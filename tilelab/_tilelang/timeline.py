"""Timeline: the instrumented compile (tilelab.timeline). Everything here that reaches into
TileLang 0.1.15 for the intra-kernel timeline: the tile ops' user lines, the record-buffer
parameter, and the device-source post-processing hook (CUDA, or CuTeDSL's) around one compile.
The rewrites themselves are pure text (tilelab/instrument/rewrite/)."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from typing import Any

from .env import tilelang
from .errors import tilelang_errors
from .passes import LINE_DIRECTIVES_CONFIG, is_tilelang_file

TIMELINE_BUFFER = "tlt_buf"
TIMELINE_WORDS = "tlt_words"
_CUDA_POSTPROC = "tilelang_callback_cuda_postproc"
# The CuTeDSL backend's device codegen (``target.build.tilelang_cutedsl``) passes the CuTe DSL
# Python it generates through this global function, as the CUDA codegen does through the one above.
_CUTEDSL_POSTPROC = "tilelang_callback_cutedsl_postproc"
_POSTPROC_LOCK = threading.RLock()


def timeline_ops(prim_func: Any) -> list[dict[str, Any]]:
    """The tile ops of a prim_func in program order with their user lines (the spans TileLang's
    builder stamps on each statement): ``op``, ``buffers`` (the region operands' buffer names, in
    argument order), ``line`` and ``file``, and ``loop_line``, the line of the enclosing
    ``T.Pipelined`` loop (None outside one)."""
    tvm = tilelang().tvm
    from tilelang.ir import get_stmt_span

    visit = tvm.tirx.stmt_functor.post_order_visit
    out: list[dict[str, Any]] = []
    loops: list[tuple[Any, int | None]] = []

    def span_of(node: Any) -> tuple[str | None, int | None]:
        try:
            span = get_stmt_span(node)
        except Exception:
            return None, None
        if span is None:
            return None, None
        name = span.source_name.name if getattr(span, "source_name", None) is not None else None
        return (str(name) if name else None), (int(span.line) if span.line else None)

    def find_loops(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and "num_stages" in node.annotations:
            loops.append((node, span_of(node)[1]))

    visit(prim_func.body, find_loops)

    def contains(body: Any, stmt: Any) -> bool:
        found: list[int] = []
        visit(body, lambda n: found.append(1) if n.same_as(stmt) else None)
        return bool(found)

    def loop_line_of(stmt: Any) -> int | None:
        for loop, line in loops:
            if contains(loop.body, stmt):
                return line
        return None

    def record(node: Any) -> None:
        if not isinstance(node, tvm.tirx.Evaluate) or not isinstance(node.value, tvm.tirx.Call):
            return
        call = node.value
        name = str(getattr(call.op, "name", ""))
        if not name.startswith("tl.tileop.") or name == "tl.tileop.region":
            return
        buffers = []
        for arg in call.args:
            if isinstance(arg, tvm.tirx.Call) and str(getattr(arg.op, "name", "")) in ("tl.region", "tl.tileop.region"):
                buffers.append(str(arg.args[0].buffer.name))
        file, line = span_of(node)
        out.append({"op": name.split(".")[-1], "buffers": buffers, "line": line, "file": file,
                    "loop_line": loop_line_of(node)})

    visit(prim_func.body, record)
    return out


def record_dtype(backend: str | None) -> str:
    """The record buffer's element type: ``uint64``, but ``int64`` for the CuTeDSL backend, whose
    generated host code maps torch dtypes to CuTe types and has no ``torch.uint64`` (the records
    are below 2**63 either way)."""
    return "int64" if backend == "cutedsl" else "uint64"


def with_record_buffer(prim_func: Any, dtype: str = "uint64") -> Any:
    """``prim_func`` with one more parameter, a 1-D ``dtype`` (64-bit) buffer of symbolic length
    ``tlt_words``, bound by ``TLT_BIND(tlt_buf);`` as the first statement of the kernel's root
    block (before TileLang splits the warps, so both branches of a warp-specialised kernel see it).
    The timeline's rewrite replaces the bind with its records."""
    tir = tilelang().tvm.tirx
    words = tir.Var(TIMELINE_WORDS, "int32")
    buf = tir.decl_buffer((words,), dtype, name=TIMELINE_BUFFER)
    handle = tir.Var(TIMELINE_BUFFER + "_handle", "handle")
    bind = tir.Evaluate(tir.call_extern("handle", "TLT_BIND", buf.data))
    done = [False]

    def inject(node: Any) -> Any:
        if done[0] or not isinstance(node, tir.SBlock) or node.name_hint != "tilelang_root":
            return None
        done[0] = True
        return tir.SBlock(node.iter_vars, node.reads, node.writes, node.name_hint, tir.SeqStmt([bind, node.body]),
                          node.init, node.alloc_buffers, node.match_buffers, node.annotations)

    body = tir.stmt_functor.ir_transform(prim_func.body, None, inject, ["tirx.SBlock"])
    if not done[0]:
        raise ValueError("the kernel has no T.Kernel block (tilelang_root) to record from")
    buffer_map = dict(prim_func.buffer_map)
    buffer_map[handle] = buf
    return tir.PrimFunc(list(prim_func.params) + [handle], body, prim_func.ret_type, buffer_map, prim_func.attrs)


@contextlib.contextmanager
def cuda_postproc(rewrite: Callable[[str], str], language: str = "cuda"):
    """TileLang's device-source post-processing hook set to ``rewrite`` for the block, and put back
    as it was after (the hook is process-global: one block at a time). For the CUDA backends it is
    the public ``register_cuda_postproc`` (after codegen, before TileLang's nvcc/NVRTC compile);
    for ``cutedsl`` the CuTeDSL codegen's own hook (after it writes the kernel's CuTe DSL Python,
    before the launcher embeds it)."""
    import tvm_ffi

    name = _CUTEDSL_POSTPROC if language == "cutedsl" else _CUDA_POSTPROC
    with _POSTPROC_LOCK:
        previous = tvm_ffi.get_global_func(name, allow_missing=True)
        if language == "cutedsl":
            tvm_ffi.register_global_func(name, f=lambda code, target: rewrite(code), override=True)
        else:
            from tilelang.engine.callback import register_cuda_postproc

            register_cuda_postproc(lambda code, target: rewrite(code), override=True)
        try:
            yield
        finally:
            if previous is not None:
                tvm_ffi.register_global_func(name, f=previous, override=True)
            else:
                tvm_ffi.remove_global_func(name)


def compile_instrumented(prim_func: Any, rewrite: Callable[[str], str], *, target: Any, backend: str,
                         out_idx: list[int] | None, pass_configs: dict[str, Any] | None,
                         language: str = "cuda") -> Any:
    """Compile ``with_record_buffer(prim_func)`` with ``rewrite`` applied to its device source,
    with ``#line`` directives on (they name the user's lines) and TileLang's kernel cache off for
    this one compile (in memory and on disk), so the instrumented kernel is never cached.
    ``language``: the device source ``rewrite`` reads, "cuda" (the tvm_ffi, cython and nvrtc
    backends) or "cutedsl" (the cutedsl backend's CuTe DSL Python); a rewrite of the other
    language than the backend generates is never called."""
    tl = tilelang()
    from tilelang.env import CacheState

    func = with_record_buffer(prim_func, record_dtype(backend))
    configs = {**(pass_configs or {}), LINE_DIRECTIVES_CONFIG: True}
    was_enabled = CacheState.is_enabled()
    tl.disable_cache()
    name = str(prim_func.attrs["global_symbol"]) if prim_func.attrs and "global_symbol" in prim_func.attrs else "kernel"
    try:
        with cuda_postproc(rewrite, language), tilelang_errors(name, stage="instrumented compilation"):
            return tl.compile(func, out_idx=out_idx, target=target, execution_backend=backend, pass_configs=configs)
    finally:
        if was_enabled:
            tl.enable_cache()


def timeline_device_source(prim_func: Any, arch: str, pass_configs: dict[str, Any] | None = None,
                           backend: str = "tvm_ffi") -> str:
    """The device source TileLang generates for ``with_record_buffer(prim_func)`` with ``#line``
    directives, without compiling it (what the rewrite receives; no GPU, no nvcc). For
    ``backend="cutedsl"``: the CuTe DSL Python of the kernel (no ``#line`` there)."""
    if backend == "cutedsl":
        return cutedsl_timeline_sources(prim_func, arch, pass_configs)[0]
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import device_codegen_without_compile, lower_to_host_device_ir

    tl = tilelang()
    func = with_record_buffer(prim_func)
    configs = {**(pass_configs or {}), LINE_DIRECTIVES_CONFIG: True}
    context = create_backend_context({"kind": "cuda", "arch": arch}, None, "tvm_ffi")
    with (tilelang_errors(None, stage="lowering"), tl.transform.PassContext(opt_level=3, config=configs),
          context.target):
        _, device_mod, *_ = lower_to_host_device_ir(func, context)
        return device_codegen_without_compile(device_mod, context).inspect_source()


def cutedsl_timeline_sources(prim_func: Any, arch: str, pass_configs: dict[str, Any] | None = None,
                             rewrite: Callable[[str], str] | None = None) -> tuple[str, str]:
    """(device source, Python host module) TileLang's CuTeDSL backend generates for
    ``with_record_buffer(prim_func)``, with ``rewrite`` applied to the device source through the
    CuTeDSL codegen's hook when given (the host module then embeds the rewritten kernel). No GPU
    and no nvidia-cutlass-dsl needed: nothing is compiled."""
    from .lowering import cutedsl_launcher

    tvm = tilelang().tvm
    func = with_record_buffer(prim_func, record_dtype("cutedsl"))
    scheduled = tvm.IRModule({str(func.attrs["global_symbol"]): func})
    with contextlib.ExitStack() as stack:
        if rewrite is not None:
            stack.enter_context(cuda_postproc(rewrite, "cutedsl"))
        launcher = cutedsl_launcher(func, scheduled, arch, dict(pass_configs or {}))
    if launcher.text is None:
        raise ValueError(launcher.reason or "TileLang generated no CuTeDSL launcher")
    return dict(launcher.extra)["device.py"], launcher.text


_LAUNCH_BLOCK = re.compile(r"\.launch\(\s*grid=\[[^\]]*\],\s*block=\[(\d+), (\d+), (\d+)\]")


def cutedsl_threads(compiled_or_host: Any) -> int:
    """Threads per block of a kernel compiled for the CuTeDSL backend, as TileLang launches it (warp
    specialisation adds a producer warp group to the ``T.Kernel``'s threads): from the lowered
    device module's thread extents, or else the ``.launch(grid=..., block=[x, y, z])`` call of
    TileLang's CuTeDSL host module (``compiled_or_host`` may be that module's text)."""
    artifact = getattr(compiled_or_host, "artifact", None)
    device_mod = getattr(artifact, "device_mod", None)
    if device_mod is not None:
        for _, func in device_mod.functions.items():
            extents = func.attrs["thread_extent"] if func.attrs is not None and "thread_extent" in func.attrs else {}
            threads = [int(v) for tag, v in extents.items() if str(tag).startswith("threadIdx")]
            if threads:
                total = 1
                for t in threads:
                    total *= t
                return total
    text = compiled_or_host if isinstance(compiled_or_host, str) else compiled_or_host.get_host_source()
    m = _LAUNCH_BLOCK.search(text or "")
    if m is None:
        raise ValueError("cannot read the kernel's threads per block from TileLang's CuTeDSL launcher")
    return int(m.group(1)) * int(m.group(2)) * int(m.group(3))


def kernel_file(prim_func: Any) -> str | None:
    """The file TileLang's spans name for the kernel's own statements (a notebook cell's
    registered name, or a module's path): what ``#line`` directives say for the user's lines."""
    tvm = tilelang().tvm
    from tilelang.ir import get_stmt_span

    found: list[str] = []

    def visit(node: Any) -> None:
        if found or not isinstance(node, (tvm.tirx.For, tvm.tirx.Evaluate)):
            return
        try:
            span = get_stmt_span(node)
        except Exception:
            return
        name = getattr(span, "source_name", None) if span is not None else None
        if name is not None and name.name and not is_tilelang_file(str(name.name)):
            found.append(str(name.name))

    tvm.tirx.stmt_functor.post_order_visit(prim_func.body, visit)
    return found[0] if found else None
