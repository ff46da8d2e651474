/* The catalog's descriptors: one per backend of reference §4/§5 (none for
 * TORCH_SDPA, NO_ATTENTION, CUSTOM), each well formed, named like its
 * registry entry, with a metadata builder; KV-cache shapes and stride
 * orders per family (reference §5, §12); get_name() differences. */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "registry/registry_impl.h"
#include "test.h"

static const attn_backend_desc *desc_of(const char *name)
{
    const attn__catalog_entry *e = attn__catalog_find(name);
    const attn_backend *b = e && e->builtin ? e->builtin() : NULL;
    return b ? b->desc : NULL;
}

static void test_entries(void)
{
    /* Derived, not stated: before any registration the registry lists the
     * catalog and nothing else. */
    int n = attn__catalog_count();
    CHECK(n > 0 && n == attn_registry_count() && n == attn_backend_catalog_count());
    for (int i = 0; i < attn__catalog_count(); i++) {
        const attn__catalog_entry *e = attn__catalog_at(i);
        CHECK_STR(attn_registry_name(i), e->name);
        const attn_backend *b = e->builtin ? e->builtin() : NULL;
        bool none = !strcmp(e->name, "TORCH_SDPA") || !strcmp(e->name, "NO_ATTENTION") ||
                    !strcmp(e->name, "CUSTOM") || e->auto_alias;
        CHECK_MSG(none == (b == NULL), "%s: built-in object %s", e->name, b ? "present" : "absent");
        CHECK_MSG(none == (e->default_locator == NULL) || !strcmp(e->name, "NO_ATTENTION"),
                  "%s: default locator", e->name);
        CHECK_MSG(e->auto_alias ==
                      (!strcmp(e->name, "CUTLASS_MSA") || !strcmp(e->name, "TRITON_MSA")),
                  "%s: auto alias", e->name);
        if (!b) continue;
        CHECK_MSG(attn__backend_check_abi(b, e->name) == ATTN_OK, "%s: %s", e->name,
                  attn_last_error());
        CHECK_STR(b->desc->name, e->name);
        CHECK_MSG(b->desc->builder != NULL, "%s has no metadata builder", e->name);
        CHECK_MSG(b->desc->kv_cache_shape != NULL, "%s has no KV shape", e->name);
        /* Only libattn's CPU backends carry kernels. */
        bool cpu = !strcmp(e->name, "CPU_ATTN") || !strcmp(e->name, "CPU_MLA") ||
                   !strcmp(e->name, "REFERENCE") || !strcmp(e->name, "CPU_MLA_SPARSE") ||
                   !strcmp(e->name, "REFERENCE_MLA") || !strcmp(e->name, "REFERENCE_MLA_SPARSE");
        CHECK_MSG(cpu == (b->kernel != NULL), "%s: kernel %p", e->name, (const void *)b->kernel);
    }
    CHECK(attn__catalog_at(-1) == NULL && attn__catalog_at(n) == NULL);
    CHECK(attn__catalog_find(NULL) == NULL && attn__catalog_find("flash_attn") == NULL);
    const char *why = NULL;
    CHECK(attn__catalog_builtin("CUSTOM", &why) == NULL);
    CHECK_STR(why, "libattn has no built-in backend named CUSTOM");
    CHECK_STR(desc_of("ROCM_AITER_FA")->display_name, "FLASH_ATTN");
    CHECK_STR(desc_of("ROCM_AITER_TRITON_MLA")->display_name, "AITER_TRITON_MLA");
    CHECK(desc_of("FLASH_ATTN")->display_name == NULL);
}

static void test_capabilities(void)
{
    const attn_backend_desc *fi = desc_of("FLASHINFER");
    CHECK(fi->n_block_sizes == 3 && fi->block_sizes[2] == 64);
    CHECK(fi->heads.n_sizes == 4 && fi->cc_min.major == 8 && fi->cc_min.minor == 0);
    CHECK(fi->cc_max.major == 12 && fi->cc_max.minor == 1);
    CHECK(fi->import_requires == 1u << ATTN_COMPONENT_FLASHINFER);
    CHECK(fi->attn_types == ATTN_TYPE_BIT(ATTN_TYPE_DECODER));
    const attn_backend_desc *tq = desc_of("TURBOQUANT");
    CHECK(tq->kv_none_rejected && tq->n_block_sizes == 4);
    const attn_backend_desc *fms = desc_of("FLASHMLA_SPARSE");
    CHECK(fms->is_sparse && fms->is_mla && fms->dtypes == ATTN_DTYPE_BIT(ATTN_DTYPE_BF16));
    CHECK(desc_of("TRITON_FLASHINFER")->supports_mm_prefix);
    CHECK(!desc_of("FLASHINFER")->supports_mm_prefix);
    CHECK(desc_of("TRITON_FLASH_ATTN")->supports_mm_prefix);
    CHECK(desc_of("TRITON_FLASHINFER")->import_requires == fi->import_requires);
    CHECK(desc_of("FLASHINFER_MLA")->required_layout == ATTN_LAYOUT_HND);
    CHECK(desc_of("TOKENSPEED_MLA")->required_layout == ATTN_LAYOUT_HND);
    CHECK(desc_of("FLASHINFER_MLA_SPARSE")->required_layout == ATTN_LAYOUT_HND);
    CHECK(desc_of("CUTLASS_MLA")->cg_support == ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE);
    CHECK(desc_of("XPU_MLA_SPARSE")->cg_support == ATTN_CG_NEVER);
    CHECK(desc_of("TRITON_ATTN")->cg_support == ATTN_CG_ALWAYS);
}

