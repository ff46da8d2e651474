/* libattn._core, first half: platforms, the registry, selection and model
 * configs. Every function returns plain Python data (dicts, lists, JSON
 * text); the package wraps it in classes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pyattn.h"

PyObject *pyattn_error;

PyObject *pyattn_raise(attn_status st, const char *what)
{
    const char *detail = attn_last_error();
    if (!detail || !*detail) detail = what ? what : attn_strerror(st);
    PyObject *args = Py_BuildValue("(ss)", attn_status_name(st), detail);
    if (args) {
        PyErr_SetObject(pyattn_error, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* d[key] = v, taking the reference to v (NULL v: the error stands). */
static int set_new(PyObject *d, const char *key, PyObject *v)
{
    if (!v) return -1;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

/* A str argument or None (-> NULL). */
static int opt_str(PyObject *o, const char *name, const char **out)
{
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str or None, not %s", name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(o);
    return *out ? 0 : -1;
}

int pyattn_open_platform(PyObject *spec, PyObject *installed, PyObject *settings,
                         const attn_platform **p, attn_platform **owned)
{
    const char *s, *inst;
    *p = NULL;
    *owned = NULL;
    if (opt_str(spec, "machine", &s) < 0 || opt_str(installed, "installed", &inst) < 0) return -1;
    bool has_settings = settings && settings != Py_None && PyObject_Length(settings) > 0;
    if (!s) {
        if (inst || has_settings) {
            PyErr_SetString(PyExc_ValueError,
                            "installed= and settings= apply to a simulated machine: pass machine=");
            return -1;
        }
        attn_status st = attn_platform_current(p);
        if (st != ATTN_OK) return pyattn_raise(st, "no platform"), -1;
        return 0;
    }
    attn_status st = attn_platform_open(s, owned);
    if (st != ATTN_OK) return pyattn_raise(st, "cannot open machine"), -1;
    if (inst) st = attn_platform_set_installed(*owned, inst);
    Py_ssize_t n = has_settings ? PySequence_Length(settings) : 0;
    for (Py_ssize_t i = 0; st == ATTN_OK && i < n; i++) {
        PyObject *item = PySequence_GetItem(settings, i);
        const char *kv = NULL;
        int bad = item ? opt_str(item, "setting", &kv) : -1;
        if (!bad && kv) st = attn_platform_set_setting(*owned, kv);
        Py_XDECREF(item);
        if (bad) {
            attn_platform_free(*owned);
            *owned = NULL;
            return -1;
        }
    }
    if (st != ATTN_OK) {
        pyattn_raise(st, "bad machine option");
        attn_platform_free(*owned);
        *owned = NULL;
        return -1;
    }
    *p = *owned;
    return 0;
}

/* Takes ownership of a malloc'd JSON string. */
static PyObject *json_text(attn_status st, char *text)
{
    if (st != ATTN_OK) return pyattn_raise(st, "JSON output failed");
    PyObject *r = PyUnicode_FromString(text ? text : "");
    free(text);
    return r;
}

static PyObject *py_platform_json(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"machine", "installed", "settings", NULL};
    PyObject *spec = NULL, *inst = NULL, *set = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO", names, &spec, &inst, &set)) return NULL;
    const attn_platform *p;
    attn_platform *owned;
    if (pyattn_open_platform(spec, inst, set, &p, &owned) < 0) return NULL;
    char *text = NULL;
    attn_status st = attn_platform_to_json(p, &text);
    attn_platform_free(owned);
    return json_text(st, text);
}

