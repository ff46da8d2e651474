/* The dependency of mod_dep.c, kept off every search path. */
#include "attn/export.h"

ATTN_EXPORT int attn_test_regdep_value(void);
ATTN_EXPORT int attn_test_regdep_value(void)
{
    return 7;
}
