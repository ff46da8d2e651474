/* libattn._core, second half: KV-cache layouts, writes into a paged cache,
 * and the kernels (forward, MLA forward_mqa) over caller-owned memory,
 * called only through the checked kernel handle (attn/kernel.h).
 *
 * Memory comes through the buffer protocol (numpy arrays) or as torch
 * tensors read in place, never copied. Every buffer is checked (buffers.c:
 * element type, dimensions, C-contiguity, writability; here: that the cache
 * view's furthest element lies inside its storage) before the C API sees a
 * pointer; the C API then applies its own checks, so a bad
 * call raises and writes nothing. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pyattn.h"

/* ---- dict fields -------------------------------------------------------------- */

static int dict_int(PyObject *d, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        PyErr_Format(PyExc_KeyError, "missing field '%s'", key);
        return -1;
    }
    long long n = PyLong_AsLongLong(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < lo || n > hi) {
        PyErr_Format(PyExc_ValueError, "%s = %lld is out of range [%lld, %lld]", key, n,
                     (long long)lo, (long long)hi);
        return -1;
    }
    *out = n;
    return 0;
}

static int dict_float(PyObject *d, const char *key, float *out)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) return 0; /* optional: keep the default */
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(x)) {
        PyErr_Format(PyExc_ValueError, "%s must be finite", key);
        return -1;
    }
    *out = (float)x;
    return 0;
}

static int parse_elem(const char *s, attn_elem *out)
{
    for (int e = 0; e < ATTN_ELEM_COUNT; e++)
        if (!strcmp(s, attn_elem_name((attn_elem)e))) return *out = (attn_elem)e, 0;
    PyErr_Format(PyExc_ValueError, "unknown element type '%s'", s);
    return -1;
}

static const char *dict_str(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || !PyUnicode_Check(v)) {
        PyErr_Format(PyExc_KeyError, "missing str field '%s'", key);
        return NULL;
    }
    return PyUnicode_AsUTF8(v);
}

/* ---- cache views ---------------------------------------------------------------- */

static PyObject *view_dict(const attn_kv_view *v)
{
    return Py_BuildValue(
        "{s:s,s:i,s:i,s:i,s:i,s:i,s:L,s:L,s:L,s:L,s:L,s:d,s:d}", "elem", attn_elem_name(v->elem),
        "num_blocks", v->num_blocks, "block_size", v->block_size, "num_kv_heads", v->num_kv_heads,
        "head_size", v->head_size, "head_size_v", v->head_size_v, "k_offset",
        (long long)v->k_offset, "v_offset", (long long)v->v_offset, "stride_block",
        (long long)v->stride_block, "stride_token", (long long)v->stride_token, "stride_head",
        (long long)v->stride_head, "k_scale", (double)v->k_scale, "v_scale", (double)v->v_scale);
}

/* A view dict over a storage buffer, checked to lie inside it. */
static int view_from(PyObject *d, PyObject *storage, bool writable, attn_kv_view *v, Py_buffer *b)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "view must be a dict");
        return -1;
    }
    memset(v, 0, sizeof *v);
    const int64_t big = INT64_C(1) << 40;
    int64_t nb, bs, kvh, hs, hsv, ko, vo, sb, st, sh;
    const char *es = dict_str(d, "elem");
    if (!es || parse_elem(es, &v->elem) < 0 || dict_int(d, "num_blocks", 1, INT32_MAX, &nb) < 0 ||
        dict_int(d, "block_size", 1, INT32_MAX, &bs) < 0 ||
        dict_int(d, "num_kv_heads", 1, INT32_MAX, &kvh) < 0 ||
        dict_int(d, "head_size", 1, INT32_MAX, &hs) < 0 ||
        dict_int(d, "head_size_v", 0, INT32_MAX, &hsv) < 0 ||
        dict_int(d, "k_offset", 0, big, &ko) < 0 || dict_int(d, "v_offset", 0, big, &vo) < 0 ||
        dict_int(d, "stride_block", 0, big, &sb) < 0 ||
        dict_int(d, "stride_token", 0, big, &st) < 0 || dict_int(d, "stride_head", 0, big, &sh) < 0)
        return -1;
    v->k_scale = v->v_scale = 1.0f;
    if (dict_float(d, "k_scale", &v->k_scale) < 0 || dict_float(d, "v_scale", &v->v_scale) < 0)
        return -1;
    v->num_blocks = (int)nb, v->block_size = (int)bs, v->num_kv_heads = (int)kvh;
    v->head_size = (int)hs, v->head_size_v = (int)hsv;
    v->k_offset = ko, v->v_offset = vo;
    v->stride_block = sb, v->stride_token = st, v->stride_head = sh;
    /* Furthest element + 1; every term is < 2^40 * 2^31, and there are few. */
    __int128 last = (__int128)(nb - 1) * sb + (__int128)(bs - 1) * st + (__int128)(kvh - 1) * sh;
    __int128 kend = last + ko + hs, vend = last + vo + (hsv ? hsv : hs);
    __int128 need = (kend > vend ? kend : vend) * (__int128)attn_elem_size(v->elem);
    if (pyattn_get_buf_as(storage, "kv cache storage", pyattn_elem_kind(v->elem), writable, false,
                          0, NULL, b) < 0)
        return -1;
    if (need > (__int128)b->len) {
        PyErr_Format(PyExc_ValueError,
                     "kv cache view reaches byte %lld but the storage holds %zd bytes",
                     (long long)need, b->len);
        pyattn_buf_release(b);
        return -1;
    }
    v->data = b->buf;
    return 0;
}

