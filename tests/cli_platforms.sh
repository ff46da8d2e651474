#!/usr/bin/env bash
# `attn platforms`: real CPU features, why there is no CUDA/ROCm, OpenCL
# (PoCL) when installed, --json, ATTN_CPU_MASK, --machine, usage errors.
set -u
BIN="${ATTN_BIN:?ATTN_BIN must point at the attn binary}"
SRC="${ATTN_SOURCE_DIR:-.}"
fail=0
checks=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect_rc() { # want cmd...
    local want=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok; else bad "'$*' exited $rc, want $want: $(cat "$tmp/err")"; fi
}
contains() { # file needle
    if grep -qF -- "$2" "$1"; then ok; else bad "$1 does not contain '$2'"; fi
}
py() { python3 -c "$@"; }

unset ATTN_PLATFORM ATTN_CPU_MASK

# --- text output: real CPU, real GPU probes ---------------------------------------------------
expect_rc 0 "$BIN" platforms
cp "$tmp/out" "$tmp/text"
contains "$tmp/text" "This machine"
contains "$tmp/text" "CPU "
contains "$tmp/text" "usable:"
contains "$tmp/text" "Machine catalog"
for m in h100 h200 a100 l4 t4 v100 b200 mi300x mi250 xpu xeon epyc; do
    if grep -qE "^  $m +" "$tmp/text"; then ok; else bad "catalog row $m missing"; fi
done
contains "$tmp/text" "mi300x   rocm     AMD Instinct MI300X"
contains "$tmp/text" "9.4 (gfx942)"

# the text lists exactly the usable features the JSON reports (parsed, not grepped)
"$BIN" platforms --json >"$tmp/json0" 2>/dev/null
if py '
import json, re, sys
usable = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]["usable"]
text = open(sys.argv[2]).read().splitlines()
i = next(i for i, l in enumerate(text) if l.strip().startswith("usable:"))
words = text[i].split("usable:", 1)[1].split()
for l in text[i + 1:]:
    if ":" in l or not l.startswith("             "): break
    words += l.split()
assert words == (usable or ["-"]), (words, usable)
' "$tmp/json0" "$tmp/text"; then ok; else bad "text usable list differs from --json"; fi

# CUDA / ROCm: either devices, or "not present" with the loader's words
if ls /dev/nvidia0 >/dev/null 2>&1 || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    echo "cli_platforms: libcuda present here; skipping the 'not present' CUDA check"
else
    if grep -qE "^  CUDA +not present: .*libcuda" "$tmp/text"; then ok; else bad "CUDA absence not explained: $(grep CUDA "$tmp/text")"; fi
fi
if ldconfig -p 2>/dev/null | grep -q 'libamdhip64'; then
    echo "cli_platforms: HIP runtime present here; skipping the 'not present' ROCm check"
else
    if grep -qE "^  ROCm +not present: .*libamdhip64" "$tmp/text"; then ok; else bad "ROCm absence not explained: $(grep ROCm "$tmp/text")"; fi
fi

# OpenCL: PoCL listed when an ICD is installed
have_ocl=0
if ldconfig -p 2>/dev/null | grep -q 'libOpenCL\.so\.1' && command -v clinfo >/dev/null 2>&1 &&
    clinfo -l 2>/dev/null | grep -q 'Platform #0'; then
    have_ocl=1
fi
if [ "$have_ocl" = 1 ]; then
    platform0=$(clinfo -l 2>/dev/null | sed -n 's/^Platform #0: //p' | head -1)
    contains "$tmp/text" "platform 0: $platform0"
    contains "$tmp/text" "extensions:"
    contains "$tmp/text" "fp16:"
    if clinfo -l 2>/dev/null | grep -q 'Portable Computing Language'; then
        contains "$tmp/text" "Portable Computing Language"
    fi
