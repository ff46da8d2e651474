/* CPU_ATTN AVX2 + FMA variant (8 fp32 lanes). Jobs of at most 4 rows (a
 * decode's GQA group) convert K and V in registers as QK and PV use them:
 * each K and V vector is widened once per KV head and shared by every query
 * head of the group, with no fp32 copy of the chunk; QK runs in blocks of 4
 * rows x 2 keys (horizontal sums by hadd), PV in blocks of 4 rows x 16
 * output lanes. Larger jobs (prefill) gather consecutive chunks into a
 * panel of up to 64 keys, K widened once into fp32 [d][key] and V into
 * [key][d], and run QK and PV over it as GEMM-like 6 x 16 register blocks:
 * the online-softmax rescale of O is paid once per panel, not per block of
 * 16 keys. bf16 widens by a shift, fp16 and fp8 through F16C: e5m2 is the
 * top byte of an fp16, e4m3 is re-biased into an fp16 of value * 2^-8, the
 * 2^8 folded into the score scale and (finish) the output. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/cpu/cpu_avx2_reduce.h"

static bool avx2_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX2) && attn_cpu_has(ATTN_CPU_FMA) && attn_cpu_has(ATTN_CPU_F16C);
}

static inline int pad8(int d)
{
    return (d + 7) & ~7;
}

/* e4m3 codes are widened to value * 2^-8 (exact); the job undoes it */
#define E4M3_SHIFT 256.0f

/* e4m3: code << 8, arithmetic >> 1, clear the copied sign: the fp16
 * s.0eeee.mmm0000000, value * 2^-8, subnormals included */
static inline __m256 e4m3x8(const void *src)
{
    __m128i w = _mm_unpacklo_epi8(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i *)src));
    w = _mm_and_si128(_mm_srai_epi16(w, 1), _mm_set1_epi16((short)0xbfff));
    return _mm256_cvtph_ps(w);
}

static inline __m256 scale2n(__m256 p, __m256 n)
{
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* exp256, softcap8, load8 (8 elements of e as fp32, e4m3 at 2^-8), row_to_f32 */
#define VF              __m256
#define VN              8
#define V_SET1          _mm256_set1_ps
#define V_LOADU(p)      _mm256_loadu_ps((const float *)(p))
#define V_STOREU        _mm256_storeu_ps
#define V_MUL           _mm256_mul_ps
#define V_MAX           _mm256_max_ps
#define V_FMADD         _mm256_fmadd_ps
#define V_FNMADD        _mm256_fnmadd_ps
#define V_ROUND(x)      _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_SCALE2N(p, n) scale2n(p, n)
#define V_FROM_BF16(p)                                                                             \
    _mm256_castsi256_ps(                                                                           \
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define V_FROM_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define V_FROM_E5M2(p)                                                                             \
    _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i *)(p))))
#define V_FROM_E4M3(p) e4m3x8(p)
#define CV_EXP         exp256
#define CV_SOFTCAP     softcap8
#define CV_LOAD        load8
#define CV_ROW         row_to_f32
#define CV_LOAD_ATTR   __attribute__((always_inline))
#include "backends/cpu/cpu_vec_tmpl.h"

static inline float kv_shift(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 ? E4M3_SHIFT : 1.0f;
}

/* Prefill panels (see the top comment): up to PANEL keys, at most 512 wide,
 * K^T then V in the job's scratch, this state after them */
#define PANEL ATTN_CPU_CHUNK
#define MR    6 /* rows per register block */

typedef struct {
    int n, key0; /* keys gathered, the first one's index */
    bool masked;
} panel_state;

static inline int pad16(int d)
{
    return (d + 15) & ~15;
}

static inline float *panel_kt(const attn__cpu_job *j)
{
    return j->scratch;
}

static inline float *panel_v(const attn__cpu_job *j)
{
    return (float *)j->scratch + (size_t)PANEL * ATTN_CPU_MAX_HEAD;
}

static inline panel_state *panel_of(const attn__cpu_job *j)
{
    return (panel_state *)((char *)j->scratch + 2 * sizeof(float) * PANEL * ATTN_CPU_MAX_HEAD);
}

