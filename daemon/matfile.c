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
#include "fileio.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "matfile assumes a little-endian host");

enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_DTYPE = 12, OFF_ROWS = 16, OFF_COLS = 20,
    OFF_NNZ = 24, OFF_SYMMETRY = 32, OFF_FORMATS = 36, OFF_HACK = 40, OFF_DEVICE = 44,
    OFF_CREATED = 48, OFF_TIMINGS = 56, OFF_ID = 88, OFF_NAME = 128, OFF_FLAGS = 384,
    /* a generated matrix's recipe (FLAG_RECIPE): spmv_gen_spec's fields */
    OFF_RECIPE_KIND = 400, OFF_RECIPE_PER_ROW = 404, OFF_RECIPE_N = 408, OFF_RECIPE_DENSE = 416,
    OFF_RECIPE_SEED = 424,
    OFF_SHA256 = 440,           /* 32 bytes: the CSR's content hash (FLAG_SHA256; spmv_csr_sha256) */
    OFF_PAYLOAD_CRC = 504, OFF_HEADER_CRC = 508,
};

/* OFF_FLAGS bits (0 in files written before they existed). */
enum {
    FLAG_MIXED = 1u << 0,
    FLAG_SHARDED = 1u << 1,
    FLAG_WIDE = 1u << 2,        /* 64-bit row pointers (a wide CSR: spmv_csr_wide) */
    FLAG_RECIPE = 1u << 3,      /* no arrays: the recipe at OFF_RECIPE_* builds them */
    FLAG_SHA256 = 1u << 4,      /* OFF_SHA256 holds the content hash (else a reload computes it) */
    FLAG_SYMMETRY_KNOWN = 1u << 5, /* FLAG_SYMMETRIC says whether A equals its transpose (else a reload finds out) */
    FLAG_SYMMETRIC = 1u << 6,
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
/* Past this many entries a file is refused as damaged (8 PiB of values). */
#define MATFILE_MAX_NNZ (INT64_C(1) << 50)

static int payload_sizes(int32_t rows, int64_t nnz, spmv_dtype dtype, bool wide, size_t sz[3])
{
    if (rows < 0 || nnz < 0 || nnz > (wide ? MATFILE_MAX_NNZ : INT32_MAX))
        return -1;
    sz[0] = ((size_t)rows + 1) * (wide ? sizeof(int64_t) : sizeof(int32_t));
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
    put32(h, OFF_FLAGS, (m->mixed ? FLAG_MIXED : 0) | (m->sharded ? FLAG_SHARDED : 0) |
                            (spmv_csr_wide(csr) ? FLAG_WIDE : 0) | (m->generated ? FLAG_RECIPE : 0) |
                            (m->has_sha256 ? FLAG_SHA256 : 0) | (m->symmetry_known ? FLAG_SYMMETRY_KNOWN : 0) |
                            (m->symmetry_known && m->symmetric ? FLAG_SYMMETRIC : 0));
    if (m->has_sha256)
        memcpy(h + OFF_SHA256, m->sha256, sizeof m->sha256);
    if (m->generated) {
        put32(h, OFF_RECIPE_KIND, (uint32_t)m->recipe.kind);
        put32(h, OFF_RECIPE_PER_ROW, (uint32_t)m->recipe.per_row);
        put64(h, OFF_RECIPE_N, (uint64_t)m->recipe.n);
        put64(h, OFF_RECIPE_DENSE, (uint64_t)m->recipe.dense_len);
        put64(h, OFF_RECIPE_SEED, m->recipe.seed);
    }
    double t[4] = {m->parse_ms, m->convert_ms, m->transfer_ms, m->store_ms};
    memcpy(h + OFF_TIMINGS, t, sizeof t);
    memcpy(h + OFF_ID, m->id, strnlen(m->id, MATFILE_ID_LEN));
    memcpy(h + OFF_NAME, m->name, strnlen(m->name, MATFILE_NAME_MAX));
    put32(h, OFF_PAYLOAD_CRC, payload_crc);
    put32(h, OFF_HEADER_CRC, crc_update(0, h, OFF_HEADER_CRC));
}

/* The payload is checksummed and written in slices small enough to stay in
 * cache between the two (one pass over the matrix, not two), and every
 * WRITEBACK_BYTES the kernel is asked to start writing what came before
 * (sync_file_range): otherwise nothing reaches the disk until the dirty
 * pages pass the writeback threshold (a tenth of memory), and the fsync
 * then writes a large matrix at disk speed after all of it was copied. */
#define SLICE_BYTES ((size_t)2 << 20)
#define WRITEBACK_BYTES ((off_t)64 << 20)

typedef struct payload_writer {
    int fd;
    const atomic_bool *abandon;
    uint32_t crc;
    off_t off, flushed;        /* bytes of the file written; handed to writeback */
} payload_writer;

/* 0, -1 (errno says why) or ABANDONED. */
#define ABANDONED (-2)

static int write_payload(payload_writer *w, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        size_t n = len < SLICE_BYTES ? len : SLICE_BYTES;
        if (w->abandon && atomic_load(w->abandon))
            return ABANDONED;
        w->crc = crc_update(w->crc, p, n);
        if (spmv_write_all(w->fd, p, n) != 0)
            return -1;
        w->off += (off_t)n;
        if (w->off - w->flushed >= WRITEBACK_BYTES) {
            (void)sync_file_range(w->fd, w->flushed, w->off - w->flushed, SYNC_FILE_RANGE_WRITE); /* a hint */
            w->flushed = w->off;
        }
        p += n;
        len -= n;
    }
    return 0;
}

