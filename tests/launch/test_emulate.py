"""A kernel written for a GPU, run on the CPU with its tile program's meaning (tilelab.run(device="cpu")).

Ground truth: torch on the same inputs (float64 references), torch's own conversions to float16,
bfloat16 and float8 for the rounding, the kernels' own structure for which tiles a block writes.
Every right kernel passes; every planted mistake (tests/cpu_path_kernels.py) fails; accesses outside
a buffer and endless loops end in an error while this process goes on."""

from __future__ import annotations

import math
import os
import sys

import cpu_path_kernels as ck
import pytest
import torch

import tilelab
from tilelab import _tilelang
from tilelab.launch import KernelLaunchError

pytestmark = pytest.mark.slow


def attention_ref(q, k, v, causal=False):
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)


def group_scales(s, group=32):
    return s.repeat_interleave(group, 1)


CASES = {
    # name: (factory, reference, the mistakes that must fail)
    "gemm_nn_fp16": (lambda bug=None: ck.gemm(bug=bug), lambda a, b: a @ b, ["no_clear", "k_short", "swap_blocks"]),
    "gemm_nt_bf16": (lambda bug=None: ck.gemm(trans_b=True, dtype="bfloat16", bug=bug), lambda a, b: a @ b.T,
                     ["k_short", "swap_blocks"]),
    "gemm_fp8": (lambda bug=None: ck.gemm(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64,
                                          dtype="float8_e4m3", out_dtype="float32", bug=bug),
                 lambda a, b: a @ b, ["k_short"]),
    "attention": (lambda bug=None: ck.attention(bug=bug), attention_ref, ["no_rescale", "no_clear"]),
    "attention_causal": (lambda bug=None: ck.attention(causal=True, bug=bug),
                         lambda q, k, v: attention_ref(q, k, v, causal=True), ["no_rescale"]),
    "row_max": (lambda bug=None: ck.row_reduce(bug=bug), lambda x: x.amax(1), ["swap_reduction"]),
    "scale_shift_ragged": (lambda bug=None: ck.scale_shift(bug=bug), lambda x: 2 * x + 1, ["swap_sign"]),
    "dequant_gemm": (lambda bug=None: ck.dequant_gemm(bug=bug), lambda a, w, s: a @ (w * group_scales(s)).T,
                     ["wrong_group", "k_short"]),
}


# make test runs a GEMM, a reduction and a ragged elementwise kernel; make test-heavy the others too
# (attention, causal attention, the other GEMMs' dtypes and layouts, dequantisation).
IN_MAKE_TEST = ("gemm_nn_fp16", "row_max", "scale_shift_ragged")


@pytest.mark.parametrize("name", [n if n in IN_MAKE_TEST else pytest.param(n, marks=pytest.mark.heavy)
                                  for n in sorted(CASES)])
def test_a_right_kernel_passes_and_every_planted_mistake_fails(name):
    factory, ref, bugs = CASES[name]
    right = tilelab.run(factory(), device="cpu", ref=ref, seed=1)
    assert right.passed, right
    assert right.backend.startswith("emulated") and any(tilelab.launch.EMULATED_NOTE in n for n in right.notes)
    for bug in bugs:
        wrong = tilelab.run(factory(bug), device="cpu", ref=ref, seed=1)
        assert not wrong.passed, (name, bug, wrong)
        bad = wrong.outputs[0]
        assert bad.tiles is not None or bad.unwritten or bad.nonfinite or bad.rel_error > bad.tolerance


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_tile_of_a_gpu_type_holds_what_it_would_on_the_gpu(dtype):
    """Values copied through a tile of ``dtype`` come out as torch's own conversion to ``dtype``:
    the emulation computes in float32 but rounds at every store into such a tile."""
    x = _probe_values()[:256].clone()
    x = x[torch.isfinite(x) & (x.abs() < 400)] if dtype == "float8_e4m3fn" else x[torch.isfinite(x)]
    x = torch.cat([x, torch.linspace(-3, 3, 256 - len(x))])
    y = torch.empty(256)
    kernel = ck.narrow_copy(dtype=dtype.replace("_e4m3fn", "_e4m3"))
    tilelab.run(kernel, x, y, device="cpu")
    want = x.to(getattr(torch, dtype)).float()
    assert torch.equal(y, want), [(float(a), float(b), float(c)) for a, b, c in zip(x, y, want) if b != c][:5]


