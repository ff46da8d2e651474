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
# jtrue JSON EXPR: the Python expression EXPR over d, the parsed JSON, holds
jtrue() {
    python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' \
        "$1" "$2" 2>/dev/null
}

[ -f "$PLUG/libattn_example.so" ] || { echo "FAIL: $PLUG/libattn_example.so not built" >&2; exit 1; }

# ---- loaded -----------------------------------------------------------------
out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends 2>&1); rc=$?
check "backends exits 0 (got $rc)" test "$rc" -eq 0
custom=$(printf '%s\n' "$out" | grep -E '^CUSTOM ')
check "backends: CUSTOM resolves: $custom" has "$custom" '^CUSTOM +resolves +object:CUSTOM'
check "backends: CUSTOM comes from the plugin: $custom" has "$custom" '\[plugin attn_example\]'

json=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends --json 2>/dev/null); rc=$?
check "backends --json exits 0 (got $rc)" test "$rc" -eq 0
check "backends --json: CUSTOM registered by attn_example" jtrue "$json" \
    '[(b["registered"], b["plugin"]) for b in d["backends"] if b["name"] == "CUSTOM"] == [(True, "attn_example")]'
check "backends --json: plugin report says loaded" jtrue "$json" \
    '(len(d["plugins"]) == 1 and d["plugins"][0]["path"].endswith("/libattn_example.so") and
      {k: v for k, v in d["plugins"][0].items() if k != "path"} == {"name": "attn_example",
      "loaded": True, "skipped_by_allowlist": False, "error": None, "registered": ["CUSTOM"]})'

out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM 2>&1); rc=$?
check "select --backend CUSTOM exits 0 (got $rc): $out" test "$rc" -eq 0
check "select names CUSTOM: $out" has "$out" 'CUSTOM'
out=$(ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM --json 2>/dev/null); rc=$?
check "select --backend CUSTOM --json exits 0 (got $rc)" test "$rc" -eq 0
check "select --json: selected CUSTOM" jtrue "$out" 'd["selected"] == "CUSTOM"'
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
    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" backends --json 2>/dev/null)
    check "ATTN_PLUGINS='$allow': report says skipped" jtrue "$out" \
        '[(p["loaded"], p["skipped_by_allowlist"], p["error"]) for p in d["plugins"]
          if p["name"] == "attn_example"] == [(False, True, None)]'

    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM 2>&1)
    rc=$?
    check "ATTN_PLUGINS='$allow': select --backend CUSTOM exits 3 (got $rc)" test "$rc" -eq 3
    check "ATTN_PLUGINS='$allow': must-be-registered error: $out" has "$out" \
        "Backend CUSTOM must be registered before use\. Use register_backend\(Backend\.CUSTOM, 'your\.module\.YourClass'\)"
    out=$(ATTN_PLUGINS="$allow" ATTN_PLUGIN_PATH="$PLUG" "$ATTN" select --backend CUSTOM \
        --json 2>/dev/null)
    check "ATTN_PLUGINS='$allow': select --json: nothing selected" \
        jtrue "$out" 'd["selected"] is None'
    check "ATTN_PLUGINS='$allow': select --json: error kind not-registered" \
        jtrue "$out" 'd["error"]["kind"] == "not-registered"'
done

# ---- a broken plugin next to the good one -----------------------------------
out=$(ATTN_PLUGIN_PATH="$BIN/test-plugins/bad_abi:$PLUG" "$ATTN" select --backend CUSTOM 2>&1)
rc=$?
check "bad_abi beside: select --backend CUSTOM exits 0 (got $rc)" test "$rc" -eq 0
check "bad_abi beside: failure logged: $out" has "$out" \
    'Failed to load plugin attn_test_bad_abi: ABI version mismatch'
out=$(ATTN_PLUGIN_PATH="$BIN/test-plugins/bad_abi:$PLUG" "$ATTN" backends --json 2>/dev/null)
check "bad_abi beside: report carries the reason" jtrue "$out" \
    '[(p["loaded"], p["skipped_by_allowlist"], p["error"].startswith("ABI version mismatch"))
      for p in d["plugins"] if p["name"] == "attn_test_bad_abi"] == [(False, False, True)]'

echo "cli_plugin: $((checks - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
