#!/usr/bin/env bash
# `attn bench` end to end on tiny shapes (no timing assertions): --help and
# its list of variants, --json structure and fields (python3), --vs with
# speedup_vs, a forced variant, the text table, the progress line on stderr,
# the default bandwidth buffer and KV pool sized from the LLC, usage errors.
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
# every variant of the build, from its one table (attn_cpu_attn_variant_name)
if [ "$(uname -m)" = x86_64 ]; then
    grep -q "runs): amx-bf16, avx512-bf16, avx512, avx2, portable$" "$tmp/help" ||
        fail "--help does not list every variant: $(grep -A1 -- --variant "$tmp/help")"
fi
"$ATTN" bench --variant sse9 --buffer-mb 32 >/dev/null 2>"$tmp/err"
grep -q "no CPU_ATTN variant named 'sse9' (variants: .*portable)" "$tmp/err" ||
    fail "--variant sse9 does not list the variants: $(cat "$tmp/err")"

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
grep -qE "^CPU_ATTN +decode" "$tmp/text" || fail "no result row: $(cat "$tmp/text")"

# The default buffer, as a user runs it (no --buffer-mb; the sanitizer pass
# once stopped here on the AVX-512 read loop's signed reduction): the
# bandwidth probe streams 8x the LLC this process's CPUs share (summed over
# its instances; the test reads sysfs itself), at least 1 GiB, at most a
# quarter of memory, and the KV pool is as large, so decode is held against
# the bandwidth of where its KV comes from.
"$ATTN" bench --json --phase decode --batch 1 --context 1024 --kv bf16 --repeats 1 \
    --max-seconds 1 >"$tmp/def.json" 2>"$tmp/err" || fail "bench (default buffer) exited $? ($(cat "$tmp/err"))"
"$ATTN" platforms --json >"$tmp/plat.json" 2>/dev/null || fail "platforms --json exited $?"
python3 - "$tmp/def.json" "$tmp/plat.json" <<'EOF' || fail "bench default buffer and pool"
import glob, json, os, sys
d, plat = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
m, r = d["machine"], d["results"][0]
llc, level = 0, 0
if hasattr(os, "sched_getaffinity") and os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
    seen = {}
    for cpu in os.sched_getaffinity(0):
        for idx in glob.glob("/sys/devices/system/cpu/cpu%d/cache/index*" % cpu):
            def rd(name, default=None):
                try:
                    return open(os.path.join(idx, name)).read().strip()
                except OSError:
                    return default
            size, lv = rd("size"), rd("level")
            if rd("type") == "Instruction" or not size or not lv:
                continue
            b = int(size.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(size[-1], 0)
            lv = int(lv)
            if lv > level:
                level, seen = lv, {}
            if lv == level:
                seen[rd("shared_cpu_list") or "cpu%d" % cpu] = b
    llc = sum(seen.values())
    assert m["llc_bytes"] == llc, (m["llc_bytes"], llc)
else:
    llc = m["llc_bytes"]  # no sysfs here: cpuid's answer, whatever it is
mem = plat["local"]["cpu"]["memory_bytes"]
want = max(1 << 30, 8 * llc)
if mem:
    want = min(want, mem // 4)
want -= want % (m["threads"] * 256)
assert m["buffer_bytes"] == want, (m["buffer_bytes"], want, llc, mem)
block = 2 * 128 * 8 * 128 * 2  # a bf16 KV block: K and V, 128 tokens, 8 heads x 128
assert want - block < r["kv_pool_bytes"] < want + block + 4096, (r["kv_pool_bytes"], want)
assert r["limit"] == "DRAM read bandwidth" and r["gbps"] > 0, r
print("default buffer %d MiB (LLC %d MiB), KV pool %d MiB" % (want >> 20, llc >> 20,
      r["kv_pool_bytes"] >> 20))
EOF

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
