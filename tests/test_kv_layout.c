/* KV-cache shape and strides per backend and layout, from the catalog's own
 * descriptors (reference §5 shapes, §12 stride orders): FLASH_ATTN
 * (2,nb,bs,h,d) NHD identity / HND (0,1,3,2,4); FLASHINFER and TRITON
 * (nb,2,bs,h,d); CPU_ATTN (2,nb,h,bs,d); MLA (nb,bs,d); FLASH_ATTN_DIFFKV
 * K|V side by side. Also the layout resolution and the cache memory. */
#include "attn/kvcache.h"
#include "backends/catalog/catalog.h"
#include "backends/cpu/cpu_attn.h"
#include "registry/catalog_table.h"
#include "test.h"

static const attn_backend_desc *desc(const char *name)
{
    const char *why = NULL;
    const attn_backend *b = attn__catalog_builtin(name, &why);
    CHECK_MSG(b && b->desc, "%s: %s", name, why ? why : "no descriptor");
    return b ? b->desc : NULL;
}

#define I64_EQ(got, ...)                                                                           \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        attn_test_checks++;                                                                        \
        if (memcmp((got), want_, sizeof want_) != 0) {                                             \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s differs:", __FILE__, __LINE__, #got);                       \
            for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                         \
                fprintf(stderr, " %lld/%lld", (long long)(got)[i_], (long long)want_[i_]);         \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define I32_EQ(got, ...)                                                                           \
    do {                                                                                           \
        const int want_[] = {__VA_ARGS__};                                                         \
        attn_test_checks++;                                                                        \
        if (memcmp((got), want_, sizeof want_) != 0) {                                             \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s differs\n", __FILE__, __LINE__, #got);                      \
        }                                                                                          \
    } while (0)

/* nb 10, bs 16, 8 KV heads, head 128, bf16 */
static attn_kv_layout_info layout_of(const attn_backend_desc *d, attn_kv_layout l, int bs, int hs)
{
    attn_kv_layout_info li;
    memset(&li, 0, sizeof li);
    CHECK_OK(attn_kv_layout_compute(d, l, 10, bs, 8, hs, 0, ATTN_KV_AUTO, ATTN_DTYPE_BF16, &li));
    return li;
}

static void test_flash_attn(void)
{
    const attn_backend_desc *d = desc("FLASH_ATTN");
    if (!d) return;
    attn_kv_layout_info li = layout_of(d, ATTN_LAYOUT_NHD, 16, 128);
    char buf[64];
    attn_kv_shape_format(&li.shape, buf, sizeof buf);
    CHECK_STR(buf, "(2, 10, 16, 8, 128)");
    I32_EQ(li.stride_order, 0, 1, 2, 3, 4);
    I64_EQ(li.strides, 163840, 16384, 1024, 128, 1);
    CHECK(li.view.k_offset == 0 && li.view.v_offset == 163840);
    CHECK(li.view.stride_block == 16384 && li.view.stride_token == 1024 &&
          li.view.stride_head == 128);
    CHECK(li.view.elem == ATTN_ELEM_BF16 && li.bytes_per_layer == 327680u * 2);
    CHECK(li.bytes_per_block == 2u * 16 * 8 * 128 * 2);
    CHECK(li.has_v && li.writable && li.view.head_size_v == 128 && li.view.num_kv_heads == 8);

    li = layout_of(d, ATTN_LAYOUT_HND, 16, 128);
    I32_EQ(li.stride_order, 0, 1, 3, 2, 4);
    /* memory (2, nb, h, bs, d) */
    I64_EQ(li.strides, 163840, 16384, 128, 2048, 1);
    CHECK(li.view.stride_token == 128 && li.view.stride_head == 2048 &&
          li.view.stride_block == 16384 && li.view.v_offset == 163840);
    CHECK(li.layout == ATTN_LAYOUT_HND);

    /* the backend's own rule */
    attn_kv_layout_info bad;
    CHECK_STATUS(attn_kv_layout_compute(d, ATTN_LAYOUT_NHD, 10, 8, 8, 128, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_BF16, &bad),
                 ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "Block size must be a multiple of 16.");
    /* fp8 storage: one byte */
    CHECK_OK(attn_kv_layout_compute(d, ATTN_LAYOUT_NHD, 10, 16, 8, 128, 0, ATTN_KV_FP8,
                                    ATTN_DTYPE_BF16, &li));
    CHECK(li.view.elem == ATTN_ELEM_FP8_E4M3 && li.bytes_per_layer == 327680u && li.writable);
}

