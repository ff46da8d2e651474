/* The bad-input matrix, API part (the CLI, environment and file rows are in
 * tests/cli_badinput.sh). Each row is one hostile call with the status it
 * must return, a fragment its detail text must contain, and a check that
 * nothing changed: the registry (names and locators), the selection cache
 * (a cached selection is still the same object), a KV cache's bytes, a
 * block pool's state and a forward output buffer (canary). Rows that return
 * a value rather than a status check the value. Also here: the full text of
 * wrapped error messages (one helper copies the inner detail first). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "test.h"

typedef struct {
    attn_platform *h100;
    const attn_platform *local;
    const attn_selection *sel0;
    attn_selector_config c128;
    const attn_backend *cpu, *ref, *mla, *fa;
    attn_kv_layout_info li;
    attn_kv_cache *cache;
    attn_kv_view kv;
    attn_block_pool *pool;
    attn_model *model;
    int32_t qsl[2], seq[1], bt[2];
    int64_t slots[4];
    attn_common_metadata cm;
    attn_layer_params lp;
    float q[4 * 4 * 64], kin[4 * 2 * 64], out[4 * 4 * 64], lse[16];
    uint64_t base;
} fx;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Everything a bad call must leave as it was. */
static uint64_t fingerprint(fx *f)
{
    uint64_t h = 1469598103934665603ull;
    int n = attn_registry_count();
    h = fnv(h, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        const char *name = attn_registry_name(i), *loc = NULL;
        h = fnv(h, name, strlen(name) + 1);
        if (attn_registry_get_locator(name, &loc) == ATTN_OK && loc) h = fnv(h, loc, strlen(loc));
    }
    const attn_selection *s = NULL;
    attn_select(f->h100, NULL, &f->c128, &s);
    h = fnv(h, &s, sizeof s); /* a hit returns the cached object itself */
    h = fnv(h, f->kv.data, (size_t)f->li.bytes_per_layer);
    attn_block_pool_stats ps;
    attn_block_pool_get_stats(f->pool, &ps);
    ps.rejected_releases = 0; /* refused releases are counted: the one documented change */
    h = fnv(h, &ps, sizeof ps);
    for (int b = 0; b < 8; b++) {
        int r = attn_block_pool_refcount(f->pool, b);
        h = fnv(h, &r, sizeof r);
    }
    h = fnv(h, f->out, sizeof f->out);
    return h;
}

static int g_rows;

/* One status row. */
static void row(fx *f, int line, const char *what, attn_status got, attn_status want,
                const char *frag)
{
    g_rows++;
    const char *msg = attn_last_error();
    CHECK_MSG(got == want, "line %d: %s returned %s, want %s (%s)", line, what,
              attn_status_name(got), attn_status_name(want), msg);
    if (frag)
        CHECK_MSG(strstr(msg, frag) != NULL, "line %d: %s: '%s' lacks '%s'", line, what, msg, frag);
    CHECK_MSG(fingerprint(f) == f->base, "line %d: %s changed library or caller state", line, what);
}

/* One value row (functions that answer rather than fail). */
static void row_val(fx *f, int line, const char *what, long long got, long long want)
{
    g_rows++;
    CHECK_MSG(got == want, "line %d: %s gave %lld, want %lld", line, what, got, want);
    CHECK_MSG(fingerprint(f) == f->base, "line %d: %s changed library or caller state", line, what);
}

#define ROW(want, frag, expr) row(f, __LINE__, #expr, (attn_clear_error(), (expr)), (want), (frag))
#define VAL(want, expr)       row_val(f, __LINE__, #expr, (long long)(expr), (long long)(want))

static void setup(fx *f)
{
    memset(f, 0, sizeof *f);
    CHECK_OK(attn_platform_open("h100", &f->h100));
    CHECK_OK(attn_platform_current(&f->local));
    attn_selector_config_init(&f->c128);
    f->c128.head_size = 128;
    CHECK_OK(attn_select(f->h100, NULL, &f->c128, &f->sel0));
    CHECK_OK(attn_backend_resolve(f->local, "CPU_ATTN", &f->cpu));
    CHECK_OK(attn_backend_resolve(f->local, "REFERENCE", &f->ref));
    CHECK_OK(attn_backend_resolve(f->local, "CPU_MLA", &f->mla));
    CHECK_OK(attn_backend_resolve(f->h100, "FLASH_ATTN", &f->fa));
    CHECK_OK(attn_kv_layout_compute(f->cpu->desc, ATTN_LAYOUT_HND, 8, 16, 2, 64, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP32, &f->li));
    CHECK_OK(attn_kv_cache_create(&f->li, 1, &f->cache));
    CHECK_OK(attn_kv_cache_view(f->cache, 0, &f->kv));
    CHECK_OK(attn_block_pool_create(8, 16, &f->pool));
    int32_t ids[2];
    CHECK_OK(attn_block_pool_alloc(f->pool, 2, ids));
    CHECK_OK(attn_model_from_shape(2, 4, 2, 64, ATTN_DTYPE_BF16, &f->model));
    /* one request: 4 new tokens at positions 16..19 of a 20-token sequence */
    f->qsl[0] = 0, f->qsl[1] = 4, f->seq[0] = 20, f->bt[0] = 0, f->bt[1] = 1;
    for (int i = 0; i < 4; i++)
        f->slots[i] = (int64_t)1 * 16 + i;
    f->cm = (attn_common_metadata){.query_start_loc = f->qsl,
                                   .seq_lens = f->seq,
                                   .num_reqs = 1,
                                   .num_actual_tokens = 4,
                                   .max_query_len = 4,
                                   .max_seq_len = 20,
                                   .block_table = f->bt,
                                   .block_table_stride = 2,
                                   .slot_mapping = f->slots,
                                   .causal = true,
                                   .block_size = 16};
    f->lp = (attn_layer_params){.num_heads = 4,
                                .num_kv_heads = 2,
                                .head_size = 64,
                                .attn_type = ATTN_TYPE_DECODER,
                                .dtype = ATTN_DTYPE_FP32,
                                .kv_cache_dtype = ATTN_KV_AUTO};
    for (size_t i = 0; i < sizeof f->q / sizeof f->q[0]; i++)
        f->q[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < sizeof f->kin / sizeof f->kin[0]; i++)
        f->kin[i] = (float)(i % 5) * 0.2f;
    CHECK_OK(attn_common_metadata_check(&f->cm, 8));
    CHECK_OK(attn_kv_write(&f->kv, f->slots, 4, f->kin, f->kin, ATTN_ELEM_F32));
    memset(f->out, 0x7b, sizeof f->out);
    f->base = fingerprint(f);
}

