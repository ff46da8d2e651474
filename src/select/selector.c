/* The selector: decide once which backend runs a layer.
 *
 * Contract. An explicit request is a hard requirement: that backend is
 * resolved, validated and self-tested, and either chosen or the selection
 * fails with "Selected backend X is not valid for this configuration.
 * Reason: [...]" — never a fallback. Without a request, the platform's own
 * rules (rules_<family>.c) walk its priority list and the lowest valid index
 * wins, or the selection fails with "No valid attention backend found for
 * <family> with <config>. Reasons: {...}." Every candidate keeps its
 * priority and reasons even when selection succeeds. The config's
 * use_batch_invariant is OR-ed with the machine's batch_invariant setting
 * before anything is validated; the selection records that effective config.
 *
 * Plugins are loaded before the first selection. Results of attn_select
 * are cached per (platform object and its installed/settings state,
 * registry generation, requested name, effective config); a cached result
 * is immutable and lives until the process ends (a cache clear retires
 * entries without freeing them, so a pointer a caller still holds never
 * dangles). Lookups read an immutable, atomically published open-addressing
 * table without taking a lock; inserts take a mutex and publish with
 * release stores. Logging ("Using X backend." at info, the precluded
 * warning, the debug list of rejected backends) happens once per new cache
 * entry, and each distinct info line is printed once per process. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/log.h"
#include "attn/plugin.h"
#include "backends/catalog/catalog.h"
#include "registry/registry_impl.h"
#include "select/selection.h"
#include "util/error.h"
#include "util/strbuf.h"

/* ---- arena ---------------------------------------------------------------- */

struct attn__arena_block {
    attn__arena_block *next;
    size_t used, cap;
    char data[];
};

static void *attn__arena_alloc(attn_selection *s, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    attn__arena_block *b = s->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 3072 ? n : 3072;
        attn__arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) {
            s->oom = true;
            return NULL;
        }
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        s->arena = nb;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

const char *attn__sel_strdup(attn_selection *s, const char *text)
{
    size_t n = strlen(text);
    char *p = attn__arena_alloc(s, n + 1);
    if (!p) return "";
    memcpy(p, text, n + 1);
    return p;
}

static const char *attn__sel_vprintf(attn_selection *s, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return "";
    }
    if ((size_t)n < sizeof small) {
        va_end(ap2);
        return attn__sel_strdup(s, small);
    }
    char *p = attn__arena_alloc(s, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p ? p : "";
}

const char *attn__sel_printf(attn_selection *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *r = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    return r;
}

void attn__sel_warn(attn_selection *s, const char *fmt, ...)
{
    if (s->num_warnings >= ATTN__SEL_MAX_MESSAGES) return;
    va_list ap;
    va_start(ap, fmt);
    s->warnings[s->num_warnings++] = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
}

void attn__sel_note(attn_selection *s, const char *fmt, ...)
{
    if (s->num_notes >= ATTN__SEL_MAX_MESSAGES) return;
    va_list ap;
    va_start(ap, fmt);
    const char *text = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    for (int i = 0; i < s->num_notes; i++)
        if (!strcmp(s->notes[i], text)) return;
    s->notes[s->num_notes++] = text;
}

attn_status attn__sel_fail(attn_selection *s, attn_select_error kind, attn_status status,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s->message = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    s->error = kind;
    s->status = status;
    s->chosen = -1;
    return status;
}

static attn_status attn__sel_fail_sb(attn_selection *s, attn_select_error kind, attn_status status,
                                     attn__sb *sb)
{
    if (sb->oom) s->oom = true;
    attn_status st = attn__sel_fail(s, kind, status, "%s", sb->data ? sb->data : "");
    attn__sb_free(sb);
    return st;
}

void attn__sel_choose(attn_selection *s, int i)
{
    s->chosen = i;
    s->status = ATTN_OK;
    s->error = ATTN_SELECT_OK;
    s->message = NULL;
}

/* ---- self-test gate ----------------------------------------------------- */

/* Known-answer tests run once per process per backend object. */
typedef struct attn__selftest_result {
    struct attn__selftest_result *next;
    const attn_backend *backend;
    attn_status status;
    char detail[256];
} attn__selftest_result;

static pthread_mutex_t attn__selftest_mu = PTHREAD_MUTEX_INITIALIZER;
static attn__selftest_result *attn__selftests;

static attn_status attn__selftest(const attn_backend *b, char *detail, size_t size)
{
    pthread_mutex_lock(&attn__selftest_mu);
    attn__selftest_result *r = attn__selftests;
    while (r && r->backend != b)
        r = r->next;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&attn__selftest_mu);
            snprintf(detail, size, "out of memory");
            return ATTN_OUT_OF_MEMORY;
        }
        r->backend = b;
        r->status = b->kernel->self_test(r->detail, sizeof r->detail);
        if (r->status != ATTN_OK && !r->detail[0])
            snprintf(r->detail, sizeof r->detail, "%s", attn_strerror(r->status));
        r->next = attn__selftests;
        attn__selftests = r;
    }
    attn_status st = r->status;
    snprintf(detail, size, "%s", r->detail);
    pthread_mutex_unlock(&attn__selftest_mu);
    return st;
}

static bool attn__selftest_disabled(void)
{
    const char *e = getenv("ATTN_SELFTEST");
    static atomic_bool warned;
    if (e && *e && strcmp(e, "0") && strcmp(e, "1") && !atomic_exchange(&warned, true))
        attn_log(ATTN_LOG_WARN, "ATTN_SELFTEST='%s' is not 0 or 1; self-tests stay on", e);
    return e && !strcmp(e, "0");
}

/* ---- candidates ------------------------------------------------------------ */

typedef struct attn__cand_sink {
    attn_selection *s;
    attn__candidate *c;
} attn__cand_sink;

static void attn__cand_reason(void *user, const char *text)
{
    attn__cand_sink *k = user;
    if (k->c->num_reasons < ATTN__SEL_MAX_REASONS)
        k->c->reasons[k->c->num_reasons++] = attn__sel_strdup(k->s, text);
}

/* vLLM's text for a failed backend import on a simulated machine: the
 * first missing Python package as ModuleNotFoundError prints it. */
