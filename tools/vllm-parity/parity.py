#!/usr/bin/env python3
"""libattn against vLLM itself: the same selection cases answered by vLLM
0.32.0's own code (vllm_side.py, in a venv) and by `attn select --json`.

  parity.py [--attn BIN] [--seed N] [--count N] [--venv DIR] [--answers FILE]
            [--write-cases FILE] [--show N] [--platform cuda|rocm|xpu|cpu]

Prints agreement at three levels per platform: same backend or same error
kind; same per-candidate reason lists; byte-identical messages. vLLM's
answers are cached per (vLLM version, seed, case) in the venv folder, so a
rerun only re-runs attn. The cases come from cases.py. --write-cases writes vLLM's answers (facts only)
as the case file that tests/test_select_cases.c checks in CI. A case vLLM
gave no answer for is a failure of the tool: counted and listed, never
dropped.
"""

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from cases import make_cases  # beside this file (the script's own folder is on sys.path)

VLLM_VERSION = "0.32.0"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write_whole(path, text):
    """Writes text to a temporary file beside path and renames it over path:
    a failed write leaves an existing file as it was (tests/data is tracked)."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def machine_key(m):
    return json.dumps(m, sort_keys=True)


def machine_env(m):
    """The environment variables vLLM reads for the machine's settings."""
    env = {}
    names = {"rocm_use_aiter": "VLLM_ROCM_USE_AITER", "rocm_use_aiter_mha":
             "VLLM_ROCM_USE_AITER_MHA", "rocm_use_aiter_mla": "VLLM_ROCM_USE_AITER_MLA"}
    for k, v in m.get("settings", {}).items():
        env[names[k]] = "1" if v else "0"
    return env


# ---- vLLM's answers (cached) ------------------------------------------------


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".parity-ready")
    if os.path.exists(stamp):
        return py
    subprocess.check_call([os.path.join(HERE, "setup_venv.sh"), venv, VLLM_VERSION])
    return py


def no_answer(v):
    """vLLM gave no selection outcome (the harness failed, or vLLM raised
    something that is none); such a case is retried on the next run."""
    return v is None or "harness_error" in v or v.get("error", {}).get("kind") == "other"


def vllm_answers(py, venv, cases, cache_path=None):
    cache_path = cache_path or os.path.join(venv, "answers-%s.json" % VLLM_VERSION)
    cache = {}
    if os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    missing = [c for c in cases if no_answer(cache.get(c["id"]))]
    if missing:
        groups = {}
        for c in missing:
            m = dict(c["machine"])
            m["env"] = machine_env(m)
            # Batch invariance is process-wide in vLLM (an environment
            # variable; supports_trtllm_attention caches what it saw), so
            # each value gets processes of its own, as in a real run.
            m["env"]["VLLM_BATCH_INVARIANT"] = "1" if c["config"].get("use_batch_invariant") else "0"
            k = machine_key(m)
            groups.setdefault(k, {"key": k, "machine": m, "cases": []})["cases"].append(c)
        req = json.dumps({"groups": list(groups.values())})
        print("vLLM: answering %d new cases on %d machines..." % (len(missing), len(groups)),
              file=sys.stderr)
        p = subprocess.run([py, os.path.join(HERE, "vllm_side.py")], input=req,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stderr[-5000:])
            raise SystemExit("vllm_side.py failed")
        if p.stderr.strip():
            sys.stderr.write(p.stderr[-3000:])
        got = json.loads(p.stdout)["answers"]
        cache.update(got)
        write_whole(cache_path, json.dumps(cache))
    return {c["id"]: cache.get(c["id"]) for c in cases}


# ---- libattn's answers ------------------------------------------------------


def attn_args(attn, c):
    m, cfg = c["machine"], c["config"]
    if m["family"] == "cuda":
        spec = "cuda:" + m["cc"]
    elif m["family"] == "rocm":
        spec = "rocm:" + m["gfx"]
    else:
        spec = m["family"]
    args = [attn, "select", "--json", "--machine", spec, "--installed",
            ",".join(m.get("installed", []))]
    for k, v in m.get("settings", {}).items():
        args += ["--setting", "%s=%s" % (k, "true" if v else "false")]
    if c["backend"]:
        args += ["--backend", c["backend"]]
    args += ["--head-size", str(cfg["head_size"]), "--dtype", cfg["dtype"],
             "--kv-cache-dtype", cfg["kv_cache_dtype"] or "None", "--attn-type", cfg["attn_type"]]
    if cfg.get("block_size") is not None:
        args += ["--block-size", str(cfg["block_size"])]
    if cfg.get("num_heads") is not None:
        args += ["--num-heads", str(cfg["num_heads"])]
    if cfg.get("run_kv_cache_dtype") is not None:
        args += ["--run-kv-cache-dtype", cfg["run_kv_cache_dtype"]]
    flags = {"use_mla": "--use-mla", "use_sparse": "--use-sparse", "has_sink": "--has-sink",
             "use_mm_prefix": "--use-mm-prefix",
             "use_per_head_quant_scales": "--per-head-quant-scales",
             "has_sliding_window": "--sliding-window", "use_non_causal": "--non-causal",
             "use_batch_invariant": "--batch-invariant", "use_kv_connector": "--kv-connector",
             "use_pcp": "--pcp", "use_dcp": "--dcp",
             "use_adaptive_verification": "--adaptive-verification", "use_rswa": "--rswa"}
    for k, flag in flags.items():
        if cfg.get(k):
            args.append(flag)
    return args


