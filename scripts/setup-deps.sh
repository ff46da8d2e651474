#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only when missing.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# clang + libclang-rt-14-dev: the libFuzzer harnesses (make fuzz) and ThreadSanitizer (make tsan)
for p in build-essential cmake pkg-config clang-format clang libclang-rt-14-dev ocl-icd-libopencl1 ocl-icd-opencl-dev pocl-opencl-icd clinfo chromium openmpi-bin libopenmpi-dev python3-venv python3-dev python3-pip; do
    have_pkg "$p" || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "setup-deps: installing ${need[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# The Python package's test (tests/python/run.sh) installs from these wheels
# without network.
bash "$(dirname "$0")/fetch-python-wheels.sh"
