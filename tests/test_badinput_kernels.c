/* Silent accepts of the kernels, now refused where a caller sees them:
 * non-finite sink logits (before: CPU_ATTN wrote NaN while REFERENCE did
 * not; now every kernel refuses them through the common checks, standard
 * and MLA, with the output untouched), and CPU_ATTN's create taking a layer
 * past the limits of attn/types.h (2^20 heads, head size 4097; before:
 * accepted, refused only at the first forward). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "kernel_call.h"
#include "test.h"

enum { H = 4, KVH = 2, D = 64, T = 4 };

typedef struct fx {
    const attn_platform *p;
    const attn_backend *cpu, *ref, *mla;
    attn_kv_layout_info li;
    attn_kv_cache *cache;
    attn_kv_view kv;
    int32_t qsl[2], seq[1], bt[2];
    attn_common_metadata cm;
    float q[T * H * D], out[T * H * D], kin[T * KVH * D];
} fx;

static void setup(fx *f)
{
    memset(f, 0, sizeof *f);
    CHECK_OK(attn_platform_current(&f->p));
    CHECK_OK(attn_backend_resolve(f->p, "CPU_ATTN", &f->cpu));
    CHECK_OK(attn_backend_resolve(f->p, "REFERENCE", &f->ref));
    CHECK_OK(attn_backend_resolve(f->p, "CPU_MLA", &f->mla));
    CHECK_OK(attn_kv_layout_compute(f->cpu->desc, ATTN_LAYOUT_HND, 8, 16, KVH, D, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP32, &f->li));
    CHECK_OK(attn_kv_cache_create(&f->li, 1, &f->cache));
    CHECK_OK(attn_kv_cache_view(f->cache, 0, &f->kv));
    int64_t slots[T];
    for (int i = 0; i < T; i++) {
        slots[i] = i;
        for (int j = 0; j < KVH * D; j++)
            f->kin[i * KVH * D + j] = 0.01f * (float)(j % 7) - 0.02f * (float)i;
    }
    for (int i = 0; i < T * H * D; i++)
        f->q[i] = 0.03f * (float)(i % 11) - 0.1f;
    CHECK_OK(attn_kv_write(&f->kv, slots, T, f->kin, f->kin, ATTN_ELEM_F32));
    f->qsl[1] = T, f->seq[0] = T, f->bt[0] = 0;
    f->cm = (attn_common_metadata){.query_start_loc = f->qsl,
                                   .seq_lens = f->seq,
                                   .num_reqs = 1,
                                   .num_actual_tokens = T,
                                   .max_query_len = T,
                                   .max_seq_len = T,
                                   .block_table = f->bt,
                                   .block_table_stride = 2,
                                   .causal = true,
                                   .block_size = 16};
}

static attn_layer_params layer(const float *sinks)
{
    return (attn_layer_params){.num_heads = H,
                               .num_kv_heads = KVH,
                               .head_size = D,
                               .attn_type = ATTN_TYPE_DECODER,
                               .dtype = ATTN_DTYPE_FP32,
                               .kv_cache_dtype = ATTN_KV_AUTO,
                               .sinks = sinks};
}

static bool out_untouched(const fx *f)
{
    for (int i = 0; i < T * H * D; i++)
        if (f->out[i] != 7.0f) return false;
    return true;
}

static void standard_sinks(fx *f)
{
    const float finite[H] = {0.5f, -1.0f, 2.0f, 0.0f};
    const float nan_at_1[H] = {0.5f, NAN, 2.0f, 0.0f}, inf_at_3[H] = {0.5f, 1.0f, 2.0f, -INFINITY};
    const attn_backend *bs[2] = {f->ref, f->cpu};
    for (int b = 0; b < 2; b++) {
        for (int k = 0; k < 2; k++) {
            attn_layer_params l = layer(k ? inf_at_3 : nan_at_1);
            for (int i = 0; i < T * H * D; i++)
                f->out[i] = 7.0f;
            attn_forward_args a = {
                .layer = &l, .common = &f->cm, .q = f->q, .kv = &f->kv, .out = f->out};
            CHECK_STATUS(tk_forward(bs[b], &a), ATTN_INVALID_ARGUMENT);
            CHECK_CONTAINS(attn_last_error(), k ? "sink logit of head 3 is -inf (must be finite)"
                                                : "sink logit of head 1 is nan (must be finite)");
            CHECK_MSG(out_untouched(f), "%s wrote its output", bs[b]->desc->name);
        }
        /* finite sinks still run, the same in both kernels */
        attn_layer_params l = layer(finite);
        attn_forward_args a = {
            .layer = &l, .common = &f->cm, .q = f->q, .kv = &f->kv, .out = f->out};
        CHECK_OK(tk_forward(bs[b], &a));
        bool finite_out = true;
        for (int i = 0; i < T * H * D; i++)
            finite_out = finite_out && isfinite(f->out[i]);
        CHECK(finite_out);
    }
}

