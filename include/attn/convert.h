/* Element conversion between float and the tensor element types
 * (attn_elem), with the library's own rounding: what a caller that writes
 * Q/K/V for a kernel, or reads its output, needs to produce bit-identical
 * inputs. */
#ifndef ATTN_CONVERT_H
#define ATTN_CONVERT_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

/* dst[offset + i] = src[i] in element type t, for i < n. */
ATTN_API void attn_elem_from_f32(void *dst, attn_elem t, size_t offset, const float *src, size_t n);
/* dst[i] = src[offset + i] as float, for i < n. */
ATTN_API void attn_elem_to_f32(float *dst, const void *src, attn_elem t, size_t offset, size_t n);

ATTN_EXTERN_C_END

#endif
