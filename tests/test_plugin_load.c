/* Plugin loading, one case per forked child (loading happens once per
 * process, so every case needs a fresh one): the example plugin loads and
 * registers CUSTOM; the ATTN_PLUGINS allowlist keeps plugins unopened; each
 * broken plugin (tests/plugins/) is reported with its name and reason and
 * skipped while the good plugin next to it still loads; no plugin code runs
 * before the ABI check (marker files); a failing init is rolled back. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "util/json.h"

static char g_marker_dir[256];
static char g_log[65536];
static size_t g_log_len;

static void capture(attn_log_level level, const char *msg, void *user)
{
    (void)user;
    int n = snprintf(g_log + g_log_len, sizeof g_log - g_log_len, "%d %s\n", (int)level, msg);
    if (n > 0 && g_log_len + (size_t)n < sizeof g_log) g_log_len += (size_t)n;
}

/* "<binary dir>/<sub>" in a static rotating buffer. */
static const char *bin_path(const char *sub)
{
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", attn_test_binary_dir(), sub);
    return b;
}

static const char *plugin_file(const char *test_case)
{
    static char b[1024];
    snprintf(b, sizeof b, "%s/test-plugins/%s/libattn_test_%s.so", attn_test_binary_dir(),
             test_case, test_case);
    return b;
}

static bool marker_exists(const char *test_case)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s.ran", g_marker_dir, test_case);
    return access(p, F_OK) == 0;
}

static void clear_markers(void)
{
    DIR *d = opendir(g_marker_dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", g_marker_dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

static bool is_mapped(const char *file)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h); /* drops the reference NOLOAD took */
    return h != NULL;
}

static bool report_of(const char *name, attn_plugin_report *r)
{
    for (int i = 0; i < attn_plugins_count(); i++)
        if (attn_plugins_report(i, r) == ATTN_OK && strcmp(r->name, name) == 0) return true;
    memset(r, 0, sizeof *r);
    return false;
}

/* A name a failed plugin registered must not stay usable. */
static bool name_gone(const char *name)
{
    const char *loc = NULL;
    if (!attn_registry_contains(name)) return true;
    return !attn_registry_is_overridden(name) && attn_registry_get_locator(name, &loc) != ATTN_OK;
}

static const attn_backend *resolve_custom(void)
{
    const attn_platform *p = NULL;
    const attn_backend *b = NULL;
    if (attn_platform_current(&p) != ATTN_OK) return NULL;
    return attn_backend_resolve(p, "CUSTOM", &b) == ATTN_OK ? b : NULL;
}

/* CUSTOM is the example's backend (not another plugin's). */
static void check_custom_is_example(void)
{
    const char *loc = NULL;
    CHECK_OK(attn_registry_get_locator("CUSTOM", &loc));
    CHECK_STR(attn_plugins_owner("CUSTOM"), "attn_example");
    const attn_backend *b = resolve_custom();
    CHECK(b != NULL);
    if (b) {
        CHECK_STR(b->desc->name, "CUSTOM");
        CHECK_CONTAINS(b->desc->platforms, "REFERENCE");
        CHECK(b->kernel != NULL && b->kernel->forward != NULL);
    }
}

static void check_example_loaded(void)
{
    attn_plugin_report r;
    CHECK(report_of("attn_example", &r));
    CHECK(r.loaded);
    CHECK(!r.skipped_by_allowlist);
    CHECK(r.error == NULL);
    CHECK_CONTAINS(r.path, "/libattn_example.so");
    check_custom_is_example();
}

/* A broken plugin: reported with the reason, not loaded, its init never
 * ran, logged as "Failed to load plugin NAME: ...". */
static void check_broken(const char *test_case, const char *reason_part)
{
    char name[64], logline[128];
    snprintf(name, sizeof name, "attn_test_%s", test_case);
    attn_plugin_report r;
    CHECK_MSG(report_of(name, &r), "no report for %s", name);
    CHECK(!r.loaded);
    CHECK(!r.skipped_by_allowlist);
    CHECK_CONTAINS(r.error, reason_part);
    snprintf(logline, sizeof logline, "%d Failed to load plugin %s: ", (int)ATTN_LOG_WARN, name);
    CHECK_CONTAINS(g_log, logline);
    CHECK_MSG(!marker_exists(test_case), "%s: plugin code ran", test_case);
}

