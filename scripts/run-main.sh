#!/usr/bin/env bash
# `make run`: libattn's main job, told as a story. First three simulated
# machines side by side (attn simulate, default scenario: an H100, an A100 and
# an MI300X each settle on an attention backend before serving a token; the
# H100 is then restarted with an explicit FLASHINFER request it cannot load);
# then the same question asked of the machine this runs on (attn select
# --explain). Usage: scripts/run-main.sh [BUILD_DIR]   (default: build)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin/attn"
if [ ! -x "$BIN" ]; then
    echo "run-main: $BIN is not built; run 'make build' first" >&2
    exit 1
fi
HTML="$BUILD/simulate.html"

cat <<'TXT'
================================================================================
 Which attention kernel runs? Decided once, at startup, by each machine's
 hardware and launch configuration - never by a request.
================================================================================
TXT
"$BIN" simulate --verify --html "$HTML"

cat <<'TXT'

================================================================================
 The same question, asked of this machine (attn select --explain): every
 candidate on its platform's priority list, with the reasons it was kept or
 rejected, for a bf16 layer with head size 128 (Llama-3.1-8B's shape).
================================================================================
TXT
set +e
"$BIN" select --explain
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "(no backend fits on this machine for that layer: exit status $rc, reasons above)"
fi
echo
echo "The side-by-side report is also in $HTML (one self-contained page)."