static int lookup_backend(const char *name, const attn_backend **b)
{
    const attn_platform *p;
    attn_status st = attn_platform_current(&p);
    if (st == ATTN_OK) st = attn_backend_resolve(p, name, b);
    if (st != ATTN_OK) return pyattn_raise(st, "cannot resolve backend"), -1;
    return 0;
}

static PyObject *py_kv_layout(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"backend",   "num_blocks",  "block_size",     "num_kv_heads",
                            "head_size", "head_size_v", "kv_cache_dtype", "dtype",
                            "layout",    NULL};
    const char *bn, *kvs = "auto", *ds = "bf16", *ls = "default";
    int nb, bs, kvh, hs, hsv = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "siiii|isss", names, &bn, &nb, &bs, &kvh, &hs, &hsv,
                                     &kvs, &ds, &ls))
        return NULL;
    const attn_backend *b;
    attn_kv_dtype kv;
    attn_dtype dt;
    attn_kv_layout layout = !strcmp(ls, "NHD")   ? ATTN_LAYOUT_NHD
                            : !strcmp(ls, "HND") ? ATTN_LAYOUT_HND
                                                 : ATTN_LAYOUT_DEFAULT;
    if (layout == ATTN_LAYOUT_DEFAULT && strcmp(ls, "default"))
        return PyErr_Format(PyExc_ValueError, "layout must be 'default', 'NHD' or 'HND'");
    if (attn_kv_dtype_parse(kvs, &kv) != ATTN_OK || attn_dtype_parse(ds, &dt) != ATTN_OK)
        return PyErr_Format(PyExc_ValueError, "%s", attn_last_error());
    if (lookup_backend(bn, &b) < 0) return NULL;
    const attn_platform *p;
    attn_platform_current(&p);
    attn_kv_layout_info li;
    attn_status st = attn_kv_layout_compute(b->desc, attn_kv_layout_resolve(b->desc, p, layout), nb,
                                            bs, kvh, hs, hsv, kv, dt, &li);
    if (st != ATTN_OK) return pyattn_raise(st, "kv layout failed");
    PyObject *shape = PyTuple_New(li.shape.ndim), *dims = PyTuple_New(li.shape.ndim);
    PyObject *strides = PyTuple_New(li.shape.ndim);
    for (int i = 0; shape && dims && strides && i < li.shape.ndim; i++) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(li.shape.dims[i]));
        PyTuple_SET_ITEM(dims, i, PyUnicode_FromString(li.shape.dim_names[i]));
        PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(li.strides[i]));
    }
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:s,s:s,s:L,s:K,s:K,s:O,s:O,s:N}", "shape", shape, "dim_names", dims,
        "strides", strides, "layout", attn_layout_name(li.layout), "elem", attn_elem_name(li.elem),
        "elems_per_layer", (long long)li.elems_per_layer, "bytes_per_layer",
        (unsigned long long)li.bytes_per_layer, "bytes_per_block",
        (unsigned long long)li.bytes_per_block, "has_v", li.has_v ? Py_True : Py_False, "writable",
        li.writable ? Py_True : Py_False, "view", view_dict(&li.view));
}

