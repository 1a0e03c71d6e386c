"""``%%tilelang`` on a real GPU, through IPython's test shell: compile, bind, run, bench.

Every test needs a CUDA GPU (marker ``gpu``; skipped elsewhere). Expected values come from
torch (``torch.matmul`` on the same inputs), never from tilelab. Sizes and timing budgets are
small so the module runs in well under a minute after the first compile.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.gpu

GEMM_CELL = """import torch
from gemm import matmul

gemm = matmul(1024, 1024, 1024, 128, 128, 32)
"""

DYNAMIC_CELL = """from gemm_dynamic import matmul_dynamic_m

gemm_dyn = matmul_dynamic_m(512, 512)
"""


from ipython_shell import ip, magics, run, shown  # noqa: E402,F401  (fixtures)


def _rel_error(got, want) -> float:
    got, want = got.double(), want.double()
    return float((got - want).norm() / want.norm())


def test_gemm_cell_compiles_runs_against_torch_and_benches(ip, shown):
    import torch

    from tilelab import _tilelang

    result = run(ip, "--out-idx -1 --run --ref torch.matmul --bench --rep-ms 10", GEMM_CELL)
    assert result.success, result.error_in_exec
    last = magics(ip).last
    kernel = ip.user_ns["gemm"]
    assert _tilelang.kernel_kind(kernel) == "compiled" and callable(kernel)
    assert last.bound == {"gemm": "compiled gemm"}

    # The bound kernel computes A @ B: checked against torch on fresh random fp16 inputs.
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(1024, 1024, dtype=torch.float16, device="cuda", generator=gen)
    b = torch.randn(1024, 1024, dtype=torch.float16, device="cuda", generator=gen)
    c = kernel(a, b)  # --out-idx -1: the kernel allocates and returns C
    torch.cuda.synchronize()
    assert c.shape == (1024, 1024) and c.dtype == torch.float16
    assert _rel_error(c, torch.matmul(a.double(), b.double())) < 1e-2

    # --run verified it against torch.matmul and passed; --bench timed it.
    runs, benches = last.launches.runs, last.launches.benches
    assert len(runs) == 1 and runs[0].passed and runs[0].reference == "matmul"
    assert len(benches) == 1 and benches[0].median_ms > 0 and len(benches[0].samples_ms) >= 10
    # ... and the inspector shows both in its Timing tab
    assert last.inspector.titles[-1] == "Timing"
    timing = last.inspector.tab("Timing")
    assert "PASS" in timing and "median" in timing
    assert "Timing" in shown[-1]["data"]["text/html"]


def test_a_factory_is_left_alone_and_its_kernel_is_bound_by_name(ip, shown):
    import torch

    from tilelab import _tilelang

    ip.user_ns.pop("gemm", None)
    result = run(ip, '--kernel matmul --args "256, 256, 256, 128, 128, 32" --out-idx -1 --quiet',
                 "from gemm import matmul\n")
    assert result.success, result.error_in_exec
    assert callable(ip.user_ns["matmul"]) and _tilelang.kernel_kind(ip.user_ns["matmul"]) is None
    kernel = ip.user_ns["gemm"]
    assert _tilelang.kernel_kind(kernel) == "compiled"
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    assert _rel_error(kernel(a, b), torch.matmul(a.double(), b.double())) < 1e-2


def test_dynamic_m_benches_each_size_set(ip, shown):
    result = run(ip, '--bench --sizes "m=1024;m=2048" --rep-ms 5', DYNAMIC_CELL)
    assert result.success, result.error_in_exec
    benches = magics(ip).last.launches.benches
    assert [r.sizes for r in benches] == [(("m", 1024),), (("m", 2048),)]
    assert all(r.median_ms > 0 for r in benches)
    timing = magics(ip).last.inspector.tab("Timing")
    assert re.search(r'src="data:image/png;base64,', timing)  # latency against size


def test_a_missing_dynamic_size_is_a_usage_error(ip, shown):
    from IPython.core.error import UsageError

    ip.user_ns.pop("gemm_dyn", None)
    result = run(ip, "--run --quiet", DYNAMIC_CELL)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    message = str(result.error_in_exec)
    assert "--sizes" in message and re.search(r"\bm\b", message), message  # names the size to pass
    assert "gemm_dyn" not in ip.user_ns  # the failed run bound nothing


def test_force_recompiles(ip, shown):
    assert run(ip, "--quiet", DYNAMIC_CELL).success
    first = ip.user_ns["gemm_dyn"]
    assert run(ip, "--quiet", DYNAMIC_CELL).success
    assert magics(ip).last.cache_hit and ip.user_ns["gemm_dyn"] is first
    assert run(ip, "--quiet --force", DYNAMIC_CELL).success
    assert not magics(ip).last.cache_hit and ip.user_ns["gemm_dyn"] is not first


def test_profile_through_the_magic(ip, shown, capsys):
    """``%%tilelang --profile``: Nsight Compute profiles the cell's kernel and the cell's output
    carries a Profile tab with the kernel's duration and tensor-pipe utilisation."""
    from tilelab.launch._profile import find_ncu

    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not found on this machine")
    ip.user_ns.pop("gemm", None)
    result = run(ip, "--out-idx -1 --profile", GEMM_CELL)
    assert result.success, result.error_in_exec
    printed = capsys.readouterr().out
    assert "%%tilelang --profile:" not in printed, printed  # no ProfileError was reported
    last = magics(ip).last
    profiles = last.launches.profiles
    assert len(profiles) == 1
    prof = profiles[0]
    assert prof.duration_ns and prof.duration_ns > 0
    assert prof.tensor_pipe_pct is not None and prof.tensor_pipe_pct > 0  # a tensor-core GEMM
    print(f"[figure] magic_profile: duration {prof.duration_ns / 1e3:.2f} us, tensor pipe "
          f"{prof.tensor_pipe_pct:.1f}%, ncu wall {prof.overhead_s} s")
    # The Profile tab of the inspector, and the cell's published output, show both figures.
    assert "Profile" in last.inspector.titles
    tab = last.inspector.tab("Profile")
    duration = re.search(r"<th>duration</th><td>([0-9.]+) us</td>", tab)
    pipe = re.search(r"<th>tensor pipe</th><td>([0-9.]+)% of peak", tab)
    assert duration and float(duration.group(1)) == pytest.approx(prof.duration_ns / 1e3, abs=0.01), tab[:2000]
    assert pipe and float(pipe.group(1)) == pytest.approx(prof.tensor_pipe_pct, abs=0.05), tab[:2000]
    html = shown[-1]["data"]["text/html"]
    assert "Profile" in html and "Nsight Compute profile of" in html and "tensor pipe" in html


