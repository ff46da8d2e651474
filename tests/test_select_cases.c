/* Runs vLLM 0.32.0's own answers (tests/data/vllm-0.32.0-cases.json, made by
 * tools/vllm-parity/parity.py with vLLM itself) through the public API: open
 * the case's simulated machine, install its components, apply its settings,
 * select without the cache (the run's KV dtype included), and check the
 * backend, or the error kind and vLLM's exact message. The cases where libattn is known to differ
 * are listed with their cause in tests/data/vllm-0.32.0-known-diffs.txt; a listed case that now
 * agrees fails too, so the list only shrinks. Reads nothing outside the repository. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "test.h"
#include "util/json.h"
#include "util/strbuf.h"

static const char *str_or(const attn__json *v, const char *def)
{
    return v && attn__json_type_of(v) == ATTN_JSON_STRING ? attn__json_string(v) : def;
}

static bool bool_of(const attn__json *cfg, const char *key)
{
    const attn__json *v = attn__json_get(cfg, key);
    return v && attn__json_type_of(v) == ATTN_JSON_BOOL && attn__json_bool(v);
}

static int int_or(const attn__json *cfg, const char *key, int def)
{
    long long n;
    const attn__json *v = attn__json_get(cfg, key);
    if (v && attn__json_type_of(v) == ATTN_JSON_NUMBER && attn__json_is_int(v, &n)) return (int)n;
    return def;
}

/* Returns NULL when the case passes, else a description (static buffer). */
static const char *run_case(const attn__json *c, char *why, size_t size)
{
    const attn__json *m = attn__json_get(c, "machine");
    const char *fam = str_or(attn__json_get(m, "family"), "?");
    char machine[64];
    if (!strcmp(fam, "cuda"))
        snprintf(machine, sizeof machine, "cuda:%s", str_or(attn__json_get(m, "cc"), "?"));
    else if (!strcmp(fam, "rocm"))
        snprintf(machine, sizeof machine, "rocm:%s", str_or(attn__json_get(m, "gfx"), "?"));
    else
        snprintf(machine, sizeof machine, "%s", fam);
    attn_platform *p = NULL;
    if (attn_platform_open(machine, &p) != ATTN_OK) {
        snprintf(why, size, "cannot open machine %s: %s", machine, attn_last_error());
        return why;
    }
    attn__sb csv;
    attn__sb_init(&csv);
    const attn__json *inst = attn__json_get(m, "installed");
    for (size_t i = 0; inst && i < attn__json_len(inst); i++)
        attn__sb_printf(&csv, "%s%s", i ? "," : "", str_or(attn__json_at(inst, i), ""));
    attn_status st = attn_platform_set_installed(p, csv.data ? csv.data : "");
    attn__sb_free(&csv);
    if (st != ATTN_OK) {
        snprintf(why, size, "set_installed: %s", attn_last_error());
        attn_platform_free(p);
        return why;
    }
    const attn__json *set = attn__json_get(m, "settings");
    for (size_t i = 0; set && i < attn__json_len(set); i++) {
        char kv[128];
        snprintf(kv, sizeof kv, "%s=%s", attn__json_key_at(set, i),
                 attn__json_bool(attn__json_at(set, i)) ? "true" : "false");
        if (attn_platform_set_setting(p, kv) != ATTN_OK) {
            snprintf(why, size, "set_setting %s: %s", kv, attn_last_error());
            attn_platform_free(p);
            return why;
        }
    }
    /* Older case files spell machine switches as vLLM environment variables. */
    const attn__json *env = attn__json_get(c, "env");
    for (size_t i = 0; env && i < attn__json_len(env); i++) {
        const char *k = attn__json_key_at(env, i);
        const char *v = str_or(attn__json_at(env, i), "1");
        const char *key = !strcmp(k, "VLLM_ROCM_USE_AITER")       ? "rocm_use_aiter"
                          : !strcmp(k, "VLLM_ROCM_USE_AITER_MHA") ? "rocm_use_aiter_mha"
                          : !strcmp(k, "VLLM_ROCM_USE_AITER_MLA") ? "rocm_use_aiter_mla"
                          : !strcmp(k, "VLLM_BATCH_INVARIANT")    ? "batch_invariant"
                                                                  : NULL;
        if (key) {
            char kv[128];
            bool on = !strcmp(v, "1") || !strcasecmp(v, "true");
            snprintf(kv, sizeof kv, "%s=%s", key, on ? "true" : "false");
            attn_platform_set_setting(p, kv);
        }
    }

    const attn__json *cj = attn__json_get(c, "config");
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = int_or(cj, "head_size", 128);
    attn_dtype_parse(str_or(attn__json_get(cj, "dtype"), "bf16"), &cfg.dtype);
    const attn__json *kv = attn__json_get(cj, "kv_cache_dtype");
    const attn__json *ex = attn__json_get(c, "expect");
    const char *req = str_or(attn__json_get(c, "backend"), NULL);
    /* The run's cache dtype goes through vLLM's CacheConfig first: a string
     * that is no CacheDType is its validation error. */
    const char *run = str_or(attn__json_get(cj, "run_kv_cache_dtype"), NULL);
    if (run && attn_selector_config_set(&cfg, "run_kv_cache_dtype", run) != ATTN_OK) {
        const char *want = str_or(attn__json_get(ex, "message"), "");
        const char *err = str_or(attn__json_get(ex, "error"), "");
        attn_platform_free(p);
        if (strcmp(err, "invalid-config") || strcmp(attn_last_error(), want)) {
            snprintf(why, size, "run_kv_cache_dtype refused (%s), vLLM: %s %s", attn_last_error(),
                     err, want);
            return why;
        }
        return NULL;
    }
    /* vLLM reads the requested name before it asserts the cache dtype. */
    bool unknown_name = req && strcasecmp(req, "auto") && !attn_registry_contains(req);
    if (kv && attn__json_type_of(kv) == ATTN_JSON_STRING) {
        /* A string that is no CacheDType is refused with vLLM's assertion
         * text before anything is selected. */
        if (attn_selector_config_set(&cfg, "kv_cache_dtype", attn__json_string(kv)) != ATTN_OK &&
            !unknown_name) {
            const char *want = str_or(attn__json_get(ex, "message"), "");
            const char *err = str_or(attn__json_get(ex, "error"), "");
            attn_platform_free(p);
            if (strcmp(err, "invalid-config") || strcmp(attn_last_error(), want)) {
                snprintf(why, size, "kv_cache_dtype refused (%s), vLLM: %s %s", attn_last_error(),
                         err, want);
                return why;
            }
            return NULL;
        }
    } else {
        cfg.kv_cache_dtype = ATTN_KV_NONE;
    }
    cfg.block_size = int_or(cj, "block_size", 0);
    cfg.use_mla = bool_of(cj, "use_mla");
    cfg.has_sink = bool_of(cj, "has_sink");
    cfg.use_sparse = bool_of(cj, "use_sparse");
    cfg.use_mm_prefix = bool_of(cj, "use_mm_prefix");
    cfg.use_per_head_quant_scales = bool_of(cj, "use_per_head_quant_scales");
    attn_attn_type_parse(str_or(attn__json_get(cj, "attn_type"), "decoder"), &cfg.attn_type);
    cfg.has_sliding_window = bool_of(cj, "has_sliding_window");
    cfg.use_non_causal = bool_of(cj, "use_non_causal");
    cfg.use_batch_invariant = bool_of(cj, "use_batch_invariant");
    cfg.num_heads = int_or(cj, "num_heads", 0);
    cfg.use_kv_connector = bool_of(cj, "use_kv_connector");
    cfg.use_pcp = bool_of(cj, "use_pcp");
    cfg.use_dcp = bool_of(cj, "use_dcp");
    cfg.use_adaptive_verification = bool_of(cj, "use_adaptive_verification");
    cfg.use_rswa = bool_of(cj, "use_rswa");

    const char *backend = str_or(attn__json_get(c, "backend"), NULL);
    attn_selection *s = NULL;
    st = attn_select_uncached(p, backend, &cfg, &s);
    const char *want_sel = str_or(attn__json_get(ex, "selected"), NULL);
    const char *want_err = str_or(attn__json_get(ex, "error"), NULL);
    const char *got = s ? attn_selection_backend(s) : NULL;
    const char *msg = s ? attn_selection_message(s) : attn_last_error();
    const char *result = NULL;
    if (!s) {
        snprintf(why, size, "no selection object: %s", attn_last_error());
        result = why;
    } else if (want_sel) {
        if (st != ATTN_OK || !got || strcmp(got, want_sel) != 0) {
            snprintf(why, size, "want %s, got %s (%s)", want_sel, got ? got : "none",
                     msg ? msg : "");
            result = why;
        }
    } else if (want_err) {
        const char *kind = attn_select_error_name(attn_selection_error(s));
        if (st == ATTN_OK || strcmp(kind, want_err) != 0) {
            snprintf(why, size, "want error %s, got %s / %s (%s)", want_err,
                     st == ATTN_OK ? "success" : kind, got ? got : "none", msg ? msg : "");
            result = why;
        }
    }
    /* vLLM's error message, byte for byte. */
    const char *want_msg = str_or(attn__json_get(ex, "message"), NULL);
    if (!result && want_err && want_msg && (!msg || strcmp(msg, want_msg) != 0)) {
        snprintf(why, size, "message differs: want \"%s\", got \"%s\"", want_msg,
                 msg ? msg : "(none)");
        result = why;
    }
    const attn__json *frags = attn__json_get(ex, "contains");
    for (size_t i = 0; !result && frags && i < attn__json_len(frags); i++) {
        const char *f = str_or(attn__json_at(frags, i), "");
        if (!msg || !strstr(msg, f)) {
            snprintf(why, size, "message lacks \"%s\": %s", f, msg ? msg : "(none)");
            result = why;
        }
    }
    const attn__json *pre = attn__json_get(ex, "precluded_warning");
    if (!result && pre) {
        attn__sb names;
        attn__sb_init(&names);
        for (size_t i = 0; i < attn__json_len(pre); i++)
            attn__sb_printf(&names, "%s%s", i ? ", " : "", str_or(attn__json_at(pre, i), ""));
        char frag[512];
        snprintf(frag, sizeof frag, "precluded higher-priority backend(s) %s. Using %s instead",
                 names.data ? names.data : "", got ? got : "?");
        attn__sb_free(&names);
        bool found = false;
        for (int i = 0; i < attn_selection_num_warnings(s); i++)
            found = found || strstr(attn_selection_warning(s, i), frag) != NULL;
        if (!found) {
            snprintf(why, size, "no warning containing \"%s\" (%d warnings)", frag,
                     attn_selection_num_warnings(s));
            result = why;
        }
    }
    attn_selection_free(s);
    attn_platform_free(p);
    return result;
}

