/* `attn serve` internals shared by its files: serve_opts.c (options),
 * serve_print.c (the text report), serve.c (the command). */
#ifndef ATTN_CLI_SERVE_H
#define ATTN_CLI_SERVE_H

#include <stdbool.h>

#include "attn/attn.h"
#include "attn/engine.h"

typedef struct attn__serve_opts {
    const char *machine, *installed, *model, *backend;
    const char *settings[32];
    int num_settings;
    const char *per_kind[ATTN_KIND_COUNT];
    long layers, heads, kv_heads, head_size;
    bool shape_given;
    attn_dtype dtype;
    long block_size, num_blocks, max_seqs, max_tokens, max_model_len, steps, layers_to_run;
    attn_kv_dtype kv;
    attn_traffic_config traffic;
    bool no_kernels, verify, check, quiet, json;
    long dcp, dcp_interleave;
    double dcp_timeout;
} attn__serve_opts;

/* Returns an exit code to stop with, or -1 to go on with *o filled. */
int attn__serve_parse(int argc, char **argv, attn__serve_opts *o);

/* serve_print.c */
void attn__print_startup(const attn_engine *e, const attn_platform *p, const attn_model *m,
                         int dcp);
void attn__print_blocks(const attn_engine *e, const char *when);
bool attn__blocks_ok(const attn_engine *e, bool released);

#endif
