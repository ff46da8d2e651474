/* CPU identity and ISA features, detected once per process.
 *
 * Contract (glibc cpu-features' "present, usable"):
 * - present: the hardware reports the feature (cpuid on x86, hwcaps on arm64);
 * - usable: present AND the OS saves its register state (XCR0 via XGETBV on
 *   x86; AMX additionally needs the Linux XTILEDATA permission, requested
 *   here) AND every feature it depends on is usable AND not masked;
 * - masked: present features hidden by ATTN_CPU_MASK.
 * Dependencies are the ones libattn's kernels rely on: avx needs sse4_2;
 * avx2/fma/f16c need avx; avx512f needs avx2+fma+f16c (the *_avx512.c files
 * are compiled with those flags too); every other avx512* needs avx512f;
 * amx_tile needs avx512f (AMX code only lives in *_avx512.c files) and
 * amx_bf16/amx_int8 need amx_tile; asimdhp/sve/bf16 need neon. Hiding a
 * feature therefore hides everything that depends on it, and `usable` is
 * always a set a real CPU could have.
 * Detection is runtime only: this file compiles without any -m flags. */
#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "attn/log.h"
#include "platform/detect.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#define ATTN__CPU_X86 1
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#define ATTN__CPU_ARM64 1
#include <sys/auxv.h>
#endif

#define B(f) (1ull << ATTN_CPU_##f)

static const char *const attn__cpu_tokens[] = {
#define ATTN__CPUF_TOK(name, tok) tok,
    ATTN_CPU_FEATURE_TABLE(ATTN__CPUF_TOK)
#undef ATTN__CPUF_TOK
};

static const uint64_t attn__cpu_requires[ATTN_CPU_FEATURE_COUNT] = {
    [ATTN_CPU_AVX] = B(SSE42),
    [ATTN_CPU_AVX2] = B(AVX),
    [ATTN_CPU_FMA] = B(AVX),
    [ATTN_CPU_F16C] = B(AVX),
    [ATTN_CPU_AVX512F] = B(AVX2) | B(FMA) | B(F16C),
    [ATTN_CPU_AVX512BW] = B(AVX512F),
    [ATTN_CPU_AVX512VL] = B(AVX512F),
    [ATTN_CPU_AVX512DQ] = B(AVX512F),
    [ATTN_CPU_AVX512_BF16] = B(AVX512F),
    [ATTN_CPU_AVX512_FP16] = B(AVX512F),
    [ATTN_CPU_AVX512_VNNI] = B(AVX512F),
    [ATTN_CPU_AVX512_VBMI] = B(AVX512BW),
    [ATTN_CPU_AMX_TILE] = B(AVX512F),
    [ATTN_CPU_AMX_BF16] = B(AMX_TILE),
    [ATTN_CPU_AMX_INT8] = B(AMX_TILE),
    [ATTN_CPU_ASIMDHP] = B(NEON),
    [ATTN_CPU_SVE] = B(NEON),
    [ATTN_CPU_BF16_ARM] = B(NEON),
};

const char *attn_cpu_feature_name(attn_cpu_feature f)
{
    return (unsigned)f < ATTN_CPU_FEATURE_COUNT ? attn__cpu_tokens[f] : "?";
}

uint64_t attn__cpu_all_features(void)
{
    return (1ull << ATTN_CPU_FEATURE_COUNT) - 1;
}

uint64_t attn__cpu_feature_requires(attn_cpu_feature f)
{
    return (unsigned)f < ATTN_CPU_FEATURE_COUNT ? attn__cpu_requires[f] : 0;
}

bool attn__cpu_feature_is_x86(attn_cpu_feature f)
{
    return f < ATTN_CPU_NEON;
}

uint64_t attn__cpu_hide_closure(uint64_t hidden)
{
    hidden &= attn__cpu_all_features();
    for (bool changed = true; changed;) {
        changed = false;
        for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
            if (!(hidden & (1ull << f)) && (attn__cpu_requires[f] & hidden)) {
                hidden |= 1ull << f;
                changed = true;
            }
        }
    }
    return hidden;
}

/* Drops every feature whose requirements are not all in bits. */
static uint64_t attn__cpu_require_closure(uint64_t bits)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
            if ((bits & (1ull << f)) && (attn__cpu_requires[f] & ~bits)) {
                bits &= ~(1ull << f);
                changed = true;
            }
        }
    }
    return bits;
}

