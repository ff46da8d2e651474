/* Field readers of the Hugging Face config readers (see hf_read.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/hf_read.h"
#include "util/error.h"

attn_status attn__hf_error(const attn__hf *c, const char *field, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn__fail(ATTN_PARSE_ERROR, "%s: field '%s%s': %s", c->what, c->prefix, field, msg);
}

void attn__hf_note(attn_model *m, const char *fmt, ...)
{
    if (m->num_notes >= (int)(sizeof m->notes / sizeof m->notes[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->notes[m->num_notes++], sizeof m->notes[0], fmt, ap);
    va_end(ap);
}

/* Field lookup in c->obj; JSON null counts as absent (HF writes "head_dim": null). */
const attn__json *attn__hf_field(const attn__hf *c, const char *key)
{
    const attn__json *v = attn__json_get(c->obj, key);
    if (v && attn__json_type_of(v) == ATTN_JSON_NULL) return NULL;
    return v;
}

const char *attn__hf_type_name(const attn__json *v)
{
    return attn__json_type_name(attn__json_type_of(v));
}

/* Integer field. Absent: *present=false and ATTN_OK. */
attn_status attn__hf_int(const attn__hf *c, const char *key, long long lo, long long hi,
                         long long *out, bool *present)
{
    const attn__json *v = attn__hf_field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    long long x;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER)
        return attn__hf_error(c, key, "must be an integer, got %s", attn__hf_type_name(v));
    if (!attn__json_is_int(v, &x))
        return attn__hf_error(c, key, "must be an integer, got %g", attn__json_number(v));
    if (x < lo || x > hi)
        return attn__hf_error(c, key, "%lld is out of range [%lld, %lld]", x, lo, hi);
    *out = x;
    return ATTN_OK;
}

attn_status attn__hf_need_int(const attn__hf *c, const char *key, long long lo, long long hi,
                              long long *out)
{
    bool present;
    attn_status st = attn__hf_int(c, key, lo, hi, out, &present);
    if (st == ATTN_OK && !present)
        return attn__hf_error(c, key, "is missing (required for model_type '%s')",
                              c->m->model_type[0] ? c->m->model_type : "(none)");
    return st;
}

attn_status attn__hf_num(const attn__hf *c, const char *key, double *out, bool *present)
{
    const attn__json *v = attn__hf_field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER)
        return attn__hf_error(c, key, "must be a number, got %s", attn__hf_type_name(v));
    *out = attn__json_number(v);
    return ATTN_OK;
}

attn_status attn__hf_bool(const attn__hf *c, const char *key, bool *out, bool *present)
{
    const attn__json *v = attn__hf_field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_BOOL)
        return attn__hf_error(c, key, "must be true or false, got %s", attn__hf_type_name(v));
    *out = attn__json_bool(v);
    return ATTN_OK;
}

attn_status attn__hf_str(const attn__hf *c, const char *key, const char **out)
{
    const attn__json *v = attn__hf_field(c, key);
    *out = NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_STRING)
        return attn__hf_error(c, key, "must be a string, got %s", attn__hf_type_name(v));
    *out = attn__json_string(v);
    return ATTN_OK;
}

bool attn__hf_in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

attn__hf attn__hf_sub(const attn__hf *c, const attn__json *obj, const char *prefix)
{
    attn__hf s = *c;
    s.obj = obj;
    s.prefix = prefix;
    return s;
}

attn_status attn__hf_model_alloc(const attn__hf *c, int layers, attn_model **out)
{
    attn_model *m;
    attn_status st = attn__model_alloc(c->m->name, layers, &m);
    if (st != ATTN_OK) return st;
    memcpy(m->model_type, c->m->model_type, sizeof m->model_type);
    memcpy(m->notes, c->m->notes, sizeof m->notes);
    m->num_notes = c->m->num_notes;
    m->dtype = c->m->dtype;
    *out = m;
    return ATTN_OK;
}

/* Refuse fields that change attention in ways libattn does not model. */
attn_status attn__hf_refuse_unmodelled(const attn__hf *c)
{
    bool b = false, present;
    attn_status st;
    if ((st = attn__hf_bool(c, "alibi", &b, &present)) != ATTN_OK) return st;
    if (present && b) return attn__hf_error(c, "alibi", "ALiBi position biases are not supported");
    if ((st = attn__hf_bool(c, "use_alibi", &b, &present)) != ATTN_OK) return st;
    if (present && b)
        return attn__hf_error(c, "use_alibi", "ALiBi position biases are not supported");
    const char *pe = NULL;
    if ((st = attn__hf_str(c, "position_embedding_type", &pe)) != ATTN_OK) return st;
    if (pe && strcmp(pe, "absolute") != 0 && strcmp(pe, "rope") != 0)
        return attn__hf_error(c, "position_embedding_type", "'%s' is not supported (absolute only)",
                              pe);
    long long chunk;
    if ((st = attn__hf_int(c, "attention_chunk_size", 0, 1LL << 40, &chunk, &present)) != ATTN_OK)
        return st;
    if (present && chunk > 0)
        return attn__hf_error(c, "attention_chunk_size",
                              "chunked local attention is not supported");
    return ATTN_OK;
}
