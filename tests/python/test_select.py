"""Selection through the Python API: the standard answers, the repository's
case file, failures (vLLM's message and every candidate's reasons), and
malformed arguments."""

import json

import pytest

import libattn
from conftest import load_cases

CASES = load_cases()


def test_h100_bf16_picks_flash_attn():
    s = libattn.select(head_size=128, dtype="bf16", machine="h100")
    assert s.backend == "FLASH_ATTN"
    assert s.ok and s.error is None and s.message is None
    assert s.candidates[0].name == "FLASH_ATTN" and s.candidates[0].valid
    assert s.candidates[0].priority == 0
    d = json.loads(s.to_json())
    assert d == s.to_dict()
    assert "FLASH_ATTN" in s.to_json()
    assert s.config["head_size"] == 128 and s.config["dtype"] == "bf16"


def test_cpu_machine_picks_cpu_attn():
    assert libattn.select(machine="cpu").backend == "CPU_ATTN"


def test_mla_on_h100_is_an_mla_backend():
    s = libattn.select(head_size=576, use_mla=True, machine="h100", num_heads=128)
    names = {b.name: b for b in libattn.backends(machine="h100")}
    assert names[s.backend].is_mla


def test_explicit_invalid_raises_with_vllm_message_and_candidates():
    with pytest.raises(libattn.SelectionError) as ei:
        libattn.select(head_size=128, dtype="fp32", machine="h100", backend="FLASH_ATTN")
    e = ei.value
    assert e.kind == "explicit-invalid"
    assert "Selected backend" in e.message and "is not valid" in e.message
    assert "FLASH_ATTN" in e.message
    assert [c.name for c in e.candidates] == ["FLASH_ATTN"]
    assert e.candidates[0].priority == -1 and not e.candidates[0].valid
    assert any("dtype" in r for r in e.candidates[0].reasons)
    assert isinstance(e, libattn.Error)


def test_failure_returned_when_asked():
    s = libattn.select(dtype="fp32", machine="h100", backend="FLASH_ATTN", raise_on_error=False)
    assert s.backend is None and not s.ok and s.error == "explicit-invalid"
    assert "FLASH_ATTN" in s.explain()


def test_unknown_backend_name():
    with pytest.raises(libattn.SelectionError) as ei:
        libattn.select(machine="h100", backend="NOT_A_BACKEND")
    assert ei.value.kind == "unknown-name"
    assert "NOT_A_BACKEND" in ei.value.message


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype"):
        libattn.select(dtype="int7")
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        libattn.select(kv_cache_dtype="fp9")
    with pytest.raises(ValueError, match="attn_type"):
        libattn.select(attn_type="sideways")
    with pytest.raises(TypeError, match="use_mla"):
        libattn.select(use_mla=1)
    with pytest.raises(TypeError, match="unknown selector config field"):
        libattn._select.select_config({"head_size": 64, "no_such_field": True})
    with pytest.raises(libattn.Error) as ei:
        libattn.select(machine="no-such-machine")
    assert ei.value.status == "NOT_FOUND" and "no-such-machine" in ei.value.message


def test_run_kv_cache_dtype():
    # A turboquant run's layer at the native dtype on MI300X with AITER: the
    # backends that share no KV layout with TURBOQUANT are refused.
    s = libattn.select(machine="mi300x", installed=["aiter"], kv_cache_dtype="auto",
                       run_kv_cache_dtype="turboquant_4bit_nc")
    assert s.backend == "TRITON_ATTN"
    assert s.config["run_kv_cache_dtype"] == "turboquant_4bit_nc"
    rocm = next(c for c in s.candidates if c.name == "ROCM_ATTN")
    assert rocm.reasons == ["no KV cache layout in common with TURBOQUANT"]
    # Not given: the layer's own, recorded as such.
    s = libattn.select(machine="mi300x", installed=["aiter"])
    assert s.backend == "ROCM_ATTN" and s.config["run_kv_cache_dtype"] == "auto"
    with pytest.raises(ValueError, match="run_kv_cache_dtype: Input should be 'auto', 'float16'"):
        libattn.select(run_kv_cache_dtype="fp9")
    assert "run_kv_cache_dtype" in libattn._select.config_fields


def test_platform_and_backends():
    p = libattn.platform("h100")
    assert isinstance(p, dict) and "h100" in json.dumps(p)
    local = libattn.platform()
    assert isinstance(local, dict)
    names = [b.name for b in libattn.backends()]
    for n in ("FLASH_ATTN", "CPU_ATTN", "CPU_MLA", "REFERENCE"):
        assert n in names
    ref = next(b for b in libattn.backends() if b.name == "REFERENCE")
    assert ref.resolved and ref.has_kernel and not ref.is_mla
    assert "h100" in libattn.machines()
    with pytest.raises(ValueError, match="simulated machine"):
        libattn.platform(installed=["fa2"])


def test_help_reads_well():
    doc = libattn.select.__doc__
    for word in ("head_size", "machine", "backend", "SelectionError", "Returns"):
        assert word in doc
    assert libattn.__doc__ and "FLASH_ATTN" in libattn.__doc__


def _run_case(case):
    cfg = dict(case["config"])
    unknown = set(cfg) - set(libattn._select.config_fields)
    assert not unknown, f"case uses selector fields this build lacks: {sorted(unknown)}"
    m = case["machine"]
    fam = m["family"]
    machine = f"cuda:{m['cc']}" if fam == "cuda" else f"rocm:{m['gfx']}" if fam == "rocm" else fam
    return libattn._select.select_config(
        cfg, machine=machine, backend=case.get("backend"),
        installed=m.get("installed", []), settings=dict(m.get("settings") or {}),
        raise_on_error=False,
    )


@pytest.mark.skipif(not CASES, reason="no selection case file in tests/data")
@pytest.mark.parametrize("name,case", CASES, ids=[f"{n}:{c['id']}" for n, c in CASES])
def test_case_file(name, case):
    ex = case["expect"]
    try:
        s = _run_case(case)
    except ValueError as e:
        # A kv string that is no CacheDType is refused with vLLM's text; when
        # vLLM refuses the requested name first, the name is what must fail.
        # vLLM's CacheConfig refuses a bad run dtype before anything else.
        assert "kv_cache_dtype" in str(e)
        if ex.get("error") == "invalid-config" and ex["message"] in str(e):
            return
        s = None
        try:
            s = _run_case(dict(case, config=dict(case["config"], kv_cache_dtype="auto")))
        except ValueError as e2:
            assert ex.get("error") == "invalid-config" and ex["message"] in str(e2), str(e2)
            return
    if ex.get("selected"):
        assert s.backend == ex["selected"], s.message
    if ex.get("error"):
        assert not s.ok and s.error == ex["error"], s.backend
    for frag in ex.get("contains", []):
        assert frag in (s.message or "")


def test_package_names_its_library():
    import os

    assert os.path.basename(libattn.library).startswith("libattn.so.")
    assert os.path.isfile(libattn.library) and os.path.isfile(libattn.extension)
    assert libattn.__version__.count(".") == 2
