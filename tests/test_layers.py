"""ARCHITECTURE.md's layers, read from the code: the records and facts modules import (at module
level) nothing of tilelab above them, so a report loads, saves and compares without the analysis,
the renderers or TileLang. Imports inside functions (the records' display hooks, which import
their renderer only when called) are allowed and not counted."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "tilelab"

FACTS = {"tilelab.cuda_facts", "tilelab.targets", "tilelab._errors"}
RECORDS = {"tilelab._model", "tilelab._machine", "tilelab.launch.models", "tilelab.launch._telemetry"}


def module_level_imports(source: str, module: str) -> set[str]:
    """The tilelab modules that ``source`` (the text of tilelab module ``module``) imports outside
    any function or class body."""
    package = module.split(".")[:-1]
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            name = ".".join(base + [node.module]) if node.module else ".".join(base)
            if name.startswith("tilelab"):
                found |= {f"{name}.{a.name}" for a in node.names} if not node.module else {name}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tilelab")}
    return found


def imports_of(module: str) -> set[str]:
    path = PKG.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return module_level_imports(path.read_text(), module)


def test_the_reader_by_hand():
    text = ("from __future__ import annotations\nimport json\nfrom . import _errors\nfrom .._model import A\n"
            "from ._telemetry import T\nimport tilelab.targets\n\ndef hook():\n    from ..render.html import x\n")
    assert module_level_imports(text, "tilelab.launch.models") == {
        "tilelab.launch._errors", "tilelab._model", "tilelab.launch._telemetry", "tilelab.targets"}
    # the records module as it would read if it imported the explainer: caught
    bad = "from __future__ import annotations\nfrom ._explain import explain\n"
    assert not module_level_imports(bad, "tilelab._model") <= RECORDS | FACTS


@pytest.mark.parametrize("module", sorted(FACTS))
def test_facts_import_only_facts(module):
    assert imports_of(module) <= FACTS


@pytest.mark.parametrize("module", sorted(RECORDS))
def test_records_import_only_records_and_facts(module):
    assert imports_of(module) <= RECORDS | FACTS
