/* matfile.h — one stored matrix on disk: a binary CSR file with a checksum.
 *
 * The state directory holds one file per matrix, named <uuid>.csr. A file is
 * a 512-byte header (magic, format version, dtype, sizes, name, flags (mixed), symmetry as
 * read, upload options and timings, the content hash (SHA-256, spmv_csr_sha256;
 * files written before it have none and get it computed at reload), CRC-32 of
 * the payload, CRC-32 of the header) followed by the CSR arrays row_ptr, col
 * and val, little-endian.
 * A generated matrix (upload option `generate`) is stored as its recipe in
 * the header, with no arrays: matfile_read builds it again by formula
 * (spmv_gen_csr) and checks its shape and non-zeros against the header's,
 * so a matrix too large for the disk survives a restart.
 * Writes go to a temp file that is fsync'd and renamed over, then the
 * directory is fsync'd, so a crash leaves either the old state or the new,
 * never half a file under the final name. Reads verify everything they can:
 * a file that fails is reported SPMV_ERR_CORRUPT with what failed.
 */
#ifndef SPMVD_MATFILE_H
#define SPMVD_MATFILE_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "spmv.h"

#define MATFILE_MAGIC "SPMVDCSR"
#define MATFILE_VERSION 1u
#define MATFILE_HEADER_BYTES 512
#define MATFILE_SUFFIX ".csr"
#define MATFILE_ID_LEN 36
#define MATFILE_NAME_MAX 255

/* Where a matrix lives, kept so a restart puts it back on the same kind of
 * device. */
#define MATFILE_DEVICE_HOST (-1)

typedef struct matfile_meta {
    char id[MATFILE_ID_LEN + 1];
    char name[MATFILE_NAME_MAX + 1];
    spmv_mm_symmetry symmetry;
    unsigned formats;          /* formats asked for at upload */
    int32_t hack_size;
    int32_t device;            /* MATFILE_DEVICE_HOST or the GPU index */
    int64_t created;           /* unix seconds */
    bool mixed;                /* dtype "mixed": float64 CSR whose values were rounded to float32 at upload */
    bool sharded;              /* uploaded with shard=true: re-sharded over the ranks at every start */
    bool generated;            /* made by `generate`: the file holds its recipe, not its arrays */
    spmv_gen_spec recipe;      /* when generated: spmv_gen_csr rebuilds the CSR from it at reload */
    bool has_sha256;           /* sha256 is set (matrix_new_from_csr computes it when not) */
    bool symmetry_known;       /* `symmetric` is set (matrix_new_from_csr finds it when not) */
    bool symmetric;            /* the CSR equals its transpose exactly (spmv_csr_symmetric): op t is op n */
    unsigned char sha256[32];  /* the CSR's content hash (spmv_csr_sha256) */
    double parse_ms, convert_ms, transfer_ms, store_ms;
} matfile_meta;

/* "<dir>/<id>.csr" into buf; -1 if it does not fit. */
int matfile_path(const char *dir, const char *id, char *buf, size_t len);

/* Writes meta + csr durably (temp, fsync, rename, fsync dir). On failure
 * nothing is left under either name and the status is SPMV_ERR_IO. */
int matfile_write(const char *dir, const matfile_meta *meta, const spmv_csr *csr, spmv_error *err);

/* matfile_write in two halves, for a caller with other work to overlap
 * with the write (an upload's device copy): matfile_stage writes the whole
 * file under its temporary name (.<id>.tmp, which a restart removes) and
 * fsyncs it; matfile_commit optionally rewrites the header from a newer
 * meta (same id and csr: timings measured meanwhile) and fsyncs that, then
 * renames the file to <id>.csr and fsyncs the directory; matfile_discard
 * removes a staged file instead. A failed stage or commit leaves nothing
 * under either name (SPMV_ERR_IO naming the step); after a failed commit
 * there is nothing to discard. `abandon` (NULL: never), set by another
 * thread, stops a stage between two slices of the write: nothing left,
 * SPMV_ERR_UNAVAILABLE. */
typedef struct matfile_staged {
    int fd;                    /* the temporary file, open; -1 once closed */
    uint32_t payload_crc;
    char id[MATFILE_ID_LEN + 1];
    char path[PATH_MAX], tmp[PATH_MAX];   /* tmp empty: nothing to discard */
} matfile_staged;

int matfile_stage(const char *dir, const matfile_meta *meta, const spmv_csr *csr, const atomic_bool *abandon,
                  matfile_staged *st, spmv_error *err);
int matfile_commit(const char *dir, matfile_staged *st, const matfile_meta *meta, const spmv_csr *csr,
                   spmv_error *err);
void matfile_discard(matfile_staged *st);

/* Asked between the header and the arrays: a matrix whose CSR takes
 * `csr_bytes` and whose reading (or rebuilding, when generated) `peak`
 * bytes at most; non-zero refuses the file with that status, nothing of
 * it allocated. */
typedef int (*matfile_admit_fn)(void *ctx, const matfile_meta *meta, int64_t csr_bytes, int64_t peak,
                                spmv_error *err);

/* Reads and verifies a file; on success *out owns fresh arrays. `admit`
 * (NULL: none) may refuse it once its header is read. */
int matfile_read(const char *path, matfile_admit_fn admit, void *ctx, matfile_meta *meta, spmv_csr *out,
                 spmv_error *err);

/* Unlinks <dir>/<id>.csr and fsyncs the directory. */
int matfile_remove(const char *dir, const char *id, spmv_error *err);

#endif
