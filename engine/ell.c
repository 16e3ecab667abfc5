/* ell.c — the ELL (ELLPACK) format: CSR -> ELL, ELL -> COO, byte count.
 *
 * Every row is padded to the longest row's length (`width`) and the slots
 * are stored column-major, entry k of row i at k*rows + i, so that
 * consecutive rows read consecutive addresses (coalesced on a GPU, unit
 * stride for a vectorising CPU loop). Padding slots hold column -1
 * (SPMV_PAD_COL) and value 0: kernels skip them by the column, never by
 * the value, so an Inf or NaN in x cannot leak through a padding slot.
 *
 * One long row makes ELL huge (width x rows slots), so the conversion takes
 * a slot bound and refuses past it, naming width and rows.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

void spmv_ell_free(spmv_ell *m)
{
    if (!m)
        return;
    free(m->col);
    free(m->val);
    memset(m, 0, sizeof *m);
}

spmv_format_info spmv_ell_info(const spmv_ell *m)
{
    int64_t slots = (int64_t)m->width * m->rows;
    return spmv_info_of((size_t)slots * (sizeof(int32_t) + spmv_dtype_size(m->dtype)), slots, m->nnz);
}

/* Checks width x rows against the bound and against size_t overflow. */
static int check_slots(int32_t width, int32_t rows, int64_t max_slots, spmv_dtype dtype, spmv_error *err)
{
    int64_t slots = (int64_t)width * rows; /* < 2^62: cannot overflow */
    if (max_slots > 0 && slots > max_slots)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "ELL would need width %d x %d rows = %lld slots, above the limit of %lld",
                              width, rows, (long long)slots, (long long)max_slots);
    if ((uint64_t)slots > SIZE_MAX / (sizeof(int32_t) + spmv_dtype_size(dtype)))
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "ELL of width %d x %d rows does not fit the address space", width, rows);
    return SPMV_OK;
}

/* Fills a column-major ELL block of `width` slots for rows [r0, r1) of `in`,
 * taking at most `width` entries of each row, with a row stride of `stride`
 * (rows for ELL, hack_size for an HLL slice); returns the entries stored. */
int64_t spmv_ell_fill_block(const spmv_csr *in, int32_t r0, int32_t r1, int32_t width, int32_t stride,
                            int32_t *col, void *val)
{
    int64_t stored = 0;
    for (int64_t k = 0; k < width; k++) {
        for (int64_t i = r0; i < (int64_t)r0 + stride; i++) { /* 64-bit: r0 + stride may pass INT32_MAX */
            int64_t slot = k * stride + (i - r0);
            int64_t src = i < r1 ? (int64_t)in->row_ptr[i] + k : -1;
            if (i < r1 && src < in->row_ptr[i + 1]) {
                col[slot] = in->col[src];
                spmv_val_copy(val, slot, in->val, src, in->dtype);
                stored++;
            } else {
                col[slot] = SPMV_PAD_COL;
                spmv_val_set(val, in->dtype, slot, 0.0);
            }
        }
    }
    return stored;
}

/* The ELL part of HYB shares this with plain ELL: `width` may be below the
 * longest row, in which case only the first `width` entries go in. */
int spmv_ell_build(const spmv_csr *in, int32_t width, int64_t max_slots, spmv_ell *out, spmv_error *err)
{
    int st = SPMV_OK;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)) ||
        (st = check_slots(width, in->rows, max_slots, in->dtype, err)))
        return st;
    int64_t slots = (int64_t)width * in->rows;
    out->col = spmv_array_alloc(slots, sizeof(int32_t), &st);
    out->val = spmv_array_alloc(slots, spmv_dtype_size(in->dtype), &st);
    if (!out->col || !out->val)
        goto fail;
    out->rows = in->rows;
    out->cols = in->cols;
    out->width = width;
    out->dtype = in->dtype;
    out->nnz = spmv_ell_fill_block(in, 0, in->rows, width, in->rows, out->col, out->val);
    return SPMV_OK;
fail:
    spmv_ell_free(out);
    return spmv_error_set(err, st, 0, "cannot allocate an ELL of width %d x %d rows (%s)",
                          width, in->rows, spmv_strerror(st));
}

int spmv_csr_to_ell(const spmv_csr *in, int64_t max_slots, spmv_ell *out, spmv_error *err)
{
    return spmv_ell_build(in, spmv_csr_max_row(in), max_slots, out, err);
}

int64_t spmv_ell_count_entries(const int32_t *col, int64_t slots)
{
    int64_t n = 0;
    for (int64_t s = 0; s < slots; s++)
        n += col[s] != SPMV_PAD_COL;
    return n;
}

int64_t spmv_ell_row_to_coo(const int32_t *col, const void *val, spmv_dtype dtype, int64_t first, int64_t stride,
                            int64_t width, int32_t row, spmv_coo *out, int64_t n)
{
    for (int64_t k = 0; k < width; k++) {
        int64_t slot = first + k * stride;
        if (col[slot] == SPMV_PAD_COL)
            continue;
        out->row[n] = row;
        out->col[n] = col[slot];
        spmv_val_copy(out->val, n, val, slot, dtype);
        n++;
    }
    return n;
}

int spmv_ell_to_coo(const spmv_ell *in, spmv_coo *out, spmv_error *err)
{
    if (in->rows < 0 || in->width < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "negative ELL shape");
    int64_t slots = (int64_t)in->width * in->rows;
    int st = spmv_coo_alloc(out, in->rows, in->cols, spmv_ell_count_entries(in->col, slots), in->dtype, err);
    if (st)
        return st;
    int64_t n = 0;
    for (int32_t i = 0; i < in->rows; i++)
        n = spmv_ell_row_to_coo(in->col, in->val, in->dtype, i, in->rows, in->width, i, out, n);
    return SPMV_OK;
}
