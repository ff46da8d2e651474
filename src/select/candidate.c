/* One candidate: resolve the backend (an import failure is a reason like
 * any other), validate it against the effective config, and run its
 * self-test when everything else passed. */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "registry/registry_impl.h"
#include "select/selection.h"
#include "selftest/selftest.h"
#include "util/error.h"
#include "util/strbuf.h"

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

/* The descriptor a name's code would bring: the resolved object's, else
 * the catalog's own (what the failed import would have loaded). */
static const attn_backend_desc *attn__sel_desc_of(const attn_backend *b, const char *name)
{
    if (b && b->desc) return b->desc;
    const attn__catalog_entry *e = attn__catalog_find(name);
    const attn_backend *cat = e && e->builtin ? e->builtin() : NULL;
    return cat ? cat->desc : NULL;
}

/* vLLM's text for a failed backend import: the module vLLM names but does
 * not ship, else on a simulated machine the first missing Python package,
 * as ModuleNotFoundError prints them. */
static const char *attn__sel_import_reason(attn_selection *s, const char *name,
                                           const attn_backend_desc *d)
{
    const attn__catalog_entry *e = attn__catalog_find(name);
    if (e && e->absent_module)
        return attn__sel_printf(s, "ModuleNotFoundError: No module named '%s'", e->absent_module);
    uint32_t need = d ? d->import_requires : 0;
    uint32_t missing = s->platform ? need & ~s->platform->installed : 0;
    for (int k = 0; k < ATTN_COMPONENT_COUNT; k++)
        if ((missing >> k) & 1u)
            return attn__sel_printf(s, "ModuleNotFoundError: No module named '%s'",
                                    attn_component_name((attn_component)k));
    return attn__sel_printf(s, "ImportError: %s", attn_last_error());
}

static const char attn__fa_import_error[] =
    "ImportError: vllm.vllm_flash_attn requires the CUDA flash attention extensions "
    "(_vllm_fa2_C or _vllm_fa3_C). On ROCm, use upstream flash_attn.";

/* A module that imports vllm.vllm_flash_attn (the descriptor says how)
 * fails on a simulated CUDA machine with neither the FA2 nor the FA3
 * extension, and, when it imports it unguarded, on every other simulated
 * platform (only CUDA builds ship the package). */
static bool attn__sel_needs_fa(const attn_selection *s, const attn_backend_desc *d)
{
    const attn_platform *p = s->platform;
    attn_fa_import how = d ? attn__desc_imports_fa(d) : ATTN_FA_IMPORT_NONE;
    if (!p || !p->simulated || how == ATTN_FA_IMPORT_NONE) return false;
    if (p->kind != ATTN_PLATFORM_CUDA) return how == ATTN_FA_IMPORT_ALWAYS;
    uint32_t fa = (1u << ATTN_COMPONENT_FA2) | (1u << ATTN_COMPONENT_FA3);
    return !(p->installed & fa);
}

/* One KV-cache layout serves the whole worker: a backend the layers at the
 * native dtype would run must read a layout the packed backend reads too.
 * The peer's own module failing to load is the candidate's ImportError, as
 * vLLM asks the peer's class inside the same try. */
static void attn__sel_layout_check(attn_selection *s, attn__candidate *c, const attn_check_ctx *ctx)
{
    const attn_backend *peer = NULL;
    if (attn_backend_resolve(s->platform, s->layout_peer, &peer) != ATTN_OK || !peer->desc) {
        c->reasons[c->num_reasons++] = "ImportError";
        return;
    }
    uint32_t mine = attn__desc_kv_layouts(c->backend->desc, ctx);
    uint32_t theirs = attn__desc_kv_layouts(peer->desc, ctx);
    if (!attn__kv_layouts_meet(mine, theirs))
        c->reasons[c->num_reasons++] =
            attn__sel_printf(s, "no KV cache layout in common with %s", s->layout_peer);
}

attn_status attn__sel_consider_ex(attn_selection *s, const char *name, int priority, bool validate,
                                  int *index)
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
    const attn_backend_desc *d = attn__sel_desc_of(st == ATTN_OK ? b : NULL, stable);
    if (attn__sel_needs_fa(s, d)) {
        /* The FlashAttention helpers are imported before anything else. */
        bool cuda = s->platform->kind == ATTN_PLATFORM_CUDA;
        c->detail = attn__sel_printf(s, "%s imports the FlashAttention helpers; machine %s %s",
                                     stable, s->platform->name,
                                     cuda ? "has neither fa2 nor fa3 installed"
                                          : "has no vllm.vllm_flash_attn (CUDA builds only)");
        /* ROCm's selector records a bare "ImportError". */
        bool rocm = s->platform->kind == ATTN_PLATFORM_ROCM;
        c->reasons[c->num_reasons++] =
            cuda   ? attn__fa_import_error
            : rocm ? "ImportError"
                   : "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn'";
        c->import_failed = !rocm;
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
        c->reasons[c->num_reasons++] = rocm ? "ImportError" : attn__sel_import_reason(s, stable, d);
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
        if (c->num_reasons == 0 && s->layout_peer) attn__sel_layout_check(s, c, &ctx);
    }
    if (c->num_reasons == 0 && attn__selftest_present(b)) {
        if (attn__selftest_disabled()) {
            attn__sel_note(s, "self-test skipped (ATTN_SELFTEST=0)");
        } else {
            char detail[2048];
            attn_status tst = attn__selftest(b, detail, sizeof detail);
            if (tst == ATTN_IMPORT_ERROR) {
                /* its device code does not load here (a program that does
                 * not build): an import failure like a module's, its first
                 * line the reason, the whole text (the log) the detail */
                c->detail = attn__sel_strdup(s, detail);
                c->reasons[c->num_reasons++] =
                    attn__sel_printf(s, "ImportError: %.*s", (int)strcspn(detail, "\n"), detail);
                c->import_failed = true;
            } else if (tst != ATTN_OK) {
                c->reasons[c->num_reasons++] = attn__sel_printf(s, "self-test failed: %s", detail);
            }
        }
    }
    c->valid = c->num_reasons == 0;
    return ATTN_OK;
}

attn_status attn__sel_consider(attn_selection *s, const char *name, int priority, int *index)
{
    return attn__sel_consider_ex(s, name, priority, true, index);
}
