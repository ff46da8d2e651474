/* The per-step path: fuzzed common metadata (sometimes hostile: extreme
 * lengths, short tables, bad ids) -> attn_common_metadata_check -> the
 * backend's builder -> the kernel, for REFERENCE, CPU_ATTN and CPU_MLA (the
 * variants this machine runs; ATTN_CPU_MASK hides the others). Oracles:
 * nothing crashes or trips ASan/UBSan; metadata the checker accepts builds
 * and runs (OK) unless a sink logit is not finite (then refused); a refused
 * call leaves the output buffer untouched. */
#include <math.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "fuzz_common.h"
#include "util/numeric.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned u8(rd *r)
{
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static int hostile(rd *r, int normal)
{
    static const int extreme[] = {INT32_MAX, INT32_MAX - 1, -1, INT32_MIN, 1 << 30, 65536};
    unsigned c = u8(r);
    return c >= 250 ? extreme[c % 6] : normal;
}

static const attn_backend *g_be[3];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_setup_env();
    const attn_platform *p = NULL;
    if (attn_platform_current(&p) != ATTN_OK) abort();
    const char *names[3] = {"REFERENCE", "CPU_ATTN", "CPU_MLA"};
    for (int i = 0; i < 3; i++)
        if (attn_backend_resolve(p, names[i], &g_be[i]) != ATTN_OK || !g_be[i]->kernel) abort();
    return 0;
}

#define MAXR 6
#define MAXT 64

typedef struct {
    int32_t qsl[MAXR + 1], seq[MAXR];
    int32_t *bt;
    int64_t slots[MAXT];
    attn_common_metadata cm;
    int nb, bs;
} batch;

/* A batch the checker mostly accepts, with hostile values mixed in. */
static void make_batch(rd *r, batch *b, int nreq_max)
{
    memset(b, 0, sizeof *b);
    b->bs = 1 << (u8(r) % 5);
    b->nb = 1 + (int)(u8(r) % 24);
    int n = (int)(u8(r) % (unsigned)(nreq_max + 1));
    int maxblk = 1, maxq = 0, maxs = 0, T = 0;
    for (int i = 0; i < n; i++) {
        int q = (int)(u8(r) % 9), ctx = (int)(u8(r) % 40);
        if (T + q > MAXT) q = 0;
        /* the previous entry may be hostile: the harness itself must not overflow */
        int next_q = b->qsl[i] <= INT32_MAX - q ? b->qsl[i] + q : b->qsl[i];
        b->qsl[i + 1] = hostile(r, next_q);
        b->seq[i] = hostile(r, ctx + q);
        T += q;
        int nbk = (ctx + q + b->bs - 1) / b->bs;
        maxblk = nbk > maxblk ? nbk : maxblk;
        maxq = q > maxq ? q : maxq;
        maxs = ctx + q > maxs ? ctx + q : maxs;
    }
    int stride = maxblk - (u8(r) == 255);
    if (stride < 1) stride = 1;
    b->bt = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1) * (size_t)stride);
    for (int i = 0; i < n * stride; i++)
        b->bt[i] = hostile(r, (int)(u8(r) % (unsigned)b->nb));
    for (int i = 0; i < n; i++) {
        int q0 = b->qsl[i], q1 = b->qsl[i + 1];
        if (q0 < 0 || q1 > MAXT || q1 < q0 || b->seq[i] < q1 - q0) continue;
        for (int t = q0; t < q1; t++) {
            int64_t pos = (int64_t)b->seq[i] - (q1 - q0) + (t - q0);
            int64_t blk = pos / b->bs < stride ? b->bt[i * stride + pos / b->bs] : 0;
            b->slots[t] = u8(r) == 254 ? -1 : blk * b->bs + pos % b->bs;
        }
    }
    attn_common_metadata *cm = &b->cm;
    cm->query_start_loc = b->qsl;
    cm->seq_lens = b->seq;
    cm->num_reqs = hostile(r, n) == n ? n : (n > 0 ? n - 1 : 0);
    cm->num_actual_tokens = hostile(r, b->qsl[cm->num_reqs]);
    if (cm->num_actual_tokens > MAXT || cm->num_actual_tokens < 0) cm->num_actual_tokens = T;
    cm->max_query_len = hostile(r, maxq);
    cm->max_seq_len = hostile(r, maxs);
    cm->block_table = b->bt;
    cm->block_table_stride = hostile(r, stride) == stride ? stride : stride - 1;
    cm->slot_mapping = b->slots;
    cm->causal = u8(r) & 1;
    cm->block_size = b->bs;
}

