"""vLLM's side of the parity run: answers selection cases with vLLM 0.32.0's
own code, inside the parity venv (never imported by libattn's tests).

Input (stdin): JSON {"groups": [{"key", "machine": {...}, "cases": [...]}]}.
Output (stdout): JSON {"answers": {case_id: answer}}.

Each group (one simulated machine: family, capability or gfx arch, installed
components, settings, and the process-wide VLLM_BATCH_INVARIANT) runs in its
own forked child, because vLLM resolves the platform, imports backend modules
and caches some environment-derived answers once per process. The parent imports
only torch and third-party libraries, never vllm, so no platform is bound
before the child chooses one.

What is simulated, and why it cannot bias a selection (see README.md):
* the run's KV-cache dtype: each case's run_kv_cache_dtype is validated by
  CacheConfig (the --kv-cache-dtype entry point) and set as the current
  VllmConfig's cache_config.cache_dtype, which vLLM's get_attn_backend
  passes as _run_kv_cache_dtype and its platform rules read.
* the device: the platform class is vLLM's own (CudaPlatform, RocmPlatform,
  XPUPlatform, CpuPlatform) with get_device_capability answering the
  simulated capability (CUDA) or amdsmi answering the simulated gfx arch
  (ROCm). Nothing else of the platform is replaced.
* hardware-only extension modules that cannot load without a GPU driver
  (vllm._C*, vllm._flashmla_C, vllm_xpu_kernels, ...) are empty modules:
  they register custom ops, which selection never calls.
* optional components the simulated machine has are stub packages whose
  every attribute is a placeholder (flashinfer, flashinfer_cubin, aiter,
  tokenspeed_mla, the FA2/FA3 extensions); those it lacks are hidden, so the
  import fails exactly as Python fails for a missing module. FA4 is a file
  check in vLLM (cute/interface.py); absent FA4 is modelled by setting
  vLLM's own FA4_AVAILABLE flag to False with the reason vLLM would record.
"""

import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import traceback
import types

# Components -> the module names whose presence vLLM tests.
STUB_PACKAGES = {
    "flashinfer": ["flashinfer"],
    "flashinfer_cubin": ["flashinfer_cubin"],
    "aiter": ["aiter"],
    "tokenspeed_mla": ["tokenspeed_mla"],
}
EXT_COMPONENTS = {
    "fa2": ["vllm.vllm_flash_attn._vllm_fa2_C"],
    "fa3": ["vllm.vllm_flash_attn._vllm_fa3_C"],
    "flashmla": ["vllm._flashmla_C", "vllm._flashmla_extension_C"],
}
# The capability queries vllm._C answers (torch.ops._C.<op>(capability)):
# modules on the selection path call them when they are imported (the
# quantization utilities). The stand-in answers each as a build without that
# kernel does: not supported. None of them is an attention question.
CAPABILITY_OPS = {
    "cutlass_scaled_mm_supports_fp8": "(int cuda_device_capability) -> bool",
    "cutlass_scaled_mm_supports_fp4": "(int cuda_device_capability) -> bool",
    "cutlass_scaled_mm_supports_block_fp8": "(int cuda_device_capability) -> bool",
    "cutlass_group_gemm_supported": "(int cuda_device_capability) -> bool",
    "mxfp4_experts_quant_supported": "(int cuda_device_capability) -> bool",
    "is_onednn_acl_supported": "() -> bool",
}
_LIBS = []

# Hardware extension modules: empty stand-ins on every simulated machine.
HW_EXTENSIONS = [
    "vllm._C",
    "vllm._C_stable_libtorch",
    "vllm._moe_C",
    "vllm._qutlass_C",
    "vllm._rocm_C",
    "vllm.cumem_allocator",
    "vllm_xpu_kernels",
    "amdsmi",
    "pynvml",
]


class _Placeholder:
    """Any attribute, any call, any subscript: a placeholder value."""

    def __init__(self, name):
        self._n = name

    def __getattr__(self, k):
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return _Placeholder(self._n + "." + k)

    def __call__(self, *a, **k):
        return _Placeholder(self._n + "()")

    def __getitem__(self, k):
        return _Placeholder(self._n + "[]")

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __or__(self, other):  # type annotations: Placeholder | None
        return self

    __ror__ = __or__

    def __repr__(self):
        return "<placeholder %s>" % self._n


