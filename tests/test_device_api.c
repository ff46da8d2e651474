/* Devices (attn/device.h, contract v2): the host device's instance, and an
 * opaque test device (tests/device/devtest_device.h: handles in a PROT_NONE
 * region, memory in a private arena) carrying a backend whose kernel is
 * REFERENCE. On it: allocations are zeroed and recorded; copies, cache
 * writes and kernel calls are refused before the device sees a handle that
 * is not one of its allocations (an address computed from one included) or
 * a range past its end; a bad slot writes nothing; the KV cache lives in
 * the device's memory one allocation per layer; rows read back through the
 * device's copies; the kernel's known-answer test ran on the device; the
 * kernel's result on the device equals REFERENCE's on host memory; and a
 * device without an MLA write refuses latent caches. Any host access to
 * device memory would fault here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/dcp.h"
#include "backends/reference/ref_mla.h"
#include "backends/reference/reference.h"
#include "devtest_device.h"
#include "test.h"

static devtest_stats g_stats;

static attn_status unit_open(const attn_device_config *cfg, void **state)
{
    (void)cfg;
    return devtest_open_state(&g_stats, state);
}

DEVTEST_DEVICE_OPS(unit_ops, unit_open);

static attn_status unit_create(const attn_kernel_init *init, void **impl)
{
    *impl = init->device_state;
    return init->device_state ? ATTN_OK : ATTN_INVALID_ARGUMENT;
}

static attn_status unit_forward(void *impl, const attn_forward_args *a)
{
    return devtest_forward(impl, attn__backend_reference.kernel, a);
}

static attn_status unit_mqa(void *impl, const attn_mla_args *a)
{
    return devtest_forward_mla(impl, attn__backend_reference_mla.kernel, false, a);
}

static attn_status unit_mha(void *impl, const attn_mla_args *a)
{
    return devtest_forward_mla(impl, attn__backend_reference_mla.kernel, true, a);
}

static attn_backend_desc unit_mla_desc;

/* a prefill that forgets to write its output */
static attn_status unit_mha_lazy(void *impl, const attn_mla_args *a)
{
    (void)impl, (void)a;
    return ATTN_OK;
}

static const attn_kernel_ops unit_mla_lazy_kernel = {.struct_size = sizeof(attn_kernel_ops),
                                                     .create = unit_create,
                                                     .forward_mqa = unit_mqa,
                                                     .forward_mha = unit_mha_lazy,
                                                     .kind = ATTN_KERNEL_MLA};
static const attn_backend unit_mla_lazy = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                           .struct_size = sizeof(attn_backend),
                                           .desc = &unit_mla_desc,
                                           .kernel = &unit_mla_lazy_kernel,
                                           .device = &unit_ops};

static const attn_kernel_ops unit_mla_kernel = {.struct_size = sizeof(attn_kernel_ops),
                                                .create = unit_create,
                                                .forward_mqa = unit_mqa,
                                                .forward_mha = unit_mha,
                                                .kind = ATTN_KERNEL_MLA};
static const attn_backend unit_mla = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                      .struct_size = sizeof(attn_backend),
                                      .desc = &unit_mla_desc,
                                      .kernel = &unit_mla_kernel,
                                      .device = &unit_ops};

static const attn_kernel_ops unit_kernel = {.struct_size = sizeof(attn_kernel_ops),
                                            .create = unit_create,
                                            .forward = unit_forward,
                                            .kind = ATTN_KERNEL_STANDARD};
static attn_backend_desc unit_desc;
static const attn_backend unit = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                  .struct_size = sizeof(attn_backend),
                                  .desc = &unit_desc,
                                  .kernel = &unit_kernel,
                                  .device = &unit_ops};

