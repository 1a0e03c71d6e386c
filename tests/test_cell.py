"""The library under ``%%tilelang``, with no IPython shell: options, the transaction, a run.

A run gets a plain dict as the user's namespace and a host that records what it was asked to
show, say and colour; the cell's source is registered with linecache as IPython would.
"""

from __future__ import annotations

import linecache
import warnings

import pytest
from target_kernels import COPY_CELL

from tilelab.cell.launch import launch_message
from tilelab.cell.options import HELP, CellOptions, CellUsageError, parse_cell_line
from tilelab.cell.session import (
    CellHost,
    CellSession,
    CellSource,
    CellSyntaxError,
    FoldedTrace,
    NameTransaction,
    cell_identity,
    kernel_line,
    lowering_lines,
)
from tilelab.engine.cache import CacheEntryWarning, Recent
from tilelab.records.errors import LoweringError


# -- options -------------------------------------------------------------------------------------
def test_a_line_becomes_a_frozen_record_of_checked_values():
    options = parse_cell_line('--target sm_80 --out-idx 0,1 --args "1024, block=64" --sizes "M=1,N=2;M=3" '
                              '--pass-config tl.disable_tma_lower=True --show tma,summary --rep-ms 5 '
                              '--timeout 2.5 --sanitize --quiet')
    assert options.target == "sm_80" and options.out_idx == (0, 1)
    assert options.args == "1024, block=64"  # unquoted; evaluated later in the user's namespace
    assert options.sizes == ({"M": 1, "N": 2}, {"M": 3})
    assert options.pass_configs == {"tl.disable_tma_lower": True}
    assert options.show == ("tma", "summary") and options.rep_ms == 5.0 and options.timeout == 2.5
    assert options.sanitize == "memcheck" and options.quiet and options.launches
    assert not parse_cell_line("").launches and parse_cell_line("").target is None
    # a profile's hot lines reach the cell only through the toolchain tier's #line links
    assert parse_cell_line("--profile").sass and not parse_cell_line("").sass
    with pytest.raises(AttributeError):
        options.force = True  # type: ignore[misc]


def test_only_the_options_that_shape_the_build_are_its_build_options():
    base = parse_cell_line("--target sm_90a").build_options
    for same in ("--target sm_90a --quiet --show tma", "--target sm_90a --run --bench --force", "--target sm_90a "
                 "--sizes M=1"):
        assert parse_cell_line(same).build_options == base, same
    for other in ("--target sm_80", "--target sm_90a --out-idx -1", "--target sm_90a --kernel k",
                  "--target sm_90a --sass", "--target sm_90a --passes", "--target sm_90a --backend cython"):
        assert parse_cell_line(other).build_options != base, other


@pytest.mark.parametrize("line, needle", [
    ("--bogus", "Valid options: --target TARGET, --backend {tvm_ffi,cython,nvrtc,cutedsl}"),
    ("--target sm_9x", "%%tilelang --target 'sm_9x'"),
    ("--out-idx x", "--out-idx takes an integer"),
    ("--pass-config nokey", "--pass-config takes KEY=VALUE"),
    ("--pass-config tl.no_such_key=1", "Valid keys: "),
    ("--show tma,nope", "choose from summary, cuda, launcher, tma"),
    ("--sizes M=x", "--sizes: M must be an integer; got 'x'"),
    ("--sizes M=1;;M=2", "empty size set"),
    ("--rep-ms 0", "--rep-ms takes a positive number"),
    ("--timeout inf", "--timeout: expected a positive number of seconds"),
    ("--sanitize leakcheck", "choose one of memcheck, racecheck, synccheck, initcheck"),
    ('--show ""', "--show: give at least one tab"),
    ("--show ,", "--show: give at least one tab"),
])
def test_a_bad_option_names_itself_and_what_is_valid(line, needle):
    with pytest.raises(CellUsageError) as caught:
        parse_cell_line(line)
    assert needle in str(caught.value) and str(caught.value).startswith("%%tilelang")


def test_the_help_is_generated_from_the_parser():
    for option in ("--target", "--backend", "--out-idx", "--pass-config", "--kernel", "--args", "--show",
                   "--no-compile", "--force", "--quiet", "--run", "--ref", "--bench", "--sizes", "--rep-ms", "--sass",
                   "--passes", "--profile", "--timeout", "--in-process", "--sanitize"):
        assert option in HELP, option
    assert HELP.lstrip(":\n ").startswith("%tilelang [--target TARGET]")


