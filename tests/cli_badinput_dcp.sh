#!/usr/bin/env bash
# DCP ranks started differently (tests/cli_dcp.sh has the working runs):
# one mpirun per row, rank 0 and rank 1 given the same `attn serve --dcp 2`
# command but for one setting. Every row must fail at startup on both ranks
# with the same one-line message naming the setting and each rank's value,
# before any step runs (no step line on stdout). The last rows differ in
# what the engines make of equal settings (machines with other memory) and
# in the exchange itself (a report against a step, tests/cp.cmake
# cp_dcp_mpi_frames covers that below the CLI). Exit 77 without mpirun or
# without MPI in the build.
set -u
ATTN=${ATTN_BIN:?}
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
if "$ATTN" serve --dcp 2 --steps 1 2>&1 | grep -q "built without MPI"; then
    echo "SKIP: attn built without MPI"
    exit 77
fi
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS ATTN_CPU_MASK
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export LSAN_OPTIONS="suppressions=${ATTN_SOURCE_DIR:-.}/tests/cp/lsan-openmpi.supp"
# sigkill timeout 0: mpirun otherwise waits 2 s after ranks exit non-zero
MPI=(env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ATTN_NUM_THREADS=1 mpirun --allow-run-as-root
    --mca odls_base_sigkill_timeout 0
    --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
rows=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

SHAPE=(--layers 2 --heads 4 --kv-heads 2 --head-size 64)
COMMON=(--machine h100 --steps 2 --dcp 2 --quiet --dcp-timeout 20)

# row EXIT MESSAGE -- RANK0 ARGS -- RANK1 ARGS
row() {
    local want=$1 msg=$2
    shift 3
    local a=() b=()
    while [ "$1" != "--" ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    rows=$((rows + 1))
    "${MPI[@]}" -np 1 "$ATTN" serve "${COMMON[@]}" "${a[@]}" : -np 1 "$ATTN" serve \
        "${COMMON[@]}" "${b[@]}" >"$tmp/out" 2>"$tmp/err"
    local rc=$? what="[${a[*]}] vs [${b[*]}]"
    [ "$rc" = "$want" ] || fail "$what: exit $rc, want $want ($(grep attn "$tmp/err" | head -3))"
    for r in 0 1; do
        grep -qxF "attn serve: rank $r: $msg" "$tmp/err" ||
            fail "$what: rank $r lacks the message '$msg': $(grep attn "$tmp/err" | head -3)"
    done
    # one message per rank, nothing else from attn
    [ "$(grep -c '^attn serve: rank' "$tmp/err")" = 2 ] ||
        fail "$what: other messages: $(grep attn "$tmp/err" | head -4)"
    ! grep -q "^served\|^ *[0-9]" "$tmp/out" || fail "$what: a step ran: $(head -3 "$tmp/out")"
}
S="DCP settings differ between the ranks:"
L="full_attention decoder 0-1: heads 4/2, head size 64"
row 2 "$S --steps: rank 0 has '2', rank 1 has '3'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --steps 3
row 2 "$S --dcp-interleave: rank 0 has '1', rank 1 has '16'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --dcp-interleave 16
row 2 "$S model: rank 0 has 'llama-3.1-8b', rank 1 has 'mistral-7b'; layers: rank 0 has 'full_attention decoder 0-31: heads 32/8, head size 128', rank 1 has 'sliding_window decoder 0-31: heads 32/8, head size 128, window 4096'" \
    -- --model llama-3.1-8b -- --model mistral-7b
row 2 "$S model: rank 0 has 'llama-3.1-8b', rank 1 has 'qwen2.5-7b'; layers: rank 0 has 'full_attention decoder 0-31: heads 32/8, head size 128', rank 1 has 'full_attention decoder 0-27: heads 28/4, head size 128'" \
    -- --model llama-3.1-8b -- --model qwen2.5-7b
row 2 "$S model: rank 0 has 'shape-2x4h2kv64', rank 1 has 'shape-3x4h2kv64'; layers: rank 0 has '$L', rank 1 has 'full_attention decoder 0-2: heads 4/2, head size 64'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --layers 3
row 2 "$S model: rank 0 has 'shape-2x4h2kv64', rank 1 has 'shape-2x8h2kv64'; layers: rank 0 has '$L', rank 1 has 'full_attention decoder 0-1: heads 8/2, head size 64'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --heads 8
row 2 "$S model: rank 0 has 'shape-2x4h2kv64', rank 1 has 'shape-2x4h4kv64'; layers: rank 0 has '$L', rank 1 has 'full_attention decoder 0-1: heads 4/4, head size 64'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --kv-heads 4
row 2 "$S model: rank 0 has 'shape-2x4h2kv64', rank 1 has 'shape-2x4h2kv128'; layers: rank 0 has '$L', rank 1 has 'full_attention decoder 0-1: heads 4/2, head size 128'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --head-size 128
row 2 "$S --dtype: rank 0 has 'bf16', rank 1 has 'fp16'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --dtype fp16
row 2 "$S --kv-cache-dtype: rank 0 has 'auto', rank 1 has 'fp8'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --kv-cache-dtype fp8
row 2 "$S --backend: rank 0 has 'auto', rank 1 has 'FLASHINFER'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --backend FLASHINFER
row 2 "$S --backend-for full_attention: rank 0 has '(unset)', rank 1 has 'FLASHINFER'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --backend-for full_attention=FLASHINFER
row 2 "$S --backend-for sliding_window: rank 0 has 'FLASH_ATTN', rank 1 has 'FLASHINFER'" \
    -- "${SHAPE[@]}" --backend-for sliding_window=FLASH_ATTN \
    -- "${SHAPE[@]}" --backend-for sliding_window=FLASHINFER
row 2 "$S --block-size: rank 0 has 'default', rank 1 has '32'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --block-size 32
row 2 "$S --num-blocks: rank 0 has '512', rank 1 has '1024'" \
    -- "${SHAPE[@]}" --num-blocks 512 -- "${SHAPE[@]}" --num-blocks 1024
row 2 "$S --max-num-seqs: rank 0 has 'default', rank 1 has '8'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --max-num-seqs 8
row 2 "$S --max-batched-tokens: rank 0 has 'default', rank 1 has '512'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --max-batched-tokens 512
row 2 "$S --max-model-len: rank 0 has 'default', rank 1 has '4096'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --max-model-len 4096
row 2 "$S --rate: rank 0 has '1', rank 1 has '2.5'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --rate 2.5
row 2 "$S --prompt-len: rank 0 has '32:512', rank 1 has '32:64'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --prompt-len 32:64
row 2 "$S --output-len: rank 0 has '16:128', rank 1 has '8:8'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --output-len 8
row 2 "$S --prefix-share: rank 0 has '0', rank 1 has '0.5'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --prefix-share 0.5
row 2 "$S --prefix-len: rank 0 has '256', rank 1 has '64'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --prefix-len 64
row 2 "$S --seed: rank 0 has '0', rank 1 has '18446744073709551615'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --seed 18446744073709551615
row 2 "$S --layers-to-run: rank 0 has 'default', rank 1 has 'all'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --layers-to-run all
row 2 "$S --no-kernels: rank 0 has '0', rank 1 has '1'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --no-kernels
row 2 "$S --verify: rank 0 has '0', rank 1 has '1'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --verify
row 2 "$S --check: rank 0 has '0', rank 1 has '1'" -- "${SHAPE[@]}" -- "${SHAPE[@]}" --check
# the same settings, machines with other memory: the pools differ
row 3 "DCP engines after startup differ between the ranks: blocks per KV group: rank 0 has '4718592', rank 1 has '1415577'" \
    -- "${SHAPE[@]}" -- "${SHAPE[@]}" --machine l4

echo "DCP mismatch rows: $rows, $fails failed"
exit $((fails > 0))
