/* Simulated machines: the validating constructor shared by every machine
 * source, bare specs ("cuda:8.9", "rocm:gfx942", "xpu", "cpu") and JSON
 * machine specs (text or file).
 *
 * JSON machine spec schema (data/machines/README.md has the long form):
 *   {
 *     "name":        string, optional (file name without .json, or "custom")
 *     "description": string, optional
 *     "platform":    "cuda" | "rocm" | "xpu" | "opencl" | "cpu", required
 *     "device_name": string, optional (generic name for the platform)
 *     "capability":  "9.0" (cuda, required) | "gfx942" (rocm, required);
 *                    absent or null for xpu and cpu
 *     "memory_gib":  number > 0, optional (GPU: 64; cpu: this machine's)
 *     "device_count": integer 1..4096, optional (1)
 *     "installed":   [component tokens], optional (cuda: fa2 fa3 fa4; else none)
 *     "settings":    {"rocm_use_aiter": bool, ...}, optional (defaults)
 *     "cpu":         {"vendor": string, "model": string, "arch": string,
 *                     "cores": integer >= 1, "features": [feature tokens]},
 *                    cpu only, optional (absent: a copy of this machine's CPU)
 *   }
 * Strict: an unknown field, a wrong JSON type or a missing required field is
 * ATTN_PARSE_ERROR; a well-typed but bad value (unknown component or feature,
 * bad capability, out-of-range number, features missing what they need) is
 * ATTN_INVALID_ARGUMENT. Every message names the field; nothing is created. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "platform/platform_internal.h"
#include "util/error.h"
#include "util/json.h"

#define ATTN__GIB 1073741824.0

uint32_t attn__default_installed(attn_platform_kind kind)
{
    if (kind == ATTN_PLATFORM_CUDA)
        return (1u << ATTN_COMPONENT_FA2) | (1u << ATTN_COMPONENT_FA3) | (1u << ATTN_COMPONENT_FA4);
    return 0;
}

/* "X.Y": major 1..20, minor one digit (vLLM encodes a capability as
 * major * 10 + minor, so a two-digit minor has no meaning). */
static bool attn__parse_cuda_cc(const char *s, int *major, int *minor)
{
    int a = 0, b = 0, na = 0, nb = 0;
    const char *p = s;
    while (isdigit((unsigned char)*p) && na < 3)
        a = a * 10 + (*p++ - '0'), na++;
    if (*p++ != '.') return false;
    while (isdigit((unsigned char)*p) && nb < 3)
        b = b * 10 + (*p++ - '0'), nb++;
    if (*p || na < 1 || na > 2 || nb != 1 || a < 1 || a > 20) return false;
    *major = a;
    *minor = b;
    return true;
}

#define ATTN__BAD(status, field, ...) attn__spec_fail(status, origin, field, __VA_ARGS__)

static attn_status attn__spec_fail(attn_status st, const char *origin, const char *field,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static attn_status attn__spec_fail(attn_status st, const char *origin, const char *field,
                                   const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return attn__fail(st, "%s: field '%s': %s", origin, field, what);
}

static attn_status attn__check_len(const char *origin, const char *field, const char *v, size_t cap)
{
    if (v && strlen(v) >= cap)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, field, "longer than %zu characters", cap - 1);
    return ATTN_OK;
}

static attn_status attn__check_names(const attn__machine_spec *s, const char *origin)
{
    attn_status st;
    if (!s->name || !*s->name) return ATTN__BAD(ATTN_INVALID_ARGUMENT, "name", "must not be empty");
    if ((st = attn__check_len(origin, "name", s->name, sizeof((attn_platform *)0)->name)) ||
        (st = attn__check_len(origin, "description", s->description,
                              sizeof((attn_platform *)0)->description)) ||
        (st = attn__check_len(origin, "device_name", s->device_name,
                              sizeof((attn_platform *)0)->device_name)) ||
        (st = attn__check_len(origin, "cpu.vendor", s->cpu_vendor,
                              sizeof((attn_cpu_info *)0)->vendor)) ||
        (st = attn__check_len(origin, "cpu.model", s->cpu_model,
                              sizeof((attn_cpu_info *)0)->model)) ||
        (st = attn__check_len(origin, "cpu.arch", s->cpu_arch, sizeof((attn_cpu_info *)0)->arch)))
        return st;
    if (s->kind != ATTN_PLATFORM_CPU && s->kind != ATTN_PLATFORM_CUDA &&
        s->kind != ATTN_PLATFORM_ROCM && s->kind != ATTN_PLATFORM_XPU &&
        s->kind != ATTN_PLATFORM_OPENCL)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "platform",
                         "'%s' cannot be simulated (expected cuda, rocm, xpu, opencl or cpu)",
                         attn_platform_kind_name(s->kind));
    return ATTN_OK;
}