/* Parses a model dtype name (k/v/q element type). */
static int parse_dtype(const char *s, attn_dtype *d)
{
    if (attn_dtype_parse(s, d) == ATTN_OK) return 0;
    PyErr_Format(PyExc_ValueError, "%s", attn_last_error());
    return -1;
}

/* kv_write(storage, view, slot_mapping, k, v, dtype) */
static PyObject *py_kv_write(PyObject *self, PyObject *args)
{
    PyObject *storage, *vd, *slots, *k, *v;
    const char *ds;
    if (!PyArg_ParseTuple(args, "OO!OOOs", &storage, &PyDict_Type, &vd, &slots, &k, &v, &ds))
        return NULL;
    attn_dtype dt;
    attn_kv_view view;
    Py_buffer sb, slb, kb, vb;
    if (parse_dtype(ds, &dt) < 0 || view_from(vd, storage, true, &view, &sb) < 0) return NULL;
    PyObject *r = NULL;
    Py_ssize_t any1[1] = {-1};
    if (pyattn_get_buf(slots, "slot_mapping", K_I64, false, 1, any1, &slb) == 0) {
        Py_ssize_t T = slb.shape[0];
        Py_ssize_t ks[3] = {T, view.num_kv_heads, view.head_size};
        Py_ssize_t vs[3] = {T, view.num_kv_heads,
                            view.head_size_v ? view.head_size_v : view.head_size};
        buf_kind ek = pyattn_elem_kind(attn_dtype_elem(dt));
        if (pyattn_get_buf(k, "key", ek, false, 3, ks, &kb) == 0) {
            bool has_v = v != Py_None;
            if (!has_v || pyattn_get_buf(v, "value", ek, false, 3, vs, &vb) == 0) {
                attn_status st;
                Py_BEGIN_ALLOW_THREADS st = attn_kv_write(
                    &view, slb.buf, (int)T, kb.buf, has_v ? vb.buf : NULL, attn_dtype_elem(dt));
                Py_END_ALLOW_THREADS r =
                    st == ATTN_OK ? Py_NewRef(Py_None) : pyattn_raise(st, "kv write failed");
                if (has_v) pyattn_buf_release(&vb);
            }
            pyattn_buf_release(&kb);
        }
        pyattn_buf_release(&slb);
    }
    pyattn_buf_release(&sb);
    return r;
}

/* mla_write_latent(storage, view, slot_mapping, latent, k_rope, dtype) */
static PyObject *py_mla_write_latent(PyObject *self, PyObject *args)
{
    PyObject *storage, *vd, *slots, *lat, *rope;
    const char *ds;
    if (!PyArg_ParseTuple(args, "OO!OOOs", &storage, &PyDict_Type, &vd, &slots, &lat, &rope, &ds))
        return NULL;
    attn_dtype dt;
    attn_kv_view view;
    Py_buffer sb, slb, lb, rb;
    if (parse_dtype(ds, &dt) < 0 || view_from(vd, storage, true, &view, &sb) < 0) return NULL;
    PyObject *r = NULL;
    Py_ssize_t any1[1] = {-1};
    int lora = attn_mla_view_latent_dim(&view);
    if (pyattn_get_buf(slots, "slot_mapping", K_I64, false, 1, any1, &slb) == 0) {
        Py_ssize_t T = slb.shape[0];
        Py_ssize_t ls[2] = {T, lora}, rs[2] = {T, view.head_size - lora};
        buf_kind ek = pyattn_elem_kind(attn_dtype_elem(dt));
        if (pyattn_get_buf(lat, "latent", ek, false, 2, ls, &lb) == 0) {
            if (pyattn_get_buf(rope, "k_rope", ek, false, 2, rs, &rb) == 0) {
                attn_status st;
                Py_BEGIN_ALLOW_THREADS st =
                    attn_mla_write_latent(&view, slb.buf, (int)T, lb.buf, rb.buf, dt);
                Py_END_ALLOW_THREADS r =
                    st == ATTN_OK ? Py_NewRef(Py_None) : pyattn_raise(st, "latent write failed");
                pyattn_buf_release(&rb);
            }
            pyattn_buf_release(&lb);
        }
        pyattn_buf_release(&slb);
    }
    pyattn_buf_release(&sb);
    return r;
}

/* ---- kernels --------------------------------------------------------------------- */

