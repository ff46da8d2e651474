#!/usr/bin/env python3
"""libattn against vLLM itself: the same selection cases answered by vLLM
0.32.0's own code (vllm_side.py, in a venv) and by `attn select --json`.

  parity.py [--attn BIN] [--seed N] [--count N] [--venv DIR] [--answers FILE]
            [--write-cases FILE] [--show N] [--platform cuda|rocm|xpu|cpu]

Prints agreement at three levels per platform: same backend or same error
kind; same per-candidate reason lists; byte-identical messages. vLLM's
answers are cached per (vLLM version, seed, case) in the venv folder, so a
rerun only re-runs attn. --write-cases writes vLLM's answers (facts only)
as the case file that tests/test_select_cases.c checks in CI. A case vLLM
gave no answer for is a failure of the tool: counted and listed, never
dropped.
"""

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

VLLM_VERSION = "0.32.0"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write_whole(path, text):
    """Writes text to a temporary file beside path and renames it over path:
    a failed write leaves an existing file as it was (tests/data is tracked)."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ---- the configurations ----------------------------------------------------

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


def machine_key(m):
    return json.dumps(m, sort_keys=True)


def machine_env(m):
    """The environment variables vLLM reads for the machine's settings."""
    env = {}
    names = {"rocm_use_aiter": "VLLM_ROCM_USE_AITER", "rocm_use_aiter_mha":
             "VLLM_ROCM_USE_AITER_MHA", "rocm_use_aiter_mla": "VLLM_ROCM_USE_AITER_MLA"}
    for k, v in m.get("settings", {}).items():
        env[names[k]] = "1" if v else "0"
    return env


# ---- vLLM's answers (cached) ------------------------------------------------


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".parity-ready")
    if os.path.exists(stamp):
        return py
    subprocess.check_call([os.path.join(HERE, "setup_venv.sh"), venv, VLLM_VERSION])
    return py


def no_answer(v):
    """vLLM gave no selection outcome (the harness failed, or vLLM raised
    something that is none); such a case is retried on the next run."""
    return v is None or "harness_error" in v or v.get("error", {}).get("kind") == "other"


def vllm_answers(py, venv, cases, cache_path=None):
    cache_path = cache_path or os.path.join(venv, "answers-%s.json" % VLLM_VERSION)
    cache = {}
    if os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    missing = [c for c in cases if no_answer(cache.get(c["id"]))]
    if missing:
        groups = {}
        for c in missing:
            m = dict(c["machine"])
            m["env"] = machine_env(m)
            # Batch invariance is process-wide in vLLM (an environment
            # variable; supports_trtllm_attention caches what it saw), so
            # each value gets processes of its own, as in a real run.
            m["env"]["VLLM_BATCH_INVARIANT"] = "1" if c["config"].get("use_batch_invariant") else "0"
            k = machine_key(m)
            groups.setdefault(k, {"key": k, "machine": m, "cases": []})["cases"].append(c)
        req = json.dumps({"groups": list(groups.values())})
        print("vLLM: answering %d new cases on %d machines..." % (len(missing), len(groups)),
              file=sys.stderr)
        p = subprocess.run([py, os.path.join(HERE, "vllm_side.py")], input=req,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stderr[-5000:])
            raise SystemExit("vllm_side.py failed")
        if p.stderr.strip():
            sys.stderr.write(p.stderr[-3000:])
        got = json.loads(p.stdout)["answers"]
        cache.update(got)
        write_whole(cache_path, json.dumps(cache))
    return {c["id"]: cache.get(c["id"]) for c in cases}


# ---- libattn's answers ------------------------------------------------------


def attn_args(attn, c):
    m, cfg = c["machine"], c["config"]
    if m["family"] == "cuda":
        spec = "cuda:" + m["cc"]
    elif m["family"] == "rocm":
        spec = "rocm:" + m["gfx"]
    else:
        spec = m["family"]
    args = [attn, "select", "--json", "--machine", spec, "--installed",
            ",".join(m.get("installed", []))]
    for k, v in m.get("settings", {}).items():
        args += ["--setting", "%s=%s" % (k, "true" if v else "false")]
    if c["backend"]:
        args += ["--backend", c["backend"]]
    args += ["--head-size", str(cfg["head_size"]), "--dtype", cfg["dtype"],
             "--kv-cache-dtype", cfg["kv_cache_dtype"] or "None", "--attn-type", cfg["attn_type"]]
    if cfg.get("block_size") is not None:
        args += ["--block-size", str(cfg["block_size"])]
    if cfg.get("num_heads") is not None:
        args += ["--num-heads", str(cfg["num_heads"])]
    if cfg.get("run_kv_cache_dtype") is not None:
        args += ["--run-kv-cache-dtype", cfg["run_kv_cache_dtype"]]
    flags = {"use_mla": "--use-mla", "use_sparse": "--use-sparse", "has_sink": "--has-sink",
             "use_mm_prefix": "--use-mm-prefix",
             "use_per_head_quant_scales": "--per-head-quant-scales",
             "has_sliding_window": "--sliding-window", "use_non_causal": "--non-causal",
             "use_batch_invariant": "--batch-invariant", "use_kv_connector": "--kv-connector",
             "use_pcp": "--pcp", "use_dcp": "--dcp",
             "use_adaptive_verification": "--adaptive-verification", "use_rswa": "--rswa"}
    for k, flag in flags.items():
        if cfg.get(k):
            args.append(flag)
    return args


