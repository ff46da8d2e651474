/* Status names/messages come from the one table in status.h; the last
 * failure's detail text is per thread so concurrent callers never see each
 * other's messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/utf8.h"

const char *attn_status_name(attn_status s)
{
    switch (s) {
#define ATTN__STATUS_NAME(name, value, msg)                                                        \
    case ATTN_##name: return #name;
        ATTN_STATUS_TABLE(ATTN__STATUS_NAME)
#undef ATTN__STATUS_NAME
    }
    return "UNKNOWN_STATUS";
}

const char *attn_strerror(attn_status s)
{
    switch (s) {
#define ATTN__STATUS_MSG(name, value, msg)                                                         \
    case ATTN_##name: return msg;
        ATTN_STATUS_TABLE(ATTN__STATUS_MSG)
#undef ATTN__STATUS_MSG
    }
    return "unknown status";
}

static _Thread_local char attn__last_error[2048];

const char *attn_last_error(void)
{
    return attn__last_error;
}

void attn_clear_error(void)
{
    attn__last_error[0] = '\0';
}

/* Detail text is valid UTF-8 whatever it quotes: bytes of a broken or cut
 * sequence (user input, a truncated message) become '?'. */
static void attn__scrub_utf8(char *t)
{
    for (unsigned char *p = (unsigned char *)t; *p; p++) {
        if (*p < 0x80) continue;
        int n = attn__utf8_len(p, strnlen((const char *)p, 4));
        if (n == 0)
            *p = '?';
        else
            p += n - 1;
    }
}

static attn_status attn__vfail(attn_status s, const char *fmt, va_list ap)
{
    vsnprintf(attn__last_error, sizeof attn__last_error, fmt, ap);
    attn__scrub_utf8(attn__last_error);
    return s;
}

static attn_status attn__vwrap(attn_status s, const char *fmt, va_list ap)
{
    char inner[sizeof attn__last_error];
    memcpy(inner, attn__last_error, sizeof inner);
    inner[sizeof inner - 1] = '\0';
    int n = vsnprintf(attn__last_error, sizeof attn__last_error, fmt, ap);
    size_t used = n < 0 ? 0 : (size_t)n;
    if (inner[0] && used + 3 < sizeof attn__last_error) { /* ": " + inner, cut to fit */
        char *d = attn__last_error + used;
        size_t room = sizeof attn__last_error - used - 3, il = strlen(inner);
        d[0] = ':', d[1] = ' ';
        memcpy(d + 2, inner, il < room ? il : room);
        d[2 + (il < room ? il : room)] = '\0';
    }
    attn__scrub_utf8(attn__last_error);
    return s;
}

attn_status attn__fail(attn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    attn__vfail(s, fmt, ap);
    va_end(ap);
    return s;
}

attn_status attn__wrap(attn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    attn__vwrap(s, fmt, ap);
    va_end(ap);
    return s;
}

attn_status attn_set_error(attn_status s, const char *fmt, ...)
{
    if (!fmt) return attn__fail(s, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    attn__vfail(s, fmt, ap);
    va_end(ap);
    return s;
}

attn_status attn_wrap_error(attn_status s, const char *fmt, ...)
{
    if (!fmt) return s;
    va_list ap;
    va_start(ap, fmt);
    attn__vwrap(s, fmt, ap);
    va_end(ap);
    return s;
}
