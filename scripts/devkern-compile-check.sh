#!/usr/bin/env bash
# Compile-only check of the device kernel sources (src/backends/devkern/)
# with a compiler other than the OpenCL driver that runs them:
#   devkern-compile-check.sh nvcc     [workdir]  each *.cl as CUDA (nvcc -x cu, sm_80)
#   devkern-compile-check.sh opencl-c [workdir]  the program as OpenCL C 1.2 (clang)
# The files are compiled as they are: the same text the library embeds for
# OpenCL (cmake/devkern.cmake); files that use the dialect's math are also
# compiled with KD_FAST_MATH (the vendor-intrinsics switch). Exit 77 when
# the compiler is missing, and for nvcc in the sanitizer pass of the suite
# (ATTN_SANITIZED=1): the check reads only the kernel files, which that
# pass does not change, and nvcc costs tens of seconds on 2 cores.
set -u
kind=${1:?usage: devkern-compile-check.sh nvcc|opencl-c [workdir]}
src=${ATTN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
dir="$src/src/backends/devkern"
work=${2:-$(mktemp -d)}
mkdir -p "$work"
mapfile -t kernels < <(find "$dir" -maxdepth 1 -name '*.cl' | sort)
[ "${#kernels[@]}" -gt 0 ] || { echo "devkern: no kernel sources in $dir"; exit 1; }
fails=0
case $kind in
nvcc)
    nvcc=${NVCC:-$(command -v nvcc || true)}
    [ -z "$nvcc" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
    [ -n "$nvcc" ] || { echo "devkern_nvcc: SKIP nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)"; exit 77; }
    [ "${ATTN_SANITIZED:-0}" = 1 ] && { echo "devkern_nvcc: SKIP in the sanitizer pass (the normal pass compiles the same files)"; exit 77; }
    echo "devkern_nvcc: $("$nvcc" --version | tail -1)"
    for f in "${kernels[@]}"; do
        defs=("")
        grep -q 'kd_\(exp\|log\|tanh\)f' "$f" && defs+=("-DKD_FAST_MATH")
        for def in "${defs[@]}"; do
            out="$work/$(basename "$f" .cl)${def:+_fast}.o"
            # -Xptxas -v prints each kernel's registers and spills
            if ! "$nvcc" -x cu -arch=sm_80 $def -Werror all-warnings -Xptxas -v -I "$dir" \
                -c "$f" -o "$out" >"$work/log" 2>&1; then
                echo "FAIL: nvcc $def $(basename "$f")"; cat "$work/log"; fails=$((fails + 1))
            elif [ -z "$def" ]; then
                sed -n "s/.*Compiling entry function '\([^']*\)'.*/  \1/p; s/.*\(Used [0-9]* registers.*\)/    \1/p" "$work/log"
            fi
        done
    done
    ;;
opencl-c)
    cc=${ATTN_CLANG:-$(command -v clang-14 || command -v clang || true)}
    [ -n "$cc" ] || { echo "devkern_opencl-c: SKIP clang not found"; exit 77; }
    prog="$work/program.cl"
    cat "$dir/kd_params.h" "$dir/attn_kdialect.h" "${kernels[@]}" >"$prog"
    for def in "" "-DKD_FAST_MATH"; do
        "$cc" -x cl -cl-std=CL1.2 -Xclang -finclude-default-header $def -Wall -Wextra -Werror \
            -fsyntax-only "$prog" || { echo "FAIL: OpenCL C $def"; fails=$((fails + 1)); }
    done
    ;;
*) echo "devkern-compile-check.sh: unknown kind $kind"; exit 2 ;;
esac
[ "$fails" -eq 0 ] || exit 1
echo "devkern_$kind: ok (${#kernels[@]} kernel files)"
