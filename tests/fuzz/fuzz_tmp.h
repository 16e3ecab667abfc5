/* fuzz_tmp.h — a fuzz target's scratch directory, removed when the process
 * exits (libFuzzer's end, or the replay's in make test), so repeated runs
 * leave nothing behind in /dev/shm or /tmp. Header only: each target is
 * one program.
 */
#ifndef SPMVD_FUZZ_TMP_H
#define SPMVD_FUZZ_TMP_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_tmp_dir[128];

static int fuzz_tmp_unlink(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    remove(p);
    return 0;
}

static void fuzz_tmp_remove(void)
{
    if (fuzz_tmp_dir[0])
        nftw(fuzz_tmp_dir, fuzz_tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory named prefix.XXXXXX under /dev/shm when it is writable
 * (fsync costs nothing there), else /tmp; NULL on failure. */
static const char *fuzz_tmp_make(const char *prefix)
{
    snprintf(fuzz_tmp_dir, sizeof fuzz_tmp_dir, "%s/%s.XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
             prefix);
    if (!mkdtemp(fuzz_tmp_dir))
        return NULL;
    atexit(fuzz_tmp_remove);
    return fuzz_tmp_dir;
}

#endif