/* CUDA "X.Y" or a ROCm gfx arch -> *maj, *min; other kinds take none. */
static attn_status attn__check_capability(const attn__machine_spec *s, const char *origin, int *maj,
                                          int *min)
{
    if (s->kind == ATTN_PLATFORM_CUDA) {
        if (!s->capability)
            return ATTN__BAD(ATTN_PARSE_ERROR, "capability",
                             "required for platform cuda "
                             "(\"major.minor\", e.g. \"9.0\")");
        if (!attn__parse_cuda_cc(s->capability, maj, min))
            return ATTN__BAD(ATTN_INVALID_ARGUMENT, "capability",
                             "'%s' is not a CUDA compute capability \"major.minor\" (major 1-20, "
                             "minor 0-9, e.g. \"9.0\")",
                             s->capability);
    } else if (s->kind == ATTN_PLATFORM_ROCM) {
        if (!s->capability)
            return ATTN__BAD(ATTN_PARSE_ERROR, "capability",
                             "required for platform rocm (a gfx arch, e.g. \"gfx942\")");
        if (attn__rocm_capability(s->capability, maj, min) != ATTN_OK)
            return ATTN__BAD(ATTN_INVALID_ARGUMENT, "capability", "%s", attn_last_error());
    } else if (s->capability) {
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "capability",
                         "not allowed for platform %s (it has no compute capability)",
                         attn_platform_kind_name(s->kind));
    }
    return ATTN_OK;
}

static bool attn__has_cpu_fields(const attn__machine_spec *s)
{
    return s->cpu_vendor || s->cpu_model || s->cpu_arch || s->cpu_cores || s->cpu_features ||
           s->cpu_copy_host;
}

/* Sizes and the CPU fields; *x86 / *arm: which feature families appear. */
static attn_status attn__check_sizes_cpu(const attn__machine_spec *s, const char *origin, bool *x86,
                                         bool *arm)
{
    if (!(s->memory_gib >= 0 && s->memory_gib <= 1048576.0))
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "memory_gib", "%g is outside (0, 1048576]",
                         s->memory_gib);
    if (s->device_count < 0 || s->device_count > 4096)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "device_count", "%d is outside 1..4096",
                         s->device_count);
    if (attn__has_cpu_fields(s) && s->kind != ATTN_PLATFORM_CPU)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "cpu", "only allowed for platform cpu, not %s",
                         attn_platform_kind_name(s->kind));
    if (s->cpu_cores < 0 || s->cpu_cores > 65536)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "cpu.cores", "%d is outside 1..65536",
                         s->cpu_cores);
    uint64_t feats = s->cpu_features;
    *x86 = *arm = false;
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
        if (!(feats & (1ull << f))) continue;
        if (attn__cpu_feature_is_x86((attn_cpu_feature)f))
            *x86 = true;
        else
            *arm = true;
        uint64_t missing = attn__cpu_feature_requires((attn_cpu_feature)f) & ~feats;
        if (missing) {
            char need[256];
            attn__cpu_feature_list(missing, need, sizeof need);
            return ATTN__BAD(ATTN_INVALID_ARGUMENT, "cpu.features", "%s needs %s",
                             attn_cpu_feature_name((attn_cpu_feature)f), need);
        }
    }
    if (*x86 && *arm)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "cpu.features", "mixes x86 and arm features");
    return ATTN_OK;
}

