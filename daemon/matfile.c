/* matfile.c — writing and verifying the binary CSR files of the store.
 *
 * The header is encoded field by field at fixed offsets (see matfile.h), so
 * the format does not depend on struct padding; the byte order is the
 * host's, asserted little-endian at compile time. Checksums are zlib's
 * CRC-32: one over the header (so a flipped size is caught before it sizes
 * an allocation) and one over the payload. Every count read back is checked
 * against the file's actual size before memory is reserved for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "daemon/matfile.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "matfile assumes a little-endian host");

enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_DTYPE = 12, OFF_ROWS = 16, OFF_COLS = 20,
    OFF_NNZ = 24, OFF_SYMMETRY = 32, OFF_FORMATS = 36, OFF_HACK = 40, OFF_DEVICE = 44,
    OFF_CREATED = 48, OFF_TIMINGS = 56, OFF_ID = 88, OFF_NAME = 128, OFF_FLAGS = 384,
    OFF_PAYLOAD_CRC = 504, OFF_HEADER_CRC = 508,
};

/* OFF_FLAGS bits (0 in files written before they existed). */
enum {
    FLAG_MIXED = 1u << 0,
    FLAG_SHARDED = 1u << 1,
};

int matfile_path(const char *dir, const char *id, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s%s", dir, id, MATFILE_SUFFIX);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

static void put32(unsigned char *h, int off, uint32_t v) { memcpy(h + off, &v, 4); }
static void put64(unsigned char *h, int off, uint64_t v) { memcpy(h + off, &v, 8); }
static uint32_t get32(const unsigned char *h, int off) { uint32_t v; memcpy(&v, h + off, 4); return v; }
static uint64_t get64(const unsigned char *h, int off) { uint64_t v; memcpy(&v, h + off, 8); return v; }

/* CRC-32 over any length (zlib's length argument is a uInt). */
static uint32_t crc_update(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return crc;
}

/* Payload sizes from the header counts; -1 on overflow. */
static int payload_sizes(int32_t rows, int64_t nnz, spmv_dtype dtype, size_t sz[3])
{
    if (rows < 0 || nnz < 0 || nnz > INT32_MAX)
        return -1;
    sz[0] = ((size_t)rows + 1) * sizeof(int32_t);
    sz[1] = (size_t)nnz * sizeof(int32_t);
    sz[2] = (size_t)nnz * spmv_dtype_size(dtype);
    return 0;
}

static void encode_header(unsigned char *h, const matfile_meta *m, const spmv_csr *csr, uint32_t payload_crc)
{
    memset(h, 0, MATFILE_HEADER_BYTES);
    memcpy(h + OFF_MAGIC, MATFILE_MAGIC, 8);
    put32(h, OFF_VERSION, MATFILE_VERSION);
    put32(h, OFF_DTYPE, (uint32_t)csr->dtype);
    put32(h, OFF_ROWS, (uint32_t)csr->rows);
    put32(h, OFF_COLS, (uint32_t)csr->cols);
    put64(h, OFF_NNZ, (uint64_t)csr->nnz);
    put32(h, OFF_SYMMETRY, (uint32_t)m->symmetry);
    put32(h, OFF_FORMATS, m->formats);
    put32(h, OFF_HACK, (uint32_t)m->hack_size);
    put32(h, OFF_DEVICE, (uint32_t)m->device);
    put64(h, OFF_CREATED, (uint64_t)m->created);
    put32(h, OFF_FLAGS, (m->mixed ? FLAG_MIXED : 0) | (m->sharded ? FLAG_SHARDED : 0));
    double t[4] = {m->parse_ms, m->convert_ms, m->transfer_ms, m->store_ms};
    memcpy(h + OFF_TIMINGS, t, sizeof t);
    memcpy(h + OFF_ID, m->id, strnlen(m->id, MATFILE_ID_LEN));
    memcpy(h + OFF_NAME, m->name, strnlen(m->name, MATFILE_NAME_MAX));
    put32(h, OFF_PAYLOAD_CRC, payload_crc);
    put32(h, OFF_HEADER_CRC, crc_update(0, h, OFF_HEADER_CRC));
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int matfile_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int matfile_write(const char *dir, const matfile_meta *meta, const spmv_csr *csr, spmv_error *err)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    unsigned char h[MATFILE_HEADER_BYTES];
    size_t sz[3] = {0, 0, 0};
    int fd = -1;
    const char *what = "write";
    if (payload_sizes(csr->rows, csr->nnz, csr->dtype, sz) != 0)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "matrix too large to store");
    if (matfile_path(dir, meta->id, path, sizeof path) != 0 ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, meta->id) >= (int)sizeof tmp)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "state directory path too long");

    uint32_t crc = crc_update(0, csr->row_ptr, sz[0]);
    crc = crc_update(crc, csr->col, sz[1]);
    crc = crc_update(crc, csr->val, sz[2]);
    encode_header(h, meta, csr, crc);

    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        what = "create";
        goto fail;
    }
    if (write_all(fd, h, sizeof h) || write_all(fd, csr->row_ptr, sz[0]) ||
        write_all(fd, csr->col, sz[1]) || write_all(fd, csr->val, sz[2]))
        goto fail;
    what = "fsync";
    if (fsync(fd) != 0)
        goto fail;
    what = "close";
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    what = "rename";
    if (rename(tmp, path) != 0)
        goto fail;
    what = "fsync of the directory";
    if (matfile_sync_dir(dir) != 0) {
        /* answered 500: take the file back, and try once more to make
         * that durable so a crash does not resurrect it (best effort: the
         * directory just failed to sync) */
        int e = errno;
        unlink(path);
        matfile_sync_dir(dir);
        errno = e;
        goto fail;
    }
    return SPMV_OK;
