/* Output files (outfile.h): the temporary is created with O_EXCL beside the
 * target so the rename stays on one file system and is atomic; the target
 * itself is never opened for writing, truncated or unlinked. */
#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"

static void outfile_clear(attn__outfile *o)
{
    free(o->path);
    free(o->target);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

static attn_status outfile_fail(attn__outfile *o, const char *path, const char *what, int err)
{
    attn_status st =
        attn_set_error(ATTN_IO_ERROR, "cannot write '%s': %s", path, what ? what : strerror(err));
    outfile_clear(o);
    return st;
}

/* A descriptor above stderr: with stdin/stdout/stderr closed, open() would
 * hand out 0-2 and the program's own prints would land in the file. */
static int outfile_high_fd(int fd)
{
    if (fd < 0 || fd > 2) return fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    errno = err;
    return high;
}

/* A fresh name beside target: ".<base>.<pid>-<n>.tmp", created O_EXCL. */
static int outfile_make_tmp(attn__outfile *o, mode_t mode, bool keep_mode)
{
    const char *slash = strrchr(o->target, '/');
    size_t dirlen = slash ? (size_t)(slash - o->target) + 1 : 0;
    const char *base = o->target + dirlen;
    size_t cap = strlen(o->target) + 64;
    o->tmp = malloc(cap);
    if (!o->tmp) return ENOMEM;
    static unsigned counter;
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 100; tries++) {
        unsigned n = seed * 2654435761u + ++counter;
        snprintf(o->tmp, cap, "%.*s.%s.%ld-%08x.tmp", (int)dirlen, o->target, base, (long)getpid(),
                 n);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd >= 0 && (fd = outfile_high_fd(fd)) < 0) unlink(o->tmp);
        if (fd < 0) break;
        if ((keep_mode && fchmod(fd, mode) != 0) || !(o->f = fdopen(fd, "w"))) {
            int err = errno;
            close(fd);
            unlink(o->tmp);
            return err;
        }
        return 0;
    }
    int err = errno;
    free(o->tmp);
    o->tmp = NULL;
    return err;
}

/* A regular file (or a new one): o->target is where the rename lands. */
static attn_status outfile_open_regular(attn__outfile *o, const char *path, const struct stat *st)
{
    int err = outfile_make_tmp(o, st ? st->st_mode & 07777 : 0, st != NULL);
    return err ? outfile_fail(o, path, NULL, err) : ATTN_OK;
}

/* A character device or FIFO: written in place, never truncated (O_TRUNC
 * means nothing to a device) and never created or removed. */
static attn_status outfile_open_in_place(attn__outfile *o, const char *path)
{
    int fd = outfile_high_fd(open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (fd < 0) return outfile_fail(o, path, NULL, errno);
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) ||
        !(o->f = fdopen(fd, "w"))) {
        close(fd);
        return outfile_fail(o, path, "changed while it was opened", 0);
    }
    return ATTN_OK;
}

attn_status attn__outfile_open(attn__outfile *o, const char *path, unsigned flags)
{
    ATTN__CHECK_NULL(o);
    memset(o, 0, sizeof *o);
    ATTN__CHECK_NULL(path);
    if (!*path) return attn_set_error(ATTN_INVALID_ARGUMENT, "cannot write '': empty path");
    if (strcmp(path, "-") == 0 && (flags & ATTN__OUT_ALLOW_STDOUT)) {
        o->f = stdout;
        o->is_stdout = true;
        return ATTN_OK;
    }
    if (!(o->path = strdup(path))) return attn_set_error(ATTN_OUT_OF_MEMORY, "writing '%s'", path);
    struct stat st;
    if (stat(path, &st) != 0) {
        int err = errno;
        struct stat lst;
        if (err != ENOENT) return outfile_fail(o, path, NULL, err);
        if (lstat(path, &lst) == 0) return outfile_fail(o, path, "dangling symbolic link", 0);
        size_t n = strlen(path);
        if (path[n - 1] == '/') return outfile_fail(o, path, "names a folder", 0);
        if (!(o->target = strdup(path))) return outfile_fail(o, path, NULL, ENOMEM);
        return outfile_open_regular(o, path, NULL);
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return outfile_open_in_place(o, path);
    if (S_ISDIR(st.st_mode)) return outfile_fail(o, path, "is a folder", 0);
    if (!S_ISREG(st.st_mode)) return outfile_fail(o, path, "not a regular file, device or FIFO", 0);
    /* through a link the rename lands on the file it names, keeping the link */
    if (!(o->target = realpath(path, NULL))) return outfile_fail(o, path, NULL, errno);
    return outfile_open_regular(o, path, &st);
}

attn_status attn__outfile_commit(attn__outfile *o)
{
    ATTN__CHECK_NULL(o);
    if (!o->f) return attn_set_error(ATTN_BAD_STATE, "output file is not open");
    if (o->is_stdout) {
        bool bad = fflush(stdout) != 0 || ferror(stdout);
        memset(o, 0, sizeof *o);
        return bad ? attn_set_error(ATTN_IO_ERROR, "error writing the output: %s", strerror(errno))
                   : ATTN_OK;
    }
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    if (!err && o->tmp && fsync(fileno(o->f)) != 0) err = errno;
    if (fclose(o->f) != 0 && !err) err = errno;
    o->f = NULL;
    if (!err && o->tmp && rename(o->tmp, o->target) != 0) err = errno;
    if (err) {
        if (o->tmp) unlink(o->tmp);
        attn_status st =
            attn_set_error(ATTN_IO_ERROR, "cannot write '%s': %s", o->path, strerror(err));
        outfile_clear(o);
        return st;
    }
    outfile_clear(o);
    return ATTN_OK;
}

void attn__outfile_abort(attn__outfile *o)
{
    if (!o) return;
    if (o->is_stdout) {
        fflush(stdout);
        memset(o, 0, sizeof *o);
        return;
    }
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    outfile_clear(o);
}
