"""make vllm-plugin-test: a small Llama (config.json written here, dummy
weights) run end to end in vLLM twice, with vLLM's own CPU_ATTN and with
libattn selected by --attention-backend CUSTOM (the plugin), in separate
processes. Checks that the libattn run really used the plugin, that greedy
tokens agree and that the logprobs of every step agree within tolerance,
then prints vLLM's per-step decode time for both on a few batch sizes and
context lengths (figures, no timed assertion). A control run with
libattn's attention output zeroed must disagree, so the comparison can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 2048,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    "tie_word_embeddings": False,
}
TOL = 2e-3  # logprob agreement (fp32 model, different summation orders)
SHAPES = [(1, 128), (1, 1024), (8, 128), (8, 512)]  # (batch, context)
DECODE = 8
REPEATS = 3


def _zero_attention() -> None:
    """Negative control: libattn's attention output replaced by zeros, which
    the comparison must notice (so it can fail)."""
    from libattn.vllm_plugin import backend as b

    fwd = b.LibattnAttentionImpl.forward

    def zeroed(self, *a, **kw):
        out = fwd(self, *a, **kw)
        out.zero_()
        return out

    b.LibattnAttentionImpl.forward = zeroed


def child(backend: str, model_dir: str, out_path: str) -> None:
    from vllm import LLM, SamplingParams

    control = backend == "CUSTOM_ZEROED"
    if control:
        _zero_attention()
        backend = "CUSTOM"

    kw = dict(model=model_dir, load_format="dummy", skip_tokenizer_init=True, dtype="float32",
              max_model_len=2048, enforce_eager=True, seed=0, max_num_seqs=32,
              max_num_batched_tokens=8192)
    if backend != "CPU_ATTN":
        kw["attention_backend"] = backend
    llm = LLM(**kw)
    prompts = [{"prompt_token_ids": [(7 * i + 3 * r) % 2000 + 10 for i in range(n)]}
               for r, n in enumerate((5, 37, 130, 300))]
    sp = SamplingParams(max_tokens=12, temperature=0.0, logprobs=5, detokenize=False,
                        ignore_eos=True)
    res = []
    for o in llm.generate(prompts, sp):
        c = o.outputs[0]
        res.append({"tokens": list(c.token_ids),
                    "logprobs": [{str(t): lp.logprob for t, lp in d.items()} for d in c.logprobs]})
    timing = []
    for bs, ctx in [] if control else SHAPES:
        ps = [{"prompt_token_ids": [(11 * i + r) % 2000 + 10 for i in range(ctx)]}
              for r in range(bs)]
        t = {}
        for n in (1, DECODE + 1):
            p = SamplingParams(max_tokens=n, temperature=0.0, detokenize=False, ignore_eos=True)
            llm.generate(ps, p, use_tqdm=False)  # warm
            runs = []
            for _ in range(REPEATS):  # the fastest of a few: least disturbed by other load
                t0 = time.perf_counter()
                llm.generate(ps, p, use_tqdm=False)
                runs.append(time.perf_counter() - t0)
            t[n] = min(runs)
        timing.append({"batch": bs, "context": ctx,
                       "ms_per_step": 1e3 * (t[DECODE + 1] - t[1]) / DECODE})
    plugin = sys.modules.get("libattn.vllm_plugin.backend")
    calls = dict(plugin.STATS) if plugin else {"forward": 0, "kv_update": 0}
    with open(out_path, "w") as f:
        json.dump({"calls": calls, "results": res, "timing": timing}, f)


def _compare(a, b):
    worst, same = 0.0, True
    for ra, rb in zip(a["results"], b["results"]):
        same &= ra["tokens"] == rb["tokens"]
        for da, db in zip(ra["logprobs"], rb["logprobs"]):
            for t in set(da) & set(db):
                worst = max(worst, abs(da[t] - db[t]))
    return same, worst


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        runs = {}
        for backend in ("CPU_ATTN", "CUSTOM", "CUSTOM_ZEROED"):
            out = os.path.join(d, f"{backend}.json")
            env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
            r = subprocess.run([sys.executable, __file__, "child", backend, d, out], env=env)
            if r.returncode != 0:
                print(f"vllm-plugin-test: the {backend} run failed (exit {r.returncode})")
                return 1
            with open(out) as f:
                runs[backend] = json.load(f)
    a, b, w = runs["CPU_ATTN"], runs["CUSTOM"], runs["CUSTOM_ZEROED"]
    print(f"libattn kernel calls: CPU_ATTN run {a['calls']}, CUSTOM run {b['calls']}")
    ok = b["calls"]["forward"] > 0 and b["calls"]["kv_update"] > 0 and a["calls"]["forward"] == 0
    same, worst = _compare(a, b)
    wsame, wworst = _compare(a, w)
    print(f"greedy tokens identical: {same}; max |logprob difference|: {worst:.2e} (tol {TOL})")
    print(f"control (libattn's attention output zeroed): tokens identical: {wsame}; "
          f"max |logprob difference|: {wworst:.2e}")
    # vLLM's dummy weights (uniform +-1e-3; CPU linear weights are repacked
    # and cannot be redrawn) keep every logprob near -log(vocab); when even
    # zeroed attention leaves them unchanged, they cannot judge attention and
    # layer_check.py (run first) is the check that does.
    if wworst == 0.0:
        print("note: logprobs are insensitive to attention with dummy weights (the control "
              "matches too); attention agreement is layer_check.py's")
    ok &= worst <= TOL
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'batch':>5} {'context':>7} {'CPU_ATTN ms/step':>17} {'libattn ms/step':>16}")
    for ta, tb in zip(a["timing"], b["timing"]):
        print(f"{ta['batch']:>5} {ta['context']:>7} {ta['ms_per_step']:>17.2f} "
              f"{tb['ms_per_step']:>16.2f}")
    if not (ok and same):
        print("vllm-plugin-test: FAILED")
        return 1
    print("vllm-plugin-test: passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
