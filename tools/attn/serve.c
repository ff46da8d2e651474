/* `attn serve`: start an engine on a machine and run steps of synthetic
 * traffic through it.
 *
 * Prints the startup summary (the backend of every KV group and why, the
 * block size and where it came from, the KV pool), one line per step
 * (requests running/waiting, tokens, blocks in use, preemptions, metadata
 * build time, attention time — labelled emulated when a CPU kernel stands
 * in for the machine's backend), and the final block accounting, before
 * and after every request is released. --json prints the same as one
 * object. Exit codes: 0 served, 3 startup failed (the message is the
 * selector's), 2 usage error, 1 a step failed. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "attn/kvcache.h"
#include "attn/model.h"
#include "cli.h"
#include "harness/engine_json.h"
#include "harness/harness.h"
#include "serve_dcp.h"
#include "util/strbuf.h"

static void attn__serve_usage(FILE *f)
{
    fprintf(
        f,
        "usage: attn serve [options]\n\n"
        "Start an engine (plugins, platform, one backend per KV-cache group, KV pool,\n"
        "builders, kernels) and run steps of seeded synthetic traffic through it.\n\n"
        "machine:\n"
        "  --machine M             catalog name (h100, a100, mi300x...), cuda:X.Y, rocm:gfxNNN,\n"
        "                          xpu, cpu or a JSON spec (default: ATTN_PLATFORM, else here)\n"
        "  --installed a,b         installed components of the machine\n"
        "  --setting k=v           machine setting; repeatable\n"
        "model (default llama-3.1-8b):\n"
        "  --model NAME|FILE       preset name or Hugging Face config.json\n"
        "  --layers N --heads N --kv-heads N --head-size N --dtype fp16|bf16|fp32\n"
        "                          a decoder of identical full-attention layers instead\n"
        "launch:\n"
        "  --backend NAME          requested backend, or auto (default: ATTN_BACKEND)\n"
        "  --backend-for KIND=NAME per-kind override (full_attention, sliding_window,\n"
        "                          mla_attention, ...); repeatable\n"
        "  --block-size N          KV block size (default: the backend's preferred)\n"
        "  --kv-cache-dtype S      auto, fp8, fp8_e4m3, fp8_e5m2, ... (default auto)\n"
        "  --num-blocks N          blocks per KV-cache group (default: from device memory)\n"
        "  --max-num-seqs N        default 256\n"
        "  --max-batched-tokens N  token budget per step (default 2048)\n"
        "  --max-model-len N       default 8192 (or what the pool holds)\n"
        "traffic:\n"
        "  --steps N               default 20\n"
        "  --rate R                mean new requests per step (default 1)\n"
        "  --prompt-len A:B        uniform prompt lengths (default 32:512)\n"
        "  --output-len A:B        uniform output lengths (default 16:128)\n"
        "  --prefix-share F        fraction of requests with a shared prefix (default 0)\n"
        "  --prefix-len N          shared prefix length (default 256)\n"
        "  --seed S                default 0\n"
        "attention:\n"
        "  --layers-to-run N|all   layers computed per KV group (default 1)\n"
        "  --no-kernels            build metadata only\n"
        "  --verify                also run REFERENCE and report the largest difference\n"
        "  --check                 check each step's common metadata for consistency\n"
        "context parallelism (run under mpirun -np N):\n"
        "  --dcp N                 decode context parallelism over N ranks (default 1)\n"
        "  --dcp-interleave N      KV tokens dealt to a rank in runs of N (default 1)\n"
        "  --dcp-timeout S         seconds a rank waits for the others (default 60)\n"
        "output:\n"
        "  --quiet                 no per-step lines\n"
        "  --json                  one JSON object\n\n"
        "exit status: 0 served, 3 startup failed, 2 usage error, 1 a step failed\n");
}

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

static bool attn__parse_range(const char *opt, const char *v, int *lo, int *hi)
{
    char *end = NULL;
    long a = strtol(v, &end, 10), b = a;
    if (end && *end == ':') b = strtol(end + 1, &end, 10);
    if (!end || *end || a < 1 || b < a || b > (1 << 24)) {
        fprintf(stderr, "attn serve: %s: expected MIN:MAX with 1 <= MIN <= MAX, got '%s'\n", opt,
                v);
        return false;
    }
    *lo = (int)a;
    *hi = (int)b;
    return true;
}

static bool attn__parse_double(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    double d = strtod(v, &end);
    if (!*v || !end || *end || !(d >= lo && d <= hi)) {
        fprintf(stderr, "attn serve: %s: expected a number in [%g, %g], got '%s'\n", opt, lo, hi,
                v);
        return false;
    }
    *out = d;
    return true;
}

static int attn__serve_parse(int argc, char **argv, attn__serve_opts *o)
{
    const char *cmd = "serve";
    memset(o, 0, sizeof *o);
    o->layers = 32, o->heads = 32, o->kv_heads = 8, o->head_size = 128;
    o->dtype = ATTN_DTYPE_BF16;
    o->kv = ATTN_KV_AUTO;
    o->steps = 20;
    attn_traffic_config_init(&o->traffic);
    o->traffic.prefix_len = 256;
    o->backend = getenv("ATTN_BACKEND");
    if (o->backend && !*o->backend) o->backend = NULL;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        long n = 0;
        if (attn_cli_is_help(argv[i])) {
            attn__serve_usage(stdout);
            return ATTN_EXIT_OK;
        } else if (attn_cli_flag(argv, i, "--json")) {
            o->json = true;
        } else if (attn_cli_flag(argv, i, "--quiet")) {
            o->quiet = true;
        } else if (attn_cli_flag(argv, i, "--no-kernels")) {
            o->no_kernels = true;
        } else if (attn_cli_flag(argv, i, "--verify")) {
            o->verify = true;
        } else if (attn_cli_flag(argv, i, "--check")) {
            o->check = true;
        } else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad)) {
            o->machine = v;
        } else if (attn_cli_opt(argc, argv, &i, "--installed", &v, &bad)) {
            o->installed = v;
        } else if (attn_cli_opt(argc, argv, &i, "--setting", &v, &bad)) {
            if (v && o->num_settings >= 32)
                return attn_cli_usage_error(cmd, "too many --setting options");
            if (v) o->settings[o->num_settings++] = v;
        } else if (attn_cli_opt(argc, argv, &i, "--model", &v, &bad)) {
            o->model = v;
        } else if (attn_cli_opt(argc, argv, &i, "--backend", &v, &bad)) {
            o->backend = v && strcmp(v, "auto") ? v : NULL;
        } else if (attn_cli_opt(argc, argv, &i, "--backend-for", &v, &bad)) {
            const char *eq = v ? strchr(v, '=') : NULL;
            char kind[64];
            attn_kv_kind k;
            if (v && (!eq || (size_t)(eq - v) >= sizeof kind))
                return attn_cli_usage_error(cmd, "--backend-for: expected KIND=NAME, got '%s'", v);
            if (v) {
                memcpy(kind, v, (size_t)(eq - v));
                kind[eq - v] = '\0';
                if (attn_kv_kind_parse(kind, &k) != ATTN_OK)
                    return attn_cli_usage_error(cmd, "--backend-for: %s", attn_last_error());
                o->per_kind[k] = eq + 1;
            }
        } else if (attn_cli_opt(argc, argv, &i, "--layers", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--layers", v, 1, 100000, &o->layers))
                return ATTN_EXIT_USAGE;
            o->shape_given = true;
        } else if (attn_cli_opt(argc, argv, &i, "--heads", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--heads", v, 1, 4096, &o->heads)) return ATTN_EXIT_USAGE;
            o->shape_given = true;
        } else if (attn_cli_opt(argc, argv, &i, "--kv-heads", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--kv-heads", v, 1, 4096, &o->kv_heads))
                return ATTN_EXIT_USAGE;
            o->shape_given = true;
        } else if (attn_cli_opt(argc, argv, &i, "--head-size", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--head-size", v, 1, 65536, &o->head_size))
                return ATTN_EXIT_USAGE;
            o->shape_given = true;
        } else if (attn_cli_opt(argc, argv, &i, "--dtype", &v, &bad)) {
            if (v && attn_dtype_parse(v, &o->dtype) != ATTN_OK)
                return attn_cli_usage_error(cmd, "--dtype: %s", attn_last_error());
            o->shape_given = true;
        } else if (attn_cli_opt(argc, argv, &i, "--kv-cache-dtype", &v, &bad)) {
            if (v && attn_kv_dtype_parse(v, &o->kv) != ATTN_OK)
                return attn_cli_usage_error(cmd, "%s", attn_last_error());
        } else if (attn_cli_opt(argc, argv, &i, "--block-size", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--block-size", v, 1, 1 << 16, &o->block_size))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--num-blocks", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--num-blocks", v, 1, 1 << 24, &o->num_blocks))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--max-num-seqs", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--max-num-seqs", v, 1, 1 << 16, &o->max_seqs))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--max-batched-tokens", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--max-batched-tokens", v, 1, 1 << 20, &o->max_tokens))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--max-model-len", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--max-model-len", v, 1, 1 << 24, &o->max_model_len))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--dcp", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--dcp", v, 1, 1024, &o->dcp)) return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--dcp-interleave", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--dcp-interleave", v, 1, 1 << 16, &o->dcp_interleave))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--dcp-timeout", &v, &bad)) {
            if (v && !attn__parse_double("--dcp-timeout", v, 0.001, 1e6, &o->dcp_timeout))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--steps", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--steps", v, 0, 10000000, &o->steps))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--rate", &v, &bad)) {
            if (v && !attn__parse_double("--rate", v, 0, 1e5, &o->traffic.rate))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--prompt-len", &v, &bad)) {
            if (v && !attn__parse_range("--prompt-len", v, &o->traffic.prompt_min,
                                        &o->traffic.prompt_max))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--output-len", &v, &bad)) {
            if (v && !attn__parse_range("--output-len", v, &o->traffic.output_min,
                                        &o->traffic.output_max))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--prefix-share", &v, &bad)) {
            if (v && !attn__parse_double("--prefix-share", v, 0, 1, &o->traffic.prefix_fraction))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--prefix-len", &v, &bad)) {
            if (v && !attn_cli_int(cmd, "--prefix-len", v, 1, 1 << 24, &n)) return ATTN_EXIT_USAGE;
            o->traffic.prefix_len = (int)n;
        } else if (attn_cli_opt(argc, argv, &i, "--seed", &v, &bad)) {
            char *end = NULL;
            errno = 0;
            unsigned long long s = v ? strtoull(v, &end, 10) : 0;
            /* strtoull takes "-1" and clamps overflow: both are user errors here */
            if (v && (!isdigit((unsigned char)*v) || *end || errno == ERANGE))
                return attn_cli_usage_error(
                    cmd, "--seed: expected an integer in [0, 2^64-1], got '%s'", v);
            o->traffic.seed = s;
        } else if (attn_cli_opt(argc, argv, &i, "--layers-to-run", &v, &bad)) {
            if (v && !strcmp(v, "all"))
                o->layers_to_run = -1;
            else if (v && !attn_cli_int(cmd, "--layers-to-run", v, 1, 100000, &o->layers_to_run))
                return ATTN_EXIT_USAGE;
        } else {
            return attn_cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        }
        if (bad) return ATTN_EXIT_USAGE;
    }
    if (o->model && o->shape_given)
        return attn_cli_usage_error(cmd, "--model and shape flags (--layers, --heads, ...) "
                                         "are exclusive");
    return -1;
}

