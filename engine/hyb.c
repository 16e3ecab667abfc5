/* hyb.c — the HYB format (ELL part + COO remainder): CSR -> HYB, HYB -> COO.
 *
 * HYB caps ELL's padding: the first `width` entries of every row go to an
 * ELL block, the rest of the longer rows to a COO list. The automatic width
 * (width < 0) is the smallest width that holds at least two thirds of the
 * rows entirely in the ELL part, i.e. the 2/3 quantile of the row lengths,
 * after the rule of thumb behind CUSP's and cuSPARSE's HYB partitioning
 * (ELL pays off while most rows fill it; the tail of long rows is cheaper
 * as COO than as padding). An explicit width above the longest row is
 * clamped to it. docs/kernels.md states the rule.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

void spmv_hyb_free(spmv_hyb *m)
{
    if (!m)
        return;
    spmv_ell_free(&m->ell);
    spmv_coo_free(&m->coo);
}

spmv_format_info spmv_hyb_info(const spmv_hyb *m)
{
    spmv_format_info e = spmv_ell_info(&m->ell), c = spmv_coo_info(&m->coo);
    int64_t nnz = m->ell.nnz + m->coo.nnz;
    int64_t slots = (int64_t)m->ell.width * m->ell.rows + m->coo.nnz;
    return spmv_info_of(e.bytes + c.bytes, slots, nnz);
}

/* The 2/3 quantile of the row lengths (0 for no rows); SPMV_ERR_NOMEM
 * leaves *width unset. */
int spmv_hyb_auto_width(const spmv_csr *in, int32_t *width, spmv_error *err)
{
    int st = SPMV_OK;
    int32_t maxw = spmv_csr_max_row(in);
    int64_t *hist = spmv_array_alloc((int64_t)maxw + 1, sizeof(int64_t), &st);
    if (!hist)
        return spmv_error_set(err, st, 0, "cannot allocate the HYB row-length histogram");
    memset(hist, 0, ((size_t)maxw + 1) * sizeof(int64_t));
    for (int32_t i = 0; i < in->rows; i++)
        hist[in->row_ptr[i + 1] - in->row_ptr[i]]++;
    int64_t need = ((int64_t)in->rows * 2 + 2) / 3; /* ceil(2 rows / 3) */
    int64_t covered = hist[0];
    int32_t w = 0;
    while (covered < need && w < maxw)
        covered += hist[++w];
    free(hist);
    *width = w;
    return SPMV_OK;
}

/* The entries past `width` of every row, as sorted COO. */
static int fill_remainder(const spmv_csr *in, int32_t width, spmv_coo *out, spmv_error *err)
{
    int64_t n = 0;
    for (int32_t i = 0; i < in->rows; i++) {
        int32_t len = in->row_ptr[i + 1] - in->row_ptr[i];
        n += len > width ? len - width : 0;
    }
    int st = spmv_coo_alloc(out, in->rows, in->cols, n, in->dtype, err);
    if (st)
        return st;
    n = 0;
    for (int32_t i = 0; i < in->rows; i++)
        for (int64_t k = (int64_t)in->row_ptr[i] + width; k < in->row_ptr[i + 1]; k++) {
            out->row[n] = i;
            out->col[n] = in->col[k];
            spmv_val_copy(out->val, n, in->val, k, in->dtype);
            n++;
        }
    return SPMV_OK;
}

int spmv_csr_to_hyb(const spmv_csr *in, int32_t width, spmv_hyb *out, spmv_error *err)
{
    int st = SPMV_OK;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)))
        return st;
    if (width < 0 && (st = spmv_hyb_auto_width(in, &width, err)))
        return st;
    int32_t maxw = spmv_csr_max_row(in);
    if (width > maxw)
        width = maxw;
    if ((st = spmv_ell_build(in, width, 0, &out->ell, err)) || (st = fill_remainder(in, width, &out->coo, err)))
        goto fail;
    return SPMV_OK;
fail:
    spmv_hyb_free(out);
    return st;
}

int spmv_hyb_to_coo(const spmv_hyb *in, spmv_coo *out, spmv_error *err)
{
    const spmv_ell *e = &in->ell;
    const spmv_coo *c = &in->coo;
    int64_t n = c->nnz + spmv_ell_count_entries(e->col, (int64_t)e->width * e->rows);
    int st = spmv_coo_alloc(out, e->rows, e->cols, n, e->dtype, err);
    if (st)
        return st;
    /* Per row: its ELL entries (its first ones), then its COO entries. */
    int64_t w = 0, ci = 0;
    for (int32_t i = 0; i < e->rows; i++) {
        w = spmv_ell_row_to_coo(e->col, e->val, e->dtype, i, e->rows, e->width, i, out, w);
        for (; ci < c->nnz && c->row[ci] == i; ci++, w++) {
            out->row[w] = i;
            out->col[w] = c->col[ci];
            spmv_val_copy(out->val, w, c->val, ci, e->dtype);
        }
    }
    if (ci != c->nnz) {
        spmv_coo_free(out);
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "HYB COO part is not sorted by row");
    }
    return SPMV_OK;
}
