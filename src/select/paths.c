/* The validating platforms' two paths (explicit request, automatic walk)
 * and XPU's resolve-only path, with vLLM's failure texts. */
#include <stdlib.h>
#include <string.h>

#include "select/selection.h"
#include "util/error.h"
#include "util/strbuf.h"

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
void attn__put_reasons_dict(attn__sb *sb, const attn_selection *s)
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
    for (int i = 0; i < s->num_candidates; i++) {
        const attn__candidate *c = &s->candidates[i];
        bool kv_reason = false;
        for (int j = 0; j < c->num_reasons; j++)
            kv_reason = kv_reason || strstr(c->reasons[j], "kv_cache_dtype") != NULL;
        if (!kv_reason || !c->backend || !c->backend->desc) continue;
        const attn_backend_desc *d = c->backend->desc;
        mask |= d->kv_dtypes ? d->kv_dtypes
                             : ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) |
                                   ATTN_KV_BIT(ATTN_KV_BFLOAT16);
    }
    const char *names[ATTN_KV_COUNT];
    int n = 0;
    for (int k = 0; k < ATTN_KV_COUNT; k++)
        if ((mask >> k) & 1ull) names[n++] = attn_kv_dtype_name((attn_kv_dtype)k);
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
