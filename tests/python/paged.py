"""A small paged-attention problem and an independent numpy oracle for it."""

import numpy as np


def problem(rng, *, heads=4, kv_heads=2, head_size=16, block_size=4, seq_lens=(5, 9, 1),
            query_lens=(1, 3, 1), num_blocks=12):
    """Random K/V for each request's context, a shuffled block table, and the
    queries of this step (the last query_lens tokens of each request)."""
    R = len(seq_lens)
    max_blocks = max((s + block_size - 1) // block_size for s in seq_lens)
    ids = rng.permutation(num_blocks)
    block_table = np.zeros((R, max_blocks), dtype=np.int32)
    n = 0
    for r, s in enumerate(seq_lens):
        nb = (s + block_size - 1) // block_size
        block_table[r, :nb] = ids[n:n + nb]
        n += nb
    keys = [rng.standard_normal((s, kv_heads, head_size)).astype(np.float32) for s in seq_lens]
    vals = [rng.standard_normal((s, kv_heads, head_size)).astype(np.float32) for s in seq_lens]
    slots = np.concatenate([
        block_table[r, np.arange(s) // block_size].astype(np.int64) * block_size
        + np.arange(s) % block_size for r, s in enumerate(seq_lens)
    ])
    qsl = np.zeros(R + 1, dtype=np.int32)
    qsl[1:] = np.cumsum(query_lens)
    q = rng.standard_normal((int(qsl[-1]), heads, head_size)).astype(np.float32)
    return dict(heads=heads, kv_heads=kv_heads, head_size=head_size, block_size=block_size,
                num_blocks=num_blocks, block_table=block_table, keys=keys, vals=vals,
                slots=slots, k_all=np.concatenate(keys), v_all=np.concatenate(vals),
                qsl=qsl, seq_lens=np.asarray(seq_lens, dtype=np.int32), q=q,
                query_lens=query_lens)


def oracle(p, q=None, scale=None):
    """Causal attention per request in float64 from the unpaged K/V."""
    q = p["q"] if q is None else q
    H, KVH, D = p["heads"], p["kv_heads"], p["head_size"]
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    out = np.zeros(q.shape, dtype=np.float64)
    for r, (s, ql) in enumerate(zip(p["seq_lens"], p["query_lens"])):
        k, v = p["keys"][r].astype(np.float64), p["vals"][r].astype(np.float64)
        for i in range(ql):
            t = p["qsl"][r] + i
            pos = s - ql + i
            for h in range(H):
                g = h // (H // KVH)
                sc = k[: pos + 1, g] @ q[t, h].astype(np.float64) * scale
                w = np.exp(sc - sc.max())
                out[t, h] = (w / w.sum()) @ v[: pos + 1, g]
    return out