static const char *attn__sel_import_reason(attn_selection *s, const attn_backend *b,
                                           const char *name)
{
    (void)b;
    const attn__catalog_entry *e = attn__catalog_find(name);
    const attn_backend *desc_b = e && e->builtin ? e->builtin() : NULL;
    uint32_t need = desc_b && desc_b->desc ? desc_b->desc->import_requires : 0;
    uint32_t missing = s->platform ? need & ~s->platform->installed : 0;
    for (int k = 0; k < ATTN_COMPONENT_COUNT; k++)
        if ((missing >> k) & 1u)
            return attn__sel_printf(s, "ModuleNotFoundError: No module named '%s'",
                                    attn_component_name((attn_component)k));
    return attn__sel_printf(s, "ImportError: %s", attn_last_error());
}

/* In vLLM 0.32.0 these backends' modules import vllm.vllm_flash_attn on
 * CUDA, which fails when neither the FA2 nor the FA3 extension is there. */
static const char *const attn__fa_importers[] = {
    "FLASH_ATTN",
    "FLASH_ATTN_DIFFKV",
    "FLASH_ATTN_MLA",
    "FLASH_ATTN_MLA_SPARSE",
    "FLASHMLA_SPARSE",
    "FLASHINFER_MLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_SM90",
    "FLASHINFER_MLA_SPARSE_SM120",
    "FLEX_ATTENTION",
    "TRITON_FLASH_ATTN",
    "TURBOQUANT",
};
static const char attn__fa_import_error[] =
    "ImportError: vllm.vllm_flash_attn requires the CUDA flash attention extensions "
    "(_vllm_fa2_C or _vllm_fa3_C). On ROCm, use upstream flash_attn.";

static bool attn__sel_needs_fa(const attn_selection *s, const char *name)
{
    const attn_platform *p = s->platform;
    if (!p || !p->simulated || p->kind != ATTN_PLATFORM_CUDA) return false;
    uint32_t fa = (1u << ATTN_COMPONENT_FA2) | (1u << ATTN_COMPONENT_FA3);
    if (p->installed & fa) return false;
    for (size_t i = 0; i < sizeof attn__fa_importers / sizeof attn__fa_importers[0]; i++)
        if (!strcmp(attn__fa_importers[i], name)) return true;
    return false;
}

static attn_status attn__sel_consider_ex(attn_selection *s, const char *name, int priority,
                                         bool validate, int *index)
{
    char canon[64];
    if (!attn__registry_canon(name, canon, sizeof canon)) return attn__registry_unknown(name);
    const char *stable = attn__registry_lookup(canon);
    if (!stable) return attn__registry_unknown(canon);
    const attn_backend *b = NULL;
    attn_status st = attn_backend_resolve(s->platform, stable, &b);
    if (st == ATTN_NOT_REGISTERED || st == ATTN_UNKNOWN_BACKEND) return st;
    if (s->num_candidates >= ATTN__SEL_MAX_CANDIDATES)
        return attn__fail(ATTN_INTERNAL, "too many candidates");
    int i = s->num_candidates++;
    attn__candidate *c = &s->candidates[i];
    memset(c, 0, sizeof *c);
    c->name = stable;
    c->priority = priority;
    if (index) *index = i;
    attn__cand_sink sink = {s, c};
    if (attn__sel_needs_fa(s, stable)) {
        /* The FlashAttention helpers are imported before anything else. */
        c->detail = attn__sel_printf(s,
                                     "%s imports the FlashAttention helpers; machine %s has "
                                     "neither fa2 nor fa3 installed",
                                     stable, s->platform->name);
        c->reasons[c->num_reasons++] = attn__fa_import_error;
        c->import_failed = true;
        return ATTN_OK;
    }
    if (st != ATTN_OK) {
        /* Import failures are a reason like any other (vLLM catches
         * ImportError around the class import). */
        /* The reason is the exception as vLLM prints it; libattn's own
         * account (which component is missing where) is the detail. */
        c->detail = attn__sel_strdup(s, attn_last_error());
        /* ROCm's selector records a bare "ImportError" reason, the others
         * the exception's text. */
        bool rocm = s->platform && s->platform->kind == ATTN_PLATFORM_ROCM;
        c->reasons[c->num_reasons++] = rocm ? "ImportError" : attn__sel_import_reason(s, b, stable);
        c->import_failed = !rocm;
        return ATTN_OK;
    }
    c->backend = b;
    const char *loc = NULL;
    if (attn_registry_get_locator(stable, &loc) == ATTN_OK) c->locator = loc;
    if (validate) {
        attn_check_ctx ctx;
        attn__check_ctx_init(&ctx, s->platform, &s->cfg);
        attn__validate(b->desc, &ctx, attn__cand_reason, &sink);
    }
    if (c->num_reasons == 0 && b->kernel && b->kernel->self_test) {
        if (attn__selftest_disabled()) {
            attn__sel_note(s, "self-test skipped (ATTN_SELFTEST=0)");
        } else {
            char detail[256];
            if (attn__selftest(b, detail, sizeof detail) != ATTN_OK)
                c->reasons[c->num_reasons++] = attn__sel_printf(s, "self-test failed: %s", detail);
        }
    }
    c->valid = c->num_reasons == 0;
    return ATTN_OK;
}

attn_status attn__sel_consider(attn_selection *s, const char *name, int priority, int *index)
{
    return attn__sel_consider_ex(s, name, priority, true, index);
}

/* "Reason: ['a', 'b']" — a Python list repr. */
static void attn__put_py_list(attn__sb *sb, const attn__candidate *c)
{
    attn__sb_putc(sb, '[');
    for (int j = 0; j < c->num_reasons; j++) {
        if (j) attn__sb_puts(sb, ", ");
        attn__sb_py_str(sb, c->reasons[j]);
    }
    attn__sb_putc(sb, ']');
}

const char *attn__sel_reasons_repr(attn_selection *s, int i)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__put_py_list(&sb, &s->candidates[i]);
    if (sb.oom) s->oom = true;
    const char *r = attn__sel_strdup(s, sb.data ? sb.data : "[]");
    attn__sb_free(&sb);
    return r;
}