static void *rand_buf(rd *r, size_t n, attn_elem e)
{
    size_t esz = attn_elem_size(e);
    uint8_t *p = malloc(n * esz + 1);
    for (size_t i = 0; i < n; i++)
        attn__store_elem(p, e, i, ((int)u8(r) - 128) / 64.0f);
    return p;
}

/* Builds with the backend's builder and runs; returns the forward status. */
static attn_status run_layer(const attn_backend *be, const attn_layer_params *lp, batch *b,
                             const attn_kv_view *kv, int prefix, const void **md, void **bstate,
                             bool *built)
{
    const attn_builder_ops *ops = be->desc->builder;
    attn_builder_init init = {.desc = be->desc,
                              .layer = lp,
                              .block_size = b->bs,
                              .num_blocks = b->nb,
                              .max_num_reqs = MAXR,
                              .max_num_tokens = MAXT,
                              .max_blocks_per_req =
                                  b->cm.block_table_stride > 0 ? b->cm.block_table_stride : 1,
                              .num_threads = 1};
    *md = NULL;
    *bstate = NULL;
    *built = false;
    if (!ops) return ATTN_OK;
    attn_status st = ops->create(&init, bstate);
    if (st != ATTN_OK) return st;
    st = ops->build(*bstate, prefix, &b->cm, false, md);
    *built = st == ATTN_OK;
    (void)kv;
    return st;
}

