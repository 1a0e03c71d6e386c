"""The analysis behind the inspector's verdicts and links (tilelab.engine.verdicts, tilelab.engine.links),
tested on what TileLang generated and on hand-derived cases, never on the renderer's markup."""

from __future__ import annotations

import dataclasses
import re

import pytest
import target_kernels as tk
from groundtruth import device_wgmma

import tilelab
from tilelab import cuda_facts
from tilelab.engine.links import cell_heat, device_anchor_lines, heat_shares, launch_lines
from tilelab.engine.verdicts import (
    instruction_mn,
    layout_checks,
    layout_elements,
    layout_repeats,
    lds_conflicted,
    lds_phases,
    operand_uses,
    operand_verdicts,
    worst_lds_conflict,
)
from tilelab.records.kernel import DeviceKernel, KernelReport, Layout, LdsRead, Sources
from tilelab.records.machine import MachineCode, SourceOrigin

_REPORTS: dict[str, KernelReport] = {}


def report(name: str) -> KernelReport:
    """Kernels compiled in the test (once per process), for the targets the analysis serves."""
    if name not in _REPORTS:
        if name == "gemm":
            from reports import gemm  # examples/gemm.py's Hopper GEMM, inspected once per process

            _REPORTS[name] = gemm()
        elif name == "hip":
            _REPORTS[name] = tilelab.inspect(tk.gemm_gpu(), target="gfx942")
        elif name == "metal":
            _REPORTS[name] = tilelab.inspect(tk.gemm_gpu(), target="metal")
        elif name == "cpu":
            _REPORTS[name] = tilelab.inspect(tk.gemm_cpu(), target="c")
    return _REPORTS[name]


# --------------------------------------------------------------------------------------------
# Hardware facts, read from the one table
# --------------------------------------------------------------------------------------------


def test_wgmma_facts_hold_for_every_instruction_tilelang_emitted():
    forms = device_wgmma(report("gemm").sources.device)["forms"]
    assert forms
    for f in forms:
        m, n, k = (int(v) for v in re.fullmatch(r"m(\d+)n(\d+)k(\d+)", f["instruction"]).groups())
        assert m == cuda_facts.WGMMA_M
        assert n % 8 == 0 and n <= cuda_facts.WGMMA_MAX_N
        assert k * cuda_facts.dtype_bytes(f["a"].replace("Float", "float").replace("BFloat", "bfloat")) \
            == cuda_facts.WGMMA_K_BYTES


def test_shared_memory_facts_agree_with_the_driver_swizzles():
    # the widest TMA swizzle spans one line of every bank; its pattern permutes 16-byte chunks and
    # repeats every 8 such lines (the 1024-byte alignment a 128B-swizzled buffer needs)
    assert cuda_facts.SWIZZLE_SPAN_BYTES["128B"] == cuda_facts.SHARED_MEMORY_LINE_BYTES == 128
    assert cuda_facts.SHARED_MEMORY_BANKS * cuda_facts.SHARED_MEMORY_BANK_BYTES == 128
    assert cuda_facts.CHUNKS_PER_LINE == 8 and cuda_facts.SWIZZLE_REPEAT_ROWS == 8
    assert cuda_facts.WARPGROUP_THREADS == 128 == 4 * cuda_facts.ARCH_LIMITS["sm_90"].warp_size
    from tilelab import swizzle
    from tilelab.engine import mfma

    assert (swizzle.BANKS, swizzle.BANK_BYTES, swizzle.CHUNK_BYTES) == (32, 4, 16)
    assert (mfma.LDS_BANKS, mfma.LDS_BANK_BYTES, mfma.WAVE_LANES) == (32, 4, 64)


# --------------------------------------------------------------------------------------------
# WGMMA operands
# --------------------------------------------------------------------------------------------


def test_operand_uses_name_the_instruction_extent_tilelang_emitted():
    r = report("gemm")
    device = device_wgmma(r.sources.device)
    ns = {int(re.search(r"n(\d+)", f["instruction"]).group(1)) for f in device["forms"]}
    uses = operand_uses(r)
    buffers = {d["buffer"] for d in device["descriptors"].values()}
    assert set(uses) == buffers  # every shared buffer a descriptor points at, and no other
    for items in uses.values():
        for use in items:
            assert use.inst_mn == (cuda_facts.WGMMA_M if use.role == "A" else use.inst_mn)
            if use.role == "B":
                assert use.inst_mn in ns
    assert instruction_mn("A", 256) == 64 and instruction_mn("B", 128) == 128


