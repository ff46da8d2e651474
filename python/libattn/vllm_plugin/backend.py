"""vLLM 0.32.0's attention-backend contract, implemented over libattn.

- :class:`LibattnAttentionBackend`: capabilities read from libattn's own
  CPU_ATTN descriptor (dtypes, KV-cache dtypes, block and head sizes,
  attention types), and the KV-cache layout vLLM's CPU backend uses
  (``LBHNC``: per layer ``[num_blocks, num_kv_heads, block_size,
  2 * head_size]``, each block's keys then its values per head);
- :class:`LibattnMetadataBuilder`: the step's CommonAttentionMetadata as the
  kernel reads it (query_start_loc, seq_lens, block table; int32, CPU);
- :class:`LibattnAttentionImpl`: writes new keys/values into vLLM's cache
  tensor (``do_kv_cache_update``) and runs libattn's CPU_ATTN kernel on it
  (``forward``), both in place through :class:`libattn.KVCache.wrap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm.config import VllmConfig, get_current_vllm_config
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionCGSupport,
    AttentionImpl,
    AttentionLayer,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheLayout

import libattn

KERNEL = "CPU_ATTN"
_DESC = next(b for b in libattn.backends() if b.name == KERNEL).info
_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_DTYPE_NAMES = {v: k for k, v in _TORCH_DTYPES.items()}
_ELEM = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
# Calls into libattn in this process (the plugin test checks its layers ran here).
STATS = {"forward": 0, "kv_update": 0}


def _head_size_ok(h: int) -> bool:
    rule = _DESC["head_sizes"]
    if rule["sizes"]:
        return h in rule["sizes"]
    return (
        h >= max(rule["min"], 1)
        and (rule["max"] == 0 or h <= rule["max"])
        and (rule["multiple_of"] == 0 or h % rule["multiple_of"] == 0)
    )


class LibattnAttentionBackend(AttentionBackend):
    """vLLM attention backend running libattn's CPU_ATTN kernels."""

    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [_TORCH_DTYPES[d] for d in _DESC["dtypes"]]
    # fp8 caches stay with vLLM's own backend: its scales live on the layer.
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return "CUSTOM"

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None) -> list[int | MultipleOf]:
        return [MultipleOf(b) for b in _DESC["block_sizes"]] or [MultipleOf(1)]

    @classmethod
    def supports_head_size(cls, head_size: int) -> bool:
        return _head_size_ok(head_size)

    @classmethod
    def supported_kv_cache_layouts(cls) -> tuple[KVCacheLayout, ...]:
        return (KVCacheLayout.LBHNC,)

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_sink(cls) -> bool:
        return bool(_DESC["supports_sink"])

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def get_impl_cls() -> type["LibattnAttentionImpl"]:
        return LibattnAttentionImpl

    @staticmethod
    def get_builder_cls() -> type["LibattnMetadataBuilder"]:
        return LibattnMetadataBuilder


@dataclass
class LibattnMetadata:
    num_actual_tokens: int
    query_start_loc: torch.Tensor  # int32 [num_reqs + 1]
    seq_lens: torch.Tensor  # int32 [num_reqs]
    block_table: torch.Tensor  # int32 [num_reqs, max_blocks]
    slot_mapping: torch.Tensor  # int64 [num_tokens]
    causal: bool = True


class LibattnMetadataBuilder(AttentionMetadataBuilder[LibattnMetadata]):
    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.NEVER

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        layer_names: list[str],
        vllm_config: VllmConfig,
        device: torch.device,
    ) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> LibattnMetadata:
        cm = common_attn_metadata
        if isinstance(cm.causal, torch.Tensor):
            raise NotImplementedError("libattn: per-request causality is not supported")
        n = cm.num_reqs
        return LibattnMetadata(
            num_actual_tokens=cm.num_actual_tokens,
            query_start_loc=cm.query_start_loc_cpu[: n + 1].to(torch.int32).contiguous(),
            seq_lens=cm.seq_lens[:n].to("cpu", torch.int32).contiguous(),
            block_table=cm.block_table_tensor[:n].to("cpu", torch.int32).contiguous(),
            slot_mapping=cm.slot_mapping,
            causal=bool(cm.causal),
        )