static attn_status attn__sel_lookup_failure(attn_selection *s, attn_status st)
{
    if (st == ATTN_NOT_REGISTERED)
        return attn__sel_fail(s, ATTN_SELECT_NOT_REGISTERED, st, "%s", attn_last_error());
    if (st == ATTN_UNKNOWN_BACKEND)
        return attn__sel_fail(s, ATTN_SELECT_UNKNOWN_NAME, st, "%s", attn_last_error());
    return attn__sel_fail(s, ATTN_SELECT_NO_VALID, st, "%s", attn_last_error());
}

static attn_status attn__sel_finish_explicit(attn_selection *s, int idx)
{
    const attn__candidate *c = &s->candidates[idx];
    if (c->valid) {
        attn__sel_choose(s, idx);
        return ATTN_OK;
    }
    attn__sb sb;
    attn__sb_init(&sb);
    /* vLLM formats the enum member (AttentionBackendEnum.X). An import
     * failure is printed bare inside the brackets, the other reasons as a
     * Python list repr. */
    attn__sb_printf(&sb,
                    "Selected backend AttentionBackendEnum.%s is not valid for this "
                    "configuration. Reason: ",
                    c->name);
    if (c->import_failed)
        attn__sb_printf(&sb, "[%s]", c->num_reasons ? c->reasons[0] : "");
    else
        attn__put_py_list(&sb, c);
    return attn__sel_fail_sb(s, ATTN_SELECT_EXPLICIT_INVALID, ATTN_BACKEND_INVALID, &sb);
}

attn_status attn__sel_explicit(attn_selection *s, const char *requested)
{
    int idx = -1;
    attn_status st = attn__sel_consider(s, requested, -1, &idx);
    if (st != ATTN_OK) return attn__sel_lookup_failure(s, st);
    return attn__sel_finish_explicit(s, idx);
}

attn_status attn__sel_resolve_only(attn_selection *s, const char *name, int priority)
{
    int idx = -1;
    attn_status st = attn__sel_consider_ex(s, name, priority, false, &idx);
    if (st != ATTN_OK) return attn__sel_lookup_failure(s, st);
    if (priority < 0) return attn__sel_finish_explicit(s, idx);
    if (s->candidates[idx].valid) {
        attn__sel_choose(s, idx);
        return ATTN_OK;
    }
    char repr[1024];
    attn_selector_config_repr(&s->cfg, repr, sizeof repr);
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_printf(&sb, "No valid attention backend found for %s with %s. Reasons: {%s: [",
                    s->device_family, repr, s->candidates[idx].name);
    for (int j = 0; j < s->candidates[idx].num_reasons; j++)
        attn__sb_printf(&sb, "%s%s", j ? ", " : "", s->candidates[idx].reasons[j]);
    attn__sb_puts(&sb, "]}.");
    return attn__sel_fail_sb(s, ATTN_SELECT_NO_VALID, ATTN_NO_VALID_BACKEND, &sb);
}

/* "{A: [r1, r2], B: [r3]}" over the invalid candidates, priority order. */
static void attn__put_reasons_dict(attn__sb *sb, const attn_selection *s)
{
    attn__sb_putc(sb, '{');
    bool first = true;
    for (int i = 0; i < s->num_candidates; i++) {
        const attn__candidate *c = &s->candidates[i];
        if (c->valid) continue;
        attn__sb_printf(sb, "%s%s: [", first ? "" : ", ", c->name);
        for (int j = 0; j < c->num_reasons; j++)
            attn__sb_printf(sb, "%s%s", j ? ", " : "", c->reasons[j]);
        attn__sb_putc(sb, ']');
        first = false;
    }
    attn__sb_putc(sb, '}');
}

/* ROCm's hint after "No valid ...": the KV dtypes accepted by the backends
 * that rejected the requested one, sorted as Python sorts strings. */
static int attn__cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void attn__put_kv_hint(attn__sb *sb, const attn_selection *s)
{
    uint64_t mask = 0;
    bool ultra = false;
    for (int i = 0; i < s->num_candidates; i++) {
        const attn__candidate *c = &s->candidates[i];
        bool kv_reason = false;
        for (int j = 0; j < c->num_reasons; j++)
            kv_reason = kv_reason || strstr(c->reasons[j], "kv_cache_dtype") != NULL;
        if (!kv_reason || !c->backend || !c->backend->desc) continue;
        const attn_backend_desc *d = c->backend->desc;
        if (!strcmp(c->name, "ULTRAQUANT"))
            ultra = true;
        else
            mask |= d->kv_dtypes ? d->kv_dtypes
                                 : ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) |
                                       ATTN_KV_BIT(ATTN_KV_BFLOAT16);
    }
    const char *names[ATTN_KV_COUNT + 1];
    int n = 0;
    for (int k = 0; k < ATTN_KV_COUNT; k++)
        if ((mask >> k) & 1u) names[n++] = attn_kv_dtype_name((attn_kv_dtype)k);
    if (ultra) names[n++] = "ultraquant_4bit";
    if (!n) return;
    qsort(names, (size_t)n, sizeof names[0], attn__cmp_str);
    attn__sb_puts(sb, " Supported kv_cache_dtype values: ");
    for (int i = 0; i < n; i++)
        attn__sb_printf(sb, "%s%s", i ? ", " : "", names[i]);
    attn__sb_putc(sb, '.');
}

