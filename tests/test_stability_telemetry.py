"""Telemetry records and the Profile record/parsers (no GPU needed); the median's interval is
tested in test_median_interval.py."""

import pytest

from tilelab.launch import BenchResult
from tilelab.launch._telemetry import NvmlSampler, Telemetry
from tilelab.records.profile import Profile, parse_raw_csv, parse_source_csv, profile_from_metrics


def test_telemetry_record_and_throttle_flags():
    t = Telemetry(((0.0, 1980, 2619, 350.0, 60, 0x0), (0.01, 1755, 2619, 699.0, 71, 0x4)), max_sm_mhz=1980)
    assert t.throttled and t.reasons == ["software power cap"]
    assert "THROTTLED: software power cap" in t.summary()
    assert Telemetry.from_dict(t.to_dict()) == t
    idle = Telemetry(((0.0, 345, 2619, 70.0, 35, 0x1),))
    assert not idle.throttled and "gpu idle" in idle.reasons
    r = BenchResult("k", (1.0, 1.1, 0.9, 1.0, 1.0, 1.05), telemetry=t, ci_ms=(0.95, 1.05), ci_target=0.005)
    assert BenchResult.from_dict(r.to_dict()) == r
    assert r.throttled and "THROTTLED" in r.summary() and "95% CI +-5.00%" in r.summary()
    assert "GPU telemetry" in r._repr_html_()


def test_sampler_without_nvml_says_why():
    with NvmlSampler(0) as s:
        pass
    result = s.result()
    assert result.samples or result.note  # either a GPU answered, or the reason it did not


RAW = '''==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum","launch__registers_per_thread","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum","smsp__inst_executed_op_shared_st.sum","derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2","sm__ops_path_tensor_op_hgmma_src_fp16_dst_fp32_sparsity_off.sum"
"","","usecond","%","Mbyte","register/thread","ratio","ratio","","inst",""
"0","gemm_kernel","1,234.50","87.5","3.25","168","0.5","2.25","2048","64","2000","1,000,000"
'''  # noqa: E501 ncu's CSV as it prints it, one row a line


def test_parse_raw_csv_and_profile():
    (row,) = parse_raw_csv(RAW)
    p = profile_from_metrics(row)
    assert p.kernel == "gemm_kernel" and p.duration_ns == pytest.approx(1234500.0)
    assert p.sol_compute_pct == 87.5 and p.registers == 168 and p.dram_read_bytes == pytest.approx(3.25e6)
    assert p.stalls == (("barrier", 2.25), ("long_scoreboard", 0.5))
    assert p.wavefronts_per_request("st") == 32.0 and p.flops == 1_002_000.0
    assert Profile.from_dict(p.to_dict()) == p
    assert "gemm_kernel" in p._repr_html_() and "barrier" in p._repr_html_()


def test_parse_source_csv():
    # the shape of `ncu --csv --page source --print-source cuda,sass` (Nsight Compute 2025.3)
    text = ('"File Path","/tmp/x/tl_templates/cuda/gemm.h"\n"Function Name","k"\n'
            '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",'
            '"Warp Stall Sampling (Not-issued Samples)"\n'
            '"40","<Unable to open source file>","-","-","99","1"\n'
            '"File Path","/tmp/x/tvm_kernels.cu"\n"Function Name","k"\n'
            '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",'
            '"Warp Stall Sampling (Not-issued Samples)"\n'
            '"18","<Unable to open source file>","-","-","0","0"\n'
            '"","","0x7f17","      LDC R1, c[0x0][0x28]","5","0"\n'
            '"22","<Unable to open source file>","-","-","30","20"\n'
            '"27","<Unable to open source file>","-","-","7","1"\n')
    assert parse_source_csv(text) == [(22, 30.0), (27, 7.0)]


def test_profile_tab_and_measured_roofline_work():
    import sys

    sys.path.insert(0, "examples")
    from elementwise_sm80 import elementwise_add

    import tilelab
    from tilelab.records.profile import measured_work
    from tilelab.widgets.inspector import Inspector

    (row,) = parse_raw_csv(RAW)
    prof = profile_from_metrics(row)
    bench = BenchResult("gemm_kernel", (1.0,) * 10, flops=5.0, bytes=7.0)
    placed = measured_work(bench, prof)
    assert placed.flops == prof.flops and placed.bytes == prof.dram_bytes == pytest.approx(3.25e6)
    assert "measured by Nsight Compute" in placed.notes[-1]
    report = tilelab.inspect(elementwise_add(4096, 4096), "sm_80")
    insp = Inspector(report, timing=[placed, prof])
    assert insp.titles[-2:] == ("Timing", "Profile")
    assert "Top warp stalls" in insp.tab("Profile")
    html = insp._repr_mimebundle_()["text/html"] if isinstance(insp._repr_mimebundle_(), dict) else \
        insp._repr_mimebundle_()[0]["text/html"]
    assert ">Profile<" in html and "Nsight Compute profile of gemm_kernel" in html
    insp.close()


def test_a_sweep_row_carries_the_clocks_of_its_measurement():
    """A sweep row keeps the median SM clock and the throttle flag of the bench that timed it, so a
    table whose rows ran on different GPUs (or at different clocks) says so beside each time."""
    from tilelab.launch import SweepRow, SweepTable
    from tilelab.render.launch import sweep_table_text

    # (t, SM MHz, mem MHz, W, C, reasons): median of 1980, 1755, 1830 is 1830; 0x4 is the software power cap
    capped = Telemetry(((0.0, 1980, 2619, 690.0, 61, 0), (0.01, 1755, 2619, 700.0, 63, 0x4),
                        (0.02, 1830, 2619, 699.0, 63, 0x4)), 1980)
    cool = Telemetry(((0.0, 1980, 2619, 410.0, 50, 0), (0.01, 1980, 2619, 415.0, 50, 0)), 1980)
    row = SweepRow.measured((("block", 128),), (("N", 8192),),
                            BenchResult("k", samples_ms=(1.0, 1.1, 1.2), telemetry=capped),
                            device="cuda:1")
    assert row.sm_mhz == 1830.0 and row.throttled and row.median_ms == 1.1
    other = SweepRow.measured((("block", 64),), (("N", 8192),), BenchResult("k", samples_ms=(1.3,) * 3, telemetry=cool))
    assert other.sm_mhz == 1980.0 and not other.throttled
    bare = SweepRow.measured((("block", 32),), (("N", 8192),), BenchResult("k", samples_ms=(1.4,) * 3))
    assert bare.sm_mhz is None and not bare.throttled
    assert SweepRow.from_dict(row.to_dict()) == row  # the row cache keeps them
    text = sweep_table_text(SweepTable("k", (row, other, bare)))
    header = next(line for line in text.splitlines() if line.startswith("size"))
    assert "SM MHz" in header
    line = next(line for line in text.splitlines() if "1830" in line)
    assert "THROTTLED" in line and "cuda:1" in line
    assert "THROTTLED" not in next(line for line in text.splitlines() if "1980" in line)
