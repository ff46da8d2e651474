/* `attn` — one binary, one file per subcommand. Subcommands are linked in
 * when their file exists (weak references), so the table lists them all. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#pragma weak attn_cmd_platforms
#pragma weak attn_cmd_backends
#pragma weak attn_cmd_select
#pragma weak attn_cmd_serve
#pragma weak attn_cmd_bench
#pragma weak attn_cmd_simulate
#pragma weak attn_cmd_models

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} attn_subcommand;

static int attn_main_usage(FILE *f, const attn_subcommand *cmds, int n)
{
    fprintf(f, "usage: attn <command> [options]\n\n"
               "Decide once which attention kernel runs, then drive it every step.\n\n"
               "commands:\n");
    for (int i = 0; i < n; i++)
        if (cmds[i].fn) fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "\nRun 'attn <command> --help' for a command's options.\n"
               "Environment: ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGINS ATTN_PLUGIN_PATH\n"
               "             ATTN_CPU_MASK ATTN_NUM_THREADS ATTN_SELFTEST ATTN_LOG\n");
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

/* Output that could not be written (a full disk, a closed pipe) is a failure,
 * whatever the command thought of its run. */
static int attn_main_finish(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "attn: error writing the output: %s\n", strerror(errno));
        return rc == ATTN_EXIT_OK ? ATTN_EXIT_ERROR : rc;
    }
    return rc;
}

int main(int argc, char **argv)
{
    const attn_subcommand cmds[] = {
        {"platforms", attn_cmd_platforms, "show this machine's platforms and the machine catalog"},
        {"backends", attn_cmd_backends, "list every backend, its capabilities and locator"},
        {"select", attn_cmd_select, "choose the attention backend for a configuration"},
        {"models", attn_cmd_models, "list model presets and their attention layer groups"},
        {"serve", attn_cmd_serve, "start an engine and run steps of synthetic traffic"},
        {"bench", attn_cmd_bench, "benchmark attention kernels on this machine"},
        {"simulate", attn_cmd_simulate, "run machines side by side through startup and serving"},
    };
    int n = (int)(sizeof cmds / sizeof cmds[0]);
    if (argc < 2) return attn_main_usage(stderr, cmds, n);
    if (attn_cli_is_help(argv[1]) || !strcmp(argv[1], "help"))
        return attn_main_usage(stdout, cmds, n);
    for (int i = 0; i < n; i++) {
        if (!strcmp(argv[1], cmds[i].name)) {
            if (!cmds[i].fn) {
                fprintf(stderr, "attn: command '%s' is not built into this binary\n", argv[1]);
                return ATTN_EXIT_ERROR;
            }
            return attn_main_finish(cmds[i].fn(argc - 1, argv + 1));
        }
    }
    fprintf(stderr, "attn: unknown command '%s'\n", argv[1]);
    return attn_main_usage(stderr, cmds, n);
}
