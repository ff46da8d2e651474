"""make vllm-plugin-test: a small Llama run end to end in vLLM, once with
vLLM's own CPU_ATTN and once with libattn selected by --attention-backend
CUSTOM (the plugin), each in its own process.

Weights: a seeded checkpoint (normal, std 0.02; norms 1) that this test writes
as model.safetensors next to its config.json, loaded by vLLM's ordinary
safetensors loader. vLLM's load_format="dummy" draws every weight from
uniform(-1e-3, 1e-3) with no way to change the range (its loader rejects
extra config), and at that scale attention never reaches the logits: a run
with attention zeroed matched too. Redrawing weights after the dummy load is
not sound on CPU either, where the linear layers repack their weights once
loading ends. The checkpoint is download-free, the same file for every run,
and goes through vLLM's own load and post-processing path.

Checks: the libattn run really called libattn; greedy tokens are identical;
the raw logits (logprobs_mode="raw_logits", whole vocabulary) of every prompt
position and every generated step agree within LOGIT_TOL. Chunked prefill
(max_num_batched_tokens 512) and several KV blocks per request are in the
mix. Negative controls run the plugin with attention deliberately wrong
(CONTROLS) and each must exceed LOGIT_TOL, so the comparison is shown to
see a wrong attention. Then vLLM's per-step decode time for both backends on
a few batch sizes and context lengths (figures, no timed assertion):
each the median engine step (LLMEngine.step) in which the whole batch
decodes. ATTN_VLLM_TIMING="1x128,8x512" picks other (batch x context)
shapes, "" none."""

from __future__ import annotations

import dataclasses
import itertools
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
WEIGHT_STD, SEED = 0.02, 0
LOGIT_TOL = 1e-3  # max |logit difference| (fp32 model; the kernels sum in different orders)
PROMPT_LENS = (5, 37, 200, 700)  # 700 > 512: a chunked prefill; up to 6 blocks of 128
GEN = 12
# Attention made wrong on purpose, in the plugin's forward (test only); each
# must fail LOGIT_TOL. "scale": 1/head_size in place of 1/sqrt(head_size);
# "drop_newest": decode steps miss their newest key (seq_lens off by one);
# "drop_last_block": decode steps miss the keys of their last KV block.
CONTROLS = ("zero", "scale", "drop_newest", "drop_last_block")
SHAPES = [(b, c) for b in (1, 8, 32) for c in (128, 512, 1024)]  # (batch, context)
DECODE = 16  # decode steps timed per batch
REPEATS = 2
_REQUEST_IDS = itertools.count()


def write_checkpoint(d: str) -> None:
    import torch
    from safetensors.torch import save_file

    c = CONFIG
    h, i, v, hd = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    g = torch.Generator().manual_seed(SEED)

    def normal(*shape):
        return torch.randn(*shape, generator=g) * WEIGHT_STD

    w = {"model.embed_tokens.weight": normal(v, h), "model.norm.weight": torch.ones(h),
         "lm_head.weight": normal(v, h)}
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        w.update({
            p + "input_layernorm.weight": torch.ones(h),
            p + "post_attention_layernorm.weight": torch.ones(h),
            p + "self_attn.q_proj.weight": normal(q, h),
            p + "self_attn.k_proj.weight": normal(kv, h),
            p + "self_attn.v_proj.weight": normal(kv, h),
            p + "self_attn.o_proj.weight": normal(h, q),
            p + "mlp.gate_proj.weight": normal(i, h),
            p + "mlp.up_proj.weight": normal(i, h),
            p + "mlp.down_proj.weight": normal(h, i),
        })
    save_file(w, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f)


