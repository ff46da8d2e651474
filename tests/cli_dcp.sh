#!/usr/bin/env bash
# `attn serve --dcp N` under mpirun on loopback: the same per-step output
# checksums as one process (llama-3.1-8b, 50 steps; fewer under the
# sanitizers) within the documented error of the CPU_ATTN kernel variant
# that ran (attn platforms --json: each rank and the single process round
# their own partial results, and the variants that round probabilities to
# bf16 differ by about that much) with the same KV token capacity from
# half the pool per rank
# (the scheduler's blocks hold block_size tokens on each rank, as vLLM's
# block_size * dcp_world_size), the per-rank report, the startup failure of a mixed fleet (one
# rank without FlashAttention installed) naming each rank's choice on every
# rank, and a rank killed mid-run ending the job with an error instead of a
# hang; and OPENCL_ATTN on both ranks against one process (that row skipped
# without an OpenCL device). Exit 77 when mpirun is missing or attn was
# built without MPI.
set -u
ATTN=${ATTN_BIN:-attn}
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
if "$ATTN" serve --dcp 2 --steps 1 2>&1 | grep -q "built without MPI"; then
    echo "SKIP: attn built without MPI"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export LSAN_OPTIONS="suppressions=${ATTN_SOURCE_DIR:-.}/tests/cp/lsan-openmpi.supp"
# Open MPI's own leaks cannot be named under ASan (see tests/cp.cmake)
MPI=(env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo
    --mca oob_tcp_if_include lo)
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}
has() { grep -qF -- "$2" <<<"$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

steps=50
[ -n "${ATTN_SANITIZED:-}" ] && steps=8
"$ATTN" serve --model llama-3.1-8b --steps $steps --json >"$tmp/one.json" 2>"$tmp/one.err"
check "serve without DCP" test $? -eq 0
"$ATTN" platforms --json >"$tmp/platforms.json" 2>"$tmp/platforms.err"
check "attn platforms --json" test $? -eq 0
# the same token capacity over 2 ranks: half the blocks per rank
half=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_blocks"] // 2)' "$tmp/one.json")
"${MPI[@]}" -np 2 "$ATTN" serve --model llama-3.1-8b --steps $steps --dcp 2 --num-blocks "$half" \
    --json >"$tmp/dcp.json" 2>"$tmp/dcp.err"
rc=$?
check "serve --dcp 2 under mpirun exits 0 (got $rc: $(tail -3 "$tmp/dcp.err"))" test $rc -eq 0
python3 - "$tmp/one.json" "$tmp/dcp.json" "$steps" "$tmp/platforms.json" <<'PY' || fail=1
import json, sys
one, dcp, steps = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
a = [s["output_checksum"] for s in one["steps"]]
b = [s["output_checksum"] for s in dcp["steps"]]
assert len(a) == len(b) == steps, (len(a), len(b))
# The tolerance: the documented error against REFERENCE of the CPU_ATTN
# variant both runs used, for this model's activations (bf16)
kern = {g["kernel"]["variant"] for r in (one, dcp) for g in r["groups"]}
assert len(kern) == 1 and None not in kern, ("one kernel variant in both runs", kern)
variant = kern.pop()
dtypes = {g["selection"]["config"]["dtype"] for g in one["groups"]}
assert dtypes == {"bf16"}, dtypes
table = json.load(open(sys.argv[4]))["local"]["cpu_attn_variants"]
tol = [v["error_vs_reference"]["fp16_bf16"] for v in table if v["name"] == variant]
assert len(tol) == 1 and tol[0] > 0, ("documented error of", variant, table)
tol = tol[0]
worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
assert worst <= tol, ("checksums differ", variant, worst, tol, a[:4], b[:4])
d = dcp["final"]["dcp"]
assert d["world_size"] == 2 and len(d["ranks"]) == 2, d
r0, r1 = d["ranks"]
assert r0["output_checksum_sum"] == r1["output_checksum_sum"], d
for r in d["ranks"]:
    assert r["kv_bytes_peak"] > 0 and r["step_ms_mean"] > 0, r
# Per-rank pool vs one process's pool: the same KV token capacity (the
# default sizing gives one process an even block count) from exactly half
# the blocks and bytes on each rank.
assert one["num_blocks"] % 2 == 0, one["num_blocks"]
assert dcp["kv_token_capacity"] == one["kv_token_capacity"], (dcp["kv_token_capacity"], one["kv_token_capacity"])
assert dcp["num_blocks"] * 2 == one["num_blocks"], (dcp["num_blocks"], one["num_blocks"])
assert dcp["kv_bytes"] * 2 == one["kv_bytes"] == d["kv_bytes_allocated_per_rank"] * 2, (dcp["kv_bytes"], one["kv_bytes"])
# the blocks the requests hold at the end: a request of n tokens holds
# ceil(n / 256) per rank against ceil(n / 128), so half, plus at most one
# half-filled block per running request
used1, used2 = one["final"]["blocks"][0]["num_used"], dcp["final"]["blocks"][0]["num_used"]
running = one["final"]["running"]
assert dcp["final"]["running"] == running, (dcp["final"]["running"], running)
assert used1 <= 2 * used2 <= used1 + running, (used1, used2, running)
print("dcp pool: %d tokens, %d bytes per rank vs %d bytes in one process; blocks in use %d vs %d" %
      (dcp["kv_token_capacity"], dcp["kv_bytes"], one["kv_bytes"], used2, used1))
# each rank holds about half of the KV tokens
assert abs(r0["kv_tokens_peak"] - r1["kv_tokens_peak"]) <= 64 * 2, d
print("dcp checksums: %d steps, variant %s, worst relative difference %.2g (documented error %g)"
      % (len(a), variant, worst, tol))
PY

# OPENCL_ATTN on both ranks (each opens its own OpenCL device, PoCL here):
# a small fp32 decoder, so the checksums agree to their printed digits.
# Skipped (this row only) where the machine has no OpenCL device.
[ -n "${ATTN_BINARY_DIR:-}" ] && export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$ATTN_BINARY_DIR/pocl-cache}
OCL=(--machine opencl --layers 2 --heads 8 --kv-heads 2 --head-size 64 --dtype fp32
    --steps $((steps < 12 ? steps : 12)) --prompt-len 16:200 --output-len 8:40 --json)
