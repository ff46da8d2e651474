/* The field readers every Hugging Face config reader of src/model uses
 * (hf_fields.c): each reads one named field of the text-model object, checks
 * its type and range, and fails with ATTN_PARSE_ERROR naming the field
 * ("<what>: field 'text_config.head_dim': ..."). JSON null counts as absent. */
#ifndef ATTN_MODEL_HF_READ_H
#define ATTN_MODEL_HF_READ_H

#include <stdbool.h>

#include "model/model_impl.h"
#include "util/json.h"

typedef struct attn__hf {
    const attn__json *root; /* top-level object */
    const attn__json *obj;  /* where the text-model fields are (root or text_config) */
    const char *prefix;     /* "" or "text_config." */
    const char *what;       /* input name for messages */
    attn_model *m;
} attn__hf;

attn_status attn__hf_error(const attn__hf *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records a default that was applied (shown by `attn models`). */
void attn__hf_note(attn_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const attn__json *attn__hf_field(const attn__hf *c, const char *key);
const char *attn__hf_type_name(const attn__json *v);
/* Absent: *present = false and ATTN_OK (out untouched). */
attn_status attn__hf_int(const attn__hf *c, const char *key, long long lo, long long hi,
                         long long *out, bool *present);
/* As attn__hf_int, but absent is an error naming the model_type. */
attn_status attn__hf_need_int(const attn__hf *c, const char *key, long long lo, long long hi,
                              long long *out);
attn_status attn__hf_num(const attn__hf *c, const char *key, double *out, bool *present);
attn_status attn__hf_bool(const attn__hf *c, const char *key, bool *out, bool *present);
/* Absent: *out = NULL. */
attn_status attn__hf_str(const attn__hf *c, const char *key, const char **out);
bool attn__hf_in_list(const char *s, const char *const *list);
/* The same reader one level down (prefix "rope_scaling.") or at the top. */
attn__hf attn__hf_sub(const attn__hf *c, const attn__json *obj, const char *prefix);
/* Refuses fields that change attention in ways libattn does not model. */
attn_status attn__hf_refuse_unmodelled(const attn__hf *c);
/* A model of `layers` specs that takes over the placeholder's name,
 * model_type, notes and dtype (c->m is left alone). */
attn_status attn__hf_model_alloc(const attn__hf *c, int layers, attn_model **out);

/* Family readers: replace c->m by the model read (hf_decoder.c, hf_config.c). */
attn_status attn__hf_read_decoder(attn__hf *c);

#endif