def attn_answer(attn, c):
    env = dict(os.environ, ATTN_LOG="error", ATTN_SELFTEST="0")
    for k in ("ATTN_PLATFORM", "ATTN_BACKEND", "ATTN_PLUGINS", "ATTN_PLUGIN_PATH"):
        env.pop(k, None)
    p = subprocess.run(attn_args(attn, c), capture_output=True, text=True, env=env)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"cli_error": (p.stderr or p.stdout).strip(), "rc": p.returncode}


# ---- comparison --------------------------------------------------------------


def v_outcome(a):
    if a is None or "harness_error" in a:
        return ("harness", None)
    if "error" in a:
        return ("error", a["error"]["kind"])
    return ("ok", a["selected"])


def l_outcome(a):
    if "cli_error" in a:  # no JSON answer: never an agreement
        return ("cli", a["cli_error"][:80])
    if a.get("error"):
        return ("error", a["error"]["kind"])
    return ("ok", a.get("selected"))


def v_message(a):
    return a["error"]["message"] if a and "error" in a else None


def l_message(a):
    if "cli_error" in a:
        m = a["cli_error"]
        return m[len("attn select: "):] if m.startswith("attn select: ") else m
    return a["error"]["message"] if a.get("error") else None


def v_reasons(a, family=None):
    # XPU and CPU decide without per-candidate reasons (no get_valid_backends).
    if not a or a.get("candidates") is None or family in ("xpu", "cpu"):
        return None
    rows = [(x["name"], x["reasons"]) for x in a["candidates"]]
    # ROCm's get_valid_backends keeps no priority for the rejected backends,
    # so its candidates compare as a set (name -> reasons).
    return sorted(rows) if family == "rocm" else rows


def l_reasons(a, family=None):
    if "candidates" not in a:
        return []
    rows = [(x["name"], x["reasons"]) for x in a["candidates"]]
    return sorted(rows) if family == "rocm" else rows


def compare(cases, vans, lans):
    table = {}
    diffs = []
    for c in cases:
        fam = c["machine"]["family"]
        v, l = vans[c["id"]], lans[c["id"]]
        row = table.setdefault(fam, {"n": 0, "outcome": 0, "reasons": 0, "reasons_n": 0,
                                     "message": 0, "harness": 0})
        row["n"] += 1
        if no_answer(v):
            # No answer from vLLM (the harness failed, or vLLM raised what is no
            # selection outcome): a failure of the tool, counted in every
            # column's total and listed, never dropped.
            row["harness"] += 1
            row["reasons_n"] += 1
            diffs.append((c, "harness", v, l))
            continue
        same_out = v_outcome(v) == l_outcome(l)
        vr = v_reasons(v, fam)
        same_r = vr is None or vr == l_reasons(l, fam)
        same_m = v_message(v) == l_message(l)
        row["outcome"] += same_out
        if vr is not None:
            row["reasons_n"] += 1
            row["reasons"] += vr == l_reasons(l, fam)
        row["message"] += same_m and same_out
        if not (same_out and same_r and same_m):
            level = "outcome" if not same_out else ("reasons" if not same_r else "message")
            diffs.append((c, level, v, l))
    return table, diffs


def print_table(table):
    print("%-10s %6s %22s %22s %22s %8s" % ("platform", "cases", "same selection/error",
                                             "same reason lists", "identical messages",
                                             "no-answer"))
    tot = {"n": 0, "outcome": 0, "reasons": 0, "reasons_n": 0, "message": 0, "harness": 0}
    gpu = dict(tot)

    def line(name, r):
        pct = lambda a, b: "%d/%d (%.2f%%)" % (a, b, 100.0 * a / b if b else 100.0)  # noqa
        print("%-10s %6d %22s %22s %22s %8d" % (name, r["n"], pct(r["outcome"], r["n"]),
                                                 pct(r["reasons"], r["reasons_n"]),
                                                 pct(r["message"], r["n"]), r["harness"]))

    for fam in ("cuda", "rocm", "xpu", "cpu"):
        if fam not in table:
            continue
        r = table[fam]
        line(fam.upper(), r)
        for k in tot:
            tot[k] += r[k]
            if fam != "cpu":
                gpu[k] += r[k]
    line("GPU (C+R+X)", gpu)
    line("all", tot)


