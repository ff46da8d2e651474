#!/usr/bin/env bash
# The bad-input matrix, CLI / environment / file part (the API rows are in
# tests/test_badinput_api.c). Each row: the command (flags, environment,
# input files), the exit code it must give, a fragment its stderr must hold,
# and that nothing changed: a failing command prints nothing on stdout, no
# input file is modified and no file appears next to them; a row that only
# warns must print exactly what the same command prints without the bad
# input.
set -u
ATTN=${ATTN_BIN:?}
BIN=${ATTN_BINARY_DIR:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS ATTN_CPU_MASK ATTN_NUM_THREADS \
    ATTN_SELFTEST ATTN_DATA_DIR
export ATTN_LOG=warn
fails=0
rows=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
in="$tmp/in"
mkdir -p "$in"

# ---- input files ---------------------------------------------------------------
printf '{"name":"x\xff","platform":"cpu"}' >"$in/badutf8.json"
printf '{"name":"\\ud800","platform":"cpu"}' >"$in/surrogate.json"
printf '{"name":"x","platform\\u0000junk":"cpu"}' >"$in/nulkey.json"
printf '{"name":"x","platform":"cpu","colour":"red"}' >"$in/unknown.json"
printf '{"name":"x","platform":"cuda","capability":"99.99"}' >"$in/cc.json"
printf '{"name":"x","platform":' >"$in/truncated.json"
: >"$in/empty.json"
head -c 3000 /dev/zero | tr '\0' '[' >"$in/deep.json"
printf '\x7fELF\x02\x01\x01garbage' >"$in/binary.json"
printf '{"name":"x","platform":"cuda","capability":9.0}' >"$in/cctype.json"
printf '{"model_type":"deepseek_v3","num_hidden_layers":2,"num_attention_heads":4,"hidden_size":256,"kv_lora_rank":64,"qk_rope_head_dim":16,"qk_nope_head_dim":32,"v_head_dim":32,"rope_scaling":{"factor":1e308,"mscale_all_dim":1e300}}' >"$in/yarn.json"
printf '{"num_hidden_layers":2,"num_attention_heads":2147483647,"hidden_size":256}' >"$in/heads.json"
printf '{"num_hidden_layers":-2,"num_attention_heads":4,"hidden_size":256}' >"$in/layers.json"
printf '{"num_hidden_layers":2,"num_attention_heads":4,"hidden_size":256,"num_key_value_heads":3}' >"$in/kvheads.json"
printf '{"model_type":"ll\xfe","num_hidden_layers":2,"num_attention_heads":4,"hidden_size":256}' >"$in/modelutf8.json"
printf '[1,2,3]' >"$in/array.json"
printf '{"machines":[' >"$in/scn_truncated.json"
printf '{"machines":"h100"}' >"$in/scn_type.json"
printf '{"machines":[{"label":"a\xff","machine":"h100"}]}' >"$in/scn_utf8.json"
mkdir -p "$in/adir.json"
snapshot() { (cd "$in" && find . -type f -print0 | sort -z | xargs -0 md5sum; find . | sort); }
snapshot >"$tmp/base"

# row EXIT FRAGMENT [VAR=VALUE...] -- ARGS...
row() {
    local want=$1 frag=$2
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rows=$((rows + 1))
    (cd "$tmp" && env "${envs[@]}" "$ATTN" "$@" >"$tmp/out" 2>"$tmp/err")
    local rc=$?
    local what="${envs[*]} attn $*"
    [ "$rc" = "$want" ] || fail "$what: exit $rc, want $want ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$frag" "$tmp/err" || fail "$what: stderr lacks '$frag': $(head -c 300 "$tmp/err")"
    [ "$want" = 0 ] || [ ! -s "$tmp/out" ] || fail "$what: printed on stdout: $(head -c 200 "$tmp/out")"
    snapshot >"$tmp/now"
    cmp -s "$tmp/base" "$tmp/now" || fail "$what: changed the input folder"
}

# warn FRAGMENT VAR=VALUE -- ARGS...: exit 0, the warning, the same stdout as without VAR
warn() {
    local frag=$1 envv=$2
    shift 3
    rows=$((rows + 1))
    "$ATTN" "$@" >"$tmp/want" 2>/dev/null
    env "$envv" "$ATTN" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" = 0 ] || fail "$envv attn $*: exit $rc ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$frag" "$tmp/err" || fail "$envv attn $*: stderr lacks '$frag': $(head -c 300 "$tmp/err")"
    cmp -s "$tmp/want" "$tmp/out" || fail "$envv attn $*: output differs from the run without it"
}

# ---- top level ------------------------------------------------------------------
row 2 "unknown command 'frobnicate'" -- frobnicate
row 2 "usage: attn" --
# ---- platforms -------------------------------------------------------------------
row 2 "unknown option '--bogus'" -- platforms --bogus
row 2 "--machine" -- platforms --machine
row 2 "unknown machine 'h999'" -- platforms --machine h999
row 2 "major 1-20, minor 0-9" -- platforms --machine cuda:99.99
row 1 "invalid UTF-8 in string" -- platforms --machine "$in/badutf8.json"
row 1 "lone UTF-16 surrogate" -- platforms --machine "$in/surrogate.json"
row 1 "\\u0000 is not supported" -- platforms --machine "$in/nulkey.json"
row 1 "colour" -- platforms --machine "$in/unknown.json"
row 2 "99.99" -- platforms --machine "$in/cc.json"
row 1 "line 1" -- platforms --machine "$in/truncated.json"
row 1 "empty.json" -- platforms --machine "$in/empty.json"
row 1 "deep.json" -- platforms --machine "$in/deep.json"
row 1 "binary.json" -- platforms --machine "$in/binary.json"
row 1 "capability" -- platforms --machine "$in/cctype.json"
row 1 "array.json" -- platforms --machine "$in/array.json"
row 1 "adir.json" -- platforms --machine "$in/adir.json"
row 1 "no-such.json" -- platforms --machine "$in/no-such.json"
# ---- backends --------------------------------------------------------------------
row 2 "unknown option '--bogus'" -- backends --bogus
row 2 "unknown machine 'h999'" -- backends --machine h999
row 2 "warp" -- backends --machine h100 --installed warp
row 2 "nope" -- backends --machine h100 --setting nope=1
# ---- select ----------------------------------------------------------------------
row 2 "--head-size" -- select --machine h100 --head-size x
row 2 "--head-size" -- select --machine h100 --head-size 99999999999
row 2 "--head-size" -- select --machine h100 --head-size -1
row 2 "--head-size" -- select --machine h100 --head-size ""
row 2 "--head-size" -- select --machine h100 --head-size
row 2 "fp64" -- select --machine h100 --dtype fp64
row 2 "fp9" -- select --machine h100 --kv-cache-dtype fp9
row 2 "--block-size" -- select --machine h100 --block-size -16
row 2 "--block-size" -- select --machine h100 --block-size 0x10
row 2 "--attn-type" -- select --machine h100 --attn-type sideways
row 2 "--backend-for" -- select --machine h100 --backend-for nokind
row 2 "--backend-for" -- select --machine h100 --backend-for full_attention=
row 2 "--num-heads" -- select --machine h100 --num-heads -4
row 2 "major 1-20" -- select --machine cuda:99.99
row 2 "unknown model 'nope-1b'" -- select --machine h100 --model nope-1b
row 2 "too many --setting options (at most 16)" -- select --machine mi300x --model llama-3.1-8b \
    --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 \
    --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 \
    --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 \
    --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 \
    --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 --setting rocm_use_aiter=1 \
    --setting rocm_use_aiter=1 --setting bogus=1
row 2 "unknown option '--bogus'" -- select --machine h100 --bogus
row 3 "Unknown attention backend: 'NO_SUCH'" -- select --machine h100 --head-size 128 --backend NO_SUCH
row 3 "Reason" -- select --machine h100 --head-size 100 --backend FLASH_ATTN
# ---- models ----------------------------------------------------------------------
row 2 "unknown model 'nope-1b'" -- models nope-1b
row 1 "cannot read model config '$in/missing/config.json': cannot open '$in/missing/config.json': No such file or directory" \
    -- models "$in/missing/config.json"
row 1 "rope_scaling.factor" -- models "$in/yarn.json"
row 1 "num_attention_heads" -- models "$in/heads.json"
row 1 "num_hidden_layers" -- models "$in/layers.json"
row 1 "num_key_value_heads" -- models "$in/kvheads.json"
row 1 "invalid UTF-8" -- models "$in/modelutf8.json"
row 1 "line 1" -- models "$in/truncated.json"
row 2 "unknown option '--bogus'" -- models --bogus
# ---- serve -----------------------------------------------------------------------
S=(serve --machine h100 --layers 2 --heads 4 --kv-heads 2 --head-size 64 --steps 1)
row 2 "--seed: expected an integer in [0, 2^64-1], got '-1'" -- "${S[@]}" --seed -1
row 2 "got '18446744073709551616'" -- "${S[@]}" --seed 18446744073709551616
row 2 "--seed" -- "${S[@]}" --seed ""
row 2 "--seed" -- "${S[@]}" --seed 12abc
row 2 "--seed" -- "${S[@]}" --seed " 5"
row 2 "--steps" -- "${S[@]}" --steps -1
row 2 "--layers" -- serve --machine h100 --layers 0
row 2 "--heads" -- serve --machine h100 --heads 2147483648
row 2 "--block-size" -- "${S[@]}" --block-size -16
row 2 "--num-blocks" -- "${S[@]}" --num-blocks -1
row 2 "--max-num-seqs" -- "${S[@]}" --max-num-seqs 2147483648
row 2 "--rate" -- "${S[@]}" --rate -1
row 2 "--prefix-share" -- "${S[@]}" --prefix-share 2
row 2 "--dtype" -- "${S[@]}" --dtype fp64
row 2 "--layers-to-run" -- "${S[@]}" --layers-to-run many
row 2 "unknown model 'nope-1b'" -- serve --machine h100 --model nope-1b
row 2 "unknown option '--bogus'" -- "${S[@]}" --bogus
row 3 "Unknown attention backend: 'NO_SUCH'" -- "${S[@]}" --backend NO_SUCH
# ---- bench -----------------------------------------------------------------------
row 2 "--batch: expected a comma-separated list, got ''" -- bench --batch ""
row 2 "--batch: expected a comma-separated list, got ','" -- bench --batch ,
row 2 "--batch" -- bench --batch 0
row 2 "--batch" -- bench --batch 99999
row 2 "--batch: at most" -- bench --batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33
row 2 "--context" -- bench --context x
row 2 "--prefill" -- bench --prefill -5
row 2 "--phase must be decode or prefill" -- bench --phase sideways
row 2 "--repeats" -- bench --repeats 0
row 2 "--block-size" -- bench --block-size 0
row 2 "--threads" -- bench --threads 0
row 2 "--buffer-mb" -- bench --buffer-mb 99999999
row 2 "unknown option '--bogus'" -- bench --bogus
# ---- simulate ----------------------------------------------------------------------
row 1 "cannot write '/nonexistent/dir/x.html': No such file or directory" -- simulate --html /nonexistent/dir/x.html
row 2 "--steps" -- simulate --steps 0
row 2 "unknown scenario 'no-such-scenario'" -- simulate no-such-scenario
row 2 "scn_truncated.json" -- simulate "$in/scn_truncated.json"
row 2 "scn_type.json" -- simulate "$in/scn_type.json"
row 2 "invalid UTF-8" -- simulate "$in/scn_utf8.json"
row 2 "one scenario at a time" -- simulate a b
row 2 "unknown option '--bogus'" -- simulate --bogus
# ---- write errors: output that cannot be written is a failure ---------------------
# /dev/full must be the device: a machine that lost it (a command that unlinked it)
# would make these rows pass by writing a regular file
rows=$((rows + 1))
[ -c /dev/full ] || fail "/dev/full is not a character device on this machine: $(ls -l /dev/full 2>&1)"
for cmd in "select --machine h100 --head-size 128 --json" "platforms --json" "backends --json" \
    "models --json" "simulate --json"; do
    rows=$((rows + 1))
    # shellcheck disable=SC2086
    "$ATTN" $cmd >/dev/full 2>"$tmp/err"
    rc=$?
    [ "$rc" = 1 ] || fail "attn $cmd >/dev/full: exit $rc, want 1"
    grep -qF "error writing the output" "$tmp/err" || fail "attn $cmd >/dev/full: $(cat "$tmp/err")"
done
# ---- JSON output is valid UTF-8 whatever bytes the input held ---------------------
rows=$((rows + 1))
"$ATTN" select --machine h100 --head-size 128 --backend $'BAD\xff\xc0' --json >"$tmp/out" 2>/dev/null
rc=$?
[ "$rc" = 3 ] || fail "select --backend with invalid UTF-8 --json: exit $rc, want 3"
python3 -c 'import json,sys; d=json.loads(sys.stdin.buffer.read().decode("utf-8")); assert d["requested"] == "BAD\ufffd\ufffd", d["requested"]' \
    <"$tmp/out" || fail "select --json with invalid UTF-8 input emitted bad JSON: $(head -c 200 "$tmp/out")"
# ---- environment -------------------------------------------------------------------
row 2 "ATTN_PLATFORM='h999'" ATTN_PLATFORM=h999 -- select --head-size 128
row 2 "major 1-20" ATTN_PLATFORM=cuda:99.99 -- select --head-size 128
row 2 "invalid UTF-8" "ATTN_PLATFORM=$in/badutf8.json" -- select --head-size 128
row 3 "Unknown attention backend: 'NO_SUCH'" ATTN_BACKEND=NO_SUCH -- select --machine h100 --head-size 128
SEL=(select --machine h100 --head-size 128 --json)
# the local machine's selection runs the CPU kernels' self-tests on the thread pool
LOC=(select --head-size 64 --json)
warn "ATTN_NUM_THREADS='100000' is not an integer in [1, 4096]" ATTN_NUM_THREADS=100000 -- "${LOC[@]}"
warn "ATTN_NUM_THREADS='abc' is not an integer" ATTN_NUM_THREADS=abc -- "${LOC[@]}"
warn "ATTN_NUM_THREADS='-3' is not an integer" ATTN_NUM_THREADS=-3 -- "${LOC[@]}"
warn "ATTN_LOG='loud' is not one of error|warn|info|debug" ATTN_LOG=loud -- "${SEL[@]}"
warn "ATTN_SELFTEST='maybe' is not 0 or 1" ATTN_SELFTEST=maybe -- select --head-size 64 --json
warn "ATTN_PLUGINS names 'no_such_plugin'" ATTN_PLUGINS=no_such_plugin -- "${SEL[@]}"
warn "ATTN_CPU_MASK='avx9000': unknown name 'avx9000'" ATTN_CPU_MASK=avx9000 -- "${SEL[@]}"
warn "kernel variants: amx-bf16 avx512-bf16 avx512 avx2" ATTN_CPU_MASK=-avx9000 -- "${SEL[@]}"
warn "the portable variant needs no CPU feature" ATTN_CPU_MASK=-portable -- "${SEL[@]}"
row 2 "--threads" -- bench --threads 100000

echo "bad-input matrix (CLI, environment, files): $rows rows, $fails failed"
[ "$rows" -ge 100 ] || fail "only $rows rows"
exit $((fails > 0))