class _StubModule(types.ModuleType):
    def __getattr__(self, k):
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return _Placeholder(self.__name__ + "." + k)


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        # FlashInfer API that vLLM feature-detects by signature: the stub
        # answers as the FlashInfer release vLLM pins (0.7.0.post1) does.
        if module.__name__ == "flashinfer.mla":

            class BatchMLAPagedAttentionWrapper:
                def run(self, *args, ckv_scale_arr=None, **kwargs):
                    pass

            module.BatchMLAPagedAttentionWrapper = BatchMLAPagedAttentionWrapper
        # aiter feature-detected by signature: `causal` exists since aiter
        # v0.1.20, the release vLLM 0.32.0's ROCm images ship.
        if module.__name__ == "aiter.mla":

            def mla_decode_fwd(*args, causal=True, **kwargs):
                pass

            module.mla_decode_fwd = mla_decode_fwd


class _Hiding(importlib.abc.MetaPathFinder):
    """Wraps one of Python's own finders so that a hidden package is not
    found even when the venv has it installed: find_spec answers None, so
    importlib.util.find_spec says absent and an import fails as Python fails
    for a missing module."""

    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if _Finder._under(name, _FINDER.hidden):
            return None
        return self.inner.find_spec(name, path, target)

    def invalidate_caches(self):
        if hasattr(self.inner, "invalidate_caches"):
            self.inner.invalidate_caches()

    def find_distributions(self, *args, **kwargs):
        # importlib.metadata asks the finders for installed distributions.
        inner = getattr(self.inner, "find_distributions", None)
        return inner(*args, **kwargs) if inner else iter(())


class _Finder(importlib.abc.MetaPathFinder):
    """Stubs and hides modules; before a machine is chosen (the family
    parent), it records every component probe so the run can prove that no
    probe was answered before the machine's components were known."""

    def __init__(self, stubs, hidden):
        self.stubs = stubs
        self.hidden = hidden
        self.early_probes = []
        self.machine_known = False

    @staticmethod
    def _under(name, roots):
        return any(name == r or name.startswith(r + ".") for r in roots)

    def find_spec(self, name, path=None, target=None):
        if not self.machine_known and self._under(name, _PROBED):
            self.early_probes.append(name)
        if self._under(name, self.hidden):
            # A vLLM extension that ships in the wheel: fail its import as a
            # missing file does. Anything else: not found (find_spec None).
            if name.startswith("vllm."):
                raise ModuleNotFoundError("No module named '%s'" % name, name=name)
            return None
        if self._under(name, self.stubs):
            return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        return None


_PROBED = [m for mods in list(STUB_PACKAGES.values()) + list(EXT_COMPONENTS.values())
           for m in mods] + ["vllm.vllm_flash_attn"]
_FINDER = _Finder(list(HW_EXTENSIONS), [])


def _install_hooks(machine):
    installed = set(machine.get("installed", []))
    stubs, hidden = list(HW_EXTENSIONS), []
    for comp, mods in list(STUB_PACKAGES.items()) + list(EXT_COMPONENTS.items()):
        (stubs if comp in installed else hidden).extend(mods)
    # The CUDA wheel's vllm_flash_attn (FA2/FA3 extensions, FA4's cute files)
    # exists only in CUDA builds: ROCm, XPU and CPU installs have none.
    if machine["family"] != "cuda":
        hidden.append("vllm.vllm_flash_attn")
    _FINDER.stubs, _FINDER.hidden = stubs, hidden
    _FINDER.machine_known = True
    for k, v in machine.get("env", {}).items():
        os.environ[k] = v


def _amdsmi_for(gfx):
    m = sys.modules.get("amdsmi") or importlib.import_module("amdsmi")
    m.amdsmi_get_processor_handles = lambda: [0]
    m.amdsmi_get_gpu_asic_info = lambda h: {"target_graphics_version": gfx}
    m.amdsmi_init = lambda *a, **k: None
    m.amdsmi_shut_down = lambda *a, **k: None
    return m


_CAP = {}


