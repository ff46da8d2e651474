#!/usr/bin/env bash
# `attn serve` as a person sees it: the startup summary (backend per KV
# group and why, block size and its source, KV pool), the per-step lines
# (labelled emulated on a simulated machine), the final block accounting,
# exit 3 with the selector's message when startup fails, 2 on usage errors.
set -u
ATTN=${ATTN_BIN:-attn}
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}
has() { grep -qF -- "$2" <<<"$1"; }

SMALL="--layers 2 --heads 4 --kv-heads 2 --head-size 64"

out=$("$ATTN" serve --machine h100 $SMALL --steps 6 --rate 2 --num-blocks 64 --seed 3 2>&1)
rc=$?
check "serve exits 0 (got $rc)" test $rc -eq 0
check "machine line" has "$out" "machine: h100 (NVIDIA H100"
check "KV group backend" has "$out" "KV group 0: layers 0-1 (2), full_attention, 4 heads / 2 KV heads, head size 64"
check "backend and why" has "$out" "backend: FLASH_ATTN (chosen by the platform's priority list)"
check "candidates listed" has "$out" "FLASHINFER"
check "block size source" has "$out" "block size: 16 (preferred by FLASH_ATTN)"
check "pool size" has "$out" "KV pool: 64 blocks x 16 tokens = 1024 tokens per group"
check "emulated kernel" has "$out" "attention: emulated by CPU_ATTN"
check "step header" has "$out" "prefill/dec"
check "step lines labelled" has "$out" " emulated"
check "final accounting" has "$out" "block accounting: ok"
check "all blocks back" has "$out" "after releasing every request, group 0: 64 total, 64 free, 0 in use"

# --block-size wins over the backend's preference
out=$("$ATTN" serve --machine h100 $SMALL --steps 1 --num-blocks 16 --block-size 32 --quiet 2>&1)
check "user block size" has "$out" "block size: 32 (--block-size)"
check "quiet: no step lines" bash -c "! grep -q 'prefill/dec' <<<\"\$0\"" "$out"

# the local CPU machine runs CPU_ATTN natively
out=$("$ATTN" serve --machine cpu $SMALL --steps 2 --num-blocks 16 2>&1)
check "cpu serve exit 0" test $? -eq 0
check "cpu backend" has "$out" "backend: CPU_ATTN"
check "native kernel" has "$out" "attention: CPU_ATTN kernel"

# startup failure: explicit FLASHINFER where it is not installed
err=$("$ATTN" serve --machine h100 --installed fa2,fa3,fa4 --backend FLASHINFER $SMALL --steps 3 2>&1 >/dev/null)
rc=$?
check "failed startup exits 3 (got $rc)" test $rc -eq 3
check "failure message" has "$err" "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']"

# the same through ATTN_BACKEND
ATTN_BACKEND=FLASHINFER "$ATTN" serve --machine h100 --installed fa2 $SMALL --steps 1 >/dev/null 2>&1
check "ATTN_BACKEND honoured (exit 3)" test $? -eq 3

# usage
"$ATTN" serve --help >/dev/null
check "--help exits 0" test $? -eq 0
"$ATTN" serve --steps nope >/dev/null 2>&1
check "bad --steps exits 2" test $? -eq 2
"$ATTN" serve --model llama-3.1-8b --layers 3 >/dev/null 2>&1
check "--model with shape flags exits 2" test $? -eq 2
"$ATTN" serve --bogus >/dev/null 2>&1
check "unknown option exits 2" test $? -eq 2
"$ATTN" serve --model no-such-model >/dev/null 2>&1
check "unknown model exits 2" test $? -eq 2

# attention-free from the decoder's point of view: encoder-only layers keep no cache
out=$("$ATTN" serve --machine cpu --model bert-base --steps 2 --no-kernels 2>&1)
check "bert-base serves (exit $?)" test $? -eq 0
check "no KV groups" has "$out" "0 KV-cache groups"

# ... but the step loop drives them: K/V passed directly, each prompt done in its step
out=$("$ATTN" serve --model bert-base --steps 3 2>&1)
rc=$?
check "bert-base steps exit 0 (got $rc)" test $rc -eq 0
check "encoder group driven" has "$out" "non-causal over each step's new prompt tokens"
attn_ms=$(awk '$1 == "0" && NF >= 10 { print $10 }' <<<"$out")
check "bert-base attention time > 0 (got '$attn_ms')" \
    awk -v t="$attn_ms" 'BEGIN { exit !(t + 0 > 0) }'
check "bert-base accounting" has "$out" "block accounting: ok"

exit $fail