/* A simulated CPU: this machine's CPU, or the one the cpu_* fields describe. */
static void attn__fill_cpu(attn_platform *p, const attn__machine_spec *s, const attn_cpu_info *host,
                           bool x86, bool arm)
{
    attn_cpu_info *ci = &p->cpu;
    if (s->cpu_copy_host || !attn__has_cpu_fields(s)) {
        *ci = *host;
    } else {
        const char *model = s->cpu_model     ? s->cpu_model
                            : s->device_name ? s->device_name
                                             : "Simulated CPU";
        snprintf(ci->vendor, sizeof ci->vendor, "%s", s->cpu_vendor ? s->cpu_vendor : "unknown");
        snprintf(ci->model, sizeof ci->model, "%s", model);
        snprintf(ci->arch, sizeof ci->arch, "%s",
                 s->cpu_arch ? s->cpu_arch
                 : arm       ? "aarch64"
                 : x86       ? "x86_64"
                             : host->arch);
        ci->logical_cores = s->cpu_cores ? s->cpu_cores : 1;
        ci->present = ci->usable = s->cpu_features;
        ci->masked = 0;
    }
    ci->memory_bytes =
        s->memory_gib > 0 ? (uint64_t)(s->memory_gib * ATTN__GIB + 0.5) : host->memory_bytes;
    p->memory_bytes = ci->memory_bytes;
    snprintf(p->device_name, sizeof p->device_name, "%s",
             s->device_name ? s->device_name : ci->model);
}

static void attn__fill_gpu(attn_platform *p, const attn__machine_spec *s)
{
    double gib = s->memory_gib > 0 ? s->memory_gib : ATTN__DEFAULT_GPU_MEMORY_GIB;
    p->memory_bytes = (uint64_t)(gib * ATTN__GIB + 0.5);
    if (s->device_name)
        snprintf(p->device_name, sizeof p->device_name, "%s", s->device_name);
    else if (s->kind == ATTN_PLATFORM_CUDA)
        snprintf(p->device_name, sizeof p->device_name, "NVIDIA GPU (cc %d.%d)", p->cc_major,
                 p->cc_minor);
    else if (s->kind == ATTN_PLATFORM_ROCM)
        snprintf(p->device_name, sizeof p->device_name, "AMD GPU (%s)", p->gfx_arch);
    else if (s->kind == ATTN_PLATFORM_OPENCL)
        snprintf(p->device_name, sizeof p->device_name, "OpenCL device");
    else
        snprintf(p->device_name, sizeof p->device_name, "Intel XPU");
}

/* Builds with messages prefixed by origin ("machine spec 'x.json'"). */
static attn_status attn__build(const attn__machine_spec *s, const char *origin, attn_platform **out)
{
    attn_status st;
    int maj = 0, min = 0;
    bool x86 = false, arm = false;
    *out = NULL;
    if ((st = attn__check_names(s, origin)) != ATTN_OK ||
        (st = attn__check_capability(s, origin, &maj, &min)) != ATTN_OK ||
        (st = attn__check_sizes_cpu(s, origin, &x86, &arm)) != ATTN_OK)
        return st;

    attn_platform *p = attn__platform_alloc(s->kind);
    if (!p) return attn__fail(ATTN_OUT_OF_MEMORY, "%s: building the machine", origin);
    p->simulated = true;
    snprintf(p->name, sizeof p->name, "%s", s->name);
    if (s->kind == ATTN_PLATFORM_CUDA || s->kind == ATTN_PLATFORM_ROCM) {
        p->has_cc = true;
        p->cc_major = maj;
        p->cc_minor = min;
    }
    if (s->kind == ATTN_PLATFORM_ROCM)
        snprintf(p->gfx_arch, sizeof p->gfx_arch, "%.*s", (int)strcspn(s->capability, ":"),
                 s->capability);
    p->device_count = s->device_count ? s->device_count : 1;
    p->installed = s->installed_given ? s->installed : attn__default_installed(s->kind);
    for (int k = 0; k < ATTN_SETTING_COUNT; k++)
        if (s->setting_given[k]) p->settings[k] = s->setting[k];
    /* Read for every machine, so a bad ATTN_CPU_MASK is reported whatever
     * the machine (the host CPU is the same process-wide answer). */
    const attn_cpu_info *host = attn_cpu_info_get();
    if (s->kind == ATTN_PLATFORM_CPU)
        attn__fill_cpu(p, s, host, x86, arm);
    else
        attn__fill_gpu(p, s);
    if (s->description)
        snprintf(p->description, sizeof p->description, "%s", s->description);
    else
        snprintf(p->description, sizeof p->description, "simulated %s machine: %s",
                 attn_platform_kind_name(s->kind), p->device_name);
    *out = p;
    return ATTN_OK;
}

attn_status attn__platform_build(const attn__machine_spec *s, attn_platform **out)
{
    char origin[128];
    snprintf(origin, sizeof origin, "machine '%s'", s->name ? s->name : "?");
    return attn__build(s, origin, out);
}