attn_status attn__cpu_feature_parse(const char *tok, attn_cpu_feature *out)
{
    ATTN__CHECK_NULL(tok);
    ATTN__CHECK_NULL(out);
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
        if (!strcasecmp(tok, attn__cpu_tokens[f])) {
            *out = (attn_cpu_feature)f;
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_INVALID_ARGUMENT, "unknown CPU feature '%s'", tok);
}

void attn__cpu_feature_list(uint64_t bits, char *buf, size_t size)
{
    size_t o = 0;
    if (size == 0) return;
    buf[0] = '\0';
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
        if (!(bits & (1ull << f)) || o >= size) continue;
        int n = snprintf(buf + o, size - o, "%s%s", o ? " " : "", attn__cpu_tokens[f]);
        o += n > 0 ? (size_t)n : 0;
    }
    if (!bits) snprintf(buf, size, "-");
}

/* Bits of every feature whose token starts with prefix ("avx512", "amx"). */
static uint64_t attn__cpu_group(const char *prefix)
{
    uint64_t bits = 0;
    size_t n = strlen(prefix);
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++)
        if (!strncmp(attn__cpu_tokens[f], prefix, n)) bits |= 1ull << f;
    return bits;
}

/* ATTN_CPU_MASK's vocabulary, one table with the feature tokens after it:
 * the CPU kernel variants (CPU_ATTN's names; CPU_MLA's amx is the group),
 * each hiding the feature that sets it apart from the variant below it,
 * and the groups. Hiding a feature hides what depends on it
 * (attn__cpu_hide_closure), so "avx512" is every avx512* feature and AMX.
 * tests/test_platform_cpu.c checks these names against CPU_ATTN's own. */
static const struct {
    const char *name;
    uint64_t bits; /* 0: cannot be hidden */
    bool variant;
} attn__cpu_mask_words[] = {
    {"amx-bf16", B(AMX_BF16), true}, {"avx512-bf16", B(AVX512_BF16), true},
    {"avx512", B(AVX512F), true},    {"avx2", B(AVX2), true},
    {"portable", 0, true},           {"amx", B(AMX_TILE), false},
    {"none", UINT64_MAX, false},
};
#define MASK_WORDS ((int)(sizeof attn__cpu_mask_words / sizeof attn__cpu_mask_words[0]))

/* Names match ignoring case, '-' and '_': "avx512bf16" is the avx512-bf16
 * variant and the avx512_bf16 feature, which hide the same thing. */
static bool attn__cpu_word_eq(const char *a, const char *b)
{
    for (;;) {
        while (*a == '-' || *a == '_')
            a++;
        while (*b == '-' || *b == '_')
            b++;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
        if (!*a) return true;
        a++;
        b++;
    }
}

/* The accepted names, for error messages. */
static void attn__cpu_mask_vocabulary(char *buf, size_t size)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, size, "kernel variants:");
    for (int i = 0; i < MASK_WORDS && o < size; i++)
        if (attn__cpu_mask_words[i].variant && attn__cpu_mask_words[i].bits)
            o += (size_t)snprintf(buf + o, size - o, " %s", attn__cpu_mask_words[i].name);
    if (o < size) o += (size_t)snprintf(buf + o, size - o, "; groups:");
    for (int i = 0; i < MASK_WORDS && o < size; i++)
        if (!attn__cpu_mask_words[i].variant)
            o += (size_t)snprintf(buf + o, size - o, " %s", attn__cpu_mask_words[i].name);
    if (o < size) o += (size_t)snprintf(buf + o, size - o, "; features: ");
    if (o < size) attn__cpu_feature_list(attn__cpu_all_features(), buf + o, size - o);
}

