"""TileLang's failures in tilelab's words: the context that turns an exception raised inside
TileLang into a LoweringError naming the kernel line, the sentence that explains TVM's message,
tilelab's diagnosis (``tilelab._tilelang.doctor``), the pass that failed, what a target cannot lower, and
the check of pass configs before TVM fails on them inside lowering."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import traceback
from typing import Any

from ..records.errors import LoweringError, PassConfigError
from .env import tilelang, tilelang_version

_CONFIG_TYPES = {"ir.IntImm": "an integer or a bool (e.g. True)", "ir.FloatImm": "a number (e.g. 0.5)",
                 "str": "a string", "ffi.String": "a string", "ffi.Array": "a list (e.g. [\"-O3\"])"}


def check_pass_configs(pass_configs: dict[str, Any], where: str = "pass config") -> None:
    """Refuse, naming the key, a pass config TileLang does not register or a value of a type it
    does not take (TVM itself fails later, inside lowering, with a message about the kernel)."""
    import difflib

    if not pass_configs:
        return
    tl = tilelang()
    registered = tl.tvm.ir.transform.PassContext.list_configs()
    known = sorted(str(k) for k in registered)
    for key, value in pass_configs.items():
        if not isinstance(key, str) or key not in registered:
            near = difflib.get_close_matches(str(key), known, n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(near)}?" if near else ""
            raise PassConfigError(
                f"{where} {key!r} is not a pass config TileLang {tilelang_version()} knows.{hint} "
                f"Valid keys: {', '.join(k for k in known if k.startswith('tl.'))} (and TVM's tirx.* keys)")
        try:
            tl.transform.PassContext(opt_level=3, config={key: value})
        except Exception as err:
            wanted = str(registered[key].get("type", "")) if hasattr(registered[key], "get") else ""
            expected = _CONFIG_TYPES.get(wanted, wanted or "another type")
            summary, _ = explain_error(err)
            raise PassConfigError(
                f"{where} {key}={value!r} is refused by TileLang: it takes {expected}, not "
                f"{type(value).__name__} ({summary}). Change the value of {key}") from err


def _builder_line(err: BaseException) -> tuple[str, int, str] | None:
    """The kernel line TileLang's eager builder was elaborating when ``err`` was raised.

    The builder's generated closure keeps the builder in a local named ``__tb`` and records the
    user's file and line before each statement (``__tb.set_fileline``).
    """
    import linecache

    found = None
    tb = err.__traceback__
    while tb is not None:
        builder = tb.tb_frame.f_locals.get("__tb")
        if builder is not None and getattr(builder, "current_line", None):
            found = (str(builder.current_file), int(builder.current_line))
        tb = tb.tb_next
    if found is None:
        return None
    return found[0], found[1], linecache.getline(found[0], found[1]).rstrip("\n")


def _from_tilelang(err: BaseException) -> bool:
    tb = err.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/tilelang/" in filename or "/tvm/" in filename or "tvm_ffi" in filename:
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def tilelang_errors(kernel: str | None = None, stage: str = "elaboration"):
    """Run user code that builds or lowers a kernel: TileLang's log records are kept out of the
    user's stderr (folded into the error's trace), and a failure raised inside TileLang becomes
    a LoweringError that names the kernel line. Other errors pass through unchanged.
    """
    import io
    import logging

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger("tilelang")
    saved = [(h, h.level) for h in logger.handlers]
    for h, _ in saved:
        h.setLevel(logging.CRITICAL + 10)
    logger.addHandler(handler)
    try:
        yield buffer
    except LoweringError:
        raise
    except Exception as err:
        if not _from_tilelang(err):
            raise
        error = _lowering_error(err, kernel, stage)
        error.trace = buffer.getvalue() + error.trace
        raise error from err
    finally:
        logger.removeHandler(handler)
        for h, level in saved:
            h.setLevel(level)


# TVM appends to a message a pointer into the user's source and an excerpt of it:
#   --> /path/kernel.py:17:1
#      |
#   17 |     l_i = T.alloc_fragment((block_m,), "float32")
#      |     ^
_SOURCE_POINTER = re.compile(r"^\s*-->\s*(.+?):(\d+)(?::\d+)?\s*$")
_SNIPPET_LINE = re.compile(r"^\s*(\d+\s*)?\|")
_SUMMARY_LIMIT = 800


def explain_error(err: BaseException) -> tuple[str, tuple[str, int, str] | None]:
    """The sentence that explains ``err`` and the user's source line TVM points at, if any.

    The sentence is the message without TVM's source excerpt: for a failed check, from
    "Check failed:" on (the condition, its operands and the reason); otherwise the whole message,
    its lines joined, so that a detail on a line of its own (a shape such as "(32, 16)") stays
    with the sentence it belongs to.
    """
    import linecache

    lines = str(err).strip().splitlines()
    body: list[str] = []
    pointer = None
    for line in lines:
        match = _SOURCE_POINTER.match(line)
        if match:
            filename, lineno = match.group(1), int(match.group(2))
            pointer = (filename, lineno, linecache.getline(filename, lineno).rstrip("\n"))
            break
        if _SNIPPET_LINE.match(line):
            continue
        body.append(line.strip())
    body = [line for line in body if line]
    # Older TVM messages carry a C++ backtrace before the sentence; keep what follows it.
    for index in range(len(body) - 1, -1, -1):
        if re.match(r"^\w*(Error|Exception):\s", body[index]) and index > 0:
            body = body[index:]
            break
    check = next((i for i, line in enumerate(body) if "Check failed" in line), None)
    if check is not None:
        body = body[check:]
        body[0] = body[0][body[0].index("Check failed"):]
    summary = " ".join(body) or type(err).__name__
    summary = re.sub(r"^\w*(Error|Exception):\s*", "", summary)
    if len(summary) > _SUMMARY_LIMIT:
        summary = summary[:_SUMMARY_LIMIT].rstrip() + " ..."
    return summary, pointer


def _is_user_file(filename: str) -> bool:
    """Whether a traceback frame's file is the user's own Python code: not TileLang, TVM, tilelab,
    an installed package, the standard library, or a C++/Cython frame TVM's FFI adds."""
    import sysconfig

    if "site-packages" in filename or "/tilelang/" in filename or "/tvm/" in filename or "/tilelab/" in filename:
        return False
    if filename.startswith("<unknown") or filename.endswith((".cc", ".h", ".cpp", ".pxi", ".pyx")):
        return False
    stdlib = sysconfig.get_paths().get("stdlib")
    return not (stdlib and filename.startswith(stdlib))