/* A checked kernel handle (attn/kernel.h) and, for a backend with a device
 * of its own, an instance of that device: the caller's arrays stay host
 * memory and each call copies them in and out through the device's ops. */
typedef struct pyattn_kernel {
    const attn_backend *b;
    attn_kernel *k;
    attn_device *dev; /* NULL: the host device */
    attn_layer_params l;
    float *sinks, *alibi; /* owned copies */
} pyattn_kernel;

static void kernel_release(pyattn_kernel *k)
{
    attn_kernel_close(k->k);
    attn_device_close(k->dev);
    free(k->sinks);
    free(k->alibi);
    free(k);
}

static void kernel_free(PyObject *cap)
{
    pyattn_kernel *k = PyCapsule_GetPointer(cap, "libattn.kernel");
    if (k) kernel_release(k);
}

/* Optional [num_heads] float32 vector, copied. */
static int head_vector(PyObject *o, const char *name, int heads, float **out)
{
    *out = NULL;
    if (!o || o == Py_None) return 0;
    Py_buffer b;
    Py_ssize_t shape[1] = {heads};
    if (pyattn_get_buf(o, name, K_F32, false, 1, shape, &b) < 0) return -1;
    *out = malloc(sizeof(float) * (size_t)heads);
    if (*out) memcpy(*out, b.buf, sizeof(float) * (size_t)heads);
    pyattn_buf_release(&b);
    if (!*out) return PyErr_NoMemory(), -1;
    return 0;
}

/* d[key] as UTF-8 text when present: a TypeError names the key and the type
 * it got (no library call ran, so there is no library text to show). */
static int opt_name(PyObject *d, const char *key, const char **out)
{
    PyObject *v = PyDict_GetItemString(d, key);
    *out = NULL;
    if (!v) return 0;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %s", key, Py_TYPE(v)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(v);
    return *out ? 0 : -1;
}

static int layer_from(PyObject *d, attn_layer_params *l)
{
    memset(l, 0, sizeof *l);
    int64_t x[9];
    const char *keys[9] = {"num_heads",        "num_kv_heads",     "head_size",
                           "head_size_v",      "sliding_window",   "kv_lora_rank",
                           "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"};
    for (int i = 0; i < 9; i++) {
        if (i >= 3 && !PyDict_GetItemString(d, keys[i])) {
            x[i] = 0;
            continue;
        }
        if (dict_int(d, keys[i], i < 3 ? 1 : 0, 1 << 20, &x[i]) < 0) return -1;
    }
    l->num_heads = (int)x[0], l->num_kv_heads = (int)x[1], l->head_size = (int)x[2];
    l->head_size_v = (int)x[3], l->sliding_window = (int)x[4], l->kv_lora_rank = (int)x[5];
    l->qk_rope_head_dim = (int)x[6], l->qk_nope_head_dim = (int)x[7], l->v_head_dim = (int)x[8];
    if (dict_float(d, "scale", &l->scale) < 0 ||
        dict_float(d, "logits_soft_cap", &l->logits_soft_cap) < 0)
        return -1;
    const char *ds = dict_str(d, "dtype");
    if (!ds || parse_dtype(ds, &l->dtype) < 0) return -1;
    l->kv_cache_dtype = ATTN_KV_AUTO;
    const char *kv = NULL, *at = NULL;
    if (opt_name(d, "kv_cache_dtype", &kv) < 0 || opt_name(d, "attn_type", &at) < 0) return -1;
    /* each message is the parse's own, formatted right after it failed */
    if (kv && attn_kv_dtype_parse(kv, &l->kv_cache_dtype) != ATTN_OK) {
        PyErr_Format(PyExc_ValueError, "kv_cache_dtype: %s", attn_last_error());
        return -1;
    }
    if (at && attn_attn_type_parse(at, &l->attn_type) != ATTN_OK) {
        PyErr_Format(PyExc_ValueError, "attn_type: %s", attn_last_error());
        return -1;
    }
    return 0;
}

