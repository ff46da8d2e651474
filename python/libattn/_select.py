"""Platforms, the backend registry and backend selection."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from . import _core
from ._errors import Error, SelectionError

_DATA_DIR = os.path.join(os.path.dirname(__file__), "data")


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except _core.Error as e:
        raise Error(*e.args) from None


def _machine_args(machine, installed, settings) -> dict[str, Any]:
    """The machine as the C API takes it: a catalog name, cuda:X.Y, rocm:gfxNNN,
    xpu, cpu, local, a JSON spec path, or the name of a spec shipped in
    data/machines/."""
    if machine is not None:
        shipped = os.path.join(_DATA_DIR, "machines", f"{machine}.json")
        if "/" not in machine and not machine.endswith(".json") and os.path.isfile(shipped):
            if machine not in {n for n, _ in _core.catalog()}:
                machine = shipped
    if isinstance(installed, (list, tuple, set, frozenset)):
        installed = ",".join(installed)
    if isinstance(settings, Mapping):
        settings = [
            f"{k}={'true' if v is True else 'false' if v is False else v}"
            for k, v in settings.items()
        ]
    return {"machine": machine, "installed": installed, "settings": list(settings or ())}


def platform(
    machine: str | None = None,
    *,
    installed: Iterable[str] | str | None = None,
    settings: Mapping[str, bool] | Sequence[str] | None = None,
) -> dict[str, Any]:
    """Describe a platform as a dict (what ``attn platforms --json`` prints).

    ``machine`` is None for this machine (or ``$ATTN_PLATFORM``), else a
    catalog name ("h100", "a100", "mi300x", ...), "cuda:8.9", "rocm:gfx942",
    "xpu", "cpu", or a JSON machine spec file. ``installed`` replaces the
    machine's optional components ("fa2", "fa3", "flashinfer", ...);
    ``settings`` sets machine switches such as ``{"rocm_use_aiter": True}``.
    """
    text = _call(_core.platform_json, **_machine_args(machine, installed, settings))
    return json.loads(text)


def machines() -> dict[str, str]:
    """The built-in machine catalog: name -> description."""
    return dict(_core.catalog())


@dataclass(frozen=True)
class Backend:
    """One registered backend as the registry resolves it on a machine.

    ``resolved`` is False when its code cannot be loaded there; ``error`` then
    holds the reason (vLLM's ImportError text). ``info`` holds the
    descriptor's capabilities (dtypes, kv_cache_dtypes, attn_types,
    block_sizes, is_mla, supports_sink, cudagraph_support, ...).
    """

    name: str
    locator: str | None
    resolved: bool
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def is_mla(self) -> bool:
        return bool(self.info.get("is_mla"))

    @property
    def has_kernel(self) -> bool:
        """True when libattn runs this backend's kernels here (CPU_ATTN, CPU_MLA,
        REFERENCE...); simulated backends carry only their descriptor."""
        return bool(self.info.get("has_kernel"))


def backends(
    machine: str | None = None,
    *,
    installed: Iterable[str] | str | None = None,
    settings: Mapping[str, bool] | Sequence[str] | None = None,
) -> list[Backend]:
    """Every backend the registry knows, in registry order, resolved on
    ``machine`` (see :func:`platform` for the machine arguments)."""
    out = []
    for d in _call(_core.backends, **_machine_args(machine, installed, settings)):
        d = dict(d)
        name, loc, ok, err = d.pop("name"), d.pop("locator"), d.pop("resolved"), d.pop("error", None)
        out.append(Backend(name, loc, ok, err, d))
    return out


@dataclass(frozen=True)
class Candidate:
    """A backend the selector considered: its index in the platform's priority
    list (-1 for an explicit request), whether it is valid, and the reasons
    when it is not (vLLM's wording)."""

    name: str
    priority: int
    valid: bool
    reasons: list[str]


@dataclass(frozen=True)
class Selection:
    """The result of :func:`select`.

    ``backend`` is the chosen name (None on failure, when :func:`select`
    raises instead unless ``raise_on_error=False``); ``candidates`` every
    backend considered; ``warnings`` vLLM's warnings (e.g. a --block-size
    that precluded a higher-priority backend); ``config`` the selector
    configuration as libattn read it.
    """

    backend: str | None
    status: str
    error: str | None
    message: str | None
    candidates: list[Candidate]
    warnings: list[str]
    notes: list[str]
    config: dict[str, Any]
    locator: str | None
    requested: str | None
    _json: str
    _explain: str

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    def to_json(self) -> str:
        """The selection as one JSON object (as ``attn select --json`` prints)."""
        return self._json

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self._json)

    def explain(self) -> str:
        """A readable table: every candidate with its reasons."""
        return self._explain

    def __str__(self) -> str:
        return self.backend or f"<no backend: {self.message}>"


_FIELDS = _core.config_fields()


