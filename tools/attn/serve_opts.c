/* `attn serve` options: usage text and the parser (defaults, integer
 * options from one table, flags, and the options with values of their own
 * kind). */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

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

/* Integer options: name, range, field, and whether it shapes the model. */
typedef struct attn__serve_int_opt {
    const char *name;
    long lo, hi;
    size_t off; /* of the long in attn__serve_opts */
    bool shape;
} attn__serve_int_opt;

#define O(f) offsetof(attn__serve_opts, f)
static const attn__serve_int_opt attn__serve_ints[] = {
    {"--layers", 1, 100000, O(layers), true},
    {"--heads", 1, 4096, O(heads), true},
    {"--kv-heads", 1, 4096, O(kv_heads), true},
    {"--head-size", 1, 65536, O(head_size), true},
    {"--block-size", 1, 1 << 16, O(block_size), false},
    {"--num-blocks", 1, 1 << 24, O(num_blocks), false},
    {"--max-num-seqs", 1, 1 << 16, O(max_seqs), false},
    {"--max-batched-tokens", 1, 1 << 20, O(max_tokens), false},
    {"--max-model-len", 1, 1 << 24, O(max_model_len), false},
    {"--dcp", 1, 1024, O(dcp), false},
    {"--dcp-interleave", 1, 1 << 16, O(dcp_interleave), false},
    {"--steps", 0, 10000000, O(steps), false},
};
#undef O

/* Boolean flags. */
static bool *attn__serve_flag(attn__serve_opts *o, char **argv, int i)
{
    if (attn_cli_flag(argv, i, "--json")) return &o->json;
    if (attn_cli_flag(argv, i, "--quiet")) return &o->quiet;
    if (attn_cli_flag(argv, i, "--no-kernels")) return &o->no_kernels;
    if (attn_cli_flag(argv, i, "--verify")) return &o->verify;
    if (attn_cli_flag(argv, i, "--check")) return &o->check;
    return NULL;
}

/* One integer option at argv[*i]: 1 taken, 0 not this kind, exit code on error. */
static int attn__serve_int(int argc, char **argv, int *i, attn__serve_opts *o, bool *bad)
{
    for (size_t k = 0; k < sizeof attn__serve_ints / sizeof attn__serve_ints[0]; k++) {
        const attn__serve_int_opt *t = &attn__serve_ints[k];
        const char *v = NULL;
        if (!attn_cli_opt(argc, argv, i, t->name, &v, bad)) continue;
        if (v && !attn_cli_int("serve", t->name, v, t->lo, t->hi, (long *)((char *)o + t->off)))
            return ATTN_EXIT_USAGE;
        o->shape_given = o->shape_given || t->shape;
        return 1;
    }
    return 0;
}

static int attn__serve_backend_for(attn__serve_opts *o, const char *v)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    char kind[64];
    attn_kv_kind k;
    if (!v) return -1;
    if (!eq || (size_t)(eq - v) >= sizeof kind)
        return attn_cli_usage_error("serve", "--backend-for: expected KIND=NAME, got '%s'", v);
    memcpy(kind, v, (size_t)(eq - v));
    kind[eq - v] = '\0';
    if (attn_kv_kind_parse(kind, &k) != ATTN_OK)
        return attn_cli_usage_error("serve", "--backend-for: %s", attn_last_error());
    o->per_kind[k] = eq + 1;
    return -1;
}

static int attn__serve_seed(attn__serve_opts *o, const char *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long s = v ? strtoull(v, &end, 10) : 0;
    /* strtoull takes "-1" and clamps overflow: both are user errors here */
    if (v && (!isdigit((unsigned char)*v) || *end || errno == ERANGE))
        return attn_cli_usage_error("serve", "--seed: expected an integer in [0, 2^64-1], got '%s'",
                                    v);
    if (v) o->traffic.seed = s;
    return -1;
}

static void attn__serve_defaults(attn__serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->layers = 32, o->heads = 32, o->kv_heads = 8, o->head_size = 128;
    o->dtype = ATTN_DTYPE_BF16;
    o->kv = ATTN_KV_AUTO;
    o->steps = 20;
    attn_traffic_config_init(&o->traffic);
    o->traffic.prefix_len = 256;
    o->backend = getenv("ATTN_BACKEND");
    if (o->backend && !*o->backend) o->backend = NULL;
}

/* The options with a value of their own kind: -1 taken (or not this one:
 * *taken false), else an exit code. */
