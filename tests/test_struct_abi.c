/* The struct_size rule (attn/abi.h): an older, shorter struct is accepted
 * and the fields it lacks take their defaults; a struct_size below the
 * first release or above this libattn's sizeof is ATTN_ABI_MISMATCH with
 * the sizes named, and nothing changes. attn_backend and attn_kernel_ops
 * were released again with contract v2 (ATTN_BACKEND_ABI_VERSION 2: their
 * floor is the v2 size, and abi_version 1 is refused by name); the
 * defaulting copy is shown on a struct pair that has a field appended.
 * attn_backend_desc has fields appended (the facts the selector once kept
 * by name), and a descriptor of the first release's size (in memory no
 * longer than that, so a read past it would be caught by ASan) validates
 * with the defaults attn/backend.h states. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/comm.h"
#include "test.h"
#include "util/abi.h"

typedef struct {
    uint32_t struct_size;
    int a;
} rel1_t; /* as first released */
typedef struct {
    uint32_t struct_size;
    int a;
    int appended; /* default 42 */
} rel2_t;

static void test_mechanism(void)
{
    rel1_t old = {sizeof old, 7};
    rel2_t cur = {0, 0, 42};
    size_t v1 = ATTN_STRUCT_END(rel2_t, a);
    CHECK(v1 == sizeof(rel1_t));
    CHECK(attn__struct_size_ok(old.struct_size, v1, sizeof cur));
    CHECK(!attn__struct_size_ok((uint32_t)v1 - 1, v1, sizeof cur));
    CHECK(!attn__struct_size_ok(sizeof cur + 1, v1, sizeof cur));
    attn__struct_read(&cur, sizeof cur, &old, old.struct_size, offsetof(rel2_t, struct_size));
    CHECK(cur.a == 7);
    CHECK(cur.appended == 42); /* defaulted */
    CHECK(cur.struct_size == sizeof cur);
    rel2_t shorter = {sizeof(rel1_t), 1, 0};
    CHECK(!ATTN_STRUCT_HAS(rel2_t, &shorter, appended));
    CHECK(ATTN_STRUCT_HAS(rel2_t, &shorter, a));
    CHECK(ATTN_STRUCT_HAS(rel2_t, &cur, appended));
}

static void test_engine_config(void)
{
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    attn_engine *e = (attn_engine *)1;
    cfg.struct_size = (uint32_t)ATTN__V1_ENGINE_CONFIG - 1; /* older than the first release */
    CHECK_STATUS(attn_engine_create(&cfg, &e), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "struct_size is");
    CHECK(e == NULL);
    cfg.struct_size = (uint32_t)sizeof cfg + 8; /* built against a newer libattn */
    CHECK_STATUS(attn_engine_create(&cfg, &e), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "expected");
    /* the first release's size is accepted: the next check (no model) runs */
    cfg.struct_size = (uint32_t)ATTN__V1_ENGINE_CONFIG;
    CHECK_STATUS(attn_engine_create(&cfg, &e), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "no model");
}

static void test_backend_object(void)
{
    attn_platform *p = NULL;
    const attn_backend *ref = NULL;
    CHECK_OK(attn_platform_open("cpu", &p));
    CHECK_OK(attn_backend_resolve(p, "REFERENCE", &ref));
    if (!ref) {
        attn_platform_free(p);
        return;
    }
    int before = attn_registry_count();
    attn_backend b = *ref;
    b.struct_size = (uint32_t)sizeof b + 8;
    CHECK_STATUS(attn_register_backend_object("ABI_NEWER", &b), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "libattn accepts");
    b.struct_size = (uint32_t)ATTN__V2_BACKEND - 1; /* a v1 object ends before device */
    CHECK_STATUS(attn_register_backend_object("ABI_OLDER", &b), ATTN_ABI_MISMATCH);
    attn_kernel_ops k = *ref->kernel;
    k.struct_size = (uint32_t)ATTN__V2_KERNEL_OPS - 1;
    b = *ref;
    b.kernel = &k;
    CHECK_STATUS(attn_register_backend_object("ABI_KOPS", &b), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "kernel ops struct_size");
    /* contract v1 (abi_version 1) is refused and named */
    b = *ref;
    b.abi_version = 1;
    CHECK_STATUS(attn_register_backend_object("ABI_V1", &b), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "abi_version 1, libattn expects 2 (backend contract v2");
    /* device ops are versioned like the others */
    attn_device_ops dops = {.struct_size = (uint32_t)ATTN__V2_DEVICE_OPS - 1};
    b = *ref;
    b.device = &dops;
    CHECK_STATUS(attn_register_backend_object("ABI_DEV", &b), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "device ops struct_size");
    CHECK(attn_registry_count() == before); /* nothing registered */
    CHECK(!attn_registry_contains("ABI_NEWER") && !attn_registry_contains("ABI_KOPS") &&
          !attn_registry_contains("ABI_V1") && !attn_registry_contains("ABI_DEV"));
    attn_platform_free(p);
}

