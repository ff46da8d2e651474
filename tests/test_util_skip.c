/* attn_test_skip(): a test that cannot run here exits 77 (ctest reports it
 * as skipped); a skip after a failed check exits 1, so it never hides the
 * failure. Checked by running this program again as a child. */
#include <unistd.h>

#include "test.h"

static int run_child(const char *self, const char *mode, char **out)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' %s", self, mode);
    return attn_test_run(cmd, out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--skip")) attn_test_skip("child", "no %s here", "widget");
    if (argc > 1 && !strcmp(argv[1], "--fail-then-skip")) {
        CHECK(argc == 0);
        attn_test_skip("child", "after a failure");
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) attn_test_skip("test_util_skip", "no /proc/self/exe to run a child");
    self[n] = '\0';
    char *out = NULL;
    CHECK(run_child(self, "--skip", &out) == 77);
    CHECK_STR(out, "child: SKIP no widget here\n");
    free(out);
    out = NULL;
    CHECK(run_child(self, "--fail-then-skip 2>/dev/null", &out) == 1);
    CHECK_CONTAINS(out, "child: SKIP after a failure\n");
    CHECK_CONTAINS(out, "child: 0 passed, 1 failed\n");
    free(out);
    return attn_test_finish("test_util_skip");
}
