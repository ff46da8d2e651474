/* CPU_ATTN portable variant: plain C micro-kernel (fp32 math), the fallback
 * on every CPU and the model the SIMD variants follow. Per chunk: K and V
 * rows are converted to fp32 once into scratch and reused by every query
 * row (GQA: the chunk is read once for all heads of the group); then per
 * row the scores, the online-softmax update and the PV accumulation. The
 * loops are simple enough for the compiler to vectorise with baseline
 * SSE2. */
#include <math.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "util/numeric.h"

static bool portable_usable(void)
{
    return true;
}

static void load_rows(float *dst, int ld, const void *src, int64_t stride, int n, int d,
                      attn_elem e)
{
    for (int j = 0; j < n; j++) {
        float *o = dst + (size_t)j * ld;
        switch (e) {
        case ATTN_ELEM_F32: {
            const float *s = (const float *)src + j * stride;
            for (int i = 0; i < d; i++)
                o[i] = s[i];
            break;
        }
        case ATTN_ELEM_BF16: {
            const uint16_t *s = (const uint16_t *)src + j * stride;
            for (int i = 0; i < d; i++)
                o[i] = attn__bf16_to_f32(s[i]);
            break;
        }
        case ATTN_ELEM_F16: {
            const uint16_t *s = (const uint16_t *)src + j * stride;
            for (int i = 0; i < d; i++)
                o[i] = attn__f16_to_f32(s[i]);
            break;
        }
        case ATTN_ELEM_FP8_E4M3: {
            const uint8_t *s = (const uint8_t *)src + j * stride;
            for (int i = 0; i < d; i++)
                o[i] = attn__fp8_e4m3_f32[s[i]];
            break;
        }
        default: {
            const uint8_t *s = (const uint8_t *)src + j * stride;
            for (int i = 0; i < d; i++)
                o[i] = attn__fp8_e5m2_f32[s[i]];
            break;
        }
        }
    }
}

static void portable_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    attn__fp8_tables_init();
    float *q = j->qbuf;
    for (int r = 0; r < j->R; r++)
        load_rows(q + (size_t)r * j->D, j->D, qrows[r], 0, 1, j->D, j->q_elem);
}

static void portable_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                           int key0, bool masked)
{
    int D = j->D, Dv = j->Dv;
    float *kf = j->scratch;
    float *vf = kf + (size_t)ATTN_CPU_CHUNK * ATTN_CPU_MAX_HEAD;
    load_rows(kf, D, k, stride, n, D, j->kv_elem);
    load_rows(vf, Dv, v, stride, n, Dv, j->kv_elem);
    const float *qb = j->qbuf;
    for (int r = 0; r < j->R; r++) {
        int lo = 0, hi = n - 1;
        if (masked) {
            if (j->lo[r] - key0 > lo) lo = j->lo[r] - key0;
            if (j->hi[r] - key0 < hi) hi = j->hi[r] - key0;
            if (lo > hi) continue;
        }
        const float *q = qb + (size_t)r * D;
        float *s = j->s + (size_t)r * ATTN_CPU_CHUNK;
        float mx = -INFINITY;
        for (int t = lo; t <= hi; t++) {
            const float *kr = kf + (size_t)t * D;
            float acc = 0.0f;
            for (int d = 0; d < D; d++)
                acc += q[d] * kr[d];
            acc *= j->qk_scale;
            if (j->softcap > 0.0f) acc = j->softcap * tanhf(acc / j->softcap);
            if (j->slope) acc += j->slope[r] * (float)(key0 + t - j->pos[r]);
            s[t] = acc;
            if (acc > mx) mx = acc;
        }
        float mold = j->m[r];
        float mnew = mold > mx ? mold : mx;
        float alpha = j->l[r] > 0.0f ? expf(mold - mnew) : 0.0f;
        float sum = 0.0f;
        for (int t = lo; t <= hi; t++) {
            float p = expf(s[t] - mnew);
            s[t] = p;
            sum += p;
        }
        j->l[r] = j->l[r] * alpha + sum;
        j->m[r] = mnew;
        float *o = j->o + (size_t)r * j->o_stride;
        if (alpha != 1.0f)
            for (int d = 0; d < Dv; d++)
                o[d] *= alpha;
        for (int t = lo; t <= hi; t++) {
            const float *vr = vf + (size_t)t * Dv;
            float p = s[t];
            for (int d = 0; d < Dv; d++)
                o[d] += p * vr[d];
        }
    }
}

const attn__cpu_isa attn__cpu_isa_portable = {
    .name = "portable",
    .usable = portable_usable,
    .prep_q = portable_prep_q,
    .chunk = portable_chunk,
};
