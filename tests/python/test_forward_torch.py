"""forward on torch tensors (skipped where torch is not installed): results
written in place (no copies), bf16, and bad tensors raising with nothing
written."""

import numpy as np
import pytest

import libattn
from paged import oracle, problem

torch = pytest.importorskip("torch")


def _setup(p, dtype=torch.float32, backend="REFERENCE"):
    name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    c = libattn.KVCache(backend, p["num_blocks"], p["block_size"], p["kv_heads"], p["head_size"],
                        dtype=name, array="torch")
    assert isinstance(c.storage, torch.Tensor)
    c.write(torch.from_numpy(p["slots"]), torch.from_numpy(p["k_all"]).to(dtype),
            torch.from_numpy(p["v_all"]).to(dtype))
    return c


def _meta(p):
    return dict(query_start_loc=torch.from_numpy(p["qsl"]), seq_lens=torch.from_numpy(p["seq_lens"]),
                block_table=torch.from_numpy(p["block_table"]))


def test_fp32_in_place(rng):
    p = problem(rng)
    c = _setup(p)
    q = torch.from_numpy(p["q"])
    out = torch.zeros_like(q)
    ptr = out.data_ptr()
    r = libattn.forward("REFERENCE", q, c, out, **_meta(p))
    assert r is out and out.data_ptr() == ptr
    np.testing.assert_allclose(out.numpy(), oracle(p), atol=1e-5)
    # the cache tensor is the storage the kernel read: its logical view shows the keys
    assert c.tensor.shape == torch.Size(c.shape)


def test_bf16_and_cpu_attn(rng):
    p = problem(rng, heads=8, kv_heads=2, head_size=64, block_size=16, seq_lens=(40, 3),
                query_lens=(1, 3), num_blocks=8)
    q = torch.from_numpy(p["q"]).to(torch.bfloat16)
    ref = torch.zeros_like(q)
    libattn.forward("REFERENCE", q, _setup(p, torch.bfloat16), ref, **_meta(p))
    want = oracle(p, q.float().numpy())
    np.testing.assert_allclose(ref.float().numpy(), want, atol=3e-2)
    out = torch.zeros_like(q)
    libattn.forward("CPU_ATTN", q, _setup(p, torch.bfloat16, "CPU_ATTN"), out, **_meta(p))
    np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), atol=3e-2)


def test_requires_grad_is_fine(rng):
    p = problem(rng)
    q = torch.from_numpy(p["q"]).requires_grad_(True)
    out = torch.zeros(q.shape)
    libattn.forward("REFERENCE", q, _setup(p), out, **_meta(p))
    np.testing.assert_allclose(out.numpy(), oracle(p), atol=1e-5)


def test_bad_tensors(rng):
    p = problem(rng)
    c = _setup(p)
    q = torch.from_numpy(p["q"])
    out = torch.full(q.shape, 5.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        libattn.forward("REFERENCE", q.transpose(0, 1).contiguous().transpose(0, 1), c, out,
                        **_meta(p))
    with pytest.raises(TypeError, match="q has dtype float64"):
        libattn.forward("REFERENCE", q.double(), c, out, **_meta(p))
    with pytest.raises(TypeError, match="out has dtype fp32, expected fp16"):
        libattn.forward("REFERENCE", q.half(), c, out, **_meta(p))
    with pytest.raises(ValueError, match="out must have shape"):
        libattn.forward("REFERENCE", q, c, out[:, :2].contiguous(), **_meta(p))
    m = _meta(p)
    m["block_table"] = m["block_table"].long()
    with pytest.raises(TypeError, match="block_table has dtype int64"):
        libattn.forward("REFERENCE", q, c, out, **m)
    assert torch.all(out == 5.0)
