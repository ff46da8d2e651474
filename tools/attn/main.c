/* `attn` — one binary, one file per subcommand. Subcommands are linked in
 * when their file exists (weak references), so the table lists them all.
 * `attn --help` lists every environment variable libattn and the CLI read
 * (the one list; tests/cli_version.sh checks it against the sources and
 * the README); `attn --version` / `-V` / `version` print the version. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "cli.h"
#include "util/strbuf.h"

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

/* Every environment variable read, in the README's order; the machine
 * switches (ATTN_<SETTING>) follow from the settings table. */
static const char *const attn_main_env[][2] = {
    {"ATTN_PLATFORM", "simulate a machine: a catalog name, cuda:X.Y, rocm:gfxNNN, xpu, cpu"},
    {"", "or a JSON spec file (unset: this machine)"},
    {"ATTN_BACKEND", "the backend attn select / serve request (a hard requirement)"},
    {"ATTN_PLUGINS", "comma-separated allowlist of plugin names (unset: all)"},
    {"ATTN_PLUGIN_PATH", "colon-separated folders searched for plugin .so files"},
    {"ATTN_CPU_MASK", "hide CPU features or kernel variants: -avx512, -amx-bf16, none"},
    {"ATTN_NUM_THREADS", "kernel thread-pool size, 1..4096 (default: usable cores)"},
    {"ATTN_SELFTEST", "0 skips the known-answer test that gates kernel eligibility"},
    {"ATTN_LOG", "error, warn (default), info, debug"},
    {"ATTN_DATA_DIR", "a data folder (machines/, models/, scenarios/) searched first"},
    {"ATTN_CUDA_LIBRARY", "test hooks: the GPU runtime library loaded in place of"},
    {"ATTN_HIP_LIBRARY", "libcuda.so.1, libamdhip64.so, libOpenCL.so.1"},
    {"ATTN_OPENCL_LIBRARY", ""},
    {"ATTN_OPENCL_BUILD_OPTIONS", "appended to OPENCL_ATTN's program build options"},
    {"", "(the self-test runs on the program they build)"},
};

static void attn_main_env_row(FILE *f, const char *name, const char *text)
{
    if (*text)
        fprintf(f, "  %-24s %s\n", name, text);
    else
        fprintf(f, "  %s\n", name);
}

static void attn_main_env_usage(FILE *f)
{
    fprintf(f, "\nEnvironment (a value a variable does not accept is reported and ignored):\n");
    for (size_t i = 0; i < sizeof attn_main_env / sizeof attn_main_env[0]; i++)
        attn_main_env_row(f, attn_main_env[i][0], attn_main_env[i][1]);
    for (int s = 0; s < ATTN_SETTING_COUNT; s++) {
        char var[64] = "ATTN_";
        size_t o = strlen(var);
        for (const char *t = attn_setting_name((attn_setting)s); *t && o + 1 < sizeof var; t++)
            var[o++] = (char)toupper((unsigned char)*t);
        var[o] = '\0';
        attn_main_env_row(f, var,
                          s == 0 ? "machine switches, true/false/1/0 (as vLLM's VLLM_* ones)" : "");
    }
}

static int attn_main_usage(FILE *f, const attn_subcommand *cmds, int n)
{
    fprintf(f, "usage: attn <command> [options]\n"
               "       attn --version | -V | version [--json]\n\n"
               "Decide once which attention kernel runs, then drive it every step.\n\n"
               "commands:\n");
    for (int i = 0; i < n; i++)
        if (cmds[i].fn) fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "  %-10s %s\n", "version", "print the version of attn and of the libattn it runs");
    fprintf(f, "\nRun 'attn <command> --help' for a command's options.\n");
    attn_main_env_usage(f);
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

/* `attn --version`, `-V`, `version`: the headers attn was built with and
 * the library it runs with (they differ when another libattn is found). */
static int attn_main_version(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (attn_cli_is_help(argv[i])) {
            printf("usage: attn version [--json]\n       attn --version | -V\n\n"
                   "Print the version of attn and of the libattn library it runs with, and\n"
                   "the plugin and backend ABI versions it accepts.\n\n"
                   "  --json   {\"attn\", \"libattn\", \"libattn_number\", \"plugin_abi\",\n"
                   "           \"backend_abi\"}\n");
            return ATTN_EXIT_OK;
        }
        if (attn_cli_flag(argv, i, "--json"))
            json = true;
        else
            return attn_cli_usage_error("version", "unknown option '%s'", argv[i]);
    }
    if (!json) {
        printf("attn %s (libattn %s; plugin ABI %u, backend ABI %u)\n", ATTN_VERSION_STRING,
               attn_version(), ATTN_PLUGIN_ABI_VERSION, ATTN_BACKEND_ABI_VERSION);
        return ATTN_EXIT_OK;
    }
    attn__sb sb;
    attn__jw w;
    attn_cli_json_begin(&sb, &w);
    attn__jw_key(&w, "attn");
    attn__jw_str(&w, ATTN_VERSION_STRING);
    attn__jw_key(&w, "libattn");
    attn__jw_str(&w, attn_version());
    attn__jw_key(&w, "libattn_number");
    attn__jw_int(&w, (long long)attn_version_number());
    attn__jw_key(&w, "plugin_abi");
    attn__jw_int(&w, ATTN_PLUGIN_ABI_VERSION);
    attn__jw_key(&w, "backend_abi");
    attn__jw_int(&w, ATTN_BACKEND_ABI_VERSION);
    return attn_cli_json_end(&sb, &w, "version");
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
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version"))
        return attn_main_finish(attn_main_version(argc - 1, argv + 1));
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