attn_status attn__sel_auto(attn_selection *s, const char *const *names, int n,
                           bool precluded_warning)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        int idx = -1;
        attn_status st = attn__sel_consider(s, names[i], i, &idx);
        if (st != ATTN_OK) return attn__sel_lookup_failure(s, st);
        if (best < 0 && s->candidates[idx].valid) best = idx;
    }
    if (best < 0) {
        char repr[1024];
        attn_selector_config_repr(&s->cfg, repr, sizeof repr);
        attn__sb sb;
        attn__sb_init(&sb);
        attn__sb_printf(&sb, "No valid attention backend found for %s with %s. Reasons: ",
                        s->device_family, repr);
        attn__put_reasons_dict(&sb, s);
        attn__sb_putc(&sb, '.');
        if (s->platform && s->platform->kind == ATTN_PLATFORM_ROCM) attn__put_kv_hint(&sb, s);
        return attn__sel_fail_sb(s, ATTN_SELECT_NO_VALID, ATTN_NO_VALID_BACKEND, &sb);
    }
    if (precluded_warning && s->cfg.block_size > 0) {
        attn__sb sb;
        attn__sb_init(&sb);
        int count = 0;
        for (int i = 0; i < best; i++) {
            const attn__candidate *c = &s->candidates[i];
            if (!c->valid && c->num_reasons == 1 &&
                !strcmp(c->reasons[0], "block_size not supported")) {
                attn__sb_printf(&sb, "%s%s", count ? ", " : "", c->name);
                count++;
            }
        }
        if (count)
            attn__sel_warn(s,
                           "--block-size %d precluded higher-priority backend(s) %s. Using %s "
                           "instead, which may result in reduced performance. Consider removing "
                           "--block-size to auto-select the optimal block size.",
                           s->cfg.block_size, sb.data ? sb.data : "", s->candidates[best].name);
        attn__sb_free(&sb);
    }
    attn__sel_choose(s, best);
    return ATTN_OK;
}

/* ---- the selection object ------------------------------------------------- */

static attn_selection *attn__sel_new(const attn_platform *p, const attn_selector_config *cfg)
{
    attn_selection *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->platform = p;
    s->cfg = *cfg;
    s->chosen = -1;
    s->status = ATTN_INTERNAL;
    snprintf(s->platform_name, sizeof s->platform_name, "%s", p->name);
    snprintf(s->device_name, sizeof s->device_name, "%s", p->device_name);
    snprintf(s->gfx_arch, sizeof s->gfx_arch, "%s", p->gfx_arch);
    s->simulated = p->simulated;
    s->has_cc = p->has_cc;
    s->cc_major = p->cc_major;
    s->cc_minor = p->cc_minor;
    s->installed = p->installed;
    return s;
}

void attn_selection_free(attn_selection *s)
{
    if (!s) return;
    attn__arena_block *b = s->arena;
    while (b) {
        attn__arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(s);
}

/* Checks that an enum-valued config holds values a Python caller could
 * have produced; anything else is a usage error, not a reason. */
static attn_status attn__sel_check_config(attn_selection *s)
{
    const attn_selector_config *c = &s->cfg;
    if (c->head_size <= 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "head_size must be a positive integer, got %d", c->head_size);
    if (c->head_size > ATTN_MAX_HEAD_SIZE || c->num_heads > ATTN_MAX_HEADS ||
        c->block_size > ATTN_MAX_BLOCK_SIZE) /* attn/types.h limits */
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "head_size %d, num_heads %d or block_size %d exceeds its limit "
                              "(%d, %d, %d)",
                              c->head_size, c->num_heads, c->block_size, ATTN_MAX_HEAD_SIZE,
                              ATTN_MAX_HEADS, ATTN_MAX_BLOCK_SIZE);
    if ((unsigned)c->dtype >= ATTN_DTYPE_COUNT)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "invalid dtype %d (expected fp16, bf16 or fp32)", (int)c->dtype);
    if (c->kv_cache_dtype != ATTN_KV_NONE &&
        ((int)c->kv_cache_dtype < 0 || c->kv_cache_dtype >= ATTN_KV_COUNT)) {
        attn__sb sb;
        attn__sb_init(&sb);
        attn__sb_printf(&sb, "Invalid kv_cache_dtype: %d. Valid values are: (",
                        (int)c->kv_cache_dtype);
        for (int i = 0; i < ATTN_KV_COUNT; i++)
            attn__sb_printf(&sb, "%s'%s'", i ? ", " : "", attn_kv_dtype_name((attn_kv_dtype)i));
        attn__sb_putc(&sb, ')');
        return attn__sel_fail_sb(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT, &sb);
    }
    if ((unsigned)c->attn_type >= ATTN_TYPE_COUNT)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "invalid attn_type %d", (int)c->attn_type);
    if (c->block_size < 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "block_size must be positive (0 = not specified), got %d",
                              c->block_size);
    if (c->num_heads < 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "num_heads must be positive (0 = not given), got %d", c->num_heads);
    return ATTN_OK;
}

static void attn__ensure_plugins(void)
{
    static atomic_bool done;
    if (atomic_load_explicit(&done, memory_order_acquire)) return;
    attn_plugins_load(); /* idempotent; concurrent callers wait for the one load */
    atomic_store_explicit(&done, true, memory_order_release);
}

static void attn__effective_config(const attn_platform *p, const attn_selector_config *in,
                                   attn_selector_config *out)
{
    *out = *in;
    if (p->settings[ATTN_SETTING_BATCH_INVARIANT]) out->use_batch_invariant = true;
}

static void attn__sel_run(attn_selection *s, const char *requested)
{
    const attn_platform *p = s->platform;
    const attn__platform_ops *ops = p->ops ? p->ops : attn__platform_ops_for(p->kind);
    s->device_family =
        ops && ops->device_family ? ops->device_family : attn_platform_kind_name(p->kind);

    if (requested && strcasecmp(requested, "auto") != 0) {
        char canon[64];
        const char *stable = NULL;
        if (attn__registry_canon(requested, canon, sizeof canon))
            stable = attn__registry_lookup(canon);
        if (!stable) {
            /* vLLM upper-cases the name before the enum lookup. */
            char *up = (char *)attn__arena_alloc(s, strlen(requested) + 1);
            if (up) {
                size_t i = 0;
                for (; requested[i]; i++)
                    up[i] = (char)toupper((unsigned char)requested[i]);
                up[i] = '\0';
                s->requested = up;
            }
            attn__sel_fail(s, ATTN_SELECT_UNKNOWN_NAME, ATTN_UNKNOWN_BACKEND,
                           "Unknown attention backend: '%s'. Valid options are: %s",
                           up ? up : requested, attn_registry_valid_names());
            return;
        }
        s->requested = stable;
    }
    if (attn__sel_check_config(s) != ATTN_OK) return;
    if (!ops || !ops->select) {
        attn__sel_fail(s, ATTN_SELECT_NO_VALID, ATTN_NO_VALID_BACKEND,
                       "Invalid attention backend for %s", s->device_family);
        return;
    }
    ops->select(p, s->requested, &s->cfg, s);
    if (s->oom)
        attn__sel_fail(s, s->error ? s->error : ATTN_SELECT_NO_VALID, ATTN_OUT_OF_MEMORY,
                       "out of memory while selecting a backend");
}

