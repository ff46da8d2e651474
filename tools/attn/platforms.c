/* `attn platforms [--json] [--machine M]`: this machine as detected (CPU
 * identity and features, the CPU_ATTN kernel variants it can run with
 * their documented errors, then CUDA, ROCm and OpenCL: devices or why
 * there are none), the platform selection would use, and the machine
 * catalog.
 * With --machine M the named simulated machine is described instead of this
 * one. Exit 0; 2 on a usage error or an unknown machine; 3 when the
 * process-wide platform (ATTN_PLATFORM) cannot be made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/cpu_perf.h"
#include "attn/probe.h"
#include "cli.h"
#include "util/json.h"
#include "util/strbuf.h"

static int attn__platforms_usage(FILE *f)
{
    fprintf(f,
            "usage: attn platforms [--json] [--machine M]\n\n"
            "Show this machine's platforms as detected (CPU vendor, model, cores and usable ISA\n"
            "features; the CPU_ATTN kernel variants, which run here, and each one's documented\n"
            "error against REFERENCE; CUDA, ROCm and OpenCL devices, or why there are none),\n"
            "then the machine catalog.\n\n"
            "options:\n"
            "  --json         one JSON object: {\"local\": {...}, \"current\": {...}, \"catalog\": "
            "[...]}\n"
            "                 (local.cpu_attn_variants: name, usable, active, error_vs_reference)\n"
            "                 (with --machine: {\"machine\": {...}, \"catalog\": [...]})\n"
            "  --machine M    describe machine M instead of this one: a catalog name, cuda:X.Y,\n"
            "                 rocm:gfxNNN, xpu, cpu, local, opencl, or a JSON machine spec file\n"
            "  -h, --help     this text\n\n"
            "environment: ATTN_CPU_MASK hides CPU features (\"-avx512,-amx\", \"none\");\n"
            "             ATTN_PLATFORM picks the platform selection uses.\n");
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

static void attn__fmt_gib(uint64_t bytes, char *buf, size_t size)
{
    double g = (double)bytes / 1073741824.0;
    if (bytes == 0)
        snprintf(buf, size, "-");
    else if (g >= 10 || g == (double)(long long)g)
        snprintf(buf, size, "%.0f GiB", g);
    else
        snprintf(buf, size, "%.1f GiB", g);
}

static void attn__installed_text(const attn_platform *p, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int c = 0; c < ATTN_COMPONENT_COUNT && o < size; c++) {
        if (!attn_platform_has_component(p, (attn_component)c)) continue;
        int n = snprintf(buf + o, size - o, "%s%s", o ? "," : "",
                         attn_component_name((attn_component)c));
        o += n > 0 ? (size_t)n : 0;
    }
    if (!buf[0]) snprintf(buf, size, "-");
}

/* Prints words of text wrapped at ~100 columns, each line indented. */
static void attn__print_wrapped(const char *label, const char *text, int indent)
{
    int col = printf("%*s%s", indent, "", label);
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (!n) break;
        if (col + 1 + (int)n > 100 && col > indent + (int)strlen(label)) {
            printf("\n%*s", indent + (int)strlen(label), "");
            col = indent + (int)strlen(label);
        } else if (col > indent + (int)strlen(label)) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)n, p);
        col += (int)n;
        p += n;
    }
    putchar('\n');
}

static void attn__print_cpu(const attn_cpu_info *ci, bool real)
{
    char mem[32], list[512];
    attn__fmt_gib(ci->memory_bytes, mem, sizeof mem);
    printf("  CPU       %s (%s, %s, %d logical cores%s%s)\n", ci->model, ci->vendor, ci->arch,
           ci->logical_cores, ci->memory_bytes ? ", " : "", ci->memory_bytes ? mem : "");
    attn_cpu_feature_list(ci->usable, list, sizeof list);
    attn__print_wrapped("usable:  ", list, 12);
    if (real) {
        attn_cpu_feature_list(ci->masked, list, sizeof list);
        if (ci->masked) strncat(list, " (by ATTN_CPU_MASK)", sizeof list - strlen(list) - 1);
        attn__print_wrapped("masked:  ", list, 12);
        uint64_t off = ci->present & ~ci->usable & ~ci->masked;
        if (off) {
            attn_cpu_feature_list(off, list, sizeof list);
            attn__print_wrapped("present, not usable (OS state or dependency): ", list, 12);
        }
    }
}

/* CPU_ATTN's kernel variants: usable here, active, and the documented
 * error against REFERENCE per class of call */