/* The MLA call check refuses them before it reads anything else of the call. */
static void mla_sinks(fx *f)
{
    const float nan_at_2[H] = {0.0f, 0.0f, NAN, 0.0f};
    attn_layer_params l = {.num_heads = H,
                           .num_kv_heads = 1,
                           .head_size = 80,
                           .attn_type = ATTN_TYPE_DECODER,
                           .dtype = ATTN_DTYPE_FP32,
                           .kv_cache_dtype = ATTN_KV_AUTO,
                           .kv_lora_rank = 64,
                           .qk_rope_head_dim = 16,
                           .qk_nope_head_dim = 32,
                           .v_head_dim = 32,
                           .sinks = nan_at_2};
    attn_kv_view v = {0};
    float q[H * 80], out[H * 64];
    for (int i = 0; i < H * 64; i++)
        out[i] = 7.0f;
    attn_mla_args a = {.layer = &l, .common = &f->cm, .kv = &v, .q = q, .out = out};
    CHECK_STATUS(tk_mqa(f->mla, &a), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "sink logit of head 2 is nan (must be finite)");
    bool same = true;
    for (int i = 0; i < H * 64; i++)
        same = same && out[i] == 7.0f;
    CHECK(same);
}

/* create: the layer's limits and sinks, refused before any forward. */
static void cpu_create_limits(fx *f)
{
    const attn_kernel_ops *k = f->cpu->kernel;
    CHECK(k->create != NULL);
    if (!k->create) return;
    void *impl = (void *)1;
    attn_layer_params l = layer(NULL);
    attn_kernel_init in = {.struct_size = sizeof in, .layer = &l};
    l.num_heads = 1 << 20, l.num_kv_heads = 1 << 20;
    CHECK_STATUS(k->create(&in, &impl), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(),
              "CPU_ATTN create: num_heads 1048576 exceeds ATTN_MAX_HEADS (65536)");
    CHECK(impl == NULL);
    l = layer(NULL), l.head_size = ATTN_MAX_HEAD_SIZE + 1;
    CHECK_STATUS(k->create(&in, &impl), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "bad head sizes (head_size=4097");
    const float nan1[H] = {0, NAN, 0, 0};
    l = layer(nan1);
    CHECK_STATUS(k->create(&in, &impl), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "sink logit of head 1 is nan");
    l = layer(NULL);
    CHECK_OK(k->create(&in, &impl));
    CHECK(impl == NULL); /* stateless: nothing to destroy */
    CHECK_STATUS(k->create(NULL, &impl), ATTN_NULL_ARGUMENT);
}

int main(void)
{
    fx f;
    setup(&f);
    standard_sinks(&f);
    mla_sinks(&f);
    cpu_create_limits(&f);
    attn_kv_cache_free(f.cache);
    return attn_test_finish("test_badinput_kernels");
}
