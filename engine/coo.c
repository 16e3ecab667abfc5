/* coo.c — the COO format: allocation, copies, dtype changes, COO -> CSR.
 *
 * COO is what the Matrix Market reader produces and what every other format
 * round-trips to, so it is the engine's interchange format: sorted by row,
 * then column, without duplicates. spmv_coo_to_csr is the one entry into
 * the kernel formats; it is a counting sort by row (O(nnz + rows)) and stays
 * correct for input that breaks the contract (unsorted, duplicates): rows
 * are sorted by column where needed and duplicates summed, as the reader
 * would have done.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

int spmv_coo_alloc(spmv_coo *m, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dtype, spmv_error *err)
{
    int st = SPMV_OK;
    memset(m, 0, sizeof *m);
    if (rows < 0 || cols < 0 || nnz < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "negative COO shape %d x %d, %lld non-zeros",
                              rows, cols, (long long)nnz);
    m->row = spmv_array_alloc(nnz, sizeof(int32_t), &st);
    m->col = spmv_array_alloc(nnz, sizeof(int32_t), &st);
    m->val = spmv_array_alloc(nnz, spmv_dtype_size(dtype), &st);
    if (!m->row || !m->col || !m->val)
        goto fail;
    m->rows = rows;
    m->cols = cols;
    m->nnz = nnz;
    m->dtype = dtype;
    return SPMV_OK;
fail:
    spmv_coo_free(m);
    return spmv_error_set(err, st, 0, "cannot allocate a COO of %lld non-zeros (%s)",
                          (long long)nnz, spmv_strerror(st));
}

void spmv_coo_free(spmv_coo *m)
{
    if (!m)
        return;
    free(m->row);
    free(m->col);
    free(m->val);
    memset(m, 0, sizeof *m);
}

spmv_format_info spmv_coo_info(const spmv_coo *m)
{
    return spmv_info_of((size_t)m->nnz * (2 * sizeof(int32_t) + spmv_dtype_size(m->dtype)), 0, 0);
}

int spmv_coo_convert(const spmv_coo *in, spmv_dtype dtype, spmv_coo *out, spmv_error *err)
{
    int st = spmv_coo_alloc(out, in->rows, in->cols, in->nnz, dtype, err);
    if (st)
        return st;
    size_t idx = (size_t)in->nnz * sizeof(int32_t);
    memcpy(out->row, in->row, idx);
    memcpy(out->col, in->col, idx);
    if (dtype == in->dtype)
        memcpy(out->val, in->val, (size_t)in->nnz * spmv_dtype_size(dtype));
    else
        for (int64_t k = 0; k < in->nnz; k++)
            spmv_val_set(out->val, dtype, k, spmv_val_get(in->val, in->dtype, k));
    return SPMV_OK;
}

int spmv_coo_copy(const spmv_coo *in, spmv_coo *out, spmv_error *err)
{
    return spmv_coo_convert(in, in->dtype, out, err);
}

/* ------------------------------------------------------------ COO -> CSR */

static int check_coo_indices(const spmv_coo *in, spmv_error *err)
{
    for (int64_t k = 0; k < in->nnz; k++)
        if (in->row[k] < 0 || in->row[k] >= in->rows || in->col[k] < 0 || in->col[k] >= in->cols)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                  "COO entry %lld at (%d, %d) lies outside the %d x %d matrix",
                                  (long long)k, in->row[k], in->col[k], in->rows, in->cols);
    return SPMV_OK;
}

/* Insertion sort of one row by column (rows that break the COO contract
 * only; a sorted row costs one comparison per entry). */
static void sort_row(int32_t *col, void *val, spmv_dtype dtype, int32_t begin, int32_t end)
{
    for (int32_t k = begin + 1; k < end; k++) {
        int32_t c = col[k];
        double v = spmv_val_get(val, dtype, k);
        int32_t j = k;
        while (j > begin && col[j - 1] > c) {
            col[j] = col[j - 1];
            spmv_val_copy(val, j, val, j - 1, dtype);
            j--;
        }
        col[j] = c;
        spmv_val_set(val, dtype, j, v);
    }
}

/* Sorts each row by column and sums duplicates in place, compacting the
 * arrays; returns the new nnz. Only called when the input was not sorted. */
static int32_t canonicalise_rows(spmv_csr *a)
{
    int32_t w = 0;
    int32_t begin = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int32_t end = a->row_ptr[i + 1];
        sort_row(a->col, a->val, a->dtype, begin, end);
        a->row_ptr[i] = w;
        for (int32_t k = begin; k < end; k++) {
            if (w > a->row_ptr[i] && a->col[w - 1] == a->col[k]) {
                double s = spmv_val_get(a->val, a->dtype, w - 1) + spmv_val_get(a->val, a->dtype, k);
                spmv_val_set(a->val, a->dtype, w - 1, s);
            } else {
                a->col[w] = a->col[k];
                spmv_val_copy(a->val, w, a->val, k, a->dtype);
                w++;
            }
        }
        begin = end;
    }
    a->row_ptr[a->rows] = w;
    return w;
}

/* Whether the scattered rows are strictly increasing in column. */
static bool rows_canonical(const spmv_csr *a)
{
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t k = a->row_ptr[i] + 1; k < a->row_ptr[i + 1]; k++)
            if (a->col[k - 1] >= a->col[k])
                return false;
    return true;
}

int spmv_coo_to_csr(const spmv_coo *in, spmv_dtype dtype, spmv_csr *out, spmv_error *err)
{
    int st = SPMV_OK;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)) || (st = check_coo_indices(in, err)))
        return st;
    out->rows = in->rows;
    out->cols = in->cols;
    out->nnz = in->nnz;
    out->dtype = dtype;
    out->row_ptr = spmv_array_alloc((int64_t)in->rows + 1, sizeof(int32_t), &st);
    out->col = spmv_array_alloc(in->nnz, sizeof(int32_t), &st);
    out->val = spmv_array_alloc(in->nnz, spmv_dtype_size(dtype), &st);
    if (!out->row_ptr || !out->col || !out->val)
        goto fail;

    /* Counting sort: count per row, exclusive scan, stable scatter. */
    memset(out->row_ptr, 0, ((size_t)in->rows + 1) * sizeof(int32_t));
    for (int64_t k = 0; k < in->nnz; k++)
        out->row_ptr[in->row[k] + 1]++;
    for (int32_t i = 0; i < in->rows; i++)
        out->row_ptr[i + 1] += out->row_ptr[i];
    for (int64_t k = 0; k < in->nnz; k++) {
        int32_t dst = out->row_ptr[in->row[k]]++;
        out->col[dst] = in->col[k];
        if (dtype == in->dtype)
            spmv_val_copy(out->val, dst, in->val, k, dtype);
        else
            spmv_val_set(out->val, dtype, dst, spmv_val_get(in->val, in->dtype, k));
    }
    /* The scatter advanced each row's start to the next row's: shift back. */
    for (int32_t i = in->rows; i > 0; i--)
        out->row_ptr[i] = out->row_ptr[i - 1];
    out->row_ptr[0] = 0;

    if (!rows_canonical(out))
        out->nnz = canonicalise_rows(out);
    return SPMV_OK;
fail:
    spmv_csr_free(out);
    return spmv_error_set(err, st, 0, "cannot allocate a CSR of %d rows and %lld non-zeros (%s)",
                          in->rows, (long long)in->nnz, spmv_strerror(st));
}
