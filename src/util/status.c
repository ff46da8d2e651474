/* Status names/messages come from the one table in status.h; the last
 * failure's detail text is per thread so concurrent callers never see each
 * other's messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

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

attn_status attn__fail(attn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(attn__last_error, sizeof attn__last_error, fmt, ap);
    va_end(ap);
    return s;
}

attn_status attn__wrap(attn_status s, const char *fmt, ...)
{
    char inner[sizeof attn__last_error];
    memcpy(inner, attn__last_error, sizeof inner);
    inner[sizeof inner - 1] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(attn__last_error, sizeof attn__last_error, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n;
    if (inner[0] && used < sizeof attn__last_error - 1)
        snprintf(attn__last_error + used, sizeof attn__last_error - used, ": %s", inner);
    return s;
}
