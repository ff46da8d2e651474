/* Strict UTF-8: the one validity rule the JSON reader and writer share. */
#ifndef ATTN_UTIL_UTF8_H
#define ATTN_UTIL_UTF8_H

#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes; s[0] >=
 * 0x80), 0 if it is not one (overlong, surrogate, above U+10FFFF,
 * truncated). */
static inline int attn__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    unsigned cp = c & (0xFFu >> (len + 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
    return len;
}

#endif
