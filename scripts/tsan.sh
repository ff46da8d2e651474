#!/usr/bin/env bash
# `make tsan`: the threaded tests and multi-threaded `attn serve` / `attn
# bench` runs under ThreadSanitizer (clang). Any report fails the run
# (halt_on_error=1, exitcode 66).
# usage: scripts/tsan.sh BUILD_DIR JOBS
set -euo pipefail
B=${1:-build-tsan}
J=${2:-2}
tests=(test_cpu_attn_threadpool test_select_threads test_registry_api test_platform_cpu
       test_select_api test_engine_serve test_cpu_attn_conformance test_plugin_load)
cmake -S . -B "$B" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_TSAN=ON \
    -DATTN_BUILD_BENCH=OFF >/dev/null
cmake --build "$B" -j"$J" --target attn_cli "${tests[@]}"
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
export ATTN_NUM_THREADS=4
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
(cd "$B" && ctest --output-on-failure -j"$J" -R "$regex")
A="$B/bin/attn"
run() { echo "tsan: attn $*"; "$A" "$@" >/dev/null; }
# serve with the real CPU kernels on 4 pool threads, then the same emulated on a
# simulated GPU (builders + CPU_ATTN numerics), and the machine-limit warm-up of bench
run serve --machine cpu --layers 2 --heads 8 --kv-heads 2 --head-size 64 --steps 12 \
    --rate 4 --num-blocks 128 --seed 7
run serve --machine h100 --layers 2 --heads 8 --kv-heads 2 --head-size 64 --steps 8 \
    --rate 4 --num-blocks 64 --verify
run bench --batch 4 --context 256 --prefill 64 --repeats 1 --kv bf16 --buffer-mb 4
echo "tsan: clean (${#tests[@]} tests, 3 attn runs)"