static int attn__serve_platform(const attn__serve_opts *o, const attn_platform **p,
                                attn_platform **owned)
{
    if (attn_cli_machine(o->machine, o->installed, o->settings, o->num_settings, p, owned) !=
        ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    return -1;
}

/* ---- text output ------------------------------------------------------------ */

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

static void attn__print_startup(const attn_engine *e, const attn_platform *p, const attn_model *m,
                                int dcp)
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
    for (int g = 0; g < ng; g++) {
        attn_engine_group_info gi;
        attn_engine_group_info_get(e, g, &gi);
        const attn_layer_spec *s = attn_model_group_spec(m, gi.model_group);
        char layers[256], shape[128], kern[600];
        attn__layers_text(gi.layers, gi.num_layers, layers, sizeof layers);
        attn_kv_shape_format(&gi.kv_shape, shape, sizeof shape);
        printf("KV group %d: %s (%d), %s, %d heads / %d KV heads, head size %d", g, layers,
               gi.num_layers, attn_kv_kind_name(gi.kind), s->num_heads, s->num_kv_heads,
               s->head_size);
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
               attn_elem_name(gi.kv_elem), attn_layout_name(gi.layout),
               attn__mib(gi.bytes_per_block), gi.num_layers);
        printf("  attention: %s", attn__kernel_text(&gi, kern, sizeof kern));
        if (gi.kernel_mode != ATTN_KERNEL_NONE)
            printf(", %d of %d layers per step", gi.layers_run, gi.num_layers);
        printf("\n");
    }
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

