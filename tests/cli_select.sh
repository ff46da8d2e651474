#!/usr/bin/env bash
# `attn select` end to end: the issue's done-when commands, a sample of
# vLLM 0.32.0's own answers (tests/data/vllm-0.32.0-cases.json) through
# --json (compared with python3), exit codes and
# usage errors, ATTN_BACKEND, --explain, selection on this machine
# without --machine (CPU rules: whatever `attn backends` says resolves), and
# the OpenCL platform's registered rules (a test plugin, no ICD).
set -u
ATTN=${ATTN_BIN:?}
SRC=${ATTN_SOURCE_DIR:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS
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

# ---- the issue's done-when commands ------------------------------------------
expect_out FLASH_ATTN 0 "$ATTN" select --machine h100 --head-size 128 --dtype bf16
expect_out FLASH_ATTN 0 "$ATTN" select --machine a100
expect_out ROCM_ATTN 0 "$ATTN" select --machine mi300x
"$ATTN" select --machine h100 --installed fa2,fa3,fa4 --backend FLASHINFER >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 3 ] || fail "explicit FLASHINFER without flashinfer exited $rc, want 3"
grep -qxF "attn select: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this \
configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']" \
    "$tmp/err" || fail "explicit FLASHINFER message: $(cat "$tmp/err")"

# ---- exit codes and usage errors ----------------------------------------------
"$ATTN" select --machine h100 --bogus >/dev/null 2>&1; [ $? = 2 ] || fail "unknown option not 2"
"$ATTN" select --machine h100 --dtype fp64 >/dev/null 2>&1; [ $? = 2 ] || fail "bad dtype not 2"
"$ATTN" select --machine h100 --head-size x >/dev/null 2>&1; [ $? = 2 ] || fail "bad head not 2"
"$ATTN" select --machine no-such-machine >/dev/null 2>&1; [ $? = 2 ] || fail "bad machine not 2"
"$ATTN" select --machine h100 --kv-cache-dtype fp9 >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "bad kv dtype not 2"
grep -qF "Invalid kv_cache_dtype: fp9. Valid values are: ('auto', 'float16'" "$tmp/err" ||
    fail "kv dtype message: $(cat "$tmp/err")"
"$ATTN" select --help >/dev/null || fail "--help failed"
"$ATTN" select --help | grep -q -- "--run-kv-cache-dtype S" || fail "--help: --run-kv-cache-dtype"

# The run's KV dtype (issue 27 item 6): the native-dtype layer of a
# turboquant run on MI300X with AITER shares TURBOQUANT's layout; an
# explicit request refused for that alone gives way, with vLLM's note.
expect_out ROCM_ATTN 0 "$ATTN" select --machine rocm:gfx942 --installed aiter
expect_out TRITON_ATTN 0 "$ATTN" select --machine rocm:gfx942 --installed aiter \
    --run-kv-cache-dtype turboquant_4bit_nc
"$ATTN" select --machine rocm:gfx942 --installed aiter --backend ROCM_ATTN --json \
    --run-kv-cache-dtype turboquant_4bit_nc >"$tmp/run.json" || fail "turboquant run --json"
python3 - "$tmp/run.json" <<'PY' || fail "turboquant run --json: $(cat "$tmp/run.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["selected"] == "TRITON_ATTN", d
assert d["config"]["run_kv_cache_dtype"] == "turboquant_4bit_nc", d["config"]
assert d["config"]["kv_cache_dtype"] == "auto", d["config"]
assert d["notes"] == ["Selected backend ROCM_ATTN is incompatible with this layer "
                      "(AttentionType.DECODER) of the turboquant run; using the auto-selected "
                      "per-layer backend. Reason: ['no KV cache layout in common with "
                      "TURBOQUANT']"], d["notes"]
