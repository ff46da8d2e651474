#!/usr/bin/env bash
# `attn backends`: docs/backends.md is exactly what `attn backends
# --markdown` prints (fails when stale: `make docs` regenerates it), its
# flag tables are what the JSON says on every catalog machine, the JSON lists every registry name
# with locator and resolvability on simulated and real machines, and the
# text output says why a backend does not resolve.
set -u
ATTN=${ATTN_BIN:?}
SRC=${ATTN_SOURCE_DIR:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS
export ATTN_LOG=error
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ATTN" backends --markdown >"$tmp/backends.md" || fail "attn backends --markdown failed"
if ! diff -u "$SRC/docs/backends.md" "$tmp/backends.md" >"$tmp/diff"; then
    head -40 "$tmp/diff" >&2
    fail "docs/backends.md is stale: regenerate with 'make docs'"
fi
# The matrix does not depend on the machine or on plugins.
ATTN_PLATFORM=mi300x "$ATTN" backends --markdown | cmp -s - "$tmp/backends.md" ||
    fail "--markdown depends on ATTN_PLATFORM"

"$ATTN" backends --machine h100 --json >"$tmp/h100.json" || fail "--json h100 failed"
"$ATTN" backends --machine h100 --installed fa2 --json >"$tmp/h100fa2.json" || fail "--json fa2"
"$ATTN" backends --json >"$tmp/local.json" || fail "--json (this machine) failed"
# libattn_cuda.so beside libattn (built where nvcc was found): FLASH_ATTN,
# TRITON_ATTN and TRITON_MLA are backed by its code.
cuda=0
[ -f "$(dirname "$ATTN")/../libattn_cuda.so" ] && cuda=1
python3 - "$tmp/h100.json" "$tmp/h100fa2.json" "$tmp/local.json" "$cuda" <<'PY' || fail "backends JSON"
import json, sys
h100, fa2, local = (json.load(open(p)) for p in sys.argv[1:4])
cuda = sys.argv[4] == "1"
cuda_names = {"FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA"}
names = [b["name"] for b in h100["backends"]]
head = ["FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_FLASH_ATTN"]
assert names[:5] == head, names[:5]
for n in ["CPU_ATTN", "TURBOQUANT", "CUSTOM", "TRITON_FLASHINFER", "TRITON_FLASH_ATTN", "CPU_MLA",
          "REFERENCE", "NO_ATTENTION", "TORCH_SDPA"]:
    assert n in names, n
by = {b["name"]: b for b in h100["backends"]}
assert h100["machine"] == "h100" and h100["simulated"] is True
assert by["FLASH_ATTN"]["resolves"]
for b in h100["backends"]:  # the simulated machine still emulates: only the code's presence shows
    code = (b["locator"] or "").startswith("builtin:") or (cuda and b["name"] in cuda_names)
    assert b["kernel"] is code, (b["name"], b["kernel"])
assert by["FLASH_ATTN"]["locator"] == "libattn_cuda.so:attn_backend_flash_attn"
assert by["FLASH_ATTN"]["capabilities"]["dtypes"] == "fp16, bf16"
assert by["FLASHINFER"]["resolves"]
assert not by["NO_ATTENTION"]["resolves"]
assert by["NO_ATTENTION"]["error"].startswith("ImportError: No module named")
assert by["CUSTOM"]["registered"] is False and by["CUSTOM"]["locator"] is None
assert "must be registered before use" in by["CUSTOM"]["error"]
assert by["FLASHMLA"]["capabilities"]["preferred_block_size"] == 64
assert by["ROCM_AITER_FA"]["capabilities"]["display_name"] == "FLASH_ATTN"
fby = {b["name"]: b for b in fa2["backends"]}
assert not fby["FLASHINFER"]["resolves"]
assert fby["FLASHINFER"]["error"].startswith("ImportError: No module named flashinfer"), fby["FLASHINFER"]
assert fby["FLASHINFER_MLA"]["capabilities"] is not None  # the catalog still describes it
lby = {b["name"]: b for b in local["backends"]}
if not local["simulated"] and not cuda:
    # The real machine: GPU code lives in modules this build does not ship.
    assert not lby["FLASH_ATTN"]["resolves"]
    assert "No module named libattn_cuda.so" in lby["FLASH_ATTN"]["error"], lby["FLASH_ATTN"]
elif not local["simulated"] and not lby["FLASH_ATTN"]["resolves"]:
    # The module is there; without a CUDA driver its import fails.
    for n in cuda_names:
        assert lby[n]["error"].startswith("ImportError: libattn_cuda.so: the CUDA driver cannot "
                                          "be loaded: "), lby[n]
        assert lby[n]["kernel"] is True, lby[n]
for n in ["CPU_ATTN", "CPU_MLA", "REFERENCE"]:
    b = lby[n]
    assert b["locator"] == "builtin:" + n
    if not b["resolves"]:
        assert b["error"] == "ImportError: libattn was built without the %s kernels" % n, b
print("backends JSON ok")
PY

# docs/backends.md, `attn backends --json` and (tests/test_select_facts.c) the
# selector agree: the flags table is every backend's static statement, the
# per-machine table every catalog machine's on_machine answer.
"$ATTN" platforms --machine cpu --json >"$tmp/plat.json" || fail "attn platforms --json"
for m in $(python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(open(sys.argv[1]))["catalog"]))' "$tmp/plat.json"); do
    "$ATTN" backends --machine "$m" --json >"$tmp/m-$m.json" || fail "--json $m"
