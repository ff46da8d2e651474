"""The configurations tools/vllm-parity/parity.py asks vLLM 0.32.0 and
`attn select` about: hand-picked ones (every enum member on every platform,
odd names, invalid strings for every string input, the run's KV dtype) and
seeded random ones. A case is a simulated machine, a requested backend or
None and a full selector config; its id is a hash of the three.
"""

import hashlib
import json
import random


CUDA_CCS = ["7.0", "7.5", "8.0", "8.9", "9.0", "10.0", "11.0", "12.0"]
ROCM_GFX = ["gfx90a", "gfx942", "gfx950"]
CUDA_COMPONENTS = ["fa2", "fa3", "fa4", "flashinfer", "flashinfer_cubin", "flashmla",
                   "tokenspeed_mla"]
CUDA_WHEEL = ["fa2", "fa3", "fa4", "flashinfer", "flashinfer_cubin", "flashmla"]
HEADS = [32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256, 320, 512, 576]
MLA_HEADS = [576, 512, 320, 128]
KV = [None, "auto", "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
      "fp8_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "int8_per_token_head",
      "fp8_per_token_head", "nvfp4"]
BLOCKS = [None, None, None, 1, 16, 32, 64, 128, 256, 48]
ATTN_TYPES = ["decoder"] * 6 + ["encoder", "encoder_only", "encoder_decoder"]
FLAGS = ["has_sink", "use_mm_prefix", "use_per_head_quant_scales", "has_sliding_window",
         "use_non_causal", "use_batch_invariant", "use_kv_connector", "use_pcp",
         "use_adaptive_verification", "use_dcp", "use_rswa"]

CUDA_NAMES = ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT",
              "TRITON_FLASHINFER", "TRITON_FLASH_ATTN", "FLASH_ATTN_DIFFKV",
              "FLASHINFER_MLA", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA",
              "TRITON_MLA", "FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE",
              "FLASHINFER_MLA_SPARSE_SM120", "FLASH_ATTN_MLA_SPARSE",
              "FLASHINFER_MLA_SPARSE_SM90"]
ROCM_NAMES = ["ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN",
              "TURBOQUANT", "ROCM_AITER_MLA", "TRITON_MLA", "ROCM_AITER_TRITON_MLA",
              "ROCM_AITER_MLA_SPARSE"]
XPU_NAMES = ["FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA", "FLASH_ATTN_MLA", "FLASHINFER"]
CPU_NAMES = ["CPU_ATTN", "CPU_MLA", "FLASH_ATTN"]
# vLLM 0.32.0's AttentionBackendEnum, every member in its order.
VLLM_ENUM = """FLASH_ATTN FLASH_ATTN_DIFFKV TRITON_ATTN TRITON_ATTN_DIFFKV TRITON_FLASH_ATTN
ROCM_ATTN ROCM_SEGMENTED_ATTN ROCM_AITER_MLA ROCM_AITER_TRITON_MLA ROCM_AITER_FA
ROCM_AITER_MLA_SPARSE XPU_MLA_SPARSE TORCH_SDPA FLASHINFER TRITON_FLASHINFER FLASHINFER_MLA
TOKENSPEED_MLA FLASHINFER_MLA_SPARSE FLASHINFER_MLA_SPARSE_SM120 FLASHINFER_MLA_SPARSE_SM90
TRITON_MLA CUTLASS_MLA FLASHMLA FLASHMLA_SPARSE FLASHMLA_SPARSE_DSV4 FLASHINFER_MLA_SPARSE_DSV4
ROCM_FLASHMLA_SPARSE_DSV4 FLASHMLA_SPARSE_DSV41 FLASHINFER_MLA_SPARSE_DSV41
FLASHMLA_MEGA_ATTN_DSV41 B12X FLASH_ATTN_MLA FLASH_ATTN_MLA_SPARSE MINIMAX_M3_SPARSE CUTLASS_MSA
TRITON_MSA NO_ATTENTION FLEX_ATTENTION HPC_ATTN ROCM_AITER_UNIFIED_ATTN CPU_ATTN CPU_MLA AMX_MLA
TURBOQUANT ULTRAQUANT CUSTOM""".split()
# Names that are no member: unknown, misspelled, or spelled as AttentionConfig
# accepts them (any case; "auto").
ODD_NAMES = ["FOO", "flash-attn", "FLASH_ATTN_V2", "auto", "Auto", "AUTO",
             "flash_attn", "Triton_Attn", "cutlass_msa", "Triton_Msa"]