/* One name of a mask -> the bits it hides (before the closure). */
static attn_status attn__cpu_mask_word(const char *name, uint64_t *bits)
{
    for (int i = 0; i < MASK_WORDS; i++) {
        if (!attn__cpu_word_eq(name, attn__cpu_mask_words[i].name)) continue;
        if (!attn__cpu_mask_words[i].bits)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "CPU mask name '%s': the %s variant needs no CPU feature, so no "
                              "mask hides it ('none' leaves only it)",
                              name, attn__cpu_mask_words[i].name);
        *bits = attn__cpu_mask_words[i].bits;
        return ATTN_OK;
    }
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++)
        if (attn__cpu_word_eq(name, attn__cpu_tokens[f])) {
            *bits = 1ull << f;
            return ATTN_OK;
        }
    char known[640];
    attn__cpu_mask_vocabulary(known, sizeof known);
    return attn__fail(ATTN_INVALID_ARGUMENT,
                      "unknown name '%s' in CPU mask (accepted, ignoring case, '-' and '_': %s)",
                      name, known);
}

/* One comma-separated token at p (len bytes) -> the bits it hides. */
static attn_status attn__cpu_mask_token(const char *p, size_t len, uint64_t *bits)
{
    *bits = 0;
    while (len && isspace((unsigned char)*p)) {
        p++;
        len--;
    }
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    char tok[64];
    if (len >= sizeof tok)
        return attn__fail(ATTN_INVALID_ARGUMENT, "CPU mask token '%.*s...' is too long", 32, p);
    memcpy(tok, p, len);
    tok[len] = '\0';
    if (tok[0] == '+')
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "CPU mask token '%s': a mask can only hide features (write '-%s')", tok,
                          tok + 1);
    const char *name = tok[0] == '-' ? tok + 1 : tok;
    if (*name == '\0')
        return tok[0] == '-'
                   ? attn__fail(ATTN_INVALID_ARGUMENT, "CPU mask token '-' names no feature")
                   : ATTN_OK;
    return attn__cpu_mask_word(name, bits);
}

/* Every token of s; lenient: a bad token is skipped (the error still
 * describes the first one) and the others apply. */
static attn_status attn__cpu_mask_parse(const char *s, bool lenient, uint64_t *masked_bits)
{
    uint64_t hidden = 0;
    attn_status first = ATTN_OK;
    char first_error[1024] = "";
    for (const char *p = s; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uint64_t bits;
        attn_status st = attn__cpu_mask_token(p, len, &bits);
        if (st != ATTN_OK) {
            if (!lenient) return st;
            if (first == ATTN_OK) {
                first = st;
                snprintf(first_error, sizeof first_error, "%s", attn_last_error());
            }
        }
        hidden |= bits;
        if (!end) break;
        p = end + 1;
    }
    *masked_bits = attn__cpu_hide_closure(hidden);
    return first == ATTN_OK ? ATTN_OK : attn__fail(first, "%s", first_error);
}

attn_status attn_cpu_parse_mask(const char *s, uint64_t *masked_bits)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(masked_bits);
    uint64_t m;
    attn_status st = attn__cpu_mask_parse(s, false, &m);
    if (st == ATTN_OK) *masked_bits = m;
    return st;
}

/* Collapses runs of spaces and trims, in place (cpuid brand strings are
 * right-justified on some parts). */
static void attn__cpu_tidy(char *s)
{
    char *w = s;
    bool space = true;
    for (const char *r = s; *r; r++) {
        if (isspace((unsigned char)*r)) {
            if (!space) *w++ = ' ';
            space = true;
        } else {
            *w++ = *r;
            space = false;
        }
    }
    if (w > s && w[-1] == ' ') w--;
    *w = '\0';
}

