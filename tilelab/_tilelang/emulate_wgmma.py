"""The ``explicit-wgmma`` rule's refusal: a tile an explicit WGMMA is still writing, read or written

``T.wgmma_gemm`` issues Hopper's asynchronous GEMM and does not wait for it: until a
``T.wait_wgmma(n)`` leaves at most ``n`` of the warpgroup's GEMMs in flight, its accumulator is
being written by the tensor cores (PTX: reading or writing the accumulator registers of a
``wgmma.mma_async`` before the ``wgmma.wait_group`` that completes it is undefined, except by
another ``wgmma.mma_async`` on the same accumulator). The CPU's GEMM is done when its statement
ends, so it would read the finished tile where the GPU reads whatever is in the registers. This
module finds a statement that touches the accumulator of a GEMM surely still in flight (or gives it
to another GEMM as an operand) and refuses it by name with its line.

"Surely" is a must-analysis in program order: the GEMMs in flight are those of every path (an
``if`` keeps those in flight on both branches), each with the number of GEMMs issued after its
latest one (``T.wait_wgmma(n)`` completes the GEMMs with ``n`` or more after them); a loop's body is
followed for its first and second iterations; a ``T.gemm`` (whose WGMMA lowering waits for every
GEMM) and a wait of a number not known when the kernel is built complete them all. A kernel this
cannot decide is left to run.
"""

from __future__ import annotations

from typing import Any

from .emulate_source import EmulationRefused, _source_lines
from .env import tilelang

WGMMA_GEMM, WGMMA_WAIT, GEMM = "tl.tileop.wgmma_gemm", "tl.wait_wgmma", "tl.tileop.gemm"


def _op(call: Any) -> str:
    return str(getattr(call.op, "name", ""))


def _touched(node: Any) -> list[Any]:
    """The data variables of the buffers ``node`` loads, stores or points to."""
    tirx = tilelang().tvm.tirx
    found: list[Any] = []

    def visit(n: Any) -> None:
        if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)):
            found.append(n.buffer.data)
        elif isinstance(n, tirx.Var) and "handle" in str(n.dtype):
            found.append(n)

    tirx.stmt_functor.post_order_visit(node, visit)
    return found


def _merge(a: dict[Any, tuple[int, str]], b: dict[Any, tuple[int, str]]) -> dict[Any, tuple[int, str]]:
    """In flight on both paths, with the more GEMMs issued after it (the sooner a wait completes it)."""
    return {k: (max(a[k][0], b[k][0]), a[k][1]) for k in a if k in b}


