/* Buffers of the kernel calls: numpy arrays through the buffer protocol,
 * torch CPU tensors read in place, both checked the same way.
 *
 * Tensors need no numpy view per call.
 *
 * Making a numpy view of a tensor from Python (detach, view as int16 for
 * bf16, numpy()) costs about 10 us per tensor, which for a small decode is
 * more than the kernel (docs/perf/decode-overhead-issue18.md). Here a
 * tensor's pointer, element type and shape are read with a few attribute
 * lookups, and checked as the numpy path checks them. torch is never
 * imported from here: it is looked up in sys.modules, where it must be
 * for a tensor to exist. */
#include <stdio.h>
#include <string.h>

#include "pyattn.h"

/* The element types libattn reads, by torch name: the package's element
 * name (what a wrong dtype is called in errors) and the buffer format the
 * numpy path would have shown (bf16 travels as 16-bit ints, fp8 as bytes). */
static const struct {
    const char *torch, *name, *format;
    Py_ssize_t size;
} g_types[] = {
    {"float32", "fp32", "f", 4},      {"float16", "fp16", "e", 2},
    {"bfloat16", "bf16", "h", 2},     {"float8_e4m3fn", "uint8", "B", 1},
    {"float8_e5m2", "uint8", "B", 1}, {"uint8", "uint8", "B", 1},
    {"int8", "int8", "b", 1},         {"int16", "int16", "h", 2},
    {"int32", "int32", "i", 4},       {"int64", "int64", "q", 8},
    {"float64", "float64", "d", 8},
};
#define N_TYPES  ((int)(sizeof g_types / sizeof g_types[0]))
#define MAX_DIMS 8

static PyTypeObject *g_tensor; /* torch.Tensor, once torch is loaded */
static PyObject *g_strided;
static PyObject *g_dtype[N_TYPES]; /* NULL where this torch lacks one */
static PyObject *s_is_cpu, *s_dtype, *s_layout, *s_shape, *s_is_contiguous, *s_data_ptr, *s_is_neg,
    *s_device;

static int intern(PyObject **s, const char *text)
{
    if (!*s) *s = PyUnicode_InternFromString(text);
    return *s ? 0 : -1;
}

/* 1 when torch is loaded and its objects are cached, 0 when it is not
 * loaded, -1 with an exception. */
static int torch_ready(void)
{
    if (g_tensor) return 1;
    PyObject *name = PyUnicode_FromString("torch");
    if (!name) return -1;
    PyObject *torch = PyImport_GetModule(name);
    Py_DECREF(name);
    if (!torch) return PyErr_Occurred() ? -1 : 0;
    int rc = -1;
    PyObject *t = PyObject_GetAttrString(torch, "Tensor");
    if (!t || !PyType_Check(t)) goto out;
    g_strided = PyObject_GetAttrString(torch, "strided");
    if (!g_strided) goto out;
    for (int i = 0; i < N_TYPES; i++) {
        g_dtype[i] = PyObject_GetAttrString(torch, g_types[i].torch);
        if (!g_dtype[i]) PyErr_Clear();
    }
    if (intern(&s_is_cpu, "is_cpu") || intern(&s_dtype, "dtype") || intern(&s_layout, "layout") ||
        intern(&s_shape, "shape") || intern(&s_is_contiguous, "is_contiguous") ||
        intern(&s_data_ptr, "data_ptr") || intern(&s_is_neg, "is_neg") ||
        intern(&s_device, "device"))
        goto out;
    g_tensor = (PyTypeObject *)Py_NewRef(t);
    rc = 1;
out:
    Py_XDECREF(t);
    Py_DECREF(torch);
    return rc;
}