def _make_platform(machine):
    """vLLM's platform class for the family (in the family parent); the
    capability itself is read from _CAP, which each machine's child sets."""
    import vllm.platforms as P
    from vllm.platforms.interface import DeviceCapability

    fam = machine["family"]
    if fam == "cuda":
        import vllm.platforms.cuda as C

        cls = C.NonNvmlCudaPlatform

        def cap(c, device_id=0):
            major, minor = (int(x) for x in _CAP["cc"].split("."))
            return DeviceCapability(major=major, minor=minor)

        cls.get_device_capability = classmethod(cap)
        cls.get_device_name = classmethod(lambda c, device_id=0: "simulated")
    elif fam == "rocm":
        _amdsmi_for(machine["gfx"])
        import vllm.platforms.rocm as R

        cls = R.RocmPlatform
    elif fam == "xpu":
        import vllm.platforms.xpu as X

        cls = X.XPUPlatform
        cls.get_device_capability = classmethod(lambda c, device_id=0: None)
    else:
        import vllm.platforms.cpu as CP

        cls = CP.CpuPlatform
    P._current_platform = cls()
    return P._current_platform


def _fa4_flag(machine):
    if machine["family"] != "cuda" or "fa4" in machine.get("installed", []):
        return
    try:
        import vllm.vllm_flash_attn.flash_attn_interface as I
    except ImportError:
        return
    I.FA4_AVAILABLE = False
    I.FA4_UNAVAILABLE_REASON = "vllm.vllm_flash_attn.cute.interface not found"


def _classify(msg):
    if msg.startswith("Selected backend "):
        return "explicit-invalid"
    if msg.startswith("No valid attention backend found"):
        return "no-valid"
    if msg.startswith("Unknown attention backend"):
        return "unknown-name"
    if "must be registered before use" in msg:
        return "not-registered"
    if msg.startswith("Invalid kv_cache_dtype"):
        return "invalid-config"
    if msg.startswith("Invalid attention backend") or "is not valid for this configuration" in msg:
        return "explicit-invalid"
    return "other"


def _kind(e):
    # vLLM's platforms raise NotImplementedError for a whole feature the
    # platform lacks (CPU: "Sparse Attention is not supported on CPU.").
    if isinstance(e, NotImplementedError):
        return "not-supported"
    return _classify(str(e))


def _dtype(name):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def _explicit_reasons(platform, cls, cap, sel_cfg):
    """An explicit request's reasons as the platform computes them: ROCm
    adds its turboquant/ultraquant run rule (the KV-cache layout shared with
    the packed backend) to the backend's own, in the same call."""
    if platform.device_name == "rocm":
        from vllm.config import get_current_vllm_config_or_none
        from vllm.platforms import rocm

        run = get_current_vllm_config_or_none()
        return rocm._get_invalid_reasons(cls, cap, sel_cfg,
                                         is_turboquant_run=rocm._uses_turboquant(run),
                                         is_ultraquant_run=rocm._uses_ultraquant(run))
    return cls.validate_configuration(device_capability=cap, **sel_cfg._asdict())


def _candidates(platform, cap, sel_cfg, num_heads, backend):
    """Per-candidate reasons, the way the platform itself computes them."""
    fam = platform.device_name
    out = []
    if not hasattr(platform, "get_valid_backends"):
        return None  # XPU and CPU decide without per-candidate reasons
    if backend is not None:
        try:
            cls = backend.get_class()
        except ValueError:
            return []  # not registered: vLLM raises before validating anything
        except (ImportError, OSError) as e:
            # RocmPlatform records a failed import as the bare word.
            bare = fam == "rocm" and isinstance(e, ImportError)
            return [{"name": backend.name,
                     "reasons": ["ImportError" if bare else "%s: %s" % (type(e).__name__, e)]}]
        try:
            reasons = _explicit_reasons(platform, cls, cap, sel_cfg)
        except (ImportError, OSError) as e:
            bare = fam == "rocm" and isinstance(e, ImportError)
            reasons = ["ImportError" if bare else "%s: %s" % (type(e).__name__, e)]
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            reasons = ["%s: %s" % (type(e).__name__, e)]
        out.append({"name": backend.name, "reasons": reasons})
        return out
    if not hasattr(platform, "get_valid_backends"):
        return None
    valid, invalid = platform.get_valid_backends(
        device_capability=cap, attn_selector_config=sel_cfg, num_heads=num_heads
    )
    rows = []
    for item in valid:
        if fam == "cuda":
            rows.append((item.priority, item.backend.name, []))
        else:
            rows.append((item[1], item[0].name, []))
    for b, v in invalid.items():
        if isinstance(v, tuple):
            rows.append((v[0], b.name, list(v[1])))
        else:
            rows.append((None, b.name, list(v)))
    rows.sort(key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0))
    return [{"name": n, "reasons": r} for _, n, r in rows]


