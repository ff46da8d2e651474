/* Minimal test harness shared by every C test: CHECK* macros record
 * failures with file:line and the test exits non-zero at the end;
 * attn_test_skip() ends a test that cannot run here with exit 77, which ctest
 * (SKIP_RETURN_CODE 77) reports as skipped, never as passed. A check that is
 * impossible here inside a test that otherwise runs prints "SKIP <what>". */
#ifndef ATTN_TEST_H
#define ATTN_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"

extern int attn_test_failures;
extern int attn_test_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        attn_test_checks++;                                                                        \
        if (!(cond)) {                                                                             \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        attn_test_checks++;                                                                        \
        if (!(cond)) {                                                                             \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_STATUS(expr, want)                                                                   \
    do {                                                                                           \
        attn_status got_ = (expr);                                                                 \
        attn_test_checks++;                                                                        \
        if (got_ != (want)) {                                                                      \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s returned %s, want %s (%s)\n", __FILE__, __LINE__, #expr,    \
                    attn_status_name(got_), attn_status_name(want), attn_last_error());            \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, ATTN_OK)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        attn_test_checks++;                                                                        \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s == \"%s\", want \"%s\"\n", __FILE__, __LINE__, #a,          \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                       \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        attn_test_checks++;                                                                        \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,         \
                    h_ ? h_ : "(null)", n_);                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        attn_test_checks++;                                                                        \
        if (!(fabs(a_ - b_) <= (tol))) {                                                           \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s = %.9g, want %.9g +- %g\n", __FILE__, __LINE__, #a, a_, b_, \
                    (double)(tol));                                                                \
        }                                                                                          \
    } while (0)

/* Print the summary line and return the process exit code. */
int attn_test_finish(const char *name);
/* Print "<name>: SKIP <reason>" and exit 77 (skipped); exit 1 instead when a
 * check already failed, so a skip never hides a failure. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 2, 3)))
#endif
void attn_test_skip(const char *name, const char *fmt, ...);
/* Environment helpers for tests run by ctest. */
const char *attn_test_source_dir(void);
const char *attn_test_binary_dir(void);
/* Run a shell command, capture stdout into a malloc'd string; returns exit code. */
int attn_test_run(const char *cmd, char **out);

#endif
