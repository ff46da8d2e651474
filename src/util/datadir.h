/* The data directories (machines/, models/, scenarios/); order and rules in
 * src/util/datadir.c. */
#ifndef ATTN_UTIL_DATADIR_H
#define ATTN_UTIL_DATADIR_H

#include <stddef.h>

/* Fills up to max entries (strings live for the process); returns the count. */
int attn__data_dirs(const char **dirs, int max);
/* "dir1, dir2" (or "none") for messages; returns the length like snprintf. */
int attn__data_dirs_text(char *buf, size_t size);

#endif
