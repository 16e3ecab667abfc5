/* hll.c — the HLL (hacked ELLPACK, sliced ELL) format: CSR -> HLL,
 * HLL -> COO, byte count.
 *
 * ELL pays for the longest row in every row; HLL pays for it only within
 * its slice of hack_size rows. Slice s is an ELL block of its own width
 * slice_width[s], column-major with a row stride of hack_size (the last
 * slice padded to hack_size rows, as cuSPARSE's sliced ELL expects), at
 * slice_off[s] in the flattened col/val arrays (layout: engine/spmv.h).
 * Offsets are int64 because the padded total can exceed 2^31 slots even
 * when nnz fits 32 bits. Padding: column -1, value 0, as in ELL.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

void spmv_hll_free(spmv_hll *m)
{
    if (!m)
        return;
    free(m->slice_off);
    free(m->slice_width);
    free(m->col);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static int64_t hll_slots(const spmv_hll *m)
{
    return m->slice_off ? m->slice_off[m->nslices] : 0;
}

spmv_format_info spmv_hll_info(const spmv_hll *m)
{
    int64_t slots = hll_slots(m);
    return spmv_info_of((size_t)slots * (sizeof(int32_t) + spmv_dtype_size(m->dtype)) +
                            ((size_t)m->nslices + 1) * sizeof(int64_t) + (size_t)m->nslices * sizeof(int32_t),
                        slots, m->nnz);
}

/* Rows [*r0, *r1) of slice s, in 64-bit so rows near INT32_MAX cannot
 * overflow the sum. */
static void slice_rows(int32_t s, int32_t hack_size, int32_t rows, int32_t *r0, int32_t *r1)
{
    int64_t b = (int64_t)s * hack_size, e = b + hack_size;
    *r0 = (int32_t)b;
    *r1 = (int32_t)(e > rows ? rows : e);
}

/* Slice widths and offsets; SPMV_ERR_LIMIT if the padded total overflows. */
static int plan_slices(const spmv_csr *in, spmv_hll *out, spmv_error *err)
{
    out->slice_off[0] = 0;
    for (int32_t s = 0; s < out->nslices; s++) {
        int32_t r0, r1;
        slice_rows(s, out->hack_size, in->rows, &r0, &r1);
        int32_t w = 0;
        for (int32_t i = r0; i < r1; i++)
            if (in->row_ptr[i + 1] - in->row_ptr[i] > w)
                w = in->row_ptr[i + 1] - in->row_ptr[i];
        out->slice_width[s] = w;
        int64_t size = (int64_t)w * out->hack_size; /* < 2^41 */
        if (out->slice_off[s] > INT64_MAX / 2 - size)
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "HLL slot count overflows");
        out->slice_off[s + 1] = out->slice_off[s] + size;
    }
    return SPMV_OK;
}

static int alloc_failed(const spmv_csr *in, int32_t hack_size, int st, spmv_error *err)
{
    return spmv_error_set(err, st, 0, "cannot allocate an HLL of %d rows in slices of %d (%s)",
                          in->rows, hack_size, spmv_strerror(st));
}

int spmv_csr_to_hll(const spmv_csr *in, int32_t hack_size, spmv_hll *out, spmv_error *err)
{
    int st = SPMV_OK;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)))
        return st;
    if (hack_size < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "hack_size %d: must be at least 1", hack_size);
    out->rows = in->rows;
    out->cols = in->cols;
    out->dtype = in->dtype;
    out->hack_size = hack_size;
    out->nslices = (int32_t)(((int64_t)in->rows + hack_size - 1) / hack_size);
    out->slice_off = spmv_array_alloc((int64_t)out->nslices + 1, sizeof(int64_t), &st);
    out->slice_width = spmv_array_alloc(out->nslices, sizeof(int32_t), &st);
    if (!out->slice_off || !out->slice_width) {
        st = alloc_failed(in, hack_size, st, err);
        goto fail;
    }
    if ((st = plan_slices(in, out, err)))
        goto fail;
    int64_t slots = out->slice_off[out->nslices];
    out->col = spmv_array_alloc(slots, sizeof(int32_t), &st);
    out->val = spmv_array_alloc(slots, spmv_dtype_size(in->dtype), &st);
    if (!out->col || !out->val) {
        st = alloc_failed(in, hack_size, st, err);
        goto fail;
    }
    for (int32_t s = 0; s < out->nslices; s++) {
        int32_t r0, r1;
        slice_rows(s, hack_size, in->rows, &r0, &r1);
        int64_t off = out->slice_off[s];
        out->nnz += spmv_ell_fill_block(in, r0, r1, out->slice_width[s], hack_size,
                                        out->col + off, (char *)out->val + off * spmv_dtype_size(in->dtype));
    }
    return SPMV_OK;
fail:
    spmv_hll_free(out);
    return st;
}

int spmv_hll_to_coo(const spmv_hll *in, spmv_coo *out, spmv_error *err)
{
    if (in->rows < 0 || in->hack_size < 1 || (in->rows > 0 && !in->slice_off))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed HLL (%d rows, hack_size %d)",
                              in->rows, in->hack_size);
    int st = spmv_coo_alloc(out, in->rows, in->cols, spmv_ell_count_entries(in->col, hll_slots(in)), in->dtype, err);
    if (st)
        return st;
    int64_t n = 0;
    for (int32_t i = 0; i < in->rows; i++) {
        int32_t s = i / in->hack_size, r = i % in->hack_size;
        n = spmv_ell_row_to_coo(in->col, in->val, in->dtype, in->slice_off[s] + r, in->hack_size, in->slice_width[s],
                                i, out, n);
    }
    return SPMV_OK;
}
