/* Logical KV-cache shapes and stride orders of the catalog's families
 * (reference §5 shapes, §12 stride orders). A shape function only describes
 * the tensor; the KV-cache code allocates it. Stride orders are the
 * permutation from the logical shape to memory order for a layout; a family
 * without one uses its logical shape as is. */
#include <string.h>

#include "backends/catalog/catalog.h"
#include "util/error.h"

static attn_status attn__shape_args(int nb, int bs, int kvh, int hs)
{
    if (nb <= 0 || bs <= 0 || kvh <= 0 || hs <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache shape needs positive sizes (num_blocks=%d, block_size=%d, "
                          "num_kv_heads=%d, head_size=%d)",
                          nb, bs, kvh, hs);
    return ATTN_OK;
}

static void attn__shape_set(attn_kv_shape *out, int ndim, const int64_t *dims,
                            const char *const *names)
{
    memset(out, 0, sizeof *out);
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        out->dims[i] = dims[i];
        out->dim_names[i] = names[i];
    }
}

/* (2, num_blocks, block_size, num_kv_heads, head_size) */
attn_status attn__kv_shape_split(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                 attn_kv_shape *out)
{
    (void)kv;
    attn_status st = attn__shape_args(nb, bs, kvh, hs);
    if (st != ATTN_OK) return st;
    if (!out) return attn__fail(ATTN_NULL_ARGUMENT, "KV cache shape: out is NULL");
    static const char *const names[] = {"2", "num_blocks", "block_size", "num_kv_heads",
                                        "head_size"};
    int64_t dims[] = {2, nb, bs, kvh, hs};
    attn__shape_set(out, 5, dims, names);
    return ATTN_OK;
}

attn_status attn__kv_shape_flash(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                 attn_kv_shape *out)
{
    if (bs > 0 && bs % 16 != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "Block size must be a multiple of 16.");
    return attn__kv_shape_split(nb, bs, kvh, hs, kv, out);
}

/* K and V side by side in the last axis ("head_size+head_size_v": the KV
 * layout code splits it); V has head_size_v = 128 (the class attribute
 * default). */
attn_status attn__kv_shape_flash_diffkv(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                        attn_kv_shape *out)
{
    (void)kv;
    attn_status st = attn__shape_args(nb, bs, kvh, hs);
    if (st != ATTN_OK) return st;
    if (bs % 16 != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "Block size must be a multiple of 16.");
    if (!out) return attn__fail(ATTN_NULL_ARGUMENT, "KV cache shape: out is NULL");
    static const char *const names[] = {"num_blocks", "block_size", "num_kv_heads",
                                        "head_size+head_size_v"};
    int64_t dims[] = {nb, bs, kvh, (int64_t)hs + 128};
    attn__shape_set(out, 4, dims, names);
    return ATTN_OK;
}

/* (num_blocks, 2, block_size, num_kv_heads, last) */
static attn_status attn__kv_shape_nb2(int nb, int bs, int kvh, int hs, int64_t last,
                                      attn_kv_shape *out)
{
    attn_status st = attn__shape_args(nb, bs, kvh, hs);
    if (st != ATTN_OK) return st;
    if (!out) return attn__fail(ATTN_NULL_ARGUMENT, "KV cache shape: out is NULL");
    static const char *const names[] = {"num_blocks", "2", "block_size", "num_kv_heads",
                                        "head_size"};
    int64_t dims[] = {nb, 2, bs, kvh, last};
    attn__shape_set(out, 5, dims, names);
    return ATTN_OK;
}

/* nvfp4 packs two values per byte plus one fp8 scale per 16 values. */
attn_status attn__kv_shape_flashinfer(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                      attn_kv_shape *out)
{
    int64_t last = hs;
    if (kv == ATTN_KV_NVFP4) last = (int64_t)hs / 2 + ((int64_t)hs + 15) / 16;
    return attn__kv_shape_nb2(nb, bs, kvh, hs, last, out);
}

/* The per-token-head dtypes keep one float32 scale per token and head next
 * to the values: 4 bytes = 4 / sizeof(1-byte element) extra elements. */
attn_status attn__kv_shape_triton(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                  attn_kv_shape *out)
{
    int64_t last = hs;
    if (kv == ATTN_KV_INT8_PER_TOKEN_HEAD || kv == ATTN_KV_FP8_PER_TOKEN_HEAD) last += 4;
    return attn__kv_shape_nb2(nb, bs, kvh, hs, last, out);
}

/* Packed K|V per slot: key bits and value bits per element by kind, plus two
 * float32 norms, rounded up to 16 bytes (libattn's layout of the packed
 * TurboQuant slot). */