/* Calls a method without arguments and returns its truth (-1: exception). */
static int call_truth(PyObject *o, PyObject *method)
{
    PyObject *r = PyObject_CallMethodNoArgs(o, method);
    if (!r) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

static int type_index(PyObject *dtype)
{
    for (int i = 0; i < N_TYPES; i++)
        if (g_dtype[i] && dtype == g_dtype[i]) return i;
    return -1;
}

/* The dtype's name for errors: the package's name, else torch's without
 * the "torch." prefix. */
static PyObject *dtype_text(PyObject *dtype)
{
    int i = type_index(dtype);
    if (i >= 0) return PyUnicode_FromString(g_types[i].name);
    PyObject *s = PyObject_Str(dtype);
    if (s && PyUnicode_Check(s)) {
        PyObject *r = PyObject_CallMethod(s, "replace", "ss", "torch.", "");
        Py_DECREF(s);
        return r;
    }
    return s;
}

static int fail_device(PyObject *o, const char *name)
{
    PyObject *dev = PyObject_GetAttr(o, s_device);
    if (dev)
        PyErr_Format(PyExc_ValueError, "%s is on %S; libattn's kernels run on CPU tensors", name,
                     dev);
    Py_XDECREF(dev);
    return -1;
}

static int fill_shape(PyObject *o, const char *name, Py_buffer *b)
{
    PyObject *shape = PyObject_GetAttr(o, s_shape);
    if (!shape) return -1;
    PyObject *seq = PySequence_Fast(shape, "tensor shape is not a sequence");
    Py_DECREF(shape);
    if (!seq) return -1;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq), n = 1;
    if (nd > MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s has %zd dimensions (at most %d)", name, nd, MAX_DIMS);
        return -1;
    }
    b->shape = PyMem_Malloc(sizeof(Py_ssize_t) * MAX_DIMS);
    if (!b->shape) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (d < 0) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s has a negative extent", name);
            return -1;
        }
        b->shape[i] = d;
        n = d && n > PY_SSIZE_T_MAX / d ? -1 : n * d;
        if (n < 0) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "%s is too large", name);
            return -1;
        }
    }
    Py_DECREF(seq);
    b->ndim = (int)nd;
    b->len = n * b->itemsize;
    return 0;
}

/* Checked in the numpy path's order: device, element type, then (the
 * caller) dimensions, contiguity and shape. want: the package's element
 * name the caller requires (NULL: checked by format only). */
static int tensor_buf(PyObject *o, const char *name, const char *want, Py_buffer *b)
{
    PyObject *is_cpu = PyObject_GetAttr(o, s_is_cpu);
    if (!is_cpu) return -1;
    int cpu = PyObject_IsTrue(is_cpu);
    Py_DECREF(is_cpu);
    if (cpu < 0) return -1;
    if (!cpu) return fail_device(o, name);
    PyObject *dtype = PyObject_GetAttr(o, s_dtype);
    if (!dtype) return -1;
    int ti = type_index(dtype);
    if (want && (ti < 0 || strcmp(g_types[ti].name, want))) {
        PyObject *got = dtype_text(dtype);
        if (got) PyErr_Format(PyExc_TypeError, "%s has dtype %U, expected %s", name, got, want);
        Py_XDECREF(got);
        Py_DECREF(dtype);
        return -1;
    }
    if (ti < 0) {
        PyErr_Format(PyExc_TypeError, "%s has dtype %S, which libattn does not read", name, dtype);
        Py_DECREF(dtype);
        return -1;
    }
    Py_DECREF(dtype);
    PyObject *layout = PyObject_GetAttr(o, s_layout);
    if (!layout) return -1;
    Py_DECREF(layout);
    if (layout != g_strided)
        return PyErr_Format(PyExc_TypeError, "%s must be a dense (strided) tensor", name), -1;
    int neg = call_truth(o, s_is_neg);
    if (neg) {
        if (neg > 0)
            PyErr_Format(PyExc_ValueError, "%s has its negative bit set (call resolve_neg())",
                         name);
        return -1;
    }
    memset(b, 0, sizeof *b);
    b->internal = (void *)&g_tensor; /* ours: pyattn_buf_release frees the shape */
    b->itemsize = g_types[ti].size;
    b->format = (char *)g_types[ti].format;
    if (fill_shape(o, name, b) < 0) return pyattn_buf_release(b), -1;
    int contig = call_truth(o, s_is_contiguous);
    if (contig < 0) return pyattn_buf_release(b), -1;
    if (contig) {
        PyObject *p = PyObject_CallMethodNoArgs(o, s_data_ptr);
        b->buf = p ? PyLong_AsVoidPtr(p) : NULL;
        Py_XDECREF(p);
        if (PyErr_Occurred()) return pyattn_buf_release(b), -1;
    }
    b->readonly = 0;
    b->obj = Py_NewRef(o);
    b->suboffsets = NULL;
    b->strides = contig ? NULL : b->shape; /* non-NULL marks "not C-contiguous" */
    return 1;
}

