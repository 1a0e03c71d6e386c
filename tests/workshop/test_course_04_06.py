"""Notebooks 04-06 of the course and their lessons (``tilelab/workshop/lessons/l04..l06``).

The generic course tests (``test_workshop.py``) run every exercise's solution, no answer and each
declared wrong answer. Here: the truths the checks compute agree with hand-derived values and with
the hardware tables; the recognised misconceptions are named; the notebooks' kernel cells build
the kernels the lessons reason about. (``test_workshop_notebooks.py`` runs every notebook top to
bottom on the CPU, as committed and with the solutions.)
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import GPU_PRESENT

from tilelab import workshop
from tilelab.workshop import _answers, _core

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {"04": "04_gemm.ipynb", "05": "05_pipelining_and_tma.ipynb", "06": "06_banks_swizzles_wgmma.ipynb"}


@pytest.fixture(autouse=True)
def own_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_PROGRESS", str(tmp_path / "progress.json"))
    _core._reset_for_tests()


def _check(exercise_id: str, source: str):
    return workshop.check(exercise_id, _answers.evaluate(_core.get(exercise_id), source))


def _notebook(key: str):
    import nbformat  # here, so the GPU tests of this file need no notebook tools

    return nbformat.read(ROOT / "notebooks" / NOTEBOOKS[key], as_version=4)


# ------------------------------------------------------------------------------------------
# The lessons' truths against hand-derived values
# ------------------------------------------------------------------------------------------


def test_the_three_lessons_declare_enough_exercises_of_the_kinds_asked():
    ours = [e for e in workshop.exercises() if e.notebook in NOTEBOOKS]
    kernels = [e for e in ours if e.kind in ("writes", "fixes") and e.id not in ("06.1",)]
    assert len(ours) >= 10 and len(kernels) >= 5, [(e.id, e.kind) for e in ours]
    assert all(len(e.hints) in (2, 3) and _core.wrong_answers(e.id) for e in ours)


def test_stage_bytes_and_most_stages_match_the_arithmetic_of_the_tiles():
    # 128x64 + 64x128 fp16 values = 32768 bytes a stage; 227 KiB per block on Hopper (CUDA C++
    # Programming Guide, compute capability 9.0) holds 7 of them.
    assert _check("05.1", "answer_05_1 = 32768").passed
    assert _check("05.2", "answer_05_2 = 7").passed
    assert (227 * 1024) // 32768 == 7


def test_bank_counts_match_the_hand_derived_rule():
    # Unswizzled 128-byte rows: chunk 0 of all 32 rows shares banks 0-3, one row per wavefront.
    # 128B swizzle: 8 rows' chunk 0 cover the 32 banks once: 512 bytes in 4 wavefronts.
    assert _check("06.2", "answer_06_2 = 32").passed and _check("06.3", "answer_06_3 = 4").passed
    assert not _check("06.2", "answer_06_2 = 31").passed


def test_the_128b_swizzle_is_chunk_xor_row_mod_8_and_nothing_else():
    assert _check("06.1", "def f(r, c):\n    return c ^ (r & 7)\n\nanswer_06_1 = f").passed
    assert not _check("06.1", "def f(r, c):\n    return c ^ ((r + 1) & 7)\n\nanswer_06_1 = f").passed


def test_sbo_in_bytes_is_eight_rows_of_a_128_byte_panel():
    assert _check("06.5", "answer_06_5 = 8 * 128").passed


@pytest.mark.parametrize("exercise_id,source,named", [
    ("05.1", "answer_05_1 = 65536", "fp16"),
    ("05.1", "answer_05_1 = 98304", "all 3 stages"),
    ("05.2", "answer_05_2 = 14", "A's tile only"),
    ("05.2", "answer_05_2 = 1", "opt-in"),
    ("05.4", 'answer_05_4 = {"A": "cp.async", "B": "cp.async", "C": "plain"}', "reaches every copy"),
    ("05.4", 'answer_05_4 = {"A": "TMA", "B": "TMA", "C": "cp.async"}', "cannot store"),
    ("06.1", "def f(r, c):\n    return (c + r) % 8\n\nanswer_06_1 = f", "addition"),
    ("06.3", "answer_06_3 = 32", "without a swizzle"),
    ("06.4", 'answer_06_4 = "128B"', "wider than these 64-byte rows"),
    ("06.5", "answer_06_5 = 64", "encoded field"),
    ("06.6", "answer_06_6 = (128, 32)", "innermost first"),
    ("06.7", 'answer_06_7 = "m64n128k16"', "two consumer warpgroups"),
])
def test_a_recognised_misconception_is_named(exercise_id, source, named):
    result = _check(exercise_id, source)
    assert result.status == "failed" and named in result.message, result


def test_the_cpu_gemm_feedback_tells_a_cleared_accumulator_from_an_unwritten_tile():
    from tilelab.workshop.lessons import l04_gemm as lesson

    cleared = _check("04.1", lesson.cpu_cell(lesson._cpu_body(clear_inside=True)))
    assert cleared.status == "failed" and "cleared on every step of K" in cleared.message
    swapped = _check("04.1", lesson.cpu_cell(lesson._cpu_body(store_at="C[bx * block_M, by * block_N]")))
    assert swapped.status == "failed" and "never written" in swapped.message
    assert "o" in swapped.message.split("\n", 1)[1]  # the tile map marks the unwritten tiles


def test_a_hopper_gemm_without_a_pipeline_is_told_its_loads_are_not_tma():
    from tilelab.workshop.lessons import l04_gemm as lesson

    result = _check("04.2", lesson.hopper_cell(lesson._hopper_body(stages=0)))
    assert result.status == "failed" and "not a TMA bulk copy" in result.message


def test_block_k_128_passes_and_says_the_tile_arrives_in_two_boxes():
    result = _check("06.8", "answer_06_8 = matmul(1024, 1024, 1024, 128, 128, 128)")
    assert result.passed and "2 boxes of (64, 128)" in result.message, result


def test_the_speed_exercise_checks_the_size_asked_for_and_waits_for_a_gpu():
    small = _check("04.3", "answer_04_3 = matmul(1024, 1024, 1024, 128, 256, 64)")
    assert small.status == "failed" and "4096" in small.message
    if not GPU_PRESENT:
        result = _check("04.3", _core.get("04.3").solution)
        assert result.status == "needs_gpu" and "Hopper" in result.message


@pytest.mark.gpu
def test_the_speed_solution_reaches_the_goal_against_torch_on_this_gpu():
    result = _check("04.3", _core.get("04.3").solution)
    assert result.passed, result


# ------------------------------------------------------------------------------------------
# The notebooks as committed
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(NOTEBOOKS))
def test_each_exercise_has_one_answer_and_one_check_cell_and_nothing_is_committed_run(key):
    nb = _notebook(key)
    answers = [c.metadata["tilelab"]["answer"] for c in nb.cells if c.metadata.get("tilelab", {}).get("answer")]
    checks = [c for c in nb.cells if c.metadata.get("tilelab", {}).get("check")]
    ids = [e.id for e in workshop.exercises(key)]
    assert answers == ids and [c.metadata["tilelab"]["check"] for c in checks] == ids
    for cell in checks:
        ex = _core.get(cell.metadata["tilelab"]["check"])
        assert cell.source == f'workshop.check("{ex.id}", {ex.answer_name})'
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
            assert not re.search(r"\btilelab\._|from tilelab\.\w*\._|from tilelab import _", cell.source), cell.source
    first = next(c for c in nb.cells if c.cell_type == "code").source
    assert "import tilelab" in first and "from tilelab import workshop" in first


@pytest.mark.parametrize("key", sorted(NOTEBOOKS))
def test_every_committed_answer_is_unanswered_and_every_solution_completes_its_cell(key):
    nb = _notebook(key)
    for cell in nb.cells:
        ex_id = cell.metadata.get("tilelab", {}).get("answer")
        if not ex_id:
            continue
        ex = _core.get(ex_id)
        assert workshop.check(ex_id, _answers.evaluate(ex, cell.source)).status == "unanswered", ex_id
        # a kernel cell's solution keeps the cell's first line (the magic's options) and its signature
        if cell.source.startswith("%%"):
            assert ex.solution.splitlines()[0] == cell.source.splitlines()[0]
            signature = next(line for line in cell.source.splitlines() if line.startswith("def "))
            assert signature in ex.solution


def _kernel_cell(key: str, name: str) -> str:
    nb = _notebook(key)
    return next(c.source for c in nb.cells if c.cell_type == "code" and f"def {name}(" in c.source
                and not c.metadata.get("tilelab"))


@pytest.mark.parametrize("key,name,lesson_call", [
    ("05", "matmul", "l05_pipelining_and_tma.lesson_gemm(1024, 1024, 1024, 128, 128, 64)"),
    ("06", "matmul", "l06_banks_swizzles_wgmma.lesson_gemm(1024, 1024, 1024, 128, 128, 32)"),
])
def test_the_notebook_inspects_the_kernel_its_lesson_computes_the_truth_from(key, name, lesson_call):
    import tilelab
    from tilelab.workshop import lessons  # noqa: F401
    from tilelab.workshop.lessons import l05_pipelining_and_tma, l06_banks_swizzles_wgmma  # noqa: F401

    namespace: dict = {}
    _answers.run_cell(_answers.PRELUDE, namespace, "prelude")
    cell = _kernel_cell(key, name)
    _answers.run_cell(cell, namespace, f"nb{key}")
    args = ast.literal_eval("(" + re.search(r'--args "([^"]+)"', cell).group(1) + ",)")
    ours = tilelab.inspect(namespace[name](*args), "sm_90a")
    theirs = tilelab.inspect(eval(lesson_call), "sm_90a")
    for field in ("tma_descriptors", "wgmma"):
        strip = [tuple((k, v) for k, v in d.to_dict().items() if k not in ("kernel", "name", "buffer"))
                 for d in getattr(ours, field)]
        want = [tuple((k, v) for k, v in d.to_dict().items() if k not in ("kernel", "name", "buffer"))
                for d in getattr(theirs, field)]
        assert json.dumps(strip, default=str) == json.dumps(want, default=str), field
    assert ours.kernels[0].dynamic_shared_memory_bytes == theirs.kernels[0].dynamic_shared_memory_bytes
    assert ours.lowering.stage_bytes == theirs.lowering.stage_bytes


def test_the_speed_check_compares_with_the_baseline_measured_in_the_same_call(monkeypatch):
    """The GPU part's arithmetic, on the CPU: launches and timings replaced by records of known
    medians (the kernel's lowering is still TileLang's)."""
    import tilelab
    from tilelab.launch import BenchResult, OutputCheck, RunResult
    from tilelab.workshop.lessons import l04_gemm as lesson

    flops = 2.0 * 4096 ** 3
    timings = {"kernel": 2.0, "torch.matmul": 1.0}
    calls = []

    def bench(kernel, *args, **options):
        name = "torch.matmul" if callable(kernel) and not hasattr(kernel, "params") else "kernel"
        calls.append(name)
        return BenchResult(kernel=name, samples_ms=(timings[name],) * 5, flops=flops, device="a GPU")

    from tilelab.workshop import _isolate

    monkeypatch.setattr(tilelab, "has_gpu", lambda: True)
    monkeypatch.setattr(_isolate, "can_isolate", lambda: False)  # where a GPU is in use the check runs here
    monkeypatch.setattr(tilelab, "run", lambda *a, **k: RunResult("gemm", (OutputCheck("C", "float16", (4096, 4096)),)))
    monkeypatch.setattr(tilelab, "bench", bench)
    monkeypatch.setattr(lesson, "_torch_rate", lambda torch, M, N, K: bench(lambda: None))
    solution = _core.get("04.3").solution
    slow = _check("04.3", solution)
    assert slow.status == "failed" and "50% of torch.matmul" in slow.message and calls == ["kernel", "torch.matmul"]
    timings["kernel"] = 1.25
    fast = _check("04.3", solution)
    assert fast.passed and "80% of torch.matmul" in fast.message, fast
