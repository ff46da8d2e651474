/* Paged attention on an OpenCL device: the step (plan on the host, run on
 * the device) and the forward call.
 *
 * A step checks one batch's metadata, plans it and uploads it once for
 * every layer of the step: query_start_loc, each request's key count (its
 * sequence, or its encoder's for cross attention), the work-group tiles of
 * up to KD_ROWS (token, head) rows and the block table rows. The plan also
 * picks the split-KV shares: when the tiles times the KV heads would leave
 * the device's compute units idle and contexts are long, each tile's keys
 * are cut into splits whose partial states a merge kernel combines.
 *
 * The forward call checks what the host can (REFERENCE's argument check,
 * the step against the call, every buffer against the elements it will
 * address) and enqueues one attention launch (and one merge launch when
 * split). A layer's kernel state holds its per-head parameters on the
 * device: sinks and ALiBi slopes uploaded once at create, the KV scales
 * whenever the view's differ from what the device holds. */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_impl.h"
#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"

/* Split-KV: shares of at least this many keys, at most this many. */
#define ATTN__OCL_MIN_SPLIT_KEYS 256
#define ATTN__OCL_MAX_SPLITS     256

struct attn__ocl_step {
    attn__ocl *o;
    int H, KVH, D, Dv;
    attn_attn_type type;
    attn__ocl_mem *meta; /* the int32 sections below, on the device */
    int32_t *host;
    size_t host_cap;
    /* the last build */
    bool built;
    int nreq, ntok, ntiles, nsplit, split_len, bn, bt_stride, block_size, num_blocks;
    int m_qsl, m_kvlen, m_tiles, m_bt;
};

static int keys_per_tile(int D, int Dv)
{
    int w = D > Dv ? D : Dv, bn = KD_TILE / w;
    return bn < KD_MAX_BN ? bn : KD_MAX_BN;
}

/* The layer geometries the kernels take (steps and kernel states alike). */
static attn_status check_geometry(const attn_layer_params *layer)
{
    int Dv = attn__fwd_head_size_v(layer);
    if (layer->num_heads < 1 || layer->num_kv_heads < 1 ||
        layer->num_heads % layer->num_kv_heads != 0 || layer->num_heads > ATTN_MAX_HEADS)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OPENCL_ATTN: num_heads (%d) must be a positive multiple of "
                          "num_kv_heads (%d)",
                          layer->num_heads, layer->num_kv_heads);
    if (layer->head_size < 8 || layer->head_size > KD_MAX_HEAD || layer->head_size % 8 || Dv < 8 ||
        Dv > KD_MAX_HEAD || Dv % 8)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OPENCL_ATTN: head sizes %d/%d; the kernels take multiples of 8 up to %d",
                          layer->head_size, Dv, KD_MAX_HEAD);
    if ((unsigned)layer->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OPENCL_ATTN: bad dtype %d", (int)layer->dtype);
    return ATTN_OK;
}

attn_status attn__ocl_step_create(attn__ocl *o, const attn_layer_params *layer,
                                  attn__ocl_step **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_geometry(layer);
    if (st != ATTN_OK) return st;
    int Dv = attn__fwd_head_size_v(layer);
    attn__ocl_step *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL step: out of memory");
    s->o = o;
    s->H = layer->num_heads;
    s->KVH = layer->num_kv_heads;
    s->D = layer->head_size;
    s->Dv = Dv;
    s->type = layer->attn_type;
    s->bn = keys_per_tile(s->D, Dv);
    *out = s;
    return ATTN_OK;
}

void attn__ocl_step_destroy(attn__ocl_step *s)
{
    if (!s) return;
    attn__ocl_free(s->meta);
    free(s->host);
    free(s);
}

int attn__ocl_step_splits(const attn__ocl_step *s)
{
    return s && s->built ? s->nsplit : 0;
}

static int kv_len_of(const attn__ocl_step *s, const attn_common_metadata *cm, int r)
{
    if (s->type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens)
        return cm->encoder_seq_lens[r];
    return cm->seq_lens[r];
}

/* What the kernels will read of cm, checked; *blocks = the block table
 * entries per request row that are read at most, *max_kv the longest key
 * count, *tiles the work-group tiles. */
