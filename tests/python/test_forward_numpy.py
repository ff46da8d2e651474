"""forward on numpy arrays: REFERENCE against an independent numpy oracle,
CPU_ATTN against REFERENCE, bf16 through ml_dtypes, and bad input raising
with nothing written."""

import numpy as np
import pytest

import libattn
from paged import oracle, problem


def _cache(p, backend="REFERENCE", dtype="fp32", **kw):
    c = libattn.KVCache(backend, p["num_blocks"], p["block_size"], p["kv_heads"], p["head_size"],
                        dtype=dtype, **kw)
    return c


def _filled(p, backend="REFERENCE", dtype="fp32", cast=np.float32):
    c = _cache(p, backend, dtype)
    c.write(p["slots"], p["k_all"].astype(cast), p["v_all"].astype(cast))
    return c


def _run(p, backend, c, q, out, **kw):
    return libattn.forward(backend, q, c, out, query_start_loc=p["qsl"], seq_lens=p["seq_lens"],
                           block_table=p["block_table"], **kw)


def test_reference_matches_numpy_oracle(rng):
    p = problem(rng)
    c = _filled(p)
    out = np.zeros_like(p["q"])
    lse = np.zeros(p["q"].shape[:2], dtype=np.float32)
    assert _run(p, "REFERENCE", c, p["q"], out, lse=lse) is out
    np.testing.assert_allclose(out, oracle(p), atol=1e-5)
    assert np.all(np.isfinite(lse))


