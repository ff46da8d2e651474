"""The paged KV cache and the kernels, on numpy arrays and CPU torch tensors.

Arrays are used in place: numpy arrays through the buffer protocol, torch
tensors through ``Tensor.numpy()`` (which shares the tensor's memory). bf16
data is a torch.bfloat16 tensor or an ml_dtypes.bfloat16 numpy array. Every
input is checked (dtype, shape, C-contiguity, writability, cache bounds)
before the C library reads or writes anything: a bad call raises and leaves
every output untouched.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

import numpy as np

from . import _core
from ._select import _call

try:  # optional: bf16 numpy arrays
    import ml_dtypes as _ml_dtypes

    _BF16_NP = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _BF16_NP = None

_NP_DTYPE = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}
_ELEM_OF_DTYPE = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
_DTYPE_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
}


def _dtype_name(d: str) -> str:
    try:
        return _DTYPE_ALIASES[str(d)]
    except KeyError:
        raise ValueError(f"unknown dtype {d!r}: expected fp32, fp16 or bf16") from None


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _torch_dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def _buffer(x: Any, name: str) -> tuple[Any, str]:
    """(object exporting the buffer, element name) for a numpy array or CPU
    tensor, sharing memory. Element names: fp32 fp16 bf16 int32 int64 uint8."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name} is on {x.device}; libattn's kernels run on CPU tensors")
        t = x.detach()
        dt = _torch_dtype_name(t)
        if dt == "bfloat16":
            import torch

            return t.view(torch.int16).numpy(), "bf16"
        if dt in ("float8_e4m3fn", "float8_e5m2"):
            import torch

            return t.view(torch.uint8).numpy(), "uint8"
        return t.numpy(), {"float32": "fp32", "float16": "fp16"}.get(dt, dt)
    if isinstance(x, np.ndarray):
        if _BF16_NP is not None and x.dtype == _BF16_NP:
            return x.view(np.uint16), "bf16"
        return x, {"float32": "fp32", "float16": "fp16"}.get(x.dtype.name, x.dtype.name)
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{name} must be a numpy array or torch tensor, not a {type(x).__name__}")
    raise TypeError(f"{name} must be a numpy array or torch tensor, not {type(x).__name__}")


def _data(x: Any, name: str, want: str) -> Any:
    buf, got = _buffer(x, name)
    if got != want:
        raise TypeError(f"{name} has dtype {got}, expected {want}")
    return buf


def _float_dtype(x: Any, name: str) -> str:
    _, dt = _buffer(x, name)
    if dt not in _ELEM_OF_DTYPE:
        raise TypeError(f"{name} has dtype {dt}, expected fp32, fp16 or bf16")
    if len(getattr(x, "shape", ())) != 3:
        raise ValueError(f"{name} must have 3 dimensions [tokens, heads, head_size]")
    return dt