# Strings that are no CacheDType: vLLM's assertion on every platform.
BAD_KV = ["fp9", "FP8", "fp8e4m3", "int4", "turboquant"]
# vLLM 0.32.0's CacheDType, in its order.
CACHE_DTYPES = ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                "fp8_ds_mla", "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
                "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
                "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4",
                "nvfp4_4over6"]
# The run's cache dtype (cache_config.cache_dtype) where a layer keeps
# another: the packed and quantized runs whose rules read it.
RUN_KV = ["auto", "fp8", "fp8_e4m3", "turboquant_k8v4", "turboquant_4bit_nc",
          "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit", "nvfp4",
          "int8_per_token_head", "fp8_per_token_head", "bfloat16"]
# Strings that are no CacheDType for the run: CacheConfig's validation error.
BAD_RUN_KV = ["fp9", "FP8", "None", "turboquant", "auto "]


def same_run(kv):
    """The run's dtype of a layer that keeps it (None and bad strings: auto)."""
    return kv if kv in CACHE_DTYPES else "auto"


# A few installed sets per family keep the number of simulated machines (one
# vLLM process each) small; the configurations vary freely.
CUDA_SETS = [CUDA_WHEEL, CUDA_WHEEL + ["tokenspeed_mla"], [], ["fa2", "fa3", "fa4"],
             ["fa2", "flashinfer"], ["flashinfer", "flashinfer_cubin", "flashmla"]]
ROCM_SETTINGS = [{}, {"rocm_use_aiter": True}]


def _machine(rng, family):
    if family == "cuda":
        r = rng.random()
        inst = CUDA_SETS[0] if r < 0.4 else rng.choice(CUDA_SETS[1:])
        return {"family": "cuda", "cc": rng.choice(CUDA_CCS), "installed": list(inst)}
    if family == "rocm":
        return {"family": "rocm", "gfx": rng.choice(ROCM_GFX),
                "installed": ["aiter"] if rng.random() < 0.6 else [],
                "settings": dict(rng.choice(ROCM_SETTINGS))}
    return {"family": family, "installed": []}


def _config(rng, family):
    mla = rng.random() < 0.3
    c = {
        "head_size": rng.choice(MLA_HEADS if mla and rng.random() < 0.8 else HEADS),
        "dtype": rng.choice(["bf16", "bf16", "fp16", "fp32"]),
        "kv_cache_dtype": rng.choice(KV),
        "block_size": rng.choice(BLOCKS),
        "use_mla": mla,
        "use_sparse": mla and rng.random() < 0.3,
        "attn_type": rng.choice(ATTN_TYPES),
        "num_heads": rng.choice([None, None, 16, 128]) if mla else None,
    }
    for f in FLAGS:
        c[f] = rng.random() < 0.07
    if rng.random() < 0.01:
        c["kv_cache_dtype"] = rng.choice(BAD_KV)
    # The run's KV dtype: mostly the layer's own; a layer kept at the native
    # dtype in a packed or quantized run (kv_cache_dtype_skip_layers,
    # turboquant's boundary layers); any other run; a string no CacheDType.
    r = rng.random()
    if r < 0.5:
        c["run_kv_cache_dtype"] = same_run(c["kv_cache_dtype"])
    elif r < 0.75:
        c["kv_cache_dtype"] = "auto"
        c["run_kv_cache_dtype"] = rng.choice(RUN_KV)
    elif r < 0.99:
        c["run_kv_cache_dtype"] = rng.choice(RUN_KV)
    else:
        c["run_kv_cache_dtype"] = rng.choice(BAD_RUN_KV)
    return c