static void test_host(void)
{
    attn_device *h = attn_device_host();
    CHECK_STR(attn_device_name(h), "host");
    CHECK(attn_device_host_visible(h) && attn_device_host_visible(NULL));
    attn_device *d = NULL;
    CHECK_OK(attn_device_open(NULL, NULL, &d));
    CHECK(d != h && attn_device_same_kind(d, h) && attn_device_same_kind(d, NULL));
    void *m = NULL, *c = NULL;
    CHECK_OK(attn_device_alloc(d, 1000, ATTN_MEM_STEP, &m));
    CHECK_OK(attn_device_alloc(d, 1 << 20, ATTN_MEM_CACHE, &c));
    CHECK(((uintptr_t)m & 63) == 0 && ((const unsigned char *)m)[999] == 0);
    CHECK(attn_device_alloc_size(d, m) == 1000 && attn_device_alloc_size(d, c) == 1 << 20);
    int n;
    uint64_t bytes;
    attn_device_usage(d, &n, &bytes);
    CHECK(n == 2 && bytes == 1000 + (1 << 20));
    unsigned char src[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, back[16];
    CHECK_OK(attn_device_copy_in(d, m, 100, src, 16));
    CHECK_OK(attn_device_copy_out(d, back, m, 100, 16));
    CHECK(memcmp(src, back, 16) == 0 && ((unsigned char *)m)[100] == 1);
    CHECK_OK(attn_device_synchronize(d));
    CHECK_STATUS(attn_device_alloc(d, 0, ATTN_MEM_STEP, &m), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_device_alloc(d, 8, (attn_mem_kind)7, &m), ATTN_INVALID_ARGUMENT);
    attn_device_free(d, c);
    attn_device_usage(d, &n, NULL);
    CHECK(n == 1);
    attn_device_close(d); /* frees m */
    attn_device_config cfg;
    attn_device_config_init(&cfg);
    cfg.device_index = -1;
    CHECK_STATUS(attn_device_open(NULL, &cfg, &d), ATTN_INVALID_ARGUMENT);
    cfg.struct_size = 4;
    CHECK_STATUS(attn_device_open(NULL, &cfg, &d), ATTN_ABI_MISMATCH);
    CHECK(d == NULL);
}

static void test_opaque_memory(attn_device *d)
{
    CHECK_STR(attn_device_name(d), "devtest");
    CHECK(!attn_device_host_visible(d) && !attn_device_same_kind(d, NULL));
    void *a = NULL;
    CHECK_OK(attn_device_alloc(d, 256, ATTN_MEM_STEP, &a));
    float in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = (float)i;
    CHECK_OK(attn_device_copy_in(d, a, 0, in, sizeof in));
    CHECK_OK(attn_device_copy_out(d, out, a, 0, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0);
    CHECK_STATUS(attn_device_copy_in(d, a, 200, in, 64), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "run past its allocation of 256 bytes on device devtest");
    /* an address computed from a handle is not a handle */
    CHECK_STATUS(attn_device_copy_out(d, out, (char *)a + 64, 0, 4), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "is not memory of device devtest");
    CHECK_STATUS(attn_device_copy_in(d, in, 0, in, 4), ATTN_INVALID_ARGUMENT); /* host memory */
    long frees = g_stats.frees;
    attn_device_free(d, (char *)a + 64); /* not an allocation: ignored */
    CHECK(g_stats.frees == frees);
    attn_device_free(d, a);
    CHECK(g_stats.frees == frees + 1);
}

/* The KV cache on the device: written by the device, checked on the host. */
static void test_opaque_cache(attn_device *d, attn_kv_cache **out, attn_kv_view *kv)
{
    enum { NB = 6, BS = 16, KVH = 2, D = 64 };
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(&unit_desc, ATTN_LAYOUT_NHD, NB, BS, KVH, D, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP32, &li));
    CHECK_OK(attn_kv_cache_create_on(&li, 2, d, out));
    CHECK(attn_kv_cache_device(*out) == d);
    CHECK_OK(attn_kv_cache_view(*out, 1, kv));
    CHECK(kv->device == d && attn_device_alloc_size(d, kv->data) == li.bytes_per_layer);
    /* rows for 34 tokens, staged in device memory after 10 rows of padding */
    enum { N = 34, PADROWS = 10 };
    size_t row = (size_t)KVH * D;
    static float k[(N + PADROWS) * KVH * D];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        k[i] = sinf((float)i * 0.3f);
    void *dk = NULL;
    CHECK_OK(attn_device_alloc(d, sizeof k, ATTN_MEM_STEP, &dk));
    CHECK_OK(attn_device_copy_in(d, dk, 0, k, sizeof k));
    static int64_t slots[N];
    for (int i = 0; i < N; i++)
        slots[i] = (int64_t)(i < 20 ? 4 * BS + i : 2 * BS + (i - 20) % BS);
    slots[3] = -1; /* padding */
    long writes = g_stats.kv_writes;
    /* host memory as the source of a device write: refused */
    CHECK_STATUS(attn_kv_write(kv, slots, N, k, k, ATTN_ELEM_F32), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "KV write: k is not memory of device devtest");
    /* a slot outside the cache: nothing written */
    slots[7] = NB * BS;
    CHECK_STATUS(attn_kv_write_at(kv, slots, N, dk, (int64_t)(PADROWS * row), dk,
                                  (int64_t)(PADROWS * row), ATTN_ELEM_F32),
                 ATTN_INVALID_ARGUMENT);
    CHECK(g_stats.kv_writes == writes);
    slots[7] = 4 * BS + 7;
    /* a source range past its allocation */
    CHECK_STATUS(
        attn_kv_write_at(kv, slots, N, dk, (int64_t)(PADROWS * row) + 1, dk, 0, ATTN_ELEM_F32),
        ATTN_INVALID_ARGUMENT);
    CHECK(g_stats.kv_writes == writes);
    CHECK_OK(attn_kv_write_at(kv, slots, N, dk, (int64_t)(PADROWS * row), dk,
                              (int64_t)(PADROWS * row), ATTN_ELEM_F32));
    CHECK(g_stats.kv_writes == writes + 1);
    /* rows read back through the device's copies */
    float r[D];
    CHECK_OK(attn_kv_read(kv, slots[5], 1, false, r));
    CHECK(memcmp(r, k + (PADROWS + 5) * row + D, sizeof r) == 0);
    CHECK_OK(attn_kv_read(kv, slots[25], 0, true, r));
    CHECK(memcmp(r, k + (PADROWS + 25) * row, sizeof r) == 0);
    CHECK_OK(attn_kv_read(kv, 4 * BS + 3, 0, false, r)); /* the padding token's slot */
    CHECK(r[0] == 0.0f && r[D - 1] == 0.0f);
    /* no MLA write on this device */
    float lat[8] = {0};
    attn_kv_view mv = *kv;
    CHECK_STATUS(attn_mla_write_latent(&mv, slots, 1, lat, lat, ATTN_DTYPE_FP32), ATTN_UNSUPPORTED);
    attn_device_free(d, dk);
}

/* The kernel on the device equals REFERENCE on host memory holding the same
 * cache; the handle refuses host tensors and short ranges. */
static void test_opaque_kernel(attn_device *d, const attn_kv_view *kv)
{
    const attn_layer_params lp = {.num_heads = 4,
                                  .num_kv_heads = 2,
                                  .head_size = 64,
                                  .attn_type = ATTN_TYPE_DECODER,
                                  .dtype = ATTN_DTYPE_FP32};
    attn_kernel *k = NULL;
    CHECK_STATUS(attn_kernel_open(&unit, &lp, NULL, &k), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "runs on the devtest device, not on an instance of host");
    long kernels = g_stats.kernels;
    CHECK_OK(attn_kernel_open(&unit, &lp, d, &k));
    CHECK(g_stats.kernels > kernels); /* the known-answer test ran on a devtest instance */
    int32_t qsl[3] = {0, 1, 3}, seq[2] = {20, 14}, bt[2][2] = {{4, 5}, {2, 0}};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = 2,
                               .num_actual_tokens = 3,
                               .max_query_len = 2,
                               .max_seq_len = 20,
                               .block_table = &bt[0][0],
                               .block_table_stride = 2,
                               .causal = true,
                               .block_size = 16};
    enum { QN = 3 * 4 * 64, OFF = 256 };
    static float q[OFF + QN], out[QN], ref[QN], lse[12], rlse[12];
    for (int i = 0; i < OFF + QN; i++)
        q[i] = cosf((float)i * 0.07f);
    void *dq = NULL, *dout = NULL, *dlse = NULL;
    CHECK_OK(attn_device_alloc(d, sizeof q, ATTN_MEM_STEP, &dq));
    CHECK_OK(attn_device_alloc(d, sizeof out, ATTN_MEM_STEP, &dout));
    CHECK_OK(attn_device_alloc(d, sizeof lse, ATTN_MEM_STEP, &dlse));
    CHECK_OK(attn_device_copy_in(d, dq, 0, q, sizeof q));
    attn_forward_args a = {
        .common = &cm, .q = dq, .q_offset = OFF, .kv = kv, .out = dout, .lse = dlse};
    CHECK_OK(attn_kernel_forward(k, &a));
    CHECK_OK(attn_device_copy_out(d, out, dout, 0, sizeof out));
    CHECK_OK(attn_device_copy_out(d, lse, dlse, 0, sizeof lse));
    /* REFERENCE on a host copy of the same cache layer */
    int64_t elems = 0;
    CHECK_OK(attn_kv_view_extent(kv, &elems));
    attn_kv_view bad = *kv;
    bad.stride_block = INT64_MAX / 2;
    int64_t ignored;
    CHECK_STATUS(attn_kv_view_extent(&bad, &ignored), ATTN_INVALID_ARGUMENT);
    float *host = malloc((size_t)elems * sizeof(float));
    CHECK_OK(attn_device_copy_out(d, host, kv->data, 0, (size_t)elems * sizeof(float)));
    attn_kv_view hv = *kv;
    hv.data = host;
    hv.device = NULL;
    attn_forward_args h = {
        .layer = &lp, .common = &cm, .q = q + OFF, .kv = &hv, .out = ref, .lse = rlse};
    CHECK_OK(attn__reference_forward(&h));
    CHECK(memcmp(out, ref, sizeof out) == 0 && memcmp(lse, rlse, sizeof lse) == 0);
    /* refused before the device sees them */
    long before = g_stats.kernels;
    a.q = q; /* host memory */
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "q is not memory of device devtest");
    a.q = dq;
    a.q_offset = OFF + 1; /* one element past the end */
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "run past its allocation");
    a.q_offset = OFF;
    a.kv = &hv; /* host memory as the cache */
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "its KV view is memory of the host");
    CHECK(g_stats.kernels == before);
    /* another instance of the same device is another memory */
    attn_device *d2 = NULL;
    CHECK_OK(attn_device_open(&unit, NULL, &d2));
    attn_kernel *k2 = NULL;
    CHECK_OK(attn_kernel_open(&unit, &lp, d2, &k2));
    a.kv = kv;
    CHECK_STATUS(attn_kernel_forward(k2, &a), ATTN_INVALID_ARGUMENT);
    attn_kernel_close(k2);
    attn_device_close(d2);
    /* the MLA projections are host code */
    attn_mla_args ma = {.common = &cm, .kv = kv, .q = dq, .out = dout};
    CHECK_STATUS(attn_kernel_mla_forward(k, &ma, NULL, 0), ATTN_WRONG_ENTRY_POINT);
    free(host);
    attn_kernel_close(k);
    attn_device_free(d, dq);
    attn_device_free(d, dout);
    attn_device_free(d, dlse);
}