def attn_answer(attn, c):
    env = dict(os.environ, ATTN_LOG="error", ATTN_SELFTEST="0")
    for k in ("ATTN_PLATFORM", "ATTN_BACKEND", "ATTN_PLUGINS", "ATTN_PLUGIN_PATH"):
        env.pop(k, None)
    p = subprocess.run(attn_args(attn, c), capture_output=True, text=True, env=env)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"cli_error": (p.stderr or p.stdout).strip(), "rc": p.returncode}


# ---- comparison --------------------------------------------------------------


def v_outcome(a):
    if a is None or "harness_error" in a:
        return ("harness", None)
    if "error" in a:
        return ("error", a["error"]["kind"])
    return ("ok", a["selected"])


def l_outcome(a):
    if "cli_error" in a:  # no JSON answer: never an agreement
        return ("cli", a["cli_error"][:80])
    if a.get("error"):
        return ("error", a["error"]["kind"])
    return ("ok", a.get("selected"))


def v_message(a):
    return a["error"]["message"] if a and "error" in a else None


def l_message(a):
    if "cli_error" in a:
        m = a["cli_error"]
        return m[len("attn select: "):] if m.startswith("attn select: ") else m
    return a["error"]["message"] if a.get("error") else None


def v_reasons(a, family=None):
    # XPU and CPU decide without per-candidate reasons (no get_valid_backends).
    if not a or a.get("candidates") is None or family in ("xpu", "cpu"):
        return None
    rows = [(x["name"], x["reasons"]) for x in a["candidates"]]
    # ROCm's get_valid_backends keeps no priority for the rejected backends,
    # so its candidates compare as a set (name -> reasons).
    return sorted(rows) if family == "rocm" else rows


def l_reasons(a, family=None):
    if "candidates" not in a:
        return []
    rows = [(x["name"], x["reasons"]) for x in a["candidates"]]
    return sorted(rows) if family == "rocm" else rows


def compare(cases, vans, lans):
    table = {}
    diffs = []
    for c in cases:
        fam = c["machine"]["family"]
        v, l = vans[c["id"]], lans[c["id"]]
        row = table.setdefault(fam, {"n": 0, "outcome": 0, "reasons": 0, "reasons_n": 0,
                                     "message": 0, "harness": 0})
        row["n"] += 1
        if no_answer(v):
            # No answer from vLLM (the harness failed, or vLLM raised what is no
            # selection outcome): a failure of the tool, counted in every
            # column's total and listed, never dropped.
            row["harness"] += 1
            row["reasons_n"] += 1
            diffs.append((c, "harness", v, l))
            continue
        same_out = v_outcome(v) == l_outcome(l)
        vr = v_reasons(v, fam)
        same_r = vr is None or vr == l_reasons(l, fam)
        same_m = v_message(v) == l_message(l)
        row["outcome"] += same_out
        if vr is not None:
            row["reasons_n"] += 1
            row["reasons"] += vr == l_reasons(l, fam)
        row["message"] += same_m and same_out
        if not (same_out and same_r and same_m):
            level = "outcome" if not same_out else ("reasons" if not same_r else "message")
            diffs.append((c, level, v, l))
    return table, diffs


def print_table(table):
    print("%-10s %6s %22s %22s %22s %8s" % ("platform", "cases", "same selection/error",
                                             "same reason lists", "identical messages",
                                             "no-answer"))
    tot = {"n": 0, "outcome": 0, "reasons": 0, "reasons_n": 0, "message": 0, "harness": 0}
    gpu = dict(tot)

    def line(name, r):
        pct = lambda a, b: "%d/%d (%.2f%%)" % (a, b, 100.0 * a / b if b else 100.0)  # noqa
        print("%-10s %6d %22s %22s %22s %8d" % (name, r["n"], pct(r["outcome"], r["n"]),
                                                 pct(r["reasons"], r["reasons_n"]),
                                                 pct(r["message"], r["n"]), r["harness"]))

    for fam in ("cuda", "rocm", "xpu", "cpu"):
        if fam not in table:
            continue
        r = table[fam]
        line(fam.upper(), r)
        for k in tot:
            tot[k] += r[k]
            if fam != "cpu":
                gpu[k] += r[k]
    line("GPU (C+R+X)", gpu)
    line("all", tot)


