/* Every fact of a backend is in its descriptor, and what `attn backends`
 * says is what the selector does.
 *
 * 1. For every catalog machine, every backend `attn backends --machine M
 *    --json` describes and every yes/no check of the validation table, the
 *    JSON's "on_machine" answer equals the selector's: the check's reason is
 *    absent from attn_backend_validate's list for the CLI's default config
 *    with the check's inputs set, and, where the machine validates an
 *    explicit request and the backend resolves, from the explicit
 *    selection's reasons (accepted when it is chosen). The static statement
 *    ("capabilities") is the same table's. The reported contradiction
 *    (FLASH_ATTN's multimodal prefix on b200) is checked by name.
 * 2. No fact is kept by name: a copy of every catalog descriptor (as a
 *    module or plugin registering under that name would hold it) gives the
 *    same reasons as the catalog's own on every machine, for every flag.
 * 3. The counts are derived: the catalog's names are vLLM's enum (as the
 *    registry lists it) plus libattn's own, no name twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "test.h"
#include "util/json.h"
#include "util/strbuf.h"

static attn__json *backends_json(const char *machine)
{
    const char *bin = getenv("ATTN_BIN");
    if (!bin) return NULL;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ATTN_LOG=error ATTN_PLUGIN_PATH= '%s' backends --machine %s --json",
             bin, machine);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    attn__sb sb;
    attn__sb_init(&sb);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        attn__sb_putn(&sb, buf, n);
    int rc = pclose(f);
    attn__json *j = NULL;
    char err[256];
    if (rc != 0 || !sb.data || attn__json_parse(sb.data, sb.len, &j, err, sizeof err) != ATTN_OK)
        j = NULL;
    attn__sb_free(&sb);
    return j;
}

/* The CLI's default config with the inputs of check i set. */
static void config_for(int i, attn_selector_config *cfg)
{
    attn_selector_config_init(cfg);
    cfg->head_size = 128;
    for (int j = 0; attn_backend_check_asks(i, j); j++)
        CHECK_OK(attn_selector_config_set(cfg, attn_backend_check_asks(i, j), "true"));
}

static bool has_reason(char reasons[][ATTN_REASON_MAX], int n, const char *r)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(reasons[k], r)) return true;
    return false;
}

static int explicit_compared;

/* The explicit selection's answer for check i: 1 accepted, 0 refused, -1
 * when it says nothing about the check (no validation on this platform, or
 * the backend's code does not load). */
static int explicit_answer(const attn_platform *p, const char *name, int i,
                           const attn_selector_config *cfg)
{
    if (attn_platform_get_kind(p) == ATTN_PLATFORM_XPU) return -1; /* XPU does not validate */
    const attn_backend *b = NULL;
    if (attn_backend_resolve(p, name, &b) != ATTN_OK) return -1;
    attn_selection *s = NULL;
    attn_status st = attn_select_uncached(p, name, cfg, &s);
    int ans = -1;
    if (s && st == ATTN_OK) {
        ans = 1;
    } else if (s && attn_selection_error(s) == ATTN_SELECT_EXPLICIT_INVALID) {
        attn_candidate_info info;
        const char *r0 = attn_selection_reason(s, 0, 0);
        bool import_only =
            r0 && (!strncmp(r0, "ImportError", 11) || !strncmp(r0, "ModuleNotFoundError", 19));
        if (!import_only && attn_selection_candidate(s, 0, &info) == ATTN_OK) {
            ans = 1;
            for (int k = 0; k < info.num_reasons; k++)
                if (!strcmp(attn_selection_reason(s, 0, k), attn_backend_check_reason(i))) ans = 0;
        }
    }
    attn_selection_free(s);
    if (ans >= 0) explicit_compared++;
    return ans;
}

static int compared;

