/* The platform object: detection of the real machine, the process-wide
 * platform, spec dispatch, accessors, installed components, settings and
 * the JSON description.
 *
 * Contract:
 * - attn_platform_detect: CUDA if the driver reports a device (device 0
 *   describes the platform), else ROCm, else CPU. It never fails on a CPU
 *   machine; a ROCm device whose gfx arch the ROCm rules reject is an error
 *   (reference §6b). The host CPU is filled into p->cpu for every detected
 *   platform. Settings of the real machine come from ATTN_<SETTING> variables
 *   (ATTN_ROCM_USE_AITER=1 ...); its installed set is empty (real backends
 *   resolve through their locators, not through declarations).
 * - attn_platform_current: ATTN_PLATFORM (any attn_platform_open spec) or
 *   the detected machine, made once and never freed; a bad ATTN_PLATFORM
 *   makes every call fail with the same status and text.
 * - attn_platform_open: catalog name (case-insensitive), "local" (= detect),
 *   "opencl" / "opencl:N" (real OpenCL device 0 / N), a bare spec, a path (ends in
 *   .json or is an existing file), and last a spec file name found in the
 *   data folder (data/machines/<spec>.json).
 * - Mutators validate everything first and change nothing on error.
 * - Every platform object gets a unique id (selection cache key). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "attn/log.h"
#include "platform/platform_internal.h"
#include "util/datadir.h"
#include "util/error.h"

static const char *const attn__component_tokens[] = {
#define ATTN__COMP_TOK(name, tok) tok,
    ATTN_COMPONENT_TABLE(ATTN__COMP_TOK)
#undef ATTN__COMP_TOK
};

static const char *const attn__setting_tokens[] = {
#define ATTN__SET_TOK(name, tok, def) tok,
    ATTN_SETTING_TABLE(ATTN__SET_TOK)
#undef ATTN__SET_TOK
};

static const bool attn__setting_defaults[] = {
#define ATTN__SET_DEF(name, tok, def) def,
    ATTN_SETTING_TABLE(ATTN__SET_DEF)
#undef ATTN__SET_DEF
};

static atomic_uint_fast64_t attn__platform_next_id = 1;

const char *attn_platform_kind_name(attn_platform_kind k)
{
    switch (k) {
    case ATTN_PLATFORM_CPU: return "cpu";
    case ATTN_PLATFORM_CUDA: return "cuda";
    case ATTN_PLATFORM_ROCM: return "rocm";
    case ATTN_PLATFORM_XPU: return "xpu";
    case ATTN_PLATFORM_OPENCL: return "opencl";
    default: return "unspecified";
    }
}

const char *attn_component_name(attn_component c)
{
    return (unsigned)c < ATTN_COMPONENT_COUNT ? attn__component_tokens[c] : "?";
}

void attn__component_list(char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int c = 0; c < ATTN_COMPONENT_COUNT && o < size; c++) {
        int n = snprintf(buf + o, size - o, "%s%s", c ? ", " : "", attn__component_tokens[c]);
        o += n > 0 ? (size_t)n : 0;
    }
}

attn_status attn_component_parse(const char *tok, attn_component *out)
{
    ATTN__CHECK_NULL(tok);
    ATTN__CHECK_NULL(out);
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if (!strcasecmp(tok, attn__component_tokens[c])) {
            *out = (attn_component)c;
            return ATTN_OK;
        }
    }
    char list[256];
    attn__component_list(list, sizeof list);
    return attn__fail(ATTN_INVALID_ARGUMENT, "unknown component '%s' (expected one of %s)", tok,
                      list);
}

const char *attn_setting_name(attn_setting s)
{
    return (unsigned)s < ATTN_SETTING_COUNT ? attn__setting_tokens[s] : "?";
}

attn_status attn_setting_parse(const char *tok, attn_setting *out)
{
    ATTN__CHECK_NULL(tok);
    ATTN__CHECK_NULL(out);
    for (int s = 0; s < ATTN_SETTING_COUNT; s++) {
        if (!strcasecmp(tok, attn__setting_tokens[s])) {
            *out = (attn_setting)s;
            return ATTN_OK;
        }
    }
    char list[256];
    size_t o = 0;
    for (int s = 0; s < ATTN_SETTING_COUNT && o < sizeof list; s++) {
        int n = snprintf(list + o, sizeof list - o, "%s%s", s ? ", " : "", attn__setting_tokens[s]);
        o += n > 0 ? (size_t)n : 0;
    }
    return attn__fail(ATTN_INVALID_ARGUMENT, "unknown setting '%s' (expected one of %s)", tok,
                      list);
}

attn_status attn__parse_installed(const char *csv, const char *what, uint32_t *out)
{
    uint32_t bits = 0;
    const char *p = csv;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len) {
            char tok[64];
            snprintf(tok, sizeof tok, "%.*s", (int)(len < sizeof tok ? len : sizeof tok - 1), p);
            attn_component c;
            if (len < sizeof tok && !strcasecmp(tok, "none") && !end && bits == 0 &&
                strspn(csv, " \t") == (size_t)(p - csv))
                break; /* "none" alone */
            if (len >= sizeof tok || attn_component_parse(tok, &c) != ATTN_OK) {
                char list[256];
                attn__component_list(list, sizeof list);
                return attn__fail(ATTN_INVALID_ARGUMENT,
                                  "%s: unknown component '%.*s' (expected one of %s)", what,
                                  (int)len, p, list);
            }
            bits |= 1u << c;
        }
        if (!end) break;
        p = end + 1;
    }
    *out = bits;
    return ATTN_OK;
}