static void test_flashinfer_triton(void)
{
    const char *names[] = {"FLASHINFER", "TRITON_ATTN"};
    for (int i = 0; i < 2; i++) {
        const attn_backend_desc *d = desc(names[i]);
        if (!d) continue;
        attn_kv_layout_info li = layout_of(d, ATTN_LAYOUT_NHD, 16, 128);
        char buf[64];
        attn_kv_shape_format(&li.shape, buf, sizeof buf);
        CHECK_STR(buf, "(10, 2, 16, 8, 128)");
        I32_EQ(li.stride_order, 0, 1, 2, 3, 4);
        I64_EQ(li.strides, 32768, 16384, 1024, 128, 1);
        CHECK(li.view.v_offset == 16384 && li.view.stride_block == 32768 &&
              li.view.stride_token == 1024 && li.view.stride_head == 128);
        li = layout_of(d, ATTN_LAYOUT_HND, 16, 128);
        I32_EQ(li.stride_order, 0, 1, 3, 2, 4);
        /* memory (nb, 2, h, bs, d) */
        I64_EQ(li.strides, 32768, 16384, 128, 2048, 1);
        CHECK(li.view.stride_token == 128 && li.view.stride_head == 2048);
    }
    /* Triton's per-token-head dtypes widen the row: not writable here */
    const attn_backend_desc *t = desc("TRITON_ATTN");
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(t, ATTN_LAYOUT_NHD, 10, 16, 8, 128, 0,
                                    ATTN_KV_FP8_PER_TOKEN_HEAD, ATTN_DTYPE_BF16, &li));
    CHECK(li.shape.dims[4] == 132 && !li.writable && li.view.head_size == 128);
    CHECK(li.view.stride_head == 132);
}

static void test_cpu_attn(void)
{
    const attn_backend_desc *d = &attn__desc_cpu_attn;
    CHECK(attn_kv_layout_resolve(d, NULL, ATTN_LAYOUT_NHD) == ATTN_LAYOUT_HND);
    attn_kv_layout_info li = layout_of(d, ATTN_LAYOUT_HND, 16, 128);
    char buf[64];
    attn_kv_shape_format(&li.shape, buf, sizeof buf);
    CHECK_STR(buf, "(2, 10, 8, 16, 128)");
    I32_EQ(li.stride_order, 0, 1, 2, 3, 4);
    I64_EQ(li.strides, 163840, 16384, 2048, 128, 1);
    CHECK(li.view.stride_token == 128 && li.view.stride_head == 2048 &&
          li.view.stride_block == 16384 && li.view.v_offset == 163840);
}

