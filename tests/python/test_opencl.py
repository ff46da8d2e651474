"""OPENCL_ATTN through the Python package: the caller's arrays (numpy, and
torch when installed) stay host memory; each forward copies the cache,
q, out and lse to the OpenCL device and back through the device's ops.
Results against REFERENCE on the same arrays. Skipped where this machine
has no OpenCL device (PoCL runs here)."""

import numpy as np
import pytest

import libattn
from libattn import _core
from paged import problem


def _kernel(backend, p, dtype="fp32", **kw):
    try:
        return libattn.Kernel(backend, num_heads=p["heads"], num_kv_heads=p["kv_heads"],
                              head_size=p["head_size"], dtype=dtype, **kw)
    except libattn.Error as e:
        if backend == "OPENCL_ATTN" and e.status == "PLATFORM_UNAVAILABLE":
            pytest.skip(f"no OpenCL device here: {e.message}")
        raise


def _filled(p, backend, dtype="fp32", cast=np.float32, **kw):
    c = libattn.KVCache(backend, p["num_blocks"], p["block_size"], p["kv_heads"], p["head_size"],
                        dtype=dtype, **kw)
    c.write(p["slots"], p["k_all"].astype(cast), p["v_all"].astype(cast))
    return c


def _run(k, p, c, q, out, **kw):
    return k.forward(q, c, out, query_start_loc=p["qsl"], seq_lens=p["seq_lens"],
                     block_table=p["block_table"], **kw)


def _both(p, dtype="fp32", cast=np.float32, kv_cache_dtype="auto", **layer):
    """(OPENCL_ATTN's out, lse), (REFERENCE's out, lse) for the same problem."""
    res = []
    for backend in ("OPENCL_ATTN", "REFERENCE"):
        k = _kernel(backend, p, dtype, kv_cache_dtype=kv_cache_dtype, **layer)
        c = _filled(p, backend, dtype, cast, kv_cache_dtype=kv_cache_dtype)
        q = p["q"].astype(cast)
        out = np.full(q.shape, np.nan, dtype=q.dtype)
        lse = np.full(q.shape[:2], np.nan, dtype=np.float32)
        assert _run(k, p, c, q, out, lse=lse) is out
        res.append((out.astype(np.float32), lse))
    return res


def test_runs_on_the_opencl_device(rng):
    p = problem(rng, heads=8, kv_heads=2, head_size=64, block_size=16, seq_lens=(40, 3, 70),
                query_lens=(1, 3, 17), num_blocks=16)
    k = _kernel("OPENCL_ATTN", p)
    info = _core.kernel_info(k._cap)
    assert info["backend"] == "OPENCL_ATTN" and info["device"] == "opencl", info
    assert k.variant == "opencl-c-1.2" and not k.is_mla
    (out, lse), (ref, ref_lse) = _both(p)
    np.testing.assert_allclose(out, ref, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4)


def test_bf16_fp8_window_sinks_softcap(rng):
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    p = problem(rng, heads=8, kv_heads=1, head_size=128, block_size=32, seq_lens=(90, 200, 7),
                query_lens=(90, 1, 2), num_blocks=20)
    sinks = rng.uniform(-1, 2, p["heads"]).astype(np.float32)
    layer = dict(sliding_window=50, logits_soft_cap=20.0, sinks=sinks)
    (out, lse), (ref, ref_lse) = _both(p, "bf16", bf16, **layer)
    np.testing.assert_allclose(out, ref, atol=2e-2 * np.abs(ref).max())
    np.testing.assert_allclose(lse, ref_lse, atol=2e-2)
    (out, lse), (ref, ref_lse) = _both(p, "fp32", np.float32, "fp8_e4m3", **layer)
    np.testing.assert_allclose(out, ref, atol=1e-3 * np.abs(ref).max())


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    p = problem(rng, heads=4, kv_heads=2, head_size=32, block_size=16, seq_lens=(33, 5),
                query_lens=(33, 1), num_blocks=6)
    k = _kernel("OPENCL_ATTN", p)
    c = libattn.KVCache("OPENCL_ATTN", p["num_blocks"], p["block_size"], p["kv_heads"],
                        p["head_size"], dtype="fp32", array="torch")
    c.write(p["slots"], torch.from_numpy(p["k_all"]), torch.from_numpy(p["v_all"]))
    q = torch.from_numpy(p["q"])
    out = torch.zeros_like(q)
    _run(k, p, c, q, out)
    ref = np.zeros_like(p["q"])
    _run(_kernel("REFERENCE", p), p, _filled(p, "REFERENCE"), p["q"], ref)
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-4 * np.abs(ref).max())


def test_bad_input_raises_and_writes_nothing(rng):
    p = problem(rng, heads=4, kv_heads=2, head_size=32, block_size=16, seq_lens=(20,),
                query_lens=(4,), num_blocks=4)
    k = _kernel("OPENCL_ATTN", p)
    c = _filled(p, "OPENCL_ATTN")
    out = np.full_like(p["q"], 7.0)
    bt = p["block_table"].copy()
    bt[0, 0] = p["num_blocks"]  # outside the pool
    with pytest.raises(libattn.Error) as e:
        k.forward(p["q"], c, out, query_start_loc=p["qsl"], seq_lens=p["seq_lens"],
                  block_table=bt)
    assert e.value.status == "BAD_METADATA", e.value
    assert np.all(out == 7.0)
    # a head size the kernels do not take is refused at open
    with pytest.raises(libattn.Error) as e:
        libattn.Kernel("OPENCL_ATTN", num_heads=4, num_kv_heads=2, head_size=12, dtype="fp32")
    assert e.value.status == "UNSUPPORTED", e.value