attn_platform *attn__platform_alloc(attn_platform_kind kind)
{
    attn_platform *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = kind;
    p->device_count = 1;
    for (int s = 0; s < ATTN_SETTING_COUNT; s++)
        p->settings[s] = attn__setting_defaults[s];
    p->id = atomic_fetch_add(&attn__platform_next_id, 1);
    return p;
}

void attn_platform_free(attn_platform *p)
{
    free(p);
}

attn_platform_kind attn_platform_get_kind(const attn_platform *p)
{
    return p ? p->kind : ATTN_PLATFORM_UNSPECIFIED;
}

const char *attn_platform_name(const attn_platform *p)
{
    return p ? p->name : "";
}

const char *attn_platform_device_name(const attn_platform *p)
{
    return p ? p->device_name : "";
}

bool attn_platform_is_simulated(const attn_platform *p)
{
    return p && p->simulated;
}

bool attn_platform_capability(const attn_platform *p, int *major, int *minor)
{
    if (!p || !p->has_cc) return false;
    if (major) *major = p->cc_major;
    if (minor) *minor = p->cc_minor;
    return true;
}

const char *attn_platform_gfx_arch(const attn_platform *p)
{
    return p && p->kind == ATTN_PLATFORM_ROCM && p->gfx_arch[0] ? p->gfx_arch : NULL;
}

bool attn__platform_mi300_class(const attn_platform *p)
{
    return p && p->kind == ATTN_PLATFORM_ROCM &&
           (!strcmp(p->gfx_arch, ATTN__MI300_ARCH_A) || !strcmp(p->gfx_arch, ATTN__MI300_ARCH_B));
}

bool attn__rocm_aiter_found(const attn_platform *p)
{
    return attn__platform_mi300_class(p) && ((p->installed >> ATTN_COMPONENT_AITER) & 1u);
}

uint64_t attn_platform_memory_bytes(const attn_platform *p)
{
    return p ? p->memory_bytes : 0;
}

int attn_platform_device_count(const attn_platform *p)
{
    return p ? p->device_count : 0;
}

bool attn_platform_has_component(const attn_platform *p, attn_component c)
{
    return p && (unsigned)c < ATTN_COMPONENT_COUNT && (p->installed >> c) & 1u;
}

bool attn_platform_setting(const attn_platform *p, attn_setting s)
{
    if ((unsigned)s >= ATTN_SETTING_COUNT) return false;
    return p ? p->settings[s] : attn__setting_defaults[s];
}