static attn_status attn__sel_status(const attn_selection *s)
{
    if (s->status != ATTN_OK)
        return attn__fail(s->status, "%s", s->message ? s->message : attn_strerror(s->status));
    return ATTN_OK;
}

attn_status attn_select_uncached(const attn_platform *p, const char *requested,
                                 const attn_selector_config *cfg, attn_selection **out)
{
    if (out) *out = NULL;
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(cfg);
    ATTN__CHECK_NULL(out);
    attn__ensure_plugins();
    attn_selector_config eff;
    attn__effective_config(p, cfg, &eff);
    attn_selection *s = attn__sel_new(p, &eff);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while selecting a backend");
    attn__sel_run(s, requested);
    *out = s;
    return attn__sel_status(s);
}

/* ---- logging (once) ------------------------------------------------------- */

typedef struct attn__logged {
    struct attn__logged *next;
    char text[];
} attn__logged;
static attn__logged *attn__logged_lines;
static pthread_mutex_t attn__logged_mu = PTHREAD_MUTEX_INITIALIZER;

static void attn__log_once(attn_log_level level, const char *text)
{
    pthread_mutex_lock(&attn__logged_mu);
    for (attn__logged *l = attn__logged_lines; l; l = l->next) {
        if (!strcmp(l->text, text)) {
            pthread_mutex_unlock(&attn__logged_mu);
            return;
        }
    }
    size_t n = strlen(text);
    attn__logged *l = malloc(sizeof *l + n + 1);
    if (l) {
        memcpy(l->text, text, n + 1);
        l->next = attn__logged_lines;
        attn__logged_lines = l;
    }
    pthread_mutex_unlock(&attn__logged_mu);
    attn_log(level, "%s", text);
}

static void attn__sel_log(const attn_selection *s)
{
    for (int i = 0; i < s->num_warnings; i++)
        attn_log(ATTN_LOG_WARN, "%s", s->warnings[i]);
    if (s->status != ATTN_OK) return;
    if (attn_log_get_level() >= ATTN_LOG_DEBUG) {
        attn__sb sb;
        attn__sb_init(&sb);
        bool any = false;
        for (int i = 0; i < s->num_candidates; i++)
            any = any || !s->candidates[i].valid;
        if (any) {
            char repr[1024];
            attn_selector_config_repr(&s->cfg, repr, sizeof repr);
            attn__sb_printf(&sb, "Some attention backends are not valid for %s with %s. Reasons: ",
                            s->device_family, repr);
            attn__put_reasons_dict(&sb, s);
            attn__sb_putc(&sb, '.');
            if (sb.data) attn__log_once(ATTN_LOG_DEBUG, sb.data);
        }
        attn__sb_free(&sb);
    }
    if (!s->requested && attn_log_get_level() >= ATTN_LOG_DEBUG) {
        /* vLLM's CUDA wording, with every valid candidate in priority order. */
        attn__sb sb;
        attn__sb_init(&sb);
        attn__sb_printf(&sb, "Using %s attention backend out of potential backends: [",
                        s->candidates[s->chosen].name);
        bool first = true;
        for (int i = 0; i < s->num_candidates; i++) {
            if (!s->candidates[i].valid) continue;
            if (!first) attn__sb_puts(&sb, ", ");
            attn__sb_py_str(&sb, s->candidates[i].name);
            first = false;
        }
        attn__sb_puts(&sb, "].");
        if (sb.data) attn__log_once(ATTN_LOG_DEBUG, sb.data);
        attn__sb_free(&sb);
    }
    char line[128];
    snprintf(line, sizeof line, "Using %s backend.", s->candidates[s->chosen].name);
    attn__log_once(ATTN_LOG_INFO, line);
}

/* ---- the cache -------------------------------------------------------------- */

typedef struct attn__cache_key {
    uint64_t hash;
    const attn_platform *platform;
    uint64_t platform_id;
    uint32_t installed;
    uint32_t settings;
    uint64_t reg_gen;
    const char *requested; /* upper case, or NULL for automatic */
    attn_selector_config cfg;
} attn__cache_key;

typedef struct attn__cache_entry {
    attn__cache_key key; /* key.requested points into sel (same text) */
    attn_selection *sel;
} attn__cache_entry;

typedef struct attn__cache_table {
    size_t mask;
    size_t count;
    struct attn__cache_table *retired_next; /* chain of retired tables */
    _Atomic(attn__cache_entry *) slots[];
} attn__cache_table;

static _Atomic(attn__cache_table *) attn__cache;
static pthread_mutex_t attn__cache_mu = PTHREAD_MUTEX_INITIALIZER;
/* Retired tables and the entries of cleared ones stay reachable here:
 * readers may still be walking them, and callers may hold results. */
static attn__cache_table *attn__cache_retired;
static attn__cache_table *attn__cache_cleared;

static inline uint64_t attn__mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t attn__key_hash(const attn__cache_key *k)
{
    const attn_selector_config *c = &k->cfg;
    uint64_t h = attn__mix(k->platform_id, (uint64_t)(uintptr_t)k->platform);
    h = attn__mix(h, ((uint64_t)k->installed << 32) | k->settings);
    h = attn__mix(h, k->reg_gen);
    uint64_t flags = (uint64_t)c->use_mla | (uint64_t)c->has_sink << 1 |
                     (uint64_t)c->use_sparse << 2 | (uint64_t)c->use_mm_prefix << 3 |
                     (uint64_t)c->use_per_head_quant_scales << 4 |
                     (uint64_t)c->has_sliding_window << 5 | (uint64_t)c->use_non_causal << 6 |
                     (uint64_t)c->use_batch_invariant << 7;
    h = attn__mix(h, (uint64_t)(uint32_t)c->head_size << 32 | (uint32_t)c->block_size);
    h = attn__mix(h, (uint64_t)(uint32_t)c->num_heads << 32 | flags << 16 |
                         (uint64_t)(c->dtype & 0xff) << 8 | (uint64_t)(c->attn_type & 0xff));
    h = attn__mix(h, (uint64_t)(int64_t)c->kv_cache_dtype);
    for (const char *r = k->requested; r && *r; r++)
        h = (h ^ (unsigned char)*r) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static bool attn__key_equal(const attn__cache_key *a, const attn__cache_key *b)
{
    if (a->hash != b->hash || a->platform != b->platform || a->platform_id != b->platform_id ||
        a->installed != b->installed || a->settings != b->settings || a->reg_gen != b->reg_gen)
        return false;
    if ((a->requested == NULL) != (b->requested == NULL)) return false;
    if (a->requested && strcmp(a->requested, b->requested) != 0) return false;
    return attn_selector_config_equal(&a->cfg, &b->cfg);
}

static attn__cache_entry *attn__cache_find(attn__cache_table *t, const attn__cache_key *k)
{
    if (!t) return NULL;
    for (size_t i = k->hash & t->mask;; i = (i + 1) & t->mask) {
        attn__cache_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!e) return NULL;
        if (attn__key_equal(&e->key, k)) return e;
    }
}

