/* shardfile.c — each rank's own copy of its shards on disk (issue 16).
 *
 * A rank > 0 keeps the shard it was sent, in its wire form (partition.c),
 * as <state_dir>/shards/r<rank>/<id>.shard, followed by a trailer: magic,
 * the wire form's length and its CRC-32 (zlib). When the job restarts
 * with the same number of ranks, rank 0 cuts the stored matrix again and
 * sends each rank only the length and CRC of the shard it would send: a
 * rank whose file holds exactly that loads it from its own disk, and is
 * sent the shard otherwise (no file, another rank count, a damaged file).
 * Rank 0's own shard is cut from its stored matrix, so it keeps no file.
 * A file is written under a temporary name, fsync'd and renamed, so a
 * crash leaves the old file or the new one; a matrix deleted through the
 * API has its files removed on every rank (CMD_FREE with
 * CMD_FLAG_FORGET); files of matrices deleted while a rank was away stay
 * until that rank loads the id again.
 */
#ifdef SPMV_HAVE_MPI

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cluster/internal.h"
#include "fileio.h"

#define SHARD_FILE_MAGIC UINT64_C(0x454c494644524853) /* "SHRDFILE" */

typedef struct trailer {
    uint64_t magic;
    uint64_t len;
    uint32_t crc;
    uint32_t zero;
} trailer;

uint32_t shard_crc(const void *buf, size_t len)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = buf;
    while (len > 0) { /* crc32 takes a uInt length */
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)crc;
}

/* <dir>/r<rank>[/<id>.shard[.tmp]]; false when the id is not one rank 0
 * makes (hex digits and dashes) or the path is too long. */
static bool shard_path(const cluster *c, const char *id, const char *suffix, char *out, size_t len)
{
    if (!c->o.shard_dir || !*c->o.shard_dir)
        return false;
    if (id) {
        if (!*id || strlen(id) > 36)
            return false;
        for (const char *p = id; *p; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
                return false;
    }
    int n = id ? snprintf(out, len, "%s/r%d/%s.shard%s", c->o.shard_dir, c->rank, id, suffix)
               : snprintf(out, len, "%s/r%d", c->o.shard_dir, c->rank);
    return n > 0 && (size_t)n < len;
}

static int make_dirs(const cluster *c, spmv_error *err)
{
    char dir[1024];
    if (!shard_path(c, NULL, "", dir, sizeof dir))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "no shard directory");
    for (char *p = dir + 1; *p; p++) /* every component, as mkdir -p */
        if (*p == '/') {
            *p = '\0';
            if (mkdir(dir, 0750) != 0 && errno != EEXIST)
                return spmv_error_set(err, SPMV_ERR_IO, errno, "mkdir %s: %s", dir, strerror(errno));
            *p = '/';
        }
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return spmv_error_set(err, SPMV_ERR_IO, errno, "mkdir %s: %s", dir, strerror(errno));
    return SPMV_OK;
}

int shard_file_write(const cluster *c, const char *id, const void *buf, size_t len, spmv_error *err)
{
    char path[1100], tmp[1100];
    if (!shard_path(c, id, "", path, sizeof path) || !shard_path(c, id, ".tmp", tmp, sizeof tmp))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "no file for shard %s", id);
    int rc = make_dirs(c, err);
    if (rc != SPMV_OK)
        return rc;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return spmv_error_set(err, SPMV_ERR_IO, errno, "open %s: %s", tmp, strerror(errno));
    trailer t = {SHARD_FILE_MAGIC, len, shard_crc(buf, len), 0};
    if (spmv_write_all(fd, buf, len) != 0 || spmv_write_all(fd, &t, sizeof t) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return spmv_error_set(err, SPMV_ERR_IO, e, "writing %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return spmv_error_set(err, SPMV_ERR_IO, e, "rename %s: %s", path, strerror(e));
    }
    char dir[1024];
    if (shard_path(c, NULL, "", dir, sizeof dir))
        spmv_sync_dir(dir); /* the rename itself on disk */
    return SPMV_OK;
}

int shard_file_read(const cluster *c, const char *id, uint64_t len, uint32_t crc, void **out, spmv_error *err)
{
    char path[1100];
    *out = NULL;
    if (!shard_path(c, id, "", path, sizeof path))
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "no file for shard %s", id);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, errno, "%s: %s", path, strerror(errno));
    struct stat st;
    trailer t;
    int rc = SPMV_OK;
    char *buf = NULL;
    if (fstat(fd, &st) != 0)
        rc = spmv_error_set(err, SPMV_ERR_IO, errno, "fstat %s: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size != len + sizeof t)
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s holds %lld bytes, not the %llu of the shard rank 0 cut",
                            path, (long long)st.st_size, (unsigned long long)(len + sizeof t));
    else if (!(buf = malloc(len ? len : 1)))
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %s", path);
    if (rc == SPMV_OK && spmv_read_all(fd, buf, len) != 0)
        rc = spmv_error_set(err, SPMV_ERR_IO, errno, "reading %s", path);
    if (rc == SPMV_OK && read(fd, &t, sizeof t) != (ssize_t)sizeof t)
        rc = spmv_error_set(err, SPMV_ERR_IO, errno, "reading the trailer of %s", path);
    close(fd);
    if (rc == SPMV_OK && (t.magic != SHARD_FILE_MAGIC || t.len != len || t.crc != crc))
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s is another shard than the one rank 0 cut (CRC %08x, not %08x)",
                            path, t.crc, crc);
    if (rc == SPMV_OK && shard_crc(buf, len) != crc)
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s is damaged: its bytes do not match their CRC", path);
    if (rc != SPMV_OK) {
        free(buf);
        return rc;
    }
    *out = buf;
    return SPMV_OK;
}

void shard_file_remove(const cluster *c, const char *id)
{
    char path[1100];
    if (shard_path(c, id, "", path, sizeof path))
        unlink(path);
}

#else
typedef int cluster_shardfile_unused; /* ISO C wants a translation unit to hold something */
#endif