def _answer(platform, case):
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    c = case["config"]
    os.environ["VLLM_BATCH_INVARIANT"] = "1" if c.get("use_batch_invariant") else "0"
    ans = {}
    # The run's cache dtype goes through CacheConfig, the entry point of
    # --kv-cache-dtype (create_engine_config builds it before it reads the
    # attention backend); get_attn_backend passes the current config's
    # cache_dtype as _run_kv_cache_dtype and the platform rules read it there.
    run = c.get("run_kv_cache_dtype", "auto")
    from vllm.config import CacheConfig, get_current_vllm_config

    try:
        CacheConfig(cache_dtype=run)
    except Exception as e:  # noqa: BLE001 - pydantic's ValidationError
        return {"error": {"kind": "invalid-config", "type": type(e).__name__,
                          "message": _validation_text(e)}}
    get_current_vllm_config().cache_config.cache_dtype = run
    ans["run_kv_cache_dtype"] = get_current_vllm_config().cache_config.cache_dtype
    backend = None
    if case.get("backend") is not None:
        # The entry point vLLM's model layers use: --attention-backend is an
        # AttentionConfig field ("auto" and the MSA aliases become None).
        from vllm.config import AttentionConfig

        try:
            backend = AttentionConfig(backend=case["backend"]).backend
        except Exception as e:  # noqa: BLE001 - pydantic wraps vLLM's ValueError
            msg = _validation_text(e)
            return {"error": {"kind": _classify(msg), "type": type(e).__name__, "message": msg}}
    kv = c.get("kv_cache_dtype")
    if kv is not None:
        from typing import get_args

        from vllm.config.cache import CacheDType

        valid = get_args(CacheDType)
        if kv not in valid:
            msg = "Invalid kv_cache_dtype: %s. Valid values are: %s" % (kv, valid)
            return {"error": {"kind": "invalid-config", "type": "AssertionError", "message": msg}}
    sel_cfg = AttentionSelectorConfig(
        head_size=c["head_size"],
        dtype=_dtype(c["dtype"]),
        kv_cache_dtype=kv,
        block_size=c.get("block_size"),
        use_mla=c.get("use_mla", False),
        has_sink=c.get("has_sink", False),
        use_sparse=c.get("use_sparse", False),
        use_mm_prefix=c.get("use_mm_prefix", False),
        use_per_head_quant_scales=c.get("use_per_head_quant_scales", False),
        # The member, as vLLM's layers pass it: its f-string is
        # "AttentionType.DECODER" (Python >= 3.11), which messages show.
        attn_type=AttentionType(c.get("attn_type", "decoder")),
        has_sliding_window=c.get("has_sliding_window", False),
        use_non_causal=c.get("use_non_causal", False),
        use_batch_invariant=c.get("use_batch_invariant", False),
        use_kv_connector=c.get("use_kv_connector", False),
        use_pcp=c.get("use_pcp", False),
        use_adaptive_verification=c.get("use_adaptive_verification", False),
        use_dcp=c.get("use_dcp", False),
        use_rswa=c.get("use_rswa", False),
    )
    ans["config_repr"] = repr(sel_cfg)
    num_heads = c.get("num_heads")
    cap = platform.get_device_capability()
    try:
        ans["candidates"] = _candidates(platform, cap, sel_cfg, num_heads, backend)
    except Exception as e:  # noqa: BLE001
        ans["candidates_error"] = "%s: %s" % (type(e).__name__, e)
    try:
        path = platform.get_attn_backend_cls(backend, attn_selector_config=sel_cfg,
                                             num_heads=num_heads)
        if not path:
            msg = "Invalid attention backend for %s" % platform.device_name
            ans["error"] = {"kind": "explicit-invalid", "type": "ValueError", "message": msg}
        else:
            ans["selected_path"] = path
            ans["selected"] = _name_of(path)
    except Exception as e:  # noqa: BLE001 - every exception is an answer
        ans["error"] = {"kind": _kind(e), "type": type(e).__name__, "message": str(e)}
    # A request that gave way to the automatic choice (ROCm's turboquant and
    # ultraquant runs): the candidates are the ones that automatic choice
    # weighed. It may pick the name that was refused (the automatic walk of
    # an ultraquant run has no layout rule).
    refused = any(r["reasons"] for r in ans.get("candidates") or [])
    fell_back = backend is not None and (
        ans.get("error", {}).get("kind") == "no-valid"
        or ans.get("selected") not in (None, backend.name)
        or (refused and "error" not in ans))
    if fell_back and hasattr(platform, "get_valid_backends") and "candidates" in ans:
        try:
            ans["candidates"] = _candidates(platform, cap, sel_cfg, num_heads, None)
        except Exception as e:  # noqa: BLE001
            ans["candidates_error"] = "%s: %s" % (type(e).__name__, e)
    return ans


