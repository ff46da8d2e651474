/* Internal error helpers: set the per-thread detail and return the status. */
#ifndef ATTN_UTIL_ERROR_H
#define ATTN_UTIL_ERROR_H

#include "attn/status.h"

attn_status attn__fail(attn_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Wraps the current detail in context: "<fmt...>: <previous detail>". The
 * previous detail is copied before formatting (it lives in the buffer being
 * written), so every wrap site goes through here, never attn__fail with
 * attn_last_error() as an argument. An empty previous detail adds nothing. */
attn_status attn__wrap(attn_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Guard for public entry points: NULL pointer arguments are a clear error. */
#define ATTN__CHECK_NULL(p)                                                                        \
    do {                                                                                           \
        if ((p) == NULL)                                                                           \
            return attn__fail(ATTN_NULL_ARGUMENT, "%s: argument '%s' is NULL", __func__, #p);      \
    } while (0)

#endif