def _user_frame(tb: Any) -> tuple[str, int, str] | None:
    """The innermost traceback frame in the user's own Python code."""
    for frame in reversed(traceback.extract_tb(tb)):
        if _is_user_file(frame.filename or ""):
            return (frame.filename, frame.lineno or 0, frame.line or "")
    return None


def _raised_in_user_code(err: BaseException) -> bool:
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and _is_user_file(frames[-1].filename or "")


def _lowering_error(err: BaseException, kernel: str | None, stage: str = "lowering", *, func: Any = None,
                    pass_name: str | None = None, target_family: str | None = None,
                    target_name: str | None = None) -> LoweringError:
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    summary, pointer = explain_error(err)
    kernel_line = _builder_line(err) or pointer or _user_frame(err.__traceback__)
    if isinstance(err, NameError):  # the kernel's Python names something undefined: not TileLang's failure
        error = LoweringError(
            f"Python {type(err).__name__} in the kernel's code: {err}",
            kernel=kernel, kernel_line=kernel_line, trace=trace, python_error=(type(err).__name__, str(err)),
        )
        return diagnosed(error, func=func, pass_name=pass_name or "elaboration", target_family=target_family,
                         target_name=target_name, origin=err)
    error = LoweringError(
        f"TileLang {stage} failed: {summary}",
        kernel=kernel, kernel_line=kernel_line, trace=trace,
    )
    return diagnosed(error, func=func, pass_name=pass_name or ("elaboration" if stage == "elaboration" else None),
                     target_family=target_family, target_name=target_name, origin=err)


