#!/usr/bin/env bash
# `make run`: libattn's main job, told as a story. First three simulated
# machines side by side (attn simulate, default scenario: an H100, an A100 and
# an MI300X each settle on an attention backend before serving a token; the
# H100 is then restarted with an explicit FLASHINFER request it cannot load);
# then the same question asked of the machine this runs on (attn select
# --explain). It builds BUILD_DIR first, with the compiler's output in
# BUILD_DIR/make-run-build.log and one progress line on screen (the tail of
# the log when the build fails), so the screen holds the story.
# Usage: scripts/run-main.sh [BUILD_DIR]   (default: build; JOBS and
# CMAKE_ARGS from the environment, as the Makefile passes them)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN="$BUILD/bin/attn"
HTML="$BUILD/simulate.html"

build_quietly() {
    local log=$BUILD/make-run-build.log jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)} args
    read -r -a args <<<"${CMAKE_ARGS:-}"
    mkdir -p "$BUILD"
    (
        if [ ! -f "$BUILD/CMakeCache.txt" ]; then
            cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${args[@]}" || exit
        fi
        cmake --build "$BUILD" -j"$jobs"
    ) >"$log" 2>&1 &
    local pid=$! t0=$SECONDS pct
    [ -t 1 ] || echo "building libattn and attn (compiler output: $log)..."
    while kill -0 "$pid" 2>/dev/null; do
        if [ -t 1 ]; then
            pct=$(grep -o '^\[ *[0-9]*%\]' "$log" 2>/dev/null | tail -1 | tr -dc 0-9) || true
            printf '\rbuilding libattn and attn: %3s%%, %ds (compiler output: %s) ' "${pct:-0}" \
                $((SECONDS - t0)) "$log"
        fi
        sleep 1
    done
    local rc=0
    wait "$pid" || rc=$?
    [ -t 1 ] && printf '\r\033[K'
    if [ $rc -ne 0 ]; then
        echo "run-main: the build failed (exit $rc); the end of $log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    echo "built $BIN in $((SECONDS - t0)) s"
}
build_quietly

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