PY
# Not given: the layer's own, recorded as such.
"$ATTN" select --machine h100 --kv-cache-dtype fp8 --json >"$tmp/run.json" || fail "run default"
python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["config"]
assert c["run_kv_cache_dtype"] == "fp8", c' "$tmp/run.json" || fail "run default: $(cat "$tmp/run.json")"
"$ATTN" select --machine h100 --run-kv-cache-dtype auto --explain >"$tmp/out" || fail "run --explain"
grep -q "run_kv_cache_dtype" "$tmp/out" && fail "--explain names a run dtype equal to the layer's"
"$ATTN" select --machine h100 --run-kv-cache-dtype fp8 --explain >"$tmp/out" || fail "run fp8"
grep -q "run_kv_cache_dtype=fp8" "$tmp/out" || fail "--explain: run dtype: $(cat "$tmp/out")"
# A model whose skipped layers keep the model's dtype: their group selects
# with kv "auto", every group with the run's; part of a group is refused.
"$ATTN" select --model gpt-oss-20b --machine h100 --kv-cache-dtype fp8 --json \
    --kv-cache-dtype-skip-layers sliding_window >"$tmp/skip.json" || fail "skip layers"
python3 - "$tmp/skip.json" <<'PY' || fail "skip layers --json: $(cat "$tmp/skip.json")"
import json, sys
g = {x["kind"]: x["selection"]["config"] for x in json.load(open(sys.argv[1]))["groups"]}
assert g["sliding_window"]["kv_cache_dtype"] == "auto", g
assert g["full_attention"]["kv_cache_dtype"] == "fp8", g
assert {c["run_kv_cache_dtype"] for c in g.values()} == {"fp8"}, g
PY
"$ATTN" select --model gpt-oss-20b --machine h100 --kv-cache-dtype fp8 \
    --kv-cache-dtype-skip-layers 3 >"$tmp/out" 2>&1
[ $? = 3 ] || fail "skip list naming part of a group not 3"
grep -qF "names layer 3 but not layer 1 of the same layer group 1" "$tmp/out" ||
    fail "skip list message: $(cat "$tmp/out")"
"$ATTN" select --machine h100 --kv-cache-dtype-skip-layers 3 >/dev/null 2>&1
[ $? = 2 ] || fail "--kv-cache-dtype-skip-layers without --model not 2"
# No CacheDType: CacheConfig's validation text, before an unknown name.
"$ATTN" select --machine h100 --backend FOO --run-kv-cache-dtype FP8 >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "bad run kv dtype not 2"
grep -qF "Input should be 'auto', 'float16', 'bfloat16', 'fp8', " "$tmp/err" ||
    fail "run kv dtype message: $(cat "$tmp/err")"
"$ATTN" select --machine h100 --run-kv-cache-dtype fp9 --json >"$tmp/kv.json" 2>/dev/null
[ $? = 2 ] || fail "bad run kv dtype --json not 2"
python3 -c 'import json,sys; e = json.load(open(sys.argv[1]))["error"]
assert e["kind"] == "invalid-config" and e["message"].endswith("'"'nvfp4' or 'nvfp4_4over6'"'"), e' \
    "$tmp/kv.json" || fail "bad run kv dtype --json: $(cat "$tmp/kv.json")"
"$ATTN" select --machine h100 --backend FOO >/dev/null 2>"$tmp/err"
[ $? = 3 ] || fail "unknown backend not 3"
grep -qF "Unknown attention backend: 'FOO'. Valid options are: FLASH_ATTN, FLASH_ATTN_DIFFKV," \
    "$tmp/err" || fail "unknown backend message: $(cat "$tmp/err")"
"$ATTN" select --machine h100 --backend custom >/dev/null 2>"$tmp/err"
[ $? = 3 ] || fail "unregistered CUSTOM not 3"
grep -qF "Backend CUSTOM must be registered before use." "$tmp/err" || fail "CUSTOM message"

# vLLM 0.32.0's AttentionConfig: the MSA aliases select automatically.
expect_out FLASH_ATTN 0 "$ATTN" select --machine h100 --backend cutlass_msa
expect_out TRITON_MLA 0 "$ATTN" select --machine cuda:12.0 --backend TRITON_MSA --use-mla \
    --head-size 576
