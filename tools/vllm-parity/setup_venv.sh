#!/usr/bin/env bash
# Makes the parity venv: vLLM $2 from PyPI without its dependency tree (its
# GPU kernels, model loaders and server stack are not on the selection path),
# torch as vLLM pins it, and the pure-Python packages that importing vLLM's
# config and selection code needs. See README.md for why each mock is safe.
set -eu
venv=$1 version=$2
here=$(cd "$(dirname "$0")" && pwd)
python3 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install -q --upgrade "pip>=23"
"$pip" install -q --no-deps "vllm==$version"
# torch and torchvision as vLLM pins them (torchvision: model-driven backend
# modules import it).
torch=$("$venv/bin/python" - "$venv" <<'PY'
import importlib.metadata as m
for r in m.requires("vllm") or []:
    if r.startswith(("torch==", "torchvision==")):
        print(r.split(";")[0])
PY
)
# shellcheck disable=SC2086
"$pip" install -q $torch
"$pip" install -q -r "$here/requirements.txt"
touch "$venv/.parity-ready"
