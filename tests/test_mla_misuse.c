/* MLA misuse: the wrong entry point (standard forward on CPU_MLA,
 * forward_mqa / forward_mha on CPU_ATTN, forward_mha on a sparse backend)
 * returns ATTN_WRONG_ENTRY_POINT naming the right one; bad calls (NULLs,
 * wrong dims, bad metadata, block ids outside the cache, top-k indices
 * outside the sequence, fp8 without a scale) are refused with a clear
 * status - and in every case the output buffers are left untouched. Also
 * the descriptors, self-tests and the latent cache write's checks. */
#include "backends/cpu/cpu_attn.h"
#include "kernel_call.h"
#include "mla_fixture.h"

#define SENT 0xC3

static bool untouched(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != SENT) return false;
    return true;
}

typedef struct {
    mla_fx f;
    unsigned char *out;
    float *lse;
    size_t out_bytes, lse_bytes;
} env_t;

static void env_reset(env_t *e)
{
    memset(e->out, SENT, e->out_bytes);
    memset(e->lse, SENT, e->lse_bytes);
}

/* Runs a call expected to fail and checks status, message and output. */
#define EXPECT_FAIL(env, call, status, text)                                                       \
    do {                                                                                           \
        env_reset(env);                                                                            \
        CHECK_STATUS(call, status);                                                                \
        CHECK_CONTAINS(attn_last_error(), text);                                                   \
        CHECK(untouched((env)->out, (env)->out_bytes) && untouched((env)->lse, (env)->lse_bytes)); \
    } while (0)

