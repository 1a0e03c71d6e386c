"""ARCHITECTURE.md's layers, read from the code: the records and facts modules import nothing of
tilelab above them, so a report loads, saves and compares without the analysis, the renderers or
TileLang. Imports inside functions run later and are not counted by the layer checks; every other
import statement (at module level, in a class body, under a module-level ``try``/``if``/``with``)
runs at import time and is. And the adapter package (``tilelab/_tilelang/``) is the one place that
reaches into TileLang and TVM: any module in it may, the others use TileLang's public modules only
(``tilelang.compile``, ``tilelang.language``). Counting every import, those inside functions too,
tilelab's modules form no import circle, and nothing below the render layer imports it: a record
shows itself through the registry of the records' display hook, which the render layer's modules
fill when the package's face loads them at the first display."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tilelab"

ADAPTER = "tilelab._tilelang"  # the package whose modules, and only they, touch TileLang/TVM internals
# TileLang's public modules any tilelab module may import: the package (tilelang.compile) and the
# language kernels are written in.
TILELANG_PUBLIC = {"tilelang", "tilelang.language"}

FACTS = {"tilelab.cuda_facts", "tilelab.targets", "tilelab.records.errors", "tilelab._version",
         "tilelab.records.display", "tilelab._tilelang.doctor"}
RECORDS = {"tilelab.records.kernel", "tilelab.records.machine", "tilelab.records.launch", "tilelab.launch._telemetry",
           "tilelab.records.timeline"}
RECORDS |= {"tilelab.records.tile_trace"}  # tilelab.trace_tiles's record
RECORDS |= {"tilelab.records.profile"}  # Nsight Compute profiles
RECORDS |= {"tilelab.records.record"}  # the records' one dataclass <-> dict converter
FACES = {"tilelab", "tilelab.records"}  # the packages' faces, loaded with any module of theirs


def import_time_imports(source: str, module: str) -> set[str]:
    """The tilelab modules that ``source`` (the text of tilelab module ``module``) imports when it
    is imported: every import statement outside a function body."""
    package = module.split(".")[:-1]
    found = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.ImportFrom):
                base = package[:len(package) - (child.level - 1)] if child.level else []
                name = ".".join(base + [child.module]) if child.module else ".".join(base)
                if name.startswith("tilelab"):
                    found.update({f"{name}.{a.name}" for a in child.names} if not child.module else {name})
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("tilelab"))
            visit(child)

    visit(ast.parse(source))
    return found


def imports_of(module: str) -> set[str]:
    path = PKG.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return import_time_imports(path.read_text(), module)


def test_the_reader_by_hand():
    text = ("from __future__ import annotations\nimport json\nfrom . import _errors\nfrom .._model import A\n"
            "from ._telemetry import T\nimport tilelab.targets\n\ndef hook():\n    from ..render.html import x\n"
            "try:\n    from .._explain import explain\nexcept ImportError:\n    pass\n"
            "class C:\n    from ..swizzle import s\n    def m(self):\n        from .._inspect import inspect\n")
    assert import_time_imports(text, "tilelab.launch.models") == {
        "tilelab.launch._errors", "tilelab._model", "tilelab.launch._telemetry", "tilelab.targets",
        "tilelab._explain", "tilelab.swizzle"}


@pytest.mark.parametrize("module", sorted(FACTS))
def test_facts_import_only_facts(module):
    assert imports_of(module) <= FACTS


@pytest.mark.parametrize("module", sorted(RECORDS))
def test_records_import_only_records_and_facts(module):
    assert imports_of(module) <= RECORDS | FACTS


def loaded_after_importing(*modules: str) -> set[str]:
    """tilelab's, TileLang's and TVM's modules in a fresh interpreter after importing ``modules``."""
    code = ("import sys\nimport " + ", ".join(modules) + "\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith(('tilelab', 'tilelang', 'tvm')))))")
    return set(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=120).stdout.split())


def test_importing_the_report_records_loads_only_records_and_facts():
    """The same claim as Python sees it: after importing the report's records, only tilelab's
    package, records and facts are loaded, and neither TileLang nor TVM."""
    loaded = loaded_after_importing("tilelab.records.kernel", "tilelab.records.machine")
    assert loaded - FACES <= RECORDS | FACTS, loaded


def test_importing_the_launch_records_loads_only_records_and_facts():
    loaded = loaded_after_importing("tilelab.records.launch")
    assert loaded - FACES <= RECORDS | FACTS, loaded


def test_importing_the_launch_records_loads_no_analysis_renderer_or_tilelang():
    """The launch package's records come with the package (the launch layer, which imports TileLang
    only when it compiles), and nothing of the analysis, the renderers, TileLang or TVM."""
    loaded = loaded_after_importing("tilelab.launch")
    assert all(m.startswith("tilelab.launch") or m in RECORDS | FACTS | FACES for m in loaded), loaded