static PyObject *py_catalog(PyObject *self, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < attn_catalog_count(); i++) {
        PyObject *t = Py_BuildValue("(ss)", attn_catalog_name(i), attn_catalog_description(i));
        if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

static PyObject *py_registry_names(PyObject *self, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < attn_registry_count(); i++) {
        PyObject *s = PyUnicode_FromString(attn_registry_name(i));
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

/* Appends the names of the set bits of mask (name table f, count n). */
static PyObject *mask_names(uint64_t mask, int n, const char *(*f)(int))
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        if (!((mask >> i) & 1u)) continue;
        PyObject *s = PyUnicode_FromString(f(i));
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}
static const char *dtype_name_i(int i)
{
    return attn_dtype_name((attn_dtype)i);
}
static const char *kv_name_i(int i)
{
    return attn_kv_dtype_name((attn_kv_dtype)i);
}
static const char *type_name_i(int i)
{
    return attn_attn_type_name((attn_attn_type)i);
}

static PyObject *desc_dict(const attn_backend *b)
{
    const attn_backend_desc *d = b->desc;
    const char *variant = b->kernel && b->kernel->variant ? b->kernel->variant() : NULL;
    PyObject *blocks = PyList_New(0);
    for (int i = 0; blocks && i < d->n_block_sizes; i++) {
        PyObject *v = PyLong_FromLong(d->block_sizes[i]);
        if (!v || PyList_Append(blocks, v) < 0) Py_CLEAR(blocks);
        Py_XDECREF(v);
    }
    PyObject *sizes = PyList_New(0);
    for (int i = 0; sizes && i < d->heads.n_sizes; i++) {
        PyObject *v = PyLong_FromLong(d->heads.sizes[i]);
        if (!v || PyList_Append(sizes, v) < 0) Py_CLEAR(sizes);
        Py_XDECREF(v);
    }
    PyObject *heads =
        sizes ? Py_BuildValue("{s:N,s:i,s:i,s:i,s:O}", "sizes", sizes, "min", d->heads.min, "max",
                              d->heads.max, "multiple_of", d->heads.multiple_of, "dynamic",
                              d->supports_head_size ? Py_True : Py_False)
              : NULL;
    uint32_t dt =
        d->dtypes ? d->dtypes : (ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16));
    return Py_BuildValue(
        "{s:s,s:s,s:s,s:N,s:N,s:N,s:N,s:N,s:O,s:O,s:O,s:O,s:O,s:s,s:O,s:O,s:O,s:z}", "name",
        d->name, "display_name", d->display_name ? d->display_name : d->name, "platforms",
        d->platforms ? d->platforms : "", "dtypes", mask_names(dt, ATTN_DTYPE_COUNT, dtype_name_i),
        "kv_cache_dtypes", mask_names(d->kv_dtypes, ATTN_KV_COUNT, kv_name_i), "attn_types",
        mask_names(d->attn_types, ATTN_TYPE_COUNT, type_name_i), "block_sizes", blocks,
        "head_sizes", heads, "is_mla", d->is_mla ? Py_True : Py_False, "is_sparse",
        d->is_sparse ? Py_True : Py_False, "supports_sink", d->supports_sink ? Py_True : Py_False,
        "supports_non_causal", d->supports_non_causal ? Py_True : Py_False, "has_kernel",
        b->kernel ? Py_True : Py_False, "cudagraph_support", attn_cg_support_name(d->cg_support),
        "can_return_lse_for_decode", d->can_return_lse_for_decode ? Py_True : Py_False,
        "supports_pcp", d->supports_pcp ? Py_True : Py_False, "supports_dcp",
        d->supports_dcp ? Py_True : Py_False, "variant", variant);
}

/* backends(machine, installed, settings) -> [{name, locator, resolved, error | desc...}] */
static PyObject *py_backends(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"machine", "installed", "settings", NULL};
    PyObject *spec = NULL, *inst = NULL, *set = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO", names, &spec, &inst, &set)) return NULL;
    const attn_platform *p;
    attn_platform *owned;
    if (pyattn_open_platform(spec, inst, set, &p, &owned) < 0) return NULL;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < attn_registry_count(); i++) {
        const char *name = attn_registry_name(i), *loc = NULL;
        const attn_backend *b = NULL;
        PyObject *d;
        if (attn_registry_get_locator(name, &loc) != ATTN_OK) loc = NULL;
        attn_status st = attn_backend_resolve(p, name, &b);
        if (st == ATTN_OK) {
            d = desc_dict(b);
            if (d && set_new(d, "name", PyUnicode_FromString(name)) < 0) Py_CLEAR(d);
        } else {
            d = Py_BuildValue("{s:s,s:s}", "name", name, "error", attn_last_error());
        }
        if (d && (set_new(d, "locator", loc ? PyUnicode_FromString(loc) : Py_NewRef(Py_None)) < 0 ||
                  PyDict_SetItemString(d, "resolved", st == ATTN_OK ? Py_True : Py_False) < 0))
            Py_CLEAR(d);
        if (!d || PyList_Append(list, d) < 0) Py_CLEAR(list);
        Py_XDECREF(d);
    }
    attn_platform_free(owned);
    return list;
}

