/* fileio.h — whole reads and writes, and directory syncs, for every layer that keeps
 * files (the daemon's matrix store and tuning files, the cluster's shard
 * files). Lives in the engine because it is the lowest layer both the
 * daemon and the cluster backend may include.
 */
#ifndef SPMV_FILEIO_H
#define SPMV_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* write(2) until all of data is written (EINTR retried, 1 GiB a call); -1
 * with errno on failure. */
int spmv_write_all(int fd, const void *data, size_t len);
/* The same with pwrite(2) at offset off (the file position unmoved). */
int spmv_pwrite_all(int fd, const void *data, size_t len, off_t off);
/* read(2) until len bytes are read; -1 on failure or at end of file first
 * (errno then as read left it). */
int spmv_read_all(int fd, void *data, size_t len);
/* fsync of a directory (after a rename or unlink in it): 0, or -1 with
 * errno. */
int spmv_sync_dir(const char *dir);

#endif