# An invalid kv-cache dtype with --json: a JSON error of kind invalid-config.
"$ATTN" select --machine h100 --kv-cache-dtype fp9 --json >"$tmp/kv.json" 2>"$tmp/err"
[ $? = 2 ] || fail "bad kv dtype --json not 2"
python3 - "$tmp/kv.json" <<'PY' || fail "bad kv dtype --json: $(cat "$tmp/kv.json" "$tmp/err")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["kind"] == "invalid-config", e
assert e["message"].startswith("Invalid kv_cache_dtype: fp9. Valid values are: ('auto', "), e
PY

# ATTN_BACKEND is the default --backend; --backend wins over it.
expect_out TRITON_ATTN 0 env ATTN_BACKEND=triton_attn "$ATTN" select --machine h100
expect_out FLEX_ATTENTION 0 env ATTN_BACKEND=triton_attn "$ATTN" select --machine h100 \
    --backend FLEX_ATTENTION
expect_out FLASH_ATTN 0 env ATTN_BACKEND=auto "$ATTN" select --machine h100

# --explain: every candidate, marked.
"$ATTN" select --machine h100 --installed fa2,fa3,fa4 --explain >"$tmp/out" 2>/dev/null ||
    fail "--explain failed"
for w in "FLASH_ATTN" "FLASHINFER" "ModuleNotFoundError" "is not installed on machine" "TURBOQUANT" "✓" "✗" "selected:  FLASH_ATTN"; do
    grep -qF -- "$w" "$tmp/out" || fail "--explain lacks '$w'"
done

# --block-size precluded warning goes to stderr as a warning.
ATTN_LOG=warn "$ATTN" select --machine h100 --use-mla --head-size 576 --num-heads 128 \
    --kv-cache-dtype fp8 --block-size 16 >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = TRITON_MLA ] || fail "precluded case chose $(cat "$tmp/out")"
grep -qF -- "--block-size 16 precluded higher-priority backend(s) FLASHMLA. Using TRITON_MLA" \
    "$tmp/err" || fail "no precluded warning: $(cat "$tmp/err")"

# ---- a sample of vLLM 0.32.0's answers through --json -------------------------
# (the `|| fail` stays on the line of the heredoc: a line after it would be
# read as the heredoc's first line)
python3 - "$ATTN" "$SRC/tests/data/vllm-0.32.0-cases.json" \
    "$SRC/tests/data/vllm-0.32.0-known-diffs.txt" "$SRC/tools/vllm-parity" <<'PY' || fail "vLLM cases through the CLI"
import json, os, subprocess, sys
attn, path, kpath = sys.argv[1:4]
sys.path.insert(0, sys.argv[4])
sys.dont_write_bytecode = True
from parity import attn_args  # the one case -> `attn select` flags mapping
cases = json.load(open(path))["cases"]
known = set()
if os.path.exists(kpath):
    known = {l.split()[0] for l in open(kpath) if l.strip() and not l.startswith("#")}
sample = [c for c in cases[::25] if c["id"] not in known]
bad = 0
for c in sample:
    args = attn_args(attn, c)
    p = subprocess.run(args, capture_output=True, text=True,
                       env=dict(os.environ, ATTN_SELFTEST="0"))
    ex = c["expect"]
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = None
    if "selected" in ex:
        ok = p.returncode == 0 and out and out["selected"] == ex["selected"]
    elif ex["error"] == "invalid-config":
        ok = p.returncode == 2
    else:
        ok = p.returncode == 3 and out and (out["error"] or {}).get("kind") == ex["error"]
    if out is not None:
        for cand in out.get("candidates", []):
            if set(cand) < {"name", "priority", "valid", "reasons", "detail"}:
                ok = False
    if not ok:
        bad += 1
        print("case %s: rc %d, %s; vLLM %s" % (c["id"], p.returncode,
              (out or {}).get("selected") or (out or {}).get("error") or p.stderr, ex),
              file=sys.stderr)
print("cli_select: %d/%d sampled vLLM cases agree" % (len(sample) - bad, len(sample)))
sys.exit(1 if bad or len(sample) < 40 else 0)
PY