/* ---- cases (each runs in its own child process) ------------------------- */

static void case_example(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_load_count() == 1);
    CHECK(attn_plugins_count() == 1);
    check_example_loaded();
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_load_count() == 1);

    attn_plugin_report r;
    CHECK_STATUS(attn_plugins_report(1, &r), ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn_plugins_report(-1, &r), ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn_plugins_report(0, NULL), ATTN_NULL_ARGUMENT);
    CHECK(attn_plugins_owner("FLASH_ATTN") == NULL);
    CHECK(attn_plugins_owner(NULL) == NULL);

    /* The example runs through REFERENCE when this binary has it, and says
     * UNSUPPORTED otherwise. */
    const attn_platform *p = NULL;
    const attn_backend *ref = NULL, *custom = resolve_custom();
    CHECK_OK(attn_platform_current(&p));
    bool have_ref = attn_backend_resolve(p, "REFERENCE", &ref) == ATTN_OK && ref && ref->kernel &&
                    ref->kernel->forward;
    if (custom) {
        const attn_kernel_ops *k = custom->kernel;
        CHECK(k->variant != NULL);
        if (have_ref) {
            char detail[256] = "";
            /* The core's self-test service runs its standard known answer. */
            CHECK(k->kind == ATTN_KERNEL_STANDARD);
            CHECK_STATUS(attn_backend_self_test(custom, detail, sizeof detail), ATTN_OK);
            CHECK_CONTAINS(k->variant(), "via REFERENCE");
        } else {
            const attn_layer_params layer = {.num_heads = 1, .num_kv_heads = 1, .head_size = 32};
            const attn_common_metadata cm = {.num_reqs = 0};
            float q = 0, out = 0;
            const attn_forward_args fa = {.layer = &layer, .common = &cm, .q = &q, .out = &out};
            CHECK(k->self_test == NULL);
            CHECK(k->kind == ATTN_KERNEL_UNDECLARED);
            CHECK_STATUS(k->forward(NULL, &fa), ATTN_UNSUPPORTED);
            CHECK_CONTAINS(k->variant(), "unavailable");
            CHECK_CONTAINS(g_log, "REFERENCE is not available");
        }
    }

    char *json = NULL;
    CHECK_OK(attn_plugins_to_json(&json));
    attn__json *doc = NULL;
    char err[128];
    CHECK_OK(attn__json_parse(json, strlen(json), &doc, err, sizeof err));
    if (doc) {
        CHECK(attn__json_type_of(doc) == ATTN_JSON_ARRAY && attn__json_len(doc) == 1);
        const attn__json *pj = attn__json_at(doc, 0);
        CHECK_STR(attn__json_string(attn__json_get(pj, "name")), "attn_example");
        CHECK(attn__json_bool(attn__json_get(pj, "loaded")));
        CHECK(attn__json_type_of(attn__json_get(pj, "error")) == ATTN_JSON_NULL);
        const attn__json *reg = attn__json_get(pj, "registered");
        CHECK(reg && attn__json_len(reg) == 1);
        if (reg && attn__json_len(reg) == 1)
            CHECK_STR(attn__json_string(attn__json_at(reg, 0)), "CUSTOM");
        attn__json_free(doc);
    }
    free(json);
}

static void check_not_loaded_by_allowlist(void)
{
    attn_plugin_report r;
    CHECK(attn_plugins_count() == 1);
    CHECK(report_of("attn_example", &r));
    CHECK(!r.loaded);
    CHECK(r.skipped_by_allowlist);
    CHECK(r.error == NULL);
    CHECK_MSG(!is_mapped(bin_path("plugins/libattn_example.so")), "filtered plugin was opened");
    const char *loc = NULL;
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);
    CHECK_CONTAINS(attn_last_error(), "Backend CUSTOM must be registered before use");
    CHECK(attn_plugins_owner("CUSTOM") == NULL);
}

static void case_allow_other(void)
{
    CHECK_OK(attn_plugins_load());
    check_not_loaded_by_allowlist();
}