# -- the transaction --------------------------------------------------------------------------------
def test_a_failing_block_restores_every_name_and_a_passing_one_keeps_them():
    kept, rebound = object(), object()
    ns = {"kept": kept, "rebound": rebound, "_private": 1}
    with pytest.raises(RuntimeError), NameTransaction(ns) as names:
        ns["rebound"] = "new value"
        ns["fresh"] = 1
        del ns["kept"]
        assert names.changed() == ["rebound", "fresh"]
        raise RuntimeError("the cell failed")
    assert ns == {"kept": kept, "rebound": rebound, "_private": 1} and ns["kept"] is kept
    with NameTransaction(ns):
        ns["fresh"] = 2
    assert ns["fresh"] == 2


# -- the bounded, validating memory store -----------------------------------------------------------
def test_recent_forgets_the_least_recently_used_and_answers_only_for_its_material():
    store = Recent("thing", 2)
    store.put("a", 1, material=("cell a",))
    store.put("b", 2, material=("cell b",))
    assert store.get("a", ("cell a",)) == 1  # a is now the most recent
    store.put("c", 3, material=("cell c",))
    assert "b" not in store and len(store) == 2 and store.get("c", ("cell c",)) == 3
    with pytest.warns(CacheEntryWarning, match="discarded the thing kept in memory"):
        assert store.get("a", ("another cell",)) is None
    assert "a" not in store  # discarded, not kept for the next reader
    with pytest.raises(ValueError, match="at least 1"):
        Recent("thing", 0)


