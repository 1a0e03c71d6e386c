"""The toolchain tier against the CUDA toolkit's own output.

These tests use the real toolkit explicitly (``cuda_home=CUDA``): the suite's nvcc shim stays
first on PATH, so plain inspection still proves it never needs nvcc. Ground truth comes from
outside tilelab's parsers: the device source's text (which line holds ``wgmma_ss``, ``tma_load``),
``cuobjdump -res-usage`` on a cubin built here by nvcc itself, and the Python file's own lines.
"""

import inspect
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from elementwise_sm80 import elementwise_add
from gemm import matmul

import tilelab
from tilelab import _tilelang
from tilelab.engine.toolchain import find_toolchain, parse_ptxas, parse_sass, strip_line_directives

CUDA = Path("/usr/local/cuda")
TOOLS = find_toolchain(CUDA)
needs_toolkit = pytest.mark.skipif(TOOLS.nvcc is None or TOOLS.ptxas is None,
                                   reason=f"needs nvcc and ptxas in {CUDA}/bin")
needs_nvdisasm = pytest.mark.skipif(TOOLS.nvdisasm is None,
                                    reason='needs nvdisasm (pip install "tilelab[toolchain]")')
GEMM_PY = inspect.getsourcefile(matmul)  # tilelab/kernels/gemm.py: examples/gemm.py re-exports it

_REPORTS = {}


def gemm_report():
    if "gemm" not in _REPORTS:
        _REPORTS["gemm"] = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a", toolchain=True,
                                           cuda_home=CUDA, passes=True)
    return _REPORTS["gemm"]


def _device_lines(report, pattern):
    return {i + 1 for i, line in enumerate(report.sources.device.split("\n")) if re.search(pattern, line)}


def _sass_instructions(mc, opcode):
    return [(i + 1, d) for i, (text, d) in enumerate(zip(mc.sass.split("\n"), mc.sass_device_lines))
            if re.search(rf"\*/\s+(?:@!?U?P\w+\s+)?{opcode}\b", text)]


@needs_toolkit
def test_resources_match_cuobjdump_of_nvcc_own_build(tmp_path):
    report = gemm_report()
    mc = report.machine
    assert mc.missing is None, mc.missing
    (r,) = mc.resources
    assert r.kernel == "gemm_kernel"
    # An independent build: nvcc straight to a cubin, read back with cuobjdump -res-usage.
    (tmp_path / "k.cu").write_text(report.sources.device)
    incs = [f"-I{d}" for d in _tilelang.device_include_dirs()]
    subprocess.run([str(CUDA / "bin" / "nvcc"), "-cubin", "-std=c++17", "-w", "-arch=sm_90a", *incs, "-o", "k.cubin",
                    "k.cu"], cwd=tmp_path, check=True, capture_output=True)
    cuobjdump = TOOLS.cuobjdump or shutil.which("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found")
    usage = subprocess.run([cuobjdump, "-res-usage", "k.cubin"], cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout
    fields = dict(re.findall(r"(\w+(?:\[\d\])?):(\d+)", usage.split("Function gemm_kernel:")[1]))
    assert r.registers == int(fields["REG"]) == 168
    assert r.stack_bytes == int(fields["STACK"])
    assert r.spill_store_bytes == r.spill_load_bytes == int(fields["LOCAL"]) == 0
    # cuobjdump's SHARED counts the 1 KiB the driver reserves; ptxas reports the kernel's own.
    assert r.static_shared_bytes + 1024 == int(fields["SHARED"])
    # dynamic shared memory from the launch configuration: 3 stages x (128x32 + 32x128) halves
    assert r.dynamic_shared_bytes == 3 * (128 * 32 + 32 * 128) * 2
    occ = r.occupancy
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.binding) == (1, 12, ("registers",))


