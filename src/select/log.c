/* Logging of a new selection: warnings, the debug list of rejected
 * backends, and "Using X backend." once per distinct line per process. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/log.h"
#include "select/selection.h"
#include "util/error.h"
#include "util/strbuf.h"

typedef struct attn__logged {
    struct attn__logged *next;
    char text[];
} attn__logged;
static attn__logged *attn__logged_lines;
static pthread_mutex_t attn__logged_mu = PTHREAD_MUTEX_INITIALIZER;

static void attn__log_once(attn_log_level level, const char *text)
{
    pthread_mutex_lock(&attn__logged_mu);
    for (attn__logged *l = attn__logged_lines; l; l = l->next) {
        if (!strcmp(l->text, text)) {
            pthread_mutex_unlock(&attn__logged_mu);
            return;
        }
    }
    size_t n = strlen(text);
    attn__logged *l = malloc(sizeof *l + n + 1);
    if (l) {
        memcpy(l->text, text, n + 1);
        l->next = attn__logged_lines;
        attn__logged_lines = l;
    }
    pthread_mutex_unlock(&attn__logged_mu);
    attn_log(level, "%s", text);
}

void attn__sel_log(const attn_selection *s)
{
    for (int i = 0; i < s->num_warnings; i++)
        attn_log(ATTN_LOG_WARN, "%s", s->warnings[i]);
    if (s->status != ATTN_OK) return;
    if (attn_log_get_level() >= ATTN_LOG_DEBUG) {
        attn__sb sb;
        attn__sb_init(&sb);
        bool any = false;
        for (int i = 0; i < s->num_candidates; i++)
            any = any || !s->candidates[i].valid;
        if (any) {
            char repr[1024];
            attn_selector_config_repr(&s->cfg, repr, sizeof repr);
            attn__sb_printf(&sb, "Some attention backends are not valid for %s with %s. Reasons: ",
                            s->device_family, repr);
            attn__put_reasons_dict(&sb, s);
            attn__sb_putc(&sb, '.');
            if (sb.data) attn__log_once(ATTN_LOG_DEBUG, sb.data);
        }
        attn__sb_free(&sb);
    }
    if (!s->requested && attn_log_get_level() >= ATTN_LOG_DEBUG) {
        /* vLLM's CUDA wording, with every valid candidate in priority order. */
        attn__sb sb;
        attn__sb_init(&sb);
        attn__sb_printf(&sb, "Using %s attention backend out of potential backends: [",
                        s->candidates[s->chosen].name);
        bool first = true;
        for (int i = 0; i < s->num_candidates; i++) {
            if (!s->candidates[i].valid) continue;
            if (!first) attn__sb_puts(&sb, ", ");
            attn__sb_py_str(&sb, s->candidates[i].name);
            first = false;
        }
        attn__sb_puts(&sb, "].");
        if (sb.data) attn__log_once(ATTN_LOG_DEBUG, sb.data);
        attn__sb_free(&sb);
    }
    char line[128];
    snprintf(line, sizeof line, "Using %s backend.", s->candidates[s->chosen].name);
    attn__log_once(ATTN_LOG_INFO, line);
}