def _validation_text(e):
    """vLLM's own message inside a pydantic ValidationError (the ValueError
    its validator raised), else the exception's text."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            for err in errors():
                inner = (err.get("ctx") or {}).get("error")
                if inner is not None:
                    return str(inner)
                msg = err.get("msg", "")
                if msg:
                    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg
        except Exception:  # noqa: BLE001
            pass
    return str(e)


def _name_of(path):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    for m in AttentionBackendEnum:
        try:
            if m.value and m.get_path() == path:
                return m.name
        except ValueError:
            continue
    # A platform's own variant outside the enum (XPU's XPUFlashAttnMLABackend)
    # goes by the name its class reports (FLASH_ATTN_MLA).
    from vllm.utils.import_utils import resolve_obj_by_qualname

    try:
        return resolve_obj_by_qualname(path).get_name()
    except Exception:  # noqa: BLE001 - the path itself is then the answer
        return path


def _triton_driver(machine):
    """Triton's driver for the simulated GPU is active (vLLM disables Triton
    when no driver is; this machine has none)."""
    name = {"cuda": "nvidia", "rocm": "amd"}.get(machine["family"])
    if not name:
        return
    try:
        from triton.backends import backends
    except ImportError:
        return
    for key, b in backends.items():
        active = key == name
        setattr(b.driver, "is_active", staticmethod(lambda a=active: a))


# FlashMLA's mega-attention ops, which vLLM 0.32.0's wheel builds into
# _flashmla_C (its .so defines them) and vLLM tests with hasattr.
FLASHMLA_MEGA_OPS = ["fused_norm_rope_attn_rope_cast_decode", "permute_q_b_proj"]


def _flashmla_ops(machine):
    """torch.ops._flashmla_C holds the wheel's mega-attention ops by name on
    a machine with flashmla (the stub extension registers nothing else)."""
    if "flashmla" not in machine.get("installed", []):
        return
    import torch

    lib = torch.library.Library("_flashmla_C", "FRAGMENT")
    for name in FLASHMLA_MEGA_OPS:
        lib.define(name + "() -> ()")
    _LIBS.append(lib)


def _capability_ops():
    """torch.ops._C's capability queries, each answering "not supported"."""
    import torch

    lib = torch.library.Library("_C", "FRAGMENT")
    for name, schema in CAPABILITY_OPS.items():
        lib.define(name + schema)
        lib.impl(name, lambda *a: False, "CompositeExplicitAutograd")
    _LIBS.append(lib)


def _family_setup(machine):
    """In the family parent: bind vLLM's platform, import its config."""
    sys.meta_path[:] = [_FINDER] + [_Hiding(f) for f in sys.meta_path]
    _pin_host()
    _capability_ops()
    _triton_driver(machine)
    _CAP["cc"] = machine.get("cc", "0.0")
    platform = _make_platform(machine)
    import vllm.config  # noqa: F401
    import vllm.v1.attention.selector  # noqa: F401

    return platform


def _pin_host():
    """Facts of the host that vLLM reads and no simulated machine states: the
    CPU's AMX tiles (CpuPlatform prefers AMX_MLA where torch finds them).
    Pinned to absent, so answers do not change with the CPU this runs on."""
    import torch

    if hasattr(torch, "cpu"):
        torch.cpu._is_amx_tile_supported = lambda: False


