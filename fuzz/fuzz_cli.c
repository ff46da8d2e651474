/* Argument parsing of every `attn` subcommand. Input: first byte picks the
 * subcommand, the rest is its arguments separated by NUL or newline. Each
 * run is bounded (serve/simulate get a final --steps 1, bench a final tiny
 * problem) and never writes files (--html is dropped). Oracle: no crash,
 * no sanitizer report, and the exit code is one of the documented ones. */
#include <unistd.h>

#include "attn/attn.h"
#include "cli.h"
#include "fuzz_common.h"

typedef int (*cmd_fn)(int, char **);

static const struct {
    const char *name;
    cmd_fn fn;
    const char *tail[14]; /* appended after the fuzzed arguments */
} k_cmds[] = {
    {"platforms", attn_cmd_platforms, {NULL}},
    {"backends", attn_cmd_backends, {NULL}},
    {"select", attn_cmd_select, {NULL}},
    {"models", attn_cmd_models, {NULL}},
    {"serve", attn_cmd_serve, {"--steps", "1", "--no-kernels", NULL}},
    {"bench",
     attn_cmd_bench,
     {"--batch", "1", "--context", "16", "--prefill", "16", "--repeats", "1", "--kv", "bf16",
      "--buffer-mb", "1", NULL}},
    {"simulate", attn_cmd_simulate, {"--steps", "1", NULL}},
};
#define NCMD ((int)(sizeof k_cmds / sizeof k_cmds[0]))

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_setup_env();
    /* the commands print; keep the fuzzer's own output readable */
    if (!freopen("/dev/null", "w", stdout)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 512) return 0;
    int c = data[0] % NCMD;
    char *buf = fz_cstr(data + 1, size - 1);
    char *argv[80];
    int argc = 0;
    argv[argc++] = (char *)k_cmds[c].name;
    size_t n = size - 1;
    for (size_t i = 0, start = 0; i <= n && argc < 64; i++) {
        if (i == n || buf[i] == '\0' || buf[i] == '\n') {
            buf[i] = '\0';
            if (i > start || i < n) argv[argc++] = buf + start;
            start = i + 1;
        }
    }
    /* never write files, never run for long */
    for (int i = 1; i < argc; i++) {
        if (strstr(argv[i], "--html")) argv[i] = (char *)"--json";
        if (c == 5 && strstr(argv[i], "--full")) argv[i] = (char *)"--json";
    }
    for (int k = 0; k < 14 && k_cmds[c].tail[k]; k++)
        argv[argc++] = (char *)k_cmds[c].tail[k];
    argv[argc] = NULL;
    int rc = k_cmds[c].fn(argc, argv);
    FZ_ASSERT(rc == ATTN_EXIT_OK || rc == ATTN_EXIT_ERROR || rc == ATTN_EXIT_USAGE ||
              rc == ATTN_EXIT_FAILED);
    fflush(stdout);
    free(buf);
    return 0;
}