static attn_status check_metadata(const attn__ocl_step *s, const attn_common_metadata *cm,
                                  int num_blocks, int64_t *tiles, int *max_kv)
{
    int n = cm->num_reqs;
    if (n < 0 || n > ATTN_MAX_NUM_REQS || cm->num_actual_tokens < 0)
        return attn__fail(ATTN_BAD_METADATA, "num_reqs %d / num_actual_tokens %d out of range", n,
                          cm->num_actual_tokens);
    if (n == 0) {
        if (cm->num_actual_tokens != 0)
            return attn__fail(ATTN_BAD_METADATA, "%d tokens but no request", cm->num_actual_tokens);
        return ATTN_OK;
    }
    bool cross = s->type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens;
    ATTN__CHECK_NULL(cm->query_start_loc);
    if (!cross) ATTN__CHECK_NULL(cm->seq_lens);
    ATTN__CHECK_NULL(cm->block_table);
    if (cm->block_size < 1 || cm->block_size > ATTN_MAX_BLOCK_SIZE || num_blocks < 1)
        return attn__fail(ATTN_BAD_METADATA, "block_size %d / num_blocks %d out of range",
                          cm->block_size, num_blocks);
    const int32_t *qsl = cm->query_start_loc;
    if (qsl[0] != 0)
        return attn__fail(ATTN_BAD_METADATA, "query_start_loc[0] = %d, want 0", qsl[0]);
    int g = s->H / s->KVH;
    for (int r = 0; r < n; r++) {
        int qlen = qsl[r + 1] - qsl[r], kv = kv_len_of(s, cm, r);
        if (qsl[r + 1] < qsl[r])
            return attn__fail(ATTN_BAD_METADATA, "query_start_loc decreases at request %d", r);
        if (kv < 0 || kv > ATTN_MAX_SEQ_LEN || (!cross && qlen > kv))
            return attn__fail(ATTN_BAD_METADATA, "request %d: %d queries over %d keys", r, qlen,
                              kv);
        int64_t nblk = ((int64_t)kv + cm->block_size - 1) / cm->block_size;
        if (nblk > cm->block_table_stride)
            return attn__fail(ATTN_BAD_METADATA,
                              "request %d needs %lld blocks but the block table row holds %d", r,
                              (long long)nblk, cm->block_table_stride);
        const int32_t *bt = cm->block_table + (int64_t)r * cm->block_table_stride;
        for (int64_t b = 0; b < nblk; b++)
            if (bt[b] < 0 || bt[b] >= num_blocks)
                return attn__fail(ATTN_BAD_METADATA,
                                  "request %d block %lld has id %d outside the pool of %d", r,
                                  (long long)b, bt[b], num_blocks);
        *tiles += ((int64_t)qlen * g + KD_ROWS - 1) / KD_ROWS;
        if (kv > *max_kv) *max_kv = kv;
    }
    if (qsl[n] != cm->num_actual_tokens)
        return attn__fail(ATTN_BAD_METADATA, "query_start_loc[%d] = %d != num_actual_tokens %d", n,
                          qsl[n], cm->num_actual_tokens);
    if (*tiles > INT32_MAX / KD_WG)
        return attn__fail(ATTN_UNSUPPORTED, "OPENCL_ATTN: %lld work-group tiles in one step",
                          (long long)*tiles);
    return ATTN_OK;
}

/* Split-KV shares: a given split length, or enough shares to give the
 * device's compute units work when the tiles alone do not. */
static void plan_splits(attn__ocl_step *s, const attn__ocl_plan *plan, int max_kv)
{
    s->nsplit = 1;
    s->split_len = max_kv > 0 ? max_kv : 1;
    int cap = plan && plan->max_splits > 0 ? plan->max_splits : ATTN__OCL_MAX_SPLITS;
    if (cap > ATTN__OCL_MAX_SPLITS) cap = ATTN__OCL_MAX_SPLITS;
    if (max_kv < 2 || cap < 2) return;
    int len = plan && plan->split_len > 0 ? plan->split_len : 0;
    if (len == 0) {
        int64_t groups = (int64_t)s->ntiles * s->KVH;
        int64_t target = 4 * (int64_t)(s->o->dev->compute_units ? s->o->dev->compute_units : 1);
        if (target < 8) target = 8;
        if (groups >= target || max_kv < 2 * ATTN__OCL_MIN_SPLIT_KEYS) return;
        int64_t want = (target + groups - 1) / groups, most = max_kv / ATTN__OCL_MIN_SPLIT_KEYS;
        int n = (int)(want < most ? want : most);
        if (n < 2) return;
        len = (max_kv + n - 1) / n;
        len = (len + s->bn - 1) / s->bn * s->bn; /* whole key tiles */
    }
    int n = (max_kv + len - 1) / len;
    if (n > cap) {
        n = cap;
        len = (max_kv + n - 1) / n;
        n = (max_kv + len - 1) / len;
    }
    s->nsplit = n;
    s->split_len = len;
}