def _fake_device(machine):
    """torch.cuda's device queries answer for the simulated device (a real
    query would initialise CUDA, which this machine does not have)."""
    import torch

    cc = machine.get("cc") or {"gfx90a": "9.0", "gfx942": "9.4", "gfx950": "9.5"}.get(
        machine.get("gfx"), "0.0")
    major, minor = (int(x) for x in cc.split("."))
    props = types.SimpleNamespace(name="simulated", major=major, minor=minor,
                                  multi_processor_count=132, total_memory=80 << 30,
                                  gcnArchName=machine.get("gfx", ""), warp_size=32)
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)
    torch.cuda.get_device_name = lambda *a, **k: "simulated"
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    # Buffers a backend module allocates on the GPU when it is imported
    # (CUTLASS_MLA's 128 MiB SM100 workspace) are made on the meta device:
    # the allocation succeeds as on a real GPU and no selection reads them.
    real_empty = torch.empty

    def empty(*a, device=None, **k):
        if device is not None and str(device).startswith("cuda"):
            device = "meta"
        return real_empty(*a, device=device, **k)

    torch.empty = empty


def _run_group(group, platform):
    machine = group["machine"]
    _CAP["cc"] = machine.get("cc", "0.0")
    _install_hooks(machine)
    _fake_device(machine)
    _flashmla_ops(machine)
    import vllm.config as VC

    _fa4_flag(machine)
    cfg = VC.VllmConfig()
    out = {}
    with VC.set_current_vllm_config(cfg):
        for case in group["cases"]:
            try:
                out[case["id"]] = _answer(platform, case)
            except Exception as e:  # noqa: BLE001
                out[case["id"]] = {"harness_error": "%s: %s" % (type(e).__name__, e),
                                   "trace": traceback.format_exc()[-2000:]}
    if _FINDER.early_probes:
        out["__early_probes__"] = sorted(set(_FINDER.early_probes))
    return out


def _family_key(machine):
    return machine["family"] + ("/" + machine["gfx"] if machine["family"] == "rocm" else "")


def main():
    import logging

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.disable(logging.WARNING)
    req = json.load(sys.stdin)
    # Third-party imports shared by every child (none binds a vLLM platform).
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import transformers.models.auto.modeling_auto  # noqa: F401

    answers = {}
    jobs = int(os.environ.get("PARITY_JOBS", "2"))
    families = {}
    for g in req["groups"]:
        families.setdefault(_family_key(g["machine"]), []).append(g)
    import tempfile

    # Children write to files, not pipes, so a large answer never blocks.
    tmpdir = tempfile.mkdtemp(prefix="parity-")
    for fkey, groups in families.items():
        path = os.path.join(tmpdir, fkey.replace("/", "_") + ".json")
        pid = os.fork()
        if pid == 0:
            try:
                platform = _family_setup(groups[0]["machine"])
                res = _fork_groups(groups, platform, jobs, tmpdir)
                with open(path, "w") as f:
                    json.dump(res, f)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                with open(path + ".err", "w") as f:
                    f.write(traceback.format_exc())
                os._exit(1)
        _reap_files([(pid, path, fkey)], answers)
    json.dump({"answers": answers}, sys.stdout)


def _fork_groups(groups, platform, jobs, tmpdir):
    answers = {}
    running = []
    for n, g in enumerate(groups):
        while len(running) >= jobs:
            _reap_files(running, answers)
        path = os.path.join(tmpdir, "%d-%d.json" % (os.getpid(), n))
        pid = os.fork()
        if pid == 0:
            try:
                res = _run_group(g, platform)
                with open(path, "w") as f:
                    json.dump(res, f)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                with open(path + ".err", "w") as f:
                    f.write(traceback.format_exc())
                os._exit(1)
        running.append((pid, path, g["key"]))
    while running:
        _reap_files(running, answers)
    return answers


def _reap_files(running, answers):
    pid, status = os.wait()
    for item in list(running):
        if item[0] != pid:
            continue
        running.remove(item)
        path, key = item[1], item[2]
        if os.path.exists(path):
            with open(path) as f:
                answers.update(json.load(f))
        else:
            err = open(path + ".err").read() if os.path.exists(path + ".err") else "?"
            sys.stderr.write("group %s failed:\n%s\n" % (key, err[-3000:]))


if __name__ == "__main__":
    main()