def _arg(x: Any, name: str, want: str) -> Any:
    """A forward argument: a torch tensor goes to the C layer as it is (read
    in place there and checked as _data would check it, without the ~10 us
    numpy view per tensor), anything else through _data."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x
    return _data(x, name, want)


def _ints(x: Any, name: str, want: str = "int32") -> Any:
    if isinstance(x, (list, tuple)):
        return np.asarray(x, dtype=want)
    return _data(x, name, want)


def _int_arg(x: Any, name: str, want: str = "int32") -> Any:
    if isinstance(x, (list, tuple)):
        return np.asarray(x, dtype=want)
    return _arg(x, name, want)


class KVCache:
    """One layer's paged KV cache, laid out the way ``backend`` reads it.

    ``tensor`` is the cache in the backend's logical shape (``shape``, e.g.
    ``(2, num_blocks, block_size, num_kv_heads, head_size)`` for REFERENCE,
    ``dim_names`` naming the axes), a strided view of ``storage``. Use
    ``array="torch"`` for torch storage. :meth:`wrap` adopts memory someone
    else allocated (an engine's cache tensor) under an explicit view.
    """

    def __init__(
        self,
        backend: str,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_size: int,
        *,
        dtype: str = "bf16",
        kv_cache_dtype: str = "auto",
        head_size_v: int = 0,
        layout: str = "default",
        array: str = "numpy",
    ) -> None:
        dtype = _dtype_name(dtype)
        info = _call(
            _core.kv_layout, backend, num_blocks, block_size, num_kv_heads, head_size,
            head_size_v, kv_cache_dtype, dtype, layout,
        )
        self.backend = backend
        self.dtype = dtype
        self.kv_cache_dtype = kv_cache_dtype
        self.shape: tuple[int, ...] = tuple(info["shape"])
        self.dim_names: tuple[str, ...] = tuple(info["dim_names"])
        self.strides: tuple[int, ...] = tuple(info["strides"])  # in elements
        self.layout: str = info["layout"]
        self.bytes_per_layer: int = info["bytes_per_layer"]
        self.view: dict[str, Any] = dict(info["view"])
        if head_size_v:  # MLA: the latent width (kv_lora_rank) the view reads as values
            self.view["head_size_v"] = head_size_v
        n = info["elems_per_layer"]
        elem = self.view["elem"]
        if array == "torch":
            import torch

            tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
            self.storage = torch.zeros(n, dtype=tdt.get(elem, torch.uint8))
        elif array == "numpy":
            ndt = {"f32": np.float32, "f16": np.float16, "bf16": _BF16_NP or np.uint16}
            self.storage = np.zeros(n, dtype=ndt.get(elem, np.uint8))
        else:
            raise ValueError(f"array must be 'numpy' or 'torch', not {array!r}")

    @classmethod
    def wrap(cls, storage: Any, view: Mapping[str, Any], *, dtype: str = "bf16") -> "KVCache":
        """A cache over existing memory. ``view`` gives the element type
        ("f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"), the geometry
        (num_blocks, block_size, num_kv_heads, head_size, head_size_v) and the
        element offsets and strides (k_offset, v_offset, stride_block,
        stride_token, stride_head) of the head_size-contiguous rows; it is
        checked to lie inside ``storage`` at every use."""
        self = cls.__new__(cls)
        self.backend = None
        self.dtype = _dtype_name(dtype)
        self.kv_cache_dtype = "auto"
        self.view = dict(view)
        self.storage = storage
        self.shape = tuple(getattr(storage, "shape", ()))
        self.dim_names = ()
        self.strides = ()
        self.layout = "custom"
        self.bytes_per_layer = int(getattr(storage, "nbytes", 0) or storage.numel() * storage.element_size())
        return self

    @property
    def tensor(self) -> Any:
        """The cache in its logical shape (a view of ``storage``, no copy)."""
        if not self.strides:
            return self.storage
        if _is_torch(self.storage):
            return self.storage.as_strided(self.shape, self.strides)
        item = self.storage.itemsize
        return np.lib.stride_tricks.as_strided(
            self.storage, self.shape, tuple(s * item for s in self.strides)
        )

    def _storage(self) -> Any:
        return _buffer(self.storage, "kv cache storage")[0]

    def _storage_arg(self) -> Any:
        """The storage for a forward (a torch tensor as it is, see _arg)."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(self.storage, torch.Tensor):
            return self.storage
        return self._storage()

    def write(self, slot_mapping: Any, key: Any, value: Any | None = None) -> None:
        """Writes new tokens: ``key`` [tokens, num_kv_heads, head_size] and
        ``value`` [tokens, num_kv_heads, head_size_v] go to the slots
        ``slot_mapping`` [tokens] (int64, block * block_size + offset; -1 =
        padding). FP8 caches quantise with the view's scales. Every slot is
        checked before anything is written."""
        kbuf, kdt = _buffer(key, "key")
        vbuf = None
        if value is not None:
            vbuf = _data(value, "value", kdt)
        if kdt not in _ELEM_OF_DTYPE:
            raise TypeError(f"key has dtype {kdt}, expected fp32, fp16 or bf16")
        _call(_core.kv_write, self._storage(), self.view, _ints(slot_mapping, "slot_mapping", "int64"),
              kbuf, vbuf, kdt)

    def write_latent(self, slot_mapping: Any, latent: Any, k_rope: Any) -> None:
        """MLA: writes ``latent`` [tokens, kv_lora_rank] followed by ``k_rope``
        [tokens, rope_dim] into the slots (vLLM's concat_and_cache_mla)."""
        lbuf, ldt = _buffer(latent, "latent")
        if ldt not in _ELEM_OF_DTYPE:
            raise TypeError(f"latent has dtype {ldt}, expected fp32, fp16 or bf16")
        _call(_core.mla_write_latent, self._storage(), self.view,
              _ints(slot_mapping, "slot_mapping", "int64"), lbuf, _data(k_rope, "k_rope", ldt), ldt)


class Kernel:
    """A backend's kernel for one layer (CPU_ATTN, CPU_MLA, REFERENCE,
    REFERENCE_MLA, or a plugin's), created once and run every step.

    ``scale`` 0 means 1/sqrt(head_size). For MLA backends give kv_lora_rank
    and qk_rope_head_dim; head_size is then kv_lora_rank + qk_rope_head_dim
    (the latent row), and :meth:`forward` runs forward_mqa.
    """

    def __init__(
        self,
        backend: str,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_size: int,
        dtype: str = "bf16",
        head_size_v: int = 0,
        scale: float = 0.0,
        logits_soft_cap: float = 0.0,
        sliding_window: int = 0,
        sinks: Any | None = None,
        alibi_slopes: Any | None = None,
        attn_type: str = "decoder",
        kv_cache_dtype: str = "auto",
        kv_lora_rank: int = 0,
        qk_rope_head_dim: int = 0,
    ) -> None:
        self.dtype = _dtype_name(dtype)
        layer = {
            "num_heads": num_heads, "num_kv_heads": num_kv_heads, "head_size": head_size,
            "head_size_v": head_size_v, "scale": scale, "logits_soft_cap": logits_soft_cap,
            "sliding_window": sliding_window, "dtype": self.dtype, "attn_type": attn_type,
            "kv_cache_dtype": kv_cache_dtype, "kv_lora_rank": kv_lora_rank,
            "qk_rope_head_dim": qk_rope_head_dim,
        }
        vecs = {}
        for nm, v in (("sinks", sinks), ("alibi_slopes", alibi_slopes)):
            if v is not None:
                vecs[nm] = _data(v, nm, "fp32")
        self._cap = _call(_core.kernel, backend, layer, **vecs)
        info = _core.kernel_info(self._cap)
        self.backend: str = info["backend"]
        self.is_mla: bool = info["is_mla"]
        self.variant: str | None = info["variant"]
        self.num_heads = num_heads
        self.head_size = head_size

    def forward(
        self,
        q: Any,
        kv: KVCache,
        out: Any,
        *,
        query_start_loc: Any,
        seq_lens: Any,
        block_table: Any,
        causal: bool = True,
        lse: Any | None = None,
        encoder_seq_lens: Any | None = None,
    ) -> Any:
        """Attention for one step, written into ``out``.

        ``q`` [tokens, num_heads, head_size] and ``out`` [tokens, num_heads,
        head_size_v] (MLA: [tokens, heads, kv_lora_rank + rope] and [tokens,
        heads, kv_lora_rank]) in the kernel's dtype; ``query_start_loc``
        [num_reqs + 1], ``seq_lens`` [num_reqs] and ``block_table``
        [num_reqs, max_blocks] int32 (vLLM's CommonAttentionMetadata);
        ``lse`` optional float32 [tokens, num_heads] receives the natural-log
        LSE. Returns ``out``.
        """
        qb = _arg(q, "q", self.dtype)
        ob = _arg(out, "out", self.dtype)
        extra = {}
        if lse is not None:
            extra["lse"] = _arg(lse, "lse", "fp32")
        if encoder_seq_lens is not None:
            extra["encoder_seq_lens"] = _int_arg(encoder_seq_lens, "encoder_seq_lens")
        _call(
            _core.forward, self._cap, qb, ob, kv._storage_arg(), kv.view,
            _int_arg(query_start_loc, "query_start_loc"), _int_arg(seq_lens, "seq_lens"),
            _int_arg(block_table, "block_table"), causal, **extra,
        )
        return out


def forward(
    backend: str,
    q: Any,
    kv: KVCache,
    out: Any,
    *,
    query_start_loc: Any,
    seq_lens: Any,
    block_table: Any,
    num_kv_heads: int | None = None,
    scale: float = 0.0,
    causal: bool = True,
    lse: Any | None = None,
    **layer: Any,
) -> Any:
    """One-shot :meth:`Kernel.forward`: builds the kernel for ``backend`` from
    the shapes of ``q`` and ``kv`` (extra layer options as keywords:
    logits_soft_cap, sliding_window, sinks, alibi_slopes, attn_type...)."""
    qdt = _float_dtype(q, "q")
    k = Kernel(
        backend, num_heads=q.shape[1], num_kv_heads=num_kv_heads or kv.view["num_kv_heads"],
        head_size=q.shape[2], head_size_v=kv.view["head_size_v"], dtype=qdt, scale=scale, **layer,
    )
    if k.is_mla:
        from ._errors import Error

        raise Error("WRONG_ENTRY_POINT", f"{backend} is an MLA backend: call forward_mqa, not forward")
    return k.forward(q, kv, out, query_start_loc=query_start_loc, seq_lens=seq_lens,
                     block_table=block_table, causal=causal, lse=lse)


def forward_mqa(
    backend: str,
    q: Any,
    kv: KVCache,
    out: Any,
    *,
    query_start_loc: Any,
    seq_lens: Any,
    block_table: Any,
    kv_lora_rank: int,
    scale: float = 0.0,
    lse: Any | None = None,
) -> Any:
    """MLA decode (absorbed queries over the latent cache): ``q`` [tokens,
    heads, kv_lora_rank + rope], ``out`` [tokens, heads, kv_lora_rank]."""
    qdt = _float_dtype(q, "q")
    k = Kernel(
        backend, num_heads=q.shape[1], num_kv_heads=1, head_size=q.shape[2], dtype=qdt,
        scale=scale, kv_lora_rank=kv_lora_rank, qk_rope_head_dim=q.shape[2] - kv_lora_rank,
    )
    if not k.is_mla:
        raise _err_wrong_entry(backend)
    return k.forward(q, kv, out, query_start_loc=query_start_loc, seq_lens=seq_lens,
                     block_table=block_table, lse=lse)


def _err_wrong_entry(backend: str) -> Exception:
    from ._errors import Error

    return Error("WRONG_ENTRY_POINT", f"{backend} is not an MLA backend: call forward, not forward_mqa")
