/* fileio.h — whole writes and directory syncs, for every layer that keeps
 * files (the daemon's matrix store and tuning files, the cluster's shard
 * files). Lives in the engine because it is the lowest layer both the
 * daemon and the cluster backend may include.
 */
#ifndef SPMV_FILEIO_H
#define SPMV_FILEIO_H

#include <stddef.h>

/* write(2) until all of data is written (EINTR retried, 1 GiB a call); -1
 * with errno on failure. */
int spmv_write_all(int fd, const void *data, size_t len);
/* fsync of a directory (after a rename or unlink in it): 0, or -1 with
 * errno. */
int spmv_sync_dir(const char *dir);

#endif
