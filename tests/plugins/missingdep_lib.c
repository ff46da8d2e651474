/* The dependency of the missing_dep test plugin; never on a search path. */
#include "test_plugin.h"

int attn_missingdep_answer(void)
{
    return 42;
}