static bool direct_ok(const attn__cpu_job *j);
static void panel_prep_q(attn__cpu_job *j, const void *const *qrows);

static void avx2_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    if (!direct_ok(j)) {
        panel_prep_q(j, qrows);
        return;
    }
    float *q = j->qbuf;
    int Dp = pad8(j->D);
    for (int r = 0; r < j->R; r++)
        row_to_f32(q + (size_t)r * Dp, qrows[r], j->D, j->q_elem);
    panel_of(j)->n = 0;
}

static inline __m128 hsum4x(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* the next chunk's K rows t, t + 1 (spread over the key pairs, so the
 * requests never queue behind each other) */
static inline void qk_prefetch(const attn__cpu_job *j, int t, size_t es)
{
    size_t pts = (size_t)j->pf_stride * es, rb = (size_t)j->D * es;
    for (int i = t; i < t + 2 && i < j->pf_n; i++)
        for (size_t o = 0; o < rb; o += 64)
            _mm_prefetch((const char *)j->pf_k + i * pts + o, _MM_HINT_T0);
}

/* the scores of keys t (a.0) and t + 1 (a.1) of rows 0 .. nr-1 */
static inline void qk_sums8(float *s, int nr, bool two, __m256 a00, __m256 a10, __m256 a20,
                            __m256 a30, __m256 a01, __m256 a11, __m256 a21, __m256 a31)
{
    float s0[4], s1[4];
    _mm_storeu_ps(s0, hsum4x(a00, a10, a20, a30));
    _mm_storeu_ps(s1, hsum4x(a01, a11, a21, a31));
    for (int i = 0; i < nr; i++) {
        s[(size_t)i * ATTN_CPU_CHUNK] = s0[i];
        if (two) s[(size_t)i * ATTN_CPU_CHUNK + 1] = s1[i];
    }
}

/* softmax_row (scores scaled by 2^8 more for e4m3) and qk_direct (s[r][t] =
 * q_r . k_t, K rows read from the cache and widened in registers, R <= 4,
 * D % 8 == 0) of cpu_attn_tmpl.h. Masks are sign-bit vectors: in, a lane
 * inside [lo, hi], has (idx - lo) | (hi - idx) >= 0. */
#define VI        __m256i
#define VM        __m256
#define V_ZERO    _mm256_setzero_ps
#define V_ADD     _mm256_add_ps
#define V_SUB     _mm256_sub_ps
#define V_SET1I   _mm256_set1_epi32
#define V_ADDI    _mm256_add_epi32
#define V_IOTAF() _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7)
#define V_IOTAI() _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
#define V_INSIDE(idx, lo, hi)                                                                      \
    _mm256_castsi256_ps(_mm256_or_si256(_mm256_sub_epi32(idx, lo), _mm256_sub_epi32(hi, idx)))
#define V_BLEND_IN(in, ninf, x)     _mm256_blendv_ps(x, ninf, in)
#define V_LIVE(x, ninf)             _mm256_cmp_ps(x, ninf, _CMP_NEQ_OQ)
#define V_KEEP(live, p)             _mm256_and_ps(live, p)
#define V_RMAX                      attn__hmax8
#define V_RADD                      attn__hsum8
#define V_PAD                       pad8
#define V_QK_SCALE(j)               ((j)->qk_scale * kv_shift((j)->kv_elem))
#define CV_QK                       qk_direct
#define KT                          char
#define V_QK_ATTR                   inline __attribute__((always_inline))
#define V_QK_PARAMS                 , int64_t stride, attn_elem e
#define V_QK_SETUP                  size_t es = attn_elem_size(e), ts = (size_t)stride * es;
#define V_QK_KSTEP                  ts
#define V_QK_LOADK(k, d)            load8((k) + (size_t)(d)*es, e)
#define V_QK_PREFETCH(j, t)         qk_prefetch(j, t, es);
#define V_QK_STORE(s, nr, two, ...) qk_sums8(s, nr, two, __VA_ARGS__);
#include "backends/cpu/cpu_attn_tmpl.h"

