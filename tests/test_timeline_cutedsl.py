"""The intra-kernel timeline on the CuTeDSL backend without a GPU: the CuTe DSL rewrite on the kernels'
CuTe DSL Python as TileLang's CuTeDSL codegen writes it (checked against the kernels' Python lines,
the plain CuTe DSL source the launcher tab shows, and the CUDA rewrite of the same kernels), the
source still Python with every original statement in place, and, where nvidia-cutlass-dsl is
installed, the instrumented kernel compiled by CuTe DSL to a cubin whose SASS reads the clocks and
keeps the plain kernel's WGMMA structure."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import timeline_kernels
from timeline_kernels import by_kind, gemm_phases, line_of, plain_line

from tilelab import _tilelang
from tilelab.engine.toolchain import find_toolchain
from tilelab.instrument.rewrite.timeline import KERNEL_END, KERNEL_START, RewriteError
from tilelab.instrument.rewrite.timeline import instrument as instrument_cuda
from tilelab.instrument.rewrite.timeline_cutedsl import instrument
from tilelab.kernels.gemm import matmul

GEMM_PY = inspect.getsourcefile(matmul)
KERNELS_PY = inspect.getsourcefile(timeline_kernels)
KERNELS = {
    "gemm": (lambda: matmul(1024, 1024, 1024), "sm_90a"),
    "flash": (lambda: timeline_kernels.flash_fwd(), "sm_90a"),
    "sm80": (lambda: matmul(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, threads=128, num_stages=3,
                            raster=0), "sm_80"),
    "add": (lambda: timeline_kernels.add(), "sm_90a"),
}
_CACHE: dict[str, SimpleNamespace] = {}


def lowered(name: str) -> SimpleNamespace:
    """The kernel's CuTe DSL source with the record buffer (``source``), its launcher (``host``),
    the instrumented source (``ins``), the plain CuTe DSL source without the buffer (``plain``)."""
    if name not in _CACHE:
        make, arch = KERNELS[name]
        func = make()
        prim = _tilelang.resolve_kernel(func).prim_func
        ops = _tilelang.timeline_ops(prim)
        source, host = _tilelang.cutedsl_timeline_sources(prim, arch)
        threads = _tilelang.cutedsl_threads(host)
        ins = instrument(source, threads=threads, ops=ops, blocks=32, traced_blocks=(0, 5))
        scheduled = _tilelang.tilelang().tvm.IRModule({str(prim.attrs["global_symbol"]): prim})
        plain = dict(_tilelang.cutedsl_launcher(prim, scheduled, arch, {}).extra)["device.py"]
        _CACHE[name] = SimpleNamespace(func=func, prim=prim, arch=arch, ops=ops, source=source, host=host,
                                       threads=threads, ins=ins, plain=plain)
    return _CACHE[name]


def test_the_record_buffer_is_the_kernels_last_argument_and_the_launcher_passes_it_as_int64():
    k = lowered("gemm")
    assert re.search(r"^def gemm_kernel\(A_desc, B_desc, C, tlt_buf\):", k.source, re.M)
    assert "TLT_BIND(tlt_buf)" in k.source and "tlt_buf" not in k.plain
    assert k.prim.buffer_map[k.prim.params[-1]].dtype == "float16"  # the user's prim_func is left alone
    assert "def call(A, B, C, tlt_buf, tlt_words, stream" in k.host
    assert _tilelang.record_dtype("cutedsl") == "int64" and _tilelang.record_dtype("tvm_ffi") == "uint64"


def test_the_launchers_threads_include_the_producer_warp_group():
    k = lowered("gemm")
    assert "threads=256" in Path(GEMM_PY).read_text()  # the T.Kernel's, for two consumer warp groups
    assert re.search(r"block=\[384, 1, 1\]", k.host)
    assert k.threads == 384 == k.ins.threads
    # the same number from the lowered device module's thread extents (what a compiled kernel holds)
    cuda = _tilelang.lower(_tilelang.resolve_kernel(k.func), "sm_90a", out_idx=None, pass_configs={}, backends=())
    assert _tilelang.cutedsl_threads(SimpleNamespace(artifact=SimpleNamespace(device_mod=cuda.device_mod))) == 384


def test_the_warp_specialised_gemm_gets_each_phase_named_by_the_users_lines():
    k = lowered("gemm")
    ins, plain = k.ins, k.plain
    p = gemm_phases(ins, GEMM_PY, 1024 // 64)
    # device lines point at the statement in the plain CuTe DSL source (the launcher tab's device.py)
    assert "tl.mbarrier_wait(" in plain_line(plain, p.empty.device_line)
    assert "tl.mbarrier_wait(" in plain_line(plain, p.full.device_line)
    assert "if tl.shuffle_elect(" in plain_line(plain, p.issue.device_line)
    assert "tl.warpgroup_arrive()" in plain_line(plain, p.mma.device_line)
    assert "tl.warpgroup_wait(" in plain_line(plain, p.mma_wait.device_line)
    trips = re.findall(r"for (k|k_\d+) in range\((\d+)\):", plain)
    assert [int(t) for _, t in trips] == [1024 // 64] * 2


@pytest.mark.parametrize("name", ["gemm", "sm80", "add"])
def test_the_cutedsl_rewrite_finds_the_phases_the_cuda_rewrite_finds(name):
    """The same kernel lowered for CUDA and for CuTeDSL: the two rewrites find the same phases, with
    the same names, roles, user lines and counts, so a timeline reads alike on every backend."""
    k = lowered(name)
    cuda = instrument_cuda(_tilelang.timeline_device_source(k.func, k.arch), ops=k.ops,
                           cell_file=_tilelang.kernel_file(k.func), blocks=32, traced_blocks=(0, 5))

    def table(ins):
        return [(s.kind, s.role, s.label, s.cell_line, s.multiplicity, s.stage, s.in_loop) for s in ins.sites]

    assert table(k.ins) == table(cuda)
    assert (k.ins.threads, k.ins.capacity, k.ins.warps, k.ins.words()) == (cuda.threads, cuda.capacity, cuda.warps,
                                                                          cuda.words())


def test_flash_attention_names_both_gemms_and_both_loads():
    ins = lowered("flash").ins
    k_line, v_line = line_of(KERNELS_PY, "T.copy(K[k"), line_of(KERNELS_PY, "T.copy(V[k")
    qk, pv = line_of(KERNELS_PY, "T.gemm(Q_s, K_s"), line_of(KERNELS_PY, "T.gemm(P, V_s")
    assert [s.cell_line for s in by_kind(ins, "tma_issue", "producer")] == [k_line, v_line]
    mmas = by_kind(ins, "mma", "consumer")
    assert [s.cell_line for s in mmas] == [qk, pv]
    plain = lowered("flash").plain.split("\n")
    rs_line = next(i + 1 for i, t in enumerate(plain) if "tl.wgmma_rs(" in t)  # P from registers
    assert mmas[0].device_line < mmas[1].device_line < rs_line
    assert len(by_kind(ins, "mma_wait", "consumer")) == 2
    (epilogue,) = by_kind(ins, "epilogue", "consumer")
    assert epilogue.cell_line == line_of(KERNELS_PY, "T.copy(acc, O[")  # named by the copy that writes O


def test_the_sm80_cp_async_pipeline_has_no_producer_and_marks_its_issue_wait_and_mma():
    ins, plain = lowered("sm80").ins, lowered("sm80").plain
    assert not by_kind(ins, "tma_issue") and {s.role for s in ins.sites} == {"all"}
    issue = by_kind(ins, "copy_issue")[1]  # the main loop's
    wait = [s for s in by_kind(ins, "barrier_wait") if "cp.async wait" in s.label][0]
    assert "tl.cp_async_gs(" in plain_line(plain, issue.device_line + 1)
    assert "tl.cp_async_wait(" in plain_line(plain, wait.device_line)
    assert issue.multiplicity == 1024 // 32 - 2  # the loop TileLang wrote: range(30), two stages prologue
    assert by_kind(ins, "mma")[0].cell_line == line_of(GEMM_PY, "T.gemm(A_shared")


def test_an_elementwise_kernel_falls_back_to_kernel_start_and_end_with_a_note():
    ins = lowered("add").ins
    assert ins.sites == () and "no pipeline phase was recognised" in ins.notes[0]
    assert f"tlt_mark(tlt_seg, cutlass.Int32(0), {KERNEL_START})" in ins.source
    assert f"tlt_mark(tlt_seg, tlt_n, {KERNEL_END})" in ins.source


def _original_statements(text: str) -> list[str]:
    """The kernel's own lines: the instrumented source less the timeline's lines and helpers."""
    out, helpers = [], False
    for line in text.split("\n"):
        if "tilelab timeline: record helpers" in line:
            helpers = True
        if helpers:
            helpers = "end of tilelab timeline helpers" not in line
            continue
        if line.strip().startswith(("tlt_", "# ---- tilelab timeline")) or "tlt_n = tlt_mark(" in line:
            continue
        out.append(line)
    return out


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_instrumented_source_is_python_with_every_statement_of_the_kernel_in_place(name):
    k = lowered(name)
    tree = ast.parse(k.ins.source)  # still Python
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == k.ins.kernel)
    assert [ast.unparse(d) for d in kernel.decorator_list] == ["cute.kernel"]
    expected = [t for t in k.source.split("\n") if "TLT_BIND(" not in t]
    got = [t for t in _original_statements(k.ins.source) if "(record buffer: tlt_start above)" not in t]
    assert got == expected
    # every mark names a site of the table (or END / kernel start / end), and each site is marked once
    marks = [int(m) for m in re.findall(r"tlt_mark\(tlt_seg, tlt_n, (\d+)\)", k.ins.source)]
    assert sorted(m for m in marks if m >= 3) == [s.id for s in k.ins.sites]
    assert set(marks) <= {0, KERNEL_END} | {s.id for s in k.ins.sites}


def test_no_mark_lands_inside_an_elected_block_or_between_wgmma_arrive_and_commit():
    ins = lowered("gemm").ins
    tree = ast.parse(ins.source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "tl.shuffle_elect" in ast.unparse(node.test):
            assert "tlt_mark" not in ast.unparse(node)
        if isinstance(node, ast.With):
            assert "tlt_mark" not in ast.unparse(node)
    inside = False
    for text in ins.source.split("\n"):
        if "tl.warpgroup_arrive()" in text:
            inside = True
        if "tl.warpgroup_commit_batch()" in text:
            inside = False
        assert not (inside and "tlt_mark" in text)


def test_a_thread_dependent_branch_gets_no_marks():
    source = """@cute.kernel
