/* csr.c — the CSR format: freeing, byte count, CSR -> COO.
 *
 * CSR is the format every matrix is held in (spmv_matrix always has it) and
 * the source of every other conversion (ell.c, hll.c, hyb.c read it); going
 * back to COO is the inverse of spmv_coo_to_csr and is what the round-trip
 * tests compare.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

void spmv_csr_free(spmv_csr *m)
{
    if (!m)
        return;
    free(m->row_ptr);
    free(m->col);
    free(m->val);
    memset(m, 0, sizeof *m);
}

spmv_format_info spmv_csr_info(const spmv_csr *m)
{
    spmv_format_info info = {
        .bytes = ((size_t)m->rows + 1) * sizeof(int32_t) +
                 (size_t)m->nnz * (sizeof(int32_t) + spmv_dtype_size(m->dtype)),
        .padding_ratio = 1.0,
    };
    return info;
}

int spmv_csr_to_coo(const spmv_csr *in, spmv_coo *out, spmv_error *err)
{
    int st = spmv_check_shape(in->rows, in->cols, in->nnz, err);
    if (st)
        return st;
    if ((st = spmv_coo_alloc(out, in->rows, in->cols, in->nnz, in->dtype, err)))
        return st;
    for (int32_t i = 0; i < in->rows; i++)
        for (int32_t k = in->row_ptr[i]; k < in->row_ptr[i + 1]; k++)
            out->row[k] = i;
    memcpy(out->col, in->col, (size_t)in->nnz * sizeof(int32_t));
    memcpy(out->val, in->val, (size_t)in->nnz * spmv_dtype_size(in->dtype));
    return SPMV_OK;
}
