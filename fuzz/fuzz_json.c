/* The JSON reader: any bytes either parse into a tree every accessor can walk
 * (strings valid UTF-8 with no embedded NUL) or fail with a located error. */
#include "fuzz_common.h"
#include "util/json.h"

static void walk(const attn__json *v, int depth)
{
    attn__json_type t = attn__json_type_of(v);
    FZ_ASSERT(attn__json_type_name(t) != NULL);
    long long ll;
    switch (t) {
    case ATTN_JSON_STRING: FZ_ASSERT(fz_utf8_ok(attn__json_string(v))); break;
    case ATTN_JSON_NUMBER: (void)attn__json_number(v), (void)attn__json_is_int(v, &ll); break;
    case ATTN_JSON_BOOL: (void)attn__json_bool(v); break;
    case ATTN_JSON_ARRAY:
    case ATTN_JSON_OBJECT:
        for (size_t i = 0; i < attn__json_len(v); i++) {
            if (t == ATTN_JSON_OBJECT) {
                const char *k = attn__json_key_at(v, i);
                FZ_ASSERT(k && fz_utf8_ok(k));
                FZ_ASSERT(attn__json_get(v, k) != NULL);
            }
            walk(attn__json_at(v, i), depth + 1);
        }
        FZ_ASSERT(attn__json_at(v, attn__json_len(v)) == NULL);
        break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    attn__json *v = NULL;
    char err[256];
    err[0] = '\0';
    attn_status st = attn__json_parse((const char *)data, size, &v, err, sizeof err);
    if (st == ATTN_OK) {
        FZ_ASSERT(v != NULL);
        walk(v, 0);
        attn__json_free(v);
    } else {
        FZ_ASSERT(st == ATTN_PARSE_ERROR || st == ATTN_OUT_OF_MEMORY);
        FZ_ASSERT(strncmp(err, "line ", 5) == 0 || st == ATTN_OUT_OF_MEMORY);
    }
    return 0;
}
