/* spmspm.c — what every SpMSpM kernel shares: C = A*B on CSR operands.
 *
 * The operation (SPEC §8) multiplies a sparse A by a thin sparse B. This
 * file holds the parts that do not depend on who computes the product: the
 * operand check (A's columns must equal B's rows; the message names both
 * shapes because that is what a client needs to fix the call), the work
 * count behind GFLOPS (the multiply-adds actually done, sum over A's
 * non-zeros a_ik of B's row length k, not 2*nnz(C)), the byte count, the
 * reference product (cpu.spmspm.serial, from engine/cpu/spmspm.c), the
 * row sort applied to cuSPARSE's output, and the comparison the tests and
 * `verify` use. C's pattern is the symbolic product (see spmv.h), which is
 * what lets the comparison demand identical structure from every kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "spmv.h"

int spmv_spmspm_check(const spmv_csr *a, const spmv_csr *b, spmv_error *err)
{
    int st;
    if (a && b && ((st = spmv_csr_need_narrow(a, "SpMSpM's A", err)) || (st = spmv_csr_need_narrow(b, "SpMSpM's B", err))))
        return st;
    if (!a || !b || !a->row_ptr || !b->row_ptr)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "SpMSpM: an operand holds no CSR");
    return spmv_spmspm_check_shapes(a->rows, a->cols, a->dtype, b->rows, b->cols, b->dtype, err);
}

int spmv_spmspm_check_shapes(int32_t a_rows, int32_t a_cols, spmv_dtype a_dtype, int32_t b_rows, int32_t b_cols,
                             spmv_dtype b_dtype, spmv_error *err)
{
    if (a_cols != b_rows)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0,
                              "A is %d x %d and B is %d x %d: A's columns (%d) must equal B's rows (%d)", a_rows,
                              a_cols, b_rows, b_cols, a_cols, b_rows);
    if (a_dtype != b_dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "A is %s and B is %s: an SpMSpM needs one dtype",
                              spmv_dtype_name(a_dtype), spmv_dtype_name(b_dtype));
    return SPMV_OK;
}

int64_t spmv_spmspm_madds(const spmv_csr *a, const spmv_csr *b)
{
    int64_t n = 0;
    for (int64_t p = 0; p < a->nnz; p++) {
        int32_t k = a->col[p];
        n += (int64_t)b->row_ptr[k + 1] - b->row_ptr[k];
    }
    return n;
}

static int64_t csr_bytes(const spmv_csr *m)
{
    return ((int64_t)m->rows + 1) * 4 + m->nnz * (4 + (int64_t)spmv_dtype_size(m->dtype));
}

int64_t spmv_spmspm_bytes(const spmv_csr *a, const spmv_csr *b, const spmv_csr *c)
{
    return csr_bytes(a) + csr_bytes(b) + (c && c->row_ptr ? csr_bytes(c) : 0);
}

int spmv_spmspm_reference(const spmv_csr *a, const spmv_csr *b, spmv_csr *c, spmv_error *err)
{
    return spmv_cpu_spmspm(spmv_kernel_find("cpu.spmspm.serial"), a, b, NULL, 0, 1, c, NULL, err);
}

/* ------------------------------------------------------------ row sort */

typedef struct col_val {
    int32_t col;
    int64_t pos; /* original position: ties (none in a valid C) keep order */
} col_val;

static int by_col(const void *x, const void *y)
{
    const col_val *p = x, *q = y;
    if (p->col != q->col)
        return p->col < q->col ? -1 : 1;
    return (p->pos > q->pos) - (p->pos < q->pos);
}

static bool row_sorted(const spmv_csr *c, int32_t i)
{
    for (int32_t p = c->row_ptr[i] + 1; p < c->row_ptr[i + 1]; p++)
        if (c->col[p - 1] > c->col[p])
            return false;
    return true;
}

/* Sorts row i through `tmp` (room for the longest row) and `vtmp`. */
static void sort_row(spmv_csr *c, int32_t i, col_val *tmp, void *vtmp)
{
    int32_t b = c->row_ptr[i], n = c->row_ptr[i + 1] - b;
    for (int32_t p = 0; p < n; p++)
        tmp[p] = (col_val){c->col[b + p], b + p};
    qsort(tmp, (size_t)n, sizeof *tmp, by_col);
    for (int32_t p = 0; p < n; p++) {
        c->col[b + p] = tmp[p].col;
        spmv_val_copy(vtmp, p, c->val, tmp[p].pos, c->dtype);
    }
    memcpy((char *)c->val + (size_t)b * spmv_dtype_size(c->dtype), vtmp, (size_t)n * spmv_dtype_size(c->dtype));
}

int spmv_csr_sort_rows(spmv_csr *c, spmv_error *err)
{
    int st = SPMV_OK;
    int32_t w = spmv_csr_max_row(c);
    col_val *tmp = NULL;
    void *vtmp = NULL;
    for (int32_t i = 0; i < c->rows; i++) {
        if (row_sorted(c, i))
            continue;
        if (!tmp && (!(tmp = spmv_array_alloc(w, sizeof *tmp, &st)) ||
                     !(vtmp = spmv_array_alloc(w, spmv_dtype_size(c->dtype), &st)))) {
            st = spmv_error_set(err, st, 0, "cannot allocate a row of %d entries to sort", w);
            goto done;
        }
        sort_row(c, i, tmp, vtmp);
    }
done:
    free(tmp);
    free(vtmp);
    return st;
}

/* ----------------------------------------------------------- comparing */

static int compare_structure(const spmv_csr *c, const spmv_csr *ref, spmv_error *err)
{
    if (c->rows != ref->rows || c->cols != ref->cols || c->nnz != ref->nnz || c->dtype != ref->dtype)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "C is %d x %d with %lld non-zeros (%s), the reference %d x %d "
                              "with %lld (%s)", c->rows, c->cols, (long long)c->nnz, spmv_dtype_name(c->dtype),
                              ref->rows, ref->cols, (long long)ref->nnz, spmv_dtype_name(ref->dtype));
    for (int32_t i = 0; i <= c->rows; i++)
        if (c->row_ptr[i] != ref->row_ptr[i])
            return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "row_ptr[%d] is %d, the reference's %d", i, c->row_ptr[i],
                                  ref->row_ptr[i]);
    for (int64_t p = 0; p < c->nnz; p++)
        if (c->col[p] != ref->col[p])
            return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "entry %lld: column %d, the reference's %d", (long long)p,
                                  c->col[p], ref->col[p]);
    return SPMV_OK;
}

int spmv_csr_compare(const spmv_csr *c, const spmv_csr *ref, double *max_rel_err, spmv_error *err)
{
    int st = compare_structure(c, ref, err);
    double worst = 0, scale = 0;
    if (st)
        return st;
    for (int64_t p = 0; p < ref->nnz; p++)
        scale = fmax(scale, fabs(spmv_val_get(ref->val, ref->dtype, p)));
    scale = fmax(scale, 1e-300);
    for (int64_t p = 0; p < c->nnz; p++) {
        double d = fabs(spmv_val_get(c->val, c->dtype, p) - spmv_val_get(ref->val, ref->dtype, p));
        if (isnan(d)) /* a NaN in C (or only in ref) is as wrong as it gets */
            d = INFINITY;
        worst = fmax(worst, d / scale);
    }
    if (max_rel_err)
        *max_rel_err = worst;
    return SPMV_OK;
}