/* One-rank DCP on the device: its local batch lives in the device's memory
 * (queries copied in, outputs and LSE out, rows addressed by offsets; a
 * sliding window runs one call per token) and equals REFERENCE on host
 * memory holding the same cache. */
static void test_opaque_dcp(attn_device *d, const attn_kv_view *kv)
{
    attn_layer_params lp = {.num_heads = 4,
                            .num_kv_heads = 2,
                            .head_size = 64,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_FP32,
                            .sliding_window = 0};
    int32_t qsl[3] = {0, 1, 3}, seq[2] = {20, 14}, bt[2][2] = {{4, 5}, {2, 0}};
    int32_t pos[3] = {19, 12, 13};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = 2,
                               .num_actual_tokens = 3,
                               .max_query_len = 2,
                               .max_seq_len = 20,
                               .block_table = &bt[0][0],
                               .block_table_stride = 2,
                               .causal = true,
                               .block_size = 16,
                               .positions = pos};
    static float q[3 * 4 * 64], out[3 * 4 * 64], ref[3 * 4 * 64];
    for (int i = 0; i < 3 * 4 * 64; i++)
        q[i] = sinf((float)i * 0.05f);
    int64_t elems = 0;
    CHECK_OK(attn_kv_view_extent(kv, &elems));
    float *host = malloc((size_t)elems * sizeof(float));
    CHECK_OK(attn_device_copy_out(d, host, kv->data, 0, (size_t)elems * sizeof(float)));
    attn_kv_view hv = *kv;
    hv.data = host;
    hv.device = NULL;
    attn_comm *self = NULL;
    CHECK_OK(attn_comm_self(&self));
    for (int window = 0; window <= 6; window += 6) {
        lp.sliding_window = window;
        attn_dcp_init di = {.struct_size = sizeof di,
                            .backend = &unit,
                            .layer = &lp,
                            .comm = self,
                            .block_size = 16,
                            .num_blocks = kv->num_blocks,
                            .max_num_tokens = 4,
                            .max_blocks_per_req = 2,
                            .device = d,
                            .num_layers = 2};
        attn_dcp *dcp = NULL;
        CHECK_OK(attn_dcp_create(&di, &dcp));
        if (!dcp) break;
        long in = g_stats.copies_in, kernels = g_stats.kernels;
        attn_dcp_args a = {.cm = &cm, .kv = kv, .layer = 1, .q = q, .out = out};
        CHECK_OK(attn_dcp_forward(dcp, &a));
        CHECK(g_stats.copies_in == in + 1);                   /* the local batch, once */
        CHECK(g_stats.kernels - kernels == (window ? 3 : 1)); /* one call per token with a window */
        a.layer = 2;
        CHECK_STATUS(attn_dcp_forward(dcp, &a), ATTN_OUT_OF_RANGE);
        attn_forward_args h = {.layer = &lp, .common = &cm, .q = q, .kv = &hv, .out = ref};
        CHECK_OK(attn__reference_forward(&h));
        double e = 0;
        for (int i = 0; i < 3 * 4 * 64; i++)
            e = fmax(e, fabs((double)out[i] - (double)ref[i]));
        CHECK_MSG(e < 1e-5, "DCP on the device, window %d: max error %.3g", window, e);
        attn_dcp_free(dcp);
    }
    attn_comm_free(self);
    free(host);
}

