"""Failing kernels made on purpose: mutants of working kernels, lowered, and their failures kept.

A *seed* is a kernel factory of a Python file: a top-level function that returns a ``T.prim_func``
when called with its defaults (required sizes and tile parameters get usual values by name:
M/N/K 256, block_* 64, threads 128, dtypes float16/float32). Each seed is mutated the ways kernels
go wrong in users' hands:

- its parameters: thread counts (96, 64, 32, 384), tile sizes (half, double, +8), pipeline stages,
  dtypes (fp8, fp4, int4, int8, bf16, fp32);
- its body, one edit at a time (an ``ast`` rewrite of the factory's source): buffer scopes
  (fragment <-> shared <-> local), dtype literals, ``T.Parallel`` bodies (indices swapped, an index
  halved, a loop nested), reductions (the other dim), pipelines (stages, an ``order``/``stage``
  annotation), copies made ``T.async_copy``/``T.tma_copy``, GEMMs made ``T.wgmma_gemm``/
  ``T.tcgen05_gemm``, operands transposed;
- its target: sm_80, sm_90a, sm_100a, gfx942.

Each mutant is lowered as ``tilelab.inspect`` lowers (no device compile), in worker processes; a
mutant that TileLang cannot lower is a *generated failure*, kept with the doctor's diagnosis.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import inspect
import linecache
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("sm_90a", "sm_80", "sm_100a", "gfx942")
DEFAULT_SEED_FILES = ("tests/target_kernels.py", "tests/timeline_kernels.py", "tests/buggy_kernels.py",
                      "tests/fault_kernels.py", "examples/*.py", "tilelab/kernels/*.py")

# Values for a factory's required parameters, by name (the sizes most kernels are written for).
_USUAL = {"M": 256, "N": 256, "K": 256, "batch": 1, "heads": 2, "seq_len": 256, "seq": 256, "dim": 64,
          "n": 1024, "block_M": 64, "block_N": 64, "block_K": 32, "threads": 128, "num_stages": 2,
          "dtype": "float16", "in_dtype": "float16", "out_dtype": "float32", "accum_dtype": "float32",
          "trans_A": False, "trans_B": False}
_DTYPES = ("float8_e4m3fn", "float4_e2m1fn", "int4", "int8", "bfloat16", "float32")
_SKIP = {"compile", "attention_reference", "line_of", "plain_line", "by_kind", "gemm_phases", "matmul_best"}


@dataclass(frozen=True)
class Mutant:
    seed: str  # "file.py:function"
    mutation: str  # what was changed ("threads=96", "scope C_local: fragment->shared", "base")
    target: str
    edit: tuple[str, int] = ("", 0)  # (kind of body edit, which occurrence) or ("", 0)
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.seed}|{self.mutation}|{self.target}"


# -- seeds --------------------------------------------------------------------------------------------
def _load(path: Path) -> Any:
    name = "seed_" + hashlib.sha1(str(path).encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def _call_args(fn: Any) -> dict[str, Any] | None:
    kwargs = {}
    for p in inspect.signature(fn).parameters.values():
        if p.default is not inspect.Parameter.empty:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name not in _USUAL:
            return None
        kwargs[p.name] = _USUAL[p.name]
    return kwargs


def seed_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for pattern in paths:
        found = sorted(ROOT.glob(pattern)) if not Path(pattern).is_absolute() else sorted(Path("/").glob(pattern[1:]))
        out.extend(p for p in found if p.suffix == ".py" and p.name != "__init__.py")
    return out


def seeds(files: list[Path]) -> list[tuple[Path, str]]:
    """The (file, factory) pairs of ``files`` that build a prim_func with their defaults."""
    from tilelab import _tilelang

    found = []
    for path in files:
        try:
            module = _load(path)
        except Exception:
            continue
        for name, fn in vars(module).items():
            if name.startswith("_") or name in _SKIP or not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            kwargs = _call_args(fn)
            if kwargs is None:
                continue
            try:
                built = fn(**kwargs)
            except Exception:
                continue
            if _tilelang.kernel_kind(built) == "prim_func":
                found.append((path, name))
    return found


# -- mutations -----------------------------------------------------------------------------------------
_SWAPS = {"alloc_fragment": ("alloc_shared", "alloc_local"), "alloc_shared": ("alloc_fragment",),
          "alloc_local": ("alloc_fragment",)}
_LITERAL_DTYPES = {"float16": ("float8_e4m3fn", "float4_e2m1fn", "float32"), "bfloat16": ("float8_e5m2",),
                   "float32": ("float16", "int32"), "int8": ("int4",)}


def _calls(tree: ast.AST, attr: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == attr and isinstance(n.func.value, ast.Name) and n.func.value.id == "T"]


def _loops(tree: ast.AST, kind: str) -> list[ast.For]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.For) and isinstance(n.iter, ast.Call)
            and isinstance(n.iter.func, ast.Attribute) and n.iter.func.attr == kind]


def _subscripts_in(loop: ast.For) -> list[ast.Subscript]:
    return [n for n in ast.walk(loop) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple)
            and len(n.slice.elts) >= 2]


def body_edits(tree: ast.AST) -> list[tuple[str, int, str]]:
    """Every single edit of the factory's body: (kind, occurrence, description)."""
    edits = []
    for attr, others in _SWAPS.items():
        for i in range(len(_calls(tree, attr))):
            for other in others:
                edits.append((f"scope:{attr}:{other}", i, f"T.{attr} #{i} -> T.{other}"))
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "T" and n.attr in _LITERAL_DTYPES]
    for i, node in enumerate(names):
        for new in _LITERAL_DTYPES[node.attr]:
            edits.append((f"dtype:{node.attr}:{new}", i, f"T.{node.attr} #{i} -> T.{new}"))
    for i, loop in enumerate(_loops(tree, "Parallel")):
        if _subscripts_in(loop):
            edits.append(("parallel:swap", i, f"T.Parallel #{i}: first 2-d index swapped"))
            edits.append(("parallel:halve", i, f"T.Parallel #{i}: last index halved"))
        edits.append(("parallel:nest", i, f"T.Parallel #{i}: body in a nested T.Parallel"))
    for kind in ("reduce_max", "reduce_sum", "reduce_min"):
        for i, _ in enumerate(_calls(tree, kind)):
            edits.append((f"reduce:{kind}", i, f"T.{kind} #{i}: the other dim"))
    for i, _ in enumerate(_loops(tree, "Pipelined")):
        edits.append(("pipe:order", i, f"T.Pipelined #{i}: order=[1, 0, 2, 3]"))
        edits.append(("pipe:stage", i, f"T.Pipelined #{i}: stage=[0, 1]"))
        edits.append(("pipe:stages4", i, f"T.Pipelined #{i}: num_stages=4"))
    for i, _ in enumerate(_calls(tree, "copy")):
        edits.append(("copy:async_copy", i, f"T.copy #{i} -> T.async_copy"))
        edits.append(("copy:tma_copy", i, f"T.copy #{i} -> T.tma_copy"))
    for i, _ in enumerate(_calls(tree, "gemm")):
        edits.append(("gemm:wgmma_gemm", i, f"T.gemm #{i} -> T.wgmma_gemm"))
        edits.append(("gemm:tcgen05_gemm", i, f"T.gemm #{i} -> T.tcgen05_gemm"))
        edits.append(("gemm:transpose_B", i, f"T.gemm #{i}: transpose_B flipped"))
    return edits