static void case_allow_empty(void)
{
    CHECK_OK(attn_plugins_load());
    check_not_loaded_by_allowlist();
}

static void case_allow_listed(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 1);
    check_example_loaded();
}

static void case_no_path(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 0);
    CHECK(attn_plugins_load_count() == 1);
    const char *loc = NULL;
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);
}

static void case_no_entry(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 2);
    check_broken("no_entry", "no entry point 'attn_plugin_init'");
    CHECK(name_gone("ATTN_TEST_NO_ENTRY"));
    CHECK_MSG(!is_mapped(plugin_file("no_entry")), "failed plugin was not closed");
    check_example_loaded();
}

static void case_no_abi(void)
{
    CHECK_OK(attn_plugins_load());
    check_broken("no_abi", "no 'attn_plugin_abi' symbol (not an attn plugin)");
    CHECK(name_gone("ATTN_TEST_NO_ABI"));
    CHECK(!is_mapped(plugin_file("no_abi")));
    check_example_loaded();
}

static void case_bad_abi(void)
{
    CHECK_OK(attn_plugins_load());
    check_broken("bad_abi", "ABI version mismatch: the plugin was built for plugin ABI 999, "
                            "this libattn has ABI 2");
    CHECK(name_gone("ATTN_TEST_BAD_ABI"));
    CHECK(!is_mapped(plugin_file("bad_abi")));
    check_example_loaded();
}

static void case_missing_dep(void)
{
    CHECK_OK(attn_plugins_load());
    check_broken("missing_dep", "libattn_missingdep.so: cannot open shared object file");
    CHECK(name_gone("ATTN_TEST_MISSING_DEP"));
    check_example_loaded();
}

/* init_fail after the example: its three registrations are undone and
 * CUSTOM is the example's again. */
static void case_init_fail(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 2);
    attn_plugin_report r;
    CHECK(report_of("attn_test_init_fail", &r));
    CHECK(!r.loaded);
    CHECK_CONTAINS(r.error, "attn_plugin_init failed with PLUGIN_ERROR: init_fail gives up "
                            "after registering 3 backends; rolled back 3 registrations");
    CHECK_CONTAINS(g_log, "Failed to load plugin attn_test_init_fail: ");
    CHECK_MSG(marker_exists("init_fail"), "init_fail's init should have run");
    CHECK(name_gone("ATTN_TEST_ROLLBACK"));
    CHECK(!attn_registry_is_overridden("FLASH_ATTN"));
    check_example_loaded();

    /* It registered things, so it stays mapped; its api is dead now. */
    void *h = dlopen(plugin_file("init_fail"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    if (h) {
        attn_status (*late)(void) = NULL;
        void *sym = dlsym(h, "attn_test_late_register");
        memcpy(&late, &sym, sizeof late);
        CHECK(late != NULL);
        if (late) {
            CHECK_STATUS(late(), ATTN_BAD_STATE);
            CHECK(name_gone("ATTN_TEST_LATE"));
        }
        dlclose(h);
    }
}

/* init_fail alone: CUSTOM had no registration before, so it has none now. */
static void case_init_fail_alone(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 1);
    CHECK(marker_exists("init_fail"));
    const char *loc = NULL;
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);
    CHECK(name_gone("ATTN_TEST_ROLLBACK"));
    CHECK(!attn_registry_is_overridden("FLASH_ATTN"));
    CHECK(attn_plugins_owner("CUSTOM") == NULL);
}

/* Every broken plugin at once, in path order, and the good one still loads. */
static void case_all(void)
{
    static const char *const order[] = {"attn_test_no_entry",    "attn_test_no_abi",
                                        "attn_test_bad_abi",     "attn_test_init_fail",
                                        "attn_test_missing_dep", "attn_example"};
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 6);
    for (int i = 0; i < 6 && i < attn_plugins_count(); i++) {
        attn_plugin_report r;
        CHECK_OK(attn_plugins_report(i, &r));
        CHECK_STR(r.name, order[i]);
        CHECK(r.loaded == (i == 5));
        CHECK((r.error != NULL) == (i != 5));
    }
    check_broken("no_entry", "no entry point");
    check_broken("no_abi", "not an attn plugin");
    check_broken("bad_abi", "ABI version mismatch");
    check_broken("missing_dep", "libattn_missingdep.so");
    CHECK(marker_exists("init_fail"));
    check_example_loaded();
    CHECK(attn_plugins_load_count() == 1);
}

