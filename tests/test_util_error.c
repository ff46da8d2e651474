/* attn_set_error / attn_wrap_error: the public way for code above the
 * library to report a failure exactly as libattn's own do. */
#include "test.h"

int main(void)
{
    attn_clear_error();
    CHECK_STR(attn_last_error(), "");
    CHECK(attn_set_error(ATTN_PARSE_ERROR, "line %d: bad '%s'", 3, "x") == ATTN_PARSE_ERROR);
    CHECK_STR(attn_last_error(), "line 3: bad 'x'");
    CHECK(attn_wrap_error(ATTN_IO_ERROR, "reading '%s'", "a.json") == ATTN_IO_ERROR);
    CHECK_STR(attn_last_error(), "reading 'a.json': line 3: bad 'x'");
    /* nothing to wrap: the context alone */
    attn_clear_error();
    CHECK(attn_wrap_error(ATTN_NOT_FOUND, "model %s", "m") == ATTN_NOT_FOUND);
    CHECK_STR(attn_last_error(), "model m");
    /* detail text stays valid UTF-8 whatever it quotes */
    attn_set_error(ATTN_INVALID_ARGUMENT, "name \xff\xfe end");
    CHECK_STR(attn_last_error(), "name ?? end");
    /* a long detail is cut to the buffer, never overflowing it */
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    attn_set_error(ATTN_INVALID_ARGUMENT, "%s", big);
    CHECK(strlen(attn_last_error()) < sizeof big - 1 && strlen(attn_last_error()) > 1000);
    attn_wrap_error(ATTN_INVALID_ARGUMENT, "ctx");
    CHECK(strncmp(attn_last_error(), "ctx: aaa", 8) == 0);
    return attn_test_finish("test_util_error");
}