# ---- this machine, no --machine: the platform's own rules ------------------------
"$ATTN" backends --json >"$tmp/backends.json" 2>/dev/null || fail "attn backends --json failed"
"$ATTN" select --json >"$tmp/sel.json" 2>/dev/null
rc=$?
python3 - "$tmp/backends.json" "$tmp/sel.json" "$rc" <<'PY' || fail "selection on this machine"
import json, sys
b = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2])); rc = int(sys.argv[3])
resolves = {x["name"]: x["resolves"] for x in b["backends"]}
if b["device"] != "cpu":
    print("this machine is %s: CPU rules not checked" % b["device"]); sys.exit(0)
order = ["CPU_ATTN", "REFERENCE"]
names = [c["name"] for c in s["candidates"]]
assert names == order, names
for c in s["candidates"]:
    if not resolves[c["name"]]:
        assert not c["valid"] and c["reasons"][0].startswith("ImportError: "), c
if s["selected"] is not None:
    assert rc == 0 and resolves[s["selected"]], (rc, s["selected"])
    first_ok = [c["name"] for c in s["candidates"] if c["valid"]][0]
    assert s["selected"] == first_ok
    if resolves["CPU_ATTN"] and s["candidates"][0]["valid"]:
        assert s["selected"] == "CPU_ATTN"
else:
    assert rc == 3 and s["error"]["kind"] == "no-valid", (rc, s["error"])
    assert s["error"]["message"].startswith("No valid attention backend found for cpu with ")
print("this machine: selected %s" % s["selected"])
PY

# per-kind override: a sliding-window layer takes its kind's backend, a full
# attention layer keeps the global request
out=$("$ATTN_BIN" select --machine h100 --sliding-window --backend FLEX_ATTENTION \
      --backend-for sliding_window=TRITON_ATTN)
[ "$out" = "TRITON_ATTN" ] || { echo "FAIL: --backend-for sliding_window: got '$out'"; fails=$((fails+1)); }
out=$("$ATTN_BIN" select --machine h100 --backend FLEX_ATTENTION \
      --backend-for sliding_window=TRITON_ATTN)
[ "$out" = "FLEX_ATTENTION" ] || { echo "FAIL: --backend-for on a full layer: got '$out'"; fails=$((fails+1)); }
"$ATTN_BIN" select --backend-for nokind=X >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || { echo "FAIL: bad --backend-for kind: exit $rc, want 2"; fails=$((fails+1)); }

# ---- the OpenCL platform: registered rules --------------------------------------
# A simulated OpenCL machine (JSON spec). Standard layers: the built-in
# OPENCL_ATTN's rule (its catalog entry), valid where this machine has an
# OpenCL device. MLA layers: nothing registered for them, so vLLM's "No
# valid" form that says so, exit 3.
BIN=${ATTN_BINARY_DIR:?}
HAS_CL=0
"$ATTN" platforms --machine opencl >/dev/null 2>&1 && HAS_CL=1
printf '{"name": "cl-sim", "platform": "opencl"}\n' >"$tmp/cl.json"
MLA=(--use-mla --head-size 576 --num-heads 16 --dtype bf16)
"$ATTN" select --machine "$tmp/cl.json" "${MLA[@]}" --json >"$tmp/cl.out"
rc=$?
[ $rc = 3 ] || fail "opencl MLA without rules: exit $rc, want 3"
python3 - "$tmp/cl.out" <<'PY' || fail "opencl MLA without rules: JSON"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["device"] == "opencl" and s["selected"] is None and s["candidates"] == [], s
e = s["error"]
assert e["kind"] == "no-valid" and e["status"] == "NO_VALID_BACKEND", e
assert e["message"].startswith("No valid attention backend found for opencl with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16"), e
assert e["message"].endswith("Reasons: {}. No backend registered a rule for opencl MLA layers (attn_register_platform_rule)."), e
PY
"$ATTN" select --machine "$tmp/cl.json" --head-size 128 --dtype bf16 --json >"$tmp/cl.out"
rc=$?
python3 - "$tmp/cl.out" "$rc" "$HAS_CL" <<'PY' || fail "opencl standard layers: OPENCL_ATTN's rule"
import json, sys
s, rc, has_cl = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3] == "1"
assert [c["name"] for c in s["candidates"]] == ["OPENCL_ATTN"], s["candidates"]
c = s["candidates"][0]
assert c["priority"] == 0 and c["locator"] == "builtin:OPENCL_ATTN", c
if has_cl:
    assert rc == 0 and s["selected"] == "OPENCL_ATTN" and c["valid"], (rc, s)
