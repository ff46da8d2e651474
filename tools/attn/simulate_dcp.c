/* `attn simulate --dcp N`: a decode-context-parallel deployment on one
 * machine (real or simulated) without running it: the backend each rank
 * would select and whether its LSE flags allow DCP, how vLLM's interleaved
 * placement deals a request's KV tokens to the ranks (the owner of each
 * position of the first virtual blocks, and every rank's share of a
 * context), the KV bytes per rank and the (output, LSE) bytes each decode
 * step exchanges. Every rank of a real job runs the same selection; a
 * disagreement is what `attn serve --dcp` refuses at startup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/dcp.h"
#include "cli.h"
#include "serve_dcp.h"
#include "util/strbuf.h"
#include "harness/json_put.h"

static void attn__dcp_owner_row(int world, int interleave, int bs, char *buf, size_t size)
{
    size_t n = 0;
    int span = bs * world;
    for (int p = 0; p < span && n + 2 < size; p++) {
        int r = attn_dcp_owner(p, world, interleave, bs);
        buf[n++] = (char)(r < 10 ? '0' + r : 'a' + (r - 10) % 26);
        if ((p + 1) % bs == 0 && p + 1 < span && n + 2 < size) buf[n++] = ' ';
    }
    buf[n] = '\0';
}

/* One line / object per KV group: its backend's LSE flags and whether DCP
 * can run on it; sums the KV bytes per token and the exchange bytes per
 * decode token over the groups. */
static bool attn__dcp_groups(const attn_engine *e, const attn_model *m, attn__jw *w, bool json,
                             double *bytes_per_token, int64_t *exchange)
{
    int bs = attn_engine_block_size(e);
    bool all_ok = true;
    attn__jw_key(w, "groups");
    attn__jw_arr_begin(w);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_group_info gi;
        attn_engine_group_info_get(e, g, &gi);
        const attn_backend *bo = attn_selection_backend_object(gi.selection);
        const attn_backend_desc *d = bo ? bo->desc : NULL;
        bool ok = d && d->can_return_lse_for_decode && d->supports_dcp;
        all_ok = all_ok && ok;
        *bytes_per_token += (double)gi.bytes_per_block / bs;
        const attn_layer_spec *sp = attn_model_group_spec(m, gi.model_group);
        int dv = sp ? (sp->use_mla       ? sp->v_head_dim
                       : sp->head_size_v ? sp->head_size_v
                                         : sp->head_size)
                    : 0;
        *exchange += sp ? (int64_t)sp->num_heads * (dv + 1) * 4 * gi.num_layers : 0;
        attn__jw_obj_begin(w);
        attn__put_str(w, "backend", gi.backend);
        attn__put_bool(w, "can_return_lse_for_decode", d && d->can_return_lse_for_decode);
        attn__put_bool(w, "lse_base_on_e", d && d->lse_base == ATTN_LSE_BASE_E);
        attn__put_bool(w, "supports_dcp", d && d->supports_dcp);
        attn__jw_obj_end(w);
        if (!json)
            printf("KV group %d (%d layers): %s: can_return_lse_for_decode %s, LSE base %s, "
                   "supports_dcp %s -> %s\n",
                   g, gi.num_layers, gi.backend, d && d->can_return_lse_for_decode ? "yes" : "no",
                   d && d->lse_base == ATTN_LSE_BASE_2 ? "2" : "e",
                   d && d->supports_dcp ? "yes" : "no",
                   ok ? "DCP possible" : "DCP not supported by this backend");
    }
    attn__jw_arr_end(w);
    return all_ok;
}

/* Platform, model and a metadata-only engine whose block size the check
 * of world x interleave needs: -1, or the exit code to stop with. */
