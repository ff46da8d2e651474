"""Hostile arguments to the extension: each error carries its own text
(never an empty or a stale one from an earlier failure), and hostile
query_start_loc entries reach the C check, which refuses them with nothing
written."""

import numpy as np
import pytest

import libattn
from libattn import _core
from paged import problem

LAYER = {"num_heads": 4, "num_kv_heads": 2, "head_size": 16, "dtype": "fp32"}


def _stale_failure(rng):
    """Leaves a library failure text behind on this thread."""
    p = problem(rng)
    c = libattn.KVCache("REFERENCE", p["num_blocks"], p["block_size"], p["kv_heads"],
                        p["head_size"], dtype="fp32")
    bt = p["block_table"].copy()
    bt[0, 0] = 999
    with pytest.raises(libattn.Error, match="999"):
        libattn.forward("REFERENCE", p["q"], c, np.zeros_like(p["q"]), query_start_loc=p["qsl"],
                        seq_lens=p["seq_lens"], block_table=bt)


@pytest.mark.parametrize("key,value,exc,text", [
    ("kv_cache_dtype", 5, TypeError, "kv_cache_dtype must be a str, not int"),
    ("attn_type", 5, TypeError, "attn_type must be a str, not int"),
    ("kv_cache_dtype", None, TypeError, "kv_cache_dtype must be a str, not NoneType"),
    ("kv_cache_dtype", "fp9", ValueError, "kv_cache_dtype: "),
    ("attn_type", "sideways", ValueError, "attn_type: "),
])
def test_layer_fields_carry_their_own_text(rng, key, value, exc, text):
    _stale_failure(rng)
    with pytest.raises(exc) as ei:
        _core.kernel("REFERENCE", dict(LAYER, **{key: value}))
    msg = str(ei.value)
    assert msg.startswith(text), msg
    assert "999" not in msg, "stale text of the earlier failure: " + msg
    if exc is ValueError:
        assert str(value) in msg, "the parse's own text names the value: " + msg


def test_hostile_query_start_loc_reaches_the_c_check(rng):
    """{0, 12, INT_MIN, -5, 12}: the extension's own pass over the entries
    must not subtract them in int (before: signed overflow) and the library
    refuses them."""
    p = problem(rng, seq_lens=(12, 12, 12, 12), query_lens=(3, 3, 3, 3), num_blocks=16)
    c = libattn.KVCache("REFERENCE", p["num_blocks"], p["block_size"], p["kv_heads"],
                        p["head_size"], dtype="fp32")
    out = np.full(p["q"].shape, 7.0, dtype=np.float32)
    qsl = np.array([0, 12, np.iinfo(np.int32).min, -5, 12], dtype=np.int32)
    for backend in ("REFERENCE", "CPU_ATTN"):
        with pytest.raises(libattn.Error) as ei:
            libattn.forward(backend, p["q"], c, out, query_start_loc=qsl, seq_lens=p["seq_lens"],
                            block_table=p["block_table"])
        assert ei.value.status == "BAD_METADATA"
        assert "query_start_loc decreases at request 1" in str(ei.value), str(ei.value)
        np.testing.assert_array_equal(out, 7.0)
