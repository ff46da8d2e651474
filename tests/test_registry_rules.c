/* Platform rules a backend registers (attn/registry.h): the OpenCL platform
 * selects by them, vLLM's platforms never do. Registration is checked and
 * changes nothing when refused; the list is by priority, then registration
 * order, one for standard and one for MLA layers; each candidate is
 * validated like any other; the selection cache sees a new rule; the
 * plugin rollback drops rules with the names; with nothing registered the
 * failure says so. The built-in OPENCL_ATTN states its standard-layer rule
 * (priority 0) in its catalog entry, so the test's rules take priorities
 * below it and MLA layers have none. Runs on a simulated OpenCL machine
 * (JSON spec) and, when this machine has an OpenCL device, on the real one
 * too. */
#include <string.h>

#include "registry/registry_impl.h"
#include "test.h"

static attn_backend_desc d_fp32, d_any, d_tie, d_mla;
static attn_backend b_fp32, b_any, b_tie, b_mla;

/* A copy of a CPU backend under another name: REFERENCE's kernel, so the
 * core self-test passes and it can be chosen. */
static void make(const char *name, const char *of, attn_backend_desc *d, attn_backend *b)
{
    const attn_backend *ref = attn_backend_catalog_builtin(of);
    CHECK(ref != NULL);
    *d = *ref->desc;
    d->name = name;
    *b = *ref;
    b->desc = d;
    CHECK_OK(attn_register_backend_object(name, b));
}

static attn_platform_rule rule(attn_platform_kind kind, const char *backend, int prio, bool mla)
{
    attn_platform_rule r = {
        .struct_size = sizeof r, .kind = kind, .backend = backend, .priority = prio, .mla = mla};
    return r;
}

static void test_refused(void)
{
    int before = attn_platform_rule_count();
    attn_platform_rule r = rule(ATTN_PLATFORM_CUDA, "REFERENCE", 0, false);
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "platform cuda selects by its own rules");
    attn_platform_kind own[] = {ATTN_PLATFORM_CPU, ATTN_PLATFORM_ROCM, ATTN_PLATFORM_XPU,
                                ATTN_PLATFORM_UNSPECIFIED};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        r.kind = own[i];
        CHECK_STATUS(attn_register_platform_rule(&r), ATTN_INVALID_ARGUMENT);
        CHECK(!attn_platform_kind_uses_registered_rules(own[i]));
    }
    CHECK(attn_platform_kind_uses_registered_rules(ATTN_PLATFORM_OPENCL));
    r = rule(ATTN_PLATFORM_OPENCL, "NOT_A_BACKEND", 0, false);
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_UNKNOWN_BACKEND);
    CHECK_CONTAINS(attn_last_error(), "'NOT_A_BACKEND' is not registered");
    r.backend = "bad name!";
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_UNKNOWN_BACKEND);
    r.backend = NULL;
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_register_platform_rule(NULL), ATTN_NULL_ARGUMENT);
    r = rule(ATTN_PLATFORM_OPENCL, "REFERENCE", 0, false);
    r.struct_size = sizeof r + 8; /* built against a newer libattn */
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_ABI_MISMATCH);
    r.struct_size = 4;
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_ABI_MISMATCH);
    CHECK(attn_platform_rule_count() == before);
    attn_platform_rule out;
    CHECK_STATUS(attn_platform_rule_at(before, &out), ATTN_OUT_OF_RANGE);
}

static attn_status select_on(const attn_platform *p, const char *req, bool mla, attn_dtype dt,
                             attn_selection **s)
{
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = mla ? 576 : 128;
    cfg.use_mla = mla;
    cfg.dtype = dt;
    return attn_select_uncached(p, req, &cfg, s);
}

