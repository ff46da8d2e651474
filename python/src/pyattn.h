/* Shared declarations of the libattn._core extension: a thin layer over the
 * public C API (attn/attn.h only). Python-facing policy (defaults, classes,
 * torch/numpy adaptation) lives in the libattn package; this layer turns
 * Python values into C structs, checks every buffer before a kernel sees it,
 * and turns statuses into exceptions. */
#ifndef PYATTN_H
#define PYATTN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

/* Method tables of the kernel half (kernels.c). */
extern PyMethodDef pyattn_kernel_methods[];

#endif