static int attn__dcp_start(const char *machine, const char *model, long world, long interleave,
                           const attn_platform **pp, attn_platform **powned, attn_model **pm,
                           attn_engine **pe)
{
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    attn_model *m = NULL;
    attn_engine *e = NULL;
    if (attn_cli_machine(machine, NULL, NULL, 0, &p, &owned) != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    if (attn_model_load(model ? model : "llama-3.1-8b", &m) != ATTN_OK) {
        fprintf(stderr, "attn simulate: model: %s\n", attn_last_error());
        attn_platform_free(owned);
        return ATTN_EXIT_USAGE;
    }
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.run_kernels = false;
    cfg.num_blocks = 64;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 256;
    attn_status st = attn_engine_create(&cfg, &e);
    int rc = ATTN_EXIT_OK;
    if (st != ATTN_OK) {
        fprintf(stderr, "attn simulate: startup failed: %s\n",
                e ? attn_engine_error(e) : attn_last_error());
        rc = ATTN_EXIT_FAILED;
    } else if (attn_dcp_check((int)world, 0, (int)interleave, attn_engine_block_size(e)) !=
               ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        rc = ATTN_EXIT_USAGE;
    }
    if (rc != ATTN_OK) {
        attn_engine_free(e);
        attn_model_free(m);
        attn_platform_free(owned);
        return rc;
    }
    *pp = p;
    *powned = owned;
    *pm = m;
    *pe = e;
    return -1;
}

/* Every rank's share of one request's context. */
static void attn__dcp_ranks(attn__jw *w, bool json, long world, long interleave, long context,
                            int bs, double bytes_per_token)
{
    attn__jw_key(w, "ranks");
    attn__jw_arr_begin(w);
    for (int r = 0; r < world; r++) {
        int32_t t = attn_dcp_local_len((int32_t)context, (int)world, r, (int)interleave);
        attn__jw_obj_begin(w);
        attn__put_int(w, "rank", r);
        attn__put_int(w, "kv_tokens", t);
        attn__put_int(w, "kv_blocks", (t + bs - 1) / bs);
        attn__put_int(w, "kv_bytes", (long long)(t * bytes_per_token));
        attn__jw_obj_end(w);
        if (!json)
            printf("rank %d: %d KV tokens in %d blocks, %.1f MiB for this request\n", r, t,
                   (t + bs - 1) / bs, t * bytes_per_token / 1048576.0);
    }
    attn__jw_arr_end(w);
}

int attn__simulate_dcp(const char *machine, const char *model, long world, long interleave,
                       long context, bool json)
{
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    attn_model *m = NULL;
    attn_engine *e = NULL;
    int rc = attn__dcp_start(machine, model, world, interleave, &p, &owned, &m, &e);
    if (rc >= 0) return rc;
    int bs = attn_engine_block_size(e);
    attn__sb sb;
    attn__jw w;
    attn__sb_init(&sb);
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__put_str(&w, "machine", attn_platform_name(p));
    attn__put_str(&w, "model", attn_model_name(m));
    attn__put_int(&w, "world_size", world);
    attn__put_int(&w, "interleave", interleave);
    attn__put_int(&w, "block_size", bs);
    attn__put_int(&w, "context", context);
    if (!json)
        printf("DCP deployment: %ld ranks on %s, %s, block size %d, interleave %ld, context %ld\n",
               world, attn_platform_name(p), attn_model_name(m), bs, interleave, context);
    double bytes_per_token = 0;
    int64_t exchange = 0;
    bool all_ok = attn__dcp_groups(e, m, &w, json, &bytes_per_token, &exchange);
    char row[2048];
    attn__dcp_owner_row((int)world, (int)interleave, bs, row, sizeof row);
    attn__put_str(&w, "owner_of_first_positions", row);
    if (!json)
        printf("owner of positions 0..%d (one virtual block of %d x %ld):\n  %s\n",
               bs * (int)world - 1, bs, world, row);
    attn__dcp_ranks(&w, json, world, interleave, context, bs, bytes_per_token);
    attn__put_int(&w, "exchange_bytes_per_decode_token", (long long)exchange);
    attn__put_bool(&w, "dcp_possible", all_ok);
    attn__jw_obj_end(&w);
    if (json) {
        char *text = attn__sb_take(&sb);
        if (text) printf("%s\n", text);
        free(text);
    } else {
        printf("each decode token: every rank sends %lld bytes of (output, LSE) per step, all "
               "layers, to each of the %ld others\n",
               (long long)exchange, world - 1);
    }
    attn__sb_free(&sb);
    attn_engine_free(e);
    attn_model_free(m);
    attn_platform_free(owned);
    return all_ok ? ATTN_EXIT_OK : ATTN_EXIT_FAILED;
}
