/* fuzz_store.c — libFuzzer target: the store's file loader (matfile_read).
 *
 * A stored matrix file is a 512-byte header with two CRC-32s (header and
 * payload) and the CSR arrays; reload at start reads every file of the
 * state directory with matfile_read, which must turn any damage into
 * SPMV_ERR_CORRUPT and never read or allocate past what the file holds.
 * A fuzzer cannot forge checksums, so the first input byte says which to
 * put right before the read (bit 0: the payload's, bit 1: the header's,
 * computed over the mutated bytes), letting mutations reach the header
 * decoding and the structure checks behind them. The rest is the file.
 *
 * A file that loads must be sound: row pointers span the entries, every
 * column index is inside the matrix; it is written back with
 * matfile_write and read again, and the two reads must agree.
 *
 * A generated matrix's file holds its recipe, not its arrays, and reading
 * it builds the matrix by formula (matfile.h): a forged header could ask
 * for billions of entries that a real file never would. The daemon's
 * reload admits every file against its memory budget once the header is
 * read (matfile_admit_fn); the target does the same with a budget of
 * FUZZ_PEAK_BYTES, so a build the daemon would refuse is refused here too
 * (SPMV_ERR_LIMIT), and what is admitted goes through the same read,
 * rebuild and checks. (Its first form left out recipes whose grid side n
 * passed 4096, not their rows: a 3-D grid of 250^3 rows got through and
 * took libFuzzer's 30-second timeout in CI.)
 *
 * Seeds (tests/fuzz/corpus/fuzz_store/) are files the daemon wrote for
 * conformance matrices.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "daemon/matfile.h"
#include "tests/fuzz/fuzz_tmp.h"

static char dir[128], path[192];

static void setup(void)
{
    if (dir[0])
        return;
    const char *d = fuzz_tmp_make("spmvd-fuzz-store");
    if (!d)
        abort();
    snprintf(dir, sizeof dir, "%s", d);
    snprintf(path, sizeof path, "%s/input.csr", dir);
}

static void fix_crcs(uint8_t *f, size_t n, unsigned flags)
{
    if (n < MATFILE_HEADER_BYTES)
        return;
    if (flags & 1) {
        uint32_t c = (uint32_t)crc32(0, f + MATFILE_HEADER_BYTES, (uInt)(n - MATFILE_HEADER_BYTES));
        memcpy(f + 504, &c, 4);
    }
    if (flags & 2) {
        uint32_t c = (uint32_t)crc32(0, f, 508);
        memcpy(f + 508, &c, 4);
    }
}

static void check_sound(const spmv_csr *c)
{
    if (c->rows < 0 || c->cols < 0 || c->nnz < 0 || !c->row_ptr == !c->row_ptr64 ||
        spmv_csr_row_begin(c, 0) != 0 || spmv_csr_row_begin(c, c->rows) != c->nnz)
        __builtin_trap();
    for (int32_t i = 0; i < c->rows; i++)
        if (spmv_csr_row_begin(c, i + 1) < spmv_csr_row_begin(c, i))
            __builtin_trap();
    for (int64_t k = 0; k < c->nnz; k++)
        if (c->col[k] < 0 || c->col[k] >= c->cols)
            __builtin_trap();
}

static void round_trip(const matfile_meta *meta, const spmv_csr *c)
{
    matfile_meta m2 = *meta, m3;
    spmv_csr back;
    spmv_error err = {0};
    char again[256];
    /* the id names the file: keep a fixed valid one */
    snprintf(m2.id, sizeof m2.id, "00000000-0000-4000-8000-000000000000");
    snprintf(again, sizeof again, "%s/%s%s", dir, m2.id, MATFILE_SUFFIX);
    if (matfile_write(dir, &m2, c, &err) != SPMV_OK)
        __builtin_trap();
    if (matfile_read(again, NULL, NULL, &m3, &back, &err) != SPMV_OK)
        __builtin_trap();
    size_t vs = spmv_dtype_size(c->dtype);
    bool wide = spmv_csr_wide(c);
    if (back.rows != c->rows || back.cols != c->cols || back.nnz != c->nnz || back.dtype != c->dtype ||
        spmv_csr_wide(&back) != wide ||
        memcmp(wide ? (const void *)back.row_ptr64 : (const void *)back.row_ptr,
               wide ? (const void *)c->row_ptr64 : (const void *)c->row_ptr, ((size_t)c->rows + 1) * (wide ? 8 : 4)) != 0 ||
        (c->nnz && (memcmp(back.col, c->col, (size_t)c->nnz * 4) != 0 ||
                    memcmp(back.val, c->val, (size_t)c->nnz * vs) != 0)) ||
        strcmp(m3.name, meta->name) != 0)
        __builtin_trap();
    spmv_csr_free(&back);
    unlink(again);
}

/* What the daemon's budget would be for a reload here: the CSR read or
 * rebuilt, and a rebuild's offsets, at most this. */
#define FUZZ_PEAK_BYTES (32 << 20)

static int admit(void *ctx, const matfile_meta *meta, int64_t csr_bytes, int64_t peak, spmv_error *err)
{
    (void)ctx;
    (void)meta;
    if (csr_bytes > FUZZ_PEAK_BYTES || peak > FUZZ_PEAK_BYTES)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "a peak of %lld bytes, over the target's %d",
                              (long long)peak, FUZZ_PEAK_BYTES);
    return SPMV_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 1)
        return 0;
    size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1);
    if (!f)
        return 0;
    memcpy(f, data + 1, n);
    fix_crcs(f, n, data[0]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (n && write(fd, f, n) != (ssize_t)n))
        abort();
    close(fd);
    free(f);
    matfile_meta meta;
    spmv_csr c;
    spmv_error err = {0};
    int rc = matfile_read(path, admit, NULL, &meta, &c, &err);
    if (rc == SPMV_OK) {
        check_sound(&c);
        round_trip(&meta, &c);
        spmv_csr_free(&c);
    } else if (rc != SPMV_ERR_CORRUPT && rc != SPMV_ERR_NOMEM && rc != SPMV_ERR_LIMIT) {
        __builtin_trap(); /* a damaged file is CORRUPT (or over the budget), nothing else */
    }
    return 0;
}
