"""A minimal reproducer of a compile failure: the failing kernel shrunk to a small standalone script
that still fails the same way, ready to paste into a TileLang issue (``err.reproducer()``).

The start is the kernel as a script of its own (:mod:`tilelab._tilelang.reproduce` writes it: the
prim_func's source, the values it uses, the lowering call) or, for a cell that failed while it
ran, the cell itself. The shrinking is delta debugging over the script's statements, in the
manner of TileLang's ``tilelang.autodd`` (statements removed in halves, then quarters, down to
one at a time; a loop replaced by its body; a block by its only statement), but each candidate is
run in this process and lowered only up to the pass that failed, so a step costs tenths of a
second instead of a fresh interpreter. "The same way" is the doctor's: the same pass, the same
cause (or, outside the catalogue, the same TileLang sentence with its numbers aside) at the same
tile operation.

It stops at a time limit (the smallest script so far is kept, and the result says the limit
ended it) or when no single step leaves a smaller script failing the same way (it says so).
"""

from __future__ import annotations

import ast
import copy
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..records.record import Record

__all__ = ["Reproducer", "failure_key", "reproduce", "shrink"]


@dataclass(frozen=True)
class Reproducer(Record):
    """A standalone script that fails as the kernel did (``script``), how it was found and its size.

    ``reproduces`` is False when even the unshrunk script did not fail the same way (``note`` says
    what it did instead); ``lines_before``/``lines_after`` count the code lines (blank and comment
    lines aside) of the kernel's source and of the script; ``tries`` the candidates run."""

    script: str
    reproduces: bool
    failure: str  # the failure kept: "tl.LayoutInference / no-warp-partition / T.gemm"
    lines_before: int
    lines_after: int
    seconds: float
    tries: int
    note: str

    def __str__(self) -> str:
        return self.script

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"# {self.note}\n{self.script}")

    def save(self, path: str) -> str:
        """Write the script to ``path`` and return the path."""
        with open(path, "w") as handle:
            handle.write(self.script)
        return path


