#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

int attn_test_failures;
int attn_test_checks;

int attn_test_finish(const char *name)
{
    int passed = attn_test_checks - attn_test_failures;
    printf("%s: %d passed, %d failed\n", name, passed, attn_test_failures);
    return attn_test_failures ? 1 : 0;
}

void attn_test_skip(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("%s: SKIP ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (attn_test_failures) exit(attn_test_finish(name));
    exit(77);
}

static const char *attn_test_env(const char *k, const char *def)
{
    const char *v = getenv(k);
    return v && *v ? v : def;
}

const char *attn_test_source_dir(void)
{
    return attn_test_env("ATTN_SOURCE_DIR", ".");
}

const char *attn_test_binary_dir(void)
{
    return attn_test_env("ATTN_BINARY_DIR", ".");
}

int attn_test_run(const char *cmd, char **out)
{
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        pclose(f);
        return -1;
    }
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    buf[n] = '\0';
    int st = pclose(f);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