def test_operand_verdicts_agree_with_the_descriptors_in_the_device_code():
    r = report("gemm")
    device = device_wgmma(r.sources.device)["descriptors"]
    verdicts = operand_verdicts(r)
    assert len(verdicts) == 2 * len(r.wgmma)
    for v in verdicts:
        assert v.verdict == "agrees", (v.role, v.reason)
        d = v.check.descriptor
        # tilelab computed this from the layout's offsets; the device code's template arguments
        # are the compiler's own
        (theirs,) = {(x["layout_type"], x["lbo"], x["sbo"]) for x in device.values() if x["buffer"] == v.operand.buffer}
        assert (d.layout_type, d.lbo, d.sbo) == theirs


def test_operand_verdicts_say_differs_unknown_and_registers():
    r = report("gemm")
    w = r.wgmma[0]
    wrong_lbo = dataclasses.replace(w.a, lbo=w.a.lbo + 7)
    changed = dataclasses.replace(r, wgmma=(dataclasses.replace(w, a=wrong_lbo),))
    a, b = operand_verdicts(changed)
    assert (a.verdict, b.verdict) == ("differs", "agrees")
    no_layouts = dataclasses.replace(r, layouts=tuple(x for x in r.layouts if x.scope != "shared"))
    assert {v.verdict for v in operand_verdicts(no_layouts)} == {"unknown"}
    in_registers = dataclasses.replace(r, wgmma=(dataclasses.replace(w, variant="rs", a=None),))
    assert operand_verdicts(in_registers)[0].verdict == "registers"
    # a layout tilelab cannot read as any swizzle mode: no descriptor, and the reason why
    shared = next(x for x in r.layouts if x.buffer == w.b.buffer)
    scrambled = dataclasses.replace(shared, offsets=tuple(reversed(shared.offsets)))
    broken = dataclasses.replace(r, layouts=(scrambled,), wgmma=(w,))
    (_, b), = [operand_verdicts(broken)]
    assert b.verdict == "n/a" and "not one of tilelab's swizzle modes" in b.reason
    (use, check), = layout_checks(scrambled, [u for u in operand_uses(broken)[w.b.buffer] if u.role == "B"])
    assert check.descriptor is None and not check.agrees


# --------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------


def _shared(buffer: str, offsets: tuple[int, ...], dtype: str = "float16") -> Layout:
    return Layout(buffer=buffer, scope="shared", dtype=dtype, shape=(2, 2), offsets=offsets, description=buffer)


def test_layout_repeats_point_at_the_first_equal_layout():
    layouts = (_shared("A", (0, 1, 2, 3)), _shared("B", (0, 1, 3, 2)), _shared("C", (0, 1, 2, 3)),
               _shared("D", (0, 1, 2, 3), "float32"), _shared("E", (0, 1, 3, 2)))
    r = KernelReport(name="k", target="sm_90a", kernels=(), sources=Sources(device=""), layouts=layouts)
    # C repeats A, E repeats B; D differs from A only by its dtype (other bytes, other banks)
    assert layout_repeats(r) == (0, 1, 0, 3, 1)
    assert [layout_elements(x) for x in layouts] == [4] * 5


def test_layout_repeats_of_a_compiled_kernel_match_its_offsets():
    r = report("gemm")
    repeats = layout_repeats(r)
    for i, lay in enumerate(r.layouts):
        first = r.layouts[repeats[i]]
        assert repeats[i] <= i
        assert (first.scope, first.dtype, first.shape, first.offsets, first.threads) == \
            (lay.scope, lay.dtype, lay.shape, lay.offsets, lay.threads)


# --------------------------------------------------------------------------------------------
# CDNA LDS reads
# --------------------------------------------------------------------------------------------


