/* Output files written whole or not at all, for every tool that writes one.
 * A regular file (new or existing, also behind a symbolic link) is written
 * to a temporary file beside it and renamed over it on commit; a failed run
 * aborts, which removes only that temporary, so an existing file is never
 * truncated or removed. A character device or FIFO is written in place and
 * never unlinked; anything else (directory, block device, socket) is
 * refused. "-" is stdout where the caller allows it. Errors go through
 * attn_set_error and name the path. */
#ifndef ATTN_UTIL_OUTFILE_H
#define ATTN_UTIL_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "attn/status.h"

enum { ATTN__OUT_ALLOW_STDOUT = 1u };

typedef struct attn__outfile {
    FILE *f;      /* write here between open and commit/abort */
    char *path;   /* the path as given (for messages) */
    char *target; /* the regular file renamed onto; NULL in place or stdout */
    char *tmp;    /* the temporary beside target; NULL in place or stdout */
    bool is_stdout;
} attn__outfile;

/* Opens path for writing (flags: ATTN__OUT_*). On failure *o is empty and
 * nothing on disk changed. */
attn_status attn__outfile_open(attn__outfile *o, const char *path, unsigned flags);
/* Flushes and closes; a regular file's temporary replaces the target. On
 * failure the temporary is removed and the target is as it was. */
attn_status attn__outfile_commit(attn__outfile *o);
/* Closes without publishing: removes only the temporary. Safe on an empty
 * or already finished *o. */
void attn__outfile_abort(attn__outfile *o);

#endif