/* kernel(backend, layer, sinks=None, alibi_slopes=None) -> capsule */
static PyObject *py_kernel(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"backend", "layer", "sinks", "alibi_slopes", NULL};
    const char *bn;
    PyObject *ld, *sinks = NULL, *alibi = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!|OO", names, &bn, &PyDict_Type, &ld, &sinks,
                                     &alibi))
        return NULL;
    pyattn_kernel *k = calloc(1, sizeof *k);
    if (!k) return PyErr_NoMemory();
    if (lookup_backend(bn, &k->b) < 0 || layer_from(ld, &k->l) < 0 ||
        head_vector(sinks, "sinks", k->l.num_heads, &k->sinks) < 0 ||
        head_vector(alibi, "alibi_slopes", k->l.num_heads, &k->alibi) < 0)
        goto fail;
    k->l.sinks = k->sinks;
    k->l.alibi_slopes = k->alibi;
    attn_status st = ATTN_OK;
    attn_clear_error(); /* a plugin's create may fail without text: no stale one then */
    if (k->b->kernel && k->b->device) st = attn_device_open(k->b, NULL, &k->dev);
    /* the self-test gate: a backend whose test failed is refused here */
    if (st == ATTN_OK) st = attn_kernel_open(k->b, &k->l, k->dev, &k->k);
    if (st != ATTN_OK) {
        pyattn_raise(st, "kernel open failed");
        goto fail;
    }
    PyObject *cap = PyCapsule_New(k, "libattn.kernel", kernel_free);
    if (cap) return cap;
fail:
    kernel_release(k);
    return NULL;
}

/* The step's metadata arrays, held while the kernel runs. */
typedef struct step_bufs {
    Py_buffer qsl, seq, bt, enc;
    bool has_enc;
    attn_common_metadata cm;
} step_bufs;

static void step_release(step_bufs *s)
{
    pyattn_buf_release(&s->qsl);
    pyattn_buf_release(&s->seq);
    pyattn_buf_release(&s->bt);
    if (s->has_enc) pyattn_buf_release(&s->enc);
}

static int step_from(PyObject *qsl, PyObject *seq, PyObject *bt, PyObject *enc, int causal,
                     int block_size, Py_ssize_t tokens, step_bufs *s)
{
    memset(s, 0, sizeof *s);
    Py_ssize_t any1[1] = {-1}, any2[2] = {-1, -1};
    if (pyattn_get_buf(qsl, "query_start_loc", K_I32, false, 1, any1, &s->qsl) < 0) return -1;
    Py_ssize_t R = s->qsl.shape[0] - 1, rs[1] = {R < 0 ? 0 : R}, bs[2] = {R < 0 ? 0 : R, -1};
    if (R < 0) {
        pyattn_buf_release(&s->qsl);
        PyErr_SetString(PyExc_ValueError, "query_start_loc must have num_reqs + 1 >= 1 entries");
        return -1;
    }
    (void)any2;
    if (pyattn_get_buf(seq, "seq_lens", K_I32, false, 1, rs, &s->seq) < 0) goto f1;
    if (pyattn_get_buf(bt, "block_table", K_I32, false, 2, bs, &s->bt) < 0) goto f2;
    if (enc && enc != Py_None) {
        if (pyattn_get_buf(enc, "encoder_seq_lens", K_I32, false, 1, rs, &s->enc) < 0) goto f3;
        s->has_enc = true;
    }
    /* counts the C struct holds as int; the C check judges the values */
    if (R > ATTN_MAX_NUM_REQS || tokens > INT_MAX || s->bt.shape[1] > INT_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%zd requests (at most %d), %zd tokens or a block table row of %zd entries "
                     "(at most %d)",
                     R, ATTN_MAX_NUM_REQS, tokens, s->bt.shape[1], INT_MAX);
        goto f4;
    }
    const int32_t *q = s->qsl.buf, *sl = s->seq.buf;
    /* in 64 bits: hostile entries (INT_MIN after a positive one) are the
     * C check's to refuse, not an overflow here */
    int64_t maxq = 0;
    int maxs = 0;
    for (Py_ssize_t r = 0; r < R; r++) {
        int64_t d = (int64_t)q[r + 1] - q[r];
        if (d > maxq) maxq = d;
        if (sl[r] > maxs) maxs = sl[r];
    }
    if (maxq > INT_MAX) maxq = INT_MAX;
    s->cm = (attn_common_metadata){.query_start_loc = q,
                                   .seq_lens = sl,
                                   .num_reqs = (int)R,
                                   .num_actual_tokens = (int)tokens,
                                   .max_query_len = (int)maxq,
                                   .max_seq_len = maxs,
                                   .block_table = s->bt.buf,
                                   .block_table_stride = (int)s->bt.shape[1],
                                   .causal = causal != 0,
                                   .block_size = block_size,
                                   .encoder_seq_lens = s->has_enc ? s->enc.buf : NULL};
    return 0;