static void attn__print_cpu_variants(void)
{
    printf("  CPU_ATTN  kernel variants (error vs REFERENCE: fp32 / fp32 + fp8 KV / fp16, bf16)\n");
    for (int i = 0; i < attn_cpu_attn_variant_count(); i++) {
        attn_cpu_attn_variant_info v;
        if (attn_cpu_attn_variant_get(i, &v) != ATTN_OK) continue;
        printf("            %-12s %-10s %.0e / %.0e / %.0e\n", v.name,
               v.active   ? "active"
               : v.usable ? "usable"
                          : "not usable",
               v.err_fp32, v.err_fp8_kv, v.err_half);
    }
}

static void attn__json_cpu_variants(attn__jw *w)
{
    attn__jw_arr_begin(w);
    for (int i = 0; i < attn_cpu_attn_variant_count(); i++) {
        attn_cpu_attn_variant_info v;
        if (attn_cpu_attn_variant_get(i, &v) != ATTN_OK) continue;
        attn__jw_obj_begin(w);
        attn__jw_key(w, "name");
        attn__jw_str(w, v.name);
        attn__jw_key(w, "usable");
        attn__jw_bool(w, v.usable);
        attn__jw_key(w, "active");
        attn__jw_bool(w, v.active);
        attn__jw_key(w, "error_vs_reference");
        attn__jw_obj_begin(w);
        attn__jw_key(w, "fp32");
        attn__jw_num(w, v.err_fp32);
        attn__jw_key(w, "fp32_fp8_kv");
        attn__jw_num(w, v.err_fp8_kv);
        attn__jw_key(w, "fp16_bf16");
        attn__jw_num(w, v.err_half);
        attn__jw_obj_end(w);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

static void attn__print_gpu(const char *label, const attn_gpu_probe *pr, bool rocm)
{
    if (!pr->present) {
        printf("  %-9s not present: %s\n", label, pr->reason);
        return;
    }
    printf("  %-9s %d device(s) through %s\n", label, pr->device_count, pr->library);
    for (int i = 0; i < pr->listed; i++) {
        const attn_gpu_device *d = &pr->devices[i];
        char mem[32], cap[48];
        attn__fmt_gib(d->memory_bytes, mem, sizeof mem);
        if (rocm && d->cc_major >= 0)
            snprintf(cap, sizeof cap, "%s, capability %d.%d", d->gfx_arch, d->cc_major,
                     d->cc_minor);
        else if (rocm)
            snprintf(cap, sizeof cap, "%s", d->gfx_arch[0] ? d->gfx_arch : "gfx arch unknown");
        else
            snprintf(cap, sizeof cap, "cc %d.%d", d->cc_major, d->cc_minor);
        printf("            [%d] %s (%s, %s)\n", i, d->name, cap, mem);
    }
}

static void attn__print_opencl(const attn_opencl_probe *cl)
{
    if (!cl->present) {
        printf("  %-9s not present: %s\n", "OpenCL", cl->reason);
        return;
    }
    printf("  %-9s %d platform(s), %d device(s) through %s\n", "OpenCL", cl->platform_count,
           cl->device_count, cl->library);
    for (int i = 0; i < cl->platform_count; i++) {
        const attn_opencl_platform *pl = &cl->platforms[i];
        printf("            platform %d: %s (%s), %s\n", i, pl->name, pl->vendor, pl->version);
        for (int k = 0; k < cl->device_count; k++) {
            const attn_opencl_device *d = &cl->devices[k];
            if (d->platform != i) continue;
            char mem[32];
            attn__fmt_gib(d->global_mem_bytes, mem, sizeof mem);
            printf("              device %d: %s [%s], %s, %u compute units, %s, fp16: %s, "
                   "fp64: %s\n",
                   k, d->name, d->type, d->version, d->compute_units, mem, d->fp16 ? "yes" : "no",
                   d->fp64 ? "yes" : "no");
            attn__print_wrapped("extensions: ", d->extensions, 16);
        }
    }
}

static void attn__print_machine(const attn_platform *p)
{
    char mem[32], buf[512];
    int maj, min;
    printf("Machine %s (%s)\n", attn_platform_name(p),
           attn_platform_is_simulated(p) ? "simulated" : "this machine");
    printf("  platform     %s\n", attn_platform_kind_name(attn_platform_get_kind(p)));
    printf("  device       %s\n", attn_platform_device_name(p));
    printf("  description  %s\n", attn_platform_description(p));
    if (attn_platform_capability(p, &maj, &min))
        printf("  capability   %d.%d\n", maj, min);
    else
        printf("  capability   None\n");
    if (attn_platform_gfx_arch(p)) printf("  gfx arch     %s\n", attn_platform_gfx_arch(p));
    attn__fmt_gib(attn_platform_memory_bytes(p), mem, sizeof mem);
    printf("  memory       %s\n", mem);
    printf("  devices      %d\n", attn_platform_device_count(p));
    attn__installed_text(p, buf, sizeof buf);
    printf("  installed    %s\n", buf);
    printf("  settings    ");
    for (int s = 0; s < ATTN_SETTING_COUNT; s++)
        printf(" %s=%s", attn_setting_name((attn_setting)s),
               attn_platform_setting(p, (attn_setting)s) ? "true" : "false");
    printf("\n");
    if (attn_platform_get_kind(p) == ATTN_PLATFORM_CPU)
        attn__print_cpu(attn_platform_cpu(p), !attn_platform_is_simulated(p));
}

static void attn__print_catalog(void)
{
    printf("\nMachine catalog (use --machine NAME or ATTN_PLATFORM=NAME; also cuda:X.Y, "
           "rocm:gfxNNN, xpu, cpu,\nlocal, opencl, or a JSON machine spec file)\n");
    printf("  %-8s %-8s %-34s %-14s %-8s %s\n", "NAME", "PLATFORM", "DEVICE", "CAPABILITY",
           "MEMORY", "INSTALLED");
    for (int i = 0; i < attn_catalog_count(); i++) {
        attn_platform *p = NULL;
        if (attn_platform_open(attn_catalog_name(i), &p) != ATTN_OK) {
            printf("  %-8s error: %s\n", attn_catalog_name(i), attn_last_error());
            continue;
        }
        char cap[32] = "None", mem[32], inst[256];
        int maj, min;
        if (attn_platform_capability(p, &maj, &min)) snprintf(cap, sizeof cap, "%d.%d", maj, min);
        if (attn_platform_gfx_arch(p))
            snprintf(cap + strlen(cap), sizeof cap - strlen(cap), " (%s)",
                     attn_platform_gfx_arch(p));
        attn__fmt_gib(attn_platform_memory_bytes(p), mem, sizeof mem);
        attn__installed_text(p, inst, sizeof inst);
        printf("  %-8s %-8s %-34s %-14s %-8s %s\n", attn_platform_name(p),
               attn_platform_kind_name(attn_platform_get_kind(p)), attn_platform_device_name(p),
               cap, mem, inst);
        attn_platform_free(p);
    }
}

/* JSON text from a public *_to_json call, written through w (its layout);
 * {"error": ...} when the text could not be made. */
static void attn__json_embed(attn__jw *w, attn_status st, char *text)
{
    attn__json *v = NULL;
    char err[128];
    if (st == ATTN_OK && attn__json_parse(text, strlen(text), &v, err, sizeof err) == ATTN_OK) {
        attn__json_write(w, v);
    } else {
        attn__jw_obj_begin(w);
        attn__jw_key(w, "error");
        attn__jw_str(w, st == ATTN_OK ? err : attn_last_error());
        attn__jw_obj_end(w);
    }
    attn__json_free(v);
    free(text);
}

static void attn__json_platform(attn__jw *w, const attn_platform *p)
{
    char *text = NULL;
    attn_status st = attn_platform_to_json(p, &text);
    attn__json_embed(w, st, text);
}

static void attn__json_cpu(attn__jw *w, const attn_cpu_info *ci)
{
    char *text = NULL;
    attn_status st = attn_cpu_info_to_json(ci, &text);
    attn__json_embed(w, st, text);
}

/* Opens a runtime's object: whether it is present, through which library,
 * or why not. */
static void attn__json_presence(attn__jw *w, bool present, const char *library, const char *reason)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "present");
    attn__jw_bool(w, present);
    attn__jw_key(w, "library");
    attn__jw_str(w, library[0] ? library : NULL);
    attn__jw_key(w, "reason");
    attn__jw_str(w, present ? NULL : reason);
}