def test_lds_phases_follow_the_cdna_bank_model():
    r = report("hip")
    assert r.lds_reads
    for read in r.lds_reads:
        phases = lds_phases(read)
        lanes = 128 // read.width_bytes if read.width_bytes > 4 else 32  # mfma.py's model, by hand
        assert len(phases) == len(read.phase_clocks) == 64 // lanes
        for p, phase in enumerate(phases):
            assert (phase.first_lane, phase.last_lane) == (p * lanes, (p + 1) * lanes - 1)
            assert phase.banks == tuple((a // 4) % 32 for a in read.byte_addresses[p * lanes:(p + 1) * lanes])
        assert lds_conflicted(read) == any(c > 1 for c in read.phase_clocks)
    assert worst_lds_conflict(r) == max(sum(x.phase_clocks) / len(x.phase_clocks) for x in r.lds_reads)
    assert worst_lds_conflict(report("gemm")) is None


def test_an_lds_read_with_a_two_clock_phase_is_a_conflict():
    read = LdsRead("A_shared", "A_local", 4, "x", tuple(range(0, 256, 4)), (1, 2))
    assert lds_conflicted(read) and read.conflict_degree == 1.5
    assert [p.banks[:2] for p in lds_phases(read)] == [(0, 1), (0, 1)]  # lane 32 wraps to bank 0


# --------------------------------------------------------------------------------------------
# Lines: launches, anchors, heat
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hip", "metal", "cpu"])
def test_launch_lines_are_the_host_lines_that_call_each_kernel(name):
    r = report(name)
    found_any = False
    for item in r.sources.launchers:
        if item.text is None:
            continue
        lines = item.text.split("\n")
        found = launch_lines(r, item.text)
        for number, kernels in found.items():
            text = lines[number - 1]
            for i in kernels:
                kname = r.kernels[i].name
                assert kname in text and not text.lstrip().startswith(("//", "static", "extern"))
                # a call: the kernel's name followed by a launch (<<<, a packed call or an argument list)
                assert re.search(rf"{re.escape(kname)}(_packed|\s*<<<|\s*\()", text), text
        found_any |= bool(found)
    assert found_any, f"no launch line found in any {name} launcher"


def test_launch_lines_skip_declarations_and_comments():
    r = KernelReport(name="k", target="gfx942", kernels=(DeviceKernel("gemm_kernel", (1, 1, 1), (256, 1, 1)),),
                     sources=Sources(device=""))
    host = ("static __global__ void gemm_kernel(half* A);\n"
            "// gemm_kernel<<<grid, block>>> launches it\n"
            "extern \"C\" void gemm_kernel(void);\n"
            "  gemm_kernel<<<dim3(8, 8, 1), dim3(256, 1, 1), 0, stream>>>(A);\n")
    assert r.family == "hip"
    assert launch_lines(r, host) == {4: [0]}
    cuda = dataclasses.replace(r, target="sm_90a", family="cuda")
    assert launch_lines(cuda, host) == {}  # CUDA launchers link through their TMA encode calls


def test_device_anchor_lines_hold_every_mfma_call_and_lds_read():
    r = report("hip")
    device = r.sources.device.split("\n")
    anchors = device_anchor_lines(r)
    mfma_lines = {n for m in r.mfma for n in m.lines}
    assert mfma_lines and mfma_lines <= anchors
    assert all("mfma" in device[n - 1] for n in mfma_lines)
    assert {x.line for x in r.lds_reads} <= anchors
    plain = dataclasses.replace(r, mfma=(), lds_reads=(), lowering=None, machine=None)
    assert device_anchor_lines(plain) == set()


def test_heat_shares_and_cell_heat_by_hand():
    assert heat_shares([(3, 1.0), (5, 3.0), (3, 0.0), (7, -1.0)]) == {3: 0.25, 5: 0.75}
    cell = "%%tilelang\nimport tilelang\n\nT.gemm(A, B, C)\n"
    mc = MachineCode(arch="sm_90a", origins=(SourceOrigin(10, 12, "/tmp/cell.py", 3, True),
                                             SourceOrigin(20, 20, "/tmp/other.py", 3, True)),
                     python_sources=(("/tmp/cell.py", "# header\nimport tilelang\n\nT.gemm(A, B, C)\n\n"),
                                     ("/tmp/other.py", "x\ny\n")))
    r = KernelReport(name="k", target="sm_90a", kernels=(), sources=Sources(device=""), machine=mc)
    # device lines 10-12 came from line 3 of the cell's file; line 20 from another file
    assert cell_heat(r, cell, [(10, 1.0), (11, 1.0), (20, 2.0)]) == {3: 0.5}
    assert cell_heat(r, "%%tilelang\nsomething else\n", [(10, 1.0)]) == {}
    assert cell_heat(dataclasses.replace(r, machine=None), cell, [(10, 1.0)]) == {}


# --------------------------------------------------------------------------------------------
# Toolchain and profiler facts
# --------------------------------------------------------------------------------------------


def test_sass_opcodes_as_nvdisasm_prints_them():
    from tilelab.records.machine import opcode_counts, sass_opcode

    lines = ["        /*0000*/                   LDC R1, c[0x0][0x28] ;",
             "        /*0010*/                   HMMA.16816.F32 R4, R8, R12, R4 ;",
             "        /*0020*/              @!P0 BRA `(.L_x_1) ;",
             "        /*0030*/              @UP1 UMOV UR4, 0x400 ;",
             ".L_x_1:",
             "        /*0040*/                   HMMA.16816.F32 R4, R8, R14, R4 ;",
             ""]
    assert [sass_opcode(x) for x in lines] == ["LDC", "HMMA", "BRA", "UMOV", None, "HMMA", None]
    assert opcode_counts(lines, range(1, len(lines) + 1)) == {"LDC": 1, "HMMA": 2, "BRA": 1, "UMOV": 1}
    assert opcode_counts(lines, [2, 5, 99]) == {"HMMA": 1}  # a label and a line past the end count nothing


def test_device_lines_to_sass_and_python_lines_by_hand():
    # SASS lines 1-2 came from device line 12, 3 from 13, 4-5 from 20, 6 from 12 again, 7 from none
    mc = MachineCode(arch="sm_90a", sass_device_lines=(12, 12, 13, 20, 20, 12, 0),
                     origins=(SourceOrigin(12, 13, "/x/cell.py", 3, True),
                              SourceOrigin(20, 21, "/tl/gemm.py", 9, False),
                              SourceOrigin(30, 30, "/x/cell.py", 3, True)))
    assert mc.sass_of_device_lines() == {12: (1, 3), 13: (3, 1), 20: (4, 2)}
    assert mc.python_line_groups() == {("/x/cell.py", 3): [12, 13, 30], ("/tl/gemm.py", 9): [20, 21]}


def test_bank_conflict_prediction_against_the_counters():
    from tilelab.records.profile import conflict_verdict

    # within 5% of the prediction (of 1 wavefront, for predictions below one) agrees
    assert conflict_verdict(2.0, 2.09) == "agrees"
    assert conflict_verdict(2.0, 2.2) == "disagrees"
    assert conflict_verdict(0.5, 0.54) == "agrees"
    assert conflict_verdict(None, 1.0) == "no prediction"


def test_hot_python_lines_sum_samples_through_the_line_directives():
    from tilelab.records.profile import Profile, hot_python_lines

    mc = MachineCode(arch="sm_90a", origins=(SourceOrigin(10, 11, "/x/cell.py", 3, True),
                                             SourceOrigin(20, 20, "/tl/gemm.py", 9, False)))
    profile = Profile(kernel="k", hot_device_lines=((10, 5.0), (11, 3.0), (20, 9.0), (30, 4.0)))
    assert hot_python_lines(profile, mc) == [(("/tl/gemm.py", 9), 9.0), (("/x/cell.py", 3), 8.0)]


def test_the_analysis_modules_import_no_renderer():
    """Analysis sits below the renderers: its modules load no tilelab.render module."""
    import subprocess
    import sys

    probe = ("import sys, tilelab.engine.verdicts, tilelab.engine.links, tilelab.records.machine, "
             "tilelab.records.profile, tilelab.swizzle\n"
             "print(sorted(n for n in sys.modules if n.startswith('tilelab.render')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_sweeps_leading_configurations_by_hand():
    from tilelab.launch import SweepRow, SweepTable

    def row(name: str, size: int, ms: float | None, **kw) -> SweepRow:
        return SweepRow(config=(("variant", name), ("threads", 128)), size=(("M", size),), median_ms=ms, **kw)

    rows = (row("a", 1, 1.0), row("b", 1, 2.0), row("c", 1, 0.5), row("d", 1, 3.0), row("e", 1, None, error="boom"),
            row("a", 2, 1.0), row("b", 2, 2.0), row("d", 2, 3.0, best=True),
            SweepRow(config=(), size=(("M", 1),), median_ms=0.1, label="torch.matmul"))
    table = SweepTable(kernel="k", rows=rows)
    # the shared threads=128 is left out of the names; the failed and the baseline rows are not configurations
    assert table.leading_configs() == ["variant=a", "variant=b", "variant=c", "variant=d"]
    # log-mean medians: c -0.69 (one size), a 0, b 0.69, d 1.10; d is kept as marked best, then c
    assert table.leading_configs(2) == ["variant=c", "variant=d"]
    assert table.leading_configs(3) == ["variant=a", "variant=c", "variant=d"]