attn_status attn_platform_set_installed(attn_platform *p, const char *csv)
{
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(csv);
    uint32_t bits;
    attn_status st = attn__parse_installed(csv, "installed", &bits);
    if (st != ATTN_OK) return st;
    p->installed = bits;
    return ATTN_OK;
}

/* "true"/"1" and "false"/"0", case-insensitive. */
static bool attn__parse_bool(const char *v, bool *out)
{
    if (!strcasecmp(v, "true") || !strcmp(v, "1"))
        *out = true;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0"))
        *out = false;
    else
        return false;
    return true;
}

attn_status attn_platform_set_setting(attn_platform *p, const char *key_eq_value)
{
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(key_eq_value);
    const char *eq = strchr(key_eq_value, '=');
    if (!eq)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "setting '%s': expected key=value (e.g. "
                          "rocm_use_aiter=true)",
                          key_eq_value);
    char key[64];
    size_t klen = (size_t)(eq - key_eq_value);
    if (klen == 0 || klen >= sizeof key)
        return attn__fail(ATTN_INVALID_ARGUMENT, "setting '%s': missing or overlong key",
                          key_eq_value);
    memcpy(key, key_eq_value, klen);
    key[klen] = '\0';
    attn_setting s;
    attn_status st = attn_setting_parse(key, &s);
    if (st != ATTN_OK) return st;
    bool v;
    if (!attn__parse_bool(eq + 1, &v))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "setting '%s': value '%s' is not one of true, false, 1, 0", key, eq + 1);
    p->settings[s] = v;
    return ATTN_OK;
}

void attn__platform_write_json(attn__jw *w, const attn_platform *p)
{
    char buf[32];
    attn__jw_obj_begin(w);
    attn__jw_key(w, "kind");
    attn__jw_str(w, attn_platform_kind_name(p->kind));
    attn__jw_key(w, "name");
    attn__jw_str(w, p->name);
    attn__jw_key(w, "device");
    attn__jw_str(w, p->device_name);
    attn__jw_key(w, "description");
    attn__jw_str(w, p->description);
    attn__jw_key(w, "simulated");
    attn__jw_bool(w, p->simulated);
    attn__jw_key(w, "capability");
    if (p->has_cc) {
        snprintf(buf, sizeof buf, "%d.%d", p->cc_major, p->cc_minor);
        attn__jw_str(w, buf);
    } else {
        attn__jw_null(w);
    }
    attn__jw_key(w, "gfx_arch");
    attn__jw_str(w, attn_platform_gfx_arch(p));
    attn__jw_key(w, "memory_bytes");
    attn__jw_int(w, (long long)p->memory_bytes);
    attn__jw_key(w, "device_count");
    attn__jw_int(w, p->device_count);
    attn__jw_key(w, "installed");
    attn__jw_arr_begin(w);
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++)
        if ((p->installed >> c) & 1u) attn__jw_str(w, attn__component_tokens[c]);
    attn__jw_arr_end(w);
    attn__jw_key(w, "settings");
    attn__jw_obj_begin(w);
    for (int s = 0; s < ATTN_SETTING_COUNT; s++) {
        attn__jw_key(w, attn__setting_tokens[s]);
        attn__jw_bool(w, p->settings[s]);
    }
    attn__jw_obj_end(w);
    if (p->kind == ATTN_PLATFORM_CPU) {
        attn__jw_key(w, "cpu");
        attn__cpu_write_json(w, &p->cpu);
    }
    attn__jw_obj_end(w);
}

attn_status attn_platform_to_json(const attn_platform *p, char **out)
{
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(out);
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__platform_write_json(&w, p);
    char *s = attn__sb_take(&sb);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "describing platform '%s'", p->name);
    *out = s;
    return ATTN_OK;
}

/* ATTN_<SETTING> variables set the real machine's switches, as vLLM's
 * VLLM_* variables do; an unreadable value keeps the default, with a warning. */
