/* Scenarios: any text either parses into a scenario (which then accepts a
 * step override) or is refused with detail naming the origin. Running is
 * not fuzzed here (it starts engines); `attn simulate` is covered by the CLI
 * harness. */
#include "fuzz_common.h"
#include "scenario/scenario.h"

FZ_DEFAULT_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    attn__scenario *s = NULL;
    attn_status st = attn__scenario_parse((const char *)data, size, "fuzz.json", &s);
    if (st != ATTN_OK) {
        FZ_ASSERT(s == NULL);
        FZ_ASSERT(strstr(attn_last_error(), "fuzz.json") != NULL);
        return 0;
    }
    (void)attn__scenario_set_steps(s, 1 + (int)(size % 7));
    attn__scenario_free(s);
    return 0;
}