else:
    assert rc == 3 and c["reasons"][0].startswith("OPENCL_ATTN needs an OpenCL device: "), (rc, c)
PY
# A plugin registers RULES_CL (priority -1, ahead of OPENCL_ATTN) and
# RULES_CL_MLA with their rules: selected without any change to the
# selector; if its init fails, the rules go with the names.
PLUG="$BIN/test-registry/rules_plugin"
expect_out RULES_CL 0 env ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --machine "$tmp/cl.json"
expect_out RULES_CL_MLA 0 env ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --machine "$tmp/cl.json" \
    "${MLA[@]}"
ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --machine "$tmp/cl.json" --dtype fp16 --head-size 64 \
    --explain >"$tmp/cl.explain" || fail "RULES_CL --explain"
grep -q "RULES_CL" "$tmp/cl.explain" || fail "--explain lacks RULES_CL"
expect_out RULES_CL 0 env ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --machine "$tmp/cl.json" \
    --backend rules_cl
out=$(ATTN_PLUGIN_PATH="$PLUG" ATTN_TEST_RULES_FAIL=1 "$ATTN" select --machine "$tmp/cl.json" \
    "${MLA[@]}" 2>&1)
rc=$?
[ $rc = 3 ] || fail "rolled-back rules plugin: exit $rc, want 3"
grep -qF "Reasons: {}. No backend registered a rule" <<<"$out" || fail "rule not rolled back: $out"
ATTN_PLUGIN_PATH="$PLUG" ATTN_TEST_RULES_FAIL=1 "$ATTN" select --machine "$tmp/cl.json" --json \
    >"$tmp/cl.out" 2>/dev/null
python3 - "$tmp/cl.out" <<'PY' || fail "rolled-back rules plugin: standard layers"
import json, sys
s = json.load(open(sys.argv[1]))
assert [c["name"] for c in s["candidates"]] == ["OPENCL_ATTN"], s["candidates"]
PY
# vLLM's platforms do not see the OpenCL rule
expect_out FLASH_ATTN 0 env ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --machine h100
# The real OpenCL platform: its rules when it is there; with no ICD, its reason.
if [ $HAS_CL = 1 ]; then
    expect_out OPENCL_ATTN 0 env ATTN_PLATFORM=opencl "$ATTN" select --head-size 128 --dtype bf16
    expect_out OPENCL_ATTN 0 "$ATTN" select --machine opencl:0 --head-size 64 --dtype fp16
    expect_out RULES_CL 0 env ATTN_PLUGIN_PATH="$PLUG" ATTN_PLATFORM=opencl "$ATTN" select
else
    echo "SKIP the real OpenCL platform (no OpenCL device here)"
fi
mkdir -p "$tmp/no-icd"
out=$(OCL_ICD_VENDORS="$tmp/no-icd" ATTN_PLATFORM=opencl "$ATTN" select 2>&1); rc=$?
[ $rc = 3 ] || fail "no ICD: exit $rc, want 3 ($out)"
grep -qF "no OpenCL device" <<<"$out" || fail "no ICD: $out"
OCL_ICD_VENDORS="$tmp/no-icd" "$ATTN" select --machine opencl --json >"$tmp/noicd.json"; rc=$?
[ $rc = 3 ] || fail "no ICD --json: exit $rc, want 3"
python3 - "$tmp/noicd.json" <<'PY' || fail "no ICD: JSON"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["selected"] is None and s["machine"] == "opencl", s
assert s["error"]["kind"] == "platform-unavailable", s
assert s["error"]["status"] == "PLATFORM_UNAVAILABLE", s
assert "no OpenCL device" in s["error"]["message"], s
PY
"$ATTN" select --machine opencl:x >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "opencl:x: exit $rc, want 2"

[ $fails = 0 ] && echo "cli_select: all checks passed"
exit $((fails > 0))