else
    echo "cli_platforms: SKIP OpenCL listing check (no libOpenCL.so.1/clinfo/ICD here)"
    if grep -qE "^  OpenCL +not present: " "$tmp/text"; then ok; else bad "OpenCL absence not explained"; fi
fi

# --- JSON --------------------------------------------------------------------------------------
expect_rc 0 "$BIN" platforms --json
cp "$tmp/out" "$tmp/json"
if py 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/json"; then ok; else bad "--json is not JSON"; fi
if py '
import json, sys
d = json.load(open(sys.argv[1]))
loc = d["local"]
cpu = loc["cpu"]
assert cpu["cores"] >= 1 and cpu["model"] and cpu["vendor"], cpu
f = cpu["features"]
assert set(f["usable"]) <= set(f["present"]), f
assert f["masked"] == [], f
if "avx2" in f["usable"]: assert "avx" in f["usable"]
for k in ("cuda", "rocm"):
    g = loc[k]
    assert isinstance(g["present"], bool)
    assert g["present"] == (g["reason"] is None), g
    assert g["present"] or g["devices"] == []
o = loc["opencl"]
assert isinstance(o["present"], bool) and isinstance(o["platforms"], list)
if not loc["cuda"]["present"] and not loc["rocm"]["present"]:
    assert loc["platform"]["kind"] == "cpu" and loc["platform"]["cpu"]["model"] == cpu["model"]
assert d["current"]["name"] == "local", d["current"]
names = [m["name"] for m in d["catalog"]]
for m in ("h100","h200","a100","l4","t4","v100","b200","mi300x","mi250","xpu","xeon","epyc"):
    assert m in names, m
h100 = d["catalog"][names.index("h100")]
assert h100["capability"] == "9.0" and h100["kind"] == "cuda" and h100["simulated"] is True
mi = d["catalog"][names.index("mi300x")]
assert mi["gfx_arch"] == "gfx942" and mi["capability"] == "9.4" and mi["installed"] == []
' "$tmp/json"; then ok; else bad "--json content"; fi
if [ "$have_ocl" = 1 ]; then
    if py '
import json, sys
o = json.load(open(sys.argv[1]))["local"]["opencl"]
assert o["present"] and o["platforms"] and o["platforms"][0]["devices"], o
d = o["platforms"][0]["devices"][0]
assert d["fp16"] == ("cl_khr_fp16" in d["extensions"]) and d["compute_units"] >= 1
' "$tmp/json"; then ok; else bad "--json opencl block"; fi
fi
if py '
import json, sys
c = json.load(open(sys.argv[1]))["local"]["cuda"]
assert c["present"] or c["reason"].startswith("libcuda"), c' "$tmp/json"; then ok; else bad "cuda reason in JSON"; fi

# --- ATTN_CPU_MASK -----------------------------------------------------------------------------
ATTN_CPU_MASK=-avx512 "$BIN" platforms --json >"$tmp/masked" 2>"$tmp/err"
if py '
import json, sys
c = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]
assert not [f for f in c["usable"] if f.startswith("avx512") or f.startswith("amx")], c
assert set(c["masked"]) == {f for f in c["present"] if f.startswith("avx512") or f.startswith("amx")}, c
' "$tmp/masked"; then ok; else bad "ATTN_CPU_MASK=-avx512 left avx512 usable"; fi
ATTN_CPU_MASK=none "$BIN" platforms --json >"$tmp/none" 2>/dev/null
if py '
import json, sys
c = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]
assert c["usable"] == [] and c["masked"] == c["present"], c' "$tmp/none"; then ok; else bad "ATTN_CPU_MASK=none"; fi
# the text names what the mask hid, where this CPU has it
ATTN_CPU_MASK=-avx2 "$BIN" platforms >"$tmp/out" 2>&1
if py '
import json, sys
present = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]["present"]
masked = [l for l in open(sys.argv[2]) if l.strip().startswith("masked:")]
assert masked and (("avx2" in masked[0].split()) == ("avx2" in present)), (masked, present)
' "$tmp/json0" "$tmp/out"; then ok; else bad "masked avx2 not shown"; fi
# kernel variant names and feature names are one vocabulary ('-', '_', case aside)
for m in -amx-bf16 -AMX_BF16 -amxbf16; do
    ATTN_CPU_MASK=$m "$BIN" platforms --json >"$tmp/masked" 2>"$tmp/err"
    if py '
