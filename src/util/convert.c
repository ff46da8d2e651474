/* attn/convert.h over the inline conversions of util/numeric.h. */
#include "attn/convert.h"

#include "util/numeric.h"

void attn_elem_from_f32(void *dst, attn_elem t, size_t offset, const float *src, size_t n)
{
    if (!dst || !src) return;
    for (size_t i = 0; i < n; i++)
        attn__store_elem(dst, t, offset + i, src[i]);
}

void attn_elem_to_f32(float *dst, const void *src, attn_elem t, size_t offset, size_t n)
{
    if (!dst || !src) return;
    for (size_t i = 0; i < n; i++)
        dst[i] = attn__load_elem(src, t, offset + i);
}