static attn_status pack_and_upload(attn__ocl_step *s, const attn_common_metadata *cm)
{
    int n = cm->num_reqs;
    int64_t words = (int64_t)n + 1 + n + 2 * (int64_t)s->ntiles + (int64_t)n * s->bt_stride;
    if (words > INT32_MAX)
        return attn__fail(ATTN_UNSUPPORTED, "OPENCL_ATTN: step metadata of %lld words",
                          (long long)words);
    if ((size_t)words > s->host_cap) {
        int32_t *h = realloc(s->host, sizeof(int32_t) * (size_t)words);
        if (!h) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL step: out of memory");
        s->host = h;
        s->host_cap = (size_t)words;
    }
    int32_t *w = s->host;
    s->m_qsl = 0;
    s->m_kvlen = n + 1;
    s->m_tiles = s->m_kvlen + n;
    s->m_bt = s->m_tiles + 2 * s->ntiles;
    memcpy(w, cm->query_start_loc, sizeof(int32_t) * (size_t)(n + 1));
    int g = s->H / s->KVH, t = 0;
    for (int r = 0; r < n; r++) {
        w[s->m_kvlen + r] = kv_len_of(s, cm, r);
        int rows = (cm->query_start_loc[r + 1] - cm->query_start_loc[r]) * g;
        for (int row0 = 0; row0 < rows; row0 += KD_ROWS, t++) {
            w[s->m_tiles + 2 * t] = r;
            w[s->m_tiles + 2 * t + 1] = row0;
        }
        memcpy(w + s->m_bt + (int64_t)r * s->bt_stride,
               cm->block_table + (int64_t)r * cm->block_table_stride,
               sizeof(int32_t) * (size_t)s->bt_stride);
    }
    size_t bytes = sizeof(int32_t) * (size_t)words;
    if (!s->meta || attn__ocl_mem_size(s->meta) < bytes) {
        attn__ocl_free(s->meta);
        s->meta = NULL;
        attn_status st = attn__ocl_alloc(s->o, bytes + bytes / 2, &s->meta);
        if (st != ATTN_OK) return st;
    }
    return attn__ocl_copy_in(s->o, s->meta, 0, w, bytes);
}

attn_status attn__ocl_step_build(attn__ocl_step *s, const attn_common_metadata *cm, int num_blocks,
                                 const attn__ocl_plan *plan)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(cm);
    s->built = false;
    int64_t tiles = 0;
    int max_kv = 0;
    attn_status st = check_metadata(s, cm, num_blocks, &tiles, &max_kv);
    if (st != ATTN_OK) return st;
    s->nreq = cm->num_reqs;
    s->ntok = cm->num_actual_tokens;
    s->ntiles = (int)tiles;
    s->block_size = cm->block_size;
    s->num_blocks = num_blocks;
    /* only the entries a request can read travel */
    s->bt_stride =
        (int)(((int64_t)max_kv + cm->block_size - 1) / (cm->block_size > 0 ? cm->block_size : 1));
    if (s->bt_stride < 1) s->bt_stride = 1;
    if (s->nreq > 0 && s->bt_stride > cm->block_table_stride) s->bt_stride = cm->block_table_stride;
    plan_splits(s, plan, max_kv);
    if (s->nreq > 0) {
        st = pack_and_upload(s, cm);
        if (st != ATTN_OK) return st;
    }
    s->built = true;
    return ATTN_OK;
}

/* ---- forward ------------------------------------------------------------------ */

