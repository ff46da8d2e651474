/* Loading a vendor runtime for a probe: dlopen by soname, never at link
 * time, so libattn runs where no driver exists. The first loader error is
 * the one reported, because it names the canonical soname the user would
 * install ("libcuda.so.1: cannot open shared object file: ..."). Handles of
 * runtimes that loaded are kept for the life of the process. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "platform/detect.h"

void *attn__probe_dlopen(const char *env_override, const char *const *names, char *library,
                         size_t library_size, char *reason, size_t reason_size)
{
    const char *only[2] = {NULL, NULL};
    const char *env = env_override ? getenv(env_override) : NULL;
    if (env && *env) {
        only[0] = env;
        names = only;
    }
    library[0] = '\0';
    reason[0] = '\0';
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(library, library_size, "%s", names[i]);
            reason[0] = '\0';
            return h;
        }
        const char *e = dlerror();
        if (!reason[0]) snprintf(reason, reason_size, "%s", e ? e : "cannot be loaded");
    }
    return NULL;
}