# PoCL keeps allocations for the life of the process (tests/lsan_pocl.supp)
env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "$ATTN" serve "${OCL[@]}" --num-blocks 512 \
    >"$tmp/ocl1.json" 2>"$tmp/ocl1.err"
rc=$?
if [ $rc -eq 3 ] && grep -q "no OpenCL device" "$tmp/ocl1.err"; then
    echo "opencl row: skipped: $(head -1 "$tmp/ocl1.err")"
else
    check "serve --machine opencl (got $rc: $(tail -3 "$tmp/ocl1.err"))" test $rc -eq 0
    "${MPI[@]}" -np 2 "$ATTN" serve "${OCL[@]}" --num-blocks 256 --dcp 2 >"$tmp/ocl2.json" \
        2>"$tmp/ocl2.err"
    rc=$?
    check "opencl serve --dcp 2 under mpirun exits 0 (got $rc: $(tail -3 "$tmp/ocl2.err"))" \
        test $rc -eq 0
    python3 - "$tmp/ocl1.json" "$tmp/ocl2.json" <<'PY' || fail=1
import json, sys
one, dcp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for r in (one, dcp):
    ks = [(g["kernel"]["name"], g["kernel"]["device"]) for g in r["groups"]]
    assert ks == [("OPENCL_ATTN", "opencl")], ks
a = [s["output_checksum"] for s in one["steps"]]
b = [s["output_checksum"] for s in dcp["steps"]]
assert len(a) == len(b) > 0, (len(a), len(b))
worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
assert worst <= 1e-5, ("checksums differ", worst, a[:4], b[:4])
d = dcp["final"]["dcp"]
assert d["world_size"] == 2 and len(d["ranks"]) == 2, d
assert d["ranks"][0]["output_checksum_sum"] == d["ranks"][1]["output_checksum_sum"], d
assert all(r["kv_tokens_peak"] > 0 for r in d["ranks"]), d
print("opencl dcp: %d steps on OPENCL_ATTN, worst relative checksum difference %.2g"
      % (len(a), worst))
PY
fi

# a mixed fleet: rank 1 has no FlashAttention, so it would run FLASHINFER
SMALL=(--machine a100 --layers 2 --heads 4 --kv-heads 2 --head-size 64 --steps 2 --dcp 2 --quiet)
out=$("${MPI[@]}" -np 1 "$ATTN" serve "${SMALL[@]}" : -np 1 "$ATTN" serve "${SMALL[@]}" \
    --installed flashinfer 2>&1)
rc=$?
check "mixed fleet fails startup (got $rc)" test $rc -ne 0
msg="DCP ranks disagree on the attention setup: rank 0: backend FLASH_ATTN, layout NHD, block size 16; rank 1: backend FLASHINFER, layout NHD, block size 16"
check "mismatch message" has "$out" "$msg"
check "on both ranks" test "$(grep -cF -- "$msg" <<<"$out")" -eq 2

# a rank killed mid-run: the job ends with an error, not a hang
"${MPI[@]}" -np 2 "$ATTN" serve --layers 2 --heads 4 --kv-heads 2 --head-size 64 --steps 100000 \
    --dcp 2 --dcp-timeout 5 >"$tmp/kill.out" 2>"$tmp/kill.err" &
job=$!
for _ in $(seq 1 100); do
    [ "$(pgrep -P $job | wc -l)" -ge 2 ] && grep -q "^ *[0-9]" "$tmp/kill.out" 2>/dev/null && break
    sleep 0.2
done
victim=$(pgrep -P $job | tail -1)
if [ -n "$victim" ]; then
    kill -9 "$victim"
    for _ in $(seq 1 150); do kill -0 $job 2>/dev/null || break; sleep 0.2; done
    if kill -0 $job 2>/dev/null; then
        check "job ended within 30 s of a rank's death" false
        kill -9 $job
    fi
    wait $job
    rc=$?
    check "killed rank: nonzero exit (got $rc)" test $rc -ne 0
    err=$(cat "$tmp/kill.err")
    echo "killed rank: $(grep -m1 -E "DCP exchange timed out|exited on signal|non-zero exit" <<<"$err")"
    check "killed rank: clear error ($err)" grep -qE \
        "DCP exchange timed out|exited on signal 9|killed|non-zero exit code" <<<"$err"
else
    check "found the ranks to kill" false
    kill -9 $job 2>/dev/null
fi
exit $fail
