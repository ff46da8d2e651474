"""libattn from Python: vLLM's attention-backend selection and libattn's CPU
kernels over a paged KV cache.

Selection::

    >>> import libattn
    >>> libattn.select(head_size=128, dtype="bf16", machine="h100").backend
    'FLASH_ATTN'

Everything here calls the C library (libattn.so, shipped in this package)
through the small extension ``libattn._core``; nothing is reimplemented in
Python. Arrays are numpy arrays or CPU torch tensors, used in place.
"""

from __future__ import annotations

import os as _os

_DATA_DIR = _os.path.join(_os.path.dirname(__file__), "data")
# Model presets are found through ATTN_DATA_DIR; point it at the copy in the
# wheel unless the user chose another.
if _os.path.isdir(_DATA_DIR):
    _os.environ.setdefault("ATTN_DATA_DIR", _DATA_DIR)

from . import _core  # noqa: E402
from ._errors import Error, SelectionError  # noqa: E402
from ._kernels import Kernel, KVCache, forward, forward_mqa  # noqa: E402
from ._model import LayerSpec, KVGroup, Model, model, model_presets  # noqa: E402
from ._select import (  # noqa: E402
    Backend,
    Candidate,
    Selection,
    backends,
    machines,
    platform,
    select,
)

__version__: str
try:
    from importlib.metadata import version as _version

    __version__ = _version("libattn")
except Exception:  # running from a build tree
    __version__ = "0+unknown"

extension: str = _core.__file__
"""Path of the extension module libattn._core."""
library: str = next(
    (_os.path.join(_os.path.dirname(__file__), f) for f in sorted(_os.listdir(_os.path.dirname(__file__)))
     if f.startswith("libattn.so")),
    "",
)
"""Path of the C library the package carries (libattn.so.0); "" in a build tree."""

__all__ = [
    "Backend",
    "Candidate",
    "Error",
    "Kernel",
    "KVCache",
    "KVGroup",
    "LayerSpec",
    "Model",
    "Selection",
    "SelectionError",
    "backends",
    "forward",
    "forward_mqa",
    "machines",
    "model",
    "model_presets",
    "platform",
    "select",
]