# -- a run, with a recording host --------------------------------------------------------------------
class Host:
    def __init__(self):
        self.shown, self.said, self.tracebacks = [], [], []

    def host(self) -> CellHost:
        def traceback(err, tb):
            self.tracebacks.append((err, tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            return [f"{type(err).__name__}: {err}"]

        return CellHost(display=self.shown.append, traceback=traceback,
                        syntax_traceback=lambda err: [f"SyntaxError at line {err.lineno}"], say=self.said.append)


def source(text: str, name: str) -> CellSource:
    python = "\n" + text
    filename = f"<tilelab-test-{name}>"
    linecache.cache[filename] = (len(python), None, python.splitlines(True), filename)  # as IPython registers cells
    return CellSource(text, python, filename, cell_identity({}, text))


def test_a_run_inspects_the_kernel_shows_it_and_a_rerun_is_a_cache_hit(tmp_path, monkeypatch):
    from tilelab.widgets.inspector import Inspector

    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    session, host, ns = CellSession(), Host(), {}
    cell = source(COPY_CELL, "copy")
    first = session.run(cell, parse_cell_line("--target sm_80"), ns, host.host())
    assert first.kernels == ["copy_tile"] and first.shown == "copy_tile" and not first.cache_hit
    assert first.report.name == "copy_tile" and first.report.target == "sm_80"
    assert type(ns["copy_tile"]).__name__ == "PrimFunc" and first.bound == {}  # no GPU: nothing compiled
    assert isinstance(host.shown[-1], Inspector) and host.shown[-1] is first.inspector
    again = session.run(cell, parse_cell_line("--target sm_80 --quiet"), ns, host.host())
    assert again.cache_hit and again.report is first.report and again.inspector is None
    assert session.last is again and len(host.shown) == 1  # --quiet shows nothing
    assert not session.run(cell, parse_cell_line("--target sm_90a --quiet"), ns, host.host()).cache_hit


def test_a_cell_without_kernels_runs_as_a_plain_cell_and_says_so():
    session, host, ns = CellSession(), Host(), {}
    assert session.run(source("x = 41 + 1\n", "plain"), CellOptions(), ns, host.host()) is None
    assert ns["x"] == 42 and "defines no TileLang kernel" in host.said[0] and not host.shown


def test_a_python_error_restores_the_names_and_keeps_only_the_cells_frames():
    session, host, ns = CellSession(), Host(), {"keep": "before"}
    cell = source("keep = 'after'\nfresh = 1\nundefined_here + 1\n", "error")
    with pytest.raises(NameError) as caught:
        session.run(cell, CellOptions(), ns, host.host())
    assert ns == {"keep": "before"}  # "fresh" (and what exec added) is gone, "keep" restored
    ((err, filename, line),) = host.tracebacks
    assert err is caught.value and filename == cell.filename and line == 4  # line 1 is %%tilelang
    assert caught.value._render_traceback_() == ["NameError: name 'undefined_here' is not defined"]


def test_a_syntax_error_is_the_cell_line_alone():
    session, host, ns = CellSession(), Host(), {}
    with pytest.raises(CellSyntaxError) as caught:
        session.run(source("a = 1\ny = (\n", "syntax"), CellOptions(), ns, host.host())
    assert caught.value.lineno == 3 and caught.value._render_traceback_() == ["SyntaxError at line 3"]
    assert "a" not in ns


def test_an_option_that_does_not_fit_the_kernel_restores_the_names():
    session, host, ns = CellSession(), Host(), {}
    with pytest.raises(CellUsageError, match="copy_tile is a T.prim_func, already specialised"):
        session.run(source(COPY_CELL, "args"), parse_cell_line('--args "1024"'), ns, host.host())
    assert "copy_tile" not in ns and "T" not in ns
    with pytest.raises(CellUsageError, match="It defines: copy_tile"):
        session.run(source(COPY_CELL, "kernel"), parse_cell_line("--kernel other"), ns, host.host())
    assert "copy_tile" not in ns


# -- errors made short ---------------------------------------------------------------------------------
GEMM_LIKE = '''import tilelang.language as T

@T.prim_func
def tiny(A: T.Tensor((128, 64), T.float16)):
    with T.Kernel(1, threads=96) as bx:
        S = T.alloc_shared((128, 64), T.float16)
        T.gemm(S, S, S)
'''


def test_a_lowering_error_points_at_the_operation_it_names_in_the_cell():
    cell = source(GEMM_LIKE, "lowering")
    err = LoweringError("No valid warp partition for T.gemm: 3 warps", kernel="tiny")
    assert kernel_line(err, cell) == (8, "        T.gemm(S, S, S)")  # line 1 is %%tilelang
    lines = lowering_lines(err, cell)
    assert lines == ["LoweringError: No valid warp partition for T.gemm: 3 warps",
                     "  cell line 8: T.gemm(S, S, S)", "  (the full TileLang trace is folded above)"]
    # a recorded frame of the cell wins; a kernel the cell does not define gives no line
    framed = LoweringError("boom", kernel="tiny", kernel_line=(cell.filename, 6, "    with ..."))
    assert kernel_line(framed, cell)[0] == 6
    assert kernel_line(LoweringError("boom", kernel="elsewhere"), cell) is None


def test_the_folded_trace_is_escaped_and_says_its_length_as_text():
    trace = FoldedTrace(LoweringError("x", kernel="<b>k</b>", trace="line <1>\nline 2"))
    bundle = trace._repr_mimebundle_()
    assert "<b>&lt;b&gt;k&lt;/b&gt;</b>" in bundle["text/html"] and "line &lt;1&gt;" in bundle["text/html"]
    assert bundle["text/plain"] == "(the full TileLang trace of <b>k</b>: 2 lines, folded in the HTML view)"


def test_a_missing_dynamic_size_names_the_sizes_option():
    message = launch_message(ValueError("size m, n is dynamic: give it as a keyword"), {"k": 8})
    assert message.startswith("%%tilelang --run/--bench (at --sizes 'k=8'): the kernel's size m, n is dynamic")
    assert '--sizes "m=4096,n=4096"' in message
    other = launch_message(TypeError("bad ref"), {})
    assert other == ("%%tilelang --run/--bench: TypeError: bad ref. Check --sizes (dynamic sizes), --ref (the "
                     "reference's arguments and outputs) and --out-idx.")


def test_a_cell_is_known_by_its_front_end_id_else_by_its_text():
    assert cell_identity({"metadata": {"cellId": "abc"}}, "x = 1") == "id:abc"
    assert cell_identity({}, "x = 1") == cell_identity(None, "x = 1") != cell_identity({}, "x = 2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cell_identity({"metadata": None}, "x").startswith("text:")


# -- launching, with tilelab.launch's functions replaced by recorders ------------------------------------
def test_launches_go_to_each_size_set_with_the_options_and_say_a_failed_check(monkeypatch):
    import tilelab.launch as launch
    from tilelab.cell.kernels import Build, Call, CellEntry
    from tilelab.cell.launch import launch_cell

    calls, said = [], []

    class Checked:
        passed = False

        def __repr__(self):
            return "RunResult gemm: FAIL (C off by 0.5)\nmore lines"

    monkeypatch.setattr(launch, "run",
                        lambda kernel, ref=None, **kw: calls.append(("run", kernel, ref, kw)) or Checked())
    monkeypatch.setattr(launch, "bench", lambda kernel, **kw: calls.append(("bench", kernel, None, kw)) or "timed")
    options = parse_cell_line('--run --bench --sizes "M=1;M=2" --rep-ms 4 --in-process --timeout 3')
    entry = CellEntry(report=None, compiled={"gemm": "compiled gemm"})  # type: ignore[arg-type]
    build = Build(("gemm",), "gemm", Call(), options, gpu=True)
    out = launch_cell(entry, build, {"gemm": object()}, max, said.append)
    assert [c[0] for c in calls] == ["run", "bench", "run", "bench"] and all(c[1] == "compiled gemm" for c in calls)
    assert calls[0][2] is max and calls[0][3] == {"isolate": False, "timeout": 3.0, "M": 1}
    assert calls[3][3] == {"rep_ms": 4.0, "warmup_ms": 4.0, "isolate": False, "timeout": 3.0, "M": 2}
    assert len(out.timing) == 4 and out.benches[0] == "timed"
    assert said == ["%%tilelang --run: RunResult gemm: FAIL (C off by 0.5) at M=1",
                    "%%tilelang --run: RunResult gemm: FAIL (C off by 0.5) at M=2"]
    # a launch that needs a size the line did not give names --sizes
    monkeypatch.setattr(launch, "run", lambda kernel, **kw: (_ for _ in ()).throw(ValueError("size n is dynamic")))
    with pytest.raises(CellUsageError, match='Pass it with --sizes "n=4096"'):
        launch_cell(entry, Build(("gemm",), "gemm", Call(), parse_cell_line("--run"), gpu=True), {}, None, said.append)
    # tilelab's own errors already say what to change: no generic hint about --sizes/--ref appended,
    # even for one that is also a ValueError (a misaligned tensor)
    from tilelab.launch._run import MisalignedTensorError

    def misaligned(kernel, **kw):
        raise MisalignedTensorError("tensor A is not 16-byte aligned: pass a contiguous tensor")

    monkeypatch.setattr(launch, "run", misaligned)
    with pytest.raises(CellUsageError) as caught:
        launch_cell(entry, Build(("gemm",), "gemm", Call(), parse_cell_line("--run"), gpu=True), {}, None, said.append)
    assert str(caught.value) == ("%%tilelang --run/--bench: tensor A is not 16-byte aligned: pass a contiguous "
                                 "tensor")


def test_a_refused_launch_says_why_and_launches_nothing():
    from tilelab.cell.kernels import Build, Call, CellEntry, launch_refusal
    from tilelab.cell.launch import launch_cell
    from tilelab.records.launch import Launches

    refusal = launch_refusal("gfx942", gpu=False)
    assert "gfx942" in refusal and "inspect-only" in refusal
    assert launch_refusal(None, gpu=False) == "there is no CUDA GPU here" and launch_refusal(None, gpu=True) is None
    said = []
    build = Build(("k",), "k", Call(), parse_cell_line("--target gfx942 --bench"), gpu=False, refusal=refusal)
    assert launch_cell(CellEntry(report=None), build, {}, None, said.append) == Launches()  # type: ignore[arg-type]
    assert said == [f"%%tilelang: --bench was skipped: {refusal}; inspection still works (the inspector below shows "
                    "what TileLang generated for the target); --run and --trace run the tile program on the CPU."]
    said.clear()
    build = Build(("k",), "k", Call(), parse_cell_line("--run --device cuda"), gpu=False,
                  refusal=launch_refusal(None, gpu=False))
    assert launch_cell(CellEntry(report=None), build, {}, None, said.append) == Launches()  # type: ignore[arg-type]
    assert said == ["%%tilelang: --run was skipped: there is no CUDA GPU here; inspection still works (the inspector "
                    "below shows what TileLang generated for the target)."]