/* b's kernel opened for lp (attn/kernel.h), one call through entry point
 * mqa or forward, closed; the open's failure when it cannot be opened. */
static attn_status kcall(const attn_backend *b, const attn_layer_params *lp, bool mqa,
                         const void *args)
{
    attn_kernel *k = NULL;
    attn_status st = attn_kernel_open(b, lp, NULL, &k);
    if (st == ATTN_OK) st = mqa ? attn_kernel_forward_mqa(k, args) : attn_kernel_forward(k, args);
    attn_kernel_close(k);
    return st;
}

static attn_status fwd(fx *f, const attn_backend *b, const attn_common_metadata *cm,
                       const attn_layer_params *lp, const attn_kv_view *kv)
{
    attn_forward_args a = {
        .layer = lp, .common = cm, .q = f->q, .kv = kv, .out = f->out, .lse = f->lse};
    return kcall(b, lp, false, &a);
}

/* Runs the CPU_ATTN builder on cm (created for the fixture's maxima). */
static attn_status cpu_build(fx *f, const attn_common_metadata *cm)
{
    const attn_builder_ops *ops = f->cpu->desc->builder;
    attn_builder_init in = {.desc = f->cpu->desc,
                            .layer = &f->lp,
                            .block_size = 16,
                            .num_blocks = 8,
                            .max_num_reqs = 4,
                            .max_num_tokens = 64,
                            .max_blocks_per_req = 4,
                            .num_threads = 1};
    void *st = NULL;
    attn_status s = ops->create(&in, &st);
    if (s != ATTN_OK) return s;
    const void *md = NULL;
    s = ops->build(st, 0, cm, false, &md);
    ops->destroy(st);
    return s;
}

/* Runs the CPU_MLA builder on cm (an MLA layer: 4 heads, rank 64, rope 16). */
static attn_status mla_build(fx *f, const attn_common_metadata *cm)
{
    attn_layer_params lp = {.num_heads = 4,
                            .num_kv_heads = 1,
                            .head_size = 80,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_FP32,
                            .kv_cache_dtype = ATTN_KV_AUTO,
                            .kv_lora_rank = 64,
                            .qk_rope_head_dim = 16,
                            .qk_nope_head_dim = 32,
                            .v_head_dim = 32};
    const attn_builder_ops *ops = f->mla->desc->builder;
    attn_builder_init in = {.desc = f->mla->desc,
                            .layer = &lp,
                            .block_size = 16,
                            .num_blocks = 8,
                            .max_num_reqs = 4,
                            .max_num_tokens = 64,
                            .max_blocks_per_req = 4,
                            .num_threads = 1};
    void *st = NULL;
    attn_status s = ops->create(&in, &st);
    if (s != ATTN_OK) return s;
    const void *md = NULL;
    s = ops->build(st, 0, cm, false, &md);
    ops->destroy(st);
    return s;
}

