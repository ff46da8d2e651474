/* Each platform's priority list (reference §6 with the preface's newer
 * CUDA lists), through attn_platform_priorities: CUDA by capability, MLA,
 * kv dtype, num_heads, non-causal and multimodal prefix; ROCm by AITER
 * availability and settings; libattn's CPU lists; XPU's fixed decision. */
#include <stdio.h>
#include <string.h>

#include "test.h"

static void expect_list(const char *machine, const char *installed, const char *const *settings,
                        const attn_selector_config *c, const char *want, int line)
{
    attn_platform *p = NULL;
    if (attn_platform_open(machine, &p) != ATTN_OK) {
        CHECK_MSG(0, "line %d: cannot open %s: %s", line, machine, attn_last_error());
        return;
    }
    if (installed) attn_platform_set_installed(p, installed);
    for (int i = 0; settings && settings[i]; i++)
        CHECK_OK(attn_platform_set_setting(p, settings[i]));
    const char *names[32];
    int n = attn_platform_priorities(p, c, names, 32);
    char got[1024] = "";
    size_t o = 0;
    for (int i = 0; i < n && i < 32; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%s", i ? " " : "", names[i]);
    CHECK_MSG(!strcmp(got, want), "line %d (%s): got [%s], want [%s]", line, machine, got, want);
    attn_platform_free(p);
}
#define LIST(m, inst, set, c, want) expect_list((m), (inst), (set), (c), (want), __LINE__)

static attn_selector_config cfg(void)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = 128;
    return c;
}

static void test_cuda(void)
{
    attn_selector_config c = cfg();
    const char *std9 = "FLASH_ATTN FLASHINFER TRITON_ATTN FLEX_ATTENTION TURBOQUANT";
    LIST("cuda:9.0", NULL, NULL, &c, std9);
    LIST("cuda:8.0", NULL, NULL, &c, std9);
    LIST("cuda:7.5", NULL, NULL, &c, std9);
    LIST("cuda:12.0", NULL, NULL, &c, std9);
    LIST("cuda:10.0", NULL, NULL, &c,
         "FLASHINFER FLASH_ATTN TRITON_ATTN FLEX_ATTENTION TURBOQUANT");
    LIST("cuda:10.3", NULL, NULL, &c,
         "FLASHINFER FLASH_ATTN TRITON_ATTN FLEX_ATTENTION TURBOQUANT");
    c.use_non_causal = true;
    LIST("cuda:10.0", NULL, NULL, &c, std9);
    c = cfg();
    c.use_mm_prefix = true;
    LIST("cuda:10.0", NULL, NULL, &c,
         "TRITON_FLASHINFER FLASHINFER FLASH_ATTN TRITON_ATTN FLEX_ATTENTION TURBOQUANT");
    LIST("cuda:9.0", NULL, NULL, &c,
         "TRITON_FLASH_ATTN FLASH_ATTN FLASHINFER TRITON_ATTN FLEX_ATTENTION TURBOQUANT");
    LIST("cuda:8.0", NULL, NULL, &c, std9);

    c = cfg();
    c.use_mla = true;
    c.head_size = 576;
    const char *six =
        "FLASHINFER_MLA TOKENSPEED_MLA CUTLASS_MLA FLASH_ATTN_MLA FLASHMLA TRITON_MLA";
    char want[512];
    snprintf(want, sizeof want, "%s FLASHMLA_SPARSE FLASHINFER_MLA_SPARSE", six);
    LIST("cuda:10.0", NULL, NULL, &c, want); /* num_heads None */
    c.num_heads = 128;
    LIST("cuda:10.0", NULL, NULL, &c, want);
    snprintf(want, sizeof want, "%s FLASHINFER_MLA_SPARSE FLASHMLA_SPARSE", six);
    c.num_heads = 16;
    LIST("cuda:10.0", NULL, NULL, &c, want);
    c.num_heads = 128;
    c.kv_cache_dtype = ATTN_KV_FP8;
    LIST("cuda:10.0", NULL, NULL, &c, want);
    c.kv_cache_dtype = ATTN_KV_NVFP4;
    LIST("cuda:10.0", NULL, NULL, &c, want);
    c.kv_cache_dtype = ATTN_KV_INT8_PER_TOKEN_HEAD;
    LIST("cuda:10.0", NULL, NULL, &c, want);
    c.kv_cache_dtype = ATTN_KV_NONE;
    snprintf(want, sizeof want, "%s FLASHMLA_SPARSE FLASHINFER_MLA_SPARSE", six);
    LIST("cuda:10.0", NULL, NULL, &c, want);
    /* vLLM 0.32.0: SM 12.x has its own MLA list; elsewhere the sparse tail
     * ends with FlashInfer's SM90 kernel, which leads it for head size 512. */
    const char *mla9 = "FLASH_ATTN_MLA FLASHMLA FLASHINFER_MLA TRITON_MLA FLASH_ATTN_MLA_SPARSE "
                       "FLASHMLA_SPARSE FLASHINFER_MLA_SPARSE_SM90";
    LIST("cuda:9.0", NULL, NULL, &c, mla9);
    LIST("cuda:12.0", NULL, NULL, &c, "TRITON_MLA FLASHINFER_MLA_SPARSE_SM120");
    LIST("cuda:8.0", NULL, NULL, &c, mla9);
    c.head_size = 512;
    LIST("cuda:9.0", NULL, NULL, &c,
         "FLASH_ATTN_MLA FLASHMLA FLASHINFER_MLA TRITON_MLA FLASHINFER_MLA_SPARSE_SM90 "
         "FLASH_ATTN_MLA_SPARSE FLASHMLA_SPARSE");
}

