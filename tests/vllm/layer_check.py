"""One attention layer, libattn against vLLM's own CPU_ATTN kernel, in the
vLLM venv: the same keys, values and queries go through vLLM's
cpu_attn_reshape_and_cache + cpu_attention_with_kv_cache and through the
plugin's cache view + libattn's write + CPU_ATTN forward on a tensor of
vLLM's cache shape; both are checked against a float64 oracle. Exit 1 on
disagreement. It isolates the kernel and the cache layout; plugin_test.py
then checks the whole model's logits."""

import sys

import torch

from vllm.platforms import current_platform

# vLLM loads the kernel library built for this CPU (_C, _C_AVX512 or
# _C_AVX2) itself; importing one by name loads a second copy on any other
# CPU, and torch aborts on the second registration of the _C namespace.
current_platform.import_kernels()
from vllm import _custom_ops as ops  # noqa: E402

import libattn  # noqa: E402
from libattn.vllm_plugin.backend import cache_view  # noqa: E402

TOL = 1e-5


def main() -> int:
    torch.manual_seed(0)
    nb, kvh, bs, hs, H = 8, 2, 32, 64, 8
    seq, ql = [40, 7, 90], [1, 7, 3]
    bt = torch.zeros(3, 4, dtype=torch.int32)
    perm, n = torch.randperm(nb), 0
    for r, s in enumerate(seq):
        k = (s + bs - 1) // bs
        bt[r, :k] = perm[n:n + k]
        n += k
    slots = torch.cat([bt[r, torch.arange(s) // bs].long() * bs + torch.arange(s) % bs
                       for r, s in enumerate(seq)])
    K, V = torch.randn(len(slots), kvh, hs), torch.randn(len(slots), kvh, hs)
    qsl = torch.tensor([0, 1, 8, 11], dtype=torch.int32)
    sl = torch.tensor(seq, dtype=torch.int32)
    q = torch.randn(11, H, hs)
    scale = hs ** -0.5

    want = torch.zeros(11, H, hs, dtype=torch.float64)
    off = 0
    for r, s in enumerate(seq):
        Kr, Vr = K[off:off + s].double(), V[off:off + s].double()
        for i in range(ql[r]):
            t, pos = int(qsl[r]) + i, s - ql[r] + i
            for h in range(H):
                g = h // (H // kvh)
                w = torch.softmax((Kr[: pos + 1, g] @ q[t, h].double()) * scale, 0)
                want[t, h] = w @ Vr[: pos + 1, g]
        off += s

    kv = torch.zeros(nb, kvh, bs, 2 * hs)  # vLLM's per-layer CPU cache shape
    kc, vc = kv.view(nb, kvh, 2 * bs, hs).chunk(2, dim=2)
    ops.cpu_attn_reshape_and_cache(K, V, kc, vc, slots, "vec")
    md = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=3, num_heads=H, num_kv_heads=kvh, head_dim=hs, seq_lens=sl, dtype=torch.float32,
        query_start_loc=qsl, causal=True, sliding_window_size=-1, isa="vec",
        enable_kv_split=False)
    ref = torch.zeros_like(q)
    ops.cpu_attention_with_kv_cache(
        query=q, key_cache=kc, value_cache=vc, output=ref, query_start_loc=qsl, seq_lens=sl,
        scale=scale, causal=True, alibi_slopes=None, sliding_window=-1, block_table=bt,
        softcap=0.0, scheduler_metadata=md, s_aux=None)

    kv2 = torch.zeros(nb, kvh, bs, 2 * hs)
    cache = libattn.KVCache.wrap(kv2, cache_view(kv2, hs), dtype="fp32")
    cache.write(slots, K, V)
    out = torch.zeros_like(q)
    libattn.Kernel("CPU_ATTN", num_heads=H, num_kv_heads=kvh, head_size=hs, dtype="fp32",
                   scale=scale).forward(q, cache, out, query_start_loc=qsl, seq_lens=sl,
                                        block_table=bt)
    e_vllm = float((ref.double() - want).abs().max())
    e_lib = float((out.double() - want).abs().max())
    e_both = float((out - ref).abs().max())
    print(f"layer check (fp32, 3 requests, GQA 8/2, head 64, block 32): vLLM CPU_ATTN vs oracle "
          f"{e_vllm:.2e}, libattn vs oracle {e_lib:.2e}, libattn vs vLLM {e_both:.2e} (tol {TOL})")
    return 0 if max(e_vllm, e_lib, e_both) <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
