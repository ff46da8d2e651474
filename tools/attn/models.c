/* `attn models [--json] [NAME|config.json]`: the shipped presets, or one
 * model's attention layers as KV-cache groups (what the engine selects a
 * backend for, once per group). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/model.h"
#include "cli.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: attn models [--json] [NAME|path/to/config.json]\n\n"
               "Without a name: list the model presets (data/models/*.json).\n"
               "With one: its attention layers grouped into KV-cache groups (layers with\n"
               "equal specs), the spec of each group, and notes on defaulted fields.\n"
               "Presets are looked up in $ATTN_DATA_DIR/models, then the data directory\n"
               "of the installed copy (found next to the library/program), then the\n"
               "source tree's (only from the build tree) and the configured prefix's.\n");
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

static void spec_text(const attn_layer_spec *s, char *buf, size_t size)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, size - o, "heads %d/%d kv, head %d", s->num_heads,
                          s->num_kv_heads, s->head_size);
    if (s->sliding_window > 0 && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", window %d", s->sliding_window);
    if (s->logits_soft_cap > 0 && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", soft-cap %g", s->logits_soft_cap);
    if (s->has_sink && o < size) o += (size_t)snprintf(buf + o, size - o, ", sinks");
    if (s->use_mla && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", MLA rank %d + rope %d (nope %d, v %d)",
                              s->kv_lora_rank, s->qk_rope_head_dim, s->qk_nope_head_dim,
                              s->v_head_dim);
    if (s->use_sparse && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", sparse top-%d", s->index_topk);
    if (s->use_mm_prefix && o < size) o += (size_t)snprintf(buf + o, size - o, ", mm-prefix");
    if (!attn_layer_spec_has_kv_cache(s) && o < size) snprintf(buf + o, size - o, ", no KV cache");
}

static int show_one(const char *name, bool json)
{
    attn_model *m = NULL;
    attn_status st = attn_model_load(name, &m);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn models: %s\n", attn_last_error());
        return st == ATTN_NOT_FOUND ? ATTN_EXIT_USAGE : ATTN_EXIT_ERROR;
    }
    if (json) {
        char *text = NULL;
        if (attn_model_to_json(m, &text) != ATTN_OK) {
            fprintf(stderr, "attn models: %s\n", attn_last_error());
            attn_model_free(m);
            return ATTN_EXIT_ERROR;
        }
        printf("%s\n", text);
        free(text);
        attn_model_free(m);
        return ATTN_EXIT_OK;
    }
    printf("%s: %s, %s, %d attention layers, %d KV-cache group%s\n", attn_model_name(m),
           attn_model_type(m)[0] ? attn_model_type(m) : "(shape)",
           attn_dtype_name(attn_model_dtype(m)), attn_model_num_layers(m), attn_model_num_groups(m),
           attn_model_num_groups(m) == 1 ? "" : "s");
    if (attn_model_source(m)[0]) printf("  from %s\n", attn_model_source(m));
    for (int g = 0; g < attn_model_num_groups(m); g++) {
        const attn_layer_spec *s = attn_model_group_spec(m, g);
        const int *l;
        int n = attn_model_group_layers(m, g, &l);
        char layers[128], spec[256];
        attn_model_layers_text(l, n, layers, sizeof layers);
        spec_text(s, spec, sizeof spec);
        printf("  group %d  %-22s %-15s %2d layer%s %-14s %s\n", g, attn_layer_spec_kind(s),
               attn_attn_type_name(s->attn_type), n, n == 1 ? " " : "s", layers, spec);
    }
    for (int i = 0; i < attn_model_num_notes(m); i++)
        printf("  note: %s\n", attn_model_note(m, i));
    attn_model_free(m);
    return ATTN_EXIT_OK;
}

static int list_all(bool json)
{
    if (json)
        printf("[\n");
    else
        printf("%-14s %-12s %-5s %6s  %s\n", "preset", "model_type", "dtype", "layers",
               "layer groups (layers x kind, head size)");
    int rc = ATTN_EXIT_OK;
    for (int i = 0; i < attn_model_preset_count(); i++) {
        const char *name = attn_model_preset_name(i);
        attn_model *m = NULL;
        if (attn_model_load(name, &m) != ATTN_OK) {
            fprintf(stderr, "attn models: %s\n", attn_last_error());
            rc = ATTN_EXIT_ERROR;
            continue;
        }
        if (json) {
            char *text = NULL;
            if (attn_model_to_json(m, &text) == ATTN_OK)
                printf("%s%s\n", text, i + 1 < attn_model_preset_count() ? "," : "");
            free(text);
        } else {
            char groups[512] = "";
            size_t o = 0;
            for (int g = 0; g < attn_model_num_groups(m) && o < sizeof groups; g++) {
                const attn_layer_spec *s = attn_model_group_spec(m, g);
                int n = attn_model_group_layers(m, g, NULL);
                o += (size_t)snprintf(groups + o, sizeof groups - o, "%s%dx %s h%d", g ? "; " : "",
                                      n, attn_layer_spec_kind(s), s->head_size);
            }
            printf("%-14s %-12s %-5s %6d  %s\n", name, attn_model_type(m),
                   attn_dtype_name(attn_model_dtype(m)), attn_model_num_layers(m), groups);
        }
        attn_model_free(m);
    }
    if (json) printf("]\n");
    return rc;
}

int attn_cmd_models(int argc, char **argv)
{
    bool json = false;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (attn_cli_is_help(argv[i])) return usage(stdout);
        if (attn_cli_flag(argv, i, "--json"))
            json = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return attn_cli_usage_error("models", "unknown option '%s'", argv[i]);
        else if (name)
            return attn_cli_usage_error("models", "one model at a time ('%s', '%s')", name,
                                        argv[i]);
        else
            name = argv[i];
    }
    return name ? show_one(name, json) : list_all(json);
}
