/* faultfs.c — an LD_PRELOAD library that makes the state directory fail.
 *
 * tests/e2e/diskfull.sh builds it (cc -shared) and runs spmvd under it when
 * a real small file system (tmpfs, loop device) is not available, and to
 * make fsync fail, which no real file system does on demand. It wraps
 * write(), pwrite(), fsync() and fdatasync(): for a file whose path starts
 * with $FAULTFS_DIR, the contents of the control file $FAULTFS_CTL decide,
 * read on every call so the test switches faults while the daemon runs:
 *
 *   "enospc N"  writes fail with ENOSPC once the file would exceed N bytes
 *               (a short write first, as a full disk gives)
 *   "eio-fsync" fsync and fdatasync fail with EIO
 *   "eio-dirsync" only the fsync of the directory itself fails with EIO
 *               (after the rename of a stored file)
 *   anything else, or no file: no fault
 *
 * Only the daemon's own files are touched; logs, sockets and everything
 * else go straight through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*fsync_fn)(int);

/* The fault in force for fd: 0 none, 1 ENOSPC (limit in *limit), 2 EIO on
 * fsync, 3 EIO on the directory's fsync. */
static int fault_for(int fd, long long *limit)
{
    const char *dir = getenv("FAULTFS_DIR"), *ctl = getenv("FAULTFS_CTL");
    char link[64], path[4096], text[64] = "";
    if (!dir || !ctl)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    if (strncmp(path, dir, strlen(dir)) != 0)
        return 0;
    int cfd = open(ctl, O_RDONLY | O_CLOEXEC);
    if (cfd < 0)
        return 0;
    /* the real read: the control file is never one of the faulted files */
    n = read(cfd, text, sizeof text - 1);
    close(cfd);
    text[n > 0 ? n : 0] = '\0';
    if (strncmp(text, "enospc ", 7) == 0) {
        *limit = atoll(text + 7);
        return 1;
    }
    if (strncmp(text, "eio-dirsync", 11) == 0) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) ? 3 : 0;
    }
    return strncmp(text, "eio-fsync", 9) == 0 ? 2 : 0;
}

/* How much of len may be written at offset off under a limit. */
static size_t room(int fd, off_t off, size_t len, long long limit)
{
    if (off < 0) {
        struct stat st;
        off = lseek(fd, 0, SEEK_CUR);
        if (off < 0 && fstat(fd, &st) == 0)
            off = st.st_size;
    }
    if (off >= limit)
        return 0;
    return (unsigned long long)(limit - off) < len ? (size_t)(limit - off) : len;
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static write_fn real;
    long long limit;
    if (!real)
        real = (write_fn)dlsym(RTLD_NEXT, "write");
    if (fault_for(fd, &limit) == 1) {
        size_t ok = room(fd, -1, len, limit);
        if (ok == 0) {
            errno = ENOSPC;
            return -1;
        }
        len = ok;
    }
    return real(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    static pwrite_fn real;
    long long limit;
    if (!real)
        real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (fault_for(fd, &limit) == 1) {
        size_t ok = room(fd, off, len, limit);
        if (ok == 0) {
            errno = ENOSPC;
            return -1;
        }
        len = ok;
    }
    return real(fd, buf, len, off);
}

static int synced(const char *name, int fd)
{
    long long limit;
    if (fault_for(fd, &limit) >= 2) {
        errno = EIO;
        return -1;
    }
    fsync_fn real = (fsync_fn)dlsym(RTLD_NEXT, name);
    return real(fd);
}

int fsync(int fd) { return synced("fsync", fd); }
int fdatasync(int fd) { return synced("fdatasync", fd); }