def _perturb(mode: str) -> None:
    """Make the plugin's attention wrong in one way, at vLLM's contract
    boundary (the scale vLLM passes, the metadata, the output)."""
    from libattn.vllm_plugin import backend as b

    impl = b.LibattnAttentionImpl
    init, fwd = impl.__init__, impl.forward
    if mode == "scale":
        def wrong_scale(self, num_heads, head_size, scale, *a, **kw):
            init(self, num_heads, head_size, 1.0 / head_size, *a, **kw)

        impl.__init__ = wrong_scale
        return

    def wrong(self, layer, query, key, value, kv_cache, md, output, *a, **kw):
        if md is not None and mode != "zero":
            ql = md.query_start_loc[1:] - md.query_start_loc[:-1]
            sl = md.seq_lens.clone()
            dec = ql == 1
            if mode == "drop_newest":
                sl[dec & (sl > 1)] -= 1
            else:  # drop_last_block
                bs = kv_cache.shape[2]
                cut = dec & (sl > bs)
                sl[cut] = (sl[cut] - 1) // bs * bs
            md = dataclasses.replace(md, seq_lens=sl)
        out = fwd(self, layer, query, key, value, kv_cache, md, output, *a, **kw)
        if mode == "zero":
            out.zero_()
        return out

    impl.forward = wrong


def _dense(flat, vocab: int):
    """[positions, vocab] from vLLM's FlatLogprobs (positions with none skipped)."""
    import numpy as np

    rows = []
    for s, e in zip(flat.start_indices, flat.end_indices):
        if s == e:
            continue
        r = np.full(vocab, np.nan, dtype=np.float64)
        r[flat.token_ids[s:e]] = flat.logprobs[s:e]
        rows.append(r)
    return np.stack(rows)


def _decode_step_times(llm, prompts, steps: int) -> list[float]:
    """Seconds of each engine step in which every request of the batch decodes
    (no prefill in the step), through vLLM's own engine loop."""
    from vllm import SamplingParams

    eng = llm.llm_engine
    p = SamplingParams(max_tokens=steps + 1, temperature=0.0, detokenize=False, ignore_eos=True)
    got = {}
    for q in prompts:
        rid = f"timing-{next(_REQUEST_IDS)}"
        eng.add_request(rid, q, p)
        got[rid] = 0
    times = []
    while eng.has_unfinished_requests():
        decode = min(got.values()) >= 1 and eng.get_num_unfinished_requests() == len(prompts)
        t0 = time.perf_counter()
        outs = eng.step()
        dt = time.perf_counter() - t0
        for o in outs:
            got[o.request_id] = len(o.outputs[0].token_ids)
        if decode:
            times.append(dt)
    return times


def _shapes() -> list[tuple[int, int]]:
    spec = os.environ.get("ATTN_VLLM_TIMING")
    if spec is None:
        return SHAPES
    return [tuple(int(x) for x in s.split("x")) for s in spec.split(",") if s]