done
python3 - "$SRC/docs/backends.md" "$tmp/plat.json" "$tmp" <<'PY' || fail "docs/backends.md and the JSON disagree"
import json, sys
md = open(sys.argv[1]).read().split("\n")
catalog = [c["name"] for c in json.load(open(sys.argv[2]))["catalog"]]
def table(title):
    i = md.index(title)
    while not md[i].startswith("|"): i += 1
    head = [c.strip() for c in md[i].strip("|").split("|")]
    rows = []
    i += 2
    while i < len(md) and md[i].startswith("|"):
        rows.append([c.strip() for c in md[i].strip("|").split("|")]); i += 1
    return head, rows
def bname(cell): return cell.split("`")[1]
head, rows = table("## Flags")
flags = head[3:-1]
assert "mm_prefix" in flags and "sliding_window" in flags and "adaptive_verification" in flags, flags
mhead, mrows = table("## Flags that depend on the machine")
assert mhead[2:] == catalog, (mhead, catalog)
per = {(bname(r[0]), r[1]): dict(zip(mhead[2:], r[2:])) for r in mrows}
seen = 0
for m in catalog:
    by = {b["name"]: b for b in json.load(open("%s/m-%s.json" % (sys.argv[3], m)))["backends"]}
    for r in rows:
        b = by[bname(r[0])]
        for f, cell in zip(flags, r[3:-1]):
            assert b["capabilities"][f] == cell, (m, b["name"], f, cell, b["capabilities"][f])
            on = b["on_machine"][f]
            if cell == "yes *":
                assert per[(b["name"], f)][m] == ("yes" if on else "no"), (m, b["name"], f)
            else:
                assert on == (cell == "yes"), (m, b["name"], f, cell, on)
            seen += 1
assert len(per) == sum(r[3:-1].count("yes *") for r in rows), "per-machine rows"
fa = json.load(open("%s/m-b200.json" % sys.argv[3]))
fa = {b["name"]: b for b in fa["backends"]}["FLASH_ATTN"]
assert fa["capabilities"]["mm_prefix"] == "yes *" and fa["on_machine"]["mm_prefix"] is True, fa
print("docs = JSON: %d backend x flag x machine cells" % seen)
PY

"$ATTN" backends --machine h100 --installed fa2 >"$tmp/text" || fail "text output failed"
grep -q "^FLASHINFER .*not resolvable" "$tmp/text" || fail "text lacks FLASHINFER not resolvable"
grep -qF "why: ImportError: No module named flashinfer" "$tmp/text" || fail "text lacks the why"
"$ATTN" backends --bogus >/dev/null 2>&1; [ $? = 2 ] || fail "unknown option not 2"
"$ATTN" backends --json --markdown >/dev/null 2>&1; [ $? = 2 ] || fail "--json --markdown not 2"
"$ATTN" backends --machine nowhere >/dev/null 2>&1; [ $? = 2 ] || fail "bad machine not 2"

[ $fails = 0 ] && echo "cli_backends: all checks passed"
exit $((fails > 0))