@needs_toolkit
@needs_nvdisasm
def test_sass_line_info_points_at_the_device_lines_that_hold_each_instruction():
    mc = gemm_report().machine
    report = gemm_report()
    hgmma = _sass_instructions(mc, r"HGMMA")
    assert hgmma, "no HGMMA in the SASS of a WGMMA kernel"
    # ptxas schedules the loop's counter update among the HGMMAs, and the line table then charges
    # some of them to the loop header: each HGMMA is on the wgmma line or on its loop's header.
    wgmma_lines = _device_lines(report, r"tl::wgmma_ss<")
    assert {d for _, d in hgmma} <= wgmma_lines | _device_lines(report, r"for \(int k_1 ")
    assert sum(d in wgmma_lines for _, d in hgmma) >= len(hgmma) / 2
    tma = _sass_instructions(mc, r"UTMALDG")
    tma_lines = _device_lines(report, r"tl::tma_load\(")
    assert tma and {d for _, d in tma} <= tma_lines | _device_lines(report, r"for \(int (k|i) ")
    assert sum(d in tma_lines for _, d in tma) >= len(tma) / 2
    # and back: the device line of the wgmma call lists exactly those SASS lines
    (wgmma_line,) = _device_lines(report, r"tl::wgmma_ss<")
    assert {n for n, d in hgmma if d == wgmma_line} <= set(mc.sass_lines_of(wgmma_line))


@needs_toolkit
def test_ptx_line_info_points_at_the_device_lines():
    report = gemm_report()
    mc = report.machine
    lines = mc.ptx.split("\n")
    wgmma = [i + 1 for i, t in enumerate(lines) if "wgmma.mma_async" in t]
    assert wgmma
    assert {mc.ptx_device_lines[n - 1] for n in wgmma} <= _device_lines(report, r"tl::wgmma_ss<")
    bulk = [i + 1 for i, t in enumerate(lines) if "cp.async.bulk.tensor" in t]
    assert bulk and {mc.ptx_device_lines[n - 1] for n in bulk} <= _device_lines(report, r"tl::tma_load\(")


@needs_toolkit
def test_python_lines_link_to_device_lines_through_line_directives():
    report = gemm_report()
    mc = report.machine
    py = Path(GEMM_PY).read_text().split("\n")
    # The epilogue store of the fragment comes from the user's T.copy(C_local, C[...]) line.
    (store,) = _device_lines(report, r"\*\(uint1\*\)\(C \+")
    origin = mc.origin(store)
    assert origin.user and origin.file == GEMM_PY
    assert "T.copy(C_local, C[" in py[origin.line - 1]
    # The clear of the accumulator comes from T.clear.
    (clear,) = _device_lines(report, r"make_float4\(broadcast_var")
    assert "T.clear(C_local)" in py[mc.origin(clear).line - 1]
    assert store in mc.device_lines_of(GEMM_PY, origin.line)
    # The WGMMA call is lowered by TileLang's own macro: its origin is inside TileLang.
    (wgmma_line,) = _device_lines(report, r"tl::wgmma_ss<")
    assert not mc.origin(wgmma_line).user and "tilelang" in mc.origin(wgmma_line).file
    assert dict(mc.python_sources)[GEMM_PY] == Path(GEMM_PY).read_text()


def test_strip_line_directives_gives_the_plain_source_back():
    func = matmul(1024, 1024, 1024, 128, 128, 32)
    plain = tilelab.inspect(func, "sm_90a").sources.device
    source = _tilelang.resolve_kernel(func)
    with_lines = _tilelang.device_source_with_line_directives(source, "sm_90a", _tilelang.normalize_pass_configs({}))
    assert with_lines.count("#line") > 10
    stripped, origins = strip_line_directives(with_lines)
    assert stripped == plain
    assert all(1 <= o.first <= o.last <= plain.count("\n") + 1 for o in origins)