/* A first-release descriptor: sliding window, R-SWA and non-causal DCP
 * accepted, KV connectors and adaptive verification fine; the same fields
 * stated in a current descriptor are read. */
static void test_desc_appended(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cuda:9.0", &p));
    attn_backend_desc cur;
    memset(&cur, 0, sizeof cur);
    cur.abi_version = ATTN_BACKEND_ABI_VERSION;
    cur.struct_size = sizeof cur;
    cur.name = "OLD_DESC";
    cur.is_mla = true;
    cur.rejects_kv_connector = true;
    cur.rejects_query_lens_mismatch = true;
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.use_mla = cfg.use_non_causal = cfg.use_dcp = true;
    cfg.has_sliding_window = cfg.use_rswa = cfg.use_kv_connector = true;
    cfg.use_adaptive_verification = true;
    char r[ATTN_REASONS_MAX][ATTN_REASON_MAX];
    int n = attn_backend_validate(&cur, p, &cfg, r, ATTN_REASONS_MAX);
    const char *want[] = {"sliding window not supported",
                          "R-SWA not supported",
                          "non-causal attention not supported",
                          "non-causal MLA attention with DCP not supported",
                          "KV connector not supported",
                          "DCP not supported",
                          "device-cpu query lens mismatch not supported, this is needed for "
                          "adaptive verification"};
    CHECK(n == 7);
    for (int i = 0; i < n && i < 7; i++)
        CHECK_STR(r[i], want[i]);
    size_t v1 = ATTN__V1_BACKEND_DESC;
    CHECK(v1 < sizeof cur);
    unsigned char *mem = malloc(v1);
    CHECK(mem != NULL);
    if (mem) {
        uint32_t size = (uint32_t)v1;
        memcpy(mem, &cur, v1);
        memcpy(mem + offsetof(attn_backend_desc, struct_size), &size, sizeof size);
        const attn_backend_desc *old = (const attn_backend_desc *)(void *)mem;
        n = attn_backend_validate(old, p, &cfg, r, ATTN_REASONS_MAX);
        CHECK(n == 2);
        CHECK_STR(r[0], "non-causal attention not supported");
        CHECK_STR(r[1], "DCP not supported");
        /* and it registers: the loader's size check takes the first release */
        /* the registry keeps the object for the process: static, so it (and
         * mem) stay reachable */
        static attn_backend b;
        b = (attn_backend){
            .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof b, .desc = old};
        CHECK_OK(attn_register_backend_object("OLD_DESC", &b));
        const attn_backend *got = NULL;
        CHECK_OK(attn_backend_resolve(p, "OLD_DESC", &got));
        CHECK(got && got->desc == old);
    }
    attn_platform_free(p);
}

static int destroyed;
static void count_destroy(void *ctx)
{
    destroyed++;
}
static attn_status no_allgather(void *ctx, const void *send, size_t bytes, void *recv,
                                double timeout_s)
{
    return ATTN_OK;
}

static void test_comm_ops(void)
{
    attn_comm_ops ops = {.struct_size = sizeof ops,
                         .name = "t",
                         .allgather = no_allgather,
                         .destroy = count_destroy};
    attn_comm *c = NULL;
    ops.struct_size = (uint32_t)sizeof ops + 8;
    CHECK_STATUS(attn_comm_create(&ops, NULL, 0, 1, &c), ATTN_INVALID_ARGUMENT);
    CHECK(c == NULL);
    CHECK(destroyed == 1); /* ownership of ctx: destroyed on failure */
    /* an older struct that ends before destroy: its ctx is not destroyed
     * through a slot it does not have */
    ops.struct_size = (uint32_t)offsetof(attn_comm_ops, destroy);
    CHECK_STATUS(attn_comm_create(&ops, NULL, 0, 1, &c), ATTN_INVALID_ARGUMENT);
    CHECK(destroyed == 1);
    ops.struct_size = sizeof ops;
    CHECK_OK(attn_comm_create(&ops, NULL, 0, 1, &c));
    attn_comm_free(c);
    CHECK(destroyed == 2);
}

int main(void)
{
    test_mechanism();
    test_engine_config();
    test_backend_object();
    test_desc_appended();
    test_comm_ops();
    return attn_test_finish("test_struct_abi");
}
