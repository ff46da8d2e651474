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

/* ATTN__CHECK_NULL(arg) for public entry points */
#include "util/check.h"

#endif
