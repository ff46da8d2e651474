/* Builders are public (plugins and engines call them directly), so each one
 * checks its batch as attn_backend_forward does: every distinct builder of
 * the catalog (standard, MLA, CPU_ATTN, CPU_MLA, sparse) gets the hostile
 * batches below and must answer ATTN_BAD_METADATA naming the problem (the
 * finding: query_start_loc {0, 12, INT_MIN, -5, 12} overflowed a
 * subtraction in CPU_ATTN's builder and came back as ATTN_INTERNAL "tile
 * capacity exceeded"). Then the size limits at create: a builder or a KV
 * cache asked for INT_MAX requests, tokens or layers returns a clean status
 * before allocating (the findings: a negative calloc size, a 50 GiB cache). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "test.h"

#define MAXB 64

typedef struct bcase {
    const char *what, *frag;
    int n, tokens;
    const int32_t *qsl, *seq;
} bcase;

static const int32_t q_min[5] = {0, 12, INT_MIN, -5, 12}, q_dec[4] = {0, 5, 3, 12},
                     q_one[5] = {1, 2, 3, 4, 12}, q_ok[5] = {0, 3, 6, 9, 12}, q_long[2] = {0, 12};
static const int32_t s_ok[4] = {12, 12, 12, 12}, s_neg[4] = {12, -5, 12, 12},
                     s_big[4] = {INT_MAX, 12, 12, 12}, s_short[1] = {4};

static const bcase g_cases[] = {
    {"INT_MIN in query_start_loc", "request 1 has query_start_loc 12..-2147483648 (decreasing)", 4,
     12, q_min, s_ok},
    {"decreasing query_start_loc", "request 1 has query_start_loc 5..3 (decreasing)", 3, 12, q_dec,
     s_ok},
    {"query_start_loc from 1", "query_start_loc runs from 1 to 12 but the batch has 12 tokens", 4,
     12, q_one, s_ok},
    {"end past the tokens", "query_start_loc runs from 0 to 12 but the batch has 7 tokens", 4, 7,
     q_ok, s_ok},
    {"negative seq_len", "request 1 has seq_len -5 (must be in [0, 268435456])", 4, 12, q_ok,
     s_neg},
    {"seq_len INT_MAX", "request 0 has seq_len 2147483647", 4, 12, q_ok, s_big},
    {"query longer than its sequence", "request 0 has query length 12 but seq_len 4", 1, 12, q_long,
     s_short},
    {"negative num_reqs", "-1 requests", -1, 0, q_ok, s_ok},
    {"tokens without a request", "3 tokens but no request", 0, 3, q_ok, s_ok},
    {"no query_start_loc", "query_start_loc", 4, 12, NULL, s_ok},
};

static attn_layer_params layer_for(const attn_backend_desc *d)
{
    attn_layer_params l = {.num_heads = 4,
                           .num_kv_heads = 2,
                           .head_size = 64,
                           .attn_type = ATTN_TYPE_DECODER,
                           .dtype = ATTN_DTYPE_BF16,
                           .kv_cache_dtype = ATTN_KV_AUTO};
    if (d->is_mla) {
        l.num_kv_heads = 1;
        l.head_size = 80;
        l.kv_lora_rank = 64;
        l.qk_rope_head_dim = 16;
        l.qk_nope_head_dim = 32;
        l.v_head_dim = 32;
    }
    return l;
}

static attn_builder_init init_for(const attn_backend_desc *d, const attn_layer_params *l)
{
    return (attn_builder_init){.desc = d,
                               .layer = l,
                               .block_size = 16,
                               .num_blocks = 64,
                               .max_num_reqs = 8,
                               .max_num_tokens = MAXB,
                               .max_blocks_per_req = 4,
                               .num_threads = 1};
}

static int g_builders;

/* Every hostile batch against one builder, and a good one that builds. A
 * backend with a device of its own (OPENCL_ATTN) builds on an instance of
 * it; where that device is missing here, its builder is skipped. */
static void hostile_batches(const char *name, const attn_backend *b)
{
    const attn_backend_desc *d = b->desc;
    attn_layer_params l = layer_for(d);
    attn_builder_init in = init_for(d, &l);
    attn_device *dev = NULL;
    if (b->device) {
        attn_status ds = attn_device_open(b, NULL, &dev);
        if (ds == ATTN_PLATFORM_UNAVAILABLE) {
            printf("%s: skipped, no device: %s\n", name, attn_last_error());
            return;
        }
        CHECK_MSG(ds == ATTN_OK, "%s: device: %s", name, attn_last_error());
        if (ds != ATTN_OK) return;
        in.device = dev;
    }
    void *st = NULL;
    attn_status cs = d->builder->create(&in, &st);
    CHECK_MSG(cs == ATTN_OK, "%s (%s): create: %s", name, d->builder->type_name, attn_last_error());
    if (cs != ATTN_OK) {
        attn_device_close(dev);
        return;
    }
    g_builders++;
    int32_t bt[8 * 4] = {0};
    int64_t slots[MAXB] = {0};
    for (int i = 0; i < 8 * 4; i++)
        bt[i] = i;
    for (size_t k = 0; k < sizeof g_cases / sizeof g_cases[0]; k++) {
        const bcase *c = &g_cases[k];
        attn_common_metadata cm = {.query_start_loc = c->qsl,
                                   .seq_lens = c->seq,
                                   .num_reqs = c->n,
                                   .num_actual_tokens = c->tokens,
                                   .max_query_len = 12,
                                   .max_seq_len = 12,
                                   .block_table = bt,
                                   .block_table_stride = 4,
                                   .slot_mapping = slots,
                                   .causal = true,
                                   .block_size = 16};
        const void *md = NULL;
        attn_clear_error();
        attn_status s = d->builder->build(st, 0, &cm, false, &md);
        CHECK_MSG(s == ATTN_BAD_METADATA, "%s (%s): %s: %s (%s)", name, d->builder->type_name,
                  c->what, attn_status_name(s), attn_last_error());
        CHECK_MSG(strstr(attn_last_error(), c->frag), "%s (%s): %s: '%s' lacks '%s'", name,
                  d->builder->type_name, c->what, attn_last_error(), c->frag);
    }
    int32_t q[3] = {0, 1, 5}, s[2] = {9, 4};
    attn_common_metadata ok = {.query_start_loc = q,
                               .seq_lens = s,
                               .num_reqs = 2,
                               .num_actual_tokens = 5,
                               .max_query_len = 4,
                               .max_seq_len = 9,
                               .block_table = bt,
                               .block_table_stride = 4,
                               .slot_mapping = slots,
                               .causal = true,
                               .block_size = 16};
    const void *md = NULL;
    CHECK_MSG(d->builder->build(st, 0, &ok, false, &md) == ATTN_OK && md, "%s: good batch: %s",
              name, attn_last_error());
    d->builder->destroy(st);
    attn_device_close(dev);
}