def diagnosed(error: LoweringError, *, func: Any = None, pass_name: str | None = None,
              target_family: str | None = None, target_name: str | None = None,
              origin: BaseException | None = None) -> LoweringError:
    """Give ``error`` tilelab's diagnosis (:func:`tilelab._tilelang.doctor.diagnose`), with what the kernel
    ``func`` tells (its buffers' names, its source lines to place a tile op TileLang named no line
    for) and the ``pass_name`` a pass instrument saw fail. Keeps what an earlier diagnosis knew."""
    from . import doctor as _doctor

    previous = error.diagnosis
    buffers: tuple[str, ...] = tuple(getattr(previous, "buffers", ()) or ())
    source_file = ""
    source_lines: list[tuple[int, str]] = []
    if func is not None:
        names, source_file, source_lines = _kernel_context(func)
        buffers = tuple(names) or buffers
    message = error.summary.split(" failed: ", 1)[-1]
    if error.kernel_line is not None and error.kernel_line[0] == "<string>":
        error.kernel_line = None  # a pointer into code TileLang generated and exec'd, not a line of the kernel
    sites = _tile_sites(func) if func is not None else ()
    threads = _kernel_threads(func) if func is not None else None
    origin = origin or error.__cause__
    if func is None and origin is not None:
        # failed while TileLang's builder ran the kernel's Python: the tile op it was in and its buffers
        user_line = _user_frame(origin.__traceback__)
        if user_line is not None and (error.kernel_line is None or "/tilelang/" in error.kernel_line[0]):
            error.kernel_line = user_line
        built = _building_site(origin, error.kernel_line)
        sites = (built,) if built is not None else sites
        if built is not None:
            error._doctor_context = (buffers, source_file, source_lines, sites, threads,  # type: ignore[attr-defined]
                                     target_name)
    # what the kernel told an earlier diagnosis of this error (a second one has no kernel at hand)
    context = getattr(error, "_doctor_context", None)
    if func is None and context is not None:
        buffers, source_file, source_lines, sites, threads, target_name = (
            buffers or context[0], context[1], context[2], context[3], context[4], target_name or context[5])
    elif func is not None:
        error._doctor_context = (buffers, source_file, source_lines, sites, threads,  # type: ignore[attr-defined]
                                 target_name)
    try:
        diagnosis = _doctor.diagnose(
            message, error.trace,
            pass_name=pass_name or getattr(previous, "pass_name", None) or _guarded_pass(error.trace),
            target_family=target_family, buffers=buffers, line=error.kernel_line, source_lines=source_lines,
            sites=sites, target=target_name, threads=threads)
    except Exception:  # the diagnosis never hides the failure it explains
        return error
    if diagnosis.line is not None and source_file and \
            (error.kernel_line is None or diagnosis.line != error.kernel_line):
        error.kernel_line = (source_file, diagnosis.line[1], diagnosis.line[2])
        diagnosis = dataclasses.replace(diagnosis, line=error.kernel_line)
    error.diagnosis = diagnosis
    return error


_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\w+)$', re.M)
_PASS_CALL = re.compile(r"\btilelang(?:\.\w+)*\.transform\.(\w+)\(")


def _guarded_pass(trace: str) -> str | None:
    """The pass a check in TileLang's pass pipeline guards, when the failure was raised by that check
    between two passes (no pass was running): the innermost frame is a ``raise`` in a pipeline
    function of TileLang, and the pass is the first one the pipeline calls after it
    (``tl.LowerSharedBarrier`` after the check that a target has mbarriers). None otherwise."""
    import linecache

    frames = _FRAME.findall(trace)
    if not frames:
        return None
    filename, line, function = frames[-1]
    if "/tilelang/" not in filename or "Pipeline" not in function:
        return None
    number = int(line)
    if not linecache.getline(filename, number).lstrip().startswith("raise"):
        return None
    for offset in range(1, 40):
        text = linecache.getline(filename, number + offset)
        if not text or re.match(r"(def|class)\s", text):
            return None
        found = _PASS_CALL.search(text)
        if found and not text.lstrip().startswith("#"):
            return f"tl.{found.group(1)}"
    return None


