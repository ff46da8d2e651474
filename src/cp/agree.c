/* attn_comm_agree: the startup agreement of named settings. Each rank's
 * fields travel as one record ("name\0value\0" pairs); the lengths go
 * first so the records can be padded to one size, then every rank holds
 * every record and builds the same verdict and the same message, so no rank
 * goes on alone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/comm.h"
#include "util/error.h"
#include "util/strbuf.h"

#define ATTN__AGREE_MAX_FIELDS 256
#define ATTN__AGREE_MAX_VALUE  4096
#define ATTN__AGREE_MAX_RECORD ((size_t)ATTN__AGREE_MAX_FIELDS * (ATTN__AGREE_MAX_VALUE + 64))
#define ATTN__AGREE_SHOW       200 /* characters of a value in the message */

typedef struct attn__rec {
    const char *name[ATTN__AGREE_MAX_FIELDS], *value[ATTN__AGREE_MAX_FIELDS];
    int n;
    bool ok;
} attn__rec;

static attn_status attn__agree_check_args(const attn_comm_field *fields, int n)
{
    if (n < 0 || n > ATTN__AGREE_MAX_FIELDS || (n && !fields))
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_comm_agree: %d fields (0..%d, non-NULL)", n,
                          ATTN__AGREE_MAX_FIELDS);
    for (int i = 0; i < n; i++) {
        if (!fields[i].name || !fields[i].value || !*fields[i].name ||
            strlen(fields[i].name) > 63 || strlen(fields[i].value) > ATTN__AGREE_MAX_VALUE)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "attn_comm_agree: field %d needs a name (1..63 bytes) and a value "
                              "(at most %d bytes)",
                              i, ATTN__AGREE_MAX_VALUE);
    }
    return ATTN_OK;
}

/* A record from another rank is parsed within its length, never trusted. */
static void attn__agree_parse(const char *rec, size_t len, attn__rec *out)
{
    out->n = 0;
    out->ok = true;
    size_t pos = 0;
    while (pos < len && out->ok) {
        const char *name = rec + pos, *nz = memchr(name, '\0', len - pos);
        const char *value = nz ? nz + 1 : NULL;
        const char *vz =
            value && value < rec + len ? memchr(value, '\0', len - (size_t)(value - rec)) : NULL;
        if (!vz || out->n == ATTN__AGREE_MAX_FIELDS) {
            out->ok = false;
            break;
        }
        out->name[out->n] = name;
        out->value[out->n++] = value;
        pos = (size_t)(vz - rec) + 1;
    }
}

static const char *attn__agree_value(const attn__rec *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->name[i], name) == 0) return r->value[i];
    return NULL;
}

static void attn__agree_put_value(attn__sb *sb, const char *v)
{
    if (!v) {
        attn__sb_puts(sb, "(none)");
        return;
    }
    size_t n = strlen(v);
    attn__sb_putc(sb, '\'');
    attn__sb_putn(sb, v, n > ATTN__AGREE_SHOW ? ATTN__AGREE_SHOW : n);
    attn__sb_puts(sb, n > ATTN__AGREE_SHOW ? "...'" : "'");
}

/* "name: rank 0 has 'a', rank 1 has 'b'" for a field the ranks differ on;
 * ranks holding the same value are listed together. */
static void attn__agree_describe(attn__sb *sb, const attn__rec *recs, int W, const char *name)
{
    attn__sb_printf(sb, "%s: ", name);
    bool *done = calloc((size_t)W, sizeof *done);
    bool first = true;
    for (int r = 0; r < W && done; r++) {
        if (done[r]) continue;
        const char *v = attn__agree_value(&recs[r], name);
        int count = 0;
        attn__sb_puts(sb, first ? "" : ", ");
        first = false;
        for (int q = r; q < W; q++) {
            const char *u = attn__agree_value(&recs[q], name);
            if (done[q] || !((!u && !v) || (u && v && strcmp(u, v) == 0))) continue;
            done[q] = true;
            if (count < 8) attn__sb_printf(sb, "%s%d", count ? "," : "rank ", q);
            count++;
        }
        if (count > 8) attn__sb_printf(sb, ",... (%d ranks)", count);
        attn__sb_puts(sb, " has ");
        attn__agree_put_value(sb, v);
    }
    free(done);
}