fail: {
        int e = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return spmv_error_set(err, SPMV_ERR_IO, 0, "storing matrix %s: %s failed: %s",
                              meta->id, what, strerror(e));
    }
}

static int read_all(int fd, void *data, size_t len)
{
    char *p = data;
    while (len > 0) {
        ssize_t n = read(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int decode_header(const unsigned char *h, matfile_meta *m, spmv_csr *csr, uint32_t *payload_crc,
                         const char *path, spmv_error *err)
{
    if (memcmp(h + OFF_MAGIC, MATFILE_MAGIC, 8) != 0)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: not a spmvd matrix file (bad magic)", path);
    if (get32(h, OFF_HEADER_CRC) != crc_update(0, h, OFF_HEADER_CRC))
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: header checksum mismatch", path);
    uint32_t version = get32(h, OFF_VERSION);
    if (version != MATFILE_VERSION)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: format version %u, this spmvd reads %u",
                              path, version, MATFILE_VERSION);
    uint32_t dtype = get32(h, OFF_DTYPE), sym = get32(h, OFF_SYMMETRY);
    int32_t rows = (int32_t)get32(h, OFF_ROWS), cols = (int32_t)get32(h, OFF_COLS);
    int64_t nnz = (int64_t)get64(h, OFF_NNZ);
    if (dtype > SPMV_FLOAT32 || sym > SPMV_MM_HERMITIAN || rows < 0 || cols < 0 || nnz < 0 ||
        nnz > INT32_MAX || h[OFF_ID + MATFILE_ID_LEN] != '\0' || h[OFF_NAME + MATFILE_NAME_MAX] != '\0')
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: header fields out of range", path);
    memset(m, 0, sizeof *m);
    memcpy(m->id, h + OFF_ID, MATFILE_ID_LEN);
    memcpy(m->name, h + OFF_NAME, MATFILE_NAME_MAX);
    m->symmetry = (spmv_mm_symmetry)sym;
    m->formats = get32(h, OFF_FORMATS);
    m->hack_size = (int32_t)get32(h, OFF_HACK);
    m->device = (int32_t)get32(h, OFF_DEVICE);
    m->created = (int64_t)get64(h, OFF_CREATED);
    uint32_t flags = get32(h, OFF_FLAGS);
    if ((flags & ~(uint32_t)(FLAG_MIXED | FLAG_SHARDED)) || ((flags & FLAG_MIXED) && dtype != SPMV_FLOAT64))
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: header flags 0x%x unknown or inconsistent", path, flags);
    m->mixed = (flags & FLAG_MIXED) != 0;
    m->sharded = (flags & FLAG_SHARDED) != 0;
    double t[4];
    memcpy(t, h + OFF_TIMINGS, sizeof t);
    m->parse_ms = t[0];
    m->convert_ms = t[1];
    m->transfer_ms = t[2];
    m->store_ms = t[3];
    memset(csr, 0, sizeof *csr);
    csr->rows = rows;
    csr->cols = cols;
    csr->nnz = nnz;
    csr->dtype = (spmv_dtype)dtype;
    *payload_crc = get32(h, OFF_PAYLOAD_CRC);
    return SPMV_OK;
}

/* The structure a CRC cannot vouch for (a file written by a bug). */
static int check_structure(const spmv_csr *c, const char *path, spmv_error *err)
{
    if (c->row_ptr[0] != 0 || c->row_ptr[c->rows] != c->nnz)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: row pointers do not span the entries", path);
    for (int32_t i = 0; i < c->rows; i++)
        if (c->row_ptr[i + 1] < c->row_ptr[i])
            return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: row pointers decrease at row %d", path, i);
    for (int64_t k = 0; k < c->nnz; k++)
        if (c->col[k] < 0 || c->col[k] >= c->cols)
            return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: column index out of range at entry %" PRId64,
                                  path, k);
    return SPMV_OK;
}

int matfile_read(const char *path, matfile_meta *meta, spmv_csr *out, spmv_error *err)
{
    unsigned char h[MATFILE_HEADER_BYTES];
    spmv_csr c = {0};
    uint32_t want_crc = 0;
    size_t sz[3] = {0, 0, 0};
    struct stat st;
    int rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || st.st_size < MATFILE_HEADER_BYTES || read_all(fd, h, sizeof h) != 0) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: shorter than a header", path);
        goto fail;
    }
    if ((rc = decode_header(h, meta, &c, &want_crc, path, err)) != 0)
        goto fail;
    if (payload_sizes(c.rows, c.nnz, c.dtype, sz) != 0 ||
        (uint64_t)st.st_size != MATFILE_HEADER_BYTES + (uint64_t)sz[0] + sz[1] + sz[2]) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: %lld bytes, the header promises %llu (truncated?)",
                            path, (long long)st.st_size,
                            (unsigned long long)(MATFILE_HEADER_BYTES + (uint64_t)sz[0] + sz[1] + sz[2]));
        goto fail;
    }
    c.row_ptr = malloc(sz[0]);
    c.col = malloc(sz[1] ? sz[1] : 1);
    c.val = malloc(sz[2] ? sz[2] : 1);
    if (!c.row_ptr || !c.col || !c.val) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of memory", path);
        goto fail;
    }
    if (read_all(fd, c.row_ptr, sz[0]) || read_all(fd, c.col, sz[1]) || read_all(fd, c.val, sz[2])) {
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "%s: read failed", path);
        goto fail;
    }
    uint32_t crc = crc_update(crc_update(crc_update(0, c.row_ptr, sz[0]), c.col, sz[1]), c.val, sz[2]);
    if (crc != want_crc) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: payload checksum mismatch", path);
        goto fail;
    }
    if ((rc = check_structure(&c, path, err)) != 0)
        goto fail;
    close(fd);
    *out = c;
    return SPMV_OK;
fail:
    free(c.row_ptr);
    free(c.col);
    free(c.val);
    close(fd);
    return rc;
}

int matfile_remove(const char *dir, const char *id, spmv_error *err)
{
    char path[PATH_MAX];
    if (matfile_path(dir, id, path, sizeof path) != 0)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "state directory path too long");
    if (unlink(path) != 0 && errno != ENOENT)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "removing %s: %s", path, strerror(errno));
    if (matfile_sync_dir(dir) != 0)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "fsync of %s: %s", dir, strerror(errno));
    return SPMV_OK;
}