def _kernel_context(func: Any) -> tuple[list[str], str, list[tuple[int, str]]]:
    """A prim_func's buffer names (arguments, then allocations), its source file and its
    numbered source lines (from the def line to the end of its body), where the builder kept them."""
    import linecache

    names: list[str] = []
    try:
        names = [b.name for b in func.buffer_map.values()]
        tvm = tilelang().tvm

        def visit(node: Any) -> None:
            if isinstance(node, tvm.tirx.SBlock):
                names.extend(b.name for b in node.alloc_buffers)

        tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    except Exception:  # a kernel the helpers cannot walk: the names found so far
        pass
    filename, lines = "", []
    try:
        span = func.span
        filename = str(span.source_name.name) if span is not None else ""
        start = int(span.line) if span is not None else 0
    except Exception:
        filename, start = "", 0
    if filename and start > 0:
        first = linecache.getline(filename, start)
        indent = len(first) - len(first.lstrip())
        number = start
        while True:
            text = linecache.getline(filename, number)
            if not text or (number > start and text.strip() and len(text) - len(text.lstrip()) <= indent
                            and not text.lstrip().startswith((")", "]"))):  # a signature's closing line goes on
                break
            lines.append((number, text.rstrip("\n")))
            number += 1
    return names, filename, lines


def _tile_sites(func: Any) -> tuple[Any, ...]:
    """The kernel's tile operations in program order, for the doctor to place a failure on a line:
    each ``T.*`` call (and any other intrinsic call statement), ``T.Parallel`` and ``T.Pipelined``
    loop, with the source line TileLang's builder stamped on it and the buffers it touches
    (name, dtype, scope, shape); () where the kernel cannot be walked. An operation a library
    macro emitted (its line is in the library's file) is placed on the kernel's line that calls
    it: the call naming the operation between the kernel statements before and after it."""
    import linecache

    from . import doctor as _doctor

    try:
        tvm = tilelang().tvm
        from tilelang.ir import get_stmt_span
    except Exception:
        return ()

    def buffers_in(node: Any) -> tuple[tuple[str, str, str, str], ...]:
        found: dict[str, tuple[str, str, str, str]] = {}

        def visit(n: Any) -> None:
            buffer = getattr(n, "buffer", None) if isinstance(n, (tvm.tirx.BufferLoad, tvm.tirx.BufferStore)) else None
            if buffer is not None and buffer.name not in found:
                found[buffer.name] = (buffer.name, str(buffer.dtype), str(buffer.scope()),
                                      "(" + ", ".join(str(x) for x in buffer.shape) + ")")

        tvm.tirx.stmt_functor.post_order_visit(node, visit)
        return tuple(found.values())

    try:
        kernel_file = str(func.span.source_name.name) if func.span is not None else ""
    except Exception:
        kernel_file = ""
    spans: list[tuple[str, int]] = []  # every statement's (file, line), in program order
    found: list[tuple[int, str, str, int, Any]] = []  # (index in spans, op, file, line, node)

    def visit(node: Any) -> bool:
        if not isinstance(node, tvm.tirx.Stmt):
            return True
        span = get_stmt_span(node)
        if span is None or not int(span.line):
            return True
        spans.append((str(span.source_name.name), int(span.line)))
        op = None
        if isinstance(node, tvm.tirx.Evaluate) and isinstance(node.value, tvm.tirx.Call):
            name = str(getattr(node.value.op, "name", ""))
            op = "T." + name.split(".", 2)[2] if name.startswith("tl.tileop.") else name or None
        elif isinstance(node, tvm.tirx.For):
            if "num_stages" in node.annotations:
                op = "T.Pipelined"
            elif int(node.kind) == int(tvm.tirx.ForKind.PARALLEL):
                op = "T.Parallel"
        elif isinstance(node, tvm.tirx.BufferStore):
            # an element expression calling an IEEE intrinsic (T.ieee_frsqrt): code generation refuses
            # some of them for some dtypes, and the store is the line that called it
            calls: list[str] = []
            tvm.tirx.stmt_functor.post_order_visit(node.value, lambda n: calls.append(
                str(getattr(n.op, "name", ""))) if isinstance(n, tvm.tirx.Call) else None)
            op = next((name for name in calls if ".ieee_" in name), None)
        if op is not None:
            found.append((len(spans) - 1, op, spans[-1][0], spans[-1][1], node))
        return True

    try:
        tvm.tirx.stmt_functor.pre_order_visit(func.body, visit)
        sites = []
        for index, op, filename, line, node in found:
            if kernel_file and filename != kernel_file:
                filename, line = kernel_file, _calling_line(op, kernel_file, spans, index)
                if not line:
                    continue
            body = node.value if isinstance(node, tvm.tirx.Evaluate) else \
                node if isinstance(node, tvm.tirx.BufferStore) else node.body
            extra = _loop_facts(tvm, node) if isinstance(node, tvm.tirx.For) else \
                _gemm_facts(node.value) if isinstance(node, tvm.tirx.Evaluate) and re.fullmatch(
                    r"T\.(\w+_)?gemm", op) else \
                _call_facts(tvm, node.value) if isinstance(node, tvm.tirx.Evaluate) else {}
            sites.append(_doctor.TileSite(op, line, filename, buffers_in(body),
                                          linecache.getline(filename, line).rstrip("\n"), **extra))
    except Exception:  # a kernel the helpers cannot walk: no sites
        return ()
    return tuple(sites)