static attn_status check_buffer(const attn__ocl *o, const attn__ocl_mem *m, int64_t off,
                                int64_t elems, size_t esz, const char *what)
{
    int64_t end = 0, bytes = 0;
    if (m->dev != o->dev)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OPENCL_ATTN: %s is on another device", what);
    if (off < 0 || !attn__add_i64(off, elems, &end) || !attn__mul_i64(end, (int64_t)esz, &bytes) ||
        (uint64_t)bytes > m->size)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "OPENCL_ATTN: %s needs elements [%lld, %lld + %lld) of %zu bytes each; "
                          "the buffer has %zu bytes",
                          what, (long long)off, (long long)off, (long long)elems, esz, m->size);
    return ATTN_OK;
}

static attn_status check_forward(attn__ocl *o, const attn__ocl_fwd *f)
{
    const attn__ocl_step *s = f->step;
    attn_forward_args a = {
        .layer = f->layer, .common = f->common, .q = f->q, .kv = f->kv, .out = f->out};
    attn_status st = attn__fwd_check(&a);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = f->layer;
    /* one queue orders the step's upload before the launch that reads it */
    if (s->o != o || !s->built)
        return attn__fail(ATTN_BAD_STATE, "OPENCL_ATTN: the step is %s",
                          s->built ? "of another instance (queue)" : "not built");
    if (l->num_heads != s->H || l->num_kv_heads != s->KVH || l->head_size != s->D ||
        attn__fwd_head_size_v(l) != s->Dv || l->attn_type != s->type)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OPENCL_ATTN: the step was made for another layer "
                                                 "geometry");
    const attn_common_metadata *cm = f->common;
    if (cm->num_reqs != s->nreq || cm->num_actual_tokens != s->ntok ||
        (s->nreq > 0 && (f->kv->block_size != s->block_size || f->kv->num_blocks < s->num_blocks)))
        return attn__fail(ATTN_BAD_METADATA,
                          "OPENCL_ATTN: the step was built for %d requests / %d tokens over %d "
                          "blocks of %d, the call has %d / %d over %d of %d",
                          s->nreq, s->ntok, s->num_blocks, s->block_size, cm->num_reqs,
                          cm->num_actual_tokens, f->kv->num_blocks, f->kv->block_size);
    int64_t rows = (int64_t)s->ntok * s->H, extent = 0;
    size_t qsz = attn_elem_size(attn_dtype_elem(l->dtype));
    if (!attn__ocl_view_extent(f->kv, s->Dv, &extent))
        return attn__fail(ATTN_INVALID_ARGUMENT, "OPENCL_ATTN: the KV view's extent overflows");
    st = check_buffer(o, (const attn__ocl_mem *)f->kv->data, 0, extent, attn_elem_size(f->kv->elem),
                      "the KV cache");
    if (st == ATTN_OK) st = check_buffer(o, f->q, f->q_offset, rows * s->D, qsz, "q");
    if (st == ATTN_OK) st = check_buffer(o, f->out, f->out_offset, rows * s->Dv, qsz, "out");
    if (st == ATTN_OK && f->lse)
        st = check_buffer(o, f->lse, f->lse_offset, rows, sizeof(float), "lse");
    return st;
}

/* ---- the layer's kernel state ------------------------------------------------ */

/* params on the device: sinks[H], ALiBi slopes[H] (uploaded at create), K
 * scales[KVH], V scales[KVH] (uploaded when the view's scales change). */
struct attn__ocl_kernel {
    attn__ocl *o;
    int H, KVH, D, Dv;
    attn_attn_type type;
    bool sinks, alibi;
    attn__ocl_mem *params;
    float *scales; /* what params holds after its 2 * H floats */
};

