/* CPU_ATTN streaming decode of the amx-bf16 variant: cpu_attn_decode_avx512.h
 * with the tile path (PV on the tile unit), built with AVX512_BF16. */
#define SD_AMX 1
#include "backends/cpu/cpu_attn_decode_avx512.h"

/* The amx-bf16 variant's decode: the same stream, with PV on the tile unit
 * for bf16 queries over a bf16 cache and Dv <= 128 (four O tiles). */
/* the row mode a job takes on the tile path, or -1 for the FMA path. fp8
 * needs the byte tables but, unlike the FMA path (R <= 4, register
 * pressure), takes any R: the widening happens once per row. */
static int sd_tile_mode(const attn__cpu_job *j)
{
    if (j->prec != ATTN_CPU_PREC_BF16 || j->Dv > 128) return -1;
    if (j->kv_elem == ATTN_ELEM_BF16) return sd_mode(j) == SD_PAIR ? SD_PAIR : -1;
    const uint8_t *hi, *lo;
    if (j->D % 64 == 0 && j->Dv % 64 == 0 &&
        attn__cpu_fp8_bf16_tables(j->kv_elem == ATTN_ELEM_FP8_E4M3, &hi, &lo))
        return SD_VBMI;
    return -1;
}

static void sd_prep_amx(attn__cpu_job *j, const void *const *qrows)
{
    int mode = sd_tile_mode(j);
    if (mode < 0) {
        sd_prep(j, qrows);
        return;
    }
    sd_begin(j, mode, SD_TILES);
    float *al = (float *)((char *)j->scratch + SD_AL);
    for (int r = 0; r < 8; r++)
        al[r] = 1.0f;
    al[8] = 0.0f;
    /* queries as B tiles: pair row p of step k = the dims of staged
     * positions 32k + 2p, +1 for each row (raw bf16; the scale is applied to
     * the scores) */
    uint32_t *qt = (uint32_t *)((char *)j->qbuf + SD_QT);
    for (int k = 0; k < j->D / 32; k++)
        for (int p = 0; p < 16; p++)
            for (int r = 0; r < j->R; r++) {
                const uint16_t *q = qrows[r];
                int s0 = 32 * k + 2 * p;
                int d0 = mode == SD_VBMI ? sd_staged_dim(s0) : s0;
                int d1 = mode == SD_VBMI ? sd_staged_dim(s0 + 1) : s0 + 1;
                qt[k * 256 + p * 16 + r] = (uint32_t)q[d0] | (uint32_t)q[d1] << 16;
            }
    uint8_t R2 = (uint8_t)(2 * j->R);
    uint16_t C = (uint16_t)(4 * j->R);
    const uint8_t rows[8] = {R2, R2, R2, R2, R2, 16, 16, 16};
    const uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, C, C};
    attn__amx_config(rows, colsb);
    TZERO(0);
    TZERO(1);
    TZERO(2);
    TZERO(3);
}

/* O tiles <-> SD_OT between the chunks of interleaved jobs */
static void sd_park(attn__cpu_job *j)
{
    int *ms = (int *)((char *)j->scratch + SD_MODE);
    if (ms[1] == SD_TILES && !ms[2]) {
        sd_ot_store(j, j->Dv / 32);
        ms[2] = 1;
    }
}

static void sd_resume(attn__cpu_job *j)
{
    int *ms = (int *)((char *)j->scratch + SD_MODE);
    if (ms[1] == SD_TILES && ms[2]) {
        sd_ot_load(j, j->Dv / 32);
        ms[2] = 0;
    }
}

static bool sd_amx_usable(void)
{
    return sd_usable() && attn_cpu_has(ATTN_CPU_AVX512_BF16) && attn_cpu_has(ATTN_CPU_AMX_TILE) &&
           attn_cpu_has(ATTN_CPU_AMX_BF16);
}

const attn__cpu_isa attn__cpu_isa_stream_decode_amx = {
    .name = "stream-decode-amx",
    .usable = sd_amx_usable,
    .prep_q = sd_prep_amx,
    .chunk = sd_chunk,
    .finish = sd_finish,
    .park = sd_park,
    .resume = sd_resume,
    .accepts = sd_accepts,
};
