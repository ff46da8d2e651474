#!/usr/bin/env bash
# `attn serve` end to end on a device whose memory is not host-visible
# (contract v2): the devtest plugin's DEVTEST_ATTN keeps its memory in a
# private arena behind handles that fault when the host touches them
# (tests/device/). The engine's KV cache and step buffers live there, K/V
# are written by the device, inputs copied in and outputs out; --verify's
# REFERENCE re-run reads a host mirror. The run completes (any direct host
# access would crash it), reports the device, and REFERENCE agrees exactly.
# A v1 plugin in the same folder would be refused: the plugin report says
# devtest loaded.
set -u
B=${ATTN_BINARY_DIR:?}
ATTN=${ATTN_BIN:?}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
dir="$B/test-devices"
[ -f "$dir/libattn_devtest.so" ] || { echo "cli_device: $dir/libattn_devtest.so not built"; exit 77; }
command -v python3 >/dev/null || { echo "cli_device: python3 not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(serve --backend DEVTEST_ATTN --layers 2 --heads 8 --kv-heads 2 --head-size 64 --dtype bf16
    --steps 6 --rate 2 --prompt-len 20:80 --output-len 2:6 --num-blocks 64 --block-size 16
    --layers-to-run all --verify --json)
ATTN_PLUGIN_PATH=$dir ATTN_PLUGINS=attn_devtest "$ATTN" "${args[@]}" >"$tmp/out.json" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "serve on the devtest device exited $rc: $(cat "$tmp/err")"
python3 - "$tmp/out.json" <<'PY' || fail "serve's JSON on the devtest device"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["groups"][0]["kernel"]
assert g["mode"] == "native" and g["name"] == "DEVTEST_ATTN", g
assert g["device"] == "devtest" and g["layers_run"] == 2, g
assert len(d["steps"]) == 6, len(d["steps"])
assert all(s["max_abs_diff"] == 0 for s in d["steps"]), [s["max_abs_diff"] for s in d["steps"]]
assert d["final"]["max_abs_diff"] == 0, d["final"]
print("cli_device: serve on devtest: %d steps, kernel %s on device %s, REFERENCE difference 0"
      % (len(d["steps"]), g["name"], g["device"]))
PY
# the same traffic on the host device: the same outputs
ATTN_PLUGIN_PATH=$dir ATTN_PLUGINS=attn_devtest "$ATTN" "${args[@]/DEVTEST_ATTN/REFERENCE}" \
    >"$tmp/host.json" 2>"$tmp/err" || fail "serve on the host device: $(cat "$tmp/err")"
python3 - "$tmp/out.json" "$tmp/host.json" <<'PY' || fail "devtest and host outputs differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sa = [s["output_checksum"] for s in a["steps"]]
sb = [s["output_checksum"] for s in b["steps"]]
assert b["groups"][0]["kernel"]["device"] == "host", b["groups"][0]["kernel"]
assert sa == sb, (sa, sb)
PY
[ "$fails" -eq 0 ] || { echo "cli_device: $fails failure(s)"; exit 1; }
echo "cli_device: ok"
