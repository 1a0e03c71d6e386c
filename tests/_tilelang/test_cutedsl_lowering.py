"""The cutedsl launcher reuses the CUDA lowering only where TileLang would lower the same way.

Ground truth: TileLang's own pipeline run from the start for the cutedsl target
(``tilelang.engine.lower.lower_with_context`` with a ``cutedsl`` backend context), which is what
``tilelang.compile(..., execution_backend="cutedsl")`` does; the inspected launcher must be
byte-identical to the one generated from it, whether the lowering was reused or not.
"""

from __future__ import annotations

import pytest
from gemm import matmul

import tilelab
from tilelab import _tilelang


def _copies(pairs: int):
    """``pairs`` tiles copied global -> shared -> global through TMA descriptors (2D boxes)."""
    import tilelang.language as T

    @T.prim_func
    def copies(X: T.Tensor((256, 256), T.float16), Y: T.Tensor((256, 256), T.float16),
               Z: T.Tensor((256, 256), T.float16), W: T.Tensor((256, 256), T.float16)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            S = T.alloc_shared((64, 64), T.float16)
            U = T.alloc_shared((64, 64), T.float16)
            T.copy(X[by * 64, bx * 64], S)
            T.copy(S, Y[by * 64, bx * 64])
            T.copy(Z[by * 64, bx * 64], U)
            T.copy(U, W[by * 64, bx * 64])

    return copies


def _contiguous_store():
    """A contiguous shared -> global copy: CUDA lowers it as a 1D bulk store, CuTeDSL never does."""
    import tilelang.language as T

    @T.prim_func
    def flat(A: T.Tensor((4096,), T.float16), B: T.Tensor((4096,), T.float16)):
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((1024,), T.float16)
            T.copy(A[bx * 1024], S)
            T.copy(S, B[bx * 1024])

    return flat


def _relowered(func, arch: str = "sm_90a"):
    """The cutedsl launcher from TileLang's whole pipeline run for the cutedsl target."""
    source = _tilelang.resolve_kernel(func)
    prim = source.prim_func
    configs = _tilelang.normalize_pass_configs(source.pass_configs)
    scheduled = _tilelang.tilelang().tvm.IRModule({str(prim.attrs["global_symbol"]): prim})
    return _tilelang.cutedsl_launcher(prim, scheduled, arch, configs)


def _cuda_lowering(func, arch: str = "sm_90a", configs: dict | None = None):
    source = _tilelang.resolve_kernel(func)
    lowered = _tilelang.lower(source, arch, out_idx=source.out_idx,
                             pass_configs=_tilelang.normalize_pass_configs(configs or {}), backends=("tvm_ffi",))
    return lowered


@pytest.mark.parametrize("make", [lambda: matmul(256, 256, 256, 128, 128, 32), lambda: _copies(2), _contiguous_store],
                         ids=["gemm", "tma-copies", "1d-bulk-store"])
def test_inspected_cutedsl_launcher_equals_tilelangs_own_lowering(make):
    func = make()
    inspected = tilelab.inspect(func, "sm_90a", force=True).sources.launcher("cutedsl")
    truth = _relowered(func)
    assert inspected.text is not None and truth.text is not None
    assert inspected.text == truth.text
    assert inspected.extra == truth.extra  # launcher.cpp and the CuTeDSL device module


def test_shared_lowering_only_where_no_cutedsl_rule_applies():
    gemm = _cuda_lowering(matmul(256, 256, 256, 128, 128, 32))
    assert _tilelang.cutedsl_shares_lowering(gemm.host_mod, gemm.device_mod, "sm_90a", {})
    flat = _cuda_lowering(_contiguous_store())
    # the 1D bulk store is a tl.tma_store whose first argument is a global address, no descriptor
    assert "tl::tma_store" in flat.device_source
    assert not _tilelang.cutedsl_shares_lowering(flat.host_mod, flat.device_mod, "sm_90a", {})
    # sm_100+ (st.bulk zero fills) and LDG/STG lowering never share, whatever the kernel
    assert not _tilelang.cutedsl_shares_lowering(gemm.host_mod, gemm.device_mod, "sm_100a", {})
    assert not _tilelang.cutedsl_shares_lowering(gemm.host_mod, gemm.device_mod, "sm_90a",
                                                {"tl.enable_lower_ldgstg": True})
