/* Each capability is stated once: a descriptor's static field is the
 * machine-independent statement (what `attn backends` and docs/backends.md
 * print), and a dynamic hook may only refine it on a given machine. For every
 * catalog descriptor, every simulated catalog machine, and configs with and
 * without batch invariance and sinks, a hook never accepts a value that its
 * static field rejects: the shape hooks, and the hook of every yes/no
 * capability (sink, per-head scales, multimodal prefix, non-causal,
 * adaptive verification). A hook without a static statement (a zero field is
 * vLLM's base-class default) is held to that default. A test descriptor
 * whose hook widens its field fails here (see test_hook_contradiction). */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "select/selection.h"
#include "test.h"

#define MAX_HEAD  1024
#define MAX_BLOCK 1024

static int hooks_seen;

/* The one known widening, kept as vLLM 0.32.0 has it: FlashInferBackend's
 * supported_kv_cache_dtypes list (which feeds the "Supported kv_cache_dtype
 * values" hint) omits nvfp4_ds_mla, while its supports_kv_cache_dtype takes
 * every nvfp4* cache on SM 10.x with TRT-LLM. The catalog note says so. */
static bool known_kv_widening(const attn_backend_desc *d, attn_kv_dtype kv)
{
    return !strcmp(d->name, "FLASHINFER") && kv == ATTN_KV_NVFP4_DS_MLA;
}

static attn_backend_desc without_hooks(const attn_backend_desc *d)
{
    attn_backend_desc s = *d;
    s.supports_head_size = NULL;
    s.supports_dtype = NULL;
    s.supports_kv_cache_dtype = NULL;
    s.supports_block_size = NULL;
    s.supports_sink_fn = NULL;
    s.supports_per_head_quant_scales_fn = NULL;
    s.supports_compute_capability = NULL;
    s.supports_mm_prefix_fn = NULL;
    s.supports_non_causal_fn = NULL;
    s.supports_query_lens_mismatch_fn = NULL;
    s.supports_pcp_fn = NULL;
    s.supports_dcp_fn = NULL;
    return s;
}

/* Counts a contradiction; reported as a failure unless quiet (the
 * negative control below expects some). */
static bool quiet;
#define EXPECT_REFINES(cond, ...)                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            bad++;                                                                                 \
            if (!quiet) CHECK_MSG(cond, __VA_ARGS__);                                              \
        }                                                                                          \
    } while (0)

static int check_desc(const attn_backend_desc *d, const attn_platform *p,
                      const attn_selector_config *cfg)
{
    attn_backend_desc s = without_hooks(d);
    attn_check_ctx c;
    attn__check_ctx_init(&c, p, cfg);
    const char *pn = attn_platform_name(p);
    int bad = 0;
    if (d->supports_head_size) {
        hooks_seen++;
        for (int hs = 1; hs <= MAX_HEAD; hs++)
            if (d->supports_head_size(&c, hs))
                EXPECT_REFINES(attn__desc_head_ok(&s, &c, hs),
                               "%s on %s: head-size hook accepts %d, the field rejects it", d->name,
                               pn, hs);
    }
    if (d->supports_dtype) {
        hooks_seen++;
        for (int dt = 0; dt < ATTN_DTYPE_COUNT; dt++)
            if (d->supports_dtype(&c, (attn_dtype)dt))
                EXPECT_REFINES(attn__desc_dtype_ok(&s, &c, (attn_dtype)dt),
                               "%s on %s: dtype hook accepts %s, the field rejects it", d->name, pn,
                               attn_dtype_name((attn_dtype)dt));
    }
    if (d->supports_kv_cache_dtype) {
        hooks_seen++;
        for (int kv = 0; kv < ATTN_KV_COUNT; kv++) {
            if (kv == ATTN_KV_NONE) continue; /* kv_none_rejected, never a hook */
            if (d->supports_kv_cache_dtype(&c, (attn_kv_dtype)kv) &&
                !known_kv_widening(d, (attn_kv_dtype)kv))
                EXPECT_REFINES(attn__desc_kv_ok(&s, &c, (attn_kv_dtype)kv),
                               "%s on %s: KV hook accepts %s, the field rejects it", d->name, pn,
                               attn_kv_dtype_name((attn_kv_dtype)kv));
        }
    }
    if (d->supports_block_size) {
        hooks_seen++;
        for (int bs = 1; bs <= MAX_BLOCK; bs++)
            if (d->supports_block_size(&c, bs))
                EXPECT_REFINES(attn__desc_block_ok(&s, &c, bs),
                               "%s on %s: block-size hook accepts %d, the field rejects it",
                               d->name, pn, bs);
    }
    /* Every yes/no capability: a hook that says yes needs a static yes. */
    for (int f = 0; f < ATTN__FLAG_COUNT; f++) {
        attn__flag_hook hook = attn__desc_flag_hook(d, (attn__flag)f);
        if (!hook) continue;
        hooks_seen++;
        EXPECT_REFINES(!hook(&c) || attn__desc_flag_static(d, (attn__flag)f),
                       "%s on %s: flag %d hook accepts, its static field says no", d->name, pn, f);
    }
    /* cc_min/cc_max speak of devices with a compute capability; on one
     * without (CPU, XPU) only the hook can say yes or no. */
    if (d->supports_compute_capability && c.has_cc) {
        hooks_seen++;
        EXPECT_REFINES(!d->supports_compute_capability(&c) || attn__desc_cc_ok(&s, &c),
                       "%s on %s: capability hook accepts, cc_min/cc_max reject", d->name, pn);
    }
    return bad;
}