def _expr_text(expr: Any) -> str:
    """A TIR index expression as Python text (``i * 4 + j // 2``): TVMScript's form, which is Python's
    for the integer arithmetic of indices."""
    return str(expr).replace("T.FloorDiv", "").replace("T.FloorMod", "")


def _loop_facts(tvm: Any, loop: Any) -> dict[str, Any]:
    """A loop's variables and extents (a nest of T.Parallel loops as one), its body's buffer
    accesses and its annotations (for T.Pipelined, with the number of statements of its body)."""
    loop_vars: list[tuple[str, int]] = []
    node = loop
    parallel = int(loop.kind) == int(tvm.tirx.ForKind.PARALLEL)
    while isinstance(node, tvm.tirx.For):
        try:
            extent = int(node.extent)
        except Exception:
            extent = -1
        loop_vars.append((str(node.loop_var.name), extent))
        if not parallel or not isinstance(node.body, tvm.tirx.For) or int(node.body.kind) != int(loop.kind):
            break
        node = node.body
    accesses: list[tuple[str, str, bool]] = []
    if parallel:
        def visit(n: Any) -> None:
            if isinstance(n, (tvm.tirx.BufferStore, tvm.tirx.BufferLoad)):
                item = (str(n.buffer.name), ", ".join(_expr_text(i) for i in n.indices),
                        isinstance(n, tvm.tirx.BufferStore))
                if item not in accesses:
                    accesses.append(item)

        tvm.tirx.stmt_functor.post_order_visit(loop.body, visit)
    annotations = [(str(k), str(v)) for k, v in loop.annotations.items()]
    if not parallel:
        body = loop.body
        while isinstance(body, (tvm.tirx.SBlockRealize,)):
            body = body.block.body
        count = len(body.seq) if isinstance(body, tvm.tirx.SeqStmt) else 1
        annotations.append(("statements", str(count)))
    return {"loop_vars": tuple(loop_vars), "accesses": tuple(accesses), "annotations": tuple(annotations)}


# TileLang 0.1.15's tile-op call tl.tileop.gemm(A, B, C, trans_A, trans_B, M, N, K, policy, ...); the
# policy's numbers are its GemmWarpPolicyType (src/op/gemm.h)
_GEMM_ARGS = ("transpose_A", "transpose_B", "M", "N", "K", "policy")
_GEMM_POLICIES = {0: "Square", 1: "FullRow", 2: "FullCol", 3: "Free"}


def _gemm_facts(call: Any) -> dict[str, Any]:
    """A T.gemm call's transposes, M, N, K and warp policy as annotations; {} where the call's
    arguments are not these."""
    try:
        values = [int(a) for a in call.args[3:9]]
    except Exception:
        return {}
    if len(values) != len(_GEMM_ARGS):
        return {}
    notes = dict(zip(_GEMM_ARGS, (str(v) for v in values)))
    notes["transpose_A"], notes["transpose_B"] = str(bool(values[0])), str(bool(values[1]))
    notes["policy"] = _GEMM_POLICIES.get(values[5], str(values[5]))
    return {"annotations": tuple(notes.items())}


