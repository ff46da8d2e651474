#!/usr/bin/env bash
# `attn models`: lists every preset; one model shows its layer groups; --json
# is one parseable document; an unknown name or a broken config is an error
# naming the problem.
set -euo pipefail
BIN=${ATTN_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$BIN" models)
for p in llama-3.1-8b mistral-7b qwen2.5-7b phi-3-mini gemma-2-9b gpt-oss-20b deepseek-v3 \
         bert-base whisper-small; do
    grep -q "^$p " <<<"$out" || fail "preset $p not listed"
done

out=$("$BIN" models gemma-2-9b)
grep -q "group 0  sliding_window" <<<"$out" || fail "gemma-2 group 0 not sliding: $out"
grep -q "group 1  full_attention" <<<"$out" || fail "gemma-2 group 1 not full: $out"
grep -q "0,2,...,40" <<<"$out" || fail "gemma-2 sliding layers not even: $out"

"$BIN" models --json whisper-small >"$tmp/w.json"
python3 - "$tmp/w.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["name"] == "whisper-small" and m["num_layers"] == 36, m
kinds = [(g["attn_type"], g["kind"], g["has_kv_cache"], g["num_layers"]) for g in m["groups"]]
assert kinds == [("encoder", "full_attention", False, 12), ("decoder", "full_attention", True, 12),
                 ("encoder_decoder", "cross_attention", True, 12)], kinds
PY
"$BIN" models --json >"$tmp/all.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==9, len(d)" "$tmp/all.json"

# a config.json path works like a preset
cat >"$tmp/config.json" <<'J'
{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 1024,
 "torch_dtype": "float16"}
J
"$BIN" models "$tmp/config.json" | grep -q "heads 8/8 kv, head 128" || fail "config path"

# errors name the problem
set +e
err=$("$BIN" models no-such-model 2>&1); rc=$?
set -e
[ $rc -ne 0 ] || fail "unknown model accepted"
grep -q "unknown model 'no-such-model'" <<<"$err" || fail "unknown model message: $err"
echo '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 1024}' >"$tmp/bad.json"
set +e
err=$("$BIN" models "$tmp/bad.json" 2>&1); rc=$?
set -e
[ $rc -ne 0 ] || fail "broken config accepted"
grep -q "field 'num_attention_heads'" <<<"$err" || fail "error does not name the field: $err"
# attn select --model: one selection per layer group, each explained
"$BIN" select --model gemma-2-9b --machine mi300x --json >"$tmp/sel.json"
python3 - "$tmp/sel.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is True and d["model"] == "gemma-2-9b", d
g = d["groups"]
assert [x["kind"] for x in g] == ["sliding_window", "full_attention"], g
assert all(x["head_size"] == 256 and x["requested"] is None for x in g), g
assert [x["selection"]["selected"] for x in g] == ["ROCM_ATTN", "ROCM_ATTN"], g
PY
# per-kind override (--backend-for KIND=NAME): only the sliding-window group asks
# for TRITON_ATTN.
"$BIN" select --model gemma-2-9b --machine mi300x --backend-for sliding_window=TRITON_ATTN \
    --json >"$tmp/sel2.json" || fail "--backend-for with --model"
python3 - "$tmp/sel2.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["groups"]
assert g[0]["requested"] == "TRITON_ATTN" and g[0]["selection"]["selected"] == "TRITON_ATTN", g[0]
assert g[1]["requested"] is None and g[1]["selection"]["selected"] == "ROCM_ATTN", g[1]
PY
# --explain shows every candidate of every group
out=$("$BIN" select --model gpt-oss-20b --machine a100 --explain)
[ "$(grep -c '^group ' <<<"$out")" -eq 2 ] || fail "gpt-oss: expected 2 groups: $out"
grep -q "FLASH_ATTN" <<<"$out" && grep -q "attention sinks not supported\|sink not supported" <<<"$out" ||
    fail "gpt-oss on A100 should show the sink reasons: $out"
# an explicit request that cannot load fails with vLLM's message and exit status 3
set +e
out=$("$BIN" select --model llama-3.1-8b --machine h100 --installed fa2,fa3,fa4 \
      --backend FLASHINFER 2>&1); rc=$?
set -e
[ $rc -eq 3 ] || fail "explicit FLASHINFER without flashinfer: exit $rc"
grep -qF "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']" \
    <<<"$out" || fail "explicit failure message: $out"
# layer-shape flags come from the model
set +e
err=$("$BIN" select --model llama-3.1-8b --head-size 64 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "does not apply with --model" <<<"$err" || fail "--head-size with --model: $err"
# MLA: num_heads is passed, head 576
"$BIN" select --model deepseek-v3 --machine h100 --json | python3 -c '
import json, sys
g = json.load(sys.stdin)["groups"][0]
assert g["kind"] == "mla_attention" and g["head_size"] == 576, g
assert g["selection"]["selected"] == "FLASH_ATTN_MLA", g["selection"]["selected"]'
echo "cli_models: ok"
