/* The one way to call a kernel (attn/kernel.h): a backend whose core
 * self-test fails cannot be opened (its reason is the error), nor can one
 * that declares no test, nor a descriptor-only one; the oracles open
 * without one; ATTN_SELFTEST=0 is the documented escape hatch. The handle
 * checks the call's geometry, states a layer's row widths once, and folds
 * element offsets on a host device into exactly what pointer arithmetic
 * would give. The engine and DCP refuse the failing backend through the
 * same gate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/dcp.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "test.h"
#include "util/numeric.h"

/* REFERENCE with its first output element off by one: the bug. */
static attn_status off_by_one(void *impl, const attn_forward_args *a)
{
    (void)impl;
    attn_status st = attn__reference_forward(a);
    if (st == ATTN_OK && a->common->num_actual_tokens > 0) {
        attn_elem e = attn_dtype_elem(a->layer->dtype);
        attn__store_elem(a->out, e, 0, attn__load_elem(a->out, e, 0) + 1.0f);
    }
    return st;
}

static attn_status plain(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__reference_forward(a);
}

static const attn_kernel_ops broken_ops = {
    .struct_size = sizeof(attn_kernel_ops), .forward = off_by_one, .kind = ATTN_KERNEL_STANDARD};
static const attn_kernel_ops untested_ops = {.struct_size = sizeof(attn_kernel_ops),
                                             .forward = plain};

static attn_backend_desc broken_desc, untested_desc;
static attn_backend broken = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                              .struct_size = sizeof(attn_backend),
                              .desc = &broken_desc,
                              .kernel = &broken_ops};
static attn_backend untested = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                .struct_size = sizeof(attn_backend),
                                .desc = &untested_desc,
                                .kernel = &untested_ops};

static const attn_layer_params layer = {.num_heads = 8,
                                        .num_kv_heads = 2,
                                        .head_size = 64,
                                        .attn_type = ATTN_TYPE_DECODER,
                                        .dtype = ATTN_DTYPE_FP32,
                                        .kv_cache_dtype = ATTN_KV_AUTO};

static void test_gate(void)
{
    attn_kernel *k = (attn_kernel *)1;
    CHECK_STATUS(attn_kernel_open(&broken, &layer, NULL, &k), ATTN_SELFTEST_FAILED);
    CHECK(k == NULL);
    CHECK_CONTAINS(attn_last_error(), "BROKEN_ATTN failed its self-test: max error");
    CHECK_STATUS(attn_kernel_open(&untested, &layer, NULL, &k), ATTN_SELFTEST_FAILED);
    CHECK_CONTAINS(attn_last_error(), "UNTESTED_ATTN declares no self-test");
    /* the oracles are the known answer */
    CHECK_OK(attn_kernel_open(&attn__backend_reference, &layer, NULL, &k));
    CHECK_STR(attn_kernel_name(k), "REFERENCE");
    CHECK_STR(attn_device_name(attn_kernel_device(k)), "host");
    CHECK(!attn_kernel_is_mla(k));
    attn_kernel_close(k);
    /* the documented escape hatch, as in the selector */
    setenv("ATTN_SELFTEST", "0", 1);
    CHECK_OK(attn_kernel_open(&broken, &layer, NULL, &k));
    attn_kernel_close(k);
    unsetenv("ATTN_SELFTEST");
    CHECK_STATUS(attn_kernel_open(&broken, &layer, NULL, &k), ATTN_SELFTEST_FAILED);
    /* descriptor only */
    attn_platform *h100 = NULL;
    const attn_backend *fa = NULL;
    CHECK_OK(attn_platform_open("h100", &h100));
    CHECK_OK(attn_backend_resolve(h100, "FLASH_ATTN", &fa));
    CHECK_STATUS(attn_kernel_open(fa, &layer, NULL, &k), ATTN_UNSUPPORTED);
    CHECK_CONTAINS(attn_last_error(), "descriptor only");
    attn_platform_free(h100);
}

