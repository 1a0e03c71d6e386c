"""Small kernels of our own for the timeline's tests: a flash-attention forward (two GEMMs, the second
reading P from registers: WGMMA ``rs``), an elementwise add, and a kernel spinning a known time on ``%globaltimer``."""

import contextlib

import tilelang.language as T

import tilelab


def flash_fwd(seq=256, dim=64, block_M=64, block_N=64, num_stages=2, threads=128, named=False):
    """``named``: the softmax between the two GEMMs is the region "softmax" (``tilelab.region``)."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    @T.prim_func
    def attn(Q: T.Tensor((seq, dim), T.float16), K: T.Tensor((seq, dim), T.float16),
             V: T.Tensor((seq, dim), T.float16), O: T.Tensor((seq, dim), T.float16)):  # noqa: E741 O: attention's output
        with T.Kernel(T.ceildiv(seq, block_M), threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), T.float16)
            K_s = T.alloc_shared((block_N, dim), T.float16)
            V_s = T.alloc_shared((block_N, dim), T.float16)
            S = T.alloc_fragment((block_M, block_N), T.float32)
            P = T.alloc_fragment((block_M, block_N), T.float16)
            acc = T.alloc_fragment((block_M, dim), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)  # noqa: E741 l: softmax's row sums
            rowsum = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bx * block_M, 0], Q_s)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(seq, block_N), num_stages=num_stages):
                T.copy(K[k * block_N, 0], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                with tilelab.region("softmax") if named else contextlib.nullcontext():
                    T.copy(m, m_prev)
                    T.reduce_max(S, m, dim=1, clear=False)
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                    for i in T.Parallel(block_M):
                        l[i] = l[i] * T.exp2(m_prev[i] * scale - m[i] * scale)
                    for i, j in T.Parallel(block_M, dim):
                        acc[i, j] = acc[i, j] * T.exp2(m_prev[i] * scale - m[i] * scale)
                    T.reduce_sum(S, rowsum, dim=1)
                    for i in T.Parallel(block_M):
                        l[i] = l[i] + rowsum[i]
                    T.copy(S, P)
                T.copy(V[k * block_N, 0], V_s)
                T.gemm(P, V_s, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = acc[i, j] / l[i]
            T.copy(acc, O[bx * block_M, 0])
    return attn

def add(n=1 << 20, block=1024, threads=256):
    @T.prim_func
    def vadd(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return vadd


SPIN_SOURCE = r"""
__device__ __forceinline__ unsigned long long tl_test_spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  return t - t0;
}
"""


def spin(ns=20000, threads=128):
    """One block whose threads spin ``ns`` nanoseconds on %globaltimer, then each writes the time it
    spun as the timer saw it (ns)."""
    @T.prim_func
    def spin_kernel(A: T.Tensor((threads,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            T.import_source(SPIN_SOURCE)
            tx = T.get_thread_binding()
            A[tx] = T.Cast(T.float32, T.call_extern("uint64", "tl_test_spin_ns", T.uint64(ns))) + T.Cast(T.float32, bx)
    return spin_kernel


# ------------------------------------------------------------------------------------------
# Helpers of the rewrite tests (CUDA and CuTe DSL)
# ------------------------------------------------------------------------------------------


def line_of(path, needle):
    """The 1-based line of ``path`` that contains ``needle`` (ground truth: the file itself)."""
    from pathlib import Path

    hits = [i + 1 for i, text in enumerate(Path(path).read_text().split("\n")) if needle in text]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def plain_line(plain, n):
    return plain.split("\n")[n - 1]


def by_kind(ins, kind, role=None):
    return [s for s in ins.sites if s.kind == kind and (role is None or s.role == role)]


def gemm_phases(ins, gemm_py, k_tiles):
    """The warp-specialised GEMM's sites, one per phase, checked against the user's lines of
    ``gemm_py`` as every backend must name them (the producer's empty wait and TMA issue, the
    consumer's full wait, WGMMA and its wait, the epilogue; each loop phase once per k-tile), and
    returned by phase for the backend's own device-line checks."""
    from types import SimpleNamespace

    copy_a, copy_b = line_of(gemm_py, "T.copy(A[by"), line_of(gemm_py, "T.copy(B[k")
    gemm, loop = line_of(gemm_py, "T.gemm(A_shared"), line_of(gemm_py, "T.Pipelined(")
    store = line_of(gemm_py, "T.copy(C_local, C[")
    (empty,) = by_kind(ins, "barrier_wait", "producer")
    (issue,) = by_kind(ins, "tma_issue", "producer")
    (full,) = by_kind(ins, "barrier_wait", "consumer")
    (mma,) = by_kind(ins, "mma", "consumer")
    (mma_wait,) = by_kind(ins, "mma_wait", "consumer")
    (epilogue,) = by_kind(ins, "epilogue", "consumer")
    assert empty.stage == "empty" and empty.cell_line == loop and f"T.Pipelined L{loop}" in empty.label
    assert full.stage == "full" and full.cell_line == loop and f"L{copy_a}" in full.label
    assert f"T.copy A -> A_shared L{copy_a}" in issue.label and f"T.copy B -> B_shared L{copy_b}" in issue.label
    assert mma.cell_line == gemm and "T.gemm(A_shared, B_shared, C_local)" in mma.label
    assert epilogue.cell_line == store
    assert set(full.barriers) <= set(issue.barriers)  # the flows link the issue to the wait it releases
    assert {s.multiplicity for s in (empty, issue, full, mma, mma_wait)} == {k_tiles}
    assert ins.capacity_exact and not ins.notes
    return SimpleNamespace(empty=empty, issue=issue, full=full, mma=mma, mma_wait=mma_wait, epilogue=epilogue,
                           copy_a=copy_a)
