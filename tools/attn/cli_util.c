#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "attn/platform.h"
#include "cli.h"
#include "util/strbuf.h"

bool attn_cli_is_help(const char *arg)
{
    return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

bool attn_cli_flag(char **argv, int i, const char *name)
{
    return !strcmp(argv[i], name);
}

bool attn_cli_opt(int argc, char **argv, int *i, const char *name, const char **val, bool *bad)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != '\0') return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "attn: option %s needs a value\n", name);
        *bad = true;
        *val = NULL;
        return true;
    }
    *i += 1;
    *val = argv[*i];
    return true;
}

bool attn_cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "attn %s: %s: expected an integer in [%ld, %ld], got '%s'\n", cmd, opt, lo,
                hi, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

int attn_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "attn %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'attn %s --help'.\n", cmd);
    va_end(ap);
    return ATTN_EXIT_USAGE;
}

int attn_cli_machine(const char *machine, const char *installed, const char *const *settings,
                     int num_settings, const attn_platform **p, attn_platform **owned)
{
    attn_status st;
    *owned = NULL;
    if (!machine && !installed && num_settings == 0) return attn_platform_current(p);
    if (machine) {
        st = attn_platform_open(machine, owned);
    } else {
        const char *env = getenv("ATTN_PLATFORM");
        st = env && *env ? attn_platform_open(env, owned) : attn_platform_detect(owned);
    }
    if (st == ATTN_OK && installed) st = attn_platform_set_installed(*owned, installed);
    for (int i = 0; st == ATTN_OK && i < num_settings; i++)
        st = attn_platform_set_setting(*owned, settings[i]);
    if (st != ATTN_OK) {
        attn_platform_free(*owned);
        *owned = NULL;
        return st;
    }
    *p = *owned;
    return ATTN_OK;
}

void attn_cli_json_begin(attn__sb *sb, attn__jw *w)
{
    attn__sb_init(sb);
    attn__jw_init(w, sb, true);
    attn__jw_obj_begin(w);
}

int attn_cli_json_end(attn__sb *sb, attn__jw *w, const char *cmd)
{
    attn__jw_obj_end(w);
    return attn_cli_print(sb, cmd, true);
}

int attn_cli_print(attn__sb *sb, const char *cmd, bool newline)
{
    char *s = attn__sb_take(sb);
    if (!s) {
        fprintf(stderr, "attn %s: out of memory\n", cmd);
        return ATTN_EXIT_ERROR;
    }
    fputs(s, stdout);
    if (newline) putchar('\n');
    free(s);
    return ATTN_EXIT_OK;
}
