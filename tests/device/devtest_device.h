/* An opaque test device (attn/backend.h's attn_device_ops) for the device
 * tests: memory lives in a private arena and the handles it hands out are
 * addresses in a PROT_NONE reservation of the same size, so any host code
 * that dereferences a handle, or an address computed from one, faults at
 * once. Only its own ops translate a handle (+ offset) to the arena.
 * Header-only: the devtest plugin (devtest_plugin.c, no libattn) and the
 * unit tests (test_device_api.c) both include it. Counters record what ran.
 *
 * Allocation is a bump pointer per instance, 64-byte aligned; the arena is
 * fresh anonymous memory, so every allocation is zeroed; closing the
 * instance unmaps both regions. Cache writes support f32 / f16 / bf16
 * sources into f32 / f16 / bf16 caches (the descriptor promises no fp8). */
#ifndef ATTN_TEST_DEVTEST_DEVICE_H
#define ATTN_TEST_DEVTEST_DEVICE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <attn/backend.h>

#define DEVTEST_ARENA ((size_t)64 << 30) /* virtual; pages are committed when written */

typedef struct devtest_stats {
    long opens, allocs, frees, copies_in, copies_out, kv_writes, syncs, kernels;
} devtest_stats;

typedef struct devtest_state {
    unsigned char *poison; /* handles: PROT_NONE */
    unsigned char *arena;  /* the memory behind them */
    size_t used;
    devtest_stats *stats;
} devtest_state;

/* The arena address of handle h + off bytes (never read by anyone else). */
static inline unsigned char *devtest_at(const devtest_state *s, const void *h, size_t off)
{
    return s->arena + ((const unsigned char *)h - s->poison) + off;
}

static inline attn_status devtest_open_state(devtest_stats *stats, void **state)
{
    devtest_state *s = calloc(1, sizeof *s);
    if (!s) return ATTN_OUT_OF_MEMORY;
    s->poison =
        mmap(NULL, DEVTEST_ARENA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    s->arena = mmap(NULL, DEVTEST_ARENA, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->poison == MAP_FAILED || s->arena == MAP_FAILED) {
        if (s->poison != MAP_FAILED) munmap(s->poison, DEVTEST_ARENA);
        if (s->arena != MAP_FAILED) munmap(s->arena, DEVTEST_ARENA);
        free(s);
        return ATTN_OUT_OF_MEMORY;
    }
    s->stats = stats;
    stats->opens++;
    *state = s;
    return ATTN_OK;
}

static inline void devtest_close(void *state)
{
    devtest_state *s = state;
    munmap(s->poison, DEVTEST_ARENA);
    munmap(s->arena, DEVTEST_ARENA);
    free(s);
}

static inline attn_status devtest_alloc(void *state, size_t bytes, attn_mem_kind kind, void **mem)
{
    (void)kind;
    devtest_state *s = state;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n > DEVTEST_ARENA - s->used) return ATTN_OUT_OF_MEMORY;
    *mem = s->poison + s->used;
    s->used += n;
    s->stats->allocs++;
    return ATTN_OK;
}

static inline void devtest_free(void *state, void *mem, size_t bytes, attn_mem_kind kind)
{
    (void)kind;
    devtest_state *s = state;
    /* back to zero pages; the range is not handed out again (bump) */
    madvise(devtest_at(s, mem, 0), (bytes + 4095) & ~(size_t)4095, MADV_DONTNEED);
    s->stats->frees++;
}

static inline attn_status devtest_copy_in(void *state, void *dst, size_t off, const void *src,
                                          size_t bytes)
{
    devtest_state *s = state;
    memcpy(devtest_at(s, dst, off), src, bytes);
    s->stats->copies_in++;
    return ATTN_OK;
}

static inline attn_status devtest_copy_out(void *state, void *dst, const void *src, size_t off,
                                           size_t bytes)
{
    devtest_state *s = state;
    memcpy(dst, devtest_at(s, src, off), bytes);
    s->stats->copies_out++;
    return ATTN_OK;
}

static inline attn_status devtest_sync(void *state)
{
    ((devtest_state *)state)->stats->syncs++;
    return ATTN_OK;
}

/* ---- reshape_and_cache for 16/32-bit elements -------------------------------------------- */

static inline float devtest_load(const void *p, attn_elem e, size_t i)
{
    uint32_t u;
    float f;
    switch (e) {
    case ATTN_ELEM_F32: memcpy(&f, (const char *)p + 4 * i, 4); return f;
    case ATTN_ELEM_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        u = (uint32_t)h << 16;
        memcpy(&f, &u, 4);
        return f;
    }
    default: { /* f16 */
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
        if (ex == 0) {
            f = (float)man * 5.9604644775390625e-8f;
            return sign ? -f : f;
        }
        u = ex == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((ex + 112u) << 23) | (man << 13);
        memcpy(&f, &u, 4);
        return f;
    }
    }
}

/* f32 -> bf16 / f32, round to nearest even (f16 caches get the same bits
 * only when the source is f16: copied, never converted) */
static inline void devtest_store(void *p, attn_elem e, size_t i, float f)
{
    if (e == ATTN_ELEM_F32) {
        memcpy((char *)p + 4 * i, &f, 4);
        return;
    }
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    uint16_t h = (uint16_t)(u >> 16);
    memcpy((char *)p + 2 * i, &h, 2);
}

