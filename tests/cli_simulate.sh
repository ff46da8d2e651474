#!/usr/bin/env bash
# `attn simulate` on the default scenario, read as JSON: the three machines'
# selections (H100 and A100 -> FLASH_ATTN; MI300X -> ROCM_ATTN for both of
# Gemma-2's KV groups: ROCm's list starts with ROCM_ATTN, which takes head 256,
# bf16 and auto KV, and neither the sliding window nor the soft-cap is a
# reason against it), the H100 restart with FLASHINFER failing at startup with
# vLLM's message and admitting nothing, and the A100 and MI300X advancing by
# the remaining steps. Plus the text report, --steps, a custom scenario with
# an inline machine and per-kind overrides, and scenario errors naming fields.
set -euo pipefail
BIN=${ATTN_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" simulate --json >"$tmp/run.json" || fail "attn simulate --json exited $?"
python3 - "$tmp/run.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
stages = {s["stage"]: s for s in doc["stages"]}
assert sorted(stages) == [1, 2, 3, 4, 5], sorted(stages)
steps = doc["scenario"]["steps"]
show = doc["scenario"]["traffic"]["show_steps"]

def machine(stage, label):
    for m in stage["machines"]:
        if m["label"] == label:
            return m
    raise AssertionError("no machine " + label)

# stage 1: nothing decided
for m in stages[1]["machines"]:
    assert m["decided"] is False, m

# stage 2: each platform's own answer
p = machine(stages[2], "h100-0")["platform"]
assert p["platform"] == "cuda" and p["capability"] == "9.0", p
assert "flashinfer" not in p["installed"] and {"fa2", "fa3", "fa4"} <= set(p["installed"]), p
assert machine(stages[2], "a100-0")["platform"]["capability"] == "8.0"
m = machine(stages[2], "mi300x-0")
assert m["platform"]["platform"] == "rocm" and m["platform"]["capability"].startswith("gfx942")
assert m["priorities"][0]["priorities"][0] == "ROCM_ATTN", m["priorities"]

# stage 3: the selections
def groups(label):
    return machine(stages[3], label)["groups"]
h = groups("h100-0")
assert [g["selected"] for g in h] == ["FLASH_ATTN"], h
assert h[0]["head_size"] == 128 and h[0]["locator"], h[0]
a = groups("a100-0")
assert [g["selected"] for g in a] == ["FLASH_ATTN"], a
assert a[0]["head_size"] == 96
g = groups("mi300x-0")
assert len(g) == 2, g
assert [x["kind"] for x in g] == ["sliding_window", "full_attention"], g
assert [x["selected"] for x in g] == ["ROCM_ATTN", "ROCM_ATTN"], g
assert all(x["head_size"] == 256 for x in g)
# every rejected candidate carries its reasons
for label in ("h100-0", "a100-0", "mi300x-0"):
    for grp in groups(label):
        for c in grp["candidates"]:
            assert c["valid"] or c["reasons"], (label, c)
fi = [c for c in h[0]["candidates"] if c["name"] == "FLASHINFER"][0]
assert not fi["valid"] and fi["reasons"] == ["ModuleNotFoundError: No module named 'flashinfer'"], fi

# stage 4: metadata built fresh each step, consistent with its own batch
for m in stages[4]["machines"]:
    assert len(m["steps"]) == show, (m["label"], len(m["steps"]))
    for st in m["steps"]:
        c = st["built"]["common"]
        qsl, sl = c["query_start_loc"], c["seq_lens"]
        assert len(qsl) == c["num_reqs"] + 1 and len(sl) == c["num_reqs"], c
        assert qsl[0] == 0 and qsl[-1] == c["num_actual_tokens"], c
        assert c["slot_mapping"]["count"] == c["num_actual_tokens"], c
        assert st["built"]["groups"], st
        assert "emulated" in st["built"]["attention"]["text"], st["built"]["attention"]
assert stages[4]["emulated"] is True

# stage 5: the restart fails at startup with the exact message
ev = stages[5]["events"]
assert len(ev) == 1, ev
e = ev[0]
assert e["machine"] == "h100-0" and e["action"] == "restart" and e["ok"] is False, e
prefix = ("Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
          "Reason: [ModuleNotFoundError: No module named 'flashinfer']")
su = e["startup"]
assert su["ok"] is False and su["error"].startswith(prefix), su["error"]
assert su["groups"][0]["requested"] == "FLASHINFER"
assert su["groups"][0]["message"].startswith(prefix), su["groups"][0]["message"]
assert su["groups"][0]["message"] == prefix, su["groups"][0]["message"]
# ... before admitting a request, and no step after it
assert e["admitted_after"] == 0 and e["steps_after"] == 0, e
remaining = steps - e["at_step"]
assert e["remaining_steps"] == remaining > 0
others = {o["label"]: o for o in e["others"]}
assert set(others) == {"a100-0", "mi300x-0"}, others
for o in others.values():
    assert o["advanced"] == remaining, o
    assert o["steps_at_end"] == steps, o
    assert o["state"] == "serving", o

# closing table
summ = {s["machine"]: s for s in doc["summary"]}
assert summ["h100-0"]["serving"] is False and "failed at startup" in summ["h100-0"]["state"]
assert summ["h100-0"]["steps_served"] == e["at_step"]
assert summ["a100-0"]["steps_served"] == steps and summ["mi300x-0"]["steps_served"] == steps
assert summ["a100-0"]["backend"] == "FLASH_ATTN" and summ["mi300x-0"]["backend"] == "ROCM_ATTN"
assert summ["mi300x-0"]["head_size"] == "256" and summ["a100-0"]["head_size"] == "96"
PY

# the text report tells the same story in stages
"$BIN" simulate >"$tmp/run.txt"
for s in "Stage 1." "Stage 2." "Stage 3." "Stage 4." "Stage 5." "Summary"; do
    grep -q "$s" "$tmp/run.txt" || fail "report lacks '$s'"
done
grep -qF "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']" \
    "$tmp/run.txt" || fail "report lacks the failure message"
grep -q "emulated" "$tmp/run.txt" || fail "report does not say the math is emulated"

# --steps changes the run; an event outside it is an error
"$BIN" simulate --json --steps 12 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["scenario"]["steps"] == 12
o = d["stages"][4]["events"][0]["others"]
assert all(x["advanced"] == 4 for x in o), o'
set +e
err=$("$BIN" simulate --steps 5 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "--steps 5 (event at 8) should be a usage error, got $rc"
grep -q "outside the run" <<<"$err" || fail "--steps error: $err"

# a scenario of one's own: inline machine spec, per-kind override, stop event
cat >"$tmp/mine.json" <<'J'
{
  "machines": [
    {"label": "ada", "machine": {"platform": "cuda", "capability": "8.9", "device_name": "L4"}},
    {"label": "cpu0", "machine": "cpu"}
  ],
  "deployments": [
    {"machine": "ada", "model": "gpt-oss-20b",
     "backend_per_kind": {"sliding_window": "FLEX_ATTENTION"}},
    {"machine": "cpu0", "model": "llama-3.1-8b", "traffic": {"rate": 0.5}}
  ],
  "traffic": {"steps": 4, "show_steps": 1, "seed": 3},
  "verify": true,
  "events": [{"at_step": 2, "machine": "cpu0", "action": "stop"}]
}
J
"$BIN" simulate --json "$tmp/mine.json" >"$tmp/mine.out" || fail "custom scenario exited $?"
python3 - "$tmp/mine.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
st = {s["stage"]: s for s in d["stages"]}
ada = [m for m in st[3]["machines"] if m["label"] == "ada"][0]
g0, g1 = ada["groups"]
assert g0["kind"] == "sliding_window" and g0["requested"] == "FLEX_ATTENTION", g0
# FLEX_ATTENTION has no sinks: an explicit request that does not fit fails
assert g0["ok"] is False and "attention sinks not supported" in g0["message"], g0
assert g1["requested"] is None, g1
assert ada["ok"] is False
cpu = [m for m in st[4]["machines"] if m["label"] == "cpu0"][0]
assert cpu["steps"], cpu
at = cpu["steps"][0]["built"]["attention"]
assert at["verified"] is True and at["output_finite"] is True, at
assert at["max_abs_diff_vs_reference"] < 0.05, at
ev = st[5]["events"][0]
assert ev["machine"] == "cpu0" and ev["action"] == "stop" and ev["steps_after"] == 0, ev
summ = {s["machine"]: s for s in d["summary"]}
assert summ["cpu0"]["steps_served"] == 2 and summ["ada"]["steps_served"] == 0, summ
PY

# scenario errors name the field
bad() {  # bad JSON-TEXT EXPECTED-SUBSTRING
    printf '%s' "$1" >"$tmp/bad.json"
    set +e
    err=$("$BIN" simulate "$tmp/bad.json" 2>&1); rc=$?
    set -e
    [ $rc -eq 2 ] || fail "bad scenario accepted (rc $rc): $1"
    grep -qF "$2" <<<"$err" || fail "error '$err' does not name '$2'"
}
M='"machines":[{"label":"a","machine":"a100"}]'
D='"deployments":[{"machine":"a","model":"llama-3.1-8b"}]'
bad "{$M}" "'deployments'"
bad "{$M,$D,\"extra\":1}" "'extra'"
bad "{\"machines\":[{\"label\":\"a\"}],$D}" "'machines[0].machine'"
bad "{\"machines\":[{\"label\":\"a\",\"machine\":\"a100\"},{\"label\":\"a\",\"machine\":\"h100\"}],$D}" "'machines[1].label'"
bad "{$M,\"deployments\":[{\"machine\":\"b\",\"model\":\"x\"}]}" "'deployments[0].machine'"
bad "{$M,$D,\"traffic\":{\"steps\":\"10\"}}" "'traffic.steps'"
bad "{$M,$D,\"traffic\":{\"rate\":-1}}" "'traffic.rate'"
bad "{$M,$D,\"events\":[{\"at_step\":99,\"machine\":\"a\",\"action\":\"restart\"}]}" "'events[0].at_step'"
bad "{$M,$D,\"events\":[{\"at_step\":1,\"machine\":\"a\",\"action\":\"explode\"}]}" "'events[0].action'"
bad "{$M,\"deployments\":[{\"machine\":\"a\",\"model\":\"m\",\"kv_cache_dtype\":\"int3\"}]}" "'deployments[0].kv_cache_dtype'"
bad "{$M,\"deployments\":[{\"machine\":\"a\",\"model\":\"m\",\"backend_per_kind\":{\"weird\":\"X\"}}]}" "'deployments[0].backend_per_kind.weird'"
bad "{\"machines\":[{\"label\":\"a\",\"machine\":\"a100\",\"installed\":[\"fa9\"]}],$D}" "'machines[0].installed[0]'"
bad "[1]" "JSON object"
set +e
"$BIN" simulate no-such-scenario >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "unknown scenario 'no-such-scenario'" "$tmp/err" || fail "unknown scenario"
echo "cli_simulate: ok"
