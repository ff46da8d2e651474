/* CPU_ATTN streaming decode, FMA path (the decode of the avx512 and
 * avx512-bf16 variants, and the amx-bf16 jobs the tile path does not
 * take): the kernels of cpu_attn_decode_avx512.h, built with
 * AVX512F/BW/VL/DQ only. */
#include "backends/cpu/cpu_attn_decode_avx512.h"

/* Row kinds: a row mode over one element width */
enum { SD_K_PAIR, SD_K_VBMI, SD_K_NAT8, SD_KINDS };
#define SD_MODE_pair SD_PAIR /* bf16 */
#define SD_W_pair    2
#define SD_MODE_vbmi SD_VBMI /* fp8 through the byte tables: the listed R (registers) */
#define SD_W_vbmi    1
#define SD_MODE_nat8 SD_NAT /* fp8 otherwise (e4m3 and e5m2: sd_tab) */
#define SD_W_nat8    1
#define SD_K_pair    SD_K_PAIR
#define SD_K_vbmi    SD_K_VBMI
#define SD_K_nat8    SD_K_NAT8

/* X(kind, rows): every FMA kernel, one function each */
/* clang-format off */
#define SD_FMA_KERNELS(X)                                                                          \
    X(pair, 1) X(pair, 2) X(pair, 3) X(pair, 4) X(pair, 5) X(pair, 6) X(pair, 7) X(pair, 8)       \
    X(vbmi, 1) X(vbmi, 2) X(vbmi, 3) X(vbmi, 4)                                                    \
    X(nat8, 1) X(nat8, 2) X(nat8, 3) X(nat8, 4) X(nat8, 5) X(nat8, 6) X(nat8, 7) X(nat8, 8)
/* clang-format on */

#define SD_DEFINE(kind, R)                                                                         \
    static __attribute__((noinline)) void sd_fma_##kind##_r##R(                                    \
        attn__cpu_job *j, const char *k, const char *v, int64_t sb, int n, int key0, bool masked)  \
    {                                                                                              \
        sd_rows(j, k, v, sb, n, key0, masked, R, SD_MODE_##kind, SD_W_##kind);                     \
    }
SD_FMA_KERNELS(SD_DEFINE)
#undef SD_DEFINE

#define SD_ENTRY(kind, R) [SD_K_##kind][R - 1] = sd_fma_##kind##_r##R,
static sd_kernel *const sd_fma[SD_KINDS][ATTN_CPU_SD_ROWS] = {SD_FMA_KERNELS(SD_ENTRY)};
#undef SD_ENTRY

/* fp8 jobs take the table kernels where the list has one for their R
 * (four tables + the rows' vectors fill the registers beyond R = 4) */
static int sd_kind(const attn__cpu_job *j)
{
    if (j->kv_elem == ATTN_ELEM_BF16) return SD_K_PAIR;
    const uint8_t *hi, *lo;
    if (sd_fma[SD_K_VBMI][j->R - 1] && j->D % 64 == 0 && j->Dv % 64 == 0 &&
        attn__cpu_fp8_bf16_tables(j->kv_elem == ATTN_ELEM_FP8_E4M3, &hi, &lo))
        return SD_K_VBMI;
    return SD_K_NAT8;
}

void attn__sd_prep(attn__cpu_job *j, const void *const *qrows)
{
    static const int modes[SD_KINDS] = {SD_PAIR, SD_VBMI, SD_NAT};
    int kind = sd_kind(j), mode = modes[kind];
    sd_begin(j, mode, SD_FMA, sd_fma[kind][j->R - 1]);
    float *q = j->qbuf;
    float sc = j->qk_scale * sd_vscale(j, mode);
    float row[SD_QS];
    for (int r = 0; r < j->R; r++) {
        float *qr = q + (size_t)r * SD_QS;
        row_to_f32(row, qrows[r], j->D, j->q_elem);
        for (int d = 0; d < j->D; d++)
            qr[sd_pos(mode, d, j->D)] = row[d] * sc;
    }
}

void attn__sd_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n, int key0,
                    bool masked)
{
    sd_kernel *fn;
    memcpy(&fn, (const char *)j->scratch + SD_FN, sizeof fn);
    fn(j, k, v, stride * (int64_t)attn_elem_size(j->kv_elem), n, key0, masked);
}

/* row sums, and O rows back in dim order */
void attn__sd_finish(attn__cpu_job *j)
{
    const float *lv = (const float *)((const char *)j->scratch + SD_L);
    for (int r = 0; r < j->R; r++)
        j->l[r] = _mm512_reduce_add_ps(_mm512_load_ps(lv + r * 16));
    int mode = *(const int *)((const char *)j->scratch + SD_MODE);
    if (mode == SD_NAT) return;
    float tmp[ATTN_CPU_MAX_HEAD];
    for (int r = 0; r < j->R; r++) {
        float *o = j->o + (size_t)r * j->o_stride;
        for (int d = 0; d < j->Dv; d++)
            tmp[d] = o[sd_pos(mode, d, j->Dv)];
        memcpy(o, tmp, sizeof(float) * (size_t)j->Dv);
    }
}

const attn__cpu_isa attn__cpu_isa_stream_decode = {
    .name = "stream-decode",
    .usable = sd_usable,
    .prep_q = attn__sd_prep,
    .chunk = attn__sd_chunk,
    .finish = attn__sd_finish,
    .accepts = sd_accepts,
};