static void check_backend(const attn_platform *p, const attn__json *jb)
{
    const char *name = attn__json_string(attn__json_get(jb, "name"));
    const attn__json *caps = attn__json_get(jb, "capabilities");
    const attn__json *on = attn__json_get(jb, "on_machine");
    if (!caps || attn__json_type_of(caps) != ATTN_JSON_OBJECT) return;
    const attn_backend *b = NULL;
    if (attn_backend_resolve(p, name, &b) != ATTN_OK) b = attn_backend_catalog_builtin(name);
    CHECK_MSG(b && b->desc, "%s: the JSON describes a backend the API cannot find", name);
    if (!b || !b->desc) return;
    for (int i = 0; i < attn_backend_check_count(); i++) {
        if (!attn_backend_check_is_flag(i)) continue;
        const char *key = attn_backend_check_key(i);
        const attn__json *jv = attn__json_get(on, key);
        CHECK_MSG(jv && attn__json_type_of(jv) == ATTN_JSON_BOOL, "%s on %s: no on_machine.%s",
                  name, attn_platform_name(p), key);
        if (!jv || attn__json_type_of(jv) != ATTN_JSON_BOOL) continue;
        const attn__json *js = attn__json_get(caps, key);
        attn_fact st = attn_backend_check_static(b->desc, i);
        const char *want = st == ATTN_FACT_YES ? "yes" : st == ATTN_FACT_NO ? "no" : "yes *";
        CHECK_MSG(js && !strcmp(attn__json_string(js) ? attn__json_string(js) : "", want),
                  "%s: capabilities.%s is not '%s'", name, key, want);
        attn_selector_config cfg;
        config_for(i, &cfg);
        char reasons[ATTN_REASONS_MAX][ATTN_REASON_MAX];
        int n = attn_backend_validate(b->desc, p, &cfg, reasons, ATTN_REASONS_MAX);
        CHECK(n >= 0);
        bool validator = !has_reason(reasons, n, attn_backend_check_reason(i));
        bool json = attn__json_bool(jv);
        CHECK_MSG(json == validator, "%s on %s: JSON says %s %s, the validator %s", name,
                  attn_platform_name(p), key, json ? "yes" : "no", validator ? "yes" : "no");
        /* A static yes or no is the answer on every machine. */
        if (st != ATTN_FACT_REFINED)
            CHECK_MSG(json == (st == ATTN_FACT_YES), "%s on %s: %s is '%s' but answers %s", name,
                      attn_platform_name(p), key, want, json ? "yes" : "no");
        int ex = explicit_answer(p, name, i, &cfg);
        if (ex >= 0)
            CHECK_MSG(json == (ex == 1), "%s on %s: JSON says %s %s, the selector %s", name,
                      attn_platform_name(p), key, json ? "yes" : "no", ex ? "yes" : "no");
        compared++;
    }
}

static void test_json_vs_selector(void)
{
    int machines = 0;
    for (int m = 0; m < attn_catalog_count(); m++) {
        const char *mname = attn_catalog_name(m);
        attn__json *j = backends_json(mname);
        CHECK_MSG(j, "attn backends --machine %s --json failed", mname);
        attn_platform *p = NULL;
        CHECK_OK(attn_platform_open(mname, &p));
        if (!j || !p) {
            attn__json_free(j);
            attn_platform_free(p);
            continue;
        }
        machines++;
        const attn__json *list = attn__json_get(j, "backends");
        for (size_t i = 0; i < attn__json_len(list); i++)
            check_backend(p, attn__json_at(list, i));
        attn__json_free(j);
        attn_platform_free(p);
    }
    CHECK(machines == attn_catalog_count());
    /* every catalog descriptor, every flag, every machine was compared */
    int descs = 0, flags = 0;
    for (int i = 0; i < attn_backend_catalog_count(); i++)
        descs += attn_backend_catalog_builtin(attn_backend_catalog_name(i)) != NULL;
    for (int i = 0; i < attn_backend_check_count(); i++)
        flags += attn_backend_check_is_flag(i);
    CHECK_MSG(compared == descs * flags * machines, "compared %d, expected %d x %d x %d", compared,
              descs, flags, machines);
    CHECK_MSG(explicit_compared > compared / 3, "only %d explicit selections compared",
              explicit_compared);
    printf("JSON = selector: %d backend x flag x machine answers (%d through explicit "
           "selections)\n",
           compared, explicit_compared);
}

/* The contradiction that was reported: FLASH_ATTN takes a multimodal prefix
 * where FA4 runs (b200), and `attn backends` says so. */
