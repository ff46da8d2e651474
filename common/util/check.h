/* Guard for entry points, shared by libattn, the simulation library and the
 * tools: a NULL pointer argument is a clear error (ATTN_NULL_ARGUMENT with
 * the function and argument named), reported through the public status API. */
#ifndef ATTN_UTIL_CHECK_H
#define ATTN_UTIL_CHECK_H

#include "attn/status.h"

#define ATTN__CHECK_NULL(p)                                                                        \
    do {                                                                                           \
        if ((p) == NULL)                                                                           \
            return attn_set_error(ATTN_NULL_ARGUMENT, "%s: argument '%s' is NULL", __func__, #p);  \
    } while (0)

#endif
