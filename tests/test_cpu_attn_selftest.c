/* Self-test gates eligibility: every usable CPU_ATTN variant passes its
 * known-answer test; a deliberately broken variant (compiled only into this
 * test: the portable kernel with a wrong softmax scale) fails it, and when
 * registered under a new name and requested explicitly the selector refuses
 * it with "self-test failed: max error <e> on <shape>". ATTN_SELFTEST=0
 * skips the test and says so. */
#include <stdio.h>

#include "backends/cpu/cpu_attn.h"
#include "selftest/selftest.h"
#include "test.h"

/* CPU_ATTN's known answer through fwd: the core's self-test service
 * (against REFERENCE, ATTN_SELFTEST_FAILED with "max error <e> on <shape>"),
 * CPU_ATTN's descriptor filtering the shapes. The kernels do not call the
 * service (it sits above them), so the test asks it directly. */
static attn_status self_test_with(attn__selftest_forward_fn fwd, void *impl, char *detail,
                                  size_t size)
{
    return attn__selftest_standard(&attn__desc_cpu_attn, fwd, impl, detail, size);
}

static void broken_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                         int key0, bool masked)
{
    float keep = j->qk_scale;
    j->qk_scale *= 1.25f; /* the bug */
    attn__cpu_isa_portable.chunk(j, k, v, stride, n, key0, masked);
    j->qk_scale = keep;
}

static bool always(void)
{
    return true;
}

static attn__cpu_isa broken_isa;

static attn_status broken_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__cpu_attn_forward_isa(&broken_isa, a);
}

static attn_status broken_self_test(char *detail, size_t size)
{
    return self_test_with(broken_forward, NULL, detail, size);
}

static const attn__cpu_isa *g_isa;

static attn_status isa_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__cpu_attn_forward_isa(g_isa, a);
}

int main(void)
{
    char detail[256];
    /* the real kernel, and each usable variant */
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_attn, detail, sizeof detail));
    for (int i = 0; i < attn__cpu_attn_variant_count(); i++) {
        g_isa = attn__cpu_attn_variant(i);
        if (!g_isa->usable()) {
            printf("SKIP variant %s: not usable on this CPU\n", g_isa->name);
            continue;
        }
        attn_status st = self_test_with(isa_forward, NULL, detail, sizeof detail);
        CHECK_MSG(st == ATTN_OK, "variant %s: %s", g_isa->name, detail);
        printf("variant %s: self-test passed\n", g_isa->name);
    }

    /* the broken variant fails with the documented detail */
    broken_isa = attn__cpu_isa_portable;
    broken_isa.name = "broken";
    broken_isa.usable = always;
    broken_isa.chunk = broken_chunk;
    CHECK_STATUS(broken_self_test(detail, sizeof detail), ATTN_SELFTEST_FAILED);
    CHECK_CONTAINS(detail, "max error ");
    CHECK_CONTAINS(detail, " on ");
    printf("broken variant: %s\n", detail);

    static attn_kernel_ops kops;
    kops = *attn__backend_cpu_attn.kernel;
    kops.forward = broken_forward;
    kops.self_test = broken_self_test;
    static attn_backend_desc desc;
    desc = attn__desc_cpu_attn;
    desc.name = "CPU_ATTN_BROKEN";
    static attn_backend bk;
    bk.abi_version = ATTN_BACKEND_ABI_VERSION;
    bk.struct_size = sizeof bk;
    bk.desc = &desc;
    bk.kernel = &kops;
    CHECK_OK(attn_register_backend_object("CPU_ATTN_BROKEN", &bk));

    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cpu", &p));
    if (!p) return attn_test_finish("test_cpu_attn_selftest");
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.dtype = ATTN_DTYPE_BF16;
    cfg.kv_cache_dtype = ATTN_KV_AUTO;
    cfg.block_size = 16;

    attn_selection *sel = NULL;
    attn_status st = attn_select_uncached(p, "CPU_ATTN_BROKEN", &cfg, &sel);
    CHECK(st != ATTN_OK);
    CHECK(sel != NULL);
    if (sel) {
        CHECK(attn_selection_backend(sel) == NULL);
        CHECK(attn_selection_num_candidates(sel) == 1);
        const char *reason = attn_selection_reason(sel, 0, 0);
        CHECK_CONTAINS(reason, "self-test failed: max error ");
        CHECK_CONTAINS(attn_selection_message(sel), "CPU_ATTN_BROKEN");
        CHECK_CONTAINS(attn_selection_message(sel), "self-test failed: max error");
        printf("refused: %s\n", attn_selection_message(sel));
        attn_selection_free(sel);
    }
    /* the real CPU_ATTN is chosen for the same configuration */
    sel = NULL;
    CHECK_OK(attn_select_uncached(p, "CPU_ATTN", &cfg, &sel));
    if (sel) {
        CHECK_STR(attn_selection_backend(sel), "CPU_ATTN");
        attn_selection_free(sel);
    }
    /* ATTN_SELFTEST=0: the broken one passes the gate, and the result says why */
    setenv("ATTN_SELFTEST", "0", 1);
    sel = NULL;
    CHECK_OK(attn_select_uncached(p, "CPU_ATTN_BROKEN", &cfg, &sel));
    if (sel) {
        bool noted = false;
        for (int i = 0; i < attn_selection_num_notes(sel); i++)
            noted |= strstr(attn_selection_note(sel, i), "self-test skipped") != NULL;
        CHECK(noted);
        attn_selection_free(sel);
    }
    unsetenv("ATTN_SELFTEST");
    attn_platform_free(p);
    return attn_test_finish("test_cpu_attn_selftest");
}