def select(
    head_size: int = 128,
    dtype: str = "bf16",
    machine: str | None = "h100",
    backend: str | None = None,
    *,
    kv_cache_dtype: str | None = "auto",
    block_size: int | None = None,
    use_mla: bool = False,
    has_sink: bool = False,
    use_sparse: bool = False,
    use_mm_prefix: bool = False,
    use_per_head_quant_scales: bool = False,
    attn_type: str = "decoder",
    has_sliding_window: bool = False,
    use_non_causal: bool = False,
    use_batch_invariant: bool = False,
    num_heads: int | None = None,
    use_kv_connector: bool = False,
    use_pcp: bool = False,
    use_adaptive_verification: bool = False,
    use_dcp: bool = False,
    use_rswa: bool = False,
    run_kv_cache_dtype: str | None = None,
    installed: Iterable[str] | str | None = None,
    settings: Mapping[str, bool] | Sequence[str] | None = None,
    raise_on_error: bool = True,
) -> Selection:
    """Choose the attention backend for one layer configuration, as vLLM does.

    An explicit ``backend`` is a hard requirement: if it cannot run the
    configuration, selection fails (no fallback). Otherwise the platform's
    priority list is walked and the first valid backend wins.

    Args:
        head_size: the attention head size.
        dtype: model dtype, "fp16" | "bf16" | "fp32" (torch names accepted).
        machine: a catalog name ("h100", "a100", "mi300x", "b200", ...),
            "cuda:X.Y", "rocm:gfxNNN", "xpu", "cpu", a JSON machine spec, or
            None for this machine.
        backend: a registry name ("FLASH_ATTN", "FLASHINFER", "CPU_ATTN"...),
            or None / "auto" for automatic selection.
        kv_cache_dtype: vLLM's cache dtype ("auto", "fp8", "fp8_e4m3", ...),
            or None when not given.
        block_size: the user's --block-size, or None.
        use_mla, has_sink, use_sparse, use_mm_prefix,
        use_per_head_quant_scales, attn_type, has_sliding_window,
        use_non_causal, use_batch_invariant, num_heads, use_kv_connector,
        use_pcp, use_adaptive_verification, use_dcp, use_rswa: the remaining
            fields of vLLM 0.32.0's AttentionSelectorConfig.
        run_kv_cache_dtype: the run's cache dtype (vLLM's
            ``--kv-cache-dtype``, its ``_run_kv_cache_dtype``) when this layer
            keeps another (``kv_cache_dtype_skip_layers``, a turboquant run's
            boundary layers); None = the layer's ``kv_cache_dtype``.
        installed: the machine's optional components ("fa2", "fa3",
            "flashinfer", "flashmla", "aiter", ...), replacing its defaults.
        settings: machine switches, e.g. ``{"rocm_use_aiter": True}``.
        raise_on_error: when False, a failed selection is returned (``backend``
            None, ``message`` set) instead of raised.

    Returns:
        A :class:`Selection`.

    Raises:
        SelectionError: no backend was chosen; carries vLLM's message and the
            candidates with their reasons.
        ValueError, TypeError: malformed arguments (unknown dtype...).
        Error: the machine could not be opened.
    """
    cfg = {
        "head_size": head_size,
        "dtype": dtype,
        "kv_cache_dtype": kv_cache_dtype,
        "block_size": block_size,
        "use_mla": use_mla,
        "has_sink": has_sink,
        "use_sparse": use_sparse,
        "use_mm_prefix": use_mm_prefix,
        "use_per_head_quant_scales": use_per_head_quant_scales,
        "attn_type": attn_type,
        "has_sliding_window": has_sliding_window,
        "use_non_causal": use_non_causal,
        "use_batch_invariant": use_batch_invariant,
        "num_heads": num_heads,
        "use_kv_connector": use_kv_connector,
        "use_pcp": use_pcp,
        "use_adaptive_verification": use_adaptive_verification,
        "use_dcp": use_dcp,
        "use_rswa": use_rswa,
        "run_kv_cache_dtype": run_kv_cache_dtype,
    }
    return select_config(
        cfg, machine=machine, backend=backend, installed=installed, settings=settings,
        raise_on_error=raise_on_error,
    )


def select_config(
    config: Mapping[str, Any],
    *,
    machine: str | None = "h100",
    backend: str | None = None,
    installed: Iterable[str] | str | None = None,
    settings: Mapping[str, bool] | Sequence[str] | None = None,
    raise_on_error: bool = True,
) -> Selection:
    """:func:`select` with the selector configuration as a dict (the keys of
    vLLM's AttentionSelectorConfig; unknown keys raise TypeError)."""
    d = _call(
        _core.select, dict(config), backend=backend,
        **_machine_args(machine, installed, settings),
    )
    sel = Selection(
        backend=d["backend"],
        status=d["status"],
        error=d["error"],
        message=d["message"],
        candidates=[Candidate(n, p, v, list(r)) for n, p, v, r in d["candidates"]],
        warnings=d["warnings"],
        notes=d["notes"],
        config=d["config"],
        locator=d["locator"],
        requested=d["requested"],
        _json=d["json"] or "{}",
        _explain=d["explain"] or "",
    )
    if raise_on_error and not sel.ok:
        raise SelectionError(sel)
    return sel


config_fields: tuple[str, ...] = tuple(_FIELDS)
"""The selector-configuration fields this build of libattn knows."""
