"""The button a failed cell shows under its error: one click shrinks the cell to a minimal
reproducer, shows it ready to copy and writes it to a new file of the notebook's folder."""

import linecache

import pytest

from tilelab.cell.options import parse_cell_line
from tilelab.cell.session import CellHost, CellSession, CellSource, FoldedTrace, cell_identity
from tilelab.engine.reproducer import code_lines
from tilelab.records.errors import LoweringError
from tilelab.widgets.reproducer import ReproducerButton

# T.gemm's K extents differ (A_s is 64x32, B_s is 64x64 read as K x N): TileLang refuses it while the
# cell runs, so shrinking it needs no lowering and takes a second or two
CELL = """\
import tilelang.language as T

M, N, K = 256, 256, 128
dtype = T.float16


@T.prim_func
def mismatched(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
    with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), dtype)
        B_s = T.alloc_shared((64, 64), dtype)
        C_l = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_l)
        T.copy(A[by * 64, 0], A_s)
        T.copy(B[0, bx * 64], B_s)
        T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 64, bx * 64])
"""


@pytest.mark.slow  # the cell shrunk for real (a second or two alone; 10 s with both cores busy)
def test_the_button_under_a_failed_cell_writes_a_minimal_reproducer_and_shows_it_to_copy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    python = "\n" + CELL
    filename = "<tilelab-button-cell>"
    linecache.cache[filename] = (len(python), None, python.splitlines(True), filename)
    shown = []
    host = CellHost(display=shown.append, traceback=lambda err, tb: [str(err)],
                    syntax_traceback=lambda err: [str(err)], say=lambda line: None)
    with pytest.raises(LoweringError) as info:
        CellSession().run(CellSource(CELL, python, filename, cell_identity({}, CELL)),
                          parse_cell_line("--target sm_90a --force"), {}, host)
    err = info.value
    assert [type(x) for x in shown] == [FoldedTrace, ReproducerButton]  # the trace folded, then the button
    button = shown[1]
    bundle = button._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # a live widget in a notebook
    assert "reproducer()" in bundle["text/plain"]  # and a line to act on where no widget can show
    assert button.script.layout.display == "none" and not list(tmp_path.iterdir())

    said = []
    button.status.observe(lambda change: said.append(change["new"]), "value")
    button.click()
    written = tmp_path / "tilelang_reproducer_mismatched.py"
    assert button.path == written and written.read_text() == button.script.value
    assert button.script.layout.display is None  # the box shows the script, ready to copy
    assert any(line.startswith("reproducer: ") for line in said)  # progress while it shrank
    assert "fails the same way" in button.status.value and str(written) in button.status.value
    script = written.read_text()
    assert "tilelang 0.1.15" in script and "T.gemm(" in script
    assert code_lines(script) <= code_lines(CELL) / 2, script
    assert not button.button.disabled

    assert button._new_path() == tmp_path / "tilelang_reproducer_mismatched_2.py"  # the next click's file: a new one
    assert err.recipe is not None


def test_a_failure_that_cannot_be_written_as_a_script_says_why_and_writes_nothing(tmp_path):
    button = ReproducerButton(LoweringError("TileLang lowering failed: something"), folder=tmp_path)
    button.click()
    assert "cannot write this kernel as a script" in button.status.value
    assert button.path is None and not list(tmp_path.iterdir()) and not button.button.disabled
