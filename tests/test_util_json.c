/* The JSON reader, string buffer and status table. */
#include "test.h"
#include "util/json.h"
#include "util/strbuf.h"

static void test_parse_ok(void)
{
    const char *t = "{\"a\": [1, 2.5, -3e2], \"b\": {\"c\": \"x\\u00e9\\n\"}, \"d\": true, "
                    "\"e\": null, \"a\": 7}";
    attn__json *v = NULL;
    char err[128];
    CHECK_OK(attn__json_parse(t, strlen(t), &v, err, sizeof err));
    CHECK(attn__json_type_of(v) == ATTN_JSON_OBJECT);
    long long i = 0;
    CHECK(attn__json_is_int(attn__json_get(v, "a"), &i) && i == 7); /* last duplicate wins */
    const attn__json *b = attn__json_get(v, "b");
    CHECK_STR(attn__json_string(attn__json_get(b, "c")), "x\xc3\xa9\n");
    CHECK(attn__json_bool(attn__json_get(v, "d")));
    CHECK(attn__json_type_of(attn__json_get(v, "e")) == ATTN_JSON_NULL);
    CHECK(attn__json_get(v, "zz") == NULL);
    attn__json_free(v);
}

static void test_parse_errors(void)
{
    const char *bad[] = {"",      "{",  "[1,]",  "{\"a\" 1}", "tru",
                         "\"abc", "01", "[1] x", "{\"a\":-}", "\"\\q\""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        attn__json *v = (attn__json *)1;
        char err[128] = "";
        CHECK_STATUS(attn__json_parse(bad[k], strlen(bad[k]), &v, err, sizeof err),
                     ATTN_PARSE_ERROR);
        CHECK(v == NULL);
        CHECK_CONTAINS(err, "line 1");
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[2001];
    memset(deep, '[', 2000);
    deep[2000] = '\0';
    attn__json *v = NULL;
    char err[128];
    CHECK_STATUS(attn__json_parse(deep, 2000, &v, err, sizeof err), ATTN_PARSE_ERROR);
    CHECK_CONTAINS(err, "too deep");
    CHECK_STATUS(attn__json_parse(NULL, 0, &v, err, sizeof err), ATTN_NULL_ARGUMENT);
}

static void test_writer(void)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "s");
    attn__jw_str(&w, "a\"b");
    attn__jw_key(&w, "l");
    attn__jw_arr_begin(&w);
    attn__jw_int(&w, 1);
    attn__jw_bool(&w, false);
    attn__jw_null(&w);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "e");
    attn__jw_arr_begin(&w);
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);
    char *s = attn__sb_take(&sb);
    CHECK_STR(s, "{\"s\":\"a\\\"b\",\"l\":[1,false,null],\"e\":[]}");
    free(s);
    attn__sb_init(&sb);
    attn__sb_py_str(&sb, "it's");
    attn__sb_putc(&sb, ' ');
    attn__sb_py_str(&sb, "plain");
    s = attn__sb_take(&sb);
    CHECK_STR(s, "\"it's\" 'plain'");
    free(s);
}

static void test_status(void)
{
    CHECK_STR(attn_status_name(ATTN_OK), "OK");
    CHECK_STR(attn_status_name(ATTN_IMPORT_ERROR), "IMPORT_ERROR");
    CHECK_STR(attn_strerror(ATTN_NO_VALID_BACKEND), "no valid attention backend found");
    CHECK_STR(attn_status_name((attn_status)999), "UNKNOWN_STATUS");
    CHECK(ATTN_INTERNAL == 24); /* pinned values */
}

int main(void)
{
    test_parse_ok();
    test_parse_errors();
    test_writer();
    test_status();
    return attn_test_finish("test_util_json");
}