static void attn__settings_from_env(attn_platform *p)
{
    for (int s = 0; s < ATTN_SETTING_COUNT; s++) {
        char var[64] = "ATTN_";
        size_t o = strlen(var);
        for (const char *t = attn__setting_tokens[s]; *t && o + 1 < sizeof var; t++)
            var[o++] = (char)(*t >= 'a' && *t <= 'z' ? *t - 'a' + 'A' : *t);
        var[o] = '\0';
        const char *v = getenv(var);
        bool b;
        if (!v || !*v) continue;
        if (attn__parse_bool(v, &b))
            p->settings[s] = b;
        else
            attn_log(ATTN_LOG_WARN, "%s='%s' ignored: expected true, false, 1 or 0", var, v);
    }
}

attn_status attn_platform_detect(attn_platform **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    const attn_cpu_info *cpu = attn_cpu_info_get();
    const attn__gpu_probe *cu = attn__probe_cuda();
    const attn__gpu_probe *ro = cu->present ? NULL : attn__probe_rocm();
    attn_platform *p;
    if (cu->present && cu->listed > 0) {
        const attn__gpu_device *d = &cu->devices[0];
        if (!(p = attn__platform_alloc(ATTN_PLATFORM_CUDA)))
            return attn__fail(ATTN_OUT_OF_MEMORY, "detecting the platform");
        snprintf(p->device_name, sizeof p->device_name, "%s", d->name);
        p->has_cc = true;
        p->cc_major = d->cc_major;
        p->cc_minor = d->cc_minor;
        p->memory_bytes = d->memory_bytes;
        p->device_count = cu->device_count;
        snprintf(p->description, sizeof p->description,
                 "this machine: %d CUDA device(s) through %.180s", cu->device_count, cu->library);
    } else if (ro && ro->present && ro->listed > 0) {
        const attn__gpu_device *d = &ro->devices[0];
        int maj = 0, min = 0;
        if (!d->gfx_arch[0])
            return attn__fail(ATTN_PLATFORM_UNAVAILABLE,
                              "ROCm device 0 (%s): its gfx arch could not be determined", d->name);
        attn_status st = attn__rocm_capability(d->gfx_arch, &maj, &min);
        if (st != ATTN_OK) return st;
        if (!(p = attn__platform_alloc(ATTN_PLATFORM_ROCM)))
            return attn__fail(ATTN_OUT_OF_MEMORY, "detecting the platform");
        snprintf(p->device_name, sizeof p->device_name, "%s", d->name);
        snprintf(p->gfx_arch, sizeof p->gfx_arch, "%s", d->gfx_arch);
        p->has_cc = true;
        p->cc_major = maj;
        p->cc_minor = min;
        p->memory_bytes = d->memory_bytes;
        p->device_count = ro->device_count;
        snprintf(p->description, sizeof p->description,
                 "this machine: %d ROCm device(s) through %.180s", ro->device_count, ro->library);
    } else {
        if (!(p = attn__platform_alloc(ATTN_PLATFORM_CPU)))
            return attn__fail(ATTN_OUT_OF_MEMORY, "detecting the platform");
        snprintf(p->device_name, sizeof p->device_name, "%s", cpu->model);
        p->memory_bytes = cpu->memory_bytes;
        snprintf(p->description, sizeof p->description,
                 "this machine: CPU only (%d logical cores; no CUDA or ROCm device)",
                 cpu->logical_cores);
    }
    snprintf(p->name, sizeof p->name, "local");
    p->simulated = false;
    p->cpu = *cpu;
    attn__settings_from_env(p);
    *out = p;
    return ATTN_OK;
}