def show_diff(c, level, v, l):
    print("--- %s diff, case %s" % (level, c["id"]))
    print("    cmd: %s" % " ".join(attn_args("attn", c)))
    print("    vllm: %s" % json.dumps(v_outcome(v)))
    print("    attn: %s" % json.dumps(l_outcome(l)))
    if level == "reasons":
        vr, lr = v_reasons(v, c["machine"]["family"]), l_reasons(l, c["machine"]["family"])
        for i in range(max(len(vr), len(lr))):
            a = vr[i] if i < len(vr) else None
            b = lr[i] if i < len(lr) else None
            if a != b:
                print("    vllm[%d]: %s\n    attn[%d]: %s" % (i, a, i, b))
    if level in ("message", "outcome"):
        print("    vllm msg: %s" % (v_message(v) if v else v))
        print("    attn msg: %s" % l_message(l))
    if level == "harness":
        print("    %s" % (v or {}).get("trace", v))


def write_cases(path, cases, vans):
    out = []
    for c in cases:
        v = vans[c["id"]]
        if no_answer(v):
            continue
        e = {"id": c["id"], "machine": c["machine"], "backend": c["backend"],
             "config": c["config"]}
        if "error" in v:
            e["expect"] = {"error": v["error"]["kind"], "message": v["error"]["message"]}
        else:
            e["expect"] = {"selected": v["selected"]}
        out.append(e)
    write_whole(path, '{"vllm": "%s", "generator": "tools/vllm-parity/parity.py", "cases": [\n'
                % VLLM_VERSION + ",\n".join(json.dumps(e, sort_keys=True) for e in out) + "\n]}\n")
    print("wrote %d cases to %s" % (len(out), path), file=sys.stderr)


def cause_of(c, v, l):
    """A short, honest category for an outcome difference (known-diffs.txt)."""
    fam = c["machine"]["family"]
    if fam == "cpu":  # the three classes docs/vllm-parity.md names
        if v and v.get("error", {}).get("kind") == "not-supported":
            return ("deliberate (CPU): sparse MLA, which vLLM's CPU platform lacks and "
                    "libattn's CPU_MLA_SPARSE/REFERENCE_MLA_SPARSE serve")
        if c["backend"]:
            return ("deliberate (CPU): an explicit request is a hard requirement "
                    "(vLLM's CPU platform ignores it)")
        return ("deliberate (CPU): libattn validates against its own CPU kernels "
                "(vLLM's CPU platform does not validate)")
    if v and v.get("error", {}).get("kind") == "other":
        return "harness: vLLM raised %s" % v["error"]["type"]
    return "rule not yet ported (see make parity --show)"


def write_known(path, cases, vans, lans):
    rows = []
    for c in cases:
        v, l = vans[c["id"]], lans[c["id"]]
        if no_answer(v):
            continue
        if v_outcome(v) != l_outcome(l):
            rows.append("%s %s" % (c["id"], cause_of(c, v, l)))
    write_whole(path, "# Cases of vllm-0.32.0-cases.json where libattn's outcome differs from\n"
                "# vLLM's, each with its cause. Written by tools/vllm-parity/parity.py;\n"
                "# test_select_cases fails when a listed case starts agreeing.\n"
                + "\n".join(rows) + "\n")
    print("wrote %d known differences to %s" % (len(rows), path), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "attn"))
    ap.add_argument("--seed", type=int, default=27006)
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--venv", default=os.environ.get("PARITY_VENV",
                                                     os.path.join(HERE, ".venv")))
    ap.add_argument("--answers", default=os.environ.get("PARITY_ANSWERS"),
                    help="vLLM's cached answers (default: answers-<version>.json in the venv "
                    "folder; another file keeps a shared venv read-only)")
    ap.add_argument("--write-cases", metavar="FILE")
    ap.add_argument("--show", type=int, default=20, help="diffs to print (default 20)")
    ap.add_argument("--platform", help="only show diffs of this family")
    ap.add_argument("--level", help="only show diffs of this level")
    a = ap.parse_args()
    cases = make_cases(a.seed, a.count)
    py = ensure_venv(a.venv)
    vans = vllm_answers(py, a.venv, cases, a.answers)
    with ThreadPoolExecutor(max_workers=2) as ex:
        lans = dict(zip([c["id"] for c in cases], ex.map(lambda c: attn_answer(a.attn, c),
                                                         cases)))
    table, diffs = compare(cases, vans, lans)
    print("vLLM %s vs %s, seed %d, %d configurations" % (VLLM_VERSION, a.attn, a.seed,
                                                          len(cases)))
    print_table(table)
    shown = 0
    for d in diffs:
        if a.platform and d[0]["machine"]["family"] != a.platform:
            continue
        if a.level and d[1] != a.level:
            continue
        if shown >= a.show:
            break
        show_diff(*d)
        shown += 1
    if a.write_cases:
        write_cases(a.write_cases, cases, vans)
        known = a.write_cases.replace("-cases.json", "-known-diffs.txt")
        if known != a.write_cases:
            write_known(known, cases, vans, lans)


if __name__ == "__main__":
    main()
