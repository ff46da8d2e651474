/* icount: instructions one CPU_ATTN forward call executes, counted exactly
 * by single-stepping it under ptrace. A count does not depend on the load
 * of the machine, so two builds can be compared on a shared machine; and it
 * works where callgrind cannot (valgrind runs no AVX-512 code: the kernels
 * would fall back to AVX2 under it).
 *
 *   icount [--variant NAME] [--batch N] [--context N] [--kv bf16|fp8_e4m3|fp8_e5m2]
 *          [--heads H] [--kv-heads K] [--head-size D] [--qlen Q] [--block-size N]
 *          [--calls N] [--functions] [--json]
 *
 * Defaults are `attn bench`'s decode shape (32 query heads, 8 KV heads,
 * head size 128, bf16 activations, block size 128), batch 1, context 1024,
 * bf16. The child process builds the inputs, runs one untimed call
 * (one-time setup: variant choice, tables, scratch), then `--calls` calls,
 * each between two SIGUSR1 stops; the parent single-steps only between
 * them. ATTN_NUM_THREADS=1, so the call runs on the traced thread.
 * --functions also reads the instruction pointer at every step and prints
 * the instructions of the calls per function (symbols from nm of the
 * mapped file; about 1.5x slower), to see where a call's work goes.
 * Built by bench/ab/icount.sh; x86-64 Linux only. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/cpu_perf.h"
#include "attn/kvcache.h"

typedef struct {
    const char *variant;
    int batch, context, heads, kv_heads, head, qlen, calls, bs;
    attn_kv_dtype kv;
    const char *kv_name;
    bool json, functions;
} opts;

static int usage(FILE *f)
{
    fprintf(f, "usage: icount [--variant NAME] [--batch N] [--context N] [--kv DTYPE]\n"
               "              [--heads H] [--kv-heads K] [--head-size D] [--qlen Q]\n"
               "              [--block-size N] [--calls N] [--functions] [--json]\n"
               "Instructions executed by one CPU_ATTN forward call (single-stepped under\n"
               "ptrace, so the count is exact and independent of machine load).\n"
               "Defaults: attn bench's decode shape (32 heads, 8 KV heads, head size 128,\n"
               "bf16 activations, block size 128), batch 1, context 1024, --kv bf16, 1 query\n"
               "token, 1 call.\n");
    return f == stdout ? 0 : 2;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static bool parse(int argc, char **argv, opts *o)
{
    *o = (opts){NULL, 1, 1024, 32, 8, 128, 1, 1, 128, ATTN_KV_AUTO, "bf16", false, false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = !strcmp(a, "--batch")        ? &o->batch
                   : !strcmp(a, "--context")    ? &o->context
                   : !strcmp(a, "--heads")      ? &o->heads
                   : !strcmp(a, "--kv-heads")   ? &o->kv_heads
                   : !strcmp(a, "--head-size")  ? &o->head
                   : !strcmp(a, "--qlen")       ? &o->qlen
                   : !strcmp(a, "--calls")      ? &o->calls
                   : !strcmp(a, "--block-size") ? &o->bs
                                                : NULL;
        if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--functions")) {
            o->functions = true;
        } else if (num && v) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 1 || x > 1 << 20) return false;
            *num = (int)x;
            i++;
        } else if (!strcmp(a, "--variant") && v) {
            o->variant = v;
            i++;
        } else if (!strcmp(a, "--kv") && v) {
            o->kv_name = v;
            if (strcmp(v, "bf16") && attn_kv_dtype_parse(v, &o->kv) != ATTN_OK) return false;
            i++;
        } else {
            return false;
        }
    }
    return o->heads % o->kv_heads == 0 && o->qlen <= o->context;
}

/* The traced child: inputs, one untimed call, then o->calls marked calls. */
static int child(const opts *o)
{
    setenv("ATTN_NUM_THREADS", "1", 1);
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) return 3;
    raise(SIGSTOP);
    attn_platform *plat = NULL;
    const attn_backend *b = NULL;
    if (attn_platform_detect(&plat) != ATTN_OK ||
        attn_backend_resolve(plat, "CPU_ATTN", &b) != ATTN_OK || !b) {
        fprintf(stderr, "icount: CPU_ATTN: %s\n", attn_last_error());
        return 1;
    }
    if (o->variant && attn_cpu_attn_force_variant(o->variant) != ATTN_OK) {
        fprintf(stderr, "icount: --variant: %s\n", attn_last_error());
        return 1;
    }
    int BS = o->bs;
    int nbr = (o->context + BS - 1) / BS, nblocks = o->batch * nbr, tokens = o->batch * o->qlen;
    attn_kv_layout_info li;
    if (attn_kv_layout_compute(b->desc, ATTN_LAYOUT_HND, nblocks, BS, o->kv_heads, o->head, 0,
                               o->kv, ATTN_DTYPE_BF16, &li) != ATTN_OK) {
        fprintf(stderr, "icount: layout: %s\n", attn_last_error());
        return 1;
    }
    size_t bytes = (size_t)li.bytes_per_layer, qn = (size_t)tokens * o->heads * o->head;
    uint8_t *kv = malloc(bytes);
    uint16_t *q = malloc(qn * 2), *out = malloc(qn * 2);
    int32_t *qsl = malloc(sizeof(int32_t) * (size_t)(o->batch + 1));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)o->batch);
    int32_t *bt = malloc(sizeof(int32_t) * (size_t)nblocks);
    if (!kv || !q || !out || !qsl || !seq || !bt) return 1;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    if (li.elem == ATTN_ELEM_BF16)
        for (size_t i = 0; i < bytes / 2; i++) { /* |x| in [2^-8, 2) as attn bench */
            uint16_t v = (uint16_t)rng(&s);
            ((uint16_t *)kv)[i] = (uint16_t)((v & 0x807f) | (uint16_t)((0x77 + (v >> 7 & 7)) << 7));
        }
    else
        for (size_t i = 0; i < bytes; i++)
            kv[i] = (uint8_t)(rng(&s) & 0xbf);
    for (size_t i = 0; i < qn; i++)
        q[i] = (uint16_t)((rng(&s) & 0x807f) | 0x3c00);
    for (int r = 0; r <= o->batch; r++)
        qsl[r] = r * o->qlen;
    for (int r = 0; r < o->batch; r++)
        seq[r] = o->context;
    for (int i = 0; i < nblocks; i++)
        bt[i] = i;
    li.view.data = kv;
    attn_layer_params lp = {.num_heads = o->heads,
                            .num_kv_heads = o->kv_heads,
                            .head_size = o->head,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_BF16,
                            .kv_cache_dtype = o->kv};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = o->batch,
                               .num_actual_tokens = tokens,
                               .max_query_len = o->qlen,
                               .max_seq_len = o->context,
                               .block_table = bt,
                               .block_table_stride = nbr,
                               .causal = true,
                               .block_size = BS};
    attn_builder_init bi = {.desc = b->desc,
                            .layer = &lp,
                            .block_size = BS,
                            .num_blocks = nblocks,
                            .max_num_reqs = o->batch,
                            .max_num_tokens = tokens,
                            .max_blocks_per_req = nbr};
    void *bstate = NULL;
    const void *md = NULL;
    attn_kernel *k = NULL;
    if (b->desc->builder->create(&bi, &bstate) != ATTN_OK ||
        b->desc->builder->build(bstate, 0, &cm, false, &md) != ATTN_OK ||
        attn_kernel_open(b, &lp, NULL, &k) != ATTN_OK) {
        fprintf(stderr, "icount: setup: %s\n", attn_last_error());
        return 1;
    }
    attn_forward_args a = {
        .layer = &lp, .common = &cm, .metadata = md, .q = q, .kv = &li.view, .out = out};
    for (int c = 0; c <= o->calls; c++) {
        if (c > 0) raise(SIGUSR1);
        attn_status st = attn_kernel_forward(k, &a);
        if (c > 0) raise(SIGUSR1);
        if (st != ATTN_OK) {
            fprintf(stderr, "icount: forward: %s\n", attn_last_error());
            return 1;
        }
    }
    printf("%s\n", attn_cpu_attn_variant());
    fflush(stdout);
    return 0;
}