/* Jobs of at most DIRECT_ROWS rows read K and V straight from the cache. */
#define DIRECT_ROWS 4

/* o[r] = o[r] * alpha[r] + sum_t p[r][t] v_t, V converted in registers
 * (R <= 4; Dv % 16 == 0); rows with alpha < 0 keep their output */
static inline __attribute__((always_inline)) void
pv_direct(attn__cpu_job *j, const char *v, int64_t stride, int n, const float *alpha, attn_elem e)
{
    size_t es = attn_elem_size(e), ts = (size_t)stride * es;
    int R = j->R;
    const float *p[4];
    float *o[4], al[4];
    for (int i = 0; i < 4; i++) {
        int r = i < R && alpha[i] >= 0.0f ? i : -1;
        /* a dead row multiplies zeros into a scratch row of its own */
        p[i] = r >= 0 ? j->s + (size_t)r * ATTN_CPU_CHUNK : NULL;
        o[i] = r >= 0 ? j->o + (size_t)r * j->o_stride : NULL;
        al[i] = r >= 0 ? alpha[r] : 0.0f;
    }
    float *junk = (float *)j->scratch; /* [4][Dv] sink for dead rows, p = 0 */
    const float *zp = junk + 4 * (size_t)ATTN_CPU_MAX_HEAD;
    bool zeroed = false;
    for (int i = 0; i < 4; i++)
        if (!p[i]) {
            if (!zeroed) memset(junk + 4 * (size_t)ATTN_CPU_MAX_HEAD, 0, sizeof(float) * (size_t)n);
            zeroed = true;
            p[i] = zp;
            o[i] = junk + (size_t)i * ATTN_CPU_MAX_HEAD;
        }
    __m256 al0 = _mm256_set1_ps(al[0]), al1 = _mm256_set1_ps(al[1]);
    __m256 al2 = _mm256_set1_ps(al[2]), al3 = _mm256_set1_ps(al[3]);
    size_t pts = (size_t)j->pf_stride * es, rb = (size_t)j->Dv * es;
    int pf_per = (j->pf_n + j->Dv / 16 - 1) / (j->Dv / 16); /* next V rows per d step */
    for (int d = 0, pr = 0; d < j->Dv; d += 16) {
        for (int i = 0; i < pf_per && pr < j->pf_n; i++, pr++)
            for (size_t of = 0; of < rb; of += 64)
                _mm_prefetch((const char *)j->pf_v + pr * pts + of, _MM_HINT_T0);
        __m256 c00 = _mm256_mul_ps(_mm256_loadu_ps(o[0] + d), al0);
        __m256 c10 = _mm256_mul_ps(_mm256_loadu_ps(o[1] + d), al1);
        __m256 c20 = _mm256_mul_ps(_mm256_loadu_ps(o[2] + d), al2);
        __m256 c30 = _mm256_mul_ps(_mm256_loadu_ps(o[3] + d), al3);
        __m256 c01 = _mm256_mul_ps(_mm256_loadu_ps(o[0] + d + 8), al0);
        __m256 c11 = _mm256_mul_ps(_mm256_loadu_ps(o[1] + d + 8), al1);
        __m256 c21 = _mm256_mul_ps(_mm256_loadu_ps(o[2] + d + 8), al2);
        __m256 c31 = _mm256_mul_ps(_mm256_loadu_ps(o[3] + d + 8), al3);
        const char *vr = v + (size_t)d * es;
        for (int t = 0; t < n; t++, vr += ts) {
            __m256 v0 = load8(vr, e), v1 = load8(vr + 8 * es, e);
            __m256 b0 = _mm256_broadcast_ss(p[0] + t), b1 = _mm256_broadcast_ss(p[1] + t);
            __m256 b2 = _mm256_broadcast_ss(p[2] + t), b3 = _mm256_broadcast_ss(p[3] + t);
            c00 = _mm256_fmadd_ps(b0, v0, c00);
            c10 = _mm256_fmadd_ps(b1, v0, c10);
            c20 = _mm256_fmadd_ps(b2, v0, c20);
            c30 = _mm256_fmadd_ps(b3, v0, c30);
            c01 = _mm256_fmadd_ps(b0, v1, c01);
            c11 = _mm256_fmadd_ps(b1, v1, c11);
            c21 = _mm256_fmadd_ps(b2, v1, c21);
            c31 = _mm256_fmadd_ps(b3, v1, c31);
        }
        _mm256_storeu_ps(o[0] + d, c00);
        _mm256_storeu_ps(o[1] + d, c10);
        _mm256_storeu_ps(o[2] + d, c20);
        _mm256_storeu_ps(o[3] + d, c30);
        _mm256_storeu_ps(o[0] + d + 8, c01);
        _mm256_storeu_ps(o[1] + d + 8, c11);
        _mm256_storeu_ps(o[2] + d + 8, c21);
        _mm256_storeu_ps(o[3] + d + 8, c31);
    }
}