attn_status attn__sim_open_bare(const char *spec, attn_platform **out)
{
    attn__machine_spec s = {0};
    char name[64];
    char origin[128];
    size_t n = strlen(spec);
    if (n >= sizeof name) return ATTN_NOT_FOUND;
    for (size_t i = 0; i <= n; i++)
        name[i] = (char)tolower((unsigned char)spec[i]);
    snprintf(origin, sizeof origin, "machine spec '%s'", spec);
    s.name = name;
    if (!strncmp(name, "cuda:", 5)) {
        s.kind = ATTN_PLATFORM_CUDA;
        s.capability = name + 5;
    } else if (!strncmp(name, "rocm:", 5)) {
        s.kind = ATTN_PLATFORM_ROCM;
        s.capability = name + 5;
    } else if (!strcmp(name, "xpu")) {
        s.kind = ATTN_PLATFORM_XPU;
    } else if (!strcmp(name, "cpu")) {
        s.kind = ATTN_PLATFORM_CPU;
        s.cpu_copy_host = true;
        s.description = "simulated CPU machine: a copy of this machine's CPU";
    } else if (!strcmp(name, "cuda") || !strcmp(name, "rocm")) {
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "machine spec '%s' needs a capability: %s (e.g. %s)", spec,
                          name[0] == 'c' ? "cuda:X.Y" : "rocm:gfxNNN",
                          name[0] == 'c' ? "cuda:9.0" : "rocm:gfx942");
    } else {
        return ATTN_NOT_FOUND;
    }
    return attn__build(&s, origin, out);
}

/* ---- JSON specs ---------------------------------------------------------------------------- */

static const char *attn__jtype(const attn__json *v)
{
    return attn__json_type_name(attn__json_type_of(v));
}

/* Optional string member: absent -> *out unchanged; null allowed if nullable. */
static attn_status attn__j_str(const attn__json *obj, const char *key, const char *field,
                               const char *origin, bool nullable, const char **out)
{
    const attn__json *v = attn__json_get(obj, key);
    if (!v || (nullable && attn__json_type_of(v) == ATTN_JSON_NULL)) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_STRING)
        return ATTN__BAD(ATTN_PARSE_ERROR, field, "expected a string, got %s", attn__jtype(v));
    *out = attn__json_string(v);
    return ATTN_OK;
}

static attn_status attn__j_int(const attn__json *obj, const char *key, const char *field,
                               const char *origin, long lo, long hi, int *out)
{
    const attn__json *v = attn__json_get(obj, key);
    long long i;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER || !attn__json_is_int(v, &i))
        return ATTN__BAD(ATTN_PARSE_ERROR, field, "expected an integer, got %s",
                         attn__json_type_of(v) == ATTN_JSON_NUMBER ? "a fraction" : attn__jtype(v));
    if (i < lo || i > hi)
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, field, "%lld is outside %ld..%ld", i, lo, hi);
    *out = (int)i;
    return ATTN_OK;
}

/* String element i of arr; field receives its name ("what[i]"). */
static attn_status attn__j_item(const attn__json *arr, size_t i, const char *what,
                                const char *origin, char *field, size_t field_size,
                                const char **out)
{
    const attn__json *e = attn__json_at(arr, i);
    snprintf(field, field_size, "%s[%zu]", what, i);
    if (attn__json_type_of(e) != ATTN_JSON_STRING)
        return ATTN__BAD(ATTN_PARSE_ERROR, field, "expected a string, got %s", attn__jtype(e));
    *out = attn__json_string(e);
    return ATTN_OK;
}

static attn_status attn__j_keys(const attn__json *obj, const char *const *known, const char *prefix,
                                const char *origin)
{
    for (size_t i = 0; i < attn__json_len(obj); i++) {
        const char *k = attn__json_key_at(obj, i);
        bool ok = false;
        for (int j = 0; known[j] && !ok; j++)
            ok = !strcmp(k, known[j]);
        if (!ok) {
            char list[256] = "", field[128];
            size_t o = 0;
            for (int j = 0; known[j] && o < sizeof list; j++) {
                int n = snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", known[j]);
                o += n > 0 ? (size_t)n : 0;
            }
            snprintf(field, sizeof field, "%s%s", prefix, k);
            return ATTN__BAD(ATTN_PARSE_ERROR, field, "unknown field (known: %s)", list);
        }
    }
    return ATTN_OK;
}