static void every_builder(void)
{
    const attn_builder_ops *seen[64];
    int nseen = 0;
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const char *name = attn_backend_catalog_name(i);
        const attn_backend *b = attn_backend_catalog_builtin(name);
        if (!b || !b->desc || !b->desc->builder) continue;
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup = dup || seen[k] == b->desc->builder;
        if (dup || nseen == 64) continue;
        seen[nseen++] = b->desc->builder;
        hostile_batches(name, b);
    }
    printf("hostile batches: %d builders x %zu cases\n", g_builders,
           sizeof g_cases / sizeof g_cases[0]);
    /* standard, FA/ROCm, FlashInfer, Triton, Flex, the MLA family, CPU_ATTN, CPU_MLA */
    CHECK(g_builders >= 10);
}

/* create() with maxima past the stated limits: a clean status, nothing allocated. */
static void create_limits(void)
{
    const char *names[] = {"CPU_ATTN", "CPU_MLA", "FLASH_ATTN", "FLEX_ATTENTION", "FLASHMLA"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const attn_backend *b = attn_backend_catalog_builtin(names[i]);
        CHECK_MSG(b && b->desc && b->desc->builder, "%s has no builder", names[i]);
        if (!b || !b->desc || !b->desc->builder) continue;
        attn_layer_params l = layer_for(b->desc);
        for (int which = 0; which < 2; which++) {
            attn_builder_init in = init_for(b->desc, &l);
            if (which == 0)
                in.max_num_reqs = INT_MAX;
            else
                in.max_num_tokens = INT_MAX;
            void *st = NULL;
            attn_status s = b->desc->builder->create(&in, &st);
            bool cpu = strncmp(names[i], "CPU_", 4) == 0 || b->desc->is_mla;
            CHECK_MSG(s == (cpu ? ATTN_OUT_OF_MEMORY : ATTN_INVALID_ARGUMENT),
                      "%s create with %s INT_MAX: %s (%s)", names[i],
                      which ? "max_num_tokens" : "max_num_reqs", attn_status_name(s),
                      attn_last_error());
            CHECK_CONTAINS(attn_last_error(), "too large");
            CHECK(st == NULL);
        }
    }
    const attn_backend *cpu = attn_backend_catalog_builtin("CPU_ATTN");
    attn_layer_params l = layer_for(cpu->desc);
    attn_builder_init in = init_for(cpu->desc, &l);
    void *st = NULL;
    in.num_threads = INT_MAX;
    CHECK_STATUS(cpu->desc->builder->create(&in, &st), ATTN_INVALID_ARGUMENT);
    in = init_for(cpu->desc, &l), in.num_speculative_tokens = INT_MAX;
    CHECK_STATUS(cpu->desc->builder->create(&in, &st), ATTN_INVALID_ARGUMENT);
    l.num_heads = 1 << 20, l.num_kv_heads = 1 << 20;
    in = init_for(cpu->desc, &l);
    CHECK_STATUS(cpu->desc->builder->create(&in, &st), ATTN_INVALID_ARGUMENT);
    CHECK(st == NULL);
}

/* A layout of a few bytes per layer: INT_MAX layers fit 2^46 bytes, so only
 * the layer limit stops it (the finding: ~50 GiB attempted). */
static void kv_cache_layers(void)
{
    const attn_backend *cpu = attn_backend_catalog_builtin("CPU_ATTN");
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(cpu->desc, ATTN_LAYOUT_NHD, 1, 1, 1, 1, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP16, &li));
    CHECK((uint64_t)li.bytes_per_layer * INT_MAX < (1ull << 46));
    attn_kv_cache *c = NULL;
    CHECK_STATUS(attn_kv_cache_create(&li, INT_MAX, &c), ATTN_OUT_OF_MEMORY);
    CHECK_STR(attn_last_error(), "KV cache of 2147483647 layers is too large (at most 100000)");
    CHECK(c == NULL);
    CHECK_STATUS(attn_kv_cache_create(&li, ATTN_MAX_LAYERS + 1, &c), ATTN_OUT_OF_MEMORY);
    CHECK_OK(attn_kv_cache_create(&li, 2, &c));
    attn_kv_cache_free(c);
}

int main(void)
{
    every_builder();
    create_limits();
    kv_cache_layers();
    return attn_test_finish("test_badinput_builders");
}
