/* CPU_ATTN per-thread scratch: each thread works in its own, allocated once
 * per thread (pthread key), never per call. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "backends/cpu/cpu_fwd.h"

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static bool g_scratch_key_ok;

static void scratch_free(void *p)
{
    attn__cpu_scratch *s = p;
    if (s && s->plan.state) attn__builder_cpu.destroy(s->plan.state);
    free(p);
}

static void scratch_key_init(void)
{
    g_scratch_key_ok = pthread_key_create(&g_scratch_key, scratch_free) == 0;
}

attn__cpu_scratch *attn__cpu_scratch_get(void)
{
    pthread_once(&g_scratch_once, scratch_key_init);
    if (!g_scratch_key_ok) return NULL;
    attn__cpu_scratch *s = pthread_getspecific(g_scratch_key);
    if (!s) {
        s = aligned_alloc(64, (sizeof(attn__cpu_scratch) + 63) / 64 * 64);
        if (!s) return NULL;
        s->plan.state = NULL;
        if (pthread_setspecific(g_scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    return s;
}