attn_status attn__kv_shape_turboquant(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                      attn_kv_shape *out)
{
    attn_status st = attn__shape_args(nb, bs, kvh, hs);
    if (st != ATTN_OK) return st;
    if (!out) return attn__fail(ATTN_NULL_ARGUMENT, "KV cache shape: out is NULL");
    int kbits, vbits;
    switch (kv) {
    case ATTN_KV_TURBOQUANT_K8V4: kbits = 8, vbits = 4; break;
    case ATTN_KV_TURBOQUANT_4BIT_NC: kbits = 4, vbits = 4; break;
    case ATTN_KV_TURBOQUANT_K3V4_NC: kbits = 3, vbits = 4; break;
    case ATTN_KV_TURBOQUANT_3BIT_NC: kbits = 3, vbits = 3; break;
    default:
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "TURBOQUANT needs a turboquant_* kv_cache_dtype, got %s",
                          attn_kv_dtype_name(kv));
    }
    int64_t slot = ((int64_t)hs * kbits + 7) / 8 + ((int64_t)hs * vbits + 7) / 8 + 8;
    slot = (slot + 15) / 16 * 16;
    static const char *const names[] = {"num_blocks", "block_size", "num_kv_heads",
                                        "slot_size_aligned"};
    int64_t dims[] = {nb, bs, kvh, slot};
    attn__shape_set(out, 4, dims, names);
    return ATTN_OK;
}

/* Dense MLA: one latent row per token (num_kv_heads is 1). */
attn_status attn__kv_shape_mla(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                               attn_kv_shape *out)
{
    (void)kv;
    attn_status st = attn__shape_args(nb, bs, kvh, hs);
    if (st != ATTN_OK) return st;
    if (!out) return attn__fail(ATTN_NULL_ARGUMENT, "KV cache shape: out is NULL");
    static const char *const names[] = {"num_blocks", "block_size", "head_size"};
    int64_t dims[] = {nb, bs, hs};
    attn__shape_set(out, 3, dims, names);
    return ATTN_OK;
}

/* fp8_ds_mla stores 656 bytes per token (fp8 latent, scales, bf16 rope). */
attn_status attn__kv_shape_flashmla_sparse(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                           attn_kv_shape *out)
{
    attn_status st = attn__kv_shape_mla(nb, bs, kvh, hs, kv, out);
    if (st == ATTN_OK && kv == ATTN_KV_FP8_DS_MLA) out->dims[2] = 656;
    return st;
}

static attn_status attn__order_set(const int *src, int n, int *order, int *count)
{
    if (!order || !count) return attn__fail(ATTN_NULL_ARGUMENT, "stride order: NULL output");
    memcpy(order, src, sizeof(int) * (size_t)n);
    *count = n;
    return ATTN_OK;
}

attn_status attn__stride_order_flash(attn_kv_layout layout, bool include_layers, int *order, int *n)
{
    static const int nhd[] = {0, 1, 2, 3, 4}, hnd[] = {0, 1, 3, 2, 4};
    static const int nhd_l[] = {2, 0, 1, 3, 4, 5}, hnd_l[] = {2, 4, 0, 1, 3, 5};
    bool h = layout == ATTN_LAYOUT_HND;
    if (include_layers) return attn__order_set(h ? hnd_l : nhd_l, 6, order, n);
    return attn__order_set(h ? hnd : nhd, 5, order, n);
}

attn_status attn__stride_order_flashinfer(attn_kv_layout layout, bool include_layers, int *order,
                                          int *n)
{
    static const int nhd[] = {0, 1, 2, 3, 4}, hnd[] = {0, 1, 3, 2, 4};
    static const int nhd_l[] = {1, 0, 2, 3, 4, 5}, hnd_l[] = {1, 2, 4, 0, 3, 5};
    bool h = layout == ATTN_LAYOUT_HND;
    if (include_layers) return attn__order_set(h ? hnd_l : nhd_l, 6, order, n);
    return attn__order_set(h ? hnd : nhd, 5, order, n);
}

/* MLA caches have no head axis to move; a layers-first order would be the
 * identity, which is how vLLM says cross-layer layout is unsupported. */
attn_status attn__stride_order_mla(attn_kv_layout layout, bool include_layers, int *order, int *n)
{
    (void)layout;
    static const int id[] = {0, 1, 2, 3};
    if (include_layers) {
        attn__order_set(id, 4, order, n);
        return attn__fail(ATTN_UNSUPPORTED, "MLA KV caches have no cross-layer layout");
    }
    return attn__order_set(id, 3, order, n);
}