class _Edit(ast.NodeTransformer):
    def __init__(self, kind: str, index: int) -> None:
        self.kind, self.index = kind, index
        self.seen: dict[str, int] = {}

    def _hit(self, key: str) -> bool:
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        return n == self.index

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        family, *rest = self.kind.split(":")
        if isinstance(node.value, ast.Name) and node.value.id == "T" and family == "dtype" and node.attr == rest[0] \
                and self._hit("dtype"):
            return ast.copy_location(ast.Attribute(node.value, rest[1], node.ctx), node)
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        family, *rest = self.kind.split(":")
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "T"):
            return node
        if family == "scope" and f.attr == rest[0] and self._hit("scope"):
            node.func = ast.Attribute(f.value, rest[1], f.ctx)
        elif family == "reduce" and f.attr == rest[0] and self._hit("reduce"):
            for kw in node.keywords:
                if kw.arg == "dim" and isinstance(kw.value, ast.Constant):
                    kw.value = ast.Constant(0 if kw.value.value else 1)
                    break
            else:
                node.keywords.append(ast.keyword("dim", ast.Constant(0)))
        elif family == "copy" and f.attr == "copy" and self._hit("copy"):
            node.func = ast.Attribute(f.value, rest[0], f.ctx)
        elif family == "gemm" and f.attr == "gemm" and self._hit("gemm"):
            if rest[0] == "transpose_B":
                kws = [k for k in node.keywords if k.arg == "transpose_B"]
                if kws and isinstance(kws[0].value, ast.Constant):
                    kws[0].value = ast.Constant(not kws[0].value.value)
                else:
                    node.keywords.append(ast.keyword("transpose_B", ast.Constant(True)))
            else:
                node.func = ast.Attribute(f.value, rest[0], f.ctx)
        return node

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)
        family, *rest = self.kind.split(":")
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)):
            return node
        if family == "parallel" and it.func.attr == "Parallel" and self._hit("parallel"):
            if rest[0] == "nest":
                inner = ast.For(target=ast.Name("_r", ast.Store()),
                                iter=ast.Call(ast.Attribute(ast.Name("T", ast.Load()), "Parallel", ast.Load()),
                                              [ast.Constant(2)], []),
                                body=node.body, orelse=[])
                node.body = [ast.Expr(ast.Constant(0)), inner]
            else:
                subs = _subscripts_in(node)
                if subs:
                    elts = subs[0].slice.elts  # type: ignore[attr-defined]
                    if rest[0] == "swap":
                        elts[0], elts[1] = elts[1], elts[0]
                    else:
                        elts[-1] = ast.BinOp(elts[-1], ast.FloorDiv(), ast.Constant(2))
        elif family == "pipe" and it.func.attr == "Pipelined" and self._hit("pipe"):
            it.keywords = [k for k in it.keywords if k.arg not in ("order", "stage")]
            if rest[0] == "order":
                it.keywords.append(ast.keyword("order", ast.parse("[1, 0, 2, 3]", mode="eval").body))
            elif rest[0] == "stage":
                it.keywords.append(ast.keyword("stage", ast.parse("[0, 1]", mode="eval").body))
            else:
                it.keywords = [k for k in it.keywords if k.arg != "num_stages"] + [
                    ast.keyword("num_stages", ast.Constant(4))]
        return node