int pyattn_tensor_buf(PyObject *o, const char *name, const char *want, Py_buffer *b)
{
    if (PyObject_CheckBuffer(o)) return 0;
    int ready = torch_ready();
    if (ready <= 0) return ready;
    if (!PyObject_TypeCheck(o, g_tensor)) return 0;
    return tensor_buf(o, name, want, b);
}

bool pyattn_buf_contiguous(const Py_buffer *b)
{
    if (b->internal == (void *)&g_tensor) return b->strides == NULL;
    return PyBuffer_IsContiguous(b, 'C');
}

void pyattn_buf_release(Py_buffer *b)
{
    if (b->internal == (void *)&g_tensor) {
        PyMem_Free(b->shape);
        b->shape = NULL;
        b->internal = NULL;
        Py_CLEAR(b->obj);
        return;
    }
    PyBuffer_Release(b);
}

/* ---- checked buffers ------------------------------------------------------------ */

static const char *const kind_names[] = {"float32", "float16", "bfloat16 (as 16-bit ints)",
                                         "uint8",   "int32",   "int64"};
/* the package's name of each kind, as a torch tensor's dtype must read */
static const char *const kind_dtypes[] = {"fp32", "fp16", "bf16", "uint8", "int32", "int64"};

buf_kind pyattn_elem_kind(attn_elem e)
{
    return e == ATTN_ELEM_F32    ? K_F32
           : e == ATTN_ELEM_F16  ? K_F16
           : e == ATTN_ELEM_BF16 ? K_BF16
                                 : K_U8;
}

static bool format_ok(const Py_buffer *b, buf_kind k)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (!f[0] || f[1]) return false;
    switch (k) {
    case K_F32: return *f == 'f' && b->itemsize == 4;
    case K_F16: return *f == 'e' && b->itemsize == 2;
    case K_BF16: return (*f == 'H' || *f == 'h') && b->itemsize == 2;
    case K_U8: return (*f == 'B' || *f == 'b') && b->itemsize == 1;
    case K_I32: return strchr("iIlL", *f) && b->itemsize == 4;
    case K_I64: return strchr("qQlLnN", *f) && b->itemsize == 8;
    }
    return false;
}

int pyattn_get_buf_as(PyObject *o, const char *name, buf_kind kind, bool writable, bool by_dtype,
                      int ndim, const Py_ssize_t *shape, Py_buffer *b)
{
    int t = pyattn_tensor_buf(o, name, by_dtype ? kind_dtypes[kind] : NULL, b);
    if (t < 0) return -1;
    if (!t && PyObject_GetBuffer(o, b, PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s must be a %sCPU array (numpy array or torch tensor), not %s", name,
                     writable ? "writable " : "", Py_TYPE(o)->tp_name);
        return -1;
    }
    const char *why = NULL;
    char text[160];
    if (!format_ok(b, kind)) {
        snprintf(text, sizeof text, "elements must be %s, got format '%s' of %zd bytes",
                 kind_names[kind], b->format ? b->format : "B", b->itemsize);
        why = text;
    } else if (ndim && b->ndim != ndim) {
        snprintf(text, sizeof text, "must have %d dimensions, got %d", ndim, b->ndim);
        why = text;
    } else if (!pyattn_buf_contiguous(b)) {
        why = "must be C-contiguous (make a contiguous copy first)";
    }
    for (int i = 0; !why && ndim && i < ndim; i++) {
        if (shape[i] >= 0 && b->shape[i] != shape[i]) {
            char want[96] = "", got[96] = "";
            for (int j = 0, o1 = 0, o2 = 0; j < ndim; j++) {
                o1 += shape[j] >= 0
                          ? snprintf(want + o1, sizeof want - (size_t)o1, "%s%zd", j ? ", " : "",
                                     shape[j])
                          : snprintf(want + o1, sizeof want - (size_t)o1, "%s*", j ? ", " : "");
                o2 += snprintf(got + o2, sizeof got - (size_t)o2, "%s%zd", j ? ", " : "",
                               b->shape[j]);
            }
            snprintf(text, sizeof text, "must have shape (%s), got (%s)", want, got);
            why = text;
        }
    }
    if (why) {
        PyErr_Format(PyExc_ValueError, "%s %s", name, why);
        pyattn_buf_release(b);
        return -1;
    }
    return 0;
}

int pyattn_get_buf(PyObject *o, const char *name, buf_kind kind, bool writable, int ndim,
                   const Py_ssize_t *shape, Py_buffer *b)
{
    return pyattn_get_buf_as(o, name, kind, writable, true, ndim, shape, b);
}