static void test_fa_mm_prefix(void)
{
    attn__json *j = backends_json("b200");
    const attn__json *list = attn__json_get(j, "backends");
    bool seen = false;
    for (size_t i = 0; i < attn__json_len(list); i++) {
        const attn__json *b = attn__json_at(list, i);
        if (strcmp(attn__json_string(attn__json_get(b, "name")), "FLASH_ATTN")) continue;
        seen = true;
        CHECK_STR(attn__json_string(attn__json_get(attn__json_get(b, "capabilities"), "mm_prefix")),
                  "yes *");
        CHECK(attn__json_bool(attn__json_get(attn__json_get(b, "on_machine"), "mm_prefix")));
    }
    CHECK(seen);
    attn__json_free(j);
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("b200", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.use_mm_prefix = true;
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, "FLASH_ATTN", &cfg, &s));
    CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
    attn_selection_free(s);
    attn_platform_free(p);
    /* without FA4 (a100) it is refused for the prefix */
    CHECK_OK(attn_platform_open("a100", &p));
    CHECK_STATUS(attn_select_uncached(p, "FLASH_ATTN", &cfg, &s), ATTN_BACKEND_INVALID);
    CHECK_CONTAINS(attn_selection_message(s),
                   "'partial multimodal token full attention not supported'");
    attn_selection_free(s);
    attn_platform_free(p);
}

/* Reasons of d and of a copy of it at another address agree for every
 * flag's config on p. */
static void check_copy(const attn_backend_desc *d, const attn_platform *p)
{
    attn_backend_desc copy = *d;
    for (int i = 0; i < attn_backend_check_count(); i++) {
        if (!attn_backend_check_is_flag(i)) continue;
        for (int mla = 0; mla < 2; mla++) {
            attn_selector_config cfg;
            config_for(i, &cfg);
            cfg.use_mla = cfg.use_mla || mla;
            cfg.use_sparse = d->is_sparse;
            char a[ATTN_REASONS_MAX][ATTN_REASON_MAX], b[ATTN_REASONS_MAX][ATTN_REASON_MAX];
            int na = attn_backend_validate(d, p, &cfg, a, ATTN_REASONS_MAX);
            int nb = attn_backend_validate(&copy, p, &cfg, b, ATTN_REASONS_MAX);
            bool same = na == nb;
            for (int k = 0; same && k < na && k < ATTN_REASONS_MAX; k++)
                same = !strcmp(a[k], b[k]);
            CHECK_MSG(same, "%s on %s, %s: a copy of the descriptor answers differently", d->name,
                      attn_platform_name(p), attn_backend_check_key(i));
        }
    }
}

static void test_no_fact_by_name(void)
{
    for (int m = 0; m < attn_catalog_count(); m++) {
        attn_platform *p = NULL;
        if (attn_platform_open(attn_catalog_name(m), &p) != ATTN_OK) continue;
        for (int i = 0; i < attn__catalog_count(); i++) {
            const attn__catalog_entry *e = attn__catalog_at(i);
            const attn_backend *b = e->builtin ? e->builtin() : NULL;
            if (b && b->desc) check_copy(b->desc, p);
        }
        attn_platform_free(p);
    }
}

/* The registry lists the catalog first, in its order, without duplicates;
 * every catalog name is unique and upper case. */
static void test_counts(void)
{
    int n = attn_backend_catalog_count();
    CHECK(n > 0 && n == attn__catalog_count());
    CHECK(attn_registry_count() >= n);
    for (int i = 0; i < n; i++) {
        const char *name = attn_backend_catalog_name(i);
        CHECK_STR(attn_registry_name(i), name);
        for (const char *c = name; *c; c++)
            CHECK_MSG((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_',
                      "catalog name %s", name);
        for (int k = 0; k < i; k++)
            CHECK_MSG(strcmp(attn_backend_catalog_name(k), name), "%s listed twice", name);
    }
    CHECK(attn_backend_catalog_name(n) == NULL && attn_backend_catalog_name(-1) == NULL);
}

int main(void)
{
    setenv("ATTN_SELFTEST", "0", 1);
    if (!getenv("ATTN_BIN")) attn_test_skip("select_facts", "ATTN_BIN not set (run through ctest)");
    test_counts();
    test_fa_mm_prefix();
    test_no_fact_by_name();
    test_json_vs_selector();
    return attn_test_finish("select_facts");
}