def test_parsers_on_recorded_toolkit_text():
    log = ("ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k' for 'sm_80'\n"
           "ptxas info    : Function properties for k\n"
           "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 384 bytes cmem[0]\n")
    (r,) = parse_ptxas(log)
    assert (r.kernel, r.registers, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes, r.static_shared_bytes,
            r.barriers, r.constant_bytes) == ("k", 255, 16, 8, 4, 2048, 1, 384)
    assert r.spills and "spills registers" in r.flags()[0]
    text, lines = parse_sass('\t//## File "/x/h.h", line 3 inlined at "/t/tilelang_device.cu", line 7\n'
                             '\t//## File "/t/tilelang_device.cu", line 7\n        /*0000*/  MOV R1, R2 ;\n'
                             '\t//## File "/x/h.h", line 9 inlined at "/t/tilelang_device.cu", line 8\n'
                             "        /*0010*/  EXIT ;")
    assert text.split("\n") == ["        /*0000*/  MOV R1, R2 ;", "        /*0010*/  EXIT ;"]
    assert lines == (7, 8)


def test_missing_toolchain_says_what_to_install(tmp_path):
    report = tilelab.inspect(elementwise_add(4096, 4096), "sm_80", toolchain=True, cuda_home=tmp_path)
    mc = report.machine
    assert mc.missing.startswith("no nvcc and ptxas found in") and "tilelab[toolchain]" in mc.missing
    assert report.sources.device  # the rest of the report is as without the toolchain
    from tilelab.render.html import render_html, section_body

    for name in ("ptx", "sass", "lines"):
        assert "tilelab[toolchain]" in section_body(report, name)
    assert "PTX" in render_html(report)


@needs_toolkit
def test_a_report_without_machine_code_is_not_kept_once_the_toolkit_is_there(tmp_path):
    """No toolkit where the call looks: the report says what to install and is not cached, so the
    same call made after installing it shows the machine code."""
    home = tmp_path / "cuda"
    before = tilelab.inspect(elementwise_add(2048, 2048), "sm_80", toolchain=True, cuda_home=home)
    assert before.machine.missing and not before.machine.sass
    home.symlink_to(CUDA)  # the toolkit appears where the call looks
    after = tilelab.inspect(elementwise_add(2048, 2048), "sm_80", toolchain=True, cuda_home=home)
    assert after.machine.missing is None and "EXIT" in after.machine.sass
    assert after.machine.resources and after.machine.resources[0].registers > 0


def test_the_toolchain_tier_is_opt_in():
    report = tilelab.inspect(elementwise_add(4096, 4096), "sm_80")
    assert report.machine is None and report.passes is None
    from tilelab.render.html import render_html, section_body

    assert ">PTX<" not in render_html(report) and ">IR passes<" not in render_html(report)
    assert "toolchain=True" in section_body(report, "sass")


@needs_toolkit
def test_sm80_kernel_and_occupancy_flags():
    report = tilelab.inspect(elementwise_add(4096, 4096), "sm_80", toolchain=True, cuda_home=CUDA)
    (r,) = report.machine.resources
    assert r.kernel == "add_kernel" and r.registers > 0 and r.occupancy.threads_per_block == 256
    assert r.occupancy.blocks_per_sm == min(v for _, v in r.occupancy.limit_blocks)


def test_pass_trace_records_tilelang_passes():
    report = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a", passes=True)
    trace = report.passes
    names = [s.name for s in trace.steps]
    for must in ("tl.LayoutInference", "tl.LowerTileOp", "tl.InjectSoftwarePipeline", "tl.SplitHostDevice"):
        assert must in names
    by = {s.name: s for s in trace.steps}
    assert by["tl.LayoutInference"].changed and by["tl.LowerTileOp"].changed
    # LowerTileOp turns the T.gemm tile op into WGMMA descriptors: its diff removes the one, adds the other
    assert re.search(r"^-\s+T\.gemm\(", by["tl.LowerTileOp"].diff, re.M)
    assert re.search(r"^\+.*initialize_wgmma_descriptor", by["tl.LowerTileOp"].diff, re.M)
    assert all(s.diff == "" for s in trace.steps if not s.changed)
    assert all(s.diff.startswith("--- before") for s in trace.changed)
    assert all(s.seconds >= 0 for s in trace.steps) and trace.total_seconds > 0
    assert re.search(r"^\s+T\.gemm\(T\.region\(A_shared", trace.input_script, re.M)