static void check_lists(const attn_platform *p)
{
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    const char *names[8];
    CHECK(attn_platform_priorities(p, &cfg, names, 8) == 4);
    CHECK_STR(names[0], "TEST_CL_FP32");
    CHECK_STR(names[1], "TEST_CL_ANY");
    CHECK_STR(names[2], "TEST_CL_TIE"); /* same priority, registered later */
    CHECK_STR(names[3], "OPENCL_ATTN"); /* the built-in rule, priority 0 */
    cfg.use_mla = true;
    CHECK(attn_platform_priorities(p, &cfg, names, 8) == 1);
    CHECK_STR(names[0], "TEST_CL_MLA");

    attn_selection *s = NULL;
    CHECK_OK(select_on(p, NULL, false, ATTN_DTYPE_BF16, &s));
    CHECK_STR(attn_selection_backend(s), "TEST_CL_ANY");
    CHECK(attn_selection_num_candidates(s) == 4);
    attn_candidate_info c;
    CHECK_OK(attn_selection_candidate(s, 0, &c));
    CHECK(!c.valid && c.priority == 0 && c.num_reasons == 1);
    CHECK_STR(attn_selection_reason(s, 0, 0), "dtype not supported");
    attn_selection_free(s);
    CHECK_OK(select_on(p, NULL, false, ATTN_DTYPE_FP32, &s));
    CHECK_STR(attn_selection_backend(s), "TEST_CL_FP32");
    attn_selection_free(s);
    CHECK_OK(select_on(p, "test_cl_tie", false, ATTN_DTYPE_BF16, &s));
    CHECK_STR(attn_selection_backend(s), "TEST_CL_TIE");
    attn_selection_free(s);
    CHECK_OK(select_on(p, NULL, true, ATTN_DTYPE_BF16, &s));
    CHECK_STR(attn_selection_backend(s), "TEST_CL_MLA");
    attn_selection_free(s);
    /* an explicit request is validated, never a fallback */
    CHECK_STATUS(select_on(p, "TEST_CL_FP32", false, ATTN_DTYPE_BF16, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s), "Selected backend AttentionBackendEnum.TEST_CL_FP32 is "
                                         "not valid for this configuration. Reason: ['dtype not "
                                         "supported']");
    attn_selection_free(s);
    /* nothing valid: vLLM's form with every candidate's reasons */
    cfg.use_mla = false;
    cfg.kv_cache_dtype = ATTN_KV_NVFP4;
    CHECK_STATUS(attn_select_uncached(p, NULL, &cfg, &s), ATTN_NO_VALID_BACKEND);
    /* (OPENCL_ATTN also says "needs an OpenCL device" on a machine without one) */
    CHECK_CONTAINS(attn_selection_message(s),
                   "Reasons: {TEST_CL_FP32: [dtype not supported, kv_cache_dtype not supported], "
                   "TEST_CL_ANY: [kv_cache_dtype not supported], TEST_CL_TIE: [kv_cache_dtype not "
                   "supported], OPENCL_ATTN: [kv_cache_dtype not supported");
    attn_selection_free(s);
}