attn_status attn__platform_open_opencl(int index, attn_platform **out)
{
    const attn__opencl_probe *cl = attn__probe_opencl();
    if (!cl->present)
        return attn__fail(ATTN_PLATFORM_UNAVAILABLE, "no OpenCL device: %s", cl->reason);
    if (index < 0 || index >= cl->device_count)
        return attn__fail(ATTN_PLATFORM_UNAVAILABLE,
                          "no OpenCL device %d: this machine has %d (opencl:0 to opencl:%d)", index,
                          cl->device_count, cl->device_count - 1);
    const attn__opencl_device *d = &cl->devices[index];
    attn_platform *p = attn__platform_alloc(ATTN_PLATFORM_OPENCL);
    if (!p) return attn__fail(ATTN_OUT_OF_MEMORY, "opening the OpenCL platform");
    if (index)
        snprintf(p->name, sizeof p->name, "opencl:%d", index);
    else
        snprintf(p->name, sizeof p->name, "opencl");
    snprintf(p->device_name, sizeof p->device_name, "%s", d->name);
    snprintf(p->description, sizeof p->description,
             "this machine's OpenCL device %d (%.100s, %.100s)", index,
             cl->platforms[d->platform].name, d->version);
    p->memory_bytes = d->global_mem_bytes;
    p->device_count = cl->device_count;
    p->cpu = *attn_cpu_info_get();
    attn__settings_from_env(p);
    *out = p;
    return ATTN_OK;
}

static bool attn__is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

attn_status attn_platform_open(const char *spec, attn_platform **out)
{
    ATTN__CHECK_NULL(spec);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (!*spec) return attn__fail(ATTN_INVALID_ARGUMENT, "empty machine spec");
    attn_status st = attn__catalog_open(spec, out);
    if (st != ATTN_NOT_FOUND) return st;
    if (!strcasecmp(spec, "local")) return attn_platform_detect(out);
    if (!strcasecmp(spec, "opencl")) return attn__platform_open_opencl(0, out);
    if (!strncasecmp(spec, "opencl:", 7)) {
        char *end = NULL;
        long idx = strtol(spec + 7, &end, 10);
        if (end == spec + 7 || *end || idx < 0 || idx > 4095)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "machine spec '%s': expected opencl:N, N the device index", spec);
        return attn__platform_open_opencl((int)idx, out);
    }
    st = attn__sim_open_bare(spec, out);
    if (st != ATTN_NOT_FOUND) return st;
    size_t n = strlen(spec);
    if ((n > 5 && !strcasecmp(spec + n - 5, ".json")) || attn__is_file(spec))
        return attn__sim_open_file(spec, out);
    if (!strchr(spec, '/')) {
        const char *dirs[8];
        int nd = attn__data_dirs(dirs, 8);
        for (int i = 0; i < nd; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/machines/%s.json", dirs[i], spec);
            if (attn__is_file(path)) return attn__sim_open_file(path, out);
        }
    }
    char names[512] = "";
    size_t o = 0;
    for (int i = 0; i < attn_catalog_count() && o < sizeof names; i++) {
        int k = snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", attn_catalog_name(i));
        o += k > 0 ? (size_t)k : 0;
    }
    return attn__fail(ATTN_NOT_FOUND,
                      "unknown machine '%s': not a catalog name (%s), a bare spec (cuda:X.Y, "
                      "rocm:gfxNNN, xpu, cpu, local, opencl, opencl:N) or a JSON machine spec "
                      "file",
                      spec, names);
}

static pthread_once_t attn__current_once = PTHREAD_ONCE_INIT;
static attn_platform *attn__current;
static attn_status attn__current_status;
static char attn__current_error[1024];

static void attn__current_init(void)
{
    const char *env = getenv("ATTN_PLATFORM");
    attn_platform *p = NULL;
    attn_status st;
    if (env && *env) {
        st = attn_platform_open(env, &p);
        if (st != ATTN_OK)
            snprintf(attn__current_error, sizeof attn__current_error, "ATTN_PLATFORM='%s': %s", env,
                     attn_last_error());
    } else {
        st = attn_platform_detect(&p);
        if (st != ATTN_OK)
            snprintf(attn__current_error, sizeof attn__current_error, "detecting this machine: %s",
                     attn_last_error());
    }
    attn__current_status = st;
    attn__current = st == ATTN_OK ? p : NULL;
}

attn_status attn_platform_current(const attn_platform **out)
{
    ATTN__CHECK_NULL(out);
    pthread_once(&attn__current_once, attn__current_init);
    if (attn__current_status != ATTN_OK) {
        *out = NULL;
        return attn__fail(attn__current_status, "%s", attn__current_error);
    }
    *out = attn__current;
    return ATTN_OK;
}