/* ---- --functions: instruction pointers -> functions ---------------------- */

#define IP_SLOTS (1u << 20)
typedef struct {
    uint64_t ip, n;
} ip_count;

static ip_count *g_ips;
static unsigned g_nips;

static void ip_add(uint64_t ip)
{
    unsigned h = (unsigned)((ip * 0x9e3779b97f4a7c15ull) >> 44) & (IP_SLOTS - 1);
    while (g_ips[h].ip && g_ips[h].ip != ip)
        h = (h + 1) & (IP_SLOTS - 1);
    if (!g_ips[h].ip) {
        if (g_nips + 1 >= IP_SLOTS / 2) return; /* full: the rest is not attributed */
        g_ips[h].ip = ip;
        g_nips++;
    }
    g_ips[h].n++;
}

typedef struct {
    uint64_t lo, hi, off;
    char path[256];
} map_ent;

typedef struct {
    uint64_t addr;
    char name[96];
} sym_ent;

typedef struct {
    char name[160];
    uint64_t n;
} fn_count;

static int cmp_sym(const void *a, const void *b)
{
    uint64_t x = ((const sym_ent *)a)->addr, y = ((const sym_ent *)b)->addr;
    return x < y ? -1 : x > y;
}

static int cmp_fn(const void *a, const void *b)
{
    uint64_t x = ((const fn_count *)a)->n, y = ((const fn_count *)b)->n;
    return x > y ? -1 : x < y;
}

