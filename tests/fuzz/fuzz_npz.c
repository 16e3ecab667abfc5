/* fuzz_npz.c — libFuzzer target: the .npz reader (engine/npz.c).
 *
 * The input is the archive itself, read from memory with
 * spmv_npz_read_buffer under small limits (64 Ki rows and columns, 1 Mi
 * entries), so mutations reach the zip directory, the deflate streams, the
 * .npy headers (descr, shape, version) and every array check. Any input
 * must give SPMV_OK or an error status with a message; never a crash, a
 * read past a member or an allocation past the limits. A matrix that loads
 * must be sound: sorted by row then column without duplicates, every index
 * inside the shape, nnz within the limit. The CSR reader
 * (spmv_npz_read_buffer_csr: straight into the CSR, or through the COO)
 * must agree: the same status and message, and on success exactly the
 * CSR spmv_coo_to_csr makes of the COO; read again with 64-bit row
 * offsets (offsets64), the same matrix.
 *
 * Seeds (tests/fuzz/corpus/fuzz_npz/) are small archives written by
 * spmv-gen --npz (CSR, deflated and stored) and by SciPy (CSC, COO).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spmv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spmv_mm_options o = {.max_rows = 1 << 16, .max_cols = 1 << 16, .max_nnz = 1 << 20, .threads = 1};
    spmv_coo c;
    spmv_csr direct, want;
    spmv_error err = {0}, err2 = {0};
    int st = spmv_npz_read_buffer(data, size, &o, &c, NULL, &err);
    int st2 = spmv_npz_read_buffer_csr(data, size, &o, &direct, NULL, &err2);
    if (st2 != st || (st != SPMV_OK && strcmp(err.message, err2.message) != 0))
        __builtin_trap(); /* the CSR reader disagrees */
    if (st != SPMV_OK) {
        if (st > 0 || !err.message[0])
            __builtin_trap(); /* an error without its status or its message */
        return 0;
    }
    if (spmv_coo_to_csr(&c, SPMV_FLOAT64, &want, &err) != SPMV_OK)
        __builtin_trap();
    if (want.rows != direct.rows || want.cols != direct.cols || want.nnz != direct.nnz ||
        memcmp(want.row_ptr, direct.row_ptr, ((size_t)want.rows + 1) * sizeof(int32_t)) != 0 ||
        (want.nnz && (memcmp(want.col, direct.col, (size_t)want.nnz * sizeof(int32_t)) != 0 ||
                      memcmp(want.val, direct.val, (size_t)want.nnz * sizeof(double)) != 0)))
        __builtin_trap(); /* not the COO reader's CSR */
    /* the same archive with 64-bit row offsets: the same matrix, wide */
    spmv_mm_options o64 = o;
    o64.offsets64 = true;
    spmv_csr wide;
    if (spmv_npz_read_buffer_csr(data, size, &o64, &wide, NULL, &err2) != SPMV_OK)
        __builtin_trap();
    if (wide.nnz != want.nnz || wide.rows != want.rows || (want.nnz && memcmp(want.col, wide.col, (size_t)want.nnz * 4)))
        __builtin_trap();
    for (int64_t i = 0; i <= want.rows; i++)
        if (spmv_csr_row_begin(&wide, i) != want.row_ptr[i])
            __builtin_trap();
    spmv_csr_free(&wide);
    spmv_csr_free(&want);
    spmv_csr_free(&direct);
    if (c.nnz > o.max_nnz || c.rows > o.max_rows || c.cols > o.max_cols)
        __builtin_trap();
    for (int64_t k = 0; k < c.nnz; k++) {
        if (c.row[k] < 0 || c.row[k] >= c.rows || c.col[k] < 0 || c.col[k] >= c.cols)
            __builtin_trap();
        if (k > 0 && (c.row[k] < c.row[k - 1] || (c.row[k] == c.row[k - 1] && c.col[k] <= c.col[k - 1])))
            __builtin_trap();
    }
    spmv_coo_free(&c);
    return 0;
}