static void attn__json_gpu(attn__jw *w, const attn_gpu_probe *pr, bool rocm)
{
    attn__json_presence(w, pr->present, pr->library, pr->reason);
    attn__jw_key(w, "device_count");
    attn__jw_int(w, pr->device_count);
    attn__jw_key(w, "devices");
    attn__jw_arr_begin(w);
    for (int i = 0; i < pr->listed; i++) {
        const attn_gpu_device *d = &pr->devices[i];
        char cap[32];
        attn__jw_obj_begin(w);
        attn__jw_key(w, "name");
        attn__jw_str(w, d->name);
        attn__jw_key(w, "capability");
        if (d->cc_major >= 0) {
            snprintf(cap, sizeof cap, "%d.%d", d->cc_major, d->cc_minor);
            attn__jw_str(w, cap);
        } else {
            attn__jw_null(w);
        }
        if (rocm) {
            attn__jw_key(w, "gfx_arch");
            attn__jw_str(w, d->gfx_arch[0] ? d->gfx_arch : NULL);
        }
        attn__jw_key(w, "memory_bytes");
        attn__jw_int(w, (long long)d->memory_bytes);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
    attn__jw_obj_end(w);
}

static void attn__json_opencl(attn__jw *w, const attn_opencl_probe *cl)
{
    attn__json_presence(w, cl->present, cl->library, cl->reason);
    attn__jw_key(w, "platforms");
    attn__jw_arr_begin(w);
    for (int i = 0; i < cl->platform_count; i++) {
        const attn_opencl_platform *pl = &cl->platforms[i];
        attn__jw_obj_begin(w);
        attn__jw_key(w, "name");
        attn__jw_str(w, pl->name);
        attn__jw_key(w, "vendor");
        attn__jw_str(w, pl->vendor);
        attn__jw_key(w, "version");
        attn__jw_str(w, pl->version);
        attn__jw_key(w, "devices");
        attn__jw_arr_begin(w);
        for (int k = 0; k < cl->device_count; k++) {
            const attn_opencl_device *d = &cl->devices[k];
            if (d->platform != i) continue;
            attn__jw_obj_begin(w);
            attn__jw_key(w, "name");
            attn__jw_str(w, d->name);
            attn__jw_key(w, "vendor");
            attn__jw_str(w, d->vendor);
            attn__jw_key(w, "type");
            attn__jw_str(w, d->type);
            attn__jw_key(w, "version");
            attn__jw_str(w, d->version);
            attn__jw_key(w, "driver_version");
            attn__jw_str(w, d->driver_version);
            attn__jw_key(w, "compute_units");
            attn__jw_int(w, d->compute_units);
            attn__jw_key(w, "global_mem_bytes");
            attn__jw_int(w, (long long)d->global_mem_bytes);
            attn__jw_key(w, "max_alloc_bytes");
            attn__jw_int(w, (long long)d->max_alloc_bytes);
            attn__jw_key(w, "fp16");
            attn__jw_bool(w, d->fp16);
            attn__jw_key(w, "fp64");
            attn__jw_bool(w, d->fp64);
            attn__jw_key(w, "extensions");
            attn__jw_arr_begin(w);
            for (const char *p = d->extensions; *p;) {
                while (*p == ' ')
                    p++;
                size_t n = strcspn(p, " ");
                if (!n) break;
                char ext[128];
                snprintf(ext, sizeof ext, "%.*s", (int)(n < sizeof ext ? n : sizeof ext - 1), p);
                attn__jw_str(w, ext);
                p += n;
            }
            attn__jw_arr_end(w);
            attn__jw_obj_end(w);
        }
        attn__jw_arr_end(w);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
    attn__jw_obj_end(w);
}

static void attn__json_catalog(attn__jw *w)
{
    attn__jw_arr_begin(w);
    for (int i = 0; i < attn_catalog_count(); i++) {
        attn_platform *p = NULL;
        if (attn_platform_open(attn_catalog_name(i), &p) != ATTN_OK) {
            attn__jw_obj_begin(w);
            attn__jw_key(w, "name");
            attn__jw_str(w, attn_catalog_name(i));
            attn__jw_key(w, "error");
            attn__jw_str(w, attn_last_error());
            attn__jw_obj_end(w);
            continue;
        }
        attn__json_platform(w, p);
        attn_platform_free(p);
    }
    attn__jw_arr_end(w);
}

/* {"error": "..."} for a platform that could not be made. */
static void attn__json_error(attn__jw *w, attn_status st)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "error");
    attn__jw_str(w, attn_last_error());
    attn__jw_key(w, "status");
    attn__jw_str(w, attn_status_name(st));
    attn__jw_obj_end(w);
}