static attn__cache_table *attn__cache_table_new(size_t cap)
{
    attn__cache_table *t = calloc(1, sizeof *t + sizeof(t->slots[0]) * cap);
    if (t) t->mask = cap - 1;
    return t;
}

static void attn__cache_place(attn__cache_table *t, attn__cache_entry *e)
{
    size_t i = e->key.hash & t->mask;
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed))
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slots[i], e, memory_order_release);
    t->count++;
}

/* Caller holds attn__cache_mu. Returns the table e ended up in, or NULL. */
static bool attn__cache_insert_locked(attn__cache_entry *e)
{
    attn__cache_table *t = atomic_load_explicit(&attn__cache, memory_order_relaxed);
    if (!t || (t->count + 1) * 2 > t->mask + 1) {
        size_t cap = t ? (t->mask + 1) * 2 : 256;
        attn__cache_table *nt = attn__cache_table_new(cap);
        if (!nt) return false;
        if (t) {
            for (size_t i = 0; i <= t->mask; i++) {
                attn__cache_entry *old = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
                if (old) attn__cache_place(nt, old);
            }
            t->retired_next = attn__cache_retired;
            attn__cache_retired = t;
        }
        atomic_store_explicit(&attn__cache, nt, memory_order_release);
        t = nt;
    }
    attn__cache_place(t, e);
    return true;
}

static bool attn__cache_key_make(const attn_platform *p, const char *requested,
                                 const attn_selector_config *cfg, attn__cache_key *k, char *buf,
                                 size_t size)
{
    k->platform = p;
    k->platform_id = p->id;
    k->installed = p->installed;
    k->settings = 0;
    for (int i = 0; i < ATTN_SETTING_COUNT; i++)
        k->settings |= (uint32_t)p->settings[i] << i;
    k->reg_gen = attn__registry_generation();
    k->requested = NULL;
    if (requested && strcasecmp(requested, "auto") != 0) {
        size_t i = 0;
        for (; requested[i]; i++) {
            if (i + 1 >= size) return false;
            buf[i] = (char)toupper((unsigned char)requested[i]);
        }
        buf[i] = '\0';
        k->requested = buf;
    }
    attn__effective_config(p, cfg, &k->cfg);
    k->hash = attn__key_hash(k);
    return true;
}

attn_status attn_select(const attn_platform *p, const char *requested,
                        const attn_selector_config *cfg, const attn_selection **out)
{
    if (out) *out = NULL;
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(cfg);
    ATTN__CHECK_NULL(out);
    attn__ensure_plugins();
    attn__cache_key key;
    char reqbuf[256];
    if (!attn__cache_key_make(p, requested, cfg, &key, reqbuf, sizeof reqbuf))
        return attn__fail(ATTN_INVALID_ARGUMENT, "backend name too long (%zu characters)",
                          strlen(requested));
    attn__cache_entry *e =
        attn__cache_find(atomic_load_explicit(&attn__cache, memory_order_acquire), &key);
    if (e) {
        *out = e->sel;
        return attn__sel_status(e->sel);
    }

    attn_selection *s = NULL;
    attn_status st = attn_select_uncached(p, requested, cfg, &s);
    if (!s) return st;
    e = calloc(1, sizeof *e);
    if (!e) {
        attn_selection_free(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while caching a selection");
    }
    e->key = key;
    e->key.requested = s->requested; /* the same upper-case text, owned by s */
    e->sel = s;

    pthread_mutex_lock(&attn__cache_mu);
    attn__cache_entry *won =
        attn__cache_find(atomic_load_explicit(&attn__cache, memory_order_relaxed), &key);
    bool inserted = false;
    if (!won) {
        inserted = attn__cache_insert_locked(e);
        won = inserted ? e : NULL;
    }
    pthread_mutex_unlock(&attn__cache_mu);
    if (!inserted) {
        attn_selection_free(s);
        free(e);
        if (!won) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while caching a selection");
    } else {
        attn__sel_log(won->sel);
    }
    *out = won->sel;
    return attn__sel_status(won->sel);
}

void attn_select_cache_clear(void)
{
    pthread_mutex_lock(&attn__cache_mu);
    attn__cache_table *t = atomic_load_explicit(&attn__cache, memory_order_relaxed);
    if (t) {
        atomic_store_explicit(&attn__cache, NULL, memory_order_release);
        t->retired_next = attn__cache_cleared;
        attn__cache_cleared = t;
    }
    pthread_mutex_unlock(&attn__cache_mu);
}

/* ---- accessors -------------------------------------------------------------- */

const char *attn_selection_backend(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].name : NULL;
}

const attn_backend *attn_selection_backend_object(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].backend : NULL;
}

const char *attn_selection_locator(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].locator : NULL;
}

const char *attn_selection_requested(const attn_selection *s)
{
    return s ? s->requested : NULL;
}

attn_status attn_selection_status(const attn_selection *s)
{
    return s ? s->status : ATTN_NULL_ARGUMENT;
}

attn_select_error attn_selection_error(const attn_selection *s)
{
    return s ? s->error : ATTN_SELECT_OK;
}

