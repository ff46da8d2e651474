"""MLA forward_mqa (absorbed decode over the latent cache): REFERENCE_MLA
against a numpy oracle, CPU_MLA against REFERENCE_MLA, and bad input."""

import numpy as np
import pytest

import libattn

LORA, ROPE, H, BS = 64, 16, 4, 16


def _problem(rng, seq_lens=(7, 20)):
    R = len(seq_lens)
    nb = sum((s + BS - 1) // BS for s in seq_lens) + 2
    ids = rng.permutation(nb)
    mb = max((s + BS - 1) // BS for s in seq_lens)
    bt = np.zeros((R, mb), dtype=np.int32)
    n = 0
    for r, s in enumerate(seq_lens):
        k = (s + BS - 1) // BS
        bt[r, :k] = ids[n:n + k]
        n += k
    rows = [rng.standard_normal((s, LORA + ROPE)).astype(np.float32) for s in seq_lens]
    slots = np.concatenate([bt[r, np.arange(s) // BS].astype(np.int64) * BS + np.arange(s) % BS
                            for r, s in enumerate(seq_lens)])
    q = rng.standard_normal((R, H, LORA + ROPE)).astype(np.float32)  # one decode token each
    qsl = np.arange(R + 1, dtype=np.int32)
    return dict(nb=nb, bt=bt, rows=rows, slots=slots, q=q, qsl=qsl,
                seq=np.asarray(seq_lens, dtype=np.int32))


def _run(p, backend, scale=0.125):
    c = libattn.KVCache(backend, p["nb"], BS, 1, LORA + ROPE, head_size_v=LORA, dtype="fp32")
    allrows = np.concatenate(p["rows"])
    c.write_latent(p["slots"], np.ascontiguousarray(allrows[:, :LORA]),
                   np.ascontiguousarray(allrows[:, LORA:]))
    out = np.zeros((p["q"].shape[0], H, LORA), dtype=np.float32)
    libattn.forward_mqa(backend, p["q"], c, out, query_start_loc=p["qsl"], seq_lens=p["seq"],
                        block_table=p["bt"], kv_lora_rank=LORA, scale=scale)
    return out, c


def _oracle(p, scale=0.125):
    out = np.zeros((p["q"].shape[0], H, LORA))
    for r, rows in enumerate(p["rows"]):
        rows = rows.astype(np.float64)
        for h in range(H):
            s = rows @ p["q"][r, h].astype(np.float64) * scale
            w = np.exp(s - s.max())
            out[r, h] = (w / w.sum()) @ rows[:, :LORA]
    return out


def test_reference_mla_matches_oracle(rng):
    p = _problem(rng)
    out, _ = _run(p, "REFERENCE_MLA")
    np.testing.assert_allclose(out, _oracle(p), atol=1e-5)


def test_cpu_mla_matches_reference(rng):
    p = _problem(rng, seq_lens=(33, 5, 64))
    ref, _ = _run(p, "REFERENCE_MLA")
    out, _ = _run(p, "CPU_MLA")
    np.testing.assert_allclose(out, ref, atol=1e-4)


def test_mla_bad_input(rng):
    p = _problem(rng)
    _, c = _run(p, "REFERENCE_MLA")
    out = np.full((p["q"].shape[0], H, LORA), 3.0, dtype=np.float32)
    with pytest.raises(ValueError, match="out must have shape"):
        libattn.forward_mqa("REFERENCE_MLA", p["q"], c, out[:, :, :8].copy(),
                            query_start_loc=p["qsl"], seq_lens=p["seq"], block_table=p["bt"],
                            kv_lora_rank=LORA)
    with pytest.raises(libattn.Error) as ei:
        libattn.forward("REFERENCE_MLA", p["q"], c, out, query_start_loc=p["qsl"],
                        seq_lens=p["seq"], block_table=p["bt"])
    assert ei.value.status == "WRONG_ENTRY_POINT"
    seq = p["seq"].copy()
    seq[0] = 10_000  # more keys than its blocks hold
    with pytest.raises(libattn.Error):
        libattn.forward_mqa("REFERENCE_MLA", p["q"], c, out, query_start_loc=p["qsl"],
                            seq_lens=seq, block_table=p["bt"], kv_lora_rank=LORA)
    np.testing.assert_array_equal(out, 3.0)
