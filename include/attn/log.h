/* Logging through one function. ATTN_LOG=error|warn|info|debug (default
 * warn) sets the level once per process; a sink may replace stderr. */
#ifndef ATTN_LOG_H
#define ATTN_LOG_H

#include "attn/export.h"

ATTN_EXTERN_C_BEGIN

typedef enum attn_log_level {
    ATTN_LOG_ERROR = 0,
    ATTN_LOG_WARN = 1,
    ATTN_LOG_INFO = 2,
    ATTN_LOG_DEBUG = 3
} attn_log_level;

typedef void (*attn_log_sink)(attn_log_level level, const char *msg, void *user);

ATTN_API void attn_log_set_sink(attn_log_sink sink, void *user);
ATTN_API void attn_log_set_level(attn_log_level level);
ATTN_API attn_log_level attn_log_get_level(void);
ATTN_API void attn_log(attn_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

ATTN_EXTERN_C_END

#endif
