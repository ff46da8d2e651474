#!/usr/bin/env bash
# The MLA path end to end: `attn select --use-mla` chooses CPU_MLA on this
# machine and the reference's FLASH_ATTN_MLA / FLASHMLA on an H100 with
# FlashMLA installed; `attn serve --model deepseek-v3` runs its MLA layers on
# CPU_MLA (absorbed decode, decompressed prefill) and agrees with
# REFERENCE_MLA (--verify), with the kernel variant this CPU's features call
# for; ATTN_CPU_MASK moves the kernels to the fallback variants, which agree
# too.
set -u
ATTN=${ATTN_BIN:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS
# An ATTN_CPU_MASK from outside stands for a smaller CPU (ATTN_CPU_MASK=-avx512
# ctest: an AVX2-only one); each mask below is added to it.
base=${ATTN_CPU_MASK:-}
unset ATTN_CPU_MASK
export ATTN_LOG=error
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_out() { # expected-stdout expected-rc cmd...
    local want=$1 want_rc=$2; shift 2
    local out rc
    out=$("$@" 2>"$tmp/err"); rc=$?
    [ "$rc" = "$want_rc" ] || fail "$* exited $rc, want $want_rc ($(cat "$tmp/err"))"
    [ "$out" = "$want" ] || fail "$* printed '$out', want '$want'"
}

# ---- selection ------------------------------------------------------------------
expect_out CPU_MLA 0 "$ATTN" select --use-mla --head-size 576 --dtype bf16
expect_out CPU_MLA 0 "$ATTN" select --use-mla --head-size 576 --dtype fp32 --kv-cache-dtype fp8
expect_out CPU_MLA 0 "$ATTN" select --use-mla --head-size 320 --dtype fp16 --num-heads 16
expect_out CPU_MLA_SPARSE 0 "$ATTN" select --use-mla --use-sparse --head-size 576 --dtype bf16
# FA3 + Hopper: FLASH_ATTN_MLA first; without FA3, FLASHMLA (reference §6a)
expect_out FLASH_ATTN_MLA 0 "$ATTN" select --machine h100 --installed fa2,fa3,fa4,flashmla \
    --use-mla --head-size 576 --dtype bf16
expect_out FLASHMLA 0 "$ATTN" select --machine h100 --installed fa2,fa4,flashmla \
    --use-mla --head-size 576 --dtype bf16
# CPU_MLA states what it runs: not sinks, not 128-wide heads
"$ATTN" select --use-mla --head-size 576 --backend CPU_MLA --has-sink >"$tmp/out" 2>&1
[ $? = 3 ] || fail "CPU_MLA with sinks should be refused"

# ---- serving DeepSeek-V3 ----------------------------------------------------------
# The kernel each mask must leave running comes from the features this machine
# reports under that mask (tests/support/machine.py parses `attn platforms
# --json`): amx, avx512, avx2 or portable, whatever this CPU is.
machine=("${ATTN_SOURCE_DIR:?}/tests/support/machine.py")
serve() { # mask label
    local want rc mask=${base:+$base,}$1
    want=$(python3 "${machine[@]}" mla-variant --mask "$mask") ||
        { fail "serve ($2): no machine report"; return; }
    ATTN_CPU_MASK=$mask "$ATTN" serve --model deepseek-v3 --steps 3 --rate 1 --prompt-len 8:24 \
        --output-len 2:6 --verify --quiet --json >"$tmp/serve.json" 2>"$tmp/err"
    rc=$?
    [ $rc = 0 ] || { fail "serve ($2) exited $rc: $(cat "$tmp/err")"; return; }
    python3 - "$tmp/serve.json" "$want" "$2" <<'PY' || fail "serve ($2): $(head -c 600 "$tmp/serve.json")"
import json, sys
d, want, label = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
g = d["groups"][0]
assert g["backend"] == "CPU_MLA", g["backend"]
assert g["kernel"]["mode"] == "native" and g["kernel"]["name"] == "CPU_MLA", g["kernel"]
variant = g["kernel"]["variant"]
# "<bf16 decode> (prefill <p>)" or "<bf16 decode> for bf16, <fp32 decode> (prefill <p>)"
assert variant.split()[0] == want, "kernel variant %r, want %s first" % (variant, want)
f = d["final"]
assert f["accounting_ok"] is True, f
diff = f["max_abs_diff"]
assert diff is not None and 0 <= diff <= 0.02, "largest difference from REFERENCE_MLA %r" % diff
print("serve deepseek-v3 (%s): kernel %s, largest difference from REFERENCE_MLA %g"
      % (label, variant, diff))
PY
}
serve "" "auto"
# The fallback variants too - except in the sanitizer build, where the
# double-precision REFERENCE_MLA behind --verify makes each run slow.
if ! grep -qs "ATTN_SANITIZE:BOOL=ON" "${ATTN_BINARY_DIR:-.}/CMakeCache.txt"; then
    serve "-amx" "no AMX"
    serve "-avx512" "no AVX-512"
fi

if [ $fails -gt 0 ]; then
    echo "cli_mla: $fails failure(s)"
    exit 1
fi
echo "cli_mla: ok"
