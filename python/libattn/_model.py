"""Models as the attention layer sees them: per-layer specs and KV-cache groups."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from . import _core
from ._select import Selection, _call, select_config


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer: heads, head sizes, window, soft-cap, sinks, MLA dims.

    ``kind`` is vLLM's KV-spec kind ("full_attention", "sliding_window",
    "mla_attention", "encoder_only_attention", "cross_attention"...).
    """

    kind: str
    attn_type: str
    num_heads: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    sliding_window: int
    logits_soft_cap: float
    has_sink: bool
    use_mla: bool
    use_sparse: bool
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    index_topk: int
    use_mm_prefix: bool
    has_kv_cache: bool
    name: str = ""
    group: int = -1

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> "LayerSpec":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class KVGroup:
    """Layers with equal specs, sharing one KV-cache group."""

    index: int
    layers: list[int]
    spec: LayerSpec


class Model:
    """A model loaded by :func:`model`. ``layers`` holds one :class:`LayerSpec`
    per attention layer, ``groups`` the KV-cache groups."""

    def __init__(self, capsule: Any) -> None:
        self._cap = capsule
        info = _core.model_info(capsule)
        self.name: str = info["name"]
        self.model_type: str = info["model_type"]
        self.source: str = info["source"]
        self.dtype: str = info["dtype"]
        self.notes: list[str] = info["notes"]
        self.layers: list[LayerSpec] = [LayerSpec._from(d) for d in info["layers"]]
        self.groups: list[KVGroup] = [
            KVGroup(i, g["layers"], LayerSpec._from(g["spec"])) for i, g in enumerate(info["groups"])
        ]
        self._json: str = info["json"] or "{}"

    def __repr__(self) -> str:
        return f"<libattn.Model {self.name}: {len(self.layers)} layers, {len(self.groups)} KV groups>"

    def to_json(self) -> str:
        """The model as one JSON object (as ``attn models --json`` prints)."""
        return self._json

    def selector_config(
        self, group: int, kv_cache_dtype: str = "auto", block_size: int | None = None
    ) -> dict[str, Any]:
        """vLLM's AttentionSelectorConfig for the layers of one KV group."""
        return _core.model_group_config(self._cap, group, kv_cache_dtype, block_size or 0)

    def select(
        self,
        machine: str | None = "h100",
        backend: str | None = None,
        *,
        kv_cache_dtype: str = "auto",
        block_size: int | None = None,
        installed: Iterable[str] | str | None = None,
        settings: Mapping[str, bool] | Sequence[str] | None = None,
        raise_on_error: bool = True,
    ) -> list[Selection]:
        """Select a backend for every KV group (one :class:`Selection` each)."""
        return [
            select_config(
                self.selector_config(g.index, kv_cache_dtype, block_size),
                machine=machine,
                backend=backend,
                installed=installed,
                settings=settings,
                raise_on_error=raise_on_error,
            )
            for g in self.groups
        ]


def model(source: "str | os.PathLike[str] | Mapping[str, Any]", name: str | None = None) -> Model:
    """Load a model: a preset name (see :func:`model_presets`), a path to a
    Hugging Face ``config.json``, or the parsed config as a dict.

    Raises :class:`libattn.Error` (status ``PARSE_ERROR`` or
    ``INVALID_ARGUMENT`` naming the field) on a malformed config, and
    ``NOT_FOUND`` for an unknown preset.
    """
    if isinstance(source, Mapping):
        return Model(_call(_core.model_from_json, json.dumps(source), name or "config"))
    return Model(_call(_core.model_load, os.fspath(source)))


def model_presets() -> list[str]:
    """Names of the model presets shipped with libattn."""
    return list(_core.model_presets())
