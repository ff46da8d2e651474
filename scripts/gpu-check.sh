#!/usr/bin/env bash
# make gpu-check: the CUDA module on a machine with an NVIDIA GPU (issue 25).
#   1. builds libattn_cuda.so for this machine's GPUs (-DATTN_CUDA_ARCHS=native)
#      in its own build folder, with the CUDA tests and bench_cuda;
#   2. runs the CUDA tests: the module and its driver (test_cuda_module*),
#      the OPENCL_ATTN conformance matrix against REFERENCE and the MLA matrix
#      against REFERENCE_MLA on the GPU, each failing on its planted
#      off-by-one (test_cuda_conformance, test_cuda_mla_conformance); the
#      backends FLASH_ATTN, TRITON_ATTN and TRITON_MLA through the registry,
#      their device and the checked kernel handle against REFERENCE /
#      REFERENCE_MLA (test_cuda_backend*, test_cuda_backend_conformance;
#      cli_cuda); MLA's device projections against the host's
#      (test_cuda_mla_project);
#   3. runs bench_cuda: decode bandwidth as a fraction of the measured copy
#      bandwidth (target 0.80), prefill as a fraction of the bf16 tensor-core
#      peak (target 0.40), MLA decode bandwidth; the figures also go to
#      <build>/gpu-check.json.
# usage: scripts/gpu-check.sh [build folder, default build-gpu] [jobs]
# Exit 77 without an NVIDIA GPU; 1 when a step fails (the others still run).
set -u
build=${1:-build-gpu}
jobs=${2:-$(nproc 2>/dev/null || echo 4)}
src=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build="$src/$build" ;; esac

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: SKIP no NVIDIA GPU here (nvidia-smi -L finds none)"
    exit 77
fi
for tool in cmake nvcc; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/local/cuda/bin/$tool" ] ||
        { echo "gpu-check: $tool not found"; exit 1; }
done
echo "== GPUs"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
fails=0
step() { # name, command...
    local name=$1
    shift
    local t0=$SECONDS
    echo "== $name"
    if "$@"; then
        echo "-- $name: ok ($((SECONDS - t0)) s)"
    else
        echo "-- $name: FAILED ($((SECONDS - t0)) s)"
        fails=$((fails + 1))
    fi
}
step configure cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTN_CUDA_ARCHS=native
step build cmake --build "$build" -j"$jobs" --target attn_cuda attn_cuda_slack test_cuda_module \
    test_cuda_conformance test_cuda_mla_conformance test_cuda_mla_project test_cuda_backend \
    test_cuda_backend_conformance attn_cli bench_cuda
[ "$fails" -eq 0 ] || exit 1
step tests bash -c "cd '$build' && ctest -R '^test_cuda|^cli_cuda' --output-on-failure --no-tests=error"
step bench bash -c "'$build/bin/bench_cuda' && '$build/bin/bench_cuda' --json > '$build/gpu-check.json'"
[ -s "$build/gpu-check.json" ] && echo "figures: $build/gpu-check.json" && cat "$build/gpu-check.json"
[ "$fails" -eq 0 ] || { echo "gpu-check: $fails step(s) failed"; exit 1; }
echo "gpu-check: ok"