/* next-chunk row t's K and V lines (one row at a time, between the work:
 * a burst of a whole chunk's prefetches stalls on the miss buffers) */
static inline void prefetch_row(const attn__cpu_job *j, int t, size_t es)
{
    const char *pk = (const char *)j->pf_k + (size_t)(t * j->pf_stride) * es;
    const char *pv = (const char *)j->pf_v + (size_t)(t * j->pf_stride) * es;
    for (size_t o = 0; o < (size_t)j->D * es; o += 64)
        _mm_prefetch(pk + o, _MM_HINT_T0);
    for (size_t o = 0; o < (size_t)j->Dv * es; o += 64)
        _mm_prefetch(pv + o, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void chunk_direct(attn__cpu_job *j, const void *k,
                                                               const void *v, int64_t stride, int n,
                                                               int key0, bool masked, attn_elem e)
{
    /* A job's first chunk was not prefetched by a chunk before it: its V
     * rows (a page of their own in paged layouts, beyond the hardware
     * prefetcher's reach from K) are requested now, to arrive during QK. */
    if (j->m[0] == -INFINITY) {
        size_t es = attn_elem_size(e), ts = (size_t)stride * es, rb = (size_t)j->Dv * es;
        for (int t = 0; t < n; t++)
            for (size_t o = 0; o < rb; o += 64)
                _mm_prefetch((const char *)v + t * ts + o, _MM_HINT_T0);
    }
    qk_direct(j, k, n, stride, e);
    float alpha[DIRECT_ROWS];
    for (int r = 0; r < j->R; r++)
        alpha[r] = softmax_row(j, r, n, key0, masked);
    pv_direct(j, v, stride, n, alpha, e);
}

static bool direct_ok(const attn__cpu_job *j)
{
    return j->R <= DIRECT_ROWS && j->D % 8 == 0 && j->Dv % 16 == 0;
}

/* ---- prefill: key panels ------------------------------------------------- */

/* 8 elements (fewer at a row's end: zero-filled) -> fp32 */
static inline __attribute__((always_inline)) __m256 load8_n(const char *src, int cnt, attn_elem e)
{
    if (cnt >= 8) return load8(src, e);
    unsigned char tmp[32] = {0};
    __builtin_memcpy(tmp, src, (size_t)cnt * attn_elem_size(e));
    return load8(tmp, e);
}

static inline void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* the chunk's n keys -> panel columns col .. col + n - 1 of K^T and rows of V */
static inline __attribute__((always_inline)) void
panel_add(attn__cpu_job *j, const char *k, const char *v, size_t ts, int n, int col, attn_elem e)
{
    size_t es = attn_elem_size(e);
    int D = j->D, Dv = j->Dv, ldv = pad16(Dv);
    float *kt = panel_kt(j) + col, *vp = panel_v(j) + (size_t)col * ldv;
    for (int t0 = 0; t0 < n; t0 += 8) {
        int nk = n - t0 < 8 ? n - t0 : 8;
        __m256i keep =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int i = t0; i < t0 + nk; i++)
            if (i < j->pf_n) prefetch_row(j, i, es);
        for (int d = 0; d < D; d += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = i < nk ? load8_n(k + (size_t)(t0 + i) * ts + (size_t)d * es, D - d, e)
                              : _mm256_setzero_ps();
            transpose8(r);
            for (int i = 0; i < 8 && d + i < D; i++) {
                float *dst = kt + (size_t)(d + i) * PANEL + t0;
                if (nk == 8)
                    _mm256_storeu_ps(dst, r[i]);
                else
                    _mm256_maskstore_ps(dst, keep, r[i]);
            }
        }
        for (int i = t0; i < t0 + nk; i++) {
            const char *src = v + (size_t)i * ts;
            float *dst = vp + (size_t)i * ldv;
            for (int d = 0; d < ldv; d += 8)
                _mm256_storeu_ps(dst + d, d < Dv ? load8_n(src + (size_t)d * es, Dv - d, e)
                                                 : _mm256_setzero_ps());
        }
    }
}

_Static_assert((ATTN_CPU_WIDE_ROWS + MR) * ATTN_CPU_MAX_HEAD * 4 <= ATTN_CPU_WIDE_QBUF,
               "packed queries exceed the job's qbuf");

/* Panel jobs' queries as fp32 blocks of MR rows, [block][d][MR]: a register
 * block's broadcasts then read one stream instead of MR rows 2 KiB apart
 * (a wide job's queries live in L2). */
static void panel_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    float *q = j->qbuf, row[ATTN_CPU_MAX_HEAD];
    int Dp = pad8(j->D);
    for (int r = 0; r < j->R; r++) {
        row_to_f32(row, qrows[r], j->D, j->q_elem);
        float *dst = q + (size_t)(r / MR) * MR * Dp + r % MR;
        for (int d = 0; d < j->D; d++)
            dst[(size_t)d * MR] = row[d];
    }
    panel_of(j)->n = 0;
}

