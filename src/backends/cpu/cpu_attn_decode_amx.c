/* CPU_ATTN streaming decode of the amx-bf16 variant: QK and PV on the tile
 * unit for bf16 queries over a bf16 or fp8 cache and Dv <= 128 (four O
 * tiles), built with AVX512_BF16; its other jobs take the FMA path of
 * cpu_attn_decode_avx512.c (prep, kernels and finish). */
#include "backends/cpu/cpu_attn_decode_avx512.h"
#include "util/amx.h"

/* ---- tile-unit path (the amx-bf16 variant) ------------------------------------
 * QK and PV as tile products, softmax and staging on AVX-512:
 *   S^T [16 keys][R] = K . Q^T: A = 16 K rows x 32 dims, B = the queries as
 *     dim pairs (packed by sd_prep_amx); the tile is transposed into rows of
 *     scores for sd_softmax (no reduction tree, no FMAs);
 *   O += P . V: B = 16 V rows as they are (32 dims = 16 dim pairs); A row r
 *     holds (p_rt, 0) pairs and row R + r (0, p_rt), so C row r collects the
 *     even dims and row R + r the odd dims of output row r. O stays in
 *     tiles 0..3 for the whole job (parked in SD_OT while the chunks of
 *     other jobs run in between: sd_park / sd_resume); a moved softmax
 *     anchor rescales it before the next product.
 * fp8 rows are widened to exact bf16 through the byte tables into staging
 * slots ([w0 | w1] per 64 dims, see sd_staged_dim), bf16 rows are read in
 * place when a block is whole. */

/* O tiles <-> SD_OT (tile g at SD_OT + g KiB, row stride 64) */
static inline __attribute__((always_inline)) void sd_ot_store(attn__cpu_job *j, int ng)
{
    attn__amx_store_acc((char *)j->scratch + SD_OT, 1024, 64, ng);
}

static inline __attribute__((always_inline)) void sd_ot_load(attn__cpu_job *j, int ng)
{
    attn__amx_load_acc((const char *)j->scratch + SD_OT, 1024, 64, ng);
}

/* a tile source: 16 rows, st bytes apart */
typedef struct {
    const char *p;
    long st;
} sd_src;

/* fp8 row of d dims -> bf16 at dst ([w0 | w1] per 64 dims), with byte
 * unpacks (word shifts and selects measured slower: kernel-notes.md). */
static inline __attribute__((always_inline)) void sd_widen_row(char *dst, const char *src, int d,
                                                               const sd_tab *tb)
{
    const __m512i sign = _mm512_set1_epi32((int)0x80808080u);
    for (int i = 0; i < d; i += 64) {
        __m512i x = _mm512_loadu_si512(src + i);
        __m512i h = _mm512_ternarylogic_epi32(sd_lookup(x, tb->h0, tb->h1), x, sign, 0xf8);
        __m512i l = sd_lookup(x, tb->l0, tb->l1);
        _mm512_store_si512(dst + 2 * i, _mm512_unpacklo_epi8(l, h));
        _mm512_store_si512(dst + 2 * i + 64, _mm512_unpackhi_epi8(l, h));
    }
}

/* rows [t0, t0 + nb) (d dims each, sb bytes apart) as a tile source: in
 * place (bf16, whole block) or staged into slot (row stride rs) with the
 * rows past nb zeroed; with pf, the K and V rows SD_PFB bytes of K ahead
 * are prefetched as each is staged */
static inline __attribute__((always_inline)) sd_src
sd_stage(attn__cpu_job *j, const char *kc, const char *vc, const char *src, int64_t sb, int t0,
         int nb, int n, int d, char *slot, int rs, bool pf, const int MODE, const sd_tab *tb)
{
    size_t esz = MODE == SD_VBMI ? 1 : 2;
    int kbytes = j->D * (int)esz, vbytes = j->Dv * (int)esz;
    int ahead = SD_PFB / kbytes > 2 ? SD_PFB / kbytes : 2;
    bool direct = MODE != SD_VBMI && nb == SD_BLK;
    for (int t = 0; t < nb; t++) {
        if (pf) sd_prefetch(j, kc, vc, sb, t0 + t + ahead, n, kbytes, vbytes);
        const char *r = src + (t0 + t) * sb;
        if (MODE == SD_VBMI)
            sd_widen_row(slot + t * rs, r, d, tb);
        else if (!direct)
            for (int i = 0; i < 2 * d; i += 64)
                _mm512_store_si512(slot + t * rs + i, _mm512_loadu_si512(r + i));
    }
    if (direct) return (sd_src){src + t0 * sb, (long)sb};
    for (int t = nb; t < SD_BLK; t++)
        for (int i = 0; i < 2 * d; i += 64)
            _mm512_store_si512(slot + t * rs + i, _mm512_setzero_si512());
    return (sd_src){slot, rs};
}