int main(void)
{
    setenv("ATTN_PLUGIN_PATH", "", 1);
    test_refused();
    attn_platform *cl = NULL;
    CHECK_OK(attn_platform_from_json("{\"name\": \"cl-sim\", \"platform\": \"opencl\"}", &cl));
    if (!cl) return attn_test_finish("registry_rules");
    CHECK(attn_platform_get_kind(cl) == ATTN_PLATFORM_OPENCL);
    attn_platform *h100 = NULL;
    CHECK_OK(attn_platform_open("h100", &h100));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    const char *cuda_before[16], *cuda_after[16];
    int ncuda = attn_platform_priorities(h100, &cfg, cuda_before, 16);

    /* the built-in rule: OPENCL_ATTN for standard layers */
    attn_platform_rule got;
    CHECK_OK(attn_platform_rule_at(0, &got));
    CHECK_STR(got.backend, "OPENCL_ATTN");
    CHECK(got.kind == ATTN_PLATFORM_OPENCL && got.priority == 0 && !got.mla);
    /* nothing registered for MLA layers: the failure says so (and is cached) */
    attn_selector_config mla_cfg;
    attn_selector_config_init(&mla_cfg);
    mla_cfg.head_size = 576;
    mla_cfg.use_mla = true;
    const attn_selection *cached = NULL;
    CHECK_STATUS(attn_select(cl, NULL, &mla_cfg, &cached), ATTN_NO_VALID_BACKEND);
    CHECK(attn_selection_error(cached) == ATTN_SELECT_NO_VALID);
    CHECK_CONTAINS(attn_selection_message(cached),
                   "No valid attention backend found for opencl with AttentionSelectorConfig("
                   "head_size=576");
    CHECK_CONTAINS(attn_selection_message(cached),
                   "Reasons: {}. No backend registered a rule for opencl MLA layers");

    attn__registry_snapshot *snap = attn__registry_snapshot_take();
    int rules0 = attn_platform_rule_count();
    make("TEST_CL_FP32", "REFERENCE", &d_fp32, &b_fp32);
    d_fp32.dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP32);
    make("TEST_CL_ANY", "REFERENCE", &d_any, &b_any);
    make("TEST_CL_TIE", "REFERENCE", &d_tie, &b_tie);
    make("TEST_CL_MLA", "REFERENCE_MLA", &d_mla, &b_mla);
    attn_platform_rule r = rule(ATTN_PLATFORM_OPENCL, "TEST_CL_ANY", -5, false);
    CHECK_OK(attn_register_platform_rule(&r));
    CHECK_STATUS(attn_register_platform_rule(&r), ATTN_ALREADY_EXISTS);
    r = rule(ATTN_PLATFORM_OPENCL, "test_cl_fp32", -10, false); /* any case */
    CHECK_OK(attn_register_platform_rule(&r));
    r = rule(ATTN_PLATFORM_OPENCL, "TEST_CL_TIE", -5, false);
    CHECK_OK(attn_register_platform_rule(&r));
    r = rule(ATTN_PLATFORM_OPENCL, "TEST_CL_MLA", 0, true);
    CHECK_OK(attn_register_platform_rule(&r));
    CHECK(attn_platform_rule_count() == rules0 + 4);
    CHECK_OK(attn_platform_rule_at(rules0 + 1, &got));
    CHECK_STR(got.backend, "TEST_CL_FP32");
    CHECK(got.priority == -10 && !got.mla && got.kind == ATTN_PLATFORM_OPENCL);

    /* the cache answers from the new rules */
    CHECK_OK(attn_select(cl, NULL, &mla_cfg, &cached));
    CHECK_STR(attn_selection_backend(cached), "TEST_CL_MLA");
    CHECK_OK(attn_select(cl, NULL, &cfg, &cached));
    CHECK_STR(attn_selection_backend(cached), "TEST_CL_ANY");
    check_lists(cl);
    attn_platform *real = NULL;
    if (attn_platform_open("opencl", &real) == ATTN_OK) {
        check_lists(real);
        attn_platform_free(real);
    } else {
        printf("SKIP the real OpenCL platform: %s\n", attn_last_error());
    }
    /* vLLM's platforms are untouched */
    CHECK(attn_platform_priorities(h100, &cfg, cuda_after, 16) == ncuda);
    for (int i = 0; i < ncuda; i++)
        CHECK_STR(cuda_after[i], cuda_before[i]);
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(h100, NULL, &cfg, &s));
    CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
    attn_selection_free(s);

    /* the plugin loader's rollback takes the rules with the names */
    attn__registry_snapshot_restore(snap);
    CHECK(attn_platform_rule_count() == rules0);
    CHECK(!attn_registry_contains("TEST_CL_ANY"));
    CHECK_STATUS(attn_select(cl, NULL, &mla_cfg, &cached), ATTN_NO_VALID_BACKEND);
    const char *names[4];
    CHECK(attn_platform_priorities(cl, &cfg, names, 4) == 1);
    CHECK_STR(names[0], "OPENCL_ATTN");
    attn_platform_free(h100);
    attn_platform_free(cl);
    return attn_test_finish("registry_rules");
}
