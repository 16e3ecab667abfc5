/* precond_block.c — block_jacobi: z = blockdiag(A)^-1 r, the diagonal
 * blocks of block_size rows (1..8: a node's unknowns in a vector problem,
 * which plain Jacobi would split).
 *
 * The setup reads each diagonal block out of the host CSR (either dtype,
 * either offsets), factors it by dense LU with partial pivoting and keeps
 * its inverse, row by row: row i's block_size coefficients at i *
 * block_size, float64 whatever the matrix's dtype. An apply is then one
 * short dense dot product per row, in float64 whatever the vectors' dtype:
 * a loop on the host, one thread a row on a GPU (engine/gpu/precond.cu),
 * where the inverses are copied once. A (numerically) singular block is
 * refused, naming its first row. jacobi (precond.c) is the same apply
 * with blocks of one row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "precond_impl.h"

#define MAX_B 8

typedef struct bjacobi {
    spmv_vec inv; /* rows x b float64 on the preconditioner's device */
} bjacobi;

/* The inverse of the b x b block a (row-major, overwritten by its LU
 * factors) into inv (row-major); false when a pivot is zero next to the
 * block's largest entry (a singular block, or a zero one). */
static bool block_invert(double *a, int32_t b, double *inv)
{
    int32_t perm[MAX_B];
    double amax = 0;
    for (int32_t i = 0; i < b * b; i++)
        amax = fmax(amax, fabs(a[i]));
    for (int32_t k = 0; k < b; k++)
        perm[k] = k;
    for (int32_t k = 0; k < b; k++) {
        int32_t piv = k;
        for (int32_t i = k + 1; i < b; i++)
            if (fabs(a[i * b + k]) > fabs(a[piv * b + k]))
                piv = i;
        if (!(fabs(a[piv * b + k]) > 1e-14 * amax))
            return false;
        for (int32_t j = 0; j < b && piv != k; j++) {
            double t = a[k * b + j];
            a[k * b + j] = a[piv * b + j];
            a[piv * b + j] = t;
        }
        int32_t t = perm[k];
        perm[k] = perm[piv];
        perm[piv] = t;
        for (int32_t i = k + 1; i < b; i++) {
            a[i * b + k] /= a[k * b + k];
            for (int32_t j = k + 1; j < b; j++)
                a[i * b + j] -= a[i * b + k] * a[k * b + j];
        }
    }
    for (int32_t c = 0; c < b; c++) { /* column c of the inverse: L U x = P e_c */
        double x[MAX_B];
        for (int32_t i = 0; i < b; i++) {
            x[i] = perm[i] == c ? 1.0 : 0.0;
            for (int32_t m = 0; m < i; m++)
                x[i] -= a[i * b + m] * x[m];
        }
        for (int32_t i = b - 1; i >= 0; i--) {
            for (int32_t m = i + 1; m < b; m++)
                x[i] -= a[i * b + m] * x[m];
            x[i] /= a[i * b + i];
        }
        for (int32_t i = 0; i < b; i++)
            inv[i * b + c] = x[i];
    }
    return true;
}

/* The inverses of every diagonal block of a into inv (rows x b). */
static int invert_blocks(const spmv_csr *a, int32_t b, double *inv, spmv_error *err)
{
    double blk[MAX_B * MAX_B];
    for (int32_t s = 0; s < a->rows; s += b) {
        memset(blk, 0, sizeof blk);
        for (int32_t r = s; r < s + b; r++)
            for (int64_t p = spmv_csr_row_begin(a, r); p < spmv_csr_row_begin(a, r + 1); p++)
                if (a->col[p] >= s && a->col[p] < s + b)
                    blk[(r - s) * b + (a->col[p] - s)] += spmv_val_get(a->val, a->dtype, p);
        if (!block_invert(blk, b, inv + (size_t)s * b))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "block_jacobi: the %d x %d diagonal block at row %d is "
                                  "singular", b, b, s);
    }
    return SPMV_OK;
}

static int block_jacobi_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    int32_t b = p->o.block_size;
    bjacobi *j = precond_impl_alloc(p, sizeof *j, "block_jacobi", err);
    if (!j)
        return SPMV_ERR_NOMEM;
    int st = spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, (int64_t)a->rows * b, 1, &j->inv, err);
    if (st || (st = invert_blocks(a, b, j->inv.data, err)))
        return st;
    return precond_rows_place(ctx, p, &j->inv, err);
}

int precond_rows_place(spmv_gpu_ctx *ctx, spmv_precond *p, spmv_vec *inv, spmv_error *err)
{
    if (!ctx) {
        p->host_bytes = spmv_vec_bytes(inv);
        return SPMV_OK;
    }
    spmv_vec host = *inv;
    int st = spmv_vec_alloc(ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, host.n, 1, inv, err);
    if (!st && !(st = spmv_vec_write(ctx, inv, host.data, err)))
        p->device_bytes = spmv_vec_bytes(inv);
    spmv_vec_free(NULL, &host);
    return st;
}

int precond_rows_apply(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                       spmv_error *err)
{
    if (ctx)
        return spmv_gpu_block_jacobi_apply(ctx, inv, b, r, z, err);
    const double *iv = inv->data;
    int64_t n = r->n;
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int64_t i = 0; i < n; i++) {
        int64_t s = i - i % b;
        double v = 0;
        for (int32_t c = 0; c < b; c++)
            v += iv[i * b + c] * spmv_val_get(r->data, r->dtype, s + c);
        spmv_val_set(z->data, z->dtype, i, v);
    }
    return SPMV_OK;
}

int precond_rows_apply_k(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                         const bool *active, spmv_error *err)
{
    if (ctx)
        return spmv_gpu_block_jacobi_apply_k(ctx, inv, b, r, z, active, err);
    size_t col = (size_t)r->n * spmv_dtype_size(r->dtype);
    for (int32_t c = 0; c < r->k; c++)
        if (!active || active[c]) {
            spmv_vec rc = *r, zc = *z;
            rc.k = zc.k = 1;
            rc.data = (char *)r->data + (size_t)c * col;
            zc.data = (char *)z->data + (size_t)c * col;
            precond_rows_apply(NULL, inv, b, &rc, &zc, err);
        }
    return SPMV_OK;
}

static int block_jacobi_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    bjacobi *j = p->impl;
    return precond_rows_apply(ctx, &j->inv, p->o.block_size, r, z, err);
}

static int block_jacobi_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z,
                                const bool *active, spmv_error *err)
{
    bjacobi *j = p->impl;
    return precond_rows_apply_k(ctx, &j->inv, p->o.block_size, r, z, active, err);
}

static void block_jacobi_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    bjacobi *j = p->impl;
    if (j)
        spmv_vec_free(ctx, &j->inv);
    free(j);
}

const precond_ops precond_block_jacobi_ops = {block_jacobi_setup, block_jacobi_apply, block_jacobi_free, true,
                                              block_jacobi_apply_k, NULL};
