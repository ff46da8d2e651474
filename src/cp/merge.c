/* Merge of partial attention states: see attn/merge.h. The weights are
 * computed in double from the natural-log LSEs, then applied in fp32. */
#include "attn/backend.h"
#include "attn/merge.h"

#include <math.h>

#include "util/error.h"

#define ATTN__MERGE_LN2 0.69314718055994530942

static double attn__merge_nat(const attn_partial_state *p, int64_t r)
{
    double v = p->lse[r];
    if (isnan(v) || v == INFINITY) return -INFINITY;
    return p->base == ATTN_LSE_BASE_2 ? v * ATTN__MERGE_LN2 : v;
}

attn_status attn_merge_states(const attn_partial_state *parts, int num_parts, int64_t rows,
                              int head_dim, float *out, float *out_lse)
{
    ATTN__CHECK_NULL(parts);
    if (num_parts < 1 || rows < 0 || head_dim < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_merge_states: %d parts, %lld rows, head_dim %d (need >= 1, >= 0, "
                          ">= 1)",
                          num_parts, (long long)rows, head_dim);
    for (int i = 0; i < num_parts; i++) {
        if (!parts[i].out || !parts[i].lse)
            return attn__fail(ATTN_NULL_ARGUMENT, "attn_merge_states: part %d has no %s", i,
                              parts[i].out ? "lse" : "out");
        if (parts[i].base != ATTN_LSE_BASE_E && parts[i].base != ATTN_LSE_BASE_2)
            return attn__fail(ATTN_INVALID_ARGUMENT, "attn_merge_states: part %d has LSE base %d",
                              i, (int)parts[i].base);
        if (parts[i].row_stride != 0 && parts[i].row_stride < head_dim)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "attn_merge_states: part %d row stride %lld < head_dim %d", i,
                              (long long)parts[i].row_stride, head_dim);
    }
    if (rows > 0) ATTN__CHECK_NULL(out);
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY;
        for (int i = 0; i < num_parts; i++) {
            double l = attn__merge_nat(&parts[i], r);
            m = l > m ? l : m;
        }
        float *o = out + r * head_dim;
        for (int d = 0; d < head_dim; d++)
            o[d] = 0.0f;
        if (m == -INFINITY) {
            if (out_lse) out_lse[r] = -INFINITY;
            continue;
        }
        double sum = 0;
        for (int i = 0; i < num_parts; i++)
            sum += exp(attn__merge_nat(&parts[i], r) - m);
        for (int i = 0; i < num_parts; i++) {
            double w = exp(attn__merge_nat(&parts[i], r) - m) / sum;
            if (w == 0) continue;
            int64_t st = parts[i].row_stride ? parts[i].row_stride : head_dim;
            const float *src = parts[i].out + r * st;
            for (int d = 0; d < head_dim; d++)
                o[d] += (float)(w * src[d]);
        }
        if (out_lse) out_lse[r] = (float)(m + log(sum));
    }
    return ATTN_OK;
}

attn_status attn_merge_check_backend(const attn_backend_desc *d)
{
    ATTN__CHECK_NULL(d);
    if (!d->can_return_lse_for_decode)
        return attn__fail(ATTN_UNSUPPORTED,
                          "%s cannot return the softmax LSE for decode "
                          "(can_return_lse_for_decode = false): its partial results cannot be "
                          "merged",
                          d->name ? d->name : "backend");
    return ATTN_OK;
}

attn_status attn_partial_from_backend(const attn_backend_desc *d, const float *out,
                                      const float *lse, attn_partial_state *p)
{
    ATTN__CHECK_NULL(p);
    attn_status s = attn_merge_check_backend(d);
    if (s != ATTN_OK) return s;
    *p = (attn_partial_state){.out = out, .lse = lse, .base = d->lse_base};
    return ATTN_OK;
}
