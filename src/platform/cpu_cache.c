/* The last-level cache of the CPUs this process may run on, detected once.
 *
 * Contract: the LLC is the highest cache level holding data; an instance is
 * one cache of that level (shared by the CPUs of its shared_cpu_list), and
 * total_bytes sums the distinct instances the process's CPUs (its affinity
 * set) use. That aggregate, not one instance, is what a buffer streamed by
 * every thread must outgrow to come from memory: a two-socket machine has
 * two L3s, an EPYC one per CCD. Linux sysfs is read first
 * (/sys/devices/system/cpu/cpuN/cache/indexM/{level,type,size,
 * shared_cpu_list}); where it says nothing, x86 cpuid's deterministic cache
 * leaf (4 on Intel, 0x8000001D on AMD) gives one instance and how many
 * logical CPUs share it. Nothing found: total_bytes 0 ("unknown"). */
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/detect.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define LLC_KEY 256 /* a shared_cpu_list longer than this is cut (its prefix still tells) */

typedef struct {
    int level;
    uint64_t bytes;
    char key[LLC_KEY];
} llc_seen;

typedef struct {
    llc_seen *v;
    int n, cap;
    int level;
} llc_set;

/* One sysfs attribute, trailing newline removed; false when unreadable. */
static bool read_attr(const char *dir, const char *name, char *buf, size_t size)
{
    char path[1024];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* "32768K", "32M", "1G" or plain bytes -> bytes; 0 when malformed. */
static uint64_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case '\0': break;
    default: return 0;
    }
    if (v > (UINT64_MAX >> shift)) return 0;
    return (uint64_t)v << shift;
}

/* Keeps the instance if it is at the highest level seen and new. */
static attn_status llc_add(llc_set *s, int level, uint64_t bytes, const char *key)
{
    if (level < s->level) return ATTN_OK;
    if (level > s->level) {
        s->level = level;
        s->n = 0;
    }
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].key, key)) return ATTN_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        llc_seen *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return attn__fail(ATTN_OUT_OF_MEMORY, "LLC scan: out of memory");
        s->v = v;
        s->cap = cap;
    }
    llc_seen *e = &s->v[s->n++];
    e->level = level;
    e->bytes = bytes;
    snprintf(e->key, sizeof e->key, "%s", key);
    return ATTN_OK;
}

/* The data or unified caches of one cpuN folder. */
static attn_status scan_cpu(const char *cpu_dir, llc_set *s)
{
    char cache[1024];
    if ((size_t)snprintf(cache, sizeof cache, "%s/cache", cpu_dir) >= sizeof cache) return ATTN_OK;
    attn_status st = ATTN_OK;
    for (int i = 0; i < 16 && st == ATTN_OK; i++) {
        char idx[1100], level[16], type[32], size[32], shared[LLC_KEY];
        snprintf(idx, sizeof idx, "%s/index%d", cache, i);
        if (!read_attr(idx, "level", level, sizeof level)) continue;
        if (read_attr(idx, "type", type, sizeof type) && !strcmp(type, "Instruction")) continue;
        if (!read_attr(idx, "size", size, sizeof size)) continue;
        uint64_t bytes = parse_size(size);
        int lv = atoi(level);
        if (!bytes || lv <= 0) continue;
        /* no list: an instance of this CPU alone */
        if (!read_attr(idx, "shared_cpu_list", shared, sizeof shared) || !shared[0])
            snprintf(shared, sizeof shared, "%.*s", (int)sizeof shared - 1, cpu_dir);
        st = llc_add(s, lv, bytes, shared);
    }
    return st;
}

attn_status attn__cpu_llc_scan(const char *root, const cpu_set_t *cpus, attn__cpu_llc *out)
{
    ATTN__CHECK_NULL(root);
    ATTN__CHECK_NULL(out);
    memset(out, 0, sizeof *out);
    out->source = "none";
    DIR *d = opendir(root);
    if (!d) return ATTN_OK;
    llc_set s = {0};
    attn_status st = ATTN_OK;
    for (struct dirent *e; st == ATTN_OK && (e = readdir(d));) {
        char *end = NULL;
        if (strncmp(e->d_name, "cpu", 3) || !isdigit((unsigned char)e->d_name[3])) continue;
        long n = strtol(e->d_name + 3, &end, 10);
        if (*end || n < 0) continue;
        if (cpus && (n >= CPU_SETSIZE || !CPU_ISSET((int)n, cpus))) continue;
        char dir[1024];
        if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, e->d_name) >= sizeof dir) continue;
        st = scan_cpu(dir, &s);
    }
    closedir(d);
    if (st == ATTN_OK && s.n > 0) {
        out->level = s.level;
        out->instances = s.n;
        for (int i = 0; i < s.n; i++) {
            out->total_bytes += s.v[i].bytes;
            if (s.v[i].bytes > out->instance_bytes) out->instance_bytes = s.v[i].bytes;
        }
        out->source = "sysfs";
    }
    free(s.v);
    return st;
}

#if defined(__x86_64__) || defined(__i386__)
/* The deepest data/unified cache cpuid describes, shared by how many. */
static void cpuid_llc(int cpus, attn__cpu_llc *out)
{
    unsigned a, b, c, d, leaf = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    bool amd = b == 0x68747541 || b == 0x6f677948; /* "Auth"enticAMD, "Hygo"nGenuine */
    if (amd) {
        if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x8000001d &&
            __get_cpuid(0x80000001, &a, &b, &c, &d) && (c >> 22 & 1)) /* TOPOEXT */
            leaf = 0x8000001d;
    } else if (max_leaf >= 4) {
        leaf = 4;
    }
    if (!leaf) return;
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        unsigned type = a & 0x1f, level = a >> 5 & 7;
        if (type == 0) break;
        if (type == 2 || (int)level < out->level) continue;
        uint64_t bytes = (uint64_t)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) *
                         ((uint64_t)c + 1);
        int sharing = (int)((a >> 14) & 0xfff) + 1;
        out->level = (int)level;
        out->instance_bytes = bytes;
        out->instances = sharing >= cpus ? 1 : (cpus + sharing - 1) / sharing;
        out->total_bytes = bytes * (uint64_t)out->instances;
        out->source = "cpuid";
    }
}
#endif

static attn__cpu_llc g_llc;
static pthread_once_t g_llc_once = PTHREAD_ONCE_INIT;

static void llc_init(void)
{
    cpu_set_t set, *cpus = NULL;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = &set;
    if (attn__cpu_llc_scan("/sys/devices/system/cpu", cpus, &g_llc) != ATTN_OK) {
        attn_clear_error();
        memset(&g_llc, 0, sizeof g_llc);
        g_llc.source = "none";
    }
#if defined(__x86_64__) || defined(__i386__)
    if (g_llc.total_bytes == 0) cpuid_llc(attn__cpu_info_unmasked()->logical_cores, &g_llc);
#endif
}

const attn__cpu_llc *attn__cpu_llc_get(void)
{
    pthread_once(&g_llc_once, llc_init);
    return &g_llc;
}