def _call_facts(tvm: Any, call: Any) -> dict[str, Any]:
    """The intrinsics a tile operation's arguments call (T.fill(m, -T.infinity(dtype)) calls
    tir.infinity), as the annotation ``calls``; {} where they call none."""
    names: list[str] = []

    def visit(n: Any) -> None:
        name = str(getattr(getattr(n, "op", None), "name", "")) if isinstance(n, tvm.tirx.Call) else ""
        if name and not name.startswith("tl.tileop.") and name != "tl.region" and name not in names:
            names.append(name)

    for arg in getattr(call, "args", ()):
        tvm.tirx.stmt_functor.post_order_visit(arg, visit)
    return {"annotations": (("calls", ",".join(names)),)} if names else {}


def _calling_line(op: str, kernel_file: str, spans: list[tuple[str, int]], index: int) -> int:
    """The line of ``kernel_file`` that called the library macro whose statement ``spans[index]``
    is: between the kernel's statements before and after it, the call whose name is the op's
    (``.mfma(`` for ``tl.tvm_mfma``), else the first call there; 0 when there is none."""
    import linecache

    before = next((line for f, line in reversed(spans[:index]) if f == kernel_file), 0)
    after = min((line for f, line in spans[index + 1:] if f == kernel_file and line > before), default=before + 40)
    word = re.sub(r"^(tvm|ptx|tl)_", "", op.rsplit(".", 1)[-1])
    calls = [n for n in range(before + 1, after)
             if re.search(r"\w\s*\(", linecache.getline(kernel_file, n)) and not
             linecache.getline(kernel_file, n).lstrip().startswith("#")]
    named = [n for n in calls if re.search(rf"\b{re.escape(word)}\s*\(", linecache.getline(kernel_file, n))]
    return (named or calls or [0])[0]


class _PassTracker:
    """Pass instrument knowing which passes are running: after an exception, the innermost one
    that never finished is the pass that failed."""

    def __init__(self) -> None:
        self.running: list[str] = []

    def build(self):
        tvm = tilelang().tvm
        outer = self

        @tvm.instrument.pass_instrument
        class Track:
            def run_before_pass(self, mod, info):
                outer.running.append(str(info.name))

            def run_after_pass(self, mod, info):
                if outer.running and outer.running[-1] == str(info.name):
                    outer.running.pop()

        return Track()

    @property
    def failing(self) -> str | None:
        return self.running[-1] if self.running else None


# Operations TileLang lowers only for some targets, recognised in its error messages: the message
# fragment, then what to tell the user. Kept here because the messages are TileLang's.
_TARGET_OPERATIONS = (
    ("wgmma", "WGMMA (T.gemm on Hopper warpgroups)"),
    ("tma", "TMA copies"),
    ("warp_special", "warp specialization"),
    ("cluster", "thread-block clusters"),
    ("fragment", "register fragments (T.alloc_fragment)"),
    ("shared.dyn", "shared memory (T.alloc_shared)"),
    ("local_buf must be a fragment", "a T.gemm accumulator outside T.alloc_fragment"),
    ("Unsupported gemm combination", "this T.gemm operand combination"),
)


_BUILDER_OPS = re.compile(r"^(gemm\w*|\w+_gemm|copy|async_copy|tma_copy|c2d_im2col|reduce\w*|cumsum|fill|clear|"
                          r"atomic_\w+|view|reshape|reinterpret\w*|annotate_layout|Pipelined|Parallel|alloc_\w+)$")