const char *attn_select_error_name(attn_select_error e)
{
    switch (e) {
    case ATTN_SELECT_OK: return "ok";
    case ATTN_SELECT_EXPLICIT_INVALID: return "explicit-invalid";
    case ATTN_SELECT_NO_VALID: return "no-valid";
    case ATTN_SELECT_UNKNOWN_NAME: return "unknown-name";
    case ATTN_SELECT_NOT_IMPLEMENTED: return "not-implemented";
    case ATTN_SELECT_NOT_REGISTERED: return "not-registered";
    case ATTN_SELECT_INVALID_CONFIG: return "invalid-config";
    }
    return "unknown";
}

const char *attn_selection_message(const attn_selection *s)
{
    return s ? s->message : NULL;
}

const attn_selector_config *attn_selection_config(const attn_selection *s)
{
    return s ? &s->cfg : NULL;
}

const attn_platform *attn_selection_platform(const attn_selection *s)
{
    return s ? s->platform : NULL;
}

int attn_selection_num_candidates(const attn_selection *s)
{
    return s ? s->num_candidates : 0;
}

attn_status attn_selection_candidate(const attn_selection *s, int i, attn_candidate_info *info)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(info);
    if (i < 0 || i >= s->num_candidates)
        return attn__fail(ATTN_OUT_OF_RANGE, "candidate %d out of range (0..%d)", i,
                          s->num_candidates - 1);
    const attn__candidate *c = &s->candidates[i];
    info->name = c->name;
    info->priority = c->priority;
    info->valid = c->valid;
    info->num_reasons = c->num_reasons;
    return ATTN_OK;
}

const char *attn_selection_reason(const attn_selection *s, int candidate, int j)
{
    if (!s || candidate < 0 || candidate >= s->num_candidates) return NULL;
    const attn__candidate *c = &s->candidates[candidate];
    return j >= 0 && j < c->num_reasons ? c->reasons[j] : NULL;
}

int attn_selection_num_warnings(const attn_selection *s)
{
    return s ? s->num_warnings : 0;
}

const char *attn_selection_warning(const attn_selection *s, int i)
{
    return s && i >= 0 && i < s->num_warnings ? s->warnings[i] : NULL;
}

int attn_selection_num_notes(const attn_selection *s)
{
    return s ? s->num_notes : 0;
}

const char *attn_selection_note(const attn_selection *s, int i)
{
    return s && i >= 0 && i < s->num_notes ? s->notes[i] : NULL;
}

/* ---- JSON and --explain ----------------------------------------------------- */

static void attn__json_config(attn__jw *w, const attn_selector_config *c)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "head_size");
    attn__jw_int(w, c->head_size);
    attn__jw_key(w, "dtype");
    attn__jw_str(w, attn_dtype_name(c->dtype));
    attn__jw_key(w, "kv_cache_dtype");
    if (c->kv_cache_dtype == ATTN_KV_NONE)
        attn__jw_null(w);
    else
        attn__jw_str(w, attn_kv_dtype_name(c->kv_cache_dtype));
    attn__jw_key(w, "block_size");
    if (c->block_size > 0)
        attn__jw_int(w, c->block_size);
    else
        attn__jw_null(w);
    attn__jw_key(w, "use_mla");
    attn__jw_bool(w, c->use_mla);
    attn__jw_key(w, "has_sink");
    attn__jw_bool(w, c->has_sink);
    attn__jw_key(w, "use_sparse");
    attn__jw_bool(w, c->use_sparse);
    attn__jw_key(w, "use_mm_prefix");
    attn__jw_bool(w, c->use_mm_prefix);
    attn__jw_key(w, "use_per_head_quant_scales");
    attn__jw_bool(w, c->use_per_head_quant_scales);
    attn__jw_key(w, "attn_type");
    attn__jw_str(w, attn_attn_type_name(c->attn_type));
    attn__jw_key(w, "has_sliding_window");
    attn__jw_bool(w, c->has_sliding_window);
    attn__jw_key(w, "use_non_causal");
    attn__jw_bool(w, c->use_non_causal);
    attn__jw_key(w, "use_batch_invariant");
    attn__jw_bool(w, c->use_batch_invariant);
    attn__jw_key(w, "use_kv_connector");
    attn__jw_bool(w, c->use_kv_connector);
    attn__jw_key(w, "use_pcp");
    attn__jw_bool(w, c->use_pcp);
    attn__jw_key(w, "use_adaptive_verification");
    attn__jw_bool(w, c->use_adaptive_verification);
    attn__jw_key(w, "use_dcp");
    attn__jw_bool(w, c->use_dcp);
    attn__jw_key(w, "use_rswa");
    attn__jw_bool(w, c->use_rswa);
    attn__jw_key(w, "num_heads");
    if (c->num_heads > 0)
        attn__jw_int(w, c->num_heads);
    else
        attn__jw_null(w);
    attn__jw_obj_end(w);
}

attn_status attn_selection_to_json(const attn_selection *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "machine");
    attn__jw_str(&w, s->platform_name);
    attn__jw_key(&w, "device");
    attn__jw_str(&w, s->device_family);
    attn__jw_key(&w, "requested");
    attn__jw_str(&w, s->requested);
    attn__jw_key(&w, "config");
    attn__json_config(&w, &s->cfg);
    char repr[1024];
    attn_selector_config_repr(&s->cfg, repr, sizeof repr);
    attn__jw_key(&w, "config_repr");
    attn__jw_str(&w, repr);
    attn__jw_key(&w, "selected");
    attn__jw_str(&w, attn_selection_backend(s));
    attn__jw_key(&w, "locator");
    attn__jw_str(&w, attn_selection_locator(s));
    attn__jw_key(&w, "error");
    if (s->status == ATTN_OK) {
        attn__jw_null(&w);
    } else {
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "kind");
        attn__jw_str(&w, attn_select_error_name(s->error));
        attn__jw_key(&w, "status");
        attn__jw_str(&w, attn_status_name(s->status));
        attn__jw_key(&w, "message");
        attn__jw_str(&w, s->message);
        attn__jw_obj_end(&w);
    }
    attn__jw_key(&w, "warnings");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_warnings; i++)
        attn__jw_str(&w, s->warnings[i]);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "notes");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_notes; i++)
        attn__jw_str(&w, s->notes[i]);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "candidates");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_candidates; i++) {
        const attn__candidate *c = &s->candidates[i];
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, c->name);
        attn__jw_key(&w, "priority");
        attn__jw_int(&w, c->priority);
        attn__jw_key(&w, "valid");
        attn__jw_bool(&w, c->valid);
        attn__jw_key(&w, "chosen");
        attn__jw_bool(&w, i == s->chosen);
        attn__jw_key(&w, "locator");
        attn__jw_str(&w, c->locator);
        attn__jw_key(&w, "reasons");
        attn__jw_arr_begin(&w);
        for (int j = 0; j < c->num_reasons; j++)
            attn__jw_str(&w, c->reasons[j]);
        attn__jw_arr_end(&w);
        attn__jw_key(&w, "detail");
        attn__jw_str(&w, c->detail);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);
    attn__sb_putc(&sb, '\n');
    char *text = attn__sb_take(&sb);
    if (!text) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory writing selection JSON");
    *out = text;
    return ATTN_OK;
}