def show_diff(c, level, v, l):
    print("--- %s diff, case %s" % (level, c["id"]))
    print("    cmd: %s" % " ".join(attn_args("attn", c)))
    print("    vllm: %s" % json.dumps(v_outcome(v)))
    print("    attn: %s" % json.dumps(l_outcome(l)))
    if level == "reasons":
        vr, lr = v_reasons(v, c["machine"]["family"]), l_reasons(l, c["machine"]["family"])
        for i in range(max(len(vr), len(lr))):
            a = vr[i] if i < len(vr) else None
            b = lr[i] if i < len(lr) else None
            if a != b:
                print("    vllm[%d]: %s\n    attn[%d]: %s" % (i, a, i, b))
    if level in ("message", "outcome"):
        print("    vllm msg: %s" % (v_message(v) if v else v))
        print("    attn msg: %s" % l_message(l))
    if level == "harness":
        print("    %s" % (v or {}).get("trace", v))


def write_cases(path, cases, vans):
    out = []
    for c in cases:
        v = vans[c["id"]]
        if no_answer(v):
            continue
        e = {"id": c["id"], "machine": c["machine"], "backend": c["backend"],
             "config": c["config"]}
        if "error" in v:
            e["expect"] = {"error": v["error"]["kind"], "message": v["error"]["message"]}
        else:
            e["expect"] = {"selected": v["selected"]}
        out.append(e)
    write_whole(path, '{"vllm": "%s", "generator": "tools/vllm-parity/parity.py", "cases": [\n'
                % VLLM_VERSION + ",\n".join(json.dumps(e, sort_keys=True) for e in out) + "\n]}\n")
    print("wrote %d cases to %s" % (len(out), path), file=sys.stderr)


def cause_of(c, v, l):
    """A short, honest category for an outcome difference (known-diffs.txt)."""
    fam = c["machine"]["family"]
    if fam == "cpu":  # the three classes docs/vllm-parity.md names
        if v and v.get("error", {}).get("kind") == "not-supported":
            return ("deliberate (CPU): sparse MLA, which vLLM's CPU platform lacks and "
                    "libattn's CPU_MLA_SPARSE/REFERENCE_MLA_SPARSE serve")
        if c["backend"]:
            return ("deliberate (CPU): an explicit request is a hard requirement "
                    "(vLLM's CPU platform ignores it)")
        return ("deliberate (CPU): libattn validates against its own CPU kernels "
                "(vLLM's CPU platform does not validate)")
    if v and v.get("error", {}).get("kind") == "other":
        return "harness: vLLM raised %s" % v["error"]["type"]
    return "rule not yet ported (see make parity --show)"


def write_known(path, cases, vans, lans):
    rows = []
    for c in cases:
        v, l = vans[c["id"]], lans[c["id"]]
        if no_answer(v):
            continue
        if v_outcome(v) != l_outcome(l):
            rows.append("%s %s" % (c["id"], cause_of(c, v, l)))
    write_whole(path, "# Cases of vllm-0.32.0-cases.json where libattn's outcome differs from\n"
                "# vLLM's, each with its cause. Written by tools/vllm-parity/parity.py;\n"
                "# test_select_cases fails when a listed case starts agreeing.\n"
                + "\n".join(rows) + "\n")
    print("wrote %d known differences to %s" % (len(rows), path), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "attn"))
    ap.add_argument("--seed", type=int, default=27006)
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--venv", default=os.environ.get("PARITY_VENV",
                                                     os.path.join(HERE, ".venv")))
    ap.add_argument("--answers", default=os.environ.get("PARITY_ANSWERS"),
                    help="vLLM's cached answers (default: answers-<version>.json in the venv "
                    "folder; another file keeps a shared venv read-only)")
    ap.add_argument("--write-cases", metavar="FILE")
    ap.add_argument("--show", type=int, default=20, help="diffs to print (default 20)")
    ap.add_argument("--platform", help="only show diffs of this family")
    ap.add_argument("--level", help="only show diffs of this level")
    a = ap.parse_args()
    cases = make_cases(a.seed, a.count)
    py = ensure_venv(a.venv)
    vans = vllm_answers(py, a.venv, cases, a.answers)
    with ThreadPoolExecutor(max_workers=2) as ex:
        lans = dict(zip([c["id"] for c in cases], ex.map(lambda c: attn_answer(a.attn, c),
                                                         cases)))
    table, diffs = compare(cases, vans, lans)
    print("vLLM %s vs %s, seed %d, %d configurations" % (VLLM_VERSION, a.attn, a.seed,
                                                          len(cases)))
    print_table(table)
    shown = 0
    for d in diffs:
        if a.platform and d[0]["machine"]["family"] != a.platform:
            continue
        if a.level and d[1] != a.level:
            continue
        if shown >= a.show:
            break
        show_diff(*d)
        shown += 1
    if a.write_cases:
        write_cases(a.write_cases, cases, vans)
        known = a.write_cases.replace("-cases.json", "-known-diffs.txt")
        if known != a.write_cases:
            write_known(known, cases, vans, lans)


if __name__ == "__main__":
    main()
