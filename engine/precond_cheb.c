/* precond_cheb.c — chebyshev: z = p(D^-1 A) D^-1 r, the Chebyshev
 * polynomial of the given degree (1..10) in the Jacobi-scaled matrix that
 * is smallest on [rho/30, 1.1 rho], rho the spectral radius of D^-1 A.
 *
 * It is AMG's Chebyshev smoother used alone: one sweep from z = 0 on
 * A z = r, so the setup is engine/amg.c's for one level
 * (spmv_amg_level_init: a float64 copy of A, 1/diag, rho by Lanczos,
 * spmv_amg_spectral_radius) and the apply is spmv_amg_chebyshev on the host or the same
 * sweep on a GPU (spmv_gpu_amg_upload_smoother: A as a device CSR with a
 * cuSPARSE descriptor, the sweep's fused kernels). The polynomial is fixed
 * by rho and the degree, so it is symmetric where A is: CG may use it.
 *
 * The preconditioner keeps its own copy of A (the host's or the device's),
 * so the caller's CSR need not outlive the setup; a GPU one keeps nothing
 * on the host.
 */
#include <stdlib.h>

#include "precond_impl.h"

typedef struct cheb {
    spmv_amg_level lv;   /* the host's level (a host preconditioner only) */
    spmv_gpu_amg *g;     /* the device's copy of it */
    int32_t degree;
    precond_staging st;  /* float32 vectors on the host: through float64 */
    precond_staging_k kst; /* k columns on the host: the active ones, in float64 */
    double *kwork;       /* the k-column sweep's four blocks (spmv_amg_chebyshev_k) */
    size_t kwork_len;    /* doubles */
} cheb;

static int chebyshev_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    cheb *c = precond_impl_alloc(p, sizeof *c, "chebyshev", err);
    if (!c)
        return SPMV_ERR_NOMEM;
    c->degree = p->o.degree;
    int st = spmv_amg_level_init(a, &c->lv, err);
    if (st)
        return st;
    p->rho = c->lv.rho;
    if (!ctx) {
        p->host_bytes = ((size_t)a->rows + 1) * 4 + (size_t)a->nnz * 12 + (size_t)a->rows * 5 * 8;
        return SPMV_OK;
    }
    st = spmv_gpu_amg_upload_smoother(ctx, &c->lv, c->degree, &c->g, err);
    if (st == SPMV_OK)
        p->device_bytes = spmv_gpu_amg_bytes(c->g);
    spmv_amg_level_free(&c->lv); /* the device holds A now */
    return st;
}

static void sweep(void *arg, const double *r, double *z)
{
    cheb *c = arg;
    spmv_amg_chebyshev(&c->lv, c->degree, r, z, true);
}

/* One sweep; on a GPU its residuals by `fine` where it is lent (NULL: the
 * object's own copy of A). */
static int chebyshev_apply_with(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_gpu_product *fine, const spmv_vec *r,
                                spmv_vec *z, spmv_error *err)
{
    cheb *c = p->impl;
    if (ctx)
        return spmv_gpu_amg_vcycle_with(ctx, c->g, fine, r, z, err);
    return precond_host_f64(r, z, &c->st, sweep, c, err);
}

static int chebyshev_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    return chebyshev_apply_with(ctx, p, NULL, r, z, err);
}

/* The sweep on k columns at once (spmv_amg_chebyshev_k), its work blocks
 * kept and grown. */
static int sweep_k(void *arg, int32_t k, const double *r, double *z, spmv_error *err)
{
    cheb *c = arg;
    size_t nk = (size_t)c->lv.A.rows * (size_t)k;
    if (4 * nk > c->kwork_len) {
        double *w = realloc(c->kwork, (nk ? 4 * nk : 1) * sizeof *w);
        if (!w)
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "chebyshev: out of memory for %d columns' work", k);
        c->kwork = w;
        c->kwork_len = 4 * nk;
    }
    double *w = c->kwork;
    spmv_amg_chebyshev_k(&c->lv, c->degree, k, r, z, w, w + nk, w + 2 * nk, w + 3 * nk);
    return SPMV_OK;
}

static int chebyshev_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                             spmv_error *err)
{
    cheb *c = p->impl;
    if (ctx)
        return spmv_gpu_amg_vcycle_k(ctx, c->g, r, z, active, err);
    return precond_host_f64_k(r, z, active, &c->kst, sweep_k, c, err);
}

static void chebyshev_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    cheb *c = p->impl;
    if (!c)
        return;
    spmv_gpu_amg_free(ctx, c->g);
    spmv_amg_level_free(&c->lv);
    precond_staging_free(&c->st);
    precond_staging_k_free(&c->kst);
    free(c->kwork);
    free(c);
}

const precond_ops precond_chebyshev_ops = {chebyshev_setup, chebyshev_apply, chebyshev_free, true,
                                           chebyshev_apply_k, chebyshev_apply_with};