static attn_status attn__j_cpu(const attn__json *cpu, attn__machine_spec *s, const char *origin)
{
    static const char *const known[] = {"vendor", "model", "arch", "cores", "features", NULL};
    attn_status st;
    if (attn__json_type_of(cpu) != ATTN_JSON_OBJECT)
        return ATTN__BAD(ATTN_PARSE_ERROR, "cpu", "expected an object, got %s", attn__jtype(cpu));
    if ((st = attn__j_keys(cpu, known, "cpu.", origin)) ||
        (st = attn__j_str(cpu, "vendor", "cpu.vendor", origin, false, &s->cpu_vendor)) ||
        (st = attn__j_str(cpu, "model", "cpu.model", origin, false, &s->cpu_model)) ||
        (st = attn__j_str(cpu, "arch", "cpu.arch", origin, false, &s->cpu_arch)) ||
        (st = attn__j_int(cpu, "cores", "cpu.cores", origin, 1, 65536, &s->cpu_cores)))
        return st;
    const attn__json *f = attn__json_get(cpu, "features");
    if (f) {
        if (attn__json_type_of(f) != ATTN_JSON_ARRAY)
            return ATTN__BAD(ATTN_PARSE_ERROR, "cpu.features", "expected an array, got %s",
                             attn__jtype(f));
        for (size_t i = 0; i < attn__json_len(f); i++) {
            char field[64];
            const char *tok = NULL;
            if ((st = attn__j_item(f, i, "cpu.features", origin, field, sizeof field, &tok)) !=
                ATTN_OK)
                return st;
            attn_cpu_feature feat;
            if (attn__cpu_feature_parse(tok, &feat) != ATTN_OK) {
                char all[512];
                attn__cpu_feature_list(attn__cpu_all_features(), all, sizeof all);
                return ATTN__BAD(ATTN_INVALID_ARGUMENT, field,
                                 "unknown CPU feature '%s' (expected one of: %s)", tok, all);
            }
            s->cpu_features |= 1ull << feat;
        }
    }
    /* An empty block still means "described here", not "copy this machine". */
    if (!s->cpu_vendor && !s->cpu_model && !s->cpu_arch && !s->cpu_cores && !s->cpu_features)
        s->cpu_cores = 1;
    return ATTN_OK;
}