/* ---- selector configuration from a dict ------------------------------------ */

/* The fields are the library's one table (attn_selector_config_field);
 * Python keeps only its own type checks and error types. */
static int set_field(attn_selector_config *cfg, const attn_config_field *f, PyObject *v)
{
    char num[32];
    const char *text = NULL;
    if (f->type == ATTN_FIELD_BOOL) {
        if (!PyBool_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s must be a bool", f->name);
            return -1;
        }
        text = v == Py_True ? "true" : "false";
    } else if (f->type == ATTN_FIELD_INT || f->type == ATTN_FIELD_OPT_INT) {
        long n = v == Py_None ? 0 : PyLong_AsLong(v);
        if (n == -1 && PyErr_Occurred()) return -1;
        if (n < 0 || n > (1 << 20)) {
            PyErr_Format(PyExc_ValueError, "%s must be between 0 and %d, got %ld", f->name, 1 << 20,
                         n);
            return -1;
        }
        snprintf(num, sizeof num, "%ld", n);
        text = num;
    } else if (!((f->type == ATTN_FIELD_KV_DTYPE || f->type == ATTN_FIELD_RUN_KV_DTYPE) &&
                 v == Py_None)) {
        if (opt_str(v, f->name, &text) < 0) return -1;
        if (!text) {
            PyErr_Format(PyExc_TypeError, "%s must be a str", f->name);
            return -1;
        }
    }
    if (attn_selector_config_set(cfg, f->name, text) != ATTN_OK) {
        PyErr_Format(PyExc_ValueError, "%s: %s", f->name, attn_last_error());
        return -1;
    }
    return 0;
}

static int config_from_dict(PyObject *d, attn_selector_config *cfg)
{
    attn_selector_config_init(cfg);
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "config must be a dict");
        return -1;
    }
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &val)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        const attn_config_field *f = k ? attn_selector_config_field_find(k) : NULL;
        if (!f) {
            PyErr_Format(PyExc_TypeError, "unknown selector config field %R", key);
            return -1;
        }
        if (set_field(cfg, f, val) < 0) return -1;
    }
    return 0;
}

/* The config as a dict, one entry per field of the table. */
static PyObject *config_dict(const attn_selector_config *c)
{
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < attn_selector_config_num_fields(); i++) {
        const attn_config_field *f = attn_selector_config_field(i);
        const char *base = (const char *)c + f->offset;
        PyObject *v = NULL;
        switch (f->type) {
        case ATTN_FIELD_BOOL: v = PyBool_FromLong(*(const bool *)base); break;
        case ATTN_FIELD_INT:
        case ATTN_FIELD_OPT_INT: v = PyLong_FromLong(*(const int *)base); break;
        case ATTN_FIELD_DTYPE:
            v = PyUnicode_FromString(attn_dtype_name(*(const attn_dtype *)base));
            break;
        case ATTN_FIELD_KV_DTYPE:
            v = PyUnicode_FromString(attn_kv_dtype_name(*(const attn_kv_dtype *)base));
            break;
        case ATTN_FIELD_RUN_KV_DTYPE: /* unset (the layer's) is None, as the keyword takes it */
            if (*(const attn_kv_dtype *)base == ATTN_KV_NONE)
                v = Py_NewRef(Py_None);
            else
                v = PyUnicode_FromString(attn_kv_dtype_name(*(const attn_kv_dtype *)base));
            break;
        case ATTN_FIELD_ATTN_TYPE:
            v = PyUnicode_FromString(attn_attn_type_name(*(const attn_attn_type *)base));
            break;
        }
        if (!v || PyDict_SetItemString(d, f->name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *py_config_fields(PyObject *self, PyObject *unused)
{
    int n = attn_selector_config_num_fields();
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, PyUnicode_FromString(attn_selector_config_field(i)->name));
    return t;
}

/* ---- selection ------------------------------------------------------------- */

static PyObject *str_list(int n, const attn_selection *s,
                          const char *(*get)(const attn_selection *, int))
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        PyObject *v = PyUnicode_FromString(get(s, i));
        if (!v || PyList_Append(list, v) < 0) Py_CLEAR(list);
        Py_XDECREF(v);
    }
    return list;
}