int main(void)
{
    static const int q[] = {1, 4}, s[] = {20, 40};
    env_t E;
    mla_fx_init(&E.f, 4, 64, 32, 32, 48, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 2, q, s, 99);
    mla_fx *f = &E.f;
    E.out_bytes = (size_t)f->T * f->H * f->R * 4;
    E.lse_bytes = (size_t)f->T * f->H * 4;
    E.out = malloc(E.out_bytes);
    E.lse = malloc(E.lse_bytes);

    /* ---- wrong entry points ---- */
    attn_forward_args fa = {0};
    fa.layer = &f->lp;
    fa.common = &f->cm;
    fa.q = f->q;
    fa.kv = &f->kv;
    fa.out = E.out;
    fa.lse = E.lse;
    EXPECT_FAIL(&E, tk_forward(&attn__backend_cpu_mla, &fa), ATTN_WRONG_ENTRY_POINT,
                "CPU_MLA is an MLA backend: call forward_mqa (decode) or forward_mha (prefill), "
                "not forward");
    EXPECT_FAIL(&E, tk_forward(&attn__backend_reference_mla, &fa), ATTN_WRONG_ENTRY_POINT,
                "REFERENCE_MLA is an MLA backend");

    attn_mla_args ma = mla_fx_args(f, false, E.out, E.lse);
    EXPECT_FAIL(&E, tk_mqa(&attn__backend_cpu_attn, &ma), ATTN_WRONG_ENTRY_POINT,
                "CPU_ATTN is not an MLA backend: call forward, not forward_mqa");
    EXPECT_FAIL(&E, tk_mha(&attn__backend_cpu_attn, &ma), ATTN_WRONG_ENTRY_POINT,
                "CPU_ATTN is not an MLA backend: call forward, not forward_mha");
    EXPECT_FAIL(&E, tk_mla_forward(&attn__backend_cpu_attn, &ma, NULL, 0), ATTN_WRONG_ENTRY_POINT,
                "CPU_ATTN is not an MLA backend");
    EXPECT_FAIL(&E, tk_mha(&attn__backend_cpu_mla_sparse, &ma), ATTN_WRONG_ENTRY_POINT,
                "CPU_MLA_SPARSE is a sparse MLA backend: call forward_mqa for every token");
    static const attn_backend desc_only = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                           .struct_size = sizeof(attn_backend),
                                           .desc = NULL,
                                           .kernel = NULL};
    EXPECT_FAIL(&E, tk_mqa(&desc_only, &ma), ATTN_UNSUPPORTED, "no kernel code");
    EXPECT_FAIL(&E, tk_mqa(NULL, &ma), ATTN_NULL_ARGUMENT, "'b'");

    /* ---- bad calls on the MLA backends ---- */
    const attn_backend *mla[] = {&attn__backend_cpu_mla, &attn__backend_reference_mla};
    for (int bi = 0; bi < 2; bi++) {
        const attn_backend *b = mla[bi];
        attn_mla_args a = mla_fx_args(f, false, E.out, E.lse);
        attn_mla_args x = a;
        /* a call without a layer runs on the layer the handle was opened for */
        x.layer = NULL;
        attn_kernel *hk = NULL;
        CHECK_OK(attn_kernel_open(b, &f->lp, NULL, &hk));
        CHECK_OK(attn_kernel_forward_mqa(hk, &x));
        attn_kernel_close(hk);
        x = a;
        x.kv = NULL;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_NULL_ARGUMENT, "kv");
        x = a;
        x.q = NULL;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_NULL_ARGUMENT, "q");
        x = a;
        x.common = NULL;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_NULL_ARGUMENT, "common");

        attn_layer_params lp = f->lp;
        lp.head_size = 100;
        x = a;
        x.layer = &lp;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_INVALID_ARGUMENT,
                    "head_size 100 is not kv_lora_rank + qk_rope_head_dim = 96");
        lp = f->lp;
        lp.kv_lora_rank = 0;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_INVALID_ARGUMENT, "kv_lora_rank > 0");
        lp = f->lp;
        lp.qk_rope_head_dim = 16;
        lp.head_size = 80;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_INVALID_ARGUMENT,
                    "latent cache rows have 96 elements, the layer needs 80");

        attn_kv_view kv = f->kv;
        x = a;
        x.kv = &kv;
        kv.elem = ATTN_ELEM_U8;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_UNSUPPORTED, "u8");
        kv = f->kv;
        kv.elem = ATTN_ELEM_FP8_E4M3;
        kv.k_scale = 0.0f;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_INVALID_ARGUMENT, "k_scale");

        /* metadata */
        int32_t bt[64];
        memcpy(bt, f->bt, sizeof(int32_t) * (size_t)f->nreq * f->bt_stride);
        attn_common_metadata cm = f->cm;
        cm.block_table = bt;
        x = a;
        x.common = &cm;
        bt[f->bt_stride + 1] = f->nb; /* request 1, block 1 */
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "request 1 block_table[1]");
        memcpy(bt, f->bt, sizeof(int32_t) * (size_t)f->nreq * f->bt_stride);
        int32_t sl[2] = {20, 3};
        cm.seq_lens = sl;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA,
                    "request 1 has 4 query tokens but seq_len 3");
        sl[1] = 40 + 16 * 4;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "block table has");
        cm = f->cm;
        cm.block_size = 32;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "block_size 32 differs");
        cm = f->cm;
        int32_t qsl[3] = {0, 1, 4};
        cm.query_start_loc = qsl;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "query_start_loc");
        x = a;
        x.metadata = &f->cm; /* not MLA metadata */
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "not MLA metadata");
        attn_mla_metadata old = {.magic = 0x4d4c4131u, /* "MLA1": before the partition moved */
                                 .struct_size = sizeof old,
                                 .common = f->cm};
        x.metadata = &old;
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "not MLA metadata");
        old.magic = ATTN_MLA_METADATA_MAGIC;
        old.struct_size = sizeof old - 4; /* shorter than the common fields */
        EXPECT_FAIL(&E, tk_mqa(b, &x), ATTN_BAD_METADATA, "not MLA metadata");

        /* prefill without the up-projection weights */
        attn_mla_args m = mla_fx_args(f, true, E.out, E.lse);
        m.w_uv = NULL;
        EXPECT_FAIL(&E, tk_mha(b, &m), ATTN_NULL_ARGUMENT, "w_uv");
        m = mla_fx_args(f, true, E.out, E.lse);
        attn_layer_params lv = f->lp;
        lv.v_head_dim = 0;
        m.layer = &lv;
        EXPECT_FAIL(&E, tk_mha(b, &m), ATTN_INVALID_ARGUMENT, "v_head_dim");
    }

    /* sparse: indices outside the sequence */
    const attn_backend *sp[] = {&attn__backend_cpu_mla_sparse, &attn__backend_reference_mla_sparse};
    int32_t topk[5 * 4];
    for (int i = 0; i < 20; i++)
        topk[i] = i % 3 == 0 ? -1 : i % 17;
    for (int bi = 0; bi < 2; bi++) {
        attn_mla_args a = mla_fx_args(f, false, E.out, E.lse);
        EXPECT_FAIL(&E, tk_mqa(sp[bi], &a), ATTN_INVALID_ARGUMENT, "topk_indices");
        a.topk_indices = topk;
        a.topk = 4;
        topk[2] = 20; /* token 0 belongs to request 0 with 20 tokens */
        EXPECT_FAIL(&E, tk_mqa(sp[bi], &a), ATTN_INVALID_ARGUMENT,
                    "topk_indices[0][2] = 20 is outside request 0's sequence");
        topk[2] = -2;
        EXPECT_FAIL(&E, tk_mqa(sp[bi], &a), ATTN_INVALID_ARGUMENT, "= -2");
        topk[2] = 5;
        env_reset(&E);
        CHECK_OK(tk_mqa(sp[bi], &a));
    }

    /* ---- the latent cache write ---- */
    size_t cache_bytes = (size_t)f->nb * (size_t)f->kv.stride_block * 2;
    unsigned char *snap = malloc(cache_bytes);
    memcpy(snap, f->cache, cache_bytes);
    uint16_t lat[2 * 64], rope[2 * 32];
    memset(lat, 0, sizeof lat);
    memset(rope, 0, sizeof rope);
    int64_t slots[2] = {3, (int64_t)f->nb * 16};
    CHECK_STATUS(attn_mla_write_latent(&f->kv, slots, 2, lat, rope, ATTN_DTYPE_BF16),
                 ATTN_OUT_OF_RANGE);
    CHECK_CONTAINS(attn_last_error(), "slot_mapping[1]");
    CHECK(memcmp(snap, f->cache, cache_bytes) == 0);
    slots[1] = -1;
    CHECK_STATUS(attn_mla_write_latent(&f->kv, slots, 2, lat, NULL, ATTN_DTYPE_BF16),
                 ATTN_NULL_ARGUMENT);
    CHECK(memcmp(snap, f->cache, cache_bytes) == 0);
    attn_kv_view kv8 = f->kv;
    kv8.elem = ATTN_ELEM_FP8_E4M3;
    kv8.k_scale = -1;
    CHECK_STATUS(attn_mla_write_latent(&kv8, slots, 2, lat, rope, ATTN_DTYPE_BF16),
                 ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_mla_write_latent(&f->kv, slots, 2, lat, rope, ATTN_DTYPE_BF16));
    CHECK(memcmp(snap, f->cache, cache_bytes) != 0);
    CHECK(attn_mla_view_latent_dim(&f->kv) == 64);
    attn_kv_view kvd = f->kv;
    kvd.head_size_v = 0;
    kvd.head_size = 576;
    CHECK(attn_mla_view_latent_dim(&kvd) == 512);
    CHECK(attn_mla_row_bytes(576, ATTN_ELEM_BF16) == 1152);
    free(snap);

    /* fp8 round trip through the write: stored = value / scale */
    {
        uint8_t cache8[4 * 8];
        attn_kv_view v = {0};
        v.data = cache8;
        v.elem = ATTN_ELEM_FP8_E4M3;
        v.num_blocks = 1;
        v.block_size = 4;
        v.num_kv_heads = 1;
        v.head_size = 8;
        v.head_size_v = 6;
        v.stride_token = 8;
        v.stride_block = 32;
        v.k_scale = 0.5f;
        float la[6] = {1, -2, 3.5f, 0.25f, 100, -0.125f}, ro[2] = {7, -7};
        int64_t sl1 = 2;
        CHECK_OK(attn_mla_write_latent(&v, &sl1, 1, la, ro, ATTN_DTYPE_FP32));
        for (int i = 0; i < 6; i++)
            CHECK_NEAR(attn__e4m3_to_f32(cache8[16 + i]) * 0.5f, la[i], fabs(la[i]) * 0.07);
        CHECK_NEAR(attn__e4m3_to_f32(cache8[22]) * 0.5f, 7.0, 0.5);
    }

    /* ---- descriptors and self-tests ---- */
    const attn_backend_desc *d = attn__backend_cpu_mla.desc;
    CHECK_STR(d->name, "CPU_MLA");
    CHECK(d->is_mla && !d->is_sparse && d->can_return_lse_for_decode);
    CHECK(d->cg_support == ATTN_CG_NEVER && d->heads.n_sizes == 2 && d->heads.sizes[0] == 320 &&
          d->heads.sizes[1] == 576);
    CHECK(d->builder == &attn__builder_mla_cpu);
    CHECK(attn__backend_cpu_mla_sparse.desc->is_sparse &&
          attn__backend_cpu_mla_sparse.kernel->forward_mha == NULL);
    CHECK(attn__backend_reference_mla.desc->is_mla &&
          attn__backend_reference_mla.desc->heads.n_sizes == 0);
    CHECK_STR(attn__backend_reference_mla_sparse.desc->name, "REFERENCE_MLA_SPARSE");
    attn_kv_shape shp;
    CHECK_OK(d->kv_cache_shape(10, 64, 1, 576, ATTN_KV_AUTO, &shp));
    CHECK(shp.ndim == 3 && shp.dims[0] == 10 && shp.dims[1] == 64 && shp.dims[2] == 576);
    int order[6], no;
    CHECK_OK(d->kv_stride_order(ATTN_LAYOUT_NHD, false, order, &no));
    CHECK(no == 3 && order[0] == 0 && order[2] == 2);
    CHECK_STATUS(d->kv_stride_order(ATTN_LAYOUT_NHD, true, order, &no), ATTN_UNSUPPORTED);
    char detail[256] = "";
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_mla, detail, sizeof detail));
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_mla_sparse, detail, sizeof detail));
    const char *var = attn__backend_cpu_mla.kernel->variant();
    CHECK(var && *var);
    printf("CPU_MLA variant: %s\n", var);

    free(E.out);
    free(E.lse);
    mla_fx_free(f);
    return attn_test_finish("test_mla_misuse");
}
