#!/usr/bin/env bash
# OPENCL_ATTN through the CLI on this machine's OpenCL device (PoCL here):
# `attn serve --machine opencl` chooses it by the platform's rule and runs
# llama-3.1-8b's steps with the KV cache and step buffers in device memory,
# --verify against REFERENCE within bf16's rounding; `attn serve --backend
# OPENCL_ATTN` on the local machine runs every layer of a small fp32
# decoder within fp32's; `attn bench --backend OPENCL_ATTN --vs REFERENCE`
# reports both on the same shapes. (Selection: cli_select.sh; the DCP row:
# cli_dcp.sh.) Exit 77 where the machine has no OpenCL device.
set -u
B=${ATTN_BINARY_DIR:?}
ATTN=${ATTN_BIN:?}
command -v python3 >/dev/null || { echo "cli_opencl: python3 not installed"; exit 77; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$B/pocl-cache}
# PoCL keeps allocations for the life of the process (tests/lsan_pocl.supp)
export LSAN_OPTIONS="suppressions=${ATTN_SOURCE_DIR:-.}/tests/lsan_pocl.supp:print_suppressions=0"
if ! why=$("$ATTN" platforms --machine opencl 2>&1 >/dev/null); then
    echo "cli_opencl: skipped: no OpenCL device here: $why"
    exit 77
fi
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=4 traffic=()
# REFERENCE's re-run of 512-token prompts is what costs under the sanitizers
[ -n "${ATTN_SANITIZED:-}" ] && steps=2 traffic=(--prompt-len 32:96)

# The OpenCL machine: its rule chooses OPENCL_ATTN; bf16 outputs of the
# same inputs differ from REFERENCE's by at most one bf16 step of values
# below 4 (2^-6)
"$ATTN" serve --machine opencl --model llama-3.1-8b --steps $steps --verify --num-blocks 1024 \
    "${traffic[@]}" --json >"$tmp/serve.json" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "serve --machine opencl exited $rc: $(tail -3 "$tmp/err")"
python3 - "$tmp/serve.json" "$steps" <<'PY' || fail "serve --machine opencl: JSON"
import json, sys
d, steps = json.load(open(sys.argv[1])), int(sys.argv[2])
assert d["machine"]["kind"] == "opencl" and not d["machine"]["simulated"], d["machine"]
g = d["groups"][0]
assert g["backend"] == "OPENCL_ATTN" and g["requested"] in (None, "auto"), (g["backend"], g["requested"])
assert g["kernel"]["name"] == "OPENCL_ATTN" and g["kernel"]["device"] == "opencl", g["kernel"]
assert g["kernel"]["mode"] == "native", g["kernel"]
assert g["builder"] == "OpenCLAttentionMetadataBuilder", g["builder"]
assert len(d["steps"]) == steps and all(s["output_finite"] for s in d["steps"]), d["steps"]
assert sum(s["num_decode_tokens"] for s in d["steps"]) > 0, "no decode step"
worst = d["final"]["max_abs_diff"]
assert 0 <= worst <= 2 ** -6, ("REFERENCE difference", worst)
print("cli_opencl: serve --machine opencl: %d steps of llama-3.1-8b on OPENCL_ATTN, "
      "REFERENCE difference %g" % (steps, worst))
PY

# Requested on the local (CPU) machine: every layer of a small fp32 decoder
args=(serve --backend OPENCL_ATTN --layers 2 --heads 8 --kv-heads 2 --head-size 64 --dtype fp32
    --steps 6 --rate 2 --prompt-len 20:150 --output-len 2:8 --num-blocks 128 --layers-to-run all
    --verify --json)
"$ATTN" "${args[@]}" --machine local >"$tmp/req.json" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "serve --backend OPENCL_ATTN exited $rc: $(tail -3 "$tmp/err")"
python3 - "$tmp/req.json" <<'PY' || fail "serve --backend OPENCL_ATTN: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["machine"]["kind"] == "cpu", d["machine"]
g = d["groups"][0]
assert g["backend"] == "OPENCL_ATTN" and g["requested"] == "OPENCL_ATTN", g
k = g["kernel"]
assert k["device"] == "opencl" and k["layers_run"] == 2 and k["variant"] == "opencl-c-1.2", k
assert len(d["steps"]) == 6, len(d["steps"])
assert d["final"]["max_abs_diff"] <= 1e-4, d["final"]["max_abs_diff"]
print("cli_opencl: serve --backend OPENCL_ATTN: REFERENCE difference %g" % d["final"]["max_abs_diff"])
PY

# attn bench: the kernel on its device beside REFERENCE, shape by shape
"$ATTN" bench --backend OPENCL_ATTN --vs REFERENCE --batch 2 --context 256 --prefill 64 \
    --kv bf16,fp8 --repeats 2 --max-seconds 1 --buffer-mb 16 --block-size 16 --json \
    >"$tmp/bench.json" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "bench --backend OPENCL_ATTN exited $rc: $(tail -3 "$tmp/err")"
python3 - "$tmp/bench.json" <<'PY' || fail "bench --backend OPENCL_ATTN: JSON"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
shapes = [(r["phase"], r["kv_dtype"]) for r in res if r["backend"] == "OPENCL_ATTN"]
assert shapes == [("decode", "bf16"), ("decode", "fp8"), ("prefill", "bf16")], shapes
assert [r["backend"] for r in res] == ["OPENCL_ATTN", "REFERENCE"] * 3, res
for r in res:
    assert r["ms"] > 0 and r["tokens_per_s"] > 0 and r["repeats"] >= 1, r
    if r["backend"] == "OPENCL_ATTN":
        assert r["vs_backend"] == "REFERENCE" and r["speedup_vs"] > 0, r
print("cli_opencl: bench: %d OPENCL_ATTN shapes beside REFERENCE" % len(shapes))
PY
[ "$fails" -eq 0 ] || { echo "cli_opencl: $fails failure(s)"; exit 1; }
echo "cli_opencl: ok"