static void rows_metadata_and_forward(fx *f)
{
    attn_common_metadata m;
    attn_layer_params l;
    attn_kv_view v;
    int32_t big[1] = {INT_MAX}, neg[1] = {-5}, qbad[2] = {1, 4}, qdec[2] = {4, 2};
    int32_t btbad[2] = {0, 9};
    /* the finding: seq_len near INT_MAX overflowed the block count (SIGSEGV) */
    m = f->cm, m.seq_lens = big, m.max_seq_len = INT_MAX;
    ROW(ATTN_BAD_METADATA, "keys (limit", fwd(f, f->ref, &m, &f->lp, &f->kv));
    ROW(ATTN_BAD_METADATA, "keys (limit", fwd(f, f->cpu, &m, &f->lp, &f->kv));
    ROW(ATTN_BAD_METADATA, "seq_lens[0] is 2147483647", attn_common_metadata_check(&m, 8));
    big[0] = ATTN_MAX_SEQ_LEN;
    ROW(ATTN_BAD_METADATA, "needs 16777216 blocks", fwd(f, f->ref, &m, &f->lp, &f->kv));
    m = f->cm, m.seq_lens = neg;
    ROW(ATTN_BAD_METADATA, "request 0 has -5 keys", fwd(f, f->ref, &m, &f->lp, &f->kv));
    ROW(ATTN_BAD_METADATA, "seq_lens[0] is -5", attn_common_metadata_check(&m, 8));
    m = f->cm, m.query_start_loc = qbad;
    ROW(ATTN_BAD_METADATA, "query_start_loc[0] = 1", fwd(f, f->cpu, &m, &f->lp, &f->kv));
    ROW(ATTN_BAD_METADATA, "query_start_loc[0] is 1", attn_common_metadata_check(&m, 8));
    m = f->cm, m.query_start_loc = qdec, m.num_actual_tokens = 2;
    ROW(ATTN_BAD_METADATA, "query_start_loc[0] = 4", fwd(f, f->ref, &m, &f->lp, &f->kv));
    /* the finding: the builder read past query_start_loc (tokens beyond it) */
    m = f->cm, m.num_actual_tokens = 40;
    ROW(ATTN_BAD_METADATA, "query_start_loc runs from 0 to 4 but the batch has 40 tokens",
        cpu_build(f, &m));
    ROW(ATTN_BAD_METADATA, "num_actual_tokens is 40", attn_common_metadata_check(&m, 8));
    /* found by fuzz_forward: the MLA builder subtracted hostile query_start_loc entries */
    int32_t qmin[3] = {0, INT_MIN, 4};
    int32_t seq2[2] = {20, 20};
    m = f->cm, m.num_reqs = 2, m.query_start_loc = qmin, m.seq_lens = seq2;
    ROW(ATTN_BAD_METADATA, "request 0 has query_start_loc 0..-2147483648", mla_build(f, &m));
    m = f->cm, m.num_actual_tokens = 40;
    ROW(ATTN_BAD_METADATA, "query_start_loc runs from 0 to 4 but the batch has 40",
        mla_build(f, &m));
    m = f->cm, m.query_start_loc = qbad;
    ROW(ATTN_BAD_METADATA, "runs from 1 to 4", mla_build(f, &m));
    m = f->cm;
    ROW(ATTN_OK, NULL, mla_build(f, &m));
    m = f->cm, m.num_reqs = 9;
    ROW(ATTN_BAD_METADATA, "exceeds the builder's maxima", cpu_build(f, &m));
    m = f->cm, m.num_reqs = ATTN_MAX_NUM_REQS + 1;
    ROW(ATTN_BAD_METADATA, "must be in [0, 1048576]", attn_common_metadata_check(&m, 8));
    ROW(ATTN_BAD_METADATA, "exceeds ATTN_MAX_NUM_REQS", fwd(f, f->ref, &m, &f->lp, &f->kv));
    m = f->cm, m.num_reqs = -1;
    ROW(ATTN_BAD_METADATA, "num_reqs is -1", attn_common_metadata_check(&m, 8));
    m = f->cm, m.block_size = 0;
    ROW(ATTN_BAD_METADATA, "block_size is 0", attn_common_metadata_check(&m, 8));
    m = f->cm, m.block_size = ATTN_MAX_BLOCK_SIZE + 1;
    ROW(ATTN_BAD_METADATA, "block_size is 65537", attn_common_metadata_check(&m, 8));
    m = f->cm, m.block_table = btbad;
    ROW(ATTN_BAD_METADATA, "block_table[0][1] is 9", attn_common_metadata_check(&m, 8));
    ROW(ATTN_BAD_METADATA, "id 9 outside the pool of 8", fwd(f, f->cpu, &m, &f->lp, &f->kv));
    m = f->cm, m.block_table_stride = 1;
    ROW(ATTN_BAD_METADATA, "block table too short", attn_common_metadata_check(&m, 8));
    ROW(ATTN_BAD_METADATA, "the block table row holds 1", fwd(f, f->ref, &m, &f->lp, &f->kv));
    m = f->cm, m.max_query_len = 3;
    ROW(ATTN_BAD_METADATA, "max_query_len is 3", attn_common_metadata_check(&m, 8));
    m = f->cm, m.max_seq_len = 5;
    ROW(ATTN_BAD_METADATA, "max_seq_len is 5", attn_common_metadata_check(&m, 8));
    int64_t sbad[4] = {16, 17, 18, 1000};
    m = f->cm, m.slot_mapping = sbad;
    ROW(ATTN_BAD_METADATA, "slot_mapping[3] (request 0) is 1000",
        attn_common_metadata_check(&m, 8));
    ROW(ATTN_INVALID_ARGUMENT, "num_blocks is 0", attn_common_metadata_check(&f->cm, 0));
    ROW(ATTN_NULL_ARGUMENT, "'cm' is NULL", attn_common_metadata_check(NULL, 8));
    m = f->cm, m.seq_lens = NULL;
    ROW(ATTN_BAD_METADATA, "seq_lens is NULL", attn_common_metadata_check(&m, 8));
    /* layer parameters */
    l = f->lp, l.head_size = INT_MAX, l.head_size_v = 0;
    ROW(ATTN_INVALID_ARGUMENT, "bad head sizes", fwd(f, f->ref, &f->cm, &l, &f->kv));
    l = f->lp, l.num_heads = 3;
    ROW(ATTN_INVALID_ARGUMENT, "positive multiple", fwd(f, f->cpu, &f->cm, &l, &f->kv));
    l = f->lp, l.num_heads = ATTN_MAX_HEADS * 2, l.num_kv_heads = 2;
    ROW(ATTN_INVALID_ARGUMENT, "exceeds ATTN_MAX_HEADS", fwd(f, f->ref, &f->cm, &l, &f->kv));
    l = f->lp, l.dtype = (attn_dtype)99;
    ROW(ATTN_INVALID_ARGUMENT, "bad dtype 99", fwd(f, f->ref, &f->cm, &l, &f->kv));
    l = f->lp, l.attn_type = (attn_attn_type)7;
    ROW(ATTN_INVALID_ARGUMENT, "bad attention type 7", fwd(f, f->cpu, &f->cm, &l, &f->kv));
    l = f->lp, l.sliding_window = -1;
    ROW(ATTN_INVALID_ARGUMENT, "sliding_window -1", fwd(f, f->ref, &f->cm, &l, &f->kv));
    l = f->lp, l.logits_soft_cap = NAN;
    ROW(ATTN_INVALID_ARGUMENT, "logits_soft_cap", fwd(f, f->ref, &f->cm, &l, &f->kv));
    l = f->lp, l.scale = INFINITY;
    ROW(ATTN_INVALID_ARGUMENT, "scale must be finite", fwd(f, f->cpu, &f->cm, &l, &f->kv));
    l = f->lp, l.scale = -1;
    ROW(ATTN_INVALID_ARGUMENT, "scale must be finite", fwd(f, f->ref, &f->cm, &l, &f->kv));
    /* views */
    v = f->kv, v.data = NULL;
    ROW(ATTN_NULL_ARGUMENT, "view has no data", fwd(f, f->ref, &f->cm, &f->lp, &v));
    v = f->kv, v.num_kv_heads = 1;
    ROW(ATTN_INVALID_ARGUMENT, "does not match the layer", fwd(f, f->ref, &f->cm, &f->lp, &v));
    v = f->kv, v.stride_token = -1;
    ROW(ATTN_INVALID_ARGUMENT, "negative strides", fwd(f, f->cpu, &f->cm, &f->lp, &v));
    v = f->kv, v.block_size = 8;
    ROW(ATTN_BAD_METADATA, "metadata block_size 16 != cache block_size 8",
        fwd(f, f->ref, &f->cm, &f->lp, &v));
    v = f->kv, v.elem = (attn_elem)42;
    ROW(ATTN_INVALID_ARGUMENT, "is not readable here", fwd(f, f->ref, &f->cm, &f->lp, &v));
    ROW(ATTN_NULL_ARGUMENT, "no KV cache view", fwd(f, f->ref, &f->cm, &f->lp, NULL));
    ROW(ATTN_NULL_ARGUMENT, "'a' is NULL", kcall(f->ref, &f->lp, false, NULL));
    attn_forward_args a = {.layer = &f->lp, .common = &f->cm, .kv = &f->kv, .out = f->out};
    ROW(ATTN_NULL_ARGUMENT, "'a->q' is NULL", kcall(f->cpu, &f->lp, false, &a));
    attn_mla_args ma = {.layer = &f->lp, .common = &f->cm, .kv = &f->kv, .q = f->q, .out = f->out};
    ROW(ATTN_WRONG_ENTRY_POINT, "not an MLA backend", kcall(f->cpu, &f->lp, true, &ma));
    ROW(ATTN_NULL_ARGUMENT, "'a' is NULL", kcall(f->cpu, &f->lp, true, NULL));
    ROW(ATTN_WRONG_ENTRY_POINT, NULL, kcall(f->mla, &f->lp, false, &a));
    ROW(ATTN_UNSUPPORTED, NULL, kcall(f->fa, &f->lp, false, &a));
    /* a kernel opened for one geometry refuses a call with another */
    attn_layer_params other = f->lp;
    other.num_kv_heads = 4;
    attn_kernel *k = NULL;
    CHECK_OK(attn_kernel_open(f->cpu, &f->lp, NULL, &k));
    a.layer = &other;
    a.q = f->q;
    ROW(ATTN_INVALID_ARGUMENT, "kernel was opened for heads 4/2", attn_kernel_forward(k, &a));
    attn_kernel_close(k);
}

