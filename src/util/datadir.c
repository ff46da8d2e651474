/* Where the shipped data (machines/, models/, scenarios/) is found, in order:
 *   1. $ATTN_DATA_DIR;
 *   2. relative to the file that holds this code (libattn.so, or the program
 *      it is linked into statically): <dir>/<libdir-to-datadir> and
 *      <dir>/<bindir-to-datadir>, the install layout's relative paths, so a
 *      copy installed or moved anywhere finds its own data;
 *   3. the source tree's data/, only while running from the build tree (the
 *      file in 2 lies under the build directory), so an installed copy never
 *      depends on the source tree;
 *   4. the configured install prefix's data directory.
 * Computed once per process; entries that are not directories are dropped
 * (except $ATTN_DATA_DIR, which the user asked for). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/datadir.h"

#ifndef ATTN_BUILD_DATA_DIR
#define ATTN_BUILD_DATA_DIR ""
#endif
#ifndef ATTN_BUILD_DIR
#define ATTN_BUILD_DIR ""
#endif
#ifndef ATTN_INSTALL_DATA_DIR
#define ATTN_INSTALL_DATA_DIR ""
#endif
#ifndef ATTN_LIB_TO_DATA
#define ATTN_LIB_TO_DATA "../share/attn"
#endif
#ifndef ATTN_BIN_TO_DATA
#define ATTN_BIN_TO_DATA "../share/attn"
#endif

#define ATTN__MAX_DIRS 5

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_store[ATTN__MAX_DIRS][PATH_MAX];
static int g_n;

static bool is_dir(const char *p)
{
    struct stat st;
    return p[0] && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add(const char *p, bool must_exist)
{
    if (g_n >= ATTN__MAX_DIRS || !p[0] || (must_exist && !is_dir(p))) return;
    char canon[PATH_MAX];
    const char *use = realpath(p, canon) ? canon : p;
    for (int i = 0; i < g_n; i++)
        if (!strcmp(g_store[i], use)) return;
    if (strlen(use) >= sizeof g_store[0]) return;
    snprintf(g_store[g_n++], sizeof g_store[0], "%s", use);
}

static void compute(void)
{
    const char *env = getenv("ATTN_DATA_DIR");
    if (env && *env) add(env, false);
    Dl_info info;
    char self[PATH_MAX] = "";
    if (dladdr((void *)&attn__data_dirs, &info) && info.dli_fname &&
        realpath(info.dli_fname, self)) {
        char *slash = strrchr(self, '/');
        if (slash) *slash = '\0';
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", self, ATTN_LIB_TO_DATA);
        add(p, true);
        snprintf(p, sizeof p, "%s/%s", self, ATTN_BIN_TO_DATA);
        add(p, true);
    }
    char build[PATH_MAX];
    size_t bl = 0;
    if (ATTN_BUILD_DIR[0] && realpath(ATTN_BUILD_DIR, build)) bl = strlen(build);
    if (bl && !strncmp(self, build, bl) && (self[bl] == '/' || self[bl] == '\0'))
        add(ATTN_BUILD_DATA_DIR, true);
    add(ATTN_INSTALL_DATA_DIR, true);
}

int attn__data_dirs(const char **dirs, int max)
{
    pthread_once(&g_once, compute);
    int n = 0;
    for (int i = 0; i < g_n && dirs && n < max; i++)
        dirs[n++] = g_store[i];
    return n;
}

int attn__data_dirs_text(char *buf, size_t size)
{
    const char *d[ATTN__MAX_DIRS];
    int n = attn__data_dirs(d, ATTN__MAX_DIRS);
    size_t o = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf && o < size ? buf + o : NULL, buf && o < size ? size - o : 0, "%s%s",
                         i ? ", " : "", d[i]);
        if (w > 0) o += (size_t)w;
    }
    if (n == 0)
        o += (size_t)snprintf(buf && o < size ? buf + o : NULL, buf && o < size ? size - o : 0,
                              "none");
    return (int)o;
}