def _building_site(err: BaseException, line: tuple[str, int, str] | None) -> Any:
    """The tile operation TileLang's builder was running when ``err`` was raised (the innermost
    frame of ``tilelang/language`` named as a T.* operation), with the buffers among its local
    variables as (name, dtype, scope, shape) and its arguments that are flags or integers; None
    when the failure was raised elsewhere."""
    from . import doctor as _doctor

    tb = err.__traceback__
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if found is None and "/tilelang/" in code.co_filename and "/language/" in code.co_filename \
                and _BUILDER_OPS.match(code.co_name):
            found = tb.tb_frame  # the outermost: the T.* call the kernel made (not its helpers)
        tb = tb.tb_next
    if found is None:
        return None
    buffers: list[tuple[str, str, str, str]] = []
    notes: list[tuple[str, str]] = []
    for key, value in list(found.f_locals.items())[:24]:
        buffer = getattr(value, "buffer", value)
        if hasattr(buffer, "scope") and hasattr(buffer, "shape") and hasattr(buffer, "dtype"):
            try:
                shape = getattr(value, "region", None)
                extents = [str(r.extent) for r in shape] if shape is not None else [str(x) for x in buffer.shape]
                item = (str(buffer.name), str(buffer.dtype), str(buffer.scope()), "(" + ", ".join(extents) + ")")
            except Exception:
                continue
            if item not in buffers:
                buffers.append(item)
        elif isinstance(value, (bool, int)) and not key.startswith("_"):
            notes.append((key, str(value)))
    file, number, text = line if line is not None else ("", 0, "")
    return _doctor.TileSite("T." + found.f_code.co_name, number, file, tuple(buffers), text,
                            annotations=tuple(notes))


def _kernel_threads(func: Any) -> int | None:
    """The threads of the kernel's block (T.Kernel's ``threads=``), None where it says none."""
    try:
        tvm = tilelang().tvm
        found: list[int] = []

        def visit(node: Any) -> None:
            if isinstance(node, tvm.tirx.SBlock) and "tl.launch_threads" in node.annotations and not found:
                dims = [int(x) for x in node.annotations["tl.launch_threads"]]
                total = 1
                for d in dims:
                    total *= d
                found.append(total)

        tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
        return found[0] if found else None
    except Exception:
        return None


def _for_target(err: LoweringError, target: Any) -> LoweringError:
    """Say which target could not be lowered and, when TileLang's message names it, which operation;
    the diagnosis follows the new sentence (a cause that belongs to the target comes first)."""
    said = _said_for_target(err, target)
    if said is not err:
        said.diagnosis = err.diagnosis
        said._doctor_context = getattr(err, "_doctor_context", None)  # type: ignore[attr-defined]
        diagnosed(said, pass_name=err.pass_name, target_family=target.family, target_name=target.name)
    return said


def _said_for_target(err: LoweringError, target: Any) -> LoweringError:
    if target.family == "cuda":
        return err
    text = f"{err.summary}\n{err.trace}"
    if "Compilation Failed" in text:
        # TileLang lowered the kernel, but the host compiler rejects the C it generated
        first = re.search(r"error: (.+)", text)
        why = f" (first error: {first.group(1).strip()})" if first else ""
        return LoweringError(
            f"TileLang 0.1.15 lowered {err.kernel or 'the kernel'} for {target.name}, but the host C++ compiler "
            f"rejects the code it generated{why}. This is a limitation of TileLang's {target.name} code generator; "
            "on the CPU, float32 data avoids the fp16 vector conversions it cannot emit",
            kernel=err.kernel, kernel_line=None, trace=err.trace)
    ops = [what for needle, what in _TARGET_OPERATIONS if needle in text]
    summary = err.summary
    if not re.search(r"[A-Za-z]{3}", summary.split("failed:", 1)[-1]):
        # TVM's message ended with a source pointer ("|   ^"): keep the sentence that explains it.
        checks = re.findall(r"(?:Error|Fatal): (?:Check failed: .*?: )?(.+)", err.trace)
        if checks:
            summary = summary.split("failed:", 1)[0] + "failed: " + checks[-1].strip()
    why = f" (the kernel uses {ops[0]}, which TileLang 0.1.15 does not lower for {target.name} this way)" if ops else ""
    summary = f"{summary} -- TileLang cannot lower this kernel for {target.name} ({target.description}){why}"
    if target.family == "cpu":
        summary += ("; a CPU kernel keeps its tiles in T.alloc_local or global buffers and uses no GPU-only "
                    "operations (fragments, shared memory, TMA, WGMMA, warp specialization)")
    return LoweringError(summary, kernel=err.kernel, kernel_line=err.kernel_line, trace=err.trace)


def _reason(err: BaseException) -> str:
    summary, _ = explain_error(err)
    return f"{type(err).__name__}: {summary}" if str(err).strip() else type(err).__name__
