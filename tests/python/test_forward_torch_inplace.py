"""Kernel.forward reads torch tensors in place in the C layer (no numpy view
per call): the same bits as the numpy path, and every tensor the numpy path
refused still refused with nothing written (skipped without torch)."""

import numpy as np
import pytest

import libattn
from paged import problem

torch = pytest.importorskip("torch")


def _problem(rng):
    return problem(rng, heads=8, kv_heads=2, head_size=64, block_size=16, seq_lens=(40, 3),
                   query_lens=(1, 3), num_blocks=8)


def _cache(p, array):
    c = libattn.KVCache("CPU_ATTN", p["num_blocks"], p["block_size"], p["kv_heads"],
                        p["head_size"], dtype="fp32", array=array)
    c.write(p["slots"], p["k_all"], p["v_all"])
    return c


def _meta(p, conv):
    return dict(query_start_loc=conv(p["qsl"]), seq_lens=conv(p["seq_lens"]),
                block_table=conv(p["block_table"]))


def _kernel(p, dtype="fp32"):
    return libattn.Kernel("CPU_ATTN", num_heads=p["heads"], num_kv_heads=p["kv_heads"],
                          head_size=p["head_size"], dtype=dtype)


def test_same_bits_as_numpy(rng):
    p = _problem(rng)
    k = _kernel(p)
    want = np.zeros_like(p["q"])
    k.forward(p["q"], _cache(p, "numpy"), want, **_meta(p, np.asarray))
    got = torch.zeros(p["q"].shape)
    lse = torch.zeros(p["q"].shape[:2])
    k.forward(torch.from_numpy(p["q"]), _cache(p, "torch"), got, lse=lse,
              **_meta(p, torch.from_numpy))
    assert np.array_equal(got.numpy(), want)
    assert torch.all(torch.isfinite(lse))


def test_bad_tensors_refused(rng):
    p = _problem(rng)
    k = _kernel(p, "bf16")
    c = libattn.KVCache("CPU_ATTN", p["num_blocks"], p["block_size"], p["kv_heads"],
                        p["head_size"], dtype="bf16", array="torch")
    q = torch.from_numpy(p["q"]).to(torch.bfloat16)
    out = torch.full(q.shape, 5.0, dtype=torch.bfloat16)
    m = _meta(p, torch.from_numpy)
    with pytest.raises(ValueError, match="q is on meta"):
        k.forward(q.to("meta"), c, out, **m)
    with pytest.raises(TypeError, match="q has dtype int16, expected bf16"):
        k.forward(q.view(torch.int16), c, out, **m)
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        k.forward(q, c, torch.full((q.shape[1], q.shape[0], q.shape[2]), 5.0,
                                   dtype=torch.bfloat16).transpose(0, 1), **m)
    with pytest.raises(ValueError, match="negative bit"):
        k.forward(torch._neg_view(q), c, out, **m)
    with pytest.raises(TypeError, match="lse has dtype bf16, expected fp32"):
        k.forward(q, c, out, lse=torch.zeros(q.shape[:2], dtype=torch.bfloat16), **m)
    bad = dict(m, seq_lens=m["seq_lens"][:1])
    with pytest.raises(ValueError, match="seq_lens must have shape"):
        k.forward(q, c, out, **bad)
    assert torch.all(out == 5.0)
