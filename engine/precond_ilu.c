/* precond_ilu.c — ic0 and ilu0: the incomplete factorisations with zero
 * fill, z = (L L^T)^-1 r and z = (L U)^-1 r.
 *
 * Both keep A's pattern: ilu0 factors all of A in place (L unit lower
 * below the diagonal, U on and above it: the classic IKJ ILU(0) of Saad,
 * Iterative Methods, alg. 10.4), ic0 the lower triangle only (L L^T with
 * L on A's lower pattern, row by row: l_ik = (a_ik - sum_j<k l_ij l_kj) /
 * l_kk, l_ii = sqrt(a_ii - sum_j<i l_ij^2)). An apply is a forward and a
 * backward triangular solve. ic0 is symmetric (CG may use it on an SPD
 * matrix); ilu0 is not.
 *
 * The setup copies the pattern in float64 (the lower triangle for ic0),
 * checking that each row's columns are sorted and hold the diagonal. On
 * the host it factors the copy here; for a GPU it hands the copy to
 * engine/gpu/precond.cu, where cuSPARSE factors it (csric02, csrilu02) in
 * float64 or, with "precision": "float32", float32, and keeps nothing on
 * the host. A zero pivot (ic0: a non-positive one) is SPMV_ERR_INVALID
 * naming its row, on either side. The host's factors stay float64.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "precond_impl.h"

typedef struct ilu {
    bool lower;          /* ic0: f is L (the lower triangle); ilu0: f is L\U on A's pattern */
    spmv_csr f;          /* the host's factors, float64 */
    int32_t *diag;       /* each row's diagonal position in f */
    precond_staging st;  /* float32 vectors on the host: through float64 */
    spmv_gpu_ilu *g;     /* the device's factors */
} ilu;

/* m's pattern in float64: the lower triangle of a (lower) or all of it,
 * with each row's diagonal position in diag. */
static int pattern_copy(const spmv_csr *a, bool lower, spmv_csr *m, int32_t *diag, spmv_error *err)
{
    const char *name = lower ? "ic0" : "ilu0";
    if (spmv_csr_wide(a))
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s: a matrix of %lld non-zeros (64-bit row offsets) is beyond "
                              "its 32-bit indices", name, (long long)a->nnz);
    int st = SPMV_OK;
    memset(m, 0, sizeof *m);
    m->rows = m->cols = a->rows;
    m->dtype = SPMV_FLOAT64;
    m->row_ptr = spmv_array_alloc((int64_t)a->rows + 1, sizeof(int32_t), &st);
    m->col = spmv_array_alloc(a->nnz, sizeof(int32_t), &st);
    m->val = spmv_array_alloc(a->nnz, sizeof(double), &st);
    if (!m->row_ptr || !m->col || !m->val)
        return spmv_error_set(err, st ? st : SPMV_ERR_NOMEM, 0, "%s: out of memory for the factors", name);
    int64_t e = 0;
    m->row_ptr[0] = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        diag[i] = -1;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1] && !(lower && a->col[p] > i); p++) {
            if (p > a->row_ptr[i] && a->col[p] <= a->col[p - 1])
                return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: row %d's columns are not sorted and distinct",
                                      name, i);
            if (a->col[p] == i)
                diag[i] = (int32_t)e;
            m->col[e] = a->col[p];
            ((double *)m->val)[e++] = spmv_val_get(a->val, a->dtype, p);
        }
        if (diag[i] < 0)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: row %d has no diagonal entry (a factorisation with "
                                  "no fill needs every diagonal in the pattern)", name, i);
        m->row_ptr[i + 1] = (int32_t)e;
    }
    m->nnz = e;
    return SPMV_OK;
}

/* ILU(0) in place, IKJ: row i eliminated by the rows k < i of its pattern,
 * updates kept to row i's pattern (pos: column -> position in row i, or
 * -1). */
static int ilu0_factor(spmv_csr *f, const int32_t *diag, int32_t *pos, spmv_error *err)
{
    double *v = f->val;
    for (int32_t i = 0; i < f->rows; i++) {
        int32_t b = f->row_ptr[i], e = f->row_ptr[i + 1];
        for (int32_t p = b; p < e; p++)
            pos[f->col[p]] = p;
        for (int32_t p = b; p < diag[i]; p++) {
            int32_t k = f->col[p];
            v[p] /= v[diag[k]];
            for (int32_t q = diag[k] + 1; q < f->row_ptr[k + 1]; q++)
                if (pos[f->col[q]] >= 0)
                    v[pos[f->col[q]]] -= v[p] * v[q];
        }
        for (int32_t p = b; p < e; p++)
            pos[f->col[p]] = -1;
        if (v[diag[i]] == 0.0 || !isfinite(v[diag[i]]))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "ilu0: zero pivot at row %d (u_ii = %g): A has no "
                                  "incomplete LU factorisation without pivoting", i, v[diag[i]]);
    }
    return SPMV_OK;
}

