/* REFERENCE kernel: one query row at a time, every product and sum in
 * double, softmax by the online rule in double (exact enough to be the
 * oracle at any length), keys read through the block table element by
 * element at the view's strides, so any layout and block size works. The
 * semantics are stated once in reference.h. Single-threaded on purpose: it
 * is the slow, obviously right answer. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "backends/reference/reference.h"
#include "metadata/builders.h"
#include "util/error.h"
#include "util/numeric.h"

float attn__fp8_e4m3_f32[256], attn__fp8_e5m2_f32[256];
static pthread_once_t g_tab_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    for (int i = 0; i < 256; i++) {
        attn__fp8_e4m3_f32[i] = attn__e4m3_to_f32((uint8_t)i);
        attn__fp8_e5m2_f32[i] = attn__e5m2_to_f32((uint8_t)i);
    }
}

void attn__fp8_tables_init(void)
{
    pthread_once(&g_tab_once, tables_init);
}

static inline double load(const void *p, attn_elem e, int i)
{
    switch (e) {
    case ATTN_ELEM_FP8_E4M3: return attn__fp8_e4m3_f32[((const uint8_t *)p)[i]];
    case ATTN_ELEM_FP8_E5M2: return attn__fp8_e5m2_f32[((const uint8_t *)p)[i]];
    default: return attn__load_elem(p, e, (size_t)i);
    }
}

typedef struct {
    const attn_forward_args *a;
    attn_elem qe; /* element of q, out and direct K/V */
    size_t kv_esz;
} ref_ctx;

/* Address of key (or value) row j of request r for kv head h. */
static const void *kv_row(const ref_ctx *c, int r, int j, int h, bool value, attn_elem *elem)
{
    const attn_forward_args *a = c->a;
    const attn_layer_params *l = a->layer;
    if (a->k) {
        int64_t tok = (int64_t)a->common->query_start_loc[r] + j;
        int hs = value ? attn__fwd_head_size_v(l) : l->head_size;
        size_t esz = attn_elem_size(c->qe);
        const char *base = value ? a->v : a->k;
        *elem = c->qe;
        return base + ((tok * l->num_kv_heads + h) * hs) * esz;
    }
    const attn_kv_view *kv = a->kv;
    const attn_common_metadata *cm = a->common;
    int32_t blk = cm->block_table[(int64_t)r * cm->block_table_stride + j / kv->block_size];
    int64_t off = (value ? kv->v_offset : kv->k_offset) + blk * kv->stride_block +
                  (int64_t)(j % kv->block_size) * kv->stride_token + (int64_t)h * kv->stride_head;
    *elem = kv->elem;
    return (const char *)kv->data + off * (int64_t)c->kv_esz;
}

static void row(const ref_ctx *c, int r, int i, int head, double *q, double *acc)
{
    const attn_forward_args *a = c->a;
    const attn_layer_params *l = a->layer;
    const attn_common_metadata *cm = a->common;
    int D = l->head_size, Dv = attn__fwd_head_size_v(l);
    int group = l->num_heads / l->num_kv_heads;
    int kvh = head / group;
    int64_t tok = (int64_t)cm->query_start_loc[r] + i;
    int qlen = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
    int kv_len = attn__fwd_kv_len(a, r);
    int pos = kv_len - qlen + i;
    bool causal = attn__fwd_causal(a);
    double scale = attn__fwd_scale(l);
    double cap = l->logits_soft_cap;
    double slope = l->alibi_slopes ? l->alibi_slopes[head] : 0.0;
    double ks = a->k ? 1.0 : attn__kv_scale(a->kv, kvh, false);
    double vs = a->k ? 1.0 : attn__kv_scale(a->kv, kvh, true);

    for (int d = 0; d < D; d++)
        q[d] = attn__load_elem(a->q, c->qe, (size_t)(tok * l->num_heads + head) * D + d);
    for (int d = 0; d < Dv; d++)
        acc[d] = 0.0;
    double m = -INFINITY, sum = 0.0;
    for (int j = 0; j < kv_len; j++) {
        if (causal && j > pos) break;
        if (l->sliding_window > 0 && j <= pos - l->sliding_window) continue;
        attn_elem e;
        const void *kp = kv_row(c, r, j, kvh, false, &e);
        double s = 0.0;
        for (int d = 0; d < D; d++)
            s += q[d] * load(kp, e, d);
        s *= ks * scale;
        if (cap > 0.0) s = cap * tanh(s / cap);
        s += slope * (double)(j - pos);
        double mnew = s > m ? s : m;
        double alpha = exp(m - mnew); /* exp(-inf) = 0 on the first key */
        double p = exp(s - mnew);
        const void *vp = kv_row(c, r, j, kvh, true, &e);
        for (int d = 0; d < Dv; d++)
            acc[d] = acc[d] * alpha + p * vs * load(vp, e, d);
        sum = sum * alpha + p;
        m = mnew;
    }
    if (l->sinks) {
        double sk = l->sinks[head];
        double mnew = sk > m ? sk : m;
        double alpha = exp(m - mnew);
        for (int d = 0; d < Dv; d++)
            acc[d] *= alpha;
        sum = sum * alpha + exp(sk - mnew);
        m = mnew;
    }
    size_t ob = (size_t)(tok * l->num_heads + head) * Dv;
    for (int d = 0; d < Dv; d++)
        attn__store_elem(a->out, c->qe, ob + d, sum > 0.0 ? (float)(acc[d] / sum) : 0.0f);
    if (a->lse) a->lse[tok * l->num_heads + head] = sum > 0.0 ? (float)(m + log(sum)) : -INFINITY;
}

