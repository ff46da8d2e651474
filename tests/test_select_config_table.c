/* The selector-config field table (attn/config.h, src/util/config_fields.h)
 * is the one list of fields: walking it proves every field takes part in
 * equality, the hash, vLLM's repr (all but num_heads and run_kv_cache_dtype,
 * which vLLM passes beside the config), the selection JSON, the selection
 * cache key, attn_selector_config_set and `attn select`'s options; and that
 * the table covers the whole struct after its struct_size. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/abi.h"
#include "test.h"
#include "util/config_fields.h"
#include "util/json.h"

/* A value other than the default for each type, as text. */
static const char *other_value(const attn_config_field *f)
{
    switch (f->type) {
    case ATTN_FIELD_INT: return "64";
    case ATTN_FIELD_OPT_INT: return "32";
    case ATTN_FIELD_BOOL: return "true";
    case ATTN_FIELD_DTYPE: return "fp32";
    case ATTN_FIELD_KV_DTYPE: return "fp8";
    case ATTN_FIELD_ATTN_TYPE: return "encoder";
    case ATTN_FIELD_RUN_KV_DTYPE: return "fp8";
    }
    return NULL;
}

static attn__json *config_json(const attn_selector_config *c)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__selector_config_json(&w, c);
    attn__json *j = NULL;
    char err[128];
    CHECK_OK(attn__json_parse(sb.data, sb.len, &j, err, sizeof err));
    attn__sb_free(&sb);
    return j;
}

/* The member's value as text, for comparing two JSON objects key by key. */
static void json_text(const attn__json *v, char *buf, size_t size)
{
    long long n;
    switch (attn__json_type_of(v)) {
    case ATTN_JSON_NULL: snprintf(buf, size, "null"); break;
    case ATTN_JSON_BOOL: snprintf(buf, size, "%s", attn__json_bool(v) ? "true" : "false"); break;
    case ATTN_JSON_STRING: snprintf(buf, size, "\"%s\"", attn__json_string(v)); break;
    default:
        if (attn__json_is_int(v, &n))
            snprintf(buf, size, "%lld", n);
        else
            snprintf(buf, size, "?");
    }
}

/* Exactly the member named key differs between a and b (both objects with
 * the same keys in the same order). */
static void check_only_key_differs(const attn__json *a, const attn__json *b, const char *key)
{
    CHECK(attn__json_len(a) == attn__json_len(b));
    for (size_t i = 0; i < attn__json_len(a) && i < attn__json_len(b); i++) {
        char ta[96], tb[96];
        CHECK_STR(attn__json_key_at(a, i), attn__json_key_at(b, i));
        json_text(attn__json_at(a, i), ta, sizeof ta);
        json_text(attn__json_at(b, i), tb, sizeof tb);
        bool same = !strcmp(ta, tb);
        CHECK_MSG(same == (strcmp(attn__json_key_at(a, i), key) != 0), "%s: %s vs %s (set %s)",
                  attn__json_key_at(a, i), ta, tb, key);
    }
}

static void test_each_field(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    int n = attn_selector_config_num_fields();
    CHECK(n == attn__config_num_rows && n == 20);
    attn_selector_config base;
    attn_selector_config_init(&base);
    base.head_size = 128;
    /* Stated, so that a selection (which records an unset run dtype as the
     * layer's) differs from base in kv_cache_dtype alone. */
    base.run_kv_cache_dtype = ATTN_KV_AUTO;
    attn__json *jbase = config_json(&base);
    CHECK(jbase && attn__json_len(jbase) == (size_t)n);
    char rbase[1024];
    attn_selector_config_repr(&base, rbase, sizeof rbase);
    const attn_selection *sbase = NULL;
    attn_select(p, NULL, &base, &sbase);
    for (int i = 0; i < n; i++) {
        const attn_config_field *f = attn_selector_config_field(i);
        CHECK(f && f == attn_selector_config_field_find(f->name));
        attn_selector_config alt = base;
        CHECK_OK(attn_selector_config_set(&alt, f->name, other_value(f)));
        CHECK_MSG(!attn_selector_config_equal(&base, &alt), "%s: equal", f->name);
        CHECK_MSG(attn_selector_config_hash(&base) != attn_selector_config_hash(&alt), "%s: hash",
                  f->name);
        char ralt[1024];
        attn_selector_config_repr(&alt, ralt, sizeof ralt);
        char key[2][64];
        snprintf(key[0], sizeof key[0], "(%s=", f->name);
        snprintf(key[1], sizeof key[1], ", %s=", f->name);
        bool in_repr = attn__config_rows[i].repr_pos >= 0;
        CHECK_MSG((strstr(rbase, key[0]) || strstr(rbase, key[1])) == in_repr, "%s: in repr",
                  f->name);
        CHECK(in_repr ==
              (strcmp(f->name, "num_heads") != 0 && strcmp(f->name, "run_kv_cache_dtype") != 0));
        CHECK_MSG((strcmp(rbase, ralt) != 0) == in_repr, "%s: repr", f->name);
        attn__json *jalt = config_json(&alt);
        if (jbase && jalt) check_only_key_differs(jbase, jalt, f->name);
        attn__json_free(jalt);
        /* The cache key: a different field value is a different entry. */
        const attn_selection *salt = NULL, *again = NULL;
        attn_select(p, NULL, &alt, &salt);
        attn_select(p, NULL, &alt, &again);
        CHECK_MSG(salt && salt != sbase && salt == again, "%s: cache key", f->name);
        /* A bad value is refused and changes nothing. */
        attn_selector_config bad = alt;
        CHECK_STATUS(attn_selector_config_set(&bad, f->name, "not-a-value"), ATTN_INVALID_ARGUMENT);
        CHECK_MSG(attn_selector_config_equal(&bad, &alt), "%s: bad value changed it", f->name);
    }
    attn__json_free(jbase);
    attn_platform_free(p);
}