f4:
    if (s->has_enc) pyattn_buf_release(&s->enc);
f3:
    pyattn_buf_release(&s->bt);
f2:
    pyattn_buf_release(&s->seq);
f1:
    pyattn_buf_release(&s->qsl);
    return -1;
}

static pyattn_kernel *kernel_of(PyObject *cap)
{
    return PyCapsule_GetPointer(cap, "libattn.kernel");
}

/* Host memory of `bytes` into a fresh allocation of dev (*out NULL for none). */
static attn_status dev_up(attn_device *dev, const void *host, size_t bytes, void **out)
{
    *out = NULL;
    if (!host || !bytes) return ATTN_OK;
    attn_status st = attn_device_alloc(dev, bytes, ATTN_MEM_STEP, out);
    return st == ATTN_OK ? attn_device_copy_in(dev, *out, 0, host, bytes) : st;
}

/* One call on the kernel's own device: the view's storage, q, out and lse
 * copied in, the call, out and lse copied back (the caller's arrays stay
 * the truth). */
static attn_status forward_on_device(pyattn_kernel *k, attn_forward_args *a, attn_mla_args *m,
                                     size_t storage_bytes, size_t q_bytes, size_t out_bytes,
                                     size_t lse_bytes)
{
    attn_kv_view dv = a ? *a->kv : *m->kv;
    void *host_out = a ? a->out : m->out;
    float *host_lse = a ? a->lse : m->lse;
    void *q = NULL, *out = NULL, *lse = NULL, *cache = NULL;
    attn_status st = dev_up(k->dev, dv.data, storage_bytes, &cache);
    if (st == ATTN_OK) st = dev_up(k->dev, a ? a->q : m->q, q_bytes, &q);
    if (st == ATTN_OK) st = dev_up(k->dev, host_out, out_bytes, &out);
    if (st == ATTN_OK) st = dev_up(k->dev, host_lse, lse_bytes, &lse);
    dv.data = cache;
    dv.device = k->dev;
    if (st == ATTN_OK && a) {
        attn_forward_args c = *a;
        c.kv = &dv, c.q = q, c.out = out, c.lse = lse;
        st = attn_kernel_forward(k->k, &c);
    } else if (st == ATTN_OK) {
        attn_mla_args c = *m;
        c.kv = &dv, c.q = q, c.out = out, c.lse = lse;
        st = attn_kernel_forward_mqa(k->k, &c);
    }
    if (st == ATTN_OK) st = attn_device_copy_out(k->dev, host_out, out, 0, out_bytes);
    if (st == ATTN_OK && lse) st = attn_device_copy_out(k->dev, host_lse, lse, 0, lse_bytes);
    attn_device_free(k->dev, cache);
    attn_device_free(k->dev, q);
    attn_device_free(k->dev, out);
    attn_device_free(k->dev, lse);
    return st;
}

/* forward(kernel, q, out, storage, view, query_start_loc, seq_lens, block_table,
 *         causal=True, lse=None, encoder_seq_lens=None) */