INLINE_GEMM_CELL = """import tilelang.language as T


@T.prim_func
def hot_gemm(A: T.Tensor((2048, 2048), T.float16), B: T.Tensor((2048, 2048), T.float16),
             C: T.Tensor((2048, 2048), T.float32)):
    with T.Kernel(16, 16, threads=256) as (bx, by):
        A_s = T.alloc_shared((128, 32), T.float16)
        B_s = T.alloc_shared((32, 128), T.float16)
        C_l = T.alloc_fragment((128, 128), T.float32)
        T.clear(C_l)
        for k in T.Pipelined(64, num_stages=3):
            T.copy(A[by * 128, k * 32], A_s)
            T.copy(B[k * 32, bx * 128], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 128, bx * 128])
"""

_HOT = r'<span class="[^"]*tl-hot[^"]*" id="[^"]*-{view}-L(\d+)"><i class="tl-heat" style="[^"]*" title="([\d.]+)% of'


def test_profile_heat_reaches_the_cell_lines(ip, shown):
    """``%%tilelang --profile`` on a kernel written in the cell: Nsight Compute's per-line samples,
    summed through TileLang's #line directives, draw a heat margin on the CUDA view and on the
    cell's own lines, and the hot cell lines are lines of the kernel's body."""
    from tilelab.launch._profile import find_ncu

    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not found on this machine")
    result = run(ip, "--profile", INLINE_GEMM_CELL)
    assert result.success, result.error_in_exec
    last = magics(ip).last
    assert "Profile" in last.inspector.titles, last.inspector.titles
    cuda_hot = re.findall(_HOT.format(view="cuda"), last.inspector.tab("CUDA"))
    cell_hot = re.findall(_HOT.format(view="cell"), last.inspector.tab("Cell"))
    lines = ("%%tilelang --profile\n" + INLINE_GEMM_CELL).split("\n")
    print(f"[figure] cell heat: {[(int(n), lines[int(n) - 1].strip(), float(s)) for n, s in cell_hot]}; "
          f"{len(cuda_hot)} hot CUDA lines")
    assert cuda_hot, "no heat margin on the CUDA view"
    assert cell_hot, "no heat margin on the cell's lines"
    kernel_start = next(i for i, text in enumerate(lines, 1) if "@T.prim_func" in text)
    assert all(kernel_start <= int(n) <= len(lines) for n, _ in cell_hot), cell_hot
    assert 0 < sum(float(s) for _, s in cell_hot) <= 100.0 + 1e-6
    # the main loop's tile ops are among the hot lines (the WGMMA waits, the TMA barrier waits)
    assert any(re.search(r"T\.(gemm|copy|Pipelined)", lines[int(n) - 1]) for n, _ in cell_hot), cell_hot
    cell_share = sum(float(s) for _, s in cell_hot)
    if cell_share < 99.9:  # the rest is said, with where it went (TileLang's macro lines)
        rest = re.search(r"the other ([\d.]+)% of the samples", last.inspector.tab("Cell"))
        assert rest and float(rest.group(1)) == pytest.approx(100 - cell_share, abs=0.2), rest
    html = shown[-1]["data"]["text/html"]
    assert "tl-heat" in html


ASSERT_CELL = """import tilelang.language as T

@T.prim_func
def checked(A: T.Tensor((4096,), T.float32), B: T.Tensor((4096,), T.float32)):
    with T.Kernel(16, threads=256) as bx:
        for i in T.Parallel(256):
            T.device_assert(A[bx * 256 + i] < -100.0, "A must be below -100")
            B[bx * 256 + i] = A[bx * 256 + i]
"""


def test_a_failed_device_assert_in_a_cell_names_the_cells_line(ip, shown):
    """A T.device_assert that fails in every thread: the cell's error names the cell's line (as the
    Cell tab numbers it), the message and a failing thread; the next cell launches again."""
    from IPython.core.error import UsageError

    line = "--run"
    result = run(ip, line, ASSERT_CELL)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    message = str(result.error_in_exec)
    print(message)
    lines = (f"%%tilelang {line}\n" + ASSERT_CELL).split("\n")
    number = next(i for i, text in enumerate(lines, 1) if "T.device_assert" in text)
    assert "a device-side assert failed" in message and "A must be below -100" in message
    assert f"your line {number}" in message and re.search(r"block \(\d+, 0, 0\), thread \(\d+, 0, 0\)", message)
    after = run(ip, "--out-idx -1 --run --ref torch.matmul", GEMM_CELL)
    assert after.success, after.error_in_exec
