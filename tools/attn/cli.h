/* Shared pieces of the `attn` CLI. Each subcommand lives in its own file and
 * defines `int attn_cmd_<name>(int argc, char **argv)` (argv[0] is the
 * subcommand name). Exit codes: 0 success, 2 usage error, 3 selection or
 * startup failure, 77 nothing to run it on here (attn bench of a device
 * backend without its driver or device), 1 anything else. */
#ifndef ATTN_TOOLS_CLI_H
#define ATTN_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#define ATTN_EXIT_OK     0
#define ATTN_EXIT_ERROR  1
#define ATTN_EXIT_USAGE  2
#define ATTN_EXIT_FAILED 3
#define ATTN_EXIT_SKIP   77

int attn_cmd_platforms(int argc, char **argv);
int attn_cmd_backends(int argc, char **argv);
int attn_cmd_select(int argc, char **argv);
int attn_cmd_serve(int argc, char **argv);
int attn_cmd_bench(int argc, char **argv);
int attn_cmd_simulate(int argc, char **argv);
int attn_cmd_models(int argc, char **argv);

/* Option helpers: "--name VALUE" or "--name=VALUE". Return true when argv[*i]
 * is the option; *val receives the value and *i advances past it. A missing
 * value prints a usage error and sets *bad. */
bool attn_cli_opt(int argc, char **argv, int *i, const char *name, const char **val, bool *bad);
bool attn_cli_flag(char **argv, int i, const char *name);
bool attn_cli_is_help(const char *arg);
/* Parses a decimal int in [lo, hi]; prints "attn <cmd>: --opt: ..." on error. */
bool attn_cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int attn_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

struct attn__sb;
struct attn__jw;
/* A JSON writer w over sb, pretty-printed, with the top-level object open
 * (the layout every --json output of the CLI has). */
void attn_cli_json_begin(struct attn__sb *sb, struct attn__jw *w);
/* Closes the top-level object of attn_cli_json_begin and prints the text
 * (attn_cli_print). */
int attn_cli_json_end(struct attn__sb *sb, struct attn__jw *w, const char *cmd);
/* Prints the text built in sb (taken: sb is empty afterwards), with a
 * newline after it when newline is set; "attn <cmd>: out of memory" and
 * ATTN_EXIT_ERROR when it could not be built. */
int attn_cli_print(struct attn__sb *sb, const char *cmd, bool newline);

struct attn_platform;
/* The machine a command runs against: --machine M, else ATTN_PLATFORM / this
 * machine. --installed and --setting need a private, mutable copy (*owned,
 * freed by the caller with attn_platform_free); otherwise *p is the shared
 * process platform and *owned stays NULL. Returns ATTN_OK or the failure
 * status with attn_last_error() set; nothing is left allocated on failure. */
int attn_cli_machine(const char *machine, const char *installed, const char *const *settings,
                     int num_settings, const struct attn_platform **p,
                     struct attn_platform **owned);

#endif
