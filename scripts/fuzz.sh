#!/usr/bin/env bash
# libFuzzer harnesses (fuzz/fuzz_*.c) built with clang into BUILD_DIR/fuzz.
#   scripts/fuzz.sh build BUILD_DIR JOBS          build them
#   scripts/fuzz.sh smoke BUILD_DIR JOBS SECONDS  run each for SECONDS over its
#       committed seed corpus (fuzz/corpus/<name>/, read-only: new inputs go to
#       a temporary folder), JOBS at a time; any crash or sanitizer report fails,
#       and so does a fuzzer without seeds or one that ran fewer inputs before
#       fuzzing than it has seeds (each seed must run, with the CPU's own kernels)
#   scripts/fuzz.sh run BUILD_DIR NAME SECONDS    one long run, corpus kept in
#       BUILD_DIR/fuzz-corpus/NAME; prints libFuzzer's final stats
set -euo pipefail
cmd=$1
B=${2:-build-fuzz}
if ! command -v clang >/dev/null; then
    echo "fuzz: clang is not installed (scripts/setup-deps.sh installs it)" >&2
    exit 1
fi
build() {
    cmake -S . -B "$B" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DATTN_FUZZ=ON \
        -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF >/dev/null
    local targets
    targets=$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')
    # shellcheck disable=SC2086
    cmake --build "$B" -j"$1" --target $targets
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
case "$cmd" in
build) build "${3:-2}" ;;
smoke)
    J=${3:-2}
    S=${4:-30}
    build "$J"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    names=$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')
    one() { # one NAME: 0 = clean
        local n=$1 seeds inited
        seeds=$(find "fuzz/corpus/$n" -type f 2>/dev/null | wc -l)
        if [ "$seeds" -eq 0 ]; then
            echo "fuzz-smoke: $n FAILED: no seed corpus in fuzz/corpus/$n"
            return 1
        fi
        mkdir -p "$tmp/$n"
        if "$B/fuzz/$n" -max_total_time="$S" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$tmp/$n/" "$tmp/$n" "fuzz/corpus/$n" >"$tmp/$n.log" 2>&1; then
            # libFuzzer's "#N INITED": inputs run before fuzzing (the seeds + an empty one)
            inited=$(sed -n 's/^#\([0-9]*\)[[:space:]]*INITED.*/\1/p' "$tmp/$n.log" | head -1)
            if [ -z "$inited" ] || [ "$inited" -lt "$seeds" ]; then
                echo "fuzz-smoke: $n FAILED: ran ${inited:-no} inputs before fuzzing, $seeds seeds"
                tail -20 "$tmp/$n.log"
                return 1
            fi
            echo "fuzz-smoke: $n ok ($seeds seeds, $(grep -o 'stat::number_of_executed_units: [0-9]*' "$tmp/$n.log" | grep -o '[0-9]*$') runs)"
        else
            echo "fuzz-smoke: $n FAILED"
            tail -40 "$tmp/$n.log"
            return 1
        fi
    }
    export -f one
    export B S tmp
    # shellcheck disable=SC2086
    printf '%s\n' $names | xargs -P "$J" -I{} bash -c 'one {}'
    ;;
run)
    n=$3
    S=${4:-600}
    build 2
    mkdir -p "$B/fuzz-corpus/$n" "$B/fuzz-artifacts/$n"
    "$B/fuzz/$n" -max_total_time="$S" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$B/fuzz-artifacts/$n/" \
        "$B/fuzz-corpus/$n" "fuzz/corpus/$n"
    ;;
*) echo "usage: scripts/fuzz.sh build|smoke|run ..." >&2; exit 2 ;;
esac
