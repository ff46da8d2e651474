#!/usr/bin/env bash
# `attn` with the example plugin (examples/plugin, built into
# $ATTN_BINARY_DIR/plugins): with ATTN_PLUGIN_PATH pointing there, `attn
# backends` shows CUSTOM registered by the plugin and `attn select --backend
# CUSTOM` chooses it; with ATTN_PLUGINS naming another plugin (or none) the
# plugin is not loaded and selecting CUSTOM fails with the must-be-registered
# error (exit 3); a broken plugin next to it is reported and skipped.
set -u
ATTN="${ATTN_BIN:?ATTN_BIN is not set}"
BIN="${ATTN_BINARY_DIR:?ATTN_BINARY_DIR is not set}"
PLUG="$BIN/plugins"
unset ATTN_PLATFORM ATTN_PLUGINS ATTN_BACKEND ATTN_LOG
checks=0
fails=0

check() { # check DESCRIPTION COMMAND...
    checks=$((checks + 1))
    local what="$1"
    shift
    if ! "$@"; then
        fails=$((fails + 1))
        echo "FAIL: $what" >&2
    fi
}
has() { printf '%s' "$1" | grep -qE -- "$2"; }
hasnt() { ! printf '%s' "$1" | grep -qE -- "$2"; }
squash() { printf '%s' "$1" | tr -d ' \n'; } # compact JSON for grep

[ -f "$PLUG/libattn_example.so" ] || { echo "FAIL: $PLUG/libattn_example.so not built" >&2; exit 1; }

# ---- loaded -----------------------------------------------------------------
out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends 2>&1); rc=$?
check "backends exits 0 (got $rc)" test "$rc" -eq 0
custom=$(printf '%s\n' "$out" | grep -E '^CUSTOM ')
check "backends: CUSTOM resolves: $custom" has "$custom" '^CUSTOM +resolves +object:CUSTOM'
check "backends: CUSTOM comes from the plugin: $custom" has "$custom" '\[plugin attn_example\]'

out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends --json 2>&1); rc=$?
json=$(squash "$out")
check "backends --json exits 0 (got $rc)" test "$rc" -eq 0
check "backends --json: CUSTOM registered by attn_example" \
    has "$json" '"name":"CUSTOM"[^}]*"registered":true[^}]*"plugin":"attn_example"'
check "backends --json: plugin report says loaded" \
    has "$json" '"plugins":\[\{"name":"attn_example","path":"[^"]*libattn_example.so","loaded":true,"skipped_by_allowlist":false,"error":null,"registered":\["CUSTOM"\]\}\]'

out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM 2>&1); rc=$?
check "select --backend CUSTOM exits 0 (got $rc): $out" test "$rc" -eq 0
check "select names CUSTOM: $out" has "$out" 'CUSTOM'
out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM --json 2>/dev/null); rc=$?
check "select --backend CUSTOM --json exits 0 (got $rc)" test "$rc" -eq 0
check "select --json: selected CUSTOM" has "$(squash "$out")" '"selected":"CUSTOM"'
out=$(ATTN_PLUGINS="attn_example" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM \
    --json 2>/dev/null); rc=$?
check "allowlisted: select --backend CUSTOM exits 0 (got $rc)" test "$rc" -eq 0

# The engine runs the plugin's kernel (which calls REFERENCE) for real.
out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" serve --backend CUSTOM --layers 2 --heads 4 --kv-heads 2 \
    --head-size 64 --dtype fp32 --steps 4 --prompt-len 8:24 --output-len 2:4 --num-blocks 16 2>&1)
rc=$?
check "serve --backend CUSTOM exits 0 (got $rc): $out" test "$rc" -eq 0
check "serve runs the plugin kernel through REFERENCE" has "$out" 'CUSTOM kernel \(via REFERENCE'

# ---- filtered out by the allowlist ------------------------------------------
for allow in someother ""; do
    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends 2>&1); rc=$?
    custom=$(printf '%s\n' "$out" | grep -E '^CUSTOM ')
    check "ATTN_PLUGINS='$allow': backends exits 0 (got $rc)" test "$rc" -eq 0
    check "ATTN_PLUGINS='$allow': CUSTOM not registered: $custom" \
        has "$custom" '^CUSTOM +not resolvable +\(not registered\)'
    check "ATTN_PLUGINS='$allow': no plugin owner: $custom" hasnt "$custom" '\[plugin'
    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends --json 2>&1)
    check "ATTN_PLUGINS='$allow': report says skipped" has "$(squash "$out")" \
        '"name":"attn_example","path":"[^"]*","loaded":false,"skipped_by_allowlist":true,"error":null'

    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM 2>&1)
    rc=$?
    check "ATTN_PLUGINS='$allow': select --backend CUSTOM exits 3 (got $rc)" test "$rc" -eq 3
    check "ATTN_PLUGINS='$allow': must-be-registered error: $out" has "$out" \
        "Backend CUSTOM must be registered before use\. Use register_backend\(Backend\.CUSTOM, 'your\.module\.YourClass'\)"
    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM \
        --json 2>/dev/null)
    check "ATTN_PLUGINS='$allow': select --json: nothing selected" \
        has "$(squash "$out")" '"selected":null'
    check "ATTN_PLUGINS='$allow': select --json: error kind not-registered" \
        has "$(squash "$out")" '"error":\{"kind":"not-registered"'
done

# ---- a broken plugin next to the good one -----------------------------------
out=$(ATTN_PLUGIN_PATH="$BIN/test-plugins/bad_abi:$PLUG" "$ATTN" select --backend CUSTOM 2>&1)
rc=$?
check "bad_abi beside: select --backend CUSTOM exits 0 (got $rc)" test "$rc" -eq 0
check "bad_abi beside: failure logged: $out" has "$out" \
    'Failed to load plugin attn_test_bad_abi: ABI version mismatch'
out=$(ATTN_PLUGIN_PATH="$BIN/test-plugins/bad_abi:$PLUG" "$ATTN" backends --json 2>/dev/null)
check "bad_abi beside: report carries the reason" has "$(squash "$out")" \
    '"name":"attn_test_bad_abi","path":"[^"]*","loaded":false,"skipped_by_allowlist":false,"error":"ABIversionmismatch'

echo "cli_plugin: $((checks - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