static void fuzz_standard(rd *r, int which)
{
    const attn_backend *be = g_be[which];
    static const int heads[] = {16, 32, 64, 80, 128, 8, 4, 96};
    static const attn_elem kvel[] = {ATTN_ELEM_F32, ATTN_ELEM_BF16, ATTN_ELEM_F16,
                                     ATTN_ELEM_FP8_E4M3, ATTN_ELEM_FP8_E5M2};
    attn_layer_params lp;
    memset(&lp, 0, sizeof lp);
    lp.num_kv_heads = 1 + (int)(u8(r) % 2);
    lp.num_heads = lp.num_kv_heads * (1 + (int)(u8(r) % 4));
    lp.head_size = heads[u8(r) % 8];
    lp.dtype = (attn_dtype)(u8(r) % ATTN_DTYPE_COUNT);
    lp.attn_type = u8(r) % 8 == 0 ? ATTN_TYPE_ENCODER_ONLY : ATTN_TYPE_DECODER;
    lp.sliding_window = u8(r) % 4 == 0 ? (int)(u8(r) % 16) : 0;
    lp.logits_soft_cap = u8(r) % 5 == 0 ? 30.0f : 0.0f;
    float sinks[8] = {0.5f, -1, 2, 0, 1, 1, 1, 1},
          slopes[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    unsigned sb = u8(r);
    if (sb % 4 == 0) lp.sinks = sinks;
    /* sometimes a non-finite sink: every kernel refuses it (no new byte read) */
    bool bad_sink = sb >= 240 && sb % 4 == 0;
    if (bad_sink) sinks[(sb >> 2) % (unsigned)lp.num_heads] = (sb & 4) ? NAN : INFINITY;
    if (u8(r) % 6 == 0) lp.alibi_slopes = slopes;
    attn_elem ke = kvel[u8(r) % 5];
    lp.kv_cache_dtype = ke == ATTN_ELEM_FP8_E4M3   ? ATTN_KV_FP8_E4M3
                        : ke == ATTN_ELEM_FP8_E5M2 ? ATTN_KV_FP8_E5M2
                                                   : ATTN_KV_AUTO;
    if (lp.kv_cache_dtype == ATTN_KV_AUTO) ke = attn_dtype_elem(lp.dtype);
    batch b;
    make_batch(r, &b, MAXR);
    /* an HND cache with padded rows, zero then a few written tokens */
    int D = lp.head_size, pitch = D + 8;
    attn_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.elem = ke;
    kv.num_blocks = b.nb;
    kv.block_size = b.bs;
    kv.num_kv_heads = lp.num_kv_heads;
    kv.head_size = D;
    kv.head_size_v = D;
    kv.stride_token = pitch;
    kv.stride_head = (int64_t)b.bs * pitch;
    kv.stride_block = kv.stride_head * lp.num_kv_heads;
    kv.v_offset = kv.stride_block * b.nb;
    kv.k_scale = kv.v_scale = 0.5f;
    size_t cache_elems = (size_t)(2 * kv.v_offset);
    kv.data = calloc(cache_elems, attn_elem_size(ke));
    int T = b.cm.num_actual_tokens;
    attn_elem qe = attn_dtype_elem(lp.dtype);
    size_t qn = (size_t)(T > 0 ? T : 1) * (size_t)lp.num_heads * (size_t)D;
    void *q = rand_buf(r, qn, qe);
    void *kin = rand_buf(r, (size_t)(T > 0 ? T : 1) * (size_t)lp.num_kv_heads * (size_t)D, qe);
    (void)attn_kv_write(&kv, b.slots, T, kin, kin, qe);
    size_t ob = qn * attn_elem_size(qe);
    uint8_t *out = malloc(ob), *canary = malloc(ob);
    memset(out, 0xA5, ob);
    memcpy(canary, out, ob);
    float *lse = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1) * (size_t)lp.num_heads);

    attn_status chk = attn_common_metadata_check(&b.cm, b.nb);
    const void *md;
    void *bstate;
    attn_kernel *k = NULL;
    bool built;
    attn_status bst = run_layer(be, &lp, &b, &kv, (int)(u8(r) % 33), &md, &bstate, &built);
    attn_status kst = attn_kernel_open(be, &lp, NULL, &k);
    if (kst == ATTN_OK) {
        attn_forward_args a = {.layer = &lp,
                               .common = &b.cm,
                               .metadata = built ? md : NULL,
                               .q = q,
                               .kv = &kv,
                               .out = out,
                               .lse = lse};
        attn_status fst = attn_kernel_forward(k, &a);
        if (fst != ATTN_OK) FZ_ASSERT(memcmp(out, canary, ob) == 0);
        if (bad_sink) FZ_ASSERT(fst == ATTN_INVALID_ARGUMENT);
        /* accepted metadata on a supported layer runs */
        if (chk == ATTN_OK && bst == ATTN_OK && lp.attn_type == ATTN_TYPE_DECODER && !bad_sink)
            FZ_ASSERT(fst == ATTN_OK);
        attn_kernel_close(k);
    }
    if (bstate) be->desc->builder->destroy(bstate);
    free(kv.data), free(q), free(kin), free(out), free(canary), free(lse), free(b.bt);
}

