"""Workshop exercises: each check against answers derived by hand here, wrong answers' messages,
and the notebooks run headless twice: as committed (every check says "not answered yet", nothing
raises) and with the solutions of tests/workshop_solutions.py (every check passes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilelab import workshop
from tilelab.workshop import check

from conftest import GPU_PRESENT
from groundtruth import device_wgmma
from workshop_solutions import SOLUTIONS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"01": "01_swizzle_and_banks.ipynb", "02": "02_reading_the_inspector.ipynb",
             "03": "03_launch_verify_time.ipynb", "04": "04_one_kernel_many_targets.ipynb"}


# -- the checks, against hand-derived truths ---------------------------------------------------

def test_128b_swizzle_formula_passes_and_a_wrong_one_names_the_first_mismatch():
    # 128B swizzle, 128-byte rows: physical chunk = logical chunk XOR (row mod 8) (CuTe Swizzle<3,4,3>)
    assert check("01.1", lambda row, c: c ^ (row % 8)).passed
    wrong = check("01.1", lambda row, c: c)  # no swizzle: right for row 0 only
    assert wrong.status == "failed" and "row 1, logical chunk 0" in wrong.message and "chunk 1" in wrong.message
    assert wrong.hint and "XOR" in wrong.hint
    # the 64B rule ((row / 2) mod 4) applied to 128-byte rows: row 1 keeps chunk 0 where 128B moves it
    assert "row 1, logical chunk 0" in check("01.1", lambda row, c: c ^ ((row // 2) % 4)).message
    raising = check("01.1", lambda row, c: 1 // 0)
    assert raising.status == "failed" and "ZeroDivisionError" in raising.message


def test_wavefront_answers():
    # Unswizzled 128-byte rows: chunk 0 of every row is banks 0-3, so 32 threads x 16 B need one
    # wavefront each: 32. With 128B, 8 consecutive rows cover all 32 banks: 512 B / 128 B = 4.
    assert check("01.2", 32).passed and check("01.3", 4).passed
    assert check("01.2", 4).status == "failed" and "32 wavefronts" in check("01.2", 4).message
    assert check("01.3", 32).status == "failed"
    assert check("01.2", "32").status == "failed"  # a number, not text
    assert check("01.2", True).status == "failed"


def test_choosing_a_swizzle_for_64_byte_rows():
    assert check("01.4", "64B").passed and check("01.4", "32B").passed  # both spread the column over all banks
    too_wide = check("01.4", "128B")
    assert too_wide.status == "failed" and "64-byte rows" in too_wide.message  # says why it cannot fit
    assert check("01.4", "none").status == "failed"
    assert check("01.4", "256B").status == "failed"  # not a mode: a clear failure, not an exception


def test_sbo_in_bytes_and_the_encoded_field_is_called_out():
    # K-major, 128B swizzle: core-matrix groups of 8 rows are 8 x 128 B = 1024 B apart (encoded 64)
    assert check("01.5", 1024).passed
    encoded = check("01.5", 64)
    assert encoded.status == "failed" and "encoded" in encoded.message
    assert check("01.5", 128).status == "failed"


def test_inspector_answers_against_the_generated_sources():
    # Box of A: block_K=32 fp16 inner, block_M=128 outer, innermost first.
    assert check("02.1", (32, 128)).passed and check("02.1", [32, 128]).passed
    swapped = check("02.1", (128, 32))
    assert swapped.status == "failed" and "innermost first" in swapped.message
    # The instruction, read from the device CUDA by regular expression (not from the engine).
    from tilelab import inspect

    report = inspect(workshop.workshop_gemm(*workshop.GEMM_ARGS), "sm_90a")
    forms = {f["instruction"] for f in device_wgmma(report.sources.device)["forms"]}
    assert len(forms) == 1
    (instruction,) = forms
    assert check("02.2", instruction).passed
    assert check("02.2", "m64n256k16").status == "failed"


def test_block_k_for_the_128b_swizzle():
    # 128B span / 2 bytes per fp16 = 64 elements of K
    assert check("02.3", 64).passed
    narrow = check("02.3", 32)
    assert narrow.status == "failed" and "64B" in narrow.message
    assert check("02.3", 3).status == "failed"  # does not divide K
    assert check("02.3", -64).status == "failed"


def test_placeholder_unknown_exercise_and_escaping():
    assert check("01.2").status == "unanswered" and check("01.2", ...).status == "unanswered"
    assert not check("01.2")  # falsy until passed
    with pytest.raises(KeyError, match="01.1"):
        check("9.9", 1)
    hostile = workshop.Check("01.1", "<b>t</b>", "failed", '<script>alert(1)</script>"><img onerror=x>', "<i>")
    page = hostile._repr_html_()
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert {e.id for e in workshop.exercises("01")} == {"01.1", "01.2", "01.3", "01.4", "01.5"}
    assert set(SOLUTIONS) == set(workshop.EXERCISES)  # every exercise has a tested solution


def test_many_targets_answers_against_the_generated_sources():
    # The MFMA shape, read from the HIP source by regular expression (not from the engine).
    import re as _re

    from tilelab import inspect

    hip = inspect(workshop.tiled_gemm(*workshop.TARGETS_GEMM_ARGS, target="gfx942"), "gfx942")
    (shape,) = {"x".join(m) for m in _re.findall(r"__builtin_amdgcn_mfma_f32_(\d+)x(\d+)x(\d+)", hip.sources.device)}
    assert check("04.1", shape).passed and check("04.1", f"__builtin_amdgcn_mfma_f32_{shape}f16").passed
    assert check("04.1", "32x32x8").status == "failed" and check("04.1", 16).status == "failed"
    # One stage: a 128x32 and a 32x128 fp16 tile = 2 x 4096 x 2 B = 16384 B; the HIP source puts
    # B's tile right after A's, at byte 8192 of the dynamic LDS.
    assert "buf_dyn_shmem + 8192" in hip.sources.device
    assert check("04.2", 16384).passed
    one_tile = check("04.2", 8192)
    assert one_tile.status == "failed" and "one tile" in one_tile.message
    assert check("04.2", "16384").status == "failed"
    # TMA: the Hopper launcher encodes two tensor maps (A and B); MI300 has no TMA unit.
    hopper = inspect(workshop.tiled_gemm(*workshop.TARGETS_GEMM_ARGS, target="sm_90a"), "sm_90a")
    assert hopper.sources.launcher("cython").text.count("(cuTensorMapEncodeTiled)(") == 2
    assert check("04.3", (2, 0)).passed and check("04.3", [2, 0]).passed
    assert "no Tensor Memory Accelerator" in check("04.3", (2, 2)).message
    assert check("04.3", 2).status == "failed"


@pytest.mark.skipif(GPU_PRESENT, reason="this machine has a GPU: the no-GPU path is not taken")
def test_launch_exercises_say_they_need_a_gpu():
    result = check("03.1", object())
    assert result.status == "needs_gpu" and "no CUDA GPU" in result.message


# -- the notebooks, run headless -----------------------------------------------------------------

def _run(name: str, tmp_path: Path, solved: bool):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = ROOT / "notebooks" / name
    assert re.search(r'"outputs": \[\]', path.read_text())  # committed without outputs
    nb = nbformat.read(path, as_version=4)
    answers = [c for c in nb.cells if c.metadata.get("tilelab", {}).get("answer")]
    assert answers, f"{name} has no answer cells"
    if solved:
        for cell in answers:
            cell.source = SOLUTIONS[cell.metadata["tilelab"]["answer"]]
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, "\n".join("\n".join(o.traceback[-3:]) for o in errors)
    statuses = {}
    for cell in nb.cells:
        ex = cell.metadata.get("tilelab", {}).get("check")
        if ex:
            html_out = [o.data["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
            assert html_out, f"check {ex} showed nothing"
            statuses[ex] = re.search(r'data-status="(\w+)"', html_out[0]).group(1)
    return statuses


@pytest.mark.parametrize("key", ["01", "02", "03", "04"])
def test_notebook_as_committed_runs_top_to_bottom(key, tmp_path):
    statuses = _run(NOTEBOOKS[key], tmp_path, solved=False)
    assert set(statuses) == {e.id for e in workshop.exercises(key)}
    assert set(statuses.values()) == {"unanswered"}


@pytest.mark.parametrize("key", ["01", "02", "04"])
def test_notebook_with_the_solutions_passes_every_check(key, tmp_path):
    statuses = _run(NOTEBOOKS[key], tmp_path, solved=True)
    assert statuses and set(statuses.values()) == {"passed"}, statuses


def test_launch_notebook_with_the_solutions(tmp_path):
    statuses = _run(NOTEBOOKS["03"], tmp_path, solved=True)
    expected = "passed" if GPU_PRESENT else "needs_gpu"
    assert statuses and set(statuses.values()) == {expected}, statuses


@pytest.mark.gpu
@pytest.mark.parametrize("exercise", ["03.1", "03.2"])
def test_launch_exercises_on_the_gpu(exercise, tmp_path):
    """The solutions pass on a real GPU, and the bug the notebook starts from fails 03.1."""
    import importlib.util

    source = "import tilelang.language as T\n\n" + SOLUTIONS[exercise]
    path = tmp_path / f"solution_{exercise.replace('.', '_')}.py"  # T.prim_func reads its source file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    answer = getattr(module, f"answer_{exercise.replace('.', '_')}")
    result = check(exercise, answer)
    print(result)
    assert result.passed, result
    if exercise == "03.1":
        buggy = source.replace("B[by * block_M + i", "if by > 0:\n                    B[by * block_M + i")
        path2 = tmp_path / "buggy.py"
        path2.write_text(buggy)
        spec = importlib.util.spec_from_file_location("buggy", path2)
        mod2 = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod2)
        failed = check(exercise, mod2.answer_03_1)
        assert failed.status == "failed" and "never written" in failed.message, failed