static void rows_kvcache(fx *f)
{
    attn_kv_layout_info li;
    const attn_backend_desc *d = f->cpu->desc;
    /* the findings: int64 overflow in the layout, layout 99 and kv dtype 999 accepted */
    ROW(ATTN_INVALID_ARGUMENT, "within the limits",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, INT_MAX, ATTN_MAX_BLOCK_SIZE, ATTN_MAX_HEADS,
                               ATTN_MAX_HEAD_SIZE, 0, ATTN_KV_AUTO, ATTN_DTYPE_BF16, &li));
    ROW(ATTN_OUT_OF_RANGE, "more than 2^63 elements",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, ATTN_MAX_NUM_BLOCKS, ATTN_MAX_BLOCK_SIZE,
                               ATTN_MAX_HEADS, ATTN_MAX_HEAD_SIZE, 0, ATTN_KV_AUTO, ATTN_DTYPE_BF16,
                               &li));
    ROW(ATTN_INVALID_ARGUMENT, "invalid layout 99",
        attn_kv_layout_compute(d, (attn_kv_layout)99, 8, 16, 2, 64, 0, ATTN_KV_AUTO,
                               ATTN_DTYPE_BF16, &li));
    ROW(ATTN_INVALID_ARGUMENT, "invalid KV cache dtype 999",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, 8, 16, 2, 64, 0, (attn_kv_dtype)999,
                               ATTN_DTYPE_BF16, &li));
    ROW(ATTN_INVALID_ARGUMENT, "invalid model dtype 9",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, 8, 16, 2, 64, 0, ATTN_KV_AUTO, (attn_dtype)9,
                               &li));
    ROW(ATTN_INVALID_ARGUMENT, "num_blocks=0",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, 0, 16, 2, 64, 0, ATTN_KV_AUTO, ATTN_DTYPE_BF16,
                               &li));
    ROW(ATTN_INVALID_ARGUMENT, "head_size=-64",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, 8, 16, 2, -64, 0, ATTN_KV_AUTO, ATTN_DTYPE_BF16,
                               &li));
    ROW(ATTN_INVALID_ARGUMENT, "head_size_v=8192",
        attn_kv_layout_compute(d, ATTN_LAYOUT_HND, 8, 16, 2, 64, 8192, ATTN_KV_AUTO,
                               ATTN_DTYPE_BF16, &li));
    ROW(ATTN_NULL_ARGUMENT, "'d' is NULL",
        attn_kv_layout_compute(NULL, ATTN_LAYOUT_HND, 8, 16, 2, 64, 0, ATTN_KV_AUTO,
                               ATTN_DTYPE_BF16, &li));
    char buf[64];
    attn_kv_shape sh = {.ndim = 99};
    /* the finding: ndim 99 indexed dims[6] out of bounds */
    VAL(0, strncmp((attn_kv_shape_format(&sh, buf, sizeof buf), buf), "(bad ndim 99)", 13));
    sh.ndim = -3;
    VAL(0, strncmp((attn_kv_shape_format(&sh, buf, sizeof buf), buf), "(bad ndim -3)", 13));
    /* writes: the finding that v = NULL silently wrote K only */
    ROW(ATTN_NULL_ARGUMENT, "stores values but v is NULL",
        attn_kv_write(&f->kv, f->slots, 4, f->kin, NULL, ATTN_ELEM_F32));
    int64_t s2[2] = {0, 8 * 16};
    ROW(ATTN_INVALID_ARGUMENT, "token 1 has slot 128 outside the cache",
        attn_kv_write(&f->kv, s2, 2, f->kin, f->kin, ATTN_ELEM_F32));
    int64_t s3[1] = {-2};
    ROW(ATTN_INVALID_ARGUMENT, "slot -2",
        attn_kv_write(&f->kv, s3, 1, f->kin, f->kin, ATTN_ELEM_F32));
    ROW(ATTN_INVALID_ARGUMENT, "KV write of -1 tokens",
        attn_kv_write(&f->kv, f->slots, -1, f->kin, f->kin, ATTN_ELEM_F32));
    ROW(ATTN_INVALID_ARGUMENT, "is not f32/f16/bf16",
        attn_kv_write(&f->kv, f->slots, 4, f->kin, f->kin, ATTN_ELEM_FP8_E4M3));
    ROW(ATTN_NULL_ARGUMENT, "'k' is NULL",
        attn_kv_write(&f->kv, f->slots, 4, NULL, f->kin, ATTN_ELEM_F32));
    ROW(ATTN_NULL_ARGUMENT, "'slot_mapping' is NULL",
        attn_kv_write(&f->kv, NULL, 4, f->kin, f->kin, ATTN_ELEM_F32));
    ROW(ATTN_NULL_ARGUMENT, "'kv' is NULL",
        attn_kv_write(NULL, f->slots, 4, f->kin, f->kin, ATTN_ELEM_F32));
    float row8[64];
    ROW(ATTN_OUT_OF_RANGE, "slot 9999 outside 0..127", attn_kv_read(&f->kv, 9999, 0, false, row8));
    ROW(ATTN_OUT_OF_RANGE, "head 7 outside 0..1", attn_kv_read(&f->kv, 0, 7, false, row8));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_kv_read(&f->kv, 0, 0, false, NULL));
    attn_kv_view v;
    ROW(ATTN_OUT_OF_RANGE, NULL, attn_kv_cache_view(f->cache, 1, &v));
    ROW(ATTN_OUT_OF_RANGE, NULL, attn_kv_cache_view(f->cache, -1, &v));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_kv_cache_set_scales(f->cache, 0, NAN, 1.0f, NULL, NULL));
    ROW(ATTN_INVALID_ARGUMENT, NULL,
        attn_kv_cache_set_scales(f->cache, 0, 1.0f, -1.0f, NULL, NULL));
    attn_kv_cache *c2 = NULL;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_kv_cache_create(&f->li, 0, &c2));
    ROW(ATTN_OUT_OF_MEMORY, "too large", attn_kv_cache_create(&f->li, INT_MAX, &c2));
    VAL(1, c2 == NULL);
    /* block pool */
    attn_block_pool *p2 = NULL;
    ROW(ATTN_INVALID_ARGUMENT, "num_blocks in [1, 1073741824]", attn_block_pool_create(0, 16, &p2));
    ROW(ATTN_INVALID_ARGUMENT, "block_size in [1, 65536]", attn_block_pool_create(8, INT_MAX, &p2));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_block_pool_create(INT_MAX, 16, &p2));
    int32_t ids[16];
    ROW(ATTN_OUT_OF_BLOCKS, "9 blocks requested, 6 free of 8",
        attn_block_pool_alloc(f->pool, 9, ids));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_block_pool_alloc(f->pool, -1, ids));
    int32_t bad[2] = {0, 8}, dbl[3] = {0, 0, 0}, freeb[1] = {5};
    ROW(ATTN_INVALID_ARGUMENT, "release of block 8", attn_block_pool_release(f->pool, 2, bad));
    ROW(ATTN_INVALID_ARGUMENT, "double free of block 0", attn_block_pool_release(f->pool, 3, dbl));
    ROW(ATTN_INVALID_ARGUMENT, "share of free block 5", attn_block_pool_share(f->pool, 1, freeb));
    ROW(ATTN_INVALID_ARGUMENT, "share of block 8", attn_block_pool_share(f->pool, 2, bad));
    ROW(ATTN_INVALID_ARGUMENT, "cannot share -2 blocks", attn_block_pool_share(f->pool, -2, bad));
    attn_block_list l = {ids, 0, 2};
    ROW(ATTN_OUT_OF_RANGE, NULL, attn_block_pool_reserve(f->pool, &l, 48));
    ROW(ATTN_OUT_OF_BLOCKS, NULL,
        attn_block_pool_reserve(f->pool, &(attn_block_list){ids, 0, 16}, 16 * 9));
    VAL(-1, attn_block_pool_refcount(f->pool, -1));
    VAL(-1, attn_block_pool_refcount(f->pool, 8));
    ROW(ATTN_OK, NULL, attn_block_pool_check(f->pool));
    /* MLA latent writes */
    attn_kv_view mv = {0};
    ROW(ATTN_NULL_ARGUMENT, NULL,
        attn_mla_write_latent(NULL, f->slots, 1, f->kin, NULL, ATTN_DTYPE_FP32));
    ROW(ATTN_NULL_ARGUMENT, "has no memory",
        attn_mla_write_latent(&mv, f->slots, 1, f->kin, NULL, ATTN_DTYPE_FP32));
}