/* Fields in order of first appearance over ranks 0..W-1: the same list and
 * order on every rank. */
static attn_status attn__agree_verdict(const char *what, const attn__rec *recs, int W)
{
    attn__sb sb;
    attn__sb_init(&sb);
    int bad = 0;
    for (int r = 0; r < W; r++)
        if (!recs[r].ok) {
            attn__sb_printf(&sb, "%srank %d sent a malformed record", bad ? "; " : "", r);
            bad++;
        }
    bool malformed = bad > 0;
    for (int r = 0; r < W && !malformed; r++) {
        for (int i = 0; i < recs[r].n; i++) {
            const char *name = recs[r].name[i];
            bool seen = false, same = true;
            for (int q = 0; q < r && !seen; q++)
                seen = attn__agree_value(&recs[q], name) != NULL;
            const char *v = recs[r].value[i];
            for (int q = 0; q < W && !seen && same; q++) {
                const char *u = attn__agree_value(&recs[q], name);
                same = u && strcmp(u, v) == 0;
            }
            if (seen || same) continue;
            attn__sb_puts(&sb, bad ? "; " : "");
            attn__agree_describe(&sb, recs, W, name);
            bad++;
        }
    }
    if (!bad) {
        attn__sb_free(&sb);
        return ATTN_OK;
    }
    char *text = attn__sb_take(&sb);
    attn_status st = attn__fail(ATTN_INVALID_ARGUMENT, "%s differ between the ranks: %s", what,
                                text ? text : "(out of memory describing them)");
    free(text);
    return st;
}

static char *attn__agree_record(const attn_comm_field *fields, int n, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += strlen(fields[i].name) + strlen(fields[i].value) + 2;
    char *rec = malloc(total ? total : 1), *p = rec;
    for (int i = 0; rec && i < n; i++) {
        size_t a = strlen(fields[i].name) + 1, b = strlen(fields[i].value) + 1;
        memcpy(p, fields[i].name, a);
        memcpy(p + a, fields[i].value, b);
        p += a + b;
    }
    *len = total;
    return rec;
}

attn_status attn_comm_agree(attn_comm *c, const char *what, const attn_comm_field *fields, int n)
{
    ATTN__CHECK_NULL(c);
    attn_status st = attn__agree_check_args(fields, n);
    if (st != ATTN_OK) return st;
    if (!what) what = "settings";
    int W = attn_comm_size(c);
    size_t len = 0;
    char *mine = attn__agree_record(fields, n, &len);
    uint64_t mylen = len, *lens = calloc((size_t)W, sizeof *lens);
    char *all = NULL;
    attn__rec *recs = NULL;
    if (!mine || !lens) {
        st = attn__fail(ATTN_OUT_OF_MEMORY, "attn_comm_agree: out of memory");
        goto done;
    }
    st = attn_comm_exchange(c, ATTN_COMM_AGREE, &mylen, sizeof mylen, lens);
    if (st != ATTN_OK) goto done;
    uint64_t max = 0;
    for (int r = 0; r < W; r++)
        max = lens[r] > max ? lens[r] : max;
    /* every rank sees the same lengths, so all refuse together */
    if (max > ATTN__AGREE_MAX_RECORD) {
        st = attn__fail(ATTN_INVALID_ARGUMENT, "%s: a rank's record of %llu bytes is too large",
                        what, (unsigned long long)max);
        goto done;
    }
    char *padded = calloc(1, (size_t)max + 1);
    all = calloc((size_t)W, (size_t)max + 1);
    recs = calloc((size_t)W, sizeof *recs);
    if (!padded || !all || !recs) {
        free(padded);
        st = attn__fail(ATTN_OUT_OF_MEMORY, "attn_comm_agree: out of memory");
        goto done;
    }
    if (len) memcpy(padded, mine, len);
    st = attn_comm_exchange(c, ATTN_COMM_AGREE, padded, (size_t)max + 1, all);
    free(padded);
    if (st != ATTN_OK) goto done;
    for (int r = 0; r < W; r++)
        attn__agree_parse(all + (size_t)r * ((size_t)max + 1), (size_t)lens[r], &recs[r]);
    st = attn__agree_verdict(what, recs, W);
done:
    free(mine);
    free(lens);
    free(all);
    free(recs);
    return st;
}