/* scores of a block into SD_XS rows (scaled), from K rows ks */
static inline __attribute__((always_inline)) void sd_qk_tiles(attn__cpu_job *j, sd_src ks,
                                                              const int R)
{
    const char *qt = (const char *)j->qbuf + SD_QT;
    TZERO(7);
    for (int k = 0; k < j->D / 32; k++) {
        TLOAD(5, ks.p + k * 64, ks.st);
        TLOAD(6, qt + k * 1024, 64);
        TDP(7, 5, 6);
    }
    float *st = (float *)((char *)j->scratch + SD_ST);
    TSTORE(7, st, 64);
    __m512i x[16];
    for (int i = 0; i < 16; i++)
        x[i] = _mm512_load_si512(st + i * 16);
    transpose16(x);
    float *xs = (float *)((char *)j->scratch + SD_XS);
    const __m512 sc = _mm512_set1_ps(j->qk_scale);
    for (int r = 0; r < R; r++)
        _mm512_store_ps(xs + r * SD_BLK, _mm512_mul_ps(_mm512_castsi512_ps(x[r]), sc));
}

/* O += P V for block b (probabilities p, V rows vs) */
static inline __attribute__((always_inline)) void sd_pv_tiles(attn__cpu_job *j, const float *p,
                                                              sd_src vs, int b, const int R)
{
    int ng = j->Dv / 32;
    float *al = (float *)((char *)j->scratch + SD_AL);
    if (al[8] != 0.0f) {
        sd_ot_store(j, ng);
        float *ot = (float *)((char *)j->scratch + SD_OT);
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(al[r]);
            for (int g = 0; g < ng; g++) {
                float *o0 = ot + g * 256 + r * 16, *o1 = ot + g * 256 + (R + r) * 16;
                _mm512_store_ps(o0, _mm512_mul_ps(_mm512_load_ps(o0), a));
                _mm512_store_ps(o1, _mm512_mul_ps(_mm512_load_ps(o1), a));
            }
            al[r] = 1.0f;
        }
        al[8] = 0.0f;
        sd_ot_load(j, ng);
    }
    uint32_t *pt = (uint32_t *)((char *)j->scratch + SD_PT) + (b & 1) * 256;
    for (int r = 0; r < R; r++) {
        __m512i w =
            _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(p + r * SD_BLK)));
        _mm512_store_si512(pt + r * 16, w);
        _mm512_store_si512(pt + (R + r) * 16, _mm512_slli_epi32(w, 16));
    }
    TLOAD(4, pt, 64);
    /* one B tile register: 6 and 7 are the QK tiles */
    TLOAD(5, vs.p, vs.st);
    TDP(0, 4, 5);
    if (ng > 1) {
        TLOAD(5, vs.p + 64, vs.st);
        TDP(1, 4, 5);
    }
    if (ng > 2) {
        TLOAD(5, vs.p + 128, vs.st);
        TDP(2, 4, 5);
    }
    if (ng > 3) {
        TLOAD(5, vs.p + 192, vs.st);
        TDP(3, 4, 5);
    }
}

/* The same block pipeline as sd_rows; staging further ahead or issuing PV
 * earlier measured slower (kernel-notes.md). */
static inline __attribute__((always_inline)) void sd_rows_amx(attn__cpu_job *j, const char *k,
                                                              const char *v, int64_t sb, int n,
                                                              int key0, bool masked, const int R,
                                                              const int MODE)
{
    const sd_tab tb = sd_tables(j, MODE);
    float *pb = (float *)((char *)j->scratch + SD_P);
    char *kslot = (char *)j->scratch + SD_KS, *vslot = (char *)j->scratch + SD_VS;
    int nblk = (n + SD_BLK - 1) / SD_BLK;
    bool live = false;
    for (int b = -1; b < nblk; b++) {
        bool next = false;
        if (b + 1 < nblk) {
            int c = b + 1;
            sd_qk_tiles(j,
                        sd_stage(j, k, v, k, sb, c * SD_BLK, sd_nb(n, c), n, j->D,
                                 kslot + (c & 1) * SD_BLK * 512, 512, true, MODE, &tb),
                        R);
        }
        if (live)
            sd_pv_tiles(j, pb + (b & 1) * 8 * SD_BLK,
                        sd_stage(j, k, v, v, sb, b * SD_BLK, sd_nb(n, b), n, j->Dv,
                                 vslot + (b & 1) * SD_BLK * 256, 256, false, MODE, &tb),
                        b, R);
        if (b + 1 < nblk)
            next = sd_softmax(j, pb + ((b + 1) & 1) * 8 * SD_BLK, sd_nb(n, b + 1),
                              key0 + (b + 1) * SD_BLK, masked, 1.0f, true);
        live = next;
    }
}

