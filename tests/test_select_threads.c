/* 16 threads select at once on first use: they start together (barrier),
 * each calls attn_select on the same platform and configuration while the
 * plugins are still to be loaded. Every thread must get the same answer and
 * the same cached object, see the plugin's registration when its call
 * returns (nobody selected before loading had finished), and the loader
 * must have run exactly once. */
#include <pthread.h>

#include "test.h"

#define NTHREADS 16

typedef struct result {
    attn_status st;
    const attn_selection *sel;
    const char *backend;
    bool custom_visible; /* CUSTOM (from the plugin) registered when select returned */
    int loads;
} result;

static pthread_barrier_t g_start;
static const attn_platform *g_platform;
static attn_selector_config g_cfg;
static const char *g_requested;

static void *worker(void *arg)
{
    result *r = arg;
    pthread_barrier_wait(&g_start);
    r->st = attn_select(g_platform, g_requested, &g_cfg, &r->sel);
    r->backend = r->sel ? attn_selection_backend(r->sel) : NULL;
    const char *loc = NULL;
    r->custom_visible = attn_registry_get_locator("CUSTOM", &loc) == ATTN_OK;
    r->loads = attn_plugins_load_count();
    return NULL;
}

static void race(const char *title, const char *requested, const char *want)
{
    pthread_t th[NTHREADS];
    result res[NTHREADS];
    memset(res, 0, sizeof res);
    g_requested = requested;
    CHECK(pthread_barrier_init(&g_start, NULL, NTHREADS) == 0);
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, &res[i]) == 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_start);

    for (int i = 0; i < NTHREADS; i++) {
        CHECK_MSG(res[i].st == ATTN_OK, "%s: thread %d: %s (%s)", title, i,
                  attn_status_name(res[i].st),
                  res[i].sel ? attn_selection_message(res[i].sel) : "no selection");
        CHECK_MSG(res[i].sel != NULL && res[i].sel == res[0].sel,
                  "%s: thread %d got another selection object", title, i);
        CHECK_STR(res[i].backend, want);
        if (res[i].sel && res[0].sel)
            CHECK(attn_selection_backend_object(res[i].sel) ==
                  attn_selection_backend_object(res[0].sel));
        CHECK_MSG(res[i].custom_visible, "%s: thread %d returned before plugins were loaded", title,
                  i);
        CHECK_MSG(res[i].loads == 1, "%s: thread %d saw %d loader runs", title, i, res[i].loads);
    }
}

int main(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/plugins", attn_test_binary_dir());
    setenv("ATTN_PLUGIN_PATH", dir, 1);
    unsetenv("ATTN_PLUGINS");

    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    if (!p) return attn_test_finish("test_select_threads");
    g_platform = p;
    attn_selector_config_init(&g_cfg);
    g_cfg.head_size = 128;
    g_cfg.dtype = ATTN_DTYPE_BF16;
    CHECK_MSG(attn_plugins_load_count() == 0, "plugins were loaded before the race");

    race("auto", NULL, "FLASH_ATTN");
    /* A second key, first use again, now naming the plugin's backend. */
    race("CUSTOM", "CUSTOM", "CUSTOM");

    CHECK(attn_plugins_load_count() == 1);
    CHECK(attn_plugins_count() == 1);
    attn_plugin_report r;
    CHECK_OK(attn_plugins_report(0, &r));
    CHECK_STR(r.name, "attn_example");
    CHECK(r.loaded);
    /* The cached object answers the same key from now on. */
    const attn_selection *again = NULL;
    CHECK_OK(attn_select(g_platform, NULL, &g_cfg, &again));
    CHECK(again != NULL);
    attn_platform_free(p);
    return attn_test_finish("test_select_threads");
}