#if defined(ATTN__CPU_X86)
static uint64_t attn__xgetbv0(void)
{
    uint32_t lo, hi;
    /* The mnemonic needs no -mxsave (only the _xgetbv intrinsic does). */
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux keeps AMX tile data off until the process asks (kernel >= 5.16). */
static bool attn__amx_permission(void)
{
#if defined(__linux__) && defined(__x86_64__)
    const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
    return true;
#endif
}

static void attn__cpu_detect_arch(attn_cpu_info *ci)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    memcpy(ci->vendor, &b, 4);
    memcpy(ci->vendor + 4, &d, 4);
    memcpy(ci->vendor + 8, &c, 4);
    ci->vendor[12] = '\0';

    unsigned c1 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) c1 = c;
    if (max_leaf >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        unsigned max_sub = a;
        b7 = b;
        c7 = c;
        d7 = d;
        if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) a71 = a;
    }

    uint64_t p = 0;
    p |= (c1 >> 20 & 1) ? B(SSE42) : 0;
    p |= (c1 >> 28 & 1) ? B(AVX) : 0;
    p |= (c1 >> 12 & 1) ? B(FMA) : 0;
    p |= (c1 >> 29 & 1) ? B(F16C) : 0;
    p |= (b7 >> 5 & 1) ? B(AVX2) : 0;
    p |= (b7 >> 16 & 1) ? B(AVX512F) : 0;
    p |= (b7 >> 17 & 1) ? B(AVX512DQ) : 0;
    p |= (b7 >> 30 & 1) ? B(AVX512BW) : 0;
    p |= (b7 >> 31 & 1) ? B(AVX512VL) : 0;
    p |= (c7 >> 11 & 1) ? B(AVX512_VNNI) : 0;
    p |= (c7 >> 1 & 1) ? B(AVX512_VBMI) : 0;
    p |= (d7 >> 23 & 1) ? B(AVX512_FP16) : 0;
    p |= (d7 >> 22 & 1) ? B(AMX_BF16) : 0;
    p |= (d7 >> 24 & 1) ? B(AMX_TILE) : 0;
    p |= (d7 >> 25 & 1) ? B(AMX_INT8) : 0;
    p |= (a71 >> 5 & 1) ? B(AVX512_BF16) : 0;
    ci->present = p;

    /* OS support: XCR0 says which register states the kernel saves. */
    uint64_t xcr0 = (c1 >> 27 & 1) ? attn__xgetbv0() : 0; /* OSXSAVE */
    bool os_avx = (xcr0 & 0x6) == 0x6;                    /* SSE | AVX */
    bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;     /* opmask | ZMM_Hi256 | Hi16_ZMM */
    bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);  /* XTILECFG | XTILEDATA */
    uint64_t avx_state = B(AVX) | B(AVX2) | B(FMA) | B(F16C);
    uint64_t avx512_state = attn__cpu_group("avx512");
    uint64_t amx_state = attn__cpu_group("amx");
    uint64_t u = p;
    if (!os_avx) u &= ~(avx_state | avx512_state | amx_state);
    if (!os_avx512) u &= ~avx512_state;
    if ((u & amx_state) && !(os_amx && attn__amx_permission())) u &= ~amx_state;
    ci->usable = attn__cpu_require_closure(u);

    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        unsigned regs[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                        &regs[4 * i + 3]);
        char brand[49];
        memcpy(brand, regs, 48);
        brand[48] = '\0';
        attn__cpu_tidy(brand);
        snprintf(ci->model, sizeof ci->model, "%s", brand);
    }
    snprintf(ci->arch, sizeof ci->arch, "%s", sizeof(void *) == 8 ? "x86_64" : "i686");
}
#elif defined(ATTN__CPU_ARM64)
/* Values of the Linux arm64 hwcap bits (asm/hwcap.h), spelled out so any
 * libc's headers do. */
#define ATTN__HWCAP_ASIMD   (1ul << 1)
#define ATTN__HWCAP_ASIMDHP (1ul << 10)
#define ATTN__HWCAP_SVE     (1ul << 22)
#define ATTN__HWCAP2_BF16   (1ul << 14)

/* A "model name" (or, failing that, implementer/part) from /proc/cpuinfo. */
static void attn__cpu_arm_model(attn_cpu_info *ci)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256], impl[32] = "", part[32] = "";
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1;
        attn__cpu_tidy(v);
        if (!strncmp(line, "model name", 10) && !ci->model[0])
            snprintf(ci->model, sizeof ci->model, "%s", v);
        else if (!strncmp(line, "CPU implementer", 15) && !impl[0])
            snprintf(impl, sizeof impl, "%s", v);
        else if (!strncmp(line, "CPU part", 8) && !part[0])
            snprintf(part, sizeof part, "%s", v);
    }
    fclose(f);
    if (!ci->model[0] && impl[0])
        snprintf(ci->model, sizeof ci->model, "ARM CPU (implementer %s, part %s)", impl, part);
}