def _timing(llm):
    """Median engine-step time of DECODE decode steps, REPEATS times, per
    (batch, context). The prompts are prefilled once beforehand (prefix
    cache), so each timed batch starts decoding after one short step."""
    from vllm import SamplingParams

    timing = []
    for bs, ctx in _shapes():
        ps = [{"prompt_token_ids": [(11 * i + r) % 2000 + 10 for i in range(ctx)]}
              for r in range(bs)]
        warm = SamplingParams(max_tokens=2, temperature=0.0, detokenize=False, ignore_eos=True)
        llm.generate(ps, warm, use_tqdm=False)
        times = []
        for _ in range(REPEATS):
            times += _decode_step_times(llm, ps, DECODE)
        times.sort()
        timing.append({"batch": bs, "context": ctx, "steps": len(times),
                       "ms_per_step": 1e3 * times[len(times) // 2] if times else float("nan")})
    return timing


def child(mode: str, model_dir: str, out_path: str) -> None:
    import numpy as np
    from vllm import LLM, SamplingParams

    if mode in CONTROLS:
        _perturb(mode)
    kw = dict(model=model_dir, load_format="safetensors", skip_tokenizer_init=True,
              dtype="float32", max_model_len=2048, enforce_eager=True, seed=0, max_num_seqs=32,
              max_num_batched_tokens=512, max_logprobs=-1, logprobs_mode="raw_logits")
    if mode != "CPU_ATTN":
        kw["attention_backend"] = "CUSTOM"
    llm = LLM(**kw)
    prompts = [{"prompt_token_ids": [(7 * i + 3 * r) % 2000 + 10 for i in range(n)]}
               for r, n in enumerate(PROMPT_LENS)]
    sp = SamplingParams(max_tokens=GEN, temperature=0.0, logprobs=-1, prompt_logprobs=-1,
                        flat_logprobs=True, detokenize=False, ignore_eos=True)
    arrays, tokens = {}, []
    for r, o in enumerate(llm.generate(prompts, sp)):
        c = o.outputs[0]
        tokens.append(list(c.token_ids))
        arrays[f"prompt{r}"] = _dense(o.prompt_logprobs, CONFIG["vocab_size"])
        arrays[f"gen{r}"] = _dense(c.logprobs, CONFIG["vocab_size"])
    np.savez(out_path + ".npz", **arrays)
    timing = _timing(llm) if mode in ("CPU_ATTN", "CUSTOM") else []
    plugin = sys.modules.get("libattn.vllm_plugin.backend")
    calls = dict(plugin.STATS) if plugin else {"forward": 0, "kv_update": 0}
    with open(out_path, "w") as f:
        json.dump({"calls": calls, "tokens": tokens, "timing": timing}, f)


def _compare(a, b):
    """(tokens identical, max |logit difference|, logits compared)."""
    import numpy as np

    worst, count = 0.0, 0
    for k in a["logits"]:
        x, y = a["logits"][k], b["logits"][k]
        if x.shape != y.shape or np.isnan(x).any() or np.isnan(y).any():
            return a["tokens"] == b["tokens"], float("inf"), count
        worst = max(worst, float(np.abs(x - y).max()))
        count += x.size
    return a["tokens"] == b["tokens"], worst, count


def _run(mode: str, d: str):
    import numpy as np

    out = os.path.join(d, f"{mode}.json")
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, __file__, "child", mode, d, out], env=env)
    if r.returncode != 0:
        print(f"vllm-plugin-test: the {mode} run failed (exit {r.returncode})")
        return None
    with open(out) as f:
        res = json.load(f)
    with np.load(out + ".npz") as z:
        res["logits"] = {k: z[k] for k in z.files}
    print(f"vllm-plugin-test: {mode} run done in {time.perf_counter() - t0:.0f} s", flush=True)
    return res


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        write_checkpoint(d)
        runs = {}
        for mode in ("CPU_ATTN", "CUSTOM") + CONTROLS:
            runs[mode] = _run(mode, d)
            if runs[mode] is None:
                return 1
    a, b = runs["CPU_ATTN"], runs["CUSTOM"]
    spread = float(max(abs(x).max() for x in a["logits"].values()))
    print(f"libattn kernel calls: CPU_ATTN run {a['calls']}, CUSTOM run {b['calls']}")
    ok = b["calls"]["forward"] > 0 and b["calls"]["kv_update"] > 0 and a["calls"]["forward"] == 0
    same, worst, n = _compare(a, b)
    print(f"logits compared: {n} (prompt positions and {GEN} generated steps x vocab "
          f"{CONFIG['vocab_size']}); largest |logit| {spread:.2f}; tolerance {LOGIT_TOL:.0e}")
    print(f"{'run':<24} {'tokens identical':>16} {'max |logit diff|':>17} {'verdict':>8}")
    print(f"{'libattn (CUSTOM)':<24} {str(same):>16} {worst:>17.2e} "
          f"{'pass' if same and worst <= LOGIT_TOL else 'FAIL':>8}")
    ok &= same and worst <= LOGIT_TOL
    for mode in CONTROLS:
        c = runs[mode]
        csame, cworst, _ = _compare(a, c)
        seen = cworst > LOGIT_TOL and c["calls"]["forward"] > 0
        print(f"{'control ' + mode:<24} {str(csame):>16} {cworst:>17.2e} "
              f"{'caught' if seen else 'MISSED':>8}")
        ok &= seen
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"vLLM decode step, whole {CONFIG['num_hidden_layers']}-layer model, ms (median of "
          f"{REPEATS}x{DECODE} engine steps; ratio libattn / CPU_ATTN):")
    print(f"{'batch':>5} {'context':>7} {'CPU_ATTN':>9} {'libattn':>9} {'ratio':>6}")
    for ta, tb in zip(a["timing"], b["timing"]):
        print(f"{ta['batch']:>5} {ta['context']:>7} {ta['ms_per_step']:>9.2f} "
              f"{tb['ms_per_step']:>9.2f} {tb['ms_per_step'] / ta['ms_per_step']:>6.2f}")
    if not ok:
        print("vllm-plugin-test: FAILED")
        return 1
    print("vllm-plugin-test: passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
