#!/usr/bin/env bash
# `make test` (and `make san`): every stage runs whatever the stages before
# it did, then one summary names every failure, so a newcomer sees all of
# them at once:
#   normal      configure (once) and build $BUILD (Release), ctest
#   sanitizer   configure and build $BUILD_SAN (Debug, ASan + UBSan), ctest
#               with the sanitizers stopping at the first report
#   fuzz-smoke  the libFuzzer harnesses over their seed corpora, $FUZZ_SECONDS
#               each (scripts/fuzz.sh smoke, in $BUILD_FUZZ)
# Each stage prints as it always did and keeps its output in
# $TEST_LOGS/<stage>.log (default build-test-logs). Exit 0 only when every
# stage passed.
# Usage: scripts/test-all.sh [STAGE...]   (default: all three, in that order)
# Environment: BUILD BUILD_SAN BUILD_FUZZ JOBS FUZZ_SECONDS CMAKE_ARGS
# (the Makefile's variables; CMAKE_ARGS is split on spaces), TEST_LOGS.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
BUILD_SAN=${BUILD_SAN:-build-san}
BUILD_FUZZ=${BUILD_FUZZ:-build-fuzz}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
LOGS=${TEST_LOGS:-build-test-logs}
read -r -a cmake_args <<<"${CMAKE_ARGS:-}"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(normal sanitizer fuzz-smoke)
for s in "${stages[@]}"; do
    case "$s" in
    normal | sanitizer | fuzz-smoke) ;;
    *) echo "test-all: unknown stage '$s' (normal, sanitizer, fuzz-smoke)" >&2; exit 2 ;;
    esac
done
mkdir -p "$LOGS" || exit 1

# Per stage: result, counts, seconds, and the names of what failed.
declare -A result tests failed skipped secs names

banner() { printf '\n==== make test: %s ====\n' "$1"; }

# ctest_stage STAGE DIR [ENV=VALUE...]: ctest in DIR, counts from its summary
# line, failed names from Testing/Temporary/LastTestsFailed.log.
ctest_stage() {
    local st=$1 dir=$2 log=$LOGS/$1.log
    shift 2
    local lf=$dir/Testing/Temporary/LastTestsFailed.log
    rm -f "$lf"
    (cd "$dir" && env "$@" ctest --output-on-failure -j"$JOBS") 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    local line
    line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
    tests[$st]=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    failed[$st]=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    skipped[$st]=$(sed -n '/^The following tests did not run:/,/^$/p' "$log" | grep -c '(Skipped)')
    [ -f "$lf" ] && names[$st]=$(cut -d: -f2- "$lf" | tr '\n' ' ')
    if [ -z "$line" ]; then
        result[$st]="ctest failed"
        names[$st]="ctest exited $rc before its summary (see $log)"
    elif [ "$rc" -ne 0 ]; then
        result[$st]=FAILED
    else
        result[$st]=passed
    fi
}

# build_stage STAGE DIR CONFIGURE-ARGS...: configure (always for the
# sanitizer build, as `make san` did; once for the normal one) and build.
build_stage() {
    local st=$1 dir=$2 log=$LOGS/$1.log
    shift 2
    if [ "$st" = sanitizer ] || [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S . -B "$dir" "$@" "${cmake_args[@]}" 2>&1 | tee -a "$log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
    fi
    cmake --build "$dir" -j"$JOBS" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ]
}

build_failed() { # STAGE
    result[$1]="build failed"
    names[$1]=$(grep -E 'error:|Error [0-9]+|CMake Error' "$LOGS/$1.log" | head -3 | tr '\n' ' ')
}

run_normal() {
    if build_stage normal "$BUILD" -DCMAKE_BUILD_TYPE=Release; then
        ctest_stage normal "$BUILD"
    else
        build_failed normal
    fi
}

run_sanitizer() {
    if build_stage sanitizer "$BUILD_SAN" -DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON; then
        ctest_stage sanitizer "$BUILD_SAN" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ATTN_SANITIZED=1
    else
        build_failed sanitizer
    fi
}

run_fuzz_smoke() {
    local log=$LOGS/fuzz-smoke.log
    bash scripts/fuzz.sh smoke "$BUILD_FUZZ" "$JOBS" "$FUZZ_SECONDS" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    local ok bad
    ok=$(grep -cE '^fuzz-smoke: [a-z_0-9]+ ok' "$log")
    bad=$(grep -E '^fuzz-smoke: [a-z_0-9]+ FAILED' "$log" | awk '{print $2}' | tr '\n' ' ')
    tests[fuzz-smoke]=$((ok + $(wc -w <<<"$bad")))
    failed[fuzz-smoke]=$(wc -w <<<"$bad")
    names[fuzz-smoke]=$bad
    if [ "$rc" -eq 0 ]; then
        result[fuzz-smoke]=passed
    elif [ -n "$bad" ]; then
        result[fuzz-smoke]=FAILED
    else
        result[fuzz-smoke]="build failed"
        names[fuzz-smoke]=$(grep -E 'error:|fuzz:' "$log" | head -3 | tr '\n' ' ')
    fi
}

for s in "${stages[@]}"; do
    banner "$s"
    : >"$LOGS/$s.log"
    t0=$SECONDS
    "run_${s//-/_}"
    secs[$s]=$((SECONDS - t0))
done

n_bad=0
printf '\n==== make test: summary ====\n'
printf '%-11s %-13s %6s %7s %8s %7s\n' stage result tests failed skipped time
for s in "${stages[@]}"; do
    printf '%-11s %-13s %6s %7s %8s %6ss\n' "$s" "${result[$s]}" "${tests[$s]:--}" \
        "${failed[$s]:--}" "${skipped[$s]:--}" "${secs[$s]}"
    [ "${result[$s]}" = passed ] || n_bad=$((n_bad + 1))
done
if [ $n_bad -gt 0 ]; then
    printf '\nfailures:\n'
    for s in "${stages[@]}"; do
        [ "${result[$s]}" = passed ] || printf '  %-11s %s\n' "$s" "${names[$s]:-}"
    done
fi
printf '\nlogs:'
for s in "${stages[@]}"; do printf ' %s/%s.log' "$LOGS" "$s"; done
printf '\n'
if [ $n_bad -gt 0 ]; then
    echo "make test: $n_bad of ${#stages[@]} stage(s) failed"
    exit 1
fi
echo "make test: all ${#stages[@]} stage(s) passed"