static void check_config(const attn_platform *p, const attn_selector_config *cfg)
{
    for (int i = 0; i < attn__catalog_count(); i++) {
        const attn__catalog_entry *e = attn__catalog_at(i);
        const attn_backend *b = e->builtin ? e->builtin() : NULL;
        if (b && b->desc) (void)check_desc(b->desc, p, cfg);
    }
}

static bool widen_head(const attn_check_ctx *c, int hs)
{
    (void)c;
    return hs % 8 == 0 && hs <= 256;
}

static bool sink_yes(const attn_check_ctx *c) /* any yes/no hook that always accepts */
{
    (void)c;
    return true;
}

/* The walk can fail: a hook that widens its field is caught. */
static void test_hook_contradiction(const attn_platform *p)
{
    attn_backend_desc d;
    memset(&d, 0, sizeof d);
    d.abi_version = ATTN_BACKEND_ABI_VERSION;
    d.struct_size = sizeof d;
    d.name = "HAND";
    d.heads.multiple_of = 8;
    d.heads.max = 128;
    d.supports_head_size = widen_head;
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    quiet = true;
    CHECK(check_desc(&d, p, &cfg) == 16); /* 136..256 step 8 */
    d.supports_head_size = NULL;
    d.supports_sink_fn = sink_yes;
    CHECK(check_desc(&d, p, &cfg) == 1);
    d.supports_sink = true;
    CHECK(check_desc(&d, p, &cfg) == 0);
    /* the appended flags: a multimodal-prefix hook over a static no, and
     * adaptive verification accepted by a hook where the field refuses it */
    d.supports_mm_prefix_fn = sink_yes;
    CHECK(check_desc(&d, p, &cfg) == 1);
    d.supports_mm_prefix = true;
    d.supports_query_lens_mismatch_fn = sink_yes;
    d.rejects_query_lens_mismatch = true;
    CHECK(check_desc(&d, p, &cfg) == 1);
    d.rejects_query_lens_mismatch = false;
    CHECK(check_desc(&d, p, &cfg) == 0);
    quiet = false;
}

int main(void)
{
    int machines = 0;
    for (int m = 0; m < attn_catalog_count(); m++) {
        attn_platform *p = NULL;
        if (attn_platform_open(attn_catalog_name(m), &p) != ATTN_OK) continue;
        machines++;
        if (m == 0) test_hook_contradiction(p);
        for (int v = 0; v < 4; v++) {
            attn_selector_config cfg;
            attn_selector_config_init(&cfg);
            cfg.head_size = 128;
            cfg.use_batch_invariant = v & 1;
            cfg.has_sink = (v >> 1) & 1;
            check_config(p, &cfg);
        }
        attn_platform_free(p);
    }
    CHECK_MSG(machines == attn_catalog_count(), "opened %d of %d catalog machines", machines,
              attn_catalog_count());
    /* The walk reached hooks at all (FLASH_ATTN alone has five). */
    CHECK_MSG(hooks_seen > 5 * machines, "only %d hook evaluations", hooks_seen);
    return attn_test_finish("registry_hooks");
}
