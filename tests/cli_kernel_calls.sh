#!/usr/bin/env bash
# One way to call a kernel (attn/kernel.h, docs/design/contract-v2.md): no
# source outside libattn's gate calls a kernel's entry points directly. The
# gate is src/selftest/ (the checked handle and the known-answer test it
# runs); kernels' own code is src/backends/ (an entry point calling its own
# family's helpers, the MLA whole-batch helper only the handle calls) and
# the test kernels under tests/; the example plugin's kernel delegates to
# REFERENCE's inside its own forward. Everything else - the engine, DCP,
# Python, the benches, the tools, the harness, fuzzers - goes through
# attn_kernel_*. No public header declares another kernel-calling entry
# point, and libattn.so exports none.
set -u
SRC=${ATTN_SOURCE_DIR:?}
B=${ATTN_BINARY_DIR:?}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
cd "$SRC" || exit 1
pattern='(->|\.)[[:space:]]*(forward|forward_mqa|forward_mha)[[:space:]]*\('
hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' \
    src sim tools python/src bench fuzz examples |
    grep -vE '^(src/selftest/|src/backends/|examples/plugin/attn_example\.c:)')
[ -z "$hits" ] || fail "kernel entry points called outside the checked handle:
$hits"
# the callers named by issue 24 use the handle
for d in src/engine src/cp python/src bench tools/attn sim/harness; do
    grep -rqE 'attn_kernel_(forward|forward_mqa|forward_mha|mla_forward)\(' "$d" ||
        fail "$d calls no kernel through attn/kernel.h"
done
# v1's unchecked entry points are gone from the API and the library
if grep -nE 'attn_backend_forward(_mqa|_mha)?\(|attn_mla_forward\(' include/attn/*.h; then
    fail "a public header declares an unchecked kernel entry point"
fi
lib=$(ls "$B"/libattn.so.[0-9]* 2>/dev/null | head -1)
if [ -n "$lib" ] && command -v nm >/dev/null; then
    bad=$(nm -D --defined-only "$lib" | awk '{print $3}' |
        grep -E '^attn_backend_forward(_mqa|_mha)?$|^attn_mla_forward$')
    [ -z "$bad" ] || fail "libattn.so exports $bad"
fi
[ "$fails" -eq 0 ] || { echo "cli_kernel_calls: $fails failure(s)"; exit 1; }
echo "cli_kernel_calls: ok"