@needs_toolkit
def test_html_sections_link_both_ways_and_stay_small():
    from tilelab.render.html import render_html, report_id, section_body

    report = gemm_report()
    rid = report_id(report)
    sass = section_body(report, "sass")
    cuda = section_body(report, "cuda")
    (wgmma_line,) = _device_lines(report, r"tl::wgmma_ss<")
    assert f'href="#{rid}-cuda-L{wgmma_line}"' in sass  # SASS -> CUDA
    first = report.machine.sass_lines_of(wgmma_line)[0]
    assert f'id="{rid}-sass-L{first}"' in sass and f'href="#{rid}-sass-L{first}"' in cuda  # CUDA -> SASS
    lines = section_body(report, "lines")
    # T.gemm -> its wgmma_ss line -> HGMMA instructions, through the explainer's evidence line
    gemm_row = lines[lines.index("T.gemm A_shared -&gt; B_shared -&gt; C_local"):].split("</tr>")[0]
    assert "WGMMA" in gemm_row and "HGMMA" in gemm_row and f">{wgmma_line}<" in gemm_row
    store = "T.copy(C_local, C[by * block_M, bx * block_N])"
    store_line = 1 + Path(GEMM_PY).read_text().split("\n").index(" " * 16 + store)
    assert f"gemm.py:{store_line}" in lines and store in lines.replace("&#x27;", "'")
    assert f'href="#{rid}-cuda-L' in section_body(report, "ptx")
    for name in ("ptx", "sass", "ir", "lines"):
        assert len(section_body(report, name).encode()) < 200_000, name
    full = render_html(report)
    for title in (">PTX<", ">SASS<", ">Lines<", ">IR passes<"):
        assert title in full
    assert "occupancy on sm_90a" in section_body(report, "summary")
    assert tilelab.KernelReport.from_json(report.to_json()) == report


@needs_toolkit
def test_inspector_widget_tabs_have_no_dangling_links():
    from tilelab.widgets.inspector import Inspector

    report = gemm_report()
    insp = Inspector(report)
    assert [t for t in insp.titles if t in ("Lines", "PTX", "SASS", "IR passes")] == ["Lines", "PTX", "SASS",
                                                                                     "IR passes"]
    # Every tab is on one page: each in-page link, across tabs too, lands on an element of the page.
    html = insp.html
    ids = set(re.findall(r'id="([^"]+)"', html))
    dangling = [h for h in re.findall(r'href="#([^"]+)"', html) if h not in ids]
    assert not dangling, dangling[:3]
    # and the text of a tab still names the device line of each SASS block (now a link to it)
    sass = insp.tab("SASS")
    assert re.search(r'<a class="tl-back" href="#[^"]+-cuda-L\d+">CUDA \d+', sass)
    insp.close()


def test_every_cuda_tool_is_found_by_one_rule(tmp_path, monkeypatch):
    """compute-sanitizer and ncu are looked for as the toolchain's tools are: $CUDA_HOME/bin first,
    then PATH; ncu also in Nsight Compute's own folders (newest version last in sort order wins)."""
    import os
    import stat

    from tilelab.engine.toolchain import find_cuda_tool
    from tilelab.launch._profile import find_ncu
    from tilelab.launch._sanitize import find_sanitizer

    def tool(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)

    home, other = tmp_path / "cuda", tmp_path / "elsewhere"
    in_home = tool(home / "bin" / "compute-sanitizer")
    on_path = tool(other / "compute-sanitizer")
    for var in ("TILELAB_CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    assert find_sanitizer() == in_home
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-such-home"))
    assert find_sanitizer() == on_path
    nsight = [tool(tmp_path / "nsight" / v / "ncu") for v in ("2024.1.0", "2025.3.1")]
    if find_cuda_tool("ncu") is None:  # no ncu installed here: the install folders are the answer
        assert find_cuda_tool("ncu", extra_globs=(str(tmp_path / "nsight" / "*" / "ncu"),)) == nsight[-1]
    assert find_ncu(nsight[0]) == nsight[0]
    assert find_ncu(str(tmp_path / "missing" / "ncu")) is None
