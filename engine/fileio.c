/* fileio.c — whole reads and writes, and directory syncs (fileio.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "fileio.h"

/* The one loop under spmv_write_all, spmv_pwrite_all and spmv_read_all:
 * into dst when it is given, else from src (at off when off >= 0, else at
 * the file position); 1 GiB a call, EINTR retried, end of file an error. */
static int whole(int fd, void *dst, const void *src, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done > (1u << 30) ? (1u << 30) : len - done;
        ssize_t n = dst        ? read(fd, (char *)dst + done, chunk)
                    : off >= 0 ? pwrite(fd, (const char *)src + done, chunk, off + (off_t)done)
                               : write(fd, (const char *)src + done, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

int spmv_write_all(int fd, const void *data, size_t len) { return whole(fd, NULL, data, len, -1); }

int spmv_pwrite_all(int fd, const void *data, size_t len, off_t off) { return whole(fd, NULL, data, len, off); }

int spmv_read_all(int fd, void *data, size_t len) { return whole(fd, data, NULL, len, -1); }

int spmv_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}
