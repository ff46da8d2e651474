"""libattn as a vLLM general plugin (entry point ``vllm.general_plugins``).

vLLM calls :func:`register` in every process before it builds a model. It
registers :class:`~libattn.vllm_plugin.backend.LibattnAttentionBackend`
as the ``CUSTOM`` attention backend; ``--attention-backend CUSTOM`` (or
``attention_config={"backend": "CUSTOM"}``) then runs vLLM's attention
layers on libattn's CPU_ATTN kernels over vLLM's own KV-cache tensors.

vLLM 0.32.0's CPU platform answers every request other than CPU_ATTN with
CPU_ATTN ("Cannot use CUSTOM backend on CPU", platforms/cpu.py), so on CPU
the plugin also wraps ``CpuPlatform.get_attn_backend_cls`` to honour an
explicit CUSTOM request for standard (non-MLA) layers; every other request
gets vLLM's own answer unchanged.
"""

from __future__ import annotations

import logging

BACKEND_PATH = "libattn.vllm_plugin.backend.LibattnAttentionBackend"
_log = logging.getLogger("libattn.vllm_plugin")


def register() -> None:
    """Register libattn with vLLM (idempotent; a no-op without vLLM)."""
    try:
        from vllm.v1.attention.backends.registry import (
            AttentionBackendEnum,
            register_backend,
        )
    except ImportError:  # vLLM missing or too old for this contract
        return
    register_backend(AttentionBackendEnum.CUSTOM, BACKEND_PATH)
    _route_custom_on_cpu(AttentionBackendEnum)


def _route_custom_on_cpu(enum) -> None:
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return
    if not current_platform.is_cpu():
        return
    cls = type(current_platform)
    orig = cls.get_attn_backend_cls
    if getattr(orig, "_libattn_wrapped", False):
        return
    orig_fn = orig.__func__

    def get_attn_backend_cls(klass, selected_backend, attn_selector_config, num_heads=None):
        cfg = attn_selector_config
        if (
            selected_backend == enum.CUSTOM
            and enum.CUSTOM.get_path() == BACKEND_PATH
            and not cfg.use_mla
            and not cfg.use_sparse
        ):
            _log.info("libattn: using CUSTOM (libattn CPU_ATTN) for this layer")
            return BACKEND_PATH
        return orig_fn(klass, selected_backend, attn_selector_config, num_heads)

    get_attn_backend_cls._libattn_wrapped = True  # type: ignore[attr-defined]
    cls.get_attn_backend_cls = classmethod(get_attn_backend_cls)