static void rows_select_registry(fx *f)
{
    attn_selector_config c = f->c128;
    attn_selection *s = NULL;
    const attn_selection *cs = NULL;
    /* the finding: head size INT_MAX was accepted */
    c.head_size = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select(f->h100, NULL, &c, &cs));
    CHECK_CONTAINS(cs ? attn_selection_message(cs) : "", "exceeds its limit");
    c = f->c128, c.head_size = ATTN_MAX_HEAD_SIZE + 1;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    CHECK_CONTAINS(s ? attn_selection_message(s) : "", "head_size 4097");
    attn_selection_free(s), s = NULL;
    c = f->c128, c.num_heads = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    attn_selection_free(s), s = NULL;
    c = f->c128, c.block_size = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    attn_selection_free(s), s = NULL;
    c = f->c128, c.head_size = -1;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    attn_selection_free(s), s = NULL;
    c = f->c128, c.kv_cache_dtype = (attn_kv_dtype)999;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    attn_selection_free(s), s = NULL;
    c = f->c128, c.attn_type = (attn_attn_type)-3;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_select_uncached(f->h100, NULL, &c, &s));
    attn_selection_free(s), s = NULL;
    ROW(ATTN_NULL_ARGUMENT, "'p' is NULL", attn_select(NULL, NULL, &f->c128, &cs));
    ROW(ATTN_NULL_ARGUMENT, "'cfg' is NULL", attn_select(f->h100, NULL, NULL, &cs));
    ROW(ATTN_NULL_ARGUMENT, "'out' is NULL", attn_select(f->h100, NULL, &f->c128, NULL));
    char longname[400];
    memset(longname, 'A', sizeof longname - 1), longname[sizeof longname - 1] = 0;
    ROW(ATTN_INVALID_ARGUMENT, "backend name too long",
        attn_select(f->h100, longname, &f->c128, &cs));
    /* the findings: NULL configs dereferenced */
    VAL(0, attn_selector_config_equal(NULL, &f->c128));
    VAL(1, attn_selector_config_equal(NULL, NULL));
    VAL(0, attn_selector_config_hash(NULL));
    char rb[16];
    VAL(4, attn_selector_config_repr(NULL, rb, sizeof rb));
    VAL(0, strcmp(rb, "None"));
    VAL(attn_selector_config_repr(&f->c128, NULL, 0) > 40,
        attn_selector_config_repr(&f->c128, NULL, 5) > 40);
    /* the finding: names = NULL was written to */
    const char *names[4];
    int full = attn_platform_priorities(f->h100, &f->c128, names, 4);
    VAL(full, attn_platform_priorities(f->h100, &f->c128, NULL, 4));
    VAL(full, attn_platform_priorities(f->h100, &f->c128, names, -7));
    VAL(0, attn_platform_priorities(NULL, &f->c128, names, 4));
    /* the finding: block size -16 was "supported" (0 stays vLLM's None: supported) */
    VAL(1, attn_backend_supports_block_size(f->cpu->desc, f->local, 0));
    VAL(0, attn_backend_supports_block_size(f->cpu->desc, f->local, -1));
    VAL(0, attn_backend_supports_block_size(f->cpu->desc, f->local, -16));
    VAL(0, attn_backend_supports_block_size(f->cpu->desc, f->local, INT_MAX));
    VAL(1, attn_backend_supports_block_size(f->cpu->desc, f->local, 16));
    VAL(0, attn_backend_supports_block_size(NULL, f->local, 16));
    /* registry */
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_register_backend("", "builtin:REFERENCE"));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_register_backend(NULL, "builtin:REFERENCE"));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_register_backend("X_BAD", NULL));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_register_backend("X_BAD", "no-colon-here"));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_register_backend_object("X_BAD", NULL));
    attn_backend badabi = {.abi_version = 77, .struct_size = sizeof badabi, .desc = f->ref->desc};
    ROW(ATTN_ABI_MISMATCH, NULL, attn_register_backend_object("X_BAD", &badabi));
    const char *loc = NULL;
    ROW(ATTN_UNKNOWN_BACKEND, NULL, attn_registry_get_locator("NO_SUCH_BACKEND", &loc));
    ROW(ATTN_UNKNOWN_BACKEND, NULL, attn_registry_clear_override("NO_SUCH_BACKEND"));
    const attn_backend *b = NULL;
    ROW(ATTN_UNKNOWN_BACKEND, NULL, attn_backend_resolve(f->local, "NO_SUCH_BACKEND", &b));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_backend_resolve(f->local, NULL, &b));
    VAL(0, attn_registry_contains(NULL));
    VAL(1, attn_registry_name(-1) == NULL);
    VAL(1, attn_registry_name(1 << 30) == NULL);
}