def code_lines(text: str) -> int:
    return len([line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")])


def failure_key(err: Any) -> tuple[str, str, str, str]:
    """What "fails the same way" compares: the pass, the cause (the mechanism outside the
    catalogue), the tile op, and TileLang's sentence with its numbers and printed IR aside."""
    diagnosis = getattr(err, "diagnosis", None)
    cause = getattr(diagnosis, "cause", None) or getattr(diagnosis, "mechanism", None) or ""
    message = getattr(diagnosis, "message", "") or str(getattr(err, "summary", ""))
    if getattr(err, "python_error", None):
        message = err.python_error[0]
    return (str(getattr(err, "pass_name", "") or ""), str(cause), str(getattr(err, "tile_op", "") or ""),
            "" if cause else sentence_key(message))


def sentence_key(message: str) -> str:
    """TileLang's sentence as a key: its first clause, numbers as #, at most 60 characters."""
    text = message.split(" failed: ", 1)[-1]
    text = re.split(r"[\n:]\s|\s--\s|\{", text, maxsplit=1)[0]
    # a sentence that ends at its colon ("(p) is false:") is the same as one followed by more
    return re.sub(r"\d+", "#", text).strip().rstrip(":;,.").strip()[:60]


# -- the shrinking, over the text of a script -----------------------------------------------------------
def _blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the tree (module, function, loop and with bodies), outermost first."""
    out = []
    for node in ast.walk(tree):
        for name in ("body", "orelse"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                out.append(value)
    return out


def _candidates(text: str, keep_kernel: bool = True) -> list[str]:
    """Scripts one step smaller than ``text``: chunks of a block's statements removed (halves
    down to single statements), a factory's call replaced by its body, constants written where
    they are used, an arithmetic expression replaced by an operand, a loop or ``with`` replaced by
    its body. Each a valid script; the largest steps first."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out: list[str] = []
    seen = {text}
    for step in (_removals, _unwrapped_factories, _inlined_constants, _operands, _unwrapped_blocks):
        for new_tree in step(text, tree, keep_kernel):
            for block in _blocks(new_tree):  # a `pass` beside other statements says nothing
                if len(block) > 1:
                    block[:] = [b for b in block if not isinstance(b, ast.Pass)] or [ast.Pass()]
            try:
                new = ast.unparse(ast.fix_missing_locations(new_tree)) + "\n"
            except Exception:
                continue
            if new not in seen:
                seen.add(new)
                out.append(new)
    return out


def _removals(text: str, tree: ast.Module, keep_kernel: bool) -> Iterator[ast.AST]:
    """Chunks of each block's statements removed: halves, quarters, eighths, then one at a time."""
    count = len(_blocks(tree))
    for size_div in (2, 4, 8, 1000):
        for b in range(count):
            block_len = len(_blocks(tree)[b])
            size = 1 if size_div == 1000 else max(1, block_len // size_div)
            for start in range(0, block_len, size):
                copy_tree = ast.parse(text)
                block = _blocks(copy_tree)[b]
                if len(block) - len(block[start:start + size]) < 1:
                    block[:] = [ast.Pass()]
                else:
                    del block[start:start + size]
                yield copy_tree


def _unwrapped_factories(text: str, tree: ast.Module, keep_kernel: bool) -> Iterator[ast.AST]:
    """A factory called once at the top, replaced by its body with its parameters bound to the
    call's arguments (the kernel it builds then stands at the top of the script)."""
    for index in range(len(tree.body)):
        unwrapped = _unwrap_factory(ast.parse(text), index)
        if unwrapped is not None:
            yield unwrapped


def _inlined_constants(text: str, tree: ast.Module, keep_kernel: bool) -> Iterator[ast.AST]:
    """Every name bound once to a constant written where it is used instead (all, then each)."""
    constants = _constants(tree)
    if constants:
        yield _inline(ast.parse(text), constants)
        for name in constants:
            yield _inline(ast.parse(text), {name: constants[name]})


def _operands(text: str, tree: ast.Module, keep_kernel: bool) -> Iterator[ast.AST]:
    """An arithmetic expression replaced by one of its operands (what it reads may then go)."""
    count = len([n for n in ast.walk(tree) if isinstance(n, ast.BinOp)])
    for index in range(count):
        for side in ("left", "right"):
            copy_tree = ast.parse(text)
            ops = [n for n in ast.walk(copy_tree) if isinstance(n, ast.BinOp)]

            class Forward(ast.NodeTransformer):
                def visit_BinOp(self, node: ast.BinOp, target: ast.BinOp = ops[index], side: str = side) -> Any:
                    if node is target:
                        return getattr(node, side)
                    self.generic_visit(node)
                    return node

            yield Forward().visit(copy_tree)


def _unwrapped_blocks(text: str, tree: ast.Module, keep_kernel: bool) -> Iterator[ast.AST]:
    """A loop replaced by its body (its variable bound to 0), a ``with`` by its body (never the
    kernel's T.Kernel while ``keep_kernel``: without its threads the failure would be another)."""
    for index in range(len([n for n in ast.walk(tree) if _unwrappable(n, keep_kernel)])):
        copy_tree = ast.parse(text)
        nodes = [n for n in ast.walk(copy_tree) if _unwrappable(n, keep_kernel)]
        node: Any = nodes[index]
        for block in _blocks(copy_tree):
            if node in block:
                at = block.index(node)
                body = list(node.body)
                if isinstance(node, ast.For):
                    body = [ast.Assign([node.target], _zeros(node.target))] + body
                elif node.items and node.items[0].optional_vars is not None:
                    var = node.items[0].optional_vars
                    body = [ast.Assign([var], _zeros(var))] + body
                block[at:at + 1] = body
                yield copy_tree
                break


def _unwrappable(node: ast.AST, keep_kernel: bool = True) -> bool:
    if isinstance(node, ast.For):
        return True
    if not isinstance(node, ast.With):
        return False
    call = node.items[0].context_expr if node.items else None
    kernel = isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and "Kernel" in call.func.attr
    return not (kernel and keep_kernel)


def _unwrap_factory(tree: ast.Module, index: int) -> ast.Module | None:
    """``x = f(args)`` at the top (statement ``index``) with ``f`` a function defined at the top:
    the call replaced by ``f``'s body, its parameters assigned from the call (defaults for the rest)
    and its ``return y`` made ``x = y``; None where the statement is no such call."""
    stmt = tree.body[index]
    if not (isinstance(stmt, (ast.Assign, ast.Expr)) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)):
        return None
    call = stmt.value
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == call.func.id]
    if len(defs) != 1 or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(defs[0])):
        return None
    fn = defs[0]
    args = fn.args
    if args.vararg or args.kwarg or args.posonlyargs or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    params = [a.arg for a in args.args]
    values: dict[str, ast.expr] = {}
    for name, default in zip(params[len(params) - len(args.defaults):], args.defaults):
        values[name] = default
    for name, kw_default in zip([a.arg for a in args.kwonlyargs], args.kw_defaults):
        if kw_default is not None:
            values[name] = kw_default
    if len(call.args) > len(params):
        return None
    values.update(zip(params, call.args))
    for kw in call.keywords:
        if kw.arg is None:
            return None
        values[kw.arg] = kw.value
    if set(params + [a.arg for a in args.kwonlyargs]) - set(values):
        return None
    body: list[ast.stmt] = [ast.Assign([ast.Name(k, ast.Store())], v) for k, v in values.items()]
    for inner in fn.body:
        if isinstance(inner, ast.Return):
            if isinstance(stmt, ast.Assign) and inner.value is not None:
                body.append(ast.Assign(stmt.targets, inner.value))
            break
        body.append(inner)
    tree.body[index:index + 1] = body
    if not any(isinstance(n, ast.Name) and n.id == fn.name for n in ast.walk(tree)):
        tree.body.remove(fn)  # its only call was this one
    bound = {k: v for k, v in _constants(tree).items() if k in values}
    return _inline(tree, bound) if bound else tree


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Names bound exactly once in the whole script, to a literal (``bM = 128``, ``dtype = T.float16``,
    ``a, b = T.float16, T.float32`` inside a function too): each can be written where it is used."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0) + 2  # a parameter is never a constant
    out: dict[str, ast.expr] = {}
    for stmt in ast.walk(tree):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name) and counts.get(target.id) == 1 and _literal(value):
            out[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
            if all(isinstance(t, ast.Name) and counts.get(t.id) == 1 and _literal(v) for t, v in pairs):
                out.update({t.id: v for t, v in pairs})  # type: ignore[attr-defined]
    return out


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "T"
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal(e) for e in node.elts)
    return False