static PyObject *candidates_list(const attn_selection *s)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < attn_selection_num_candidates(s); i++) {
        attn_candidate_info ci;
        if (attn_selection_candidate(s, i, &ci) != ATTN_OK) continue;
        PyObject *reasons = PyList_New(0);
        for (int j = 0; reasons && j < ci.num_reasons; j++) {
            PyObject *r = PyUnicode_FromString(attn_selection_reason(s, i, j));
            if (!r || PyList_Append(reasons, r) < 0) Py_CLEAR(reasons);
            Py_XDECREF(r);
        }
        PyObject *c = reasons ? Py_BuildValue("(siON)", ci.name, ci.priority,
                                              ci.valid ? Py_True : Py_False, reasons)
                              : NULL;
        if (!c || PyList_Append(list, c) < 0) Py_CLEAR(list);
        Py_XDECREF(c);
    }
    return list;
}

static PyObject *selection_dict(attn_status st, const attn_selection *s)
{
    char *json = NULL, *explain = NULL;
    if (attn_selection_to_json(s, &json) != ATTN_OK) json = NULL;
    if (attn_selection_explain(s, &explain) != ATTN_OK) explain = NULL;
    PyObject *d = Py_BuildValue(
        "{s:s,s:z,s:z,s:z,s:z,s:z,s:N,s:N,s:N,s:N,s:z,s:z}", "status", attn_status_name(st),
        "backend", attn_selection_backend(s), "locator", attn_selection_locator(s), "requested",
        attn_selection_requested(s), "error",
        st == ATTN_OK ? NULL : attn_select_error_name(attn_selection_error(s)), "message",
        attn_selection_message(s), "candidates", candidates_list(s), "warnings",
        str_list(attn_selection_num_warnings(s), s, attn_selection_warning), "notes",
        str_list(attn_selection_num_notes(s), s, attn_selection_note), "config",
        config_dict(attn_selection_config(s)), "json", json, "explain", explain);
    free(json);
    free(explain);
    return d;
}

/* select(config, backend=None, machine=None, installed=None, settings=()) -> dict */
static PyObject *py_select(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"config", "backend", "machine", "installed", "settings", NULL};
    PyObject *cfgd, *req = NULL, *spec = NULL, *inst = NULL, *set = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOO", names, &cfgd, &req, &spec, &inst, &set))
        return NULL;
    attn_selector_config cfg;
    const char *requested;
    if (config_from_dict(cfgd, &cfg) < 0 || opt_str(req, "backend", &requested) < 0) return NULL;
    const attn_platform *p;
    attn_platform *owned;
    if (pyattn_open_platform(spec, inst, set, &p, &owned) < 0) return NULL;
    attn_selection *s = NULL;
    attn_status st = attn_select_uncached(p, requested, &cfg, &s);
    PyObject *r = s ? selection_dict(st, s) : pyattn_raise(st, "selection failed");
    attn_selection_free(s);
    attn_platform_free(owned);
    return r;
}

/* ---- models ------------------------------------------------------------------ */

static void model_capsule_free(PyObject *cap)
{
    attn_model_free(PyCapsule_GetPointer(cap, "libattn.model"));
}

static PyObject *py_model_load(PyObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    attn_model *m = NULL;
    attn_status st = attn_model_load(name, &m);
    if (st != ATTN_OK) return pyattn_raise(st, "cannot load model");
    PyObject *cap = PyCapsule_New(m, "libattn.model", model_capsule_free);
    if (!cap) attn_model_free(m);
    return cap;
}

