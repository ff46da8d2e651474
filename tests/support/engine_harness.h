/* The engine tests drive engines the way `attn serve` does: through the
 * harness (sim/harness), which gives the synthetic inputs, the CPU
 * stand-ins, the checksums and the REFERENCE re-run. One harness per
 * engine, found again by the engine pointer. Link attn_harness
 * (tests/engine.cmake). */
#ifndef ATTN_TEST_ENGINE_HARNESS_H
#define ATTN_TEST_ENGINE_HARNESS_H

#include "attn/engine.h"
#include "harness/harness.h"

#define TEST_MAX_ENGINES 8

static attn_engine *test_engines[TEST_MAX_ENGINES];
static attn__harness *test_harnesses[TEST_MAX_ENGINES];

/* attn_engine_create with a harness of this seed and verify flag. */
static inline attn_status test_engine_create(attn_engine_config *cfg, uint64_t seed, bool verify,
                                             attn_engine **out)
{
    *out = NULL;
    int slot = 0;
    while (slot < TEST_MAX_ENGINES && test_harnesses[slot])
        slot++;
    if (slot == TEST_MAX_ENGINES)
        return attn_set_error(ATTN_OUT_OF_RANGE, "test: too many engines");
    attn__harness_config hc = {.seed = seed, .verify = verify, .stand_ins = true};
    attn_status st = attn__harness_create(&hc, &test_harnesses[slot]);
    if (st != ATTN_OK) return st;
    st = attn__harness_engine_create(test_harnesses[slot], cfg, out);
    test_engines[slot] = *out;
    return st;
}

static inline attn__harness *test_harness_of(const attn_engine *e)
{
    for (int i = 0; i < TEST_MAX_ENGINES; i++)
        if (test_harnesses[i] && test_engines[i] == e) return test_harnesses[i];
    return NULL;
}

/* attn_engine_step, with the harness's results of the step in *hs. */
static inline attn_status test_engine_step(attn_engine *e, attn_engine_step_stats *st,
                                           attn__harness_stats *hs)
{
    attn__harness *h = test_harness_of(e);
    if (h) return attn__harness_step(h, e, st, hs);
    if (hs) *hs = (attn__harness_stats){.output_finite = true};
    return attn_engine_step(e, st); /* an engine created without one */
}

static inline void test_engine_free(attn_engine *e)
{
    for (int i = 0; i < TEST_MAX_ENGINES; i++)
        if (test_harnesses[i] && test_engines[i] == e) {
            attn__harness_free(test_harnesses[i]);
            test_harnesses[i] = NULL;
            test_engines[i] = NULL;
        }
    attn_engine_free(e);
}

#endif
