/* AMX tile instructions for the CPU kernels (CPU_ATTN, CPU_MLA). Inline
 * asm, so the kernel files need no -mamx flags and build with any x86-64
 * compiler;
 * callers run them only where attn_cpu_has(ATTN_CPU_AMX_BF16) (the tile
 * state permission is requested by the platform layer). Memory clobbers:
 * tiles read and write memory the compiler cannot see. */
#ifndef ATTN_UTIL_AMX_H
#define ATTN_UTIL_AMX_H

#include <stdint.h>
#include <string.h>

#define TLOAD(t, base, stride)                                                                     \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) : "memory")
#define TSTORE(t, base, stride)                                                                    \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride))          \
                     : "memory")
#define TZERO(t)     __asm__ volatile("tilezero %%tmm" #t ::: "memory")
#define TDP(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

/* Accumulator tiles 0 .. n-1 (n <= 4) to / from memory: tile i at base +
 * i * step bytes, rows stride bytes apart. */
static inline __attribute__((always_inline)) void attn__amx_store_acc(void *base, long step,
                                                                      long stride, int n)
{
    char *b = base;
    TSTORE(0, b, stride);
    if (n > 1) TSTORE(1, b + step, stride);
    if (n > 2) TSTORE(2, b + 2 * step, stride);
    if (n > 3) TSTORE(3, b + 3 * step, stride);
}

static inline __attribute__((always_inline)) void attn__amx_load_acc(const void *base, long step,
                                                                     long stride, int n)
{
    const char *b = base;
    TLOAD(0, b, stride);
    if (n > 1) TLOAD(1, b + step, stride);
    if (n > 2) TLOAD(2, b + 2 * step, stride);
    if (n > 3) TLOAD(3, b + 3 * step, stride);
}

typedef struct {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} attn__amx_palette;

/* palette 1 with tiles 0..7 of rows[i] x colsb[i] bytes (NULL: 64) */
static inline void attn__amx_config(const uint8_t rows[8], const uint16_t *colsb)
{
    attn__amx_palette c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = colsb ? colsb[i] : 64;
        c.rows[i] = rows[i];
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}

static inline void attn__amx_release(void)
{
    __asm__ volatile("tilerelease" ::: "memory");
}

#endif