static void test_rocm(void)
{
    attn_selector_config c = cfg();
    const char *on[] = {"rocm_use_aiter=true", NULL};
    const char *on_nomha[] = {"rocm_use_aiter=true", "rocm_use_aiter_mha=false", NULL};
    const char *on_nomla[] = {"rocm_use_aiter=1", "rocm_use_aiter_mla=0", NULL};
    LIST("rocm:gfx942", "", NULL, &c, "ROCM_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    LIST("rocm:gfx942", "aiter", NULL, &c,
         "ROCM_ATTN ROCM_AITER_UNIFIED_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    LIST("rocm:gfx942", "aiter", on, &c,
         "ROCM_ATTN ROCM_AITER_FA ROCM_AITER_UNIFIED_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    LIST("rocm:gfx950", "aiter", on_nomha, &c,
         "ROCM_ATTN ROCM_AITER_UNIFIED_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    LIST("rocm:gfx90a", "aiter", on, &c, "ROCM_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    LIST("rocm:gfx942", "", on, &c, "ROCM_ATTN TRITON_ATTN TURBOQUANT ULTRAQUANT");
    c.use_mla = true;
    LIST("rocm:gfx942", "", NULL, &c, "TRITON_MLA");
    LIST("rocm:gfx942", "aiter", NULL, &c, "TRITON_MLA");
    LIST("rocm:gfx942", "aiter", on, &c, "ROCM_AITER_MLA TRITON_MLA ROCM_AITER_TRITON_MLA");
    LIST("rocm:gfx942", "aiter", on_nomla, &c, "TRITON_MLA");
    c.use_sparse = true;
    LIST("rocm:gfx942", "aiter", on, &c, "ROCM_AITER_MLA_SPARSE");
    c.use_mla = false;
    LIST("rocm:gfx942", "", NULL, &c, "ROCM_AITER_MLA_SPARSE");
}

static void test_cpu_xpu(void)
{
    attn_selector_config c = cfg();
    LIST("cpu", NULL, NULL, &c, "CPU_ATTN REFERENCE");
    c.use_mla = true;
    LIST("cpu", NULL, NULL, &c, "CPU_MLA CPU_MLA_SPARSE REFERENCE_MLA REFERENCE_MLA_SPARSE");
    c = cfg();
    LIST("xpu", NULL, NULL, &c, "FLASH_ATTN");
    c.dtype = ATTN_DTYPE_FP32;
    LIST("xpu", NULL, NULL, &c, "TRITON_ATTN");
    c.use_mla = true; /* FLASH_ATTN_MLA's XPU variant when valid, else TRITON_MLA */
    LIST("xpu", NULL, NULL, &c, "FLASH_ATTN_MLA TRITON_MLA");
    c = cfg();
    c.use_batch_invariant = true; /* FlashAttention on XPU is not batch-invariant */
    LIST("xpu", NULL, NULL, &c, "TRITON_ATTN");
    c.use_batch_invariant = false;
    c.use_mm_prefix = true; /* ... and has no multimodal prefix */
    LIST("xpu", NULL, NULL, &c, "TRITON_ATTN");
    c.use_mla = true;
    c.use_sparse = true;
    LIST("xpu", NULL, NULL, &c, "XPU_MLA_SPARSE");
    c.kv_cache_dtype = ATTN_KV_TURBOQUANT_K8V4;
    LIST("xpu", NULL, NULL, &c, "TURBOQUANT");
}

static void test_truncation(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    attn_selector_config c = cfg();
    const char *names[2] = {NULL, NULL};
    CHECK(attn_platform_priorities(p, &c, names, 2) == 5); /* full count, two written */
    CHECK_STR(names[1], "FLASHINFER");
    attn_platform_free(p);
}

int main(void)
{
    test_cuda();
    test_rocm();
    test_cpu_xpu();
    test_truncation();
    return attn_test_finish("test_select_priorities");
}