static int staged_fail(matfile_staged *st, const char *what, spmv_error *err)
{
    int e = errno;
    matfile_discard(st);
    return spmv_error_set(err, SPMV_ERR_IO, 0, "storing matrix %s: %s failed: %s", st->id, what, strerror(e));
}

int matfile_stage(const char *dir, const matfile_meta *meta, const spmv_csr *csr, const atomic_bool *abandon,
                  matfile_staged *st, spmv_error *err)
{
    unsigned char h[MATFILE_HEADER_BYTES];
    size_t sz[3] = {0, 0, 0};
    memset(st, 0, sizeof *st);
    st->fd = -1;
    snprintf(st->id, sizeof st->id, "%s", meta->id);
    if (payload_sizes(csr->rows, csr->nnz, csr->dtype, spmv_csr_wide(csr), sz) != 0)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "matrix too large to store");
    if (matfile_path(dir, meta->id, st->path, sizeof st->path) != 0 ||
        snprintf(st->tmp, sizeof st->tmp, "%s/.%s.tmp", dir, meta->id) >= (int)sizeof st->tmp)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "state directory path too long");
    st->fd = open(st->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (st->fd < 0)
        return staged_fail(st, "create", err);
    /* the payload after the header's place, then the header with its CRC */
    payload_writer w = {st->fd, abandon, 0, MATFILE_HEADER_BYTES, MATFILE_HEADER_BYTES};
    int wr = lseek(st->fd, MATFILE_HEADER_BYTES, SEEK_SET) != MATFILE_HEADER_BYTES ? -1 : 0;
    const void *ptr = spmv_csr_wide(csr) ? (const void *)csr->row_ptr64 : (const void *)csr->row_ptr;
    if (!wr && !meta->generated && !(wr = write_payload(&w, ptr, sz[0])) && !(wr = write_payload(&w, csr->col, sz[1])))
        wr = write_payload(&w, csr->val, sz[2]);
    if (wr == ABANDONED) {
        matfile_discard(st);
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "storing matrix %s: abandoned", st->id);
    }
    if (wr)
        return staged_fail(st, "write", err);
    st->payload_crc = w.crc;
    encode_header(h, meta, csr, st->payload_crc);
    if (spmv_pwrite_all(st->fd, h, sizeof h, 0) != 0)
        return staged_fail(st, "write", err);
    if (fsync(st->fd) != 0)
        return staged_fail(st, "fsync", err);
    return SPMV_OK;
}

int matfile_commit(const char *dir, matfile_staged *st, const matfile_meta *meta, const spmv_csr *csr,
                   spmv_error *err)
{
    if (meta) {
        unsigned char h[MATFILE_HEADER_BYTES];
        encode_header(h, meta, csr, st->payload_crc);
        if (spmv_pwrite_all(st->fd, h, sizeof h, 0) != 0)
            return staged_fail(st, "write", err);
        if (fdatasync(st->fd) != 0)
            return staged_fail(st, "fsync", err);
    }
    int fd = st->fd;
    st->fd = -1;
    if (close(fd) != 0)
        return staged_fail(st, "close", err);
    if (rename(st->tmp, st->path) != 0)
        return staged_fail(st, "rename", err);
    st->tmp[0] = '\0'; /* under its own name now: discard no longer applies */
    if (spmv_sync_dir(dir) != 0) {
        /* answered 500: take the file back, and try once more to make
         * that durable so a crash does not resurrect it (best effort: the
         * directory just failed to sync) */
        int e = errno;
        unlink(st->path);
        spmv_sync_dir(dir);
        errno = e;
        return staged_fail(st, "fsync of the directory", err);
    }
    return SPMV_OK;
}

