#!/usr/bin/env bash
# The MLA path end to end: `attn select --use-mla` chooses CPU_MLA on this
# machine and the reference's FLASH_ATTN_MLA / FLASHMLA on an H100 with
# FlashMLA installed; `attn serve --model deepseek-v3` runs its MLA layers on
# CPU_MLA (absorbed decode, decompressed prefill) and agrees with
# REFERENCE_MLA (--verify); ATTN_CPU_MASK moves the kernels to the fallback
# variants, which agree too.
set -u
ATTN=${ATTN_BIN:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS ATTN_CPU_MASK
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
serve() { # mask label
    local out
    out=$(ATTN_CPU_MASK=$1 "$ATTN" serve --model deepseek-v3 --steps 3 --rate 1 \
        --prompt-len 8:24 --output-len 2:6 --verify --quiet 2>&1)
    local rc=$?
    [ $rc = 0 ] || { fail "serve ($2) exited $rc: $out"; return; }
    grep -q "backend: CPU_MLA" <<<"$out" || fail "serve ($2): MLA layers not on CPU_MLA: $out"
    grep -q "block accounting: ok" <<<"$out" || fail "serve ($2): block accounting"
    grep -q "CPU_MLA kernel ($3" <<<"$out" || fail "serve ($2): kernel variant is not $3: $out"
    local d
    d=$(sed -n 's/^largest difference from REFERENCE: //p' <<<"$out")
    [ -n "$d" ] || { fail "serve ($2): no REFERENCE comparison: $out"; return; }
    awk -v d="$d" 'BEGIN { exit !(d <= 0.02) }' || fail "serve ($2): difference $d > 0.02"
    echo "serve deepseek-v3 ($2): largest difference from REFERENCE_MLA $d"
}
serve "" "auto" ""
# The fallback variants too - except in the sanitizer build, where the
# double-precision REFERENCE_MLA behind --verify makes each run slow.
if ! grep -qs "ATTN_SANITIZE:BOOL=ON" "${ATTN_BINARY_DIR:-.}/CMakeCache.txt"; then
    # Without AMX the kernel falls to AVX-512 where the CPU has it, else AVX2.
    # (the JSON is pretty-printed: the "usable" list spans lines)
    if "$ATTN" platforms --json | tr -d ' \n' | grep -q '"usable":\[[^]]*"avx512f"'; then
        serve "-amx" "no AMX" "avx512"
    else
        serve "-amx" "no AMX" "avx2"
    fi
    serve "-avx512" "no AVX-512" "avx2"
fi

if [ $fails -gt 0 ]; then
    echo "cli_mla: $fails failure(s)"
    exit 1
fi
echo "cli_mla: ok"