/* X(kind, rows): every tile kernel, one function each */
/* clang-format off */
#define SD_AMX_KERNELS(X)                                                                          \
    X(pair, 1) X(pair, 2) X(pair, 3) X(pair, 4) X(pair, 5) X(pair, 6) X(pair, 7) X(pair, 8)       \
    X(vbmi, 1) X(vbmi, 2) X(vbmi, 3) X(vbmi, 4) X(vbmi, 5) X(vbmi, 6) X(vbmi, 7) X(vbmi, 8)
/* clang-format on */
enum { SD_T_PAIR, SD_T_VBMI, SD_T_KINDS };
#define SD_T_pair     SD_T_PAIR
#define SD_T_vbmi     SD_T_VBMI
#define SD_TMODE_pair SD_PAIR
#define SD_TMODE_vbmi SD_VBMI

#define SD_DEFINE(kind, R)                                                                         \
    static __attribute__((noinline)) void sd_amx_##kind##_r##R(                                    \
        attn__cpu_job *j, const char *k, const char *v, int64_t sb, int n, int key0, bool masked)  \
    {                                                                                              \
        sd_rows_amx(j, k, v, sb, n, key0, masked, R, SD_TMODE_##kind);                             \
    }
SD_AMX_KERNELS(SD_DEFINE)
#undef SD_DEFINE

#define SD_ENTRY(kind, R) [SD_T_##kind][R - 1] = sd_amx_##kind##_r##R,
static sd_kernel *const sd_amx[SD_T_KINDS][ATTN_CPU_SD_ROWS] = {SD_AMX_KERNELS(SD_ENTRY)};
#undef SD_ENTRY

/* the row mode a job takes on the tile path, or -1 for the FMA path. fp8
 * needs the byte tables but, unlike the FMA path (R <= 4, register
 * pressure), takes any R: the widening happens once per row. */
static int sd_tile_mode(const attn__cpu_job *j)
{
    if (j->prec != ATTN_CPU_PREC_BF16 || j->Dv > 128) return -1;
    if (j->kv_elem == ATTN_ELEM_BF16) return j->D % 32 == 0 && j->Dv % 32 == 0 ? SD_PAIR : -1;
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
        attn__sd_prep(j, qrows);
        return;
    }
    sd_begin(j, mode, SD_TILES, sd_amx[mode == SD_PAIR ? SD_T_PAIR : SD_T_VBMI][j->R - 1]);
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

/* O tiles (even / odd dims) -> rows in dim order, or the FMA finish */
static void sd_finish_amx(attn__cpu_job *j)
{
    const int *ms = (const int *)((const char *)j->scratch + SD_MODE);
    int mode = ms[0];
    if (ms[1] != SD_TILES) {
        attn__sd_finish(j);
        return;
    }
    const float *lv = (const float *)((const char *)j->scratch + SD_L);
    for (int r = 0; r < j->R; r++)
        j->l[r] = _mm512_reduce_add_ps(_mm512_load_ps(lv + r * 16));
    int ng = j->Dv / 32;
    float *al = (float *)((char *)j->scratch + SD_AL);
    if (!ms[2]) sd_ot_store(j, ng);
    attn__amx_release();
    static const int32_t lo_tab[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
    const __m512i ilo = _mm512_loadu_si512(lo_tab);
    const __m512i ihi = _mm512_add_epi32(ilo, _mm512_set1_epi32(8));
    const float *ot = (const float *)((const char *)j->scratch + SD_OT);
    for (int r = 0; r < j->R; r++) {
        float *o = j->o + (size_t)r * j->o_stride;
        /* a rescale still pending (the last blocks saw no key) */
        __m512 a = _mm512_set1_ps(al[8] != 0.0f ? al[r] : 1.0f);
        for (int g = 0; g < ng; g++) {
            __m512 ev = _mm512_mul_ps(_mm512_load_ps(ot + g * 256 + r * 16), a);
            __m512 od = _mm512_mul_ps(_mm512_load_ps(ot + g * 256 + (j->R + r) * 16), a);
            _mm512_storeu_ps(o + g * 32, _mm512_permutex2var_ps(ev, ilo, od));
            _mm512_storeu_ps(o + g * 32 + 16, _mm512_permutex2var_ps(ev, ihi, od));
        }
        if (mode == SD_VBMI) {
            float tmp[128];
            for (int s = 0; s < j->Dv; s++)
                tmp[sd_staged_dim(s)] = o[s];
            memcpy(o, tmp, sizeof(float) * (size_t)j->Dv);
        }
    }
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
    .chunk = attn__sd_chunk,
    .finish = sd_finish_amx,
    .park = sd_park,
    .resume = sd_resume,
    .accepts = sd_accepts,
};