static PyObject *py_forward(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kernel",           "q",        "out",         "storage", "view",
                            "query_start_loc",  "seq_lens", "block_table", "causal",  "lse",
                            "encoder_seq_lens", NULL};
    PyObject *cap, *q, *out, *storage, *vd, *qsl, *seq, *bt, *lse = Py_None, *enc = Py_None;
    int causal = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OOOO!OOO|pOO", names, &PyCapsule_Type, &cap, &q,
                                     &out, &storage, &PyDict_Type, &vd, &qsl, &seq, &bt, &causal,
                                     &lse, &enc))
        return NULL;
    pyattn_kernel *k = kernel_of(cap);
    if (!k) return NULL;
    const attn_layer_params *l = &k->l;
    const attn_layer_rows *rows = attn_kernel_rows(k->k);
    bool mla = attn_kernel_is_mla(k->k);
    /* MLA runs forward_mqa: absorbed queries in, latent outputs out */
    int dq = mla ? rows->mqa_q_dim : rows->q_dim;
    int dv = mla ? rows->mqa_out_dim : rows->out_dim;
    buf_kind ek = pyattn_elem_kind(attn_dtype_elem(l->dtype));
    Py_buffer qb, ob, lb, sb;
    Py_ssize_t qs[3] = {-1, l->num_heads, dq};
    if (pyattn_get_buf(q, "q", ek, false, 3, qs, &qb) < 0) return NULL;
    Py_ssize_t T = qb.shape[0], os[3] = {T, l->num_heads, dv}, ls[2] = {T, l->num_heads};
    PyObject *r = NULL;
    bool has_lse = lse != Py_None;
    if (pyattn_get_buf(out, "out", ek, true, 3, os, &ob) < 0) goto f1;
    if (has_lse && pyattn_get_buf(lse, "lse", K_F32, true, 2, ls, &lb) < 0) goto f2;
    attn_kv_view view;
    if (view_from(vd, storage, false, &view, &sb) < 0) goto f3;
    step_bufs s;
    if (step_from(qsl, seq, bt, enc, causal, view.block_size, T, &s) < 0) goto f4;
    attn_status st;
    attn_clear_error(); /* the failure text is this call's own, or pyattn_raise's default */
    attn_mla_args ma = {
        .common = &s.cm, .kv = &view, .q = qb.buf, .out = ob.buf, .lse = has_lse ? lb.buf : NULL};
    attn_forward_args fa = {
        .common = &s.cm, .q = qb.buf, .kv = &view, .out = ob.buf, .lse = has_lse ? lb.buf : NULL};
    if (k->dev && !attn_device_host_visible(k->dev)) {
        Py_BEGIN_ALLOW_THREADS st = forward_on_device(
            k, mla ? NULL : &fa, mla ? &ma : NULL, (size_t)sb.len, (size_t)qb.len,
            (size_t)ob.len, has_lse ? (size_t)lb.len : 0);
        Py_END_ALLOW_THREADS
    } else if (mla) {
        Py_BEGIN_ALLOW_THREADS st = attn_kernel_forward_mqa(k->k, &ma);
        Py_END_ALLOW_THREADS
    } else {
        Py_BEGIN_ALLOW_THREADS st = attn_kernel_forward(k->k, &fa);
        Py_END_ALLOW_THREADS
    }
    r = st == ATTN_OK ? Py_NewRef(Py_None) : pyattn_raise(st, "forward failed");
    step_release(&s);
f4:
    pyattn_buf_release(&sb);
f3:
    if (has_lse) pyattn_buf_release(&lb);
f2:
    pyattn_buf_release(&ob);
f1:
    pyattn_buf_release(&qb);
    return r;
}

static PyObject *py_kernel_info(PyObject *self, PyObject *args)
{
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O!", &PyCapsule_Type, &cap)) return NULL;
    pyattn_kernel *k = kernel_of(cap);
    if (!k) return NULL;
    return Py_BuildValue("{s:s,s:O,s:z,s:s}", "backend", attn_kernel_name(k->k), "is_mla",
                         attn_kernel_is_mla(k->k) ? Py_True : Py_False, "variant",
                         attn_kernel_variant(k->k), "device", attn_device_name(k->dev));
}

PyMethodDef pyattn_kernel_methods[] = {
    {"kv_layout", (PyCFunction)(void (*)(void))py_kv_layout, METH_VARARGS | METH_KEYWORDS,
     "kv_layout(backend, num_blocks, block_size, num_kv_heads, head_size, head_size_v=0, "
     "kv_cache_dtype='auto', dtype='bf16', layout='default') -> dict"},
    {"kv_write", py_kv_write, METH_VARARGS, "kv_write(storage, view, slots, k, v, dtype)"},
    {"mla_write_latent", py_mla_write_latent, METH_VARARGS,
     "mla_write_latent(storage, view, slots, latent, k_rope, dtype)"},
    {"kernel", (PyCFunction)(void (*)(void))py_kernel, METH_VARARGS | METH_KEYWORDS,
     "kernel(backend, layer, sinks=None, alibi_slopes=None) -> capsule"},
    {"kernel_info", py_kernel_info, METH_VARARGS, "kernel_info(capsule) -> dict"},
    {"forward", (PyCFunction)(void (*)(void))py_forward, METH_VARARGS | METH_KEYWORDS,
     "forward(kernel, q, out, storage, view, query_start_loc, seq_lens, block_table, "
     "causal=True, lse=None, encoder_seq_lens=None); MLA kernels run forward_mqa"},
    {NULL, NULL, 0, NULL}};