/* DCP and the engine refuse the failing backend through the same gate. */
static void test_gate_callers(void)
{
    attn_comm *self = NULL;
    CHECK_OK(attn_comm_self(&self));
    attn_dcp_init di = {.struct_size = sizeof di,
                        .backend = &broken,
                        .layer = &layer,
                        .comm = self,
                        .block_size = 16,
                        .num_blocks = 8,
                        .max_num_tokens = 4,
                        .max_blocks_per_req = 2};
    attn_dcp *d = NULL;
    CHECK_STATUS(attn_dcp_create(&di, &d), ATTN_SELFTEST_FAILED);
    CHECK(d == NULL);
    attn_comm_free(self);
    /* an engine asked for it: the selector's own gate says why */
    CHECK_OK(attn_register_backend_object("BROKEN_ATTN", &broken));
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(1, 8, 2, 64, ATTN_DTYPE_FP32, &m));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.model = m;
    cfg.backend = "BROKEN_ATTN";
    cfg.num_blocks = 16;
    attn_engine *e = NULL;
    CHECK(attn_engine_create(&cfg, &e) != ATTN_OK);
    CHECK(e && attn_engine_error(e) && strstr(attn_engine_error(e), "self-test failed"));
    attn_engine_free(e);
    attn_model_free(m);
}

static void test_rows(void)
{
    attn_layer_rows r;
    CHECK_OK(attn_layer_rows_get(&layer, &r));
    CHECK(!r.mla && r.q_heads == 8 && r.q_dim == 64 && r.out_dim == 64 && r.kv_heads == 2 &&
          r.k_dim == 64 && r.v_dim == 64 && r.kv_dim == 64 && r.q_row == 512 && r.out_row == 512 &&
          r.k_row == 128 && r.v_row == 128 && r.mqa_q_dim == 0);
    attn_layer_params dv = layer;
    dv.head_size_v = 32;
    CHECK_OK(attn_layer_rows_get(&dv, &r));
    CHECK(r.out_dim == 32 && r.v_dim == 32 && r.kv_dim == 64 && r.v_row == 64);
    attn_layer_params mla = {.num_heads = 16,
                             .num_kv_heads = 1,
                             .head_size = 576,
                             .dtype = ATTN_DTYPE_BF16,
                             .kv_lora_rank = 512,
                             .qk_rope_head_dim = 64,
                             .qk_nope_head_dim = 128,
                             .v_head_dim = 128};
    CHECK_OK(attn_layer_rows_get(&mla, &r));
    CHECK(r.mla && r.q_dim == 192 && r.out_dim == 128 && r.kv_heads == 1 && r.k_dim == 512 &&
          r.v_dim == 64 && r.kv_dim == 512 && r.mqa_q_dim == 576 && r.mqa_out_dim == 512 &&
          r.q_row == 16 * 192);
    attn_layer_params bad = layer;
    bad.num_kv_heads = 3;
    CHECK_STATUS(attn_layer_rows_get(&bad, &r), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "positive multiple");
    bad = layer;
    bad.head_size = ATTN_MAX_HEAD_SIZE + 1;
    CHECK_STATUS(attn_layer_rows_get(&bad, &r), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_layer_rows_get(NULL, &r), ATTN_NULL_ARGUMENT);
}

/* Offsets on the host device are folded into the pointers: a call with
 * offsets equals the call on the shifted pointers, bit for bit, and the
 * rows before the offsets are not touched. */