def in_flight_access(func: Any, name: str) -> EmulationRefused | None:
    """The refusal of the first statement of ``func`` that reads or writes the accumulator of a
    ``T.wgmma_gemm`` surely still in flight (see the module's docstring), or None."""
    tirx = tilelang().tvm.tirx
    found: list[tuple[str, Any]] = []  # (the accumulator's name, the statement)

    def check(stmt: Any, state: dict[Any, tuple[int, str]], nodes: list[Any]) -> None:
        if found or not state:
            return
        for node in nodes:
            for data in _touched(node):
                if data in state:
                    found.append((state[data][1], stmt))
                    return

    def leaf(stmt: Any, state: dict[Any, tuple[int, str]]) -> dict[Any, tuple[int, str]]:
        call: Any = stmt.value if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) else None
        op = _op(call) if call is not None else ""
        if op == WGMMA_GEMM and len(call.args) >= 3:
            check(stmt, state, list(call.args[:2]))  # an operand still being written; C itself may chain
            accumulators = _touched(call.args[2])
            if not accumulators:
                return {}
            state = {k: (d + 1, n) for k, (d, n) in state.items()}
            state[accumulators[0]] = (0, _buffer_name(call.args[2]) or str(accumulators[0].name))
            implicit = dict(getattr(call, "annotations", None) or {}).get("wg_wait", -1)  # a wait it asks for
            if not isinstance(implicit, (int, tirx.IntImm)):
                return {}
            return state if int(implicit) < 0 else {k: v for k, v in state.items() if v[0] < int(implicit)}
        if op == WGMMA_WAIT:
            n = call.args[0] if call.args else None
            if not isinstance(n, tirx.IntImm):
                return {}
            return {k: (d, name_) for k, (d, name_) in state.items() if d < int(n)}
        if op == GEMM:
            return {}
        if "warpgroup" in op or "fence" in op:
            return state
        check(stmt, state, [stmt])
        return state

    def walk(stmt: Any, state: dict[Any, tuple[int, str]]) -> dict[Any, tuple[int, str]]:
        if found:
            return state
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt:
                state = walk(s, state)
            return state
        if isinstance(stmt, tirx.For):
            check(stmt, state, [stmt.min, stmt.extent])
            extent = stmt.extent if isinstance(stmt.extent, tirx.IntImm) else None
            if extent is not None and int(extent) <= 0:
                return state
            first = walk(stmt.body, dict(state))
            if extent is not None and int(extent) == 1:
                return first
            second = walk(stmt.body, dict(first))
            after = _merge(first, second)
            return after if extent is not None else _merge(state, after)
        if isinstance(stmt, tirx.While):
            check(stmt, state, [stmt.condition])
            return _merge(state, walk(stmt.body, dict(state)))
        if isinstance(stmt, tirx.IfThenElse):
            check(stmt, state, [stmt.condition])
            then = walk(stmt.then_case, dict(state))
            other = walk(stmt.else_case, dict(state)) if stmt.else_case is not None else state
            return _merge(then, other)
        if isinstance(stmt, tirx.SBlockRealize):
            return walk(stmt.block, state)
        if isinstance(stmt, tirx.SBlock):
            return walk(stmt.body, state)
        if isinstance(stmt, tirx.AttrStmt):
            check(stmt, state, [stmt.value])
            return walk(stmt.body, state)
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            return walk(body, state)
        return leaf(stmt, state)

    walk(func.body, {})
    if not found:
        return None
    accumulator, stmt = found[0]
    file, line, text = _line_after_gemm(func, accumulator, stmt)
    return EmulationRefused(
        name, f"a use of {accumulator}, the accumulator of a T.wgmma_gemm still in flight",
        "T.wgmma_gemm does not wait for its GEMM: the tensor cores write the accumulator until a T.wait_wgmma(n) "
        "leaves at most n GEMMs in flight, so the GPU reads (or overwrites) a tile half written, and the CPU, whose "
        "GEMM is done when its statement ends, would give a finished one; wait first (T.wait_wgmma(0), or a "
        "number that completes this GEMM)", file, line, text)


def _buffer_name(region: Any) -> str:
    tirx = tilelang().tvm.tirx
    names: list[str] = []
    tirx.stmt_functor.post_order_visit(region, lambda n: names.append(str(n.buffer.name))
                                       if isinstance(n, tirx.BufferLoad) else None)
    return names[0] if names else ""


def _line_after_gemm(func: Any, accumulator: str, stmt: Any) -> tuple[str, int, str]:
    """The line of ``stmt`` (its span), else the first line after a ``T.wgmma_gemm`` into
    ``accumulator`` that names it and is not a GEMM or a wait."""
    import re

    filename, start, lines = _source_lines(func)
    span = getattr(stmt, "span", None)
    try:
        if span is not None and int(span.line) > 0 and str(span.source_name.name) == filename:
            line = int(span.line)
            if 0 <= line - start < len(lines):
                return filename, line, lines[line - start]
    except Exception:  # a span of another form: the search below
        pass
    word = re.compile(rf"\b{re.escape(accumulator)}\b")
    seen = False
    for i, text in enumerate(lines):
        code = text.split("#", 1)[0]
        if "wgmma_gemm" in code and word.search(code):
            seen = True
        elif seen and word.search(code) and "wait_wgmma" not in code and "gemm(" not in code:
            return filename, start + i, text
    return filename, 0, ""
