/* The self-test gate: a backend's known-answer test runs once per process
 * per backend object, and ATTN_SELFTEST=0 turns the gate off. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/log.h"
#include "select/selection.h"
#include "util/error.h"
#include "util/strbuf.h"

/* Known-answer tests run once per process per backend object. */
typedef struct attn__selftest_result {
    struct attn__selftest_result *next;
    const attn_backend *backend;
    attn_status status;
    char detail[256];
} attn__selftest_result;

static pthread_mutex_t attn__selftest_mu = PTHREAD_MUTEX_INITIALIZER;
static attn__selftest_result *attn__selftests;

attn_status attn__selftest(const attn_backend *b, char *detail, size_t size)
{
    pthread_mutex_lock(&attn__selftest_mu);
    attn__selftest_result *r = attn__selftests;
    while (r && r->backend != b)
        r = r->next;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&attn__selftest_mu);
            snprintf(detail, size, "out of memory");
            return ATTN_OUT_OF_MEMORY;
        }
        r->backend = b;
        r->status = b->kernel->self_test(r->detail, sizeof r->detail);
        if (r->status != ATTN_OK && !r->detail[0])
            snprintf(r->detail, sizeof r->detail, "%s", attn_strerror(r->status));
        r->next = attn__selftests;
        attn__selftests = r;
    }
    attn_status st = r->status;
    snprintf(detail, size, "%s", r->detail);
    pthread_mutex_unlock(&attn__selftest_mu);
    return st;
}

bool attn__selftest_disabled(void)
{
    const char *e = getenv("ATTN_SELFTEST");
    static atomic_bool warned;
    if (e && *e && strcmp(e, "0") && strcmp(e, "1") && !atomic_exchange(&warned, true))
        attn_log(ATTN_LOG_WARN, "ATTN_SELFTEST='%s' is not 0 or 1; self-tests stay on", e);
    return e && !strcmp(e, "0");
}
