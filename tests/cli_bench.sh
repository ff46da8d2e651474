#!/usr/bin/env bash
# `attn bench` end to end on tiny shapes (no timing assertions): --help,
# --json structure and fields (python3), --vs with speedup_vs, a forced
# variant, the text table, the progress line on stderr, usage errors.
set -u
ATTN=${ATTN_BIN:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS
export ATTN_LOG=error
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# small buffer and pool: this is a test of the command, not a measurement
small=(--buffer-mb 32 --repeats 2 --max-seconds 1)

"$ATTN" bench --help >"$tmp/help" || fail "--help exited $?"
grep -q -- "--vs NAME" "$tmp/help" || fail "--help does not document --vs"
grep -q -- "--full" "$tmp/help" || fail "--help does not document --full"

"$ATTN" bench "${small[@]}" --json --phase decode --batch 1,2 --context 300 --kv bf16,fp8 \
    >"$tmp/out.json" 2>"$tmp/err" || fail "bench --json exited $? ($(cat "$tmp/err"))"
grep -q "\[4/4\]" "$tmp/err" || fail "no progress line on stderr"
python3 - "$tmp/out.json" <<'EOF' || fail "bench --json content"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["machine"]
for k in ("read_gbps", "peak_gflops", "threads", "isa"):
    assert k in m, k
assert m["read_gbps"] > 0 and m["peak_gflops"] > 0 and m["threads"] >= 1
rs = d["results"]
assert len(rs) == 4, len(rs)
for r in rs:
    for k in ("backend", "phase", "batch", "context", "query_len", "kv_dtype", "ms",
              "tokens_per_s", "gbps", "bw_fraction", "gflops", "flops_fraction"):
        assert k in r, k
    assert r["backend"] == "CPU_ATTN" and r["phase"] == "decode" and r["query_len"] == 1
    assert r["ms"] > 0 and r["tokens_per_s"] > 0 and r["gflops"] > 0
    assert "speedup_vs" not in r
assert sorted({r["kv_dtype"] for r in rs}) == ["bf16", "fp8"]
# cold decode is measured against the read bandwidth, and says so
for r in rs:
    assert r["limit"] == "DRAM read bandwidth" and r["limit_unit"] == "GB/s", r["limit"]
    assert r["limit_value"] == m["read_gbps"]
    assert abs(r["limit_fraction"] - r["bw_fraction"]) < 1e-9
# bytes and flops follow the shape: 300 keys x 8 heads x 128 x 2 (K,V) x elem
r = [r for r in rs if r["batch"] == 2 and r["kv_dtype"] == "bf16"][0]
assert abs(r["gbps"] * r["ms"] * 1e6 - 2 * 300 * 8 * 128 * 2 * 2) < 1e-3 * 2 * 300 * 8 * 128 * 4
EOF

"$ATTN" bench "${small[@]}" --json --vs REFERENCE --phase prefill --prefill 40 \
    >"$tmp/vs.json" 2>"$tmp/err" || fail "bench --vs exited $? ($(cat "$tmp/err"))"
python3 - "$tmp/vs.json" <<'EOF' || fail "bench --vs content"
import json, sys
d = json.load(open(sys.argv[1]))
rs = d["results"]
main = [r for r in rs if r["backend"] == "CPU_ATTN"]
ref = [r for r in rs if r["backend"] == "REFERENCE"]
assert len(main) == 1 and len(ref) == 1
assert main[0]["phase"] == "prefill" and main[0]["query_len"] == 40
assert main[0]["speedup_vs"] > 0 and main[0]["vs_backend"] == "REFERENCE"
# prefill: against the peak of the variant's own arithmetic, or none
m, r = d["machine"], main[0]
assert r["limit_unit"] == "GFLOP/s"
if r["limit_value"] is None:
    assert r["limit_fraction"] is None and "not measured" in r["limit"], r
else:
    assert r["limit_value"] == m["peak_gflops"] and m["isa"] in r["limit"], r
    assert abs(r["limit_fraction"] / (r["gflops"] / r["limit_value"]) - 1) < 1e-3  # printed digits
EOF

# a variant narrower than the measured FMA loop gets no %peak, not a wrong one
"$ATTN" bench "${small[@]}" --json --variant portable --phase prefill --prefill 40 \
    >"$tmp/port.json" 2>"$tmp/err" || fail "bench --variant portable prefill exited $?"
python3 - "$tmp/port.json" <<'EOF' || fail "bench portable prefill limit"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["limit_value"] is None and r["limit_fraction"] is None and r["flops_fraction"] is None, r
EOF

"$ATTN" bench "${small[@]}" --variant portable --phase decode --batch 1 --context 64 --kv bf16 \
    >"$tmp/text" 2>"$tmp/err" || fail "bench --variant portable exited $?"
grep -q "CPU_ATTN variant portable" "$tmp/text" || fail "forced variant not reported"
grep -q "^CPU_ATTN   decode" "$tmp/text" || fail "no result row: $(cat "$tmp/text")"

expect_rc() { # rc cmd...
    local want=$1; shift
    "$@" >/dev/null 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || fail "$* exited $rc, want $want"
}
expect_rc 2 "$ATTN" bench --repeats 0
expect_rc 2 "$ATTN" bench --phase sideways
expect_rc 2 "$ATTN" bench --kv int4
expect_rc 2 "$ATTN" bench --bogus
expect_rc 2 "$ATTN" bench --variant sse9 --buffer-mb 32 --phase decode --batch 1 --context 16
expect_rc 3 "$ATTN" bench --backend NO_SUCH_BACKEND

[ $fails = 0 ] && echo "cli_bench: all passed"
exit $((fails > 0))
