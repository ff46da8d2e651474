/* One logging function; level from ATTN_LOG read once. A sink replaces
 * stderr (tests capture messages through it). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/log.h"

static attn_log_sink attn__sink;
static void *attn__sink_user;
static int attn__level = -1;
static pthread_once_t attn__log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t attn__log_mu = PTHREAD_MUTEX_INITIALIZER;

static void attn__log_init(void)
{
    const char *e = getenv("ATTN_LOG");
    int lvl = ATTN_LOG_WARN;
    if (e) {
        if (!strcasecmp(e, "error"))
            lvl = ATTN_LOG_ERROR;
        else if (!strcasecmp(e, "warn") || !strcasecmp(e, "warning"))
            lvl = ATTN_LOG_WARN;
        else if (!strcasecmp(e, "info"))
            lvl = ATTN_LOG_INFO;
        else if (!strcasecmp(e, "debug"))
            lvl = ATTN_LOG_DEBUG;
        else /* said directly: attn_log would re-enter this once-init */
            fprintf(stderr,
                    "[attn WARNING] ATTN_LOG='%.64s' is not one of error|warn|info|debug; "
                    "using warn\n",
                    e);
    }
    if (attn__level < 0) attn__level = lvl;
}

void attn_log_set_sink(attn_log_sink sink, void *user)
{
    pthread_mutex_lock(&attn__log_mu);
    attn__sink = sink;
    attn__sink_user = user;
    pthread_mutex_unlock(&attn__log_mu);
}

void attn_log_set_level(attn_log_level level)
{
    pthread_once(&attn__log_once, attn__log_init);
    if ((unsigned)level > ATTN_LOG_DEBUG) {
        attn_log(ATTN_LOG_WARN, "attn_log_set_level(%d): not a log level; level unchanged",
                 (int)level);
        return;
    }
    attn__level = (int)level;
}

attn_log_level attn_log_get_level(void)
{
    pthread_once(&attn__log_once, attn__log_init);
    return (attn_log_level)attn__level;
}

void attn_log(attn_log_level level, const char *fmt, ...)
{
    static const char *const tag[] = {"ERROR", "WARNING", "INFO", "DEBUG"};
    pthread_once(&attn__log_once, attn__log_init);
    if ((unsigned)level > ATTN_LOG_DEBUG) level = ATTN_LOG_ERROR; /* a bad level still gets said */
    if ((int)level > attn__level) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&attn__log_mu);
    if (attn__sink)
        attn__sink(level, msg, attn__sink_user);
    else
        fprintf(stderr, "[attn %s] %s\n", tag[level], msg);
    pthread_mutex_unlock(&attn__log_mu);
}