static void test_mla_and_diffkv(void)
{
    const attn_backend_desc *d = desc("FLASHMLA");
    if (d) {
        attn_kv_layout_info li;
        CHECK_OK(attn_kv_layout_compute(d, ATTN_LAYOUT_NHD, 10, 64, 1, 576, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_BF16, &li));
        char buf[64];
        attn_kv_shape_format(&li.shape, buf, sizeof buf);
        CHECK_STR(buf, "(10, 64, 576)");
        I32_EQ(li.stride_order, 0, 1, 2);
        I64_EQ(li.strides, 36864, 576, 1);
        CHECK(!li.has_v && li.view.num_kv_heads == 1 && li.view.stride_head == 0 &&
              li.view.head_size_v == 0 && li.view.stride_token == 576);
        CHECK(li.bytes_per_block == 64u * 576 * 2);
    }
    /* K|V side by side in the last axis (the catalog's DIFFKV shape) */
    attn_backend_desc diffkv = {.name = "DIFFKV", .kv_cache_shape = attn__kv_shape_flash_diffkv};
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(&diffkv, ATTN_LAYOUT_NHD, 10, 16, 8, 192, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP16, &li));
    CHECK(li.shape.ndim == 4 && li.shape.dims[3] == 192 + 128);
    CHECK(li.has_v && li.view.head_size == 192 && li.view.head_size_v == 128);
    CHECK(li.view.k_offset == 0 && li.view.v_offset == 192);
    CHECK(li.view.stride_head == 320 && li.view.stride_token == 8 * 320);
    CHECK(li.writable);
    /* a stride order that does not fit the shape is the descriptor's error */
    diffkv.kv_stride_order = attn__stride_order_flash;
    CHECK_STATUS(attn_kv_layout_compute(&diffkv, ATTN_LAYOUT_NHD, 10, 16, 8, 192, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_FP16, &li),
                 ATTN_INTERNAL);
    CHECK_CONTAINS(attn_last_error(), "stride order has 5 entries for a 4-dim shape");
    d = desc("FLEX_ATTENTION");
    if (d) {
        li = layout_of(d, ATTN_LAYOUT_HND, 16, 64);
        /* no stride order: the logical shape whatever the layout */
        I32_EQ(li.stride_order, 0, 1, 2, 3, 4);
        CHECK(li.view.stride_token == 8 * 64 && li.view.stride_head == 64);
    }
}

static void test_resolve(void)
{
    const attn_backend_desc *fi = desc("FLASHINFER"), *fa = desc("FLASH_ATTN");
    attn_platform *b200 = NULL, *h100 = NULL, *xpu = NULL;
    CHECK_OK(attn_platform_open("b200", &b200));
    CHECK_OK(attn_platform_open("h100", &h100));
    CHECK_OK(attn_platform_open("xpu", &xpu));
    if (fi && fa && b200 && h100 && xpu) {
        CHECK(attn_kv_layout_resolve(fi, b200, ATTN_LAYOUT_DEFAULT) == ATTN_LAYOUT_HND);
        CHECK(attn_kv_layout_resolve(fi, h100, ATTN_LAYOUT_DEFAULT) == ATTN_LAYOUT_NHD);
        CHECK(attn_kv_layout_resolve(fa, h100, ATTN_LAYOUT_HND) == ATTN_LAYOUT_HND);
        CHECK(attn_kv_layout_resolve(fa, xpu, ATTN_LAYOUT_HND) == ATTN_LAYOUT_NHD);
        CHECK(attn_kv_layout_resolve(fa, b200, ATTN_LAYOUT_DEFAULT) == ATTN_LAYOUT_NHD);
    }
    attn_platform_free(b200);
    attn_platform_free(h100);
    attn_platform_free(xpu);
}

/* A shape without names is accepted only when the sizes decide the axes. */
static attn_status unnamed_shape(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                 attn_kv_shape *out)
{
    (void)kv;
    memset(out, 0, sizeof *out);
    out->ndim = 5;
    int64_t d[5] = {2, nb, kvh, bs, hs};
    memcpy(out->dims, d, sizeof d);
    return ATTN_OK;
}