def internals_touched(source: str) -> set[str]:
    """What ``source`` reaches of TVM or of TileLang beyond its public modules: imports of ``tvm``
    or of ``tilelang.<anything but language>``, and any ``.tvm`` attribute."""
    touched = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            if name.split(".")[0] == "tvm" or (name.split(".")[0] == "tilelang" and name not in TILELANG_PUBLIC):
                touched.add(name)
        if isinstance(node, ast.Attribute) and node.attr == "tvm":
            touched.add(".tvm")
    return touched


def test_the_internals_reader_by_hand():
    text = ("import tilelang\nimport tilelang.language as T\nfrom tilelang.env import CacheState\n"
            "def f():\n    import tvm\n    return _tilelang.tilelang().tvm.ir\n")
    assert internals_touched(text) == {"tilelang.env", "tvm", ".tvm"}


def in_adapter(module: str) -> bool:
    return module == ADAPTER or module.startswith(ADAPTER + ".")


def internals_offenders(package: Path) -> dict[str, set[str]]:
    """Each module of the tilelab package at ``package`` outside the adapter package that touches
    TileLang or TVM internals, with what it touches."""
    offenders = {}
    for path in sorted(package.rglob("*.py")):
        parts = [p for p in path.relative_to(package).with_suffix("").parts if p != "__init__"]
        module = ".".join(["tilelab", *parts])
        if not in_adapter(module) and (touched := internals_touched(path.read_text())):
            offenders[module] = touched
    return offenders


def test_only_the_adapter_touches_tilelang_and_tvm_internals():
    assert not internals_offenders(PKG)
    # the check has something to hold: the adapter package does reach into TileLang and TVM
    assert any(internals_touched(p.read_text()) for p in (PKG / "_tilelang").glob("*.py"))


def test_the_internals_check_fails_for_a_module_outside_the_adapter_package(tmp_path):
    """Any module under tilelab/_tilelang/ may import tvm; the same import anywhere else, a
    sibling whose name merely starts like the package's included, is an offence."""
    package = tmp_path / "tilelab"
    (package / "_tilelang").mkdir(parents=True)
    (package / "launch").mkdir()
    lowering = "import tvm\nfrom tilelang.engine.lower import lower\n"
    (package / "_tilelang" / "__init__.py").write_text("from .new_room import x\n")
    (package / "_tilelang" / "new_room.py").write_text(lowering)
    (package / "_tilelang_helpers.py").write_text("import tvm\n")
    (package / "launch" / "__init__.py").write_text("def f():\n    import tvm.tirx\n")
    (package / "render.py").write_text("import tilelang\nimport tilelang.language as T\n")
    assert internals_offenders(package) == {"tilelab._tilelang_helpers": {"tvm"}, "tilelab.launch": {"tvm.tirx"}}


# ---------------------------------------------------------------------------------------------
# Import circles, counting imports inside functions
# ---------------------------------------------------------------------------------------------



def module_files() -> dict[str, Path]:
    """Every tilelab module by name (a package by its own name, for its ``__init__.py``)."""
    files = {}
    for path in PKG.rglob("*.py"):
        parts = [p for p in path.relative_to(PKG).with_suffix("").parts if p != "__init__"]
        files[".".join(["tilelab", *parts])] = path
    return files


def all_imports(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """Every tilelab module that ``source`` imports anywhere (module level, class bodies, functions):
    ``from . import x`` names the submodule ``x`` when there is one, else the package."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                found.add(sub if sub in known else name)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {m: all_imports(p.read_text(), m, p.name == "__init__.py", known) for m, p in files.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_circle_finder_by_hand():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []
    text = "from . import _x, y\nfrom ..render import display\ndef f():\n    from ..y import z\n"
    known = {"tilelab.launch", "tilelab.launch._x", "tilelab.render", "tilelab.render.display", "tilelab.y"}
    assert all_imports(text, "tilelab.launch", True, known) == {"tilelab.launch._x", "tilelab.render.display",
                                                                 "tilelab.y"}


def test_no_import_circles():
    """No exception: the display hook imports nothing (the registry is filled from above)."""
    graph = import_graph()
    assert graph["tilelab.records.display"] == set()
    assert circles(graph) == []


def test_nothing_below_the_renderers_reaches_them():
    graph = import_graph()
    below_render = RECORDS | FACTS | {m for m in graph if m.startswith("tilelab.records")}
    reaching = {(m, t) for m in below_render for t in graph.get(m, set()) if t.startswith("tilelab.render")}
    assert reaching == set()


def test_launch_has_one_front_door():
    """Only launch/_api.py chooses where a launch happens (the CPU, the worker process, or here);
    the modules that verify and time here never reach back to the CPU path, the worker or the
    front door, so the worker calls them without coming back in."""
    graph = import_graph()
    for module in ("tilelab.launch._run", "tilelab.launch._bench"):
        assert not graph[module] & {"tilelab.launch._cpu", "tilelab.launch._isolated", "tilelab.launch._api"}, module
    choosers = {m for m, path in module_files().items()
                if "in_worker()" in path.read_text() and m != "tilelab.launch._worker"}
    assert choosers == {"tilelab.launch._api"}