/* ---- JSON output -------------------------------------------------------------- */

static void attn__print_blocks(const attn_engine *e, const char *when)
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

static bool attn__blocks_ok(const attn_engine *e, bool released)
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

int attn_cmd_serve(int argc, char **argv)
{
    attn__serve_opts o;
    int rc = attn__serve_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    rc = attn__serve_platform(&o, &p, &owned);
    if (rc >= 0) return rc;
    attn_model *m = NULL;
    attn_status st = o.shape_given
                         ? attn_model_from_shape((int)o.layers, (int)o.heads, (int)o.kv_heads,
                                                 (int)o.head_size, o.dtype, &m)
                         : attn_model_load(o.model ? o.model : "llama-3.1-8b", &m);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn serve: model: %s\n", attn_last_error());
        attn_platform_free(owned);
        return ATTN_EXIT_USAGE;
    }
    attn_traffic *traffic = NULL;
    if (attn_traffic_create(&o.traffic, &traffic) != ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        attn_model_free(m);
        attn_platform_free(owned);
        return ATTN_EXIT_USAGE;
    }

    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.backend = o.backend;
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        cfg.per_kind[k] = o.per_kind[k];
    cfg.block_size = (int)o.block_size;
    cfg.kv_cache_dtype = o.kv;
    cfg.num_blocks = (int)o.num_blocks;
    cfg.max_num_seqs = (int)o.max_seqs;
    cfg.max_num_batched_tokens = (int)o.max_tokens;
    cfg.max_model_len = (int)o.max_model_len;
    cfg.run_kernels = !o.no_kernels;
    cfg.layers_to_run = (int)o.layers_to_run;
    cfg.check_metadata = o.check;
    attn__harness_config hc = {.seed = o.traffic.seed, .verify = o.verify, .stand_ins = true};
    attn__harness *h = NULL;
    if ((st = attn__harness_create(&hc, &h)) != ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        attn_traffic_free(traffic);
        attn_model_free(m);
        attn_platform_free(owned);
        return ATTN_EXIT_ERROR;
    }
    attn_comm *dcp = NULL;
    attn__dcp_acc dcp_acc = {0};
    rc = attn__serve_dcp_open(o.dcp, o.dcp_timeout, &dcp);
    if (rc >= 0) {
        attn__harness_free(h);
        attn_traffic_free(traffic);
        attn_model_free(m);
        attn_platform_free(owned);
        return rc;
    }
    cfg.dcp_comm = dcp;
    cfg.dcp_interleave = (int)o.dcp_interleave;
    attn_engine *e = NULL;
    st = attn__harness_engine_create(h, &cfg, &e);

    attn__sb sb;
    attn__jw w;
    attn__sb_init(&sb);
    attn__jw_init(&w, &sb, true);
    if (o.json) {
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "machine");
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, attn_platform_name(p));
        attn__jw_key(&w, "device");
        attn__jw_str(&w, attn_platform_device_name(p));
        attn__jw_key(&w, "kind");
        attn__jw_str(&w, attn_platform_kind_name(attn_platform_get_kind(p)));
        attn__jw_key(&w, "simulated");
        attn__jw_bool(&w, attn_platform_is_simulated(p));
        attn__jw_obj_end(&w);
        attn__jw_key(&w, "model");
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, attn_model_name(m));
        attn__jw_key(&w, "layers");
        attn__jw_int(&w, attn_model_num_layers(m));
        attn__jw_key(&w, "dtype");
        attn__jw_str(&w, attn_dtype_name(attn_model_dtype(m)));
        attn__jw_obj_end(&w);
        attn__jw_key(&w, "state");
        attn__jw_str(&w, e && attn_engine_get_state(e) == ATTN_ENGINE_READY ? "ready" : "failed");
        attn__jw_key(&w, "error");
        attn__jw_str(&w, e ? attn_engine_error(e) : attn_last_error());
    }
    if (st != ATTN_OK) {
        const char *msg = e ? attn_engine_error(e) : attn_last_error();
        fprintf(stderr, "attn serve: startup failed: %s\n", msg);
        if (o.json) {
            attn__jw_obj_end(&w);
            char *text = attn__sb_take(&sb);
            if (text) printf("%s\n", text);
            free(text);
        }
        attn__sb_free(&sb);
        attn_engine_free(e);
        attn__harness_free(h);
        attn_comm_free(dcp);
        attn_traffic_free(traffic);
        attn_model_free(m);
        attn_platform_free(owned);
        return e ? ATTN_EXIT_FAILED : ATTN_EXIT_USAGE;
    }
    if (o.json) {
        attn__engine_json_summary(&w, e, dcp ? attn_comm_size(dcp) : 1);
        attn__jw_key(&w, "steps");
        attn__jw_arr_begin(&w);
    } else {
        attn__print_startup(e, p, m, dcp ? attn_comm_size(dcp) : 1);
        printf("serving %ld steps: %g new requests per step, prompts %d..%d, outputs %d..%d",
               o.steps, o.traffic.rate, o.traffic.prompt_min, o.traffic.prompt_max,
               o.traffic.output_min, o.traffic.output_max);
        if (o.traffic.prefix_fraction > 0)
            printf(", %.0f%% with a %d-token shared prefix", o.traffic.prefix_fraction * 100,
                   o.traffic.prefix_len);
        printf(", seed %llu\n", (unsigned long long)o.traffic.seed);
        if (!o.quiet)
            printf("%6s %5s %5s %5s %7s %11s %7s %7s %9s %9s\n", "step", "reqs", "run", "wait",
                   "tokens", "prefill/dec", "blocks", "preempt", "meta_us", "attn_ms");
    }
    attn_request_desc arrivals[256];
    long rejected = 0;
    int exit_code = ATTN_EXIT_OK;
    bool emulated = false;
    double max_diff = 0;
    for (long s = 0; s < o.steps; s++) {
        int n;
        while ((n = attn_traffic_next(traffic, arrivals, 256)) > 0) {
            for (int i = 0; i < n; i++)
                if (attn_engine_add_request(e, &arrivals[i], NULL) != ATTN_OK) rejected++;
            if (n < 256) break;
        }
        attn_engine_step_stats ss;
        attn__harness_stats hs;
        st = attn__harness_step(h, e, &ss, &hs);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn serve: step %ld failed: %s: %s\n", s, attn_status_name(st),
                    attn_last_error());
            if (dcp) attn__serve_dcp_abort(dcp); /* the other ranks would wait for this one */
            exit_code = ATTN_EXIT_ERROR;
            break;
        }
        emulated = emulated || ss.emulated;
        if (dcp) attn__serve_dcp_step(&dcp_acc, &ss, &hs);
        max_diff = hs.max_abs_diff > max_diff ? hs.max_abs_diff : max_diff;
        if (o.json) {
            attn__engine_json_step(&w, &ss, &hs);
        } else if (!o.quiet) {
            char pd[32];
            snprintf(pd, sizeof pd, "%d/%d", ss.num_prefill_tokens, ss.num_decode_tokens);
            printf("%6lld %5d %5d %5d %7d %11s %7d %7d %9.1f %9.3f%s\n", (long long)ss.step,
                   ss.num_reqs, ss.running, ss.waiting, ss.num_tokens, pd, ss.blocks_in_use,
                   ss.preempted, ss.metadata_ns / 1e3, ss.attention_ns / 1e6,
                   ss.emulated ? " emulated" : "");
        }
    }
    attn_engine_counts c;
    attn_engine_get_counts(e, &c);
    bool ok_before = attn__blocks_ok(e, false);
    if (o.json) {
        attn__jw_arr_end(&w);
        attn__jw_key(&w, "final");
        attn__jw_obj_begin(&w);
#define I(k, v)                                                                                    \
    attn__jw_key(&w, k);                                                                           \
    attn__jw_int(&w, (long long)(v))
        I("steps", c.steps);
        I("added", c.added);
        I("rejected", rejected);
        I("admitted", c.admitted);
        I("finished", c.finished);
        I("preemptions", c.preemptions);
        I("tokens", c.tokens);
        I("running", c.running);
        I("waiting", c.waiting);
#undef I
        attn__jw_key(&w, "emulated");
        attn__jw_bool(&w, emulated);
        attn__jw_key(&w, "max_abs_diff");
        attn__jw_num(&w, max_diff);
        attn__jw_key(&w, "blocks");
        attn__engine_json_blocks(&w, e);
        if (dcp) attn__serve_dcp_report(dcp, e, &dcp_acc, o.dcp_interleave, &w);
    } else {
        printf("served %lld steps: %lld requests added (%ld refused), %lld admitted, %lld "
               "finished, %lld preemptions, %lld tokens; %d running, %d waiting\n",
               (long long)c.steps, (long long)c.added, rejected, (long long)c.admitted,
               (long long)c.finished, (long long)c.preemptions, (long long)c.tokens, c.running,
               c.waiting);
        if (emulated)
            printf("attention math: emulated on this machine's CPU kernels%s\n",
                   o.verify ? "" : " (use --verify to check against REFERENCE)");
        if (o.verify) printf("largest difference from REFERENCE: %.3g\n", max_diff);
        if (dcp) attn__serve_dcp_report(dcp, e, &dcp_acc, o.dcp_interleave, NULL);
        attn__print_blocks(e, "at the end");
    }
    attn_engine_abort_all(e);
    bool ok_after = attn__blocks_ok(e, true);
    if (o.json) {
        attn__jw_key(&w, "after_release");
        attn__engine_json_blocks(&w, e);
        attn__jw_key(&w, "accounting_ok");
        attn__jw_bool(&w, ok_before && ok_after);
        attn__jw_obj_end(&w);
        attn__jw_obj_end(&w);
        char *text = attn__sb_take(&sb);
        if (text) printf("%s\n", text);
        free(text);
    } else {
        attn__print_blocks(e, "after releasing every request");
        printf("block accounting: %s\n", ok_before && ok_after ? "ok" : "FAILED");
    }
    attn__sb_free(&sb);
    if (!(ok_before && ok_after) && exit_code == ATTN_EXIT_OK) exit_code = ATTN_EXIT_ERROR;
    attn_engine_free(e);
    attn__harness_free(h);
    attn_comm_free(dcp);
    attn_traffic_free(traffic);
    attn_model_free(m);
    attn_platform_free(owned);
    return exit_code;
}