attn_status attn__reference_forward(const attn_forward_args *a)
{
    attn_status st = attn__fwd_check(a);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = a->layer;
    const attn_common_metadata *cm = a->common;
    if (cm->num_actual_tokens == 0) return ATTN_OK;
    int D = l->head_size, Dv = attn__fwd_head_size_v(l);
    double *buf = malloc(sizeof(double) * (size_t)(D + Dv));
    if (!buf) return attn__fail(ATTN_OUT_OF_MEMORY, "REFERENCE: out of memory");
    attn__fp8_tables_init();
    ref_ctx c = {.a = a, .qe = attn_dtype_elem(l->dtype)};
    if (!a->k) c.kv_esz = attn_elem_size(a->kv->elem);
    for (int r = 0; r < cm->num_reqs; r++) {
        int qlen = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        for (int i = 0; i < qlen; i++)
            for (int h = 0; h < l->num_heads; h++)
                row(&c, r, i, h, buf, buf + D);
    }
    free(buf);
    return ATTN_OK;
}

static attn_status ref_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__reference_forward(a);
}

static const char *ref_variant(void)
{
    return "scalar-double";
}

static const attn_kernel_ops ref_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward = ref_forward,
    .variant = ref_variant,
};

/* ---- builder: the oracle reads the common metadata as is ---------------- */

typedef struct {
    bool cross; /* cross attention: the keys are the encoder's */
} ref_md;

static attn_status ref_builder_create(const attn_builder_init *init, void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(state);
    ref_md *m = calloc(1, sizeof(ref_md));
    if (!m) return attn__fail(ATTN_OUT_OF_MEMORY, "REFERENCE builder: out of memory");
    m->cross = init->layer && init->layer->attn_type == ATTN_TYPE_ENCODER_DECODER;
    *state = m;
    return ATTN_OK;
}

static void ref_builder_destroy(void *state)
{
    free(state);
}

static attn_status ref_builder_build(void *state, int common_prefix_len,
                                     const attn_common_metadata *cm, bool fast_build,
                                     const void **md)
{
    (void)common_prefix_len;
    (void)fast_build;
    ATTN__CHECK_NULL(state);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(md);
    /* nothing is derived here, but a caller gets the same verdict as from forward */
    const ref_md *m = state;
    attn_status st =
        attn__check_batch("REFERENCE builder", cm, m->cross && cm->encoder_seq_lens != NULL);
    if (st != ATTN_OK) return st;
    *md = state;
    return ATTN_OK;
}

static attn_status ref_update_block_table(void *state, const void *md, const int32_t *bt,
                                          int stride, const int64_t *slots, const void **new_md)
{
    (void)md;
    (void)bt;
    (void)stride;
    (void)slots;
    ATTN__CHECK_NULL(new_md);
    *new_md = state;
    return ATTN_OK;
}

static int ref_describe(const void *md, char *buf, size_t size)
{
    (void)md;
    const char *s = "{\"kind\": \"reference\", \"reads\": \"common metadata\"}";
    size_t n = strlen(s);
    if (buf && size > 0) {
        size_t c = n < size - 1 ? n : size - 1;
        memcpy(buf, s, c);
        buf[c] = '\0';
    }
    return (int)n;
}

const attn_builder_ops attn__builder_reference = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "ReferenceMetadataBuilder",
    .cg_support = ATTN_CG_NEVER,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = ref_builder_create,
    .destroy = ref_builder_destroy,
    .build = ref_builder_build,
    .update_block_table = ref_update_block_table,
    .describe = ref_describe,
};

/* ---- descriptor ----------------------------------------------------------- */

/* The KV cache is FlashAttention's (2, num_blocks, block_size, num_kv_heads,
 * head_size) with its NHD/HND stride orders; the kernel reads any strides, so
 * both layouts are fine. */

const attn_backend_desc attn__desc_reference = {
    ATTN__CPU_DESC_COMMON,
    .name = "REFERENCE",
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) |
                 ATTN_KV_BIT(ATTN_KV_BFLOAT16) | ATTN_KV_BIT(ATTN_KV_FP8) |
                 ATTN_KV_BIT(ATTN_KV_FP8_E4M3) | ATTN_KV_BIT(ATTN_KV_FP8_E5M2),
    .n_block_sizes = 0, /* any */
    .heads = {0},       /* any */
    .supports_batch_invariance = true,
    .required_layout = ATTN_LAYOUT_DEFAULT,
    .kv_cache_shape = attn__kv_shape_split,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_reference,
};

const attn_backend attn__backend_reference = ATTN__CPU_BACKEND(&attn__desc_reference, &ref_kernel);
