#!/usr/bin/env bash
# Downloads from PyPI the wheels the Python package's test installs
# (tests/python/requirements.txt, with their dependencies) into
# .deps/python-wheels (or $ATTN_PY_WHEELS), once. Does nothing when they are
# there; skips (with a note) when python3 or pip is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${ATTN_PY_WHEELS:-$root/.deps/python-wheels}
req=$root/tests/python/requirements.txt
py=${ATTN_PYTHON3:-python3}
stamp=$dest/.complete
if [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
    exit 0
fi
if ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "setup-deps: $py has no pip; the Python package test will be skipped"
    exit 0
fi
mkdir -p "$dest"
echo "setup-deps: fetching Python wheels into $dest"
"$py" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$dest" -r "$req"
cp "$req" "$stamp"