void matfile_discard(matfile_staged *st)
{
    if (st->fd >= 0)
        close(st->fd);
    st->fd = -1;
    if (st->tmp[0])
        unlink(st->tmp);
    st->tmp[0] = '\0';
}

int matfile_write(const char *dir, const matfile_meta *meta, const spmv_csr *csr, spmv_error *err)
{
    matfile_staged st;
    int rc = matfile_stage(dir, meta, csr, NULL, &st, err);
    return rc ? rc : matfile_commit(dir, &st, NULL, csr, err);
}

static int decode_header(const unsigned char *h, matfile_meta *m, spmv_csr *csr, bool *wide_out,
                         uint32_t *payload_crc, const char *path, spmv_error *err)
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
    bool wide = (get32(h, OFF_FLAGS) & FLAG_WIDE) != 0;
    if (dtype > SPMV_FLOAT32 || sym > SPMV_MM_HERMITIAN || rows < 0 || cols < 0 || nnz < 0 ||
        nnz > (wide ? MATFILE_MAX_NNZ : INT32_MAX) || h[OFF_ID + MATFILE_ID_LEN] != '\0' ||
        h[OFF_NAME + MATFILE_NAME_MAX] != '\0')
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
    if ((flags & ~(uint32_t)(FLAG_MIXED | FLAG_SHARDED | FLAG_WIDE | FLAG_RECIPE | FLAG_SHA256 | FLAG_SYMMETRY_KNOWN |
                             FLAG_SYMMETRIC)) ||
        ((flags & FLAG_MIXED) && dtype != SPMV_FLOAT64))
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: header flags 0x%x unknown or inconsistent", path, flags);
    m->mixed = (flags & FLAG_MIXED) != 0;
    m->sharded = (flags & FLAG_SHARDED) != 0;
    m->generated = (flags & FLAG_RECIPE) != 0;
    m->has_sha256 = (flags & FLAG_SHA256) != 0;
    m->symmetry_known = (flags & FLAG_SYMMETRY_KNOWN) != 0;
    m->symmetric = m->symmetry_known && (flags & FLAG_SYMMETRIC) != 0;
    if (m->has_sha256)
        memcpy(m->sha256, h + OFF_SHA256, sizeof m->sha256);
    if (m->generated) {
        m->recipe.kind = (spmv_gen_kind)get32(h, OFF_RECIPE_KIND);
        m->recipe.per_row = (int32_t)get32(h, OFF_RECIPE_PER_ROW);
        m->recipe.n = (int64_t)get64(h, OFF_RECIPE_N);
        m->recipe.dense_len = (int64_t)get64(h, OFF_RECIPE_DENSE);
        m->recipe.seed = get64(h, OFF_RECIPE_SEED);
    }
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
    *wide_out = wide;
    *payload_crc = get32(h, OFF_PAYLOAD_CRC);
    return SPMV_OK;
}

/* The structure a CRC cannot vouch for (a file written by a bug). */
static int check_structure(const spmv_csr *c, const char *path, spmv_error *err)
{
    if (spmv_csr_row_begin(c, 0) != 0 || spmv_csr_row_begin(c, c->rows) != c->nnz)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: row pointers do not span the entries", path);
    for (int32_t i = 0; i < c->rows; i++)
        if (spmv_csr_row_begin(c, i + 1) < spmv_csr_row_begin(c, i))
            return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: row pointers decrease at row %d", path, i);
    for (int64_t k = 0; k < c->nnz; k++)
        if (c->col[k] < 0 || c->col[k] >= c->cols)
            return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: column index out of range at entry %" PRId64,
                                  path, k);
    return SPMV_OK;
}

/* A generated matrix read back: no arrays in the file; its recipe builds
 * them (float64 rounded for mixed), and the shape and non-zeros must be
 * the header's (a generator that changed since would give another
 * matrix: refused as damaged rather than served as the stored one). */
