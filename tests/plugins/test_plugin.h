/* Shared by the broken test plugins (tests/plugins.cmake): each one's init
 * leaves a marker file "<ATTN_TEST_MARKER_DIR>/<case>.ran", so a test can
 * prove whether plugin code ran at all. No constructors anywhere: the
 * marker is written only by attn_plugin_init. */
#ifndef ATTN_TEST_PLUGIN_H
#define ATTN_TEST_PLUGIN_H

#include <stdio.h>
#include <stdlib.h>

#include <attn/backend.h>
#include <attn/plugin.h>

static inline void attn_test_plugin_mark(const char *test_case)
{
    const char *dir = getenv("ATTN_TEST_MARKER_DIR");
    if (!dir || !*dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.ran", dir, test_case);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("attn_plugin_init ran\n", f);
        fclose(f);
    }
}

/* init_fail keeps the api's register function and tries it after init. */
ATTN_EXPORT attn_status attn_test_late_register(void);
/* hostile: what the api answered to its registrations */
ATTN_EXPORT const char *attn_test_hostile_heard(void);
/* from libattn_missingdep.so */
int attn_missingdep_answer(void);

#endif
