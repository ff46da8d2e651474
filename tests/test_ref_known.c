/* REFERENCE against answers worked out by hand: plain softmax, causal
 * masking, the default scale, sinks, soft-capping, ALiBi, sliding window,
 * GQA head mapping, fp8 per-tensor and per-head scales, cross attention over
 * encoder lengths, non-causal decoder, direct K/V (encoder-only), an empty
 * row, LSE, bf16 storage, and bad input changing nothing. */
#include "attn_kernel_testutil.h"
#include "backends/reference/reference.h"
#include "test.h"

#define E1 2.718281828459045

/* A cache of 2 blocks x 2 tokens, 1 kv head, head size 2 (NHD f32) holding
 * k0=[1,0] k1=[0,1] k2=[1,1] and v0=[1,2] v1=[3,4] v2=[5,6]. */
typedef struct {
    tcache c;
    int32_t bt[2];
    int32_t qsl[3];
    int32_t seq[2];
    int32_t enc[2];
    attn_common_metadata cm;
    attn_layer_params l;
    float q[8];
    float out[8];
    float lse[4];
} fx;

static void fx_init(fx *f, attn_elem elem, int kvh, int heads)
{
    memset(f, 0, sizeof *f);
    tcache_init(&f->c, elem, 2, 2, kvh, 2, 2, false);
    const float k[3][2] = {{1, 0}, {0, 1}, {1, 1}}, v[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    /* logical blocks 0,1 -> physical 1,0 (exercise the block table) */
    f->bt[0] = 1;
    f->bt[1] = 0;
    for (int j = 0; j < 3; j++)
        for (int h = 0; h < kvh; h++) {
            tcache_put(&f->c, f->bt[j / 2], j % 2, h, false, k[j]);
            tcache_put(&f->c, f->bt[j / 2], j % 2, h, true, v[j]);
        }
    f->l.num_heads = heads;
    f->l.num_kv_heads = kvh;
    f->l.head_size = 2;
    f->l.scale = 1.0f;
    f->l.dtype = ATTN_DTYPE_FP32;
    f->l.kv_cache_dtype = ATTN_KV_AUTO;
    f->l.attn_type = ATTN_TYPE_DECODER;
    f->cm.query_start_loc = f->qsl;
    f->cm.seq_lens = f->seq;
    f->cm.block_table = f->bt;
    f->cm.block_table_stride = 2;
    f->cm.causal = true;
    f->cm.block_size = 2;
}

/* one request: qlen queries over seq keys */
static attn_status fx_run(fx *f, int qlen, int seq)
{
    f->qsl[0] = 0;
    f->qsl[1] = qlen;
    f->seq[0] = seq;
    f->cm.num_reqs = 1;
    f->cm.num_actual_tokens = qlen;
    f->cm.max_query_len = qlen;
    f->cm.max_seq_len = seq;
    attn_forward_args a = {.layer = &f->l,
                           .common = &f->cm,
                           .q = f->q,
                           .kv = &f->c.view,
                           .out = f->out,
                           .lse = f->lse};
    return attn__reference_forward(&a);
}

int main(void)
{
    fx f;
    const double tol = 1e-6;

    /* plain decode over k0, k1: s = [1, 0] */
    fx_init(&f, ATTN_ELEM_F32, 1, 1);
    f.q[0] = 1;
    f.q[1] = 0;
    CHECK_OK(fx_run(&f, 1, 2));
    double p0 = E1 / (E1 + 1), p1 = 1 / (E1 + 1);
    CHECK_NEAR(f.out[0], 1 * p0 + 3 * p1, tol);
    CHECK_NEAR(f.out[1], 2 * p0 + 4 * p1, tol);
    CHECK_NEAR(f.lse[0], log(E1 + 1), tol);

    /* three keys across the block boundary: s = [1, 0, 1] */
    CHECK_OK(fx_run(&f, 1, 3));
    double z = 2 * E1 + 1;
    CHECK_NEAR(f.out[0], (1 * E1 + 3 + 5 * E1) / z, tol);
    CHECK_NEAR(f.out[1], (2 * E1 + 4 + 6 * E1) / z, tol);
    CHECK_NEAR(f.lse[0], log(z), tol);

    /* default scale 1/sqrt(2): s = [1/sqrt2, 0] */
    f.l.scale = 0.0f;
    CHECK_OK(fx_run(&f, 1, 2));
    double e = exp(1 / sqrt(2.0));
    CHECK_NEAR(f.out[0], (1 * e + 3) / (e + 1), tol);
    CHECK_NEAR(f.lse[0], log(e + 1), tol);
    f.l.scale = 1.0f;

    /* causal prefill of two tokens: token 0 sees k0 only */
    f.q[2] = 0;
    f.q[3] = 1; /* token 1: s = [0, 1] */
    CHECK_OK(fx_run(&f, 2, 2));
    CHECK_NEAR(f.out[0], 1, tol);
    CHECK_NEAR(f.out[1], 2, tol);
    CHECK_NEAR(f.lse[0], 1, tol);
    CHECK_NEAR(f.out[2], (1 + 3 * E1) / (1 + E1), tol);
    CHECK_NEAR(f.lse[1], log(1 + E1), tol);

    /* non-causal decoder: token 0 sees both keys */
    f.cm.causal = false;
    CHECK_OK(fx_run(&f, 2, 2));
    CHECK_NEAR(f.out[0], 1 * p0 + 3 * p1, tol);
    f.cm.causal = true;

    /* sink 0 joins the denominator: [e, 1] + 1 */
    float sink = 0.0f;
    f.l.sinks = &sink;
    CHECK_OK(fx_run(&f, 1, 2));
    CHECK_NEAR(f.out[0], (E1 + 3) / (E1 + 2), tol);
    CHECK_NEAR(f.out[1], (2 * E1 + 4) / (E1 + 2), tol);
    CHECK_NEAR(f.lse[0], log(E1 + 2), tol);
    f.l.sinks = NULL;

    /* soft cap 0.5: s = [0.5 tanh 2, 0] */
    f.l.logits_soft_cap = 0.5f;
    CHECK_OK(fx_run(&f, 1, 2));
    double sc = exp(0.5 * tanh(2.0));
    CHECK_NEAR(f.out[0], (sc + 3) / (sc + 1), tol);
    CHECK_NEAR(f.lse[0], log(sc + 1), tol);
    f.l.logits_soft_cap = 0.0f;

    /* ALiBi slope 0.5, query at position 1: s = [1 - 0.5, 0] */
    float slope = 0.5f;
    f.l.alibi_slopes = &slope;
    CHECK_OK(fx_run(&f, 1, 2));
    double ea = exp(0.5);
    CHECK_NEAR(f.out[0], (ea + 3) / (ea + 1), tol);
    f.l.alibi_slopes = NULL;

    /* window 1: the query at position 2 sees key 2 only */
    f.l.sliding_window = 1;
    CHECK_OK(fx_run(&f, 1, 3));
    CHECK_NEAR(f.out[0], 5, tol);
    CHECK_NEAR(f.out[1], 6, tol);
    CHECK_NEAR(f.lse[0], 1, tol);
    /* window 2: keys 1 and 2 -> s = [0, 1] */
    f.l.sliding_window = 2;
    CHECK_OK(fx_run(&f, 1, 3));
    CHECK_NEAR(f.out[0], (3 + 5 * E1) / (1 + E1), tol);
    f.l.sliding_window = 0;
    tcache_free(&f.c);

    /* GQA: 4 query heads on 2 kv heads (both hold the same rows); heads
     * 0,1 -> kv 0 and 2,3 -> kv 1. Per-head fp8 scales tell them apart. */
    fx_init(&f, ATTN_ELEM_F32, 2, 4);
    for (int h = 0; h < 4; h++) {
        f.q[2 * h] = h % 2 ? 0.0f : 1.0f;
        f.q[2 * h + 1] = h % 2 ? 1.0f : 0.0f;
    }
    CHECK_OK(fx_run(&f, 1, 2));
    CHECK_NEAR(f.out[0], 1 * p0 + 3 * p1, tol); /* head 0: s=[1,0] */
    CHECK_NEAR(f.out[2], 1 * p1 + 3 * p0, tol); /* head 1: s=[0,1] */
    CHECK_NEAR(f.out[4], 1 * p0 + 3 * p1, tol); /* head 2 */
    tcache_free(&f.c);

    /* fp8 e4m3, per-tensor K scale 2 and V scale 0.5: stored values are
     * exact in e4m3 (0.5, 2, 6, ...), dequantised they are the rows above */
    fx_init(&f, ATTN_ELEM_FP8_E4M3, 1, 1);
    tcache_free(&f.c);
    tcache_init(&f.c, ATTN_ELEM_FP8_E4M3, 2, 2, 1, 2, 2, false);
    f.c.view.k_scale = 2.0f;
    f.c.view.v_scale = 0.5f;
    {
        const float k[2][2] = {{1, 0}, {0, 1}}, v[2][2] = {{1, 2}, {3, 4}};
        for (int j = 0; j < 2; j++) {
            tcache_put(&f.c, f.bt[0], j, 0, false, k[j]);
            tcache_put(&f.c, f.bt[0], j, 0, true, v[j]);
        }
    }
    CHECK(((uint8_t *)f.c.data)[f.c.view.stride_block] == attn__f32_to_e4m3(0.5f)); /* 1/2 */
    f.q[0] = 1;
    f.q[1] = 0;
    CHECK_OK(fx_run(&f, 1, 2));
    CHECK_NEAR(f.out[0], 1 * p0 + 3 * p1, tol);
    CHECK_NEAR(f.out[1], 2 * p0 + 4 * p1, tol);
    /* per-head scales win over the per-tensor ones: K scale 4 doubles s */
    float khs = 4.0f, vhs = 0.5f;
    f.c.view.k_scale_per_head = &khs;
    f.c.view.v_scale_per_head = &vhs;
    CHECK_OK(fx_run(&f, 1, 2));
    double e2 = exp(2.0);
    CHECK_NEAR(f.out[0], (1 * e2 + 3) / (e2 + 1), tol);
    tcache_free(&f.c);

    /* cross attention: 2 decoder tokens over 3 encoder keys, not causal */
    fx_init(&f, ATTN_ELEM_F32, 1, 1);
    f.l.attn_type = ATTN_TYPE_ENCODER_DECODER;
    f.enc[0] = 3;
    f.cm.encoder_seq_lens = f.enc;
    f.q[0] = 1;
    f.q[1] = 0;
    f.q[2] = 0;
    f.q[3] = 0;                 /* uniform over 3 keys */
    CHECK_OK(fx_run(&f, 2, 1)); /* seq_lens (decoder side) is not used */
    CHECK_NEAR(f.out[0], (1 * E1 + 3 + 5 * E1) / (2 * E1 + 1), tol);
    CHECK_NEAR(f.out[2], 3, tol);
    CHECK_NEAR(f.out[3], 4, tol);
    CHECK_NEAR(f.lse[1], log(3.0), tol);
    /* an empty encoder: zeros and lse -inf */
    f.enc[0] = 0;
    CHECK_OK(fx_run(&f, 1, 1));
    CHECK(f.out[0] == 0.0f && f.out[1] == 0.0f);
    CHECK(isinf(f.lse[0]) && f.lse[0] < 0);
    tcache_free(&f.c);

    /* encoder-only with direct K/V (no cache): 2 tokens, not causal */
    {
        attn_layer_params l = {.num_heads = 1,
                               .num_kv_heads = 1,
                               .head_size = 2,
                               .scale = 1.0f,
                               .attn_type = ATTN_TYPE_ENCODER_ONLY,
                               .dtype = ATTN_DTYPE_FP32};
        int32_t qsl[2] = {0, 2};
        attn_common_metadata cm = {.query_start_loc = qsl, .num_reqs = 1, .num_actual_tokens = 2};
        float q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4}, out[4], lse[2];
        attn_forward_args a = {
            .layer = &l, .common = &cm, .q = q, .out = out, .lse = lse, .k = k, .v = v};
        CHECK_OK(attn__reference_forward(&a));
        CHECK_NEAR(out[0], 1 * p0 + 3 * p1, tol);
        CHECK_NEAR(out[2], 1 * p1 + 3 * p0, tol);
        CHECK_NEAR(lse[1], log(E1 + 1), tol);
    }

    /* bf16 storage: inputs exact in bf16, output rounded to bf16 */
    {
        fx_init(&f, ATTN_ELEM_BF16, 1, 1);
        f.l.dtype = ATTN_DTYPE_BF16;
        uint16_t qb[2] = {attn__f32_to_bf16(1.0f), attn__f32_to_bf16(0.0f)}, ob[2];
        f.qsl[0] = 0;
        f.qsl[1] = 1;
        f.seq[0] = 2;
        f.cm.num_reqs = 1;
        f.cm.num_actual_tokens = 1;
        attn_forward_args a = {.layer = &f.l, .common = &f.cm, .q = qb, .kv = &f.c.view, .out = ob};
        CHECK_OK(attn__reference_forward(&a));
        CHECK(ob[0] == attn__f32_to_bf16((float)(1 * p0 + 3 * p1)));
        CHECK(ob[1] == attn__f32_to_bf16((float)(2 * p0 + 4 * p1)));
        tcache_free(&f.c);
    }

    /* bad input: a block id outside the pool changes nothing */
    fx_init(&f, ATTN_ELEM_F32, 1, 1);
    f.bt[1] = 7;
    f.out[0] = 42.0f;
    CHECK_STATUS(fx_run(&f, 1, 3), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "outside the pool");
    CHECK(f.out[0] == 42.0f);
    f.bt[1] = 0;
    CHECK_STATUS(fx_run(&f, 3, 2), ATTN_BAD_METADATA); /* query longer than sequence */
    f.l.num_kv_heads = 3;
    CHECK_STATUS(fx_run(&f, 1, 2), ATTN_INVALID_ARGUMENT);
    tcache_free(&f.c);

    /* the backend object */
    CHECK(attn__backend_reference.desc == &attn__desc_reference);
    CHECK_STR(attn__desc_reference.name, "REFERENCE");
    CHECK(attn__backend_reference.kernel && attn__backend_reference.kernel->forward);
    CHECK(!attn__desc_reference.is_mla);
    CHECK(attn__desc_reference.cg_support == ATTN_CG_NEVER);
    return attn_test_finish("test_ref_known");
}
