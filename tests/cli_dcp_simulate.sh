#!/usr/bin/env bash
# `attn simulate --dcp N`: the DCP view of a deployment (no MPI needed):
# the backend's LSE flags decide whether DCP is possible, the owner of each
# position follows vLLM's interleaving, every rank's share of a context.
set -u
ATTN=${ATTN_BIN:-attn}
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}
has() { grep -qF -- "$2" <<<"$1"; }

out=$("$ATTN" simulate --dcp 2 --machine cpu --context 1000 --dcp-interleave 4 2>&1)
rc=$?
check "simulate --dcp exits 0 (got $rc)" test $rc -eq 0
check "CPU_ATTN flags" has "$out" "CPU_ATTN: can_return_lse_for_decode yes, LSE base e, supports_dcp yes -> DCP possible"
check "interleaved owners" has "$out" "  000011110000"
# 1000 tokens, interleave 4, 2 ranks: rank 0 holds 500, rank 1 500
check "rank 0 share" has "$out" "rank 0: 500 KV tokens"
check "rank 1 share" has "$out" "rank 1: 500 KV tokens"
out=$("$ATTN" simulate --dcp 3 --machine cpu --context 10 --json 2>/dev/null)
check "json shares" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert [r["kv_tokens"] for r in d["ranks"]] == [4, 3, 3], d["ranks"]
assert d["dcp_possible"] is True and d["groups"][0]["supports_dcp"] is True
assert d["owner_of_first_positions"].startswith("012012"), d
' "$out"
"$ATTN" simulate --dcp 2 --dcp-interleave 3 --machine cpu >/dev/null 2>"${TMPDIR:-/tmp}/dcp_sim.$$"
rc=$?
err=$(cat "${TMPDIR:-/tmp}/dcp_sim.$$"); rm -f "${TMPDIR:-/tmp}/dcp_sim.$$"
check "interleave not dividing the block size: usage error (got $rc)" test $rc -eq 2
check "its message" has "$err" "must be >= 1 and divide the block size"
"$ATTN" simulate --dcp 2 default >/dev/null 2>&1
check "--dcp with a scenario is a usage error" test $? -eq 2
"$ATTN" simulate --dcp 0 >/dev/null 2>&1
check "--dcp 0 is a usage error" test $? -eq 2
exit $fail