attn_status attn__ocl_kernel_create(attn__ocl *o, const attn_layer_params *layer,
                                    attn__ocl_kernel **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_geometry(layer);
    if (st != ATTN_OK) return st;
    size_t H = (size_t)layer->num_heads, KVH = (size_t)layer->num_kv_heads;
    if (sizeof(float) * (2 * H + 2 * KVH) > o->dev->max_constant)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OPENCL_ATTN: %zu heads / %zu KV heads need %zu bytes of per-head "
                          "parameters; %.200s's constant buffers hold %llu",
                          H, KVH, sizeof(float) * (2 * H + 2 * KVH), o->dev->name,
                          (unsigned long long)o->dev->max_constant);
    attn__ocl_kernel *k = calloc(1, sizeof *k);
    float *p = malloc(sizeof(float) * (2 * H + 2 * KVH));
    if (k) k->scales = malloc(sizeof(float) * 2 * KVH);
    if (!k || !p || !k->scales) {
        free(p);
        attn__ocl_kernel_destroy(k);
        return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN: out of memory");
    }
    *k = (attn__ocl_kernel){.o = o,
                            .H = (int)H,
                            .KVH = (int)KVH,
                            .D = layer->head_size,
                            .Dv = attn__fwd_head_size_v(layer),
                            .type = layer->attn_type,
                            .sinks = layer->sinks != NULL,
                            .alibi = layer->alibi_slopes != NULL,
                            .scales = k->scales};
    for (size_t h = 0; h < H; h++) {
        p[h] = layer->sinks ? layer->sinks[h] : 0.0f;
        p[H + h] = layer->alibi_slopes ? layer->alibi_slopes[h] : 0.0f;
    }
    for (size_t h = 0; h < 2 * KVH; h++)
        p[2 * H + h] = k->scales[h] = 1.0f;
    st = attn__ocl_alloc(o, sizeof(float) * (2 * H + 2 * KVH), &k->params);
    if (st == ATTN_OK)
        st = attn__ocl_copy_in(o, k->params, 0, p, sizeof(float) * (2 * H + 2 * KVH));
    free(p);
    if (st != ATTN_OK) {
        attn__ocl_kernel_destroy(k);
        return st;
    }
    *out = k;
    return ATTN_OK;
}

void attn__ocl_kernel_destroy(attn__ocl_kernel *k)
{
    if (!k) return;
    attn__ocl_free(k->params);
    free(k->scales);
    free(k);
}

/* The view's dequantisation scales (1 for non-fp8 caches), uploaded when
 * they differ from what the device holds (rarely: they are set per layer). */
static attn_status update_scales(attn__ocl_kernel *k, const attn_kv_view *kv)
{
    float s[2 * KD_MAX_HEAD];
    bool same = true;
    float *sc = k->KVH <= KD_MAX_HEAD ? s : malloc(sizeof(float) * 2 * (size_t)k->KVH);
    if (!sc) return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN: out of memory");
    for (int h = 0; h < k->KVH; h++) {
        sc[h] = attn__kv_scale(kv, h, false);
        sc[k->KVH + h] = attn__kv_scale(kv, h, true);
    }
    for (int h = 0; h < 2 * k->KVH; h++)
        same &= attn__f32_bits(sc[h]) == attn__f32_bits(k->scales[h]);
    attn_status st = ATTN_OK;
    if (!same) {
        size_t bytes = sizeof(float) * 2 * (size_t)k->KVH;
        st = attn__ocl_copy_in(k->o, k->params, sizeof(float) * 2 * (size_t)k->H, sc, bytes);
        if (st == ATTN_OK) memcpy(k->scales, sc, bytes);
    }
    if (sc != s) free(sc);
    return st;
}