/* IC(0) in place on the lower triangle f, row by row (pos as above). */
static int ic0_factor(spmv_csr *f, const int32_t *diag, int32_t *pos, spmv_error *err)
{
    double *v = f->val;
    for (int32_t i = 0; i < f->rows; i++) {
        int32_t b = f->row_ptr[i];
        for (int32_t p = b; p < diag[i]; p++)
            pos[f->col[p]] = p;
        double d = v[diag[i]];
        for (int32_t p = b; p < diag[i]; p++) {
            int32_t k = f->col[p];
            double s = v[p];
            for (int32_t q = f->row_ptr[k]; q < diag[k]; q++)
                if (pos[f->col[q]] >= 0)
                    s -= v[pos[f->col[q]]] * v[q];
            v[p] = s / v[diag[k]];
            d -= v[p] * v[p];
        }
        for (int32_t p = b; p < diag[i]; p++)
            pos[f->col[p]] = -1;
        if (!(d > 0.0) || !isfinite(d))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "ic0: zero or negative pivot at row %d (%g): A is not "
                                  "positive definite enough for an incomplete Cholesky factorisation", i, d);
        v[diag[i]] = sqrt(d);
    }
    return SPMV_OK;
}

static int host_factor(ilu *u, spmv_error *err)
{
    int32_t *pos = malloc(((size_t)u->f.rows + 1) * sizeof *pos);
    if (!pos)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of memory", u->lower ? "ic0" : "ilu0");
    for (int32_t i = 0; i < u->f.rows; i++)
        pos[i] = -1;
    int st = u->lower ? ic0_factor(&u->f, u->diag, pos, err) : ilu0_factor(&u->f, u->diag, pos, err);
    free(pos);
    return st;
}

static int factor_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, bool lower, spmv_error *err)
{
    ilu *u = calloc(1, sizeof *u);
    p->impl = u;
    if (!u || !(u->diag = malloc(((size_t)a->rows + 1) * sizeof *u->diag)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of memory", lower ? "ic0" : "ilu0");
    u->lower = lower;
    int st = pattern_copy(a, lower, &u->f, u->diag, err);
    if (st)
        return st;
    if (!ctx) {
        p->host_bytes = ((size_t)u->f.rows + 1) * 8 + (size_t)u->f.nnz * 12;
        return host_factor(u, err);
    }
    st = spmv_gpu_ilu_setup(ctx, &u->f, lower, p->o.float32 ? SPMV_FLOAT32 : SPMV_FLOAT64, &u->g, err);
    if (st == SPMV_OK)
        p->device_bytes = spmv_gpu_ilu_bytes(u->g);
    spmv_csr_free(&u->f); /* the device holds the factors now */
    free(u->diag);
    u->diag = NULL;
    return st;
}

static int ic0_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    return factor_setup(ctx, p, a, true, err);
}

static int ilu0_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    return factor_setup(ctx, p, a, false, err);
}

/* z = (L L^T)^-1 r or (L U)^-1 r on the host: forward, then backward
 * (L^T by columns: row i of L scattered once z_i is known). */
static void solve(void *arg, const double *r, double *z)
{
    const ilu *u = arg;
    const spmv_csr *f = &u->f;
    const double *v = f->val;
    int32_t n = f->rows;
    for (int32_t i = 0; i < n; i++) {
        double s = r[i];
        for (int32_t p = f->row_ptr[i]; p < u->diag[i]; p++)
            s -= v[p] * z[f->col[p]];
        z[i] = u->lower ? s / v[u->diag[i]] : s;
    }
    for (int32_t i = n - 1; i >= 0; i--) {
        if (u->lower) {
            z[i] /= v[u->diag[i]];
            for (int32_t p = f->row_ptr[i]; p < u->diag[i]; p++)
                z[f->col[p]] -= v[p] * z[i];
            continue;
        }
        double s = z[i];
        for (int32_t p = u->diag[i] + 1; p < f->row_ptr[i + 1]; p++)
            s -= v[p] * z[f->col[p]];
        z[i] = s / v[u->diag[i]];
    }
}

static int factor_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    ilu *u = p->impl;
    if (ctx)
        return spmv_gpu_ilu_apply(ctx, u->g, r, z, err);
    return precond_host_f64(r, z, &u->st, solve, u, err);
}

static void factor_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    ilu *u = p->impl;
    if (!u)
        return;
    spmv_gpu_ilu_free(ctx, u->g);
    spmv_csr_free(&u->f);
    free(u->diag);
    precond_staging_free(&u->st);
    free(u);
}

const precond_ops precond_ic0_ops = {ic0_setup, factor_apply, factor_free, true, NULL, NULL};
const precond_ops precond_ilu0_ops = {ilu0_setup, factor_apply, factor_free, false, NULL, NULL};