def param_mutations(fn: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        value = p.default if p.default is not inspect.Parameter.empty else _USUAL.get(p.name)
        name = p.name
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if "thread" in name:
                values = [96, 64, 32, 384]
            elif "stage" in name:
                values = [0, 1, 4]
            elif name.startswith("block") or name in ("bM", "bN", "bK", "tile"):
                values = [value // 2, value * 2, value + 8]
            else:
                continue
        elif "float" in str(value) or "int" in str(value) or "dtype" in name:
            values = [d for d in _DTYPES if d != str(value)]
        else:
            continue
        out.extend((f"{name}={v}", {name: v}) for v in values if v != value and v)
    return out


def mutants(pairs: list[tuple[Path, str]]) -> Iterator[Mutant]:
    for path, name in pairs:
        module = _load(path)
        fn = getattr(module, name)
        seed = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{name}"
        for target in TARGETS:
            yield Mutant(seed, "base", target)
        k = 0
        for desc, kwargs in param_mutations(fn):
            yield Mutant(seed, desc, "sm_90a", kwargs=tuple(kwargs.items()))
            yield Mutant(seed, desc, TARGETS[1 + k % 3], kwargs=tuple(kwargs.items()))
            k += 1
        try:
            tree = ast.parse(_dedent(inspect.getsource(fn)))
        except (OSError, SyntaxError):
            continue
        for kind, index, desc in body_edits(tree):
            yield Mutant(seed, desc, "sm_90a", edit=(kind, index))
            yield Mutant(seed, desc, TARGETS[1 + k % 3], edit=(kind, index))
            k += 1


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


# -- building and lowering one mutant --------------------------------------------------------------------
def mutant_source(mutant: Mutant) -> tuple[str, Any]:
    """The mutant's factory source (edited) and the module it lives in."""
    file, name = mutant.seed.rsplit(":", 1)
    path = Path(file) if Path(file).is_absolute() else ROOT / file
    module = _load(path)
    fn = getattr(module, name)
    text = _dedent(inspect.getsource(fn))
    if mutant.edit[0]:
        tree = ast.parse(text)
        tree = ast.fix_missing_locations(_Edit(*mutant.edit).visit(copy.deepcopy(tree)))
        text = ast.unparse(tree) + "\n"
    return text, module


def build(mutant: Mutant) -> tuple[Any, str, str]:
    """(prim_func, the mutant's source file name, its source): the factory (edited) called with the
    mutation's arguments; the source is registered with linecache so TileLang can read it."""
    fn, kwargs, filename, text = factory(mutant)
    return fn(**kwargs), filename, text


def factory(mutant: Mutant) -> tuple[Any, dict[str, Any], str, str]:
    """(the factory, edited, defined in its module's namespace; the arguments of the mutant's call;
    its source file name; its source): the source is registered with linecache."""
    text, module = mutant_source(mutant)
    file, name = mutant.seed.rsplit(":", 1)
    filename = f"<mutant {hashlib.sha1(mutant.id.encode()).hexdigest()[:10]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = dict(vars(module))
    import __future__

    # the seed's own future imports only (annotations as strings or not), never this module's
    future = getattr(module, "annotations", None)
    flags = __future__.annotations.compiler_flag if future is __future__.annotations else 0
    exec(compile(text, filename, "exec", flags=flags, dont_inherit=True), namespace)
    fn = namespace[name]
    kwargs = _call_args(fn) or {}
    kwargs.update(dict(mutant.kwargs))
    return fn, kwargs, filename, text


def lower(mutant: Mutant) -> dict[str, Any]:
    """One row: the mutant, whether it lowered, and for a failure the doctor's diagnosis."""
    from tilelab import _tilelang
    from tilelab.records.errors import LoweringError

    row: dict[str, Any] = {"seed": mutant.seed, "mutation": mutant.mutation, "target": mutant.target,
                           "edit": list(mutant.edit), "kwargs": [list(kv) for kv in mutant.kwargs]}
    start = time.perf_counter()
    try:
        with _tilelang.tilelang_errors(mutant.seed.rsplit(":", 1)[1], stage="elaboration"):
            func, filename, text = build(mutant)
        source = _tilelang.resolve_kernel(func)
        _tilelang.lower(source, mutant.target, out_idx=None, pass_configs={}, backends=())
        row["status"] = "lowered"
    except LoweringError as err:
        row.update(status="failed", **failure_fields(err))
        row["source"] = mutant_source(mutant)[0]
        if row["line"] and "<mutant" in str(row["line"][0]) and not row["line"][2]:
            lines = row["source"].splitlines()
            number = int(row["line"][1])
            row["line"][2] = lines[number - 1] if 0 < number <= len(lines) else ""
    except Exception as err:  # the mutant is not a kernel at all (a Python error of the edit)
        row.update(status="invalid", reason=f"{type(err).__name__}: {str(err)[:200]}",
                   where=traceback.format_exc(limit=-1)[-300:])
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row


def failure_fields(err: Any) -> dict[str, Any]:
    d = err.diagnosis
    line = err.kernel_line
    return {"reason": err.summary[:600], "pass": err.pass_name or "", "cause": err.cause or "",
            "mechanism": getattr(d, "mechanism", "") or "", "tile_op": err.tile_op or "",
            "buffers": list(getattr(d, "buffers", ()) or ()),
            "line": [line[0], line[1], line[2]] if line else None,
            "meaning": getattr(d, "meaning", ""), "advice": err.advice,
            "lines": err.diagnosis_lines()}


def _work(batch: list[Mutant]) -> list[dict[str, Any]]:
    import os

    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    return [lower(m) for m in batch]


def run(all_mutants: list[Mutant], jobs: int = 2, progress: bool = True) -> list[dict[str, Any]]:
    """Lower every mutant in ``jobs`` worker processes (a batch per seed and target family)."""
    import multiprocessing

    batches: dict[tuple[str, str], list[Mutant]] = {}
    for m in all_mutants:
        batches.setdefault((m.seed, m.target), []).append(m)
    # small batches: a worker that TileLang aborts loses only its own
    chunks = [batch[i:i + 8] for batch in batches.values() for i in range(0, len(batch), 8)]
    rows: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs, maxtasksperchild=20) as pool:
        pending = [(chunk, pool.apply_async(_work, (chunk,))) for chunk in chunks]
        for n, (chunk, result) in enumerate(pending, 1):
            try:
                rows.extend(result.get(timeout=600))
            except Exception as err:  # a worker died (TileLang aborted the process) or hung
                for m in chunk:
                    rows.append({"seed": m.seed, "mutation": m.mutation, "target": m.target, "status": "crashed",
                                 "edit": list(m.edit), "kwargs": [list(kv) for kv in m.kwargs],
                                 "reason": f"{type(err).__name__}: {err}"})
            if progress:
                print(f"\r{n}/{len(chunks)} batches, {len(rows)} mutants lowered", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return rows


def mutant_of(row: dict[str, Any]) -> Mutant:
    return Mutant(row["seed"], row["mutation"], row["target"], edit=tuple(row.get("edit") or ("", 0)),  # type: ignore[arg-type]
                  kwargs=tuple(tuple(kv) for kv in row.get("kwargs") or ()))  # type: ignore[misc]


__all__ = ["Mutant", "build", "lower", "mutants", "run", "seed_files", "seeds", "asdict"]
