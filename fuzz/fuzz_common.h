/* Shared by the harnesses: a NUL-terminated copy of the input, a UTF-8
 * validity oracle for everything the library emits, and a fixed process
 * setup (data from the source tree, one thread, no plugins, quiet log). */
#ifndef ATTN_FUZZ_COMMON_H
#define ATTN_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *fz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
static inline bool fz_utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int n = c < 0x80             ? 0
                : (c & 0xE0) == 0xC0 ? 1
                : (c & 0xF0) == 0xE0 ? 2
                : (c & 0xF8) == 0xF0 ? 3
                                     : -1;
        if (n < 0) return false;
        unsigned cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
            return false;
        p += n + 1;
    }
    return true;
}

#define FZ_ASSERT(c)                                                                               \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline void fz_setup_env(void)
{
    setenv("ATTN_DATA_DIR", ATTN_FUZZ_DATA_DIR, 1);
    setenv("ATTN_NUM_THREADS", "1", 1);
    setenv("ATTN_LOG", "error", 1);
    unsetenv("ATTN_PLUGIN_PATH");
    unsetenv("ATTN_PLUGINS");
    unsetenv("ATTN_PLATFORM");
    unsetenv("ATTN_BACKEND");
}

/* The initializer of a harness that needs nothing beyond fz_setup_env. */
#define FZ_DEFAULT_INITIALIZE                                                                      \
    int LLVMFuzzerInitialize(int *argc, char ***argv);                                             \
    int LLVMFuzzerInitialize(int *argc, char ***argv)                                              \
    {                                                                                              \
        (void)argc;                                                                                \
        (void)argv;                                                                                \
        fz_setup_env();                                                                            \
        return 0;                                                                                  \
    }

#endif