static PyObject *py_model_from_json(PyObject *self, PyObject *args)
{
    const char *json, *name;
    if (!PyArg_ParseTuple(args, "ss", &json, &name)) return NULL;
    attn_model *m = NULL;
    attn_status st = attn_model_from_json(json, name, &m);
    if (st != ATTN_OK) return pyattn_raise(st, "cannot read model config");
    PyObject *cap = PyCapsule_New(m, "libattn.model", model_capsule_free);
    if (!cap) attn_model_free(m);
    return cap;
}

static PyObject *spec_dict(const attn_layer_spec *s)
{
    return Py_BuildValue(
        "{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:d,s:O,s:O,s:O,s:i,s:i,s:i,s:i,s:i,s:O,s:O}", "kind",
        attn_layer_spec_kind(s), "attn_type", attn_attn_type_name(s->attn_type), "num_heads",
        s->num_heads, "num_kv_heads", s->num_kv_heads, "head_size", s->head_size, "head_size_v",
        s->head_size_v ? s->head_size_v : s->head_size, "sliding_window", s->sliding_window,
        "logits_soft_cap", (double)s->logits_soft_cap, "has_sink", s->has_sink ? Py_True : Py_False,
        "use_mla", s->use_mla ? Py_True : Py_False, "use_sparse",
        s->use_sparse ? Py_True : Py_False, "kv_lora_rank", s->kv_lora_rank, "qk_rope_head_dim",
        s->qk_rope_head_dim, "qk_nope_head_dim", s->qk_nope_head_dim, "v_head_dim", s->v_head_dim,
        "index_topk", s->index_topk, "use_mm_prefix", s->use_mm_prefix ? Py_True : Py_False,
        "has_kv_cache", attn_layer_spec_has_kv_cache(s) ? Py_True : Py_False);
}

static PyObject *py_model_info(PyObject *self, PyObject *args)
{
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O!", &PyCapsule_Type, &cap)) return NULL;
    const attn_model *m = PyCapsule_GetPointer(cap, "libattn.model");
    if (!m) return NULL;
    PyObject *layers = PyList_New(0), *groups = PyList_New(0), *notes = PyList_New(0);
    for (int i = 0; layers && i < attn_model_num_layers(m); i++) {
        PyObject *d = spec_dict(attn_model_layer(m, i));
        if (d && (set_new(d, "name", PyUnicode_FromString(attn_model_layer_name(m, i))) < 0 ||
                  set_new(d, "group", PyLong_FromLong(attn_model_layer_group(m, i))) < 0))
            Py_CLEAR(d);
        if (!d || PyList_Append(layers, d) < 0) Py_CLEAR(layers);
        Py_XDECREF(d);
    }
    for (int g = 0; groups && g < attn_model_num_groups(m); g++) {
        const int *ids = NULL;
        int n = attn_model_group_layers(m, g, &ids);
        PyObject *idl = PyList_New(n);
        for (int j = 0; idl && j < n; j++)
            PyList_SET_ITEM(idl, j, PyLong_FromLong(ids[j]));
        PyObject *d = idl ? Py_BuildValue("{s:N,s:N}", "layers", idl, "spec",
                                          spec_dict(attn_model_group_spec(m, g)))
                          : NULL;
        if (!d || PyList_Append(groups, d) < 0) Py_CLEAR(groups);
        Py_XDECREF(d);
    }
    for (int i = 0; notes && i < attn_model_num_notes(m); i++) {
        PyObject *s = PyUnicode_FromString(attn_model_note(m, i));
        if (!s || PyList_Append(notes, s) < 0) Py_CLEAR(notes);
        Py_XDECREF(s);
    }
    char *json = NULL;
    if (attn_model_to_json(m, &json) != ATTN_OK) json = NULL;
    PyObject *r = NULL;
    if (layers && groups && notes)
        r = Py_BuildValue("{s:s,s:s,s:s,s:s,s:O,s:O,s:O,s:z}", "name", attn_model_name(m),
                          "model_type", attn_model_type(m), "source", attn_model_source(m), "dtype",
                          attn_dtype_name(attn_model_dtype(m)), "layers", layers, "groups", groups,
                          "notes", notes, "json", json);
    free(json);
    Py_XDECREF(layers);
    Py_XDECREF(groups);
    Py_XDECREF(notes);
    return r;
}