def _inline(tree: ast.Module, constants: dict[str, ast.expr]) -> ast.Module:
    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if isinstance(node.ctx, ast.Load) and node.id in constants:
                return ast.copy_location(copy.deepcopy(constants[node.id]), node)
            return node

        def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
            target = node.targets[0] if len(node.targets) == 1 else None
            names = [t.id for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                     if isinstance(t, ast.Name)] if target is not None else []
            if names and all(n in constants for n in names) and len(names) == (
                    len(target.elts) if isinstance(target, ast.Tuple) else 1):
                return ast.Pass()
            self.generic_visit(node)
            return node

    return Inline().visit(tree)


def _zeros(target: ast.expr) -> ast.expr:
    if isinstance(target, (ast.Tuple, ast.List)):
        return ast.Tuple([_zeros(e) for e in target.elts], ast.Load())
    return ast.Constant(0)


def _size(text: str) -> tuple[int, int]:
    return code_lines(text), len(text)


def shrink(text: str, same: Callable[[str], bool], *, deadline: float,
           progress: Callable[[int, int, float], None] | None = None,
           keep_kernel: bool = True) -> tuple[str, int, bool]:
    """The smallest script ``same`` accepts, from ``text`` (which it accepts) by single steps;
    (script, tries, finished): ``finished`` is False when ``deadline`` (a time.monotonic()) cut it short."""
    best = text
    tries = 0
    started = time.monotonic()
    while True:
        improved = False
        for candidate in _candidates(best, keep_kernel):
            if time.monotonic() > deadline:
                return best, tries, False
            if _size(candidate) >= _size(best):
                continue
            tries += 1
            if same(candidate):
                best = candidate
                improved = True
                if progress is not None:
                    progress(tries, code_lines(best), time.monotonic() - started)
                break
        if not improved:
            return best, tries, True