/* Every byte of the struct after struct_size belongs to a row except
 * alignment padding: a field missing from the table would leave a gap of
 * its size. */
static int cmp_off(const void *a, const void *b)
{
    size_t x = (*(const attn_config_field *const *)a)->offset;
    size_t y = (*(const attn_config_field *const *)b)->offset;
    return x < y ? -1 : x > y;
}

static void test_covers_struct(void)
{
    int n = attn_selector_config_num_fields();
    const attn_config_field *rows[64];
    for (int i = 0; i < n && i < 64; i++)
        rows[i] = attn_selector_config_field(i);
    qsort(rows, (size_t)n, sizeof rows[0], cmp_off);
    size_t end = ATTN_STRUCT_END(attn_selector_config, struct_size);
    for (int i = 0; i < n; i++) {
        size_t size = rows[i]->type == ATTN_FIELD_BOOL ? sizeof(bool) : sizeof(int);
        CHECK_MSG(rows[i]->offset >= end, "%s overlaps", rows[i]->name);
        /* Padding only ever fills up to the next int. */
        CHECK_MSG(rows[i]->offset - end < (size == 1 ? 1 : sizeof(int)), "gap before %s",
                  rows[i]->name);
        end = rows[i]->offset + size;
    }
    CHECK(sizeof(attn_selector_config) - end < sizeof(int));
}

static void test_set_texts(void)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    CHECK_OK(attn_selector_config_set(&c, "use_mla", "True"));
    CHECK(c.use_mla);
    CHECK_OK(attn_selector_config_set(&c, "use_mla", "0"));
    CHECK(!c.use_mla);
    CHECK_OK(attn_selector_config_set(&c, "kv_cache_dtype", NULL));
    CHECK(c.kv_cache_dtype == ATTN_KV_NONE);
    CHECK_OK(attn_selector_config_set(&c, "block_size", "16"));
    CHECK(c.block_size == 16);
    CHECK_OK(attn_selector_config_set(&c, "block_size", NULL));
    CHECK(c.block_size == 0);
    CHECK_STATUS(attn_selector_config_set(&c, "head_size", NULL), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(), "head_size cannot be None");
    CHECK_STATUS(attn_selector_config_set(&c, "head_size", "-1"), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(), "head_size: expected an integer in [0, 1048576], got '-1'");
    CHECK_STATUS(attn_selector_config_set(&c, "use_mla", "yes"), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(), "use_mla: expected true or false, got 'yes'");
    CHECK_STATUS(attn_selector_config_set(&c, "kv_cache_dtype", "fp9"), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "Invalid kv_cache_dtype: fp9. Valid values are: ('auto'");
    CHECK_STATUS(attn_selector_config_set(&c, "nope", "1"), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(), "unknown selector config field 'nope'");
    CHECK_STATUS(attn_selector_config_set(NULL, "use_mla", "1"), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_selector_config_set(&c, NULL, "1"), ATTN_NULL_ARGUMENT);
    CHECK(attn_selector_config_field(-1) == NULL);
    CHECK(attn_selector_config_field(attn_selector_config_num_fields()) == NULL);
    CHECK(attn_selector_config_field_find(NULL) == NULL);
}

/* `attn select --json FLAG [VALUE]` changes exactly that field. */
static void test_cli(void)
{
    const char *bin = getenv("ATTN_BIN");
    if (!bin) {
        printf("SKIP the CLI part: ATTN_BIN not set\n");
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "ATTN_LOG=error ATTN_SELFTEST=0 '%s' select --machine h100 --json "
             "--run-kv-cache-dtype auto",
             bin);
    for (int i = -1; i < attn_selector_config_num_fields(); i++) {
        const attn_config_field *f = i < 0 ? NULL : attn_selector_config_field(i);
        char line[1200];
        snprintf(line, sizeof line, "%s %s %s", cmd, f ? f->cli_flag : "",
                 f && f->cli_arg ? other_value(f) : "");
        FILE *pp = popen(line, "r");
        CHECK(pp != NULL);
        if (!pp) return;
        attn__sb sb;
        attn__sb_init(&sb);
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, pp)) > 0)
            attn__sb_putn(&sb, buf, k);
        pclose(pp);
        attn__json *j = NULL;
        char err[128];
        CHECK_MSG(sb.data && attn__json_parse(sb.data, sb.len, &j, err, sizeof err) == ATTN_OK,
                  "%s", line);
        static attn__json *jbase;
        const attn__json *cfg = j ? attn__json_get(j, "config") : NULL;
        if (i < 0) {
            jbase = j;
        } else {
            if (jbase && cfg) check_only_key_differs(attn__json_get(jbase, "config"), cfg, f->name);
            attn__json_free(j);
        }
        attn__sb_free(&sb);
        if (i == attn_selector_config_num_fields() - 1) attn__json_free(jbase);
    }
}

int main(void)
{
    test_each_field();
    test_covers_struct();
    test_set_texts();
    test_cli();
    return attn_test_finish("test_select_config_table");
}
