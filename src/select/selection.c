/* The selection object: its arena (every string a selection holds lives
 * here and dies with it), the message helpers the rules files use, and its
 * lifetime. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/selection.h"
#include "util/error.h"
#include "util/strbuf.h"

struct attn__arena_block {
    attn__arena_block *next;
    size_t used, cap;
    char data[];
};

void *attn__sel_alloc(attn_selection *s, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    attn__arena_block *b = s->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 3072 ? n : 3072;
        attn__arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) {
            s->oom = true;
            return NULL;
        }
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        s->arena = nb;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

const char *attn__sel_strdup(attn_selection *s, const char *text)
{
    size_t n = strlen(text);
    char *p = attn__sel_alloc(s, n + 1);
    if (!p) return "";
    memcpy(p, text, n + 1);
    return p;
}

static const char *attn__sel_vprintf(attn_selection *s, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return "";
    }
    if ((size_t)n < sizeof small) {
        va_end(ap2);
        return attn__sel_strdup(s, small);
    }
    char *p = attn__sel_alloc(s, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p ? p : "";
}

const char *attn__sel_printf(attn_selection *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *r = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    return r;
}

void attn__sel_warn(attn_selection *s, const char *fmt, ...)
{
    if (s->num_warnings >= ATTN__SEL_MAX_MESSAGES) return;
    va_list ap;
    va_start(ap, fmt);
    s->warnings[s->num_warnings++] = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
}

void attn__sel_note(attn_selection *s, const char *fmt, ...)
{
    if (s->num_notes >= ATTN__SEL_MAX_MESSAGES) return;
    va_list ap;
    va_start(ap, fmt);
    const char *text = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    for (int i = 0; i < s->num_notes; i++)
        if (!strcmp(s->notes[i], text)) return;
    s->notes[s->num_notes++] = text;
}

attn_status attn__sel_fail(attn_selection *s, attn_select_error kind, attn_status status,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s->message = attn__sel_vprintf(s, fmt, ap);
    va_end(ap);
    s->error = kind;
    s->status = status;
    s->chosen = -1;
    return status;
}

attn_status attn__sel_fail_sb(attn_selection *s, attn_select_error kind, attn_status status,
                              attn__sb *sb)
{
    if (sb->oom) s->oom = true;
    attn_status st = attn__sel_fail(s, kind, status, "%s", sb->data ? sb->data : "");
    attn__sb_free(sb);
    return st;
}

void attn__sel_choose(attn_selection *s, int i)
{
    s->chosen = i;
    s->status = ATTN_OK;
    s->error = ATTN_SELECT_OK;
    s->message = NULL;
}

attn_selection *attn__sel_new(const attn_platform *p, const attn_selector_config *cfg)
{
    attn_selection *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->platform = p;
    s->cfg = *cfg;
    s->chosen = -1;
    s->status = ATTN_INTERNAL;
    snprintf(s->platform_name, sizeof s->platform_name, "%s", p->name);
    snprintf(s->device_name, sizeof s->device_name, "%s", p->device_name);
    snprintf(s->gfx_arch, sizeof s->gfx_arch, "%s", p->gfx_arch);
    s->simulated = p->simulated;
    s->has_cc = p->has_cc;
    s->cc_major = p->cc_major;
    s->cc_minor = p->cc_minor;
    s->installed = p->installed;
    return s;
}

void attn_selection_free(attn_selection *s)
{
    if (!s) return;
    attn__arena_block *b = s->arena;
    while (b) {
        attn__arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(s);
}
