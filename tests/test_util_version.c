/* attn_version(): the running library reports the version its headers
 * state, as text and as a comparable number. */
#include "test.h"

int main(void)
{
    CHECK_STR(attn_version(), ATTN_VERSION_STRING);
    CHECK(attn_version_number() == ATTN_VERSION_NUMBER);
    unsigned major = 99, minor = 99, patch = 99;
    char tail = 0;
    CHECK(sscanf(attn_version(), "%u.%u.%u%c", &major, &minor, &patch, &tail) == 3);
    CHECK(major == ATTN_VERSION_MAJOR && minor == ATTN_VERSION_MINOR &&
          patch == ATTN_VERSION_PATCH);
    CHECK(attn_version_number() == major * 10000 + minor * 100 + patch);
    return attn_test_finish("test_util_version");
}
