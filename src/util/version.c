/* attn_version(): the version this library was built as, from the same
 * macros an application compiles against (include/attn/version.h). */
#include "attn/version.h"

const char *attn_version(void)
{
    return ATTN_VERSION_STRING;
}

unsigned attn_version_number(void)
{
    return ATTN_VERSION_NUMBER;
}