def test_cache_layout_and_write(rng):
    p = problem(rng)
    c = _filled(p)
    assert c.dim_names[0] == "2" and len(c.shape) == 5
    t = c.tensor
    assert t.shape == c.shape
    # the slot of request 1, token 6 holds its key and value
    blk, off = p["block_table"][1, 6 // p["block_size"]], 6 % p["block_size"]
    idx = {n: i for i, n in enumerate(c.dim_names)}
    sel = [0] * 5
    sel[idx["num_blocks"]], sel[idx["block_size"]] = blk, off
    sel[idx["num_kv_heads"]] = slice(None)
    sel[idx["head_size"]] = slice(None)
    np.testing.assert_array_equal(t[tuple(sel)], p["keys"][1][6])
    sel[0] = 1
    np.testing.assert_array_equal(t[tuple(sel)], p["vals"][1][6])


def test_cpu_attn_matches_reference(rng):
    p = problem(rng, heads=8, kv_heads=2, head_size=64, block_size=16, seq_lens=(40, 3, 70),
                query_lens=(1, 3, 5), num_blocks=16)
    ref = np.zeros_like(p["q"])
    _run(p, "REFERENCE", _filled(p), p["q"], ref)
    c = _filled(p, "CPU_ATTN")
    assert c.layout == "HND"
    out = np.zeros_like(p["q"])
    _run(p, "CPU_ATTN", c, p["q"], out)
    np.testing.assert_allclose(out, ref, atol=2e-5)


def test_bf16_through_ml_dtypes(rng):
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    p = problem(rng, head_size=32)
    c = _filled(p, dtype="bf16", cast=bf16)
    q = p["q"].astype(bf16)
    out = np.zeros(q.shape, dtype=bf16)
    _run(p, "REFERENCE", c, q, out)
    np.testing.assert_allclose(out.astype(np.float32), oracle(p, q.astype(np.float32)),
                               atol=3e-2)


def test_kernel_object_reused_with_options(rng):
    p = problem(rng)
    c = _filled(p)
    k = libattn.Kernel("REFERENCE", num_heads=p["heads"], num_kv_heads=p["kv_heads"],
                       head_size=p["head_size"], dtype="fp32", scale=0.5)
    out = np.zeros_like(p["q"])
    for _ in range(2):
        k.forward(p["q"], c, out, query_start_loc=p["qsl"], seq_lens=p["seq_lens"],
                  block_table=p["block_table"])
    np.testing.assert_allclose(out, oracle(p, scale=0.5), atol=1e-5)


def _expect_untouched(fn, out, exc, match):
    before = out.copy()
    with pytest.raises(exc, match=match):
        fn()
    np.testing.assert_array_equal(out, before)


def test_bad_inputs_raise_and_write_nothing(rng):
    p = problem(rng)
    c = _filled(p)
    out = np.full(p["q"].shape, 7.0, dtype=np.float32)
    run = lambda **kw: _run(p, "REFERENCE", c, kw.pop("q", p["q"]), kw.pop("out", out), **kw)  # noqa: E731
    # wrong shape: out with the wrong head count
    bad_out = np.full((p["q"].shape[0], 3, p["head_size"]), 7.0, dtype=np.float32)
    _expect_untouched(lambda: run(out=bad_out), bad_out, ValueError, "out must have shape")
    # wrong dtype
    _expect_untouched(lambda: run(q=p["q"].astype(np.float64)), out, TypeError, "q has dtype")
    _expect_untouched(lambda: run(out=out.astype(np.float16)), out, TypeError, "out has dtype")
    # non-contiguous q
    wide = np.zeros((p["q"].shape[0], p["heads"], 2 * p["head_size"]), dtype=np.float32)
    _expect_untouched(lambda: run(q=wide[:, :, ::2]), out, ValueError, "C-contiguous")
    # read-only output
    ro = out.copy()
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        run(out=ro)
    # int64 metadata where int32 is expected
    _expect_untouched(
        lambda: libattn.forward("REFERENCE", p["q"], c, out, query_start_loc=p["qsl"].astype(np.int64),
                                seq_lens=p["seq_lens"], block_table=p["block_table"]),
        out, TypeError, "query_start_loc has dtype int64")
    # a block id outside the cache: the library's own check
    bt = p["block_table"].copy()
    bt[1, 0] = p["num_blocks"] + 5
    with pytest.raises(libattn.Error) as ei:
        libattn.forward("REFERENCE", p["q"], c, out, query_start_loc=p["qsl"],
                        seq_lens=p["seq_lens"], block_table=bt)
    assert ei.value.status == "BAD_METADATA"
    np.testing.assert_array_equal(out, 7.0)
    # query_start_loc that does not end at the token count
    qsl = p["qsl"].copy()
    qsl[-1] -= 1
    with pytest.raises(libattn.Error):
        libattn.forward("REFERENCE", p["q"], c, out, query_start_loc=qsl,
                        seq_lens=p["seq_lens"], block_table=p["block_table"])
    np.testing.assert_array_equal(out, 7.0)
    # lists are not arrays for data
    with pytest.raises(TypeError, match="numpy array or torch tensor"):
        run(q=p["q"].tolist())


def test_bad_cache_writes_change_nothing(rng):
    p = problem(rng)
    c = _filled(p)
    before = c.storage.copy()
    slots = p["slots"].copy()
    slots[3] = p["num_blocks"] * p["block_size"]  # one past the last slot
    with pytest.raises(libattn.Error):
        c.write(slots, p["k_all"] + 1, p["v_all"] + 1)
    with pytest.raises(ValueError, match="key must have shape"):
        c.write(p["slots"], np.ascontiguousarray(p["k_all"][:, :1]), p["v_all"])
    with pytest.raises(TypeError, match="value has dtype"):
        c.write(p["slots"], p["k_all"], p["v_all"].astype(np.float16))
    np.testing.assert_array_equal(c.storage, before)


def test_view_outside_storage_is_refused(rng):
    p = problem(rng)
    c = _filled(p)
    small = libattn.KVCache.wrap(c.storage[: c.storage.size // 2], c.view, dtype="fp32")
    out = np.zeros_like(p["q"])
    with pytest.raises(ValueError, match="storage holds"):
        _run(p, "REFERENCE", small, p["q"], out)


def test_wrong_entry_points():
    with pytest.raises(libattn.Error) as ei:
        q = np.zeros((1, 2, 576), dtype=np.float32)
        c = libattn.KVCache("REFERENCE", 2, 16, 1, 576, dtype="fp32")
        libattn.forward_mqa("REFERENCE", q, c, np.zeros((1, 2, 512), np.float32),
                            query_start_loc=[0, 1], seq_lens=[1], block_table=[[0]],
                            kv_lora_rank=512)
    assert ei.value.status == "WRONG_ENTRY_POINT"