static attn_status launch_attention(attn__ocl_kernel *k, const attn__ocl_fwd *f, int flags)
{
    attn__ocl *o = k->o;
    const attn__ocl_step *s = f->step;
    const attn_layer_params *l = f->layer;
    const attn_kv_view *kv = f->kv;
    attn__ocl_args a = {.o = o, .k = o->k[ATTN__K_ATTN]};
    attn__ocl_arg_mem(&a, f->q);
    attn__ocl_arg_i64(&a, f->q_offset);
    attn__ocl_arg_mem(&a, (const attn__ocl_mem *)kv->data);
    attn__ocl_arg_mem(&a, f->out);
    attn__ocl_arg_i64(&a, f->out_offset);
    attn__ocl_arg_mem(&a, f->lse);
    attn__ocl_arg_i64(&a, f->lse_offset);
    attn__ocl_arg_mem(&a, s->nsplit > 1 ? o->part : NULL);
    attn__ocl_arg_mem(&a, s->meta);
    attn__ocl_arg_i32(&a, s->m_qsl);
    attn__ocl_arg_i32(&a, s->m_kvlen);
    attn__ocl_arg_i32(&a, s->m_tiles);
    attn__ocl_arg_i32(&a, s->m_bt);
    attn__ocl_arg_i32(&a, s->bt_stride);
    attn__ocl_arg_mem(&a, k->params);
    attn__ocl_arg_i32(&a, s->H);
    attn__ocl_arg_i32(&a, s->KVH);
    attn__ocl_arg_i32(&a, s->D);
    attn__ocl_arg_i32(&a, s->Dv);
    attn__ocl_arg_i32(&a, (int32_t)attn_dtype_elem(l->dtype));
    attn__ocl_arg_i32(&a, (int32_t)kv->elem);
    attn__ocl_arg_i64(&a, kv->k_offset);
    attn__ocl_arg_i64(&a, kv->v_offset);
    attn__ocl_arg_i64(&a, kv->stride_block);
    attn__ocl_arg_i64(&a, kv->stride_token);
    attn__ocl_arg_i64(&a, kv->stride_head);
    attn__ocl_arg_i32(&a, kv->block_size);
    attn__ocl_arg_f32(&a, attn__fwd_scale(l));
    attn__ocl_arg_f32(&a, l->logits_soft_cap);
    attn__ocl_arg_i32(&a, l->sliding_window);
    attn__ocl_arg_i32(&a, flags);
    attn__ocl_arg_i32(&a, s->split_len);
    attn__ocl_arg_i32(&a, s->bn);
    size_t groups[3] = {(size_t)s->ntiles, (size_t)s->KVH, (size_t)s->nsplit};
    attn_status st = attn__ocl_launch(&a, "attn_kd_paged_attention", groups);
    if (st != ATTN_OK || s->nsplit == 1) return st;
    attn__ocl_args m = {.o = o, .k = o->k[ATTN__K_MERGE]};
    attn__ocl_arg_mem(&m, o->part);
    attn__ocl_arg_i32(&m, s->nsplit);
    attn__ocl_arg_mem(&m, f->out);
    attn__ocl_arg_i64(&m, f->out_offset);
    attn__ocl_arg_mem(&m, f->lse);
    attn__ocl_arg_i64(&m, f->lse_offset);
    attn__ocl_arg_mem(&m, s->meta);
    attn__ocl_arg_i32(&m, s->m_qsl);
    attn__ocl_arg_i32(&m, s->m_tiles);
    attn__ocl_arg_mem(&m, k->params);
    attn__ocl_arg_i32(&m, s->H);
    attn__ocl_arg_i32(&m, s->KVH);
    attn__ocl_arg_i32(&m, s->Dv);
    attn__ocl_arg_i32(&m, (int32_t)attn_dtype_elem(l->dtype));
    attn__ocl_arg_i32(&m, flags);
    groups[2] = 1;
    return attn__ocl_launch(&m, "attn_kd_attention_merge", groups);
}

attn_status attn__ocl_forward(attn__ocl_kernel *k, const attn__ocl_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    ATTN__CHECK_NULL(f->kv);
    ATTN__CHECK_NULL(f->q);
    ATTN__CHECK_NULL(f->out);
    attn__ocl *o = k->o;
    attn_status st = check_forward(o, f);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = f->layer;
    if (l->num_heads != k->H || l->num_kv_heads != k->KVH || l->head_size != k->D ||
        attn__fwd_head_size_v(l) != k->Dv || l->attn_type != k->type ||
        (l->sinks != NULL) != k->sinks || (l->alibi_slopes != NULL) != k->alibi)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OPENCL_ATTN: the call's layer is not the kernel's (heads, head sizes, "
                          "attention type, sinks and ALiBi are fixed at create)");
    const attn__ocl_step *s = f->step;
    if (s->ntok == 0) return ATTN_OK;
    st = update_scales(k, f->kv);
    if (st != ATTN_OK) return st;
    if (s->nsplit > 1) {
        size_t bytes = 0;
        if (!attn__mul_size((size_t)s->ntiles * (size_t)s->KVH, (size_t)s->nsplit, &bytes) ||
            !attn__mul_size(bytes, (size_t)KD_ROWS * (size_t)(s->Dv + 2) * sizeof(float), &bytes))
            return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN: split-KV scratch overflows");
        st = attn__ocl_scratch(o, &o->part, bytes);
        if (st != ATTN_OK) return st;
    }
    attn_forward_args a = {.layer = l, .common = f->common};
    int flags = (attn__fwd_causal(&a) ? KD_F_CAUSAL : 0) | (k->sinks ? KD_F_SINKS : 0) |
                (k->alibi ? KD_F_ALIBI : 0) | (f->lse ? KD_F_LSE : 0);
    return launch_attention(k, f, flags);
}