def _backend(rng, family, cfg):
    r = rng.random()
    if r < 0.5:
        return None
    if r < 0.62:  # any member of the enum, on any platform
        return rng.choice(VLLM_ENUM)
    if r < 0.65:
        return rng.choice(ODD_NAMES)
    names = {"cuda": CUDA_NAMES, "rocm": ROCM_NAMES, "xpu": XPU_NAMES, "cpu": CPU_NAMES}[family]
    return rng.choice(names)


def _hand_picked():
    base = {"head_size": 128, "dtype": "bf16", "kv_cache_dtype": "auto", "block_size": None,
            "use_mla": False, "use_sparse": False, "attn_type": "decoder", "num_heads": None}
    for f in FLAGS:
        base[f] = False
    cases = []

    def add(machine, backend=None, **kw):
        c = dict(base)
        c.update(kw)
        c.setdefault("run_kv_cache_dtype", same_run(c["kv_cache_dtype"]))
        cases.append({"machine": machine, "backend": backend, "config": c})

    wheel = lambda cc: {"family": "cuda", "cc": cc, "installed": list(CUDA_WHEEL)}  # noqa: E731
    add(wheel("9.0"))  # h100
    add(wheel("8.0"))  # a100
    add({"family": "rocm", "gfx": "gfx942", "installed": [], "settings": {}})  # mi300x
    add({"family": "cuda", "cc": "9.0", "installed": ["fa2", "fa3", "fa4"]}, "FLASHINFER")
    add({"family": "cuda", "cc": "10.0",
         "installed": ["fa2", "fa3", "fa4", "flashinfer", "flashinfer_cubin"]}, head_size=512)
    for cc in CUDA_CCS:
        for hs in (64, 128, 256, 512, 576):
            add(wheel(cc), head_size=hs)
            add(wheel(cc), "FLASHINFER", head_size=hs)
            add(wheel(cc), head_size=hs, use_mla=True, num_heads=128)
            add(wheel(cc), head_size=hs, use_mla=True, use_sparse=True, num_heads=16)
        add({"family": "cuda", "cc": cc, "installed": []})
        add({"family": "cuda", "cc": cc, "installed": []}, "FLASH_ATTN")
        add(wheel(cc), use_mm_prefix=True)
        add(wheel(cc), has_sink=True)
        add(wheel(cc), use_non_causal=True)
        add(wheel(cc), has_sliding_window=True)
        add(wheel(cc), kv_cache_dtype="fp8")
        add(wheel(cc), use_dcp=True)
        add(wheel(cc), use_pcp=True)
    for gfx in ROCM_GFX:
        for aiter in ([], ["aiter"]):
            m = {"family": "rocm", "gfx": gfx, "installed": aiter, "settings": {}}
            for hs in (64, 128, 256, 576):
                add(m, head_size=hs)
                add(m, head_size=hs, use_mla=True)
            add(m, use_sparse=True, use_mla=True, head_size=576)
            mon = dict(m, settings={"rocm_use_aiter": True})
            add(mon)
            add(mon, use_mla=True, head_size=576)
    # vLLM 0.32.0's newer KV dtypes and the composites' head sizes.
    for cc in ("9.0", "10.0", "12.0"):
        for kv in ("nvfp4_ds_mla", "nvfp4_4over6", "int4_per_token_head", "nvfp4"):
            add(wheel(cc), kv_cache_dtype=kv)
            add(wheel(cc), "FLASHINFER", kv_cache_dtype=kv)
            add(wheel(cc), "TRITON_ATTN", kv_cache_dtype=kv)
        for hs in (512, 576):
            add(wheel(cc), head_size=hs, use_mla=True, use_sparse=True, num_heads=16,
                kv_cache_dtype="nvfp4_ds_mla")
        for hs in (256, 512):
            add(wheel(cc), head_size=hs, use_mm_prefix=True)
            add(wheel(cc), "TRITON_FLASH_ATTN", head_size=hs, use_mm_prefix=True)
            add(wheel(cc), "TRITON_FLASHINFER", head_size=hs, use_mm_prefix=True, block_size=64)
    for gfx in ROCM_GFX:
        m = {"family": "rocm", "gfx": gfx, "installed": ["aiter"], "settings": {}}
        for kv in ("ultraquant_4bit", "int4_per_token_head", "turboquant_k8v4"):
            add(m, kv_cache_dtype=kv)
            add(m, "ROCM_ATTN", kv_cache_dtype=kv)
        add(m, "ULTRAQUANT", kv_cache_dtype="ultraquant_4bit")
        add(m, use_mla=True, head_size=576, use_non_causal=True)
        add(m, use_mla=True, head_size=576, use_non_causal=True, dtype="fp16")
    # Every enum member, unknown and aliased names, on every platform: a
    # standard layer and a (sparse) MLA layer each.
    plat = [wheel("9.0"), wheel("10.0"), wheel("12.0"), {"family": "cuda", "cc": "9.0",
                                                         "installed": []},
            {"family": "rocm", "gfx": "gfx942", "installed": ["aiter"], "settings": {}},
            {"family": "rocm", "gfx": "gfx950", "installed": [], "settings": {}},
            {"family": "xpu", "installed": []}, {"family": "cpu", "installed": []}]
    for m in plat:
        for name in VLLM_ENUM + ODD_NAMES:
            add(m, name)
            add(m, name, use_mla=True, head_size=576, block_size=64)
            add(m, name, use_mla=True, use_sparse=True, head_size=512, block_size=256,
                has_sink=True)
        for kv in BAD_KV:
            add(m, kv_cache_dtype=kv)
            add(m, "FLASH_ATTN", kv_cache_dtype=kv)
    for m in plat[:3]:
        for bs in (16, 32, 64, 128):
            add(m, "CPU_ATTN", block_size=bs)
        add(m, "CPU_ATTN", has_sink=True)
        add(m, "CPU_ATTN", use_per_head_quant_scales=True)
        add(m, "NO_ATTENTION")
    _hand_picked_run_kv(add, plat, wheel)
    xpu = {"family": "xpu", "installed": []}
    add(xpu, "FLASH_ATTN_MLA", use_mla=True, head_size=576, block_size=64)
    add(xpu, "FLASH_ATTN_MLA", use_mla=True, head_size=512)
    add(xpu, "FLASH_ATTN", use_batch_invariant=True)
    add(xpu, "FLASH_ATTN", use_mm_prefix=True)
    add(xpu, use_mm_prefix=True)
    for fam in ("xpu", "cpu"):
        m = {"family": fam, "installed": []}
        add(m)
        add(m, use_mla=True, head_size=576)
        add(m, dtype="fp32")
        add(m, "TRITON_ATTN")
        add(m, "FLASH_ATTN")
    return cases


