"""Model configs: presets, a Hugging Face config.json written here, KV
groups, per-group selection, and malformed configs."""

import json

import pytest

import libattn


def test_preset_llama():
    assert "llama-3.1-8b" in libattn.model_presets()
    m = libattn.model("llama-3.1-8b")
    assert len(m.layers) == 32 and len(m.groups) == 1
    g = m.groups[0]
    assert g.layers == list(range(32))
    assert (g.spec.num_heads, g.spec.num_kv_heads, g.spec.head_size) == (32, 8, 128)
    assert g.spec.kind == "full_attention" and g.spec.has_kv_cache
    assert [s.backend for s in m.select(machine="h100")] == ["FLASH_ATTN"]
    assert json.loads(m.to_json())["num_layers"] == 32


def _gemma2_config():
    return {
        "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"],
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "hidden_size": 2304, "sliding_window": 4096,
        "attn_logit_softcapping": 50.0, "torch_dtype": "bfloat16",
    }


def test_config_json_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_gemma2_config()))
    m = libattn.model(path)
    assert len(m.layers) == 4
    kinds = sorted({g.spec.kind for g in m.groups})
    assert kinds == ["full_attention", "sliding_window"]
    sw = next(g for g in m.groups if g.spec.kind == "sliding_window")
    assert sw.spec.sliding_window == 4096 and sw.spec.logits_soft_cap == 50.0
    assert m.selector_config(sw.index)["has_sliding_window"] is True
    assert m.dtype == "bf16"
    sels = m.select(machine="h100")
    assert len(sels) == 2 and all(s.ok for s in sels)
    # the same config passed as a dict
    assert len(libattn.model(_gemma2_config()).groups) == 2


def test_mla_config():
    m = libattn.model("deepseek-v3")
    spec = m.groups[0].spec
    assert spec.use_mla and spec.kv_lora_rank == 512 and spec.qk_rope_head_dim == 64
    assert spec.head_size == 576


def test_malformed_configs(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(libattn.Error) as ei:
        libattn.model(bad)
    assert ei.value.status == "PARSE_ERROR"
    cfg = _gemma2_config()
    cfg["num_attention_heads"] = -3
    with pytest.raises(libattn.Error) as ei:
        libattn.model(cfg)
    assert "num_attention_heads" in ei.value.message
    with pytest.raises(libattn.Error) as ei:
        libattn.model("no-such-preset")
    assert ei.value.status == "NOT_FOUND"
    with pytest.raises(IndexError):
        libattn.model("llama-3.1-8b").selector_config(5)
