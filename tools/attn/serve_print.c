/* `attn serve`'s text report: the startup summary (machine, model, each
 * layer group and KV group with its backend, why, metadata, cache and
 * kernel), and the block accounting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kvcache.h"
#include "attn/model.h"
#include "serve.h"

static double attn__mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

static void attn__layers_text(const int *layers, int n, char *buf, size_t size)
{
    bool contiguous = true;
    for (int i = 1; i < n; i++)
        contiguous = contiguous && layers[i] == layers[i - 1] + 1;
    if (n == 1)
        snprintf(buf, size, "layer %d", layers[0]);
    else if (contiguous)
        snprintf(buf, size, "layers %d-%d", layers[0], layers[n - 1]);
    else {
        size_t o = (size_t)snprintf(buf, size, "layers %d", layers[0]);
        for (int i = 1; i < n && o < size; i++)
            o += (size_t)snprintf(buf + o, size - o, ",%d", layers[i]);
    }
}

static void attn__print_indented(const char *text, const char *indent)
{
    const char *s = text;
    while (s && *s) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        printf("%s%.*s\n", indent, (int)n, s);
        s = nl ? nl + 1 : NULL;
    }
}

static const char *attn__kernel_text(const attn_engine_group_info *gi, char *buf, size_t size)
{
    switch (gi->kernel_mode) {
    case ATTN_KERNEL_NATIVE:
        snprintf(buf, size, "%s kernel%s%s%s", gi->kernel, gi->kernel_variant ? " (" : "",
                 gi->kernel_variant ? gi->kernel_variant : "", gi->kernel_variant ? ")" : "");
        break;
    case ATTN_KERNEL_EMULATED:
        snprintf(buf, size, "emulated by %s%s%s%s (no %s code on this machine)", gi->kernel,
                 gi->kernel_variant ? " (" : "", gi->kernel_variant ? gi->kernel_variant : "",
                 gi->kernel_variant ? ")" : "", gi->backend);
        break;
    default: snprintf(buf, size, "not run (%s)", gi->kernel_note ? gi->kernel_note : "no kernel");
    }
    return buf;
}

/* The model's layer groups without a paged cache: encoder groups the step
 * drives, and groups only selected. */
static void attn__print_model_groups(const attn_engine *e, const attn_model *m)
{
    int ng = attn_engine_num_groups(e);
    for (int mg = 0; mg < attn_model_num_groups(m); mg++) {
        bool kv = false;
        for (int g = 0; g < ng; g++) {
            attn_engine_group_info gi;
            attn_engine_group_info_get(e, g, &gi);
            kv = kv || gi.model_group == mg;
        }
        int enc = -1;
        attn_engine_group_info ei;
        for (int g = 0; !kv && enc < 0 && g < attn_engine_num_encoder_groups(e); g++)
            if (attn_engine_encoder_group_info_get(e, g, &ei) == ATTN_OK && ei.model_group == mg)
                enc = g;
        if (!kv && enc >= 0) {
            /* driven every step over the new prompt tokens, K/V passed directly */
            char kern[600];
            printf("  layer group %d (%s, no paged KV cache): %s (%s), non-causal over each "
                   "step's new prompt tokens, K/V passed directly\n",
                   mg, attn_attn_type_name(attn_model_group_spec(m, mg)->attn_type), ei.backend,
                   ei.requested ? "requested" : "chosen by the platform's priority list");
            printf("    attention: %s", attn__kernel_text(&ei, kern, sizeof kern));
            if (ei.kernel_mode != ATTN_KERNEL_NONE)
                printf(", %d of %d layers per step", ei.layers_run, ei.num_layers);
            printf("\n");
        } else if (!kv) {
            const attn_selection *sel = attn_engine_selection(e, mg);
            printf("  layer group %d (%s, no paged KV cache): %s (selected; not driven by the "
                   "decoder step loop)\n",
                   mg, attn_attn_type_name(attn_model_group_spec(m, mg)->attn_type),
                   sel && attn_selection_backend(sel) ? attn_selection_backend(sel) : "-");
        }
    }
}