def test_blocks_runs_only_those_blocks_and_checks_only_what_they_wrote():
    kernel = ck.gemm(M=512, N=512, K=64, block_M=64, block_N=64, block_K=32)
    result = tilelab.run(kernel, device="cpu", ref=lambda a, b: a @ b, blocks=[0, (7, 7)])
    assert result.passed, result
    assert any("blocks 0, 63 of 64 ran: they wrote 8192 of 262144 elements of C" in n for n in result.notes)
    # two blocks of the wrong kernel are enough to catch its swapped block indices
    wrong = tilelab.run(ck.gemm(M=512, N=256, K=64, block_M=64, block_N=64, block_K=32, bug="swap_blocks"),
                        device="cpu", ref=lambda a, b: a @ b, blocks=[(1, 0)])
    assert not wrong.passed
    with pytest.raises(tilelab.EmulationError, match=r"block \(8, 0\) is outside the grid \(8, 8, 1\)"):
        tilelab.run(kernel, device="cpu", blocks=[(8, 0)])
    with pytest.raises(ValueError, match="blocks= selects the blocks of a CPU run"):
        tilelab.run(kernel, device="cuda", blocks=[0])


@pytest.mark.parametrize("bug, where", [
    ("tile_past_end", r"read of S\[256\] \(past its end: S is 256\) in block \(0, 0, 0\)"),
    ("tile_below_start", r"read of S\[-1\] \(below its start: S is 256\) in block \(0, 0, 0\)"),
    ("global_below_start", r"write of Y\[-256\] \(below its start: Y is 1000\) in block \(1, 0, 0\)"),
])
def test_an_access_outside_a_buffer_is_reported_never_performed(bug, where):
    configs = {"tl.disable_safe_memory_legalize": True} if bug.startswith("global") else None
    x, y = torch.randn(1000), torch.zeros(1000)
    with pytest.raises(KernelLaunchError, match=where) as info:
        tilelab.run(ck.scale_shift(bug=bug), x, y, device="cpu", pass_configs=configs)
    assert info.value.kind == "illegal_address" and "none was performed" in str(info.value)
    if bug == "global_below_start":  # blocks 1-3 store their 256 elements below Y's start, block 0 its own
        assert info.value.out_of_bounds_total == 3 * 256 and len(info.value.out_of_bounds) == 64  # the first kept
        assert torch.equal(y[:256], 2 * x[:256] + 1)  # the output given holds what the kernel wrote inside it
        assert (y[256:].view(torch.int32) == -1).all()  # and the launch's poison where it wrote nothing
    # this process is intact and the next run works
    assert tilelab.run(ck.scale_shift(), device="cpu", ref=lambda x: 2 * x + 1).passed


def test_an_endless_loop_ends_at_the_timeout_and_the_next_run_works():
    with pytest.raises(KernelLaunchError, match=r"no answer within 3 s on the CPU") as info:
        tilelab.run(ck.endless(), device="cpu", timeout=3)
    assert info.value.kind == "timeout" and info.value.isolated
    assert tilelab.run(ck.scale_shift(), device="cpu", ref=lambda x: 2 * x + 1).passed


def test_a_crash_in_the_worker_costs_the_worker_not_this_process():
    from tilelab.launch import _emulate, _worker

    worker = _worker.default_worker(_emulate.CPU_WORKER)
    with pytest.raises(_worker.WorkerDied):
        worker.call(os.abort, timeout=60)
    assert tilelab.run(ck.scale_shift(), device="cpu", ref=lambda x: 2 * x + 1).passed


@pytest.mark.parametrize("factory, construct, line_text", [
    (lambda: __import__("barrier_kernels").relay(bug="wait_by_some"),
     r"an mbarrier wait only some threads of a group make", "T.barrier_wait(full[k % 2], (k // 2) % 2)"),
    (lambda: __import__("thread_kernels").divergent_barrier(), r"a barrier under a condition on the thread",
     "T.sync_threads()"),
    (ck.imported_device_function, r"the PTX instruction add\.rz\.f32: rounding mode \.rz .* in a device function "
     r"written in CUDA C \(double_it, from T.import_source; its line 3: asm volatile", "T.import_source(DOUBLE_IT)"),
    (ck.pointer_table, r"a float32 tensor reached through an address held in memory \(T\.make_tensor from a "
     r"pointer table\)", "src = T.make_tensor(table[0], (N,), T.float32)"),
    (ck.cluster_copy, r"a copy into another block's shared memory \(T\.copy_cluster",
     "T.copy_cluster(mine, theirs, dst_block=1, remote_barrier=ready[0])"),
])
def test_constructs_with_no_tile_meaning_are_refused_by_name_with_their_line(factory, construct, line_text):
    with pytest.raises(tilelab.EmulationError, match=construct) as info:
        tilelab.run(factory(), device="cpu")
    text = str(info.value)
    assert f": {line_text})" in text and "What still works: tilelab.inspect" in text