static void attn__cpu_detect_arch(attn_cpu_info *ci)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint64_t p = 0;
    p |= (hw & ATTN__HWCAP_ASIMD) ? B(NEON) : 0;
    p |= (hw & ATTN__HWCAP_ASIMDHP) ? B(ASIMDHP) : 0;
    p |= (hw & ATTN__HWCAP_SVE) ? B(SVE) : 0;
    p |= (hw2 & ATTN__HWCAP2_BF16) ? B(BF16_ARM) : 0;
    ci->present = p;
    /* The kernel reports a hwcap only when it supports the state. */
    ci->usable = attn__cpu_require_closure(p);
    snprintf(ci->vendor, sizeof ci->vendor, "arm");
    snprintf(ci->arch, sizeof ci->arch, "aarch64");
    attn__cpu_arm_model(ci);
}
#else
static void attn__cpu_detect_arch(attn_cpu_info *ci)
{
    (void)ci; /* no feature detection on this architecture: scalar code only */
}
#endif

static int attn__cpu_count(void)
{
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static attn_cpu_info attn__cpu_raw;    /* unmasked */
static attn_cpu_info attn__cpu_masked; /* what attn_cpu_info_get returns */
static pthread_once_t attn__cpu_once = PTHREAD_ONCE_INIT;

static void attn__cpu_init(void)
{
    attn_cpu_info *ci = &attn__cpu_raw;
    memset(ci, 0, sizeof *ci);
    attn__cpu_detect_arch(ci);
    if (!ci->arch[0]) {
        struct utsname u;
        snprintf(ci->arch, sizeof ci->arch, "%.15s", uname(&u) == 0 ? u.machine : "unknown");
    }
    if (!ci->vendor[0]) snprintf(ci->vendor, sizeof ci->vendor, "unknown");
    if (!ci->model[0]) snprintf(ci->model, sizeof ci->model, "%s CPU", ci->arch);
    ci->logical_cores = attn__cpu_count();
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    ci->memory_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;

    attn__cpu_masked = *ci;
    const char *env = getenv("ATTN_CPU_MASK");
    uint64_t mask = 0;
    /* a bad name is reported and skipped; the names around it still hide
     * (dropping the whole mask would run kernels the user meant to hide) */
    if (env && *env && attn__cpu_mask_parse(env, true, &mask) != ATTN_OK) {
        char hidden[512];
        attn__cpu_feature_list(mask & ci->present, hidden, sizeof hidden);
        attn_log(ATTN_LOG_WARN, "ATTN_CPU_MASK='%s': %s; that name is ignored, hidden here: %s",
                 env, attn_last_error(), hidden);
        attn_clear_error();
    }
    attn__cpu_masked.masked = mask & ci->present;
    attn__cpu_masked.usable = ci->usable & ~mask;
}

const attn_cpu_info *attn__cpu_info_unmasked(void)
{
    pthread_once(&attn__cpu_once, attn__cpu_init);
    return &attn__cpu_raw;
}

const attn_cpu_info *attn_cpu_info_get(void)
{
    pthread_once(&attn__cpu_once, attn__cpu_init);
    return &attn__cpu_masked;
}

bool attn_cpu_has(attn_cpu_feature f)
{
    if ((unsigned)f >= ATTN_CPU_FEATURE_COUNT) return false;
    return (attn_cpu_info_get()->usable >> f) & 1;
}

static void attn__cpu_write_bits(attn__jw *w, const char *key, uint64_t bits)
{
    attn__jw_key(w, key);
    attn__jw_arr_begin(w);
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++)
        if (bits & (1ull << f)) attn__jw_str(w, attn__cpu_tokens[f]);
    attn__jw_arr_end(w);
}

void attn__cpu_write_json(attn__jw *w, const attn_cpu_info *ci)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "vendor");
    attn__jw_str(w, ci->vendor);
    attn__jw_key(w, "model");
    attn__jw_str(w, ci->model);
    attn__jw_key(w, "arch");
    attn__jw_str(w, ci->arch);
    attn__jw_key(w, "cores");
    attn__jw_int(w, ci->logical_cores);
    attn__jw_key(w, "memory_bytes");
    attn__jw_int(w, (long long)ci->memory_bytes);
    attn__jw_key(w, "features");
    attn__jw_obj_begin(w);
    attn__cpu_write_bits(w, "present", ci->present);
    attn__cpu_write_bits(w, "usable", ci->usable);
    attn__cpu_write_bits(w, "masked", ci->masked);
    attn__jw_obj_end(w);
    attn__jw_obj_end(w);
}