static void test_errors_and_memory(void)
{
    attn_backend_desc nos = {.name = "NOSHAPE"};
    attn_kv_layout_info li;
    CHECK_STATUS(attn_kv_layout_compute(&nos, ATTN_LAYOUT_NHD, 4, 16, 2, 64, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_FP16, &li),
                 ATTN_UNSUPPORTED);
    attn_backend_desc un = {.name = "UNNAMED", .kv_cache_shape = unnamed_shape};
    CHECK_OK(attn_kv_layout_compute(&un, ATTN_LAYOUT_NHD, 4, 16, 3, 64, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP16, &li));
    CHECK(li.view.stride_head == 16 * 64 && li.view.stride_token == 64);
    CHECK(li.view.v_offset == 4 * 3 * 16 * 64);
    CHECK_STATUS(attn_kv_layout_compute(&un, ATTN_LAYOUT_NHD, 4, 16, 16, 64, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_FP16, &li),
                 ATTN_UNSUPPORTED); /* 16 heads and block 16: ambiguous */
    CHECK_CONTAINS(attn_last_error(), "ambiguous");
    const attn_backend_desc *fa = desc("FLASH_ATTN");
    if (!fa) return;
    CHECK_STATUS(attn_kv_layout_compute(fa, ATTN_LAYOUT_NHD, 0, 16, 8, 128, 0, ATTN_KV_AUTO,
                                        ATTN_DTYPE_BF16, &li),
                 ATTN_INVALID_ARGUMENT);

    /* memory: two layers, views one layer apart, scales per layer */
    li = layout_of(fa, ATTN_LAYOUT_NHD, 16, 128);
    attn_kv_cache *c = NULL;
    CHECK_STATUS(attn_kv_cache_create(&li, 0, &c), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_kv_cache_create(&li, 2, &c));
    CHECK(attn_kv_cache_num_layers(c) == 2);
    attn_kv_view v0, v1;
    CHECK_OK(attn_kv_cache_view(c, 0, &v0));
    CHECK_OK(attn_kv_cache_view(c, 1, &v1));
    /* one host-device allocation per layer, each a whole view */
    CHECK(v0.data != v1.data && v0.device == NULL && v1.device == NULL);
    CHECK(attn_kv_cache_device(c) == NULL);
    CHECK(attn_device_alloc_size(attn_device_host(), v0.data) == li.bytes_per_layer);
    CHECK(attn_device_alloc_size(attn_device_host(), v1.data) == li.bytes_per_layer);
    CHECK(((uint16_t *)v1.data)[li.elems_per_layer - 1] == 0); /* zeroed */
    CHECK_STATUS(attn_kv_cache_view(c, 2, &v0), ATTN_OUT_OF_RANGE);
    float ks[8], vs[8];
    for (int h = 0; h < 8; h++)
        ks[h] = 0.5f + (float)h, vs[h] = 2.0f;
    CHECK_OK(attn_kv_cache_set_scales(c, 1, 0.25f, 0.5f, ks, vs));
    CHECK_OK(attn_kv_cache_view(c, 1, &v1));
    CHECK(v1.k_scale == 0.25f && v1.v_scale == 0.5f && v1.k_scale_per_head &&
          v1.k_scale_per_head[3] == 3.5f && v1.v_scale_per_head[7] == 2.0f);
    CHECK_OK(attn_kv_cache_view(c, 0, &v0));
    CHECK(v0.k_scale == 1.0f && v0.k_scale_per_head == NULL);
    ks[2] = 0.0f;
    CHECK_STATUS(attn_kv_cache_set_scales(c, 0, 1.0f, 1.0f, ks, vs), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_kv_cache_set_scales(c, 0, -1.0f, 1.0f, NULL, NULL), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_kv_cache_set_scales(c, 0, 1.0f, 1.0f, ks, NULL), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_kv_cache_view(c, 0, &v0));
    CHECK(v0.k_scale == 1.0f && v0.k_scale_per_head == NULL); /* nothing changed */
    attn_kv_cache_free(c);
}

int main(void)
{
    test_flash_attn();
    test_flashinfer_triton();
    test_cpu_attn();
    test_mla_and_diffkv();
    test_resolve();
    test_errors_and_memory();
    return attn_test_finish("test_kv_layout");
}