# float4_e2m1fn's values by their 4 bits (sign, two exponent bits of bias 1, one mantissa bit), from its definition
_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _packed_fp4():
    packed = torch.randint(0, 256, (4, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    low, high = packed.long() & 0xF, packed.long() >> 4
    return packed, low, high, torch.tensor(_E2M1)[torch.stack((low, high), -1).reshape(4, 32)]


def test_a_packed_float4_tensor_is_taken_as_its_bytes_and_read_as_its_values():
    packed, _, _, values = _packed_fp4()
    result = tilelab.run(ck.fp4_decode(), packed, device="cpu", ref=lambda x: 2 * values)
    assert result.passed, result
    assert dict(result.sizes)["n"] == 32  # 16 bytes of the last dimension hold 32 elements
    # the packed X says n = 32: a Y of 16 columns disagrees
    with pytest.raises(ValueError, match=r"n is 32 but Y has extent 16"):
        tilelab.run(ck.fp4_decode(), packed, torch.empty(4, 16), device="cpu")


@pytest.mark.heavy
def test_a_float4_tensor_read_with_its_halves_swapped_is_caught_by_the_values():
    packed, low, high, values = _packed_fp4()
    swapped = (high | (low << 4)).to(torch.uint8)  # element 2k in the high half: another tensor
    assert not tilelab.run(ck.fp4_decode(), swapped, device="cpu", ref=lambda x: 2 * values).passed


def test_a_keyword_run_does_not_know_is_refused_by_name():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'timout'.*Did you mean timeout=\?"):
        tilelab.run(ck.scale_shift(), device="cpu", timout=3)
    with pytest.raises(TypeError, match=r"'M'.* nor a dynamic size of scale_shift \(none: its shapes are all fixed\)"):
        tilelab.run(ck.scale_shift(), device="cpu", M=3)
    with pytest.raises(ValueError, match=r"device='tpu'"):
        tilelab.run(ck.scale_shift(), device="tpu")


# ------------------------------------------------------------------------------------------------
# The rules, one by one, on the rewritten IR (no compile)
# ------------------------------------------------------------------------------------------------

def test_each_rule_rewrites_what_it_says():
    from tilelab._tilelang.emulate import BLOCK_MASK, ROUND_FUNCTION, rewrite_for_cpu

    func = ck.attention()
    before = func.script()
    assert "shared.dyn" in before and "local.fragment" in before and "T.parallel" in before
    assert "num_stages" in before and '"tl.launch_threads": [256, 1, 1]' in before
    emulation = rewrite_for_cpu(func, "attention")
    after = emulation.func.script()
    assert set(emulation.applied) == {"scopes", "parallel", "pipeline", "threads", "dtypes", "blocks", "bounds"}
    assert "shared.dyn" not in after and "local.fragment" not in after  # scopes
    assert "T.parallel" not in after  # parallel
    assert "num_stages" not in after  # pipeline
    assert '"tl.launch_threads": [1, 1, 1]' in after  # threads
    assert "T.float16" not in after and '"float16")' not in after  # dtypes (stores round in the late pass)
    # an explicit cast to float16 rounds where it stands
    assert ROUND_FUNCTION in rewrite_for_cpu(ck.dequant_gemm(), "dequant_gemm").func.script()
    assert emulation.narrow == {"Q": "float16", "K": "float16", "V": "float16", "O": "float16", "Q_s": "float16",
                                "K_s": "float16", "V_s": "float16", "P": "float16"}
    assert f'for tilelab_selected in range(T.Cast("int32", {BLOCK_MASK}[' in after  # blocks: one trip or none
    assert emulation.grid_rank == 3 and emulation.block_names == {"x": "bx", "y": "by", "z": "bz"}
    rule_ids = [r.id for r in tilelab.launch.EMULATION_RULES]
    assert rule_ids == ["scopes", "parallel", "pipeline", "threads", "thread-level", "warp-roles", "explicit-wgmma",
                        "reducers", "tile-ops", "sparse", "dtypes", "imported", "intrinsics", "blocks", "bounds"]
    assert all(r.does and r.why for r in tilelab.launch.EMULATION_RULES)


# ------------------------------------------------------------------------------------------------
# Rounding to the GPU's types, against torch's own conversions
# ------------------------------------------------------------------------------------------------

def _probe_values():
    values = [0.0, -0.0, 1.0, -1.0, 1e-8, -1e-8, 3.14159, 65504.0, 65519.0, 65520.0, 70000.0, -70000.0,
              448.0, 464.0, 480.0, 500.0, 57344.0, 61440.0, 2 ** -14, 2 ** -24, 3 * 2 ** -25, 2 ** -25, 2 ** -9,
              2 ** -10, 3 * 2 ** -11, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1e30, -1e30,
              3.0e38, float("inf"), float("-inf")]
    gen = torch.Generator().manual_seed(0)
    for scale in (1e-6, 1e-3, 1.0, 1e3, 1e5):
        values += (torch.randn(200, generator=gen) * scale).tolist()
    return torch.tensor(values, dtype=torch.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_rounding_matches_torchs_conversion(dtype):
    from tilelab.launch._emulate import round_to_format

    values = _probe_values()
    torch_dtype = getattr(torch, dtype)
    if dtype == "float8_e4m3fn":  # no infinity: torch (as the GPU's satfinite conversion) saturates at 448
        values = values[torch.isfinite(values)]
    want = values.to(torch_dtype).float()
    got = torch.tensor(round_to_format(values.tolist(), dtype), dtype=torch.float32)
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    bad = [(float(v), float(g), float(w)) for v, g, w, s in zip(values, got, want, same) if not s]
    assert not bad, f"{dtype}: {bad[:8]}"
    assert not math.isnan(round_to_format([1.0], dtype)[0])


def test_the_worker_is_not_this_process():
    from tilelab.launch import _emulate, _worker

    tilelab.run(ck.scale_shift(), device="cpu")
    worker = _worker.default_worker(_emulate.CPU_WORKER)
    assert worker.alive and worker.pid != os.getpid()
    assert "tests" in sys.modules["cpu_path_kernels"].__file__


def test_an_input_the_kernel_stores_into_is_reported_and_holds_what_the_kernel_left():
    x = torch.randn(256).half()
    given = x.clone()
    result = tilelab.run(ck.clobbers_input(), x, device="cpu", ref=lambda t: t + 1)
    assert not result.passed and "input X was written by the kernel: " in repr(result)  # a kernel only reads inputs
    (state,) = result.inputs
    assert state.name == "X" and state.changed == int((given[:64] != 0).sum() + (given[128:192] != 0).sum())
    assert state.first_changed == (0,) and state.nonfinite == 0
    assert torch.equal(x[:64], torch.zeros(64).half()) and torch.equal(x[64:128], given[64:128])
    # an input the kernel never stores into is not compared at all, and is left as it was
    y = torch.randn(192, 96).half()
    y_given = y.clone()
    clean = tilelab.run(ck.gemm(), y, device="cpu")
    assert [s.changed for s in clean.inputs] == [0, 0] and torch.equal(y, y_given)


def test_a_kernel_loaded_from_its_ir_text_runs_as_the_kernel_itself():
    """The IR as TileLang's JSON (what a saved .tir.json holds): no source, the same tile program."""
    loaded = _tilelang.kernel_ir_from_text(_tilelang.kernel_ir_to_text(ck.row_reduce()))
    result = tilelab.run(loaded, device="cpu", ref=lambda x: x.amax(1))
    assert result.passed, result
    wrong = _tilelang.kernel_ir_from_text(_tilelang.kernel_ir_to_text(ck.row_reduce(bug="swap_reduction")))
    assert not tilelab.run(wrong, device="cpu", ref=lambda x: x.amax(1)).passed


def test_a_scalar_parameter_is_given_by_name():
    """A kernel's scalar parameter is a keyword run takes (as a dynamic size is), on either device."""
    import tilelang.language as T

    @T.prim_func
    def shifted(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32), offset: T.int32):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] + T.Cast(T.float32, offset)

    result = tilelab.run(shifted, device="cpu", offset=3, ref=lambda a, offset: a + offset)
    assert result.passed, result