static void rows_platform_model_engine(fx *f)
{
    attn_platform *p = NULL;
    ROW(ATTN_INVALID_ARGUMENT, "empty machine spec", attn_platform_open("", &p));
    ROW(ATTN_NOT_FOUND, "unknown machine 'h999'", attn_platform_open("h999", &p));
    /* found by fuzz_machine: detail text quoting broken UTF-8 is itself valid UTF-8 */
    ROW(ATTN_NOT_FOUND, "unknown machine 'h?\xc3\xa9'", attn_platform_open("h\xff\xc3\xa9", &p));
    /* the finding: cuda:99.99 was accepted */
    ROW(ATTN_INVALID_ARGUMENT, "major 1-20, minor 0-9", attn_platform_open("cuda:99.99", &p));
    ROW(ATTN_INVALID_ARGUMENT, "major 1-20", attn_platform_open("cuda:8.10", &p));
    ROW(ATTN_INVALID_ARGUMENT, "major 1-20", attn_platform_open("cuda:0.9", &p));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_platform_open("rocm:gfx1", &p));
    ROW(ATTN_INVALID_ARGUMENT, "needs a capability", attn_platform_open("cuda", &p));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_platform_open(NULL, &p));
    /* the findings: invalid UTF-8, lone surrogates and NUL in machine specs */
    ROW(ATTN_PARSE_ERROR, "invalid UTF-8",
        attn_platform_from_json("{\"name\":\"x\xff\",\"platform\":\"cpu\"}", &p));
    ROW(ATTN_PARSE_ERROR, "lone UTF-16 surrogate",
        attn_platform_from_json("{\"name\":\"\\ud800\",\"platform\":\"cpu\"}", &p));
    ROW(ATTN_PARSE_ERROR, "\\u0000 is not supported",
        attn_platform_from_json("{\"name\":\"x\",\"platform\\u0000junk\":\"cpu\"}", &p));
    ROW(ATTN_PARSE_ERROR, "invalid UTF-8",
        attn_platform_from_json("{\"name\":\"\xc0\xaf\",\"platform\":\"cpu\"}", &p));
    ROW(ATTN_PARSE_ERROR, "invalid UTF-8",
        attn_platform_from_json("{\"name\":\"\xed\xa0\x80\",\"platform\":\"cpu\"}", &p));
    ROW(ATTN_PARSE_ERROR, NULL, attn_platform_from_json("{\"name\":", &p));
    ROW(ATTN_PARSE_ERROR, NULL, attn_platform_from_json("", &p));
    ROW(ATTN_INVALID_ARGUMENT, NULL,
        attn_platform_from_json("{\"name\":\"x\",\"platform\":\"cuda\",\"capability\":\"99.99\"}",
                                &p));
    ROW(ATTN_NULL_ARGUMENT, NULL, attn_platform_from_json(NULL, &p));
    VAL(1, p == NULL);
    attn_platform *own = NULL;
    CHECK_OK(attn_platform_open("h100", &own));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_platform_set_setting(own, "no_such_setting=1"));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_platform_set_setting(own, "rocm_use_aiter"));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_platform_set_installed(own, "fa2,warp-drive"));
    attn_platform_free(own);
    /* models */
    attn_model *m = NULL;
    char small[8];
    /* the finding: INT_MAX heads accepted */
    ROW(ATTN_INVALID_ARGUMENT, "heads must be in [1, 65536]",
        attn_model_from_shape(2, INT_MAX, 1, 64, ATTN_DTYPE_BF16, &m));
    ROW(ATTN_INVALID_ARGUMENT, "head_size must be in [1, 4096]",
        attn_model_from_shape(2, 4, 2, INT_MAX, ATTN_DTYPE_BF16, &m));
    ROW(ATTN_INVALID_ARGUMENT, "layers must be in [1, 100000]",
        attn_model_from_shape(INT_MAX, 4, 2, 64, ATTN_DTYPE_BF16, &m));
    ROW(ATTN_INVALID_ARGUMENT, "divide heads",
        attn_model_from_shape(2, 4, 3, 64, ATTN_DTYPE_BF16, &m));
    ROW(ATTN_INVALID_ARGUMENT, "invalid dtype",
        attn_model_from_shape(2, 4, 2, 64, (attn_dtype)5, &m));
    /* the finding: a YaRN factor of 1e308 loaded with an infinite softmax scale */
    ROW(ATTN_PARSE_ERROR, "field 'rope_scaling.factor': 1e+308 with mscale_all_dim 1e+300 gives",
        attn_model_from_json("{\"model_type\":\"deepseek_v3\",\"num_hidden_layers\":2,"
                             "\"num_attention_heads\":4,\"hidden_size\":256,\"kv_lora_rank\":64,"
                             "\"qk_rope_head_dim\":16,\"qk_nope_head_dim\":32,\"v_head_dim\":32,"
                             "\"rope_scaling\":{\"factor\":1e308,\"mscale_all_dim\":1e300}}",
                             "x", &m));
    ROW(ATTN_PARSE_ERROR, NULL, attn_model_from_json("{\"num_hidden_layers\":", "x", &m));
    ROW(ATTN_PARSE_ERROR, "field 'head_dim': 999999 is out of range [1, 4096]",
        attn_model_from_json("{\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                             "\"hidden_size\":256,\"head_dim\":999999}",
                             "x", &m));
    ROW(ATTN_PARSE_ERROR, "field 'num_attention_heads': 2147483647 is out of range [1, 65536]",
        attn_model_from_json("{\"num_hidden_layers\":2,\"num_attention_heads\":2147483647,"
                             "\"hidden_size\":256}",
                             "x", &m));
    ROW(ATTN_PARSE_ERROR, "invalid UTF-8",
        attn_model_from_json("{\"model_type\":\"ll\xfe\"}", "x", &m));
    ROW(ATTN_NOT_FOUND, "unknown model 'nope-1b'", attn_model_load("nope-1b", &m));
    ROW(ATTN_INVALID_ARGUMENT, "is not valid", attn_model_preset_path("../x", small, sizeof small));
    ROW(ATTN_IO_ERROR, "cannot open '../../no/such'", attn_model_load("../../no/such", &m));
    VAL(1, m == NULL);
    /* the finding: a short buffer was reported as "unknown model" */
    memcpy(small, "zzzzzzz", 8);
    ROW(ATTN_OUT_OF_RANGE, "does not fit a buffer of 8 bytes",
        attn_model_preset_path("llama-3.1-8b", small, sizeof small));
    VAL(0, small[0]);
    ROW(ATTN_NOT_FOUND, "unknown model", attn_model_preset_path("nope-1b", small, sizeof small));
    /* the finding: dirs = NULL was written to */
    VAL(0, attn_model_data_dirs(NULL, 5));
    VAL(0, attn_model_data_dirs(NULL, -1));
    /* engine */
    attn_engine_config ec;
    attn_engine_config_init(&ec);
    ec.model = f->model;
    ec.platform = f->h100;
    attn_engine *e = NULL;
    /* the finding: max_num_seqs = INT_MAX overflowed */
    ec.max_num_seqs = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, "max_num_seqs 2147483647", attn_engine_create(&ec, &e));
    ec.max_num_seqs = 0, ec.max_waiting = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, "max_waiting 2147483647", attn_engine_create(&ec, &e));
    ec.max_waiting = 0, ec.block_size = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, "block_size 2147483647", attn_engine_create(&ec, &e));
    ec.block_size = 0, ec.num_blocks = -1;
    ROW(ATTN_INVALID_ARGUMENT, "num_blocks -1", attn_engine_create(&ec, &e));
    ec.num_blocks = 0, ec.max_model_len = INT_MAX;
    ROW(ATTN_INVALID_ARGUMENT, "max_model_len 2147483647", attn_engine_create(&ec, &e));
    ec.max_model_len = 0, ec.kv_memory_fraction = 2;
    ROW(ATTN_INVALID_ARGUMENT, "kv_memory_fraction 2", attn_engine_create(&ec, &e));
    ec.kv_memory_fraction = 0, ec.kv_cache_dtype = (attn_kv_dtype)77;
    ROW(ATTN_INVALID_ARGUMENT, "kv_cache_dtype 77", attn_engine_create(&ec, &e));
    ec.kv_cache_dtype = ATTN_KV_AUTO, ec.struct_size = 3;
    ROW(ATTN_ABI_MISMATCH, "struct_size is 3", attn_engine_create(&ec, &e));
    ec.struct_size = sizeof ec, ec.model = NULL;
    ROW(ATTN_INVALID_ARGUMENT, "no model", attn_engine_create(&ec, &e));
    VAL(1, e == NULL);
    /* parsers */
    attn_dtype dt;
    attn_kv_dtype kd;
    attn_attn_type at;
    attn_component comp;
    attn_setting set;
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_dtype_parse("float17", &dt));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_dtype_parse("", &dt));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_kv_dtype_parse("fp7", &kd));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_attn_type_parse("decoderish", &at));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_component_parse("fa9", &comp));
    ROW(ATTN_INVALID_ARGUMENT, NULL, attn_setting_parse("turbo", &set));
    /* names of out-of-range enums are text, never a crash */
    VAL(1, attn_dtype_name((attn_dtype)99) != NULL);
    VAL(1, attn_kv_dtype_name((attn_kv_dtype)999) != NULL);
    VAL(1, attn_elem_name((attn_elem)99) != NULL);
    VAL(1, attn_layout_name((attn_kv_layout)99) != NULL);
    VAL(1, attn_status_name((attn_status)12345) != NULL);
    /* the finding: log level 99 indexed the tag table out of bounds */
    attn_log_level before = attn_log_get_level();
    attn_log_set_level((attn_log_level)99);
    VAL(before, attn_log_get_level());
    attn_log((attn_log_level)99, "bad-input matrix: a message at level 99 is said as an error");
    attn_log((attn_log_level)-4, "bad-input matrix: a message at level -4 is said as an error");
    VAL(before, attn_log_get_level());
}

