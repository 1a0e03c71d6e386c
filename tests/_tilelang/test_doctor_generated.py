"""benchmarks/doctor_generated.py (the doctor on generated failures) without lowering anything: a
source kernel that fails unmutated on a target is skipped there (its mutants fail for its own
reason, whatever the mutation), the table says how many, and the generated failures it counts are
those of kernels that lower as written. Rows and mutants are made by hand here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generated():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # doctor_generated imports doctor_mutants beside it
    try:
        spec = importlib.util.spec_from_file_location("doctor_generated_under_test",
                                                      ROOT / "benchmarks" / "doctor_generated.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def row(seed, mutation, target, status):
    r = {"seed": seed, "mutation": mutation, "target": target, "status": status, "edit": ["", 0], "kwargs": []}
    if status == "failed":
        r.update({"pass": "LayoutInference", "cause": "a fragment's layout", "reason": "cannot infer a layout",
                  "line": ["<mutant 0123456789>", 3, "T.gemm(A_s, B_s, C_f)"], "meaning": "m"})
    return r


ROWS = [
    row("k.py:good", "base", "sm_90a", "lowered"),
    row("k.py:good", "threads=96", "sm_90a", "failed"),   # a generated failure
    row("k.py:good", "threads=64", "sm_90a", "lowered"),
    row("k.py:bad", "base", "sm_90a", "failed"),          # fails as written on sm_90a ...
    row("k.py:bad", "threads=96", "sm_90a", "failed"),    # ... so this says nothing about threads=96
    row("k.py:bad", "block_M=32", "sm_90a", "lowered"),
    row("k.py:bad", "base", "sm_80", "lowered"),          # ... but lowers on sm_80
    row("k.py:bad", "threads=96", "sm_80", "failed"),     # a generated failure
    row("k.py:odd", "base", "gfx942", "invalid"),         # not a kernel there at all
    row("k.py:odd", "dtype=int8", "gfx942", "failed"),
]


def test_the_mutants_of_a_kernel_that_fails_unmutated_on_a_target_are_skipped_there(generated):
    assert generated.failing_sources(ROWS) == {("k.py:bad", "sm_90a"): "failed", ("k.py:odd", "gfx942"): "invalid"}
    kept, skipped = generated.without_failing_sources(ROWS)
    assert [(r["seed"], r["mutation"], r["target"]) for r in kept] == [
        ("k.py:good", "base", "sm_90a"), ("k.py:good", "threads=96", "sm_90a"), ("k.py:good", "threads=64", "sm_90a"),
        ("k.py:bad", "base", "sm_80"), ("k.py:bad", "threads=96", "sm_80")]
    assert set(skipped) == {("k.py:bad", "sm_90a"), ("k.py:odd", "gfx942")}


def test_only_the_mutants_of_kernels_that_lower_as_written_are_lowered(generated):
    Mutant = sys.modules["doctor_mutants"].Mutant
    every = [Mutant("k.py:bad", "base", "sm_90a"), Mutant("k.py:bad", "base", "sm_80"),
             Mutant("k.py:bad", "threads=96", "sm_90a"), Mutant("k.py:bad", "threads=96", "sm_80"),
             Mutant("k.py:good", "base", "sm_90a"), Mutant("k.py:good", "threads=96", "sm_90a")]
    bases = [row("k.py:bad", "base", "sm_90a", "failed"), row("k.py:bad", "base", "sm_80", "lowered"),
             row("k.py:good", "base", "sm_90a", "lowered")]
    assert [m.id for m in generated.to_lower(every, bases)] == ["k.py:bad|threads=96|sm_80",
                                                               "k.py:good|threads=96|sm_90a"]


def test_the_table_counts_generated_failures_of_working_kernels_and_says_what_it_skipped(generated, capsys):
    assert generated.table(ROWS, 1.0, SimpleNamespace(sample=5, reproducers=0), not_lowered=4) == 0
    text = capsys.readouterr().out
    assert "mutants: 5 of 2 source kernels (1 s); lowered 3, generated failures 2," in text
    assert ("skipped: 2 source kernels (on a target) that fail unmutated (1 fail to lower, 1 are not a kernel); "
            "their 7 mutants are not counted (4 not lowered at all)") in text
    assert "k.py:bad: sm_90a (failed)" in text and "k.py:odd: gfx942 (invalid)" in text
    # the halves and the cluster count the two kept failures, never k.py:bad's on sm_90a
    assert "build    : 1 failures" in text and "held-out : 1 failures" in text
    assert "k.py:bad [threads=96] sm_90a" not in text