static int rebuild(const char *path, const matfile_meta *meta, const spmv_csr *want, bool wide, uint64_t size,
                   spmv_csr *out, spmv_error *err)
{
    spmv_csr c = {0};
    spmv_error e = {0};
    if (size != MATFILE_HEADER_BYTES)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: a generated matrix's file of %llu bytes, not %d", path,
                              (unsigned long long)size, MATFILE_HEADER_BYTES);
    /* The header's shape, which the caller admitted, bounds the build: a
     * recipe of another shape is refused before a row of it is counted (a
     * power-law recipe of 2^31 rows under a small header would otherwise
     * walk every row), and its non-zeros bound the entries allocated. */
    int64_t rows = 0, cols = 0;
    if (spmv_gen_shape(&meta->recipe, &rows, &cols, &e) != SPMV_OK)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: its recipe: %s", path, e.message);
    if (rows != want->rows || cols != want->cols)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: its recipe gives a %lld x %lld matrix, the header says "
                              "%d x %d", path, (long long)rows, (long long)cols, want->rows, want->cols);
    int rc = spmv_gen_csr(&meta->recipe, meta->mixed ? SPMV_FLOAT64 : want->dtype, wide, want->nnz, &c, &e);
    if (rc == SPMV_OK && meta->mixed)
        rc = spmv_csr_round_to_float32(&c, &e);
    if (rc != SPMV_OK) {
        spmv_csr_free(&c);
        return spmv_error_set(err, rc == SPMV_ERR_NOMEM ? SPMV_ERR_NOMEM : SPMV_ERR_CORRUPT, 0,
                              "%s: rebuilding the generated matrix from its recipe: %s", path, e.message);
    }
    if (c.rows != want->rows || c.cols != want->cols || c.nnz != want->nnz || c.dtype != want->dtype) {
        spmv_csr_free(&c);
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: its recipe now gives a %d x %d matrix of %lld "
                              "non-zeros, the header says %d x %d of %lld", path, c.rows, c.cols, (long long)c.nnz,
                              want->rows, want->cols, (long long)want->nnz);
    }
    *out = c;
    return SPMV_OK;
}

/* The caller's say on the sizes the header gives, before the arrays are
 * allocated: the CSR as read, and a rebuild's pass-1 offsets (8 bytes a
 * row) beside it. */
static int admit_header(matfile_admit_fn admit, void *ctx, const matfile_meta *meta, const spmv_csr *c, bool wide,
                        spmv_error *err)
{
    size_t sz[3];
    if (!admit || payload_sizes(c->rows, c->nnz, c->dtype, wide, sz) != 0)
        return SPMV_OK; /* bad sizes are decode_header's and the size check's to report */
    int64_t csr = (int64_t)(sz[0] + sz[1] + sz[2]);
    return admit(ctx, meta, csr, meta->generated ? csr + ((int64_t)c->rows + 1) * 8 : csr, err);
}

int matfile_read(const char *path, matfile_admit_fn admit, void *ctx, matfile_meta *meta, spmv_csr *out,
                 spmv_error *err)
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
    if (fstat(fd, &st) != 0 || st.st_size < MATFILE_HEADER_BYTES || spmv_read_all(fd, h, sizeof h) != 0) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: shorter than a header", path);
        goto fail;
    }
    bool wide = false;
    if ((rc = decode_header(h, meta, &c, &wide, &want_crc, path, err)) != 0 ||
        (rc = admit_header(admit, ctx, meta, &c, wide, err)) != 0)
        goto fail;
    if (meta->generated) {
        close(fd);
        return rebuild(path, meta, &c, wide, (uint64_t)st.st_size, out, err);
    }
    if (payload_sizes(c.rows, c.nnz, c.dtype, wide, sz) != 0 ||
        (uint64_t)st.st_size != MATFILE_HEADER_BYTES + (uint64_t)sz[0] + sz[1] + sz[2]) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "%s: %lld bytes, the header promises %llu (truncated?)",
                            path, (long long)st.st_size,
                            (unsigned long long)(MATFILE_HEADER_BYTES + (uint64_t)sz[0] + sz[1] + sz[2]));
        goto fail;
    }
    void *ptr = malloc(sz[0]);
    if (wide)
        c.row_ptr64 = ptr;
    else
        c.row_ptr = ptr;
    c.col = malloc(sz[1] ? sz[1] : 1);
    c.val = malloc(sz[2] ? sz[2] : 1);
    if (!ptr || !c.col || !c.val) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of memory", path);
        goto fail;
    }
    if (spmv_read_all(fd, ptr, sz[0]) || spmv_read_all(fd, c.col, sz[1]) || spmv_read_all(fd, c.val, sz[2])) {
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "%s: read failed", path);
        goto fail;
    }
    uint32_t crc = crc_update(crc_update(crc_update(0, ptr, sz[0]), c.col, sz[1]), c.val, sz[2]);
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
    free(c.row_ptr64);
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
    if (spmv_sync_dir(dir) != 0)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "fsync of %s: %s", dir, strerror(errno));
    return SPMV_OK;
}