static void case_duplicate(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 2);
    attn_plugin_report r;
    CHECK_OK(attn_plugins_report(1, &r));
    CHECK_STR(r.name, "attn_example");
    CHECK(!r.loaded);
    CHECK_CONTAINS(r.error, "another plugin of that name comes first");
    check_example_loaded();
}

static void case_missing_folder(void)
{
    CHECK_OK(attn_plugins_load());
    CHECK(attn_plugins_count() == 1);
    CHECK_CONTAINS(g_log, "cannot read folder '/nonexistent-attn-plugin-folder'");
    check_example_loaded();
}

/* hostile: what the api answered to the lying registrations. */
static void check_hostile_heard(void)
{
    void *h = dlopen(plugin_file("hostile"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    if (!h) return;
    const char *(*heard)(void) = NULL;
    void *sym = dlsym(h, "attn_test_hostile_heard");
    memcpy(&heard, &sym, sizeof heard);
    const char *t = heard ? heard() : "";
    CHECK_CONTAINS(t, "object: 1 plugin attn_test_hostile registers CPU_ATTN, but the backend's "
                      "descriptor is named 'EVIL' (a backend is registered under its own name)\n");
    CHECK_CONTAINS(t, "override: 9 plugin attn_test_hostile overrides CPU_ATTN with "
                      "'libattn_nowhere.so:attn_backend_x', which cannot load: No module named "
                      "libattn_nowhere.so");
    CHECK_CONTAINS(t, "new: 0 \n");
    dlclose(h);
    /* selection keeps the real CPU_ATTN: nothing quietly passes over it */
    CHECK(!attn_registry_is_overridden("CPU_ATTN"));
    const attn_platform *p = NULL;
    const attn_backend *b = NULL;
    CHECK_OK(attn_platform_current(&p));
    CHECK_OK(attn_backend_resolve(p, "CPU_ATTN", &b));
    CHECK(b && strcmp(b->desc->name, "CPU_ATTN") == 0);
}

/* init returns a status outside the table after refused calls: the report
 * names the status and carries none of their text. */
static void case_hostile_unknown(void)
{
    CHECK_OK(attn_plugins_load());
    attn_plugin_report r;
    CHECK(report_of("attn_test_hostile", &r));
    CHECK(!r.loaded);
    CHECK_STR(r.error,
              "attn_plugin_init failed with an unknown status 999; rolled back 1 registration");
    CHECK(name_gone("ATTN_TEST_LATER"));
    check_hostile_heard();
}

/* init returns the refused override's status: that text is the reason. */
static void case_hostile_same(void)
{
    CHECK_OK(attn_plugins_load());
    attn_plugin_report r;
    CHECK(report_of("attn_test_hostile", &r));
    CHECK_STR(r.error, "attn_plugin_init failed with IMPORT_ERROR: plugin attn_test_hostile "
                       "overrides CPU_ATTN with 'libattn_nowhere.so:attn_backend_x', which cannot "
                       "load: No module named libattn_nowhere.so (libattn_nowhere.so: cannot open "
                       "shared object file: No such file or directory); rolled back 1 "
                       "registration");
    check_hostile_heard();
}

/* init ignores the refusals and returns OK: only the honest registration stays. */
static void case_hostile_ok(void)
{
    CHECK_OK(attn_plugins_load());
    attn_plugin_report r;
    CHECK(report_of("attn_test_hostile", &r));
    CHECK(r.loaded);
    CHECK_STR(attn_plugins_owner("ATTN_TEST_LATER"), "attn_test_hostile");
    check_hostile_heard();
}

/* ---- driver --------------------------------------------------------------- */

static void run_case(const char *title, const char *path, const char *allow, void (*fn)(void))
{
    clear_markers();
    fflush(stdout);
    fflush(stderr);
    int counts[2] = {0, 0}, fds[2];
    if (pipe(fds) != 0) {
        CHECK_MSG(false, "pipe failed for %s", title);
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        CHECK_MSG(false, "fork failed for %s", title);
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        attn_test_checks = attn_test_failures = 0;
        if (path)
            setenv("ATTN_PLUGIN_PATH", path, 1);
        else
            unsetenv("ATTN_PLUGIN_PATH");
        if (allow)
            setenv("ATTN_PLUGINS", allow, 1);
        else
            unsetenv("ATTN_PLUGINS");
        attn_log_set_level(ATTN_LOG_DEBUG);
        attn_log_set_sink(capture, NULL);
        fn();
        if (attn_test_failures)
            fprintf(stderr, "case %s: %d check(s) failed; log:\n%s", title, attn_test_failures,
                    g_log);
        fflush(stderr);
        counts[0] = attn_test_checks;
        counts[1] = attn_test_failures;
        if (write(fds[1], counts, sizeof counts) != (ssize_t)sizeof counts) counts[1]++;
        close(fds[1]);
        exit(counts[1] ? 1 : 0);
    }
    close(fds[1]);
    if (read(fds[0], counts, sizeof counts) == (ssize_t)sizeof counts) {
        /* the child's checks count as this test's */
        attn_test_checks += counts[0];
        attn_test_failures += counts[1];
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %s failed (wait status %d)", title, st);
}

int main(void)
{
    snprintf(g_marker_dir, sizeof g_marker_dir, "/tmp/attn-plugin-test-XXXXXX");
    if (!mkdtemp(g_marker_dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("ATTN_TEST_MARKER_DIR", g_marker_dir, 1);
    unsetenv("ATTN_PLATFORM"); /* the real machine: REFERENCE runs here */

    char path[4096], good[1024];
    snprintf(good, sizeof good, "%s", bin_path("plugins"));
    run_case("example", good, NULL, case_example);
    run_case("allow-other", good, "someother", case_allow_other);
    run_case("allow-empty", good, "", case_allow_empty);
    run_case("allow-listed", good, " someother , attn_example ", case_allow_listed);
    run_case("no-path", NULL, NULL, case_no_path);

    snprintf(path, sizeof path, "%s:%s", bin_path("test-plugins/no_entry"), good);
    run_case("no-entry", path, NULL, case_no_entry);
    snprintf(path, sizeof path, "%s:%s", bin_path("test-plugins/no_abi"), good);
    run_case("no-abi", path, NULL, case_no_abi);
    snprintf(path, sizeof path, "%s:%s", bin_path("test-plugins/bad_abi"), good);
    run_case("bad-abi", path, NULL, case_bad_abi);
    snprintf(path, sizeof path, "%s:%s", bin_path("test-plugins/missing_dep"), good);
    run_case("missing-dep", path, NULL, case_missing_dep);
    snprintf(path, sizeof path, "%s:%s", good, bin_path("test-plugins/init_fail"));
    run_case("init-fail", path, NULL, case_init_fail);
    run_case("init-fail-alone", bin_path("test-plugins/init_fail"), NULL, case_init_fail_alone);
    snprintf(path, sizeof path, "%s:%s:%s:%s:%s:%s", bin_path("test-plugins/no_entry"),
             bin_path("test-plugins/no_abi"), bin_path("test-plugins/bad_abi"),
             bin_path("test-plugins/init_fail"), bin_path("test-plugins/missing_dep"), good);
    run_case("all", path, NULL, case_all);
    snprintf(path, sizeof path, "%s:%s/", good, good);
    run_case("duplicate", path, NULL, case_duplicate);
    snprintf(path, sizeof path, "/nonexistent-attn-plugin-folder::%s", good);
    run_case("missing-folder", path, NULL, case_missing_folder);

    const char *hostile = bin_path("test-plugins/hostile");
    setenv("ATTN_TEST_HOSTILE_MODE", "unknown", 1);
    run_case("hostile-unknown", hostile, NULL, case_hostile_unknown);
    setenv("ATTN_TEST_HOSTILE_MODE", "same", 1);
    run_case("hostile-same", hostile, NULL, case_hostile_same);
    setenv("ATTN_TEST_HOSTILE_MODE", "ok", 1);
    run_case("hostile-ok", hostile, NULL, case_hostile_ok);

    clear_markers();
    rmdir(g_marker_dir);
    return attn_test_finish("test_plugin_load");
}
