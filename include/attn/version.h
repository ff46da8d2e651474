/* The library version for C (CMakeLists.txt's project() states it for the
 * build and the Python package; configuring fails unless both agree). The macros
 * say which headers a program was compiled with; attn_version() and
 * attn_version_number() say which library it runs with. */
#ifndef ATTN_VERSION_H
#define ATTN_VERSION_H

#include "attn/export.h"

ATTN_EXTERN_C_BEGIN

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 1
#define ATTN_VERSION_PATCH 0

#define ATTN__VERSION_STR2(x) #x
#define ATTN__VERSION_STR(x)  ATTN__VERSION_STR2(x)
/* "MAJOR.MINOR.PATCH" */
#define ATTN_VERSION_STRING                                                                        \
    ATTN__VERSION_STR(ATTN_VERSION_MAJOR)                                                          \
    "." ATTN__VERSION_STR(ATTN_VERSION_MINOR) "." ATTN__VERSION_STR(ATTN_VERSION_PATCH)
/* MAJOR * 10000 + MINOR * 100 + PATCH, comparable with < and > */
#define ATTN_VERSION_NUMBER                                                                        \
    (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)

/* The running library's ATTN_VERSION_STRING (static storage). */
ATTN_API const char *attn_version(void);
/* The running library's ATTN_VERSION_NUMBER. */
ATTN_API unsigned attn_version_number(void);

ATTN_EXTERN_C_END

#endif