/* Wrapping keeps the whole inner detail (before: the outer text was written
 * over the inner one while reading it). */
static void wrapped_messages(void)
{
    attn_model *m = NULL;
    CHECK_STATUS(attn_model_load("/nonexistent/dir/config.json", &m), ATTN_IO_ERROR);
    CHECK_STR(attn_last_error(),
              "cannot read model config '/nonexistent/dir/config.json': cannot open "
              "'/nonexistent/dir/config.json': No such file or directory");
    attn_platform *p = NULL;
    CHECK_STATUS(attn_platform_open("/nonexistent/dir/m.json", &p), ATTN_IO_ERROR);
    CHECK_CONTAINS(attn_last_error(), "No such file or directory");
}

int main(void)
{
    setenv("ATTN_LOG", "error", 1);
    fx *f = calloc(1, sizeof *f);
    setup(f);
    rows_metadata_and_forward(f);
    rows_kvcache(f);
    rows_select_registry(f);
    rows_platform_model_engine(f);
    wrapped_messages();
    printf("bad-input matrix (API): %d rows\n", g_rows);
    CHECK(g_rows >= 100);
    attn_block_pool_free(f->pool);
    attn_kv_cache_free(f->cache);
    attn_model_free(f->model);
    attn_platform_free(f->h100);
    free(f);
    return attn_test_finish("test_badinput_api");
}