static inline attn_status devtest_kv_write(void *state, const attn_kv_view *kv,
                                           const attn_kv_write_args *a)
{
    devtest_state *s = state;
    attn_elem se = a->src, de = kv->elem;
    if ((de != ATTN_ELEM_F32 && de != ATTN_ELEM_BF16 && de != ATTN_ELEM_F16) ||
        (de == ATTN_ELEM_F16 && se != ATTN_ELEM_F16))
        return ATTN_UNSUPPORTED;
    size_t ssz = se == ATTN_ELEM_F32 ? 4 : 2, dsz = de == ATTN_ELEM_F32 ? 4 : 2;
    const unsigned char *k = devtest_at(s, a->k, (size_t)a->k_offset * ssz);
    const unsigned char *v = a->v ? devtest_at(s, a->v, (size_t)a->v_offset * ssz) : NULL;
    unsigned char *cache = devtest_at(s, kv->data, 0);
    int H = kv->num_kv_heads;
    for (int t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0) continue;
        int64_t blk = slot / kv->block_size, off = slot % kv->block_size;
        for (int h = 0; h < H; h++)
            for (int pass = 0; pass < (v ? 2 : 1); pass++) {
                int D = pass ? kv->head_size_v : kv->head_size;
                const unsigned char *src = pass ? v : k;
                size_t s0 = ((size_t)t * H + (size_t)h) * (size_t)D;
                int64_t d0 = (pass ? kv->v_offset : kv->k_offset) + blk * kv->stride_block +
                             off * kv->stride_token + h * kv->stride_head;
                if (se == de) {
                    memcpy(cache + (size_t)d0 * dsz, src + s0 * ssz, (size_t)D * ssz);
                    continue;
                }
                for (int d = 0; d < D; d++)
                    devtest_store(cache, de, (size_t)d0 + (size_t)d,
                                  devtest_load(src, se, s0 + (size_t)d));
            }
    }
    s->stats->kv_writes++;
    return ATTN_OK;
}

/* A host kernel `inner` run on the arena: every tensor handle (+ its
 * element offset) and the view's memory translated to arena addresses. */
static inline attn_status devtest_forward(void *state, const attn_kernel_ops *inner,
                                          const attn_forward_args *a)
{
    devtest_state *s = state;
    attn_forward_args h = *a;
    size_t esz = a->layer->dtype == ATTN_DTYPE_FP32 ? 4 : 2;
    attn_kv_view kv;
    if (a->kv) {
        kv = *a->kv;
        kv.data = devtest_at(s, kv.data, 0);
        kv.device = NULL;
        h.kv = &kv;
    }
    h.q = a->q ? devtest_at(s, a->q, (size_t)a->q_offset * esz) : NULL;
    h.out = a->out ? devtest_at(s, a->out, (size_t)a->out_offset * esz) : NULL;
    h.lse = a->lse ? (float *)devtest_at(s, a->lse, (size_t)a->lse_offset * sizeof(float)) : NULL;
    h.k = a->k ? devtest_at(s, a->k, (size_t)a->k_offset * esz) : NULL;
    h.v = a->v ? devtest_at(s, a->v, (size_t)a->v_offset * esz) : NULL;
    h.q_offset = h.out_offset = h.lse_offset = h.k_offset = h.v_offset = 0;
    s->stats->kernels++;
    return inner->forward(NULL, &h);
}

/* The same for an MLA entry point (mha: forward_mha, else forward_mqa). */
static inline attn_status devtest_forward_mla(void *state, const attn_kernel_ops *inner, bool mha,
                                              const attn_mla_args *a)
{
    devtest_state *s = state;
    attn_mla_args h = *a;
    size_t esz = a->layer->dtype == ATTN_DTYPE_FP32 ? 4 : 2;
    attn_kv_view kv = *a->kv;
    kv.data = devtest_at(s, kv.data, 0);
    kv.device = NULL;
    h.kv = &kv;
    h.q = devtest_at(s, a->q, (size_t)a->q_offset * esz);
    h.out = devtest_at(s, a->out, (size_t)a->out_offset * esz);
    h.lse = a->lse ? (float *)devtest_at(s, a->lse, (size_t)a->lse_offset * sizeof(float)) : NULL;
    h.w_uk = a->w_uk ? devtest_at(s, a->w_uk, 0) : NULL;
    h.w_uv = a->w_uv ? devtest_at(s, a->w_uv, 0) : NULL;
    h.topk_indices = a->topk_indices ? (const int32_t *)devtest_at(s, a->topk_indices, 0) : NULL;
    h.q_offset = h.out_offset = h.lse_offset = 0;
    s->stats->kernels++;
    return mha ? inner->forward_mha(NULL, &h) : inner->forward_mqa(NULL, &h);
}

/* The ops of a devtest device whose open counts into `stats` (a static of
 * the including file, passed through this macro's open function). */
#define DEVTEST_DEVICE_OPS(ops_name, open_fn)                                                      \
    static const attn_device_ops ops_name = {                                                      \
        .struct_size = sizeof(attn_device_ops),                                                    \
        .name = "devtest",                                                                         \
        .flags = 0,                                                                                \
        .open = open_fn,                                                                           \
        .close = devtest_close,                                                                    \
        .alloc = devtest_alloc,                                                                    \
        .free = devtest_free,                                                                      \
        .copy_in = devtest_copy_in,                                                                \
        .copy_out = devtest_copy_out,                                                              \
        .kv_write = devtest_kv_write,                                                              \
        .synchronize = devtest_sync,                                                               \
    }

#endif
