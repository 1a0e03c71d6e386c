"""The lowering explainer against the generated device source and the pass configs that switch
paths off. Ground truth: the TileLang intrinsic on the line the explainer names (read here with
plain string checks), and the configs and targets each case sets."""


from gemm import matmul

import tilelab
from tilelab.engine.explain import Lowering


def lowering(arch, configs=None, **kw):
    report = tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32, **kw), arch, pass_configs=configs)
    return report, report.lowering


def _line(report, n):
    return report.sources.device.split("\n")[n - 1]


def by_op(low):
    return {o.op: o for o in low.ops}


def test_hopper_gemm_takes_every_fast_path_but_the_fragment_store():
    report, low = lowering("sm_90a")
    ops = by_op(low)
    a, b = ops["T.copy A -> A_shared"], ops["T.copy B -> B_shared"]
    g, c = ops["T.gemm A_shared -> B_shared -> C_local"], ops["T.copy C_local -> C"]
    assert a.path == b.path == "TMA bulk copy" and a.fast and "tl::tma_load(A_desc" in _line(report, a.evidence_line)
    assert "tl::tma_load(B_desc" in _line(report, b.evidence_line)
    assert g.path.startswith("WGMMA") and "tl::wgmma_ss<" in _line(report, g.evidence_line)
    assert not c.fast and "TMA store" in c.reason and "C + " in _line(report, c.evidence_line)
    named_line = int(low.warp_specialization_reason.split()[-1].rstrip(")"))
    assert low.warp_specialized and "tl::warpgroup_reg_" in _line(report, named_line)
    # 3 stages of a 128x32 and a 32x128 fp16 tile: 16 KiB each, the kernel's 48 KiB of dynamic shared memory
    assert (low.stages, low.stage_bytes) == (3, 16384)
    assert low.stages * low.stage_bytes == report.kernels[0].dynamic_shared_memory_bytes
    assert (a.stages, g.stages, c.stages) == (3, 3, None)


def test_pass_configs_that_switch_paths_off_are_named():
    report, low = lowering("sm_90a", {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True})
    a = by_op(low)["T.copy A -> A_shared"]
    assert a.path.startswith("cp.async") and not a.fast and "tl::cp_async_gs" in _line(report, a.evidence_line)
    assert a.reason == "pass config tl.disable_tma_lower is set"
    assert not low.warp_specialized
    assert low.warp_specialization_reason == "pass config tl.disable_warp_specialized is set"
    report, low = lowering("sm_90a", {"tl.disable_wgmma": True})
    g = by_op(low)["T.gemm A_shared -> B_shared -> C_local"]
    assert g.path.startswith("MMA") and not g.fast and g.reason == "pass config tl.disable_wgmma is set"
    assert "tl::mma_sync" in _line(report, g.evidence_line)


def test_ampere_target_and_shared_memory_epilogue():
    report, low = lowering("sm_80")
    ops = by_op(low)
    assert ops["T.copy A -> A_shared"].path.startswith("cp.async") and ops["T.copy A -> A_shared"].fast
    assert ops["T.gemm A_shared -> B_shared -> C_local"].path.startswith("MMA")
    assert not low.warp_specialized and "sm_90" in low.warp_specialization_reason
    report, low = lowering("sm_90a", smem_epilogue=True)
    store = by_op(low)["T.copy C_shared -> C"]
    assert store.path == "TMA bulk store" and "tl::tma_store(C_desc" in _line(report, store.evidence_line)
    assert not low.fallbacks


def test_round_trip_and_summary():
    from tilelab.render.html import report_id, section_body

    report, low = lowering("sm_90a")
    assert Lowering.from_dict(low.to_dict()) == low
    assert tilelab.KernelReport.from_json(report.to_json()) == report
    summary = section_body(report, "summary")
    assert "TMA bulk copy" in summary and f'href="#{report_id(report)}-cuda-L' in summary
    assert "why not the fast path" in summary


def test_a_pipelined_tile_loaded_by_threads_is_named_as_why_there_is_no_producer_warpgroup():
    """TileLang 0.1.15's device code for a pipelined sm_90a GEMM whose A tile is filled element by
    element (lines abridged from its output): B is a TMA load, A's stage is written with cp.async by a
    producer as large as the consumers, and no warpgroup hands back registers."""
    from tilelab.engine.explain import explain

    device = "\n".join((
        "  if (((int)threadIdx.x) < 256) {",
        "        tl::cp_async_gs<16>((&(((half_t*)A_s)[(k % 3) * 4096])), (&(A[k * 32])));",
        "        tl::tma_load(B_desc, mbarrier[(k % 3)], (&(((half_t*)B_s)[(k % 3) * 4096])), 0, (k * 32));",
        "      tl::mbarrier_cp_async_arrive_noinc(mbarrier[(k % 3)]);",
        "  } else {",
        "          tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 64>(0);",
    ))
    b = ("B", "global", "float16", (512, 512))
    ops = [{"op": "copy", "operands": [b, ("B_s", "shared.dyn", "float16", (32, 128))], "stages": 3},
           {"op": "gemm", "operands": [("A_s", "shared.dyn", "float16", (128, 32)),
                                       ("B_s", "shared.dyn", "float16", (32, 128)),
                                       ("C_f", "local.fragment", "float32", (128, 128))], "stages": 3}]
    low = explain(ops, device, "sm_90a", {}, 256)
    assert not low.warp_specialized
    assert low.warp_specialization_reason.startswith("A_s is loaded into shared memory by threads")
    assert "device line 1" in low.warp_specialization_reason  # where the roles split
    # a tile op's load that is not TMA (a copy with TMA switched off) is named the same way
    a = ("A", "global", "float16", (512, 512))
    plain = device.replace("tl::cp_async_gs<16>((&(((half_t*)A_s)[(k % 3) * 4096])), (&(A[k * 32])));",
                           "*(uint4*)(A_s + (k % 3) * 4096) = *(uint4*)(A + k * 32);")
    ops.insert(0, {"op": "copy", "operands": [a, ("A_s", "shared.dyn", "float16", (128, 32))], "stages": 3})
    assert explain(ops, plain, "sm_90a", {}, 256).warp_specialization_reason.startswith("A_s is loaded")