static int attn__serve_other(int argc, char **argv, int *i, attn__serve_opts *o, bool *bad,
                             bool *taken)
{
    const char *cmd = "serve", *v = NULL;
    long n = 0;
    *taken = true;
    if (attn_cli_opt(argc, argv, i, "--machine", &v, bad)) {
        o->machine = v;
    } else if (attn_cli_opt(argc, argv, i, "--installed", &v, bad)) {
        o->installed = v;
    } else if (attn_cli_opt(argc, argv, i, "--setting", &v, bad)) {
        if (v && o->num_settings >= 32)
            return attn_cli_usage_error(cmd, "too many --setting options");
        if (v) o->settings[o->num_settings++] = v;
    } else if (attn_cli_opt(argc, argv, i, "--model", &v, bad)) {
        o->model = v;
    } else if (attn_cli_opt(argc, argv, i, "--backend", &v, bad)) {
        o->backend = v && strcmp(v, "auto") ? v : NULL;
    } else if (attn_cli_opt(argc, argv, i, "--backend-for", &v, bad)) {
        return attn__serve_backend_for(o, v);
    } else if (attn_cli_opt(argc, argv, i, "--dtype", &v, bad)) {
        if (v && attn_dtype_parse(v, &o->dtype) != ATTN_OK)
            return attn_cli_usage_error(cmd, "--dtype: %s", attn_last_error());
        o->shape_given = true;
    } else if (attn_cli_opt(argc, argv, i, "--kv-cache-dtype", &v, bad)) {
        if (v && attn_kv_dtype_parse(v, &o->kv) != ATTN_OK)
            return attn_cli_usage_error(cmd, "%s", attn_last_error());
    } else if (attn_cli_opt(argc, argv, i, "--dcp-timeout", &v, bad)) {
        if (v && !attn__parse_double("--dcp-timeout", v, 0.001, 1e6, &o->dcp_timeout))
            return ATTN_EXIT_USAGE;
    } else if (attn_cli_opt(argc, argv, i, "--rate", &v, bad)) {
        if (v && !attn__parse_double("--rate", v, 0, 1e5, &o->traffic.rate)) return ATTN_EXIT_USAGE;
    } else if (attn_cli_opt(argc, argv, i, "--prompt-len", &v, bad)) {
        if (v &&
            !attn__parse_range("--prompt-len", v, &o->traffic.prompt_min, &o->traffic.prompt_max))
            return ATTN_EXIT_USAGE;
    } else if (attn_cli_opt(argc, argv, i, "--output-len", &v, bad)) {
        if (v &&
            !attn__parse_range("--output-len", v, &o->traffic.output_min, &o->traffic.output_max))
            return ATTN_EXIT_USAGE;
    } else if (attn_cli_opt(argc, argv, i, "--prefix-share", &v, bad)) {
        if (v && !attn__parse_double("--prefix-share", v, 0, 1, &o->traffic.prefix_fraction))
            return ATTN_EXIT_USAGE;
    } else if (attn_cli_opt(argc, argv, i, "--prefix-len", &v, bad)) {
        if (v && !attn_cli_int(cmd, "--prefix-len", v, 1, 1 << 24, &n)) return ATTN_EXIT_USAGE;
        if (v) o->traffic.prefix_len = (int)n;
    } else if (attn_cli_opt(argc, argv, i, "--seed", &v, bad)) {
        return attn__serve_seed(o, v);
    } else if (attn_cli_opt(argc, argv, i, "--layers-to-run", &v, bad)) {
        if (v && !strcmp(v, "all"))
            o->layers_to_run = -1;
        else if (v && !attn_cli_int(cmd, "--layers-to-run", v, 1, 100000, &o->layers_to_run))
            return ATTN_EXIT_USAGE;
    } else {
        *taken = false;
    }
    return -1;
}

int attn__serve_parse(int argc, char **argv, attn__serve_opts *o)
{
    attn__serve_defaults(o);
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        if (attn_cli_is_help(argv[i])) {
            attn__serve_usage(stdout);
            return ATTN_EXIT_OK;
        }
        bool *flag = attn__serve_flag(o, argv, i), taken = true;
        int rc = flag ? 1 : attn__serve_int(argc, argv, &i, o, &bad);
        if (flag) *flag = true;
        if (rc == 0) rc = attn__serve_other(argc, argv, &i, o, &bad, &taken);
        if (!taken) return attn_cli_usage_error("serve", "unknown option '%s'", argv[i]);
        if (rc >= 0 && rc != 1) return rc;
        if (bad) return ATTN_EXIT_USAGE;
    }
    if (o->model && o->shape_given)
        return attn_cli_usage_error("serve", "--model and shape flags (--layers, --heads, ...) "
                                             "are exclusive");
    return -1;
}