static void fuzz_mla(rd *r)
{
    const attn_backend *be = g_be[2];
    static const int ranks[] = {16, 32, 64, 128};
    attn_layer_params lp;
    memset(&lp, 0, sizeof lp);
    int R = ranks[u8(r) % 4], P = 8 * (int)(u8(r) % 3), N = 8 * (1 + (int)(u8(r) % 3));
    int V = 8 * (1 + (int)(u8(r) % 3));
    lp.num_heads = 1 + (int)(u8(r) % 8);
    lp.num_kv_heads = 1;
    lp.head_size = R + P;
    lp.head_size_v = 0;
    lp.dtype = (attn_dtype)(u8(r) % ATTN_DTYPE_COUNT);
    lp.attn_type = ATTN_TYPE_DECODER;
    lp.kv_lora_rank = R;
    lp.qk_rope_head_dim = P;
    lp.qk_nope_head_dim = N;
    lp.v_head_dim = V;
    bool fp8 = u8(r) % 4 == 0;
    lp.kv_cache_dtype = fp8 ? ATTN_KV_FP8_E4M3 : ATTN_KV_AUTO;
    attn_elem qe = attn_dtype_elem(lp.dtype), ke = fp8 ? ATTN_ELEM_FP8_E4M3 : qe;
    batch b;
    make_batch(r, &b, MAXR);
    attn_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.elem = ke;
    kv.num_blocks = b.nb;
    kv.block_size = b.bs;
    kv.num_kv_heads = 1;
    kv.head_size = R + P;
    kv.head_size_v = R;
    kv.stride_token = R + P + 4;
    kv.stride_head = kv.stride_token;
    kv.stride_block = (int64_t)b.bs * kv.stride_token;
    kv.k_scale = kv.v_scale = fp8 ? 0.0625f : 1.0f;
    kv.data = calloc((size_t)(kv.stride_block * b.nb), attn_elem_size(ke));
    int T = b.cm.num_actual_tokens, T1 = T > 0 ? T : 1;
    void *lat = rand_buf(r, (size_t)T1 * (size_t)R, qe);
    void *rope = rand_buf(r, (size_t)T1 * (size_t)(P > 0 ? P : 1), qe);
    (void)attn_mla_write_latent(&kv, b.slots, T, lat, P > 0 ? rope : NULL, lp.dtype);
    void *q = rand_buf(r, (size_t)T1 * (size_t)lp.num_heads * (size_t)(N + P), qe);
    void *wuk = rand_buf(r, (size_t)lp.num_heads * (size_t)N * (size_t)R, qe);
    void *wuv = rand_buf(r, (size_t)lp.num_heads * (size_t)R * (size_t)V, qe);
    size_t ob = (size_t)T1 * (size_t)lp.num_heads * (size_t)V * attn_elem_size(qe);
    uint8_t *out = malloc(ob), *canary = malloc(ob);
    memset(out, 0x5A, ob);
    memcpy(canary, out, ob);
    size_t ss = attn_mla_forward_scratch_size(&lp, MAXT);
    void *scratch = aligned_alloc(64, (ss + 63) & ~(size_t)63);

    attn_status chk = attn_common_metadata_check(&b.cm, b.nb);
    const void *md;
    void *bstate;
    attn_kernel *k = NULL;
    bool built;
    attn_status bst = run_layer(be, &lp, &b, &kv, 0, &md, &bstate, &built);
    attn_status kst = attn_kernel_open(be, &lp, NULL, &k);
    if (kst == ATTN_OK) {
        attn_mla_args a = {.layer = &lp,
                           .common = &b.cm,
                           .metadata = built ? md : NULL,
                           .kv = &kv,
                           .q = q,
                           .out = out,
                           .w_uk = wuk,
                           .w_uv = wuv};
        attn_status fst = attn_kernel_mla_forward(k, &a, scratch, ss);
        if (fst != ATTN_OK) FZ_ASSERT(memcmp(out, canary, ob) == 0);
        if (chk == ATTN_OK && bst == ATTN_OK) FZ_ASSERT(fst == ATTN_OK);
        attn_kernel_close(k);
    }
    if (bstate) be->desc->builder->destroy(bstate);
    free(kv.data), free(lat), free(rope), free(q), free(wuk), free(wuv), free(out), free(canary);
    free(scratch), free(b.bt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = {data, size};
    unsigned which = u8(&r) % 3;
    if (which == 2)
        fuzz_mla(&r);
    else
        fuzz_standard(&r, (int)which);
    return 0;
}