static bool listed(const char *known, const char *id)
{
    size_t n = strlen(id);
    for (const char *q = known; q && (q = strstr(q, id)) != NULL; q += n)
        if ((q == known || q[-1] == '\n') && (q[n] == ' ' || q[n] == '\t')) return true;
    return false;
}

int main(void)
{
    char path[4096], kpath[4096];
    snprintf(path, sizeof path, "%s/tests/data/vllm-0.32.0-cases.json", attn_test_source_dir());
    snprintf(kpath, sizeof kpath, "%s/tests/data/vllm-0.32.0-known-diffs.txt",
             attn_test_source_dir());
    char *text = NULL, *known = NULL;
    size_t len = 0, klen = 0;
    if (attn__read_file(path, &text, &len) != ATTN_OK) {
        fprintf(stderr, "cannot read %s: %s\n", path, attn_last_error());
        return 1;
    }
    if (attn__read_file(kpath, &known, &klen) != ATTN_OK) known = NULL;
    attn__json *root = NULL;
    char err[256];
    CHECK_OK(attn__json_parse(text, len, &root, err, sizeof err));
    free(text);
    if (!root) return attn_test_finish("test_select_cases");
    const attn__json *cases = attn__json_get(root, "cases");
    size_t n = attn__json_len(cases);
    int passed = 0, known_diff = 0;
    for (size_t i = 0; i < n; i++) {
        const attn__json *c = attn__json_at(cases, i);
        const char *id = str_or(attn__json_get(c, "id"), "?");
        char why[4096];
        const char *fail = run_case(c, why, sizeof why);
        if (listed(known, id)) {
            CHECK_MSG(fail != NULL, "case %s agrees now: drop it from the known differences", id);
            known_diff++;
            continue;
        }
        CHECK_MSG(fail == NULL, "case %s: %s", id, fail ? fail : "");
        if (!fail) passed++;
    }
    printf("vLLM 0.32.0 cases: %d/%zu agree, %d known differences\n", passed, n, known_diff);
    CHECK(n >= 1000);
    free(known);
    attn__json_free(root);
    return attn_test_finish("test_select_cases");
}
