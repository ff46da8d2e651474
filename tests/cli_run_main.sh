#!/usr/bin/env bash
# `make run` (scripts/run-main.sh) keeps the build's output off the screen:
# with a stand-in cmake on PATH that prints compiler noise and makes a
# stand-in attn (it prints its arguments; cli_simulate and cli_select test
# the real story), the screen shows one line about the build and then the
# story (attn simulate --verify --html, attn select --explain), while the
# noise is in the build's log; when the build fails, the story does not run
# and the end of the log (with the compiler's error) goes to stderr, exit 1.
set -u
SRC=${ATTN_SOURCE_DIR:?}
unset CMAKE_ARGS
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/cmake" <<EOF
#!/usr/bin/env bash
# stands in for cmake: configure (-S . -B DIR) marks DIR configured; --build
# DIR prints a build's worth of noise and puts a stand-in attn there
if [ "\$1" = --build ]; then
    for i in \$(seq 1 99); do echo "[ \$i%] Building C object src/noise_\$i.c.o"; done
    if [ -n "\${FAKE_BUILD_FAIL:-}" ]; then
        echo "src/noise_42.c:7:3: error: 'boom' undeclared"
        exit 2
    fi
    mkdir -p "\$2/bin"
    printf '#!/bin/sh\necho "attn ran: \$*"\n' >"\$2/bin/attn"
    chmod +x "\$2/bin/attn"
    echo "[100%] Built target attn_cli"
else
    while [ \$# -gt 0 ]; do [ "\$1" = -B ] && touch "\$2/CMakeCache.txt"; shift; done
fi
EOF
chmod +x "$tmp/fakebin/cmake"

PATH="$tmp/fakebin:$PATH" JOBS=2 bash "$SRC/scripts/run-main.sh" "$tmp/b" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "run-main exited $rc: $(tail -5 "$tmp/err")"
grep -q "Building C object" "$tmp/out" "$tmp/err" && fail "compiler output on the screen"
[ "$(grep -c "built $tmp/b/bin/attn in [0-9]* s" "$tmp/out")" = 1 ] || fail "no build line: $(head -3 "$tmp/out")"
grep -q "Building C object src/noise_99.c.o" "$tmp/b/make-run-build.log" || fail "the log lacks the build output"
grep -q "Which attention kernel runs?" "$tmp/out" || fail "the story did not run"
grep -qx "attn ran: simulate --verify --html $tmp/b/simulate.html" "$tmp/out" ||
    fail "attn simulate did not run: $(cat "$tmp/out")"
grep -q "The same question, asked of this machine" "$tmp/out" || fail "select --explain part missing"
grep -qx "attn ran: select --explain" "$tmp/out" || fail "attn select --explain did not run"

PATH="$tmp/fakebin:$PATH" FAKE_BUILD_FAIL=1 bash "$SRC/scripts/run-main.sh" "$tmp/c" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "a failed build: run-main exited $rc, want 1"
grep -q "run-main: the build failed (exit 2); the end of $tmp/c/make-run-build.log:" "$tmp/err" ||
    fail "no failure line: $(cat "$tmp/err")"
grep -q "src/noise_42.c:7:3: error: 'boom' undeclared" "$tmp/err" || fail "the compiler error is not shown"
[ "$(grep -c "Building C object" "$tmp/err")" -le 30 ] || fail "more than the log's tail shown"
grep -q "Which attention kernel" "$tmp/out" && fail "the story ran after a failed build"

[ $fails = 0 ] && echo "cli_run_main: all passed"
exit $((fails > 0))
