/* Selection benchmark: nanoseconds per uncached selection over every
 * machine of the built-in catalog (a few layer configurations each), and
 * per cached lookup (attn_select on a warm cache). Prints a table of
 * medians over repeats. Targets: < 20 us uncached, < 100 ns cached.
 *
 * usage: bench_select [repeats] (default 7; keep it short on shared CPUs) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"

#define MAX_MACHINES 64
#define NCFG         5

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void configs(attn_selector_config *c)
{
    for (int i = 0; i < NCFG; i++) {
        attn_selector_config_init(&c[i]);
        c[i].head_size = 128;
    }
    c[1].kv_cache_dtype = ATTN_KV_FP8;
    c[2].head_size = 64;
    c[2].has_sink = true;
    c[3].head_size = 576;
    c[3].use_mla = true;
    c[3].num_heads = 128;
    c[4].block_size = 16;
    c[4].dtype = ATTN_DTYPE_FP16;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 7;
    if (repeats < 1 || repeats > 1000) {
        fprintf(stderr, "usage: bench_select [repeats 1..1000]\n");
        return 2;
    }
    attn_log_set_level(ATTN_LOG_ERROR); /* the CPU block-size warning is expected here */
    attn_platform *m[MAX_MACHINES];
    int nm = 0;
    for (int i = 0; i < attn_catalog_count() && nm < MAX_MACHINES; i++) {
        if (attn_platform_open(attn_catalog_name(i), &m[nm]) == ATTN_OK)
            nm++;
        else
            fprintf(stderr, "skipping %s: %s\n", attn_catalog_name(i), attn_last_error());
    }
    if (nm == 0) {
        fprintf(stderr, "bench_select: no catalog machine could be opened\n");
        return 1;
    }
    attn_selector_config cfg[NCFG];
    configs(cfg);
    const int inner_uncached = 20, inner_cached = 20000;

    /* Warm-up: first-use costs (plugins, registry, loader cache). */
    for (int i = 0; i < nm; i++)
        for (int c = 0; c < NCFG; c++) {
            attn_selection *s = NULL;
            attn_select_uncached(m[i], NULL, &cfg[c], &s);
            attn_selection_free(s);
        }

    printf("selection benchmark: %d catalog machines x %d configurations, median of %d\n\n", nm,
           NCFG, repeats);
    printf("%-12s %-6s %14s %14s   %s\n", "machine", "device", "uncached ns", "cached ns",
           "chosen (default config)");
    double *all_u = malloc(sizeof(double) * (size_t)repeats * (size_t)nm);
    double *all_c = malloc(sizeof(double) * (size_t)repeats * (size_t)nm);
    double *rep = malloc(sizeof(double) * (size_t)repeats);
    if (!all_u || !all_c || !rep) return 1;
    int nu = 0, nc = 0;
    for (int i = 0; i < nm; i++) {
        for (int r = 0; r < repeats; r++) {
            double t0 = now_ns();
            for (int k = 0; k < inner_uncached; k++)
                for (int c = 0; c < NCFG; c++) {
                    attn_selection *s = NULL;
                    attn_select_uncached(m[i], NULL, &cfg[c], &s);
                    attn_selection_free(s);
                }
            rep[r] = (now_ns() - t0) / (inner_uncached * NCFG);
            all_u[nu++] = rep[r];
        }
        double u = median(rep, repeats);
        const attn_selection *s = NULL;
        for (int c = 0; c < NCFG; c++)
            attn_select(m[i], NULL, &cfg[c], &s); /* warm */
        volatile const void *sink = NULL;
        for (int r = 0; r < repeats; r++) {
            double t0 = now_ns();
            for (int k = 0; k < inner_cached; k++) {
                attn_select(m[i], NULL, &cfg[k % NCFG], &s);
                sink = s;
            }
            rep[r] = (now_ns() - t0) / inner_cached;
            all_c[nc++] = rep[r];
        }
        (void)sink;
        double cached = median(rep, repeats);
        attn_select(m[i], NULL, &cfg[0], &s);
        const char *chosen = attn_selection_backend(s);
        printf("%-12s %-6s %14.0f %14.1f   %s\n", attn_platform_name(m[i]),
               attn_platform_kind_name(attn_platform_get_kind(m[i])), u, cached,
               chosen ? chosen : "(none)");
    }
    double mu = median(all_u, nu), mc = median(all_c, nc);
    printf("\n%-19s %14.0f %14.1f\n", "all machines", mu, mc);
    printf("targets: uncached < 20000 ns (%s), cached < 100 ns (%s)\n",
           mu < 20000 ? "met" : "MISSED", mc < 100 ? "met" : "MISSED");
    free(all_u);
    free(all_c);
    free(rep);
    for (int i = 0; i < nm; i++)
        attn_platform_free(m[i]);
    return 0;
}