def reproduce(err: Any, *, time_limit_s: float = 120.0, progress: bool | Callable[[str], None] = True) -> Reproducer:
    """Shrink ``err``'s kernel (a LoweringError with a recipe) to a small standalone script failing
    the same way. ``progress`` True prints a line per step to stderr; a callable gets the lines."""
    import sys

    from .. import _tilelang
    runner = _tilelang

    say: Callable[[str], None]
    if callable(progress):
        say = progress
    elif progress:
        def say(line: str) -> None:
            print(f"\r{line}", end="", file=sys.stderr, flush=True)
    else:
        def say(line: str) -> None:
            return None

    started = time.monotonic()
    rec = getattr(err, "recipe", None)
    if rec is None:
        return Reproducer(script="", reproduces=False, failure="", lines_before=0, lines_after=0, seconds=0.0,
                          tries=0, note="tilelab cannot write this kernel as a script: its prim_func keeps no Python "
                                        "source (it was built from TVMScript or by TileLang's parser), and the "
                                        "failure was not raised while a cell ran")
    want = failure_key(err)
    stop_after = err.pass_name if err.pass_name and "." in err.pass_name else None

    def same(body: str) -> bool:
        got = runner.run_script(body, rec, stop_after=stop_after)
        return got is not None and failure_key(got) == want

    def script(body: str) -> str:
        return (f"# {what}\n" + runner.versions() + runner.script_header() + body + runner.script_tail(rec))

    what = (f"TileLang {_tilelang.tilelang_version()} fails in {err.pass_name or 'lowering'}"
            + (f" for {rec.target_name}" if rec.target_name else "") + f": {err.summary.split(' failed: ', 1)[-1]}")
    what = what.replace("\n", " ")[:300]
    failure = " / ".join(part for part in want[:3] if part)
    if not same(rec.body):
        return Reproducer(script=script(rec.body), reproduces=False, failure=failure, lines_before=rec.origin_lines,
                          lines_after=code_lines(script(rec.body)), seconds=time.monotonic() - started, tries=1,
                          note="the kernel written as a script of its own does not fail the same way (it depends on "
                               "something the script cannot carry: state of the process, a pass config, a patched "
                               "TileLang); the script is the unshrunk kernel")
    deadline = started + time_limit_s
    start_lines = code_lines(script(rec.body))

    def step(tries: int, lines: int, seconds: float) -> None:
        total = lines + code_lines(script(""))
        say(f"reproducer: {start_lines} -> {total} lines after {tries} tries ({seconds:.0f} s)")

    # a kernel that failed while it was built needs no launch: its T.Kernel may go too
    body, tries, finished = shrink(rec.body, same, deadline=deadline, progress=step,
                                   keep_kernel=err.pass_name != "elaboration")
    final = script(body)
    seconds = time.monotonic() - started
    if progress is True:
        print(file=sys.stderr)
    note = (f"shrunk from {start_lines} to {code_lines(final)} lines in {tries} tries ({seconds:.0f} s); no single "
            "step (a statement removed, a loop or block unwrapped) leaves a smaller script failing the same way"
            if finished else
            f"stopped at the time limit ({time_limit_s:.0f} s) after {tries} tries: shrunk from {start_lines} to "
            f"{code_lines(final)} lines; err.reproducer(time_limit_s=...) with more time may shrink it further")
    return Reproducer(script=final, reproduces=True, failure=failure, lines_before=rec.origin_lines or start_lines,
                      lines_after=code_lines(final), seconds=seconds, tries=tries + 1, note=note)