def k(A, tlt_buf):
  threadIdx = tl.ThreadIdx()
  TLT_BIND(tlt_buf)
  if threadIdx.x < 48:
    tl.sync_threads()
  tl.sync_threads()
"""
    ins = instrument(source, threads=64)
    (site,) = ins.sites
    assert site.device_line == 6  # the second sync_threads, in the plain source (no bind line)
    assert ins.source.count("tlt_mark(tlt_seg, tlt_n, 3)") == 1


def test_a_source_without_the_bind_is_refused():
    with pytest.raises(RewriteError, match="no TLT_BIND"):
        instrument("@cute.kernel\ndef k(A):\n  pass\n", threads=32)
    with pytest.raises(RewriteError, match="does not parse"):
        instrument("def k(:\n", threads=32)


def test_the_cutedsl_hook_is_put_back_as_it_was():
    import tvm_ffi

    name = "tilelang_callback_cutedsl_postproc"
    assert tvm_ffi.get_global_func(name, allow_missing=True) is None
    seen: list[str] = []
    with _tilelang.cuda_postproc(lambda code: seen.append(code) or code, "cutedsl"):
        assert tvm_ffi.get_global_func(name, allow_missing=True) is not None
        assert tvm_ffi.get_global_func("tilelang_callback_cuda_postproc", allow_missing=True) is None
    assert tvm_ffi.get_global_func(name, allow_missing=True) is None


def test_the_launcher_embeds_the_rewritten_kernel():
    k = lowered("gemm")
    seen: list[str] = []

    def rewrite(code: str) -> str:
        seen.append(code)
        return instrument(code, threads=k.threads, ops=k.ops, blocks=32, traced_blocks=(0,)).source

    device, host = _tilelang.cutedsl_timeline_sources(k.prim, "sm_90a", rewrite=rewrite)
    assert seen == [k.source]  # the hook saw exactly the kernel the codegen wrote
    assert "tlt_seg = tlt_start(tlt_buf)" in device
    # the launcher embeds it (re-indented, its signatures' commas respaced by TileLang) in the
    # function that compiles the kernel
    assert "\n    tlt_seg = tlt_start(tlt_buf)\n" in host and re.search(r"\n  def tlt_mark\(seg,\s+n,\s+site,", host)


# ------------------------------------------------------------------------------------------
# CuTe DSL's own compile (nvidia-cutlass-dsl; no GPU needed to build the cubin)
# ------------------------------------------------------------------------------------------

needs_cute_dsl = pytest.mark.skipif(importlib.util.find_spec("cutlass") is None,
                                    reason="needs nvidia-cutlass-dsl (pip install nvidia-cutlass-dsl)")


def _cubin(host: str, tmp: Path, shapes: dict) -> Path:
    """The cubin CuTe DSL compiles from TileLang's CuTeDSL launcher module ``host`` (its own
    ``_generate_cubin_if_needed``, given CPU tensors of the kernel's shapes)."""
    import torch

    path = tmp / "kernel.py"
    path.write_text(host)
    spec = importlib.util.spec_from_file_location(f"tlt_cutedsl_{tmp.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = list(inspect.signature(module._generate_cubin_if_needed).parameters)
    args = [torch.zeros(*shapes[n]) if n in shapes else 1 for n in names]
    args = [a.half() if n in ("A", "B", "C") else a for n, a in zip(names, args)]
    args = [a.long() if n == "tlt_buf" else a for n, a in zip(names, args)]
    module._generate_cubin_if_needed(*args)
    return tmp / "kernel.cubin"


@needs_cute_dsl
@pytest.mark.slow
def test_cute_dsl_compiles_the_instrumented_gemm_with_its_clock_reads_and_the_plain_wgmma(tmp_path):
    tools = find_toolchain(Path("/usr/local/cuda"))
    if tools.cuobjdump is None:
        pytest.skip("needs cuobjdump to read the cubin's SASS")
    func = matmul(256, 256, 256, 128, 128, 32)
    prim = _tilelang.resolve_kernel(func).prim_func
    ops = _tilelang.timeline_ops(prim)
    _, host = _tilelang.cutedsl_timeline_sources(prim, "sm_90a")
    threads = _tilelang.cutedsl_threads(host)
    made = []

    def rewrite(code: str) -> str:
        made.append(instrument(code, threads=threads, ops=ops, blocks=4, traced_blocks=(0,)))
        return made[-1].source

    _, instrumented = _tilelang.cutedsl_timeline_sources(prim, "sm_90a", rewrite=rewrite)
    scheduled = _tilelang.tilelang().tvm.IRModule({str(prim.attrs["global_symbol"]): prim})
    plain = _tilelang.cutedsl_launcher(prim, scheduled, "sm_90a", {}).text
    shapes = {"A": (256, 256), "B": (256, 256), "C": (256, 256), "tlt_buf": (made[-1].words(),)}
    (tmp_path / "plain").mkdir()
    (tmp_path / "marked").mkdir()

    def sass(cubin: Path) -> str:
        return subprocess.run([str(tools.cuobjdump), "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout

    marked = sass(_cubin(instrumented, tmp_path / "marked", shapes))
    base = sass(_cubin(plain, tmp_path / "plain", {k: v for k, v in shapes.items() if k != "tlt_buf"}))
    assert "SR_GLOBALTIMER" not in base and "SR_CLOCK" not in base
    assert "SR_GLOBALTIMER" in marked and "SMID" in marked
    assert re.search(r"(ATOMG|REDG)\.E\.MAX\.64", marked)  # the block's end time, raised by each warp
    # one clock64 read per mark the (unrolled) kernel executes at least: start, end, and the loop's
    assert marked.count("SR_CLOCKLO") >= 2 + len(made[-1].sites)

    def wgmma(text: str) -> list[str]:
        return re.findall(r"(HGMMA\.\S+|WARPGROUP\.\S+)", text)

    assert wgmma(marked) == wgmma(base)  # no WGMMA serialised or split by the marks
