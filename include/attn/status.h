/* Status codes: one table (X-macro) produces the enum, attn_status_name()
 * and attn_strerror(). Values are pinned: never renumber a released code.
 * Detail text for the last failure is kept per thread (attn_last_error). */
#ifndef ATTN_STATUS_H
#define ATTN_STATUS_H

#include "attn/export.h"

ATTN_EXTERN_C_BEGIN

/* X(NAME, value, message) */
#define ATTN_STATUS_TABLE(X)                                                                       \
    X(OK, 0, "success")                                                                            \
    X(INVALID_ARGUMENT, 1, "invalid argument")                                                     \
    X(NULL_ARGUMENT, 2, "required argument is NULL")                                               \
    X(OUT_OF_MEMORY, 3, "out of memory")                                                           \
    X(NOT_FOUND, 4, "not found")                                                                   \
    X(UNKNOWN_BACKEND, 5, "unknown attention backend")                                             \
    X(BACKEND_INVALID, 6, "selected backend is not valid for this configuration")                  \
    X(NO_VALID_BACKEND, 7, "no valid attention backend found")                                     \
    X(NOT_REGISTERED, 8, "backend must be registered before use")                                  \
    X(IMPORT_ERROR, 9, "backend code could not be loaded")                                         \
    X(ABI_MISMATCH, 10, "ABI version mismatch")                                                    \
    X(NOT_IMPLEMENTED, 11, "not implemented")                                                      \
    X(UNSUPPORTED, 12, "operation not supported by this backend")                                  \
    X(WRONG_ENTRY_POINT, 13, "wrong entry point for this backend")                                 \
    X(PARSE_ERROR, 14, "malformed input")                                                          \
    X(IO_ERROR, 15, "input/output error")                                                          \
    X(BAD_METADATA, 16, "inconsistent attention metadata")                                         \
    X(OUT_OF_BLOCKS, 17, "KV cache block pool exhausted")                                          \
    X(PLATFORM_UNAVAILABLE, 18, "platform not present")                                            \
    X(SELFTEST_FAILED, 19, "kernel self-test failed")                                              \
    X(PLUGIN_ERROR, 20, "plugin could not be loaded")                                              \
    X(ALREADY_EXISTS, 21, "already exists")                                                        \
    X(BAD_STATE, 22, "operation not allowed in the current state")                                 \
    X(OUT_OF_RANGE, 23, "value out of range")                                                      \
    X(INTERNAL, 24, "internal error")

typedef enum attn_status {
#define ATTN__STATUS_ENUM(name, value, msg) ATTN_##name = value,
    ATTN_STATUS_TABLE(ATTN__STATUS_ENUM)
#undef ATTN__STATUS_ENUM
} attn_status;

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_STATUS" for values outside the table. */
ATTN_API const char *attn_status_name(attn_status s);
/* Fixed human message for the code. */
ATTN_API const char *attn_strerror(attn_status s);
/* Detail text of the most recent failure on this thread ("" if none). */
ATTN_API const char *attn_last_error(void);
ATTN_API void attn_clear_error(void);
/* For code built on the library (plugins, the simulation library, tools):
 * sets this thread's detail text (printf format) and returns s, so a
 * failure reads the same as one of libattn's own. */
ATTN_API attn_status attn_set_error(attn_status s, const char *fmt, ...) ATTN_PRINTF(2, 3);
/* Wraps the current detail in context: "<fmt...>: <previous detail>"; an
 * empty previous detail adds nothing. Returns s. */
ATTN_API attn_status attn_wrap_error(attn_status s, const char *fmt, ...) ATTN_PRINTF(2, 3);

ATTN_EXTERN_C_END

#endif