static int attn__platforms_machine(const char *spec, bool json)
{
    attn_platform *p = NULL;
    attn_status st = attn_platform_open(spec, &p);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn platforms: --machine %s: %s\n", spec, attn_last_error());
        return st == ATTN_NOT_FOUND || st == ATTN_INVALID_ARGUMENT ? ATTN_EXIT_USAGE
                                                                   : ATTN_EXIT_ERROR;
    }
    int rc = ATTN_EXIT_OK;
    if (json) {
        attn__sb sb;
        attn__jw w;
        attn_cli_json_begin(&sb, &w);
        attn__jw_key(&w, "machine");
        attn__json_platform(&w, p);
        attn__jw_key(&w, "catalog");
        attn__json_catalog(&w);
        rc = attn_cli_json_end(&sb, &w, "platforms");
    } else {
        attn__print_machine(p);
        attn__print_catalog();
    }
    attn_platform_free(p);
    return rc;
}

static int attn__platforms_local(bool json)
{
    const attn_cpu_info *ci = attn_cpu_info_get();
    static attn_gpu_probe cu, ro; /* large: off the stack */
    static attn_opencl_probe cl;
    attn_probe_gpu(ATTN_GPU_RUNTIME_CUDA, &cu);
    attn_probe_gpu(ATTN_GPU_RUNTIME_ROCM, &ro);
    attn_probe_opencl(&cl);
    attn_platform *det = NULL;
    attn_status det_st = attn_platform_detect(&det);
    char det_err[1024];
    snprintf(det_err, sizeof det_err, "%s", det_st == ATTN_OK ? "" : attn_last_error());
    const attn_platform *cur = NULL;
    attn_status cur_st = attn_platform_current(&cur);
    int rc = cur_st == ATTN_OK ? ATTN_EXIT_OK : ATTN_EXIT_FAILED;

    if (json) {
        attn__sb sb;
        attn__jw w;
        attn_cli_json_begin(&sb, &w);
        attn__jw_key(&w, "local");
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "cpu");
        attn__json_cpu(&w, ci);
        attn__jw_key(&w, "cpu_attn_variants");
        attn__json_cpu_variants(&w);
        attn__jw_key(&w, "cuda");
        attn__json_gpu(&w, &cu, false);
        attn__jw_key(&w, "rocm");
        attn__json_gpu(&w, &ro, true);
        attn__jw_key(&w, "opencl");
        attn__json_opencl(&w, &cl);
        attn__jw_key(&w, "platform");
        if (det) {
            attn__json_platform(&w, det);
        } else {
            attn__jw_obj_begin(&w);
            attn__jw_key(&w, "error");
            attn__jw_str(&w, det_err);
            attn__jw_obj_end(&w);
        }
        attn__jw_obj_end(&w);
        attn__jw_key(&w, "current");
        if (cur_st == ATTN_OK)
            attn__json_platform(&w, cur);
        else
            attn__json_error(&w, cur_st);
        attn__jw_key(&w, "catalog");
        attn__json_catalog(&w);
        int erc = attn_cli_json_end(&sb, &w, "platforms");
        attn_platform_free(det);
        return erc != ATTN_EXIT_OK ? erc : rc;
    }

    printf("This machine\n");
    attn__print_cpu(ci, true);
    attn__print_cpu_variants();
    attn__print_gpu("CUDA", &cu, false);
    attn__print_gpu("ROCm", &ro, true);
    attn__print_opencl(&cl);
    if (det)
        printf("  Detected  %s platform: %s\n",
               attn_platform_kind_name(attn_platform_get_kind(det)),
               attn_platform_device_name(det));
    else
        printf("  Detected  error: %s\n", det_err);
    const char *env = getenv("ATTN_PLATFORM");
    if (cur_st == ATTN_OK)
        printf("  Selection uses %s (%s, %s)%s\n", attn_platform_name(cur),
               attn_platform_kind_name(attn_platform_get_kind(cur)), attn_platform_device_name(cur),
               env && *env ? " from ATTN_PLATFORM" : "");
    else
        printf("  Selection platform error: %s\n", attn_last_error());
    attn__print_catalog();
    attn_platform_free(det);
    return rc;
}

int attn_cmd_platforms(int argc, char **argv)
{
    bool json = false, bad = false;
    const char *machine = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (attn_cli_is_help(argv[i])) return attn__platforms_usage(stdout);
        if (attn_cli_flag(argv, i, "--json")) {
            json = true;
        } else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            machine = v;
        } else if (argv[i][0] == '-') {
            return attn_cli_usage_error("platforms", "unknown option '%s'", argv[i]);
        } else {
            return attn_cli_usage_error("platforms", "unexpected argument '%s'", argv[i]);
        }
    }
    return machine ? attn__platforms_machine(machine, json) : attn__platforms_local(json);
}