/* s[r][c .. c+15] = q_r . k for rows r0 .. r0+NR-1 (r0 % MR == 0), panel
 * columns c .. c+15 */
static inline __attribute__((always_inline)) void qk_block(const attn__cpu_job *j, int r0, int c,
                                                           const int NR)
{
    int Dp = pad8(j->D), D = j->D;
    const float *q = (const float *)j->qbuf + (size_t)r0 * Dp;
    const float *kt = panel_kt(j) + c;
    __m256 acc[MR][2];
    for (int r = 0; r < NR; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < D; d++, kt += PANEL, q += MR) {
        __m256 b0 = _mm256_loadu_ps(kt), b1 = _mm256_loadu_ps(kt + 8);
        for (int r = 0; r < NR; r++) {
            __m256 a = _mm256_broadcast_ss(q + r);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < NR; r++) {
        float *s = j->s + (size_t)(r0 + r) * ATTN_CPU_CHUNK + c;
        _mm256_storeu_ps(s, acc[r][0]);
        _mm256_storeu_ps(s + 8, acc[r][1]);
    }
}

/* o[r][c .. c+15] = o * alpha[r] + sum_t p[r][t] v[t][c .. c+15], rows r0 ..
 * r0+NR-1, keys t0 .. t1-1 of the panel */
static inline __attribute__((always_inline)) void pv_block(attn__cpu_job *j, int r0, int c, int t0,
                                                           int t1, const float *alpha, const int NR)
{
    int ldv = pad16(j->Dv);
    const float *vp = panel_v(j) + c;
    __m256 acc[MR][2];
    for (int r = 0; r < NR; r++) {
        float *o = j->o + (size_t)(r0 + r) * j->o_stride + c;
        __m256 al = _mm256_set1_ps(alpha[r0 + r]);
        acc[r][0] = _mm256_mul_ps(_mm256_loadu_ps(o), al);
        acc[r][1] = _mm256_mul_ps(_mm256_loadu_ps(o + 8), al);
    }
    const float *p = j->s + (size_t)r0 * ATTN_CPU_CHUNK;
    vp += (size_t)t0 * ldv;
    for (int t = t0; t < t1; t++, vp += ldv) {
        __m256 b0 = _mm256_loadu_ps(vp), b1 = _mm256_loadu_ps(vp + 8);
        for (int r = 0; r < NR; r++) {
            __m256 a = _mm256_broadcast_ss(p + (size_t)r * ATTN_CPU_CHUNK + t);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < NR; r++) {
        float *o = j->o + (size_t)(r0 + r) * j->o_stride + c;
        _mm256_storeu_ps(o, acc[r][0]);
        _mm256_storeu_ps(o + 8, acc[r][1]);
    }
}

/* one instance per row count, so the accumulators stay in registers */
#define ROWS_SWITCH(nr, CALL)                                                                      \
    switch (nr) {                                                                                  \
    case 6: CALL(6); break;                                                                        \
    case 5: CALL(5); break;                                                                        \
    case 4: CALL(4); break;                                                                        \
    case 3: CALL(3); break;                                                                        \
    case 2: CALL(2); break;                                                                        \
    default: CALL(1); break;                                                                       \
    }

/* no row of rows r0 .. r0 + nr - 1 sees a key of key0 .. key0 + n - 1 (their
 * scores are left unset: softmax_row masks those lanes) */
static inline bool rows_blind(const attn__cpu_job *j, int r0, int nr, int key0, int n)
{
    for (int r = r0; r < r0 + nr; r++)
        if (j->lo[r] < key0 + n && j->hi[r] >= key0) return false;
    return true;
}

/* Rows r0 .. r0+nr-1 of the panel: the keys [*t0, *t1) any of them sees
 * (empty: none); rows that see none get zero probabilities. */
static void panel_block_p(attn__cpu_job *j, int r0, int nr, const float *alpha, int *t0, int *t1)
{
    panel_state *ps = panel_of(j);
    int n = ps->n, lo = n, hi = 0;
    for (int r = r0; r < r0 + nr; r++) {
        if (alpha[r] < 0.0f) continue;
        int a = ps->masked ? j->lo[r] - ps->key0 : 0, b = ps->masked ? j->hi[r] - ps->key0 + 1 : n;
        if (a < lo) lo = a < 0 ? 0 : a;
        if (b > hi) hi = b > n ? n : b;
    }
    *t0 = lo;
    *t1 = hi;
    if (lo >= hi) return;
    for (int r = r0; r < r0 + nr; r++)
        if (alpha[r] < 0.0f) /* sees none of these keys: adds nothing */
            memset(j->s + (size_t)r * ATTN_CPU_CHUNK, 0, sizeof(float) * (size_t)n);
}

/* softmax and PV over the gathered panel (QK ran as its chunks came); empties it */
static void panel_run(attn__cpu_job *j)
{
    panel_state *ps = panel_of(j);
    int n = ps->n, R = j->R;
    if (!n) return;
    float alpha[ATTN_CPU_WIDE_ROWS];
    for (int r = 0; r < R; r++)
        alpha[r] = softmax_row(j, r, n, ps->key0, ps->masked);
    /* per row block only the keys some row sees: a block of a wide job's
     * causal diagonal skips what lies past its last row's position */
    int t0[(ATTN_CPU_WIDE_ROWS + MR - 1) / MR], t1[(ATTN_CPU_WIDE_ROWS + MR - 1) / MR];
    for (int r0 = 0; r0 < R; r0 += MR)
        panel_block_p(j, r0, R - r0 < MR ? R - r0 : MR, alpha, &t0[r0 / MR], &t1[r0 / MR]);
    for (int r = 0; r < R; r++)
        if (alpha[r] < 0.0f) alpha[r] = 1.0f;
    for (int c = 0; c < pad16(j->Dv); c += 16)
        for (int r0 = 0; r0 < R; r0 += MR) {
            int nr = R - r0 < MR ? R - r0 : MR, b = r0 / MR;
            if (t0[b] >= t1[b]) continue;
#define PV_CALL(N) pv_block(j, r0, c, t0[b], t1[b], alpha, N)
            ROWS_SWITCH(nr, PV_CALL)
#undef PV_CALL
        }
    ps->n = 0;
}

static void chunk_panel(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                        int key0, bool masked)
{
    panel_state *ps = panel_of(j);
    if (ps->n && (ps->n + n > PANEL || key0 != ps->key0 + ps->n)) panel_run(j);
    if (!ps->n) {
        ps->key0 = key0;
        ps->masked = false;
    }
    size_t ts = (size_t)stride * attn_elem_size(j->kv_elem);
    switch (j->kv_elem) { /* one instance per element type */
    case ATTN_ELEM_BF16: panel_add(j, k, v, ts, n, ps->n, ATTN_ELEM_BF16); break;
    case ATTN_ELEM_FP8_E4M3: panel_add(j, k, v, ts, n, ps->n, ATTN_ELEM_FP8_E4M3); break;
    case ATTN_ELEM_FP8_E5M2: panel_add(j, k, v, ts, n, ps->n, ATTN_ELEM_FP8_E5M2); break;
    case ATTN_ELEM_F16: panel_add(j, k, v, ts, n, ps->n, ATTN_ELEM_F16); break;
    default: panel_add(j, k, v, ts, n, ps->n, ATTN_ELEM_F32); break;
    }
    /* QK now: it covers the next chunk's prefetch, which widening alone would
     * outrun. Partial 16-column groups are recomputed by the next chunk. */
    int c0 = ps->n & ~15, c1 = pad16(ps->n + n);
    float *kt = panel_kt(j);
    for (int d = 0; d < j->D; d++)
        for (int t = ps->n + n; t < c1; t++)
            kt[(size_t)d * PANEL + t] = 0.0f;
    for (int c = c0; c < c1; c += 16)
        for (int r0 = 0; r0 < j->R; r0 += MR) {
            int nr = j->R - r0 < MR ? j->R - r0 : MR;
            if (masked && rows_blind(j, r0, nr, key0, n)) continue;
#define QK_CALL(N) qk_block(j, r0, c, N)
            ROWS_SWITCH(nr, QK_CALL)
#undef QK_CALL
        }
    ps->masked |= masked;
    ps->n += n;
    if (ps->n == PANEL) panel_run(j);
}

static void avx2_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                       int key0, bool masked)
{
    if (direct_ok(j)) {
        switch (j->kv_elem) { /* one instance per element type */
        case ATTN_ELEM_BF16: chunk_direct(j, k, v, stride, n, key0, masked, ATTN_ELEM_BF16); return;
        case ATTN_ELEM_FP8_E4M3:
            chunk_direct(j, k, v, stride, n, key0, masked, ATTN_ELEM_FP8_E4M3);
            return;
        case ATTN_ELEM_FP8_E5M2:
            chunk_direct(j, k, v, stride, n, key0, masked, ATTN_ELEM_FP8_E5M2);
            return;
        case ATTN_ELEM_F16: chunk_direct(j, k, v, stride, n, key0, masked, ATTN_ELEM_F16); return;
        default: chunk_direct(j, k, v, stride, n, key0, masked, ATTN_ELEM_F32); return;
        }
    }
    chunk_panel(j, k, v, stride, n, key0, masked);
}

/* e4m3 rows were accumulated at 2^-8 of their value */
static void avx2_finish(attn__cpu_job *j)
{
    if (!direct_ok(j)) panel_run(j);
    if (j->kv_elem != ATTN_ELEM_FP8_E4M3) return;
    __m256 f = _mm256_set1_ps(E4M3_SHIFT);
    for (int r = 0; r < j->R; r++) {
        float *o = j->o + (size_t)r * j->o_stride;
        for (int d = 0; d < pad8(j->Dv); d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), f));
    }
}

const attn__cpu_isa attn__cpu_isa_avx2 = {
    .name = "avx2",
    .usable = avx2_usable,
    .prep_q = avx2_prep_q,
    .chunk = avx2_chunk,
    .finish = avx2_finish,
    .wide_rows = ATTN_CPU_WIDE_ROWS,
};
