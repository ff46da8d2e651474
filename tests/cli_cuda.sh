#!/usr/bin/env bash
# The CLI with libattn_cuda.so beside libattn: `attn backends --machine h100`
# shows FLASH_ATTN, TRITON_ATTN and TRITON_MLA backed by code (the rest
# descriptor only), and on a machine without a CUDA driver `attn bench
# --backend FLASH_ATTN` exits 77 with the import reason (make gpu-check
# measures it on a GPU). Skipped (77) where the module was not built.
set -u
ATTN=${ATTN_BIN:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS ATTN_CUDA_LIBRARY
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
if [ ! -f "$(dirname "$ATTN")/../libattn_cuda.so" ]; then
    echo "cli_cuda: SKIP libattn_cuda.so is not built here (nvcc was not found)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ATTN" backends --machine h100 --json >"$tmp/h100.json" || fail "backends --json"
python3 - "$tmp/h100.json" <<'PY' || fail "kernel: true for the module's three names only"
import json, sys
d = json.load(open(sys.argv[1]))
gpu = {b["name"]: b["kernel"] for b in d["backends"]
       if not (b["locator"] or "").startswith("builtin:")}
assert {n for n, k in gpu.items() if k} == {"FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA"}, gpu
assert d["simulated"] is True
PY
"$ATTN" backends --machine h100 | grep -q "^FLASH_ATTN .*descriptor only" &&
    fail "FLASH_ATTN is listed as descriptor only"
"$ATTN" backends --machine h100 | grep -q "^FLASHMLA .*(descriptor only)" ||
    fail "FLASHMLA is not listed as descriptor only"

# The same module through an explicit driver that is not there.
ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$ATTN" bench --backend FLASH_ATTN >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 77 ] || fail "bench FLASH_ATTN without a driver: exit $rc, want 77"
grep -q "the CUDA driver cannot be loaded: /nonexistent/libcuda.so.1: cannot open shared object" \
    "$tmp/out" || fail "bench FLASH_ATTN: $(cat "$tmp/out")"
# The simulated story is unchanged: serving a simulated H100 emulates FLASH_ATTN.
"$ATTN" select --machine h100 --head-size 128 >"$tmp/sel" 2>&1 || fail "select h100"
grep -q "FLASH_ATTN" "$tmp/sel" || fail "h100 no longer selects FLASH_ATTN: $(cat "$tmp/sel")"
[ "$fails" = 0 ] && echo "cli_cuda: ok"
exit $((fails > 0))
