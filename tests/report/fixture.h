/* fixture.h — report files for the reader's unit tests: written into a
 * fresh temporary directory, read back with report_read, and the check
 * that a bad one fails with the right code and message. */
#ifndef MT_TESTS_REPORT_FIXTURE_H
#define MT_TESTS_REPORT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report.h"
#include "unit.h"

static char dir[] = "/tmp/mt-test-report-XXXXXX";

/* Makes the directory; exits when it cannot. */
static inline void fixture_dir(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* Writes len bytes of text to DIR/name; returns the path (malloc'd). */
static inline char *fixture(const char *name, const char *text, size_t len)
{
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        abort();
    FILE *f = fopen(path, "w");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    return path;
}

/* Reads a fixture given as a C string; returns the reader's result. */
static inline int read_text(const char *name, const char *text, struct report *r, char *err)
{
    char *path = fixture(name, text, strlen(text));
    int rc = report_read(path, r, err, REPORT_ERR_MAX);
    unlink(path);
    free(path);
    return rc;
}

/* The reader must fail on `text` with want_rc and a message holding
 * want_msg; the checks are named "<prefix><name>: ...". */
static inline void expect_read_error(const char *prefix, const char *name, const char *text, int want_rc,
                                     const char *want_msg)
{
    struct report r;
    char err[REPORT_ERR_MAX];
    int rc = read_text("bad.mtr", text, &r, err);
    char label[160];
    snprintf(label, sizeof label, "%s%s: error code", prefix, name);
    CHECK(label, rc == want_rc);
    if (rc != want_rc)
        printf("    got %d (%s), message: %s\n", rc, strerror(-rc), err);
    snprintf(label, sizeof label, "%s%s: message", prefix, name);
    CHECK(label, strstr(err, want_msg) != NULL);
    if (!strstr(err, want_msg))
        printf("    wanted '%s' in: %s\n", want_msg, err);
    report_free(&r);
}

#endif
