/* Shared declarations of the libattn._core extension: a thin layer over the
 * public C API (attn/attn.h only). Python-facing policy (defaults, classes,
 * torch/numpy adaptation) lives in the libattn package; this layer turns
 * Python values into C structs, checks every buffer before a kernel sees it,
 * and turns statuses into exceptions. */
#ifndef PYATTN_H
#define PYATTN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include "attn/attn.h"
#include "attn/backend.h"

/* libattn._core.Error(status_name, message): a libattn call failed. */
extern PyObject *pyattn_error;

/* Raises Error for a failed status with attn_last_error() (or `what`). */
PyObject *pyattn_raise(attn_status st, const char *what);

/* Opens `spec` (NULL/None = the process-wide platform) and applies the
 * installed set (NULL = unchanged) and "k=v" settings. *owned is the
 * platform to free (NULL when it is the process-wide one). */
int pyattn_open_platform(PyObject *spec, PyObject *installed, PyObject *settings,
                         const attn_platform **p, attn_platform **owned);

/* What a buffer must hold (buffers.c). bf16 travels as 16-bit integers
 * (numpy has no bfloat16 format character); fp8 caches as bytes. */
typedef enum { K_F32, K_F16, K_BF16, K_U8, K_I32, K_I64 } buf_kind;
buf_kind pyattn_elem_kind(attn_elem e);
/* Gets and checks a buffer or torch tensor (whose dtype must be kind's when
 * by_dtype; pyattn_get_buf: always). ndim 0 = any number of dimensions;
 * shape entries -1 = any extent. Returns 0, or -1 with an exception
 * (nothing held). */
int pyattn_get_buf_as(PyObject *o, const char *name, buf_kind kind, bool writable, bool by_dtype,
                      int ndim, const Py_ssize_t *shape, Py_buffer *b);
int pyattn_get_buf(PyObject *o, const char *name, buf_kind kind, bool writable, int ndim,
                   const Py_ssize_t *shape, Py_buffer *b);

/* torch tensors read in place (buffers.c). A torch CPU tensor o is checked
 * for its device and element type (want: the package's element name, e.g.
 * "bf16", "int32"; NULL: any type libattn reads) and described in *b:
 * returns 1, or 0 when o is no torch tensor (nothing set), or -1 with an
 * exception (nothing held). Release with pyattn_buf_release, which also
 * releases ordinary buffers; pyattn_buf_contiguous replaces
 * PyBuffer_IsContiguous(b, 'C') for both. */
int pyattn_tensor_buf(PyObject *o, const char *name, const char *want, Py_buffer *b);
bool pyattn_buf_contiguous(const Py_buffer *b);
void pyattn_buf_release(Py_buffer *b);

/* Method tables of the kernel half (kernels.c). */
extern PyMethodDef pyattn_kernel_methods[];

#endif