/* An MLA backend on the device: the core's MLA known-answer test (decode
 * and prefill, fp8 included) runs through the device's copies and passes;
 * the whole-batch entry, whose projections are host code, is refused. */
static void test_opaque_mla(attn_device *d)
{
    const attn_layer_params lp = {.num_heads = 4,
                                  .num_kv_heads = 1,
                                  .head_size = 96,
                                  .dtype = ATTN_DTYPE_BF16,
                                  .kv_lora_rank = 64,
                                  .qk_rope_head_dim = 32,
                                  .qk_nope_head_dim = 32,
                                  .v_head_dim = 48};
    long kernels = g_stats.kernels, outs = g_stats.copies_out;
    attn_kernel *k = NULL;
    CHECK_OK(attn_kernel_open(&unit_mla, &lp, d, &k));
    CHECK(g_stats.kernels - kernels >= 4 && g_stats.copies_out - outs >= 4);
    CHECK(attn_kernel_is_mla(k));
    attn_mla_args a = {0};
    CHECK_STATUS(attn_kernel_mla_forward(k, &a, NULL, 0), ATTN_UNSUPPORTED);
    CHECK_CONTAINS(attn_last_error(), "projections around forward_mqa are host code");
    attn_kernel_close(k);
    /* the test runs forward_mha on the device too: a lazy prefill fails it */
    CHECK_STATUS(attn_kernel_open(&unit_mla_lazy, &lp, d, &k), ATTN_SELFTEST_FAILED);
    CHECK_CONTAINS(attn_last_error(), "on  forward_mha");
}

int main(void)
{
    unit_desc = *attn__backend_reference.desc;
    unit_desc.name = "DEVUNIT_ATTN";
    unit_mla_desc = *attn__backend_reference_mla.desc;
    unit_mla_desc.name = "DEVUNIT_MLA";
    test_host();
    attn_device *d = NULL;
    CHECK_OK(attn_device_open(&unit, NULL, &d));
    if (!d) return attn_test_finish("test_device_api");
    test_opaque_memory(d);
    attn_kv_cache *c = NULL;
    attn_kv_view kv;
    test_opaque_cache(d, &c, &kv);
    test_opaque_kernel(d, &kv);
    test_opaque_dcp(d, &kv);
    test_opaque_mla(d);
    attn_kv_cache_free(c);
    int n;
    attn_device_usage(d, &n, NULL);
    CHECK(n == 0); /* everything given back */
    long frees = g_stats.frees, allocs = g_stats.allocs;
    attn_device_close(d);
    CHECK(g_stats.frees == frees && g_stats.allocs == allocs);
    return attn_test_finish("test_device_api");
}
