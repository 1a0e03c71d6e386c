"""Flash-attention forward: O = softmax(Q K^T / sqrt(dim)) V, one tile of queries per block.

``flash_attention(batch, heads, seq_len, dim, block_M, block_N, num_stages, threads, is_causal)``
returns the ``T.prim_func``. Tensors are laid out ``(batch, seq_len, heads, dim)`` in fp16. Each
block holds ``block_M`` queries in shared memory and walks the keys and values ``block_N`` at a
time (pipelined over ``num_stages``), keeping for every query row the running maximum ``m`` and
the running sum ``l`` of its exponentials (the online softmax of FlashAttention, Dao et al.
2022): when a new tile raises a row's maximum, what was accumulated so far is rescaled by
``2^(m_old - m_new)`` (exponentials in base 2, the scale folded into ``log2(e) / sqrt(dim)``).
With ``is_causal`` a query attends only to keys at or before its position, and the walk stops at
the diagonal.

``SPACE`` is the tuning space ``benchmarks/tuning.py`` searches.
"""

import math

import tilelang.language as T


def flash_attention(batch, heads, seq_len, dim, block_M=64, block_N=64, num_stages=1, threads=128,
                    is_causal=False, dtype=T.float16, accum_dtype=T.float32):
    shape = (batch, seq_len, heads, dim)
    scale = math.log2(math.e) / math.sqrt(dim)  # softmax(x / sqrt(d)) computed with exp2

    @T.prim_func
    def attention(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(shape, dtype),
        V: T.Tensor(shape, dtype),
        O: T.Tensor(shape, dtype),  # noqa: E741 O: attention's output
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bq, h, b):
            q_tile = T.alloc_shared((block_M, dim), dtype)
            k_tile = T.alloc_shared((block_N, dim), dtype)
            v_tile = T.alloc_shared((block_N, dim), dtype)
            o_tile = T.alloc_shared((block_M, dim), dtype)
            scores = T.alloc_fragment((block_M, block_N), accum_dtype)
            probs = T.alloc_fragment((block_M, block_N), dtype)
            out = T.alloc_fragment((block_M, dim), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_max_before = T.alloc_fragment((block_M,), accum_dtype)
            rescale = T.alloc_fragment((block_M,), accum_dtype)
            tile_sum = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[b, bq * block_M:(bq + 1) * block_M, h, :], q_tile)
            T.fill(out, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(accum_dtype))
            n_tiles = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bq + 1) * block_M, block_N)) if is_causal \
                else T.ceildiv(seq_len, block_N)
            for t in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[b, t * block_N:(t + 1) * block_N, h, :], k_tile)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        scores[i, j] = T.if_then_else(bq * block_M + i >= t * block_N + j, 0,
                                                      -T.infinity(accum_dtype))
                else:
                    T.clear(scores)
                T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, row_max_before)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(row_max_before[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    out[i, j] *= rescale[i]
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * rescale[i] + tile_sum[i]
                T.copy(scores, probs)
                T.copy(V[b, t * block_N:(t + 1) * block_N, h, :], v_tile)
                T.gemm(probs, v_tile, out, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                out[i, j] /= row_sum[i]
            T.copy(out, o_tile)
            T.copy(o_tile, O[b, bq * block_M:(bq + 1) * block_M, h, :])

    return attention


# 2 x 2 x 3 x 2 = 24 configurations
SPACE = [dict(block_M=bm, block_N=bn, num_stages=st, threads=th)
         for bm in (64, 128) for bn in (64, 128) for st in (1, 2, 3) for th in (128, 256)]


def attention_reference(q, k, v, is_causal=False):
    """The same attention in torch (float32 softmax), for checks: ``(batch, seq, heads, dim)`` in and out."""
    import torch

    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # (batch, heads, seq, dim)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ vf).transpose(1, 2).to(q.dtype)