attn_status attn_selection_explain(const attn_selection *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_printf(&sb, "machine:   %s (%s", s->platform_name, s->device_family);
    if (s->device_name[0]) attn__sb_printf(&sb, ", %s", s->device_name);
    if (s->has_cc) attn__sb_printf(&sb, ", capability %d.%d", s->cc_major, s->cc_minor);
    if (s->gfx_arch[0]) attn__sb_printf(&sb, ", %s", s->gfx_arch);
    attn__sb_printf(&sb, "%s)\n", s->simulated ? ", simulated" : "");
    bool any_comp = false;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if ((s->installed >> c) & 1u) {
            attn__sb_printf(&sb, "%s%s",
                            any_comp ? "," : "installed: ", attn_component_name((attn_component)c));
            any_comp = true;
        }
    }
    if (any_comp) attn__sb_putc(&sb, '\n');
    char repr[1024];
    attn_selector_config_repr(&s->cfg, repr, sizeof repr);
    attn__sb_printf(&sb, "config:    %s", repr);
    if (s->cfg.num_heads > 0) attn__sb_printf(&sb, " num_heads=%d", s->cfg.num_heads);
    attn__sb_printf(&sb, "\nrequested: %s\n\n", s->requested ? s->requested : "auto");
    if (s->num_candidates > 0) {
        attn__sb_printf(&sb, "    %-4s  %-24s %-3s %s\n", "prio", "backend", "ok", "reasons");
        for (int i = 0; i < s->num_candidates; i++) {
            const attn__candidate *c = &s->candidates[i];
            char prio[16];
            if (c->priority >= 0)
                snprintf(prio, sizeof prio, "%d", c->priority);
            else
                snprintf(prio, sizeof prio, "req");
            attn__sb_printf(&sb, "%s %4s  %-24s %s  ", i == s->chosen ? "=> " : "   ", prio,
                            c->name, c->valid ? "\u2713" : "\u2717");
            if (c->valid) attn__sb_puts(&sb, i == s->chosen ? "valid (chosen)" : "valid");
            for (int j = 0; j < c->num_reasons; j++)
                attn__sb_printf(&sb, "%s%s", j ? "; " : "", c->reasons[j]);
            if (c->detail) attn__sb_printf(&sb, " (%s)", c->detail);
            attn__sb_putc(&sb, '\n');
        }
        attn__sb_putc(&sb, '\n');
    }
    if (s->chosen >= 0)
        attn__sb_printf(&sb, "selected:  %s (%s)\n", s->candidates[s->chosen].name,
                        s->candidates[s->chosen].locator ? s->candidates[s->chosen].locator
                                                         : "no locator");
    else
        attn__sb_printf(&sb, "selected:  none\nerror:     %s: %s\n",
                        attn_select_error_name(s->error), s->message ? s->message : "");
    for (int i = 0; i < s->num_warnings; i++)
        attn__sb_printf(&sb, "warning:   %s\n", s->warnings[i]);
    for (int i = 0; i < s->num_notes; i++)
        attn__sb_printf(&sb, "note:      %s\n", s->notes[i]);
    char *text = attn__sb_take(&sb);
    if (!text) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory writing the explanation");
    *out = text;
    return ATTN_OK;
}

/* ---- per-kind overrides (reference §14) ------------------------------------ */

static const char *const attn__kind_names[ATTN_KIND_COUNT] = {
    "full_attention",     "sliding_window",         "mla_attention",
    "sliding_window_mla", "encoder_only_attention", "cross_attention",
};

attn_kv_kind attn_kv_kind_of(const attn_selector_config *cfg)
{
    if (!cfg) return ATTN_KIND_FULL;
    if (cfg->attn_type == ATTN_TYPE_ENCODER_ONLY) return ATTN_KIND_ENCODER_ONLY;
    if (cfg->attn_type == ATTN_TYPE_ENCODER_DECODER) return ATTN_KIND_CROSS;
    if (cfg->use_mla) return cfg->has_sliding_window ? ATTN_KIND_SLIDING_WINDOW_MLA : ATTN_KIND_MLA;
    return cfg->has_sliding_window ? ATTN_KIND_SLIDING_WINDOW : ATTN_KIND_FULL;
}

const char *attn_kv_kind_name(attn_kv_kind k)
{
    return (unsigned)k < ATTN_KIND_COUNT ? attn__kind_names[k] : "?";
}

attn_status attn_kv_kind_parse(const char *s, attn_kv_kind *out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    for (int k = 0; k < ATTN_KIND_COUNT; k++) {
        if (!strcasecmp(s, attn__kind_names[k])) {
            *out = (attn_kv_kind)k;
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_INVALID_ARGUMENT,
                      "unknown KV-cache spec kind '%s' (expected full_attention, sliding_window, "
                      "mla_attention, sliding_window_mla, encoder_only_attention or "
                      "cross_attention)",
                      s);
}

const char *attn_requested_for(const attn_selector_config *cfg, const char *global,
                               const char *const per_kind[ATTN_KIND_COUNT])
{
    if (cfg && per_kind) {
        const char *k = per_kind[attn_kv_kind_of(cfg)];
        if (k && *k) return k;
    }
    return global;
}