static void attn__print_kv_group(const attn_engine *e, const attn_model *m, int g)
{
    attn_engine_group_info gi;
    attn_engine_group_info_get(e, g, &gi);
    const attn_layer_spec *s = attn_model_group_spec(m, gi.model_group);
    char layers[256], shape[128], kern[600];
    attn__layers_text(gi.layers, gi.num_layers, layers, sizeof layers);
    attn_kv_shape_format(&gi.kv_shape, shape, sizeof shape);
    printf("KV group %d: %s (%d), %s, %d heads / %d KV heads, head size %d", g, layers,
           gi.num_layers, attn_kv_kind_name(gi.kind), s->num_heads, s->num_kv_heads, s->head_size);
    if (s->sliding_window) printf(", window %d", s->sliding_window);
    printf("\n  backend: %s (%s)\n", gi.backend,
           gi.requested ? "requested" : "chosen by the platform's priority list");
    char *why = NULL;
    if (attn_selection_explain(gi.selection, &why) == ATTN_OK && why) {
        printf("  why:\n");
        attn__print_indented(why, "    ");
    }
    free(why);
    printf("  metadata: %s builder, graph capture %s, reorder threshold %d\n", gi.builder_type,
           attn_cg_support_name(gi.cg_support), gi.reorder_batch_threshold);
    printf("  KV cache per layer: %s %s, %s layout; %.3f MiB per block for %d layers\n", shape,
           attn_elem_name(gi.kv_elem), attn_layout_name(gi.layout), attn__mib(gi.bytes_per_block),
           gi.num_layers);
    printf("  attention: %s", attn__kernel_text(&gi, kern, sizeof kern));
    if (gi.kernel_mode != ATTN_KERNEL_NONE)
        printf(", %d of %d layers per step", gi.layers_run, gi.num_layers);
    printf("\n");
}

void attn__print_startup(const attn_engine *e, const attn_platform *p, const attn_model *m, int dcp)
{
    int maj = 0, min = 0;
    bool cc = attn_platform_capability(p, &maj, &min);
    const char *gfx = attn_platform_gfx_arch(p);
    printf("machine: %s (%s, %s", attn_platform_name(p), attn_platform_device_name(p),
           attn_platform_kind_name(attn_platform_get_kind(p)));
    if (cc) printf(" %d.%d", maj, min);
    if (gfx && *gfx) printf(" %s", gfx);
    printf("%s)\n", attn_platform_is_simulated(p) ? ", simulated" : "");
    int ng = attn_engine_num_groups(e);
    printf("model: %s (%d layers, %s), %d KV-cache group%s\n", attn_model_name(m),
           attn_model_num_layers(m), attn_dtype_name(attn_model_dtype(m)), ng, ng == 1 ? "" : "s");
    if (ng == 0) printf("  no layer keeps a KV cache: no attention metadata is built\n");
    attn__print_model_groups(e, m);
    for (int g = 0; g < ng; g++)
        attn__print_kv_group(e, m, g);
    if (ng > 0) {
        int bs = attn_engine_block_size(e), nb = attn_engine_num_blocks(e);
        printf("block size: %d (%s)\n", bs, attn_engine_block_size_source(e));
        if (dcp > 1) /* a scheduler block holds bs tokens on each rank */
            printf("KV pool per rank: %d blocks x %d tokens of its own = %lld tokens per group "
                   "(of %lld across %d ranks), %.1f MiB in all\n",
                   nb, bs, (long long)nb * bs, (long long)nb * bs * dcp, dcp,
                   attn__mib(attn_engine_kv_bytes(e)));
        else
            printf("KV pool: %d blocks x %d tokens = %lld tokens per group, %.1f MiB in all\n", nb,
                   bs, (long long)nb * bs, attn__mib(attn_engine_kv_bytes(e)));
    }
    printf("max model len: %d\n", attn_engine_max_model_len(e));
}

void attn__print_blocks(const attn_engine *e, const char *when)
{
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        attn_engine_block_stats(e, g, &b);
        printf("blocks %s, group %d: %d total, %d free, %d in use; references: %lld by requests, "
               "%lld by the prefix cache, %lld leaked; double frees refused: %lld; %s\n",
               when, g, b.num_blocks, b.num_free, b.num_used, (long long)b.held_by_requests,
               (long long)b.held_by_prefix_cache, (long long)b.leaked,
               (long long)b.rejected_releases, b.consistent ? "consistent" : "INCONSISTENT");
    }
}

bool attn__blocks_ok(const attn_engine *e, bool released)
{
    bool ok = true;
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        attn_engine_block_stats(e, g, &b);
        ok = ok && b.leaked == 0 && b.rejected_releases == 0 && b.consistent &&
             (!released || b.num_free == b.num_blocks);
    }
    return ok;
}