static void shape(const char *name, int hs, attn_kv_dtype kv, const char *want)
{
    const attn_backend_desc *d = desc_of(name);
    attn_kv_shape s;
    memset(&s, 0, sizeof s);
    attn_status st = d->kv_cache_shape(10, 16, 4, hs, kv, &s);
    char got[256] = "";
    size_t o = 0;
    for (int i = 0; st == ATTN_OK && i < s.ndim; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%lld:%s", i ? " " : "",
                              (long long)s.dims[i], s.dim_names[i]);
    CHECK_MSG(st == ATTN_OK && !strcmp(got, want), "%s shape: %s (%s), want %s", name, got,
              attn_status_name(st), want);
}

static void order(const char *name, attn_kv_layout l, bool layers, const char *want,
                  attn_status want_st)
{
    const attn_backend_desc *d = desc_of(name);
    int o[6] = {0}, n = 0;
    attn_status st = d->kv_stride_order(l, layers, o, &n);
    char got[64] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(got + k, sizeof got - k, "%d", o[i]);
    CHECK_MSG(st == want_st && !strcmp(got, want), "%s %s%s: %s, want %s", name,
              attn_layout_name(l), layers ? " +layers" : "", got, want);
}

static void test_shapes(void)
{
    shape("FLASH_ATTN", 128, ATTN_KV_AUTO,
          "2:2 10:num_blocks 16:block_size 4:num_kv_heads 128:head_size");
    shape("FLASH_ATTN_DIFFKV", 64, ATTN_KV_AUTO,
          "10:num_blocks 16:block_size 4:num_kv_heads 192:head_size+head_size_v");
    shape("FLASHINFER", 128, ATTN_KV_AUTO,
          "10:num_blocks 2:2 16:block_size 4:num_kv_heads 128:head_size");
    shape("FLASHINFER", 128, ATTN_KV_NVFP4,
          "10:num_blocks 2:2 16:block_size 4:num_kv_heads 72:head_size");
    shape("TRITON_ATTN", 128, ATTN_KV_INT8_PER_TOKEN_HEAD,
          "10:num_blocks 2:2 16:block_size 4:num_kv_heads 132:head_size");
    shape("TRITON_ATTN", 128, ATTN_KV_FP8,
          "10:num_blocks 2:2 16:block_size 4:num_kv_heads 128:head_size");
    shape("FLEX_ATTENTION", 64, ATTN_KV_AUTO,
          "2:2 10:num_blocks 16:block_size 4:num_kv_heads 64:head_size");
    shape("ROCM_ATTN", 64, ATTN_KV_AUTO,
          "2:2 10:num_blocks 16:block_size 4:num_kv_heads 64:head_size");
    shape("TURBOQUANT", 128, ATTN_KV_TURBOQUANT_K8V4,
          "10:num_blocks 16:block_size 4:num_kv_heads 208:slot_size_aligned");
    shape("TRITON_MLA", 576, ATTN_KV_AUTO, "10:num_blocks 16:block_size 576:head_size");
    shape("FLASHMLA_SPARSE", 576, ATTN_KV_FP8_DS_MLA, "10:num_blocks 16:block_size 656:head_size");
    shape("FLASHMLA_SPARSE", 576, ATTN_KV_BFLOAT16, "10:num_blocks 16:block_size 576:head_size");

    attn_kv_shape s;
    CHECK_STATUS(desc_of("FLASH_ATTN")->kv_cache_shape(10, 24, 4, 128, ATTN_KV_AUTO, &s),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(), "Block size must be a multiple of 16.");
    CHECK_STATUS(desc_of("FLASH_ATTN_DIFFKV")->kv_cache_shape(10, 8, 4, 128, ATTN_KV_AUTO, &s),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(desc_of("TURBOQUANT")->kv_cache_shape(10, 16, 4, 128, ATTN_KV_AUTO, &s),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(desc_of("ROCM_ATTN")->kv_cache_shape(0, 16, 4, 128, ATTN_KV_AUTO, &s),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(desc_of("ROCM_ATTN")->kv_cache_shape(1, 16, 4, 128, ATTN_KV_AUTO, NULL),
                 ATTN_NULL_ARGUMENT);

    order("FLASH_ATTN", ATTN_LAYOUT_NHD, false, "01234", ATTN_OK);
    order("FLASH_ATTN", ATTN_LAYOUT_HND, false, "01324", ATTN_OK);
    order("FLASH_ATTN", ATTN_LAYOUT_NHD, true, "201345", ATTN_OK);
    order("FLASH_ATTN", ATTN_LAYOUT_HND, true, "240135", ATTN_OK);
    order("FLASHINFER", ATTN_LAYOUT_NHD, false, "01234", ATTN_OK);
    order("FLASHINFER", ATTN_LAYOUT_HND, false, "01324", ATTN_OK);
    order("TRITON_ATTN", ATTN_LAYOUT_NHD, true, "102345", ATTN_OK);
    order("TRITON_ATTN", ATTN_LAYOUT_HND, true, "124035", ATTN_OK);
    order("FLASHMLA", ATTN_LAYOUT_NHD, false, "012", ATTN_OK);
    order("FLASHMLA", ATTN_LAYOUT_HND, true, "0123", ATTN_UNSUPPORTED);
    /* Families without a stride order use their logical shape. */
    CHECK(desc_of("FLEX_ATTENTION")->kv_stride_order == NULL);
    CHECK(desc_of("ROCM_ATTN")->kv_stride_order == NULL);
    CHECK(desc_of("TURBOQUANT")->kv_stride_order == NULL);
    CHECK(desc_of("FLASH_ATTN_DIFFKV")->kv_stride_order == NULL);
}

int main(void)
{
    test_entries();
    test_capabilities();
    test_shapes();
    return attn_test_finish("test_registry_catalog");
}