static int read_maps(pid_t pid, map_ent *m, int cap)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char perm[8] = "", file[256] = "";
        uint64_t lo, hi, off;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %255s", &lo, &hi, perm,
                   &off, file) >= 4 &&
            perm[2] == 'x') {
            m[n] = (map_ent){lo, hi, off, ""};
            snprintf(m[n].path, sizeof m[n].path, "%s", file[0] ? file : "[anon]");
            n++;
        }
    }
    fclose(f);
    return n;
}

/* the text symbols of one file (nm -n), sorted by address; NULL if none */
static sym_ent *file_syms(const char *path, int *count)
{
    char cmd[320];
    snprintf(cmd, sizeof cmd, "nm -n --defined-only '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    *count = 0;
    if (!f) return NULL;
    int cap = 4096, n = 0;
    sym_ent *s = malloc(sizeof *s * (size_t)cap);
    char line[512];
    while (s && fgets(line, sizeof line, f)) {
        uint64_t a;
        char t, name[256];
        if (sscanf(line, "%" SCNx64 " %c %255s", &a, &t, name) != 3 || (t != 't' && t != 'T'))
            continue;
        if (n == cap) {
            sym_ent *g = realloc(s, sizeof *s * (size_t)(cap *= 2));
            if (!g) break;
            s = g;
        }
        s[n].addr = a;
        snprintf(s[n].name, sizeof s[n].name, "%.95s", name);
        n++;
    }
    pclose(f);
    qsort(s, (size_t)n, sizeof *s, cmp_sym);
    *count = n;
    return s;
}

/* per function "file:symbol" the instructions of all stepped calls */
static void print_functions(const map_ent *maps, int nmaps, uint64_t total, int calls)
{
    sym_ent *syms[64] = {0};
    int nsym[64] = {0};
    for (int i = 0; i < nmaps && i < 64; i++)
        syms[i] = file_syms(maps[i].path, &nsym[i]);
    fn_count *fn = calloc(g_nips + 1, sizeof *fn);
    int nfn = 0;
    if (!fn) return;
    for (unsigned h = 0; h < IP_SLOTS; h++) {
        if (!g_ips[h].ip) continue;
        uint64_t ip = g_ips[h].ip;
        char name[160] = "?";
        for (int i = 0; i < nmaps && i < 64; i++) {
            if (ip < maps[i].lo || ip >= maps[i].hi) continue;
            uint64_t a = ip - maps[i].lo + maps[i].off;
            const char *base = strrchr(maps[i].path, '/');
            base = base ? base + 1 : maps[i].path;
            int lo = 0, hi = nsym[i] - 1, at = -1;
            while (lo <= hi) {
                int mid = (lo + hi) / 2;
                if (syms[i][mid].addr <= a) {
                    at = mid;
                    lo = mid + 1;
                } else {
                    hi = mid - 1;
                }
            }
            snprintf(name, sizeof name, "%.60s:%.95s", base, at >= 0 ? syms[i][at].name : "?");
            break;
        }
        int k = 0;
        while (k < nfn && strcmp(fn[k].name, name))
            k++;
        if (k == nfn) snprintf(fn[nfn++].name, sizeof fn[0].name, "%s", name);
        fn[k].n += g_ips[h].n;
    }
    qsort(fn, (size_t)nfn, sizeof *fn, cmp_fn);
    printf("instructions per call by function (%d call%s):\n", calls, calls == 1 ? "" : "s");
    for (int k = 0; k < nfn; k++)
        printf("  %12.0f %5.1f%%  %s\n", (double)fn[k].n / calls,
               100.0 * (double)fn[k].n / (double)total, fn[k].name);
    free(fn);
    for (int i = 0; i < 64; i++)
        free(syms[i]);
}

int main(int argc, char **argv)
{
    opts o;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return usage(stdout);
    if (!parse(argc, argv, &o)) return usage(stderr);
    int fd[2];
    if (pipe(fd) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        _exit(child(&o));
    }
    close(fd[1]);
    uint64_t counts[64] = {0};
    int ncalls = 0, status, nmaps = 0;
    static map_ent maps[64];
    if (o.functions && !(g_ips = calloc(IP_SLOTS, sizeof *g_ips))) return 1;
    bool stepping = false;
    int sig = 0;
    for (;;) {
        if (waitpid(pid, &status, 0) != pid) return 1;
        if (!WIFSTOPPED(status)) break;
        int s = WSTOPSIG(status);
        sig = 0;
        if (s == SIGUSR1) {
            if (stepping) ncalls++;
            stepping = !stepping;
            if (o.functions && ncalls == o.calls) nmaps = read_maps(pid, maps, 64);
        } else if (s == SIGTRAP && stepping) {
            if (ncalls < 64) counts[ncalls]++;
            struct user_regs_struct regs;
            if (o.functions && ptrace(PTRACE_GETREGS, pid, NULL, &regs) == 0) ip_add(regs.rip);
        } else if (s != SIGSTOP && s != SIGTRAP) {
            sig = s; /* deliver anything else */
        }
        if (ptrace(stepping ? PTRACE_SINGLESTEP : PTRACE_CONT, pid, NULL, (void *)(intptr_t)sig) !=
            0)
            return 1;
    }
    char variant[64] = "?";
    ssize_t n = read(fd[0], variant, sizeof variant - 1);
    variant[n > 0 ? n : 0] = 0;
    variant[strcspn(variant, "\n")] = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || ncalls != o.calls) {
        fprintf(stderr, "icount: the traced run failed (status %d, %d calls)\n", status, ncalls);
        return 1;
    }
    uint64_t lo = counts[0], hi = counts[0];
    for (int i = 1; i < ncalls && i < 64; i++) {
        if (counts[i] < lo) lo = counts[i];
        if (counts[i] > hi) hi = counts[i];
    }
    if (o.json)
        printf("{\"variant\": \"%s\", \"batch\": %d, \"context\": %d, \"kv\": \"%s\", "
               "\"heads\": %d, \"kv_heads\": %d, \"head_size\": %d, \"qlen\": %d, "
               "\"block_size\": %d, \"instructions\": %llu, \"instructions_max\": %llu}\n",
               variant, o.batch, o.context, o.kv_name, o.heads, o.kv_heads, o.head, o.qlen, o.bs,
               (unsigned long long)lo, (unsigned long long)hi);
    else
        printf("%-12s b%d ctx %d kv %s h %d/%d d %d q %d bs %d: %llu instructions per call%s\n",
               variant, o.batch, o.context, o.kv_name, o.heads, o.kv_heads, o.head, o.qlen, o.bs,
               (unsigned long long)lo, lo == hi ? "" : " (calls differ)");
    if (o.functions) {
        uint64_t total = 0;
        for (int i = 0; i < ncalls && i < 64; i++)
            total += counts[i];
        print_functions(maps, nmaps, total, ncalls);
    }
    return 0;
}