static void test_offsets(void)
{
    enum { NB = 6, BS = 16, T = 3, H = 8, KVH = 2, D = 64, PAD = 5 };
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(attn__backend_cpu_attn.desc, ATTN_LAYOUT_HND, NB, BS, KVH, D, 0,
                                    ATTN_KV_AUTO, ATTN_DTYPE_FP32, &li));
    attn_kv_cache *c = NULL;
    CHECK_OK(attn_kv_cache_create(&li, 1, &c));
    attn_kv_view kv;
    CHECK_OK(attn_kv_cache_view(c, 0, &kv));
    int32_t qsl[3] = {0, 1, 3}, seq[2] = {20, 34}, bt[2][3] = {{4, 1, 0}, {2, 5, 3}};
    static int64_t slots[54];
    static float kin[54 * KVH * D];
    for (int i = 0; i < 54 * KVH * D; i++)
        kin[i] = sinf((float)i * 0.37f);
    int n = 0;
    for (int r = 0; r < 2; r++)
        for (int p = 0; p < seq[r]; p++)
            slots[n++] = (int64_t)bt[r][p / BS] * BS + p % BS;
    CHECK_OK(attn_kv_write(&kv, slots, n, kin, kin, ATTN_ELEM_F32));
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = 2,
                               .num_actual_tokens = T,
                               .max_query_len = 2,
                               .max_seq_len = 34,
                               .block_table = &bt[0][0],
                               .block_table_stride = 3,
                               .causal = true,
                               .block_size = BS};
    static float q[(PAD + T) * H * D], out1[T * H * D], out2[(PAD + T) * H * D];
    static float lse1[T * H], lse2[PAD + T * H];
    for (int i = 0; i < (PAD + T) * H * D; i++)
        q[i] = cosf((float)i * 0.11f);
    for (int i = 0; i < (PAD + T) * H * D; i++)
        out2[i] = 7.0f;
    for (int i = 0; i < PAD + T * H; i++)
        lse2[i] = 7.0f;
    attn_kernel *k = NULL;
    CHECK_OK(attn_kernel_open(&attn__backend_cpu_attn, &layer, NULL, &k));
    attn_forward_args a = {
        .common = &cm, .q = q + PAD * H * D, .kv = &kv, .out = out1, .lse = lse1};
    CHECK_OK(attn_kernel_forward(k, &a));
    attn_forward_args b = {.common = &cm,
                           .q = q,
                           .q_offset = PAD * H * D,
                           .kv = &kv,
                           .out = out2,
                           .out_offset = PAD * H * D,
                           .lse = lse2,
                           .lse_offset = PAD};
    CHECK_OK(attn_kernel_forward(k, &b));
    CHECK(memcmp(out1, out2 + PAD * H * D, sizeof out1) == 0);
    CHECK(memcmp(lse1, lse2 + PAD, sizeof lse1) == 0);
    bool untouched = true;
    for (int i = 0; i < PAD * H * D; i++)
        untouched = untouched && out2[i] == 7.0f;
    for (int i = 0; i < PAD; i++)
        untouched = untouched && lse2[i] == 7.0f;
    CHECK(untouched);
    /* a negative offset is refused; a call's layer must have the opened geometry */
    b.q_offset = -1;
    CHECK_STATUS(attn_kernel_forward(k, &b), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "q offset -1 < 0");
    b.q_offset = PAD * H * D;
    attn_layer_params other = layer;
    other.head_size = 128;
    b.layer = &other;
    CHECK_STATUS(attn_kernel_forward(k, &b), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "CPU_ATTN kernel was opened for heads 8/2, head size 64/64");
    /* scalars may differ per call (DCP's per-token window) */
    other = layer;
    other.sliding_window = 4;
    b.layer = &other;
    CHECK_OK(attn_kernel_forward(k, &b));
    attn_mla_args ma = {.common = &cm, .kv = &kv, .q = q, .out = out1};
    CHECK_STATUS(attn_kernel_forward_mqa(k, &ma), ATTN_WRONG_ENTRY_POINT);
    CHECK_STATUS(attn_kernel_mla_forward(k, &ma, NULL, 0), ATTN_WRONG_ENTRY_POINT);
    CHECK(attn_kernel_mla_scratch_size(k, 16) == 0);
    attn_kernel_close(k);
    attn_kv_cache_free(c);
}

int main(void)
{
    broken_desc = *attn__backend_reference.desc;
    broken_desc.name = "BROKEN_ATTN";
    untested_desc = *attn__backend_reference.desc;
    untested_desc.name = "UNTESTED_ATTN";
    test_gate();
    test_gate_callers();
    test_rows();
    test_offsets();
    return attn_test_finish("test_kernel_api");
}
