"""The fault catalogue on a real GPU (marker ``gpu``): every case of tests/fault_catalogue.py, run
one after the other in one fresh notebook-like process, each with what the user sees and the next
launch in that same process passing. benchmarks/isolation.py prints the same cases as a table.
Cases that take minutes (compute-sanitizer) run there and in tests/launch/test_isolation_gpu.py.
Run on a GPU machine:  python -m pytest -m gpu tests/launch/test_fault_catalogue_gpu.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fault_catalogue as catalogue
import pytest
from gpu_only import skip_module_without_cuda

pytestmark = pytest.mark.gpu
skip_module_without_cuda(__name__)

ROOT = Path(__file__).resolve().parents[2]
QUICK = [case for case in catalogue.CASES if not case.slow]


@pytest.fixture(scope="module")
def outcomes():
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fault_catalogue.py")], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CASE "):
            record = json.loads(line[len("CASE "):])
            found[record["id"]] = record
    return found, proc


def test_the_catalogue_has_at_least_fifteen_gpu_faults():
    assert len(catalogue.CASES) >= 15 and len({c.id for c in catalogue.CASES}) == len(catalogue.CASES)


@pytest.mark.parametrize("case_id", [c.id for c in QUICK])
def test_fault_case(case_id, outcomes):
    found, proc = outcomes
    if case_id not in found:
        pytest.fail(f"{case_id}: no result; the catalogue process ended (exit {proc.returncode}) before it:\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    record = found[case_id]
    if not record["available"]:
        pytest.skip(f"{case_id}: {record['shown']}")
    print(f"{case_id}: {record['shown'][:400]} ({record['seconds']:.2f} s; next launch ok: {record['next_ok']})")
    assert record["problem"] is None, f"{case_id}: {record['problem']}\nshown: {record['shown'][:2000]}"