def _hand_picked_run_kv(add, plat, wheel):
    """The run's KV dtype (issue 27 item 6): ROCm's turboquant and
    ultraquant runs (the layout shared with the packed backend, the explicit
    request that gives way), FA4's head-256 kernel in a quantized run, and
    strings that are no CacheDType, on every platform."""
    rocm_names = ROCM_NAMES + ["ULTRAQUANT", "FLEX_ATTENTION", "CPU_ATTN", "ROCM_SEGMENTED_ATTN"]
    for gfx in ROCM_GFX:
        for inst, settings in (([], {}), (["aiter"], {}), (["aiter"], {"rocm_use_aiter": True})):
            m = {"family": "rocm", "gfx": gfx, "installed": inst, "settings": settings}
            for run in ("turboquant_4bit_nc", "ultraquant_4bit", "fp8"):
                for kv in ("auto", "fp8", run):
                    add(m, kv_cache_dtype=kv, run_kv_cache_dtype=run)
                add(m, kv_cache_dtype="auto", run_kv_cache_dtype=run, use_kv_connector=True)
                for name in rocm_names:
                    add(m, name, kv_cache_dtype="auto", run_kv_cache_dtype=run)
                add(m, kv_cache_dtype="auto", run_kv_cache_dtype=run, use_mla=True,
                    head_size=576)
                add(m, "ROCM_ATTN", kv_cache_dtype="turboquant_4bit_nc", run_kv_cache_dtype=run)
            add(m, "ROCM_ATTN", kv_cache_dtype="turboquant_4bit_nc", run_kv_cache_dtype="auto")
            add(m, "ROCM_ATTN", kv_cache_dtype="ultraquant_4bit", run_kv_cache_dtype="auto")
    # Every member asked for in a packed run on the ROCm machines (the
    # layout rule) and on one CUDA machine (which has no such rule).
    for m in [plat[1], plat[4], plat[5]]:
        for run in ("turboquant_4bit_nc", "ultraquant_4bit"):
            for name in VLLM_ENUM:
                add(m, name, kv_cache_dtype="auto", run_kv_cache_dtype=run)
    for m in plat:
        for run in BAD_RUN_KV:
            add(m, run_kv_cache_dtype=run)
            add(m, "FOO", run_kv_cache_dtype=run)
            add(m, "FLASH_ATTN", kv_cache_dtype="fp9", run_kv_cache_dtype=run)
    fa4 = ["fa2", "fa3", "fa4", "flashinfer", "flashinfer_cubin", "flashmla"]
    for cc in ("9.0", "10.0", "11.0", "12.0"):
        for inst in (fa4, ["fa2", "fa4"]):
            m = {"family": "cuda", "cc": cc, "installed": inst}
            for run in ("auto", "fp8", "nvfp4", "turboquant_4bit_nc"):
                for kv in ("auto", "fp8"):
                    for hs in (128, 256):
                        add(m, head_size=hs, kv_cache_dtype=kv, run_kv_cache_dtype=run)
                        add(m, "FLASH_ATTN", head_size=hs, kv_cache_dtype=kv,
                            run_kv_cache_dtype=run)
                add(m, "FLASH_ATTN", head_size=256, use_mm_prefix=True, run_kv_cache_dtype=run)
                add(m, "FLASH_ATTN", head_size=256, block_size=128, run_kv_cache_dtype=run)
                add(m, "TRITON_FLASH_ATTN", head_size=256, use_mm_prefix=True,
                    run_kv_cache_dtype=run)
                add(m, "FLASH_ATTN_DIFFKV", head_size=256, kv_cache_dtype="fp8",
                    run_kv_cache_dtype=run)
                add(m, head_size=256, use_mm_prefix=True, run_kv_cache_dtype=run)


def make_cases(seed, count):
    rng = random.Random(seed)
    fams = ["cuda"] * 50 + ["rocm"] * 25 + ["xpu"] * 12 + ["cpu"] * 13
    cases = []
    for c in _hand_picked():
        cases.append(c)
    while len(cases) < count:
        fam = rng.choice(fams)
        m = _machine(rng, fam)
        cfg = _config(rng, fam)
        cases.append({"machine": m, "backend": _backend(rng, fam, cfg), "config": cfg})
    for c in cases:
        blob = json.dumps([c["machine"], c["backend"], c["config"]], sort_keys=True)
        c["id"] = hashlib.sha1(blob.encode()).hexdigest()[:12]
    seen, out = set(), []
    for c in cases:
        if c["id"] not in seen:
            seen.add(c["id"])
            out.append(c)
    return out