static attn_status attn__sim_from_tree(const attn__json *root, const char *origin,
                                       const char *default_name, attn_platform **out)
{
    static const char *const known[] = {
        "name",         "description", "platform", "device_name", "capability", "memory_gib",
        "device_count", "installed",   "settings", "cpu",         NULL};
    attn__machine_spec s = {0};
    attn_status st;
    if (attn__json_type_of(root) != ATTN_JSON_OBJECT)
        return attn__fail(ATTN_PARSE_ERROR, "%s: expected a JSON object, got %s", origin,
                          attn__jtype(root));
    const char *platform = NULL;
    s.name = default_name;
    if ((st = attn__j_keys(root, known, "", origin)) ||
        (st = attn__j_str(root, "name", "name", origin, false, &s.name)) ||
        (st = attn__j_str(root, "description", "description", origin, false, &s.description)) ||
        (st = attn__j_str(root, "platform", "platform", origin, false, &platform)) ||
        (st = attn__j_str(root, "device_name", "device_name", origin, false, &s.device_name)) ||
        (st = attn__j_str(root, "capability", "capability", origin, true, &s.capability)) ||
        (st = attn__j_int(root, "device_count", "device_count", origin, 1, 4096, &s.device_count)))
        return st;
    if (!platform)
        return ATTN__BAD(ATTN_PARSE_ERROR, "platform",
                         "required (\"cuda\", \"rocm\", \"xpu\", \"opencl\" or \"cpu\")");
    if (!strcasecmp(platform, "cuda"))
        s.kind = ATTN_PLATFORM_CUDA;
    else if (!strcasecmp(platform, "rocm"))
        s.kind = ATTN_PLATFORM_ROCM;
    else if (!strcasecmp(platform, "xpu"))
        s.kind = ATTN_PLATFORM_XPU;
    else if (!strcasecmp(platform, "cpu"))
        s.kind = ATTN_PLATFORM_CPU;
    else if (!strcasecmp(platform, "opencl"))
        s.kind = ATTN_PLATFORM_OPENCL;
    else
        return ATTN__BAD(ATTN_INVALID_ARGUMENT, "platform",
                         "'%s' is not one of cuda, rocm, xpu, opencl, cpu", platform);

    const attn__json *mem = attn__json_get(root, "memory_gib");
    if (mem) {
        if (attn__json_type_of(mem) != ATTN_JSON_NUMBER)
            return ATTN__BAD(ATTN_PARSE_ERROR, "memory_gib", "expected a number, got %s",
                             attn__jtype(mem));
        double g = attn__json_number(mem);
        if (!(g > 0 && g <= 1048576.0))
            return ATTN__BAD(ATTN_INVALID_ARGUMENT, "memory_gib", "%g is outside (0, 1048576]", g);
        s.memory_gib = g;
    }

    const attn__json *inst = attn__json_get(root, "installed");
    if (inst) {
        if (attn__json_type_of(inst) != ATTN_JSON_ARRAY)
            return ATTN__BAD(ATTN_PARSE_ERROR, "installed",
                             "expected an array of component "
                             "names, got %s",
                             attn__jtype(inst));
        s.installed_given = true;
        for (size_t i = 0; i < attn__json_len(inst); i++) {
            char field[64];
            const char *tok = NULL;
            if ((st = attn__j_item(inst, i, "installed", origin, field, sizeof field, &tok)) !=
                ATTN_OK)
                return st;
            attn_component c;
            if (attn_component_parse(tok, &c) != ATTN_OK)
                return ATTN__BAD(ATTN_INVALID_ARGUMENT, field, "%s", attn_last_error());
            s.installed |= 1u << c;
        }
    }

    const attn__json *set = attn__json_get(root, "settings");
    if (set) {
        if (attn__json_type_of(set) != ATTN_JSON_OBJECT)
            return ATTN__BAD(ATTN_PARSE_ERROR, "settings", "expected an object, got %s",
                             attn__jtype(set));
        for (size_t i = 0; i < attn__json_len(set); i++) {
            const char *k = attn__json_key_at(set, i);
            const attn__json *v = attn__json_at(set, i);
            char field[96];
            snprintf(field, sizeof field, "settings.%s", k);
            attn_setting which;
            if (attn_setting_parse(k, &which) != ATTN_OK)
                return ATTN__BAD(ATTN_INVALID_ARGUMENT, field, "%s", attn_last_error());
            if (attn__json_type_of(v) != ATTN_JSON_BOOL)
                return ATTN__BAD(ATTN_PARSE_ERROR, field, "expected true or false, got %s",
                                 attn__jtype(v));
            s.setting_given[which] = true;
            s.setting[which] = attn__json_bool(v);
        }
    }

    const attn__json *cpu = attn__json_get(root, "cpu");
    if (cpu && (st = attn__j_cpu(cpu, &s, origin))) return st;
    return attn__build(&s, origin, out);
}

static attn_status attn__sim_from_text(const char *text, size_t len, const char *origin,
                                       const char *default_name, attn_platform **out)
{
    attn__json *root = NULL;
    char err[256];
    if (attn__json_parse(text, len, &root, err, sizeof err) != ATTN_OK)
        return attn__fail(ATTN_PARSE_ERROR, "%s: %s", origin, err);
    attn_status st = attn__sim_from_tree(root, origin, default_name, out);
    attn__json_free(root);
    return st;
}

attn_status attn_platform_from_json(const char *json, attn_platform **out)
{
    ATTN__CHECK_NULL(json);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    return attn__sim_from_text(json, strlen(json), "machine spec", "custom", out);
}

attn_status attn__sim_open_file(const char *path, attn_platform **out)
{
    char *text = NULL;
    size_t len = 0;
    attn_status st = attn__read_file(path, &text, &len);
    if (st != ATTN_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", attn_last_error());
        return attn__fail(st, "machine spec: %s", why);
    }
    /* Default name: the file name without folders and ".json". */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[64];
    snprintf(name, sizeof name, "%s", base);
    size_t n = strlen(name);
    if (n > 5 && !strcasecmp(name + n - 5, ".json")) name[n - 5] = '\0';
    char origin[512];
    snprintf(origin, sizeof origin, "machine spec '%s'", path);
    st = attn__sim_from_text(text, len, origin, name, out);
    free(text);
    return st;
}