import json, sys
c = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]
assert c["masked"] == [f for f in c["present"] if f == "amx_bf16"], c
assert "amx_bf16" not in c["usable"], c
' "$tmp/masked" && [ ! -s "$tmp/err" ]; then ok; else bad "ATTN_CPU_MASK=$m: $(cat "$tmp/err")"; fi
done
# a bad name is reported with the accepted ones and skipped; the others still hide
ATTN_CPU_MASK=-avx512bf16,-bogus "$BIN" platforms --json >"$tmp/masked" 2>"$tmp/err"
contains "$tmp/err" "ATTN_CPU_MASK='-avx512bf16,-bogus': unknown name 'bogus'"
contains "$tmp/err" "kernel variants: amx-bf16 avx512-bf16 avx512 avx2; groups: amx none"
if py '
import json, sys
c = json.load(open(sys.argv[1]))["local"]["cpu"]["features"]
assert c["masked"] == [f for f in c["present"] if f == "avx512_bf16"], c
assert "avx512_bf16" not in c["usable"], c
' "$tmp/masked"; then ok; else bad "ATTN_CPU_MASK=-avx512bf16,-bogus did not hide avx512_bf16"; fi

# --- --machine, ATTN_PLATFORM -------------------------------------------------------------------
expect_rc 0 "$BIN" platforms --machine h100
contains "$tmp/out" "Machine h100 (simulated)"
contains "$tmp/out" "capability   9.0"
contains "$tmp/out" "installed    fa2,fa3,fa4,flashinfer,flashinfer_cubin,flashmla"
expect_rc 0 "$BIN" platforms --machine=rocm:gfx90a --json
if py '
import json, sys
m = json.load(open(sys.argv[1]))["machine"]
assert m["kind"] == "rocm" and m["capability"] == "9.0" and m["gfx_arch"] == "gfx90a", m' "$tmp/out"; then ok; else bad "--machine rocm:gfx90a --json"; fi
expect_rc 0 "$BIN" platforms --machine xeon
contains "$tmp/out" "amx_bf16"
expect_rc 0 "$BIN" platforms --machine "$SRC/data/machines/mi300x-aiter.json"
contains "$tmp/out" "installed    aiter"
contains "$tmp/out" "rocm_use_aiter=true"
expect_rc 2 "$BIN" platforms --machine nosuch
contains "$tmp/err" "unknown machine 'nosuch'"
expect_rc 2 "$BIN" platforms --machine cuda:9
echo '{"platform": "cuda", "capability": "9.0", "colour": "green"}' >"$tmp/bad.json"
expect_rc 1 "$BIN" platforms --machine "$tmp/bad.json"
contains "$tmp/err" "field 'colour'"

ATTN_PLATFORM=h100 "$BIN" platforms --json >"$tmp/out" 2>"$tmp/err"
if py 'import json,sys; assert json.load(open(sys.argv[1]))["current"]["name"] == "h100"' "$tmp/out"; then ok; else bad "ATTN_PLATFORM=h100 not current"; fi
expect_rc 3 env ATTN_PLATFORM=nosuch "$BIN" platforms
contains "$tmp/out" "ATTN_PLATFORM='nosuch'"

# --- usage ---------------------------------------------------------------------------------------
expect_rc 0 "$BIN" platforms --help
contains "$tmp/out" "usage: attn platforms"
expect_rc 2 "$BIN" platforms --bogus
contains "$tmp/err" "unknown option '--bogus'"
expect_rc 2 "$BIN" platforms extra
expect_rc 2 "$BIN" platforms --machine

echo "cli_platforms: $((checks - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
