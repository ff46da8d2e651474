#!/usr/bin/env bash
# ctest python_package: makes a venv in the build folder, installs the
# package into it (pip install . over the libattn.so this build made, from
# the wheels scripts/setup-deps.sh fetched: no network here), runs pytest.
# Exit 77 (skipped) without python3-venv, pip or the fetched wheels, and in
# the sanitizer pass (pip builds the extension without sanitizers).
set -u
src=${ATTN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${ATTN_BINARY_DIR:?ATTN_BINARY_DIR not set}
py=${ATTN_PYTHON3:-python3}
skip() { echo "python_package: skipped: $*"; exit 77; }
[ "${ATTN_SANITIZE:-OFF}" = "ON" ] && skip "sanitizer build (the package is tested in the normal pass)"
command -v "$py" >/dev/null 2>&1 || skip "$py not found"
"$py" -c 'import venv, ensurepip' 2>/dev/null || skip "python3-venv missing (scripts/setup-deps.sh)"
wheels=${ATTN_PY_WHEELS:-$src/.deps/python-wheels}
[ -f "$wheels/.complete" ] || skip "no wheels in $wheels (run scripts/setup-deps.sh)"
lib=$(ls "$bin"/libattn.so.*.*.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "python_package: $bin has no libattn.so"; exit 1; }
venv=$bin/python-test-venv
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" || skip "python3 -m venv failed"
fi
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
"${pip[@]}" install --no-index --find-links "$wheels" -r "$src/tests/python/requirements.txt" ||
    exit 1
"${pip[@]}" install --no-index --no-build-isolation --find-links "$wheels" "$src" \
    --config-settings=cmake.define.ATTN_WHEEL_LIBRARY="$lib" --config-settings=build-dir="$bin/python-wheel-build" || exit 1
# Not from $bin: its libattn.so would shadow the package on sys.path.
mkdir -p "$bin/python-test-run" && cd "$bin/python-test-run" || exit 1
exec "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$src/tests/python"