/* model_group_config(model, group, kv_cache_dtype, block_size) -> config dict */
static PyObject *py_model_group_config(PyObject *self, PyObject *args)
{
    PyObject *cap;
    int group, block;
    const char *kvs;
    if (!PyArg_ParseTuple(args, "O!isi", &PyCapsule_Type, &cap, &group, &kvs, &block)) return NULL;
    const attn_model *m = PyCapsule_GetPointer(cap, "libattn.model");
    if (!m) return NULL;
    if (group < 0 || group >= attn_model_num_groups(m))
        return PyErr_Format(PyExc_IndexError, "group %d out of range (the model has %d)", group,
                            attn_model_num_groups(m));
    attn_kv_dtype kv;
    if (attn_kv_dtype_parse(kvs, &kv) != ATTN_OK)
        return PyErr_Format(PyExc_ValueError, "%s", attn_last_error());
    if (block < 0) return PyErr_Format(PyExc_ValueError, "block_size must be >= 0");
    attn_selector_config cfg;
    attn_model_selector_config(m, attn_model_group_spec(m, group), kv, block, &cfg);
    return config_dict(&cfg);
}

static PyObject *py_model_presets(PyObject *self, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < attn_model_preset_count(); i++) {
        PyObject *s = PyUnicode_FromString(attn_model_preset_name(i));
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

static PyObject *py_cpu_features(PyObject *self, PyObject *unused)
{
    const attn_cpu_info *ci = attn_cpu_info_get();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < ATTN_CPU_FEATURE_COUNT; i++) {
        if (!((ci->usable >> i) & 1u)) continue;
        PyObject *s = PyUnicode_FromString(attn_cpu_feature_name((attn_cpu_feature)i));
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

static PyMethodDef core_methods[] = {
    {"platform_json", (PyCFunction)(void (*)(void))py_platform_json, METH_VARARGS | METH_KEYWORDS,
     "platform_json(machine=None, installed=None, settings=()) -> str"},
    {"catalog", py_catalog, METH_NOARGS, "catalog() -> [(name, description)]"},
    {"registry_names", py_registry_names, METH_NOARGS, "registry_names() -> [str]"},
    {"backends", (PyCFunction)(void (*)(void))py_backends, METH_VARARGS | METH_KEYWORDS,
     "backends(machine=None, installed=None, settings=()) -> [dict]"},
    {"config_fields", py_config_fields, METH_NOARGS, "config_fields() -> tuple of field names"},
    {"select", (PyCFunction)(void (*)(void))py_select, METH_VARARGS | METH_KEYWORDS,
     "select(config, backend=None, machine=None, installed=None, settings=()) -> dict"},
    {"model_load", py_model_load, METH_VARARGS, "model_load(name_or_path) -> capsule"},
    {"model_from_json", py_model_from_json, METH_VARARGS, "model_from_json(text, name)"},
    {"model_info", py_model_info, METH_VARARGS, "model_info(capsule) -> dict"},
    {"model_group_config", py_model_group_config, METH_VARARGS,
     "model_group_config(capsule, group, kv_cache_dtype, block_size) -> dict"},
    {"model_presets", py_model_presets, METH_NOARGS, "model_presets() -> [str]"},
    {"cpu_features", py_cpu_features, METH_NOARGS, "cpu_features() -> [str] (usable)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT,
                                         "libattn._core",
                                         "libattn's C API, as plain Python data.",
                                         -1,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};

PyMODINIT_FUNC PyInit__core(void);
PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&core_module);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, core_methods) < 0 ||
        PyModule_AddFunctions(m, pyattn_kernel_methods) < 0)
        goto fail;
    pyattn_error = PyErr_NewExceptionWithDoc(
        "libattn._core.Error", "A libattn call failed: args are (status, message).", NULL, NULL);
    if (!pyattn_error || PyModule_AddObjectRef(m, "Error", pyattn_error) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
