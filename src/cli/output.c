/* output.c — where the CLI's output goes, and how a failure to write it
 * is told: files through safe_file (never through a symbolic link, never
 * over a device node, FIFO, directory or another user's file; written to a
 * private temporary that is renamed over the name only when complete, and
 * removed otherwise), and standard output checked once more at exit, so
 * that no command can exit 0 after output was lost (a full disk, a closed
 * pipe, `> /dev/full`). Each failure is one line naming the file (or
 * "standard output") and exit status 1. */
#include "cli/cli.h"
#include "common/safe_file.h"
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char stdout_name[] = "standard output";
static int stdout_reported; /* its failure was already told: once is enough */

/* The error of a stream whose writes failed: errno from the flush that
 * failed, else EIO (an earlier write's errno is gone). */
static int stream_error(FILE *f, int flush_failed, int flush_errno)
{
    if (flush_failed)
        return flush_errno ? flush_errno : EIO;
    return ferror(f) ? EIO : 0;
}

int cli_stdout_failed(int err)
{
    if (!stdout_reported)
        cli_error("cannot write to %s: %s", stdout_name, strerror(err));
    stdout_reported = 1;
    return CLI_FAILED;
}

int cli_write_status(int prc)
{
    if (prc == -ENOMEM)
        return cli_error("out of memory");
    errno = 0;
    int ff = fflush(stdout) != 0;
    int err = stream_error(stdout, ff, errno);
    if (err || prc < 0)
        return cli_stdout_failed(err ? err : (prc < 0 && prc != -EIO ? -prc : EIO));
    return CLI_OK;
}

int cli_close_stdout(int status)
{
    errno = 0;
    int ff = fflush(stdout) != 0;
    int err = stream_error(stdout, ff, errno);
    /* fclose reports close(2)'s errors too (NFS reports some only there);
     * EBADF with nothing written: stdout was closed, and nothing was lost. */
    errno = 0;
    if (fclose(stdout) != 0 && !err && errno != EBADF)
        err = errno ? errno : EIO;
    if (!err)
        return status;
    cli_stdout_failed(err);
    return status == CLI_OK ? CLI_FAILED : status;
}

int cli_out_open(struct cli_out *o, const char *path)
{
    memset(o, 0, sizeof *o);
    if (!path || strcmp(path, "-") == 0) {
        o->f = stdout;
        o->name = stdout_name;
        o->is_stdout = 1;
        return CLI_OK;
    }
    o->name = path;
    o->file = malloc(sizeof *o->file);
    if (!o->file)
        return cli_error("out of memory");
    int rc = mt_file_begin_path(o->file, path);
    if (rc < 0) {
        free(o->file);
        o->file = NULL;
        return cli_error("cannot write %s: %s", path, mt_file_strerror(rc));
    }
    o->f = fdopen(o->file->fd, "wb");
    if (!o->f) {
        int e = errno;
        mt_file_abort(o->file);
        free(o->file);
        o->file = NULL;
        return cli_error("cannot write %s: %s", path, strerror(e));
    }
    return CLI_OK;
}

int cli_out_close(struct cli_out *o, int ok, int prc)
{
    if (!o->f)
        return CLI_OK;
    if (o->is_stdout) {
        o->f = NULL;
        if (!ok)
            return CLI_FAILED;
        return cli_write_status(prc);
    }
    errno = 0;
    int ff = fflush(o->f) != 0;
    int err = stream_error(o->f, ff, errno);
    errno = 0;
    if (fclose(o->f) != 0 && !err)
        err = errno ? errno : EIO;
    o->f = NULL;
    o->file->fd = -1; /* closed with the stream */
    int status = CLI_OK;
    if (!ok) {
        mt_file_abort(o->file); /* nothing half-written is left */
        status = CLI_FAILED;
    } else if (prc == -ENOMEM) {
        mt_file_abort(o->file);
        status = cli_error("out of memory");
    } else if (err || prc < 0) {
        mt_file_abort(o->file);
        if (!err)
            err = prc != -EIO ? -prc : EIO;
        status = cli_error("cannot write %s: %s", o->name, strerror(err));
    } else {
        int rc = mt_file_commit(o->file);
        if (rc < 0)
            status = cli_error("cannot write %s: %s", o->name, mt_file_strerror(rc));
    }
    free(o->file);
    o->file = NULL;
    return status;
}

void cli_print_caveats(const char *name, const struct report *r)
{
    for (size_t i = 0; i < r->ncaveats; i++)
        fprintf(stderr, "memtrail: %s: %s\n", name, r->caveats[i]);
}