def cache_view(kv_cache: torch.Tensor, head_size: int) -> dict:
    """libattn's view of one layer of vLLM's CPU cache: the tensor is
    [num_blocks, num_kv_heads, block_size, 2 * head_size]; per (block, head)
    block_size key rows come first, then block_size value rows (what vLLM's
    CPU_ATTN reads through view(..., 2 * block_size, head_size).chunk(2))."""
    nb, kvh, bs, c = kv_cache.shape
    if c != 2 * head_size or kv_cache.stride(3) != 1 or kv_cache.stride(2) != c:
        raise ValueError(
            f"libattn: KV cache {tuple(kv_cache.shape)} strides {kv_cache.stride()} is not "
            f"[blocks, kv_heads, block_size, 2*{head_size}] with contiguous blocks"
        )
    return {
        "elem": _ELEM[kv_cache.dtype], "num_blocks": nb, "block_size": bs, "num_kv_heads": kvh,
        "head_size": head_size, "head_size_v": head_size, "k_offset": 0,
        "v_offset": bs * head_size, "stride_block": kv_cache.stride(0),
        "stride_head": kv_cache.stride(1), "stride_token": head_size,
    }


class LibattnAttentionImpl(AttentionImpl[LibattnMetadata]):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes: list[float] | None = None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"libattn plugin: attention type {attn_type}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type
        self.sinks = sinks
        dtype = get_current_vllm_config().model_config.dtype
        alibi = None if alibi_slopes is None else torch.tensor(alibi_slopes, dtype=torch.float32)
        self._opts = dict(
            num_heads=num_heads, num_kv_heads=self.num_kv_heads, head_size=head_size,
            dtype=_DTYPE_NAMES[dtype], scale=self.scale,
            logits_soft_cap=float(logits_soft_cap or 0.0), sliding_window=sliding_window or 0,
            alibi_slopes=alibi,
        )
        self._kernel: libattn.Kernel | None = None
        self._views: dict = {}

    def _get_kernel(self) -> libattn.Kernel:
        # Sinks are weights: read them after loading, on the first step.
        if self._kernel is None:
            sinks = None if self.sinks is None else self.sinks.detach().float().contiguous()
            self._kernel = libattn.Kernel(KERNEL, sinks=sinks, **self._opts)
        return self._kernel

    def _cache(self, kv_cache: torch.Tensor) -> libattn.KVCache:
        key = (kv_cache.data_ptr(), tuple(kv_cache.shape))
        c = self._views.get(key)
        if c is None:
            c = libattn.KVCache.wrap(kv_cache, cache_view(kv_cache, self.head_size),
                                     dtype=self._opts["dtype"])
            self._views = {key: c}
        return c

    def do_kv_cache_update(
        self,
        layer: torch.nn.Module,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        STATS["kv_update"] += 1
        n = slot_mapping.shape[0]
        self._cache(kv_cache).write(
            slot_mapping.to(torch.int64), key[:n].contiguous(), value[:n].contiguous()
        )

    def forward(
        self,
        layer: AttentionLayer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: LibattnMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("libattn plugin: fused output quantization")
        if attn_metadata is None:  # profiling run
            return output
        STATS["forward"] += 1
        n = attn_metadata.num_actual_tokens
        out = output[:n]
        dst = out if out.is_contiguous() else torch.empty_like(out)
        self._get_kernel().forward(
            query[:n].contiguous(), self._cache(kv_cache), dst,
            query_start_loc=attn_metadata.query_start_loc, seq_lens=attn_metadata.seq_lens,
            block_table=attn_metadata.block_table, causal=attn_metadata.causal,
        )
        if dst is not out:
            out.copy_(dst)
        return output
