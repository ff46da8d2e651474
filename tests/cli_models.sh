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
echo "cli_models: ok"
